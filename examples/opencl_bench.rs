//! OpenCL backend benchmark, side by side in one run on the same device:
//!
//! - launch: a small kernel (`C[i] = A[i] + B[i]`, 256 elements, 4 work-groups of 64) queued
//!   through our runtime (an `opencl` module's packed function: argument conversion, the cached
//!   `cl_kernel`, `clSetKernelArg` × 4, `clEnqueueNDRangeKernel`) against the same source
//!   built and launched directly with `cl3` (its own context and queue; the same four
//!   `clSetKernelArg` calls and the enqueue). Each side queues a batch of launches and waits
//!   once (`clFinish`); the time per launch is the batch time over its size. With the
//!   compiled fixture `cl_add.so` (scripts/build_opencl_fixtures.py) present, also the full
//!   path of TVM-compiled host code (host function → `TVMBackendGetFuncFromEnv` →
//!   `TVMFuncCall` → the module);
//! - copy bandwidth host→device and device→host through the device API against blocking
//!   `clEnqueueWriteBuffer` / `clEnqueueReadBuffer` calls on a buffer of the same size.
//!
//! Run: `cargo run --release --example opencl_bench` (POCL: `scripts/setup_opencl.sh`).

use std::ffi::c_void;
use std::time::Instant;
use tvm_runtime::device::opencl::{self, OpenclModule};
use tvm_runtime::device::{self};
use tvm_runtime::module::function_info::{FunctionInfo, FunctionInfoMap};
use tvm_runtime::packed_func::types::{DLDataType, DLDevice, DL_OPENCL};
use tvm_runtime::{ArgValue, Module, NDArray};

const CL0: DLDevice = DLDevice {
    device_type: DL_OPENCL,
    device_id: 0,
};
const F32: DLDataType = DLDataType {
    code: 2,
    bits: 32,
    lanes: 1,
};
const SRC: &str =
    "__kernel void add_kernel(__global float* restrict A, __global float* restrict B, \
    __global float* restrict C, int n) {\n  int i = get_group_id(0) * 64 + get_local_id(0);\n  \
    if (i < n) C[i] = A[i] + B[i];\n}\n";
const N: usize = 256;

/// Median over `reps` of the seconds per item of `f(iters)`.
fn median(reps: usize, iters: usize, mut f: impl FnMut(usize)) -> f64 {
    f(iters.min(100));
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f(iters);
            t.elapsed().as_secs_f64() / iters as f64
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Medians of the seconds per item of `f(iters)` and `g(iters)`, timed alternately `reps`
/// times (so that both see the same machine load).
fn paired(
    reps: usize,
    iters: usize,
    mut f: impl FnMut(usize),
    mut g: impl FnMut(usize),
) -> (f64, f64) {
    f(1);
    g(1);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        for (v, h) in [(&mut a, &mut f as &mut dyn FnMut(usize)), (&mut b, &mut g)] {
            let t = Instant::now();
            h(iters);
            v.push(t.elapsed().as_secs_f64() / iters as f64);
        }
    }
    for v in [&mut a, &mut b] {
        v.sort_by(|x, y| x.partial_cmp(y).unwrap());
    }
    (a[reps / 2], b[reps / 2])
}

/// The same kernel built and launched with cl3 alone.
struct Direct {
    queue: cl3::types::cl_command_queue,
    kernel: cl3::types::cl_kernel,
    bufs: [cl3::types::cl_mem; 3],
}

impl Direct {
    fn new() -> Direct {
        use cl3::*;
        let platforms = platform::get_platform_ids().unwrap();
        let mut dev = None;
        for ty in [device::CL_DEVICE_TYPE_GPU, device::CL_DEVICE_TYPE_CPU] {
            dev = platforms
                .iter()
                .find_map(|&p| device::get_device_ids(p, ty).ok()?.first().copied());
            if dev.is_some() {
                break;
            }
        }
        let dev = dev.expect("an OpenCL device");
        let ctx =
            context::create_context(&[dev], std::ptr::null(), None, std::ptr::null_mut()).unwrap();
        // SAFETY: the device belongs to the context.
        #[allow(deprecated)]
        let queue = unsafe { command_queue::create_command_queue(ctx, dev, 0) }.unwrap();
        let prog = program::create_program_with_source(ctx, &[SRC]).unwrap();
        program::build_program(prog, &[dev], c"", None, std::ptr::null_mut()).unwrap();
        let kernel = kernel::create_kernel(prog, c"add_kernel").unwrap();
        let bufs = [0; 3].map(|_| {
            // SAFETY: plain flags, no host pointer.
            unsafe {
                memory::create_buffer(ctx, memory::CL_MEM_READ_WRITE, N * 4, std::ptr::null_mut())
            }
            .unwrap()
        });
        Direct {
            queue,
            kernel,
            bufs,
        }
    }

