//! A monotonic clock for timing (the time evaluator, profilers).
//!
//! Everywhere but WebAssembly this is `std::time::Instant`. Emscripten 3.1.6 (Debian's) has a
//! 32-bit `time_t` while Rust's libc for `wasm32-unknown-emscripten` expects a 64-bit one, so
//! `std::time::{Instant, SystemTime}` read garbage there; the clock then comes from
//! `emscripten_get_now` (the host's `performance.now()`, milliseconds as a double).

#[cfg(not(target_os = "emscripten"))]
pub use std::time::Instant;

#[cfg(target_os = "emscripten")]
pub use wasm::Instant;

/// cbindgen:ignore
#[cfg(target_os = "emscripten")]
mod wasm {
    use std::time::Duration;

    extern "C" {
        fn emscripten_get_now() -> f64;
    }

    /// A point in time, in milliseconds since the host's time origin.
    #[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
    pub struct Instant(f64);

    impl Instant {
        /// Now.
        pub fn now() -> Instant {
            // SAFETY: emscripten's clock reads the host's timer; no arguments, no memory.
            Instant(unsafe { emscripten_get_now() })
        }

        /// The time since `self` (zero if the clock went back).
        pub fn elapsed(&self) -> Duration {
            Instant::now().duration_since(*self)
        }

        /// The time from `earlier` to `self` (zero if `earlier` is later).
        pub fn duration_since(&self, earlier: Instant) -> Duration {
            Duration::from_secs_f64(((self.0 - earlier.0) / 1e3).max(0.0))
        }
    }
}
