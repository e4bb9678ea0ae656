//! Device plugins left out of this build (no `plugins` feature): the same face as the plugin
//! room, where every way a plugin could arrive fails naming the missing feature, and no device
//! type or name belongs to a plugin.

#[path = "abi.rs"]
pub mod abi;

pub use abi::{TVMDevicePlugin, ABI_VERSION, MIN_PLUGIN_DEVICE_TYPE};

use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::{Args, RetValue};

fn refused(what: &str) -> Error {
    Error::value_fmt(format_args!(
        "{what}: device plugins are not available: this library was built without `plugins`"
    ))
}

/// Always `None`: no plugins without the `plugins` feature.
pub fn name_of(_device_type: i32) -> Option<String> {
    None
}

/// Always `None`: no plugins without the `plugins` feature.
pub fn type_of(_name: &str) -> Option<i32> {
    None
}

/// Always empty: no plugins without the `plugins` feature.
pub fn list() -> Vec<(i32, String)> {
    Vec::new()
}

/// Refuses: built without `plugins`.
///
/// # Safety
/// None needed: the table is not read.
pub unsafe fn register(
    _table: *const TVMDevicePlugin,
    _lib: Option<libloading::Library>,
) -> Result<()> {
    Err(refused("TVMDeviceRegisterPlugin"))
}

/// Refuses: built without `plugins`.
pub fn load_library(path: &str) -> Result<()> {
    Err(refused(&format!("loading the device plugin {path}")))
}

/// Nothing to discover without `plugins`.
pub fn discover() {}

/// `runtime.LoadDevicePlugin`: refuses, built without `plugins`.
pub(crate) fn load_plugin_global(_a: Args<'_>, _rv: &mut RetValue) -> Result<()> {
    Err(refused("runtime.LoadDevicePlugin"))
}

/// Nothing to watch without `plugins`.
pub(crate) fn register_discovery(_r: &mut Registrar) {}
