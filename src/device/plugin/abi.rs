//! The plugin ABI: the function table a plugin hands over (`TVMDevicePlugin`).

use crate::packed_func::types::{DLDataType, DLDevice, TVMValue};
use std::ffi::{c_char, c_int, c_void};

/// The ABI version of [`TVMDevicePlugin`].
pub const ABI_VERSION: u32 = 1;
/// Lowest device type a plugin may claim.
pub const MIN_PLUGIN_DEVICE_TYPE: i32 = 32;

/// The plugin function table (`TVMDevicePlugin` in `device_plugin.h`).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub struct TVMDevicePlugin {
    pub abi_version: u32,
    pub struct_size: u32,
    pub name: *const c_char,
    pub device_type: i32,
    pub self_: *mut c_void,
    pub get_attr: Option<
        unsafe extern "C" fn(*mut c_void, DLDevice, c_int, *mut TVMValue, *mut c_int) -> c_int,
    >,
    pub set_device: Option<unsafe extern "C" fn(*mut c_void, DLDevice) -> c_int>,
    pub alloc_data_space: Option<
        unsafe extern "C" fn(
            *mut c_void,
            DLDevice,
            usize,
            usize,
            DLDataType,
            *mut *mut c_void,
        ) -> c_int,
    >,
    pub free_data_space: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub copy_data: Option<
        unsafe extern "C" fn(
            *mut c_void,
            *const c_void,
            usize,
            *mut c_void,
            usize,
            usize,
            DLDevice,
            DLDevice,
            DLDataType,
            *mut c_void,
        ) -> c_int,
    >,
    pub stream_sync: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub alloc_workspace: Option<
        unsafe extern "C" fn(*mut c_void, DLDevice, usize, DLDataType, *mut *mut c_void) -> c_int,
    >,
    pub free_workspace: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub create_stream:
        Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut *mut c_void) -> c_int>,
    pub free_stream: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub set_stream: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub sync_stream_from_to:
        Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void, *mut c_void) -> c_int>,
    pub module_format: *const c_char,
    pub load_module:
        Option<unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut *mut c_void) -> c_int>,
    pub module_get_function: Option<
        unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_char, *mut *mut c_void) -> c_int,
    >,
    pub module_free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
    pub release: Option<unsafe extern "C" fn(*mut c_void)>,
}
