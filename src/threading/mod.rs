//! CPU parallelism for compiled code: the persistent thread pool behind
//! `TVMBackendParallelLaunch` / `TVMBackendParallelBarrier`.
//!
//! Design (and why it differs from the reference, which keeps one pool per application
//! thread and so oversubscribes the machine when several threads run models):
//! - one process-wide pool of `n - 1` workers; the launching thread runs task 0;
//! - the tasks of a launch are claimed from one counter: a worker that wakes claims the next
//!   task, and the launcher, once its own task is done, runs every task still unclaimed, so
//!   a launch never waits for a worker that has not got a core (it waits only for tasks a
//!   running thread has started). Kernels that call `TVMBackendParallelBarrier` still get
//!   one thread per task: no thread claims a second task before finishing its first, and no
//!   task passes the barrier before all have started (see `pool.rs`);
//! - idle workers spin for up to `TVM_THREAD_POOL_SPIN_COUNT` iterations, then sleep on a
//!   futex; a spinning thread that notices it was descheduled marks the machine as
//!   oversubscribed, and for the next 100 ms every spin (workers, launcher, barrier) is cut
//!   to about a microsecond before sleeping, so no core is burnt waiting (a barrier wait,
//!   or the launcher's wait for a task a worker has started, of over 1 ms counts as such a
//!   sign too);
//! - on an oversubscribed machine a lambda that has been seen calling the barrier runs as a
//!   single task on the caller when the pool may choose (`num_task = 0`): its tasks would
//!   each need a core at the same time;
//! - a launch asking for more tasks than threads is an error, like the reference;
//! - a launch from inside a task (nested parallelism), or while another application thread
//!   holds the pool, runs its tasks on the calling thread with `num_task = 1` when the
//!   caller let the pool choose (`num_task = 0`, what TVM's code generator emits) — each
//!   model instance then keeps one core busy instead of fighting for all of them (and for
//!   50 ms after such a collision every `num_task = 0` launch does the same); an
//!   explicit `num_task > 1` waits for the pool instead, since its tasks must run together.

#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(feature = "threads")]
mod pool;
#[cfg(not(feature = "threads"))]
#[path = "inline.rs"]
mod pool;

pub use pool::{config_threadpool, num_threads, parallel_barrier, parallel_launch};

use crate::object::containers::{ArrayObj, StringObj};
use crate::packed_func::error::Error;
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::RetValue;
use std::ffi::{c_int, c_void};

/// `TVMParallelGroupEnv`.
#[repr(C)]
pub struct ParallelGroupEnv {
    /// Synchronisation state of the launch (the barrier).
    pub sync_handle: *mut c_void,
    /// Number of tasks in the launch.
    pub num_task: i32,
}

/// `FTVMParallelLambda`.
pub type ParallelLambda =
    unsafe extern "C" fn(task_id: c_int, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> c_int;

/// Settings read from the environment, parsed without touching the process environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Threads in a launch (the launcher included).
    pub threads: usize,
    /// Whether workers are pinned to cores.
    pub bind: bool,
    /// Spin iterations before a waiting thread sleeps.
    pub spin_count: u32,
}

impl PoolConfig {
    /// Builds the configuration from variable lookups (`TVM_NUM_THREADS`, else
    /// `OMP_NUM_THREADS`, else the available cores; `TVM_BIND_THREADS`;
    /// `TVM_THREAD_POOL_SPIN_COUNT`).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>, cores: usize) -> PoolConfig {
        Self::from_lookup_dyn(&get, cores)
    }

    /// [`PoolConfig::from_lookup`]'s body, once for every kind of lookup.
    #[inline(never)]
    fn from_lookup_dyn(get: &dyn Fn(&str) -> Option<String>, cores: usize) -> PoolConfig {
        /// Variable `k` as an integer (out of line: one copy for the four).
        #[inline(never)]
        fn lookup(get: &dyn Fn(&str) -> Option<String>, k: &str) -> Option<i64> {
            get(k).and_then(|v| int(&v))
        }
        let parse = |k: &str| lookup(get, k);
        let threads = parse("TVM_NUM_THREADS")
            .or_else(|| parse("OMP_NUM_THREADS"))
            .filter(|&n| n > 0)
            .map(|n| n as usize)
            .unwrap_or(cores)
            .clamp(1, 1024);
        let bind = parse("TVM_BIND_THREADS").map(|v| v != 0).unwrap_or(false);
        let spin_count = parse("TVM_THREAD_POOL_SPIN_COUNT")
            .filter(|&v| v >= 0)
            .map(|v| v.min(u32::MAX as i64) as u32)
            .unwrap_or(200_000);
        PoolConfig {
            threads,
            bind,
            spin_count,
        }
    }

    /// The configuration of this process.
    pub fn from_env() -> PoolConfig {
        Self::from_lookup(|k| std::env::var(k).ok(), physical_cores())
    }
}

