#define _POSIX_C_SOURCE 200809L
#include "reply.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Tokenizes with special tokens parsed (the chat format is made of them); *ids is malloc'ed. */
static glm5rt_status tokenize_all(const glm5rt_tokenizer* tok, const text* s, int32_t** ids, size_t* n) {
    size_t needed = 0;
    glm5rt_status st = glm5rt_tokenize(tok, s->data, s->len, GLM5RT_TOKENIZE_PARSE_SPECIAL, NULL, 0, &needed);
    if (st != GLM5RT_OK) return st;
    *ids = (int32_t*)malloc((needed ? needed : 1) * sizeof **ids);
    if (!*ids) return GLM5RT_ERR_OUT_OF_MEMORY;
    st = glm5rt_tokenize(tok, s->data, s->len, GLM5RT_TOKENIZE_PARSE_SPECIAL, *ids, needed, n);
    if (st != GLM5RT_OK) {
        free(*ids);
        *ids = NULL;
    }
    return st;
}

static glm5rt_status detokenize_all(const glm5rt_tokenizer* tok, const int32_t* ids, size_t n, text* out) {
    size_t needed = 0;
    glm5rt_status st;
    text_clear(out);
    if (n == 0) return text_reserve(out, 0) == 0 ? GLM5RT_OK : GLM5RT_ERR_OUT_OF_MEMORY;
    st = glm5rt_detokenize(tok, ids, n, 0, NULL, 0, &needed);
    if (st != GLM5RT_OK) return st;
    if (text_reserve(out, needed) != 0) return GLM5RT_ERR_OUT_OF_MEMORY;
    st = glm5rt_detokenize(tok, ids, n, 0, out->data, needed, &needed);
    if (st == GLM5RT_OK) {
        out->len = needed;
        out->data[needed] = '\0';
    }
    return st;
}

glm5rt_status sync_session(glm5rt_session* session, const int32_t* tokens, size_t n, size_t* reused) {
    size_t held_n = 0, keep = 0;
    int32_t* held = NULL;
    glm5rt_status st = glm5rt_session_tokens(session, NULL, 0, &held_n);
    if (st != GLM5RT_OK) return st;
    if (held_n) {
        held = (int32_t*)malloc(held_n * sizeof *held);
        if (!held) return GLM5RT_ERR_OUT_OF_MEMORY;
        st = glm5rt_session_tokens(session, held, held_n, &held_n);
        if (st != GLM5RT_OK) {
            free(held);
            return st;
        }
    }
    while (keep < held_n && keep < n && held[keep] == tokens[keep]) ++keep;
    free(held);
    /* Recompute at least the last token, so that the logits are those of this prompt's end. */
    if (keep == n && n > 0) --keep;
    if (keep == 0) {
        st = glm5rt_session_reset(session);
    } else if (keep < held_n) {
        st = glm5rt_session_truncate(session, (int64_t)keep);
    }
    if (st != GLM5RT_OK) return st;
    *reused = keep;
    return glm5rt_session_append(session, tokens + keep, n - keep, NULL);
}

/* Streams one token's text to out; grows the buffer when the piece does not fit (never a size query,
 * which would consume the token). */
static glm5rt_status stream_token(glm5rt_detok_stream* stream, int32_t id, text* buf, FILE* out) {
    size_t len = 0;
    glm5rt_status st;
    if (text_reserve(buf, 256) != 0) return GLM5RT_ERR_OUT_OF_MEMORY;
    st = glm5rt_detok_stream_push(stream, id, buf->data, buf->cap, &len);
    if (st == GLM5RT_ERR_BUFFER_TOO_SMALL) { /* the token was not consumed: retry larger */
        if (text_reserve(buf, len) != 0) return GLM5RT_ERR_OUT_OF_MEMORY;
        st = glm5rt_detok_stream_push(stream, id, buf->data, buf->cap, &len);
    }
    if (st == GLM5RT_OK && len) {
        fwrite(buf->data, 1, len, out);
        fflush(out);
    }
    return st;
}

/* Writes what the stream holds back. Never a size query: that would already flush (and reset). */
static glm5rt_status stream_flush(glm5rt_detok_stream* stream, text* buf, FILE* out) {
    size_t len = 0;
    glm5rt_status st;
    if (text_reserve(buf, 256) != 0) return GLM5RT_ERR_OUT_OF_MEMORY;
    st = glm5rt_detok_stream_flush(stream, buf->data, buf->cap, &len);
    if (st == GLM5RT_ERR_BUFFER_TOO_SMALL) {
        if (text_reserve(buf, len) != 0) return GLM5RT_ERR_OUT_OF_MEMORY;
        st = glm5rt_detok_stream_flush(stream, buf->data, buf->cap, &len);
    }
    if (st == GLM5RT_OK && len) fwrite(buf->data, 1, len, out);
    fflush(out);
    return st;
}

