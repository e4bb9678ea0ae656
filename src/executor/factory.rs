//! The graph executor factory (type key `GraphExecutorFactory`): what `relay.build` packs into
//! an exported library. It holds the graph JSON, the parameters and the name of the model, and
//! creates executors over the library it imports.
//!
//! Serialised payload (in the library's `__tvm_dev_mblob`): the graph JSON (string), a `u64`
//! count, the parameter names (vector of strings), that many arrays (`NDArray::Save` format),
//! then the module name (string).

use super::ctx;
use super::graph_executor::{make_module, Executor, LinkedParamLookup};
use super::params::{self, ByteSource};
use crate::module::blob::with_lent_reader;
use crate::module::{Module, ModuleNode};
use crate::ndarray::NDArray;
use crate::object::containers::{MapObj, StringObj};
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::types::DLDevice;
use crate::packed_func::value::{ArgValue, Args, RetValue};
use std::sync::Arc;

/// What a factory holds.
struct FactoryData {
    graph_json: String,
    params: Vec<(String, NDArray)>,
    module_name: String,
    /// Whether executors may use the parameter arrays in place: true for parameters read
    /// from a library (nobody else holds them), false for arrays a caller passed in, which
    /// the caller may still change (those are copied, as the reference does).
    share_params: bool,
}

/// The factory module node.
pub struct FactoryNode {
    d: Arc<FactoryData>,
}

impl FactoryNode {
    /// A factory for a graph, its parameters and the model name (usually `default`).
    pub fn new(graph_json: String, params: Vec<(String, NDArray)>, module_name: String) -> Self {
        FactoryNode {
            d: Arc::new(FactoryData {
                graph_json,
                params,
                module_name,
                share_params: false,
            }),
        }
    }

    /// The graph JSON.
    pub fn graph_json(&self) -> &str {
        &self.d.graph_json
    }

    /// The parameters, in stored order.
    pub fn params(&self) -> &[(String, NDArray)] {
        &self.d.params
    }

    /// The model name (the function that creates an executor).
    pub fn module_name(&self) -> &str {
        &self.d.module_name
    }

    /// Reads a factory from its serialised payload.
    pub fn load(r: &mut dyn ByteSource) -> Result<FactoryNode> {
        let graph_json = params::read_string(r, "the graph JSON")?;
        let count = params::read_u64(r, "the number of parameters")?;
        let mut names = params::read_strings(r, "the parameter names")?;
        if count != names.len() as u64 {
            return Err(Error::value_fmt(format_args!(
                "GraphExecutorFactory: {count} parameters announced but {} names stored",
                names.len()
            )));
        }
        // Headers first, so that the arrays can share one allocation (`params::read_arrays`);
        // a source that cannot seek back gives each array its own.
        let mut pending = Vec::with_capacity(names.len());
        let mut p = Vec::with_capacity(names.len());
        for name in &names {
            let context =
                |e: Error| ctx(e, format_args!("GraphExecutorFactory: parameter '{name}'"));
            match params::skip_ndarray(r).map_err(context)? {
                Some(a) => pending.push(a),
                None => p.push((name.clone(), params::load_ndarray(r).map_err(context)?)),
            }
        }
        if !pending.is_empty() {
            let arrays = params::read_arrays(r, &pending)
                .map_err(|e| ctx(e, format_args!("GraphExecutorFactory: the parameters")))?;
            p.reserve_exact(arrays.len());
            for (name, a) in names.iter_mut().zip(arrays) {
                p.push((std::mem::take(name), a));
            }
        }
        let module_name = params::read_string(r, "the module name")?;
        let mut node = FactoryNode::new(graph_json, p, module_name);
        if let Some(d) = Arc::get_mut(&mut node.d) {
            d.share_params = true;
        }
        Ok(node)
    }

    /// Writes the serialised payload (the inverse of [`FactoryNode::load`]).
    pub fn save_to_binary(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let d = &self.d;
        params::write_string(&mut out, &d.graph_json);
        params::put_bytes(&mut out, &(d.params.len() as u64).to_le_bytes());
        // The names as `write_strings` writes them (a count, then each), without collecting
        // them first.
        params::put_bytes(&mut out, &(d.params.len() as u64).to_le_bytes());
        for (n, _) in &d.params {
            params::write_string(&mut out, n);
        }
        for (_, a) in &d.params {
            params::save_ndarray(&mut out, a)?;
        }
        params::write_string(&mut out, &d.module_name);
        Ok(out)
    }

