//! Device plugins: devices added at run time through a versioned C ABI
//! (`include/tvm/runtime/device_plugin.h`), without rebuilding the runtime.

use super::{describe, DeviceApi, DeviceAttr, Stream};
use crate::module::blob::BlobReader;
use crate::module::{Module, ModuleNode};
use crate::object::{Object, ObjectRef};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry;
use crate::packed_func::types::{type_code as tc, DLDataType, DLDevice, TVMValue, RPC_SESS_MASK};
use crate::packed_func::value::{ArgValue, RetValue};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Arc, LazyLock, Mutex, Once, RwLock};

/// The ABI version of [`TVMDevicePlugin`].
pub const ABI_VERSION: u32 = 1;
/// Lowest device type a plugin may claim.
pub const MIN_PLUGIN_DEVICE_TYPE: i32 = 32;

/// The plugin function table (`TVMDevicePlugin` in `device_plugin.h`).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub struct TVMDevicePlugin {
    pub abi_version: u32,
    pub struct_size: u32,
    pub name: *const c_char,
    pub device_type: i32,
    pub self_: *mut c_void,
    pub get_attr: Option<
        unsafe extern "C" fn(*mut c_void, DLDevice, c_int, *mut TVMValue, *mut c_int) -> c_int,
    >,
    pub set_device: Option<unsafe extern "C" fn(*mut c_void, DLDevice) -> c_int>,
    pub alloc_data_space: Option<
        unsafe extern "C" fn(
            *mut c_void,
            DLDevice,
            usize,
            usize,
            DLDataType,
            *mut *mut c_void,
        ) -> c_int,
    >,
    pub free_data_space: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub copy_data: Option<
        unsafe extern "C" fn(
            *mut c_void,
            *const c_void,
            usize,
            *mut c_void,
            usize,
            usize,
            DLDevice,
            DLDevice,
            DLDataType,
            *mut c_void,
        ) -> c_int,
    >,
    pub stream_sync: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub alloc_workspace: Option<
        unsafe extern "C" fn(*mut c_void, DLDevice, usize, DLDataType, *mut *mut c_void) -> c_int,
    >,
    pub free_workspace: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub create_stream:
        Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut *mut c_void) -> c_int>,
    pub free_stream: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub set_stream: Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void) -> c_int>,
    pub sync_stream_from_to:
        Option<unsafe extern "C" fn(*mut c_void, DLDevice, *mut c_void, *mut c_void) -> c_int>,
    pub module_format: *const c_char,
    pub load_module:
        Option<unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut *mut c_void) -> c_int>,
    pub module_get_function: Option<
        unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_char, *mut *mut c_void) -> c_int,
    >,
    pub module_free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
    pub release: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// A registered plugin: its table, names, and the library that holds its code.
pub struct Plugin {
    table: TVMDevicePlugin,
    name: String,
    format: Option<String>,
    _lib: Option<libloading::Library>,
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

    fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
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

    fn free_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
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

