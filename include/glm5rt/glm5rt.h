/*
 * glm5rt.h - the C ABI of libglm5rt, an embeddable runtime for GLM-5 (glm_moe_dsa).
 *
 * This header is the manual. It is C99, uses only fixed-width types and opaque handles, and is the
 * only public header of the library (glm5rt.hpp holds header-only C++ wrappers over it).
 *
 * ---------------------------------------------------------------------------------------------
 * Usage (error handling shortened; every function returns a glm5rt_status, 0 = GLM5RT_OK)
 * ---------------------------------------------------------------------------------------------
 *
 *   glm5rt_model* model = NULL;
 *   glm5rt_model_params mp;
 *   glm5rt_model_default_params(&mp);
 *   if (glm5rt_model_load("models/glm5-demo", &mp, &model) != GLM5RT_OK) {
 *       fprintf(stderr, "load failed: %s\n", glm5rt_last_error());
 *       return 1;
 *   }
 *   glm5rt_tokenizer* tok = NULL;
 *   glm5rt_tokenizer_from_model(model, &tok);
 *
 *   glm5rt_session* s = NULL;
 *   glm5rt_session_params sp;
 *   glm5rt_session_default_params(&sp);
 *   glm5rt_session_create(model, &sp, &s);
 *   glm5rt_model_free(model);             // safe: the session keeps the model alive
 *
 *   int32_t ids[512]; size_t n = 0;
 *   glm5rt_tokenize(tok, prompt, strlen(prompt), GLM5RT_TOKENIZE_PARSE_SPECIAL, ids, 512, &n);
 *   glm5rt_session_append(s, ids, n, NULL);   // prefill; logits of the last position are ready
 *
 *   glm5rt_sampler_params sampler;
 *   glm5rt_sampler_default_params(&sampler);  // greedy unless you set temperature > 0
 *   glm5rt_detok_stream* stream = NULL;
 *   glm5rt_detok_stream_create(tok, &stream);
 *   for (int i = 0; i < 256; ++i) {
 *       int32_t next;
 *       if (glm5rt_session_step(s, &sampler, &next) != GLM5RT_OK) break;   // sample + append
 *       if (glm5rt_tokenizer_is_eos(tok, next)) break;
 *       char text[64]; size_t len = 0;
 *       glm5rt_detok_stream_push(stream, next, text, sizeof text, &len);  // whole UTF-8 only
 *       fwrite(text, 1, len, stdout);
 *   }
 *   glm5rt_detok_stream_free(stream);
 *   glm5rt_session_free(s);
 *   glm5rt_tokenizer_free(tok);
 *
 * ---------------------------------------------------------------------------------------------
 * Thread rules
 * ---------------------------------------------------------------------------------------------
 * - Global functions (version, status strings, logging set-up, default params) are thread-safe.
 * - A glm5rt_model and a glm5rt_tokenizer are immutable after creation: any number of threads may use
 *   them at once (loading itself is one call on one thread).
 * - A glm5rt_session (and a glm5rt_detok_stream) is used by one thread at a time; it may move between
 *   threads. The one exception is glm5rt_session_cancel(), which any thread (or a signal handler) may
 *   call at any time.
 * - glm5rt_last_error() is per thread: it describes the last failed call made on the calling thread.
 *
 * ---------------------------------------------------------------------------------------------
 * Errors, ownership, memory
 * ---------------------------------------------------------------------------------------------
 * - Every function that can fail returns glm5rt_status. On failure out-parameters are left untouched
 *   (except the size-query outputs documented as such) and glm5rt_last_error() holds a message.
 * - The library never aborts, asserts or exits on bad input; no C++ exception crosses this boundary.
 * - Pointer arguments are BORROWED for the duration of the call unless stated otherwise. Pointers the
 *   library returns are valid until the next call on the same handle, unless stated otherwise.
 * - Every create has a free that returns void and accepts NULL. Sessions and tokenizers hold a
 *   reference on their model, so handles may be freed in any order.
 * - Params structs begin with struct_size: fill them with the matching *_default_params() (which sets
 *   struct_size to the size this header knows), then change fields. The library reads only struct_size
 *   bytes and uses defaults for fields an older caller does not know. Structs only ever grow at the end.
 * - Variable-size outputs use the size-query idiom: pass buf = NULL, capacity = 0 to learn the size
 *   (status GLM5RT_OK, *out_len = the size); a too-small buffer gives GLM5RT_ERR_BUFFER_TOO_SMALL with
 *   *out_len set to the size needed (the one out-parameter written on that error).
 */
