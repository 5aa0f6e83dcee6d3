//! Errors: every failing call returns the status code and the library's message for it
//! (glm5rt_last_error(), which is per thread and therefore read right after the call).
use std::ffi::CStr;
use std::fmt;

use glm5rt_sys as sys;

/// The status codes of glm5rt.h (their numbers are pinned by the ABI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    InvalidArgument,
    Unsupported,
    Io,
    Format,
    OutOfMemory,
    CacheFull,
    Cancelled,
    Device,
    NoDevice,
    Mismatch,
    BufferTooSmall,
    NotFound,
    State,
    Internal,
    /// A code this crate does not know (a newer library).
    Other(i32),
}

impl Status {
    pub fn from_code(code: sys::glm5rt_status) -> Status {
        match code {
            sys::GLM5RT_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::GLM5RT_ERR_UNSUPPORTED => Status::Unsupported,
            sys::GLM5RT_ERR_IO => Status::Io,
            sys::GLM5RT_ERR_FORMAT => Status::Format,
            sys::GLM5RT_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::GLM5RT_ERR_CACHE_FULL => Status::CacheFull,
            sys::GLM5RT_ERR_CANCELLED => Status::Cancelled,
            sys::GLM5RT_ERR_DEVICE => Status::Device,
            sys::GLM5RT_ERR_NO_DEVICE => Status::NoDevice,
            sys::GLM5RT_ERR_MISMATCH => Status::Mismatch,
            sys::GLM5RT_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::GLM5RT_ERR_NOT_FOUND => Status::NotFound,
            sys::GLM5RT_ERR_STATE => Status::State,
            sys::GLM5RT_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other),
        }
    }

    /// The numeric code of glm5rt.h.
    pub fn code(self) -> sys::glm5rt_status {
        match self {
            Status::InvalidArgument => sys::GLM5RT_ERR_INVALID_ARGUMENT,
            Status::Unsupported => sys::GLM5RT_ERR_UNSUPPORTED,
            Status::Io => sys::GLM5RT_ERR_IO,
            Status::Format => sys::GLM5RT_ERR_FORMAT,
            Status::OutOfMemory => sys::GLM5RT_ERR_OUT_OF_MEMORY,
            Status::CacheFull => sys::GLM5RT_ERR_CACHE_FULL,
            Status::Cancelled => sys::GLM5RT_ERR_CANCELLED,
            Status::Device => sys::GLM5RT_ERR_DEVICE,
            Status::NoDevice => sys::GLM5RT_ERR_NO_DEVICE,
            Status::Mismatch => sys::GLM5RT_ERR_MISMATCH,
            Status::BufferTooSmall => sys::GLM5RT_ERR_BUFFER_TOO_SMALL,
            Status::NotFound => sys::GLM5RT_ERR_NOT_FOUND,
            Status::State => sys::GLM5RT_ERR_STATE,
            Status::Internal => sys::GLM5RT_ERR_INTERNAL,
            Status::Other(code) => code,
        }
    }

    /// The library's short description ("cache full").
    pub fn description(self) -> &'static str {
        // SAFETY: glm5rt_status_string returns a static NUL-terminated string for any code.
        unsafe { CStr::from_ptr(sys::glm5rt_status_string(self.code())) }
            .to_str()
            .unwrap_or("?")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// A failed call: its status and the library's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// The error of the call that just returned `code` on this thread.
    pub(crate) fn last(code: sys::glm5rt_status) -> Error {
        // SAFETY: glm5rt_last_error never returns NULL; the text lives until the next failing call on
        // this thread, and it is copied before any other call.
        let message = unsafe { CStr::from_ptr(sys::glm5rt_last_error()) }
            .to_string_lossy()
            .into_owned();
        Error {
            status: Status::from_code(code),
            message,
        }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{} ({})", self.message, self.status)
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Turns a status code into a Result, reading the thread's last error on failure.
pub(crate) fn check(code: sys::glm5rt_status) -> Result<()> {
    if code == sys::GLM5RT_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}
