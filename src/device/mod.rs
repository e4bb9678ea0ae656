//! Devices: the DeviceAPI contract as a trait, and the registry by device type.
//!
//! The contract follows TVM's DeviceAPI (see the seeds): attributes, set device, data space
//! with and without memory scope, workspace, copies, streams and synchronisation. Backends
//! register under their type code; the CPU is built in. The null backend ([`null`]) is a
//! complete implementation over host memory that tests install.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod functions;
#[cfg(any(feature = "cuda", feature = "opencl"))]
mod kernel_args;
pub mod null;
#[cfg(feature = "opencl")]
pub mod opencl;
#[cfg(feature = "plugins")]
pub mod plugin;
#[cfg(not(feature = "plugins"))]
#[path = "plugin/off.rs"]
pub mod plugin;
pub mod streams;
#[cfg(feature = "vulkan")]
pub mod vulkan;
#[cfg(any(feature = "cuda", feature = "opencl"))]
mod workspace;

use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry;
use crate::packed_func::types::{device_name, DLDataType, DLDevice, DLTensor, DL_CPU};
use crate::packed_func::value::RetValue;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, LazyLock, RwLock};

/// Device attributes (`DeviceAttrKind`), same values as the reference.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum DeviceAttr {
    /// Whether the device exists.
    Exist = 0,
    /// Max threads per block.
    MaxThreadsPerBlock = 1,
    /// Warp (subgroup) size.
    WarpSize = 2,
    /// Shared memory per block in bytes.
    MaxSharedMemoryPerBlock = 3,
    /// Compute version string.
    ComputeVersion = 4,
    /// Device name.
    DeviceName = 5,
    /// Max clock rate in kHz.
    MaxClockRate = 6,
    /// Number of multiprocessors.
    MultiProcessorCount = 7,
    /// Max thread dimensions (a JSON list string).
    MaxThreadDimensions = 8,
    /// Max registers per block.
    MaxRegistersPerBlock = 9,
    /// GCN architecture (ROCm).
    GcnArch = 10,
    /// API version.
    ApiVersion = 11,
    /// Driver version.
    DriverVersion = 12,
    /// L2 cache size in bytes.
    L2CacheSizeBytes = 13,
    /// Total global memory in bytes.
    TotalGlobalMemory = 14,
    /// Available global memory in bytes.
    AvailableGlobalMemory = 15,
    /// Image pitch alignment.
    ImagePitchAlignment = 16,
}

impl DeviceAttr {
    /// Converts the C integer.
    pub fn from_i32(v: i32) -> Result<DeviceAttr> {
        use DeviceAttr::*;
        Ok(match v {
            0 => Exist,
            1 => MaxThreadsPerBlock,
            2 => WarpSize,
            3 => MaxSharedMemoryPerBlock,
            4 => ComputeVersion,
            5 => DeviceName,
            6 => MaxClockRate,
            7 => MultiProcessorCount,
            8 => MaxThreadDimensions,
            9 => MaxRegistersPerBlock,
            10 => GcnArch,
            11 => ApiVersion,
            12 => DriverVersion,
            13 => L2CacheSizeBytes,
            14 => TotalGlobalMemory,
            15 => AvailableGlobalMemory,
            16 => ImagePitchAlignment,
            _ => {
                return Err(Error::value_fmt(format_args!(
                    "unknown device attribute kind {v}"
                )))
            }
        })
    }
}

/// An opaque stream handle (NULL is the default stream).
pub type Stream = *mut c_void;

/// The contract a device backend implements.
///
/// Pointers are device pointers in the backend's own sense (for CPU, host addresses). A
/// backend must be usable from any thread. Methods that free or use a pointer or a stream
/// handle are `unsafe`: the handle must be one this backend handed out and still live.
///
/// Freeing is not possible from safe code:
///
/// ```compile_fail
/// use tvm_runtime::device::{self, DeviceApi};
/// use tvm_runtime::{DLDataType, DLDevice};
/// let api = device::api(DLDevice::CPU).unwrap();
/// let p = api.alloc_data_space(DLDevice::CPU, 64, 64, DLDataType::new(2, 32, 1)).unwrap();
/// api.free_data_space(DLDevice::CPU, p).unwrap();
/// api.free_data_space(DLDevice::CPU, p).unwrap(); // a double free, were this safe
/// ```
///
/// Nor is using a stream handle that might be freed or forged:
///
/// ```compile_fail
/// use tvm_runtime::device::{self, DeviceApi};
/// use tvm_runtime::DLDevice;
/// let api = device::api(DLDevice::CPU).unwrap();
/// api.stream_sync(DLDevice::CPU, 0x1234 as *mut std::ffi::c_void).unwrap();
/// ```
///
/// Nor freeing a workspace or a stream:
///
/// ```compile_fail
/// use tvm_runtime::device::{self, DeviceApi};
/// use tvm_runtime::DLDevice;
/// let api = device::api(DLDevice::CPU).unwrap();
/// api.free_workspace(DLDevice::CPU, std::ptr::null_mut()).unwrap();
/// api.free_stream(DLDevice::CPU, std::ptr::null_mut()).unwrap();
/// ```
pub trait DeviceApi: Send + Sync {
    /// Makes `dev` current for this thread.
    fn set_device(&self, dev: DLDevice) -> Result<()>;

