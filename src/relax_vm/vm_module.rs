//! The modules: the executable (`relax.Executable`, v0.14–v0.19, and `relax.VMExecutable`,
//! v0.20) with its loaders, and the VM (`relax.VirtualMachine`) with everything TVM's Python
//! `VirtualMachine` calls.

#[cfg(feature = "profiling")]
use super::bytecode::push;
use super::bytecode::{self, owned};
use super::exec::{Executable, FuncInfo, FuncKind};
use super::interp::{regs_of, to_device, VmCore};
#[cfg(feature = "profiling")]
use super::report::{metric, set};
use crate::module::blob::with_lent_reader;
use crate::module::{property, Module, ModuleNode};
use crate::object::containers::ArrayObj;
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::{Function, PackedFuncObj};
#[cfg(feature = "profiling")]
use crate::packed_func::json::{Map, Value};
use crate::packed_func::registry;
#[cfg(feature = "profiling")]
use crate::packed_func::types::device_string;
use crate::packed_func::types::DLDevice;
use crate::packed_func::value::{ArgValue, Args, RetValue};
use std::sync::Arc;

/// The executable module.
pub struct ExecutableNode {
    exec: Arc<Executable>,
    type_key: &'static str,
}

impl ExecutableNode {
    /// Wraps a parsed executable under a type key.
    pub fn new(exec: Executable, type_key: &'static str) -> ExecutableNode {
        ExecutableNode {
            exec: Arc::new(exec),
            type_key,
        }
    }

    /// The executable.
    pub fn executable(&self) -> &Arc<Executable> {
        &self.exec
    }
}

/// Creates a VM over an executable module (whose imports become the VM's).
pub fn load_vm(exec_module: &Module, profiler: bool) -> Result<Module> {
    let node = exec_module
        .node()
        .as_any()
        .downcast_ref::<ExecutableNode>()
        .ok_or_else(|| {
            Error::type_error_fmt(format_args!(
                "expected a Relax executable module but got {}",
                exec_module.type_key()
            ))
        })?;
    let core = Arc::new(VmCore::new(node.exec.clone(), exec_module.clone()));
    let vm = Module::new(Box::new(VmNode { core, profiler }));
    for m in exec_module.imports() {
        vm.import(&m)?;
    }
    Ok(vm)
}

/// A function of the executable module.
enum ExecFn {
    Stats,
    AsText,
    AsPython,
    HasFunction,
    /// `vm_load_executable` (or, `true`, `vm_profiler_load_executable`) of this module.
    Load(Module, bool),
    /// `vm_profiler_load_executable` in a build without `profiling`.
    #[cfg(not(feature = "profiling"))]
    NoProfiler,
}

impl ModuleNode for ExecutableNode {
    fn type_key(&self) -> &str {
        self.type_key
    }

    fn get_function(&self, name: &str, this: Option<&ObjectRef>) -> Result<Option<Function>> {
        let op = match name {
            "stats" => ExecFn::Stats,
            "as_text" => ExecFn::AsText,
            "as_python" => ExecFn::AsPython,
            "has_function" => ExecFn::HasFunction,
            #[cfg(not(feature = "profiling"))]
            "vm_profiler_load_executable" => ExecFn::NoProfiler,
            // (Reached by the profiler's name only in builds with `profiling`.)
            #[allow(unreachable_patterns)]
            "vm_load_executable" | "vm_profiler_load_executable" => {
                let Some(this) = this else { return Ok(None) };
                let m = Module::from_object(this.clone())?;
                ExecFn::Load(m, name == "vm_profiler_load_executable")
            }
            _ => return Ok(None),
        };
        let exec = self.exec.clone();
        // One closure type for all the executable's functions: what each does is `op`.
        Ok(Some(Function::from_rust(move |a, rv| {
            *rv = match &op {
                ExecFn::Stats => RetValue::Str(exec.stats()),
                ExecFn::AsText => RetValue::Str(bytecode::as_text(&exec)),
                ExecFn::AsPython => RetValue::Str(bytecode::as_python(&exec)),
                // An int, as v0.16 returns bools (its frontend has no bool code).
                ExecFn::HasFunction => RetValue::Int(exec.func_index(a.str(0)?).is_some() as i64),
                ExecFn::Load(m, profiler) => RetValue::Object(load_vm(m, *profiler)?.into_object()),
                #[cfg(not(feature = "profiling"))]
                ExecFn::NoProfiler => {
                    return Err(crate::packed_func::features::unavailable(
                        "vm_profiler_load_executable",
                        "profiling",
                    ))
                }
            };
            Ok(())
        })))
    }

