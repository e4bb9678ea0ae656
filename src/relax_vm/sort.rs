//! `tvm.contrib.sort.*`: the sorting externs compiled CPU kernels (topi sort, argsort, topk)
//! call through the environment, so that such models run without TVM's C++ runtime.
//!
//! Sorting is stable along one axis. `topk` breaks ties by the lower index in both directions.
//! Floats compare as with `<` (so -0.0 equals 0.0); NaNs, whose order the reference leaves
//! unspecified, sort by IEEE total order.

use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::types::{DLDataType, DLTensor, DL_CPU, DL_FLOAT, DL_INT, DL_UINT};
use crate::packed_func::value::{ArgValue, Args};
use std::cmp::Ordering;

/// A CPU tensor argument, checked compact, with its element count.
fn tensor<'a>(a: &Args<'a>, i: usize, what: &str) -> Result<&'a DLTensor> {
    let p: *mut DLTensor = match a.get(i)? {
        ArgValue::DLTensor(t) => t.as_ptr(),
        ArgValue::Object(o) if o.type_index() == crate::object::TYPE_NDARRAY => {
            crate::ndarray::handle_of(&o.to_ref())
        }
        v => {
            return Err(Error::type_error_fmt(format_args!(
                "{what}: argument {i} must be a tensor, got {}",
                v.kind_name()
            )))
        }
    };
    // SAFETY: a tensor argument is valid during the call (and NDArray objects outlive it).
    let t = unsafe { &*p };
    if t.device.device_type != DL_CPU || !crate::ndarray::is_contiguous(t) {
        return Err(Error::value_fmt(format_args!(
            "{what}: argument {i} must be a compact CPU tensor"
        )));
    }
    Ok(t)
}

fn shape(t: &DLTensor) -> &[i64] {
    // SAFETY: a valid tensor's shape holds ndim entries.
    unsafe { crate::ndarray::shape_of(t) }
}

fn elems(t: &DLTensor) -> usize {
    shape(t).iter().map(|&d| d.max(0) as usize).product()
}

/// A number read from a tensor element.
#[derive(Clone, Copy)]
enum Num {
    F(f64),
    I(i64),
    U(u64),
}

impl Num {
    fn cmp(&self, o: &Num) -> Ordering {
        match (self, o) {
            // Zeros of either sign are equal, as with `<`; NaNs get a fixed place.
            (Num::F(a), Num::F(b)) => (a + 0.0).total_cmp(&(b + 0.0)),
            (Num::I(a), Num::I(b)) => a.cmp(b),
            (Num::U(a), Num::U(b)) => a.cmp(b),
            _ => Ordering::Equal,
        }
    }
}

