//! Tokenizer, chat format and streaming detokenization.
use std::marker::PhantomData;
use std::path::Path;
use std::ptr::{self, NonNull};

use glm5rt_sys as sys;

use crate::error::{check, Result};
use crate::model::Model;
use crate::util::{c_path, c_string, query_bytes, query_ids, utf8, with_buffer};

/// A tokenizer (tokenizer.json). Immutable, so `Send + Sync`.
pub struct Tokenizer {
    raw: NonNull<sys::glm5rt_tokenizer>,
}

// SAFETY: glm5rt.h: tokenizers are immutable after creation and usable from any number of threads.
unsafe impl Send for Tokenizer {}
unsafe impl Sync for Tokenizer {}

/// One chat message; `role` is "system", "user", "assistant" or "observation".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// An assistant message's thinking text.
    pub reasoning: Option<String>,
    /// An assistant message's tool calls: a JSON array [{"name": ..., "arguments": {...}}].
    pub tool_calls_json: Option<String>,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            ..Default::default()
        }
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }
}

/// How glm5rt_chat_format renders a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatOptions {
    /// End with "<|assistant|>" and the thinking tag, ready for the reply (default true).
    pub add_generation_prompt: bool,
    /// Reasoning before the answer: "<think>" (true) or "</think>" (false, default).
    pub thinking: bool,
}

impl Default for ChatOptions {
    fn default() -> Self {
        ChatOptions {
            add_generation_prompt: true,
            thinking: false,
        }
    }
}

impl Tokenizer {
    /// Loads tokenizer.json (and tokenizer_config.json when present) from `dir`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Tokenizer> {
        let dir = c_path(dir.as_ref())?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid C string and out-pointer.
        check(unsafe { sys::glm5rt_tokenizer_load(dir.as_ptr(), &mut raw) })?;
        Ok(Tokenizer {
            raw: NonNull::new(raw).expect("OK with a NULL tokenizer"),
        })
    }

    /// The tokenizer of a loaded model (Status::NotFound if its directory had no tokenizer.json).
    pub fn from_model(model: &Model) -> Result<Tokenizer> {
        let mut raw = ptr::null_mut();
        // SAFETY: valid model and out-pointer.
        check(unsafe { sys::glm5rt_tokenizer_from_model(model.as_ptr(), &mut raw) })?;
        Ok(Tokenizer {
            raw: NonNull::new(raw).expect("OK with a NULL tokenizer"),
        })
    }

    pub fn vocab_size(&self) -> usize {
        // SAFETY: valid handle.
        unsafe { sys::glm5rt_tokenizer_vocab_size(self.raw.as_ptr()) }.max(0) as usize
    }

    /// True for end-of-generation ids.
    pub fn is_eos(&self, token: i32) -> bool {
        // SAFETY: valid handle.
        unsafe { sys::glm5rt_tokenizer_is_eos(self.raw.as_ptr(), token) != 0 }
    }

    /// Token ids of `text`; `parse_special` matches special tokens such as "<|user|>" in the text.
    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<i32>> {
        let flags = if parse_special {
            sys::GLM5RT_TOKENIZE_PARSE_SPECIAL
        } else {
            0
        };
        // SAFETY: text is valid for text.len() bytes; the buffer contract is the size-query idiom.
        query_ids(|buf, cap, n| unsafe {
            sys::glm5rt_tokenize(self.raw.as_ptr(), text.as_ptr().cast(), text.len(), flags, buf, cap, n)
        })
    }

    /// The text of `ids` (invalid UTF-8 byte sequences become U+FFFD, as in HF tokenizers).
    pub fn decode(&self, ids: &[i32], skip_special: bool) -> Result<String> {
        let flags = if skip_special {
            sys::GLM5RT_DETOKENIZE_SKIP_SPECIAL
        } else {
            0
        };
        // SAFETY: ids is valid for ids.len() entries.
        let bytes = query_bytes(|buf, cap, len| unsafe {
            sys::glm5rt_detokenize(self.raw.as_ptr(), ids.as_ptr(), ids.len(), flags, buf, cap, len)
        })?;
        utf8(bytes)
    }

    /// The raw bytes of one token (possibly an incomplete UTF-8 sequence).
    pub fn token_to_piece(&self, token: i32) -> Result<Vec<u8>> {
        // SAFETY: size-query idiom over a valid handle.
        query_bytes(|buf, cap, len| unsafe { sys::glm5rt_token_to_piece(self.raw.as_ptr(), token, buf, cap, len) })
    }

    /// The id of a special token given its exact text, e.g. "<|assistant|>".
    pub fn lookup(&self, text: &str) -> Result<i32> {
        let mut id = -1;
        // SAFETY: text valid for its length; id writable.
        check(unsafe { sys::glm5rt_token_lookup(self.raw.as_ptr(), text.as_ptr().cast(), text.len(), &mut id) })?;
        Ok(id)
    }

    /// Renders a conversation in the GLM-5 chat format (encode it with parse_special = true).
    pub fn chat_format(&self, messages: &[ChatMessage], options: ChatOptions) -> Result<String> {
        let mut owned = Vec::with_capacity(messages.len());
        for m in messages {
            owned.push((
                c_string("role", &m.role)?,
                c_string("content", &m.content)?,
                m.reasoning.as_deref().map(|r| c_string("reasoning", r)).transpose()?,
                m.tool_calls_json
                    .as_deref()
                    .map(|t| c_string("tool_calls_json", t))
                    .transpose()?,
            ));
        }
        let raw: Vec<sys::glm5rt_chat_message> = owned
            .iter()
            .map(|(role, content, reasoning, tools)| sys::glm5rt_chat_message {
                role: role.as_ptr(),
                content: content.as_ptr(),
                reasoning: reasoning.as_ref().map_or(ptr::null(), |r| r.as_ptr()),
                tool_calls_json: tools.as_ref().map_or(ptr::null(), |t| t.as_ptr()),
            })
            .collect();
        let mut flags = 0;
        if options.add_generation_prompt {
            flags |= sys::GLM5RT_CHAT_ADD_GENERATION_PROMPT;
        }
        if !options.thinking {
            flags |= sys::GLM5RT_CHAT_THINKING_OFF;
        }
        // SAFETY: the C strings in `owned` outlive the calls.
        let bytes = query_bytes(|buf, cap, len| unsafe {
            sys::glm5rt_chat_format(self.raw.as_ptr(), raw.as_ptr(), raw.len(), flags, buf, cap, len)
        })?;
        utf8(bytes)
    }

    /// A streaming decoder that yields only complete UTF-8 text.
    pub fn stream(&self) -> Result<DetokStream<'_>> {
        let mut raw = ptr::null_mut();
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::glm5rt_detok_stream_create(self.raw.as_ptr(), &mut raw) })?;
        Ok(DetokStream {
            raw: NonNull::new(raw).expect("OK with a NULL stream"),
            _tokenizer: PhantomData,
        })
    }

    /// The raw handle, for calls this crate does not wrap. Borrowed: do not free it.
    pub fn as_ptr(&self) -> *mut sys::glm5rt_tokenizer {
        self.raw.as_ptr()
    }
}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        // SAFETY: we own the handle.
        unsafe { sys::glm5rt_tokenizer_free(self.raw.as_ptr()) }
    }
}

