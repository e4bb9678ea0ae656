//! `tvmrt`: run TVM-compiled models and inspect modules and devices from the command line.

#[cfg(feature = "rpc")]
mod rpc_server;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use npyz::WriterBuilder;
use std::process::ExitCode;
use std::time::Instant;
use tvm_runtime::device::{self, plugin, DeviceAttr};
use tvm_runtime::executor::{GraphExecutor, TensorInfo};
use tvm_runtime::packed_func::types::{device_name, DLDevice, DL_FLOAT, DL_INT, DL_UINT};
use tvm_runtime::{dtype_to_string, DLDataType, Error, Module, NDArray, RetValue};

#[cfg(feature = "llm")]
mod generate;
#[cfg(feature = "relax")]
mod relax;

#[derive(Parser)]
#[command(
    name = "tvmrt",
    version,
    about = "Run TVM-compiled models on tvm-runtime-rs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a graph library (relay.build) or a Relax executable (relax.build) and time it.
    Run {
        /// The model library.
        model: String,
        /// The Relax function to run.
        #[arg(long, default_value = "main")]
        function: String,
        /// An input as NAME=FILE.npy (repeatable); missing inputs get seeded random values.
        #[arg(long = "input", value_name = "NAME=FILE.npy")]
        inputs: Vec<String>,
        /// Write each output as DIR/output_<i>.npy.
        #[arg(long)]
        output: Option<String>,
        /// Device: cpu, cuda, vulkan, or a plugin's name (with an optional :id).
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Timed runs after one warm-up run.
        #[arg(long, default_value_t = 10)]
        repeat: usize,
        /// Print a per-operator profile.
        #[arg(long)]
        profile: bool,
    },
    /// Print a library's module tree, functions, inputs and outputs.
    Info {
        /// The library (`.so` exported by TVM).
        model: String,
        /// Also print a Relax executable's disassembly.
        #[arg(long)]
        disasm: bool,
    },
    /// Generate tokens with a decoder built by tvm.relax.frontend.nn (prefill/decode).
    #[cfg(feature = "llm")]
    Generate {
        /// The model library.
        model: String,
        /// The weights: a directory with ndarray-cache.json (records in argument order). Its
        /// shard files are memory-mapped: they must not change while the command runs.
        #[arg(long)]
        params: String,
        /// The prompt's token ids, comma-separated.
        #[arg(long)]
        prompt_ids: String,
        /// Tokens to generate.
        #[arg(long, default_value_t = 16)]
        max_new_tokens: usize,
        /// Top-p sampling with this threshold (default: greedy).
        #[arg(long)]
        top_p: Option<f64>,
        /// Softmax temperature for top-p sampling.
        #[arg(long, default_value_t = 1.0)]
        temperature: f64,
        /// Seed of the uniform samples for top-p sampling.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// List devices and their attributes.
    Devices {
        /// Also print, per device, a TVM target (JSON) derived from its attributes.
        #[arg(long)]
        target: bool,
    },
    /// Serve this runtime over TVM's RPC protocol (as TVM's `tvm_rpc server`).
    #[cfg(feature = "rpc")]
    RpcServer(rpc_server::RpcServerArgs),
}

fn parse_device(s: &str) -> tvm_runtime::Result<DLDevice> {
    let (name, id) = match s.split_once(':') {
        Some((n, i)) => (
            n,
            i.parse::<i32>()
                .map_err(|_| Error::value(format!("bad device id in '{s}'")))?,
        ),
        None => (s, 0),
    };
    // Plugins named in TVM_DEVICE_PLUGINS arrive with the registry's start-up.
    plugin::discover();
    let ty = device::type_from_name(name)
        .ok_or_else(|| Error::value(format!("unknown device '{name}'")))?;
    Ok(DLDevice::new(ty, id))
}

macro_rules! with_elem {
    ($dtype:expr, $T:ident, $body:block) => {{
        let d: DLDataType = $dtype;
        match (d.code, d.bits, d.lanes) {
            (DL_FLOAT, 32, 1) => {
                type $T = f32;
                $body
            }
            (DL_FLOAT, 64, 1) => {
                type $T = f64;
                $body
            }
            (DL_INT, 8, 1) => {
                type $T = i8;
                $body
            }
            (DL_INT, 16, 1) => {
                type $T = i16;
                $body
            }
            (DL_INT, 32, 1) => {
                type $T = i32;
                $body
            }
            (DL_INT, 64, 1) => {
                type $T = i64;
                $body
            }
            (DL_UINT, 8, 1) => {
                type $T = u8;
                $body
            }
            (DL_UINT, 16, 1) => {
                type $T = u16;
                $body
            }
            (DL_UINT, 32, 1) => {
                type $T = u32;
                $body
            }
            (DL_UINT, 64, 1) => {
                type $T = u64;
                $body
            }
            _ => Err(Error::value(format!(
                "tvmrt handles float32/64 and (u)int8-64 tensors, not {}",
                dtype_to_string(d)
            ))),
        }
    }};
}

