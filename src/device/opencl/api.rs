//! The OpenCL device API: attributes from the driver, buffers and 2-D images (TVM's texture
//! memory scopes), copies between host, buffers and images, command queues as streams, and a
//! pooled workspace.
//!
//! A device pointer of this backend points at a [`ClBuffer`] whose first field is the
//! `cl_mem`, as the reference's `BufferDescriptor`: compiled host code passes such pointers to
//! kernels, and the kernel launcher hands the `cl_mem` to the driver.

use super::ffi::{self, cl_command_queue, cl_event, cl_mem, CL_TRUE};
use super::{
    check, created, device_sizes, device_string, device_uint, ok, platforms, queue_for,
    set_current_device, set_current_stream, Platforms, WARP_SIZE_ENV,
};
use crate::device::workspace::WorkspacePools;
use crate::device::{DeviceApi, DeviceAttr, Stream};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::types::{DLDataType, DLDevice, DLTensor, DL_CPU, DL_OPENCL};
use crate::packed_func::value::{RawHandle, RetValue};
use std::ffi::c_void;

/// Marks live [`ClBuffer`]s, to refuse pointers of other origins with a message.
const BUFFER_MAGIC: u64 = 0x6f63_6c62_7566_6672;

/// The reference's `kApiVersion` answer (the OpenCL headers' target version, 1.2).
const API_VERSION: i64 = 120;

/// A 2-D image's extent, in pixels of four channels.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ImageExtent {
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Bytes per pixel (four channels).
    pub pixel_bytes: usize,
}

/// A buffer or image of this backend; device pointers point at one of these.
#[repr(C)]
pub struct ClBuffer {
    /// The memory object (first, as the reference's descriptor).
    pub mem: cl_mem,
    /// [`BUFFER_MAGIC`] while live (second, so that it is read before anything else).
    magic: u64,
    /// The size in bytes (for an image: width × height × pixel size).
    pub size: usize,
    /// The TVM device id it lives on.
    pub device_id: i32,
    /// `Some` for a 2-D image.
    pub image: Option<ImageExtent>,
    /// For an image: the texture scope it was made for (how a tensor's shape folds into it).
    pub scope: &'static str,
}

/// The buffer behind a device pointer of this backend.
///
/// # Safety
/// `p` must come from this backend's allocation and still be live.
pub unsafe fn buffer_of<'a>(p: *const c_void) -> Result<&'a ClBuffer> {
    if p.is_null() {
        return Err(Error::value("OpenCL: NULL device pointer"));
    }
    // Only the magic word is read until it matches (a raw read: no reference to a value that
    // may not be a ClBuffer).
    // SAFETY: caller contract: `p` addresses at least the first two words of a ClBuffer.
    let magic = unsafe { std::ptr::addr_of!((*(p as *const ClBuffer)).magic).read_unaligned() };
    if magic != BUFFER_MAGIC {
        return Err(Error::value(
            "OpenCL: the pointer is not an OpenCL buffer of this runtime (freed, or from \
             another device)",
        ));
    }
    // SAFETY: a live ClBuffer of this backend (the magic word matches).
    Ok(unsafe { &*(p as *const ClBuffer) })
}

/// The backend for `kDLOpenCL`.
#[derive(Default)]
pub struct OpenclDeviceApi {
    pools: WorkspacePools<i32>,
}

/// The platforms, or an error naming the device that cannot be used without them.
pub(crate) fn platforms_for(dev: DLDevice) -> Result<&'static Platforms> {
    platforms().map_err(|e| {
        Error::internal_fmt(format_args!(
            "device {} is not available: {}",
            crate::device::describe(dev),
            e.message
        ))
    })
}

fn check_range(b: &ClBuffer, offset: u64, n: usize, what: &str) -> Result<()> {
    if offset
        .checked_add(n as u64)
        .is_none_or(|e| e > b.size as u64)
    {
        return Err(Error::value_fmt(format_args!(
            "OpenCL copy: {what} range [{offset}, +{n}) is outside the {}-byte buffer",
            b.size
        )));
    }
    Ok(())
}

/// The image channel type of a tensor element type (four channels per pixel).
fn channel_type(t: DLDataType) -> Result<u32> {
    use ffi::*;
    Ok(match (t.code, t.bits) {
        (2, 32) => CL_FLOAT,
        (2, 16) => CL_HALF_FLOAT,
        (0, 8) => CL_SIGNED_INT8,
        (0, 16) => CL_SIGNED_INT16,
        (0, 32) => CL_SIGNED_INT32,
        (1, 8) => CL_UNSIGNED_INT8,
        (1, 16) => CL_UNSIGNED_INT16,
        (1, 32) => CL_UNSIGNED_INT32,
        _ => {
            return Err(Error::value_fmt(format_args!(
                "OpenCL: no image channel type for {}",
                crate::packed_func::dtype::dtype_to_string(t)
            )))
        }
    })
}

