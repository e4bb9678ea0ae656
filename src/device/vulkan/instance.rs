//! The Vulkan instance, its physical devices (one TVM device id each), their logical devices,
//! memory and the single command stream of each device.
//!
//! Everything here is created on first use: a process that never touches a Vulkan device never
//! loads `libvulkan`. Without a loader or a driver the context records why, and every Vulkan
//! call fails with that reason.

use crate::packed_func::error::{Error, Result};
use ash::vk;
use std::ffi::CStr;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// What TVM reads from a device to answer attributes and to build a target.
#[derive(Clone, Debug, Default)]
pub struct Properties {
    /// The device name.
    pub device_name: String,
    /// The driver name (Vulkan 1.2 drivers; empty otherwise).
    pub driver_name: String,
    /// `VkPhysicalDeviceType` as TVM names it (`cpu`, `discrete`, ...).
    pub device_type: String,
    /// The Vulkan API version the device supports (packed).
    pub api_version: u32,
    /// The driver version (packed, vendor-specific).
    pub driver_version: u32,
    /// Max invocations per workgroup.
    pub max_num_threads: u32,
    /// The subgroup size (1 where it cannot be queried).
    pub subgroup_size: u32,
    /// Supported subgroup operations in compute shaders (bit mask).
    pub subgroup_operations: u32,
    /// Max workgroup size per dimension.
    pub max_block_size: [u32; 3],
    /// Max workgroup count per dimension.
    pub max_grid_size: [u32; 3],
    /// Max push constant bytes.
    pub max_push_constants_size: u32,
    /// Max uniform buffer range.
    pub max_uniform_buffer_range: u32,
    /// Max storage buffer range.
    pub max_storage_buffer_range: u32,
    /// Max storage buffers per shader stage.
    pub max_per_stage_descriptor_storage_buffer: u32,
    /// Shared memory per workgroup in bytes.
    pub max_shared_memory_per_block: u32,
    /// Minimum alignment of uniform buffer offsets.
    pub min_uniform_buffer_offset_alignment: u64,
    /// Shader feature support.
    pub supports_float16: bool,
    /// 64-bit floats in shaders.
    pub supports_float64: bool,
    /// 8-bit integers in shaders.
    pub supports_int8: bool,
    /// 16-bit integers in shaders.
    pub supports_int16: bool,
    /// 64-bit integers in shaders.
    pub supports_int64: bool,
    /// 8-bit storage buffer access.
    pub supports_8bit_buffer: bool,
    /// 16-bit storage buffer access.
    pub supports_16bit_buffer: bool,
    /// `VK_KHR_storage_buffer_storage_class` (core in 1.1).
    pub supports_storage_buffer_storage_class: bool,
    /// `VK_KHR_push_descriptor`.
    pub supports_push_descriptor: bool,
    /// `VK_KHR_dedicated_allocation` (core in 1.1).
    pub supports_dedicated_allocation: bool,
    /// `VK_KHR_shader_integer_dot_product`.
    pub supports_integer_dot_product: bool,
    /// Max SPIR-V version the device consumes (`0x10000` is 1.0).
    pub max_spirv_version: u32,
}

/// A host-visible buffer kept mapped (staging and uniform arenas).
pub(crate) struct HostBuffer {
    pub buffer: vk::Buffer,
    pub memory: vk::DeviceMemory,
    pub size: u64,
    pub ptr: *mut u8,
}

