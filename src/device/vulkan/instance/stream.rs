//! The single command stream of a Vulkan device (one command buffer, submitted and waited
//! for on synchronisation) and the double-buffered staging of large transfers.

use super::{vk_err, Device, HostBuffer};
use crate::packed_func::error::Result;
use ash::vk;

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

impl Device {
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
    pub(super) fn create(d: &ash::Device, family: u32) -> Result<StreamState> {
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
