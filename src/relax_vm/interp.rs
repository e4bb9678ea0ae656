//! The interpreter: VM state after initialisation (devices, allocators, constant and function
//! pools), frames of registers, the dispatch loop, closures and the VM context pointer.
//!
//! Registers hold any value with its exact type code ([`RetValue`]). A call passes registers,
//! immediates (as `int64`), constants (as stored) and function-pool entries (PackedFunc or
//! closure objects). Closures (`relax.vm.Closure`) take the VM context pointer as their first
//! argument: here it is the address of the [`VmCore`], which builtins accept only while that
//! VM runs on the calling thread (checked against a thread-local stack of running VMs), so a
//! stray pointer is an error, never a dereference.

use super::bytecode::{owned, push, Arg, Instr, PackedArg, Reg};
use super::exec::{Constant, Executable, FuncKind};
use super::memory::{self, Allocator, StorageObj};
use crate::module::Module;
use crate::ndarray::{NDArray, NDArrayObj};
use crate::object::containers::{ArrayObj, ShapeTupleObj, StringObj};
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, ErrorKind, Result};
use crate::packed_func::function::{Function, PackedFuncObj};
use crate::packed_func::registry;
use crate::packed_func::types::{type_code as tc, DLDataType, DLDevice, TVMValue, DL_CPU, DL_INT};
use crate::packed_func::value::{object_to_c, Args, RetValue};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Deepest nesting of VM function calls (each level recurses on the native stack).
pub const MAX_CALL_DEPTH: usize = 256;

/// Most registers the frames of the VM functions running on one thread may hold together
/// (2^22, about 100 MiB of register values): a bound on what an executable can make the VM
/// allocate by recursing, whatever its functions' register files
/// ([`MAX_FRAME_REGISTERS`](super::exec::MAX_FRAME_REGISTERS) each).
pub const MAX_STACK_REGISTERS: usize = 1 << 22;

/// `relax.vm.Closure`: a function name and the PackedFunc that runs it, called with the VM
/// context pointer first.
pub struct ClosureObj {
    /// The function's name.
    pub func_name: String,
    /// The implementation (`ctx, *args`).
    pub imp: Function,
}

// SAFETY: `ClosureObj` is the payload stored under this key only (a type of its own).
unsafe impl crate::object::ObjectType for ClosureObj {
    crate::object_type!("relax.vm.Closure", parent 0);
}

impl ClosureObj {
    /// A new closure object.
    pub fn new_ref(func_name: &str, imp: Function) -> ObjectRef {
        ObjectRef::new(ClosureObj {
            func_name: owned(func_name),
            imp,
        })
    }
}

/// A function-pool entry.
pub(crate) enum PoolEntry {
    /// A PackedFunc from the kernel library or the registry, and the builtin the interpreter
    /// runs itself in its stead (common cases only), if it is one.
    Packed(Function, Option<Fast>),
    /// A VM function (called directly), with its closure object for passing around.
    Vm { index: usize, closure: ObjectRef },
}

/// A builtin the interpreter runs on its registers directly (no argument conversion), for
/// the common case only: any other case (unexpected argument kinds, a failing check) goes
/// through the registered function, so results and errors are the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fast {
    /// `vm.builtin.null_value`.
    NullValue,
    /// `vm.builtin.alloc_tensor`.
    AllocTensor,
    /// `vm.builtin.alloc_storage`.
    AllocStorage,
    /// `vm.builtin.check_tensor_info`.
    CheckTensorInfo,
    /// `vm.builtin.match_shape`.
    MatchShape,
    /// `vm.builtin.make_shape`.
    MakeShape,
}

/// What `vm_initialization` sets up.
pub struct VmState {
    /// Devices; the host is the last.
    pub devices: Vec<DLDevice>,
    /// One allocator per device.
    pub allocators: Vec<Arc<dyn Allocator>>,
    pub(crate) consts: SharedValues,
    pub(crate) funcs: Vec<PoolEntry>,
}

/// Register values shared read-only between threads (constants, bound arguments).
#[derive(Clone, Default)]
pub struct SharedValues(pub Vec<RetValue>);

// SAFETY: the values are never mutated once shared; the raw handles they may hold are opaque
// values the runtime passes on without dereferencing, and objects are Sync.
unsafe impl Sync for SharedValues {}

impl SharedValues {
    /// The values.
    pub fn values(&self) -> &[RetValue] {
        &self.0
    }
}

/// A profiled call.
#[cfg(feature = "profiling")]
pub(crate) struct CallRecord {
    pub name: String,
    pub device: DLDevice,
    pub micros: f64,
    pub shapes: Vec<(String, Vec<i64>)>,
}

/// Values by name (a VM's inputs, outputs and saved closures: a handful, searched in order,
/// which takes less code than a hash map per value type; the names apart, so that one search
/// serves every value type).
pub(crate) struct Named<T> {
    names: Vec<String>,
    values: Vec<T>,
}

impl<T> Default for Named<T> {
    fn default() -> Self {
        Named {
            names: Vec::new(),
            values: Vec::new(),
        }
    }
}

/// Where `name` is among `names`.
#[inline(never)]
fn find_name(names: &[String], name: &str) -> Option<usize> {
    names.iter().position(|k| k == name)
}

