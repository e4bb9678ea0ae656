//! PackedFunc and the global registry.

use super::{check_out, cstr};
use crate::object::{payload_ptr, Object, ObjectRef, TYPE_PACKED_FUNC};
use crate::packed_func::error::Error;
#[cfg(not(feature = "bench-no-fast-paths"))]
use crate::packed_func::function::{fast_kind, BackendPackedCFunc, FastCall};
use crate::packed_func::function::{Function, PackedCFunc, PackedCFuncFinalizer, PackedFuncObj};
use crate::packed_func::registry;
use crate::packed_func::types::{type_code as tc, TVMByteArray, TVMValue};
use crate::packed_func::types::{TVMFunctionHandle, TVMRetValueHandle};
use crate::packed_func::value::RetValue;
#[cfg(not(feature = "bench-no-fast-paths"))]
use crate::packed_func::value::{POD_TAGS, RAW_IN_CODES, RAW_OUT_TAGS};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// Frees a function handle (`TVMFuncFree`).
///
/// # Safety
/// `func` must be NULL or a function handle the caller owns.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncFree(func: TVMFunctionHandle) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe { super::object::free_handle(func) };
        Ok(())
    }
}

/// Calls a function (`TVMFuncCall`). Returned objects belong to the caller; returned strings
/// and bytes stay valid until the next call on this thread.
///
/// # Safety
/// `func` must be a live function handle; the argument arrays must hold `num_args` entries;
/// the out-pointers must be valid.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncCall(
    func: TVMFunctionHandle,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    #[cfg(not(feature = "bench-no-fast-paths"))]
    {
        // SAFETY: forwarded contract.
        if let Some(r) = unsafe {
            call_fast(
                func,
                arg_values,
                type_codes,
                num_args,
                ret_val,
                ret_type_code,
            )
        } {
            return r;
        }
    }
    // SAFETY: forwarded contract.
    unsafe {
        call_general(
            func as usize,
            arg_values,
            type_codes,
            num_args,
            ret_val,
            ret_type_code,
        )
    }
}

/// The fast path of [`TVMFuncCall`] (listed in [`crate::c_api`]'s table of fast paths): C
/// callbacks, compiled functions and tvm-ffi kernels, chosen by the function's [`FastCall`]
/// kind (one load and one indirect jump through [`ARMS`]: as cheap for compiled functions as
/// a compare and a direct jump, measured, and two instructions less for the others), each
/// arm a tail call of its own function so that neither this dispatch nor `TVMFuncCall` sets
/// up a stack frame. Nothing here or in the arms can panic (no allocation, indexing or
/// unwrapping), so it runs outside the boundary; a failing callee has already set the last
/// error, which is passed on untouched. Returns `None` for what it does not handle
/// (Rust functions, bad handles, NULL out slots), which then takes the general path.
///
/// # Safety
/// As `TVMFuncCall`.
#[cfg(not(feature = "bench-no-fast-paths"))]
#[inline(always)]
unsafe fn call_fast(
    func: TVMFunctionHandle,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> Option<c_int> {
    let obj = func as *mut Object;
    if obj.is_null()
        // SAFETY: a non-null handle is a live object by the caller's contract.
        || unsafe { (*obj).type_index() } != TYPE_PACKED_FUNC
        || ret_val.is_null()
        || ret_type_code.is_null()
    {
        return None;
    }
    // SAFETY: the type index says the payload is a PackedFuncObj, which lives through the
    // call (the caller holds a reference).
    let kind = unsafe { (*payload_ptr::<PackedFuncObj>(obj)).fast().kind() };
    // The function's address is passed as a number, not a pointer: the optimiser would
    // otherwise pass the fields the arm reads instead (one argument more than fits in
    // registers, so no tail call).
    // SAFETY: a kind is below `fast_kind::COUNT`, the table's length (`FastCall::kind`).
    let arm = unsafe { *ARMS.get_unchecked(kind as usize) };
    // SAFETY: the arm for the function's kind; forwarded contract; checked non-null out slots.
    Some(unsafe {
        arm(
            obj as usize,
            arg_values,
            type_codes,
            num_args,
            ret_val,
            ret_type_code,
        )
    })
}

/// An arm of [`call_fast`]: the function object's address, then `TVMFuncCall`'s arguments
/// (with non-null out slots).
#[cfg(not(feature = "bench-no-fast-paths"))]
type Arm = unsafe extern "C" fn(
    usize,
    *mut TVMValue,
    *mut c_int,
    c_int,
    *mut TVMValue,
    *mut c_int,
) -> c_int;

/// [`call_fast`]'s arms, indexed by [`fast_kind`] (the unused kinds the general path): one
/// indirect jump reaches the arm.
#[cfg(not(feature = "bench-no-fast-paths"))]
static ARMS: [Arm; fast_kind::COUNT as usize] = {
    let mut t: [Arm; fast_kind::COUNT as usize] = [call_general; fast_kind::COUNT as usize];
    t[fast_kind::C as usize] = call_c;
    t[fast_kind::BACKEND as usize] = call_backend;
    // tvm-ffi kernels come only from the loaders of `dso` and `ffi-syslib`: without them, a
    // kernel made through the Rust API takes the general path (its trampoline).
    #[cfg(tvmrt_ffi_arms)]
    {
        t[fast_kind::TVM_FFI as usize] = call_ffi_kernel;
        let mut n = 0;
        while n <= fast_kind::TVM_FFI_MAX_LEARNED {
            t[fast_kind::tvm_ffi_args(n) as usize] = FFI_ARMS[n];
            n += 1;
        }
    }
    t
};

/// The [`FastCall`] of a function object.
///
/// # Safety
/// `obj` is the address of a live PackedFunc object.
#[cfg(not(feature = "bench-no-fast-paths"))]
#[inline(always)]
unsafe fn fast_of<'a>(obj: usize) -> &'a FastCall {
    // SAFETY: the caller's contract.
    unsafe { (*payload_ptr::<PackedFuncObj>(obj as *mut Object)).fast() }
}

/// The general path of `TVMFuncCall`, inside the boundary: [`call_fast`]'s arm for functions
/// without a fast path (Rust closures), and what `TVMFuncCall` jumps to for anything the fast
/// path does not take (bad handles too, refused here). A function of its own, reached by a
/// tail call, so that `TVMFuncCall` sets up a stack frame only on the arm that needs one.
///
/// # Safety
/// As `TVMFuncCall`, with the handle passed as a number.
#[cold]
#[inline(never)]
unsafe extern "C" fn call_general(
    obj: usize,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe {
            call_general_body(
                obj as TVMFunctionHandle,
                arg_values,
                type_codes,
                num_args,
                ret_val,
                ret_type_code,
            )
        }
    }
}