/// The (width, height) in pixels of a texture-scoped tensor, as the reference folds its shape:
/// the last dimension is the four channels; the dimensions before the split axis make the
/// height, the rest the width. The split axis is `ndim - 2` for `global.texture`, 1 for
/// `global.texture-weight`, and for `global.texture-nhwc` 1 when `ndim` is 3, else 2.
pub fn texture_extent(shape: &[i64], scope: &str) -> Result<(usize, usize)> {
    let nd = shape.len();
    if nd < 3 {
        return Err(Error::value_fmt(format_args!(
            "OpenCL: memory scope '{scope}' needs a tensor of at least 3 dimensions (got {nd})"
        )));
    }
    if shape[nd - 1] != 4 {
        return Err(Error::value_fmt(format_args!(
            "OpenCL: memory scope '{scope}' needs 4 channels in the last dimension (got {})",
            shape[nd - 1]
        )));
    }
    let axis = if scope.ends_with("texture-weight") {
        1
    } else if scope.ends_with("texture-nhwc") {
        if nd == 3 {
            1
        } else {
            2
        }
    } else {
        nd - 2
    };
    let prod = |s: &[i64]| -> Result<usize> {
        s.iter().try_fold(1usize, |a, &d| {
            usize::try_from(d)
                .ok()
                .and_then(|d| a.checked_mul(d))
                .ok_or_else(|| Error::value("OpenCL: bad texture shape"))
        })
    };
    Ok((prod(&shape[axis..nd - 1])?, prod(&shape[..axis])?))
}

/// The texture scope a scope name stands for (`global.texture` for any other).
fn texture_scope(s: &str) -> &'static str {
    if s.ends_with("texture-weight") {
        "global.texture-weight"
    } else if s.ends_with("texture-nhwc") {
        "global.texture-nhwc"
    } else {
        "global.texture"
    }
}

/// Copies between tensors when one is (a view of) an image: the region is the tensor's shape
/// folded as the image's scope folds it (a view may cover only part of a larger image, as the
/// graph executor's shared texture storage does). `None` when neither side is an image.
///
/// # Safety
/// Both tensors must describe valid memory on their devices.
unsafe fn copy_tensor_images(from: &DLTensor, to: &DLTensor, stream: Stream) -> Option<Result<()>> {
    let image_of = |t: &DLTensor| -> Option<&ClBuffer> {
        if t.device.device_type != DL_OPENCL || t.data.is_null() {
            return None;
        }
        // SAFETY: an OpenCL tensor's data is this backend's buffer (checked).
        let b = unsafe { buffer_of(t.data) }.ok()?;
        b.image.is_some().then_some(b)
    };
    let (fi, ti) = (image_of(from), image_of(to));
    if fi.is_none() && ti.is_none() {
        return None;
    }
    Some((|| {
        let region = |t: &DLTensor, b: &ClBuffer| -> Result<[usize; 3]> {
            // SAFETY: a live tensor's shape holds ndim entries.
            let shape = unsafe { crate::packed_func::tensor::shape_of(t) };
            let (w, h) = texture_extent(shape, b.scope)?;
            let e = b.image.unwrap_or(ImageExtent {
                width: 0,
                height: 0,
                pixel_bytes: 0,
            });
            if w > e.width || h > e.height || t.byte_offset != 0 {
                return Err(Error::value_fmt(format_args!(
                    "OpenCL: a tensor of {w} x {h} pixels (byte offset {}) does not fit its \
                     {} x {} image",
                    t.byte_offset, e.width, e.height
                )));
            }
            Ok([w.max(1), h.max(1), 1])
        };
        let dev = if fi.is_some() { from.device } else { to.device };
        let p = platforms_for(dev)?;
        let queue = if stream.is_null() {
            queue_for(p, dev.device_id)?
        } else {
            stream as cl_command_queue
        };
        let nbytes = crate::packed_func::tensor::tensor_nbytes(from)?;
        let o = [0usize; 3];
        let cl = p.cl;
        let null = std::ptr::null_mut::<cl_event>();
        match (fi, ti) {
            (Some(s), Some(d)) => {
                let r = region(from, s)?;
                if r != region(to, d)? {
                    return Err(Error::value("OpenCL: image copy between different extents"));
                }
                check(
                    // SAFETY: live images of this backend in the queue's context, a region inside
                    // both (checked), no events.
                    unsafe {
                        (cl.clEnqueueCopyImage)(
                            queue,
                            s.mem,
                            d.mem,
                            o.as_ptr(),
                            o.as_ptr(),
                            r.as_ptr(),
                            0,
                            std::ptr::null(),
                            null,
                        )
                    },
                    "clEnqueueCopyImage",
                )
            }
            (Some(s), None) => {
                let r = region(from, s)?;
                if to.device.device_type == DL_OPENCL {
                    // SAFETY: an OpenCL tensor's data is this backend's buffer (checked).
                    let d = unsafe { buffer_of(to.data) }?;
                    check_range(d, to.byte_offset, nbytes, "destination")?;
                    return check(
                        // SAFETY: a live image and buffer of this backend in the queue's context,
                        // the region inside the image and the bytes inside the buffer (checked), no
                        // events.
                        unsafe {
                            (cl.clEnqueueCopyImageToBuffer)(
                                queue,
                                s.mem,
                                d.mem,
                                o.as_ptr(),
                                r.as_ptr(),
                                to.byte_offset as usize,
                                0,
                                std::ptr::null(),
                                null,
                            )
                        },
                        "clEnqueueCopyImageToBuffer",
                    );
                }
                check(
                    // SAFETY: a live image, a region inside it (checked), and the caller's host
                    // range of as many bytes; a blocking read, no events.
                    unsafe {
                        (cl.clEnqueueReadImage)(
                            queue,
                            s.mem,
                            CL_TRUE,
                            o.as_ptr(),
                            r.as_ptr(),
                            0,
                            0,
                            (to.data as *mut u8).add(to.byte_offset as usize) as *mut c_void,
                            0,
                            std::ptr::null(),
                            null,
                        )
                    },
                    "clEnqueueReadImage",
                )
            }
            (None, Some(d)) => {
                let r = region(to, d)?;
                if from.device.device_type == DL_OPENCL {
                    // SAFETY: an OpenCL tensor's data is this backend's buffer (checked).
                    let s = unsafe { buffer_of(from.data) }?;
                    check_range(s, from.byte_offset, nbytes, "source")?;
                    return check(
                        // SAFETY: a live buffer and image of this backend in the queue's context,
                        // the bytes inside the buffer and the region inside the image (checked), no
                        // events.
                        unsafe {
                            (cl.clEnqueueCopyBufferToImage)(
                                queue,
                                s.mem,
                                d.mem,
                                from.byte_offset as usize,
                                o.as_ptr(),
                                r.as_ptr(),
                                0,
                                std::ptr::null(),
                                null,
                            )
                        },
                        "clEnqueueCopyBufferToImage",
                    );
                }
                check(
                    // SAFETY: a live image, a region inside it (checked), and the caller's host
                    // range of as many bytes; a blocking write, no events.
                    unsafe {
                        (cl.clEnqueueWriteImage)(
                            queue,
                            d.mem,
                            CL_TRUE,
                            o.as_ptr(),
                            r.as_ptr(),
                            0,
                            0,
                            (from.data as *const u8).add(from.byte_offset as usize)
                                as *const c_void,
                            0,
                            std::ptr::null(),
                            null,
                        )
                    },
                    "clEnqueueWriteImage",
                )
            }
            (None, None) => unreachable!("one side is an image"),
        }
    })())
}

