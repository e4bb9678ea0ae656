//! Graph executor tests: a hand-written graph over a library module built in Rust (one op a
//! compiled-style C function, one a Rust closure), run through the Rust API and through the
//! global functions Python uses; zero-copy, parameters (with a golden byte layout), the
//! factory and its blob loader, the debug executor, the time evaluator and error cases. A
//! TVM-compiled `mlp.so` fixture is run too when present.
#![cfg(feature = "graph")]

#[path = "common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/skip.rs"]
mod skip;

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, OnceLock};
use tvm_runtime::c_api::error::TVMAPISetLastError;
use tvm_runtime::executor::{params, FactoryNode, GraphExecutor, TimeEvalConfig};
use tvm_runtime::module::blob::{call_loader, BlobReader};
use tvm_runtime::module::ModuleNode;
use tvm_runtime::object::containers::{MapObj, ShapeTupleObj, StringObj};
use tvm_runtime::object::ObjectRef;
use tvm_runtime::packed_func::types::{type_code as tc, DLDevice, DLTensor, TVMValue};
use tvm_runtime::packed_func::value::ObjArg;
use tvm_runtime::{ArgValue, Error, Function, Module, NDArray, RetValue};

// ---------------------------------------------------------------------------------------------
// A library module built in Rust.

fn numel(t: &DLTensor) -> usize {
    (0..t.ndim as usize)
        // SAFETY: the executor passes tensors with `ndim` shape entries.
        .map(|i| unsafe { *t.shape.add(i) } as usize)
        .product()
}

/// # Safety
/// `t` must be a live float32 tensor.
unsafe fn f32s<'a>(t: &DLTensor) -> &'a mut [f32] {
    // SAFETY: caller contract.
    unsafe {
        std::slice::from_raw_parts_mut(
            (t.data as *mut u8).add(t.byte_offset as usize) as *mut f32,
            numel(t),
        )
    }
}

/// `add(a, b, out)` in the convention of TVM-compiled functions.
unsafe extern "C" fn add_backend(
    args: *mut TVMValue,
    codes: *mut i32,
    n: i32,
    _ret: *mut TVMValue,
    _ret_code: *mut i32,
    _res: *mut c_void,
) -> i32 {
    // SAFETY: the executor passes `n` DLTensor arguments.
    unsafe {
        if n != 3 || (0..3).any(|i| *codes.add(i) != tc::DLTENSOR_HANDLE) {
            TVMAPISetLastError(c"ValueError: add expects 3 DLTensor arguments".as_ptr());
            return -1;
        }
        let t = |i: usize| &*((*args.add(i)).v_handle as *const DLTensor);
        let (a, b, o) = (f32s(t(0)), f32s(t(1)), f32s(t(2)));
        if a.len() != o.len() || b.len() != o.len() {
            TVMAPISetLastError(c"ValueError: add: size mismatch".as_ptr());
            return -1;
        }
        for i in 0..o.len() {
            o[i] = a[i] + b[i];
        }
    }
    0
}

/// `a` as a bare `DLTensor*` argument (`kTVMDLTensorHandle`), borrowing it.
fn dl(a: &NDArray) -> ArgValue<'_> {
    // SAFETY: `a` keeps its tensor alive while the argument, which borrows it, is used.
    ArgValue::DLTensor(unsafe { tvm_runtime::packed_func::TensorRef::new(a.handle()) })
}

fn dl_arg<'a>(
    a: &tvm_runtime::packed_func::Args<'a>,
    i: usize,
) -> tvm_runtime::Result<&'a DLTensor> {
    match a.get(i)? {
        // SAFETY: the executor passes live tensors.
        ArgValue::DLTensor(t) => Ok(unsafe { &*t.as_ptr() }),
        v => Err(Error::type_error(format!(
            "expected a tensor, got {}",
            v.kind_name()
        ))),
    }
}

static REENTER: OnceLock<Module> = OnceLock::new();

struct TestLib {
    funcs: HashMap<String, Function>,
}

impl ModuleNode for TestLib {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn type_key(&self) -> &str {
        "test_lib"
    }
    fn get_function(
        &self,
        name: &str,
        _this: Option<&ObjectRef>,
    ) -> tvm_runtime::Result<Option<Function>> {
        Ok(self.funcs.get(name).cloned())
    }
}

fn test_lib() -> Module {
    let mut funcs = HashMap::new();
    funcs.insert(
        "add".to_string(),
        // SAFETY: `add_backend` is a plain function of this test, callable from any thread.
        unsafe { Function::from_backend(add_backend, std::ptr::null_mut(), None) },
    );
    funcs.insert(
        "relu".to_string(),
        Function::from_rust(|a, _rv| {
            a.expect_len(2, "relu")?;
            let (x, y) = (dl_arg(&a, 0)?, dl_arg(&a, 1)?);
            // SAFETY: float32 tensors from the executor.
            let (x, y) = unsafe { (f32s(x), f32s(y)) };
            for (o, i) in y.iter_mut().zip(x.iter()) {
                *o = i.max(0.0);
            }
            Ok(())
        }),
    );
    funcs.insert(
        "ndim_of".to_string(),
        Function::from_rust(|a, _rv| {
            // Writes each argument's ndim into the output's first elements.
            let n = a.len();
            let out = dl_arg(&a, n - 1)?;
            // SAFETY: float32 tensor from the executor.
            let o = unsafe { f32s(out) };
            for (i, slot) in o.iter_mut().enumerate().take(n) {
                *slot = dl_arg(&a, i)?.ndim as f32;
            }
            Ok(())
        }),
    );
    funcs.insert(
        "fail".to_string(),
        Function::from_rust(|_a, _rv| Err(Error::value("the fail op always fails"))),
    );
    funcs.insert(
        "reenter".to_string(),
        Function::from_rust(|_a, _rv| {
            let m = REENTER.get().expect("set by the test");
            m.function("get_input")?.call(&[ArgValue::Int(0)])?;
            Ok(())
        }),
    );
    Module::new(Box::new(TestLib { funcs }))
}

// ---------------------------------------------------------------------------------------------
// Graphs.

/// x, y, w: inputs [2, 3]; s = add(x, y); r = relu(s) (flattened); t = add(r, w) (reusing
/// s's storage); out0 = reshape(t) to [3, 2] (`__nop`, same storage); out1 = r.
const GRAPH: &str = r#"{
  "nodes": [
    {"op": "null", "name": "x", "inputs": []},
    {"op": "null", "name": "y", "inputs": []},
    {"op": "null", "name": "w", "inputs": []},
    {"op": "tvm_op", "name": "s", "attrs": {"func_name": "add", "num_inputs": "2",
      "num_outputs": "1", "flatten_data": "0", "hash": "h1"}, "inputs": [[0, 0, 0], [1, 0, 0]]},
    {"op": "tvm_op", "name": "r", "attrs": {"func_name": "relu", "num_inputs": "1",
      "num_outputs": "1", "flatten_data": "1"}, "inputs": [[3, 0, 0]]},
    {"op": "tvm_op", "name": "t", "attrs": {"func_name": "add", "num_inputs": "2",
      "num_outputs": "1", "flatten_data": "0"}, "inputs": [[4, 0, 0], [2, 0, 0]]},
    {"op": "tvm_op", "name": "reshape", "attrs": {"func_name": "__nop", "num_inputs": "1",
      "num_outputs": "1", "flatten_data": "0"}, "inputs": [[5, 0, 0]]}
  ],
  "arg_nodes": [0, 1, 2],
  "heads": [[6, 0, 0], [4, 0, 0]],
  "attrs": {
    "dltype": ["list_str", ["float32", "float32", "float32", "float32", "float32", "float32",
      "float32"]],
    "storage_id": ["list_int", [0, 1, 2, 3, 4, 3, 3]],
    "shape": ["list_shape", [[2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [3, 2]]],
    "device_index": ["list_int", [1, 1, 1, 1, 1, 1, 1]]
  },
  "node_row_ptr": [0, 1, 2, 3, 4, 5, 6, 7]
}"#;

