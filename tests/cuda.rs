//! The CUDA backend: without a driver (every machine), the library loads, `kExist` is 0, a
//! TVM-style library carrying a cuda module in `__tvm_dev_mblob` loads and parses, and every
//! CUDA call fails with a clear error. With a driver, real kernels (hand-written PTX in
//! `tests/cuda_fixtures`) run through the same DSO-with-blob path TVM uses, plus copies every
//! way, streams and events, and the graph executor on CUDA-only and mixed CPU+CUDA graphs.
//! GPU tests report "skipped: ...: no CUDA driver" where there is none (tests/common/skip.rs),
//! and fail instead under `TVMRT_REQUIRE_CUDA=1`.
#![cfg(feature = "cuda")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use tvm_runtime::device::cuda::{self, CudaModule};
use tvm_runtime::device::{self, DeviceAttr};
use tvm_runtime::executor::GraphExecutor;
use tvm_runtime::module::function_info::{FunctionInfo, FunctionInfoMap};
use tvm_runtime::module::ModuleNode;
use tvm_runtime::packed_func::types::{DLDataType, DLDevice, DL_CPU, DL_CUDA, DL_CUDA_HOST};
use tvm_runtime::{ArgValue, Function, Module, NDArray, RetValue};

const F32: DLDataType = DLDataType::new(2, 32, 1);
const KERNELS_PTX: &str = include_str!("cuda_fixtures/kernels.ptx");

#[path = "common/skip.rs"]
mod skip;

/// Whether a CUDA device is here; otherwise the test is skipped (fails under
/// `TVMRT_REQUIRE_CUDA=1`).
/// `a` as a bare `DLTensor*` argument (`kTVMDLTensorHandle`), borrowing it.
fn dl(a: &NDArray) -> ArgValue<'_> {
    // SAFETY: `a` keeps its tensor alive while the argument, which borrows it, is used.
    ArgValue::DLTensor(unsafe { tvm_runtime::packed_func::TensorRef::new(a.handle()) })
}

fn gpu() -> bool {
    skip::available(cuda::device_count() > 0, "TVMRT_REQUIRE_CUDA", || {
        format!(
            "no CUDA driver ({})",
            cuda::driver_error().unwrap_or_else(|| "no CUDA device".into())
        )
    })
}

fn cuda0() -> DLDevice {
    DLDevice::new(DL_CUDA, 0)
}

fn global(name: &str) -> Function {
    Function::get_global(name).unwrap()
}

fn tags(t: &[&str]) -> Vec<String> {
    t.iter().map(|s| s.to_string()).collect()
}

/// The kernels' function-info map (as TVM's code generator records it).
fn fmap() -> FunctionInfoMap {
    let h = DLDataType::new(3, 64, 1);
    let i32t = DLDataType::new(0, 32, 1);
    let mut m = FunctionInfoMap::new();
    m.insert(
        "vadd_kernel".into(),
        FunctionInfo {
            name: "vadd_kernel".into(),
            arg_types: vec![h, h, h, i32t],
            launch_param_tags: tags(&["blockIdx.x", "threadIdx.x"]),
        },
    );
    m.insert(
        "scale_shared".into(),
        FunctionInfo {
            name: "scale_shared".into(),
            arg_types: vec![h, F32, i32t],
            launch_param_tags: tags(&["blockIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"]),
        },
    );
    m
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

fn put_u64s(b: &mut Vec<u8>, v: &[u64]) {
    b.extend_from_slice(&(v.len() as u64).to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
}

/// `__tvm_dev_mblob` contents: the library, the cuda module, and an import tree making the
/// cuda module an import of the library.
fn dev_mblob() -> Vec<u8> {
    let cuda = CudaModule::new(KERNELS_PTX.as_bytes(), "ptx", fmap());
    let mut s = Vec::new();
    s.extend_from_slice(&3u64.to_le_bytes());
    put_str(&mut s, "_lib");
    put_str(&mut s, "cuda");
    s.extend_from_slice(&cuda.save_to_binary().unwrap());
    put_str(&mut s, "_import_tree");
    put_u64s(&mut s, &[0, 1, 1]);
    put_u64s(&mut s, &[1]);
    let mut blob = (s.len() as u64).to_le_bytes().to_vec();
    blob.extend_from_slice(&s);
    blob
}

/// Builds the test library once: the host functions plus the blob, compiled with the C
/// compiler (`CC`, default `cc`).
fn dso() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda_dso");
        std::fs::create_dir_all(&dir).unwrap();
        let blob = dev_mblob();
        let mut c = String::from(
            "__attribute__((visibility(\"default\"))) const unsigned char __tvm_dev_mblob[] = {",
        );
        for (i, b) in blob.iter().enumerate() {
            if i % 24 == 0 {
                c.push('\n');
            }
            c.push_str(&format!("{b},"));
        }
        c.push_str("\n};\n");
        let blob_c = dir.join("blob.c");
        std::fs::write(&blob_c, c).unwrap();
        let out = dir.join("cuda_lib.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let st = Command::new(cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&out)
            .arg("-I")
            .arg(root.join("include"))
            .arg(root.join("tests/cuda_fixtures/host_module.c"))
            .arg(&blob_c)
            .status()
            .expect("running the C compiler");
        assert!(st.success(), "compiling the CUDA test library failed");
        out
    })
}

