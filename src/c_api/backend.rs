//! What compiled code calls (`c_backend_api.h`): environment lookup, workspace, parallel
//! launch, system library registration, run-once, and the AnyList helpers of the Relax VM
//! (whose logic lives in [`crate::executor::any_list`]).

use super::{check_out, cstr};
use crate::device;
use crate::executor::any_list;
use crate::module::{system_lib, Module};
use crate::object::{Object, ObjectRef, TYPE_MODULE};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::TVMFunctionHandle;
use crate::packed_func::types::{DLDataType, DLDevice, TVMValue};
use crate::threading::{self, ParallelGroupEnv, ParallelLambda};
use std::ffi::{c_char, c_int, c_void};

/// Resolves a function for compiled code (`TVMBackendGetFuncFromEnv`): through the module
/// `mod_node` and its imports, then the global registry. The handle is borrowed: it stays
/// valid while the module lives (NULL module: the registry only, kept alive by the registry
/// entry's cache in the calling module's absence).
///
/// # Safety
/// `mod_node` NULL or a live module; `func_name` a string; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendGetFuncFromEnv(
    mod_node: *mut c_void,
    func_name: *const c_char,
    out: *mut TVMFunctionHandle,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let name = unsafe { cstr(func_name, "TVMBackendGetFuncFromEnv: func_name")? };
        check_out(out, "TVMBackendGetFuncFromEnv: out")?;
        let p = if mod_node.is_null() {
            crate::module::global_env_func_raw(name)?
        } else {
            // SAFETY: caller contract: a live object.
            if unsafe { (*(mod_node as *mut Object)).type_index() } != TYPE_MODULE {
                return Err(Error::value(
                    "TVMBackendGetFuncFromEnv: mod_node is not a module",
                ));
            }
            // SAFETY: as above.
            let m = Module::from_object(unsafe {
                ObjectRef::from_borrowed(mod_node as *mut Object).expect("non-null")
            })?;
            m.get_func_from_env_raw(name)?
        };
        // SAFETY: checked non-null.
        unsafe { *out = p as *mut c_void };
        Ok(())
    }
}

/// Registers a symbol of the system library (`TVMBackendRegisterSystemLibSymbol`).
///
/// # Safety
/// `name` a string.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRegisterSystemLibSymbol(
    name: *const c_char,
    ptr: *mut c_void,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let name = unsafe { cstr(name, "TVMBackendRegisterSystemLibSymbol: name")? };
        // SAFETY: caller contract: compiled code registers its own symbols.
        unsafe { system_lib::register_symbol(name, ptr) };
        Ok(())
    }
}

/// Allocates temporary memory for compiled code (`TVMBackendAllocWorkspace`); NULL on failure
/// with the last error set. CPU workspaces come from a per-thread pool.
#[no_mangle]
pub extern "C" fn TVMBackendAllocWorkspace(
    device_type: c_int,
    device_id: c_int,
    nbytes: u64,
    dtype_code_hint: c_int,
    dtype_bits_hint: c_int,
) -> *mut c_void {
    // Fast path (listed in `crate::c_api`): the CPU pool; a failure takes the general path,
    // which reports it.
    #[cfg(not(feature = "bench-no-fast-paths"))]
    if device_type == crate::packed_func::types::DL_CPU {
        if let Ok(p) = usize::try_from(nbytes)
            .map_err(|_| ())
            .and_then(|n| device::cpu::workspace_alloc(n).map_err(|_| ()))
        {
            return p;
        }
    }
    crate::c_boundary! {
        #[cold]
        let dev = DLDevice::new(device_type, device_id);
        let hint = DLDataType::new(dtype_code_hint as u8, dtype_bits_hint as u8, 1);
        let n = usize::try_from(nbytes)
            .map_err(|_| Error::value("TVMBackendAllocWorkspace: size too large"))?;
        device::api(dev)?
            .alloc_workspace(dev, n, hint)
            .map_err(|e| e.context("TVMBackendAllocWorkspace"))
    }
}

/// Frees temporary memory (`TVMBackendFreeWorkspace`).
///
/// # Safety
/// `ptr` a workspace of this device from `TVMBackendAllocWorkspace`, not yet freed (a CPU
/// pointer that is not one is refused; other devices cannot check).
#[no_mangle]
pub unsafe extern "C" fn TVMBackendFreeWorkspace(
    device_type: c_int,
    device_id: c_int,
    ptr: *mut c_void,
) -> c_int {
    // Fast path (listed in `crate::c_api`): the CPU pool; a failure (double free) takes the
    // general path, which reports it.
    #[cfg(not(feature = "bench-no-fast-paths"))]
    if device_type == crate::packed_func::types::DL_CPU && device::cpu::workspace_free(ptr).is_ok()
    {
        return 0;
    }
    crate::c_boundary! {
        #[cold]
        let dev = DLDevice::new(device_type, device_id);
        // SAFETY: the C contract: `ptr` came from TVMBackendAllocWorkspace for this device.
        unsafe { device::api(dev)?.free_workspace(dev, ptr) }
    }
}

