//! Storage planning: one pool array per storage id, sized for its largest entry, on the
//! device its entries name (or a parameter linked into the library), and one view per entry.

use super::super::graph::{Graph, OpType};
use crate::device;
use crate::executor::ctx;
use crate::module::Module;
use crate::ndarray::{NDArray, NDArrayObj};
use crate::packed_func::dtype::dtype_to_string;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::types::{device_name, DLDataType, DLDevice, DLTensor};
use crate::packed_func::value::{ArgValue, RetValue, TensorRef};
use std::fmt::Write;

/// Bytes a pool entry needs for an entry, as the reference counts them (sub-byte types take a
/// byte per element).
fn entry_bytes(shape: &[i64], t: DLDataType) -> Result<u64> {
    let bits = t.bits as u64 * t.lanes as u64;
    if !(bits % 8 == 0 || bits == 1 || bits == 4) {
        return Err(Error::value_fmt(format_args!(
            "data type {} has {bits} bits per element, which cannot be stored",
            dtype_to_string(t)
        )));
    }
    let mut n: u64 = bits.div_ceil(8);
    for &d in shape {
        n = n
            .checked_mul(d as u64)
            .ok_or_else(|| Error::value_fmt(format_args!("shape {shape:?} is too large")))?;
    }
    Ok(n)
}

/// Refuses a graph whose kernels would get device memory they cannot read: a `tvm_op` with
/// an argument on a device whose memory the host cannot address (not cpu, cuda_host or
/// rocm_host), while the library and its imports hold only host code (`library` modules).
/// Such kernels would dereference device handles as host pointers and crash the process.
pub(super) fn check_kernels_can_reach(
    graph: &Graph,
    lib: &Module,
    entries: &[NDArray],
) -> Result<()> {
    use crate::packed_func::types::{DL_CPU, DL_CUDA_HOST, DL_ROCM_HOST};
    fn host_only(m: &Module) -> bool {
        m.type_key() == "library" && m.imports().iter().all(host_only)
    }
    for (nid, node) in graph.nodes.iter().enumerate() {
        if node.op_type != OpType::TvmOp
            || matches!(node.param.func_name.as_str(), "__nop" | "__copy")
        {
            continue;
        }
        let outs = (0..graph.num_outputs_of(nid)).map(|i| graph.entry_id(nid as u32, i));
        for eid in node.inputs.iter().map(|&e| graph.eid(e)).chain(outs) {
            let Some(dev) = entries.get(eid).map(NDArray::device) else {
                continue;
            };
            if matches!(dev.device_type, DL_CPU | DL_CUDA_HOST | DL_ROCM_HOST) {
                continue;
            }
            if host_only(lib) {
                return Err(Error::value_fmt(format_args!(
                    "graph executor: node '{}' ({}) has data on {}, but the library holds \
                     only CPU code (it imports no {} module); compile the model for that \
                     device or run it on the CPU",
                    node.name,
                    node.param.func_name,
                    device::describe(dev),
                    device::type_name(dev.device_type).unwrap_or_else(|| "device".into())
                )));
            }
            return Ok(());
        }
    }
    Ok(())
}

struct PoolEntry<'g> {
    device_type: i32,
    bytes: u64,
    scope: &'g str,
    /// For a texture scope: the image's [height, width, channels] and element type.
    #[cfg_attr(not(feature = "opencl"), allow(dead_code))]
    texture: Option<(i64, i64, i64)>,
    #[cfg_attr(not(feature = "opencl"), allow(dead_code))]
    dtype: DLDataType,
    linked: Option<NDArray>,
    used: bool,
}

/// How parameters that are baked into a library are found (`_lookup_linked_param`).
pub(crate) enum LinkedParamLookup {
    /// Use the library's `_lookup_linked_param` function, when it has one.
    Default,
    /// Call this function with `(module, storage_id, template DLTensor*, device)`.
    Custom(Function),
}

