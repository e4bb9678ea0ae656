//! `tvmrt run` / `tvmrt info` on the Relax VM fixtures (scripts/build_fixtures.py): outputs
//! equal the reference runtime's, read back from the written .npy files byte for byte.
#![cfg(feature = "relax")]

#[path = "../../tests/common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/run.rs"]
mod run;
#[path = "../../tests/common/skip.rs"]
mod skip;

use run::tvmrt;
use std::path::{Path, PathBuf};

/// The fixture library and its data directory, or None (skipped through
/// tests/common/skip.rs) when it was not built; a failure under TVMRT_REQUIRE_FIXTURES.
fn fixture(name: &str) -> Option<(PathBuf, PathBuf)> {
    let d = fixture_dirs::dir()?;
    let lib = d.join(format!("{name}.so"));
    skip::available(lib.exists(), "TVMRT_REQUIRE_FIXTURES", || {
        format!("{} not built (scripts/build_fixtures.py)", lib.display())
    })
    .then(|| (lib, d.join(name)))
}

/// The data bytes of a .npy file (after its header).
fn npy_data(path: &Path) -> Vec<u8> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        b.starts_with(b"\x93NUMPY") && b[6] == 1,
        "{}",
        path.display()
    );
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + hlen..].to_vec()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn tmp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tvmrt_relax_{tag}_{}", std::process::id()))
}

/// `tvmrt run LIB --input INPUT --output OUT --repeat N`, which must succeed; its stdout.
fn run_to(lib: &Path, input: &str, out: &Path, repeat: u32) -> String {
    let repeat = repeat.to_string();
    let (ok, stdout, err) = tvmrt(&[
        "run",
        s(lib),
        "--input",
        input,
        "--output",
        s(out),
        "--repeat",
        &repeat,
    ]);
    assert!(ok, "{}: {err}", lib.display());
    stdout
}

#[test]
fn run_dynamic_mlp_from_files_equals_the_reference() {
    let Some((lib, data)) = fixture("relax_mlp_dyn") else {
        return;
    };
    let out = tmp("mlp");
    for n in [1, 3, 7] {
        let input = format!("x={}", s(&data.join(format!("x_n{n}.npy"))));
        let stdout = run_to(&lib, &input, &out, 2);
        assert!(
            stdout.contains(&format!("input  x [{n}, 64] float32 (from file)")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("output 0 [{n}, 10] float32")),
            "{stdout}"
        );
        assert!(stdout.contains("latency of main over 2 runs"), "{stdout}");
        assert!(
            npy_data(&out.join("output_0.npy")) == npy_data(&data.join(format!("y_n{n}.npy"))),
            "n={n}: tvmrt's output differs from the reference's"
        );
    }
    std::fs::remove_dir_all(&out).ok();
    // A dynamic shape cannot be made up: the error says how to pass it.
    let (ok, _, err) = tvmrt(&["run", s(&lib)]);
    assert!(!ok && err.contains("--input x=FILE.npy"), "{err}");
}

#[test]
fn run_static_mlp_with_random_input_and_bad_files() {
    let Some((lib, _)) = fixture("relax_mlp") else {
        return;
    };
    let (ok, out, err) = tvmrt(&["run", s(&lib), "--repeat", "1"]);
    assert!(ok, "{err}");
    assert!(out.contains("input  x [4, 64] float32 (random)"), "{out}");
    assert!(out.contains("output 0 [4, 10] float32"), "{out}");
    // a file of the wrong shape, an unknown parameter, an unknown function
    let Some((_, dyn_data)) = fixture("relax_mlp_dyn") else {
        return;
    };
    let bad = format!("x={}", s(&dyn_data.join("x_n3.npy")));
    let (ok, _, err) = tvmrt(&["run", s(&lib), "--input", &bad]);
    assert!(
        !ok && err.contains("does not match parameter x float32[4, 64]"),
        "{err}"
    );
    let (ok, _, err) = tvmrt(&["run", s(&lib), "--input", "y=a.npy"]);
    assert!(!ok && err.contains("no parameter 'y'"), "{err}");
    let (ok, _, err) = tvmrt(&["run", s(&lib), "--function", "nope"]);
    assert!(!ok && err.contains("no function 'nope'"), "{err}");
}

