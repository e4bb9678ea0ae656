//! The Vulkan instance, its physical devices (one TVM device id each) and their logical
//! devices. `properties` holds what a device reports, `memory` its buffers and mapped
//! memory, `stream` its single command stream and the pipelined transfers.
//!
//! Everything here is created on first use: a process that never touches a Vulkan device never
//! loads `libvulkan`. Without a loader or a driver the context records why, and every Vulkan
//! call fails with that reason.

mod blocks;
mod fns;
mod memory;
mod properties;
mod stream;

pub(crate) use blocks::Allocation;
pub(crate) use memory::HostBuffer;
pub use properties::Properties;
pub(crate) use stream::{
    StreamState, XferSlot, SETS_PER_SUBMISSION, STORAGE_PER_SUBMISSION, XFER_CHUNK,
};

use crate::packed_func::error::{Error, Result};
use ash::vk;
use std::ffi::CStr;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// A logical device over one physical device.
pub struct Device {
    /// The physical device.
    pub physical: vk::PhysicalDevice,
    /// The logical device.
    pub device: ash::Device,
    /// The compute queue.
    pub queue: vk::Queue,
    /// Its family.
    pub queue_family: u32,
    /// Properties for attributes and targets.
    pub props: Properties,
    /// Memory type for device-local buffers.
    pub compute_mtype: u32,
    /// Size of the heap behind it (TVM's total memory answer).
    pub compute_memory_size: u64,
    /// Memory type for staging buffers.
    pub staging_mtype: u32,
    /// Whether staging memory is coherent.
    pub staging_coherent: bool,
    pub(crate) stream: Mutex<StreamState>,
    /// Sub-allocates device-local memory for data space and workspace.
    pub(crate) allocator: Mutex<blocks::Blocks>,
}

/// The process-wide Vulkan context.
pub struct Context {
    /// The loader entry points.
    pub entry: ash::Entry,
    /// The instance.
    pub instance: ash::Instance,
    /// One logical device per physical device, in enumeration order.
    pub devices: Vec<Device>,
}

static CONTEXT: OnceLock<std::result::Result<Context, String>> = OnceLock::new();

/// The context, created on first call; the reason Vulkan is unavailable otherwise.
pub fn context() -> Result<&'static Context> {
    CONTEXT
        .get_or_init(Context::create)
        .as_ref()
        .map_err(|e| Error::internal_fmt(format_args!("Vulkan is not available: {e}")))
}

/// Whether the context was already created (without creating it).
pub fn initialised() -> bool {
    matches!(CONTEXT.get(), Some(Ok(_)))
}

/// The device for a TVM device id.
pub fn device(id: i32) -> Result<&'static Device> {
    let ctx = context()?;
    usize::try_from(id)
        .ok()
        .and_then(|i| ctx.devices.get(i))
        .ok_or_else(|| {
            Error::value_fmt(format_args!(
                "vulkan({id}) does not exist: {} Vulkan device(s) found",
                ctx.devices.len()
            ))
        })
}

pub(crate) fn vk_err(what: &str, r: vk::Result) -> Error {
    Error::value_fmt(format_args!("Vulkan: {what} failed: {r}"))
}

/// Formats a packed Vulkan version as `major.minor.patch`.
pub fn version_string(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

impl Context {
    fn create() -> std::result::Result<Context, String> {
        // SAFETY: loading the system Vulkan loader runs its initialisers, which is what
        // every Vulkan application does.
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| format!("cannot load the Vulkan loader (libvulkan): {e}"))?;
        // SAFETY: a valid entry; the call has no preconditions.
        let inst_version = match unsafe { entry.try_enumerate_instance_version() } {
            Ok(Some(v)) => v,
            _ => vk::API_VERSION_1_0,
        };
        let api = if inst_version >= vk::API_VERSION_1_2 {
            vk::API_VERSION_1_2
        } else if inst_version >= vk::API_VERSION_1_1 {
            vk::API_VERSION_1_1
        } else {
            vk::API_VERSION_1_0
        };
        let app = vk::ApplicationInfo::default()
            .application_name(c"tvm-runtime-rs")
            .engine_name(c"tvm")
            .api_version(api);
        let ci = vk::InstanceCreateInfo::default().application_info(&app);
        let mut handle = vk::Instance::null();
        // SAFETY: valid create info that lives through the call, and a place for the handle.
        unsafe { (entry.fp_v1_0().create_instance)(&ci, std::ptr::null(), &mut handle) }
            .result()
            .map_err(|e| format!("vkCreateInstance failed: {e} (no Vulkan driver installed?)"))?;
        // SAFETY: the instance was just created through `entry`.
        let instance = unsafe { fns::instance(&entry, handle) };
        // SAFETY: a live instance.
        let physicals = match unsafe { instance.enumerate_physical_devices() } {
            Ok(p) => p,
            Err(vk::Result::ERROR_INITIALIZATION_FAILED) => Vec::new(),
            Err(e) => return Err(format!("vkEnumeratePhysicalDevices failed: {e}")),
        };
        let mut devices = Vec::new();
        for pd in physicals {
            match Device::create(&instance, pd, api) {
                Ok(Some(d)) => devices.push(d),
                Ok(None) => {}
                Err(e) => eprintln!("tvm-runtime: skipping a Vulkan device: {e}"),
            }
        }
        Ok(Context {
            entry,
            instance,
            devices,
        })
    }
}

