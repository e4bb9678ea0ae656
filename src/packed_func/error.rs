//! Errors: the Rust error type and the thread-local "last error" the C API reports.
//!
//! Messages follow the `Kind: message` form that TVM's Python client parses from the first line
//! (`ValueError`, `TypeError`, `AttributeError`, `IndexError`, `TVMError`, ...).

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CString};
use std::fmt;

/// The error kinds TVM's clients map to exception classes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Generic runtime failure (`TVMError`).
    TVMError,
    /// Bad argument value (`ValueError`).
    ValueError,
    /// Bad argument type (`TypeError`).
    TypeError,
    /// Unknown attribute or function (`AttributeError`).
    AttributeError,
    /// Index out of range (`IndexError`).
    IndexError,
    /// Invariant broken inside the runtime (`InternalError`).
    InternalError,
    /// Requested something not built in (`RuntimeError`).
    RuntimeError,
    /// A message taken verbatim from a callee (its first line names its own kind).
    Verbatim,
    /// A Python exception object raised in a callback, passed through untouched.
    Python,
}

impl ErrorKind {
    /// The name the Python client looks up.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::TVMError => "TVMError",
            ErrorKind::ValueError => "ValueError",
            ErrorKind::TypeError => "TypeError",
            ErrorKind::AttributeError => "AttributeError",
            ErrorKind::IndexError => "IndexError",
            ErrorKind::InternalError => "InternalError",
            ErrorKind::RuntimeError => "RuntimeError",
            ErrorKind::Verbatim | ErrorKind::Python => "",
        }
    }
}

/// A runtime error: a kind and a message, behind one pointer, so that a `Result` of the
/// runtime is a word wider than its value at most (and `Result<()>` a single word) and the
/// many `?` sites move one pointer, not the whole error. Reads and writes its fields through
/// [`ErrorInner`] (`err.kind`, `err.message`).
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<ErrorInner>);

/// The fields of an [`Error`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorInner {
    /// What kind of error.
    pub kind: ErrorKind,
    /// The message, without the kind prefix.
    pub message: String,
    /// The Python exception object's address, for [`ErrorKind::Python`]. Private: the
    /// runtime calls the host's `Py_IncRef` on it, so safe code must not forge one.
    ///
    /// ```compile_fail,E0451
    /// let e = tvm_runtime::packed_func::error::ErrorInner { kind: tvm_runtime::ErrorKind::Python, message: String::new(), python_object: 8 };
    /// ```
    python_object: usize,
}

impl std::ops::Deref for Error {
    type Target = ErrorInner;
    fn deref(&self) -> &ErrorInner {
        &self.0
    }
}

impl std::ops::DerefMut for Error {
    fn deref_mut(&mut self) -> &mut ErrorInner {
        &mut self.0
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Error {
    /// Builds an error of a kind. Out of line and cold, like [`Error::with_args`]: an error
    /// site passes its message (one copy per message type, not an allocation and a copy per
    /// site).
    #[cold]
    #[inline(never)]
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self::from_string(kind, message.into())
    }

    #[cold]
    #[inline(never)]
    fn from_string(kind: ErrorKind, message: String) -> Self {
        Error(Box::new(ErrorInner {
            kind,
            message,
            python_object: 0,
        }))
    }

    /// The message, taken out of the error.
    pub fn into_message(self) -> String {
        self.0.message
    }

    /// A `TVMError`.
    #[cold]
    #[inline(never)]
    pub fn tvm(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::TVMError, message)
    }

