//! `tvmrt rpc-server`: the standalone RPC server (TVM's `tvm_rpc server`), on tvm-runtime-rs.

use clap::Args;
use std::time::Duration;
use tvm_runtime::rpc::standalone::{self, Isolation, ServerConfig};

/// Options of `tvmrt rpc-server`.
#[derive(Args)]
pub struct RpcServerArgs {
    /// Address to listen on (127.0.0.1 unless set; use 0.0.0.0 to serve other machines).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// First port to try.
    #[arg(long, default_value_t = 9090)]
    port: u16,
    /// Last port to try.
    #[arg(long = "port-end", default_value_t = 9199)]
    port_end: u16,
    /// The server's key (clients and the tracker match on it).
    #[arg(long, default_value = "")]
    key: String,
    /// Register with a TVM tracker at HOST:PORT (needs --key).
    #[arg(long, value_name = "HOST:PORT")]
    tracker: Option<String>,
    /// Address the tracker gives clients instead of the one it sees.
    #[arg(long = "custom-addr")]
    custom_addr: Option<String>,
    /// Work directory root (default: a temporary directory removed at exit).
    #[arg(long = "work-dir")]
    work_dir: Option<String>,
    /// Session timeout in seconds when the client asks for none (0: none). A session past
    /// its timeout is killed with everything it started.
    #[arg(long, default_value_t = 0.0)]
    timeout: f64,
    /// Close a session whose client sent nothing for this many seconds (0: never).
    #[arg(long = "idle-timeout", default_value_t = 600.0)]
    idle_timeout: f64,
    /// Seconds a connection has, in total, to complete its handshake.
    #[arg(long = "handshake-timeout", default_value_t = 10.0)]
    handshake_timeout: f64,
    /// Sessions served at once (each in its own process); a client that finds them all busy
    /// waits up to 30 s for one to end, then gets a "server busy" error.
    #[arg(long = "max-concurrent-sessions", default_value_t = 8)]
    max_concurrent_sessions: usize,
    /// Run each session on a thread of the server, one at a time, instead of in its own
    /// process: a crash in a session then ends the server, and a session past its timeout is
    /// cut off from its client but keeps running.
    #[arg(long = "session-threads")]
    session_threads: bool,
    /// Internal: serve one session on standard input (how the server starts a session's
    /// process).
    #[arg(long = "session-child", hide = true, value_name = "SETTINGS")]
    session_child: Option<String>,
    /// Print no log lines (the bind line is still printed).
    #[arg(long)]
    silent: bool,
    /// Largest RPC packet accepted, in MiB (the server tells clients, which split copies to
    /// fit).
    #[arg(long = "max-packet-mib", default_value_t = 2048)]
    max_packet_mib: u64,
    /// Exit after this many seconds (0: run until stopped).
    #[arg(long, default_value_t = 0.0)]
    lifetime: f64,
    /// Exit after this many sessions (0: no limit).
    #[arg(long = "max-sessions", default_value_t = 0)]
    max_sessions: u64,
}

/// Runs the server.
pub fn run(a: RpcServerArgs) -> tvm_runtime::Result<()> {
    if a.tracker.is_some() && a.key.is_empty() {
        return Err(tvm_runtime::Error::value(
            "rpc-server: --tracker needs --key",
        ));
    }
    // A client that goes away must end its session, not the server.
    // SAFETY: setting a signal disposition before the server starts its threads.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    if let Some(settings) = a.session_child {
        return standalone::serve_session_child(&settings);
    }
    let secs = |what: &str, v: f64| -> tvm_runtime::Result<Option<Duration>> {
        if !(0.0..=1e9).contains(&v) {
            return Err(tvm_runtime::Error::value(format!(
                "rpc-server: --{what} must be a number of seconds from 0 to 1e9, not {v}"
            )));
        }
        Ok((v > 0.0).then(|| Duration::from_secs_f64(v)))
    };
    let cfg = ServerConfig {
        host: a.host,
        port: a.port,
        port_end: a.port_end,
        key: a.key,
        tracker: a.tracker,
        custom_addr: a.custom_addr,
        work_dir: a.work_dir.map(Into::into),
        timeout: a.timeout,
        silent: a.silent,
        max_packet: a.max_packet_mib.saturating_mul(1 << 20),
        lifetime: secs("lifetime", a.lifetime)?,
        max_sessions: (a.max_sessions > 0).then_some(a.max_sessions),
        isolation: if a.session_threads {
            Isolation::Thread
        } else {
            Isolation::this_binary(&["rpc-server", "--session-child"])
        },
        idle_timeout: secs("idle-timeout", a.idle_timeout)?,
        handshake_timeout: secs("handshake-timeout", a.handshake_timeout)?
            .unwrap_or(standalone::DEFAULT_HANDSHAKE_TIMEOUT),
        max_handshakes: 64,
        max_concurrent: a.max_concurrent_sessions.max(1),
    };
    standalone::run(&cfg)
}
