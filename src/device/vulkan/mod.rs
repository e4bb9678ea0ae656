//! The Vulkan backend (`kDLVulkan`, 7), written with `ash` over a loader found at run time.
//!
//! - [`instance`]: the instance, one TVM device id per physical device (its properties,
//!   memory, stream and transfers in sub-modules);
//! - [`module`]: TVM's `vulkan` modules (SPIR-V shaders and function information), their
//!   loaders and kernel launch;
//! - this file: the device API (attributes, device-local buffers, copies through staging,
//!   the single stream per device) and the target description.
//!
//! Nothing is loaded until a Vulkan device is used; without a loader or driver the runtime
//! still works, `kExist` answers 0 and Vulkan calls fail with the reason.

pub mod instance;
pub mod module;

use super::{DeviceApi, DeviceAttr, Stream};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice, DL_CPU, DL_VULKAN};
use crate::packed_func::value::{RawHandle, RetValue};
use ash::vk;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;

/// A device-local buffer; device pointers of this backend point at one of these (what TVM's
/// compiled host code passes to kernels, as the reference's `VulkanBuffer*`).
pub struct DeviceBuffer {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Its memory (a piece of a larger block).
    allocation: Option<instance::Allocation>,
    /// Its size in bytes.
    pub size: u64,
    /// The TVM device id it lives on.
    pub device_id: i32,
    magic: u64,
}

/// Marks live [`DeviceBuffer`]s, to refuse pointers of other origins with a message.
const BUFFER_MAGIC: u64 = 0x766b_6275_6666_6572;

thread_local! {
    static ACTIVE: Cell<i32> = const { Cell::new(0) };
}

/// The device id `set_device` made current on this thread (kernels launch there).
pub fn active_device() -> i32 {
    ACTIVE.with(|a| a.get())
}

/// The Vulkan device API (a unit: the state lives in [`instance::context`]).
pub struct VulkanDeviceApi;

/// Adds the backend to a backend table (called when the device registry is created).
pub(crate) fn install(map: &mut super::Backends) {
    map.insert(DL_VULKAN, Arc::new(VulkanDeviceApi));
}

/// Registers the module loaders and Vulkan globals.
pub fn register(b: &mut crate::packed_func::registry::Registrar) {
    module::register(b);
    b.add("device_api.vulkan", |_a, rv| {
        static API: VulkanDeviceApi = VulkanDeviceApi;
        // SAFETY: a static, alive for the whole process.
        *rv = RetValue::Handle(unsafe {
            RawHandle::new(&API as *const VulkanDeviceApi as *mut c_void)
        });
        Ok(())
    });
    b.add("device_api.vulkan.get_target_property", |a, rv| {
        if a.len() != 2 {
            return Err(Error::value(
                "device_api.vulkan.get_target_property expects (device, property)",
            ));
        }
        let dev = a.device(0)?;
        *rv = target_property(dev.device_id, a.str(1)?)?;
        Ok(())
    });
}

/// The buffer behind a device pointer of this backend.
///
/// # Safety
/// `p` must come from this backend's allocation and still be live.
pub(crate) unsafe fn buffer_of<'a>(p: *const c_void) -> Result<&'a DeviceBuffer> {
    if p.is_null() {
        return Err(Error::value("Vulkan: NULL device pointer"));
    }
    // SAFETY: caller contract.
    let b = unsafe { &*(p as *const DeviceBuffer) };
    if b.magic != BUFFER_MAGIC {
        return Err(Error::value(
            "Vulkan: the pointer is not a Vulkan buffer of this runtime (freed, or from another device)",
        ));
    }
    Ok(b)
}

fn check_range(b: &DeviceBuffer, offset: u64, n: usize, what: &str) -> Result<()> {
    if offset.checked_add(n as u64).is_none_or(|e| e > b.size) {
        return Err(Error::value_fmt(format_args!(
            "Vulkan copy: {what} range [{offset}, +{n}) is outside the {}-byte buffer",
            b.size
        )));
    }
    Ok(())
}

