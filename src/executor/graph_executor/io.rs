//! Inputs, outputs and parameters: copies in and out, zero-copy, parameter loading and
//! sharing, and the input/output info.

use super::super::graph::OpType;
use super::super::params;
use super::{Executor, State, TensorInfo};
use crate::device;
use crate::executor::ctx;
use crate::ndarray::{NDArray, NDArrayObj, ALLOC_ALIGNMENT};
use crate::packed_func::dtype::dtype_to_string;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLTensor};
use crate::packed_func::value::ArgValue;
use std::ffi::c_void;
use std::fmt;

/// A tensor given by a caller: an NDArray object, or a bare `DLTensor` it keeps alive.
pub(crate) enum TensorArg {
    /// An NDArray (kept alive by us when we alias it).
    Array(NDArray),
    /// A bare tensor owned by the caller.
    Raw(*mut DLTensor),
}

impl TensorArg {
    /// Reads argument `v` as a tensor.
    pub(crate) fn from_arg(v: ArgValue<'_>, what: &str) -> Result<TensorArg> {
        match v {
            ArgValue::DLTensor(t) => Ok(TensorArg::Raw(t.as_ptr())),
            ArgValue::Object(o) if o.downcast_ref::<NDArrayObj>().is_some() => {
                Ok(TensorArg::Array(NDArray::from_object(o.to_ref())?))
            }
            other => Err(Error::type_error_fmt(format_args!(
                "{what}: expected an NDArray or DLTensor but got {}",
                other.kind_name()
            ))),
        }
    }

    /// The tensor.
    pub(crate) fn dl(&self) -> &DLTensor {
        match self {
            TensorArg::Array(a) => a.dltensor(),
            // SAFETY: the caller passed a live tensor for the duration of the call.
            TensorArg::Raw(t) => unsafe { &**t },
        }
    }

    /// An array aliasing this tensor's memory with another shape and type.
    fn alias(&self, shape: &[i64], dtype: DLDataType) -> Result<NDArray> {
        match self {
            TensorArg::Array(a) => a.view(shape, dtype, 0),
            TensorArg::Raw(t) => {
                // SAFETY: the caller passed a live tensor.
                let t = unsafe { &**t };
                // SAFETY: only an address computation inside the caller's buffer.
                let data = unsafe { (t.data as *mut u8).add(t.byte_offset as usize) };
                // SAFETY: the caller keeps a bare tensor's memory alive while the executor
                // uses it (the contract of `set_input_zero_copy` / `set_output_zero_copy` in
                // the reference), and `check_external` has checked its shape and type.
                unsafe { NDArray::from_external(data as *mut c_void, shape, dtype, t.device, None) }
            }
        }
    }
}

impl Executor {
    /// Refuses a tensor whose data type differs from the one entry `eid` declares (no silent
    /// reinterpretation of the bits): the error names `what` (the call and the entry), both
    /// data types and both shapes.
    fn check_dtype(&self, t: &DLTensor, eid: usize, what: fmt::Arguments<'_>) -> Result<()> {
        if self.graph.dltype.get(eid) == Some(&t.dtype) {
            return Ok(());
        }
        // SAFETY: a live tensor holds `ndim` shape entries.
        let shape = unsafe { crate::ndarray::shape_of(t) };
        Err(Error::type_error_fmt(format_args!(
            "{what}: the array's data type {} (shape {shape:?}) differs from the declared {} \
             (shape {:?}); the runtime does not reinterpret data: convert the array first",
            dtype_to_string(t.dtype),
            self.graph.dltype_names.get(eid).map_or("", |s| s),
            self.graph.entry_shape(eid)
        )))
    }

    /// Copies `src` into input `index` (same data type and size).
    pub(crate) fn set_input(&self, index: usize, src: &DLTensor) -> Result<()> {
        let eid = self.check_input(index)?;
        let name = self.input_name(index);
        self.check_dtype(src, eid, format_args!("set_input '{name}'"))?;
        let mut st = self.state.lock()?;
        if st.borrowed.get(eid) == Some(&true) {
            // The entry shows a factory's parameter: give it storage of its own first, so
            // that the factory (and executors created from it) keep their values.
            let have = st.entry(eid)?.dltensor();
            let own = NDArray::empty(self.graph.entry_shape(eid), have.dtype, have.device)
                .map_err(|e| ctx(e, format_args!("set_input")))?;
            Self::redirect(&mut st, eid, own);
        }
        let dst = st.entry(eid)?.dltensor();
        // SAFETY: `src` is a live tensor (caller contract of the argument), `dst` our array.
        unsafe { device::copy_tensor(src, dst, std::ptr::null_mut()) }
            .map_err(|e| ctx(e, format_args!("set_input '{name}'")))
    }

