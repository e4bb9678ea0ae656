//! The client side: sessions (`rpc.Connect`, `rpc.LocalSession`), the session table, the `rpc`
//! module, remote functions, arrays and objects (freed on the server when dropped here).

use super::codec::{self, code, WireTensor, WireValue, Writer};
use super::endpoint::{Channel, Endpoint, Header};
use crate::module::{Module, ModuleNode};
use crate::ndarray::NDArrayObj;
use crate::object::containers::StringObj;
use crate::object::{ObjectRef, TYPE_MODULE, TYPE_NDARRAY, TYPE_OBJECT, TYPE_PACKED_FUNC};
use crate::packed_func::error::{Error, ErrorKind, Result};
use crate::packed_func::function::Function;
use crate::packed_func::types::{
    type_code as tc, DLDataType, DLDevice, DLManagedTensor, DLTensor, RPC_SESS_MASK,
};
use crate::packed_func::value::{ArgValue, Args, RetValue};
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Slots in the session table (as the reference).
pub const MAX_SESSIONS: usize = 32;

static TABLE: LazyLock<Mutex<Vec<Weak<ClientSession>>>> =
    LazyLock::new(|| Mutex::new((0..MAX_SESSIONS).map(|_| Weak::new()).collect()));

/// Remote functions made here, by their PackedFunc object address.
static REMOTE_FUNCS: LazyLock<Mutex<HashMap<usize, Weak<RemoteHandle>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Addresses of live [`RemoteSpace`]s: a remote array's data pointer is trusted only if listed.
static LIVE_SPACES: LazyLock<Mutex<HashSet<usize>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A session with a remote server (or with this process, for `rpc.LocalSession`).
pub struct ClientSession {
    ep: Mutex<Endpoint>,
    index: OnceLock<usize>,
    max_transfer: OnceLock<u64>,
    closed: AtomicBool,
    local: bool,
    helpers: Mutex<HashMap<&'static str, u64>>,
}

/// The session at table slot `i`, if it is alive.
pub fn session_at(i: usize) -> Option<Arc<ClientSession>> {
    lock(&TABLE).get(i).and_then(Weak::upgrade)
}

/// The session a (masked) device type belongs to.
pub fn session_of_device(device_type: i32) -> Result<Arc<ClientSession>> {
    let idx = device_type / RPC_SESS_MASK - 1;
    if idx < 0 {
        return Err(Error::value_fmt(format_args!(
            "device type {device_type} is not a remote (RPC) device"
        )));
    }
    session_at(idx as usize).ok_or_else(|| {
        Error::value_fmt(format_args!(
            "RPC session {idx} (of device type {device_type}) is closed or never existed"
        ))
    })
}

/// Strips the session mask from a device.
pub fn strip_mask(d: DLDevice) -> DLDevice {
    DLDevice::new(d.device_type % RPC_SESS_MASK, d.device_id)
}

impl ClientSession {
    fn create(ep: Endpoint, local: bool) -> Result<Arc<ClientSession>> {
        let s = Arc::new(ClientSession {
            ep: Mutex::new(ep),
            index: OnceLock::new(),
            max_transfer: OnceLock::new(),
            closed: AtomicBool::new(false),
            local,
            helpers: Mutex::new(HashMap::new()),
        });
        let mut t = lock(&TABLE);
        let slot = t
            .iter()
            .position(|w| w.strong_count() == 0)
            .ok_or_else(|| {
                Error::tvm_fmt(format_args!(
                    "RPC: too many open sessions (at most {MAX_SESSIONS})"
                ))
            })?;
        t[slot] = Arc::downgrade(&s);
        let _ = s.index.set(slot);
        drop(t);
        super::device::ensure_registered();
        Ok(s)
    }

    /// Table index of this session.
    pub fn index(&self) -> usize {
        *self.index.get().expect("set at creation")
    }

    /// Whether this is a loopback session served by this process.
    pub fn as_local(&self) -> bool {
        self.local
    }