fn f16_to_f64(b: u16) -> f64 {
    let sign = if b >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = ((b >> 10) & 0x1f) as i32;
    let frac = (b & 0x3ff) as f64;
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

fn check_type(t: DLDataType, what: &str) -> Result<()> {
    let ok = t.lanes == 1
        && match t.code {
            DL_FLOAT => matches!(t.bits, 16 | 32 | 64),
            DL_INT | DL_UINT => matches!(t.bits, 8 | 16 | 32 | 64),
            _ => false,
        };
    if ok {
        Ok(())
    } else {
        Err(Error::value_fmt(format_args!(
            "{what}: unsupported dtype {}",
            crate::packed_func::dtype::dtype_to_string(t)
        )))
    }
}

fn base(t: &DLTensor) -> *mut u8 {
    // SAFETY: data + byte_offset is the first element of a valid tensor.
    unsafe { (t.data as *mut u8).add(t.byte_offset as usize) }
}

fn read(t: &DLTensor, i: usize) -> Num {
    let p = base(t);
    let dt = t.dtype;
    // SAFETY: callers pass i < elems(t) and the dtype was checked.
    unsafe {
        match (dt.code, dt.bits) {
            (DL_FLOAT, 16) => Num::F(f16_to_f64(*(p as *const u16).add(i))),
            (DL_FLOAT, 32) => Num::F(*(p as *const f32).add(i) as f64),
            (DL_FLOAT, _) => Num::F(*(p as *const f64).add(i)),
            (DL_INT, 8) => Num::I(*(p as *const i8).add(i) as i64),
            (DL_INT, 16) => Num::I(*(p as *const i16).add(i) as i64),
            (DL_INT, 32) => Num::I(*(p as *const i32).add(i) as i64),
            (DL_INT, _) => Num::I(*(p as *const i64).add(i)),
            (_, 8) => Num::U(*p.add(i) as u64),
            (_, 16) => Num::U(*(p as *const u16).add(i) as u64),
            (_, 32) => Num::U(*(p as *const u32).add(i) as u64),
            _ => Num::U(*(p as *const u64).add(i)),
        }
    }
}

/// Writes an index into an index tensor of any supported type.
fn write_index(t: &DLTensor, i: usize, v: i64) {
    let p = base(t);
    let dt = t.dtype;
    // SAFETY: callers pass i < elems(t) and the dtype was checked.
    unsafe {
        match (dt.code, dt.bits) {
            (DL_FLOAT, 32) => *(p as *mut f32).add(i) = v as f32,
            (DL_FLOAT, 64) => *(p as *mut f64).add(i) = v as f64,
            (DL_FLOAT, _) => *(p as *mut u16).add(i) = 0,
            (_, 8) => *p.add(i) = v as u8,
            (_, 16) => *(p as *mut i16).add(i) = v as i16,
            (_, 32) => *(p as *mut i32).add(i) = v as i32,
            _ => *(p as *mut i64).add(i) = v,
        }
    }
}

fn copy_elem(src: &DLTensor, si: usize, dst: &DLTensor, di: usize) {
    let n = (src.dtype.bits as usize).div_ceil(8);
    // SAFETY: both indices are in range of tensors of the same element type (checked).
    unsafe { std::ptr::copy_nonoverlapping(base(src).add(si * n), base(dst).add(di * n), n) }
}

/// Splits `shape` around `axis`: (before, length, after).
fn around(shape: &[i64], axis: i64, what: &str) -> Result<(usize, usize, usize, usize)> {
    let nd = shape.len() as i64;
    let ax = if axis < 0 { axis + nd } else { axis };
    if !(0..nd).contains(&ax) {
        return Err(Error::value_fmt(format_args!(
            "{what}: axis {axis} is out of range for a tensor of rank {nd}"
        )));
    }
    let ax = ax as usize;
    let d = |s: &[i64]| s.iter().map(|&x| x.max(0) as usize).product::<usize>();
    Ok((
        d(&shape[..ax]),
        shape[ax].max(0) as usize,
        d(&shape[ax + 1..]),
        ax,
    ))
}

/// The stable order of positions `0..n` along the axis at (i, j), only the first `count`
/// sorted (the rest keep their place).
fn order(t: &DLTensor, start: usize, step: usize, n: usize, count: usize, asc: bool) -> Vec<usize> {
    let mut v: Vec<(usize, Num)> = (0..count.min(n))
        .map(|k| (k, read(t, start + k * step)))
        .collect();
    // Ties by position: the stable order, without a stable sort's code size.
    v.sort_unstable_by(|a, b| {
        let o = a.1.cmp(&b.1);
        if asc { o } else { o.reverse() }.then(a.0.cmp(&b.0))
    });
    let mut out: Vec<usize> = v.into_iter().map(|(k, _)| k).collect();
    out.extend(count.min(n)..n);
    out
}

fn same_shape(a: &DLTensor, b: &DLTensor, what: &str) -> Result<()> {
    if shape(a) != shape(b) {
        return Err(Error::value_fmt(format_args!(
            "{what}: output shape {:?} differs from input shape {:?}",
            shape(b),
            shape(a)
        )));
    }
    Ok(())
}

/// A new CPU tensor of `shape` and `dtype`.
fn new_tensor(shape: &[i64], dtype: DLDataType) -> Result<crate::ndarray::NDArray> {
    crate::ndarray::NDArray::empty(shape, dtype, crate::packed_func::types::DLDevice::CPU)
}

/// Registers `tvm.contrib.sort.{sort,argsort,argsort_nms,topk}` and the set operators the
/// reference registers from Python (`relax.run.unique`, `relax.run.nonzero`).
pub(crate) fn register(r: &mut Registrar) {
    // numpy.unique of the flattened tensor: sorted, or (as the reference's Python) the values
    // at their first occurrences, latest first.
    r.add_weak("relax.run.unique", |a, rv| {
        const W: &str = "relax.run.unique";
        let x = tensor(&a, 0, W)?;
        check_type(x.dtype, W)?;
        let sorted = a.i64(1)? != 0;
        for i in 2..a.len().min(5) {
            if a.i64(i).unwrap_or(0) != 0 {
                return Err(Error::value_fmt(format_args!(
                    "{W}: missing support return_inverse or return_counts set to true"
                )));
            }
        }
        let n = elems(x);
        let ord = order(x, 0, 1, n, n, true);
        // First occurrence of each distinct value, in value order.
        let mut firsts: Vec<usize> = Vec::new();
        for &k in &ord {
            match firsts.last() {
                Some(&p) if read(x, p).cmp(&read(x, k)) == Ordering::Equal => {}
                _ => firsts.push(k),
            }
        }
        let picks: Vec<usize> = if sorted {
            firsts
        } else {
            let mut v = firsts;
            v.sort_unstable_by(|p, q| q.cmp(p));
            v
        };
        let out = new_tensor(&[picks.len() as i64], x.dtype)?;
        for (d, &src) in picks.iter().enumerate() {
            copy_elem(x, src, out.dltensor(), d);
        }
        *rv = crate::packed_func::value::RetValue::Object(out.into_object());
        Ok(())
    });
    // numpy.nonzero of atleast_1d(x), stacked: int64 of shape (ndim, count).
    r.add_weak("relax.run.nonzero", |a, rv| {
        const W: &str = "relax.run.nonzero";
        let x = tensor(&a, 0, W)?;
        let dt = x.dtype;
        let bool_like =
            dt.code == crate::packed_func::types::DL_BOOL || (dt.code == DL_UINT && dt.bits == 1);
        if !bool_like {
            check_type(dt, W)?;
        }
        let dims: Vec<usize> = if shape(x).is_empty() {
            vec![1]
        } else {
            shape(x).iter().map(|&d| d.max(0) as usize).collect()
        };
        let n: usize = dims.iter().product();
        let nonzero = |i: usize| -> bool {
            if bool_like {
                // SAFETY: i < n elements of one byte each.
                unsafe { *base(x).add(i) != 0 }
            } else {
                match read(x, i) {
                    Num::F(f) => f != 0.0,
                    Num::I(v) => v != 0,
                    Num::U(v) => v != 0,
                }
            }
        };
        let hits: Vec<usize> = (0..n).filter(|&i| nonzero(i)).collect();
        let nd = dims.len();
        let mut coords = vec![0i64; nd * hits.len()];
        for (h, &flat) in hits.iter().enumerate() {
            let mut rem = flat;
            for d in (0..nd).rev() {
                coords[d * hits.len() + h] = (rem % dims[d].max(1)) as i64;
                rem /= dims[d].max(1);
            }
        }
        let out = crate::ndarray::NDArray::from_slice(&coords, &[nd as i64, hits.len() as i64])?;
        *rv = crate::packed_func::value::RetValue::Object(out.into_object());
        Ok(())
    });
    r.add("tvm.contrib.sort.argsort", |a, _| {
        const W: &str = "tvm.contrib.sort.argsort";
        let (x, out) = (tensor(&a, 0, W)?, tensor(&a, 1, W)?);
        check_type(x.dtype, W)?;
        check_type(out.dtype, W)?;
        same_shape(x, out, W)?;
        let (before, n, after, _) = around(shape(x), a.i64(2)?, W)?;
        let asc = a.i64(3)? != 0;
        for i in 0..before {
            for j in 0..after {
                let start = i * n * after + j;
                for (k, src) in order(x, start, after, n, n, asc).into_iter().enumerate() {
                    write_index(out, start + k * after, src as i64);
                }
            }
        }
        Ok(())
    });
    r.add("tvm.contrib.sort.sort", |a, _| {
        const W: &str = "tvm.contrib.sort.sort";
        let (x, out) = (tensor(&a, 0, W)?, tensor(&a, 1, W)?);
        check_type(x.dtype, W)?;
        if x.dtype != out.dtype {
            return Err(Error::value_fmt(format_args!(
                "{W}: input and output dtypes differ"
            )));
        }
        same_shape(x, out, W)?;
        let (before, n, after, _) = around(shape(x), a.i64(2)?, W)?;
        let asc = a.i64(3)? != 0;
        for i in 0..before {
            for j in 0..after {
                let start = i * n * after + j;
                for (k, src) in order(x, start, after, n, n, asc).into_iter().enumerate() {
                    copy_elem(x, start + src * after, out, start + k * after);
                }
            }
        }
        Ok(())
    });
    r.add("tvm.contrib.sort.argsort_nms", |a, _| {
        const W: &str = "tvm.contrib.sort.argsort_nms";
        let (x, counts, out) = (tensor(&a, 0, W)?, tensor(&a, 1, W)?, tensor(&a, 2, W)?);
        if x.dtype != DLDataType::new(DL_FLOAT, 32, 1)
            || counts.dtype != DLDataType::new(DL_INT, 32, 1)
            || out.dtype != DLDataType::new(DL_INT, 32, 1)
        {
            return Err(Error::value_fmt(format_args!(
                "{W}: expects float32 data and int32 counts and output"
            )));
        }
        same_shape(x, out, W)?;
        let (before, n, after, _) = around(shape(x), a.i64(3)?, W)?;
        let asc = a.i64(4)? != 0;
        if elems(counts) < before * after {
            return Err(Error::value_fmt(format_args!(
                "{W}: the valid-count tensor is too small"
            )));
        }
        for i in 0..before {
            for j in 0..after {
                let count = match read(counts, i * after + j) {
                    Num::I(c) => c.max(0) as usize,
                    _ => 0,
                };
                let start = i * n * after + j;
                for (k, src) in order(x, start, after, n, count, asc)
                    .into_iter()
                    .enumerate()
                {
                    write_index(out, start + k * after, src as i64);
                }
            }
        }
        Ok(())
    });
    r.add("tvm.contrib.sort.topk", |a, _| {
        const W: &str = "tvm.contrib.sort.topk";
        if a.len() < 6 {
            return Err(Error::value_fmt(format_args!(
                "{W} expects (data, outputs..., k, axis, ret_type, is_ascend)"
            )));
        }
        let m = a.len();
        let k = a.i64(m - 4)?;
        let axis = a.i64(m - 3)?;
        let ret_type = a.str(m - 2)?;
        let asc = a.i64(m - 1)? != 0;
        let x = tensor(&a, 0, W)?;
        check_type(x.dtype, W)?;
        let (values, indices) = match ret_type {
            "both" => (Some(tensor(&a, 1, W)?), Some(tensor(&a, 2, W)?)),
            "values" => (Some(tensor(&a, 1, W)?), None),
            "indices" => (None, Some(tensor(&a, 1, W)?)),
            t => {
                return Err(Error::value_fmt(format_args!(
                    "{W}: Unsupported ret type: {t}"
                )))
            }
        };
        let (before, n, after, ax) = around(shape(x), axis, W)?;
        let k = if k < 1 { n } else { (k as usize).min(n) };
        let mut want = shape(x).to_vec();
        want[ax] = k as i64;
        for t in values.iter().chain(indices.iter()) {
            if shape(t) != want.as_slice() {
                return Err(Error::value_fmt(format_args!(
                    "{W}: output shape {:?} should be {want:?}",
                    shape(t)
                )));
            }
        }
        if let Some(v) = values {
            if v.dtype != x.dtype {
                return Err(Error::value_fmt(format_args!(
                    "{W}: values must have the input dtype"
                )));
            }
        }
        if let Some(ix) = indices {
            check_type(ix.dtype, W)?;
        }
        for i in 0..before {
            for j in 0..after {
                let src0 = i * n * after + j;
                let dst0 = i * k * after + j;
                let ord = order(x, src0, after, n, n, asc);
                for (kk, &src) in ord.iter().take(k).enumerate() {
                    if let Some(ix) = indices {
                        write_index(ix, dst0 + kk * after, src as i64);
                    }
                    if let Some(v) = values {
                        copy_elem(x, src0 + src * after, v, dst0 + kk * after);
                    }
                }
            }
        }
        Ok(())
    });
}
