//! OpenCL: `kDLOpenCL` (4) through the OpenCL API (`libOpenCL.so.1` loaded at run time), and
//! TVM's `opencl` device modules.
//!
//! - [`ffi`]: the OpenCL C types, constants and entry points used, and the library's loader;
//! - [`api`]: the device API (attributes, buffers and images, copies, command queues as
//!   streams, the workspace pool);
//! - [`module`]: TVM's `opencl` modules (OpenCL C source and function information), built per
//!   kernel and device on first use, and kernel launch;
//! - this file: the platform state (devices, contexts, default queues), errors and globals.
//!
//! Nothing is loaded until an OpenCL device is used. Without `libOpenCL` or a platform the
//! library still loads and works, `kExist` answers 0, and OpenCL calls fail with the reason.
//! As the reference, the devices are the GPUs of every platform, or, when there is no GPU,
//! the CPU devices (so a CPU driver such as POCL serves as the OpenCL device); devices below
//! OpenCL 1.2 are left out. Device ids number that list. Each platform has one context and
//! each device one in-order default queue; every thread has a current device (default 0) and
//! a current stream (NULL: the device's default queue).

pub mod api;
pub mod ffi;
pub mod module;

use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::{RawHandle, RetValue};
use ffi::{cl_command_queue, cl_context, cl_device_id, cl_int, cl_platform_id};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

pub use api::{ClBuffer, OpenclDeviceApi};
pub use module::OpenclModule;

/// Set this environment variable to a non-empty value other than `0` to hide any OpenCL
/// platform (the backend then behaves as on a machine without one).
pub const DISABLE_ENV: &str = "TVM_RUNTIME_OPENCL_DISABLE";

/// Set this environment variable to a non-empty value other than `0` to treat every device as
/// without image support (texture memory scopes are then refused as on such a device).
pub const NO_IMAGES_ENV: &str = "TVM_RUNTIME_OPENCL_NO_IMAGES";

/// The environment variable that overrides the warp size reported (default 1), as in the
/// reference.
pub const WARP_SIZE_ENV: &str = "TVM_OPENCL_WARP_SIZE";

/// The loaded OpenCL library's entry points.
pub(crate) type Cl = ffi::Api;

/// One OpenCL device as TVM numbers it.
pub(crate) struct Device {
    /// The driver's handle.
    pub id: cl_device_id,
    /// Index of its platform's context in [`Platforms::contexts`].
    pub context: usize,
    /// The default in-order queue.
    pub queue: cl_command_queue,
    /// A queue of the runtime's own for the zeroed tails of new buffers (api.rs, ZERO_TAIL):
    /// nothing else is queued there, so waiting for a tail waits for that fill alone.
    pub fill_queue: cl_command_queue,
    /// `CL_DEVICE_NAME`.
    pub name: String,
    /// `CL_DEVICE_VERSION` (`OpenCL <major>.<minor> <vendor info>`).
    pub version: String,
    /// Whether images are supported (`CL_DEVICE_IMAGE_SUPPORT`).
    pub image_support: bool,
}

/// The platforms' devices, contexts and default queues, made once per process.
pub(crate) struct Platforms {
    /// The loaded library.
    pub cl: &'static Cl,
    /// One context per platform that has devices.
    pub contexts: Vec<cl_context>,
    /// The devices, in TVM's numbering.
    pub devices: Vec<Device>,
    /// The platform names (for `tvmrt devices` and errors).
    pub platform_names: Vec<String>,
}

// SAFETY: OpenCL contexts, devices and command queues are thread-safe objects (the OpenCL
// specification, "Shared OpenCL Objects"); the handles are never freed while the process runs.
unsafe impl Send for Platforms {}
// SAFETY: as above.
unsafe impl Sync for Platforms {}

static PLATFORMS: OnceLock<std::result::Result<Platforms, String>> = OnceLock::new();

