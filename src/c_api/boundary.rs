//! The C boundary every `extern "C"` entry runs inside (the shape of rustls-ffi's
//! `ffi_panic_boundary!`): the body returns a [`Result`]; a panic is caught; an error or a
//! panic is recorded as this thread's last error (`TVMGetLastError`); and what the entry hands
//! back to C on success and on failure is chosen by its return type ([`CReturn`]).

use crate::packed_func::error::{panic_to_error, set_last_error, Error, Result};
use std::ffi::c_int;

/// A return type a C entry can have, and what it returns on success and on failure.
pub trait CReturn {
    /// What the body of an entry with this return type produces on success.
    type Ok;
    /// The value handed to C on success.
    fn success(ok: Self::Ok) -> Self;
    /// The value handed to C after an error or a panic (the last error is already set).
    fn failure() -> Self;
}

/// Status codes: 0 on success, -1 on failure (TVM's convention).
impl CReturn for c_int {
    type Ok = ();
    #[inline(always)]
    fn success(_: ()) -> c_int {
        0
    }
    #[inline(always)]
    fn failure() -> c_int {
        -1
    }
}

/// Entries that return nothing: failure is visible only through the last error.
impl CReturn for () {
    type Ok = ();
    #[inline(always)]
    fn success(_: ()) {}
    #[inline(always)]
    fn failure() {}
}

/// Entries that return a pointer: NULL on failure.
impl<T> CReturn for *mut T {
    type Ok = *mut T;
    #[inline(always)]
    fn success(p: *mut T) -> *mut T {
        p
    }
    #[inline(always)]
    fn failure() -> *mut T {
        std::ptr::null_mut()
    }
}

/// Entries that return a pointer to constant data: NULL on failure.
impl<T> CReturn for *const T {
    type Ok = *const T;
    #[inline(always)]
    fn success(p: *const T) -> *const T {
        p
    }
    #[inline(always)]
    fn failure() -> *const T {
        std::ptr::null()
    }
}

/// Runs the body of a C entry: what [`c_boundary!`](crate::c_boundary) expands to. Use the
/// macro, not this function, so that every entry reads the same.
#[inline(always)]
pub fn run<R: CReturn>(body: impl FnOnce() -> Result<R::Ok>) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(v)) => R::success(v),
        Ok(Err(e)) => {
            record_error(e);
            R::failure()
        }
        Err(payload) => {
            record_panic(payload);
            R::failure()
        }
    }
}

/// The error arm of [`run`], shared by every entry (out of line: one copy of the recording
/// and of the error's drop, not one per entry).
#[cold]
#[inline(never)]
fn record_error(e: Error) {
    set_last_error(&e);
}

/// The panic arm of [`run`], shared by every entry.
#[cold]
#[inline(never)]
fn record_panic(payload: Box<dyn std::any::Any + Send>) {
    // Formatting the payload may itself panic (a `Display` impl of the payload's message
    // cannot, but be safe): nothing escapes either way.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        set_last_error(&panic_to_error(payload))
    }));
}

/// [`run`] kept out of line (`#[cold]`): for entries whose fast path runs first, so that the
/// general path's unwinding landing pad and stack frame do not weigh on the fast path.
#[cold]
#[inline(never)]
pub fn run_cold<R: CReturn>(body: impl FnOnce() -> Result<R::Ok>) -> R {
    run(body)
}

/// The C boundary: wraps the body of an `extern "C"` entry. The body is a block that
/// evaluates to `Result<T>`, where `T` is what the entry's return type takes on success
/// (`()` for `c_int` and `()` entries, the pointer for pointer entries); `?` and `return
/// Err(..)` work inside it. A panic is caught; an error or a panic becomes the last error and
/// the entry returns `-1` / NULL / nothing.
///
/// ```
/// # use std::ffi::c_int;
/// #[no_mangle]
/// pub extern "C" fn example_entry(x: c_int) -> c_int {
///     tvm_runtime::c_boundary! {
///         if x < 0 {
///             return Err(tvm_runtime::Error::value("example_entry: x is negative"));
///         }
///         Ok(())
///     }
/// }
/// assert_eq!(example_entry(1), 0);
/// assert_eq!(example_entry(-1), -1);
/// ```
///
/// `c_boundary! { #[cold] ... }` runs the body out of line ([`run_cold`]): what an entry with a
/// fast path before its boundary uses.
#[macro_export]
macro_rules! c_boundary {
    (#[cold] $($body:tt)*) => {
        $crate::c_api::boundary::run_cold(move || { $($body)* })
    };
    ($($body:tt)*) => {
        $crate::c_api::boundary::run(move || { $($body)* })
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packed_func::error::last_error_string;

    #[test]
    fn status_entries_return_zero_or_minus_one() {
        let ok: c_int = run(|| Ok(()));
        assert_eq!(ok, 0);
        let err: c_int = run(|| Err(Error::value("boundary test: bad")));
        assert_eq!(err, -1);
        assert_eq!(last_error_string(), "ValueError: boundary test: bad");
    }

    #[test]
    fn panics_are_caught_and_recorded() {
        let p: *mut u8 = run(|| panic!("boundary test: boom"));
        assert!(p.is_null());
        assert!(last_error_string().contains("boundary test: boom"));
        let c: *const u8 = run(|| -> Result<*const u8> { panic!("boundary test: again") });
        assert!(c.is_null());
        run::<()>(|| panic!("boundary test: unit"));
        assert!(last_error_string().contains("boundary test: unit"));
    }

    #[test]
    fn pointer_entries_pass_their_value() {
        let x = 5u8;
        let p: *const u8 = run(|| Ok(&x as *const u8));
        assert_eq!(p, &x as *const u8);
    }
}
