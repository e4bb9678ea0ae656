//! The graph executor: runs a graph of library functions over a planned storage pool.
//!
//! Set-up mirrors the reference: one pool array per storage id (its size the largest entry
//! using it, on the device its `device_index` names), one view per node entry, and for each
//! `tvm_op` node an argument list (inputs, then outputs) built once. Arguments are tensors
//! owned by the executor, so `run` is a loop of calls over prepared `TVMValue` arrays; for
//! functions compiled by TVM the call goes straight to the function pointer.

use super::graph::{Graph, OpType};
use super::params;
use super::time_eval::{sync_device, time_evaluate, TimeEvalConfig};
use crate::device;
use crate::module::Module;
use crate::ndarray::{NDArray, NDArrayObj, ALLOC_ALIGNMENT};
use crate::object::ObjectRef;
use crate::packed_func::dtype::dtype_to_string;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::{BackendPackedCFunc, FuncImpl, Function};
use crate::packed_func::types::{
    type_code as tc, DLDataType, DLDevice, DLManagedTensor, DLTensor, TVMValue,
};
use crate::packed_func::value::{ArgValue, RetValue};
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

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

/// What one node runs.
enum OpKind {
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
struct Op {
    kind: OpKind,
    start: usize,
    n: usize,
}

/// Mutable state: storage, entries, prepared arguments.
struct State {
    /// Pool arrays by storage id (`None` for ids no entry uses); the entries are views.
    _storage_pool: Vec<Option<NDArray>>,
    /// One array per node entry (a view of the pool, or an external array after zero-copy).
    data_entry: Vec<NDArray>,
    /// Names loaded through `load_params` (left out of the input info).
    param_names: HashSet<String>,
    /// Entries that use a factory's parameter array instead of their own storage; writing
    /// one through `set_input` first gives it storage of its own (copy on write).
    borrowed: Vec<bool>,
    /// One op per node.
    ops: Vec<Op>,
    /// The argument tensors of all ops.
    tensors: Box<[DLTensor]>,
    /// Their `TVMValue`s (pointers to `tensors`).
    values: Box<[TVMValue]>,
    /// Their type codes (`kTVMDLTensorHandle`).
    codes: Box<[i32]>,
    /// Shapes the argument tensors point into.
    _shapes: Box<[i64]>,
    /// For each entry, the argument tensors that refer to it.
    eid_slots: Vec<Vec<usize>>,
    /// The last node `execute_node` ran (debug executor), or -1.
    last_executed_node: i64,
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
}

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
            ArgValue::DLTensor(t) => Ok(TensorArg::Raw(t)),
            ArgValue::Object(o) if o.downcast_ref::<NDArrayObj>().is_some() => {
                Ok(TensorArg::Array(NDArray::from_object(o.to_ref())?))
            }
            other => Err(Error::type_error(format!(
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
                // SAFETY: the pointer stays the caller's; we only record it.
                let data = unsafe { (t.data as *mut u8).add(t.byte_offset as usize) };
                wrap_external(data as *mut c_void, shape, dtype, t.device, None)
            }
        }
    }
}

/// Keeps what an external array needs: its tensor, shape and owner.
#[repr(C)]
struct ExternalCtx {
    managed: DLManagedTensor,
    _shape: Box<[i64]>,
    _owner: Option<ObjectRef>,
}