fn load_dso() -> Module {
    Module::load(dso().to_str().unwrap()).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Everywhere (with or without a driver).

#[test]
fn exist_attribute_and_runtime_enabled() {
    let rv = global("runtime.GetDeviceAttr")
        .call(&[
            ArgValue::Int(DL_CUDA as i64),
            ArgValue::Int(0),
            ArgValue::Int(0),
        ])
        .unwrap();
    let exist = matches!(rv, RetValue::Int(1));
    assert_eq!(exist, cuda::device_count() > 0);
    // Far past any real device.
    let rv = global("runtime.GetDeviceAttr")
        .call(&[
            ArgValue::Int(DL_CUDA as i64),
            ArgValue::Int(31),
            ArgValue::Int(0),
        ])
        .unwrap();
    assert!(matches!(rv, RetValue::Int(0)));
    assert!(device::has_backend(DL_CUDA) && device::has_backend(DL_CUDA_HOST));
    let c = std::ffi::CString::new("cuda").unwrap();
    let rv = global("runtime.RuntimeEnabled")
        .call(&[ArgValue::Str(&c)])
        .unwrap();
    assert!(matches!(rv, RetValue::Int(1)));
    for name in [
        "runtime.module.loadbinary_cuda",
        "runtime.module.loadfile_ptx",
        "runtime.module.loadfile_cubin",
    ] {
        assert!(Function::get_global(name).is_ok(), "{name}");
    }
}

#[test]
fn no_driver_errors_are_clear() {
    if cuda::device_count() > 0 {
        skip::report("a CUDA device is present: the no-driver errors cannot be checked");
        return;
    }
    let e = NDArray::empty(&[4], F32, cuda0()).unwrap_err();
    assert!(e.message.contains("CUDA"), "{}", e.message);
    let api = device::api(cuda0()).unwrap();
    let e = api.get_attr(cuda0(), DeviceAttr::DeviceName).unwrap_err();
    assert!(e.message.contains("CUDA"), "{}", e.message);
    assert!(api.create_stream(cuda0()).is_err());
    println!("no-driver message: {}", e.message);
}

#[test]
fn blob_library_loads_and_parses() {
    let m = load_dso();
    assert_eq!(m.type_key(), "library");
    let imports = m.imports();
    assert_eq!(imports.len(), 1);
    let cu = &imports[0];
    assert_eq!(cu.type_key(), "cuda");
    assert_eq!(cu.node().get_format().unwrap(), "ptx");
    assert!(cu.node().get_source("ptx").unwrap().contains("vadd_kernel"));
    let node = cu.node().as_any().downcast_ref::<CudaModule>().unwrap();
    assert_eq!(node.function_infos(), &fmap());
    // Kernels are found through the library's imports.
    assert!(m.get_function("vadd_kernel", true).unwrap().is_some());
    assert!(m.get_function("nosuch_kernel", true).unwrap().is_none());
    // A round trip through the binary form keeps everything.
    let again = node.save_to_binary().unwrap();
    let mut r = tvm_runtime::module::blob::BlobReader::new(&again, "t");
    let back = CudaModule::read(&mut r).unwrap();
    assert_eq!(back.function_infos(), &fmap());
}

#[test]
fn ptx_file_loader() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda_files");
    std::fs::create_dir_all(&dir).unwrap();
    let ptx = dir.join("kernels.ptx");
    let m = CudaModule::new(KERNELS_PTX.as_bytes(), "ptx", fmap());
    m.save_to_file(ptx.to_str().unwrap(), "").unwrap();
    assert!(dir.join("kernels.tvm_meta.json").exists());
    let loaded = Module::load(ptx.to_str().unwrap()).unwrap();
    assert_eq!(loaded.type_key(), "cuda");
    let node = loaded.node().as_any().downcast_ref::<CudaModule>().unwrap();
    assert_eq!(node.function_infos(), &fmap());
    // A cubin name without metadata next to it names the missing file.
    let e = Module::load(dir.join("missing.cubin").to_str().unwrap()).unwrap_err();
    assert!(e.message.contains("missing.cubin"), "{}", e.message);
    if cuda::device_count() > 0 {
        run_vadd_kernel_direct(&loaded);
    }
}

