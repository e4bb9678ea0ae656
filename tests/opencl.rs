//! OpenCL backend tests on a real OpenCL driver (POCL, which runs OpenCL on the CPU, in CI:
//! scripts/setup_opencl.sh installs it).
//!
//! Kernels come two ways: OpenCL C written here, packaged as the compiler packages it (an
//! `opencl` module: source split by `// Function:` lines plus the function-info map), and
//! libraries compiled by the reference compiler (hhb-tvm) for OpenCL by
//! scripts/build_opencl_fixtures.py: kernels, a small CNN and MobileNet for `-device=mali`,
//! `-device=intel_graphics` and `-device=adreno` (texture memory scopes), whose outputs are
//! compared with the same model compiled for the CPU and run on the reference runtime.
//!
//! Without an OpenCL platform every test reports "skipped: ...: no OpenCL device" through
//! tests/common/skip.rs; with TVMRT_REQUIRE_OPENCL set (the test command sets it after
//! installing POCL) they fail instead, and so do the fixture tests when the fixtures are
//! missing (the MobileNet ones under TVMRT_REQUIRE_OPENCL_MODELS).
#![cfg(feature = "opencl")]

use std::ffi::c_void;
use std::path::PathBuf;
use tvm_runtime::device::opencl::{self, OpenclModule};
use tvm_runtime::device::{self, DeviceAttr};
use tvm_runtime::module::function_info::{FunctionInfo, FunctionInfoMap};
use tvm_runtime::packed_func::types::{DLDataType, DLDevice, DL_OPENCL};
use tvm_runtime::relax_vm::VirtualMachine;
use tvm_runtime::{ArgValue, Module, NDArray, RetValue};

#[path = "common/skip.rs"]
mod skip;

const F32: DLDataType = DLDataType {
    code: 2,
    bits: 32,
    lanes: 1,
};
const CL0: DLDevice = DLDevice {
    device_type: DL_OPENCL,
    device_id: 0,
};
const REQUIRE: &str = "TVMRT_REQUIRE_OPENCL";

fn have_opencl() -> bool {
    skip::available(opencl::device_count() > 0, REQUIRE, || {
        format!(
            "no OpenCL device ({})",
            opencl::platform_error().unwrap_or_else(|| "a platform without devices".into())
        )
    })
}

/// The switch that makes a missing MobileNet fixture fail (they take minutes to compile, so
/// the test command may build the OpenCL fixtures without them: `--no-models`).
const REQUIRE_MODELS: &str = "TVMRT_REQUIRE_OPENCL_MODELS";

/// The OpenCL fixtures' directory, when built (fails under TVMRT_REQUIRE_OPENCL otherwise).
fn fixtures(file: &str) -> Option<PathBuf> {
    fixtures_or(file, REQUIRE)
}

/// As [`fixtures`], failing under `require` instead.
fn fixtures_or(file: &str, require: &str) -> Option<PathBuf> {
    let base = std::env::var("TVMRT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tvm-runtime-rs")
        });
    let d = base.join("fixtures/opencl");
    let ok = d.join(file).exists();
    skip::available(ok, require, || {
        format!(
            "OpenCL fixture {file} not built in {} (run scripts/build_opencl_fixtures.py)",
            d.display()
        )
    })
    .then_some(d)
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

fn on_cl(data: &[f32]) -> NDArray {
    let mut a = NDArray::empty(&[data.len() as i64], F32, CL0).unwrap();
    a.copy_from_slice(data).unwrap();
    a
}

fn sync() {
    device::api(CL0).unwrap().sync(CL0).unwrap();
}

fn t(code: u8, bits: u8) -> DLDataType {
    DLDataType::new(code, bits, 1)
}

/// An `opencl` module from OpenCL C pieces: (name, argument types, tags, source).
fn module(kernels: &[(&str, Vec<DLDataType>, &[&str], &str)]) -> tvm_runtime::Result<Module> {
    let mut fmap = FunctionInfoMap::new();
    let mut src = String::from("// header text before the first kernel belongs to none\n");
    for (name, types, tags, body) in kernels {
        fmap.insert(
            name.to_string(),
            FunctionInfo {
                name: String::new(),
                arg_types: types.clone(),
                launch_param_tags: tags.iter().map(|s| s.to_string()).collect(),
            },
        );
        src.push_str(&format!("// Function: {name}\n{body}\n\n"));
    }
    Ok(Module::new(Box::new(OpenclModule::new(
        src.as_bytes(),
        "cl",
        fmap,
    )?)))
}

const ADD: &str =
    "__kernel void add_kernel(__global float* restrict A, __global float* restrict B, \
    __global float* restrict C, int n) {\n  int i = get_group_id(0) * 64 + get_local_id(0);\n  \
    if (i < n) C[i] = A[i] + B[i];\n}";

fn add_module() -> Module {
    module(&[(
        "add_kernel",
        vec![t(3, 64), t(3, 64), t(3, 64), t(0, 32)],
        &["blockIdx.x", "threadIdx.x"],
        ADD,
    )])
    .unwrap()
}

