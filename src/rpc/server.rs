//! Serving inside the library: `rpc.ServerLoop`, `rpc.ReturnException`, the event-driven server
//! and the server environment (`tvm.rpc.server.*`).

use super::codec;
use super::endpoint::{
    handle_request, BufferedStream, CallbackChannel, Channel, Endpoint, Flow, Serving,
};
use super::local::LocalSession;
use crate::module::Module;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry::{self, Registrar};
use crate::packed_func::value::{ArgValue, RetValue};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// The packet limit of the session served last in this process, which
/// `tvm.rpc.server.GetCRTMaxPacketSize` reports so that clients split copies under it.
static SERVED_MAX_PACKET: AtomicU64 = AtomicU64::new(codec::DEFAULT_MAX_PACKET);

/// Serves one session on a connected socket until shutdown or EOF; calls the optional globals
/// `tvm.rpc.server.start` / `tvm.rpc.server.shutdown` around it.
pub fn serve_channel(chan: Box<dyn Channel>, max_packet: u64) -> Result<()> {
    SERVED_MAX_PACKET.store(max_packet, Ordering::Relaxed);
    if let Some(f) = registry::get("tvm.rpc.server.start") {
        f.call(&[])?;
    }
    let mut ep = Endpoint::new(chan, Some(Serving::Local(LocalSession::new())));
    ep.max_packet = max_packet;
    let r = ep.serve();
    ep.close();
    drop(ep);
    if let Some(f) = registry::get("tvm.rpc.server.shutdown") {
        f.call(&[])?;
    }
    r
}

fn fd_arg(v: i64) -> Result<i32> {
    i32::try_from(v)
        .ok()
        .filter(|fd| *fd >= 0)
        .ok_or_else(|| Error::value_fmt(format_args!("bad socket descriptor {v}")))
}

/// Writes all of `data` to a borrowed descriptor.
fn write_fd(fd: i32, mut data: &[u8]) -> Result<()> {
    // Bounded: every round writes at least one byte or fails.
    while !data.is_empty() {
        // SAFETY: `data` is a valid buffer of its length; `fd` is the caller's descriptor.
        let n = unsafe { libc::write(fd, data.as_ptr() as *const libc::c_void, data.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::tvm_fmt(format_args!(
                "rpc.ReturnException: write failed: {e}"
            )));
        }
        if n == 0 {
            return Err(Error::tvm("rpc.ReturnException: write made no progress"));
        }
        data = &data[n as usize..];
    }
    Ok(())
}

/// An event-driven server: bytes are pushed in, replies go out through a callback.
pub struct EventServer {
    buf: Vec<u8>,
    need_init_header: bool,
    serving: Option<Serving>,
    max_packet: u64,
    done: bool,
}

struct CollectChannel(Vec<u8>);

impl Channel for CollectChannel {
    fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }
    fn recv(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(0)
    }
}

impl EventServer {
    /// A server; with `init_header` the stream starts with `i32 len` + the peer's key.
    pub fn new(init_header: bool) -> Self {
        EventServer {
            buf: Vec::new(),
            need_init_header: init_header,
            serving: Some(Serving::Local(LocalSession::new())),
            max_packet: codec::DEFAULT_MAX_PACKET,
            done: false,
        }
    }

