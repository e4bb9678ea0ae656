//! Hostile clients against the real `tvmrt rpc-server` on loopback (issue 31): forged opaque
//! handles, returned addresses, hostile archives and path globals reaching outside the session's
//! work directory. Every server runs with a bounded lifetime and is killed when its test ends.
#![cfg(feature = "rpc")]

#[path = "common/rpc_server.rs"]
mod rpc_server;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tvm_runtime::packed_func::types::type_code as tc;
use tvm_runtime::rpc::client::{self, ClientSession};
use tvm_runtime::rpc::codec::WireValue;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system temporary directory.
fn temp_dir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "tvmrt-hostile-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `tvmrt rpc-server` child on an ephemeral loopback port.
struct Server {
    child: Child,
    port: u16,
    dirs: Vec<PathBuf>,
}

impl Server {
    fn start() -> Server {
        let work = temp_dir("work");
        let cwd = temp_dir("cwd");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tvmrt"));
        cmd.args(["rpc-server", "--port", "0", "--port-end", "0", "--silent"])
            .args(["--lifetime", "300", "--work-dir"])
            .arg(&work)
            .current_dir(&cwd)
            .stderr(Stdio::null());
        let (child, port) = rpc_server::spawn(cmd);
        Server {
            child,
            port,
            dirs: vec![work, cwd],
        }
    }

    fn connect(&self) -> Arc<ClientSession> {
        client::connect("127.0.0.1", self.port as i64, "", &[]).expect("connects")
    }

    /// The server process is alive and serves a new session.
    fn assert_alive(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the server process died"
        );
        let s = self.connect();
        let r = call(&s, "runtime.GetDeviceAttr", &[int(1), int(0), int(0)]).unwrap();
        assert_eq!(r, vec![int(tc::INT as i64), int(1)]);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn int(i: i64) -> WireValue {
    WireValue::Int(i)
}

fn s(v: &str) -> WireValue {
    WireValue::Str(v.as_bytes().to_vec())
}

fn p(v: &Path) -> WireValue {
    s(v.to_str().unwrap())
}

/// Calls remote global `name`; the raw reply (`[type code, value...]`) or the error message.
fn call(
    sess: &Arc<ClientSession>,
    name: &str,
    args: &[WireValue],
) -> Result<Vec<WireValue>, String> {
    let h = sess.get_global(name).map_err(|e| e.into_message())?;
    assert_ne!(h, 0, "the server has no {name}");
    sess.call_func(h, args).map_err(|e| e.into_message())
}

fn call_err(sess: &Arc<ClientSession>, name: &str, args: &[WireValue]) -> String {
    match call(sess, name, args) {
        Ok(v) => panic!("{name} succeeded with {v:?}"),
        Err(e) => e,
    }
}

/// The handle of a returned object (`[code, handle]`).
fn object(v: &[WireValue]) -> WireValue {
    match v {
        [WireValue::Int(_), WireValue::Handle(h)] => WireValue::Object(*h),
        other => panic!("not an object reply: {other:?}"),
    }
}

/// The session's work directory, as the server reports it.
fn work_dir(sess: &Arc<ClientSession>) -> PathBuf {
    match call(sess, "tvm.rpc.server.workpath", &[s("probe")])
        .unwrap()
        .as_slice()
    {
        [_, WireValue::Str(p)] => PathBuf::from(String::from_utf8(p.clone()).unwrap())
            .parent()
            .unwrap()
            .to_path_buf(),
        other => panic!("workpath replied {other:?}"),
    }
}

#[test]
fn forged_opaque_handles_are_refused_and_the_server_survives() {
    let mut srv = Server::start();
    let sess = srv.connect();
    let mut tried = 0;
    for name in [
        "runtime.module.loadbinary_GraphExecutorFactory",
        "runtime.module.loadbinary_relax.VMExecutable",
        "runtime.module.loadbinary_relax.Executable",
        "runtime.module.loadbinary_cuda",
        "runtime.module.loadbinary_vulkan",
        "runtime.module.loadbinary_opencl",
    ] {
        let h = sess.get_global(name).unwrap();
        if h == 0 {
            continue;
        }
        tried += 1;
        let e = sess
            .call_func(h, &[WireValue::Handle(0x4141_4141)])
            .unwrap_err()
            .into_message();
        assert!(
            e.contains("0x41414141") && e.contains("not handed out"),
            "{name}: {e}"
        );
    }
    assert!(tried >= 3, "the loaders are registered");
    drop(sess);
    srv.assert_alive();
}

#[test]
fn returned_opaque_handles_are_table_numbers_not_addresses() {
    let mut srv = Server::start();
    let sess = srv.connect();
    let first = call(&sess, "device_api.cpu", &[]).unwrap();
    let h = match first.as_slice() {
        [WireValue::Int(c), WireValue::Handle(h)] if *c == tc::OPAQUE_HANDLE as i64 => *h,
        other => panic!("device_api.cpu replied {other:?}"),
    };
    // Table numbers count from 1 in a fresh session; any address of a process is far above.
    assert!(h > 0 && h < 1 << 16, "a real address came back: {h:#x}");
    assert_eq!(call(&sess, "device_api.cpu", &[]).unwrap(), first);
    // A neighbouring number was never handed out.
    let e = call_err(
        &sess,
        "runtime.module.loadbinary_GraphExecutorFactory",
        &[WireValue::Handle(h + 1000)],
    );
    assert!(e.contains("not handed out"), "{e}");
    // Nor is the number taken back where a function would read it as something else.
    let e = call_err(
        &sess,
        "runtime.module.loadbinary_GraphExecutorFactory",
        &[WireValue::Handle(h)],
    );
    assert!(e.contains("its type cannot be checked"), "{e}");
    drop(sess);
    srv.assert_alive();
}

// ---- archives ----

/// One tar member with a hand-written header (hostile names included).
fn member(name: &[u8], kind: u8, link: &[u8], data: &[u8]) -> Vec<u8> {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link);
    if kind == b'3' || kind == b'4' {
        h[329..336].copy_from_slice(b"0000001");
        h[337..344].copy_from_slice(b"0000003");
    }
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| *b as u32).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn archive(members: &[Vec<u8>]) -> Vec<u8> {
    let mut out = members.concat();
    out.extend_from_slice(&[0u8; 1024]);
    out
}

