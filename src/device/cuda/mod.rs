//! CUDA: `kDLCUDA` (2), `kDLCUDAHost` (3, pinned host memory) and `kDLCUDAManaged` (13)
//! through the CUDA driver API (cudarc's bindings, with the driver loaded at run time), and
//! TVM's `cuda` device modules.
//!
//! Nothing here touches the driver until a CUDA device is used: the backend object is free to
//! create, and the first call that needs the driver looks for `libcuda` itself, checks that
//! every entry point this backend calls is there (cudarc would panic on a missing one), and only
//! then lets cudarc load it. Without a driver the library still loads, `kExist` is 0, and every
//! other CUDA call fails with an error saying that no driver was found.
//!
//! Each device is driven through its primary context (what the CUDA runtime API uses, so memory
//! and streams interoperate with code built on it). As in the reference, every thread has a
//! current device (default 0; `SetDevice` and the calls that take a device change it) and a
//! current stream (default NULL, the legacy default stream).

pub mod api;
pub mod module;

use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::{RawHandle, RetValue};
use cudarc::driver::sys;
use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

pub use api::CudaDeviceApi;
pub use module::CudaModule;

/// The process-wide backend object (registered for all three device types; touches no
/// driver until used).
pub fn shared_api() -> std::sync::Arc<CudaDeviceApi> {
    static API: std::sync::LazyLock<std::sync::Arc<CudaDeviceApi>> =
        std::sync::LazyLock::new(|| std::sync::Arc::new(CudaDeviceApi::new()));
    API.clone()
}

/// Global functions naming the built-in CUDA device API (as the reference registers them);
/// device-plugin discovery skips them.
pub const DEVICE_API_GLOBALS: &[&str] = &["device_api.cuda", "device_api.cuda_host"];

/// The most devices a process may use (as the reference's `kMaxNumGPUs`).
pub const MAX_DEVICES: usize = 32;

/// The CUDA version of the driver-API bindings this backend is built against (what
/// `kApiVersion` reports, as the reference reports its toolkit's `CUDA_VERSION`).
pub const API_VERSION: i64 = 12040;

/// Set this environment variable to a non-empty value other than `0` to hide any CUDA driver
/// (the backend then behaves as on a machine without one).
pub const DISABLE_ENV: &str = "TVM_RUNTIME_CUDA_DISABLE";

/// Driver entry points this backend calls; all must be present before cudarc is used.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuCtxGetCurrent",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuMemGetInfo_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemAllocHost_v2",
    "cuMemFreeHost",
    "cuMemAllocManaged",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpyPeerAsync",
    "cuMemsetD32_v2",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventDestroy_v2",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuModuleGetGlobal_v2",
    "cuFuncSetAttribute",
    "cuLaunchKernel",
];

/// The loaded driver: devices and their primary contexts (retained on first use).
pub(crate) struct Driver {
    devices: Vec<sys::CUdevice>,
    contexts: Vec<OnceLock<usize>>,
    /// The driver's version (`cuDriverGetVersion`).
    pub version: i32,
}

static DRIVER: OnceLock<std::result::Result<Driver, String>> = OnceLock::new();

/// Finds `libcuda` the way cudarc will, and checks its entry points, without cudarc.
fn probe_library() -> std::result::Result<(), String> {
    let candidates = cudarc::get_lib_name_candidates("cuda");
    let mut last_err = String::from("no candidate names");
    for name in &candidates {
        // SAFETY: loading the CUDA driver library runs only its own initialisers.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => {
                for sym in REQUIRED_SYMBOLS {
                    let mut cname = sym.as_bytes().to_vec();
                    cname.push(0);
                    // SAFETY: only the symbol's presence is checked; it is never called here.
                    if unsafe { lib.get::<*const c_void>(&cname) }.is_err() {
                        return Err(format!(
                            "the CUDA driver {name} lacks {sym} (the driver is too old)"
                        ));
                    }
                }
                // Keep the library mapped: cudarc opens it again and resolves from it.
                std::mem::forget(lib);
                return Ok(());
            }
            Err(e) => last_err = e.to_string(),
        }
    }
    Err(format!(
        "no CUDA driver found: cannot load libcuda.so.1 or libcuda.so ({last_err})"
    ))
}