    /// Answers an attribute query; `RetValue::Null` where the device has no answer.
    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<RetValue>;

    /// Allocates `nbytes` with at least `alignment`.
    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void>;

    /// Allocates a tensor's storage in a memory scope (`None` or `"global"`: flat memory).
    #[inline]
    fn alloc_data_space_scope(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        scope: Option<&str>,
    ) -> Result<*mut c_void> {
        match scope {
            None | Some("global") | Some("") => {
                let n = crate::packed_func::tensor::checked_nbytes(shape, dtype)?;
                self.alloc_data_space(dev, n, crate::packed_func::tensor::ALLOC_ALIGNMENT, dtype)
            }
            Some(s) => Err(Error::tvm_fmt(format_args!(
                "device {} does not support memory scope '{s}'",
                describe(dev)
            ))),
        }
    }

    /// Frees what `alloc_data_space*` returned.
    ///
    /// # Safety
    /// `ptr` must come from this backend's `alloc_data_space*` for `dev`, not be freed yet,
    /// and not be used after this call.
    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()>;

    /// A copy between tensors that this backend makes from their shapes rather than their
    /// bytes (OpenCL images), or `None` to copy the bytes with [`DeviceApi::copy_data`].
    ///
    /// # Safety
    /// Both tensors must describe valid memory on their devices.
    unsafe fn copy_tensor_by_shape(
        &self,
        _from: &DLTensor,
        _to: &DLTensor,
        _stream: Stream,
    ) -> Option<Result<()>> {
        None
    }

    /// Copies `nbytes` between two places, at least one of which is on this backend's device.
    ///
    /// # Safety
    /// The pointers plus offsets must address `nbytes` valid bytes on their devices.
    #[allow(clippy::too_many_arguments)]
    unsafe fn copy_data(
        &self,
        from: *const c_void,
        from_offset: u64,
        to: *mut c_void,
        to_offset: u64,
        nbytes: usize,
        dev_from: DLDevice,
        dev_to: DLDevice,
        type_hint: DLDataType,
        stream: Stream,
    ) -> Result<()>;

    /// Creates a stream (single-queue devices return NULL).
    fn create_stream(&self, _dev: DLDevice) -> Result<Stream> {
        Ok(std::ptr::null_mut())
    }

    /// Frees a stream.
    ///
    /// # Safety
    /// `stream` must come from this backend's `create_stream` for `dev`, not be freed yet,
    /// not be any thread's current stream, and not be used after this call.
    unsafe fn free_stream(&self, _dev: DLDevice, _stream: Stream) -> Result<()> {
        Ok(())
    }

    /// Sets this thread's current stream.
    ///
    /// # Safety
    /// `stream` must be NULL or a live stream of this backend for `dev`, and stay live while
    /// it is current.
    unsafe fn set_stream(&self, _dev: DLDevice, _stream: Stream) -> Result<()> {
        Ok(())
    }

    /// This thread's current stream.
    fn current_stream(&self, _dev: DLDevice) -> Stream {
        std::ptr::null_mut()
    }

    /// Waits for a stream's work.
    ///
    /// # Safety
    /// `stream` must be NULL (the default stream) or a live stream of this backend for `dev`.
    unsafe fn stream_sync(&self, dev: DLDevice, stream: Stream) -> Result<()>;

    /// Waits for the work of the default stream (NULL) of `dev`.
    fn sync(&self, dev: DLDevice) -> Result<()> {
        // SAFETY: NULL, the default stream, is always valid.
        unsafe { self.stream_sync(dev, std::ptr::null_mut()) }
    }

