//! The plain C types of the ABI: DLPack structs, `TVMValue`, type codes and device codes.
//!
//! Layouts match `dlpack/dlpack.h` (v0.8) and `tvm/runtime/c_runtime_api.h` (TVM v0.20.0).

use std::ffi::{c_char, c_void};

/// `DLDataTypeCode::kDLInt`.
pub const DL_INT: u8 = 0;
/// `DLDataTypeCode::kDLUInt`.
pub const DL_UINT: u8 = 1;
/// `DLDataTypeCode::kDLFloat`.
pub const DL_FLOAT: u8 = 2;
/// `DLDataTypeCode::kDLOpaqueHandle`.
pub const DL_OPAQUE_HANDLE: u8 = 3;
/// `DLDataTypeCode::kDLBfloat`.
pub const DL_BFLOAT: u8 = 4;
/// `DLDataTypeCode::kDLComplex`.
pub const DL_COMPLEX: u8 = 5;
/// `DLDataTypeCode::kDLBool`.
pub const DL_BOOL: u8 = 6;

/// `kDLCPU`.
pub const DL_CPU: i32 = 1;
/// `kDLCUDA`.
pub const DL_CUDA: i32 = 2;
/// `kDLCUDAHost`.
pub const DL_CUDA_HOST: i32 = 3;
/// `kDLOpenCL`.
pub const DL_OPENCL: i32 = 4;
/// `kDLVulkan`.
pub const DL_VULKAN: i32 = 7;
/// `kDLMetal`.
pub const DL_METAL: i32 = 8;
/// `kDLVPI`.
pub const DL_VPI: i32 = 9;
/// `kDLROCM`.
pub const DL_ROCM: i32 = 10;
/// `kDLROCMHost`.
pub const DL_ROCM_HOST: i32 = 11;
/// `kDLExtDev`.
pub const DL_EXT_DEV: i32 = 12;
/// `kDLCUDAManaged`.
pub const DL_CUDA_MANAGED: i32 = 13;
/// `kDLOneAPI`.
pub const DL_ONEAPI: i32 = 14;
/// `kDLWebGPU`.
pub const DL_WEBGPU: i32 = 15;
/// `kDLHexagon`.
pub const DL_HEXAGON: i32 = 16;
/// `TVMDeviceExtType_End`: first code past the extension device range.
pub const DEVICE_EXT_END: i32 = 36;
/// Device types at or above this mask address a remote (RPC) session.
pub const RPC_SESS_MASK: i32 = 128;

/// `DLDeviceType`: a device type code. An enum in C; a plain integer here so that every code a
/// caller may pass (extension and RPC codes included) is a valid value.
pub type DLDeviceType = i32;

/// `tvm_index_t`: the integer type of shapes and indices.
#[allow(non_camel_case_types)]
pub type tvm_index_t = i64;

/// `TVMArrayHandle`: a tensor passed by pointer.
pub type TVMArrayHandle = *mut DLTensor;

/// `TVMModuleHandle`: a module object.
pub type TVMModuleHandle = *mut c_void;

/// `TVMFunctionHandle`: a PackedFunc object.
pub type TVMFunctionHandle = *mut c_void;

/// `TVMRetValueHandle`: the return slot a C callback fills with `TVMCFuncSetReturn`.
pub type TVMRetValueHandle = *mut c_void;

/// `TVMStreamHandle`: a device stream (NULL: the default stream).
pub type TVMStreamHandle = *mut c_void;

/// `TVMObjectHandle`: any runtime object.
pub type TVMObjectHandle = *mut c_void;

/// The element type of a tensor (`DLDataType`).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// Type code (`kDLInt`, `kDLUInt`, `kDLFloat`, ...).
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Number of lanes (vector width).
    pub lanes: u16,
}

impl DLDataType {
    /// Builds a data type from its three fields.
    pub const fn new(code: u8, bits: u8, lanes: u16) -> Self {
        DLDataType { code, bits, lanes }
    }

    /// Bytes one element (all lanes) takes in memory, rounding bits up to whole bytes.
    pub fn bytes(&self) -> usize {
        (self.bits as usize * self.lanes as usize).div_ceil(8)
    }
}

/// A device: type code and ordinal (`DLDevice`).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// Device type code (`DLDeviceType` or an extension code).
    pub device_type: DLDeviceType,
    /// Device ordinal.
    pub device_id: i32,
}

impl DLDevice {
    /// The CPU device 0.
    pub const CPU: DLDevice = DLDevice {
        device_type: DL_CPU,
        device_id: 0,
    };

    /// Builds a device from type code and id.
    pub const fn new(device_type: i32, device_id: i32) -> Self {
        DLDevice {
            device_type,
            device_id,
        }
    }
}