#[test]
fn calling_a_kernel_without_driver_errors_clearly() {
    if cuda::device_count() > 0 {
        skip::report("a CUDA device is present: the no-driver errors cannot be checked");
        return;
    }
    let m = load_dso();
    let k = m.function("vadd_kernel").unwrap();
    let null = ArgValue::Handle(tvm_runtime::packed_func::RawHandle::null());
    let e = k
        .call(&[
            null,
            null,
            null,
            ArgValue::Int(4),
            ArgValue::Int(1),
            ArgValue::Int(4),
        ])
        .unwrap_err();
    assert!(e.message.contains("CUDA driver"), "{}", e.message);
    // The host function fails cleanly when it selects the device.
    let host = m.function("vadd").unwrap();
    let a = NDArray::from_slice(&[1f32, 2.0], &[2]).unwrap();
    let e = host.call(&[dl(&a), dl(&a), dl(&a)]).unwrap_err();
    assert!(e.message.contains("CUDA"), "{}", e.message);
}

/// The library's `__tvm_module_ctx`, read through a handle of our own (which also keeps the
/// library mapped while the test looks at it).
fn module_ctx(lib: &libloading::Library) -> *mut std::ffi::c_void {
    // SAFETY: TVM output exports `__tvm_module_ctx` as a pointer variable.
    unsafe {
        **lib
            .get::<*mut *mut std::ffi::c_void>(b"__tvm_module_ctx\0")
            .unwrap()
    }
}

