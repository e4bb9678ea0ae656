//! The wire format of TVM's RPC protocol: packet framing, RPC codes and the packed-argument
//! encoding. Everything is little-endian; decoding is bounds-checked and never trusts a length
//! it has not seen bytes for.

use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{type_code as tc, DLDataType, DLDevice};

/// The protocol version both peers must agree on.
pub const PROTOCOL_VERSION: &str = "0.8.0";
/// Magic of the socket handshake (`RPC_MAGIC`).
pub const RPC_MAGIC: i32 = 0xFF271;
/// Handshake reply: the key does not match.
pub const RPC_CODE_MISMATCH: i32 = RPC_MAGIC + 2;
/// Handshake reply: duplicate key (proxy only).
pub const RPC_CODE_DUPLICATE: i32 = RPC_MAGIC + 1;
/// Type index that marks an `RPCObjectRef` on the wire.
pub const RPC_OBJECT_REF_TYPE_INDEX: u32 = 9;
/// Default limit on one packet's size (bytes after the 8-byte length).
pub const DEFAULT_MAX_PACKET: u64 = 1 << 31;
/// Most dimensions a tensor on the wire may have.
pub const MAX_NDIM: i32 = 64;

/// RPC codes (`RPCCode`).
pub mod code {
    #![allow(missing_docs)]
    pub const NONE: i32 = 0;
    pub const SHUTDOWN: i32 = 1;
    pub const INIT_SERVER: i32 = 2;
    pub const CALL_FUNC: i32 = 3;
    pub const RETURN: i32 = 4;
    pub const EXCEPTION: i32 = 5;
    pub const COPY_FROM_REMOTE: i32 = 6;
    pub const COPY_TO_REMOTE: i32 = 7;
    pub const COPY_ACK: i32 = 8;
    pub const GET_GLOBAL_FUNC: i32 = 9;
    pub const FREE_HANDLE: i32 = 10;
    pub const DEV_SET_DEVICE: i32 = 11;
    pub const DEV_GET_ATTR: i32 = 12;
    pub const DEV_ALLOC_DATA: i32 = 13;
    pub const DEV_FREE_DATA: i32 = 14;
    pub const DEV_STREAM_SYNC: i32 = 15;
    pub const COPY_AMONG_REMOTE: i32 = 16;
    pub const DEV_ALLOC_DATA_WITH_SCOPE: i32 = 17;
    pub const DEV_CREATE_STREAM: i32 = 18;
    pub const DEV_FREE_STREAM: i32 = 19;
    pub const DEV_SET_STREAM: i32 = 20;
    pub const DEV_GET_CURRENT_STREAM: i32 = 21;

    /// The code's name, for messages.
    pub fn name(c: i32) -> &'static str {
        const NAMES: [&str; 22] = [
            "kNone",
            "kShutdown",
            "kInitServer",
            "kCallFunc",
            "kReturn",
            "kException",
            "kCopyFromRemote",
            "kCopyToRemote",
            "kCopyAck",
            "kGetGlobalFunc",
            "kFreeHandle",
            "kDevSetDevice",
            "kDevGetAttr",
            "kDevAllocData",
            "kDevFreeData",
            "kDevStreamSync",
            "kCopyAmongRemote",
            "kDevAllocDataWithScope",
            "kDevCreateStream",
            "kDevFreeStream",
            "kDevSetStream",
            "kDevGetCurrentStream",
        ];
        usize::try_from(c)
            .ok()
            .and_then(|i| NAMES.get(i))
            .copied()
            .unwrap_or("unknown")
    }
}

/// Tensor metadata as it travels (tcode 7): `data` is the remote peer's opaque address.
#[derive(Clone, Debug, PartialEq)]
pub struct WireTensor {
    /// Remote data address (an opaque token).
    pub data: u64,
    /// The device, without a session mask.
    pub device: DLDevice,
    /// Element type.
    pub dtype: DLDataType,
    /// Shape.
    pub shape: Vec<i64>,
    /// Byte offset from `data`.
    pub byte_offset: u64,
}

