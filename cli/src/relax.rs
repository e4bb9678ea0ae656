//! `tvmrt run` and `tvmrt info` for Relax VM executables (libraries built by `relax.build` and
//! exported with `export_library`).

use crate::{io_err, print_latency, random_input, summary, write_npy};
use std::collections::HashMap;
use std::time::Instant;
use tvm_runtime::executor::TensorInfo;
use tvm_runtime::packed_func::types::{DLDevice, DL_UINT};
use tvm_runtime::relax_vm::bytecode::{Arg, Instr, Reg};
use tvm_runtime::relax_vm::exec::{Constant, Executable, FuncKind};
use tvm_runtime::relax_vm::vm_module::ExecutableNode;
use tvm_runtime::relax_vm::{api::Value, VirtualMachine};
use tvm_runtime::{
    dtype_from_string, dtype_to_string, ArgValue, DLDataType, Error, Module, NDArray, RetValue,
};

/// Whether a loaded library is a Relax executable.
pub fn is_relax(m: &Module) -> bool {
    executable(m).is_some()
}

fn executable(m: &Module) -> Option<&Executable> {
    m.node()
        .as_any()
        .downcast_ref::<ExecutableNode>()
        .map(|n| &**n.executable())
}

/// What the executable's own checks say about a parameter: `None` where it does not check.
struct ParamInfo {
    name: String,
    dtype: Option<DLDataType>,
    /// Per dimension: `Some(extent)` when static, `None` when symbolic.
    shape: Option<Vec<Option<i64>>>,
}

impl ParamInfo {
    fn describe(&self) -> String {
        let dt = self
            .dtype
            .map(dtype_to_string)
            .unwrap_or_else(|| "?".into());
        match &self.shape {
            Some(s) => {
                let d: Vec<String> = s
                    .iter()
                    .enumerate()
                    .map(|(i, e)| e.map_or_else(|| format!("d{i}"), |v| v.to_string()))
                    .collect();
                format!("{dt}[{}]", d.join(", "))
            }
            None => format!("{dt}[?]"),
        }
    }

    /// The static shape, if every extent is known.
    fn static_shape(&self) -> Option<Vec<i64>> {
        self.shape.as_ref()?.iter().copied().collect()
    }
}

/// Reads the parameter checks (`check_tensor_info`, `match_shape`) of a VM function.
fn param_infos(ex: &Executable, func: &str) -> tvm_runtime::Result<Vec<ParamInfo>> {
    let idx = ex.func_index(func).ok_or_else(|| {
        let names: Vec<&str> = vm_functions(ex).collect();
        Error::value(format!(
            "the executable has no function '{func}' (functions: {})",
            names.join(", ")
        ))
    })?;
    let fi = &ex.funcs[idx];
    if fi.kind != FuncKind::VmFunc {
        return Err(Error::value(format!("'{func}' is not a VM function")));
    }
    let mut infos: Vec<ParamInfo> = fi
        .param_names
        .iter()
        .map(|n| ParamInfo {
            name: n.clone(),
            dtype: None,
            shape: None,
        })
        .collect();
    let mut ndims: Vec<Option<i64>> = vec![None; infos.len()];
    let n_params = infos.len() as i64;
    for pc in fi.start_instr.max(0)..fi.end_instr {
        let Some(ins) = ex.instr(pc as usize) else {
            break;
        };
        let Instr::Call { func, .. } = ins else {
            continue;
        };
        let Some(callee) = ex.funcs.get(func as usize) else {
            continue;
        };
        let args: Vec<Arg> = ex.args_of(&ins).iter().map(|a| a.get()).collect();
        let Some(&Arg::Reg(Reg::R(r))) = args.first() else {
            continue;
        };
        let r = r as i64;
        if !(0..n_params).contains(&r) {
            continue;
        }
        let p = &mut infos[r as usize];
        match callee.name.as_str() {
            "vm.builtin.check_tensor_info" if p.dtype.is_none() && args.len() >= 2 => {
                if let Arg::Imm(n) = args[1] {
                    ndims[r as usize] = Some(n).filter(|&n| n >= 0);
                }
                if let Some(&Arg::Const(c)) = args.get(2).filter(|_| args.len() == 4) {
                    if let Some(Constant::DataType(d)) = ex.constants.get(c as usize) {
                        p.dtype = Some(*d);
                    }
                }
            }
            "vm.builtin.match_shape" if p.shape.is_none() && args.len() >= 3 => {
                let Arg::Imm(ndim) = args[2] else { continue };
                let pairs = args.get(3..3 + 2 * ndim.max(0) as usize).unwrap_or(&[]);
                if pairs.len() == 2 * ndim as usize {
                    // code 0: the extent must equal the immediate; others read the heap
                    p.shape = Some(
                        pairs
                            .chunks(2)
                            .map(|c| match (c[0], c[1]) {
                                (Arg::Imm(0), Arg::Imm(v)) => Some(v),
                                _ => None,
                            })
                            .collect(),
                    );
                }
            }
            _ => {}
        }
    }
    // checked rank but no match_shape (a scalar, or no shape annotation): symbolic extents
    for (p, n) in infos.iter_mut().zip(ndims) {
        if let (None, Some(n)) = (&p.shape, n) {
            p.shape = Some(vec![None; n as usize]);
        }
    }
    Ok(infos)
}

