//! Module entries.

use super::{check_out, cstr};
use crate::module::{self, Module};
use crate::object::{Object, ObjectRef};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{TVMFunctionHandle, TVMModuleHandle};
use std::ffi::{c_char, c_int, c_void};

/// Borrows a module handle as a new reference.
///
/// # Safety
/// `h` must be NULL or a live object handle.
pub(crate) unsafe fn module_arg(h: *mut c_void, what: &str) -> Result<Module> {
    // SAFETY: caller contract.
    let o = unsafe { ObjectRef::from_borrowed(h as *mut Object) }
        .ok_or_else(|| Error::value_fmt(format_args!("{what}: the module handle is NULL")))?;
    Module::from_object(o).map_err(|e| e.context(what))
}

/// Loads a module from a file (`TVMModLoadFromFile`); `format` may be empty to use the file
/// extension.
///
/// # Safety
/// Strings valid; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMModLoadFromFile(
    file_name: *const c_char,
    format: *const c_char,
    out: *mut TVMModuleHandle,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let file = unsafe { cstr(file_name, "TVMModLoadFromFile: file_name")? };
        let format = if format.is_null() {
            ""
        } else {
            // SAFETY: caller contract.
            unsafe { cstr(format, "TVMModLoadFromFile: format")? }
        };
        check_out(out, "TVMModLoadFromFile: out")?;
        let m = module::load_from_file(file, format)?;
        // SAFETY: checked non-null.
        unsafe { *out = m.into_object().into_raw() as *mut c_void };
        Ok(())
    }
}

/// Adds `dep` to `mod`'s imports (`TVMModImport`).
///
/// # Safety
/// Both live module handles.
#[no_mangle]
pub unsafe extern "C" fn TVMModImport(r#mod: TVMModuleHandle, dep: TVMModuleHandle) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let m = unsafe { module_arg(r#mod, "TVMModImport")? };
        // SAFETY: caller contract.
        let d = unsafe { module_arg(dep, "TVMModImport")? };
        m.import(&d)
    }
}

/// Looks a function up in a module (`TVMModGetFunction`): a new handle, or NULL if absent.
///
/// # Safety
/// `mod` a live module handle; `func_name` a string; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMModGetFunction(
    r#mod: TVMModuleHandle,
    func_name: *const c_char,
    query_imports: c_int,
    out: *mut TVMFunctionHandle,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let m = unsafe { module_arg(r#mod, "TVMModGetFunction")? };
        // SAFETY: caller contract.
        let name = unsafe { cstr(func_name, "TVMModGetFunction: func_name")? };
        check_out(out, "TVMModGetFunction: out")?;
        let p = match m.get_function(name, query_imports != 0)? {
            Some(f) => f.into_object().into_raw() as *mut c_void,
            None => std::ptr::null_mut(),
        };
        // SAFETY: checked non-null.
        unsafe { *out = p };
        Ok(())
    }
}

/// Frees a module handle (`TVMModFree`).
///
/// # Safety
/// `mod` NULL or a module handle the caller owns.
#[no_mangle]
pub unsafe extern "C" fn TVMModFree(r#mod: TVMModuleHandle) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe { super::object::free_handle(r#mod) };
        Ok(())
    }
}
