//! The standalone RPC server (what `tvmrt rpc-server` runs), modelled on TVM's `tvm_rpc`: key
//! matching, optional tracker registration, a fresh handle table and work directory for each
//! session, and a per-session timeout reported to the client as `RPCSessionTimeoutError`.
//!
//! Each session runs in its own child process ([`Isolation::Process`], as TVM's server forks
//! one), so that a crash or a hang ends that session only; at its timeout the child is killed
//! and the system takes back all it held. Handshakes are read concurrently, each within a total
//! deadline; sessions idle past the idle timeout are closed.
//!
//! Safer than the reference: it listens on 127.0.0.1 unless told otherwise; names the client
//! uses for files stay inside the session's work directory (`..`, absolute paths and symlinks are
//! refused); handles and data addresses the client sends must be ones this server handed out;
//! packets are limited in size, and their buffers grow only as their bytes arrive.

use super::codec;
use super::server::serve_channel;
use super::tracker::Registration;
use crate::module::Module;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry;
use crate::packed_func::value::RetValue;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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
    /// How sessions are kept apart from the server (default: threads; `tvmrt rpc-server`
    /// uses child processes).
    pub isolation: Isolation,
    /// Close a session whose client sent nothing for this long (None = never).
    pub idle_timeout: Option<Duration>,
    /// Total time a connection has to complete its handshake.
    pub handshake_timeout: Duration,
    /// Connections read (or waiting for a session slot) at once; more wait in the listen queue.
    pub max_handshakes: usize,
    /// Sessions served at once (process isolation only; with threads, one at a time).
    pub max_concurrent: usize,
}

