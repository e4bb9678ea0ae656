//! Runs the `tvmrt` binary of this package: (success, stdout, stderr).

use std::process::Command;

/// Runs `tvmrt ARGS…` and returns whether it succeeded, its stdout and its stderr.
pub fn tvmrt(args: &[&str]) -> (bool, String, String) {
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
