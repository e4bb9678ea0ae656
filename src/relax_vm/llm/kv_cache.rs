//! The classic (non-paged) key/value cache `tvm.relax.frontend.nn.KVCache` compiles to:
//! an object (`relax.vm.AttentionKVCacheLegacy`) holding a tensor whose first axis grows by
//! doubling, how many rows of it are filled and, for sliding-window attention, where the next
//! row goes. Functions: `vm.builtin.attention_kv_cache_{create, update, append, view,
//! window_override, window_override_with_sinks, array_popn, array_clear}`.

use std::sync::{Mutex, MutexGuard};

use crate::ndarray::{NDArray, NDArrayObj};
use crate::object::containers::{ArrayObj, ShapeTupleObj};
use crate::object::ObjectRef;
use crate::packed_func::dtype::dtype_to_string;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::{Args, RetValue};

/// The cache's state.
#[derive(Debug)]
pub struct KvState {
    /// The reserved storage; rows `[0, fill_count)` hold data.
    pub data: NDArray,
    /// Rows filled.
    pub fill_count: i64,
    /// The next row sliding-window attention writes.
    pub window_pos: i64,
}

/// A key/value cache object.
pub struct KvCacheObj {
    state: Mutex<KvState>,
}

// SAFETY: `KvCacheObj` is the only payload stored under this key.
unsafe impl crate::object::ObjectType for KvCacheObj {
    crate::object_type!("relax.vm.AttentionKVCacheLegacy", parent 0);
}

fn bad(m: String) -> Error {
    Error::value(m)
}

/// Bytes of one element.
fn elem_bytes(a: &NDArray) -> u64 {
    let t = a.dtype();
    (t.bits as u64 * t.lanes as u64).div_ceil(8)
}

/// Elements in one row (all axes but the first).
fn row_elems(a: &NDArray) -> i64 {
    a.shape()[1..].iter().product()
}

/// Copies `rows` rows of `src` starting at row `src_row` into `dst` at row `dst_row`.
fn copy_rows(dst: &NDArray, dst_row: i64, src: &NDArray, src_row: i64, rows: i64) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let mut shape = dst.shape().to_vec();
    shape[0] = rows;
    let re = row_elems(dst) as u64 * elem_bytes(dst);
    let s = src.view(&shape, src.dtype(), src_row as u64 * re)?;
    let d = dst.view(&shape, dst.dtype(), dst_row as u64 * re)?;
    // SAFETY: `dst` is a cache's storage, written under the cache's lock; the rows it hands
    // out (`view`) are read by the model's kernels between updates, as in the reference.
    unsafe { s.copy_to_unchecked(&d) }
}

impl KvState {
    fn check_value(&self, v: &NDArray) -> Result<()> {
        if v.dtype() != self.data.dtype() {
            return Err(bad(format!(
                "KV cache: dtype mismatch: the cache holds {}, the value is {}",
                dtype_to_string(self.data.dtype()),
                dtype_to_string(v.dtype())
            )));
        }
        let (d, s) = (self.data.shape(), v.shape());
        if s.len() != d.len() || s.is_empty() || s[1..] != d[1..] {
            return Err(bad(format!(
                "KV cache: value of shape {s:?} does not match rows of shape {:?}",
                &d[d.len().min(1)..]
            )));
        }
        Ok(())
    }

    /// Grows the storage (doubling) so that `rows` rows fit, keeping the filled ones.
    fn reserve(&mut self, rows: i64) -> Result<()> {
        let mut cap = self.data.shape()[0];
        if rows <= cap {
            return Ok(());
        }
        cap = cap.max(1);
        while cap < rows {
            cap = cap
                .checked_mul(2)
                .ok_or_else(|| bad("KV cache: size overflow".into()))?;
        }
        let mut shape = self.data.shape().to_vec();
        shape[0] = cap;
        let new = NDArray::empty(&shape, self.data.dtype(), self.data.device())?;
        copy_rows(&new, 0, &self.data, 0, self.fill_count)?;
        self.data = new;
        Ok(())
    }

