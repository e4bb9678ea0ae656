//! Device plugins: devices added at run time through a versioned C ABI
//! (`include/tvm/runtime/device_plugin.h`), without rebuilding the runtime.
//!
//! - [`abi`]: the plugin table and its version;
//! - `backend`: a plugin as a device backend ([`DeviceApi`](super::DeviceApi));
//! - `module`: modules in a plugin's own format;
//! - `registry`: the registered plugins by device type, and table validation;
//! - `discovery`: the explicit ways plugins arrive: a library path, `TVM_DEVICE_PLUGINS`
//!   (read once, at registry start-up), and `device_api.<name>` functions (adopted when they
//!   are registered).

pub mod abi;
mod backend;
mod discovery;
mod module;
mod registry;

pub use abi::{TVMDevicePlugin, ABI_VERSION, MIN_PLUGIN_DEVICE_TYPE};
pub use backend::Plugin;
pub use discovery::{discover, load_library};
pub(crate) use discovery::{load_plugin_global, register_discovery};
pub use registry::{list, name_of, register, type_of};
