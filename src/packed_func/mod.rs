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