impl<T> Named<T> {
    /// The value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&T> {
        self.values.get(find_name(&self.names, name)?)
    }

    /// Sets the value of `name`, replacing any.
    pub(crate) fn insert(&mut self, name: String, v: T) {
        match find_name(&self.names, &name).and_then(|i| self.values.get_mut(i)) {
            Some(old) => *old = v,
            None => {
                self.names.push(name);
                self.values.push(v);
            }
        }
    }
}

/// A virtual machine over one executable.
pub struct VmCore {
    id: u64,
    /// The executable.
    pub exec: Arc<Executable>,
    /// The executable's module (whose imports are the kernel libraries).
    pub exec_module: Module,
    state: RwLock<Option<Arc<VmState>>>,
    pub(crate) inputs: Mutex<Named<Vec<RetValue>>>,
    pub(crate) outputs: Mutex<Named<RetValue>>,
    pub(crate) saved: Mutex<Named<ObjectRef>>,
    instrument: RwLock<Option<Function>>,
    #[cfg(feature = "profiling")]
    profile: Mutex<Option<Vec<CallRecord>>>,
    step_limit: AtomicU64,
    hooks: AtomicBool,
}

thread_local! {
    /// VMs running on this thread, innermost last.
    static ACTIVE: RefCell<Vec<*const VmCore>> = const { RefCell::new(Vec::new()) };
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Registers held by the frames of the VM functions running on this thread.
    static STACK_REGISTERS: Cell<usize> = const { Cell::new(0) };
}

struct ActiveGuard;

impl ActiveGuard {
    fn enter(vm: &VmCore) -> ActiveGuard {
        ACTIVE.with(|a| a.borrow_mut().push(vm as *const VmCore));
        ActiveGuard
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| {
            a.borrow_mut().pop();
        });
    }
}

/// Runs `f` on the VM a context pointer names, if that VM is running on this thread.
#[inline]
pub fn with_ctx<R>(ctx: *mut c_void, f: impl FnOnce(&VmCore) -> Result<R>) -> Result<R> {
    let p = running_vm(ctx)?;
    // SAFETY: a pointer is on the stack only while an ActiveGuard borrowed from that live
    // VM exists further up this thread's call stack, which outlives this call.
    f(unsafe { &*p })
}