    fn property_mask(&self) -> i32 {
        property::BINARY_SERIALIZABLE
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        self.exec.save()
    }

    fn save_to_file(&self, path: &str, _format: &str) -> Result<()> {
        std::fs::write(path, self.exec.save()?)
            .map_err(|e| Error::value_fmt(format_args!("cannot write {path}: {e}")))
    }

    fn get_format(&self) -> Result<String> {
        Ok(owned("bin"))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Loads an executable module from `SaveToBinary` bytes.
pub fn load_executable_bytes(data: &[u8], type_key: &'static str) -> Result<Module> {
    let exec = Executable::load(data)?;
    Ok(Module::new(Box::new(ExecutableNode::new(exec, type_key))))
}

/// Loads an executable module from a file (`Module.save` output).
pub fn load_executable_file(path: &str, type_key: &'static str) -> Result<Module> {
    let data = std::fs::read(path)
        .map_err(|e| Error::value_fmt(format_args!("cannot read {path}: {e}")))?;
    load_executable_bytes(&data, type_key).map_err(|e| e.context(path))
}

/// A blob loader: reads one executable from the `__tvm_dev_mblob` stream.
pub fn load_binary(args: Args<'_>, type_key: &'static str) -> Result<Module> {
    let who = format!("runtime.module.loadbinary_{type_key}");
    let exec = with_lent_reader(args.handle(0)?, &who, |r| {
        let (body, file) = r.read_blob_span("the Relax executable")?;
        Executable::load_body_in(body, file)
    })?;
    Ok(Module::new(Box::new(ExecutableNode::new(exec, type_key))))
}

/// The VM module.
pub struct VmNode {
    core: Arc<VmCore>,
    #[cfg_attr(not(feature = "profiling"), allow(dead_code))]
    profiler: bool,
}

impl VmNode {
    /// The VM.
    pub fn core(&self) -> &Arc<VmCore> {
        &self.core
    }
}

fn unknown(name: &str) -> Error {
    Error::value_fmt(format_args!("Unknown function: {name}"))
}

fn index_into(out: RetValue, args: &Args<'_>, from: usize) -> Result<RetValue> {
    let mut cur = out;
    for i in from..args.len() {
        let idx = args.i64(i)?;
        let arr = match &cur {
            RetValue::Object(o) => o.downcast_ref::<ArrayObj>(),
            _ => None,
        }
        .ok_or_else(|| {
            Error::value_fmt(format_args!("output index {idx}: the value is not a tuple"))
        })?;
        let item = usize::try_from(idx)
            .ok()
            .and_then(|k| arr.items.get(k))
            .ok_or_else(|| {
                Error::index_fmt(format_args!(
                    "output index {idx} is out of range for a tuple of {}",
                    arr.items.len()
                ))
            })?;
        cur = match item {
            Some(o) => RetValue::Object(o.clone()),
            None => RetValue::Null,
        };
    }
    Ok(cur)
}

/// The arguments from `from` on as register values, arrays copied to the VM's first device
/// ([`to_device`]); with `params_last`, the last is a module whose `get_params` gives the value.
#[inline(never)]
fn regs_on(
    core: &VmCore,
    args: &Args<'_>,
    from: usize,
    params_last: bool,
) -> Result<Vec<RetValue>> {
    let st = core.state()?;
    let dev = st.devices.first().copied().unwrap_or(DLDevice::CPU);
    let mut regs = regs_of(args, from)?;
    let n = regs.len();
    for (i, r) in regs.iter_mut().enumerate() {
        let v = std::mem::take(r);
        *r = if params_last && i + 1 == n {
            let m = Module::from_object(v.into_object()?)?;
            m.function("get_params")?.call(&[])?
        } else {
            to_device(v, dev)?
        };
    }
    Ok(regs)
}

/// The function-table entry of `fname`, or the unknown-function error.
#[inline(never)]
fn func_of<'a>(core: &'a VmCore, fname: &str) -> Result<(usize, &'a FuncInfo)> {
    core.exec
        .func_index(fname)
        .and_then(|i| Some((i, core.exec.funcs.get(i)?)))
        .ok_or_else(|| unknown(fname))
}

/// The closure of `fname`, or the unknown-function error.
#[inline(never)]
fn closure_of(core: &VmCore, fname: &str) -> Result<ObjectRef> {
    core.get_closure(fname).ok_or_else(|| unknown(fname))
}

/// The inputs `set_input` stored for `fname`.
#[inline(never)]
fn stored_inputs(core: &VmCore, fname: &str) -> Option<Vec<RetValue>> {
    core.inputs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(fname)
        .cloned()
}

fn is_array(v: &RetValue) -> Option<usize> {
    match v {
        RetValue::Object(o) => o.downcast_ref::<ArrayObj>().map(|a| a.items.len()),
        _ => None,
    }
}

impl VmNode {
    fn set_input(core: &VmCore, args: &Args<'_>, with_params: bool) -> Result<()> {
        let fname = args.str(0)?;
        let (_, f) = func_of(core, fname)?;
        let given = args.len() - 1;
        if given as i64 != f.num_args {
            return Err(Error::value_fmt(format_args!(
                "The number of provided parameters doesn't match the number of arguments for \
                 {fname}: expected {}, got {given}",
                f.num_args
            )));
        }
        let regs = regs_on(core, args, 1, with_params)?;
        core.inputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(owned(fname), regs);
        Ok(())
    }

