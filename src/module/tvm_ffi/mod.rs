//! Libraries compiled by today's TVM (v0.22+, the tvm-ffi ABI), run through the classic ABI.
//!
//! Such a library exports its kernels as `__tvm_ffi_<name>` with the tvm-ffi calling
//! convention (16-byte `TVMFFIAny` arguments), carries its device modules and Relax executable
//! in `__tvm_ffi__library_bin` (a layout of its own), resolves packed functions through the
//! context variables `__TVMFFIFunctionCall` and `__TVMFFIEnvModLookupFromImports`, and imports
//! one symbol from the process, `TVMFFIErrorSetRaisedFromCStrParts`. This module loads them
//! into the classic module tree: a classic `TVMFuncCall` reaches a kernel with its arguments
//! converted (tensors by address, no copy) and errors come back as classic errors.

pub mod abi;
pub mod call;
pub mod env;
#[cfg(feature = "ffi-syslib")]
pub mod vm_exec;

#[cfg(feature = "ffi-syslib")]
use super::blob::BlobReader;
#[cfg(any(feature = "dso", feature = "ffi-syslib"))]
use super::library::Library;
#[cfg(feature = "ffi-syslib")]
use super::{Module, ModuleNode};
#[cfg(feature = "ffi-syslib")]
use crate::object::ObjectRef;
#[cfg(any(feature = "dso", feature = "ffi-syslib"))]
use crate::packed_func::error::{Error, Result};
#[cfg(feature = "ffi-syslib")]
use crate::packed_func::function::{Function, Owner};
#[cfg(feature = "ffi-syslib")]
use crate::packed_func::registry;
#[cfg(feature = "ffi-syslib")]
use std::collections::HashMap;
#[cfg(any(feature = "dso", feature = "ffi-syslib"))]
use std::ffi::c_void;
#[cfg(feature = "ffi-syslib")]
use std::sync::{Arc, RwLock};

/// Prefix of every kernel symbol.
pub const KERNEL_PREFIX: &str = "__tvm_ffi_";
/// The blob of device modules and the import tree.
pub const LIBRARY_BIN: &str = "__tvm_ffi__library_bin";
/// The variable the runtime points at the library's module.
pub const LIBRARY_CTX: &str = "__tvm_ffi__library_ctx";
/// The entry function of a single-function library.
pub const MAIN: &str = "__tvm_ffi_main";

/// Symbols only a tvm-ffi library defines (any one marks it as such).
#[cfg(feature = "dso")]
const MARKERS: [&str; 6] = [
    LIBRARY_BIN,
    LIBRARY_CTX,
    MAIN,
    "__TVMFFIFunctionCall",
    "__TVMFFIEnvModLookupFromImports",
    "__TVMFFIErrorSetRaisedFromCStr",
];

/// Symbols of TVM v0.21's short-lived in-tree tvm-ffi ABI (a 16-byte object header, other type
/// indices, unprefixed kernels), which this runtime does not read.
#[cfg(feature = "dso")]
const V0_21_MARKERS: [&str; 2] = ["__tvm_ffi_library_bin", "__tvm_ffi_library_ctx"];

/// Refuses a library of the tvm-ffi ABI of TVM v0.21, naming what was found.
#[cfg(feature = "dso")]
#[inline(never)]
pub fn refuse_unsupported(lib: &dyn Library, path: &str) -> Result<()> {
    match V0_21_MARKERS.iter().find(|s| !lib.symbol(s).is_null()) {
        Some(found) => Err(Error::value_fmt(format_args!(
            "cannot load {path}: it was compiled by TVM v0.21 (found {found}: the in-tree \
             tvm-ffi ABI of that version, with its own object layout), which this runtime does \
             not read; libraries of TVM v0.14-v0.20 and v0.22+ load"
        ))),
        None => Ok(()),
    }
}

