//! The RPC endpoint: one implementation used by both sides. It owns a byte channel, reads and
//! writes packets, and serves the requests that arrive (through a [`LocalSession`], or by
//! relaying them to the next hop). The client side sends requests through the same endpoint and
//! waits for their replies, serving nested requests meanwhile.

use super::codec::{self, code, Reader, WireValue, Writer};
use super::local::LocalSession;
use crate::packed_func::error::{Error, ErrorKind, Result};
use crate::packed_func::function::Function;
use crate::packed_func::value::{ArgValue, RetValue};
use std::io::{Read, Write};
use std::sync::Arc;

/// A reliable byte stream between two peers.
pub trait Channel: Send {
    /// Sends all of `data`.
    fn send(&mut self, data: &[u8]) -> std::io::Result<()>;
    /// Receives up to `buf.len()` bytes; 0 means the peer closed the stream.
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
    /// Closes the stream (best effort).
    fn close(&mut self) {}
}

impl Channel for std::net::TcpStream {
    fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write_all(data)
    }
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
    fn close(&mut self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

/// A socket with a read buffer: a packet's length, code and small body come in one system call.
pub struct BufferedStream {
    reader: std::io::BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
}

impl BufferedStream {
    /// Wraps a connected socket.
    pub fn new(s: std::net::TcpStream) -> std::io::Result<Self> {
        let _ = s.set_nodelay(true);
        Ok(BufferedStream {
            writer: s.try_clone()?,
            reader: std::io::BufReader::with_capacity(64 << 10, s),
        })
    }
}

impl Channel for BufferedStream {
    fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(data)
    }
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.reader.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
    fn close(&mut self) {
        let _ = self.writer.shutdown(std::net::Shutdown::Both);
    }
}

/// A channel over two PackedFuncs: `fsend(bytes) -> int` (bytes sent) and
/// `frecv(size) -> bytes` (what `rpc.ServerLoop(fsend, frecv)` gets).
pub struct CallbackChannel {
    fsend: Function,
    frecv: Function,
}

impl CallbackChannel {
    /// Wraps the two functions.
    pub fn new(fsend: Function, frecv: Function) -> Self {
        CallbackChannel { fsend, frecv }
    }
}

fn io_err(e: Error) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Channel for CallbackChannel {
    fn send(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        // Bounded: every round must make progress.
        while !data.is_empty() {
            let n = self
                .fsend
                .call(&[ArgValue::Bytes(data)])
                .map_err(io_err)?
                .as_i64()
                .map_err(io_err)?;
            if n <= 0 || n as usize > data.len() {
                return Err(std::io::Error::other(format!(
                    "fsend returned {n} for {} bytes",
                    data.len()
                )));
            }
            data = &data[n as usize..];
        }
        Ok(())
    }
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let r = self
            .frecv
            .call(&[ArgValue::Int(buf.len() as i64)])
            .map_err(io_err)?;
        match r {
            RetValue::Bytes(b) => {
                if b.len() > buf.len() {
                    return Err(std::io::Error::other(
                        "frecv returned more bytes than asked",
                    ));
                }
                buf[..b.len()].copy_from_slice(&b);
                Ok(b.len())
            }
            other => Err(std::io::Error::other(format!(
                "frecv must return bytes, got {other:?}"
            ))),
        }
    }
}

/// What serves the requests that arrive on an endpoint.
pub enum Serving {
    /// This process, through a handle table.
    Local(LocalSession),
    /// The next hop: requests are relayed unchanged (multi-hop sessions).
    Relay(Arc<super::client::ClientSession>),
}

/// What handling one request asks the loop to do next.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep serving.
    Continue,
    /// The peer asked to stop (or the session cannot go on).
    Stop,
}

/// One side of an RPC connection.
pub struct Endpoint {
    chan: Box<dyn Channel>,
    /// Largest packet accepted (bytes after the length field).
    pub max_packet: u64,
    serving: Option<Serving>,
    body: Vec<u8>,
}

/// Outcome of reading one packet header.
pub enum Header {
    /// A packet: its code and body length.
    Packet(i32, u64),
    /// The peer closed the stream at a packet boundary.
    Eof,
}

impl Endpoint {
    /// An endpoint over `chan` that serves incoming requests with `serving`.
    pub fn new(chan: Box<dyn Channel>, serving: Option<Serving>) -> Self {
        Endpoint {
            chan,
            max_packet: codec::DEFAULT_MAX_PACKET,
            serving,
            body: Vec::new(),
        }
    }

