//! The registered plugins by device type, and the validation of a table before it is
//! registered.

use super::abi::{TVMDevicePlugin, ABI_VERSION, MIN_PLUGIN_DEVICE_TYPE};
use super::backend::Plugin;
use super::module::module_from_bytes;
use crate::module::blob::with_lent_reader;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry;
use crate::packed_func::types::RPC_SESS_MASK;
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::{Arc, LazyLock, RwLock};

struct Registry {
    by_type: HashMap<i32, Arc<Plugin>>,
}

static PLUGINS: LazyLock<RwLock<Registry>> = LazyLock::new(|| {
    RwLock::new(Registry {
        by_type: HashMap::new(),
    })
});

/// The plugin name of a device type, if a plugin claims it.
pub fn name_of(device_type: i32) -> Option<String> {
    let r = PLUGINS.read().unwrap_or_else(|e| e.into_inner());
    r.by_type.get(&device_type).map(|p| p.name.clone())
}

/// The device type a plugin name claims.
pub fn type_of(name: &str) -> Option<i32> {
    let r = PLUGINS.read().unwrap_or_else(|e| e.into_inner());
    r.by_type
        .iter()
        .find(|(_, p)| p.name == name)
        .map(|(&t, _)| t)
}

/// Registered plugins as (device type, name).
pub fn list() -> Vec<(i32, String)> {
    let r = PLUGINS.read().unwrap_or_else(|e| e.into_inner());
    let mut v: Vec<_> = r
        .by_type
        .iter()
        .map(|(&t, p)| (t, p.name.clone()))
        .collect();
    v.sort_unstable();
    v
}

/// Validates and registers a plugin table (copied). `lib` keeps a plugin library loaded.
///
/// # Safety
/// `table` must be NULL or point to a table following the plugin ABI.
pub unsafe fn register(
    table: *const TVMDevicePlugin,
    lib: Option<libloading::Library>,
) -> Result<()> {
    if table.is_null() {
        return Err(Error::value("device plugin: the table is NULL"));
    }
    // SAFETY: caller contract; read the version fields before trusting the size.
    let (version, size) = unsafe { ((*table).abi_version, (*table).struct_size) };
    if version != ABI_VERSION {
        return Err(Error::value_fmt(format_args!(
            "device plugin: ABI version {version} is not supported (this runtime speaks version {ABI_VERSION})"
        )));
    }
    if (size as usize) < std::mem::size_of::<TVMDevicePlugin>() {
        return Err(Error::value_fmt(format_args!(
            "device plugin: struct_size {size} is smaller than the version {ABI_VERSION} table ({} bytes)",
            std::mem::size_of::<TVMDevicePlugin>()
        )));
    }
    // SAFETY: version and size checked.
    let t = unsafe { *table };
    if t.name.is_null() {
        return Err(Error::value("device plugin: name is NULL"));
    }
    // SAFETY: plugin contract: a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(t.name) }
        .to_str()
        .map_err(|_| Error::value("device plugin: name is not UTF-8"))?
        .to_string();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Error::value_fmt(format_args!(
            "device plugin '{name}': the name must be non-empty letters, digits or '_'"
        )));
    }
    let ty = t.device_type;
    if !(MIN_PLUGIN_DEVICE_TYPE..RPC_SESS_MASK).contains(&ty) {
        return Err(Error::value_fmt(format_args!(
            "device plugin {name}: device type {ty} is outside the extension range \
             [{MIN_PLUGIN_DEVICE_TYPE}, {RPC_SESS_MASK})"
        )));
    }
    let missing: Vec<&str> = [
        ("get_attr", t.get_attr.is_none()),
        ("alloc_data_space", t.alloc_data_space.is_none()),
        ("free_data_space", t.free_data_space.is_none()),
        ("copy_data", t.copy_data.is_none()),
    ]
    .iter()
    .filter(|(_, m)| *m)
    .map(|(n, _)| *n)
    .collect();
    if !missing.is_empty() {
        return Err(Error::value_fmt(format_args!(
            "device plugin {name}: required functions missing: {}",
            missing.join(", ")
        )));
    }
    let format = if t.module_format.is_null() {
        None
    } else {
        // SAFETY: plugin contract.
        let f = unsafe { CStr::from_ptr(t.module_format) }
            .to_str()
            .map_err(|_| {
                Error::value_fmt(format_args!(
                    "device plugin {name}: module_format is not UTF-8"
                ))
            })?
            .to_string();
        if t.load_module.is_none() || t.module_get_function.is_none() || t.module_free.is_none() {
            return Err(Error::value_fmt(format_args!(
                "device plugin {name}: module_format '{f}' needs load_module, \
                 module_get_function and module_free"
            )));
        }
        Some(f)
    };
    {
        let r = PLUGINS.read().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = r.by_type.get(&ty) {
            return Err(Error::value_fmt(format_args!(
                "device plugin {name}: device type {ty} is already taken by plugin {}",
                p.name
            )));
        }
        if r.by_type.values().any(|p| p.name == name) {
            return Err(Error::value_fmt(format_args!(
                "device plugin {name}: a plugin of that name is already registered"
            )));
        }
    }
    if crate::device::has_backend(ty) {
        return Err(Error::value_fmt(format_args!(
            "device plugin {name}: device type {ty} is already taken by a built-in backend"
        )));
    }
    let plugin = Arc::new(Plugin {
        table: t,
        name: name.clone(),
        format: format.clone(),
        _lib: lib,
    });
    PLUGINS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .by_type
        .insert(ty, plugin.clone());
    crate::device::register_backend(ty, plugin.clone());
    if let Some(fmt) = format {
        let p = plugin.clone();
        let who = format!("runtime.module.loadbinary_{fmt}");
        registry::register_rust(&who.clone(), move |a, rv| {
            let m = with_lent_reader(a.handle(0)?, &who, |r| {
                module_from_bytes(&p, r.read_blob("a plugin module")?)
            })?;
            *rv = m.into_object().into();
            Ok(())
        });
        let p = plugin.clone();
        registry::register_rust(&format!("runtime.module.loadfile_{fmt}"), move |a, rv| {
            let path = a.str(0)?;
            let file = crate::packed_func::confine::resolve(path, "loadfile (plugin)")?;
            let bytes = std::fs::read(file).map_err(|e| {
                Error::value_fmt(format_args!("cannot read module file {path}: {e}"))
            })?;
            *rv = module_from_bytes(&p, &bytes)?.into_object().into();
            Ok(())
        });
    }
    Ok(())
}