/// The name of an OpenCL error code (`CL_OUT_OF_RESOURCES`, ...).
pub fn error_name(code: cl_int) -> &'static str {
    ffi::error_text(code)
}

/// An error for a failed OpenCL call: `OpenCL error CL_... (code) in <call>`.
pub(crate) fn cl_error(code: cl_int, call: &str) -> Error {
    Error::tvm_fmt(format_args!(
        "OpenCL error {} ({code}) in {call}",
        error_name(code)
    ))
}

/// Checks a call's status.
pub(crate) fn check(r: cl_int, call: &str) -> Result<()> {
    match r {
        0 => Ok(()),
        code => Err(cl_error(code, call)),
    }
}

/// Checks a result whose error is a status.
pub(crate) fn ok<T>(r: std::result::Result<T, cl_int>, call: &str) -> Result<T> {
    r.map_err(|code| cl_error(code, call))
}

/// The object a create call returned, or its status when that is not `CL_SUCCESS`.
pub(crate) fn created<T>(obj: T, status: cl_int) -> std::result::Result<T, cl_int> {
    if status == ffi::CL_SUCCESS {
        Ok(obj)
    } else {
        Err(status)
    }
}

/// A variable-size property through an OpenCL `clGet*Info` call, given as
/// `(size, value, size_ret)`: its size first, then its bytes.
pub(crate) fn info_bytes(
    query: &mut dyn FnMut(usize, *mut c_void, *mut usize) -> cl_int,
) -> std::result::Result<Vec<u8>, cl_int> {
    let mut size = 0usize;
    created((), query(0, std::ptr::null_mut(), &mut size))?;
    let mut b = vec![0u8; size];
    if size > 0 {
        created(
            (),
            query(size, b.as_mut_ptr() as *mut c_void, std::ptr::null_mut()),
        )?;
    }
    Ok(b)
}

static LIBRARY: OnceLock<std::result::Result<Cl, String>> = OnceLock::new();

/// The OpenCL library, loaded on first use; why it cannot be used when it cannot.
pub fn library() -> std::result::Result<&'static Cl, &'static str> {
    LIBRARY
        .get_or_init(ffi::load)
        .as_ref()
        .map_err(|e| e.as_str())
}

/// The OpenCL library if it was loaded (objects to release exist only then); never loads it.
pub(crate) fn loaded() -> Option<&'static Cl> {
    LIBRARY.get()?.as_ref().ok()
}

fn device_bytes(d: cl_device_id, param: u32) -> std::result::Result<Vec<u8>, cl_int> {
    // Device ids exist only once the library is loaded.
    let f = loaded().ok_or(ffi::CL_INVALID_VALUE)?.clGetDeviceInfo;
    // SAFETY: clGetDeviceInfo with its size/value/size_ret triple as `info_bytes` passes it
    // (a buffer of the size given, or NULL with size 0).
    info_bytes(&mut |n, v, r| unsafe { f(d, param, n, v, r) })
}

/// A string device property.
pub(crate) fn device_string(d: cl_device_id, param: u32) -> Result<String> {
    let b = ok(device_bytes(d, param), "clGetDeviceInfo")?;
    Ok(text(&b).trim().to_string())
}

/// An unsigned integer device property of any width (`cl_uint`, `cl_ulong`, `size_t`,
/// `cl_bool`).
pub(crate) fn device_uint(d: cl_device_id, param: u32) -> Result<u64> {
    let b = ok(device_bytes(d, param), "clGetDeviceInfo")?;
    Ok(match b.len() {
        4 => u32::from_ne_bytes(b[..4].try_into().unwrap_or_default()) as u64,
        8 => u64::from_ne_bytes(b[..8].try_into().unwrap_or_default()),
        n => {
            return Err(Error::tvm_fmt(format_args!(
                "OpenCL: device property {param:#x} has an unexpected size ({n} bytes)"
            )))
        }
    })
}

