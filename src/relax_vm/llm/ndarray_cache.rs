//! The parameter cache: weights shipped as `ndarray-cache.json` plus raw shards (the format
//! `tvm.contrib.tvmjs.dump_ndarray_cache` writes), loaded into a process-wide name → array map
//! that models read through `vm.builtin.param_*_from_cache*`.
//!
//! Loading checks everything before it publishes anything: each shard's size against the
//! JSON, each record's extent against its shard and its byte count against its shape and
//! type. A failed load leaves the cache as it was. Each shard is read once, in record order.
//!
//! On the CPU, `raw` records whose offset keeps the 64-byte data alignment kernels assume are
//! not copied: the shard is mapped copy-on-write (`MAP_PRIVATE`, readable and writable, so a
//! write into a parameter stays in the process and never reaches the file), its pages are
//! faulted in up front (`MADV_POPULATE_READ`), and each such array is a view into the mapping,
//! which lives as long as the last array viewing it. Like numpy's and safetensors' memory maps,
//! this requires that the shard files are not truncated or rewritten while a model uses them
//! (an access past a truncated file's end raises SIGBUS; a page not yet written in the process
//! shows the file's new bytes). Other records (misaligned, bfloat16-encoded, other devices),
//! and every record where the kernel refuses to populate the mapping (Linux < 5.14), are read
//! with `pread` into their own arrays.
//!
//! # The file-stability contract
//! Safe Rust cannot promise that another process leaves a file alone, so the mapping loaders
//! ([`read_cache_dir`], [`load`]) are `unsafe fn`s whose `# Safety` section states it, as
//! `memmap2::Mmap::map` does; [`read_cache_dir_copied`] and [`load_copied`] are their safe
//! forms, which read every record into arrays of their own. The globals
//! (`vm.builtin.ndarray_cache.load`, `vm.builtin.tensor_cache.load`) keep TVM's semantics and
//! map: whoever calls them (C, Python, RPC) takes on the same contract.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::module::{Module, ModuleNode};
use crate::ndarray::{checked_nbytes, copy_from_bytes, NDArray, NDArrayObj, ALLOC_ALIGNMENT};
use crate::object::containers::{ArrayObj, StringObj};
use crate::object::ObjectRef;
use crate::packed_func::dtype::{dtype_from_string, dtype_to_string};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::json::Value;
use crate::packed_func::registry::Registrar;
use crate::packed_func::types::{DLDataType, DLDevice, DL_CPU, DL_FLOAT};
use crate::packed_func::value::{ArgValue, Args, RetValue};

/// One array inside a shard.
#[derive(Debug, Clone)]
pub struct ParamRecord {
    /// The parameter's name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its element type (after decoding).
    pub dtype: DLDataType,
    /// `raw` or `f32-to-bf16`.
    pub format: String,
    /// Bytes it takes in the shard.
    pub nbytes: u64,
    /// Where it starts in the shard.
    pub byte_offset: u64,
}

/// One shard file.
#[derive(Debug, Clone)]
pub struct FileRecord {
    /// The file, relative to the cache directory.
    pub data_path: String,
    /// `raw-shard`.
    pub format: String,
    /// The file's size.
    pub nbytes: u64,
    /// The arrays it holds.
    pub records: Vec<ParamRecord>,
}

fn field<'a>(o: &'a Value, key: &str, at: &str) -> Result<&'a Value> {
    o.get(key)
        .ok_or_else(|| Error::value(format!("ndarray-cache.json: {at} has no \"{key}\"")))
}

fn str_field(o: &Value, key: &str, at: &str) -> Result<String> {
    field(o, key, at)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::value(format!("ndarray-cache.json: {at}.{key} is not a string")))
}

fn u64_field(o: &Value, key: &str, at: &str) -> Result<u64> {
    field(o, key, at)?.as_u64().ok_or_else(|| {
        Error::value(format!(
            "ndarray-cache.json: {at}.{key} is not a non-negative integer"
        ))
    })
}

