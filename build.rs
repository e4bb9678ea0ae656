//! Build script of the runtime crate: the steps of its sources (build_runtime.rs: the tvm-ffi
//! shim, the `tvmrt_ffi_arms` cfg; capi/build.rs runs them too, for the C library). The
//! examples link with the stand-ins for std's default hooks as the C library does
//! (capi/build_std_hooks.rs; `examples/std_hooks.rs` shows them at work).
include!("build_runtime.rs");
include!("capi/build_std_hooks.rs");

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build_runtime.rs");
    println!("cargo:rerun-if-changed=capi/build_std_hooks.rs");
    runtime_build(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    for arg in std_hook_link_args() {
        println!("cargo:rustc-link-arg-examples={arg}");
    }
}