/// A `size_t[]` device property.
pub(crate) fn device_sizes(d: cl_device_id, param: u32) -> Result<Vec<u64>> {
    let b = ok(device_bytes(d, param), "clGetDeviceInfo")?;
    let w = std::mem::size_of::<usize>();
    Ok(b.chunks_exact(w)
        .map(|c| {
            let mut v = [0u8; 8];
            v[..w].copy_from_slice(c);
            u64::from_le_bytes(v) & (u64::MAX >> (64 - 8 * w as u32))
        })
        .collect())
}

/// `major * 100 + minor * 10` of an `OpenCL <major>.<minor> ...` version string.
fn version_number(v: &str) -> u32 {
    let t = version_token(v);
    let mut it = t.split('.');
    let major: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor: u32 = it
        .next()
        .and_then(|s| s.chars().next())
        .and_then(|c| c.to_digit(10))
        .unwrap_or(0);
    major * 100 + minor * 10
}

/// The `<major>.<minor>` token of an `OpenCL <major>.<minor> ...` version string.
pub(crate) fn version_token(v: &str) -> &str {
    v.strip_prefix("OpenCL ")
        .unwrap_or(v)
        .split_whitespace()
        .next()
        .unwrap_or("")
}

/// The ids an OpenCL `clGet*IDs` call lists, given as `(count, ids, count_ret)`: their count
/// first, then the ids (none when the count is 0).
fn ids(
    query: &mut dyn FnMut(ffi::cl_uint, *mut *mut c_void, *mut ffi::cl_uint) -> cl_int,
) -> std::result::Result<Vec<*mut c_void>, cl_int> {
    let mut n: ffi::cl_uint = 0;
    created((), query(0, std::ptr::null_mut(), &mut n))?;
    let mut v = vec![std::ptr::null_mut::<c_void>(); n as usize];
    if n > 0 {
        created((), query(n, v.as_mut_ptr(), std::ptr::null_mut()))?;
    }
    Ok(v)
}