    fn output(core: &VmCore, fname: &str) -> Result<RetValue> {
        core.outputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(fname)
            .cloned()
            .ok_or_else(|| {
                Error::value_fmt(format_args!(
                    "No output saved for call of \"{fname}\"; use `invoke_stateful` to call it first."
                ))
            })
    }

    #[cfg(feature = "profiling")]
    #[inline(never)]
    fn profile(core: &VmCore, args: &Args<'_>) -> Result<String> {
        let fname = args.str(0)?;
        let clo = closure_of(core, fname)?;
        let inputs = match stored_inputs(core, fname) {
            Some(i) => {
                if args.len() != 1 {
                    return Err(Error::value("Inputs are already provided by set_input."));
                }
                i
            }
            None => {
                if args.len() < 2 {
                    return Err(Error::value("No input is provided"));
                }
                regs_on(core, args, 1, false)?
            }
        };
        let st = core.state()?;
        core.invoke_closure_regs(&clo, &inputs)?;
        core.set_profiling(true);
        let t0 = crate::sync::Instant::now();
        let r = core.invoke_closure_regs(&clo, &inputs);
        let total = t0.elapsed().as_secs_f64() * 1e6;
        let calls = core.set_profiling(false);
        r?;
        Ok(report_json(&calls, total, &st.devices))
    }
}

/// The columns a call and a device total share: `Duration (us)`, `Count` (1), `Name` and
/// `Device`.
#[cfg(feature = "profiling")]
#[inline(never)]
fn report_row(micros: f64, name: &str, device: String) -> Map {
    let mut row = Map::new();
    set(
        &mut row,
        "Duration (us)",
        metric("microseconds", micros.into()),
    );
    set(&mut row, "Count", metric("count", 1u64.into()));
    set(&mut row, "Name", metric("string", name.into()));
    set(&mut row, "Device", metric("string", device.into()));
    row
}

/// The report's JSON: the calls, a total per device (of a known type, `device_type > 0`) and
/// the configuration.
#[cfg(feature = "profiling")]
fn report_json(calls: &[super::interp::CallRecord], total_us: f64, devices: &[DLDevice]) -> String {
    let mut out_calls = Vec::new();
    for c in calls {
        let mut shapes = String::new();
        for (k, (t, s)) in c.shapes.iter().enumerate() {
            if k > 0 {
                push(&mut shapes, ", ");
            }
            push(&mut shapes, t);
            shapes.push('[');
            for (j, &d) in s.iter().enumerate() {
                bytecode::num(&mut shapes, if j > 0 { ", " } else { "" }, d, "");
            }
            shapes.push(']');
        }
        let pct = if total_us > 0.0 {
            c.micros / total_us * 100.0
        } else {
            0.0
        };
        let mut row = report_row(c.micros, &c.name, device_string(c.device));
        set(&mut row, "Argument Shapes", metric("string", shapes.into()));
        set(&mut row, "Percent", metric("percent", pct.into()));
        out_calls.push(Value::Object(row));
    }
    let mut dm = Map::new();
    for d in devices.iter().filter(|d| d.device_type > 0) {
        let name = device_string(*d);
        let row = report_row(total_us, "Total", name.clone());
        set(&mut dm, &name, Value::Object(row));
    }
    let mut config = Map::new();
    set(
        &mut config,
        "Number of threads",
        metric("count", crate::threading::num_threads().into()),
    );
    set(&mut config, "Executor", metric("string", "VM".into()));
    let mut out = Map::new();
    set(&mut out, "calls", Value::Array(out_calls));
    set(&mut out, "device_metrics", Value::Object(dm));
    set(&mut out, "configuration", Value::Object(config));
    Value::Object(out).to_string()
}

/// A function of the VM module.
enum VmFn {
    Init,
    SaveFunction,
    InvokeClosure,
    InvokeStateful,
    SetInstrument,
    OutputArity,
    Output,
    /// `set_input`, or `set_input_with_param_module` (`true`).
    SetInput(bool),
    FunctionArity,
    ParamName,
    #[cfg(feature = "profiling")]
    Profile,
    /// A closure saved by `save_function`.
    Saved(ObjectRef),
    /// A VM function.
    Call(usize),
}

/// Runs function `op` of the VM module: the value it returns, if any.
fn vm_fn(core: &VmCore, op: &VmFn, a: Args<'_>) -> Result<Option<RetValue>> {
    match op {
        VmFn::Init => {
            if a.is_empty() || a.len() % 3 != 0 {
                return Err(Error::value_fmt(format_args!(
                    "vm_initialization expects (device_type, device_id, allocator_type) \
                     triplets but got {} arguments",
                    a.len()
                )));
            }
            let mut devs = Vec::new();
            let mut kinds = Vec::new();
            for i in (0..a.len()).step_by(3) {
                devs.push(DLDevice::new(a.i64(i)? as i32, a.i64(i + 1)? as i32));
                kinds.push(a.i64(i + 2)?);
            }
            core.init(devs, kinds)?;
            Ok(None)
        }
        VmFn::SaveFunction => {
            if a.len() < 3 {
                return Err(Error::value(
                    "save_function expects (func_name, save_name, include_return, *args)",
                ));
            }
            let fname = a.str(0)?;
            let save = owned(a.str(1)?);
            let include_return = a.i64(2)? != 0;
            let clo = closure_of(core, fname)?;
            let bound = super::interp::SharedValues(regs_on(core, &a, 3, false)?);
            let inner = clo
                .downcast_ref::<super::interp::ClosureObj>()
                .map(|c| c.imp.clone())
                .ok_or_else(|| Error::type_error("save_function: not a closure"))?;
            let imp = super::builtins::bind(inner, bound, include_return);
            core.saved
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(save.clone(), super::interp::ClosureObj::new_ref(&save, imp));
            Ok(None)
        }
        VmFn::InvokeClosure => {
            let clo = match a.get(0)? {
                ArgValue::Object(o) => o.to_ref(),
                v => {
                    return Err(Error::type_error_fmt(format_args!(
                        "invoke_closure expects a closure first, got {}",
                        v.kind_name()
                    )))
                }
            };
            // SAFETY: the call's own arguments, valid for their codes during it.
            Ok(Some(unsafe {
                core.invoke_closure_c(&clo, &a.values()[1..], &a.codes()[1..])?
            }))
        }
        VmFn::InvokeStateful => {
            let fname = a.str(0)?;
            let (idx, f) = func_of(core, fname)?;
            let inputs = stored_inputs(core, fname).ok_or_else(|| {
                Error::value_fmt(format_args!(
                    "No inputs set for stateful call of {fname}; use `set_input` first."
                ))
            })?;
            let out = if f.kind == FuncKind::VmFunc {
                core.call_index(idx, inputs)?
            } else {
                core.invoke_closure_regs(&closure_of(core, fname)?, &inputs)?
            };
            core.outputs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(owned(fname), out);
            Ok(None)
        }
        VmFn::SetInstrument => {
            let f = match a.get(0)? {
                ArgValue::Object(o) if o.downcast_ref::<PackedFuncObj>().is_some() => {
                    Function::from_object(o.to_ref())?
                }
                ArgValue::Null => {
                    core.set_instrument(None);
                    return Ok(None);
                }
                _ => {
                    let name = a.str(0)?;
                    let factory = registry::get(name).ok_or_else(|| {
                        Error::value_fmt(format_args!("Cannot find factory {name}"))
                    })?;
                    let rv = super::builtins::call_args(&factory, &a, 1, a.len(), &[])?;
                    Function::from_object(rv.into_object()?)?
                }
            };
            core.set_instrument(Some(f));
            Ok(None)
        }
        VmFn::OutputArity | VmFn::Output => {
            let v = index_into(VmNode::output(core, a.str(0)?)?, &a, 1)?;
            let n = is_array(&v);
            Ok(Some(if let VmFn::OutputArity = op {
                RetValue::Int(n.map(|n| n as i64).unwrap_or(-1))
            } else if n.is_some() {
                return Err(Error::value(
                    "`get_output` cannot return a tuple for RPC compatibility. Please \
                     specify another index argument.",
                ));
            } else {
                v
            }))
        }
        VmFn::SetInput(with_params) => {
            VmNode::set_input(core, &a, *with_params)?;
            Ok(None)
        }
        VmFn::FunctionArity => {
            let (_, f) = func_of(core, a.str(0)?)?;
            Ok(Some(RetValue::Int(f.param_names.len() as i64)))
        }
        VmFn::ParamName => {
            let fname = a.str(0)?;
            let i = a.i64(1)?;
            let names = &func_of(core, fname)?.1.param_names;
            let n = usize::try_from(i)
                .ok()
                .and_then(|k| names.get(k))
                .ok_or_else(|| {
                    Error::value_fmt(format_args!(
                        "Invalid index for {fname} ({i} out of {})",
                        names.len()
                    ))
                })?;
            Ok(Some(RetValue::Str(n.clone())))
        }
        #[cfg(feature = "profiling")]
        VmFn::Profile => Ok(Some(RetValue::Str(VmNode::profile(core, &a)?))),
        VmFn::Saved(clo) => {
            // SAFETY: the call's own arguments, valid for their codes during it.
            Ok(Some(unsafe {
                core.invoke_closure_c(clo, a.values(), a.codes())?
            }))
        }
        VmFn::Call(idx) => Ok(Some(core.call_index(*idx, regs_of(&a, 0)?)?)),
    }
}

impl ModuleNode for VmNode {
    fn type_key(&self) -> &str {
        "relax.VirtualMachine"
    }

