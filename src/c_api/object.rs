//! Objects: type indices and keys, reference counting.

use super::{check_out, cstr};
use crate::object::{self, Object};
use crate::packed_func::error::Error;
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
    crate::c_boundary! {
        check_out(obj, "TVMObjectGetTypeIndex: obj")?;
        check_out(out_tindex, "TVMObjectGetTypeIndex: out_tindex")?;
        // SAFETY: checked non-null; caller contract on liveness.
        unsafe { *out_tindex = (*(obj as *mut Object)).type_index() };
        Ok(())
    }
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
    crate::c_boundary! {
        // SAFETY: caller contract.
        let key = unsafe { cstr(type_key, "TVMObjectTypeKey2Index: type_key")? };
        check_out(out_tindex, "TVMObjectTypeKey2Index: out_tindex")?;
        let i = object::type_key_to_index(key)?;
        // SAFETY: checked non-null.
        unsafe { *out_tindex = i };
        Ok(())
    }
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
    crate::c_boundary! {
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
    }
}

/// Adds a reference (`TVMObjectRetain`); NULL is ignored.
///
/// # Safety
/// `obj` must be NULL or a live object handle.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectRetain(obj: TVMObjectHandle) -> c_int {
    crate::c_boundary! {
        if !obj.is_null() {
            // SAFETY: caller contract.
            unsafe { (*(obj as *mut Object)).inc_ref() };
        }
        Ok(())
    }
}

/// Drops a reference (`TVMObjectFree`); NULL is ignored.
///
/// A handle freed once too often cannot be detected: once the last reference is gone the
/// object's memory belongs to the allocator, and reading its header to check would itself be a
/// use after free. As in the reference, a double free is the caller's error.
///
/// # Safety
/// `obj` must be NULL or an object handle on which the caller owns a reference.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectFree(obj: TVMObjectHandle) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe { free_handle(obj) };
        Ok(())
    }
}

/// Drops the reference the caller owns on `obj` (NULL is ignored): the body of
/// `TVMObjectFree` and of the typed frees that alias it.
///
/// # Safety
/// `obj` must be NULL or an object handle on which the caller owns a reference.
pub(crate) unsafe fn free_handle(obj: TVMObjectHandle) {
    if !obj.is_null() {
        // SAFETY: the caller owns one reference; nothing reads the object after this.
        unsafe { Object::dec_ref(obj as *mut Object) };
    }
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
    crate::c_boundary! {
        check_out(is_derived, "TVMObjectDerivedFrom: is_derived")?;
        let d = object::derived_from(child_type_index, parent_type_index)?;
        // SAFETY: checked non-null.
        unsafe { *is_derived = d as c_int };
        Ok(())
    }
}