// Device pointers are this backend's own `DeviceBuffer`s (the trait's contract); they are
// checked before use.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl DeviceApi for VulkanDeviceApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        ACTIVE.with(|a| a.set(dev.device_id));
        Ok(())
    }

    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<RetValue> {
        if kind == DeviceAttr::Exist {
            let n = instance::context().map(|c| c.devices.len()).unwrap_or(0);
            return Ok(RetValue::Int(
                (dev.device_id >= 0 && (dev.device_id as usize) < n) as i64,
            ));
        }
        let d = instance::device(dev.device_id)?;
        let p = &d.props;
        Ok(match kind {
            DeviceAttr::MaxThreadsPerBlock => RetValue::Int(p.max_num_threads as i64),
            DeviceAttr::MaxSharedMemoryPerBlock => {
                RetValue::Int(p.max_shared_memory_per_block as i64)
            }
            // As the reference: subgroups are not used as warps, so the warp size is 1.
            DeviceAttr::WarpSize => RetValue::Int(1),
            DeviceAttr::ComputeVersion => RetValue::Str(instance::version_string(p.api_version)),
            DeviceAttr::DeviceName => RetValue::Str(p.device_name.clone()),
            DeviceAttr::MaxThreadDimensions => RetValue::Str(format!(
                "[{}, {}, {}]",
                p.max_block_size[0], p.max_block_size[1], p.max_block_size[2]
            )),
            DeviceAttr::ApiVersion => RetValue::Int(vk::HEADER_VERSION as i64),
            DeviceAttr::DriverVersion => RetValue::Str(instance::version_string(p.driver_version)),
            DeviceAttr::TotalGlobalMemory => RetValue::Int(d.compute_memory_size as i64),
            _ => RetValue::Null,
        })
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        _alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        let d = instance::device(dev.device_id)?;
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let (buffer, allocation) = d.create_device_buffer(nbytes as u64, usage)?;
        Ok(Box::into_raw(Box::new(DeviceBuffer {
            buffer,
            allocation: Some(allocation),
            size: nbytes as u64,
            device_id: dev.device_id,
            magic: BUFFER_MAGIC,
        })) as *mut c_void)
    }

    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let d = instance::device(dev.device_id)?;
        // Commands that use the buffer must finish first.
        {
            let mut st = d.lock();
            d.flush(&mut st)?;
        }
        // SAFETY: the DeviceApi contract: a pointer of this backend.
        unsafe { buffer_of(ptr)? };
        // SAFETY: the pointer came from `alloc_data_space` (checked above) and is freed once.
        let mut b = unsafe { Box::from_raw(ptr as *mut DeviceBuffer) };
        b.magic = 0;
        if let Some(a) = b.allocation.take() {
            d.free_device_buffer(b.buffer, a);
        }
        Ok(())
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
        _stream: Stream,
    ) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        let vf = dev_from.device_type == DL_VULKAN;
        let vt = dev_to.device_type == DL_VULKAN;
        match (vf, vt) {
            (true, true) if dev_from.device_id == dev_to.device_id => {
                // SAFETY: the DeviceApi contract: pointers of this backend.
                let (src, dst) = unsafe { (buffer_of(from)?, buffer_of(to)?) };
                check_range(src, from_offset, nbytes, "source")?;
                check_range(dst, to_offset, nbytes, "destination")?;
                let d = instance::device(dev_from.device_id)?;
                let mut st = d.lock();
                let cmd = d.begin(&mut st)?;
                d.barrier(cmd);
                let region = [vk::BufferCopy {
                    src_offset: from_offset,
                    dst_offset: to_offset,
                    size: nbytes as u64,
                }];
                // SAFETY: both buffers live on this device and the ranges were checked.
                unsafe {
                    d.device
                        .cmd_copy_buffer(cmd, src.buffer, dst.buffer, &region)
                };
                d.barrier(cmd);
                st.pending += 1;
                Ok(())
            }
            (true, true) => {
                // Between two Vulkan devices: through host memory.
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
                        _stream,
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
                        _stream,
                    )
                }
            }
            (true, false) => {
                // SAFETY: the DeviceApi contract.
                let src = unsafe { buffer_of(from)? };
                check_range(src, from_offset, nbytes, "source")?;
                let d = instance::device(dev_from.device_id)?;
                let mut st = d.lock();
                if nbytes as u64 > 2 * instance::XFER_CHUNK {
                    d.flush(&mut st)?;
                    // SAFETY: the caller's destination range.
                    return unsafe {
                        pipelined_d2h(d, &mut st, src, from_offset, to, to_offset, nbytes)
                    };
                }
                let mut done = 0usize;
                while done < nbytes {
                    let n = (nbytes - done).min(STAGING_CHUNK);
                    let (sbuf, smem, sptr) = {
                        let s = d.staging(&mut st, n as u64)?;
                        (s.buffer, s.memory, s.ptr)
                    };
                    let cmd = d.begin(&mut st)?;
                    d.barrier(cmd);
                    let region = [vk::BufferCopy {
                        src_offset: from_offset + done as u64,
                        dst_offset: 0,
                        size: n as u64,
                    }];
                    // SAFETY: checked ranges on buffers of this device.
                    unsafe { d.device.cmd_copy_buffer(cmd, src.buffer, sbuf, &region) };
                    d.barrier(cmd);
                    d.flush(&mut st)?;
                    d.invalidate_host(smem)?;
                    // SAFETY: the staging buffer holds `n` bytes now; the destination range is
                    // the caller's contract.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            sptr,
                            (to as *mut u8).add(to_offset as usize + done),
                            n,
                        )
                    };
                    done += n;
                }
                Ok(())
            }
            (false, true) => {
                // SAFETY: the DeviceApi contract.
                let dst = unsafe { buffer_of(to)? };
                check_range(dst, to_offset, nbytes, "destination")?;
                let d = instance::device(dev_to.device_id)?;
                let mut st = d.lock();
                if nbytes as u64 > 2 * instance::XFER_CHUNK {
                    d.flush(&mut st)?;
                    // SAFETY: the caller's source range.
                    return unsafe {
                        pipelined_h2d(d, &mut st, from, from_offset, dst, to_offset, nbytes)
                    };
                }
                let mut done = 0usize;
                while done < nbytes {
                    let n = (nbytes - done).min(STAGING_CHUNK);
                    let (sbuf, smem, sptr) = {
                        let s = d.staging(&mut st, n as u64)?;
                        (s.buffer, s.memory, s.ptr)
                    };
                    // SAFETY: the source range is the caller's contract; the staging buffer
                    // holds at least `n` bytes and no pending command uses it (each round
                    // is submitted and waited for below).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (from as *const u8).add(from_offset as usize + done),
                            sptr,
                            n,
                        )
                    };
                    d.flush_host(smem)?;
                    let cmd = d.begin(&mut st)?;
                    d.barrier(cmd);
                    let region = [vk::BufferCopy {
                        src_offset: 0,
                        dst_offset: to_offset + done as u64,
                        size: n as u64,
                    }];
                    // SAFETY: checked ranges on buffers of this device.
                    unsafe { d.device.cmd_copy_buffer(cmd, sbuf, dst.buffer, &region) };
                    d.barrier(cmd);
                    d.flush(&mut st)?;
                    done += n;
                }
                Ok(())
            }
            (false, false) => Err(Error::value("Vulkan copy: neither side is a Vulkan device")),
        }
    }

    unsafe fn stream_sync(&self, dev: DLDevice, _stream: Stream) -> Result<()> {
        let d = instance::device(dev.device_id)?;
        let mut st = d.lock();
        d.flush(&mut st)
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        // Reuse a cached buffer that fits (the smallest, and not more than twice the size).
        {
            let mut pool = WORKSPACES.lock().unwrap_or_else(|e| e.into_inner());
            let free = pool.entry(dev.device_id).or_default();
            let best = free
                .iter()
                .enumerate()
                .filter(|(_, &(size, _))| {
                    size >= nbytes as u64 && size <= 2 * nbytes.max(1024) as u64
                })
                .min_by_key(|(_, &(size, _))| size)
                .map(|(i, _)| i);
            if let Some(i) = best {
                return Ok(free.swap_remove(i).1 as *mut c_void);
            }
        }
        let rounded = nbytes.div_ceil(4096).max(1) * 4096;
        self.alloc_data_space(
            dev,
            rounded,
            crate::packed_func::tensor::ALLOC_ALIGNMENT,
            type_hint,
        )
    }

    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        // Kept for reuse: commands recorded later are ordered after the ones using it.
        // SAFETY: the DeviceApi contract: a pointer of this backend.
        let b = unsafe { buffer_of(ptr)? };
        WORKSPACES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(dev.device_id)
            .or_default()
            .push((b.size, ptr as usize));
        Ok(())
    }
}