#[test]
fn attributes_come_from_the_driver() {
    if !have_opencl() {
        return;
    }
    let api = device::api(CL0).unwrap();
    let int = |id: i32, k| match api.get_attr(DLDevice::new(DL_OPENCL, id), k).unwrap() {
        RetValue::Int(i) => i,
        v => panic!("{k:?}: {v:?}"),
    };
    let s = |k| match api.get_attr(CL0, k).unwrap() {
        RetValue::Str(s) => s,
        v => panic!("{k:?}: {v:?}"),
    };
    let n = opencl::device_count() as i32;
    assert_eq!(int(0, DeviceAttr::Exist), 1);
    assert_eq!(int(n, DeviceAttr::Exist), 0);
    assert_eq!(int(-1, DeviceAttr::Exist), 0);
    assert!(int(0, DeviceAttr::MaxThreadsPerBlock) >= 1);
    assert_eq!(int(0, DeviceAttr::WarpSize), 1);
    assert!(int(0, DeviceAttr::MaxSharedMemoryPerBlock) > 0);
    let v = s(DeviceAttr::ComputeVersion);
    assert!(
        v.split('.').all(|p| p.parse::<u32>().is_ok()) && v.contains('.'),
        "compute version {v}"
    );
    assert!(!s(DeviceAttr::DeviceName).is_empty());
    assert!(int(0, DeviceAttr::MaxClockRate) >= 0);
    assert!(int(0, DeviceAttr::MultiProcessorCount) >= 1);
    let dims: Vec<i64> = serde_json::from_str(&s(DeviceAttr::MaxThreadDimensions)).unwrap();
    assert_eq!(dims.len(), 3, "{dims:?}");
    assert!(!s(DeviceAttr::DriverVersion).is_empty());
    assert_eq!(int(0, DeviceAttr::ApiVersion), 120);
    assert!(int(0, DeviceAttr::TotalGlobalMemory) > 0);
    assert!(int(0, DeviceAttr::L2CacheSizeBytes) >= 0);
    assert!(matches!(
        api.get_attr(CL0, DeviceAttr::GcnArch).unwrap(),
        RetValue::Null
    ));
    // A device that does not exist: an error, not a crash.
    let e = api
        .get_attr(DLDevice::new(DL_OPENCL, n), DeviceAttr::DeviceName)
        .unwrap_err();
    assert!(e.message.contains("does not exist"), "{}", e.message);
    let e = NDArray::empty(&[4], F32, DLDevice::new(DL_OPENCL, n + 3)).unwrap_err();
    assert!(e.message.contains("does not exist"), "{}", e.message);
    assert!(api.set_device(DLDevice::new(DL_OPENCL, n)).is_err());
}

#[test]
fn copies_in_every_direction_with_offsets() {
    if !have_opencl() {
        return;
    }
    let api = device::api(CL0).unwrap();
    let host = DLDevice::CPU;
    for n in [1usize, 3, 1000, 65537] {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
        let a = api.alloc_data_space(CL0, n + 16, 64, t(1, 8)).unwrap();
        let b = api.alloc_data_space(CL0, n + 32, 64, t(1, 8)).unwrap();
        let mut back = vec![0u8; n + 5];
        // SAFETY: every range below lies inside the buffers allocated above.
        unsafe {
            api.copy_data(
                data.as_ptr() as *const c_void,
                0,
                a,
                16,
                n,
                host,
                CL0,
                t(1, 8),
                std::ptr::null_mut(),
            )
            .unwrap();
            api.copy_data(a, 16, b, 32, n, CL0, CL0, t(1, 8), std::ptr::null_mut())
                .unwrap();
            api.copy_data(
                b,
                32,
                back.as_mut_ptr() as *mut c_void,
                5,
                n,
                CL0,
                host,
                t(1, 8),
                std::ptr::null_mut(),
            )
            .unwrap();
            // Out of range: an error, the device stays usable.
            let e = api
                .copy_data(a, 17, b, 0, n + 16, CL0, CL0, t(1, 8), std::ptr::null_mut())
                .unwrap_err();
            assert!(e.message.contains("outside"), "{}", e.message);
            api.free_data_space(CL0, a).unwrap();
            api.free_data_space(CL0, b).unwrap();
        }
        assert_eq!(&back[5..], &data[..], "n = {n}");
    }
    // Size 0 allocates; arrays with no elements copy nothing.
    let z = api.alloc_data_space(CL0, 0, 64, F32).unwrap();
    // SAFETY: freed once.
    unsafe { api.free_data_space(CL0, z).unwrap() };
    let mut e = NDArray::empty(&[0, 3], F32, CL0).unwrap();
    e.copy_from_slice::<f32>(&[]).unwrap();
    assert!(e.to_vec::<f32>().unwrap().is_empty());
    // NDArray copies and views with a byte offset.
    let x = pseudo(100, 1);
    let a = on_cl(&x);
    let mut b = NDArray::empty(&[100], F32, CL0).unwrap();
    a.copy_to(&mut b).unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), x);
    let v = b.view(&[10], F32, 40).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), &x[10..20]);
    // A foreign pointer is refused with a message.
    let junk = [0u64; 16];
    // SAFETY: the range is valid host memory; the "device" side is checked and refused.
    let e = unsafe {
        api.copy_data(
            junk.as_ptr() as *const c_void,
            0,
            junk.as_ptr() as *mut c_void,
            0,
            8,
            CL0,
            host,
            t(1, 8),
            std::ptr::null_mut(),
        )
    }
    .unwrap_err();
    assert!(e.message.contains("not an OpenCL buffer"), "{}", e.message);
}

