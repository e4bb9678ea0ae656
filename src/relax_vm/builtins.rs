//! `vm.builtin.*`: the functions a `relax.build` executable calls (shape checks and matching,
//! storage and tensor allocation, tuples, closures, branches), plus the functions the
//! reference registers from Python (`vm.builtin.debug_print`, `relax.run.*`).

use super::bytecode::{owned, push};
use super::interp::{with_ctx, ClosureObj, Fast};
use super::memory::{self, StorageObj};
use crate::ndarray::{create_view, NDArray, NDArrayObj};
use crate::object::containers::{ArrayObj, ShapeTupleObj, StringObj};
use crate::object::ObjectRef;
use crate::packed_func::dtype::dtype_to_string;
use crate::packed_func::error::{Error, ErrorKind, Result};
use crate::packed_func::function::{Function, PackedFuncObj};
use crate::packed_func::registry::{self, Registrar};
use crate::packed_func::types::{
    type_code as tc, DLDataType, DLDevice, DLTensor, TVMValue, DL_BOOL, DL_CPU, DL_FLOAT, DL_INT,
    DL_UINT,
};
use crate::packed_func::value::{ArgValue, Args, RetValue};
use std::sync::Mutex;

// The builtins' errors: each site passes its `format_args!`, formatted out of line.
fn type_err(m: std::fmt::Arguments<'_>) -> Error {
    Error::with_args(ErrorKind::TypeError, m)
}
fn value_err(m: std::fmt::Arguments<'_>) -> Error {
    Error::with_args(ErrorKind::ValueError, m)
}
fn runtime_err(m: std::fmt::Arguments<'_>) -> Error {
    Error::with_args(ErrorKind::RuntimeError, m)
}

/// The optional error context string at `i` (null or absent: empty).
fn err_ctx<'a>(a: &Args<'a>, i: usize) -> &'a str {
    if i >= a.len() {
        return "";
    }
    match a.get(i) {
        Ok(ArgValue::Null) | Err(_) => "",
        _ => a.str(i).unwrap_or_default(),
    }
}

/// The type key of an argument, for messages.
fn type_key_of(v: &ArgValue<'_>) -> String {
    match v {
        ArgValue::Object(o) => o.to_ref().type_key(),
        ArgValue::Null => owned("None"),
        v => owned(v.kind_name()),
    }
}

/// A check builtin's error for an argument of the wrong kind.
#[cold]
#[inline(never)]
fn expect_err(ctx: &str, what: &str, arg: &ArgValue<'_>) -> Error {
    type_err(format_args!(
        "{ctx} expect a {what} but get {}",
        type_key_of(arg)
    ))
}

/// A check builtin's error for a tensor or shape of the wrong rank.
#[cold]
#[inline(never)]
fn ndim_err(ctx: &str, what: &str, ndim: i64, got: usize) -> Error {
    value_err(format_args!(
        "{ctx} expect {what} with ndim {ndim} but get {got}"
    ))
}

/// The shape-heap argument: an int64 tensor (or null), with its length.
fn heap_arg(a: &Args<'_>, i: usize) -> Result<Option<(*mut i64, usize)>> {
    let t: *mut DLTensor = match a.get(i)? {
        ArgValue::Null => return Ok(None),
        ArgValue::DLTensor(t) => t.as_ptr(),
        ArgValue::Object(o) if o.downcast_ref::<NDArrayObj>().is_some() => {
            crate::ndarray::handle_of(&o.to_ref())
        }
        v => {
            return Err(type_err(format_args!(
                "the shape heap must be a tensor, got {}",
                type_key_of(&v)
            )))
        }
    };
    // SAFETY: a tensor argument is valid during the call.
    let t = unsafe { &*t };
    if t.dtype != DLDataType::new(DL_INT, 64, 1) || t.device.device_type != DL_CPU {
        return Err(type_err(format_args!(
            "the shape heap must be an int64 CPU tensor"
        )));
    }
    // SAFETY: as above.
    let n: i64 = unsafe { crate::ndarray::shape_of(t) }.iter().product();
    // SAFETY: data + byte_offset addresses n int64 values of the live tensor.
    let p = unsafe { (t.data as *mut u8).add(t.byte_offset as usize) } as *mut i64;
    Ok(Some((p, n.max(0) as usize)))
}

