//! TVM's `cuda` device modules: the code (PTX, cubin or fatbin) with its function-info map,
//! loaded into a device on first use there, and kernels launched on the thread's current
//! device and stream with grid and block sizes taken from the trailing launch arguments.
//!
//! Blob entry (`runtime.module.loadbinary_cuda`): the format string, the function-info map
//! (see [`crate::module::function_info`]), then the code as a byte string. Files
//! (`runtime.module.loadfile_cubin`, `loadfile_ptx`): the code, with `NAME.tvm_meta.json`
//! next to it.

use super::super::kernel_args::ArgConv;
use super::{check_drv, current_device, current_stream, driver, MAX_DEVICES};
use crate::module::blob::{with_lent_reader, BlobReader};
use crate::module::function_info::{
    self, map_from_json, map_to_json, meta_file_path, FunctionInfoMap, LaunchParamConfig,
};
use crate::module::{property, Module, ModuleNode};
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry::Registrar;
use crate::packed_func::types::{type_code as tc, DLTensor, TVMValue};
use crate::packed_func::value::{Args, RetValue};
use cudarc::driver::sys;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Name of the function that resets the global barrier state.
const PREPARE_GLOBAL_BARRIER: &str = "__tvm_prepare_global_barrier";
/// Name of the global barrier state variable in the device code.
const GLOBAL_BARRIER_STATE: &str = "__tvm_global_barrier_state";
/// The name of a module's entry function (device modules have none).
const MODULE_MAIN: &str = "__tvm_main__";
/// Dynamic shared memory from this size up needs an explicit opt-in per function.
const DYN_SHMEM_OPT_IN: usize = 48 << 10;

/// The code and metadata of a module, shared by the module and the functions it hands out.
struct Inner {
    /// The code followed by a NUL (PTX is loaded as a C string).
    image: Vec<u8>,
    fmt: String,
    fmap: FunctionInfoMap,
    /// Per-device loaded module handles (0: not loaded yet).
    loaded: Mutex<Vec<usize>>,
}

impl Inner {
    fn code(&self) -> &[u8] {
        &self.image[..self.image.len() - 1]
    }

    /// What the reference's `GetSource("")` gives for a loaded module: the code if it is PTX.
    fn source_for_errors(&self) -> String {
        if self.fmt == "ptx" {
            String::from_utf8_lossy(self.code()).into_owned()
        } else {
            String::new()
        }
    }

    /// The module loaded on `device_id` (whose context is current), loading it on first use.
    fn module_on(&self, device_id: i32) -> Result<sys::CUmodule> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut loaded[device_id as usize];
        if *slot == 0 {
            let mut m: sys::CUmodule = std::ptr::null_mut();
            check_drv(
                // SAFETY: the image is NUL-terminated and lives as long as this module object.
                unsafe { sys::cuModuleLoadData(&mut m, self.image.as_ptr() as *const c_void) },
                "cuModuleLoadData(&(module_[device_id]), data_.c_str())",
            )?;
            *slot = m as usize;
        }
        Ok(*slot as sys::CUmodule)
    }

    fn get_func(&self, device_id: i32, name: &str) -> Result<sys::CUfunction> {
        let m = self.module_on(device_id)?;
        let c = CString::new(name).map_err(|_| Error::value("kernel name contains NUL"))?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: a loaded module and a NUL-terminated name.
        let r = unsafe { sys::cuModuleGetFunction(&mut f, m, c.as_ptr()) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::tvm_fmt(format_args!(
                "CUDAError: cuModuleGetFunction {name} failed with error: {}",
                super::error_name(r)
            )));
        }
        Ok(f)
    }

    fn get_global(&self, device_id: i32, name: &str, expect: usize) -> Result<sys::CUdeviceptr> {
        let m = self.module_on(device_id)?;
        let c = CString::new(name).map_err(|_| Error::value("global name contains NUL"))?;
        let (mut p, mut n): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: a loaded module, out pointers valid.
        let r = unsafe { sys::cuModuleGetGlobal_v2(&mut p, &mut n, m, c.as_ptr()) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::tvm_fmt(format_args!(
                "CUDAError: cuModuleGetGlobal {name} failed with error: {}",
                super::error_name(r)
            )));
        }
        if n != expect {
            return Err(Error::internal_fmt(format_args!(
                "Check failed: nbytes == expect_nbytes ({n} vs. {expect})"
            )));
        }
        Ok(p)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let loaded = self.loaded.get_mut().unwrap_or_else(|e| e.into_inner());
        if loaded.iter().all(|&m| m == 0) {
            return;
        }
        let Ok(d) = driver() else { return };
        let mut saved: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: out pointer valid.
        unsafe { sys::cuCtxGetCurrent(&mut saved) };
        for (i, &m) in loaded.iter().enumerate() {
            if m != 0 && d.bind(i as i32).is_ok() {
                // SAFETY: a module this object loaded in device i's context, unloaded once.
                unsafe { sys::cuModuleUnload(m as sys::CUmodule) };
            }
        }
        // SAFETY: restores whatever context was current (possibly none).
        unsafe { sys::cuCtxSetCurrent(saved) };
    }
}

