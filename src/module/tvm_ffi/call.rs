//! Calls across the two ABIs: classic `TVMValue` + type code arguments into a tvm-ffi kernel
//! (`TVMFFIAny` values), and a tvm-ffi kernel's calls of packed functions back into classic
//! ones (the `TVMFFIFunctionCall` context function).

use super::abi::{type_index as ti, SafeCall, TVMFFIAny, TVMFFIAnyValue, OBJECT_HEADER_SIZE};
use crate::object::{Object, PAYLOAD_OFFSET, TYPE_NDARRAY};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::PackedFuncObj;
use crate::packed_func::types::{type_code as tc, TVMValue};
use crate::packed_func::value::{RawHandle, RetValue};
use std::ffi::{c_void, CStr};
use std::mem::MaybeUninit;

/// Arguments converted on the stack up to this count; more spill to the heap.
const INLINE_ARGS: usize = 16;

#[inline(always)]
fn any(type_index: i32, value: TVMFFIAnyValue) -> TVMFFIAny {
    TVMFFIAny {
        type_index,
        zero_padding: 0,
        value,
    }
}

fn ptr_or_none(type_index: i32, p: *mut c_void) -> TVMFFIAny {
    if p.is_null() {
        TVMFFIAny::NONE
    } else {
        any(type_index, TVMFFIAnyValue { v_ptr: p })
    }
}

/// One classic argument as a tvm-ffi value. Tensors keep their address (no copy): the classic
/// handles are `DLTensor*` already, and an NDArray object holds its `DLTensor` at the payload.
///
/// # Safety
/// `v` must be a valid value of type code `code`.
unsafe fn to_ffi(v: TVMValue, code: i32, i: usize) -> Result<TVMFFIAny> {
    // SAFETY: (whole block) each arm reads the union field `code` selects, as the caller
    // guarantees; object handles point at live objects.
    unsafe {
        Ok(match code {
            tc::INT => any(ti::INT, TVMFFIAnyValue { v_int64: v.v_int64 }),
            tc::BOOL => any(ti::BOOL, TVMFFIAnyValue { v_int64: v.v_int64 }),
            tc::FLOAT => any(
                ti::FLOAT,
                TVMFFIAnyValue {
                    v_float64: v.v_float64,
                },
            ),
            tc::NULLPTR => TVMFFIAny::NONE,
            tc::OPAQUE_HANDLE => ptr_or_none(ti::OPAQUE_PTR, v.v_handle),
            tc::DATA_TYPE => any(ti::DATA_TYPE, TVMFFIAnyValue { v_dtype: v.v_type }),
            tc::DEVICE => any(
                ti::DEVICE,
                TVMFFIAnyValue {
                    v_device: v.v_device,
                },
            ),
            tc::DLTENSOR_HANDLE | tc::NDARRAY_HANDLE => ptr_or_none(ti::DLTENSOR_PTR, v.v_handle),
            tc::OBJECT_HANDLE if !v.v_handle.is_null() => {
                let obj = v.v_handle as *mut Object;
                if (*obj).type_index() != TYPE_NDARRAY {
                    return Err(Error::type_error_fmt(format_args!(
                        "argument {i}: a kernel compiled for the tvm-ffi ABI takes tensors and \
                         plain values, not an object of type index {}",
                        (*obj).type_index()
                    )));
                }
                any(
                    ti::DLTENSOR_PTR,
                    TVMFFIAnyValue {
                        v_ptr: (obj as *mut u8).add(PAYLOAD_OFFSET) as *mut c_void,
                    },
                )
            }
            tc::STR => ptr_or_none(ti::RAW_STR, v.v_str as *mut c_void),
            tc::BYTES => ptr_or_none(ti::BYTE_ARRAY_PTR, v.v_handle),
            c => {
                return Err(Error::type_error_fmt(format_args!(
                    "argument {i}: a kernel compiled for the tvm-ffi ABI cannot take a value of \
                     type code {c}"
                )))
            }
        })
    }
}

