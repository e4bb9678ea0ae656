//! The safe Rust face of the Relax VM.

use super::interp::{ClosureObj, VmCore};
use super::memory::POOLED;
use super::vm_module::{load_vm, VmNode};
use crate::module::Module;
use crate::ndarray::NDArray;
use crate::object::containers::ArrayObj;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDevice, DL_CPU};
use crate::packed_func::value::RetValue;
use std::sync::Arc;

/// A Relax virtual machine over an executable module (as `Module::load` returns for a
/// library built by `relax.build` and exported with `export_library`).
pub struct VirtualMachine {
    module: Module,
    core: Arc<VmCore>,
}

/// What a VM function returns, in Rust terms.
#[derive(Debug, Clone)]
pub enum Value {
    /// A tensor.
    Tensor(NDArray),
    /// A tuple.
    Tuple(Vec<Value>),
    /// Anything else, as returned.
    Other(RetValue),
}

impl Value {
    fn from_ret(v: RetValue) -> Value {
        if let RetValue::Object(o) = &v {
            if let Ok(a) = NDArray::from_object(o.clone()) {
                return Value::Tensor(a);
            }
            if let Some(arr) = o.downcast_ref::<ArrayObj>() {
                return Value::Tuple(
                    arr.items
                        .iter()
                        .map(|i| match i {
                            Some(x) => Value::from_ret(RetValue::Object(x.clone())),
                            None => Value::Other(RetValue::Null),
                        })
                        .collect(),
                );
            }
        }
        Value::Other(v)
    }

    /// The tensor, if this is one.
    pub fn tensor(&self) -> Option<&NDArray> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// Tensors in order, tuples flattened.
    pub fn flatten(&self) -> Vec<NDArray> {
        match self {
            Value::Tensor(t) => vec![t.clone()],
            Value::Tuple(v) => v.iter().flat_map(Value::flatten).collect(),
            Value::Other(_) => Vec::new(),
        }
    }
}

impl VirtualMachine {
    /// A VM over `module`, which must be (or hold as root) a Relax executable.
    pub fn new(module: &Module) -> Result<VirtualMachine> {
        let vm = load_vm(module, false)?;
        let core = vm
            .node()
            .as_any()
            .downcast_ref::<VmNode>()
            .expect("load_vm makes a VM node")
            .core()
            .clone();
        Ok(VirtualMachine { module: vm, core })
    }

    /// Loads a library file and creates a VM over it.
    pub fn load(path: &str) -> Result<VirtualMachine> {
        Self::new(&Module::load(path)?)
    }

    /// Initialises on `devices` (pooled allocators), adding the CPU as host when missing.
    pub fn init(&self, devices: &[DLDevice]) -> Result<()> {
        let mut devs = devices.to_vec();
        if devs.last().is_none_or(|d| d.device_type != DL_CPU) {
            devs.push(DLDevice::CPU);
        }
        let kinds = vec![POOLED; devs.len()];
        self.core.init(devs, kinds)
    }

    /// The VM module (for the PackedFunc interface).
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Names of the VM functions.
    pub fn functions(&self) -> Vec<String> {
        self.core
            .exec
            .funcs
            .iter()
            .filter(|f| f.kind == super::exec::FuncKind::VmFunc)
            .map(|f| f.name.clone())
            .collect()
    }

    /// Parameter names of a function.
    pub fn param_names(&self, func: &str) -> Result<Vec<String>> {
        let i = self
            .core
            .exec
            .func_index(func)
            .ok_or_else(|| Error::value_fmt(format_args!("Unknown function: {func}")))?;
        Ok(self.core.exec.funcs[i].param_names.clone())
    }

    /// Calls a function with tensors; inputs on another device are copied to the first.
    pub fn call(&self, func: &str, inputs: &[NDArray]) -> Result<Value> {
        let st = self.core.state()?;
        let regs = inputs
            .iter()
            .map(|a| {
                super::interp::to_device(RetValue::Object(a.as_object().clone()), st.devices[0])
            })
            .collect::<Result<Vec<_>>>()?;
        let i = self
            .core
            .exec
            .func_index(func)
            .ok_or_else(|| Error::value_fmt(format_args!("Unknown function: {func}")))?;
        let out = if self.core.exec.funcs[i].kind == super::exec::FuncKind::VmFunc {
            self.core.call_index(i, regs)?
        } else {
            let clo = self
                .core
                .get_closure(func)
                .ok_or_else(|| Error::value_fmt(format_args!("{func} is not a VM function")))?;
            let _ = clo.downcast_ref::<ClosureObj>();
            self.core.invoke_closure_regs(&clo, &regs)?
        };
        Ok(Value::from_ret(out))
    }
}
