//! Vulkan backend tests on a real Vulkan implementation (Mesa's lavapipe in CI).
//!
//! Kernels are GLSL compute shaders compiled to SPIR-V with `glslangValidator`, following
//! TVM's conventions (storage buffers at set 0, binding = argument index; scalars as 8-byte
//! push-constant slots or a uniform block; the entry point named after the function). They
//! are packaged as TVM packages them: a `vulkan` module in the `__tvm_dev_mblob` of a shared
//! library (built here with the C compiler) whose host functions find the kernels through
//! `TVMBackendGetFuncFromEnv` and launch them through `TVMFuncCall`.
//!
//! Without a Vulkan loader or driver every test reports "skipped: ...: no Vulkan driver"
//! (tests/common/skip.rs) and passes,
//! unless TVMRT_REQUIRE_VULKAN is set (the test command sets it where lavapipe is installed).
#![cfg(feature = "vulkan")]

use std::ffi::c_void;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use tvm_runtime::device::vulkan;
use tvm_runtime::device::{self, DeviceAttr};
use tvm_runtime::executor::GraphExecutor;
use tvm_runtime::packed_func::types::{DLDataType, DLDevice, DL_VULKAN};
use tvm_runtime::packed_func::RawHandle;
use tvm_runtime::{ArgValue, Module, NDArray, RetValue};

const F32: DLDataType = DLDataType {
    code: 2,
    bits: 32,
    lanes: 1,
};
const VK0: DLDevice = DLDevice {
    device_type: DL_VULKAN,
    device_id: 0,
};

#[path = "common/skip.rs"]
mod skip;

/// `a` as a bare `DLTensor*` argument (`kTVMDLTensorHandle`), borrowing it.
fn dl(a: &NDArray) -> ArgValue<'_> {
    // SAFETY: `a` keeps its tensor alive while the argument, which borrows it, is used.
    ArgValue::DLTensor(unsafe { tvm_runtime::packed_func::TensorRef::new(a.handle()) })
}

fn have_vulkan() -> bool {
    skip::available(vulkan::device_count() > 0, "TVMRT_REQUIRE_VULKAN", || {
        "no Vulkan driver".into()
    })
}

#[path = "common/vulkan_kernels.rs"]
mod kernels;
use kernels::*;

/// The loaded test library (loaded once: its host code caches kernel handles in statics).
fn lib() -> &'static Module {
    static LIB: OnceLock<Module> = OnceLock::new();
    LIB.get_or_init(|| Module::load(build_dso().to_str().unwrap()).unwrap())
}

fn sync() {
    device::api(VK0).unwrap().sync(VK0).unwrap();
}

fn pseudo(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2001) as f32 / 100.0 - 10.0
        })
        .collect()
}

