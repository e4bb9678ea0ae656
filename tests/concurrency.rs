//! Concurrency: one graph executor per application thread, shared objects whose references
//! are taken and dropped from many threads, and the global registry written and read at once.
//! Small enough to run under ThreadSanitizer (scripts/test_sanitizers.sh).
#![cfg(feature = "graph")]

#[path = "common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/skip.rs"]
mod skip;

use std::sync::{Arc, Barrier};
use tvm_runtime::executor::GraphExecutor;
use tvm_runtime::packed_func::registry;
use tvm_runtime::{ArgValue, DLDevice, Function, Module, NDArray, RetValue};

const THREADS: usize = 8;

fn input(ex: &GraphExecutor, seed: usize) -> (String, NDArray) {
    let info = &ex.input_info().unwrap()[0];
    let n: i64 = info.shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i as usize * 31 + seed * 17) % 101) as f32 / 101.0 - 0.5)
        .collect();
    (
        info.name.clone(),
        NDArray::from_slice(&v, &info.shape).unwrap(),
    )
}

fn run(ex: &GraphExecutor, x: &(String, NDArray)) -> Vec<f32> {
    ex.set_input(&x.0, &x.1).unwrap();
    ex.run().unwrap();
    ex.output(0).unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn one_executor_per_thread_gives_the_single_threaded_outputs() {
    let Some(mlp) = fixture_dirs::bundled_mlp() else {
        return;
    };
    let factory = Module::load(mlp.to_str().unwrap()).unwrap();
    let first = GraphExecutor::from_factory(&factory, &[DLDevice::CPU]).unwrap();
    let inputs: Vec<_> = (0..THREADS).map(|t| input(&first, t)).collect();
    let expected: Vec<Vec<f32>> = inputs.iter().map(|x| run(&first, x)).collect();
    assert_ne!(
        expected[0], expected[1],
        "different inputs give different outputs"
    );
    let (inputs, expected) = (Arc::new(inputs), Arc::new(expected));
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (factory, inputs, expected, start) = (
                factory.clone(),
                inputs.clone(),
                expected.clone(),
                start.clone(),
            );
            std::thread::spawn(move || {
                let ex = GraphExecutor::from_factory(&factory, &[DLDevice::CPU]).unwrap();
                start.wait();
                for i in 0..6 {
                    let k = (t + i) % THREADS;
                    assert_eq!(run(&ex, &inputs[k]), expected[k], "thread {t}, run {i}");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn shared_objects_are_retained_and_released_from_many_threads() {
    let a = NDArray::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let f = Function::from_rust(|args, rv| {
        *rv = RetValue::Int(args.i64(0)? * 2);
        Ok(())
    });
    let before = (
        a.as_object().header().ref_count(),
        f.as_object().header().ref_count(),
    );
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (a, f, start) = (a.clone(), f.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for i in 0..500i64 {
                    let copies: Vec<NDArray> = (0..4).map(|_| a.clone()).collect();
                    let r = f.call(&[ArgValue::Int(i + t as i64)]).unwrap();
                    assert!(matches!(r, RetValue::Int(v) if v == 2 * (i + t as i64)));
                    let r = f.call(&[(&copies[1]).into()]);
                    assert!(r.is_err(), "an array is not an integer");
                    drop(copies);
                    assert_eq!(a.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        (
            a.as_object().header().ref_count(),
            f.as_object().header().ref_count()
        ),
        before
    );
}

#[test]
fn the_registry_is_written_and_read_at_once() {
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                for i in 0..200i64 {
                    let name = format!("concurrency.f{t}.{}", i % 5);
                    registry::register_rust(&name, move |_args, rv| {
                        *rv = RetValue::Int(i);
                        Ok(())
                    });
                    let g = Function::get_global(&name).unwrap();
                    assert!(matches!(g.call(&[]).unwrap(), RetValue::Int(v) if v == i));
                    // Names other threads write are found or not, never torn.
                    let other = format!("concurrency.f{}.{}", (t + 1) % THREADS, i % 5);
                    if let Ok(h) = Function::get_global(&other) {
                        assert!(matches!(h.call(&[]).unwrap(), RetValue::Int(_)));
                    }
                    assert!(registry::list_names().contains(&name));
                }
                for k in 0..5 {
                    assert!(registry::remove(&format!("concurrency.f{t}.{k}")));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert!(!registry::list_names()
        .iter()
        .any(|n| n.starts_with("concurrency.f")));
}

/// Calls `runtime.config_threadpool` with integer arguments through the exported C functions,
/// as C code or TVM's Python would: the status and, on failure, `TVMGetLastError`.
fn config_threadpool_from_c(args: &[i64]) -> (std::ffi::c_int, String) {
    use tvm_runtime::c_api::error::TVMGetLastError;
    use tvm_runtime::c_api::func::{TVMFuncCall, TVMFuncFree, TVMFuncGetGlobal};
    use tvm_runtime::packed_func::types::{type_code, TVMValue};
    let mut f = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name and an out slot.
    let status = unsafe { TVMFuncGetGlobal(c"runtime.config_threadpool".as_ptr(), &mut f) };
    assert_eq!(status, 0);
    assert!(!f.is_null());
    let mut values: Vec<TVMValue> = args.iter().map(|&v| TVMValue { v_int64: v }).collect();
    let mut codes = vec![type_code::INT; args.len()];
    let (mut rv, mut rc) = (TVMValue::default(), 0);
    // SAFETY: `args.len()` integer arguments and out slots.
    let status = unsafe {
        TVMFuncCall(
            f,
            values.as_mut_ptr(),
            codes.as_mut_ptr(),
            args.len() as std::ffi::c_int,
            &mut rv,
            &mut rc,
        )
    };
    // SAFETY: the runtime returns a NUL-terminated string.
    let msg = unsafe { std::ffi::CStr::from_ptr(TVMGetLastError()) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: the handle TVMFuncGetGlobal gave.
    assert_eq!(unsafe { TVMFuncFree(f) }, 0);
    (status, msg)
}

/// Pins workers to CPU ids that do not exist, or asks for impossible thread counts: each is a
/// clear error (a worker used to panic inside `CPU_SET`, which aborted the process), and the
/// pool keeps working.
#[test]
fn config_threadpool_from_c_refuses_bad_cpus_and_counts() {
    let cases: [(&[i64], &str); 5] = [
        (&[0, 2, 5000], "CPU id 5000 does not exist"),
        (&[0, 2, -1], "CPU id -1 does not exist"),
        (&[0, 3, 0, -7], "CPU id -7 does not exist"),
        (&[0, -3], "nthreads -3 is out of range"),
        (&[0, 1 << 40], "is out of range"),
    ];
    for (args, needle) in cases {
        let (status, msg) = config_threadpool_from_c(args);
        assert_eq!(status, -1, "{args:?} was accepted");
        assert!(msg.contains(needle), "{args:?}: {msg}");
    }
    // A valid pinning still works, and the pool runs launches afterwards.
    let (status, msg) = config_threadpool_from_c(&[0, 2, 0]);
    assert_eq!(status, 0, "{msg}");
    assert_eq!(tvm_runtime::threading::num_threads(), 2);
    let (status, msg) = config_threadpool_from_c(&[0, 0]);
    assert_eq!(status, 0, "{msg}");
    one_executor_per_thread_gives_the_single_threaded_outputs();
}
