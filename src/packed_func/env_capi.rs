//! Python C-API entry points a Python host registers (`TVMBackendRegisterEnvCAPI`), so the
//! runtime can hold a reference to a raised Python exception without linking libpython.

use super::error::{Error, Result};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

static PY_INC_REF: AtomicUsize = AtomicUsize::new(0);
static PY_DEC_REF: AtomicUsize = AtomicUsize::new(0);
static PY_GIL_ENSURE: AtomicUsize = AtomicUsize::new(0);
static PY_GIL_RELEASE: AtomicUsize = AtomicUsize::new(0);
static PY_CHECK_SIGNALS: AtomicUsize = AtomicUsize::new(0);

/// Records one entry point by its Python C-API name.
///
/// # Safety
/// `ptr` must be the named CPython function (or one of the same C type), callable from any
/// thread for the rest of the process: the runtime calls it.
///
/// ```compile_fail,E0133
/// tvm_runtime::packed_func::env_capi::register("Py_IncRef", 1 as *mut std::ffi::c_void);
/// ```
pub unsafe fn register(name: &str, ptr: *mut c_void) -> Result<()> {
    let slot = match name {
        "Py_IncRef" => &PY_INC_REF,
        "Py_DecRef" => &PY_DEC_REF,
        "PyGILState_Ensure" => &PY_GIL_ENSURE,
        "PyGILState_Release" => &PY_GIL_RELEASE,
        "PyErr_CheckSignals" => &PY_CHECK_SIGNALS,
        _ => {
            return Err(Error::value_fmt(format_args!(
                "TVMBackendRegisterEnvCAPI: unknown env API {name} (known: Py_IncRef, \
                 Py_DecRef, PyGILState_Ensure, PyGILState_Release, PyErr_CheckSignals)"
            )))
        }
    };
    slot.store(ptr as usize, Ordering::Release);
    Ok(())
}

/// `PyGILState_Ensure`: CPython declares it `PyGILState_STATE PyGILState_Ensure(void)`, where
/// `PyGILState_STATE` is a C enum (an `int`), and the Python host registers CPython's own
/// function. (TVM v0.20's `EnvCAPIRegistry` declares it as returning `void*`, which reads a
/// register half the callee never wrote.)
type GilEnsure = unsafe extern "C" fn() -> c_int;
/// `PyGILState_Release(PyGILState_STATE)`: takes back the state `PyGILState_Ensure` returned.
type GilRelease = unsafe extern "C" fn(c_int);

fn with_gil(f: impl FnOnce()) {
    let ensure = PY_GIL_ENSURE.load(Ordering::Acquire);
    let release = PY_GIL_RELEASE.load(Ordering::Acquire);
    if ensure != 0 && release != 0 {
        // SAFETY: registered by the Python host as PyGILState_Ensure/Release, whose C types
        // are `GilEnsure` / `GilRelease`.
        unsafe {
            let ensure: GilEnsure = std::mem::transmute::<usize, GilEnsure>(ensure);
            let release: GilRelease = std::mem::transmute::<usize, GilRelease>(release);
            let state = ensure();
            f();
            release(state);
        }
    } else {
        f();
    }
}

fn call_ref_fn(slot: &AtomicUsize, obj: *mut c_void) {
    let f = slot.load(Ordering::Acquire);
    if f == 0 || obj.is_null() {
        return;
    }
    with_gil(|| {
        // SAFETY: registered by the Python host as Py_IncRef/Py_DecRef; `obj` is a PyObject*.
        unsafe {
            let f: unsafe extern "C" fn(*mut c_void) = std::mem::transmute(f);
            f(obj)
        }
    });
}

/// Adds a reference to a Python object (no-op when the host registered nothing).
pub fn py_inc_ref(obj: *mut c_void) {
    call_ref_fn(&PY_INC_REF, obj);
}

/// Drops a reference to a Python object (no-op when the host registered nothing).
pub fn py_dec_ref(obj: *mut c_void) {
    call_ref_fn(&PY_DEC_REF, obj);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI32;

    static ENSURED: AtomicI32 = AtomicI32::new(0);
    static RELEASED_WITH: AtomicI32 = AtomicI32::new(-1);
    static INC: AtomicI32 = AtomicI32::new(0);

    /// Shaped like CPython's: returns `PyGILState_UNLOCKED` (1), an `int`.
    unsafe extern "C" fn ensure() -> c_int {
        ENSURED.fetch_add(1, Ordering::SeqCst);
        1
    }
    unsafe extern "C" fn release(state: c_int) {
        RELEASED_WITH.store(state, Ordering::SeqCst);
    }
    unsafe extern "C" fn inc_ref(_: *mut c_void) {
        INC.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn gil_hooks_have_cpython_types() {
        // SAFETY: the hooks have the C types of the functions they stand for.
        unsafe {
            register("PyGILState_Ensure", ensure as GilEnsure as *mut c_void).unwrap();
            register("PyGILState_Release", release as GilRelease as *mut c_void).unwrap();
            register(
                "Py_IncRef",
                inc_ref as unsafe extern "C" fn(*mut c_void) as *mut c_void,
            )
            .unwrap();
        }
        py_inc_ref(8 as *mut c_void);
        assert!(INC.load(Ordering::SeqCst) >= 1);
        assert!(ENSURED.load(Ordering::SeqCst) >= 1);
        // The state the hook returned comes back to the release hook as the same `int`.
        assert_eq!(RELEASED_WITH.load(Ordering::SeqCst), 1);
    }
}
