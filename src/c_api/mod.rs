//! The `extern "C"` surface: one file per section of `c_runtime_api.h` / `c_backend_api.h`.
//!
//! Every entry converts its arguments, delegates to the room that does the work, and runs
//! inside the one C boundary, [`c_boundary!`](crate::c_boundary) ([`boundary`]): a panic is
//! caught, an error is recorded as this thread's last error (`TVMGetLastError`), and the value
//! returned to C is chosen by the entry's return type (`-1`, NULL or nothing). No logic lives
//! here: what an entry does beyond converting is a function of a room below.
//!
//! # Fast paths outside the boundary
//!
//! This table is the complete list of code that runs before an entry's boundary. Each fast
//! path handles only cases in which nothing can panic (no allocation, indexing, unwrapping or
//! formatting) and hands every other case, and every failure, to the entry's general path
//! inside the boundary. Each is kept because the benchmark (`scripts/bench.sh`, release
//! build, the same machine, best of 3 rounds) measures it faster than the same entry with the
//! fast path switched off (`--features bench-no-fast-paths`; `scripts/bench_boundary.sh` runs
//! both builds side by side):
//!
//! | entry | fast path | benchmark | with fast path | boundary only |
//! | --- | --- | --- | --- | --- |
//! | `TVMFuncCall` | `func::call_fast`: the function's `FastCall` kind (fixed when it is made) picks an arm, each a tail call reached by one indirect jump, and the general path is a tail call of `func::call_general`, whose body is the boundary, so that `TVMFuncCall` itself sets up no stack frame: C callbacks (`func::call_c`) and compiled (backend) functions (`func::call_backend`) whose return value is plain data; tvm-ffi kernels with plain arguments (`func::call_ffi_kernel`: converted unrolled per count, the count learned by the function object so that its next call goes straight to that conversion, the kernel called directly, not through the trampoline) | `kernel_call.add_one.dltensor` / `.ndarray`, `kernel_call.dso.dltensor` / `.ndarray` | 19.9 / 25.0 / 32.9 / 34.2 ns | 62.5 / 91.8 / 78.9 / 89.8 ns |
//! | `TVMFuncCall` + `TVMCFuncSetReturn` | `func::set_return_fast`: a plain value into a slot that owns nothing, written as tag and payload (`RetValue::write_raw`) | `packed_call` (a C callback that sets its return) | 19.3 ns | 69.4 ns |
//! | `TVMBackendAllocWorkspace` / `TVMBackendFreeWorkspace` | the CPU workspace pool | `workspace_4k` | 61.0 ns | 123 ns |
//!
//! Measured 2026-11-23 on a shared 2-CPU machine (load average 7 to 10): the best of two
//! `scripts/bench.sh --rounds 3` runs of the shipped build and of three of the boundary-only
//! build, taken alternately; the reference's numbers in the same runs varied by up to 2x, so
//! only the size of the gap is meaningful. The tvm-ffi arm is measured by instruction counts
//! (`scripts/bench_callgrind.sh`, benches/README.md): 301 → 275 → 237 → 223 → 200 instructions
//! per call of a three-tensor kernel. Entries with a
//! fast path run their boundary out of line (`c_boundary! { #[cold] ... }`).

pub mod backend;
pub mod boundary;
pub mod device;
pub mod error;
pub mod func;
pub mod module;
pub mod ndarray;
pub mod object;
pub mod std_hooks;
/// The WebAssembly build's own entry points and imports, declared in no header.
/// cbindgen:ignore
#[cfg(target_os = "emscripten")]
pub mod wasm;
#[cfg(feature = "web")]
pub mod web;

use crate::packed_func::error::{Error, Result};
use std::ffi::{c_char, CStr};

/// Reads a C string argument; NULL or non-UTF-8 is an error naming the parameter.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
#[inline]
pub(crate) unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(is_null(what));
    }
    // SAFETY: caller contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| not_utf8(what))
}

/// Fails when an out-pointer is NULL.
#[inline(always)]
pub(crate) fn check_out<T>(p: *mut T, what: &str) -> Result<()> {
    if p.is_null() {
        Err(is_null(what))
    } else {
        Ok(())
    }
}

/// "`what` is NULL" (one out-of-line copy of the message's formatting for every check).
#[cold]
#[inline(never)]
fn is_null(what: &str) -> Error {
    Error::value_fmt(format_args!("{what} is NULL"))
}

/// "`what` is not valid UTF-8".
#[cold]
#[inline(never)]
fn not_utf8(what: &str) -> Error {
    Error::value_fmt(format_args!("{what} is not valid UTF-8"))
}

/// This room's part of the start-up: hands the module room the entry points compiled code
/// calls through its context slots (`__TVMFuncCall`, ...), which live here, above it.
pub(crate) fn register(_r: &mut crate::packed_func::registry::Registrar) {
    #[cfg(feature = "web")]
    web::register(_r);
    let table: Vec<(&'static str, usize)> = vec![
        ("__TVMFuncCall", func::TVMFuncCall as *const () as usize),
        (
            "__TVMAPISetLastError",
            error::TVMAPISetLastError as *const () as usize,
        ),
        (
            "__TVMBackendGetFuncFromEnv",
            backend::TVMBackendGetFuncFromEnv as *const () as usize,
        ),
        (
            "__TVMBackendAllocWorkspace",
            backend::TVMBackendAllocWorkspace as *const () as usize,
        ),
        (
            "__TVMBackendFreeWorkspace",
            backend::TVMBackendFreeWorkspace as *const () as usize,
        ),
        (
            "__TVMBackendParallelLaunch",
            backend::TVMBackendParallelLaunch as *const () as usize,
        ),
        (
            "__TVMBackendParallelBarrier",
            backend::TVMBackendParallelBarrier as *const () as usize,
        ),
    ];
    crate::module::library::set_context_functions(table);
}
