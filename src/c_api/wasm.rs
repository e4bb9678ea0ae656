//! The C entry points only the WebAssembly build has (`wasm32-unknown-emscripten`): what TVM's
//! JavaScript runtime (tvmjs) calls besides the classic C ABI, and the tvm-ffi symbols that
//! kernels compiled by TVM >= 0.25 import when they are linked into the same wasm.
//!
//! tvmjs passes arguments through scratch space it takes from `TVMWasmAllocSpace` and wraps
//! its JS callbacks as packed functions with `TVMWasmFuncCreateFromCFunc`: a function whose
//! resource handle is an index into tvmjs's own table, called back through the wasm import
//! `env.TVMWasmPackedCFunc` and released through `env.TVMWasmPackedCFuncFinalizer`.

use crate::module::tvm_ffi::env;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::types::{TVMFunctionHandle, TVMRetValueHandle, TVMValue};
use std::alloc::Layout;
use std::ffi::{c_char, c_int, c_void};

extern "C" {
    /// tvmjs's dispatcher: calls the JS function registered under `resource_handle`.
    fn TVMWasmPackedCFunc(
        args: *mut TVMValue,
        type_codes: *mut c_int,
        num_args: c_int,
        ret: TVMRetValueHandle,
        resource_handle: *mut c_void,
    ) -> c_int;
    /// tvmjs's finalizer: frees the table slot `resource_handle`.
    fn TVMWasmPackedCFuncFinalizer(resource_handle: *mut c_void);
}

/// Alignment (and header size) of the blocks `TVMWasmAllocSpace` hands out: enough for any
/// TVMValue and for the block's recorded size in front of it.
const SPACE_ALIGN: usize = 16;

/// Scratch space for tvmjs (argument stacks): `size` bytes, 16-byte aligned, or NULL.
#[no_mangle]
pub extern "C" fn TVMWasmAllocSpace(size: c_int) -> *mut c_void {
    crate::c_boundary! {
        let layout = usize::try_from(size)
            .ok()
            .and_then(|n| n.checked_add(SPACE_ALIGN))
            .and_then(|total| Layout::from_size_align(total, SPACE_ALIGN).ok())
            .ok_or_else(|| Error::value_fmt(format_args!("TVMWasmAllocSpace: bad size {size}")))?;
        // SAFETY: a non-zero size (at least the header).
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return Err(Error::value_fmt(format_args!(
                "TVMWasmAllocSpace: out of memory for {size} bytes"
            )));
        }
        // SAFETY: the block holds at least the header, aligned for a usize.
        unsafe {
            (p as *mut usize).write(layout.size());
            Ok(p.add(SPACE_ALIGN) as *mut c_void)
        }
    }
}

/// Frees a block from `TVMWasmAllocSpace` (NULL is ignored).
///
/// # Safety
/// `data` must be NULL or a block `TVMWasmAllocSpace` returned, not freed yet.
#[no_mangle]
pub unsafe extern "C" fn TVMWasmFreeSpace(data: *mut c_void) {
    crate::c_boundary! {
        if !data.is_null() {
            // SAFETY: caller contract: the header sits SPACE_ALIGN bytes before the data.
            unsafe {
                let p = (data as *mut u8).sub(SPACE_ALIGN);
                let total = (p as *const usize).read();
                std::alloc::dealloc(p, Layout::from_size_align_unchecked(total, SPACE_ALIGN));
            }
        }
        Ok(())
    }
}

/// Wraps tvmjs's JS function number `resource_handle` as a packed function.
///
/// # Safety
/// `out` must be writable; tvmjs keeps the table entry until the finalizer runs.
#[no_mangle]
pub unsafe extern "C" fn TVMWasmFuncCreateFromCFunc(
    resource_handle: *mut c_void,
    out: *mut TVMFunctionHandle,
) -> c_int {
    crate::c_boundary! {
        super::check_out(out, "TVMWasmFuncCreateFromCFunc: out")?;
        // SAFETY: tvmjs's imports have the packed C function and finalizer signatures.
        let f = unsafe {
            Function::from_c(TVMWasmPackedCFunc, resource_handle, Some(TVMWasmPackedCFuncFinalizer))
        };
        // SAFETY: checked non-null.
        unsafe { *out = f.into_object().into_raw() as *mut c_void };
        Ok(())
    }
}

/// tvm-ffi: a linked kernel object registers one of its symbols with the system library.
///
/// # Safety
/// `name` must be a NUL-terminated string; `ptr` what the name says to TVM-compiled code.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModRegisterSystemLibSymbol(
    name: *const c_char,
    ptr: *mut c_void,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let name = unsafe { super::cstr(name, "TVMFFIEnvModRegisterSystemLibSymbol: name")? };
        // SAFETY: forwarded contract.
        unsafe { crate::module::system_lib::register_symbol(name, ptr) };
        Ok(())
    }
}

/// tvm-ffi: a kernel raises an error (kind, message parts).
///
/// # Safety
/// `kind` NULL or a string; `parts` NULL or `n` entries, each NULL or a string.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStrParts(
    kind: *const c_char,
    parts: *const *const c_char,
    n: i32,
) {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let (kind, msg) = unsafe {
            (
                crate::module::tvm_ffi::call::c_str_or(kind, "RuntimeError").into_owned(),
                env::join_parts(parts, n),
            )
        };
        env::raise_kind(&kind, msg);
        Ok(())
    }
}

/// tvm-ffi: a kernel raises an error (kind, message).
///
/// # Safety
/// `kind` and `message` NULL or strings.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStr(kind: *const c_char, message: *const c_char) {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe { env::set_raised_from_cstr(kind, message) };
        Ok(())
    }
}

/// A tvm-ffi status (0, or nonzero with the error raised for the kernel) as a result: the
/// error stays raised for the kernel's caller and is also this entry's last error.
fn ffi_status(rc: c_int) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    let e = env::take_raised();
    env::raise(e.clone());
    Err(e)
}

/// tvm-ffi: a kernel calls a packed function it looked up.
///
/// # Safety
/// tvm-ffi's contract: a live function handle, `n` valid arguments, a writable result.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCall(
    func: *mut c_void,
    args: *const crate::module::tvm_ffi::abi::TVMFFIAny,
    n: i32,
    result: *mut crate::module::tvm_ffi::abi::TVMFFIAny,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        ffi_status(unsafe { env::function_call(func, args, n, result) })
    }
}

/// tvm-ffi: a kernel looks a function up through its library context.
///
/// # Safety
/// tvm-ffi's contract: `ctx` NULL or the module context, `name` a string, `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModLookupFromImports(
    ctx: *mut c_void,
    name: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        ffi_status(unsafe { env::env_lookup(ctx, name, out) })
    }
}

/// tvm-ffi: runs a kernel's one-time initialiser of a handle slot.
///
/// # Safety
/// tvm-ffi's contract: `addr` a pointer-sized variable of the kernel object.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleInitOnce(
    addr: *mut *mut c_void,
    init: Option<unsafe extern "C" fn(*mut *mut c_void) -> c_int>,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        ffi_status(unsafe { env::handle_init_once(addr, init) })
    }
}
