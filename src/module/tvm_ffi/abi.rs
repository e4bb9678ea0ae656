//! The parts of the tvm-ffi C ABI (apache-tvm-ffi 0.1.x, TVM v0.22+) that compiled libraries
//! use: the 16-byte `TVMFFIAny` value, its type indices, the object header and the kernel
//! calling convention.

use std::ffi::{c_char, c_void};

/// Type indices of `TVMFFIAny` values (stable since tvm-ffi 0.1.0).
pub mod type_index {
    /// None / NULL.
    pub const NONE: i32 = 0;
    /// `int64_t`.
    pub const INT: i32 = 1;
    /// `bool` (stored as an int64).
    pub const BOOL: i32 = 2;
    /// `double`.
    pub const FLOAT: i32 = 3;
    /// `void*`.
    pub const OPAQUE_PTR: i32 = 4;
    /// `DLDataType`.
    pub const DATA_TYPE: i32 = 5;
    /// `DLDevice`.
    pub const DEVICE: i32 = 6;
    /// `DLTensor*`.
    pub const DLTENSOR_PTR: i32 = 7;
    /// `const char*`.
    pub const RAW_STR: i32 = 8;
    /// `TVMFFIByteArray*`.
    pub const BYTE_ARRAY_PTR: i32 = 9;
    /// An object moved in as an rvalue reference.
    pub const OBJECT_RVALUE_REF: i32 = 10;
    /// A string of at most 7 bytes stored in the value itself.
    pub const SMALL_STR: i32 = 11;
    /// Bytes (at most 7) stored in the value itself.
    pub const SMALL_BYTES: i32 = 12;
    /// First object type index.
    pub const STATIC_OBJECT_BEGIN: i32 = 64;
    /// `ffi.Tensor`: the `DLTensor` follows the 24-byte object header.
    pub const TENSOR: i32 = 70;
}

/// The value payload of a [`TVMFFIAny`].
#[repr(C)]
#[derive(Copy, Clone)]
pub union TVMFFIAnyValue {
    /// Integers and booleans.
    pub v_int64: i64,
    /// Floats.
    pub v_float64: f64,
    /// Pointers (opaque, `DLTensor*`, byte arrays, objects).
    pub v_ptr: *mut c_void,
    /// Raw strings.
    pub v_c_str: *const c_char,
    /// A data type.
    pub v_dtype: crate::packed_func::types::DLDataType,
    /// A device.
    pub v_device: crate::packed_func::types::DLDevice,
    /// Small strings and bytes.
    pub v_bytes: [u8; 8],
}

/// `TVMFFIAny`: a type index, a padding word (the length of a small string) and a payload.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct TVMFFIAny {
    /// What the payload holds.
    pub type_index: i32,
    /// Zero, or the length of a small string/bytes value.
    pub zero_padding: u32,
    /// The payload.
    pub value: TVMFFIAnyValue,
}

impl TVMFFIAny {
    /// The None value.
    pub const NONE: TVMFFIAny = TVMFFIAny {
        type_index: type_index::NONE,
        zero_padding: 0,
        value: TVMFFIAnyValue { v_int64: 0 },
    };
}

/// Size of the tvm-ffi object header (`TVMFFIObject`: reference count, type index, padding,
/// deleter); a tensor object's `DLTensor` follows it.
pub const OBJECT_HEADER_SIZE: usize = 24;

/// `TVMFFIByteArray`: the same layout as the classic `TVMByteArray`.
pub type TVMFFIByteArray = crate::packed_func::types::TVMByteArray;

/// `TVMFFISafeCallType`: every `__tvm_ffi_<name>` kernel. Returns 0, or -1 after raising an
/// error through `TVMFFIErrorSetRaisedFromCStr[Parts]`.
pub type SafeCall = unsafe extern "C" fn(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_tvm_ffi() {
        assert_eq!(std::mem::size_of::<TVMFFIAny>(), 16);
        assert_eq!(std::mem::align_of::<TVMFFIAny>(), 8);
        assert_eq!(std::mem::offset_of!(TVMFFIAny, value), 8);
    }
}
