//! Fuzzes the graph JSON loader and the executor set-up behind it: any string must give an
//! executor or an error, never a crash or hang. Graphs that parse are built into an executor
//! over a library whose every function checks its arguments and does nothing, then run.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tvm_runtime::executor::{Graph, GraphExecutor};
use tvm_runtime::module::{Module, ModuleNode};
use tvm_runtime::object::ObjectRef;
use tvm_runtime::{DLDevice, Function, Result};

/// A library in which every name is a function that accepts any arguments and does nothing.
struct AnyFunctions;

impl ModuleNode for AnyFunctions {
    fn type_key(&self) -> &str {
        "library"
    }
    fn get_function(&self, name: &str, _this: Option<&ObjectRef>) -> Result<Option<Function>> {
        Ok((!name.is_empty()).then(|| Function::from_rust(|_args, _rv| Ok(()))))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Storage the harness lets one graph ask for (the runtime itself has no limit, as the
/// reference; allocation is lazy, but libFuzzer counts the size asked for).
const MAX_STORAGE: u128 = 256 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = Graph::parse(json) else { return };
    let bytes: u128 = g
        .shape
        .iter()
        .zip(&g.dltype)
        .map(|(s, t)| {
            s.iter().map(|&d| d.max(0) as u128).product::<u128>()
                * ((t.bits as u128 * t.lanes as u128).div_ceil(8))
        })
        .sum();
    if bytes > MAX_STORAGE {
        return;
    }
    let lib = Module::new(Box::new(AnyFunctions));
    if let Ok(ex) = GraphExecutor::new(json, lib, &[DLDevice::CPU]) {
        let _ = ex.run();
    }
});