    /// Appends rows after the filled ones.
    pub fn append(&mut self, v: &NDArray) -> Result<()> {
        self.check_value(v)?;
        let n = v.shape()[0];
        self.reserve(self.fill_count + n)?;
        copy_rows(&self.data, self.fill_count, v, 0, n)?;
        self.fill_count += n;
        Ok(())
    }

    /// Replaces the contents with `v`, which must have as many rows as are filled.
    pub fn update(&mut self, v: &NDArray) -> Result<()> {
        self.check_value(v)?;
        let n = v.shape()[0];
        if n != self.fill_count {
            return Err(bad(format!(
                "KV cache update: the value has {n} rows but the cache holds {}",
                self.fill_count
            )));
        }
        self.reserve(n)?;
        copy_rows(&self.data, 0, v, 0, n)?;
        self.fill_count = n;
        Ok(())
    }

    /// Writes rows into a ring of `max` rows whose first `sinks` rows are never overwritten.
    pub fn window_override(&mut self, v: &NDArray, max: i64, sinks: i64) -> Result<()> {
        self.check_value(v)?;
        let n = v.shape()[0];
        if sinks < 0 || max <= sinks || n > max - sinks {
            return Err(bad(format!(
                "KV cache window override: {n} rows do not fit a window of {max} with {sinks} \
                 attention sinks"
            )));
        }
        if self.fill_count + n <= max {
            self.reserve(self.fill_count + n)?;
        } else if self.data.shape()[0] < max {
            self.reserve(max)?;
        }
        let first = n.min(max - self.window_pos);
        copy_rows(&self.data, self.window_pos, v, 0, first)?;
        self.fill_count = (self.fill_count + n).min(max);
        self.window_pos = (self.window_pos + n).min(max);
        if first < n {
            copy_rows(&self.data, sinks, v, first, n - first)?;
            self.window_pos = n - first + sinks;
        }
        Ok(())
    }

    /// The filled rows as a view of the given shape (its first axis must be the fill count).
    pub fn view(&self, shape: Option<&[i64]>) -> Result<NDArray> {
        let mut own = self.data.shape().to_vec();
        own[0] = self.fill_count;
        let shape = shape.unwrap_or(&own);
        if shape.len() != own.len() || shape[0] != self.fill_count {
            return Err(bad(format!(
                "KV cache view: shape {shape:?} does not match the {} filled rows",
                self.fill_count
            )));
        }
        if let Some(i) = (1..own.len()).find(|&i| shape[i] != own[i]) {
            return Err(bad(format!(
                "KV cache view: dimension {i} is {} but the cache has {}",
                shape[i], own[i]
            )));
        }
        self.data.view(shape, self.data.dtype(), 0)
    }
}

impl KvCacheObj {
    /// A cache with storage of `reserve` shape, holding `init`; a `fill_count >= 0` then
    /// overrides the number of filled rows.
    pub fn create(init: &NDArray, reserve: &[i64], fill_count: i64) -> Result<ObjectRef> {
        if reserve.is_empty() {
            return Err(bad("KV cache: the reserve shape must have an axis".into()));
        }
        let data = NDArray::empty(reserve, init.dtype(), init.device())?;
        let mut st = KvState {
            data,
            fill_count: 0,
            window_pos: 0,
        };
        st.append(init)?;
        if fill_count >= 0 {
            if fill_count > st.data.shape()[0] {
                return Err(bad(format!(
                    "KV cache: initial fill count {fill_count} exceeds the {} reserved rows",
                    st.data.shape()[0]
                )));
            }
            st.fill_count = fill_count;
            st.window_pos = fill_count;
        }
        Ok(ObjectRef::new(KvCacheObj {
            state: Mutex::new(st),
        }))
    }

    /// The state, locked.
    pub fn lock(&self) -> MutexGuard<'_, KvState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn tensor(a: &Args<'_>, i: usize) -> Result<NDArray> {
    NDArray::from_object(a.object_ref::<NDArrayObj>(i)?)
}