    fn set_stream(&self, dev: DLDevice, stream: Stream) -> Result<()> {
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

    fn stream_sync(&self, dev: DLDevice, stream: Stream) -> Result<()> {
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

    fn sync_stream_from_to(&self, dev: DLDevice, src: Stream, dst: Stream) -> Result<()> {
        match self.table.sync_stream_from_to {
            Some(f) => self.check(
                // SAFETY: plugin contract.
                unsafe { f(self.table.self_, dev, src, dst) },
                "sync_stream_from_to",
                dev,
            ),
            None => self.stream_sync(dev, src),
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

    fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        match self.table.free_workspace {
            // SAFETY: plugin contract.
            Some(f) => self.check(
                unsafe { f(self.table.self_, dev, ptr) },
                "free_workspace",
                dev,
            ),
            None => self.free_data_space(dev, ptr),
        }
    }
}

/// A module served by a plugin.
struct PluginModule {
    plugin: Arc<Plugin>,
    state: *mut c_void,
    format: String,
}

// SAFETY: the plugin ABI requires module functions to be callable from any thread.
unsafe impl Send for PluginModule {}
// SAFETY: as above.
unsafe impl Sync for PluginModule {}

impl Drop for PluginModule {
    fn drop(&mut self) {
        if let Some(free) = self.plugin.table.module_free {
            // SAFETY: the state came from this plugin's load_module and is freed once.
            unsafe { free(self.plugin.table.self_, self.state) };
        }
    }
}

impl ModuleNode for PluginModule {
    fn type_key(&self) -> &str {
        &self.format
    }

    fn get_function(&self, name: &str, this: Option<&ObjectRef>) -> Result<Option<Function>> {
        let f = self
            .plugin
            .table
            .module_get_function
            .expect("checked at registration");
        let c = CString::new(name).map_err(|_| Error::value("function name contains NUL"))?;
        let mut h = std::ptr::null_mut();
        // SAFETY: plugin contract.
        let r = unsafe { f(self.plugin.table.self_, self.state, c.as_ptr(), &mut h) };
        if r != 0 {
            return Err(Error::from_last().context(format!(
                "device plugin {}: module_get_function({name}) failed",
                self.plugin.name
            )));
        }
        // SAFETY: the plugin hands over one reference to a function object (or NULL).
        let Some(obj) = (unsafe { ObjectRef::from_raw(h as *mut Object) }) else {
            return Ok(None);
        };
        let inner = Function::from_object(obj)?;
        Ok(Some(match this {
            // Keep the module (and its state) alive as long as the function.
            Some(m) => {
                let keep = m.clone();
                Function::from_rust(move |args, rv| {
                    let _ = &keep;
                    // SAFETY: forwarding the caller's argument arrays unchanged.
                    unsafe {
                        inner.obj().call_raw(
                            args.values.as_ptr() as *mut TVMValue,
                            args.codes.as_ptr() as *mut i32,
                            args.len() as i32,
                            rv,
                        )
                    }
                })
            }
            None => inner,
        }))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn get_format(&self) -> Result<String> {
        Ok(self.format.clone())
    }
}

struct Registry {
    by_type: HashMap<i32, Arc<Plugin>>,
    adopted: HashSet<String>,
}

static PLUGINS: LazyLock<RwLock<Registry>> = LazyLock::new(|| {
    RwLock::new(Registry {
        by_type: HashMap::new(),
        adopted: HashSet::new(),
    })
});
static DISCOVER: Mutex<()> = Mutex::new(());

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
    v.sort();
    v
}

fn module_from_bytes(plugin: &Arc<Plugin>, bytes: &[u8]) -> Result<Module> {
    let f = plugin.table.load_module.expect("checked at registration");
    let mut state = std::ptr::null_mut();
    // SAFETY: plugin contract; the bytes live through the call.
    let r = unsafe {
        f(
            plugin.table.self_,
            bytes.as_ptr() as *const c_void,
            bytes.len(),
            &mut state,
        )
    };
    if r != 0 {
        return Err(Error::from_last()
            .context(format!("device plugin {}: load_module failed", plugin.name)));
    }
    Ok(Module::new(Box::new(PluginModule {
        plugin: plugin.clone(),
        state,
        format: plugin.format.clone().unwrap_or_default(),
    })))
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
        return Err(Error::value(format!(
            "device plugin: ABI version {version} is not supported (this runtime speaks version {ABI_VERSION})"
        )));
    }
    if (size as usize) < std::mem::size_of::<TVMDevicePlugin>() {
        return Err(Error::value(format!(
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
        return Err(Error::value(format!(
            "device plugin '{name}': the name must be non-empty letters, digits or '_'"
        )));
    }
    let ty = t.device_type;
    if !(MIN_PLUGIN_DEVICE_TYPE..RPC_SESS_MASK).contains(&ty) {
        return Err(Error::value(format!(
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
        return Err(Error::value(format!(
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
            .map_err(|_| Error::value(format!("device plugin {name}: module_format is not UTF-8")))?
            .to_string();
        if t.load_module.is_none() || t.module_get_function.is_none() || t.module_free.is_none() {
            return Err(Error::value(format!(
                "device plugin {name}: module_format '{f}' needs load_module, \
                 module_get_function and module_free"
            )));
        }
        Some(f)
    };
    {
        let r = PLUGINS.read().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = r.by_type.get(&ty) {
            return Err(Error::value(format!(
                "device plugin {name}: device type {ty} is already taken by plugin {}",
                p.name
            )));
        }
        if r.by_type.values().any(|p| p.name == name) {
            return Err(Error::value(format!(
                "device plugin {name}: a plugin of that name is already registered"
            )));
        }
    }
    if super::has_backend(ty) {
        return Err(Error::value(format!(
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
    super::register_backend(ty, plugin.clone());
    if let Some(fmt) = format {
        let p = plugin.clone();
        registry::register_rust(&format!("runtime.module.loadbinary_{fmt}"), move |a, rv| {
            let reader = a.handle(0)? as *mut BlobReader<'_>;
            if reader.is_null() {
                return Err(Error::value("loadbinary: NULL stream"));
            }
            // SAFETY: blob loaders receive a live BlobReader (see module::blob).
            let bytes = unsafe { (*reader).read_blob("a plugin module")? };
            *rv = module_from_bytes(&p, bytes)?.into_object().into();
            Ok(())
        });
        let p = plugin.clone();
        registry::register_rust(&format!("runtime.module.loadfile_{fmt}"), move |a, rv| {
            let path = a.str(0)?;
            let bytes = std::fs::read(path)
                .map_err(|e| Error::value(format!("cannot read module file {path}: {e}")))?;
            *rv = module_from_bytes(&p, &bytes)?.into_object().into();
            Ok(())
        });
    }
    Ok(())
}

/// Loads a plugin library and registers the table its `TVMDevicePluginInit` returns.
pub fn load_library(path: &str) -> Result<()> {
    // SAFETY: loading runs the library's initialisers, the plugin author's responsibility.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| Error::value(format!("cannot load device plugin {path}: {e}")))?;
    // SAFETY: the ABI names this symbol and its signature.
    let init: libloading::Symbol<'_, unsafe extern "C" fn() -> *const TVMDevicePlugin> =
        unsafe { lib.get(b"TVMDevicePluginInit\0") }.map_err(|_| {
            Error::value(format!(
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

/// Finds plugins not registered yet: the libraries in `TVM_DEVICE_PLUGINS` (once per process)
/// and `device_api.<name>` functions registered through the C API.
pub fn discover() {
    let _g = DISCOVER.lock().unwrap_or_else(|e| e.into_inner());
    static ENV: Once = Once::new();
    ENV.call_once(|| {
        if let Ok(list) = std::env::var("TVM_DEVICE_PLUGINS") {
            for path in list.split(':').filter(|p| !p.is_empty()) {
                if let Err(e) = load_library(path) {
                    eprintln!("tvm-runtime: TVM_DEVICE_PLUGINS: {e}");
                }
            }
        }
    });
    let names: Vec<String> = registry::list_names()
        .into_iter()
        .filter(|n| {
            // `device_api.<name>[.<function>]` of a device TVM defines belongs to a built-in
            // backend (cpu, cuda, vulkan, ...), never to a plugin.
            n.strip_prefix("device_api.").is_some_and(|rest| {
                let dev = rest.split('.').next().unwrap_or_default();
                super::builtin_type_from_name(dev).is_none()
            })
        })
        .collect();
    for n in names {
        if !PLUGINS
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .adopted
            .insert(n.clone())
        {
            continue;
        }
        let Some(f) = registry::get(&n) else { continue };
        match f.call(&[]) {
            Ok(RetValue::Handle(h)) if !h.is_null() => {
                // SAFETY: a device_api.<name> function returning a handle follows the plugin
                // ABI (validated inside).
                if let Err(e) = unsafe { register(h as *const TVMDevicePlugin, None) } {
                    eprintln!("tvm-runtime: {n}: {e}");
                }
            }
            _ => {}
        }
    }
}

/// Arguments of the global `runtime.LoadDevicePlugin`.
pub(crate) fn load_plugin_global(
    a: crate::packed_func::Args<'_>,
    _rv: &mut RetValue,
) -> Result<()> {
    match a.get(0)? {
        ArgValue::Str(_) => load_library(a.str(0)?),
        ArgValue::Handle(h) => {
            // SAFETY: a handle passed here is a plugin table (validated inside).
            unsafe { register(h as *const TVMDevicePlugin, None) }
        }
        v => Err(Error::type_error(format!(
            "runtime.LoadDevicePlugin expects a path or a table handle, got {}",
            v.kind_name()
        ))),
    }
}
