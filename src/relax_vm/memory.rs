//! Memory: allocators (naive and pooled, one per device and kind, shared process-wide as the
//! reference's `MemoryManager`) and `vm.Storage`, a buffer tensors are carved out of.

use crate::device;
use crate::ndarray::{checked_nbytes, NDArrayObj, ALLOC_ALIGNMENT};
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// `AllocatorType::kNaive`.
pub const NAIVE: i64 = 1;
/// `AllocatorType::kPooled`.
pub const POOLED: i64 = 2;

/// A block of device memory.
#[derive(Debug)]
pub struct Buffer {
    /// Device pointer.
    pub data: *mut c_void,
    /// Usable bytes.
    pub size: usize,
    /// Where it lives.
    pub device: DLDevice,
}

// SAFETY: a buffer is an address plus size; the memory is owned by whoever holds the buffer.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

/// Hands out and takes back device memory.
pub trait Allocator: Send + Sync {
    /// Allocates at least `nbytes`.
    fn alloc(&self, dev: DLDevice, nbytes: usize, hint: DLDataType) -> Result<Buffer>;
    /// Returns a buffer.
    ///
    /// # Safety
    /// `buf` must come from this allocator's `alloc`, returned once, with nothing using its
    /// memory any more (a buffer's fields are public, so safe code could forge one).
    unsafe fn free(&self, buf: Buffer);
    /// Releases cached memory.
    fn clear(&self) {}
    /// Bytes currently handed out or cached.
    fn used_bytes(&self) -> usize;
}

fn raw_alloc(dev: DLDevice, nbytes: usize, hint: DLDataType) -> Result<*mut c_void> {
    device::api(dev)?.alloc_data_space(dev, nbytes.max(1), ALLOC_ALIGNMENT, hint)
}

fn raw_free(buf: &Buffer) {
    if let Ok(api) = device::api(buf.device) {
        // SAFETY: `buf` was allocated by `raw_alloc` on this device and is freed once, here.
        let _ = unsafe { api.free_data_space(buf.device, buf.data) };
    }
}

/// Allocates and frees straight through the device API.
#[derive(Default)]
pub struct NaiveAllocator {
    used: Mutex<usize>,
}

impl Allocator for NaiveAllocator {
    fn alloc(&self, dev: DLDevice, nbytes: usize, hint: DLDataType) -> Result<Buffer> {
        let data = raw_alloc(dev, nbytes, hint)?;
        *self.used.lock().unwrap_or_else(|e| e.into_inner()) += nbytes;
        Ok(Buffer {
            data,
            size: nbytes,
            device: dev,
        })
    }
    unsafe fn free(&self, buf: Buffer) {
        let mut u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        *u = u.saturating_sub(buf.size);
        raw_free(&buf);
    }
    fn used_bytes(&self) -> usize {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Rounds sizes up to pages and keeps freed blocks per size for reuse.
#[derive(Default)]
pub struct PooledAllocator {
    inner: Mutex<Pool>,
}

#[derive(Default)]
struct Pool {
    /// Freed buffers by size, sorted by size (a binary search: no hash table's code).
    free: Vec<(usize, Vec<Buffer>)>,
    used: usize,
}

impl Pool {
    /// Where the list of `size` is, or would be inserted.
    fn find(&self, size: usize) -> std::result::Result<usize, usize> {
        self.free.binary_search_by(|e| e.0.cmp(&size))
    }
}

/// Page size of the pooled allocator.
pub const PAGE_SIZE: usize = 4096;

impl Allocator for PooledAllocator {
    fn alloc(&self, dev: DLDevice, nbytes: usize, hint: DLDataType) -> Result<Buffer> {
        let size = nbytes
            .max(1)
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or_else(|| Error::value_fmt(format_args!("cannot allocate {nbytes} bytes")))?;
        {
            let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Ok(i) = p.find(size) {
                if let Some(b) = p.free.get_mut(i).and_then(|e| e.1.pop()) {
                    return Ok(b);
                }
            }
        }
        let data = match raw_alloc(dev, size, hint) {
            Ok(d) => d,
            Err(_) => {
                // Out of memory: give the cache back and try once more.
                self.clear();
                raw_alloc(dev, size, hint)?
            }
        };
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).used += size;
        Ok(Buffer {
            data,
            size,
            device: dev,
        })
    }
    unsafe fn free(&self, buf: Buffer) {
        let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let i = match p.find(buf.size) {
            Ok(i) => i,
            Err(i) => {
                p.free.insert(i, (buf.size, Vec::new()));
                i
            }
        };
        if let Some(e) = p.free.get_mut(i) {
            e.1.push(buf);
        }
    }
    fn clear(&self) {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let p = &mut *guard;
        for (_, list) in std::mem::take(&mut p.free) {
            for b in list {
                p.used = p.used.saturating_sub(b.size);
                raw_free(&b);
            }
        }
    }
    fn used_bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).used
    }
}

