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
    /// A key whose unsigned order is the numbers' order: floats compare as with `<` (zeros of
    /// either sign equal) with NaNs at their IEEE total-order places, signed integers
    /// with the sign bit flipped.
    fn key(self) -> u64 {
        match self {
            Num::F(a) => {
                let b = (a + 0.0).to_bits();
                if b >> 63 == 1 {
                    !b
                } else {
                    b | 1 << 63
                }
            }
            Num::I(a) => (a as u64) ^ (1 << 63),
            Num::U(a) => a,
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

/// Writes the positions `ord` as indices into `out` at `dst0`, `dst0 + step`, ... (one loop
/// for every caller).
#[inline(never)]
fn write_order(out: &DLTensor, dst0: usize, step: usize, ord: &[usize]) {
    for (k, &src) in ord.iter().enumerate() {
        write_index(out, dst0 + k * step, src as i64);
    }
}

/// Copies the elements of `x` at `src0 + ord[k] * step` to `dst` at `dst0 + k * step`.
#[inline(never)]
fn copy_order(x: &DLTensor, src0: usize, step: usize, ord: &[usize], dst: &DLTensor, dst0: usize) {
    for (k, &src) in ord.iter().enumerate() {
        copy_elem(x, src0 + src * step, dst, dst0 + k * step);
    }
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
/// sorted (the rest keep their place). Ties keep the lower position first in both
/// directions.
fn order(t: &DLTensor, start: usize, step: usize, n: usize, count: usize, asc: bool) -> Vec<usize> {
    let m = count.min(n);
    // Descending is ascending on complemented keys; equal keys stay in position order.
    let flip = if asc { 0 } else { u64::MAX };
    let mut v: Vec<(u64, usize)> = (0..m)
        .map(|k| (read(t, start + k * step).key() ^ flip, k))
        .collect();
    sort_keys(&mut v);
    let mut out: Vec<usize> = Vec::with_capacity(n);
    out.extend(v.iter().map(|&(_, k)| k));
    out.extend(m..n);
    out
}

/// Sorts by key, stably: insertion for short runs, else a least-significant-digit radix sort
/// (a byte per pass; passes where every key has the same byte are skipped). Linear in the
/// length and a few hundred bytes of code, where the standard sort is ten kilobytes.
fn sort_keys(v: &mut Vec<(u64, usize)>) {
    if v.len() <= 32 {
        for i in 1..v.len() {
            let mut j = i;
            while j > 0 && v[j - 1].0 > v[j].0 {
                v.swap(j - 1, j);
                j -= 1;
            }
        }
        return;
    }
    let mut tmp = vec![(0u64, 0usize); v.len()];
    for shift in (0..64).step_by(8) {
        let digit = |k: u64| ((k >> shift) & 0xff) as usize;
        let mut at = [0usize; 256];
        for &(k, _) in v.iter() {
            at[digit(k)] += 1;
        }
        if at.contains(&v.len()) {
            continue;
        }
        let mut sum = 0;
        for c in at.iter_mut() {
            let here = *c;
            *c = sum;
            sum += here;
        }
        for &e in v.iter() {
            let d = digit(e.0);
            tmp[at[d]] = e;
            at[d] += 1;
        }
        std::mem::swap(v, &mut tmp);
    }
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
                Some(&p) if read(x, p).key() == read(x, k).key() => {}
                _ => firsts.push(k),
            }
        }
        let picks: Vec<usize> = if sorted {
            firsts
        } else {
            // The first occurrences, latest first (distinct positions: no sort needed).
            let mut first = vec![false; n];
            for &k in &firsts {
                if let Some(f) = first.get_mut(k) {
                    *f = true;
                }
            }
            let mut latest = Vec::new();
            for k in (0..n).rev() {
                if first.get(k) == Some(&true) {
                    latest.push(k);
                }
            }
            latest
        };
        let out = new_tensor(&[picks.len() as i64], x.dtype)?;
        copy_order(x, 0, 1, &picks, out.dltensor(), 0);
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
        let mut hits: Vec<usize> = Vec::new();
        for i in 0..n {
            if nonzero(i) {
                hits.push(i);
            }
        }
        let nd = dims.len();
        let mut coords = vec![0i64; nd * hits.len()];
        for (h, &flat) in hits.iter().enumerate() {
            let mut rem = flat;
            for (d, &dim) in dims.iter().enumerate().rev() {
                if let Some(c) = coords.get_mut(d * hits.len() + h) {
                    *c = (rem % dim.max(1)) as i64;
                }
                rem /= dim.max(1);
            }
        }
        let out = crate::ndarray::NDArray::from_slice(&coords, &[nd as i64, hits.len() as i64])?;
        *rv = crate::packed_func::value::RetValue::Object(out.into_object());
        Ok(())
    });
    r.add("tvm.contrib.sort.argsort", |a, _| sort_or_argsort(a, true));
    r.add("tvm.contrib.sort.sort", |a, _| sort_or_argsort(a, false));
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
        let parts = around(shape(x), a.i64(3)?, W)?;
        let asc = a.i64(4)? != 0;
        if elems(counts) < parts.0 * parts.2 {
            return Err(Error::value_fmt(format_args!(
                "{W}: the valid-count tensor is too small"
            )));
        }
        along(x, parts, parts.1, asc, Some(counts), Some(out), None);
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
        let parts = around(shape(x), axis, W)?;
        let n = parts.1;
        let k = if k < 1 { n } else { (k as usize).min(n) };
        let mut want = shape(x).to_vec();
        if let Some(w) = want.get_mut(parts.3) {
            *w = k as i64;
        }
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
        along(x, parts, k, asc, None, indices, values);
        Ok(())
    });
}

