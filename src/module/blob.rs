//! The `__tvm_dev_mblob` stream: device modules and the import tree a TVM-exported library
//! carries, read with bounds checks everywhere (the reader is fuzzed).
//!
//! Layout: `u64 nbytes` then `nbytes` of stream: `u64 count`, then `count` entries, each a
//! string type key followed by that type's payload. `_lib` stands for the library itself (no
//! payload); `_import_tree` carries two `u64` vectors (CSR row pointers and child indices);
//! any other key is read by the loader `runtime.module.loadbinary_<key>`. Strings and vectors
//! are a `u64` length followed by the data, little-endian.

use super::library::{Library, LibraryModule};
use super::Module;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::Function;
use crate::packed_func::registry;
use crate::packed_func::value::{ArgValue, RawHandle, RetValue};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::Arc;

/// A cursor over a byte stream with checked reads. Loaders receive a pointer to one (as an
/// opaque handle, see [`call_loader`]) and read their payload from it through
/// [`with_lent_reader`], which refuses any handle that does not name a reader lent to them.
#[repr(C)]
pub struct BlobReader<'a> {
    data: &'a [u8],
    pos: usize,
    context: String,
    file: Option<BlobFile>,
}

/// The library file that holds a blob, with the file offset of the blob's first byte: large
/// arrays are read from the file (`pread`, straight from the page cache into the array)
/// instead of copied out of the library's mapping, so that the mapping's pages of weights are
/// never faulted in (and need no unmapping when the library is closed).
pub struct BlobFile {
    file: std::fs::File,
    offset: u64,
}

impl BlobFile {
    /// `file` holds the blob's bytes from `offset` on (checked by the caller).
    pub fn new(file: std::fs::File, offset: u64) -> BlobFile {
        BlobFile { file, offset }
    }

    /// Reads `n` bytes at `at` (relative to the blob) into `dst`; false when the file gave
    /// fewer (an error, or a file shorter than the mapping).
    ///
    /// # Safety
    /// `dst` must be valid for `n` bytes of writes.
    unsafe fn read(&self, at: usize, dst: *mut u8, n: usize) -> bool {
        use std::os::fd::AsRawFd;
        let mut done = 0usize;
        while done < n {
            let Some(pos) = at
                .checked_add(done)
                .and_then(|a| self.offset.checked_add(a as u64))
            else {
                return false;
            };
            // 64-bit file offsets on 32-bit targets too (`off_t` is 32 bits on armv7).
            #[cfg(target_os = "linux")]
            use libc::{off64_t as FileOffset, pread64 as pread_at};
            #[cfg(not(target_os = "linux"))]
            use libc::{off_t as FileOffset, pread as pread_at};
            let Ok(pos) = FileOffset::try_from(pos) else {
                return false;
            };
            // SAFETY: `dst + done` is valid for `n - done` bytes by the caller's contract.
            let r = unsafe {
                pread_at(
                    self.file.as_raw_fd(),
                    dst.add(done) as *mut libc::c_void,
                    n - done,
                    pos,
                )
            };
            if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if r <= 0 {
                return false;
            }
            done += r as usize;
        }
        true
    }
}

/// A part of a blob (from byte `start` on) and the library file that holds it.
#[derive(Clone, Copy)]
pub struct FileSpan<'f> {
    file: &'f BlobFile,
    start: usize,
}

/// Copies `src`, the bytes at `at` of a span (relative to its start), to `dst`: large copies
/// are read from the span's file, anything else (or a failed read) copied from `src`.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes and not overlap `src`.
pub unsafe fn copy_out(span: Option<FileSpan<'_>>, at: usize, src: &[u8], dst: *mut u8) {
    if src.len() >= FILE_READ_MIN {
        if let Some(s) = span {
            // SAFETY: forwarded contract. On failure the copy below rewrites it all.
            if unsafe { s.file.read(s.start.saturating_add(at), dst, src.len()) } {
                return;
            }
        }
    }
    if !src.is_empty() {
        // SAFETY: forwarded contract.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
    }
}

/// Arrays at least this large are read from the library file when the reader has one.
const FILE_READ_MIN: usize = 64 << 10;

impl<'a> BlobReader<'a> {
    /// A reader over `data`; `context` names the source in errors.
    pub fn new(data: &'a [u8], context: impl Into<String>) -> Self {
        BlobReader {
            data,
            pos: 0,
            context: context.into(),
            file: None,
        }
    }

    /// The reader with the library file that holds its blob (see [`BlobFile`]).
    pub fn with_file(mut self, file: BlobFile) -> Self {
        self.file = Some(file);
        self
    }

