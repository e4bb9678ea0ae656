//! Errors: last error, backtrace, Python error pass-through.

use crate::packed_func::error as e;
use std::ffi::{c_char, c_void, CStr};

/// Sets this thread's last error message (`TVMAPISetLastError`).
///
/// # Safety
/// `msg` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn TVMAPISetLastError(msg: *const c_char) {
    crate::c_boundary! {
        let s = if msg.is_null() {
            String::new()
        } else {
            // SAFETY: caller contract.
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned()
        };
        e::set_last_error_message(s);
        Ok(())
    }
}

/// Records a Python exception object as the last error (`TVMAPISetLastPythonError`).
///
/// # Safety
/// `py_object` NULL or a live Python object (the host's `Py_IncRef` is called on it).
#[no_mangle]
pub unsafe extern "C" fn TVMAPISetLastPythonError(py_object: *mut c_void) {
    crate::c_boundary! {
        // SAFETY: caller contract (`TVMAPISetLastPythonError` takes a PyObject*).
        unsafe { e::set_last_python_error(py_object) };
        Ok(())
    }
}

/// The Python exception object recorded as last error, or NULL (`TVMGetLastPythonError`).
#[no_mangle]
pub extern "C" fn TVMGetLastPythonError() -> *mut c_void {
    crate::c_boundary! { Ok(e::last_python_error()) }
}

/// This thread's last error message (`TVMGetLastError`); valid until the next error.
#[no_mangle]
pub extern "C" fn TVMGetLastError() -> *const c_char {
    crate::c_boundary! { Ok(e::last_error_ptr()) }
}

/// The backtrace of the last error (`TVMGetLastBacktrace`). This runtime records none:
/// messages carry their context instead, so this returns NULL.
#[no_mangle]
pub extern "C" fn TVMGetLastBacktrace() -> *const c_char {
    crate::c_boundary! { Ok(std::ptr::null()) }
}

/// Forgets the recorded Python exception (`TVMDropLastPythonError`).
#[no_mangle]
pub extern "C" fn TVMDropLastPythonError() {
    crate::c_boundary! {
        e::drop_last_python_error();
        Ok(())
    }
}

/// `TVMThrowLastError`: in the C++ reference this rethrows the last error as a C++
/// exception. A Rust library cannot throw into C++ frames, and unwinding across the C ABI
/// would be undefined behaviour, so this returns normally and leaves the last error in place
/// for the caller to read with `TVMGetLastError` (a documented difference).
#[no_mangle]
pub extern "C" fn TVMThrowLastError() {
    crate::c_boundary! { Ok(()) }
}
