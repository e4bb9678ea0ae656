//! Values crossing the PackedFunc convention: borrowed arguments ([`ArgValue`], [`Args`]) and
//! owned return values ([`RetValue`]), with the conversions to and from `TVMValue` + type code.

use super::dtype::{dtype_from_string, dtype_to_string};
use super::error::{Error, Result};
use super::types::{type_code as tc, DLDataType, DLDevice, DLTensor, TVMByteArray, TVMValue};
use crate::object::containers::StringObj;
use crate::object::{
    Object, ObjectRef, ObjectType, PAYLOAD_OFFSET, TYPE_MODULE, TYPE_NDARRAY, TYPE_PACKED_FUNC,
};
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::marker::PhantomData;

/// A borrowed object argument: valid while the call's arguments are.
#[derive(Copy, Clone)]
pub struct ObjArg<'a> {
    ptr: *mut Object,
    _life: PhantomData<&'a Object>,
}

impl<'a> ObjArg<'a> {
    /// Wraps a non-null object pointer the caller keeps alive for `'a`.
    ///
    /// # Safety
    /// `ptr` must point to a live object for `'a`.
    pub unsafe fn new(ptr: *mut Object) -> Self {
        ObjArg {
            ptr,
            _life: PhantomData,
        }
    }

    /// The raw pointer.
    pub fn as_ptr(&self) -> *mut Object {
        self.ptr
    }

    /// The type index.
    pub fn type_index(&self) -> u32 {
        // SAFETY: live for 'a by construction.
        unsafe { (*self.ptr).type_index() }
    }

    /// A new owning reference.
    pub fn to_ref(&self) -> ObjectRef {
        // SAFETY: live for 'a by construction; from_borrowed adds a reference.
        unsafe { ObjectRef::from_borrowed_live(self.ptr) }
    }

    /// The payload when the object holds a `T`.
    pub fn downcast_ref<T: ObjectType>(&self) -> Option<&'a T> {
        if self.type_index() == T::type_index() {
            // SAFETY: the index identifies the payload type; the object lives for 'a.
            Some(unsafe { &*crate::object::payload_ptr::<T>(self.ptr) })
        } else {
            None
        }
    }
}

/// An opaque handle (`kTVMOpaqueHandle`): an address the runtime passes on without reading.
///
/// The functions that receive one may use it as whatever their convention names (a stream, a
/// blob reader, a device plugin's table), so safe code cannot make one from an arbitrary
/// address: the only constructors are [`RawHandle::null`] and the `unsafe`
/// [`RawHandle::new`]. The runtime's own globals that read through a handle accept only the
/// handles they can vouch for (a blob reader lent to loaders on the calling thread, a Relax VM
/// running on it, a stream the runtime created and has not freed) and refuse any other with
/// an error. Only the C entry points (`TVMSetStream`, `TVMDeviceRegisterPlugin`) take a
/// handle on their C caller's word.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct RawHandle(*mut c_void);

impl RawHandle {
    /// The NULL handle.
    #[inline(always)]
    pub const fn null() -> RawHandle {
        RawHandle(std::ptr::null_mut())
    }

    /// Wraps an address as an opaque handle.
    ///
    /// # Safety
    /// `ptr` must be NULL, or valid for whatever use the functions this value is passed to
    /// make of it by their convention (dereferencing it as the object they expect), for as
    /// long as the value is passed around.
    #[inline(always)]
    pub const unsafe fn new(ptr: *mut c_void) -> RawHandle {
        RawHandle(ptr)
    }

    /// The address.
    #[inline(always)]
    pub const fn as_ptr(self) -> *mut c_void {
        self.0
    }

    /// Whether it is NULL.
    #[inline(always)]
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
}

/// A `DLTensor*` not owned by an object (`kTVMDLTensorHandle`).
///
/// Functions read and write the tensor it names, so safe code cannot make one from an
/// arbitrary address: the only constructor is the `unsafe` [`TensorRef::new`]. Safe code
/// passes arrays as objects (`ArgValue::from(&ndarray)`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct TensorRef(*mut DLTensor);

impl TensorRef {
    /// Wraps a tensor pointer.
    ///
    /// # Safety
    /// `ptr` must be non-NULL and point to a valid `DLTensor` (its shape, strides and data
    /// valid as DLPack requires) that stays valid, and whose memory nobody else accesses in a
    /// way that conflicts with the callee's reads and writes, for as long as the value is
    /// passed around.
    #[inline(always)]
    pub const unsafe fn new(ptr: *mut DLTensor) -> TensorRef {
        TensorRef(ptr)
    }

    /// The tensor pointer.
    #[inline(always)]
    pub const fn as_ptr(self) -> *mut DLTensor {
        self.0
    }
}

