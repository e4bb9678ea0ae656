//! TVM-compiled fixtures (built by scripts/build_fixtures.py with the reference compiler) run
//! through the C ABI and checked against numpy's results. Skipped, with a message, when the
//! fixtures have not been built.
#![allow(
    clippy::undocumented_unsafe_blocks,
    reason = "this file calls the C ABI as a C client would; every call passes pointers to locals of the test itself"
)]

#[path = "common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/skip.rs"]
mod skip;

use fixture_dirs::{dir, models_dir};
use std::ffi::{c_int, c_void, CString};
use tvm_runtime::c_api::{func::*, module::*};
use tvm_runtime::packed_func::registry;
use tvm_runtime::packed_func::types::{type_code as tc, TVMValue};
use tvm_runtime::{Element, Module, NDArray, RetValue};

struct Npz(npyz::npz::NpzArchive<std::io::BufReader<std::fs::File>>);

impl Npz {
    fn open(d: &std::path::Path, name: &str) -> Npz {
        Npz(npyz::npz::NpzArchive::open(d.join(format!("{name}.npz"))).unwrap())
    }
    fn get<T: npyz::Deserialize>(&mut self, key: &str) -> (Vec<T>, Vec<i64>) {
        let npy = self
            .0
            .by_name(key)
            .unwrap()
            .unwrap_or_else(|| panic!("no {key}"));
        let shape = npy.shape().iter().map(|&d| d as i64).collect();
        (npy.into_vec::<T>().unwrap(), shape)
    }
    fn array<T: npyz::Deserialize + Element>(&mut self, key: &str) -> NDArray {
        let (v, s) = self.get::<T>(key);
        NDArray::from_slice(&v, &s).unwrap()
    }
}

/// Loads a library and one function through the C ABI.
fn load(d: &std::path::Path, file: &str, func: &str) -> (*mut c_void, *mut c_void) {
    let path = CString::new(d.join(file).to_str().unwrap()).unwrap();
    let mut m = std::ptr::null_mut();
    assert_eq!(
        unsafe { TVMModLoadFromFile(path.as_ptr(), c"so".as_ptr(), &mut m) },
        0
    );
    let name = CString::new(func).unwrap();
    let mut f = std::ptr::null_mut();
    assert_eq!(unsafe { TVMModGetFunction(m, name.as_ptr(), 0, &mut f) }, 0);
    assert!(!f.is_null(), "{file} has no {func}");
    (m, f)
}

/// Calls with NDArray handles through TVMFuncCall.
fn call(f: *mut c_void, arrays: &[&NDArray]) -> c_int {
    let mut vals: Vec<TVMValue> = arrays
        .iter()
        .map(|a| TVMValue {
            v_handle: a.handle() as *mut c_void,
        })
        .collect();
    let mut codes: Vec<c_int> = vec![tc::NDARRAY_HANDLE; arrays.len()];
    let mut rv = TVMValue::default();
    let mut rc = 0;
    unsafe {
        TVMFuncCall(
            f,
            vals.as_mut_ptr(),
            codes.as_mut_ptr(),
            vals.len() as c_int,
            &mut rv,
            &mut rc,
        )
    }
}

fn close(m: *mut c_void, f: *mut c_void) {
    unsafe {
        assert_eq!(TVMFuncFree(f), 0);
        assert_eq!(TVMModFree(m), 0);
    }
}

fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn elementwise_static_and_call_errors() {
    let Some(d) = dir() else { return };
    for name in ["add_static", "add_one"] {
        let (m, f) = load(&d, &format!("{name}.so"), "myadd");
        let mut e = Npz::open(&d, name);
        let (a, b) = (e.array::<f32>("A"), e.array::<f32>("B"));
        let (want, shape) = e.get::<f32>("C");
        let c = NDArray::empty(&shape, a.dtype(), a.device()).unwrap();
        assert_eq!(call(f, &[&a, &b, &c]), 0);
        assert_close(&c.to_vec::<f32>().unwrap(), &want, 0.0);
        // Wrong argument count: the compiled code's own check fails cleanly.
        assert_eq!(call(f, &[&a, &b]), -1);
        close(m, f);
    }
}

