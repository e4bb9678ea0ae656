//! `tvmrt generate` on the decoder fixture (scripts/build_llm_fixtures.py): greedy tokens equal
//! the reference runtime's; top-p with a seed is reproducible; bad input is a clear error.
#![cfg(feature = "llm")]

#[path = "../../tests/common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/run.rs"]
mod run;
#[path = "../../tests/common/skip.rs"]
mod skip;

use run::tvmrt;
use std::path::PathBuf;

/// The fixture directory, or None (skipped through tests/common/skip.rs; a failure under
/// TVMRT_REQUIRE_FIXTURES) when it was not built.
fn fixture() -> Option<PathBuf> {
    let d = fixture_dirs::dir()?.join("llm");
    skip::available(d.join("stamp").exists(), "TVMRT_REQUIRE_FIXTURES", || {
        format!(
            "the LLM fixture was not built: {} has no stamp (scripts/build_llm_fixtures.py)",
            d.display()
        )
    })
    .then_some(d)
}

fn npz_i32(path: &PathBuf, key: &str) -> Vec<i32> {
    let mut z = npyz::npz::NpzArchive::open(path).expect("open npz");
    z.by_name(key)
        .expect("read npz")
        .unwrap_or_else(|| panic!("{key} missing"))
        .into_vec::<i32>()
        .expect("int32")
}

#[test]
fn greedy_tokens_equal_the_reference() {
    let Some(d) = fixture() else { return };
    let npz = d.join("expected.npz");
    let prompt = npz_i32(&npz, "prompt");
    let tokens = npz_i32(&npz, "tokens");
    let ids = prompt
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let n = tokens.len().to_string();
    let so = d.join("decoder.so");
    let params = d.join("params");
    let (ok, out, err) = tvmrt(&[
        "generate",
        so.to_str().unwrap(),
        "--params",
        params.to_str().unwrap(),
        "--prompt-ids",
        &ids,
        "--max-new-tokens",
        &n,
    ]);
    assert!(ok, "{err}");
    let got: Vec<i32> = out.trim().split(',').map(|t| t.parse().unwrap()).collect();
    assert_eq!(got, tokens);
    assert!(err.contains("tokens/s"), "{err}");

    let top_p = |seed: &str| {
        let (ok, out, err) = tvmrt(&[
            "generate",
            so.to_str().unwrap(),
            "--params",
            params.to_str().unwrap(),
            "--prompt-ids",
            &ids,
            "--max-new-tokens",
            "8",
            "--top-p",
            "0.9",
            "--temperature",
            "1.5",
            "--seed",
            seed,
        ]);
        assert!(ok, "{err}");
        out
    };
    assert_eq!(top_p("7"), top_p("7"));
}

#[test]
fn bad_input_is_a_clear_error() {
    let Some(d) = fixture() else { return };
    let so = d.join("decoder.so");
    let (ok, _, err) = tvmrt(&[
        "generate",
        so.to_str().unwrap(),
        "--params",
        "/nonexistent-dir",
        "--prompt-ids",
        "1,2",
    ]);
    assert!(!ok && err.contains("ndarray-cache.json"), "{err}");
    let (ok, _, err) = tvmrt(&[
        "generate",
        so.to_str().unwrap(),
        "--params",
        d.join("params").to_str().unwrap(),
        "--prompt-ids",
        "1,x",
    ]);
    assert!(!ok && err.contains("bad token id"), "{err}");
}
