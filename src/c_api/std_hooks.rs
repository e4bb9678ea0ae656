//! Stand-ins for two of std's default hooks, which the linker puts in their place when it
//! links the C library (`capi/build.rs`, with the arguments of `capi/build_std_hooks.rs`:
//! `--defsym` of std's symbol to the stand-in's).
//!
//! std's default panic hook and its default allocation-error hook print a backtrace when
//! `RUST_BACKTRACE` asks for one, and so bring std's symbolizer into every library (a DWARF
//! reader, an address-to-line mapper, a demangler and a zlib inflater: about 230 KB of a
//! stripped `libtvm_runtime.so`, most of the `minimal` set). These print the lines std prints
//! first and no backtrace. Nothing else of std's panic machinery changes: a panic still runs
//! the hook set with `std::panic::set_hook` if there is one, unwinds, and is caught at the C
//! boundary, where it becomes the last error; an allocation failure still ends the process.
//!
//! The linker sends std's calls of `std::panicking::default_hook(&PanicHookInfo)` and
//! `std::alloc::default_alloc_error_hook(Layout)` here, so the stand-ins have exactly those
//! signatures (std's, unchanged since `PanicHookInfo` replaced `PanicInfo` in Rust 1.81).
//! Their assembler names, `tvmrt_std_panic_hook` and `tvmrt_std_alloc_error_hook`, are
//! hidden: the C library does not export them.

use std::alloc::Layout;
use std::io::Write;
use std::panic::PanicHookInfo;

/// The panic hook in place of std's default: `panicked at <file>:<line>:<column>:` and the
/// message, on standard error (std's first two lines without the thread's name, which std
/// reads in a way that cannot fail; asking for it here could panic inside the hook).
pub fn panic_hook(info: &PanicHookInfo<'_>) {
    let _ = write_panic(&mut std::io::stderr(), info);
}

/// What [`panic_hook`] prints, written to `w`.
pub fn write_panic(w: &mut dyn Write, info: &PanicHookInfo<'_>) -> std::io::Result<()> {
    writeln!(w, "{info}")
}

/// The allocation-error hook in place of std's default: `memory allocation of <n> bytes
/// failed` on standard error, as std prints it (std then aborts the process). Allocates
/// nothing.
pub fn alloc_error_hook(layout: Layout) {
    let _ = writeln!(
        std::io::stderr(),
        "memory allocation of {} bytes failed",
        layout.size()
    );
}

// The stand-ins' assembler names, hidden (not exported from the shared library), for the
// linker's `--defsym`: defined where capi/build_std_hooks.rs links them (cfg
// `tvmrt_std_hooks`: Linux on x86-64, aarch64, armv7 and riscv64, std's symbols found);
// elsewhere std keeps its hooks.
#[cfg(tvmrt_std_hooks)]
std::arch::global_asm!(
    ".globl tvmrt_std_panic_hook",
    ".hidden tvmrt_std_panic_hook",
    ".type tvmrt_std_panic_hook, %function",
    ".set tvmrt_std_panic_hook, {panic}",
    ".globl tvmrt_std_alloc_error_hook",
    ".hidden tvmrt_std_alloc_error_hook",
    ".type tvmrt_std_alloc_error_hook, %function",
    ".set tvmrt_std_alloc_error_hook, {alloc}",
    panic = sym panic_hook,
    alloc = sym alloc_error_hook,
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The report is std's `PanicHookInfo` display: the location, then the message. (The
    /// hook is the process's for a moment: panics of other test threads go to the previous
    /// hook meanwhile.)
    #[test]
    fn panic_report_names_the_location_and_the_message() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let previous = Arc::new(std::panic::take_hook());
        let me = std::thread::current().id();
        let (sink, others) = (Arc::clone(&seen), Arc::clone(&previous));
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().id() == me {
                let _ = write_panic(&mut *sink.lock().unwrap(), info);
            } else {
                others(info)
            }
        }));
        let caught = std::panic::catch_unwind(|| panic!("stand-in hook test {}", 42));
        drop(std::panic::take_hook());
        let previous = Arc::try_unwrap(previous).unwrap_or_else(|_| unreachable!());
        std::panic::set_hook(previous);
        assert!(caught.is_err());
        let text = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
        let prefix = format!("panicked at {}:", file!());
        assert!(text.starts_with(&prefix), "{text}");
        assert!(text.ends_with(":\nstand-in hook test 42\n"), "{text}");
    }
}
