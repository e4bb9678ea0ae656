//! tvm-runtime-rs: a Rust drop-in replacement for Apache TVM's C runtime.
//!
//! The crate builds `libtvm_runtime.so` exporting the classic C ABI of TVM v0.20.0
//! (`c_runtime_api.h`, `c_backend_api.h`).
//!
//! # Rooms
//!
//! From the bottom up; a room uses only the rooms listed before it (and itself).
//! `tests/layers.rs` reads this list (the names before the colon of each numbered line) and
//! every `crate::` path in `src/`, and fails on an edge that points up.
//! 0. `sync`: the atomics, locks and clock the lock-free code uses (std's, or loom's with the
//!    `loom` feature);
//! 1. [`packed_func`] + [`object`], one room: C value types, errors, DLTensor arithmetic,
//!    PackedFunc and the global registry; the object header, the type table, the
//!    containers. They are one room because each is made of the other: a PackedFunc *is* an
//!    object (type index 9) and values carry objects, while objects' global functions are
//!    PackedFuncs returning values.
//! 2. [`module`]: modules, loaders, the library and system-library machinery;
//! 3. [`device`]: the device trait, its registry and the backends (CPU, CUDA, Vulkan,
//!    plugins); a backend's own module kind (a CUDA or Vulkan module) is a module, so this
//!    room sits above [`module`];
//! 4. [`ndarray`]: NDArray and DLPack, on top of the device backends;
//! 5. [`threading`]: the CPU thread pool and workspace pools;
//! 6. [`executor`]: the graph executor, params, the time evaluator, AnyList;
//! 7. [`relax_vm`]: the Relax virtual machine;
//! 8. [`rpc`]: TVM's RPC protocol, server and client;
//! 9. [`c_api`]: the `extern "C"` surface, which converts and delegates inside one boundary.
//!
//! The optional rooms and backends are Cargo features (`graph`, `relax`, `llm`, `rpc`,
//! `tvm-ffi`, `dso`, `threads`, `plugins`, `cuda`, `vulkan`, `opencl`; see Cargo.toml): a
//! feature left out is not compiled, and asking for what it provides names it
//! ([`packed_func::features`]).
//!
//! Each room registers its own global functions beside their code; `register_all` is the
//! one composition root that calls them, on the first use of the registry. The crate root is
//! above every room: the registry (room 1) calls `register_all`, and nothing else in a
//! room names the root.

pub mod c_api;
pub mod device;
pub mod executor;
pub mod module;
pub mod ndarray;
pub mod object;
pub mod packed_func;
#[cfg(feature = "relax")]
pub mod relax_vm;
#[cfg(feature = "rpc")]
pub mod rpc;
mod sync;
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
    #[cfg(feature = "relax")]
    relax_vm::register(r);
    #[cfg(feature = "rpc")]
    rpc::register(r);
    c_api::register(r);
}
