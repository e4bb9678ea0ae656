//! Libraries compiled by TVM v0.27 (the tvm-ffi ABI, built by scripts/build_ffi_fixtures.py)
//! loaded and called through the classic C ABI, compared with TVM 0.27's own outputs.
//! Skipped, with a message, when the fixtures were not built, unless TVMRT_REQUIRE_FIXTURES is
//! set (as the test command does): then it fails.
#![cfg(all(feature = "tvm-ffi", feature = "relax"))]

#[path = "common/skip.rs"]
mod skip;

use std::ffi::{c_int, c_void, CString};
use std::path::PathBuf;
use tvm_runtime::c_api::error::TVMGetLastError;
use tvm_runtime::c_api::func::{TVMFuncCall, TVMFuncFree};
use tvm_runtime::c_api::module::{TVMModFree, TVMModGetFunction, TVMModLoadFromFile};
use tvm_runtime::packed_func::registry;
use tvm_runtime::packed_func::types::{type_code as tc, TVMValue};
use tvm_runtime::{Element, NDArray};

/// The tvm-ffi fixture directory, or None (skipped through tests/common/skip.rs; a failure
/// under TVMRT_REQUIRE_FIXTURES) when it was not built.
fn fixtures() -> Option<PathBuf> {
    let base = std::env::var("TVMRT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tvm-runtime-rs")
        });
    // Compiled for x86-64; another target's would be `ffi_fixtures-<arch>`.
    let d = if cfg!(target_arch = "x86_64") {
        base.join("ffi_fixtures")
    } else {
        base.join(format!("ffi_fixtures-{}", std::env::consts::ARCH))
    };
    let ok = d.join("manifest.json").exists();
    skip::available(ok, "TVMRT_REQUIRE_FIXTURES", || {
        format!(
            "tvm-ffi fixtures not built: {} has no manifest.json (run scripts/build_ffi_fixtures.py)",
            d.display()
        )
    })
    .then_some(d)
}

struct Npz(npyz::npz::NpzArchive<std::io::BufReader<std::fs::File>>);

impl Npz {
    fn open(d: &std::path::Path, name: &str) -> Npz {
        Npz(npyz::npz::NpzArchive::open(d.join(format!("{name}.npz"))).unwrap())
    }
    fn get(&mut self, key: &str) -> (Vec<f32>, Vec<i64>) {
        let npy = self
            .0
            .by_name(key)
            .unwrap()
            .unwrap_or_else(|| panic!("no {key}"));
        let shape = npy.shape().iter().map(|&d| d as i64).collect();
        (npy.into_vec::<f32>().unwrap(), shape)
    }
    fn array(&mut self, key: &str) -> NDArray {
        let (v, s) = self.get(key);
        NDArray::from_slice(&v, &s).unwrap()
    }
    fn zeros_like(&mut self, key: &str) -> NDArray {
        let (v, s) = self.get(key);
        NDArray::from_slice(&vec![0f32; v.len()], &s).unwrap()
    }
}

struct Loaded {
    m: *mut c_void,
    f: *mut c_void,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: handles we own.
        unsafe {
            assert_eq!(TVMFuncFree(self.f), 0);
            assert_eq!(TVMModFree(self.m), 0);
        }
    }
}

fn last_error() -> String {
    // SAFETY: the runtime's thread-local message.
    unsafe { std::ffi::CStr::from_ptr(TVMGetLastError()) }
        .to_string_lossy()
        .into_owned()
}

fn load(d: &std::path::Path, file: &str, func: &str) -> Loaded {
    let path = CString::new(d.join(file).to_str().unwrap()).unwrap();
    let mut m = std::ptr::null_mut();
    // SAFETY: valid strings and out-pointer.
    let rc = unsafe { TVMModLoadFromFile(path.as_ptr(), c"so".as_ptr(), &mut m) };
    assert_eq!(rc, 0, "{}", last_error());
    let name = CString::new(func).unwrap();
    let mut f = std::ptr::null_mut();
    // SAFETY: a module handle we own.
    assert_eq!(unsafe { TVMModGetFunction(m, name.as_ptr(), 0, &mut f) }, 0);
    assert!(!f.is_null(), "{file} has no {func}");
    Loaded { m, f }
}

