// Included by build.rs (the runtime crate) and capi/build.rs (the same sources as the C
// library): the build steps of the runtime's sources.

/// Builds the tiny shared object that provides the one symbol tvm-ffi libraries import
/// (`src/module/tvm_ffi/shim.c`, under `root`, the repository; the runtime embeds it from
/// OUT_DIR and loads it from memory when needed), and sets the `tvmrt_ffi_arms` cfg:
/// `TVMFuncCall`'s fast arms for tvm-ffi kernels, built where such kernels can be loaded (`dso`,
/// `ffi-syslib`) and the fast paths are on.
fn runtime_build(root: &std::path::Path) {
    let shim = root.join("src/module/tvm_ffi/shim.c");
    println!("cargo:rerun-if-changed={}", shim.display());
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rustc-check-cfg=cfg(tvmrt_ffi_arms)");
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    // The model-checked build (feature `loom`): a cfg of this crate only, so that its
    // dependencies are the ones the plain test build compiled (a RUSTFLAGS `--cfg` would
    // rebuild them all).
    if feature("LOOM") {
        println!("cargo:rustc-cfg=loom");
    }
    if (feature("DSO") || feature("FFI_SYSLIB")) && !feature("BENCH_NO_FAST_PATHS") {
        println!("cargo:rustc-cfg=tvmrt_ffi_arms");
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"))
        .join("tvm_ffi_shim.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = std::process::Command::new(&cc)
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
        .arg(&shim)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` for the tvm-ffi shim: {e}"));
    assert!(status.success(), "building {} failed", shim.display());
}
