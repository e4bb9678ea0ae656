//! The synchronisation primitives of the lock-free protocols (the thread pool's launch, done
//! and barrier words, object reference counts, the registry's start-up flag), from one place
//! so that a build with the `loom` feature (which sets the `loom` cfg) can model-check the very
//! code the library runs.
//!
//! In a normal build everything here is a re-export of `std` (no wrapper, no indirection).
//! With the `loom` feature (see `scripts/loom.sh`) the atomics, the mutex, spinning,
//! yielding, thread-locals and statics come from the `loom` model checker instead, the clock
//! stands still (the pool's adaptive spinning reads it; the model must be deterministic), and
//! the futex becomes a model of the kernel's (wait compares and sleeps atomically with
//! respect to wake; a wake wakes at most `count` sleepers on that word).
//!
//! `SeqCst` accesses: loom treats them as acquire/release only (its README: "they are
//! regarded as AcqRel", which would report false lost wakeups in the pool's sleep protocols,
//! whose correctness rests on the single total order of their `SeqCst` accesses). Under loom
//! every `SeqCst` access is therefore preceded by `fence(SeqCst)`, which loom does model:
//! the "leading fence" implementation of `SeqCst` accesses, shown correct for C11's (RC11)
//! `SeqCst` semantics by Lahav et al., "Repairing sequential consistency in C/C++11" (PLDI
//! 2017). Accesses with weaker orderings are modelled as written.
#![allow(unused_imports)]

#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
        Ordering,
    };
}
#[cfg(not(loom))]
pub(crate) use std::{hint::spin_loop, sync::Mutex, thread::yield_now};

#[cfg(all(not(loom), target_os = "emscripten"))]
pub(crate) use emscripten_clock::Instant;
/// The monotonic clock: std's, but on WebAssembly emscripten's (below), and under loom one
/// that stands still.
#[cfg(all(not(loom), not(target_os = "emscripten")))]
pub(crate) use std::time::Instant;

/// Emscripten 3.1.6 (Debian's) has a 32-bit `time_t` while Rust's libc for
/// `wasm32-unknown-emscripten` expects a 64-bit one, so `std::time::{Instant, SystemTime}`
/// read garbage there (and `Instant` can panic); this clock reads `emscripten_get_now` (the
/// host's `performance.now()`, milliseconds as a double).
///
/// cbindgen:ignore
#[cfg(all(not(loom), target_os = "emscripten"))]
mod emscripten_clock {
    use std::time::Duration;

    extern "C" {
        fn emscripten_get_now() -> f64;
    }

    /// A point in time, in milliseconds since the host's time origin.
    #[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
    pub(crate) struct Instant(f64);

    impl Instant {
        /// Now.
        pub(crate) fn now() -> Instant {
            // SAFETY: emscripten's clock reads the host's timer; no arguments, no memory.
            Instant(unsafe { emscripten_get_now() })
        }

        /// The time since `self` (zero if the clock went back).
        pub(crate) fn elapsed(&self) -> Duration {
            Instant::now().duration_since(*self)
        }

        /// The time from `earlier` to `self` (zero if `earlier` is later).
        pub(crate) fn duration_since(&self, earlier: Instant) -> Duration {
            Duration::from_secs_f64(((self.0 - earlier.0) / 1e3).max(0.0))
        }
    }
}

/// A sleep (under loom: a yield).
#[cfg(not(loom))]
pub(crate) use std::thread::sleep;

