//! NDArray and DLPack entries. Handles are `DLTensor*` inside NDArray objects.

use super::check_out;
use crate::ndarray::{self, NDArrayObj};
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{tvm_index_t, TVMArrayHandle, TVMStreamHandle};
use crate::packed_func::types::{DLDataType, DLDevice, DLManagedTensor, DLTensor};
use std::ffi::{c_int, c_uint, c_void};

fn check_handle(h: *mut DLTensor, what: &str) -> Result<()> {
    if h.is_null() {
        return Err(Error::value_fmt(format_args!(
            "{what}: the array handle is NULL"
        )));
    }
    Ok(())
}

/// Allocates an array (`TVMArrayAlloc`), 64-byte aligned.
///
/// # Safety
/// `shape` must hold `ndim` entries; `out` valid.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn TVMArrayAlloc(
    shape: *const tvm_index_t,
    ndim: c_int,
    dtype_code: c_int,
    dtype_bits: c_int,
    dtype_lanes: c_int,
    device_type: c_int,
    device_id: c_int,
    out: *mut TVMArrayHandle,
) -> c_int {
    crate::c_boundary! {
        check_out(out, "TVMArrayAlloc: out")?;
        if ndim < 0 {
            return Err(Error::value_fmt(format_args!(
                "TVMArrayAlloc: ndim {ndim} is negative"
            )));
        }
        if ndim > 0 && shape.is_null() {
            return Err(Error::value("TVMArrayAlloc: shape is NULL"));
        }
        if !(0..=255).contains(&dtype_code)
            || !(0..=255).contains(&dtype_bits)
            || !(0..=65535).contains(&dtype_lanes)
        {
            return Err(Error::value_fmt(format_args!(
                "TVMArrayAlloc: invalid data type (code {dtype_code}, bits {dtype_bits}, lanes {dtype_lanes})"
            )));
        }
        let shape = if ndim == 0 {
            &[][..]
        } else {
            // SAFETY: caller contract.
            unsafe { std::slice::from_raw_parts(shape, ndim as usize) }
        };
        let dtype = DLDataType::new(dtype_code as u8, dtype_bits as u8, dtype_lanes as u16);
        let dev = DLDevice::new(device_type, device_id);
        let arr =
            NDArrayObj::empty(shape, dtype, dev, None).map_err(|e| e.context("TVMArrayAlloc"))?;
        // SAFETY: checked non-null.
        unsafe { *out = ndarray::handle_of(&arr) };
        std::mem::forget(arr);
        Ok(())
    }
}

/// Frees an array handle (`TVMArrayFree`).
///
/// # Safety
/// `handle` must be NULL or an NDArray handle the caller owns.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayFree(handle: TVMArrayHandle) -> c_int {
    crate::c_boundary! {
        if !handle.is_null() {
            // SAFETY: caller contract: an NDArray handle the caller owns.
            unsafe { super::object::free_handle(ndarray::object_of_handle(handle) as *mut c_void) };
        }
        Ok(())
    }
}

/// Copies host bytes into an array (`TVMArrayCopyFromBytes`); sizes must match.
///
/// # Safety
/// `handle` a valid tensor; `data` holds `nbytes`.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyFromBytes(
    handle: TVMArrayHandle,
    data: *mut c_void,
    nbytes: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { array_bytes(handle, data, nbytes, false) }
}

/// Copies an array out to host bytes (`TVMArrayCopyToBytes`); sizes must match.
///
/// # Safety
/// `handle` a valid tensor; `data` holds `nbytes`.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyToBytes(
    handle: TVMArrayHandle,
    data: *mut c_void,
    nbytes: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { array_bytes(handle, data, nbytes, true) }
}