fn vm_functions(ex: &Executable) -> impl Iterator<Item = &str> {
    ex.funcs
        .iter()
        .filter(|f| f.kind != FuncKind::PackedFunc)
        .map(|f| f.name.as_str())
}

/// Reads a .npy file into an NDArray of the file's own dtype and shape (any numpy dtype TVM
/// has: floats, ints, uints, bool).
fn read_npy_any(path: &str) -> tvm_runtime::Result<NDArray> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(io_err(path))?;
    let shape: Vec<i64> = npy.shape().iter().map(|&d| d as i64).collect();
    if npy.order() != npyz::Order::C {
        return Err(Error::value(format!(
            "{path}: Fortran order is not supported"
        )));
    }
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(Error::value(format!(
            "{path}: structured dtypes are not supported"
        )));
    };
    let (kind, size) = (ts.type_char(), ts.size_field());
    if size > 1 && ts.endianness() == npyz::Endianness::Big {
        return Err(Error::value(format!(
            "{path}: big-endian data is not supported"
        )));
    }
    let dtype = match (kind, size) {
        (npyz::TypeChar::Bool, 1) => DLDataType::new(DL_UINT, 1, 1),
        (npyz::TypeChar::Float, s) => dtype_from_string(&format!("float{}", s * 8))?,
        (npyz::TypeChar::Int, s) => dtype_from_string(&format!("int{}", s * 8))?,
        (npyz::TypeChar::Uint, s) => dtype_from_string(&format!("uint{}", s * 8))?,
        _ => return Err(Error::value(format!("{path}: unsupported dtype {ts}"))),
    };
    let mut a = NDArray::empty(&shape, dtype, DLDevice::CPU)?;
    let n = a.nbytes();
    let data = bytes
        .len()
        .checked_sub(n)
        .map(|start| &bytes[start..])
        .ok_or_else(|| Error::value(format!("{path}: truncated ({n} data bytes expected)")))?;
    a.copy_from_bytes(data)?;
    Ok(a)
}

/// A random input for a parameter whose dtype and shape the executable fixes.
fn make_random(p: &ParamInfo, seed: u64) -> tvm_runtime::Result<NDArray> {
    let (Some(dtype), Some(shape)) = (p.dtype, p.static_shape()) else {
        return Err(Error::value(format!(
            "parameter '{}' is {}: its shape or dtype is not fixed by the executable; pass it \
             with --input {}=FILE.npy",
            p.name,
            p.describe(),
            p.name
        )));
    };
    if dtype == DLDataType::new(DL_UINT, 1, 1) {
        // bool: random 0/1 bytes
        let mut a = NDArray::empty(&shape, dtype, DLDevice::CPU)?;
        let info = TensorInfo {
            name: p.name.clone(),
            shape: vec![a.nbytes() as i64],
            dtype: DLDataType::new(DL_UINT, 8, 1),
        };
        let bits: Vec<u8> = random_input(&info, seed)?
            .to_vec::<u8>()?
            .into_iter()
            .map(|b| b & 1)
            .collect();
        a.copy_from_bytes(&bits)?;
        return Ok(a);
    }
    let info = TensorInfo {
        name: p.name.clone(),
        shape,
        dtype,
    };
    random_input(&info, seed)
}

