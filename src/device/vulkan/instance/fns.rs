//! The entry-point tables of `ash::Instance` and `ash::Device`, each filled by one loop over
//! its names. ash's own loaders spend about 100 bytes of code and a stub on every one of the
//! ~210 core entry points of Vulkan 1.0 to 1.3; here each costs its name and its offset.

use ash::vk;
use std::ffi::{c_void, CStr};

/// What a slot holds when the driver does not export its entry point (ash puts a stub there
/// that aborts too). The runtime calls only entry points of the version it checked the
/// device for, which a conforming driver exports, so this is never reached.
unsafe extern "system" fn missing() {
    eprintln!("tvm-runtime: called a Vulkan entry point the driver does not export");
    std::process::abort()
}

/// Writes the entry points named, in order, by `names` at the matching `offsets` from
/// `table`: `names` are ash's field names separated by spaces (`destroy_device`), looked up
/// as Vulkan names (`vkDestroyDevice`).
///
/// # Safety
/// `table` points to a table with a function pointer at each of `offsets`, as many as names.
unsafe fn load(
    names: &str,
    offsets: &[u16],
    get: &mut dyn FnMut(&CStr) -> *const c_void,
    table: *mut u8,
) {
    let mut buf = [0u8; 64];
    for (name, &offset) in names.split_ascii_whitespace().zip(offsets) {
        buf[..2].copy_from_slice(b"vk");
        let mut n = 2;
        for word in name.split('_') {
            let w = word.as_bytes();
            buf[n] = w[0].to_ascii_uppercase();
            buf[n + 1..n + w.len()].copy_from_slice(&w[1..]);
            n += w.len();
        }
        buf[n] = 0;
        let p = CStr::from_bytes_until_nul(&buf).map_or(std::ptr::null(), &mut *get);
        let p = if p.is_null() {
            missing as unsafe extern "system" fn() as *const c_void
        } else {
            p
        };
        // SAFETY: a function pointer's place in the table (the caller's promise); the driver's
        // entry point of the field's name has the field's signature, `missing` is never called.
        unsafe {
            table
                .add(offset.into())
                .cast::<*const c_void>()
                .write_unaligned(p)
        };
    }
}

/// One ash table (`ash::<table>`), every field listed, loaded through `get`.
macro_rules! table {
    ($table:ident, $get:expr, $($f:ident)*) => {{
        // The pattern names every field (it does not compile otherwise) and the table is as
        // large as that many function pointers, so `load` writes all of it.
        const _: fn(ash::$table) = |ash::$table { $($f: _),* }| ();
        const OFFSETS: &[u16] = &[$(std::mem::offset_of!(ash::$table, $f) as u16),*];
        const _: () = assert!(
            std::mem::size_of::<ash::$table>()
                == OFFSETS.len() * std::mem::size_of::<*const c_void>()
        );
        const NAMES: &str = concat!($(stringify!($f), " "),*);
        let mut table = std::mem::MaybeUninit::<ash::$table>::uninit();
        // SAFETY: each offset is that of a field, every field a function pointer.
        unsafe { load(NAMES, OFFSETS, $get, table.as_mut_ptr().cast()) };
        // SAFETY: `load` wrote every field (see above).
        unsafe { table.assume_init() }
    }};
}

/// Looks an entry point up by its Vulkan name; null where there is none.
type GetProc<'a> = &'a mut dyn FnMut(&CStr) -> *const c_void;

fn instance_tables(
    get: GetProc<'_>,
) -> (
    ash::InstanceFnV1_0,
    ash::InstanceFnV1_1,
    ash::InstanceFnV1_3,
) {
    (
        table!(
            InstanceFnV1_0,
            get,
            destroy_instance enumerate_physical_devices get_physical_device_features
            get_physical_device_format_properties
            get_physical_device_image_format_properties get_physical_device_properties
            get_physical_device_queue_family_properties
            get_physical_device_memory_properties get_device_proc_addr create_device
            enumerate_device_extension_properties enumerate_device_layer_properties
            get_physical_device_sparse_image_format_properties
        ),
        table!(
            InstanceFnV1_1,
            get,
            enumerate_physical_device_groups get_physical_device_features2
            get_physical_device_properties2 get_physical_device_format_properties2
            get_physical_device_image_format_properties2
            get_physical_device_queue_family_properties2
            get_physical_device_memory_properties2
            get_physical_device_sparse_image_format_properties2
            get_physical_device_external_buffer_properties
            get_physical_device_external_fence_properties
            get_physical_device_external_semaphore_properties
        ),
        table!(InstanceFnV1_3, get, get_physical_device_tool_properties),
    )
}

