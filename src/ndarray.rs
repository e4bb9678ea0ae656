//! NDArray: an object (type index 2) whose payload starts with a `DLTensor`, so that the
//! handle bindings hold (`DLTensor*`) is the object address plus the header size. Storage is
//! owned, a view of another array, or borrowed from a DLPack producer.

use crate::device::{self, Stream};
use crate::object::{payload_ptr, Object, ObjectRef, PAYLOAD_OFFSET, TYPE_NDARRAY};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice, DLManagedTensor, DLTensor, DL_FLOAT};
use std::ffi::c_void;

/// The DLTensor arithmetic (sizes, shapes, layout, the allocation alignment) lives with the
/// C value types, below the device room that also needs it.
pub use crate::packed_func::tensor::{
    checked_nbytes, is_contiguous, shape_of, tensor_nbytes, ALLOC_ALIGNMENT,
};

/// Who owns an array's storage.
enum Storage {
    /// Allocated by the device backend; freed through it.
    Owned,
    /// A view of another array, kept alive.
    View(#[allow(dead_code)] ObjectRef),
    /// Borrowed from a DLPack producer; its deleter runs on drop.
    DLPack(*mut DLManagedTensor),
    /// Memory the array does not own (a library's static data, a caller's buffer); the owner,
    /// if any, is kept alive with the array.
    External(#[allow(dead_code)] Option<ObjectRef>),
}

/// Dimensions stored inside the object for the common small ranks (saves an allocation per
/// array), on the heap beyond that. The object never moves, so pointers into it are stable.
enum Dims {
    Inline([i64; 6], usize),
    Heap(Box<[i64]>),
}

impl Dims {
    fn new(d: &[i64]) -> Dims {
        if d.len() <= 6 {
            let mut a = [0i64; 6];
            a[..d.len()].copy_from_slice(d);
            Dims::Inline(a, d.len())
        } else {
            Dims::Heap(d.into())
        }
    }

    fn as_slice(&self) -> &[i64] {
        match self {
            Dims::Inline(a, n) => &a[..*n],
            Dims::Heap(b) => b,
        }
    }
}

/// The NDArray payload. `dl` must stay the first field.
#[repr(C)]
pub struct NDArrayObj {
    dl: DLTensor,
    manager_ctx: *mut c_void,
    shape: Dims,
    strides: Option<Box<[i64]>>,
    storage: Storage,
}

// SAFETY: the tensor's pointers are owned by this object (or by a kept-alive owner) and never
// change after construction; safe code writes tensor contents only through a handle that is
// the storage's only reference (see `NDArray`), everything else is an `unsafe` contract.
unsafe impl Send for NDArrayObj {}
// SAFETY: as above.
unsafe impl Sync for NDArrayObj {}

// SAFETY: TYPE_NDARRAY is a static index of the type table that no other payload type uses.
unsafe impl crate::object::ObjectType for NDArrayObj {
    crate::object_type!("runtime.NDArray", static TYPE_NDARRAY);
}

impl Drop for NDArrayObj {
    fn drop(&mut self) {
        match self.storage {
            Storage::Owned => {
                if let Ok(api) = device::api(self.dl.device) {
                    // SAFETY: owned storage came from this backend's alloc_data_space and is
                    // freed once, here.
                    let _ = unsafe { api.free_data_space(self.dl.device, self.dl.data) };
                }
            }
            Storage::View(_) | Storage::External(_) => {}
            Storage::DLPack(m) => {
                // SAFETY: the producer's tensor is alive until its deleter runs, once, here.
                unsafe {
                    if let Some(d) = (*m).deleter {
                        d(m);
                    }
                }
            }
        }
    }
}

#[inline]
fn check_dtype(dtype: DLDataType) -> Result<()> {
    // The common types (whole bytes, a power of two, at least one lane) answer at once.
    if dtype.lanes != 0 && matches!(dtype.bits, 8 | 16 | 32 | 64) {
        return Ok(());
    }
    check_dtype_slow(dtype)
}

/// [`check_dtype`] for everything but the common types.
#[cold]
fn check_dtype_slow(dtype: DLDataType) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::value_fmt(format_args!(
            "invalid data type {} (code {} bits {} lanes {}): {why}",
            crate::packed_func::dtype::dtype_to_string(dtype),
            dtype.code,
            dtype.bits,
            dtype.lanes
        )))
    };
    if dtype.lanes == 0 {
        return bad("lanes must be at least 1");
    }
    let sub_byte_ok = matches!(
        (dtype.code, dtype.bits),
        (crate::packed_func::types::DL_UINT, 1)
            | (crate::packed_func::types::DL_INT, 1)
            | (crate::packed_func::types::DL_UINT, 4)
            | (crate::packed_func::types::DL_INT, 4)
            | (crate::packed_func::dtype::TVM_FLOAT4_E2M1FN, 4)
    );
    if dtype.bits % 8 != 0 && (dtype.code == DL_FLOAT || !sub_byte_ok) {
        return bad(
            "bits must be a multiple of 8 (sub-byte only for int1/uint1/int4/uint4/float4_e2m1fn)",
        );
    }
    if dtype.bits == 0 || !dtype.bits.is_power_of_two() {
        return bad("bits must be a power of two");
    }
    Ok(())
}

