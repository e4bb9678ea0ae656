//! The PackedFunc surface of executor modules (`module["set_input"]`, ...) and the argument
//! conversions shared by the executors' global functions.

use super::graph_executor::{executor_of, Executor, TensorArg};
use super::time_eval::pack_run_individual;
use super::time_eval::TimeEvalConfig;
use crate::module::Module;
use crate::object::containers::{ArrayObj, MapObj, ShapeTupleObj, StringObj};
use crate::object::ObjectRef;
use crate::packed_func::dtype::dtype_to_string;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::types::DLDevice;
use crate::packed_func::value::{ArgValue, Args, RetValue};
use std::sync::Arc;

/// A key naming an input or output: a name or an index.
pub(crate) enum Key<'a> {
    /// By name.
    Name(&'a str),
    /// By index.
    Index(i64),
}

/// Reads argument `i` as a name or an index.
pub(crate) fn key_arg<'a>(a: &Args<'a>, i: usize, what: &str) -> Result<Key<'a>> {
    match a.get(i)? {
        ArgValue::Int(v) => Ok(Key::Index(v)),
        ArgValue::Bool(b) => Ok(Key::Index(b as i64)),
        ArgValue::Str(_) => Ok(Key::Name(a.str(i)?)),
        ArgValue::Object(o) if o.downcast_ref::<StringObj>().is_some() => Ok(Key::Name(a.str(i)?)),
        v => Err(Error::type_error_fmt(format_args!(
            "{what}: argument {i} must be a name or an index, got {}",
            v.kind_name()
        ))),
    }
}

/// Reads argument `i` as bytes (bytes, a string, or a String object).
pub(crate) fn bytes_arg<'a>(a: &Args<'a>, i: usize, what: &str) -> Result<&'a [u8]> {
    match a.get(i)? {
        ArgValue::Bytes(b) => Ok(b),
        ArgValue::Str(s) => Ok(s.to_bytes()),
        ArgValue::Object(o) => match o.downcast_ref::<StringObj>() {
            Some(s) => Ok(s.as_bytes()),
            None => Err(Error::type_error_fmt(format_args!(
                "{what}: argument {i} must be bytes, got {}",
                ArgValue::Object(o).kind_name()
            ))),
        },
        v => Err(Error::type_error_fmt(format_args!(
            "{what}: argument {i} must be bytes, got {}",
            v.kind_name()
        ))),
    }
}

fn index(v: i64, what: &str) -> Result<usize> {
    if v < 0 {
        return Err(Error::index_fmt(format_args!(
            "{what}: index {v} is negative"
        )));
    }
    Ok(v as usize)
}

/// Reads argument `k` as an input (or, with `output`, an output) name or index.
#[inline(never)]
fn slot_of(e: &Executor, a: &Args<'_>, k: usize, what: &str, output: bool) -> Result<usize> {
    let r = match key_arg(a, k, what)? {
        Key::Index(i) => return index(i, what),
        Key::Name(n) if output => e.output_index_or_err(n),
        Key::Name(n) => e.input_index_or_err(n),
    };
    r.map_err(|err| crate::executor::ctx(err, format_args!("{what}")))
}

/// Reads arguments `k` and `k + 1` as an input (or output) and a tensor.
#[inline(never)]
fn slot_tensor(
    e: &Executor,
    a: &Args<'_>,
    k: usize,
    what: &str,
    output: bool,
) -> Result<(usize, TensorArg)> {
    let i = slot_of(e, a, k, what, output)?;
    Ok((i, TensorArg::from_arg(a.get(k + 1)?, what)?))
}

/// The `(key, tensor)` functions: `set_input`, `set_input_zero_copy`, `set_output_zero_copy`.
fn two_args(e: &Executor, a: &Args<'_>, what: &str, output: bool) -> Result<(usize, TensorArg)> {
    a.expect_len(2, what)?;
    slot_tensor(e, a, 0, what, output)
}

/// An empty map (out of line: one copy of its hasher's set-up for the room).
#[inline(never)]
pub(crate) fn new_map() -> MapObj {
    MapObj::default()
}