impl OpenclDeviceApi {
    /// Allocates a 2-D RGBA image of `width` × `height` pixels on device `dev`.
    pub fn alloc_image(
        &self,
        dev: DLDevice,
        width: usize,
        height: usize,
        dtype: DLDataType,
        scope: &str,
    ) -> Result<*mut c_void> {
        let scope = texture_scope(scope);
        let p = platforms_for(dev)?;
        let d = p.device(dev.device_id)?;
        if !d.image_support {
            return Err(Error::value_fmt(format_args!(
                "OpenCL: device opencl({}) ({}) does not support images, which texture memory \
                 scope `{scope}` (kernels built for -device=adreno) needs: build for \
                 -device=mali or -device=intel_graphics",
                dev.device_id, d.name
            )));
        }
        let format = ffi::cl_image_format {
            image_channel_order: ffi::CL_RGBA,
            image_channel_data_type: channel_type(dtype)?,
        };
        let desc = ffi::cl_image_desc {
            image_type: ffi::CL_MEM_OBJECT_IMAGE2D,
            image_width: width.max(1),
            image_height: height.max(1),
            image_depth: 0,
            image_array_size: 0,
            image_row_pitch: 0,
            image_slice_pitch: 0,
            num_mip_levels: 0,
            num_samples: 0,
            buffer: std::ptr::null_mut(),
        };
        let mut status = ffi::CL_INVALID_VALUE;
        // SAFETY: a live context, plain flags, a valid format and description, no host
        // pointer.
        let mem = unsafe {
            (p.cl.clCreateImage)(
                p.contexts[d.context],
                ffi::CL_MEM_READ_WRITE,
                &format,
                &desc,
                std::ptr::null_mut(),
                &mut status,
            )
        };
        let mem = ok(created(mem, status), "clCreateImage")?;
        let pixel_bytes = 4 * (dtype.bits as usize).div_ceil(8);
        Ok(Box::into_raw(Box::new(ClBuffer {
            mem,
            size: width * height * pixel_bytes,
            device_id: dev.device_id,
            image: Some(ImageExtent {
                width,
                height,
                pixel_bytes,
            }),
            scope,
            magic: BUFFER_MAGIC,
        })) as *mut c_void)
    }
}

