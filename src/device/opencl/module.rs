//! TVM's `opencl` device modules: OpenCL C source with its function-info map. The source is
//! split at the `// Function: <name>` lines the compiler writes into one self-contained
//! program per kernel, built for a device the first time the kernel runs there (a build that
//! fails reports the driver's build log). Each callable keeps one `cl_kernel` per device, so
//! a launch is: set the arguments, enqueue on the thread's current queue of its current
//! device. Launch dimensions come from the thread-axis tags (global = grid × block, local =
//! block).
//!
//! Blob entry (`runtime.module.loadbinary_opencl`): the format string (`cl`), the
//! function-info map (see [`crate::module::function_info`]), then the source as a byte
//! string. Files (`runtime.module.loadfile_cl`, `loadfile_clbin`): the source, with
//! `NAME.tvm_meta.json` next to it.

use super::super::kernel_args::ArgConv;
use super::api::{buffer_of, platforms_for};
use super::ffi::{self, cl_kernel, cl_program};
use super::{check, created, current_device, ok, queue_for};
use crate::module::blob::{with_lent_reader, BlobReader};
use crate::module::function_info::{
    self, map_from_json, map_to_json, meta_file_path, FunctionInfoMap, LaunchParamConfig,
};
use crate::module::{property, Module, ModuleNode};
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry::Registrar;
use crate::packed_func::types::{type_code as tc, DLDevice, DLTensor, TVMValue, DL_OPENCL};
use crate::packed_func::value::{Args, RetValue};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

/// The line that starts each kernel in the source.
const DELIMITER: &str = "// Function: ";
/// The name of a module's entry function (device modules have none).
const MODULE_MAIN: &str = "__tvm_main__";

/// Splits a source at its `// Function: <name>` lines: name → that kernel's source (up to the
/// next delimiter). Text before the first delimiter belongs to no kernel.
pub fn split_kernels(source: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut rest = match source.find(DELIMITER) {
        Some(i) => &source[i..],
        None => return out,
    };
    while let Some(body) = rest.strip_prefix(DELIMITER) {
        let (name, after) = match body.find('\n') {
            Some(i) => (&body[..i], &body[i + 1..]),
            None => (body, ""),
        };
        let end = after.find(DELIMITER).unwrap_or(after.len());
        out.insert(name.to_string(), after[..end].to_string());
        rest = &after[end..];
    }
    out
}

/// The source and metadata of a module, shared by the module and its callables.
struct Inner {
    fmt: String,
    source: String,
    fmap: FunctionInfoMap,
    kernels: HashMap<String, String>,
    /// Built programs per (kernel, device id).
    programs: Mutex<HashMap<(String, i32), usize>>,
}

