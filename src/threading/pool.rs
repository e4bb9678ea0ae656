//! The pool itself: workers that claim the tasks of a launch from one shared counter, a
//! launcher that runs every task nobody has claimed yet, a sleeping barrier, and spinning
//! that backs off when the machine is oversubscribed.
//!
//! Why a launch never waits for a worker that has no core: the tasks of a launch are claimed
//! one at a time from a counter. The launcher runs task 0, then claims and runs whatever is
//! left; a worker that wakes late finds nothing to claim. The launcher only waits for tasks
//! that a running thread has already started.
//!
//! Why that is safe for kernels that use `TVMBackendParallelBarrier`: a thread claims another
//! task only after it has finished one, and a task that calls the barrier cannot finish
//! before every task of the launch has arrived there, i.e. before every task has been
//! claimed by some thread. So in a launch whose tasks all reach the barrier (what TVM's code
//! generator emits: the barrier follows a parallel loop, on every task) no thread ever holds
//! two tasks, each task gets a thread of its own, and the barrier waits (sleeping, not
//! spinning, once its short spin is over) for a descheduled worker to arrive.
//!
//! What a launch costs is mostly cache lines moving between cores, so the state is laid out
//! by who writes it: the launcher publishes a launch by writing one line (claim word, wake
//! counter, lambda and data: [`Job`]) and no line a worker wrote in the previous launch
//! (the count of finished tasks is never reset, the barrier resets itself); a task's
//! arrival at the barrier and the phase change it completes share one word; a waiting
//! thread reads no clock until it has spun 64 times.

use super::{ParallelGroupEnv, ParallelLambda, PoolConfig};
use crate::packed_func::error::{last_error_string, set_last_error_message, Error, Result};
use std::cell::Cell;
use std::ffi::c_void;
// The protocols' atomics, mutex, spinning and clock come from `crate::sync`: `std`'s, or the
// model checker's under the `loom` cfg (the loom tests at the end of this file).
use crate::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{sync_static, Instant, Mutex};
#[cfg(any(loom, target_os = "emscripten"))]
use std::sync::OnceLock;
use std::time::Duration;

#[cfg(loom)]
use crate::sync::futex::{wait as futex_wait, wake as futex_wake};

#[cfg(not(loom))]
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

#[cfg(not(loom))]
fn futex_wake(word: &AtomicU32, count: i32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        );
    }
}

// ---- Adaptive spinning -------------------------------------------------------------------

/// How long a spinning thread may go without running before it concludes that it was
/// descheduled, i.e. that the machine has more runnable threads than cores.
const PREEMPTED: Duration = Duration::from_micros(200);
/// How long spinning stays short after a preemption was seen. A second: with a model's
/// run() of tens of milliseconds, a shorter window (100 ms) let idle workers go back to
/// their full spin between two detections, and under two CPU burners a run took up to 1.8 ×
/// its work in CPU time (the spinning worker shared the launcher's core); detections renew
/// the window while the load lasts.
const CONTENDED_FOR: Duration = Duration::from_millis(1000);
/// Spin iterations while the machine is oversubscribed (about a microsecond).
const CONTENDED_SPIN: u32 = 256;

/// The monotonic clock in nanoseconds (since boot: never 0 in practice, and the marks below
/// store at least 1). One call to the vDSO, inlined where the pool reads it.
#[cfg(not(any(loom, target_os = "emscripten")))]
#[inline]
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on every target the
    // pool is built for (Linux), so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The clock of `crate::sync` in nanoseconds since the first reading (the model's clock
/// under loom; `emscripten_get_now` on the web).
#[cfg(any(loom, target_os = "emscripten"))]
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// A value on cache lines of its own (128 bytes: adjacent-line prefetch pairs 64-byte lines),
/// so that no other static shares them. Without it the linker's layout decides what shares
/// [`BARRIER_LAMBDAS`]' lines: one layout put [`CONTENDED_UNTIL`] (written under contention)
/// on the line of its last slots, and the barrier benchmark took 1.3x as long.
#[repr(align(128))]
struct OwnLines<T>(T);

impl<T> std::ops::Deref for OwnLines<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

sync_static! {
    /// Until when (ns of [`now_ns`]) the machine counts as oversubscribed, for the pools
    /// compiled code uses (a pool a test starts has a word of its own).
    static CONTENDED_UNTIL: AtomicU64 = AtomicU64::new(0);
}

/// Whether the deadline in `word` (ns of [`now_ns`] plus `offset`; 0: none) is still
/// ahead. An expired deadline is cleared, so that hot paths go back to one relaxed load
/// without a clock read (a mark stored meanwhile by another thread is kept).
#[inline]
fn still_marked(word: &AtomicU64, offset: u64) -> bool {
    let mark = word.load(Ordering::Relaxed);
    if mark == 0 {
        return false;
    }
    if now_ns() < mark.saturating_add(offset) {
        return true;
    }
    let _ = word.compare_exchange(mark, 0, Ordering::Relaxed, Ordering::Relaxed);
    false
}

/// What a pool knows of the load on the machine, read-mostly (written when contention or a
/// collision is seen): whether the machine counts as oversubscribed, why it was marked so
/// (counted per cause, for diagnostics and tests), and when application threads last
/// collided on the pool. Leaked with its pool; the pool's barrier refers to it too.
struct Contention {
    /// Until when the machine counts as oversubscribed: [`CONTENDED_UNTIL`] for the pools
    /// compiled code uses, a word of the pool's own for a pool a test starts.
    until: &'static AtomicU64,
    /// Spins of this pool's threads that found they had been descheduled.
    preempted: AtomicU32,
    /// Barrier waits longer than [`SLOW_WAIT`].
    slow_barriers: AtomicU32,
    /// Launcher waits for started tasks longer than [`SLOW_WAIT`].
    slow_launches: AtomicU32,
    /// Streaks of launches that no spinning worker saw (see `Pool::note_unclaimed`).
    unseen_streaks: AtomicU32,
    /// When a launch last found the pool held by another application thread (ns of
    /// [`now_ns`]; 0: never).
    collision: AtomicU64,
}

impl Contention {
    /// A fresh state for a pool, which lives as long as the process (the pool's threads keep
    /// it).
    fn new(until: &'static AtomicU64) -> &'static Contention {
        Box::leak(Box::new(Contention::unmarked(until)))
    }

    /// A fresh state with no cause counted.
    fn unmarked(until: &'static AtomicU64) -> Contention {
        Contention {
            until,
            preempted: AtomicU32::new(0),
            slow_barriers: AtomicU32::new(0),
            slow_launches: AtomicU32::new(0),
            unseen_streaks: AtomicU32::new(0),
            collision: AtomicU64::new(0),
        }
    }

    /// Whether a spinning thread was recently descheduled (see [`Spin`]). Reads the clock
    /// only while a mark is set; the first call after the mark expires clears it.
    #[inline]
    fn contended(&self) -> bool {
        still_marked(self.until, 0)
    }

    /// Marks the machine oversubscribed for [`CONTENDED_FOR`], counting the `cause`.
    fn note(&self, cause: &AtomicU32) {
        cause.fetch_add(1, Ordering::Relaxed);
        self.until.store(
            now_ns() + CONTENDED_FOR.as_nanos() as u64,
            Ordering::Relaxed,
        );
    }

    /// Whether several application threads have been launching on the pool recently: each
    /// then runs its launches alone, which keeps one thread per model instead of adding the
    /// pool's workers to a machine the application threads already fill (a launch every
    /// [`SHARED_FOR`] probes the pool again).
    #[inline]
    fn recently_shared(&self) -> bool {
        still_marked(&self.collision, SHARED_FOR.as_nanos() as u64)
    }
}

/// A bounded spin: `budget` iterations of `spin_loop`, fewer while the machine is
/// oversubscribed. It watches the clock every 64 iterations (the first reading comes only
/// then, so a wait that ends sooner, the common case of a launch, reads no clock): a gap
/// longer than [`PREEMPTED`] between two readings means this thread lost its core while
/// spinning, so the machine is oversubscribed; it then records that (for every thread of
/// the process) and stops, since a spinning thread would only take time from threads that
/// have work.
struct Spin<'a> {
    contention: &'a Contention,
    left: u32,
    /// The first and the latest clock reading (none before the 64th iteration).
    first: Option<Instant>,
    last: Option<Instant>,
}