fn array_field<'a>(o: &'a Value, key: &str, at: &str) -> Result<&'a Vec<Value>> {
    field(o, key, at)?
        .as_array()
        .ok_or_else(|| Error::value(format!("ndarray-cache.json: {at}.{key} is not a list")))
}

/// Parses and checks the metadata (`ndarray-cache.json`'s text).
pub fn parse_metadata(text: &str) -> Result<Vec<FileRecord>> {
    let json = crate::packed_func::json::parse(text)
        .map_err(|e| Error::value(format!("ndarray-cache.json is not valid JSON: {e}")))?;
    if !json.is_object() {
        return Err(Error::value("ndarray-cache.json is not a JSON object"));
    }
    let mut files = Vec::new();
    for (fi, f) in array_field(&json, "records", "the top level")?
        .iter()
        .enumerate()
    {
        let at = format!("records[{fi}]");
        let mut file = FileRecord {
            data_path: str_field(f, "dataPath", &at)?,
            format: str_field(f, "format", &at)?,
            nbytes: u64_field(f, "nbytes", &at)?,
            records: Vec::new(),
        };
        if file.format != "raw-shard" {
            return Err(Error::value(format!(
                "ndarray-cache.json: {at} ({}) has format \"{}\"; only \"raw-shard\" is supported",
                file.data_path, file.format
            )));
        }
        for (ri, r) in array_field(f, "records", &at)?.iter().enumerate() {
            let at = format!("{at}.records[{ri}]");
            let name = str_field(r, "name", &at)?;
            let at = format!("{at} ({name})");
            let shape = array_field(r, "shape", &at)?
                .iter()
                .map(|d| {
                    d.as_i64().filter(|d| *d >= 0).ok_or_else(|| {
                        Error::value(format!(
                            "ndarray-cache.json: {at} has a bad shape entry {d}"
                        ))
                    })
                })
                .collect::<Result<Vec<i64>>>()?;
            let dtype_s = str_field(r, "dtype", &at)?;
            let dtype = dtype_from_string(&dtype_s)
                .map_err(|e| e.context(format!("ndarray-cache.json: {at}")))?;
            let rec = ParamRecord {
                name,
                shape,
                dtype,
                format: str_field(r, "format", &at)?,
                nbytes: u64_field(r, "nbytes", &at)?,
                byte_offset: u64_field(r, "byteOffset", &at)?,
            };
            check_record(&rec, &file)?;
            file.records.push(rec);
        }
        files.push(file);
    }
    Ok(files)
}

/// Whether a record is stored as bfloat16 and decoded to float32.
fn is_bf16_encoded(rec: &ParamRecord) -> bool {
    rec.format == "f32-to-bf16" && rec.dtype == DLDataType::new(DL_FLOAT, 32, 1)
}

/// Checks a record's byte count against its shape and type and its extent against the shard.
fn check_record(rec: &ParamRecord, file: &FileRecord) -> Result<()> {
    let at = format!("parameter {} in {}", rec.name, file.data_path);
    let full = checked_nbytes(&rec.shape, rec.dtype).map_err(|e| e.context(&at))? as u64;
    let expect = match rec.format.as_str() {
        // dump_ndarray_cache marks every record of an f32-to-bf16 cache so; only float32
        // ones are encoded, the rest are stored raw (as the reference reads them).
        "f32-to-bf16" if is_bf16_encoded(rec) => full / 2,
        "raw" | "f32-to-bf16" => full,
        f => {
            return Err(Error::value(format!(
                "{at}: unknown record format \"{f}\" (expected raw or f32-to-bf16)"
            )))
        }
    };
    if rec.nbytes != expect {
        return Err(Error::value(format!(
            "{at}: nbytes {} disagrees with shape {:?} of {} in format {} ({expect} bytes)",
            rec.nbytes,
            rec.shape,
            dtype_to_string(rec.dtype),
            rec.format
        )));
    }
    let end = rec.byte_offset.checked_add(rec.nbytes);
    if end.is_none_or(|e| e > file.nbytes) {
        return Err(Error::value(format!(
            "{at}: bytes [{}, +{}) lie outside the shard of {} bytes",
            rec.byte_offset, rec.nbytes, file.nbytes
        )));
    }
    Ok(())
}