/// The recording state of a device's only stream: one command buffer, submitted and waited for
/// on synchronisation, and the per-submission resources (descriptor sets, uniform space).
pub(crate) struct StreamState {
    /// Owns `cmd`; lives as long as the device.
    #[allow(dead_code)]
    pub pool: vk::CommandPool,
    pub cmd: vk::CommandBuffer,
    pub fence: vk::Fence,
    pub recording: bool,
    pub desc_pool: vk::DescriptorPool,
    pub staging: Option<HostBuffer>,
    pub uniforms: Option<HostBuffer>,
    pub uniforms_used: u64,
    /// Double-buffered staging for large copies (made on first use).
    pub xfer: Option<[XferSlot; 2]>,
    /// Commands recorded since the last submission.
    pub pending: usize,
    /// Descriptor sets allocated since the last submission.
    pub sets: u32,
    /// Storage buffer descriptors allocated since the last submission.
    pub storage_descriptors: u32,
    /// The pipeline last bound in the command buffer being recorded.
    pub bound_pipeline: vk::Pipeline,
    /// The descriptor set last bound there.
    pub bound_set: vk::DescriptorSet,
    /// The last storage-only descriptor set written in this submission: its layout and
    /// buffers, so that a launch with the same ones reuses it.
    pub last_set: vk::DescriptorSet,
    /// Its layout.
    pub last_layout: vk::DescriptorSetLayout,
    /// Its buffers.
    pub last_buffers: Vec<vk::Buffer>,
}

// SAFETY: the raw mapped pointers are only used while holding the stream's mutex.
unsafe impl Send for StreamState {}

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
    pub(crate) allocator: Mutex<gpu_allocator::vulkan::Allocator>,
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
        .map_err(|e| Error::internal(format!("Vulkan is not available: {e}")))
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
            Error::value(format!(
                "vulkan({id}) does not exist: {} Vulkan device(s) found",
                ctx.devices.len()
            ))
        })
}