    /// Consumes `n` bytes and copies the first `copy` of them (at most `n`) to `dst`: read
    /// from the library file for large copies when the reader has one (see [`BlobFile`]),
    /// else copied from the blob.
    ///
    /// # Safety
    /// `dst` must be valid for `copy` bytes of writes and not overlap the blob.
    pub unsafe fn read_into(
        &mut self,
        n: usize,
        dst: *mut u8,
        copy: usize,
        what: &str,
    ) -> Result<()> {
        let at = self.pos;
        let src = self.read_bytes(n, what)?;
        let span = self.file.as_ref().map(|file| FileSpan { file, start: 0 });
        // SAFETY: forwarded contract.
        unsafe { copy_out(span, at, &src[..copy.min(n)], dst) };
        Ok(())
    }

    /// Reads a length-prefixed byte string, with where it lies in the library file when the
    /// reader has one (for a nested format whose large arrays should be read from the file).
    pub fn read_blob_span(&mut self, what: &str) -> Result<(&'a [u8], Option<FileSpan<'_>>)> {
        let body = self.read_blob(what)?;
        let start = self.pos - body.len();
        Ok((
            body,
            self.file.as_ref().map(|file| FileSpan { file, start }),
        ))
    }

    fn truncated(&self, what: &str) -> Error {
        Error::value_fmt(format_args!(
            "{}: the module blob is truncated or corrupted: cannot read {what} at byte {} of {}",
            self.context,
            self.pos,
            self.data.len()
        ))
    }

    /// Where the next read starts.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Goes to a position [`BlobReader::position`] returned.
    pub fn seek(&mut self, pos: usize) -> Result<()> {
        if pos > self.data.len() {
            return Err(self.truncated("a position past the blob's end"));
        }
        self.pos = pos;
        Ok(())
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Reads `n` raw bytes.
    pub fn read_bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let data: &'a [u8] = self.data;
        let Some(s) = data.get(self.pos..).and_then(|d| d.get(..n)) else {
            return Err(self.truncated(what));
        };
        self.pos += n;
        Ok(s)
    }

    /// Reads `N` raw bytes.
    fn read_array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        match self.read_bytes(N, what)?.first_chunk::<N>() {
            Some(b) => Ok(*b),
            None => Err(self.truncated(what)),
        }
    }

    /// Reads a little-endian `u64`.
    pub fn read_u64(&mut self, what: &str) -> Result<u64> {
        self.read_array(what).map(u64::from_le_bytes)
    }

    /// Reads a little-endian `u32`.
    pub fn read_u32(&mut self, what: &str) -> Result<u32> {
        self.read_array(what).map(u32::from_le_bytes)
    }

    /// Reads a length-prefixed byte string.
    pub fn read_blob(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = self.read_u64(what)?;
        if n > self.remaining() as u64 {
            return Err(self.truncated(what));
        }
        self.read_bytes(n as usize, what)
    }

    /// Reads a length-prefixed UTF-8 string.
    pub fn read_string(&mut self, what: &str) -> Result<String> {
        let b = self.read_blob(what)?;
        String::from_utf8(b.to_vec()).map_err(|_| {
            Error::value_fmt(format_args!(
                "{}: the module blob is corrupted: {what} is not UTF-8",
                self.context
            ))
        })
    }

    /// Reads a length-prefixed vector of `u64`.
    pub fn read_u64_vec(&mut self, what: &str) -> Result<Vec<u64>> {
        let n = self.read_u64(what)?;
        if n > (self.remaining() / 8) as u64 {
            return Err(self.truncated(what));
        }
        // A plain loop into an exact allocation (`n` is bounded by the bytes left above).
        let mut v = Vec::with_capacity(n as usize);
        for _ in 0..n {
            v.push(self.read_u64(what)?);
        }
        Ok(v)
    }

    /// The source name for messages.
    pub fn context(&self) -> &str {
        &self.context
    }
}

/// The loaders available for blob entries (the `<key>` of `runtime.module.loadbinary_<key>`).
pub fn available_loaders() -> Vec<String> {
    let prefix = "runtime.module.loadbinary_";
    // Only the loaders' names become strings (registered names are valid UTF-8).
    let mut v: Vec<String> = Vec::new();
    registry::for_each_name(&mut |n| {
        if let Some(k) = n.strip_prefix(prefix.as_bytes()) {
            v.push(String::from_utf8_lossy(k).into_owned());
        }
    });
    // The crate's one shared sort (equal names are equal strings: any order is this one).
    crate::packed_func::order::sort_stable_by(&mut v, |a, b| a.cmp(b));
    v
}

