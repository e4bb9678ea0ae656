//! How plugins arrive, each an explicit step: a library loaded by path
//! ([`load_library`], `TVMDeviceLoadPlugin`, `runtime.LoadDevicePlugin`), the libraries in
//! `TVM_DEVICE_PLUGINS` (loaded once, at registry start-up), and `device_api.<name>`
//! functions (adopted when they are registered: the registry calls a watcher with no lock
//! held). Nothing is discovered as a side effect of a lookup or of formatting a message.

use super::abi::TVMDevicePlugin;
use super::registry::register;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry::{self, Registrar};
use crate::packed_func::value::{ArgValue, RetValue};
use std::collections::HashSet;
use std::sync::Mutex;

/// Loads a plugin library and registers the table its `TVMDevicePluginInit` returns.
pub fn load_library(path: &str) -> Result<()> {
    // SAFETY: loading runs the library's initialisers, the plugin author's responsibility.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| Error::value_fmt(format_args!("cannot load device plugin {path}: {e}")))?;
    // SAFETY: the ABI names this symbol and its signature.
    let init: libloading::Symbol<'_, unsafe extern "C" fn() -> *const TVMDevicePlugin> =
        unsafe { lib.get(b"TVMDevicePluginInit\0") }.map_err(|_| {
            Error::value_fmt(format_args!(
                "{path} is not a device plugin: it exports no TVMDevicePluginInit"
            ))
        })?;
    // SAFETY: plugin contract.
    let table = unsafe { init() };
    // The symbol borrows `lib`; copy the pointer out before moving the library.
    let table = table as usize as *const TVMDevicePlugin;
    // SAFETY: the table follows the ABI (validated inside).
    unsafe { register(table, Some(lib)) }.map_err(|e| e.context(path))
}

/// Arguments of the global `runtime.LoadDevicePlugin`.
pub(crate) fn load_plugin_global(
    a: crate::packed_func::Args<'_>,
    _rv: &mut RetValue,
) -> Result<()> {
    match a.get(0)? {
        ArgValue::Str(_) => load_library(&crate::packed_func::confine::resolve_str(
            a.str(0)?,
            "runtime.LoadDevicePlugin",
        )?),
        // An opaque handle cannot be vouched for as a plugin table (any handle a function
        // returned could be passed here), so a table is registered from C only, through
        // `TVMDeviceRegisterPlugin`, whose contract the C caller keeps.
        ArgValue::Handle(_) => Err(Error::value(
            "runtime.LoadDevicePlugin: a plugin table is not taken by address here (give the \
             plugin library's path, or register the table from C with TVMDeviceRegisterPlugin)",
        )),
        v => Err(Error::type_error_fmt(format_args!(
            "runtime.LoadDevicePlugin expects a plugin library's path, got {}",
            v.kind_name()
        ))),
    }
}

/// Names of the `device_api.<name>` functions already adopted (a re-registration of the same
/// name is not adopted twice).
static ADOPTED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Adopts a `device_api.<name>` function as a plugin when it returns a plugin table: called
/// by the registry when such a function is registered, with no registry lock held. Names of
/// built-in devices (`device_api.cpu`, `device_api.cuda.*`, ...) and functions that return no
/// handle are not plugins and are left alone; a table that fails validation is an error of
/// the registration.
fn adopt(name: &str, f: &Function) -> Result<()> {
    let Some(rest) = name.strip_prefix("device_api.") else {
        return Ok(());
    };
    let dev = rest.split('.').next().unwrap_or_default();
    if crate::device::builtin_type_from_name(dev).is_some() || rest.contains('.') {
        return Ok(());
    }
    let fresh = ADOPTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert(name.to_string());
    if !fresh {
        return Ok(());
    }
    // Only a C function's handle follows the plugin ABI by its registrant's contract: a Rust
    // closure may return any handle it was given (`device_api.cpu`'s, a stream), which safe
    // code must not be able to have read as a table.
    if !matches!(
        f.obj().imp(),
        crate::packed_func::function::FuncImpl::C { .. }
    ) {
        return Ok(());
    }
    match f.call(&[]) {
        Ok(RetValue::Handle(h)) if !h.is_null() => {
            // SAFETY: a device_api.<name> function returning a handle follows the plugin ABI
            // (validated inside).
            unsafe { register(h.as_ptr() as *const TVMDevicePlugin, None) }
                .map_err(|e| e.context(name))
        }
        _ => Ok(()),
    }
}

