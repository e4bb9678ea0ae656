//! The serving side of a session: calls, copies and syscalls executed in this process, with a
//! handle table. Every handle or data address the peer sends back, opaque handles (type code 3)
//! included, must be one this table handed out (the reference dereferences whatever arrives);
//! the peer only ever sees table numbers, never an address of this process. Calls run confined
//! to the session's work directory (see [`crate::packed_func::confine`]).

use super::codec::{self, code, Reader, WireTensor, WireValue, Writer};
use super::endpoint::Channel;
use crate::device::{self, DeviceAttr};
use crate::module::Module;
use crate::ndarray::NDArrayObj;
use crate::object::containers::StringObj;
use crate::object::{ObjectRef, TYPE_MODULE, TYPE_NDARRAY, TYPE_PACKED_FUNC};
use crate::packed_func::confine;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry;
use crate::packed_func::types::{
    type_code as tc, DLDataType, DLDevice, DLTensor, TVMByteArray, TVMValue, DL_CPU,
};
use crate::packed_func::value::{object_to_c, RetValue};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::Path;

/// What a handle stands for.
enum Entry {
    Func(Function),
    Module(Module),
    Object(ObjectRef),
    NDArray(ObjectRef),
    Alloc {
        ptr: *mut c_void,
        dev: DLDevice,
        nbytes: u64,
    },
    Stream {
        ptr: *mut c_void,
    },
    /// An opaque handle a call returned (e.g. `device_api.cpu`); the address stays here, in
    /// `LocalSession::opaque`, and is never sent.
    Opaque,
}

/// Largest alignment a client may ask of `DevAllocData` (TVM's clients ask 64 bytes).
pub const MAX_REMOTE_ALIGNMENT: i64 = 1 << 20;

impl Entry {
    fn kind(&self) -> &'static str {
        match self {
            Entry::Func(_) => "a function",
            Entry::Module(_) => "a module",
            Entry::Object(_) => "an object",
            Entry::NDArray(_) => "an NDArray",
            Entry::Alloc { .. } => "device memory",
            Entry::Stream { .. } => "a stream",
            Entry::Opaque => "an opaque handle",
        }
    }
}

/// The handle table and request handlers of one served session.
pub struct LocalSession {
    entries: HashMap<u64, Entry>,
    next: u64,
    /// Table numbers of the opaque handles handed out, by address (one number per address).
    opaque: HashMap<usize, u64>,
    /// Where calls are confined: worked out at the first call from the server environment.
    confinement: Option<confine::Confinement>,
}

// SAFETY: the raw pointers in the table are device memory and streams owned by this session,
// used only by the thread that serves it at a time.
unsafe impl Send for LocalSession {}

impl Default for LocalSession {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for LocalSession {
    fn drop(&mut self) {
        for (_, e) in self.entries.drain() {
            match e {
                Entry::Alloc { ptr, dev, .. } => {
                    if let Ok(api) = device::api(dev) {
                        // SAFETY: the table handed out this allocation and forgets it here.
                        let _ = unsafe { api.free_data_space(dev, ptr) };
                    }
                }
                Entry::Stream { .. } => {}
                _ => {}
            }
        }
    }
}

/// The kind of a value, for messages that travel (a value's `Debug` may show an address).
fn ret_kind(v: &RetValue) -> &'static str {
    match v {
        RetValue::Null => "NULL",
        RetValue::Int(_) => "int",
        RetValue::Bool(_) => "bool",
        RetValue::Float(_) => "float",
        RetValue::Handle(_) => "handle",
        RetValue::DataType(_) => "DLDataType",
        RetValue::Device(_) => "DLDevice",
        RetValue::Str(_) => "str",
        RetValue::Bytes(_) => "bytes",
        RetValue::DLTensor(_) => "DLTensor",
        RetValue::Object(_) => "object",
    }
}

/// A tensor resolved against the table.
struct Resolved {
    base: *mut c_void,
    dev: DLDevice,
    /// Offset from `base` where the tensor starts.
    offset: u64,
    /// Bytes available from `base + offset`.
    avail: u64,
}

/// Storage for converted call arguments (kept alive during the call). Boxed entries keep
/// their addresses while the vectors grow.
#[derive(Default)]
#[allow(clippy::vec_box)]
struct ArgStore {
    strings: Vec<CString>,
    blobs: Vec<Box<TVMByteArray>>,
    tensors: Vec<Box<DLTensor>>,
    shapes: Vec<Vec<i64>>,
}