const X: [f32; 6] = [1.0, -2.0, 3.0, -4.0, 5.0, -6.0];
const Y: [f32; 6] = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5];
const W: [f32; 6] = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0];

fn expected(x: &[f32], y: &[f32], w: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let r: Vec<f32> = x.iter().zip(y).map(|(a, b)| (a + b).max(0.0)).collect();
    let t: Vec<f32> = r.iter().zip(w).map(|(a, b)| a + b).collect();
    (t, r)
}

fn arr(v: &[f32], shape: &[i64]) -> NDArray {
    NDArray::from_slice(v, shape).unwrap()
}

fn cs(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn global(name: &str) -> Function {
    Function::get_global(name).unwrap()
}

fn obj(o: &ObjectRef) -> ArgValue<'_> {
    // SAFETY: `o` keeps the object alive for the borrow.
    ArgValue::Object(unsafe { ObjArg::new(o.as_ptr()) })
}

fn nd(rv: RetValue) -> NDArray {
    NDArray::from_object(rv.into_object().unwrap()).unwrap()
}

fn map_get(m: &MapObj, k: &str) -> Option<ObjectRef> {
    m.get(&StringObj::new_ref(k)).cloned().flatten()
}

/// Creates an executor module through `tvm.graph_executor.create` (Python's path).
fn create_module(json: &str, lib: &Module) -> Module {
    let j = cs(json);
    let rv = global("tvm.graph_executor.create")
        .call(&[
            ArgValue::Str(&j),
            obj(lib.as_object()),
            ArgValue::Int(1),
            ArgValue::Int(0),
        ])
        .unwrap();
    Module::from_object(rv.into_object().unwrap()).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn rust_api_runs_the_graph() {
    let ex = GraphExecutor::new(GRAPH, test_lib(), &[DLDevice::CPU]).unwrap();
    assert_eq!(ex.num_inputs(), 3);
    assert_eq!(ex.num_outputs(), 2);
    assert_eq!(ex.input_index("y"), Some(1));
    assert_eq!(ex.input_index("nope"), None);
    assert_eq!(ex.output_index("reshape:0"), Some(0));
    assert_eq!(ex.output_index("r"), Some(1));
    ex.set_input("x", &arr(&X, &[2, 3])).unwrap();
    ex.set_input_index(1, &arr(&Y, &[2, 3])).unwrap();
    ex.set_input("w", &arr(&W, &[2, 3])).unwrap();
    ex.run().unwrap();
    let (t, r) = expected(&X, &Y, &W);
    let out0 = ex.output(0).unwrap();
    assert_eq!(out0.shape(), &[3, 2]);
    assert_eq!(out0.to_vec::<f32>().unwrap(), t);
    assert_eq!(ex.output(1).unwrap().to_vec::<f32>().unwrap(), r);
    let mut dst = NDArray::empty(&[3, 2], out0.dtype(), DLDevice::CPU).unwrap();
    ex.copy_output_to(0, &mut dst).unwrap();
    assert_eq!(dst.to_vec::<f32>().unwrap(), t);
    assert_eq!(ex.input(0).unwrap().to_vec::<f32>().unwrap(), X.to_vec());

    let info = ex.input_info().unwrap();
    assert_eq!(
        info.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["x", "y", "w"]
    );
    ex.set_params(&[("w".into(), arr(&W, &[2, 3]))]).unwrap();
    assert_eq!(ex.input_info().unwrap().len(), 2);
    let oi = ex.output_info();
    assert_eq!(oi[0].name, "reshape");
    assert_eq!(oi[0].shape, vec![3, 2]);

    // Runs again with a new input; the executor is shareable across threads.
    let ex2 = ex.clone();
    std::thread::spawn(move || {
        ex2.set_input("x", &arr(&[0.0; 6], &[2, 3])).unwrap();
        ex2.run().unwrap();
    })
    .join()
    .unwrap();
    let (t, _) = expected(&[0.0; 6], &Y, &W);
    assert_eq!(ex.output(0).unwrap().to_vec::<f32>().unwrap(), t);

    // The module round-trips to the Rust handle.
    let back = GraphExecutor::from_module(ex.module()).unwrap();
    assert_eq!(back.num_inputs(), 3);
    assert!(GraphExecutor::from_module(&test_lib()).is_err());
}

#[test]
fn flatten_data_and_nop_arguments() {
    // `ndim_of` writes its arguments' ranks: flattened arguments have rank 1.
    let json = r#"{
      "nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "tvm_op", "name": "a", "attrs": {"func_name": "ndim_of", "num_inputs": "1",
          "num_outputs": "1", "flatten_data": "1"}, "inputs": [[0, 0, 0]]},
        {"op": "tvm_op", "name": "b", "attrs": {"func_name": "ndim_of", "num_inputs": "1",
          "num_outputs": "1", "flatten_data": "0"}, "inputs": [[0, 0, 0]]}
      ],
      "arg_nodes": [0],
      "heads": [[1, 0, 0], [2, 0, 0]],
      "attrs": {
        "dltype": ["list_str", ["float32", "float32", "float32"]],
        "storage_id": ["list_int", [0, 1, 2]],
        "shape": ["list_shape", [[2, 2, 2], [2, 4], [2, 4]]]
      },
      "node_row_ptr": [0, 1, 2, 3]
    }"#;
    let ex = GraphExecutor::new(json, test_lib(), &[DLDevice::CPU]).unwrap();
    ex.run().unwrap();
    assert_eq!(
        &ex.output(0).unwrap().to_vec::<f32>().unwrap()[..2],
        &[1.0, 1.0]
    );
    assert_eq!(
        &ex.output(1).unwrap().to_vec::<f32>().unwrap()[..2],
        &[3.0, 2.0]
    );
    // Flattening did not change the entry the second op sees, nor the graph's arrays.
    assert_eq!(ex.input(0).unwrap().shape(), &[2, 2, 2]);
}

#[test]
fn copy_nodes_and_device_index() {
    let json = r#"{
      "nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "tvm_op", "name": "c", "attrs": {"func_name": "__copy", "num_inputs": "1",
          "num_outputs": "1", "flatten_data": "0"}, "inputs": [[0, 0, 0]]}
      ],
      "arg_nodes": [0],
      "heads": [[1, 0, 0]],
      "attrs": {
        "dltype": ["list_str", ["int32", "int32"]],
        "storage_id": ["list_int", [0, 1]],
        "shape": ["list_shape", [[4], [4]]],
        "device_index": ["list_int", [1, 1]],
        "storage_scope": ["list_str", ["global", ""]]
      },
      "node_row_ptr": [0, 1, 2]
    }"#;
    let ex = GraphExecutor::new(json, test_lib(), &[DLDevice::CPU]).unwrap();
    ex.set_input("x", &NDArray::from_slice(&[1i32, 2, 3, 4], &[4]).unwrap())
        .unwrap();
    ex.run().unwrap();
    assert_eq!(
        ex.output(0).unwrap().to_vec::<i32>().unwrap(),
        vec![1, 2, 3, 4]
    );
    // An entry on a device type the executor was not given is refused (the reference puts it
    // on the first device, whose memory then reaches the other device's kernels).
    let json2 = json.replace("[1, 1]]", "[1, 2]]");
    let e = GraphExecutor::new(&json2, test_lib(), &[DLDevice::CPU])
        .map(|_| ())
        .unwrap_err();
    assert!(
        e.message.contains(
            "places storage 1 on cuda (device_index), but the executor was given only cpu(0)"
        ),
        "{}",
        e.message
    );
}

