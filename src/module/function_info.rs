//! Device kernel metadata shared by device-module formats (CUDA, and any backend whose
//! modules carry TVM's function-info map): the `FunctionInfo` record in its binary form (inside
//! `__tvm_dev_mblob` entries) and its JSON form (`NAME.tvm_meta.json` next to a kernel file),
//! and the launch configuration that turns trailing call arguments into grid and block sizes.
//!
//! Binary form (little-endian, dmlc stream conventions): the map is a `u64` count followed by
//! `(key string, record)` pairs; a record is the name string, the argument types as a `u64`
//! count of 4-byte `DLDataType`s (code, bits, lanes as `u16`), and the launch-parameter tags as
//! a `u64` count of strings. Strings are a `u64` length then the bytes.

use super::blob::BlobReader;
use crate::packed_func::dtype::{dtype_from_string, dtype_to_string};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::json::{self, Map, Value};
use crate::packed_func::types::{DLDataType, TVMValue};
use std::collections::HashMap;

/// The launch-parameter tag asking for dynamic shared memory (always the last tag).
pub const USE_DYN_SHARED_MEMORY_TAG: &str = "tir.use_dyn_shared_memory";

/// What a device module knows about one kernel.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FunctionInfo {
    /// The kernel name.
    pub name: String,
    /// The types of the kernel's own arguments (buffers are opaque handles).
    pub arg_types: Vec<DLDataType>,
    /// Tags of the launch arguments that follow the kernel arguments (`blockIdx.x`,
    /// `threadIdx.y`, ..., then optionally [`USE_DYN_SHARED_MEMORY_TAG`]).
    pub launch_param_tags: Vec<String>,
}

/// A kernel-name to [`FunctionInfo`] map.
pub type FunctionInfoMap = HashMap<String, FunctionInfo>;

fn read_dtype_vec(r: &mut BlobReader<'_>, what: &str) -> Result<Vec<DLDataType>> {
    let n = r.read_u64(what)?;
    if n > (r.remaining() / 4) as u64 {
        return Err(Error::value_fmt(format_args!(
            "{}: the module blob is truncated or corrupted: cannot read {what} ({n} entries)",
            r.context()
        )));
    }
    (0..n)
        .map(|_| {
            let b = r.read_bytes(4, what)?;
            Ok(DLDataType::new(
                b[0],
                b[1],
                u16::from_le_bytes([b[2], b[3]]),
            ))
        })
        .collect()
}

fn read_string_vec(r: &mut BlobReader<'_>, what: &str) -> Result<Vec<String>> {
    let n = r.read_u64(what)?;
    // Every string takes at least its 8-byte length.
    if n > (r.remaining() / 8) as u64 {
        return Err(Error::value_fmt(format_args!(
            "{}: the module blob is truncated or corrupted: cannot read {what} ({n} entries)",
            r.context()
        )));
    }
    (0..n).map(|_| r.read_string(what)).collect()
}

impl FunctionInfo {
    /// Reads one record in binary form.
    pub fn read(r: &mut BlobReader<'_>) -> Result<FunctionInfo> {
        let name = r.read_string("a function name")?;
        let arg_types = read_dtype_vec(r, "the argument types")?;
        let launch_param_tags = read_string_vec(r, "the launch parameter tags")?;
        Ok(FunctionInfo {
            name,
            arg_types,
            launch_param_tags,
        })
    }

    /// Appends the record in binary form.
    pub fn write(&self, out: &mut Vec<u8>) {
        write_string(out, &self.name);
        out.extend_from_slice(&(self.arg_types.len() as u64).to_le_bytes());
        for t in &self.arg_types {
            out.push(t.code);
            out.push(t.bits);
            out.extend_from_slice(&t.lanes.to_le_bytes());
        }
        out.extend_from_slice(&(self.launch_param_tags.len() as u64).to_le_bytes());
        for t in &self.launch_param_tags {
            write_string(out, t);
        }
    }

