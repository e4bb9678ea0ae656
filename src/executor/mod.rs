//! Executors: the graph executor, its factory, the debug executor, params and the time
//! evaluator.
//!
//! Global functions registered here:
//! - `tvm.graph_executor.create`, `tvm.graph_executor_debug.create`,
//!   `tvm.graph_executor_factory.create`;
//! - `runtime.module.loadbinary_GraphExecutorFactory` (and the old name
//!   `runtime.module.loadbinary_GraphRuntimeFactory`);
//! - `runtime.SaveParams`, `runtime.LoadParams`, `runtime.SaveParamsToFile`,
//!   `runtime.LoadParamsFromFile`;
//! - `runtime.RPCTimeEvaluator` (local modules and global functions; with `profiling`);
//! - `tvm.relay._save_param_dict`, `tvm.relay._load_param_dict`: aliases of `SaveParams` and
//!   `LoadParams` that TVM's compiler library registers and that the Python debug executor
//!   of TVM 0.16 calls to dump tensors, so that it also works on this runtime alone.

pub mod any_list;
#[cfg(feature = "profiling")]
pub mod debug;
#[cfg(feature = "graph")]
pub mod factory;
#[cfg(feature = "graph")]
mod functions;
#[cfg(feature = "graph")]
pub mod graph;
#[cfg(feature = "graph")]
pub mod graph_executor;
#[cfg(any(feature = "graph", feature = "relax"))]
pub mod params;
pub mod time_eval;

#[cfg(feature = "profiling")]
pub use debug::{NodeProfile, OpProfile, ProfileReport};
#[cfg(feature = "graph")]
pub use factory::FactoryNode;
#[cfg(feature = "graph")]
pub use graph::Graph;
#[cfg(feature = "graph")]
pub use graph_executor::{GraphExecutor, TensorInfo};
pub use time_eval::TimeEvalConfig;

#[cfg(feature = "graph")]
use crate::ndarray::NDArray;
#[cfg(feature = "graph")]
use crate::packed_func::confine;
#[cfg(feature = "graph")]
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
#[cfg(feature = "graph")]
use crate::packed_func::value::{Args, RetValue};
#[cfg(any(feature = "graph", feature = "relax", feature = "profiling"))]
use std::fmt;

/// `e` with `context` before its message: one cold, out-of-line instantiation of
/// [`Error::context`] for the whole room (each `map_err(|e| e.context(format!(..)))` would
/// format in place and instantiate `context` for its own argument type).
#[cold]
#[inline(never)]
#[cfg(any(feature = "graph", feature = "relax", feature = "profiling"))]
pub(crate) fn ctx(
    e: crate::packed_func::error::Error,
    context: fmt::Arguments<'_>,
) -> crate::packed_func::error::Error {
    e.context(context)
}

/// Reads a Map (String → NDArray) argument.
#[cfg(feature = "graph")]
fn params_arg(a: &Args<'_>, i: usize, what: &str) -> Result<Vec<(String, NDArray)>> {
    let o = a
        .object(i)?
        .ok_or_else(|| Error::value_fmt(format_args!("{what}: the parameter map is NULL")))?;
    factory::params_from_map(o.to_ref()).map_err(|e| ctx(e, format_args!("{what}")))
}

/// `runtime.SaveParams` (and its other name).
#[cfg(feature = "graph")]
fn save_params_global(a: Args<'_>, rv: &mut RetValue, name: &str) -> Result<()> {
    a.expect_len(1, name)?;
    let p = params_arg(&a, 0, name)?;
    *rv = RetValue::Bytes(params::save_params(&p)?);
    Ok(())
}

/// `runtime.LoadParams` (and its other name).
#[cfg(feature = "graph")]
fn load_params_global(a: Args<'_>, rv: &mut RetValue, name: &str) -> Result<()> {
    a.expect_len(1, name)?;
    let bytes = functions::bytes_arg(&a, 0, name)?;
    *rv = factory::params_to_map(&params::load_params(bytes)?).into();
    Ok(())
}

