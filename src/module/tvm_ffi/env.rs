//! What a tvm-ffi library gets from its host: the context function pointers it holds as
//! variables (`__TVMFFIFunctionCall`, `__TVMFFIEnvModLookupFromImports`, ...), the error state
//! its kernels raise into, and the one symbol it imports from the process
//! (`TVMFFIErrorSetRaisedFromCStrParts`, provided by a tiny shim object loaded globally).

use super::abi::TVMFFIAny;
use super::call::{c_str_or, call_classic};
use crate::module::library::Library;
use crate::module::Module;
use crate::object::Object;
use crate::packed_func::error::{Error, Result};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

thread_local! {
    /// The error a tvm-ffi kernel (or a function it called) raised on this thread.
    static RAISED: RefCell<Option<Error>> = const { RefCell::new(None) };
}

/// The error the failed kernel raised, as a classic error.
pub fn take_raised() -> Error {
    RAISED
        .with(|r| r.borrow_mut().take())
        .or_else(take_foreign_raised)
        .unwrap_or_else(|| {
            Error::tvm("a kernel compiled for the tvm-ffi ABI failed without raising an error")
        })
}

/// With TVM's own libtvm_ffi.so in charge of the error symbol, a kernel's error was raised
/// there: move it out (`TVMFFIErrorMoveFromRaised`) and read its kind and message (the
/// `TVMFFIErrorCell` after the 24-byte object header).
fn take_foreign_raised() -> Option<Error> {
    if !matches!(ERROR_SYMBOL.get(), Some(Ok(ErrorSymbol::Foreign))) {
        return None;
    }
    type MoveFromRaised = unsafe extern "C" fn(*mut *mut c_void);
    type DecRef = unsafe extern "C" fn(*mut c_void) -> c_int;
    // SAFETY: dlsym only reads the loader's tables.
    let (mv, dec) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"TVMFFIErrorMoveFromRaised".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"TVMFFIObjectDecRef".as_ptr()),
        )
    };
    if mv.is_null() || dec.is_null() {
        return None;
    }
    // SAFETY: the symbols have these signatures in tvm-ffi's c_api.h.
    let (mv, dec) = unsafe {
        (
            std::mem::transmute::<*mut c_void, MoveFromRaised>(mv),
            std::mem::transmute::<*mut c_void, DecRef>(dec),
        )
    };
    let mut obj: *mut c_void = std::ptr::null_mut();
    // SAFETY: writes the raised error object (owned by us now) or NULL.
    unsafe { mv(&mut obj) };
    if obj.is_null() {
        return None;
    }
    let text = |b: *const super::abi::TVMFFIByteArray| {
        // SAFETY: the error cell's byte arrays point at its own strings.
        let b = unsafe { &*b };
        if b.data.is_null() {
            String::new()
        } else {
            // SAFETY: as above, `size` bytes.
            String::from_utf8_lossy(unsafe {
                std::slice::from_raw_parts(b.data as *const u8, b.size)
            })
            .into_owned()
        }
    };
    // SAFETY: an error object: the header, then the cell's kind and message byte arrays.
    let cell = unsafe { (obj as *const u8).add(super::abi::OBJECT_HEADER_SIZE) }
        as *const super::abi::TVMFFIByteArray;
    // SAFETY: see `text`; the cell has kind then message.
    let (kind, message) = (text(cell), text(unsafe { cell.add(1) }));
    // SAFETY: we own the reference MoveFromRaised gave us.
    unsafe { dec(obj) };
    Some(Error::from_message(&format!("{kind}: {message}")))
}

pub(crate) fn raise(err: Error) {
    RAISED.with(|r| *r.borrow_mut() = Some(err));
}

/// Builds the error from a kind name (`ValueError`, ...) and its message.
pub(crate) fn raise_kind(kind: &str, message: String) {
    raise(Error::from_message(&format!("{kind}: {message}")));
}