type AllocKey = (i32, i32, i64);

/// The allocators made so far, by device and kind (a handful: searched in order).
static MANAGER: Mutex<Vec<(AllocKey, Arc<dyn Allocator>)>> = Mutex::new(Vec::new());

/// The process-wide allocator of a device and kind (created on first use).
pub fn get_or_create_allocator(dev: DLDevice, kind: i64) -> Result<Arc<dyn Allocator>> {
    if kind != NAIVE && kind != POOLED {
        return Err(Error::value_fmt(format_args!(
            "unknown allocator type {kind} (1 = naive, 2 = pooled)"
        )));
    }
    let key = (dev.device_type, dev.device_id, kind);
    let mut m = MANAGER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, a)) = m.iter().find(|(k, _)| *k == key) {
        return Ok(a.clone());
    }
    let a: Arc<dyn Allocator> = if kind == NAIVE {
        Arc::new(NaiveAllocator::default())
    } else {
        Arc::new(PooledAllocator::default())
    };
    m.push((key, a.clone()));
    Ok(a)
}

/// Empties the pools of every allocator (`vm.builtin.memory_manager.clear`).
pub fn clear_all() {
    let all: Vec<Arc<dyn Allocator>> = MANAGER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(_, a)| a.clone())
        .collect();
    for a in all {
        a.clear();
    }
}

/// `vm.Storage`: a buffer that returns to its allocator when the storage and every tensor
/// carved out of it are gone.
pub struct StorageObj {
    buffer: Option<Buffer>,
    alloc: Arc<dyn Allocator>,
}

// SAFETY: `StorageObj` is the payload stored under this key only (a type of its own).
unsafe impl crate::object::ObjectType for StorageObj {
    crate::object_type!("vm.Storage", parent 0);
}

impl Drop for StorageObj {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            // SAFETY: the storage's buffer came from this allocator and is returned once,
            // here, when the last tensor carved from it (each holds the storage) is gone.
            unsafe { self.alloc.free(b) };
        }
    }
}

impl StorageObj {
    /// A new storage object of `nbytes` on `dev` from `alloc`.
    pub fn allocate(
        alloc: Arc<dyn Allocator>,
        dev: DLDevice,
        nbytes: usize,
        hint: DLDataType,
    ) -> Result<ObjectRef> {
        let buffer = alloc.alloc(dev, nbytes, hint)?;
        Ok(ObjectRef::new(StorageObj {
            buffer: Some(buffer),
            alloc,
        }))
    }

    /// The buffer.
    pub fn buffer(&self) -> &Buffer {
        self.buffer.as_ref().expect("present until drop")
    }

    /// An NDArray view of `shape` and `dtype` at `offset` bytes into the buffer, keeping the
    /// storage alive (`StorageObj::AllocNDArray`).
    pub fn alloc_tensor(
        this: &ObjectRef,
        offset: i64,
        shape: &[i64],
        dtype: DLDataType,
    ) -> Result<ObjectRef> {
        let st = this
            .downcast_ref::<StorageObj>()
            .ok_or_else(|| Error::type_error("alloc_tensor expects a vm.Storage"))?;
        let buf = st.buffer();
        let need = checked_nbytes(shape, dtype)?;
        if offset < 0 || (offset as u64).saturating_add(need as u64) > buf.size as u64 {
            return Err(Error::tvm_fmt(format_args!(
                "storage allocation failure, attempted to allocate {need} at offset {offset} in \
                 region that is {}bytes",
                buf.size
            )));
        }
        // SAFETY: the extent fits the buffer (checked above), which `this` owns and the view
        // keeps alive; tensors carved from one storage are the storage's business, as in the
        // reference (the VM hands them to kernels).
        unsafe {
            NDArrayObj::view_of_owner(
                this.clone(),
                buf.data,
                buf.device,
                shape,
                dtype,
                offset as u64,
            )
        }
    }
}

/// Bytes a buffer of `shape` elements of `dtype` takes.
pub fn shape_nbytes(shape: &[i64], dtype: DLDataType) -> Result<usize> {
    checked_nbytes(shape, dtype)
}
