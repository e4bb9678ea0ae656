//! The Cargo features this library was built with, and which feature provides a global
//! function, a module kind or a device that a build may lack.
//!
//! A lookup that misses consults [`missing`]: when the name belongs to a feature left out of
//! this build, the error says so ("built without `rpc`") instead of a bare "not found".

/// Every optional feature, in the order `runtime.BuiltFeatures` and `tvmrt --version` list
/// them, with whether this build has it.
pub const FEATURES: &[(&str, bool)] = &[
    ("graph", cfg!(feature = "graph")),
    ("relax", cfg!(feature = "relax")),
    ("llm", cfg!(feature = "llm")),
    ("rpc", cfg!(feature = "rpc")),
    ("tvm-ffi", cfg!(feature = "tvm-ffi")),
    ("dso", cfg!(feature = "dso")),
    ("threads", cfg!(feature = "threads")),
    ("plugins", cfg!(feature = "plugins")),
    ("profiling", cfg!(feature = "profiling")),
    ("cuda", cfg!(feature = "cuda")),
    ("vulkan", cfg!(feature = "vulkan")),
    ("opencl", cfg!(feature = "opencl")),
];

/// Name prefixes of global functions and module kinds (`runtime.module.loadfile_<kind>`,
/// `runtime.module.loadbinary_<kind>`), and the feature that provides them. The longest
/// matching prefix wins.
pub const PREFIXES: &[(&str, &str)] = &[
    ("tvm.graph_executor", "graph"),
    ("tvm.graph_executor_debug", "graph"),
    ("tvm.graph_executor_factory", "graph"),
    ("runtime.module.loadbinary_GraphExecutorFactory", "graph"),
    ("runtime.module.loadbinary_GraphRuntimeFactory", "graph"),
    ("runtime.SaveParams", "graph"),
    ("runtime.LoadParams", "graph"),
    ("tvm.relay._save_param_dict", "graph"),
    ("tvm.relay._load_param_dict", "graph"),
    ("cache_flush_cpu_non_first_arg", "profiling"),
    ("runtime.RPCTimeEvaluator", "profiling"),
    ("runtime.module.loadbinary_relax.", "relax"),
    ("runtime.module.loadfile_relax.", "relax"),
    ("relax.", "relax"),
    ("vm.builtin.", "relax"),
    ("tvm.contrib.sort.", "relax"),
    ("runtime.profiling.", "profiling"),
    ("vm.builtin.attention_kv_cache", "llm"),
    ("vm.builtin.sample_top_p", "llm"),
    ("vm.builtin.multinomial_from_uniform", "llm"),
    ("vm.builtin.apply_", "llm"),
    ("vm.builtin.ndarray_cache", "llm"),
    ("vm.builtin.tensor_cache", "llm"),
    ("vm.builtin.param_", "llm"),
    ("rpc.", "rpc"),
    ("tvm.rpc.", "rpc"),
    ("device_api.rpc", "rpc"),
    ("runtime.module.loadfile_so", "dso"),
    ("device_api.cuda", "cuda"),
    ("runtime.module.loadbinary_cuda", "cuda"),
    ("runtime.module.loadfile_cubin", "cuda"),
    ("runtime.module.loadfile_ptx", "cuda"),
    ("device_api.vulkan", "vulkan"),
    ("runtime.module.loadbinary_vulkan", "vulkan"),
    ("runtime.module.loadfile_vulkan", "vulkan"),
    ("device_api.opencl", "opencl"),
    ("runtime.module.loadbinary_opencl", "opencl"),
    ("runtime.module.loadfile_cl", "opencl"),
];

/// Whether this build has the feature `name` (false for a name that is not a feature).
pub fn has(name: &str) -> bool {
    FEATURES.iter().any(|&(n, on)| n == name && on)
}

/// The features this build has, in [`FEATURES`] order.
pub fn built() -> impl Iterator<Item = &'static str> {
    FEATURES.iter().filter(|&&(_, on)| on).map(|&(n, _)| n)
}

/// The feature, left out of this build, that would provide the global function or module
/// loader `name`; `None` when the name belongs to no feature or its feature is built.
pub fn missing(name: &str) -> Option<&'static str> {
    PREFIXES
        .iter()
        .filter(|(p, _)| name.starts_with(p))
        .max_by_key(|(p, _)| p.len())
        .map(|&(_, f)| f)
        .filter(|f| !has(f))
}

/// "built without `<feature>`" for a name whose feature this build lacks; `None` otherwise.
pub fn built_without(name: &str) -> Option<String> {
    missing(name).map(|f| format!("{name} is not available: this library was built without `{f}`"))
}

/// The error of a function that is present (a lookup finds it, as in the full library, so
/// that callers which fetch it up front keep working) but whose `feature` this build left out.
#[cold]
#[inline(never)]
pub fn unavailable(name: &str, feature: &str) -> super::error::Error {
    super::error::Error::tvm_fmt(format_args!(
        "{name} is not available: this library was built without `{feature}`"
    ))
}

/// The message for a lookup of `name` that missed: [`built_without`] when a left-out feature
/// explains it, `otherwise` when none does.
pub fn or_built_without(name: &str, otherwise: String) -> String {
    built_without(name).unwrap_or(otherwise)
}

/// The feature, left out of this build, that would provide devices of `device_type` (CUDA,
/// Vulkan, OpenCL, or a plugin's type); `None` when no left-out feature explains a missing backend.
pub fn missing_for_device(device_type: i32) -> Option<&'static str> {
    use super::types::{DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED, DL_OPENCL, DL_VULKAN};
    let f = match device_type {
        DL_CUDA | DL_CUDA_HOST | DL_CUDA_MANAGED => "cuda",
        DL_VULKAN => "vulkan",
        DL_OPENCL => "opencl",
        // The first device type plugins may claim (`device::plugin::MIN_PLUGIN_DEVICE_TYPE`).
        t if t >= 32 => "plugins",
        _ => return None,
    };
    (!has(f)).then_some(f)
}