#[test]
fn packed_functions_like_python() {
    let m = create_module(GRAPH, &test_lib());
    assert_eq!(m.type_key(), "GraphExecutor");
    let f = |n: &str| m.function(n).unwrap();
    let (x, w) = (cs("x"), cs("w"));
    let (ax, ay, aw) = (arr(&X, &[2, 3]), arr(&Y, &[2, 3]), arr(&W, &[2, 3]));
    f("set_input")
        .call(&[ArgValue::Str(&x), (&ax).into()])
        .unwrap();
    f("set_input")
        .call(&[ArgValue::Int(1), (&ay).into()])
        .unwrap();
    // A bare DLTensor works too.
    f("set_input").call(&[ArgValue::Str(&w), dl(&aw)]).unwrap();
    f("run").call(&[]).unwrap();
    let (t, r) = expected(&X, &Y, &W);
    let out = nd(f("get_output").call(&[ArgValue::Int(0)]).unwrap());
    assert_eq!(out.to_vec::<f32>().unwrap(), t);
    let out1 = nd(f("get_output").call(&[ArgValue::Str(&cs("r"))]).unwrap());
    assert_eq!(out1.to_vec::<f32>().unwrap(), r);
    let dst = NDArray::empty(&[3, 2], out.dtype(), DLDevice::CPU).unwrap();
    let rv = f("get_output")
        .call(&[ArgValue::Int(0), (&dst).into()])
        .unwrap();
    assert!(matches!(rv, RetValue::Null));
    assert_eq!(dst.to_vec::<f32>().unwrap(), t);

    assert_eq!(f("get_num_inputs").call(&[]).unwrap().as_i64().unwrap(), 3);
    assert_eq!(f("get_num_outputs").call(&[]).unwrap().as_i64().unwrap(), 2);
    let idx = |n: &str| {
        f("get_input_index")
            .call(&[ArgValue::Str(&cs(n))])
            .unwrap()
            .as_i64()
            .unwrap()
    };
    assert_eq!((idx("x"), idx("w"), idx("zzz")), (0, 2, -1));
    let oidx = f("get_output_index")
        .call(&[ArgValue::Str(&cs("r:1"))])
        .unwrap()
        .as_i64()
        .unwrap();
    assert_eq!(oidx, 1);
    // get_input: by name, by index; an unknown name gives None (GraphModule relies on it).
    let gi = nd(f("get_input").call(&[ArgValue::Str(&x)]).unwrap());
    assert_eq!(gi.to_vec::<f32>().unwrap(), X.to_vec());
    assert!(matches!(
        f("get_input").call(&[ArgValue::Str(&cs("zzz"))]).unwrap(),
        RetValue::Null
    ));

    // get_input_info: {"shape": {name: ShapeTuple}, "dtype": {name: str}}.
    let info = f("get_input_info")
        .call(&[])
        .unwrap()
        .into_object()
        .unwrap();
    let info = info.downcast_ref::<MapObj>().unwrap();
    let shapes = map_get(info, "shape").unwrap();
    let shapes = shapes.downcast_ref::<MapObj>().unwrap();
    assert_eq!(shapes.len(), 3);
    let xs = map_get(shapes, "x").unwrap();
    assert_eq!(xs.downcast_ref::<ShapeTupleObj>().unwrap().dims(), &[2, 3]);
    let dtypes = map_get(info, "dtype").unwrap();
    let xd = map_get(dtypes.downcast_ref::<MapObj>().unwrap(), "x").unwrap();
    assert_eq!(xd.downcast_ref::<StringObj>().unwrap().as_str(), "float32");
    let oinfo = f("get_output_info")
        .call(&[])
        .unwrap()
        .into_object()
        .unwrap();
    let oshapes = map_get(oinfo.downcast_ref::<MapObj>().unwrap(), "shape").unwrap();
    let rs = map_get(oshapes.downcast_ref::<MapObj>().unwrap(), "reshape").unwrap();
    assert_eq!(rs.downcast_ref::<ShapeTupleObj>().unwrap().dims(), &[3, 2]);

    // run_from_inputs: (device_type, device_id, name, value, ...) -> outputs on that device.
    let zeros = arr(&[0.0; 6], &[2, 3]);
    let outs = f("run_from_inputs")
        .call(&[
            ArgValue::Int(1),
            ArgValue::Int(0),
            ArgValue::Str(&x),
            (&zeros).into(),
        ])
        .unwrap()
        .into_object()
        .unwrap();
    let outs = outs
        .downcast_ref::<tvm_runtime::object::containers::ArrayObj>()
        .unwrap();
    assert_eq!(outs.items.len(), 2);
    let o0 = NDArray::from_object(outs.items[0].clone().unwrap()).unwrap();
    assert_eq!(o0.to_vec::<f32>().unwrap(), expected(&[0.0; 6], &Y, &W).0);

    // Functions the executor does not have are absent, as the C API reports them.
    assert!(m.get_function("run_individual", false).unwrap().is_none());
    assert!(m.get_function("nonexistent", false).unwrap().is_none());
}

#[test]
fn zero_copy_inputs_and_outputs() {
    let ex = GraphExecutor::new(GRAPH, test_lib(), &[DLDevice::CPU]).unwrap();
    let mut x = arr(&X, &[2, 3]);
    ex.set_input_zero_copy("x", &x).unwrap();
    ex.set_input("y", &arr(&Y, &[2, 3])).unwrap();
    ex.set_input("w", &arr(&W, &[2, 3])).unwrap();
    let out0 = NDArray::empty(&[3, 2], x.dtype(), DLDevice::CPU).unwrap();
    let out1 = NDArray::empty(&[2, 3], x.dtype(), DLDevice::CPU).unwrap();
    ex.set_output_zero_copy(0, &out0).unwrap();
    ex.set_output_zero_copy(1, &out1).unwrap();
    ex.run().unwrap();
    let (t, r) = expected(&X, &Y, &W);
    assert_eq!(out0.to_vec::<f32>().unwrap(), t);
    assert_eq!(out1.to_vec::<f32>().unwrap(), r);
    // The executor reads x in place: change it, run, see the change. The executor holds x,
    // so a safe write is refused; writing between runs is the zero-copy contract.
    let x2 = [9.0f32, 8.0, 7.0, 6.0, 5.0, 4.0];
    assert!(x.copy_from_slice(&x2).is_err());
    // SAFETY: the executor reads x only while it runs, and it is not running.
    unsafe { x.copy_from_slice_unchecked(&x2) }.unwrap();
    ex.run().unwrap();
    assert_eq!(out0.to_vec::<f32>().unwrap(), expected(&x2, &Y, &W).0);
    // get_input/get_output alias the external arrays.
    assert_eq!(ex.input(0).unwrap().to_vec::<f32>().unwrap(), x2.to_vec());
    assert_eq!(ex.output(0).unwrap().dltensor().data, out0.dltensor().data);

    // Through the PackedFunc surface, with a bare DLTensor too.
    let m = create_module(GRAPH, &test_lib());
    let zeros = arr(&[0.0; 6], &[2, 3]);
    for n in ["x", "w"] {
        m.function("set_input")
            .unwrap()
            .call(&[ArgValue::Str(&cs(n)), (&zeros).into()])
            .unwrap();
    }
    let y = arr(&Y, &[2, 3]);
    m.function("set_input_zero_copy")
        .unwrap()
        .call(&[ArgValue::Str(&cs("y")), dl(&y)])
        .unwrap();
    let o = NDArray::empty(&[3, 2], x.dtype(), DLDevice::CPU).unwrap();
    m.function("set_output_zero_copy")
        .unwrap()
        .call(&[ArgValue::Str(&cs("reshape")), (&o).into()])
        .unwrap();
    m.function("run").unwrap().call(&[]).unwrap();
    assert_eq!(
        o.to_vec::<f32>().unwrap(),
        expected(&[0.0; 6], &Y, &[0.0; 6]).0
    );

    // Mismatches are refused with a reason.
    let e = ex
        .set_input_zero_copy("x", &arr(&[0.0; 6], &[3, 2]))
        .unwrap_err();
    assert!(e.message.contains("shape"), "{e}");
    let ints = NDArray::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    let e = ex.set_input_zero_copy("x", &ints).unwrap_err();
    assert!(e.message.contains("data type"), "{e}");
    let big = arr(&[0.0; 7], &[7]);
    let unaligned = big.view(&[2, 3], x.dtype(), 4).unwrap();
    let e = ex.set_input_zero_copy("x", &unaligned).unwrap_err();
    assert!(e.message.contains("aligned"), "{e}");
    let e = ex.set_input_zero_copy("nope", &x).unwrap_err();
    assert!(e.message.contains("nope"), "{e}");
    let e = ex.set_output_zero_copy(5, &out0).unwrap_err();
    assert!(e.message.contains("output index 5"), "{e}");
}