/// Free workspace buffers per device: (size, pointer).
type WorkspaceLists = std::collections::HashMap<i32, Vec<(u64, usize)>>;

/// Workspace buffers freed for reuse.
static WORKSPACES: std::sync::LazyLock<std::sync::Mutex<WorkspaceLists>> =
    std::sync::LazyLock::new(Default::default);

/// Host → device in pieces: the host fills one staging half while the device copies the other.
///
/// # Safety
/// `from + from_offset` must address `nbytes` readable bytes; the destination range was checked.
unsafe fn pipelined_h2d(
    d: &instance::Device,
    st: &mut instance::StreamState,
    from: *const c_void,
    from_offset: u64,
    dst: &DeviceBuffer,
    to_offset: u64,
    nbytes: usize,
) -> Result<()> {
    let slots = d.xfer_slots(st)?;
    let chunk = instance::XFER_CHUNK as usize;
    let mut done = 0usize;
    let mut k = 0usize;
    let r = (|| {
        while done < nbytes {
            let n = (nbytes - done).min(chunk);
            let slot = &mut slots[k % 2];
            d.xfer_wait(slot)?;
            // SAFETY: the caller's source range; the idle staging half holds `chunk` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (from as *const u8).add(from_offset as usize + done),
                    slot.staging.ptr,
                    n,
                )
            };
            d.flush_host(slot.staging.memory)?;
            let region = vk::BufferCopy {
                src_offset: 0,
                dst_offset: to_offset + done as u64,
                size: n as u64,
            };
            let sbuf = slot.staging.buffer;
            d.xfer_submit(slot, sbuf, dst.buffer, region)?;
            done += n;
            k += 1;
        }
        Ok(())
    })();
    for slot in slots.iter_mut() {
        d.xfer_wait(slot)?;
    }
    r
}