/// A kernel's result as a classic value. TIR kernels return None; plain values are passed on.
fn from_ffi(r: &TVMFFIAny) -> Result<RetValue> {
    // SAFETY: (whole block) each arm reads the payload its type index selects.
    unsafe {
        Ok(match r.type_index {
            ti::NONE => RetValue::Null,
            ti::INT => RetValue::Int(r.value.v_int64),
            ti::BOOL => RetValue::Bool(r.value.v_int64 != 0),
            ti::FLOAT => RetValue::Float(r.value.v_float64),
            ti::OPAQUE_PTR => RetValue::Handle(RawHandle::new(r.value.v_ptr)),
            ti::DATA_TYPE => RetValue::DataType(r.value.v_dtype),
            ti::DEVICE => RetValue::Device(r.value.v_device),
            ti::SMALL_STR => {
                let n = (r.zero_padding as usize).min(8);
                RetValue::Str(String::from_utf8_lossy(&r.value.v_bytes[..n]).into_owned())
            }
            t => {
                return Err(Error::type_error_fmt(format_args!(
                    "a kernel compiled for the tvm-ffi ABI returned a value of type index {t}, \
                     which the classic ABI cannot take"
                )))
            }
        })
    }
}

/// Calls a tvm-ffi kernel with classic arguments.
///
/// # Safety
/// `kernel` must be a tvm-ffi safe-call function whose library is loaded; `values` and
/// `codes` must hold valid entries.
pub unsafe fn call_kernel(
    kernel: SafeCall,
    values: &[TVMValue],
    codes: &[i32],
) -> Result<RetValue> {
    let n = values.len().min(codes.len());
    let mut inline = [TVMFFIAny::NONE; INLINE_ARGS];
    let mut spill = Vec::new();
    let args: &mut [TVMFFIAny] = if n <= INLINE_ARGS {
        &mut inline[..n]
    } else {
        spill.resize(n, TVMFFIAny::NONE);
        &mut spill
    };
    for (i, slot) in args.iter_mut().enumerate() {
        // SAFETY: the caller's contract covers every entry.
        *slot = unsafe { to_ffi(values[i], codes[i], i)? };
    }
    let mut result = TVMFFIAny::NONE;
    // SAFETY: the kernel takes (handle, args, n, result) and reads only `n` arguments; the
    // reference passes a NULL handle and a None result, as here.
    let rc = unsafe { kernel(std::ptr::null_mut(), args.as_ptr(), n as i32, &mut result) };
    if rc != 0 {
        return Err(super::env::take_raised());
    }
    from_ffi(&result)
}

/// The type index a plain argument of classic type code `code` takes in tvm-ffi, given whether
/// its 8-byte payload is zero (a NULL pointer is None there, a zero number stays a number);
/// `None` for the codes whose payload is not passed on bit for bit (objects, strings, data
/// types, devices), which the general path converts or refuses.
const fn plain_type_index(code: i32, zero: bool) -> Option<i32> {
    match code {
        tc::INT => Some(ti::INT),
        tc::FLOAT => Some(ti::FLOAT),
        tc::BOOL => Some(ti::BOOL),
        tc::OPAQUE_HANDLE if zero => Some(ti::NONE),
        tc::OPAQUE_HANDLE => Some(ti::OPAQUE_PTR),
        tc::DLTENSOR_HANDLE | tc::NDARRAY_HANDLE if zero => Some(ti::NONE),
        tc::DLTENSOR_HANDLE | tc::NDARRAY_HANDLE => Some(ti::DLTENSOR_PTR),
        _ => None,
    }
}

/// Marks a classic type code that [`call_plain`] does not convert.
const NOT_PLAIN: u64 = u64::MAX;

/// The first 8 bytes of a `TVMFFIAny` (type index, then zero padding) as one word.
const fn head(type_index: i32) -> u64 {
    let t = type_index.to_ne_bytes();
    u64::from_ne_bytes([t[0], t[1], t[2], t[3], 0, 0, 0, 0])
}