    /// The device type mask of this session.
    pub fn mask(&self) -> i32 {
        RPC_SESS_MASK * (self.index() as i32 + 1)
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Verbatim,
                "RPCError: the RPC session is closed",
            ));
        }
        Ok(())
    }

    fn ep(&self) -> Result<std::sync::MutexGuard<'_, Endpoint>> {
        self.check_open()?;
        Ok(lock(&self.ep))
    }

    /// Sends a request packet and returns the reply sequence.
    pub fn request(&self, packet: &[u8]) -> Result<Vec<WireValue>> {
        let mut ep = self.ep()?;
        let r = ep.request(packet);
        if let Err(e) = &r {
            self.maybe_dead(&mut ep, e);
        }
        r
    }

    /// After a transport failure, no further request can succeed.
    fn maybe_dead(&self, ep: &mut Endpoint, e: &Error) {
        if e.message.contains("RPC session ended")
            || e.message.contains("RPC: receive failed")
            || e.message.contains("RPC: send failed")
            || e.message.contains("in the middle of")
            || e.message.starts_with("RPCSessionTimeoutError")
        {
            self.closed.store(true, Ordering::Release);
            ep.close();
        }
    }

    /// Calls remote function `h`.
    pub fn call_func(&self, h: u64, args: &[WireValue]) -> Result<Vec<WireValue>> {
        let mut w = Writer::packet(code::CALL_FUNC);
        w.u64(h);
        w.seq(args);
        self.request(&w.finish())
    }

    /// Runs a syscall; the reply must be exactly one value.
    pub fn syscall(&self, c: i32, args: &[WireValue]) -> Result<WireValue> {
        let mut w = Writer::packet(c);
        w.seq(args);
        let mut v = self.request(&w.finish())?;
        if v.len() != 1 {
            return Err(Error::value_fmt(format_args!(
                "RPC: {} reply holds {} values, expected 1",
                code::name(c),
                v.len()
            )));
        }
        Ok(v.pop().expect("one value"))
    }

    /// Looks up a remote global; 0 when it does not exist.
    pub fn get_global(&self, name: &str) -> Result<u64> {
        match self.syscall(
            code::GET_GLOBAL_FUNC,
            &[WireValue::Str(name.as_bytes().to_vec())],
        )? {
            WireValue::Handle(h) => Ok(h),
            WireValue::Null => Ok(0),
            v => Err(Error::type_error_fmt(format_args!(
                "RPC: GetGlobalFunc replied with {}",
                v.kind()
            ))),
        }
    }

    /// A remote global kept for the session's lifetime (helpers such as
    /// `tvm.rpc.server.ModuleGetFunction`).
    fn helper(&self, name: &'static str) -> Result<u64> {
        if let Some(h) = lock(&self.helpers).get(name) {
            return Ok(*h);
        }
        let h = self.get_global(name)?;
        if h == 0 {
            return Err(Error::attribute_fmt(format_args!(
                "RPC: the server has no global function {name}"
            )));
        }
        lock(&self.helpers).insert(name, h);
        Ok(h)
    }

    /// Calls a remote helper global by name.
    pub fn call_helper(
        self: &Arc<Self>,
        name: &'static str,
        args: &[WireValue],
    ) -> Result<RetValue> {
        let h = self.helper(name)?;
        let r = self.call_func(h, args)?;
        decode_return(self, r)
    }

    /// Frees a remote handle (best effort: a closed session has nothing left to free).
    pub fn free_handle(&self, h: u64, type_code: i32) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let _ = self.syscall(
            code::FREE_HANDLE,
            &[WireValue::Handle(h), WireValue::Int(type_code as i64)],
        );
    }

    fn max_transfer(&self) -> u64 {
        *self.max_transfer.get_or_init(|| {
            let probe = || -> Result<u64> {
                let h = self.get_global("tvm.rpc.server.GetCRTMaxPacketSize")?;
                if h == 0 {
                    return Ok(u64::MAX);
                }
                let r = self.call_func(h, &[]);
                self.free_handle(h, tc::PACKED_FUNC_HANDLE);
                match r?.get(1) {
                    Some(WireValue::Int(n)) if *n > 0 => Ok(*n as u64),
                    _ => Ok(u64::MAX),
                }
            };
            probe().unwrap_or(u64::MAX)
        })
    }

    /// Bytes per copy packet for a 1-D tensor chunk.
    fn block_size(&self) -> Result<u64> {
        const OVERHEAD: u64 = 4 + 8 + 8 + 4 + 4 + 8 + 8 + 8;
        const CAP: u64 = 64 << 20;
        let max = self.max_transfer();
        if max <= OVERHEAD {
            return Err(Error::value_fmt(format_args!(
                "RPC: the server's packet limit of {max} bytes is too small for a copy"
            )));
        }
        Ok((max - OVERHEAD).min(CAP))
    }

    fn chunk_meta(data: u64, dev: DLDevice, offset: u64, n: u64) -> WireTensor {
        WireTensor {
            data,
            device: dev,
            dtype: DLDataType::new(1, 8, 1),
            shape: vec![n as i64],
            byte_offset: offset,
        }
    }

    /// Copies `src` to remote memory `data` at `offset` on `dev` (unmasked), in chunks.
    pub fn copy_to_remote(&self, src: &[u8], data: u64, dev: DLDevice, offset: u64) -> Result<()> {
        let block = self.block_size()? as usize;
        for (i, chunk) in src.chunks(block.max(1)).enumerate() {
            let off = offset + (i * block) as u64;
            let mut w = Writer::packet(code::COPY_TO_REMOTE);
            w.tensor(&Self::chunk_meta(data, dev, off, chunk.len() as u64));
            w.u64(chunk.len() as u64);
            let head_len = w.buf.len();
            let total = (head_len - 8 + chunk.len()) as u64;
            w.buf[..8].copy_from_slice(&total.to_le_bytes());
            let mut ep = self.ep()?;
            let r = ep
                .send(&w.buf)
                .and_then(|_| ep.send(chunk))
                .and_then(|_| ep.wait_return(None));
            if let Err(e) = &r {
                self.maybe_dead(&mut ep, e);
            }
            r?;
        }
        Ok(())
    }

    /// Copies remote memory `data` at `offset` on `dev` (unmasked) into `dst`, in chunks.
    pub fn copy_from_remote(
        &self,
        dst: &mut [u8],
        data: u64,
        dev: DLDevice,
        offset: u64,
    ) -> Result<()> {
        let block = self.block_size()? as usize;
        for (i, chunk) in dst.chunks_mut(block.max(1)).enumerate() {
            let off = offset + (i * block) as u64;
            let mut w = Writer::packet(code::COPY_FROM_REMOTE);
            w.tensor(&Self::chunk_meta(data, dev, off, chunk.len() as u64));
            w.u64(chunk.len() as u64);
            let mut ep = self.ep()?;
            let r = ep
                .send(&w.finish())
                .and_then(|_| ep.wait_return(Some(chunk)));
            if let Err(e) = &r {
                self.maybe_dead(&mut ep, e);
            }
            r?;
        }
        Ok(())
    }

    /// Forwards one request packet to this session's server and returns the raw reply packet
    /// (multi-hop serving).
    pub fn relay(&self, c: i32, body: &[u8]) -> Result<Vec<u8>> {
        let mut ep = self.ep()?;
        let mut head = Writer::default();
        head.u64(4 + body.len() as u64);
        head.i32(c);
        ep.send(&head.buf)?;
        ep.send(body)?;
        match ep.read_header()? {
            Header::Eof => Err(Error::new(
                ErrorKind::Verbatim,
                "RPCError: the next hop closed the connection",
            )),
            Header::Packet(rc, n) => {
                let mut body = Vec::new();
                ep.recv_growing(&mut body, n, "a relayed reply")?;
                let mut out = Vec::with_capacity(12 + body.len());
                out.extend_from_slice(&(n + 4).to_le_bytes());
                out.extend_from_slice(&rc.to_le_bytes());
                out.extend_from_slice(&body);
                Ok(out)
            }
        }
    }

    /// Sends `kShutdown` and closes the connection; later calls fail.
    pub fn shutdown(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            lock(&self.ep).shutdown();
        }
    }
}

