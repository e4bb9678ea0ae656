//! Shared libraries exported by TVM (`.so`), opened with libloading.

use super::blob::process_blob_from;
use super::library::{init_context_functions, symbol, Library, LibraryModule};
use super::Module;
use crate::packed_func::error::{Error, Result};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// The library's symbol tables, read in place (`dynsym`), where this target can.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
use super::dynsym::Scope;

/// Stands in for the symbol tables where they are not read (`dlsym` answers everything).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
struct Scope;

/// The scope of the opened library `lib` (and `lib` back).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn open_scope(
    lib: libloading::os::unix::Library,
) -> (libloading::os::unix::Library, Option<Scope>) {
    let handle = lib.into_raw();
    // SAFETY: `handle` came from `into_raw` of a library opened with dlopen.
    let lib = unsafe { libloading::os::unix::Library::from_raw(handle) };
    // SAFETY: a live handle, owned by the library stored beside the scope, which is dropped
    // first.
    (lib, unsafe { Scope::new(handle) })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn open_scope(
    lib: libloading::os::unix::Library,
) -> (libloading::os::unix::Library, Option<Scope>) {
    (lib, None)
}

/// What the tables say about `name`: `Some` address or NULL (as `dlsym` would answer), `None`
/// to ask `dlsym`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn table_lookup(scope: &Option<Scope>, name: &str) -> Option<*mut c_void> {
    use super::dynsym::Lookup;
    match scope.as_ref()?.lookup(name) {
        Lookup::Found(p) => Some(p),
        Lookup::Absent => Some(std::ptr::null_mut()),
        Lookup::AskDlsym => None,
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn table_lookup(_: &Option<Scope>, _: &str) -> Option<*mut c_void> {
    None
}

/// A loaded shared library.
pub struct DsoLibrary {
    /// Declared before `lib`, so dropped first: the tables point into the library's memory.
    scope: Option<Scope>,
    lib: libloading::os::unix::Library,
    path: String,
}

impl DsoLibrary {
    /// Wraps an opened library.
    fn new(lib: libloading::os::unix::Library, path: &str) -> DsoLibrary {
        let (lib, scope) = open_scope(lib);
        DsoLibrary {
            scope,
            lib,
            path: path.to_string(),
        }
    }

    /// `dlsym` on the library (its dependencies included).
    fn dlsym(&self, name: &str) -> *mut c_void {
        let Ok(c) = CString::new(name) else {
            return std::ptr::null_mut();
        };
        // SAFETY: we only take the symbol's address; callers interpret it per TVM's ABI.
        match unsafe { self.lib.get::<*mut c_void>(c.as_bytes_with_nul()) } {
            Ok(s) => s.into_raw(),
            Err(_) => std::ptr::null_mut(),
        }
    }
}

impl Library for DsoLibrary {
    fn symbol(&self, name: &str) -> *mut c_void {
        table_lookup(&self.scope, name).unwrap_or_else(|| self.dlsym(name))
    }

    fn describe(&self) -> String {
        self.path.clone()
    }
}

/// A symbol table entry of this process's ELF class (what `dladdr1` points at).
#[cfg(target_pointer_width = "64")]
type ElfSym = libc::Elf64_Sym;
#[cfg(target_pointer_width = "32")]
type ElfSym = libc::Elf32_Sym;

/// Size of the ELF symbol at `addr`, when the dynamic linker knows it.
fn symbol_size(addr: *mut c_void) -> Option<usize> {
    const RTLD_DL_SYMENT: libc::c_int = 1;
    // SAFETY: Dl_info is plain data; all zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut sym: *mut ElfSym = std::ptr::null_mut();
    // SAFETY: dladdr1 fills `info` and `sym` for an address inside a loaded object.
    let r = unsafe {
        libc::dladdr1(
            addr,
            &mut info,
            &mut sym as *mut *mut ElfSym as *mut *mut c_void,
            RTLD_DL_SYMENT,
        )
    };
    if r == 0 || sym.is_null() {
        return None;
    }
    // SAFETY: non-null symbol entry from the dynamic linker.
    let size = unsafe { (*sym).st_size } as usize;
    (size > 0).then_some(size)
}

/// Blobs at least this large (a model's weights) are read through [`file_source`].
const FILE_SOURCE_MIN: usize = 1 << 20;

/// The library file behind a large blob of a loaded library, with the blob's offset in it
/// (from the program header of the loaded segment that holds it), checked to be the file that
/// is mapped there (device and inode) and by reading the blob's first bytes back from it;
/// `None` for small blobs or when anything does not match (the blob is then copied from the
/// mapping as before).
#[cfg(target_os = "linux")]
#[inline(never)]
fn file_source(
    blob: &[u8],
    (file, meta): (std::fs::File, std::fs::Metadata),
) -> Option<crate::module::blob::BlobFile> {
    use std::os::unix::fs::MetadataExt;
    if blob.len() < FILE_SOURCE_MIN {
        return None;
    }
    let offset = file_offset_of(blob.as_ptr() as usize, blob.len())?;
    // The very file that is mapped, not one put at the same path since it was opened (the
    // dynamic loader hands back an already-loaded library by its name without opening the
    // path again).
    let dev = meta.dev();
    let here = (
        u64::from(libc::major(dev)),
        u64::from(libc::minor(dev)),
        meta.ino(),
    );
    if mapped_file_of(blob.as_ptr() as usize)? != here {
        return None;
    }
    let head = &blob[..64];
    let mut back = [0u8; 64];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut back, offset).ok()?;
    (back == *head).then(|| crate::module::blob::BlobFile::new(file, offset))
}

#[cfg(not(target_os = "linux"))]
fn file_source(
    _blob: &[u8],
    _file: (std::fs::File, std::fs::Metadata),
) -> Option<crate::module::blob::BlobFile> {
    None
}

/// The file (device major, minor, inode) mapped at `addr` in this process, from
/// `/proc/self/maps`.
#[cfg(target_os = "linux")]
#[inline(never)]
fn mapped_file_of(addr: usize) -> Option<(u64, u64, u64)> {
    let maps = crate::packed_func::text::read_file_text("/proc/self/maps".as_ref())?;
    for line in maps.lines() {
        // start-end perms offset major:minor inode path
        let mut f = line.split_ascii_whitespace();
        let (range, _perms, _offset, dev, inode) =
            (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        let (start, end) = range.split_once('-')?;
        let (start, end) = (
            usize::try_from(num(start, 16)?).ok()?,
            usize::try_from(num(end, 16)?).ok()?,
        );
        if addr < start || addr >= end {
            continue;
        }
        let (major, minor) = dev.split_once(':')?;
        return Some((num(major, 16)?, num(minor, 16)?, num(inode, 10)?));
    }
    None
}

/// `s` as a number in `radix` (one out-of-line copy of the parse for the fields of a line).
#[cfg(target_os = "linux")]
#[inline(never)]
fn num(s: &str, radix: u32) -> Option<u64> {
    u64::from_str_radix(s, radix).ok()
}

/// The file offset of `len` bytes at address `addr` of a loaded object: the object's loaded
/// segment (`PT_LOAD`) that holds them within its file-backed part.
#[cfg(target_os = "linux")]
#[inline(never)]
fn file_offset_of(addr: usize, len: usize) -> Option<u64> {
    let mut found = None;
    super::dynsym::each_object(&mut |info| {
        if info.dlpi_phdr.is_null() {
            return false;
        }
        // SAFETY: the loader's program headers of this object, `dlpi_phnum` of them.
        let phdrs =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_LOAD) {
            let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
            let end = start.wrapping_add(ph.p_filesz as usize);
            if addr >= start && addr.checked_add(len).is_some_and(|e| e <= end) {
                // `p_offset` is `u64` in ELF64, `u32` in ELF32.
                #[allow(clippy::useless_conversion)]
                let p_offset = u64::from(ph.p_offset);
                found = p_offset.checked_add((addr - start) as u64);
                return true;
            }
        }
        false
    });
    found
}

/// The bytes of a blob symbol laid out as a u64 little-endian length then the data (TVM's
/// `__tvm_dev_mblob` and tvm-ffi's `__tvm_ffi__library_bin`), the length checked against the
/// symbol's size where the dynamic linker knows it.
///
/// # Safety
/// `sym` must be the address of such a symbol in a library that stays loaded for `'a`.
#[inline(never)]
pub(crate) unsafe fn length_prefixed_blob<'a>(sym: *mut c_void, path: &str) -> Result<&'a [u8]> {
    // SAFETY: the caller's contract: at least the 8-byte length is there (an array of bytes,
    // so no alignment is needed).
    let nbytes = u64::from_le_bytes(unsafe { *(sym as *const [u8; 8]) });
    if let Some(size) = symbol_size(sym) {
        if nbytes.checked_add(8).is_none_or(|n| n > size as u64) {
            return Err(Error::value_fmt(format_args!(
                "{path}: the module blob is truncated or corrupted: it claims {nbytes} bytes \
                 but the symbol holds {}",
                size.saturating_sub(8)
            )));
        }
    } else if nbytes > (1u64 << 34) {
        return Err(Error::value_fmt(format_args!(
            "{path}: the module blob is corrupted: it claims {nbytes} bytes"
        )));
    }
    // Past the address space (4 GiB on 32-bit targets) it cannot be in the library.
    let len = usize::try_from(nbytes).map_err(|_| {
        Error::value(format!(
            "{path}: the module blob is corrupted: it claims {nbytes} bytes, more than the \
             {}-bit address space",
            usize::BITS
        ))
    })?;
    // SAFETY: the length was checked against the symbol's size.
    Ok(unsafe { std::slice::from_raw_parts((sym as *const u8).add(8), len) })
}

/// Opens `path` with `dlopen` as libloading's `Library::open` opens it, with the texts its
/// errors display (without libloading's error type and its `Display` in the library).
///
/// # Safety
/// Loading runs the library's initialisers.
unsafe fn dlopen(
    path: &str,
    flags: libc::c_int,
) -> std::result::Result<libloading::os::unix::Library, String> {
    let owned;
    let name: &std::ffi::CStr = match path.as_bytes().last() {
        None => c"",
        Some(0) => std::ffi::CStr::from_bytes_with_nul(path.as_bytes()).map_err(|_| {
            crate::packed_func::text::owned(
                "could not create a C string from bytes with trailing null",
            )
        })?,
        Some(_) => {
            owned = CString::new(path).map_err(|_| {
                crate::packed_func::text::owned("could not create a C string from bytes")
            })?;
            &owned
        }
    };
    // SAFETY: `name` is NUL-terminated; the caller accepts the initialisers.
    let handle = unsafe { libc::dlopen(name.as_ptr(), flags) };
    if handle.is_null() {
        // SAFETY: no preconditions; the text is copied before any other dl* call.
        let e = unsafe { libc::dlerror() };
        if e.is_null() {
            return Err(crate::packed_func::text::owned(
                "dlopen failed, but system did not report the error",
            ));
        }
        // SAFETY: a non-NULL `dlerror` result is a NUL-terminated string.
        return Err(unsafe { std::ffi::CStr::from_ptr(e) }
            .to_string_lossy()
            .into_owned());
    }
    // SAFETY: a handle `dlopen` returned, owned by the returned library from here on.
    Ok(unsafe { libloading::os::unix::Library::from_raw(handle) })
}

/// Opens a TVM-exported library and builds its module tree.
pub fn load(path: &str) -> Result<Module> {
    // The dynamic loader trusts the file (a truncated one kills the process with SIGBUS);
    // the check also refuses a path that is missing or not a file.
    let file = super::elf_check::check_file(path)?;
    // RTLD_LAZY | RTLD_LOCAL as the reference: binding on first call keeps loading cheap.
    // SAFETY: loading runs the library's initialisers; TVM output has only static
    // registrations, which call back into this runtime's C API.
    let lib = unsafe { dlopen(path, libc::RTLD_LAZY | libc::RTLD_LOCAL) }
        .map_err(|e| Error::value_fmt(format_args!("cannot load {path}: {e}")))?;
    let lib = Arc::new(DsoLibrary::new(lib, path));
    let lib_dyn: Arc<dyn Library> = lib.clone();
    let ctx_slot = lib.symbol(symbol::TVM_MODULE_CTX) as *mut *mut c_void;
    let blob_sym = lib.symbol(symbol::TVM_DEV_MBLOB);
    // Libraries of the other ABIs have neither classic symbol; classic ones skip the lookups.
    if ctx_slot.is_null() && blob_sym.is_null() {
        super::tvm_ffi::refuse_unsupported(&*lib_dyn, path)?;
        if let Some(probe) = super::tvm_ffi::probe(&*lib_dyn, path) {
            #[cfg(feature = "tvm-ffi")]
            return super::tvm_ffi::load(lib_dyn, path, probe);
            #[cfg(not(feature = "tvm-ffi"))]
            return Err(Error::value_fmt(format_args!(
                "cannot load {path} (a tvm-ffi library, TVM >= 0.22, found at {probe:?}): this \
                 library was built without `tvm-ffi`"
            )));
        }
    }
    init_context_functions(&*lib_dyn)?;
    let (root, ctx) = if blob_sym.is_null() {
        // Every TVM-compiled library has at least one of these (a module of several
        // functions has neither entry nor context, but its error reporting slot).
        let has_tvm = [
            symbol::TVM_MODULE_MAIN,
            "__TVMAPISetLastError",
            "__TVMFuncCall",
            "__TVMBackendGetFuncFromEnv",
        ]
        .iter()
        .any(|s| !lib.symbol(s).is_null());
        if !has_tvm && ctx_slot.is_null() {
            return Err(Error::value_fmt(format_args!(
                "cannot load {path}: the library has no TVM symbols (__tvm_module_ctx, \
                 __tvm_main__, __tvm_dev_mblob, __TVMAPISetLastError); was it exported by TVM?"
            )));
        }
        let m = Module::new(Box::new(LibraryModule::new(lib_dyn.clone())));
        (m.clone(), m)
    } else {
        // SAFETY: `__tvm_dev_mblob` is a length-prefixed blob in the loaded library.
        let blob = unsafe { length_prefixed_blob(blob_sym, path)? };
        process_blob_from(blob, file_source(blob, file), lib_dyn.clone(), path)?
    };
    super::library::bind_context(ctx_slot, &ctx, &lib_dyn);
    Ok(root)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn identity(path: &std::path::Path) -> (u64, u64, u64) {
        let m = std::fs::metadata(path).unwrap();
        (
            u64::from(libc::major(m.dev())),
            u64::from(libc::minor(m.dev())),
            m.ino(),
        )
    }

    #[test]
    fn the_mapped_file_is_told_from_a_file_put_at_its_path_since() {
        let dir = std::env::temp_dir().join(format!("tvmrt_dso_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mapped.bin");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh private read-only mapping of an 8 KiB file, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let mapped = mapped_file_of(p as usize + 100);
        assert_eq!(mapped, Some(identity(&path)));
        // Another file renamed over the path: the path no longer names the mapped file.
        let new = dir.join("new.bin");
        std::fs::write(&new, vec![7u8; 8192]).unwrap();
        std::fs::rename(&new, &path).unwrap();
        assert_ne!(mapped, Some(identity(&path)));
        // An address no file is mapped at.
        let local = 0u8;
        assert_ne!(
            mapped_file_of(&local as *const u8 as usize),
            Some(identity(&path))
        );
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p, 8192) };
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dlopen_errors_read_as_libloading_displays_them() {
        let dir = std::env::temp_dir().join(format!("tvmrt_dlopen_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.so");
        std::fs::write(&junk, b"not a shared library").unwrap();
        let junk = junk.to_str().unwrap().to_string();
        let with_nul = format!("{junk}\0");
        for path in [
            junk.as_str(),
            with_nul.as_str(),
            "/nonexistent/tvmrt.so",
            "a\0b",
            "a\0b\0",
        ] {
            let flags = libc::RTLD_LAZY | libc::RTLD_LOCAL;
            // SAFETY: none of the paths is a loadable library (nothing is initialised).
            let ours = unsafe { dlopen(path, flags) }.err();
            // SAFETY: as above.
            let theirs = unsafe { libloading::os::unix::Library::open(Some(path), flags) }
                .err()
                .map(|e| e.to_string());
            assert!(ours.is_some(), "{path:?}");
            assert_eq!(ours, theirs, "{path:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
