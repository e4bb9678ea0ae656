//! The CPU device: aligned host memory, memcpy copies, a thread-local workspace pool.

use super::{DeviceApi, DeviceAttr, Stream};
use crate::ffi::error::{Error, Result};
use crate::ffi::types::{DLDataType, DLDevice, DL_CPU};
use crate::ffi::value::RetValue;
use std::cell::RefCell;
use std::ffi::c_void;

/// The CPU backend.
pub struct CpuDeviceApi;

/// The one CPU backend instance.
pub static CPU: CpuDeviceApi = CpuDeviceApi;

/// Allocates aligned host memory (`alignment` is raised to a power of two ≥ pointer size).
pub fn host_alloc(nbytes: usize, alignment: usize) -> Result<*mut c_void> {
    let align = alignment
        .max(std::mem::size_of::<*mut c_void>())
        .next_power_of_two();
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: posix_memalign writes `p` only on success; align is a power of two and a
    // multiple of the pointer size.
    let r = unsafe { libc::posix_memalign(&mut p, align, nbytes.max(1)) };
    if r != 0 || p.is_null() {
        return Err(Error::new(
            crate::ffi::ErrorKind::TVMError,
            format!("cpu(0): cannot allocate {nbytes} bytes aligned to {align}"),
        ));
    }
    Ok(p)
}

/// Frees what [`host_alloc`] returned.
///
/// # Safety
/// `p` must come from `host_alloc` and not be freed twice.
pub unsafe fn host_free(p: *mut c_void) {
    // SAFETY: caller contract.
    unsafe { libc::free(p) }
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

fn workspace_alloc(nbytes: usize) -> Result<*mut c_void> {
    let size = if nbytes == 0 {
        PAGE
    } else {
        nbytes.div_ceil(PAGE) * PAGE
    };
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        // Best fit among cached blocks: the smallest one large enough.
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

fn workspace_free(p: *mut c_void) -> Result<()> {
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

    // The trait's contract (memory from `alloc_data_space`) makes this sound; the trait method
    // cannot be `unsafe` because backends receive opaque device pointers.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
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

    fn stream_sync(&self, _dev: DLDevice, _stream: Stream) -> Result<()> {
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

    fn free_workspace(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
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