fn heap_slot(heap: Option<(*mut i64, usize)>, reg: i64) -> Result<*mut i64> {
    let (p, n) = heap.ok_or_else(|| value_err(format_args!("the shape heap is missing")))?;
    if reg < 0 || reg as usize >= n {
        return Err(value_err(format_args!(
            "shape heap index {reg} is out of range for a heap of {n}"
        )));
    }
    // SAFETY: in bounds of the heap tensor (checked above).
    Ok(unsafe { p.add(reg as usize) })
}

/// The dims of a shape or tensor argument, borrowed from it (live for the call).
fn shape_arg<'a>(a: &Args<'a>, i: usize) -> Result<&'a [i64]> {
    let v = a.get(i)?;
    let dims = match &v {
        ArgValue::Object(o) => match o.downcast_ref::<ShapeTupleObj>() {
            Some(s) => Some(s.dims()),
            None => o.downcast_ref::<NDArrayObj>().map(|t| t.shape()),
        },
        _ => None,
    };
    dims.ok_or_else(|| {
        type_err(format_args!(
            "argument {i}: expected a shape or tensor, got {}",
            type_key_of(&v)
        ))
    })
}

fn ndarray_arg(a: &Args<'_>, i: usize) -> Result<NDArray> {
    NDArray::from_object(a.object_ref::<NDArrayObj>(i)?)
}

fn obj_or_null(a: &Args<'_>, i: usize) -> Result<Option<ObjectRef>> {
    match a.get(i)? {
        ArgValue::Object(o) => Ok(Some(o.to_ref())),
        ArgValue::Null => Ok(None),
        ArgValue::Str(s) => Ok(Some(StringObj::from_bytes(s.to_bytes()))),
        v => Err(type_err(format_args!(
            "argument {i}: a tuple holds objects only, got {}",
            v.kind_name()
        ))),
    }
}

/// Reads the first element of a CPU (or copied-to-CPU) integer or bool tensor.
fn scalar_int(arr: &NDArray) -> Result<i64> {
    let arr = if arr.device().device_type != DL_CPU {
        let mut c = NDArray::empty(arr.shape(), arr.dtype(), DLDevice::CPU)?;
        arr.copy_to(&mut c)?;
        c
    } else {
        arr.clone()
    };
    let t = arr.dltensor();
    let dt = t.dtype;
    if !(dt.code == DL_INT || dt.code == DL_UINT || dt.code == DL_BOOL) || arr.nbytes() == 0 {
        return Err(value_err(format_args!(
            "expected a scalar integer tensor, got {}",
            dtype_to_string(dt)
        )));
    }
    // SAFETY: a live CPU tensor of at least one element.
    let p = unsafe { (t.data as *const u8).add(t.byte_offset as usize) };
    // SAFETY: as above, reading one element of the declared width.
    Ok(unsafe {
        match dt.bits {
            1 | 8 => *(p as *const i8) as i64,
            16 => *(p as *const i16) as i64,
            32 => *(p as *const i32) as i64,
            64 => *(p as *const i64),
            b => return Err(value_err(format_args!("Unknown scalar int type: {b} bits"))),
        }
    })
}

/// A function calling `inner` with its own arguments followed by `bound`, returning the result
/// when `ret` (one closure type for `make_closure` and the VM's `save_function`).
pub(crate) fn bind(inner: Function, bound: super::interp::SharedValues, ret: bool) -> Function {
    Function::from_rust(move |args, rv| {
        let mut regs = super::interp::regs_of(&args, 0)?;
        regs.extend(bound.values().iter().cloned());
        let (mut v, mut c) = super::interp::regs_to_c(&regs);
        let out = call_with(&inner, &mut v, &mut c)?;
        if ret {
            *rv = out;
        }
        Ok(())
    })
}

/// Calls `f` with arguments `from..to` of `a` followed by the integers `extra`; its result.
#[inline(never)]
pub(crate) fn call_args(
    f: &Function,
    a: &Args<'_>,
    from: usize,
    to: usize,
    extra: &[i64],
) -> Result<RetValue> {
    let (values, codes) = (&a.values()[from..to], &a.codes()[from..to]);
    let n = values.len() + extra.len();
    let mut v = Vec::with_capacity(n);
    let mut c = Vec::with_capacity(n);
    v.extend_from_slice(values);
    c.extend_from_slice(codes);
    for &d in extra {
        v.push(TVMValue { v_int64: d });
        c.push(tc::INT);
    }
    call_with(f, &mut v, &mut c)
}

/// Calls `f` with the C values; its result.
pub(crate) fn call_with(
    f: &Function,
    values: &mut [TVMValue],
    codes: &mut [i32],
) -> Result<RetValue> {
    call_obj(f.obj(), values, codes)
}

