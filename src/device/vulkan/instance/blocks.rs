//! Device-local memory for data space and workspace, placed in large blocks so that many
//! buffers share few `vkAllocateMemory` allocations (some drivers allow only 4096). A block
//! holds 256 MiB, 64 MiB where the memory type is host visible (integrated GPUs, lavapipe);
//! a buffer goes to the first free range that fits it at its alignment, and one larger than a
//! block gets memory of its own. A block whose last buffer is freed is given back, unless it
//! is the only shared block left.

use ash::vk;

/// Where a buffer lives.
pub(crate) struct Allocation {
    /// The block's memory.
    pub memory: vk::DeviceMemory,
    /// The buffer's offset in it.
    pub offset: u64,
    size: u64,
}

struct Block {
    memory: vk::DeviceMemory,
    /// Memory of one large buffer alone.
    dedicated: bool,
    /// Free ranges `(start, end)`, in order, none touching the next.
    free: Vec<(u64, u64)>,
    /// Buffers placed in it.
    used: usize,
}

/// The blocks of the device-local memory type.
pub(crate) struct Blocks {
    mtype: u32,
    /// The size of the memory type's heap: no larger buffer is tried.
    heap_size: u64,
    block_size: u64,
    blocks: Vec<Block>,
}

impl Block {
    fn new(memory: vk::DeviceMemory, size: u64, dedicated: bool) -> Block {
        Block {
            memory,
            dedicated,
            free: vec![(0, size)],
            used: 0,
        }
    }

    /// The offset of `size` bytes at `align` (a power of two) in the first range with room.
    fn place(&mut self, size: u64, align: u64) -> Option<u64> {
        let (k, offset) = self
            .free
            .iter()
            .enumerate()
            .find_map(|(k, &(start, end))| {
                let offset = start.checked_add(align - 1)? & !(align - 1);
                (offset.checked_add(size)? <= end).then_some((k, offset))
            })?;
        let (start, end) = self.free[k];
        if offset + size < end {
            self.free[k].0 = offset + size;
            if start < offset {
                self.free.insert(k, (start, offset));
            }
        } else if start < offset {
            self.free[k].1 = offset;
        } else {
            self.free.remove(k);
        }
        self.used += 1;
        Some(offset)
    }

    /// Frees `start..end`, joined to the free ranges it touches.
    fn release(&mut self, start: u64, end: u64) {
        let k = self.free.partition_point(|r| r.0 < start);
        self.free.insert(k, (start, end));
        if self.free.get(k + 1).is_some_and(|r| r.0 == end) {
            self.free[k].1 = self.free.remove(k + 1).1;
        }
        if k > 0 && self.free[k - 1].1 == start {
            self.free[k - 1].1 = self.free.remove(k).1;
        }
        self.used -= 1;
    }
}

impl Blocks {
    /// No blocks yet, for memory type `mtype` on a heap of `heap_size` bytes.
    pub fn new(mtype: u32, heap_size: u64, host_visible: bool) -> Blocks {
        const MIB: u64 = 1 << 20;
        Blocks {
            mtype,
            heap_size,
            block_size: if host_visible { 64 * MIB } else { 256 * MIB },
            blocks: Vec::new(),
        }
    }

    /// Places a buffer with requirements `req`, allocating a block where none has room; the
    /// reason otherwise.
    pub fn allocate(
        &mut self,
        d: &ash::Device,
        req: &vk::MemoryRequirements,
    ) -> Result<Allocation, String> {
        if req.memory_type_bits & (1 << self.mtype) == 0 {
            return Err("No compatible memory type available".into());
        }
        let (size, align) = (req.size, req.alignment.max(1));
        if size > self.heap_size {
            return Err("Out of memory".into());
        }
        let dedicated = size > self.block_size;
        if !dedicated {
            for b in self.blocks.iter_mut().filter(|b| !b.dedicated) {
                if let Some(offset) = b.place(size, align) {
                    let memory = b.memory;
                    return Ok(Allocation {
                        memory,
                        offset,
                        size,
                    });
                }
            }
        }
        let block_size = if dedicated { size } else { self.block_size };
        let ai = vk::MemoryAllocateInfo::default()
            .allocation_size(block_size)
            .memory_type_index(self.mtype);
        // SAFETY: valid allocation info for a memory type of this device.
        let memory = unsafe { d.allocate_memory(&ai, None) }.map_err(|e| match e {
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => "Out of memory".to_owned(),
            e => format!("Internal error: Unexpected error in vkAllocateMemory: {e:?}"),
        })?;
        let mut b = Block::new(memory, block_size, dedicated);
        // A fresh block has room at offset 0.
        let offset = b.place(size, align).unwrap_or(0);
        self.blocks.push(b);
        Ok(Allocation {
            memory,
            offset,
            size,
        })
    }

    /// Frees a buffer's place (the buffer is destroyed); gives its block back when empty.
    pub fn free(&mut self, d: &ash::Device, a: Allocation) {
        let Some(i) = self.blocks.iter().position(|b| b.memory == a.memory) else {
            return;
        };
        self.blocks[i].release(a.offset, a.offset + a.size);
        let b = &self.blocks[i];
        if b.used == 0 && (b.dedicated || self.blocks.iter().filter(|b| !b.dedicated).count() > 1) {
            let b = self.blocks.swap_remove(i);
            // SAFETY: memory of this device that no buffer uses any more.
            unsafe { d.free_memory(b.memory, None) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vulkan_blocks_place_first_fit_aligned_and_join_freed_ranges() {
        let mut b = Block::new(vk::DeviceMemory::null(), 1024, false);
        assert_eq!(b.place(10, 4), Some(0));
        assert_eq!(b.place(100, 256), Some(256));
        assert_eq!(b.free, [(10, 256), (356, 1024)]);
        assert_eq!(b.place(8, 8), Some(16));
        assert_eq!(b.place(700, 1), None);
        assert_eq!(b.place(668, 1), Some(356));
        assert_eq!(b.free, [(10, 16), (24, 256)]);
        assert_eq!(b.used, 4);
        b.release(256, 356);
        assert_eq!(b.free, [(10, 16), (24, 356)]);
        b.release(16, 24);
        assert_eq!(b.free, [(10, 356)]);
        b.release(0, 10);
        b.release(356, 1024);
        assert_eq!(b.free, [(0, 1024)]);
        assert_eq!(b.used, 0);
    }
}