/// `tvm.contrib.sort.argsort` (`arg`) or `tvm.contrib.sort.sort`.
#[inline(never)]
fn sort_or_argsort(a: Args<'_>, arg: bool) -> Result<()> {
    let w = if arg {
        "tvm.contrib.sort.argsort"
    } else {
        "tvm.contrib.sort.sort"
    };
    let (x, out) = (tensor(&a, 0, w)?, tensor(&a, 1, w)?);
    check_type(x.dtype, w)?;
    if arg {
        check_type(out.dtype, w)?;
    } else if x.dtype != out.dtype {
        return Err(Error::value_fmt(format_args!(
            "{w}: input and output dtypes differ"
        )));
    }
    same_shape(x, out, w)?;
    let parts = around(shape(x), a.i64(2)?, w)?;
    let asc = a.i64(3)? != 0;
    let (indices, values) = if arg {
        (Some(out), None)
    } else {
        (None, Some(out))
    };
    along(x, parts, parts.1, asc, None, indices, values);
    Ok(())
}

/// Sorts `x` along the axis of `parts` ([`around`]), writing the first `k` positions of each
/// order to `indices` and their elements to `values` (outputs of length `k` on the axis);
/// `counts` (one per line) limits how many elements of each line are sorted.
#[inline(never)]
fn along(
    x: &DLTensor,
    parts: (usize, usize, usize, usize),
    k: usize,
    asc: bool,
    counts: Option<&DLTensor>,
    indices: Option<&DLTensor>,
    values: Option<&DLTensor>,
) {
    let (before, n, after, _) = parts;
    for i in 0..before {
        for j in 0..after {
            let count = match counts.map(|c| read(c, i * after + j)) {
                Some(Num::I(c)) => c.max(0) as usize,
                Some(_) => 0,
                None => n,
            };
            let src0 = i * n * after + j;
            let dst0 = i * k * after + j;
            let ord = order(x, src0, after, n, count, asc);
            let ord = ord.get(..k).unwrap_or_default();
            if let Some(ix) = indices {
                write_order(ix, dst0, after, ord);
            }
            if let Some(v) = values {
                copy_order(x, src0, after, ord, v, dst0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ndarray::NDArray;
    use std::cmp::Ordering;

    /// The order by a comparison sort: numbers as with `<` (NaNs by total order), ties by
    /// position.
    fn by_comparison(t: &DLTensor, n: usize, count: usize, asc: bool) -> Vec<usize> {
        let cmp = |a: Num, b: Num| match (a, b) {
            (Num::F(a), Num::F(b)) => (a + 0.0).total_cmp(&(b + 0.0)),
            (Num::I(a), Num::I(b)) => a.cmp(&b),
            (Num::U(a), Num::U(b)) => a.cmp(&b),
            _ => Ordering::Equal,
        };
        let m = count.min(n);
        let mut v: Vec<usize> = (0..m).collect();
        v.sort_by(|&a, &b| {
            let o = cmp(read(t, a), read(t, b));
            if asc { o } else { o.reverse() }.then(a.cmp(&b))
        });
        v.extend(m..n);
        v
    }

    fn check(a: &NDArray, n: usize) {
        check_t(a.dltensor(), n)
    }

    fn check_t(t: &DLTensor, n: usize) {
        for asc in [true, false] {
            for count in [n, n / 2, 0] {
                assert_eq!(
                    order(t, 0, 1, n, count, asc),
                    by_comparison(t, n, count, asc),
                    "{:?} n={n} count={count} asc={asc}",
                    t.dtype
                );
            }
        }
    }

    #[test]
    fn the_radix_and_insertion_orders_are_the_comparison_order() {
        // A fixed pseudo-random sequence with many ties, and the special floats.
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for n in [0usize, 1, 7, 32, 33, 300, 5000] {
            let raw: Vec<u64> = (0..n).map(|_| next()).collect();
            let small = |r: u64| (r % 23) as i64 - 11;
            let mut f: Vec<f32> = raw.iter().map(|&r| small(r) as f32 * 0.5).collect();
            let specials = [
                f32::NAN,
                -f32::NAN,
                0.0,
                -0.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::MIN_POSITIVE,
                -1e30,
            ];
            for (i, x) in f.iter_mut().enumerate().filter(|(i, _)| i % 5 == 0) {
                *x = specials[i % specials.len()];
            }
            let d: Vec<f64> = raw.iter().map(|&r| f64::from_bits(r)).collect();
            let i8s: Vec<i8> = raw.iter().map(|&r| small(r) as i8).collect();
            let i64s: Vec<i64> = raw.iter().map(|&r| r as i64).collect();
            let u16s: Vec<u16> = raw.iter().map(|&r| r as u16).collect();
            let u64s: Vec<u64> = raw.iter().map(|&r| r % 1000).collect();
            let sh = [n as i64];
            check(&NDArray::from_slice(&f, &sh).unwrap(), n);
            check(&NDArray::from_slice(&d, &sh).unwrap(), n);
            check(&NDArray::from_slice(&i8s, &sh).unwrap(), n);
            check(&NDArray::from_slice(&i64s, &sh).unwrap(), n);
            check(&NDArray::from_slice(&u16s, &sh).unwrap(), n);
            check(&NDArray::from_slice(&u64s, &sh).unwrap(), n);
            // float16: the same bits, read as halves (NaNs and both zeros among them).
            let h = NDArray::from_slice(&u16s, &sh).unwrap();
            let mut t = *h.dltensor();
            t.dtype = DLDataType::new(DL_FLOAT, 16, 1);
            check_t(&t, n);
        }
    }
}
