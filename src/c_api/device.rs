//! Device entries: data space, copies, streams.

use super::check_out;
use crate::device;
use crate::packed_func::error::Error;
use crate::packed_func::types::TVMStreamHandle;
use crate::packed_func::types::{DLDataType, DLDevice, DLTensor};
use std::ffi::{c_char, c_int, c_void, CStr};

/// Allocates device memory (`TVMDeviceAllocDataSpace`).
///
/// # Safety
/// `out_data` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceAllocDataSpace(
    dev: DLDevice,
    nbytes: usize,
    alignment: usize,
    type_hint: DLDataType,
    out_data: *mut *mut c_void,
) -> c_int {
    crate::c_boundary! {
        check_out(out_data, "TVMDeviceAllocDataSpace: out_data")?;
        if alignment < 8 || !alignment.is_power_of_two() {
            return Err(Error::value_fmt(format_args!(
                "TVMDeviceAllocDataSpace: alignment {alignment} must be a power of two, at least 8"
            )));
        }
        let p = device::api(dev)?.alloc_data_space(dev, nbytes, alignment, type_hint)?;
        // SAFETY: checked non-null.
        unsafe { *out_data = p };
        Ok(())
    }
}

/// Allocates device memory for a tensor in a memory scope
/// (`TVMDeviceAllocDataSpaceWithScope`); NULL scope means global memory.
///
/// # Safety
/// `shape` holds `ndim` entries; `mem_scope` NULL or a string; `out_data` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceAllocDataSpaceWithScope(
    dev: DLDevice,
    ndim: c_int,
    shape: *const i64,
    dtype: DLDataType,
    mem_scope: *const c_char,
    out_data: *mut *mut c_void,
) -> c_int {
    crate::c_boundary! {
        check_out(out_data, "TVMDeviceAllocDataSpaceWithScope: out_data")?;
        if ndim < 0 || (ndim > 0 && shape.is_null()) {
            return Err(Error::value(
                "TVMDeviceAllocDataSpaceWithScope: invalid ndim or NULL shape",
            ));
        }
        let shape = if ndim == 0 {
            &[][..]
        } else {
            // SAFETY: caller contract.
            unsafe { std::slice::from_raw_parts(shape, ndim as usize) }
        };
        let scope = if mem_scope.is_null() {
            None
        } else {
            // SAFETY: caller contract.
            Some(unsafe { CStr::from_ptr(mem_scope) }.to_str().map_err(|_| {
                Error::value("TVMDeviceAllocDataSpaceWithScope: mem_scope is not UTF-8")
            })?)
        };
        let p = device::api(dev)?.alloc_data_space_scope(dev, shape, dtype, scope)?;
        // SAFETY: checked non-null.
        unsafe { *out_data = p };
        Ok(())
    }
}

/// Frees device memory (`TVMDeviceFreeDataSpace`).
///
/// # Safety
/// `ptr` from `TVMDeviceAllocDataSpace*` on the same device.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceFreeDataSpace(dev: DLDevice, ptr: *mut c_void) -> c_int {
    crate::c_boundary! {
        let api = device::api(dev)?;
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { api.free_data_space(dev, ptr) }
    }
}

/// Copies between tensors on any devices (`TVMDeviceCopyDataFromTo`).
///
/// # Safety
/// Both tensors valid.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceCopyDataFromTo(
    from: *mut DLTensor,
    to: *mut DLTensor,
    stream: TVMStreamHandle,
) -> c_int {
    crate::c_boundary! {
        check_out(from, "TVMDeviceCopyDataFromTo: from")?;
        check_out(to, "TVMDeviceCopyDataFromTo: to")?;
        // SAFETY: checked non-null; caller contract.
        unsafe { device::copy_tensor(&*from, &*to, stream) }
    }
}