/// The general path of `TVMFuncCall`, run inside the boundary.
///
/// # Safety
/// As `TVMFuncCall`.
unsafe fn call_general_body(
    func: TVMFunctionHandle,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> crate::packed_func::Result<()> {
    let obj = func as *mut Object;
    // SAFETY: a non-null handle is a live object by the caller's contract.
    if obj.is_null() || unsafe { (*obj).type_index() } != TYPE_PACKED_FUNC {
        return Err(Error::value("TVMFuncCall: the handle is not a PackedFunc"));
    }
    // SAFETY: the type index says the payload is a PackedFuncObj.
    let pf = unsafe { &*payload_ptr::<PackedFuncObj>(obj) };
    let mut rv = RetValue::Null;
    // SAFETY: forwarded contract on the argument arrays.
    unsafe { pf.call_raw(arg_values, type_codes, num_args, &mut rv)? };
    write_ret(rv, ret_val, ret_type_code)
}

/// [`call_fast`]'s arm for a C callback: a plain return value (set through
/// `TVMCFuncSetReturn`'s fast path) is copied out here; anything else, and a failure, goes
/// through [`finish_call`].
///
/// # Safety
/// As `TVMFuncCall`, with non-null out slots; `obj` is the address of a live PackedFunc
/// object whose [`FastCall`] is a C callback's.
#[cfg(not(feature = "bench-no-fast-paths"))]
#[inline(never)]
unsafe extern "C" fn call_c(
    obj: usize,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let fast = unsafe { fast_of(obj) };
    let mut rv = RetValue::Null;
    // A zero payload, so that a callback that sets no value returns a zero `TVMValue`.
    // SAFETY: `rv` owns nothing; a NULL value of code `NULLPTR`.
    unsafe { RetValue::write_raw(&mut rv, TVMValue::default(), tc::NULLPTR as u32) };
    // SAFETY: a C callback's code is a `PackedCFunc` (set with the kind); forwarded
    // contract; `rv` is the slot TVMCFuncSetReturn writes.
    let r = unsafe {
        let f = std::mem::transmute::<*const c_void, PackedCFunc>(fast.code);
        f(
            arg_values,
            type_codes,
            num_args,
            &mut rv as *mut RetValue as *mut c_void,
            fast.resource,
        )
    };
    if r == 0 {
        // SAFETY: `rv` is a valid RetValue.
        let (tag, v) = unsafe { RetValue::read_raw(&rv) };
        if (RAW_OUT_TAGS >> (tag & 31)) & 1 != 0 {
            // A plain value: nothing to drop.
            std::mem::forget(rv);
            // SAFETY: checked non-null out slots.
            unsafe {
                *ret_val = v;
                *ret_type_code = tag as c_int;
            }
            return 0;
        }
    }
    finish_call(r, rv, ret_val, ret_type_code)
}

/// [`call_fast`]'s arm for a compiled function: a plain return value is copied out, an
/// owning one moves out through [`take_backend_ret`]. The same steps as `backend_done`,
/// written out: calling it here costs packed and kernel calls 5 instructions each
/// (callgrind, scripts/bench_callgrind.sh).
///
/// # Safety
/// As `TVMFuncCall`, with non-null out slots; `obj` is the address of a live PackedFunc
/// object whose [`FastCall`] is a compiled function's.
#[cfg(not(feature = "bench-no-fast-paths"))]
#[inline(never)]
unsafe extern "C" fn call_backend(
    obj: usize,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let fast = unsafe { fast_of(obj) };
    let mut out = TVMValue::default();
    let mut code = tc::NULLPTR;
    // SAFETY: a compiled function's code is a `BackendPackedCFunc` (set with the kind);
    // forwarded contract; the out slots are valid locals.
    let r = unsafe {
        let f = std::mem::transmute::<*const c_void, BackendPackedCFunc>(fast.code);
        f(
            arg_values,
            type_codes,
            num_args,
            &mut out,
            &mut code,
            fast.resource,
        )
    };
    if r != 0 {
        return failed();
    }
    // A plain value (or a non-NULL tensor pointer) is passed on bit for bit.
    if RetValue::is_pod_c(&out, code) {
        // SAFETY: checked non-null out slots.
        unsafe {
            *ret_val = out;
            *ret_type_code = code;
        }
        return 0;
    }
    take_backend_ret(out, code, ret_val, ret_type_code)
}

/// The status of a call whose callee failed (its error is already set): kept out of line so
/// that the success path does not set up -1 before testing the callee's status.
#[cfg(not(feature = "bench-no-fast-paths"))]
#[cold]
#[inline(never)]
fn failed() -> c_int {
    -1
}

/// A compiled function's status and out slots passed on to `TVMFuncCall`'s caller, as
/// [`call_backend`] does: a failure keeps the callee's error, a plain value is copied, an
/// owning one moves out.
#[cfg(tvmrt_ffi_arms)]
fn backend_done(
    r: c_int,
    out: TVMValue,
    code: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    if r != 0 {
        return -1;
    }
    // A plain value (or a non-NULL tensor pointer) is passed on bit for bit.
    if RetValue::is_pod_c(&out, code) {
        // SAFETY: the caller checked the out slots non-null.
        unsafe {
            *ret_val = out;
            *ret_type_code = code;
        }
        return 0;
    }
    take_backend_ret(out, code, ret_val, ret_type_code)
}

/// [`call_fast`]'s arm for a tvm-ffi kernel: plain arguments are converted (unrolled for up
/// to four, one function each) and the kernel called there, not through its trampoline, and
/// a None result (what TIR kernels return) is written straight to the caller's slots.
/// Anything else takes the trampoline's own paths, with the same results and errors. The
/// count is learned ([`FastCall::learn`]): the next call of the function goes straight to the
/// function for that count.
///
/// # Safety
/// As `TVMFuncCall`, with non-null out slots; `obj` is the address of a live PackedFunc
/// object whose [`FastCall`] is a tvm-ffi kernel's.
#[cfg(tvmrt_ffi_arms)]
#[inline(never)]
unsafe extern "C" fn call_ffi_kernel(
    obj: usize,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { fast_of(obj) }.learn(num_args as u32 as usize);
    if num_args as u32 >= FFI_ARMS.len() as u32 {
        // SAFETY: forwarded contract.
        return unsafe {
            ffi_kernel_many(
                obj,
                arg_values,
                type_codes,
                num_args,
                ret_val,
                ret_type_code,
            )
        };
    }
    // SAFETY: the arm for this count; forwarded contract.
    unsafe {
        FFI_ARMS[num_args as usize](
            obj,
            arg_values,
            type_codes,
            num_args,
            ret_val,
            ret_type_code,
        )
    }
}

/// [`call_ffi_kernel`]'s arms for zero to four arguments, indexed by the count.
#[cfg(tvmrt_ffi_arms)]
static FFI_ARMS: [Arm; 5] = [
    ffi_kernel_n::<0>,
    ffi_kernel_n::<1>,
    ffi_kernel_n::<2>,
    ffi_kernel_n::<3>,
    ffi_kernel_n::<4>,
];

/// [`call_ffi_kernel`] for `N` arguments (any other count goes back to it): the arguments that every TVM
/// client passes, non-NULL NDArray handles, are converted here; anything else goes to
/// [`ffi_kernel_mixed`]. The caller's slots get None before the kernel runs and their
/// addresses wait in the frame, so that the success path keeps nothing in callee-saved
/// registers; a failure or another result goes through [`ffi_kernel_finish`], which rewrites
/// them.
///
/// # Safety
/// As [`call_ffi_kernel`], with `N` arguments.
#[cfg(tvmrt_ffi_arms)]
#[inline(never)]
unsafe extern "C" fn ffi_kernel_n<const N: usize>(
    obj: usize,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    use crate::module::tvm_ffi::call as ffi;
    if num_args as usize != N {
        // Reached by a kind learned from a call with another count (learning happens once,
        // so this only dispatches by the count).
        // SAFETY: forwarded contract.
        return unsafe {
            call_ffi_kernel(
                obj,
                arg_values,
                type_codes,
                num_args,
                ret_val,
                ret_type_code,
            )
        };
    }
    let mut frame = FfiFrame::<N> {
        result: crate::module::tvm_ffi::abi::TVMFFIAny::NONE,
        args: [std::mem::MaybeUninit::uninit(); N],
        ret_val,
        ret_type_code,
    };
    // SAFETY: forwarded contract: `N` entries each.
    if !unsafe { ffi::tensor_args::<N>(arg_values, type_codes, &mut frame.args) } {
        // SAFETY: forwarded contract.
        return unsafe {
            ffi_kernel_mixed::<N>(
                obj,
                arg_values,
                type_codes,
                num_args,
                ret_val,
                ret_type_code,
            )
        };
    }
    // SAFETY: checked non-null out slots (by `TVMFuncCall`'s fast path).
    unsafe {
        *ret_val = TVMValue::default();
        *ret_type_code = tc::NULLPTR;
    }
    // The function object's address, already in the handle's register, is the kernel's
    // handle (see `call_converted`).
    // SAFETY: the caller's contract; a tvm-ffi kernel's code is the kernel (set with the
    // kind); all `N` arguments converted and written.
    let rc = unsafe {
        ffi::call_converted(
            fast_of(obj).code,
            obj as *mut c_void,
            &frame.args,
            N,
            &mut frame.result,
        )
    };
    // Success with a None result (type index 0), the slots already written: one test, which
    // folds the status into the result's type index (read by `ffi_kernel_finish` only when
    // the status is 0, and then unchanged). `rc` is 0 there; returning it, not a constant,
    // saves setting up the constant.
    frame.result.type_index |= rc;
    if frame.result.type_index == 0 {
        return rc;
    }
    ffi_kernel_finish(rc, &frame.result, frame.ret_val, frame.ret_type_code)
}

/// The locals of [`ffi_kernel_n`], in one place whose address the kernel sees (through its
/// arguments), so that the caller's slots are read back from memory after the call.
#[cfg(tvmrt_ffi_arms)]
#[repr(C)]
struct FfiFrame<const N: usize> {
    result: crate::module::tvm_ffi::abi::TVMFFIAny,
    args: [std::mem::MaybeUninit<[u64; 2]>; N],
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
}

/// [`ffi_kernel_n`] for arguments other than non-NULL NDArray handles: each converted by its
/// type code (through the table of plain values), anything not plain through the trampoline.
///
/// # Safety
/// As [`call_ffi_kernel`], with `N` arguments.
#[cfg(tvmrt_ffi_arms)]
#[inline(never)]
unsafe fn ffi_kernel_mixed<const N: usize>(
    obj: usize,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    _num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    use crate::module::tvm_ffi::call as ffi;
    // SAFETY: the caller's contract; a tvm-ffi kernel's code is the kernel (set with the
    // kind).
    let kernel = unsafe { fast_of(obj) }.code;
    let mut args = [std::mem::MaybeUninit::<[u64; 2]>::uninit(); N];
    // SAFETY: forwarded contract: `N` entries each.
    if !unsafe { ffi::plain_args::<N>(arg_values, type_codes, &mut args) } {
        // SAFETY: forwarded contract; the trampoline takes the kernel as its resource.
        return unsafe {
            ffi_kernel_general(
                arg_values,
                type_codes,
                N as c_int,
                ret_val,
                ret_type_code,
                kernel as *mut c_void,
            )
        };
    }
    let mut result = crate::module::tvm_ffi::abi::TVMFFIAny::NONE;
    // SAFETY: forwarded contract; all `N` arguments converted and written.
    let rc = unsafe { ffi::call_converted(kernel, obj as *mut c_void, &args, N, &mut result) };
    ffi_kernel_done(rc, &result, ret_val, ret_type_code)
}

/// [`call_ffi_kernel`] for more than four arguments.
///
/// # Safety
/// As [`call_ffi_kernel`].
#[cfg(tvmrt_ffi_arms)]
#[inline(never)]
unsafe extern "C" fn ffi_kernel_many(
    obj: usize,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    use crate::module::tvm_ffi::call as ffi;
    // SAFETY: the caller's contract; a tvm-ffi kernel's code is the kernel (set with the
    // kind).
    let kernel = unsafe { fast_of(obj) }.code;
    let mut result = crate::module::tvm_ffi::abi::TVMFFIAny::NONE;
    // SAFETY: forwarded contract.
    match unsafe { ffi::call_plain(arg_values, type_codes, num_args, kernel, &mut result) } {
        Some(rc) => ffi_kernel_done(rc, &result, ret_val, ret_type_code),
        // SAFETY: forwarded contract; the trampoline takes the kernel as its resource.
        None => unsafe {
            ffi_kernel_general(
                arg_values,
                type_codes,
                num_args,
                ret_val,
                ret_type_code,
                kernel as *mut c_void,
            )
        },
    }
}

/// A tvm-ffi kernel's status and result passed on to `TVMFuncCall`'s caller: None is written
/// here, anything else (and a failure) goes through [`ffi_kernel_finish`].
#[cfg(tvmrt_ffi_arms)]
#[inline(always)]
fn ffi_kernel_done(
    rc: c_int,
    result: &crate::module::tvm_ffi::abi::TVMFFIAny,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    // Success with a None result (type index 0): one test for both.
    if (rc as u32 | result.type_index as u32) == 0 {
        // SAFETY: checked non-null out slots (by `TVMFuncCall`'s fast path).
        unsafe {
            *ret_val = TVMValue::default();
            *ret_type_code = tc::NULLPTR;
        }
        return 0;
    }
    ffi_kernel_finish(rc, result, ret_val, ret_type_code)
}

/// [`call_ffi_kernel`] after a failure or a result other than None: the trampoline's result
/// conversion, then the caller's slots as for any compiled function.
#[cfg(tvmrt_ffi_arms)]
#[cold]
#[inline(never)]
fn ffi_kernel_finish(
    rc: c_int,
    result: &crate::module::tvm_ffi::abi::TVMFFIAny,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    let mut out = TVMValue::default();
    let mut code = tc::NULLPTR;
    // SAFETY: valid local out slots.
    let r = unsafe { crate::module::tvm_ffi::call::finish(rc, result, &mut out, &mut code) };
    backend_done(r, out, code, ret_val, ret_type_code)
}

/// [`call_ffi_kernel`] with arguments that are not plain: the whole trampoline.
///
/// # Safety
/// As [`call_ffi_kernel`].
#[cfg(tvmrt_ffi_arms)]
#[cold]
#[inline(never)]
unsafe fn ffi_kernel_general(
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
    resource: *mut c_void,
) -> c_int {
    let mut out = TVMValue::default();
    let mut code = tc::NULLPTR;
    // SAFETY: forwarded contract; valid local out slots.
    let r = unsafe {
        crate::module::tvm_ffi::call::kernel_trampoline(
            arg_values, type_codes, num_args, &mut out, &mut code, resource,
        )
    };
    backend_done(r, out, code, ret_val, ret_type_code)
}

/// Moves an owning value returned by compiled code out to the caller.
#[cfg(not(feature = "bench-no-fast-paths"))]
#[cold]
#[inline(never)]
fn take_backend_ret(
    out: TVMValue,
    code: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: compiled code returns a valid value for its code, owning objects.
        let rv = unsafe { RetValue::from_c_take(out, code)? };
        write_ret(rv, ret_val, ret_type_code)
    }
}