pub(crate) fn vk_err(what: &str, r: vk::Result) -> Error {
    Error::value(format!("Vulkan: {what} failed: {r}"))
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
        // SAFETY: valid create info that lives through the call.
        let instance = unsafe { entry.create_instance(&ci, None) }
            .map_err(|e| format!("vkCreateInstance failed: {e} (no Vulkan driver installed?)"))?;
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
        // SAFETY: valid create info (features enabled only where supported).
        let device = unsafe { instance.create_device(pd, &dci, None) }
            .map_err(|e| format!("vkCreateDevice failed: {e}"))?;
        // SAFETY: the family and index were requested at creation.
        let queue = unsafe { device.get_device_queue(family as u32, 0) };
        let stream = StreamState::create(&device, family as u32)
            .map_err(|e| format!("cannot create the command stream: {e}"))?;
        let allocator =
            gpu_allocator::vulkan::Allocator::new(&gpu_allocator::vulkan::AllocatorCreateDesc {
                instance: instance.clone(),
                device: device.clone(),
                physical_device: pd,
                debug_settings: Default::default(),
                buffer_device_address: false,
                allocation_sizes: Default::default(),
            })
            .map_err(|e| format!("cannot create the memory allocator: {e}"))?;
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
            allocator: Mutex::new(allocator),
        }))
    }

    /// Locks the device's stream.
    pub(crate) fn lock(&self) -> MutexGuard<'_, StreamState> {
        self.stream.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a buffer bound to fresh memory of type `mtype`.
    pub(crate) fn create_buffer(
        &self,
        size: u64,
        usage: vk::BufferUsageFlags,
        mtype: u32,
    ) -> Result<(vk::Buffer, vk::DeviceMemory)> {
        let d = &self.device;
        let ci = vk::BufferCreateInfo::default()
            .size(size.max(4))
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info on a live device.
        let buffer =
            unsafe { d.create_buffer(&ci, None) }.map_err(|e| vk_err("vkCreateBuffer", e))?;
        // SAFETY: a buffer of this device.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        if req.memory_type_bits & (1 << mtype) == 0 {
            // SAFETY: the buffer is unused.
            unsafe { d.destroy_buffer(buffer, None) };
            return Err(Error::value(
                "Vulkan: the buffer cannot live in the chosen memory type",
            ));
        }
        let ai = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(mtype);
        // SAFETY: valid allocation info.
        let memory = match unsafe { d.allocate_memory(&ai, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: the buffer is unused.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(vk_err(
                    &format!("allocating {size} bytes of device memory (vkAllocateMemory)"),
                    e,
                ));
            }
        };
        // SAFETY: fresh memory large enough for the buffer, offset 0.
        if let Err(e) = unsafe { d.bind_buffer_memory(buffer, memory, 0) } {
            // SAFETY: both unused.
            unsafe {
                d.destroy_buffer(buffer, None);
                d.free_memory(memory, None);
            }
            return Err(vk_err("vkBindBufferMemory", e));
        }
        Ok((buffer, memory))
    }

    /// A device-local buffer in sub-allocated memory.
    pub(crate) fn create_device_buffer(
        &self,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<(vk::Buffer, gpu_allocator::vulkan::Allocation)> {
        use gpu_allocator::vulkan::{AllocationCreateDesc, AllocationScheme};
        let d = &self.device;
        let ci = vk::BufferCreateInfo::default()
            .size(size.max(4))
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info on a live device.
        let buffer =
            unsafe { d.create_buffer(&ci, None) }.map_err(|e| vk_err("vkCreateBuffer", e))?;
        // SAFETY: a buffer of this device.
        let requirements = unsafe { d.get_buffer_memory_requirements(buffer) };
        let alloc = self
            .allocator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allocate(&AllocationCreateDesc {
                name: "tvm data space",
                requirements,
                location: gpu_allocator::MemoryLocation::GpuOnly,
                linear: true,
                allocation_scheme: AllocationScheme::GpuAllocatorManaged,
            });
        let alloc = match alloc {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the buffer is unused.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(Error::value(format!(
                    "Vulkan: cannot allocate {size} bytes of device memory: {e}"
                )));
            }
        };
        // SAFETY: memory of this device, large and aligned enough at this offset.
        if let Err(e) = unsafe { d.bind_buffer_memory(buffer, alloc.memory(), alloc.offset()) } {
            self.free_device_buffer(buffer, alloc);
            return Err(vk_err("vkBindBufferMemory", e));
        }
        Ok((buffer, alloc))
    }

    /// Destroys a device-local buffer (no pending command may use it).
    pub(crate) fn free_device_buffer(
        &self,
        buffer: vk::Buffer,
        alloc: gpu_allocator::vulkan::Allocation,
    ) {
        // SAFETY: a buffer of this device, no longer used.
        unsafe { self.device.destroy_buffer(buffer, None) };
        let _ = self
            .allocator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .free(alloc);
    }

    /// Destroys a buffer and its memory (the caller made sure no pending command uses it).
    pub(crate) fn destroy_buffer(&self, buffer: vk::Buffer, memory: vk::DeviceMemory) {
        // SAFETY: the objects belong to this device and are no longer used.
        unsafe {
            self.device.destroy_buffer(buffer, None);
            self.device.free_memory(memory, None);
        }
    }

    /// A mapped host-visible buffer of at least `size` bytes.
    pub(crate) fn create_host_buffer(
        &self,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<HostBuffer> {
        let (buffer, memory) = self.create_buffer(size, usage, self.staging_mtype)?;
        // SAFETY: host-visible memory, mapped whole once.
        let ptr = match unsafe {
            self.device
                .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        } {
            Ok(p) => p as *mut u8,
            Err(e) => {
                self.destroy_buffer(buffer, memory);
                return Err(vk_err("vkMapMemory", e));
            }
        };
        Ok(HostBuffer {
            buffer,
            memory,
            size,
            ptr,
        })
    }

    fn destroy_host_buffer(&self, b: HostBuffer) {
        // SAFETY: mapped memory of this device, unused by now.
        unsafe { self.device.unmap_memory(b.memory) };
        self.destroy_buffer(b.buffer, b.memory);
    }

    /// Makes host writes to staging memory visible to the device.
    pub(crate) fn flush_host(&self, memory: vk::DeviceMemory) -> Result<()> {
        if self.staging_coherent {
            return Ok(());
        }
        // SAFETY: mapped memory of this device.
        unsafe { self.device.flush_mapped_memory_ranges(&whole(memory)) }
            .map_err(|e| vk_err("vkFlushMappedMemoryRanges", e))
    }

    /// Makes device writes to staging memory visible to the host.
    pub(crate) fn invalidate_host(&self, memory: vk::DeviceMemory) -> Result<()> {
        if self.staging_coherent {
            return Ok(());
        }
        // SAFETY: mapped memory of this device.
        unsafe { self.device.invalidate_mapped_memory_ranges(&whole(memory)) }
            .map_err(|e| vk_err("vkInvalidateMappedMemoryRanges", e))
    }

    /// Starts recording if needed; returns the command buffer.
    pub(crate) fn begin(&self, st: &mut StreamState) -> Result<vk::CommandBuffer> {
        if !st.recording {
            let bi = vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: the command buffer is not pending (every submission is waited for).
            unsafe { self.device.begin_command_buffer(st.cmd, &bi) }
                .map_err(|e| vk_err("vkBeginCommandBuffer", e))?;
            st.recording = true;
        }
        Ok(st.cmd)
    }

    /// Records a full memory barrier between transfers and compute.
    pub(crate) fn barrier(&self, cmd: vk::CommandBuffer) {
        let all = vk::AccessFlags::TRANSFER_READ
            | vk::AccessFlags::TRANSFER_WRITE
            | vk::AccessFlags::SHADER_READ
            | vk::AccessFlags::SHADER_WRITE
            | vk::AccessFlags::HOST_READ
            | vk::AccessFlags::HOST_WRITE;
        let stages = vk::PipelineStageFlags::TRANSFER
            | vk::PipelineStageFlags::COMPUTE_SHADER
            | vk::PipelineStageFlags::HOST;
        let b = [vk::MemoryBarrier::default()
            .src_access_mask(all)
            .dst_access_mask(all)];
        // SAFETY: a recording command buffer of this device.
        unsafe {
            self.device.cmd_pipeline_barrier(
                cmd,
                stages,
                stages,
                vk::DependencyFlags::empty(),
                &b,
                &[],
                &[],
            )
        };
    }

    /// Records the barrier after a dispatch: shader writes visible to later shaders and copies.
    pub(crate) fn compute_barrier(&self, cmd: vk::CommandBuffer) {
        let b = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::SHADER_READ)
            .dst_access_mask(
                vk::AccessFlags::TRANSFER_READ
                    | vk::AccessFlags::TRANSFER_WRITE
                    | vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE,
            )];
        // SAFETY: a recording command buffer of this device.
        unsafe {
            self.device.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::DependencyFlags::empty(),
                &b,
                &[],
                &[],
            )
        };
    }

    /// Submits what was recorded and waits for it; resets the per-submission resources.
    pub(crate) fn flush(&self, st: &mut StreamState) -> Result<()> {
        if !st.recording {
            return Ok(());
        }
        st.recording = false;
        st.pending = 0;
        st.uniforms_used = 0;
        let had_sets = st.sets > 0;
        st.sets = 0;
        st.storage_descriptors = 0;
        st.bound_pipeline = vk::Pipeline::null();
        st.bound_set = vk::DescriptorSet::null();
        st.last_set = vk::DescriptorSet::null();
        let d = &self.device;
        // SAFETY: a recording command buffer of this device.
        unsafe { d.end_command_buffer(st.cmd) }.map_err(|e| vk_err("vkEndCommandBuffer", e))?;
        let cmds = [st.cmd];
        let si = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: an executable command buffer, an unsignalled fence; the queue is only used
        // under the stream lock.
        unsafe { d.queue_submit(self.queue, &si, st.fence) }
            .map_err(|e| vk_err("vkQueueSubmit", e))?;
        // SAFETY: the fence was just submitted.
        let waited = unsafe { d.wait_for_fences(&[st.fence], true, u64::MAX) };
        // SAFETY: the work is complete (or the device is lost); reset for the next round.
        unsafe {
            let _ = d.reset_fences(&[st.fence]);
            let _ = d.reset_command_buffer(st.cmd, vk::CommandBufferResetFlags::empty());
            if had_sets {
                let _ =
                    d.reset_descriptor_pool(st.desc_pool, vk::DescriptorPoolResetFlags::empty());
            }
        }
        waited.map_err(|e| vk_err("vkWaitForFences", e))
    }

    /// The staging buffer with room for `size` bytes (grown when needed).
    pub(crate) fn staging<'a>(&self, st: &'a mut StreamState, size: u64) -> Result<&'a HostBuffer> {
        if st.staging.as_ref().is_none_or(|b| b.size < size) {
            self.flush(st)?;
            if let Some(old) = st.staging.take() {
                self.destroy_host_buffer(old);
            }
            let grown = size.max(1 << 20).next_power_of_two();
            st.staging = Some(self.create_host_buffer(
                grown,
                vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
            )?);
        }
        Ok(st.staging.as_ref().expect("just made"))
    }

    /// Reserves `size` bytes of uniform space in the current submission; returns the buffer and
    /// offset. Submits first when the arena is full.
    pub(crate) fn uniform_space(
        &self,
        st: &mut StreamState,
        size: u64,
    ) -> Result<(vk::Buffer, u64, *mut u8)> {
        let align = self.props.min_uniform_buffer_offset_alignment;
        let start = st.uniforms_used.div_ceil(align) * align;
        let fits = st.uniforms.as_ref().is_some_and(|b| start + size <= b.size);
        if !fits {
            self.flush(st)?;
            if st.uniforms.as_ref().is_none_or(|b| size > b.size) {
                if let Some(old) = st.uniforms.take() {
                    self.destroy_host_buffer(old);
                }
                st.uniforms = Some(self.create_host_buffer(
                    size.max(64 << 10).next_power_of_two(),
                    vk::BufferUsageFlags::UNIFORM_BUFFER,
                )?);
            }
        }
        let start = if fits { start } else { 0 };
        st.uniforms_used = start + size;
        let b = st.uniforms.as_ref().expect("made above");
        // SAFETY: `start + size` fits in the mapped buffer.
        Ok((b.buffer, start, unsafe { b.ptr.add(start as usize) }))
    }
}