    fn check_external(
        &self,
        st: &State,
        t: &DLTensor,
        eid: usize,
        what: fmt::Arguments<'_>,
    ) -> Result<()> {
        let internal = st.entry(eid)?.dltensor();
        self.check_dtype(t, eid, what)?;
        let want_shape = self.graph.entry_shape(eid);
        // SAFETY: a live tensor holds `ndim` shape entries.
        let shape = unsafe { crate::ndarray::shape_of(t) };
        if shape != want_shape {
            return Err(Error::value_fmt(format_args!(
                "{what}: shape {shape:?} does not match the graph's {want_shape:?}"
            )));
        }
        if t.device != internal.device {
            return Err(Error::value_fmt(format_args!(
                "{what}: the array is on {} but the graph expects {}",
                device::describe(t.device),
                device::describe(internal.device)
            )));
        }
        if !crate::ndarray::is_contiguous(t) {
            return Err(Error::value_fmt(format_args!(
                "{what}: the array is not contiguous"
            )));
        }
        let addr = t.data as usize + t.byte_offset as usize;
        if addr % ALLOC_ALIGNMENT != 0 {
            return Err(Error::value_fmt(format_args!(
                "{what}: the data must be aligned to {ALLOC_ALIGNMENT} bytes (address {addr:#x})"
            )));
        }
        Ok(())
    }

    /// Uses a factory's parameter arrays directly, without copying, for the parameters whose
    /// entry is an input with storage of its own (no other entry shares its storage id and it
    /// is not a graph output) and whose array fits it (shape, type, device, contiguity,
    /// alignment); the others are copied as `set_params` does. Compiled kernels only read
    /// inputs, and `set_input` copies on write, so the factory's arrays are never changed.
    pub(crate) fn use_factory_params(&self, p: &[(String, NDArray)]) -> Result<()> {
        // Storage ids are dense (the graph checks them), entries too.
        let sids = &self.graph.storage_id;
        let mut sid_users = vec![0u32; sids.iter().map(|&s| s as usize + 1).max().unwrap_or(0)];
        for &sid in sids {
            if let Some(n) = sid_users.get_mut(sid as usize) {
                *n += 1;
            }
        }
        let mut is_output = vec![false; self.graph.num_entries()];
        for &e in &self.graph.outputs {
            if let Some(o) = is_output.get_mut(self.graph.eid(e)) {
                *o = true;
            }
        }
        let mut copy = Vec::new();
        let mut st = self.state.lock_cold()?;
        for (name, arr) in p {
            let Some(i) = self.input_index(name) else {
                continue;
            };
            let eid = self.check_input(i)?;
            let shareable = sids.get(eid).and_then(|&s| sid_users.get(s as usize)) == Some(&1)
                && is_output.get(eid) == Some(&false)
                && self
                    .check_external(&st, arr.dltensor(), eid, format_args!("{name}"))
                    .is_ok();
            if shareable {
                Self::redirect(&mut st, eid, arr.clone());
                if let Some(b) = st.borrowed.get_mut(eid) {
                    *b = true;
                }
            } else {
                copy.push((name.clone(), arr.clone()));
            }
        }
        drop(st);
        self.set_params(&copy, false)
    }

    /// Points entry `eid` (and every argument using it) at `arr`.
    pub(super) fn redirect(st: &mut State, eid: usize, arr: NDArray) {
        if let Some(b) = st.borrowed.get_mut(eid) {
            *b = false;
        }
        let t = arr.dltensor();
        // SAFETY: only an address computation inside (or one past) the array's memory.
        let p = unsafe { (t.data as *mut u8).add(t.byte_offset as usize) } as *mut c_void;
        for &slot in st.eid_slots.get(eid).map_or(&[][..], |v| v) {
            if let Some(t) = st.tensors.get_mut(slot) {
                t.data = p;
                t.byte_offset = 0;
            }
        }
        if let Some(d) = st.data_entry.get_mut(eid) {
            *d = arr;
        }
    }

