//! The CPU device: aligned host memory, memcpy copies, a thread-local workspace pool.

use super::{DeviceApi, DeviceAttr, Stream};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice, DL_CPU};
use crate::packed_func::value::RetValue;
use std::cell::RefCell;
use std::ffi::c_void;

/// The CPU backend.
pub struct CpuDeviceApi;

/// The one CPU backend instance.
pub static CPU: CpuDeviceApi = CpuDeviceApi;

/// Allocates aligned host memory (`alignment` is raised to a power of two ≥ 16).
///
/// Implemented as `malloc` plus manual alignment, with the original pointer stored just
/// below the aligned one: glibc's `posix_memalign` takes a slow path for every call, which
/// made small array allocations several times more expensive than `malloc`.
pub fn host_alloc(nbytes: usize, alignment: usize) -> Result<*mut c_void> {
    let align = alignment.max(16).next_power_of_two();
    let fail = || {
        Error::new(
            crate::packed_func::ErrorKind::TVMError,
            format!("cpu(0): cannot allocate {nbytes} bytes aligned to {align}"),
        )
    };
    let total = nbytes
        .max(1)
        .checked_add(align + std::mem::size_of::<usize>())
        .ok_or_else(fail)?;
    // SAFETY: plain malloc; checked for NULL below.
    let raw = unsafe { libc::malloc(total) };
    if raw.is_null() {
        return Err(fail());
    }
    let start = raw as usize + std::mem::size_of::<usize>();
    let aligned = (start + align - 1) & !(align - 1);
    // SAFETY: `aligned - 8 >= raw` and `aligned + nbytes <= raw + total`, so both the header
    // slot and the payload lie inside the block.
    unsafe { *((aligned - std::mem::size_of::<usize>()) as *mut *mut c_void) = raw };
    if nbytes >= HUGE_PAGE {
        advise_huge_pages(aligned, nbytes);
    }
    Ok(aligned as *mut c_void)
}

const HUGE_PAGE: usize = 2 << 20;

/// Asks for transparent huge pages over the 2 MiB-aligned part of a large block: weights and
/// activations of real models are tens of megabytes, and filling them 4 KiB page by page
/// spent most of a model's load time in page faults. Advice only; errors (no THP) are ignored.
fn advise_huge_pages(start: usize, len: usize) {
    let lo = (start + HUGE_PAGE - 1) & !(HUGE_PAGE - 1);
    let hi = (start + len) & !(HUGE_PAGE - 1);
    if hi > lo {
        // SAFETY: [lo, hi) lies inside a block this process just allocated; MADV_HUGEPAGE
        // changes how future faults are served, never the contents.
        unsafe { libc::madvise(lo as *mut c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}

/// Frees what [`host_alloc`] returned.
///
/// # Safety
/// `p` must come from `host_alloc` and not be freed twice.
pub unsafe fn host_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: caller contract: the word below `p` holds the block's original pointer.
    unsafe {
        let raw = *((p as usize - std::mem::size_of::<usize>()) as *const *mut c_void);
        libc::free(raw)
    }
}

const PAGE: usize = 4096;

/// One thread's cache of workspace blocks: free blocks by size, and the sizes of live ones.
struct WorkspacePool {
    free: Vec<(usize, *mut c_void)>,
    live: Vec<(*mut c_void, usize)>,
}

impl Drop for WorkspacePool {
    fn drop(&mut self) {
        for &(_, p) in &self.free {
            // SAFETY: pooled blocks came from host_alloc and are owned by the pool.
            unsafe { host_free(p) };
        }
    }
}

thread_local! {
    static POOL: RefCell<WorkspacePool> = const {
        RefCell::new(WorkspacePool { free: Vec::new(), live: Vec::new() })
    };
}

/// Most blocks a thread keeps for reuse.
const POOL_KEEP: usize = 16;

/// Takes a workspace block from this thread's pool (best fit among cached blocks).
pub fn workspace_alloc(nbytes: usize) -> Result<*mut c_void> {
    let size = if nbytes == 0 {
        PAGE
    } else {
        nbytes.div_ceil(PAGE) * PAGE
    };
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        // Workspaces are taken and returned in stack order, so the block freed last usually
        // fits exactly; otherwise take the smallest one large enough.
        if let Some(&(s, p)) = pool.free.last() {
            if s == size {
                pool.free.pop();
                pool.live.push((p, s));
                return Ok(p);
            }
        }
        let mut best: Option<usize> = None;
        for (i, &(s, _)) in pool.free.iter().enumerate() {
            if s >= size && best.is_none_or(|b| pool.free[b].0 > s) {
                best = Some(i);
            }
        }
        let (s, p) = match best {
            Some(i) => pool.free.swap_remove(i),
            None => (size, host_alloc(size, crate::ndarray::ALLOC_ALIGNMENT)?),
        };
        pool.live.push((p, s));
        Ok(p)
    })
}