/// One argument, viewed without taking ownership.
///
/// Values that carry raw pointers ([`ArgValue::Handle`], [`ArgValue::DLTensor`], objects)
/// are built only through `unsafe` constructors ([`RawHandle::new`], [`TensorRef::new`],
/// [`ObjArg::new`]) or from owned references (`ArgValue::from(&ndarray)`), so that calling a
/// function with safe-made arguments cannot reach undefined behaviour:
///
/// ```compile_fail,E0133
/// # use tvm_runtime::packed_func::{ArgValue, RawHandle};
/// let h = ArgValue::Handle(RawHandle::new(0x10 as *mut _));
/// ```
#[derive(Copy, Clone)]
pub enum ArgValue<'a> {
    /// `kTVMNullptr`.
    Null,
    /// `kTVMArgInt`.
    Int(i64),
    /// `kTVMArgFloat`.
    Float(f64),
    /// `kTVMArgBool`.
    Bool(bool),
    /// `kTVMOpaqueHandle`.
    Handle(RawHandle),
    /// `kTVMDataType`.
    DataType(DLDataType),
    /// `kDLDevice`.
    Device(DLDevice),
    /// `kTVMStr`.
    Str(&'a CStr),
    /// `kTVMBytes`.
    Bytes(&'a [u8]),
    /// `kTVMDLTensorHandle`: a tensor not owned by an object.
    DLTensor(TensorRef),
    /// An object, module, function or NDArray (by its object header).
    Object(ObjArg<'a>),
}

impl<'a> ArgValue<'a> {
    /// Reads one C value.
    ///
    /// # Safety
    /// `v` must be a valid value of type code `code` whose pointees live for `'a`.
    pub unsafe fn from_c(v: TVMValue, code: i32) -> Result<ArgValue<'a>> {
        // SAFETY: (whole block) the caller guarantees `v` is valid for `code`.
        unsafe {
            Ok(match code {
                tc::INT => ArgValue::Int(v.v_int64),
                tc::FLOAT => ArgValue::Float(v.v_float64),
                tc::BOOL => ArgValue::Bool(v.v_int64 != 0),
                tc::OPAQUE_HANDLE => ArgValue::Handle(RawHandle::new(v.v_handle)),
                tc::NULLPTR => ArgValue::Null,
                tc::DATA_TYPE => ArgValue::DataType(v.v_type),
                tc::DEVICE => ArgValue::Device(v.v_device),
                tc::STR => {
                    if v.v_str.is_null() {
                        ArgValue::Null
                    } else {
                        ArgValue::Str(CStr::from_ptr(v.v_str))
                    }
                }
                tc::BYTES => {
                    let b = v.v_handle as *const TVMByteArray;
                    if b.is_null() {
                        return Err(Error::value("bytes argument is NULL"));
                    }
                    let b = &*b;
                    if b.size == 0 {
                        ArgValue::Bytes(&[])
                    } else {
                        ArgValue::Bytes(std::slice::from_raw_parts(b.data as *const u8, b.size))
                    }
                }
                tc::DLTENSOR_HANDLE => {
                    if v.v_handle.is_null() {
                        ArgValue::Null
                    } else {
                        ArgValue::DLTensor(TensorRef::new(v.v_handle as *mut DLTensor))
                    }
                }
                tc::NDARRAY_HANDLE => {
                    if v.v_handle.is_null() {
                        ArgValue::Null
                    } else {
                        let obj = (v.v_handle as *mut u8).sub(PAYLOAD_OFFSET) as *mut Object;
                        ArgValue::Object(ObjArg::new(obj))
                    }
                }
                tc::OBJECT_HANDLE | tc::MODULE_HANDLE | tc::PACKED_FUNC_HANDLE => {
                    if v.v_handle.is_null() {
                        ArgValue::Null
                    } else {
                        ArgValue::Object(ObjArg::new(v.v_handle as *mut Object))
                    }
                }
                tc::OBJECT_RVALUE_REF_ARG => {
                    let slot = v.v_handle as *mut *mut Object;
                    if slot.is_null() || (*slot).is_null() {
                        ArgValue::Null
                    } else {
                        ArgValue::Object(ObjArg::new(*slot))
                    }
                }
                c => {
                    return Err(Error::type_error_fmt(format_args!(
                        "unknown argument type code {c}"
                    )))
                }
            })
        }
    }

    /// Writes this value in C form. Strings and objects stay borrowed from `self`.
    pub fn to_c(&self) -> (TVMValue, i32) {
        match *self {
            ArgValue::Null => (
                TVMValue {
                    v_handle: std::ptr::null_mut(),
                },
                tc::NULLPTR,
            ),
            ArgValue::Int(i) => (TVMValue { v_int64: i }, tc::INT),
            ArgValue::Float(f) => (TVMValue { v_float64: f }, tc::FLOAT),
            ArgValue::Bool(b) => (TVMValue { v_int64: b as i64 }, tc::INT),
            ArgValue::Handle(h) => (TVMValue { v_handle: h.0 }, tc::OPAQUE_HANDLE),
            ArgValue::DataType(t) => (TVMValue { v_type: t }, tc::DATA_TYPE),
            ArgValue::Device(d) => (TVMValue { v_device: d }, tc::DEVICE),
            ArgValue::Str(s) => (TVMValue { v_str: s.as_ptr() }, tc::STR),
            ArgValue::Bytes(_) => (
                TVMValue {
                    v_handle: std::ptr::null_mut(),
                },
                tc::BYTES,
            ),
            ArgValue::DLTensor(t) => (
                TVMValue {
                    v_handle: t.0 as *mut c_void,
                },
                tc::DLTENSOR_HANDLE,
            ),
            // SAFETY: the borrowed object lives as long as `self`.
            ArgValue::Object(o) => unsafe { object_to_c(o.as_ptr()) },
        }
    }

    /// Name of this value's kind, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            ArgValue::Null => "NULL",
            ArgValue::Int(_) => "int",
            ArgValue::Float(_) => "float",
            ArgValue::Bool(_) => "bool",
            ArgValue::Handle(_) => "handle",
            ArgValue::DataType(_) => "DLDataType",
            ArgValue::Device(_) => "DLDevice",
            ArgValue::Str(_) => "str",
            ArgValue::Bytes(_) => "bytes",
            ArgValue::DLTensor(_) => "DLTensor*",
            ArgValue::Object(o) => match o.type_index() {
                TYPE_NDARRAY => "NDArray",
                TYPE_MODULE => "Module",
                TYPE_PACKED_FUNC => "PackedFunc",
                _ => "Object",
            },
        }
    }
}

