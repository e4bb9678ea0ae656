//! Soak and load test driver (run by scripts/soak.sh).
//!
//! `soak threads --threads T --runs N --model A.so [--model B.so ...]`: T application threads,
//! each with its own graph executor per model, run the models alternately N times each thread;
//! every output is compared with a single-threaded run made first.
//!
//! `soak cycles --cycles N --model A.so`: N cycles of load library, build an executor, run,
//! check the output, unload.
//!
//! Both sample resident memory (VmRSS) and open file descriptors while they work. After the
//! warm-up (the first fifth of the work) both must stay flat: fds exactly, RSS within
//! `--rss-slack-kb` (default 8192). A leak, a wrong output or an error exits with status 1.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tvm_runtime::executor::GraphExecutor;
use tvm_runtime::{DLDevice, Module, NDArray};

/// One resource sample: (work done, VmRSS in KiB, open fds).
type Sample = (usize, u64, usize);

fn status_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn sample(done: usize) -> Sample {
    (done, status_kb("VmRSS:"), open_fds())
}

/// A model: its library, inputs made from a fixed seed, and the outputs of a first run.
struct Model {
    name: String,
    factory: Module,
    inputs: Vec<(String, NDArray)>,
    expected: Vec<Vec<f32>>,
}

fn cpu() -> DLDevice {
    DLDevice::CPU
}

/// Deterministic inputs for every graph input (float32 only, as the bundled models).
fn make_inputs(ex: &GraphExecutor) -> Result<Vec<(String, NDArray)>, String> {
    let mut v = Vec::new();
    for info in ex.input_info().map_err(|e| e.to_string())? {
        let n: i64 = info.shape.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|i| ((i * 7919 % 1000) as f32) / 1000.0 - 0.5)
            .collect();
        let a = NDArray::from_slice(&data, &info.shape).map_err(|e| e.to_string())?;
        v.push((info.name.clone(), a));
    }
    Ok(v)
}

fn run_once(ex: &GraphExecutor, inputs: &[(String, NDArray)]) -> Result<Vec<Vec<f32>>, String> {
    for (name, a) in inputs {
        ex.set_input(name, a).map_err(|e| e.to_string())?;
    }
    ex.run().map_err(|e| e.to_string())?;
    (0..ex.num_outputs())
        .map(|i| {
            ex.output(i)
                .and_then(|o| o.to_vec::<f32>())
                .map_err(|e| e.to_string())
        })
        .collect()
}

fn check(name: &str, got: &[Vec<f32>], want: &[Vec<f32>]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{name}: {} outputs, expected {}",
            got.len(),
            want.len()
        ));
    }
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if g.len() != w.len() {
            return Err(format!("{name}: output {k} has {} values", g.len()));
        }
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            // NaN fails too: it is not within any distance.
            let close = (a - b).abs() <= 1e-5 * (1.0 + b.abs());
            if !close {
                return Err(format!("{name}: output {k}[{i}] = {a}, expected {b}"));
            }
        }
    }
    Ok(())
}

fn load_model(path: &str) -> Result<Model, String> {
    let factory = Module::load(path).map_err(|e| e.to_string())?;
    let ex = GraphExecutor::from_factory(&factory, &[cpu()]).map_err(|e| e.to_string())?;
    let inputs = make_inputs(&ex)?;
    let expected = run_once(&ex, &inputs)?;
    if expected.iter().flatten().any(|v| !v.is_finite()) {
        return Err(format!("{path}: the first run gave non-finite outputs"));
    }
    let name = std::path::Path::new(path)
        .file_name()
        .map_or(path.to_string(), |n| n.to_string_lossy().into_owned());
    Ok(Model {
        name,
        factory,
        inputs,
        expected,
    })
}

/// Samples every 20 ms until `stop`, with `done` as the progress counter.
fn sampler(done: Arc<AtomicUsize>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Sample>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        while !stop.load(Ordering::Acquire) {
            v.push(sample(done.load(Ordering::Relaxed)));
            std::thread::sleep(Duration::from_millis(20));
        }
        v.push(sample(done.load(Ordering::Relaxed)));
        v
    })
}