fn io_err(path: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::value(format!("{path}: {e}"))
}

fn read_npy(path: &str, info: &TensorInfo) -> tvm_runtime::Result<NDArray> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(io_err(path))?;
    let shape: Vec<i64> = npy.shape().iter().map(|&d| d as i64).collect();
    if shape != info.shape {
        return Err(Error::value(format!(
            "{path}: shape {shape:?} does not match input {} {:?}",
            info.name, info.shape
        )));
    }
    with_elem!(info.dtype, T, {
        let v: Vec<T> = npy.into_vec::<T>().map_err(|e| {
            Error::value(format!(
                "{path}: cannot read as {} ({e})",
                dtype_to_string(info.dtype)
            ))
        })?;
        NDArray::from_slice(&v, &shape)
    })
}

fn write_npy(path: &str, a: &NDArray) -> tvm_runtime::Result<()> {
    let shape: Vec<u64> = a.shape().iter().map(|&d| d as u64).collect();
    with_elem!(a.dtype(), T, {
        let v: Vec<T> = a.to_vec()?;
        let f = std::fs::File::create(path).map_err(io_err(path))?;
        let mut w = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(&shape)
            .writer(std::io::BufWriter::new(f))
            .begin_nd()
            .map_err(io_err(path))?;
        w.extend(v).map_err(io_err(path))?;
        w.finish().map_err(io_err(path))
    })
}