fn on_vulkan(data: &[f32]) -> NDArray {
    let mut a = NDArray::empty(&[data.len() as i64], F32, VK0).unwrap();
    a.copy_from_slice(data).unwrap();
    a
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn attributes() {
    if !have_vulkan() {
        return;
    }
    let api = device::api(VK0).unwrap();
    let get = |k| api.get_attr(VK0, k).unwrap();
    assert!(matches!(get(DeviceAttr::Exist), RetValue::Int(1)));
    let n = vulkan::device_count() as i32;
    assert!(matches!(
        api.get_attr(DLDevice::new(DL_VULKAN, n), DeviceAttr::Exist)
            .unwrap(),
        RetValue::Int(0)
    ));
    assert!(matches!(get(DeviceAttr::MaxThreadsPerBlock), RetValue::Int(x) if x >= 128));
    assert!(matches!(get(DeviceAttr::WarpSize), RetValue::Int(1)));
    assert!(matches!(get(DeviceAttr::MaxSharedMemoryPerBlock), RetValue::Int(x) if x >= 16384));
    assert!(matches!(get(DeviceAttr::ComputeVersion), RetValue::Str(s) if s.starts_with("1.")));
    assert!(matches!(get(DeviceAttr::DeviceName), RetValue::Str(s) if !s.is_empty()));
    assert!(
        matches!(get(DeviceAttr::MaxThreadDimensions), RetValue::Str(s) if s.starts_with('[') && s.matches(',').count() == 2)
    );
    assert!(matches!(get(DeviceAttr::ApiVersion), RetValue::Int(x) if x > 0));
    assert!(matches!(get(DeviceAttr::DriverVersion), RetValue::Str(s) if s.contains('.')));
    assert!(matches!(get(DeviceAttr::TotalGlobalMemory), RetValue::Int(x) if x > 0));
    for k in [
        DeviceAttr::MaxClockRate,
        DeviceAttr::MultiProcessorCount,
        DeviceAttr::MaxRegistersPerBlock,
        DeviceAttr::GcnArch,
        DeviceAttr::L2CacheSizeBytes,
        DeviceAttr::AvailableGlobalMemory,
        DeviceAttr::ImagePitchAlignment,
    ] {
        assert!(matches!(get(k), RetValue::Null), "{k:?}");
    }
    // Through the global function Python uses.
    let f = tvm_runtime::packed_func::registry::get("runtime.GetDeviceAttr").unwrap();
    let rv = f
        .call(&[ArgValue::Int(7), ArgValue::Int(0), ArgValue::Int(0)])
        .unwrap();
    assert!(matches!(rv, RetValue::Int(1)));
    let f = tvm_runtime::packed_func::registry::get("runtime.RuntimeEnabled").unwrap();
    let c = std::ffi::CString::new("vulkan").unwrap();
    assert!(matches!(
        f.call(&[ArgValue::Str(&c)]).unwrap(),
        RetValue::Int(1)
    ));
    // A device that does not exist: a clear error for attributes and allocation.
    let bad = DLDevice::new(DL_VULKAN, 99);
    let e = api.get_attr(bad, DeviceAttr::DeviceName).unwrap_err();
    assert!(e.message.contains("vulkan(99)"), "{}", e.message);
    assert!(NDArray::empty(&[4], F32, bad).is_err());
}

#[test]
fn target_json_is_complete() {
    if !have_vulkan() {
        return;
    }
    let j: serde_json::Value = serde_json::from_str(&vulkan::target_json(0).unwrap()).unwrap();
    assert_eq!(j["kind"], "vulkan");
    assert!(j["max_num_threads"].as_u64().unwrap() >= 128);
    assert_eq!(j["thread_warp_size"], 1);
    assert!(j["supports_int64"].is_boolean());
    let f =
        tvm_runtime::packed_func::registry::get("device_api.vulkan.get_target_property").unwrap();
    let p = std::ffi::CString::new("max_num_threads").unwrap();
    let rv = f.call(&[ArgValue::Device(VK0), ArgValue::Str(&p)]).unwrap();
    assert_eq!(
        rv.as_i64().unwrap() as u64,
        j["max_num_threads"].as_u64().unwrap()
    );
}

#[test]
fn copies_in_every_direction_with_odd_sizes_and_offsets() {
    if !have_vulkan() {
        return;
    }
    for &n in &[1usize, 3, 7, 1000, 4097, (1 << 20) + 3, (3 << 20) + 5] {
        let host = pseudo(n, n as u32);
        // Host → device → host.
        let a = on_vulkan(&host);
        assert_eq!(a.to_vec::<f32>().unwrap(), host, "round trip of {n}");
        // Device → device (same device).
        let mut b = NDArray::empty(&[n as i64], F32, VK0).unwrap();
        a.copy_to(&mut b).unwrap();
        assert_eq!(b.to_vec::<f32>().unwrap(), host, "device copy of {n}");
        // Device → host NDArray and host NDArray → device.
        let mut h = NDArray::empty(&[n as i64], F32, DLDevice::CPU).unwrap();
        b.copy_to(&mut h).unwrap();
        assert_eq!(h.to_vec::<f32>().unwrap(), host);
        let mut c = NDArray::empty(&[n as i64], F32, VK0).unwrap();
        h.copy_to(&mut c).unwrap();
        assert_eq!(c.to_vec::<f32>().unwrap(), host);
    }
    // Views at odd offsets on both sides.
    let n = 1001usize;
    let host = pseudo(n, 9);
    let a = on_vulkan(&host);
    let b = on_vulkan(&vec![0.0; n]);
    for &(from, to, len) in &[
        (0usize, 5usize, 3usize),
        (13, 0, 500),
        (1, 999, 2),
        (997, 3, 4),
    ] {
        let src = a.view(&[len as i64], F32, (from * 4) as u64).unwrap();
        let dst = b.view(&[len as i64], F32, (to * 4) as u64).unwrap();
        // SAFETY: `b` and its view are used by this thread only, and `b` is not read while the
        // copy runs.
        unsafe { src.copy_to_unchecked(&dst) }.unwrap();
        let got = b.to_vec::<f32>().unwrap();
        assert_eq!(&got[to..to + len], &host[from..from + len]);
        // Device view → host and host → device view.
        assert_eq!(src.to_vec::<f32>().unwrap(), &host[from..from + len]);
        let fresh = pseudo(len, (from + to) as u32);
        // SAFETY: as above: this thread alone uses `b` and its view.
        unsafe { dst.copy_from_slice_unchecked(&fresh) }.unwrap();
        assert_eq!(&b.to_vec::<f32>().unwrap()[to..to + len], &fresh[..]);
    }
    // Byte-granular copies through the raw device API (odd byte counts and offsets).
    let api = device::api(VK0).unwrap();
    let bytes: Vec<u8> = (0..777u32).map(|i| (i * 7 + 3) as u8).collect();
    let p = api.alloc_data_space(VK0, 1000, 64, F32).unwrap();
    let mut back = vec![0u8; 777];
    // SAFETY: ranges inside the 1000-byte allocation and the host vectors.
    unsafe {
        api.copy_data(
            bytes.as_ptr() as *const c_void,
            0,
            p,
            13,
            777,
            DLDevice::CPU,
            VK0,
            F32,
            std::ptr::null_mut(),
        )
        .unwrap();
        api.copy_data(
            p,
            13,
            back.as_mut_ptr() as *mut c_void,
            0,
            777,
            VK0,
            DLDevice::CPU,
            F32,
            std::ptr::null_mut(),
        )
        .unwrap();
        // Out of range: refused with a message.
        let e = api
            .copy_data(
                bytes.as_ptr() as *const c_void,
                0,
                p,
                500,
                777,
                DLDevice::CPU,
                VK0,
                F32,
                std::ptr::null_mut(),
            )
            .unwrap_err();
        assert!(e.message.contains("outside"), "{}", e.message);
    }
    assert_eq!(back, bytes);
    // SAFETY: the pointer came from this backend's alloc_data_space and is not used again.
    unsafe { api.free_data_space(VK0, p) }.unwrap();
    // Large copies (pipelined in pieces) at odd byte offsets on both sides.
    let big = 9 * (1 << 20) + 7;
    let bytes: Vec<u8> = (0..big as u32).map(|i| (i % 251) as u8).collect();
    let p = api.alloc_data_space(VK0, big + 20, 64, F32).unwrap();
    let mut back = vec![0u8; big + 3];
    // SAFETY: ranges inside the allocation and the host vectors.
    unsafe {
        api.copy_data(
            bytes.as_ptr().add(1) as *const c_void,
            0,
            p,
            13,
            big - 1,
            DLDevice::CPU,
            VK0,
            F32,
            std::ptr::null_mut(),
        )
        .unwrap();
        api.copy_data(
            p,
            13,
            back.as_mut_ptr() as *mut c_void,
            3,
            big - 1,
            VK0,
            DLDevice::CPU,
            F32,
            std::ptr::null_mut(),
        )
        .unwrap();
    }
    assert!(back[3..3 + big - 1] == bytes[1..]);
    // SAFETY: the pointer came from this backend's alloc_data_space and is not used again.
    unsafe { api.free_data_space(VK0, p) }.unwrap();
    // Workspace and streams.
    let w = api.alloc_workspace(VK0, 123, F32).unwrap();
    // SAFETY: the pointer came from this backend's alloc_workspace and is not used again.
    unsafe { api.free_workspace(VK0, w) }.unwrap();
    let s = api.create_stream(VK0).unwrap();
    // SAFETY: a live stream of this device.
    unsafe { api.stream_sync(VK0, s) }.unwrap();
    // SAFETY: the stream came from create_stream, is not current, and is not used again.
    unsafe { api.free_stream(VK0, s) }.unwrap();
}

#[test]
fn elementwise_push_constants_and_ubo() {
    if !have_vulkan() {
        return;
    }
    let m = lib();
    for (host_fn, n) in [
        ("vadd_host", 1000usize),
        ("vadd_ubo_host", 4099),
        ("vadd_host", 1),
    ] {
        let a = pseudo(n, 1);
        let b = pseudo(n, 2);
        let (va, vb) = (on_vulkan(&a), on_vulkan(&b));
        let vc = NDArray::empty(&[n as i64], F32, VK0).unwrap();
        let f = m.function(host_fn).unwrap();
        f.call(&[dl(&va), dl(&vb), dl(&vc), ArgValue::Float(0.5)])
            .unwrap();
        let got = vc.to_vec::<f32>().unwrap();
        for i in 0..n {
            let want = a[i] + 0.5 * b[i];
            assert!(
                (got[i] - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{host_fn} [{i}]"
            );
        }
    }
    // The entry function (`__tvm_main__` names vadd_host).
    assert!(m.get_function("__tvm_main__", false).unwrap().is_some());
}

#[test]
fn reduction_with_shared_memory_and_kernel_sequence() {
    if !have_vulkan() {
        return;
    }
    let m = lib();
    for &n in &[1usize, 127, 128, 129, 100_000] {
        let a: Vec<f32> = pseudo(n, 3)
            .iter()
            .map(|x| (x * 4.0).round() / 4.0)
            .collect();
        let groups = n.div_ceil(128);
        let va = on_vulkan(&a);
        let part = NDArray::empty(&[groups as i64], F32, VK0).unwrap();
        let out = NDArray::empty(&[1], F32, VK0).unwrap();
        m.function("sum_host")
            .unwrap()
            .call(&[dl(&va), dl(&part), dl(&out)])
            .unwrap();
        let want: f64 = a.iter().map(|&x| x as f64).sum();
        let got = out.to_vec::<f32>().unwrap()[0] as f64;
        assert!(
            (got - want).abs() <= 1e-3 * want.abs().max(1.0),
            "n={n}: {got} vs {want}"
        );
        // The partial sums too (the first kernel's output).
        let parts = part.to_vec::<f32>().unwrap();
        for (g, p) in parts.iter().enumerate() {
            let w: f64 = a[g * 128..((g + 1) * 128).min(n)]
                .iter()
                .map(|&x| x as f64)
                .sum();
            assert!((*p as f64 - w).abs() <= 1e-3 * w.abs().max(1.0));
        }
    }
}

#[test]
fn many_dispatches_before_a_sync() {
    if !have_vulkan() {
        return;
    }
    // More launches than one submission holds: the stream submits on its own.
    let m = lib();
    let n = 256usize;
    let x = on_vulkan(&vec![1.0; n]);
    let y = on_vulkan(&vec![0.0; n]);
    let f = m.function("vadd_ubo_host").unwrap();
    for _ in 0..1200 {
        f.call(&[dl(&y), dl(&x), dl(&y), ArgValue::Float(1.0)])
            .unwrap();
    }
    sync();
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 1200.0));
}

