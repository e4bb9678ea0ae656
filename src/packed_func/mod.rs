//! Values, errors, PackedFunc and the global registry.

pub mod confine;
pub mod dtype;
pub mod env_capi;
pub mod error;
pub mod features;
pub(crate) mod float_text;
pub mod function;
pub mod json;
pub mod order;
pub mod registry;
pub mod tensor;
pub(crate) mod text;
pub mod types;
pub mod value;

pub use error::{Error, ErrorKind, Result};
pub use function::Function;
pub use types::*;
pub use value::{ArgValue, Args, RawHandle, RetValue, TensorRef};

/// The tests' skip reporter (tests/common/skip.rs), for the unit tests of every room.
#[cfg(test)]
#[path = "../../tests/common/skip.rs"]
pub(crate) mod test_skip;

/// How many times fewer cases the randomised unit tests draw (the JSON reader and writer, the
/// float printer): `TVMRT_TEST_SCALE` when set (scripts/cross.sh sets it under qemu-user, where
/// they run some fifty times slower), else 100 in unoptimised builds (the sanitizer stages),
/// else 1. The fixed cases (powers, boundaries, ties) always run.
#[cfg(test)]
pub(crate) fn test_scale() -> u32 {
    std::env::var("TVMRT_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(if cfg!(debug_assertions) { 100 } else { 1 })
}