impl Drop for ClientSession {
    fn drop(&mut self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.ep
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .shutdown();
        }
    }
}

/// A handle on the server; freed there when the last local owner goes.
pub struct RemoteHandle {
    sess: Arc<ClientSession>,
    handle: u64,
    type_code: i32,
    key: OnceLock<usize>,
}

impl RemoteHandle {
    fn new(sess: &Arc<ClientSession>, handle: u64, type_code: i32) -> Arc<RemoteHandle> {
        Arc::new(RemoteHandle {
            sess: sess.clone(),
            handle,
            type_code,
            key: OnceLock::new(),
        })
    }
}

impl Drop for RemoteHandle {
    fn drop(&mut self) {
        if let Some(k) = self.key.get() {
            lock(&REMOTE_FUNCS).remove(k);
        }
        self.sess.free_handle(self.handle, self.type_code);
    }
}

/// A remote object (`runtime.RPCObjectRef`).
pub struct RpcObjectRefObj {
    remote: Arc<RemoteHandle>,
}

// SAFETY: `RpcObjectRefObj` is the only payload stored under this key.
unsafe impl crate::object::ObjectType for RpcObjectRefObj {
    crate::object_type!("runtime.RPCObjectRef", parent TYPE_OBJECT);
}

/// The `rpc` module: the session itself (no handle) or a module on the server.
pub struct RpcModuleNode {
    sess: Arc<ClientSession>,
    remote: Option<Arc<RemoteHandle>>,
}

