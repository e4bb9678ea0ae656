//! Availability of `tvmrt rpc-server` against hostile or broken clients (issue 31): the real
//! binary on loopback, every wait bounded. A session that crashes, hangs or idles ends alone;
//! slow or idle connections hold nothing; a packet header allocates nothing before its body
//! arrives; a client's absurd timeout is no limit, not a panic; an `InitServer` that connects
//! back cannot deadlock the server; copies fit any packet limit.
//!
//! The crash uses a global that only a server started with `TVMRT_RPC_TEST_HOOKS=1` registers
//! (`tvmrt.testing.crash`, which ends the serving process with SIGSEGV): no request of the
//! protocol is meant to crash the server, so the test brings its own.
#![cfg(feature = "rpc")]

#[path = "common/rpc_server.rs"]
mod rpc_server;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tvm_runtime::packed_func::types::{DLDataType, DLDevice};
use tvm_runtime::rpc::client::{self, ClientSession};
use tvm_runtime::rpc::codec::{self, code, WireValue, Writer};
use tvm_runtime::{ArgValue, RetValue};

/// A `tvmrt rpc-server` on an ephemeral loopback port, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tvmrt"));
        cmd.args(["rpc-server", "--port", "0", "--port-end", "0"])
            .args(["--lifetime", "240", "--silent"])
            .args(extra)
            .env("TVMRT_RPC_TEST_HOOKS", "1")
            .stderr(Stdio::inherit());
        let (child, port) = rpc_server::spawn(cmd);
        Server { child, port }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().expect("wait").is_none()
    }

    fn connect(&self) -> Arc<ClientSession> {
        client::connect("127.0.0.1", self.port as i64, "", &[]).expect("connect")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `f` on a thread and waits at most `secs` for it; None if it did not finish.
fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).ok()
}

/// A full session works: connect, call a remote global.
fn serves(port: u16) -> tvm_runtime::Result<i64> {
    let s = client::connect("127.0.0.1", port as i64, "", &[])?;
    device_attr(&s)
}

fn device_attr(s: &Arc<ClientSession>) -> tvm_runtime::Result<i64> {
    let m = client::session_module(s, None);
    let f = m.function("runtime.GetDeviceAttr")?;
    f.call(&[ArgValue::Int(1), ArgValue::Int(0), ArgValue::Int(0)])?
        .as_i64()
}

fn assert_serves_within(port: u16, secs: u64) {
    let t = Instant::now();
    match bounded(secs, move || serves(port)) {
        Some(Ok(1)) => {}
        Some(r) => panic!("a new client was not served: {r:?}"),
        None => panic!(
            "a new client was not served within {secs}s (waited {:?})",
            t.elapsed()
        ),
    }
}

