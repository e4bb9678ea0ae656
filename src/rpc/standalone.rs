//! The standalone RPC server (what `tvmrt rpc-server` runs), modelled on TVM's `tvm_rpc`: key
//! matching, optional tracker registration, one session at a time with a fresh handle table and
//! work directory for each, and a per-session timeout reported to the client as
//! `RPCSessionTimeoutError`.
//!
//! Safer than the reference: it listens on 127.0.0.1 unless told otherwise; names the client
//! uses for files stay inside the session's work directory (`..`, absolute paths and symlinks are
//! refused); handles and data addresses the client sends must be ones this server handed out;
//! packets are limited in size; a garbage handshake costs at most a few seconds.

use super::codec;
use super::server::serve_channel;
use super::tracker::Registration;
use crate::module::Module;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry;
use crate::packed_func::value::RetValue;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// Settings of the standalone server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to listen on (default 127.0.0.1).
    pub host: String,
    /// First port to try.
    pub port: u16,
    /// Last port to try (inclusive; ports up to it are tried in order).
    pub port_end: u16,
    /// The server's key (what clients and the tracker match on).
    pub key: String,
    /// Tracker address `HOST:PORT`.
    pub tracker: Option<String>,
    /// Address the tracker hands to clients instead of the one it sees.
    pub custom_addr: Option<String>,
    /// Work directory root (default: a fresh temporary directory, removed at exit).
    pub work_dir: Option<PathBuf>,
    /// Session timeout when the client asks for none (seconds; 0 = none).
    pub timeout: f64,
    /// No log lines (the bind line is still printed).
    pub silent: bool,
    /// Largest packet accepted, in bytes.
    pub max_packet: u64,
    /// Stop serving after this long (None = run until killed).
    pub lifetime: Option<Duration>,
    /// Stop after this many sessions (None = no limit).
    pub max_sessions: Option<u64>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            host: "127.0.0.1".into(),
            port: 9090,
            port_end: 9199,
            key: String::new(),
            tracker: None,
            custom_addr: None,
            work_dir: None,
            timeout: 0.0,
            silent: false,
            max_packet: codec::DEFAULT_MAX_PACKET,
            lifetime: None,
            max_sessions: None,
        }
    }
}

/// The work directory of the session being served.
static SESSION_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

fn session_dir() -> Result<PathBuf> {
    SESSION_DIR
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or_else(|| Error::tvm("RPC server: no session is being served"))
}

/// Joins a client-given name to `root`, refusing anything that could leave it.
pub fn safe_join(root: &Path, name: &str) -> Result<PathBuf> {
    let p = Path::new(name);
    let bad = |why: &str| {
        Err(Error::value(format!(
            "RPC server: refused path '{name}': {why} (names must stay inside the work directory)"
        )))
    };
    if name.is_empty() {
        return bad("empty name");
    }
    if name.contains('\0') {
        return bad("NUL byte");
    }
    let mut cur = root.to_path_buf();
    for c in p.components() {
        match c {
            Component::Normal(part) => {
                cur.push(part);
                if let Ok(m) = std::fs::symlink_metadata(&cur) {
                    if m.file_type().is_symlink() {
                        return bad("it goes through a symbolic link");
                    }
                }
            }
            Component::CurDir => {}
            Component::ParentDir => return bad("'..' is not allowed"),
            Component::RootDir | Component::Prefix(_) => {
                return bad("absolute paths are not allowed")
            }
        }
    }
    Ok(cur)
}

fn log(cfg: &ServerConfig, msg: &str) {
    if !cfg.silent {
        eprintln!("tvmrt rpc-server: {msg}");
    }
}

