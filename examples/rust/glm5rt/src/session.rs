//! Sessions: a token sequence with its attention cache, appended to and sampled from.
use std::cell::Cell;
use std::marker::PhantomData;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use glm5rt_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::model::Model;
use crate::sampler::Sampler;
use crate::tokenizer::{DetokStream, Tokenizer};
use crate::util::{c_path, query_ids};

/// Options of Session::with_params: `SessionParams::new().max_tokens(4096).seed(7)`.
#[derive(Debug, Clone, Copy)]
pub struct SessionParams {
    raw: sys::glm5rt_session_params,
}

impl Default for SessionParams {
    fn default() -> Self {
        let mut raw = sys::glm5rt_session_params::default();
        // SAFETY: fills a plain struct.
        unsafe { sys::glm5rt_session_default_params(&mut raw) };
        SessionParams { raw }
    }
}

impl SessionParams {
    pub fn new() -> Self {
        Self::default()
    }
    /// Most tokens the session may hold; 0 = the model's context length.
    pub fn max_tokens(mut self, n: i64) -> Self {
        self.raw.max_tokens = n;
        self
    }
    /// Cache budget in bytes; 0 = enough for max_tokens.
    pub fn cache_bytes(mut self, n: i64) -> Self {
        self.raw.cache_bytes = n;
        self
    }
    pub fn page_size(mut self, n: i32) -> Self {
        self.raw.page_size = n;
        self
    }
    /// Longest piece of a prompt computed in one forward.
    pub fn prefill_chunk(mut self, n: i32) -> Self {
        self.raw.prefill_chunk = n;
        self
    }
    /// Sampling RNG seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.raw.seed = seed;
        self
    }
}

/// Owns the C session; shared (through Arc) by the Session and its CancelHandles, which only ever call
/// glm5rt_session_cancel on it. Freed when the last of them is dropped.
struct Handle(NonNull<sys::glm5rt_session>);

// SAFETY: only Session (one user at a time, enforced by &mut self / !Sync) calls anything but
// glm5rt_session_cancel, which glm5rt.h allows from any thread at any time.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: last owner; the session holds its own reference on the model.
        unsafe { sys::glm5rt_session_free(self.0.as_ptr()) }
    }
}

/// A session on a model. `Send` (it may move between threads) but not `Sync`: one thread at a time,
/// as glm5rt.h requires. To stop a running call from elsewhere use `cancel_handle()`.
pub struct Session {
    handle: Arc<Handle>,
    n_vocab: usize,
    _not_sync: PhantomData<Cell<()>>,
}

/// Cancels the session's running (or next) compute call, which then fails with Status::Cancelled and
/// leaves the session as before it. `Send + Sync + Clone`; keeps the C session alive.
#[derive(Clone)]
pub struct CancelHandle(Arc<Handle>);

impl CancelHandle {
    pub fn cancel(&self) {
        // SAFETY: any thread may cancel at any time; the Arc keeps the session alive.
        unsafe { sys::glm5rt_session_cancel(self.0 .0.as_ptr()) }
    }
}

impl Session {
    pub fn new(model: &Model) -> Result<Session> {
        Self::with_params(model, &SessionParams::default())
    }

    pub fn with_params(model: &Model, params: &SessionParams) -> Result<Session> {
        let n_vocab = model.info()?.n_vocab.max(0) as usize;
        let mut raw = ptr::null_mut();
        // SAFETY: valid model, params and out-pointer; the session takes its own model reference.
        check(unsafe { sys::glm5rt_session_create(model.as_ptr(), &params.raw, &mut raw) })?;
        let handle = Arc::new(Handle(NonNull::new(raw).expect("OK with a NULL session")));
        Ok(Session {
            handle,
            n_vocab,
            _not_sync: PhantomData,
        })
    }

    fn raw(&self) -> *mut sys::glm5rt_session {
        self.handle.0.as_ptr()
    }

    /// Appends tokens (prefill); the logits of the last position become available.
    pub fn append(&mut self, tokens: &[i32]) -> Result<()> {
        // SAFETY: tokens valid for its length; no logits requested.
        check(unsafe { sys::glm5rt_session_append(self.raw(), tokens.as_ptr(), tokens.len(), ptr::null_mut()) })
    }

    /// Appends tokens and returns the logits of every appended position (tokens.len() x n_vocab).
    pub fn append_with_logits(&mut self, tokens: &[i32]) -> Result<Vec<f32>> {
        let mut logits = vec![0f32; tokens.len() * self.n_vocab];
        // SAFETY: the buffer holds n_tokens x n_vocab floats.
        check(unsafe { sys::glm5rt_session_append(self.raw(), tokens.as_ptr(), tokens.len(), logits.as_mut_ptr()) })?;
        Ok(logits)
    }

    /// The logits of the last position (borrowed until the next call on the session).
    pub fn logits(&mut self) -> Result<&[f32]> {
        let mut p: *const f32 = ptr::null();
        let mut n = 0i32;
        // SAFETY: out-pointers valid; the returned array lives until the next call on this session,
        // which the &mut borrow of the result prevents.
        check(unsafe { sys::glm5rt_session_logits(self.raw(), &mut p, &mut n) })?;
        if p.is_null() || n < 0 {
            return Err(Error::new(Status::Internal, "glm5rt_session_logits returned no logits"));
        }
        Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
    }

    pub fn n_tokens(&self) -> usize {
        // SAFETY: valid handle.
        unsafe { sys::glm5rt_session_n_tokens(self.raw()) }.max(0) as usize
    }

