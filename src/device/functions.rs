//! The device functions (`runtime.GetDeviceAttr`, `device_api.cpu`, device names, ...),
//! registered by this room.

use crate::device::{self, DeviceAttr};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::{self, Registrar};
use crate::packed_func::types::DLDevice;
use crate::packed_func::value::{Args, RawHandle, RetValue};

/// Checks that `name` got `n` arguments and reads the device of the first two (one
/// out-of-line copy for the functions that start so).
#[inline(never)]
fn device_args(a: &Args<'_>, n: usize, name: &str) -> Result<DLDevice> {
    a.expect_len(n, name)?;
    Ok(DLDevice::new(a.i64(0)? as i32, a.i64(1)? as i32))
}

/// Registers the device functions.
pub(crate) fn register(r: &mut Registrar) {
    r.add("runtime.GetDeviceAttr", |a, rv| {
        let dev = device_args(&a, 3, "runtime.GetDeviceAttr")?;
        let kind = DeviceAttr::from_i32(a.i64(2)? as i32)?;
        if kind == DeviceAttr::Exist && !device::has_backend(dev.device_type) {
            if device::type_name(dev.device_type).is_none() {
                return Err(Error::value_fmt(format_args!(
                    "runtime.GetDeviceAttr: unknown device type {}",
                    dev.device_type
                )));
            }
            *rv = RetValue::Int(0);
            return Ok(());
        }
        *rv = device::api(dev)?.get_attr(dev, kind)?;
        Ok(())
    });
    r.add("runtime.TVMSetStream", |a, _rv| {
        let dev = device_args(&a, 3, "runtime.TVMSetStream")?;
        let s = a.handle(2)?;
        if !s.is_null() && !device::streams::is_live(dev, s) {
            return Err(Error::value_fmt(format_args!(
                "runtime.TVMSetStream: the handle is not a live stream of {} created by this \
                 runtime (TVMStreamCreate)",
                device::describe(dev)
            )));
        }
        // SAFETY: NULL, or a stream of this device that the runtime created and has not freed.
        unsafe { device::api(dev)?.set_stream(dev, s) }
    });
    r.add("__tvm_set_device", |a, _rv| {
        let dev = device_args(&a, 2, "__tvm_set_device")?;
        device::api(dev)?.set_device(dev)
    });
    r.add("device_api.cpu", |_a, rv| {
        // SAFETY: a static, alive for the whole process.
        *rv = RetValue::Handle(unsafe {
            RawHandle::new(&device::cpu::CPU as *const _ as *mut std::ffi::c_void)
        });
        Ok(())
    });
    r.add(
        "runtime.LoadDevicePlugin",
        device::plugin::load_plugin_global,
    );
    r.add("runtime.DeviceTypeToName", |a, rv| {
        let t = a.i64(0)? as i32;
        *rv = RetValue::Str(device::type_name(t).ok_or_else(|| {
            Error::value_fmt(format_args!(
                "device type {t} has no name (no backend or plugin)"
            ))
        })?);
        Ok(())
    });
    r.add("runtime.DeviceNameToType", |a, rv| {
        let n = a.str(0)?;
        *rv = RetValue::Int(
            device::type_from_name(n)
                .ok_or_else(|| Error::value_fmt(format_args!("unknown device name '{n}'")))?
                as i64,
        );
        Ok(())
    });
    r.add("runtime.RuntimeEnabled", |a, rv| {
        a.expect_len(1, "runtime.RuntimeEnabled")?;
        let target = a.str(0)?;
        // As the reference: "cpu" is always on; other targets are on when the function that
        // serves them is registered (device APIs for devices, code generators otherwise).
        let device = |t: i32| device::has_backend(t);
        let enabled = match target {
            "cpu" => true,
            "cuda" | "gpu" | "nvptx" => device(crate::packed_func::types::DL_CUDA),
            "cl" | "opencl" => device(crate::packed_func::types::DL_OPENCL),
            "mtl" | "metal" => device(crate::packed_func::types::DL_METAL),
            "vulkan" => device(crate::packed_func::types::DL_VULKAN),
            "rocm" => device(crate::packed_func::types::DL_ROCM),
            "hexagon" => device(crate::packed_func::types::DL_HEXAGON),
            "stackvm" => registry_has("target.build.stackvm"),
            "tflite" => registry_has("target.runtime.tflite"),
            "rpc" => registry_has("device_api.rpc"),
            t if t.starts_with("llvm") => registry_has("codegen.llvm_target_enabled"),
            t => match device::plugin::type_of(t) {
                Some(_) => true,
                None => {
                    return Err(Error::tvm_fmt(format_args!("Unknown optional runtime {t}")));
                }
            },
        };
        *rv = RetValue::Int(enabled as i64);
        Ok(())
    });
}

fn registry_has(name: &str) -> bool {
    registry::contains(name)
}