impl NDArrayObj {
    fn make(
        data: *mut c_void,
        device: DLDevice,
        shape: &[i64],
        strides: Option<Box<[i64]>>,
        dtype: DLDataType,
        byte_offset: u64,
        storage: Storage,
    ) -> ObjectRef {
        let obj = ObjectRef::new(NDArrayObj {
            dl: DLTensor {
                data,
                device,
                ndim: shape.len() as i32,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset,
            },
            manager_ctx: std::ptr::null_mut(),
            shape: Dims::new(shape),
            strides,
            storage,
        });
        // Point the DLTensor at the boxed shape/strides, whose heap addresses are stable.
        // SAFETY: the object was just created and is not shared yet.
        unsafe {
            let p = payload_ptr::<NDArrayObj>(obj.as_ptr());
            (*p).dl.shape = (*p).shape.as_slice().as_ptr() as *mut i64;
            if let Some(s) = &(*p).strides {
                (*p).dl.strides = s.as_ptr() as *mut i64;
            }
        }
        obj
    }

    /// Allocates an empty array on a device, in an optional memory scope.
    pub fn empty(
        shape: &[i64],
        dtype: DLDataType,
        dev: DLDevice,
        scope: Option<&str>,
    ) -> Result<ObjectRef> {
        check_dtype(dtype)?;
        checked_nbytes(shape, dtype)?;
        let data = device::api(dev)?.alloc_data_space_scope(dev, shape, dtype, scope)?;
        Ok(Self::make(data, dev, shape, None, dtype, 0, Storage::Owned))
    }

    /// An array over memory another object owns (`owner` is kept alive by the array): how
    /// allocators outside this room hand out tensors carved from their buffers.
    ///
    /// # Safety
    /// `data + byte_offset` must address at least `checked_nbytes(shape, dtype)` bytes of
    /// `device`'s memory, aligned to [`ALLOC_ALIGNMENT`], that `owner` keeps valid while it
    /// lives and that nothing but arrays holding `owner` accesses.
    pub unsafe fn view_of_owner(
        owner: ObjectRef,
        data: *mut c_void,
        device: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        byte_offset: u64,
    ) -> Result<ObjectRef> {
        check_dtype(dtype)?;
        checked_nbytes(shape, dtype)?;
        Ok(Self::make(
            data,
            device,
            shape,
            None,
            dtype,
            byte_offset,
            Storage::View(owner),
        ))
    }