#[test]
fn a_kernel_runs_with_launch_dims_from_the_tags() {
    if !have_opencl() {
        return;
    }
    let m = add_module();
    let f = m.function("add_kernel").unwrap();
    for n in [1000usize, 64, 1, 0] {
        let (x, y) = (pseudo(n, 2), pseudo(n, 3));
        let (a, b) = (on_cl(&x), on_cl(&y));
        let c = NDArray::empty(&[n as i64], F32, CL0).unwrap();
        let grid = n.div_ceil(64) as i64;
        f.call(&[
            (&a).into(),
            (&b).into(),
            (&c).into(),
            ArgValue::Int(n as i64),
            ArgValue::Int(grid),
            ArgValue::Int(64),
        ])
        .unwrap();
        let got = c.to_vec::<f32>().unwrap();
        for i in 0..n {
            assert_eq!(got[i], x[i] + y[i], "n = {n}, [{i}]");
        }
    }
    // Many launches, then one sync.
    let x = pseudo(256, 9);
    let a = on_cl(&x);
    let c = NDArray::empty(&[256], F32, CL0).unwrap();
    for _ in 0..200 {
        f.call(&[
            (&a).into(),
            (&a).into(),
            (&c).into(),
            ArgValue::Int(256),
            ArgValue::Int(4),
            ArgValue::Int(64),
        ])
        .unwrap();
    }
    sync();
    let got = c.to_vec::<f32>().unwrap();
    assert!(got.iter().zip(&x).all(|(g, v)| *g == 2.0 * v));
}

/// A kernel that copies `A[n + i]` to `C[i]` (64 threads a block): it reads past the end of a
/// buffer of `n` floats. The module is returned with the function.
fn peek_kernel() -> (Module, tvm_runtime::Function) {
    const PEEK: &str = "__kernel void peek_kernel(__global float* restrict A, \
        __global float* restrict C, int n) {\n  int i = get_group_id(0) * 64 + get_local_id(0);\n  \
        C[i] = A[n + i];\n}";
    let m = module(&[(
        "peek_kernel",
        vec![t(3, 64), t(3, 64), t(0, 32)],
        &["blockIdx.x", "threadIdx.x"],
        PEEK,
    )])
    .unwrap();
    let f = m.function("peek_kernel").unwrap();
    (m, f)
}

/// Every buffer is followed by ZERO_TAIL zeroed bytes (src/device/opencl/api.rs): a kernel
/// that reads a little past a buffer's end, as some compiled kernels do, reads zeros, also
/// where freed memory held NaN, on a fresh buffer and on a workspace page.
#[test]
fn reads_past_a_buffers_end_see_zeros() {
    if !have_opencl() {
        return;
    }
    let (_m, f) = peek_kernel();
    let tail = opencl::api::ZERO_TAIL / 4;
    let c = NDArray::empty(&[tail as i64], F32, CL0).unwrap();
    let api = device::api(CL0).unwrap();
    for n in [1usize, 3, 864, 1000] {
        leave_nan_in_freed_memory();
        let a = on_cl(&pseudo(n, 30));
        // A page of the workspace pool (its size may be rounded up from the request).
        let w = api.alloc_workspace(CL0, 4 * n, F32).unwrap();
        // SAFETY: a live pointer of this backend.
        let page = unsafe { opencl::api::buffer_of(w) }.unwrap().size;
        let cases = [
            (ArgValue::from(&a), n, "buffer"),
            (
                // SAFETY: a workspace pointer of this backend, live until freed below.
                ArgValue::Handle(unsafe { tvm_runtime::packed_func::RawHandle::new(w) }),
                page.div_ceil(4),
                "workspace page",
            ),
        ];
        for (arg, len, what) in cases {
            f.call(&[
                arg,
                (&c).into(),
                ArgValue::Int(len as i64),
                ArgValue::Int((tail / 64) as i64),
                ArgValue::Int(64),
            ])
            .unwrap();
            let got = c.to_vec::<f32>().unwrap();
            assert!(
                got.iter().all(|&v| v == 0.0),
                "{what} of {n} floats: past its end {:?}",
                got.iter().find(|v| **v != 0.0)
            );
        }
        // SAFETY: the pointer alloc_workspace gave, freed once.
        unsafe { api.free_workspace(CL0, w) }.unwrap();
    }
}

