//! DLTensor arithmetic: the byte size of a compact tensor, its shape as a slice, whether its
//! strides are compact, and the alignment of every allocation. Plain functions of the C types,
//! used by the device backends and by NDArray alike.

use super::error::{Error, Result};
use super::types::{DLDataType, DLTensor};

/// Alignment of every array allocation, as the reference (`kAllocAlignment`).
pub const ALLOC_ALIGNMENT: usize = 64;

/// Bytes a compact tensor of this shape and type takes; errors on negative dimensions and
/// on sizes past the address space (a dimension or a product beyond `usize`: 4 GiB on 32-bit
/// targets), never wrapping.
pub fn checked_nbytes(shape: &[i64], dtype: DLDataType) -> Result<usize> {
    let too_large = || {
        Error::value(format!(
            "shape {shape:?} is too large: its size does not fit the {}-bit address space",
            usize::BITS
        ))
    };
    let mut n: usize = 1;
    for (i, &d) in shape.iter().enumerate() {
        if d < 0 {
            return Err(Error::tvm(format!(
                "shape[{i}] = {d} is negative: array dimensions must be >= 0"
            )));
        }
        n = usize::try_from(d)
            .ok()
            .and_then(|d| n.checked_mul(d))
            .ok_or_else(too_large)?;
    }
    // Whole bytes per element, as the reference: sub-byte types (bool is uint1) take a byte
    // each, which is what compiled code reads and writes.
    let elem = (dtype.bits as usize * dtype.lanes as usize).div_ceil(8);
    n.checked_mul(elem).ok_or_else(too_large)
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
        return Err(Error::value(format!("tensor has negative ndim {}", t.ndim)));
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
    for (&s, &st) in shape.iter().zip(strides).rev() {
        if s != 1 && st != expected {
            return false;
        }
        expected *= s;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes past the address space are errors, not wrapped: on 32-bit targets (armv7, tested
    /// under qemu by scripts/cross.sh) anything from 4 GiB on; on 64-bit ones the same shapes
    /// are sized exactly, and only a size past 2^64 is refused.
    #[test]
    fn sizes_past_the_address_space_are_refused() {
        let u8_ = DLDataType::new(1, 8, 1);
        let f32_ = DLDataType::new(2, 32, 1);
        let f32x4 = DLDataType::new(2, 32, 4);
        let over_u32 = i64::from(u32::MAX) + 2;
        // One dimension past u32::MAX (`as usize` would make it 1 on 32-bit), a product of
        // dimensions that reaches 2^32, an element size that takes 2^30 elements there.
        let past_4g: [(&[i64], DLDataType, u64); 4] = [
            (&[over_u32], u8_, over_u32 as u64),
            (&[65536, 65536], u8_, 1 << 32),
            (&[1 << 30], f32_, 1 << 32),
            (&[1 << 28, 3], f32x4, 3 << 32),
        ];
        for (shape, dtype, bytes) in past_4g {
            let r = checked_nbytes(shape, dtype);
            if usize::BITS == 64 {
                assert_eq!(r.unwrap() as u64, bytes, "{shape:?}");
            } else {
                let e = r.unwrap_err();
                assert!(
                    e.message.contains("address space"),
                    "{shape:?}: {}",
                    e.message
                );
            }
        }
        // Just under 4 GiB fits everywhere.
        assert_eq!(
            checked_nbytes(&[i64::from(u32::MAX)], u8_).unwrap() as u64,
            u64::from(u32::MAX)
        );
        // Past 2^64 everywhere.
        for (shape, dtype) in [
            (&[1i64 << 62, 4][..], u8_),
            (&[i64::MAX][..], f32_),
            (&[1 << 40, 1 << 40][..], u8_),
        ] {
            let e = checked_nbytes(shape, dtype).unwrap_err();
            assert!(e.message.contains("too large"), "{shape:?}: {}", e.message);
        }
        assert!(checked_nbytes(&[2, -1], u8_).is_err());
        assert_eq!(checked_nbytes(&[], f32_).unwrap(), 4);
        assert_eq!(checked_nbytes(&[3, 0], f32_).unwrap(), 0);
    }
}