#[test]
fn graph_executor_runs_vulkan_kernels() {
    if !have_vulkan() {
        return;
    }
    // s = x + y; r = relu(s); out = r + w
    let graph = r#"{
      "nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "null", "name": "y", "inputs": []},
        {"op": "null", "name": "w", "inputs": []},
        {"op": "tvm_op", "name": "s", "attrs": {"func_name": "vadd_host", "num_inputs": "2",
          "num_outputs": "1", "flatten_data": "0"}, "inputs": [[0, 0, 0], [1, 0, 0]]},
        {"op": "tvm_op", "name": "r", "attrs": {"func_name": "relu_host", "num_inputs": "1",
          "num_outputs": "1", "flatten_data": "0"}, "inputs": [[3, 0, 0]]},
        {"op": "tvm_op", "name": "o", "attrs": {"func_name": "vadd_host", "num_inputs": "2",
          "num_outputs": "1", "flatten_data": "0"}, "inputs": [[4, 0, 0], [2, 0, 0]]}
      ],
      "arg_nodes": [0, 1, 2],
      "heads": [[5, 0, 0]],
      "attrs": {
        "dltype": ["list_str", ["float32", "float32", "float32", "float32", "float32", "float32"]],
        "storage_id": ["list_int", [0, 1, 2, 3, 4, 3]],
        "shape": ["list_shape", [[3, 37], [3, 37], [3, 37], [3, 37], [3, 37], [3, 37]]],
        "device_index": ["list_int", [7, 7, 7, 7, 7, 7]]
      },
      "node_row_ptr": [0, 1, 2, 3, 4, 5, 6]
    }"#;
    let ex = GraphExecutor::new(graph, lib().clone(), &[VK0]).unwrap();
    let n = 3 * 37;
    let (x, y, w) = (pseudo(n, 4), pseudo(n, 5), pseudo(n, 6));
    for (name, v) in [("x", &x), ("y", &y), ("w", &w)] {
        ex.set_input(name, &NDArray::from_slice(v, &[3, 37]).unwrap())
            .unwrap();
    }
    ex.run().unwrap();
    let out = ex.output(0).unwrap();
    assert_eq!(out.device(), VK0);
    let mut host = NDArray::empty(&[3, 37], F32, DLDevice::CPU).unwrap();
    ex.copy_output_to(0, &mut host).unwrap();
    let got = host.to_vec::<f32>().unwrap();
    for i in 0..n {
        let want = (x[i] + y[i]).max(0.0) + w[i];
        assert!((got[i] - want).abs() <= 1e-5 * want.abs().max(1.0), "[{i}]");
    }
}

