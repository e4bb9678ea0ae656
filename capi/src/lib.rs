//! `libtvm_runtime.so` / `libtvm_runtime.a`: the C entry points of the `tvm-runtime` crate
//! (its `#[no_mangle]` functions), exported from a library of their own so that the release
//! profile's LTO runs (cargo runs none for a crate that is also an `rlib`). Nothing is defined
//! here; Rust programs use the `tvm-runtime` crate itself.
pub use runtime::*;