/// Fields of /proc/PID/stat after the command name: (state, parent pid).
fn stat(pid: u32) -> Option<(char, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

/// `pid` and all its descendants.
fn tree(pid: u32) -> Vec<u32> {
    let procs: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((p, stat(p)?.1)))
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            procs
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// Resident memory of the server and every process under it, in MiB (VmRSS).
fn tree_rss_mib(pid: u32) -> u64 {
    let kib: u64 = tree(pid)
        .into_iter()
        .filter_map(|p| {
            let s = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum();
    kib / 1024
}

fn handshake_bytes(key: &str) -> Vec<u8> {
    let k = format!("client:{key}");
    let mut hs = codec::RPC_MAGIC.to_le_bytes().to_vec();
    hs.extend_from_slice(&(k.len() as i32).to_le_bytes());
    hs.extend_from_slice(k.as_bytes());
    hs
}

/// A raw connection after the handshake and `InitServer`.
fn raw_session(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&handshake_bytes("")).unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    assert_eq!(i32::from_le_bytes(b), codec::RPC_MAGIC);
    s.read_exact(&mut b).unwrap();
    let mut k = vec![0u8; i32::from_le_bytes(b) as usize];
    s.read_exact(&mut k).unwrap();
    let mut w = Writer::packet(code::INIT_SERVER);
    w.u64(5);
    w.bytes(b"0.8.0");
    w.seq(&[]);
    s.write_all(&w.finish()).unwrap();
    let mut h = [0u8; 12];
    s.read_exact(&mut h).unwrap();
    assert_eq!(i32::from_le_bytes(h[8..].try_into().unwrap()), code::RETURN);
    let mut body = vec![0u8; u64::from_le_bytes(h[..8].try_into().unwrap()) as usize - 4];
    s.read_exact(&mut body).unwrap();
    s
}

const CPU: i32 = 1;

/// Allocates `n` bytes on the server's CPU; returns the remote data handle.
fn remote_alloc(s: &Arc<ClientSession>, n: usize) -> u64 {
    match s
        .syscall(
            code::DEV_ALLOC_DATA,
            &[
                WireValue::Device(DLDevice::new(CPU, 0)),
                WireValue::Int(n as i64),
                WireValue::Int(64),
                WireValue::DataType(DLDataType::new(1, 8, 1)),
            ],
        )
        .expect("alloc")
    {
        WireValue::Handle(h) => h,
        v => panic!("DevAllocData returned {v:?}"),
    }
}

#[test]
fn a_crashing_session_ends_alone() {
    let mut srv = Server::start(&[]);
    let port = srv.port;
    // A session open while another crashes.
    let bystander = srv.connect();
    assert_eq!(device_attr(&bystander).unwrap(), 1);
    let r = bounded(30, move || -> tvm_runtime::Result<RetValue> {
        let s = client::connect("127.0.0.1", port as i64, "", &[])?;
        let m = client::session_module(&s, None);
        let crash = m
            .get_function("tvmrt.testing.crash", false)?
            .expect("the server registers its test hooks");
        crash.call(&[])
    })
    .expect("the crashed session's client got an answer within 30s");
    let e = r.expect_err("the crash must be an error");
    assert!(e.to_string().contains("SIGSEGV"), "{e}");
    assert!(srv.alive(), "the server died with its session");
    assert_eq!(
        device_attr(&bystander).expect("the other session goes on"),
        1
    );
    assert_serves_within(port, 10);
    drop(bystander);
    // Every session process ends with its client and is reaped: none is left, not even a
    // zombie.
    let pid = srv.pid();
    let t = Instant::now();
    while tree(pid).len() > 1 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<_> = tree(pid).into_iter().filter(|p| *p != pid).collect();
    assert!(
        left.is_empty(),
        "session processes left 5s after their clients ended: {:?}",
        left.iter().map(|p| (p, stat(*p))).collect::<Vec<_>>()
    );
}

#[test]
fn a_drip_fed_handshake_holds_nothing() {
    let srv = Server::start(&[]);
    let port = srv.port;
    // One byte every 2 s: shorter than any per-read timeout, so only a total deadline ends it.
    let dripper = std::thread::spawn(move || -> Option<Duration> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let t = Instant::now();
        for b in handshake_bytes("") {
            if s.write_all(&[b]).is_err() {
                return Some(t.elapsed());
            }
            match s.read(&mut [0u8; 1]) {
                Ok(_) => return Some(t.elapsed()),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut) => {}
                Err(_) => return Some(t.elapsed()),
            }
        }
        None
    });
    std::thread::sleep(Duration::from_millis(500));
    // A real client is served meanwhile, well within the handshake deadline.
    assert_serves_within(port, 5);
    let closed = dripper.join().unwrap();
    // The server dropped the dripper at its handshake deadline (10 s by default).
    let after = closed.expect("the drip-fed connection was never closed");
    assert!(after < Duration::from_secs(16), "closed after {after:?}");
}