/// The file of a shard: `dataPath` appended to the directory as the reference appends it
/// (`<dir>/<dataPath>`, so an absolute `dataPath` still names a file under the directory). A
/// thread serving a remote peer confined to its work directory (see `confine`) may not reach
/// out of it through the metadata either (`..`, a symbolic link): the directory was checked,
/// and so is each file it names.
fn shard_path(dir: &str, data_path: &str) -> Result<PathBuf> {
    crate::packed_func::confine::resolve(&format!("{dir}/{data_path}"), "ndarray_cache.load")
}

/// Opens a shard and checks its size against the metadata.
fn open_shard(path: &Path, expect_len: u64) -> Result<std::fs::File> {
    let f = std::fs::File::open(path).map_err(|e| {
        Error::value(format!(
            "cannot open parameter shard {}: {e}",
            path.display()
        ))
    })?;
    let len = f
        .metadata()
        .map_err(|e| Error::value(format!("cannot stat {}: {e}", path.display())))?
        .len();
    if len != expect_len {
        return Err(Error::value(format!(
            "parameter shard {} has {len} bytes but ndarray-cache.json says {expect_len}: \
             it is corrupt or was not downloaded completely",
            path.display()
        )));
    }
    Ok(f)
}

/// Reads `buf.len()` bytes at `off`; a short file is an error.
fn read_at(f: &std::fs::File, buf: &mut [u8], off: u64, path: &Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    f.read_exact_at(buf, off).map_err(|e| {
        Error::value(format!(
            "cannot read parameter shard {}: {e}",
            path.display()
        ))
    })
}

/// A shard file mapped copy-on-write; unmapped when the last array viewing it (and the loader)
/// let go of it.
struct ShardMap {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process memory; the object only hands out its address and unmaps
// it once, on drop.
unsafe impl Send for ShardMap {}
// SAFETY: as above.
unsafe impl Sync for ShardMap {}

// SAFETY: `ShardMap` is the only payload stored under this key.
unsafe impl crate::object::ObjectType for ShardMap {
    crate::object_type!("relax.vm.ParamShardMapping", parent 0);
}

impl Drop for ShardMap {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are a mapping made by `map_shard`, unmapped once, here, after
        // every array viewing it is gone (each holds a reference to this object).
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }
}

/// Maps a whole shard copy-on-write; `None` when it cannot be mapped (then it is read).
fn map_shard(f: &std::fs::File, len: u64) -> Option<ObjectRef> {
    use std::os::fd::AsRawFd;
    let len = usize::try_from(len).ok().filter(|l| *l > 0)?;
    // SAFETY: a fresh private mapping of an open file; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE,
            f.as_raw_fd(),
            0,
        )
    };
    (p != libc::MAP_FAILED).then(|| {
        ObjectRef::new(ShardMap {
            base: p as *mut u8,
            len,
        })
    })
}

/// Whether a record can be a view into its mapped shard: a raw record, not empty, whose data
/// starts on an [`ALLOC_ALIGNMENT`] boundary (the mapping itself starts on a page).
fn viewable(rec: &ParamRecord, dev: DLDevice) -> bool {
    dev.device_type == DL_CPU
        && rec.format == "raw"
        && rec.nbytes > 0
        && rec.byte_offset % ALLOC_ALIGNMENT as u64 == 0
}

/// A view of a record in the mapped shard, its pages faulted in; `None` when the kernel
/// refuses to populate them (then the record is read instead).
#[cfg(target_os = "emscripten")]
fn view_record(_: &ParamRecord, _: &ObjectRef, _: DLDevice) -> Result<Option<NDArray>> {
    // No populating madvise in WebAssembly: every record is read.
    Ok(None)
}