impl Inner {
    /// The program of kernel `name` on device `id`, built on first use.
    fn program(&self, name: &str, id: i32) -> Result<cl_program> {
        let mut progs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&p) = progs.get(&(name.to_string(), id)) {
            return Ok(p as cl_program);
        }
        let dev = DLDevice::new(DL_OPENCL, id);
        let plat = platforms_for(dev)?;
        let d = plat.device(id)?;
        let src = self.kernels.get(name).ok_or_else(|| {
            Error::value_fmt(format_args!(
                "OpenCL module: no source for kernel {name} (the source has no \
                 '{DELIMITER}{name}' line)"
            ))
        })?;
        let cl = plat.cl;
        let mut status = ffi::CL_INVALID_VALUE;
        let (text, len) = (src.as_ptr() as *const std::ffi::c_char, src.len());
        // SAFETY: a live context and one source string given with its length (no NUL needed).
        let prog = unsafe {
            (cl.clCreateProgramWithSource)(plat.contexts[d.context], 1, &text, &len, &mut status)
        };
        let prog = ok(created(prog, status), "clCreateProgramWithSource")?;
        // SAFETY: the program just created, one of its context's devices, empty options, no
        // callback.
        let code = unsafe {
            (cl.clBuildProgram)(prog, 1, &d.id, c"".as_ptr(), None, std::ptr::null_mut())
        };
        if code != ffi::CL_SUCCESS {
            // SAFETY: clGetProgramBuildInfo of the program and device just built, with its
            // size/value/size_ret triple as `info_bytes` passes it.
            let log = super::info_bytes(&mut |n, v, r| unsafe {
                (cl.clGetProgramBuildInfo)(prog, d.id, ffi::CL_PROGRAM_BUILD_LOG, n, v, r)
            })
            .map(|b| super::text(&b))
            .unwrap_or_default();
            // SAFETY: the program was created above and is released once.
            let _ = unsafe { (cl.clReleaseProgram)(prog) };
            return Err(Error::tvm_fmt(format_args!(
                "OpenCL build error for kernel {name} on opencl({id}) ({}): {} ({code})\n{log}",
                d.name,
                super::error_name(code)
            )));
        }
        progs.insert((name.to_string(), id), prog as usize);
        Ok(prog)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let progs = self.programs.get_mut().unwrap_or_else(|e| e.into_inner());
        // Programs exist only once the library is loaded.
        let Some(cl) = super::loaded() else { return };
        for &p in progs.values() {
            // SAFETY: a program this module built, released once.
            let _ = unsafe { (cl.clReleaseProgram)(p as cl_program) };
        }
    }
}

/// An `opencl` module.
pub struct OpenclModule {
    inner: Arc<Inner>,
}