/// A static atomic or mutex: a plain `static`, or under loom one created afresh in each
/// model run.
macro_rules! sync_static {
    ($(#[$a:meta])* $vis:vis static $name:ident: $t:ty = $init:expr;) => {
        #[cfg(not(loom))]
        $(#[$a])* $vis static $name: $t = $init;
        #[cfg(loom)]
        loom::lazy_static! { $(#[$a])* static ref $name: $t = $init; }
    };
}
pub(crate) use sync_static;

#[cfg(loom)]
pub(crate) use loom::{hint::spin_loop, sync::Mutex, thread::yield_now};

#[cfg(loom)]
pub(crate) fn sleep(_: std::time::Duration) {
    loom::thread::yield_now();
}

/// Atomics of the model: loom's, with a leading `fence(SeqCst)` on each `SeqCst` access.
#[cfg(loom)]
#[allow(dead_code)]
pub(crate) mod atomic {
    pub(crate) use l::fence;
    use loom::sync::atomic as l;
    pub(crate) use std::sync::atomic::Ordering;

    #[inline]
    fn lead(o: Ordering) {
        if o == Ordering::SeqCst {
            l::fence(Ordering::SeqCst);
        }
    }

    macro_rules! wrap {
        ($name:ident, $t:ty $(, $int:ident)?) => {
            #[derive(Debug)]
            pub(crate) struct $name(l::$name);

            impl $name {
                pub(crate) fn new(v: $t) -> Self {
                    Self(l::$name::new(v))
                }
                pub(crate) fn load(&self, o: Ordering) -> $t {
                    lead(o);
                    self.0.load(o)
                }
                pub(crate) fn store(&self, v: $t, o: Ordering) {
                    lead(o);
                    self.0.store(v, o)
                }
                pub(crate) fn swap(&self, v: $t, o: Ordering) -> $t {
                    lead(o);
                    self.0.swap(v, o)
                }
                pub(crate) fn compare_exchange(
                    &self,
                    c: $t,
                    n: $t,
                    s: Ordering,
                    f: Ordering,
                ) -> Result<$t, $t> {
                    lead(s);
                    self.0.compare_exchange(c, n, s, f)
                }
                pub(crate) fn compare_exchange_weak(
                    &self,
                    c: $t,
                    n: $t,
                    s: Ordering,
                    f: Ordering,
                ) -> Result<$t, $t> {
                    lead(s);
                    self.0.compare_exchange_weak(c, n, s, f)
                }
            }
            $(wrap!(@$int $name, $t);)?
        };
        (@int $name:ident, $t:ty) => {
            impl $name {
                pub(crate) fn fetch_add(&self, v: $t, o: Ordering) -> $t {
                    lead(o);
                    self.0.fetch_add(v, o)
                }
                pub(crate) fn fetch_sub(&self, v: $t, o: Ordering) -> $t {
                    lead(o);
                    self.0.fetch_sub(v, o)
                }
            }
        };
    }
    wrap!(AtomicBool, bool);
    wrap!(AtomicU8, u8, int);
    wrap!(AtomicI32, i32, int);
    wrap!(AtomicU32, u32, int);
    wrap!(AtomicU64, u64, int);
    wrap!(AtomicUsize, usize, int);

    #[derive(Debug)]
    pub(crate) struct AtomicPtr<T>(l::AtomicPtr<T>);

    impl<T> AtomicPtr<T> {
        pub(crate) fn new(v: *mut T) -> Self {
            Self(l::AtomicPtr::new(v))
        }
        pub(crate) fn load(&self, o: Ordering) -> *mut T {
            lead(o);
            self.0.load(o)
        }
        pub(crate) fn store(&self, v: *mut T, o: Ordering) {
            lead(o);
            self.0.store(v, o)
        }
    }
}

/// The clock of the model: it stands still, so the pool's spinning never concludes that it
/// was descheduled and no wait counts as slow (the heuristics those drive choose spin
/// budgets and whether a launch runs inline; they are not part of any protocol's safety).
#[cfg(loom)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Instant;

#[cfg(loom)]
impl Instant {
    pub(crate) fn now() -> Instant {
        Instant
    }
    pub(crate) fn elapsed(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    pub(crate) fn duration_since(&self, _: Instant) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

/// The kernel's futex, modelled: `wait` compares the word and goes to sleep atomically with
/// respect to `wake` (the kernel's hash-bucket lock, here a mutex), and returns only when a
/// `wake` on the same word picked it (or at once when the word differs). Real futex waits
/// may also return spuriously; the pool's callers loop, and a model without spurious returns
/// is the stricter one for lost wakeups: a sleeper nobody wakes is a deadlock loom reports.
#[cfg(loom)]
pub(crate) mod futex {
    use super::atomic::{AtomicU32, Ordering};
    use loom::sync::{Condvar, Mutex};

    #[derive(Default)]
    struct Queue {
        next: u64,
        /// (word address, ticket, woken)
        waiting: Vec<(usize, u64, bool)>,
    }

    loom::lazy_static! {
        static ref FUTEX: (Mutex<Queue>, Condvar) = (Mutex::new(Queue::default()), Condvar::new());
    }

    pub(crate) fn wait(word: &AtomicU32, expected: u32) {
        let (m, cv) = &*FUTEX;
        let mut q = m.lock().unwrap();
        if word.load(Ordering::Relaxed) != expected {
            return;
        }
        let me = q.next;
        q.next += 1;
        q.waiting
            .push((word as *const AtomicU32 as usize, me, false));
        loop {
            q = cv.wait(q).unwrap();
            if let Some(i) = q.waiting.iter().position(|w| w.1 == me && w.2) {
                q.waiting.swap_remove(i);
                return;
            }
        }
    }

    pub(crate) fn wake(word: &AtomicU32, count: i32) {
        let (m, cv) = &*FUTEX;
        let mut q = m.lock().unwrap();
        let at = word as *const AtomicU32 as usize;
        let mut left = count;
        for w in q.waiting.iter_mut().filter(|w| w.0 == at && !w.2) {
            if left <= 0 {
                break;
            }
            w.2 = true;
            left -= 1;
        }
        cv.notify_all();
    }
}

/// Runs a loom model with this crate's settings: at most `LOOM_MAX_PREEMPTIONS` preemptions
/// per execution (default 2), which keeps each model within seconds; and an execution fails
/// when anything in it panicked, even where the code under test caught the panic (the object
/// deleter and the pool's workers catch panics, loom reports a data race by panicking).
#[cfg(all(loom, test))]
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    use std::cell::RefCell;
    std::thread_local! {
        /// The first panic of this OS thread's current execution (loom runs an execution's
        /// threads on the thread that called `model`).
        static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    }
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let next = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANIC.with(|p| {
                p.borrow_mut().get_or_insert_with(|| info.to_string());
            });
            next(info)
        }));
    });
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(move || {
        PANIC.with(|p| p.borrow_mut().take());
        f();
        if let Some(p) = PANIC.with(|p| p.borrow_mut().take()) {
            panic!("a panic inside the model was caught by the code under test: {p}");
        }
    });
}