/// Completes a C callback's call on the slow path: a failure drops what the callback may have
/// set and keeps its error; success moves an owning value out.
#[cfg(not(feature = "bench-no-fast-paths"))]
#[cold]
#[inline(never)]
fn finish_call(r: c_int, rv: RetValue, ret_val: *mut TVMValue, ret_type_code: *mut c_int) -> c_int {
    if r != 0 {
        let _: c_int = crate::c_boundary! {
            drop(rv);
            Ok(())
        };
        return -1;
    }
    crate::c_boundary! { write_ret(rv, ret_val, ret_type_code) }
}

fn write_ret(
    rv: RetValue,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> crate::packed_func::Result<()> {
    if let RetValue::DataType(t) = rv {
        if !crate::packed_func::dtype::known_code(t) {
            return Err(Error::value_fmt(format_args!(
                "TVMFuncCall: cannot return a data type with unknown type code {}",
                t.code
            )));
        }
    }
    if ret_val.is_null() || ret_type_code.is_null() {
        if matches!(rv, RetValue::Null) {
            return Ok(());
        }
        return Err(Error::value(
            "TVMFuncCall: ret_val or ret_type_code is NULL",
        ));
    }
    let (v, c) = rv.into_c();
    // SAFETY: checked non-null; caller provides valid slots.
    unsafe {
        *ret_val = v;
        *ret_type_code = c;
    }
    Ok(())
}

/// Sets the return value from inside a C callback (`TVMCFuncSetReturn`); values are copied
/// (objects gain a reference).
///
/// # Safety
/// `ret` must be the handle passed to the callback; `value`/`type_code` hold `num_ret` entries.
#[no_mangle]
pub unsafe extern "C" fn TVMCFuncSetReturn(
    ret: TVMRetValueHandle,
    value: *mut TVMValue,
    type_code: *mut c_int,
    num_ret: c_int,
) -> c_int {
    #[cfg(not(feature = "bench-no-fast-paths"))]
    {
        // SAFETY: forwarded contract.
        if unsafe { set_return_fast(ret, value, type_code, num_ret) } {
            return 0;
        }
    }
    crate::c_boundary! {
        #[cold]
        if num_ret != 1 {
            return Err(Error::value_fmt(format_args!(
                "TVMCFuncSetReturn: num_ret must be 1, got {num_ret}"
            )));
        }
        check_out(ret, "TVMCFuncSetReturn: ret")?;
        check_out(value, "TVMCFuncSetReturn: value")?;
        check_out(type_code, "TVMCFuncSetReturn: type_code")?;
        // SAFETY: checked non-null; caller contract on validity.
        let rv = unsafe { RetValue::from_c_copy(*value, *type_code)? };
        // SAFETY: `ret` is the RetValue slot TVMFuncCall handed to the callback.
        unsafe { *(ret as *mut RetValue) = rv };
        Ok(())
    }
}

/// The fast path of [`TVMCFuncSetReturn`] (listed in [`crate::c_api`]'s table of fast paths):
/// a plain value into a slot that owns nothing. It cannot panic; `false` means it did not
/// apply and the general path runs.
///
/// # Safety
/// As `TVMCFuncSetReturn`.
#[cfg(not(feature = "bench-no-fast-paths"))]
#[inline(always)]
unsafe fn set_return_fast(
    ret: TVMRetValueHandle,
    value: *mut TVMValue,
    type_code: *mut c_int,
    num_ret: c_int,
) -> bool {
    if num_ret != 1 || ret.is_null() || value.is_null() || type_code.is_null() {
        return false;
    }
    let slot = ret as *mut RetValue;
    // SAFETY: `ret` is the RetValue slot TVMFuncCall handed to the callback; the value
    // pointers are valid by the caller's contract.
    unsafe {
        let code = *type_code as u32;
        if code < 32
            && (RAW_IN_CODES >> code) & 1 != 0
            && (POD_TAGS >> (RetValue::raw_tag(slot) & 31)) & 1 != 0
        {
            // The old value owns nothing, so it needs no drop.
            RetValue::write_raw(slot, *value, code);
            return true;
        }
    }
    false
}

/// Turns a callback argument into a return value in place (`TVMCbArgToReturn`): objects gain a
/// reference the caller then owns.
///
/// # Safety
/// `value`/`code` must point to one valid argument.
#[no_mangle]
pub unsafe extern "C" fn TVMCbArgToReturn(value: *mut TVMValue, code: *mut c_int) -> c_int {
    crate::c_boundary! {
        check_out(value, "TVMCbArgToReturn: value")?;
        check_out(code, "TVMCbArgToReturn: code")?;
        // SAFETY: checked non-null; caller contract on validity.
        let (v, c) = unsafe { (*value, *code) };
        match c {
            tc::STR | tc::BYTES => Err(Error::type_error(
                "TVMCbArgToReturn: strings and bytes cannot be moved to a return value",
            )),
            tc::OBJECT_HANDLE | tc::MODULE_HANDLE | tc::PACKED_FUNC_HANDLE | tc::NDARRAY_HANDLE => {
                // The caller gets its own reference; the code stays.
                // SAFETY: a valid argument of an object code.
                let rv = unsafe { RetValue::from_c_copy(v, c)? };
                std::mem::forget(rv);
                Ok(())
            }
            tc::OBJECT_RVALUE_REF_ARG => {
                // Move: the caller takes the slot's reference and the slot is emptied.
                // SAFETY: code 14 carries a pointer to an object handle slot.
                unsafe {
                    let slot = v.v_handle as *mut *mut c_void;
                    if slot.is_null() {
                        return Err(Error::value("TVMCbArgToReturn: NULL rvalue slot"));
                    }
                    (*value).v_handle = *slot;
                    *slot = std::ptr::null_mut();
                    *code = tc::OBJECT_HANDLE;
                }
                Ok(())
            }
            tc::INT
            | tc::FLOAT
            | tc::OPAQUE_HANDLE
            | tc::NULLPTR
            | tc::DATA_TYPE
            | tc::DEVICE
            | tc::DLTENSOR_HANDLE
            | tc::BOOL => Ok(()),
            c => Err(Error::type_error_fmt(format_args!(
                "TVMCbArgToReturn: unknown type code {c}"
            ))),
        }
    }
}

/// Wraps a C callback as a function (`TVMFuncCreateFromCFunc`); `fin(resource_handle)` runs
/// once when the last reference goes.
///
/// # Safety
/// `func` must be callable with `resource_handle` from any thread; `out` must be valid.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncCreateFromCFunc(
    func: Option<PackedCFunc>,
    resource_handle: *mut c_void,
    fin: Option<PackedCFuncFinalizer>,
    out: *mut TVMFunctionHandle,
) -> c_int {
    crate::c_boundary! {
        check_out(out, "TVMFuncCreateFromCFunc: out")?;
        let func = func.ok_or_else(|| Error::value("TVMFuncCreateFromCFunc: func is NULL"))?;
        // SAFETY: forwarded contract: the callback and finalizer follow the C convention.
        let f = unsafe { Function::from_c(func, resource_handle, fin) };
        // SAFETY: checked non-null.
        unsafe { *out = f.into_object().into_raw() as *mut c_void };
        Ok(())
    }
}