/// Deterministic pseudo-random input (xorshift), in [-1, 1) for floats, small ints else.
#[allow(clippy::unnecessary_cast)]
fn random_input(info: &TensorInfo, seed: u64) -> tvm_runtime::Result<NDArray> {
    let n: i64 = info.shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    with_elem!(info.dtype, T, {
        let v: Vec<T> = (0..n)
            .map(|_| {
                let r = next();
                if info.dtype.code == DL_FLOAT {
                    (((r >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) as T
                } else {
                    ((r % 8) as u8) as T
                }
            })
            .collect();
        NDArray::from_slice(&v, &info.shape)
    })
}

// `with_elem!` instantiates the same code for every element type, f64 included.
#[allow(clippy::unnecessary_cast)]
fn summary(a: &NDArray) -> String {
    let stats = |v: Vec<f64>| {
        let n = v.len().max(1) as f64;
        let (mut lo, mut hi, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
        for &x in &v {
            lo = lo.min(x);
            hi = hi.max(x);
            sum += x;
        }
        let head: Vec<String> = v.iter().take(5).map(|x| format!("{x:.6}")).collect();
        format!(
            "min {lo:.6} max {hi:.6} mean {:.6} [{} ...]",
            sum / n,
            head.join(", ")
        )
    };
    let values = || -> tvm_runtime::Result<Vec<f64>> {
        with_elem!(a.dtype(), T, {
            Ok(a.to_vec::<T>()?.into_iter().map(|x| x as f64).collect())
        })
    };
    values().map(stats).unwrap_or_else(|e| e.to_string())
}

/// Prints "latency {label}: median, min, max" of run times in milliseconds (sorts them).
fn print_latency(label: &str, times: &mut [f64]) {
    times.sort_by(|a, b| a.total_cmp(b));
    let ms = |t: f64| {
        if t < 1.0 {
            format!("{:.1} us", t * 1e3)
        } else {
            format!("{t:.3} ms")
        }
    };
    println!(
        "latency {label}: median {}, min {}, max {}",
        ms(percentile(times, 0.5)),
        ms(times[0]),
        ms(times[times.len() - 1])
    );
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[allow(clippy::too_many_arguments)]
fn run(
    model: &str,
    function: &str,
    inputs: &[String],
    output: Option<&str>,
    device: &str,
    repeat: usize,
    profile: bool,
) -> tvm_runtime::Result<()> {
    if profile && !cfg!(feature = "profiling") {
        return Err(tvm_runtime::packed_func::features::unavailable(
            "--profile",
            "profiling",
        ));
    }
    let dev = parse_device(device)?;
    let lib = Module::load(model)?;
    #[cfg(not(feature = "relax"))]
    let _ = function;
    #[cfg(feature = "relax")]
    if relax::is_relax(&lib) {
        return relax::run(&lib, function, inputs, output, dev, device, repeat, profile);
    }
    let ex = GraphExecutor::from_factory(&lib, &[dev])?;
    let infos = ex.input_info()?;
    let mut given = std::collections::HashMap::new();
    for spec in inputs {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| Error::value(format!("--input expects NAME=FILE.npy, got '{spec}'")))?;
        given.insert(name.to_string(), file.to_string());
    }
    for name in given.keys() {
        if !infos.iter().any(|i| &i.name == name) {
            let names: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
            return Err(Error::value(format!(
                "the model has no input '{name}' (inputs: {})",
                names.join(", ")
            )));
        }
    }
    for (k, info) in infos.iter().enumerate() {
        let host = match given.get(&info.name) {
            Some(file) => read_npy(file, info)?,
            None => random_input(info, k as u64 + 1)?,
        };
        let how = if given.contains_key(&info.name) {
            "from file"
        } else {
            "random"
        };
        println!(
            "input  {} {:?} {} ({how})",
            info.name,
            info.shape,
            dtype_to_string(info.dtype)
        );
        ex.set_input(&info.name, &host)?;
    }
    ex.run()?;
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        ex.run()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    for (i, info) in ex.output_info().iter().enumerate() {
        let out = ex.output(i)?;
        let mut host = NDArray::empty(out.shape(), out.dtype(), DLDevice::CPU)?;
        out.copy_to(&mut host)?;
        println!(
            "output {i} {} {:?} {}: {}",
            info.name,
            out.shape(),
            dtype_to_string(out.dtype()),
            summary(&host)
        );
        if let Some(dir) = output {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            let path = format!("{dir}/output_{i}.npy");
            write_npy(&path, &host)?;
            println!("       written to {path}");
        }
    }
    print_latency(
        &format!("over {} runs on {}", times.len(), device::describe(dev)),
        &mut times,
    );
    if profile {
        let create = lib.function("debug_create")?;
        let dbg = GraphExecutor::from_module(&Module::from_object(
            create
                .call(&[
                    tvm_runtime::ArgValue::Str(c"default"),
                    tvm_runtime::ArgValue::Device(dev),
                ])?
                .into_object()?,
        )?)?;
        for info in &infos {
            let i = ex
                .input_index(&info.name)
                .ok_or_else(|| Error::value(format!("input {} vanished", info.name)))?;
            dbg.set_input(&info.name, &ex.input(i)?)?;
        }
        #[cfg(feature = "profiling")]
        println!("{}", dbg.profile(repeat.max(1))?.table());
    }
    Ok(())
}

fn attr_text(v: RetValue) -> Option<String> {
    match v {
        RetValue::Null => None,
        RetValue::Int(i) => Some(i.to_string()),
        RetValue::Float(f) => Some(f.to_string()),
        RetValue::Str(s) => Some(s),
        other => Some(format!("{other:?}")),
    }
}

fn devices(target: bool) -> tvm_runtime::Result<()> {
    plugin::discover();
    let mut types = vec![1, 2, 7, 4];
    types.extend(plugin::list().into_iter().map(|(t, _)| t));
    for ty in types {
        let name = device::type_name(ty).unwrap_or_else(|| device_name(ty).to_string());
        if !device::has_backend(ty) {
            println!("{name}: not available (no backend in this build or no driver)");
            continue;
        }
        for id in 0..16 {
            let dev = DLDevice::new(ty, id);
            let api = device::api(dev)?;
            if !matches!(api.get_attr(dev, DeviceAttr::Exist)?, RetValue::Int(1)) {
                if id == 0 {
                    #[cfg(feature = "cuda")]
                    let why = if ty == tvm_runtime::packed_func::types::DL_CUDA {
                        device::cuda::driver_error()
                            .map(|e| format!(" ({e})"))
                            .unwrap_or_default()
                    } else {
                        String::new()
                    };
                    #[cfg(not(feature = "cuda"))]
                    let why = String::new();
                    #[cfg(feature = "opencl")]
                    let why = if ty == tvm_runtime::packed_func::types::DL_OPENCL {
                        device::opencl::platform_error()
                            .map(|e| format!(" ({e})"))
                            .unwrap_or_default()
                    } else {
                        why
                    };
                    println!("{name}: no device present{why}");
                }
                break;
            }
            println!("{name}({id}) [device type {ty}]:");
            for (label, kind) in [
                ("device name", DeviceAttr::DeviceName),
                ("max threads per block", DeviceAttr::MaxThreadsPerBlock),
                ("warp size", DeviceAttr::WarpSize),
                (
                    "max shared memory per block",
                    DeviceAttr::MaxSharedMemoryPerBlock,
                ),
                ("compute version", DeviceAttr::ComputeVersion),
                ("multiprocessors", DeviceAttr::MultiProcessorCount),
                ("max thread dimensions", DeviceAttr::MaxThreadDimensions),
                ("total memory (bytes)", DeviceAttr::TotalGlobalMemory),
                (
                    "available memory (bytes)",
                    DeviceAttr::AvailableGlobalMemory,
                ),
                ("api version", DeviceAttr::ApiVersion),
                ("driver version", DeviceAttr::DriverVersion),
            ] {
                if let Some(v) = attr_text(api.get_attr(dev, kind)?) {
                    println!("  {label}: {v}");
                }
            }
            #[cfg(feature = "opencl")]
            if ty == tvm_runtime::packed_func::types::DL_OPENCL {
                if let Some(p) = device::opencl::platform_name(id) {
                    println!("  platform: {p}");
                }
            }
            if target && ty == tvm_runtime::packed_func::types::DL_VULKAN {
                #[cfg(feature = "vulkan")]
                println!("  target: {}", device::vulkan::target_json(id)?);
            }
            if ty == 1 {
                println!("  threads: {}", tvm_runtime::threading::num_threads());
                break;
            }
        }
    }
    Ok(())
}

fn print_tree(m: &Module, depth: usize) {
    let fmt = match m.node().get_format() {
        Ok(f) if !f.is_empty() => format!(" [{f}]"),
        _ => String::new(),
    };
    println!("{}- {}{fmt}", "  ".repeat(depth), m.type_key());
    for i in m.imports() {
        print_tree(&i, depth + 1);
    }
}

fn show(label: &str, infos: &[TensorInfo]) {
    for i in infos {
        println!(
            "  {label} {} {:?} {}",
            i.name,
            i.shape,
            dtype_to_string(i.dtype)
        );
    }
}

fn info(path: &str, disasm: bool) -> tvm_runtime::Result<()> {
    let m = Module::load(path)?;
    println!("{path}:");
    print_tree(&m, 1);
    #[cfg(not(feature = "relax"))]
    let _ = disasm;
    #[cfg(feature = "relax")]
    if relax::is_relax(&m) {
        return relax::info(&m, disasm);
    }
    if m.get_function("get_graph_json", false)?.is_some() {
        let ex = GraphExecutor::from_factory(&m, &[DLDevice::CPU])?;
        println!("graph: {} nodes", ex.graph().nodes.len());
        show("input ", &ex.input_info()?);
        show("output", &ex.output_info());
        let mut funcs: Vec<String> = ex
            .graph()
            .nodes
            .iter()
            .map(|n| n.param.func_name.clone())
            .filter(|f| !f.is_empty())
            .collect();
        funcs.sort();
        funcs.dedup();
        println!("functions called: {}", funcs.join(", "));
    }
    Ok(())
}

fn main() -> ExitCode {
    // Behave like other command-line tools when the reader of stdout goes away (`| head`).
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // The version line names the features this build has.
    let version = format!(
        "{} (features: {})",
        env!("CARGO_PKG_VERSION"),
        tvm_runtime::packed_func::features::built()
            .collect::<Vec<_>>()
            .join(", ")
    );
    let matches = Cli::command()
        .version(&*Box::leak(version.into_boxed_str()))
        .get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let r = match cli.command {
        Command::Run {
            model,
            function,
            inputs,
            output,
            device,
            repeat,
            profile,
        } => run(
            &model,
            &function,
            &inputs,
            output.as_deref(),
            &device,
            repeat,
            profile,
        ),
        Command::Info { model, disasm } => info(&model, disasm),
        Command::Devices { target } => devices(target),
        #[cfg(feature = "rpc")]
        Command::RpcServer(a) => rpc_server::run(a),
        #[cfg(feature = "llm")]
        Command::Generate {
            model,
            params,
            prompt_ids,
            max_new_tokens,
            top_p,
            temperature,
            seed,
        } => generate::parse_ids(&prompt_ids).and_then(|ids| {
            let s = generate::Sampler {
                top_p,
                temperature,
                seed,
            };
            generate::generate(&model, &params, &ids, max_new_tokens, &s)
        }),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tvmrt: {e}");
            ExitCode::FAILURE
        }
    }
}