impl RpcModuleNode {
    /// The session.
    pub fn session(&self) -> &Arc<ClientSession> {
        &self.sess
    }

    /// The remote module handle (`None` for the session module).
    pub fn remote_handle(&self) -> Option<u64> {
        self.remote.as_ref().map(|r| r.handle)
    }
}

impl ModuleNode for RpcModuleNode {
    fn type_key(&self) -> &str {
        "rpc"
    }

    fn get_function(&self, name: &str, _this: Option<&ObjectRef>) -> Result<Option<Function>> {
        match &self.remote {
            None => {
                if name == "CloseRPCConnection" {
                    let s = Arc::downgrade(&self.sess);
                    return Ok(Some(Function::from_rust(move |_a, _rv| {
                        if let Some(s) = s.upgrade() {
                            s.shutdown();
                        }
                        Ok(())
                    })));
                }
                let h = self.sess.get_global(name)?;
                Ok((h != 0).then(|| remote_function(&self.sess, h)))
            }
            Some(m) => {
                let rv = self.sess.call_helper(
                    "tvm.rpc.server.ModuleGetFunction",
                    &[
                        WireValue::Module(m.handle),
                        WireValue::Str(name.as_bytes().to_vec()),
                        WireValue::Int(1),
                    ],
                )?;
                match rv {
                    RetValue::Null => Ok(None),
                    RetValue::Object(o) => Ok(Some(Function::from_object(o)?)),
                    other => Err(Error::type_error_fmt(format_args!(
                        "RPC: ModuleGetFunction replied with {other:?}"
                    ))),
                }
            }
        }
    }

