//! How the GPU backends pass one kernel argument: the conversion a kernel's argument type asks
//! for (TVM's function-info `arg_types`), and the scalar values' bit patterns. Handles are each
//! backend's own (a device address, an OpenCL buffer).

use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{type_code as tc, DLDataType, TVMValue};

/// How one kernel argument is passed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum ArgConv {
    I64,
    I32,
    U32,
    F64,
    F32,
    Handle,
}

impl ArgConv {
    /// The conversion for an argument type; vector types and other widths are refused.
    pub(crate) fn of(t: DLDataType) -> Result<ArgConv> {
        if t.lanes != 1 {
            return Err(Error::internal(
                "Check failed: t.lanes == 1U: Cannot pass vector type argument to devic \
                 function for now",
            ));
        }
        Ok(match (t.code, t.bits) {
            (0, 64) => ArgConv::I64,
            (0, 32) => ArgConv::I32,
            (1, 32) => ArgConv::U32,
            (2, 64) => ArgConv::F64,
            (2, 32) => ArgConv::F32,
            (3, _) => ArgConv::Handle,
            _ => {
                return Err(Error::tvm_fmt(format_args!(
                    "Cannot handle {} as device function argument",
                    crate::packed_func::dtype::dtype_to_string(t)
                )))
            }
        })
    }

    /// The argument's size in bytes as the kernel receives it (OpenCL sets each by size).
    #[cfg(feature = "opencl")]
    pub(crate) fn size(self) -> usize {
        match self {
            ArgConv::I32 | ArgConv::U32 | ArgConv::F32 => 4,
            _ => 8,
        }
    }

    /// What the argument expects, for a type error (`handle` names this backend's handles).
    pub(crate) fn expects(self, handle: &'static str) -> &'static str {
        match self {
            ArgConv::Handle => handle,
            ArgConv::F32 | ArgConv::F64 => "a float",
            _ => "an integer",
        }
    }

    /// A scalar argument's value (in the low bytes of 8), or `None` when the value's type code
    /// does not fit the conversion. Not for [`ArgConv::Handle`] (`None`).
    pub(crate) fn scalar(self, v: TVMValue, code: i32) -> Option<u64> {
        match self {
            ArgConv::Handle => None,
            ArgConv::I64 | ArgConv::I32 | ArgConv::U32 => {
                if code != tc::INT && code != tc::BOOL {
                    return None;
                }
                // SAFETY: the code says the value is an integer.
                let x = unsafe { v.v_int64 };
                Some(match self {
                    ArgConv::I64 => x as u64,
                    ArgConv::I32 => x as i32 as u32 as u64,
                    _ => x as u32 as u64,
                })
            }
            ArgConv::F64 | ArgConv::F32 => {
                let x = match code {
                    // SAFETY: the code says the value is a float.
                    tc::FLOAT => unsafe { v.v_float64 },
                    // SAFETY: the code says the value is an integer.
                    tc::INT => (unsafe { v.v_int64 }) as f64,
                    _ => return None,
                };
                Some(if self == ArgConv::F64 {
                    x.to_bits()
                } else {
                    (x as f32).to_bits() as u64
                })
            }
        }
    }
}
