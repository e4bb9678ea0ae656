//! TVM's `vulkan` modules: SPIR-V shaders with their function information, the binary format
//! carried in `__tvm_dev_mblob` (`runtime.module.loadbinary_vulkan`), the file format
//! (`runtime.module.loadfile_vulkan`, a `.vulkan` file beside a `.tvm_meta.json`), and kernel
//! launch with TVM's calling convention.
//!
//! Binary layout (little-endian, dmlc serialisation): the format string, then the function
//! map (`u64` count; per entry the key, then the function name, `u64` count of 4-byte
//! `DLDataType`s, `u64` count of launch parameter tags as strings), then the shader map
//! (`u64` count; per entry the key, a `u32` flag word and a `u64` count of SPIR-V words).
//!
//! Calling convention: buffer arguments come first, as device pointers (one storage buffer
//! each, descriptor set 0, binding = argument index); scalar arguments follow, each widened to
//! an 8-byte slot, passed as push constants (or, when the shader's flag asks for it, as a
//! uniform buffer bound after the storage buffers); then the launch parameters named by the
//! tags (`blockIdx.*` give the dispatch size; `threadIdx.*` are fixed in the shader; a trailing
//! `tir.use_dyn_shared_memory` takes one more value).

use super::instance::{self, vk_err, Device};
use super::{active_device, buffer_of};
use crate::module::blob::{with_lent_reader, BlobReader};
use crate::module::function_info::{write_string, FunctionInfo};
use crate::module::{property, Module, ModuleNode};
use crate::object::ObjectRef;
use crate::packed_func::dtype::dtype_to_string;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::types::{type_code as tc, DL_FLOAT, DL_INT, DL_OPAQUE_HANDLE, DL_UINT};
use crate::packed_func::value::{Args, RetValue};
use ash::vk;
use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

/// The magic number at the start of a `.vulkan` file.
pub const VULKAN_MODULE_MAGIC: u32 = 0x0270_0027;
/// Bit of [`Shader::flag`] telling scalars go in a uniform buffer instead of push constants.
pub const FLAG_USE_UBO: u32 = 1 << 0;
/// The launch parameter tag of dynamic shared memory.
pub const DYN_SHARED_MEMORY_TAG: &str = "tir.use_dyn_shared_memory";

/// A compiled shader: a flag word and the SPIR-V words.
#[derive(Clone, Debug, PartialEq)]
pub struct Shader {
    /// Flags ([`FLAG_USE_UBO`]).
    pub flag: u32,
    /// SPIR-V code.
    pub data: Vec<u32>,
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

impl Shader {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.flag.to_le_bytes());
        put_u64(out, self.data.len() as u64);
        for w in &self.data {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    fn read(r: &mut BlobReader<'_>) -> Result<Shader> {
        let flag = r.read_u32("a shader flag")?;
        let n = r.read_u64("the shader size")?;
        if n > (r.remaining() / 4) as u64 {
            return Err(Error::value_fmt(format_args!(
                "{}: the vulkan module is truncated: a shader of {n} words",
                r.context()
            )));
        }
        let bytes = r.read_bytes(n as usize * 4, "shader code")?;
        let data = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        Ok(Shader { flag, data })
    }
}

fn read_count(r: &mut BlobReader<'_>, what: &str) -> Result<u64> {
    let n = r.read_u64(what)?;
    if n > r.remaining() as u64 {
        return Err(Error::value_fmt(format_args!(
            "{}: the vulkan module is truncated or corrupted ({what}: {n})",
            r.context()
        )));
    }
    Ok(n)
}

fn read_smap(r: &mut BlobReader<'_>) -> Result<BTreeMap<String, Shader>> {
    let n = read_count(r, "the shader count")?;
    (0..n)
        .map(|_| Ok((r.read_string("a shader name")?, Shader::read(r)?)))
        .collect()
}

/// A compute pipeline built for one function on one device.
struct Pipeline {
    device_id: i32,
    shader: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    use_ubo: bool,
}

impl Pipeline {
    fn destroy(&self, d: &Device) {
        // SAFETY: objects of this device; the caller waited for the work that used them.
        unsafe {
            d.device.destroy_pipeline(self.pipeline, None);
            d.device.destroy_pipeline_layout(self.layout, None);
            d.device
                .destroy_descriptor_set_layout(self.set_layout, None);
            d.device.destroy_shader_module(self.shader, None);
        }
    }
}

/// The module's data, shared by its kernels.
struct Inner {
    fmt: String,
    fmap: BTreeMap<String, FunctionInfo>,
    smap: BTreeMap<String, Shader>,
    pipelines: Mutex<HashMap<(i32, String), Arc<Pipeline>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let pipes = std::mem::take(self.pipelines.get_mut().unwrap_or_else(|e| e.into_inner()));
        if pipes.is_empty() || !instance::initialised() {
            return;
        }
        let mut synced = std::collections::HashSet::new();
        for p in pipes.values() {
            let Ok(d) = instance::device(p.device_id) else {
                continue;
            };
            if synced.insert(p.device_id) {
                let mut st = d.lock();
                let _ = d.flush(&mut st);
            }
            p.destroy(d);
        }
    }
}

