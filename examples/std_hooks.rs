//! The runtime's stand-ins for std's default panic hook and allocation-error hook
//! (`tvm_runtime::c_api::std_hooks`), linked in their place as in the C library (build.rs:
//! every example of this package links with capi/build_std_hooks.rs's arguments). Shows what a
//! panic and an allocation failure print (tests/std_hooks.rs checks it):
//!
//!   cargo run --example std_hooks -- panic   # a caught panic: its location and message
//!   cargo run --example std_hooks -- alloc   # an allocation failure: its size, then abort
use std::alloc::Layout;
// The runtime crate defines the stand-ins; naming nothing else of it, the example must link it.
use tvm_runtime as _;

#[cfg(tvmrt_std_hooks)]
extern "Rust" {
    // The panic stand-in's assembler name (src/c_api/std_hooks.rs). Naming it links the
    // runtime's object that defines the stand-ins' names, which the linker's --defsym needs.
    fn tvmrt_std_panic_hook(info: &std::panic::PanicHookInfo<'_>);
}

fn main() {
    #[cfg(tvmrt_std_hooks)]
    std::hint::black_box(tvmrt_std_panic_hook as unsafe fn(&std::panic::PanicHookInfo<'_>));
    match std::env::args().nth(1).as_deref() {
        Some("panic") => {
            let caught = std::panic::catch_unwind(|| panic!("example panic {}", 7));
            println!("caught: {}", caught.is_err());
        }
        Some("alloc") => {
            let layout = Layout::from_size_align(1 << 40, 8).expect("a valid layout");
            std::alloc::handle_alloc_error(layout)
        }
        _ => {
            eprintln!("usage: std_hooks panic|alloc");
            std::process::exit(2)
        }
    }
}
