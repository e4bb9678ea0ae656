//! Argument tables: for each `tvm_op` node its function and its slice of the prepared
//! `DLTensor`/`TVMValue`/type-code arrays (inputs, then outputs), built once.

use super::super::graph::{Graph, OpType};
use super::ops::{Op, OpKind};
use super::State;
use crate::module::Module;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::{FuncImpl, Function};
use crate::packed_func::types::{type_code as tc, DLTensor, TVMValue};
use std::ffi::c_void;

/// Builds the state: every node's argument list and function over the entries' arrays, in
/// `st`, whose pool and entries are set up and whose other vectors are empty (filled in
/// place, not returned and moved).
pub(super) fn setup_ops(g: &Graph, lib: &Module, st: &mut State) -> Result<()> {
    let State {
        data_entry,
        is_param,
        borrowed,
        ops,
        tensors,
        values,
        codes,
        _shapes: shapes,
        eid_slots,
        ..
    } = st;
    struct Slot {
        eid: usize,
        flat: bool,
    }
    let mut slots: Vec<Slot> = Vec::new();
    ops.reserve_exact(g.nodes.len());
    // Functions looked up so far (a graph calls each a few times).
    let mut funcs: Vec<(&str, Function)> = Vec::new();
    for (nid, node) in g.nodes.iter().enumerate() {
        let start = slots.len();
        if node.op_type == OpType::Null {
            ops.push(Op {
                kind: OpKind::None,
                start,
                n: 0,
            });
            continue;
        }
        let flat = node.param.flatten_data;
        for e in &node.inputs {
            slots.push(Slot {
                eid: g.eid(*e),
                flat,
            });
        }
        for j in 0..node.param.num_outputs {
            slots.push(Slot {
                eid: g.entry_id(nid as u32, j),
                flat,
            });
        }
        let name = node.param.func_name.as_str();
        let kind = match name {
            "__nop" => OpKind::Nop,
            "__copy" => OpKind::Copy,
            _ => {
                let f = match funcs.iter().find(|(n, _)| *n == name) {
                    Some((_, f)) => f.clone(),
                    None => {
                        let f = lib.get_function(name, true)?.ok_or_else(|| {
                            Error::attribute_fmt(format_args!(
                                "no such function in module: {name} (needed by node {nid} \
                                 '{}'; the library module is of type {})",
                                node.name,
                                lib.type_key()
                            ))
                        })?;
                        funcs.push((name, f.clone()));
                        f
                    }
                };
                match f.obj().imp() {
                    FuncImpl::Backend { func, resource, .. } => OpKind::Backend {
                        func: *func,
                        resource: *resource,
                        _keep: f.clone(),
                    },
                    _ => OpKind::Packed(f),
                }
            }
        };
        ops.push(Op {
            kind,
            start,
            n: slots.len() - start,
        });
    }
    // Shapes: every entry's shape, then one flattened size per flattened slot.
    let mut entry_off = Vec::with_capacity(g.num_entries());
    for s in &g.shape {
        entry_off.push(shapes.len());
        shapes.extend_from_slice(s);
    }
    // Flattened sizes follow in slot order (the tensor loop below walks them the same way).
    let mut next_flat = shapes.len();
    for s in &slots {
        if s.flat {
            shapes.push(g.entry_shape(s.eid).iter().product());
        }
    }
    shapes.push(0);
    let base = shapes.as_mut_ptr();
    eid_slots.resize_with(g.num_entries(), Vec::new);
    tensors.reserve_exact(slots.len());
    for (k, s) in slots.iter().enumerate() {
        let Some(entry) = data_entry.get(s.eid) else {
            return Err(super::no_entry(s.eid));
        };
        let entry = entry.dltensor();
        let (ndim, off) = if s.flat {
            next_flat += 1;
            (1, next_flat - 1)
        } else {
            match entry_off.get(s.eid) {
                Some(&off) => (g.entry_shape(s.eid).len() as i32, off),
                None => (0, 0),
            }
        };
        // SAFETY: `off` is inside `shapes` (the trailing element covers empty shapes, and
        // `shapes` is never empty).
        let shape = unsafe { base.add(off) };
        tensors.push(DLTensor {
            data: entry.data,
            device: entry.device,
            ndim,
            dtype: entry.dtype,
            shape,
            strides: std::ptr::null_mut(),
            byte_offset: entry.byte_offset,
        });
        if let Some(v) = eid_slots.get_mut(s.eid) {
            v.push(k);
        }
    }
    values.extend(tensors.iter_mut().map(|t| TVMValue {
        v_handle: t as *mut DLTensor as *mut c_void,
    }));
    codes.resize(tensors.len(), tc::DLTENSOR_HANDLE);
    is_param.resize(g.input_nodes.len(), false);
    borrowed.resize(g.num_entries(), false);
    Ok(())
}