/// The error for a storage id on a device type the executor was not given.
#[cold]
#[inline(never)]
fn missing_device(sid: usize, device_type: i32, devices: &[DLDevice]) -> Error {
    let mut given = String::new();
    for (k, d) in devices.iter().enumerate() {
        if k > 0 {
            crate::packed_func::json::put_str(&mut given, ", ");
        }
        let _ = write!(given, "{}({})", device_name(d.device_type), d.device_id);
    }
    // InternalError, the class of the reference's failure here when the device it falls back
    // to is absent (and of its executor's other set-up checks).
    Error::internal_fmt(format_args!(
        "the graph places storage {sid} on {} (device_index), but the executor was given \
         only {given}: pass a device of every type the graph uses",
        device_name(device_type),
    ))
}

/// Plans the pool (one array per storage id, sized for its largest entry, on the device its
/// entries name) into `storage` and makes one view per entry into `entries` (both empty;
/// filled in place rather than returned and moved).
pub(super) fn setup_storage(
    g: &Graph,
    lib: &Module,
    devices: &[DLDevice],
    lookup: &LinkedParamLookup,
    storage: &mut Vec<Option<NDArray>>,
    entries: &mut Vec<NDArray>,
) -> Result<()> {
    let num_sids = g
        .storage_id
        .iter()
        .map(|&s| s as usize + 1)
        .max()
        .unwrap_or(0);
    let mut pool: Vec<PoolEntry> = (0..num_sids)
        .map(|_| PoolEntry {
            device_type: -1,
            bytes: 0,
            scope: "",
            texture: None,
            dtype: DLDataType::new(crate::packed_func::types::DL_FLOAT, 32, 1),
            linked: None,
            used: false,
        })
        .collect();
    let default_lookup = match lookup {
        LinkedParamLookup::Default => lib.get_function("_lookup_linked_param", true)?,
        LinkedParamLookup::Custom(_) => None,
    };
    // Every entry has a storage id, a shape and a type, and a device type and scope when the
    // graph gives them (the graph checks the lengths).
    let dev0 = devices.first().copied().unwrap_or(DLDevice::CPU);
    let entries_in = g.storage_id.iter().zip(&g.shape).zip(&g.dltype);
    for (i, ((&sid, shape), &dltype)) in entries_in.enumerate() {
        let sid = sid as usize;
        let device_type = match &g.device_index {
            Some(d) => d.get(i).copied().unwrap_or(dev0.device_type),
            None => dev0.device_type,
        };
        let scope = match &g.storage_scope {
            Some(s) => s.get(i).map_or("", |s| s.as_str()),
            None => "",
        };
        let Some(pe) = pool.get_mut(sid) else {
            continue;
        };
        if pe.used && pe.device_type != device_type {
            return Err(Error::value_fmt(format_args!(
                "invalid graph: storage {sid} is used on two devices (types {} and \
                 {device_type})",
                pe.device_type
            )));
        }
        if crate::packed_func::text::find(scope, "texture").is_some() {
            // A 2-D image (OpenCL): the pool entry is [height, width, channels], each the
            // largest of its entries' folded shapes, in the entries' (common) data type.
            #[cfg(feature = "opencl")]
            {
                let (w, h) = crate::device::opencl::api::texture_extent(shape, scope)
                    .map_err(|e| ctx(e, format_args!("graph entry {i}")))?;
                let c = *shape.last().unwrap_or(&4);
                let (ph, pw, _) = pe.texture.unwrap_or((0, 0, c));
                if pe.used && pe.dtype != dltype {
                    return Err(Error::value_fmt(format_args!(
                        "invalid graph: texture storage {sid} holds entries of two data types"
                    )));
                }
                pe.texture = Some((ph.max(h as i64), pw.max(w as i64), c));
                pe.dtype = dltype;
            }
            #[cfg(not(feature = "opencl"))]
            return Err(Error::value_fmt(format_args!(
                "graph entry {i} uses storage scope '{scope}': texture memory needs the \
                 OpenCL backend; this library was built without `opencl`"
            )));
        }
        pe.used = true;
        pe.device_type = device_type;
        pe.scope = scope;
        pe.bytes = pe.bytes.max(entry_bytes(shape, dltype)?);
        // Parameters linked into the library.
        let linked = match (lookup, &default_lookup) {
            (LinkedParamLookup::Custom(f), _) => {
                let mut shape = shape.to_vec();
                let mut tmpl = DLTensor {
                    data: std::ptr::null_mut(),
                    device: DLDevice::CPU,
                    ndim: shape.len() as i32,
                    dtype: dltype,
                    shape: shape.as_mut_ptr(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                };
                let rv = f.call(&[
                    ArgValue::Object(
                        // SAFETY: `lib` keeps the object alive through the call.
                        unsafe { crate::packed_func::value::ObjArg::new(lib.as_object().as_ptr()) },
                    ),
                    ArgValue::Int(sid as i64),
                    // SAFETY: `tmpl` and the shape it points to outlive the call.
                    ArgValue::DLTensor(unsafe { TensorRef::new(&mut tmpl) }),
                    ArgValue::Device(dev0),
                ])?;
                match rv {
                    RetValue::Null => None,
                    RetValue::Object(o) => Some(NDArray::from_object(o).map_err(|e| {
                        ctx(
                            e,
                            format_args!("the linked parameter lookup function returned"),
                        )
                    })?),
                    other => {
                        return Err(Error::type_error_fmt(format_args!(
                            "the linked parameter lookup function returned {other:?}, not an \
                             NDArray"
                        )))
                    }
                }
            }
            (LinkedParamLookup::Default, Some(f)) => match f.call(&[ArgValue::Int(sid as i64)])? {
                // SAFETY: `_lookup_linked_param` returns the address of the parameter's static
                // data inside the library, which `lib` (kept as the owner) keeps loaded.
                RetValue::Handle(h) if !h.is_null() => Some(unsafe {
                    NDArray::from_external(
                        h.as_ptr(),
                        shape,
                        dltype,
                        dev0,
                        Some(lib.as_object().clone()),
                    )
                }?),
                _ => None,
            },
            _ => None,
        };
        if linked.is_some() {
            pe.linked = linked;
        }
    }
    storage.reserve_exact(pool.len());
    for (sid, pe) in pool.iter_mut().enumerate() {
        if !pe.used {
            storage.push(None);
            continue;
        }
        if let Some(l) = pe.linked.take() {
            storage.push(Some(l));
            continue;
        }
        // TVM falls back to the first device here; its kernels for one device would then be
        // handed another device's memory (a CPU kernel writing through an OpenCL handle), so a
        // device type the executor was not given is refused.
        let dev = devices
            .iter()
            .find(|d| d.device_type == pe.device_type)
            .copied()
            .ok_or_else(|| missing_device(sid, pe.device_type, devices))?;
        let elems = pe.bytes.div_ceil(4) as i64;
        let scope = if pe.scope.is_empty() {
            None
        } else {
            Some(pe.scope)
        };
        let (dims, rank, dtype) = match pe.texture {
            Some((h, w, c)) => ([h, w, c], 3, pe.dtype),
            None => (
                [elems, 0, 0],
                1,
                DLDataType::new(crate::packed_func::types::DL_FLOAT, 32, 1),
            ),
        };
        let arr = NDArrayObj::empty(&dims[..rank], dtype, dev, scope)
            .map_err(|e| ctx(e, format_args!("graph executor: allocating storage")))?;
        storage.push(Some(NDArray::from_object(arr)?));
    }
    entries.reserve_exact(g.num_entries());
    for (i, ((&sid, shape), &dltype)) in
        g.storage_id.iter().zip(&g.shape).zip(&g.dltype).enumerate()
    {
        let base = storage
            .get(sid as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::internal_fmt(format_args!("storage {sid} was not allocated")))?;
        let v = base
            .view(shape, dltype, 0)
            .map_err(|e| ctx(e, format_args!("graph entry {i} (storage {sid})")))?;
        entries.push(v);
    }
    Ok(())
}
