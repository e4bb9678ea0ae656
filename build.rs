//! Build script: gives the shared library TVM's SONAME so that programs linked against the
//! reference `libtvm_runtime.so` resolve to ours unchanged, and builds the tiny shared object
//! that provides the one symbol tvm-ffi libraries import (`src/module/tvm_ffi/shim.c`; the
//! runtime embeds it and loads it from memory when needed).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_runtime.so");
        // Compiled models call expf, tanhf, ... without naming libm: the reference runtime
        // brings it in through libstdc++, so a program that links only libtvm_runtime.so must
        // find it through ours too, whichever feature set (the smaller ones use no libm).
        println!("cargo:rustc-cdylib-link-arg=-Wl,--push-state,--no-as-needed,-lm,--pop-state");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/module/tvm_ffi/shim.c");
    println!("cargo:rerun-if-env-changed=CC");
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