    fn get_source(&self, _format: &str) -> Result<String> {
        Err(Error::tvm("GetSource is not supported by rpc modules"))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A module for a session (or a remote module of it).
pub fn session_module(sess: &Arc<ClientSession>, remote: Option<u64>) -> Module {
    Module::new(Box::new(RpcModuleNode {
        sess: sess.clone(),
        remote: remote.map(|h| RemoteHandle::new(sess, h, tc::MODULE_HANDLE)),
    }))
}

/// The rpc node of a module argument.
pub fn rpc_node(m: &Module) -> Option<&RpcModuleNode> {
    m.node().as_any().downcast_ref::<RpcModuleNode>()
}

/// A local function that calls remote function `h`; freeing it frees `h` on the server.
pub fn remote_function(sess: &Arc<ClientSession>, h: u64) -> Function {
    let rh = RemoteHandle::new(sess, h, tc::PACKED_FUNC_HANDLE);
    let inner = rh.clone();
    let f = Function::from_rust(move |args, rv| {
        let wire = encode_args(&inner.sess, args)?;
        let r = inner.sess.call_func(inner.handle, &wire)?;
        *rv = decode_return(&inner.sess, r)?;
        Ok(())
    });
    let key = f.as_object().as_ptr() as usize;
    let _ = rh.key.set(key);
    lock(&REMOTE_FUNCS).insert(key, Arc::downgrade(&rh));
    f
}

/// Remote memory as seen locally: the data pointer of a remote array points at one of these.
#[repr(C, align(64))]
pub struct RemoteSpace {
    /// The server's opaque address.
    pub data: u64,
    /// The session.
    pub sess: Arc<ClientSession>,
    /// The server's NDArray handle when the server made the array (0 when allocated here).
    pub nd_handle: u64,
}

/// Boxes a remote space and lists it as live.
pub fn new_space(sess: &Arc<ClientSession>, data: u64, nd_handle: u64) -> *mut RemoteSpace {
    let p = Box::into_raw(Box::new(RemoteSpace {
        data,
        sess: sess.clone(),
        nd_handle,
    }));
    lock(&LIVE_SPACES).insert(p as usize);
    p
}

/// Takes a remote space back (unlisting it); `None` if `p` is not a live one.
pub fn take_space(p: *mut c_void) -> Option<Box<RemoteSpace>> {
    if !lock(&LIVE_SPACES).remove(&(p as usize)) {
        return None;
    }
    // SAFETY: listed pointers come from Box::into_raw in new_space and are unlisted once.
    Some(unsafe { Box::from_raw(p as *mut RemoteSpace) })
}

/// Reads a live remote space.
pub fn with_space<R>(p: *const c_void, f: impl FnOnce(&RemoteSpace) -> R) -> Result<R> {
    let live = lock(&LIVE_SPACES);
    if !live.contains(&(p as usize)) {
        return Err(Error::value_fmt(format_args!(
            "RPC: {p:p} is not the data of a live remote array"
        )));
    }
    // SAFETY: listed, so it is a live box; the lock keeps it from being taken meanwhile.
    let r = f(unsafe { &*(p as *const RemoteSpace) });
    drop(live);
    Ok(r)
}

/// `managed` must stay first: the holder is handed out as its `DLManagedTensor`.
#[repr(C)]
struct RemoteArrayHolder {
    managed: DLManagedTensor,
    shape: Vec<i64>,
}

unsafe extern "C" fn delete_remote_array(m: *mut DLManagedTensor) {
    // Called from C: a panic while freeing (a network call) must not unwind there.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `m` is the first field of a boxed holder made in remote_ndarray.
        let holder = unsafe { Box::from_raw(m as *mut RemoteArrayHolder) };
        if let Some(space) = take_space(holder.managed.dl_tensor.data) {
            space.sess.free_handle(space.nd_handle, tc::NDARRAY_HANDLE);
        }
    });
}

/// A local NDArray for a server-side array (data = a [`RemoteSpace`], device masked).
pub fn remote_ndarray(
    sess: &Arc<ClientSession>,
    t: WireTensor,
    nd_handle: u64,
) -> Result<ObjectRef> {
    let space = new_space(sess, t.data, nd_handle);
    let mut holder = Box::new(RemoteArrayHolder {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data: space as *mut c_void,
                device: DLDevice::new(t.device.device_type + sess.mask(), t.device.device_id),
                ndim: t.shape.len() as i32,
                dtype: t.dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: t.byte_offset,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_remote_array),
        },
        shape: t.shape,
    });
    holder.managed.dl_tensor.shape = holder.shape.as_mut_ptr();
    let p = Box::into_raw(holder) as *mut DLManagedTensor;
    // SAFETY: `p` is a valid managed tensor whose ownership passes to the NDArray.
    match unsafe { NDArrayObj::from_dlpack(p) } {
        Ok(o) => Ok(o),
        Err(e) => {
            // SAFETY: not adopted, so we still own it.
            unsafe { delete_remote_array(p) };
            Err(e)
        }
    }
}

