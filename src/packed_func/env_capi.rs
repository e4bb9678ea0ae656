//! Python C-API entry points a Python host registers (`TVMBackendRegisterEnvCAPI`), so the
//! runtime can hold a reference to a raised Python exception without linking libpython.

use super::error::{Error, Result};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

static PY_INC_REF: AtomicUsize = AtomicUsize::new(0);
static PY_DEC_REF: AtomicUsize = AtomicUsize::new(0);
static PY_GIL_ENSURE: AtomicUsize = AtomicUsize::new(0);
static PY_GIL_RELEASE: AtomicUsize = AtomicUsize::new(0);
static PY_CHECK_SIGNALS: AtomicUsize = AtomicUsize::new(0);

/// Records one entry point by its Python C-API name.
pub fn register(name: &str, ptr: *mut c_void) -> Result<()> {
    let slot = match name {
        "Py_IncRef" => &PY_INC_REF,
        "Py_DecRef" => &PY_DEC_REF,
        "PyGILState_Ensure" => &PY_GIL_ENSURE,
        "PyGILState_Release" => &PY_GIL_RELEASE,
        "PyErr_CheckSignals" => &PY_CHECK_SIGNALS,
        _ => {
            return Err(Error::value(format!(
                "TVMBackendRegisterEnvCAPI: unknown env API {name} (known: Py_IncRef, \
                 Py_DecRef, PyGILState_Ensure, PyGILState_Release, PyErr_CheckSignals)"
            )))
        }
    };
    slot.store(ptr as usize, Ordering::Release);
    Ok(())
}

fn with_gil(f: impl FnOnce()) {
    let ensure = PY_GIL_ENSURE.load(Ordering::Acquire);
    let release = PY_GIL_RELEASE.load(Ordering::Acquire);
    if ensure != 0 && release != 0 {
        // SAFETY: registered by the Python host as PyGILState_Ensure/Release.
        unsafe {
            let ensure: unsafe extern "C" fn() -> *mut c_void = std::mem::transmute(ensure);
            let release: unsafe extern "C" fn(*mut c_void) = std::mem::transmute(release);
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