/// Zeroed bytes kept after the end of every buffer. Compiled kernels may read a little past a
/// buffer and rely on what they read there being finite: the reference compiler's conv2d
/// schedule for `-device=adreno` pads the data to four channels but not the weights, so with
/// three input channels (any RGB model's first layer) the last output block reads one input
/// channel's kernel window (KH x KW x 4 floats: 144 bytes for 3x3, 784 for 7x7) past the
/// weights' end and multiplies it by the padding's zeros. 0 x NaN is NaN: with uninitialised
/// driver memory there, the output was wrong in about one run in five on POCL. 4 KiB covers
/// one to three missing channels for windows up to 9x9.
pub const ZERO_TAIL: usize = 4096;

fn origin_region(e: &ImageExtent) -> ([usize; 3], [usize; 3]) {
    ([0, 0, 0], [e.width.max(1), e.height.max(1), 1])
}

/// Copies involving an image: whole images only (offset 0, the image's size).
///
/// # Safety
/// As [`DeviceApi::copy_data`].
#[allow(clippy::too_many_arguments)]
unsafe fn copy_image(
    p: &Platforms,
    queue: cl_command_queue,
    src: Option<&ClBuffer>,
    from: *const u8,
    dst: Option<&ClBuffer>,
    to: *mut u8,
    offsets: (u64, u64),
    nbytes: usize,
) -> Result<()> {
    let whole = |b: &ClBuffer, off: u64| -> Result<()> {
        if b.image.is_some() && (off != 0 || nbytes != b.size) {
            return Err(Error::value_fmt(format_args!(
                "OpenCL: copies to or from an image must cover the whole image ({} bytes at \
                 offset 0; got {nbytes} bytes at offset {off})",
                b.size
            )));
        }
        check_range(b, off, nbytes, "image")
    };
    let cl = p.cl;
    let null = std::ptr::null_mut::<cl_event>();
    match (src, dst) {
        (Some(s), Some(d)) => {
            whole(s, offsets.0)?;
            whole(d, offsets.1)?;
            match (s.image, d.image) {
                (Some(e), Some(_)) => {
                    let (o, r) = origin_region(&e);
                    check(
                        // SAFETY: live images of this backend in the queue's context, a region
                        // inside both (checked), no events.
                        unsafe {
                            (cl.clEnqueueCopyImage)(
                                queue,
                                s.mem,
                                d.mem,
                                o.as_ptr(),
                                o.as_ptr(),
                                r.as_ptr(),
                                0,
                                std::ptr::null(),
                                null,
                            )
                        },
                        "clEnqueueCopyImage",
                    )
                }
                (Some(e), None) => {
                    let (o, r) = origin_region(&e);
                    check(
                        // SAFETY: a live image and buffer of this backend in the queue's context,
                        // the region inside the image and the bytes inside the buffer (checked), no
                        // events.
                        unsafe {
                            (cl.clEnqueueCopyImageToBuffer)(
                                queue,
                                s.mem,
                                d.mem,
                                o.as_ptr(),
                                r.as_ptr(),
                                offsets.1 as usize,
                                0,
                                std::ptr::null(),
                                null,
                            )
                        },
                        "clEnqueueCopyImageToBuffer",
                    )
                }
                (None, Some(e)) => {
                    let (o, r) = origin_region(&e);
                    check(
                        // SAFETY: a live buffer and image of this backend in the queue's context,
                        // the bytes inside the buffer and the region inside the image (checked), no
                        // events.
                        unsafe {
                            (cl.clEnqueueCopyBufferToImage)(
                                queue,
                                s.mem,
                                d.mem,
                                offsets.0 as usize,
                                o.as_ptr(),
                                r.as_ptr(),
                                0,
                                std::ptr::null(),
                                null,
                            )
                        },
                        "clEnqueueCopyBufferToImage",
                    )
                }
                (None, None) => unreachable!("one side is an image"),
            }
        }
        (Some(s), None) => {
            whole(s, offsets.0)?;
            let e = s.image.unwrap_or(ImageExtent {
                width: 0,
                height: 0,
                pixel_bytes: 0,
            });
            let (o, r) = origin_region(&e);
            check(
                // SAFETY: a live image, a region inside it (checked), and the caller's host range
                // of as many bytes; a blocking read, no events.
                unsafe {
                    (cl.clEnqueueReadImage)(
                        queue,
                        s.mem,
                        CL_TRUE,
                        o.as_ptr(),
                        r.as_ptr(),
                        0,
                        0,
                        to.add(offsets.1 as usize) as *mut c_void,
                        0,
                        std::ptr::null(),
                        null,
                    )
                },
                "clEnqueueReadImage",
            )
        }
        (None, Some(d)) => {
            whole(d, offsets.1)?;
            let e = d.image.unwrap_or(ImageExtent {
                width: 0,
                height: 0,
                pixel_bytes: 0,
            });
            let (o, r) = origin_region(&e);
            check(
                // SAFETY: a live image, a region inside it (checked), and the caller's host range
                // of as many bytes; a blocking write, no events.
                unsafe {
                    (cl.clEnqueueWriteImage)(
                        queue,
                        d.mem,
                        CL_TRUE,
                        o.as_ptr(),
                        r.as_ptr(),
                        0,
                        0,
                        from.add(offsets.0 as usize) as *const c_void,
                        0,
                        std::ptr::null(),
                        null,
                    )
                },
                "clEnqueueWriteImage",
            )
        }
        (None, None) => unreachable!("one side is on the device"),
    }
}