/// Writes an object pointer in C form: NDArrays as their `DLTensor*`, modules and functions
/// with their own codes.
///
/// # Safety
/// `p` must point to a live object.
pub unsafe fn object_to_c(p: *mut Object) -> (TVMValue, i32) {
    // SAFETY: caller contract.
    let index = unsafe { (*p).type_index() };
    match index {
        TYPE_NDARRAY => (
            TVMValue {
                // SAFETY: the DLTensor is the first field of the NDArray payload.
                v_handle: unsafe { (p as *mut u8).add(PAYLOAD_OFFSET) } as *mut c_void,
            },
            tc::NDARRAY_HANDLE,
        ),
        TYPE_MODULE => (
            TVMValue {
                v_handle: p as *mut c_void,
            },
            tc::MODULE_HANDLE,
        ),
        TYPE_PACKED_FUNC => (
            TVMValue {
                v_handle: p as *mut c_void,
            },
            tc::PACKED_FUNC_HANDLE,
        ),
        _ => (
            TVMValue {
                v_handle: p as *mut c_void,
            },
            tc::OBJECT_HANDLE,
        ),
    }
}

/// The arguments of one call, viewed in place. Made only by the `unsafe` constructors
/// ([`Args::new`], [`Args::from_raw`]): the values are read as their codes say.
#[derive(Copy, Clone)]
pub struct Args<'a> {
    values: &'a [TVMValue],
    codes: &'a [i32],
}

fn type_mismatch(i: usize, expected: &str, got: &ArgValue) -> Error {
    Error::type_error_fmt(format_args!(
        "argument {i}: expected {expected} but got {}",
        got.kind_name()
    ))
}

