//! What compiled code calls (`c_backend_api.h`): environment lookup, workspace, parallel
//! launch, system library registration, run-once, and the AnyList helpers of the Relax VM.

use super::{check_out, cstr};
use crate::device;
use crate::module::{system_lib, Module};
use crate::object::{Object, ObjectRef, TYPE_MODULE};
use crate::packed_func::error::{guard, guard_value, Error};
use crate::packed_func::types::TVMFunctionHandle;
use crate::packed_func::types::{type_code as tc, DLDataType, DLDevice, TVMValue};
use crate::threading::{self, ParallelGroupEnv, ParallelLambda};
use std::ffi::CString;
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
    guard(|| {
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
    })
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
    if device_type == crate::packed_func::types::DL_CPU {
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
///
/// # Safety
/// `ptr` from `TVMBackendAllocWorkspace` on the same device, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendFreeWorkspace(
    device_type: c_int,
    device_id: c_int,
    ptr: *mut c_void,
) -> c_int {
    // CPU fast path; a failure (double free) is reported by the guarded path below.
    if device_type == crate::packed_func::types::DL_CPU
        && crate::device::cpu::workspace_free(ptr).is_ok()
    {
        return 0;
    }
    guard(|| {
        let dev = DLDevice::new(device_type, device_id);
        // SAFETY: the C contract: `ptr` came from TVMBackendAllocWorkspace for this device.
        unsafe { device::api(dev)?.free_workspace(dev, ptr) }
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
        crate::packed_func::env_capi::register(name, ptr)
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
        crate::packed_func::error::set_last_error(&Error::value(
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
        crate::packed_func::error::set_last_error(&Error::value(
            "TVMBackendParallelBarrier: penv is NULL",
        ));
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
    nbytes: c_int,
) -> c_int {
    let _ = nbytes; // the size of `*handle`'s pointee: unused, as in TVM
    if handle.is_null() {
        crate::packed_func::error::set_last_error(&Error::value(
            "TVMBackendRunOnce: handle is NULL",
        ));
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
    unsafe fn move_in(&mut self, v: TVMValue, code: c_int) -> crate::packed_func::Result<()> {
        let value = match code {
            tc::OBJECT_RVALUE_REF_ARG => {
                return Err(Error::type_error(
                    "AnyList: an rvalue reference cannot be stored",
                ))
            }
            // SAFETY: caller contract.
            tc::STR => TVMValue {
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
            c => return Err(Error::type_error(format!("AnyList: unknown type code {c}"))),
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

fn check_anylist(
    anylist: *mut c_void,
    index: c_int,
    args_ok: bool,
) -> crate::packed_func::Result<()> {
    if anylist.is_null() || !args_ok {
        return Err(Error::value("AnyList: NULL list or arguments"));
    }
    if index < 0 {
        return Err(Error::index(format!("AnyList: negative index {index}")));
    }
    Ok(())
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
    guard(|| {
        check_anylist(
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
    })
}

/// Empties AnyList cell `index`, releasing what it holds (`TVMBackendAnyListResetItem`).
///
/// # Safety
/// `anylist` holds at least `index + 1` cells.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListResetItem(anylist: *mut c_void, index: c_int) -> c_int {
    guard(|| {
        check_anylist(anylist, index, true)?;
        // SAFETY: caller contract on sizes.
        unsafe { (*(anylist as *mut AnyCell).add(index as usize)).reset() };
        Ok(())
    })
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
    guard(|| {
        check_anylist(
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
    })
}