/// Returns a workspace block to this thread's pool. Only pointers found among this thread's
/// live blocks are touched, so any other pointer is an error rather than a bad free.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn workspace_free(p: *mut c_void) -> Result<()> {
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        // Workspaces are freed in reverse order of allocation: search from the back.
        let pos = pool
            .live
            .iter()
            .rposition(|&(q, _)| q == p)
            .ok_or_else(|| {
                Error::value(format!(
                    "TVMBackendFreeWorkspace: {p:p} is not a live workspace of this thread \
                 (double free, or freed on another thread)"
                ))
            })?;
        let (_, s) = pool.live.swap_remove(pos);
        if pool.free.len() < POOL_KEEP {
            pool.free.push((s, p));
        } else {
            // SAFETY: the block came from host_alloc and is no longer live.
            unsafe { host_free(p) };
        }
        Ok(())
    })
}

fn total_memory() -> i64 {
    // SAFETY: sysinfo fills the zeroed struct.
    unsafe {
        let mut info: libc::sysinfo = std::mem::zeroed();
        if libc::sysinfo(&mut info) == 0 {
            info.totalram as i64 * info.mem_unit as i64
        } else {
            -1
        }
    }
}

impl DeviceApi for CpuDeviceApi {
    fn set_device(&self, _dev: DLDevice) -> Result<()> {
        Ok(())
    }

    fn get_attr(&self, _dev: DLDevice, kind: DeviceAttr) -> Result<RetValue> {
        Ok(match kind {
            DeviceAttr::Exist => RetValue::Int(1),
            DeviceAttr::TotalGlobalMemory => RetValue::Int(total_memory()),
            _ => RetValue::Null,
        })
    }

    fn alloc_data_space(
        &self,
        _dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        host_alloc(nbytes, alignment)
    }

    unsafe fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        // SAFETY: the C contract: ptr came from alloc_data_space.
        unsafe { host_free(ptr) };
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
        if dev_from.device_type != DL_CPU || dev_to.device_type != DL_CPU {
            return Err(Error::value(format!(
                "the CPU backend cannot copy from {} to {}",
                super::describe(dev_from),
                super::describe(dev_to)
            )));
        }
        if from.is_null() || to.is_null() {
            return Err(Error::value("copy with a NULL data pointer"));
        }
        // SAFETY: caller contract: both ranges are valid; they may overlap only if the caller
        // aliased them, so use memmove semantics.
        unsafe {
            std::ptr::copy(
                (from as *const u8).add(from_offset as usize),
                (to as *mut u8).add(to_offset as usize),
                nbytes,
            )
        };
        Ok(())
    }

    unsafe fn stream_sync(&self, _dev: DLDevice, _stream: Stream) -> Result<()> {
        Ok(())
    }

    fn alloc_workspace(
        &self,
        _dev: DLDevice,
        nbytes: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        workspace_alloc(nbytes)
    }

    unsafe fn free_workspace(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        workspace_free(ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_reuse_and_errors() {
        let a = workspace_alloc(100).unwrap();
        assert_eq!(a as usize % 64, 0);
        workspace_free(a).unwrap();
        let b = workspace_alloc(200).unwrap();
        assert_eq!(a, b, "a freed block is reused");
        assert!(workspace_free(a).is_ok());
        assert!(workspace_free(a).is_err(), "double free is detected");
    }
}
