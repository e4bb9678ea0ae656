//! The binary formats of arrays and parameter dictionaries, byte for byte as TVM writes them
//! (`NDArray::Save`/`Load`, `runtime.SaveParams`/`LoadParams`).
//!
//! One array: `u64 kTVMNDArrayMagic`, `u64 reserved (0)`, `DLDevice` (`i32 type`, `i32 id`,
//! always CPU), `i32 ndim`, `DLDataType` (`u8 code`, `u8 bits`, `u16 lanes`), `ndim × i64`
//! shape, `i64 data_byte_size`, then the data. As in the reference, the data size is
//! `((bits + 7) / 8) × elements` (lanes are not counted). A parameter dictionary:
//! `u64 kTVMNDArrayListMagic`, `u64 reserved`, the names (`u64 count`, then each a `u64`
//! length and bytes), `u64 count` again, then that many arrays. Everything little-endian.

use crate::device;
use crate::module::blob::BlobReader;
use crate::ndarray::{shape_of, NDArray};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice, DLTensor, DL_CPU};
use std::ffi::c_void;

/// Magic number starting one saved array (`kTVMNDArrayMagic`).
pub const NDARRAY_MAGIC: u64 = 0xDD5E40F096B4A13F;
/// Magic number starting a saved parameter dictionary (`kTVMNDArrayListMagic`).
pub const NDARRAY_LIST_MAGIC: u64 = 0xF7E58D4F05049CB7;

/// Something bytes can be read from with bounds checks.
pub trait ByteSource {
    /// Reads exactly `n` bytes; an error naming `what` when fewer are left.
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]>;
    /// Bytes left.
    fn left(&self) -> usize;

    /// Consumes `n` bytes and copies the first `copy` of them (at most `n`) to `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for `copy` bytes of writes and not overlap the source.
    unsafe fn take_into(&mut self, n: usize, dst: *mut u8, copy: usize, what: &str) -> Result<()> {
        let src = self.take(n, what)?;
        if copy > 0 {
            // SAFETY: `src` holds n bytes; forwarded contract on `dst`.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, copy.min(n)) };
        }
        Ok(())
    }

    /// Where the next read starts, for a source that can go back to it ([`seek`]); `None`
    /// for one that cannot.
    ///
    /// [`seek`]: ByteSource::seek
    fn position(&self) -> Option<usize> {
        None
    }

    /// Goes to a position [`ByteSource::position`] returned.
    fn seek(&mut self, _pos: usize) -> Result<()> {
        Err(Error::internal("this byte source cannot seek"))
    }
}

/// A cursor over a byte slice.
pub struct ByteReader<'a> {
    data: &'a [u8],
    pos: usize,
    context: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A reader over `data`; `context` starts error messages.
    pub fn new(data: &'a [u8], context: &'static str) -> Self {
        ByteReader {
            data,
            pos: 0,
            context,
        }
    }
}

impl ByteSource for ByteReader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        if n > self.data.len() - self.pos {
            return Err(Error::value_fmt(format_args!(
                "{}: the data is truncated: cannot read {what} ({n} bytes) at byte {} of {}",
                self.context,
                self.pos,
                self.data.len()
            )));
        }
        // Checked above: `n` bytes are left.
        let s = self.data.get(self.pos..self.pos + n).unwrap_or_default();
        self.pos += n;
        Ok(s)
    }

    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn position(&self) -> Option<usize> {
        Some(self.pos)
    }

    fn seek(&mut self, pos: usize) -> Result<()> {
        if pos > self.data.len() {
            return Err(Error::internal("ByteReader::seek past the end"));
        }
        self.pos = pos;
        Ok(())
    }
}

impl ByteSource for BlobReader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        self.read_bytes(n, what)
    }

    fn left(&self) -> usize {
        self.remaining()
    }

    fn position(&self) -> Option<usize> {
        Some(BlobReader::position(self))
    }

    fn seek(&mut self, pos: usize) -> Result<()> {
        BlobReader::seek(self, pos)
    }

    unsafe fn take_into(&mut self, n: usize, dst: *mut u8, copy: usize, what: &str) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.read_into(n, dst, copy, what) }
    }
}

/// Reads `N` bytes.
fn read_bytes<const N: usize>(r: &mut dyn ByteSource, what: &str) -> Result<[u8; N]> {
    let mut out = [0u8; N];
    for (o, b) in out.iter_mut().zip(r.take(N, what)?) {
        *o = *b;
    }
    Ok(out)
}