impl Inner {
    fn pipeline(&self, device_id: i32, name: &str, num_buffers: usize) -> Result<Arc<Pipeline>> {
        let mut cache = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = cache.get(&(device_id, name.to_string())) {
            return Ok(p.clone());
        }
        let d = instance::device(device_id)?;
        let shader = self.smap.get(name).ok_or_else(|| {
            Error::value_fmt(format_args!("vulkan module: no shader for function {name}"))
        })?;
        let info = &self.fmap[name];
        let num_pods = info.arg_types.len() - num_buffers;
        let use_ubo = shader.flag & FLAG_USE_UBO != 0;
        let pc_bytes = (num_pods * 8) as u32;
        if !use_ubo && pc_bytes > d.props.max_push_constants_size {
            return Err(Error::value_fmt(format_args!(
                "the Vulkan kernel {name} passes {pc_bytes} bytes of push constants but the \
                 device allows {}; rebuild it with -max_push_constants_size={}",
                d.props.max_push_constants_size, d.props.max_push_constants_size
            )));
        }
        let dev = &d.device;
        let mut bindings: Vec<vk::DescriptorSetLayoutBinding<'_>> = (0..num_buffers)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        if use_ubo {
            bindings.push(
                vk::DescriptorSetLayoutBinding::default()
                    .binding(num_buffers as u32)
                    .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE),
            );
        }
        let entry = CString::new(name).map_err(|_| Error::value("function name contains NUL"))?;
        // SAFETY: valid create infos on a live device; on failure the objects made so far are
        // destroyed.
        unsafe {
            let shader_module = dev
                .create_shader_module(
                    &vk::ShaderModuleCreateInfo::default().code(&shader.data),
                    None,
                )
                .map_err(|e| vk_err(&format!("vkCreateShaderModule ({name})"), e))?;
            let set_layout = match dev.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                None,
            ) {
                Ok(l) => l,
                Err(e) => {
                    dev.destroy_shader_module(shader_module, None);
                    return Err(vk_err("vkCreateDescriptorSetLayout", e));
                }
            };
            let ranges = [vk::PushConstantRange {
                stage_flags: vk::ShaderStageFlags::COMPUTE,
                offset: 0,
                size: pc_bytes,
            }];
            let layouts = [set_layout];
            let mut lci = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts);
            if pc_bytes > 0 && !use_ubo {
                lci = lci.push_constant_ranges(&ranges);
            }
            let layout = match dev.create_pipeline_layout(&lci, None) {
                Ok(l) => l,
                Err(e) => {
                    dev.destroy_descriptor_set_layout(set_layout, None);
                    dev.destroy_shader_module(shader_module, None);
                    return Err(vk_err("vkCreatePipelineLayout", e));
                }
            };
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(shader_module)
                .name(&entry);
            let ci = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(layout)];
            let pipeline = match dev.create_compute_pipelines(vk::PipelineCache::null(), &ci, None)
            {
                Ok(p) => p[0],
                Err((_, e)) => {
                    dev.destroy_pipeline_layout(layout, None);
                    dev.destroy_descriptor_set_layout(set_layout, None);
                    dev.destroy_shader_module(shader_module, None);
                    return Err(vk_err(
                        &format!("vkCreateComputePipelines ({name}: entry point {name})"),
                        e,
                    ));
                }
            };
            let p = Arc::new(Pipeline {
                device_id,
                shader: shader_module,
                set_layout,
                layout,
                pipeline,
                use_ubo,
            });
            cache.insert((device_id, name.to_string()), p.clone());
            Ok(p)
        }
    }
}