/// The zeroed tail of a buffer allocated while one stream is current is there before a
/// kernel on another stream reads it: the tail is filled on the runtime's own queue and waited
/// for, not queued behind the allocating thread's stream. Here that stream is held back by a
/// user event that completes only after the read, so a fill queued on it could not have run.
#[test]
fn the_zeroed_tail_does_not_wait_for_the_allocating_stream() {
    if !have_opencl() {
        return;
    }
    let (_m, f) = peek_kernel();
    let cl = cl3::load_library().as_ref().unwrap();
    let api = device::api(CL0).unwrap();
    let held = device::streams::create_stream(CL0).unwrap();
    let queue = held as cl3::types::cl_command_queue;
    let mut ctx: cl3::types::cl_context = std::ptr::null_mut();
    let r = cl.clGetCommandQueueInfo(
        queue,
        0x1090, // CL_QUEUE_CONTEXT
        std::mem::size_of::<cl3::types::cl_context>(),
        &mut ctx as *mut _ as *mut c_void,
        std::ptr::null_mut(),
    );
    assert_eq!(r, Some(0));
    let mut err = 0;
    let gate = cl.clCreateUserEvent(ctx, &mut err).unwrap();
    assert_eq!(err, 0);
    let r = cl.clEnqueueBarrierWithWaitList(queue, 1, &gate, std::ptr::null_mut());
    assert_eq!(r, Some(0));
    let tail = opencl::api::ZERO_TAIL / 4;
    let c = NDArray::empty(&[tail as i64], F32, CL0).unwrap();
    let mut seen = Vec::new();
    for n in [3usize, 864, 1000] {
        leave_nan_in_freed_memory();
        // SAFETY: a live stream of this device, unset before it is freed.
        unsafe { api.set_stream(CL0, held) }.unwrap();
        let a = NDArray::empty(&[n as i64], F32, CL0);
        // SAFETY: as above.
        unsafe { api.set_stream(CL0, std::ptr::null_mut()) }.unwrap();
        let mut a = a.unwrap();
        a.copy_from_slice(&pseudo(n, 31)).unwrap();
        f.call(&[
            (&a).into(),
            (&c).into(),
            ArgValue::Int(n as i64),
            ArgValue::Int((tail / 64) as i64),
            ArgValue::Int(64),
        ])
        .unwrap();
        seen.push(c.to_vec::<f32>().unwrap().into_iter().find(|v| *v != 0.0));
    }
    assert_eq!(cl.clSetUserEventStatus(gate, 0), Some(0)); // CL_COMPLETE
                                                           // SAFETY: a live stream of this device, no longer current; freed once.
    unsafe {
        api.stream_sync(CL0, held).unwrap();
        device::streams::free_stream(CL0, held).unwrap();
    }
    assert_eq!(cl.clReleaseEvent(gate), Some(0));
    assert!(
        seen.iter().all(|v| v.is_none()),
        "past the end of buffers allocated on a held stream: {seen:?}"
    );
}

#[test]
fn bad_input_is_an_error_and_the_device_stays_usable() {
    if !have_opencl() {
        return;
    }
    // A source that does not build: the driver's log is in the error.
    let m = module(&[(
        "broken_kernel",
        vec![t(3, 64)],
        &["threadIdx.x"],
        "__kernel void broken_kernel(__global float* A) { A[0] = undefined_name; }",
    )])
    .unwrap();
    let a = on_cl(&[1.0; 4]);
    let f = m.function("broken_kernel").unwrap();
    let e = f.call(&[(&a).into(), ArgValue::Int(1)]).unwrap_err();
    assert!(e.message.contains("OpenCL build error"), "{}", e.message);
    assert!(e.message.contains("undefined_name"), "{}", e.message);
    // Again: still an error (not cached as built), not a crash.
    assert!(f.call(&[(&a).into(), ArgValue::Int(1)]).is_err());

    let f = add_module().function("add_kernel").unwrap();
    let c = NDArray::empty(&[4], F32, CL0).unwrap();
    // Wrong argument count.
    let e = f.call(&[(&a).into(), ArgValue::Int(1)]).unwrap_err();
    assert!(e.message.contains("expected 6 arguments"), "{}", e.message);
    // A float where the kernel takes a buffer; a buffer where it takes an int.
    let e = f
        .call(&[
            ArgValue::Float(1.0),
            (&a).into(),
            (&c).into(),
            ArgValue::Int(4),
            ArgValue::Int(1),
            ArgValue::Int(64),
        ])
        .unwrap_err();
    assert!(e.message.contains("argument 0"), "{}", e.message);
    let e = f
        .call(&[
            (&a).into(),
            (&a).into(),
            (&c).into(),
            (&a).into(),
            ArgValue::Int(1),
            ArgValue::Int(64),
        ])
        .unwrap_err();
    assert!(e.message.contains("argument 3"), "{}", e.message);
    // A CPU tensor passed to an OpenCL kernel.
    let cpu = NDArray::from_slice(&[1.0f32; 4], &[4]).unwrap();
    let e = f
        .call(&[
            (&cpu).into(),
            (&a).into(),
            (&c).into(),
            ArgValue::Int(4),
            ArgValue::Int(1),
            ArgValue::Int(64),
        ])
        .unwrap_err();
    assert!(
        e.message.contains("not on an OpenCL device"),
        "{}",
        e.message
    );
    // A kernel whose argument sizes disagree with its metadata (int64 declared, int taken):
    // the driver refuses the size, reported as an error.
    let m = module(&[(
        "size_kernel",
        vec![t(3, 64), t(0, 64)],
        &["threadIdx.x"],
        "__kernel void size_kernel(__global float* A, int n) { A[0] = n; }",
    )])
    .unwrap();
    let e = m
        .function("size_kernel")
        .unwrap()
        .call(&[(&a).into(), ArgValue::Int(3), ArgValue::Int(1)])
        .unwrap_err();
    assert!(e.message.contains("argument 1"), "{}", e.message);
    // The device still works.
    f.call(&[
        (&a).into(),
        (&a).into(),
        (&c).into(),
        ArgValue::Int(4),
        ArgValue::Int(1),
        ArgValue::Int(64),
    ])
    .unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![2.0; 4]);
}

