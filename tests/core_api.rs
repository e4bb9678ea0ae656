//! Rust-side tests of the core C ABI: errors, PackedFunc, registry, objects, NDArray, devices,
//! and a multi-threaded stress test.
#![allow(
    clippy::undocumented_unsafe_blocks,
    reason = "this file calls the C ABI as a C client would; every call passes pointers to locals of the test itself"
)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use tvm_runtime::c_api::{backend::*, device::*, error::*, func::*, ndarray::*, object::*};
use tvm_runtime::packed_func::types::{type_code as tc, *};

fn last_error() -> String {
    let p = TVMGetLastError();
    assert!(!p.is_null());
    // SAFETY: the runtime returns a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

unsafe extern "C" fn echo(
    args: *mut TVMValue,
    codes: *mut c_int,
    n: c_int,
    ret: *mut c_void,
    _res: *mut c_void,
) -> c_int {
    if n < 1 {
        unsafe { TVMAPISetLastError(c"ValueError: echo needs an argument".as_ptr()) };
        return -1;
    }
    unsafe { TVMCFuncSetReturn(ret, args, codes, 1) }
}

/// Counts the finalizer runs of the functions whose resource is the counter: each test that
/// counts has its own, so that tests running at the same time do not disturb each other.
unsafe extern "C" fn fin(res: *mut c_void) {
    // SAFETY: every function made with this finalizer has a `&'static AtomicUsize` as its
    // resource (`make_echo_counted`).
    unsafe { &*(res as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
}

/// The finalizer count of the functions that no test counts.
static FIN_UNCOUNTED: AtomicUsize = AtomicUsize::new(0);

fn make_echo() -> *mut c_void {
    make_echo_counted(&FIN_UNCOUNTED)
}

fn make_echo_counted(count: &'static AtomicUsize) -> *mut c_void {
    let mut f = std::ptr::null_mut();
    let res = count as *const AtomicUsize as *mut c_void;
    assert_eq!(
        unsafe { TVMFuncCreateFromCFunc(Some(echo), res, Some(fin), &mut f) },
        0
    );
    f
}

fn call(f: *mut c_void, vals: &mut [TVMValue], codes: &mut [c_int]) -> (c_int, TVMValue, c_int) {
    let mut rv = TVMValue::default();
    let mut rc = 0;
    let r = unsafe {
        TVMFuncCall(
            f,
            vals.as_mut_ptr(),
            codes.as_mut_ptr(),
            vals.len() as c_int,
            &mut rv,
            &mut rc,
        )
    };
    (r, rv, rc)
}

#[test]
fn packed_func_round_trips_and_finalizer_runs_once() {
    static FIN_COUNT: AtomicUsize = AtomicUsize::new(0);
    let before = FIN_COUNT.load(Ordering::SeqCst);
    let f = make_echo_counted(&FIN_COUNT);
    let (r, v, c) = call(f, &mut [TVMValue { v_int64: 42 }], &mut [tc::INT]);
    assert_eq!((r, unsafe { v.v_int64 }, c), (0, 42, tc::INT));
    let (r, v, c) = call(f, &mut [TVMValue { v_float64: 2.5 }], &mut [tc::FLOAT]);
    assert_eq!((r, unsafe { v.v_float64 }, c), (0, 2.5, tc::FLOAT));
    let s = CString::new("hello").unwrap();
    let (r, v, c) = call(f, &mut [TVMValue { v_str: s.as_ptr() }], &mut [tc::STR]);
    assert_eq!((r, c), (0, tc::STR));
    assert_eq!(
        unsafe { CStr::from_ptr(v.v_str) }.to_str().unwrap(),
        "hello"
    );
    let dt = DLDataType::new(DL_FLOAT, 32, 1);
    let (r, v, c) = call(f, &mut [TVMValue { v_type: dt }], &mut [tc::DATA_TYPE]);
    assert_eq!((r, c), (0, tc::STR), "a DataType comes back as its name");
    assert_eq!(
        unsafe { CStr::from_ptr(v.v_str) }.to_str().unwrap(),
        "float32"
    );
    let bytes = b"a\0b";
    let mut ba = TVMByteArray {
        data: bytes.as_ptr() as *const c_char,
        size: 3,
    };
    let (r, v, c) = call(
        f,
        &mut [TVMValue {
            v_handle: &mut ba as *mut _ as *mut c_void,
        }],
        &mut [tc::BYTES],
    );
    assert_eq!((r, c), (0, tc::BYTES));
    let out = unsafe { &*(v.v_handle as *const TVMByteArray) };
    assert_eq!(
        unsafe { std::slice::from_raw_parts(out.data as *const u8, out.size) },
        bytes
    );
    assert_eq!(
        unsafe { TVMByteArrayFree(v.v_handle as *mut TVMByteArray) },
        0
    );
    // A function passed as an argument comes back as an owned handle.
    let (r, v, c) = call(
        f,
        &mut [TVMValue { v_handle: f }],
        &mut [tc::PACKED_FUNC_HANDLE],
    );
    assert_eq!((r, c), (0, tc::PACKED_FUNC_HANDLE));
    assert_eq!(unsafe { v.v_handle }, f);
    assert_eq!(unsafe { TVMFuncFree(v.v_handle) }, 0);
    // Errors come back with the callee's message.
    let (r, _, _) = call(f, &mut [], &mut []);
    assert_eq!(r, -1);
    assert_eq!(last_error(), "ValueError: echo needs an argument");
    // Unknown type codes are rejected by SetReturn.
    let (r, _, _) = call(f, &mut [TVMValue { v_int64: 1 }], &mut [99]);
    assert_eq!(r, -1);
    assert!(last_error().contains("99"), "{}", last_error());
    assert_eq!(FIN_COUNT.load(Ordering::SeqCst), before);
    assert_eq!(unsafe { TVMFuncFree(f) }, 0);
    assert_eq!(FIN_COUNT.load(Ordering::SeqCst), before + 1);
}

#[test]
fn registry_override_rules() {
    let f = make_echo();
    let name = c"test.core.echo";
    assert_eq!(unsafe { TVMFuncRegisterGlobal(name.as_ptr(), f, 0) }, 0);
    assert_eq!(unsafe { TVMFuncRegisterGlobal(name.as_ptr(), f, 0) }, -1);
    assert!(last_error().contains("already registered"));
    assert_eq!(unsafe { TVMFuncRegisterGlobal(name.as_ptr(), f, 1) }, 0);
    let mut g = std::ptr::null_mut();
    assert_eq!(unsafe { TVMFuncGetGlobal(name.as_ptr(), &mut g) }, 0);
    assert_eq!(g, f);
    let mut n = 0;
    let mut names: *mut *const c_char = std::ptr::null_mut();
    assert_eq!(unsafe { TVMFuncListGlobalNames(&mut n, &mut names) }, 0);
    let listed: Vec<String> = (0..n as usize)
        .map(|i| {
            unsafe { CStr::from_ptr(*names.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(listed.iter().any(|s| s == "test.core.echo"));
    assert!(listed.iter().any(|s| s == "runtime.String"));
    assert_eq!(unsafe { TVMFuncRemoveGlobal(name.as_ptr()) }, 0);
    let mut h = std::ptr::dangling_mut::<c_void>();
    assert_eq!(unsafe { TVMFuncGetGlobal(name.as_ptr(), &mut h) }, 0);
    assert!(h.is_null());
    unsafe {
        TVMFuncFree(g);
        TVMFuncFree(f);
    }
    assert_eq!(unsafe { TVMFuncGetGlobal(std::ptr::null(), &mut h) }, -1);
}

fn global(name: &CStr) -> *mut c_void {
    let mut f = std::ptr::null_mut();
    assert_eq!(unsafe { TVMFuncGetGlobal(name.as_ptr(), &mut f) }, 0);
    assert!(!f.is_null(), "{name:?} missing");
    f
}

#[test]
fn containers_through_globals() {
    let s = CString::new("key").unwrap();
    let (r, sv, sc) = call(
        global(c"runtime.String"),
        &mut [TVMValue { v_str: s.as_ptr() }],
        &mut [tc::STR],
    );
    assert_eq!((r, sc), (0, tc::OBJECT_HANDLE));
    let mut ti = 0u32;
    unsafe { TVMObjectGetTypeIndex(sv.v_handle, &mut ti) };
    assert_eq!(ti, 3);
    let (_, back, bc) = call(
        global(c"runtime.GetFFIString"),
        &mut [sv],
        &mut [tc::OBJECT_HANDLE],
    );
    assert_eq!(bc, tc::STR);
    assert_eq!(
        unsafe { CStr::from_ptr(back.v_str) }.to_str().unwrap(),
        "key"
    );
    let (_, shape, _) = call(
        global(c"runtime.ShapeTuple"),
        &mut [TVMValue { v_int64: 2 }, TVMValue { v_int64: 7 }],
        &mut [tc::INT, tc::INT],
    );
    let (_, n, _) = call(
        global(c"runtime.GetShapeTupleSize"),
        &mut [shape],
        &mut [tc::OBJECT_HANDLE],
    );
    assert_eq!(unsafe { n.v_int64 }, 2);
    let (_, e, _) = call(
        global(c"runtime.GetShapeTupleElem"),
        &mut [shape, TVMValue { v_int64: 1 }],
        &mut [tc::OBJECT_HANDLE, tc::INT],
    );
    assert_eq!(unsafe { e.v_int64 }, 7);
    let (r, _, _) = call(
        global(c"runtime.GetShapeTupleElem"),
        &mut [shape, TVMValue { v_int64: 5 }],
        &mut [tc::OBJECT_HANDLE, tc::INT],
    );
    assert_eq!(r, -1);
    assert!(
        last_error().starts_with("InternalError: "),
        "{}",
        last_error()
    );
    // Map with a string key given as str, looked up with a String object.
    let (_, m, _) = call(
        global(c"runtime.Map"),
        &mut [TVMValue { v_str: s.as_ptr() }, shape],
        &mut [tc::STR, tc::OBJECT_HANDLE],
    );
    let (_, got, gc) = call(
        global(c"runtime.MapGetItem"),
        &mut [m, sv],
        &mut [tc::OBJECT_HANDLE, tc::OBJECT_HANDLE],
    );
    assert_eq!(gc, tc::OBJECT_HANDLE);
    assert_eq!(unsafe { got.v_handle }, unsafe { shape.v_handle });
    let (_, cnt, _) = call(
        global(c"runtime.MapCount"),
        &mut [m, shape],
        &mut [tc::OBJECT_HANDLE, tc::OBJECT_HANDLE],
    );
    assert_eq!(unsafe { cnt.v_int64 }, 0);
    let (_, arr, _) = call(
        global(c"runtime.Array"),
        &mut [sv, shape],
        &mut [tc::OBJECT_HANDLE; 2],
    );
    let (_, sz, _) = call(
        global(c"runtime.ArraySize"),
        &mut [arr],
        &mut [tc::OBJECT_HANDLE],
    );
    assert_eq!(unsafe { sz.v_int64 }, 2);
    for h in [sv, shape, m, got, arr] {
        assert_eq!(unsafe { TVMObjectFree(h.v_handle) }, 0);
    }
}

#[test]
fn type_table() {
    let mut i = 0u32;
    for (k, want) in [
        (c"runtime.Object", 0),
        (c"runtime.Module", 1),
        (c"runtime.NDArray", 2),
        (c"runtime.String", 3),
        (c"Array", 4),
        (c"Map", 5),
        (c"runtime.ShapeTuple", 6),
        (c"runtime.PackedFunc", 7),
    ] {
        if want == 0 {
            // As the reference: index 0 has a name but no key lookup.
            assert_eq!(unsafe { TVMObjectTypeKey2Index(k.as_ptr(), &mut i) }, -1);
        } else {
            assert_eq!(unsafe { TVMObjectTypeKey2Index(k.as_ptr(), &mut i) }, 0);
            assert_eq!(i, want);
        }
        let mut key: *mut c_char = std::ptr::null_mut();
        assert_eq!(unsafe { TVMObjectTypeIndex2Key(want, &mut key) }, 0);
        assert_eq!(unsafe { CStr::from_ptr(key) }, k);
        unsafe { libc::free(key as *mut c_void) };
    }
    assert_eq!(
        unsafe { TVMObjectTypeKey2Index(c"no.such.Type".as_ptr(), &mut i) },
        -1
    );
    assert!(last_error().contains("no.such.Type"));
    let mut d = 0;
    assert_eq!(unsafe { TVMObjectDerivedFrom(3, 0, &mut d) }, 0);
    assert_eq!(d, 1);
    assert_eq!(unsafe { TVMObjectDerivedFrom(3, 4, &mut d) }, 0);
    assert_eq!(d, 0);
}

#[test]
fn ndarray_alloc_copy_view_dlpack() {
    let shape = [2i64, 3];
    let mut a: *mut DLTensor = std::ptr::null_mut();
    assert_eq!(
        unsafe { TVMArrayAlloc(shape.as_ptr(), 2, 2, 32, 1, 1, 0, &mut a) },
        0
    );
    let t = unsafe { &*a };
    assert_eq!(t.data as usize % 64, 0);
    let src: Vec<f32> = (0..6).map(|x| x as f32).collect();
    assert_eq!(
        unsafe { TVMArrayCopyFromBytes(a, src.as_ptr() as *mut c_void, 24) },
        0,
        "{}",
        last_error()
    );
    assert_eq!(
        unsafe { TVMArrayCopyFromBytes(a, src.as_ptr() as *mut c_void, 20) },
        -1
    );
    assert!(last_error().contains("size mismatch"));
    let mut b: *mut DLTensor = std::ptr::null_mut();
    assert_eq!(
        unsafe { TVMArrayAlloc(shape.as_ptr(), 2, 2, 32, 1, 1, 0, &mut b) },
        0
    );
    assert_eq!(unsafe { TVMArrayCopyFromTo(a, b, std::ptr::null_mut()) }, 0);
    let mut out = vec![0f32; 6];
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(b, out.as_mut_ptr() as *mut c_void, 24) },
        0
    );
    assert_eq!(out, src);
    let mut ti = 0;
    assert_eq!(unsafe { TVMArrayGetTypeIndex(a, &mut ti) }, 0);
    assert_eq!(ti, 2);
    // DLPack out keeps the array alive after TVMArrayFree.
    let a_data = t.data;
    let mut m: *mut DLManagedTensor = std::ptr::null_mut();
    assert_eq!(unsafe { TVMArrayToDLPack(a, &mut m) }, 0);
    assert_eq!(unsafe { TVMArrayFree(a) }, 0);
    let data = unsafe { std::slice::from_raw_parts((*m).dl_tensor.data as *const f32, 6) };
    assert_eq!(data, &src[..]);
    let mut c: *mut DLTensor = std::ptr::null_mut();
    assert_eq!(unsafe { TVMArrayFromDLPack(m, &mut c) }, 0);
    assert_eq!(
        unsafe { (*c).data },
        a_data,
        "DLPack import shares the memory"
    );
    assert_eq!(unsafe { TVMArrayFree(c) }, 0);
    assert_eq!(unsafe { TVMArrayFree(b) }, 0);
    // Bad inputs.
    let neg = [-1i64];
    assert_eq!(
        unsafe { TVMArrayAlloc(neg.as_ptr(), 1, 2, 32, 1, 1, 0, &mut a) },
        -1
    );
    assert!(last_error().contains("negative"));
    let huge = [i64::MAX, i64::MAX];
    assert_eq!(
        unsafe { TVMArrayAlloc(huge.as_ptr(), 2, 2, 32, 1, 1, 0, &mut a) },
        -1
    );
    assert_eq!(
        unsafe { TVMArrayAlloc(shape.as_ptr(), 2, 2, 32, 1, 99, 0, &mut a) },
        -1
    );
    assert!(last_error().contains("device type 99"), "{}", last_error());
    assert_eq!(
        unsafe { TVMArrayAlloc(shape.as_ptr(), 2, 2, 32, 1, 2, 0, &mut a) },
        -1
    );
    assert!(
        last_error().contains("cuda(0) is not available"),
        "{}",
        last_error()
    );
}

#[test]
fn devices_streams_workspace() {
    let dev = DLDevice::CPU;
    let mut p = std::ptr::null_mut();
    let hint = DLDataType::new(DL_FLOAT, 32, 1);
    assert_eq!(
        unsafe { TVMDeviceAllocDataSpace(dev, 100, 128, hint, &mut p) },
        0
    );
    assert_eq!(p as usize % 128, 0);
    assert_eq!(unsafe { TVMDeviceFreeDataSpace(dev, p) }, 0);
    let shape = [4i64];
    assert_eq!(
        unsafe {
            TVMDeviceAllocDataSpaceWithScope(
                dev,
                1,
                shape.as_ptr(),
                hint,
                c"global".as_ptr(),
                &mut p,
            )
        },
        0
    );
    assert_eq!(unsafe { TVMDeviceFreeDataSpace(dev, p) }, 0);
    assert_eq!(
        unsafe {
            TVMDeviceAllocDataSpaceWithScope(
                dev,
                1,
                shape.as_ptr(),
                hint,
                c"texture".as_ptr(),
                &mut p,
            )
        },
        -1
    );
    let mut s = std::ptr::dangling_mut::<c_void>();
    assert_eq!(unsafe { TVMStreamCreate(1, 0, &mut s) }, 0);
    assert!(s.is_null());
    assert_eq!(unsafe { TVMSetStream(1, 0, s) }, 0);
    assert_eq!(unsafe { TVMSynchronize(1, 0, s) }, 0);
    assert_eq!(unsafe { TVMStreamStreamSynchronize(1, 0, s, s) }, 0);
    assert_eq!(unsafe { TVMStreamFree(1, 0, s) }, 0);
    assert_eq!(unsafe { TVMSynchronize(99, 0, s) }, -1);
    let w = TVMBackendAllocWorkspace(1, 0, 5000, 2, 32);
    assert!(!w.is_null());
    assert_eq!(unsafe { TVMBackendFreeWorkspace(1, 0, w) }, 0);
    assert_eq!(
        unsafe { TVMBackendFreeWorkspace(1, 0, w) },
        -1,
        "double free is detected"
    );
    assert!(TVMBackendAllocWorkspace(99, 0, 16, 2, 32).is_null());
}

#[test]
fn oversized_cpu_workspace_is_refused() {
    // Rounding u64::MAX up to a whole page used to wrap to 0 and hand out a live block.
    for n in [u64::MAX, u64::MAX - 4095, (usize::MAX as u64) - 1] {
        assert!(
            TVMBackendAllocWorkspace(1, 0, n, 2, 32).is_null(),
            "{n} bytes"
        );
        let msg = unsafe { CStr::from_ptr(TVMGetLastError()) }.to_string_lossy();
        assert!(msg.contains("TVMBackendAllocWorkspace"), "{msg}");
    }
}

#[test]
fn python_error_passthrough() {
    let fake = 0xdead0 as *mut c_void;
    unsafe { TVMAPISetLastPythonError(fake) };
    assert_eq!(TVMGetLastPythonError(), fake);
    assert!(TVMGetLastError().is_null());
    TVMDropLastPythonError();
    assert!(TVMGetLastPythonError().is_null());
}

#[test]
fn stress_eight_threads() {
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..2000 {
                    let f = make_echo();
                    let name = CString::new(format!("stress.{t}.{}", i % 7)).unwrap();
                    assert_eq!(unsafe { TVMFuncRegisterGlobal(name.as_ptr(), f, 1) }, 0);
                    let g = global(&name);
                    let (r, v, _) = call(g, &mut [TVMValue { v_int64: i }], &mut [tc::INT]);
                    assert_eq!((r, unsafe { v.v_int64 }), (0, i));
                    let shape = [i % 13 + 1];
                    let mut a: *mut DLTensor = std::ptr::null_mut();
                    assert_eq!(
                        unsafe { TVMArrayAlloc(shape.as_ptr(), 1, 0, 8, 1, 1, 0, &mut a) },
                        0
                    );
                    let w = TVMBackendAllocWorkspace(1, 0, 64 * (i as u64 % 5 + 1), 2, 32);
                    assert!(!w.is_null());
                    assert_eq!(unsafe { TVMBackendFreeWorkspace(1, 0, w) }, 0);
                    unsafe {
                        TVMArrayFree(a);
                        TVMFuncFree(g);
                        TVMFuncFree(f);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

unsafe extern "C" fn once_cb(p: *mut c_void) -> c_int {
    unsafe { *(p as *mut i32) += 1 };
    0
}

unsafe extern "C" fn sys_func(
    args: *mut TVMValue,
    codes: *mut c_int,
    n: c_int,
    out: *mut TVMValue,
    out_code: *mut c_int,
    _res: *mut c_void,
) -> c_int {
    let _ = (args, codes);
    unsafe {
        (*out).v_int64 = 100 + n as i64;
        *out_code = tc::INT;
    }
    0
}

#[test]
fn backend_helpers_and_system_lib() {
    use tvm_runtime::c_api::module::*;
    // RunOnce runs exactly once per handle.
    let mut h: *mut c_void = std::ptr::null_mut();
    let mut count = 0i32;
    for _ in 0..3 {
        assert_eq!(
            unsafe {
                TVMBackendRunOnce(
                    &mut h,
                    Some(once_cb),
                    &mut count as *mut i32 as *mut c_void,
                    0,
                )
            },
            0
        );
    }
    assert_eq!(count, 1);
    // The first call returns the callback's own status verbatim, as TVM does.
    unsafe extern "C" fn five(_: *mut c_void) -> c_int {
        5
    }
    let mut h2: *mut c_void = std::ptr::null_mut();
    assert_eq!(
        unsafe { TVMBackendRunOnce(&mut h2, Some(five), std::ptr::null_mut(), 0) },
        5
    );
    assert_eq!(
        unsafe { TVMBackendRunOnce(&mut h2, Some(five), std::ptr::null_mut(), 0) },
        0
    );
    // Env C API: known names accepted, unknown refused.
    assert_eq!(
        unsafe { TVMBackendRegisterEnvCAPI(c"PyErr_CheckSignals".as_ptr(), std::ptr::null_mut()) },
        0
    );
    assert_eq!(
        unsafe { TVMBackendRegisterEnvCAPI(c"Nope".as_ptr(), std::ptr::null_mut()) },
        -1
    );
    // System library: a registered symbol is a function of runtime.SystemLib.
    assert_eq!(
        unsafe {
            TVMBackendRegisterSystemLibSymbol(c"core_test_fn".as_ptr(), sys_func as *mut c_void)
        },
        0
    );
    let (r, m, c) = call(global(c"runtime.SystemLib"), &mut [], &mut []);
    assert_eq!((r, c), (0, tc::MODULE_HANDLE));
    let m = unsafe { m.v_handle };
    let mut f = std::ptr::null_mut();
    assert_eq!(
        unsafe { TVMModGetFunction(m, c"core_test_fn".as_ptr(), 0, &mut f) },
        0
    );
    assert!(!f.is_null());
    let (r, v, c) = call(f, &mut [TVMValue { v_int64: 0 }], &mut [tc::INT]);
    assert_eq!((r, unsafe { v.v_int64 }, c), (0, 101, tc::INT));
    let mut missing = std::ptr::dangling_mut::<c_void>();
    assert_eq!(
        unsafe { TVMModGetFunction(m, c"absent".as_ptr(), 1, &mut missing) },
        0
    );
    assert!(missing.is_null());
    // Environment lookup: through the module, then the registry.
    let mut g = std::ptr::null_mut();
    assert_eq!(
        unsafe { TVMBackendGetFuncFromEnv(m, c"core_test_fn".as_ptr(), &mut g) },
        0
    );
    assert!(!g.is_null());
    assert_eq!(
        unsafe { TVMBackendGetFuncFromEnv(m, c"runtime.String".as_ptr(), &mut g) },
        0
    );
    assert!(!g.is_null());
    assert_eq!(
        unsafe { TVMBackendGetFuncFromEnv(m, c"no.such.fn".as_ptr(), &mut g) },
        -1
    );
    assert!(last_error().contains("no.such.fn"));
    // A module cannot import itself.
    assert_eq!(unsafe { TVMModImport(m, m) }, -1);
    // Loading errors name the file.
    let mut out = std::ptr::null_mut();
    assert_eq!(
        unsafe { TVMModLoadFromFile(c"/no/such.so".as_ptr(), c"".as_ptr(), &mut out) },
        -1
    );
    assert!(last_error().contains("/no/such.so"));
    let tmp = std::env::temp_dir().join("tvmrt_not_elf.so");
    std::fs::write(&tmp, b"this is not a library").unwrap();
    let p = CString::new(tmp.to_str().unwrap()).unwrap();
    assert_eq!(
        unsafe { TVMModLoadFromFile(p.as_ptr(), c"so".as_ptr(), &mut out) },
        -1
    );
    assert!(
        last_error().contains("not a shared library"),
        "{}",
        last_error()
    );
    unsafe {
        TVMFuncFree(f);
        TVMModFree(m);
    }
}

#[test]
fn cb_arg_to_return_and_anylist() {
    let s = CString::new("x").unwrap();
    let (_, obj, _) = call(
        global(c"runtime.String"),
        &mut [TVMValue { v_str: s.as_ptr() }],
        &mut [tc::STR],
    );
    // An object argument becomes an owned return value.
    let mut v = obj;
    let mut c = tc::OBJECT_HANDLE;
    assert_eq!(unsafe { TVMCbArgToReturn(&mut v, &mut c) }, 0);
    assert_eq!(c, tc::OBJECT_HANDLE);
    assert_eq!(unsafe { TVMObjectFree(v.v_handle) }, 0);
    let mut sv = TVMValue { v_str: s.as_ptr() };
    let mut sc = tc::STR;
    assert_eq!(unsafe { TVMCbArgToReturn(&mut sv, &mut sc) }, -1);
    // AnyList: move a returned object in, pass it as an argument, reset it.
    let mut list = tvm_runtime::executor::any_list::AnyList::new(2);
    let lp = list.as_mut_ptr();
    let mut args = [obj, TVMValue::default()];
    let mut codes = [tc::OBJECT_HANDLE, tc::NULLPTR];
    assert_eq!(unsafe { TVMObjectRetain(obj.v_handle) }, 0);
    assert_eq!(
        unsafe {
            TVMBackendAnyListMoveFromPackedReturn(lp, 1, args.as_mut_ptr(), codes.as_mut_ptr(), 0)
        },
        0
    );
    assert_eq!(
        unsafe { TVMBackendAnyListSetPackedArg(lp, 1, args.as_mut_ptr(), codes.as_mut_ptr(), 1) },
        0
    );
    assert_eq!(codes[1], tc::OBJECT_HANDLE);
    assert_eq!(unsafe { args[1].v_handle }, unsafe { obj.v_handle });
    assert_eq!(unsafe { TVMBackendAnyListResetItem(lp, 1) }, 0);
    assert_eq!(
        unsafe { TVMBackendAnyListResetItem(std::ptr::null_mut(), 0) },
        -1
    );
    assert_eq!(unsafe { TVMObjectFree(obj.v_handle) }, 0);
}

/// The globals that read through an opaque handle accept only handles the runtime lent them:
/// every blob loader (`runtime.module.loadbinary_*`: the graph executor factory under both
/// names, the Relax executables, CUDA, Vulkan, plugins) refuses a made-up address or NULL
/// with an error naming it, from the Rust API and from C (`TVMFuncCall`, `TVMGetLastError`),
/// where the runtime used to dereference it as a blob reader (SIGSEGV); so do the Relax
/// builtins that take the VM context.
#[test]
fn handle_taking_globals_refuse_handles_they_cannot_vouch_for() {
    use tvm_runtime::packed_func::{registry, ArgValue, RawHandle};
    let loaders: Vec<String> = registry::list_names()
        .into_iter()
        .filter(|n| n.starts_with("runtime.module.loadbinary_"))
        .collect();
    let mut expected = vec![
        "runtime.module.loadbinary_GraphExecutorFactory",
        "runtime.module.loadbinary_GraphRuntimeFactory",
        "runtime.module.loadbinary_relax.Executable",
        "runtime.module.loadbinary_relax.VMExecutable",
    ];
    if cfg!(feature = "cuda") {
        expected.push("runtime.module.loadbinary_cuda");
    }
    if cfg!(feature = "vulkan") {
        expected.push("runtime.module.loadbinary_vulkan");
    }
    if cfg!(feature = "opencl") {
        expected.push("runtime.module.loadbinary_opencl");
    }
    for name in expected {
        assert!(
            loaders.iter().any(|l| l == name),
            "{name} is not registered"
        );
    }
    // A high address of the target's word size (a 64-bit one is out of range on armv7).
    let bogus = [
        0x10usize,
        0x4141_4141,
        (0x7fff_dead_b000u64 >> (64 - usize::BITS)) as usize,
    ];
    for name in &loaders {
        let f = registry::get(name).unwrap();
        let cname = CString::new(name.as_str()).unwrap();
        let g = global(&cname);
        for addr in bogus {
            // SAFETY: the loaders look a handle up among the readers lent to them on this
            // thread before any use (what this test checks), so any address meets their
            // convention.
            let h = unsafe { RawHandle::new(addr as *mut c_void) };
            let e = f.call(&[ArgValue::Handle(h)]).unwrap_err();
            assert!(
                e.message.contains("runtime.module.loadbinary_")
                    && e.message.contains("does not name a module blob stream"),
                "{name} with {addr:#x}: {e}"
            );
            let mut v = [TVMValue {
                v_handle: addr as *mut c_void,
            }];
            let (r, _, _) = call(g, &mut v, &mut [tc::OPAQUE_HANDLE]);
            assert_eq!(r, -1, "{name} accepted {addr:#x} from C");
            let msg = last_error();
            assert!(
                msg.contains("runtime.module.loadbinary_")
                    && msg.contains("does not name a module blob stream"),
                "{name} with {addr:#x} from C: {msg}"
            );
        }
        let e = f.call(&[ArgValue::Handle(RawHandle::null())]).unwrap_err();
        assert!(e.message.contains("NULL"), "{name} with NULL: {e}");
        let (r, _, _) = call(g, &mut [TVMValue::default()], &mut [tc::NULLPTR]);
        assert_eq!(r, -1);
        assert!(last_error().contains("NULL"), "{name} with NULL from C");
        assert_eq!(unsafe { TVMFuncFree(g) }, 0);
    }

    // The Relax builtins that take the VM context.
    let addr = 0x4141_4141usize;
    let heap = global(c"vm.builtin.alloc_shape_heap");
    let mut v = [
        TVMValue {
            v_handle: addr as *mut c_void,
        },
        TVMValue { v_int64: 4 },
    ];
    let (r, _, _) = call(heap, &mut v, &mut [tc::OPAQUE_HANDLE, tc::INT]);
    assert_eq!(r, -1);
    assert!(last_error().contains("does not name a Relax VM"));
    let closure = global(c"vm.builtin.alloc_shape_heap");
    let invoke = global(c"vm.builtin.invoke_closure");
    let mut v = [
        TVMValue {
            v_handle: addr as *mut c_void,
        },
        TVMValue { v_handle: closure },
    ];
    let (r, _, _) = call(
        invoke,
        &mut v,
        &mut [tc::OPAQUE_HANDLE, tc::PACKED_FUNC_HANDLE],
    );
    assert_eq!(r, -1);
    assert!(last_error().contains("does not name a Relax VM"));
    // SAFETY: as above: the builtins look the context up among the VMs running on this thread.
    let h = unsafe { RawHandle::new(addr as *mut c_void) };
    let e = registry::get("vm.builtin.alloc_shape_heap")
        .unwrap()
        .call(&[ArgValue::Handle(h), ArgValue::Int(4)])
        .unwrap_err();
    assert!(e.message.contains("does not name a Relax VM"), "{e}");
    for f in [heap, closure, invoke] {
        assert_eq!(unsafe { TVMFuncFree(f) }, 0);
    }
}

/// A handle that safe code can get (here `device_api.cpu`'s) is not taken as a stream, a
/// plugin table or a plugin's device API by the globals that would read it as one.
#[test]
fn handles_from_returned_values_are_not_taken_as_streams_or_plugin_tables() {
    use tvm_runtime::device::{self, null::NULL_DEVICE};
    use tvm_runtime::packed_func::registry;
    use tvm_runtime::{ArgValue, RetValue};
    let cpu_api = match registry::get("device_api.cpu").unwrap().call(&[]).unwrap() {
        RetValue::Handle(h) => h,
        other => panic!("device_api.cpu returned {other:?}"),
    };
    let set_stream = registry::get("runtime.TVMSetStream").unwrap();
    let err = set_stream
        .call(&[
            ArgValue::Int(1),
            ArgValue::Int(0),
            ArgValue::Handle(cpu_api),
        ])
        .unwrap_err();
    assert!(err.to_string().contains("not a live stream"), "{err}");
    // NULL (the default stream) and a stream the runtime created are taken; a freed one not.
    let null = tvm_runtime::packed_func::RawHandle::null();
    set_stream
        .call(&[ArgValue::Int(1), ArgValue::Int(0), ArgValue::Handle(null)])
        .unwrap();
    device::null::install();
    let dev = [
        ArgValue::Int(NULL_DEVICE.device_type as i64),
        ArgValue::Int(0),
    ];
    let s = device::streams::create_stream(NULL_DEVICE).unwrap();
    assert!(!s.is_null());
    // SAFETY: a stream the runtime just created; the handle is only compared and passed to
    // the null backend, which checks its own streams.
    let h = unsafe { tvm_runtime::packed_func::RawHandle::new(s) };
    set_stream
        .call(&[dev[0], dev[1], ArgValue::Handle(h)])
        .unwrap();
    set_stream
        .call(&[dev[0], dev[1], ArgValue::Handle(null)])
        .unwrap();
    // SAFETY: created above, no longer current, not used after.
    unsafe { device::streams::free_stream(NULL_DEVICE, s) }.unwrap();
    assert!(set_stream
        .call(&[dev[0], dev[1], ArgValue::Handle(h)])
        .is_err());
    // A plugin table is not taken by address (a build without `plugins` loads none).
    let err = registry::get("runtime.LoadDevicePlugin")
        .unwrap()
        .call(&[ArgValue::Handle(cpu_api)])
        .unwrap_err();
    let why = if cfg!(feature = "plugins") {
        "not taken by address"
    } else {
        "built without `plugins`"
    };
    assert!(err.to_string().contains(why), "{err}");
    // A Rust function named like a plugin's device API is not read as a plugin table.
    registry::register_rust("device_api.notaplugin", |_a, rv| {
        *rv = registry::get("device_api.cpu").unwrap().call(&[])?;
        Ok(())
    });
    assert_eq!(device::type_from_name("notaplugin"), None);
}
