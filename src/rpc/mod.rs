//! TVM's RPC protocol (version "0.8.0"), both sides: serve this runtime to remote clients
//! (`rpc.ServerLoop`, the server environment, the standalone server with tracker
//! registration) and drive remote servers (`rpc.Connect`, remote devices, functions, modules
//! and objects). One endpoint implementation serves both directions.
//!
//! Files by concern: [`codec`] (wire format), [`endpoint`] (packets, serving, waiting),
//! [`local`] (the serving session and its handle table), [`server`] (server loop, event
//! server, server environment), [`client`] (sessions, the `rpc` module, remote values),
//! [`device`] (remote devices), [`standalone`] (the standalone server), [`tracker`] (the
//! tracker client).

pub mod archive;
pub mod client;
pub mod codec;
pub mod device;
pub mod endpoint;
pub mod local;
pub mod server;
pub mod standalone;
pub mod tracker;

use crate::module::Module;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry::{self, Registrar};
use crate::packed_func::types::RPC_SESS_MASK;
use crate::packed_func::value::{ArgValue, Args, RetValue};
use client::{rpc_node, session_module};
use codec::WireValue;

fn module_arg(a: &Args<'_>, i: usize, what: &str) -> Result<Module> {
    let o = a.object(i)?.ok_or_else(|| {
        Error::value_fmt(format_args!("{what}: argument {i} is None, not a module"))
    })?;
    Module::from_object(o.to_ref()).map_err(|e| e.context(what))
}

fn rpc_module_arg(a: &Args<'_>, i: usize, what: &str) -> Result<Module> {
    let m = module_arg(a, i, what)?;
    if rpc_node(&m).is_none() {
        return Err(Error::type_error_fmt(format_args!(
            "{what}: argument {i} is a {} module, not an rpc one",
            m.type_key()
        )));
    }
    Ok(m)
}