impl<'a> Spin<'a> {
    fn new(budget: u32, contention: &'a Contention) -> Spin<'a> {
        let budget = if budget > CONTENDED_SPIN && contention.contended() {
            CONTENDED_SPIN
        } else {
            budget
        };
        // The model explores every interleaving of each spin: one spin, then sleep.
        #[cfg(loom)]
        let budget = budget.min(1);
        Spin {
            contention,
            left: budget,
            first: None,
            last: None,
        }
    }

    /// After a wait that this spin began: marks the machine oversubscribed when the wait,
    /// spinning and sleeping together, took longer than [`SLOW_WAIT`] (a wait that ended
    /// within 64 iterations never read the clock and costs nothing here); `cause` counts it.
    fn note_if_slow(&self, cause: &AtomicU32) {
        if self.first.is_some_and(|t| t.elapsed() > SLOW_WAIT) {
            self.contention.note(cause);
        }
    }

    /// Spins once; false when the budget is spent and the caller should sleep.
    #[inline]
    fn spin(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        if self.left % 64 == 0 {
            let now = Instant::now();
            if self
                .last
                .is_some_and(|last| now.duration_since(last) > PREEMPTED)
            {
                self.contention.note(&self.contention.preempted);
                self.left = 0;
                return false;
            }
            self.last = Some(now);
            self.first.get_or_insert(now);
        }
        crate::sync::spin_loop();
        true
    }
}

// ---- Barrier -----------------------------------------------------------------------------

/// A barrier for the tasks of one launch, on one cache line: a task's arrival and the
/// phase change that the last arrival makes travel between cores together.
#[repr(C, align(64))]
struct Barrier {
    /// Arrivals in the current phase (bits 0..16) and the phase number (bits 16..32).
    state: AtomicU32,
    /// Tasks asleep on `state`.
    sleepers: AtomicU32,
    spin_count: u32,
    contention: &'static Contention,
}

/// The phase bits of a barrier's state word.
const PHASE_ONE: u32 = 1 << 16;

/// A barrier wait, or a launcher's wait for tasks that workers have started, longer than
/// this means a task of the launch had no core (or the tasks are badly unbalanced): the
/// machine counts as oversubscribed.
const SLOW_WAIT: Duration = Duration::from_millis(1);

/// Lambdas seen calling `TVMBackendParallelBarrier` (open addressing on the address; a full
/// table forgets newcomers, which only costs them the contended-machine shortcut). A hint
/// table, always `std`'s atomics: single-word relaxed claims, whatever order they are seen in.
static BARRIER_LAMBDAS: OwnLines<[std::sync::atomic::AtomicUsize; 64]> =
    OwnLines([const { std::sync::atomic::AtomicUsize::new(0) }; 64]);

fn lambda_slot(f: usize) -> usize {
    // Fibonacci hashing in 64 bits on every target (a 32-bit address widens).
    ((((f as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) & 63) as usize
}

/// Whether the lambda at `f` has been seen using the barrier.
#[inline]
fn uses_barrier(f: usize) -> bool {
    let start = lambda_slot(f);
    for i in 0..64 {
        match BARRIER_LAMBDAS[(start + i) & 63].load(Ordering::Relaxed) {
            0 => return false,
            v if v == f => return true,
            _ => {}
        }
    }
    false
}

#[inline]
fn remember_barrier(f: usize) {
    if f == 0 || uses_barrier(f) {
        return;
    }
    let start = lambda_slot(f);
    for i in 0..64 {
        match BARRIER_LAMBDAS[(start + i) & 63].compare_exchange(
            0,
            f,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(v) if v == f => return,
            Err(_) => {}
        }
    }
}

impl Barrier {
    fn new(spin_count: u32, contention: &'static Contention) -> Barrier {
        Barrier {
            state: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            spin_count,
            contention,
        }
    }

    /// The current phase (changes each time every task has arrived).
    fn phase(&self) -> u32 {
        self.state.load(Ordering::Acquire) / PHASE_ONE
    }

    /// Waits for `num_task` arrivals (`num_task` <= [`MAX_THREADS`], so arrivals fit in
    /// 16 bits; the phase may wrap, waiters only compare it for change).
    fn wait(&self, num_task: usize) {
        let s = self.state.fetch_add(1, Ordering::AcqRel);
        let phase = s / PHASE_ONE;
        if (s % PHASE_ONE) as usize + 1 == num_task {
            // Every task has arrived, so none touches the word until it sees the new phase.
            self.state.store(
                phase.wrapping_add(1).wrapping_mul(PHASE_ONE),
                Ordering::SeqCst,
            );
            if self.sleepers.load(Ordering::SeqCst) != 0 {
                futex_wake(&self.state, i32::MAX);
            }
            return;
        }
        let mut spin = Spin::new(self.spin_count.max(1000), self.contention);
        while self.phase() == phase {
            if spin.spin() {
                continue;
            }
            // Sleep: a missing task may belong to a worker waiting for this very core.
            spin.first.get_or_insert_with(Instant::now);
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            loop {
                let s = self.state.load(Ordering::SeqCst);
                if s / PHASE_ONE != phase {
                    break;
                }
                // Returns at once if another task arrived meanwhile; the loop looks again.
                futex_wait(&self.state, s);
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
        // Measured from the start of the wait, spinning included: a full spin budget is
        // itself milliseconds, which a missing task on an oversubscribed machine outlasts.
        spin.note_if_slow(&self.contention.slow_barriers);
    }
}

// ---- The pool ----------------------------------------------------------------------------

/// The claim word of a launch: generation (bits 32..64, so that a stale compare-and-swap
/// from an earlier launch fails), task count (16..32) and the next unclaimed task (0..16).
fn pack(generation: u32, num_task: usize, next: usize) -> u64 {
    (u64::from(generation) << 32) | ((num_task as u64) << 16) | next as u64
}

/// Most threads a pool may have (task numbers live in 16 bits of the claim word).
const MAX_THREADS: usize = 1024;

/// What a launch publishes, on one cache line: a worker that sees `wake` change has the
/// claim word and the job in the line it has just read. Only the launcher writes it, apart
/// from claims and sleeping workers.
#[repr(C, align(64))]
struct Job {
    /// See [`pack`].
    claim: AtomicU64,
    /// Bumped once per launch; idle workers wait for it to change.
    wake: AtomicU32,
    /// Workers asleep on `wake`.
    sleepers: AtomicU32,
    /// The current lambda and its data; written before the claim word is published, stable
    /// while any of its tasks is unfinished.
    f: AtomicUsize,
    cdata: AtomicPtr<c_void>,
}

/// Tasks finished by workers, on a line of its own: workers add to it, the launcher reads.
#[repr(C, align(64))]
struct Done {
    /// Tasks finished by workers since the pool started (wrapping); the launcher does not
    /// reset it, so that starting a launch writes no line a worker has just written.
    count: AtomicU32,
    launcher_sleeping: AtomicBool,
}

/// What only the application thread holding (or trying to take) the pool touches.
#[repr(C, align(64))]
struct LauncherState {
    busy: AtomicBool,
    /// `Done::count` when the current launch started.
    done_base: AtomicU32,
    /// Launches in a row that no spinning worker joined (see `Pool::note_unclaimed`).
    unclaimed: AtomicU32,
    /// The sum of the workers' [`Ack`]s when that streak began.
    acks_then: AtomicU32,
    /// When the streak began (ns of `now_ns`).
    streak_began: AtomicU64,
}

/// How long a streak of unclaimed launches that no worker saw must last to count (a spinning
/// worker that runs sees a launch within a microsecond).
const UNCLAIMED_FOR: Duration = Duration::from_micros(20);

/// Launches in a row that no spinning worker joined, nor saw, after which the machine
/// counts as oversubscribed.
const UNCLAIMED_STREAK: u32 = 8;

/// A worker's count of the launches it has seen, on a line of its own (written by the
/// worker once per launch it sees, read by the launcher only at the ends of a streak of
/// unclaimed launches).
#[repr(C, align(64))]
struct Ack(AtomicU32);

struct Pool {
    job: Job,
    done: Done,
    launcher: LauncherState,
    barrier: Barrier,
    /// One per worker (see [`Ack`]).
    acks: &'static [Ack],
    /// See [`Contention`] (the barrier's).
    contention: &'static Contention,
    // Read-mostly from here on (written at start, stop, on errors and by test hooks).
    config: PoolConfig,
    /// The CPUs workers are pinned to (`runtime.config_threadpool`; empty: none listed).
    cpus: Box<[usize]>,
    /// Threads a launch may use: the launcher plus the workers that did start.
    threads: AtomicUsize,
    shutdown: AtomicBool,
    failed: AtomicBool,
    error: Mutex<Option<String>>,
    /// Test hook: while non-zero, woken workers stop before claiming anything, as a worker
    /// that never gets a core would.
    parked: AtomicU32,
}

/// Spin iterations a launcher waits for tasks running on workers before sleeping.
const LAUNCHER_SPIN: u32 = 2000;

#[cfg(not(loom))]
thread_local! {
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}
#[cfg(loom)]
loom::thread_local! {
    static IN_TASK: Cell<bool> = Cell::new(false);
}

/// The process's pool (published once under [`POOL_INIT`], replaced by
/// `runtime.config_threadpool`; not part of the loom models, which start pools of their own).
static POOL: std::sync::atomic::AtomicPtr<Pool> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
static POOL_INIT: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// Every pool ever started. Pools live as long as the process (a stopped one may still be
/// referenced by a thread that loaded it), so they stay listed here: reachable, not leaked.
static STARTED: std::sync::Mutex<Vec<&'static Pool>> = std::sync::Mutex::new(Vec::new());

/// CPUs a `cpu_set_t` can name.
const CPU_SETSIZE: usize = libc::CPU_SETSIZE as usize;

/// The CPUs the calling thread may run on (its affinity mask), ascending; empty where the
/// mask cannot be read.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; the size matches the set.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return Vec::new();
    }
    // A plain loop: less code than collecting a filtered range.
    let mut cpus = Vec::new();
    for c in 0..CPU_SETSIZE {
        // SAFETY: `c` is below CPU_SETSIZE, the set's capacity.
        if unsafe { libc::CPU_ISSET(c, &set) } {
            cpus.push(c);
        }
    }
    cpus
}

/// Pins the calling thread to `core`; the error says why it could not be.
fn bind_to_core(core: usize) -> std::result::Result<(), String> {
    if core >= CPU_SETSIZE {
        return Err(format!(
            "CPU {core} is beyond the {CPU_SETSIZE} CPUs an affinity mask can name"
        ));
    }
    // SAFETY: a zeroed cpu_set_t with one bit set (`core` is below its capacity, checked
    // above), applied to the calling thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(format!(
            "cannot pin it to CPU {core}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The stack a `std` thread gets: `RUST_MIN_STACK` bytes, else 2 MiB, at least
/// `PTHREAD_STACK_MIN` (read once per pool start, not per worker).
fn worker_stack() -> usize {
    std::env::var("RUST_MIN_STACK")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(2 << 20)
        .max(libc::PTHREAD_STACK_MIN)
}

/// Starts worker `w`: a detached thread named `tvm-worker-{w}` running `f`, with `stack` bytes
/// of stack ([`worker_stack`]).
///
/// A pthread rather than `std::thread::Builder`: `std`'s spawning (thread handles, spawn
/// hooks, output capture, the result packet) was about 11 KB of the library, and the pool
/// uses none of it. One difference: the thread has its OS name, but `std` does not know it
/// (`std::thread::current().name()` is `None` there, so a panic message in it says
/// `<unnamed>`).
fn spawn_detached(w: usize, stack: usize, f: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
    type Start = (usize, Box<dyn FnOnce() + Send>);
    extern "C" fn start(arg: *mut c_void) -> *mut c_void {
        // SAFETY: `arg` is the box `spawn_detached` leaked for this thread, taken once.
        let (w, f) = *unsafe { Box::from_raw(arg as *mut Start) };
        // At most 15 bytes (`w` < 1024), as a thread name must be.
        let name = format!("tvm-worker-{w}\0");
        // SAFETY: a NUL-terminated name for the calling thread.
        unsafe { libc::pthread_setname_np(libc::pthread_self(), name.as_ptr().cast()) };
        drop(name);
        // A panic must not unwind out of a C entry point (that aborts the process); `f`
        // catches its own, and this is the backstop a `std` thread would have.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        std::ptr::null_mut()
    }
    let arg = Box::into_raw(Box::new((w, f))) as *mut c_void;
    // SAFETY: the attributes are initialised before use and destroyed after; on success the
    // new thread owns `arg`.
    let r = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        if libc::pthread_attr_setstacksize(&mut attr, stack) != 0 {
            // Some systems want whole pages.
            let page = (libc::sysconf(libc::_SC_PAGESIZE) as usize).max(1);
            libc::pthread_attr_setstacksize(&mut attr, stack.div_ceil(page) * page);
        }
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut t: libc::pthread_t = 0;
        let r = libc::pthread_create(&mut t, &attr, start, arg);
        libc::pthread_attr_destroy(&mut attr);
        r
    };
    if r != 0 {
        // SAFETY: no thread was created: the box is still ours.
        drop(unsafe { Box::from_raw(arg as *mut Start) });
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// How a worker's start went: the worker's number and, when it did not start, why.
type StartReport = (usize, std::result::Result<(), String>);

/// Where the workers of a start report to the starting thread: what a channel would do, with
/// a fraction of a channel's code. `state` holds the reports in arrival order and how many
/// [`Reporter`]s are alive; the starter waits on `cv`.
struct Reports {
    state: std::sync::Mutex<(Vec<StartReport>, usize)>,
    cv: std::sync::Condvar,
}

impl Reports {
    fn state(&self) -> std::sync::MutexGuard<'_, (Vec<StartReport>, usize)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new reporter (counted alive until it drops).
    fn reporter(self: &std::sync::Arc<Self>) -> Reporter {
        self.state().1 += 1;
        Reporter(self.clone())
    }
}

/// A worker's end of [`Reports`]: reports once, and is counted gone when dropped (also when
/// its thread was never created), like a channel's sender.
struct Reporter(std::sync::Arc<Reports>);

impl Reporter {
    fn send(&self, report: StartReport) {
        self.0.state().0.push(report);
        self.0.cv.notify_all();
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.0.state().1 -= 1;
        self.0.cv.notify_all();
    }
}

impl Pool {
    /// Starts a pool; `cpus`, when given, lists the cores workers are pinned to. A worker
    /// that cannot be started (its thread not created, or not pinned where it was asked to
    /// be) is not counted: the pool is that much smaller (down to the launcher alone), and
    /// the second value says why each such worker did not start. Nothing here aborts the
    /// process.
    fn start(config: PoolConfig, cpus: &[usize]) -> (&'static Pool, Vec<String>) {
        Self::start_marking(config, cpus, &CONTENDED_UNTIL)
    }

    /// [`Pool::start`], marking the machine oversubscribed in `until`.
    fn start_marking(
        config: PoolConfig,
        cpus: &[usize],
        until: &'static AtomicU64,
    ) -> (&'static Pool, Vec<String>) {
        let pool = Pool::new(config, cpus, until);
        let (wanted, acks) = (pool.acks.len() + 1, pool.acks);
        STARTED.lock().unwrap_or_else(|e| e.into_inner()).push(pool);
        // Binding from the environment spreads workers over the CPUs this thread may use.
        let allowed = if cpus.is_empty() && pool.config.bind {
            allowed_cpus()
        } else {
            Vec::new()
        };
        let reports = std::sync::Arc::new(Reports {
            state: std::sync::Mutex::new((Vec::new(), 0)),
            cv: std::sync::Condvar::new(),
        });
        let mut errors = Vec::new();
        let mut spawned = 0;
        let stack = worker_stack();
        for w in 1..wanted {
            let core = if !cpus.is_empty() {
                Some(cpus[w % cpus.len()])
            } else if !allowed.is_empty() {
                Some(allowed[w % allowed.len()])
            } else {
                None
            };
            let tx = reports.reporter();
            let r = spawn_detached(
                w,
                stack,
                Box::new(move || {
                    // A worker takes part in launches only once it has reported its start.
                    let r = std::panic::catch_unwind(|| core.map_or(Ok(()), bind_to_core))
                        .unwrap_or_else(|p| {
                            Err(crate::packed_func::error::panic_to_error(p).to_string())
                        });
                    let ok = r.is_ok();
                    tx.send((w, r));
                    drop(tx);
                    // Worker `w` has ack `w - 1`.
                    if let (true, Some(ack)) = (ok, acks.get(w - 1)) {
                        pool.worker_loop(ack);
                    }
                }),
            );
            match r {
                Ok(_) => spawned += 1,
                Err(e) => {
                    errors.push(format!("worker {w}: cannot create its thread: {e}"));
                    break;
                }
            }
        }
        // Every spawned worker reports once; the wait also ends when no reporter is left.
        let mut started = 0;
        let mut seen = 0;
        let mut state = reports.state();
        while seen < spawned {
            if let Some(report) = state.0.get_mut(seen) {
                let (w, r) = std::mem::replace(report, (0, Ok(())));
                seen += 1;
                match r {
                    Ok(()) => started += 1,
                    Err(e) => errors.push(format!("worker {w}: {e}")),
                }
            } else if state.1 == 0 {
                break;
            } else {
                state = reports.cv.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        }
        drop(state);
        pool.threads.store(started + 1, Ordering::Release);
        (pool, errors)
    }

    /// A pool of the launcher alone, with room for `config.threads - 1` workers (none
    /// started), marking the machine oversubscribed in `until`.
    fn new(config: PoolConfig, cpus: &[usize], until: &'static AtomicU64) -> &'static Pool {
        let contention = Contention::new(until);
        let wanted = config.threads.clamp(1, MAX_THREADS);
        // Leaked with the pool, which lives as long as the process.
        let acks: &'static [Ack] = Vec::leak(
            (1..wanted)
                .map(|_| Ack(AtomicU32::new(0)))
                .collect::<Vec<Ack>>(),
        );
        Box::leak(Box::new(Pool {
            job: Job {
                claim: AtomicU64::new(0),
                wake: AtomicU32::new(0),
                sleepers: AtomicU32::new(0),
                f: AtomicUsize::new(0),
                cdata: AtomicPtr::new(std::ptr::null_mut()),
            },
            done: Done {
                count: AtomicU32::new(0),
                launcher_sleeping: AtomicBool::new(false),
            },
            launcher: LauncherState {
                busy: AtomicBool::new(false),
                done_base: AtomicU32::new(0),
                unclaimed: AtomicU32::new(0),
                acks_then: AtomicU32::new(0),
                streak_began: AtomicU64::new(0),
            },
            barrier: Barrier::new(config.spin_count, contention),
            contention,
            acks,
            config,
            cpus: cpus.into(),
            threads: AtomicUsize::new(1),
            shutdown: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            parked: AtomicU32::new(0),
        }))
    }

    fn worker_loop(&'static self, ack: &Ack) {
        // A worker only ever runs tasks: a launch from one of them runs inline.
        IN_TASK.with(|t| t.set(true));
        // The count the pool started with, not a fresh load: a launch may come before this
        // thread first runs.
        let mut seen = 0u32;
        let wake = &self.job.wake;
        loop {
            let mut spin = Spin::new(self.config.spin_count, self.contention);
            let mut current = wake.load(Ordering::Acquire);
            while current == seen {
                if !spin.spin() {
                    self.job.sleepers.fetch_add(1, Ordering::SeqCst);
                    if wake.load(Ordering::SeqCst) == seen {
                        futex_wait(wake, seen);
                    }
                    self.job.sleepers.fetch_sub(1, Ordering::SeqCst);
                    spin = Spin::new(self.config.spin_count, self.contention);
                }
                current = wake.load(Ordering::Acquire);
            }
            seen = current;
            ack.0.store(
                ack.0.load(Ordering::Relaxed).wrapping_add(1),
                Ordering::Relaxed,
            );
            if self.shutdown.load(Ordering::Acquire) {
                return;
            }
            while self.parked.load(Ordering::Acquire) != 0 {
                futex_wait(&self.parked, 1);
            }
            while let Some((task, num_task)) = self.try_claim() {
                // The lambda is C code (it cannot unwind); what could panic is ours, and
                // the launch must still see the task finish.
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.run_task(task, num_task)
                }));
                if let Err(p) = ran {
                    self.record_failure(format!(
                        "a worker failed running task {task}: {}",
                        crate::packed_func::error::panic_to_error(p)
                    ));
                }
                self.finish_task();
            }
        }
    }

    /// Claims the next unclaimed task of the current launch: (task, num_task).
    fn try_claim(&self) -> Option<(usize, usize)> {
        let mut c = self.job.claim.load(Ordering::Acquire);
        loop {
            let num_task = ((c >> 16) & 0xffff) as usize;
            let next = (c & 0xffff) as usize;
            if next >= num_task {
                return None;
            }
            match self.job.claim.compare_exchange_weak(
                c,
                c + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some((next, num_task)),
                Err(now) => c = now,
            }
        }
    }

    /// Counts a task a worker has finished; wakes the launcher if it sleeps (it looks
    /// whether its launch is complete).
    fn finish_task(&self) {
        self.done.count.fetch_add(1, Ordering::SeqCst);
        if self.done.launcher_sleeping.load(Ordering::SeqCst) {
            futex_wake(&self.done.count, 1);
        }
    }

    /// Runs one task; the caller has set `IN_TASK`.
    #[inline]
    fn run_task(&self, task_id: usize, num_task: usize) {
        let f = self.job.f.load(Ordering::Relaxed);
        let cdata = self.job.cdata.load(Ordering::Relaxed);
        let mut env = ParallelGroupEnv {
            sync_handle: &self.barrier as *const Barrier as *mut c_void,
            num_task: num_task as i32,
        };
        // SAFETY: `f` was stored from a valid ParallelLambda by `launch`, published by the
        // claim word this thread acquired.
        let f: ParallelLambda = unsafe { std::mem::transmute::<usize, ParallelLambda>(f) };
        // SAFETY: the launcher's contract makes `f` callable with `cdata` from any thread.
        let r = unsafe { f(task_id as i32, &mut env, cdata) };
        if r != 0 {
            self.record_failure(last_error_string());
        }
    }

    /// Records the failure of a task of the current launch (the first message is kept).
    fn record_failure(&self, msg: String) {
        self.failed.store(true, Ordering::Relaxed);
        let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if e.is_none() {
            *e = Some(msg);
        }
    }

    /// Runs a launch on the pool; the caller holds `busy`. Returns 0 or -1 (error set).
    ///
    /// # Safety
    /// `f` callable with `cdata` concurrently; `2 <= num_task <= threads()`.
    ///
    /// Starting a launch writes only the job line (and the launcher's own), none of the
    /// lines a worker wrote in the last launch, so that the stores publishing the launch do
    /// not wait for those lines to come back.
    unsafe fn launch(&self, f: ParallelLambda, cdata: *mut c_void, num_task: usize) -> i32 {
        let job = &self.job;
        // Only the pool's holder writes the generation bits.
        let generation = ((job.claim.load(Ordering::Relaxed) >> 32) as u32).wrapping_add(1);
        let phase = self.barrier.phase();
        job.f.store(f as usize, Ordering::Relaxed);
        job.cdata.store(cdata, Ordering::Relaxed);
        // Task 0 is the launcher's; the release store publishes the job with the counter.
        job.claim
            .store(pack(generation, num_task, 1), Ordering::Release);
        job.wake.fetch_add(1, Ordering::SeqCst);
        let sleepers = job.sleepers.load(Ordering::SeqCst);
        if sleepers != 0 {
            futex_wake(&job.wake, num_task as i32 - 1);
        }
        let was = IN_TASK.with(|t| t.replace(true));
        self.run_task(0, num_task);
        let mut mine = 1;
        // Whatever no worker has claimed yet, the launcher runs itself.
        while let Some((task, n)) = self.try_claim() {
            self.run_task(task, n);
            mine += 1;
        }
        IN_TASK.with(|t| t.set(was));
        self.note_unclaimed(mine == num_task && sleepers == 0);
        // Every task is claimed: wait only for those that workers have started.
        let base = self.launcher.done_base.load(Ordering::Relaxed);
        let target = base.wrapping_add((num_task - mine) as u32);
        self.launcher.done_base.store(target, Ordering::Relaxed);
        let done = &self.done.count;
        let mut spin = Spin::new(LAUNCHER_SPIN, self.contention);
        while done.load(Ordering::Acquire) != target {
            if spin.spin() {
                continue;
            }
            spin.first.get_or_insert_with(Instant::now);
            self.done.launcher_sleeping.store(true, Ordering::SeqCst);
            loop {
                let d = done.load(Ordering::SeqCst);
                if d == target {
                    break;
                }
                futex_wait(done, d);
            }
            self.done.launcher_sleeping.store(false, Ordering::SeqCst);
        }
        // A started task that kept the launcher waiting long had no core (or the tasks are
        // badly unbalanced): as with a slow barrier, the machine counts as oversubscribed.
        spin.note_if_slow(&self.contention.slow_launches);
        if self.barrier.phase() != phase {
            remember_barrier(f as usize);
        }
        if self.failed.load(Ordering::Relaxed) {
            self.failed.store(false, Ordering::Relaxed);
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

    /// Watches launches whose tasks the launcher ran all by itself although no worker was
    /// asleep. [`UNCLAIMED_STREAK`] of them in a row, over at least [`UNCLAIMED_FOR`], during
    /// which no worker even saw a launch (its [`Ack`] did not move) mean that the spinning
    /// workers had no core. That happens when the kernel puts a worker on the launcher's own
    /// core (more runnable threads than cores): the worker then spins its whole budget there
    /// while the launcher waits for the core, and since 200,000 iterations end before the
    /// next tick, the spin never sees itself preempted. Under two CPU burners that made some
    /// mobilenet processes take 1.8 × their work in CPU time, every run. The machine is then
    /// marked oversubscribed (short spins, sleeping waits). On an idle machine a spinning
    /// worker sees launches within a microsecond, even those of near-empty tasks that the
    /// launcher finishes before it arrives, so they never count.
    fn note_unclaimed(&self, unclaimed: bool) {
        let state = &self.launcher;
        let prev = state.unclaimed.load(Ordering::Relaxed);
        let mut n = if unclaimed { prev + 1 } else { 0 };
        let acks = || {
            self.acks
                .iter()
                .fold(0u32, |a, s| a.wrapping_add(s.0.load(Ordering::Relaxed)))
        };
        match n {
            // The workers' lines and the clock are read at the streak's ends only.
            1 => {
                state.acks_then.store(acks(), Ordering::Relaxed);
                state.streak_began.store(now_ns(), Ordering::Relaxed);
            }
            UNCLAIMED_STREAK => {
                // Launches of empty tasks come faster than a spinning worker sees them
                // (each look at the launch line is a cache miss while the launcher keeps
                // writing it), so the streak must also last a while.
                let long = now_ns().saturating_sub(state.streak_began.load(Ordering::Relaxed))
                    > UNCLAIMED_FOR.as_nanos() as u64;
                if long && acks() == state.acks_then.load(Ordering::Relaxed) {
                    self.contention.note(&self.contention.unseen_streaks);
                }
                n = 0;
            }
            _ => {}
        }
        if n != prev {
            state.unclaimed.store(n, Ordering::Relaxed);
        }
    }

    /// Threads a launch may use (the launcher included).
    fn threads(&self) -> usize {
        self.threads.load(Ordering::Relaxed)
    }

    /// Stops the workers (they exit when they next wake).
    fn stop(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.parked.store(0, Ordering::Release);
        futex_wake(&self.parked, i32::MAX);
        self.job.wake.fetch_add(1, Ordering::SeqCst);
        futex_wake(&self.job.wake, i32::MAX);
    }

    /// Holds or releases the workers before they claim a task (tests: a worker that gets
    /// no core).
    #[cfg(all(test, not(loom)))]
    fn park(&self, on: bool) {
        self.parked.store(u32::from(on), Ordering::Release);
        if !on {
            futex_wake(&self.parked, i32::MAX);
        }
    }

    /// Runs a launch of `n` tasks (already checked against the pool's size), waiting for
    /// the pool when another application thread holds it and the tasks must run together.
    ///
    /// # Safety
    /// As [`parallel_launch`].
    unsafe fn run(&self, f: ParallelLambda, cdata: *mut c_void, n: usize, chosen: bool) -> i32 {
        let mut backoff = 0u32;
        loop {
            if self
                .launcher
                .busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: we hold the pool; forwarded contract on `f`.
                let r = unsafe { self.launch(f, cdata, n) };
                self.launcher.busy.store(false, Ordering::Release);
                return r;
            }
            if self.shutdown.load(Ordering::Acquire) {
                // The pool was replaced (runtime.config_threadpool) after this launch found
                // it: run on the new one (published before the old one stops).
                let new = pool();
                if !std::ptr::eq(new, self) {
                    // SAFETY: forwarded contract.
                    return unsafe { launch_on(new, f, cdata, n as i32) };
                }
            }
            if chosen {
                // Another application thread holds the pool: run on this thread alone, and
                // keep doing so for a while (see `Contention::recently_shared`).
                self.contention
                    .collision
                    .store(now_ns().max(1), Ordering::Relaxed);
                // SAFETY: forwarded contract.
                return unsafe { run_inline(self, f, cdata) };
            }
            backoff += 1;
            if backoff < 64 {
                crate::sync::yield_now();
            } else {
                crate::sync::sleep(Duration::from_micros(50));
            }
        }
    }
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
    let (pool, errors) = Pool::start(PoolConfig::from_env(), &[]);
    // No caller to hand the failure to: say it once, the pool runs with the workers it has.
    if !errors.is_empty() {
        eprintln!(
            "tvm-runtime: the thread pool runs with {} thread(s): {}",
            pool.threads(),
            errors.join("; ")
        );
    }
    POOL.store(pool as *const Pool as *mut Pool, Ordering::Release);
    pool
}

/// Runs one task on this thread with a private barrier (`num_task = 1`).
///
/// # Safety
/// `f` callable with `cdata`.
#[inline]
unsafe fn run_inline(pool: &Pool, f: ParallelLambda, cdata: *mut c_void) -> i32 {
    let barrier = Barrier::new(0, pool.contention);
    let mut env = ParallelGroupEnv {
        sync_handle: &barrier as *const Barrier as *mut c_void,
        num_task: 1,
    };
    let was = IN_TASK.with(|t| t.replace(true));
    // SAFETY: caller contract.
    let r = unsafe { f(0, &mut env, cdata) };
    IN_TASK.with(|t| t.set(was));
    if barrier.phase() != 0 {
        remember_barrier(f as usize);
    }
    if r != 0 {
        -1
    } else {
        0
    }
}

/// How long after a launch found the pool held by another application thread launches that
/// let the pool choose run on their own thread.
const SHARED_FOR: Duration = Duration::from_millis(50);

/// Checks a launch against `pool` and runs it.
///
/// # Safety
/// As [`parallel_launch`].
unsafe fn launch_on(pool: &Pool, f: ParallelLambda, cdata: *mut c_void, num_task: i32) -> i32 {
    if num_task < 0 {
        set_last_error_message(format!(
            "ValueError: TVMBackendParallelLaunch: negative task count {num_task}"
        ));
        return -1;
    }
    if IN_TASK.with(|t| t.get()) {
        // SAFETY: forwarded contract.
        return unsafe { run_inline(pool, f, cdata) };
    }
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
    if num_task == 0 && pool.contention.recently_shared() {
        // SAFETY: forwarded contract.
        return unsafe { run_inline(pool, f, cdata) };
    }
    // A lambda that uses the barrier needs all its tasks running at once; on an
    // oversubscribed machine that means waiting for a core per task, so when the pool may
    // choose, it runs such a lambda as one task on the caller (as the reference does with
    // its default of one thread on a 2-core x86 machine).
    if n <= 1 || (num_task == 0 && pool.contention.contended() && uses_barrier(f as usize)) {
        // SAFETY: forwarded contract.
        return unsafe { run_inline(pool, f, cdata) };
    }
    // SAFETY: forwarded contract; 2 <= n <= threads.
    unsafe { pool.run(f, cdata, n, num_task == 0) }
}

/// Runs a parallel launch (`TVMBackendParallelLaunch`): `num_task = 0` lets the pool choose.
///
/// # Safety
/// `f` must be callable with `cdata` from several threads at once.
pub unsafe fn parallel_launch(f: ParallelLambda, cdata: *mut c_void, num_task: i32) -> i32 {
    // SAFETY: forwarded contract.
    unsafe { launch_on(pool(), f, cdata, num_task) }
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

/// CPUs this machine has (configured, online or not), at most [`CPU_SETSIZE`].
fn configured_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    usize::try_from(n).unwrap_or(0).clamp(1, CPU_SETSIZE)
}

/// Checks the arguments of `runtime.config_threadpool`: the thread count and the CPU ids
/// (each must name a CPU of this machine). Returns the pool's configuration and the CPUs.
fn checked_config(nthreads: i64, cpus: &[i64]) -> Result<(PoolConfig, Vec<usize>)> {
    let what = "runtime.config_threadpool";
    if !(0..=MAX_THREADS as i64).contains(&nthreads) {
        return Err(Error::value_fmt(format_args!(
            "{what}: nthreads {nthreads} is out of range: 0 (every core) to {MAX_THREADS}"
        )));
    }
    let machine = configured_cpus();
    let mut ids = Vec::with_capacity(cpus.len());
    for &c in cpus {
        match usize::try_from(c) {
            Ok(c) if c < machine => ids.push(c),
            _ => {
                return Err(Error::value_fmt(format_args!(
                    "{what}: CPU id {c} does not exist: this machine has CPUs 0 to {}",
                    machine - 1
                )))
            }
        }
    }
    let cpus = ids;
    if cpus.len() > MAX_THREADS {
        return Err(Error::value_fmt(format_args!(
            "{what}: {} CPU ids given; a pool has at most {MAX_THREADS} threads",
            cpus.len()
        )));
    }
    let mut config = PoolConfig::from_env();
    if nthreads > 0 {
        config.threads = nthreads as usize;
    } else if !cpus.is_empty() {
        config.threads = cpus.len();
    }
    Ok((config, cpus))
}

/// Reconfigures the pool (`runtime.config_threadpool`): `nthreads > 0` sets the thread count
/// (0: all cores); `mode` (1 big cores, -1 little cores, 0 default) only selects among
/// cores on asymmetric machines, which Linux does not describe uniformly, so all cores count
/// as big here; `cpus` pins workers to the listed cores when given.
///
/// A thread count out of range (negative, or over 1024) or a CPU id this machine lacks is
/// an error, and the pool stays as it was. A worker that cannot start (its thread not
/// created, or not pinned to its CPU, e.g. one offline or outside this process's cpuset) is
/// an error too, naming each: the new pool then runs with the workers that did start.
pub fn config_threadpool(_mode: i32, nthreads: i64, cpus: &[i64]) -> Result<()> {
    let (config, cpus) = checked_config(nthreads, cpus)?;
    let _g = POOL_INIT.lock().unwrap_or_else(|e| e.into_inner());
    let old = POOL.load(Ordering::Acquire);
    // SAFETY: pools are leaked, never freed.
    let old = (!old.is_null()).then(|| unsafe { &*old });
    if old.is_some_and(|old| old.config == config && *old.cpus == *cpus) {
        return Ok(());
    }
    // The new pool is published before the old one stops: a launch that finds the old one
    // stopped finds the new one.
    let (pool, errors) = Pool::start(config, &cpus);
    if let Some(old) = old {
        // Take the old pool so that no launch runs on it while it shuts down.
        while old
            .launcher
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        POOL.store(pool as *const Pool as *mut Pool, Ordering::Release);
        old.stop();
    } else {
        POOL.store(pool as *const Pool as *mut Pool, Ordering::Release);
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(Error::value_fmt(format_args!(
        "runtime.config_threadpool: {} of {} workers did not start ({}); the pool runs with \
         {} thread(s)",
        errors.len(),
        pool.config.threads.clamp(1, MAX_THREADS) - 1,
        errors.join("; "),
        pool.threads()
    )))
}

#[cfg(all(test, not(loom)))]
// The tests drive the pool through the C-shaped launch entry points with test lambdas, as
// compiled kernels do; each unsafe call passes a live environment and closure data.
#[allow(clippy::undocumented_unsafe_blocks)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::mpsc;

    struct Shared {
        hits: Vec<AtomicU64>,
        phases: Vec<AtomicU64>,
        threads: Vec<AtomicU64>,
        bad: AtomicBool,
    }

    fn thread_tag() -> u64 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as u64 }
    }

    /// Five phases separated by barriers; every task checks that all others reached each.
    unsafe extern "C" fn count(task: i32, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        let s = unsafe { &*(cdata as *const Shared) };
        let n = unsafe { (*penv).num_task } as usize;
        s.hits[task as usize].fetch_add(1, Ordering::SeqCst);
        s.threads[task as usize].store(thread_tag(), Ordering::SeqCst);
        for phase in 1..=5u64 {
            s.phases[task as usize].store(phase, Ordering::SeqCst);
            unsafe { parallel_barrier(task, penv) };
            for t in 0..n {
                if s.phases[t].load(Ordering::SeqCst) < phase {
                    s.bad.store(true, Ordering::SeqCst);
                }
            }
            unsafe { parallel_barrier(task, penv) };
        }
        0
    }

    /// No barrier: records which thread ran each task.
    unsafe extern "C" fn mark(task: i32, _p: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        let s = unsafe { &*(cdata as *const Shared) };
        s.hits[task as usize].fetch_add(1, Ordering::SeqCst);
        s.threads[task as usize].store(thread_tag(), Ordering::SeqCst);
        0
    }

    fn shared() -> Shared {
        Shared {
            hits: (0..64).map(|_| AtomicU64::new(0)).collect(),
            phases: (0..64).map(|_| AtomicU64::new(0)).collect(),
            threads: (0..64).map(|_| AtomicU64::new(0)).collect(),
            bad: AtomicBool::new(false),
        }
    }

    fn hits(s: &Shared) -> Vec<u64> {
        s.hits.iter().map(|h| h.load(Ordering::SeqCst)).collect()
    }

    /// A pool of the test's own, which marks contention in a word of its own: what it
    /// observes no other test (nor the process-wide pool) can have set.
    fn own_pool(config: PoolConfig, cpus: &[usize]) -> (&'static Pool, Vec<String>) {
        Pool::start_marking(config, cpus, Box::leak(Box::new(AtomicU64::new(0))))
    }

    fn private_pool(threads: usize) -> &'static Pool {
        let (pool, errors) = own_pool(
            PoolConfig {
                threads,
                bind: false,
                spin_count: 1000,
            },
            &[],
        );
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(pool.threads(), threads);
        pool
    }

    /// Runs `f` on another thread and fails (instead of hanging) if it takes over 20 s.
    fn within_20s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the launch did not complete (it waited for a worker that has no core)")
    }