/// Checks a given input against what the executable fixes.
fn check_input(p: &ParamInfo, a: &NDArray, file: &str) -> tvm_runtime::Result<()> {
    let got = format!("{}{:?}", dtype_to_string(a.dtype()), a.shape());
    if let Some(d) = p.dtype {
        if d != a.dtype() {
            return Err(Error::value(format!(
                "{file}: {got} does not match parameter {} {}",
                p.name,
                p.describe()
            )));
        }
    }
    if let Some(s) = &p.shape {
        let ok = s.len() == a.shape().len()
            && s.iter()
                .zip(a.shape())
                .all(|(e, &v)| e.is_none_or(|e| e == v));
        if !ok {
            return Err(Error::value(format!(
                "{file}: {got} does not match parameter {} {}",
                p.name,
                p.describe()
            )));
        }
    }
    Ok(())
}

/// Outputs, tuples flattened, each with its position (`output 1.0` = field 0 of field 1).
fn flatten(v: &Value, label: String, out: &mut Vec<(String, NDArray)>, other: &mut Vec<String>) {
    match v {
        Value::Tensor(t) => out.push((label, t.clone())),
        Value::Tuple(items) => {
            for (i, x) in items.iter().enumerate() {
                let l = if label.is_empty() {
                    i.to_string()
                } else {
                    format!("{label}.{i}")
                };
                flatten(x, l, out, other);
            }
        }
        Value::Other(r) => {
            let label = if label.is_empty() { "0" } else { &label };
            other.push(format!("{label}: {}", describe_ret(r)))
        }
    }
}

fn describe_ret(r: &RetValue) -> String {
    match r {
        RetValue::Object(o) => {
            if let Some(s) = o.downcast_ref::<tvm_runtime::object::containers::ShapeTupleObj>() {
                format!("shape {:?}", s.dims())
            } else if let Some(s) = o.downcast_ref::<tvm_runtime::object::containers::StringObj>() {
                format!("string {:?}", s.as_str())
            } else {
                format!("a {} object", o.type_key())
            }
        }
        other => format!("{other:?}"),
    }
}

/// `tvmrt run` on a Relax executable.
#[allow(clippy::too_many_arguments)]
pub fn run(
    lib: &Module,
    function: &str,
    inputs: &[String],
    output: Option<&str>,
    dev: DLDevice,
    device: &str,
    repeat: usize,
    profile: bool,
) -> tvm_runtime::Result<()> {
    let ex = executable(lib).ok_or_else(|| Error::value("not a Relax executable"))?;
    let params = param_infos(ex, function)?;
    let mut given = HashMap::new();
    for spec in inputs {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| Error::value(format!("--input expects NAME=FILE.npy, got '{spec}'")))?;
        if !params.iter().any(|p| p.name == name) {
            let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
            return Err(Error::value(format!(
                "{function} has no parameter '{name}' (parameters: {})",
                names.join(", ")
            )));
        }
        given.insert(name.to_string(), file.to_string());
    }
    let mut args = Vec::with_capacity(params.len());
    for (k, p) in params.iter().enumerate() {
        let (a, how) = match given.get(&p.name) {
            Some(file) => {
                let a = read_npy_any(file)?;
                check_input(p, &a, file)?;
                (a, "from file")
            }
            None => (make_random(p, k as u64 + 1)?, "random"),
        };
        println!(
            "input  {} {:?} {} ({how})",
            p.name,
            a.shape(),
            dtype_to_string(a.dtype())
        );
        args.push(a);
    }

    let vm = VirtualMachine::new(lib)?;
    vm.init(&[dev])?;
    let result = vm.call(function, &args)?;
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        vm.call(function, &args)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (mut outs, mut other) = (Vec::new(), Vec::new());
    flatten(&result, String::new(), &mut outs, &mut other);
    for (i, (label, out)) in outs.iter().enumerate() {
        let mut host = NDArray::empty(out.shape(), out.dtype(), DLDevice::CPU)?;
        out.copy_to(&mut host)?;
        let label = if label.is_empty() { "0" } else { label };
        println!(
            "output {label} {:?} {}: {}",
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
    for o in other {
        println!("output {o}");
    }
    print_latency(
        &format!("of {function} over {} runs on {device}", times.len()),
        &mut times,
    );
    if profile {
        print_profile(lib, function, dev, &args)?;
    }
    Ok(())
}

/// Runs the function once more on the profiler VM and prints its per-call table.
fn print_profile(
    lib: &Module,
    function: &str,
    dev: DLDevice,
    args: &[NDArray],
) -> tvm_runtime::Result<()> {
    let vm = Module::from_object(
        lib.function("vm_profiler_load_executable")?
            .call(&[])?
            .into_object()?,
    )?;
    let mut init = vec![
        ArgValue::Int(dev.device_type as i64),
        ArgValue::Int(dev.device_id as i64),
        ArgValue::Int(2),
    ];
    if dev != DLDevice::CPU {
        init.extend([ArgValue::Int(1), ArgValue::Int(0), ArgValue::Int(2)]);
    }
    vm.function("vm_initialization")?.call(&init)?;
    let fname = std::ffi::CString::new(function).map_err(|e| Error::value(e.to_string()))?;
    let mut call = vec![ArgValue::Str(&fname)];
    call.extend(args.iter().map(ArgValue::from));
    let json = match vm.function("profile")?.call(&call)? {
        RetValue::Str(s) => s,
        other => return Err(Error::value(format!("profile returned {other:?}"))),
    };
    let report: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| Error::value(format!("profile report: {e}")))?;
    let calls = report["calls"].as_array().cloned().unwrap_or_default();
    let field = |c: &serde_json::Value, k: &str, sub: &str| c[k][sub].clone();
    println!(
        "{:<4} {:<40} {:>12} {:>8}  Argument Shapes",
        "#", "Name", "Duration us", "Percent"
    );
    let mut total = 0.0;
    for (i, c) in calls.iter().enumerate() {
        let us = field(c, "Duration (us)", "microseconds")
            .as_f64()
            .unwrap_or(0.0);
        total += us;
        println!(
            "{:<4} {:<40} {:>12.2} {:>8.2}  {}",
            i,
            field(c, "Name", "string").as_str().unwrap_or("?"),
            us,
            field(c, "Percent", "percent").as_f64().unwrap_or(0.0),
            field(c, "Argument Shapes", "string").as_str().unwrap_or("")
        );
    }
    println!(
        "{} calls, {:.2} us in calls; one profiled run of {function} after one warm-up",
        calls.len(),
        total
    );
    Ok(())
}