/// One half of the double-buffered staging of large copies: its own buffer, command buffer
/// and fence, so that the host fills or drains one half while the device copies the other.
pub(crate) struct XferSlot {
    pub staging: HostBuffer,
    pub cmd: vk::CommandBuffer,
    pub fence: vk::Fence,
    pub busy: bool,
}

/// The piece size of pipelined copies.
pub(crate) const XFER_CHUNK: u64 = 4 << 20;

impl Device {
    /// A transfer slot with its own command pool (sharing the stream's pool slows later
    /// submissions on some drivers); the pool lives as long as the device.
    fn make_xfer_slot(&self) -> Result<XferSlot> {
        let staging = self.create_host_buffer(
            XFER_CHUNK,
            vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
        )?;
        // SAFETY: valid infos on a live device; the pool is used under the stream lock.
        let pool = unsafe {
            self.device.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(self.queue_family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
        }
        .map_err(|e| vk_err("vkCreateCommandPool", e))?;
        let ai = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: valid infos on a live device; the pool is used under the stream lock.
        unsafe {
            let cmd = match self.device.allocate_command_buffers(&ai) {
                Ok(c) => c[0],
                Err(e) => {
                    self.destroy_host_buffer(staging);
                    return Err(vk_err("vkAllocateCommandBuffers", e));
                }
            };
            let fence = match self
                .device
                .create_fence(&vk::FenceCreateInfo::default(), None)
            {
                Ok(f) => f,
                Err(e) => {
                    self.device.free_command_buffers(pool, &[cmd]);
                    self.destroy_host_buffer(staging);
                    return Err(vk_err("vkCreateFence", e));
                }
            };
            Ok(XferSlot {
                staging,
                cmd,
                fence,
                busy: false,
            })
        }
    }

    /// The two transfer slots (made on first use).
    pub(crate) fn xfer_slots<'a>(&self, st: &'a mut StreamState) -> Result<&'a mut [XferSlot; 2]> {
        if st.xfer.is_none() {
            let a = self.make_xfer_slot()?;
            let b = self.make_xfer_slot()?;
            st.xfer = Some([a, b]);
        }
        Ok(st.xfer.as_mut().expect("made above"))
    }

    /// Waits until a slot's copy is done.
    pub(crate) fn xfer_wait(&self, slot: &mut XferSlot) -> Result<()> {
        if !slot.busy {
            return Ok(());
        }
        slot.busy = false;
        let d = &self.device;
        // SAFETY: the fence was submitted with the slot's command buffer.
        let r = unsafe { d.wait_for_fences(&[slot.fence], true, u64::MAX) };
        // SAFETY: the work is complete; reset for reuse.
        unsafe {
            let _ = d.reset_fences(&[slot.fence]);
            let _ = d.reset_command_buffer(slot.cmd, vk::CommandBufferResetFlags::empty());
        }
        r.map_err(|e| vk_err("vkWaitForFences", e))
    }

    /// Submits one buffer copy on a slot (idle) without waiting.
    pub(crate) fn xfer_submit(
        &self,
        slot: &mut XferSlot,
        src: vk::Buffer,
        dst: vk::Buffer,
        region: vk::BufferCopy,
    ) -> Result<()> {
        let d = &self.device;
        let bi = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the slot's command buffer is idle (waited for); buffers of this device with
        // ranges checked by the caller; the queue is used under the stream lock.
        unsafe {
            d.begin_command_buffer(slot.cmd, &bi)
                .map_err(|e| vk_err("vkBeginCommandBuffer", e))?;
            self.barrier(slot.cmd);
            d.cmd_copy_buffer(slot.cmd, src, dst, &[region]);
            self.barrier(slot.cmd);
            d.end_command_buffer(slot.cmd)
                .map_err(|e| vk_err("vkEndCommandBuffer", e))?;
            let cmds = [slot.cmd];
            let si = [vk::SubmitInfo::default().command_buffers(&cmds)];
            d.queue_submit(self.queue, &si, slot.fence)
                .map_err(|e| vk_err("vkQueueSubmit", e))?;
        }
        slot.busy = true;
        Ok(())
    }
}

