//! The null device: a complete [`DeviceApi`] over host memory, under a device type reserved
//! for tests ([`DL_NULL`], named `null`). It proves the device contract can be met by a
//! backend that is not the CPU: data space and workspace with bookkeeping (a pointer it did
//! not hand out, or one freed already, is refused), copies to, from and within the device,
//! streams that are real handles (created, made current per thread, synchronised, freed), and
//! attributes. Only device id 0 exists.
//!
//! It is not registered by default: [`install`] adds it (tests call it).

use super::{DeviceApi, DeviceAttr, Stream};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice, DL_CPU};
use crate::packed_func::value::RetValue;
use std::alloc::Layout;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The device type of the null device (reserved for tests: below the plugin range, unused by
/// TVM).
pub const DL_NULL: i32 = 31;

/// The null device `null(0)`.
pub const NULL_DEVICE: DLDevice = DLDevice {
    device_type: DL_NULL,
    device_id: 0,
};

/// The null backend's state: live blocks (data space and workspace) and live streams.
#[derive(Default)]
pub struct NullDeviceApi {
    /// Live data-space blocks by address, with their layouts.
    data: Mutex<HashMap<usize, Layout>>,
    /// Live workspace blocks by address, with their layouts.
    workspace: Mutex<HashMap<usize, Layout>>,
    /// Live streams (their handles are distinct non-NULL values).
    streams: Mutex<HashSet<usize>>,
    /// The next stream handle.
    next_stream: AtomicUsize,
}

thread_local! {
    /// This thread's current stream of the null device.
    static CURRENT: RefCell<Stream> = const { RefCell::new(std::ptr::null_mut()) };
}

/// Registers the null backend under [`DL_NULL`] (idempotent: a second call keeps the first
/// backend and its live blocks).
pub fn install() {
    if !super::has_backend(DL_NULL) {
        super::register_backend(DL_NULL, Arc::new(NullDeviceApi::default()));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NullDeviceApi {
    fn check_device(&self, dev: DLDevice) -> Result<()> {
        if dev.device_type != DL_NULL || dev.device_id != 0 {
            return Err(Error::value_fmt(format_args!(
                "{} is not a device of the null backend (only null(0) exists)",
                super::describe(dev)
            )));
        }
        Ok(())
    }

    fn alloc(
        &self,
        blocks: &Mutex<HashMap<usize, Layout>>,
        nbytes: usize,
        alignment: usize,
    ) -> Result<*mut c_void> {
        let layout = Layout::from_size_align(nbytes.max(1), alignment.max(1)).map_err(|e| {
            Error::value_fmt(format_args!(
                "null device: cannot allocate {nbytes} bytes aligned to {alignment}: {e}"
            ))
        })?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return Err(Error::value_fmt(format_args!(
                "null device: out of memory allocating {nbytes} bytes"
            )));
        }
        lock(blocks).insert(p as usize, layout);
        Ok(p as *mut c_void)
    }

    fn free(
        &self,
        blocks: &Mutex<HashMap<usize, Layout>>,
        ptr: *mut c_void,
        what: &str,
    ) -> Result<()> {
        let layout = lock(blocks).remove(&(ptr as usize)).ok_or_else(|| {
            Error::value_fmt(format_args!(
                "null device: {ptr:p} is not a live {what} block (double free, or not from \
                 this backend)"
            ))
        })?;
        // SAFETY: the block was allocated above with this layout and is no longer live.
        unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
        Ok(())
    }

    fn check_stream(&self, stream: Stream) -> Result<()> {
        if stream.is_null() || lock(&self.streams).contains(&(stream as usize)) {
            Ok(())
        } else {
            Err(Error::value_fmt(format_args!(
                "null device: {stream:p} is not a live stream"
            )))
        }
    }

    /// Number of live data-space and workspace blocks (for leak checks in tests).
    pub fn live_blocks(&self) -> usize {
        lock(&self.data).len() + lock(&self.workspace).len()
    }
}

impl DeviceApi for NullDeviceApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        self.check_device(dev)
    }

    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<RetValue> {
        let exists = dev.device_type == DL_NULL && dev.device_id == 0;
        Ok(match kind {
            DeviceAttr::Exist => RetValue::Int(exists as i64),
            _ if !exists => RetValue::Null,
            DeviceAttr::DeviceName => RetValue::Str("null".into()),
            DeviceAttr::MaxThreadsPerBlock | DeviceAttr::WarpSize => RetValue::Int(1),
            _ => RetValue::Null,
        })
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        self.check_device(dev)?;
        self.alloc(&self.data, nbytes, alignment)
    }

    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        self.check_device(dev)?;
        self.free(&self.data, ptr, "data space")
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
        stream: Stream,
    ) -> Result<()> {
        for d in [dev_from, dev_to] {
            if d.device_type != DL_CPU {
                self.check_device(d)?;
            }
        }
        self.check_stream(stream)?;
        // SAFETY: the caller's contract; the null device's memory is host memory.
        unsafe { super::cpu::host_copy(from, from_offset, to, to_offset, nbytes) }
    }

    fn create_stream(&self, dev: DLDevice) -> Result<Stream> {
        self.check_device(dev)?;
        let h = self.next_stream.fetch_add(1, Ordering::Relaxed) + 1;
        lock(&self.streams).insert(h);
        Ok(h as Stream)
    }

    unsafe fn free_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        self.check_device(dev)?;
        if stream.is_null() {
            return Ok(());
        }
        if CURRENT.with(|c| *c.borrow() == stream) {
            return Err(Error::value(
                "null device: the stream is this thread's current stream; set another first",
            ));
        }
        if !lock(&self.streams).remove(&(stream as usize)) {
            return Err(Error::value_fmt(format_args!(
                "null device: {stream:p} is not a live stream (double free?)"
            )));
        }
        Ok(())
    }

    unsafe fn set_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        self.check_device(dev)?;
        self.check_stream(stream)?;
        CURRENT.with(|c| *c.borrow_mut() = stream);
        Ok(())
    }

    fn current_stream(&self, _dev: DLDevice) -> Stream {
        CURRENT.with(|c| *c.borrow())
    }

    unsafe fn stream_sync(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        // Work on the null device completes when it is issued: a sync only checks the handle.
        self.check_device(dev)?;
        self.check_stream(stream)
    }

    unsafe fn sync_stream_from_to(&self, dev: DLDevice, src: Stream, dst: Stream) -> Result<()> {
        self.check_device(dev)?;
        self.check_stream(src)?;
        self.check_stream(dst)
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        self.check_device(dev)?;
        self.alloc(
            &self.workspace,
            nbytes,
            crate::packed_func::tensor::ALLOC_ALIGNMENT,
        )
    }

    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        self.check_device(dev)?;
        self.free(&self.workspace, ptr, "workspace")
    }
}

impl Drop for NullDeviceApi {
    fn drop(&mut self) {
        for blocks in [&self.data, &self.workspace] {
            for (p, layout) in lock(blocks).drain() {
                // SAFETY: a live block allocated with this layout; nothing can use it once
                // the backend is gone.
                unsafe { std::alloc::dealloc(p as *mut u8, layout) };
            }
        }
    }
}