fn constant_text(c: &Constant) -> String {
    match c {
        Constant::NDArray(a) => format!(
            "tensor {} {:?} ({} bytes)",
            dtype_to_string(a.dtype()),
            a.shape(),
            a.nbytes()
        ),
        Constant::DataType(d) => format!("dtype {}", dtype_to_string(*d)),
        Constant::Shape(s) => format!("shape {s:?}"),
        Constant::Str(s) => {
            let s = String::from_utf8_lossy(s);
            let short: String = s.chars().take(100).collect();
            let more = if short.len() < s.len() { "..." } else { "" };
            format!("string {short:?}{more}")
        }
        Constant::Int(i) => format!("int {i}"),
        Constant::Float(f) => format!("float {f}"),
    }
}

/// `tvmrt info` on a Relax executable.
pub fn info(m: &Module, disasm: bool) -> tvm_runtime::Result<()> {
    let ex = executable(m).ok_or_else(|| Error::value("not a Relax executable"))?;
    println!("relax executable ({}):", m.type_key());
    for f in ex.funcs.iter().filter(|f| f.kind != FuncKind::PackedFunc) {
        let params = param_infos(ex, &f.name)
            .map(|ps| {
                ps.iter()
                    .map(|p| format!("{}: {}", p.name, p.describe()))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_else(|e| e.to_string());
        let kind = if f.kind == FuncKind::VmTirFunc {
            " [compiled TIR]"
        } else {
            ""
        };
        println!(
            "  function {}({params}){kind}: {} instructions, {} registers",
            f.name,
            f.end_instr - f.start_instr,
            f.register_file_size
        );
    }
    let packed: Vec<&str> = ex
        .funcs
        .iter()
        .filter(|f| f.kind == FuncKind::PackedFunc)
        .map(|f| f.name.as_str())
        .collect();
    println!("packed functions ({}): {}", packed.len(), packed.join(", "));
    let bytes: usize = ex
        .constants
        .iter()
        .map(|c| match c {
            Constant::NDArray(a) => a.nbytes(),
            _ => 0,
        })
        .sum();
    println!(
        "constants ({}, {bytes} bytes of tensors):",
        ex.constants.len()
    );
    for (i, c) in ex.constants.iter().enumerate() {
        println!("  c[{i}] {}", constant_text(c));
    }
    if disasm {
        match m.function("as_text")?.call(&[])? {
            RetValue::Str(s) => println!("{s}"),
            other => return Err(Error::value(format!("as_text returned {other:?}"))),
        }
    }
    Ok(())
}