unsafe extern "C" fn external_deleter(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` is the first field of a boxed ExternalCtx made by `wrap_external`
    // (repr(C)), and the deleter runs once.
    unsafe { drop(Box::from_raw(m as *mut ExternalCtx)) };
}

/// An NDArray over memory it does not own (static data of a library, a caller's buffer);
/// `owner` is kept alive with it.
fn wrap_external(
    data: *mut c_void,
    shape: &[i64],
    dtype: DLDataType,
    device: DLDevice,
    owner: Option<ObjectRef>,
) -> Result<NDArray> {
    let shape: Box<[i64]> = shape.into();
    let mut ctx = Box::new(ExternalCtx {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data,
                device,
                ndim: shape.len() as i32,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(external_deleter),
        },
        _shape: shape,
        _owner: owner,
    });
    ctx.managed.dl_tensor.shape = ctx._shape.as_ptr() as *mut i64;
    let p = Box::into_raw(ctx);
    // SAFETY: `p` is a valid managed tensor (the first field of the repr(C) ExternalCtx);
    // ownership passes to the array, whose drop runs the deleter.
    let o = unsafe { NDArrayObj::from_dlpack(p as *mut DLManagedTensor) };
    match o {
        Ok(o) => NDArray::from_object(o),
        Err(e) => {
            // SAFETY: from_dlpack failed, so the box is still ours.
            unsafe { external_deleter(p as *mut DLManagedTensor) };
            Err(e)
        }
    }
}

/// The shared core of an executor: the graph, the library and the locked state.
pub(crate) struct Executor {
    pub(crate) graph: Graph,
    lib: Module,
    devices: Vec<DLDevice>,
    input_map: HashMap<String, usize>,
    output_map: HashMap<String, usize>,
    state: ExecLock<State>,
}

/// Bytes a pool entry needs for an entry, as the reference counts them (sub-byte types take a
/// byte per element).
fn entry_bytes(shape: &[i64], t: DLDataType) -> Result<u64> {
    let bits = t.bits as u64 * t.lanes as u64;
    if !(bits % 8 == 0 || bits == 1 || bits == 4) {
        return Err(Error::value(format!(
            "data type {} has {bits} bits per element, which cannot be stored",
            dtype_to_string(t)
        )));
    }
    let mut n: u64 = bits.div_ceil(8);
    for &d in shape {
        n = n
            .checked_mul(d as u64)
            .ok_or_else(|| Error::value(format!("shape {shape:?} is too large")))?;
    }
    Ok(n)
}

/// Refuses a graph whose kernels would get device memory they cannot read: a `tvm_op` with
/// an argument on a device whose memory the host cannot address (not cpu, cuda_host or
/// rocm_host), while the library and its imports hold only host code (`library` modules).
/// Such kernels would dereference device handles as host pointers and crash the process.
fn check_kernels_can_reach(graph: &Graph, lib: &Module, entries: &[NDArray]) -> Result<()> {
    use crate::packed_func::types::{DL_CPU, DL_CUDA_HOST, DL_ROCM_HOST};
    fn host_only(m: &Module) -> bool {
        m.type_key() == "library" && m.imports().iter().all(host_only)
    }
    for (nid, node) in graph.nodes.iter().enumerate() {
        if node.op_type != OpType::TvmOp
            || matches!(node.param.func_name.as_str(), "__nop" | "__copy")
        {
            continue;
        }
        let outs = (0..graph.num_outputs_of(nid)).map(|i| graph.entry_id(nid as u32, i));
        for eid in node.inputs.iter().map(|&e| graph.eid(e)).chain(outs) {
            let dev = entries[eid].device();
            if matches!(dev.device_type, DL_CPU | DL_CUDA_HOST | DL_ROCM_HOST) {
                continue;
            }
            if host_only(lib) {
                return Err(Error::value(format!(
                    "graph executor: node '{}' ({}) has data on {}, but the library holds \
                     only CPU code (it imports no {} module); compile the model for that \
                     device or run it on the CPU",
                    node.name,
                    node.param.func_name,
                    device::describe(dev),
                    device::type_name(dev.device_type).unwrap_or_else(|| "device".into())
                )));
            }
            return Ok(());
        }
    }
    Ok(())
}

struct PoolEntry {
    device_type: i32,
    bytes: u64,
    scope: String,
    linked: Option<NDArray>,
    used: bool,
}

/// How parameters that are baked into a library are found (`_lookup_linked_param`).
pub(crate) enum LinkedParamLookup {
    /// Use the library's `_lookup_linked_param` function, when it has one.
    Default,
    /// Call this function with `(module, storage_id, template DLTensor*, device)`.
    Custom(Function),
}

impl Executor {
    /// Builds an executor: parses the graph, plans and allocates storage, prepares the ops.
    pub(crate) fn new(
        graph_json: &str,
        lib: Module,
        devices: &[DLDevice],
        lookup: LinkedParamLookup,
    ) -> Result<Executor> {
        if devices.is_empty() {
            return Err(Error::value(
                "graph executor: at least one device is needed",
            ));
        }
        for &d in devices {
            device::api(d).map_err(|e| e.context("graph executor"))?;
        }
        let graph = Graph::parse(graph_json)?;
        let mut input_map = HashMap::new();
        for (i, &nid) in graph.input_nodes.iter().enumerate() {
            input_map.insert(graph.nodes[nid as usize].name.clone(), i);
        }
        let mut output_map = HashMap::new();
        for (i, e) in graph.outputs.iter().enumerate() {
            output_map.insert(format!("{}:{i}", graph.nodes[e.node_id as usize].name), i);
        }
        let (storage_pool, data_entry) = setup_storage(&graph, &lib, devices, &lookup)?;
        check_kernels_can_reach(&graph, &lib, &data_entry)?;
        let mut state = State {
            _storage_pool: storage_pool,
            data_entry,
            param_names: HashSet::new(),
            borrowed: vec![false; graph.num_entries()],
            ops: Vec::new(),
            tensors: Box::new([]),
            values: Box::new([]),
            codes: Box::new([]),
            _shapes: Box::new([]),
            eid_slots: Vec::new(),
            last_executed_node: -1,
        };
        setup_ops(&graph, &lib, &mut state)?;
        Ok(Executor {
            graph,
            lib,
            devices: devices.to_vec(),
            input_map,
            output_map,
            state: ExecLock::new(state),
        })
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

    pub(crate) fn input_index(&self, name: &str) -> Option<usize> {
        self.input_map.get(name).copied()
    }

    /// Index of an output by `"name:i"` key, or by node name.
    pub(crate) fn output_index(&self, name: &str) -> Option<usize> {
        if let Some(&i) = self.output_map.get(name) {
            return Some(i);
        }
        self.graph
            .outputs
            .iter()
            .position(|e| self.graph.nodes[e.node_id as usize].name == name)
    }

    fn check_input(&self, index: usize) -> Result<usize> {
        if index >= self.num_inputs() {
            return Err(Error::internal(format!(
                "input index {index} is out of range: the graph has {} inputs",
                self.num_inputs()
            )));
        }
        Ok(self.graph.entry_id(self.graph.input_nodes[index], 0))
    }

    fn check_output(&self, index: usize) -> Result<usize> {
        if index >= self.num_outputs() {
            return Err(Error::internal(format!(
                "output index {index} is out of range: the graph has {} outputs",
                self.num_outputs()
            )));
        }
        Ok(self.graph.eid(self.graph.outputs[index]))
    }

    /// Resolves an input name, with an error naming it and the known inputs.
    pub(crate) fn input_index_or_err(&self, name: &str) -> Result<usize> {
        self.input_index(name).ok_or_else(|| {
            let mut names: Vec<&str> = self
                .graph
                .input_nodes
                .iter()
                .map(|&n| self.graph.nodes[n as usize].name.as_str())
                .collect();
            let more = names.len() > 20;
            names.truncate(20);
            Error::value(format!(
                "graph has no input named '{name}'; inputs are: {}{}",
                names.join(", "),
                if more { ", ..." } else { "" }
            ))
        })
    }

    /// Resolves an output name, with an error naming it.
    pub(crate) fn output_index_or_err(&self, name: &str) -> Result<usize> {
        self.output_index(name)
            .ok_or_else(|| Error::value(format!("graph has no output named '{name}'")))
    }

    /// Copies `src` into input `index`.
    pub(crate) fn set_input(&self, index: usize, src: &DLTensor) -> Result<()> {
        let eid = self.check_input(index)?;
        let mut st = self.state.lock()?;
        if st.borrowed[eid] {
            // The entry shows a factory's parameter: give it storage of its own first, so
            // that the factory (and executors created from it) keep their values.
            let have = st.data_entry[eid].dltensor();
            let own = NDArray::empty(&self.graph.shape[eid], have.dtype, have.device)
                .map_err(|e| e.context("set_input"))?;
            Self::redirect(&mut st, eid, own);
        }
        let dst = st.data_entry[eid].dltensor();
        // SAFETY: `src` is a live tensor (caller contract of the argument), `dst` our array.
        unsafe { device::copy_tensor(src, dst, std::ptr::null_mut()) }.map_err(|e| {
            e.context(format!(
                "set_input '{}'",
                self.graph.nodes[self.graph.input_nodes[index] as usize].name
            ))
        })
    }

    fn check_external(&self, st: &State, t: &DLTensor, eid: usize, what: &str) -> Result<()> {
        let internal = st.data_entry[eid].dltensor();
        let want_shape = &self.graph.shape[eid];
        // SAFETY: a live tensor holds `ndim` shape entries.
        let shape = unsafe { crate::ndarray::shape_of(t) };
        if shape != want_shape.as_slice() {
            return Err(Error::value(format!(
                "{what}: shape {shape:?} does not match the graph's {want_shape:?}"
            )));
        }
        if t.dtype != self.graph.dltype[eid] {
            return Err(Error::value(format!(
                "{what}: data type {} does not match the graph's {}",
                dtype_to_string(t.dtype),
                self.graph.dltype_names[eid]
            )));
        }
        if t.device != internal.device {
            return Err(Error::value(format!(
                "{what}: the array is on {} but the graph expects {}",
                device::describe(t.device),
                device::describe(internal.device)
            )));
        }
        if !crate::ndarray::is_contiguous(t) {
            return Err(Error::value(format!("{what}: the array is not contiguous")));
        }
        let addr = t.data as usize + t.byte_offset as usize;
        if addr % ALLOC_ALIGNMENT != 0 {
            return Err(Error::value(format!(
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
        let mut sid_users = HashMap::new();
        for &sid in &self.graph.storage_id {
            *sid_users.entry(sid).or_insert(0usize) += 1;
        }
        let outputs: HashSet<usize> = self
            .graph
            .outputs
            .iter()
            .map(|&e| self.graph.eid(e))
            .collect();
        let mut copy = Vec::new();
        let mut st = self.state.lock()?;
        for (name, arr) in p {
            let Some(i) = self.input_index(name) else {
                continue;
            };
            let eid = self.check_input(i)?;
            let shareable = sid_users[&self.graph.storage_id[eid]] == 1
                && !outputs.contains(&eid)
                && self.check_external(&st, arr.dltensor(), eid, name).is_ok();
            if shareable {
                Self::redirect(&mut st, eid, arr.clone());
                st.borrowed[eid] = true;
            } else {
                copy.push((name.clone(), arr.clone()));
            }
        }
        drop(st);
        self.set_params(&copy, false)
    }

    /// Points entry `eid` (and every argument using it) at `arr`.
    fn redirect(st: &mut State, eid: usize, arr: NDArray) {
        st.borrowed[eid] = false;
        let t = arr.dltensor();
        // SAFETY: only an address computation inside (or one past) the array's memory.
        let p = unsafe { (t.data as *mut u8).add(t.byte_offset as usize) } as *mut c_void;
        for &slot in &st.eid_slots[eid] {
            st.tensors[slot].data = p;
            st.tensors[slot].byte_offset = 0;
        }
        st.data_entry[eid] = arr;
    }

    /// Makes input `index` use `ext`'s memory (and every entry sharing its storage).
    pub(crate) fn set_input_zero_copy(&self, index: usize, ext: &TensorArg) -> Result<()> {
        let eid = self.check_input(index)?;
        let name = &self.graph.nodes[self.graph.input_nodes[index] as usize].name;
        let mut st = self.state.lock()?;
        self.check_external(&st, ext.dl(), eid, &format!("set_input_zero_copy '{name}'"))?;
        let sid = self.graph.storage_id[eid];
        let mut targets = vec![eid];
        targets.extend(
            (0..self.graph.num_entries()).filter(|&e| e != eid && self.graph.storage_id[e] == sid),
        );
        let mut views = Vec::with_capacity(targets.len());
        for &e in &targets {
            views.push(
                ext.alias(&self.graph.shape[e], self.graph.dltype[e])
                    .map_err(|err| err.context(format!("set_input_zero_copy '{name}'")))?,
            );
        }
        for (e, v) in targets.into_iter().zip(views) {
            Self::redirect(&mut st, e, v);
        }
        Ok(())
    }

    /// Makes output `index` be written straight into `ext`.
    pub(crate) fn set_output_zero_copy(&self, index: usize, ext: &TensorArg) -> Result<()> {
        let eid = self.check_output(index)?;
        let out = self.graph.outputs[index];
        let mut st = self.state.lock()?;
        let what = format!(
            "set_output_zero_copy {index} ('{}')",
            self.graph.nodes[out.node_id as usize].name
        );
        self.check_external(&st, ext.dl(), eid, &what)?;
        let mut targets = vec![eid];
        let node = &self.graph.nodes[out.node_id as usize];
        if node.op_type == OpType::TvmOp && node.param.func_name == "__nop" {
            let src = self.graph.eid(node.inputs[0]);
            if src != eid {
                targets.push(src);
            }
        }
        let mut views = Vec::with_capacity(targets.len());
        for &e in &targets {
            views.push(
                ext.alias(&self.graph.shape[e], self.graph.dltype[e])
                    .map_err(|err| err.context(&what))?,
            );
        }
        for (e, v) in targets.into_iter().zip(views) {
            Self::redirect(&mut st, e, v);
        }
        Ok(())
    }

    pub(crate) fn get_input(&self, index: usize) -> Result<NDArray> {
        let eid = self.check_input(index)?;
        Ok(self.state.lock()?.data_entry[eid].clone())
    }

    pub(crate) fn get_output(&self, index: usize) -> Result<NDArray> {
        let eid = self.check_output(index)?;
        Ok(self.state.lock()?.data_entry[eid].clone())
    }

    /// Copies output `index` into `dst` (same shape).
    pub(crate) fn copy_output_to(&self, index: usize, dst: &DLTensor) -> Result<()> {
        let eid = self.check_output(index)?;
        let st = self.state.lock()?;
        let src = st.data_entry[eid].dltensor();
        // SAFETY: `dst` is a live tensor (caller contract).
        let dshape = unsafe { crate::ndarray::shape_of(dst) };
        if dshape != self.graph.shape[eid].as_slice() {
            return Err(Error::value(format!(
                "get_output {index}: the destination's shape {dshape:?} does not match the \
                 output's {:?}",
                self.graph.shape[eid]
            )));
        }
        // SAFETY: both are live tensors.
        unsafe { device::copy_tensor(src, dst, std::ptr::null_mut()) }
            .map_err(|e| e.context(format!("get_output {index}")))
    }

    /// Copies parameters into the inputs of the same names (others are ignored); with
    /// `mark`, they are also left out of the input info.
    pub(crate) fn set_params(&self, p: &[(String, NDArray)], mark: bool) -> Result<()> {
        // Largest first, as the reference uploads them.
        let mut order: Vec<&(String, NDArray)> = p.iter().collect();
        order.sort_by_key(|(_, a)| std::cmp::Reverse(a.nbytes()));
        for (name, arr) in order {
            if mark {
                self.state.lock()?.param_names.insert(name.clone());
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
            self.state.lock()?.param_names.insert(name.clone());
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
                Error::value(format!(
                    "share_params: the other executor has no input named '{name}'"
                ))
            })?;
            let arr = other.get_input(j)?;
            let eid = self.check_input(i)?;
            let mut st = self.state.lock()?;
            let have = st.data_entry[eid].dltensor();
            let t = arr.dltensor();
            // SAFETY: a live array's shape.
            let shape = unsafe { crate::ndarray::shape_of(t) };
            if shape != self.graph.shape[eid].as_slice()
                || t.dtype != have.dtype
                || t.device != have.device
            {
                return Err(Error::value(format!(
                    "share_params: parameter '{name}' differs in shape, type or device between \
                     the two executors"
                )));
            }
            Self::redirect(&mut st, eid, arr);
        }
        Ok(())
    }

    /// Runs node `nid`'s op (nothing for inputs).
    #[inline(always)]
    fn run_op(&self, st: &mut State, nid: usize) -> Result<()> {
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
    fn op_error(&self, nid: usize, e: Error) -> Error {
        let node = &self.graph.nodes[nid];
        e.context(format!(
            "graph executor: node {nid} '{}' (function {})",
            node.name, node.param.func_name
        ))
    }

    /// Runs every op in order.
    pub(crate) fn run(&self) -> Result<()> {
        let mut st = self.state.lock()?;
        let st = &mut *st;
        for nid in 0..st.ops.len() {
            self.run_op(st, nid)?;
        }
        Ok(())
    }

    fn check_node(&self, nid: i64) -> Result<usize> {
        if nid < 0 || nid as usize >= self.graph.nodes.len() {
            return Err(Error::internal(format!(
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
            .ok_or_else(|| Error::value(format!("graph has no node named '{name}'")))
    }

    /// Runs ops up to and including `nid` (from the start, or on from the last node run).
    pub(crate) fn execute_node(&self, nid: i64) -> Result<()> {
        let nid = self.check_node(nid)? as i64;
        let mut st = self.state.lock()?;
        let st = &mut *st;
        let start = if nid < st.last_executed_node {
            0
        } else if nid > st.last_executed_node {
            st.last_executed_node + 1
        } else {
            return Ok(());
        };
        for i in start..=nid {
            self.run_op(st, i as usize)?;
        }
        st.last_executed_node = nid;
        Ok(())
    }

    /// A CPU copy of output `index` of node `nid`, which must be the last node executed.
    pub(crate) fn get_node_output(&self, nid: i64, index: i64) -> Result<NDArray> {
        let nid = self.check_node(nid)?;
        let st = self.state.lock()?;
        if st.last_executed_node != nid as i64 {
            return Err(Error::value(format!(
                "get_node_output: node {nid} is not the last executed node ({}); call \
                 execute_node({nid}) first",
                st.last_executed_node
            )));
        }
        let outs = self.graph.num_outputs_of(nid) as i64;
        if index < 0 || index >= outs {
            return Err(Error::index(format!(
                "get_node_output: node {nid} has {outs} outputs, not {}",
                index + 1
            )));
        }
        let src = &st.data_entry[self.graph.entry_id(nid as u32, index as u32)];
        let out = NDArray::empty(src.shape(), src.dtype(), DLDevice::CPU)?;
        src.copy_to(&out)?;
        Ok(out)
    }

    /// Runs ops up to and including `nid`, then returns (or copies into `out`) its first
    /// output.
    pub(crate) fn debug_get_output(&self, nid: i64, out: Option<&DLTensor>) -> Result<NDArray> {
        let nid = self.check_node(nid)?;
        let mut st = self.state.lock()?;
        let st = &mut *st;
        for i in 0..=nid {
            self.run_op(st, i)?;
        }
        let arr = st.data_entry[self.graph.entry_id(nid as u32, 0)].clone();
        if let Some(dst) = out {
            // SAFETY: both tensors are live.
            unsafe { device::copy_tensor(arr.dltensor(), dst, std::ptr::null_mut()) }
                .map_err(|e| e.context(format!("debug_get_output {nid}")))?;
        }
        Ok(arr)
    }

    /// Device of node `nid`'s first output (where its op runs).
    fn node_device(&self, st: &State, nid: usize) -> DLDevice {
        st.data_entry[self.graph.entry_id(nid as u32, 0)].device()
    }

    /// Times node `nid`'s op alone; zeros for input nodes.
    pub(crate) fn run_individual_node(&self, nid: i64, cfg: &TimeEvalConfig) -> Result<Vec<f64>> {
        let nid = self.check_node(nid)?;
        cfg.validate()?;
        let mut st = self.state.lock()?;
        self.time_node(&mut st, nid, cfg)
    }

    fn time_node(&self, st: &mut State, nid: usize, cfg: &TimeEvalConfig) -> Result<Vec<f64>> {
        if matches!(st.ops[nid].kind, OpKind::None) {
            return Ok(vec![0.0; cfg.repeat.max(0) as usize]);
        }
        let dev = self.devices[0];
        time_evaluate(&mut || self.run_op(st, nid), None, dev, cfg)
    }

    /// Times each node's op: one full run first, then per node `repeat` measurements.
    pub(crate) fn run_individual(&self, cfg: &TimeEvalConfig) -> Result<Vec<Vec<f64>>> {
        cfg.validate()?;
        let mut st = self.state.lock()?;
        let st = &mut *st;
        for nid in 0..st.ops.len() {
            self.run_op(st, nid)?;
        }
        let mut out = Vec::with_capacity(st.ops.len());
        for nid in 0..st.ops.len() {
            let t = self.time_node(st, nid, cfg)?;
            out.push(
                t.into_iter()
                    .map(|x| if x.is_nan() { 0.0 } else { x })
                    .collect(),
            );
        }
        Ok(out)
    }

    /// Times every op over `runs` full runs (after three warm-up runs); `runs == 0` picks
    /// between 1 and 100 runs to fill about 100 ms.
    pub(crate) fn profile(&self, runs: usize) -> Result<super::debug::ProfileReport> {
        let mut st = self.state.lock()?;
        let st = &mut *st;
        let warm = Instant::now();
        for _ in 0..3 {
            for nid in 0..st.ops.len() {
                self.run_op(st, nid)?;
            }
        }
        let runs = if runs == 0 {
            let per_run = warm.elapsed().as_secs_f64() / 3.0;
            (0.1 / per_run.max(1e-9)).clamp(1.0, 100.0) as usize
        } else {
            runs
        };
        let n = st.ops.len();
        let mut node_ns = vec![0u128; n];
        let mut total_ns = 0u128;
        for _ in 0..runs {
            for d in &self.devices {
                sync_device(*d)?;
            }
            let total = Instant::now();
            for (nid, ns) in node_ns.iter_mut().enumerate() {
                if matches!(st.ops[nid].kind, OpKind::None) {
                    continue;
                }
                let dev = self.node_device(st, nid);
                let t = Instant::now();
                self.run_op(st, nid)?;
                sync_device(dev)?;
                *ns += t.elapsed().as_nanos();
            }
            total_ns += total.elapsed().as_nanos();
        }
        let mut nodes = Vec::new();
        for (nid, ns) in node_ns.iter().enumerate() {
            if matches!(st.ops[nid].kind, OpKind::None) {
                continue;
            }
            let node = &self.graph.nodes[nid];
            let mut shapes = Vec::new();
            for e in &node.inputs {
                let eid = self.graph.eid(*e);
                shapes.push((
                    self.graph.dltype_names[eid].clone(),
                    self.graph.shape[eid].clone(),
                ));
            }
            for j in 0..node.param.num_outputs {
                let eid = self.graph.entry_id(nid as u32, j);
                shapes.push((
                    self.graph.dltype_names[eid].clone(),
                    self.graph.shape[eid].clone(),
                ));
            }
            nodes.push(super::debug::NodeProfile {
                node_index: nid,
                node: node.name.clone(),
                op: node.param.func_name.clone(),
                device: self.node_device(st, nid),
                time_us: *ns as f64 / 1e3 / runs as f64,
                arg_shapes: shapes,
                attrs: node.param.attrs.clone(),
            });
        }
        Ok(super::debug::ProfileReport::new(
            nodes,
            total_ns as f64 / 1e3 / runs as f64,
            runs,
            self.devices.clone(),
        ))
    }

    /// Input info: names, shapes and types of the inputs that are not loaded parameters.
    pub(crate) fn input_info(&self) -> Result<Vec<TensorInfo>> {
        let st = self.state.lock()?;
        Ok(self
            .graph
            .input_nodes
            .iter()
            .filter(|&&nid| {
                !st.param_names
                    .contains(&self.graph.nodes[nid as usize].name)
            })
            .map(|&nid| {
                let eid = self.graph.entry_id(nid, 0);
                TensorInfo {
                    name: self.graph.nodes[nid as usize].name.clone(),
                    shape: self.graph.shape[eid].clone(),
                    dtype: self.graph.dltype[eid],
                }
            })
            .collect())
    }

    /// Output info, in output order.
    pub(crate) fn output_info(&self) -> Vec<TensorInfo> {
        self.graph
            .outputs
            .iter()
            .map(|e| {
                let eid = self.graph.eid(*e);
                TensorInfo {
                    name: self.graph.nodes[e.node_id as usize].name.clone(),
                    shape: self.graph.shape[eid].clone(),
                    dtype: self.graph.dltype[eid],
                }
            })
            .collect()
    }
}

/// Plans the pool (one array per storage id, sized for its largest entry, on the device its
/// entries name) and makes one view per entry.
fn setup_storage(
    g: &Graph,
    lib: &Module,
    devices: &[DLDevice],
    lookup: &LinkedParamLookup,
) -> Result<(Vec<Option<NDArray>>, Vec<NDArray>)> {
    let num_sids = g
        .storage_id
        .iter()
        .map(|&s| s as usize + 1)
        .max()
        .unwrap_or(0);
    let mut pool: Vec<PoolEntry> = (0..num_sids)
        .map(|_| PoolEntry {
            device_type: -1,
            bytes: 0,
            scope: String::new(),
            linked: None,
            used: false,
        })
        .collect();
    let default_lookup = match lookup {
        LinkedParamLookup::Default => lib.get_function("_lookup_linked_param", true)?,
        LinkedParamLookup::Custom(_) => None,
    };
    for i in 0..g.num_entries() {
        let sid = g.storage_id[i] as usize;
        let device_type = match &g.device_index {
            Some(d) => d[i],
            None => devices[0].device_type,
        };
        let scope = g
            .storage_scope
            .as_ref()
            .map(|s| s[i].clone())
            .unwrap_or_default();
        let pe = &mut pool[sid];
        if pe.used && pe.device_type != device_type {
            return Err(Error::value(format!(
                "invalid graph: storage {sid} is used on two devices (types {} and \
                 {device_type})",
                pe.device_type
            )));
        }
        if scope.starts_with("global.texture") {
            return Err(Error::value(format!(
                "graph entry {i} uses storage scope '{scope}': texture memory is not supported \
                 by this runtime"
            )));
        }
        pe.used = true;
        pe.device_type = device_type;
        pe.scope = scope;
        pe.bytes = pe.bytes.max(entry_bytes(&g.shape[i], g.dltype[i])?);
        // Parameters linked into the library.
        let linked = match (lookup, &default_lookup) {
            (LinkedParamLookup::Custom(f), _) => {
                let mut shape = g.shape[i].clone();
                let mut tmpl = DLTensor {
                    data: std::ptr::null_mut(),
                    device: DLDevice::CPU,
                    ndim: shape.len() as i32,
                    dtype: g.dltype[i],
                    shape: shape.as_mut_ptr(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                };
                let rv = f.call(&[
                    ArgValue::Object(
                        // SAFETY: `lib` keeps the object alive through the call.
                        unsafe { crate::packed_func::value::ObjArg::new(lib.as_object().as_ptr()) },
                    ),
                    ArgValue::Int(sid as i64),
                    ArgValue::DLTensor(&mut tmpl),
                    ArgValue::Device(devices[0]),
                ])?;
                match rv {
                    RetValue::Null => None,
                    RetValue::Object(o) => {
                        Some(NDArray::from_object(o).map_err(|e| {
                            e.context("the linked parameter lookup function returned")
                        })?)
                    }
                    other => {
                        return Err(Error::type_error(format!(
                            "the linked parameter lookup function returned {other:?}, not an \
                             NDArray"
                        )))
                    }
                }
            }
            (LinkedParamLookup::Default, Some(f)) => match f.call(&[ArgValue::Int(sid as i64)])? {
                RetValue::Handle(h) if !h.is_null() => Some(wrap_external(
                    h,
                    &g.shape[i],
                    g.dltype[i],
                    devices[0],
                    Some(lib.as_object().clone()),
                )?),
                _ => None,
            },
            _ => None,
        };
        if linked.is_some() {
            pe.linked = linked;
        }
    }
    let mut storage = Vec::with_capacity(pool.len());
    for pe in pool {
        if !pe.used {
            storage.push(None);
            continue;
        }
        if let Some(l) = pe.linked {
            storage.push(Some(l));
            continue;
        }
        let dev = devices
            .iter()
            .find(|d| d.device_type == pe.device_type)
            .copied()
            .unwrap_or(devices[0]);
        let elems = pe.bytes.div_ceil(4) as i64;
        let scope = if pe.scope.is_empty() {
            None
        } else {
            Some(pe.scope.as_str())
        };
        let arr = NDArrayObj::empty(
            &[elems],
            DLDataType::new(crate::packed_func::types::DL_FLOAT, 32, 1),
            dev,
            scope,
        )
        .map_err(|e| e.context("graph executor: allocating storage"))?;
        storage.push(Some(NDArray::from_object(arr)?));
    }
    let mut entries = Vec::with_capacity(g.num_entries());
    for i in 0..g.num_entries() {
        let sid = g.storage_id[i] as usize;
        let base = storage[sid]
            .as_ref()
            .ok_or_else(|| Error::internal(format!("storage {sid} was not allocated")))?;
        let v = base
            .view(&g.shape[i], g.dltype[i], 0)
            .map_err(|e| e.context(format!("graph entry {i} (storage {sid})")))?;
        entries.push(v);
    }
    Ok((storage, entries))
}

/// Prepares every node's argument list and function.
fn setup_ops(g: &Graph, lib: &Module, st: &mut State) -> Result<()> {
    struct Slot {
        eid: usize,
        flat: bool,
    }
    let mut slots: Vec<Slot> = Vec::new();
    let mut ops = Vec::with_capacity(g.nodes.len());
    let mut funcs: HashMap<&str, Function> = HashMap::new();
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
                let f = match funcs.get(name) {
                    Some(f) => f.clone(),
                    None => {
                        let f = lib.get_function(name, true)?.ok_or_else(|| {
                            Error::attribute(format!(
                                "no such function in module: {name} (needed by node {nid} \
                                 '{}'; the library module is of type {})",
                                node.name,
                                lib.type_key()
                            ))
                        })?;
                        funcs.insert(name, f.clone());
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
    let mut shapes: Vec<i64> = Vec::new();
    let mut entry_off = Vec::with_capacity(g.num_entries());
    for s in &g.shape {
        entry_off.push(shapes.len());
        shapes.extend_from_slice(s);
    }
    let mut flat_off = Vec::with_capacity(slots.len());
    for s in &slots {
        if s.flat {
            flat_off.push(shapes.len());
            shapes.push(g.shape[s.eid].iter().product());
        } else {
            flat_off.push(usize::MAX);
        }
    }
    shapes.push(0);
    let mut shapes = shapes.into_boxed_slice();
    let base = shapes.as_mut_ptr();
    let mut eid_slots = vec![Vec::new(); g.num_entries()];
    let mut tensors = Vec::with_capacity(slots.len());
    for (k, s) in slots.iter().enumerate() {
        let entry = st.data_entry[s.eid].dltensor();
        let (ndim, off) = if s.flat {
            (1, flat_off[k])
        } else {
            (g.shape[s.eid].len() as i32, entry_off[s.eid])
        };
        // SAFETY: `off` is inside `shapes` (the trailing element covers empty shapes).
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
        eid_slots[s.eid].push(k);
    }
    let mut tensors = tensors.into_boxed_slice();
    let values: Box<[TVMValue]> = tensors
        .iter_mut()
        .map(|t| TVMValue {
            v_handle: t as *mut DLTensor as *mut c_void,
        })
        .collect();
    let codes: Box<[i32]> = vec![tc::DLTENSOR_HANDLE; tensors.len()].into_boxed_slice();
    st.ops = ops;
    st.tensors = tensors;
    st.values = values;
    st.codes = codes;
    st._shapes = shapes;
    st.eid_slots = eid_slots;
    Ok(())
}

/// Executors alive behind module objects, by module address, so that a `Module` can be turned
/// back into a [`GraphExecutor`].
static EXECUTORS: std::sync::LazyLock<Mutex<HashMap<usize, std::sync::Weak<Executor>>>> =
    std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

/// The module node of an executor (type key `GraphExecutor`).
pub(crate) struct ExecutorNode {
    pub(crate) exec: Arc<Executor>,
    pub(crate) debug: bool,
    /// The module's address once wrapped (0 before), the key of its `EXECUTORS` entry.
    key: Arc<AtomicUsize>,
}

impl Drop for ExecutorNode {
    fn drop(&mut self) {
        let k = self.key.load(Ordering::Relaxed);
        if k != 0 {
            EXECUTORS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&k);
        }
    }
}

impl crate::module::ModuleNode for ExecutorNode {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn type_key(&self) -> &str {
        "GraphExecutor"
    }

    fn get_function(&self, name: &str, _this: Option<&ObjectRef>) -> Result<Option<Function>> {
        Ok(super::functions::executor_function(
            &self.exec, self.debug, name,
        ))
    }

    fn property_mask(&self) -> i32 {
        crate::module::property::RUNNABLE
    }
}

/// Wraps an executor in a module object.
pub(crate) fn make_module(exec: Arc<Executor>, debug: bool) -> Module {
    let weak = Arc::downgrade(&exec);
    let node_key = Arc::new(AtomicUsize::new(0));
    let m = Module::new(Box::new(ExecutorNode {
        exec,
        debug,
        key: node_key.clone(),
    }));
    let key = m.as_object().as_ptr() as usize;
    EXECUTORS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, weak);
    node_key.store(key, Ordering::Relaxed);
    m
}

/// The executor behind a module, when it is one of ours.
pub(crate) fn executor_of(m: &Module) -> Option<Arc<Executor>> {
    if m.type_key() != "GraphExecutor" {
        return None;
    }
    EXECUTORS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(m.as_object().as_ptr() as usize))
        .and_then(|w| w.upgrade())
}

/// A graph executor: the safe Rust face of `tvm.graph_executor.create`.
///
/// ```no_run
/// # use tvm_runtime::{executor::GraphExecutor, DLDevice, Module, NDArray};
/// # fn main() -> tvm_runtime::Result<()> {
/// let lib = Module::load("model.so")?;
/// let ex = GraphExecutor::from_factory(&lib, &[DLDevice::CPU])?;
/// ex.set_input("x", &NDArray::from_slice(&[1.0f32, 2.0], &[1, 2])?)?;
/// ex.run()?;
/// let y = ex.output(0)?.to_vec::<f32>()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct GraphExecutor {
    exec: Arc<Executor>,
    module: Module,
}

