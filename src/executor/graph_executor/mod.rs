//! The graph executor: runs a graph of library functions over a planned storage pool.
//!
//! Set-up mirrors the reference: one pool array per storage id (its size the largest entry
//! using it, on the device its `device_index` names), one view per node entry, and for each
//! `tvm_op` node an argument list (inputs, then outputs) built once. Arguments are tensors
//! owned by the executor, so `run` is a loop of calls over prepared `TVMValue` arrays; for
//! functions compiled by TVM the call goes straight to the function pointer.
//!
//! Rooms: `storage` plans and allocates the pool, `args` builds the argument tables,
//! `ops` runs them, `io` sets and reads inputs, outputs and parameters, `profile` times
//! nodes, `node` is the module object and `api` the safe Rust face.

mod api;
mod args;
mod io;
mod node;
mod ops;
mod profile;
mod storage;

pub use api::GraphExecutor;
pub(crate) use io::TensorArg;
pub(crate) use node::{executor_of, make_module};
pub(crate) use storage::LinkedParamLookup;

use super::graph::Graph;
use crate::device;
use crate::module::Module;
use crate::ndarray::NDArray;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::json::put_str;
use crate::packed_func::types::{DLDataType, DLDevice, DLTensor, TVMValue};
use args::setup_ops;
use ops::Op;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};
use storage::{check_kernels_can_reach, setup_storage};

/// Name and type of a graph input or output.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// The node name.
    pub name: String,
    /// The shape.
    pub shape: Vec<i64>,
    /// The element type.
    pub dtype: DLDataType,
}

/// Mutable state: storage, entries, prepared arguments.
struct State {
    /// Pool arrays by storage id (`None` for ids no entry uses); the entries are views.
    _storage_pool: Vec<Option<NDArray>>,
    /// One array per node entry (a view of the pool, or an external array after zero-copy).
    data_entry: Vec<NDArray>,
    /// Inputs named by a loaded parameter (left out of the input info), by input index.
    is_param: Vec<bool>,
    /// Entries that use a factory's parameter array instead of their own storage; writing
    /// one through `set_input` first gives it storage of its own (copy on write).
    borrowed: Vec<bool>,
    /// One op per node.
    ops: Vec<Op>,
    /// The argument tensors of all ops.
    tensors: Vec<DLTensor>,
    /// Their `TVMValue`s (pointers to `tensors`).
    values: Vec<TVMValue>,
    /// Their type codes (`kTVMDLTensorHandle`).
    codes: Vec<i32>,
    /// Shapes the argument tensors point into.
    _shapes: Vec<i64>,
    /// For each entry, the argument tensors that refer to it.
    eid_slots: Vec<Vec<usize>>,
    /// The last node `execute_node` ran (debug executor), or -1.
    last_executed_node: i64,
}

impl State {
    /// The array of entry `eid` (every entry has one; the error is for an id out of range).
    #[inline]
    fn entry(&self, eid: usize) -> Result<&NDArray> {
        match self.data_entry.get(eid) {
            Some(a) => Ok(a),
            None => Err(no_entry(eid)),
        }
    }
}

#[cold]
#[inline(never)]
fn no_entry(eid: usize) -> Error {
    Error::internal_fmt(format_args!("graph executor: no entry {eid}"))
}

// SAFETY: the raw pointers in `State` point into memory the state owns (its boxes) or keeps
// alive (its arrays, its functions); access is serialised by `ExecLock`.
unsafe impl Send for State {}

thread_local! {
    static THREAD_TOKEN: u8 = const { 0 };
}

fn thread_token() -> usize {
    THREAD_TOKEN.with(|t| t as *const u8 as usize)
}

/// A mutex that refuses re-entrant use from the thread holding it (an operator calling back
/// into its own executor) instead of deadlocking.
struct ExecLock<T> {
    m: Mutex<T>,
    owner: AtomicUsize,
}

struct Guard<'a, T> {
    g: MutexGuard<'a, T>,
    owner: &'a AtomicUsize,
}

impl<T> std::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.g
    }
}

impl<T> std::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.g
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.owner.store(0, Ordering::Relaxed);
    }
}

/// The guard of the cold paths (parameters, information, the debug executor): taken and
/// released out of line, one copy of that code for all of them. (`run`, `set_input`,
/// `get_output` and the zero-copy functions take [`ExecLock::lock`], inlined.)
struct ColdGuard<'a, T>(ManuallyDrop<Guard<'a, T>>);

impl<T> std::ops::Deref for ColdGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for ColdGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> Drop for ColdGuard<'_, T> {
    #[inline(never)]
    fn drop(&mut self) {
        // SAFETY: the guard is dropped here only, once.
        unsafe { ManuallyDrop::drop(&mut self.0) }
    }
}

impl<T> ExecLock<T> {
    fn new(v: T) -> Self {
        ExecLock {
            m: Mutex::new(v),
            owner: AtomicUsize::new(0),
        }
    }