    fn launch(&self, cl: &cl3::OpenClRuntime) {
        for (i, b) in self.bufs.iter().enumerate() {
            let r = cl.clSetKernelArg(self.kernel, i as u32, 8, b as *const _ as *const c_void);
            assert_eq!(r, Some(0));
        }
        let n = N as i32;
        let r = cl.clSetKernelArg(self.kernel, 3, 4, &n as *const i32 as *const c_void);
        assert_eq!(r, Some(0));
        let (global, local) = ([N], [64usize]);
        let r = cl.clEnqueueNDRangeKernel(
            self.queue,
            self.kernel,
            1,
            std::ptr::null(),
            global.as_ptr(),
            local.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null_mut(),
        );
        assert_eq!(r, Some(0));
    }
}

fn launch_overhead() {
    let cl = cl3::load_library().as_ref().unwrap();
    let direct = Direct::new();
    let mut fmap = FunctionInfoMap::new();
    fmap.insert(
        "add_kernel".into(),
        FunctionInfo {
            name: String::new(),
            arg_types: vec![
                DLDataType::new(3, 64, 1),
                DLDataType::new(3, 64, 1),
                DLDataType::new(3, 64, 1),
                DLDataType::new(0, 32, 1),
            ],
            launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        },
    );
    let src = format!("// Function: add_kernel\n{SRC}");
    let m = Module::new(Box::new(
        OpenclModule::new(src.as_bytes(), "cl", fmap).unwrap(),
    ));
    let f = m.function("add_kernel").unwrap();
    let a = NDArray::empty(&[N as i64], F32, CL0).unwrap();
    let b = NDArray::empty(&[N as i64], F32, CL0).unwrap();
    let c = NDArray::empty(&[N as i64], F32, CL0).unwrap();
    let api = device::api(CL0).unwrap();
    let ours = |iters: usize| {
        for _ in 0..iters {
            f.call(&[
                (&a).into(),
                (&b).into(),
                (&c).into(),
                ArgValue::Int(N as i64),
                ArgValue::Int((N / 64) as i64),
                ArgValue::Int(64),
            ])
            .unwrap();
        }
        api.sync(CL0).unwrap();
    };
    let raw = |iters: usize| {
        for _ in 0..iters {
            direct.launch(cl);
        }
        assert_eq!(cl.clFinish(direct.queue), Some(0));
    };
    let mut ours = ours;
    let mut raw = raw;
    // Interleaved rounds so that both sides see the same machine load.
    let (mut t_ours, mut t_raw) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        t_ours.push(median(3, 2000, &mut ours));
        t_raw.push(median(3, 2000, &mut raw));
    }
    t_ours.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t_raw.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (o, r) = (t_ours[2], t_raw[2]);
    println!(
        "launch (256 elements, 4x64 work-items), per launch in batches of 2000:\n  \
         ours (packed function)   {:7.2} us\n  direct cl3               {:7.2} us\n  \
         ratio ours/direct        {:7.3}",
        o * 1e6,
        r * 1e6,
        o / r
    );
    let fixture = std::env::var("TVMRT_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tvm-runtime-rs")
        })
        .join("fixtures/opencl/cl_add.so");
    if fixture.exists() {
        let lib = Module::load(fixture.to_str().unwrap()).unwrap();
        let host = lib.function("cl_add").unwrap();
        let mut compiled = |iters: usize| {
            for _ in 0..iters {
                host.call(&[(&a).into(), (&b).into(), (&c).into()]).unwrap();
            }
            api.sync(CL0).unwrap();
        };
        let t = median(5, 2000, &mut compiled);
        println!(
            "  compiled host code (cl_add.so, TVMFuncCall) {:7.2} us",
            t * 1e6
        );
    }
}