/// The VM a context pointer names, if that VM is running on this thread (the part of
/// [`with_ctx`] that is the same for every caller).
#[inline(never)]
fn running_vm(ctx: *mut c_void) -> Result<*const VmCore> {
    let found = ACTIVE.with(|a| {
        a.borrow()
            .iter()
            .rev()
            .copied()
            .find(|&p| p as *mut c_void == ctx)
    });
    found.ok_or_else(|| {
        Error::value("the VM context pointer does not name a Relax VM running on this thread")
    })
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Moves strings and bytes into objects, so that every register value passes on in C form.
#[inline]
fn norm(v: RetValue) -> RetValue {
    match v {
        RetValue::Str(s) => RetValue::Object(StringObj::new_ref(&s)),
        RetValue::Bytes(b) => RetValue::Object(StringObj::from_bytes(&b)),
        v => v,
    }
}

/// The C form of a register value, borrowed from it.
#[inline]
pub(crate) fn reg_to_c(v: &RetValue) -> (TVMValue, i32) {
    if let Some(c) = v.pod_to_c() {
        return c;
    }
    match v {
        RetValue::DataType(t) => (TVMValue { v_type: *t }, tc::DATA_TYPE),
        // SAFETY: the register holds a reference, so the object is live.
        RetValue::Object(o) => unsafe { object_to_c(o.as_ptr()) },
        _ => (
            TVMValue {
                v_handle: std::ptr::null_mut(),
            },
            tc::NULLPTR,
        ),
    }
}

/// The C forms of register values, borrowed from them.
#[inline(never)]
pub(crate) fn regs_to_c(regs: &[RetValue]) -> (Vec<TVMValue>, Vec<i32>) {
    let mut v = Vec::with_capacity(regs.len());
    let mut c = Vec::with_capacity(regs.len());
    for r in regs {
        let (x, y) = reg_to_c(r);
        v.push(x);
        c.push(y);
    }
    (v, c)
}

/// Copies C arguments into register values (objects gain a reference).
pub(crate) fn args_to_regs(values: &[TVMValue], codes: &[i32]) -> Result<Vec<RetValue>> {
    // A plain loop into an exact allocation (a `Result` collect grows its vector and takes
    // an instantiation of its own).
    let mut regs = Vec::with_capacity(values.len().min(codes.len()));
    for (&v, &c) in values.iter().zip(codes) {
        // SAFETY: the caller's arguments are valid for their codes during the call.
        regs.push(norm(unsafe { RetValue::from_c_copy(v, c) }?));
    }
    Ok(regs)
}

struct Frame {
    regs: Vec<RetValue>,
    values: Vec<TVMValue>,
    codes: Vec<i32>,
}

impl VmCore {
    /// A VM for an executable (not initialised).
    pub fn new(exec: Arc<Executable>, exec_module: Module) -> VmCore {
        VmCore {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            exec,
            exec_module,
            state: RwLock::new(None),
            inputs: Mutex::new(Named::default()),
            outputs: Mutex::new(Named::default()),
            saved: Mutex::new(Named::default()),
            instrument: RwLock::new(None),
            #[cfg(feature = "profiling")]
            profile: Mutex::new(None),
            step_limit: AtomicU64::new(0),
            hooks: AtomicBool::new(false),
        }
    }

    /// Limits the instructions one top-level call may run (0: no limit). For fuzzing.
    pub fn set_step_limit(&self, n: u64) {
        self.step_limit.store(n, Ordering::Relaxed);
    }

    /// Sets (or clears) the instrument called around every call instruction.
    pub fn set_instrument(&self, f: Option<Function>) {
        *self.instrument.write().unwrap_or_else(|e| e.into_inner()) = f;
        self.update_hooks();
    }

    /// Starts (`true`) or stops collecting per-call timings; stopping returns them.
    #[cfg(feature = "profiling")]
    pub(crate) fn set_profiling(&self, on: bool) -> Vec<CallRecord> {
        let old = std::mem::replace(
            &mut *self.profile.lock().unwrap_or_else(|e| e.into_inner()),
            if on { Some(Vec::new()) } else { None },
        );
        self.update_hooks();
        old.unwrap_or_default()
    }

    fn update_hooks(&self) {
        let on = self
            .instrument
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
            || self.profiling();
        self.hooks.store(on, Ordering::Release);
    }

    /// Whether per-call timings are being collected.
    fn profiling(&self) -> bool {
        #[cfg(feature = "profiling")]
        return self
            .profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        #[cfg(not(feature = "profiling"))]
        false
    }

    /// The context pointer builtins and closures receive.
    pub fn ctx_ptr(&self) -> *mut c_void {
        self as *const VmCore as *mut c_void
    }

    /// The state set up by [`VmCore::init`].
    pub fn state(&self) -> Result<Arc<VmState>> {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                Error::value(
                    "the Relax VM is not initialised: call vm_initialization(device_type, \
                     device_id, allocator_type, ...) first",
                )
            })
    }

    /// `vm_initialization`: allocators per device, constants on `devices[0]`, and every
    /// function of the table resolved (kernel libraries first, then the registry).
    #[inline(never)]
    pub fn init(&self, devices: Vec<DLDevice>, alloc_types: Vec<i64>) -> Result<()> {
        if devices.is_empty() || devices.len() != alloc_types.len() {
            return Err(Error::value(
                "vm_initialization expects (device_type, device_id, allocator_type) triplets",
            ));
        }
        let mut allocators = Vec::new();
        for (d, &t) in devices.iter().zip(&alloc_types) {
            crate::device::api(*d).map_err(|e| e.context("vm_initialization"))?;
            allocators.push(memory::get_or_create_allocator(*d, t)?);
        }
        let dev0 = devices[0];
        let mut consts = Vec::with_capacity(self.exec.constants.len());
        for c in &self.exec.constants {
            consts.push(match c {
                Constant::NDArray(a) => {
                    if a.device() == dev0 {
                        RetValue::Object(a.as_object().clone())
                    } else {
                        let mut b = NDArray::empty(a.shape(), a.dtype(), dev0)?;
                        a.copy_to(&mut b)?;
                        RetValue::Object(b.into_object())
                    }
                }
                Constant::DataType(t) => RetValue::DataType(*t),
                Constant::Shape(d) => RetValue::Object(ShapeTupleObj::new_ref(d)),
                Constant::Str(b) => RetValue::Object(StringObj::from_bytes(b)),
                Constant::Int(i) => RetValue::Int(*i),
                Constant::Float(f) => RetValue::Float(*f),
            });
        }
        let imports = self.exec_module.imports();
        let mut funcs = Vec::with_capacity(self.exec.funcs.len());
        let mut missing = Vec::new();
        for (i, f) in self.exec.funcs.iter().enumerate() {
            match f.kind {
                FuncKind::PackedFunc => {
                    let mut found = None;
                    for m in &imports {
                        if let Some(g) = m.get_function(&f.name, true)? {
                            found = Some(g);
                            break;
                        }
                    }
                    // Only the runtime's own registered builtins run on the registers.
                    let entry = match found {
                        Some(g) => Some(PoolEntry::Packed(g, None)),
                        None => registry::get(&f.name).map(|g| {
                            let fast = super::builtins::fast_kind(&g);
                            PoolEntry::Packed(g, fast)
                        }),
                    };
                    match entry {
                        Some(e) => funcs.push(e),
                        None => missing.push(f.name.clone()),
                    }
                }
                FuncKind::VmFunc => {
                    funcs.push(PoolEntry::Vm {
                        index: i,
                        closure: self.vm_closure(i),
                    });
                }
                FuncKind::VmTirFunc => {
                    return Err(Error::value_fmt(format_args!(
                        "function {} is a VM TIR function (exec_mode=\"compiled\"), which this \
                         runtime does not run; build with the default exec_mode=\"bytecode\"",
                        f.name
                    )))
                }
            }
        }
        if !missing.is_empty() {
            return Err(missing_funcs(&missing));
        }
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(VmState {
            devices,
            allocators,
            consts: SharedValues(consts),
            funcs,
        }));
        Ok(())
    }

    /// The closure object of VM function `index`.
    pub(crate) fn vm_closure(&self, index: usize) -> ObjectRef {
        let id = self.id;
        let imp = Function::from_rust(move |args, rv| {
            if args.is_empty() {
                return Err(Error::value(
                    "a Relax VM closure expects the VM context pointer first",
                ));
            }
            let ctx = args.handle(0)?;
            with_ctx(ctx, |vm| {
                if vm.id != id {
                    return Err(Error::value(
                        "a closure of one Relax VM was called with another VM's context",
                    ));
                }
                let st = vm.state()?;
                let regs = args_to_regs(&args.values()[1..], &args.codes()[1..])?;
                *rv = vm.invoke_bytecode(&st, index, regs)?;
                Ok(())
            })
        });
        ClosureObj::new_ref(&self.exec.funcs[index].name, imp)
    }

    /// A closure (saved by `save_function`, or a VM function), or `None`.
    pub fn get_closure(&self, name: &str) -> Option<ObjectRef> {
        if let Some(c) = self
            .saved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return Some(c.clone());
        }
        let i = self.exec.func_index(name)?;
        match self.exec.funcs[i].kind {
            FuncKind::VmFunc => Some(self.vm_closure(i)),
            _ => None,
        }
    }

    /// Calls VM function `index` from outside (marks this VM as running).
    pub fn call_index(&self, index: usize, args: Vec<RetValue>) -> Result<RetValue> {
        let st = self.state()?;
        let _g = ActiveGuard::enter(self);
        self.invoke_bytecode(&st, index, args)
    }

    /// Calls a closure or PackedFunc object with C arguments (closures get the context
    /// pointer first).
    ///
    /// # Safety
    /// Each value must be a valid value of its type code, live for the call.
    pub unsafe fn invoke_closure_c(
        &self,
        f: &ObjectRef,
        values: &[TVMValue],
        codes: &[i32],
    ) -> Result<RetValue> {
        let _g = ActiveGuard::enter(self);
        let n = values.len().min(codes.len());
        let mut v = Vec::with_capacity(n + 1);
        let mut c = Vec::with_capacity(n + 1);
        // Closures take the VM context pointer first; one call for both kinds.
        let p = if let Some(p) = f.downcast_ref::<PackedFuncObj>() {
            p
        } else if let Some(clo) = f.downcast_ref::<ClosureObj>() {
            v.push(TVMValue {
                v_handle: self.ctx_ptr(),
            });
            c.push(tc::OPAQUE_HANDLE);
            clo.imp.obj()
        } else {
            return Err(Error::type_error_fmt(format_args!(
                "expected a closure or PackedFunc but got {}",
                f.type_key()
            )));
        };
        v.extend_from_slice(&values[..n]);
        c.extend_from_slice(&codes[..n]);
        // The values are valid for the call (caller contract).
        Ok(norm(super::builtins::call_obj(p, &mut v, &mut c)?))
    }

    /// Calls a closure or PackedFunc with register values.
    pub fn invoke_closure_regs(&self, f: &ObjectRef, args: &[RetValue]) -> Result<RetValue> {
        let (v, c) = regs_to_c(args);
        // SAFETY: the C forms of register values, which `args` keeps alive.
        unsafe { self.invoke_closure_c(f, &v, &c) }
    }

    /// Interprets VM function `index` with `args` in its first registers.
    pub(crate) fn invoke_bytecode(
        &self,
        st: &VmState,
        index: usize,
        args: Vec<RetValue>,
    ) -> Result<RetValue> {
        let f = &self.exec.funcs[index];
        if f.kind != FuncKind::VmFunc {
            return Err(Error::value_fmt(format_args!(
                "{} is not a VM function and cannot be interpreted",
                f.name
            )));
        }
        if args.len() as i64 != f.num_args {
            let names = if f.param_names.is_empty() {
                String::new()
            } else {
                format!(" (parameters: {})", f.param_names.join(", "))
            };
            // An InternalError with the reference's words (its check is an ICHECK).
            return Err(Error::internal_fmt(format_args!(
                "ValueError: Invoking function {} requires {} inputs but only {} inputs are \
                 provided.{names}",
                f.name,
                f.num_args,
                args.len()
            )));
        }
        let depth = DEPTH.with(Cell::get);
        if depth >= MAX_CALL_DEPTH {
            return Err(Error::with_args(
                ErrorKind::RuntimeError,
                format_args!(
                    "Relax VM call depth exceeds {MAX_CALL_DEPTH} nested calls (in {})",
                    f.name
                ),
            ));
        }
        let nreg = f.register_file_size.max(f.num_args) as usize;
        let held = STACK_REGISTERS.with(Cell::get);
        if nreg > MAX_STACK_REGISTERS.saturating_sub(held) {
            return Err(Error::with_args(
                ErrorKind::RuntimeError,
                format_args!(
                    "Relax VM stack budget exceeded: calling {} ({nreg} registers) with {held} \
                     registers held by {depth} running frames would pass the budget of \
                     {MAX_STACK_REGISTERS} registers",
                    f.name
                ),
            ));
        }
        DEPTH.with(|d| d.set(depth + 1));
        STACK_REGISTERS.with(|r| r.set(held + nreg));
        struct FrameGuard(usize);
        impl Drop for FrameGuard {
            fn drop(&mut self) {
                DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
                STACK_REGISTERS.with(|r| r.set(r.get().saturating_sub(self.0)));
            }
        }
        let _fg = FrameGuard(nreg);
        let mut regs = args;
        regs.resize(nreg, RetValue::Null);
        let mut frame = Frame {
            regs,
            values: Vec::with_capacity(8),
            codes: Vec::with_capacity(8),
        };
        self.run(st, index, &mut frame)
            .map_err(|e| e.context(format_args!("in Relax VM function {}", f.name)))
    }

    #[inline]
    fn read(&self, frame: &Frame, r: Reg) -> RetValue {
        match r {
            Reg::R(i) => frame.regs[i as usize].clone(),
            Reg::Void => RetValue::Null,
            Reg::Vm => {
                // SAFETY: builtins and closures look the context up among the VMs running on
                // their thread (`with_ctx`) before using it.
                RetValue::Handle(unsafe { crate::packed_func::RawHandle::new(self.ctx_ptr()) })
            }
        }
    }

    fn run(&self, st: &VmState, index: usize, frame: &mut Frame) -> Result<RetValue> {
        let f = &self.exec.funcs[index];
        let (start, end) = (f.start_instr as usize, f.end_instr as usize);
        let limit = self.step_limit.load(Ordering::Relaxed);
        let mut steps: u64 = 0;
        let mut pc = start;
        loop {
            if pc >= end {
                return Err(Error::value_fmt(format_args!(
                    "execution ran past the end of function {} (instruction {pc})",
                    f.name
                )));
            }
            if limit != 0 {
                steps += 1;
                if steps > limit {
                    return Err(Error::value_fmt(format_args!(
                        "function {} ran more than {limit} instructions",
                        f.name
                    )));
                }
            }
            match self.exec.code[pc] {
                Instr::Call {
                    dst,
                    func,
                    args_begin,
                    nargs,
                } => {
                    let ret = self.call(st, frame, func as usize, args_begin, nargs)?;
                    if let Reg::R(r) = dst {
                        frame.regs[r as usize] = ret;
                    }
                    pc += 1;
                }
                Instr::Ret(r) => return Ok(self.read(frame, r)),
                Instr::Goto(off) => pc = (pc as i64 + off) as usize,
                Instr::If(c, off) => {
                    let v = match self.read(frame, c) {
                        RetValue::Int(i) => i,
                        RetValue::Bool(b) => b as i64,
                        other => {
                            return Err(Error::type_error_fmt(format_args!(
                                "the condition of If (instruction {pc}) must be an int or bool, \
                                 got {other:?}"
                            )))
                        }
                    };
                    if v != 0 {
                        pc += 1;
                    } else {
                        pc = (pc as i64 + off) as usize;
                    }
                }
            }
        }
    }

    fn call(
        &self,
        st: &VmState,
        frame: &mut Frame,
        func: usize,
        args_begin: u32,
        nargs: u32,
    ) -> Result<RetValue> {
        let args = &self.exec.call_args[args_begin as usize..(args_begin + nargs) as usize];
        if let PoolEntry::Packed(_, Some(kind)) = st.funcs[func] {
            if !self.hooks.load(Ordering::Acquire) {
                if let Some(r) = self.fast_call(st, frame, kind, args) {
                    return r;
                }
            }
        }
        frame.values.clear();
        frame.codes.clear();
        for a in args {
            let (v, c) = match a.get() {
                Arg::Reg(Reg::R(i)) => reg_to_c(&frame.regs[i as usize]),
                Arg::Reg(Reg::Void) => (
                    TVMValue {
                        v_handle: std::ptr::null_mut(),
                    },
                    tc::NULLPTR,
                ),
                Arg::Reg(Reg::Vm) => (
                    TVMValue {
                        v_handle: self.ctx_ptr(),
                    },
                    tc::OPAQUE_HANDLE,
                ),
                Arg::Imm(i) => (TVMValue { v_int64: i }, tc::INT),
                Arg::Const(k) => reg_to_c(&st.consts.0[k as usize]),
                Arg::Func(g) => {
                    let o = match &st.funcs[g as usize] {
                        PoolEntry::Packed(p, _) => p.as_object(),
                        PoolEntry::Vm { closure, .. } => closure,
                    };
                    // SAFETY: the pool holds a reference.
                    unsafe { object_to_c(o.as_ptr()) }
                }
            };
            frame.values.push(v);
            frame.codes.push(c);
        }
        if !self.hooks.load(Ordering::Acquire) {
            return self.dispatch(st, frame, func);
        }
        let instrument = self
            .instrument
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        #[cfg(feature = "profiling")]
        let profiling = self.profiling();
        let mut skip = false;
        if let Some(ins) = &instrument {
            skip = self.run_instrument(ins, st, frame, func, true, &RetValue::Null)? == 1;
        }
        let mut ret = RetValue::Null;
        if !skip {
            #[cfg(feature = "profiling")]
            let t0 = crate::sync::Instant::now();
            ret = self.dispatch(st, frame, func)?;
            #[cfg(feature = "profiling")]
            if profiling {
                self.record(st, frame, func, t0.elapsed().as_secs_f64() * 1e6);
            }
            if let Some(ins) = &instrument {
                self.run_instrument(ins, st, frame, func, false, &ret)?;
            }
        }
        Ok(ret)
    }

    /// Runs a fast builtin on the registers, or `None` when this call is not its common case
    /// (then the registered function runs, with its own checks and messages).
    fn fast_call(
        &self,
        st: &VmState,
        frame: &Frame,
        kind: Fast,
        args: &[PackedArg],
    ) -> Option<Result<RetValue>> {
        let value = |a: &PackedArg| -> Option<&RetValue> {
            match a.get() {
                Arg::Reg(Reg::R(i)) => frame.regs.get(i as usize),
                Arg::Const(k) => st.consts.0.get(k as usize),
                _ => None,
            }
        };
        let obj = |a: &PackedArg| match value(a) {
            Some(RetValue::Object(o)) => Some(o),
            _ => None,
        };
        let int = |a: &PackedArg| match a.get() {
            Arg::Imm(i) => Some(i),
            _ => match value(a) {
                Some(RetValue::Int(i)) => Some(*i),
                _ => None,
            },
        };
        let dtype = |a: &PackedArg| match value(a) {
            Some(RetValue::DataType(t)) => Some(*t),
            _ => None,
        };
        let shape = |a: &PackedArg| obj(a)?.downcast_ref::<ShapeTupleObj>().map(|s| s.dims());
        // The shape heap: `Some(None)` for null, `Some(Some((p, n)))` for an int64 CPU tensor
        // of n values (aligned), `None` otherwise.
        let heap_of = |a: &PackedArg| -> Option<Option<(*mut i64, usize)>> {
            if a.get() == Arg::Reg(Reg::Void) || matches!(value(a), Some(RetValue::Null)) {
                return Some(None);
            }
            let t = obj(a)?.downcast_ref::<NDArrayObj>()?.dltensor();
            if t.dtype != DLDataType::new(DL_INT, 64, 1) || t.device.device_type != DL_CPU {
                return None;
            }
            // SAFETY: a live array's shape holds ndim values.
            let n: i64 = unsafe { crate::ndarray::shape_of(t) }.iter().product();
            let p = (t.data as usize).checked_add(t.byte_offset as usize)?;
            (p % std::mem::align_of::<i64>() == 0)
                .then_some(Some((p as *mut i64, n.max(0) as usize)))
        };
        let slot = |heap: Option<(*mut i64, usize)>, r: i64| -> Option<*mut i64> {
            let (p, n) = heap?;
            let r = usize::try_from(r).ok().filter(|&r| r < n)?;
            // SAFETY: in bounds of the heap tensor.
            Some(unsafe { p.add(r) })
        };
        match kind {
            Fast::NullValue => args.is_empty().then_some(Ok(RetValue::Null)),
            Fast::AllocTensor => {
                let [s, off, shp, dt] = args else { return None };
                let storage = obj(s).filter(|o| o.downcast_ref::<StorageObj>().is_some())?;
                let (off, dims, dt) = (int(off)?, shape(shp)?, dtype(dt)?);
                Some(StorageObj::alloc_tensor(storage, off, dims, dt).map(RetValue::Object))
            }
            Fast::AllocStorage => {
                let [vm, shp, dev, hint, _scope] = args else {
                    return None;
                };
                if vm.get() != Arg::Reg(Reg::Vm) {
                    return None;
                }
                let (dims, dev, hint) = (shape(shp)?, int(dev)?, dtype(hint)?);
                let n = st.devices.len() as i64;
                if dev < -1 || dev >= n {
                    return None;
                }
                let i = if dev == -1 { n - 1 } else { dev } as usize;
                Some(memory::shape_nbytes(dims, hint).and_then(|nbytes| {
                    StorageObj::allocate(st.allocators[i].clone(), st.devices[i], nbytes, hint)
                        .map(RetValue::Object)
                }))
            }
            Fast::CheckTensorInfo => {
                let (t, ndim, want) = match args {
                    [t, ndim, _ctx] => (t, ndim, None),
                    [t, ndim, dt, _ctx] => (t, ndim, Some(dtype(dt)?)),
                    _ => return None,
                };
                let t = obj(t)?.downcast_ref::<NDArrayObj>()?;
                let ndim = int(ndim)?;
                let ok = (ndim == -1 || t.shape().len() as i64 == ndim)
                    && want.is_none_or(|d| d.bits == 0 || t.dtype() == d);
                ok.then_some(Ok(RetValue::Null))
            }
            Fast::MatchShape => {
                let [src, heap, size, rest @ ..] = args else {
                    return None;
                };
                let o = obj(src)?;
                let dims = match o.downcast_ref::<ShapeTupleObj>() {
                    Some(s) => s.dims(),
                    None => o.downcast_ref::<NDArrayObj>()?.shape(),
                };
                let heap = heap_of(heap)?;
                let size = int(size)?;
                if size < 0 || dims.len() as i64 != size {
                    return None;
                }
                let pairs = rest.get(..2 * dims.len())?;
                for (pair, &dim) in pairs.chunks_exact(2).zip(dims) {
                    // A mismatch or anything unusual goes the registered way, which redoes
                    // the same stores (so the heap ends the same) and reports the error.
                    match (int(&pair[0])?, int(&pair[1])?) {
                        (0, v) if v == dim => {}
                        // SAFETY: `slot` checked the index against the live heap tensor.
                        (1, r) => unsafe { *slot(heap, r)? = dim },
                        (2, _) => {}
                        // SAFETY: as above.
                        (3, r) if unsafe { *slot(heap, r)? } == dim => {}
                        _ => return None,
                    }
                }
                Some(Ok(RetValue::Null))
            }
            Fast::MakeShape => {
                let [heap, size, rest @ ..] = args else {
                    return None;
                };
                let heap = heap_of(heap)?;
                let size = usize::try_from(int(size)?).ok()?;
                let pairs = rest.get(..size.checked_mul(2)?)?;
                let mut dims = Vec::with_capacity(size);
                for pair in pairs.chunks_exact(2) {
                    dims.push(match (int(&pair[0])?, int(&pair[1])?) {
                        (0, v) => v,
                        // SAFETY: `slot` checked the index against the live heap tensor.
                        (1, r) => unsafe { *slot(heap, r)? },
                        _ => return None,
                    });
                }
                Some(Ok(RetValue::Object(ShapeTupleObj::new_ref(&dims))))
            }
        }
    }

    #[inline]
    fn dispatch(&self, st: &VmState, frame: &mut Frame, func: usize) -> Result<RetValue> {
        match &st.funcs[func] {
            PoolEntry::Packed(p, _) => {
                let mut rv = RetValue::Null;
                let n = frame.values.len() as i32;
                // SAFETY: the arrays hold n values borrowed from registers, constants and the
                // pool, all alive (and unchanged) during the call.
                unsafe {
                    p.obj().call_raw(
                        frame.values.as_mut_ptr(),
                        frame.codes.as_mut_ptr(),
                        n,
                        &mut rv,
                    )?
                };
                Ok(norm(rv))
            }
            PoolEntry::Vm { index, .. } => {
                let regs = args_to_regs(&frame.values, &frame.codes)?;
                self.invoke_bytecode(st, *index, regs)
            }
        }
    }

    fn run_instrument(
        &self,
        ins: &Function,
        st: &VmState,
        frame: &Frame,
        func: usize,
        before: bool,
        ret: &RetValue,
    ) -> Result<i64> {
        let fobj = match &st.funcs[func] {
            PoolEntry::Packed(p, _) => p.as_object().clone(),
            PoolEntry::Vm { closure, .. } => closure.clone(),
        };
        let name = StringObj::new_ref(&self.exec.funcs[func].name);
        let mut regs = vec![
            RetValue::Object(fobj),
            RetValue::Object(name),
            // An int, which frontends of every version read (v0.16 has no bool code).
            RetValue::Int(before as i64),
            ret.clone(),
        ];
        for (&v, &c) in frame.values.iter().zip(&frame.codes) {
            // SAFETY: the values are valid for their codes during the call.
            let r = unsafe { RetValue::from_c_copy(v, c)? };
            regs.push(match r {
                RetValue::DataType(t) => RetValue::Object(StringObj::new_ref(
                    &crate::packed_func::dtype::dtype_to_string(t),
                )),
                r => norm(r),
            });
        }
        let (mut v, mut c) = regs_to_c(&regs);
        let rv = super::builtins::call_with(ins, &mut v, &mut c)?;
        Ok(match rv {
            RetValue::Int(i) => i,
            _ => 0,
        })
    }

    #[cfg(feature = "profiling")]
    fn record(&self, st: &VmState, frame: &Frame, func: usize, micros: f64) {
        let mut dev = None;
        let mut shapes = Vec::new();
        for (&v, &c) in frame.values.iter().zip(&frame.codes) {
            if c == tc::NDARRAY_HANDLE {
                // SAFETY: an NDArray handle points at the DLTensor of a live array.
                let t = unsafe { &*(v.v_handle as *const crate::packed_func::types::DLTensor) };
                dev = Some(t.device);
                // SAFETY: as above.
                let s = unsafe { crate::ndarray::shape_of(t) }.to_vec();
                shapes.push((crate::packed_func::dtype::dtype_to_string(t.dtype), s));
            }
        }
        let _ = st;
        if let Some(device) = dev {
            if let Some(list) = self
                .profile
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
            {
                list.push(CallRecord {
                    name: self.exec.funcs[func].name.clone(),
                    device,
                    micros,
                    shapes,
                });
            }
        }
    }
}

