//! The runtime's own global functions (`runtime.*`, `device_api.*`, loaders), registered when
//! the registry is first used.

use crate::device::{self, DeviceAttr};
use crate::ffi::error::{Error, Result};
use crate::ffi::registry::Builtins;
use crate::ffi::types::{DLDevice, DL_CPU};
use crate::ffi::value::{ArgValue, Args, RetValue};
use crate::module::{self, system_lib, Module, ModuleObj};
use crate::ndarray::{self, NDArrayObj};
use crate::object::containers::{ArrayObj, MapObj, ShapeTupleObj, StringObj};
use crate::object::{self, ObjectRef};

/// An argument as an object; strings become String objects, NULL becomes `None`.
fn arg_to_object(args: &Args<'_>, i: usize) -> Result<Option<ObjectRef>> {
    Ok(match args.get(i)? {
        ArgValue::Null => None,
        ArgValue::Object(o) => Some(o.to_ref()),
        ArgValue::Str(s) => Some(StringObj::from_bytes(s.to_bytes())),
        v => {
            return Err(Error::type_error(format!(
                "argument {i}: expected an object but got {}",
                v.kind_name()
            )))
        }
    })
}

fn index_arg(args: &Args<'_>, i: usize, len: usize, what: &str) -> Result<usize> {
    let idx = args.i64(i)?;
    if idx < 0 || idx as usize >= len {
        return Err(Error::internal(format!(
            "{what}: index {idx} out of range for size {len}"
        )));
    }
    Ok(idx as usize)
}

fn shape_arg(args: &Args<'_>, i: usize) -> Result<Vec<i64>> {
    Ok(args.downcast::<ShapeTupleObj>(i)?.dims().to_vec())
}

fn module_arg(args: &Args<'_>, i: usize) -> Result<Module> {
    Module::from_object(args.object_ref::<ModuleObj>(i)?)
}