    /// Makes input `index` use `ext`'s memory (and every entry sharing its storage).
    pub(crate) fn set_input_zero_copy(&self, index: usize, ext: &TensorArg) -> Result<()> {
        let eid = self.check_input(index)?;
        let name = self.input_name(index);
        let sids = &self.graph.storage_id;
        let sid = sids.get(eid);
        let mut targets = vec![eid];
        for (e, s) in sids.iter().enumerate() {
            if e != eid && Some(s) == sid {
                targets.push(e);
            }
        }
        self.zero_copy(&targets, ext, format_args!("set_input_zero_copy '{name}'"))
    }

    /// Makes output `index` be written straight into `ext`.
    pub(crate) fn set_output_zero_copy(&self, index: usize, ext: &TensorArg) -> Result<()> {
        let eid = self.check_output(index)?;
        let g = &self.graph;
        let mut targets = vec![eid];
        let mut name = "";
        if let Some(node) = g
            .outputs
            .get(index)
            .and_then(|e| g.nodes.get(e.node_id as usize))
        {
            name = &node.name;
            if node.op_type == OpType::TvmOp && node.param.func_name == "__nop" {
                // A `__nop` node has an input (the graph checks it).
                if let Some(&e) = node.inputs.first() {
                    let src = g.eid(e);
                    if src != eid {
                        targets.push(src);
                    }
                }
            }
        }
        self.zero_copy(
            &targets,
            ext,
            format_args!("set_output_zero_copy {index} ('{name}')"),
        )
    }

    /// Checks `ext` against the first entry of `targets` (`what` names the call), then makes
    /// every entry of `targets` use its memory.
    fn zero_copy(
        &self,
        targets: &[usize],
        ext: &TensorArg,
        what: fmt::Arguments<'_>,
    ) -> Result<()> {
        let mut st = self.state.lock()?;
        let g = &self.graph;
        let mut views = Vec::with_capacity(targets.len());
        for (k, &e) in targets.iter().enumerate() {
            if k == 0 {
                self.check_external(&st, ext.dl(), e, what)?;
            }
            // Entries exist (the callers found them in the graph).
            if let (Some(shape), Some(&dtype)) = (g.shape.get(e), g.dltype.get(e)) {
                views.push((e, ext.alias(shape, dtype).map_err(|err| ctx(err, what))?));
            }
        }
        for (e, v) in views {
            Self::redirect(&mut st, e, v);
        }
        Ok(())
    }

    pub(crate) fn get_input(&self, index: usize) -> Result<NDArray> {
        let eid = self.check_input(index)?;
        Ok(self.state.lock_cold()?.entry(eid)?.clone())
    }

    pub(crate) fn get_output(&self, index: usize) -> Result<NDArray> {
        let eid = self.check_output(index)?;
        Ok(self.state.lock()?.entry(eid)?.clone())
    }

    /// Copies output `index` into `dst` (same shape).
    pub(crate) fn copy_output_to(&self, index: usize, dst: &DLTensor) -> Result<()> {
        let eid = self.check_output(index)?;
        let st = self.state.lock()?;
        let src = st.entry(eid)?.dltensor();
        // SAFETY: `dst` is a live tensor (caller contract).
        let dshape = unsafe { crate::ndarray::shape_of(dst) };
        let want = self.graph.entry_shape(eid);
        if dshape != want {
            return Err(Error::value_fmt(format_args!(
                "get_output {index}: the destination's shape {dshape:?} does not match the \
                 output's {want:?}"
            )));
        }
        // SAFETY: both are live tensors.
        unsafe { device::copy_tensor(src, dst, std::ptr::null_mut()) }
            .map_err(|e| ctx(e, format_args!("get_output {index}")))
    }

