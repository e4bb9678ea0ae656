//! The floor links like the C library: std's default panic and allocation-error hooks replaced
//! by small stand-ins (../../capi/build_std_hooks.rs), so that it measures the same std.
include!("../../capi/build_std_hooks.rs");

fn main() {
    println!("cargo:rerun-if-changed=../../capi/build_std_hooks.rs");
    for arg in std_hook_link_args() {
        println!("cargo:rustc-cdylib-link-arg={arg}");
    }
}