/// A syscall argument of the wrong kind (out of line: the checks stay small).
#[cold]
#[inline(never)]
fn bad_arg(name: &str, i: usize, what: &str, v: Option<&WireValue>) -> Error {
    Error::type_error_fmt(format_args!(
        "RPC: {name}: argument {i} must be {what}, got {}",
        v.map_or("nothing", |v| v.kind())
    ))
}

/// A syscall with the wrong number of arguments.
#[cold]
#[inline(never)]
fn bad_count(name: &str, n: usize, got: usize) -> Error {
    Error::value_fmt(format_args!("RPC: {name} expects {n} arguments, got {got}"))
}

impl LocalSession {
    /// An empty table.
    pub fn new() -> Self {
        LocalSession {
            entries: HashMap::new(),
            next: 1,
            opaque: HashMap::new(),
            confinement: None,
        }
    }

    /// Number of live handles (for tests).
    pub fn live_handles(&self) -> usize {
        self.entries.len()
    }

    fn insert(&mut self, e: Entry) -> u64 {
        let h = self.next;
        self.next += 1;
        self.entries.insert(h, e);
        h
    }

    fn unknown(h: u64) -> Error {
        Error::value_fmt(format_args!(
            "RPC: handle {h:#x} was not handed out by this server (or was freed)"
        ))
    }

    fn resolve(&self, t: &WireTensor) -> Result<Resolved> {
        let e = self.entries.get(&t.data).ok_or_else(|| {
            Error::value_fmt(format_args!(
                "RPC: tensor data address {:#x} was not handed out by this server",
                t.data
            ))
        })?;
        let r = match e {
            Entry::Alloc { ptr, dev, nbytes } => Resolved {
                base: *ptr,
                dev: *dev,
                offset: 0,
                avail: *nbytes,
            },
            Entry::NDArray(o) => {
                let nd = o.downcast_ref::<NDArrayObj>().expect("NDArray entry");
                let dl = nd.dltensor();
                Resolved {
                    base: dl.data,
                    dev: dl.device,
                    offset: dl.byte_offset,
                    avail: nd.nbytes() as u64,
                }
            }
            other => {
                return Err(Error::value_fmt(format_args!(
                    "RPC: tensor data address {:#x} names {}, not memory",
                    t.data,
                    other.kind()
                )))
            }
        };
        if r.dev != t.device {
            return Err(Error::value_fmt(format_args!(
                "RPC: tensor claims device {} but its memory is on {}",
                device::describe(t.device),
                device::describe(r.dev)
            )));
        }
        Ok(r)
    }

    /// Checks that `[byte_offset, byte_offset + n)` lies in the resolved memory.
    fn check_range(r: &Resolved, byte_offset: u64, n: u64) -> Result<()> {
        match byte_offset.checked_add(n) {
            Some(end) if end <= r.avail => Ok(()),
            _ => Err(Error::value_fmt(format_args!(
                "RPC: access of {n} bytes at offset {byte_offset} is outside the {} bytes of \
                 the remote memory",
                r.avail
            ))),
        }
    }

    fn object_entry(&mut self, o: ObjectRef) -> (i32, u64) {
        match o.type_index() {
            TYPE_NDARRAY => (tc::NDARRAY_HANDLE, self.insert(Entry::NDArray(o))),
            TYPE_MODULE => {
                let m = Module::from_object(o).expect("module type index");
                (tc::MODULE_HANDLE, self.insert(Entry::Module(m)))
            }
            TYPE_PACKED_FUNC => {
                let f = Function::from_object(o).expect("function type index");
                (tc::PACKED_FUNC_HANDLE, self.insert(Entry::Func(f)))
            }
            _ => (tc::OBJECT_HANDLE, self.insert(Entry::Object(o))),
        }
    }