#ifndef GLM5RT_H
#define GLM5RT_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define GLM5RT_API __declspec(dllexport)
#elif defined(__GNUC__)
#define GLM5RT_API __attribute__((visibility("default")))
#else
#define GLM5RT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------- versions ------------------------------------------------- */

#define GLM5RT_VERSION_MAJOR 0
#define GLM5RT_VERSION_MINOR 1
#define GLM5RT_VERSION_PATCH 0
#define GLM5RT_VERSION_STRING "0.1.0"
/* The ABI major version: the shared library's SOVERSION (libglm5rt.so.0). It changes only when a
 * symbol is removed or a struct/enum value changes meaning; see docs/ABI.md. */
#define GLM5RT_ABI_VERSION 0

/* The library's version string, e.g. "0.1.0" (static storage). */
GLM5RT_API const char* glm5rt_version(void);
/* The library's ABI major version; compare with GLM5RT_ABI_VERSION to detect a mismatched .so. */
GLM5RT_API int32_t glm5rt_abi_version(void);

/* ----------------------------------- status codes --------------------------------------------- */

/* Pinned values: a code is never renumbered or reused. */
typedef int32_t glm5rt_status;
enum {
    GLM5RT_OK = 0,
    GLM5RT_ERR_INVALID_ARGUMENT = 1, /* NULL where a pointer is required, value out of range */
    GLM5RT_ERR_UNSUPPORTED = 2,      /* not implemented (yet) or not available in this build */
    GLM5RT_ERR_IO = 3,               /* a file could not be opened, read, mapped or written */
    GLM5RT_ERR_FORMAT = 4,           /* malformed checkpoint, config, tokenizer or snapshot */
    GLM5RT_ERR_OUT_OF_MEMORY = 5,    /* host or device allocation failed */
    GLM5RT_ERR_CACHE_FULL = 6,       /* the session's cache cannot hold the tokens; state unchanged */
    GLM5RT_ERR_CANCELLED = 7,        /* cancelled by a callback or glm5rt_session_cancel(); state unchanged */
    GLM5RT_ERR_DEVICE = 8,           /* a GPU runtime error (CUDA, cuBLAS, NCCL) */
    GLM5RT_ERR_NO_DEVICE = 9,        /* a GPU backend was requested but no usable GPU is present */
    GLM5RT_ERR_MISMATCH = 10,        /* a snapshot or object belongs to another model / version */
    GLM5RT_ERR_BUFFER_TOO_SMALL = 11,/* see the size-query idiom above */
    GLM5RT_ERR_NOT_FOUND = 12,       /* a looked-up name (token, tensor, file) does not exist */
    GLM5RT_ERR_STATE = 13,           /* the call is not valid in the object's current state */
    GLM5RT_ERR_INTERNAL = 14         /* a bug in the library: please report it with the message */
};

/* A short static English description of a status code ("invalid argument"); never NULL. */
GLM5RT_API const char* glm5rt_status_string(glm5rt_status status);

/* The message of the last failed call on this thread ("" if none). Valid until the next failing
 * call on this thread. Never NULL. */
GLM5RT_API const char* glm5rt_last_error(void);

/* ----------------------------------- logging -------------------------------------------------- */

enum {
    GLM5RT_LOG_ERROR = 0,
    GLM5RT_LOG_WARN = 1,
    GLM5RT_LOG_INFO = 2,
    GLM5RT_LOG_DEBUG = 3
};

/* Receives one whole line (no trailing newline, NUL-terminated, borrowed for the call) with its level.
 * Called on whichever thread logs; calls are serialized by the library (never two at once). */
typedef void (*glm5rt_log_fn)(int32_t level, const char* line, void* user_data);

/* Installs the process-wide log sink. NULL restores the default (lines of level <= WARN to stderr).
 * Thread-safe. */