fn load_driver() -> std::result::Result<Driver, String> {
    if std::env::var(DISABLE_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
        return Err(format!("no CUDA driver: disabled by {DISABLE_ENV}"));
    }
    probe_library()?;
    // Every symbol is present, so cudarc's loader cannot panic; guard anyway so that no
    // panic ever reaches a C caller.
    let init = std::panic::catch_unwind(|| {
        // SAFETY: plain driver initialisation.
        let r = unsafe { sys::cuInit(0) };
        if r == sys::CUresult::CUDA_ERROR_NO_DEVICE {
            return Ok((Vec::new(), 0));
        }
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(format!(
                "the CUDA driver failed to initialise: cuInit returned {}",
                error_name(r)
            ));
        }
        let mut version = 0;
        // SAFETY: out pointer valid.
        unsafe { sys::cuDriverGetVersion(&mut version) };
        let mut count = 0;
        // SAFETY: out pointer valid.
        let r = unsafe { sys::cuDeviceGetCount(&mut count) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(format!("cuDeviceGetCount failed: {}", error_name(r)));
        }
        let mut devices = Vec::new();
        for i in 0..count.clamp(0, MAX_DEVICES as i32) {
            let mut d: sys::CUdevice = 0;
            // SAFETY: out pointer valid, ordinal in range.
            let r = unsafe { sys::cuDeviceGet(&mut d, i) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(format!("cuDeviceGet({i}) failed: {}", error_name(r)));
            }
            devices.push(d);
        }
        Ok((devices, version))
    });
    match init {
        Ok(Ok((devices, version))) => Ok(Driver {
            contexts: devices.iter().map(|_| OnceLock::new()).collect(),
            devices,
            version,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the CUDA driver could not be loaded (the loader panicked)".into()),
    }
}

/// The driver, loaded on first use; an error saying why when there is none.
pub(crate) fn driver() -> Result<&'static Driver> {
    match DRIVER.get_or_init(load_driver) {
        Ok(d) => Ok(d),
        Err(e) => Err(Error::tvm_fmt(format_args!("CUDA: {e}"))),
    }
}

/// Whether a usable CUDA driver is present (loads it on first call).
pub fn driver_available() -> bool {
    driver().is_ok()
}

/// The number of CUDA devices (0 without a driver).
pub fn device_count() -> usize {
    driver().map(|d| d.count()).unwrap_or(0)
}

/// The driver's version (`cuDriverGetVersion`, e.g. 12040), or `None` without a driver.
pub fn driver_version() -> Option<i32> {
    driver().ok().map(|d| d.version)
}

/// Why the driver is unusable, or `None` when it works.
pub fn driver_error() -> Option<String> {
    driver().err().map(|e| e.into_message())
}