/// Caches of an `Array` argument.
fn cache_list(a: &Args<'_>, i: usize) -> Result<Vec<ObjectRef>> {
    a.downcast::<ArrayObj>(i)?
        .items
        .iter()
        .enumerate()
        .map(|(k, o)| {
            o.clone()
                .filter(|o| o.downcast_ref::<KvCacheObj>().is_some())
                .ok_or_else(|| {
                    Error::type_error_fmt(format_args!("argument {i}: entry {k} is not a KV cache"))
                })
        })
        .collect()
}

/// Runs `f` on the cache argument 0 and returns the cache.
fn with_cache(
    a: &Args<'_>,
    rv: &mut RetValue,
    f: impl FnOnce(&mut KvState) -> Result<()>,
) -> Result<()> {
    let c = a.object_ref::<KvCacheObj>(0)?;
    f(&mut c.downcast_ref::<KvCacheObj>().expect("checked").lock())?;
    *rv = RetValue::Object(c);
    Ok(())
}

/// Registers the KV cache functions.
pub(crate) fn register(r: &mut Registrar) {
    r.add("vm.builtin.attention_kv_cache_create", |a, rv| {
        a.expect_len(
            3,
            "attention_kv_cache_create(init, reserve_shape, fill_count)",
        )?;
        let reserve = a.downcast::<ShapeTupleObj>(1)?.dims().to_vec();
        *rv = RetValue::Object(KvCacheObj::create(&tensor(&a, 0)?, &reserve, a.i64(2)?)?);
        Ok(())
    });
    r.add("vm.builtin.attention_kv_cache_update", |a, rv| {
        let v = tensor(&a, 1)?;
        with_cache(&a, rv, |s| s.update(&v))
    });
    r.add("vm.builtin.attention_kv_cache_append", |a, rv| {
        let v = tensor(&a, 1)?;
        with_cache(&a, rv, |s| s.append(&v))
    });
    r.add("vm.builtin.attention_kv_cache_window_override", |a, rv| {
        let (v, max) = (tensor(&a, 1)?, a.i64(2)?);
        with_cache(&a, rv, |s| s.window_override(&v, max, 0))
    });
    r.add(
        "vm.builtin.attention_kv_cache_window_override_with_sinks",
        |a, rv| {
            let (v, max, sinks) = (tensor(&a, 1)?, a.i64(2)?, a.i64(3)?);
            with_cache(&a, rv, |s| s.window_override(&v, max, sinks))
        },
    );
    r.add("vm.builtin.attention_kv_cache_view", |a, rv| {
        if a.len() != 1 && a.len() != 2 {
            return Err(bad(format!(
                "vm.builtin.attention_kv_cache_view expects 1 or 2 arguments, got {}",
                a.len()
            )));
        }
        let shape = if a.len() == 2 {
            Some(a.downcast::<ShapeTupleObj>(1)?.dims().to_vec())
        } else {
            None
        };
        let c = a.downcast::<KvCacheObj>(0)?;
        *rv = RetValue::Object(c.lock().view(shape.as_deref())?.into_object());
        Ok(())
    });
    r.add("vm.builtin.attention_kv_cache_array_popn", |a, _rv| {
        let caches = cache_list(&a, 0)?;
        let n = a.i64(1)?;
        let objs: Vec<&KvCacheObj> = caches
            .iter()
            .map(|c| c.downcast_ref::<KvCacheObj>().expect("checked"))
            .collect();
        // Check every cache before popping any.
        for (i, c) in objs.iter().enumerate() {
            let have = c.lock().fill_count;
            if n < 0 || n > have {
                return Err(bad(format!(
                    "attention_kv_cache_array_popn: cannot pop {n} rows from cache {i}, which \
                     holds {have}"
                )));
            }
        }
        for c in objs {
            c.lock().fill_count -= n;
        }
        Ok(())
    });
    r.add("vm.builtin.attention_kv_cache_array_clear", |a, _rv| {
        for c in cache_list(&a, 0)? {
            let mut s = c.downcast_ref::<KvCacheObj>().expect("checked").lock();
            s.fill_count = 0;
            s.window_pos = 0;
        }
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[f32], cols: i64) -> NDArray {
        NDArray::from_slice(v, &[v.len() as i64 / cols, cols]).unwrap()
    }

    fn new_cache(reserve: i64) -> ObjectRef {
        KvCacheObj::create(&rows(&[], 2), &[reserve, 2], -1).unwrap()
    }

    fn st(c: &ObjectRef) -> MutexGuard<'_, KvState> {
        c.downcast_ref::<KvCacheObj>().unwrap().lock()
    }

    #[test]
    fn append_grows_by_doubling_and_keeps_rows() {
        let c = new_cache(2);
        let mut want = Vec::new();
        for i in 0..5 {
            let r = [i as f32, 10.0 + i as f32];
            st(&c).append(&rows(&r, 2)).unwrap();
            want.extend_from_slice(&r);
        }
        let s = st(&c);
        assert_eq!(s.fill_count, 5);
        assert_eq!(s.data.shape(), &[8, 2]);
        assert_eq!(s.view(None).unwrap().to_vec::<f32>().unwrap(), want);
        assert!(s.view(Some(&[4, 2])).is_err());
        assert!(s.view(Some(&[5, 3])).is_err());
    }

    #[test]
    fn create_with_fill_count_and_update() {
        let c = KvCacheObj::create(&rows(&[1.0, 2.0, 3.0, 4.0], 2), &[4, 2], 1).unwrap();
        assert_eq!(st(&c).fill_count, 1);
        assert_eq!(
            st(&c).view(None).unwrap().to_vec::<f32>().unwrap(),
            [1.0, 2.0]
        );
        st(&c).update(&rows(&[7.0, 8.0], 2)).unwrap();
        assert_eq!(
            st(&c).view(None).unwrap().to_vec::<f32>().unwrap(),
            [7.0, 8.0]
        );
        assert!(st(&c).update(&rows(&[1.0, 2.0, 3.0, 4.0], 2)).is_err());
        assert!(KvCacheObj::create(&rows(&[1.0, 2.0], 2), &[4, 2], 9).is_err());
    }

    #[test]
    fn bad_values_are_errors() {
        let c = new_cache(2);
        let wrong_dtype = NDArray::from_slice(&[1i32, 2], &[1, 2]).unwrap();
        assert!(st(&c).append(&wrong_dtype).is_err());
        assert!(st(&c).append(&rows(&[1.0, 2.0, 3.0], 3)).is_err());
        assert_eq!(st(&c).fill_count, 0);
    }

    #[test]
    fn window_override_wraps_after_sinks() {
        let c = new_cache(1);
        let max = 4;
        // rows 0..3 then 3..6: the ring of 4 keeps row 0 (a sink) and overwrites after it
        st(&c)
            .window_override(&rows(&[0.0, 0.0, 1.0, 1.0, 2.0, 2.0], 2), max, 1)
            .unwrap();
        st(&c)
            .window_override(&rows(&[3.0, 3.0, 4.0, 4.0, 5.0, 5.0], 2), max, 1)
            .unwrap();
        let s = st(&c);
        assert_eq!(s.fill_count, 4);
        assert_eq!(
            s.view(None).unwrap().to_vec::<f32>().unwrap(),
            [0.0, 0.0, 4.0, 4.0, 5.0, 5.0, 3.0, 3.0]
        );
        assert_eq!(s.window_pos, 3);
        drop(s);
        assert!(st(&c).window_override(&rows(&[0.0; 8], 2), max, 1).is_err());
    }

    #[test]
    fn window_override_without_sinks() {
        let c = new_cache(1);
        for i in 0..5 {
            st(&c)
                .window_override(&rows(&[i as f32, i as f32], 2), 3, 0)
                .unwrap();
        }
        let s = st(&c);
        assert_eq!(s.fill_count, 3);
        assert_eq!(
            s.view(None).unwrap().to_vec::<f32>().unwrap(),
            [3.0, 3.0, 4.0, 4.0, 2.0, 2.0]
        );
    }
}