/// How a scalar argument becomes its 8-byte slot.
#[derive(Copy, Clone)]
enum Conv {
    I64,
    I32,
    U32,
    F64,
    F32,
}

/// Devices whose pipeline a kernel keeps without locking.
const FAST_DEVICES: usize = 8;

/// One launchable kernel of a module.
struct Kernel {
    inner: Arc<Inner>,
    name: String,
    num_buffers: usize,
    convs: Vec<Conv>,
    /// Per launch parameter: the slot in (grid x, y, z, block x, y, z).
    launch_slots: Vec<usize>,
    dyn_shared: bool,
    pipelines: [OnceLock<Arc<Pipeline>>; FAST_DEVICES],
}

impl Kernel {
    fn new(inner: Arc<Inner>, name: &str) -> Result<Kernel> {
        let info = &inner.fmap[name];
        let num_buffers = info
            .arg_types
            .iter()
            .take_while(|t| t.code == DL_OPAQUE_HANDLE)
            .count();
        let mut convs = Vec::new();
        for t in &info.arg_types[num_buffers..] {
            if t.lanes != 1 {
                return Err(Error::value_fmt(format_args!(
                    "vulkan kernel {name}: vector argument {} is not supported",
                    dtype_to_string(*t)
                )));
            }
            convs.push(match (t.code, t.bits) {
                (DL_INT, 64) => Conv::I64,
                (DL_INT, 32) => Conv::I32,
                (DL_UINT, 32) => Conv::U32,
                (DL_FLOAT, 64) => Conv::F64,
                (DL_FLOAT, 32) => Conv::F32,
                (DL_OPAQUE_HANDLE, _) => {
                    return Err(Error::value_fmt(format_args!(
                        "vulkan kernel {name}: buffer arguments must come before scalars"
                    )))
                }
                _ => {
                    return Err(Error::value_fmt(format_args!(
                        "vulkan kernel {name}: cannot pass {} as a device function argument",
                        dtype_to_string(*t)
                    )))
                }
            });
        }
        let mut launch_slots = Vec::new();
        let mut dyn_shared = false;
        let n = info.launch_param_tags.len();
        for (i, tag) in info.launch_param_tags.iter().enumerate() {
            if tag == DYN_SHARED_MEMORY_TAG {
                if i + 1 != n {
                    return Err(Error::value_fmt(format_args!(
                        "vulkan kernel {name}: {DYN_SHARED_MEMORY_TAG} must be the last launch \
                         parameter tag"
                    )));
                }
                dyn_shared = true;
                continue;
            }
            let (rank, dim) = if let Some(d) = tag.strip_prefix("blockIdx.") {
                (0, d)
            } else if let Some(d) = tag.strip_prefix("threadIdx.") {
                (1, d)
            } else {
                return Err(Error::value_fmt(format_args!(
                    "vulkan kernel {name}: unknown launch parameter tag '{tag}'"
                )));
            };
            let dim = match dim {
                "x" => 0,
                "y" => 1,
                "z" => 2,
                _ => {
                    return Err(Error::value_fmt(format_args!(
                        "vulkan kernel {name}: unknown launch parameter tag '{tag}'"
                    )))
                }
            };
            launch_slots.push(rank * 3 + dim);
        }
        Ok(Kernel {
            name: name.to_string(),
            num_buffers,
            convs,
            launch_slots,
            dyn_shared,
            pipelines: std::array::from_fn(|_| OnceLock::new()),
            inner,
        })
    }