#[cfg(not(target_os = "emscripten"))]
fn view_record(rec: &ParamRecord, map: &ObjectRef, dev: DLDevice) -> Result<Option<NDArray>> {
    let m = map
        .downcast_ref::<ShardMap>()
        .ok_or_else(|| Error::internal("shard mapping of the wrong type"))?;
    // Checked conversions: on 32-bit targets an offset past 4 GiB must not wrap into the
    // mapping.
    let range = usize::try_from(rec.byte_offset)
        .ok()
        .zip(usize::try_from(rec.nbytes).ok())
        .filter(|&(off, n)| off.checked_add(n).is_some_and(|e| e <= m.len));
    let Some((off, n)) = range else {
        return Err(Error::value(format!(
            "bytes [{}, +{}) lie outside the mapped shard of {} bytes",
            rec.byte_offset, rec.nbytes, m.len
        )));
    };
    // SAFETY: page size query, no memory involved.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = off / page * page;
    // SAFETY: [start, off + n) lies inside the live mapping (checked above); populating only
    // faults pages in (read-only, sharing the page cache until written).
    let rc = unsafe {
        libc::madvise(
            m.base.add(start) as *mut c_void,
            off + n - start,
            libc::MADV_POPULATE_READ,
        )
    };
    if rc != 0 {
        return Ok(None);
    }
    // SAFETY: the n bytes at base + off are inside the mapping, which `map` (kept alive by the
    // array and its views) keeps mapped; off is a multiple of ALLOC_ALIGNMENT and base of a
    // page, so the data is aligned.
    let arr = unsafe {
        NDArray::from_external(
            m.base.add(off) as *mut c_void,
            &rec.shape,
            rec.dtype,
            dev,
            Some(map.clone()),
        )?
    };
    Ok(Some(arr))
}

/// Makes one array from its bytes in the shard: a view into the mapped shard where it can be
/// one, else read from the file (raw records on the CPU straight into the array, the others
/// through one staging buffer).
fn load_record(
    rec: &ParamRecord,
    f: &std::fs::File,
    path: &Path,
    dev: DLDevice,
    map: Option<&ObjectRef>,
) -> Result<NDArray> {
    if let Some(map) = map.filter(|_| viewable(rec, dev)) {
        if let Some(arr) = view_record(rec, map, dev)? {
            return Ok(arr);
        }
    }
    let arr = NDArray::empty(&rec.shape, rec.dtype, dev)?;
    let n = usize::try_from(rec.nbytes).map_err(|_| {
        Error::value(format!(
            "a record of {} bytes does not fit the {}-bit address space",
            rec.nbytes,
            usize::BITS
        ))
    })?;
    if n == 0 {
        return Ok(arr);
    }
    let t = arr.dltensor();
    if dev.device_type == DL_CPU && !is_bf16_encoded(rec) {
        // SAFETY: a fresh compact CPU array of exactly n bytes, not shared yet.
        let dst = unsafe {
            std::slice::from_raw_parts_mut((t.data as *mut u8).add(t.byte_offset as usize), n)
        };
        read_at(f, dst, rec.byte_offset, path)?;
        return Ok(arr);
    }
    let mut raw = vec![0u8; n];
    read_at(f, &mut raw, rec.byte_offset, path)?;
    if is_bf16_encoded(rec) {
        let decoded: Vec<u32> = raw
            .chunks_exact(2)
            .map(|c| (u16::from_le_bytes([c[0], c[1]]) as u32) << 16)
            .collect();
        // SAFETY: the array is live and `decoded` holds exactly its 2n bytes.
        unsafe { copy_from_bytes(t, decoded.as_ptr() as *const c_void, n * 2)? };
    } else {
        // SAFETY: the array is live and `raw` holds exactly its n bytes.
        unsafe { copy_from_bytes(t, raw.as_ptr() as *const c_void, n)? };
    }
    Ok(arr)
}

/// Reads a cache directory's arrays onto a device, checking everything; publishes nothing.
/// Every shard's size is checked before any array is allocated or any shard mapped; then each
/// shard is read (or mapped) in one pass, in record order (the order of the result). CPU
/// arrays whose records allow it are views of the mapped shard (see the module's doc).
///
/// # Safety
/// The shard files must not be truncated or modified (by this or any other process) while
/// any of the returned arrays, or any view or copy of their handles, lives: the arrays alias
/// the files' pages, so a change shows through as memory changing under safe code (a data
/// race) and a truncation faults (SIGBUS). [`read_cache_dir_copied`] has no such contract.
pub unsafe fn read_cache_dir(dir: &str, dev: DLDevice) -> Result<Vec<(String, NDArray)>> {
    read_cache_dir_in(dir, dev, true)
}