fn params_golden() -> Vec<u8> {
    // SaveParams({"a": int32[2] = [1, -1]}) computed by hand from the format.
    let mut b = Vec::new();
    b.extend_from_slice(&0xF7E58D4F05049CB7u64.to_le_bytes()); // kTVMNDArrayListMagic
    b.extend_from_slice(&0u64.to_le_bytes()); // reserved
    b.extend_from_slice(&1u64.to_le_bytes()); // one name
    b.extend_from_slice(&1u64.to_le_bytes()); // of length 1
    b.push(b'a');
    b.extend_from_slice(&1u64.to_le_bytes()); // one array
    b.extend_from_slice(&0xDD5E40F096B4A13Fu64.to_le_bytes()); // kTVMNDArrayMagic
    b.extend_from_slice(&0u64.to_le_bytes()); // reserved
    b.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]); // DLDevice cpu(0)
    b.extend_from_slice(&[1, 0, 0, 0]); // ndim 1
    b.extend_from_slice(&[0, 32, 1, 0]); // int32 (code 0, 32 bits, 1 lane)
    b.extend_from_slice(&2i64.to_le_bytes()); // shape [2]
    b.extend_from_slice(&8i64.to_le_bytes()); // 8 data bytes
    b.extend_from_slice(&[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    b
}

#[test]
fn params_save_load_round_trip_and_golden_bytes() {
    let a = NDArray::from_slice(&[1i32, -1], &[2]).unwrap();
    let mut m = MapObj::default();
    m.insert(StringObj::new_ref("a"), Some(a.as_object().clone()));
    let m = ObjectRef::new(m);
    let bytes = match global("runtime.SaveParams").call(&[obj(&m)]).unwrap() {
        RetValue::Bytes(b) => b,
        other => panic!("SaveParams returned {other:?}"),
    };
    assert_eq!(bytes, params_golden());

    let back = global("runtime.LoadParams")
        .call(&[ArgValue::Bytes(&bytes)])
        .unwrap()
        .into_object()
        .unwrap();
    let back = back.downcast_ref::<MapObj>().unwrap();
    let a2 = NDArray::from_object(map_get(back, "a").unwrap()).unwrap();
    assert_eq!(a2.to_vec::<i32>().unwrap(), vec![1, -1]);

    // Several arrays of several types, in order, through files.
    let p = vec![
        ("w".to_string(), arr(&W, &[2, 3])),
        (
            "b".to_string(),
            NDArray::from_slice(&[7u8, 8, 9], &[3, 1]).unwrap(),
        ),
        (
            "s".to_string(),
            NDArray::from_slice(&[2.5f64], &[]).unwrap(),
        ),
    ];
    let bytes = params::save_params(&p).unwrap();
    let dir = std::env::temp_dir().join(format!("tvmrs-params-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.params");
    let path_c = cs(path.to_str().unwrap());
    let pm = tvm_runtime::executor::factory::params_to_map(&p);
    global("runtime.SaveParamsToFile")
        .call(&[obj(&pm), ArgValue::Str(&path_c)])
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let loaded = global("runtime.LoadParamsFromFile")
        .call(&[ArgValue::Str(&path_c)])
        .unwrap()
        .into_object()
        .unwrap();
    let loaded = tvm_runtime::executor::factory::params_from_map(loaded).unwrap();
    assert_eq!(loaded.len(), 3);
    assert_eq!(loaded[1].0, "b");
    assert_eq!(loaded[1].1.shape(), &[3, 1]);
    assert_eq!(loaded[1].1.to_vec::<u8>().unwrap(), vec![7, 8, 9]);
    assert_eq!(loaded[2].1.to_vec::<f64>().unwrap(), vec![2.5]);
    std::fs::remove_dir_all(&dir).ok();

    // Corrupt input is an error, never a crash.
    for cut in [0, 7, 20, bytes.len() - 1] {
        assert!(params::load_params(&bytes[..cut]).is_err());
    }
    let e = global("runtime.LoadParams")
        .call(&[ArgValue::Bytes(b"not params at all")])
        .unwrap_err();
    assert!(
        e.message.contains("magic") || e.message.contains("truncated"),
        "{e}"
    );
    let e = global("runtime.LoadParamsFromFile")
        .call(&[ArgValue::Str(&cs("/nonexistent/p.params"))])
        .unwrap_err();
    assert!(e.message.contains("/nonexistent/p.params"), "{e}");

    // load_params into an executor: sets the input and hides it from the input info.
    let m = create_module(GRAPH, &test_lib());
    let wbytes = params::save_params(&[
        ("w".into(), arr(&W, &[2, 3])),
        ("unused".into(), arr(&[1.0], &[1])),
    ])
    .unwrap();
    m.function("load_params")
        .unwrap()
        .call(&[ArgValue::Bytes(&wbytes)])
        .unwrap();
    let ex = GraphExecutor::from_module(&m).unwrap();
    assert_eq!(ex.input(2).unwrap().to_vec::<f32>().unwrap(), W.to_vec());
    let names: Vec<String> = ex
        .input_info()
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["x", "y"]);

    // share_params: a second executor uses the first one's array for w.
    let m2 = create_module(GRAPH, &test_lib());
    m2.function("share_params")
        .unwrap()
        .call(&[obj(m.as_object()), ArgValue::Bytes(&wbytes)])
        .unwrap();
    let ex2 = GraphExecutor::from_module(&m2).unwrap();
    assert_eq!(
        ex2.input(2).unwrap().dltensor().data,
        ex.input(2).unwrap().dltensor().data
    );
    ex2.set_input("x", &arr(&X, &[2, 3])).unwrap();
    ex2.set_input("y", &arr(&Y, &[2, 3])).unwrap();
    ex2.run().unwrap();
    assert_eq!(
        ex2.output(0).unwrap().to_vec::<f32>().unwrap(),
        expected(&X, &Y, &W).0
    );
    let e = m2
        .function("share_params")
        .unwrap()
        .call(&[obj(test_lib().as_object()), ArgValue::Bytes(&wbytes)])
        .unwrap_err();
    assert!(e.message.contains("GraphExecutor"), "{e}");
}

#[test]
fn factory_create_serialise_and_load() {
    let lib = test_lib();
    let j = cs(GRAPH);
    let mut w = arr(&W, &[2, 3]);
    let (dflt, wn) = (cs("default"), cs("w"));
    let fac = global("tvm.graph_executor_factory.create")
        .call(&[
            ArgValue::Str(&j),
            obj(lib.as_object()),
            ArgValue::Str(&dflt),
            ArgValue::Str(&wn),
            (&w).into(),
        ])
        .unwrap();
    let fac = Module::from_object(fac.into_object().unwrap()).unwrap();
    assert_eq!(fac.type_key(), "GraphExecutorFactory");
    match fac.function("get_graph_json").unwrap().call(&[]).unwrap() {
        RetValue::Str(s) => assert_eq!(s, GRAPH),
        other => panic!("{other:?}"),
    }
    let gp = fac.function("get_graph_params").unwrap().call(&[]).unwrap();
    let gp = tvm_runtime::executor::factory::params_from_map(gp.into_object().unwrap()).unwrap();
    assert_eq!(gp[0].0, "w");

    // lib["default"](dev): an executor with the parameters set.
    let m = fac
        .function("default")
        .unwrap()
        .call(&[ArgValue::Device(DLDevice::CPU)])
        .unwrap();
    let ex = GraphExecutor::from_module(&Module::from_object(m.into_object().unwrap()).unwrap())
        .unwrap();
    ex.set_input("x", &arr(&X, &[2, 3])).unwrap();
    ex.set_input("y", &arr(&Y, &[2, 3])).unwrap();
    ex.run().unwrap();
    assert_eq!(
        ex.output(0).unwrap().to_vec::<f32>().unwrap(),
        expected(&X, &Y, &W).0
    );
    // As in the reference, factory parameters stay in the input info of the PackedFunc path...
    assert_eq!(ex.input_info().unwrap().len(), 3);
    // ...while the Rust constructor leaves them out.
    let ex = GraphExecutor::from_factory(&fac, &[DLDevice::CPU]).unwrap();
    assert_eq!(ex.input_info().unwrap().len(), 2);
    assert_eq!(ex.input(2).unwrap().to_vec::<f32>().unwrap(), W.to_vec());

    // remove_params: same graph and library, no parameters.
    let bare = fac.function("remove_params").unwrap().call(&[]).unwrap();
    let bare = Module::from_object(bare.into_object().unwrap()).unwrap();
    let gp = bare
        .function("get_graph_params")
        .unwrap()
        .call(&[])
        .unwrap();
    assert_eq!(
        gp.into_object()
            .unwrap()
            .downcast_ref::<MapObj>()
            .unwrap()
            .len(),
        0
    );

    // Serialise the payload and load it back through the blob loader.
    let node = FactoryNode::new(
        GRAPH.to_string(),
        vec![("w".into(), w.clone())],
        "default".into(),
    );
    let payload = node.save_to_binary().unwrap();
    let mut r = BlobReader::new(&payload, "test blob");
    let loaded = call_loader(
        &global("runtime.module.loadbinary_GraphExecutorFactory"),
        &mut r,
    )
    .unwrap();
    assert_eq!(r.remaining(), 0);
    let loaded = Module::from_object(loaded.into_object().unwrap()).unwrap();
    loaded.import(&lib).unwrap();
    let ex = GraphExecutor::from_factory(&loaded, &[DLDevice::CPU]).unwrap();
    ex.set_input("x", &arr(&X, &[2, 3])).unwrap();
    ex.set_input("y", &arr(&Y, &[2, 3])).unwrap();
    ex.run().unwrap();
    assert_eq!(
        ex.output(0).unwrap().to_vec::<f32>().unwrap(),
        expected(&X, &Y, &W).0
    );
    // Loaded parameters are used in place by every executor; set_input on one of them
    // copies on write, leaving the factory and the other executors as they were.
    let ex2 = GraphExecutor::from_factory(&loaded, &[DLDevice::CPU]).unwrap();
    let w2: Vec<f32> = W.iter().map(|v| v * 2.0).collect();
    ex2.set_input("w", &arr(&w2, &[2, 3])).unwrap();
    ex2.set_input("x", &arr(&X, &[2, 3])).unwrap();
    ex2.set_input("y", &arr(&Y, &[2, 3])).unwrap();
    ex2.run().unwrap();
    assert_eq!(
        ex2.output(0).unwrap().to_vec::<f32>().unwrap(),
        expected(&X, &Y, &w2).0
    );
    ex.run().unwrap();
    assert_eq!(
        ex.output(0).unwrap().to_vec::<f32>().unwrap(),
        expected(&X, &Y, &W).0
    );
    let gp = loaded
        .function("get_graph_params")
        .unwrap()
        .call(&[])
        .unwrap();
    let gp = tvm_runtime::executor::factory::params_from_map(gp.into_object().unwrap()).unwrap();
    assert_eq!(gp[0].1.to_vec::<f32>().unwrap(), W.to_vec());
    assert_eq!(ex.input(2).unwrap().to_vec::<f32>().unwrap(), W.to_vec());
    // A factory made from caller arrays copies them: changing the array later does not
    // reach an executor created before.
    let ex3 = GraphExecutor::from_factory(&fac, &[DLDevice::CPU]).unwrap();
    // The factory holds `w`: a safe write is refused.
    assert!(w.copy_from_slice(&w2).is_err());
    // SAFETY: nothing reads `w` during the copy (no executor is being created).
    unsafe { w.copy_from_slice_unchecked(&w2) }.unwrap();
    assert_eq!(ex3.input(2).unwrap().to_vec::<f32>().unwrap(), W.to_vec());

    // The old name loads too; truncated payloads fail cleanly.
    let mut r = BlobReader::new(&payload, "old");
    assert!(call_loader(
        &global("runtime.module.loadbinary_GraphRuntimeFactory"),
        &mut r
    )
    .is_ok());
    for cut in [0, 10, payload.len() / 2, payload.len() - 1] {
        let mut r = BlobReader::new(&payload[..cut], "cut");
        let e = call_loader(
            &global("runtime.module.loadbinary_GraphExecutorFactory"),
            &mut r,
        )
        .unwrap_err();
        assert!(e.message.contains("GraphExecutorFactory"), "{e}");
    }
    // A factory without its library cannot create executors.
    let orphan = Module::new(Box::new(FactoryNode::new(
        GRAPH.into(),
        vec![],
        "default".into(),
    )));
    let e = orphan
        .function("default")
        .unwrap()
        .call(&[ArgValue::Device(DLDevice::CPU)])
        .unwrap_err();
    assert!(e.message.contains("library"), "{e}");
}

#[test]
fn debug_executor() {
    let lib = test_lib();
    let j = cs(GRAPH);
    let m = global("tvm.graph_executor_debug.create")
        .call(&[
            ArgValue::Str(&j),
            obj(lib.as_object()),
            ArgValue::Int(1),
            ArgValue::Int(0),
        ])
        .unwrap();
    let m = Module::from_object(m.into_object().unwrap()).unwrap();
    let f = |n: &str| m.function(n).unwrap();
    let ex = GraphExecutor::from_module(&m).unwrap();
    ex.set_input("x", &arr(&X, &[2, 3])).unwrap();
    ex.set_input("y", &arr(&Y, &[2, 3])).unwrap();
    ex.set_input("w", &arr(&W, &[2, 3])).unwrap();

    // run_individual(number, repeat, min_repeat_ms, limit_zero, cooldown_ms, repeats_to_cooldown)
    let repeat = 3;
    let rv = f("run_individual")
        .call(&[1, repeat, 0, 100, 0, 1].map(ArgValue::Int))
        .unwrap();
    let RetValue::Bytes(b) = rv else {
        panic!("run_individual returned {rv:?}")
    };
    assert_eq!(b.len(), 8 + 7 * repeat as usize * 8);
    assert_eq!(i64::from_le_bytes(b[..8].try_into().unwrap()), 7);
    let times: Vec<f64> = b[8..]
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(
        times[..9].iter().all(|&t| t == 0.0),
        "input nodes take no time"
    );
    assert!(times.iter().all(|t| t.is_finite() && *t >= 0.0));
    let rv = f("run_individual_node")
        .call(&[3, 2, 2, 0, 100, 0, 1].map(ArgValue::Int))
        .unwrap();
    let RetValue::Bytes(b) = rv else { panic!() };
    assert_eq!(b.len(), 16);

    // execute_node / get_node_output, as GraphModuleDebug._run_per_layer does.
    for i in 0..7 {
        f("execute_node").call(&[ArgValue::Int(i)]).unwrap();
    }
    let r = nd(f("get_node_output")
        .call(&[ArgValue::Int(6), ArgValue::Int(0)])
        .unwrap());
    assert_eq!(r.to_vec::<f32>().unwrap(), expected(&X, &Y, &W).0);
    let e = f("get_node_output")
        .call(&[ArgValue::Int(4), ArgValue::Int(0)])
        .unwrap_err();
    assert!(e.message.contains("execute_node"), "{e}");
    f("execute_node").call(&[ArgValue::Int(4)]).unwrap();
    let r = nd(f("get_node_output")
        .call(&[ArgValue::Int(4), ArgValue::Int(0)])
        .unwrap());
    assert_eq!(r.to_vec::<f32>().unwrap(), expected(&X, &Y, &W).1);

    // debug_get_output: by index or name, into an array or returned.
    let out = NDArray::empty(&[2, 3], r.dtype(), DLDevice::CPU).unwrap();
    f("debug_get_output")
        .call(&[ArgValue::Str(&cs("r")), (&out).into()])
        .unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), expected(&X, &Y, &W).1);
    let got = nd(f("debug_get_output")
        .call(&[ArgValue::Int(3), ArgValue::Null])
        .unwrap());
    assert_eq!(got.shape(), &[2, 3]);

    // profile returns a table; profile_rpc the reference's JSON report (with `profiling`;
    // without it both are found, so that TVM's Python debug executor constructs, and fail
    // naming the feature).
    #[cfg(feature = "profiling")]
    {
        let RetValue::Str(table) = f("profile").call(&[ArgValue::Null]).unwrap() else {
            panic!()
        };
        assert!(table.contains("relu") && table.contains("add"), "{table}");
        let RetValue::Str(json) = f("profile_rpc").call(&[]).unwrap() else {
            panic!()
        };
        let j: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(j["calls"].as_array().unwrap().len(), 4);
        assert_eq!(j["calls"][0]["Hash"]["string"], "h1");
        assert!(j["device_metrics"]["cpu0"]["Duration (us)"]["microseconds"].is_number());

        // The Rust profile: per node and per op.
        let rep = ex.profile(5).unwrap();
        assert_eq!(rep.nodes.len(), 4);
        let add = rep.ops.iter().find(|o| o.name == "add").unwrap();
        assert_eq!(add.calls, 2);
        assert!(rep.ops.iter().map(|o| o.percent).sum::<f64>() <= 100.0 + 1e-6);
        assert!(rep.table().contains("Total"));
    }
    #[cfg(not(feature = "profiling"))]
    for name in ["profile", "profile_rpc"] {
        let e = f(name).call(&[]).unwrap_err();
        assert!(e.message.contains("built without `profiling`"), "{e}");
    }
    let per_node = ex
        .run_individual(&TimeEvalConfig {
            number: 1,
            repeat: 2,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(per_node.len(), 7);
    assert!(per_node.iter().all(|t| t.len() == 2));

    // Bad settings are refused as the reference refuses them.
    let e = f("run_individual")
        .call(&[0, 1, 0, 100, 0, 1].map(ArgValue::Int))
        .unwrap_err();
    assert!(e.message.contains("number"), "{e}");
    let e = f("execute_node").call(&[ArgValue::Int(99)]).unwrap_err();
    assert!(e.message.contains("99"), "{e}");
}

#[cfg(feature = "profiling")]
#[test]
fn time_evaluator() {
    let m = create_module(GRAPH, &test_lib());
    let run = cs("run");
    let empty = cs("");
    let args = |module: ArgValue<'static>| {
        vec![
            module,
            ArgValue::Int(1),
            ArgValue::Int(0),
            ArgValue::Int(3),   // number
            ArgValue::Int(4),   // repeat
            ArgValue::Int(0),   // min_repeat_ms
            ArgValue::Int(100), // limit_zero_time_iterations
            ArgValue::Int(0),   // cooldown_interval_ms
            ArgValue::Int(1),   // repeats_to_cooldown
            ArgValue::Int(0),   // cache_flush_bytes
        ]
    };
    let mut a = args(ArgValue::Null);
    a[0] = obj(m.as_object());
    a.insert(1, ArgValue::Str(&run));
    a.push(ArgValue::Str(&empty));
    let fe = global("runtime.RPCTimeEvaluator").call(&a).unwrap();
    let fe = Function::from_object(fe.into_object().unwrap()).unwrap();
    let RetValue::Bytes(b) = fe.call(&[]).unwrap() else {
        panic!()
    };
    assert_eq!(b.len(), 4 * 8);
    for c in b.chunks(8) {
        let t = f64::from_le_bytes(c.try_into().unwrap());
        assert!((0.0..1.0).contains(&t), "{t}");
    }

    // A global function (NULL module), with arguments forwarded, min_repeat_ms raising the
    // number of calls, cache flushing and a preprocessing function.
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    static PRE: AtomicUsize = AtomicUsize::new(0);
    tvm_runtime::packed_func::registry::register_rust("test.sleepy", |a, _rv| {
        assert_eq!(a.i64(0).unwrap(), 42);
        CALLS.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(200));
        Ok(())
    });
    tvm_runtime::packed_func::registry::register_rust("test.pre", |a, _rv| {
        assert_eq!(a.i64(0).unwrap(), 42);
        PRE.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    let name = cs("test.sleepy");
    let pre = cs("test.pre");
    let mut a = args(ArgValue::Null);
    a.insert(1, ArgValue::Str(&name));
    // After the name's insertion: 5 repeat, 6 min_repeat_ms, 10 cache_flush_bytes.
    a[5] = ArgValue::Int(2);
    a[6] = ArgValue::Int(5);
    a[10] = ArgValue::Int(4096);
    a.push(ArgValue::Str(&pre));
    let fe = global("runtime.RPCTimeEvaluator").call(&a).unwrap();
    let fe = Function::from_object(fe.into_object().unwrap()).unwrap();
    let RetValue::Bytes(b) = fe.call(&[ArgValue::Int(42)]).unwrap() else {
        panic!()
    };
    assert_eq!(b.len(), 16);
    assert!(
        CALLS.load(Ordering::SeqCst) > 1 + 2 * 3,
        "min_repeat_ms raised the number"
    );
    assert_eq!(PRE.load(Ordering::SeqCst), 2);
    for c in b.chunks(8) {
        let t = f64::from_le_bytes(c.try_into().unwrap());
        assert!(t >= 150e-6, "{t}");
    }

    // Unknown functions are named.
    let nosuch = cs("nosuch_fn");
    let mut a = args(ArgValue::Null);
    a[0] = obj(m.as_object());
    a.insert(1, ArgValue::Str(&nosuch));
    let e = global("runtime.RPCTimeEvaluator").call(&a).unwrap_err();
    assert!(e.message.contains("nosuch_fn"), "{e}");

    // The Rust API.
    let ex = GraphExecutor::from_module(&m).unwrap();
    let t = ex
        .benchmark(&TimeEvalConfig {
            number: 2,
            repeat: 3,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(t.len(), 3);
}

#[test]
fn errors_name_the_problem() {
    let lib = test_lib();
    let cpu = [DLDevice::CPU];
    let e = GraphExecutor::new("{not json", lib.clone(), &cpu).unwrap_err();
    assert!(e.message.contains("graph JSON"), "{e}");
    let e = GraphExecutor::new(
        &GRAPH.replace("\"relu\"", "\"nosuch_op\""),
        lib.clone(),
        &cpu,
    )
    .unwrap_err();
    assert!(
        e.message.contains("nosuch_op") && e.message.contains("'r'"),
        "{e}"
    );
    let e = GraphExecutor::new(GRAPH, lib.clone(), &[]).unwrap_err();
    assert!(e.message.contains("device"), "{e}");
    let e = GraphExecutor::new(GRAPH, lib.clone(), &[DLDevice::new(99, 0)]).unwrap_err();
    assert!(e.message.contains("99"), "{e}");
    let e = GraphExecutor::new(
        &GRAPH.replace("[0, 1, 2, 3, 4, 3, 3]", "[0, 1, 2, 3, 4, 3]"),
        lib.clone(),
        &cpu,
    )
    .unwrap_err();
    assert!(e.message.contains("storage_id"), "{e}");

    let ex = GraphExecutor::new(GRAPH, lib.clone(), &cpu).unwrap();
    let e = ex.set_input("nope", &arr(&X, &[2, 3])).unwrap_err();
    assert!(
        e.message.contains("'nope'") && e.message.contains("x, y, w"),
        "{e}"
    );
    let e = ex.set_input_index(3, &arr(&X, &[2, 3])).unwrap_err();
    assert!(e.message.contains("input index 3"), "{e}");
    let e = ex.set_input("x", &arr(&[1.0; 4], &[4])).unwrap_err();
    assert!(e.message.contains("set_input 'x'"), "{e}");
    let e = ex.output(2).unwrap_err();
    assert!(e.message.contains("output index 2"), "{e}");
    let e = ex
        .copy_output_to(0, &mut arr(&[0.0; 6], &[2, 3]))
        .unwrap_err();
    assert!(e.message.contains("shape"), "{e}");

    // Through the PackedFuncs.
    let m = create_module(GRAPH, &lib);
    let f = |n: &str| m.function(n).unwrap();
    let a = arr(&X, &[2, 3]);
    let e = f("set_input")
        .call(&[ArgValue::Str(&cs("bogus")), (&a).into()])
        .unwrap_err();
    assert!(e.message.contains("bogus"), "{e}");
    let e = f("set_input")
        .call(&[ArgValue::Int(-1), (&a).into()])
        .unwrap_err();
    assert!(e.message.contains("-1"), "{e}");
    let e = f("set_input")
        .call(&[ArgValue::Int(0), ArgValue::Int(5)])
        .unwrap_err();
    assert!(e.message.contains("NDArray"), "{e}");
    let e = f("get_input").call(&[ArgValue::Int(17)]).unwrap_err();
    assert!(e.message.contains("17"), "{e}");
    let e = f("get_output")
        .call(&[ArgValue::Str(&cs("ghost"))])
        .unwrap_err();
    assert!(e.message.contains("ghost"), "{e}");
    let e = f("load_params")
        .call(&[ArgValue::Bytes(b"garbage")])
        .unwrap_err();
    assert!(
        e.message.contains("truncated") || e.message.contains("magic"),
        "{e}"
    );
    let j = cs(GRAPH);
    let e = global("tvm.graph_executor.create")
        .call(&[ArgValue::Str(&j), obj(lib.as_object()), ArgValue::Int(1)])
        .unwrap_err();
    assert!(e.message.contains("device"), "{e}");

    // An op failure names the node and keeps the op's message.
    let failing = GRAPH.replace("\"relu\"", "\"fail\"");
    let ex = GraphExecutor::new(&failing, lib.clone(), &cpu).unwrap();
    let e = ex.run().unwrap_err();
    assert!(
        e.message.contains("always fails") && e.message.contains("'r'"),
        "{e}"
    );
    // The compiled-style op reports through the last error.
    let bad_arity = GRAPH.replace(
        "\"inputs\": [[4, 0, 0], [2, 0, 0]]",
        "\"inputs\": [[4, 0, 0]]",
    );
    let ex = GraphExecutor::new(&bad_arity, lib.clone(), &cpu).unwrap();
    let e = ex.run().unwrap_err();
    assert!(e.message.contains("add expects 3"), "{e}");

    // An op calling back into its own executor gets an error instead of a deadlock.
    let reenter = GRAPH.replace("\"relu\"", "\"reenter\"");
    let m = create_module(&reenter, &lib);
    REENTER.set(m.clone()).ok();
    let e = m.function("run").unwrap().call(&[]).unwrap_err();
    assert!(e.message.contains("re-entrant"), "{e}");
}

#[test]
fn linked_params_lookup() {
    // A lookup function (argument 2 of tvm.graph_executor.create) supplies storage 2 (w).
    let w = Arc::new(arr(&W, &[2, 3]));
    let w2 = w.clone();
    let lookup = Function::from_rust(move |a, rv| {
        if a.i64(1)? == 2 {
            *rv = w2.as_object().clone().into();
        }
        Ok(())
    });
    let lib = test_lib();
    let j = cs(GRAPH);
    let m = global("tvm.graph_executor.create")
        .call(&[
            ArgValue::Str(&j),
            obj(lib.as_object()),
            obj(lookup.as_object()),
            ArgValue::Int(1),
            ArgValue::Int(0),
        ])
        .unwrap();
    let ex = GraphExecutor::from_module(&Module::from_object(m.into_object().unwrap()).unwrap())
        .unwrap();
    assert_eq!(ex.input(2).unwrap().to_vec::<f32>().unwrap(), W.to_vec());
    assert_eq!(ex.input(2).unwrap().dltensor().data, w.dltensor().data);
}

// ---------------------------------------------------------------------------------------------
// A TVM-compiled model, when the fixtures have been built.

/// Reads the `.npy` members of an uncompressed `.npz` (what `np.savez` writes): name →
/// (dtype descr, shape, raw data).
/// One `.npy` member: dtype descr, shape, raw data.
type NpyArray = (String, Vec<i64>, Vec<u8>);

fn read_npz(bytes: &[u8]) -> Option<HashMap<String, NpyArray>> {
    let mut out = HashMap::new();
    let mut p = 0;
    while p + 30 <= bytes.len() && bytes[p..p + 4] == [0x50, 0x4b, 0x03, 0x04] {
        let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as usize;
        let method = u16_at(p + 8);
        let mut csize = u32_at(p + 18);
        let name_len = u16_at(p + 26);
        let extra_len = u16_at(p + 28);
        let name = String::from_utf8_lossy(&bytes[p + 30..p + 30 + name_len]).into_owned();
        let extra = &bytes[p + 30 + name_len..p + 30 + name_len + extra_len];
        if csize == 0xFFFF_FFFF && extra.len() >= 20 {
            // Zip64: the sizes are in the extra field.
            csize = u64::from_le_bytes(extra[12..20].try_into().unwrap()) as usize;
        }
        let start = p + 30 + name_len + extra_len;
        if method != 0 {
            return None;
        }
        let npy = bytes.get(start..start + csize)?;
        let hlen = u16::from_le_bytes([npy[8], npy[9]]) as usize;
        let header = String::from_utf8_lossy(&npy[10..10 + hlen]).into_owned();
        let descr = header
            .split("'descr': '")
            .nth(1)?
            .split('\'')
            .next()?
            .to_string();
        let shape_s = header.split("'shape': (").nth(1)?.split(')').next()?;
        let shape: Vec<i64> = shape_s
            .split(',')
            .filter_map(|d| d.trim().parse().ok())
            .collect();
        out.insert(
            name.trim_end_matches(".npy").to_string(),
            (descr, shape, npy[10 + hlen..].to_vec()),
        );
        p = start + csize;
    }
    Some(out)
}

#[test]
fn compiled_mlp_fixture_equals_the_reference() {
    let Some(dir) = fixture_dirs::dir() else {
        return;
    };
    let so = dir.join("mlp.so");
    if !skip::available(so.exists(), "TVMRT_REQUIRE_FIXTURES", || {
        format!("{} not built (scripts/build_fixtures.py)", so.display())
    }) {
        return;
    }
    let lib = tvm_runtime::module::load_from_file(so.to_str().unwrap(), "").unwrap();
    let ex = GraphExecutor::from_factory(&lib, &[DLDevice::CPU]).unwrap();
    let inputs = ex.input_info().unwrap();
    // The inputs the reference ran and its outputs (scripts/build_fixtures.py saves both).
    let npz_path = dir.join("mlp.npz");
    let npz = read_npz(&std::fs::read(&npz_path).unwrap())
        .unwrap_or_else(|| panic!("{}: not a readable .npz", npz_path.display()));
    for info in &inputs {
        let a = NDArray::empty(&info.shape, info.dtype, DLDevice::CPU).unwrap();
        let (_, shape, data) = npz
            .get(&info.name)
            .unwrap_or_else(|| panic!("mlp.npz has no input {}", info.name));
        assert_eq!(*shape, info.shape, "input {}", info.name);
        assert_eq!(data.len(), a.nbytes(), "input {}", info.name);
        // SAFETY: a fresh CPU array of exactly data.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), a.dltensor().data as *mut u8, data.len())
        };
        ex.set_input(&info.name, &a).unwrap();
    }
    ex.run().unwrap();
    let outs = ex.output_info();
    assert!(!outs.is_empty());
    for (i, info) in outs.iter().enumerate() {
        let o = ex.output(i).unwrap();
        assert_eq!(o.shape(), info.shape.as_slice());
        assert_eq!(o.dtype(), <f32 as tvm_runtime::Element>::DTYPE);
        let v = o.to_vec::<f32>().unwrap();
        let key = format!("output_{i}");
        let (_, _, data) = npz
            .get(&key)
            .unwrap_or_else(|| panic!("mlp.npz has no {key}"));
        let want: Vec<f32> = data
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(v.len(), want.len(), "{key}");
        for (a, b) in v.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-4 + 1e-4 * b.abs(), "{key}: {a} vs {b}");
        }
    }
}