    fn pipeline(&self, device_id: i32) -> Result<Arc<Pipeline>> {
        let make = || self.inner.pipeline(device_id, &self.name, self.num_buffers);
        match usize::try_from(device_id) {
            Ok(i) if i < FAST_DEVICES => {
                if let Some(p) = self.pipelines[i].get() {
                    return Ok(p.clone());
                }
                let p = make()?;
                let _ = self.pipelines[i].set(p.clone());
                Ok(p)
            }
            _ => make(),
        }
    }

    fn launch(&self, args: &Args<'_>) -> Result<()> {
        let nargs = self.num_buffers + self.convs.len();
        let need = nargs + self.launch_slots.len() + self.dyn_shared as usize;
        if args.len() < need {
            return Err(Error::value_fmt(format_args!(
                "vulkan kernel {}: expects {need} arguments ({} buffers, {} scalars, {} launch \
                 parameters) but got {}",
                self.name,
                self.num_buffers,
                self.convs.len(),
                need - nargs,
                args.len()
            )));
        }
        let device_id = active_device();
        let d = instance::device(device_id)?;
        let pipe = self.pipeline(device_id)?;
        let v = args.values();
        let mut infos: [vk::DescriptorBufferInfo; 17] = Default::default();
        let mut heap_infos = Vec::new();
        let n_infos = self.num_buffers + pipe.use_ubo as usize;
        let infos: &mut [vk::DescriptorBufferInfo] = if n_infos <= infos.len() {
            &mut infos[..n_infos]
        } else {
            heap_infos.resize(n_infos, vk::DescriptorBufferInfo::default());
            &mut heap_infos
        };
        for (i, info) in infos.iter_mut().enumerate().take(self.num_buffers) {
            // SAFETY: `i < args.len()`; buffers arrive as data pointers (what TVM's host code
            // passes); a tensor handle is accepted too, for its data pointer.
            let p = unsafe {
                match args.codes()[i] {
                    tc::DLTENSOR_HANDLE | tc::NDARRAY_HANDLE if !v[i].v_handle.is_null() => {
                        (*(v[i].v_handle as *const crate::packed_func::types::DLTensor)).data
                    }
                    tc::OPAQUE_HANDLE | tc::NULLPTR => v[i].v_handle,
                    c => {
                        return Err(Error::type_error_fmt(format_args!(
                            "vulkan kernel {}: argument {i} must be a buffer (device pointer) \
                             but has type code {c}",
                            self.name
                        )))
                    }
                }
            };
            // SAFETY: compiled host code passes device pointers of this backend.
            let b = unsafe { buffer_of(p) }.map_err(|e| {
                e.context(format!("vulkan kernel {}: buffer argument {i}", self.name))
            })?;
            if b.device_id != device_id {
                return Err(Error::value_fmt(format_args!(
                    "vulkan kernel {}: buffer argument {i} lives on vulkan({}) but the kernel \
                     runs on vulkan({device_id})",
                    self.name, b.device_id
                )));
            }
            *info = vk::DescriptorBufferInfo {
                buffer: b.buffer,
                offset: 0,
                range: vk::WHOLE_SIZE,
            };
        }
        let mut slots = [0u64; 32];
        let mut heap_slots = Vec::new();
        let slots: &mut [u64] = if self.convs.len() <= slots.len() {
            &mut slots[..self.convs.len()]
        } else {
            heap_slots.resize(self.convs.len(), 0);
            &mut heap_slots
        };
        for (j, c) in self.convs.iter().enumerate() {
            let x = v[self.num_buffers + j];
            // SAFETY: scalars arrive as int64 or float64 values, as in the reference.
            slots[j] = unsafe {
                match c {
                    Conv::I64 => x.v_int64 as u64,
                    Conv::I32 => x.v_int64 as i32 as u32 as u64,
                    Conv::U32 => x.v_int64 as u32 as u64,
                    Conv::F64 => x.v_float64.to_bits(),
                    Conv::F32 => (x.v_float64 as f32).to_bits() as u64,
                }
            };
        }
        let mut work = [1u32; 6];
        for (k, &slot) in self.launch_slots.iter().enumerate() {
            // SAFETY: launch parameters are integers.
            let n = unsafe { v[nargs + k].v_int64 };
            if n > 0 {
                work[slot] = u32::try_from(n).map_err(|_| {
                    Error::value_fmt(format_args!(
                        "vulkan kernel {}: launch parameter {n} is too large",
                        self.name
                    ))
                })?;
            }
        }
        for (k, &g) in work[..3].iter().enumerate() {
            if g > d.props.max_grid_size[k] {
                return Err(Error::value_fmt(format_args!(
                    "vulkan kernel {}: grid size {g} in dimension {k} exceeds the device's {}",
                    self.name, d.props.max_grid_size[k]
                )));
            }
        }
        // SAFETY: reinterpreting initialised u64 slots as bytes.
        let pod_bytes =
            unsafe { std::slice::from_raw_parts(slots.as_ptr() as *const u8, slots.len() * 8) };

        let mut st = d.lock();
        if st.sets >= instance::SETS_PER_SUBMISSION
            || st.storage_descriptors + self.num_buffers as u32 > instance::STORAGE_PER_SUBMISSION
        {
            d.flush(&mut st)?;
        }
        if pipe.use_ubo {
            let size = pod_bytes.len().max(8) as u64;
            let (buf, off, ptr) = d.uniform_space(&mut st, size)?;
            // SAFETY: `ptr` addresses `size` reserved mapped bytes.
            unsafe { std::ptr::copy_nonoverlapping(pod_bytes.as_ptr(), ptr, pod_bytes.len()) };
            if let Some(u) = st.uniforms.as_ref() {
                d.flush_host(u.memory)?;
            }
            infos[self.num_buffers] = vk::DescriptorBufferInfo {
                buffer: buf,
                offset: off,
                range: size,
            };
        }
        let dev = &d.device;
        let reuse = !pipe.use_ubo
            && st.last_set != vk::DescriptorSet::null()
            && st.last_layout == pipe.set_layout
            && st.last_buffers.len() == n_infos
            && st
                .last_buffers
                .iter()
                .zip(infos.iter())
                .all(|(a, b)| *a == b.buffer);
        let set = if reuse {
            st.last_set
        } else {
            let layouts = [pipe.set_layout];
            // SAFETY: a live pool with room (checked above).
            let set = unsafe {
                dev.allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(st.desc_pool)
                        .set_layouts(&layouts),
                )
            }
            .map_err(|e| vk_err("vkAllocateDescriptorSets", e))?[0];
            st.sets += 1;
            st.storage_descriptors += self.num_buffers as u32;
            let mut writes = [vk::WriteDescriptorSet::default(); 17];
            let mut heap_writes = Vec::new();
            let writes: &mut [vk::WriteDescriptorSet<'_>] = if n_infos <= writes.len() {
                &mut writes[..n_infos]
            } else {
                heap_writes.resize(n_infos, vk::WriteDescriptorSet::default());
                &mut heap_writes
            };
            for (i, w) in writes.iter_mut().enumerate() {
                *w = vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(if pipe.use_ubo && i == self.num_buffers {
                        vk::DescriptorType::UNIFORM_BUFFER
                    } else {
                        vk::DescriptorType::STORAGE_BUFFER
                    })
                    .buffer_info(std::slice::from_ref(&infos[i]));
            }
            // SAFETY: handles of this device; the set is fresh and not in use.
            unsafe { dev.update_descriptor_sets(writes, &[]) };
            if !pipe.use_ubo {
                st.last_set = set;
                st.last_layout = pipe.set_layout;
                st.last_buffers.clear();
                st.last_buffers.extend(infos.iter().map(|b| b.buffer));
            }
            set
        };
        let cmd = d.begin(&mut st)?;
        // SAFETY: all handles belong to this device.
        unsafe {
            if st.bound_pipeline != pipe.pipeline {
                dev.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipe.pipeline);
                st.bound_pipeline = pipe.pipeline;
                st.bound_set = vk::DescriptorSet::null();
            }
            if st.bound_set != set {
                dev.cmd_bind_descriptor_sets(
                    cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    pipe.layout,
                    0,
                    &[set],
                    &[],
                );
                st.bound_set = set;
            }
            if !pipe.use_ubo && !pod_bytes.is_empty() {
                dev.cmd_push_constants(
                    cmd,
                    pipe.layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    pod_bytes,
                );
            }
            dev.cmd_dispatch(cmd, work[0], work[1], work[2]);
        }
        d.compute_barrier(cmd);
        st.pending += 1;
        Ok(())
    }
}