    #[inline]
    fn lock(&self) -> Result<Guard<'_, T>> {
        let me = thread_token();
        // Only this thread ever stores its own token, so equality means it holds the lock.
        if self.owner.load(Ordering::Relaxed) == me {
            return Err(Error::tvm(
                "graph executor: re-entrant call from inside one of its own operators",
            ));
        }
        let g = self.m.lock().unwrap_or_else(|e| e.into_inner());
        self.owner.store(me, Ordering::Relaxed);
        Ok(Guard {
            g,
            owner: &self.owner,
        })
    }

    /// [`ExecLock::lock`] for the cold paths.
    #[inline(never)]
    fn lock_cold(&self) -> Result<ColdGuard<'_, T>> {
        self.lock().map(|g| ColdGuard(ManuallyDrop::new(g)))
    }
}

/// The shared core of an executor: the graph, the library and the locked state.
pub(crate) struct Executor {
    pub(crate) graph: Graph,
    lib: Module,
    devices: Vec<DLDevice>,
    /// Input indices sorted by name (equal names in input order), for lookups by name.
    inputs_by_name: Vec<usize>,
    state: ExecLock<State>,
}

impl Executor {
    /// Builds an executor: parses the graph, plans and allocates storage, prepares the ops.
    /// (Shared from the start: built into its `Arc`, not returned and moved there.)
    pub(crate) fn new(
        graph_json: &str,
        lib: Module,
        devices: &[DLDevice],
        lookup: LinkedParamLookup,
    ) -> Result<Arc<Executor>> {
        if devices.is_empty() {
            return Err(Error::value(
                "graph executor: at least one device is needed",
            ));
        }
        for &d in devices {
            device::api(d).map_err(|e| crate::executor::ctx(e, format_args!("graph executor")))?;
        }
        // One value filled in place by the steps below, so that an error drops just it.
        let mut ex = Executor {
            graph: Graph::empty(),
            lib,
            devices: devices.to_vec(),
            inputs_by_name: Vec::new(),
            state: ExecLock::new(State {
                _storage_pool: Vec::new(),
                data_entry: Vec::new(),
                is_param: Vec::new(),
                borrowed: Vec::new(),
                ops: Vec::new(),
                tensors: Vec::new(),
                values: Vec::new(),
                codes: Vec::new(),
                _shapes: Vec::new(),
                eid_slots: Vec::new(),
                last_executed_node: -1,
            }),
        };
        let graph = &mut ex.graph;
        graph.read(graph_json)?;
        ex.inputs_by_name =
            crate::packed_func::order::stable_order(graph.input_nodes.len(), &|a, b| {
                graph.input_name(a).cmp(graph.input_name(b))
            });
        let (graph, lib) = (&ex.graph, &ex.lib);
        // Nobody else has the lock yet: no poisoning.
        let state = ex.state.m.get_mut().unwrap_or_else(|e| e.into_inner());
        setup_storage(
            graph,
            lib,
            devices,
            &lookup,
            &mut state._storage_pool,
            &mut state.data_entry,
        )?;
        check_kernels_can_reach(graph, lib, &state.data_entry)?;
        setup_ops(graph, lib, state)?;
        Ok(Arc::new(ex))
    }

    /// The library.
    pub(crate) fn lib(&self) -> &Module {
        &self.lib
    }

    /// The devices.
    pub(crate) fn devices(&self) -> &[DLDevice] {
        &self.devices
    }

    pub(crate) fn num_inputs(&self) -> usize {
        self.graph.input_nodes.len()
    }

    pub(crate) fn num_outputs(&self) -> usize {
        self.graph.outputs.len()
    }

    /// The name of input `i`.
    fn input_name(&self, i: usize) -> &str {
        self.graph.input_name(i)
    }

    /// The inputs named `name`, in input order (usually one).
    fn inputs_named(&self, name: &str) -> &[usize] {
        let v = &self.inputs_by_name;
        let lo = v.partition_point(|&i| self.input_name(i) < name);
        let rest = v.get(lo..).unwrap_or_default();
        let n = rest.partition_point(|&i| self.input_name(i) == name);
        rest.get(..n).unwrap_or_default()
    }

    /// The input named `name` (the last one, when several share it).
    pub(crate) fn input_index(&self, name: &str) -> Option<usize> {
        self.inputs_named(name).last().copied()
    }

    /// Index of an output by `"name:i"` key (output `i`, whose node is `name`), or by node
    /// name.
    pub(crate) fn output_index(&self, name: &str) -> Option<usize> {
        // The last ':' (a byte search: std's `char` searchers are more code for one byte).
        if let Some(colon) = name.bytes().rposition(|b| b == b':') {
            let (node, digits) = (&name[..colon], &name[colon + 1..]);
            // `i` as `{i}` prints it: decimal digits, no sign, no leading zero; only indices
            // of outputs are keys.
            let n = self.graph.outputs.len();
            let mut i = 0usize;
            let mut ok = !digits.is_empty() && (digits == "0" || !digits.starts_with('0'));
            for b in digits.bytes() {
                ok &= b.is_ascii_digit();
                i = i
                    .saturating_mul(10)
                    .saturating_add(b.wrapping_sub(b'0') as usize);
            }
            if ok && i < n && self.graph.node_name(self.graph.outputs[i].node_id) == node {
                return Some(i);
            }
        }
        self.graph
            .outputs
            .iter()
            .position(|e| self.graph.node_name(e.node_id) == name)
    }