/// The driver's name for an error code (`CUDA_ERROR_...`).
pub(crate) fn error_name(r: sys::CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: out pointer valid; the driver returns a static string or leaves it NULL.
    unsafe { sys::cuGetErrorName(r, &mut p) };
    if p.is_null() {
        format!("{r:?}")
    } else {
        // SAFETY: a NUL-terminated static string from the driver.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// The driver's description of an error code (`out of memory`, ...).
pub(crate) fn error_string(r: sys::CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: as in `error_name`.
    unsafe { sys::cuGetErrorString(r, &mut p) };
    if p.is_null() {
        format!("{r:?}")
    } else {
        // SAFETY: as in `error_name`.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Checks a call the reference makes through the runtime API (`CUDA_CALL`); the driver being
/// shut down at exit counts as success, as there.
pub(crate) fn check_rt(r: sys::CUresult) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS || r == sys::CUresult::CUDA_ERROR_DEINITIALIZED {
        Ok(())
    } else {
        Err(Error::internal_fmt(format_args!(
            "Check failed: (e == cudaSuccess || e == cudaErrorCudartUnloading) is false: CUDA: {}",
            error_string(r)
        )))
    }
}

/// Checks a driver call (`CUDA_DRIVER_CALL`): `CUDAError: <call> failed with error: <name>`.
pub(crate) fn check_drv(r: sys::CUresult, call: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS || r == sys::CUresult::CUDA_ERROR_DEINITIALIZED {
        Ok(())
    } else {
        Err(Error::tvm_fmt(format_args!(
            "CUDAError: {call} failed with error: {}",
            error_name(r)
        )))
    }
}

impl Driver {
    /// The number of devices.
    pub fn count(&self) -> usize {
        self.devices.len()
    }

    /// The driver handle of a device ordinal; an error for a bad ordinal.
    pub fn device(&self, id: i32) -> Result<sys::CUdevice> {
        if id < 0 || id as usize >= self.devices.len() {
            return Err(Error::internal_fmt(format_args!(
                "Check failed: (e == cudaSuccess || e == cudaErrorCudartUnloading) is false: \
                 CUDA: invalid device ordinal (device {id}; {} CUDA device(s) present)",
                self.devices.len()
            )));
        }
        Ok(self.devices[id as usize])
    }

    /// The primary context of a device, retained on first use.
    pub fn context(&self, id: i32) -> Result<sys::CUcontext> {
        let d = self.device(id)?;
        let slot = &self.contexts[id as usize];
        if let Some(&c) = slot.get() {
            return Ok(c as sys::CUcontext);
        }
        let mut c: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: out pointer valid, device handle from the driver. A race retains twice,
        // which only bumps the primary context's reference count.
        check_rt(unsafe { sys::cuDevicePrimaryCtxRetain(&mut c, d) })?;
        Ok(*slot.get_or_init(|| c as usize) as sys::CUcontext)
    }

    /// Makes device `id`'s context current on this thread (without changing the thread's
    /// current device).
    pub fn bind(&self, id: i32) -> Result<()> {
        let want = self.context(id)?;
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: out pointer valid.
        let r = unsafe { sys::cuCtxGetCurrent(&mut cur) };
        if r != sys::CUresult::CUDA_SUCCESS || cur != want {
            // SAFETY: a live primary context.
            check_rt(unsafe { sys::cuCtxSetCurrent(want) })?;
        }
        Ok(())
    }

    /// Makes `id` this thread's current device and binds its context (`cudaSetDevice`).
    pub fn activate(&self, id: i32) -> Result<()> {
        self.bind(id)?;
        CURRENT_DEVICE.with(|c| c.set(id));
        Ok(())
    }
}

thread_local! {
    static CURRENT_DEVICE: Cell<i32> = const { Cell::new(0) };
    static CURRENT_STREAM: Cell<usize> = const { Cell::new(0) };
}

/// This thread's current CUDA device.
pub fn current_device() -> i32 {
    CURRENT_DEVICE.with(|c| c.get())
}

/// This thread's current CUDA stream (NULL: the default stream).
pub fn current_stream() -> sys::CUstream {
    CURRENT_STREAM.with(|c| c.get()) as sys::CUstream
}

pub(crate) fn set_current_stream(s: sys::CUstream) {
    CURRENT_STREAM.with(|c| c.set(s as usize));
}

/// Registers the CUDA loaders and helper globals.
pub fn register(b: &mut Registrar) {
    module::register(b);
    for name in DEVICE_API_GLOBALS {
        b.add(name, |_a, rv| {
            // SAFETY: the process-wide CUDA device API, which lives as long as the process.
            *rv = RetValue::Handle(unsafe {
                RawHandle::new(std::sync::Arc::as_ptr(&shared_api()) as *mut c_void)
            });
            Ok(())
        });
    }
    b.add("runtime.GetCudaDeviceCount", |_a, rv| {
        driver()?;
        *rv = RetValue::Int(device_count() as i64);
        Ok(())
    });
    b.add("runtime.get_cuda_stream", |_a, rv| {
        // SAFETY: the current thread's CUDA stream, as the reference returns it.
        *rv = RetValue::Handle(unsafe { RawHandle::new(current_stream() as *mut c_void) });
        Ok(())
    });
    b.add("runtime.GetCudaFreeMemory", |_a, rv| {
        let d = driver()?;
        d.bind(current_device())?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: out pointers valid; a context is current.
        check_rt(unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
        *rv = RetValue::Str(format!(
            "Current CUDA memory is {free} bytes free out of {total} bytes on device"
        ));
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_unique_and_known() {
        let mut s: Vec<_> = REQUIRED_SYMBOLS.to_vec();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), REQUIRED_SYMBOLS.len());
    }

    #[test]
    fn no_driver_is_an_error_not_a_panic() {
        if driver_available() {
            eprintln!("CUDA driver present; nothing to check");
            return;
        }
        assert_eq!(device_count(), 0);
        let e = driver().err().unwrap();
        assert!(e.message.starts_with("CUDA: "), "{}", e.message);
        assert!(e.message.contains("CUDA driver"), "{}", e.message);
    }
}
