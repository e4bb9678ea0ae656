//! Library modules: functions compiled by TVM, found by symbol in a loaded library (a DSO or
//! the system library), with the library's context pointers filled in.

use super::{Module, ModuleNode};
use crate::object::{Object, ObjectRef};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::{BackendPackedCFunc, Function, Owner};
use std::ffi::{c_char, c_void, CStr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// Symbol names TVM's code generators use.
pub mod symbol {
    /// Holds the name of the module's entry function.
    pub const TVM_MODULE_MAIN: &str = "__tvm_main__";
    /// A pointer the runtime sets to the module (passed back to `TVMBackendGetFuncFromEnv`).
    pub const TVM_MODULE_CTX: &str = "__tvm_module_ctx";
    /// The serialised device modules and import tree.
    pub const TVM_DEV_MBLOB: &str = "__tvm_dev_mblob";
}

/// A loaded library: symbols by name.
pub trait Library: Send + Sync + 'static {
    /// The address of a symbol, or NULL.
    fn symbol(&self, name: &str) -> *mut c_void;
    /// What it is, for messages (a file name).
    fn describe(&self) -> String;
}

/// A module whose functions are symbols of a library.
pub struct LibraryModule {
    lib: Arc<dyn Library>,
    addrs: RwLock<super::SymbolMap>,
}

impl LibraryModule {
    /// A module over a library.
    pub fn new(lib: Arc<dyn Library>) -> LibraryModule {
        LibraryModule {
            lib,
            addrs: RwLock::new(super::SymbolMap::default()),
        }
    }

    fn resolve(&self, name: &str) -> Result<Option<usize>> {
        if let Some(&a) = self
            .addrs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return Ok(Some(a));
        }
        let addr = if name == symbol::TVM_MODULE_MAIN {
            let entry = self.lib.symbol(symbol::TVM_MODULE_MAIN);
            if entry.is_null() {
                // As the reference: asking a library without an entry for it is an error.
                return Err(Error::internal_fmt(format_args!(
                    "{}: symbol __tvm_main__ is not present (the library has no entry \
                     function)",
                    self.lib.describe()
                )));
            }
            // SAFETY: TVM emits `__tvm_main__` as a NUL-terminated array of the entry name.
            let entry = unsafe { CStr::from_ptr(entry as *const c_char) };
            let entry = entry.to_str().map_err(|_| {
                Error::value_fmt(format_args!(
                    "{}: __tvm_main__ does not name a function",
                    self.lib.describe()
                ))
            })?;
            let a = self.lib.symbol(entry);
            if a.is_null() {
                return Err(Error::value_fmt(format_args!(
                    "{}: the entry function {entry} named by __tvm_main__ is missing",
                    self.lib.describe()
                )));
            }
            a
        } else {
            self.lib.symbol(name)
        };
        if addr.is_null() {
            return Ok(None);
        }
        self.addrs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), addr as usize);
        Ok(Some(addr as usize))
    }
}

impl ModuleNode for LibraryModule {
    fn type_key(&self) -> &str {
        "library"
    }