const _: () = assert!(
    std::mem::size_of::<TVMFFIAny>() == 16 && std::mem::align_of::<TVMFFIAny>() == 8,
    "TVMFFIAny is two 8-byte words"
);

/// The head ([`head`]) of each plain argument by classic type code below 16 and payload:
/// entry `2 * code + (payload == 0)`, so that one load with no branch picks it;
/// [`NOT_PLAIN`] for the codes [`plain_type_index`] does not take.
const HEADS: [u64; 32] = {
    let mut t = [NOT_PLAIN; 32];
    let mut i = 0;
    while i < 32 {
        if let Some(ti) = plain_type_index((i / 2) as i32, i % 2 == 1) {
            t[i] = head(ti);
        }
        i += 1;
    }
    t
};

/// Argument `i` as the two words of a `TVMFFIAny` (`head(type index)`, then the payload's
/// bits), or `None` when it is not plain.
///
/// # Safety
/// `values` and `codes` must hold a valid entry `i`.
#[inline(always)]
unsafe fn plain_arg(values: *const TVMValue, codes: *const i32, i: usize) -> Option<[u64; 2]> {
    // SAFETY: the caller's contract: entry `i` exists.
    let code = unsafe { *codes.add(i) } as u32;
    if code == tc::NDARRAY_HANDLE as u32 {
        // The common case first, with no table: a classic NDArray handle is the address of
        // its DLTensor, passed on as a tensor pointer (NULL as None, as in [`HEADS`]).
        // SAFETY: the caller's contract: entry `i` exists; an NDArray handle's 8-byte payload
        // is a pointer, read as raw bits and copied, never dereferenced here.
        let bits = unsafe { (*values.add(i)).v_int64 } as u64;
        let t = if bits != 0 {
            ti::DLTENSOR_PTR
        } else {
            ti::NONE
        };
        return Some([head(t), bits]);
    }
    if code >= 16 {
        return None;
    }
    // SAFETY: as above; every plain code stores an 8-byte payload that is copied bit for bit
    // (an integer, a double or a pointer): the union is read as raw bits, never interpreted.
    // For the other codes the bits are read but not used.
    let bits = unsafe { (*values.add(i)).v_int64 } as u64;
    let head = HEADS[(code as usize) << 1 | (bits == 0) as usize];
    if head == NOT_PLAIN {
        return None;
    }
    Some([head, bits])
}

/// Writes the first `N` arguments to `args` as `TVMFFIAny` values (each two words:
/// `head(type index)`, then the payload's bits), with the conversion unrolled, each written
/// as soon as it is converted; `false` when one is not plain (`plain_type_index`), with `args`
/// then only partly written.
///
/// # Safety
/// `values` and `codes` must hold `N` valid entries each.
#[inline(always)]
pub unsafe fn plain_args<const N: usize>(
    values: *const TVMValue,
    codes: *const i32,
    args: &mut [MaybeUninit<[u64; 2]>; N],
) -> bool {
    let mut i = 0;
    while i < N {
        // SAFETY: the caller's contract: `N` entries each.
        match unsafe { plain_arg(values, codes, i) } {
            Some(a) => {
                args[i].write(a);
            }
            None => return false,
        }
        i += 1;
    }
    true
}