#[test]
fn streams_are_command_queues() {
    if !have_opencl() {
        return;
    }
    let api = device::api(CL0).unwrap();
    let s = device::streams::create_stream(CL0).unwrap();
    assert!(!s.is_null());
    let f = add_module().function("add_kernel").unwrap();
    let x = pseudo(128, 5);
    let a = on_cl(&x);
    let c = NDArray::empty(&[128], F32, CL0).unwrap();
    // SAFETY: a live stream of this device, unset before it is freed.
    unsafe {
        api.set_stream(CL0, s).unwrap();
        assert_eq!(api.current_stream(CL0), s);
        f.call(&[
            (&a).into(),
            (&a).into(),
            (&c).into(),
            ArgValue::Int(128),
            ArgValue::Int(2),
            ArgValue::Int(64),
        ])
        .unwrap();
        api.sync_stream_from_to(CL0, s, std::ptr::null_mut())
            .unwrap();
        api.stream_sync(CL0, s).unwrap();
        api.set_stream(CL0, std::ptr::null_mut()).unwrap();
        device::streams::free_stream(CL0, s).unwrap();
    }
    assert_eq!(
        c.to_vec::<f32>().unwrap(),
        x.iter().map(|v| 2.0 * v).collect::<Vec<_>>()
    );
}

/// Runs the test `name` of this binary alone in a child process with `env` set to 1, and fails
/// unless it passed there.
fn run_alone_in_a_child(name: &str, env: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(env, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{name} run alone with {env}=1 failed:\n{text}"
    );
}

/// Set in the child process [`workspace_pages_are_reused_and_work_as_kernel_arguments`] runs
/// itself in.
const ALONE_ENV: &str = "TVMRT_OPENCL_TEST_ALONE";

/// The workspace pool is the device's, shared by every thread of the process (the other tests'
/// kernels leave pages in it, and take them concurrently), so the reuse is checked in a child
/// process running this test alone (first seen on NVIDIA's driver, where another test's page of
/// the same size came back).
#[test]
fn workspace_pages_are_reused_and_work_as_kernel_arguments() {
    if !have_opencl() {
        return;
    }
    const NAME: &str = "workspace_pages_are_reused_and_work_as_kernel_arguments";
    if std::env::var_os(ALONE_ENV).is_none() {
        run_alone_in_a_child(NAME, ALONE_ENV);
        return;
    }
    let api = device::api(CL0).unwrap();
    let w = api.alloc_workspace(CL0, 1000, F32).unwrap();
    // SAFETY: a workspace pointer freed once, then reused.
    unsafe { api.free_workspace(CL0, w).unwrap() };
    let w2 = api.alloc_workspace(CL0, 4096, F32).unwrap();
    assert_eq!(w, w2, "a freed page is reused");
    // As an opaque handle argument, the way compiled host code passes workspaces.
    let f = add_module().function("add_kernel").unwrap();
    let x = pseudo(16, 8);
    let a = on_cl(&x);
    f.call(&[
        (&a).into(),
        (&a).into(),
        ArgValue::Handle(
            // SAFETY: a live workspace buffer of this device.
            unsafe { tvm_runtime::packed_func::RawHandle::new(w2) },
        ),
        ArgValue::Int(16),
        ArgValue::Int(1),
        ArgValue::Int(64),
    ])
    .unwrap();
    let mut back = vec![0f32; 16];
    // SAFETY: 64 bytes inside the workspace and `back`.
    unsafe {
        api.copy_data(
            w2,
            0,
            back.as_mut_ptr() as *mut c_void,
            0,
            64,
            CL0,
            DLDevice::CPU,
            F32,
            std::ptr::null_mut(),
        )
        .unwrap();
        api.free_workspace(CL0, w2).unwrap();
    }
    assert_eq!(back, x.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
}

#[test]
fn texture_scopes_allocate_images() {
    if !have_opencl() {
        return;
    }
    let api = device::api(CL0).unwrap();
    // nhwc [1, 256, 7, 7, 4] folds into a 49 x 256 RGBA image.
    let shape = [1i64, 256, 7, 7, 4];
    let n = shape.iter().product::<i64>() as usize;
    let p = match api.alloc_data_space_scope(CL0, &shape, F32, Some("global.texture-nhwc")) {
        Ok(p) => p,
        Err(e) if e.message.contains("does not support images") => {
            skip::report(&e.message);
            return;
        }
        Err(e) => panic!("{}", e.message),
    };
    let x = pseudo(n, 11);
    let mut back = vec![0f32; n];
    // SAFETY: whole-image copies of exactly the image's size.
    unsafe {
        let b = opencl::api::buffer_of(p).unwrap();
        let e = b.image.unwrap();
        assert_eq!((e.width, e.height), (49, 256));
        api.copy_data(
            x.as_ptr() as *const c_void,
            0,
            p,
            0,
            n * 4,
            DLDevice::CPU,
            CL0,
            F32,
            std::ptr::null_mut(),
        )
        .unwrap();
        api.copy_data(
            p,
            0,
            back.as_mut_ptr() as *mut c_void,
            0,
            n * 4,
            CL0,
            DLDevice::CPU,
            F32,
            std::ptr::null_mut(),
        )
        .unwrap();
        // A partial copy of an image is refused.
        assert!(api
            .copy_data(
                p,
                16,
                back.as_mut_ptr() as *mut c_void,
                0,
                64,
                CL0,
                DLDevice::CPU,
                F32,
                std::ptr::null_mut(),
            )
            .is_err());
        api.free_data_space(CL0, p).unwrap();
    }
    assert_eq!(back, x);
    // The globals compiled host code calls.
    let alloc = tvm_runtime::packed_func::registry::get("device_api.opencl.alloc_nd").unwrap();
    let free = tvm_runtime::packed_func::registry::get("device_api.opencl.free_nd").unwrap();
    let wh = [7i64, 3];
    let h = alloc
        .call(&[
            ArgValue::Int(DL_OPENCL as i64),
            ArgValue::Int(0),
            ArgValue::Int(2),
            ArgValue::Int(32),
            ArgValue::Str(c"global.texture"),
            ArgValue::Int(2),
            ArgValue::Handle(
                // SAFETY: two int64 extents that outlive the call.
                unsafe { tvm_runtime::packed_func::RawHandle::new(wh.as_ptr() as *mut c_void) },
            ),
        ])
        .unwrap();
    let RetValue::Handle(h) = h else {
        panic!("alloc_nd gave {h:?}")
    };
    // SAFETY: the image alloc_nd made.
    let e = unsafe { opencl::api::buffer_of(h.as_ptr()) }
        .unwrap()
        .image
        .unwrap();
    assert_eq!((e.width, e.height), (7, 3));
    let r = free
        .call(&[
            ArgValue::Int(DL_OPENCL as i64),
            ArgValue::Int(0),
            ArgValue::Str(c"global.texture"),
            ArgValue::Handle(h),
        ])
        .unwrap();
    assert!(matches!(r, RetValue::Int(0)));
}

/// A graph executor for a graph library on opencl(0).
fn graph_on_cl(lib: &Module) -> Module {
    let create = lib.function("default").unwrap();
    Module::from_object(
        create
            .call(&[ArgValue::Device(CL0)])
            .unwrap()
            .into_object()
            .unwrap(),
    )
    .unwrap()
}

/// Runs a graph executor with the input `data`; returns output 0.
fn run_executor(gmod: &Module, data: &NDArray) -> NDArray {
    gmod.function("set_input")
        .unwrap()
        .call(&[ArgValue::Str(c"data"), data.into()])
        .unwrap();
    gmod.function("run").unwrap().call(&[]).unwrap();
    let out = gmod
        .function("get_output")
        .unwrap()
        .call(&[ArgValue::Int(0)])
        .unwrap();
    let RetValue::Object(o) = out else {
        panic!("get_output gave {out:?}")
    };
    let y = NDArray::from_object(o).unwrap();
    assert_eq!(y.device(), CL0);
    y
}

/// Runs a graph library on opencl(0) with the input `data`; returns output 0.
fn run_graph(lib: &Module, data: &NDArray) -> NDArray {
    run_executor(&graph_on_cl(lib), data)
}

fn npz(d: &std::path::Path, name: &str, key: &str) -> (Vec<f32>, Vec<i64>) {
    let mut z = npyz::npz::NpzArchive::open(d.join(format!("{name}.npz"))).unwrap();
    let a = z.by_name(key).unwrap().unwrap();
    let shape = a.shape().iter().map(|&s| s as i64).collect();
    (a.into_vec::<f32>().unwrap(), shape)
}

/// Compares with a tolerance relative to the output's scale: the OpenCL kernels are other
/// code than the CPU's (other schedules, reduction orders and fused multiply-adds), so the
/// results differ by float32 rounding, which grows with the reduction length.
fn assert_close(name: &str, got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len(), "{name}");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    let mut worst = 0f32;
    for (g, w) in got.iter().zip(want) {
        worst = worst.max((g - w).abs() / scale);
    }
    assert!(
        worst <= rel,
        "{name}: worst difference {worst:e} of the output's scale {scale} (allowed {rel:e})"
    );
    eprintln!("{name}: worst difference {worst:e} of the output's scale {scale}");
}

