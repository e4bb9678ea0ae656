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
    aarch64_lld();
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

/// aarch64 Linux: the shared library is linked by the toolchain's own lld, as rustc links
/// x86-64 by default (`gcc-ld/ld.lld` in the host toolchain, through the C compiler's
/// `-fuse-ld=lld -B<dir>`). GNU ld pads the file so that the end of RELRO falls on a 64 KB
/// boundary (aarch64's largest page size), up to 64 KB of zeros in the file (issue 32:
/// minimal 395,912 B with GNU ld, 348,160 with lld); lld pads only the address space.
/// `TVMRT_AARCH64_LLD=0` keeps the C compiler's linker; a toolchain without lld keeps it too.
fn aarch64_lld() {
    println!("cargo:rerun-if-env-changed=TVMRT_AARCH64_LLD");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    if env("CARGO_CFG_TARGET_ARCH") != "aarch64"
        || env("CARGO_CFG_TARGET_OS") != "linux"
        || env("TVMRT_AARCH64_LLD") == "0"
    {
        return;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
    else {
        return;
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dir = std::path::Path::new(&sysroot)
        .join("lib/rustlib")
        .join(env("HOST"))
        .join("bin/gcc-ld");
    if dir.join("ld.lld").exists() {
        println!("cargo:rustc-cdylib-link-arg=-fuse-ld=lld");
        println!("cargo:rustc-cdylib-link-arg=-B{}", dir.display());
    } else {
        println!(
            "cargo:warning=no lld in the toolchain ({}): the aarch64 library is linked by the C \
             compiler's linker",
            dir.display()
        );
    }
}