/// [`call_with`] of a function object (one out-of-line copy of the call for every caller
/// outside the interpreter loop).
#[inline(never)]
pub(crate) fn call_obj(
    f: &PackedFuncObj,
    values: &mut [TVMValue],
    codes: &mut [i32],
) -> Result<RetValue> {
    let mut rv = RetValue::Null;
    // SAFETY: the arrays hold values valid during the call.
    unsafe {
        f.call_raw(
            values.as_mut_ptr(),
            codes.as_mut_ptr(),
            values.len() as i32,
            &mut rv,
        )?
    };
    Ok(rv)
}

/// Builtins the interpreter may run itself (`super::interp::Fast`), as registered here: the
/// function objects, so that a pool entry is recognised by identity (a function registered
/// later under the same name, or found in a kernel library, is called as any other).
static FAST: Mutex<Vec<(ObjectRef, Fast)>> = Mutex::new(Vec::new());

/// Which fast builtin `f` is, if it is one of ours.
pub(crate) fn fast_kind(f: &Function) -> Option<Fast> {
    FAST.lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(o, _)| o.same_as(f.as_object()))
        .map(|&(_, k)| k)
}

/// Registers `f` under `name` and remembers it as the fast builtin `kind`.
fn add_fast<F>(r: &mut Registrar, name: &str, kind: Fast, f: F)
where
    F: Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync + 'static,
{
    add_fast_function(r, name, kind, Function::from_rust(f));
}

/// The part of [`add_fast`] that is the same for every builtin.
#[inline(never)]
fn add_fast_function(r: &mut Registrar, name: &str, kind: Fast, func: Function) {
    FAST.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((func.as_object().clone(), kind));
    r.add_function(name, func);
}