#[test]
fn a_different_data_type_is_refused_not_reinterpreted() {
    let ex = GraphExecutor::new(GRAPH, test_lib(), &[DLDevice::CPU]).unwrap();
    // Same size in bytes as the float32 input: a bit-for-bit copy would "work".
    let ints = NDArray::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let check = |e: Error, call: &str, name: &str| {
        let m = &e.message;
        assert!(
            m.contains(call)
                && m.contains(name)
                && m.contains("int32")
                && m.contains("float32")
                && m.matches("[2, 3]").count() == 2,
            "{e}"
        );
    };
    check(ex.set_input("x", &ints).unwrap_err(), "set_input", "'x'");
    check(
        ex.set_input_index(1, &ints).unwrap_err(),
        "set_input",
        "'y'",
    );
    check(
        ex.set_input_zero_copy("w", &ints).unwrap_err(),
        "set_input_zero_copy",
        "'w'",
    );
    let ints32 = NDArray::from_slice(&[0i32; 6], &[3, 2]).unwrap();
    let e = ex.set_output_zero_copy(0, &ints32).unwrap_err();
    assert!(
        e.message.contains("set_output_zero_copy 0 ('reshape')")
            && e.message.contains("int32 (shape [3, 2])")
            && e.message.contains("float32 (shape [3, 2])"),
        "{e}"
    );
    // The input kept its value (nothing was copied).
    ex.set_input("x", &arr(&X, &[2, 3])).unwrap();
    assert!(ex.set_input("x", &ints).is_err());
    assert_eq!(ex.input(0).unwrap().to_vec::<f32>().unwrap(), X.to_vec());
    // Through the PackedFunc surface (what TVM's Python calls), with a bare DLTensor too.
    let m = create_module(GRAPH, &test_lib());
    let set = m.function("set_input").unwrap();
    let e = set
        .call(&[ArgValue::Str(&cs("x")), (&ints).into()])
        .unwrap_err();
    check(e, "set_input", "'x'");
    let e = set.call(&[ArgValue::Str(&cs("y")), dl(&ints)]).unwrap_err();
    check(e, "set_input", "'y'");
    let e = m
        .function("set_input_zero_copy")
        .unwrap()
        .call(&[ArgValue::Int(2), (&ints).into()])
        .unwrap_err();
    check(e, "set_input_zero_copy", "'w'");
}

