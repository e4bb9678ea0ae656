//! Modules in a plugin's own format, loaded and served by the plugin.

use super::backend::Plugin;
use crate::module::{Module, ModuleNode};
use crate::object::{Object, ObjectRef};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::types::TVMValue;
use std::ffi::{c_void, CString};
use std::sync::Arc;

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
                            args.values().as_ptr() as *mut TVMValue,
                            args.codes().as_ptr() as *mut i32,
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

pub(super) fn module_from_bytes(plugin: &Arc<Plugin>, bytes: &[u8]) -> Result<Module> {
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