thread_local! {
    /// The blob readers lent to loaders on this thread ([`call_loader`]), innermost last: each
    /// reader's address, and whether a loader is reading it now.
    static LENT: RefCell<Vec<(usize, bool)>> = const { RefCell::new(Vec::new()) };
}

/// Takes a lent reader's entry out of [`LENT`] when the loader call ends (returns or unwinds).
struct Unlend(usize);

impl Drop for Unlend {
    fn drop(&mut self) {
        LENT.with(|l| {
            let mut l = l.borrow_mut();
            if let Some(i) = l.iter().rposition(|&(a, _)| a == self.0) {
                l.remove(i);
            }
        });
    }
}

/// Marks a lent reader free again when the loader that claimed it is done.
struct Release(usize);

impl Drop for Release {
    fn drop(&mut self) {
        LENT.with(|l| {
            if let Some(e) = l.borrow_mut().iter_mut().rev().find(|e| e.0 == self.0) {
                e.1 = false;
            }
        });
    }
}

/// Calls a blob loader (`runtime.module.loadbinary_<key>`) with a handle to `reader`: for the
/// duration of the call, and on this thread only, the handle names a reader the loaders
/// accept ([`with_lent_reader`]).
pub fn call_loader(loader: &Function, reader: &mut BlobReader<'_>) -> Result<RetValue> {
    let addr = reader as *mut BlobReader<'_> as usize;
    LENT.with(|l| l.borrow_mut().push((addr, false)));
    let _unlend = Unlend(addr);
    // SAFETY: the handle names `reader`, which outlives the call and is not touched here
    // until the call returns; loaders reach it only through `with_lent_reader`, which checks
    // that it is lent on this thread and not in use.
    let h = unsafe { RawHandle::new(addr as *mut c_void) };
    loader.call(&[ArgValue::Handle(h)])
}