/// Registers the builtins.
pub(crate) fn register(r: &mut Registrar) {
    r.add("vm.builtin.alloc_shape_heap", |a, rv| {
        let size = a.i64(1)?;
        if !(0..=(1 << 24)).contains(&size) {
            return Err(value_err(format_args!("invalid shape heap size {size}")));
        }
        with_ctx(a.handle(0)?, |vm| {
            let st = vm.state()?;
            let (dev, alloc) = match (st.devices.last(), st.allocators.last()) {
                (Some(&dev), Some(alloc)) if dev.device_type == DL_CPU => (dev, alloc),
                _ => {
                    return Err(value_err(format_args!(
                        "the last VM device (the host) must be the CPU"
                    )))
                }
            };
            let buf = StorageObj::allocate(
                alloc.clone(),
                dev,
                size as usize * 8,
                DLDataType::new(DL_INT, 64, 1),
            )?;
            *rv = RetValue::Object(StorageObj::alloc_tensor(
                &buf,
                0,
                &[size],
                DLDataType::new(DL_INT, 64, 1),
            )?);
            Ok(())
        })
    });
    r.add("vm.builtin.match_prim_value", |a, _| {
        a.expect_len(5, "vm.builtin.match_prim_value")?;
        let v = a.i64(0)?;
        let heap = heap_arg(&a, 1)?;
        let code = a.i64(2)?;
        let reg = a.i64(3)?;
        let ctx = err_ctx(&a, 4);
        match code {
            0 if v != reg => Err(runtime_err(format_args!(
                "{ctx} match_cast error,  PrimValue mismatch to specified constant."
            ))),
            // SAFETY: heap_slot checked the index.
            1 => unsafe {
                *heap_slot(heap, reg)? = v;
                Ok(())
            },
            // SAFETY: as above.
            3 if v != unsafe { *heap_slot(heap, reg)? } => Err(runtime_err(format_args!(
                "{ctx} match_cast error,  PrimValue mismatch to a previous populated value."
            ))),
            0 | 2 | 3 => Ok(()),
            c => Err(value_err(format_args!("Unknown match shape code: {c}"))),
        }
    });
    add_fast(r, "vm.builtin.match_shape", Fast::MatchShape, |a, _| {
        if a.len() < 3 {
            return Err(value_err(format_args!(
                "vm.builtin.match_shape: too few arguments"
            )));
        }
        let shape = shape_arg(&a, 0)?;
        let heap = heap_arg(&a, 1)?;
        let size = a.i64(2)?;
        if size < 0 || size > a.len() as i64 || (3 + 2 * size) as u64 > a.len() as u64 {
            return Err(value_err(format_args!(
                "vm.builtin.match_shape: {size} dimensions need {} arguments, got {}",
                size.max(0).saturating_mul(2).saturating_add(3),
                a.len()
            )));
        }
        let ctx = err_ctx(&a, (3 + 2 * size) as usize);
        if shape.len() as i64 != size {
            return Err(runtime_err(format_args!(
                "{ctx} match_cast shape size mismatch."
            )));
        }
        for (i, &dim) in shape.iter().enumerate() {
            let code = a.i64(3 + 2 * i)?;
            let reg = a.i64(4 + 2 * i)?;
            match code {
                0 if dim != reg => {
                    return Err(runtime_err(format_args!(
                        "{ctx} match_cast error,  shape[{i}] mismatch to specified constant."
                    )))
                }
                // SAFETY: heap_slot checked the index.
                1 => unsafe { *heap_slot(heap, reg)? = dim },
                // SAFETY: as above.
                3 if dim != unsafe { *heap_slot(heap, reg)? } => {
                    return Err(runtime_err(format_args!(
                    "{ctx} match_cast error,  shape[{i}] mismatch to a previous populated value."
                )))
                }
                0 | 2 | 3 => {}
                c => return Err(value_err(format_args!("Unknown match shape code: {c}"))),
            }
        }
        Ok(())
    });
    r.add("vm.builtin.make_prim_value", |a, rv| {
        let heap = heap_arg(&a, 0)?;
        let code = a.i64(1)?;
        let reg = a.i64(2)?;
        *rv = RetValue::Int(match code {
            0 => reg,
            // SAFETY: heap_slot checked the index.
            1 => unsafe { *heap_slot(heap, reg)? },
            c => return Err(value_err(format_args!("Invalid shape code: {c}"))),
        });
        Ok(())
    });
    add_fast(r, "vm.builtin.make_shape", Fast::MakeShape, |a, rv| {
        let heap = heap_arg(&a, 0)?;
        let size = a.i64(1)?;
        if size < 0 || size > a.len() as i64 || (2 + 2 * size) as u64 > a.len() as u64 {
            return Err(value_err(format_args!(
                "vm.builtin.make_shape: {size} dimensions but {} arguments",
                a.len()
            )));
        }
        let mut dims = Vec::with_capacity(size as usize);
        for i in 0..size as usize {
            let code = a.i64(2 + 2 * i)?;
            let reg = a.i64(3 + 2 * i)?;
            dims.push(match code {
                0 => reg,
                // SAFETY: heap_slot checked the index.
                1 => unsafe { *heap_slot(heap, reg)? },
                c => return Err(value_err(format_args!("Invalid shape code: {c}"))),
            });
        }
        *rv = RetValue::Object(ShapeTupleObj::new_ref(&dims));
        Ok(())
    });
    add_fast(
        r,
        "vm.builtin.check_tensor_info",
        Fast::CheckTensorInfo,
        |a, _| {
            if a.len() != 3 && a.len() != 4 {
                return Err(value_err(format_args!(
                    "vm.builtin.check_tensor_info expects 3 or 4 arguments, got {}",
                    a.len()
                )));
            }
            let ndim = a.i64(1)?;
            let (dtype, ctx) = if a.len() == 3 {
                (None, err_ctx(&a, 2))
            } else {
                (Some(a.dtype(2)?), err_ctx(&a, 3))
            };
            let arg = a.get(0)?;
            let t = match arg {
                ArgValue::Object(o) => o.downcast_ref::<NDArrayObj>(),
                _ => None,
            }
            .ok_or_else(|| expect_err(ctx, "Tensor", &arg))?;
            if ndim != -1 && t.shape().len() as i64 != ndim {
                return Err(ndim_err(ctx, "Tensor", ndim, t.shape().len()));
            }
            if let Some(d) = dtype {
                // DataType::Void() (bits 0) means "any dtype".
                if d.bits != 0 && t.dtype() != d {
                    return Err(value_err(format_args!(
                        "{ctx} expect Tensor with dtype {} but get {}",
                        dtype_to_string(d),
                        dtype_to_string(t.dtype())
                    )));
                }
            }
            Ok(())
        },
    );
    r.add("vm.builtin.check_shape_info", |a, _| {
        let ndim = a.i64(1)?;
        let ctx = err_ctx(&a, 2);
        let arg = a.get(0)?;
        let s = match arg {
            ArgValue::Object(o) => o.downcast_ref::<ShapeTupleObj>(),
            _ => None,
        }
        .ok_or_else(|| expect_err(ctx, "Shape", &arg))?;
        if ndim != -1 && s.dims().len() as i64 != ndim {
            return Err(ndim_err(ctx, "Shape", ndim, s.dims().len()));
        }
        Ok(())
    });
    r.add("vm.builtin.check_prim_value_info", |a, _| {
        let dt = a.dtype(1)?;
        let ctx = err_ctx(&a, 2);
        let arg = a.get(0)?;
        let ok = match arg {
            ArgValue::Object(o) => {
                return Err(type_err(format_args!(
                    "{ctx}, expected dtype {}, but received ObjectRef of type {}",
                    dtype_to_string(dt),
                    o.to_ref().type_key()
                )))
            }
            ArgValue::Int(_) | ArgValue::Bool(_) => {
                dt.code == DL_INT || dt.code == DL_UINT || dt.code == DL_BOOL || dt.code == DL_FLOAT
            }
            ArgValue::Float(_) => dt.code == DL_FLOAT,
            ArgValue::Handle(_) | ArgValue::Null => dt.code == 3,
            _ => false,
        };
        if !ok {
            return Err(type_err(format_args!(
                "{ctx}, expected dtype {}, but received {}",
                dtype_to_string(dt),
                arg.kind_name()
            )));
        }
        Ok(())
    });
    r.add("vm.builtin.check_tuple_info", |a, _| {
        let size = a.i64(1)?;
        let ctx = err_ctx(&a, 2);
        let arg = a.get(0)?;
        let t = match arg {
            ArgValue::Object(o) => o.downcast_ref::<ArrayObj>(),
            _ => None,
        }
        .ok_or_else(|| expect_err(ctx, "Tuple", &arg))?;
        if t.items.len() as i64 != size {
            return Err(value_err(format_args!(
                "{ctx} expect a Tuple with {size} elements,  but get a Tuple with {} elements.",
                t.items.len()
            )));
        }
        Ok(())
    });
    r.add("vm.builtin.check_func_info", |a, _| {
        let ctx = err_ctx(&a, 1);
        let arg = a.get(0)?;
        let ok = matches!(arg, ArgValue::Object(o)
            if o.downcast_ref::<PackedFuncObj>().is_some() || o.downcast_ref::<ClosureObj>().is_some());
        if !ok {
            return Err(expect_err(ctx, "Function", &arg));
        }
        Ok(())
    });
    add_fast(
        r,
        "vm.builtin.alloc_storage",
        Fast::AllocStorage,
        |a, rv| {
            a.expect_len(5, "vm.builtin.alloc_storage")?;
            let shape = shape_arg(&a, 1)?;
            let dev_index = a.i64(2)?;
            let hint = a.dtype(3)?;
            with_ctx(a.handle(0)?, |vm| {
                let st = vm.state()?;
                let n = st.devices.len() as i64;
                // -1: the last device (the host); other negative indices find none.
                let i = if dev_index == -1 { n - 1 } else { dev_index };
                let found = usize::try_from(i)
                    .ok()
                    .and_then(|i| Some((*st.devices.get(i)?, st.allocators.get(i)?)));
                let Some((dev, alloc)) = found else {
                    return Err(value_err(format_args!(
                        "The device index {dev_index} is out of VM physical devices list ({n})"
                    )));
                };
                let nbytes = memory::shape_nbytes(shape, hint)?;
                *rv = RetValue::Object(StorageObj::allocate(alloc.clone(), dev, nbytes, hint)?);
                Ok(())
            })
        },
    );
    add_fast(r, "vm.builtin.alloc_tensor", Fast::AllocTensor, |a, rv| {
        a.expect_len(4, "vm.builtin.alloc_tensor")?;
        let st = a.object_ref::<StorageObj>(0)?;
        let offset = a.i64(1)?;
        let shape = shape_arg(&a, 2)?;
        let dtype = a.dtype(3)?;
        *rv = RetValue::Object(StorageObj::alloc_tensor(&st, offset, shape, dtype)?);
        Ok(())
    });
    r.add("vm.builtin.make_closure", |a, rv| {
        let clo = a.downcast::<ClosureObj>(0)?;
        let name = clo.func_name.clone();
        let inner = clo.imp.clone();
        let saved = super::interp::SharedValues(super::interp::regs_of(&a, 1)?);
        let imp = bind(inner, saved, true);
        *rv = RetValue::Object(ClosureObj::new_ref(&name, imp));
        Ok(())
    });
    r.add("vm.builtin.invoke_closure", |a, rv| {
        if a.len() < 2 {
            return Err(value_err(format_args!(
                "vm.builtin.invoke_closure expects (vm, closure, *args)"
            )));
        }
        let f = a
            .object(1)?
            .ok_or_else(|| {
                type_err(format_args!(
                    "vm.builtin.invoke_closure: the closure is null"
                ))
            })?
            .to_ref();
        with_ctx(a.handle(0)?, |vm| {
            // SAFETY: the call's own arguments, valid for their codes during it.
            *rv = unsafe { vm.invoke_closure_c(&f, &a.values()[2..], &a.codes()[2..])? };
            Ok(())
        })
    });
    r.add("vm.builtin.call_tir_dyn", |a, rv| {
        if a.len() < 2 {
            return Err(value_err(format_args!(
                "vm.builtin.call_tir_dyn expects (func, *args, shape)"
            )));
        }
        let f = Function::from_object(a.object_ref::<PackedFuncObj>(0)?)?;
        let last = a.len() - 1;
        let dims = a.downcast::<ShapeTupleObj>(last)?.dims();
        *rv = call_args(&f, &a, 1, last, dims)?;
        Ok(())
    });
    r.add("vm.builtin.shape_of", |a, rv| {
        let t = a.downcast::<NDArrayObj>(0)?;
        *rv = RetValue::Object(ShapeTupleObj::new_ref(t.shape()));
        Ok(())
    });
    r.add("vm.builtin.copy", |a, rv| {
        a.expect_len(1, "vm.builtin.copy")?;
        // SAFETY: the argument is valid during the call.
        *rv = unsafe { RetValue::from_c_copy(a.values()[0], a.codes()[0])? };
        Ok(())
    });
    r.add("vm.builtin.reshape", |a, rv| {
        let dt = a.downcast::<NDArrayObj>(0)?.dtype();
        let base = a.object_ref::<NDArrayObj>(0)?;
        let shape = shape_arg(&a, 1)?;
        *rv = RetValue::Object(create_view(&base, shape, dt, 0)?);
        Ok(())
    });
    add_fast(r, "vm.builtin.null_value", Fast::NullValue, |a, rv| {
        a.expect_len(0, "vm.builtin.null_value")?;
        *rv = RetValue::Null;
        Ok(())
    });
    r.add("vm.builtin.to_device", |a, rv| {
        let src = ndarray_arg(&a, 0)?;
        let dev = DLDevice::new(a.i64(1)? as i32, a.i64(2)? as i32);
        let mut out = NDArray::empty(src.shape(), src.dtype(), dev)?;
        src.copy_to(&mut out)?;
        *rv = RetValue::Object(out.into_object());
        Ok(())
    });
    r.add("vm.builtin.read_if_cond", |a, rv| {
        let v = match a.get(0)? {
            ArgValue::Int(i) => i != 0,
            ArgValue::Bool(b) => b,
            _ => scalar_int(&ndarray_arg(&a, 0)?)? != 0,
        };
        // An int, as v0.16 returns bools: frontends of every version read it, and so does If.
        *rv = RetValue::Int(v as i64);
        Ok(())
    });
    r.add("vm.builtin.invoke_debug_func", |a, rv| {
        if a.len() < 3 {
            return Err(value_err(format_args!(
                "vm.builtin.invoke_debug_func expects (io, name, line, *args)"
            )));
        }
        if !matches!(a.get(0)?, ArgValue::Null) {
            return Err(value_err(format_args!(
                "IOEffect is expected to be lowered to None."
            )));
        }
        let name = a.str(1)?;
        let f = registry::get(name).ok_or_else(|| {
            value_err(format_args!(
                "{name} is not found. Use the decorator `@tvm.register_func(\"{name}\")` to \
                 register it."
            ))
        })?;
        call_args(&f, &a, 2, a.len(), &[])?;
        *rv = RetValue::Null;
        Ok(())
    });
    r.add("vm.builtin.tuple_getitem", |a, rv| {
        let t = a.downcast::<ArrayObj>(0)?;
        let i = a.index(1, t.items.len(), "vm.builtin.tuple_getitem")?;
        *rv = match t.items.get(i) {
            Some(Some(o)) => RetValue::Object(o.clone()),
            _ => RetValue::Null,
        };
        Ok(())
    });
    r.add("vm.builtin.tuple_reset_item", |a, _| {
        let t = a.downcast::<ArrayObj>(0)?;
        let i = a.index(1, t.items.len(), "vm.builtin.tuple_reset_item")?;
        // TVM's `Array::Set` on the builtin's own reference: the caller (a register, or the
        // frontend) still holds the tuple, so the set copies on write and the caller's tuple
        // keeps its item. Nothing observable happens but the index check.
        let _ = i;
        Ok(())
    });
    r.add("vm.builtin.make_tuple", |a, rv| {
        let mut items = Vec::with_capacity(a.len());
        for i in 0..a.len() {
            items.push(obj_or_null(&a, i)?);
        }
        *rv = RetValue::Object(ArrayObj::new_ref(items));
        Ok(())
    });
    r.add("vm.builtin.tensor_to_shape", |a, rv| {
        let src = ndarray_arg(&a, 0)?;
        let arr = if src.device().device_type != DL_CPU {
            let mut c = NDArray::empty(src.shape(), src.dtype(), DLDevice::CPU)?;
            src.copy_to(&mut c)?;
            c
        } else {
            src
        };
        let dt = arr.dtype();
        if arr.shape().len() != 1 || dt.code != DL_INT {
            return Err(value_err(format_args!(
                "tensor_to_shape expects a 1-d integer tensor, got {} of rank {}",
                dtype_to_string(dt),
                arr.shape().len()
            )));
        }
        if !matches!(dt.bits, 16 | 32 | 64) {
            return Err(value_err(format_args!(
                "Unknown scalar int type: {}",
                dtype_to_string(dt)
            )));
        }
        // The elements as bytes, widened one by one (no copy routine per element type).
        let w = dt.bits as usize / 8;
        let want = DLDataType::new(DL_INT, dt.bits, 1);
        let nbytes = arr.nbytes();
        if dt != want {
            // What `NDArray::to_vec` says of a vector type.
            return Err(Error::value_fmt(format_args!(
                "array of {} ({nbytes} bytes) does not match {} elements of {}",
                dtype_to_string(dt),
                nbytes / w,
                dtype_to_string(want)
            )));
        }
        let mut bytes = vec![0u8; nbytes];
        // SAFETY: the array is live and `bytes` holds its nbytes bytes.
        unsafe {
            crate::ndarray::copy_to_bytes(arr.dltensor(), bytes.as_mut_ptr().cast(), nbytes)?
        };
        let dims: Vec<i64> = bytes
            .chunks_exact(w)
            .map(|b| match *b {
                [x, y] => i16::from_ne_bytes([x, y]) as i64,
                [x, y, z, u] => i32::from_ne_bytes([x, y, z, u]) as i64,
                [x0, x1, x2, x3, x4, x5, x6, x7] => {
                    i64::from_ne_bytes([x0, x1, x2, x3, x4, x5, x6, x7])
                }
                _ => 0,
            })
            .collect();
        *rv = RetValue::Object(ShapeTupleObj::new_ref(&dims));
        Ok(())
    });
    r.add("vm.builtin.ensure_zero_offset", |a, rv| {
        let src = ndarray_arg(&a, 0)?;
        if src.dltensor().byte_offset == 0 {
            *rv = RetValue::Object(src.into_object());
        } else {
            let mut out = NDArray::empty(src.shape(), src.dtype(), src.device())?;
            src.copy_to(&mut out)?;
            *rv = RetValue::Object(out.into_object());
        }
        Ok(())
    });
    r.add("vm.builtin.memory_manager.clear", |_, _| {
        memory::clear_all();
        Ok(())
    });
    r.add_weak("vm.builtin.debug_print", |a, _| {
        let parts: Vec<String> = describe_from(&a, 0);
        println!("{}", parts.join(" "));
        Ok(())
    });
    r.add_weak("relax.run.print", |a, _| {
        // (format string, *values): "{}" placeholders, as Python's str.format.
        let fmt = owned(a.str(0).unwrap_or(""));
        let vals: Vec<String> = describe_from(&a, 1);
        println!("{}", format_py(&fmt, &vals));
        Ok(())
    });
    r.add_weak("relax.run.assert_op", |a, _| {
        let cond = match a.get(0)? {
            ArgValue::Int(i) => i != 0,
            ArgValue::Bool(b) => b,
            _ => scalar_int(&ndarray_arg(&a, 0)?)? != 0,
        };
        if !cond {
            let fmt = if a.len() > 1 {
                a.str(1).unwrap_or("")
            } else {
                ""
            };
            let vals: Vec<String> = describe_from(&a, 2);
            let msg = format_py(fmt, &vals);
            return Err(Error::with_args(
                ErrorKind::Verbatim,
                format_args!(
                    "AssertionError: {}",
                    if msg.is_empty() {
                        "Assertion Failed"
                    } else {
                        &msg
                    }
                ),
            ));
        }
        Ok(())
    });
    r.add_weak("relax.run.shape_to_tensor", |a, rv| {
        let dims = shape_arg(&a, 0)?;
        *rv = RetValue::Object(NDArray::from_slice(dims, &[dims.len() as i64])?.into_object());
        Ok(())
    });
}

