//! Helpers for the C conventions: the size-query idiom and C strings.
use std::ffi::CString;
use std::os::raw::c_char;
use std::path::Path;

use glm5rt_sys as sys;

use crate::error::{check, Error, Result, Status};

/// Calls `f(buf, capacity, &mut len)` once to learn the size, then with a buffer of that size.
pub(crate) fn query_bytes(mut f: impl FnMut(*mut c_char, usize, *mut usize) -> i32) -> Result<Vec<u8>> {
    let mut len = 0usize;
    check(f(std::ptr::null_mut(), 0, &mut len))?;
    let mut buf = vec![0u8; len];
    loop {
        let code = f(buf.as_mut_ptr().cast(), buf.len(), &mut len);
        if code == sys::GLM5RT_ERR_BUFFER_TOO_SMALL && len > buf.len() {
            buf.resize(len, 0); // the size grew between the calls: try again
            continue;
        }
        check(code)?;
        buf.truncate(len);
        return Ok(buf);
    }
}

/// For calls that consume input (a stream push): never a size query, which would already be the
/// real call; a buffer first, and on BUFFER_TOO_SMALL (nothing consumed) one of the size needed.
pub(crate) fn with_buffer(mut f: impl FnMut(*mut c_char, usize, *mut usize) -> i32) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    let mut len = 0usize;
    loop {
        let code = f(buf.as_mut_ptr().cast(), buf.len(), &mut len);
        if code == sys::GLM5RT_ERR_BUFFER_TOO_SMALL && len > buf.len() {
            buf.resize(len, 0);
            continue;
        }
        check(code)?;
        buf.truncate(len);
        return Ok(buf);
    }
}

/// The same for arrays of token ids.
pub(crate) fn query_ids(mut f: impl FnMut(*mut i32, usize, *mut usize) -> i32) -> Result<Vec<i32>> {
    let mut n = 0usize;
    check(f(std::ptr::null_mut(), 0, &mut n))?;
    let mut ids = vec![0i32; n];
    loop {
        let code = f(ids.as_mut_ptr(), ids.len(), &mut n);
        if code == sys::GLM5RT_ERR_BUFFER_TOO_SMALL && n > ids.len() {
            ids.resize(n, 0);
            continue;
        }
        check(code)?;
        ids.truncate(n);
        return Ok(ids);
    }
}

pub(crate) fn utf8(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes)
        .map_err(|e| Error::new(Status::Internal, format!("the library returned invalid UTF-8: {e}")))
}

pub(crate) fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(Status::InvalidArgument, format!("{what} contains a NUL byte")))
}

pub(crate) fn c_path(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!("path {} contains a NUL byte", path.display()),
        )
    })
}