impl WireTensor {
    /// Bytes the tensor spans (compact layout), or an error on overflow or negative dims.
    pub fn nbytes(&self) -> Result<u64> {
        let mut n: u64 = 1;
        for &d in &self.shape {
            let d = u64::try_from(d).map_err(|_| {
                Error::value_fmt(format_args!("RPC: negative dimension {d} in a tensor"))
            })?;
            n = n
                .checked_mul(d)
                .ok_or_else(|| Error::value("RPC: tensor size overflows"))?;
        }
        let bits = self.dtype.bits as u64 * self.dtype.lanes as u64;
        n.checked_mul(bits)
            .map(|b| b.div_ceil(8))
            .ok_or_else(|| Error::value("RPC: tensor size overflows"))
    }
}

/// One value of a packed sequence on the wire.
#[derive(Clone, Debug, PartialEq)]
pub enum WireValue {
    /// tcode 0/1 (and 15 when `bool_code` is false).
    Int(i64),
    /// tcode 2.
    Float(f64),
    /// tcode 15, sent by v0.18+ peers.
    Bool(bool),
    /// tcode 3.
    Handle(u64),
    /// tcode 4.
    Null,
    /// tcode 5.
    DataType(DLDataType),
    /// tcode 6.
    Device(DLDevice),
    /// tcode 7.
    Tensor(WireTensor),
    /// tcode 8: an `RPCObjectRef` handle.
    Object(u64),
    /// tcode 9: a remote module handle (client to server only).
    Module(u64),
    /// tcode 10: a remote function handle (client to server only).
    Func(u64),
    /// tcode 11.
    Str(Vec<u8>),
    /// tcode 12.
    Bytes(Vec<u8>),
}

impl WireValue {
    /// The type code this value goes on the wire with. Bools go as int (what v0.16 reads).
    pub fn tcode(&self) -> i32 {
        match self {
            WireValue::Int(_) | WireValue::Bool(_) => tc::INT,
            WireValue::Float(_) => tc::FLOAT,
            WireValue::Handle(_) => tc::OPAQUE_HANDLE,
            WireValue::Null => tc::NULLPTR,
            WireValue::DataType(_) => tc::DATA_TYPE,
            WireValue::Device(_) => tc::DEVICE,
            WireValue::Tensor(_) => tc::DLTENSOR_HANDLE,
            WireValue::Object(_) => tc::OBJECT_HANDLE,
            WireValue::Module(_) => tc::MODULE_HANDLE,
            WireValue::Func(_) => tc::PACKED_FUNC_HANDLE,
            WireValue::Str(_) => tc::STR,
            WireValue::Bytes(_) => tc::BYTES,
        }
    }

    /// Name of this value's kind, for messages.
    pub fn kind(&self) -> &'static str {
        tc::name(self.tcode())
    }
}

/// Appends little-endian fields to a buffer.
#[derive(Default)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// A writer that starts a packet: room for the 8-byte length, then the code.
    pub fn packet(code: i32) -> Writer {
        let mut w = Writer {
            buf: Vec::with_capacity(64),
        };
        w.u64(0);
        w.i32(code);
        w
    }

    /// Fills in the packet length and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let n = (self.buf.len() - 8) as u64;
        self.buf[..8].copy_from_slice(&n.to_le_bytes());
        self.buf
    }

    /// Writes an i32.
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a u32.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes an i64.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    fn dtype(&mut self, t: DLDataType) {
        self.buf.push(t.code);
        self.buf.push(t.bits);
        self.buf.extend_from_slice(&t.lanes.to_le_bytes());
    }

    fn device(&mut self, d: DLDevice) {
        self.i32(d.device_type);
        self.i32(d.device_id);
    }

    /// Writes tensor metadata (the tcode-7 payload).
    pub fn tensor(&mut self, t: &WireTensor) {
        self.u64(t.data);
        self.device(t.device);
        self.i32(t.shape.len() as i32);
        self.dtype(t.dtype);
        for &d in &t.shape {
            self.i64(d);
        }
        self.u64(t.byte_offset);
    }

    /// Writes a packed sequence.
    pub fn seq(&mut self, values: &[WireValue]) {
        self.i32(values.len() as i32);
        for v in values {
            self.i32(v.tcode());
        }
        for v in values {
            match v {
                WireValue::Int(i) => self.i64(*i),
                WireValue::Bool(b) => self.i64(*b as i64),
                WireValue::Float(f) => self.u64(f.to_bits()),
                WireValue::Handle(h) | WireValue::Module(h) | WireValue::Func(h) => self.u64(*h),
                WireValue::Null => {}
                WireValue::DataType(t) => {
                    self.dtype(*t);
                    self.u32(0);
                }
                WireValue::Device(d) => self.device(*d),
                WireValue::Tensor(t) => self.tensor(t),
                WireValue::Object(h) => {
                    self.u32(RPC_OBJECT_REF_TYPE_INDEX);
                    self.u64(*h);
                }
                WireValue::Str(b) | WireValue::Bytes(b) => {
                    self.u64(b.len() as u64);
                    self.bytes(b);
                }
            }
        }
    }
}

