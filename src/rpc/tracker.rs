//! The tracker client: registers a server with TVM's tracker (`python -m tvm.exec.rpc_tracker`)
//! so that clients can request it by key. Messages are `i32 len` + JSON after a magic exchange.

use crate::packed_func::error::{Error, Result};
use crate::packed_func::json::{self, object, Value};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Magic of the tracker handshake.
pub const TRACKER_MAGIC: i32 = 0x2F271;
/// Largest tracker message accepted.
const MAX_MESSAGE: i32 = 1 << 20;

/// Tracker request codes.
pub mod code {
    #![allow(missing_docs)]
    pub const FAIL: i64 = -1;
    pub const SUCCESS: i64 = 0;
    pub const PING: i64 = 1;
    pub const STOP: i64 = 2;
    pub const PUT: i64 = 3;
    pub const REQUEST: i64 = 4;
    pub const UPDATE_INFO: i64 = 5;
    pub const SUMMARY: i64 = 6;
    pub const GET_PENDING_MATCHKEYS: i64 = 7;
}

/// A connection to the tracker.
pub struct TrackerConn {
    stream: TcpStream,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::tvm_fmt(format_args!("tracker: {what}: {e}"))
}

impl TrackerConn {
    /// Connects and exchanges the magic, retrying until `patience` runs out.
    pub fn connect(addr: &str, patience: Duration) -> Result<TrackerConn> {
        let deadline = Instant::now() + patience;
        // Bounded by the deadline.
        loop {
            match Self::try_connect(addr) {
                Ok(c) => return Ok(c),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }

    fn try_connect(addr: &str) -> Result<TrackerConn> {
        let sa = addr
            .to_socket_addrs()
            .map_err(io("resolve"))?
            .next()
            .ok_or_else(|| Error::value_fmt(format_args!("tracker: cannot resolve {addr}")))?;
        let mut stream =
            TcpStream::connect_timeout(&sa, Duration::from_secs(10)).map_err(io("connect"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(io("socket"))?;
        let _ = stream.set_nodelay(true);
        stream
            .write_all(&TRACKER_MAGIC.to_le_bytes())
            .map_err(io("send magic"))?;
        let mut b = [0u8; 4];
        stream.read_exact(&mut b).map_err(io("read magic"))?;
        if i32::from_le_bytes(b) != TRACKER_MAGIC {
            return Err(Error::value_fmt(format_args!(
                "tracker: {addr} is not an RPC tracker"
            )));
        }
        Ok(TrackerConn { stream })
    }

    /// Sends one message and reads its reply.
    pub fn call(&mut self, msg: &Value) -> Result<Value> {
        let data = msg.to_string().into_bytes();
        let mut out = (data.len() as i32).to_le_bytes().to_vec();
        out.extend_from_slice(&data);
        self.stream.write_all(&out).map_err(io("send"))?;
        let mut b = [0u8; 4];
        self.stream.read_exact(&mut b).map_err(io("receive"))?;
        let n = i32::from_le_bytes(b);
        if !(0..=MAX_MESSAGE).contains(&n) {
            return Err(Error::value_fmt(format_args!(
                "tracker: bad message length {n}"
            )));
        }
        let mut buf = vec![0u8; n as usize];
        self.stream.read_exact(&mut buf).map_err(io("receive"))?;
        json::parse_bytes(&buf)
            .map_err(|e| Error::value_fmt(format_args!("tracker: bad JSON: {e}")))
    }

    fn expect_success(&mut self, msg: &Value) -> Result<()> {
        let r = self.call(msg)?;
        if r.as_i64() != Some(code::SUCCESS) {
            return Err(Error::tvm_fmt(format_args!(
                "tracker refused {msg}: replied {r}"
            )));
        }
        Ok(())
    }
}

/// A server's registration with the tracker.
pub struct Registration {
    addr: String,
    key: String,
    port: u16,
    custom_addr: Option<String>,
    conn: Option<TrackerConn>,
    matchkey: String,
    missing_since: Option<Instant>,
}

fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{:.16}", (h.finish() >> 11) as f64 / (1u64 << 53) as f64)
}

impl Registration {
    /// Registers server `key` listening on `port` (reachable at `custom_addr`, or at the
    /// address the tracker sees).
    pub fn new(addr: &str, key: &str, port: u16, custom_addr: Option<String>) -> Result<Self> {
        let mut r = Registration {
            addr: addr.to_string(),
            key: key.to_string(),
            port,
            custom_addr,
            conn: None,
            matchkey: String::new(),
            missing_since: None,
        };
        r.connect(Duration::from_secs(60))?;
        r.put()?;
        Ok(r)
    }

    /// The address the server is reachable at, `null` for the one the tracker sees.
    fn custom_addr_value(&self) -> Value {
        self.custom_addr.as_deref().map_or(Value::Null, Value::from)
    }

    /// The match key a client must present now.
    pub fn matchkey(&self) -> &str {
        &self.matchkey
    }

    fn connect(&mut self, patience: Duration) -> Result<()> {
        let mut c = TrackerConn::connect(&self.addr, patience)?;
        c.expect_success(&Value::Array(vec![
            code::UPDATE_INFO.into(),
            object(vec![
                ("key", format!("server:{}", self.key).into()),
                (
                    "addr",
                    Value::Array(vec![self.custom_addr_value(), self.port.into()]),
                ),
            ]),
        ]))?;
        self.conn = Some(c);
        Ok(())
    }

    fn with_conn<T>(&mut self, f: impl Fn(&mut TrackerConn) -> Result<T>) -> Result<T> {
        if let Some(c) = self.conn.as_mut() {
            match f(c) {
                Ok(v) => return Ok(v),
                Err(_) => self.conn = None,
            }
        }
        self.connect(Duration::from_secs(5))?;
        f(self.conn.as_mut().expect("connected"))
    }

    /// Offers this server again under a fresh match key (after each session).
    pub fn put(&mut self) -> Result<()> {
        self.matchkey = format!("{}:{}", self.key, random_suffix());
        self.missing_since = None;
        let msg = Value::Array(vec![
            code::PUT.into(),
            self.key.as_str().into(),
            Value::Array(vec![self.port.into(), self.matchkey.as_str().into()]),
            self.custom_addr_value(),
        ]);
        let r = self.with_conn(|c| c.expect_success(&msg));
        if r.is_err() {
            // The tracker may have restarted: register from scratch.
            self.conn = None;
            self.connect(Duration::from_secs(5))?;
            return self.with_conn(|c| c.expect_success(&msg));
        }
        r
    }

    /// Called while idle: if the tracker handed our key to a client that never came, offer
    /// the server again after a grace period.
    pub fn check_pending(&mut self) -> Result<()> {
        let pending =
            self.with_conn(|c| c.call(&Value::Array(vec![code::GET_PENDING_MATCHKEYS.into()])))?;
        let listed = pending
            .as_array()
            .is_some_and(|a| a.iter().any(|k| k.as_str() == Some(self.matchkey.as_str())));
        if listed {
            self.missing_since = None;
            return Ok(());
        }
        let since = *self.missing_since.get_or_insert_with(Instant::now);
        if since.elapsed() > Duration::from_secs(6) {
            self.put()?;
        }
        Ok(())
    }
}