impl std::fmt::Debug for GraphExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphExecutor")
            .field("nodes", &self.exec.graph.nodes.len())
            .field("inputs", &self.num_inputs())
            .field("outputs", &self.num_outputs())
            .field("devices", &self.exec.devices)
            .finish()
    }
}

impl GraphExecutor {
    /// Builds an executor for a graph over the functions of `lib`, on `devices` (the first
    /// is the default; others serve entries whose `device_index` names their type).
    pub fn new(graph_json: &str, lib: Module, devices: &[DLDevice]) -> Result<GraphExecutor> {
        Self::build(graph_json, lib, devices, false)
    }

    /// Like [`GraphExecutor::new`], exposing the debug executor's functions on its module.
    pub fn new_debug(graph_json: &str, lib: Module, devices: &[DLDevice]) -> Result<GraphExecutor> {
        Self::build(graph_json, lib, devices, true)
    }

    fn build(graph_json: &str, lib: Module, devices: &[DLDevice], debug: bool) -> Result<Self> {
        let exec = Arc::new(Executor::new(
            graph_json,
            lib,
            devices,
            LinkedParamLookup::Default,
        )?);
        let module = make_module(exec.clone(), debug);
        Ok(GraphExecutor { exec, module })
    }

    /// Builds an executor from a factory module (what `relay.build(...).export_library`
    /// produces, loaded with [`Module::load`]): its graph, its library and its parameters.
    /// The parameters are left out of [`GraphExecutor::input_info`].
    pub fn from_factory(factory: &Module, devices: &[DLDevice]) -> Result<GraphExecutor> {
        let json = match factory.function("get_graph_json")?.call(&[])? {
            RetValue::Str(s) => s,
            other => {
                return Err(Error::type_error(format!(
                    "get_graph_json returned {other:?}, not a string"
                )))
            }
        };
        let lib = factory
            .imports()
            .into_iter()
            .next()
            .ok_or_else(|| Error::value("the factory module has no library module imported"))?;
        let params = super::factory::params_from_map(
            factory
                .function("get_graph_params")?
                .call(&[])?
                .into_object()?,
        )?;
        let ex = Self::new(&json, lib, devices)?;
        ex.exec.set_params(&params, true)?;
        Ok(ex)
    }