/// Writes the first `N` arguments to `args` as tensor pointers (`head(DLTensorPtr)`, then the
/// address) when every one is a non-NULL NDArray handle, what TVM's clients pass to a
/// kernel; `false`, with nothing written, otherwise ([`plain_args`] then converts them). All
/// codes and handles are tested before anything is written, so that the test is one compare
/// and branch each and the writes store a constant head.
///
/// # Safety
/// `values` and `codes` must hold `N` valid entries each.
#[inline(always)]
pub unsafe fn tensor_args<const N: usize>(
    values: *const TVMValue,
    codes: *const i32,
    args: &mut [MaybeUninit<[u64; 2]>; N],
) -> bool {
    // Two codes at a time, as one 8-byte word, then the last one of an odd count; a branch
    // for each test (folded into one, the tests compile to more instructions).
    const TWO: u64 = (tc::NDARRAY_HANDLE as u32 as u64) * 0x1_0000_0001;
    let mut i = 0;
    while i + 1 < N {
        // SAFETY: the caller's contract: entries `i` and `i + 1` exist, adjacent; the read has
        // no alignment requirement.
        if unsafe { codes.add(i).cast::<u64>().read_unaligned() } != TWO {
            return false;
        }
        // SAFETY: as above; an NDArray handle's payload is a pointer, read as raw bits and
        // never dereferenced here.
        if unsafe { (*values.add(i)).v_int64 } == 0 {
            return false;
        }
        // SAFETY: as above.
        if unsafe { (*values.add(i + 1)).v_int64 } == 0 {
            return false;
        }
        i += 2;
    }
    if i < N {
        // SAFETY: as above, for the last entry.
        if unsafe { *codes.add(i) } != tc::NDARRAY_HANDLE {
            return false;
        }
        // SAFETY: as above.
        if unsafe { (*values.add(i)).v_int64 } == 0 {
            return false;
        }
    }
    let mut i = 0;
    while i < N {
        // SAFETY: as above.
        let bits = unsafe { (*values.add(i)).v_int64 } as u64;
        args[i].write([head(ti::DLTENSOR_PTR), bits]);
        i += 1;
    }
    true
}

/// Calls a tvm-ffi kernel with the first `n` of `args` (from [`plain_args`]); returns its
/// status, with its result in `result`. `handle` is the kernel's first argument, an opaque
/// context that exported kernels ignore: TVM's own loaders pass NULL (its library module)
/// or a context object of their own (`Function::FromExternC`, its JIT loaders) to the same
/// `__tvm_ffi_` symbols. The fast call passes whatever it has in that register.
///
/// # Safety
/// `kernel` must be a loaded tvm-ffi kernel; `n <= args.len()` and the first `n` of `args`
/// are written.
#[inline(always)]
pub unsafe fn call_converted(
    kernel: *const c_void,
    handle: *mut c_void,
    args: &[MaybeUninit<[u64; 2]>],
    n: usize,
    result: &mut TVMFFIAny,
) -> i32 {
    *result = TVMFFIAny::NONE;
    // SAFETY: `kernel` is the kernel's address; each argument is laid out as a `TVMFFIAny`
    // (two words, the type index in the first's leading 4 bytes, zero padding after it) and
    // the kernel reads `n` of them; the result starts as None, as the reference passes it.
    unsafe {
        let kernel = std::mem::transmute::<*const c_void, SafeCall>(kernel);
        kernel(handle, args.as_ptr() as *const TVMFFIAny, n as i32, result)
    }
}

/// Calls a tvm-ffi kernel when every argument is a plain value (`plain_type_index`) and there
/// are at most `INLINE_ARGS`: the arguments are converted into a stack buffer, with no
/// allocation, no thread-local and no error state touched (a failure is read by the caller,
/// through [`finish`]). Returns the kernel's status with its result in `result`, or `None`,
/// having called nothing, otherwise. (`TVMFuncCall`'s fast path runs [`plain_args`] and
/// [`call_converted`] itself, unrolled for small counts.)
///
/// # Safety
/// `resource` must be a loaded tvm-ffi kernel; the arrays must hold `num_args` valid entries.
pub unsafe fn call_plain(
    values: *const TVMValue,
    codes: *const i32,
    num_args: i32,
    resource: *const c_void,
    result: &mut TVMFFIAny,
) -> Option<i32> {
    // A negative count is not plain either: the general path treats it as no arguments.
    if num_args as u32 > INLINE_ARGS as u32 {
        return None;
    }
    let n = num_args as usize;
    let mut args = [MaybeUninit::<[u64; 2]>::uninit(); INLINE_ARGS];
    for (i, slot) in args.iter_mut().enumerate().take(n) {
        // SAFETY: the caller's contract: `num_args` entries each.
        slot.write(unsafe { plain_arg(values, codes, i) }?);
    }
    // SAFETY: forwarded contract; `n` arguments converted.
    Some(unsafe { call_converted(resource, std::ptr::null_mut(), &args, n, result) })
}