impl<'a> Args<'a> {
    /// Views argument slices (the shorter length counts).
    ///
    /// # Safety
    /// Each value must be a valid value of its type code whose pointees live for `'a`.
    #[inline(always)]
    pub unsafe fn new(values: &'a [TVMValue], codes: &'a [i32]) -> Args<'a> {
        let n = values.len().min(codes.len());
        Args {
            values: &values[..n],
            codes: &codes[..n],
        }
    }

    /// The argument values (read each as its code says).
    #[inline(always)]
    pub fn values(&self) -> &'a [TVMValue] {
        self.values
    }

    /// The arguments' type codes.
    #[inline(always)]
    pub fn codes(&self) -> &'a [i32] {
        self.codes
    }

    /// The arguments from `from` on (none when `from` is past the end).
    #[inline(always)]
    pub fn rest(&self, from: usize) -> Args<'a> {
        let from = from.min(self.len());
        Args {
            values: &self.values[from..],
            codes: &self.codes[from..],
        }
    }

    /// Views C arrays.
    ///
    /// # Safety
    /// Both arrays must hold `n` valid entries living for `'a` (or `n` is 0).
    pub unsafe fn from_raw(values: *const TVMValue, codes: *const i32, n: i32) -> Args<'a> {
        if n <= 0 || values.is_null() || codes.is_null() {
            return Args {
                values: &[],
                codes: &[],
            };
        }
        // SAFETY: caller guarantees `n` entries.
        unsafe {
            Args {
                values: std::slice::from_raw_parts(values, n as usize),
                codes: std::slice::from_raw_parts(codes, n as usize),
            }
        }
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    /// Fails unless there are exactly `n` arguments.
    #[inline(never)]
    pub fn expect_len(&self, n: usize, func: &str) -> Result<()> {
        if self.len() != n {
            return Err(Error::value_fmt(format_args!(
                "{func} expects {n} arguments but {} were given",
                self.len()
            )));
        }
        Ok(())
    }

    /// Argument `i`.
    pub fn get(&self, i: usize) -> Result<ArgValue<'a>> {
        match (self.values.get(i), self.codes.get(i)) {
            // SAFETY: `from_raw`'s contract makes every entry valid for its code.
            (Some(&v), Some(&c)) => unsafe { ArgValue::from_c(v, c) },
            _ => Err(Error::index_fmt(format_args!(
                "argument index {i} out of range: {} arguments",
                self.len()
            ))),
        }
    }

    /// The argument at `i` as an index into a sequence of `len` items (`what` names the
    /// function in the error).
    #[inline(never)]
    pub fn index(&self, i: usize, len: usize, what: &str) -> Result<usize> {
        let idx = self.i64(i)?;
        if idx < 0 || idx as usize >= len {
            return Err(Error::internal_fmt(format_args!(
                "{what}: index {idx} out of range for size {len}"
            )));
        }
        Ok(idx as usize)
    }

    /// Argument `i` as an integer (int or bool).
    #[inline(never)]
    pub fn i64(&self, i: usize) -> Result<i64> {
        match self.get(i)? {
            ArgValue::Int(v) => Ok(v),
            ArgValue::Bool(b) => Ok(b as i64),
            v => Err(type_mismatch(i, "int", &v)),
        }
    }

    /// Argument `i` as a float (float or int).
    #[inline(never)]
    pub fn f64(&self, i: usize) -> Result<f64> {
        match self.get(i)? {
            ArgValue::Float(v) => Ok(v),
            ArgValue::Int(v) => Ok(v as f64),
            v => Err(type_mismatch(i, "float", &v)),
        }
    }

    /// Argument `i` as a string (a C string or a String object).
    #[inline(never)]
    pub fn str(&self, i: usize) -> Result<&'a str> {
        match self.get(i)? {
            ArgValue::Str(s) => s
                .to_str()
                .map_err(|_| Error::value_fmt(format_args!("argument {i}: string is not UTF-8"))),
            ArgValue::Object(o) => match o.downcast_ref::<StringObj>() {
                Some(s) => Ok(s.as_str()),
                None => Err(type_mismatch(i, "str", &ArgValue::Object(o))),
            },
            v => Err(type_mismatch(i, "str", &v)),
        }
    }

    /// Argument `i` as a data type (a DataType or its name).
    #[inline(never)]
    pub fn dtype(&self, i: usize) -> Result<DLDataType> {
        match self.get(i)? {
            ArgValue::DataType(t) => Ok(t),
            ArgValue::Str(_) | ArgValue::Object(_) => dtype_from_string(self.str(i)?),
            v => Err(type_mismatch(i, "DataType", &v)),
        }
    }

    /// Argument `i` as a device.
    #[inline(never)]
    pub fn device(&self, i: usize) -> Result<DLDevice> {
        match self.get(i)? {
            ArgValue::Device(d) => Ok(d),
            v => Err(type_mismatch(i, "Device", &v)),
        }
    }

    /// Argument `i` as an opaque handle's address (handle or NULL).
    #[inline(never)]
    pub fn handle(&self, i: usize) -> Result<*mut c_void> {
        match self.get(i)? {
            ArgValue::Handle(h) => Ok(h.0),
            ArgValue::Null => Ok(std::ptr::null_mut()),
            v => Err(type_mismatch(i, "handle", &v)),
        }
    }

    /// Argument `i` as an object of any type (NULL gives `None`).
    #[inline(never)]
    pub fn object(&self, i: usize) -> Result<Option<ObjArg<'a>>> {
        match self.get(i)? {
            ArgValue::Object(o) => Ok(Some(o)),
            ArgValue::Null => Ok(None),
            v => Err(type_mismatch(i, "Object", &v)),
        }
    }

    /// Argument `i` as an object holding `T`.
    pub fn downcast<T: ObjectType>(&self, i: usize) -> Result<&'a T> {
        let v = self.get(i)?;
        if let ArgValue::Object(o) = v {
            if let Some(t) = o.downcast_ref::<T>() {
                return Ok(t);
            }
        }
        Err(type_mismatch(i, T::TYPE_KEY, &v))
    }

    /// Argument `i` as an owning reference to an object holding `T`.
    pub fn object_ref<T: ObjectType>(&self, i: usize) -> Result<ObjectRef> {
        let v = self.get(i)?;
        if let ArgValue::Object(o) = v {
            if o.type_index() == T::type_index() {
                return Ok(o.to_ref());
            }
        }
        Err(type_mismatch(i, T::TYPE_KEY, &v))
    }
}