/// `{"shape": {name: ShapeTuple}, "dtype": {name: String}}` of the inputs that are not
/// parameters (with `input`) or of the outputs, as the reference returns.
fn info_map(e: &Executor, input: bool) -> Result<ObjectRef> {
    let mut shapes = new_map();
    let mut dtypes = new_map();
    e.each_info(input, &mut |name, shape, dtype| {
        shapes.insert(
            StringObj::new_ref(name),
            Some(ShapeTupleObj::new_ref(shape)),
        );
        dtypes.insert(
            StringObj::new_ref(name),
            Some(StringObj::new_ref(&dtype_to_string(dtype))),
        );
    })?;
    let mut m = new_map();
    m.insert(StringObj::new_ref("shape"), Some(ObjectRef::new(shapes)));
    m.insert(StringObj::new_ref("dtype"), Some(ObjectRef::new(dtypes)));
    Ok(ObjectRef::new(m))
}

fn ints(a: &Args<'_>, from: usize, n: usize, what: &str) -> Result<Vec<i64>> {
    if a.len() < from + n {
        return Err(Error::value_fmt(format_args!(
            "{what} expects {} arguments but {} were given",
            from + n,
            a.len()
        )));
    }
    let mut v = Vec::with_capacity(n);
    for i in from..from + n {
        v.push(a.i64(i)?);
    }
    Ok(v)
}

/// The debug executor's measuring settings, checked as the reference checks them.
fn debug_cfg(v: &[i64], what: &str) -> Result<TimeEvalConfig> {
    let cfg = TimeEvalConfig::from_values(v, 0);
    if cfg.repeat <= 0 || cfg.repeats_to_cooldown <= 0 {
        return Err(Error::value_fmt(format_args!(
            "{what}: repeat and repeats_to_cooldown must be positive"
        )));
    }
    cfg.validate()
        .map_err(|e| crate::executor::ctx(e, format_args!("{what}")))?;
    Ok(cfg)
}