/// Registers a function globally (`TVMFuncRegisterGlobal`); an existing name fails unless
/// `override` is non-zero. The registry keeps its own reference.
///
/// # Safety
/// `name` must be a string; `f` a live function handle.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncRegisterGlobal(
    name: *const c_char,
    f: TVMFunctionHandle,
    r#override: c_int,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let name = unsafe { cstr(name, "TVMFuncRegisterGlobal: name")? };
        // SAFETY: a non-null handle is a live object.
        let obj = unsafe { ObjectRef::from_borrowed(f as *mut Object) }
            .ok_or_else(|| Error::value("TVMFuncRegisterGlobal: the function handle is NULL"))?;
        let func = Function::from_object(obj).map_err(|e| e.context("TVMFuncRegisterGlobal"))?;
        registry::register(name, func, r#override != 0)
    }
}

/// Looks up a global function (`TVMFuncGetGlobal`): a new handle the caller frees, or NULL.
/// A NULL for a name that a feature left out of this build also leaves "built without `X`"
/// as the thread's last error (the call still succeeds, as the reference's does).
///
/// # Safety
/// `name` must be a string; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncGetGlobal(
    name: *const c_char,
    out: *mut TVMFunctionHandle,
) -> c_int {
    crate::c_boundary! {
        if name.is_null() {
            return Err(Error::value("TVMFuncGetGlobal: name is NULL"));
        }
        check_out(out, "TVMFuncGetGlobal: out")?;
        // SAFETY: caller contract: a non-NULL name is NUL-terminated. Looked up by its bytes:
        // only a name that is not registered needs the UTF-8 check.
        let p = match registry::get_bytes(unsafe { CStr::from_ptr(name) }.to_bytes()) {
            Some(f) => f.into_object().into_raw() as *mut c_void,
            None => {
                // SAFETY: as above.
                let name = unsafe { cstr(name, "TVMFuncGetGlobal: name")? };
                if let Some(msg) = crate::packed_func::features::built_without(name) {
                    crate::packed_func::error::set_last_error(&Error::value(msg));
                }
                std::ptr::null_mut()
            }
        };
        // SAFETY: checked non-null.
        unsafe { *out = p };
        Ok(())
    }
}