/// An owned return value.
///
/// Laid out as a C tagged union (`#[repr(C, u32)]`: the tag, then the payload at offset 8):
/// each variant's tag is its classic type code, and the payload of a plain variant has the
/// layout of a `TVMValue`, so the C call paths move plain values in and out of a slot without
/// decoding them ([`RetValue::write_raw`], [`RetValue::read_raw`]).
#[derive(Clone, Default)]
#[repr(C, u32)]
pub enum RetValue {
    /// Nothing (`kTVMNullptr`).
    #[default]
    Null = tc::NULLPTR as u32,
    /// An integer.
    Int(i64) = tc::INT as u32,
    /// A float.
    Float(f64) = tc::FLOAT as u32,
    /// A bool (returned with `kTVMArgBool`).
    Bool(bool) = tc::BOOL as u32,
    /// An opaque handle.
    Handle(RawHandle) = tc::OPAQUE_HANDLE as u32,
    /// A data type (returned to C as its name, like the reference).
    DataType(DLDataType) = tc::DATA_TYPE as u32,
    /// A device.
    Device(DLDevice) = tc::DEVICE as u32,
    /// A string (returned in thread-local storage).
    Str(String) = tc::STR as u32,
    /// Bytes (returned in thread-local storage).
    Bytes(Vec<u8>) = tc::BYTES as u32,
    /// A raw tensor pointer owned elsewhere.
    DLTensor(TensorRef) = tc::DLTENSOR_HANDLE as u32,
    /// An object (including modules, functions, NDArrays).
    Object(ObjectRef) = tc::OBJECT_HANDLE as u32,
}

/// What `#[derive(Debug)]` would print (`Null`, `Int(3)`, ...), through one tuple printer for
/// all the variants instead of one per variant.
impl std::fmt::Debug for RetValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let float;
        let (name, v): (&str, &dyn std::fmt::Debug) = match self {
            RetValue::Null => return f.write_str("Null"),
            RetValue::Int(v) => ("Int", v),
            RetValue::Float(v) => {
                // As `f64`'s Debug prints it, without core's float formatting.
                float = super::float_text::DebugF64(*v);
                ("Float", &float)
            }
            RetValue::Bool(v) => ("Bool", v),
            RetValue::Handle(v) => ("Handle", v),
            RetValue::DataType(v) => ("DataType", v),
            RetValue::Device(v) => ("Device", v),
            RetValue::Str(v) => ("Str", v),
            RetValue::Bytes(v) => ("Bytes", v),
            RetValue::DLTensor(v) => ("DLTensor", v),
            RetValue::Object(v) => ("Object", v),
        };
        f.debug_tuple(name).field(v).finish()
    }
}

/// Bit `t` set for each [`RetValue`] tag `t` whose variant owns nothing ([`RetValue::is_pod`]).
pub const POD_TAGS: u32 = 1 << tc::NULLPTR
    | 1 << tc::INT
    | 1 << tc::FLOAT
    | 1 << tc::BOOL
    | 1 << tc::OPAQUE_HANDLE
    | 1 << tc::DEVICE
    | 1 << tc::DLTENSOR_HANDLE;

/// Bit `t` set for each [`RetValue`] tag `t` whose payload is a `TVMValue` bit for bit and
/// is returned to C with the tag as its type code ([`RetValue::read_raw`]). `Bool` is left
/// out (its payload is one byte).
pub const RAW_OUT_TAGS: u32 = 1 << tc::NULLPTR
    | 1 << tc::INT
    | 1 << tc::FLOAT
    | 1 << tc::OPAQUE_HANDLE
    | 1 << tc::DEVICE
    | 1 << tc::DLTENSOR_HANDLE;

/// Bit `c` set for each classic type code `c` below 32 that [`RetValue::write_raw`] takes:
/// the codes whose value is kept bit for bit ([`RetValue::pod_from_c`] takes a NULL
/// `DLTensor*` and booleans too, converting them, so they are left out).
pub const RAW_IN_CODES: u32 =
    1 << tc::NULLPTR | 1 << tc::INT | 1 << tc::FLOAT | 1 << tc::OPAQUE_HANDLE | 1 << tc::DEVICE;

// SAFETY: raw handles in a RetValue are opaque values the runtime never dereferences on
// another thread by itself; objects are Send + Sync.
unsafe impl Send for RetValue {}

struct RetStore {
    s: CString,
    bytes: Vec<u8>,
    arr: TVMByteArray,
}

thread_local! {
    static RET_STORE: RefCell<RetStore> = RefCell::new(RetStore {
        s: CString::default(),
        bytes: Vec::new(),
        arr: TVMByteArray { data: std::ptr::null(), size: 0 },
    });
}

impl RetValue {
    /// The tag of the value in `slot` (its classic type code for the plain variants).
    ///
    /// # Safety
    /// `slot` must point to a valid `RetValue`.
    #[inline(always)]
    pub unsafe fn raw_tag(slot: *const RetValue) -> u32 {
        // SAFETY: `#[repr(C, u32)]`: the tag is the first field.
        unsafe { *(slot as *const u32) }
    }

    /// The tag and the payload of the value in `slot` as a `TVMValue`: for the tags of
    /// [`RAW_OUT_TAGS`], that value with the tag as its type code. (For `Null` the payload
    /// is what was last written there, see [`RetValue::write_raw`].)
    ///
    /// # Safety
    /// `slot` must point to a valid `RetValue`.
    #[inline(always)]
    pub unsafe fn read_raw(slot: *const RetValue) -> (u32, TVMValue) {
        // SAFETY: `#[repr(C, u32)]`: the tag first, the payload union at offset 8 (its
        // alignment); a `TVMValue` is a union, so bytes the variant leaves unset are allowed.
        unsafe {
            let p = slot as *const u8;
            (*(p as *const u32), *(p.add(8) as *const TVMValue))
        }
    }