    pub(super) fn check_input(&self, index: usize) -> Result<usize> {
        if index >= self.num_inputs() {
            return Err(Error::internal_fmt(format_args!(
                "input index {index} is out of range: the graph has {} inputs",
                self.num_inputs()
            )));
        }
        Ok(self.graph.entry_id(self.graph.input_nodes[index], 0))
    }

    pub(super) fn check_output(&self, index: usize) -> Result<usize> {
        if index >= self.num_outputs() {
            return Err(Error::internal_fmt(format_args!(
                "output index {index} is out of range: the graph has {} outputs",
                self.num_outputs()
            )));
        }
        Ok(self.graph.eid(self.graph.outputs[index]))
    }

    /// Resolves an input name, with an error naming it and the known inputs.
    pub(crate) fn input_index_or_err(&self, name: &str) -> Result<usize> {
        match self.input_index(name) {
            Some(i) => Ok(i),
            None => Err(self.no_input(name)),
        }
    }

    #[cold]
    #[inline(never)]
    fn no_input(&self, name: &str) -> Error {
        let n = self.num_inputs();
        let mut list = String::new();
        for i in 0..n.min(20) {
            if i > 0 {
                put_str(&mut list, ", ");
            }
            put_str(&mut list, self.input_name(i));
        }
        Error::value_fmt(format_args!(
            "graph has no input named '{name}'; inputs are: {list}{}",
            if n > 20 { ", ..." } else { "" }
        ))
    }

    /// Resolves an output name, with an error naming it.
    pub(crate) fn output_index_or_err(&self, name: &str) -> Result<usize> {
        self.output_index(name)
            .ok_or_else(|| Error::value_fmt(format_args!("graph has no output named '{name}'")))
    }
}

#[cfg(test)]
mod tests {
    use super::GraphExecutor;
    use crate::module::{Module, ModuleNode};
    use crate::ndarray::NDArray;
    use crate::object::ObjectRef;
    use crate::packed_func::function::Function;
    use crate::packed_func::types::DLDevice;

    struct NoFunctions;

    impl ModuleNode for NoFunctions {
        fn type_key(&self) -> &str {
            "library"
        }
        fn get_function(
            &self,
            _name: &str,
            _this: Option<&ObjectRef>,
        ) -> crate::packed_func::error::Result<Option<Function>> {
            Ok(None)
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    /// Inputs only: `a`, `a:1`, `a` again and `b`; outputs `a:1`, `a` (the first), `b`.
    const GRAPH: &str = r#"{
      "nodes": [{"op": "null", "name": "a"}, {"op": "null", "name": "a:1"},
                {"op": "null", "name": "a"}, {"op": "null", "name": "b"}],
      "arg_nodes": [0, 1, 2, 3],
      "heads": [[1, 0], [0, 0], [3, 0]],
      "node_row_ptr": [0, 1, 2, 3, 4],
      "attrs": {
        "dltype": ["list_str", ["float32", "float32", "float32", "float32"]],
        "storage_id": ["list_int", [0, 1, 2, 3]],
        "shape": ["list_shape", [[1], [1], [1], [1]]]
      }
    }"#;

    /// Names resolve as a map of `name -> index` (the last of equal input names) and of
    /// `"node:i" -> i` keys for outputs would resolve them.
    #[test]
    fn names_resolve_as_by_a_map() {
        let ex = GraphExecutor::new(GRAPH, Module::new(Box::new(NoFunctions)), &[DLDevice::CPU])
            .unwrap();
        assert_eq!(ex.input_index("a"), Some(2));
        assert_eq!(ex.input_index("a:1"), Some(1));
        assert_eq!(ex.input_index("b"), Some(3));
        assert_eq!(ex.input_index("c"), None);
        assert_eq!(ex.input_index(""), None);
        assert_eq!(ex.output_index("a:1:0"), Some(0));
        assert_eq!(ex.output_index("a:1"), Some(1));
        assert_eq!(ex.output_index("b:2"), Some(2));
        assert_eq!(ex.output_index("a"), Some(1));
        assert_eq!(ex.output_index("b"), Some(2));
        for miss in [
            "a:01",
            "a:+1",
            "a:",
            "b:0",
            "b:3",
            "b:99999999999999999999999",
            ":",
            "c",
        ] {
            assert_eq!(ex.output_index(miss), None, "{miss}");
        }
        // A parameter named `a` leaves both inputs of that name out of the input info.
        let p = NDArray::from_slice(&[1.0f32], &[1]).unwrap();
        ex.set_params(&[("a".to_string(), p)]).unwrap();
        let names: Vec<String> = ex
            .input_info()
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["a:1", "b"]);
        let e = ex.set_input("zz", &NDArray::from_slice(&[1.0f32], &[1]).unwrap());
        assert_eq!(
            e.unwrap_err().to_string(),
            "ValueError: graph has no input named 'zz'; inputs are: a, a:1, a, b"
        );
    }
}