fn link_if_needed(path: &Path) -> Result<PathBuf> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let run = |cmd: &mut std::process::Command| -> Result<()> {
        let out = cmd
            .output()
            .map_err(|e| Error::tvm(format!("RPC server: cannot run {cmd:?}: {e}")))?;
        if !out.status.success() {
            return Err(Error::tvm(format!(
                "RPC server: {cmd:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    };
    match ext {
        "o" | "tar" => {
            let so = path.with_extension("so");
            let mut objs = Vec::new();
            if ext == "tar" {
                let dir = path.with_extension("objs");
                super::archive::unpack(path, &dir)?;
                for e in std::fs::read_dir(&dir).map_err(|e| Error::tvm(e.to_string()))? {
                    let e = e.map_err(|e| Error::tvm(e.to_string()))?;
                    if e.path().extension().is_some_and(|x| x == "o") {
                        objs.push(e.path());
                    }
                }
            } else {
                objs.push(path.to_path_buf());
            }
            run(std::process::Command::new("cc")
                .arg("-shared")
                .arg("-fPIC")
                .arg("-o")
                .arg(&so)
                .args(&objs))?;
            Ok(so)
        }
        _ => Ok(path.to_path_buf()),
    }
}

fn register_env() {
    registry::register_rust("tvm.rpc.server.workpath", |a, rv| {
        let p = safe_join(&session_dir()?, a.str(0)?)?;
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::tvm(format!("RPC server: cannot create {parent:?}: {e}")))?;
        }
        *rv = RetValue::Str(p.to_string_lossy().into_owned());
        Ok(())
    });
    registry::register_rust("tvm.rpc.server.load_module", |a, rv| {
        // (path[, options, cc]) — newer clients add build options, unused here.
        let p = safe_join(&session_dir()?, a.str(0)?)?;
        let lib = link_if_needed(&p)?;
        *rv = RetValue::Object(Module::load(&lib.to_string_lossy())?.into_object());
        Ok(())
    });
    registry::register_rust("tvm.rpc.server.download_linked_module", |a, rv| {
        let p = safe_join(&session_dir()?, a.str(0)?)?;
        let lib = link_if_needed(&p)?;
        *rv = RetValue::Bytes(
            std::fs::read(&lib).map_err(|e| Error::tvm(format!("RPC server: {e}")))?,
        );
        Ok(())
    });
    registry::register_rust("tvm.rpc.server.listdir", |a, rv| {
        let root = session_dir()?;
        let name = a.str(0)?;
        let dir = if name.is_empty() || name == "." {
            root
        } else {
            safe_join(&root, name)?
        };
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| Error::tvm(format!("RPC server: cannot list {name}: {e}")))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        *rv = RetValue::Str(names.join(","));
        Ok(())
    });
}

/// Reads the client's handshake and answers it. Returns the session timeout the client asked
/// for, or an error (after telling the client when its key does not match).
pub fn server_handshake(s: &mut TcpStream, matchkey: &str, key: &str) -> Result<Option<f64>> {
    let io = |e: std::io::Error| Error::value(format!("handshake: {e}"));
    let mut b = [0u8; 4];
    s.read_exact(&mut b).map_err(io)?;
    let magic = i32::from_le_bytes(b);
    if magic != codec::RPC_MAGIC {
        return Err(Error::value(format!(
            "handshake: bad magic {magic:#x} (not an RPC client)"
        )));
    }
    s.read_exact(&mut b).map_err(io)?;
    let n = i32::from_le_bytes(b);
    if !(0..=4096).contains(&n) {
        return Err(Error::value(format!("handshake: bad key length {n}")));
    }
    let mut k = vec![0u8; n as usize];
    s.read_exact(&mut k).map_err(io)?;
    let k = String::from_utf8_lossy(&k).into_owned();
    let mut parts = k.split_whitespace();
    let first = parts.next().unwrap_or("");
    if first != format!("client:{matchkey}") {
        let _ = s.write_all(&codec::RPC_CODE_MISMATCH.to_le_bytes());
        return Err(Error::value(format!("handshake: key mismatch ('{first}')")));
    }
    let mut timeout = None;
    for opt in parts {
        if let Some(v) = opt.strip_prefix("-timeout=") {
            timeout = v.parse::<f64>().ok().filter(|t| *t > 0.0);
        }
    }
    let sk = format!("server:{key}");
    let mut out = codec::RPC_MAGIC.to_le_bytes().to_vec();
    out.extend_from_slice(&(sk.len() as i32).to_le_bytes());
    out.extend_from_slice(sk.as_bytes());
    s.write_all(&out).map_err(io)?;
    Ok(timeout)
}

/// Waits until the listener has a connection or `wait` passes.
fn wait_readable(l: &TcpListener, wait: Duration) -> bool {
    let mut fds = libc::pollfd {
        fd: l.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the listener we own.
    let r = unsafe { libc::poll(&mut fds, 1, wait.as_millis().min(i32::MAX as u128) as i32) };
    r > 0
}

/// Binds the first free port of the configured range.
pub fn bind(cfg: &ServerConfig) -> Result<TcpListener> {
    let end = cfg.port_end.max(cfg.port);
    let mut last = None;
    for p in cfg.port..=end {
        match TcpListener::bind((cfg.host.as_str(), p)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::tvm(format!(
        "RPC server: cannot bind {}:{}..={}: {}",
        cfg.host,
        cfg.port,
        end,
        last.map_or("no port".into(), |e| e.to_string())
    )))
}

/// Serves one accepted connection after its handshake; returns when the session is over.
fn serve_session(cfg: &ServerConfig, stream: TcpStream, timeout: Option<f64>, dir: &Path) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        log(cfg, &format!("cannot create {dir:?}: {e}"));
        return;
    }
    *SESSION_DIR.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.to_path_buf());
    let _ = stream.set_read_timeout(None);
    let _ = stream.set_nodelay(true);
    let side = stream.try_clone();
    let (tx, rx) = mpsc::channel();
    let max_packet = cfg.max_packet;
    let worker = std::thread::Builder::new()
        .name("rpc-session".into())
        .spawn(move || {
            let r = match super::endpoint::BufferedStream::new(stream) {
                Ok(b) => serve_channel(Box::new(b), max_packet),
                Err(e) => Err(Error::tvm(format!("RPC server: {e}"))),
            };
            let _ = tx.send(r);
        });
    if let Err(e) = worker {
        log(cfg, &format!("cannot start a session thread: {e}"));
        return;
    }
    let limit = timeout.or((cfg.timeout > 0.0).then_some(cfg.timeout));
    let outcome = match limit {
        Some(t) => rx.recv_timeout(Duration::from_secs_f64(t)),
        None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
    };
    match outcome {
        Ok(Ok(())) => log(cfg, "session ended"),
        Ok(Err(e)) => log(cfg, &format!("session ended with an error: {e}")),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            log(cfg, "session timed out");
            if let Ok(mut s) = side {
                let _ = s.write_all(&codec::exception_packet(&format!(
                    "RPCSessionTimeoutError: Timeout in RPC session after {}s",
                    limit.unwrap_or(0.0)
                )));
                let _ = s.shutdown(Shutdown::Both);
            }
            if rx.recv_timeout(Duration::from_secs(10)).is_err() {
                log(
                    cfg,
                    "the timed-out session is still computing; it is left to finish",
                );
            }
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => log(cfg, "session thread failed"),
    }
    *SESSION_DIR.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs the server until its lifetime or session count is reached (or forever).
pub fn run(cfg: &ServerConfig) -> Result<()> {
    serve(bind(cfg)?, cfg)
}

/// Serves on a bound listener until its lifetime or session count is reached (or forever).
pub fn serve(listener: TcpListener, cfg: &ServerConfig) -> Result<()> {
    let port = listener
        .local_addr()
        .map_err(|e| Error::tvm(format!("RPC server: {e}")))?
        .port();
    let (root, temp_root) = match &cfg.work_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tvmrt-rpc-{}-{port}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&root)
        .map_err(|e| Error::tvm(format!("RPC server: cannot create {root:?}: {e}")))?;
    register_env();
    println!("INFO: bind to {}:{port}", cfg.host);
    let _ = std::io::stdout().flush();
    let mut reg = match &cfg.tracker {
        Some(t) => {
            let r = Registration::new(t, &cfg.key, port, cfg.custom_addr.clone())?;
            log(
                cfg,
                &format!("registered with tracker {t} as '{}'", cfg.key),
            );
            Some(r)
        }
        None => None,
    };
    let start = Instant::now();
    let mut sessions = 0u64;
    let result = loop {
        if cfg.lifetime.is_some_and(|l| start.elapsed() >= l)
            || cfg.max_sessions.is_some_and(|m| sessions >= m)
        {
            break Ok(());
        }
        if !wait_readable(&listener, Duration::from_secs(2)) {
            if let Some(r) = reg.as_mut() {
                if let Err(e) = r.check_pending() {
                    log(cfg, &format!("tracker: {e}"));
                }
            }
            continue;
        }
        let (mut stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) => {
                log(cfg, &format!("accept failed: {e}"));
                continue;
            }
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let matchkey = reg
            .as_ref()
            .map_or(cfg.key.clone(), |r| r.matchkey().to_string());
        match server_handshake(&mut stream, &matchkey, &cfg.key) {
            Ok(timeout) => {
                log(cfg, &format!("session from {peer}"));
                sessions += 1;
                let dir = root.join(format!("session-{sessions}"));
                serve_session(cfg, stream, timeout, &dir);
                if let Some(r) = reg.as_mut() {
                    if let Err(e) = r.put() {
                        log(cfg, &format!("tracker: {e}"));
                    }
                }
            }
            Err(e) => log(cfg, &format!("refused {peer}: {e}")),
        }
    };
    if temp_root {
        let _ = std::fs::remove_dir_all(&root);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_join_refuses_escapes() {
        let root = std::env::temp_dir().join(format!("tvmrt-safe-join-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        assert!(safe_join(&root, "a.so").is_ok());
        assert!(safe_join(&root, "sub/a.so").is_ok());
        assert!(safe_join(&root, "../a.so").is_err());
        assert!(safe_join(&root, "/etc/passwd").is_err());
        assert!(safe_join(&root, "").is_err());
        std::os::unix::fs::symlink("/tmp", root.join("link")).unwrap();
        let e = safe_join(&root, "link/x").unwrap_err();
        assert!(e.message.contains("symbolic link"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