/// `TVMArrayCopyFromBytes` (`out` false) and `TVMArrayCopyToBytes` (`out` true), one body.
///
/// # Safety
/// As those entries.
#[inline(never)]
unsafe fn array_bytes(
    handle: TVMArrayHandle,
    data: *mut c_void,
    nbytes: usize,
    out: bool,
) -> c_int {
    crate::c_boundary! {
        let what = if out {
            "TVMArrayCopyToBytes"
        } else {
            "TVMArrayCopyFromBytes"
        };
        check_handle(handle, what)?;
        if data.is_null() && nbytes > 0 {
            return Err(Error::value_fmt(format_args!("{what}: data is NULL")));
        }
        // SAFETY: checked non-null; caller contract.
        unsafe { ndarray::copy_bytes(&*handle, data, nbytes, out) }
    }
}

/// Copies array to array through the device layer (`TVMArrayCopyFromTo`).
///
/// # Safety
/// Both handles valid tensors.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyFromTo(
    from: TVMArrayHandle,
    to: TVMArrayHandle,
    stream: TVMStreamHandle,
) -> c_int {
    crate::c_boundary! {
        check_handle(from, "TVMArrayCopyFromTo: from")?;
        check_handle(to, "TVMArrayCopyFromTo: to")?;
        // SAFETY: checked non-null; caller contract.
        unsafe { ndarray::copy_from_to(&*from, &*to, stream) }
            .map_err(|e| e.context("TVMArrayCopyFromTo"))
    }
}

/// Adopts a DLPack tensor as an array (`TVMArrayFromDLPack`).
///
/// # Safety
/// `from` a valid managed tensor whose ownership passes here on success; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayFromDLPack(
    from: *mut DLManagedTensor,
    out: *mut TVMArrayHandle,
) -> c_int {
    crate::c_boundary! {
        check_out(out, "TVMArrayFromDLPack: out")?;
        // SAFETY: caller contract.
        let arr = unsafe { NDArrayObj::from_dlpack(from)? };
        // SAFETY: checked non-null.
        unsafe { *out = ndarray::handle_of(&arr) };
        std::mem::forget(arr);
        Ok(())
    }
}

/// Exports an array as DLPack (`TVMArrayToDLPack`); the array stays alive until the managed
/// tensor's deleter runs.
///
/// # Safety
/// `from` an NDArray handle; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayToDLPack(
    from: TVMArrayHandle,
    out: *mut *mut DLManagedTensor,
) -> c_int {
    crate::c_boundary! {
        check_handle(from, "TVMArrayToDLPack")?;
        check_out(out, "TVMArrayToDLPack: out")?;
        // SAFETY: caller contract: an NDArray handle of a live array.
        let obj = unsafe { ObjectRef::from_borrowed(ndarray::object_of_handle(from)) }
            .ok_or_else(|| Error::value("TVMArrayToDLPack: NULL"))?;
        let m = ndarray::to_dlpack(&obj)?;
        // SAFETY: checked non-null.
        unsafe { *out = m };
        Ok(())
    }
}

/// Runs a managed tensor's deleter (`TVMDLManagedTensorCallDeleter`).
///
/// # Safety
/// `dltensor` must be NULL or a managed tensor not yet deleted.
#[no_mangle]
pub unsafe extern "C" fn TVMDLManagedTensorCallDeleter(dltensor: *mut DLManagedTensor) {
    crate::c_boundary! {
        if !dltensor.is_null() {
            // SAFETY: caller contract.
            unsafe {
                if let Some(d) = (*dltensor).deleter {
                    d(dltensor);
                }
            }
        }
        Ok(())
    }
}

/// The object type index of an array handle (`TVMArrayGetTypeIndex`).
///
/// # Safety
/// `handle` an NDArray handle; `out_tindex` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayGetTypeIndex(
    handle: TVMArrayHandle,
    out_tindex: *mut c_uint,
) -> c_int {
    crate::c_boundary! {
        check_handle(handle, "TVMArrayGetTypeIndex")?;
        check_out(out_tindex, "TVMArrayGetTypeIndex: out_tindex")?;
        // SAFETY: caller contract: an NDArray handle of a live array.
        let o = unsafe { ndarray::object_of_handle(handle) };
        // SAFETY: as above; checked out pointer.
        unsafe { *out_tindex = (*o).type_index() };
        Ok(())
    }
}
