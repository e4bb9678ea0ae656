//! The `extern "C"` surface: one file per section of `c_runtime_api.h` / `c_backend_api.h`.
//! Every entry converts its arguments, delegates, and runs inside [`crate::packed_func::error::guard`]
//! so that no panic crosses into C and failures land in `TVMGetLastError`.

pub mod backend;
pub mod device;
pub mod error;
pub mod func;
pub mod module;
pub mod ndarray;
pub mod object;

use crate::packed_func::error::{Error, Result};
use std::ffi::{c_char, CStr};

/// Reads a C string argument; NULL or non-UTF-8 is an error naming the parameter.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
pub(crate) unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::value(format!("{what} is NULL")));
    }
    // SAFETY: caller contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::value(format!("{what} is not valid UTF-8")))
}

/// Fails when an out-pointer is NULL.
pub(crate) fn check_out<T>(p: *mut T, what: &str) -> Result<()> {
    if p.is_null() {
        Err(Error::value(format!("{what} is NULL")))
    } else {
        Ok(())
    }
}