GLM5RT_API void glm5rt_set_log_callback(glm5rt_log_fn fn, void* user_data);
/* Lines above this level are dropped before formatting (default GLM5RT_LOG_WARN). Thread-safe. */
GLM5RT_API void glm5rt_set_log_level(int32_t level);

/* ----------------------------------- enumerations --------------------------------------------- */

enum { GLM5RT_BACKEND_AUTO = 0, GLM5RT_BACKEND_CPU = 1, GLM5RT_BACKEND_CUDA = 2 };

enum {
    GLM5RT_DTYPE_AUTO = -1, /* let the library choose (cache: f32 on the CPU, bf16 on CUDA) */
    GLM5RT_DTYPE_F32 = 0,
    GLM5RT_DTYPE_BF16 = 1,
    GLM5RT_DTYPE_F16 = 2,
    GLM5RT_DTYPE_FP8_E4M3 = 3
};

/* ----------------------------------- model ---------------------------------------------------- */

typedef struct glm5rt_model glm5rt_model;

/* Progress of a long operation, fraction in [0, 1]. Return 1 to continue, 0 to cancel (the call then
 * fails with GLM5RT_ERR_CANCELLED and leaves nothing behind). Called on the loading thread. */
typedef int32_t (*glm5rt_progress_fn)(float fraction, void* user_data);

typedef struct glm5rt_model_params {
    uint32_t struct_size;   /* sizeof(glm5rt_model_params), set by glm5rt_model_default_params */
    int32_t backend;        /* GLM5RT_BACKEND_*; default AUTO = CUDA if a usable GPU exists, else CPU */
    int32_t device_index;   /* CUDA device ordinal; default 0 */
    int32_t n_threads;      /* CPU threads; 0 = all hardware threads (default) */
    glm5rt_progress_fn progress; /* optional, NULL = none */
    void* progress_user_data;
} glm5rt_model_params;

GLM5RT_API void glm5rt_model_default_params(glm5rt_model_params* params);

/* Loads config.json and the safetensors weights (single file or sharded with
 * model.safetensors.index.json) from directory `dir`, plus tokenizer.json when present.
 * params may be NULL (defaults). On success *out_model owns a new model (free with glm5rt_model_free).
 * Errors: INVALID_ARGUMENT, IO, FORMAT (the message names the file, tensor or field), OUT_OF_MEMORY,
 * CANCELLED, NO_DEVICE (CUDA requested but absent), UNSUPPORTED. */
GLM5RT_API glm5rt_status glm5rt_model_load(const char* dir, const glm5rt_model_params* params,
                                           glm5rt_model** out_model);

/* Drops the caller's reference; the model is destroyed once no session or tokenizer uses it. */
GLM5RT_API void glm5rt_model_free(glm5rt_model* model);

typedef struct glm5rt_model_info {
    uint32_t struct_size;      /* set by the caller to sizeof(glm5rt_model_info) */
    int32_t n_layers;          /* decoder layers (without the MTP layer) */
    int32_t n_vocab;
    int32_t hidden_size;
    int32_t n_heads;
    int32_t n_routed_experts;
    int32_t n_experts_per_token;
    int32_t n_dense_layers;
    int32_t kv_lora_rank;
    int32_t qk_rope_head_dim;
    int32_t index_topk;
    int32_t weight_dtype;      /* GLM5RT_DTYPE_* of the projection weights as stored */
    int32_t backend;           /* GLM5RT_BACKEND_CPU or _CUDA: the backend actually in use */
    int64_t context_length;    /* max_position_embeddings */
    int64_t n_params;          /* parameters in the stored decoder (MTP layer excluded) */
    int64_t weight_bytes;      /* bytes of all stored tensors (scales included) */
    int32_t n_eos;             /* number of valid entries in eos_ids */
    int32_t eos_ids[8];
} glm5rt_model_info;

/* Fills *info (reading info->struct_size first; fields past it are not written). */
GLM5RT_API glm5rt_status glm5rt_model_get_info(const glm5rt_model* model, glm5rt_model_info* info);

/* ----------------------------------- tokenizer ------------------------------------------------ */

typedef struct glm5rt_tokenizer glm5rt_tokenizer;