fn bandwidth() {
    let cl = cl3::load_library().as_ref().unwrap();
    let api = device::api(CL0).unwrap();
    let host = DLDevice::CPU;
    println!("copy bandwidth (GB/s), medians of 15 alternating rounds:");
    println!(
        "  {:>10} {:>12} {:>12} {:>7} {:>12} {:>12} {:>7}",
        "bytes", "H2D ours", "H2D direct", "ratio", "D2H ours", "D2H direct", "ratio"
    );
    for size in [4usize << 10, 1 << 20, 16 << 20, 64 << 20] {
        let src = vec![1u8; size];
        let mut dst = vec![0u8; size];
        let p = api
            .alloc_data_space(CL0, size, 64, DLDataType::new(1, 8, 1))
            .unwrap();
        // SAFETY: a live buffer of this backend.
        let mem = unsafe { opencl::api::buffer_of(p) }.unwrap().mem;
        let iters = (256 << 20) / size;
        let iters = iters.clamp(4, 2000);
        let mut h2d_ours = |k: usize| {
            for _ in 0..k {
                // SAFETY: `size` bytes on both sides.
                unsafe {
                    api.copy_data(
                        src.as_ptr() as *const c_void,
                        0,
                        p,
                        0,
                        size,
                        host,
                        CL0,
                        F32,
                        std::ptr::null_mut(),
                    )
                }
                .unwrap();
            }
        };
        let dq = direct_queue();
        let mut h2d_raw = |k: usize| {
            for _ in 0..k {
                let r = cl.clEnqueueWriteBuffer(
                    dq,
                    mem,
                    1,
                    0,
                    size,
                    src.as_ptr() as *const c_void,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
                assert_eq!(r, Some(0));
            }
        };
        let (a, b) = paired(15, iters, &mut h2d_ours, &mut h2d_raw);
        let dptr = dst.as_mut_ptr();
        let mut d2h_ours = |k: usize| {
            for _ in 0..k {
                // SAFETY: as above.
                unsafe {
                    api.copy_data(
                        p,
                        0,
                        dptr as *mut c_void,
                        0,
                        size,
                        CL0,
                        host,
                        F32,
                        std::ptr::null_mut(),
                    )
                }
                .unwrap();
            }
        };
        let mut d2h_raw = |k: usize| {
            for _ in 0..k {
                let r = cl.clEnqueueReadBuffer(
                    dq,
                    mem,
                    1,
                    0,
                    size,
                    dptr as *mut c_void,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
                assert_eq!(r, Some(0));
            }
        };
        let (c, d) = paired(15, iters, &mut d2h_ours, &mut d2h_raw);
        let gb = |t: f64| size as f64 / t / 1e9;
        println!(
            "  {:>10} {:>12.2} {:>12.2} {:>7.3} {:>12.2} {:>12.2} {:>7.3}",
            size,
            gb(a),
            gb(b),
            b / a,
            gb(c),
            gb(d),
            d / c
        );
        // SAFETY: freed once.
        unsafe { api.free_data_space(CL0, p) }.unwrap();
    }
}

/// A second in-order queue on device 0 of our context (the buffer belongs to that context,
/// so the direct calls need a queue of it); the calls on it go straight to the driver.
fn direct_queue() -> cl3::types::cl_command_queue {
    use std::sync::OnceLock;
    static Q: OnceLock<usize> = OnceLock::new();
    *Q.get_or_init(|| device::api(CL0).unwrap().create_stream(CL0).unwrap() as usize)
        as cl3::types::cl_command_queue
}

/// mobilenet's `run()` on the OpenCL device, per compiled target (fixtures present).
fn models() {
    let dir = std::env::var("TVMRT_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tvm-runtime-rs")
        })
        .join("fixtures/opencl");
    for dev in ["mali", "intel_graphics", "adreno"] {
        let file = dir.join(format!("mobilenet_{dev}.so"));
        if !file.exists() {
            continue;
        }
        let lib = Module::load(file.to_str().unwrap()).unwrap();
        let gmod = Module::from_object(
            lib.function("default")
                .unwrap()
                .call(&[ArgValue::Device(CL0)])
                .unwrap()
                .into_object()
                .unwrap(),
        )
        .unwrap();
        let x: Vec<f32> = (0..3 * 224 * 224)
            .map(|i| ((i % 255) as f32) / 255.0)
            .collect();
        let data = NDArray::from_slice(&x, &[1, 3, 224, 224]).unwrap();
        gmod.function("set_input")
            .unwrap()
            .call(&[ArgValue::Str(c"data"), (&data).into()])
            .unwrap();
        let run = gmod.function("run").unwrap();
        let t0 = Instant::now();
        run.call(&[]).unwrap();
        device::api(CL0).unwrap().sync(CL0).unwrap();
        let first = t0.elapsed().as_secs_f64();
        let t = median(5, 1, |k| {
            for _ in 0..k {
                run.call(&[]).unwrap();
            }
            device::api(CL0).unwrap().sync(CL0).unwrap();
        });
        println!(
            "mobilenet ({dev}) run(): first {:.0} ms (builds the kernels), then {:.1} ms",
            first * 1e3,
            t * 1e3
        );
    }
}

fn main() {
    if opencl::device_count() == 0 {
        eprintln!(
            "no OpenCL device: {}",
            opencl::platform_error().unwrap_or_default()
        );
        std::process::exit(1);
    }
    println!(
        "device: {} ({})",
        match device::api(CL0)
            .unwrap()
            .get_attr(CL0, tvm_runtime::device::DeviceAttr::DeviceName)
            .unwrap()
        {
            tvm_runtime::RetValue::Str(s) => s,
            _ => String::new(),
        },
        opencl::platform_name(0).unwrap_or_default()
    );
    launch_overhead();
    bandwidth();
    models();
}