    /// Encodes a return value as `[type code, value...]`, moving objects into the table.
    fn encode_return(&mut self, rv: RetValue) -> Result<Vec<WireValue>> {
        let int = |c: i32| WireValue::Int(c as i64);
        Ok(match rv {
            RetValue::Null => vec![int(tc::NULLPTR), WireValue::Null],
            RetValue::Int(i) => vec![int(tc::INT), WireValue::Int(i)],
            RetValue::Bool(b) => vec![int(tc::INT), WireValue::Int(b as i64)],
            RetValue::Float(f) => vec![int(tc::FLOAT), WireValue::Float(f)],
            RetValue::Handle(h) => vec![
                int(tc::OPAQUE_HANDLE),
                WireValue::Handle(self.opaque_handle(h.as_ptr())),
            ],
            RetValue::DataType(t) => vec![int(tc::DATA_TYPE), WireValue::DataType(t)],
            RetValue::Device(d) => vec![int(tc::DEVICE), WireValue::Device(d)],
            RetValue::Str(s) => vec![int(tc::STR), WireValue::Str(s.into_bytes())],
            RetValue::Bytes(b) => vec![int(tc::BYTES), WireValue::Bytes(b)],
            RetValue::DLTensor(_) => {
                return Err(Error::type_error(
                    "RPC: a function returned a raw DLTensor*, which cannot travel; return an \
                     NDArray",
                ))
            }
            RetValue::Object(o) => {
                if let Some(s) = o.downcast_ref::<StringObj>() {
                    return Ok(vec![int(tc::STR), WireValue::Str(s.as_bytes().to_vec())]);
                }
                let meta = o.downcast_ref::<NDArrayObj>().map(|nd| {
                    let dl = nd.dltensor();
                    (dl.device, dl.dtype, nd.shape().to_vec())
                });
                let (code, h) = self.object_entry(o);
                match meta {
                    Some((device, dtype, shape)) => vec![
                        int(code),
                        WireValue::Tensor(WireTensor {
                            data: h,
                            device,
                            dtype,
                            shape,
                            byte_offset: 0,
                        }),
                        WireValue::Handle(h),
                    ],
                    None => vec![int(code), WireValue::Handle(h)],
                }
            }
        })
    }

    /// The table number of an opaque handle a call returned (0 for NULL).
    fn opaque_handle(&mut self, ptr: *mut c_void) -> u64 {
        if ptr.is_null() {
            return 0;
        }
        if let Some(h) = self.opaque.get(&(ptr as usize)) {
            return *h;
        }
        let h = self.insert(Entry::Opaque);
        self.opaque.insert(ptr as usize, h);
        h
    }

    /// The session's confinement, worked out once from the server environment: its work
    /// directory (`tvm.rpc.server.workpath`, registered by our standalone server and by TVM's
    /// Python server); without a server environment, paths are not confined.
    fn confinement(&mut self) -> &confine::Confinement {
        self.confinement.get_or_insert_with(|| {
            let Some(f) = registry::get("tvm.rpc.server.workpath") else {
                return confine::Confinement::open();
            };
            match f.call(&[crate::packed_func::value::ArgValue::Str(c".")]) {
                Ok(RetValue::Str(s)) => confine::Confinement::dir(Path::new(&s)),
                Ok(RetValue::Object(o)) if o.downcast_ref::<StringObj>().is_some() => {
                    let s = o.downcast_ref::<StringObj>().expect("checked");
                    confine::Confinement::dir(Path::new(
                        String::from_utf8_lossy(s.as_bytes()).as_ref(),
                    ))
                }
                Ok(other) => confine::Confinement::deny(format!(
                    "tvm.rpc.server.workpath returned {}, not a path",
                    ret_kind(&other)
                )),
                Err(e) => {
                    confine::Confinement::deny(format!("the session has no work directory ({e})"))
                }
            }
        })
    }

