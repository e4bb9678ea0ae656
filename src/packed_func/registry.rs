//! The global function registry: names to PackedFuncs.
//!
//! The registry type lives here, in the lowest room, and knows nothing of the rooms above it.
//! Each room registers its own functions beside their implementation (a `register(&mut
//! Registrar)` function in the room); the composition root, `crate::register_all`, calls them
//! all once, on the first use of the registry.
//!
//! Registration writes into the same map the lookups read, one entry at a time, under a lock
//! that is never held while a room's code runs. A registration may therefore look up or
//! register functions itself (it sees what was registered before it), and other threads that
//! arrive during the start-up wait for it to finish instead of seeing a half-filled registry.
//!
//! A room may watch a name prefix ([`Registrar::watch`]): its watcher runs after each later
//! registration of a name with that prefix, with no registry lock held (the device room adopts
//! `device_api.<name>` plugin tables this way).

use super::error::{Error, Result};
use super::function::Function;
use super::value::{Args, RetValue};
use crate::sync::atomic::{AtomicBool, Ordering};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, RwLock};

/// A watcher of registrations: called with the name and the function just registered.
type Watcher = Arc<dyn Fn(&str, &Function) -> Result<()> + Send + Sync>;

/// Watchers by name prefix.
static WATCHERS: RwLock<Vec<(String, Watcher)>> = RwLock::new(Vec::new());

/// The registry's map. Keys are names the program and its libraries register (lookups of
/// other names only miss), so a fast non-keyed hash serves; SipHash was most of a lookup.
type Map = HashMap<Box<[u8]>, Function, rustc_hash::FxBuildHasher>;

static REGISTRY: LazyLock<RwLock<Map>> = LazyLock::new(|| RwLock::new(Map::default()));

/// Names registered as defaults that a frontend may replace without asking to override (the
/// reference registers them from Python; we provide them natively).
/// A few names: a list, not a set (one hash table type less in the library).
static WEAK: Mutex<Vec<String>> = Mutex::new(Vec::new());

crate::sync::sync_static! {
    /// Set once every room's registration has run.
    static READY: AtomicBool = AtomicBool::new(false);
}
crate::sync::sync_static! {
    /// Held by the thread running the registrations; other threads wait on it.
    static STARTUP: crate::sync::Mutex<()> = crate::sync::Mutex::new(());
}

thread_local! {
    /// True on the thread running the registrations, so that its own lookups do not wait.
    static REGISTERING: Cell<bool> = const { Cell::new(false) };
}

/// The handle a room registers its global functions through.
pub struct Registrar {
    _private: (),
}

/// Marks `name` as a weak registration (the part of [`Registrar::add_weak`] that is the
/// same for every function).
#[inline(never)]
fn mark_weak(name: &str) {
    let mut weak = WEAK.lock().unwrap_or_else(|e| e.into_inner());
    if !weak.iter().any(|n| n == name) {
        weak.push(name.to_string());
    }
}

impl Registrar {
    /// Registers a Rust function under `name` (replacing an earlier one of that name).
    pub fn add<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync + 'static,
    {
        // Out of line, so each registration costs one call (name and function pointer), not
        // a copy; a closure that captures nothing becomes a plain function pointer.
        match Function::plain_or_closure(f) {
            Ok(p) => self.add_plain(name, p),
            Err(f) => self.add_function(name, Function::from_boxed(Box::new(f))),
        }
    }

    /// Registers a plain Rust function under `name` (replacing an earlier one of that name).
    #[inline(never)]
    pub fn add_plain(&mut self, name: &str, f: super::function::PlainFunc) {
        self.add_function(name, Function::from_plain(f));
    }

    /// Registers a default that a later `register` of the same name replaces even without
    /// `override` (for functions the reference registers from its Python package).
    pub fn add_weak<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync + 'static,
    {
        mark_weak(name);
        self.add(name, f);
    }

    /// Registers a function object under `name` (replacing an earlier one of that name).
    #[inline(never)]
    pub fn add_function(&mut self, name: &str, f: Function) {
        insert(&mut write(), name, &f);
        // Start-up registrations are the rooms' own; a watcher's error is its room's bug.
        let _ = notify(name, &f);
    }

