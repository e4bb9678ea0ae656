//! Vulkan backend benchmark: copy bandwidth host→device and device→host through the device
//! API, and the dispatch overhead of an empty kernel launched the way TVM-compiled code
//! launches it (host function in a DSO → `TVMBackendGetFuncFromEnv` → `TVMFuncCall` → our
//! vulkan module) against a raw `ash` dispatch of the same SPIR-V in the same run, on the same
//! logical device and queue (its own pipeline, descriptor set, command buffer and fence).
//!
//! Run: `VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
//!       cargo run --release --example vulkan_bench` (needs `glslangValidator` and `cc`).

#[path = "../tests/common/vulkan_kernels.rs"]
mod kernels;

use ash::vk;
use std::ffi::c_void;
use std::time::Instant;
use tvm_runtime::device::{self, vulkan};
use tvm_runtime::packed_func::types::{DLDataType, DLDevice, DL_VULKAN};
use tvm_runtime::{ArgValue, Module, NDArray};

const VK0: DLDevice = DLDevice {
    device_type: DL_VULKAN,
    device_id: 0,
};
const F32: DLDataType = DLDataType {
    code: 2,
    bits: 32,
    lanes: 1,
};

/// Median seconds per call of `f` over `reps` timed repetitions of `iters` calls each.
/// `a` as a bare `DLTensor*` argument (`kTVMDLTensorHandle`), borrowing it.
fn dl(a: &NDArray) -> ArgValue<'_> {
    // SAFETY: `a` keeps its tensor alive while the argument, which borrows it, is used.
    ArgValue::DLTensor(unsafe { tvm_runtime::packed_func::TensorRef::new(a.handle()) })
}

