//! What compiled code calls (`c_backend_api.h`): environment lookup, workspace, parallel
//! launch, system library registration, run-once, and the AnyList helpers of the Relax VM.

use super::{check_out, cstr};
use crate::device;
use crate::ffi::error::{guard, guard_value, Error};
use crate::ffi::registry;
use crate::ffi::types::{DLDataType, DLDevice, TVMValue};
use crate::ffi::value::RetValue;
use crate::module::{system_lib, Module};
use crate::object::{Object, ObjectRef, TYPE_MODULE};
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
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: caller contract.
        let name = unsafe { cstr(func_name, "TVMBackendGetFuncFromEnv: func_name")? };
        check_out(out, "TVMBackendGetFuncFromEnv: out")?;
        let p = if mod_node.is_null() {
            global_env_func(name)?
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
    })
}

/// Registry lookups without a module: functions are kept in a process-wide cache so the
/// borrowed handle stays valid even if the registry entry is later replaced.
fn global_env_func(name: &str) -> crate::ffi::Result<*mut Object> {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex};
    static KEEP: LazyLock<Mutex<HashMap<String, Vec<crate::ffi::Function>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let f = registry::get(name).ok_or_else(|| {
        Error::attribute(format!(
            "Cannot find function {name} in the global registry"
        ))
    })?;
    let p = f.as_object().as_ptr();
    let mut keep = KEEP.lock().unwrap_or_else(|e| e.into_inner());
    let list = keep.entry(name.to_string()).or_default();
    if !list.iter().any(|g| g.as_object().as_ptr() == p) {
        list.push(f);
    }
    Ok(p)
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
    guard(|| {
        // SAFETY: caller contract.
        let name = unsafe { cstr(name, "TVMBackendRegisterSystemLibSymbol: name")? };
        system_lib::register_symbol(name, ptr);
        Ok(())
    })
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
    if device_type == crate::ffi::types::DL_CPU {
        if let Ok(p) = crate::device::cpu::workspace_alloc(nbytes as usize) {
            return p;
        }
    }
    guard_value(std::ptr::null_mut(), || {
        let dev = DLDevice::new(device_type, device_id);
        let hint = DLDataType::new(dtype_code_hint as u8, dtype_bits_hint as u8, 1);
        let n = usize::try_from(nbytes)
            .map_err(|_| Error::value("TVMBackendAllocWorkspace: size too large"))?;
        device::api(dev)?.alloc_workspace(dev, n, hint)
    })
}

/// Frees temporary memory (`TVMBackendFreeWorkspace`).
#[no_mangle]
pub extern "C" fn TVMBackendFreeWorkspace(
    device_type: c_int,
    device_id: c_int,
    ptr: *mut c_void,
) -> c_int {
    // CPU fast path; a failure (double free) is reported by the guarded path below.
    if device_type == crate::ffi::types::DL_CPU && crate::device::cpu::workspace_free(ptr).is_ok() {
        return 0;
    }
    guard(|| {
        let dev = DLDevice::new(device_type, device_id);
        device::api(dev)?.free_workspace(dev, ptr)
    })
}

/// Records a Python C-API entry point (`TVMBackendRegisterEnvCAPI`).
///
/// # Safety
/// `name` a string; `ptr` the named function.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRegisterEnvCAPI(name: *const c_char, ptr: *mut c_void) -> c_int {
    guard(|| {
        // SAFETY: caller contract.
        let name = unsafe { cstr(name, "TVMBackendRegisterEnvCAPI: name")? };
        crate::ffi::env_capi::register(name, ptr)
    })
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
    let Some(f) = flambda else {
        crate::ffi::error::set_last_error(&Error::value(
            "TVMBackendParallelLaunch: the lambda is NULL",
        ));
        return -1;
    };
    // SAFETY: forwarded contract. The pool catches its own panics.
    unsafe { threading::parallel_launch(f, cdata, num_task) }
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
    if penv.is_null() {
        crate::ffi::error::set_last_error(&Error::value("TVMBackendParallelBarrier: penv is NULL"));
        return -1;
    }
    // SAFETY: forwarded contract.
    unsafe { threading::parallel_barrier(task_id, penv) }
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
    _nbytes: c_int,
) -> c_int {
    if handle.is_null() {
        crate::ffi::error::set_last_error(&Error::value("TVMBackendRunOnce: handle is NULL"));
        return -1;
    }
    // SAFETY: caller contract.
    unsafe {
        if (*handle).is_null() {
            *handle = std::ptr::dangling_mut::<c_void>();
            return match f {
                Some(f) => f(cdata),
                None => 0,
            };
        }
    }
    0
}