    /// Calls `w` after every later registration of a name starting with `prefix` (from any
    /// room or through the C API), with no registry lock held. Its error is returned by the
    /// registering call (the function stays registered).
    pub fn watch<W>(&mut self, prefix: &str, w: W)
    where
        W: Fn(&str, &Function) -> Result<()> + Send + Sync + 'static,
    {
        WATCHERS
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((prefix.to_string(), Arc::new(w)));
    }
}

/// Adds or replaces an entry (one out-of-line copy of the map's insertion).
#[inline(never)]
fn insert(map: &mut Map, name: &str, f: &Function) {
    map.insert(name.as_bytes().into(), f.clone());
}

/// Runs the watchers whose prefix `name` has (none of the registry's locks held).
fn notify(name: &str, f: &Function) -> Result<()> {
    let mut ws: Vec<Watcher> = Vec::new();
    for (p, w) in WATCHERS.read().unwrap_or_else(|e| e.into_inner()).iter() {
        if name.starts_with(p.as_str()) {
            ws.push(w.clone());
        }
    }
    for w in ws {
        w(name, f)?;
    }
    Ok(())
}

/// Whether the start-up registrations have run.
pub fn started() -> bool {
    is_set(&READY)
}

/// Runs the start-up registrations if they have not run yet (each room's functions, and what
/// rooms discover at start-up, such as the device plugins named in `TVM_DEVICE_PLUGINS`).
pub fn start() {
    ensure_ready();
}

fn write() -> std::sync::RwLockWriteGuard<'static, Map> {
    REGISTRY.write().unwrap_or_else(|e| e.into_inner())
}

fn read() -> std::sync::RwLockReadGuard<'static, Map> {
    REGISTRY.read().unwrap_or_else(|e| e.into_inner())
}

/// Makes sure the composition root's registrations have run (or are running on this thread):
/// what a room needs before relying on something another room installs at start-up.
pub fn ensure_started() {
    ensure_ready();
}

/// Runs the composition root's registrations once. Cheap after the first call (one atomic load).
#[inline]
fn ensure_ready() {
    if is_set(&READY) || REGISTERING.with(Cell::get) {
        return;
    }
    start_up();
}

#[cold]
fn start_up() {
    let outcome = run_once(&READY, &STARTUP, || {
        REGISTERING.with(|r| r.set(true));
        let outcome = std::panic::catch_unwind(|| {
            let mut r = Registrar { _private: () };
            crate::register_all(&mut r);
            #[cfg(test)]
            tests::reentrant_room(&mut r);
        });
        REGISTERING.with(|r| r.set(false));
        outcome
    });
    if let Some(Err(p)) = outcome {
        std::panic::resume_unwind(p);
    }
}

/// The fast path of a start-up flag: whether it is set, and (acquire) what the thread that
/// set it did before (see [`run_once`]).
#[inline(always)]
fn is_set(ready: &AtomicBool) -> bool {
    ready.load(Ordering::Acquire)
}

/// The slow path of a start-up flag (`ready`, whose fast path is an acquire load): under
/// `lock`, runs `init` unless another thread already has, then sets `ready` with release
/// ordering, so that a thread that sees it set (acquire) sees everything `init` did. Returns
/// what `init` returned, `None` when it had already run.
fn run_once<R>(
    ready: &AtomicBool,
    lock: &crate::sync::Mutex<()>,
    init: impl FnOnce() -> R,
) -> Option<R> {
    let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
    if ready.load(Ordering::Acquire) {
        return None;
    }
    let r = init();
    ready.store(true, Ordering::Release);
    Some(r)
}

/// Registers a function; an existing name is an error unless `override_existing`.
pub fn register(name: &str, f: Function, override_existing: bool) -> Result<()> {
    ensure_ready();
    {
        let weak = {
            let mut w = WEAK.lock().unwrap_or_else(|e| e.into_inner());
            let at = w.iter().position(|n| n == name);
            at.map(|i| w.swap_remove(i)).is_some()
        };
        let mut r = write();
        if !override_existing && !weak && r.contains_key(name.as_bytes()) {
            return Err(Error::internal_fmt(format_args!(
                "Global PackedFunc {name} is already registered"
            )));
        }
        insert(&mut r, name, &f);
    }
    notify(name, &f)
}

/// Registers a Rust closure (overriding); a watcher's error is dropped (see [`register`] to get it).
pub fn register_rust<F>(name: &str, f: F)
where
    F: Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync + 'static,
{
    ensure_ready();
    let f = Function::from_rust(f);
    insert(&mut write(), name, &f);
    let _ = notify(name, &f);
}

