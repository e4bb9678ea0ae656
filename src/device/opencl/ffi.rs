//! The OpenCL C API as far as this backend uses it, and its loader.
//!
//! Types, constants and entry-point signatures are those of the Khronos headers (`CL/cl.h`,
//! error codes of extensions from `CL/cl_ext.h`, `CL/cl_gl.h`, `CL/cl_egl.h`,
//! `CL/cl_d3d11.h`, `CL/cl_dx9_media_sharing.h`). The library (`libOpenCL.so.1`, or the first
//! of the `;`-separated paths in `OPENCL_DYLIB_PATH` that loads) is opened at run time and
//! every entry point is looked up by one loop over a name table, so that the loader is the
//! same few instructions whatever the number of entry points.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_void};

pub type cl_int = i32;
pub type cl_uint = u32;
pub type cl_ulong = u64;
pub type cl_bool = cl_uint;
pub type cl_bitfield = cl_ulong;
pub type cl_device_type = cl_bitfield;
pub type cl_platform_info = cl_uint;
pub type cl_device_info = cl_uint;
pub type cl_command_queue_properties = cl_bitfield;
/// `cl_properties` (`cl_ulong`).
pub type cl_queue_properties = cl_ulong;
/// `intptr_t`.
pub type cl_context_properties = isize;
pub type cl_channel_order = cl_uint;
pub type cl_channel_type = cl_uint;
pub type cl_mem_flags = cl_bitfield;
pub type cl_mem_object_type = cl_uint;
pub type cl_program_build_info = cl_uint;

// The object handles: pointers to structures the driver owns.
pub type cl_platform_id = *mut c_void;
pub type cl_device_id = *mut c_void;
pub type cl_context = *mut c_void;
pub type cl_command_queue = *mut c_void;
pub type cl_mem = *mut c_void;
pub type cl_program = *mut c_void;
pub type cl_kernel = *mut c_void;
pub type cl_event = *mut c_void;

/// `cl_image_format`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct cl_image_format {
    pub image_channel_order: cl_channel_order,
    pub image_channel_data_type: cl_channel_type,
}

/// `cl_image_desc` (OpenCL 1.2; 2.0 makes `buffer` a union with `mem_object`, of the same
/// type).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct cl_image_desc {
    pub image_type: cl_mem_object_type,
    pub image_width: usize,
    pub image_height: usize,
    pub image_depth: usize,
    pub image_array_size: usize,
    pub image_row_pitch: usize,
    pub image_slice_pitch: usize,
    pub num_mip_levels: cl_uint,
    pub num_samples: cl_uint,
    pub buffer: cl_mem,
}

pub const CL_SUCCESS: cl_int = 0;
pub const CL_TRUE: cl_bool = 1;
/// `CL_INVALID_VALUE`: what a create call's status holds until the driver sets it.
pub const CL_INVALID_VALUE: cl_int = -30;
/// `CL_PLATFORM_NOT_FOUND_KHR` (`cl_ext.h`): the ICD loader's answer without a driver.
pub const CL_PLATFORM_NOT_FOUND_KHR: cl_int = -1001;

pub const CL_PLATFORM_NAME: cl_platform_info = 0x0902;

pub const CL_DEVICE_TYPE_CPU: cl_device_type = 1 << 1;
pub const CL_DEVICE_TYPE_GPU: cl_device_type = 1 << 2;

pub const CL_DEVICE_MAX_COMPUTE_UNITS: cl_device_info = 0x1002;
pub const CL_DEVICE_MAX_WORK_GROUP_SIZE: cl_device_info = 0x1004;
pub const CL_DEVICE_MAX_WORK_ITEM_SIZES: cl_device_info = 0x1005;
pub const CL_DEVICE_MAX_CLOCK_FREQUENCY: cl_device_info = 0x100C;
pub const CL_DEVICE_IMAGE_SUPPORT: cl_device_info = 0x1016;
pub const CL_DEVICE_GLOBAL_MEM_CACHE_SIZE: cl_device_info = 0x101E;
pub const CL_DEVICE_GLOBAL_MEM_SIZE: cl_device_info = 0x101F;
pub const CL_DEVICE_LOCAL_MEM_SIZE: cl_device_info = 0x1023;
pub const CL_DEVICE_NAME: cl_device_info = 0x102B;
pub const CL_DRIVER_VERSION: cl_device_info = 0x102D;
pub const CL_DEVICE_VERSION: cl_device_info = 0x102F;
pub const CL_DEVICE_IMAGE_PITCH_ALIGNMENT: cl_device_info = 0x104A;

