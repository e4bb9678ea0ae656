//! A plugin as a device backend: the [`DeviceApi`] calls forwarded to its table.

use super::abi::TVMDevicePlugin;
use crate::device::{describe, DeviceApi, DeviceAttr, Stream};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{type_code as tc, DLDataType, DLDevice, TVMValue};
use crate::packed_func::value::RetValue;
use std::ffi::{c_int, c_void};

/// A registered plugin: its table, names, and the library that holds its code.
pub struct Plugin {
    pub(super) table: TVMDevicePlugin,
    pub(super) name: String,
    pub(super) format: Option<String>,
    pub(super) _lib: Option<libloading::Library>,
}

// SAFETY: the plugin ABI requires every table function to be callable from any thread.
unsafe impl Send for Plugin {}
// SAFETY: as above.
unsafe impl Sync for Plugin {}

impl Drop for Plugin {
    fn drop(&mut self) {
        if let Some(release) = self.table.release {
            // SAFETY: called once, as the ABI promises, with the plugin's own state.
            unsafe { release(self.table.self_) };
        }
    }
}

impl Plugin {
    fn check(&self, r: c_int, what: &str, dev: DLDevice) -> Result<()> {
        if r == 0 {
            Ok(())
        } else {
            Err(Error::from_last().context(format!(
                "device plugin {} ({}): {what} failed",
                self.name,
                describe(dev)
            )))
        }
    }
}

// Device pointers and streams are opaque handles passed through to the plugin, which owns
// their meaning; the trait's contract (pointers from this backend) makes the calls sound.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl DeviceApi for Plugin {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        match self.table.set_device {
            // SAFETY: plugin contract.
            Some(f) => self.check(unsafe { f(self.table.self_, dev) }, "set_device", dev),
            None => Ok(()),
        }
    }

    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<RetValue> {
        let f = self.table.get_attr.expect("checked at registration");
        let mut v = TVMValue::default();
        let mut code = tc::NULLPTR;
        // SAFETY: plugin contract; out slots are valid.
        let r = unsafe { f(self.table.self_, dev, kind as c_int, &mut v, &mut code) };
        self.check(r, "get_attr", dev)?;
        // SAFETY: the plugin wrote a value of `code` (strings live as long as the plugin).
        let rv = unsafe { RetValue::from_c_copy(v, code)? };
        Ok(match rv {
            RetValue::Object(_) => RetValue::Null,
            other => other,
        })
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        let f = self
            .table
            .alloc_data_space
            .expect("checked at registration");
        let mut p = std::ptr::null_mut();
        // SAFETY: plugin contract.
        let r = unsafe { f(self.table.self_, dev, nbytes, alignment, type_hint, &mut p) };
        self.check(r, "alloc_data_space", dev)?;
        Ok(p)
    }

    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        let f = self.table.free_data_space.expect("checked at registration");
        // SAFETY: plugin contract.
        self.check(
            unsafe { f(self.table.self_, dev, ptr) },
            "free_data_space",
            dev,
        )
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
        type_hint: DLDataType,
        stream: Stream,
    ) -> Result<()> {
        let f = self.table.copy_data.expect("checked at registration");
        // SAFETY: plugin contract; the caller guarantees the ranges.
        let r = unsafe {
            f(
                self.table.self_,
                from,
                from_offset as usize,
                to,
                to_offset as usize,
                nbytes,
                dev_from,
                dev_to,
                type_hint,
                stream,
            )
        };
        let dev = if dev_from.device_type == self.table.device_type {
            dev_from
        } else {
            dev_to
        };
        self.check(r, "copy_data", dev)
    }

    fn create_stream(&self, dev: DLDevice) -> Result<Stream> {
        match self.table.create_stream {
            Some(f) => {
                let mut s = std::ptr::null_mut();
                self.check(
                    // SAFETY: plugin contract.
                    unsafe { f(self.table.self_, dev, &mut s) },
                    "create_stream",
                    dev,
                )?;
                Ok(s)
            }
            None => Ok(std::ptr::null_mut()),
        }
    }

    unsafe fn free_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        match self.table.free_stream {
            // SAFETY: plugin contract.
            Some(f) => self.check(
                unsafe { f(self.table.self_, dev, stream) },
                "free_stream",
                dev,
            ),
            None => Ok(()),
        }
    }

    unsafe fn set_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        match self.table.set_stream {
            // SAFETY: plugin contract.
            Some(f) => self.check(
                unsafe { f(self.table.self_, dev, stream) },
                "set_stream",
                dev,
            ),
            None => Ok(()),
        }
    }

    unsafe fn stream_sync(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        match self.table.stream_sync {
            // SAFETY: plugin contract.
            Some(f) => self.check(
                unsafe { f(self.table.self_, dev, stream) },
                "stream_sync",
                dev,
            ),
            None => Ok(()),
        }
    }

    unsafe fn sync_stream_from_to(&self, dev: DLDevice, src: Stream, dst: Stream) -> Result<()> {
        match self.table.sync_stream_from_to {
            Some(f) => self.check(
                // SAFETY: plugin contract.
                unsafe { f(self.table.self_, dev, src, dst) },
                "sync_stream_from_to",
                dev,
            ),
            // SAFETY: forwarded contract.
            None => unsafe { self.stream_sync(dev, src) },
        }
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        match self.table.alloc_workspace {
            Some(f) => {
                let mut p = std::ptr::null_mut();
                // SAFETY: plugin contract.
                let r = unsafe { f(self.table.self_, dev, nbytes, type_hint, &mut p) };
                self.check(r, "alloc_workspace", dev)?;
                Ok(p)
            }
            None => self.alloc_data_space(
                dev,
                nbytes,
                crate::packed_func::tensor::ALLOC_ALIGNMENT,
                type_hint,
            ),
        }
    }

    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        match self.table.free_workspace {
            // SAFETY: plugin contract.
            Some(f) => self.check(
                unsafe { f(self.table.self_, dev, ptr) },
                "free_workspace",
                dev,
            ),
            // SAFETY: forwarded contract (the default workspace is data space).
            None => unsafe { self.free_data_space(dev, ptr) },
        }
    }
}