/* Adds the generated ids (end-of-turn token excluded) to the conversation, split at </think>. */
static glm5rt_status record_reply(const glm5rt_tokenizer* tok, conversation* conv, const int32_t* ids,
                                  size_t n, int32_t think_end) {
    size_t split = n, i;
    text reasoning = {0}, content = {0};
    glm5rt_status st;
    for (i = 0; i < n && think_end >= 0; ++i) {
        if (ids[i] == think_end) {
            split = i;
            break;
        }
    }
    if (split < n) {
        st = detokenize_all(tok, ids, split, &reasoning);
        if (st == GLM5RT_OK) st = detokenize_all(tok, ids + split + 1, n - split - 1, &content);
    } else {
        st = detokenize_all(tok, ids, n, &content);
    }
    if (st == GLM5RT_OK &&
        conversation_add(conv, "assistant", content.data, content.len, split < n ? reasoning.data : NULL,
                         reasoning.len) != 0)
        st = GLM5RT_ERR_OUT_OF_MEMORY;
    text_free(&reasoning);
    text_free(&content);
    return st;
}

glm5rt_status chat_reply(glm5rt_session* session, const glm5rt_tokenizer* tok, conversation* conv,
                         const reply_settings* settings, FILE* out, reply_stats* stats) {
    text prompt = {0}, piece = {0};
    int32_t* ids = NULL;
    int32_t* gen = NULL;
    size_t n_ids = 0, n_gen = 0;
    int32_t think_end = -1;
    glm5rt_detok_stream* stream = NULL;
    glm5rt_status st, step_st = GLM5RT_OK;
    uint32_t flags = GLM5RT_CHAT_ADD_GENERATION_PROMPT | (settings->thinking ? 0u : (uint32_t)GLM5RT_CHAT_THINKING_OFF);
    double t0;

    memset(stats, 0, sizeof *stats);
    if (glm5rt_token_lookup(tok, "</think>", strlen("</think>"), &think_end) != GLM5RT_OK) think_end = -1;

    st = conversation_render(conv, tok, flags, &prompt);
    if (st == GLM5RT_OK) st = tokenize_all(tok, &prompt, &ids, &n_ids);
    if (st != GLM5RT_OK) goto done;
    stats->prompt_tokens = n_ids;

    t0 = now_seconds();
    st = sync_session(session, ids, n_ids, &stats->reused_tokens);
    stats->prompt_seconds = now_seconds() - t0;
    if (st == GLM5RT_ERR_CANCELLED) stats->cancelled = 1;
    if (st != GLM5RT_OK) goto done;
    stats->prompt_done = 1;

    gen = (int32_t*)malloc((size_t)settings->max_new * sizeof *gen);
    if (!gen) {
        st = GLM5RT_ERR_OUT_OF_MEMORY;
        goto done;
    }
    st = glm5rt_detok_stream_create(tok, &stream);
    if (st != GLM5RT_OK) goto done;

    t0 = now_seconds();
    while ((int)n_gen < settings->max_new) {
        int32_t next = -1;
        step_st = glm5rt_session_step(session, settings->sampler, &next);
        if (step_st != GLM5RT_OK) break;
        ++stats->new_tokens;
        if (glm5rt_tokenizer_is_eos(tok, next)) {
            stats->hit_eos = 1;
            break;
        }
        gen[n_gen++] = next;
        st = stream_token(stream, next, &piece, out);
        if (st != GLM5RT_OK) break;
    }
    stats->generate_seconds = now_seconds() - t0;
    if (st == GLM5RT_OK) st = stream_flush(stream, &piece, out);
    fputc('\n', out);
    fflush(out);
    if (step_st == GLM5RT_ERR_CANCELLED) stats->cancelled = 1;

    /* What was generated is in the session: record it, even after a cancel or a full cache. */
    if (st == GLM5RT_OK) st = record_reply(tok, conv, gen, n_gen, think_end);
    if (st == GLM5RT_OK && step_st != GLM5RT_ERR_CANCELLED) st = step_st;

done:
    glm5rt_detok_stream_free(stream);
    free(gen);
    free(ids);
    text_free(&prompt);
    text_free(&piece);
    return st;
}