    /// A `ValueError`.
    #[cold]
    #[inline(never)]
    pub fn value(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ValueError, message)
    }

    /// A `TypeError`.
    #[cold]
    #[inline(never)]
    pub fn type_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::TypeError, message)
    }

    /// An `IndexError`.
    #[cold]
    #[inline(never)]
    pub fn index(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::IndexError, message)
    }

    /// An `AttributeError`.
    #[cold]
    #[inline(never)]
    pub fn attribute(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::AttributeError, message)
    }

    /// An `InternalError`.
    #[cold]
    #[inline(never)]
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InternalError, message)
    }

    /// Builds an error of a kind from `format_args!`. Out of line and cold, so that the many
    /// error sites stay small: each passes its arguments instead of formatting in place.
    #[cold]
    #[inline(never)]
    pub fn with_args(kind: ErrorKind, args: fmt::Arguments<'_>) -> Self {
        Self::from_string(kind, fmt::format(args))
    }

    /// [`Error::tvm`] from `format_args!`.
    #[cold]
    pub fn tvm_fmt(args: fmt::Arguments<'_>) -> Self {
        Self::with_args(ErrorKind::TVMError, args)
    }

    /// [`Error::value`] from `format_args!`.
    #[cold]
    pub fn value_fmt(args: fmt::Arguments<'_>) -> Self {
        Self::with_args(ErrorKind::ValueError, args)
    }

    /// [`Error::type_error`] from `format_args!`.
    #[cold]
    pub fn type_error_fmt(args: fmt::Arguments<'_>) -> Self {
        Self::with_args(ErrorKind::TypeError, args)
    }

    /// [`Error::index`] from `format_args!`.
    #[cold]
    pub fn index_fmt(args: fmt::Arguments<'_>) -> Self {
        Self::with_args(ErrorKind::IndexError, args)
    }

    /// [`Error::attribute`] from `format_args!`.
    #[cold]
    pub fn attribute_fmt(args: fmt::Arguments<'_>) -> Self {
        Self::with_args(ErrorKind::AttributeError, args)
    }

    /// [`Error::internal`] from `format_args!`.
    #[cold]
    pub fn internal_fmt(args: fmt::Arguments<'_>) -> Self {
        Self::with_args(ErrorKind::InternalError, args)
    }

    /// Captures this thread's last error, as a callee that returned non-zero left it.
    #[cold]
    #[inline(never)]
    pub fn from_last() -> Self {
        // One look at the last error (no copy of its message: it is parsed in place).
        LAST_ERROR.with(|e| match &*e.borrow() {
            LastError::Python(py) if !py.is_null() => {
                let mut e = Error::new(ErrorKind::Python, "a Python exception was raised");
                e.python_object = *py as usize;
                e
            }
            // Never recorded (a NULL object is not stored), read as before all the same.
            LastError::Python(_) => Error::tvm("a Python exception was raised"),
            LastError::Message(c) if !c.as_bytes().is_empty() => {
                Error::from_message(&c.to_string_lossy())
            }
            _ => Error::tvm("a callee failed without setting an error message"),
        })
    }

    /// Prefixes the message with where it happened: `"{context}: {message}"`.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        match self.kind {
            ErrorKind::Python => {}
            ErrorKind::Verbatim => {
                // Keep the callee's "Kind: " first; put the context after it.
                if let Some(pos) = super::text::find(&self.message, ": ") {
                    let (k, m) = self.message.split_at(pos + 2);
                    self.message = format!("{k}{context}: {m}");
                }
            }
            _ => self.message = format!("{context}: {}", self.message),
        }
        self
    }

    /// Parses a message in `Kind: message` form (as set through `TVMAPISetLastError` by a
    /// callee) back into an error; unknown kinds stay part of the message as a `TVMError`.
    pub fn from_message(msg: &str) -> Self {
        // The first line (a `\r` before its `\n` cannot be part of a `": "`, so it may stay).
        let first = &msg[..msg.find('\n').unwrap_or(msg.len())];
        if let Some(pos) = super::text::find(first, ": ") {
            let name = &first[..pos];
            for kind in [
                ErrorKind::ValueError,
                ErrorKind::TypeError,
                ErrorKind::AttributeError,
                ErrorKind::IndexError,
                ErrorKind::InternalError,
                ErrorKind::RuntimeError,
                ErrorKind::TVMError,
            ] {
                if kind.name() == name {
                    return Error::new(kind, &msg[pos + 2..]);
                }
            }
            // A kind is `[A-Za-z0-9_.]+`, byte by byte, as in TVM's C++ runtime.
            if !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
            {
                return Error::new(ErrorKind::Verbatim, msg);
            }
        }
        Error::tvm(msg)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::Verbatim | ErrorKind::Python => f.write_str(&self.message),
            k => write!(f, "{}: {}", k.name(), self.message),
        }
    }
}

impl std::error::Error for Error {}

/// Result with the runtime's error.
pub type Result<T> = std::result::Result<T, Error>;

/// Returns early with an error of the given kind and a formatted message.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::packed_func::error::Error::with_args(
            $crate::packed_func::error::ErrorKind::$kind,
            format_args!($($arg)*),
        ))
    };
}

/// Returns early with an error unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $kind:ident, $($arg:tt)*) => {
        if !$cond {
            $crate::bail!($kind, $($arg)*);
        }
    };
}

