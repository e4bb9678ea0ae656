//! The system library: symbols registered at start-up by statically linked TVM objects
//! (`TVMBackendRegisterSystemLibSymbol`), served by `runtime.SystemLib` modules.

use super::library::{create_module_from_library, Library};
use super::{Module, SymbolMap};
use crate::packed_func::error::Result;
use std::ffi::c_void;
use std::sync::{Arc, LazyLock, Mutex, RwLock};

static SYMBOLS: LazyLock<RwLock<SymbolMap>> = LazyLock::new(|| RwLock::new(SymbolMap::default()));
/// The modules by prefix (a list: a program has one or a few).
static MODULES: Mutex<Vec<(String, Module)>> = Mutex::new(Vec::new());

/// Registers a symbol (a later registration of the same name replaces it).
///
/// # Safety
/// `ptr` must be what the name says to TVM-compiled code (a function with the backend packed
/// signature, a writable context slot, the module blob), valid for the rest of the process:
/// the system library calls and writes through it.
///
/// ```compile_fail,E0133
/// tvm_runtime::module::system_lib::register_symbol("f", 1 as *mut std::ffi::c_void);
/// ```
pub unsafe fn register_symbol(name: &str, ptr: *mut c_void) {
    SYMBOLS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name.to_string(), ptr as usize);
}

/// The address registered for `name` (one out-of-line copy of the lookup for its two sites).
#[inline(never)]
fn find(syms: &SymbolMap, name: &str) -> Option<*mut c_void> {
    syms.get(name).map(|&a| a as *mut c_void)
}

struct SystemLibrary {
    prefix: String,
}

impl Library for SystemLibrary {
    fn symbol(&self, name: &str) -> *mut c_void {
        let syms = SYMBOLS.read().unwrap_or_else(|e| e.into_inner());
        let key = format!("{}{name}", self.prefix);
        find(&syms, &key)
            .or_else(|| find(&syms, name))
            .unwrap_or(std::ptr::null_mut())
    }

    fn describe(&self) -> String {
        if self.prefix.is_empty() {
            "system library".into()
        } else {
            format!("system library (prefix {})", self.prefix)
        }
    }
}

/// The system library module for a symbol prefix (one per prefix, created on first use).
pub fn system_lib(prefix: &str) -> Result<Module> {
    let mut mods = MODULES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, m)) = mods.iter().find(|(p, _)| p == prefix) {
        return Ok(m.clone());
    }
    let lib = Arc::new(SystemLibrary {
        prefix: prefix.to_string(),
    });
    // Kernels compiled by TVM >= 0.25 (the tvm-ffi ABI) register their library context.
    #[cfg(feature = "ffi-syslib")]
    let m = if lib.symbol(super::tvm_ffi::LIBRARY_CTX).is_null() {
        create_module_from_library(lib)?
    } else {
        super::tvm_ffi::load_system(lib)?
    };
    #[cfg(not(feature = "ffi-syslib"))]
    let m = create_module_from_library(lib)?;
    mods.push((prefix.to_string(), m.clone()));
    Ok(m)
}
