//! The global function registry: names to PackedFuncs, with the runtime's built-ins
//! registered on first use.

use super::error::{Error, Result};
use super::function::Function;
use super::value::{Args, RetValue};
use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

static REGISTRY: LazyLock<RwLock<HashMap<String, Function>>> = LazyLock::new(|| {
    let mut m = HashMap::new();
    crate::c_api::builtins::register_all(&mut Builtins(&mut m));
    RwLock::new(m)
});

/// Collects the runtime's built-in functions while the registry is created.
pub struct Builtins<'a>(&'a mut HashMap<String, Function>);

impl Builtins<'_> {
    /// Registers a Rust function under `name`.
    pub fn add<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync + 'static,
    {
        self.0.insert(name.to_string(), Function::from_rust(f));
    }
}

/// Registers a function; an existing name is an error unless `override_existing`.
pub fn register(name: &str, f: Function, override_existing: bool) -> Result<()> {
    let mut r = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    if !override_existing && r.contains_key(name) {
        return Err(Error::internal(format!(
            "Global PackedFunc {name} is already registered"
        )));
    }
    r.insert(name.to_string(), f);
    Ok(())
}

/// Registers a Rust closure (overriding).
pub fn register_rust<F>(name: &str, f: F)
where
    F: Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync + 'static,
{
    let mut r = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    r.insert(name.to_string(), Function::from_rust(f));
}

/// Looks a function up.
pub fn get(name: &str) -> Option<Function> {
    REGISTRY
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .cloned()
}

/// Removes a function; returns whether it existed.
pub fn remove(name: &str) -> bool {
    REGISTRY
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(name)
        .is_some()
}

/// All registered names.
pub fn list_names() -> Vec<String> {
    REGISTRY
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .keys()
        .cloned()
        .collect()
}