pub const CL_MEM_READ_WRITE: cl_mem_flags = 1 << 0;

pub const CL_RGBA: cl_channel_order = 0x10B5;

pub const CL_SIGNED_INT8: cl_channel_type = 0x10D7;
pub const CL_SIGNED_INT16: cl_channel_type = 0x10D8;
pub const CL_SIGNED_INT32: cl_channel_type = 0x10D9;
pub const CL_UNSIGNED_INT8: cl_channel_type = 0x10DA;
pub const CL_UNSIGNED_INT16: cl_channel_type = 0x10DB;
pub const CL_UNSIGNED_INT32: cl_channel_type = 0x10DC;
pub const CL_HALF_FLOAT: cl_channel_type = 0x10DD;
pub const CL_FLOAT: cl_channel_type = 0x10DE;

pub const CL_MEM_OBJECT_IMAGE2D: cl_mem_object_type = 0x10F1;

pub const CL_PROGRAM_BUILD_LOG: cl_program_build_info = 0x1183;

/// The names of the error codes, one `<code> <name>` per line: the core ones of `cl.h`
/// (0 to -19, -30 to -72) and those of the Khronos extension headers.
const ERROR_NAMES: &str = "0 CL_SUCCESS
-1 CL_DEVICE_NOT_FOUND
-2 CL_DEVICE_NOT_AVAILABLE
-3 CL_COMPILER_NOT_AVAILABLE
-4 CL_MEM_OBJECT_ALLOCATION_FAILURE
-5 CL_OUT_OF_RESOURCES
-6 CL_OUT_OF_HOST_MEMORY
-7 CL_PROFILING_INFO_NOT_AVAILABLE
-8 CL_MEM_COPY_OVERLAP
-9 CL_IMAGE_FORMAT_MISMATCH
-10 CL_IMAGE_FORMAT_NOT_SUPPORTED
-11 CL_BUILD_PROGRAM_FAILURE
-12 CL_MAP_FAILURE
-13 CL_MISALIGNED_SUB_BUFFER_OFFSET
-14 CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
-15 CL_COMPILE_PROGRAM_FAILURE
-16 CL_LINKER_NOT_AVAILABLE
-17 CL_LINK_PROGRAM_FAILURE
-18 CL_DEVICE_PARTITION_FAILED
-19 CL_KERNEL_ARG_INFO_NOT_AVAILABLE
-30 CL_INVALID_VALUE
-31 CL_INVALID_DEVICE_TYPE
-32 CL_INVALID_PLATFORM
-33 CL_INVALID_DEVICE
-34 CL_INVALID_CONTEXT
-35 CL_INVALID_QUEUE_PROPERTIES
-36 CL_INVALID_COMMAND_QUEUE
-37 CL_INVALID_HOST_PTR
-38 CL_INVALID_MEM_OBJECT
-39 CL_INVALID_IMAGE_FORMAT_DESCRIPTOR
-40 CL_INVALID_IMAGE_SIZE
-41 CL_INVALID_SAMPLER
-42 CL_INVALID_BINARY
-43 CL_INVALID_BUILD_OPTIONS
-44 CL_INVALID_PROGRAM
-45 CL_INVALID_PROGRAM_EXECUTABLE
-46 CL_INVALID_KERNEL_NAME
-47 CL_INVALID_KERNEL_DEFINITION
-48 CL_INVALID_KERNEL
-49 CL_INVALID_ARG_INDEX
-50 CL_INVALID_ARG_VALUE
-51 CL_INVALID_ARG_SIZE
-52 CL_INVALID_KERNEL_ARGS
-53 CL_INVALID_WORK_DIMENSION
-54 CL_INVALID_WORK_GROUP_SIZE
-55 CL_INVALID_WORK_ITEM_SIZE
-56 CL_INVALID_GLOBAL_OFFSET
-57 CL_INVALID_EVENT_WAIT_LIST
-58 CL_INVALID_EVENT
-59 CL_INVALID_OPERATION
-60 CL_INVALID_GL_OBJECT
-61 CL_INVALID_BUFFER_SIZE
-62 CL_INVALID_MIP_LEVEL
-63 CL_INVALID_GLOBAL_WORK_SIZE
-64 CL_INVALID_PROPERTY
-65 CL_INVALID_IMAGE_DESCRIPTOR
-66 CL_INVALID_COMPILER_OPTIONS
-67 CL_INVALID_LINKER_OPTIONS
-68 CL_INVALID_DEVICE_PARTITION_COUNT
-69 CL_INVALID_PIPE_SIZE
-70 CL_INVALID_DEVICE_QUEUE
-71 CL_INVALID_SPEC_ID
-72 CL_MAX_SIZE_RESTRICTION_EXCEEDED
-1000 CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR
-1001 CL_PLATFORM_NOT_FOUND_KHR
-1006 CL_INVALID_D3D11_DEVICE_KHR
-1007 CL_INVALID_D3D11_RESOURCE_KHR
-1008 CL_D3D11_RESOURCE_ALREADY_ACQUIRED_KHR
-1009 CL_D3D11_RESOURCE_NOT_ACQUIRED_KHR
-1010 CL_INVALID_DX9_MEDIA_ADAPTER_KHR
-1011 CL_INVALID_DX9_MEDIA_SURFACE_KHR
-1012 CL_DX9_MEDIA_SURFACE_ALREADY_ACQUIRED_KHR
-1013 CL_DX9_MEDIA_SURFACE_NOT_ACQUIRED_KHR
-1057 CL_DEVICE_PARTITION_FAILED_EXT
-1058 CL_INVALID_PARTITION_COUNT_EXT
-1059 CL_INVALID_PARTITION_NAME_EXT
-1092 CL_EGL_RESOURCE_NOT_ACQUIRED_KHR
-1093 CL_INVALID_EGL_OBJECT_KHR
-1094 CL_INVALID_ACCELERATOR_INTEL
-1095 CL_INVALID_ACCELERATOR_TYPE_INTEL
-1096 CL_INVALID_ACCELERATOR_DESCRIPTOR_INTEL
-1097 CL_ACCELERATOR_TYPE_NOT_SUPPORTED_INTEL
-1108 CL_COMMAND_TERMINATED_ITSELF_WITH_FAILURE_ARM
-1121 CL_CONTEXT_TERMINATED_KHR
-1126 CL_CANCELLED_IMG
-1127 CL_PAGE_FAULT_IMG
-1128 CL_SAFETY_FAULT_IMG
-1129 CL_GENERAL_FAULT_IMG
-1130 CL_ECC_UNRECOVERED_IMG
-1138 CL_INVALID_COMMAND_BUFFER_KHR
-1139 CL_INVALID_SYNC_POINT_WAIT_LIST_KHR
-1140 CL_INCOMPATIBLE_COMMAND_QUEUE_KHR
-1141 CL_INVALID_MUTABLE_COMMAND_KHR
-1142 CL_INVALID_SEMAPHORE_KHR";