/// Reads a little-endian `u64`.
pub(crate) fn read_u64(r: &mut dyn ByteSource, what: &str) -> Result<u64> {
    read_bytes(r, what).map(u64::from_le_bytes)
}

fn read_i32(r: &mut dyn ByteSource, what: &str) -> Result<i32> {
    read_bytes(r, what).map(i32::from_le_bytes)
}

/// Reads a `u64`-length-prefixed UTF-8 string.
pub fn read_string(r: &mut dyn ByteSource, what: &str) -> Result<String> {
    let n = read_u64(r, what)?;
    if n > r.left() as u64 {
        return Err(Error::value_fmt(format_args!(
            "{what}: length {n} exceeds the {} bytes left",
            r.left()
        )));
    }
    let b = r.take(n as usize, what)?;
    String::from_utf8(b.to_vec()).map_err(|_| Error::value_fmt(format_args!("{what} is not UTF-8")))
}

/// Reads a vector of strings (`u64` count, then each string).
pub fn read_strings(r: &mut dyn ByteSource, what: &str) -> Result<Vec<String>> {
    let n = read_u64(r, what)?;
    // Every string takes at least its 8-byte length.
    if n > (r.left() / 8) as u64 {
        return Err(Error::value_fmt(format_args!(
            "{what}: a count of {n} exceeds the {} bytes left",
            r.left()
        )));
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        out.push(read_string(r, what)?);
    }
    Ok(out)
}

/// Appends bytes (out of line: the writers' many appends share one copy).
#[inline(never)]
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b);
}

/// Appends a `u64`-length-prefixed string.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, &(s.len() as u64).to_le_bytes());
    put_bytes(out, s.as_bytes());
}

/// Appends a vector of strings.
pub fn write_strings<S: AsRef<str>>(out: &mut Vec<u8>, v: &[S]) {
    put_bytes(out, &(v.len() as u64).to_le_bytes());
    for s in v {
        write_string(out, s.as_ref());
    }
}

/// How many bytes more than its data an array read from a file may take in memory (the
/// lanes of a vector type, which the format does not store).
const MAX_UNSTORED_BYTES: u64 = 64 << 20;

/// Bytes the reference stores for `num_elems` elements of `dtype`: lanes are not counted.
fn saved_data_size(dtype: DLDataType, num_elems: u64) -> Option<u64> {
    num_elems.checked_mul((dtype.bits as u64).div_ceil(8))
}

/// Copies up to `n` bytes of a tensor's data to host memory, returning exactly `n` bytes
/// (zero-padded if the tensor holds fewer, which only happens for sub-byte types).
///
/// # Safety
/// `t` must describe valid memory on its device.
unsafe fn tensor_bytes(t: &DLTensor, n: usize) -> Result<Vec<u8>> {
    let have = crate::ndarray::tensor_nbytes(t)?;
    if !crate::ndarray::is_contiguous(t) {
        return Err(Error::value(
            "cannot save a non-contiguous array: make a compact copy first",
        ));
    }
    let mut out = vec![0u8; n];
    let k = n.min(have);
    if k == 0 {
        return Ok(out);
    }
    let api = device::api(t.device)?;
    // SAFETY: the tensor holds `have >= k` bytes from data + byte_offset (caller contract);
    // `out` holds n >= k bytes.
    unsafe {
        api.copy_data(
            t.data,
            t.byte_offset,
            out.as_mut_ptr() as *mut c_void,
            0,
            k,
            t.device,
            DLDevice::CPU,
            t.dtype,
            std::ptr::null_mut(),
        )?;
    }
    api.sync(t.device)?;
    Ok(out)
}