/* Loads tokenizer.json (and tokenizer_config.json when present) from directory `dir`. */
GLM5RT_API glm5rt_status glm5rt_tokenizer_load(const char* dir, glm5rt_tokenizer** out_tokenizer);
/* A new handle on the model's tokenizer (NOT_FOUND if the model directory had no tokenizer.json).
 * The handle keeps the model's tokenizer data alive; free it with glm5rt_tokenizer_free. */
GLM5RT_API glm5rt_status glm5rt_tokenizer_from_model(const glm5rt_model* model,
                                                     glm5rt_tokenizer** out_tokenizer);
GLM5RT_API void glm5rt_tokenizer_free(glm5rt_tokenizer* tokenizer);

/* Vocabulary size including added tokens (largest id + 1). */
GLM5RT_API int32_t glm5rt_tokenizer_vocab_size(const glm5rt_tokenizer* tokenizer);
/* 1 if `token` is an end-of-generation id (eos ids of config.json / generation_config.json), else 0. */
GLM5RT_API int32_t glm5rt_tokenizer_is_eos(const glm5rt_tokenizer* tokenizer, int32_t token);

enum {
    GLM5RT_TOKENIZE_PARSE_SPECIAL = 1 /* match added/special tokens in the text (e.g. "<|user|>") */
};

/* Encodes UTF-8 `text` (text_len bytes, need not be NUL-terminated) into token ids, size-query idiom:
 * tokens may be NULL when capacity is 0. Invalid UTF-8 gives GLM5RT_ERR_INVALID_ARGUMENT. */
GLM5RT_API glm5rt_status glm5rt_tokenize(const glm5rt_tokenizer* tokenizer, const char* text,
                                         size_t text_len, uint32_t flags, int32_t* tokens,
                                         size_t capacity, size_t* out_n_tokens);

enum {
    GLM5RT_DETOKENIZE_SKIP_SPECIAL = 1 /* leave out special tokens */
};

/* Decodes ids to UTF-8 text (not NUL-terminated; out_len bytes), size-query idiom. Byte sequences that
 * are not valid UTF-8 come out as U+FFFD, as Hugging Face tokenizers do. */
GLM5RT_API glm5rt_status glm5rt_detokenize(const glm5rt_tokenizer* tokenizer, const int32_t* tokens,
                                           size_t n_tokens, uint32_t flags, char* buf,
                                           size_t capacity, size_t* out_len);

/* The raw bytes one token stands for (may be an incomplete UTF-8 sequence), size-query idiom. */
GLM5RT_API glm5rt_status glm5rt_token_to_piece(const glm5rt_tokenizer* tokenizer, int32_t token,
                                               char* buf, size_t capacity, size_t* out_len);

/* The id of an added/special token given its exact text (e.g. "<|assistant|>"): NOT_FOUND if none. */
GLM5RT_API glm5rt_status glm5rt_token_lookup(const glm5rt_tokenizer* tokenizer, const char* text,
                                             size_t text_len, int32_t* out_token);

/* One chat message. role is "system", "user", "assistant" or "observation" (tool result; "tool" is
 * accepted as a synonym). content is UTF-8. For an assistant message, reasoning (may be NULL) is its
 * thinking text and tool_calls_json (may be NULL) a JSON array [{"name": ..., "arguments": {...}}].
 * This struct is frozen: a future version adds glm5rt_chat_message_v2 instead of changing it. */
typedef struct glm5rt_chat_message {
    const char* role;
    const char* content;
    const char* reasoning;
    const char* tool_calls_json;
} glm5rt_chat_message;

enum {
    GLM5RT_CHAT_ADD_GENERATION_PROMPT = 1, /* end with <|assistant|> and the thinking tag */
    GLM5RT_CHAT_THINKING_OFF = 2            /* "</think>" after <|assistant|> instead of "<think>" */
};

/* Renders messages in the GLM-5 chat format ("[gMASK]<sop><|system|>...<|user|>...<|assistant|>")
 * as UTF-8 text (tokenize it with GLM5RT_TOKENIZE_PARSE_SPECIAL), size-query idiom. */
GLM5RT_API glm5rt_status glm5rt_chat_format(const glm5rt_tokenizer* tokenizer,
                                            const glm5rt_chat_message* messages, size_t n_messages,
                                            uint32_t flags, char* buf, size_t capacity,
                                            size_t* out_len);