/// Uploads `bytes` as `name` and asks the server to load it; the error message.
fn load_archive(sess: &Arc<ClientSession>, name: &str, bytes: Vec<u8>) -> String {
    call(
        sess,
        "tvm.rpc.server.upload",
        &[s(name), WireValue::Bytes(bytes)],
    )
    .unwrap();
    call_err(sess, "tvm.rpc.server.load_module", &[s(name)])
}

#[test]
fn a_symlink_member_cannot_lead_a_second_archive_outside() {
    let mut srv = Server::start();
    let outside = temp_dir("outside-symlink");
    srv.dirs.push(outside.clone());
    let sess = srv.connect();
    let link = outside.to_str().unwrap().as_bytes();
    let e = load_archive(
        &sess,
        "lib.tar",
        archive(&[member(b"link", b'2', link, b"")]),
    );
    assert!(e.contains("'link'") && e.contains("symbolic link"), "{e}");
    let _ = load_archive(
        &sess,
        "lib.tar",
        archive(&[member(b"link/pwned.o", b'0', b"", b"pwned")]),
    );
    assert!(
        !outside.join("pwned.o").exists(),
        "the second archive wrote outside the work directory"
    );
    drop(sess);
    srv.assert_alive();
}

#[test]
fn a_hard_link_member_cannot_read_a_server_file() {
    let mut srv = Server::start();
    let outside = temp_dir("outside-hardlink");
    srv.dirs.push(outside.clone());
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, b"top secret").unwrap();
    let sess = srv.connect();
    let e = load_archive(
        &sess,
        "lib.tar",
        archive(&[member(
            b"pw",
            b'1',
            secret.to_str().unwrap().as_bytes(),
            b"",
        )]),
    );
    assert!(e.contains("'pw'") && e.contains("hard link"), "{e}");
    if let Ok(v) = call(&sess, "tvm.rpc.server.download", &[s("lib.objs/pw")]) {
        panic!("the hard link was served: {v:?}");
    }
    drop(sess);
    srv.assert_alive();
}

#[test]
fn fifo_and_device_members_are_refused() {
    let mut srv = Server::start();
    let sess = srv.connect();
    let dir = work_dir(&sess);
    for (name, kind, why) in [
        ("pipe", b'6', "FIFO"),
        ("tty", b'3', "character device"),
        ("disk", b'4', "block device"),
    ] {
        let e = load_archive(
            &sess,
            "lib.tar",
            archive(&[member(name.as_bytes(), kind, b"", b"")]),
        );
        assert!(e.contains(&format!("'{name}'")) && e.contains(why), "{e}");
        if let Ok(m) = std::fs::symlink_metadata(dir.join("lib.objs").join(name)) {
            panic!("{name} was created: {m:?}");
        }
    }
    drop(sess);
    srv.assert_alive();
}