/// The NUL-terminated text of a string property, lossily decoded.
pub(crate) fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn load() -> std::result::Result<Platforms, String> {
    if std::env::var(DISABLE_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
        return Err(format!("no OpenCL platform: disabled by {DISABLE_ENV}"));
    }
    let cl: &'static Cl = library().map_err(|e| format!("no OpenCL platform: {e}"))?;
    // SAFETY: clGetPlatformIDs with a count and a buffer of that many ids (or none).
    let platforms: Vec<cl_platform_id> =
        match ids(&mut |n, v, r| unsafe { (cl.clGetPlatformIDs)(n, v, r) }) {
            Ok(p) => p,
            // The ICD loader's answer when no driver is installed.
            Err(ffi::CL_PLATFORM_NOT_FOUND_KHR) => Vec::new(),
            Err(code) => return Err(cl_error(code, "clGetPlatformIDs").into_message()),
        };
    let find = |p: cl_platform_id, ty| -> Vec<cl_device_id> {
        // SAFETY: clGetDeviceIDs of a platform the library listed, with a count and a buffer
        // of that many ids (or none).
        ids(&mut |n, v, r| unsafe { (cl.clGetDeviceIDs)(p, ty, n, v, r) })
            .unwrap_or_default()
            .into_iter()
            .filter(|&d| {
                device_string(d, ffi::CL_DEVICE_VERSION)
                    .map(|v| version_number(&v) >= 120)
                    .unwrap_or(false)
            })
            .collect()
    };
    let mut per_platform: Vec<(cl_platform_id, Vec<cl_device_id>)> = platforms
        .iter()
        .map(|&p| (p, find(p, ffi::CL_DEVICE_TYPE_GPU)))
        .collect();
    if per_platform.iter().all(|(_, d)| d.is_empty()) {
        per_platform = platforms
            .iter()
            .map(|&p| (p, find(p, ffi::CL_DEVICE_TYPE_CPU)))
            .collect();
    }
    let no_images = std::env::var(NO_IMAGES_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    let mut out = Platforms {
        cl,
        contexts: Vec::new(),
        devices: Vec::new(),
        platform_names: Vec::new(),
    };
    for (p, ids) in per_platform {
        if ids.is_empty() {
            continue;
        }
        let mut status = ffi::CL_INVALID_VALUE;
        // SAFETY: the platform's devices (a non-empty list), no properties, no callback.
        let ctx = unsafe {
            (cl.clCreateContext)(
                std::ptr::null(),
                ids.len() as ffi::cl_uint,
                ids.as_ptr(),
                None,
                std::ptr::null_mut(),
                &mut status,
            )
        };
        let ctx = created(ctx, status)
            .map_err(|code| cl_error(code, "clCreateContext").into_message())?;
        // SAFETY: clGetPlatformInfo of a listed platform with its size/value/size_ret triple
        // as `info_bytes` passes it.
        let pname = info_bytes(&mut |n, v, r| unsafe {
            (cl.clGetPlatformInfo)(p, ffi::CL_PLATFORM_NAME, n, v, r)
        })
        .map(|b| text(&b))
        .unwrap_or_default();
        let ci = out.contexts.len();
        out.contexts.push(ctx);
        out.platform_names.push(pname);
        for d in ids {
            let queue = create_queue(cl, ctx, d).map_err(|e| e.into_message())?;
            let fill_queue = create_queue(cl, ctx, d).map_err(|e| e.into_message())?;
            out.devices.push(Device {
                id: d,
                context: ci,
                queue,
                fill_queue,
                name: device_string(d, ffi::CL_DEVICE_NAME).unwrap_or_default(),
                version: device_string(d, ffi::CL_DEVICE_VERSION).unwrap_or_default(),
                image_support: !no_images
                    && device_uint(d, ffi::CL_DEVICE_IMAGE_SUPPORT)
                        .map(|v| v != 0)
                        .unwrap_or(false),
            });
        }
    }
    Ok(out)
}

/// A new in-order queue of `device` in `ctx`.
pub(crate) fn create_queue(
    cl: &Cl,
    ctx: cl_context,
    device: cl_device_id,
) -> Result<cl_command_queue> {
    let mut status: cl_int = 0;
    let props: [ffi::cl_queue_properties; 1] = [0];
    let q = match (
        cl.clCreateCommandQueueWithProperties,
        cl.clCreateCommandQueue,
    ) {
        // SAFETY: a context and one of its devices, an empty (0-terminated) property list.
        (Some(f), _) => unsafe { f(ctx, device, props.as_ptr(), &mut status) },
        // OpenCL 1.2 platforms lack the 2.0 entry point.
        // SAFETY: a context and one of its devices, no properties.
        (None, Some(f)) => unsafe { f(ctx, device, 0, &mut status) },
        (None, None) => {
            return Err(Error::tvm(
                "OpenCL: the OpenCL library has no clCreateCommandQueue",
            ))
        }
    };
    if status != 0 || q.is_null() {
        return Err(cl_error(status, "clCreateCommandQueue"));
    }
    Ok(q)
}

/// The platforms, loaded on first use; an error saying why when there is no OpenCL.
pub(crate) fn platforms() -> Result<&'static Platforms> {
    match PLATFORMS.get_or_init(load) {
        Ok(p) => Ok(p),
        Err(e) => Err(Error::tvm_fmt(format_args!("OpenCL: {e}"))),
    }
}

/// The number of OpenCL devices (0 without OpenCL).
pub fn device_count() -> usize {
    platforms().map(|p| p.devices.len()).unwrap_or(0)
}

/// Why OpenCL is unusable, or `None` when a platform was found (it may have no devices).
pub fn platform_error() -> Option<String> {
    platforms().err().map(|e| e.into_message())
}

/// The platform name of device `id` (`None` for a bad id or without OpenCL).
pub fn platform_name(id: i32) -> Option<String> {
    let p = platforms().ok()?;
    let d = p.devices.get(usize::try_from(id).ok()?)?;
    p.platform_names.get(d.context).cloned()
}