    /// Consumes bytes; complete packets are served and their replies passed to `out`.
    /// Returns `Flow::Stop` once the peer shut the session down.
    pub fn feed(&mut self, data: &[u8], out: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<Flow> {
        if self.done {
            return Ok(Flow::Stop);
        }
        self.buf.extend_from_slice(data);
        let mut pos = 0;
        let mut flow = Flow::Continue;
        // Bounded: each round consumes a whole packet or stops.
        loop {
            let rest = &self.buf[pos..];
            if self.need_init_header {
                if rest.len() < 4 {
                    break;
                }
                let n = i32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
                if !(0..=4096).contains(&n) {
                    self.done = true;
                    return Err(Error::value_fmt(format_args!(
                        "RPC: bad init header length {n}"
                    )));
                }
                if rest.len() < 4 + n as usize {
                    break;
                }
                pos += 4 + n as usize;
                self.need_init_header = false;
                continue;
            }
            if rest.len() < 8 {
                break;
            }
            let n = u64::from_le_bytes(rest[..8].try_into().expect("8 bytes"));
            if n == 0 {
                pos += 8;
                continue;
            }
            if !(4..=self.max_packet).contains(&n) {
                self.done = true;
                return Err(Error::value_fmt(format_args!(
                    "RPC: packet of {n} bytes is outside the limits (4..={})",
                    self.max_packet
                )));
            }
            if (rest.len() as u64) < 8 + n {
                break;
            }
            let c = i32::from_le_bytes(rest[8..12].try_into().expect("4 bytes"));
            let body = &rest[12..8 + n as usize];
            let mut ch = CollectChannel(Vec::new());
            let r = handle_request(&mut self.serving, &mut ch, c, body, self.max_packet);
            pos += 8 + n as usize;
            if !ch.0.is_empty() {
                out(&ch.0)?;
            }
            match r {
                Ok(Flow::Continue) => {}
                Ok(Flow::Stop) => {
                    self.done = true;
                    flow = Flow::Stop;
                    break;
                }
                Err(e) => {
                    self.done = true;
                    return Err(e);
                }
            }
        }
        self.buf.drain(..pos);
        Ok(flow)
    }
}

/// Resolves a name in the server's work directory through `tvm.rpc.server.workpath`.
fn workpath(name: &str) -> Result<String> {
    let f = registry::get("tvm.rpc.server.workpath")
        .ok_or_else(|| Error::tvm("the RPC server environment has no tvm.rpc.server.workpath"))?;
    match f.call(&[ArgValue::Str(&cstr(name)?)])? {
        RetValue::Str(s) => Ok(s),
        other => Err(Error::type_error_fmt(format_args!(
            "tvm.rpc.server.workpath returned {other:?}, not a path"
        ))),
    }
}

fn cstr(s: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| Error::value("a name contains a NUL byte"))
}

