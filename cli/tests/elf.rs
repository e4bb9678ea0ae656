//! `tvmrt info` on a broken library prints why it is refused, and does not crash.

use std::process::Command;

const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/models/mlp.so");

#[test]
fn info_names_a_truncated_library_and_what_is_wrong() {
    let img = std::fs::read(MODEL).unwrap();
    let dir = std::env::temp_dir().join(format!("tvmrt_cli_elf_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("truncated.so");
    std::fs::write(&lib, &img[..img.len() / 2]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(["info", lib.to_str().unwrap()])
        .output()
        .expect("tvmrt runs");
    let err = String::from_utf8_lossy(&out.stderr);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(lib.to_str().unwrap()), "{err}");
    assert!(err.contains("truncated"), "{err}");
}