    /// Creates an executor on `devices` over `lib`, with the parameters set.
    pub fn create_executor(
        &self,
        lib: Module,
        devices: &[DLDevice],
        debug: bool,
    ) -> Result<Module> {
        create_executor(&self.d, lib, devices, debug)
    }
}

fn create_executor(
    d: &FactoryData,
    lib: Module,
    devices: &[DLDevice],
    debug: bool,
) -> Result<Module> {
    if devices.is_empty() {
        return Err(Error::value_fmt(format_args!(
            "{}: at least one device is needed",
            d.module_name
        )));
    }
    let exec = Executor::new(&d.graph_json, lib, devices, LinkedParamLookup::Default)?;
    if d.share_params {
        exec.use_factory_params(&d.params)?;
    } else {
        exec.set_params(&d.params, false)?;
    }
    Ok(make_module(exec, debug))
}

/// The parameters as a Map object (String → NDArray).
pub fn params_to_map(p: &[(String, NDArray)]) -> ObjectRef {
    let mut m = super::functions::new_map();
    for (k, v) in p {
        m.insert(StringObj::new_ref(k), Some(v.as_object().clone()));
    }
    ObjectRef::new(m)
}

/// Reads a Map object (String → NDArray) into a list, in map order.
pub fn params_from_map(o: ObjectRef) -> Result<Vec<(String, NDArray)>> {
    let m = o.downcast_ref::<MapObj>().ok_or_else(|| {
        Error::type_error_fmt(format_args!(
            "expected a Map of names to NDArrays but got {}",
            o.type_key()
        ))
    })?;
    let mut out = Vec::with_capacity(m.len());
    for (k, v) in m.iter() {
        let name = k
            .downcast_ref::<StringObj>()
            .ok_or_else(|| Error::type_error("parameter names must be strings"))?
            .as_str()
            .to_string();
        let arr = v
            .clone()
            .ok_or_else(|| Error::value_fmt(format_args!("parameter '{name}' is NULL")))
            .and_then(NDArray::from_object)
            .map_err(|e| ctx(e, format_args!("parameter '{name}'")))?;
        out.push((name, arr));
    }
    Ok(out)
}

fn devices_from(args: &Args<'_>, from: usize) -> Result<Vec<DLDevice>> {
    let mut devs = Vec::with_capacity(args.len().saturating_sub(from));
    for i in from..args.len() {
        devs.push(args.device(i)?);
    }
    Ok(devs)
}