/// Stores argument `arg_offset` of a packed call from AnyList slot `index`
/// (`TVMBackendAnyListSetPackedArg`). An AnyList is an array of the runtime's return-value
/// slots, allocated by the runtime's VM; the stored value borrows from the slot.
///
/// # Safety
/// `anylist` holds at least `index + 1` slots; `args`/`type_codes` hold `arg_offset + 1`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListSetPackedArg(
    anylist: *mut c_void,
    index: c_int,
    args: *mut TVMValue,
    type_codes: *mut c_int,
    arg_offset: c_int,
) -> c_int {
    guard(|| {
        check_anylist(anylist, index, !args.is_null())?;
        // SAFETY: caller contract on sizes.
        unsafe {
            let slot = &*(anylist as *mut RetValue).add(index as usize);
            let (v, c) = match slot {
                RetValue::Str(_) | RetValue::Bytes(_) => {
                    return Err(Error::type_error(
                        "TVMBackendAnyListSetPackedArg: string slots cannot be passed in place",
                    ))
                }
                other => other.as_arg().to_c(),
            };
            *args.add(arg_offset as usize) = v;
            *type_codes.add(arg_offset as usize) = c;
        }
        Ok(())
    })
}

/// Clears AnyList slot `index` (`TVMBackendAnyListResetItem`).
///
/// # Safety
/// `anylist` holds at least `index + 1` slots.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListResetItem(anylist: *mut c_void, index: c_int) -> c_int {
    guard(|| {
        check_anylist(anylist, index, true)?;
        // SAFETY: caller contract on sizes.
        unsafe { *(anylist as *mut RetValue).add(index as usize) = RetValue::Null };
        Ok(())
    })
}

/// Moves the return value at `args[ret_offset]` into AnyList slot `index`
/// (`TVMBackendAnyListMoveFromPackedReturn`); object values transfer their reference.
///
/// # Safety
/// `anylist` holds at least `index + 1` slots; `args`/`type_codes` hold `ret_offset + 1`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListMoveFromPackedReturn(
    anylist: *mut c_void,
    index: c_int,
    args: *mut TVMValue,
    type_codes: *mut c_int,
    ret_offset: c_int,
) -> c_int {
    guard(|| {
        check_anylist(anylist, index, !args.is_null())?;
        // SAFETY: caller contract on sizes; the value carries ownership.
        unsafe {
            let v = *args.add(ret_offset as usize);
            let c = *type_codes.add(ret_offset as usize);
            *(anylist as *mut RetValue).add(index as usize) = RetValue::from_c_take(v, c)?;
            *type_codes.add(ret_offset as usize) = crate::ffi::types::type_code::NULLPTR;
        }
        Ok(())
    })
}

fn check_anylist(anylist: *mut c_void, index: c_int, args_ok: bool) -> crate::ffi::Result<()> {
    if anylist.is_null() || !args_ok {
        return Err(Error::value("AnyList: NULL list or arguments"));
    }
    if index < 0 {
        return Err(Error::index(format!("AnyList: negative index {index}")));
    }
    Ok(())
}

/// Allocates an AnyList of `n` empty slots (for the runtime's VM and tests).
pub fn anylist_new(n: usize) -> Box<[RetValue]> {
    (0..n).map(|_| RetValue::Null).collect()
}