fn device_tables(
    get: GetProc<'_>,
) -> (
    ash::DeviceFnV1_0,
    ash::DeviceFnV1_1,
    ash::DeviceFnV1_2,
    ash::DeviceFnV1_3,
) {
    (
        table!(
            DeviceFnV1_0,
            get,
            destroy_device get_device_queue queue_submit queue_wait_idle
            device_wait_idle allocate_memory free_memory map_memory unmap_memory
            flush_mapped_memory_ranges invalidate_mapped_memory_ranges
            get_device_memory_commitment bind_buffer_memory bind_image_memory
            get_buffer_memory_requirements get_image_memory_requirements
            get_image_sparse_memory_requirements queue_bind_sparse create_fence
            destroy_fence reset_fences get_fence_status wait_for_fences create_semaphore
            destroy_semaphore create_event destroy_event get_event_status set_event
            reset_event create_query_pool destroy_query_pool get_query_pool_results
            create_buffer destroy_buffer create_buffer_view destroy_buffer_view
            create_image destroy_image get_image_subresource_layout create_image_view
            destroy_image_view create_shader_module destroy_shader_module
            create_pipeline_cache destroy_pipeline_cache get_pipeline_cache_data
            merge_pipeline_caches create_graphics_pipelines create_compute_pipelines
            destroy_pipeline create_pipeline_layout destroy_pipeline_layout
            create_sampler destroy_sampler create_descriptor_set_layout
            destroy_descriptor_set_layout create_descriptor_pool destroy_descriptor_pool
            reset_descriptor_pool allocate_descriptor_sets free_descriptor_sets
            update_descriptor_sets create_framebuffer destroy_framebuffer
            create_render_pass destroy_render_pass get_render_area_granularity
            create_command_pool destroy_command_pool reset_command_pool
            allocate_command_buffers free_command_buffers begin_command_buffer
            end_command_buffer reset_command_buffer cmd_bind_pipeline cmd_set_viewport
            cmd_set_scissor cmd_set_line_width cmd_set_depth_bias
            cmd_set_blend_constants cmd_set_depth_bounds cmd_set_stencil_compare_mask
            cmd_set_stencil_write_mask cmd_set_stencil_reference
            cmd_bind_descriptor_sets cmd_bind_index_buffer cmd_bind_vertex_buffers
            cmd_draw cmd_draw_indexed cmd_draw_indirect cmd_draw_indexed_indirect
            cmd_dispatch cmd_dispatch_indirect cmd_copy_buffer cmd_copy_image
            cmd_blit_image cmd_copy_buffer_to_image cmd_copy_image_to_buffer
            cmd_update_buffer cmd_fill_buffer cmd_clear_color_image
            cmd_clear_depth_stencil_image cmd_clear_attachments cmd_resolve_image
            cmd_set_event cmd_reset_event cmd_wait_events cmd_pipeline_barrier
            cmd_begin_query cmd_end_query cmd_reset_query_pool cmd_write_timestamp
            cmd_copy_query_pool_results cmd_push_constants cmd_begin_render_pass
            cmd_next_subpass cmd_end_render_pass cmd_execute_commands
        ),
        table!(
            DeviceFnV1_1,
            get,
            bind_buffer_memory2 bind_image_memory2 get_device_group_peer_memory_features
            cmd_set_device_mask cmd_dispatch_base get_image_memory_requirements2
            get_buffer_memory_requirements2 get_image_sparse_memory_requirements2
            trim_command_pool get_device_queue2 create_sampler_ycbcr_conversion
            destroy_sampler_ycbcr_conversion create_descriptor_update_template
            destroy_descriptor_update_template update_descriptor_set_with_template
            get_descriptor_set_layout_support
        ),
        table!(
            DeviceFnV1_2,
            get,
            cmd_draw_indirect_count cmd_draw_indexed_indirect_count create_render_pass2
            cmd_begin_render_pass2 cmd_next_subpass2 cmd_end_render_pass2
            reset_query_pool get_semaphore_counter_value wait_semaphores
            signal_semaphore get_buffer_device_address get_buffer_opaque_capture_address
            get_device_memory_opaque_capture_address
        ),
        table!(
            DeviceFnV1_3,
            get,
            create_private_data_slot destroy_private_data_slot set_private_data
            get_private_data cmd_set_event2 cmd_reset_event2 cmd_wait_events2
            cmd_pipeline_barrier2 cmd_write_timestamp2 queue_submit2 cmd_copy_buffer2
            cmd_copy_image2 cmd_copy_buffer_to_image2 cmd_copy_image_to_buffer2
            cmd_blit_image2 cmd_resolve_image2 cmd_begin_rendering cmd_end_rendering
            cmd_set_cull_mode cmd_set_front_face cmd_set_primitive_topology
            cmd_set_viewport_with_count cmd_set_scissor_with_count
            cmd_bind_vertex_buffers2 cmd_set_depth_test_enable
            cmd_set_depth_write_enable cmd_set_depth_compare_op
            cmd_set_depth_bounds_test_enable cmd_set_stencil_test_enable
            cmd_set_stencil_op cmd_set_rasterizer_discard_enable
            cmd_set_depth_bias_enable cmd_set_primitive_restart_enable
            get_device_buffer_memory_requirements get_device_image_memory_requirements
            get_device_image_sparse_memory_requirements
        ),
    )
}