/// Device → host in pieces: the device copies the next piece while the host drains one.
///
/// # Safety
/// `to + to_offset` must address `nbytes` writable bytes; the source range was checked.
unsafe fn pipelined_d2h(
    d: &instance::Device,
    st: &mut instance::StreamState,
    src: &DeviceBuffer,
    from_offset: u64,
    to: *mut c_void,
    to_offset: u64,
    nbytes: usize,
) -> Result<()> {
    let slots = d.xfer_slots(st)?;
    let chunk = instance::XFER_CHUNK as usize;
    let pieces: Vec<(usize, usize)> = (0..nbytes)
        .step_by(chunk)
        .map(|o| (o, (nbytes - o).min(chunk)))
        .collect();
    let submit = |slots: &mut [instance::XferSlot; 2], k: usize| -> Result<()> {
        let (o, n) = pieces[k];
        let slot = &mut slots[k % 2];
        d.xfer_wait(slot)?;
        let region = vk::BufferCopy {
            src_offset: from_offset + o as u64,
            dst_offset: 0,
            size: n as u64,
        };
        let sbuf = slot.staging.buffer;
        d.xfer_submit(slot, src.buffer, sbuf, region)
    };
    let r = (|| {
        submit(slots, 0)?;
        for k in 0..pieces.len() {
            if k + 1 < pieces.len() {
                submit(slots, k + 1)?;
            }
            let (o, n) = pieces[k];
            let slot = &mut slots[k % 2];
            d.xfer_wait(slot)?;
            d.invalidate_host(slot.staging.memory)?;
            // SAFETY: the staging half holds the piece; the caller's destination range.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    slot.staging.ptr,
                    (to as *mut u8).add(to_offset as usize + o),
                    n,
                )
            };
        }
        Ok(())
    })();
    for slot in slots.iter_mut() {
        d.xfer_wait(slot)?;
    }
    r
}

/// The largest piece a host copy moves at once (bounds the staging buffer).
const STAGING_CHUNK: usize = 64 << 20;

