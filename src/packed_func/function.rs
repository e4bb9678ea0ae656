//! PackedFunc: a type-erased function object (type index 7) backed by a C callback, a
//! compiled TVM function, or a Rust closure.

use super::error::{Error, Result};
use super::types::{TVMByteArray, TVMRetValueHandle, TVMValue};
use super::value::{ArgValue, Args, RetValue};
use crate::object::{ObjectRef, TYPE_PACKED_FUNC};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

/// `TVMPackedCFunc`: a C callback in the frontend convention.
pub type PackedCFunc = unsafe extern "C" fn(
    args: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret: TVMRetValueHandle,
    resource_handle: *mut c_void,
) -> c_int;

/// `TVMPackedCFuncFinalizer`.
pub type PackedCFuncFinalizer = unsafe extern "C" fn(resource_handle: *mut c_void);

/// `TVMBackendPackedCFunc`: the convention of functions TVM compiles.
pub type BackendPackedCFunc = unsafe extern "C" fn(
    args: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    out_ret_value: *mut TVMValue,
    out_ret_tcode: *mut c_int,
    resource_handle: *mut c_void,
) -> c_int;

/// Something a compiled function keeps alive: its module object or its loaded library.
pub enum Owner {
    /// A module object.
    Object(ObjectRef),
    /// Any shared value (a loaded library).
    Shared(std::sync::Arc<dyn std::any::Any + Send + Sync>),
}

/// A Rust function body.
pub type RustFunc = dyn Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync;

