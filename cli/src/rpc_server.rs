//! `tvmrt rpc-server`: the standalone RPC server (TVM's `tvm_rpc server`), on tvm-runtime-rs.

use clap::Args;
use std::time::Duration;
use tvm_runtime::rpc::standalone::{self, ServerConfig};

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
    /// Session timeout in seconds when the client asks for none (0: none).
    #[arg(long, default_value_t = 0.0)]
    timeout: f64,
    /// Print no log lines (the bind line is still printed).
    #[arg(long)]
    silent: bool,
    /// Largest RPC packet accepted, in MiB.
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
        lifetime: (a.lifetime > 0.0).then(|| Duration::from_secs_f64(a.lifetime)),
        max_sessions: (a.max_sessions > 0).then_some(a.max_sessions),
    };
    standalone::run(&cfg)
}