/// A `vulkan` module.
pub struct VulkanModule {
    inner: Arc<Inner>,
}

impl VulkanModule {
    /// A module over shaders and function information (every function needs a shader).
    pub fn new(
        fmap: BTreeMap<String, FunctionInfo>,
        smap: BTreeMap<String, Shader>,
    ) -> Result<VulkanModule> {
        for name in fmap.keys() {
            if !smap.contains_key(name) {
                return Err(Error::value_fmt(format_args!(
                    "vulkan module: function {name} has no shader"
                )));
            }
        }
        Ok(VulkanModule {
            inner: Arc::new(Inner {
                fmt: "vulkan".into(),
                fmap,
                smap,
                pipelines: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Reads the binary form (what `save_to_binary` writes and TVM puts in `__tvm_dev_mblob`).
    pub fn from_reader(r: &mut BlobReader<'_>) -> Result<VulkanModule> {
        let fmt = r.read_string("the vulkan module format")?;
        let n = read_count(r, "the function count")?;
        let mut fmap = BTreeMap::new();
        for _ in 0..n {
            let key = r.read_string("a function key")?;
            fmap.insert(key, FunctionInfo::read(r)?);
        }
        let smap = read_smap(r)?;
        let mut m = VulkanModule::new(fmap, smap)?;
        if let Some(i) = Arc::get_mut(&mut m.inner) {
            i.fmt = fmt;
        }
        Ok(m)
    }

    /// Loads a `.vulkan` file and its `.tvm_meta.json`.
    pub fn load_file(path: &str) -> Result<VulkanModule> {
        let data = std::fs::read(path)
            .map_err(|e| Error::value_fmt(format_args!("cannot read vulkan module {path}: {e}")))?;
        let meta_path = meta_file_path(path);
        let meta = std::fs::read_to_string(&meta_path).map_err(|e| {
            Error::value_fmt(format_args!(
                "cannot read the metadata {meta_path} of vulkan module {path}: {e}"
            ))
        })?;
        let meta = crate::packed_func::json::parse(&meta)
            .map_err(|e| Error::value_fmt(format_args!("{meta_path}: invalid JSON: {e}")))?;
        let finfo = meta
            .get("func_info")
            .and_then(|f| f.as_object())
            .ok_or_else(|| Error::value_fmt(format_args!("{meta_path}: no func_info object")))?;
        let mut fmap = BTreeMap::new();
        for (k, v) in finfo {
            fmap.insert(
                k.clone(),
                FunctionInfo::from_json(v).map_err(|e| e.context(&meta_path))?,
            );
        }
        let mut r = BlobReader::new(&data, path);
        let magic = r.read_u32("the magic number")?;
        if magic != VULKAN_MODULE_MAGIC {
            return Err(Error::value_fmt(format_args!(
                "{path} is not a vulkan module (bad magic number, expected {VULKAN_MODULE_MAGIC:#x})"
            )));
        }
        let smap = read_smap(&mut r)?;
        VulkanModule::new(fmap, smap)
    }

    /// The binary form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_string(&mut out, &self.inner.fmt);
        put_u64(&mut out, self.inner.fmap.len() as u64);
        for (k, f) in &self.inner.fmap {
            write_string(&mut out, k);
            f.write(&mut out);
        }
        write_smap(&mut out, &self.inner.smap);
        out
    }
}

fn write_smap(out: &mut Vec<u8>, smap: &BTreeMap<String, Shader>) {
    put_u64(out, smap.len() as u64);
    for (k, s) in smap {
        write_string(out, k);
        s.write(out);
    }
}

/// `name.ext` → `name.tvm_meta.json`, as the reference names metadata files.
pub fn meta_file_path(path: &str) -> String {
    let stem = match path.rfind('.') {
        Some(i) => &path[..i],
        None => path,
    };
    format!("{stem}.tvm_meta.json")
}

impl ModuleNode for VulkanModule {
    fn type_key(&self) -> &str {
        "vulkan"
    }

    fn get_function(&self, name: &str, this: Option<&ObjectRef>) -> Result<Option<Function>> {
        if !self.inner.fmap.contains_key(name) {
            return Ok(None);
        }
        let k = Kernel::new(self.inner.clone(), name)?;
        let keep = this.cloned();
        Ok(Some(Function::from_rust(
            move |args, _rv: &mut RetValue| {
                let _ = &keep;
                k.launch(&args)
            },
        )))
    }

    fn property_mask(&self) -> i32 {
        property::BINARY_SERIALIZABLE | property::RUNNABLE
    }

    fn get_format(&self) -> Result<String> {
        Ok(self.inner.fmt.clone())
    }

    fn save_to_file(&self, path: &str, _format: &str) -> Result<()> {
        use crate::packed_func::json::{object, Map};
        let mut func_info = Map::new();
        for (k, f) in &self.inner.fmap {
            func_info.insert(k.clone(), f.to_json());
        }
        let meta = object(vec![
            ("tvm_version", "0.1.0".into()),
            ("func_info", func_info.into()),
        ]);
        let meta_path = meta_file_path(path);
        std::fs::write(&meta_path, meta.to_string())
            .map_err(|e| Error::value_fmt(format_args!("cannot write {meta_path}: {e}")))?;
        let mut out = VULKAN_MODULE_MAGIC.to_le_bytes().to_vec();
        write_smap(&mut out, &self.inner.smap);
        std::fs::write(path, out)
            .map_err(|e| Error::value_fmt(format_args!("cannot write {path}: {e}")))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        Ok(self.to_bytes())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn implements_function(&self, name: &str) -> bool {
        self.inner.fmap.contains_key(name)
    }
}

/// Registers `runtime.module.loadbinary_vulkan` and `runtime.module.loadfile_vulkan`.
pub fn register(b: &mut crate::packed_func::registry::Registrar) {
    b.add("runtime.module.loadbinary_vulkan", |a, rv| {
        let m = with_lent_reader(
            a.handle(0)?,
            "runtime.module.loadbinary_vulkan",
            VulkanModule::from_reader,
        )?;
        *rv = Module::new(Box::new(m)).into_object().into();
        Ok(())
    });
    b.add("runtime.module.loadfile_vulkan", |a, rv| {
        let path =
            crate::packed_func::confine::resolve_str(a.str(0)?, "runtime.module.loadfile_vulkan")?;
        let m = VulkanModule::load_file(&path)?;
        *rv = Module::new(Box::new(m)).into_object().into();
        Ok(())
    });
}
