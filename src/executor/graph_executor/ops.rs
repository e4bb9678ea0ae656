//! Op execution: one node's call, whole runs, and the debug executor's step-wise runs.

use super::{Executor, State};
use crate::device;
use crate::ndarray::NDArray;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::{BackendPackedCFunc, Function};
use crate::packed_func::types::{type_code as tc, DLDevice, DLTensor, TVMValue};
use crate::packed_func::value::RetValue;
use std::ffi::c_void;

/// What one node runs.
pub(super) enum OpKind {
    /// An input node: nothing.
    None,
    /// `__nop`: nothing, but a node (outputs alias inputs).
    Nop,
    /// `__copy`: a copy from argument 0 to argument 1, across devices.
    Copy,
    /// A function compiled by TVM, called directly.
    Backend {
        func: BackendPackedCFunc,
        resource: *mut c_void,
        _keep: Function,
    },
    /// Any other PackedFunc.
    Packed(Function),
}

/// One node's call: its kind and its slice of the argument arrays.
pub(super) struct Op {
    pub(super) kind: OpKind,
    pub(super) start: usize,
    pub(super) n: usize,
}

impl Executor {
    /// Runs node `nid`'s op (nothing for inputs).
    #[inline(always)]
    pub(super) fn run_op(&self, st: &mut State, nid: usize) -> Result<()> {
        let op = &st.ops[nid];
        let (start, n) = (op.start, op.n);
        match &op.kind {
            OpKind::None | OpKind::Nop => Ok(()),
            OpKind::Backend { func, resource, .. } => {
                let mut out = TVMValue::default();
                let mut code = tc::NULLPTR;
                // SAFETY: `values`/`codes` hold `n` prepared arguments from `start`, pointing
                // at tensors the state owns; the function is kept alive by `_keep`.
                let r = unsafe {
                    func(
                        st.values.as_mut_ptr().add(start),
                        st.codes.as_mut_ptr().add(start),
                        n as i32,
                        &mut out,
                        &mut code,
                        *resource,
                    )
                };
                if r != 0 {
                    return Err(self.op_error(nid, Error::from_last()));
                }
                if code != tc::NULLPTR {
                    // SAFETY: compiled code returned a valid value owning its objects.
                    drop(unsafe { RetValue::from_c_take(out, code) });
                }
                Ok(())
            }
            OpKind::Packed(f) => {
                let mut rv = RetValue::Null;
                // SAFETY: as above.
                unsafe {
                    f.obj().call_raw(
                        st.values.as_mut_ptr().add(start),
                        st.codes.as_mut_ptr().add(start),
                        n as i32,
                        &mut rv,
                    )
                }
                .map_err(|e| self.op_error(nid, e))
            }
            OpKind::Copy => {
                // SAFETY: both argument tensors describe live memory of the executor (or of
                // arrays it keeps alive).
                unsafe {
                    device::copy_tensor(
                        &st.tensors[start],
                        &st.tensors[start + 1],
                        std::ptr::null_mut(),
                    )
                }
                .map_err(|e| self.op_error(nid, e))
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn op_error(&self, nid: usize, e: Error) -> Error {
        let f = self.graph.nodes.get(nid).map_or("", |n| &n.param.func_name);
        crate::executor::ctx(
            e,
            format_args!(
                "graph executor: node {nid} '{}' (function {f})",
                self.graph.node_name(nid as u32)
            ),
        )
    }

    /// Runs the ops of nodes `from..to`, in order: the one copy of the per-op loop (and of
    /// the inlined call path) that every way of running nodes shares.
    #[inline(never)]
    pub(super) fn run_ops(&self, st: &mut State, from: usize, to: usize) -> Result<()> {
        for nid in from..to {
            self.run_op(st, nid)?;
        }
        Ok(())
    }

    /// Runs every op in order.
    pub(crate) fn run(&self) -> Result<()> {
        let mut st = self.state.lock()?;
        let n = st.ops.len();
        self.run_ops(&mut st, 0, n)
    }

    pub(super) fn check_node(&self, nid: i64) -> Result<usize> {
        if nid < 0 || nid as usize >= self.graph.nodes.len() {
            return Err(Error::internal_fmt(format_args!(
                "node index {nid} is out of range: the graph has {} nodes",
                self.graph.nodes.len()
            )));
        }
        Ok(nid as usize)
    }

    /// Index of a node by name.
    pub(crate) fn node_index(&self, name: &str) -> Result<usize> {
        self.graph
            .nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| Error::value_fmt(format_args!("graph has no node named '{name}'")))
    }

    /// Runs ops up to and including `nid` (from the start, or on from the last node run).
    pub(crate) fn execute_node(&self, nid: i64) -> Result<()> {
        let nid = self.check_node(nid)? as i64;
        let mut st = self.state.lock_cold()?;
        let st = &mut *st;
        let start = if nid < st.last_executed_node {
            0
        } else if nid > st.last_executed_node {
            st.last_executed_node + 1
        } else {
            return Ok(());
        };
        self.run_ops(st, start as usize, nid as usize + 1)?;
        st.last_executed_node = nid;
        Ok(())
    }

    /// A CPU copy of output `index` of node `nid`, which must be the last node executed.
    pub(crate) fn get_node_output(&self, nid: i64, index: i64) -> Result<NDArray> {
        let nid = self.check_node(nid)?;
        let st = self.state.lock_cold()?;
        if st.last_executed_node != nid as i64 {
            return Err(Error::value_fmt(format_args!(
                "get_node_output: node {nid} is not the last executed node ({}); call \
                 execute_node({nid}) first",
                st.last_executed_node
            )));
        }
        let outs = self.graph.num_outputs_of(nid) as i64;
        if index < 0 || index >= outs {
            return Err(Error::index_fmt(format_args!(
                "get_node_output: node {nid} has {outs} outputs, not {}",
                index + 1
            )));
        }
        let src = st.entry(self.graph.entry_id(nid as u32, index as u32))?;
        let mut out = NDArray::empty(src.shape(), src.dtype(), DLDevice::CPU)?;
        src.copy_to(&mut out)?;
        Ok(out)
    }

    /// Runs ops up to and including `nid`, then returns (or copies into `out`) its first
    /// output.
    pub(crate) fn debug_get_output(&self, nid: i64, out: Option<&DLTensor>) -> Result<NDArray> {
        let nid = self.check_node(nid)?;
        let mut st = self.state.lock_cold()?;
        let st = &mut *st;
        self.run_ops(st, 0, nid + 1)?;
        let arr = st.entry(self.graph.entry_id(nid as u32, 0))?.clone();
        if let Some(dst) = out {
            // SAFETY: both tensors are live.
            unsafe { device::copy_tensor(arr.dltensor(), dst, std::ptr::null_mut()) }
                .map_err(|e| crate::executor::ctx(e, format_args!("debug_get_output {nid}")))?;
        }
        Ok(arr)
    }
}
