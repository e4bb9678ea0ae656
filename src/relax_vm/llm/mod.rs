//! Language-model support for the Relax VM: the parameter cache (`vm.builtin.ndarray_cache.*`,
//! `vm.builtin.param_*_from_cache*`), the classic key/value cache
//! (`vm.builtin.attention_kv_cache_*`) and sampling on the host (`vm.builtin.sample_*`,
//! `vm.builtin.apply_*`).

pub mod kv_cache;
pub mod ndarray_cache;
pub mod sampling;

use crate::packed_func::registry::Registrar;

/// Registers the language-model builtins.
pub(crate) fn register(r: &mut Registrar) {
    ndarray_cache::register(r);
    kv_cache::register(r);
    sampling::register(r);
}
