//! Modules: the module object (type index 1), imports, function lookup with caching, and the
//! environment lookup compiled code uses (`TVMBackendGetFuncFromEnv`).

pub mod blob;
#[cfg(feature = "dso")]
pub mod dso;
#[cfg(all(feature = "dso", target_os = "linux", target_env = "gnu"))]
mod dynsym;
#[cfg(feature = "dso")]
pub mod elf_check;
pub mod function_info;
mod functions;
pub mod library;
pub mod system_lib;
pub mod tvm_ffi;

use crate::object::{ObjectRef, TYPE_MODULE};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry;
use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

/// Symbol names to addresses (the system library's symbols, a library's resolved ones); also the
/// Relax VM's function table type (one instantiation of the table's code for both). A fast
/// non-keyed hash: the keys are names from loaded code, which can run anything anyway, so
/// SipHash's flooding resistance buys nothing, and the library needs no random keys.
pub(crate) type SymbolMap = HashMap<String, usize, rustc_hash::FxBuildHasher>;

/// Property bits (`ModulePropertyMask`).
pub mod property {
    /// Can be serialised into a binary blob.
    pub const BINARY_SERIALIZABLE: i32 = 0b001;
    /// Can be run directly.
    pub const RUNNABLE: i32 = 0b010;
    /// Can be exported as a DSO.
    pub const DSO_EXPORTABLE: i32 = 0b100;
}

/// What a kind of module implements.
pub trait ModuleNode: Send + Sync {
    /// The type key (`library`, `cuda`, `GraphExecutorFactory`, ...).
    fn type_key(&self) -> &str;

    /// Looks a function up in this module only. `this` is the module's own object, which the
    /// returned function should keep alive; `None` when the module itself keeps the function
    /// (its environment cache), so that no reference cycle forms.
    fn get_function(&self, name: &str, this: Option<&ObjectRef>) -> Result<Option<Function>>;

    /// Property bits.
    fn property_mask(&self) -> i32 {
        0
    }

    /// Source code in a format, for modules that keep their source.
    fn get_source(&self, _format: &str) -> Result<String> {
        Err(Error::tvm_fmt(format_args!(
            "Module[{}] does not support GetSource",
            self.type_key()
        )))
    }

    /// The format the module saves to, for modules that can be saved.
    fn get_format(&self) -> Result<String> {
        Err(Error::tvm_fmt(format_args!(
            "Module[{}] does not support GetFormat",
            self.type_key()
        )))
    }

    /// Saves to a file.
    fn save_to_file(&self, path: &str, _format: &str) -> Result<()> {
        Err(Error::value_fmt(format_args!(
            "module of type {} cannot be saved to {path}",
            self.type_key()
        )))
    }

    /// Serialises the module for a `__tvm_dev_mblob` entry (what its `loadbinary` loader
    /// reads back), for modules that can be saved that way.
    fn save_to_binary(&self) -> Result<Vec<u8>> {
        Err(Error::value_fmt(format_args!(
            "module of type {} cannot be serialised to binary",
            self.type_key()
        )))
    }

    /// The node as `Any`, to get back to a concrete module type.
    fn as_any(&self) -> &dyn std::any::Any;

    /// Whether the module has the function (without creating it).
    fn implements_function(&self, name: &str) -> bool {
        matches!(self.get_function(name, None), Ok(Some(_)))
    }
}

/// The module payload: the node, its imports and caches.
pub struct ModuleObj {
    /// Context slots of libraries bound to this module (see `library::bind_context`).
    context: Mutex<Vec<library::ContextBinding>>,
    node: Box<dyn ModuleNode>,
    imports: RwLock<Vec<ObjectRef>>,
    /// The registry's table type (one copy of the table code for both). Keys are names found
    /// in this module or its imports (other names only miss), so the registry's fast hash
    /// serves. With the registry's key type too (bytes, not `String`), its lookup (the
    /// `TVMFuncGetGlobal` path) compiles as with a table type of its own: checked in the
    /// default, `deploy` and `minimal` builds.
    env_cache: RwLock<HashMap<Box<[u8]>, Function, rustc_hash::FxBuildHasher>>,
}

// SAFETY: TYPE_MODULE is a static index of the type table that no other payload type uses.
unsafe impl crate::object::ObjectType for ModuleObj {
    crate::object_type!("runtime.Module", static TYPE_MODULE);
}

/// A reference to a module object.
#[derive(Clone, Debug)]
pub struct Module(ObjectRef);

impl Module {
    /// Wraps a node in a new module object.
    pub fn new(node: Box<dyn ModuleNode>) -> Module {
        Module(ObjectRef::new(ModuleObj {
            context: Mutex::new(Vec::new()),
            node,
            imports: RwLock::new(Vec::new()),
            env_cache: RwLock::new(HashMap::default()),
        }))
    }

    /// Loads a module from a file (format from the extension: `.so` libraries and any format
    /// with a registered `runtime.module.loadfile_<ext>` loader).
    pub fn load(path: &str) -> Result<Module> {
        load_from_file(path, "")
    }