    /// Overwrites the value in `slot` with the plain value `v` of type code `code`, without
    /// dropping the old one.
    ///
    /// # Safety
    /// `slot` must point to a `RetValue` that owns nothing (or to uninitialised memory for
    /// one); `code` must be in [`RAW_IN_CODES`] and `v` a value of it.
    #[inline(always)]
    pub unsafe fn write_raw(slot: *mut RetValue, v: TVMValue, code: u32) {
        // SAFETY: `#[repr(C, u32)]`: for these codes the tag is the code and the variant's
        // payload (none, an i64, an f64, a pointer, a DLDevice) sits at offset 8 with the
        // layout of the `TVMValue` field the code selects.
        unsafe {
            let p = slot as *mut u8;
            (p as *mut u32).write(code);
            (p.add(8) as *mut TVMValue).write(v);
        }
    }

    /// A plain value (no ownership, nothing to free) from C, or `None` for strings, bytes,
    /// objects and unknown codes. Never panics: used on the hot paths outside the guard.
    ///
    /// # Safety
    /// `v` must be a valid value of type code `code` (handles and tensors as
    /// [`RawHandle::new`] and [`TensorRef::new`] require).
    #[inline(always)]
    pub unsafe fn pod_from_c(v: TVMValue, code: i32) -> Option<RetValue> {
        // SAFETY: each arm reads the union field its type code selects; handles and tensors
        // are valid by the caller's contract.
        unsafe {
            Some(match code {
                tc::INT => RetValue::Int(v.v_int64),
                tc::FLOAT => RetValue::Float(v.v_float64),
                tc::BOOL => RetValue::Bool(v.v_int64 != 0),
                tc::OPAQUE_HANDLE => RetValue::Handle(RawHandle::new(v.v_handle)),
                tc::NULLPTR => RetValue::Null,
                tc::DEVICE => RetValue::Device(v.v_device),
                tc::DLTENSOR_HANDLE if !v.v_handle.is_null() => {
                    RetValue::DLTensor(TensorRef::new(v.v_handle as *mut DLTensor))
                }
                _ => return None,
            })
        }
    }

    /// Whether [`RetValue::pod_from_c`] takes `(v, code)`: a plain value, or a non-NULL
    /// `DLTensor*`. Builds no value, so a caller that only asks has nothing to drop.
    #[inline(always)]
    pub fn is_pod_c(v: &TVMValue, code: i32) -> bool {
        match code {
            tc::INT | tc::FLOAT | tc::BOOL | tc::OPAQUE_HANDLE | tc::NULLPTR | tc::DEVICE => true,
            // SAFETY: reading the pointer field of the union is reading plain bits.
            tc::DLTENSOR_HANDLE => !unsafe { v.v_handle }.is_null(),
            _ => false,
        }
    }

    /// Whether the value owns nothing (so overwriting or dropping it runs no code).
    #[inline(always)]
    pub fn is_pod(&self) -> bool {
        matches!(
            self,
            RetValue::Null
                | RetValue::Int(_)
                | RetValue::Float(_)
                | RetValue::Bool(_)
                | RetValue::Handle(_)
                | RetValue::Device(_)
                | RetValue::DLTensor(_)
        )
    }

    /// The C form of a plain value, or `None` when the value owns something. Never panics.
    #[inline(always)]
    pub fn pod_to_c(&self) -> Option<(TVMValue, i32)> {
        Some(match *self {
            RetValue::Null => (
                TVMValue {
                    v_handle: std::ptr::null_mut(),
                },
                tc::NULLPTR,
            ),
            RetValue::Int(i) => (TVMValue { v_int64: i }, tc::INT),
            RetValue::Float(f) => (TVMValue { v_float64: f }, tc::FLOAT),
            RetValue::Bool(b) => (TVMValue { v_int64: b as i64 }, tc::BOOL),
            RetValue::Handle(h) => (TVMValue { v_handle: h.0 }, tc::OPAQUE_HANDLE),
            RetValue::Device(d) => (TVMValue { v_device: d }, tc::DEVICE),
            RetValue::DLTensor(t) => (
                TVMValue {
                    v_handle: t.0 as *mut c_void,
                },
                tc::DLTENSOR_HANDLE,
            ),
            _ => return None,
        })
    }