/// Whether a kernel's result is None (what TIR kernels return).
#[inline(always)]
pub fn is_none(result: &TVMFFIAny) -> bool {
    result.type_index == ti::NONE
}

/// A tvm-ffi kernel in the classic compiled-function convention (`TVMBackendPackedCFunc`),
/// with the kernel's address as the resource handle: the runtime's call paths treat it as
/// any compiled function (and `TVMFuncCall` recognises it by its address to run
/// [`call_plain`] in its own fast path). Failures set the classic last error and return -1;
/// no panic leaves.
///
/// # Safety
/// `resource` must be a loaded tvm-ffi kernel; the arrays must hold `num_args` valid entries;
/// the out slots must be valid.
pub unsafe extern "C" fn kernel_trampoline(
    values: *mut TVMValue,
    codes: *mut i32,
    num_args: i32,
    out_value: *mut TVMValue,
    out_code: *mut i32,
    resource: *mut c_void,
) -> i32 {
    let mut result = TVMFFIAny::NONE;
    // SAFETY: forwarded contract.
    match unsafe { call_plain(values, codes, num_args, resource, &mut result) } {
        Some(0) if is_none(&result) => {
            // SAFETY: valid out slots by contract.
            unsafe {
                *out_value = TVMValue::default();
                *out_code = tc::NULLPTR;
            }
            0
        }
        // SAFETY: forwarded contract.
        Some(rc) => unsafe { finish(rc, &result, out_value, out_code) },
        // SAFETY: forwarded contract.
        None => unsafe {
            trampoline_general(
                values,
                codes,
                num_args.max(0) as usize,
                out_value,
                out_code,
                resource,
            )
        },
    }
}

/// A kernel's failure or result other than None, in the classic convention: the error
/// becomes the last error (-1), the result is written to the out slots (0).
///
/// # Safety
/// Valid out slots.
#[cold]
#[inline(never)]
pub unsafe fn finish(
    rc: i32,
    result: &TVMFFIAny,
    out_value: *mut TVMValue,
    out_code: *mut i32,
) -> i32 {
    let r = std::panic::catch_unwind(|| {
        if rc != 0 {
            return Err(super::env::take_raised());
        }
        from_ffi(result)
    });
    // SAFETY: forwarded contract.
    unsafe { store(r, out_value, out_code) }
}

/// Every argument kind, with errors that name the argument.
///
/// # Safety
/// As [`kernel_trampoline`].
#[cold]
#[inline(never)]
unsafe fn trampoline_general(
    values: *mut TVMValue,
    codes: *mut i32,
    n: usize,
    out_value: *mut TVMValue,
    out_code: *mut i32,
    resource: *mut c_void,
) -> i32 {
    let r = std::panic::catch_unwind(|| {
        let (values, codes) = if n == 0 {
            (&[][..], &[][..])
        } else {
            // SAFETY: the caller's contract: `n` entries each.
            unsafe {
                (
                    std::slice::from_raw_parts(values, n),
                    std::slice::from_raw_parts(codes, n),
                )
            }
        };
        // SAFETY: `resource` is the kernel's address; forwarded contract.
        unsafe {
            let kernel = std::mem::transmute::<*mut c_void, SafeCall>(resource);
            call_kernel(kernel, values, codes)
        }
    });
    // SAFETY: forwarded contract.
    unsafe { store(r, out_value, out_code) }
}

/// Writes a result to the out slots, or records the error and returns -1.
///
/// # Safety
/// Valid out slots.
unsafe fn store(
    r: std::thread::Result<Result<RetValue>>,
    out_value: *mut TVMValue,
    out_code: *mut i32,
) -> i32 {
    match r {
        Ok(Ok(rv)) => {
            let (v, c) = rv.into_c();
            // SAFETY: valid out slots by contract.
            unsafe {
                *out_value = v;
                *out_code = c;
            }
            0
        }
        Ok(Err(e)) => {
            crate::packed_func::error::set_last_error(&e);
            -1
        }
        Err(p) => {
            crate::packed_func::error::set_last_error(&crate::packed_func::error::panic_to_error(
                p,
            ));
            -1
        }
    }
}