    /// A function of this module or its imports; an error naming it when absent.
    pub fn function(&self, name: &str) -> Result<Function> {
        self.get_function(name, true)?.ok_or_else(|| {
            Error::attribute_fmt(format_args!(
                "module of type {} has no function {name}",
                self.type_key()
            ))
        })
    }

    /// Wraps an object known to be a module.
    pub fn from_object(o: ObjectRef) -> Result<Module> {
        if o.downcast_ref::<ModuleObj>().is_some() {
            Ok(Module(o))
        } else {
            Err(Error::type_error_fmt(format_args!(
                "expected a Module but got {}",
                o.type_key()
            )))
        }
    }

    /// The object.
    pub fn as_object(&self) -> &ObjectRef {
        &self.0
    }

    /// The object, consumed.
    pub fn into_object(self) -> ObjectRef {
        self.0
    }

    fn obj(&self) -> &ModuleObj {
        // SAFETY: a `Module` wraps only a module object: `new` makes one and `from_object`
        // checks, and imports hold only modules' objects.
        unsafe { self.0.downcast_unchecked::<ModuleObj>() }
    }

    /// Keeps a library's context binding for as long as this module lives.
    pub(crate) fn add_context_binding(&self, b: library::ContextBinding) {
        self.obj()
            .context
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(b);
    }

    /// The node.
    pub fn node(&self) -> &dyn ModuleNode {
        &*self.obj().node
    }

    /// The type key.
    pub fn type_key(&self) -> &str {
        self.obj().node.type_key()
    }

    /// The imported modules.
    pub fn imports(&self) -> Vec<Module> {
        self.obj()
            .imports
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|o| Module(o.clone()))
            .collect()
    }

    /// Adds an import; refuses cycles.
    pub fn import(&self, dep: &Module) -> Result<()> {
        if dep.0.same_as(&self.0) || dep.reaches(self) {
            return Err(Error::value(
                "TVMModImport: importing this module would create a cycle",
            ));
        }
        self.obj()
            .imports
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(dep.0.clone());
        Ok(())
    }

    /// Whether `target` is reachable through imports (iterative, each module visited once, so
    /// shared sub-trees cost nothing extra).
    fn reaches(&self, target: &Module) -> bool {
        let mut seen = Vec::new();
        let mut stack = self.imports();
        while let Some(m) = stack.pop() {
            if m.0.same_as(&target.0) {
                return true;
            }
            if first_visit(&mut seen, m.0.as_ptr() as usize) {
                stack.append(&mut m.imports());
            }
        }
        false
    }

    /// Drops all imports.
    pub fn clear_imports(&self) {
        self.obj()
            .imports
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Looks a function up in this module, then (if asked) in its imports depth first. The
    /// function keeps its module alive. (Nodes cache their own lookups.)
    pub fn get_function(&self, name: &str, query_imports: bool) -> Result<Option<Function>> {
        if let Some(f) = self.obj().node.get_function(name, Some(&self.0))? {
            return Ok(Some(f));
        }
        if query_imports {
            return self.find_in_imports(name);
        }
        Ok(None)
    }

    /// Depth-first search of the imports (each module visited once).
    fn find_in_imports(&self, name: &str) -> Result<Option<Function>> {
        let mut seen = Vec::new();
        // Reversed in place (less code than collecting a reversed iterator): the first import
        // is popped first.
        let mut stack = self.imports();
        stack.reverse();
        while let Some(m) = stack.pop() {
            if !first_visit(&mut seen, m.0.as_ptr() as usize) {
                continue;
            }
            if let Some(f) = m.obj().node.get_function(name, Some(&m.0))? {
                return Ok(Some(f));
            }
            let mut more = m.imports();
            more.reverse();
            stack.append(&mut more);
        }
        Ok(None)
    }

    /// What compiled code gets for `name`: this module and its imports (cached, so later
    /// imports do not change an answer already given), then the global registry (looked up
    /// each time, so an import added later takes precedence, as in the reference).
    pub fn get_func_from_env(&self, name: &str) -> Result<Function> {
        let obj = self.obj();
        if let Some(f) = obj
            .env_cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name.as_bytes())
        {
            return Ok(f.clone());
        }
        let mut found = obj.node.get_function(name, None)?;
        if found.is_none() {
            found = self.find_in_imports(name)?;
        }
        if let Some(f) = found {
            obj.env_cache
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.as_bytes().into(), f.clone());
            return Ok(f);
        }
        registry::get(name).ok_or_else(|| {
            Error::attribute(crate::packed_func::features::or_built_without(
                name,
                format!("Cannot find function {name} in the imported modules or global registry"),
            ))
        })
    }

    /// Like [`Module::get_func_from_env`], returning a pointer to the cached function object
    /// that stays valid while the module lives (what `TVMBackendGetFuncFromEnv` hands out).
    pub fn get_func_from_env_raw(&self, name: &str) -> Result<*mut crate::object::Object> {
        let f = self.get_func_from_env(name)?;
        let p = f.as_object().as_ptr();
        keep_alive(f);
        Ok(p)
    }
}