// Device pointers and streams are handles the trait's contract says came from this backend;
// device pointers are checked before use.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl DeviceApi for OpenclDeviceApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        platforms_for(dev)?.device(dev.device_id)?;
        set_current_device(dev.device_id);
        Ok(())
    }

    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<RetValue> {
        use ffi::*;
        if kind == DeviceAttr::Exist {
            let n = super::device_count();
            return Ok(RetValue::Int(
                (dev.device_id >= 0 && (dev.device_id as usize) < n) as i64,
            ));
        }
        let p = platforms_for(dev)?;
        let d = p.device(dev.device_id)?;
        let int =
            |param| -> Result<RetValue> { Ok(RetValue::Int(device_uint(d.id, param)? as i64)) };
        Ok(match kind {
            DeviceAttr::Exist => unreachable!("answered above"),
            DeviceAttr::MaxThreadsPerBlock => int(CL_DEVICE_MAX_WORK_GROUP_SIZE)?,
            DeviceAttr::WarpSize => RetValue::Int(
                std::env::var(WARP_SIZE_ENV)
                    .ok()
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .unwrap_or(1),
            ),
            DeviceAttr::MaxSharedMemoryPerBlock => int(CL_DEVICE_LOCAL_MEM_SIZE)?,
            DeviceAttr::ComputeVersion => RetValue::Str(super::version_token(&d.version).into()),
            DeviceAttr::DeviceName => RetValue::Str(d.name.clone()),
            DeviceAttr::MaxClockRate => {
                RetValue::Int(device_uint(d.id, CL_DEVICE_MAX_CLOCK_FREQUENCY)? as i64 * 1000)
            }
            DeviceAttr::MultiProcessorCount => int(CL_DEVICE_MAX_COMPUTE_UNITS)?,
            DeviceAttr::MaxThreadDimensions => {
                let s = device_sizes(d.id, CL_DEVICE_MAX_WORK_ITEM_SIZES)?;
                let s: Vec<String> = s.iter().map(|v| v.to_string()).collect();
                RetValue::Str(format!("[{}]", s.join(", ")))
            }
            DeviceAttr::ApiVersion => RetValue::Int(API_VERSION),
            DeviceAttr::DriverVersion => RetValue::Str(device_string(d.id, CL_DRIVER_VERSION)?),
            DeviceAttr::L2CacheSizeBytes => int(CL_DEVICE_GLOBAL_MEM_CACHE_SIZE)?,
            DeviceAttr::TotalGlobalMemory => int(CL_DEVICE_GLOBAL_MEM_SIZE)?,
            DeviceAttr::ImagePitchAlignment => {
                match device_uint(d.id, CL_DEVICE_IMAGE_PITCH_ALIGNMENT)? {
                    0 => RetValue::Int(64),
                    v => RetValue::Int(v as i64),
                }
            }
            DeviceAttr::MaxRegistersPerBlock
            | DeviceAttr::GcnArch
            | DeviceAttr::AvailableGlobalMemory => RetValue::Null,
        })
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        _alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        let p = platforms_for(dev)?;
        let d = p.device(dev.device_id)?;
        // The buffer holds the data (rounded up to 4 bytes), then a zeroed tail (ZERO_TAIL);
        // an empty tensor gets just the tail (OpenCL refuses empty buffers).
        let start = nbytes
            .checked_next_multiple_of(4)
            .ok_or_else(|| Error::value("OpenCL: buffer size overflows"))?;
        let create = |size: usize| {
            let mut status = ffi::CL_INVALID_VALUE;
            // SAFETY: a live context, plain flags, no host pointer.
            let mem = unsafe {
                (p.cl.clCreateBuffer)(
                    p.contexts[d.context],
                    ffi::CL_MEM_READ_WRITE,
                    size,
                    std::ptr::null_mut(),
                    &mut status,
                )
            };
            created(mem, status)
        };
        let (mem, tail) = match start.checked_add(ZERO_TAIL).map(create) {
            Some(Ok(m)) => (m, ZERO_TAIL),
            // At the device's largest allocation: the exact size, without a tail.
            _ => (
                create(nbytes.max(1)).map_err(|code| {
                    Error::tvm_fmt(format_args!(
                        "OpenCL: cannot allocate {nbytes} bytes on opencl({}): {} ({code})",
                        dev.device_id,
                        super::error_name(code)
                    ))
                })?,
                0,
            ),
        };
        if tail > 0 {
            // Filled on the device's fill queue and waited for: the tail is zero before any
            // queue (stream) of the device can run a kernel that reads it.
            let zero = 0u32;
            let mut ev: cl_event = std::ptr::null_mut();
            let mut r = check(
                // SAFETY: the new buffer, a 4-byte pattern, a 4-byte-aligned range inside it, an
                // event out pointer.
                unsafe {
                    (p.cl.clEnqueueFillBuffer)(
                        d.fill_queue,
                        mem,
                        &zero as *const u32 as *const c_void,
                        4,
                        start,
                        tail,
                        0,
                        std::ptr::null(),
                        &mut ev,
                    )
                },
                "clEnqueueFillBuffer",
            );
            if r.is_ok() {
                // SAFETY: one event, just returned by the driver.
                r = check(unsafe { (p.cl.clWaitForEvents)(1, &ev) }, "clWaitForEvents");
                // The event is released whatever the wait said; a release error only leaks it.
                // SAFETY: an event the driver returned, released once.
                let _ = unsafe { (p.cl.clReleaseEvent)(ev) };
            }
            if let Err(e) = r {
                // SAFETY: the memory object just created, released once.
                let _ = unsafe { (p.cl.clReleaseMemObject)(mem) };
                return Err(e);
            }
        }
        Ok(Box::into_raw(Box::new(ClBuffer {
            mem,
            size: nbytes,
            device_id: dev.device_id,
            image: None,
            scope: "global",
            magic: BUFFER_MAGIC,
        })) as *mut c_void)
    }

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
            Some(s) if s.contains("texture") => {
                let (w, h) = texture_extent(shape, s)?;
                self.alloc_image(dev, w, h, dtype, s)
            }
            Some(s) => Err(Error::tvm_fmt(format_args!(
                "device opencl({}) does not support memory scope '{s}'",
                dev.device_id
            ))),
        }
    }

    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the DeviceApi contract: a pointer of this backend.
        unsafe { buffer_of(ptr)? };
        let p = platforms_for(dev)?;
        // SAFETY: the pointer came from this backend (checked above) and is freed once.
        let mut b = unsafe { Box::from_raw(ptr as *mut ClBuffer) };
        b.magic = 0;
        // Commands already queued keep the memory object alive until they finish (OpenCL's
        // release rule), so no wait is needed.
        // SAFETY: a memory object this backend created, released once.
        check(
            unsafe { (p.cl.clReleaseMemObject)(b.mem) },
            "clReleaseMemObject",
        )
    }

    unsafe fn copy_data(
        &self,
        from: *const c_void,
        from_offset: u64,
        to: *mut c_void,
        to_offset: u64,
        nbytes: usize,
        dev_from: DLDevice,
        dev_to: DLDevice,
        _type_hint: DLDataType,
        stream: Stream,
    ) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        let (cf, ct) = (
            dev_from.device_type == DL_OPENCL,
            dev_to.device_type == DL_OPENCL,
        );
        if !cf && !ct {
            if dev_from.device_type != DL_CPU || dev_to.device_type != DL_CPU {
                return Err(Error::internal_fmt(format_args!(
                    "expect copy from/to OpenCL or between OpenCL (got a copy from {} to {})",
                    crate::device::describe(dev_from),
                    crate::device::describe(dev_to)
                )));
            }
            // SAFETY: both ranges are valid host memory (the caller's contract).
            unsafe {
                std::ptr::copy(
                    (from as *const u8).add(from_offset as usize),
                    (to as *mut u8).add(to_offset as usize),
                    nbytes,
                )
            };
            return Ok(());
        }
        for (on, d) in [(cf, dev_from), (ct, dev_to)] {
            if !on && d.device_type != DL_CPU {
                return Err(Error::internal_fmt(format_args!(
                    "expect copy from/to OpenCL or between OpenCL (got a copy from {} to {})",
                    crate::device::describe(dev_from),
                    crate::device::describe(dev_to)
                )));
            }
        }
        let p = platforms_for(if cf { dev_from } else { dev_to })?;
        let cl = p.cl;
        let src = if cf {
            // SAFETY: the DeviceApi contract: device pointers of this backend.
            Some(unsafe { buffer_of(from)? })
        } else {
            None
        };
        let dst = if ct {
            // SAFETY: as above.
            Some(unsafe { buffer_of(to)? })
        } else {
            None
        };
        // The queue: the given stream, else the thread's current stream of the device doing
        // the work (the destination for device-to-device copies), else its default queue.
        let work_dev = if ct { dev_to } else { dev_from };
        p.device(work_dev.device_id)?;
        let queue = if stream.is_null() {
            queue_for(p, work_dev.device_id)?
        } else {
            stream as cl_command_queue
        };
        if src.is_some_and(|b| b.image.is_some()) || dst.is_some_and(|b| b.image.is_some()) {
            // SAFETY: forwarded contract.
            return unsafe {
                copy_image(
                    p,
                    queue,
                    src,
                    from as *const u8,
                    dst,
                    to as *mut u8,
                    (from_offset, to_offset),
                    nbytes,
                )
            };
        }
        let null = std::ptr::null_mut::<cl_event>();
        match (src, dst) {
            (Some(s), Some(d)) => {
                check_range(s, from_offset, nbytes, "source")?;
                check_range(d, to_offset, nbytes, "destination")?;
                let same_context = p.device(s.device_id)?.context == p.device(d.device_id)?.context;
                if same_context {
                    if s.device_id != d.device_id {
                        // The source device's pending writes must be done first.
                        let q = queue_for(p, s.device_id)?;
                        // SAFETY: a live command queue of the device.
                        check(unsafe { (cl.clFinish)(q) }, "clFinish")?;
                    }
                    return check(
                        // SAFETY: live buffers of this backend in the queue's context, ranges
                        // inside both (checked), no events.
                        unsafe {
                            (cl.clEnqueueCopyBuffer)(
                                queue,
                                s.mem,
                                d.mem,
                                from_offset as usize,
                                to_offset as usize,
                                nbytes,
                                0,
                                std::ptr::null(),
                                null,
                            )
                        },
                        "clEnqueueCopyBuffer",
                    );
                }
                // Devices of different platforms: through host memory.
                let mut tmp = vec![0u8; nbytes];
                let host = DLDevice::new(DL_CPU, 0);
                // SAFETY: the caller's ranges; `tmp` holds `nbytes`.
                unsafe {
                    self.copy_data(
                        from,
                        from_offset,
                        tmp.as_mut_ptr() as *mut c_void,
                        0,
                        nbytes,
                        dev_from,
                        host,
                        _type_hint,
                        std::ptr::null_mut(),
                    )?;
                    self.copy_data(
                        tmp.as_ptr() as *const c_void,
                        0,
                        to,
                        to_offset,
                        nbytes,
                        host,
                        dev_to,
                        _type_hint,
                        std::ptr::null_mut(),
                    )
                }
            }
            (Some(s), None) => {
                check_range(s, from_offset, nbytes, "source")?;
                check(
                    // SAFETY: a live buffer, a range inside it (checked), and the caller's host
                    // range of as many bytes; a blocking read, no events.
                    unsafe {
                        (cl.clEnqueueReadBuffer)(
                            queue,
                            s.mem,
                            CL_TRUE,
                            from_offset as usize,
                            nbytes,
                            (to as *mut u8).add(to_offset as usize) as *mut c_void,
                            0,
                            std::ptr::null(),
                            null,
                        )
                    },
                    "clEnqueueReadBuffer",
                )
            }
            (None, Some(d)) => {
                check_range(d, to_offset, nbytes, "destination")?;
                check(
                    // SAFETY: a live buffer, a range inside it (checked), and the caller's host
                    // range of as many bytes; a blocking write, no events.
                    unsafe {
                        (cl.clEnqueueWriteBuffer)(
                            queue,
                            d.mem,
                            CL_TRUE,
                            to_offset as usize,
                            nbytes,
                            (from as *const u8).add(from_offset as usize) as *const c_void,
                            0,
                            std::ptr::null(),
                            null,
                        )
                    },
                    "clEnqueueWriteBuffer",
                )
            }
            (None, None) => unreachable!("one side is on the device"),
        }
    }

    fn create_stream(&self, dev: DLDevice) -> Result<Stream> {
        let p = platforms_for(dev)?;
        let d = p.device(dev.device_id)?;
        Ok(super::create_queue(p.cl, p.contexts[d.context], d.id)? as Stream)
    }

    unsafe fn free_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        if stream.is_null() {
            return Ok(());
        }
        let p = platforms_for(dev)?;
        let q = stream as cl_command_queue;
        if super::current_stream(dev.device_id) == q {
            set_current_stream(dev.device_id, std::ptr::null_mut());
        }
        // SAFETY: a live command queue of the device.
        check(unsafe { (p.cl.clFinish)(q) }, "clFinish")?;
        // SAFETY: a queue this backend created (the stream), released once.
        check(
            unsafe { (p.cl.clReleaseCommandQueue)(q) },
            "clReleaseCommandQueue",
        )
    }

    unsafe fn set_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        set_current_stream(dev.device_id, stream as cl_command_queue);
        Ok(())
    }

    fn current_stream(&self, dev: DLDevice) -> Stream {
        super::current_stream(dev.device_id) as Stream
    }

    unsafe fn stream_sync(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        let p = platforms_for(dev)?;
        let q = if stream.is_null() {
            p.device(dev.device_id)?.queue
        } else {
            stream as cl_command_queue
        };
        // SAFETY: a live command queue of the device.
        check(unsafe { (p.cl.clFinish)(q) }, "clFinish")
    }

    unsafe fn sync_stream_from_to(&self, dev: DLDevice, src: Stream, dst: Stream) -> Result<()> {
        let p = platforms_for(dev)?;
        let d = p.device(dev.device_id)?;
        let q = |s: Stream| {
            if s.is_null() {
                d.queue
            } else {
                s as cl_command_queue
            }
        };
        let (qs, qd) = (q(src), q(dst));
        if qs == qd {
            return Ok(());
        }
        let mut ev: cl_event = std::ptr::null_mut();
        check(
            // SAFETY: a live queue, no wait list, an event out pointer.
            unsafe { (p.cl.clEnqueueMarkerWithWaitList)(qs, 0, std::ptr::null(), &mut ev) },
            "clEnqueueMarkerWithWaitList",
        )?;
        let r = check(
            // SAFETY: a live queue and one event (the marker just queued).
            unsafe { (p.cl.clEnqueueBarrierWithWaitList)(qd, 1, &ev, std::ptr::null_mut()) },
            "clEnqueueBarrierWithWaitList",
        );
        // SAFETY: an event the driver returned, released once.
        check(unsafe { (p.cl.clReleaseEvent)(ev) }, "clReleaseEvent")?;
        r
    }

    unsafe fn copy_tensor_by_shape(
        &self,
        from: &DLTensor,
        to: &DLTensor,
        stream: Stream,
    ) -> Option<Result<()>> {
        // SAFETY: forwarded contract.
        unsafe { copy_tensor_images(from, to, stream) }
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        self.pools.alloc(dev.device_id, nbytes, |need| {
            self.alloc_data_space(dev, need, 0, type_hint)
        })
    }

    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        self.pools.free(dev.device_id, dev, ptr)
    }
}

