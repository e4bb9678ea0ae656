//! Build script: gives the shared library TVM's SONAME so that programs linked against the
//! reference `libtvm_runtime.so` resolve to ours unchanged.
fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_runtime.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