/// Loading one library twice gives one `__tvm_module_ctx` for both modules: whichever module is
/// dropped first, the other's host code must still resolve its kernels through a live module
/// (the slot used to be left naming the freed one: "mod_node is not a module", or worse).
#[test]
fn two_loads_of_one_library_keep_the_context_alive() {
    // A copy of its own: the other tests load `dso()` in parallel, which would share its slot.
    let path = dso().with_file_name("cuda_lib_ctx.so");
    std::fs::copy(dso(), &path).unwrap();
    let load = || Module::load(path.to_str().unwrap()).unwrap();
    // SAFETY: the test library is plain C without initialisers.
    let raw = unsafe { libloading::Library::new(&path) }.unwrap();
    // The host function launches its kernel on whatever pointers it gets: with a GPU the
    // tensor must live on it (a host pointer would fault on the device and poison the
    // context every test shares), without one a host tensor shows the call's error.
    let gpu_here = cuda::device_count() > 0;
    let a = if gpu_here {
        let mut d = NDArray::empty(&[2], F32, cuda0()).unwrap();
        d.copy_from_slice(&[1f32, 2.0]).unwrap();
        d
    } else {
        NDArray::from_slice(&[1f32, 2.0], &[2]).unwrap()
    };
    let host_call_is_clean = |m: &Module| {
        let r = m.function("vadd").unwrap().call(&[dl(&a), dl(&a), dl(&a)]);
        if gpu_here {
            r.unwrap();
        } else {
            let e = r.unwrap_err();
            assert!(e.message.contains("CUDA"), "{}", e.message);
        }
    };
    for drop_first_load_first in [true, false] {
        let m1 = load();
        let first = m1.as_object().as_ptr() as *mut std::ffi::c_void;
        assert_eq!(module_ctx(&raw), first);
        let m2 = load();
        assert_eq!(
            module_ctx(&raw),
            first,
            "the second load shares the first's context"
        );
        let survivor = if drop_first_load_first {
            drop(m1);
            m2
        } else {
            drop(m2);
            m1
        };
        assert_eq!(module_ctx(&raw), first);
        host_call_is_clean(&survivor);
        drop(survivor);
        assert!(
            module_ctx(&raw).is_null(),
            "the context is cleared with its module"
        );
    }
    if gpu_here {
        // vadd(a, a, a) doubled `a` in place once per pass.
        assert_eq!(a.to_vec::<f32>().unwrap(), [4.0, 8.0]);
    }
}

// ---------------------------------------------------------------------------------------------
// With a GPU.

fn run_vadd_kernel_direct(m: &Module) {
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
    let (mut da, mut db, dc) = (
        NDArray::empty(&[n as i64], F32, cuda0()).unwrap(),
        NDArray::empty(&[n as i64], F32, cuda0()).unwrap(),
        NDArray::empty(&[n as i64], F32, cuda0()).unwrap(),
    );
    da.copy_from_slice(&a).unwrap();
    db.copy_from_slice(&b).unwrap();
    let k = m.function("vadd_kernel").unwrap();
    k.call(&[
        dl(&da),
        dl(&db),
        dl(&dc),
        ArgValue::Int(n as i64),
        ArgValue::Int(n.div_ceil(128) as i64),
        ArgValue::Int(128),
    ])
    .unwrap();
    let c = dc.to_vec::<f32>().unwrap();
    assert!(c.iter().enumerate().all(|(i, &x)| x == 3.0 * i as f32));
}

#[test]
fn kernels_through_the_dso_path() {
    if !gpu() {
        return;
    }
    let m = load_dso();
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    let mut da = NDArray::empty(&[n as i64], F32, cuda0()).unwrap();
    let mut db = NDArray::empty(&[n as i64], F32, cuda0()).unwrap();
    let dc = NDArray::empty(&[n as i64], F32, cuda0()).unwrap();
    da.copy_from_slice(&a).unwrap();
    db.copy_from_slice(&b).unwrap();
    let vadd = m.function("vadd").unwrap();
    vadd.call(&[dl(&da), dl(&db), dl(&dc)]).unwrap();
    let c = dc.to_vec::<f32>().unwrap();
    for i in 0..n {
        assert_eq!(c[i], a[i] + b[i]);
    }
    // Dynamic shared memory and a float32 scalar argument.
    let scale = m.function("scale").unwrap();
    scale.call(&[dl(&dc), ArgValue::Float(2.0)]).unwrap();
    let c2 = dc.to_vec::<f32>().unwrap();
    for i in 0..n {
        assert_eq!(c2[i], 2.0 * c[i]);
    }
    run_vadd_kernel_direct(&m);
    // A launch the device refuses names the grid and block and carries the PTX source.
    let k = m.function("vadd_kernel").unwrap();
    let e = k
        .call(&[
            dl(&da),
            dl(&db),
            dl(&dc),
            ArgValue::Int(n as i64),
            ArgValue::Int(1),
            ArgValue::Int(1 << 20),
        ])
        .unwrap_err();
    assert!(e.message.starts_with("CUDALaunch Error: "), "{}", e.message);
    assert!(e.message.contains("block=(1048576,1,1)"), "{}", e.message);
    assert!(
        e.message.contains("// func_name=vadd_kernel"),
        "{}",
        e.message
    );
}

