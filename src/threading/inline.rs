//! Parallel launches without a thread pool (no `threads` feature): every launch runs as one
//! task on the calling thread, so the library starts no threads of its own.

use super::{ParallelGroupEnv, ParallelLambda};
use crate::packed_func::error::{set_last_error_message, Error, Result};
use std::ffi::c_void;

/// Runs a parallel launch (`TVMBackendParallelLaunch`) as one task on the calling thread;
/// more than one task asked for explicitly is an error naming the missing feature.
///
/// # Safety
/// `f` must be callable with `cdata`.
pub unsafe fn parallel_launch(f: ParallelLambda, cdata: *mut c_void, num_task: i32) -> i32 {
    if num_task < 0 {
        set_last_error_message(format!(
            "ValueError: TVMBackendParallelLaunch: negative task count {num_task}"
        ));
        return -1;
    }
    if num_task > 1 {
        set_last_error_message(format!(
            "ValueError: TVMBackendParallelLaunch: {num_task} tasks requested but this library \
             was built without `threads` (launches run as one task on the calling thread)"
        ));
        return -1;
    }
    let mut env = ParallelGroupEnv {
        sync_handle: std::ptr::null_mut(),
        num_task: 1,
    };
    // SAFETY: caller contract.
    if unsafe { f(0, &mut env, cdata) } != 0 {
        -1
    } else {
        0
    }
}

/// The barrier of a one-task launch (`TVMBackendParallelBarrier`): nothing to wait for.
///
/// # Safety
/// None needed: `penv` is not read.
pub unsafe fn parallel_barrier(_task_id: i32, _penv: *mut ParallelGroupEnv) -> i32 {
    0
}

/// Threads a launch uses (`runtime.NumThreads`): one, the caller.
pub fn num_threads() -> usize {
    1
}

/// `runtime.config_threadpool`: one thread (or 0, every core, which is one here) and at most
/// one CPU are accepted and change nothing; more is an error naming the missing feature.
pub fn config_threadpool(_mode: i32, nthreads: i64, cpus: &[i64]) -> Result<()> {
    if (0..=1).contains(&nthreads) && cpus.len() <= 1 {
        return Ok(());
    }
    Err(Error::value_fmt(format_args!(
        "runtime.config_threadpool: {nthreads} threads on {} CPUs asked for, but this library \
         was built without `threads` (launches run on the calling thread)",
        cpus.len()
    )))
}
