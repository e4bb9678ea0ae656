//! The CUDA device API: attributes, memory (device, pinned host, managed), copies including
//! peer copies, streams and events, and a pooled workspace.

use super::{check_rt, current_device, current_stream, set_current_stream, Driver, API_VERSION};
use crate::device::workspace::WorkspacePools;
use crate::device::{DeviceApi, DeviceAttr, Stream};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{
    DLDataType, DLDevice, DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED,
};
use crate::packed_func::value::RetValue;
use cudarc::driver::sys;
use std::ffi::c_void;

/// The backend for `kDLCUDA`, `kDLCUDAHost` and `kDLCUDAManaged` (one object serves all three).
#[derive(Default)]
pub struct CudaDeviceApi {
    pools: WorkspacePools<(i32, i32)>,
}

impl CudaDeviceApi {
    /// A backend object (touches no driver).
    pub fn new() -> CudaDeviceApi {
        CudaDeviceApi::default()
    }

    fn attr_int(dev: DLDevice, attr: sys::CUdevice_attribute) -> Result<i32> {
        let d = driver_for(dev)?.device(dev.device_id)?;
        let mut v = 0;
        // SAFETY: out pointer valid, device handle from the driver.
        check_rt(unsafe { sys::cuDeviceGetAttribute(&mut v, attr, d) })?;
        Ok(v)
    }
}

/// The driver, or an error naming the device that cannot be used without one.
pub(crate) fn driver_for(dev: DLDevice) -> Result<&'static Driver> {
    super::driver().map_err(|e| {
        Error::internal_fmt(format_args!(
            "device {} is not available: {}",
            crate::device::describe(dev),
            e.message
        ))
    })
}

/// Whether a device type's memory is addressed as device memory (not host memory).
fn is_device_memory(t: i32) -> bool {
    t == DL_CUDA || t == DL_CUDA_MANAGED
}