    /// Copies a C value (objects gain a reference), as `TVMCFuncSetReturn` does.
    ///
    /// # Safety
    /// `v` must be a valid value of type code `code`.
    pub unsafe fn from_c_copy(v: TVMValue, code: i32) -> Result<RetValue> {
        // SAFETY: forwarded contract.
        let a = unsafe { ArgValue::from_c(v, code)? };
        Ok(match a {
            ArgValue::Null => RetValue::Null,
            ArgValue::Int(i) => RetValue::Int(i),
            ArgValue::Float(f) => RetValue::Float(f),
            ArgValue::Bool(b) => RetValue::Bool(b),
            ArgValue::Handle(h) => RetValue::Handle(h),
            ArgValue::DataType(t) => RetValue::DataType(t),
            ArgValue::Device(d) => RetValue::Device(d),
            ArgValue::Str(s) => RetValue::Str(s.to_string_lossy().into_owned()),
            ArgValue::Bytes(b) => RetValue::Bytes(b.to_vec()),
            ArgValue::DLTensor(t) => RetValue::DLTensor(t),
            ArgValue::Object(o) => RetValue::Object(o.to_ref()),
        })
    }

    /// Takes a C value that carries ownership (objects are adopted, not retained), as values
    /// returned by compiled code are.
    ///
    /// # Safety
    /// `v` must be a valid value of type code `code`; object codes carry one reference.
    pub unsafe fn from_c_take(v: TVMValue, code: i32) -> Result<RetValue> {
        // SAFETY: forwarded contract.
        unsafe {
            match code {
                tc::NULLPTR => Ok(RetValue::Null),
                tc::OBJECT_HANDLE | tc::MODULE_HANDLE | tc::PACKED_FUNC_HANDLE => {
                    Ok(match ObjectRef::from_raw(v.v_handle as *mut Object) {
                        Some(o) => RetValue::Object(o),
                        None => RetValue::Null,
                    })
                }
                tc::NDARRAY_HANDLE => {
                    if v.v_handle.is_null() {
                        return Ok(RetValue::Null);
                    }
                    let obj = (v.v_handle as *mut u8).sub(PAYLOAD_OFFSET) as *mut Object;
                    Ok(RetValue::Object(
                        ObjectRef::from_raw(obj).expect("non-null"),
                    ))
                }
                _ => Self::from_c_copy(v, code),
            }
        }
    }

    /// Moves the value out to C, as `TVMFuncCall` returns it: objects transfer their reference
    /// to the caller; strings, data types and bytes live in thread-local storage until the
    /// next call on this thread.
    pub fn into_c(self) -> (TVMValue, i32) {
        if let Some(c) = self.pod_to_c() {
            return c;
        }
        match self {
            RetValue::DataType(t) => Self::store_str(dtype_to_string(t)),
            RetValue::Str(s) => Self::store_str(s),
            RetValue::Bytes(b) => RET_STORE.with(|st| {
                let mut st = st.borrow_mut();
                st.bytes = b;
                st.arr = TVMByteArray {
                    data: st.bytes.as_ptr() as *const c_char,
                    size: st.bytes.len(),
                };
                (
                    TVMValue {
                        v_handle: &mut st.arr as *mut TVMByteArray as *mut c_void,
                    },
                    tc::BYTES,
                )
            }),
            RetValue::Object(o) => {
                let p = o.into_raw();
                // SAFETY: `p` carries the reference we just gave up, so it is live.
                unsafe { object_to_c(p) }
            }
            // Plain values were returned above.
            pod => pod.pod_to_c().unwrap_or_default(),
        }
    }

    fn store_str(s: String) -> (TVMValue, i32) {
        let c = CString::new(s).unwrap_or_else(|e| {
            let mut v = e.into_vec();
            v.retain(|&b| b != 0);
            CString::new(v).unwrap_or_default()
        });
        RET_STORE.with(|st| {
            let mut st = st.borrow_mut();
            st.s = c;
            (
                TVMValue {
                    v_str: st.s.as_ptr(),
                },
                tc::STR,
            )
        })
    }

    /// Borrowed view as an argument (to pass a returned value on).
    pub fn as_arg(&self) -> ArgValue<'_> {
        match self {
            RetValue::Null => ArgValue::Null,
            RetValue::Int(i) => ArgValue::Int(*i),
            RetValue::Float(f) => ArgValue::Float(*f),
            RetValue::Bool(b) => ArgValue::Bool(*b),
            RetValue::Handle(h) => ArgValue::Handle(*h),
            RetValue::DataType(t) => ArgValue::DataType(*t),
            RetValue::Device(d) => ArgValue::Device(*d),
            RetValue::Str(_) | RetValue::Bytes(_) => ArgValue::Null,
            RetValue::DLTensor(t) => ArgValue::DLTensor(*t),
            // SAFETY: `self` holds a reference, so the object lives as long as the borrow.
            RetValue::Object(o) => ArgValue::Object(unsafe { ObjArg::new(o.as_ptr()) }),
        }
    }

    /// The integer held (int or bool).
    pub fn as_i64(&self) -> Result<i64> {
        match self {
            RetValue::Int(i) => Ok(*i),
            RetValue::Bool(b) => Ok(*b as i64),
            _ => Err(Error::type_error_fmt(format_args!(
                "expected int, got {self:?}"
            ))),
        }
    }

    /// The object held.
    pub fn into_object(self) -> Result<ObjectRef> {
        match self {
            RetValue::Object(o) => Ok(o),
            other => Err(Error::type_error_fmt(format_args!(
                "expected an object, got {other:?}"
            ))),
        }
    }
}