/// Appends one tensor in the reference's `NDArray::Save` format.
///
/// # Safety
/// `t` must describe valid memory on its device (shape holding `ndim` entries).
pub unsafe fn save_dltensor(out: &mut Vec<u8>, t: &DLTensor) -> Result<()> {
    if t.ndim < 0 || (t.ndim > 0 && t.shape.is_null()) {
        return Err(Error::value("cannot save an array without a valid shape"));
    }
    // SAFETY: caller contract.
    let shape = unsafe { shape_of(t) };
    let mut num_elems: u64 = 1;
    for &d in shape {
        if d < 0 {
            return Err(Error::value_fmt(format_args!(
                "cannot save an array of shape {shape:?}"
            )));
        }
        num_elems = num_elems.checked_mul(d as u64).ok_or_else(|| {
            Error::value_fmt(format_args!("array of shape {shape:?} is too large"))
        })?;
    }
    let size = saved_data_size(t.dtype, num_elems)
        .filter(|&s| s <= i64::MAX as u64)
        .ok_or_else(|| Error::value_fmt(format_args!("array of shape {shape:?} is too large")))?;
    // The fixed part of the header (magic, reserved, device, rank, data type) is written in
    // one piece.
    let mut head = [0u8; 32];
    head[..8].copy_from_slice(&NDARRAY_MAGIC.to_le_bytes());
    head[16..20].copy_from_slice(&DL_CPU.to_le_bytes());
    head[24..28].copy_from_slice(&t.ndim.to_le_bytes());
    head[28] = t.dtype.code;
    head[29] = t.dtype.bits;
    head[30..32].copy_from_slice(&t.dtype.lanes.to_le_bytes());
    put_bytes(out, &head);
    for &d in shape {
        put_bytes(out, &d.to_le_bytes());
    }
    put_bytes(out, &(size as i64).to_le_bytes());
    // SAFETY: caller contract.
    let data = unsafe { tensor_bytes(t, size as usize)? };
    put_bytes(out, &data);
    Ok(())
}

/// Appends one array in the reference's `NDArray::Save` format.
pub fn save_ndarray(out: &mut Vec<u8>, a: &NDArray) -> Result<()> {
    // SAFETY: a live NDArray describes its own valid memory.
    unsafe { save_dltensor(out, a.dltensor()) }
}

/// The header of an array in the reference's `NDArray::Load` format: what the data that
/// follows it (`size` bytes) fills.
pub struct ArrayHeader {
    /// The array's shape.
    pub shape: Vec<i64>,
    /// Its data type.
    pub dtype: DLDataType,
    /// Bytes of data after the header.
    pub size: u64,
}

/// An "invalid NDArray data: ..." error.
#[cold]
#[inline(never)]
fn invalid(why: std::fmt::Arguments<'_>) -> Error {
    Error::value_fmt(format_args!("invalid NDArray data: {why}"))
}

/// Reads and checks an array's header (up to its data, which at least `size` bytes left
/// must hold).
pub fn read_ndarray_header(r: &mut dyn ByteSource) -> Result<ArrayHeader> {
    let magic = read_u64(r, "the array magic number")?;
    let _reserved = read_u64(r, "the array header")?;
    if magic != NDARRAY_MAGIC {
        return Err(invalid(format_args!(
            "bad magic number (expected {NDARRAY_MAGIC:#018x})"
        )));
    }
    let dev_type = read_i32(r, "the array device")?;
    let _dev_id = read_i32(r, "the array device")?;
    let ndim = read_i32(r, "the array rank")?;
    let [code, bits, l0, l1] = read_bytes(r, "the array data type")?;
    let dtype = DLDataType::new(code, bits, u16::from_le_bytes([l0, l1]));
    if dev_type != DL_CPU {
        return Err(invalid(format_args!(
            "device type {dev_type}: arrays can only be saved as CPU arrays"
        )));
    }
    if ndim < 0 || ndim as u64 > (r.left() / 8) as u64 {
        return Err(invalid(format_args!("rank {ndim} is out of range")));
    }
    let mut shape = Vec::with_capacity(ndim as usize);
    for _ in 0..ndim {
        shape.push(read_u64(r, "the array shape")? as i64);
    }
    let mut num_elems: u64 = 1;
    for &d in &shape {
        if d < 0 {
            return Err(invalid(format_args!(
                "negative dimension in shape {shape:?}"
            )));
        }
        num_elems = num_elems
            .checked_mul(d as u64)
            .ok_or_else(|| invalid(format_args!("shape {shape:?} is too large")))?;
    }
    let size = read_u64(r, "the array data size")?;
    let expected = saved_data_size(dtype, num_elems);
    if expected != Some(size) {
        return Err(invalid(format_args!(
            "data size {size} does not match shape {shape:?} of {}",
            crate::packed_func::dtype::dtype_to_string(dtype)
        )));
    }
    if size > r.left() as u64 {
        return Err(invalid(format_args!(
            "the data is truncated: {size} bytes of data announced, {} left",
            r.left()
        )));
    }
    // The file holds one lane per element but the array takes all its lanes in memory: a
    // vector type would make a small file ask for up to 65535 times its bytes.
    let in_memory = crate::packed_func::tensor::checked_nbytes(&shape, dtype)
        .map_err(|e| invalid(format_args!("{}", e.message)))? as u64;
    if in_memory > size.saturating_add(MAX_UNSTORED_BYTES) {
        return Err(invalid(format_args!(
            "shape {shape:?} of {} takes {in_memory} bytes in memory for {size} bytes of data",
            crate::packed_func::dtype::dtype_to_string(dtype)
        )));
    }
    Ok(ArrayHeader { shape, dtype, size })
}