/// The Khronos name of an error code (`CL_OUT_OF_RESOURCES`, ...), `UNKNOWN_ERROR` for a
/// code no header names.
pub fn error_text(code: cl_int) -> &'static str {
    ERROR_NAMES
        .lines()
        .find_map(|l| {
            let (c, name) = l.split_once(' ')?;
            (c.parse() == Ok(code)).then_some(name)
        })
        .unwrap_or("UNKNOWN_ERROR")
}

/// Declares [`Api`] (one field per entry point: required ones as plain function pointers,
/// optional ones as `Option`s) and its name table: the NUL-terminated names back to back, and
/// each one's field offset.
macro_rules! entry_points {
    (
        required { $($r:ident: fn($($ra:ty),* $(,)?) -> $rr:ty;)* }
        optional { $($o:ident: fn($($oa:ty),* $(,)?) -> $or:ty;)* }
    ) => {
        /// The loaded library's entry points, with the signatures of `CL/cl.h`.
        pub struct Api {
            $(pub $r: unsafe extern "C" fn($($ra),*) -> $rr,)*
            $(pub $o: Option<unsafe extern "C" fn($($oa),*) -> $or>,)*
        }

        /// The entry points' names, each NUL-terminated, required ones first.
        const NAMES: &str = concat!($(stringify!($r), "\0",)* $(stringify!($o), "\0",)*);
        /// How many of [`NAMES`] (the first ones) are required.
        const REQUIRED: usize = [$(stringify!($r)),*].len();
        /// The offset in [`Api`] of each name's field.
        const OFFSETS: &[u16] = &[
            $(std::mem::offset_of!(Api, $r) as u16,)*
            $(std::mem::offset_of!(Api, $o) as u16,)*
        ];
    };
}