/// Records a Python C-API entry point (`TVMBackendRegisterEnvCAPI`).
///
/// # Safety
/// `name` a string; `ptr` the named function.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRegisterEnvCAPI(name: *const c_char, ptr: *mut c_void) -> c_int {
    crate::c_boundary! {
        // SAFETY: caller contract.
        let name = unsafe { cstr(name, "TVMBackendRegisterEnvCAPI: name")? };
        // SAFETY: caller contract: `ptr` is the named function.
        unsafe { crate::packed_func::env_capi::register(name, ptr) }
    }
}

/// Runs `flambda` on `num_task` tasks of the thread pool (`TVMBackendParallelLaunch`);
/// `num_task` 0 means the pool's size.
///
/// # Safety
/// `flambda` must be safe to call concurrently with `cdata`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelLaunch(
    flambda: Option<ParallelLambda>,
    cdata: *mut c_void,
    num_task: c_int,
) -> c_int {
    crate::c_boundary! {
        let f = flambda.ok_or_else(|| Error::value("TVMBackendParallelLaunch: the lambda is NULL"))?;
        // SAFETY: forwarded contract.
        status(unsafe { threading::parallel_launch(f, cdata, num_task) })
    }
}

/// Barrier among the tasks of a launch (`TVMBackendParallelBarrier`).
///
/// # Safety
/// `penv` the env passed to the running task.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelBarrier(
    task_id: c_int,
    penv: *mut ParallelGroupEnv,
) -> c_int {
    crate::c_boundary! {
        check_out(penv, "TVMBackendParallelBarrier: penv")?;
        // SAFETY: forwarded contract.
        status(unsafe { threading::parallel_barrier(task_id, penv) })
    }
}

/// Runs `f(cdata)` the first time `*handle` is NULL (`TVMBackendRunOnce`).
///
/// # Safety
/// `handle` valid; `f` callable with `cdata`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRunOnce(
    handle: *mut *mut c_void,
    f: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    cdata: *mut c_void,
    nbytes: c_int,
) -> c_int {
    let _ = nbytes; // the size of `*handle`'s pointee: unused, as in TVM
                    // The boundary claims the handle: it yields the handle when this call is the first.
    let claimed: *mut *mut c_void = crate::c_boundary! {
        check_out(handle, "TVMBackendRunOnce: handle")?;
        // SAFETY: checked non-null; caller contract.
        if unsafe { !(*handle).is_null() } {
            return Ok(std::ptr::null_mut());
        }
        // SAFETY: as above.
        unsafe { *handle = std::ptr::dangling_mut::<c_void>() };
        Ok(handle)
    };
    match f {
        // `f` returns its own status, passed on verbatim as TVM does (it is C code: nothing
        // here can panic).
        // SAFETY: caller contract: `f` callable with `cdata`.
        Some(f) if !claimed.is_null() => unsafe { f(cdata) },
        // NULL `handle`: the boundary recorded the error.
        _ if handle.is_null() => -1,
        _ => 0,
    }
}

/// A status returned by a callee that sets the last error itself, as a result (the boundary
/// records the same error again on the way out).
fn status(r: c_int) -> Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(Error::from_last())
    }
}

/// Passes AnyList cell `index` as argument `arg_offset` of a packed call
/// (`TVMBackendAnyListSetPackedArg`); the argument borrows from the cell.
///
/// # Safety
/// `anylist` holds at least `index + 1` cells; `args`/`type_codes` hold `arg_offset + 1`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListSetPackedArg(
    anylist: *mut c_void,
    index: c_int,
    args: *mut TVMValue,
    type_codes: *mut c_int,
    arg_offset: c_int,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe { any_list::set_packed_arg(anylist, index, args, type_codes, arg_offset) }
    }
}

/// Empties AnyList cell `index`, releasing what it holds (`TVMBackendAnyListResetItem`).
///
/// # Safety
/// `anylist` holds at least `index + 1` cells.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListResetItem(anylist: *mut c_void, index: c_int) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe { any_list::reset_item(anylist, index) }
    }
}

/// Moves the return value at `args[ret_offset]` into AnyList cell `index`
/// (`TVMBackendAnyListMoveFromPackedReturn`): the cell takes the object reference the return
/// carried (strings and bytes are copied); the source slots are left as they are.
///
/// # Safety
/// `anylist` holds at least `index + 1` cells; `args`/`type_codes` hold `ret_offset + 1`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListMoveFromPackedReturn(
    anylist: *mut c_void,
    index: c_int,
    args: *mut TVMValue,
    type_codes: *mut c_int,
    ret_offset: c_int,
) -> c_int {
    crate::c_boundary! {
        // SAFETY: forwarded contract.
        unsafe { any_list::move_from_packed_return(anylist, index, args, type_codes, ret_offset) }
    }
}