    /// The tokens the session holds.
    pub fn tokens(&self) -> Result<Vec<i32>> {
        // SAFETY: size-query idiom on a valid handle.
        query_ids(|buf, cap, n| unsafe { sys::glm5rt_session_tokens(self.raw(), buf, cap, n) })
    }

    /// Forgets every token (keeps the cache memory and the RNG stream).
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: valid handle.
        check(unsafe { sys::glm5rt_session_reset(self.raw()) })
    }

    /// Keeps the first `n_keep` tokens; the logits become those of the new last position.
    pub fn truncate(&mut self, n_keep: usize) -> Result<()> {
        // SAFETY: valid handle.
        check(unsafe { sys::glm5rt_session_truncate(self.raw(), n_keep as i64) })
    }

    pub fn set_seed(&mut self, seed: u64) -> Result<()> {
        // SAFETY: valid handle.
        check(unsafe { sys::glm5rt_session_set_seed(self.raw(), seed) })
    }

    /// Samples the next token from the current logits (does not append it).
    pub fn sample(&mut self, sampler: &Sampler) -> Result<i32> {
        let mut t = -1;
        // SAFETY: valid handle, params and out-pointer.
        check(unsafe { sys::glm5rt_session_sample(self.raw(), sampler.raw(), &mut t) })?;
        Ok(t)
    }

    /// Samples the next token and appends it.
    pub fn step(&mut self, sampler: &Sampler) -> Result<i32> {
        let mut t = -1;
        // SAFETY: valid handle, params and out-pointer.
        check(unsafe { sys::glm5rt_session_step(self.raw(), sampler.raw(), &mut t) })?;
        Ok(t)
    }

    /// Writes tokens, cache, logits and RNG to a snapshot file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = c_path(path.as_ref())?;
        // SAFETY: valid handle and C string.
        check(unsafe { sys::glm5rt_session_save_file(self.raw(), path.as_ptr()) })
    }

    /// Replaces the session's state with a snapshot (Status::Mismatch if made by another model).
    pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = c_path(path.as_ref())?;
        // SAFETY: valid handle and C string.
        check(unsafe { sys::glm5rt_session_load_file(self.raw(), path.as_ptr()) })
    }

    /// A handle that can cancel this session's calls from any thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle(Arc::clone(&self.handle))
    }

    /// Streams a reply: samples up to `max_new` tokens, stopping at an end-of-generation token.
    /// The session must hold a prompt (its logits are where generation starts).
    pub fn generate<'a>(
        &'a mut self,
        tokenizer: &'a Tokenizer,
        sampler: Sampler,
        max_new: usize,
    ) -> Result<Generate<'a>> {
        let stream = tokenizer.stream()?;
        Ok(Generate {
            session: self,
            tokenizer,
            stream,
            sampler,
            left: max_new,
            done: false,
            stop: None,
        })
    }

    /// The raw handle, for calls this crate does not wrap. Borrowed: do not free it.
    pub fn as_ptr(&self) -> *mut sys::glm5rt_session {
        self.raw()
    }
}

/// Samples one token for each session (all on the same model) and appends it, in one forward.
/// Equal to stepping each alone; on error no session changes.
pub fn batch_step(sessions: &mut [&mut Session], sampler: &Sampler) -> Result<Vec<i32>> {
    let raws: Vec<*mut sys::glm5rt_session> = sessions.iter().map(|s| s.raw()).collect();
    let mut out = vec![-1i32; raws.len()];
    // SAFETY: distinct sessions (the &mut borrows guarantee it), out holds n ids.
    check(unsafe { sys::glm5rt_batch_step(raws.as_ptr(), raws.len(), sampler.raw(), out.as_mut_ptr()) })?;
    Ok(out)
}

/// Why a generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The model produced an end-of-generation token (appended to the session, not yielded).
    Eos(i32),
    /// max_new tokens were generated.
    Length,
    /// A call failed (the error was yielded).
    Error,
}

/// One streamed piece of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The sampled token; None for the final flush of held-back bytes.
    pub token: Option<i32>,
    /// The text this token completed (may be empty while a multi-byte character is unfinished).
    pub text: String,
}

/// Iterator over the pieces of a reply (see Session::generate).
pub struct Generate<'a> {
    session: &'a mut Session,
    tokenizer: &'a Tokenizer,
    stream: DetokStream<'a>,
    sampler: Sampler,
    left: usize,
    done: bool,
    stop: Option<Stop>,
}

impl Generate<'_> {
    /// Why the generation ended (None while it runs).
    pub fn stop_reason(&self) -> Option<Stop> {
        self.stop
    }

    fn finish(&mut self, stop: Stop) -> Option<Result<Piece>> {
        self.stop = Some(stop);
        self.done = true;
        match self.stream.flush() {
            Ok(text) if text.is_empty() => None,
            Ok(text) => Some(Ok(Piece { token: None, text })),
            Err(e) => Some(Err(e)),
        }
    }
}

impl Iterator for Generate<'_> {
    type Item = Result<Piece>;

    fn next(&mut self) -> Option<Result<Piece>> {
        if self.done {
            return None;
        }
        if self.left == 0 {
            return self.finish(Stop::Length);
        }
        let token = match self.session.step(&self.sampler) {
            Ok(t) => t,
            Err(e) => {
                self.stop = Some(Stop::Error);
                self.done = true;
                return Some(Err(e));
            }
        };
        self.left -= 1;
        if self.tokenizer.is_eos(token) {
            return self.finish(Stop::Eos(token));
        }
        match self.stream.push(token) {
            Ok(text) => Some(Ok(Piece {
                token: Some(token),
                text,
            })),
            Err(e) => {
                self.stop = Some(Stop::Error);
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