entry_points! {
    required {
        clGetPlatformIDs: fn(cl_uint, *mut cl_platform_id, *mut cl_uint) -> cl_int;
        clGetPlatformInfo: fn(cl_platform_id, cl_platform_info, usize, *mut c_void, *mut usize)
            -> cl_int;
        clGetDeviceIDs: fn(cl_platform_id, cl_device_type, cl_uint, *mut cl_device_id,
            *mut cl_uint) -> cl_int;
        clGetDeviceInfo: fn(cl_device_id, cl_device_info, usize, *mut c_void, *mut usize)
            -> cl_int;
        clCreateContext: fn(
            *const cl_context_properties,
            cl_uint,
            *const cl_device_id,
            Option<unsafe extern "C" fn(*const c_char, *const c_void, usize, *mut c_void)>,
            *mut c_void,
            *mut cl_int,
        ) -> cl_context;
        clReleaseCommandQueue: fn(cl_command_queue) -> cl_int;
        clCreateBuffer: fn(cl_context, cl_mem_flags, usize, *mut c_void, *mut cl_int) -> cl_mem;
        clCreateImage: fn(
            cl_context,
            cl_mem_flags,
            *const cl_image_format,
            *const cl_image_desc,
            *mut c_void,
            *mut cl_int,
        ) -> cl_mem;
        clReleaseMemObject: fn(cl_mem) -> cl_int;
        clCreateProgramWithSource: fn(cl_context, cl_uint, *const *const c_char, *const usize,
            *mut cl_int) -> cl_program;
        clBuildProgram: fn(
            cl_program,
            cl_uint,
            *const cl_device_id,
            *const c_char,
            Option<unsafe extern "C" fn(cl_program, *mut c_void)>,
            *mut c_void,
        ) -> cl_int;
        clGetProgramBuildInfo: fn(cl_program, cl_device_id, cl_program_build_info, usize,
            *mut c_void, *mut usize) -> cl_int;
        clReleaseProgram: fn(cl_program) -> cl_int;
        clCreateKernel: fn(cl_program, *const c_char, *mut cl_int) -> cl_kernel;
        clReleaseKernel: fn(cl_kernel) -> cl_int;
        clSetKernelArg: fn(cl_kernel, cl_uint, usize, *const c_void) -> cl_int;
        clWaitForEvents: fn(cl_uint, *const cl_event) -> cl_int;
        clReleaseEvent: fn(cl_event) -> cl_int;
        clFinish: fn(cl_command_queue) -> cl_int;
        clEnqueueReadBuffer: fn(cl_command_queue, cl_mem, cl_bool, usize, usize, *mut c_void,
            cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueWriteBuffer: fn(cl_command_queue, cl_mem, cl_bool, usize, usize, *const c_void,
            cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueFillBuffer: fn(cl_command_queue, cl_mem, *const c_void, usize, usize, usize,
            cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueCopyBuffer: fn(cl_command_queue, cl_mem, cl_mem, usize, usize, usize, cl_uint,
            *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueReadImage: fn(cl_command_queue, cl_mem, cl_bool, *const usize, *const usize,
            usize, usize, *mut c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueWriteImage: fn(cl_command_queue, cl_mem, cl_bool, *const usize, *const usize,
            usize, usize, *const c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueCopyImage: fn(cl_command_queue, cl_mem, cl_mem, *const usize, *const usize,
            *const usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueCopyImageToBuffer: fn(cl_command_queue, cl_mem, cl_mem, *const usize,
            *const usize, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueCopyBufferToImage: fn(cl_command_queue, cl_mem, cl_mem, usize, *const usize,
            *const usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueNDRangeKernel: fn(cl_command_queue, cl_kernel, cl_uint, *const usize,
            *const usize, *const usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueMarkerWithWaitList: fn(cl_command_queue, cl_uint, *const cl_event,
            *mut cl_event) -> cl_int;
        clEnqueueBarrierWithWaitList: fn(cl_command_queue, cl_uint, *const cl_event,
            *mut cl_event) -> cl_int;
    }
    optional {
        // OpenCL 2.0; without it, queues are made with clCreateCommandQueue.
        clCreateCommandQueueWithProperties: fn(cl_context, cl_device_id,
            *const cl_queue_properties, *mut cl_int) -> cl_command_queue;
        // Deprecated by OpenCL 2.0 (a library may one day leave it out).
        clCreateCommandQueue: fn(cl_context, cl_device_id, cl_command_queue_properties,
            *mut cl_int) -> cl_command_queue;
    }
}

// Every field of Api is one function pointer (or an Option of one: the same size, NULL for
// None), so a table with as many offsets as the struct has pointer-sized slots names each
// field exactly once (offsets of distinct fields are distinct).
const _: () = assert!(OFFSETS.len() * std::mem::size_of::<usize>() == std::mem::size_of::<Api>());

/// The library name looked for (after the paths of `OPENCL_DYLIB_PATH`).
pub const LIBRARY: &str = "libOpenCL.so.1";

/// Opens the OpenCL library and looks up every entry point. The error says why (without the
/// `no OpenCL platform: ` prefix the caller adds).
pub fn load() -> Result<Api, String> {
    load_from(&std::env::var("OPENCL_DYLIB_PATH").unwrap_or_default())
}

/// [`load`] with the `;`-separated paths tried before [`LIBRARY`].
fn load_from(extra: &str) -> Result<Api, String> {
    let open = |path: &str| {
        // SAFETY: loading the OpenCL library (an ICD loader or a driver) runs only its own
        // initialisers, as any OpenCL program does.
        unsafe { libloading::Library::new(path) }
    };
    let (path, lib) = match extra
        .split(';')
        .filter(|p| !p.is_empty())
        .find_map(|p| Some((p, open(p).ok()?)))
    {
        Some(found) => found,
        None => (
            LIBRARY,
            open(LIBRARY)
                .map_err(|e| format!("cannot load {LIBRARY} (Could not open library: {e})"))?,
        ),
    };
    let mut api = std::mem::MaybeUninit::<Api>::uninit();
    let base = api.as_mut_ptr().cast::<u8>();
    for (i, (name, &offset)) in NAMES.split_inclusive('\0').zip(OFFSETS).enumerate() {
        // SAFETY: looking a symbol up runs no code; its value is only stored here.
        let p = unsafe { lib.get::<*mut c_void>(name.as_bytes()) }
            .map(|s| *s)
            .unwrap_or(std::ptr::null_mut());
        if p.is_null() && i < REQUIRED {
            return Err(format!(
                "{path} has no {} (OpenCL 1.2 or later is needed)",
                name.trim_end_matches('\0')
            ));
        }
        // SAFETY: `offset` is that of the field this name fills, a function pointer with the
        // entry point's exact signature from `CL/cl.h` (or an Option of one): storing the
        // symbol's address there is the usual transmute of a looked-up symbol to its function
        // type. NULL is stored only in an optional field, where it reads as None.
        unsafe { base.add(offset as usize).cast::<*mut c_void>().write(p) };
    }
    // The entry points stay valid while the library is mapped: for the whole process.
    std::mem::forget(lib);
    // SAFETY: every field was written above (the table names each exactly once, checked at
    // compile time), required ones with non-NULL addresses.
    Ok(unsafe { api.assume_init() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names() {
        assert_eq!(error_text(0), "CL_SUCCESS");
        assert_eq!(error_text(-5), "CL_OUT_OF_RESOURCES");
        assert_eq!(error_text(-19), "CL_KERNEL_ARG_INFO_NOT_AVAILABLE");
        assert_eq!(error_text(-30), "CL_INVALID_VALUE");
        assert_eq!(error_text(-72), "CL_MAX_SIZE_RESTRICTION_EXCEEDED");
        assert_eq!(error_text(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
        assert_eq!(error_text(-1142), "CL_INVALID_SEMAPHORE_KHR");
        assert_eq!(error_text(-20), "UNKNOWN_ERROR");
        assert_eq!(error_text(1), "UNKNOWN_ERROR");
    }

    #[test]
    fn a_library_without_the_entry_points_is_refused_by_name() {
        // The C library loads but has none of them.
        let e = load_from("libc.so.6").err().unwrap();
        assert_eq!(
            e,
            "libc.so.6 has no clGetPlatformIDs (OpenCL 1.2 or later is needed)"
        );
    }

    #[test]
    fn the_name_table_matches_the_fields() {
        let names: Vec<&str> = NAMES.split_inclusive('\0').collect();
        assert_eq!(names.len(), OFFSETS.len());
        assert!(names
            .iter()
            .all(|n| n.starts_with("cl") && n.ends_with('\0')));
        assert_eq!(names[0], "clGetPlatformIDs\0");
        assert_eq!(names[REQUIRED], "clCreateCommandQueueWithProperties\0");
        assert_eq!(
            OFFSETS[REQUIRED] as usize,
            std::mem::offset_of!(Api, clCreateCommandQueueWithProperties)
        );
    }
}