    /// Makes `dst` wait for what is queued on `src` (default: synchronise `src`).
    ///
    /// # Safety
    /// Both streams must be NULL or live streams of this backend for `dev`.
    unsafe fn sync_stream_from_to(&self, dev: DLDevice, src: Stream, _dst: Stream) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.stream_sync(dev, src) }
    }

    /// Allocates temporary memory (default: data space).
    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        self.alloc_data_space(
            dev,
            nbytes,
            crate::packed_func::tensor::ALLOC_ALIGNMENT,
            type_hint,
        )
    }

    /// Frees temporary memory.
    ///
    /// # Safety
    /// `ptr` must come from this backend's `alloc_workspace` for `dev`, not be freed yet, and
    /// not be used after this call.
    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        // SAFETY: forwarded contract (the default workspace is data space).
        unsafe { self.free_data_space(dev, ptr) }
    }
}

/// The registered backends by device type (a fast non-keyed hash: the keys are small integers
/// the program chooses).
pub(crate) type Backends = HashMap<i32, Arc<dyn DeviceApi>, rustc_hash::FxBuildHasher>;

static BACKENDS: LazyLock<RwLock<Backends>> = LazyLock::new(|| {
    #[cfg_attr(
        not(any(feature = "cuda", feature = "vulkan", feature = "opencl")),
        allow(unused_mut)
    )]
    let mut m = Backends::default();
    // Built-in CUDA (the driver itself is only loaded when a CUDA device is used).
    #[cfg(feature = "cuda")]
    let cuda: Arc<dyn DeviceApi> = cuda::shared_api();
    #[cfg(feature = "cuda")]
    for t in [
        crate::packed_func::types::DL_CUDA,
        crate::packed_func::types::DL_CUDA_HOST,
        crate::packed_func::types::DL_CUDA_MANAGED,
    ] {
        m.insert(t, cuda.clone());
    }
    #[cfg(feature = "vulkan")]
    vulkan::install(&mut m);
    #[cfg(feature = "opencl")]
    opencl::install(&mut m);
    RwLock::new(m)
});

/// The name of a device type: TVM's names for built-in codes, plugin names for plugins.
pub fn type_name(device_type: i32) -> Option<String> {
    match device_name(device_type) {
        "unknown" if device_type == null::DL_NULL => Some("null".into()),
        "unknown" => plugin::name_of(device_type),
        n => Some(n.to_string()),
    }
}

/// The device type of a name TVM itself defines (`cpu`, `cuda`, `cuda_host`, `vulkan`, `llvm`,
/// `gpu`, ...); `None` for other names, which only plugins can claim.
pub fn builtin_type_from_name(name: &str) -> Option<i32> {
    match name {
        "cpu" | "llvm" | "c" | "stackvm" => Some(DL_CPU),
        "gpu" => Some(crate::packed_func::types::DL_CUDA),
        "null" => Some(null::DL_NULL),
        _ => (1..=16).find(|&t| device_name(t) == name),
    }
}

/// The device type of a name (`cpu`, `cuda`, `llvm`, a plugin's name, ...).
pub fn type_from_name(name: &str) -> Option<i32> {
    builtin_type_from_name(name).or_else(|| plugin::type_of(name))
}

/// A printable device: `cpu(0)`, `cuda(1)`, a plugin's `name(0)`, or `device type 99(0)`.
pub fn describe(dev: DLDevice) -> String {
    match type_name(dev.device_type) {
        Some(name) => format!("{name}({})", dev.device_id),
        None => format!("device type {}({})", dev.device_type, dev.device_id),
    }
}

/// Registers (or replaces) the backend for a device type.
pub fn register_backend(device_type: i32, api: Arc<dyn DeviceApi>) {
    BACKENDS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(device_type, api);
}

/// Whether a backend is registered for a device type.
pub fn has_backend(device_type: i32) -> bool {
    device_type == DL_CPU
        || BACKENDS
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&device_type)
}

/// A handle to a backend: the built-in CPU or a registered one.
pub enum ApiRef {
    /// The CPU.
    Cpu(&'static cpu::CpuDeviceApi),
    /// A registered backend.
    Other(Arc<dyn DeviceApi>),
}

impl std::ops::Deref for ApiRef {
    type Target = dyn DeviceApi;
    #[inline(always)]
    fn deref(&self) -> &Self::Target {
        match self {
            ApiRef::Cpu(c) => *c,
            ApiRef::Other(a) => &**a,
        }
    }
}

/// The array allocation entry points, with the CPU backend called statically (inlined, no
/// vtable): arrays of every room allocate and free through these.
impl ApiRef {
    /// [`DeviceApi::alloc_data_space_scope`] of this backend.
    #[inline]
    pub fn alloc_data_space_scope(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        scope: Option<&str>,
    ) -> Result<*mut c_void> {
        match self {
            ApiRef::Cpu(c) => c.alloc_data_space_scope(dev, shape, dtype, scope),
            ApiRef::Other(a) => a.alloc_data_space_scope(dev, shape, dtype, scope),
        }
    }