/// `TVMFFIErrorSetRaisedFromCStr(kind, message)`.
pub(crate) unsafe extern "C" fn set_raised_from_cstr(kind: *const c_char, message: *const c_char) {
    // Called from C: nothing may unwind out of it.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: tvm-ffi passes NUL-terminated strings (or NULL).
        let (kind, message) = unsafe { (c_str_or(kind, "RuntimeError"), c_str_or(message, "")) };
        raise_kind(&kind, message.into_owned());
    });
}

/// Collects the message parts of `TVMFFIErrorSetRaisedFromCStrParts` (NULL parts skipped).
///
/// # Safety
/// `parts` must be NULL or hold `n` entries, each NULL or NUL-terminated.
pub(crate) unsafe fn join_parts(parts: *const *const c_char, n: i32) -> String {
    let mut msg = String::new();
    if parts.is_null() {
        return msg;
    }
    for i in 0..n.max(0) as usize {
        // SAFETY: caller contract.
        let p = unsafe { *parts.add(i) };
        if !p.is_null() {
            // SAFETY: caller contract.
            msg.push_str(&unsafe { c_str_or(p, "") });
        }
    }
    msg
}

/// Base addresses of the tvm-ffi libraries this runtime loaded: calls of the shim's symbol
/// from them are ours.
static OUR_LIBRARIES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn base_of(addr: *const c_void) -> Option<usize> {
    // SAFETY: `Dl_info` is plain data; dladdr fills it for addresses in loaded objects.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables.
    let r = unsafe { libc::dladdr(addr, &mut info) };
    (r != 0 && !info.dli_fbase.is_null()).then_some(info.dli_fbase as usize)
}

/// The shim's handler: takes errors raised by our libraries, declines the rest (the shim
/// then passes them to the next definition, e.g. TVM's own libtvm_ffi.so).
unsafe extern "C" fn shim_handler(
    kind: *const c_char,
    parts: *const *const c_char,
    n: i32,
    caller: *mut c_void,
) -> c_int {
    // Called from C: nothing may unwind out of it (a panic declines the error, which the
    // shim then passes on).
    std::panic::catch_unwind(|| {
        // SAFETY: forwarded contract.
        unsafe { take_our_error(kind, parts, n, caller) }
    })
    .unwrap_or(0)
}

/// [`shim_handler`]'s body.
///
/// # Safety
/// As [`shim_handler`]: tvm-ffi's contract for `TVMFFIErrorSetRaisedFromCStrParts`.
unsafe fn take_our_error(
    kind: *const c_char,
    parts: *const *const c_char,
    n: i32,
    caller: *mut c_void,
) -> c_int {
    let ours = base_of(caller).is_some_and(|b| {
        OUR_LIBRARIES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&b)
    });
    if !ours {
        return 0;
    }
    // SAFETY: tvm-ffi's contract for this function.
    let (kind, msg) = unsafe {
        (
            c_str_or(kind, "RuntimeError").into_owned(),
            join_parts(parts, n),
        )
    };
    raise_kind(&kind, msg);
    1
}

/// The shim object, built by build.rs from `shim.c`.
#[cfg(not(target_os = "emscripten"))]
static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tvm_ffi_shim.so"));

/// How `TVMFFIErrorSetRaisedFromCStrParts` resolves in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorSymbol {
    /// Our shim, loaded globally.
    Shim,
    /// TVM's own libtvm_ffi.so was already loaded: its definition stays in charge.
    Foreign,
}

static ERROR_SYMBOL: OnceLock<std::result::Result<ErrorSymbol, String>> = OnceLock::new();

/// Makes `TVMFFIErrorSetRaisedFromCStrParts` resolvable for tvm-ffi libraries (once).
pub fn ensure_error_symbol() -> Result<ErrorSymbol> {
    ERROR_SYMBOL
        .get_or_init(install_error_symbol)
        .clone()
        .map_err(Error::internal)
}