/// The error of functions found neither in the kernel libraries nor in the registry.
#[cold]
#[inline(never)]
fn missing_funcs(missing: &[String]) -> Error {
    // A builtin of a feature left out of this build (e.g. `llm`) says so.
    let mut cut = String::new();
    for n in missing {
        if let Some(m) = crate::packed_func::features::built_without(n) {
            push(&mut cut, "; ");
            push(&mut cut, &m);
        }
    }
    Error::value_fmt(format_args!(
        "cannot find PackedFunc {} in the Relax VM kernel library or in the runtime's global \
         registry{cut}",
        missing.join(", ")
    ))
}

/// Converts an argument for `set_input`/`save_function`: arrays on another device (and raw
/// tensors) are copied to `dev`; arrays of arrays recursively.
pub(crate) fn to_device(v: RetValue, dev: DLDevice) -> Result<RetValue> {
    let src: *const crate::packed_func::types::DLTensor = match &v {
        RetValue::DLTensor(t) => t.as_ptr(),
        RetValue::Object(o) => {
            if let Some(a) = o.downcast_ref::<NDArrayObj>() {
                if a.device() == dev {
                    return Ok(v);
                }
                a.dltensor()
            } else if let Some(arr) = o.downcast_ref::<ArrayObj>() {
                let mut items = Vec::with_capacity(arr.items.len());
                for it in &arr.items {
                    items.push(match it {
                        Some(x) => {
                            Some(to_device(RetValue::Object(x.clone()), dev)?.into_object()?)
                        }
                        None => None,
                    });
                }
                return Ok(RetValue::Object(ArrayObj::new_ref(items)));
            } else {
                return Ok(v);
            }
        }
        _ => return Ok(v),
    };
    // SAFETY: a DLTensor argument is valid for the duration of the call, an array while `v`
    // holds it.
    let t = unsafe { &*src };
    // SAFETY: as above.
    let out = NDArray::empty(unsafe { crate::ndarray::shape_of(t) }, t.dtype, dev)?;
    // SAFETY: both tensors describe valid memory of equal size (checked by the copy).
    unsafe { crate::ndarray::copy_from_to(t, out.dltensor(), std::ptr::null_mut())? };
    Ok(RetValue::Object(out.into_object()))
}

