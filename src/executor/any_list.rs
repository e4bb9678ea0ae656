//! AnyList: the register file the Relax VM hands compiled code (`TVMBackendAnyList*`): an
//! array of cells, each a value and its type code in the layout of TVM's `TVMRetValue`. It sits
//! with the executors (it is the Relax VM's, and moves into that room when it lands); the
//! `extern "C"` entries in `c_api/backend.rs` only convert and call the functions here.

use crate::object::Object;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{type_code as tc, TVMValue};
use std::ffi::{c_char, c_int, c_void, CString};

/// One AnyList cell: a value and its type code, the layout of TVM's `TVMRetValue`. Cells own
/// what they hold: an object reference, or (for strings and bytes) a private copy.
#[repr(C)]
pub struct AnyCell {
    /// The value.
    pub value: TVMValue,
    /// Its type code.
    pub type_code: c_int,
}

impl AnyCell {
    /// An empty cell.
    pub fn empty() -> AnyCell {
        AnyCell {
            value: TVMValue::default(),
            type_code: tc::NULLPTR,
        }
    }

    /// Releases what the cell owns and empties it.
    fn reset(&mut self) {
        // SAFETY: cells are only filled by `move_in`, which stores owned values per code.
        unsafe {
            match self.type_code {
                tc::OBJECT_HANDLE | tc::MODULE_HANDLE | tc::PACKED_FUNC_HANDLE => {
                    Object::dec_ref(self.value.v_handle as *mut Object)
                }
                tc::NDARRAY_HANDLE => Object::dec_ref(crate::ndarray::object_of_handle(
                    self.value.v_handle as *mut crate::packed_func::types::DLTensor,
                )),
                tc::STR => drop(CString::from_raw(self.value.v_handle as *mut c_char)),
                tc::BYTES => drop(Box::from_raw(self.value.v_handle as *mut Vec<u8>)),
                _ => {}
            }
        }
        *self = AnyCell::empty();
    }

    /// Takes a value returned by a packed call: objects transfer their reference, strings
    /// and bytes are copied.
    ///
    /// # Safety
    /// `v` valid for `code`; object codes carry one reference.
    unsafe fn move_in(&mut self, v: TVMValue, code: c_int) -> Result<()> {
        let value = match code {
            tc::OBJECT_RVALUE_REF_ARG => {
                return Err(Error::type_error(
                    "AnyList: an rvalue reference cannot be stored",
                ))
            }
            tc::STR => TVMValue {
                // SAFETY: caller contract: a NUL-terminated string.
                v_handle: unsafe { std::ffi::CStr::from_ptr(v.v_str) }
                    .to_owned()
                    .into_raw() as *mut c_void,
            },
            tc::BYTES => {
                // SAFETY: caller contract: a TVMByteArray*.
                let b = unsafe { &*(v.v_handle as *const crate::packed_func::types::TVMByteArray) };
                // SAFETY: the array holds `size` bytes.
                let bytes = unsafe { std::slice::from_raw_parts(b.data as *const u8, b.size) };
                TVMValue {
                    v_handle: Box::into_raw(Box::new(bytes.to_vec())) as *mut c_void,
                }
            }
            c if (0..=15).contains(&c) => v,
            c => {
                return Err(Error::type_error_fmt(format_args!(
                    "AnyList: unknown type code {c}"
                )))
            }
        };
        self.reset();
        self.value = value;
        self.type_code = code;
        Ok(())
    }
}

/// An AnyList owned by Rust (the runtime's VM allocates these; tests use them): cells are
/// released on drop.
pub struct AnyList(Box<[AnyCell]>);

impl AnyList {
    /// `n` empty cells.
    pub fn new(n: usize) -> AnyList {
        AnyList((0..n).map(|_| AnyCell::empty()).collect())
    }

    /// The pointer compiled code receives.
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr() as *mut c_void
    }
}

impl Drop for AnyList {
    fn drop(&mut self) {
        for c in self.0.iter_mut() {
            c.reset();
        }
    }
}

/// Checks a cell index and that the list and argument arrays are present.
fn check(anylist: *mut c_void, index: c_int, args_ok: bool) -> Result<()> {
    if anylist.is_null() || !args_ok {
        return Err(Error::value("AnyList: NULL list or arguments"));
    }
    if index < 0 {
        return Err(Error::index_fmt(format_args!(
            "AnyList: negative index {index}"
        )));
    }
    Ok(())
}

/// Passes cell `index` as argument `arg_offset` of a packed call; the argument borrows from
/// the cell (`TVMBackendAnyListSetPackedArg`).
///
/// # Safety
/// `anylist` holds at least `index + 1` cells; `args`/`type_codes` hold `arg_offset + 1`.
pub unsafe fn set_packed_arg(
    anylist: *mut c_void,
    index: c_int,
    args: *mut TVMValue,
    type_codes: *mut c_int,
    arg_offset: c_int,
) -> Result<()> {
    check(
        anylist,
        index,
        !args.is_null() && !type_codes.is_null() && arg_offset >= 0,
    )?;
    // SAFETY: caller contract on sizes.
    unsafe {
        let cell = &*(anylist as *mut AnyCell).add(index as usize);
        if cell.type_code == tc::BYTES {
            return Err(Error::type_error(
                "TVMBackendAnyListSetPackedArg: bytes cannot be passed in place",
            ));
        }
        *args.add(arg_offset as usize) = cell.value;
        *type_codes.add(arg_offset as usize) = cell.type_code;
    }
    Ok(())
}

/// Empties cell `index`, releasing what it holds (`TVMBackendAnyListResetItem`).
///
/// # Safety
/// `anylist` holds at least `index + 1` cells.
pub unsafe fn reset_item(anylist: *mut c_void, index: c_int) -> Result<()> {
    check(anylist, index, true)?;
    // SAFETY: caller contract on sizes.
    unsafe { (*(anylist as *mut AnyCell).add(index as usize)).reset() };
    Ok(())
}

/// Moves the return value at `args[ret_offset]` into cell `index`: the cell takes the object
/// reference the return carried (strings and bytes are copied); the source slots are left as
/// they are (`TVMBackendAnyListMoveFromPackedReturn`).
///
/// # Safety
/// `anylist` holds at least `index + 1` cells; `args`/`type_codes` hold `ret_offset + 1`; the
/// value is valid for its code and carries one reference for object codes.
pub unsafe fn move_from_packed_return(
    anylist: *mut c_void,
    index: c_int,
    args: *mut TVMValue,
    type_codes: *mut c_int,
    ret_offset: c_int,
) -> Result<()> {
    check(
        anylist,
        index,
        !args.is_null() && !type_codes.is_null() && ret_offset >= 0,
    )?;
    // SAFETY: caller contract on sizes; the value carries ownership.
    unsafe {
        let v = *args.add(ret_offset as usize);
        let c = *type_codes.add(ret_offset as usize);
        (*(anylist as *mut AnyCell).add(index as usize)).move_in(v, c)
    }
}
