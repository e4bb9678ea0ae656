//! Remote devices: device types `t + 128 * (session + 1)` route to the session's server.

use super::client::{self, session_of_device, strip_mask, ClientSession};
use super::codec::{code, WireTensor, WireValue};
use crate::device::{self, DeviceApi, DeviceAttr, Stream};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice, DL_CPU, RPC_SESS_MASK};
use crate::packed_func::value::RetValue;
use std::ffi::c_void;
use std::sync::{Arc, Once};

/// The device API of every remote device.
pub struct RpcDeviceApi;

/// Registers the remote device types with the device layer (once).
pub fn ensure_registered() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let api: Arc<dyn DeviceApi> = Arc::new(RpcDeviceApi);
        for s in 0..client::MAX_SESSIONS as i32 {
            for t in 0..RPC_SESS_MASK {
                device::register_backend(RPC_SESS_MASK * (s + 1) + t, api.clone());
            }
        }
    });
}

fn sess(dev: DLDevice) -> Result<(Arc<ClientSession>, DLDevice)> {
    Ok((session_of_device(dev.device_type)?, strip_mask(dev)))
}

fn handle(v: WireValue, what: &str) -> Result<u64> {
    match v {
        WireValue::Handle(h) => Ok(h),
        WireValue::Null => Ok(0),
        v => Err(Error::type_error_fmt(format_args!(
            "RPC: {what} replied with {}",
            v.kind()
        ))),
    }
}