/// [`read_cache_dir`] with every record read into an array of its own (nothing maps the
/// files, so later changes to them do not reach the arrays).
pub fn read_cache_dir_copied(dir: &str, dev: DLDevice) -> Result<Vec<(String, NDArray)>> {
    read_cache_dir_in(dir, dev, false)
}

/// [`read_cache_dir`], mapping the shards only when `map` is set.
fn read_cache_dir_in(dir: &str, dev: DLDevice, map: bool) -> Result<Vec<(String, NDArray)>> {
    let dir_path = PathBuf::from(dir);
    let meta_path = dir_path.join("ndarray-cache.json");
    let text = std::fs::read_to_string(&meta_path)
        .map_err(|e| Error::value(format!("cannot read {}: {e}", meta_path.display())))?;
    let files = parse_metadata(&text).map_err(|e| e.context(meta_path.display()))?;
    let shards = files
        .iter()
        .map(|f| {
            let p = shard_path(dir, &f.data_path)?;
            open_shard(&p, f.nbytes).map(|h| (h, p))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut out = Vec::new();
    for (f, (h, path)) in files.iter().zip(&shards) {
        let map = if map && f.records.iter().any(|r| viewable(r, dev)) {
            map_shard(h, f.nbytes)
        } else {
            None
        };
        for rec in &f.records {
            let arr = load_record(rec, h, path, dev, map.as_ref()).map_err(|e| {
                e.context(format!(
                    "loading parameter {} from {}",
                    rec.name, f.data_path
                ))
            })?;
            out.push((rec.name.clone(), arr));
        }
    }
    if dev.device_type != DL_CPU {
        // SAFETY: synchronising the default stream of a valid device.
        unsafe { crate::device::api(dev)?.stream_sync(dev, std::ptr::null_mut())? };
    }
    Ok(out)
}

static CACHE: Mutex<Option<HashMap<String, NDArray>>> = Mutex::new(None);

fn cache() -> MutexGuard<'static, Option<HashMap<String, NDArray>>> {
    CACHE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Loads a cache directory into the global cache (all or nothing); later names replace
/// earlier ones. Arrays may map the shard files, as [`read_cache_dir`]'s do.
///
/// # Safety
/// As [`read_cache_dir`]: the shard files must stay unchanged while any array loaded from
/// them lives (in the cache or outside it). [`load_copied`] has no such contract.
pub unsafe fn load(dir: &str, dev: DLDevice) -> Result<usize> {
    // SAFETY: forwarded contract.
    publish(unsafe { read_cache_dir(dir, dev)? })
}

/// [`load`] with every record read into an array of its own.
pub fn load_copied(dir: &str, dev: DLDevice) -> Result<usize> {
    publish(read_cache_dir_copied(dir, dev)?)
}

/// Puts loaded arrays in the global cache.
fn publish(arrays: Vec<(String, NDArray)>) -> Result<usize> {
    let n = arrays.len();
    cache().get_or_insert_with(HashMap::new).extend(arrays);
    Ok(n)
}

/// The cached array of this name.
pub fn get(name: &str) -> Option<NDArray> {
    cache().as_ref().and_then(|m| m.get(name).cloned())
}

/// Puts an array in the cache; without `override_existing`, a name already there is an error.
pub fn update(name: &str, arr: NDArray, override_existing: bool) -> Result<()> {
    let mut c = cache();
    let m = c.get_or_insert_with(HashMap::new);
    if !override_existing && m.contains_key(name) {
        return Err(Error::value(format!(
            "Name {name} already exists in the ndarray cache"
        )));
    }
    m.insert(name.to_string(), arr);
    Ok(())
}

/// Drops a name from the cache (absent names are fine).
pub fn remove(name: &str) {
    if let Some(m) = cache().as_mut() {
        m.remove(name);
    }
}

/// Empties the cache.
pub fn clear() {
    *cache() = None;
}

/// The arrays `prefix_0`, `prefix_1`, …: `n` of them (each must exist), or with `n == -1`
/// as many as there are consecutively.
pub fn params_by_prefix(prefix: &str, n: i64) -> Result<Vec<NDArray>> {
    if n < -1 {
        return Err(Error::value(format!(
            "the number of parameters must be >= -1, got {n}"
        )));
    }
    let c = cache();
    let mut out = Vec::new();
    let mut i = 0i64;
    while n == -1 || i < n {
        let name = format!("{prefix}_{i}");
        match c.as_ref().and_then(|m| m.get(&name)) {
            Some(a) => out.push(a.clone()),
            None if n == -1 => break,
            None => {
                return Err(Error::value(format!(
                    "Cannot find {name} in the ndarray cache"
                )))
            }
        }
        i += 1;
    }
    Ok(out)
}

/// The arrays of these names, each of which must be cached.
pub fn params_by_name(names: &[String]) -> Result<Vec<NDArray>> {
    let c = cache();
    names
        .iter()
        .map(|n| {
            c.as_ref()
                .and_then(|m| m.get(n))
                .cloned()
                .ok_or_else(|| Error::value(format!("Cannot find parameter in cache: {n}")))
        })
        .collect()
}

fn array_ref(arrs: Vec<NDArray>) -> ObjectRef {
    ArrayObj::new_ref(arrs.into_iter().map(|a| Some(a.into_object())).collect())
}

/// The `param_module` the `param_module_from_cache*` functions return: `get_params` gives its
/// arrays.
struct ParamModule {
    params: ObjectRef,
}

impl ModuleNode for ParamModule {
    fn type_key(&self) -> &str {
        "param_module"
    }

    fn get_function(&self, name: &str, _this: Option<&ObjectRef>) -> Result<Option<Function>> {
        if name != "get_params" {
            return Ok(None);
        }
        let params = self.params.clone();
        Ok(Some(Function::from_rust(move |_a, rv| {
            *rv = RetValue::Object(params.clone());
            Ok(())
        })))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn param_module(arrs: Vec<NDArray>) -> RetValue {
    RetValue::Object(
        Module::new(Box::new(ParamModule {
            params: array_ref(arrs),
        }))
        .into_object(),
    )
}

/// A string argument: a `str` or a `runtime.String` object.
fn string_arg(a: &Args<'_>, i: usize) -> Result<String> {
    match a.get(i)? {
        ArgValue::Object(o) => o
            .downcast_ref::<StringObj>()
            .map(|s| s.as_str().to_string())
            .ok_or_else(|| {
                Error::type_error(format!(
                    "argument {i}: expected a string, got {}",
                    o.to_ref().type_key()
                ))
            }),
        _ => Ok(a.str(i)?.to_string()),
    }
}

/// An `Array<String>` argument.
fn names_arg(a: &Args<'_>, i: usize) -> Result<Vec<String>> {
    let arr = a.downcast::<ArrayObj>(i)?;
    arr.items
        .iter()
        .enumerate()
        .map(|(k, o)| {
            o.as_ref()
                .and_then(|o| o.downcast_ref::<StringObj>())
                .map(|s| s.as_str().to_string())
                .ok_or_else(|| {
                    Error::type_error(format!("argument {i}: entry {k} is not a string"))
                })
        })
        .collect()
}

/// The array argument of `update`: an NDArray is kept; a bare DLTensor is copied.
fn array_arg(a: &Args<'_>, i: usize) -> Result<NDArray> {
    match a.get(i)? {
        ArgValue::Object(o) if o.downcast_ref::<NDArrayObj>().is_some() => {
            NDArray::from_object(o.to_ref())
        }
        ArgValue::DLTensor(t) => {
            // SAFETY: a tensor argument is valid during the call.
            let t = unsafe { &*t.as_ptr() };
            // SAFETY: as above; shape holds ndim entries.
            let shape = unsafe { crate::ndarray::shape_of(t) }.to_vec();
            let arr = NDArray::empty(&shape, t.dtype, t.device)?;
            // SAFETY: both tensors are live and of the same shape and type.
            unsafe { crate::ndarray::copy_from_to(t, arr.dltensor(), std::ptr::null_mut())? };
            // SAFETY: synchronising the default stream of the tensor's device.
            unsafe { crate::device::api(t.device)?.stream_sync(t.device, std::ptr::null_mut())? };
            Ok(arr)
        }
        v => Err(Error::type_error(format!(
            "argument {i}: expected a tensor, got {}",
            v.kind_name()
        ))),
    }
}

/// Registers the parameter-cache functions, under both the `ndarray_cache` (≤ v0.21) and the
/// `tensor_cache` (v0.22+) names. `<ns>.load` maps the shards as TVM's loader does: its
/// callers take on [`load`]'s file-stability contract.
pub(crate) fn register(r: &mut Registrar) {
    for ns in ["vm.builtin.ndarray_cache", "vm.builtin.tensor_cache"] {
        r.add(&format!("{ns}.load"), |a, rv| {
            a.expect_len(3, "ndarray_cache.load(dir, device_type, device_id)")?;
            let dev = DLDevice {
                device_type: a.i64(1)? as i32,
                device_id: a.i64(2)? as i32,
            };
            let dir = crate::packed_func::confine::resolve_str(
                &string_arg(&a, 0)?,
                "ndarray_cache.load",
            )?;
            // SAFETY: TVM's semantics for this global, documented above and in the module's
            // doc: the caller keeps the shard files unchanged while the arrays live.
            unsafe { load(&dir, dev)? };
            *rv = RetValue::Null;
            Ok(())
        });
        r.add(&format!("{ns}.get"), |a, rv| {
            *rv = match get(&string_arg(&a, 0)?) {
                Some(arr) => RetValue::Object(arr.into_object()),
                None => RetValue::Null,
            };
            Ok(())
        });
        r.add(&format!("{ns}.update"), |a, _rv| {
            if a.len() != 2 && a.len() != 3 {
                return Err(Error::value(
                    "ndarray_cache.update expects (name, array[, override])",
                ));
            }
            let over = a.len() == 3 && a.i64(2)? != 0;
            update(&string_arg(&a, 0)?, array_arg(&a, 1)?, over)
        });
        r.add(&format!("{ns}.remove"), |a, _rv| {
            remove(&string_arg(&a, 0)?);
            Ok(())
        });
        r.add(&format!("{ns}.clear"), |_a, _rv| {
            clear();
            Ok(())
        });
    }
    r.add("vm.builtin.param_module_from_cache", |a, rv| {
        *rv = param_module(params_by_prefix(&string_arg(&a, 0)?, a.i64(1)?)?);
        Ok(())
    });
    r.add("vm.builtin.param_module_from_cache_by_name", |a, rv| {
        *rv = param_module(params_by_name(&names_arg(&a, 0)?)?);
        Ok(())
    });
    r.add("vm.builtin.param_array_from_cache", |a, rv| {
        *rv = RetValue::Object(array_ref(params_by_prefix(&string_arg(&a, 0)?, a.i64(1)?)?));
        Ok(())
    });
    r.add("vm.builtin.param_array_from_cache_by_name", |a, rv| {
        *rv = RetValue::Object(array_ref(params_by_name(&names_arg(&a, 0)?)?));
        Ok(())
    });
    r.add(
        "vm.builtin.param_array_from_cache_by_name_unpacked",
        |a, rv| {
            let names = (0..a.len())
                .map(|i| match a.get(i)? {
                    ArgValue::Str(s) => Ok(s.to_string_lossy().into_owned()),
                    v => Err(Error::value(format!(
                        "param_array_from_cache_by_name_unpacked: argument {i} must be a string, got {}",
                        v.kind_name()
                    ))),
                })
                .collect::<Result<Vec<String>>>()?;
            *rv = RetValue::Object(array_ref(params_by_name(&names)?));
            Ok(())
        },
    );
}