    fn get_function(&self, name: &str, this: Option<&ObjectRef>) -> Result<Option<Function>> {
        if this.is_none() {
            // Environment lookups from compiled code never need the VM's own functions.
            return Ok(None);
        }
        let op = match name {
            "vm_initialization" => VmFn::Init,
            "save_function" => VmFn::SaveFunction,
            "invoke_closure" => VmFn::InvokeClosure,
            "invoke_stateful" => VmFn::InvokeStateful,
            "set_instrument" => VmFn::SetInstrument,
            "get_output_arity" => VmFn::OutputArity,
            "get_output" => VmFn::Output,
            "set_input" => VmFn::SetInput(false),
            "set_input_with_param_module" => VmFn::SetInput(true),
            "get_function_arity" => VmFn::FunctionArity,
            "get_function_param_name" => VmFn::ParamName,
            #[cfg(feature = "profiling")]
            "profile" if self.profiler => VmFn::Profile,
            _ => {
                let core = &self.core;
                let saved = core
                    .saved
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(name)
                    .cloned();
                if let Some(clo) = saved {
                    VmFn::Saved(clo)
                } else {
                    match core.exec.func_index(name) {
                        Some(idx) if core.exec.funcs[idx].kind == FuncKind::VmFunc => {
                            VmFn::Call(idx)
                        }
                        _ => return Ok(None),
                    }
                }
            }
        };
        let core = self.core.clone();
        // One closure type for all the VM's functions: what each does is `op`.
        Ok(Some(Function::from_rust(move |a, rv| {
            if let Some(v) = vm_fn(&core, &op, a)? {
                *rv = v;
            }
            Ok(())
        })))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(all(test, feature = "profiling"))]
mod tests {
    use super::*;
    use crate::packed_func::json::object;

