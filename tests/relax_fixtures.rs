//! Relax VM executables built by scripts/build_fixtures.py (relax.build with the reference
//! compiler) run on our runtime and compared bit for bit with the outputs the reference
//! runtime produced, which the fixture script saved as NAME/KEY.npy. The VM is driven the way
//! TVM's Python `VirtualMachine` drives it: `vm_load_executable`, `vm_initialization`, then
//! the function by name. Skipped, with a message, when the fixtures have not been built (a
//! failure under TVMRT_REQUIRE_FIXTURES / TVMRT_REQUIRE_MODELS).
#![cfg(feature = "relax")]

#[path = "common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/skip.rs"]
mod skip;

use serde_json::Value;
use std::path::{Path, PathBuf};
use tvm_runtime::object::containers::{ArrayObj, ShapeTupleObj};
use tvm_runtime::object::ObjectRef;
use tvm_runtime::{ArgValue, DLDataType, Module, NDArray, RetValue};

/// A `.npy` file: numpy's dtype string, shape and raw little-endian bytes.
struct Npy {
    descr: String,
    shape: Vec<i64>,
    data: Vec<u8>,
}

fn read_npy(path: &Path) -> Npy {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        b.starts_with(b"\x93NUMPY"),
        "{}: not a .npy file",
        path.display()
    );
    let (hlen, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    let field = |k: &str| -> &str {
        let i = header.find(k).unwrap_or_else(|| panic!("{header}: no {k}")) + k.len();
        header[i..].trim_start_matches([':', ' '])
    };
    let descr = field("'descr'")[1..]
        .split('\'')
        .next()
        .unwrap()
        .to_string();
    assert!(field("'fortran_order'").starts_with("False"), "{header}");
    let dims = field("'shape'");
    let dims = &dims[1..dims.find(')').unwrap()];
    let shape = dims
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    Npy {
        descr,
        shape,
        data: b[start + hlen..].to_vec(),
    }
}

/// TVM's data type of a numpy dtype string.
fn dtype_of(descr: &str) -> DLDataType {
    let (code, bits) = match descr {
        "<f4" => (2, 32),
        "<f8" => (2, 64),
        "<i4" => (0, 32),
        "<i8" => (0, 64),
        "|b1" => (1, 1),
        other => panic!("no test support for numpy dtype {other}"),
    };
    DLDataType::new(code, bits, 1)
}

fn u8_type() -> DLDataType {
    DLDataType::new(1, 8, 1)
}

/// An NDArray holding a .npy file's data with its dtype and shape.
fn to_ndarray(n: &Npy) -> NDArray {
    let mut a = NDArray::empty(&n.shape, dtype_of(&n.descr), tvm_runtime::DLDevice::CPU).unwrap();
    assert_eq!(a.nbytes(), n.data.len());
    a.copy_from_bytes(&n.data).unwrap();
    a
}

/// An NDArray's bytes.
fn bytes_of(a: &NDArray) -> Vec<u8> {
    a.view(&[a.nbytes() as i64], u8_type(), 0)
        .unwrap()
        .to_vec::<u8>()
        .unwrap()
}

fn manifest(d: &Path) -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(d.join("manifest.json")).unwrap();
    match serde_json::from_str(&text).unwrap() {
        Value::Object(m) => m,
        _ => panic!("manifest.json is not an object"),
    }
}

/// The fixture's manifest entry, or None (skipped through tests/common/skip.rs) when it was
/// not built; a failure when TVMRT_REQUIRE_FIXTURES is set.
fn entry(d: &Path, name: &str) -> Option<Value> {
    let e = manifest(d).get(name).cloned();
    skip::available(e.is_some(), "TVMRT_REQUIRE_FIXTURES", || {
        format!(
            "{name} is not in {}/manifest.json (rebuild with scripts/build_fixtures.py)",
            d.display()
        )
    })
    .then_some(e)
    .flatten()
}

/// Loads the executable and makes a VM on the CPU with the pooled allocator, as Python does.
fn load_vm(d: &Path, e: &Value) -> Module {
    let lib = Module::load(d.join(e["file"].as_str().unwrap()).to_str().unwrap()).unwrap();
    assert_eq!(lib.type_key(), e["type_key"].as_str().unwrap());
    let vm = match lib.function("vm_load_executable").unwrap().call(&[]) {
        Ok(RetValue::Object(o)) => Module::from_object(o).unwrap(),
        other => panic!("vm_load_executable returned {other:?}"),
    };
    vm.function("vm_initialization")
        .unwrap()
        .call(&[ArgValue::Int(1), ArgValue::Int(0), ArgValue::Int(2)])
        .unwrap();
    vm
}