/// Calls through TVMFuncCall with the given handles and type codes.
fn call(f: *mut c_void, args: &[(*mut c_void, c_int)]) -> c_int {
    let mut vals: Vec<TVMValue> = args.iter().map(|a| TVMValue { v_handle: a.0 }).collect();
    let mut codes: Vec<c_int> = args.iter().map(|a| a.1).collect();
    let mut rv = TVMValue::default();
    let mut rc = 0;
    // SAFETY: arrays of `len` valid entries.
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

fn nd(a: &NDArray) -> (*mut c_void, c_int) {
    (a.handle() as *mut c_void, tc::NDARRAY_HANDLE)
}

fn dl(a: &NDArray) -> (*mut c_void, c_int) {
    (a.handle() as *mut c_void, tc::DLTENSOR_HANDLE)
}

fn same<T: Element + PartialEq + std::fmt::Debug>(a: &NDArray, expect: &[T]) {
    assert_eq!(a.to_vec::<T>().unwrap(), expect);
}

#[test]
fn te_kernel_with_symbolic_extent() {
    let Some(d) = fixtures() else { return };
    let mut z = Npz::open(&d, "add");
    let (x, y, out) = (z.array("x"), z.array("y"), z.zeros_like("z"));
    let l = load(&d, "add.so", "add");
    assert_eq!(
        call(l.f, &[nd(&x), dl(&y), nd(&out)]),
        0,
        "{}",
        last_error()
    );
    same(&out, &z.get("z").0);
    // The single-function library's entry.
    let main = load(&d, "add.so", "__tvm_main__");
    let out2 = z.zeros_like("z");
    assert_eq!(
        call(main.f, &[nd(&x), nd(&y), nd(&out2)]),
        0,
        "{}",
        last_error()
    );
    same(&out2, &z.get("z").0);
}

#[test]
fn kernel_argument_errors_are_classic_errors_with_tvms_message() {
    let Some(d) = fixtures() else { return };
    let l = load(&d, "add.so", "add");
    let a = NDArray::from_slice(&[1f32; 4], &[4]).unwrap();
    let b = NDArray::from_slice(&[1f32; 5], &[5]).unwrap();
    assert_eq!(call(l.f, &[nd(&a), nd(&a), nd(&b)]), -1);
    let e = last_error();
    assert!(e.starts_with("ValueError: Mismatched"), "{e}");
    assert!(e.contains("add(A: Tensor([n], float32)"), "{e}");
    // A 2-d tensor for a 1-d parameter, and an integer for a tensor.
    let m = NDArray::from_slice(&[1f32; 4], &[2, 2]).unwrap();
    assert_eq!(call(l.f, &[nd(&m), nd(&a), nd(&a)]), -1);
    assert!(last_error().contains("ndim"), "{}", last_error());
    assert_eq!(
        call(l.f, &[(std::ptr::null_mut(), tc::INT), nd(&a), nd(&a)]),
        -1
    );
    // Too few arguments.
    assert_eq!(call(l.f, &[nd(&a)]), -1);
    assert!(
        last_error().starts_with("TypeError: Expected 3 arguments"),
        "{}",
        last_error()
    );
}

#[test]
fn parallel_kernel_with_workspace() {
    let Some(d) = fixtures() else { return };
    let mut z = Npz::open(&d, "kernels");
    let (a, b) = (z.array("wa"), z.zeros_like("wb"));
    let l = load(&d, "kernels.so", "par_ws");
    for _ in 0..20 {
        assert_eq!(call(l.f, &[nd(&a), nd(&b)]), 0, "{}", last_error());
        same(&b, &z.get("wb").0);
    }
}

// When set, the host callback fails (a kernel caches the handle it looked up, so the
// behaviour is switched rather than the registration). Per thread: the callback runs on the
// calling thread, and tests run in parallel.
thread_local! {
    static REFUSE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn register_scale() {
    registry::register_rust("tvmrt_test.ffi_scale", |a, _rv| {
        if REFUSE.with(|r| r.get()) {
            return Err(tvm_runtime::Error::value("the host callback refused"));
        }
        let (src, dst) = (a.handle(0)? as *const f32, a.handle(1)? as *mut f32);
        let (n, scale) = (a.i64(2)? as usize, a.f64(3)? as f32);
        for i in 0..n {
            // SAFETY: the kernel passes two buffers of `n` floats.
            unsafe { *dst.add(i) = *src.add(i) * scale };
        }
        Ok(())
    });
}

#[test]
fn kernel_calls_a_packed_function_of_the_host() {
    let Some(d) = fixtures() else { return };
    register_scale();
    let mut z = Npz::open(&d, "kernels");
    let (a, b) = (z.array("ca"), z.zeros_like("cb"));
    let l = load(&d, "kernels.so", "callpk");
    assert_eq!(call(l.f, &[nd(&a), nd(&b)]), 0, "{}", last_error());
    same(&b, &z.get("cb").0);
}

#[test]
fn a_failing_callee_fails_the_kernel_with_its_message() {
    let Some(d) = fixtures() else { return };
    register_scale();
    let mut z = Npz::open(&d, "kernels");
    let (a, b) = (z.array("ca"), z.zeros_like("cb"));
    let l = load(&d, "kernels.so", "callpk");
    REFUSE.with(|r| r.set(true));
    let rc = call(l.f, &[nd(&a), nd(&b)]);
    REFUSE.with(|r| r.set(false));
    assert_eq!(rc, -1);
    assert!(
        last_error().contains("the host callback refused"),
        "{}",
        last_error()
    );
    assert_eq!(call(l.f, &[nd(&a), nd(&b)]), 0, "{}", last_error());
    same(&b, &z.get("cb").0);
}

/// Builds a shared library from C source in a temporary directory.
fn build_so(name: &str, src: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tvmrt_ffi_{}_{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let so = dir.join(format!("{name}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = std::process::Command::new(cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success());
    so
}

fn load_error(so: &std::path::Path) -> String {
    let path = CString::new(so.to_str().unwrap()).unwrap();
    let mut m = std::ptr::null_mut();
    // SAFETY: valid strings and out-pointer.
    let rc = unsafe { TVMModLoadFromFile(path.as_ptr(), c"so".as_ptr(), &mut m) };
    assert_eq!(rc, -1, "{} loaded", so.display());
    last_error()
}

/// A `__tvm_ffi__library_bin` with the given stream after its u64 length.
fn blob_source(stream: &[u8]) -> String {
    let mut bytes = (stream.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(stream);
    let list: Vec<String> = bytes.iter().map(|b| b.to_string()).collect();
    format!(
        "const unsigned char __tvm_ffi__library_bin[{}] = {{{}}};\n\
         void* __tvm_ffi__library_ctx = 0;\n\
         int __tvm_ffi_f(void* h, const void* a, int n, void* r) {{ return 0; }}\n",
        bytes.len(),
        list.join(",")
    )
}

fn u64s(v: &[u64]) -> Vec<u8> {
    let mut b = (v.len() as u64).to_le_bytes().to_vec();
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

fn string(s: &str) -> Vec<u8> {
    let mut b = (s.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(s.as_bytes());
    b
}

#[test]
fn unsupported_versions_and_corrupt_blobs_are_refused_naming_what_was_found() {
    let so = build_so(
        "v021",
        "void* __tvm_ffi_library_ctx = 0;\nint add(void) { return 0; }\n",
    );
    let e = load_error(&so);
    assert!(
        e.contains("TVM v0.21") && e.contains("__tvm_ffi_library_ctx"),
        "{e}"
    );

    // A module kind nobody loads.
    let mut s = u64s(&[0, 1, 1]);
    s.extend(u64s(&[1]));
    s.extend(string("_lib"));
    s.extend(string("nosuchkind"));
    s.extend(string("payload"));
    let e = load_error(&build_so("kind", &blob_source(&s)));
    assert!(e.contains("'nosuchkind'") && e.contains("available"), "{e}");

    // Truncated streams and a broken import tree.
    for cut in [3, 9, 20, s.len() - 3] {
        let e = load_error(&build_so(&format!("cut{cut}"), &blob_source(&s[..cut])));
        assert!(
            e.contains("truncated") || e.contains("corrupted"),
            "{cut}: {e}"
        );
    }
    let mut bad = u64s(&[0, 5]);
    bad.extend(u64s(&[7]));
    bad.extend(string("_lib"));
    let e = load_error(&build_so("tree", &blob_source(&bad)));
    assert!(e.contains("corrupted") || e.contains("truncated"), "{e}");

    // A Relax executable of an unknown version.
    let mut r = u64s(&[0, 1, 1]);
    r.extend(u64s(&[1]));
    r.extend(string("_lib"));
    r.extend(string("relax.VMExecutable"));
    r.extend(string("\x01\x02\x03\x04\x05\x06\x07\x08 not an executable"));
    let e = load_error(&build_so("exec", &blob_source(&r)));
    assert!(
        e.contains("magic") || e.contains("relax.VMExecutable"),
        "{e}"
    );
}

/// Runs a Relax fixture's calls on the VM and compares with TVM 0.27's outputs bit for bit.
fn relax_fixture(name: &str, calls: &[(&[&str], &str)]) {
    let Some(d) = fixtures() else { return };
    let mut z = Npz::open(&d, name);
    let vm =
        tvm_runtime::relax_vm::VirtualMachine::load(d.join(format!("{name}.so")).to_str().unwrap())
            .unwrap_or_else(|e| panic!("{name}: {}", e.message));
    vm.init(&[tvm_runtime::DLDevice::new(1, 0)]).unwrap();
    for (args, result) in calls {
        let inputs: Vec<NDArray> = args.iter().map(|k| z.array(k)).collect();
        let out = vm
            .call("main", &inputs)
            .unwrap_or_else(|e| panic!("{name}: {}", e.message));
        let out = out.tensor().expect("a tensor result");
        let (expect, shape) = z.get(result);
        assert_eq!(out.shape(), &shape[..], "{name}");
        same(out, &expect);
    }
}

#[test]
fn relax_static_mlp() {
    relax_fixture("mlp", &[(&["x", "w1", "w2"], "y")]);
}

#[test]
fn relax_dynamic_batch() {
    relax_fixture(
        "mlp_dyn",
        &[(&["x5", "w1", "w2"], "y5"), (&["x2", "w1", "w2"], "y2")],
    );
}

#[test]
fn relax_with_a_tensor_constant() {
    relax_fixture("const", &[(&["x"], "y")]);
}

/// A hand-written tvm-ffi kernel that records what it was given (count, type indices, payloads)
/// and returns Int(100 + count) when its first argument is Int(7), else None.
const PROBE: &str = r#"
#include <stdint.h>
typedef struct { int32_t type_index; uint32_t pad; union { int64_t i; void* p; } v; } Any;
int seen_n = -1;
int32_t seen_ti[8];
int64_t seen_bits[8];
int32_t seen_result_ti = -1;
int __tvm_ffi_probe(void* h, const Any* a, int n, Any* r) {
  (void)h;
  seen_n = n;
  for (int i = 0; i < n && i < 8; i++) { seen_ti[i] = a[i].type_index; seen_bits[i] = a[i].v.i; }
  seen_result_ti = r->type_index;
  if (n > 0 && a[0].type_index == 1 && a[0].v.i == 7) {
    r->type_index = 1; r->pad = 0; r->v.i = 100 + n;
  }
  return 0;
}
"#;

#[test]
fn the_fast_call_hands_a_kernel_what_the_classic_call_passed_for_any_count() {
    let so = build_so("probe", PROBE);
    let d = so.parent().unwrap();
    let l = load(d, "probe.so", "probe");
    // SAFETY: the library our runtime loaded (the same handle: the same globals).
    let lib = unsafe { libloading::Library::new(&so) }.unwrap();
    // SAFETY: the globals the probe defines, with these types; read between calls only.
    let seen = || unsafe {
        let n = **lib.get::<*const c_int>(b"seen_n\0").unwrap();
        let ti = **lib.get::<*const [i32; 8]>(b"seen_ti\0").unwrap();
        let bits = **lib.get::<*const [i64; 8]>(b"seen_bits\0").unwrap();
        let rti = **lib.get::<*const i32>(b"seen_result_ti\0").unwrap();
        let k = n.max(0) as usize;
        (n, ti[..k].to_vec(), bits[..k].to_vec(), rti)
    };
    let call_ret = |args: &[(*mut c_void, c_int)]| {
        // All eight bytes set (a pointer is four on 32-bit targets).
        let mut vals: Vec<TVMValue> = args
            .iter()
            .map(|a| TVMValue {
                v_int64: a.0 as usize as i64,
            })
            .collect();
        let mut codes: Vec<c_int> = args.iter().map(|a| a.1).collect();
        // Garbage in the caller's slots: a None result must overwrite both.
        let mut rv = TVMValue { v_int64: 0x5555 };
        let mut rc = 77;
        // SAFETY: arrays of `len` valid entries.
        let r = unsafe {
            TVMFuncCall(
                l.f,
                vals.as_mut_ptr(),
                codes.as_mut_ptr(),
                vals.len() as c_int,
                &mut rv,
                &mut rc,
            )
        };
        assert_eq!(r, 0, "{}", last_error());
        // SAFETY: the slot holds an integer or None (zero) after the call.
        (unsafe { rv.v_int64 }, rc)
    };
    let arrays: Vec<NDArray> = (0..6)
        .map(|i| NDArray::from_slice(&[i as f32], &[1]).unwrap())
        .collect();
    let addr = |a: &NDArray| a.handle() as i64;
    const DLTENSOR_PTR: i32 = 7;
    // Three NDArray handles, several times (the count is learned on the first), then other
    // counts through the same function object, then three again.
    for round in 0..2 {
        for n in [3usize, 3, 1, 2, 4, 5, 6, 0, 3] {
            let args: Vec<_> = arrays[..n].iter().map(nd).collect();
            assert_eq!(
                call_ret(&args),
                (0, tc::NULLPTR),
                "round {round}, {n} arguments"
            );
            let (seen_n, ti, bits, rti) = seen();
            assert_eq!(seen_n, n as c_int);
            assert_eq!(ti, vec![DLTENSOR_PTR; n]);
            assert_eq!(bits, arrays[..n].iter().map(addr).collect::<Vec<_>>());
            assert_eq!(rti, 0, "the result starts as None");
        }
    }
    // A NULL NDArray handle is None; DLTensor handles are tensor pointers too; an integer, a
    // float and an opaque handle keep their payloads.
    let none = (std::ptr::null_mut(), tc::NDARRAY_HANDLE);
    assert_eq!(
        call_ret(&[nd(&arrays[0]), none, dl(&arrays[2])]).1,
        tc::NULLPTR
    );
    let (_, ti, bits, _) = seen();
    assert_eq!(ti, vec![DLTENSOR_PTR, 0, DLTENSOR_PTR]);
    assert_eq!(bits, vec![addr(&arrays[0]), 0, addr(&arrays[2])]);
    // A double travels in a pointer-sized argument here: on 32-bit targets one whose bits fit
    // in 32 (a subnormal).
    let f = TVMValue {
        v_float64: if usize::BITS == 64 {
            2.5
        } else {
            f64::from_bits(0x7654_3210)
        },
    };
    // SAFETY: reading back the bits of the double just stored.
    let fbits = unsafe { f.v_int64 };
    let args = [
        (7usize as *mut c_void, tc::INT),
        (fbits as usize as *mut c_void, tc::FLOAT),
        (8usize as *mut c_void, tc::OPAQUE_HANDLE),
    ];
    // An Int result comes back through the caller's slots, for the learned count and another.
    assert_eq!(call_ret(&args), (103, tc::INT));
    let (_, ti, bits, _) = seen();
    assert_eq!(ti, vec![1, 3, 4]);
    assert_eq!(bits, vec![7, fbits, 8]);
    assert_eq!(call_ret(&args[..1]), (101, tc::INT));
    // And tensors again on the learned path.
    assert_eq!(
        call_ret(&[nd(&arrays[3]), nd(&arrays[4]), nd(&arrays[5])]).1,
        tc::NULLPTR
    );
    assert_eq!(seen().2, arrays[3..6].iter().map(addr).collect::<Vec<_>>());
}