/// A `cuda` module.
pub struct CudaModule {
    inner: Arc<Inner>,
}

impl CudaModule {
    /// A module over `code` in format `fmt` (`ptx`, `cubin`, `fatbin`) with its kernels.
    pub fn new(code: &[u8], fmt: &str, fmap: FunctionInfoMap) -> CudaModule {
        let mut image = Vec::with_capacity(code.len() + 1);
        image.extend_from_slice(code);
        image.push(0);
        CudaModule {
            inner: Arc::new(Inner {
                image,
                fmt: fmt.to_string(),
                fmap,
                loaded: Mutex::new(vec![0; MAX_DEVICES]),
            }),
        }
    }

    /// Reads a blob entry (format, function-info map, code).
    pub fn read(r: &mut BlobReader<'_>) -> Result<CudaModule> {
        let fmt = r.read_string("the cuda module format")?;
        let fmap = function_info::read_map(r)?;
        let code = r.read_blob("the cuda module code")?;
        Ok(CudaModule::new(code, &fmt, fmap))
    }

    /// Loads a kernel file and the `.tvm_meta.json` next to it; an empty `format` is taken
    /// from the extension.
    pub fn load_file(path: &str, format: &str) -> Result<CudaModule> {
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
            .map_err(|e| Error::value_fmt(format_args!("cannot read CUDA module {path}: {e}")))?;
        let meta = meta_file_path(path);
        let text = std::fs::read_to_string(&meta)
            .map_err(|e| Error::value_fmt(format_args!("Cannot open file {meta}: {e}")))?;
        let fmap = map_from_json(&text, &meta)?;
        Ok(CudaModule::new(&code, &fmt, fmap))
    }

    /// The code format.
    pub fn format(&self) -> &str {
        &self.inner.fmt
    }

    /// The kernels' metadata.
    pub fn function_infos(&self) -> &FunctionInfoMap {
        &self.inner.fmap
    }
}

/// One kernel of a module, as a callable.
struct Kernel {
    inner: Arc<Inner>,
    name: String,
    convs: Vec<ArgConv>,
    launch: LaunchParamConfig,
    fcache: [AtomicUsize; MAX_DEVICES],
}