/// Reads the data that follows `h` into `arr`, a CPU array of `h`'s shape and type.
pub fn read_ndarray_data(r: &mut dyn ByteSource, h: &ArrayHeader, arr: &NDArray) -> Result<()> {
    if arr.device() != DLDevice::CPU || arr.shape() != h.shape.as_slice() || arr.dtype() != h.dtype
    {
        return Err(Error::internal(
            "read_ndarray_data: the array does not match the header",
        ));
    }
    let n = (h.size as usize).min(arr.nbytes());
    if n == 0 {
        r.take(h.size as usize, "the array data")?;
        return Ok(());
    }
    let t = arr.dltensor();
    // SAFETY: a CPU array holding nbytes >= n bytes at data + byte_offset (checked against
    // the header above), memory of its own or of its owner, not the source's.
    unsafe {
        r.take_into(
            h.size as usize,
            (t.data as *mut u8).add(t.byte_offset as usize),
            n,
            "the array data",
        )
    }
}

/// Reads one array in the reference's `NDArray::Load` format, into a new CPU array.
pub fn load_ndarray(r: &mut dyn ByteSource) -> Result<NDArray> {
    let h = read_ndarray_header(r)?;
    let arr = NDArray::empty(&h.shape, h.dtype, DLDevice::CPU)?;
    read_ndarray_data(r, &h, &arr)?;
    Ok(arr)
}

/// Arrays that take together at least this much share one allocation (see [`read_arrays`]).
const SHARED_ARRAYS_MIN: usize = 2 << 20;

/// An array whose header has been read and whose data starts at `at` in its source.
pub struct PendingArray {
    /// The array's header.
    pub header: ArrayHeader,
    /// Where its data starts ([`ByteSource::position`]).
    pub at: usize,
}

/// Reads the header of the array at the reader's position and skips its data, for
/// [`read_arrays`]; `None` from a source that cannot seek back (read it with
/// [`load_ndarray`] instead, from the same position).
pub fn skip_ndarray(r: &mut dyn ByteSource) -> Result<Option<PendingArray>> {
    if r.position().is_none() {
        return Ok(None);
    }
    let header = read_ndarray_header(r)?;
    let at = r
        .position()
        .ok_or_else(|| Error::internal("a byte source stopped telling its position"))?;
    r.take(header.size as usize, "the array data")?;
    Ok(Some(PendingArray { header, at }))
}

/// Reads the data of arrays [`skip_ndarray`] went past, in their order, and leaves the reader
/// where it was. Arrays that take 2 MiB or more together are views into one allocation
/// (which they keep alive, each 64-byte aligned), faulted in before the reads by
/// [`prefault`](crate::device::cpu::prefault): transparent huge pages where they are cheap,
/// instead of thousands of 4 KiB pages faulted one at a time (relax_mobilenet's 14 MB of
/// weights took about 3,200 page faults, most of its load time).
pub fn read_arrays(r: &mut dyn ByteSource, arrays: &[PendingArray]) -> Result<Vec<NDArray>> {
    let end = r.position();
    let align = crate::packed_func::tensor::ALLOC_ALIGNMENT;
    let slot = |h: &ArrayHeader| -> Result<usize> {
        crate::packed_func::tensor::checked_nbytes(&h.shape, h.dtype)?
            .checked_add(align - 1)
            .map(|n| n & !(align - 1))
            .ok_or_else(|| Error::value("invalid NDArray data: an array is too large"))
    };
    let mut slots = Vec::with_capacity(arrays.len());
    for a in arrays {
        slots.push(slot(&a.header)?);
    }
    let total = slots
        .iter()
        .try_fold(0usize, |t, &s| t.checked_add(s))
        .ok_or_else(|| Error::value("invalid NDArray data: the arrays are too large"))?;
    let shared = if arrays.len() > 1 && total >= SHARED_ARRAYS_MIN {
        let len = i64::try_from(total)
            .map_err(|_| Error::value("invalid NDArray data: the arrays are too large"))?;
        let block = NDArray::empty(&[len], DLDataType::new(1, 8, 1), DLDevice::CPU)?;
        // SAFETY: the block's `total` bytes, just allocated on the CPU and written in full
        // below.
        unsafe { crate::device::cpu::prefault(block.dltensor().data, total) };
        Some(block)
    } else {
        None
    };
    let mut out = Vec::with_capacity(arrays.len());
    let mut offset = 0usize;
    for (a, &size) in arrays.iter().zip(&slots) {
        let h = &a.header;
        let arr = match &shared {
            Some(block) => {
                // SAFETY: `offset + size <= total`, the block's size (the slots sum to it).
                let data = unsafe { (block.dltensor().data as *mut u8).add(offset) };
                offset += size;
                // SAFETY: the slot's bytes lie inside the block (above), which the view keeps
                // alive; slots are aligned and disjoint, and only this view reaches its slot.
                NDArray::from_object(unsafe {
                    crate::ndarray::NDArrayObj::view_of_owner(
                        block.as_object().clone(),
                        data as *mut std::ffi::c_void,
                        DLDevice::CPU,
                        &h.shape,
                        h.dtype,
                        0,
                    )
                }?)?
            }
            None => NDArray::empty(&h.shape, h.dtype, DLDevice::CPU)?,
        };
        r.seek(a.at)?;
        read_ndarray_data(r, h, &arr)?;
        out.push(arr);
    }
    if let Some(end) = end {
        r.seek(end)?;
    }
    Ok(out)
}

