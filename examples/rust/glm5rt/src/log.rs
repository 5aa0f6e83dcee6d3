//! The process-wide log sink. The library delivers whole lines, serialized (never two at once), on
//! whichever thread logs.
use std::ffi::{c_void, CStr};
use std::os::raw::c_char;
use std::sync::Mutex;

use glm5rt_sys as sys;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

impl LogLevel {
    fn from_raw(level: i32) -> LogLevel {
        match level {
            sys::GLM5RT_LOG_ERROR => LogLevel::Error,
            sys::GLM5RT_LOG_WARN => LogLevel::Warn,
            sys::GLM5RT_LOG_INFO => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }
    fn raw(self) -> i32 {
        match self {
            LogLevel::Error => sys::GLM5RT_LOG_ERROR,
            LogLevel::Warn => sys::GLM5RT_LOG_WARN,
            LogLevel::Info => sys::GLM5RT_LOG_INFO,
            LogLevel::Debug => sys::GLM5RT_LOG_DEBUG,
        }
    }
}

type Sink = Box<dyn Fn(LogLevel, &str) + Send + Sync>;

/// The installed sink (a leaked Box<Sink> as an address), freed when replaced.
static INSTALLED: Mutex<usize> = Mutex::new(0);

unsafe extern "C" fn trampoline(level: i32, line: *const c_char, user_data: *mut c_void) {
    let sink = &*(user_data as *const Sink);
    let line = CStr::from_ptr(line).to_string_lossy();
    // A panic must not unwind into C: drop it (logging is best effort).
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(LogLevel::from_raw(level), &line)));
}

/// Sends the library's log lines to `sink`; `None` restores the default (warnings and errors to
/// stderr).
pub fn set_log_callback(sink: Option<Sink>) {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    let new = sink.map(|s| Box::into_raw(Box::new(s)) as usize).unwrap_or(0);
    // SAFETY: the pointer stays valid until replaced here; the library takes its sink lock in
    // glm5rt_set_log_callback, so once it returns no call of the old sink is running.
    unsafe {
        if new != 0 {
            sys::glm5rt_set_log_callback(Some(trampoline), new as *mut c_void);
        } else {
            sys::glm5rt_set_log_callback(None, std::ptr::null_mut());
        }
        if *installed != 0 {
            drop(Box::from_raw(*installed as *mut Sink));
        }
    }
    *installed = new;
}

/// Lines above this level are dropped (default Warn).
pub fn set_log_level(level: LogLevel) {
    // SAFETY: thread-safe global setter.
    unsafe { sys::glm5rt_set_log_level(level.raw()) }
}
