//! DLTensor arithmetic: the byte size of a compact tensor, its shape as a slice, whether its
//! strides are compact, and the alignment of every allocation. Plain functions of the C types,
//! used by the device backends and by NDArray alike.

use super::error::{Error, Result};
use super::types::{DLDataType, DLTensor};

/// Alignment of every array allocation, as the reference (`kAllocAlignment`).
pub const ALLOC_ALIGNMENT: usize = 64;

/// Bytes a compact tensor of this shape and type takes; errors on negative dimensions and
/// overflow.
pub fn checked_nbytes(shape: &[i64], dtype: DLDataType) -> Result<usize> {
    let mut n: usize = 1;
    for (i, &d) in shape.iter().enumerate() {
        if d < 0 {
            return Err(Error::tvm_fmt(format_args!(
                "shape[{i}] = {d} is negative: array dimensions must be >= 0"
            )));
        }
        n = n.checked_mul(d as usize).ok_or_else(|| {
            Error::value_fmt(format_args!("shape {shape:?} is too large: size overflows"))
        })?;
    }
    // Whole bytes per element, as the reference: sub-byte types (bool is uint1) take a byte
    // each, which is what compiled code reads and writes.
    let elem = (dtype.bits as usize * dtype.lanes as usize).div_ceil(8);
    n.checked_mul(elem).ok_or_else(|| {
        Error::value_fmt(format_args!("shape {shape:?} is too large: size overflows"))
    })
}

/// The shape of a tensor as a slice.
///
/// # Safety
/// `t.shape` must hold `t.ndim` entries.
pub unsafe fn shape_of(t: &DLTensor) -> &[i64] {
    if t.ndim <= 0 || t.shape.is_null() {
        &[]
    } else {
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }
    }
}

/// Bytes of a (compact) tensor.
pub fn tensor_nbytes(t: &DLTensor) -> Result<usize> {
    if t.ndim < 0 {
        return Err(Error::value_fmt(format_args!(
            "tensor has negative ndim {}",
            t.ndim
        )));
    }
    if t.ndim > 0 && t.shape.is_null() {
        return Err(Error::value("tensor has a NULL shape"));
    }
    // SAFETY: the C contract: shape holds ndim entries.
    checked_nbytes(unsafe { shape_of(t) }, t.dtype)
}

/// Whether the strides (if any) describe a compact row-major layout.
pub fn is_contiguous(t: &DLTensor) -> bool {
    if t.strides.is_null() {
        return true;
    }
    // SAFETY: the C contract: shape and strides hold ndim entries.
    let (shape, strides) = unsafe {
        (
            shape_of(t),
            std::slice::from_raw_parts(t.strides, t.ndim.max(0) as usize),
        )
    };
    let mut expected = 1i64;
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 && strides[i] != expected {
            return false;
        }
        expected *= shape[i];
    }
    true
}