/// One property of a device's TVM target (`device_api.vulkan.get_target_property`).
pub fn target_property(device_id: i32, name: &str) -> Result<RetValue> {
    let d = instance::device(device_id)?;
    let p = &d.props;
    let b = |v: bool| RetValue::Bool(v);
    let i = |v: u32| RetValue::Int(v as i64);
    Ok(match name {
        "supports_float16" => b(p.supports_float16),
        "supports_float32" | "supports_int32" => b(true),
        "supports_float64" => b(p.supports_float64),
        "supports_int8" => b(p.supports_int8),
        "supports_int16" => b(p.supports_int16),
        "supports_int64" => b(p.supports_int64),
        "supports_8bit_buffer" => b(p.supports_8bit_buffer),
        "supports_16bit_buffer" => b(p.supports_16bit_buffer),
        "supports_storage_buffer_storage_class" => b(p.supports_storage_buffer_storage_class),
        "supports_push_descriptor" => b(p.supports_push_descriptor),
        "supports_dedicated_allocation" => b(p.supports_dedicated_allocation),
        "supports_integer_dot_product" => b(p.supports_integer_dot_product),
        "supported_subgroup_operations" => i(p.subgroup_operations),
        "max_num_threads" => i(p.max_num_threads),
        "thread_warp_size" => i(1),
        "max_block_size_x" => i(p.max_block_size[0]),
        "max_block_size_y" => i(p.max_block_size[1]),
        "max_block_size_z" => i(p.max_block_size[2]),
        "max_push_constants_size" => i(p.max_push_constants_size),
        "max_uniform_buffer_range" => i(p.max_uniform_buffer_range),
        "max_storage_buffer_range" => i(p.max_storage_buffer_range),
        "max_per_stage_descriptor_storage_buffer" => i(p.max_per_stage_descriptor_storage_buffer),
        "max_shared_memory_per_block" => i(p.max_shared_memory_per_block),
        "device_type" => RetValue::Str(p.device_type.clone()),
        "device_name" => RetValue::Str(p.device_name.clone()),
        "driver_name" => RetValue::Str(p.driver_name.clone()),
        "driver_version" => i(p.driver_version),
        "vulkan_api_version" => i(p.api_version),
        "max_spirv_version" => i(p.max_spirv_version),
        _ => RetValue::Null,
    })
}

/// The TVM target of a device as a JSON object string (what `tvm.target.Target` accepts).
pub fn target_json(device_id: i32) -> Result<String> {
    let d = instance::device(device_id)?;
    let p = &d.props;
    use crate::packed_func::json::{object, Value};
    let v = object(vec![
        ("kind", Value::from("vulkan")),
        ("max_num_threads", Value::from(p.max_num_threads)),
        ("thread_warp_size", Value::from(1u64)),
        ("max_block_size_x", Value::from(p.max_block_size[0])),
        ("max_block_size_y", Value::from(p.max_block_size[1])),
        ("max_block_size_z", Value::from(p.max_block_size[2])),
        (
            "max_push_constants_size",
            Value::from(p.max_push_constants_size),
        ),
        (
            "max_uniform_buffer_range",
            Value::from(p.max_uniform_buffer_range),
        ),
        (
            "max_storage_buffer_range",
            Value::from(p.max_storage_buffer_range),
        ),
        (
            "max_per_stage_descriptor_storage_buffer",
            Value::from(p.max_per_stage_descriptor_storage_buffer),
        ),
        (
            "max_shared_memory_per_block",
            Value::from(p.max_shared_memory_per_block),
        ),
        ("supports_float16", Value::from(p.supports_float16)),
        ("supports_float32", Value::from(true)),
        ("supports_float64", Value::from(p.supports_float64)),
        ("supports_int8", Value::from(p.supports_int8)),
        ("supports_int16", Value::from(p.supports_int16)),
        ("supports_int32", Value::from(true)),
        ("supports_int64", Value::from(p.supports_int64)),
        ("supports_8bit_buffer", Value::from(p.supports_8bit_buffer)),
        (
            "supports_16bit_buffer",
            Value::from(p.supports_16bit_buffer),
        ),
        (
            "supports_storage_buffer_storage_class",
            Value::from(p.supports_storage_buffer_storage_class),
        ),
        (
            "supports_push_descriptor",
            Value::from(p.supports_push_descriptor),
        ),
        (
            "supports_dedicated_allocation",
            Value::from(p.supports_dedicated_allocation),
        ),
        (
            "supported_subgroup_operations",
            Value::from(p.subgroup_operations),
        ),
        ("device_type", Value::from(p.device_type.as_str())),
        ("device_name", Value::from(p.device_name.as_str())),
        ("driver_name", Value::from(p.driver_name.as_str())),
        ("driver_version", Value::from(p.driver_version)),
        ("vulkan_api_version", Value::from(p.api_version)),
        ("max_spirv_version", Value::from(p.max_spirv_version)),
    ]);
    Ok(v.to_string())
}

/// The number of Vulkan devices (0 without a loader or driver; never an error).
pub fn device_count() -> usize {
    instance::context().map(|c| c.devices.len()).unwrap_or(0)
}
