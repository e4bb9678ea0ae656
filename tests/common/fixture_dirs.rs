//! Where the fixtures built by scripts/build_fixtures.py are, shared by the integration tests.
//! A missing fixture skips the test through tests/common/skip.rs (include it as `mod skip`
//! beside this file), unless TVMRT_REQUIRE_FIXTURES (or, for the large models,
//! TVMRT_REQUIRE_MODELS) is set, as the test command does: then it fails.

#![allow(dead_code)]

use std::path::PathBuf;

/// The fixtures' directory name: `fixtures` for x86-64 (scripts/build_fixtures.py), and
/// `fixtures-<arch>` for fixtures compiled for another target (`fixtures-aarch64`,
/// `fixtures-arm`, `fixtures-riscv64`; tests cross-built by scripts/cross.sh look there).
fn name() -> String {
    if cfg!(target_arch = "x86_64") {
        "fixtures".into()
    } else {
        format!("fixtures-{}", std::env::consts::ARCH)
    }
}

/// `$TVMRT_CACHE/fixtures` (default `~/.cache/tvm-runtime-rs/fixtures`; see [`name`] for other
/// targets) when it holds a manifest.
pub fn dir() -> Option<PathBuf> {
    let base = std::env::var("TVMRT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tvm-runtime-rs")
        });
    let d = base.join(name());
    let ok = d.join("manifest.json").exists();
    crate::skip::available(ok, "TVMRT_REQUIRE_FIXTURES", || {
        format!(
            "fixtures not built for {}: {} has no manifest.json (run scripts/build_fixtures.py)",
            std::env::consts::ARCH,
            d.display()
        )
    })
    .then_some(d)
}

/// The bundled model library `examples/models/mlp.so`, compiled for x86-64, when this process
/// can load it: on another target, `examples/models/<arch>/mlp.so` when one was built for it
/// (none is checked in yet); otherwise the test skips (fails under TVMRT_REQUIRE_FIXTURES).
pub fn bundled_mlp() -> Option<PathBuf> {
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let lib = if cfg!(target_arch = "x86_64") {
        models.join("mlp.so")
    } else {
        models.join(std::env::consts::ARCH).join("mlp.so")
    };
    crate::skip::available(lib.exists(), "TVMRT_REQUIRE_FIXTURES", || {
        format!(
            "no bundled mlp.so for {}: {} is missing (examples/models/mlp.so is x86-64)",
            std::env::consts::ARCH,
            lib.display()
        )
    })
    .then_some(lib)
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