struct NameList {
    names: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

thread_local! {
    static NAMES: RefCell<NameList> = const {
        RefCell::new(NameList { names: Vec::new(), ptrs: Vec::new() })
    };
}

/// Lists global function names (`TVMFuncListGlobalNames`); the array stays valid until the
/// next call on this thread.
///
/// # Safety
/// The out-pointers must be valid.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncListGlobalNames(
    out_size: *mut c_int,
    out_array: *mut *mut *const c_char,
) -> c_int {
    crate::c_boundary! {
        check_out(out_size, "TVMFuncListGlobalNames: out_size")?;
        check_out(out_array, "TVMFuncListGlobalNames: out_array")?;
        NAMES.with(|n| {
            let mut n = n.borrow_mut();
            let n = &mut *n;
            n.names.clear();
            registry::for_each_name(&mut |s| {
                if let Ok(c) = CString::new(s) {
                    n.names.push(c);
                }
            });
            n.ptrs.clear();
            for c in &n.names {
                n.ptrs.push(c.as_ptr());
            }
            // SAFETY: checked non-null; the arrays live in thread-local storage.
            unsafe {
                *out_size = n.ptrs.len() as c_int;
                *out_array = n.ptrs.as_mut_ptr();
            }
        });
        Ok(())
    }
}