impl From<i64> for RetValue {
    fn from(v: i64) -> Self {
        RetValue::Int(v)
    }
}
impl From<f64> for RetValue {
    fn from(v: f64) -> Self {
        RetValue::Float(v)
    }
}
impl From<String> for RetValue {
    fn from(v: String) -> Self {
        RetValue::Str(v)
    }
}
impl From<ObjectRef> for RetValue {
    fn from(v: ObjectRef) -> Self {
        RetValue::Object(v)
    }
}
impl From<()> for RetValue {
    fn from(_: ()) -> Self {
        RetValue::Null
    }
}

/// Whether `p` is the thread-local byte array `TVMFuncCall` returns bytes in.
pub fn is_returned_bytes(p: *const TVMByteArray) -> bool {
    RET_STORE.with(|st| std::ptr::eq(&st.borrow().arr, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `TVMValue`'s eight bytes as an integer.
    fn bits(v: TVMValue, code: i32) -> i64 {
        if code == tc::OPAQUE_HANDLE || code == tc::DLTENSOR_HANDLE {
            // SAFETY: a handle value sets the pointer, which on 32-bit targets is only the
            // first four of the eight bytes.
            return unsafe { v.v_handle } as usize as i64;
        }
        // SAFETY: every other field of the union used here sets all eight bytes (DLDevice is
        // two i32s).
        unsafe { v.v_int64 }
    }

    /// Debug prints what `#[derive(Debug)]` printed.
    #[test]
    fn debug_reads_like_derive() {
        assert_eq!(format!("{:?}", RetValue::Null), "Null");
        assert_eq!(format!("{:?}", RetValue::Int(-3)), "Int(-3)");
        assert_eq!(format!("{:?}", RetValue::Bool(true)), "Bool(true)");
        assert_eq!(format!("{:?}", RetValue::Str("a".into())), "Str(\"a\")");
        assert_eq!(
            format!("{:?}", RetValue::Bytes(vec![1, 2])),
            "Bytes([1, 2])"
        );
        assert_eq!(
            format!("{:#?}", RetValue::Float(1.5)),
            "Float(\n    1.5,\n)"
        );
    }

    /// The raw accessors agree with the typed enum for every plain variant, both ways.
    #[test]
    fn raw_layout_matches_the_variants() {
        let dev = DLDevice {
            device_type: 2,
            device_id: 3,
        };
        let mut x = 7u8;
        let handle = &mut x as *mut u8 as *mut c_void;
        let cases = [
            (RetValue::Int(-42), TVMValue { v_int64: -42 }, tc::INT),
            (RetValue::Float(2.5), TVMValue { v_float64: 2.5 }, tc::FLOAT),
            (
                // SAFETY: a handle to a live local, never dereferenced.
                RetValue::Handle(unsafe { RawHandle::new(handle) }),
                TVMValue { v_handle: handle },
                tc::OPAQUE_HANDLE,
            ),
            (
                RetValue::Device(dev),
                TVMValue { v_device: dev },
                tc::DEVICE,
            ),
        ];
        for (rv, v, code) in cases {
            // SAFETY: `rv` is a valid RetValue.
            let (tag, raw) = unsafe { RetValue::read_raw(&rv) };
            assert_eq!(tag, code as u32);
            assert_eq!(
                rv.pod_to_c().map(|(p, c)| (bits(p, c), c)),
                Some((bits(raw, code), code))
            );
            let mut slot = RetValue::Null;
            // SAFETY: `slot` owns nothing; `v` is a value of `code`, which is in RAW_IN_CODES.
            unsafe { RetValue::write_raw(&mut slot, v, code as u32) };
            assert_eq!(format!("{slot:?}"), format!("{rv:?}"));
        }
        let mut slot = RetValue::Int(1);
        // SAFETY: as above, for a NULL value.
        unsafe { RetValue::write_raw(&mut slot, TVMValue::default(), tc::NULLPTR as u32) };
        assert!(matches!(slot, RetValue::Null));
        let t = std::ptr::NonNull::<DLTensor>::dangling().as_ptr();
        // SAFETY: a valid RetValue; the dangling tensor pointer is never dereferenced.
        let (tag, raw) = unsafe { RetValue::read_raw(&RetValue::DLTensor(TensorRef::new(t))) };
        assert_eq!(
            (tag, bits(raw, tc::DLTENSOR_HANDLE)),
            (tc::DLTENSOR_HANDLE as u32, t as usize as i64)
        );
        for (rv, pod) in [
            (RetValue::Bool(true), true),
            (RetValue::Str("x".into()), false),
            (RetValue::Bytes(vec![1]), false),
        ] {
            // SAFETY: a valid RetValue.
            let tag = unsafe { RetValue::raw_tag(&rv) };
            assert_eq!((POD_TAGS >> tag) & 1 != 0, pod);
            assert_eq!((POD_TAGS >> tag) & 1 != 0, rv.is_pod());
            assert_eq!((RAW_OUT_TAGS >> tag) & 1, 0);
        }
    }
}