/// When the loaded library was compiled for the tvm-ffi ABI: the address of one of its own
/// symbols (a marker variable, else a `__tvm_ffi_*` kernel), by which calls from it are
/// recognised. `file` is read for its dynamic symbols only when no marker is present.
#[cfg(feature = "dso")]
#[inline(never)]
pub fn probe(lib: &dyn Library, file: &str) -> Option<*mut c_void> {
    if let Some(p) = MARKERS.iter().map(|s| lib.symbol(s)).find(|p| !p.is_null()) {
        return Some(p);
    }
    use object::{Object, ObjectSymbol};
    // This process's ELF class only: the loader has refused a library of the other class.
    #[cfg(target_pointer_width = "64")]
    type Elf<'d> = object::read::elf::ElfFile64<'d>;
    #[cfg(not(target_pointer_width = "64"))]
    type Elf<'d> = object::read::elf::ElfFile32<'d>;
    let data = std::fs::read(file).ok()?;
    let obj = Elf::parse(&*data).ok()?;
    let kernel = obj
        .dynamic_symbols()
        .filter(|s| s.is_definition())
        .find_map(|s| {
            s.name()
                .ok()
                .filter(|n| n.starts_with(KERNEL_PREFIX))
                .map(str::to_string)
        })?;
    Some(lib.symbol(&kernel)).filter(|p| !p.is_null())
}

/// A module whose functions are the `__tvm_ffi_<name>` kernels of a library.
#[cfg(feature = "ffi-syslib")]
pub struct FfiLibraryModule {
    lib: Arc<dyn Library>,
    kernels: RwLock<HashMap<String, usize>>,
}

#[cfg(feature = "ffi-syslib")]
impl FfiLibraryModule {
    fn new(lib: Arc<dyn Library>) -> Self {
        FfiLibraryModule {
            lib,
            kernels: RwLock::new(HashMap::new()),
        }
    }

    fn resolve(&self, name: &str) -> Option<abi::SafeCall> {
        let cached = self
            .kernels
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied();
        let addr = match cached {
            Some(a) => a,
            None => {
                let sym = if name == super::library::symbol::TVM_MODULE_MAIN {
                    MAIN.to_string()
                } else {
                    format!("{KERNEL_PREFIX}{name}")
                };
                let a = self.lib.symbol(&sym) as usize;
                if a == 0 {
                    return None;
                }
                self.kernels
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.to_string(), a);
                a
            }
        };
        // SAFETY: `__tvm_ffi_<name>` symbols are TVMFFISafeCallType functions.
        Some(unsafe { std::mem::transmute::<usize, abi::SafeCall>(addr) })
    }
}

#[cfg(feature = "ffi-syslib")]
impl ModuleNode for FfiLibraryModule {
    fn type_key(&self) -> &str {
        "library"
    }