#[test]
fn device_attributes() {
    if !gpu() {
        return;
    }
    let api = device::api(cuda0()).unwrap();
    let get = |k| api.get_attr(cuda0(), k).unwrap();
    assert!(matches!(get(DeviceAttr::Exist), RetValue::Int(1)));
    assert!(matches!(get(DeviceAttr::WarpSize), RetValue::Int(32)));
    assert!(matches!(get(DeviceAttr::MaxThreadsPerBlock), RetValue::Int(n) if n >= 512));
    for k in [
        DeviceAttr::MaxSharedMemoryPerBlock,
        DeviceAttr::MaxClockRate,
        DeviceAttr::MultiProcessorCount,
        DeviceAttr::MaxRegistersPerBlock,
        DeviceAttr::L2CacheSizeBytes,
        DeviceAttr::TotalGlobalMemory,
        DeviceAttr::AvailableGlobalMemory,
    ] {
        assert!(matches!(get(k), RetValue::Int(n) if n > 0), "{k:?}");
    }
    assert!(matches!(get(DeviceAttr::ComputeVersion), RetValue::Str(s) if s.contains('.')));
    assert!(matches!(get(DeviceAttr::DeviceName), RetValue::Str(s) if !s.is_empty()));
    assert!(matches!(get(DeviceAttr::MaxThreadDimensions), RetValue::Str(s) if s.starts_with('[')));
    assert!(matches!(get(DeviceAttr::ApiVersion), RetValue::Int(_)));
    assert!(matches!(get(DeviceAttr::GcnArch), RetValue::Null));
}

#[test]
fn copies_every_way() {
    if !gpu() {
        return;
    }
    let data: Vec<f32> = (0..4096).map(|i| i as f32 * 0.25).collect();
    let shape = [data.len() as i64];
    let host = NDArray::from_slice(&data, &shape).unwrap();
    let mut d1 = NDArray::empty(&shape, F32, cuda0()).unwrap();
    let mut d2 = NDArray::empty(&shape, F32, cuda0()).unwrap();
    let mut pinned = NDArray::empty(&shape, F32, DLDevice::new(DL_CUDA_HOST, 0)).unwrap();
    let mut managed = NDArray::empty(&shape, F32, DLDevice::new(13, 0)).unwrap();
    host.copy_to(&mut d1).unwrap(); // H2D
    d1.copy_to(&mut d2).unwrap(); // D2D
    d2.copy_to(&mut pinned).unwrap(); // D2H (pinned)
    pinned.copy_to(&mut managed).unwrap(); // H2D (managed)
    let mut back = NDArray::empty(&shape, F32, DLDevice::CPU).unwrap();
    managed.copy_to(&mut back).unwrap(); // D2H
    assert_eq!(back.to_vec::<f32>().unwrap(), data);
    assert_eq!(pinned.to_vec::<f32>().unwrap(), data);
    // Views with byte offsets.
    let v = d2.view(&[4], F32, 8).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), data[2..6].to_vec());
    if cuda::device_count() > 1 {
        let mut other = NDArray::empty(&shape, F32, DLDevice::new(DL_CUDA, 1)).unwrap();
        d1.copy_to(&mut other).unwrap(); // peer
        assert_eq!(other.to_vec::<f32>().unwrap(), data);
    }
    // Workspace reuse.
    let api = device::api(cuda0()).unwrap();
    let w1 = api.alloc_workspace(cuda0(), 1000, F32).unwrap();
    // SAFETY: the pointer came from this backend's alloc_workspace and is not used again.
    unsafe { api.free_workspace(cuda0(), w1) }.unwrap();
    let w2 = api.alloc_workspace(cuda0(), 2000, F32).unwrap();
    assert_eq!(w1, w2);
    // SAFETY: the pointer came from this backend's alloc_workspace and is not used again.
    unsafe { api.free_workspace(cuda0(), w2) }.unwrap();
    // SAFETY: a second free of `w2`, which the backend's bookkeeping refuses (what this
    // checks) without touching the memory.
    assert!(unsafe { api.free_workspace(cuda0(), w2) }.is_err());
}