#[test]
fn dynamic_shapes_several_dtypes_in_one_module() {
    let Some(d) = dir() else { return };
    let lib = Module::load(d.join("add_dynamic.so").to_str().unwrap()).unwrap();
    let mut e = Npz::open(&d, "add_dynamic");
    macro_rules! check {
        ($t:ty, $dt:expr, $sfx:expr) => {{
            let f = lib.function(&format!("add_{}", $dt)).unwrap();
            let a = e.array::<$t>(&format!("{}_A{}", $dt, $sfx));
            let b = e.array::<$t>(&format!("{}_B{}", $dt, $sfx));
            let (want, shape) = e.get::<$t>(&format!("{}_C{}", $dt, $sfx));
            let dtype = tvm_runtime::dtype_from_string($dt).unwrap();
            let (a, b) = (
                a.view(&shape, dtype, 0).unwrap(),
                b.view(&shape, dtype, 0).unwrap(),
            );
            let c = NDArray::empty(&shape, dtype, a.device()).unwrap();
            f.call(&[(&a).into(), (&b).into(), (&c).into()]).unwrap();
            let got = c
                .view(&shape, <$t as Element>::DTYPE, 0)
                .unwrap()
                .to_vec::<$t>()
                .unwrap();
            assert_eq!(got, want, "add_{}", $dt);
        }};
    }
    check!(f32, "float32", "");
    check!(f64, "float64", "");
    check!(i32, "int32", "");
    check!(i8, "int8", "");
    check!(u8, "uint8", "");
    check!(u16, "float16", "_bits");
}

#[test]
fn parallel_and_workspace_kernels() {
    let Some(d) = dir() else { return };
    let (m, f) = load(&d, "parallel.so", "scale_shift");
    let mut e = Npz::open(&d, "parallel");
    let a = e.array::<f32>("A");
    let (want, shape) = e.get::<f32>("B");
    let b = NDArray::empty(&shape, a.dtype(), a.device()).unwrap();
    for _ in 0..20 {
        assert_eq!(call(f, &[&a, &b]), 0);
    }
    assert_close(&b.to_vec::<f32>().unwrap(), &want, 0.0);
    close(m, f);

    // Two parallel loops in one launch joined by TVMBackendParallelBarrier: the second loop
    // reads values other tasks wrote in the first, so a barrier that does not wait shows up
    // as wrong sums.
    let (m, f) = load(&d, "parallel.so", "parallel_barrier");
    let (uses, _) = e.get::<bool>("uses_parallel_barrier");
    assert!(uses[0], "the fixture must call TVMBackendParallelBarrier");
    let x = e.array::<f32>("barrier_A");
    let (want_b, shape) = e.get::<f32>("barrier_B");
    let (want_c, _) = e.get::<f32>("barrier_C");
    for _ in 0..50 {
        let b = NDArray::empty(&shape, x.dtype(), x.device()).unwrap();
        let c = NDArray::empty(&shape, x.dtype(), x.device()).unwrap();
        assert_eq!(call(f, &[&x, &b, &c]), 0);
        assert_close(&b.to_vec::<f32>().unwrap(), &want_b, 0.0);
        assert_close(&c.to_vec::<f32>().unwrap(), &want_c, 0.0);
    }
    close(m, f);

    let (m, f) = load(&d, "workspace.so", "matmul_plus_one");
    let mut e = Npz::open(&d, "workspace");
    let (uses, _) = e.get::<bool>("uses_workspace");
    assert!(
        uses[0],
        "the fixture must exercise TVMBackendAllocWorkspace"
    );
    let (x, y) = (e.array::<f32>("X"), e.array::<f32>("Y"));
    let (want, shape) = e.get::<f32>("Z");
    let z = NDArray::empty(&shape, x.dtype(), x.device()).unwrap();
    assert_eq!(call(f, &[&x, &y, &z]), 0);
    assert_close(&z.to_vec::<f32>().unwrap(), &want, 1e-4);
    close(m, f);
}