// Device pointers and streams are handles the trait's contract says came from this backend.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl DeviceApi for CudaDeviceApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        driver_for(dev)?.activate(dev.device_id)
    }

    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<RetValue> {
        use sys::CUdevice_attribute as A;
        let int = |a| Ok(RetValue::Int(Self::attr_int(dev, a)? as i64));
        match kind {
            DeviceAttr::Exist => {
                let n = super::device_count();
                Ok(RetValue::Int(
                    (dev.device_id >= 0 && (dev.device_id as usize) < n) as i64,
                ))
            }
            DeviceAttr::MaxThreadsPerBlock => int(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            DeviceAttr::WarpSize => int(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE),
            DeviceAttr::MaxSharedMemoryPerBlock => {
                int(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)
            }
            DeviceAttr::ComputeVersion => {
                let major = Self::attr_int(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
                let minor = Self::attr_int(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
                Ok(RetValue::Str(format!("{major}.{minor}")))
            }
            DeviceAttr::DeviceName => {
                let d = driver_for(dev)?.device(dev.device_id)?;
                let mut buf = [0 as std::ffi::c_char; 256];
                super::check_drv(
                    // SAFETY: the buffer holds 256 bytes; the driver writes a NUL-terminated name.
                    unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, d) },
                    "cuDeviceGetName(&name[0], name.size(), dev.device_id)",
                )?;
                buf[255] = 0;
                // SAFETY: NUL-terminated (forced above).
                let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
                Ok(RetValue::Str(name.to_string_lossy().into_owned()))
            }
            DeviceAttr::MaxClockRate => int(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            DeviceAttr::MultiProcessorCount => int(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            DeviceAttr::MaxThreadDimensions => {
                let x = Self::attr_int(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?;
                let y = Self::attr_int(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?;
                let z = Self::attr_int(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?;
                Ok(RetValue::Str(format!("[{x}, {y}, {z}]")))
            }
            DeviceAttr::MaxRegistersPerBlock => int(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
            DeviceAttr::ApiVersion => Ok(RetValue::Int(API_VERSION)),
            DeviceAttr::L2CacheSizeBytes => int(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            DeviceAttr::TotalGlobalMemory => {
                let d = driver_for(dev)?.device(dev.device_id)?;
                let mut n = 0usize;
                // SAFETY: out pointer valid.
                check_rt(unsafe { sys::cuDeviceTotalMem_v2(&mut n, d) })?;
                Ok(RetValue::Int(n as i64))
            }
            DeviceAttr::AvailableGlobalMemory => {
                driver_for(dev)?.activate(dev.device_id)?;
                let (mut free, mut total) = (0usize, 0usize);
                // SAFETY: out pointers valid; the device's context is current.
                check_rt(unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
                Ok(RetValue::Int(free as i64))
            }
            DeviceAttr::GcnArch | DeviceAttr::DriverVersion | DeviceAttr::ImagePitchAlignment => {
                Ok(RetValue::Null)
            }
        }
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        if alignment == 0 || 256 % alignment != 0 {
            return Err(Error::internal_fmt(format_args!(
                "Check failed: 256 % alignment == 0U (256 % {alignment} vs. 0) : CUDA space is \
                 aligned at 256 bytes"
            )));
        }
        let d = driver_for(dev)?;
        // The driver refuses empty allocations; the runtime API returns a pointer anyway.
        let n = nbytes.max(1);
        match dev.device_type {
            DL_CUDA_HOST => {
                d.activate(current_device())?;
                let mut p: *mut c_void = std::ptr::null_mut();
                // SAFETY: out pointer valid; a context is current.
                check_rt(unsafe { sys::cuMemAllocHost_v2(&mut p, n) })?;
                Ok(p)
            }
            DL_CUDA | DL_CUDA_MANAGED => {
                d.activate(dev.device_id)?;
                let mut p: sys::CUdeviceptr = 0;
                let r = if dev.device_type == DL_CUDA {
                    // SAFETY: out pointer valid; the device's context is current.
                    unsafe { sys::cuMemAlloc_v2(&mut p, n) }
                } else {
                    // SAFETY: as above.
                    unsafe {
                        sys::cuMemAllocManaged(
                            &mut p,
                            n,
                            sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
                        )
                    }
                };
                check_rt(r)?;
                Ok(p as *mut c_void)
            }
            t => Err(Error::value_fmt(format_args!(
                "the CUDA backend does not serve device type {t}"
            ))),
        }
    }

    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let d = driver_for(dev)?;
        if dev.device_type == DL_CUDA_HOST {
            d.activate(current_device())?;
            // SAFETY: `ptr` came from cuMemAllocHost (the trait's contract).
            check_rt(unsafe { sys::cuMemFreeHost(ptr) })
        } else {
            d.activate(dev.device_id)?;
            // SAFETY: `ptr` came from cuMemAlloc / cuMemAllocManaged (the trait's contract).
            check_rt(unsafe { sys::cuMemFree_v2(ptr as sys::CUdeviceptr) })
        }
    }

    unsafe fn copy_data(
        &self,
        from: *const c_void,
        from_offset: u64,
        to: *mut c_void,
        to_offset: u64,
        nbytes: usize,
        mut dev_from: DLDevice,
        mut dev_to: DLDevice,
        _type_hint: DLDataType,
        stream: Stream,
    ) -> Result<()> {
        let stream = stream as sys::CUstream;
        // Pinned host memory is host memory.
        if dev_from.device_type == DL_CUDA_HOST {
            dev_from.device_type = DL_CPU;
        }
        if dev_to.device_type == DL_CUDA_HOST {
            dev_to.device_type = DL_CPU;
        }
        let src = (from as usize).wrapping_add(from_offset as usize);
        let dst = (to as usize).wrapping_add(to_offset as usize);
        if nbytes == 0 {
            return Ok(());
        }
        let (f, t) = (dev_from.device_type, dev_to.device_type);
        if f == DL_CPU && t == DL_CPU {
            // SAFETY: both ranges are valid host memory (the caller's contract); the copy
            // tolerates overlap.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, nbytes) };
            return Ok(());
        }
        let d = driver_for(if is_device_memory(f) {
            dev_from
        } else {
            dev_to
        })?;
        if is_device_memory(f) && is_device_memory(t) {
            d.activate(dev_from.device_id)?;
            if dev_from.device_id == dev_to.device_id {
                // SAFETY: both ranges are valid device memory (the caller's contract).
                check_rt(unsafe {
                    sys::cuMemcpyDtoDAsync_v2(dst as u64, src as u64, nbytes, stream)
                })
            } else {
                let (cf, ct) = (d.context(dev_from.device_id)?, d.context(dev_to.device_id)?);
                // SAFETY: as above, across the two devices' contexts.
                check_rt(unsafe {
                    sys::cuMemcpyPeerAsync(dst as u64, ct, src as u64, cf, nbytes, stream)
                })
            }
        } else if is_device_memory(f) && t == DL_CPU {
            d.activate(dev_from.device_id)?;
            // SAFETY: as above.
            check_rt(unsafe {
                sys::cuMemcpyDtoHAsync_v2(dst as *mut c_void, src as u64, nbytes, stream)
            })
        } else if f == DL_CPU && is_device_memory(t) {
            d.activate(dev_to.device_id)?;
            // SAFETY: as above.
            check_rt(unsafe {
                sys::cuMemcpyHtoDAsync_v2(dst as u64, src as *const c_void, nbytes, stream)
            })
        } else {
            Err(Error::internal_fmt(format_args!(
                "expect copy from/to GPU or between GPU (got a copy from {} to {})",
                crate::device::describe(dev_from),
                crate::device::describe(dev_to)
            )))
        }
    }

    fn create_stream(&self, dev: DLDevice) -> Result<Stream> {
        driver_for(dev)?.activate(dev.device_id)?;
        let mut s: sys::CUstream = std::ptr::null_mut();
        // SAFETY: out pointer valid; the device's context is current.
        check_rt(unsafe {
            sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(s as Stream)
    }

    unsafe fn free_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        driver_for(dev)?.activate(dev.device_id)?;
        if stream.is_null() {
            return Ok(());
        }
        // SAFETY: a stream this backend created (the caller's contract).
        check_rt(unsafe { sys::cuStreamDestroy_v2(stream as sys::CUstream) })
    }

    unsafe fn set_stream(&self, _dev: DLDevice, stream: Stream) -> Result<()> {
        set_current_stream(stream as sys::CUstream);
        Ok(())
    }

    fn current_stream(&self, _dev: DLDevice) -> Stream {
        current_stream() as Stream
    }

    unsafe fn stream_sync(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        let d = driver_for(dev)?;
        let id = if dev.device_type == DL_CUDA_HOST {
            current_device()
        } else {
            dev.device_id
        };
        d.activate(id)?;
        // SAFETY: NULL or a live stream of this device.
        check_rt(unsafe { sys::cuStreamSynchronize(stream as sys::CUstream) })
    }

    unsafe fn sync_stream_from_to(&self, dev: DLDevice, src: Stream, dst: Stream) -> Result<()> {
        driver_for(dev)?.activate(dev.device_id)?;
        let mut ev: sys::CUevent = std::ptr::null_mut();
        // SAFETY: out pointer valid; a context is current.
        check_rt(unsafe {
            sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
        })?;
        // SAFETY: a fresh event and NULL-or-live streams.
        let r = unsafe { sys::cuEventRecord(ev, src as sys::CUstream) };
        let r = if r == sys::CUresult::CUDA_SUCCESS {
            // SAFETY: as above.
            unsafe { sys::cuStreamWaitEvent(dst as sys::CUstream, ev, 0) }
        } else {
            r
        };
        // SAFETY: the event is ours; destroying it after queuing the wait is allowed.
        let r2 = unsafe { sys::cuEventDestroy_v2(ev) };
        check_rt(r)?;
        check_rt(r2)
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        self.pools
            .alloc((dev.device_type, dev.device_id), nbytes, |need| {
                self.alloc_data_space(dev, need, 256, type_hint)
            })
    }

    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        self.pools.free((dev.device_type, dev.device_id), dev, ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_driver_behaviour() {
        if super::super::driver_available() {
            return;
        }
        let api = CudaDeviceApi::new();
        let dev = DLDevice::new(DL_CUDA, 0);
        assert!(matches!(
            api.get_attr(dev, DeviceAttr::Exist).unwrap(),
            RetValue::Int(0)
        ));
        let e = api
            .get_attr(dev, DeviceAttr::MaxThreadsPerBlock)
            .unwrap_err();
        assert!(e.message.contains("CUDA driver"), "{}", e.message);
        let e = api
            .alloc_data_space(dev, 16, 64, DLDataType::new(2, 32, 1))
            .unwrap_err();
        assert!(e.message.contains("CUDA driver"), "{}", e.message);
        let e = api
            .alloc_data_space(dev, 16, 512, DLDataType::new(2, 32, 1))
            .unwrap_err();
        assert!(e.message.contains("aligned at 256"), "{}", e.message);
        assert!(api.set_device(dev).is_err());
        assert!(api.sync(dev).is_err());
        // Host-to-host through the CUDA backend needs no driver.
        let a = [1u8, 2, 3, 4];
        let mut b = [0u8; 4];
        let host = DLDevice::new(DL_CUDA_HOST, 0);
        // SAFETY: two valid 4-byte host buffers.
        unsafe {
            api.copy_data(
                a.as_ptr() as *const c_void,
                0,
                b.as_mut_ptr() as *mut c_void,
                0,
                4,
                host,
                DLDevice::CPU,
                DLDataType::new(1, 8, 1),
                std::ptr::null_mut(),
            )
        }
        .unwrap();
        assert_eq!(a, b);
    }
}