fn has_ext(exts: &[vk::ExtensionProperties], name: &CStr) -> bool {
    exts.iter()
        .any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
}

impl Device {
    fn create(
        instance: &ash::Instance,
        pd: vk::PhysicalDevice,
        instance_api: u32,
    ) -> std::result::Result<Option<Device>, String> {
        // SAFETY: `pd` came from this instance; the queries have no other preconditions.
        let (base, queues, mem, exts, feats) = unsafe {
            (
                instance.get_physical_device_properties(pd),
                instance.get_physical_device_queue_family_properties(pd),
                instance.get_physical_device_memory_properties(pd),
                instance
                    .enumerate_device_extension_properties(pd)
                    .unwrap_or_default(),
                instance.get_physical_device_features(pd),
            )
        };
        let Some(family) = queues
            .iter()
            .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
        else {
            return Ok(None);
        };
        let api = base.api_version.min(instance_api);
        let l = &base.limits;
        let mut p = Properties {
            device_name: base
                .device_name_as_c_str()
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default(),
            device_type: match base.device_type {
                vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
                vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
                vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
                vk::PhysicalDeviceType::CPU => "cpu",
                _ => "other",
            }
            .into(),
            api_version: base.api_version,
            driver_version: base.driver_version,
            max_num_threads: l.max_compute_work_group_invocations,
            subgroup_size: 1,
            max_block_size: l.max_compute_work_group_size,
            max_grid_size: l.max_compute_work_group_count,
            max_push_constants_size: l.max_push_constants_size,
            max_uniform_buffer_range: l.max_uniform_buffer_range,
            max_storage_buffer_range: l.max_storage_buffer_range,
            max_per_stage_descriptor_storage_buffer: l.max_per_stage_descriptor_storage_buffers,
            max_shared_memory_per_block: l.max_compute_shared_memory_size,
            min_uniform_buffer_offset_alignment: l.min_uniform_buffer_offset_alignment.max(1),
            supports_float64: feats.shader_float64 != 0,
            supports_int16: feats.shader_int16 != 0,
            supports_int64: feats.shader_int64 != 0,
            supports_storage_buffer_storage_class: api >= vk::API_VERSION_1_1
                || has_ext(&exts, c"VK_KHR_storage_buffer_storage_class"),
            supports_push_descriptor: has_ext(&exts, c"VK_KHR_push_descriptor"),
            supports_dedicated_allocation: api >= vk::API_VERSION_1_1
                || has_ext(&exts, c"VK_KHR_dedicated_allocation"),
            supports_integer_dot_product: has_ext(&exts, c"VK_KHR_shader_integer_dot_product"),
            max_spirv_version: if api >= vk::API_VERSION_1_2 {
                0x10500
            } else if api >= vk::API_VERSION_1_1 {
                0x10300
            } else {
                0x10000
            },
            ..Default::default()
        };
        let mut f16i8 = vk::PhysicalDeviceShaderFloat16Int8Features::default();
        let mut s8 = vk::PhysicalDevice8BitStorageFeatures::default();
        let mut s16 = vk::PhysicalDevice16BitStorageFeatures::default();
        if api >= vk::API_VERSION_1_1 {
            let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
            let mut driver = vk::PhysicalDeviceDriverProperties::default();
            let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
            if api >= vk::API_VERSION_1_2 {
                props2 = props2.push_next(&mut driver);
            }
            // SAFETY: a chain of valid output structures for a 1.1+ device and instance.
            unsafe { instance.get_physical_device_properties2(pd, &mut props2) };
            p.subgroup_size = subgroup.subgroup_size.max(1);
            if subgroup
                .supported_stages
                .contains(vk::ShaderStageFlags::COMPUTE)
            {
                p.subgroup_operations = subgroup.supported_operations.as_raw();
            }
            if api >= vk::API_VERSION_1_2 {
                p.driver_name = driver
                    .driver_name_as_c_str()
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default();
            }
            let mut feats2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut s16);
            if api >= vk::API_VERSION_1_2 {
                feats2 = feats2.push_next(&mut f16i8).push_next(&mut s8);
            }
            // SAFETY: as above.
            unsafe { instance.get_physical_device_features2(pd, &mut feats2) };
            p.supports_float16 = f16i8.shader_float16 != 0;
            p.supports_int8 = f16i8.shader_int8 != 0;
            p.supports_8bit_buffer = s8.storage_buffer8_bit_access != 0;
            p.supports_16bit_buffer = s16.storage_buffer16_bit_access != 0;
        }