fn time_per_call(reps: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() / iters as f64
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn bench_sizes() -> Vec<usize> {
    match std::env::var("VK_BENCH_SIZES") {
        Ok(v) => v.split(',').map(|x| x.parse().unwrap()).collect(),
        Err(_) => vec![4 << 10, 1 << 20, 16 << 20, 64 << 20],
    }
}

fn bandwidth() {
    let api = device::api(VK0).unwrap();
    println!("copy bandwidth (median of 7):");
    println!(
        "  {:>10}  {:>12}  {:>12}",
        "bytes", "host->dev", "dev->host"
    );
    for &n in &bench_sizes() {
        let host = vec![1u8; n];
        let mut back = vec![0u8; n];
        let p = api.alloc_data_space(VK0, n, 64, F32).unwrap();
        let iters = (256 << 20) / n.max(1 << 20);
        let cpu = DLDevice::CPU;
        let h2d = time_per_call(7, iters.max(1), || {
            // SAFETY: `n` bytes on both sides.
            unsafe {
                api.copy_data(
                    host.as_ptr() as *const c_void,
                    0,
                    p,
                    0,
                    n,
                    cpu,
                    VK0,
                    F32,
                    std::ptr::null_mut(),
                )
                .unwrap()
            }
        });
        let d2h = time_per_call(7, iters.max(1), || {
            // SAFETY: as above.
            unsafe {
                api.copy_data(
                    p,
                    0,
                    back.as_mut_ptr() as *mut c_void,
                    0,
                    n,
                    VK0,
                    cpu,
                    F32,
                    std::ptr::null_mut(),
                )
                .unwrap()
            }
        });
        // SAFETY: `p` came from alloc_data_space above and is not used after this.
        unsafe { api.free_data_space(VK0, p) }.unwrap();
        let gbs = |t: f64| n as f64 / t / 1e9;
        println!(
            "  {:>10}  {:>8.2} GB/s  {:>8.2} GB/s",
            n,
            gbs(h2d),
            gbs(d2h)
        );
    }
}

/// A raw ash compute setup for one shader with one storage buffer.
struct Raw {
    device: ash::Device,
    queue: vk::Queue,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    pipeline: vk::Pipeline,
    layout: vk::PipelineLayout,
    set_layout: vk::DescriptorSetLayout,
    shader: vk::ShaderModule,
    desc_pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

impl Raw {
    /// # Safety
    /// Plain Vulkan setup; `spirv` must be a valid compute shader with entry `empty` and one
    /// storage buffer at set 0, binding 0.
    unsafe fn new(spirv: &[u32]) -> Raw {
        // SAFETY: the caller's contract; every call below is standard Vulkan setup.
        unsafe {
            // The same logical device and queue as the runtime's vulkan(0): same driver
            // threads, same memory. The runtime's stream is idle whenever this one runs.
            let rt = vulkan::instance::device(0).unwrap();
            let instance = &vulkan::instance::context().unwrap().instance;
            let device = rt.device.clone();
            let queue = rt.queue;
            let pd = rt.physical;
            let family = rt.queue_family;
            let pool = device
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(family)
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                    None,
                )
                .unwrap();
            let cmd = device
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
                .unwrap()[0];
            let fence = device
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .unwrap();
            let shader = device
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(spirv), None)
                .unwrap();
            let binding = [vk::DescriptorSetLayoutBinding::default()
                .binding(0)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)];
            let set_layout = device
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding),
                    None,
                )
                .unwrap();
            let sl = [set_layout];
            let layout = device
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default().set_layouts(&sl),
                    None,
                )
                .unwrap();
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(shader)
                .name(c"empty");
            let pipeline = device
                .create_compute_pipelines(
                    vk::PipelineCache::null(),
                    &[vk::ComputePipelineCreateInfo::default()
                        .stage(stage)
                        .layout(layout)],
                    None,
                )
                .unwrap()[0];
            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: 1,
            }];
            let desc_pool = device
                .create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(1)
                        .pool_sizes(&sizes),
                    None,
                )
                .unwrap();
            let set = device
                .allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(desc_pool)
                        .set_layouts(&sl),
                )
                .unwrap()[0];
            let buffer = device
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(1024)
                        .usage(vk::BufferUsageFlags::STORAGE_BUFFER),
                    None,
                )
                .unwrap();
            let req = device.get_buffer_memory_requirements(buffer);
            let mem = instance.get_physical_device_memory_properties(pd);
            let mtype = (0..mem.memory_type_count)
                .find(|&k| req.memory_type_bits & (1 << k) != 0)
                .unwrap();
            let memory = device
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(req.size)
                        .memory_type_index(mtype),
                    None,
                )
                .unwrap();
            device.bind_buffer_memory(buffer, memory, 0).unwrap();
            let bi = [vk::DescriptorBufferInfo {
                buffer,
                offset: 0,
                range: vk::WHOLE_SIZE,
            }];
            device.update_descriptor_sets(
                &[vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(0)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&bi)],
                &[],
            );
            Raw {
                device,
                queue,
                pool,
                cmd,
                fence,
                pipeline,
                layout,
                set_layout,
                shader,
                desc_pool,
                set,
                buffer,
                memory,
            }
        }
    }

    /// Records `n` dispatches (each followed by a barrier, as the runtime does), submits, waits.
    fn run(&self, n: usize) {
        self.record(n);
        self.submit();
    }

    /// Records `n` dispatches into a fresh command buffer.
    fn record(&self, n: usize) {
        let d = &self.device;
        // SAFETY: objects of this device; the command buffer is idle between runs.
        unsafe {
            d.begin_command_buffer(
                self.cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .unwrap();
            for _ in 0..n {
                d.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
                d.cmd_bind_descriptor_sets(
                    self.cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    self.layout,
                    0,
                    &[self.set],
                    &[],
                );
                d.cmd_dispatch(self.cmd, 1, 1, 1);
                let b = [vk::MemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                    .dst_access_mask(vk::AccessFlags::SHADER_READ)];
                d.cmd_pipeline_barrier(
                    self.cmd,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::DependencyFlags::empty(),
                    &b,
                    &[],
                    &[],
                );
            }
        }
    }

    /// Ends, submits and waits for the recorded commands.
    fn submit(&self) {
        let d = &self.device;
        // SAFETY: a recording command buffer of this device.
        unsafe {
            d.end_command_buffer(self.cmd).unwrap();
            let cmds = [self.cmd];
            d.queue_submit(
                self.queue,
                &[vk::SubmitInfo::default().command_buffers(&cmds)],
                self.fence,
            )
            .unwrap();
            d.wait_for_fences(&[self.fence], true, u64::MAX).unwrap();
            d.reset_fences(&[self.fence]).unwrap();
            d.reset_command_buffer(self.cmd, vk::CommandBufferResetFlags::empty())
                .unwrap();
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: the device is idle (every run waits); objects destroyed once, children first.
        unsafe {
            let d = &self.device;
            d.destroy_buffer(self.buffer, None);
            d.free_memory(self.memory, None);
            d.destroy_descriptor_pool(self.desc_pool, None);
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.shader, None);
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}

fn dispatch_overhead() {
    let lib = Module::load(kernels::build_dso().to_str().unwrap()).unwrap();
    let host = lib.function("empty_host").unwrap();
    let a = NDArray::empty(&[256], F32, VK0).unwrap();
    let api = device::api(VK0).unwrap();
    let sync = || api.sync(VK0).unwrap();
    let ours = |n: usize| {
        for _ in 0..n {
            host.call(&[dl(&a)]).unwrap();
        }
        sync();
    };
    // SAFETY: the test shader `empty` matches Raw's layout.
    let raw = unsafe { Raw::new(&kernels::spirv("empty", kernels::EMPTY)) };
    println!("dispatch of an empty kernel, per dispatch (15 interleaved samples: min / median):");
    println!(
        "  {:>28}  {:>19}  {:>19}  {:>12}",
        "mode", "ours", "raw ash", "ratio"
    );
    for &(label, batch, iters) in &[
        ("1 dispatch + sync", 1usize, 100usize),
        ("100 dispatches + 1 sync", 100, 5),
    ] {
        // Interleave the two to share any machine noise.
        let mut o = Vec::new();
        let mut r = Vec::new();
        for _ in 0..15 {
            o.push(time_per_call(1, iters, || ours(batch)) / batch as f64);
            r.push(time_per_call(1, iters, || raw.run(batch)) / batch as f64);
        }
        o.sort_by(|a, b| a.partial_cmp(b).unwrap());
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "  {:>28}  {:>6.2} / {:>6.2} µs  {:>6.2} / {:>6.2} µs  {:.2}x / {:.2}x",
            label,
            o[0] * 1e6,
            o[7] * 1e6,
            r[0] * 1e6,
            r[7] * 1e6,
            o[0] / r[0],
            o[7] / r[7]
        );
    }
    // Host-side cost only: recording 100 launches, the submission and wait left out.
    let mut o = Vec::new();
    let mut r = Vec::new();
    for _ in 0..15 {
        let t = Instant::now();
        for _ in 0..100 {
            host.call(&[dl(&a)]).unwrap();
        }
        o.push(t.elapsed().as_secs_f64() / 100.0);
        sync();
        let t = Instant::now();
        raw.record(100);
        r.push(t.elapsed().as_secs_f64() / 100.0);
        raw.submit();
    }
    o.sort_by(|a, b| a.partial_cmp(b).unwrap());
    r.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "  {:>28}  {:>6.2} / {:>6.2} µs  {:>6.2} / {:>6.2} µs  {:.2}x / {:.2}x",
        "record only (100, no submit)",
        o[0] * 1e6,
        o[7] * 1e6,
        r[0] * 1e6,
        r[7] * 1e6,
        o[0] / r[0],
        o[7] / r[7]
    );
}

fn main() {
    if vulkan::device_count() == 0 {
        println!("skipped: no Vulkan driver");
        return;
    }
    let name = device::api(VK0)
        .unwrap()
        .get_attr(VK0, device::DeviceAttr::DeviceName)
        .unwrap();
    println!("device: vulkan(0) {name:?}");
    if std::env::var_os("VK_BENCH_NO_COPIES").is_none() {
        bandwidth();
    }
    dispatch_overhead();
}