#[test]
fn streams_and_events() {
    if !gpu() {
        return;
    }
    let m = load_dso();
    let api = device::api(cuda0()).unwrap();
    let s1 = api.create_stream(cuda0()).unwrap();
    let s2 = api.create_stream(cuda0()).unwrap();
    assert!(!s1.is_null() && s1 != s2);
    let n = 1 << 16;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut da = NDArray::empty(&[n as i64], F32, cuda0()).unwrap();
    let dc = NDArray::empty(&[n as i64], F32, cuda0()).unwrap();
    da.copy_from_slice(&a).unwrap();
    // Launch on s1 (the thread's current stream), make s2 wait for it, copy out on s2.
    // SAFETY: NULL or a live stream of this device, freed only after it stops being current.
    unsafe { api.set_stream(cuda0(), s1) }.unwrap();
    assert_eq!(api.current_stream(cuda0()), s1);
    m.function("vadd")
        .unwrap()
        .call(&[dl(&da), dl(&da), dl(&dc)])
        .unwrap();
    // SAFETY: live streams of this device.
    unsafe { api.sync_stream_from_to(cuda0(), s1, s2) }.unwrap();
    let mut out = vec![0f32; n];
    // SAFETY: `dc` holds n floats on the device; `out` holds n floats.
    unsafe {
        api.copy_data(
            dc.dltensor().data,
            0,
            out.as_mut_ptr() as *mut std::ffi::c_void,
            0,
            n * 4,
            cuda0(),
            DLDevice::CPU,
            F32,
            s2,
        )
    }
    .unwrap();
    // SAFETY: a live stream of this device.
    unsafe { api.stream_sync(cuda0(), s2) }.unwrap();
    assert!(out.iter().enumerate().all(|(i, &x)| x == 2.0 * i as f32));
    // SAFETY: NULL or a live stream of this device, freed only after it stops being current.
    unsafe { api.set_stream(cuda0(), std::ptr::null_mut()) }.unwrap();
    // SAFETY: the stream came from create_stream, is not current, and is not used again.
    unsafe { api.free_stream(cuda0(), s1) }.unwrap();
    // SAFETY: the stream came from create_stream, is not current, and is not used again.
    unsafe { api.free_stream(cuda0(), s2) }.unwrap();
    // The C API's stream functions route to the backend too.
    let f = global("runtime.get_cuda_stream").call(&[]).unwrap();
    assert!(matches!(f, RetValue::Handle(p) if p.is_null()) || matches!(f, RetValue::Null));
}

const CUDA_GRAPH: &str = r#"{
  "nodes": [
    {"op": "null", "name": "x", "inputs": []},
    {"op": "null", "name": "y", "inputs": []},
    {"op": "tvm_op", "name": "s", "attrs": {"func_name": "vadd", "num_inputs": "2",
      "num_outputs": "1", "flatten_data": "0"}, "inputs": [[0, 0, 0], [1, 0, 0]]},
    {"op": "tvm_op", "name": "t", "attrs": {"func_name": "vadd", "num_inputs": "2",
      "num_outputs": "1", "flatten_data": "0"}, "inputs": [[2, 0, 0], [1, 0, 0]]}
  ],
  "arg_nodes": [0, 1],
  "heads": [[3, 0, 0]],
  "attrs": {
    "dltype": ["list_str", ["float32", "float32", "float32", "float32"]],
    "storage_id": ["list_int", [0, 1, 2, 3]],
    "shape": ["list_shape", [[300], [300], [300], [300]]],
    "device_index": ["list_int", [2, 2, 2, 2]]
  },
  "node_row_ptr": [0, 1, 2, 3, 4]
}"#;

