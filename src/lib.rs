//! tvm-runtime-rs: a Rust drop-in replacement for Apache TVM's C runtime.
//!
//! The crate builds `libtvm_runtime.so` exporting the classic C ABI of TVM v0.20.0
//! (`c_runtime_api.h`, `c_backend_api.h`). Rooms, from the bottom up (a room uses only rooms
//! listed before it):
//! - [`packed_func`]: C value types, errors, PackedFunc and the global registry;
//! - [`object`]: the object header, the type table and the containers;
//! - [`device`]: the device trait, its registry and the backends (CPU, CUDA, Vulkan, plugins);
//! - [`ndarray`]: NDArray and DLPack;
//! - [`threading`]: the CPU thread pool and workspace pools;
//! - [`module`]: modules and loaders;
//! - [`executor`]: the graph executor, params, the time evaluator;
//! - [`rpc`]: TVM's RPC protocol, server and client;
//! - [`c_api`]: the `extern "C"` surface, which converts and delegates.
//!
//! Each room registers its own global functions beside their code; [`register_all`] is the
//! one composition root that calls them, on the first use of the registry.

pub mod c_api;
pub mod device;
pub mod executor;
pub mod module;
pub mod ndarray;
pub mod object;
pub mod packed_func;
pub mod rpc;
pub mod threading;

pub use module::Module;
pub use ndarray::{Element, NDArray};
pub use packed_func::dtype::{dtype_from_string, dtype_to_string};
pub use packed_func::types::{DLDataType, DLDevice};
pub use packed_func::{ArgValue, Error, ErrorKind, Function, Result, RetValue};

/// The composition root: every room's registrations, bottom-up. Called once by the registry
/// on its first use.
pub(crate) fn register_all(r: &mut packed_func::registry::Registrar) {
    object::register(r);
    device::register(r);
    ndarray::register(r);
    threading::register(r);
    module::register(r);
    executor::register(r);
    rpc::register(r);
}