/// Registers the library's RPC serving globals.
pub(crate) fn register(r: &mut Registrar) {
    r.add("rpc.ServerLoop", |a, _rv| {
        let chan: Box<dyn Channel> = match a.len() {
            1 => {
                let fd = fd_arg(a.i64(0)?)?;
                // SAFETY: the caller hands its connected socket to the loop, which closes it
                // at the end (as the reference does).
                let s = unsafe { std::net::TcpStream::from_raw_fd(fd) };
                Box::new(
                    BufferedStream::new(s)
                        .map_err(|e| Error::tvm_fmt(format_args!("rpc.ServerLoop: {e}")))?,
                )
            }
            2 => {
                let f = |i: usize| -> Result<Function> {
                    Function::from_object(
                        a.object(i)?
                            .ok_or_else(|| {
                                Error::value("rpc.ServerLoop: send/recv functions must not be None")
                            })?
                            .to_ref(),
                    )
                };
                Box::new(CallbackChannel::new(f(0)?, f(1)?))
            }
            n => {
                return Err(Error::value_fmt(format_args!(
                    "rpc.ServerLoop expects (fd) or (fsend, frecv), got {n} arguments"
                )))
            }
        };
        serve_channel(chan, codec::DEFAULT_MAX_PACKET)
    });
    // TVM's clients ask for it before a copy and split copies into packets no larger.
    r.add("tvm.rpc.server.GetCRTMaxPacketSize", |a, rv| {
        a.expect_len(0, "tvm.rpc.server.GetCRTMaxPacketSize")?;
        let n = SERVED_MAX_PACKET.load(Ordering::Relaxed);
        *rv = RetValue::Int(i64::try_from(n).unwrap_or(i64::MAX));
        Ok(())
    });
    r.add("rpc.ReturnException", |a, _rv| {
        a.expect_len(2, "rpc.ReturnException")?;
        let fd = fd_arg(a.i64(0)?)?;
        let msg = a.str(1)?;
        write_fd(fd, &codec::exception_packet(msg))
    });
    r.add("rpc.CreateEventDrivenServer", |a, rv| {
        a.expect_len(3, "rpc.CreateEventDrivenServer")?;
        let fsend = Function::from_object(
            a.object(0)?
                .ok_or_else(|| Error::value("rpc.CreateEventDrivenServer: fsend is None"))?
                .to_ref(),
        )?;
        let init = a.str(2)? == "%toinit";
        let state = std::sync::Mutex::new(EventServer::new(init));
        *rv = RetValue::Object(
            Function::from_rust(move |a, rv| {
                let data: &[u8] = match a.get(0)? {
                    ArgValue::Bytes(b) => b,
                    ArgValue::Null => &[],
                    v => {
                        return Err(Error::type_error_fmt(format_args!(
                            "event server: expected bytes, got {}",
                            v.kind_name()
                        )))
                    }
                };
                let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                let mut send = |b: &[u8]| -> Result<()> {
                    let mut b = b;
                    while !b.is_empty() {
                        let n = fsend.call(&[ArgValue::Bytes(b)])?.as_i64()?;
                        if n <= 0 || n as usize > b.len() {
                            return Err(Error::tvm_fmt(format_args!("fsend returned {n}")));
                        }
                        b = &b[n as usize..];
                    }
                    Ok(())
                };
                let flow = st.feed(data, &mut send)?;
                *rv = RetValue::Int(if flow == Flow::Stop { 0 } else { 1 });
                Ok(())
            })
            .into_object(),
        );
        Ok(())
    });
    r.add("tvm.rpc.server.upload", |a, _rv| {
        a.expect_len(2, "tvm.rpc.server.upload")?;
        let path = workpath(a.str(0)?)?;
        let data = match a.get(1)? {
            ArgValue::Bytes(b) => b,
            v => {
                return Err(Error::type_error_fmt(format_args!(
                    "tvm.rpc.server.upload: expected bytes, got {}",
                    v.kind_name()
                )))
            }
        };
        std::fs::write(&path, data).map_err(|e| {
            Error::tvm_fmt(format_args!(
                "tvm.rpc.server.upload: cannot write {path}: {e}"
            ))
        })
    });
    r.add("tvm.rpc.server.download", |a, rv| {
        a.expect_len(1, "tvm.rpc.server.download")?;
        let path = workpath(a.str(0)?)?;
        *rv = RetValue::Bytes(std::fs::read(&path).map_err(|e| {
            Error::tvm_fmt(format_args!(
                "tvm.rpc.server.download: cannot read {path}: {e}"
            ))
        })?);
        Ok(())
    });
    r.add("tvm.rpc.server.remove", |a, _rv| {
        a.expect_len(1, "tvm.rpc.server.remove")?;
        let path = workpath(a.str(0)?)?;
        let p = std::path::Path::new(&path);
        let r = if p.is_dir() {
            std::fs::remove_dir_all(p)
        } else {
            std::fs::remove_file(p)
        };
        r.map_err(|e| {
            Error::tvm_fmt(format_args!(
                "tvm.rpc.server.remove: cannot remove {path}: {e}"
            ))
        })
    });
    r.add("tvm.rpc.server.ModuleGetFunction", |a, rv| {
        let m = Module::from_object(
            a.object(0)?
                .ok_or_else(|| Error::value("tvm.rpc.server.ModuleGetFunction: module is None"))?
                .to_ref(),
        )?;
        let name = a.str(1)?;
        let query = if a.len() > 2 { a.i64(2)? != 0 } else { true };
        *rv = match m.get_function(name, query)? {
            Some(f) => RetValue::Object(f.into_object()),
            None => RetValue::Null,
        };
        Ok(())
    });
    r.add("tvm.rpc.server.ImportModule", |a, _rv| {
        a.expect_len(2, "tvm.rpc.server.ImportModule")?;
        let m = |i| -> Result<Module> {
            Module::from_object(
                a.object(i)?
                    .ok_or_else(|| Error::value("tvm.rpc.server.ImportModule: module is None"))?
                    .to_ref(),
            )
        };
        m(0)?.import(&m(1)?)
    });
}