/// Packed arguments for one launch: a value per argument and the pointers to them.
struct Packed<const N: usize> {
    slots: [u64; N],
    ptrs: [*mut c_void; N],
}

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
            convs,
            launch,
            fcache: std::array::from_fn(|_| AtomicUsize::new(0)),
            inner,
        })
    }

    /// The value one argument is passed as (8 bytes; narrower types in the low bytes).
    fn convert(&self, i: usize, v: TVMValue, code: i32) -> Result<u64> {
        let bad = || {
            Error::type_error_fmt(format_args!(
                "{}: argument {i} expects {} but got {}",
                self.name,
                self.convs[i].expects("a pointer"),
                tc::name(code)
            ))
        };
        Ok(match self.convs[i] {
            ArgConv::Handle => match code {
                // SAFETY: the code says the value is a handle.
                tc::OPAQUE_HANDLE => (unsafe { v.v_handle }) as u64,
                tc::NULLPTR => 0,
                tc::DLTENSOR_HANDLE | tc::NDARRAY_HANDLE => {
                    // SAFETY: the code says the value is a tensor handle.
                    let t = (unsafe { v.v_handle }) as *const DLTensor;
                    if t.is_null() {
                        0
                    } else {
                        // SAFETY: a tensor handle points to a live DLTensor.
                        let t = unsafe { &*t };
                        (t.data as u64).wrapping_add(t.byte_offset)
                    }
                }
                _ => return Err(bad()),
            },
            conv => conv.scalar(v, code).ok_or_else(bad)?,
        })
    }

    fn call(&self, args: Args<'_>) -> Result<()> {
        let n = self.convs.len();
        let need = n + self.launch.num_launch_args();
        if args.len() < need {
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
        if n <= 8 {
            self.launch_with::<8>(args)
        } else if n <= 32 {
            self.launch_with::<32>(args)
        } else {
            self.launch_with::<256>(args)
        }
    }

    fn launch_with<const N: usize>(&self, args: Args<'_>) -> Result<()> {
        let n = self.convs.len();
        if n > N {
            return Err(Error::value_fmt(format_args!(
                "{}: too many kernel arguments ({n})",
                self.name
            )));
        }
        let mut p = Packed::<N> {
            slots: [0; N],
            ptrs: [std::ptr::null_mut(); N],
        };
        for i in 0..n {
            p.slots[i] = self.convert(i, args.values()[i], args.codes()[i])?;
        }
        for i in 0..n {
            p.ptrs[i] = &mut p.slots[i] as *mut u64 as *mut c_void;
        }
        let dev = current_device();
        let d = super::api::driver_for(crate::packed_func::types::DLDevice::new(
            crate::packed_func::types::DL_CUDA,
            dev,
        ))?;
        d.bind(dev)?;
        // SAFETY: the launch positions hold integers (checked in `call`).
        let wl = unsafe { self.launch.extract(args.values()) };
        let f = match self.fcache[dev as usize].load(Ordering::Acquire) {
            0 => {
                let f = self.inner.get_func(dev, &self.name)?;
                if wl.dyn_shmem_size >= DYN_SHMEM_OPT_IN {
                    // SAFETY: a live function handle.
                    let r = unsafe {
                        sys::cuFuncSetAttribute(
                            f,
                            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                            wl.dyn_shmem_size as i32,
                        )
                    };
                    if r != sys::CUresult::CUDA_SUCCESS {
                        return Err(Error::tvm_fmt(format_args!(
                            "Failed to set the allowed dynamic shared memory size to {}",
                            wl.dyn_shmem_size
                        )));
                    }
                }
                self.fcache[dev as usize].store(f as usize, Ordering::Release);
                f
            }
            f => f as sys::CUfunction,
        };
        let dim = |x: usize| x.min(u32::MAX as usize) as u32;
        // SAFETY: a function of the current context, one pointer per kernel parameter, each
        // to an 8-byte slot holding the value in the parameter's width.
        let r = unsafe {
            sys::cuLaunchKernel(
                f,
                dim(wl.grid_dim(0)),
                dim(wl.grid_dim(1)),
                dim(wl.grid_dim(2)),
                dim(wl.block_dim(0)),
                dim(wl.block_dim(1)),
                dim(wl.block_dim(2)),
                dim(wl.dyn_shmem_size),
                current_stream(),
                p.ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        if r != sys::CUresult::CUDA_SUCCESS && r != sys::CUresult::CUDA_ERROR_DEINITIALIZED {
            let mut msg = format!(
                "CUDALaunch Error: {}\n grid=({},{},{}),  block=({},{},{})\n",
                super::error_name(r),
                wl.grid_dim(0),
                wl.grid_dim(1),
                wl.grid_dim(2),
                wl.block_dim(0),
                wl.block_dim(1),
                wl.block_dim(2)
            );
            let src = self.inner.source_for_errors();
            if !src.is_empty() {
                msg.push_str(&format!(
                    "// func_name={}\n// CUDA Source\n// -----------\n{src}",
                    self.name
                ));
            }
            return Err(Error::tvm(msg));
        }
        Ok(())
    }
}

impl ModuleNode for CudaModule {
    fn type_key(&self) -> &str {
        "cuda"
    }

    fn get_function(&self, name: &str, _this: Option<&ObjectRef>) -> Result<Option<Function>> {
        if name == MODULE_MAIN {
            return Err(Error::internal(
                "Check failed: name != symbol::tvm_module_main: Device function do not have main",
            ));
        }
        let inner = self.inner.clone();
        if name == PREPARE_GLOBAL_BARRIER {
            let cache: Arc<[AtomicUsize; MAX_DEVICES]> =
                Arc::new(std::array::from_fn(|_| AtomicUsize::new(0)));
            return Ok(Some(Function::from_rust(move |_a, _rv| {
                let d = driver()?;
                let dev = current_device();
                d.bind(dev)?;
                let mut p = cache[dev as usize].load(Ordering::Acquire);
                if p == 0 {
                    p = inner.get_global(dev, GLOBAL_BARRIER_STATE, 4)? as usize;
                    cache[dev as usize].store(p, Ordering::Release);
                }
                // SAFETY: a 4-byte device global of this module in the current context.
                check_drv(
                    unsafe { sys::cuMemsetD32_v2(p as sys::CUdeviceptr, 0, 1) },
                    "cuMemsetD32(pcache_[device_id], 0, 1)",
                )
            })));
        }
        if !self.inner.fmap.contains_key(name) {
            return Ok(None);
        }
        let k = Arc::new(Kernel::new(inner, name)?);
        Ok(Some(Function::from_rust(move |a, _rv: &mut RetValue| {
            k.call(a)
        })))
    }

    fn property_mask(&self) -> i32 {
        property::BINARY_SERIALIZABLE | property::RUNNABLE
    }

    fn get_source(&self, format: &str) -> Result<String> {
        if format == self.inner.fmt || self.inner.fmt == "ptx" {
            Ok(String::from_utf8_lossy(self.inner.code()).into_owned())
        } else {
            Ok(String::new())
        }
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
        std::fs::write(path, self.inner.code())
            .map_err(|e| Error::value_fmt(format_args!("cannot write {path}: {e}")))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        function_info::write_string(&mut out, &self.inner.fmt);
        function_info::write_map(&mut out, &self.inner.fmap);
        function_info::write_bytes(&mut out, self.inner.code());
        Ok(out)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn implements_function(&self, name: &str) -> bool {
        name == PREPARE_GLOBAL_BARRIER || self.inner.fmap.contains_key(name)
    }
}

/// Registers `runtime.module.loadbinary_cuda`, `loadfile_cubin` and `loadfile_ptx`.
pub fn register(b: &mut Registrar) {
    b.add("runtime.module.loadbinary_cuda", |a, rv| {
        let m = with_lent_reader(
            a.handle(0)?,
            "runtime.module.loadbinary_cuda",
            CudaModule::read,
        )?;
        *rv = Module::new(Box::new(m)).into_object().into();
        Ok(())
    });
    for name in [
        "runtime.module.loadfile_cubin",
        "runtime.module.loadfile_ptx",
    ] {
        b.add(name, |a, rv| {
            let path = crate::packed_func::confine::resolve_str(a.str(0)?, "loadfile_cubin/ptx")?;
            let fmt = if a.len() > 1 { a.str(1)? } else { "" };
            *rv = Module::new(Box::new(CudaModule::load_file(&path, fmt)?))
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

    fn sample() -> CudaModule {
        let mut m = FunctionInfoMap::new();
        m.insert(
            "k".into(),
            FunctionInfo {
                name: "k".into(),
                arg_types: vec![DLDataType::new(3, 64, 1), DLDataType::new(2, 32, 1)],
                launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
            },
        );
        m.insert(
            "vec".into(),
            FunctionInfo {
                name: "vec".into(),
                arg_types: vec![DLDataType::new(2, 32, 4)],
                launch_param_tags: vec![],
            },
        );
        CudaModule::new(b".version 7.0\n", "ptx", m)
    }

    #[test]
    fn binary_round_trip() {
        let m = sample();
        let b = m.save_to_binary().unwrap();
        let mut r = BlobReader::new(&b, "t");
        let m2 = CudaModule::read(&mut r).unwrap();
        assert_eq!(r.remaining(), 0);
        assert_eq!(m2.format(), "ptx");
        assert_eq!(m2.function_infos(), m.function_infos());
        assert_eq!(m2.get_source("").unwrap(), ".version 7.0\n");
        for cut in 0..b.len() {
            let mut r = BlobReader::new(&b[..cut], "t");
            assert!(CudaModule::read(&mut r).is_err());
        }
    }

    #[test]
    fn lookup_and_argument_errors() {
        let m = sample();
        assert!(m.get_function("nosuch", None).unwrap().is_none());
        assert!(m.implements_function("k"));
        let e = m.get_function(MODULE_MAIN, None).unwrap_err();
        assert!(e.message.contains("do not have main"));
        let e = m.get_function("vec", None).unwrap_err();
        assert!(e.message.contains("vector type"), "{}", e.message);
        let f = m.get_function("k", None).unwrap().unwrap();
        // Too few arguments: checked before the driver is needed.
        let e = f.call(&[crate::packed_func::ArgValue::Int(1)]).unwrap_err();
        assert!(e.message.contains("expected 4 arguments"), "{}", e.message);
        let e = f
            .call(&[
                crate::packed_func::ArgValue::Handle(crate::packed_func::RawHandle::null()),
                crate::packed_func::ArgValue::Float(1.0),
                crate::packed_func::ArgValue::Float(1.0),
                crate::packed_func::ArgValue::Int(1),
            ])
            .unwrap_err();
        assert!(e.message.contains("launch parameter 0"), "{}", e.message);
    }

    #[test]
    fn packing() {
        let m = sample();
        let k = Kernel::new(m.inner.clone(), "k").unwrap();
        let v = k
            .convert(1, TVMValue { v_float64: 1.5 }, tc::FLOAT)
            .unwrap();
        assert_eq!(v as u32, 1.5f32.to_bits());
        let v = k
            .convert(
                0,
                TVMValue {
                    v_handle: 0x1000 as *mut c_void,
                },
                tc::OPAQUE_HANDLE,
            )
            .unwrap();
        assert_eq!(v, 0x1000);
        let mut t = DLTensor {
            data: 0x2000 as *mut c_void,
            device: crate::packed_func::types::DLDevice::new(2, 0),
            ndim: 0,
            dtype: DLDataType::new(2, 32, 1),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 16,
        };
        let v = k
            .convert(
                0,
                TVMValue {
                    v_handle: &mut t as *mut DLTensor as *mut c_void,
                },
                tc::DLTENSOR_HANDLE,
            )
            .unwrap();
        assert_eq!(v, 0x2010);
        assert!(k.convert(0, TVMValue { v_int64: 1 }, tc::INT).is_err());
        assert_eq!(
            ArgConv::of(DLDataType::new(0, 32, 1)).unwrap(),
            ArgConv::I32
        );
        assert!(ArgConv::of(DLDataType::new(2, 16, 1))
            .unwrap_err()
            .message
            .contains("float16"));
    }

    #[test]
    fn no_driver_call_errors_clearly() {
        if super::super::driver_available() {
            return;
        }
        let m = sample();
        let f = m.get_function("k", None).unwrap().unwrap();
        let e = f
            .call(&[
                crate::packed_func::ArgValue::Handle(crate::packed_func::RawHandle::null()),
                crate::packed_func::ArgValue::Float(1.0),
                crate::packed_func::ArgValue::Int(1),
                crate::packed_func::ArgValue::Int(1),
            ])
            .unwrap_err();
        assert!(e.message.contains("CUDA driver"), "{}", e.message);
    }
}