#[test]
fn compiled_kernels_from_the_reference_compiler() {
    if !have_opencl() {
        return;
    }
    let Some(d) = fixtures("cl_add.so") else {
        return;
    };
    let lib = Module::load(d.join("cl_add.so").to_str().unwrap()).unwrap();
    let f = lib.function("cl_add").unwrap();
    for n in [1000usize, 1, 0] {
        let (x, y) = (pseudo(n, 12), pseudo(n, 13));
        let (a, b) = (on_cl(&x), on_cl(&y));
        let c = NDArray::empty(&[n as i64], F32, CL0).unwrap();
        f.call(&[(&a).into(), (&b).into(), (&c).into()]).unwrap();
        let got = c.to_vec::<f32>().unwrap();
        assert!(
            (0..n).all(|i| got[i] == x[i] + y[i]),
            "cl_add n = {n} differs from numpy's sum"
        );
    }
    // The module tree: host code importing the opencl module.
    let imports = lib.imports();
    assert!(imports.iter().any(|m| m.type_key() == "opencl"));
    let Some(d) = fixtures("cl_scale.so") else {
        return;
    };
    let lib = Module::load(d.join("cl_scale.so").to_str().unwrap()).unwrap();
    let f = lib.function("cl_scale").unwrap();
    let m = 37usize;
    let x = pseudo(m * 8, 14);
    let mut a = NDArray::empty(&[m as i64, 8], F32, CL0).unwrap();
    a.copy_from_slice(&x).unwrap();
    let b = NDArray::empty(&[m as i64, 8], F32, CL0).unwrap();
    f.call(&[
        (&a).into(),
        ArgValue::Float(0.5),
        ArgValue::Int(-3),
        (&b).into(),
    ])
    .unwrap();
    let got = b.to_vec::<f32>().unwrap();
    for i in 0..m * 8 {
        assert_eq!(got[i], x[i] * 0.5 - 3.0, "[{i}]");
    }
}