    /// Adopts a DLPack tensor; its deleter runs when the array dies.
    ///
    /// # Safety
    /// `m` must be a valid managed tensor whose ownership passes to us.
    pub unsafe fn from_dlpack(m: *mut DLManagedTensor) -> Result<ObjectRef> {
        if m.is_null() {
            return Err(Error::value(
                "TVMArrayFromDLPack: the managed tensor is NULL",
            ));
        }
        // SAFETY: caller contract.
        let t = unsafe { &(*m).dl_tensor };
        if t.ndim < 0 || (t.ndim > 0 && t.shape.is_null()) {
            return Err(Error::value(
                "TVMArrayFromDLPack: the tensor has no valid shape",
            ));
        }
        let addr = (t.data as usize).wrapping_add(t.byte_offset as usize);
        if addr % ALLOC_ALIGNMENT != 0 {
            return Err(Error::internal_fmt(format_args!(
                "TVMArrayFromDLPack: data (with byte_offset) is not {ALLOC_ALIGNMENT}-byte aligned"
            )));
        }
        if !is_contiguous(t) {
            return Err(Error::internal(
                "TVMArrayFromDLPack: only compact row-major tensors are supported (strides)",
            ));
        }
        // SAFETY: shape/strides hold ndim entries by the DLPack contract.
        let shape = unsafe { shape_of(t) };
        let strides = if t.strides.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { std::slice::from_raw_parts(t.strides, t.ndim as usize) }.into())
        };
        Ok(Self::make(
            t.data,
            t.device,
            shape,
            strides,
            t.dtype,
            t.byte_offset,
            Storage::DLPack(m),
        ))
    }

    /// An array over memory it does not own: `data` (on `dev`, compact, `shape` and `dtype`),
    /// with `owner` kept alive as long as the array and its views. The data must be aligned
    /// to [`ALLOC_ALIGNMENT`] bytes.
    ///
    /// # Safety
    /// `data` must address at least `checked_nbytes(shape, dtype)` bytes of `dev`'s memory,
    /// which stay valid while `owner` lives (or, without an owner, while the array or any
    /// view of it lives).
    pub unsafe fn from_external(
        data: *mut c_void,
        shape: &[i64],
        dtype: DLDataType,
        dev: DLDevice,
        owner: Option<ObjectRef>,
    ) -> Result<ObjectRef> {
        check_dtype(dtype)?;
        checked_nbytes(shape, dtype)?;
        if data as usize % ALLOC_ALIGNMENT != 0 {
            return Err(Error::value_fmt(format_args!(
                "external array memory at {:#x} is not {ALLOC_ALIGNMENT}-byte aligned",
                data as usize
            )));
        }
        Ok(Self::make(
            data,
            dev,
            shape,
            None,
            dtype,
            0,
            Storage::External(owner),
        ))
    }

    /// The tensor.
    pub fn dltensor(&self) -> &DLTensor {
        &self.dl
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        self.shape.as_slice()
    }

    /// The element type.
    pub fn dtype(&self) -> DLDataType {
        self.dl.dtype
    }

    /// The device.
    pub fn device(&self) -> DLDevice {
        self.dl.device
    }

    /// Bytes of the array's elements.
    pub fn nbytes(&self) -> usize {
        checked_nbytes(self.shape.as_slice(), self.dl.dtype).unwrap_or(0)
    }

    /// What shares this array's storage besides the array's own handle, if anything: `None`
    /// when the storage is owned by the array (or by a chain of views each referenced only by
    /// the next), so that a handle that is the array's only reference is the only way to its
    /// elements.
    fn storage_sharer(&self) -> Option<&'static str> {
        if self.dl.device.device_type >= crate::packed_func::types::RPC_SESS_MASK {
            // A remote array: its memory is the server's, reached only through the session's
            // messages, which the server handles one at a time.
            return None;
        }
        let mut storage = &self.storage;
        loop {
            match storage {
                Storage::Owned => return None,
                Storage::External(_) => return Some("memory the array does not own"),
                Storage::DLPack(_) => return Some("a DLPack producer's memory"),
                Storage::View(base) => {
                    if !only_reference(base) {
                        return Some("another array or view of the same storage");
                    }
                    match base.downcast_ref::<NDArrayObj>() {
                        Some(b) => storage = &b.storage,
                        // An allocator's buffer (vm.Storage), referenced by this view alone.
                        None => return None,
                    }
                }
            }
        }
    }
}

/// Whether `o` is the only reference to its object (see [`Object::is_unique`]).
///
/// [`Object::is_unique`]: crate::object::Object::is_unique
fn only_reference(o: &ObjectRef) -> bool {
    o.header().is_unique()
}

// NDArray handles (`DLTensor*`) are the payload's address, PAYLOAD_OFFSET bytes into the
// object on every target (the header is 12 bytes on 32-bit ones, the DLTensor 8-aligned).
const _: () =
    assert!(std::mem::offset_of!(crate::object::ObjCell<NDArrayObj>, value) == PAYLOAD_OFFSET);

/// The handle bindings hold (`DLTensor*`) for an NDArray object.
pub fn handle_of(obj: &ObjectRef) -> *mut DLTensor {
    // SAFETY: the DLTensor is the first field of the payload.
    unsafe { (obj.as_ptr() as *mut u8).add(PAYLOAD_OFFSET) as *mut DLTensor }
}

/// The object of an NDArray handle, as a raw pointer.
///
/// # Safety
/// `h` must be a handle produced by this runtime for a live NDArray.
pub unsafe fn object_of_handle(h: *mut DLTensor) -> *mut Object {
    // SAFETY: inverse of `handle_of`.
    unsafe { (h as *mut u8).sub(PAYLOAD_OFFSET) as *mut Object }
}

