//! The workspace pool of the GPU backends: temporary buffers kept after they are freed and
//! handed out again to requests they can hold (best fit, whole pages).

use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::DLDevice;
use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::Hash;
use std::sync::Mutex;

/// Page size of the pool: requests are rounded up to it.
const PAGE: usize = 4096;

/// One device's buffers: free ones as (size, address), used ones by address.
#[derive(Default)]
struct Pool {
    free: Vec<(usize, usize)>,
    used: HashMap<usize, usize>,
}

/// Workspace pools by device key.
pub(crate) struct WorkspacePools<K>(Mutex<HashMap<K, Pool>>);

impl<K> Default for WorkspacePools<K> {
    fn default() -> Self {
        WorkspacePools(Mutex::new(HashMap::new()))
    }
}

impl<K: Hash + Eq + Copy> WorkspacePools<K> {
    /// A buffer of at least `nbytes` for device `key`: the smallest free one that holds it, or
    /// a new one of whole pages from `fresh(bytes)`.
    pub(crate) fn alloc(
        &self,
        key: K,
        nbytes: usize,
        fresh: impl FnOnce(usize) -> Result<*mut c_void>,
    ) -> Result<*mut c_void> {
        let need = nbytes.max(1).div_ceil(PAGE) * PAGE;
        {
            let mut pools = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let pool = pools.entry(key).or_default();
            let best = pool
                .free
                .iter()
                .enumerate()
                .filter(|(_, &(size, _))| size >= need)
                .min_by_key(|(_, &(size, _))| size)
                .map(|(i, _)| i);
            if let Some(i) = best {
                let (size, p) = pool.free.swap_remove(i);
                pool.used.insert(p, size);
                return Ok(p as *mut c_void);
            }
        }
        // Allocated outside the lock: a driver call.
        let p = fresh(need)?;
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default()
            .used
            .insert(p as usize, need);
        Ok(p)
    }

    /// Returns a buffer to device `key`'s pool; an error naming `dev` when it did not come
    /// from there.
    pub(crate) fn free(&self, key: K, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        let mut pools = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let pool = pools.entry(key).or_default();
        match pool.used.remove(&(ptr as usize)) {
            Some(size) => {
                pool.free.push((size, ptr as usize));
                Ok(())
            }
            None => Err(Error::value_fmt(format_args!(
                "free_workspace: {ptr:p} was not allocated from the workspace of {}",
                crate::device::describe(dev)
            ))),
        }
    }
}