/// x on the CPU, copied to the GPU, added to itself there, copied back.
const MIXED_GRAPH: &str = r#"{
  "nodes": [
    {"op": "null", "name": "x", "inputs": []},
    {"op": "tvm_op", "name": "to_gpu", "attrs": {"func_name": "__copy", "num_inputs": "1",
      "num_outputs": "1", "flatten_data": "0"}, "inputs": [[0, 0, 0]]},
    {"op": "tvm_op", "name": "s", "attrs": {"func_name": "vadd", "num_inputs": "2",
      "num_outputs": "1", "flatten_data": "0"}, "inputs": [[1, 0, 0], [1, 0, 0]]},
    {"op": "tvm_op", "name": "to_cpu", "attrs": {"func_name": "__copy", "num_inputs": "1",
      "num_outputs": "1", "flatten_data": "0"}, "inputs": [[2, 0, 0]]}
  ],
  "arg_nodes": [0],
  "heads": [[3, 0, 0]],
  "attrs": {
    "dltype": ["list_str", ["float32", "float32", "float32", "float32"]],
    "storage_id": ["list_int", [0, 1, 2, 3]],
    "shape": ["list_shape", [[300], [300], [300], [300]]],
    "device_index": ["list_int", [1, 2, 2, 1]]
  },
  "node_row_ptr": [0, 1, 2, 3, 4]
}"#;

#[test]
fn graph_executor_on_cuda() {
    if !gpu() {
        return;
    }
    let x: Vec<f32> = (0..300).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..300).map(|i| 1.0 + i as f32).collect();
    let ex = GraphExecutor::new(CUDA_GRAPH, load_dso(), &[cuda0()]).unwrap();
    ex.set_input("x", &NDArray::from_slice(&x, &[300]).unwrap())
        .unwrap();
    ex.set_input("y", &NDArray::from_slice(&y, &[300]).unwrap())
        .unwrap();
    ex.run().unwrap();
    let out = ex.output(0).unwrap();
    assert_eq!(out.device(), cuda0());
    let got = out.to_vec::<f32>().unwrap();
    for i in 0..300 {
        assert_eq!(got[i], x[i] + 2.0 * y[i]);
    }
}

#[test]
fn graph_executor_mixed_cpu_and_cuda() {
    if !gpu() {
        return;
    }
    let x: Vec<f32> = (0..300).map(|i| i as f32 - 7.0).collect();
    let ex = GraphExecutor::new(MIXED_GRAPH, load_dso(), &[DLDevice::CPU, cuda0()]).unwrap();
    ex.set_input("x", &NDArray::from_slice(&x, &[300]).unwrap())
        .unwrap();
    ex.run().unwrap();
    let out = ex.output(0).unwrap();
    assert_eq!(out.device().device_type, DL_CPU);
    let got = out.to_vec::<f32>().unwrap();
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    assert_eq!(got, want);
}

#[test]
fn multithreaded_launches_use_per_thread_state() {
    if !gpu() {
        return;
    }
    let m = load_dso();
    let results: HashMap<usize, bool> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let m = m.clone();
                s.spawn(move || {
                    let n = 512;
                    let a: Vec<f32> = (0..n).map(|i| (i + t) as f32).collect();
                    let mut da = NDArray::empty(&[n as i64], F32, cuda0()).unwrap();
                    let dc = NDArray::empty(&[n as i64], F32, cuda0()).unwrap();
                    da.copy_from_slice(&a).unwrap();
                    m.function("vadd")
                        .unwrap()
                        .call(&[dl(&da), dl(&da), dl(&dc)])
                        .unwrap();
                    let c = dc.to_vec::<f32>().unwrap();
                    (t, c.iter().zip(&a).all(|(c, a)| *c == 2.0 * a))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.values().all(|&ok| ok));
}