/// Serialises a parameter dictionary in the reference's `SaveParams` format.
pub fn save_params(params: &[(String, NDArray)]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut head = [0u8; 16];
    head[..8].copy_from_slice(&NDARRAY_LIST_MAGIC.to_le_bytes());
    put_bytes(&mut out, &head);
    // The names as `write_strings` writes them, without collecting them first.
    put_bytes(&mut out, &(params.len() as u64).to_le_bytes());
    for (n, _) in params {
        write_string(&mut out, n);
    }
    put_bytes(&mut out, &(params.len() as u64).to_le_bytes());
    for (name, a) in params {
        save_ndarray(&mut out, a)
            .map_err(|e| super::ctx(e, format_args!("saving parameter '{name}'")))?;
    }
    Ok(out)
}

/// Reads the header and names of a parameter dictionary, leaving `r` at the first array.
pub fn read_params_header(r: &mut dyn ByteSource) -> Result<Vec<String>> {
    let magic = read_u64(r, "the parameters magic number")?;
    if magic != NDARRAY_LIST_MAGIC {
        return Err(Error::value_fmt(format_args!(
            "invalid parameters file format: bad magic number (expected \
             {NDARRAY_LIST_MAGIC:#018x}): not a parameters file"
        )));
    }
    let _reserved = read_u64(r, "the parameters header")?;
    let names = read_strings(r, "the parameter names")?;
    let count = read_u64(r, "the number of arrays")?;
    if count != names.len() as u64 {
        return Err(Error::value_fmt(format_args!(
            "invalid parameters file format: {} names but {count} arrays",
            names.len()
        )));
    }
    Ok(names)
}