    fn get_function(&self, name: &str, this: Option<&ObjectRef>) -> Result<Option<Function>> {
        let Some(addr) = self.resolve(name)? else {
            return Ok(None);
        };
        // SAFETY: TVM-compiled exported functions have the backend packed signature.
        let f: BackendPackedCFunc = unsafe { std::mem::transmute::<usize, _>(addr) };
        let owner = match this {
            Some(o) => Owner::Object(o.clone()),
            None => Owner::Shared(Arc::new(self.lib.clone())),
        };
        // SAFETY: compiled code is callable from any thread while its library is loaded,
        // which `owner` guarantees.
        let func = unsafe { Function::from_backend(f, std::ptr::null_mut(), Some(owner)) };
        Ok(Some(func))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn property_mask(&self) -> i32 {
        super::property::BINARY_SERIALIZABLE | super::property::RUNNABLE
    }
}

/// The runtime's C entry points that compiled code calls through its context slots, by slot
/// name (`__TVMFuncCall`, ...). They are `extern "C"` functions of the C boundary room, above
/// this one, which installs them when the registry starts ([`set_context_functions`]).
static CONTEXT_FUNCTIONS: OnceLock<Vec<(&'static str, usize)>> = OnceLock::new();

/// Installs the entry points for [`init_context_functions`] (once; later calls are ignored).
pub fn set_context_functions(table: Vec<(&'static str, usize)>) {
    let _ = CONTEXT_FUNCTIONS.set(table);
}

/// Writes the runtime's entry points into the function-pointer variables a library exposes
/// (`__TVMFuncCall`, ...), as compiled code calls the runtime through them.
#[inline(never)]
pub fn init_context_functions(lib: &dyn Library) -> Result<()> {
    // The composition root installs the table when the registry starts.
    crate::packed_func::registry::ensure_started();
    let table = CONTEXT_FUNCTIONS.get().ok_or_else(|| {
        Error::internal("the runtime's C entry points for compiled code are not installed")
    })?;
    for &(name, f) in table {
        let slot = lib.symbol(name) as *mut *mut c_void;
        if !slot.is_null() {
            // SAFETY: TVM emits these symbols as writable function-pointer variables.
            unsafe { *slot = f as *mut c_void };
        }
    }
    Ok(())
}

/// Builds the module for a loaded library: fills the context functions, wraps the library,
/// and points `__tvm_module_ctx` at the module compiled code should resolve through.
pub fn create_module_from_library(lib: Arc<dyn Library>) -> Result<Module> {
    init_context_functions(&*lib)?;
    let m = Module::new(Box::new(LibraryModule::new(lib.clone())));
    bind_context(
        lib.symbol(symbol::TVM_MODULE_CTX) as *mut *mut c_void,
        &m,
        &lib,
    );
    Ok(m)
}

/// Which module each library's context slot points at: the slot's address → the binding's id
/// and the module object. Loading one library twice gives the same slot (the loader maps a
/// library once), so every load after the first shares the module the slot already names.
/// A list of (slot, id, module) (a process loads few libraries).
static CONTEXT_OWNERS: Mutex<Vec<(usize, u64, usize)>> = Mutex::new(Vec::new());

/// Ids of the owning bindings (a slot's entry is removed only by the binding that made it).
static NEXT_BINDING: AtomicU64 = AtomicU64::new(1);

/// What a module keeps for a library's context slot (`__tvm_module_ctx`, or tvm-ffi's
/// `__tvm_ffi__library_ctx`), so that the slot never names a freed module.
pub(crate) enum ContextBinding {
    /// This module is the one the slot names: when it goes, the slot is cleared (NULL makes
    /// compiled code resolve through the registry only). Keeps the library mapped until then.
    Owner {
        slot: usize,
        id: u64,
        _lib: Arc<dyn Library>,
    },
    /// Another module of the same library is the one the slot names: keep it alive.
    Shared { _module: ObjectRef },
}

impl Drop for ContextBinding {
    fn drop(&mut self) {
        if let ContextBinding::Owner { slot, id, .. } = *self {
            let mut owners = CONTEXT_OWNERS.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = owners
                .iter()
                .position(|&(s, owner, _)| s == slot && owner == id)
            {
                owners.swap_remove(at);
                // SAFETY: a writable pointer variable of the library, which `_lib` keeps mapped.
                unsafe { *(slot as *mut *mut c_void) = std::ptr::null_mut() };
            }
        }
    }
}

/// Points a library's context slot at `ctx`, unless a live module of the same library already
/// holds it: then `ctx` keeps that module alive instead, so that a slot shared by several loads
/// of one library never dangles whichever is dropped first. `slot` NULL: nothing to do.
pub(crate) fn bind_context(slot: *mut *mut c_void, ctx: &Module, lib: &Arc<dyn Library>) {
    if slot.is_null() {
        return;
    }
    let mut owners = CONTEXT_OWNERS.lock().unwrap_or_else(|e| e.into_inner());
    let key = slot as usize;
    let at = owners.iter().position(|&(s, _, _)| s == key);
    if let Some(&(_, _, obj)) = at.and_then(|i| owners.get(i)) {
        // SAFETY: an entry's module is allocated until its owning binding's drop has removed
        // the entry, which takes the lock held here.
        let live =
            NonNull::new(obj as *mut Object).and_then(|p| unsafe { ObjectRef::try_upgrade(p) });
        if let Some(live) = live {
            if !live.same_as(ctx.as_object()) {
                ctx.add_context_binding(ContextBinding::Shared { _module: live });
            }
            return;
        }
    }
    let id = NEXT_BINDING.fetch_add(1, Ordering::Relaxed);
    let ptr = ctx.as_object().as_ptr();
    // A dead module's entry is replaced (its binding's drop then finds another id).
    match at.and_then(|i| owners.get_mut(i)) {
        Some(e) => *e = (key, id, ptr as usize),
        None => owners.push((key, id, ptr as usize)),
    }
    ctx.add_context_binding(ContextBinding::Owner {
        slot: key,
        id,
        _lib: lib.clone(),
    });
    // SAFETY: `__tvm_module_ctx` is a writable pointer variable in TVM output; the binding just
    // added clears it before the module is freed.
    unsafe { *slot = ptr as *mut c_void };
}