#[cfg(feature = "graph")]
fn save_params_to_file(a: Args<'_>) -> Result<()> {
    a.expect_len(2, "runtime.SaveParamsToFile")?;
    let path = a.str(1)?;
    let file = confine::resolve(path, "runtime.SaveParamsToFile")?;
    let p = params_arg(&a, 0, "runtime.SaveParamsToFile")?;
    let bytes = params::save_params(&p)?;
    std::fs::write(file, bytes).map_err(|e| {
        Error::value_fmt(format_args!(
            "runtime.SaveParamsToFile: cannot write {path}: {e}"
        ))
    })
}

#[cfg(feature = "graph")]
fn load_params_from_file(a: Args<'_>) -> Result<RetValue> {
    a.expect_len(1, "runtime.LoadParamsFromFile")?;
    let path = a.str(0)?;
    let file = confine::resolve(path, "runtime.LoadParamsFromFile")?;
    let bytes = std::fs::read(file).map_err(|e| {
        Error::value_fmt(format_args!(
            "runtime.LoadParamsFromFile: cannot read {path}: {e}"
        ))
    })?;
    let p = params::load_params(&bytes).map_err(|e| ctx(e, format_args!("{path}")))?;
    Ok(factory::params_to_map(&p).into())
}

/// Registers the executors' global functions (the graph executor, its factory and params
/// with `graph`; the time evaluator and its cache-flush preprocessor with `profiling`).
#[cfg_attr(
    not(any(feature = "graph", feature = "profiling")),
    allow(unused_variables)
)]
pub fn register(b: &mut Registrar) {
    #[cfg(feature = "graph")]
    register_graph(b);
    #[cfg(feature = "profiling")]
    {
        b.add("runtime.RPCTimeEvaluator", |a, rv| {
            *rv = time_eval::rpc_time_evaluator(a)?.into_object().into();
            Ok(())
        });
        #[cfg(feature = "graph")]
        b.add("cache_flush_cpu_non_first_arg", |a, _rv| {
            time_eval::cpu_cache_flush(&a, 1)
        });
    }
}

/// The graph executor's global functions.
#[cfg(feature = "graph")]
fn register_graph(b: &mut Registrar) {
    b.add("tvm.graph_executor.create", |a, rv| {
        *rv = functions::create(a, false)?.into_object().into();
        Ok(())
    });
    b.add("tvm.graph_executor_debug.create", |a, rv| {
        *rv = functions::create(a, true)?.into_object().into();
        Ok(())
    });
    b.add("tvm.graph_executor_factory.create", |a, rv| {
        *rv = factory::create(a)?.into_object().into();
        Ok(())
    });
    for key in ["GraphExecutorFactory", "GraphRuntimeFactory"] {
        b.add(&format!("runtime.module.loadbinary_{key}"), |a, rv| {
            *rv = factory::load_binary(a)?.into_object().into();
            Ok(())
        });
    }
    // Each name a function of its own that captures nothing (a plain function pointer, not
    // a boxed closure), the work shared.
    b.add("runtime.SaveParams", |a, rv| {
        save_params_global(a, rv, "runtime.SaveParams")
    });
    b.add("tvm.relay._save_param_dict", |a, rv| {
        save_params_global(a, rv, "tvm.relay._save_param_dict")
    });
    b.add("runtime.LoadParams", |a, rv| {
        load_params_global(a, rv, "runtime.LoadParams")
    });
    b.add("tvm.relay._load_param_dict", |a, rv| {
        load_params_global(a, rv, "tvm.relay._load_param_dict")
    });
    b.add("runtime.SaveParamsToFile", |a, _rv| save_params_to_file(a));
    b.add("runtime.LoadParamsFromFile", |a, rv| {
        *rv = load_params_from_file(a)?;
        Ok(())
    });
}