/// A view of `base` with another shape and type, starting `relative_byte_offset` bytes into
/// it; must fit inside the base array.
pub fn create_view(
    base: &ObjectRef,
    shape: &[i64],
    dtype: DLDataType,
    relative_byte_offset: u64,
) -> Result<ObjectRef> {
    let arr = base
        .downcast_ref::<NDArrayObj>()
        .ok_or_else(|| Error::type_error("CreateView expects an NDArray"))?;
    if !is_contiguous(&arr.dl) {
        return Err(Error::value("CreateView: the base array is not contiguous"));
    }
    check_dtype(dtype)?;
    let need = checked_nbytes(shape, dtype)? as u64;
    let have = arr.nbytes() as u64;
    if relative_byte_offset
        .checked_add(need)
        .is_none_or(|end| end > have)
    {
        return Err(Error::internal_fmt(format_args!(
            "CreateView: a view of {need} bytes at offset {relative_byte_offset} does not fit \
             in an array of {have} bytes"
        )));
    }
    Ok(NDArrayObj::make(
        arr.dl.data,
        arr.dl.device,
        shape,
        None,
        dtype,
        arr.dl.byte_offset + relative_byte_offset,
        Storage::View(base.clone()),
    ))
}

struct DLPackCtx {
    _owner: ObjectRef,
}

unsafe extern "C" fn dlpack_deleter(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // Called from C: a panic in the array's release must not unwind there (that aborts).
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `m` was made by `to_dlpack` below: a boxed tensor whose ctx is a boxed
        // DLPackCtx.
        unsafe {
            drop(Box::from_raw((*m).manager_ctx as *mut DLPackCtx));
            drop(Box::from_raw(m));
        }
    });
}

/// Exports an array as a DLPack managed tensor that keeps the array alive until deleted.
pub fn to_dlpack(obj: &ObjectRef) -> Result<*mut DLManagedTensor> {
    let arr = obj
        .downcast_ref::<NDArrayObj>()
        .ok_or_else(|| Error::type_error("ToDLPack expects an NDArray"))?;
    let ctx = Box::new(DLPackCtx {
        _owner: obj.clone(),
    });
    let m = Box::new(DLManagedTensor {
        dl_tensor: arr.dl,
        manager_ctx: Box::into_raw(ctx) as *mut c_void,
        deleter: Some(dlpack_deleter),
    });
    Ok(Box::into_raw(m))
}

/// Copies host bytes into an array (sizes must match).
///
/// # Safety
/// `t` must describe valid memory and `data` hold `nbytes` bytes.
pub unsafe fn copy_from_bytes(t: &DLTensor, data: *const c_void, nbytes: usize) -> Result<()> {
    // SAFETY: forwarded contract; a copy into the array only reads `data`.
    unsafe { copy_bytes(t, data as *mut c_void, nbytes, false) }
}

/// Copies an array out to host bytes (sizes must match).
///
/// # Safety
/// `t` must describe valid memory and `data` hold `nbytes` bytes.
pub unsafe fn copy_to_bytes(t: &DLTensor, data: *mut c_void, nbytes: usize) -> Result<()> {
    // SAFETY: forwarded contract.
    unsafe { copy_bytes(t, data, nbytes, true) }
}

/// [`copy_from_bytes`] (`out` false) and [`copy_to_bytes`] (`out` true), one body for both.
///
/// # Safety
/// As those: `t` describes valid memory, `data` holds `nbytes` bytes (written when `out`).
#[inline(never)]
pub(crate) unsafe fn copy_bytes(
    t: &DLTensor,
    data: *mut c_void,
    nbytes: usize,
    out: bool,
) -> Result<()> {
    let what = if out {
        "TVMArrayCopyToBytes"
    } else {
        "TVMArrayCopyFromBytes"
    };
    let n = tensor_nbytes(t)?;
    if n != nbytes {
        return Err(Error::value_fmt(format_args!(
            "{what}: size mismatch: the array holds {n} bytes but {nbytes} were given"
        )));
    }
    if !is_contiguous(t) {
        return Err(Error::value_fmt(format_args!(
            "{what}: the array is not contiguous"
        )));
    }
    if n == 0 {
        return Ok(());
    }
    let api = device::api(t.device)?;
    let (src, src_off, src_dev, dst, dst_off, dst_dev) = if out {
        (t.data, t.byte_offset, t.device, data, 0, DLDevice::CPU)
    } else {
        (data, 0, DLDevice::CPU, t.data, t.byte_offset, t.device)
    };
    // SAFETY: `data` holds nbytes (C contract); the array holds n == nbytes bytes.
    unsafe {
        api.copy_data(
            src,
            src_off,
            dst,
            dst_off,
            n,
            src_dev,
            dst_dev,
            t.dtype,
            std::ptr::null_mut(),
        )?;
    }
    api.sync(t.device)
}