type Body = fn(&Executor, Args<'_>, &mut RetValue) -> Result<()>;

fn body(name: &str, debug: bool) -> Option<Body> {
    let f: Body = match name {
        "set_input" => |e, a, _rv| {
            let (i, t) = two_args(e, &a, "set_input", false)?;
            e.set_input(i, tensor_dl(&t))
        },
        "set_input_zero_copy" => |e, a, _rv| {
            let (i, t) = two_args(e, &a, "set_input_zero_copy", false)?;
            e.set_input_zero_copy(i, &t)
        },
        "set_output_zero_copy" => |e, a, _rv| {
            let (i, t) = two_args(e, &a, "set_output_zero_copy", true)?;
            e.set_output_zero_copy(i, &t)
        },
        "get_output" => |e, a, rv| {
            if a.is_empty() || a.len() > 2 {
                return Err(Error::value("get_output expects (index[, out])"));
            }
            let i = slot_of(e, &a, 0, "get_output", true)?;
            if a.len() == 2 && !matches!(a.get(1)?, ArgValue::Null) {
                let t = TensorArg::from_arg(a.get(1)?, "get_output")?;
                return e.copy_output_to(i, tensor_dl(&t));
            }
            *rv = e.get_output(i)?.into_object().into();
            Ok(())
        },
        "get_input" => |e, a, rv| {
            a.expect_len(1, "get_input")?;
            let i = match key_arg(&a, 0, "get_input")? {
                // An unknown name gives None (Python's GraphModule relies on it).
                Key::Name(n) => match e.input_index(n) {
                    Some(i) => i,
                    None => {
                        *rv = RetValue::Null;
                        return Ok(());
                    }
                },
                Key::Index(i) => index(i, "get_input")?,
            };
            *rv = e.get_input(i)?.into_object().into();
            Ok(())
        },
        "get_num_outputs" => |e, _a, rv| {
            *rv = RetValue::Int(e.num_outputs() as i64);
            Ok(())
        },
        "get_num_inputs" => |e, _a, rv| {
            *rv = RetValue::Int(e.num_inputs() as i64);
            Ok(())
        },
        "run" => |e, _a, _rv| e.run(),
        "run_from_inputs" => |e, a, rv| {
            if a.len() < 2 || a.len() % 2 != 0 {
                return Err(Error::value(
                    "run_from_inputs expects (device_type, device_id, [input, value]...)",
                ));
            }
            let host = DLDevice::new(a.i64(0)? as i32, a.i64(1)? as i32);
            for k in (2..a.len()).step_by(2) {
                let (i, t) = slot_tensor(e, &a, k, "run_from_inputs", false)?;
                e.set_input(i, tensor_dl(&t))?;
            }
            e.run()?;
            let mut outs = Vec::with_capacity(e.num_outputs());
            for i in 0..e.num_outputs() {
                let o = e.get_output(i)?;
                let mut c = crate::ndarray::NDArray::empty(o.shape(), o.dtype(), host)?;
                o.copy_to(&mut c)?;
                outs.push(Some(c.into_object()));
            }
            *rv = ArrayObj::new_ref(outs).into();
            Ok(())
        },
        "load_params" => |e, a, _rv| {
            a.expect_len(1, "load_params")?;
            e.load_params(bytes_arg(&a, 0, "load_params")?)
        },
        "share_params" => |e, a, _rv| {
            a.expect_len(2, "share_params")?;
            let other = match a.get(0)? {
                ArgValue::Object(o) => Module::from_object(o.to_ref())?,
                v => {
                    return Err(Error::type_error_fmt(format_args!(
                        "share_params: argument 0 must be a GraphExecutor module, got {}",
                        v.kind_name()
                    )))
                }
            };
            let other = executor_of(&other).ok_or_else(|| {
                Error::type_error_fmt(format_args!(
                    "share_params: argument 0 must be a GraphExecutor module of this runtime, \
                     got a module of type {}",
                    other.type_key()
                ))
            })?;
            e.share_params(&other, bytes_arg(&a, 1, "share_params")?)
        },
        "get_input_index" => |e, a, rv| {
            a.expect_len(1, "get_input_index")?;
            let name = a
                .str(0)
                .map_err(|_| Error::type_error("get_input_index: the input key is not a string"))?;
            *rv = RetValue::Int(e.input_index(name).map_or(-1, |i| i as i64));
            Ok(())
        },
        "get_output_index" => |e, a, rv| {
            a.expect_len(1, "get_output_index")?;
            let name = a.str(0).map_err(|_| {
                Error::type_error("get_output_index: the output key is not a string")
            })?;
            *rv = RetValue::Int(e.output_index(name).map_or(-1, |i| i as i64));
            Ok(())
        },
        "get_input_info" => |e, _a, rv| {
            *rv = info_map(e, true)?.into();
            Ok(())
        },
        "get_output_info" => |e, _a, rv| {
            *rv = info_map(e, false)?.into();
            Ok(())
        },
        _ if !debug => return None,
        "run_individual" => |e, a, rv| {
            let v = ints(&a, 0, 6, "run_individual")?;
            let cfg = debug_cfg(&v, "run_individual")?;
            *rv = RetValue::Bytes(pack_run_individual(&e.run_individual(&cfg)?));
            Ok(())
        },
        "run_individual_node" => |e, a, rv| {
            let v = ints(&a, 0, 7, "run_individual_node")?;
            let (&nid, rest) = v.split_first().unwrap_or((&-1, &[]));
            let cfg = debug_cfg(rest, "run_individual_node")?;
            let t = e.run_individual_node(nid, &cfg)?;
            *rv = RetValue::Bytes(super::time_eval::pack_f64(&t));
            Ok(())
        },
        "debug_get_output" => |e, a, rv| {
            if a.is_empty() || a.len() > 2 {
                return Err(Error::value("debug_get_output expects (node[, out])"));
            }
            let nid = match key_arg(&a, 0, "debug_get_output")? {
                Key::Name(n) => e.node_index(n)? as i64,
                Key::Index(i) => i,
            };
            let out = if a.len() == 2 && !matches!(a.get(1)?, ArgValue::Null) {
                Some(TensorArg::from_arg(a.get(1)?, "debug_get_output")?)
            } else {
                None
            };
            let arr = e.debug_get_output(nid, out.as_ref().map(tensor_dl))?;
            if out.is_none() {
                *rv = arr.into_object().into();
            }
            Ok(())
        },
        "execute_node" => |e, a, _rv| {
            a.expect_len(1, "execute_node")?;
            e.execute_node(a.i64(0)?)
        },
        "get_node_output" => |e, a, rv| {
            a.expect_len(2, "get_node_output")?;
            *rv = e
                .get_node_output(a.i64(0)?, a.i64(1)?)?
                .into_object()
                .into();
            Ok(())
        },
        #[cfg(not(feature = "profiling"))]
        "profile" => |_e, _a, _rv| {
            Err(crate::packed_func::features::unavailable(
                "profile",
                "profiling",
            ))
        },
        #[cfg(not(feature = "profiling"))]
        "profile_rpc" => |_e, _a, _rv| {
            Err(crate::packed_func::features::unavailable(
                "profile_rpc",
                "profiling",
            ))
        },
        #[cfg(feature = "profiling")]
        "profile" => |e, a, rv| {
            if a.len() > 1 {
                return Err(Error::value("profile expects ([collectors])"));
            }
            if !a.is_empty() {
                match a.get(0)? {
                    ArgValue::Null => {}
                    ArgValue::Object(o)
                        if o.downcast_ref::<ArrayObj>()
                            .is_some_and(|x| x.items.is_empty()) => {}
                    _ => {
                        return Err(Error::value(
                            "profile: metric collectors are not supported by this runtime",
                        ))
                    }
                }
            }
            *rv = RetValue::Str(e.profile(0)?.table());
            Ok(())
        },
        #[cfg(feature = "profiling")]
        "profile_rpc" => |e, _a, rv| {
            *rv = RetValue::Str(e.profile(0)?.to_json());
            Ok(())
        },
        _ => return None,
    };
    Some(f)
}

fn tensor_dl(t: &TensorArg) -> &crate::packed_func::types::DLTensor {
    t.dl()
}

/// The function `name` of an executor module (`None` when it has no such function).
pub(crate) fn executor_function(exec: &Arc<Executor>, debug: bool, name: &str) -> Option<Function> {
    let b = body(name, debug)?;
    let exec = exec.clone();
    Some(Function::from_rust(move |a, rv| b(&exec, a, rv)))
}

/// Devices from `tvm.graph_executor.create`-style arguments starting at `from`: pairs of
/// `(device_type, device_id)` integers, or `Device` values.
pub(crate) fn devices_from(a: &Args<'_>, from: usize, what: &str) -> Result<Vec<DLDevice>> {
    let mut devs = Vec::new();
    let mut i = from;
    while i < a.len() {
        match a.get(i)? {
            ArgValue::Device(d) => {
                devs.push(d);
                i += 1;
            }
            _ => {
                if i + 1 >= a.len() {
                    return Err(Error::value_fmt(format_args!(
                        "{what}: devices must be given as (device_type, device_id) pairs; \
                         argument {i} has no device id after it"
                    )));
                }
                devs.push(DLDevice::new(a.i64(i)? as i32, a.i64(i + 1)? as i32));
                i += 2;
            }
        }
    }
    if devs.is_empty() {
        return Err(Error::value_fmt(format_args!("{what}: no device given")));
    }
    Ok(devs)
}

/// `tvm.graph_executor.create(graph_json, lib, [lookup_linked_param], device_type, device_id,
/// ...)` and its debug twin.
pub(crate) fn create(a: Args<'_>, debug: bool) -> Result<Module> {
    let what = if debug {
        "tvm.graph_executor_debug.create"
    } else {
        "tvm.graph_executor.create"
    };
    if a.len() < 3 {
        return Err(Error::value_fmt(format_args!(
            "{what} expects (graph_json, module, device_type, device_id, ...) but got {} \
             arguments",
            a.len()
        )));
    }
    let json = a.str(0)?;
    let lib = match a.get(1)? {
        ArgValue::Object(o) => Module::from_object(o.to_ref())
            .map_err(|e| crate::executor::ctx(e, format_args!("{what}")))?,
        v => {
            return Err(Error::type_error_fmt(format_args!(
                "{what}: argument 1 must be a Module, got {}",
                v.kind_name()
            )))
        }
    };
    let mut start = 2;
    let mut lookup = super::graph_executor::LinkedParamLookup::Default;
    if let ArgValue::Object(o) = a.get(2)? {
        if let Ok(f) = Function::from_object(o.to_ref()) {
            lookup = super::graph_executor::LinkedParamLookup::Custom(f);
            start = 3;
        }
    }
    let devs = devices_from(&a, start, what)?;
    let exec = Executor::new(json, lib, &devs, lookup)?;
    Ok(super::graph_executor::make_module(exec, debug))
}