/// Reads little-endian fields from a packet body, checking every length.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn truncated(what: &str) -> Error {
    Error::value_fmt(format_args!("RPC: truncated packet while reading {what}"))
}

impl<'a> Reader<'a> {
    /// Reads from `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The unread rest.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Takes `n` bytes.
    pub fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() as u64 {
            return Err(truncated(what));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads an i32.
    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.arr(what)?))
    }

    /// Reads a u32.
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }

    /// Reads a u64.
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    /// Reads an i64.
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.arr(what)?))
    }

    fn dtype(&mut self) -> Result<DLDataType> {
        let a: [u8; 4] = self.arr("a data type")?;
        Ok(DLDataType::new(
            a[0],
            a[1],
            u16::from_le_bytes([a[2], a[3]]),
        ))
    }

    fn device(&mut self) -> Result<DLDevice> {
        Ok(DLDevice::new(self.i32("a device")?, self.i32("a device")?))
    }

    /// Reads tensor metadata (the tcode-7 payload).
    pub fn tensor(&mut self) -> Result<WireTensor> {
        let data = self.u64("a tensor")?;
        let device = self.device()?;
        let ndim = self.i32("a tensor")?;
        if !(0..=MAX_NDIM).contains(&ndim) {
            return Err(Error::value_fmt(format_args!(
                "RPC: tensor with {ndim} dimensions (allowed 0..={MAX_NDIM})"
            )));
        }
        let dtype = self.dtype()?;
        let mut shape = Vec::with_capacity(ndim as usize);
        for _ in 0..ndim {
            shape.push(self.i64("a tensor shape")?);
        }
        let byte_offset = self.u64("a tensor")?;
        Ok(WireTensor {
            data,
            device,
            dtype,
            shape,
            byte_offset,
        })
    }

    /// Reads a length-prefixed byte string.
    pub fn blob(&mut self, what: &str) -> Result<Vec<u8>> {
        let n = self.u64(what)?;
        Ok(self.take(n, what)?.to_vec())
    }

    /// Reads a packed sequence.
    pub fn seq(&mut self) -> Result<Vec<WireValue>> {
        let n = self.i32("the argument count")?;
        if n < 0 || n as u64 * 4 > self.remaining() as u64 {
            return Err(Error::value_fmt(format_args!(
                "RPC: bad argument count {n} for a packet with {} bytes left",
                self.remaining()
            )));
        }
        let mut codes = Vec::with_capacity(n as usize);
        for _ in 0..n {
            codes.push(self.i32("type codes")?);
        }
        let mut out = Vec::with_capacity(n as usize);
        for (i, &c) in codes.iter().enumerate() {
            let v = match c {
                tc::INT | 1 => WireValue::Int(self.i64("an int")?),
                tc::BOOL => WireValue::Bool(self.i64("a bool")? != 0),
                tc::FLOAT => WireValue::Float(f64::from_bits(self.u64("a float")?)),
                tc::OPAQUE_HANDLE => WireValue::Handle(self.u64("a handle")?),
                tc::NULLPTR => WireValue::Null,
                tc::DATA_TYPE => {
                    let t = self.dtype()?;
                    self.u32("a data type")?;
                    WireValue::DataType(t)
                }
                tc::DEVICE => WireValue::Device(self.device()?),
                tc::DLTENSOR_HANDLE => WireValue::Tensor(self.tensor()?),
                tc::OBJECT_HANDLE => {
                    let idx = self.u32("an object")?;
                    if idx != RPC_OBJECT_REF_TYPE_INDEX {
                        return Err(Error::value_fmt(format_args!(
                            "RPC: argument {i}: object of type index {idx} on the wire (only \
                             RPCObjectRef, index {RPC_OBJECT_REF_TYPE_INDEX}, can travel)"
                        )));
                    }
                    WireValue::Object(self.u64("an object")?)
                }
                tc::MODULE_HANDLE => WireValue::Module(self.u64("a module")?),
                tc::PACKED_FUNC_HANDLE => WireValue::Func(self.u64("a function")?),
                tc::STR => WireValue::Str(self.blob("a string")?),
                tc::BYTES => WireValue::Bytes(self.blob("bytes")?),
                c => {
                    return Err(Error::value_fmt(format_args!(
                        "RPC: argument {i}: type code {c} ({}) cannot travel over RPC",
                        tc::name(c)
                    )))
                }
            };
            out.push(v);
        }
        Ok(out)
    }
}

