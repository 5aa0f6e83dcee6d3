//! Raw bindings of libglm5rt's C ABI, written by hand from `include/glm5rt/glm5rt.h` (v0, ABI 0) and
//! checked in, so that building needs no generator. The header is the manual: every function's
//! ownership, thread and error rules are documented there. The safe API is the `glm5rt` crate.
//!
//! Layout agreement with the header is tested by `tests/consumers/run.sh`, which compares
//! `cargo run --example layout` with the sizes and offsets a C compiler reports.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

// ----------------------------------------------------------------------------------- versions
pub const GLM5RT_VERSION_MAJOR: i32 = 0;
pub const GLM5RT_VERSION_MINOR: i32 = 1;
pub const GLM5RT_VERSION_PATCH: i32 = 0;
pub const GLM5RT_VERSION_STRING: &str = "0.1.0";
pub const GLM5RT_ABI_VERSION: i32 = 0;

// ----------------------------------------------------------------------------------- status codes
pub type glm5rt_status = i32;
pub const GLM5RT_OK: glm5rt_status = 0;
pub const GLM5RT_ERR_INVALID_ARGUMENT: glm5rt_status = 1;
pub const GLM5RT_ERR_UNSUPPORTED: glm5rt_status = 2;
pub const GLM5RT_ERR_IO: glm5rt_status = 3;
pub const GLM5RT_ERR_FORMAT: glm5rt_status = 4;
pub const GLM5RT_ERR_OUT_OF_MEMORY: glm5rt_status = 5;
pub const GLM5RT_ERR_CACHE_FULL: glm5rt_status = 6;
pub const GLM5RT_ERR_CANCELLED: glm5rt_status = 7;
pub const GLM5RT_ERR_DEVICE: glm5rt_status = 8;
pub const GLM5RT_ERR_NO_DEVICE: glm5rt_status = 9;
pub const GLM5RT_ERR_MISMATCH: glm5rt_status = 10;
pub const GLM5RT_ERR_BUFFER_TOO_SMALL: glm5rt_status = 11;
pub const GLM5RT_ERR_NOT_FOUND: glm5rt_status = 12;
pub const GLM5RT_ERR_STATE: glm5rt_status = 13;
pub const GLM5RT_ERR_INTERNAL: glm5rt_status = 14;

// ----------------------------------------------------------------------------------- logging
pub const GLM5RT_LOG_ERROR: i32 = 0;
pub const GLM5RT_LOG_WARN: i32 = 1;
pub const GLM5RT_LOG_INFO: i32 = 2;
pub const GLM5RT_LOG_DEBUG: i32 = 3;

pub type glm5rt_log_fn = Option<unsafe extern "C" fn(level: i32, line: *const c_char, user_data: *mut c_void)>;

// ----------------------------------------------------------------------------------- enumerations
pub const GLM5RT_BACKEND_AUTO: i32 = 0;
pub const GLM5RT_BACKEND_CPU: i32 = 1;
pub const GLM5RT_BACKEND_CUDA: i32 = 2;

pub const GLM5RT_DTYPE_AUTO: i32 = -1;
pub const GLM5RT_DTYPE_F32: i32 = 0;
pub const GLM5RT_DTYPE_BF16: i32 = 1;
pub const GLM5RT_DTYPE_F16: i32 = 2;
pub const GLM5RT_DTYPE_FP8_E4M3: i32 = 3;

pub const GLM5RT_TOKENIZE_PARSE_SPECIAL: u32 = 1;
pub const GLM5RT_DETOKENIZE_SKIP_SPECIAL: u32 = 1;
pub const GLM5RT_CHAT_ADD_GENERATION_PROMPT: u32 = 1;
pub const GLM5RT_CHAT_THINKING_OFF: u32 = 2;