/// Loads the libraries listed in `TVM_DEVICE_PLUGINS` (colon-separated); a library that
/// fails is reported on stderr and skipped.
fn load_env_plugins() {
    let Ok(list) = std::env::var("TVM_DEVICE_PLUGINS") else {
        return;
    };
    for path in list.split(':').filter(|p| !p.is_empty()) {
        if let Err(e) = load_library(path) {
            eprintln!("tvm-runtime: TVM_DEVICE_PLUGINS: {e}");
        }
    }
}

/// The device room's start-up step for plugins (run once, by the registry's start-up): loads
/// `TVM_DEVICE_PLUGINS` and watches for `device_api.<name>` registrations.
pub(crate) fn register_discovery(r: &mut Registrar) {
    r.watch("device_api.", adopt);
    load_env_plugins();
}

/// Makes sure the start-up discovery has run (it runs once, with the registry's start-up):
/// the explicit step for code that reads the plugin list before using the registry.
pub fn discover() {
    registry::start();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packed_func::types::DLDevice;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A C callback returning its resource as a handle (the slot is the `RetValue` that
    /// [`Function`]'s C calls pass).
    unsafe extern "C" fn return_resource(
        _args: *mut crate::packed_func::types::TVMValue,
        _codes: *mut std::ffi::c_int,
        _n: std::ffi::c_int,
        ret: *mut std::ffi::c_void,
        resource: *mut std::ffi::c_void,
    ) -> std::ffi::c_int {
        // SAFETY: `ret` is the caller's RetValue slot; the resource is the handle to return.
        unsafe {
            *(ret as *mut RetValue) = RetValue::Handle(crate::packed_func::RawHandle::new(resource))
        };
        0
    }

    #[test]
    fn device_api_functions_are_adopted_when_registered_and_only_then() {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        // A Rust closure is not a plugin: never called by the discovery, whatever it returns.
        let f = Function::from_rust(|_a, rv| {
            CALLS.fetch_add(1, Ordering::SeqCst);
            *rv = RetValue::Int(7);
            Ok(())
        });
        registry::register("device_api.discovery_test_int", f, true).unwrap();
        assert_eq!(CALLS.load(Ordering::SeqCst), 0);
        // Lookups and messages never call out.
        let dev = DLDevice::new(47, 0);
        assert!(crate::device::describe(dev).contains("47"));
        assert!(crate::device::type_from_name("discovery_test_int").is_none());
        assert!(crate::device::api(dev).is_err());
        assert_eq!(CALLS.load(Ordering::SeqCst), 0);

        // A handle that is not a valid table: the registration reports it, naming the function.
        let bad = Box::leak(Box::new(TVMDevicePlugin {
            abi_version: 999,
            struct_size: 0,
            name: std::ptr::null(),
            device_type: 0,
            self_: std::ptr::null_mut(),
            get_attr: None,
            set_device: None,
            alloc_data_space: None,
            free_data_space: None,
            copy_data: None,
            stream_sync: None,
            alloc_workspace: None,
            free_workspace: None,
            create_stream: None,
            free_stream: None,
            set_stream: None,
            sync_stream_from_to: None,
            module_format: std::ptr::null(),
            load_module: None,
            module_get_function: None,
            module_free: None,
            release: None,
        })) as *mut TVMDevicePlugin as usize;
        // SAFETY: the callback returns its resource, a table leaked above (alive for the rest
        // of the process), and sets no error.
        let f = unsafe { Function::from_c(return_resource, bad as *mut std::ffi::c_void, None) };
        let e = registry::register("device_api.discovery_test_bad", f, true).unwrap_err();
        assert!(
            e.message.contains("device_api.discovery_test_bad") && e.message.contains("999"),
            "{e}"
        );
        // Names of built-in devices are not plugins and are not called.
        let f = Function::from_rust(|_a, _rv| panic!("a built-in device_api is not adopted"));
        registry::register("device_api.opencl", f, true).unwrap();
        assert!(registry::remove("device_api.opencl"));
    }
}
