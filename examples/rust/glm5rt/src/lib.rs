//! Safe Rust API of libglm5rt, an embeddable runtime for GLM-5 models.
//!
//! ```no_run
//! use glm5rt::{ChatMessage, ChatOptions, Model, Sampler, Session, Tokenizer};
//! let model = Model::load("models/glm5-demo")?;
//! let tok = Tokenizer::from_model(&model)?;
//! let prompt = tok.chat_format(&[ChatMessage::user("What does `from_pretrained` do?")], ChatOptions::default())?;
//! let mut session = Session::new(&model)?;
//! session.append(&tok.encode(&prompt, true)?)?;
//! for piece in session.generate(&tok, Sampler::greedy(), 128)? {
//!     print!("{}", piece?.text);
//! }
//! # Ok::<(), glm5rt::Error>(())
//! ```
//!
//! Thread rules (from glm5rt.h): [`Model`] and [`Tokenizer`] are `Send + Sync`; a [`Session`] is `Send`
//! and used by one thread at a time; [`CancelHandle`] cancels a session's call from any thread.
//! Every failure is an [`Error`] carrying the [`Status`] and the library's message.

mod error;
mod log;
mod model;
mod sampler;
mod session;
mod tokenizer;
mod util;

pub use error::{Error, Result, Status};
pub use log::{set_log_callback, set_log_level, LogLevel};
pub use model::{Backend, Model, ModelInfo, ModelParams};
pub use sampler::Sampler;
pub use session::{batch_step, CancelHandle, Generate, Piece, Session, SessionParams, Stop};
pub use tokenizer::{ChatMessage, ChatOptions, DetokStream, Tokenizer};

/// The raw bindings, for calls this crate does not wrap.
pub use glm5rt_sys as sys;

/// The library's version string ("0.1.0").
pub fn version() -> &'static str {
    // SAFETY: static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(sys::glm5rt_version()) }
        .to_str()
        .unwrap_or("?")
}

/// The loaded library's ABI major version (compare with glm5rt_sys::GLM5RT_ABI_VERSION).
pub fn abi_version() -> i32 {
    // SAFETY: no arguments.
    unsafe { sys::glm5rt_abi_version() }
}
