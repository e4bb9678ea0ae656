//! The streams the runtime created and has not freed: the handles that
//! `runtime.TVMSetStream` vouches for. A handle is an opaque address, so a global that makes
//! a backend use one as a stream accepts only those on this list (or NULL); the C entry
//! `TVMSetStream` keeps TVM's contract and takes any stream the caller vouches for.

use super::{api, Stream};
use crate::packed_func::error::Result;
use crate::packed_func::types::DLDevice;
use std::sync::Mutex;

/// `(device type, device id, stream address)` of every live stream.
static LIVE: Mutex<Vec<(i32, i32, usize)>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<(i32, i32, usize)>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates a stream of `dev` through its backend and records it (NULL, the default stream of
/// CPU and single-queue devices, is not recorded).
pub fn create_stream(dev: DLDevice) -> Result<Stream> {
    let s = api(dev)?.create_stream(dev)?;
    if !s.is_null() {
        live().push((dev.device_type, dev.device_id, s as usize));
    }
    Ok(s)
}

/// Forgets `stream` and frees it through the backend of `dev`.
///
/// # Safety
/// As [`super::DeviceApi::free_stream`]: `stream` is NULL or a live stream of `dev`, not used
/// after this call.
pub unsafe fn free_stream(dev: DLDevice, stream: Stream) -> Result<()> {
    // SAFETY: forwarded contract.
    unsafe { api(dev)?.free_stream(dev, stream) }?;
    live().retain(|&e| e != (dev.device_type, dev.device_id, stream as usize));
    Ok(())
}

/// Whether `stream` is a stream of `dev` that [`create_stream`] made and [`free_stream`] has
/// not freed.
pub fn is_live(dev: DLDevice, stream: Stream) -> bool {
    live().contains(&(dev.device_type, dev.device_id, stream as usize))
}
