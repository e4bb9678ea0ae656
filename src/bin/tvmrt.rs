//! `tvmrt`: run TVM-compiled models and inspect modules and devices from the command line.

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use tvm_runtime::device::{self, DeviceAttr};
use tvm_runtime::ffi::types::{device_name, DLDevice};
use tvm_runtime::{Module, RetValue};

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
    /// Print a library's module tree and its functions.
    Info {
        /// The library (`.so` exported by TVM).
        model: String,
    },
    /// List devices and their attributes.
    Devices,
}

/// Device types probed by `tvmrt devices`.
const PROBED: [i32; 4] = [1, 2, 7, 4];

fn attr_text(v: RetValue) -> Option<String> {
    match v {
        RetValue::Null => None,
        RetValue::Int(i) => Some(i.to_string()),
        RetValue::Float(f) => Some(f.to_string()),
        RetValue::Str(s) => Some(s),
        other => Some(format!("{other:?}")),
    }
}

fn devices() -> tvm_runtime::Result<()> {
    for ty in PROBED {
        let name = device_name(ty);
        if !device::has_backend(ty) {
            println!("{name}: not available (no backend in this build or no driver)");
            continue;
        }
        for id in 0..16 {
            let dev = DLDevice::new(ty, id);
            let api = device::api(dev)?;
            let exists = matches!(api.get_attr(dev, DeviceAttr::Exist)?, RetValue::Int(1));
            if !exists {
                if id == 0 {
                    println!("{name}: no device present");
                }
                break;
            }
            println!("{name}({id}):");
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
            if ty == 1 {
                println!("  threads: {}", tvm_runtime::threading::num_threads());
                break;
            }
        }
    }
    Ok(())
}

fn print_tree(m: &Module, depth: usize) {
    println!(
        "{}- {} ({})",
        "  ".repeat(depth),
        m.type_key(),
        m.node().get_format()
    );
    for i in m.imports() {
        print_tree(&i, depth + 1);
    }
}

fn info(path: &str) -> tvm_runtime::Result<()> {
    let m = Module::load(path)?;
    println!("{path}:");
    print_tree(&m, 1);
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Info { model } => info(&model),
        Command::Devices => devices(),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tvmrt: {e}");
            ExitCode::FAILURE
        }
    }
}
