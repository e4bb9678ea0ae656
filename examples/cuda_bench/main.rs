//! CUDA benchmark: kernel launch overhead through the runtime's module path (a `cuda` module's
//! packed function, as compiled code calls it) against a raw cudarc launch of the same kernel,
//! and host-to-device / device-to-host bandwidth through NDArray copies against cudarc's raw
//! copies. Prints "skipped: no CUDA driver" and exits 0 where there is no GPU.
//!
//! Run: `cargo run --release --example cuda_bench [-- --launches N --mib M]`.

use cudarc::driver::{result, sys};
use std::ffi::{c_void, CString};
use std::time::Instant;
use tvm_runtime::device::cuda::{self, CudaModule};
use tvm_runtime::module::function_info::{FunctionInfo, FunctionInfoMap};
use tvm_runtime::packed_func::types::{DLDataType, DLDevice, DL_CUDA};
use tvm_runtime::packed_func::RawHandle;
use tvm_runtime::{ArgValue, Module, NDArray};

const PTX: &str = include_str!("../../tests/cuda_fixtures/kernels.ptx");

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A cudarc error as a boxed error.
fn de(e: result::DriverError) -> Box<dyn std::error::Error> {
    format!("CUDA driver error: {e:?}").into()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if cuda::device_count() == 0 {
        println!(
            "skipped: no CUDA driver ({})",
            cuda::driver_error().unwrap_or_else(|| "no CUDA device".into())
        );
        return Ok(());
    }
    let launches = arg("--launches", 20000);
    let mib = arg("--mib", 64);
    let dev = DLDevice::new(DL_CUDA, 0);
    let f32t = DLDataType::new(2, 32, 1);
    let h = DLDataType::new(3, 64, 1);

    // --- launch overhead -------------------------------------------------------------------
    let mut fmap = FunctionInfoMap::new();
    fmap.insert(
        "vadd_kernel".into(),
        FunctionInfo {
            name: "vadd_kernel".into(),
            arg_types: vec![h, h, h, DLDataType::new(0, 32, 1)],
            launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        },
    );
    let module = Module::new(Box::new(CudaModule::new(PTX.as_bytes(), "ptx", fmap)));
    let kernel = module.function("vadd_kernel")?;
    let n: usize = 1024;
    let mut a = NDArray::empty(&[n as i64], f32t, dev)?;
    let c = NDArray::empty(&[n as i64], f32t, dev)?;
    a.copy_from_slice(&vec![1f32; n])?;
    let api = tvm_runtime::device::api(dev)?;
    api.set_device(dev)?;
    let (pa, pc) = (a.dltensor().data, c.dltensor().data);
    let ours_args = [
        // SAFETY: device buffers of `a` and `c` (n floats each), alive through every launch.
        ArgValue::Handle(unsafe { RawHandle::new(pa) }),
        // SAFETY: as above.
        ArgValue::Handle(unsafe { RawHandle::new(pa) }),
        // SAFETY: as above.
        ArgValue::Handle(unsafe { RawHandle::new(pc) }),
        ArgValue::Int(n as i64),
        ArgValue::Int((n / 128) as i64),
        ArgValue::Int(128),
    ];
    kernel.call(&ours_args)?;
    api.sync(dev)?;

    // The same kernel loaded and launched with cudarc's raw driver calls, same context.
    let image = CString::new(PTX)?;
    // SAFETY: a NUL-terminated PTX image; the device's primary context is current.
    let raw_module =
        unsafe { result::module::load_data(image.as_ptr() as *const c_void) }.map_err(de)?;
    let fname = CString::new("vadd_kernel")?;
    // SAFETY: a loaded module and a NUL-terminated name.
    let raw_f = unsafe { result::module::get_function(raw_module, fname) }.map_err(de)?;
    let (mut da, mut dc, mut nn) = (pa as u64, pc as u64, n as i32);
    let db = da;
    let mut db_ = db;
    let mut params: [*mut c_void; 4] = [
        &mut da as *mut u64 as *mut c_void,
        &mut db_ as *mut u64 as *mut c_void,
        &mut dc as *mut u64 as *mut c_void,
        &mut nn as *mut i32 as *mut c_void,
    ];
    let raw_launch = |params: &mut [*mut c_void; 4]| {
        // SAFETY: a function of the current context and one pointer per parameter.
        unsafe {
            result::launch_kernel(
                raw_f,
                ((n / 128) as u32, 1, 1),
                (128, 1, 1),
                0,
                std::ptr::null_mut(),
                params,
            )
        }
    };
    raw_launch(&mut params).map_err(de)?;
    let sync = || {
        // SAFETY: the default stream of the current context.
        unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) }
    };
    sync();

    // Ours and raw alternate, best of five each, so that load on a busy machine falls on both.
    let launch_loop = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..launches {
            f();
        }
        sync();
        t.elapsed().as_secs_f64() / launches as f64
    };
    let (mut ours, mut raw) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..5 {
        ours = ours.min(launch_loop(&mut || {
            kernel.call(&ours_args).unwrap();
        }));
        raw = raw.min(launch_loop(&mut || {
            raw_launch(&mut params).unwrap();
        }));
    }
    println!(
        "launch: ours {:.2} us, raw cudarc {:.2} us, ratio {:.3} (target <= 1.1)",
        ours * 1e6,
        raw * 1e6,
        ours / raw
    );
    let out = c.to_vec::<f32>()?;
    assert!(out.iter().all(|&v| v == 2.0), "wrong kernel result");

    // --- bandwidth ----------------------------------------------------------------------------
    let count = mib * (1 << 20) / 4;
    let host: Vec<f32> = (0..count).map(|i| i as f32).collect();
    let mut back = vec![0f32; count];
    let mut d = NDArray::empty(&[count as i64], f32t, dev)?;
    let dptr = d.dltensor().data as u64;
    let bytes = (count * 4) as f64;
    let gbps = |s: f64| bytes / s / 1e9;
    // Device to host into a host array allocated (and touched) once, as raw copies into `back`.
    let mut host_nd = NDArray::from_slice(&host, &[count as i64])?;
    let (mut ours_h2d, mut raw_h2d, mut ours_d2h, mut raw_d2h) =
        (f64::INFINITY, f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for _ in 0..5 {
        let t = Instant::now();
        d.copy_from_slice(&host)?;
        ours_h2d = ours_h2d.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        // SAFETY: `d` holds `count` floats; `host` too.
        unsafe { result::memcpy_htod_sync(dptr, &host) }.map_err(de)?;
        raw_h2d = raw_h2d.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        d.copy_to(&mut host_nd)?;
        ours_d2h = ours_d2h.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        // SAFETY: as above.
        unsafe { result::memcpy_dtoh_sync(&mut back, dptr) }.map_err(de)?;
        raw_d2h = raw_d2h.min(t.elapsed().as_secs_f64());
    }
    assert!(
        host_nd.to_vec::<f32>()? == back,
        "device-to-host copies differ"
    );
    println!(
        "H2D {mib} MiB: ours {:.2} GB/s, raw cudarc {:.2} GB/s, ratio {:.3} (target >= 0.95)",
        gbps(ours_h2d),
        gbps(raw_h2d),
        raw_h2d / ours_h2d
    );
    println!(
        "D2H {mib} MiB: ours {:.2} GB/s, raw cudarc {:.2} GB/s, ratio {:.3} (target >= 0.95)",
        gbps(ours_d2h),
        gbps(raw_d2h),
        raw_d2h / ours_d2h
    );
    // SAFETY: the module is no longer used.
    unsafe { result::module::unload(raw_module) }.map_err(de)?;
    Ok(())
}