fn tensor_to_wire(sess: &ClientSession, t: &DLTensor) -> Result<WireValue> {
    if t.device.device_type < RPC_SESS_MASK {
        return Err(Error::value_fmt(format_args!(
            "RPC: cannot pass a local array (on {}) to a remote function; copy it to the \
             remote device first",
            crate::device::describe(t.device)
        )));
    }
    if t.device.device_type / RPC_SESS_MASK - 1 != sess.index() as i32 {
        return Err(Error::value(
            "RPC: cannot pass an array of a different remote session",
        ));
    }
    if !crate::ndarray::is_contiguous(t) {
        return Err(Error::value("RPC: only compact arrays can be passed"));
    }
    let data = with_space(t.data, |s| s.data)?;
    // SAFETY: a live tensor has ndim shape entries.
    let shape = unsafe { crate::ndarray::shape_of(t) }.to_vec();
    Ok(WireValue::Tensor(WireTensor {
        data,
        device: strip_mask(t.device),
        dtype: t.dtype,
        shape,
        byte_offset: t.byte_offset,
    }))
}

fn device_to_wire(sess: &ClientSession, d: DLDevice) -> Result<DLDevice> {
    if d.device_type >= RPC_SESS_MASK {
        if d.device_type / RPC_SESS_MASK - 1 != sess.index() as i32 {
            return Err(Error::value(
                "Can not pass in device with a different remote session",
            ));
        }
        return Ok(strip_mask(d));
    }
    Ok(d)
}

/// Converts call arguments to their wire form for `sess`.
pub fn encode_args(sess: &Arc<ClientSession>, args: Args<'_>) -> Result<Vec<WireValue>> {
    let mut out = Vec::with_capacity(args.len());
    for i in 0..args.len() {
        let v = args.get(i)?;
        out.push(encode_arg(sess, v).map_err(|e| e.context(format!("RPC call argument {i}")))?);
    }
    Ok(out)
}

/// Converts one argument to its wire form for `sess`.
pub fn encode_arg(sess: &Arc<ClientSession>, v: ArgValue<'_>) -> Result<WireValue> {
    Ok(match v {
        ArgValue::Null => WireValue::Null,
        ArgValue::Int(i) => WireValue::Int(i),
        ArgValue::Float(f) => WireValue::Float(f),
        ArgValue::Bool(b) => WireValue::Bool(b),
        ArgValue::Handle(h) => WireValue::Handle(h.as_ptr() as u64),
        ArgValue::DataType(t) => WireValue::DataType(t),
        ArgValue::Device(d) => WireValue::Device(device_to_wire(sess, d)?),
        ArgValue::Str(s) => WireValue::Str(s.to_bytes().to_vec()),
        ArgValue::Bytes(b) => WireValue::Bytes(b.to_vec()),
        // SAFETY: a DLTensor argument is valid for the call.
        ArgValue::DLTensor(t) => tensor_to_wire(sess, unsafe { &*t.as_ptr() })?,
        ArgValue::Object(o) => match o.type_index() {
            TYPE_NDARRAY => {
                let nd = o.downcast_ref::<NDArrayObj>().expect("NDArray index");
                tensor_to_wire(sess, nd.dltensor())?
            }
            TYPE_MODULE => {
                let m = Module::from_object(o.to_ref())?;
                match rpc_node(&m) {
                    Some(n) if Arc::ptr_eq(&n.sess, sess) => match n.remote_handle() {
                        Some(h) => WireValue::Module(h),
                        None => {
                            return Err(Error::value(
                                "RPC: the session module itself cannot be passed",
                            ))
                        }
                    },
                    Some(_) => {
                        return Err(Error::value(
                            "RPC: cannot pass a module of a different remote session",
                        ))
                    }
                    None => {
                        return Err(Error::value_fmt(format_args!(
                            "RPC: cannot pass a local {} module to a remote function",
                            m.type_key()
                        )))
                    }
                }
            }
            TYPE_PACKED_FUNC => {
                let rh = lock(&REMOTE_FUNCS)
                    .get(&(o.as_ptr() as usize))
                    .and_then(Weak::upgrade);
                match rh {
                    Some(r) if Arc::ptr_eq(&r.sess, sess) => WireValue::Func(r.handle),
                    Some(_) => {
                        return Err(Error::value(
                            "RPC: cannot pass a function of a different remote session",
                        ))
                    }
                    None => {
                        return Err(Error::value(
                            "RPC: cannot pass a local function to a remote function",
                        ))
                    }
                }
            }
            _ => {
                if let Some(s) = o.downcast_ref::<StringObj>() {
                    WireValue::Str(s.as_bytes().to_vec())
                } else if let Some(r) = o.downcast_ref::<RpcObjectRefObj>() {
                    if !Arc::ptr_eq(&r.remote.sess, sess) {
                        return Err(Error::value(
                            "RPC: cannot pass an object of a different remote session",
                        ));
                    }
                    WireValue::Object(r.remote.handle)
                } else {
                    return Err(Error::value_fmt(format_args!(
                        "RPC: cannot pass a local {} object to a remote function (only \
                         RPCObjectRef of the same session)",
                        o.to_ref().type_key()
                    )));
                }
            }
        },
    })
}