#[test]
fn relax_model_runs_on_opencl_and_matches_the_cpu_build() {
    if !have_opencl() {
        return;
    }
    let Some(d) = fixtures("cl_relax_mlp.so") else {
        return;
    };
    let (x, xs) = npz(&d, "cl_relax_mlp", "x");
    let (w, wsh) = npz(&d, "cl_relax_mlp", "w");
    let (want, ws) = npz(&d, "cl_relax_mlp", "output_0");
    // The safe API (TVM's Python path, vm_load_executable and vm_initialization, is in
    // tests/python/test_opencl.py): OpenCL, with the CPU added as the host device.
    let vm = VirtualMachine::load(d.join("cl_relax_mlp.so").to_str().unwrap()).unwrap();
    vm.init(&[CL0]).unwrap();
    let on_cl = |v: &[f32], shape: &[i64]| {
        let mut a = NDArray::empty(shape, F32, CL0).unwrap();
        a.copy_from_slice(v).unwrap();
        a
    };
    let out = vm.call("main", &[on_cl(&x, &xs), on_cl(&w, &wsh)]).unwrap();
    let y = out.tensor().expect("main returns a tensor").clone();
    assert_eq!(y.device(), CL0);
    assert_eq!(y.shape(), &ws[..]);
    // A 64-term matmul in dlight's order against the CPU build's: float32 rounding stays far
    // below 1e-5 of the output's scale.
    assert_close("cl_relax_mlp", &y.to_vec::<f32>().unwrap(), &want, 1e-5);
}

#[test]
fn heterogeneous_graph_runs_on_the_cpu_and_opencl_and_matches_the_cpu_build() {
    if !have_opencl() {
        return;
    }
    let Some(d) = fixtures("cl_hetero.so") else {
        return;
    };
    let lib = Module::load(d.join("cl_hetero.so").to_str().unwrap()).unwrap();
    let (x, xs) = npz(&d, "cl_hetero", "x");
    let (want, ws) = npz(&d, "cl_hetero", "output_0");
    // The executor gets both devices; the graph's device_index puts the dense layer on
    // OpenCL, relu and softmax on the CPU, with a __copy node between them.
    let create = lib.function("default").unwrap();
    let gmod = Module::from_object(
        create
            .call(&[ArgValue::Device(DLDevice::CPU), ArgValue::Device(CL0)])
            .unwrap()
            .into_object()
            .unwrap(),
    )
    .unwrap();
    let input = NDArray::from_slice(&x, &xs).unwrap();
    gmod.function("set_input")
        .unwrap()
        .call(&[ArgValue::Str(c"x"), (&input).into()])
        .unwrap();
    gmod.function("run").unwrap().call(&[]).unwrap();
    let RetValue::Object(o) = gmod
        .function("get_output")
        .unwrap()
        .call(&[ArgValue::Int(0)])
        .unwrap()
    else {
        panic!("get_output gave no array")
    };
    let y = NDArray::from_object(o).unwrap();
    assert_eq!(y.device(), DLDevice::CPU, "softmax runs on the CPU");
    assert_eq!(y.shape(), &ws[..]);
    // A 64-term dense reduction in another order than the CPU build's: float32 rounding
    // stays far below 1e-5 of the output's scale.
    assert_close("cl_hetero", &y.to_vec::<f32>().unwrap(), &want, 1e-5);
    // Given only the OpenCL device, the executor cannot place the CPU nodes: a clear error
    // (TVM would put them on the OpenCL device and hand its buffers to CPU kernels).
    let e = create
        .call(&[ArgValue::Device(CL0)])
        .map(|_| ())
        .unwrap_err();
    assert!(
        e.message.contains("on cpu") && e.message.contains("given only opencl(0)"),
        "{}",
        e.message
    );
}

#[test]
fn compiled_cnn_matches_the_cpu_build_on_the_reference_runtime() {
    if !have_opencl() {
        return;
    }
    let Some(d) = fixtures("cl_conv.so") else {
        return;
    };
    let lib = Module::load(d.join("cl_conv.so").to_str().unwrap()).unwrap();
    let (x, xs) = npz(&d, "cl_conv", "data");
    let (want, ws) = npz(&d, "cl_conv", "output_0");
    let y = run_graph(&lib, &NDArray::from_slice(&x, &xs).unwrap());
    assert_eq!(y.shape(), &ws[..]);
    // 27-term conv reductions and a 2048-term dense: float32 rounding stays far below 1e-4
    // of the output's scale.
    assert_close("cl_conv", &y.to_vec::<f32>().unwrap(), &want, 1e-4);
}

/// MobileNet's input and expected output (the CPU build on the reference runtime), when the
/// fixtures are built.
fn mobilenet_io() -> Option<(NDArray, Vec<f32>, Vec<i64>)> {
    let d = fixtures_or("mobilenet_cl.npz", REQUIRE_MODELS)?;
    let (x, xs) = npz(&d, "mobilenet_cl", "data");
    let (want, ws) = npz(&d, "mobilenet_cl", "output_0");
    assert_eq!(ws, [1, 1000]);
    // The fixture's weights spread the softmax: the comparison is not of near-constants.
    let max = want.iter().cloned().fold(0f32, f32::max);
    assert!(
        max > 0.01,
        "mobilenet's expected output is nearly flat (max {max})"
    );
    Some((NDArray::from_slice(&x, &xs).unwrap(), want, ws))
}