/// Looks a function up.
pub fn get(name: &str) -> Option<Function> {
    get_bytes(name.as_bytes())
}

/// Looks a function up by the bytes of its name: a name from C needs no UTF-8 check to be
/// found (every registered name is valid UTF-8, so bytes that match one are too).
pub fn get_bytes(name: &[u8]) -> Option<Function> {
    ensure_ready();
    read().get(name).cloned()
}

/// Whether a function of that name is registered.
pub fn contains(name: &str) -> bool {
    ensure_ready();
    read().contains_key(name.as_bytes())
}

/// Removes a function; returns whether it existed.
pub fn remove(name: &str) -> bool {
    ensure_ready();
    write().remove(name.as_bytes()).is_some()
}

/// Calls `f` with the bytes of every registered name (valid UTF-8), under the registry's
/// read lock: `f` must not use the registry.
pub fn for_each_name(f: &mut dyn FnMut(&[u8])) {
    ensure_ready();
    for k in read().keys() {
        f(k);
    }
}

/// All registered names.
pub fn list_names() -> Vec<String> {
    let mut names = Vec::new();
    for_each_name(&mut |k| names.push(String::from_utf8_lossy(k).into_owned()));
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU8;
    use std::time::Duration;

    /// 0: not run; 1: every call inside the registration returned; 2: a lookup missed.
    static REENTRANT: AtomicU8 = AtomicU8::new(0);

    /// A room's registration (run by the start-up in test builds, after every real room) that
    /// uses the global registry from inside the registration.
    pub(super) fn reentrant_room(r: &mut Registrar) {
        r.add("test.registry.first", |_, rv| {
            *rv = RetValue::Int(1);
            Ok(())
        });
        // Lookups see what was registered before, by this room and by the rooms below.
        let seen_own = get("test.registry.first").is_some() && contains("test.registry.first");
        let seen_below = contains("runtime.SystemLib");
        // Registering through the global API inside a registration.
        register_rust("test.registry.second", |_, rv| {
            *rv = RetValue::Int(2);
            Ok(())
        });
        let ok = register(
            "test.registry.third",
            Function::from_rust(|_, _| Ok(())),
            false,
        )
        .is_ok();
        let names = list_names().len();
        REENTRANT.store(
            if seen_own && seen_below && ok && names > 3 {
                1
            } else {
                2
            },
            Ordering::SeqCst,
        );
    }

    #[test]
    fn registering_and_looking_up_inside_a_registration_does_not_deadlock() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let found = [
                "test.registry.first",
                "test.registry.second",
                "test.registry.third",
            ]
            .map(|n| get(n).is_some());
            let _ = tx.send(found);
        });
        let found = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the registry start-up did not finish within 60 s (deadlock?)");
        assert_eq!(found, [true; 3]);
        assert_eq!(
            REENTRANT.load(Ordering::SeqCst),
            1,
            "a call inside the registration failed"
        );
    }
}

/// Model check of the start-up flag (the `loom` feature, `scripts/loom.sh`): the
/// registry's fast and slow paths (`is_set`, `run_once`) on a flag, lock and data of the
/// test's own; loom's cell reports a thread that uses the data before `init` is ordered
/// before it, its assertions a second `init`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    struct Started {
        ready: AtomicBool,
        lock: crate::sync::Mutex<()>,
        data: UnsafeCell<u32>,
    }

    // SAFETY: `data` is written by `init` only, and read once the flag orders it (checked).
    unsafe impl Sync for Started {}

    fn ensure(s: &Started) -> u32 {
        if !is_set(&s.ready) {
            run_once(&s.ready, &s.lock, || {
                // SAFETY: `init` runs once, under the lock.
                s.data.with_mut(|p| unsafe { *p += 1 })
            });
        }
        // SAFETY: read after the flag is set.
        s.data.with(|p| unsafe { *p })
    }

    #[test]
    fn loom_start_up_runs_once_and_publishes_what_it_did() {
        crate::sync::model(|| {
            let s = Arc::new(Started {
                ready: AtomicBool::new(false),
                lock: crate::sync::Mutex::new(()),
                data: UnsafeCell::new(0),
            });
            let other = s.clone();
            let t = loom::thread::spawn(move || ensure(&other));
            assert_eq!(ensure(&s), 1);
            assert_eq!(t.join().unwrap(), 1);
        });
    }
}