/// One tvm-ffi argument as a classic value; small strings are copied into `strings`, whose
/// buffers must outlive the call.
///
/// # Safety
/// `a` must be a valid tvm-ffi value.
unsafe fn to_classic(
    a: &TVMFFIAny,
    i: usize,
    strings: &mut Vec<[u8; 9]>,
) -> Result<(TVMValue, i32)> {
    // SAFETY: (whole block) each arm reads the payload its type index selects.
    unsafe {
        Ok(match a.type_index {
            ti::NONE => (TVMValue::default(), tc::NULLPTR),
            ti::INT => (
                TVMValue {
                    v_int64: a.value.v_int64,
                },
                tc::INT,
            ),
            ti::BOOL => (
                TVMValue {
                    v_int64: a.value.v_int64,
                },
                tc::INT,
            ),
            ti::FLOAT => (
                TVMValue {
                    v_float64: a.value.v_float64,
                },
                tc::FLOAT,
            ),
            ti::OPAQUE_PTR => (
                TVMValue {
                    v_handle: a.value.v_ptr,
                },
                tc::OPAQUE_HANDLE,
            ),
            ti::DATA_TYPE => (
                TVMValue {
                    v_type: a.value.v_dtype,
                },
                tc::DATA_TYPE,
            ),
            ti::DEVICE => (
                TVMValue {
                    v_device: a.value.v_device,
                },
                tc::DEVICE,
            ),
            ti::DLTENSOR_PTR => (
                TVMValue {
                    v_handle: a.value.v_ptr,
                },
                tc::DLTENSOR_HANDLE,
            ),
            ti::TENSOR => (
                TVMValue {
                    v_handle: (a.value.v_ptr as *mut u8).add(OBJECT_HEADER_SIZE) as *mut c_void,
                },
                tc::DLTENSOR_HANDLE,
            ),
            ti::RAW_STR => (
                TVMValue {
                    v_str: a.value.v_c_str,
                },
                tc::STR,
            ),
            ti::BYTE_ARRAY_PTR => (
                TVMValue {
                    v_handle: a.value.v_ptr,
                },
                tc::BYTES,
            ),
            ti::SMALL_STR => {
                let n = (a.zero_padding as usize).min(7);
                let mut buf = [0u8; 9];
                buf[..n].copy_from_slice(&a.value.v_bytes[..n]);
                strings.push(buf);
                let last = strings.last().expect("just pushed");
                (
                    TVMValue {
                        v_str: last.as_ptr() as *const std::ffi::c_char,
                    },
                    tc::STR,
                )
            }
            t => {
                return Err(Error::type_error_fmt(format_args!(
                    "argument {i}: a value of tvm-ffi type index {t} cannot be passed to a \
                     classic packed function"
                )))
            }
        })
    }
}

/// A classic result as a tvm-ffi value (plain values only: the kernel side owns no classic
/// objects).
fn ret_to_ffi(rv: &RetValue) -> Result<TVMFFIAny> {
    Ok(match rv {
        RetValue::Null => TVMFFIAny::NONE,
        RetValue::Int(v) => any(ti::INT, TVMFFIAnyValue { v_int64: *v }),
        RetValue::Bool(b) => any(ti::BOOL, TVMFFIAnyValue { v_int64: *b as i64 }),
        RetValue::Float(v) => any(ti::FLOAT, TVMFFIAnyValue { v_float64: *v }),
        RetValue::Handle(p) => ptr_or_none(ti::OPAQUE_PTR, p.as_ptr()),
        RetValue::DataType(d) => any(ti::DATA_TYPE, TVMFFIAnyValue { v_dtype: *d }),
        RetValue::Device(d) => any(ti::DEVICE, TVMFFIAnyValue { v_device: *d }),
        RetValue::DLTensor(p) => ptr_or_none(ti::DLTENSOR_PTR, p.as_ptr() as *mut c_void),
        RetValue::Str(s) if s.len() <= 7 => {
            let mut b = [0u8; 8];
            b[..s.len()].copy_from_slice(s.as_bytes());
            TVMFFIAny {
                type_index: ti::SMALL_STR,
                zero_padding: s.len() as u32,
                value: TVMFFIAnyValue { v_bytes: b },
            }
        }
        other => {
            return Err(Error::type_error_fmt(format_args!(
                "a classic packed function returned a value ({}) that cannot be handed to a \
                 kernel compiled for the tvm-ffi ABI",
                other.as_arg().kind_name()
            )))
        }
    })
}

