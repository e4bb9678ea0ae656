//! Build script: builds the tiny shared object that provides the one symbol tvm-ffi libraries
//! import (`src/module/tvm_ffi/shim.c`; the runtime embeds it and loads it from memory when
//! needed), and sets the `tvmrt_ffi_arms` cfg. The C library's link settings are in
//! capi/build.rs. The examples link with the stand-ins for std's default hooks as the C library
//! does (capi/build_std_hooks.rs; `examples/std_hooks.rs` shows them at work).
use std::path::PathBuf;
include!("capi/build_std_hooks.rs");
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/module/tvm_ffi/shim.c");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-changed=capi/build_std_hooks.rs");
    for arg in std_hook_link_args() {
        println!("cargo:rustc-link-arg-examples={arg}");
    }
    // `tvmrt_ffi_arms`: `TVMFuncCall`'s fast arms for tvm-ffi kernels, built where such kernels
    // can be loaded (`dso`, `ffi-syslib`) and the fast paths are on.
    println!("cargo:rustc-check-cfg=cfg(tvmrt_ffi_arms)");
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    if (feature("DSO") || feature("FFI_SYSLIB")) && !feature("BENCH_NO_FAST_PATHS") {
        println!("cargo:rustc-cfg=tvmrt_ffi_arms");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("tvm_ffi_shim.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-fvisibility=hidden",
            "-Wall",
            "-Werror",
        ])
        .arg("-o")
        .arg(&out)
        .arg("src/module/tvm_ffi/shim.c")
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` for the tvm-ffi shim: {e}"));
    assert!(
        status.success(),
        "building src/module/tvm_ffi/shim.c failed"
    );
}