/// [`describe`] of the arguments from `from` on.
#[inline(never)]
fn describe_from(a: &Args<'_>, from: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in from..a.len() {
        out.push(describe(a, i));
    }
    out
}

/// A printable form of argument `i` (for debug printing).
fn describe(a: &Args<'_>, i: usize) -> String {
    match a.get(i) {
        Ok(ArgValue::Int(v)) => v.to_string(),
        Ok(ArgValue::Float(v)) => {
            let mut s = String::new();
            crate::packed_func::float_text::write_display(v, &mut s);
            s
        }
        Ok(ArgValue::Bool(v)) => owned(if v { "True" } else { "False" }),
        Ok(ArgValue::Str(s)) => s.to_string_lossy().into_owned(),
        Ok(ArgValue::Null) => owned("None"),
        Ok(ArgValue::DataType(t)) => dtype_to_string(t),
        Ok(ArgValue::Object(o)) => {
            if let Some(s) = o.downcast_ref::<StringObj>() {
                owned(s.as_str())
            } else if let Some(s) = o.downcast_ref::<ShapeTupleObj>() {
                format!("{:?}", s.dims())
            } else if let Some(t) = o.downcast_ref::<NDArrayObj>() {
                format!(
                    "<NDArray {} {:?} on {}>",
                    dtype_to_string(t.dtype()),
                    t.shape(),
                    crate::packed_func::types::device_string(t.device())
                )
            } else {
                o.to_ref().type_key()
            }
        }
        Ok(v) => owned(v.kind_name()),
        Err(e) => e.into_message(),
    }
}