#[test]
fn absolute_and_dotdot_members_are_refused() {
    let mut srv = Server::start();
    let outside = temp_dir("outside-abs");
    srv.dirs.push(outside.clone());
    let sess = srv.connect();
    let dir = work_dir(&sess);
    let abs = outside.join("abs.o");
    let e = load_archive(
        &sess,
        "lib.tar",
        archive(&[member(abs.to_str().unwrap().as_bytes(), b'0', b"", b"x")]),
    );
    assert!(e.contains("absolute"), "{e}");
    assert!(!abs.exists());
    let e = load_archive(
        &sess,
        "lib.tar",
        archive(&[member(b"../up.o", b'0', b"", b"x")]),
    );
    assert!(e.contains("'../up.o'") && e.contains("'..'"), "{e}");
    assert!(!dir.join("up.o").exists());
    drop(sess);
    srv.assert_alive();
}

// ---- path globals ----

#[test]
fn path_globals_are_confined_to_the_work_directory() {
    let mut srv = Server::start();
    let outside = temp_dir("outside-paths");
    srv.dirs.push(outside.clone());
    std::fs::write(outside.join("secret.bin"), [0u8; 64]).unwrap();
    let sess = srv.connect();
    let dir = work_dir(&sess);
    std::os::unix::fs::symlink(&outside, dir.join("esc")).unwrap();
    let map = object(&call(&sess, "runtime.Map", &[]).unwrap());
    let syslib = object(&call(&sess, "runtime.SystemLib", &[]).unwrap());
    let secret = p(&outside.join("secret.bin"));

    // Writers: nothing appears outside.
    for (target, file) in [
        (p(&outside.join("w.params")), outside.join("w.params")),
        (s("../w2.params"), dir.parent().unwrap().join("w2.params")),
        (s("esc/w3.params"), outside.join("w3.params")),
    ] {
        let e = call_err(&sess, "runtime.SaveParamsToFile", &[map.clone(), target]);
        assert!(e.contains("refused path"), "{e}");
        assert!(!file.exists(), "{file:?} was written");
    }
    let e = call_err(
        &sess,
        "runtime.ModuleSaveToFile",
        &[syslib, p(&outside.join("m.so")), s("so")],
    );
    assert!(e.contains("refused path"), "{e}");
    assert!(!outside.join("m.so").exists());

    // Readers and loaders: refused before the file is opened.
    let cases: Vec<(&str, Vec<WireValue>)> = vec![
        ("runtime.LoadParamsFromFile", vec![secret.clone()]),
        ("runtime.LoadParamsFromFile", vec![s("esc/secret.bin")]),
        ("runtime.ModuleLoadFromFile", vec![secret.clone(), s("so")]),
        ("runtime.ModuleLoadFromFile", vec![s("../x.so"), s("so")]),
        ("runtime.module.loadfile_so", vec![secret.clone()]),
        ("relax.ExecutableLoadFromFile", vec![secret.clone()]),
        (
            "runtime.module.loadfile_relax.VMExecutable",
            vec![secret.clone()],
        ),
        ("runtime.LoadDevicePlugin", vec![secret.clone()]),
        (
            "vm.builtin.ndarray_cache.load",
            vec![p(&outside), int(1), int(0)],
        ),
        (
            "vm.builtin.tensor_cache.load",
            vec![s("esc"), int(1), int(0)],
        ),
    ];
    for (name, args) in cases {
        let e = call_err(&sess, name, &args);
        assert!(e.contains("refused path"), "{name}: {e}");
    }

    // Inside the work directory, relative names are taken from it.
    call(&sess, "runtime.SaveParamsToFile", &[map, s("ok.params")]).unwrap();
    assert!(dir.join("ok.params").is_file());
    call(&sess, "runtime.LoadParamsFromFile", &[s("ok.params")]).unwrap();
    drop(sess);
    srv.assert_alive();
}

#[test]
fn load_errors_do_not_show_file_contents() {
    let mut srv = Server::start();
    let sess = srv.connect();
    let dir = work_dir(&sess);
    let secret = b"SECRETSEpassword1234567890abcdefghijklmnopqrstuvwxyz".repeat(4);
    call(
        &sess,
        "tvm.rpc.server.upload",
        &[s("secret.bin"), WireValue::Bytes(secret.clone())],
    )
    .unwrap();
    // The first eight bytes as the little-endian word a magic-number check reads.
    let word = format!("{:x}", u64::from_le_bytes(secret[..8].try_into().unwrap()));
    let abs = p(&dir.join("secret.bin"));
    for (name, args) in [
        ("runtime.LoadParamsFromFile", vec![abs.clone()]),
        ("relax.ExecutableLoadFromFile", vec![abs.clone()]),
        ("runtime.ModuleLoadFromFile", vec![abs.clone(), s("so")]),
        (
            "runtime.module.loadfile_relax.VMExecutable",
            vec![abs.clone()],
        ),
    ] {
        let e = call_err(&sess, name, &args);
        let low = e.to_lowercase();
        assert!(
            !e.contains("SECRET") && !e.contains("password") && !low.contains(&word),
            "{name} showed the file's bytes: {e}"
        );
    }
    drop(sess);
    srv.assert_alive();
}