/// A Rust function that holds no state: what a closure capturing nothing becomes
/// ([`Function::from_rust`]), with no box and no vtable of its own.
pub type PlainFunc = fn(Args<'_>, &mut RetValue) -> Result<()>;

/// What a PackedFunc runs.
pub enum FuncImpl {
    /// A C callback with its resource handle and optional finalizer.
    C {
        /// The callback.
        func: PackedCFunc,
        /// Passed back to the callback and the finalizer.
        resource: *mut c_void,
        /// Run once when the function is freed.
        finalizer: Option<PackedCFuncFinalizer>,
    },
    /// A compiled function; `owner` keeps its library loaded.
    Backend {
        /// The compiled function.
        func: BackendPackedCFunc,
        /// Passed as the resource handle.
        resource: *mut c_void,
        /// What keeps the code alive (the module, or the loaded library).
        owner: Option<Owner>,
    },
    /// A Rust closure.
    Rust(Box<RustFunc>),
    /// A Rust function without state.
    Plain(PlainFunc),
}

/// How `TVMFuncCall`'s fast path calls a function: set when the function is made, so that
/// the call path reaches the code with one load and one compare (no enum decoding).
#[derive(Debug)]
pub struct FastCall {
    /// One of the [`fast_kind`] constants, always below [`fast_kind::COUNT`]: fixed, except
    /// that a tvm-ffi kernel's moves from [`fast_kind::TVM_FFI`] to
    /// [`fast_kind::tvm_ffi_args`] ([`FastCall::learn`]). A word, so that its load needs no
    /// widening before it indexes a table.
    kind: AtomicU32,
    /// The code: the C callback, the compiled function, or the tvm-ffi kernel.
    pub code: *const c_void,
    /// The resource handle passed to the code (unused for a tvm-ffi kernel).
    pub resource: *mut c_void,
}

impl FastCall {
    fn new(kind: u32, code: *const c_void, resource: *mut c_void) -> FastCall {
        assert!(kind < fast_kind::COUNT);
        FastCall {
            kind: AtomicU32::new(kind),
            code,
            resource,
        }
    }

    /// The kind: one of the [`fast_kind`] constants, below [`fast_kind::COUNT`].
    #[inline(always)]
    pub fn kind(&self) -> u32 {
        self.kind.load(Ordering::Relaxed)
    }

    /// Records the argument count a tvm-ffi kernel was called with
    /// ([`fast_kind::tvm_ffi_args`]), so that the next call reaches the conversion for that
    /// count with no dispatch. A call with another count still works (its path checks the
    /// count). Any other kind is left alone.
    pub fn learn(&self, num_args: usize) {
        if self.kind() == fast_kind::TVM_FFI && num_args <= fast_kind::TVM_FFI_MAX_LEARNED {
            self.kind
                .store(fast_kind::tvm_ffi_args(num_args), Ordering::Relaxed);
        }
    }
}

/// The kinds of [`FastCall`].
pub mod fast_kind {
    /// No fast path (a Rust closure): the general path runs.
    pub const NONE: u32 = 0;
    /// A C callback (`TVMPackedCFunc`).
    pub const C: u32 = 1;
    /// A compiled function (`TVMBackendPackedCFunc`).
    pub const BACKEND: u32 = 2;
    /// A kernel compiled for the tvm-ffi ABI (`TVMFFISafeCallType`); the function's own
    /// implementation is a trampoline in the compiled-function convention around it.
    pub const TVM_FFI: u32 = 3;
    /// The most arguments [`tvm_ffi_args`] records.
    pub const TVM_FFI_MAX_LEARNED: usize = 4;
    /// A tvm-ffi kernel ([`TVM_FFI`]) last called with `n` arguments (`n` at most
    /// [`TVM_FFI_MAX_LEARNED`]): 8 + `n`.
    pub const fn tvm_ffi_args(n: usize) -> u32 {
        8 + n as u32
    }
    /// Every kind is below this.
    pub const COUNT: u32 = 16;
}

/// The payload of a PackedFunc object.
pub struct PackedFuncObj {
    fast: FastCall,
    imp: FuncImpl,
}

impl PackedFuncObj {
    fn new(imp: FuncImpl) -> PackedFuncObj {
        let fast = match &imp {
            FuncImpl::C { func, resource, .. } => {
                FastCall::new(fast_kind::C, *func as *const c_void, *resource)
            }
            FuncImpl::Backend { func, resource, .. } => {
                FastCall::new(fast_kind::BACKEND, *func as *const c_void, *resource)
            }
            FuncImpl::Rust(_) | FuncImpl::Plain(_) => {
                FastCall::new(fast_kind::NONE, std::ptr::null(), std::ptr::null_mut())
            }
        };
        PackedFuncObj { fast, imp }
    }
}

// SAFETY: C callbacks and compiled functions are required by the TVM ABI to be callable from
// any thread; the resource handle is theirs to synchronise.
unsafe impl Send for PackedFuncObj {}
// SAFETY: as above.
unsafe impl Sync for PackedFuncObj {}

// SAFETY: TYPE_PACKED_FUNC is a static index of the type table that no other payload type uses.
unsafe impl crate::object::ObjectType for PackedFuncObj {
    crate::object_type!("runtime.PackedFunc", static TYPE_PACKED_FUNC);
}

impl Drop for PackedFuncObj {
    fn drop(&mut self) {
        if let FuncImpl::C {
            resource,
            finalizer: Some(fin),
            ..
        } = self.imp
        {
            // SAFETY: the finalizer was given with this resource and runs exactly once, here.
            unsafe { fin(resource) };
        }
    }
}

impl PackedFuncObj {
    /// How `TVMFuncCall`'s fast path calls the function.
    #[inline(always)]
    pub fn fast(&self) -> &FastCall {
        &self.fast
    }

    /// What the function runs.
    #[inline(always)]
    pub fn imp(&self) -> &FuncImpl {
        &self.imp
    }

    /// Calls with C arrays; the result lands in `rv`.
    ///
    /// # Safety
    /// `values`/`codes` must hold `n` valid entries for the duration of the call.
    #[inline(always)]
    pub unsafe fn call_raw(
        &self,
        values: *mut TVMValue,
        codes: *mut i32,
        n: i32,
        rv: &mut RetValue,
    ) -> Result<()> {
        match &self.imp {
            FuncImpl::C { func, resource, .. } => {
                // SAFETY: forwarded contract; `rv` outlives the call and is what
                // TVMCFuncSetReturn expects behind the handle.
                let r = unsafe {
                    func(
                        values,
                        codes,
                        n,
                        rv as *mut RetValue as *mut c_void,
                        *resource,
                    )
                };
                if r != 0 {
                    return Err(Error::from_last());
                }
                Ok(())
            }
            FuncImpl::Backend { func, resource, .. } => {
                let mut out = TVMValue::default();
                let mut code = super::types::type_code::NULLPTR;
                // SAFETY: forwarded contract; out slots are valid.
                let r = unsafe { func(values, codes, n, &mut out, &mut code, *resource) };
                if r != 0 {
                    return Err(Error::from_last());
                }
                // SAFETY: compiled code returns a valid value for its code, owning objects.
                *rv = unsafe { RetValue::from_c_take(out, code)? };
                Ok(())
            }
            FuncImpl::Rust(f) => {
                // SAFETY: forwarded contract.
                let args = unsafe { Args::from_raw(values, codes, n) };
                f(args, rv)
            }
            FuncImpl::Plain(f) => {
                // SAFETY: forwarded contract.
                let args = unsafe { Args::from_raw(values, codes, n) };
                f(args, rv)
            }
        }
    }
}

/// Calls the closure `F` that [`Function::from_rust`] leaked: `F` is zero-sized and has no
/// drop glue (checked there before this function's address is taken).
fn call_stateless<F>(a: Args<'_>, rv: &mut RetValue) -> Result<()>
where
    F: Fn(Args<'_>, &mut RetValue) -> Result<()>,
{
    debug_assert!(std::mem::size_of::<F>() == 0 && !std::mem::needs_drop::<F>());
    // SAFETY: `F` is zero-sized, so the leaked value occupies no memory and a reference to it
    // is any non-null, aligned pointer, which is exactly what leaking a box of it
    // (`Box::leak`) would have returned; the value was moved into `from_rust` and forgotten,
    // never dropped, so it is alive for the rest of the process, and `Fn` calls it through a
    // shared reference.
    let f: &F = unsafe { std::ptr::NonNull::<F>::dangling().as_ref() };
    f(a, rv)
}

/// A reference to a PackedFunc object.
#[derive(Clone, Debug)]
pub struct Function(ObjectRef);

impl Function {
    /// A function running a Rust closure. A closure that captures nothing (zero-sized, no
    /// drop glue) becomes a plain function pointer: no box, and no vtable and call shims per
    /// closure, which is most of what each of the hundreds of registered globals would cost
    /// in code size.
    #[inline]
    pub fn from_rust<F>(f: F) -> Function
    where
        F: Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync + 'static,
    {
        match Function::plain_or_closure(f) {
            Ok(p) => Function::from_plain(p),
            Err(f) => Function::from_boxed(Box::new(f)),
        }
    }

    /// What [`Function::from_rust`] makes of a closure: its plain function when it captures
    /// nothing (`Ok`), else the closure back (`Err`), decided at compile time.
    #[inline(always)]
    pub(crate) fn plain_or_closure<F>(f: F) -> std::result::Result<PlainFunc, F>
    where
        F: Fn(Args<'_>, &mut RetValue) -> Result<()> + Send + Sync + 'static,
    {
        if std::mem::size_of::<F>() == 0 && !std::mem::needs_drop::<F>() {
            // Leaked for good: a zero-sized value with nothing to drop, which
            // `call_stateless::<F>` reaches again (see there).
            std::mem::forget(f);
            Ok(call_stateless::<F>)
        } else {
            Err(f)
        }
    }

    /// A function running a plain Rust function.
    #[inline(never)]
    pub fn from_plain(f: PlainFunc) -> Function {
        Function(ObjectRef::new(PackedFuncObj::new(FuncImpl::Plain(f))))
    }

    /// A function running a boxed Rust closure (the out-of-line body of
    /// [`Function::from_rust`]).
    #[inline(never)]
    pub fn from_boxed(f: Box<RustFunc>) -> Function {
        Function(ObjectRef::new(PackedFuncObj::new(FuncImpl::Rust(f))))
    }

    /// A function running a C callback.
    ///
    /// # Safety
    /// `func` must follow the `TVMPackedCFunc` convention and be callable with `resource` from
    /// any thread for as long as the function lives; `finalizer`, when given, must be callable
    /// once with `resource`, from any thread.
    ///
    /// Building one is `unsafe`: safe code cannot wrap an arbitrary callback.
    /// ```compile_fail,E0133
    /// # use std::ffi::{c_int, c_void};
    /// # use tvm_runtime::packed_func::TVMValue;
    /// unsafe extern "C" fn cb(_: *mut TVMValue, _: *mut c_int, _: c_int, _: *mut c_void, _: *mut c_void) -> c_int { 0 }
    /// let f = tvm_runtime::Function::from_c(cb, std::ptr::null_mut(), None);
    /// ```
    pub unsafe fn from_c(
        func: PackedCFunc,
        resource: *mut c_void,
        finalizer: Option<PackedCFuncFinalizer>,
    ) -> Function {
        Function(ObjectRef::new(PackedFuncObj::new(FuncImpl::C {
            func,
            resource,
            finalizer,
        })))
    }

    /// A function running compiled code kept alive by `owner`.
    ///
    /// # Safety
    /// `func` must follow the `TVMBackendPackedCFunc` convention and be callable with
    /// `resource` from any thread while `owner` (or whatever else keeps its code loaded) lives.
    ///
    /// Building one is `unsafe`: safe code cannot wrap an arbitrary function pointer.
    /// ```compile_fail,E0133
    /// # use std::ffi::{c_int, c_void};
    /// # use tvm_runtime::packed_func::TVMValue;
    /// unsafe extern "C" fn k(_: *mut TVMValue, _: *mut c_int, _: c_int, _: *mut TVMValue, _: *mut c_int, _: *mut c_void) -> c_int { 0 }
    /// let f = tvm_runtime::Function::from_backend(k, std::ptr::null_mut(), None);
    /// ```
    pub unsafe fn from_backend(
        func: BackendPackedCFunc,
        resource: *mut c_void,
        owner: Option<Owner>,
    ) -> Function {
        Function(ObjectRef::new(PackedFuncObj::new(FuncImpl::Backend {
            func,
            resource,
            owner,
        })))
    }

    /// A kernel compiled for the tvm-ffi ABI, run through `trampoline`, a function in the
    /// compiled-function convention that takes the kernel's address as its resource handle:
    /// every call path treats it as that compiled function, and `TVMFuncCall`'s fast path
    /// calls the kernel itself ([`fast_kind::TVM_FFI`]).
    ///
    /// # Safety
    /// As [`Function::from_backend`] for `trampoline` with `kernel` as its resource, and
    /// `kernel` must be a tvm-ffi safe-call function (`TVMFFISafeCallType`) loaded while
    /// `owner` lives.
    pub unsafe fn from_tvm_ffi_kernel(
        trampoline: BackendPackedCFunc,
        kernel: *mut c_void,
        owner: Option<Owner>,
    ) -> Function {
        let mut obj = PackedFuncObj::new(FuncImpl::Backend {
            func: trampoline,
            resource: kernel,
            owner,
        });
        obj.fast = FastCall::new(fast_kind::TVM_FFI, kernel, std::ptr::null_mut());
        Function(ObjectRef::new(obj))
    }

    /// A function of the global registry; an error naming it when absent.
    pub fn get_global(name: &str) -> Result<Function> {
        super::registry::get(name).ok_or_else(|| {
            Error::attribute(super::features::or_built_without(
                name,
                format!("no global function named {name}"),
            ))
        })
    }

    /// Wraps an object known to be a PackedFunc.
    pub fn from_object(o: ObjectRef) -> Result<Function> {
        if o.downcast_ref::<PackedFuncObj>().is_some() {
            Ok(Function(o))
        } else {
            Err(Error::type_error_fmt(format_args!(
                "expected a PackedFunc but got {}",
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

    /// The payload.
    #[inline(always)]
    pub fn obj(&self) -> &PackedFuncObj {
        // SAFETY: a `Function` wraps only a function object: `from_object` checks, and the
        // other constructors wrap a `PackedFuncObj` they made.
        unsafe { self.0.downcast_unchecked::<PackedFuncObj>() }
    }

    /// Calls with Rust-side arguments.
    pub fn call(&self, args: &[ArgValue<'_>]) -> Result<RetValue> {
        let mut bytes: Vec<TVMByteArray> = Vec::new();
        for a in args {
            if let ArgValue::Bytes(b) = a {
                bytes.push(TVMByteArray {
                    data: b.as_ptr() as *const c_char,
                    size: b.len(),
                });
            }
        }
        let mut values = Vec::with_capacity(args.len());
        let mut codes = Vec::with_capacity(args.len());
        let mut next_bytes = 0;
        for a in args {
            let (mut v, c) = a.to_c();
            if let ArgValue::Bytes(_) = a {
                v.v_handle = &mut bytes[next_bytes] as *mut TVMByteArray as *mut c_void;
                next_bytes += 1;
            }
            values.push(v);
            codes.push(c);
        }
        let mut rv = RetValue::Null;
        // SAFETY: the arrays hold `args.len()` entries whose pointees (`args`, `bytes`) live
        // through the call.
        unsafe {
            self.obj().call_raw(
                values.as_mut_ptr(),
                codes.as_mut_ptr(),
                args.len() as i32,
                &mut rv,
            )?
        };
        Ok(rv)
    }
}
