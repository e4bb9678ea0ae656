//! tvm-runtime-rs: a Rust drop-in replacement for Apache TVM's C runtime.
//!
//! The crate builds `libtvm_runtime.so` exporting the classic C ABI of TVM v0.20.0
//! (`c_runtime_api.h`, `c_backend_api.h`). Rooms, from the bottom up:
//! - [`ffi`]: C value types, errors, PackedFunc and the global registry;
//! - [`object`]: the object header, the type table and the containers;
//! - [`device`]: the device trait and its registry (CPU built in);
//! - [`ndarray`]: NDArray and DLPack;
//! - [`threading`]: the CPU thread pool and workspace pools;
//! - [`module`]: modules and loaders;
//! - [`executor`]: the graph executor, params, the time evaluator;
//! - [`c_api`]: the `extern "C"` surface, which converts and delegates.

pub mod c_api;
pub mod device;
pub mod executor;
pub mod ffi;
pub mod module;
pub mod ndarray;
pub mod object;
pub mod threading;

pub use ffi::dtype::{dtype_from_string, dtype_to_string};
pub use ffi::types::{DLDataType, DLDevice};
pub use ffi::{ArgValue, Error, ErrorKind, Function, Result, RetValue};
pub use module::Module;
pub use ndarray::{Element, NDArray};