/// Reads the arguments of a packed call as register values.
pub(crate) fn regs_of(args: &Args<'_>, from: usize) -> Result<Vec<RetValue>> {
    if from > args.len() {
        return Ok(Vec::new());
    }
    args_to_regs(&args.values()[from..], &args.codes()[from..])
}

#[cfg(test)]
mod tests {
    use super::MAX_STACK_REGISTERS;
    use crate::module::Module;
    use crate::packed_func::value::{ArgValue, RetValue};
    use crate::packed_func::Result;
    use crate::relax_vm::exec::{Executable, FuncInfo, FuncKind, MAX_FRAME_REGISTERS};
    use crate::relax_vm::vm_module::load_executable_bytes;

    /// A few hundred bytes: `f(x)` with `regs` registers calls itself (`%1 = f(%0); ret %1`).
    fn recursive(regs: i64) -> Result<Vec<u8>> {
        let f = FuncInfo {
            kind: FuncKind::VmFunc,
            name: "f".into(),
            start_instr: 0,
            end_instr: 2,
            num_args: 1,
            register_file_size: regs,
            param_names: vec!["x".into()],
        };
        // call (1) dst %1, function 0, one argument: %0; ret (2) %1.
        Executable::from_parts(vec![f], vec![], vec![0, 5], vec![1, 1, 0, 1, 0, 2, 1])?.save()
    }

