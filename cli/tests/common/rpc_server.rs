//! Starts `tvmrt rpc-server` for a test: the child and the port it printed in its bind line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Spawns `cmd` (a `tvmrt rpc-server` command with `--port 0`) with its stdout piped, waits at
/// most 60 s for the bind line and returns the child and the port the line names.
pub fn spawn(mut cmd: Command) -> (Child, u16) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("tvmrt starts");
    let out = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server prints its bind line within 60 s");
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (child, port)
}