    /// The executor behind a module made by this runtime (`tvm.graph_executor.create`, a
    /// factory's `default`, ...).
    pub fn from_module(m: &Module) -> Result<GraphExecutor> {
        let exec = executor_of(m).ok_or_else(|| {
            Error::type_error(format!(
                "expected a graph executor module of this runtime, got a module of type {}",
                m.type_key()
            ))
        })?;
        Ok(GraphExecutor {
            exec,
            module: m.clone(),
        })
    }

    /// The module object (what `tvm.graph_executor.create` returns).
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The parsed graph.
    pub fn graph(&self) -> &Graph {
        &self.exec.graph
    }

    /// The library module the ops come from.
    pub fn lib(&self) -> &Module {
        self.exec.lib()
    }

    /// The devices.
    pub fn devices(&self) -> &[DLDevice] {
        self.exec.devices()
    }

    /// Runs the graph once.
    pub fn run(&self) -> Result<()> {
        self.exec.run()
    }

    /// Number of inputs (parameters included).
    pub fn num_inputs(&self) -> usize {
        self.exec.num_inputs()
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.exec.num_outputs()
    }

    /// Index of an input by name.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.exec.input_index(name)
    }

    /// Index of an output by `"node_name:i"` or node name.
    pub fn output_index(&self, name: &str) -> Option<usize> {
        self.exec.output_index(name)
    }

    /// Copies `a` into the input named `name`.
    pub fn set_input(&self, name: &str, a: &NDArray) -> Result<()> {
        let i = self.exec.input_index_or_err(name)?;
        self.exec.set_input(i, a.dltensor())
    }

    /// Copies `a` into input `index`.
    pub fn set_input_index(&self, index: usize, a: &NDArray) -> Result<()> {
        self.exec.set_input(index, a.dltensor())
    }

    /// Makes the input named `name` read `a` directly (no copy). `a` must match the input's
    /// shape, type and device and be 64-byte aligned; it is kept alive by the executor.
    pub fn set_input_zero_copy(&self, name: &str, a: &NDArray) -> Result<()> {
        let i = self.exec.input_index_or_err(name)?;
        self.exec
            .set_input_zero_copy(i, &TensorArg::Array(a.clone()))
    }

    /// Makes output `index` be written directly into `a` (same conditions as for inputs).
    pub fn set_output_zero_copy(&self, index: usize, a: &NDArray) -> Result<()> {
        self.exec
            .set_output_zero_copy(index, &TensorArg::Array(a.clone()))
    }

    /// Input `index` (the executor's own array: writes to it set the input).
    pub fn input(&self, index: usize) -> Result<NDArray> {
        self.exec.get_input(index)
    }

    /// Output `index` (the executor's own array, overwritten by the next run).
    pub fn output(&self, index: usize) -> Result<NDArray> {
        self.exec.get_output(index)
    }

    /// Copies output `index` into `dst` (same shape).
    pub fn copy_output_to(&self, index: usize, dst: &NDArray) -> Result<()> {
        self.exec.copy_output_to(index, dst.dltensor())
    }

    /// Names, shapes and types of the inputs that are not parameters.
    pub fn input_info(&self) -> Result<Vec<TensorInfo>> {
        self.exec.input_info()
    }

    /// Names, shapes and types of the outputs.
    pub fn output_info(&self) -> Vec<TensorInfo> {
        self.exec.output_info()
    }

    /// Loads a parameter blob (`runtime.SaveParams` format) into the inputs of the same names.
    pub fn load_params(&self, bytes: &[u8]) -> Result<()> {
        self.exec.load_params(bytes)
    }

    /// Copies parameters into the inputs of the same names (unknown names are ignored) and
    /// leaves them out of [`GraphExecutor::input_info`].
    pub fn set_params(&self, params: &[(String, NDArray)]) -> Result<()> {
        self.exec.set_params(params, true)
    }

    /// Makes the inputs named in the blob share `other`'s arrays.
    pub fn share_params(&self, other: &GraphExecutor, bytes: &[u8]) -> Result<()> {
        self.exec.share_params(&other.exec, bytes)
    }

    /// Times each node's op (`repeat` values per node, seconds; zeros for input nodes).
    pub fn run_individual(&self, cfg: &TimeEvalConfig) -> Result<Vec<Vec<f64>>> {
        self.exec.run_individual(cfg)
    }

    /// Times the op of node `index`.
    pub fn run_individual_node(&self, index: usize, cfg: &TimeEvalConfig) -> Result<Vec<f64>> {
        self.exec.run_individual_node(index as i64, cfg)
    }

    /// Runs ops up to node `index` and returns a CPU copy of its output `output`.
    pub fn node_output(&self, index: usize, output: usize) -> Result<NDArray> {
        self.exec.execute_node(index as i64)?;
        self.exec.get_node_output(index as i64, output as i64)
    }

    /// Profiles `runs` runs of the graph (after three warm-up runs): time per node and per
    /// op, with shares of the total. `runs == 0` picks 1 to 100 runs to fill about 100 ms.
    pub fn profile(&self, runs: usize) -> Result<super::debug::ProfileReport> {
        self.exec.profile(runs)
    }

    /// Measures whole runs (like `module.time_evaluator("run", dev)`): seconds per run, one
    /// value per repeat.
    pub fn benchmark(&self, cfg: &TimeEvalConfig) -> Result<Vec<f64>> {
        let dev = self.exec.devices[0];
        time_evaluate(&mut || self.exec.run(), None, dev, cfg)
    }
}
