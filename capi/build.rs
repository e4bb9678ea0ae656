//! Link settings of the C library: TVM's SONAME, so that programs linked against the reference
//! `libtvm_runtime.so` resolve to ours unchanged, and libm (compiled models call expf, tanhf,
//! ... without naming libm: the reference runtime brings it in through libstdc++, so a program
//! that links only libtvm_runtime.so must find it through ours too, whichever feature set).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default() == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_runtime.so");
        println!("cargo:rustc-cdylib-link-arg=-Wl,--push-state,--no-as-needed,-lm,--pop-state");
    }
}