#[test]
fn run_tuple_output_and_profile() {
    let Some((lib, data)) = fixture("relax_control") else {
        return;
    };
    let out = tmp("control");
    let x = format!("x={}", s(&data.join("x.npy")));
    let c = format!("c={}", s(&data.join("c_false.npy")));
    let mut args = vec![
        "run",
        s(&lib),
        "--input",
        &x,
        "--input",
        &c,
        "--output",
        s(&out),
        "--repeat",
        "1",
    ];
    // The per-call profile needs `profiling` (the CLI refuses `--profile` without it).
    let profiled = cfg!(feature = "profiling");
    if profiled {
        args.push("--profile");
    }
    let (ok, stdout, err) = tvmrt(&args);
    assert!(ok, "{err}");
    assert!(stdout.contains("input  c [] bool (from file)"), "{stdout}");
    for (i, key) in ["z_false", "w_false", "x_false"].iter().enumerate() {
        assert!(
            npy_data(&out.join(format!("output_{i}.npy")))
                == npy_data(&data.join(format!("{key}.npy"))),
            "output {i} differs from the reference's {key}"
        );
    }
    assert!(stdout.contains("output 1.0 [4] float32"), "{stdout}");
    if profiled {
        // the per-call table: the branch reads its condition and calls the closure
        assert!(
            stdout.contains("vm.builtin.read_if_cond") && stdout.contains("subtract"),
            "{stdout}"
        );
        assert!(stdout.contains("one profiled run of main"), "{stdout}");
    }
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn run_another_function_returning_a_shape() {
    let Some((lib, data)) = fixture("relax_multi") else {
        return;
    };
    let x = format!("x={}", s(&data.join("shape_x.npy")));
    let (ok, out, err) = tvmrt(&["run", s(&lib), "--function", "shape", "--input", &x]);
    assert!(ok, "{err}");
    assert!(out.contains("output 0: shape [3, 7]"), "{out}");
}

#[test]
fn info_lists_functions_parameters_constants_and_disassembly() {
    let Some((lib, _)) = fixture("relax_multi") else {
        return;
    };
    let (ok, out, err) = tvmrt(&["info", s(&lib)]);
    assert!(ok, "{err}");
    assert!(
        out.contains("relax.Executable") && out.contains("library"),
        "{out}"
    );
    assert!(
        out.contains("function main(x: float32[8], w: float32[8, 8])"),
        "{out}"
    );
    assert!(out.contains("function double(x: float32[d0])"), "{out}");
    assert!(out.contains("function int_sum(x: int32[2, 3])"), "{out}");
    assert!(out.contains("vm.builtin.alloc_storage"), "{out}");
    assert!(out.contains("c[0] "), "{out}");
    assert!(!out.contains("@main:"), "no disassembly without --disasm");
    let (ok, out, err) = tvmrt(&["info", s(&lib), "--disasm"]);
    assert!(ok, "{err}");
    assert!(out.contains("@main:") && out.contains("ret "), "{out}");
}

#[test]
fn run_scheduled_models_equal_the_reference() {
    // Parallel kernels (TVMBackendParallelLaunch from every kernel) through the thread pool.
    for name in ["relax_mobilenet_par", "relax_resnet18_par"] {
        let Some(lib) = fixture_dirs::model(name) else {
            continue;
        };
        let data = lib.with_extension("");
        let out = tmp(name);
        let input = format!("data={}", s(&data.join("data.npy")));
        let stdout = run_to(&lib, &input, &out, 1);
        assert!(
            stdout.contains("output 0 [1, 1000] float32"),
            "{name}: {stdout}"
        );
        assert!(
            npy_data(&out.join("output_0.npy")) == npy_data(&data.join("output.npy")),
            "{name}: tvmrt's output differs from the reference's"
        );
        std::fs::remove_dir_all(&out).ok();
    }
}
