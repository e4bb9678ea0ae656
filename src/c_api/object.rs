//! Objects: type indices and keys, reference counting.

use super::{check_out, cstr};
use crate::object::{self, Object};
use crate::packed_func::error::{guard, Error};
use crate::packed_func::types::TVMObjectHandle;
use std::ffi::{c_char, c_int, c_uint};

/// The type index of an object (`TVMObjectGetTypeIndex`).
///
/// # Safety
/// `obj` must be a live object handle; `out_tindex` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectGetTypeIndex(
    obj: TVMObjectHandle,
    out_tindex: *mut c_uint,
) -> c_int {
    guard(|| {
        check_out(obj, "TVMObjectGetTypeIndex: obj")?;
        check_out(out_tindex, "TVMObjectGetTypeIndex: out_tindex")?;
        // SAFETY: checked non-null; caller contract on liveness.
        unsafe { *out_tindex = (*(obj as *mut Object)).type_index() };
        Ok(())
    })
}

/// The index of a type key (`TVMObjectTypeKey2Index`).
///
/// # Safety
/// `type_key` must be a string; `out_tindex` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectTypeKey2Index(
    type_key: *const c_char,
    out_tindex: *mut c_uint,
) -> c_int {
    guard(|| {
        // SAFETY: caller contract.
        let key = unsafe { cstr(type_key, "TVMObjectTypeKey2Index: type_key")? };
        check_out(out_tindex, "TVMObjectTypeKey2Index: out_tindex")?;
        let i = object::type_key_to_index(key)?;
        // SAFETY: checked non-null.
        unsafe { *out_tindex = i };
        Ok(())
    })
}

/// The key of a type index (`TVMObjectTypeIndex2Key`): a `malloc`ed copy the caller frees
/// with `free`, as with the reference.
///
/// # Safety
/// `out_type_key` must be valid.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectTypeIndex2Key(
    tindex: c_uint,
    out_type_key: *mut *mut c_char,
) -> c_int {
    guard(|| {
        check_out(out_type_key, "TVMObjectTypeIndex2Key: out_type_key")?;
        let key = object::type_index_to_key(tindex)?;
        // SAFETY: malloc of len+1 bytes, filled with the key and a NUL.
        unsafe {
            let p = libc::malloc(key.len() + 1) as *mut c_char;
            if p.is_null() {
                return Err(Error::tvm("TVMObjectTypeIndex2Key: out of memory"));
            }
            std::ptr::copy_nonoverlapping(key.as_ptr() as *const c_char, p, key.len());
            *p.add(key.len()) = 0;
            *out_type_key = p;
        }
        Ok(())
    })
}

/// Adds a reference (`TVMObjectRetain`); NULL is ignored.
///
/// # Safety
/// `obj` must be NULL or a live object handle.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectRetain(obj: TVMObjectHandle) -> c_int {
    guard(|| {
        if !obj.is_null() {
            // SAFETY: caller contract.
            unsafe { (*(obj as *mut Object)).inc_ref() };
        }
        Ok(())
    })
}

/// Drops a reference (`TVMObjectFree`); NULL is ignored.
///
/// # Safety
/// `obj` must be NULL or an object handle on which the caller owns a reference.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectFree(obj: TVMObjectHandle) -> c_int {
    guard(|| {
        if !obj.is_null() {
            let o = obj as *mut Object;
            // SAFETY: caller contract; a count of zero or less means the handle was already
            // released (detectable only while the memory has not been reused).
            if unsafe { (*o).ref_count() } <= 0 {
                return Err(Error::value(
                    "TVMObjectFree: the object has no references left (double free?)",
                ));
            }
            // SAFETY: caller owns one reference.
            unsafe { Object::dec_ref(o) };
        }
        Ok(())
    })
}

/// Whether one type derives from another (`TVMObjectDerivedFrom`).
///
/// # Safety
/// `is_derived` must be valid.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectDerivedFrom(
    child_type_index: u32,
    parent_type_index: u32,
    is_derived: *mut c_int,
) -> c_int {
    guard(|| {
        check_out(is_derived, "TVMObjectDerivedFrom: is_derived")?;
        let d = object::derived_from(child_type_index, parent_type_index)?;
        // SAFETY: checked non-null.
        unsafe { *is_derived = d as c_int };
        Ok(())
    })
}