fn wire_to_plain(v: WireValue) -> Result<RetValue> {
    Ok(match v {
        WireValue::Int(i) => RetValue::Int(i),
        WireValue::Bool(b) => RetValue::Bool(b),
        WireValue::Float(f) => RetValue::Float(f),
        // SAFETY: a handle of the remote session, passed back only to the functions that
        // take it (every local global that reads through a handle vouches for it first).
        WireValue::Handle(h) => RetValue::Handle(unsafe {
            crate::packed_func::RawHandle::new(h as usize as *mut c_void)
        }),
        WireValue::Null => RetValue::Null,
        WireValue::DataType(t) => RetValue::DataType(t),
        WireValue::Device(d) => RetValue::Device(d),
        WireValue::Str(s) => RetValue::Str(String::from_utf8_lossy(&s).into_owned()),
        WireValue::Bytes(b) => RetValue::Bytes(b),
        other => {
            return Err(Error::type_error_fmt(format_args!(
                "RPC: unexpected {} in a return value",
                other.kind()
            )))
        }
    })
}

/// Turns a `kReturn` sequence (`[type code, value...]`) into a local value.
pub fn decode_return(sess: &Arc<ClientSession>, vals: Vec<WireValue>) -> Result<RetValue> {
    let mut it = vals.into_iter();
    let code = match it.next() {
        Some(WireValue::Int(c)) => c as i32,
        None => return Ok(RetValue::Null),
        Some(v) => {
            return Err(Error::type_error_fmt(format_args!(
                "RPC: a return value must start with its type code, got {}",
                v.kind()
            )))
        }
    };
    let handle = |v: Option<WireValue>| -> Result<u64> {
        match v {
            Some(WireValue::Handle(h)) => Ok(h),
            v => Err(Error::type_error_fmt(format_args!(
                "RPC: expected a handle in the return value, got {}",
                v.map_or("nothing", |v| v.kind())
            ))),
        }
    };
    Ok(match code {
        tc::NDARRAY_HANDLE => {
            let t = match it.next() {
                Some(WireValue::Tensor(t)) => t,
                _ => return Err(Error::type_error("RPC: NDArray return without a tensor")),
            };
            let h = handle(it.next())?;
            RetValue::Object(remote_ndarray(sess, t, h)?)
        }
        tc::PACKED_FUNC_HANDLE => {
            let h = handle(it.next())?;
            if h == 0 {
                RetValue::Null
            } else {
                RetValue::Object(remote_function(sess, h).into_object())
            }
        }
        tc::MODULE_HANDLE => {
            let h = handle(it.next())?;
            RetValue::Object(session_module(sess, Some(h)).into_object())
        }
        tc::OBJECT_HANDLE => {
            let h = handle(it.next())?;
            RetValue::Object(ObjectRef::new(RpcObjectRefObj {
                remote: RemoteHandle::new(sess, h, tc::OBJECT_HANDLE),
            }))
        }
        _ => match it.next() {
            Some(v) => wire_to_plain(v)?,
            None => RetValue::Null,
        },
    })
}