    /// Reads one record from its JSON object (`name`, `arg_types` as type strings, and
    /// `launch_param_tags`, or the older `thread_axis_tags`).
    pub fn from_json(v: &Value) -> Result<FunctionInfo> {
        let obj = v
            .as_object()
            .ok_or_else(|| Error::value("function info: expected a JSON object"))?;
        let name = obj
            .get("name")
            .and_then(|n| n.as_str())
            .ok_or_else(|| Error::value("function info: missing string field 'name'"))?
            .to_string();
        let strings = |key: &str| -> Result<Option<Vec<String>>> {
            match obj.get(key) {
                None => Ok(None),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|i| {
                        i.as_str().map(str::to_string).ok_or_else(|| {
                            Error::value_fmt(format_args!(
                                "function info of {name}: '{key}' must be a list of strings"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>>>()
                    .map(Some),
                Some(_) => Err(Error::value_fmt(format_args!(
                    "function info of {name}: '{key}' must be a list of strings"
                ))),
            }
        };
        let arg_types = strings("arg_types")?
            .ok_or_else(|| {
                Error::value_fmt(format_args!(
                    "function info of {name}: missing field 'arg_types'"
                ))
            })?
            .iter()
            .map(|s| dtype_from_string(s))
            .collect::<Result<Vec<_>>>()?;
        let launch_param_tags = match strings("launch_param_tags")? {
            Some(t) => t,
            None => strings("thread_axis_tags")?.unwrap_or_default(),
        };
        Ok(FunctionInfo {
            name,
            arg_types,
            launch_param_tags,
        })
    }

    /// The record as a JSON object.
    pub fn to_json(&self) -> Value {
        let strings = |v: Vec<String>| Value::Array(v.into_iter().map(Value::from).collect());
        json::object(vec![
            ("name", self.name.as_str().into()),
            (
                "arg_types",
                strings(self.arg_types.iter().map(|t| dtype_to_string(*t)).collect()),
            ),
            ("launch_param_tags", strings(self.launch_param_tags.clone())),
        ])
    }
}

/// Appends a length-prefixed string.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    write_bytes(out, s.as_bytes());
}

/// Appends a length-prefixed byte string.
pub fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
}

/// Reads a function-info map in binary form.
pub fn read_map(r: &mut BlobReader<'_>) -> Result<FunctionInfoMap> {
    let n = r.read_u64("the number of functions")?;
    if n > (r.remaining() / 8) as u64 {
        return Err(Error::value_fmt(format_args!(
            "{}: the module blob is truncated or corrupted: cannot read the function table \
             ({n} entries)",
            r.context()
        )));
    }
    let mut m = HashMap::new();
    for _ in 0..n {
        let key = r.read_string("a function table key")?;
        let info = FunctionInfo::read(r)?;
        m.insert(key, info);
    }
    Ok(m)
}

/// Appends a function-info map in binary form (keys sorted, so output is deterministic).
pub fn write_map(out: &mut Vec<u8>, m: &FunctionInfoMap) {
    out.extend_from_slice(&(m.len() as u64).to_le_bytes());
    let mut keys: Vec<&String> = m.keys().collect();
    crate::packed_func::order::sort_stable_by(&mut keys, |a, b| a.cmp(b));
    for k in keys {
        write_string(out, k);
        m[k].write(out);
    }
}

/// Parses a `.tvm_meta.json` document (`{"tvm_version": ..., "func_info": {...}}`).
pub fn map_from_json(text: &str, context: &str) -> Result<FunctionInfoMap> {
    let v = json::parse(text)
        .map_err(|e| Error::value_fmt(format_args!("{context}: invalid JSON: {e}")))?;
    let fi = v
        .get("func_info")
        .and_then(|f| f.as_object())
        .ok_or_else(|| {
            Error::value_fmt(format_args!("{context}: missing object field 'func_info'"))
        })?;
    fi.iter()
        .map(|(k, v)| {
            Ok((
                k.clone(),
                FunctionInfo::from_json(v).map_err(|e| e.context(context))?,
            ))
        })
        .collect()
}

/// A function-info map as a `.tvm_meta.json` document.
pub fn map_to_json(m: &FunctionInfoMap) -> String {
    let mut fi = Map::new();
    for (k, v) in m {
        fi.insert(k.clone(), v.to_json());
    }
    json::object(vec![
        ("tvm_version", "0.20.0".into()),
        ("func_info", fi.into()),
    ])
    .to_string()
}

/// The metadata file next to a kernel file: the extension replaced by `.tvm_meta.json`.
pub fn meta_file_path(file: &str) -> String {
    let p = std::path::Path::new(file);
    match p.extension() {
        Some(_) => p
            .with_extension("tvm_meta.json")
            .to_string_lossy()
            .into_owned(),
        None => format!("{file}.tvm_meta.json"),
    }
}

/// Grid and block sizes of one launch, plus the dynamic shared memory size.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ThreadWorkload {
    /// Grid x, y, z then block x, y, z.
    pub work_size: [usize; 6],
    /// Dynamic shared memory in bytes.
    pub dyn_shmem_size: usize,
}

impl ThreadWorkload {
    /// The grid size along axis `i` (0 = x).
    pub fn grid_dim(&self, i: usize) -> usize {
        self.work_size[i]
    }

    /// The block size along axis `i` (0 = x).
    pub fn block_dim(&self, i: usize) -> usize {
        self.work_size[i + 3]
    }
}

/// Where the launch arguments of a kernel go: built from its tags, applied to each call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchParamConfig {
    base: usize,
    arg_index_map: Vec<usize>,
    use_dyn_shared_memory: bool,
    work_dim: usize,
}

/// The slot (grid 0..3, block 3..6) a thread tag names.
fn tag_slot(tag: &str) -> Result<usize> {
    let axis = |c: Option<u8>| -> Result<usize> {
        match c {
            Some(c @ b'x'..=b'z') => Ok((c - b'x') as usize),
            _ => Err(Error::value_fmt(format_args!("Unknown threadscope {tag}"))),
        }
    };
    if tag.starts_with("vthread") || tag == "cthread" {
        // Virtual threads sit at the thread level with no axis; the reference files them
        // under slot 1 * 3 - 1.
        Ok(2)
    } else if let Some(rest) = tag.strip_prefix("blockIdx.") {
        axis(rest.bytes().next())
    } else if let Some(rest) = tag.strip_prefix("threadIdx.") {
        Ok(3 + axis(rest.bytes().next())?)
    } else {
        Err(Error::value_fmt(format_args!("Unknown threadscope {tag}")))
    }
}

impl LaunchParamConfig {
    /// A configuration for a kernel with `num_args` own arguments and these tags.
    pub fn new(num_args: usize, tags: &[String]) -> Result<LaunchParamConfig> {
        let mut arg_index_map = Vec::with_capacity(tags.len());
        let mut filled = [false; 6];
        let mut use_dyn_shared_memory = false;
        for (i, tag) in tags.iter().enumerate() {
            if tag == USE_DYN_SHARED_MEMORY_TAG {
                if i + 1 != tags.len() {
                    return Err(Error::value_fmt(format_args!(
                        "{USE_DYN_SHARED_MEMORY_TAG} should be the last tag in \
                         launch_param_tags."
                    )));
                }
                use_dyn_shared_memory = true;
            } else {
                let slot = tag_slot(tag)?;
                arg_index_map.push(slot);
                filled[slot] = true;
            }
        }
        let work_dim = (0..3)
            .filter(|&i| filled[i] || filled[i + 3])
            .map(|i| i + 1)
            .max()
            .unwrap_or(1);
        Ok(LaunchParamConfig {
            base: num_args,
            arg_index_map,
            use_dyn_shared_memory,
            work_dim,
        })
    }