    /// [`DeviceApi::free_data_space`] of this backend.
    ///
    /// # Safety
    /// As [`DeviceApi::free_data_space`].
    #[inline]
    pub unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            match self {
                ApiRef::Cpu(c) => c.free_data_space(dev, ptr),
                ApiRef::Other(a) => a.free_data_space(dev, ptr),
            }
        }
    }
}

fn registered(device_type: i32) -> Option<Arc<dyn DeviceApi>> {
    BACKENDS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&device_type)
        .cloned()
}

/// The backend for a device; an error naming the device when none is available.
#[inline]
pub fn api(dev: DLDevice) -> Result<ApiRef> {
    if dev.device_type == DL_CPU {
        return Ok(ApiRef::Cpu(&cpu::CPU));
    }
    api_other(dev)
}

/// [`api`] for every device but the CPU, out of line.
#[inline(never)]
fn api_other(dev: DLDevice) -> Result<ApiRef> {
    if let Some(a) = registered(dev.device_type) {
        return Ok(ApiRef::Other(a));
    }
    if dev.device_type >= plugin::MIN_PLUGIN_DEVICE_TYPE && !registry::started() {
        // Plugins named in TVM_DEVICE_PLUGINS arrive with the registry's start-up, which a
        // program may not have caused yet: run it (once) and look again.
        plugin::discover();
        if let Some(a) = registered(dev.device_type) {
            return Ok(ApiRef::Other(a));
        }
    }
    if let Some(f) = crate::packed_func::features::missing_for_device(dev.device_type) {
        return Err(Error::internal_fmt(format_args!(
            "device {} is not available: this library was built without `{f}`",
            describe(dev)
        )));
    }
    Err(Error::internal_fmt(format_args!(
        "device {} is not available: no {} backend is built in or registered",
        describe(dev),
        match device_name(dev.device_type) {
            "unknown" => "such",
            n => n,
        }
    )))
}

/// Copies between two tensors of the same size through the right backend (the non-CPU side's
/// backend when they differ).
///
/// # Safety
/// Both tensors must describe valid memory on their devices.
pub unsafe fn copy_tensor(from: &DLTensor, to: &DLTensor, stream: Stream) -> Result<()> {
    let n_from = crate::packed_func::tensor::tensor_nbytes(from)?;
    let n_to = crate::packed_func::tensor::tensor_nbytes(to)?;
    if n_from != n_to {
        return Err(Error::internal_fmt(format_args!(
            "copy between tensors of different sizes: {n_from} bytes to {n_to} bytes"
        )));
    }
    if !crate::packed_func::tensor::is_contiguous(from)
        || !crate::packed_func::tensor::is_contiguous(to)
    {
        return Err(Error::value(
            "copy needs contiguous tensors (strides describe a non-compact layout)",
        ));
    }
    if n_from == 0 {
        return Ok(());
    }
    let dev = if from.device.device_type != DL_CPU {
        from.device
    } else {
        to.device
    };
    let a = api(dev)?;
    // SAFETY: forwarded contract.
    if let Some(r) = unsafe { a.copy_tensor_by_shape(from, to, stream) } {
        return r;
    }
    // SAFETY: both tensors describe `n_from` valid bytes (sizes checked; validity is the
    // caller's contract).
    unsafe {
        a.copy_data(
            from.data,
            from.byte_offset,
            to.data,
            to.byte_offset,
            n_from,
            from.device,
            to.device,
            from.dtype,
            stream,
        )
    }
}

/// Registers the device room's global functions and every built-in backend's (CUDA, Vulkan,
/// OpenCL).
pub(crate) fn register(r: &mut crate::packed_func::registry::Registrar) {
    functions::register(r);
    plugin::register_discovery(r);
    #[cfg(feature = "cuda")]
    cuda::register(r);
    #[cfg(feature = "vulkan")]
    vulkan::register(r);
    #[cfg(feature = "opencl")]
    opencl::register(r);
}