impl OpenclModule {
    /// A module over `source` in format `fmt` with its kernels. Only the `cl` format (OpenCL C
    /// source) can be run; the source must have one `// Function:` piece per kernel.
    pub fn new(source: &[u8], fmt: &str, fmap: FunctionInfoMap) -> Result<OpenclModule> {
        let source = String::from_utf8_lossy(source).into_owned();
        if fmt != "cl" {
            return Err(Error::value_fmt(format_args!(
                "OpenCL module: format '{fmt}' is not supported (only OpenCL C source, 'cl')"
            )));
        }
        let kernels = split_kernels(&source);
        if kernels.is_empty() {
            return Err(Error::value(
                "OpenCL module: the source has no kernel delimiter ('// Function: <name>' \
                 lines, which TVM's code generator writes)",
            ));
        }
        if kernels.len() != fmap.len() {
            return Err(Error::value_fmt(format_args!(
                "OpenCL module: the source has {} kernel(s) but the function table {}",
                kernels.len(),
                fmap.len()
            )));
        }
        if let Some(k) = fmap.keys().find(|k| !kernels.contains_key(*k)) {
            return Err(Error::value_fmt(format_args!(
                "OpenCL module: kernel {k} of the function table has no source"
            )));
        }
        Ok(OpenclModule {
            inner: Arc::new(Inner {
                fmt: fmt.to_string(),
                source,
                fmap,
                kernels,
                programs: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Reads a blob entry (format, function-info map, source).
    pub fn read(r: &mut BlobReader<'_>) -> Result<OpenclModule> {
        let fmt = r.read_string("the opencl module format")?;
        let fmap = function_info::read_map(r)?;
        let code = r.read_blob("the opencl module source")?;
        OpenclModule::new(code, &fmt, fmap)
    }

    /// Loads a source file and the `.tvm_meta.json` next to it; an empty `format` is taken
    /// from the extension.
    pub fn load_file(path: &str, format: &str) -> Result<OpenclModule> {
        let fmt = if format.is_empty() {
            std::path::Path::new(path)
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_string()
        } else {
            format.to_string()
        };
        let code = std::fs::read(path)
            .map_err(|e| Error::value_fmt(format_args!("cannot read OpenCL module {path}: {e}")))?;
        let meta = meta_file_path(path);
        let text = std::fs::read_to_string(&meta)
            .map_err(|e| Error::value_fmt(format_args!("Cannot open file {meta}: {e}")))?;
        let fmap = map_from_json(&text, &meta)?;
        OpenclModule::new(&code, &fmt, fmap)
    }

    /// The kernels' metadata.
    pub fn function_infos(&self) -> &FunctionInfoMap {
        &self.inner.fmap
    }

    /// The source of each kernel, as the module builds them.
    pub fn kernel_sources(&self) -> &HashMap<String, String> {
        &self.inner.kernels
    }

    /// Builds every kernel for device `id` now (instead of on first use).
    pub fn build_all(&self, id: i32) -> Result<()> {
        for name in self.inner.fmap.keys() {
            self.inner.program(name, id)?;
        }
        Ok(())
    }
}

/// One kernel of a module, as a callable: its `cl_kernel` per device, made on first use.
struct Kernel {
    inner: Arc<Inner>,
    name: String,
    cname: CString,
    convs: Vec<ArgConv>,
    launch: LaunchParamConfig,
    /// Per device id: the kernel object (0: not made yet). The lock also keeps argument
    /// setting and the enqueue together, as a `cl_kernel` holds one set of arguments.
    per_device: Vec<Mutex<usize>>,
}

// SAFETY: the raw handles inside are OpenCL objects used under the per-device locks.
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

impl Drop for Kernel {
    fn drop(&mut self) {
        // Kernels exist only once the library is loaded.
        let Some(cl) = super::loaded() else { return };
        for m in &mut self.per_device {
            let k = *m.get_mut().unwrap_or_else(|e| e.into_inner());
            if k != 0 {
                // SAFETY: a kernel this callable created, released once.
                let _ = unsafe { (cl.clReleaseKernel)(k as cl_kernel) };
            }
        }
    }
}

/// Most devices a callable keeps kernels for.
const MAX_DEVICES: usize = 32;

impl Kernel {
    fn new(inner: Arc<Inner>, name: &str) -> Result<Kernel> {
        let info = &inner.fmap[name];
        let convs = info
            .arg_types
            .iter()
            .map(|&t| ArgConv::of(t))
            .collect::<Result<Vec<_>>>()?;
        let launch = LaunchParamConfig::new(convs.len(), &info.launch_param_tags)?;
        Ok(Kernel {
            name: name.to_string(),
            cname: CString::new(name).map_err(|_| Error::value("kernel name contains NUL"))?,
            convs,
            launch,
            per_device: (0..MAX_DEVICES).map(|_| Mutex::new(0)).collect(),
            inner,
        })
    }

    /// The value one argument is passed as (in the low bytes of 8).
    fn convert(&self, i: usize, v: TVMValue, code: i32) -> Result<u64> {
        let bad = || {
            Error::type_error_fmt(format_args!(
                "{}: argument {i} expects {} but got {}",
                self.name,
                self.convs[i].expects("an OpenCL buffer"),
                tc::name(code)
            ))
        };
        let mem = |p: *const c_void| -> Result<u64> {
            // SAFETY: handles passed to OpenCL kernels are this backend's buffers (checked).
            let b = unsafe { buffer_of(p) }.map_err(|e| {
                Error::type_error_fmt(format_args!("{}: argument {i}: {}", self.name, e.message))
            })?;
            Ok(b.mem as u64)
        };
        Ok(match self.convs[i] {
            ArgConv::Handle => match code {
                // SAFETY: the code says the value is a handle.
                tc::OPAQUE_HANDLE => mem(unsafe { v.v_handle })?,
                tc::NULLPTR => 0,
                tc::DLTENSOR_HANDLE | tc::NDARRAY_HANDLE => {
                    // SAFETY: the code says the value is a tensor handle.
                    let t = (unsafe { v.v_handle }) as *const DLTensor;
                    if t.is_null() {
                        return Err(bad());
                    }
                    // SAFETY: a tensor handle points to a live DLTensor.
                    let t = unsafe { &*t };
                    if t.device.device_type != DL_OPENCL {
                        return Err(Error::type_error_fmt(format_args!(
                            "{}: argument {i} is a tensor on {}, not on an OpenCL device",
                            self.name,
                            crate::device::describe(t.device)
                        )));
                    }
                    if t.byte_offset != 0 {
                        return Err(Error::value_fmt(format_args!(
                            "{}: argument {i}: a tensor with a byte offset ({}) cannot be \
                             passed to an OpenCL kernel",
                            self.name, t.byte_offset
                        )));
                    }
                    mem(t.data)?
                }
                _ => return Err(bad()),
            },
            conv => conv.scalar(v, code).ok_or_else(bad)?,
        })
    }

    fn call(&self, args: Args<'_>) -> Result<()> {
        let n = self.convs.len();
        let need = n + self.launch.num_launch_args();
        if args.len() != need {
            return Err(Error::value_fmt(format_args!(
                "{}: expected {need} arguments ({n} kernel arguments and {} launch parameters) \
                 but got {}",
                self.name,
                self.launch.num_launch_args(),
                args.len()
            )));
        }
        for i in n..need {
            if args.codes()[i] != tc::INT && args.codes()[i] != tc::BOOL {
                return Err(Error::type_error_fmt(format_args!(
                    "{}: launch parameter {} must be an integer but got {}",
                    self.name,
                    i - n,
                    tc::name(args.codes()[i])
                )));
            }
        }
        let id = current_device();
        let dev = DLDevice::new(DL_OPENCL, id);
        let p = platforms_for(dev)?;
        p.device(id)?;
        let slot = self.per_device.get(id as usize).ok_or_else(|| {
            Error::value_fmt(format_args!("OpenCL: device id {id} is out of range"))
        })?;
        let queue = queue_for(p, id)?;
        // SAFETY: the launch positions hold integers (checked above).
        let wl = unsafe { self.launch.extract(args.values()) };
        let work_dim = self.launch.work_dim();
        let mut global = [1usize; 3];
        let mut local = [1usize; 3];
        for d in 0..work_dim {
            local[d] = wl.block_dim(d);
            global[d] = wl.grid_dim(d).checked_mul(local[d]).ok_or_else(|| {
                Error::value_fmt(format_args!("{}: launch size overflows", self.name))
            })?;
        }
        let mut k = slot.lock().unwrap_or_else(|e| e.into_inner());
        if *k == 0 {
            let prog = self.inner.program(&self.name, id)?;
            let mut status = ffi::CL_INVALID_VALUE;
            // SAFETY: a built program and a NUL-terminated kernel name.
            let kernel = unsafe { (p.cl.clCreateKernel)(prog, self.cname.as_ptr(), &mut status) };
            *k = ok(created(kernel, status), "clCreateKernel")? as usize;
        }
        let kernel = *k as cl_kernel;
        for i in 0..n {
            let v = self.convert(i, args.values()[i], args.codes()[i])?;
            let size = self.convs[i].size();
            let bytes = v.to_ne_bytes();
            // Narrow values sit in the low bytes (the first ones on little-endian hosts).
            let ptr = if cfg!(target_endian = "big") {
                bytes[8 - size..].as_ptr()
            } else {
                bytes.as_ptr()
            };
            // SAFETY: a live kernel; `ptr` points at `size` readable bytes (a cl_mem or a
            // scalar).
            let r = unsafe { (p.cl.clSetKernelArg)(kernel, i as u32, size, ptr as *const c_void) };
            if r != ffi::CL_SUCCESS {
                return Err(Error::tvm_fmt(format_args!(
                    "{}: cannot set argument {i} ({} bytes): {} ({r})",
                    self.name,
                    size,
                    super::error_name(r)
                )));
            }
        }
        // SAFETY: a live kernel of the queue's context, `work_dim` (1 to 3) entries in each size
        // array, no events.
        let r = unsafe {
            (p.cl.clEnqueueNDRangeKernel)(
                queue,
                kernel,
                work_dim as u32,
                std::ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        drop(k);
        check(r, "clEnqueueNDRangeKernel").map_err(|e| {
            Error::tvm_fmt(format_args!(
                "{}: launch of {} with global {:?} local {:?} failed: {}",
                self.name,
                self.name,
                &global[..work_dim],
                &local[..work_dim],
                e.message
            ))
        })
    }
}

impl ModuleNode for OpenclModule {
    fn type_key(&self) -> &str {
        "opencl"
    }

    fn get_function(&self, name: &str, _this: Option<&ObjectRef>) -> Result<Option<Function>> {
        if name == MODULE_MAIN {
            return Err(Error::internal(
                "Check failed: name != symbol::tvm_module_main: Device function do not have main",
            ));
        }
        if !self.inner.fmap.contains_key(name) {
            return Ok(None);
        }
        let k = Arc::new(Kernel::new(self.inner.clone(), name)?);
        Ok(Some(Function::from_rust(move |a, _rv: &mut RetValue| {
            k.call(a)
        })))
    }

    fn property_mask(&self) -> i32 {
        property::BINARY_SERIALIZABLE | property::RUNNABLE
    }

    fn get_source(&self, _format: &str) -> Result<String> {
        Ok(self.inner.source.clone())
    }

    fn get_format(&self) -> Result<String> {
        Ok(self.inner.fmt.clone())
    }

    fn save_to_file(&self, path: &str, format: &str) -> Result<()> {
        let fmt = if format.is_empty() {
            std::path::Path::new(path)
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_string()
        } else {
            format.to_string()
        };
        if fmt != self.inner.fmt {
            return Err(Error::internal_fmt(format_args!(
                "Check failed: fmt == fmt_ ({fmt} vs. {}) : Can only save to format={}",
                self.inner.fmt, self.inner.fmt
            )));
        }
        let meta = meta_file_path(path);
        std::fs::write(&meta, map_to_json(&self.inner.fmap))
            .map_err(|e| Error::value_fmt(format_args!("cannot write {meta}: {e}")))?;
        std::fs::write(path, self.inner.source.as_bytes())
            .map_err(|e| Error::value_fmt(format_args!("cannot write {path}: {e}")))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        function_info::write_string(&mut out, &self.inner.fmt);
        function_info::write_map(&mut out, &self.inner.fmap);
        function_info::write_bytes(&mut out, self.inner.source.as_bytes());
        Ok(out)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn implements_function(&self, name: &str) -> bool {
        self.inner.fmap.contains_key(name)
    }
}

/// Registers `runtime.module.loadbinary_opencl`, `loadfile_cl` and `loadfile_clbin`.
pub fn register(b: &mut Registrar) {
    b.add("runtime.module.loadbinary_opencl", |a, rv| {
        let m = with_lent_reader(
            a.handle(0)?,
            "runtime.module.loadbinary_opencl",
            OpenclModule::read,
        )?;
        *rv = Module::new(Box::new(m)).into_object().into();
        Ok(())
    });
    for name in [
        "runtime.module.loadfile_cl",
        "runtime.module.loadfile_clbin",
    ] {
        b.add(name, |a, rv| {
            let path = crate::packed_func::confine::resolve_str(a.str(0)?, "loadfile_cl")?;
            let fmt = if a.len() > 1 { a.str(1)? } else { "" };
            *rv = Module::new(Box::new(OpenclModule::load_file(&path, fmt)?))
                .into_object()
                .into();
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::function_info::FunctionInfo;
    use crate::packed_func::types::DLDataType;

    const SRC: &str = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n\
        // Function: a_kernel\n__kernel void a_kernel(__global float* x) { x[0] = 1.0f; }\n\n\
        // Function: b_kernel\n__kernel void b_kernel(__global float* x, int n) { x[0] = n; }\n";

    fn infos() -> FunctionInfoMap {
        let mut m = FunctionInfoMap::new();
        for (n, extra) in [
            ("a_kernel", vec![]),
            ("b_kernel", vec![DLDataType::new(0, 32, 1)]),
        ] {
            let mut t = vec![DLDataType::new(3, 64, 1)];
            t.extend(extra);
            m.insert(
                n.into(),
                FunctionInfo {
                    name: String::new(),
                    arg_types: t,
                    launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
                },
            );
        }
        m
    }

    #[test]
    fn splitting() {
        let k = split_kernels(SRC);
        assert_eq!(k.len(), 2);
        assert!(k["a_kernel"].starts_with("__kernel void a_kernel"));
        assert!(k["a_kernel"].trim_end().ends_with('}'));
        assert!(!k["a_kernel"].contains("b_kernel"));
        assert!(k["b_kernel"].contains("x[0] = n"));
        assert!(split_kernels("no delimiter").is_empty());
        assert!(split_kernels("").is_empty());
    }

    #[test]
    fn binary_round_trip_and_checks() {
        let m = OpenclModule::new(SRC.as_bytes(), "cl", infos()).unwrap();
        let b = m.save_to_binary().unwrap();
        let mut r = BlobReader::new(&b, "t");
        let m2 = OpenclModule::read(&mut r).unwrap();
        assert_eq!(r.remaining(), 0);
        assert_eq!(m2.function_infos(), m.function_infos());
        assert_eq!(m2.get_source("").unwrap(), SRC);
        for cut in 0..b.len() {
            let mut r = BlobReader::new(&b[..cut], "t");
            assert!(OpenclModule::read(&mut r).is_err());
        }
        let e = OpenclModule::new(b"__kernel void f() {}", "cl", infos())
            .err()
            .unwrap();
        assert!(e.message.contains("delimiter"), "{}", e.message);
        let mut one = infos();
        one.remove("b_kernel");
        let e = OpenclModule::new(SRC.as_bytes(), "cl", one).err().unwrap();
        assert!(e.message.contains("2 kernel(s)"), "{}", e.message);
        let e = OpenclModule::new(SRC.as_bytes(), "xclbin", infos())
            .err()
            .unwrap();
        assert!(e.message.contains("xclbin"), "{}", e.message);
    }

    #[test]
    fn argument_checks_before_the_driver() {
        let m = OpenclModule::new(SRC.as_bytes(), "cl", infos()).unwrap();
        assert!(m.get_function("nosuch", None).unwrap().is_none());
        assert!(m.get_function(MODULE_MAIN, None).is_err());
        let f = m.get_function("b_kernel", None).unwrap().unwrap();
        let e = f.call(&[crate::packed_func::ArgValue::Int(1)]).unwrap_err();
        assert!(e.message.contains("expected 4 arguments"), "{}", e.message);
        let k = Kernel::new(m.inner.clone(), "b_kernel").unwrap();
        assert_eq!(
            k.convert(1, TVMValue { v_int64: -2 }, tc::INT).unwrap() as u32,
            (-2i32) as u32
        );
        assert!(k
            .convert(1, TVMValue { v_float64: 1.0 }, tc::FLOAT)
            .is_err());
        assert!(k.convert(0, TVMValue { v_int64: 1 }, tc::INT).is_err());
        assert_eq!(
            k.convert(0, TVMValue { v_int64: 0 }, tc::NULLPTR).unwrap(),
            0
        );
        assert_eq!(ArgConv::of(DLDataType::new(2, 32, 1)).unwrap().size(), 4);
        assert_eq!(ArgConv::of(DLDataType::new(3, 64, 1)).unwrap().size(), 8);
        assert!(ArgConv::of(DLDataType::new(0, 8, 1)).is_err());
        assert!(ArgConv::of(DLDataType::new(2, 32, 4)).is_err());
    }
}
