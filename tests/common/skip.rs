//! The one helper for tests that need hardware or built fixtures. A test that cannot run here
//! prints `skipped: <test>: <why>` and, when `TVMRT_SKIP_LOG` names a file (the test command
//! sets it), appends that line to it, so the test command's summary counts and lists every
//! skip. With the test's `TVMRT_REQUIRE_*` switch set (`TVMRT_REQUIRE_CUDA`,
//! `TVMRT_REQUIRE_VULKAN`, `TVMRT_REQUIRE_FIXTURES`, `TVMRT_REQUIRE_MODELS`) it fails instead.
//! The other suites have twins writing the same lines to the same log: `skip` in
//! tests/python/tvmrt_helpers.py (conftest.py logs every pytest skip), `tvmrt_skip` in
//! scripts/skip.sh and `check_skip` in c_tests/check.h. A test must never return early, or
//! accept a missing input, without going through one of them.

#![allow(dead_code)]

use std::io::Write;

/// `true` when what the test needs is `present`; otherwise fails if `require` is set in the
/// environment, else reports the skip and returns `false` (the caller returns at once).
pub fn available(present: bool, require: &str, why: impl FnOnce() -> String) -> bool {
    if present {
        return true;
    }
    let why = why();
    // Set means set to something: an empty value is off, as in the scripts and Python.
    assert!(
        std::env::var_os(require).is_none_or(|v| v.is_empty()),
        "{require} is set, but this test cannot run: {why}"
    );
    report(&why);
    false
}

/// Reports a skip that no switch turns into a failure (a capability the device lacks, an
/// optional tool).
pub fn report(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| s.rsplit_once('-').map_or(s.clone(), |(a, _)| a.to_string()))
        .unwrap_or_default();
    let line = format!("skipped: {exe}::{test}: {why}");
    eprintln!("{line}");
    if let Some(log) = std::env::var_os("TVMRT_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            // One write per line, so concurrent tests do not interleave.
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}