#[test]
fn module_formats_round_trip() {
    if !have_vulkan() {
        return;
    }
    // The device module the library imports, saved and loaded back (binary and file forms).
    let vk_mod = lib()
        .imports()
        .into_iter()
        .find(|m| m.type_key() == "vulkan")
        .expect("the library imports its vulkan module");
    assert_eq!(vk_mod.node().get_format().unwrap(), "vulkan");
    let bytes = vk_mod.node().save_to_binary().unwrap();
    // Same content as written by hand (entries may come in another order).
    assert_eq!(bytes.len(), vulkan_module_bytes().len());
    let loader =
        tvm_runtime::packed_func::registry::get("runtime.module.loadbinary_vulkan").unwrap();
    let mut r = tvm_runtime::module::blob::BlobReader::new(&bytes, "saved");
    let again = tvm_runtime::module::blob::call_loader(&loader, &mut r).unwrap();
    let again = Module::from_object(again.into_object().unwrap()).unwrap();
    assert!(again.node().save_to_binary().unwrap() == bytes);
    let dir = tmpdir();
    let path = dir.join("saved.vulkan");
    vk_mod
        .node()
        .save_to_file(path.to_str().unwrap(), "vulkan")
        .unwrap();
    assert!(Path::new(&dir.join("saved.tvm_meta.json")).exists());
    let loaded = Module::load(path.to_str().unwrap()).unwrap();
    assert_eq!(loaded.type_key(), "vulkan");
    // Launch straight from the loaded module with TVM's calling convention.
    let n = 70usize;
    let (a, b) = (pseudo(n, 7), pseudo(n, 8));
    let (va, vb) = (on_vulkan(&a), on_vulkan(&b));
    let vc = NDArray::empty(&[n as i64], F32, VK0).unwrap();
    let f = loaded.function("vadd").unwrap();
    // SAFETY: device buffers of arrays alive through the calls, which the kernel reads and
    // writes within their sizes.
    let data = |x: &NDArray| ArgValue::Handle(unsafe { RawHandle::new(x.dltensor().data) });
    f.call(&[
        data(&va),
        data(&vb),
        data(&vc),
        ArgValue::Int(n as i64),
        ArgValue::Float(-2.0),
        ArgValue::Int(2),
        ArgValue::Int(64),
    ])
    .unwrap();
    let got = vc.to_vec::<f32>().unwrap();
    for i in 0..n {
        assert!((got[i] - (a[i] - 2.0 * b[i])).abs() < 1e-4);
    }
    // Too few arguments: a clear error, no launch.
    let e = f.call(&[data(&va)]).unwrap_err();
    assert!(e.message.contains("expects 7 arguments"), "{}", e.message);
    // Corrupt binaries are refused with a message.
    let mut r = tvm_runtime::module::blob::BlobReader::new(&bytes[..bytes.len() / 2], "half");
    let e = tvm_runtime::module::blob::call_loader(&loader, &mut r).unwrap_err();
    assert!(e.message.contains("truncated"), "{}", e.message);
}

