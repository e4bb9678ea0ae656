//! The pool itself: workers with per-worker mailboxes, a centralised barrier, fallbacks for
//! nested and concurrent launches.

use super::{ParallelGroupEnv, ParallelLambda, PoolConfig};
use crate::packed_func::error::{last_error_string, set_last_error_message};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Pads a value to its own cache line so that workers do not share lines.
#[repr(align(64))]
struct Padded<T>(T);

/// A barrier for the tasks of one launch: a count of arrivals and a phase number.
#[repr(C)]
struct Barrier {
    arrived: Padded<AtomicUsize>,
    phase: Padded<AtomicUsize>,
    spin_count: u32,
}

impl Barrier {
    fn new(spin_count: u32) -> Barrier {
        Barrier {
            arrived: Padded(AtomicUsize::new(0)),
            phase: Padded(AtomicUsize::new(0)),
            spin_count,
        }
    }

    fn wait(&self, num_task: usize) {
        let phase = self.phase.0.load(Ordering::Acquire);
        if self.arrived.0.fetch_add(1, Ordering::AcqRel) + 1 == num_task {
            self.arrived.0.store(0, Ordering::Relaxed);
            self.phase.0.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.phase.0.load(Ordering::Acquire) == phase {
            if spins < self.spin_count.max(1000) {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// One worker's mailbox: the launch generation it should run, and whether it sleeps.
struct Mailbox {
    generation: AtomicU32,
    sleeping: AtomicBool,
}

fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT on a live, aligned u32; returns on wake, signal or value change.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}

/// The current job; written by the launcher before it posts to mailboxes, read by workers
/// after they see their mailbox change, stable until every participant has finished.
struct Job {
    f: AtomicUsize,
    cdata: AtomicPtr<c_void>,
    num_task: AtomicI32,
}

struct Pool {
    config: PoolConfig,
    busy: AtomicBool,
    shutdown: AtomicBool,
    job: Job,
    mailboxes: Vec<Padded<Mailbox>>,
    pending: Padded<AtomicU32>,
    launcher_sleeping: AtomicBool,
    failed: AtomicBool,
    error: Mutex<Option<String>>,
    barrier: Barrier,
    launches: AtomicU32,
    /// Workers that started (at most `config.threads - 1`).
    started: AtomicUsize,
}

/// Spin iterations a launcher waits for its workers before sleeping (a few microseconds).
const LAUNCHER_SPIN: u32 = 2000;

thread_local! {
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

static POOL: AtomicPtr<Pool> = AtomicPtr::new(std::ptr::null_mut());
static POOL_INIT: Mutex<()> = Mutex::new(());

fn bind_to_core(core: usize) {
    // SAFETY: a zeroed cpu_set_t with one bit set, applied to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

impl Pool {
    /// Starts a pool; `cpus`, when given, lists the cores workers are pinned to.
    fn start(config: PoolConfig, cpus: &[u32]) -> &'static Pool {
        let workers = config.threads.saturating_sub(1);
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            barrier: Barrier::new(config.spin_count),
            config,
            busy: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            job: Job {
                f: AtomicUsize::new(0),
                cdata: AtomicPtr::new(std::ptr::null_mut()),
                num_task: AtomicI32::new(0),
            },
            mailboxes: (0..workers)
                .map(|_| {
                    Padded(Mailbox {
                        generation: AtomicU32::new(0),
                        sleeping: AtomicBool::new(false),
                    })
                })
                .collect(),
            pending: Padded(AtomicU32::new(0)),
            launcher_sleeping: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            launches: AtomicU32::new(0),
            started: AtomicUsize::new(0),
        }));
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        for w in 0..workers {
            let core = if !cpus.is_empty() {
                Some(cpus[(w + 1) % cpus.len()] as usize)
            } else if pool.config.bind {
                Some((w + 1) % cores)
            } else {
                None
            };
            let spawned = spawn_worker(format!("tvm-worker-{}", w + 1), move || {
                if let Some(core) = core {
                    bind_to_core(core);
                }
                pool.worker_loop(w);
            });
            if spawned.is_err() {
                // A worker that cannot start (thread limit, memory) shrinks the pool to the
                // workers that did; launches then get fewer threads instead of the host an abort.
                pool.started.store(w, Ordering::Release);
                return pool;
            }
        }
        pool.started.store(workers, Ordering::Release);
        pool
    }

    /// Threads a launch can use: the launcher and the workers that started.
    fn threads(&self) -> usize {
        self.config
            .threads
            .min(self.started.load(Ordering::Acquire) + 1)
    }

    fn worker_loop(&'static self, w: usize) {
        let mb = &self.mailboxes[w].0;
        let mut seen = 0u32;
        loop {
            let mut spins = 0u32;
            let mut current = mb.generation.load(Ordering::Acquire);
            while current == seen {
                if spins < self.config.spin_count {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    mb.sleeping.store(true, Ordering::SeqCst);
                    if mb.generation.load(Ordering::SeqCst) == seen {
                        futex_wait(&mb.generation, seen);
                    }
                    mb.sleeping.store(false, Ordering::SeqCst);
                    spins = 0;
                }
                current = mb.generation.load(Ordering::Acquire);
            }
            seen = current;
            if self.shutdown.load(Ordering::Acquire) {
                return;
            }
            self.run_task(w as i32 + 1);
            if self.pending.0.fetch_sub(1, Ordering::AcqRel) == 1
                && self.launcher_sleeping.load(Ordering::SeqCst)
            {
                futex_wake(&self.pending.0);
            }
        }
    }

    fn run_task(&self, task_id: i32) {
        let f = self.job.f.load(Ordering::Relaxed);
        let cdata = self.job.cdata.load(Ordering::Relaxed);
        let mut env = ParallelGroupEnv {
            sync_handle: &self.barrier as *const Barrier as *mut c_void,
            num_task: self.job.num_task.load(Ordering::Relaxed),
        };
        // SAFETY: `f` was stored from a valid ParallelLambda by `launch`.
        let f: ParallelLambda = unsafe { std::mem::transmute::<usize, ParallelLambda>(f) };
        IN_TASK.with(|t| t.set(true));
        // SAFETY: the launcher's contract makes `f` callable with `cdata` from any thread.
        let r = unsafe { f(task_id, &mut env, cdata) };
        IN_TASK.with(|t| t.set(false));
        if r != 0 {
            self.failed.store(true, Ordering::Relaxed);
            let msg = last_error_string();
            let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
            if e.is_none() {
                *e = Some(msg);
            }
        }
    }

    /// Runs a launch on the pool; the caller holds `busy`.
    ///
    /// # Safety
    /// `f` callable with `cdata` concurrently.
    unsafe fn launch(&self, f: ParallelLambda, cdata: *mut c_void, num_task: usize) -> i32 {
        self.job.f.store(f as usize, Ordering::Relaxed);
        self.job.cdata.store(cdata, Ordering::Relaxed);
        self.job.num_task.store(num_task as i32, Ordering::Relaxed);
        self.failed.store(false, Ordering::Relaxed);
        self.pending.0.store(num_task as u32 - 1, Ordering::Relaxed);
        let generation = self
            .launches
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        for mb in &self.mailboxes[..num_task - 1] {
            mb.0.generation.store(generation, Ordering::SeqCst);
            if mb.0.sleeping.load(Ordering::SeqCst) {
                futex_wake(&mb.0.generation);
            }
        }
        self.run_task(0);
        // Spin briefly for the workers, then sleep: a sleeping launcher frees its core, so
        // a worker that is runnable but has no core (another process busy on the other one)
        // gets pulled onto it at once instead of after the other process's time slice.
        let mut spins = 0u32;
        while self.pending.0.load(Ordering::Acquire) != 0 {
            if spins < LAUNCHER_SPIN {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            self.launcher_sleeping.store(true, Ordering::SeqCst);
            loop {
                let p = self.pending.0.load(Ordering::SeqCst);
                if p == 0 {
                    break;
                }
                futex_wait(&self.pending.0, p);
            }
            self.launcher_sleeping.store(false, Ordering::SeqCst);
        }
        if self.failed.load(Ordering::Relaxed) {
            let msg = self
                .error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or_default();
            set_last_error_message(msg);
            return -1;
        }
        0
    }
}

#[cfg(test)]
thread_local! {
    /// Test hook: worker indices from this one on fail to start.
    static FAIL_SPAWN_FROM: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Starts a worker thread; an error when the system refuses one.
fn spawn_worker(name: String, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    #[cfg(test)]
    {
        let index: usize = name
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if index > FAIL_SPAWN_FROM.with(Cell::get) {
            return Err(std::io::Error::other("test hook: worker refused"));
        }
    }
    std::thread::Builder::new().name(name).spawn(f).map(drop)
}

fn pool() -> &'static Pool {
    let p = POOL.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: pools are leaked, never freed.
        return unsafe { &*p };
    }
    let _g = POOL_INIT.lock().unwrap_or_else(|e| e.into_inner());
    let p = POOL.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: as above.
        return unsafe { &*p };
    }
    let pool = Pool::start(PoolConfig::from_env(), &[]);
    POOL.store(pool as *const Pool as *mut Pool, Ordering::Release);
    pool
}

/// Runs `num_task` tasks in serial on this thread with a private barrier (`num_task` must be
/// 1 for barriers to be meaningful).
///
/// # Safety
/// `f` callable with `cdata`.
unsafe fn run_inline(f: ParallelLambda, cdata: *mut c_void) -> i32 {
    let barrier = Barrier::new(0);
    let mut env = ParallelGroupEnv {
        sync_handle: &barrier as *const Barrier as *mut c_void,
        num_task: 1,
    };
    let was = IN_TASK.with(|t| t.replace(true));
    // SAFETY: caller contract.
    let r = unsafe { f(0, &mut env, cdata) };
    IN_TASK.with(|t| t.set(was));
    if r != 0 {
        -1
    } else {
        0
    }
}

/// Runs a parallel launch (`TVMBackendParallelLaunch`): `num_task = 0` lets the pool choose.
///
/// # Safety
/// `f` must be callable with `cdata` from several threads at once.
pub unsafe fn parallel_launch(f: ParallelLambda, cdata: *mut c_void, num_task: i32) -> i32 {
    if num_task < 0 {
        set_last_error_message(format!(
            "ValueError: TVMBackendParallelLaunch: negative task count {num_task}"
        ));
        return -1;
    }
    if IN_TASK.with(|t| t.get()) {
        // SAFETY: forwarded contract.
        return unsafe { run_inline(f, cdata) };
    }
    let pool = pool();
    let threads = pool.threads();
    let n = if num_task == 0 {
        threads
    } else {
        num_task as usize
    };
    if n > threads {
        set_last_error_message(format!(
            "ValueError: TVMBackendParallelLaunch: {n} tasks requested but the pool has {threads} \
             threads (set TVM_NUM_THREADS or runtime.config_threadpool)"
        ));
        return -1;
    }
    if n <= 1 {
        // SAFETY: forwarded contract.
        return unsafe { run_inline(f, cdata) };
    }
    loop {
        if pool
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: we hold the pool; forwarded contract on `f`.
            let r = unsafe { pool.launch(f, cdata, n) };
            pool.busy.store(false, Ordering::Release);
            return r;
        }
        if num_task == 0 {
            // Another application thread holds the pool: run on this thread alone.
            // SAFETY: forwarded contract.
            return unsafe { run_inline(f, cdata) };
        }
        std::thread::yield_now();
    }
}

