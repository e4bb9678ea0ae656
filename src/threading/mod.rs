//! CPU parallelism for compiled code (placeholder until the pool lands: runs tasks in turn
//! with one task per launch).

use std::ffi::c_void;

/// `TVMParallelGroupEnv`.
#[repr(C)]
pub struct ParallelGroupEnv {
    /// Synchronisation state of the launch.
    pub sync_handle: *mut c_void,
    /// Number of tasks in the launch.
    pub num_task: i32,
}

/// `FTVMParallelLambda`.
pub type ParallelLambda = unsafe extern "C" fn(i32, *mut ParallelGroupEnv, *mut c_void) -> i32;

/// Runs a parallel launch.
///
/// # Safety
/// `f` must be safe to call with `cdata`.
pub unsafe fn parallel_launch(f: ParallelLambda, cdata: *mut c_void, _num_task: i32) -> i32 {
    let mut env = ParallelGroupEnv {
        sync_handle: std::ptr::null_mut(),
        num_task: 1,
    };
    // SAFETY: caller contract.
    unsafe { f(0, &mut env, cdata) }
}

/// Barrier between the tasks of a launch.
///
/// # Safety
/// `penv` must be the env of a running launch.
pub unsafe fn parallel_barrier(_task_id: i32, _penv: *mut ParallelGroupEnv) -> i32 {
    0
}

/// Threads a launch uses.
pub fn num_threads() -> usize {
    1
}

/// Reconfigures the pool.
pub fn config_threadpool(_mode: i32, _nthreads: i32, _cpus: &[u32]) {}