/// What the last failing call on this thread left behind.
enum LastError {
    None,
    Message(CString),
    Python(*mut c_void),
}

thread_local! {
    static LAST_ERROR: RefCell<LastError> = const { RefCell::new(LastError::None) };
}

fn to_cstring(msg: String) -> CString {
    CString::new(msg).unwrap_or_else(|e| {
        let mut bytes = e.into_vec();
        bytes.retain(|&b| b != 0);
        CString::new(bytes).unwrap_or_default()
    })
}

/// Records an error as this thread's last error.
pub fn set_last_error(err: &Error) {
    if err.kind == ErrorKind::Python {
        // SAFETY: a Python error's object came from the last error (`Error::from_last`),
        // which the host set to a live Python object; `python_object` is private to this
        // module, so no other code can forge one.
        unsafe { set_last_python_error(err.python_object as *mut c_void) };
    } else {
        set_last_error_message(err.to_string());
    }
}

fn replace_last(new: LastError) {
    let old = LAST_ERROR.with(|e| std::mem::replace(&mut *e.borrow_mut(), new));
    if let LastError::Python(p) = old {
        super::env_capi::py_dec_ref(p);
    }
}

/// Records a message verbatim as this thread's last error.
pub fn set_last_error_message(msg: String) {
    replace_last(LastError::Message(to_cstring(msg)));
}

/// Records a Python exception object as this thread's last error, holding a reference to it
/// (through the host's `Py_IncRef`) until it is replaced or dropped.
///
/// # Safety
/// `obj` must be NULL or a live Python object (the host's `Py_IncRef` is called on it).
///
/// ```compile_fail,E0133
/// tvm_runtime::packed_func::error::set_last_python_error(8 as *mut std::ffi::c_void);
/// ```
pub unsafe fn set_last_python_error(obj: *mut c_void) {
    let current = last_python_error();
    if current == obj {
        return;
    }
    super::env_capi::py_inc_ref(obj);
    replace_last(LastError::Python(obj));
}

/// This thread's last error message; NULL when the last error is a Python object or none.
/// The pointer stays valid until the next error is recorded on this thread.
pub fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|e| match &*e.borrow() {
        LastError::Message(c) => c.as_ptr(),
        _ => std::ptr::null(),
    })
}

/// This thread's last error as text (empty when none).
pub fn last_error_string() -> String {
    LAST_ERROR.with(|e| match &*e.borrow() {
        LastError::Message(c) => c.to_string_lossy().into_owned(),
        LastError::Python(_) => "TVMError: a Python exception was raised".to_string(),
        LastError::None => String::new(),
    })
}

/// The Python exception object recorded as last error, or NULL.
pub fn last_python_error() -> *mut c_void {
    LAST_ERROR.with(|e| match &*e.borrow() {
        LastError::Python(p) => *p,
        _ => std::ptr::null_mut(),
    })
}

/// Forgets a recorded Python exception object (the Python side took it back).
pub fn drop_last_python_error() {
    if !last_python_error().is_null() {
        replace_last(LastError::Message(CString::default()));
    }
}

/// Turns a caught panic payload into an error.
pub fn panic_to_error(payload: Box<dyn Any + Send>) -> Error {
    let msg: &str = if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "unknown panic"
    };
    Error::internal_fmt(format_args!("panic inside the runtime: {msg}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_kinds_are_ascii() {
        let known = Error::from_message("ValueError: bad\nmore");
        assert_eq!(known.kind, ErrorKind::ValueError);
        assert_eq!(known.to_string(), "ValueError: bad\nmore");
        let own = Error::from_message("my.Kind_2: text");
        assert_eq!(own.kind, ErrorKind::Verbatim);
        assert_eq!(own.to_string(), "my.Kind_2: text");
        // Non-ASCII letters and digits do not make a kind (TVM's C++ runtime tests bytes).
        for msg in ["Fehlerä: text", "Kind\u{0663}: text", "Σ: text"] {
            let e = Error::from_message(msg);
            assert_eq!(e.kind, ErrorKind::TVMError, "{msg}");
            assert_eq!(e.to_string(), format!("TVMError: {msg}"));
        }
        assert_eq!(Error::from_message(": x").to_string(), "TVMError: : x");
        assert_eq!(
            Error::from_message("a b: x").to_string(),
            "TVMError: a b: x"
        );
    }
}