// 28 layers, reductions up to 1024 terms in other orders than the CPU build's: relative
// float32 differences of ~1e-6 per operation accumulate to ~1e-5 of the softmax's largest
// value; 1e-3 leaves room and still catches any wrong kernel.
const MOBILENET_TOLERANCE: f32 = 1e-3;

#[test]
fn mobilenet_for_mali_intel_and_adreno_matches_the_cpu_build() {
    if !have_opencl() {
        return;
    }
    let Some((data, want, ws)) = mobilenet_io() else {
        return;
    };
    // adreno: texture memory scopes (2-D images) for activations and weights.
    for dev in ["mali", "intel_graphics", "adreno"] {
        let file = format!("mobilenet_{dev}.so");
        let Some(d) = fixtures_or(&file, REQUIRE_MODELS) else {
            return;
        };
        let lib = Module::load(d.join(&file).to_str().unwrap()).unwrap();
        let y = run_graph(&lib, &data);
        assert_eq!(y.shape(), &ws[..]);
        assert_close(
            &file,
            &y.to_vec::<f32>().unwrap(),
            &want,
            MOBILENET_TOLERANCE,
        );
    }
}

/// Frees device memory that held NaN, so that buffers allocated next may sit where NaN was
/// (drivers reuse freed memory without clearing it, POCL through the C allocator).
fn leave_nan_in_freed_memory() {
    for size in [256usize, 512, 864, 900, 1024, 2048, 4096, 16384] {
        let a: Vec<NDArray> = (0..16).map(|_| on_cl(&vec![f32::NAN; size])).collect();
        sync();
        drop(a);
    }
}

/// The adreno build's first convolution reads 144 bytes past the end of its weights (the
/// compiler pads the data to four channels but not the weights; see ZERO_TAIL in
/// src/device/opencl/api.rs) and multiplies them by zeros: NaN or infinity there made the
/// output wrong in about one run in five, on one executor and on fresh ones. Every run must
/// be right, also after freed device memory held NaN.
#[test]
fn mobilenet_adreno_is_right_on_every_run() {
    if !have_opencl() {
        return;
    }
    let Some((data, want, _)) = mobilenet_io() else {
        return;
    };
    let Some(d) = fixtures_or("mobilenet_adreno.so", REQUIRE_MODELS) else {
        return;
    };
    let lib = Module::load(d.join("mobilenet_adreno.so").to_str().unwrap()).unwrap();
    let check = |what: String, y: NDArray| {
        let got = y.to_vec::<f32>().unwrap();
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let worst = got
            .iter()
            .zip(&want)
            .fold(0f32, |m, (g, w)| m.max((g - w).abs() / scale));
        // NaN compares false: `!(worst <= tol)` fails on it too.
        assert!(
            worst <= MOBILENET_TOLERANCE,
            "mobilenet_adreno.so, {what}: worst difference {worst:e} of the output's scale"
        );
    };
    for i in 0..10 {
        leave_nan_in_freed_memory();
        check(format!("fresh executor {i}"), run_graph(&lib, &data));
    }
    leave_nan_in_freed_memory();
    let gmod = graph_on_cl(&lib);
    for i in 0..10 {
        check(
            format!("run {i} on one executor"),
            run_executor(&gmod, &data),
        );
    }
}

/// On a device without image support, texture scopes are refused with a clear error and
/// buffers still work. POCL supports images, so the test binary runs this test again under
/// TVM_RUNTIME_OPENCL_NO_IMAGES (read when the platforms load), which hides the support.
#[test]
fn texture_scopes_need_image_support() {
    if !have_opencl() {
        return;
    }
    if std::env::var_os(opencl::NO_IMAGES_ENV).is_none() {
        run_alone_in_a_child("texture_scopes_need_image_support", opencl::NO_IMAGES_ENV);
        // The child's skips (a missing fixture) go to the skip log from the child itself.
        return;
    }
    let api = device::api(CL0).unwrap();
    let e = api
        .alloc_data_space_scope(CL0, &[1, 8, 5, 6, 4], F32, Some("global.texture"))
        .unwrap_err();
    assert!(
        e.message.contains("does not support images") && e.message.contains("global.texture"),
        "{}",
        e.message
    );
    let x = pseudo(100, 21);
    assert_eq!(on_cl(&x).to_vec::<f32>().unwrap(), x);
    if let Some(d) = fixtures_or("mobilenet_adreno.so", REQUIRE_MODELS) {
        let lib = Module::load(d.join("mobilenet_adreno.so").to_str().unwrap()).unwrap();
        let e = lib
            .function("default")
            .unwrap()
            .call(&[ArgValue::Device(CL0)])
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.message.contains("does not support images"),
            "{}",
            e.message
        );
    }
}

fn tvmrt_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    dir.join("tvmrt")
}

#[test]
fn cli_devices_lists_opencl() {
    if !have_opencl() {
        return;
    }
    let bin = tvmrt_bin();
    if !skip::available(bin.exists(), REQUIRE, || {
        format!("{} not built (cargo build -p tvmrt)", bin.display())
    }) {
        return;
    }
    let out = std::process::Command::new(&bin)
        .arg("devices")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("opencl(0) [device type 4]"), "{text}");
    assert!(text.contains("platform:"), "{text}");
    let out = std::process::Command::new(&bin)
        .arg("devices")
        .env(opencl::DISABLE_ENV, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("opencl: no device present (OpenCL: no OpenCL platform: disabled"),
        "{text}"
    );
}
