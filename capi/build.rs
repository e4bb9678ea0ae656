//! The C library: the build steps of the runtime's sources (../build_runtime.rs), and its link
//! settings: TVM's SONAME, so that programs linked against the reference
//! `libtvm_runtime.so` resolve to ours unchanged, and libm (compiled models call expf, tanhf,
//! ... without naming libm: the reference runtime brings it in through libstdc++, so a program
//! that links only libtvm_runtime.so must find it through ours too, whichever feature set).
//! And the runtime's stand-ins for std's default panic and allocation-error hooks
//! (src/c_api/std_hooks.rs, build_std_hooks.rs): in the shared library through its link
//! arguments; for the static library they are written to `libtvm_runtime.ldflags` beside it
//! (gcc's `@file` form), which a program linking `libtvm_runtime.a` may pass to its linker.
include!("../build_runtime.rs");
include!("build_std_hooks.rs");

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../build_runtime.rs");
    println!("cargo:rerun-if-changed=build_std_hooks.rs");
    // The runtime's sources are compiled here (Cargo.toml): their build steps too.
    runtime_build(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    if std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default() == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_runtime.so");
        println!("cargo:rustc-cdylib-link-arg=-Wl,--push-state,--no-as-needed,-lm,--pop-state");
    }
    let hooks = std_hook_link_args();
    for arg in &hooks {
        println!("cargo:rustc-cdylib-link-arg={arg}");
    }
    // OUT_DIR is <target dir>[/<triple>]/<profile>/build/<package>-<hash>/out: the libraries
    // are three levels up.
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    if let Some(lib_dir) = out.ancestors().nth(3) {
        let text: String = hooks.iter().map(|a| format!("{a}\n")).collect();
        let file = lib_dir.join("libtvm_runtime.ldflags");
        if std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&file, text).expect("writing libtvm_runtime.ldflags");
        }
    }
}