/// Fills `{}` placeholders in order (Python's `str.format` for the plain case).
fn format_py(fmt: &str, vals: &[String]) -> String {
    let mut out = String::new();
    let mut it = vals.iter();
    let mut rest = fmt;
    while let Some(p) = crate::packed_func::text::find(rest, "{}") {
        push(&mut out, &rest[..p]);
        push(&mut out, it.next().map(String::as_str).unwrap_or("{}"));
        rest = &rest[p + 2..];
    }
    push(&mut out, rest);
    if fmt.is_empty() {
        out = vals.join(" ");
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::ndarray::NDArray;
    use crate::object::containers::ShapeTupleObj;
    use crate::packed_func::types::{DLDataType, DLDevice, DL_FLOAT, DL_INT};
    use crate::packed_func::Function;

    fn to_shape(a: &NDArray) -> crate::packed_func::error::Result<Vec<i64>> {
        let f = Function::get_global("vm.builtin.tensor_to_shape").unwrap();
        let r = f.call(&[a.into()])?.into_object()?;
        Ok(r.downcast_ref::<ShapeTupleObj>().unwrap().dims().to_vec())
    }

    #[test]
    fn tensor_to_shape_widens_each_integer_width_and_refuses_the_others() {
        let v = [-3i64, 0, 7, i32::MAX as i64 + 1];
        let a = NDArray::from_slice(&v, &[4]).unwrap();
        assert_eq!(to_shape(&a).unwrap(), v);
        let a = NDArray::from_slice(&[-5i32, 9, i32::MIN], &[3]).unwrap();
        assert_eq!(to_shape(&a).unwrap(), [-5, 9, i32::MIN as i64]);
        let a = NDArray::from_slice(&[-2i16, i16::MAX], &[2]).unwrap();
        assert_eq!(to_shape(&a).unwrap(), [-2, i16::MAX as i64]);
        let a = NDArray::from_slice(&[1i8, 2], &[2]).unwrap();
        let e = to_shape(&a).unwrap_err();
        assert_eq!(e.message, "Unknown scalar int type: int8");
        let dt = DLDataType::new(DL_INT, 32, 2);
        let a = NDArray::empty(&[2], dt, DLDevice::CPU).unwrap();
        let e = to_shape(&a).unwrap_err();
        assert_eq!(
            e.message,
            "array of int32x2 (16 bytes) does not match 4 elements of int32"
        );
        let a = NDArray::empty(&[2], DLDataType::new(DL_FLOAT, 32, 1), DLDevice::CPU).unwrap();
        let e = to_shape(&a).unwrap_err();
        assert!(e.message.contains("1-d integer tensor"), "{}", e.message);
    }
}