    fn run_f(bytes: &[u8]) -> Result<RetValue> {
        let exec = load_executable_bytes(bytes, "relax.Executable")?;
        let vm = Module::from_object(
            exec.function("vm_load_executable")?
                .call(&[])?
                .into_object()?,
        )?;
        vm.function("vm_initialization")?.call(&[
            ArgValue::Int(1),
            ArgValue::Int(0),
            ArgValue::Int(2),
        ])?;
        vm.function("f")?.call(&[ArgValue::Int(1)])
    }

    #[test]
    fn a_register_file_over_the_frame_budget_is_refused_at_load() {
        for regs in [MAX_FRAME_REGISTERS + 1, 1 << 24] {
            let e = recursive(regs).unwrap_err();
            assert!(
                e.message.contains("per-frame register budget"),
                "{regs}: {}",
                e.message
            );
        }
        // The same file written by hand (save refuses nothing): refused when loaded.
        let mut bytes = recursive(4).unwrap();
        let at = bytes
            .windows(8)
            .rposition(|w| w == 4i64.to_le_bytes())
            .unwrap();
        bytes[at..at + 8].copy_from_slice(&(1i64 << 24).to_le_bytes());
        let e = run_f(&bytes).unwrap_err();
        assert!(
            e.message.contains("per-frame register budget"),
            "{}",
            e.message
        );
    }

