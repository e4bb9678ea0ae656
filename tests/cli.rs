//! The `tvmrt` command line on the bundled model.

use std::process::Command;

fn tvmrt(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(args)
        .output()
        .expect("tvmrt runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models/mlp.so");

#[test]
fn run_prints_outputs_latency_and_writes_npy() {
    let dir = std::env::temp_dir().join(format!("tvmrt_cli_{}", std::process::id()));
    let dir_s = dir.to_str().unwrap();
    let (ok, out, err) = tvmrt(&[
        "run",
        MODEL,
        "--repeat",
        "5",
        "--output",
        dir_s,
        "--profile",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("input  data [1, 64] float32 (random)"),
        "{out}"
    );
    assert!(out.contains("output 0"), "{out}");
    assert!(
        out.contains("latency over 5 runs on cpu(0): median"),
        "{out}"
    );
    assert!(out.contains("Percent"), "profile table: {out}");
    let npy = std::fs::read(dir.join("output_0.npy")).unwrap();
    assert!(npy.starts_with(b"\x93NUMPY"));
    // The softmax output: ten float32 values summing to one.
    let body = &npy[npy.len() - 40..];
    let sum: f32 = body
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .sum();
    assert!((sum - 1.0).abs() < 1e-5, "softmax sums to {sum}");
    // The written output can be fed back as an input file of the wrong shape: refused.
    let bad = format!("data={}", dir.join("output_0.npy").display());
    let (ok, _, err) = tvmrt(&["run", MODEL, "--input", &bad]);
    assert!(!ok && err.contains("does not match input data"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn info_and_devices() {
    let (ok, out, err) = tvmrt(&["info", MODEL]);
    assert!(ok, "{err}");
    assert!(
        out.contains("GraphExecutorFactory") && out.contains("library"),
        "{out}"
    );
    assert!(out.contains("input  data [1, 64] float32"), "{out}");
    assert!(out.contains("output"), "{out}");
    let (ok, out, _) = tvmrt(&["devices"]);
    assert!(ok);
    assert!(out.contains("cpu(0)") && out.contains("threads:"), "{out}");
}

#[test]
fn errors_are_clear() {
    let (ok, _, err) = tvmrt(&["run", "/no/such/model.so"]);
    assert!(!ok && err.contains("/no/such/model.so"), "{err}");
    let (ok, _, err) = tvmrt(&["run", MODEL, "--input", "nosuch=x.npy"]);
    assert!(!ok && err.contains("no input 'nosuch'"), "{err}");
    let (ok, _, err) = tvmrt(&["run", MODEL, "--device", "warp9"]);
    assert!(!ok && err.contains("unknown device 'warp9'"), "{err}");
    let (ok, _, err) = tvmrt(&["run", MODEL, "--device", "cuda"]);
    assert!(!ok && err.contains("cuda(0)"), "{err}");
}