#[test]
fn runs_with_data_on_the_null_device() {
    use tvm_runtime::device::null::{self, NULL_DEVICE};
    null::install();
    // Every entry on the null device, whose memory the test library's kernels can read.
    let graph = GRAPH.replace(
        "[\"list_int\", [1, 1, 1, 1, 1, 1, 1]]",
        &format!(
            "[\"list_int\", [{0}, {0}, {0}, {0}, {0}, {0}, {0}]]",
            null::DL_NULL
        ),
    );
    assert_ne!(graph, GRAPH);
    let ex = GraphExecutor::new(&graph, test_lib(), &[NULL_DEVICE]).unwrap();
    // CPU arrays are copied onto the device; device arrays are used in place.
    ex.set_input("x", &arr(&X, &[2, 3])).unwrap();
    let mut y = NDArray::empty(&[2, 3], arr(&Y, &[6]).dtype(), NULL_DEVICE).unwrap();
    y.copy_from_slice(&Y).unwrap();
    ex.set_input_zero_copy("y", &y).unwrap();
    ex.set_input("w", &arr(&W, &[2, 3])).unwrap();
    ex.run().unwrap();
    let (t, r) = expected(&X, &Y, &W);
    let out0 = ex.output(0).unwrap();
    assert_eq!(out0.device(), NULL_DEVICE);
    assert_eq!(out0.to_vec::<f32>().unwrap(), t);
    assert_eq!(ex.output(1).unwrap().to_vec::<f32>().unwrap(), r);
    let mut host = NDArray::empty(&[3, 2], out0.dtype(), DLDevice::CPU).unwrap();
    ex.copy_output_to(0, &mut host).unwrap();
    assert_eq!(host.to_vec::<f32>().unwrap(), t);
    // A CPU array handed over zero-copy is refused: the graph expects the null device.
    let e = ex.set_input_zero_copy("x", &arr(&X, &[2, 3])).unwrap_err();
    assert!(e.message.contains("null(0)"), "{e}");
}

#[test]
fn executor_is_found_behind_its_module() {
    let ex = GraphExecutor::new(GRAPH, test_lib(), &[DLDevice::CPU]).unwrap();
    let again = GraphExecutor::from_module(ex.module()).unwrap();
    again.set_input("x", &arr(&X, &[2, 3])).unwrap();
    assert_eq!(ex.input(0).unwrap().to_vec::<f32>().unwrap(), X.to_vec());
    // Through the global function Python uses, then back.
    let m = create_module(GRAPH, &test_lib());
    assert!(GraphExecutor::from_module(&m).is_ok());
    let e = GraphExecutor::from_module(&test_lib()).unwrap_err();
    assert!(e.message.contains("test_lib"), "{e}");
}