    #[test]
    fn deep_recursion_stops_at_the_stack_budget() {
        // Frames at the per-frame budget: the stack budget ends the recursion after
        // MAX_STACK_REGISTERS / MAX_FRAME_REGISTERS frames (not at the call depth limit, 256
        // frames, which would have held 2^26 registers, over a GiB).
        let bytes = recursive(MAX_FRAME_REGISTERS).unwrap();
        let e = run_f(&bytes).unwrap_err();
        assert!(e.message.contains("stack budget"), "{}", e.message);
        let frames = MAX_STACK_REGISTERS / MAX_FRAME_REGISTERS as usize;
        assert!(
            e.message
                .contains(&format!("held by {frames} running frames")),
            "{}",
            e.message
        );
        // The budget is released as the frames return: the VM runs again.
        let e = run_f(&bytes).unwrap_err();
        assert!(e.message.contains("stack budget"), "{}", e.message);
        // Small frames reach the call depth limit first.
        let e = run_f(&recursive(2).unwrap()).unwrap_err();
        assert!(e.message.contains("call depth"), "{}", e.message);
    }

    #[test]
    fn the_fuzz_seeds_are_these_executables() {
        let seed = |name: &str| {
            std::fs::read(format!(
                "{}/fuzz/seeds/relax/{name}.bin",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        };
        assert_eq!(
            seed("recurse_frame_budget"),
            recursive(MAX_FRAME_REGISTERS).unwrap()
        );
        assert_eq!(seed("recurse_small"), recursive(2).unwrap());
        let e = run_f(&seed("recurse_huge_regs")).unwrap_err();
        assert!(
            e.message.contains("per-frame register budget"),
            "{}",
            e.message
        );
    }
}