/// Waits until every task of the launch reaches the barrier (`TVMBackendParallelBarrier`).
///
/// # Safety
/// `penv` must be the env handed to a running task by [`parallel_launch`].
pub unsafe fn parallel_barrier(_task_id: i32, penv: *mut ParallelGroupEnv) -> i32 {
    // SAFETY: caller contract: penv and its sync handle come from a running launch.
    unsafe {
        let env = &*penv;
        let barrier = &*(env.sync_handle as *const Barrier);
        barrier.wait(env.num_task.max(1) as usize);
    }
    0
}

/// Threads a launch with `num_task = 0` uses (`runtime.NumThreads`).
pub fn num_threads() -> usize {
    pool().threads()
}

/// Reconfigures the pool (`runtime.config_threadpool`): `nthreads > 0` sets the thread count
/// (else all cores); `mode` (1 big cores, -1 little cores, 0 default) only selects among
/// cores on asymmetric machines, which Linux does not describe uniformly, so all cores count
/// as big here; `cpus` pins workers to the listed cores when given.
pub fn config_threadpool(_mode: i32, nthreads: i32, cpus: &[u32]) {
    let _g = POOL_INIT.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = PoolConfig::from_env();
    if nthreads > 0 {
        config.threads = nthreads as usize;
    } else if !cpus.is_empty() {
        config.threads = cpus.len();
    }
    let old = POOL.load(Ordering::Acquire);
    if !old.is_null() {
        // SAFETY: pools are leaked; take it so no launch runs while it shuts down.
        let old = unsafe { &*old };
        if old.config == config && cpus.is_empty() {
            return;
        }
        while old
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        old.shutdown.store(true, Ordering::Release);
        let generation = old.launches.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        for mb in &old.mailboxes {
            mb.0.generation.store(generation, Ordering::SeqCst);
            futex_wake(&mb.0.generation);
        }
    }
    let pool = Pool::start(config, cpus);
    POOL.store(pool as *const Pool as *mut Pool, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    struct Shared {
        hits: Vec<AtomicU64>,
        phases: Vec<AtomicU64>,
        bad: AtomicBool,
    }

    unsafe extern "C" fn count(task: i32, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        // SAFETY: the launch passes the `Shared` this test created, alive until it returns.
        let s = unsafe { &*(cdata as *const Shared) };
        // SAFETY: the pool passes a live env to every task.
        let n = unsafe { (*penv).num_task } as usize;
        s.hits[task as usize].fetch_add(1, Ordering::SeqCst);
        for phase in 1..=5u64 {
            s.phases[task as usize].store(phase, Ordering::SeqCst);
            // SAFETY: `penv` is the env of the running task.
            unsafe { parallel_barrier(task, penv) };
            for t in 0..n {
                if s.phases[t].load(Ordering::SeqCst) < phase {
                    s.bad.store(true, Ordering::SeqCst);
                }
            }
            // SAFETY: `penv` is the env of the running task.
            unsafe { parallel_barrier(task, penv) };
        }
        0
    }

    fn shared() -> Shared {
        Shared {
            hits: (0..64).map(|_| AtomicU64::new(0)).collect(),
            phases: (0..64).map(|_| AtomicU64::new(0)).collect(),
            bad: AtomicBool::new(false),
        }
    }

    #[test]
    fn tasks_run_once_and_barriers_hold() {
        for n in [0, 1, 2] {
            let s = shared();
            // SAFETY: the task function is callable from several threads with the data passed.
            let r = unsafe { parallel_launch(count, &s as *const _ as *mut c_void, n) };
            assert_eq!(r, 0);
            // With num_task = 0 the launch may run inline (1 task) if another test's thread
            // holds the pool at that moment; otherwise it uses every thread.
            let total: u64 = s.hits.iter().map(|h| h.load(Ordering::SeqCst)).sum();
            let used = if n == 0 { total as usize } else { n as usize };
            assert!(n != 0 || used == 1 || used == num_threads());
            for t in 0..64 {
                let want = u64::from(t < used);
                assert_eq!(s.hits[t].load(Ordering::SeqCst), want, "task {t} of {used}");
            }
            assert!(!s.bad.load(Ordering::SeqCst));
        }
    }

    unsafe extern "C" fn fail_odd(task: i32, _p: *mut ParallelGroupEnv, _c: *mut c_void) -> i32 {
        // SAFETY: the pool passes a live env to every task.
        if task % 2 == 1 || unsafe { (*_p).num_task } == 1 {
            set_last_error_message("ValueError: task failed".into());
            return -1;
        }
        0
    }

    #[test]
    fn errors_propagate_and_too_many_tasks_fail() {
        // SAFETY: the task function is callable from several threads with the data passed.
        let r = unsafe { parallel_launch(fail_odd, std::ptr::null_mut(), 0) };
        assert_eq!(r, -1);
        assert_eq!(last_error_string(), "ValueError: task failed");
        // SAFETY: the task function is callable from several threads with the data passed.
        let r = unsafe { parallel_launch(fail_odd, std::ptr::null_mut(), 100_000) };
        assert_eq!(r, -1);
        assert!(last_error_string().contains("100000 tasks"));
    }

    unsafe extern "C" fn nested(task: i32, _p: *mut ParallelGroupEnv, c: *mut c_void) -> i32 {
        // SAFETY: the launch passes the `Shared` this test created, alive until it returns.
        let s = unsafe { &*(c as *const Shared) };
        let inner = shared();
        // SAFETY: the task function is callable from several threads with the data passed.
        let r = unsafe { parallel_launch(count, &inner as *const _ as *mut c_void, 0) };
        if r != 0 || inner.hits[0].load(Ordering::SeqCst) != 1 {
            s.bad.store(true, Ordering::SeqCst);
        }
        s.hits[task as usize].fetch_add(1, Ordering::SeqCst);
        0
    }

    #[test]
    fn nested_launch_runs_inline() {
        let s = shared();
        assert_eq!(
            // SAFETY: the task function is callable from several threads with the data passed.
            unsafe { parallel_launch(nested, &s as *const _ as *mut c_void, 0) },
            0
        );
        assert!(!s.bad.load(Ordering::SeqCst));
    }

    #[test]
    fn many_application_threads_launch_at_once() {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..2000 {
                        let s = shared();
                        // SAFETY: the task function is callable from several threads with the data passed.
                        let r = unsafe { parallel_launch(count, &s as *const _ as *mut c_void, 0) };
                        assert_eq!(r, 0);
                        let total: u64 = s.hits.iter().map(|h| h.load(Ordering::SeqCst)).sum();
                        assert!(total >= 1 && total <= num_threads() as u64);
                        assert!(s.hits.iter().all(|h| h.load(Ordering::SeqCst) <= 1));
                        assert!(!s.bad.load(Ordering::SeqCst));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn a_worker_that_cannot_start_shrinks_the_pool() {
        FAIL_SPAWN_FROM.with(|f| f.set(1));
        let config = PoolConfig {
            threads: 4,
            bind: false,
            spin_count: 0,
        };
        let pool = Pool::start(config, &[]);
        FAIL_SPAWN_FROM.with(|f| f.set(usize::MAX));
        // Worker 0 started, worker 1 was refused: the launcher and one worker remain.
        assert_eq!(pool.threads(), 2);
        let s = shared();
        // SAFETY: this test owns the pool; `count` is callable concurrently with `s`.
        let r = unsafe { pool.launch(count, &s as *const _ as *mut c_void, 2) };
        assert_eq!(r, 0);
        assert_eq!(s.hits[0].load(Ordering::SeqCst), 1);
        assert_eq!(s.hits[1].load(Ordering::SeqCst), 1);
        assert!(!s.bad.load(Ordering::SeqCst));
    }
}