fn install_error_symbol() -> std::result::Result<ErrorSymbol, String> {
    // SAFETY: dlsym with a NUL-terminated name only reads the loader's tables.
    let existing = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"TVMFFIGetVersion".as_ptr()) };
    if !existing.is_null() {
        return Ok(ErrorSymbol::Foreign);
    }
    let handle = open_shim()?;
    // SAFETY: the shim exports this setter with the signature below.
    let setter = unsafe { libc::dlsym(handle, c"tvmrt_ffi_shim_set_handler".as_ptr()) };
    if setter.is_null() {
        return Err("the tvm-ffi shim lacks tvmrt_ffi_shim_set_handler".into());
    }
    type Handler =
        unsafe extern "C" fn(*const c_char, *const *const c_char, i32, *mut c_void) -> c_int;
    // SAFETY: the symbol is `void tvmrt_ffi_shim_set_handler(handler)` in shim.c.
    let setter: unsafe extern "C" fn(Handler) = unsafe { std::mem::transmute(setter) };
    // SAFETY: the handler lives for the process (a static function).
    unsafe { setter(shim_handler) };
    Ok(ErrorSymbol::Shim)
}

/// WebAssembly has no `dlopen`: the runtime defines the symbol itself (src/web/ffi.rs).
#[cfg(target_os = "emscripten")]
fn open_shim() -> std::result::Result<*mut c_void, String> {
    Err("no tvm-ffi shim to load in WebAssembly".into())
}

/// Loads the shim from memory (a memfd), RTLD_GLOBAL, and keeps it for the process.
#[cfg(not(target_os = "emscripten"))]
fn open_shim() -> std::result::Result<*mut c_void, String> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create with a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"tvm_ffi_shim".as_ptr(), libc::MFD_CLOEXEC) };
    let (path, _keep) = if fd >= 0 {
        // SAFETY: a fresh descriptor we own.
        let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
        f.write_all(SHIM)
            .map_err(|e| format!("cannot write the tvm-ffi shim: {e}"))?;
        (format!("/proc/self/fd/{fd}"), Some(f))
    } else {
        let p = std::env::temp_dir().join(format!("tvm_ffi_shim_{}.so", std::process::id()));
        std::fs::write(&p, SHIM).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        (p.display().to_string(), None)
    };
    let c = std::ffi::CString::new(path.clone()).map_err(|e| e.to_string())?;
    // SAFETY: loading the shim runs no initialisers of its own; the handle is never closed.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if fd < 0 {
        let _ = std::fs::remove_file(&path);
    }
    if h.is_null() {
        // SAFETY: dlerror returns NULL or a NUL-terminated message.
        let why = unsafe { c_str_or(libc::dlerror(), "unknown error") }.into_owned();
        return Err(format!("cannot load the tvm-ffi shim: {why}"));
    }
    Ok(h)
}

/// `TVMFFIFunctionCall(func, args, n, result)`: a kernel calls a function it looked up.
pub(crate) unsafe extern "C" fn function_call(
    func: *mut c_void,
    args: *const TVMFFIAny,
    n: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    let r = std::panic::catch_unwind(|| {
        // SAFETY: the handle came from our lookup functions (a live PackedFunc object) and
        // tvm-ffi passes `n` valid arguments.
        unsafe { call_classic(func, args, n, result) }
    });
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            raise(e);
            -1
        }
        Err(p) => {
            raise(crate::packed_func::error::panic_to_error(p));
            -1
        }
    }
}

/// Looks `name` up for a kernel: the library module and its imports, then the registry.
fn lookup(ctx: *mut c_void, name: *const c_char, out: *mut *mut c_void) -> Result<()> {
    if name.is_null() || out.is_null() {
        return Err(Error::value("function lookup: NULL name or output"));
    }
    // SAFETY: tvm-ffi passes a NUL-terminated name.
    let name = unsafe { std::ffi::CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| Error::value("function lookup: the name is not UTF-8"))?;
    let f = if ctx.is_null() {
        crate::module::global_env_func_raw(name)?
    } else {
        // SAFETY: the context variable holds the module object we set (kept alive by the
        // functions of the module while its code runs).
        let m = unsafe { module_from_ctx(ctx) }?;
        m.get_func_from_env_raw(name)?
    };
    // SAFETY: checked non-null.
    unsafe { *out = f as *mut c_void };
    Ok(())
}