    #[test]
    fn tasks_run_once_and_barriers_hold() {
        let pool = private_pool(2);
        for n in [0, 1, 2] {
            // No barrier and no other thread on this pool: `num_task = 0` means every thread.
            let s = shared();
            assert_eq!(
                unsafe { launch_on(pool, mark, &s as *const _ as *mut c_void, n) },
                0
            );
            let used = if n == 0 { 2 } else { n as usize };
            for (t, h) in hits(&s).into_iter().enumerate() {
                assert_eq!(h, u64::from(t < used), "task {t} of {used}");
            }
        }
        for n in [1, 2] {
            let s = shared();
            assert_eq!(
                unsafe { launch_on(pool, count, &s as *const _ as *mut c_void, n) },
                0
            );
            for (t, h) in hits(&s).into_iter().enumerate() {
                assert_eq!(h, u64::from(t < n as usize), "task {t} of {n}");
            }
            assert!(!s.bad.load(Ordering::SeqCst));
        }
        pool.stop();
    }

    /// Each task records its thread's OS name and stack size, then waits at the barrier (so
    /// task 1 runs on a worker).
    unsafe extern "C" fn describe(task: i32, p: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        let out = unsafe { &*(cdata as *const Mutex<Vec<(String, usize)>>) };
        let mut name = [0u8; 16];
        let mut stack = 0usize;
        unsafe {
            let me = libc::pthread_self();
            libc::pthread_getname_np(me, name.as_mut_ptr().cast(), name.len());
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            libc::pthread_getattr_np(me, &mut attr);
            libc::pthread_attr_getstacksize(&attr, &mut stack);
            libc::pthread_attr_destroy(&mut attr);
        }
        let name = std::ffi::CStr::from_bytes_until_nul(&name)
            .map_or(String::new(), |c| c.to_string_lossy().into_owned());
        out.lock().unwrap()[task as usize] = (name, stack);
        unsafe { parallel_barrier(task, p) }
    }