/// Copies array to array through the device layer (`TVMArrayCopyFromTo`). Both arrays must
/// have the same data type: the reference copies any two arrays of the same byte size, which
/// silently reinterprets the bytes (an int32 array given to a float32 input); this is refused.
///
/// # Safety
/// Both tensors must describe valid memory on their devices.
pub unsafe fn copy_from_to(from: &DLTensor, to: &DLTensor, stream: Stream) -> Result<()> {
    // Arrays of different byte sizes fail in the copy itself, with the reference's message.
    let same_size = crate::packed_func::tensor::tensor_nbytes(from).ok()
        == crate::packed_func::tensor::tensor_nbytes(to).ok();
    if from.dtype != to.dtype && same_size {
        return Err(Error::value_fmt(format_args!(
            "cannot copy an array of {} into an array of {}: the data types differ (the \
             bytes would be reinterpreted; convert the array first)",
            crate::packed_func::dtype::dtype_to_string(from.dtype),
            crate::packed_func::dtype::dtype_to_string(to.dtype)
        )));
    }
    // SAFETY: forwarded contract.
    unsafe { device::copy_tensor(from, to, stream) }
}

/// Rust element types with their TVM data type.
pub trait Element: Copy + Default + 'static {
    /// The data type of one element.
    const DTYPE: DLDataType;
}

macro_rules! element {
    ($($t:ty => $code:expr, $bits:expr;)*) => {
        $(impl Element for $t {
            const DTYPE: DLDataType = DLDataType::new($code, $bits, 1);
        })*
    };
}

element! {
    f32 => DL_FLOAT, 32;
    f64 => DL_FLOAT, 64;
    i8 => crate::packed_func::types::DL_INT, 8;
    i16 => crate::packed_func::types::DL_INT, 16;
    i32 => crate::packed_func::types::DL_INT, 32;
    i64 => crate::packed_func::types::DL_INT, 64;
    u8 => crate::packed_func::types::DL_UINT, 8;
    u16 => crate::packed_func::types::DL_UINT, 16;
    u32 => crate::packed_func::types::DL_UINT, 32;
    u64 => crate::packed_func::types::DL_UINT, 64;
}

/// A reference to an NDArray object: the safe Rust face of arrays.
///
/// # Sharing and writes
/// Clones and views are further handles of the same storage (as in the reference), and an
/// array is `Send + Sync`, so handles of one storage may live on several threads. Reading
/// takes `&self`. Writing from safe code ([`NDArray::copy_from_slice`],
/// [`NDArray::copy_from_bytes`], the destination of [`NDArray::copy_to`]) takes `&mut self`
/// **and** unique ownership of the storage, checked at run time ([`NDArray::is_unique`]):
/// the handle must be the array's only reference (no clone, no view, no C handle, no
/// container or function holding it) and the storage must be the array's own (allocated by
/// it, or a view whose bases are referenced only by it); memory the array does not own
/// (external or DLPack memory, a mapped file) is never written from safe code (a remote
/// array's memory is the RPC server's, written by messages: it counts as the array's own).
/// Anything else
/// is refused with an error, so a write from safe code can never race with another access.
/// Writing shared storage is `unsafe` ([`NDArray::copy_from_slice_unchecked`],
/// [`NDArray::copy_to_unchecked`]): the caller promises that nothing else accesses the
/// elements meanwhile.
///
/// Functions called with an array (compiled kernels, executors, Relax builtins) may write
/// it, as TVM's calling convention allows for outputs: that is the called code's contract,
/// not checked here.
///
/// ```
/// # use tvm_runtime::NDArray;
/// let mut a = NDArray::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
/// let b = a.clone();
/// assert!(a.copy_from_slice(&[3.0f32, 4.0]).is_err()); // `b` shares the storage
/// drop(b);
/// a.copy_from_slice(&[3.0f32, 4.0]).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct NDArray(ObjectRef);