/// # Safety
/// `ctx` must be a live module object.
unsafe fn module_from_ctx(ctx: *mut c_void) -> Result<Module> {
    // SAFETY: caller contract; the new reference is counted.
    let o = unsafe { crate::object::ObjectRef::from_borrowed(ctx as *mut Object) }
        .ok_or_else(|| Error::value("function lookup: NULL module context"))?;
    Module::from_object(o)
}

/// `TVMFFIEnvModLookupFromImports(library_ctx, name, out)` (tvm-ffi 0.1.13+) and
/// `TVMBackendGetFuncFromEnv(ctx, name, out)` (0.1.0–0.1.12): the handle is borrowed.
pub(crate) unsafe extern "C" fn env_lookup(
    ctx: *mut c_void,
    name: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    match std::panic::catch_unwind(|| lookup(ctx, name, out)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            raise(e);
            -1
        }
        Err(p) => {
            raise(crate::packed_func::error::panic_to_error(p));
            -1
        }
    }
}

/// `TVMFFIHandleInitOnce(addr, init)`: runs `init` once per slot, publishing its result.
pub(crate) unsafe extern "C" fn handle_init_once(
    addr: *mut *mut c_void,
    init: Option<unsafe extern "C" fn(*mut *mut c_void) -> c_int>,
) -> c_int {
    static LOCK: Mutex<()> = Mutex::new(());
    let Some(init) = init else {
        raise(Error::value("TVMFFIHandleInitOnce: NULL initialiser"));
        return -1;
    };
    if addr.is_null() {
        raise(Error::value("TVMFFIHandleInitOnce: NULL slot"));
        return -1;
    }
    // SAFETY: the slot is a pointer-sized, pointer-aligned variable of the library, only
    // written through this function (an AtomicPtr has the same layout).
    let slot = unsafe { AtomicPtr::from_ptr(addr) };
    if !slot.load(Ordering::Acquire).is_null() {
        return 0;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !slot.load(Ordering::Acquire).is_null() {
        return 0;
    }
    let mut value: *mut c_void = std::ptr::null_mut();
    // SAFETY: the library's own initialiser, writing one pointer.
    let rc = unsafe { init(&mut value) };
    if rc != 0 {
        return rc;
    }
    if value.is_null() {
        raise(Error::internal(
            "TVMFFIHandleInitOnce: the initialiser produced NULL",
        ));
        return -1;
    }
    slot.store(value, Ordering::Release);
    0
}

/// Fills a tvm-ffi library's context variables and records it as ours.
pub fn init_context(lib: &dyn Library, probe: *mut c_void) -> Result<()> {
    let table: [(&str, *mut c_void); 5] = [
        ("__TVMFFIFunctionCall", function_call as *mut c_void),
        ("__TVMFFIEnvModLookupFromImports", env_lookup as *mut c_void),
        ("__TVMBackendGetFuncFromEnv", env_lookup as *mut c_void),
        ("__TVMFFIHandleInitOnce", handle_init_once as *mut c_void),
        (
            "__TVMFFIErrorSetRaisedFromCStr",
            set_raised_from_cstr as *mut c_void,
        ),
    ];
    for (name, f) in table {
        let slot = lib.symbol(name) as *mut *mut c_void;
        if !slot.is_null() {
            // SAFETY: tvm-ffi libraries emit these as writable function-pointer variables.
            unsafe { *slot = f };
        }
    }
    // The workspace and parallel entries are the classic ones, filled the classic way.
    crate::module::library::init_context_functions(lib)?;
    if let Some(base) = (!probe.is_null()).then(|| base_of(probe)).flatten() {
        let mut ours = OUR_LIBRARIES.lock().unwrap_or_else(|e| e.into_inner());
        if !ours.contains(&base) {
            ours.push(base);
        }
    }
    Ok(())
}

/// Points the library's `__tvm_ffi__library_ctx` at the module its kernels resolve through.
pub fn set_library_ctx(lib: &Arc<dyn Library>, m: &Module) {
    let slot = lib.symbol(super::LIBRARY_CTX) as *mut *mut c_void;
    crate::module::library::bind_context(slot, m, lib);
}
