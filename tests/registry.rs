//! The global registry's start-up under concurrent first use: many threads reach the registry
//! at once in a fresh process; every one must see the complete registry, and none may hang.

use std::sync::{Arc, Barrier};
use std::time::Duration;
use tvm_runtime::packed_func::registry;

#[test]
fn concurrent_first_use_sees_a_complete_registry() {
    const THREADS: usize = 16;
    let barrier = Arc::new(Barrier::new(THREADS));
    let (tx, rx) = std::sync::mpsc::channel();
    for t in 0..THREADS {
        let barrier = barrier.clone();
        let tx = tx.clone();
        std::thread::spawn(move || {
            barrier.wait();
            // Half look up, half register: both are first uses that start the registry.
            let complete = if t % 2 == 0 {
                registry::get("runtime.SystemLib").is_some()
            } else {
                registry::register_rust(&format!("test.concurrent.{t}"), |_, _| Ok(()));
                registry::contains("runtime.SystemLib")
            };
            let _ = tx.send((complete, registry::list_names().len()));
        });
    }
    drop(tx);
    let mut sizes = Vec::new();
    for _ in 0..THREADS {
        let (complete, n) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a thread did not finish within 60 s (registry start-up deadlock?)");
        assert!(
            complete,
            "a thread saw the registry before every room registered"
        );
        sizes.push(n);
    }
    let baseline = registry::list_names().len();
    assert!(
        sizes.iter().all(|&n| n > 50 && n <= baseline),
        "{sizes:?} vs {baseline}"
    );
    for t in (1..THREADS).step_by(2) {
        assert!(registry::contains(&format!("test.concurrent.{t}")));
    }
}