fn containers(b: &mut Builtins<'_>) {
    b.add("runtime.String", |a, rv| {
        a.expect_len(1, "runtime.String")?;
        *rv = match a.get(0)? {
            ArgValue::Bytes(bytes) => StringObj::from_bytes(bytes),
            _ => StringObj::new_ref(a.str(0)?),
        }
        .into();
        Ok(())
    });
    b.add("runtime.GetFFIString", |a, rv| {
        a.expect_len(1, "runtime.GetFFIString")?;
        *rv = RetValue::Str(a.str(0)?.to_string());
        Ok(())
    });
    b.add("runtime.Array", |a, rv| {
        let items = (0..a.len())
            .map(|i| arg_to_object(&a, i))
            .collect::<Result<Vec<_>>>()?;
        *rv = ArrayObj::new_ref(items).into();
        Ok(())
    });
    b.add("runtime.ArraySize", |a, rv| {
        a.expect_len(1, "runtime.ArraySize")?;
        *rv = RetValue::Int(a.downcast::<ArrayObj>(0)?.items.len() as i64);
        Ok(())
    });
    b.add("runtime.ArrayGetItem", |a, rv| {
        a.expect_len(2, "runtime.ArrayGetItem")?;
        let arr = a.downcast::<ArrayObj>(0)?;
        let i = index_arg(&a, 1, arr.items.len(), "runtime.ArrayGetItem")?;
        *rv = match &arr.items[i] {
            Some(o) => RetValue::Object(o.clone()),
            None => RetValue::Null,
        };
        Ok(())
    });
    b.add("runtime.Map", |a, rv| {
        if a.len() % 2 != 0 {
            return Err(Error::value(
                "runtime.Map expects an even number of arguments (key, value, ...)",
            ));
        }
        let mut m = MapObj::default();
        for i in (0..a.len()).step_by(2) {
            let k =
                arg_to_object(&a, i)?.ok_or_else(|| Error::value("runtime.Map: a key is NULL"))?;
            m.insert(k, arg_to_object(&a, i + 1)?);
        }
        *rv = ObjectRef::new(m).into();
        Ok(())
    });
    b.add("runtime.MapSize", |a, rv| {
        a.expect_len(1, "runtime.MapSize")?;
        *rv = RetValue::Int(a.downcast::<MapObj>(0)?.len() as i64);
        Ok(())
    });
    b.add("runtime.MapGetItem", |a, rv| {
        a.expect_len(2, "runtime.MapGetItem")?;
        let m = a.downcast::<MapObj>(0)?;
        let k =
            arg_to_object(&a, 1)?.ok_or_else(|| Error::value("runtime.MapGetItem: NULL key"))?;
        *rv = match m.get(&k) {
            Some(Some(v)) => RetValue::Object(v.clone()),
            Some(None) => RetValue::Null,
            None => return Err(Error::internal("runtime.MapGetItem: key is not in the map")),
        };
        Ok(())
    });
    b.add("runtime.MapCount", |a, rv| {
        a.expect_len(2, "runtime.MapCount")?;
        let m = a.downcast::<MapObj>(0)?;
        let k = arg_to_object(&a, 1)?.ok_or_else(|| Error::value("runtime.MapCount: NULL key"))?;
        *rv = RetValue::Int(m.get(&k).is_some() as i64);
        Ok(())
    });
    b.add("runtime.MapItems", |a, rv| {
        a.expect_len(1, "runtime.MapItems")?;
        let m = a.downcast::<MapObj>(0)?;
        let mut items = Vec::with_capacity(m.len() * 2);
        for (k, v) in m.iter() {
            items.push(Some(k.clone()));
            items.push(v.clone());
        }
        *rv = ArrayObj::new_ref(items).into();
        Ok(())
    });
    b.add("runtime.ShapeTuple", |a, rv| {
        let dims = (0..a.len()).map(|i| a.i64(i)).collect::<Result<Vec<_>>>()?;
        *rv = ShapeTupleObj::new_ref(&dims).into();
        Ok(())
    });
    b.add("runtime.GetShapeTupleSize", |a, rv| {
        a.expect_len(1, "runtime.GetShapeTupleSize")?;
        *rv = RetValue::Int(a.downcast::<ShapeTupleObj>(0)?.dims().len() as i64);
        Ok(())
    });
    b.add("runtime.GetShapeTupleElem", |a, rv| {
        a.expect_len(2, "runtime.GetShapeTupleElem")?;
        let s = a.downcast::<ShapeTupleObj>(0)?.dims();
        let i = index_arg(&a, 1, s.len(), "runtime.GetShapeTupleElem")?;
        *rv = RetValue::Int(s[i]);
        Ok(())
    });
    b.add("runtime.ObjectPtrHash", |a, rv| {
        a.expect_len(1, "runtime.ObjectPtrHash")?;
        let o = a
            .object(0)?
            .ok_or_else(|| Error::value("runtime.ObjectPtrHash: NULL object"))?;
        *rv = RetValue::Int(o.as_ptr() as usize as i64);
        Ok(())
    });
    b.add("runtime.DumpTypeTable", |a, _rv| {
        let min = if a.is_empty() { 0 } else { a.i64(0)? };
        eprint!("{}", object::type_table::dump(min));
        Ok(())
    });
}

fn ndarrays(b: &mut Builtins<'_>) {
    b.add("runtime.TVMArrayAllocWithScope", |a, rv| {
        if a.len() < 3 {
            return Err(Error::value(
                "runtime.TVMArrayAllocWithScope expects (shape, dtype, device[, scope])",
            ));
        }
        let shape = shape_arg(&a, 0)?;
        let dtype = a.dtype(1)?;
        let dev = a.device(2)?;
        let scope = if a.len() > 3 && !matches!(a.get(3)?, ArgValue::Null) {
            Some(a.str(3)?)
        } else {
            None
        };
        *rv = NDArrayObj::empty(&shape, dtype, dev, scope)?.into();
        Ok(())
    });
    b.add("runtime.TVMArrayCreateView", |a, rv| {
        if a.len() < 2 || a.len() > 4 {
            return Err(Error::value(
                "runtime.TVMArrayCreateView expects (array, shape[, dtype[, byte_offset]])",
            ));
        }
        let base = a.object_ref::<NDArrayObj>(0)?;
        let shape = shape_arg(&a, 1)?;
        let dtype = if a.len() > 2 {
            a.dtype(2)?
        } else {
            base.downcast_ref::<NDArrayObj>().expect("checked").dtype()
        };
        let offset = if a.len() > 3 { a.i64(3)? } else { 0 };
        if offset < 0 {
            return Err(Error::value(
                "runtime.TVMArrayCreateView: negative byte offset",
            ));
        }
        *rv = ndarray::create_view(&base, &shape, dtype, offset as u64)?.into();
        Ok(())
    });
}