/// Checks a returned value against the manifest's `result` (a key: a tensor; {"shape": key}:
/// a ShapeTuple; a list: a tuple), bit for bit.
fn check_value(where_: &str, res: &Value, got: &ObjectRef, dir: &Path) {
    match res {
        Value::Array(fields) => {
            let arr = got
                .downcast_ref::<ArrayObj>()
                .unwrap_or_else(|| panic!("{where_}: {} is not a tuple", got.type_key()));
            assert_eq!(arr.items.len(), fields.len(), "{where_}: tuple size");
            for (i, (r, v)) in fields.iter().zip(&arr.items).enumerate() {
                let v = v
                    .as_ref()
                    .unwrap_or_else(|| panic!("{where_}[{i}] is null"));
                check_value(&format!("{where_}[{i}]"), r, v, dir);
            }
        }
        Value::Object(m) => {
            let key = m["shape"].as_str().unwrap();
            let want = read_npy(&dir.join(format!("{key}.npy")));
            let s = got
                .downcast_ref::<ShapeTupleObj>()
                .unwrap_or_else(|| panic!("{where_}: {} is not a shape", got.type_key()));
            let want: Vec<i64> = want
                .data
                .chunks(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(s.dims(), &want[..], "{where_}");
        }
        Value::String(key) => {
            let want = read_npy(&dir.join(format!("{key}.npy")));
            let a = NDArray::from_object(got.clone())
                .unwrap_or_else(|e| panic!("{where_}: {} is not a tensor: {e}", got.type_key()));
            assert_eq!(a.dtype(), dtype_of(&want.descr), "{where_}: dtype");
            assert_eq!(a.shape(), &want.shape[..], "{where_}: shape");
            assert!(
                bytes_of(&a) == want.data,
                "{where_}: {key} differs from the reference"
            );
        }
        other => panic!("bad result spec {other}"),
    }
}

/// Runs every call the manifest lists for a Relax fixture, `repeat` times each on one VM.
fn run_fixture(d: &Path, name: &str) {
    let Some(e) = entry(d, name) else { return };
    assert_eq!(e["kind"], "relax");
    let npy: PathBuf = d.join(e["npy_dir"].as_str().unwrap());
    let vm = load_vm(d, &e);
    for c in e["calls"].as_array().unwrap() {
        let func = c["function"].as_str().unwrap();
        let f = vm.function(func).unwrap();
        let keys: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        let inputs: Vec<Npy> = keys
            .iter()
            .map(|k| read_npy(&npy.join(format!("{k}.npy"))))
            .collect();
        for _ in 0..c["repeat"].as_u64().unwrap() {
            let arrays: Vec<NDArray> = inputs.iter().map(to_ndarray).collect();
            let args: Vec<ArgValue> = arrays.iter().map(ArgValue::from).collect();
            let got = match f.call(&args) {
                Ok(RetValue::Object(o)) => o,
                other => panic!("{name}.{func} returned {other:?}"),
            };
            check_value(&format!("{name}.{func}"), &c["result"], &got, &npy);
            for (k, (a, n)) in keys.iter().zip(arrays.iter().zip(&inputs)) {
                assert!(bytes_of(a) == n.data, "{name}.{func} changed its input {k}");
            }
        }
    }
}

#[test]
fn relax_mlp_static_and_dynamic_batch() {
    let Some(d) = fixture_dirs::dir() else { return };
    run_fixture(&d, "relax_mlp");
    run_fixture(&d, "relax_mlp_dyn");
}

#[test]
fn relax_if_closure_and_tuple_output() {
    let Some(d) = fixture_dirs::dir() else { return };
    run_fixture(&d, "relax_control");
}

#[test]
fn relax_several_functions() {
    let Some(d) = fixture_dirs::dir() else { return };
    run_fixture(&d, "relax_multi");
}

#[test]
fn relax_hundred_kernel_calls() {
    let Some(d) = fixture_dirs::dir() else { return };
    run_fixture(&d, "relax_chain");
}

#[test]
fn relax_resnet18_and_mobilenet() {
    for name in [
        "relax_resnet18",
        "relax_mobilenet",
        "relax_resnet18_par",
        "relax_mobilenet_par",
    ] {
        if let Some(lib) = fixture_dirs::model(name) {
            run_fixture(lib.parent().unwrap(), name);
        }
    }
}