impl NDArray {
    /// Allocates an uninitialised array.
    pub fn empty(shape: &[i64], dtype: DLDataType, dev: DLDevice) -> Result<NDArray> {
        Ok(NDArray(NDArrayObj::empty(shape, dtype, dev, None)?))
    }

    /// A CPU array holding a copy of `data` with the given shape.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<NDArray> {
        let mut a = Self::empty(shape, T::DTYPE, DLDevice::CPU)?;
        a.copy_from_slice(data)?;
        Ok(a)
    }

    /// An array over memory it does not own (see [`NDArrayObj::from_external`]).
    ///
    /// # Safety
    /// As [`NDArrayObj::from_external`].
    pub unsafe fn from_external(
        data: *mut c_void,
        shape: &[i64],
        dtype: DLDataType,
        dev: DLDevice,
        owner: Option<ObjectRef>,
    ) -> Result<NDArray> {
        // SAFETY: forwarded contract.
        Ok(NDArray(unsafe {
            NDArrayObj::from_external(data, shape, dtype, dev, owner)?
        }))
    }

    /// Wraps an object known to be an NDArray.
    pub fn from_object(o: ObjectRef) -> Result<NDArray> {
        if o.downcast_ref::<NDArrayObj>().is_some() {
            Ok(NDArray(o))
        } else {
            Err(Error::type_error_fmt(format_args!(
                "expected an NDArray but got {}",
                o.type_key()
            )))
        }
    }

    /// The object.
    pub fn as_object(&self) -> &ObjectRef {
        &self.0
    }

    /// The object, consumed.
    pub fn into_object(self) -> ObjectRef {
        self.0
    }

    fn obj(&self) -> &NDArrayObj {
        // SAFETY: an `NDArray` wraps only an array object: `from_object` checks, and the
        // other constructors wrap what `NDArrayObj::make` built.
        unsafe { self.0.downcast_unchecked::<NDArrayObj>() }
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        self.obj().shape()
    }

    /// The element type.
    pub fn dtype(&self) -> DLDataType {
        self.obj().dtype()
    }

    /// The device.
    pub fn device(&self) -> DLDevice {
        self.obj().device()
    }

    /// Bytes of the elements.
    pub fn nbytes(&self) -> usize {
        self.obj().nbytes()
    }

    /// The `DLTensor*` handle C code uses for this array.
    pub fn handle(&self) -> *mut DLTensor {
        handle_of(&self.0)
    }

    /// The tensor.
    pub fn dltensor(&self) -> &DLTensor {
        self.obj().dltensor()
    }

    fn check_elem<T: Element>(&self, len: usize) -> Result<()> {
        if T::DTYPE != self.dtype() || len * std::mem::size_of::<T>() != self.nbytes() {
            return Err(Error::value_fmt(format_args!(
                "array of {} ({} bytes) does not match {len} elements of {}",
                crate::packed_func::dtype::dtype_to_string(self.dtype()),
                self.nbytes(),
                crate::packed_func::dtype::dtype_to_string(T::DTYPE)
            )));
        }
        Ok(())
    }

    /// Whether this handle is the only way to the array's elements: the array's only
    /// reference, over storage it owns (see [Sharing and writes](NDArray#sharing-and-writes)).
    /// Safe writes need it.
    pub fn is_unique(&self) -> bool {
        only_reference(&self.0) && self.obj().storage_sharer().is_none()
    }

    /// Fails unless [`NDArray::is_unique`]; `what` names the write.
    fn check_unique(&self, what: &str) -> Result<()> {
        let sharer = if only_reference(&self.0) {
            match self.obj().storage_sharer() {
                None => return Ok(()),
                Some(s) => s,
            }
        } else {
            "another handle of the same array (a clone, or a reference held elsewhere)"
        };
        Err(Error::value_fmt(format_args!(
            "{what}: the array's storage is shared with {sharer}; safe code writes only an \
             array whose handle is its storage's only reference (copy into a fresh array, or \
             drop the other handles first)"
        )))
    }

    /// Copies elements in from host memory (count and type must match). The storage must be
    /// this handle's alone ([`NDArray::is_unique`]), else an error.
    ///
    /// Writing needs a unique borrow of the handle; through a shared one it does not compile:
    ///
    /// ```compile_fail
    /// # use tvm_runtime::NDArray;
    /// let a = NDArray::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    /// let r = &a;
    /// r.copy_from_slice(&[3.0f32, 4.0]).unwrap();
    /// ```
    pub fn copy_from_slice<T: Element>(&mut self, data: &[T]) -> Result<()> {
        self.check_unique("NDArray::copy_from_slice")?;
        // SAFETY: the handle is the storage's only reference and `&mut self` keeps it so.
        unsafe { self.copy_from_slice_unchecked(data) }
    }

    /// [`NDArray::copy_from_slice`] into storage that may be shared.
    ///
    /// # Safety
    /// Nothing else (another handle, view, C pointer or function, on any thread) may access
    /// the array's elements while the copy runs.
    pub unsafe fn copy_from_slice_unchecked<T: Element>(&self, data: &[T]) -> Result<()> {
        self.check_elem::<T>(data.len())?;
        // SAFETY: the array is live and `data` holds exactly nbytes bytes (checked); no other
        // access overlaps (caller contract).
        unsafe {
            copy_from_bytes(
                self.dltensor(),
                data.as_ptr() as *const c_void,
                self.nbytes(),
            )
        }
    }

    /// Copies raw bytes in (as many as the array holds, any element type). The storage must
    /// be this handle's alone ([`NDArray::is_unique`]), else an error.
    pub fn copy_from_bytes(&mut self, data: &[u8]) -> Result<()> {
        self.check_unique("NDArray::copy_from_bytes")?;
        // SAFETY: the array is live (its size is checked against `data` inside) and the
        // handle is the storage's only reference, which `&mut self` keeps so.
        unsafe { copy_from_bytes(self.dltensor(), data.as_ptr() as *const c_void, data.len()) }
    }

    /// Copies the elements out to a vector (type must match).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let n = self.nbytes() / std::mem::size_of::<T>().max(1);
        self.check_elem::<T>(n)?;
        let mut v = vec![T::default(); n];
        // SAFETY: the array is live and `v` holds exactly nbytes bytes (checked).
        unsafe {
            copy_to_bytes(
                self.dltensor(),
                v.as_mut_ptr() as *mut c_void,
                self.nbytes(),
            )?
        };
        Ok(v)
    }

    /// Copies this array's contents into `dst` (same size), across devices if needed. The
    /// destination's storage must be its handle's alone ([`NDArray::is_unique`]), else an
    /// error.
    ///
    /// The destination is written, so it takes a unique borrow:
    ///
    /// ```compile_fail
    /// # use tvm_runtime::NDArray;
    /// let a = NDArray::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    /// let b = NDArray::from_slice(&[0.0f32, 0.0], &[2]).unwrap();
    /// a.copy_to(&b).unwrap();
    /// ```
    pub fn copy_to(&self, dst: &mut NDArray) -> Result<()> {
        dst.check_unique("NDArray::copy_to")?;
        // SAFETY: `dst` is its storage's only reference (so `self` is not a handle of it),
        // which `&mut dst` keeps so.
        unsafe { self.copy_to_unchecked(dst) }
    }

    /// [`NDArray::copy_to`] into a destination whose storage may be shared.
    ///
    /// # Safety
    /// Nothing else (another handle, view, C pointer or function, on any thread) may access
    /// the destination's elements while the copy runs, and they must not overlap this
    /// array's.
    pub unsafe fn copy_to_unchecked(&self, dst: &NDArray) -> Result<()> {
        // SAFETY: both arrays are live objects describing their own memory; no other access
        // overlaps the write (caller contract).
        unsafe { copy_from_to(self.dltensor(), dst.dltensor(), std::ptr::null_mut()) }
    }

    /// A view with another shape and type at a byte offset.
    pub fn view(&self, shape: &[i64], dtype: DLDataType, byte_offset: u64) -> Result<NDArray> {
        Ok(NDArray(create_view(&self.0, shape, dtype, byte_offset)?))
    }
}

