//! Where the fixtures built by scripts/build_fixtures.py are, shared by the integration tests.
//! A missing fixture skips the test through tests/common/skip.rs (include it as `mod skip`
//! beside this file), unless TVMRT_REQUIRE_FIXTURES (or, for the large models,
//! TVMRT_REQUIRE_MODELS) is set, as the test command does: then it fails.

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
    let ok = d.join("manifest.json").exists();
    crate::skip::available(ok, "TVMRT_REQUIRE_FIXTURES", || {
        format!(
            "fixtures not built: {} has no manifest.json (run scripts/build_fixtures.py)",
            d.display()
        )
    })
    .then_some(d)
}

/// The fixture directory when resnet18 and mobilenet were built (`--models`).
pub fn models_dir() -> Option<PathBuf> {
    let d = dir()?;
    let ok = d.join("resnet18.so").exists() && d.join("mobilenet.so").exists();
    crate::skip::available(ok, "TVMRT_REQUIRE_MODELS", || {
        format!(
            "models not built: resnet18/mobilenet are not in {} (run scripts/build_fixtures.py --models)",
            d.display()
        )
    })
    .then_some(d)
}

/// The large-model fixture `NAME.so` in `models_dir()`, or None (skipped, a failure under
/// TVMRT_REQUIRE_MODELS) when it was not built.
pub fn model(name: &str) -> Option<PathBuf> {
    let lib = models_dir()?.join(format!("{name}.so"));
    crate::skip::available(lib.exists(), "TVMRT_REQUIRE_MODELS", || {
        format!(
            "{name} not built: {} is missing (run scripts/build_fixtures.py --models)",
            lib.display()
        )
    })
    .then_some(lib)
}