/// Reads a parameter dictionary in the reference's `LoadParams` format (arrays on the CPU),
/// in file order.
pub fn load_params(bytes: &[u8]) -> Result<Vec<(String, NDArray)>> {
    let mut r = ByteReader::new(bytes, "LoadParams");
    let names = read_params_header(&mut r)?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let a = load_ndarray(&mut r)
            .map_err(|e| super::ctx(e, format_args!("loading parameter '{name}'")))?;
        out.push((name, a));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_lanes_cannot_make_a_small_file_ask_for_much_memory() {
        // 1 MiB of uint8 data; as uint8x65535 it would take 64 GiB in memory.
        let a = NDArray::from_slice(&vec![7u8; 1 << 20], &[1 << 20]).unwrap();
        let mut b = Vec::new();
        save_ndarray(&mut b, &a).unwrap();
        // magic, reserved, device (8 bytes), ndim (4), then code, bits, lanes.
        assert_eq!(b[30..32], [1, 0]);
        b[30..32].copy_from_slice(&u16::MAX.to_le_bytes());
        let e = load_ndarray(&mut ByteReader::new(&b, "test")).unwrap_err();
        // On 32-bit targets the 64 GiB do not fit the address space in the first place.
        assert!(
            e.message.contains("in memory for 1048576 bytes")
                || (usize::BITS == 32 && e.message.contains("address space")),
            "{}",
            e.message
        );
        // A few lanes, within the margin, still load (as the reference, which stores one).
        b[30..32].copy_from_slice(&4u16.to_le_bytes());
        let v = load_ndarray(&mut ByteReader::new(&b, "test")).unwrap();
        assert_eq!(v.dtype().lanes, 4);
    }

    #[test]
    fn array_layout() {
        let a = NDArray::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
        let mut b = Vec::new();
        save_ndarray(&mut b, &a).unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(&NDARRAY_MAGIC.to_le_bytes());
        want.extend_from_slice(&[0; 8]);
        want.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]); // cpu(0)
        want.extend_from_slice(&[1, 0, 0, 0]); // ndim
        want.extend_from_slice(&[2, 32, 1, 0]); // float32
        want.extend_from_slice(&2i64.to_le_bytes());
        want.extend_from_slice(&8i64.to_le_bytes());
        want.extend_from_slice(&1.0f32.to_le_bytes());
        want.extend_from_slice(&2.0f32.to_le_bytes());
        assert_eq!(b, want);
        let back = load_ndarray(&mut ByteReader::new(&b, "t")).unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        for cut in 0..b.len() {
            assert!(load_ndarray(&mut ByteReader::new(&b[..cut], "t")).is_err());
        }
    }

    #[test]
    fn arrays_read_after_their_headers_share_one_block_when_large() {
        let big: Vec<f32> = (0..300_000).map(|i| i as f32 * 0.5).collect();
        let odd: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
        let small = [3i64, -4];
        let mut bytes = Vec::new();
        for a in [
            NDArray::from_slice(&big, &[300_000]).unwrap(),
            NDArray::from_slice(&odd, &[1_000_003]).unwrap(),
            NDArray::from_slice(&small, &[2]).unwrap(),
        ] {
            save_ndarray(&mut bytes, &a).unwrap();
        }
        bytes.extend_from_slice(b"tail");
        let read = |n: usize| {
            let mut r = ByteReader::new(&bytes, "t");
            let pending: Vec<PendingArray> = (0..n)
                .map(|_| skip_ndarray(&mut r).unwrap().unwrap())
                .collect();
            let arrays = read_arrays(&mut r, &pending).unwrap();
            (arrays, r.position().unwrap())
        };
        // All three (3.2 MB): one block, 64-byte slots, the reader left after the last.
        let (arrays, pos) = read(3);
        assert_eq!(pos, bytes.len() - 4);
        assert_eq!(arrays[0].to_vec::<f32>().unwrap(), big);
        assert_eq!(arrays[1].to_vec::<u8>().unwrap(), odd);
        assert_eq!(arrays[2].to_vec::<i64>().unwrap(), small);
        let data = |a: &NDArray| a.dltensor().data as usize;
        assert_eq!(data(&arrays[1]) - data(&arrays[0]), 1_200_000);
        assert_eq!(data(&arrays[2]) - data(&arrays[1]), 1_000_064);
        // One array alone: an allocation of its own, as from `load_ndarray`.
        let (one, _) = read(1);
        assert_eq!(one[0].to_vec::<f32>().unwrap(), big);
        // A source that cannot seek is read array by array.
        struct Plain<'a>(ByteReader<'a>);
        impl ByteSource for Plain<'_> {
            fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
                self.0.take(n, what)
            }
            fn left(&self) -> usize {
                self.0.left()
            }
        }
        let mut plain = Plain(ByteReader::new(&bytes, "t"));
        assert!(skip_ndarray(&mut plain).unwrap().is_none());
        assert_eq!(
            load_ndarray(&mut plain).unwrap().to_vec::<f32>().unwrap(),
            big
        );
    }

    #[test]
    fn params_round_trip_and_errors() {
        let p = vec![
            (
                "w".to_string(),
                NDArray::from_slice(&[1i32, 2, 3], &[3]).unwrap(),
            ),
            (
                "b".to_string(),
                NDArray::from_slice(&[0.5f64], &[]).unwrap(),
            ),
        ];
        let bytes = save_params(&p).unwrap();
        let q = load_params(&bytes).unwrap();
        assert_eq!(q[0].0, "w");
        assert_eq!(q[0].1.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
        assert_eq!(q[1].1.shape(), &[] as &[i64]);
        assert_eq!(q[1].1.to_vec::<f64>().unwrap(), vec![0.5]);
        for cut in 0..bytes.len() {
            assert!(load_params(&bytes[..cut]).is_err());
        }
        let mut bad = bytes.clone();
        bad[0] ^= 1;
        assert!(load_params(&bad).unwrap_err().message.contains("magic"));
    }
}