    /// How many launch arguments a call carries after the kernel arguments.
    pub fn num_launch_args(&self) -> usize {
        self.arg_index_map.len() + self.use_dyn_shared_memory as usize
    }

    /// Whether the kernel takes a dynamic shared memory size.
    pub fn uses_dyn_shared_memory(&self) -> bool {
        self.use_dyn_shared_memory
    }

    /// The number of used dimensions (1 to 3).
    pub fn work_dim(&self) -> usize {
        self.work_dim
    }

    /// Reads the launch arguments of a call (integers; sizes of 0 or less count as 1).
    ///
    /// # Safety
    /// `values` must hold integer values at the launch positions (callers check the count
    /// and the type codes first).
    pub unsafe fn extract(&self, values: &[TVMValue]) -> ThreadWorkload {
        let mut w = ThreadWorkload {
            work_size: [1; 6],
            dyn_shmem_size: 0,
        };
        for (i, &slot) in self.arg_index_map.iter().enumerate() {
            // SAFETY: the caller guarantees an integer value here.
            let v = unsafe { values[self.base + i].v_int64 };
            if v > 0 {
                w.work_size[slot] = v as usize;
            }
        }
        if self.use_dyn_shared_memory {
            // SAFETY: as above.
            let v = unsafe { values[self.base + self.arg_index_map.len()].v_int64 };
            w.dyn_shmem_size = v.max(0) as usize;
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> FunctionInfo {
        FunctionInfo {
            name: "add_kernel".into(),
            arg_types: vec![
                DLDataType::new(3, 64, 1),
                DLDataType::new(2, 32, 1),
                DLDataType::new(0, 32, 1),
            ],
            launch_param_tags: vec![
                "blockIdx.x".into(),
                "threadIdx.x".into(),
                USE_DYN_SHARED_MEMORY_TAG.into(),
            ],
        }
    }

    #[test]
    fn binary_round_trip_and_layout() {
        let mut m = FunctionInfoMap::new();
        m.insert("add_kernel".into(), info());
        let mut b = Vec::new();
        write_map(&mut b, &m);
        // count, key, name, 3 dtypes, 3 tags
        assert_eq!(&b[..8], &1u64.to_le_bytes());
        assert_eq!(&b[8..16], &10u64.to_le_bytes());
        assert_eq!(&b[16..26], b"add_kernel");
        let mut r = BlobReader::new(&b, "t");
        assert_eq!(read_map(&mut r).unwrap(), m);
        assert_eq!(r.remaining(), 0);
        for cut in 0..b.len() {
            let mut r = BlobReader::new(&b[..cut], "t");
            assert!(read_map(&mut r).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn json_round_trip_and_legacy_tags() {
        let mut m = FunctionInfoMap::new();
        m.insert("add_kernel".into(), info());
        let text = map_to_json(&m);
        assert_eq!(map_from_json(&text, "t").unwrap(), m);
        let legacy = r#"{"tvm_version": "0.8", "func_info": {"f": {"name": "f",
            "arg_types": ["handle", "float32", "int64"], "thread_axis_tags": ["threadIdx.x"]}}}"#;
        let m = map_from_json(legacy, "t").unwrap();
        assert_eq!(m["f"].launch_param_tags, vec!["threadIdx.x".to_string()]);
        assert_eq!(m["f"].arg_types[2], DLDataType::new(0, 64, 1));
        let e = map_from_json("{}", "k.tvm_meta.json").unwrap_err();
        assert!(e.message.contains("func_info"), "{}", e.message);
    }

    #[test]
    fn meta_path() {
        assert_eq!(meta_file_path("/a/k.cubin"), "/a/k.tvm_meta.json");
        assert_eq!(meta_file_path("k.ptx"), "k.tvm_meta.json");
        assert_eq!(meta_file_path("k"), "k.tvm_meta.json");
    }

    #[test]
    fn launch_params() {
        let tags: Vec<String> = ["blockIdx.x", "threadIdx.x", "threadIdx.y"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = LaunchParamConfig::new(2, &tags).unwrap();
        assert_eq!(c.num_launch_args(), 3);
        assert_eq!(c.work_dim(), 2);
        let vals: Vec<TVMValue> = [0i64, 0, 8, 0, 4]
            .iter()
            .map(|&v| TVMValue { v_int64: v })
            .collect();
        // SAFETY: all values are integers.
        let w = unsafe { c.extract(&vals) };
        assert_eq!(w.work_size, [8, 1, 1, 1, 4, 1]);
        assert_eq!(w.dyn_shmem_size, 0);

        let c = LaunchParamConfig::new(1, &info().launch_param_tags).unwrap();
        assert!(c.uses_dyn_shared_memory());
        let vals: Vec<TVMValue> = [0i64, 3, 128, 4096]
            .iter()
            .map(|&v| TVMValue { v_int64: v })
            .collect();
        // SAFETY: all values are integers.
        let w = unsafe { c.extract(&vals) };
        assert_eq!(
            (w.grid_dim(0), w.block_dim(0), w.dyn_shmem_size),
            (3, 128, 4096)
        );

        let bad = vec![USE_DYN_SHARED_MEMORY_TAG.to_string(), "blockIdx.x".into()];
        assert!(LaunchParamConfig::new(0, &bad)
            .unwrap_err()
            .message
            .contains("last tag"));
        // Virtual threads land where the reference files them (rank 1, no axis).
        assert_eq!(tag_slot("vthread.s").unwrap(), 2);
        assert_eq!(tag_slot("threadIdx.z").unwrap(), 5);
        assert!(tag_slot("threadIdx.w").is_err());
        let e = LaunchParamConfig::new(0, &["warp.x".to_string()]).unwrap_err();
        assert_eq!(e.message, "Unknown threadscope warp.x");
    }
}