    /// Calls a local function with wire arguments.
    pub fn call_plain(&mut self, f: &Function, args: &[WireValue]) -> Result<RetValue> {
        let mut store = ArgStore::default();
        let mut values = Vec::with_capacity(args.len());
        let mut codes = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let (v, c) = self
                .to_c(a, &mut store)
                .map_err(|e| e.context(format!("RPC: argument {i}")))?;
            values.push(v);
            codes.push(c);
        }
        let mut rv = RetValue::Null;
        let _confined = self.confinement().enter();
        // SAFETY: values/codes hold `len` entries whose pointees live in `store` and the table
        // for the whole call.
        unsafe {
            f.obj().call_raw(
                values.as_mut_ptr(),
                codes.as_mut_ptr(),
                args.len() as i32,
                &mut rv,
            )?
        };
        drop(store);
        Ok(rv)
    }

    fn to_c(&self, a: &WireValue, store: &mut ArgStore) -> Result<(TVMValue, i32)> {
        let handle = |p: *mut c_void| TVMValue { v_handle: p };
        Ok(match a {
            WireValue::Int(i) => (TVMValue { v_int64: *i }, tc::INT),
            WireValue::Bool(b) => (TVMValue { v_int64: *b as i64 }, tc::BOOL),
            WireValue::Float(f) => (TVMValue { v_float64: *f }, tc::FLOAT),
            WireValue::Handle(0) => (handle(std::ptr::null_mut()), tc::NULLPTR),
            WireValue::Handle(h) => match self.entries.get(h) {
                // Streams are the one kind of opaque handle a function may take from a peer
                // (e.g. `runtime.TVMSetStream`).
                Some(Entry::Stream { ptr }) => (handle(*ptr), tc::OPAQUE_HANDLE),
                // What a call returned is of a type the table cannot vouch for: given to
                // another function (a blob loader, a plugin registration) it would be read as
                // something else.
                Some(Entry::Opaque) => {
                    return Err(Error::type_error_fmt(format_args!(
                        "RPC: opaque handle {h:#x} was returned by a call; its type cannot be \
                         checked, so it is not accepted back as an argument"
                    )))
                }
                Some(e) => {
                    return Err(Error::type_error_fmt(format_args!(
                        "RPC: opaque handle {h:#x} names {}, not an opaque handle",
                        e.kind()
                    )))
                }
                None => {
                    return Err(Error::value_fmt(format_args!(
                        "RPC: opaque handle {h:#x} was not handed out by this server (or was \
                         freed); a client cannot send addresses"
                    )))
                }
            },
            WireValue::Null => (handle(std::ptr::null_mut()), tc::NULLPTR),
            WireValue::DataType(t) => (TVMValue { v_type: *t }, tc::DATA_TYPE),
            WireValue::Device(d) => (TVMValue { v_device: *d }, tc::DEVICE),
            WireValue::Str(s) => {
                let c = CString::new(s.clone())
                    .map_err(|_| Error::value("RPC: string argument contains a NUL byte"))?;
                let p = c.as_ptr();
                store.strings.push(c);
                (TVMValue { v_str: p }, tc::STR)
            }
            WireValue::Bytes(b) => {
                let arr = Box::new(TVMByteArray {
                    data: b.as_ptr() as *const std::ffi::c_char,
                    size: b.len(),
                });
                let p = &*arr as *const TVMByteArray as *mut c_void;
                store.blobs.push(arr);
                (handle(p), tc::BYTES)
            }
            WireValue::Tensor(t) => {
                let r = self.resolve(t)?;
                let n = t.nbytes()?;
                Self::check_range(&r, r.offset.saturating_add(t.byte_offset), n)?;
                let shape = t.shape.clone();
                let mut dl = Box::new(DLTensor {
                    data: r.base,
                    device: r.dev,
                    ndim: shape.len() as i32,
                    dtype: t.dtype,
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: r.offset + t.byte_offset,
                });
                store.shapes.push(shape);
                dl.shape = store.shapes.last_mut().expect("pushed").as_mut_ptr();
                let p = &mut *dl as *mut DLTensor as *mut c_void;
                store.tensors.push(dl);
                (handle(p), tc::DLTENSOR_HANDLE)
            }
            WireValue::Object(h) | WireValue::Module(h) | WireValue::Func(h) => {
                let e = self.entries.get(h).ok_or_else(|| Self::unknown(*h))?;
                let o = match (a, e) {
                    (WireValue::Module(_), Entry::Module(m)) => m.as_object(),
                    (WireValue::Func(_), Entry::Func(f)) => f.as_object(),
                    (WireValue::Object(_), Entry::Object(o) | Entry::NDArray(o)) => o,
                    (WireValue::Object(_), Entry::Module(m)) => m.as_object(),
                    (WireValue::Object(_), Entry::Func(f)) => f.as_object(),
                    (_, e) => {
                        return Err(Error::type_error_fmt(format_args!(
                            "RPC: handle {h:#x} sent as {} names {}",
                            a.kind(),
                            e.kind()
                        )))
                    }
                };
                // SAFETY: the table keeps the object alive for the call.
                unsafe { object_to_c(o.as_ptr()) }
            }
        })
    }

    fn func_of(&self, h: u64) -> Result<Function> {
        match self.entries.get(&h) {
            Some(Entry::Func(f)) => Ok(f.clone()),
            Some(e) => Err(Error::type_error_fmt(format_args!(
                "RPC: call target {h:#x} names {}, not a function",
                e.kind()
            ))),
            None => Err(Self::unknown(h)),
        }
    }

    fn stream_of(&self, h: u64) -> Result<*mut c_void> {
        if h == 0 {
            return Ok(std::ptr::null_mut());
        }
        match self.entries.get(&h) {
            Some(Entry::Stream { ptr }) => Ok(*ptr),
            Some(e) => Err(Error::type_error_fmt(format_args!(
                "RPC: stream handle {h:#x} names {}",
                e.kind()
            ))),
            None => Err(Self::unknown(h)),
        }
    }

    fn stream_handle(&mut self, ptr: *mut c_void) -> u64 {
        if ptr.is_null() {
            return 0;
        }
        for (h, e) in &self.entries {
            if let Entry::Stream { ptr: p } = e {
                if *p == ptr {
                    return *h;
                }
            }
        }
        self.insert(Entry::Stream { ptr })
    }

    /// Handles one request (`code` is a call, a copy or a syscall) and writes its reply.
    pub fn handle(&mut self, c: i32, body: &[u8], chan: &mut dyn Channel) -> Result<()> {
        let send = |chan: &mut dyn Channel, p: &[u8]| {
            chan.send(p)
                .map_err(|e| Error::tvm_fmt(format_args!("RPC: send failed: {e}")))
        };
        match c {
            code::CALL_FUNC => {
                let mut r = Reader::new(body);
                let h = r.u64("the function handle")?;
                let args = r.seq()?;
                let f = self.func_of(h)?;
                let rv = self.call_plain(&f, &args)?;
                let vals = self.encode_return(rv)?;
                send(chan, &codec::return_packet(&vals))
            }
            code::COPY_TO_REMOTE => {
                let mut r = Reader::new(body);
                let t = r.tensor()?;
                let n = r.u64("the copy size")?;
                let data = r.take(n, "copied data")?;
                let res = self.resolve(&t)?;
                let off = res.offset.saturating_add(t.byte_offset);
                Self::check_range(&res, off, n)?;
                if n > 0 {
                    if res.dev.device_type == DL_CPU {
                        // SAFETY: the range was checked against the memory's size.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                data.as_ptr(),
                                (res.base as *mut u8).add(off as usize),
                                n as usize,
                            )
                        };
                    } else {
                        let api = device::api(res.dev)?;
                        // SAFETY: the range was checked; `data` holds n bytes.
                        unsafe {
                            api.copy_data(
                                data.as_ptr() as *const c_void,
                                0,
                                res.base,
                                off,
                                n as usize,
                                DLDevice::CPU,
                                res.dev,
                                t.dtype,
                                std::ptr::null_mut(),
                            )?
                        };
                        // SAFETY: the default (NULL) stream is always valid.
                        unsafe { api.stream_sync(res.dev, std::ptr::null_mut())? };
                    }
                }
                send(chan, &codec::void_return())
            }
            code::COPY_FROM_REMOTE => {
                let mut r = Reader::new(body);
                let t = r.tensor()?;
                let n = r.u64("the copy size")?;
                let res = self.resolve(&t)?;
                let off = res.offset.saturating_add(t.byte_offset);
                Self::check_range(&res, off, n)?;
                let mut head = Writer::default();
                head.u64(4 + n);
                head.i32(code::COPY_ACK);
                if res.dev.device_type == DL_CPU {
                    // SAFETY: the range was checked against the memory's size.
                    let src = unsafe {
                        std::slice::from_raw_parts(
                            (res.base as *const u8).add(off as usize),
                            n as usize,
                        )
                    };
                    send(chan, &head.buf)?;
                    send(chan, src)
                } else {
                    let mut tmp = vec![0u8; n as usize];
                    let api = device::api(res.dev)?;
                    if n > 0 {
                        // SAFETY: the range was checked; `tmp` holds n bytes.
                        unsafe {
                            api.copy_data(
                                res.base,
                                off,
                                tmp.as_mut_ptr() as *mut c_void,
                                0,
                                n as usize,
                                res.dev,
                                DLDevice::CPU,
                                t.dtype,
                                std::ptr::null_mut(),
                            )?
                        };
                        // SAFETY: the default (NULL) stream is always valid.
                        unsafe { api.stream_sync(res.dev, std::ptr::null_mut())? };
                    }
                    send(chan, &head.buf)?;
                    send(chan, &tmp)
                }
            }
            _ => {
                let args = Reader::new(body).seq()?;
                let v = self.syscall(c, &args)?;
                send(chan, &codec::return_packet(&[v]))
            }
        }
    }

    /// Runs one syscall; the reply is one value.
    pub fn syscall(&mut self, c: i32, a: &[WireValue]) -> Result<WireValue> {
        let name = code::name(c);
        let want = |n: usize| -> Result<()> {
            if a.len() != n {
                return Err(bad_count(name, n, a.len()));
            }
            Ok(())
        };
        let dev = |i: usize| -> Result<DLDevice> {
            match a.get(i) {
                Some(WireValue::Device(d)) => Ok(*d),
                v => Err(bad_arg(name, i, "a device", v)),
            }
        };
        let int = |i: usize| -> Result<i64> {
            match a.get(i) {
                Some(WireValue::Int(v)) => Ok(*v),
                Some(WireValue::Bool(b)) => Ok(*b as i64),
                v => Err(bad_arg(name, i, "an int", v)),
            }
        };
        let hdl = |i: usize| -> Result<u64> {
            match a.get(i) {
                Some(WireValue::Handle(h)) => Ok(*h),
                Some(WireValue::Null) => Ok(0),
                v => Err(bad_arg(name, i, "a handle", v)),
            }
        };
        let tensor = |i: usize| -> Result<&WireTensor> {
            match a.get(i) {
                Some(WireValue::Tensor(t)) => Ok(t),
                v => Err(bad_arg(name, i, "a tensor", v)),
            }
        };
        match c {
            code::GET_GLOBAL_FUNC => {
                want(1)?;
                let n = match &a[0] {
                    WireValue::Str(s) => String::from_utf8_lossy(s).into_owned(),
                    v => {
                        return Err(Error::type_error_fmt(format_args!(
                            "RPC: {name}: the name must be a string, got {}",
                            v.kind()
                        )))
                    }
                };
                Ok(match registry::get(&n) {
                    Some(f) => WireValue::Handle(self.insert(Entry::Func(f))),
                    None => WireValue::Handle(0),
                })
            }
            code::FREE_HANDLE => {
                want(2)?;
                let h = hdl(0)?;
                let t = int(1)? as i32;
                let ok = match self.entries.get(&h) {
                    None => return Err(Self::unknown(h)),
                    Some(e) => matches!(
                        (t, e),
                        (tc::PACKED_FUNC_HANDLE, Entry::Func(_))
                            | (tc::MODULE_HANDLE, Entry::Module(_))
                            | (tc::NDARRAY_HANDLE, Entry::NDArray(_))
                            | (tc::OBJECT_HANDLE, Entry::Object(_) | Entry::NDArray(_))
                            | (tc::OBJECT_HANDLE, Entry::Module(_) | Entry::Func(_))
                    ),
                };
                if !ok {
                    return Err(Error::type_error_fmt(format_args!(
                        "RPC: {name}: handle {h:#x} is not of type code {t}"
                    )));
                }
                self.entries.remove(&h);
                Ok(WireValue::Null)
            }
            code::DEV_SET_DEVICE => {
                want(1)?;
                let d = dev(0)?;
                device::api(d)?.set_device(d)?;
                Ok(WireValue::Null)
            }
            code::DEV_GET_ATTR => {
                want(2)?;
                let d = dev(0)?;
                let kind = DeviceAttr::from_i32(int(1)? as i32)?;
                if kind == DeviceAttr::Exist && !device::has_backend(d.device_type) {
                    return Ok(WireValue::Int(0));
                }
                Ok(match device::api(d)?.get_attr(d, kind)? {
                    RetValue::Int(i) => WireValue::Int(i),
                    RetValue::Bool(b) => WireValue::Int(b as i64),
                    RetValue::Float(f) => WireValue::Float(f),
                    RetValue::Str(s) => WireValue::Str(s.into_bytes()),
                    RetValue::Null => WireValue::Null,
                    other => {
                        return Err(Error::type_error_fmt(format_args!(
                            "RPC: {name}: an attribute value of kind {} cannot travel",
                            ret_kind(&other)
                        )))
                    }
                })
            }
            code::DEV_ALLOC_DATA => {
                want(4)?;
                let d = dev(0)?;
                let n = int(1)?;
                let align = int(2)?;
                let hint = match &a[3] {
                    WireValue::DataType(t) => *t,
                    _ => DLDataType::new(1, 8, 1),
                };
                if n < 0 || align <= 0 {
                    return Err(Error::value_fmt(format_args!(
                        "RPC: {name}: bad size {n} or alignment {align}"
                    )));
                }
                // An alignment costs up to its size in padding: keep it a sane power of two.
                if align > MAX_REMOTE_ALIGNMENT || !(align as u64).is_power_of_two() {
                    return Err(Error::value_fmt(format_args!(
                        "RPC: {name}: alignment {align} must be a power of two of at most \
                         {MAX_REMOTE_ALIGNMENT} bytes"
                    )));
                }
                let ptr = device::api(d)?.alloc_data_space(d, n as usize, align as usize, hint)?;
                Ok(WireValue::Handle(self.insert(Entry::Alloc {
                    ptr,
                    dev: d,
                    nbytes: n as u64,
                })))
            }
            code::DEV_ALLOC_DATA_WITH_SCOPE => {
                want(2)?;
                let t = tensor(0)?;
                let scope = match &a[1] {
                    WireValue::Str(s) => Some(String::from_utf8_lossy(s).into_owned()),
                    WireValue::Null => None,
                    v => {
                        return Err(Error::type_error_fmt(format_args!(
                            "RPC: {name}: scope must be a string or null, got {}",
                            v.kind()
                        )))
                    }
                };
                let n = t.nbytes()?;
                let ptr = device::api(t.device)?.alloc_data_space_scope(
                    t.device,
                    &t.shape,
                    t.dtype,
                    scope.as_deref(),
                )?;
                Ok(WireValue::Handle(self.insert(Entry::Alloc {
                    ptr,
                    dev: t.device,
                    nbytes: n,
                })))
            }
            code::DEV_FREE_DATA => {
                want(2)?;
                let d = dev(0)?;
                let h = hdl(1)?;
                match self.entries.get(&h) {
                    Some(Entry::Alloc { dev: ad, .. }) if *ad == d => {}
                    Some(e) => {
                        return Err(Error::type_error_fmt(format_args!(
                            "RPC: {name}: handle {h:#x} names {} (or another device)",
                            e.kind()
                        )))
                    }
                    None => return Err(Self::unknown(h)),
                }
                if let Some(Entry::Alloc { ptr, dev, .. }) = self.entries.remove(&h) {
                    // SAFETY: the table handed out this allocation and just forgot it.
                    unsafe { device::api(dev)?.free_data_space(dev, ptr)? };
                }
                Ok(WireValue::Null)
            }
            code::DEV_STREAM_SYNC => {
                want(2)?;
                let d = dev(0)?;
                let s = self.stream_of(hdl(1)?)?;
                // SAFETY: `stream_of` only returns streams this session created and holds.
                unsafe { device::api(d)?.stream_sync(d, s)? };
                Ok(WireValue::Null)
            }
            code::COPY_AMONG_REMOTE => {
                want(3)?;
                let (from, to) = (tensor(0)?, tensor(1)?);
                let s = self.stream_of(hdl(2)?)?;
                let rf = self.resolve(from)?;
                let rt = self.resolve(to)?;
                let nf = from.nbytes()?;
                let nt = to.nbytes()?;
                if nf != nt {
                    return Err(Error::value_fmt(format_args!(
                        "RPC: {name}: sizes differ ({nf} and {nt} bytes)"
                    )));
                }
                Self::check_range(&rf, rf.offset.saturating_add(from.byte_offset), nf)?;
                Self::check_range(&rt, rt.offset.saturating_add(to.byte_offset), nt)?;
                let mut sf = from.shape.clone();
                let mut st = to.shape.clone();
                let a = DLTensor {
                    data: rf.base,
                    device: rf.dev,
                    ndim: sf.len() as i32,
                    dtype: from.dtype,
                    shape: sf.as_mut_ptr(),
                    strides: std::ptr::null_mut(),
                    byte_offset: rf.offset + from.byte_offset,
                };
                let b = DLTensor {
                    data: rt.base,
                    device: rt.dev,
                    ndim: st.len() as i32,
                    dtype: to.dtype,
                    shape: st.as_mut_ptr(),
                    strides: std::ptr::null_mut(),
                    byte_offset: rt.offset + to.byte_offset,
                };
                // SAFETY: both ranges were checked against their memory.
                unsafe { device::copy_tensor(&a, &b, s)? };
                Ok(WireValue::Null)
            }
            code::DEV_CREATE_STREAM => {
                want(1)?;
                let d = dev(0)?;
                let s = device::streams::create_stream(d)?;
                Ok(WireValue::Handle(self.stream_handle(s)))
            }
            code::DEV_FREE_STREAM => {
                want(2)?;
                let d = dev(0)?;
                let h = hdl(1)?;
                let s = self.stream_of(h)?;
                // SAFETY: a stream this session created; its entry is removed just below.
                unsafe { device::streams::free_stream(d, s)? };
                self.entries.remove(&h);
                Ok(WireValue::Null)
            }
            code::DEV_SET_STREAM => {
                want(2)?;
                let d = dev(0)?;
                let s = self.stream_of(hdl(1)?)?;
                // SAFETY: `stream_of` only returns streams this session created and holds.
                unsafe { device::api(d)?.set_stream(d, s)? };
                Ok(WireValue::Null)
            }
            code::DEV_GET_CURRENT_STREAM => {
                want(1)?;
                let d = dev(0)?;
                let s = device::api(d)?.current_stream(d);
                Ok(WireValue::Handle(self.stream_handle(s)))
            }
            _ => Err(Error::value_fmt(format_args!(
                "RPC: unknown syscall code {c}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forged_opaque_handles_are_refused() {
        let mut s = LocalSession::new();
        let f = registry::get("runtime.module.loadbinary_GraphExecutorFactory").unwrap();
        let e = s
            .call_plain(&f, &[WireValue::Handle(0x4141_4141)])
            .unwrap_err();
        assert!(e.message.contains("0x41414141"), "{e}");
        assert!(e.message.contains("not handed out"), "{e}");
    }

    #[test]
    fn returned_opaque_handles_are_table_numbers() {
        let mut s = LocalSession::new();
        let f = registry::get("device_api.cpu").unwrap();
        let addr = match f.call(&[]).unwrap() {
            RetValue::Handle(p) => p,
            other => panic!("{other:?}"),
        };
        let rv = s.call_plain(&f, &[]).unwrap();
        let v = s.encode_return(rv).unwrap();
        let h = match v.as_slice() {
            [WireValue::Int(c), WireValue::Handle(h)] if *c == tc::OPAQUE_HANDLE as i64 => *h,
            other => panic!("{other:?}"),
        };
        assert_ne!(h, addr.as_ptr() as u64);
        assert_eq!(h, 1, "the first number of a fresh table");
        let again = s.call_plain(&f, &[]).unwrap();
        assert_eq!(s.encode_return(again).unwrap(), v, "one number per address");
        // The number is not taken back as an argument: its type cannot be checked.
        let mut store = ArgStore::default();
        let e = s.to_c(&WireValue::Handle(h), &mut store).err().unwrap();
        assert!(e.message.contains("its type cannot be checked"), "{e}");
        // A stream the session created is.
        let stream = s.stream_handle(0x1000 as *mut c_void);
        let (val, code) = s.to_c(&WireValue::Handle(stream), &mut store).unwrap();
        assert_eq!(code, tc::OPAQUE_HANDLE);
        // SAFETY: `to_c` wrote a handle.
        assert_eq!(unsafe { val.v_handle } as usize, 0x1000);
        s.entries.remove(&stream);
        let (_, code) = s.to_c(&WireValue::Handle(0), &mut store).unwrap();
        assert_eq!(code, tc::NULLPTR);
        assert!(s.to_c(&WireValue::Handle(h + 1), &mut store).is_err());
        let fh = s.insert(Entry::Func(f));
        let e = s.to_c(&WireValue::Handle(fh), &mut store).err().unwrap();
        assert!(e.message.contains("names a function"), "{e}");
    }

    struct Collect(Vec<u8>);

    impl Channel for Collect {
        fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
            self.0.extend_from_slice(data);
            Ok(())
        }
        fn recv(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
            Ok(0)
        }
    }

    /// The hostile fuzz seed (a forged opaque handle passed to a blob loader) is served with
    /// errors, not a crash.
    #[test]
    fn the_forged_handle_seed_gets_errors() {
        let data = include_bytes!("../../fuzz/seeds/rpc/opaque_forged_handle.bin");
        let mut serving = Some(super::super::endpoint::Serving::Local(LocalSession::new()));
        let mut rest = &data[..];
        let mut replies = Vec::new();
        while !rest.is_empty() {
            let n = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
            let c = i32::from_le_bytes(rest[8..12].try_into().unwrap());
            let mut out = Collect(Vec::new());
            let flow = super::super::endpoint::handle_request(
                &mut serving,
                &mut out,
                c,
                &rest[12..8 + n],
                1 << 20,
            );
            assert!(flow.is_ok());
            replies.push(String::from_utf8_lossy(&out.0).into_owned());
            rest = &rest[8 + n..];
        }
        assert_eq!(replies.len(), 4);
        assert!(replies[1].contains("not handed out"), "{}", replies[1]);
        assert!(replies[2].contains("NULL"), "{}", replies[2]);
        assert!(replies[3].contains("not handed out"), "{}", replies[3]);
    }
}