    /// Sends raw bytes.
    pub fn send(&mut self, data: &[u8]) -> Result<()> {
        self.chan
            .send(data)
            .map_err(|e| Error::tvm_fmt(format_args!("RPC: send failed: {e}")))
    }

    /// Reads exactly `buf.len()` bytes; EOF in between is an error naming `what`.
    pub fn recv_exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let n = self.chan.recv(&mut buf[got..]).map_err(|e| {
                Error::tvm_fmt(format_args!(
                    "RPC: receive failed while reading {what}: {e}"
                ))
            })?;
            if n == 0 {
                return Err(Error::tvm_fmt(format_args!(
                    "RPC: the peer closed the connection in the middle of {what} ({got} of {} \
                     bytes read)",
                    buf.len()
                )));
            }
            got += n;
        }
        Ok(())
    }

    /// Reads the next packet header, skipping keep-alive packets.
    pub fn read_header(&mut self) -> Result<Header> {
        loop {
            let mut len = [0u8; 8];
            let n = self
                .chan
                .recv(&mut len)
                .map_err(|e| Error::tvm_fmt(format_args!("RPC: receive failed: {e}")))?;
            if n == 0 {
                return Ok(Header::Eof);
            }
            if n < 8 {
                self.recv_exact(&mut len[n..], "a packet length")?;
            }
            let nbytes = u64::from_le_bytes(len);
            if nbytes == 0 {
                continue;
            }
            if nbytes < 4 {
                return Err(Error::value_fmt(format_args!(
                    "RPC: packet of {nbytes} bytes is too short to hold a code"
                )));
            }
            if nbytes > self.max_packet {
                return Err(Error::value_fmt(format_args!(
                    "RPC: packet of {nbytes} bytes exceeds the limit of {} bytes",
                    self.max_packet
                )));
            }
            let mut c = [0u8; 4];
            self.recv_exact(&mut c, "a packet code")?;
            return Ok(Header::Packet(i32::from_le_bytes(c), nbytes - 4));
        }
    }

    /// Reads `n` bytes into `out` (cleared first), growing it as the bytes arrive: a length
    /// announced by the peer never allocates (or zero-fills) more than twice what it has sent,
    /// plus one step.
    pub fn recv_growing(&mut self, out: &mut Vec<u8>, n: u64, what: &str) -> Result<()> {
        const STEP: usize = 1 << 20;
        let n = usize::try_from(n)
            .map_err(|_| Error::value_fmt(format_args!("RPC: {what} of {n} bytes is too large")))?;
        out.clear();
        // Bounded: every round fills at least one more byte or fails.
        while out.len() < n {
            let start = out.len();
            let grow = (n - start).min(start.max(STEP));
            out.resize(start + grow, 0);
            self.recv_exact(&mut out[start..], what)?;
        }
        Ok(())
    }

    /// Reads a body of `n` bytes into the endpoint's buffer.
    fn read_body(&mut self, n: u64) -> Result<()> {
        let mut body = std::mem::take(&mut self.body);
        let r = self.recv_growing(&mut body, n, "a packet body");
        self.body = body;
        r
    }

    /// Gives back a buffer that a large packet left behind.
    fn trim_body(&mut self) {
        const KEEP: usize = 4 << 20;
        if self.body.capacity() > KEEP {
            self.body = Vec::new();
        }
    }

    /// Serves requests until the peer shuts down or closes at a packet boundary.
    pub fn serve(&mut self) -> Result<()> {
        loop {
            match self.read_header()? {
                Header::Eof => return Ok(()),
                Header::Packet(c, n) => {
                    self.read_body(n)?;
                    if self.dispatch_request(c, n as usize)? == Flow::Stop {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Handles one request whose body is in the buffer.
    fn dispatch_request(&mut self, c: i32, n: usize) -> Result<Flow> {
        let body = std::mem::take(&mut self.body);
        let r = handle_request(
            &mut self.serving,
            &mut *self.chan,
            c,
            &body[..n],
            self.max_packet,
        );
        self.body = body;
        self.trim_body();
        r
    }

    /// Sends a request packet and waits for its reply: the reply's packed sequence, or the
    /// remote exception as an error. Requests from the peer that arrive meanwhile are served.
    pub fn request(&mut self, packet: &[u8]) -> Result<Vec<WireValue>> {
        self.send(packet)?;
        self.wait_return(None)
    }

    /// Waits for `kReturn` (or `kCopyAck` into `ack`).
    pub fn wait_return(&mut self, mut ack: Option<&mut [u8]>) -> Result<Vec<WireValue>> {
        // Bounded by the peer: every round consumes one packet.
        loop {
            let (c, n) = match self.read_header()? {
                Header::Eof => {
                    return Err(Error::tvm(
                        "RPCError: the RPC session ended: the server closed the connection",
                    )
                    .with_kind(ErrorKind::Verbatim))
                }
                Header::Packet(c, n) => (c, n),
            };
            match c {
                code::COPY_ACK => {
                    let Some(dst) = ack.take() else {
                        return Err(Error::value("RPC: unexpected kCopyAck packet"));
                    };
                    if n != dst.len() as u64 {
                        return Err(Error::value_fmt(format_args!(
                            "RPC: kCopyAck carries {n} bytes, {} were asked for",
                            dst.len()
                        )));
                    }
                    self.recv_exact(dst, "copied data")?;
                    return Ok(Vec::new());
                }
                code::RETURN => {
                    self.read_body(n)?;
                    let v = Reader::new(&self.body[..n as usize]).seq();
                    self.trim_body();
                    return v;
                }
                code::EXCEPTION => {
                    self.read_body(n)?;
                    let v = Reader::new(&self.body[..n as usize]).seq()?;
                    let msg = match v.first() {
                        Some(WireValue::Str(s)) => String::from_utf8_lossy(s).into_owned(),
                        _ => "(the peer sent an exception without a message)".into(),
                    };
                    return Err(remote_error(&msg));
                }
                code::SHUTDOWN => {
                    return Err(Error::new(
                        ErrorKind::Verbatim,
                        "RPCError: the RPC session ended: the peer shut it down",
                    ))
                }
                _ => {
                    self.read_body(n)?;
                    if self.dispatch_request(c, n as usize)? == Flow::Stop {
                        return Err(Error::new(
                            ErrorKind::Verbatim,
                            "RPCError: the RPC session ended while waiting for a reply",
                        ));
                    }
                }
            }
        }
    }

    /// Sends `kShutdown` and closes the channel.
    pub fn shutdown(&mut self) {
        let mut w = Writer::packet(code::SHUTDOWN);
        w.buf.truncate(12);
        let _ = self.chan.send(&w.finish());
        self.chan.close();
    }

    /// Closes the channel without a shutdown packet.
    pub fn close(&mut self) {
        self.chan.close();
    }
}

trait WithKind {
    fn with_kind(self, k: ErrorKind) -> Self;
}

impl WithKind for Error {
    fn with_kind(mut self, k: ErrorKind) -> Self {
        self.kind = k;
        self
    }
}

/// The error a received exception becomes (first line `RPCError: ...` unless it is a timeout).
pub fn remote_error(msg: &str) -> Error {
    if msg.starts_with("RPCSessionTimeoutError: ") {
        Error::new(ErrorKind::Verbatim, msg)
    } else {
        Error::new(
            ErrorKind::Verbatim,
            format!("RPCError: Error caught from RPC call:\n{msg}"),
        )
    }
}

/// Handles one request packet: replies on `chan`. Errors returned here end the session;
/// errors of the request itself go back to the peer as `kException`.
pub fn handle_request(
    serving: &mut Option<Serving>,
    chan: &mut dyn Channel,
    c: i32,
    body: &[u8],
    max_packet: u64,
) -> Result<Flow> {
    let send = |chan: &mut dyn Channel, p: &[u8]| {
        chan.send(p)
            .map_err(|e| Error::tvm_fmt(format_args!("RPC: send failed: {e}")))
    };
    match c {
        code::SHUTDOWN => return Ok(Flow::Stop),
        code::INIT_SERVER => {
            let r = init_server(serving, body, max_packet);
            let p = match r {
                Ok(()) => codec::void_return(),
                Err(e) => codec::exception_packet(&e.to_string()),
            };
            send(chan, &p)?;
            return Ok(Flow::Continue);
        }
        code::RETURN | code::EXCEPTION | code::COPY_ACK => {
            return Err(Error::value_fmt(format_args!(
                "RPC: unexpected {} packet while no request is pending",
                code::name(c)
            )))
        }
        _ => {}
    }
    let known = (code::CALL_FUNC..=code::DEV_GET_CURRENT_STREAM).contains(&c);
    if !known {
        let msg = format!("RPC: unknown RPC code {c}; ending the session");
        let _ = send(chan, &codec::exception_packet(&msg));
        return Err(Error::value(msg));
    }
    if serving.is_none() {
        *serving = Some(Serving::Local(LocalSession::new()));
    }
    match serving.as_mut().expect("set above") {
        Serving::Local(s) => {
            let caught =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.handle(c, body, chan)));
            match caught {
                Ok(Ok(())) => Ok(Flow::Continue),
                Ok(Err(e)) => {
                    if e.message.starts_with("RPC: send failed") {
                        return Err(e);
                    }
                    send(chan, &codec::exception_packet(&e.to_string()))?;
                    Ok(Flow::Continue)
                }
                Err(_) => {
                    send(
                        chan,
                        &codec::exception_packet("InternalError: the RPC handler panicked"),
                    )?;
                    Ok(Flow::Continue)
                }
            }
        }
        Serving::Relay(next) => {
            let reply = next.relay(c, body);
            match reply {
                Ok(p) => send(chan, &p)?,
                Err(e) => send(chan, &codec::exception_packet(&e.to_string()))?,
            }
            Ok(Flow::Continue)
        }
    }
}

fn init_server(serving: &mut Option<Serving>, body: &[u8], _max_packet: u64) -> Result<()> {
    let mut r = Reader::new(body);
    let ver = r.blob("the protocol version")?;
    if ver != codec::PROTOCOL_VERSION.as_bytes() {
        return Err(Error::value_fmt(format_args!(
            "RPC: protocol version mismatch: the peer speaks '{}', this server speaks '{}'",
            String::from_utf8_lossy(&ver),
            codec::PROTOCOL_VERSION
        )));
    }
    let args = r.seq()?;
    if args.is_empty() {
        *serving = Some(Serving::Local(LocalSession::new()));
        return Ok(());
    }
    let name = match &args[0] {
        WireValue::Str(s) => String::from_utf8_lossy(s).into_owned(),
        v => {
            return Err(Error::type_error_fmt(format_args!(
                "RPC: the session constructor name must be a string, got {}",
                v.kind()
            )))
        }
    };
    if name == "rpc.LocalSession" {
        *serving = Some(Serving::Local(LocalSession::new()));
        return Ok(());
    }
    let f = crate::packed_func::registry::get(&name).ok_or_else(|| {
        Error::attribute_fmt(format_args!(
            "RPC: session constructor '{name}' is not a registered global function"
        ))
    })?;
    let mut local = LocalSession::new();
    let m = local.call_plain(&f, &args[1..])?;
    let module = crate::module::Module::from_object(m.into_object().map_err(|_| {
        Error::type_error_fmt(format_args!(
            "RPC: session constructor '{name}' must return an rpc Module"
        ))
    })?)?;
    let node = module
        .node()
        .as_any()
        .downcast_ref::<super::client::RpcModuleNode>()
        .ok_or_else(|| {
            Error::type_error_fmt(format_args!(
                "RPC: session constructor '{name}' returned a {} module, not an rpc one",
                module.type_key()
            ))
        })?;
    *serving = Some(match node.session().as_local() {
        true => Serving::Local(LocalSession::new()),
        false => Serving::Relay(node.session().clone()),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends a few bytes, then ends.
    struct Trickle(usize);

    impl Channel for Trickle {
        fn send(&mut self, _data: &[u8]) -> std::io::Result<()> {
            Ok(())
        }
        fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.0);
            self.0 -= n;
            buf[..n].fill(7);
            Ok(n)
        }
    }

    #[test]
    fn a_body_buffer_grows_only_with_its_bytes() {
        let mut ep = Endpoint::new(Box::new(Trickle(3 << 20)), None);
        let mut out = Vec::new();
        let e = ep.recv_growing(&mut out, 1 << 30, "a body").unwrap_err();
        assert!(e.message.contains("in the middle of a body"), "{e}");
        // 3 MiB arrived: the buffer never went past twice that.
        assert!(out.capacity() <= 8 << 20, "{}", out.capacity());
        let mut ep = Endpoint::new(Box::new(Trickle(5)), None);
        ep.recv_growing(&mut out, 5, "a body").unwrap();
        assert_eq!(out, [7; 5]);
    }
}