/* Incremental decoding for streaming: each push returns only complete UTF-8 text; bytes of an
 * incomplete code point are held back until the token that completes it. The concatenation of all
 * pushes and the final flush equals glm5rt_detokenize() of the same ids. */
typedef struct glm5rt_detok_stream glm5rt_detok_stream;
GLM5RT_API glm5rt_status glm5rt_detok_stream_create(const glm5rt_tokenizer* tokenizer,
                                                    glm5rt_detok_stream** out_stream);
GLM5RT_API void glm5rt_detok_stream_free(glm5rt_detok_stream* stream);
/* Adds one token; writes the newly completed text (size-query idiom; on BUFFER_TOO_SMALL the token is
 * not consumed, so the call can be repeated with a larger buffer). */
GLM5RT_API glm5rt_status glm5rt_detok_stream_push(glm5rt_detok_stream* stream, int32_t token,
                                                  char* buf, size_t capacity, size_t* out_len);
/* Writes whatever is held back (incomplete bytes become U+FFFD) and resets the stream. */
GLM5RT_API glm5rt_status glm5rt_detok_stream_flush(glm5rt_detok_stream* stream, char* buf,
                                                   size_t capacity, size_t* out_len);

/* ----------------------------------- sessions ------------------------------------------------- */

typedef struct glm5rt_session glm5rt_session;

typedef struct glm5rt_session_params {
    uint32_t struct_size;   /* sizeof(glm5rt_session_params), set by glm5rt_session_default_params */
    int64_t max_tokens;     /* most tokens this session may hold; 0 = the model's context length */
    int64_t cache_bytes;    /* cache budget in bytes; 0 = enough for max_tokens (on CUDA capped at about
                               half of the device memory free when the session is created). A request beyond the
                               budget fails with GLM5RT_ERR_CACHE_FULL and changes nothing */
    int32_t page_size;      /* tokens per cache page; default 64 */
    int32_t cache_dtype;    /* GLM5RT_DTYPE_* of latent records; default AUTO */
    int32_t index_cache_dtype; /* GLM5RT_DTYPE_* of indexer keys; default AUTO */
    int32_t prefill_chunk;  /* longest piece of a prompt computed in one forward; default 512 */
    uint64_t seed;          /* sampling RNG seed; default 0x5eed */
} glm5rt_session_params;

GLM5RT_API void glm5rt_session_default_params(glm5rt_session_params* params);

/* Creates an empty session on `model` (params may be NULL). The session holds a reference on the model. */
GLM5RT_API glm5rt_status glm5rt_session_create(glm5rt_model* model,
                                               const glm5rt_session_params* params,
                                               glm5rt_session** out_session);
GLM5RT_API void glm5rt_session_free(glm5rt_session* session);

/* Appends tokens (prefill, chunked internally) and computes the logits of the last position.
 * all_logits may be NULL; otherwise it receives n_tokens x n_vocab floats, the logits of every
 * appended position (row-major). On any error the session is exactly as before the call. */
GLM5RT_API glm5rt_status glm5rt_session_append(glm5rt_session* session, const int32_t* tokens,
                                               size_t n_tokens, float* all_logits);

/* The logits of the last position (n_vocab floats), valid until the next call on the session.
 * STATE if the session holds no tokens. */
GLM5RT_API glm5rt_status glm5rt_session_logits(glm5rt_session* session, const float** out_logits,
                                               int32_t* out_n_vocab);

/* Number of tokens the session holds; copies them with the size-query idiom. */
GLM5RT_API int64_t glm5rt_session_n_tokens(const glm5rt_session* session);
GLM5RT_API glm5rt_status glm5rt_session_tokens(const glm5rt_session* session, int32_t* tokens,
                                               size_t capacity, size_t* out_n_tokens);

/* Forgets every token (keeps the cache memory and the RNG stream). */
GLM5RT_API glm5rt_status glm5rt_session_reset(glm5rt_session* session);
/* Keeps the first n_keep tokens (0 <= n_keep <= held tokens, else INVALID_ARGUMENT) and drops the rest;
 * the logits become those of the new last position. n_keep 0 is the same as glm5rt_session_reset. */