/// A tensor view without ownership (`DLTensor`).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct DLTensor {
    /// Data pointer (device memory for non-CPU devices).
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// Shape, `ndim` entries.
    pub shape: *mut i64,
    /// Strides in elements, `ndim` entries, or NULL for compact row-major.
    pub strides: *mut i64,
    /// Offset in bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// A tensor with a deleter, the DLPack exchange form (`DLManagedTensor`).
#[repr(C)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// Producer's context for `deleter`.
    pub manager_ctx: *mut c_void,
    /// Called by the consumer when done; may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// A value passed through the PackedFunc calling convention (`TVMValue`).
#[repr(C)]
#[derive(Copy, Clone)]
pub union TVMValue {
    /// Integer and bool values.
    pub v_int64: i64,
    /// Floating point values.
    pub v_float64: f64,
    /// Handles of every kind.
    pub v_handle: *mut c_void,
    /// NUL-terminated strings.
    pub v_str: *const c_char,
    /// Data types.
    pub v_type: DLDataType,
    /// Devices.
    pub v_device: DLDevice,
}

impl Default for TVMValue {
    fn default() -> Self {
        TVMValue { v_int64: 0 }
    }
}

/// A byte string with its length (`TVMByteArray`).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct TVMByteArray {
    /// First byte.
    pub data: *const c_char,
    /// Number of bytes.
    pub size: usize,
}

/// Argument type codes (`TVMArgTypeCode`), v0.20.0 numbering.
pub mod type_code {
    /// `kTVMArgInt`.
    pub const INT: i32 = 0;
    /// `kTVMArgFloat`.
    pub const FLOAT: i32 = 2;
    /// `kTVMOpaqueHandle`.
    pub const OPAQUE_HANDLE: i32 = 3;
    /// `kTVMNullptr`.
    pub const NULLPTR: i32 = 4;
    /// `kTVMDataType`.
    pub const DATA_TYPE: i32 = 5;
    /// `kDLDevice`.
    pub const DEVICE: i32 = 6;
    /// `kTVMDLTensorHandle`.
    pub const DLTENSOR_HANDLE: i32 = 7;
    /// `kTVMObjectHandle`.
    pub const OBJECT_HANDLE: i32 = 8;
    /// `kTVMModuleHandle`.
    pub const MODULE_HANDLE: i32 = 9;
    /// `kTVMPackedFuncHandle`.
    pub const PACKED_FUNC_HANDLE: i32 = 10;
    /// `kTVMStr`.
    pub const STR: i32 = 11;
    /// `kTVMBytes`.
    pub const BYTES: i32 = 12;
    /// `kTVMNDArrayHandle`.
    pub const NDARRAY_HANDLE: i32 = 13;
    /// `kTVMObjectRValueRefArg`.
    pub const OBJECT_RVALUE_REF_ARG: i32 = 14;
    /// `kTVMArgBool` (new in v0.20; v0.16 had no bool code).
    pub const BOOL: i32 = 15;
    /// `kTVMExtBegin`.
    pub const EXT_BEGIN: i32 = 16;
    /// `kTVMExtEnd`.
    pub const EXT_END: i32 = 128;

    /// The name TVM prints for a type code.
    pub fn name(code: i32) -> &'static str {
        match code {
            INT => "int",
            1 => "uint",
            FLOAT => "float",
            OPAQUE_HANDLE => "handle",
            NULLPTR => "NULL",
            DATA_TYPE => "DLDataType",
            DEVICE => "DLDevice",
            DLTENSOR_HANDLE => "ArrayHandle",
            OBJECT_HANDLE => "ObjectHandle",
            MODULE_HANDLE => "ModuleHandle",
            PACKED_FUNC_HANDLE => "FunctionHandle",
            STR => "str",
            BYTES => "bytes",
            NDARRAY_HANDLE => "NDArrayContainer",
            OBJECT_RVALUE_REF_ARG => "ObjectRValueRefArg",
            BOOL => "bool",
            _ => "unknown type code",
        }
    }
}

/// The reference's device string: `cpu0`, `cuda1`.
pub fn device_string(d: DLDevice) -> String {
    format!("{}{}", device_name(d.device_type), d.device_id)
}

/// Device type names as TVM prints them, and back.
pub fn device_name(device_type: i32) -> &'static str {
    match device_type {
        DL_CPU => "cpu",
        DL_CUDA => "cuda",
        DL_CUDA_HOST => "cuda_host",
        DL_OPENCL => "opencl",
        DL_VULKAN => "vulkan",
        DL_METAL => "metal",
        DL_VPI => "vpi",
        DL_ROCM => "rocm",
        DL_ROCM_HOST => "rocm_host",
        DL_EXT_DEV => "ext_dev",
        DL_CUDA_MANAGED => "cuda_managed",
        DL_ONEAPI => "oneapi",
        DL_WEBGPU => "webgpu",
        DL_HEXAGON => "hexagon",
        _ => "unknown",
    }
}