/// A whole `kReturn` packet with one void value.
pub fn void_return() -> Vec<u8> {
    let mut w = Writer::packet(code::RETURN);
    w.seq(&[WireValue::Null]);
    w.finish()
}

/// A `kException` packet carrying `msg`.
pub fn exception_packet(msg: &str) -> Vec<u8> {
    let mut w = Writer::packet(code::EXCEPTION);
    w.seq(&[WireValue::Str(msg.as_bytes().to_vec())]);
    w.finish()
}

/// A `kReturn` packet holding `values`.
pub fn return_packet(values: &[WireValue]) -> Vec<u8> {
    let mut w = Writer::packet(code::RETURN);
    w.seq(values);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_round_trip_every_code() {
        let vals = vec![
            WireValue::Int(-5),
            WireValue::Float(1.5),
            WireValue::Handle(77),
            WireValue::Null,
            WireValue::DataType(DLDataType::new(2, 32, 1)),
            WireValue::Device(DLDevice::new(1, 3)),
            WireValue::Tensor(WireTensor {
                data: 9,
                device: DLDevice::new(1, 0),
                dtype: DLDataType::new(2, 32, 1),
                shape: vec![2, 3],
                byte_offset: 4,
            }),
            WireValue::Object(11),
            WireValue::Module(12),
            WireValue::Func(13),
            WireValue::Str(b"abc".to_vec()),
            WireValue::Bytes(vec![0, 1, 2]),
        ];
        let mut w = Writer::default();
        w.seq(&vals);
        let back = Reader::new(&w.buf).seq().unwrap();
        assert_eq!(back, vals);
    }

    #[test]
    fn bool_code_is_read_and_sent_as_int() {
        let mut w = Writer::default();
        w.i32(1);
        w.i32(tc::BOOL);
        w.i64(1);
        assert_eq!(
            Reader::new(&w.buf).seq().unwrap(),
            vec![WireValue::Bool(true)]
        );
        let mut w = Writer::default();
        w.seq(&[WireValue::Bool(true)]);
        assert_eq!(&w.buf[4..8], &tc::INT.to_le_bytes());
    }

    #[test]
    fn bad_sequences_are_errors() {
        // Count larger than the bytes that follow.
        let mut w = Writer::default();
        w.i32(1000);
        assert!(Reader::new(&w.buf).seq().is_err());
        // NDArray handles may not travel.
        let mut w = Writer::default();
        w.i32(1);
        w.i32(tc::NDARRAY_HANDLE);
        w.u64(0);
        let e = Reader::new(&w.buf).seq().unwrap_err();
        assert!(e.message.contains("cannot travel"), "{e}");
        // A string longer than the packet.
        let mut w = Writer::default();
        w.i32(1);
        w.i32(tc::STR);
        w.u64(u64::MAX);
        assert!(Reader::new(&w.buf).seq().is_err());
        // Too many dimensions.
        let mut w = Writer::default();
        w.i32(1);
        w.i32(tc::DLTENSOR_HANDLE);
        w.u64(0);
        w.i32(1);
        w.i32(0);
        w.i32(1000);
        assert!(Reader::new(&w.buf).seq().is_err());
    }

    #[test]
    fn void_return_bytes() {
        let p = void_return();
        assert_eq!(u64::from_le_bytes(p[..8].try_into().unwrap()), 12);
        assert_eq!(&p[8..12], &code::RETURN.to_le_bytes());
    }
}