impl Platforms {
    /// Device `id`; an error naming the device and how many there are for a bad id.
    pub fn device(&self, id: i32) -> Result<&Device> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.devices.get(i))
            .ok_or_else(|| {
                Error::value_fmt(format_args!(
                    "device opencl({id}) does not exist ({} OpenCL device(s) present)",
                    self.devices.len()
                ))
            })
    }
}

thread_local! {
    static CURRENT_DEVICE: Cell<i32> = const { Cell::new(0) };
    /// The current stream and the device it was set for (0: none).
    static CURRENT_STREAM: Cell<(i32, usize)> = const { Cell::new((0, 0)) };
}

/// This thread's current OpenCL device.
pub fn current_device() -> i32 {
    CURRENT_DEVICE.with(|c| c.get())
}

pub(crate) fn set_current_device(id: i32) {
    CURRENT_DEVICE.with(|c| c.set(id));
}

/// This thread's current stream for device `id` (NULL: the default queue).
pub(crate) fn current_stream(id: i32) -> cl_command_queue {
    let (d, s) = CURRENT_STREAM.with(|c| c.get());
    if d == id {
        s as cl_command_queue
    } else {
        std::ptr::null_mut()
    }
}

pub(crate) fn set_current_stream(id: i32, s: cl_command_queue) {
    CURRENT_STREAM.with(|c| c.set((id, s as usize)));
}

/// The queue work for device `id` goes to on this thread: the current stream, or the
/// device's default queue.
pub(crate) fn queue_for(p: &Platforms, id: i32) -> Result<cl_command_queue> {
    let s = current_stream(id);
    if !s.is_null() {
        return Ok(s);
    }
    Ok(p.device(id)?.queue)
}

/// The process-wide backend object.
pub fn shared_api() -> Arc<OpenclDeviceApi> {
    static API: std::sync::LazyLock<Arc<OpenclDeviceApi>> =
        std::sync::LazyLock::new(|| Arc::new(OpenclDeviceApi::default()));
    API.clone()
}

/// Adds the backend to a backend table (called when the device registry is created).
pub(crate) fn install(map: &mut super::Backends) {
    map.insert(crate::packed_func::types::DL_OPENCL, shared_api());
}

/// Registers the module loaders and the OpenCL globals.
pub fn register(b: &mut Registrar) {
    module::register(b);
    api::register(b);
    b.add("device_api.opencl", |_a, rv| {
        // SAFETY: the process-wide backend object, alive for the whole process.
        *rv =
            RetValue::Handle(unsafe { RawHandle::new(Arc::as_ptr(&shared_api()) as *mut c_void) });
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_parsing() {
        assert_eq!(version_token("OpenCL 3.0 PoCL 5.0+debian"), "3.0");
        assert_eq!(version_number("OpenCL 1.2 CUDA"), 120);
        assert_eq!(version_number("OpenCL 1.1"), 110);
        assert_eq!(version_number("OpenCL 3.0 PoCL"), 300);
        assert_eq!(version_number("garbage"), 0);
    }

    #[test]
    fn errors_name_the_code() {
        let e = cl_error(-5, "clEnqueueReadBuffer");
        assert!(e.message.contains("CL_OUT_OF_RESOURCES"), "{}", e.message);
        assert!(e.message.contains("clEnqueueReadBuffer"), "{}", e.message);
        assert!(check(-36, "clFoo").is_err());
        assert!(check(0, "clFoo").is_ok());
        assert_eq!(error_name(-9999), "UNKNOWN_ERROR");
    }

    #[test]
    fn no_platform_is_an_error_not_a_panic() {
        if device_count() > 0 {
            return;
        }
        // Either no library, no platform, or a platform without devices.
        if let Some(e) = platform_error() {
            assert!(e.starts_with("OpenCL: "), "{e}");
        }
        assert!(platforms().map_or(true, |p| p.device(0).is_err()));
    }
}
