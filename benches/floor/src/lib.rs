//! A do-nothing implementation of the classic C ABI, for measuring the size floor: every
//! exported function fails with "not implemented" through one panic/error boundary, and
//! `TVMGetLastError` returns the message. Written small: one non-generic boundary, static
//! messages.

use std::cell::Cell;
use std::ffi::{c_char, c_int, CStr};
use std::panic::catch_unwind;

thread_local! {
    static LAST: Cell<&'static CStr> = const { Cell::new(c"") };
}

/// The boundary every entry goes through: runs `f`; an error or a panic sets the last error
/// and gives -1.
#[inline(never)]
fn boundary(f: fn() -> Result<c_int, &'static CStr>) -> c_int {
    match catch_unwind(f) {
        Ok(Ok(v)) => v,
        Ok(Err(m)) => {
            LAST.with(|l| l.set(m));
            -1
        }
        Err(_) => {
            LAST.with(|l| l.set(c"panicked"));
            -1
        }
    }
}

/// The last error of this thread.
#[no_mangle]
pub extern "C" fn TVMGetLastError() -> *const c_char {
    LAST.with(|l| l.get().as_ptr())
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMAPISetLastError() -> c_int {
    boundary(|| Err(c"TVMAPISetLastError: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMAPISetLastPythonError() -> c_int {
    boundary(|| Err(c"TVMAPISetLastPythonError: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMArrayAlloc() -> c_int {
    boundary(|| Err(c"TVMArrayAlloc: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMArrayCopyFromBytes() -> c_int {
    boundary(|| Err(c"TVMArrayCopyFromBytes: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMArrayCopyFromTo() -> c_int {
    boundary(|| Err(c"TVMArrayCopyFromTo: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMArrayCopyToBytes() -> c_int {
    boundary(|| Err(c"TVMArrayCopyToBytes: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMArrayFree() -> c_int {
    boundary(|| Err(c"TVMArrayFree: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMArrayFromDLPack() -> c_int {
    boundary(|| Err(c"TVMArrayFromDLPack: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMArrayGetTypeIndex() -> c_int {
    boundary(|| Err(c"TVMArrayGetTypeIndex: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMArrayToDLPack() -> c_int {
    boundary(|| Err(c"TVMArrayToDLPack: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendAllocWorkspace() -> c_int {
    boundary(|| Err(c"TVMBackendAllocWorkspace: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendAnyListMoveFromPackedReturn() -> c_int {
    boundary(|| Err(c"TVMBackendAnyListMoveFromPackedReturn: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendAnyListResetItem() -> c_int {
    boundary(|| Err(c"TVMBackendAnyListResetItem: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendAnyListSetPackedArg() -> c_int {
    boundary(|| Err(c"TVMBackendAnyListSetPackedArg: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendFreeWorkspace() -> c_int {
    boundary(|| Err(c"TVMBackendFreeWorkspace: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendGetFuncFromEnv() -> c_int {
    boundary(|| Err(c"TVMBackendGetFuncFromEnv: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendParallelBarrier() -> c_int {
    boundary(|| Err(c"TVMBackendParallelBarrier: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendParallelLaunch() -> c_int {
    boundary(|| Err(c"TVMBackendParallelLaunch: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendRegisterEnvCAPI() -> c_int {
    boundary(|| Err(c"TVMBackendRegisterEnvCAPI: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendRegisterSystemLibSymbol() -> c_int {
    boundary(|| Err(c"TVMBackendRegisterSystemLibSymbol: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMBackendRunOnce() -> c_int {
    boundary(|| Err(c"TVMBackendRunOnce: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMByteArrayFree() -> c_int {
    boundary(|| Err(c"TVMByteArrayFree: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMCFuncSetReturn() -> c_int {
    boundary(|| Err(c"TVMCFuncSetReturn: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMCbArgToReturn() -> c_int {
    boundary(|| Err(c"TVMCbArgToReturn: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMDLManagedTensorCallDeleter() -> c_int {
    boundary(|| Err(c"TVMDLManagedTensorCallDeleter: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMDeviceAllocDataSpace() -> c_int {
    boundary(|| Err(c"TVMDeviceAllocDataSpace: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMDeviceAllocDataSpaceWithScope() -> c_int {
    boundary(|| Err(c"TVMDeviceAllocDataSpaceWithScope: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMDeviceCopyDataFromTo() -> c_int {
    boundary(|| Err(c"TVMDeviceCopyDataFromTo: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMDeviceFreeDataSpace() -> c_int {
    boundary(|| Err(c"TVMDeviceFreeDataSpace: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMDeviceLoadPlugin() -> c_int {
    boundary(|| Err(c"TVMDeviceLoadPlugin: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMDeviceRegisterPlugin() -> c_int {
    boundary(|| Err(c"TVMDeviceRegisterPlugin: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMDropLastPythonError() -> c_int {
    boundary(|| Err(c"TVMDropLastPythonError: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMFuncCall() -> c_int {
    boundary(|| Err(c"TVMFuncCall: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMFuncCreateFromCFunc() -> c_int {
    boundary(|| Err(c"TVMFuncCreateFromCFunc: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMFuncFree() -> c_int {
    boundary(|| Err(c"TVMFuncFree: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMFuncGetGlobal() -> c_int {
    boundary(|| Err(c"TVMFuncGetGlobal: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMFuncListGlobalNames() -> c_int {
    boundary(|| Err(c"TVMFuncListGlobalNames: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMFuncRegisterGlobal() -> c_int {
    boundary(|| Err(c"TVMFuncRegisterGlobal: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMFuncRemoveGlobal() -> c_int {
    boundary(|| Err(c"TVMFuncRemoveGlobal: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMGetLastBacktrace() -> c_int {
    boundary(|| Err(c"TVMGetLastBacktrace: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMGetLastPythonError() -> c_int {
    boundary(|| Err(c"TVMGetLastPythonError: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMModFree() -> c_int {
    boundary(|| Err(c"TVMModFree: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMModGetFunction() -> c_int {
    boundary(|| Err(c"TVMModGetFunction: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMModImport() -> c_int {
    boundary(|| Err(c"TVMModImport: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMModLoadFromFile() -> c_int {
    boundary(|| Err(c"TVMModLoadFromFile: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMObjectDerivedFrom() -> c_int {
    boundary(|| Err(c"TVMObjectDerivedFrom: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMObjectFree() -> c_int {
    boundary(|| Err(c"TVMObjectFree: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMObjectGetTypeIndex() -> c_int {
    boundary(|| Err(c"TVMObjectGetTypeIndex: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMObjectRetain() -> c_int {
    boundary(|| Err(c"TVMObjectRetain: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMObjectTypeIndex2Key() -> c_int {
    boundary(|| Err(c"TVMObjectTypeIndex2Key: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMObjectTypeKey2Index() -> c_int {
    boundary(|| Err(c"TVMObjectTypeKey2Index: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMSetStream() -> c_int {
    boundary(|| Err(c"TVMSetStream: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMStreamCreate() -> c_int {
    boundary(|| Err(c"TVMStreamCreate: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMStreamFree() -> c_int {
    boundary(|| Err(c"TVMStreamFree: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMStreamStreamSynchronize() -> c_int {
    boundary(|| Err(c"TVMStreamStreamSynchronize: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMStreamSync() -> c_int {
    boundary(|| Err(c"TVMStreamSync: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMSynchronize() -> c_int {
    boundary(|| Err(c"TVMSynchronize: not implemented in the floor build"))
}

/// Not implemented.
#[no_mangle]
pub extern "C" fn TVMThrowLastError() -> c_int {
    boundary(|| Err(c"TVMThrowLastError: not implemented in the floor build"))
}

/// The runtime's stand-ins for std's default panic and allocation-error hooks, put in place
/// of std's by the link arguments of build.rs.
#[path = "../../../src/c_api/std_hooks.rs"]
#[allow(dead_code)] // `write_panic` is public for the runtime's own use
mod std_hooks;
