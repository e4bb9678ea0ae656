//! What TVM reads from a Vulkan device to answer attributes and to build a target.

/// What TVM reads from a device to answer attributes and to build a target.
#[derive(Clone, Debug, Default)]
pub struct Properties {
    /// The device name.
    pub device_name: String,
    /// The driver name (Vulkan 1.2 drivers; empty otherwise).
    pub driver_name: String,
    /// `VkPhysicalDeviceType` as TVM names it (`cpu`, `discrete`, ...).
    pub device_type: String,
    /// The Vulkan API version the device supports (packed).
    pub api_version: u32,
    /// The driver version (packed, vendor-specific).
    pub driver_version: u32,
    /// Max invocations per workgroup.
    pub max_num_threads: u32,
    /// The subgroup size (1 where it cannot be queried).
    pub subgroup_size: u32,
    /// Supported subgroup operations in compute shaders (bit mask).
    pub subgroup_operations: u32,
    /// Max workgroup size per dimension.
    pub max_block_size: [u32; 3],
    /// Max workgroup count per dimension.
    pub max_grid_size: [u32; 3],
    /// Max push constant bytes.
    pub max_push_constants_size: u32,
    /// Max uniform buffer range.
    pub max_uniform_buffer_range: u32,
    /// Max storage buffer range.
    pub max_storage_buffer_range: u32,
    /// Max storage buffers per shader stage.
    pub max_per_stage_descriptor_storage_buffer: u32,
    /// Shared memory per workgroup in bytes.
    pub max_shared_memory_per_block: u32,
    /// Minimum alignment of uniform buffer offsets.
    pub min_uniform_buffer_offset_alignment: u64,
    /// Shader feature support.
    pub supports_float16: bool,
    /// 64-bit floats in shaders.
    pub supports_float64: bool,
    /// 8-bit integers in shaders.
    pub supports_int8: bool,
    /// 16-bit integers in shaders.
    pub supports_int16: bool,
    /// 64-bit integers in shaders.
    pub supports_int64: bool,
    /// 8-bit storage buffer access.
    pub supports_8bit_buffer: bool,
    /// 16-bit storage buffer access.
    pub supports_16bit_buffer: bool,
    /// `VK_KHR_storage_buffer_storage_class` (core in 1.1).
    pub supports_storage_buffer_storage_class: bool,
    /// `VK_KHR_push_descriptor`.
    pub supports_push_descriptor: bool,
    /// `VK_KHR_dedicated_allocation` (core in 1.1).
    pub supports_dedicated_allocation: bool,
    /// `VK_KHR_shader_integer_dot_product`.
    pub supports_integer_dot_product: bool,
    /// Max SPIR-V version the device consumes (`0x10000` is 1.0).
    pub max_spirv_version: u32,
}