/// Creates a stream (`TVMStreamCreate`); CPU and single-queue devices give NULL.
///
/// # Safety
/// `out` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamCreate(
    device_type: c_int,
    device_id: c_int,
    out: *mut TVMStreamHandle,
) -> c_int {
    crate::c_boundary! {
        check_out(out, "TVMStreamCreate: out")?;
        let dev = DLDevice::new(device_type, device_id);
        let s = device::streams::create_stream(dev)?;
        // SAFETY: checked non-null.
        unsafe { *out = s };
        Ok(())
    }
}

/// Frees a stream (`TVMStreamFree`).
///
/// # Safety
/// `stream` NULL or a stream of this device from `TVMStreamCreate`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamFree(
    device_type: c_int,
    device_id: c_int,
    stream: TVMStreamHandle,
) -> c_int {
    crate::c_boundary! {
        let dev = DLDevice::new(device_type, device_id);
        // SAFETY: the C contract: `stream` came from TVMStreamCreate for this device.
        unsafe { device::streams::free_stream(dev, stream) }
    }
}

/// Sets this thread's current stream for a device (`TVMSetStream`).
///
/// # Safety
/// `handle` NULL or a live stream of this device.
#[no_mangle]
pub unsafe extern "C" fn TVMSetStream(
    device_type: c_int,
    device_id: c_int,
    handle: TVMStreamHandle,
) -> c_int {
    crate::c_boundary! {
        let dev = DLDevice::new(device_type, device_id);
        // SAFETY: the C contract: NULL or a live stream of this device.
        unsafe { device::api(dev)?.set_stream(dev, handle) }
    }
}

/// Waits for a stream's work (`TVMSynchronize`).
///
/// # Safety
/// `stream` NULL or a live stream of this device.
#[no_mangle]
pub unsafe extern "C" fn TVMSynchronize(
    device_type: c_int,
    device_id: c_int,
    stream: TVMStreamHandle,
) -> c_int {
    crate::c_boundary! {
        let dev = DLDevice::new(device_type, device_id);
        // SAFETY: the C contract: NULL or a live stream of this device.
        unsafe { device::api(dev)?.stream_sync(dev, stream) }
    }
}

/// `TVMStreamSync`: an alias of [`TVMSynchronize`] under the name the design uses (an extra
/// export, not in the reference).
///
/// # Safety
/// `stream` NULL or a live stream of this device.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamSync(
    device_type: c_int,
    device_id: c_int,
    stream: TVMStreamHandle,
) -> c_int {
    crate::c_boundary! {
        let dev = DLDevice::new(device_type, device_id);
        // SAFETY: the C contract: NULL or a live stream of this device.
        unsafe { device::api(dev)?.stream_sync(dev, stream) }
    }
}

/// Makes `dst` wait for `src` (`TVMStreamStreamSynchronize`).
///
/// # Safety
/// `src` and `dst` NULL or live streams of this device.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamStreamSynchronize(
    device_type: c_int,
    device_id: c_int,
    src: TVMStreamHandle,
    dst: TVMStreamHandle,
) -> c_int {
    crate::c_boundary! {
        let dev = DLDevice::new(device_type, device_id);
        // SAFETY: the C contract: NULL or live streams of this device.
        unsafe { device::api(dev)?.sync_stream_from_to(dev, src, dst) }
    }
}

/// Registers a device plugin table (`TVMDeviceRegisterPlugin`, see `device_plugin.h`; an
/// extension of this runtime).
///
/// # Safety
/// `plugin` NULL or a table following the plugin ABI.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceRegisterPlugin(
    plugin: *const device::plugin::TVMDevicePlugin,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe { device::plugin::register(plugin, None) }
    }
}

/// Loads a device plugin library (`TVMDeviceLoadPlugin`, see `device_plugin.h`; an extension
/// of this runtime).
///
/// # Safety
/// `path` a string.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceLoadPlugin(path: *const c_char) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let path = unsafe { super::cstr(path, "TVMDeviceLoadPlugin: path")? };
        device::plugin::load_library(path)
    }
}