GLM5RT_API glm5rt_status glm5rt_session_truncate(glm5rt_session* session, int64_t n_keep);
/* Reseeds the sampling RNG. */
GLM5RT_API glm5rt_status glm5rt_session_set_seed(glm5rt_session* session, uint64_t seed);

/* Requests that the running (or next) compute call on this session stop soon: it then returns
 * GLM5RT_ERR_CANCELLED with the session as before that call. Callable from any thread and from a
 * signal handler (it only stores an atomic flag). The flag is cleared when a call returns. */
GLM5RT_API void glm5rt_session_cancel(glm5rt_session* session);

/* ----------------------------------- sampling ------------------------------------------------- */

typedef struct glm5rt_sampler_params {
    uint32_t struct_size;       /* set by glm5rt_sampler_default_params */
    float temperature;          /* <= 0: greedy (argmax, lowest id wins ties); default 0 */
    int32_t top_k;              /* keep the k most likely; <= 0 = off (default) */
    float top_p;                /* nucleus; >= 1 = off (default 1) */
    float min_p;                /* drop tokens below min_p * p_max; <= 0 = off (default 0) */
    float repetition_penalty;   /* CTRL-style penalty on tokens of the last penalty_last_n; 1 = off */
    int32_t penalty_last_n;     /* window for repetition_penalty; default 64; -1 = whole session */
} glm5rt_sampler_params;

GLM5RT_API void glm5rt_sampler_default_params(glm5rt_sampler_params* params);

/* Samples the next token from the current logits with the session's RNG (params NULL = greedy).
 * Order: repetition penalty, temperature, top-k, top-p, min-p, then a draw. Seeded runs repeat. */
GLM5RT_API glm5rt_status glm5rt_session_sample(glm5rt_session* session,
                                               const glm5rt_sampler_params* params,
                                               int32_t* out_token);

/* glm5rt_session_sample followed by glm5rt_session_append of that token. */
GLM5RT_API glm5rt_status glm5rt_session_step(glm5rt_session* session,
                                             const glm5rt_sampler_params* params,
                                             int32_t* out_token);

/* Batched stepping: samples one token for each of n sessions (all on the same model) and appends it,
 * computing the n new positions in one forward. out_tokens receives n ids. Results equal stepping each
 * session alone. On error no session changes. */
GLM5RT_API glm5rt_status glm5rt_batch_step(glm5rt_session* const* sessions, size_t n_sessions,
                                           const glm5rt_sampler_params* params,
                                           int32_t* out_tokens);

/* Batched append: appends tokens[i][0..n_tokens[i]) to sessions[i] for each i in one forward per
 * chunk. On error no session changes. */
GLM5RT_API glm5rt_status glm5rt_batch_append(glm5rt_session* const* sessions, size_t n_sessions,
                                             const int32_t* const* tokens, const size_t* n_tokens);

/* ----------------------------------- snapshots ------------------------------------------------ */

/* Writes the session (tokens, cache, logits, RNG) to a zstd-compressed file stamped with a magic, a
 * format version and the model's fingerprint. */
GLM5RT_API glm5rt_status glm5rt_session_save_file(const glm5rt_session* session, const char* path);
/* Replaces the session's state with a snapshot; MISMATCH (with a message) if the file was made by
 * another model or format version, FORMAT if it is damaged. On error the session is unchanged. */
GLM5RT_API glm5rt_status glm5rt_session_load_file(glm5rt_session* session, const char* path);

/* ----------------------------------- additions after v0 -------------------------------------- */

/* glm5rt_tokenize flag (added by [Tokenizer]): also apply tokenizer.json's post-processor, i.e. Hugging
 * Face's add_special_tokens=True (e.g. a TemplateProcessing that adds a BOS such as "[gMASK]<sop>").
 * Without it glm5rt_tokenize encodes the text alone, as transformers' apply_chat_template does; text from
 * glm5rt_chat_format already holds its special tokens, so leave this flag off for chat prompts. */
enum {
    GLM5RT_TOKENIZE_ADD_SPECIAL = 2
};

#ifdef __cplusplus
}
#endif

#endif /* GLM5RT_H */