/// Incremental decoding: `push` returns the text completed by each token (bytes of an unfinished
/// code point are held back), `flush` what is left. Pushes plus the flush equal `decode` of the ids.
/// Borrows its tokenizer; may move between threads (`Send`), one user at a time.
pub struct DetokStream<'t> {
    raw: NonNull<sys::glm5rt_detok_stream>,
    _tokenizer: PhantomData<&'t Tokenizer>,
}

// SAFETY: a stream is used by one thread at a time (&mut self) and may move between threads.
unsafe impl Send for DetokStream<'_> {}

impl DetokStream<'_> {
    pub fn push(&mut self, token: i32) -> Result<String> {
        // On BUFFER_TOO_SMALL the token is not consumed, so the retry is exact.
        let bytes = with_buffer(|buf, cap, len| unsafe {
            // SAFETY: valid stream, buffer of `cap` bytes.
            sys::glm5rt_detok_stream_push(self.raw.as_ptr(), token, buf, cap, len)
        });
        utf8(bytes?)
    }

    /// Whatever is held back (incomplete bytes become U+FFFD); resets the stream.
    pub fn flush(&mut self) -> Result<String> {
        let bytes = with_buffer(|buf, cap, len| unsafe {
            // SAFETY: valid stream, buffer of `cap` bytes.
            sys::glm5rt_detok_stream_flush(self.raw.as_ptr(), buf, cap, len)
        });
        utf8(bytes?)
    }
}

impl Drop for DetokStream<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the handle.
        unsafe { sys::glm5rt_detok_stream_free(self.raw.as_ptr()) }
    }
}