/// What one of a factory's functions does, given the factory and its module object.
type FactoryBody = fn(&FactoryData, Option<&ObjectRef>, Args<'_>, &mut RetValue) -> Result<()>;

/// The library a factory's module object imports (its first import).
fn imported_lib(this: Option<&ObjectRef>) -> Result<Module> {
    let this = this.ok_or_else(|| Error::internal("GraphExecutorFactory: no module object"))?;
    first_import(this)
}

fn first_import(this: &ObjectRef) -> Result<Module> {
    Module::from_object(this.clone())?
        .imports()
        .into_iter()
        .next()
        .ok_or_else(|| Error::value("GraphExecutorFactory: no library module is imported"))
}

impl ModuleNode for FactoryNode {
    fn save_to_binary(&self) -> Result<Vec<u8>> {
        FactoryNode::save_to_binary(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn type_key(&self) -> &str {
        "GraphExecutorFactory"
    }

    fn get_function(&self, name: &str, this: Option<&ObjectRef>) -> Result<Option<Function>> {
        // One closure type for all the functions (a plain function per name), so that there
        // is one copy of the wrapping code.
        let body: FactoryBody = if name == self.d.module_name {
            |d, this, a, rv| {
                let lib = imported_lib(this)?;
                let devs = devices_from(&a, 0)?;
                *rv = create_executor(d, lib, &devs, false)?.into_object().into();
                Ok(())
            }
        } else {
            match name {
                "get_graph_json" => |d, _this, _a, rv| {
                    *rv = RetValue::Str(d.graph_json.clone());
                    Ok(())
                },
                "get_graph_params" => |d, _this, _a, rv| {
                    *rv = params_to_map(&d.params).into();
                    Ok(())
                },
                "debug_create" => |d, this, a, rv| {
                    if a.is_empty() {
                        return Err(Error::value(
                            "debug_create expects (module_name, device, ...)",
                        ));
                    }
                    let want = a.str(0)?;
                    if want != d.module_name {
                        return Err(Error::value_fmt(format_args!(
                            "debug_create: this factory holds model '{}', not '{want}'",
                            d.module_name
                        )));
                    }
                    let lib = imported_lib(this)?;
                    let devs = devices_from(&a, 1)?;
                    *rv = create_executor(d, lib, &devs, true)?.into_object().into();
                    Ok(())
                },
                "remove_params" => |d, this, _a, rv| {
                    let lib = imported_lib(this)?;
                    let m = Module::new(Box::new(FactoryNode::new(
                        d.graph_json.clone(),
                        Vec::new(),
                        d.module_name.clone(),
                    )));
                    m.import(&lib)?;
                    *rv = m.into_object().into();
                    Ok(())
                },
                "cuda_graph_create" => |_d, _this, _a, _rv| {
                    Err(Error::new(
                        crate::packed_func::ErrorKind::RuntimeError,
                        "cuda_graph_create: the CUDA graph executor is not supported by this \
                         runtime",
                    ))
                },
                _ => return Ok(None),
            }
        };
        // Functions that need the factory's imports need its module object.
        let this = this.cloned();
        let d = self.d.clone();
        Ok(Some(Function::from_rust(move |a, rv| {
            body(&d, this.as_ref(), a, rv)
        })))
    }

    fn property_mask(&self) -> i32 {
        crate::module::property::BINARY_SERIALIZABLE
    }
}

/// `runtime.module.loadbinary_GraphExecutorFactory`: reads a factory from a blob reader.
pub fn load_binary(args: Args<'_>) -> Result<Module> {
    let node = with_lent_reader(
        args.handle(0)?,
        "runtime.module.loadbinary_GraphExecutorFactory",
        |r| FactoryNode::load(r).map_err(|e| ctx(e, format_args!("loading GraphExecutorFactory"))),
    )?;
    Ok(Module::new(Box::new(node)))
}

/// `tvm.graph_executor_factory.create(graph_json, module, module_name, [name, array]...)`.
pub fn create(args: Args<'_>) -> Result<Module> {
    const NAME: &str = "tvm.graph_executor_factory.create";
    if args.len() < 3 || (args.len() - 3) % 2 != 0 {
        return Err(Error::value_fmt(format_args!(
            "{NAME} expects (graph_json, module, module_name, [param_name, param_array]...) but \
             got {} arguments",
            args.len()
        )));
    }
    let json = args.str(0)?.to_string();
    let lib = match args.get(1)? {
        ArgValue::Object(o) => {
            Module::from_object(o.to_ref()).map_err(|e| ctx(e, format_args!("{NAME}")))?
        }
        v => {
            return Err(Error::type_error_fmt(format_args!(
                "{NAME}: argument 1 must be a Module, got {}",
                v.kind_name()
            )))
        }
    };
    let module_name = args.str(2)?.to_string();
    let mut p = Vec::new();
    for i in (3..args.len()).step_by(2) {
        let name = args.str(i)?.to_string();
        let arr = match args.get(i + 1)? {
            ArgValue::Object(o) => NDArray::from_object(o.to_ref())
                .map_err(|e| ctx(e, format_args!("{NAME}: parameter '{name}'")))?,
            v => {
                return Err(Error::type_error_fmt(format_args!(
                    "{NAME}: parameter '{name}' must be an NDArray, got {}",
                    v.kind_name()
                )))
            }
        };
        p.push((name, arr));
    }
    let m = Module::new(Box::new(FactoryNode::new(json, p, module_name)));
    m.import(&lib)?;
    Ok(m)
}
