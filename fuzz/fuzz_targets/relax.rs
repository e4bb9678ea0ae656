//! Fuzzes the Relax VM: the executable parser (any bytes give an executable or an error) and
//! the interpreter behind it. Executables that parse are initialised against a kernel library
//! whose every function accepts anything (the `vm.builtin.*` functions stay the real ones), and
//! every VM function is called with small tensors and then with integers, under a step limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Once;
use tvm_runtime::module::{Module, ModuleNode};
use tvm_runtime::object::containers::ShapeTupleObj;
use tvm_runtime::object::ObjectRef;
use tvm_runtime::packed_func::registry;
use tvm_runtime::relax_vm::exec::{Executable, FuncKind};
use tvm_runtime::relax_vm::vm_module::{load_vm, ExecutableNode, VmNode};
use tvm_runtime::{ArgValue, DLDataType, Function, NDArray, Result, RetValue};

/// Kernels: any name outside the builtins is a function that accepts anything.
struct AnyKernels;

impl ModuleNode for AnyKernels {
    fn type_key(&self) -> &str {
        "library"
    }
    fn get_function(&self, name: &str, _this: Option<&ObjectRef>) -> Result<Option<Function>> {
        if name.is_empty() || name.starts_with("vm.builtin.") || registry::contains(name) {
            return Ok(None);
        }
        Ok(Some(Function::from_rust(|_args, _rv| Ok(()))))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Storage one `alloc_storage` may ask for (the runtime has no limit, as the reference;
/// libFuzzer counts the size asked for).
const MAX_STORAGE: i64 = 64 << 20;

fn cap_allocations() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let real = registry::get("vm.builtin.alloc_storage").expect("registered");
        registry::register_rust("vm.builtin.alloc_storage", move |a, rv| {
            if let Ok(s) = a.downcast::<ShapeTupleObj>(1) {
                let mut n: i64 = 1;
                for &d in s.dims() {
                    n = n.saturating_mul(d.max(0));
                }
                // Bytes per element from the dtype hint (wide types and many lanes included);
                // 8 when the hint is not a data type (the builtin then refuses the call).
                let elem = a
                    .dtype(3)
                    .map(|t| (t.bits as i64 * t.lanes as i64 + 7) / 8)
                    .unwrap_or(8);
                if n.saturating_mul(elem.max(1)) > MAX_STORAGE {
                    return Err(tvm_runtime::Error::value("fuzz harness: storage too large"));
                }
            }
            let mut v = a.values().to_vec();
            let mut c = a.codes().to_vec();
            // SAFETY: forwarding this call's own arguments, valid during the call.
            unsafe {
                real.obj()
                    .call_raw(v.as_mut_ptr(), c.as_mut_ptr(), v.len() as i32, rv)
            }
        });
    });
}

fuzz_target!(|data: &[u8]| {
    cap_allocations();
    let Ok(exec) = Executable::load(data) else {
        return;
    };
    let vm_funcs: Vec<(String, i64)> = exec
        .funcs
        .iter()
        .filter(|f| f.kind == FuncKind::VmFunc)
        .map(|f| (f.name.clone(), f.num_args))
        .collect();
    let saved = exec.save().expect("a parsed executable saves");
    assert_eq!(
        Executable::load(&saved).expect("reloads").save().unwrap(),
        saved
    );
    let m = Module::new(Box::new(ExecutableNode::new(exec, "relax.Executable")));
    m.import(&Module::new(Box::new(AnyKernels))).unwrap();
    let Ok(vm) = load_vm(&m, false) else { return };
    let core = vm
        .node()
        .as_any()
        .downcast_ref::<VmNode>()
        .unwrap()
        .core()
        .clone();
    core.set_step_limit(10_000);
    let init = vm.function("vm_initialization").unwrap();
    if init
        .call(&[ArgValue::Int(1), ArgValue::Int(0), ArgValue::Int(2)])
        .is_err()
    {
        return;
    }
    let t = NDArray::empty(
        &[2, 2],
        DLDataType::new(2, 32, 1),
        tvm_runtime::DLDevice::CPU,
    )
    .unwrap();
    for (name, n) in vm_funcs.iter().take(8) {
        let Ok(Some(f)) = vm.get_function(name, false) else {
            continue;
        };
        let n = (*n).clamp(0, 16) as usize;
        let tensors: Vec<ArgValue<'_>> = (0..n).map(|_| ArgValue::from(&t)).collect();
        let ints: Vec<ArgValue<'_>> = (0..n).map(|i| ArgValue::Int(i as i64)).collect();
        for args in [tensors, ints] {
            let _: Result<RetValue> = f.call(&args);
        }
    }
});