impl<'a> From<&'a NDArray> for crate::packed_func::value::ArgValue<'a> {
    fn from(a: &'a NDArray) -> Self {
        // SAFETY: `a` keeps the object alive for 'a.
        crate::packed_func::value::ArgValue::Object(unsafe {
            crate::packed_func::value::ObjArg::new(a.0.as_ptr())
        })
    }
}

/// Registers the NDArray functions (`runtime.TVMArrayAllocWithScope`, `runtime.TVMArrayCreateView`).
pub(crate) fn register(r: &mut crate::packed_func::registry::Registrar) {
    r.add("runtime.TVMArrayAllocWithScope", |a, rv| {
        if a.len() < 3 {
            return Err(Error::value(
                "runtime.TVMArrayAllocWithScope expects (shape, dtype, device[, scope])",
            ));
        }
        let shape = a
            .downcast::<crate::object::containers::ShapeTupleObj>(0)?
            .dims();
        let dtype = a.dtype(1)?;
        let dev = a.device(2)?;
        let scope =
            if a.len() > 3 && !matches!(a.get(3)?, crate::packed_func::value::ArgValue::Null) {
                Some(a.str(3)?)
            } else {
                None
            };
        *rv = NDArrayObj::empty(shape, dtype, dev, scope)?.into();
        Ok(())
    });
    r.add("runtime.TVMArrayCreateView", |a, rv| {
        if a.len() < 2 || a.len() > 4 {
            return Err(Error::value(
                "runtime.TVMArrayCreateView expects (array, shape[, dtype[, byte_offset]])",
            ));
        }
        let base = a.object_ref::<NDArrayObj>(0)?;
        let shape = a
            .downcast::<crate::object::containers::ShapeTupleObj>(1)?
            .dims();
        let dtype = if a.len() > 2 {
            a.dtype(2)?
        } else {
            // SAFETY: `object_ref::<NDArrayObj>` checked the type.
            unsafe { base.downcast_unchecked::<NDArrayObj>() }.dtype()
        };
        let offset = if a.len() > 3 { a.i64(3)? } else { 0 };
        if offset < 0 {
            return Err(Error::value(
                "runtime.TVMArrayCreateView: negative byte offset",
            ));
        }
        *rv = create_view(&base, shape, dtype, offset as u64)?.into();
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Safe writes need the storage to be the handle's alone: a live clone (here or on
    /// another thread), a view, or memory the array does not own make them an error; once
    /// the other handles are gone the same write succeeds.
    #[test]
    fn safe_writes_are_refused_while_the_storage_is_shared() {
        let mut a = NDArray::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
        assert!(a.is_unique());
        // A clone kept alive on another thread, which reads it meanwhile.
        let b = a.clone();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            let v = b.to_vec::<f32>().unwrap();
            rx.recv().unwrap();
            v
        });
        assert!(!a.is_unique());
        let e = a.copy_from_slice(&[9.0f32; 4]).unwrap_err();
        assert!(e.message.contains("shared"), "{e}");
        assert!(a.copy_from_bytes(&[0u8; 16]).is_err());
        let src = NDArray::from_slice(&[5.0f32; 4], &[4]).unwrap();
        assert!(src.copy_to(&mut a).is_err());
        tx.send(()).unwrap();
        assert_eq!(reader.join().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        // The clone died with the thread: the handle is unique again.
        assert!(a.is_unique());
        a.copy_from_slice(&[9.0f32; 4]).unwrap();
        src.copy_to(&mut a).unwrap();
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![5.0; 4]);

        // A view shares the storage both ways.
        let mut v = a.view(&[2], DL_F32, 8).unwrap();
        assert!(a.copy_from_slice(&[0.0f32; 4]).is_err());
        assert!(v.copy_from_slice(&[7.0f32; 2]).is_err());
        drop(a);
        // The view alone holds its base now: it may write.
        v.copy_from_slice(&[7.0f32; 2]).unwrap();
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![7.0; 2]);

        // Memory the array does not own is never written from safe code.
        #[repr(align(64))]
        struct Buf([f32; 4]);
        let mut buf = Buf([0.0; 4]);
        // SAFETY: `buf` outlives the array, 64-byte aligned, 16 bytes.
        let mut ext = unsafe {
            NDArray::from_external(
                buf.0.as_mut_ptr() as *mut c_void,
                &[4],
                DL_F32,
                DLDevice::CPU,
                None,
            )
        }
        .unwrap();
        assert!(!ext.is_unique());
        let e = ext.copy_from_slice(&[1.0f32; 4]).unwrap_err();
        assert!(e.message.contains("does not own"), "{e}");
        // SAFETY: nothing else accesses `buf` during the copy.
        unsafe { ext.copy_from_slice_unchecked(&[1.0f32; 4]) }.unwrap();
        drop(ext);
        assert_eq!(buf.0, [1.0; 4]);
    }

    const DL_F32: DLDataType = DLDataType::new(DL_FLOAT, 32, 1);
}
