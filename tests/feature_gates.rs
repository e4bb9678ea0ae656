//! Test files of a cut feature are compiled only with it (`#![cfg(feature = "rpc")]` at the
//! top), so on a smaller set (`--no-default-features --features deploy`) they build as empty
//! test binaries. This test makes those skips visible: for each such file of this crate and of
//! the CLI whose features this build lacks, it reports the skip with the missing feature as the
//! reason (tests/common/skip.rs); and it fails when a gate names no feature of the runtime (a
//! misspelt gate would compile its tests out of every build).

#[path = "common/skip.rs"]
mod skip;

use std::path::Path;
use tvm_runtime::packed_func::features::{self, FEATURES};

/// The features a crate-level `#![cfg(...)]` line asks for: `feature = "x"` or
/// `all(feature = "x", ...)`; `None` for any other form.
fn gate_features(line: &str) -> Option<Vec<String>> {
    let inner = line.strip_prefix("#![cfg(")?.strip_suffix(")]")?;
    let inner = match inner.strip_prefix("all(") {
        Some(rest) => rest.strip_suffix(')')?,
        None => inner,
    };
    inner
        .split(',')
        .map(|term| {
            let name = term
                .trim()
                .strip_prefix("feature = \"")?
                .strip_suffix('"')?;
            Some(name.to_string())
        })
        .collect()
}

#[test]
fn gated_test_files_report_their_skips() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut gated = 0;
    for dir in ["tests", "cli/tests"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
            for line in text.lines().filter(|l| l.starts_with("#![cfg(")) {
                let wanted = gate_features(line)
                    .unwrap_or_else(|| panic!("{name}: cannot read the gate {line}"));
                for f in &wanted {
                    assert!(
                        FEATURES.iter().any(|(n, _)| n == f),
                        "{name}: {line} names `{f}`, which is not a feature of the runtime"
                    );
                }
                gated += 1;
                let missing: Vec<_> = wanted.iter().filter(|f| !features::has(f)).collect();
                if !missing.is_empty() {
                    let list = missing
                        .iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    skip::report(&format!(
                        "{name} is not compiled: this build is without {list}"
                    ));
                }
            }
        }
    }
    assert!(
        gated > 0,
        "no gated test file found under {}",
        root.display()
    );
}