impl DeviceApi for RpcDeviceApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        let (s, d) = sess(dev)?;
        s.syscall(code::DEV_SET_DEVICE, &[WireValue::Device(d)])
            .map(|_| ())
    }

    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<RetValue> {
        let (s, d) = sess(dev)?;
        if d.device_type == DL_CPU && kind == DeviceAttr::Exist {
            return Ok(RetValue::Int(1));
        }
        Ok(
            match s.syscall(
                code::DEV_GET_ATTR,
                &[WireValue::Device(d), WireValue::Int(kind as i64)],
            )? {
                WireValue::Int(i) => RetValue::Int(i),
                WireValue::Str(b) => RetValue::Str(String::from_utf8_lossy(&b).into_owned()),
                WireValue::Float(f) => RetValue::Float(f),
                WireValue::Null => RetValue::Null,
                v => {
                    return Err(Error::type_error_fmt(format_args!(
                        "RPC: DevGetAttr replied with {}",
                        v.kind()
                    )))
                }
            },
        )
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        let (s, d) = sess(dev)?;
        let h = handle(
            s.syscall(
                code::DEV_ALLOC_DATA,
                &[
                    WireValue::Device(d),
                    WireValue::Int(nbytes as i64),
                    WireValue::Int(alignment as i64),
                    WireValue::DataType(type_hint),
                ],
            )?,
            "DevAllocData",
        )?;
        Ok(client::new_space(&s, h, 0) as *mut c_void)
    }

    fn alloc_data_space_scope(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        scope: Option<&str>,
    ) -> Result<*mut c_void> {
        let (s, d) = sess(dev)?;
        let t = WireTensor {
            data: 0,
            device: d,
            dtype,
            shape: shape.to_vec(),
            byte_offset: 0,
        };
        let scope = match scope {
            Some(x) => WireValue::Str(x.as_bytes().to_vec()),
            None => WireValue::Null,
        };
        let h = handle(
            s.syscall(
                code::DEV_ALLOC_DATA_WITH_SCOPE,
                &[WireValue::Tensor(t), scope],
            )?,
            "DevAllocDataWithScope",
        )?;
        Ok(client::new_space(&s, h, 0) as *mut c_void)
    }

    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        let space = client::take_space(ptr).ok_or_else(|| {
            Error::value_fmt(format_args!(
                "RPC: {ptr:p} is not remote memory allocated here"
            ))
        })?;
        if space.nd_handle != 0 {
            space.sess.free_handle(
                space.nd_handle,
                crate::packed_func::types::type_code::NDARRAY_HANDLE,
            );
            return Ok(());
        }
        let d = strip_mask(dev);
        space
            .sess
            .syscall(
                code::DEV_FREE_DATA,
                &[WireValue::Device(d), WireValue::Handle(space.data)],
            )
            .map(|_| ())
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
        let remote_from = dev_from.device_type >= RPC_SESS_MASK;
        let remote_to = dev_to.device_type >= RPC_SESS_MASK;
        match (remote_from, remote_to) {
            (true, false) if dev_to.device_type == DL_CPU => {
                let (s, data) = client::with_space(from, |sp| (sp.sess.clone(), sp.data))?;
                // SAFETY: the caller guarantees `to + to_offset` holds nbytes.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut((to as *mut u8).add(to_offset as usize), nbytes)
                };
                s.copy_from_remote(dst, data, strip_mask(dev_from), from_offset)
            }
            (false, true) if dev_from.device_type == DL_CPU => {
                let (s, data) = client::with_space(to, |sp| (sp.sess.clone(), sp.data))?;
                // SAFETY: the caller guarantees `from + from_offset` holds nbytes.
                let src = unsafe {
                    std::slice::from_raw_parts(
                        (from as *const u8).add(from_offset as usize),
                        nbytes,
                    )
                };
                s.copy_to_remote(src, data, strip_mask(dev_to), to_offset)
            }
            (true, true)
                if dev_from.device_type / RPC_SESS_MASK == dev_to.device_type / RPC_SESS_MASK =>
            {
                let (s, fdata) = client::with_space(from, |sp| (sp.sess.clone(), sp.data))?;
                let tdata = client::with_space(to, |sp| sp.data)?;
                let t = |data, dev, off| {
                    WireValue::Tensor(WireTensor {
                        data,
                        device: strip_mask(dev),
                        dtype: DLDataType::new(1, 8, 1),
                        shape: vec![nbytes as i64],
                        byte_offset: off,
                    })
                };
                s.syscall(
                    code::COPY_AMONG_REMOTE,
                    &[
                        t(fdata, dev_from, from_offset),
                        t(tdata, dev_to, to_offset),
                        WireValue::Handle(stream as u64),
                    ],
                )
                .map(|_| ())
            }
            _ => Err(Error::value_fmt(format_args!(
                "RPC: cannot copy from {} to {} (only between a remote device and the local \
                 CPU, or within one session)",
                device::describe(dev_from),
                device::describe(dev_to)
            ))),
        }
    }

    fn create_stream(&self, dev: DLDevice) -> Result<Stream> {
        let (s, d) = sess(dev)?;
        let h = handle(
            s.syscall(code::DEV_CREATE_STREAM, &[WireValue::Device(d)])?,
            "DevCreateStream",
        )?;
        Ok(h as usize as Stream)
    }

    unsafe fn free_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        let (s, d) = sess(dev)?;
        s.syscall(
            code::DEV_FREE_STREAM,
            &[WireValue::Device(d), WireValue::Handle(stream as u64)],
        )
        .map(|_| ())
    }

    unsafe fn set_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        let (s, d) = sess(dev)?;
        s.syscall(
            code::DEV_SET_STREAM,
            &[WireValue::Device(d), WireValue::Handle(stream as u64)],
        )
        .map(|_| ())
    }

    fn current_stream(&self, dev: DLDevice) -> Stream {
        let Ok((s, d)) = sess(dev) else {
            return std::ptr::null_mut();
        };
        match s.syscall(code::DEV_GET_CURRENT_STREAM, &[WireValue::Device(d)]) {
            Ok(WireValue::Handle(h)) => h as usize as Stream,
            _ => std::ptr::null_mut(),
        }
    }

    unsafe fn stream_sync(&self, dev: DLDevice, stream: Stream) -> Result<()> {
        let (s, d) = sess(dev)?;
        s.syscall(
            code::DEV_STREAM_SYNC,
            &[WireValue::Device(d), WireValue::Handle(stream as u64)],
        )
        .map(|_| ())
    }
}