#[test]
fn exist_answers_without_error_and_missing_devices_fail_clearly() {
    // Runs with or without a driver: kExist is 0 or 1, never an error.
    let api = device::api(VK0).unwrap();
    let n = vulkan::device_count();
    let e = api.get_attr(VK0, DeviceAttr::Exist).unwrap();
    assert!(matches!(e, RetValue::Int(x) if x == (n > 0) as i64));
    if n == 0 {
        // The error path still runs: not a skip of the test, only of its device half.
        skip::report("no Vulkan driver (only the error path was checked)");
        let e = NDArray::empty(&[4], F32, VK0).unwrap_err();
        assert!(
            e.message.contains("vulkan") || e.message.contains("Vulkan"),
            "{}",
            e.message
        );
        let e = api.get_attr(VK0, DeviceAttr::DeviceName).unwrap_err();
        assert!(e.message.contains("ulkan"), "{}", e.message);
    }
}

/// The `tvmrt` binary of the workspace's `cli` crate, next to this test's own profile folder
/// (`cargo test` at the workspace root builds it).
fn tvmrt_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("tvmrt");
    assert!(
        bin.exists(),
        "{} is missing: build the workspace (cargo build)",
        bin.display()
    );
    bin
}

/// A command running `tvmrt`, through `$TVMRT_TEST_RUNNER` when set (scripts/cross.sh sets
/// it to qemu-user for a cross-built binary, as cargo's runner runs this test).
fn tvmrt() -> Command {
    let runner = std::env::var("TVMRT_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_ascii_whitespace();
    match words.next() {
        Some(first) => {
            let mut c = Command::new(first);
            c.args(words).arg(tvmrt_bin());
            c
        }
        None => Command::new(tvmrt_bin()),
    }
}

#[test]
fn cli_devices_prints_an_accepted_target() {
    let out = tvmrt().args(["devices", "--target"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !have_vulkan() {
        assert!(text.contains("vulkan"), "{text}");
        return;
    }
    assert!(text.contains("vulkan(0) [device type 7]"), "{text}");
    let target = text
        .lines()
        .find_map(|l| l.strip_prefix("  target: "))
        .unwrap_or_else(|| panic!("no target line:\n{text}"));
    let j: serde_json::Value = serde_json::from_str(target).unwrap();
    assert_eq!(j["kind"], "vulkan");
    // The reference compiler accepts it, where it is installed (scripts/setup.sh).
    let py = std::env::var("TVMRT_PYTHON").unwrap_or_default();
    if !skip::available(
        !py.is_empty() && Path::new(&py).exists(),
        "TVMRT_REQUIRE_FIXTURES",
        || "target acceptance needs TVMRT_PYTHON".into(),
    ) {
        return;
    }
    let o = Command::new(&py)
        .args([
            "-c",
            "import sys, tvm; t = tvm.target.Target(sys.argv[1]); \
             assert t.kind.name == 'vulkan'; print(t.attrs['max_num_threads'])",
            target,
        ])
        .env("TVM_FFI", "ctypes")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "TVM refused the target: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        j["max_num_threads"].to_string()
    );
}

#[test]
fn launches_from_many_threads() {
    if !have_vulkan() {
        return;
    }
    let m = lib();
    let n = 513usize;
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let f = m.function("vadd_host").unwrap();
            std::thread::spawn(move || {
                device::api(VK0).unwrap().set_device(VK0).unwrap();
                for k in 0..20 {
                    let a = pseudo(n, t * 100 + k);
                    let (va, vb) = (on_vulkan(&a), on_vulkan(&a));
                    let vc = NDArray::empty(&[n as i64], F32, VK0).unwrap();
                    f.call(&[dl(&va), dl(&vb), dl(&vc), ArgValue::Float(1.0)])
                        .unwrap();
                    let got = vc.to_vec::<f32>().unwrap();
                    assert!(got.iter().zip(&a).all(|(g, x)| *g == 2.0 * x));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn workspaces_are_reused_and_kernel_arguments_checked() {
    if !have_vulkan() {
        return;
    }
    let api = device::api(VK0).unwrap();
    let w1 = api.alloc_workspace(VK0, 5000, F32).unwrap();
    // SAFETY: the pointer came from this backend's alloc_workspace and is not used again.
    unsafe { api.free_workspace(VK0, w1) }.unwrap();
    let w2 = api.alloc_workspace(VK0, 4500, F32).unwrap();
    assert_eq!(w1, w2, "a freed workspace of a fitting size is reused");
    let w3 = api.alloc_workspace(VK0, 100_000, F32).unwrap();
    assert_ne!(w3, w2);
    // SAFETY: the pointer came from this backend's alloc_workspace and is not used again.
    unsafe { api.free_workspace(VK0, w2) }.unwrap();
    // SAFETY: the pointer came from this backend's alloc_workspace and is not used again.
    unsafe { api.free_workspace(VK0, w3) }.unwrap();

    // A host pointer where a buffer is expected is refused, not dereferenced as one.
    let vk_mod = lib()
        .imports()
        .into_iter()
        .find(|m| m.type_key() == "vulkan")
        .unwrap();
    let f = vk_mod.function("relu").unwrap();
    let host = [0u64; 8];
    let e = f
        .call(&[
            // SAFETY: the module checks that a handle names one of its buffers before use
            // (what this asserts); `host` outlives the call.
            ArgValue::Handle(unsafe { RawHandle::new(host.as_ptr() as *mut c_void) }),
            // SAFETY: as above.
            ArgValue::Handle(unsafe { RawHandle::new(host.as_ptr() as *mut c_void) }),
            ArgValue::Int(1),
            ArgValue::Int(1),
            ArgValue::Int(64),
        ])
        .unwrap_err();
    assert!(e.message.contains("not a Vulkan buffer"), "{}", e.message);

    // More scalars than push constants hold, without the uniform-buffer flag: a clear error.
    use tvm_runtime::device::vulkan::module::{Shader, VulkanModule};
    use tvm_runtime::module::function_info::FunctionInfo;
    let mut arg_types = vec![DLDataType::new(3, 64, 1)];
    arg_types.extend(std::iter::repeat_n(DLDataType::new(0, 32, 1), 40));
    let fmap = [(
        "empty".to_string(),
        FunctionInfo {
            name: "empty".into(),
            arg_types,
            launch_param_tags: vec!["blockIdx.x".into()],
        },
    )]
    .into_iter()
    .collect();
    let smap = [(
        "empty".to_string(),
        Shader {
            flag: 0,
            data: spirv("empty", EMPTY),
        },
    )]
    .into_iter()
    .collect();
    let m = Module::new(Box::new(VulkanModule::new(fmap, smap).unwrap()));
    let a = on_vulkan(&[0.0; 4]);
    // SAFETY: the device buffer of `a`, alive through the call (which is refused before any
    // launch).
    let mut args = vec![ArgValue::Handle(unsafe {
        RawHandle::new(a.dltensor().data)
    })];
    args.extend(std::iter::repeat_n(ArgValue::Int(1), 41));
    let e = m.function("empty").unwrap().call(&args).unwrap_err();
    assert!(e.message.contains("push constants"), "{}", e.message);
}

#[test]
fn many_small_buffers_share_memory_blocks() {
    if !have_vulkan() {
        return;
    }
    // More buffers than drivers allow memory objects on some platforms (4096).
    let mut arrays: Vec<NDArray> = (0..5000)
        .map(|_| NDArray::empty(&[16], F32, VK0).unwrap())
        .collect();
    for (i, a) in arrays.iter_mut().enumerate().step_by(499) {
        a.copy_from_slice(&[i as f32; 16]).unwrap();
    }
    for (i, a) in arrays.iter().enumerate().step_by(499) {
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![i as f32; 16]);
    }
}

#[test]
fn int64_float64_scalars_and_dynamic_shared_memory_tag() {
    if !have_vulkan() {
        return;
    }
    let int64 = matches!(
        vulkan::target_property(0, "supports_int64").unwrap(),
        RetValue::Bool(true)
    );
    let float64 = matches!(
        vulkan::target_property(0, "supports_float64").unwrap(),
        RetValue::Bool(true)
    );
    if !(int64 && float64) {
        skip::report("the device has no 64-bit shader arithmetic");
        return;
    }
    let vk_mod = lib()
        .imports()
        .into_iter()
        .find(|m| m.type_key() == "vulkan")
        .unwrap();
    let f = vk_mod.function("vadd64").unwrap();
    let n = 300usize;
    let (a, b) = (pseudo(n, 11), pseudo(n, 12));
    let (va, vb) = (on_vulkan(&a), on_vulkan(&b));
    let vc = on_vulkan(&vec![7.0; n + 10]);
    // SAFETY: device buffers of arrays alive through the calls, which the kernel reads and
    // writes within their sizes.
    let data = |x: &NDArray| ArgValue::Handle(unsafe { RawHandle::new(x.dltensor().data) });
    // Buffers, int64 n, float64 alpha, grid, block, dynamic shared memory bytes.
    f.call(&[
        data(&va),
        data(&vb),
        data(&vc),
        ArgValue::Int(n as i64),
        ArgValue::Float(0.25),
        ArgValue::Int(n.div_ceil(64) as i64),
        ArgValue::Int(64),
        ArgValue::Int(0),
    ])
    .unwrap();
    let got = vc.to_vec::<f32>().unwrap();
    for i in 0..n {
        let want = (a[i] as f64 + 0.25 * b[i] as f64) as f32;
        assert!((got[i] - want).abs() <= 1e-6 * want.abs().max(1.0), "[{i}]");
    }
    assert!(got[n..].iter().all(|&x| x == 7.0), "nothing written past n");
    // Missing the dynamic shared memory value: refused.
    let e = f
        .call(&[
            data(&va),
            data(&vb),
            data(&vc),
            ArgValue::Int(n as i64),
            ArgValue::Float(0.25),
            ArgValue::Int(5),
            ArgValue::Int(64),
        ])
        .unwrap_err();
    assert!(e.message.contains("expects 8 arguments"), "{}", e.message);
}