/// A registry function for compiled code without a module context, as a borrowed pointer
/// that stays valid for the process.
pub fn global_env_func_raw(name: &str) -> Result<*mut crate::object::Object> {
    let f = registry::get(name).ok_or_else(|| {
        Error::attribute(crate::packed_func::features::or_built_without(
            name,
            format!("Cannot find function {name} in the global registry"),
        ))
    })?;
    let p = f.as_object().as_ptr();
    keep_alive(f);
    Ok(p)
}

/// Keeps functions handed out as borrowed pointers alive for the process, so that a registry
/// entry replaced later cannot invalidate a pointer compiled code cached.
///
/// One list of every function handed out (each once): what keeps them alive does not depend
/// on the name they were looked up by.
fn keep_alive(f: Function) {
    use std::sync::Mutex;
    static KEEP: Mutex<Vec<Function>> = Mutex::new(Vec::new());
    let mut keep = KEEP.lock().unwrap_or_else(|e| e.into_inner());
    if !keep.iter().any(|g| g.as_object().same_as(f.as_object())) {
        keep.push(f);
    }
}

/// Loads a module from a file through the loader `runtime.module.loadfile_<format>`; an
/// empty format is taken from the file extension (`so`, `dll`, `dylib` load as `so`).
pub fn load_from_file(path: &str, format: &str) -> Result<Module> {
    let mut fmt = if format.is_empty() {
        extension(path).to_string()
    } else {
        format.to_string()
    };
    if fmt == "dll" || fmt == "dylib" || fmt == "dso" {
        fmt = "so".into();
    }
    if fmt == "so" {
        #[cfg(feature = "dso")]
        return dso::load(path);
        #[cfg(not(feature = "dso"))]
        return Err(Error::value_fmt(format_args!(
            "cannot load {path}: shared libraries are not available: this library was built \
             without `dso` (system libraries only)"
        )));
    }
    let name = format!("runtime.module.loadfile_{fmt}");
    let f = registry::get(&name).ok_or_else(|| no_file_loader(path, &fmt, &name))?;
    let c = std::ffi::CString::new(path).map_err(|_| Error::value("path contains NUL"))?;
    let cf =
        std::ffi::CString::new(fmt.as_str()).map_err(|_| Error::value("format contains NUL"))?;
    let rv = f.call(&[
        crate::packed_func::ArgValue::Str(&c),
        crate::packed_func::ArgValue::Str(&cf),
    ])?;
    Module::from_object(rv.into_object()?)
}

/// `Path::new(path).extension()` on Unix, "" for `None`: the last component unless it is `.`
/// or `..` (`.` components and trailing `/`s skipped), from its last `.` on where that `.` is
/// not its first byte. Without `std::path::Components`.
fn extension(path: &str) -> &str {
    let mut rest = path;
    loop {
        rest = rest.trim_end_matches('/');
        match rest.strip_suffix("/.") {
            Some(r) => rest = r,
            None => break,
        }
    }
    // Byte searches: `/` and `.` are ASCII (std's `char` searchers are more code).
    let name = match rest.bytes().rposition(|b| b == b'/') {
        Some(i) => &rest[i + 1..],
        None => rest,
    };
    if name == ".." {
        return "";
    }
    match name.bytes().rposition(|b| b == b'.') {
        Some(i) if i > 0 => &name[i + 1..],
        _ => "",
    }
}

/// Marks the module at `p` seen; false when it was already (a sorted list: less code than a
/// hash set, and import trees are small).
#[inline(never)]
fn first_visit(seen: &mut Vec<usize>, p: usize) -> bool {
    match seen.binary_search(&p) {
        Ok(_) => false,
        Err(i) => {
            seen.insert(i, p);
            true
        }
    }
}

/// The error for a file format whose loader `name` is not registered.
#[cold]
#[inline(never)]
fn no_file_loader(path: &str, fmt: &str, name: &str) -> Error {
    Error::internal(crate::packed_func::features::or_built_without(
        name,
        format!("cannot load {path}: no loader for format '{fmt}' ({name} is not registered)"),
    ))
}

/// Registers this room's global functions.
pub(crate) fn register(r: &mut crate::packed_func::registry::Registrar) {
    functions::register(r);
}

#[cfg(test)]
mod tests {
    #[test]
    fn extension_is_paths() {
        for p in [
            "",
            "/",
            ".",
            "..",
            "./",
            "a",
            "a.so",
            "a.so/",
            "a.so/.",
            "a.so//./",
            "/x/a.tar.gz",
            ".so",
            "x/.so",
            "a.",
            "...",
            "a..b",
            "x/..",
            "a.so/..",
            "./a.so",
            "//.",
            "/.",
            "a/./",
            "d.x/f",
            "d.x/f.",
            "lib.so/././/",
        ] {
            let want = std::path::Path::new(p)
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("");
            assert_eq!(super::extension(p), want, "{p}");
        }
    }
}