    /// Copies parameters into the inputs of the same names (others are ignored); with
    /// `mark`, they are also left out of the input info.
    pub(crate) fn set_params(&self, p: &[(String, NDArray)], mark: bool) -> Result<()> {
        // Largest first, as the reference uploads them.
        let size = |i: usize| p.get(i).map_or(0, |e| e.1.nbytes());
        let order = crate::packed_func::order::stable_order(p.len(), &|x, y| size(y).cmp(&size(x)));
        for (name, arr) in order.into_iter().filter_map(|i| p.get(i)) {
            if mark {
                self.mark_param(name)?;
            }
            if let Some(i) = self.input_index(name) {
                self.set_input(i, arr.dltensor())?;
            }
        }
        Ok(())
    }

    /// `load_params`: reads a parameter blob, copies each array into the input of its name.
    pub(crate) fn load_params(&self, bytes: &[u8]) -> Result<()> {
        let p = params::load_params(bytes)?;
        for (name, arr) in &p {
            self.mark_param(name)?;
            if let Some(i) = self.input_index(name) {
                self.set_input(i, arr.dltensor())?;
            }
        }
        Ok(())
    }

    /// `share_params`: makes the inputs named in the blob use `other`'s arrays.
    pub(crate) fn share_params(&self, other: &Executor, bytes: &[u8]) -> Result<()> {
        let mut r = params::ByteReader::new(bytes, "share_params");
        let names = params::read_params_header(&mut r)?;
        for name in names {
            let Some(i) = self.input_index(&name) else {
                continue;
            };
            let j = other.input_index(&name).ok_or_else(|| {
                Error::value_fmt(format_args!(
                    "share_params: the other executor has no input named '{name}'"
                ))
            })?;
            let arr = other.get_input(j)?;
            let eid = self.check_input(i)?;
            let mut st = self.state.lock_cold()?;
            let have = st.data_entry[eid].dltensor();
            let t = arr.dltensor();
            // SAFETY: a live array's shape.
            let shape = unsafe { crate::ndarray::shape_of(t) };
            if shape != self.graph.shape[eid].as_slice()
                || t.dtype != have.dtype
                || t.device != have.device
            {
                return Err(Error::value_fmt(format_args!(
                    "share_params: parameter '{name}' differs in shape, type or device between \
                     the two executors"
                )));
            }
            Self::redirect(&mut st, eid, arr);
        }
        Ok(())
    }

    /// Leaves the inputs named `name` out of the input info.
    fn mark_param(&self, name: &str) -> Result<()> {
        let mut st = self.state.lock_cold()?;
        for &i in self.inputs_named(name) {
            if let Some(b) = st.is_param.get_mut(i) {
                *b = true;
            }
        }
        Ok(())
    }

    /// Calls `f` with the name, shape and type of each input that is not a loaded parameter
    /// (with `input`), or of each output, in order.
    pub(crate) fn each_info(
        &self,
        input: bool,
        f: &mut dyn FnMut(&str, &[i64], DLDataType),
    ) -> Result<()> {
        let g = &self.graph;
        if input {
            let st = self.state.lock_cold()?;
            for (&nid, &param) in g.input_nodes.iter().zip(&st.is_param) {
                let eid = g.entry_id(nid, 0);
                if let (false, Some(&t)) = (param, g.dltype.get(eid)) {
                    f(g.node_name(nid), g.entry_shape(eid), t);
                }
            }
        } else {
            for &e in &g.outputs {
                let eid = g.eid(e);
                if let Some(&t) = g.dltype.get(eid) {
                    f(g.node_name(e.node_id), g.entry_shape(eid), t);
                }
            }
        }
        Ok(())
    }

    fn infos(&self, input: bool) -> Result<Vec<TensorInfo>> {
        let mut out = Vec::new();
        self.each_info(input, &mut |name, shape, dtype| {
            out.push(TensorInfo {
                name: name.to_string(),
                shape: shape.to_vec(),
                dtype,
            })
        })?;
        Ok(out)
    }

    /// Input info: names, shapes and types of the inputs that are not loaded parameters.
    pub(crate) fn input_info(&self) -> Result<Vec<TensorInfo>> {
        self.infos(true)
    }

    /// Output info, in output order.
    pub(crate) fn output_info(&self) -> Vec<TensorInfo> {
        // Outputs take no lock: this cannot fail.
        self.infos(false).unwrap_or_default()
    }
}