/// Removes a global function (`TVMFuncRemoveGlobal`); removing an absent name is not an error.
///
/// # Safety
/// `name` must be a string.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncRemoveGlobal(name: *const c_char) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let name = unsafe { cstr(name, "TVMFuncRemoveGlobal: name")? };
        registry::remove(name);
        Ok(())
    }
}

/// Frees a byte array returned by the runtime (`TVMByteArrayFree`). Bytes returned by
/// `TVMFuncCall` live in thread-local storage, so freeing them is a no-op; the runtime hands
/// out no other byte arrays, so any other pointer is refused rather than freed.
///
/// # Safety
/// `arr` must be NULL or a byte array from this runtime.
#[no_mangle]
pub unsafe extern "C" fn TVMByteArrayFree(arr: *mut TVMByteArray) -> c_int {
    crate::c_boundary! {
        if arr.is_null() || crate::packed_func::value::is_returned_bytes(arr) {
            return Ok(());
        }
        Err(Error::value(
            "TVMByteArrayFree: this byte array was not returned by the runtime",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::tvm_ffi::abi::{type_index as ti, TVMFFIAny};
    use crate::module::tvm_ffi::call::kernel_trampoline;
    use std::cell::RefCell;

    thread_local! {
        /// What the fake kernel last received: (type index, payload bits) per argument.
        static SEEN: RefCell<Vec<(i32, u32, i64)>> = const { RefCell::new(Vec::new()) };
    }

    /// A tvm-ffi kernel that records its arguments and returns None.
    unsafe extern "C" fn record(
        _: *mut c_void,
        args: *const TVMFFIAny,
        n: i32,
        result: *mut TVMFFIAny,
    ) -> i32 {
        let mut seen = Vec::new();
        for i in 0..n as usize {
            // SAFETY: the caller passes `n` valid values; every payload is read as its bits.
            let a = unsafe { &*args.add(i) };
            // SAFETY: as above.
            seen.push((a.type_index, a.zero_padding, unsafe { a.value.v_int64 }));
        }
        SEEN.with(|s| *s.borrow_mut() = seen);
        // SAFETY: the caller's result slot.
        unsafe { *result = TVMFFIAny::NONE };
        0
    }

    /// Calls `record` through `TVMFuncCall` with `values`/`codes`; what it saw, or the error.
    fn call(
        values: &mut [TVMValue],
        codes: &mut [c_int],
    ) -> std::result::Result<Vec<(i32, u32, i64)>, String> {
        // SAFETY: `record` is a tvm-ffi safe-call function that lives for the program.
        let f = unsafe {
            Function::from_tvm_ffi_kernel(kernel_trampoline, record as *mut c_void, None)
        };
        let h = f.as_object().as_ptr() as TVMFunctionHandle;
        SEEN.with(|s| s.borrow_mut().clear());
        let mut rv = TVMValue { v_int64: 99 };
        let mut rc = -7;
        // SAFETY: a live function handle; the arrays hold `values.len()` entries; valid slots.
        let r = unsafe {
            TVMFuncCall(
                h,
                values.as_mut_ptr(),
                codes.as_mut_ptr(),
                values.len() as c_int,
                &mut rv,
                &mut rc,
            )
        };
        if r != 0 {
            return Err(crate::packed_func::error::last_error_string());
        }
        assert_eq!(rc, tc::NULLPTR);
        // SAFETY: a None result is returned as a NULL handle (only the pointer's bytes: four
        // on 32-bit targets).
        assert!(unsafe { rv.v_handle }.is_null());
        Ok(SEEN.with(|s| s.borrow().clone()))
    }

    #[test]
    fn tvm_ffi_kernels_get_plain_arguments_for_every_count() {
        let mut t = [0u8; 8];
        let tp = t.as_mut_ptr() as *mut c_void;
        for n in 0..=6usize {
            let mut values: Vec<TVMValue> = (0..n)
                .map(|i| TVMValue {
                    v_int64: i as i64 * 3,
                })
                .collect();
            let mut codes: Vec<c_int> = (0..n).map(|_| tc::INT).collect();
            if n >= 2 {
                values[1] = TVMValue { v_handle: tp };
                codes[1] = tc::DLTENSOR_HANDLE;
            }
            if n >= 3 {
                values[2] = TVMValue {
                    v_handle: std::ptr::null_mut(),
                };
                codes[2] = tc::NDARRAY_HANDLE;
            }
            if n >= 4 {
                values[3] = TVMValue { v_float64: 0.0 };
                codes[3] = tc::FLOAT;
            }
            let seen = call(&mut values, &mut codes).expect("plain arguments");
            assert_eq!(seen.len(), n, "count {n}");
            for (i, &(index, pad, bits)) in seen.iter().enumerate() {
                assert_eq!(pad, 0, "count {n}, argument {i}");
                let want = match i {
                    1 => (ti::DLTENSOR_PTR, tp as i64),
                    2 => (ti::NONE, 0),
                    3 => (ti::FLOAT, 0),
                    _ => (ti::INT, i as i64 * 3),
                };
                assert_eq!((index, bits), want, "count {n}, argument {i}");
            }
        }
    }

    #[test]
    fn tvm_ffi_kernels_refuse_what_is_not_plain_with_the_trampolines_error() {
        for n in [1usize, 3, 5] {
            let mut values: Vec<TVMValue> = (0..n).map(|_| TVMValue { v_int64: 1 }).collect();
            let mut codes: Vec<c_int> = (0..n).map(|_| tc::INT).collect();
            codes[n - 1] = 99;
            let err = call(&mut values, &mut codes).expect_err("an unknown code");
            assert!(err.contains("type code 99"), "count {n}: {err}");
            codes[n - 1] = tc::STR;
            let s = c"abc";
            values[n - 1] = TVMValue { v_str: s.as_ptr() };
            let seen =
                call(&mut values, &mut codes).expect("a string is converted by the general path");
            assert_eq!(seen[n - 1].0, ti::RAW_STR, "count {n}");
        }
    }
}