/// The instance over `handle`, with every core entry point the loader resolves for it (what
/// `ash::Instance::load` gives).
///
/// # Safety
/// `handle` is a live instance created through `entry`.
// Out of line: built in place, the tables are not split into 210 copied fields.
#[inline(never)]
pub(super) unsafe fn instance(entry: &ash::Entry, handle: vk::Instance) -> ash::Instance {
    let gipa = entry.static_fn().get_instance_proc_addr;
    let mut get = |name: &CStr| {
        // SAFETY: a live instance and a NUL-terminated name.
        unsafe { gipa(handle, name.as_ptr()) }.map_or(std::ptr::null(), |f| f as *const c_void)
    };
    let (v1_0, v1_1, v1_3) = instance_tables(&mut get);
    ash::Instance::from_parts_1_3(handle, v1_0, v1_1, v1_3)
}

/// The device over `handle`, with every core entry point the driver resolves for it (what
/// `ash::Device::load` gives).
///
/// # Safety
/// `handle` is a live device created through `instance`.
// Out of line: built in place, the tables are not split into 210 copied fields.
#[inline(never)]
pub(super) unsafe fn device(instance: &ash::Instance, handle: vk::Device) -> ash::Device {
    let gdpa = instance.fp_v1_0().get_device_proc_addr;
    let mut get = |name: &CStr| {
        // SAFETY: a live device and a NUL-terminated name.
        unsafe { gdpa(handle, name.as_ptr()) }.map_or(std::ptr::null(), |f| f as *const c_void)
    };
    let (v1_0, v1_1, v1_2, v1_3) = device_tables(&mut get);
    ash::Device::from_parts_1_3(handle, v1_0, v1_1, v1_2, v1_3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// The names looked up, in order, by `f`.
    fn names(f: impl FnOnce(GetProc<'_>)) -> Vec<CString> {
        let mut seen = Vec::new();
        f(&mut |n: &CStr| {
            seen.push(n.to_owned());
            std::ptr::null()
        });
        seen
    }

    /// Every table asks for the same entry points, in the same order, as ash's own loaders.
    #[test]
    fn vulkan_tables_load_what_ash_loads() {
        let ours = names(|get| {
            instance_tables(&mut *get);
            device_tables(get);
        });
        let ash = names(|get| {
            ash::InstanceFnV1_0::load(&mut *get);
            ash::InstanceFnV1_1::load(&mut *get);
            ash::InstanceFnV1_3::load(&mut *get);
            ash::DeviceFnV1_0::load(&mut *get);
            ash::DeviceFnV1_1::load(&mut *get);
            ash::DeviceFnV1_2::load(&mut *get);
            ash::DeviceFnV1_3::load(get);
        });
        assert_eq!(ours.len(), 210);
        assert_eq!(ours, ash);
    }
}