/// The physical cores this process may run on: the CPUs of its affinity mask, counted once
/// per (package, core) pair from sysfs, so that SMT siblings share one thread. Where the
/// topology cannot be read, every available logical CPU counts.
///
/// This is a documented difference from the reference, which halves the logical CPU count
/// on x86-64 on the guess that SMT is on (one thread on a 2-core machine without SMT).
pub fn physical_cores() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is this thread; the size matches the set.
        let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } == 0;
        // SAFETY: a filled set.
        let count = unsafe { libc::CPU_COUNT(&set) } as usize;
        let logical = cgroup::available_parallelism(ok.then_some(count));
        if ok {
            // The distinct (package, core) pairs, in a list (a few hundred at most: less code
            // than a hash set).
            let mut cores: Vec<(i64, i64)> = Vec::new();
            for cpu in 0..libc::CPU_SETSIZE as usize {
                // SAFETY: `cpu` is below CPU_SETSIZE.
                if !unsafe { libc::CPU_ISSET(cpu, &set) } {
                    continue;
                }
                match (
                    read_topology(cpu, "physical_package_id"),
                    read_topology(cpu, "core_id"),
                ) {
                    (Some(p), Some(c)) => {
                        if !cores.iter().any(|(q, d)| *q == p && *d == c) {
                            cores.push((p, c));
                        }
                    }
                    _ => return logical,
                };
            }
            if !cores.is_empty() {
                return cores.len().min(logical);
            }
        }
        logical
    }
    #[cfg(not(target_os = "linux"))]
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A number of a CPU's sysfs topology; `None` when it cannot be read.
#[cfg(target_os = "linux")]
#[inline(never)]
fn read_topology(cpu: usize, what: &str) -> Option<i64> {
    crate::packed_func::text::read_file_text(
        format!("/sys/devices/system/cpu/cpu{cpu}/topology/{what}").as_ref(),
    )
    .and_then(|s| int(&s))
}

/// `s`, trimmed, as an integer (one copy of the parsing for the settings, the topology and
/// the CPU lists; out of line where there are several callers).
#[cfg_attr(feature = "threads", inline(never))]
fn int(s: &str) -> Option<i64> {
    s.trim_ascii().parse().ok()
}

/// Registers the thread-pool functions (`runtime.NumThreads`, `runtime.config_threadpool`).
pub(crate) fn register(r: &mut Registrar) {
    r.add("runtime.NumThreads", |_a, rv| {
        *rv = RetValue::Int(num_threads() as i64);
        Ok(())
    });
    r.add("runtime.config_threadpool", |a, _rv| {
        const USAGE: &str = "runtime.config_threadpool expects (mode, nthreads[, cpus...]) or \
                             (mode, nthreads, [cpu strings][, max_concurrency])";
        if a.len() < 2 {
            return Err(Error::value(USAGE));
        }
        let mode = a.i64(0)?;
        let mode = i32::try_from(mode).map_err(|_| {
            Error::value_fmt(format_args!(
                "runtime.config_threadpool: mode {mode} is out of range"
            ))
        })?;
        let mut cpus = Vec::new();
        if let Some(list) = (a.len() >= 3)
            .then(|| a.downcast::<ArrayObj>(2).ok())
            .flatten()
        {
            // TVM's form: the CPU ids as an array of strings, then the maximum concurrency
            // (accepted and unused: the pool's size is `nthreads`).
            if a.len() > 4 {
                return Err(Error::value(USAGE));
            }
            if a.len() == 4 {
                a.i64(3)?;
            }
            for item in &list.items {
                let Some(text) = item
                    .as_ref()
                    .and_then(|o| o.downcast_ref::<StringObj>())
                    .map(|s| s.as_str())
                else {
                    return Err(Error::type_error(
                        "runtime.config_threadpool: the CPU list must hold strings",
                    ));
                };
                match int(text) {
                    Some(id) => cpus.push(id),
                    None => {
                        return Err(Error::value_fmt(format_args!(
                            "runtime.config_threadpool: CPU id '{text}' is not a number"
                        )))
                    }
                }
            }
        } else {
            for i in 2..a.len() {
                cpus.push(a.i64(i)?);
            }
        }
        config_threadpool(mode, a.i64(1)?, &cpus)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_parsing() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = PoolConfig::from_lookup(env(&[]), 8);
        assert_eq!((c.threads, c.bind, c.spin_count), (8, false, 200_000));
        let c = PoolConfig::from_lookup(
            env(&[("TVM_NUM_THREADS", "3"), ("OMP_NUM_THREADS", "5")]),
            8,
        );
        assert_eq!(c.threads, 3);
        let c = PoolConfig::from_lookup(env(&[("OMP_NUM_THREADS", "5")]), 8);
        assert_eq!(c.threads, 5);
        let c = PoolConfig::from_lookup(env(&[("TVM_NUM_THREADS", "zero")]), 2);
        assert_eq!(c.threads, 2);
        let c = PoolConfig::from_lookup(
            env(&[
                ("TVM_BIND_THREADS", "1"),
                ("TVM_THREAD_POOL_SPIN_COUNT", "0"),
            ]),
            2,
        );
        assert!(c.bind);
        assert_eq!(c.spin_count, 0);
    }
}