/// Registers the RPC globals.
pub(crate) fn register(r: &mut Registrar) {
    server::register(r);
    r.add("rpc.Connect", |a, rv| {
        if a.len() < 3 {
            return Err(Error::value(
                "rpc.Connect expects (url, port, key[, enable_logging, ctor args...])",
            ));
        }
        let host = a.str(0)?;
        let port = a.i64(1)?;
        let key = a.str(2)?;
        let mut ctor = Vec::new();
        for i in 4..a.len() {
            ctor.push(match a.get(i)? {
                ArgValue::Object(o) => {
                    match o.downcast_ref::<crate::object::containers::StringObj>() {
                        Some(s) => WireValue::Str(s.as_bytes().to_vec()),
                        None => {
                            return Err(Error::type_error_fmt(format_args!(
                                "rpc.Connect: constructor argument {} cannot travel",
                                i - 4
                            )))
                        }
                    }
                }
                ArgValue::Str(s) => WireValue::Str(s.to_bytes().to_vec()),
                ArgValue::Int(v) => WireValue::Int(v),
                ArgValue::Bool(b) => WireValue::Bool(b),
                ArgValue::Float(f) => WireValue::Float(f),
                ArgValue::Null => WireValue::Null,
                v => {
                    return Err(Error::type_error_fmt(format_args!(
                        "rpc.Connect: constructor argument of kind {} cannot travel",
                        v.kind_name()
                    )))
                }
            });
        }
        let s = client::connect(host, port, key, &ctor)?;
        *rv = RetValue::Object(session_module(&s, None).into_object());
        Ok(())
    });
    r.add("rpc.LocalSession", |_a, rv| {
        let s = client::local_session()?;
        *rv = RetValue::Object(session_module(&s, None).into_object());
        Ok(())
    });
    r.add("rpc.SessTableIndex", |a, rv| {
        let m = rpc_module_arg(&a, 0, "rpc.SessTableIndex")?;
        *rv = RetValue::Int(rpc_node(&m).expect("checked").session().index() as i64);
        Ok(())
    });
    r.add("rpc.LoadRemoteModule", |a, rv| {
        // (session, path[, options, cc]): the extra arguments of newer clients are not sent.
        if !(2..=4).contains(&a.len()) {
            return Err(Error::value_fmt(format_args!(
                "rpc.LoadRemoteModule expects (session, path[, options, cc]), got {} arguments",
                a.len()
            )));
        }
        let m = rpc_module_arg(&a, 0, "rpc.LoadRemoteModule")?;
        let path = a.str(1)?;
        let s = rpc_node(&m).expect("checked").session().clone();
        *rv = s.call_helper(
            "tvm.rpc.server.load_module",
            &[WireValue::Str(path.as_bytes().to_vec())],
        )?;
        Ok(())
    });
    r.add("rpc.ImportRemoteModule", |a, _rv| {
        a.expect_len(2, "rpc.ImportRemoteModule")?;
        let p = rpc_module_arg(&a, 0, "rpc.ImportRemoteModule")?;
        let c = rpc_module_arg(&a, 1, "rpc.ImportRemoteModule")?;
        let (pn, cn) = (
            rpc_node(&p).expect("checked"),
            rpc_node(&c).expect("checked"),
        );
        if !std::sync::Arc::ptr_eq(pn.session(), cn.session()) {
            return Err(Error::value(
                "rpc.ImportRemoteModule: the modules belong to different sessions",
            ));
        }
        let (Some(ph), Some(ch)) = (pn.remote_handle(), cn.remote_handle()) else {
            return Err(Error::value(
                "rpc.ImportRemoteModule: a session module cannot be imported",
            ));
        };
        pn.session().call_helper(
            "tvm.rpc.server.ImportModule",
            &[WireValue::Module(ph), WireValue::Module(ch)],
        )?;
        Ok(())
    });
    r.add("tvm.rpc.NDArrayFromRemoteOpaqueHandle", |a, rv| {
        a.expect_len(5, "tvm.rpc.NDArrayFromRemoteOpaqueHandle")?;
        let m = rpc_module_arg(&a, 0, "tvm.rpc.NDArrayFromRemoteOpaqueHandle")?;
        let s = rpc_node(&m).expect("checked").session().clone();
        let data = a.handle(1)? as u64;
        let t = match a.get(2)? {
            // SAFETY: a DLTensor argument is valid for the call.
            ArgValue::DLTensor(t) => unsafe { *t.as_ptr() },
            ArgValue::Object(o) => *o
                .downcast_ref::<crate::ndarray::NDArrayObj>()
                .ok_or_else(|| Error::type_error("template must be a tensor"))?
                .dltensor(),
            v => {
                return Err(Error::type_error_fmt(format_args!(
                    "tvm.rpc.NDArrayFromRemoteOpaqueHandle: template must be a tensor, got {}",
                    v.kind_name()
                )))
            }
        };
        let dev = client::strip_mask(a.device(3)?);
        let h = a.handle(4)? as u64;
        // SAFETY: the template tensor is valid for the call.
        let shape = unsafe { crate::ndarray::shape_of(&t) }.to_vec();
        let w = codec::WireTensor {
            data,
            device: dev,
            dtype: t.dtype,
            shape,
            byte_offset: 0,
        };
        *rv = RetValue::Object(client::remote_ndarray(&s, w, h)?);
        Ok(())
    });
    r.add("device_api.rpc", |_a, rv| {
        // Remote devices are served by the device layer directly (device types of 128 and
        // above); there is no C++ DeviceAPI object to hand out.
        *rv = RetValue::Null;
        Ok(())
    });
    let local_eval = registry::get("runtime.RPCTimeEvaluator");
    r.add("runtime.RPCTimeEvaluator", move |a, rv| {
        let remote = match a.object(0) {
            Ok(Some(o)) => Module::from_object(o.to_ref())
                .ok()
                .filter(|m| rpc_node(m).is_some()),
            _ => None,
        };
        let Some(m) = remote else {
            let f = local_eval
                .as_ref()
                .ok_or_else(|| Error::tvm("runtime.RPCTimeEvaluator: no local time evaluator"))?;
            return call_with_args(f, a, rv);
        };
        let node = rpc_node(&m).expect("checked");
        let s = node.session().clone();
        let dev_type = a.i64(2)? as i32;
        if dev_type / RPC_SESS_MASK - 1 != s.index() as i32 {
            return Err(Error::value(
                "runtime.RPCTimeEvaluator: the device belongs to a different session",
            ));
        }
        let mut args = vec![
            match node.remote_handle() {
                Some(h) => WireValue::Module(h),
                None => WireValue::Null,
            },
            WireValue::Str(a.str(1)?.as_bytes().to_vec()),
            WireValue::Int((dev_type % RPC_SESS_MASK) as i64),
        ];
        for i in 3..a.len() {
            args.push(client::encode_arg(&s, a.get(i)?)?);
        }
        *rv = s.call_helper("runtime.RPCTimeEvaluator", &args)?;
        Ok(())
    });
}

fn call_with_args(f: &Function, a: Args<'_>, rv: &mut RetValue) -> Result<()> {
    let vals: Vec<ArgValue<'_>> = (0..a.len()).map(|i| a.get(i)).collect::<Result<_>>()?;
    *rv = f.call(&vals)?;
    Ok(())
}