fn devices(b: &mut Builtins<'_>) {
    b.add("runtime.GetDeviceAttr", |a, rv| {
        a.expect_len(3, "runtime.GetDeviceAttr")?;
        let dev = DLDevice::new(a.i64(0)? as i32, a.i64(1)? as i32);
        let kind = DeviceAttr::from_i32(a.i64(2)? as i32)?;
        if kind == DeviceAttr::Exist && !device::has_backend(dev.device_type) {
            if device::type_name(dev.device_type).is_none() {
                return Err(Error::value(format!(
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
    b.add("runtime.TVMSetStream", |a, _rv| {
        a.expect_len(3, "runtime.TVMSetStream")?;
        let dev = DLDevice::new(a.i64(0)? as i32, a.i64(1)? as i32);
        device::api(dev)?.set_stream(dev, a.handle(2)?)
    });
    b.add("__tvm_set_device", |a, _rv| {
        a.expect_len(2, "__tvm_set_device")?;
        let dev = DLDevice::new(a.i64(0)? as i32, a.i64(1)? as i32);
        device::api(dev)?.set_device(dev)
    });
    b.add("device_api.cpu", |_a, rv| {
        *rv = RetValue::Handle(&device::cpu::CPU as *const _ as *mut std::ffi::c_void);
        Ok(())
    });
    b.add(
        "runtime.LoadDevicePlugin",
        device::plugin::load_plugin_global,
    );
    b.add("runtime.DeviceTypeToName", |a, rv| {
        let t = a.i64(0)? as i32;
        *rv = RetValue::Str(device::type_name(t).ok_or_else(|| {
            Error::value(format!(
                "device type {t} has no name (no backend or plugin)"
            ))
        })?);
        Ok(())
    });
    b.add("runtime.DeviceNameToType", |a, rv| {
        let n = a.str(0)?;
        *rv = RetValue::Int(
            device::type_from_name(n)
                .ok_or_else(|| Error::value(format!("unknown device name '{n}'")))?
                as i64,
        );
        Ok(())
    });
    b.add("runtime.RuntimeEnabled", |a, rv| {
        a.expect_len(1, "runtime.RuntimeEnabled")?;
        let target = a.str(0)?;
        // As the reference: "cpu" is always on; other targets are on when the function that
        // serves them is registered (device APIs for devices, code generators otherwise).
        let device = |t: i32| device::has_backend(t);
        let enabled = match target {
            "cpu" => true,
            "cuda" | "gpu" | "nvptx" => device(crate::ffi::types::DL_CUDA),
            "cl" | "opencl" => device(crate::ffi::types::DL_OPENCL),
            "mtl" | "metal" => device(crate::ffi::types::DL_METAL),
            "vulkan" => device(crate::ffi::types::DL_VULKAN),
            "rocm" => device(crate::ffi::types::DL_ROCM),
            "hexagon" => device(crate::ffi::types::DL_HEXAGON),
            "stackvm" => registry_has("target.build.stackvm"),
            "tflite" => registry_has("target.runtime.tflite"),
            "rpc" => registry_has("device_api.rpc"),
            t if t.starts_with("llvm") => registry_has("codegen.llvm_target_enabled"),
            t => match device::plugin::type_of(t) {
                Some(_) => true,
                None => {
                    return Err(Error::tvm(format!("Unknown optional runtime {t}")));
                }
            },
        };
        *rv = RetValue::Int(enabled as i64);
        Ok(())
    });
    let _ = DL_CPU;
}

fn registry_has(name: &str) -> bool {
    crate::ffi::registry::get(name).is_some()
}

fn threads(b: &mut Builtins<'_>) {
    b.add("runtime.NumThreads", |_a, rv| {
        *rv = RetValue::Int(crate::threading::num_threads() as i64);
        Ok(())
    });
    b.add("runtime.config_threadpool", |a, _rv| {
        if a.len() < 2 {
            return Err(Error::value(
                "runtime.config_threadpool expects (mode, nthreads[, cpus...])",
            ));
        }
        let mode = a.i64(0)? as i32;
        let n = a.i64(1)? as i32;
        let cpus = (2..a.len())
            .map(|i| a.i64(i).map(|c| c as u32))
            .collect::<Result<Vec<_>>>()?;
        crate::threading::config_threadpool(mode, n, &cpus);
        Ok(())
    });
}

fn modules(b: &mut Builtins<'_>) {
    b.add("runtime.SystemLib", |a, rv| {
        let prefix = if a.is_empty() { "" } else { a.str(0)? };
        *rv = system_lib::system_lib(prefix)?.into_object().into();
        Ok(())
    });
    b.add("runtime.ModuleGetTypeKey", |a, rv| {
        *rv = RetValue::Str(module_arg(&a, 0)?.type_key().to_string());
        Ok(())
    });
    b.add("runtime.ModuleGetImport", |a, rv| {
        let m = module_arg(&a, 0)?;
        let imports = m.imports();
        let i = index_arg(&a, 1, imports.len(), "runtime.ModuleGetImport")?;
        *rv = imports[i].clone().into_object().into();
        Ok(())
    });
    b.add("runtime.ModuleImportsSize", |a, rv| {
        *rv = RetValue::Int(module_arg(&a, 0)?.imports().len() as i64);
        Ok(())
    });
    b.add("runtime.ModuleClearImports", |a, _rv| {
        module_arg(&a, 0)?.clear_imports();
        Ok(())
    });
    b.add("runtime.ModuleGetFunction", |a, rv| {
        let m = module_arg(&a, 0)?;
        let name = a.str(1)?;
        let q = if a.len() > 2 { a.i64(2)? != 0 } else { false };
        *rv = match m.get_function(name, q)? {
            Some(f) => f.into_object().into(),
            None => RetValue::Null,
        };
        Ok(())
    });
    b.add("runtime.ModuleImplementsFunction", |a, rv| {
        let m = module_arg(&a, 0)?;
        let name = a.str(1)?;
        let q = if a.len() > 2 { a.i64(2)? != 0 } else { false };
        let mut found = m.node().implements_function(name);
        if !found && q {
            found = m.get_function(name, true)?.is_some();
        }
        *rv = RetValue::Int(found as i64);
        Ok(())
    });
    b.add("runtime.ModuleGetPropertyMask", |a, rv| {
        *rv = RetValue::Int(module_arg(&a, 0)?.node().property_mask() as i64);
        Ok(())
    });
    b.add("runtime.ModuleGetFormat", |a, rv| {
        *rv = RetValue::Str(module_arg(&a, 0)?.node().get_format()?);
        Ok(())
    });
    b.add("runtime.ModuleGetSource", |a, rv| {
        let m = module_arg(&a, 0)?;
        let fmt = if a.len() > 1 { a.str(1)? } else { "" };
        *rv = RetValue::Str(m.node().get_source(fmt)?);
        Ok(())
    });
    b.add("runtime.ModuleSaveToFile", |a, _rv| {
        a.expect_len(3, "runtime.ModuleSaveToFile")?;
        module_arg(&a, 0)?.node().save_to_file(a.str(1)?, a.str(2)?)
    });
    b.add("runtime.ModuleLoadFromFile", |a, rv| {
        let file = a.str(0)?;
        let fmt = if a.len() > 1 { a.str(1)? } else { "" };
        *rv = module::load_from_file(file, fmt)?.into_object().into();
        Ok(())
    });
    b.add("runtime.module.loadfile_so", |a, rv| {
        let file = a.str(0)?;
        *rv = module::dso::load(file)?.into_object().into();
        Ok(())
    });
}

/// Registers every built-in global function.
pub fn register_all(b: &mut Builtins<'_>) {
    containers(b);
    ndarrays(b);
    devices(b);
    threads(b);
    modules(b);
    crate::device::vulkan::register(b);
    crate::executor::register(b);
    crate::device::cuda::register(b);
}