    #[test]
    fn workers_are_named_and_get_a_std_sized_stack() {
        let pool = private_pool(2);
        let seen = Mutex::new(vec![(String::new(), 0usize); 2]);
        let r = unsafe { launch_on(pool, describe, &seen as *const _ as *mut c_void, 2) };
        assert_eq!(r, 0);
        let (name, stack) = seen.lock().unwrap()[1].clone();
        assert_eq!(name, "tvm-worker-1");
        let want = std::env::var("RUST_MIN_STACK")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(2 << 20);
        assert!(stack >= want, "{stack} < {want}");
        pool.stop();
    }

    #[test]
    fn the_process_pool_runs_every_task_once() {
        for n in [1, 2] {
            let s = shared();
            let n = n.min(num_threads() as i32);
            let r = unsafe { parallel_launch(count, &s as *const _ as *mut c_void, n) };
            assert_eq!(r, 0);
            for (t, h) in hits(&s).into_iter().enumerate() {
                assert_eq!(h, u64::from(t < n as usize), "task {t} of {n}");
            }
            assert!(!s.bad.load(Ordering::SeqCst));
        }
    }

    #[test]
    fn workers_that_cannot_be_pinned_are_reported_and_not_counted() {
        let config = PoolConfig {
            threads: 3,
            bind: false,
            spin_count: 1000,
        };
        // Beyond any affinity mask (indexing a cpu_set_t there used to panic the worker,
        // which was counted as started all the same).
        let (pool, errors) = own_pool(config.clone(), &[CPU_SETSIZE + 5]);
        assert_eq!(pool.threads(), 1);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].contains("beyond"), "{errors:?}");
        // A launch of the launcher alone still works.
        let s = shared();
        assert_eq!(
            unsafe { launch_on(pool, mark, &s as *const _ as *mut c_void, 0) },
            0
        );
        assert_eq!(hits(&s)[..2], [1, 0]);
        pool.stop();
        // A CPU the mask can name but this machine lacks: the kernel refuses the pin.
        if configured_cpus() < CPU_SETSIZE {
            let (pool, errors) = own_pool(config, &[CPU_SETSIZE - 1]);
            assert_eq!(pool.threads(), 1);
            assert_eq!(errors.len(), 2, "{errors:?}");
            assert!(errors[0].contains("cannot pin"), "{errors:?}");
            pool.stop();
        }
    }

    #[test]
    fn config_threadpool_refuses_bad_ids_and_counts() {
        let cases: [(i64, &[i64], &str); 5] = [
            (2, &[5000], "CPU id 5000 does not exist"),
            (2, &[-1], "CPU id -1 does not exist"),
            (2, &[0, i64::MIN], "does not exist"),
            (-1, &[], "nthreads -1 is out of range"),
            (5000, &[], "nthreads 5000 is out of range"),
        ];
        let before = num_threads();
        for (n, cpus, needle) in cases {
            let e = config_threadpool(0, n, cpus).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        // Refused before anything changed.
        assert_eq!(num_threads(), before);
    }

    #[test]
    fn barrier_tasks_each_get_their_own_thread() {
        let pool = private_pool(4);
        for _ in 0..200 {
            let s = shared();
            let r = unsafe { launch_on(pool, count, &s as *const _ as *mut c_void, 4) };
            assert_eq!(r, 0);
            assert_eq!(hits(&s)[..5], [1, 1, 1, 1, 0]);
            assert!(!s.bad.load(Ordering::SeqCst));
            let mut tids: Vec<u64> = (0..4)
                .map(|t| s.threads[t].load(Ordering::SeqCst))
                .collect();
            tids.sort();
            tids.dedup();
            assert_eq!(tids.len(), 4, "two barrier tasks shared a thread");
        }
        pool.stop();
    }

    #[test]
    fn launch_does_not_wait_for_a_worker_without_a_core() {
        let pool = private_pool(4);
        pool.park(true);
        let caller = within_20s(move || {
            let mut last = Vec::new();
            for _ in 0..100 {
                let s = shared();
                let r = unsafe { launch_on(pool, mark, &s as *const _ as *mut c_void, 4) };
                assert_eq!(r, 0);
                assert_eq!(hits(&s)[..5], [1, 1, 1, 1, 0]);
                last = (0..4)
                    .map(|t| s.threads[t].load(Ordering::SeqCst))
                    .collect();
            }
            (thread_tag(), last)
        });
        // Every task ran on the launching thread: it never waited for the parked workers.
        assert!(caller.1.iter().all(|&t| t == caller.0), "{caller:?}");
        pool.park(false);
        // Once the workers run again they take part (some task, in some launch, off-thread).
        let spread = within_20s(move || {
            (0..2000).any(|_| {
                let s = shared();
                assert_eq!(
                    unsafe { launch_on(pool, count, &s as *const _ as *mut c_void, 4) },
                    0
                );
                let me = thread_tag();
                (0..4).any(|t| s.threads[t].load(Ordering::SeqCst) != me)
            })
        });
        assert!(spread);
        pool.stop();
    }

    /// A task that takes long enough for a running worker to claim the other one.
    unsafe extern "C" fn slow(task: i32, p: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        std::thread::sleep(Duration::from_millis(2));
        unsafe { mark(task, p, cdata) }
    }

    #[test]
    fn launches_that_no_spinning_worker_joins_mark_the_machine_oversubscribed() {
        let pool = private_pool(2);
        // A worker that never gets a core: woken, it stops before claiming (not asleep).
        pool.park(true);
        // Until the woken worker has parked (it may first wait for a core), launches find
        // it asleep; from then on every launch counts, and a streak marks the machine.
        let marked = within_20s(move || {
            (0..20_000).any(|_| {
                let s = shared();
                assert_eq!(
                    unsafe { launch_on(pool, mark, &s as *const _ as *mut c_void, 2) },
                    0
                );
                assert_eq!(hits(&s)[..2], [1, 1]);
                std::thread::sleep(Duration::from_micros(20));
                pool.contention.unseen_streaks.load(Ordering::Relaxed) > 0
            })
        });
        assert!(marked);
        assert!(pool.contention.contended());
        pool.park(false);
        // A worker that runs claims a task of a slow launch, which ends the streak.
        let joined = within_20s(move || {
            let me = thread_tag();
            (0..200).any(|_| {
                let s = shared();
                assert_eq!(
                    unsafe { launch_on(pool, slow, &s as *const _ as *mut c_void, 2) },
                    0
                );
                let helped = (0..2).any(|t| s.threads[t].load(Ordering::SeqCst) != me);
                if helped {
                    assert_eq!(pool.launcher.unclaimed.load(Ordering::Relaxed), 0);
                }
                helped
            })
        });
        assert!(joined);
        pool.stop();
    }

    #[test]
    fn barrier_launch_waits_for_a_parked_worker_and_then_completes() {
        let pool = private_pool(3);
        pool.park(true);
        let s = std::sync::Arc::new(shared());
        let (tx, rx) = mpsc::channel();
        let launched = s.clone();
        std::thread::spawn(move || {
            let r = unsafe { launch_on(pool, count, &*launched as *const _ as *mut c_void, 3) };
            let _ = tx.send(r);
        });
        // The tasks need each other at the barrier, so the launch cannot finish without the
        // parked workers (and must not run them on the launcher's stack, which would deadlock).
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        assert_eq!(hits(&s)[..3], [1, 0, 0]);
        pool.park(false);
        let r = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the barrier launch did not finish after the workers were released");
        assert_eq!(r, 0);
        assert_eq!(hits(&s)[..4], [1, 1, 1, 0]);
        assert!(!s.bad.load(Ordering::SeqCst));
        pool.stop();
    }

    #[test]
    fn spinning_shortens_after_a_preemption() {
        static UNTIL: AtomicU64 = AtomicU64::new(0);
        let c = &Contention::unmarked(&UNTIL);
        assert!(!c.contended());
        assert_eq!(Spin::new(1_000_000, c).left, 1_000_000);
        c.note(&c.preempted);
        assert!(c.contended());
        assert_eq!(c.preempted.load(Ordering::Relaxed), 1);
        assert_eq!(Spin::new(1_000_000, c).left, CONTENDED_SPIN);
        assert_eq!(Spin::new(10, c).left, 10);
    }

    /// Task 0 (the launcher's) waits until a worker has started task 1, which then takes
    /// 20 ms: the launcher has to wait for a started task, as for one whose thread lost its
    /// core.
    unsafe extern "C" fn slow_worker_task(
        task: i32,
        _p: *mut ParallelGroupEnv,
        c: *mut c_void,
    ) -> i32 {
        // SAFETY: the test passes a live AtomicBool.
        let started = unsafe { &*(c as *const AtomicBool) };
        if task == 0 {
            while !started.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        } else {
            started.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
        }
        0
    }

    #[test]
    fn a_long_wait_for_a_started_task_marks_the_machine_oversubscribed() {
        let pool = private_pool(2);
        within_20s(move || {
            let started = AtomicBool::new(false);
            let c = &started as *const AtomicBool as *mut c_void;
            assert_eq!(unsafe { launch_on(pool, slow_worker_task, c, 2) }, 0);
        });
        assert_eq!(pool.contention.slow_launches.load(Ordering::Relaxed), 1);
        assert!(pool.contention.contended());
        pool.stop();
    }

    /// Task 1 reaches the barrier 20 ms after task 0 is about to: task 0's barrier wait is
    /// long.
    unsafe extern "C" fn late_at_the_barrier(
        task: i32,
        p: *mut ParallelGroupEnv,
        c: *mut c_void,
    ) -> i32 {
        // SAFETY: the test passes a live AtomicBool.
        let arriving = unsafe { &*(c as *const AtomicBool) };
        if task == 1 {
            while !arriving.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(20));
        } else {
            arriving.store(true, Ordering::SeqCst);
        }
        // SAFETY: the environment the pool passed to this task.
        unsafe { parallel_barrier(task, p) }
    }

    #[test]
    fn a_slow_barrier_marks_the_machine_oversubscribed() {
        // A spin budget of ~5 ms: the wait must count even when it never sleeps.
        let (pool, errors) = own_pool(
            PoolConfig {
                threads: 2,
                bind: false,
                spin_count: 5_000_000,
            },
            &[],
        );
        assert!(errors.is_empty());
        within_20s(move || {
            let arriving = AtomicBool::new(false);
            let c = &arriving as *const AtomicBool as *mut c_void;
            assert_eq!(unsafe { launch_on(pool, late_at_the_barrier, c, 2) }, 0);
        });
        assert_eq!(pool.contention.slow_barriers.load(Ordering::Relaxed), 1);
        assert!(pool.contention.contended());
        pool.stop();
    }

    #[test]
    fn barrier_lambdas_run_alone_on_an_oversubscribed_machine() {
        let pool = private_pool(2);
        let s = shared();
        assert_eq!(
            unsafe { launch_on(pool, count, &s as *const _ as *mut c_void, 2) },
            0
        );
        assert!(uses_barrier(count as *const () as usize));
        assert!(!uses_barrier(mark as *const () as usize));
        pool.contention.note(&pool.contention.preempted);
        let s = shared();
        assert_eq!(
            unsafe { launch_on(pool, count, &s as *const _ as *mut c_void, 0) },
            0
        );
        assert_eq!(hits(&s)[..2], [1, 0]);
        assert!(!s.bad.load(Ordering::SeqCst));
        pool.stop();
    }

    #[test]
    fn launches_run_alone_while_application_threads_share_the_pool() {
        let pool = private_pool(2);
        let launch = |n: i32| {
            let s = shared();
            assert_eq!(
                unsafe { launch_on(pool, mark, &s as *const _ as *mut c_void, n) },
                0
            );
            hits(&s)
        };
        // Another application thread holds the pool: a launch that lets the pool choose runs
        // alone on its caller, and records the collision.
        pool.launcher.busy.store(true, Ordering::SeqCst);
        assert_eq!(launch(0)[..2], [1, 0]);
        assert_ne!(pool.contention.collision.load(Ordering::Relaxed), 0);
        pool.launcher.busy.store(false, Ordering::SeqCst);
        // While the collision is recent (here: one that stays recent, whatever the clock
        // says), such launches keep running alone although the pool is free.
        pool.contention
            .collision
            .store(u64::MAX / 2, Ordering::Relaxed);
        assert_eq!(launch(0)[..2], [1, 0]);
        // An explicit task count is kept.
        assert_eq!(launch(2)[..3], [1, 1, 0]);
        // Without a collision the pool's threads are used.
        pool.contention.collision.store(0, Ordering::Relaxed);
        assert_eq!(launch(0)[..3], [1, 1, 0]);
        pool.stop();
    }

    unsafe extern "C" fn fail_odd(task: i32, _p: *mut ParallelGroupEnv, _c: *mut c_void) -> i32 {
        if task % 2 == 1 || unsafe { (*_p).num_task } == 1 {
            set_last_error_message("ValueError: task failed".into());
            return -1;
        }
        0
    }

    #[test]
    fn errors_propagate_and_too_many_tasks_fail() {
        let r = unsafe { parallel_launch(fail_odd, std::ptr::null_mut(), 0) };
        assert_eq!(r, -1);
        assert_eq!(last_error_string(), "ValueError: task failed");
        let r = unsafe { parallel_launch(fail_odd, std::ptr::null_mut(), 100_000) };
        assert_eq!(r, -1);
        assert!(last_error_string().contains("100000 tasks"));
        let r = unsafe { parallel_launch(fail_odd, std::ptr::null_mut(), -1) };
        assert_eq!(r, -1);
        assert!(last_error_string().contains("negative"));
    }

    unsafe extern "C" fn nested(task: i32, _p: *mut ParallelGroupEnv, c: *mut c_void) -> i32 {
        let s = unsafe { &*(c as *const Shared) };
        let inner = shared();
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
            unsafe { parallel_launch(nested, &s as *const _ as *mut c_void, 0) },
            0
        );
        assert!(!s.bad.load(Ordering::SeqCst));
    }

    #[test]
    fn many_application_threads_launch_at_once() {
        let pool = private_pool(2);
        let threads: Vec<_> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    for k in 0..2000 {
                        let s = shared();
                        // Half the threads let the pool choose, half ask for both threads.
                        let n = if i % 2 == 0 { 0 } else { 2 };
                        let f = if k % 2 == 0 { count } else { mark };
                        let r = unsafe { launch_on(pool, f, &s as *const _ as *mut c_void, n) };
                        assert_eq!(r, 0);
                        let h = hits(&s);
                        let total: u64 = h.iter().sum();
                        assert!((1..=2).contains(&total));
                        assert!(n == 0 || total == 2);
                        assert!(h.iter().all(|&x| x <= 1));
                        assert!(!s.bad.load(Ordering::SeqCst));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        pool.stop();
    }

    /// Eight pool threads on a machine with fewer cores (CI: 2 cores; boards under qemu), shared
    /// by four application threads whose launches use barriers on every pool thread: each
    /// task runs once on its own thread, no barrier phase is passed early, and nothing hangs.
    #[test]
    fn a_pool_wider_than_the_machine_keeps_its_barriers_under_shared_launches() {
        let pool = private_pool(8);
        within_20s(move || {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    std::thread::spawn(move || {
                        for _ in 0..50 {
                            let s = shared();
                            let r =
                                unsafe { launch_on(pool, count, &s as *const _ as *mut c_void, 8) };
                            assert_eq!(r, 0);
                            assert_eq!(hits(&s)[..9], [1, 1, 1, 1, 1, 1, 1, 1, 0]);
                            assert!(
                                !s.bad.load(Ordering::SeqCst),
                                "a barrier phase was passed early"
                            );
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        });
        pool.stop();
    }
}

/// Model checks of the pool's protocols (the `loom` feature, `scripts/loom.sh`): the
/// launch (job line, claim word, wake counter), the count of finished tasks, the barrier,
/// the sleeps on all three, the shutdown and the pool's holder. The pools are the real ones
/// (`Pool::new`) with loom threads running the real `worker_loop`, and launches go through
/// the real `launch_on`; loom's cells report any access to a task's data that the protocol
/// does not order, its scheduler any sleeper that nobody wakes.
#[cfg(all(test, loom))]
// Test lambdas called the way compiled kernels are; each passes live data.
#[allow(clippy::undocumented_unsafe_blocks)]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;

    /// A pool of `threads`: the calling thread and `threads - 1` workers.
    fn model_pool(threads: usize) -> (&'static Pool, Vec<loom::thread::JoinHandle<()>>) {
        let until: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
        let config = PoolConfig {
            threads,
            bind: false,
            spin_count: 1,
        };
        let pool = Pool::new(config, &[], until);
        let workers = (1..threads)
            .map(|w| loom::thread::spawn(move || pool.worker_loop(&pool.acks[w - 1])))
            .collect();
        pool.threads.store(threads, Ordering::Release);
        (pool, workers)
    }

    fn stop(pool: &'static Pool, workers: Vec<loom::thread::JoinHandle<()>>) {
        pool.stop();
        for w in workers {
            w.join().unwrap();
        }
    }

    /// What a launch's tasks share: an input the launcher writes before the launch, and per
    /// task a count of runs and what the task read.
    struct Data {
        input: UnsafeCell<u32>,
        runs: [UnsafeCell<u32>; 2],
        read: [UnsafeCell<u32>; 2],
    }

    // SAFETY: the cells are accessed as the protocol under test orders them (which loom checks).
    unsafe impl Sync for Data {}

    impl Data {
        fn new(input: u32) -> Data {
            Data {
                input: UnsafeCell::new(input),
                runs: [UnsafeCell::new(0), UnsafeCell::new(0)],
                read: [UnsafeCell::new(0), UnsafeCell::new(0)],
            }
        }

        fn as_cdata(&self) -> *mut c_void {
            self as *const Data as *mut c_void
        }

        /// After the launch, on the launcher: every task ran once and read `input`.
        fn check(&self, input: u32, tasks: usize) {
            for t in 0..tasks {
                assert_eq!(self.runs[t].with(|p| unsafe { *p }), 1, "task {t}");
                assert_eq!(self.read[t].with(|p| unsafe { *p }), input, "task {t}");
            }
        }
    }

    fn guard(f: impl FnOnce() -> i32) -> i32 {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(-1)
    }

    /// Counts its run and reads the input; task 1 fails when the input is odd.
    unsafe extern "C" fn work(task: i32, _p: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        // A race loom reports in the task panics: it must not unwind into the pool's C-ABI
        // call (the model fails on the caught panic).
        guard(|| {
            let d = unsafe { &*(cdata as *const Data) };
            let t = task as usize;
            d.runs[t].with_mut(|p| unsafe { *p += 1 });
            let input = d.input.with(|p| unsafe { *p });
            d.read[t].with_mut(|p| unsafe { *p = input });
            if t == 1 && input % 2 == 1 {
                set_last_error_message("ValueError: odd".into());
                return -1;
            }
            0
        })
    }

    /// Two phases: each task writes its run count, meets the other at the barrier, reads the
    /// other's count, meets it again and writes again (which the second barrier orders after
    /// the other's read).
    unsafe extern "C" fn exchange(task: i32, p: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        // A race loom reports in the task panics: it must not unwind into the pool's C-ABI
        // call (the model fails on the caught panic).
        guard(|| {
            let d = unsafe { &*(cdata as *const Data) };
            let t = task as usize;
            d.runs[t].with_mut(|c| unsafe { *c += 1 });
            unsafe { parallel_barrier(task, p) };
            let other = d.runs[1 - t].with(|c| unsafe { *c });
            d.read[t].with_mut(|c| unsafe { *c = other });
            unsafe { parallel_barrier(task, p) };
            d.runs[t].with_mut(|c| unsafe { *c += 1 });
            0
        })
    }

    #[test]
    fn loom_launch_publishes_the_job_and_waits_for_its_tasks() {
        crate::sync::model(|| {
            let (pool, workers) = model_pool(2);
            let d = Data::new(2);
            assert_eq!(unsafe { launch_on(pool, work, d.as_cdata(), 2) }, 0);
            d.check(2, 2);
            stop(pool, workers);
        });
    }

    #[test]
    fn loom_consecutive_launches_reuse_the_words() {
        crate::sync::model(|| {
            let (pool, workers) = model_pool(2);
            for input in [2, 4] {
                let d = Data::new(input);
                assert_eq!(unsafe { launch_on(pool, work, d.as_cdata(), 0) }, 0);
                d.check(input, 2);
            }
            stop(pool, workers);
        });
    }

    #[test]
    fn loom_a_failed_task_fails_its_launch_only() {
        crate::sync::model(|| {
            let (pool, workers) = model_pool(2);
            let d = Data::new(3);
            assert_eq!(unsafe { launch_on(pool, work, d.as_cdata(), 2) }, -1);
            assert_eq!(last_error_string(), "ValueError: odd");
            let d = Data::new(2);
            assert_eq!(unsafe { launch_on(pool, work, d.as_cdata(), 2) }, 0);
            stop(pool, workers);
        });
    }

    #[test]
    fn loom_barrier_orders_both_phases() {
        crate::sync::model(|| {
            let (pool, workers) = model_pool(2);
            let d = Data::new(0);
            assert_eq!(unsafe { launch_on(pool, exchange, d.as_cdata(), 2) }, 0);
            for t in 0..2 {
                assert_eq!(d.runs[t].with(|p| unsafe { *p }), 2);
                assert_eq!(d.read[t].with(|p| unsafe { *p }), 1);
            }
            stop(pool, workers);
        });
    }

    #[test]
    fn loom_application_threads_share_the_pool() {
        crate::sync::model(|| {
            let (pool, workers) = model_pool(2);
            // Another application thread asks for both threads: it waits for the pool.
            let other = loom::thread::spawn(move || {
                let d = Data::new(4);
                assert_eq!(unsafe { launch_on(pool, work, d.as_cdata(), 2) }, 0);
                d.check(4, 2);
            });
            // This one lets the pool choose: it runs alone if it finds the pool held.
            let d = Data::new(2);
            assert_eq!(unsafe { launch_on(pool, work, d.as_cdata(), 0) }, 0);
            let ran = d.runs[1].with(|p| unsafe { *p });
            d.check(2, 1 + ran as usize);
            other.join().unwrap();
            stop(pool, workers);
        });
    }
}
