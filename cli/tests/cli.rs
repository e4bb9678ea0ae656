//! The `tvmrt` command line on the bundled model.

#[path = "../../tests/common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/run.rs"]
mod run;
#[path = "../../tests/common/skip.rs"]
mod skip;

use fixture_dirs::models_dir;
use npyz::WriterBuilder;
use run::tvmrt;

const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/models/mlp.so");

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
    if !cfg!(feature = "profiling") {
        // Refused before the model runs, naming the feature.
        assert!(!ok && err.contains("built without `profiling`"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
        return;
    }
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
    // The version line lists the features this build has (the CLI always has `graph`).
    let (ok, out, _) = tvmrt(&["--version"]);
    assert!(
        ok && out.contains("(features: ") && out.contains("graph"),
        "{out}"
    );
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

fn npz_f32(path: &std::path::Path, key: &str) -> (Vec<f32>, Vec<u64>) {
    let mut z = npyz::npz::NpzArchive::open(path).unwrap();
    let npy = z.by_name(key).unwrap().unwrap();
    let shape = npy.shape().to_vec();
    (npy.into_vec::<f32>().unwrap(), shape)
}

#[test]
fn run_resnet18_and_mobilenet_gives_the_reference_outputs() {
    let Some(d) = models_dir() else { return };
    let dir = std::env::temp_dir().join(format!("tvmrt_cli_models_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["resnet18", "mobilenet"] {
        let npz = d.join(format!("{name}.npz"));
        let (data, shape) = npz_f32(&npz, "data");
        let input = dir.join(format!("{name}_data.npy"));
        let mut w = npyz::WriteOptions::<f32>::new()
            .default_dtype()
            .shape(&shape)
            .writer(std::fs::File::create(&input).unwrap())
            .begin_nd()
            .unwrap();
        w.extend(data.iter().copied()).unwrap();
        w.finish().unwrap();
        let out_dir = dir.join(name);
        let model = d.join(format!("{name}.so"));
        let (ok, out, err) = tvmrt(&[
            "run",
            model.to_str().unwrap(),
            "--input",
            &format!("data={}", input.display()),
            "--output",
            out_dir.to_str().unwrap(),
            "--repeat",
            "3",
        ]);
        assert!(ok, "{name}: {err}");
        assert!(
            out.contains("output 0") && out.contains("[1, 1000] float32"),
            "{name}: {out}"
        );
        let bytes = std::fs::read(out_dir.join("output_0.npy")).unwrap();
        let got = npyz::NpyFile::new(&bytes[..])
            .unwrap()
            .into_vec::<f32>()
            .unwrap();
        let (want, _) = npz_f32(&npz, "output_0");
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{name}: element {i}: {g} vs {w}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
