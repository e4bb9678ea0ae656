//! Where the fixtures built by scripts/build_fixtures.py are, shared by the integration tests.
//! A missing fixture skips the test with a message, unless TVMRT_REQUIRE_FIXTURES (or, for
//! the large models, TVMRT_REQUIRE_MODELS) is set, as the test command does: then it fails.

#![allow(dead_code)]

use std::path::PathBuf;

/// `$TVMRT_CACHE/fixtures` (default `~/.cache/tvm-runtime-rs/fixtures`) when it holds a
/// manifest.
pub fn dir() -> Option<PathBuf> {
    let base = std::env::var("TVMRT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tvm-runtime-rs")
        });
    let d = base.join("fixtures");
    if d.join("manifest.json").exists() {
        return Some(d);
    }
    assert!(
        std::env::var_os("TVMRT_REQUIRE_FIXTURES").is_none(),
        "TVMRT_REQUIRE_FIXTURES is set but {} has no manifest.json",
        d.display()
    );
    eprintln!("skipped: fixtures not built (run scripts/build_fixtures.py)");
    None
}

/// The fixture directory when resnet18 and mobilenet were built (`--models`).
pub fn models_dir() -> Option<PathBuf> {
    let d = dir()?;
    if d.join("resnet18.so").exists() && d.join("mobilenet.so").exists() {
        return Some(d);
    }
    assert!(
        std::env::var_os("TVMRT_REQUIRE_MODELS").is_none(),
        "TVMRT_REQUIRE_MODELS is set but resnet18/mobilenet are not in {}",
        d.display()
    );
    eprintln!("skipped: models not built (run scripts/build_fixtures.py --models)");
    None
}