#[test]
fn kernel_calls_a_registered_packed_function() {
    let Some(d) = dir() else { return };
    registry::register_rust("tvmrt_test.add_scalar", |args, _rv| {
        let a = args.get(0)?;
        let b = args.get(1)?;
        let c = args.f64(2)? as f32;
        let (tvm_runtime::ArgValue::DLTensor(a), tvm_runtime::ArgValue::DLTensor(b)) = (a, b)
        else {
            return Err(tvm_runtime::Error::type_error("expected two tensors"));
        };
        // SAFETY: the compiled caller passes valid float32 tensors of equal size.
        unsafe {
            let (a, b) = (a.as_ptr(), b.as_ptr());
            let n = tvm_runtime::ndarray::tensor_nbytes(&*a)? / 4;
            let src = std::slice::from_raw_parts((*a).data as *const f32, n);
            let dst = std::slice::from_raw_parts_mut((*b).data as *mut f32, n);
            for i in 0..n {
                dst[i] = src[i] + c;
            }
        }
        Ok(())
    });
    let (m, f) = load(&d, "packed_call.so", "call_packed");
    let mut e = Npz::open(&d, "packed_call");
    let a = e.array::<f32>("A");
    let (want, shape) = e.get::<f32>("B");
    let b = NDArray::empty(&shape, a.dtype(), a.device()).unwrap();
    assert_eq!(call(f, &[&a, &b]), 0);
    assert_close(&b.to_vec::<f32>().unwrap(), &want, 0.0);
    close(m, f);
}

/// Runs a graph library from the fixtures on the CPU with the input in its .npz; returns our
/// output 0, the reference runtime's (from the .npz) and the output shape.
fn run_graph_fixture(d: &std::path::Path, name: &str) -> (Vec<f32>, Vec<f32>, Vec<i64>) {
    let lib = Module::load(d.join(format!("{name}.so")).to_str().unwrap()).unwrap();
    let create = lib.function("default").unwrap();
    let gmod = Module::from_object(
        create
            .call(&[tvm_runtime::ArgValue::Device(tvm_runtime::DLDevice::CPU)])
            .unwrap()
            .into_object()
            .unwrap(),
    )
    .unwrap();
    let mut e = Npz::open(d, name);
    let x = e.array::<f32>("data");
    gmod.function("set_input")
        .unwrap()
        .call(&[tvm_runtime::ArgValue::Str(c"data"), (&x).into()])
        .unwrap();
    gmod.function("run").unwrap().call(&[]).unwrap();
    let out = gmod
        .function("get_output")
        .unwrap()
        .call(&[tvm_runtime::ArgValue::Int(0)])
        .unwrap();
    let RetValue::Object(o) = out else {
        panic!("get_output gave {out:?}")
    };
    let y = NDArray::from_object(o).unwrap();
    let (want, shape) = e.get::<f32>("output_0");
    assert_eq!(y.shape(), &shape[..], "{name}: output shape");
    (y.to_vec::<f32>().unwrap(), want, shape)
}

#[test]
fn graph_models_match_the_reference_runtime() {
    let Some(d) = dir() else { return };
    for name in ["mlp", "mlp_linked", "conv"] {
        let (got, want, _) = run_graph_fixture(&d, name);
        assert_close(&got, &want, 1e-5);
    }
}

#[test]
fn resnet18_and_mobilenet_equal_the_reference_runtime() {
    let Some(d) = models_dir() else { return };
    for name in ["resnet18", "mobilenet"] {
        let (got, want, shape) = run_graph_fixture(&d, name);
        assert_eq!(shape, [1, 1000], "{name}");
        // Same compiled kernels on the same input: the same bits as the reference runtime.
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{name}: element {i}: {g} vs {w}");
        }
    }
}

#[test]
fn bad_libraries_are_errors_not_crashes() {
    let Some(d) = dir() else { return };
    // An ELF without TVM symbols: the C library this process runs on.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .expect("the process maps a C library");
    let libc_path = CString::new(libc).unwrap();
    let mut m = std::ptr::null_mut();
    assert_eq!(
        unsafe { TVMModLoadFromFile(libc_path.as_ptr(), c"so".as_ptr(), &mut m) },
        -1,
        "{libc} loaded as a TVM module"
    );
    // A missing function is NULL, not an error.
    let (m, f) = load(&d, "add_static.so", "myadd");
    let mut g = std::ptr::dangling_mut::<c_void>();
    assert_eq!(
        unsafe { TVMModGetFunction(m, c"nope".as_ptr(), 1, &mut g) },
        0
    );
    assert!(g.is_null());
    close(m, f);
}