/// Checks that RSS and fds stay flat after the warm-up (work count `warm`); prints a summary.
fn flat(what: &str, samples: &[Sample], warm: usize, slack_kb: u64) -> Result<(), String> {
    let after: Vec<&Sample> = samples.iter().filter(|s| s.0 >= warm).collect();
    let (Some(first), Some(last)) = (after.first(), after.last()) else {
        return Err(format!("{what}: no samples after the warm-up"));
    };
    let peak = after.iter().map(|s| s.1).max().unwrap_or(0);
    let fd_max = after.iter().map(|s| s.2).max().unwrap_or(0);
    let fd_min = after.iter().map(|s| s.2).min().unwrap_or(0);
    println!(
        "{what}: RSS after warm-up {} KiB, at the end {} KiB, peak {} KiB (growth {} KiB); \
         open fds {}..{} ({} samples); process peak RSS {} KiB",
        first.1,
        last.1,
        peak,
        peak as i64 - first.1 as i64,
        fd_min,
        fd_max,
        after.len(),
        status_kb("VmHWM:")
    );
    if peak > first.1 + slack_kb {
        return Err(format!(
            "{what}: RSS grew by {} KiB after the warm-up (allowed {slack_kb})",
            peak - first.1
        ));
    }
    if fd_max != fd_min {
        return Err(format!(
            "{what}: open file descriptors went from {fd_min} to {fd_max} after the warm-up"
        ));
    }
    Ok(())
}

fn soak_threads(paths: &[String], threads: usize, runs: usize, slack: u64) -> Result<(), String> {
    let models: Arc<Vec<Model>> = Arc::new(
        paths
            .iter()
            .map(|p| load_model(p))
            .collect::<Result<_, _>>()?,
    );
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let sampler = sampler(done.clone(), stop.clone());
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (models, done, errors) = (models.clone(), done.clone(), errors.clone());
            std::thread::spawn(move || {
                let result = (|| -> Result<(), String> {
                    let execs = models
                        .iter()
                        .map(|m| GraphExecutor::from_factory(&m.factory, &[cpu()]))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| e.to_string())?;
                    for i in 0..runs {
                        let k = (i + t) % models.len();
                        let got = run_once(&execs[k], &models[k].inputs)?;
                        check(&models[k].name, &got, &models[k].expected)
                            .map_err(|e| format!("thread {t}, run {i}: {e}"))?;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })();
                if let Err(e) = result {
                    errors.lock().unwrap().push(e);
                }
            })
        })
        .collect();
    for w in workers {
        w.join()
            .map_err(|_| "a worker thread panicked".to_string())?;
    }
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Release);
    let samples = sampler.join().unwrap();
    if let Some(e) = errors.lock().unwrap().first() {
        return Err(e.clone());
    }
    let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
    let total = threads * runs;
    println!(
        "threads: {threads} threads x {runs} runs of {} alternately: {total} runs, every output \
         checked, {secs:.2} s ({:.1} runs/s)",
        names.join(" and "),
        total as f64 / secs
    );
    flat("threads", &samples, total / 5, slack)
}

fn soak_cycles(path: &str, cycles: usize, slack: u64) -> Result<(), String> {
    let first = load_model(path)?;
    let (inputs, expected) = (first.inputs, first.expected);
    drop(first.factory);
    let t0 = Instant::now();
    let mut samples = Vec::new();
    for i in 0..cycles {
        let m = Module::load(path).map_err(|e| format!("cycle {i}: {e}"))?;
        let ex = GraphExecutor::from_factory(&m, &[cpu()]).map_err(|e| e.to_string())?;
        let got = run_once(&ex, &inputs)?;
        check(path, &got, &expected).map_err(|e| format!("cycle {i}: {e}"))?;
        drop(ex);
        drop(m);
        if i % 10 == 0 || i + 1 == cycles {
            samples.push(sample(i + 1));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "cycles: {cycles} load/run/unload cycles of {path}, every output checked, {secs:.2} s \
         ({:.2} ms a cycle)",
        secs * 1e3 / cycles as f64
    );
    flat("cycles", &samples, cycles / 5, slack)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().cloned().unwrap_or_default();
    let mut models = Vec::new();
    let (mut threads, mut runs, mut cycles, mut slack) = (8usize, 100usize, 1000usize, 8192u64);
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_default();
        match a.as_str() {
            "--model" => models.push(val()),
            "--threads" => threads = val().parse().unwrap_or(threads),
            "--runs" => runs = val().parse().unwrap_or(runs),
            "--cycles" => cycles = val().parse().unwrap_or(cycles),
            "--rss-slack-kb" => slack = val().parse().unwrap_or(slack),
            other => {
                eprintln!("soak: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let r = match (mode.as_str(), models.is_empty()) {
        (_, true) => Err("soak: give at least one --model".to_string()),
        ("threads", _) => soak_threads(&models, threads, runs, slack),
        ("cycles", _) => soak_cycles(&models[0], cycles, slack),
        _ => Err("usage: soak threads|cycles --model A.so [...]".to_string()),
    };
    if let Err(e) = r {
        eprintln!("soak: FAILED: {e}");
        std::process::exit(1);
    }
}