/// Calls a classic PackedFunc object with tvm-ffi arguments; the body of the
/// `TVMFFIFunctionCall` context function.
///
/// # Safety
/// `func` must be a live PackedFunc object; `args` must hold `n` valid values.
pub unsafe fn call_classic(
    func: *mut c_void,
    args: *const TVMFFIAny,
    n: i32,
    result: *mut TVMFFIAny,
) -> Result<()> {
    if func.is_null() || result.is_null() || (n > 0 && args.is_null()) || n < 0 {
        return Err(Error::value(
            "TVMFFIFunctionCall: NULL function, result or arguments",
        ));
    }
    let obj = func as *mut Object;
    // SAFETY: the caller's contract: a live object.
    if unsafe { (*obj).type_index() } != crate::object::TYPE_PACKED_FUNC {
        return Err(Error::type_error(
            "TVMFFIFunctionCall: the handle is not a function",
        ));
    }
    // SAFETY: the caller's contract: `n` valid values.
    let args = unsafe { std::slice::from_raw_parts(args, n as usize) };
    let mut strings = Vec::new();
    let mut values = Vec::with_capacity(args.len());
    let mut codes = Vec::with_capacity(args.len());
    strings.reserve(args.len());
    for (i, a) in args.iter().enumerate() {
        // SAFETY: valid tvm-ffi values by contract; `strings` never reallocates (reserved).
        let (v, c) = unsafe { to_classic(a, i, &mut strings)? };
        values.push(v);
        codes.push(c);
    }
    // SAFETY: the type index says the payload is a PackedFuncObj.
    let pf = unsafe { &*crate::object::payload_ptr::<PackedFuncObj>(obj) };
    let mut rv = RetValue::Null;
    // SAFETY: the arrays hold `n` valid entries that live through the call.
    unsafe { pf.call_raw(values.as_mut_ptr(), codes.as_mut_ptr(), n, &mut rv)? };
    // SAFETY: checked non-null.
    unsafe { *result = ret_to_ffi(&rv)? };
    Ok(())
}

/// Reads a raw C string argument, for messages.
///
/// # Safety
/// `p` must be NULL or NUL-terminated.
pub unsafe fn c_str_or<'a>(
    p: *const std::ffi::c_char,
    default: &'a str,
) -> std::borrow::Cow<'a, str> {
    if p.is_null() {
        default.into()
    } else {
        // SAFETY: caller contract.
        unsafe { CStr::from_ptr(p) }.to_string_lossy()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every classic code (and some past the table), with a zero and a non-zero payload,
    /// converts as [`plain_type_index`] says: the NDArray shortcut in [`plain_arg`] agrees
    /// with the table.
    #[test]
    fn plain_arg_follows_plain_type_index() {
        for code in -1..40 {
            for bits in [0u64, 0x1234_5678_9abc_def0] {
                let values = [TVMValue {
                    v_int64: bits as i64,
                }];
                let codes = [code];
                // SAFETY: one valid entry in each array.
                let got = unsafe { plain_arg(values.as_ptr(), codes.as_ptr(), 0) };
                let want = plain_type_index(code, bits == 0).map(|t| [head(t), bits]);
                assert_eq!(got, want, "code {code}, payload {bits:#x}");
            }
        }
    }
}