/// Runs `f` on the blob reader a loader's stream handle names: only a reader lent to loaders
/// on this thread by [`call_loader`], and not being read by another loader; any other handle
/// (NULL, a stale or made-up address, one from another thread or from an RPC client) is an
/// error naming `who`, never dereferenced. The check runs once per loader call.
pub fn with_lent_reader<R>(
    handle: *mut c_void,
    who: &str,
    f: impl FnOnce(&mut BlobReader<'_>) -> Result<R>,
) -> Result<R> {
    let addr = handle as usize;
    let claimed = LENT.with(|l| {
        let mut l = l.borrow_mut();
        match l.iter_mut().rev().find(|e| e.0 == addr) {
            Some(e) if !e.1 => {
                e.1 = true;
                Ok(())
            }
            Some(_) => Err("the stream it names is already being read by another loader"),
            None if handle.is_null() => Err("the stream handle is NULL"),
            None => Err(
                "the handle does not name a module blob stream the runtime lent to loaders on \
                 this thread (loaders are called by the runtime while it reads a library)",
            ),
        }
    });
    if let Err(why) = claimed {
        return Err(Error::value_fmt(format_args!("{who}: {why}")));
    }
    let _release = Release(addr);
    // SAFETY: the address is a reader `call_loader` lent on this thread: it is alive until that
    // call returns, which is after this one, and nothing else uses it meanwhile (its lender
    // waits for the call, and the claim above keeps other loaders out until `_release`).
    let reader = unsafe { &mut *(handle as *mut BlobReader<'_>) };
    f(reader)
}

/// The error for a blob entry of type `key` whose loader `name` is not registered.
#[cold]
#[inline(never)]
fn no_loader(name: &str, key: &str, context: &str) -> Error {
    let why = crate::packed_func::features::or_built_without(
        name,
        format!(
            "the library was built with a module of type '{key}' but no loader of that \
             name is registered; available loaders: {}",
            available_loaders().join(", ")
        ),
    );
    Error::value_fmt(format_args!("{context}: {why}"))
}

/// Loads one entry through its registered loader.
#[inline(never)]
fn load_entry(key: &str, reader: &mut BlobReader<'_>) -> Result<Module> {
    let name = format!("runtime.module.loadbinary_{key}");
    let f = registry::get(&name).ok_or_else(|| no_loader(&name, key, reader.context()))?;
    let rv = call_loader(&f, reader)?;
    Module::from_object(rv.into_object()?).map_err(|e| e.context(format!("loader {name} returned")))
}

/// The error for a corrupted import tree (one cold copy for its several sites).
#[cold]
#[inline(never)]
fn bad_tree(context: &str) -> Error {
    Error::value_fmt(format_args!(
        "{context}: the module blob's import tree is corrupted"
    ))
}

/// A module of the library itself (one out-of-line copy for its two sites).
#[inline(never)]
fn library_module(lib: &Arc<dyn Library>) -> Module {
    Module::new(Box::new(LibraryModule::new(lib.clone())))
}

/// Rebuilds the module tree of a library from its blob. Returns the root module and the
/// library module (whose address compiled code gets as `__tvm_module_ctx`).
pub fn process_blob(blob: &[u8], lib: Arc<dyn Library>, context: &str) -> Result<(Module, Module)> {
    process_blob_from(blob, None, lib, context)
}

/// [`process_blob`] for a blob that also lies in a file (see [`BlobFile`]).
#[inline(never)]
pub fn process_blob_from(
    blob: &[u8],
    file: Option<BlobFile>,
    lib: Arc<dyn Library>,
    context: &str,
) -> Result<(Module, Module)> {
    let mut r = BlobReader::new(blob, context);
    r.file = file;
    let count = r.read_u64("the number of modules")?;
    if count > r.remaining() as u64 {
        return Err(r.truncated("the module entries"));
    }
    let mut modules: Vec<Module> = Vec::new();
    let mut lib_module: Option<Module> = None;
    let mut row_ptr: Vec<u64> = Vec::new();
    let mut children: Vec<u64> = Vec::new();
    for _ in 0..count {
        let key = r.read_string("a module type key")?;
        match key.as_str() {
            "_lib" => {
                if lib_module.is_some() {
                    return Err(Error::value_fmt(format_args!(
                        "{context}: the module blob has more than one _lib entry"
                    )));
                }
                let m = library_module(&lib);
                lib_module = Some(m.clone());
                modules.push(m);
            }
            "_import_tree" => {
                row_ptr = r.read_u64_vec("the import tree row pointers")?;
                children = r.read_u64_vec("the import tree child indices")?;
            }
            _ => modules.push(load_entry(&key, &mut r)?),
        }
    }
    if row_ptr.is_empty() {
        // Old layout: the library is the root and imports every device module in order.
        let root = library_module(&lib);
        for m in &modules {
            root.import(m)?;
        }
        return Ok((root.clone(), root));
    }
    let bad_tree = || bad_tree(context);
    if row_ptr.len() != modules.len() + 1 {
        return Err(bad_tree());
    }
    for i in 0..modules.len() {
        let (start, end) = (row_ptr[i], row_ptr[i + 1]);
        if start > end || end > children.len() as u64 {
            return Err(bad_tree());
        }
        for &c in &children[start as usize..end as usize] {
            let child = usize::try_from(c)
                .ok()
                .and_then(|c| modules.get(c))
                .ok_or_else(bad_tree)?;
            modules[i].import(child).map_err(|_| bad_tree())?;
        }
    }
    let root = modules.first().cloned().ok_or_else(bad_tree)?;
    let ctx = lib_module.unwrap_or_else(|| root.clone());
    Ok((root, ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoLib;
    impl Library for NoLib {
        fn symbol(&self, _name: &str) -> *mut std::ffi::c_void {
            std::ptr::null_mut()
        }
        fn describe(&self) -> String {
            "test".into()
        }
    }

    /// A loader's handle is good only while `call_loader` lends the reader, only on the
    /// lending thread, and for one loader at a time; anything else is refused.
    #[test]
    fn lent_readers_are_vouched_for_only_while_lent_on_their_thread() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Mutex;
        static SEEN: AtomicUsize = AtomicUsize::new(0);
        static CHECKS: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let loader = Function::from_rust(|a, rv| {
            let h = a.handle(0)?;
            SEEN.store(h as usize, Ordering::Relaxed);
            // From another thread: refused.
            let addr = h as usize;
            let other = std::thread::spawn(move || {
                with_lent_reader(addr as *mut c_void, "t", |r| r.read_u64("x"))
                    .map_err(|e| e.into_message())
            })
            .join()
            .unwrap();
            CHECKS.lock().unwrap().push(other.unwrap_err());
            *rv = RetValue::Int(with_lent_reader(h, "t", |r| {
                // A second loader on the same reader while this one reads it: refused.
                let nested = with_lent_reader(h, "t", |r| r.read_u64("y"));
                CHECKS
                    .lock()
                    .unwrap()
                    .push(nested.unwrap_err().into_message());
                r.read_u64("x")
            })? as i64);
            Ok(())
        });
        let blob = 42u64.to_le_bytes();
        let mut r = BlobReader::new(&blob, "t");
        assert!(matches!(
            call_loader(&loader, &mut r).unwrap(),
            RetValue::Int(42)
        ));
        assert_eq!(r.remaining(), 0);
        let checks = CHECKS.lock().unwrap().clone();
        assert!(
            checks[0].contains("does not name a module blob stream"),
            "{checks:?}"
        );
        assert!(checks[1].contains("already being read"), "{checks:?}");
        // Once the call is over, the same address is refused.
        let stale = SEEN.load(Ordering::Relaxed) as *mut c_void;
        let e = with_lent_reader(stale, "t", |r| r.read_u64("x")).unwrap_err();
        assert!(
            e.message.contains("does not name a module blob stream"),
            "{e}"
        );
        // SAFETY: the loader vouches for handles before use (what this checks).
        let h = unsafe { RawHandle::new(stale) };
        let e = loader.call(&[ArgValue::Handle(h)]).unwrap_err();
        assert!(
            e.message.contains("does not name a module blob stream"),
            "{e}"
        );
        assert!(LENT.with(|l| l.borrow().is_empty()));
    }

    #[test]
    fn large_reads_come_from_the_file_and_fall_back_to_the_blob() {
        let n = FILE_READ_MIN + 1234;
        let blob: Vec<u8> = (0..n + 8).map(|i| (i % 251) as u8).collect();
        let dir = std::env::temp_dir().join(format!("tvmrt_blob_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The file holds the blob after 100 bytes of something else, with one byte changed,
        // so that a read from the file can be told from a copy of the blob.
        let mut file_bytes = vec![0xEEu8; 100];
        file_bytes.extend_from_slice(&blob);
        file_bytes[100 + 8 + 7] ^= 0xFF;
        let path = dir.join("blob.bin");
        std::fs::write(&path, &file_bytes).unwrap();
        let read = |file: Option<BlobFile>, copy: usize| {
            let mut r = BlobReader::new(&blob, "t");
            r.file = file;
            r.read_u64("head").unwrap();
            let mut out = vec![0u8; copy];
            // SAFETY: `out` holds `copy` bytes.
            unsafe { r.read_into(n, out.as_mut_ptr(), copy, "data").unwrap() };
            assert_eq!(r.remaining(), 0);
            out
        };
        let open = || Some(BlobFile::new(std::fs::File::open(&path).unwrap(), 100));
        // Large: from the file (the changed byte shows).
        assert_eq!(read(open(), n), file_bytes[108..108 + n]);
        // Small: from the blob.
        assert_eq!(read(open(), 16), blob[8..24]);
        // No file: from the blob.
        assert_eq!(read(None, n), blob[8..8 + n]);
        // A file shorter than the blob: the copy falls back to the blob.
        let short = dir.join("short.bin");
        std::fs::write(&short, &file_bytes[..file_bytes.len() / 2]).unwrap();
        let f = Some(BlobFile::new(std::fs::File::open(&short).unwrap(), 100));
        assert_eq!(read(f, n), blob[8..8 + n]);
        // Reads past the blob are refused before anything is copied.
        let mut r = BlobReader::new(&blob, "t");
        r.file = open();
        let mut out = vec![0u8; 1];
        // SAFETY: `out` holds 1 byte (copy 1).
        assert!(unsafe { r.read_into(n + 9, out.as_mut_ptr(), 1, "data") }.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn s(v: &mut Vec<u8>, x: &str) {
        v.extend_from_slice(&(x.len() as u64).to_le_bytes());
        v.extend_from_slice(x.as_bytes());
    }

    #[test]
    fn lib_only_with_tree() {
        let mut b = Vec::new();
        b.extend_from_slice(&2u64.to_le_bytes());
        s(&mut b, "_lib");
        s(&mut b, "_import_tree");
        for v in [[0u64, 0].as_slice(), [].as_slice()] {
            b.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for x in v {
                b.extend_from_slice(&x.to_le_bytes());
            }
        }
        let (root, ctx) = process_blob(&b, Arc::new(NoLib), "t").unwrap();
        assert_eq!(root.type_key(), "library");
        assert!(root.as_object().same_as(ctx.as_object()));
    }

    #[test]
    fn errors_name_the_problem() {
        let mut b = Vec::new();
        b.extend_from_slice(&1u64.to_le_bytes());
        s(&mut b, "nosuch");
        let e = process_blob(&b, Arc::new(NoLib), "f.so").unwrap_err();
        assert!(e.message.contains("nosuch") && e.message.contains("available loaders"));
        let e = process_blob(&b[..12], Arc::new(NoLib), "f.so").unwrap_err();
        assert!(e.message.contains("truncated"), "{}", e.message);
        let mut b = Vec::new();
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(process_blob(&b, Arc::new(NoLib), "f.so").is_err());
    }
}