/// Default idle timeout of the standalone server's sessions.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Default total deadline of a handshake.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
            isolation: Isolation::Thread,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            max_handshakes: 64,
            max_concurrent: 8,
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
        Err(Error::value_fmt(format_args!(
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
            .map_err(|e| Error::tvm_fmt(format_args!("RPC server: cannot run {cmd:?}: {e}")))?;
        if !out.status.success() {
            return Err(Error::tvm_fmt(format_args!(
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
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::tvm_fmt(format_args!("RPC server: cannot create {parent:?}: {e}"))
            })?;
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
            std::fs::read(&lib).map_err(|e| Error::tvm_fmt(format_args!("RPC server: {e}")))?,
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
            .map_err(|e| Error::tvm_fmt(format_args!("RPC server: cannot list {name}: {e}")))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_unstable();
        *rv = RetValue::Str(names.join(","));
        Ok(())
    });
}

/// Registers `tvmrt.testing.crash()`, which ends the serving process with SIGSEGV as a crash in
/// a session's code would, when the server runs with `TVMRT_RPC_TEST_HOOKS=1` in its
/// environment (only the availability tests set it: no request of the protocol is meant to
/// crash a session, so they bring their own).
fn register_test_hooks() {
    if std::env::var_os("TVMRT_RPC_TEST_HOOKS").is_none_or(|v| v != "1") {
        return;
    }
    registry::register_rust("tvmrt.testing.crash", |_a, _rv| {
        // SAFETY: restoring the default action of SIGSEGV and raising it ends this process,
        // as a crash in a session's code would; nothing is dereferenced.
        unsafe {
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
            libc::raise(libc::SIGSEGV);
        }
        Err(Error::tvm(
            "tvmrt.testing.crash: SIGSEGV did not end the process",
        ))
    });
}

/// How the server keeps a session from harming the server and the other sessions.
#[derive(Clone, Debug)]
pub enum Isolation {
    /// Each session runs in its own child process, started as `program args... SETTINGS`
    /// with the session's socket as its standard input; the program passes SETTINGS to
    /// [`serve_session_child`]. A crash or a hang ends that process only; at the session's
    /// timeout it is killed (SIGKILL, with every process it started), and the system takes
    /// back everything it held.
    Process {
        /// The program (for `tvmrt`: `/proc/self/exe`, the running binary itself).
        program: PathBuf,
        /// Arguments before the settings.
        args: Vec<OsString>,
    },
    /// Each session runs on a thread of the server, one at a time. A crash in a session ends
    /// the server, and a session past its timeout is cut off from its client but keeps its
    /// thread and memory until its call returns.
    Thread,
}

impl Isolation {
    /// Sessions in child processes of this binary, started as `/proc/self/exe args...`
    /// (the binary the server runs, even if its file was replaced since).
    pub fn this_binary(args: &[&str]) -> Self {
        Isolation::Process {
            program: PathBuf::from("/proc/self/exe"),
            args: args.iter().map(OsString::from).collect(),
        }
    }
}

/// Session timeout messages start with this (the client raises `RPCSessionTimeoutError`).
const TIMEOUT_PREFIX: &str = "RPCSessionTimeoutError: ";

/// What a session child needs to know; passed as one JSON argument.
struct ChildSettings {
    dir: PathBuf,
    max_packet: u64,
    idle_timeout: Option<Duration>,
    silent: bool,
    id: u64,
}

impl ChildSettings {
    fn to_arg(&self) -> String {
        use crate::packed_func::json::{object, Value};
        object(vec![
            ("dir", Value::from(self.dir.to_string_lossy().into_owned())),
            ("max_packet", self.max_packet.into()),
            (
                "idle_ms",
                self.idle_timeout.map_or(0, |d| d.as_millis() as u64).into(),
            ),
            ("silent", self.silent.into()),
            ("id", self.id.into()),
        ])
        .to_string()
    }

    fn parse(s: &str) -> Result<Self> {
        let bad = || Error::value_fmt(format_args!("RPC session child: bad settings '{s}'"));
        let v = crate::packed_func::json::parse(s).map_err(|_| bad())?;
        let idle = v["idle_ms"].as_u64().ok_or_else(bad)?;
        Ok(ChildSettings {
            dir: PathBuf::from(v["dir"].as_str().ok_or_else(bad)?),
            max_packet: v["max_packet"].as_u64().ok_or_else(bad)?,
            idle_timeout: (idle > 0).then(|| Duration::from_millis(idle)),
            silent: v["silent"].as_bool().ok_or_else(bad)?,
            id: v["id"].as_u64().ok_or_else(bad)?,
        })
    }
}

/// Sends as much of `data` as the socket takes now, without blocking (the descriptor may be
/// shared with a session that uses it in blocking mode) and without SIGPIPE. True when all of
/// it went.
fn send_now(s: &TcpStream, data: &[u8]) -> bool {
    // SAFETY: `data` is a valid buffer of its length and `s` an open socket.
    let n = unsafe {
        libc::send(
            s.as_raw_fd(),
            data.as_ptr() as *const libc::c_void,
            data.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    usize::try_from(n).is_ok_and(|n| n == data.len())
}

/// A session's channel that notes when the client stayed silent past the idle timeout.
struct IdleChannel {
    inner: super::endpoint::BufferedStream,
    idled: bool,
    idle_flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl super::endpoint::Channel for IdleChannel {
    fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.inner.send(data)
    }
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let r = self.inner.recv(buf);
        if let Err(e) = &r {
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) && !self.idled
            {
                self.idled = true;
                self.idle_flag
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        r
    }
    fn close(&mut self) {
        self.inner.close();
    }
}

/// Serves one session on its socket in this process (a session child, or a session thread).
fn run_session(
    stream: TcpStream,
    dir: &Path,
    max_packet: u64,
    idle_timeout: Option<Duration>,
) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::tvm_fmt(format_args!("RPC server: cannot create {dir:?}: {e}")))?;
    *SESSION_DIR.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.to_path_buf());
    let io = |e: std::io::Error| Error::tvm_fmt(format_args!("RPC server: {e}"));
    stream.set_nonblocking(false).map_err(io)?;
    // The idle timeout bounds every wait for the client's bytes (SO_RCVTIMEO).
    stream.set_read_timeout(idle_timeout).map_err(io)?;
    let _ = stream.set_nodelay(true);
    let side = stream.try_clone().map_err(io)?;
    let idle_flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let chan = IdleChannel {
        inner: super::endpoint::BufferedStream::new(stream).map_err(io)?,
        idled: false,
        idle_flag: idle_flag.clone(),
    };
    let r = serve_channel(Box::new(chan), max_packet);
    if idle_flag.load(std::sync::atomic::Ordering::Relaxed) {
        let secs = idle_timeout.map_or(0.0, |d| d.as_secs_f64());
        let _ = send_now(
            &side,
            &codec::exception_packet(&format!(
                "{TIMEOUT_PREFIX}the RPC session was idle for more than {secs}s (the server's \
                 idle timeout) and was closed"
            )),
        );
        let _ = side.shutdown(Shutdown::Both);
        return Err(Error::tvm_fmt(format_args!(
            "the client sent nothing for {secs}s (idle timeout)"
        )));
    }
    let _ = side.shutdown(Shutdown::Both);
    r
}

/// The body of a session child (see [`Isolation::Process`]): serves the session whose socket
/// is standard input, with the settings the server passed, then returns.
pub fn serve_session_child(settings: &str) -> Result<()> {
    let st = ChildSettings::parse(settings)?;
    // SAFETY: duplicating descriptor 0 (whatever it is) into a fresh close-on-exec one.
    let fd = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(Error::tvm_fmt(format_args!(
            "RPC session child: no socket on standard input: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `fd` was just created here and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // Standard input becomes /dev/null, so nothing this session starts inherits the socket.
    if let Ok(null) = std::fs::File::open("/dev/null") {
        // SAFETY: both descriptors are open; dup2 replaces descriptor 0 atomically.
        unsafe { libc::dup2(null.as_raw_fd(), 0) };
    }
    let stream = TcpStream::from(sock);
    stream.peer_addr().map_err(|e| {
        Error::tvm_fmt(format_args!(
            "RPC session child: standard input is not a connected socket ({e}); this mode is \
             started by the RPC server only"
        ))
    })?;
    register_env();
    register_test_hooks();
    let cfg = ServerConfig {
        silent: st.silent,
        ..Default::default()
    };
    match run_session(stream, &st.dir, st.max_packet, st.idle_timeout) {
        Ok(()) => log(&cfg, &format!("session {} ended", st.id)),
        Err(e) => log(&cfg, &format!("session {} ended with an error: {e}", st.id)),
    }
    Ok(())
}

/// Outcome of parsing a handshake from the bytes received so far.
enum Handshake {
    /// This many more bytes are needed.
    More(usize),
    /// Not an RPC client (or a bad length): drop it.
    Bad(String),
    /// The client's key (`client:KEY [options]`).
    Key(String),
}

fn parse_handshake(b: &[u8]) -> Handshake {
    if b.len() >= 4 {
        let magic = i32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
        if magic != codec::RPC_MAGIC {
            return Handshake::Bad(format!("bad magic {magic:#x} (not an RPC client)"));
        }
    }
    if b.len() < 8 {
        return Handshake::More(8 - b.len());
    }
    let n = i32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    if !(0..=4096).contains(&n) {
        return Handshake::Bad(format!("bad key length {n}"));
    }
    let total = 8 + n as usize;
    if b.len() < total {
        return Handshake::More(total - b.len());
    }
    Handshake::Key(String::from_utf8_lossy(&b[8..total]).into_owned())
}

/// Checks a client key against `matchkey`; Some(session timeout asked for) when it matches.
fn check_key(k: &str, matchkey: &str) -> std::result::Result<Option<f64>, String> {
    let mut parts = k.split_whitespace();
    let first = parts.next().unwrap_or("");
    if first != format!("client:{matchkey}") {
        return Err(format!("key mismatch ('{first}')"));
    }
    let mut timeout = None;
    for opt in parts {
        if let Some(v) = opt.strip_prefix("-timeout=") {
            timeout = v.parse::<f64>().ok().filter(|t| *t > 0.0 && t.is_finite());
        }
    }
    Ok(timeout)
}

/// A connection before its session: reading the handshake, waiting for a free slot, or being
/// closed after a refusal.
struct Pending {
    stream: TcpStream,
    peer: std::net::SocketAddr,
    state: PendingState,
    deadline: Instant,
}

enum PendingState {
    Reading(Vec<u8>),
    /// Handshake read and matched; waiting for a session slot (the reply is held back).
    Queued(Option<f64>),
    /// Refused: the reason was sent; the rest of what the client sends is read and dropped,
    /// so that closing does not reset the connection before the client reads the reason.
    Closing,
}

enum Worker {
    Child(std::process::Child),
    Thread(mpsc::Receiver<Result<()>>),
}

/// A session being served.
struct Running {
    id: u64,
    worker: Worker,
    /// The server's own copy of the session's socket (to report a timeout or a crash).
    sock: TcpStream,
    dir: PathBuf,
    limit: Option<f64>,
    deadline: Option<Instant>,
    killed: bool,
}

/// How long a matched client may wait for a free session slot before it is told the server
/// is busy.
const QUEUE_WAIT: Duration = Duration::from_secs(30);
/// How long a refused connection is drained before it is closed.
const LINGER: Duration = Duration::from_secs(2);

fn server_reply(key: &str) -> Vec<u8> {
    let sk = format!("server:{key}");
    let mut out = codec::RPC_MAGIC.to_le_bytes().to_vec();
    out.extend_from_slice(&(sk.len() as i32).to_le_bytes());
    out.extend_from_slice(sk.as_bytes());
    out
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// The instant `d` from now (far in the future if that cannot be represented).
fn after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 86400))
}

/// The accept loop's state.
struct Server<'a> {
    cfg: &'a ServerConfig,
    root: PathBuf,
    pending: Vec<Pending>,
    running: Vec<Running>,
    sessions: u64,
}

impl Server<'_> {
    fn slots(&self) -> usize {
        match self.cfg.isolation {
            Isolation::Thread => 1,
            Isolation::Process { .. } => self.cfg.max_concurrent.max(1),
        }
    }

    fn log(&self, msg: &str) {
        log(self.cfg, msg);
    }

    /// Starts the session of a matched connection.
    fn start(&mut self, stream: TcpStream, peer: std::net::SocketAddr, timeout: Option<f64>) {
        if !send_now(&stream, &server_reply(&self.cfg.key)) {
            self.log(&format!("{peer} went away before its session started"));
            return;
        }
        self.sessions += 1;
        let id = self.sessions;
        let dir = self.root.join(format!("session-{id}"));
        let limit = timeout.or((self.cfg.timeout > 0.0).then_some(self.cfg.timeout));
        // Logged before the session starts, so that the line is out before its client can
        // have any reply from the session.
        self.log(&format!("session from {peer} (session {id})"));
        let r = stream
            .set_nonblocking(false)
            .and_then(|_| stream.try_clone())
            .map_err(|e| Error::tvm(e.to_string()))
            .and_then(|theirs| self.spawn(id, theirs, &dir));
        match r {
            Ok(worker) => {
                self.running.push(Running {
                    id,
                    worker,
                    sock: stream,
                    dir,
                    limit,
                    // A limit too large for a Duration or an Instant is no limit.
                    deadline: limit
                        .and_then(|t| Duration::try_from_secs_f64(t).ok())
                        .and_then(|d| Instant::now().checked_add(d)),
                    killed: false,
                });
            }
            Err(e) => {
                self.log(&format!("cannot start session {id}: {e}"));
                let _ = send_now(
                    &stream,
                    &codec::exception_packet(&format!("RPC server: cannot start a session: {e}")),
                );
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }

    fn spawn(&self, id: u64, stream: TcpStream, dir: &Path) -> Result<Worker> {
        let cfg = self.cfg;
        match &cfg.isolation {
            Isolation::Process { program, args } => {
                use std::os::unix::process::CommandExt;
                std::fs::create_dir_all(dir)
                    .map_err(|e| Error::tvm_fmt(format_args!("cannot create {dir:?}: {e}")))?;
                let settings = ChildSettings {
                    dir: dir.to_path_buf(),
                    max_packet: cfg.max_packet,
                    idle_timeout: cfg.idle_timeout,
                    silent: cfg.silent,
                    id,
                };
                // fork+exec, not fork alone. A forked copy of a multithreaded process keeps
                // only the forking thread, with every lock the others held at that instant
                // (allocator arenas, the function registry, the thread pool's queues, stdio)
                // held for ever, and a thread pool with no workers; the server's loop is one
                // thread, but the runtime may have started its pool, and a program embedding
                // the server may run any threads. A new image starts from a clean state: the
                // only code between fork and exec is std's descriptor setup and the
                // async-signal-safe hook below. The cost, a process start per session (a few
                // milliseconds), is small against a session.
                let mut cmd = std::process::Command::new(program);
                cmd.args(args)
                    .arg(settings.to_arg())
                    .stdin(std::process::Stdio::from(OwnedFd::from(stream)))
                    // Its own process group: a timeout kills the session with everything it
                    // started.
                    .process_group(0);
                let server_pid = std::process::id() as libc::pid_t;
                // SAFETY: the hook runs in the child between fork and exec and calls only
                // async-signal-safe functions (prctl, getppid, _exit).
                unsafe {
                    cmd.pre_exec(move || {
                        // The session dies with the server (with the thread that started it,
                        // which is the server's loop and lives as long as the server); if the
                        // server is already gone, at once.
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        if libc::getppid() != server_pid {
                            libc::_exit(1);
                        }
                        Ok(())
                    })
                };
                let child = cmd
                    .spawn()
                    .map_err(|e| Error::tvm_fmt(format_args!("cannot start {program:?}: {e}")))?;
                Ok(Worker::Child(child))
            }
            Isolation::Thread => {
                let (tx, rx) = mpsc::channel();
                let dir = dir.to_path_buf();
                let (max_packet, idle) = (cfg.max_packet, cfg.idle_timeout);
                std::thread::Builder::new()
                    .name("rpc-session".into())
                    .spawn(move || {
                        let _ = tx.send(run_session(stream, &dir, max_packet, idle));
                    })
                    .map_err(|e| {
                        Error::tvm_fmt(format_args!("cannot start a session thread: {e}"))
                    })?;
                Ok(Worker::Thread(rx))
            }
        }
    }

    /// Reaps finished sessions and stops those past their timeout. True when one ended.
    fn check_running(&mut self) -> bool {
        let now = Instant::now();
        let mut ended = false;
        let mut i = 0;
        // Bounded: each round keeps or removes one entry.
        while i < self.running.len() {
            let r = &mut self.running[i];
            let over = r.deadline.is_some_and(|d| now >= d);
            let done = match &mut r.worker {
                Worker::Child(c) => {
                    if over && !r.killed {
                        r.killed = true;
                        // SAFETY: signalling the child's own process group (it was started
                        // with process_group(0), so its group id is its pid, which is not
                        // reused before we reap it).
                        unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
                    }
                    match c.try_wait() {
                        Ok(Some(status)) => Some(Ok(status)),
                        Ok(None) => None,
                        Err(e) => Some(Err(e)),
                    }
                    .map(|st| {
                        use std::os::unix::process::ExitStatusExt;
                        match st {
                            Ok(s) if r.killed => (true, format!("killed at its timeout ({s})")),
                            Ok(s) => match s.signal() {
                                Some(sig) => (
                                    false,
                                    format!(
                                        "its process was killed by signal {sig} ({})",
                                        signal_name(sig)
                                    ),
                                ),
                                None if s.success() => (true, String::new()),
                                None => (true, format!("its process exited ({s})")),
                            },
                            Err(e) => (true, format!("cannot wait for it: {e}")),
                        }
                    })
                }
                Worker::Thread(rx) => match rx.try_recv() {
                    Ok(Ok(())) => Some((true, "ended".to_string())),
                    Ok(Err(e)) => Some((true, format!("ended with an error: {e}"))),
                    Err(mpsc::TryRecvError::Disconnected) => {
                        Some((true, "its thread failed".to_string()))
                    }
                    Err(mpsc::TryRecvError::Empty) if over => {
                        r.killed = true;
                        Some((
                            true,
                            "timed out; its thread is left to finish its call".to_string(),
                        ))
                    }
                    Err(mpsc::TryRecvError::Empty) => None,
                },
            };
            let Some((normal, how)) = done else {
                i += 1;
                continue;
            };
            let r = self.running.swap_remove(i);
            if r.killed {
                let _ = send_now(
                    &r.sock,
                    &codec::exception_packet(&format!(
                        "{TIMEOUT_PREFIX}Timeout in RPC session after {}s",
                        r.limit.unwrap_or(0.0)
                    )),
                );
            } else if !normal {
                let _ = send_now(
                    &r.sock,
                    &codec::exception_packet(&format!(
                        "RPC server: the session ended abnormally: {how}"
                    )),
                );
            }
            let _ = r.sock.shutdown(Shutdown::Both);
            if !how.is_empty() {
                log(self.cfg, &format!("session {}: {how}", r.id));
            }
            let _ = std::fs::remove_dir_all(&r.dir);
            ended = true;
        }
        ended
    }

    /// Accepts what the listener holds, up to the cap on connections before their session.
    fn accept(&mut self, listener: &TcpListener) {
        // Bounded by the cap and by the listener's queue.
        while self.pending.len() < self.cfg.max_handshakes.max(1) {
            match listener.accept() {
                Ok((s, peer)) => {
                    if s.set_nonblocking(true).is_err() {
                        continue;
                    }
                    self.pending.push(Pending {
                        stream: s,
                        peer,
                        state: PendingState::Reading(Vec::new()),
                        deadline: after(self.cfg.handshake_timeout),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.log(&format!("accept failed: {e}"));
                    break;
                }
            }
        }
    }

    /// Reads what a pending connection sent (never past its handshake: what follows is the
    /// session's). False when it is to be dropped.
    fn read_pending(&mut self, i: usize, matchkey: &str) -> bool {
        let p = &mut self.pending[i];
        let buf = match &mut p.state {
            // Polled for hang-ups only: the client went away while it waited.
            PendingState::Queued(_) => return false,
            PendingState::Closing => {
                let mut sink = [0u8; 4096];
                // Bounded: at most 16 reads per wake-up.
                for _ in 0..16 {
                    match (&p.stream).read(&mut sink) {
                        Ok(0) => return false,
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
                    }
                }
                return true;
            }
            PendingState::Reading(buf) => buf,
        };
        // Bounded: each round reads at least one byte, and a handshake has at most 4104.
        let key = loop {
            let need = match parse_handshake(buf) {
                Handshake::More(n) => n,
                Handshake::Bad(why) => {
                    let peer = p.peer;
                    self.log(&format!("refused {peer}: handshake: {why}"));
                    return false;
                }
                Handshake::Key(k) => break k,
            };
            let start = buf.len();
            buf.resize(start + need, 0);
            match (&p.stream).read(&mut buf[start..]) {
                Ok(0) => return false,
                Ok(n) => buf.truncate(start + n),
                Err(e) => {
                    buf.truncate(start);
                    return matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    );
                }
            }
        };
        match check_key(&key, matchkey) {
            Ok(timeout) => {
                p.state = PendingState::Queued(timeout);
                p.deadline = Instant::now() + QUEUE_WAIT;
                true
            }
            Err(why) => {
                let _ = send_now(&p.stream, &codec::RPC_CODE_MISMATCH.to_le_bytes());
                let peer = p.peer;
                self.log(&format!("refused {peer}: handshake: {why}"));
                false
            }
        }
    }

    /// Starts queued sessions while slots are free (oldest first); tells those that waited
    /// too long that the server is busy.
    fn dispatch_queue(&mut self) {
        let now = Instant::now();
        // Bounded: each round starts or refuses one queued connection, or stops.
        loop {
            let free = self.running.len() < self.slots();
            let next = self
                .pending
                .iter()
                .enumerate()
                .filter(|(_, p)| matches!(p.state, PendingState::Queued(_)))
                .min_by_key(|(_, p)| p.deadline)
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            if free {
                let p = self.pending.remove(i);
                let PendingState::Queued(timeout) = p.state else {
                    unreachable!("filtered above")
                };
                self.start(p.stream, p.peer, timeout);
                continue;
            }
            if now < self.pending[i].deadline {
                break;
            }
            let msg = format!(
                "RPC server busy: {} session(s) running, at most {} at once; no slot freed \
                 within {}s",
                self.running.len(),
                self.slots(),
                QUEUE_WAIT.as_secs()
            );
            let p = &mut self.pending[i];
            let _ = send_now(&p.stream, &server_reply(&self.cfg.key));
            let _ = send_now(&p.stream, &codec::exception_packet(&msg));
            let _ = p.stream.shutdown(Shutdown::Write);
            p.state = PendingState::Closing;
            p.deadline = now + LINGER;
            let peer = p.peer;
            self.log(&format!("refused {peer}: busy"));
        }
    }

    /// Drops pending connections past their deadline.
    fn expire_pending(&mut self) {
        let now = Instant::now();
        let cfg = self.cfg;
        self.pending.retain(|p| {
            let keep = now < p.deadline || matches!(p.state, PendingState::Queued(_));
            if !keep && matches!(p.state, PendingState::Reading(_)) {
                log(
                    cfg,
                    &format!(
                        "refused {}: no complete handshake within {:?}",
                        p.peer, cfg.handshake_timeout
                    ),
                );
            }
            keep
        });
    }

    /// Ends every session (at the server's exit).
    fn stop_all(&mut self) {
        for r in &mut self.running {
            if let Worker::Child(c) = &mut r.worker {
                // SAFETY: the child's own process group, as in check_running.
                unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
                let _ = c.wait();
            }
            let _ = r.sock.shutdown(Shutdown::Both);
            let _ = std::fs::remove_dir_all(&r.dir);
        }
        self.running.clear();
    }
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
    Err(Error::tvm_fmt(format_args!(
        "RPC server: cannot bind {}:{}..={}: {}",
        cfg.host,
        cfg.port,
        end,
        last.map_or("no port".into(), |e| e.to_string())
    )))
}

/// Runs the server until its lifetime or session count is reached (or forever).
pub fn run(cfg: &ServerConfig) -> Result<()> {
    serve(bind(cfg)?, cfg)
}

/// Serves on a bound listener until its lifetime or session count is reached (or forever).
///
/// One loop, on one thread, accepts connections, reads their handshakes (all at once, up to
/// `max_handshakes`, each within `handshake_timeout` in total), starts sessions (up to
/// `max_concurrent` at once; with a tracker the server is offered again only once no session
/// runs), and reaps them: a session that crashes or is killed at its timeout ends alone.
pub fn serve(listener: TcpListener, cfg: &ServerConfig) -> Result<()> {
    let port = listener
        .local_addr()
        .map_err(|e| Error::tvm_fmt(format_args!("RPC server: {e}")))?
        .port();
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::tvm_fmt(format_args!("RPC server: {e}")))?;
    let (root, temp_root) = match &cfg.work_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tvmrt-rpc-{}-{port}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&root)
        .map_err(|e| Error::tvm_fmt(format_args!("RPC server: cannot create {root:?}: {e}")))?;
    register_env();
    if matches!(cfg.isolation, Isolation::Thread) {
        register_test_hooks();
    }
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
    let mut srv = Server {
        cfg,
        root: root.clone(),
        pending: Vec::new(),
        running: Vec::new(),
        sessions: 0,
    };
    let mut last_tracker_check = Instant::now();
    // Bounded by the lifetime or the session count, when set; otherwise runs until killed.
    loop {
        if cfg.lifetime.is_some_and(|l| start.elapsed() >= l) {
            break;
        }
        let accepting = cfg.max_sessions.is_none_or(|m| srv.sessions < m);
        if srv.check_running() && srv.running.is_empty() {
            if let Some(r) = reg.as_mut() {
                if let Err(e) = r.put() {
                    log(cfg, &format!("tracker: {e}"));
                }
            }
        }
        if !accepting && srv.running.is_empty() {
            break;
        }
        srv.expire_pending();
        if accepting {
            srv.dispatch_queue();
        } else {
            srv.pending.clear();
        }
        if let Some(r) = reg.as_mut() {
            if srv.running.is_empty() && last_tracker_check.elapsed() >= Duration::from_secs(2) {
                last_tracker_check = Instant::now();
                if let Err(e) = r.check_pending() {
                    log(cfg, &format!("tracker: {e}"));
                }
            }
        }
        // Wait for the listener or a pending connection, at most until the next deadline
        // (sessions are checked at least every 100 ms).
        let listen = accepting && srv.pending.len() < cfg.max_handshakes.max(1);
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(srv.pending.len() + 1);
        for p in &srv.pending {
            // A queued connection's bytes are its session's: only a hang-up is watched.
            let events = match p.state {
                PendingState::Queued(_) => 0,
                _ => libc::POLLIN,
            };
            fds.push(libc::pollfd {
                fd: p.stream.as_raw_fd(),
                events,
                revents: 0,
            });
        }
        if listen {
            fds.push(libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let now = Instant::now();
        let mut wait = Duration::from_millis(100);
        for p in &srv.pending {
            wait = wait.min(p.deadline.saturating_duration_since(now));
        }
        // SAFETY: `fds` is a valid array of its length, owned here for the call.
        let n = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                wait.as_millis().max(1) as i32,
            )
        };
        if n <= 0 {
            continue;
        }
        let matchkey = reg
            .as_ref()
            .map_or(cfg.key.clone(), |r| r.matchkey().to_string());
        let ready: Vec<bool> = fds
            .iter()
            .take(srv.pending.len())
            .map(|f| f.revents != 0)
            .collect();
        let mut keep = Vec::with_capacity(ready.len());
        for (i, r) in ready.iter().enumerate() {
            keep.push(!*r || srv.read_pending(i, &matchkey));
        }
        let mut k = keep.into_iter();
        srv.pending.retain(|_| k.next().unwrap_or(true));
        if listen && fds.last().is_some_and(|f| f.revents != 0) {
            srv.accept(&listener);
        }
    }
    srv.stop_all();
    if temp_root {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(())
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

#[cfg(test)]
mod availability_tests {
    use super::*;

    #[test]
    fn handshakes_are_read_no_further_than_their_end() {
        let mut hs = codec::RPC_MAGIC.to_le_bytes().to_vec();
        assert!(matches!(parse_handshake(&hs[..2]), Handshake::More(6)));
        assert!(matches!(parse_handshake(&hs), Handshake::More(4)));
        hs.extend_from_slice(&7i32.to_le_bytes());
        assert!(matches!(parse_handshake(&hs), Handshake::More(7)));
        hs.extend_from_slice(b"client:");
        assert!(matches!(parse_handshake(&hs), Handshake::Key(k) if k == "client:"));
        assert!(matches!(parse_handshake(b"GET "), Handshake::Bad(_)));
        let mut long = codec::RPC_MAGIC.to_le_bytes().to_vec();
        long.extend_from_slice(&5000i32.to_le_bytes());
        assert!(matches!(parse_handshake(&long), Handshake::Bad(_)));
    }

    #[test]
    fn keys_and_timeouts() {
        assert_eq!(check_key("client:k -timeout=2.5", "k"), Ok(Some(2.5)));
        assert_eq!(check_key("client:k -timeout=inf", "k"), Ok(None));
        assert_eq!(check_key("client:k", "k"), Ok(None));
        assert!(check_key("client:x", "k").is_err());
    }

    #[test]
    fn child_settings_round_trip() {
        let s = ChildSettings {
            dir: PathBuf::from("/tmp/a b/session-3"),
            max_packet: 1 << 20,
            idle_timeout: Some(Duration::from_millis(1500)),
            silent: true,
            id: 3,
        };
        let t = ChildSettings::parse(&s.to_arg()).unwrap();
        assert_eq!(t.dir, s.dir);
        assert_eq!(t.max_packet, s.max_packet);
        assert_eq!(t.idle_timeout, s.idle_timeout);
        assert!(t.silent);
        assert_eq!(t.id, 3);
        assert!(ChildSettings::parse("{}").is_err());
    }
}