#[test]
fn idle_sockets_do_not_delay_a_client() {
    let srv = Server::start(&[]);
    let idle: Vec<TcpStream> = (0..50)
        .map(|_| TcpStream::connect(("127.0.0.1", srv.port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert_serves_within(srv.port, 5);
    drop(idle);
}

#[test]
fn a_huge_packet_header_allocates_nothing_before_its_body() {
    let srv = Server::start(&[]);
    let mut s = raw_session(srv.port);
    std::thread::sleep(Duration::from_millis(300));
    let before = tree_rss_mib(srv.pid());
    // 1 GiB announced (under the default 2 GiB limit), 100 bytes sent.
    let mut w = Writer::default();
    w.u64(1 << 30);
    w.i32(code::CALL_FUNC);
    w.bytes(&[0u8; 100]);
    s.write_all(&w.buf).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let during = tree_rss_mib(srv.pid());
    assert!(
        during < before + 64,
        "resident memory went from {before} MiB to {during} MiB on a header alone"
    );
    assert_serves_within(srv.port, 10);
    drop(s);
}

#[test]
fn a_hung_session_is_killed_at_its_timeout_and_its_memory_freed() {
    let srv = Server::start(&["--timeout", "4"]);
    let pid = srv.pid();
    // A listener that never answers: connecting to it blocks the session (60 s).
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    std::thread::sleep(Duration::from_millis(300));
    let base = tree_rss_mib(pid);
    let port = srv.port;
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let s = client::connect("127.0.0.1", port as i64, "", &[]).unwrap();
        const N: usize = 128 << 20;
        let data = remote_alloc(&s, N);
        s.copy_to_remote(&vec![0x5a; N], data, DLDevice::new(CPU, 0), 0)
            .unwrap();
        tx.send(()).unwrap();
        let m = client::session_module(&s, None);
        let connect = m.function("rpc.Connect").unwrap();
        let host = std::ffi::CString::new("127.0.0.1").unwrap();
        let key = std::ffi::CString::new("").unwrap();
        let t = Instant::now();
        let r = connect.call(&[
            ArgValue::Str(&host),
            ArgValue::Int(silent_port as i64),
            ArgValue::Str(&key),
        ]);
        (r.map(|_| ()), t.elapsed())
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("128 MiB reached the server");
    let held = tree_rss_mib(pid);
    assert!(
        held >= base + 100,
        "the session holds {held} MiB, {base} MiB before"
    );
    let t = Instant::now();
    let (r, took) = loop {
        if worker.is_finished() {
            break worker.join().unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no answer 30s after the hang began"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let e = r.expect_err("the hung call must end with the session's timeout");
    assert!(e.to_string().contains("RPCSessionTimeoutError"), "{e}");
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
    // Its memory is given back at once (the session's process is gone).
    let t = Instant::now();
    let mut now = tree_rss_mib(pid);
    while now > base + 32 && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
        now = tree_rss_mib(pid);
    }
    assert!(
        now <= base + 32,
        "{now} MiB still resident after the timeout ({base} MiB before the session)"
    );
    assert_serves_within(port, 10);
    drop(silent);
}

#[test]
fn init_server_connecting_back_does_not_deadlock() {
    let srv = Server::start(&[]);
    let port = srv.port;
    let r = bounded(20, move || -> tvm_runtime::Result<i64> {
        // The session's constructor is rpc.Connect to this same server: a relay to itself.
        let ctor = [
            WireValue::Str(b"rpc.Connect".to_vec()),
            WireValue::Str(b"127.0.0.1".to_vec()),
            WireValue::Int(port as i64),
            WireValue::Str(Vec::new()),
            WireValue::Int(0),
        ];
        let s = client::connect("127.0.0.1", port as i64, "", &ctor)?;
        device_attr(&s)
    });
    match r {
        Some(Ok(1)) => {}
        Some(r) => panic!("the relayed session failed: {r:?}"),
        None => panic!("InitServer connecting back to the server hung (20s)"),
    }
    assert_serves_within(port, 10);
}

#[test]
fn copies_are_chunked_under_a_small_packet_limit() {
    let srv = Server::start(&["--max-packet-mib", "1"]);
    let port = srv.port;
    let r = bounded(60, move || -> tvm_runtime::Result<bool> {
        let s = client::connect("127.0.0.1", port as i64, "", &[])?;
        const N: usize = (5 << 20) + 123;
        let data = remote_alloc(&s, N);
        let src: Vec<u8> = (0..N).map(|i| (i * 7 % 251) as u8).collect();
        let dev = DLDevice::new(CPU, 0);
        s.copy_to_remote(&src, data, dev, 0)?;
        let mut back = vec![0u8; N];
        s.copy_from_remote(&mut back, data, dev, 0)?;
        Ok(back == src)
    });
    match r {
        Some(Ok(true)) => {}
        Some(Ok(false)) => panic!("the data came back changed"),
        Some(Err(e)) => panic!("a copy over the 1 MiB packet limit failed: {e}"),
        None => panic!("copies did not finish within 60s"),
    }
}

#[test]
fn an_idle_session_is_closed_at_the_idle_timeout() {
    let srv = Server::start(&["--idle-timeout", "2"]);
    let pid = srv.pid();
    let s = srv.connect();
    assert_eq!(device_attr(&s).unwrap(), 1);
    assert_eq!(
        tree(pid).len(),
        2,
        "one session process while the client is there"
    );
    // The client stays silent: the server closes the session and its process ends.
    let t = Instant::now();
    while tree(pid).len() > 1 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = t.elapsed();
    assert_eq!(
        tree(pid).len(),
        1,
        "the idle session still runs after {after:?}"
    );
    assert!(
        after >= Duration::from_millis(1500),
        "closed after {after:?}, before 2s"
    );
    assert!(device_attr(&s).is_err(), "the closed session still answers");
    assert_serves_within(srv.port, 10);
}

#[test]
fn an_absurd_session_timeout_is_no_limit() {
    let mut srv = Server::start(&[]);
    let port = srv.port;
    // The client's "-timeout=" is the server's to check: 1e300 s fits no clock.
    let r = bounded(20, move || -> tvm_runtime::Result<i64> {
        let s = client::connect("127.0.0.1", port as i64, " -timeout=1e300", &[])?;
        device_attr(&s)
    });
    assert!(matches!(r, Some(Ok(1))), "{r:?}");
    assert!(srv.alive(), "the server died of a client's timeout");
    assert_serves_within(port, 10);
}