/// Registers `device_api.opencl.alloc_nd` and `device_api.opencl.free_nd` (the texture
/// allocation entries compiled host code calls).
pub(crate) fn register(b: &mut Registrar) {
    // (device_type, device_id, dtype code, dtype bits, scope, ndim, shape*): a 2-D image of
    // shape[1] rows of shape[0] pixels.
    b.add("device_api.opencl.alloc_nd", |a, rv| {
        a.expect_len(7, "device_api.opencl.alloc_nd")?;
        let dev = DLDevice::new(a.i64(0)? as i32, a.i64(1)? as i32);
        let dtype = DLDataType::new(a.i64(2)? as u8, a.i64(3)? as u8, 1);
        let scope = a.str(4)?;
        let ndim = a.i64(5)?;
        let shape = a.handle(6)? as *const i64;
        if dev.device_type != DL_OPENCL {
            return Err(Error::value(
                "device_api.opencl.alloc_nd: not an OpenCL device",
            ));
        }
        if !scope.contains("texture") || ndim != 2 || shape.is_null() {
            return Err(Error::value_fmt(format_args!(
                "device_api.opencl.alloc_nd: expects a texture scope and a 2-D shape (got \
                 scope '{scope}', ndim {ndim})"
            )));
        }
        // SAFETY: the caller passes a pointer to `ndim` (2) int64 extents.
        let (w, h) = unsafe { (*shape, *shape.add(1)) };
        if w < 0 || h < 0 {
            return Err(Error::value("device_api.opencl.alloc_nd: negative extent"));
        }
        let p = super::shared_api().alloc_image(dev, w as usize, h as usize, dtype, scope)?;
        // SAFETY: a live image descriptor of this backend, freed through free_nd.
        *rv = RetValue::Handle(unsafe { RawHandle::new(p) });
        Ok(())
    });
    b.add("device_api.opencl.free_nd", |a, rv| {
        a.expect_len(4, "device_api.opencl.free_nd")?;
        let dev = DLDevice::new(a.i64(0)? as i32, a.i64(1)? as i32);
        let p = a.handle(3)?;
        // SAFETY: compiled host code passes the pointer alloc_nd returned, once.
        unsafe { super::shared_api().free_data_space(dev, p) }?;
        *rv = RetValue::Int(0);
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texture_extents_follow_the_scope() {
        // nhwc [1, 256, 7, 7, 4]: height = 1*256, width = 7*7.
        assert_eq!(
            texture_extent(&[1, 256, 7, 7, 4], "global.texture-nhwc").unwrap(),
            (49, 256)
        );
        assert_eq!(
            texture_extent(&[1, 8, 5, 6, 4], "global.texture").unwrap(),
            (6, 40)
        );
        assert_eq!(
            texture_extent(&[16, 3, 3, 4], "global.texture-weight").unwrap(),
            (9, 16)
        );
        assert_eq!(
            texture_extent(&[5, 6, 4], "global.texture-nhwc").unwrap(),
            (6, 5)
        );
        assert!(texture_extent(&[5, 4], "global.texture").is_err());
        assert!(texture_extent(&[5, 6, 3], "global.texture").is_err());
    }

    #[test]
    fn channel_types() {
        assert_eq!(
            channel_type(DLDataType::new(2, 32, 1)).unwrap(),
            ffi::CL_FLOAT
        );
        assert!(channel_type(DLDataType::new(2, 64, 1)).is_err());
    }

    #[test]
    fn foreign_pointers_are_refused() {
        let x = [0u64; 2];
        // SAFETY: a readable 16-byte block (the two words checked) that is not a ClBuffer.
        let e = unsafe { buffer_of(x.as_ptr() as *const c_void) }
            .err()
            .unwrap();
        assert!(e.message.contains("not an OpenCL buffer"), "{}", e.message);
        // SAFETY: NULL is checked first.
        assert!(unsafe { buffer_of(std::ptr::null()) }.is_err());
    }
}