        // Memory types: the staging type is host visible (cached preferred), the compute type
        // device local (not host visible preferred), as the reference picks them.
        let usable =
            |k: usize| mem.memory_heaps[mem.memory_types[k].heap_index as usize].size >= 1024;
        let mut staging = None;
        let mut compute = None;
        for k in 0..mem.memory_type_count as usize {
            let flags = mem.memory_types[k].property_flags;
            if !usable(k) {
                continue;
            }
            if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
                let rank = flags.contains(vk::MemoryPropertyFlags::HOST_CACHED) as i32;
                if staging.is_none_or(|(_, r)| rank > r) {
                    staging = Some((k as u32, rank));
                }
            }
            if flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL) {
                let rank = !flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE) as i32;
                if compute.is_none_or(|(_, r)| rank > r) {
                    compute = Some((k as u32, rank));
                }
            }
        }
        let (staging_mtype, _) = staging.ok_or("no host-visible memory type")?;
        let (compute_mtype, _) = compute.ok_or("no device-local memory type")?;
        let compute_memory_size =
            mem.memory_heaps[mem.memory_types[compute_mtype as usize].heap_index as usize].size;
        let staging_coherent = mem.memory_types[staging_mtype as usize]
            .property_flags
            .contains(vk::MemoryPropertyFlags::HOST_COHERENT);

        let prio = [1.0f32];
        let qci = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family as u32)
            .queue_priorities(&prio)];
        let enable = vk::PhysicalDeviceFeatures::default()
            .shader_int64(feats.shader_int64 != 0)
            .shader_float64(feats.shader_float64 != 0)
            .shader_int16(feats.shader_int16 != 0);
        let mut en_f16i8 = vk::PhysicalDeviceShaderFloat16Int8Features::default()
            .shader_float16(p.supports_float16)
            .shader_int8(p.supports_int8);
        let mut en_s8 = vk::PhysicalDevice8BitStorageFeatures::default()
            .storage_buffer8_bit_access(p.supports_8bit_buffer);
        let mut en_s16 = vk::PhysicalDevice16BitStorageFeatures::default()
            .storage_buffer16_bit_access(p.supports_16bit_buffer);
        let mut dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qci)
            .enabled_features(&enable);
        if api >= vk::API_VERSION_1_1 {
            dci = dci.push_next(&mut en_s16);
        }
        if api >= vk::API_VERSION_1_2 {
            dci = dci.push_next(&mut en_f16i8).push_next(&mut en_s8);
        }
        let mut handle = vk::Device::null();
        // SAFETY: valid create info (features enabled only where supported) and a place for
        // the handle.
        unsafe { (instance.fp_v1_0().create_device)(pd, &dci, std::ptr::null(), &mut handle) }
            .result()
            .map_err(|e| format!("vkCreateDevice failed: {e}"))?;
        // SAFETY: the device was just created through `instance`.
        let device = unsafe { fns::device(instance, handle) };
        // SAFETY: the family and index were requested at creation.
        let queue = unsafe { device.get_device_queue(family as u32, 0) };
        let stream = StreamState::create(&device, family as u32)
            .map_err(|e| format!("cannot create the command stream: {e}"))?;
        Ok(Some(Device {
            physical: pd,
            device,
            queue,
            queue_family: family as u32,
            props: p,
            compute_mtype,
            compute_memory_size,
            staging_mtype,
            staging_coherent,
            stream: Mutex::new(stream),
            allocator: Mutex::new(blocks::Blocks::new(
                compute_mtype,
                compute_memory_size,
                mem.memory_types[compute_mtype as usize]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::HOST_VISIBLE),
            )),
        }))
    }

    /// Locks the device's stream.
    pub(crate) fn lock(&self) -> MutexGuard<'_, StreamState> {
        self.stream.lock().unwrap_or_else(|e| e.into_inner())
    }
}