/// Descriptor sets one submission may allocate before the stream submits and starts again.
pub(crate) const SETS_PER_SUBMISSION: u32 = 512;
/// Storage buffer descriptors one submission may allocate.
pub(crate) const STORAGE_PER_SUBMISSION: u32 = SETS_PER_SUBMISSION * 16;

impl StreamState {
    fn create(d: &ash::Device, family: u32) -> Result<StreamState> {
        let pci = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create infos on a live device.
        unsafe {
            let pool = d
                .create_command_pool(&pci, None)
                .map_err(|e| vk_err("vkCreateCommandPool", e))?;
            let ai = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            let cmd = d
                .allocate_command_buffers(&ai)
                .map_err(|e| vk_err("vkAllocateCommandBuffers", e))?[0];
            let fence = d
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(|e| vk_err("vkCreateFence", e))?;
            let sizes = [
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: STORAGE_PER_SUBMISSION,
                },
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::UNIFORM_BUFFER,
                    descriptor_count: SETS_PER_SUBMISSION,
                },
            ];
            let dpi = vk::DescriptorPoolCreateInfo::default()
                .max_sets(SETS_PER_SUBMISSION)
                .pool_sizes(&sizes);
            let desc_pool = d
                .create_descriptor_pool(&dpi, None)
                .map_err(|e| vk_err("vkCreateDescriptorPool", e))?;
            Ok(StreamState {
                pool,
                cmd,
                fence,
                recording: false,
                desc_pool,
                staging: None,
                uniforms: None,
                uniforms_used: 0,
                pending: 0,
                sets: 0,
                storage_descriptors: 0,
                bound_pipeline: vk::Pipeline::null(),
                bound_set: vk::DescriptorSet::null(),
                last_set: vk::DescriptorSet::null(),
                last_layout: vk::DescriptorSetLayout::null(),
                last_buffers: Vec::new(),
                xfer: None,
            })
        }
    }
}

/// The whole of a mapped allocation, for flushes and invalidations.
fn whole(memory: vk::DeviceMemory) -> [vk::MappedMemoryRange<'static>; 1] {
    [vk::MappedMemoryRange::default()
        .memory(memory)
        .offset(0)
        .size(vk::WHOLE_SIZE)]
}