// ----------------------------------------------------------------------------------- opaque handles
/// Declares an opaque C type: not constructible, not Send/Sync/Unpin by itself.
macro_rules! opaque {
    ($name:ident) => {
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
        }
    };
}
opaque!(glm5rt_model);
opaque!(glm5rt_tokenizer);
opaque!(glm5rt_detok_stream);
opaque!(glm5rt_session);

// ----------------------------------------------------------------------------------- structs
pub type glm5rt_progress_fn = Option<unsafe extern "C" fn(fraction: f32, user_data: *mut c_void) -> i32>;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct glm5rt_model_params {
    pub struct_size: u32,
    pub backend: i32,
    pub device_index: i32,
    pub n_threads: i32,
    pub progress: glm5rt_progress_fn,
    pub progress_user_data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct glm5rt_model_info {
    pub struct_size: u32,
    pub n_layers: i32,
    pub n_vocab: i32,
    pub hidden_size: i32,
    pub n_heads: i32,
    pub n_routed_experts: i32,
    pub n_experts_per_token: i32,
    pub n_dense_layers: i32,
    pub kv_lora_rank: i32,
    pub qk_rope_head_dim: i32,
    pub index_topk: i32,
    pub weight_dtype: i32,
    pub backend: i32,
    pub context_length: i64,
    pub n_params: i64,
    pub weight_bytes: i64,
    pub n_eos: i32,
    pub eos_ids: [i32; 8],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct glm5rt_chat_message {
    pub role: *const c_char,
    pub content: *const c_char,
    pub reasoning: *const c_char,
    pub tool_calls_json: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct glm5rt_session_params {
    pub struct_size: u32,
    pub max_tokens: i64,
    pub cache_bytes: i64,
    pub page_size: i32,
    pub cache_dtype: i32,
    pub index_cache_dtype: i32,
    pub prefill_chunk: i32,
    pub seed: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct glm5rt_sampler_params {
    pub struct_size: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub penalty_last_n: i32,
}

// ----------------------------------------------------------------------------------- functions
extern "C" {
    pub fn glm5rt_version() -> *const c_char;
    pub fn glm5rt_abi_version() -> i32;
    pub fn glm5rt_status_string(status: glm5rt_status) -> *const c_char;
    pub fn glm5rt_last_error() -> *const c_char;

    pub fn glm5rt_set_log_callback(fn_: glm5rt_log_fn, user_data: *mut c_void);
    pub fn glm5rt_set_log_level(level: i32);

    pub fn glm5rt_model_default_params(params: *mut glm5rt_model_params);
    pub fn glm5rt_model_load(
        dir: *const c_char,
        params: *const glm5rt_model_params,
        out_model: *mut *mut glm5rt_model,
    ) -> glm5rt_status;
    pub fn glm5rt_model_free(model: *mut glm5rt_model);
    pub fn glm5rt_model_get_info(model: *const glm5rt_model, info: *mut glm5rt_model_info) -> glm5rt_status;

    pub fn glm5rt_tokenizer_load(dir: *const c_char, out_tokenizer: *mut *mut glm5rt_tokenizer) -> glm5rt_status;
    pub fn glm5rt_tokenizer_from_model(
        model: *const glm5rt_model,
        out_tokenizer: *mut *mut glm5rt_tokenizer,
    ) -> glm5rt_status;
    pub fn glm5rt_tokenizer_free(tokenizer: *mut glm5rt_tokenizer);
    pub fn glm5rt_tokenizer_vocab_size(tokenizer: *const glm5rt_tokenizer) -> i32;
    pub fn glm5rt_tokenizer_is_eos(tokenizer: *const glm5rt_tokenizer, token: i32) -> i32;
    pub fn glm5rt_tokenize(
        tokenizer: *const glm5rt_tokenizer,
        text: *const c_char,
        text_len: usize,
        flags: u32,
        tokens: *mut i32,
        capacity: usize,
        out_n_tokens: *mut usize,
    ) -> glm5rt_status;
    pub fn glm5rt_detokenize(
        tokenizer: *const glm5rt_tokenizer,
        tokens: *const i32,
        n_tokens: usize,
        flags: u32,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> glm5rt_status;
    pub fn glm5rt_token_to_piece(
        tokenizer: *const glm5rt_tokenizer,
        token: i32,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> glm5rt_status;
    pub fn glm5rt_token_lookup(
        tokenizer: *const glm5rt_tokenizer,
        text: *const c_char,
        text_len: usize,
        out_token: *mut i32,
    ) -> glm5rt_status;
    pub fn glm5rt_chat_format(
        tokenizer: *const glm5rt_tokenizer,
        messages: *const glm5rt_chat_message,
        n_messages: usize,
        flags: u32,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> glm5rt_status;

    pub fn glm5rt_detok_stream_create(
        tokenizer: *const glm5rt_tokenizer,
        out_stream: *mut *mut glm5rt_detok_stream,
    ) -> glm5rt_status;
    pub fn glm5rt_detok_stream_free(stream: *mut glm5rt_detok_stream);
    pub fn glm5rt_detok_stream_push(
        stream: *mut glm5rt_detok_stream,
        token: i32,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> glm5rt_status;
    pub fn glm5rt_detok_stream_flush(
        stream: *mut glm5rt_detok_stream,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> glm5rt_status;

    pub fn glm5rt_session_default_params(params: *mut glm5rt_session_params);
    pub fn glm5rt_session_create(
        model: *mut glm5rt_model,
        params: *const glm5rt_session_params,
        out_session: *mut *mut glm5rt_session,
    ) -> glm5rt_status;
    pub fn glm5rt_session_free(session: *mut glm5rt_session);
    pub fn glm5rt_session_append(
        session: *mut glm5rt_session,
        tokens: *const i32,
        n_tokens: usize,
        all_logits: *mut f32,
    ) -> glm5rt_status;
    pub fn glm5rt_session_logits(
        session: *mut glm5rt_session,
        out_logits: *mut *const f32,
        out_n_vocab: *mut i32,
    ) -> glm5rt_status;
    pub fn glm5rt_session_n_tokens(session: *const glm5rt_session) -> i64;
    pub fn glm5rt_session_tokens(
        session: *const glm5rt_session,
        tokens: *mut i32,
        capacity: usize,
        out_n_tokens: *mut usize,
    ) -> glm5rt_status;
    pub fn glm5rt_session_reset(session: *mut glm5rt_session) -> glm5rt_status;
    pub fn glm5rt_session_truncate(session: *mut glm5rt_session, n_keep: i64) -> glm5rt_status;
    pub fn glm5rt_session_set_seed(session: *mut glm5rt_session, seed: u64) -> glm5rt_status;
    pub fn glm5rt_session_cancel(session: *mut glm5rt_session);

    pub fn glm5rt_sampler_default_params(params: *mut glm5rt_sampler_params);
    pub fn glm5rt_session_sample(
        session: *mut glm5rt_session,
        params: *const glm5rt_sampler_params,
        out_token: *mut i32,
    ) -> glm5rt_status;
    pub fn glm5rt_session_step(
        session: *mut glm5rt_session,
        params: *const glm5rt_sampler_params,
        out_token: *mut i32,
    ) -> glm5rt_status;
    pub fn glm5rt_batch_step(
        sessions: *const *mut glm5rt_session,
        n_sessions: usize,
        params: *const glm5rt_sampler_params,
        out_tokens: *mut i32,
    ) -> glm5rt_status;
    pub fn glm5rt_batch_append(
        sessions: *const *mut glm5rt_session,
        n_sessions: usize,
        tokens: *const *const i32,
        n_tokens: *const usize,
    ) -> glm5rt_status;

    pub fn glm5rt_session_save_file(session: *const glm5rt_session, path: *const c_char) -> glm5rt_status;
    pub fn glm5rt_session_load_file(session: *mut glm5rt_session, path: *const c_char) -> glm5rt_status;
}
