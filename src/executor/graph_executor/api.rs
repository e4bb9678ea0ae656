//! The safe Rust face of the graph executor.

use super::super::graph::Graph;
use super::super::time_eval::{time_evaluate, TimeEvalConfig};
use super::{executor_of, make_module, Executor, LinkedParamLookup, TensorArg, TensorInfo};
use crate::module::Module;
use crate::ndarray::NDArray;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::DLDevice;
use crate::packed_func::value::RetValue;
use std::sync::Arc;

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
        let exec = Executor::new(graph_json, lib, devices, LinkedParamLookup::Default)?;
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
                return Err(Error::type_error_fmt(format_args!(
                    "get_graph_json returned {other:?}, not a string"
                )))
            }
        };
        let lib = factory
            .imports()
            .into_iter()
            .next()
            .ok_or_else(|| Error::value("the factory module has no library module imported"))?;
        let params = super::super::factory::params_from_map(
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
            Error::type_error_fmt(format_args!(
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
    pub fn copy_output_to(&self, index: usize, dst: &mut NDArray) -> Result<()> {
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
    #[cfg(feature = "profiling")]
    pub fn profile(&self, runs: usize) -> Result<super::super::debug::ProfileReport> {
        self.exec.profile(runs)
    }

    /// Measures whole runs (like `module.time_evaluator("run", dev)`): seconds per run, one
    /// value per repeat.
    pub fn benchmark(&self, cfg: &TimeEvalConfig) -> Result<Vec<f64>> {
        let dev = self.exec.devices[0];
        time_evaluate(&mut || self.exec.run(), None, dev, cfg)
    }
}
