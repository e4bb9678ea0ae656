//! Executors: the graph executor, its factory, the debug executor, params and the time
//! evaluator.

use crate::ffi::registry::Builtins;

/// Registers the executors' global functions.
pub fn register(_b: &mut Builtins<'_>) {}