    fn get_function(&self, name: &str, this: Option<&ObjectRef>) -> Result<Option<Function>> {
        let Some(kernel) = self.resolve(name) else {
            return Ok(None);
        };
        let owner = match this {
            Some(o) => Owner::Object(o.clone()),
            None => Owner::Shared(Arc::new(self.lib.clone())),
        };
        // SAFETY: the trampoline has the compiled-function signature and takes this kernel's
        // address as its resource; the kernel is a tvm-ffi safe-call function; `owner` keeps
        // the kernel's library loaded.
        Ok(Some(unsafe {
            Function::from_tvm_ffi_kernel(
                call::kernel_trampoline,
                kernel as *mut c_void,
                Some(owner),
            )
        }))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn property_mask(&self) -> i32 {
        super::property::BINARY_SERIALIZABLE | super::property::RUNNABLE
    }
}

/// Builds the module tree of a loaded tvm-ffi library; `probe` is what [`probe`] found.
#[cfg(feature = "tvm-ffi")]
pub fn load(lib: Arc<dyn Library>, path: &str, probe: *mut c_void) -> Result<Module> {
    env::ensure_error_symbol().map_err(|e| e.context(path))?;
    let lib_module = Module::new(Box::new(FfiLibraryModule::new(lib.clone())));
    env::init_context(&*lib, probe)?;
    let bin = lib.symbol(LIBRARY_BIN);
    let root = if bin.is_null() {
        lib_module.clone()
    } else {
        // SAFETY: `__tvm_ffi__library_bin` is a length-prefixed blob in the loaded library,
        // which `lib` keeps loaded.
        let blob = unsafe { super::dso::length_prefixed_blob(bin, path)? };
        process_library_bin(blob, &lib_module, path)?
    };
    env::set_library_ctx(&lib, &lib_module);
    Ok(root)
}

/// Builds the module tree of tvm-ffi kernels linked statically into the program (a system
/// library: their start-up code registered them through `TVMFFIEnvModRegisterSystemLibSymbol`).
#[cfg(feature = "ffi-syslib")]
pub fn load_system(lib: Arc<dyn Library>) -> Result<Module> {
    const WHAT: &str = "the system library";
    let lib_module = Module::new(Box::new(FfiLibraryModule::new(lib.clone())));
    env::init_context(&*lib, std::ptr::null_mut())?;
    let bin = lib.symbol(LIBRARY_BIN) as *const u8;
    let root = if bin.is_null() {
        lib_module.clone()
    } else {
        // SAFETY: `__tvm_ffi__library_bin` is a length-prefixed blob (8 bytes little-endian
        // length, then the bytes) linked into the program, which lives as long as the process.
        let blob = unsafe {
            let n = u64::from_le_bytes(*(bin as *const [u8; 8]));
            let n = usize::try_from(n).map_err(|_| {
                Error::value_fmt(format_args!("{WHAT}: the module blob claims {n} bytes"))
            })?;
            std::slice::from_raw_parts(bin.add(8), n)
        };
        process_library_bin(blob, &lib_module, WHAT)?
    };
    env::set_library_ctx(&lib, &lib_module);
    Ok(root)
}

/// Reads `__tvm_ffi__library_bin`: `indptr` and `child_indices` (u64 vectors), then per
/// module a kind string and, unless it is `_lib`, its bytes. Module 0 is the root.
#[cfg(feature = "ffi-syslib")]
fn process_library_bin(blob: &[u8], lib_module: &Module, path: &str) -> Result<Module> {
    let mut r = BlobReader::new(blob, path);
    let indptr = r.read_u64_vec("the import tree row pointers")?;
    let children = r.read_u64_vec("the import tree child indices")?;
    let bad_tree = || {
        Error::value_fmt(format_args!(
            "{path}: the tvm-ffi library blob's import tree is corrupted"
        ))
    };
    let count = indptr.len().checked_sub(1).ok_or_else(bad_tree)?;
    let mut modules = Vec::with_capacity(count);
    for _ in 0..count {
        let kind = r.read_string("a module kind")?;
        if kind == "_lib" {
            modules.push(lib_module.clone());
            continue;
        }
        let payload = r.read_blob("a module's bytes")?;
        modules.push(load_kind(&kind, payload, path)?);
    }
    for (i, m) in modules.iter().enumerate() {
        let (start, end) = (indptr[i], indptr[i + 1]);
        if start > end || end > children.len() as u64 {
            return Err(bad_tree());
        }
        for &c in &children[start as usize..end as usize] {
            let child = modules.get(c as usize).ok_or_else(bad_tree)?;
            m.import(child).map_err(|_| bad_tree())?;
        }
    }
    modules.first().cloned().ok_or_else(bad_tree)
}

/// Loads one module of the blob through the classic loader of its kind. A Relax executable
/// is rewritten into the classic format first; other kinds get their bytes as the stream.
#[cfg(feature = "ffi-syslib")]
fn load_kind(kind: &str, payload: &[u8], path: &str) -> Result<Module> {
    let name = format!("runtime.module.loadbinary_{kind}");
    let loader = registry::get(&name).ok_or_else(|| {
        Error::value_fmt(format_args!(
            "{path}: the library holds a module of kind '{kind}', which this runtime cannot \
             load (no loader {name}); available: {}",
            super::blob::available_loaders().join(", ")
        ))
    })?;
    let stream;
    let bytes: &[u8] = if kind.starts_with("relax.") {
        // The classic loader reads the executable as one length-prefixed string.
        let exec = vm_exec::to_classic(payload, path)?;
        let mut s = (exec.len() as u64).to_le_bytes().to_vec();
        s.extend_from_slice(&exec);
        stream = s;
        &stream
    } else {
        payload
    };
    let mut reader = BlobReader::new(bytes, path);
    let rv = super::blob::call_loader(&loader, &mut reader)?;
    Module::from_object(rv.into_object()?).map_err(|e| e.context(format!("loader {name} returned")))
}