/// Handshake timeout for connecting clients.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// Connects to a server (`rpc.Connect`): handshake with `"client:" + key`, then starts the
/// session with the constructor arguments (empty: the server's own process).
pub fn connect(host: &str, port: i64, key: &str, ctor: &[WireValue]) -> Result<Arc<ClientSession>> {
    let port = u16::try_from(port)
        .map_err(|_| Error::value_fmt(format_args!("rpc.Connect: bad port {port}")))?;
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| {
            Error::tvm_fmt(format_args!(
                "rpc.Connect: cannot resolve {host}:{port}: {e}"
            ))
        })?
        .collect();
    let mut last = None;
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, HANDSHAKE_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut s = stream.ok_or_else(|| {
        Error::tvm_fmt(format_args!(
            "RPCError: cannot connect to {host}:{port}: {}",
            last.map_or("no address".into(), |e| e.to_string())
        ))
    })?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| Error::tvm_fmt(format_args!("rpc.Connect: {e}")))?;
    let full_key = format!("client:{key}");
    let mut hs = Vec::new();
    hs.extend_from_slice(&codec::RPC_MAGIC.to_le_bytes());
    hs.extend_from_slice(&(full_key.len() as i32).to_le_bytes());
    hs.extend_from_slice(full_key.as_bytes());
    let io = |e: std::io::Error| Error::tvm_fmt(format_args!("rpc.Connect to {host}:{port}: {e}"));
    s.write_all(&hs).map_err(io)?;
    let mut b = [0u8; 4];
    s.read_exact(&mut b).map_err(io)?;
    let c = i32::from_le_bytes(b);
    if c == codec::RPC_CODE_MISMATCH {
        return Err(Error::new(
            ErrorKind::Verbatim,
            format!("RPCError: {host}:{port} is not an RPC server with key '{key}'"),
        ));
    } else if c == codec::RPC_CODE_DUPLICATE {
        return Err(Error::new(
            ErrorKind::Verbatim,
            format!("RPCError: {host}:{port}: duplicate key '{key}'"),
        ));
    } else if c != codec::RPC_MAGIC {
        return Err(Error::new(
            ErrorKind::Verbatim,
            format!("RPCError: {host}:{port} is not an RPC server (bad handshake reply)"),
        ));
    }
    s.read_exact(&mut b).map_err(io)?;
    let n = i32::from_le_bytes(b);
    if !(0..=4096).contains(&n) {
        return Err(Error::value_fmt(format_args!(
            "rpc.Connect: the server key length {n} is invalid"
        )));
    }
    let mut rk = vec![0u8; n as usize];
    s.read_exact(&mut rk).map_err(io)?;
    s.set_read_timeout(None).map_err(io)?;
    let chan = super::endpoint::BufferedStream::new(s).map_err(io)?;
    let sess = ClientSession::create(Endpoint::new(Box::new(chan), None), false)?;
    init_session(&sess, ctor)?;
    Ok(sess)
}

fn init_session(sess: &Arc<ClientSession>, ctor: &[WireValue]) -> Result<()> {
    let mut w = Writer::packet(code::INIT_SERVER);
    w.u64(codec::PROTOCOL_VERSION.len() as u64);
    w.bytes(codec::PROTOCOL_VERSION.as_bytes());
    w.seq(ctor);
    sess.request(&w.finish()).map(|_| ())
}

/// A channel to a session served in this process (for `rpc.LocalSession`).
struct LoopbackChannel {
    server: super::server::EventServer,
    out: std::collections::VecDeque<u8>,
}

impl Channel for LoopbackChannel {
    fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
        let out = &mut self.out;
        self.server
            .feed(data, &mut |b| {
                out.extend(b);
                Ok(())
            })
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(())
    }
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.out.len());
        for (d, s) in buf.iter_mut().zip(self.out.drain(..n)) {
            *d = s;
        }
        Ok(n)
    }
}

/// A session served by this process (`rpc.LocalSession`).
pub fn local_session() -> Result<Arc<ClientSession>> {
    let ch = LoopbackChannel {
        server: super::server::EventServer::new(false),
        out: Default::default(),
    };
    let sess = ClientSession::create(Endpoint::new(Box::new(ch), None), true)?;
    init_session(&sess, &[])?;
    Ok(sess)
}
