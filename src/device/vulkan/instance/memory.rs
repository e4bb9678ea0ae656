//! Buffers and memory of a Vulkan device: device-local buffers (placed in `blocks`),
//! host-visible mapped buffers, and flushes and invalidations of mapped memory.

use super::{vk_err, Allocation, Device};
use crate::packed_func::error::{Error, Result};
use ash::vk;

/// A host-visible buffer kept mapped (staging and uniform arenas).
pub(crate) struct HostBuffer {
    pub buffer: vk::Buffer,
    pub memory: vk::DeviceMemory,
    pub size: u64,
    pub ptr: *mut u8,
}

impl Device {
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
    ) -> Result<(vk::Buffer, Allocation)> {
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
            .allocate(d, &requirements);
        let alloc = match alloc {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the buffer is unused.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(Error::value_fmt(format_args!(
                    "Vulkan: cannot allocate {size} bytes of device memory: {e}"
                )));
            }
        };
        // SAFETY: memory of this device, large and aligned enough at this offset.
        if let Err(e) = unsafe { d.bind_buffer_memory(buffer, alloc.memory, alloc.offset) } {
            self.free_device_buffer(buffer, alloc);
            return Err(vk_err("vkBindBufferMemory", e));
        }
        Ok((buffer, alloc))
    }

    /// Destroys a device-local buffer (no pending command may use it).
    pub(crate) fn free_device_buffer(&self, buffer: vk::Buffer, alloc: Allocation) {
        // SAFETY: a buffer of this device, no longer used.
        unsafe { self.device.destroy_buffer(buffer, None) };
        self.allocator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .free(&self.device, alloc);
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

    pub(super) fn destroy_host_buffer(&self, b: HostBuffer) {
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
}

/// The whole of a mapped allocation, for flushes and invalidations.
fn whole(memory: vk::DeviceMemory) -> [vk::MappedMemoryRange<'static>; 1] {
    [vk::MappedMemoryRange::default()
        .memory(memory)
        .offset(0)
        .size(vk::WHOLE_SIZE)]
}