    /// The profile report as first written (one `json::object` per level), the reference for
    /// [`report_json`].
    fn old_report_json(
        calls: &[super::super::interp::CallRecord],
        total_us: f64,
        devices: &[DLDevice],
    ) -> String {
        let string = |s: String| object(vec![("string", s.into())]);
        let mut out_calls = Vec::new();
        for c in calls {
            let shapes: Vec<String> = c
                .shapes
                .iter()
                .map(|(t, s)| {
                    let d: Vec<String> = s.iter().map(i64::to_string).collect();
                    format!("{t}[{}]", d.join(", "))
                })
                .collect();
            let pct = if total_us > 0.0 {
                c.micros / total_us * 100.0
            } else {
                0.0
            };
            out_calls.push(object(vec![
                (
                    "Duration (us)",
                    object(vec![("microseconds", c.micros.into())]),
                ),
                ("Count", object(vec![("count", 1u64.into())])),
                ("Name", string(c.name.clone())),
                ("Device", string(device_string(c.device))),
                ("Argument Shapes", string(shapes.join(", "))),
                ("Percent", object(vec![("percent", pct.into())])),
            ]));
        }
        let mut dm = Map::new();
        for d in devices {
            let name = device_string(*d);
            dm.insert(
                name.clone(),
                object(vec![
                    (
                        "Duration (us)",
                        object(vec![("microseconds", total_us.into())]),
                    ),
                    ("Count", object(vec![("count", 1u64.into())])),
                    ("Name", string("Total".into())),
                    ("Device", string(name)),
                ]),
            );
        }
        object(vec![
            ("calls", Value::Array(out_calls)),
            ("device_metrics", Value::Object(dm)),
            (
                "configuration",
                object(vec![
                    (
                        "Number of threads",
                        object(vec![("count", crate::threading::num_threads().into())]),
                    ),
                    ("Executor", string("VM".into())),
                ]),
            ),
        ])
        .to_string()
    }

    #[test]
    fn the_profile_report_is_the_one_first_written() {
        use super::super::interp::CallRecord;
        let cpu = DLDevice::new(1, 0);
        let call = |name: &str, micros: f64, shapes: Vec<(String, Vec<i64>)>| CallRecord {
            name: name.into(),
            device: cpu,
            micros,
            shapes,
        };
        let calls = vec![
            call(
                "fused_add",
                12.5,
                vec![("float32".into(), vec![1, 3]), ("int64".into(), vec![])],
            ),
            call("vm.builtin.alloc_storage", 0.25, vec![]),
            call("\"quoted\"\n", 1e-7, vec![("float16".into(), vec![7])]),
        ];
        for (total, devices) in [
            (20.0, vec![cpu]),
            (0.0, vec![]),
            (f64::NAN, vec![cpu, DLDevice::new(2, 1), cpu]),
        ] {
            assert_eq!(
                report_json(&calls, total, &devices),
                old_report_json(&calls, total, &devices)
            );
        }
        assert_eq!(report_json(&[], 1.0, &[]), old_report_json(&[], 1.0, &[]));
    }
}
