//! The Relax VM: hand-assembled executables (interpreter semantics, closures, special
//! registers, type codes, bad input) and the fixtures' Relax libraries (compared with the
//! reference runtime's outputs, bit for bit).
#![cfg(feature = "relax")]

#[path = "common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/skip.rs"]
mod skip;

use std::sync::Once;
use tvm_runtime::module::Module;
use tvm_runtime::packed_func::registry;
use tvm_runtime::packed_func::types::type_code as tc;
use tvm_runtime::relax_vm::exec::{Constant, Executable, FuncInfo, FuncKind};
use tvm_runtime::relax_vm::vm_module::load_executable_bytes;
use tvm_runtime::relax_vm::VirtualMachine;
use tvm_runtime::{ArgValue, DLDataType, NDArray, RetValue};

const VOID: i64 = 1 << 54;
const VMREG: i64 = (1 << 54) + 1;
const MASK: i64 = (1 << 56) - 1;

fn imm(v: i64) -> i64 {
    (1 << 56) | (v & MASK)
}
fn cst(i: i64) -> i64 {
    (2 << 56) | i
}
fn fnc(i: i64) -> i64 {
    (3 << 56) | i
}

/// A tiny assembler for test executables.
#[derive(Default)]
struct Asm {
    funcs: Vec<FuncInfo>,
    consts: Vec<Constant>,
    off: Vec<i64>,
    data: Vec<i64>,
}

impl Asm {
    fn packed(&mut self, name: &str) -> i64 {
        self.funcs.push(FuncInfo {
            kind: FuncKind::PackedFunc,
            name: name.into(),
            start_instr: 0,
            end_instr: 0,
            num_args: -2,
            register_file_size: 0,
            param_names: vec![],
        });
        self.funcs.len() as i64 - 1
    }
    /// Declares a VM function whose code is emitted next; returns its index.
    fn begin(&mut self, name: &str, params: &[&str], regs: i64) -> i64 {
        self.funcs.push(FuncInfo {
            kind: FuncKind::VmFunc,
            name: name.into(),
            start_instr: self.off.len() as i64,
            end_instr: 0,
            num_args: params.len() as i64,
            register_file_size: regs,
            param_names: params.iter().map(|s| s.to_string()).collect(),
        });
        self.funcs.len() as i64 - 1
    }
    fn end(&mut self, f: i64) {
        self.funcs[f as usize].end_instr = self.off.len() as i64;
    }
    fn emit(&mut self, words: &[i64]) {
        self.off.push(self.data.len() as i64);
        self.data.extend_from_slice(words);
    }
    fn call(&mut self, dst: i64, f: i64, args: &[i64]) {
        let mut w = vec![1, dst, f, args.len() as i64];
        w.extend_from_slice(args);
        self.emit(&w);
    }
    fn ret(&mut self, r: i64) {
        self.emit(&[2, r]);
    }
    fn goto(&mut self, o: i64) {
        self.emit(&[3, o]);
    }
    fn iff(&mut self, c: i64, o: i64) {
        self.emit(&[4, c, o]);
    }
    fn build(self) -> tvm_runtime::Result<Executable> {
        Executable::from_parts(self.funcs, self.consts, self.off, self.data)
    }
    fn module(self) -> Module {
        let bytes = self.build().unwrap().save().unwrap();
        load_executable_bytes(&bytes, "relax.Executable").unwrap()
    }
}

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        registry::register_rust("test.relax.add", |a, rv| {
            *rv = RetValue::Int(a.i64(0)? + a.i64(1)?);
            Ok(())
        });
        registry::register_rust("test.relax.code", |a, rv| {
            *rv = RetValue::Int(a.codes()[0] as i64);
            Ok(())
        });
        registry::register_rust("test.relax.bool", |a, rv| {
            *rv = RetValue::Bool(a.i64(0)? != 0);
            Ok(())
        });
    });
}

fn vm_of(m: &Module) -> Module {
    let vm = Module::from_object(
        m.function("vm_load_executable")
            .unwrap()
            .call(&[])
            .unwrap()
            .into_object()
            .unwrap(),
    )
    .unwrap();
    vm.function("vm_initialization")
        .unwrap()
        .call(&[ArgValue::Int(1), ArgValue::Int(0), ArgValue::Int(2)])
        .unwrap();
    vm
}

fn call(vm: &Module, f: &str, args: &[ArgValue<'_>]) -> tvm_runtime::Result<RetValue> {
    vm.function(f)?.call(args)
}

/// main(x, y) = double(x) + y, double(a) = a + a; a Goto/If program; a closure program.
fn program() -> Module {
    let mut a = Asm::default();
    let add = a.packed("test.relax.add");
    let double = a.begin("double", &["a"], 2);
    a.call(1, add, &[0, 0]);
    a.ret(1);
    a.end(double);
    let main = a.begin("main", &["x", "y"], 4);
    a.call(2, double, &[0]);
    a.call(3, add, &[2, 1]);
    a.ret(3);
    a.end(main);
    // pick(c) = c ? 10 : 20, through If/Goto and a merge register.
    let copy = a.packed("vm.builtin.copy");
    let pick = a.begin("pick", &["c"], 2);
    a.iff(0, 3);
    a.call(1, copy, &[imm(10)]);
    a.goto(2);
    a.call(1, copy, &[imm(20)]);
    a.ret(1);
    a.end(pick);
    // adder(b, a) = a + b; clo(x) = invoke_closure(make_closure(adder, x), 5).
    let adder = a.begin("adder", &["b", "a"], 3);
    a.call(2, add, &[0, 1]);
    a.ret(2);
    a.end(adder);
    let make = a.packed("vm.builtin.make_closure");
    let invoke = a.packed("vm.builtin.invoke_closure");
    let clo = a.begin("clo", &["x"], 3);
    a.call(1, make, &[fnc(adder), 0]);
    a.call(2, invoke, &[VMREG, 1, imm(5)]);
    a.ret(2);
    a.end(clo);
    // mk(x) returns the closure itself.
    let mk = a.begin("mk", &["x"], 2);
    a.call(1, make, &[fnc(adder), 0]);
    a.ret(1);
    a.end(mk);
    a.module()
}

#[test]
fn calls_nested_frames_branches_and_closures() {
    setup();
    let vm = vm_of(&program());
    let r = call(&vm, "main", &[ArgValue::Int(3), ArgValue::Int(4)]).unwrap();
    assert_eq!(r.as_i64().unwrap(), 10);
    for (c, want) in [
        (ArgValue::Int(1), 10),
        (ArgValue::Int(0), 20),
        (ArgValue::Bool(true), 10),
        (ArgValue::Bool(false), 20),
    ] {
        assert_eq!(call(&vm, "pick", &[c]).unwrap().as_i64().unwrap(), want);
    }
    assert_eq!(
        call(&vm, "clo", &[ArgValue::Int(7)])
            .unwrap()
            .as_i64()
            .unwrap(),
        12
    );
    // A closure returned to the caller runs through the VM's invoke_closure.
    let c = call(&vm, "mk", &[ArgValue::Int(100)])
        .unwrap()
        .into_object()
        .unwrap();
    assert_eq!(c.type_key(), "relax.vm.Closure");
    // SAFETY: `c` is alive for the call.
    let carg =
        ArgValue::Object(unsafe { tvm_runtime::packed_func::value::ObjArg::new(c.as_ptr()) });
    let r = call(&vm, "invoke_closure", &[carg, ArgValue::Int(1)]).unwrap();
    assert_eq!(r.as_i64().unwrap(), 101);
    // Wrong argument count.
    let e = call(&vm, "main", &[ArgValue::Int(3)]).unwrap_err();
    assert!(
        e.message.contains("Invoking function main requires 2 inputs but only 1 inputs are provided. (parameters: x, y)"),
        "{}",
        e.message
    );
    // Parameter metadata.
    assert_eq!(
        call(&vm, "get_function_arity", &[ArgValue::Str(c"main")])
            .unwrap()
            .as_i64()
            .unwrap(),
        2
    );
    match call(
        &vm,
        "get_function_param_name",
        &[ArgValue::Str(c"main"), ArgValue::Int(1)],
    )
    .unwrap()
    {
        RetValue::Str(s) => assert_eq!(s, "y"),
        other => panic!("{other:?}"),
    }
    assert!(call(
        &vm,
        "get_function_param_name",
        &[ArgValue::Str(c"main"), ArgValue::Int(2)]
    )
    .is_err());
    assert!(vm.get_function("no_such", false).unwrap().is_none());
}

#[test]
fn registers_keep_exact_type_codes() {
    setup();
    let mut a = Asm::default();
    let code = a.packed("test.relax.code");
    let mkbool = a.packed("test.relax.bool");
    let tuple = a.packed("vm.builtin.make_tuple");
    a.consts = vec![
        Constant::Int(5),
        Constant::Float(2.5),
        Constant::DataType(DLDataType::new(2, 32, 1)),
        Constant::Shape(vec![2, 3]),
        Constant::Str(b"hi".to_vec()),
        Constant::NDArray(NDArray::from_slice(&[1.0f32, 2.0], &[2]).unwrap()),
    ];
    let f = a.begin("codes", &[], 10);
    for (i, arg) in [cst(0), cst(1), cst(2), cst(3), cst(4), cst(5), VMREG, VOID]
        .iter()
        .enumerate()
    {
        a.call(i as i64, code, &[*arg]);
    }
    a.call(8, mkbool, &[imm(1)]);
    a.call(8, code, &[8]);
    a.call(9, tuple, &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
    a.ret(9);
    a.end(f);
    let vm = vm_of(&a.module());
    let r = call(&vm, "codes", &[]);
    // make_tuple rejects plain ints, as the reference v0.16 does.
    let e = r.unwrap_err();
    assert!(
        e.message.contains("tuple holds objects only"),
        "{}",
        e.message
    );
    // The same program returning each code through an NDArray-free path.
    let mut a = Asm::default();
    let code = a.packed("test.relax.code");
    let mkbool = a.packed("test.relax.bool");
    a.consts = vec![
        Constant::Int(5),
        Constant::Float(2.5),
        Constant::DataType(DLDataType::new(2, 32, 1)),
        Constant::Shape(vec![2, 3]),
        Constant::Str(b"hi".to_vec()),
        Constant::NDArray(NDArray::from_slice(&[1.0f32, 2.0], &[2]).unwrap()),
    ];
    let args = [cst(0), cst(1), cst(2), cst(3), cst(4), cst(5), VMREG, VOID];
    let want = [
        tc::INT,
        tc::FLOAT,
        tc::DATA_TYPE,
        tc::OBJECT_HANDLE,
        tc::OBJECT_HANDLE,
        tc::NDARRAY_HANDLE,
        tc::OPAQUE_HANDLE,
        tc::NULLPTR,
    ];
    for (i, w) in args.iter().enumerate() {
        let f = a.begin(&format!("c{i}"), &[], 1);
        a.call(0, code, &[*w]);
        a.ret(0);
        a.end(f);
    }
    let f = a.begin("cbool", &[], 1);
    a.call(0, mkbool, &[imm(1)]);
    a.call(0, code, &[0]);
    a.ret(0);
    a.end(f);
    let vm = vm_of(&a.module());
    for (i, w) in want.iter().enumerate() {
        let got = call(&vm, &format!("c{i}"), &[]).unwrap().as_i64().unwrap();
        assert_eq!(got, *w as i64, "constant {i}");
    }
    assert_eq!(
        call(&vm, "cbool", &[]).unwrap().as_i64().unwrap(),
        tc::BOOL as i64
    );
}

#[test]
fn runaway_recursion_is_an_error() {
    setup();
    let mut a = Asm::default();
    let f = a.begin("f", &["x"], 2);
    a.call(1, f, &[0]);
    a.ret(1);
    a.end(f);
    let vm = vm_of(&a.module());
    let e = call(&vm, "f", &[ArgValue::Int(1)]).unwrap_err();
    assert!(e.message.contains("call depth"), "{}", e.message);
}

#[test]
fn bad_executables_are_rejected_with_a_clear_error() {
    setup();
    let good = {
        let mut a = Asm::default();
        let add = a.packed("test.relax.add");
        let f = a.begin("main", &["x"], 2);
        a.call(1, add, &[0, 0]);
        a.ret(1);
        a.end(f);
        a.build().unwrap().save().unwrap()
    };
    // Every truncation fails cleanly.
    for n in 0..good.len() {
        let e = load_executable_bytes(&good[..n], "relax.Executable")
            .err()
            .unwrap();
        assert!(
            e.message.contains("invalid Relax VM executable") || e.message.contains("truncated"),
            "{n}: {}",
            e.message
        );
    }
    // Wrong magic and version.
    let mut b = good.clone();
    b[8] ^= 1;
    let e = load_executable_bytes(&b, "relax.Executable").err().unwrap();
    assert!(e.message.contains("bad magic"), "{}", e.message);
    let mut b = good.clone();
    b[24] = b'9';
    let e = load_executable_bytes(&b, "relax.Executable").err().unwrap();
    assert!(e.message.contains("version \"9.14\""), "{}", e.message);

    type Case = (&'static str, fn(&mut Asm, i64));
    let cases: [Case; 6] = [
        ("register %5", |a, add| a.call(1, add, &[5, 0])),
        ("constant index 3", |a, add| a.call(1, add, &[cst(3), 0])),
        ("function index 9", |a, _| a.call(1, 9, &[0])),
        ("function index 7", |a, add| a.call(1, add, &[fnc(7)])),
        ("jumps outside", |a, _| a.goto(5)),
        ("jumps outside", |a, _| a.iff(0, 1)),
    ];
    for (want, emit) in cases {
        let mut a = Asm::default();
        let add = a.packed("test.relax.add");
        let f = a.begin("main", &["x"], 2);
        emit(&mut a, add);
        a.ret(1);
        a.end(f);
        let e = a.build().err().unwrap();
        assert!(e.message.contains(want), "{want}: {}", e.message);
    }
    // Unknown opcode.
    let e = Executable::from_parts(vec![], vec![], vec![0], vec![9])
        .err()
        .unwrap();
    assert!(e.message.contains("unknown opcode 9"), "{}", e.message);
}

#[test]
fn missing_functions_are_all_named_at_init() {
    setup();
    let mut a = Asm::default();
    let x = a.packed("no.such.kernel");
    let y = a.packed("vm.builtin.no_such_builtin");
    let f = a.begin("main", &[], 2);
    a.call(0, x, &[]);
    a.call(1, y, &[]);
    a.ret(1);
    a.end(f);
    let m = a.module();
    let vm = Module::from_object(
        m.function("vm_load_executable")
            .unwrap()
            .call(&[])
            .unwrap()
            .into_object()
            .unwrap(),
    )
    .unwrap();
    let e = vm
        .function("vm_initialization")
        .unwrap()
        .call(&[ArgValue::Int(1), ArgValue::Int(0), ArgValue::Int(2)])
        .unwrap_err();
    assert!(
        e.message
            .contains("no.such.kernel, vm.builtin.no_such_builtin"),
        "{}",
        e.message
    );
    // Calling before a successful init is an error too.
    let e = call(&vm, "main", &[]).unwrap_err();
    assert!(e.message.contains("not initialised"), "{}", e.message);
}

#[test]
fn saving_is_byte_identical_and_disassembly_reads() {
    setup();
    let m = program();
    let bytes = m.node().save_to_binary().unwrap();
    let again = load_executable_bytes(&bytes, "relax.VMExecutable").unwrap();
    assert_eq!(again.type_key(), "relax.VMExecutable");
    assert_eq!(again.node().save_to_binary().unwrap(), bytes);
    let text = match m.function("as_text").unwrap().call(&[]).unwrap() {
        RetValue::Str(s) => s,
        o => panic!("{o:?}"),
    };
    assert!(
        text.contains("@main:\n  call  double           in: %0           dst: %2\n"),
        "{text}"
    );
    assert!(text.contains("  If    %0, 3\n"), "{text}");
    assert!(text.contains("in: f[adder], %0"), "{text}");
    let py = match m.function("as_python").unwrap().call(&[]).unwrap() {
        RetValue::Str(s) => s,
        o => panic!("{o:?}"),
    };
    assert!(py.contains("ib.emit_call(\"vm.builtin.invoke_closure\", args=[ib.r(vm), ib.r(1), ib.imm(5)], dst=ib.r(2))"), "{py}");
    let has = m.function("has_function").unwrap();
    assert!(matches!(
        has.call(&[ArgValue::Str(c"main")]).unwrap(),
        RetValue::Int(1)
    ));
    assert!(matches!(
        has.call(&[ArgValue::Str(c"nope")]).unwrap(),
        RetValue::Int(0)
    ));
}

#[test]
fn pooled_allocator_reuses_freed_blocks() {
    use tvm_runtime::relax_vm::memory::{get_or_create_allocator, StorageObj, POOLED};
    let dev = tvm_runtime::DLDevice::CPU;
    let alloc = get_or_create_allocator(dev, POOLED).unwrap();
    let hint = DLDataType::new(1, 8, 1);
    // An odd size nothing else in this process asks for.
    let s = StorageObj::allocate(alloc.clone(), dev, 12345 * 4096 - 7, hint).unwrap();
    let p = s.downcast_ref::<StorageObj>().unwrap().buffer().data as usize;
    let t = StorageObj::alloc_tensor(&s, 64, &[4], DLDataType::new(2, 32, 1)).unwrap();
    drop(s);
    // The tensor keeps the storage alive: a new storage gets other memory.
    let s2 = StorageObj::allocate(alloc.clone(), dev, 12345 * 4096, hint).unwrap();
    assert_ne!(
        s2.downcast_ref::<StorageObj>().unwrap().buffer().data as usize,
        p
    );
    drop(t);
    let s3 = StorageObj::allocate(alloc, dev, 12345 * 4096, hint).unwrap();
    assert_eq!(
        s3.downcast_ref::<StorageObj>().unwrap().buffer().data as usize,
        p
    );
    // Views are bounds-checked.
    assert!(
        StorageObj::alloc_tensor(&s3, 12345 * 4096 - 4, &[2], DLDataType::new(2, 32, 1)).is_err()
    );
}

// ---------------------------------------------------------------------------------------------
// Real executables from the fixtures.

struct Npz(npyz::npz::NpzArchive<std::io::BufReader<std::fs::File>>);

impl Npz {
    fn array(&mut self, key: &str) -> NDArray {
        let npy = self
            .0
            .by_name(key)
            .unwrap()
            .unwrap_or_else(|| panic!("no {key}"));
        let shape: Vec<i64> = npy.shape().iter().map(|&d| d as i64).collect();
        let dt = npy.dtype();
        let descr = match &dt {
            npyz::DType::Plain(t) => t.to_string(),
            _ => panic!("unsupported npz dtype"),
        };
        macro_rules! arr {
            ($t:ty) => {{
                let v: Vec<$t> = npy.into_vec().unwrap();
                NDArray::from_slice(&v, &shape).unwrap()
            }};
        }
        match descr.trim_start_matches(['<', '|', '=']) {
            "f4" => arr!(f32),
            "f8" => arr!(f64),
            "i4" => arr!(i32),
            "i8" => arr!(i64),
            "i1" => arr!(i8),
            "u1" => arr!(u8),
            "b1" => {
                let v: Vec<bool> = npy.into_vec().unwrap();
                let b: Vec<u8> = v.into_iter().map(u8::from).collect();
                let a =
                    NDArray::empty(&shape, DLDataType::new(1, 1, 1), tvm_runtime::DLDevice::CPU)
                        .unwrap();
                // SAFETY: a fresh CPU array of b.len() one-byte elements.
                unsafe {
                    std::ptr::copy_nonoverlapping(b.as_ptr(), a.dltensor().data as *mut u8, b.len())
                };
                a
            }
            d => panic!("unsupported dtype {d}"),
        }
    }
}

fn bytes_of(a: &NDArray) -> Vec<u8> {
    let t = a.dltensor();
    // SAFETY: a live CPU array of nbytes bytes.
    unsafe {
        std::slice::from_raw_parts(
            (t.data as *const u8).add(t.byte_offset as usize),
            a.nbytes(),
        )
    }
    .to_vec()
}

/// Every Relax library of the fixtures with its manifest entry, or None (skipped through
/// tests/common/skip.rs; a failure under TVMRT_REQUIRE_FIXTURES) when the fixtures are not
/// built or hold no Relax library.
fn relax_fixtures() -> Option<Vec<(std::path::PathBuf, serde_json::Value)>> {
    let d = fixture_dirs::dir()?;
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("manifest.json")).unwrap()).unwrap();
    let v: Vec<_> = m
        .as_object()
        .unwrap()
        .values()
        .filter(|e| e["kind"] == "relax")
        .map(|e| (d.clone(), e.clone()))
        .collect();
    skip::available(!v.is_empty(), "TVMRT_REQUIRE_FIXTURES", || {
        format!(
            "{}/manifest.json lists no Relax library (rebuild with scripts/build_fixtures.py)",
            d.display()
        )
    })
    .then_some(v)
}

#[test]
fn fixtures_match_the_reference_bit_for_bit() {
    let Some(fixtures) = relax_fixtures() else {
        return;
    };
    for (d, e) in fixtures {
        let file = d.join(e["file"].as_str().unwrap());
        let vm = VirtualMachine::load(file.to_str().unwrap()).unwrap();
        vm.init(&[tvm_runtime::DLDevice::CPU]).unwrap();
        let mut npz =
            Npz(npyz::npz::NpzArchive::open(d.join(e["expected"].as_str().unwrap())).unwrap());
        for c in e["calls"].as_array().unwrap() {
            let f = c["function"].as_str().unwrap();
            let args: Vec<NDArray> = c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| npz.array(k.as_str().unwrap()))
                .collect();
            let out = vm
                .call(f, &args)
                .unwrap_or_else(|err| panic!("{}: {f}: {err}", file.display()));
            let where_ = format!("{}: {f}", file.display());
            check_result(&where_, &c["result"], &out, &mut npz);
        }
    }
}

/// Checks a returned value against the manifest's `result` (a key: a tensor; {"shape": key}:
/// a ShapeTuple; a list: a tuple) and the reference's arrays, bit for bit.
fn check_result(
    where_: &str,
    res: &serde_json::Value,
    got: &tvm_runtime::relax_vm::api::Value,
    npz: &mut Npz,
) {
    use tvm_runtime::relax_vm::api::Value as V;
    match (res, got) {
        (serde_json::Value::String(k), V::Tensor(got)) => {
            let want = npz.array(k);
            assert_eq!(got.dtype(), want.dtype(), "{where_}: {k}");
            assert_eq!(got.shape(), want.shape(), "{where_}: {k}");
            assert!(bytes_of(got) == bytes_of(&want), "{where_}: {k} differs");
        }
        (serde_json::Value::Array(items), V::Tuple(got)) => {
            assert_eq!(items.len(), got.len(), "{where_}: tuple size");
            for (i, (r, g)) in items.iter().zip(got).enumerate() {
                check_result(&format!("{where_}[{i}]"), r, g, npz);
            }
        }
        (serde_json::Value::Object(m), V::Other(RetValue::Object(o))) => {
            let k = m["shape"].as_str().unwrap();
            let dims = o
                .downcast_ref::<tvm_runtime::object::containers::ShapeTupleObj>()
                .unwrap_or_else(|| panic!("{where_}: {} is not a shape", o.type_key()))
                .dims()
                .to_vec();
            assert_eq!(dims, npz.array(k).to_vec::<i64>().unwrap(), "{where_}: {k}");
        }
        (r, g) => panic!("{where_}: expected {r}, got {g:?}"),
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The bytes of the symbol `name` of an ELF64 little-endian shared library, located through
/// the symbol tables and the section that holds the symbol (read here, independently of the
/// runtime's own loader); `size` is taken from the symbol table.
fn elf_symbol<'a>(img: &'a [u8], name: &str) -> Option<&'a [u8]> {
    assert!(img.starts_with(b"\x7fELF\x02\x01"), "not an ELF64 LE file");
    let u16_at = |at: usize| u16::from_le_bytes(img[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(img[at..at + 4].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum) = (u64_at(img, 0x28) as usize, u16_at(0x3a), u16_at(0x3c));
    let sec = |i: usize| shoff + i * shentsize;
    for i in 0..shnum {
        let h = sec(i);
        // SHT_SYMTAB (2) or SHT_DYNSYM (11), with their string table at sh_link.
        if !matches!(u32_at(h + 4), 2 | 11) {
            continue;
        }
        let (off, size) = (u64_at(img, h + 24) as usize, u64_at(img, h + 32) as usize);
        let strtab = u64_at(img, sec(u32_at(h + 40)) + 24) as usize;
        for sym in (off..off + size).step_by(24) {
            let n = strtab + u32_at(sym);
            let end = n + img[n..].iter().position(|&c| c == 0).unwrap();
            if &img[n..end] != name.as_bytes() {
                continue;
            }
            let (shndx, value, len) =
                (u16_at(sym + 6), u64_at(img, sym + 8), u64_at(img, sym + 16));
            let (addr, file_off) = (u64_at(img, sec(shndx) + 16), u64_at(img, sec(shndx) + 24));
            let start = (file_off + value - addr) as usize;
            return Some(&img[start..start + len as usize]);
        }
    }
    None
}

/// The `SaveToBinary` bytes of the Relax executable stored in a library exported by TVM: the
/// payload of the `relax.Executable` (v0.16) / `relax.VMExecutable` entry of the library's
/// `__tvm_dev_mblob` (`u64 nbytes`, `u64 count`, then per entry a type key string and the
/// entry's payload; the executable's payload is one length-prefixed string).
fn stored_executable(lib: &std::path::Path) -> Vec<u8> {
    let img = std::fs::read(lib).unwrap();
    let blob = elf_symbol(&img, "__tvm_dev_mblob")
        .unwrap_or_else(|| panic!("{}: no __tvm_dev_mblob", lib.display()));
    let n = u64_at(blob, 0) as usize;
    let s = &blob[8..8 + n];
    fn string<'a>(s: &'a [u8], p: &mut usize) -> &'a [u8] {
        let len = u64_at(s, *p) as usize;
        *p += 8 + len;
        &s[*p - len..*p]
    }
    let mut p = 8;
    for _ in 0..u64_at(s, 0) {
        match string(s, &mut p) {
            b"_lib" => {}
            b"_import_tree" => {
                for _ in 0..2 {
                    p += 8 + 8 * u64_at(s, p) as usize;
                }
            }
            b"relax.Executable" | b"relax.VMExecutable" => {
                let start = p;
                string(s, &mut p);
                return s[start..p].to_vec();
            }
            k => panic!(
                "{}: blob entry {} before the executable",
                lib.display(),
                String::from_utf8_lossy(k)
            ),
        }
    }
    panic!("{}: no Relax executable in __tvm_dev_mblob", lib.display())
}

/// Our `SaveToBinary` of every fixture's executable equals, byte for byte, the bytes the
/// reference compiler stored in the library; loading our bytes back saves them again.
#[test]
fn fixture_executables_save_back_byte_identically() {
    let Some(fixtures) = relax_fixtures() else {
        return;
    };
    for (d, e) in fixtures {
        let file = d.join(e["file"].as_str().unwrap());
        let m = Module::load(file.to_str().unwrap()).unwrap();
        let bytes = m.node().save_to_binary().unwrap();
        let stored = stored_executable(&file);
        assert!(
            bytes == stored,
            "{}: our save ({} bytes) differs from the executable stored in the library ({} bytes){}",
            file.display(),
            bytes.len(),
            stored.len(),
            bytes
                .iter()
                .zip(&stored)
                .position(|(a, b)| a != b)
                .map_or(String::new(), |i| format!(", first at byte {i}"))
        );
        let again = load_executable_bytes(&bytes, "relax.Executable").unwrap();
        assert_eq!(again.node().save_to_binary().unwrap(), bytes);
        let dis = e["disasm"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: the manifest names no disassembly", file.display()));
        let want = std::fs::read_to_string(d.join(dis)).unwrap();
        let got = match m.function("as_text").unwrap().call(&[]).unwrap() {
            RetValue::Str(s) => s,
            o => panic!("{o:?}"),
        };
        assert_eq!(got, want, "{}", file.display());
    }
}

#[test]
fn instrument_sees_every_call_and_can_skip() {
    setup();
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Arc;
    let vm = vm_of(&program());
    let seen = Arc::new(AtomicI64::new(0));
    let s2 = seen.clone();
    // Skips every call of test.relax.add (returns 1 before it), so main returns null.
    let ins = tvm_runtime::Function::from_rust(move |a, rv| {
        s2.fetch_add(1, Ordering::Relaxed);
        let name = a.str(1)?;
        let before = a.i64(2)?;
        *rv = RetValue::Int((name == "test.relax.add" && before == 1) as i64);
        Ok(())
    });
    let o = ins.as_object().clone();
    // SAFETY: `o` is alive for the call.
    let arg = ArgValue::Object(unsafe { tvm_runtime::packed_func::value::ObjArg::new(o.as_ptr()) });
    call(&vm, "set_instrument", &[arg]).unwrap();
    let r = call(&vm, "main", &[ArgValue::Int(3), ArgValue::Int(4)]).unwrap();
    assert!(matches!(r, RetValue::Null), "{r:?}");
    // main: double (before, after) + add (before); double: add (before).
    assert_eq!(seen.load(Ordering::Relaxed), 4);
    call(&vm, "set_instrument", &[ArgValue::Null]).unwrap();
    assert_eq!(
        call(&vm, "main", &[ArgValue::Int(3), ArgValue::Int(4)])
            .unwrap()
            .as_i64()
            .unwrap(),
        10
    );
}

#[test]
fn stateful_calls_and_saved_functions() {
    setup();
    let vm = vm_of(&program());
    call(
        &vm,
        "set_input",
        &[ArgValue::Str(c"main"), ArgValue::Int(1), ArgValue::Int(2)],
    )
    .unwrap();
    let e = call(&vm, "get_output", &[ArgValue::Str(c"main")]).unwrap_err();
    assert!(e.message.contains("invoke_stateful"), "{}", e.message);
    call(&vm, "invoke_stateful", &[ArgValue::Str(c"main")]).unwrap();
    assert_eq!(
        call(&vm, "get_output", &[ArgValue::Str(c"main")])
            .unwrap()
            .as_i64()
            .unwrap(),
        4
    );
    assert_eq!(
        call(&vm, "get_output_arity", &[ArgValue::Str(c"main")])
            .unwrap()
            .as_i64()
            .unwrap(),
        -1
    );
    let e = call(
        &vm,
        "set_input",
        &[ArgValue::Str(c"main"), ArgValue::Int(1)],
    )
    .unwrap_err();
    assert!(e.message.contains("doesn't match"), "{}", e.message);
    call(
        &vm,
        "save_function",
        &[
            ArgValue::Str(c"main"),
            ArgValue::Str(c"bench"),
            ArgValue::Int(1),
            ArgValue::Int(5),
            ArgValue::Int(6),
        ],
    )
    .unwrap();
    assert_eq!(call(&vm, "bench", &[]).unwrap().as_i64().unwrap(), 16);
    // Through the time evaluator, as TVM's Python VirtualMachine.time_evaluator does (with
    // `profiling`; without it the global is missing and the error names the feature).
    if !cfg!(feature = "profiling") {
        let e = tvm_runtime::Function::get_global("runtime.RPCTimeEvaluator").unwrap_err();
        assert!(e.message.contains("built without `profiling`"), "{e}");
        return;
    }
    let te = tvm_runtime::Function::get_global("runtime.RPCTimeEvaluator").unwrap();
    let vmo = vm.as_object().clone();
    // SAFETY: `vmo` is alive for the call.
    let marg =
        ArgValue::Object(unsafe { tvm_runtime::packed_func::value::ObjArg::new(vmo.as_ptr()) });
    let f = te
        .call(&[
            marg,
            ArgValue::Str(c"bench"),
            ArgValue::Int(1),
            ArgValue::Int(0),
            ArgValue::Int(2),
            ArgValue::Int(3),
            ArgValue::Int(0),
            ArgValue::Int(0),
            ArgValue::Int(0),
            ArgValue::Int(0),
            ArgValue::Int(0),
            ArgValue::Str(c""),
        ])
        .unwrap()
        .into_object()
        .unwrap();
    let f = tvm_runtime::Function::from_object(f).unwrap();
    match f.call(&[]).unwrap() {
        RetValue::Bytes(b) => assert_eq!(b.len(), 3 * 8),
        o => panic!("{o:?}"),
    }
}

/// The first Relax fixture call whose first argument is a float32 tensor, or None (skipped
/// through tests/common/skip.rs; a failure under TVMRT_REQUIRE_FIXTURES) when the fixtures
/// are not built or no call takes one.
fn first_tensor_call() -> Option<(VirtualMachine, String, Vec<NDArray>, std::path::PathBuf)> {
    for (d, e) in relax_fixtures()? {
        let file = d.join(e["file"].as_str().unwrap());
        let mut npz =
            Npz(npyz::npz::NpzArchive::open(d.join(e["expected"].as_str().unwrap())).unwrap());
        for c in e["calls"].as_array().unwrap() {
            let args: Vec<NDArray> = c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| npz.array(k.as_str().unwrap()))
                .collect();
            if args
                .first()
                .is_some_and(|a| a.dtype() == DLDataType::new(2, 32, 1) && !a.shape().is_empty())
            {
                let vm = VirtualMachine::load(file.to_str().unwrap()).unwrap();
                vm.init(&[tvm_runtime::DLDevice::CPU]).unwrap();
                return Some((vm, c["function"].as_str().unwrap().to_string(), args, file));
            }
        }
    }
    skip::available(false, "TVMRT_REQUIRE_FIXTURES", || {
        "no Relax fixture call takes a float32 tensor first (rebuild with scripts/build_fixtures.py)"
            .into()
    });
    None
}

#[test]
fn wrong_inputs_get_the_reference_wording() {
    let Some((vm, f, mut args, _)) = first_tensor_call() else {
        return;
    };
    let good = args[0].clone();
    args[0] = NDArray::empty(
        good.shape(),
        DLDataType::new(0, 32, 1),
        tvm_runtime::DLDevice::CPU,
    )
    .unwrap();
    let e = vm.call(&f, &args).unwrap_err();
    assert!(
        e.message
            .contains("expect Tensor with dtype float32 but get int32"),
        "{}",
        e.message
    );
    let mut shape = good.shape().to_vec();
    shape.push(1);
    args[0] = NDArray::empty(
        &shape,
        DLDataType::new(2, 32, 1),
        tvm_runtime::DLDevice::CPU,
    )
    .unwrap();
    let e = vm.call(&f, &args).unwrap_err();
    assert!(
        e.message.contains(&format!(
            "expect Tensor with ndim {} but get {}",
            shape.len() - 1,
            shape.len()
        )),
        "{}",
        e.message
    );
    args.pop();
    let e = vm.call(&f, &args).unwrap_err();
    assert!(e.message.contains("inputs are provided"), "{}", e.message);
    assert_eq!(e.kind, tvm_runtime::ErrorKind::InternalError);
}

/// The kernel calls (calls of the library's functions: neither `vm.builtin.*` nor VM
/// functions) that one run of the VM function `func` makes, in order, read from the
/// reference compiler's disassembly of the executable. The function must be straight-line
/// code (no `If`, no `goto`) calling no other VM function, so that every run makes exactly
/// these calls.
fn kernel_calls_of(disasm: &str, func: &str) -> Vec<String> {
    let packed: std::collections::HashSet<&str> = disasm
        .lines()
        .filter_map(|l| l.strip_prefix('@')?.strip_suffix(" packed_func;"))
        .collect();
    let body = disasm
        .split("\n\n")
        .find_map(|b| b.trim_start().strip_prefix(&format!("@{func}:\n")))
        .unwrap_or_else(|| panic!("no @{func}: in the disassembly"));
    let mut calls = Vec::new();
    for l in body.lines().map(str::trim) {
        let mut words = l.split_whitespace();
        match words.next() {
            Some("call") => {
                let name = words.next().unwrap();
                assert!(
                    packed.contains(name),
                    "@{func} calls the VM function {name}"
                );
                if !name.starts_with("vm.builtin.") {
                    calls.push(name.to_string());
                }
            }
            Some("ret") | None => {}
            Some(op) => panic!("@{func} is not straight-line code: {l} ({op})"),
        }
    }
    calls
}

#[test]
fn profiler_reports_every_kernel_call() {
    let Some(fixtures) = relax_fixtures() else {
        return;
    };
    let found = fixtures.iter().find(|(_, e)| e["file"] == "relax_chain.so");
    if !skip::available(found.is_some(), "TVMRT_REQUIRE_FIXTURES", || {
        "relax_chain is not in the fixtures (rebuild with scripts/build_fixtures.py)".into()
    }) {
        return;
    }
    let (d, e) = found.unwrap();
    let file = d.join("relax_chain.so");
    let c = &e["calls"][0];
    let f = c["function"].as_str().unwrap().to_string();
    let mut npz =
        Npz(npyz::npz::NpzArchive::open(d.join(e["expected"].as_str().unwrap())).unwrap());
    let args: Vec<NDArray> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| npz.array(k.as_str().unwrap()))
        .collect();
    let disasm = std::fs::read_to_string(d.join(e["disasm"].as_str().unwrap())).unwrap();
    let want = kernel_calls_of(&disasm, &f);
    assert_eq!(want.len(), 100, "relax_chain makes a hundred kernel calls");
    let vm = VirtualMachine::load(file.to_str().unwrap()).unwrap();
    vm.init(&[tvm_runtime::DLDevice::CPU]).unwrap();
    // A profiler VM over the same executable (found without `profiling` too, failing when
    // called with the feature's name).
    let m = Module::load(file.to_str().unwrap()).unwrap();
    if !cfg!(feature = "profiling") {
        let load = m.function("vm_profiler_load_executable").unwrap();
        let e = load.call(&[]).unwrap_err();
        assert!(e.message.contains("built without `profiling`"), "{e}");
        return;
    }
    let pvm = Module::from_object(
        m.function("vm_profiler_load_executable")
            .unwrap()
            .call(&[])
            .unwrap()
            .into_object()
            .unwrap(),
    )
    .unwrap();
    pvm.function("vm_initialization")
        .unwrap()
        .call(&[ArgValue::Int(1), ArgValue::Int(0), ArgValue::Int(2)])
        .unwrap();
    let fname = std::ffi::CString::new(f.clone()).unwrap();
    let mut pargs = vec![ArgValue::Str(&fname)];
    pargs.extend(args.iter().map(ArgValue::from));
    let json = match pvm.function("profile").unwrap().call(&pargs).unwrap() {
        RetValue::Str(s) => s,
        o => panic!("{o:?}"),
    };
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let calls = j["calls"].as_array().unwrap();
    // Every kernel call of the run, in order, and no kernel call more.
    let kernels: Vec<&str> = calls
        .iter()
        .map(|c| c["Name"]["string"].as_str().unwrap())
        .filter(|n| !n.starts_with("vm.builtin."))
        .collect();
    assert_eq!(
        kernels,
        want,
        "{}: the profiled kernel calls",
        file.display()
    );
    for c in calls {
        assert_eq!(c["Device"]["string"], "cpu0");
        assert!(c["Duration (us)"]["microseconds"].as_f64().unwrap() >= 0.0);
    }
    assert_eq!(j["configuration"]["Executor"]["string"], "VM");
    // Python reads it back through runtime.profiling.FromJSON and prints a table.
    let cj = std::ffi::CString::new(json.clone()).unwrap();
    let rep = tvm_runtime::Function::get_global("runtime.profiling.FromJSON")
        .unwrap()
        .call(&[ArgValue::Str(&cj)])
        .unwrap()
        .into_object()
        .unwrap();
    assert_eq!(rep.type_key(), "runtime.profiling.Report");
    // SAFETY: `rep` is alive for the call.
    let rarg =
        ArgValue::Object(unsafe { tvm_runtime::packed_func::value::ObjArg::new(rep.as_ptr()) });
    let table = match tvm_runtime::Function::get_global("runtime.profiling.AsTable")
        .unwrap()
        .call(&[rarg, ArgValue::Int(1), ArgValue::Int(1), ArgValue::Int(1)])
        .unwrap()
    {
        RetValue::Str(s) => s,
        o => panic!("{o:?}"),
    };
    let first = calls[0]["Name"]["string"].as_str().unwrap();
    assert!(
        table.starts_with("Name") && table.contains(first) && table.contains("\nSum "),
        "{table}"
    );
    // The plain VM has no profile function.
    assert!(vm
        .module()
        .get_function("profile", false)
        .unwrap()
        .is_none());
}

#[test]
fn contrib_sort_externs() {
    let f = |n: &str| tvm_runtime::Function::get_global(n).unwrap();
    let x = NDArray::from_slice(&[3.0f32, 1.0, 2.0, 1.0, 5.0, 0.0], &[2, 3]).unwrap();
    let idx = NDArray::empty(
        &[2, 3],
        DLDataType::new(0, 32, 1),
        tvm_runtime::DLDevice::CPU,
    )
    .unwrap();
    f("tvm.contrib.sort.argsort")
        .call(&[
            (&x).into(),
            (&idx).into(),
            ArgValue::Int(1),
            ArgValue::Int(1),
        ])
        .unwrap();
    assert_eq!(idx.to_vec::<i32>().unwrap(), vec![1, 2, 0, 2, 0, 1]);
    // Along axis 0, descending: ties keep the lower index first.
    f("tvm.contrib.sort.argsort")
        .call(&[
            (&x).into(),
            (&idx).into(),
            ArgValue::Int(0),
            ArgValue::Int(0),
        ])
        .unwrap();
    assert_eq!(idx.to_vec::<i32>().unwrap(), vec![0, 1, 0, 1, 0, 1]);
    let y = NDArray::empty(
        &[2, 3],
        DLDataType::new(2, 32, 1),
        tvm_runtime::DLDevice::CPU,
    )
    .unwrap();
    f("tvm.contrib.sort.sort")
        .call(&[
            (&x).into(),
            (&y).into(),
            ArgValue::Int(-1),
            ArgValue::Int(0),
        ])
        .unwrap();
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![3.0, 2.0, 1.0, 5.0, 1.0, 0.0]
    );
    let v = NDArray::empty(
        &[2, 2],
        DLDataType::new(2, 32, 1),
        tvm_runtime::DLDevice::CPU,
    )
    .unwrap();
    let i = NDArray::empty(
        &[2, 2],
        DLDataType::new(0, 64, 1),
        tvm_runtime::DLDevice::CPU,
    )
    .unwrap();
    f("tvm.contrib.sort.topk")
        .call(&[
            (&x).into(),
            (&v).into(),
            (&i).into(),
            ArgValue::Int(2),
            ArgValue::Int(1),
            ArgValue::Str(c"both"),
            ArgValue::Int(0),
        ])
        .unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), vec![3.0, 2.0, 5.0, 1.0]);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 2, 1, 0]);
    // Bad axis: an error, not a crash.
    let e = f("tvm.contrib.sort.argsort")
        .call(&[
            (&x).into(),
            (&idx).into(),
            ArgValue::Int(2),
            ArgValue::Int(1),
        ])
        .unwrap_err();
    assert!(
        e.message.contains("axis 2 is out of range"),
        "{}",
        e.message
    );
}

#[test]
fn reference_saved_executables_load_from_file_and_save_back_identically() {
    // Module.save output of executables built by the reference compiler (also the
    // relax fuzz target's seeds).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/relax");
    let load = tvm_runtime::Function::get_global("relax.ExecutableLoadFromFile").unwrap();
    let by_key =
        tvm_runtime::Function::get_global("runtime.module.loadfile_relax.VMExecutable").unwrap();
    for name in ["mlp", "dyn", "branch", "clo", "sorts"] {
        let p = dir.join(format!("{name}.bin"));
        let want = std::fs::read(&p).unwrap();
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        for f in [&load, &by_key] {
            let m =
                Module::from_object(f.call(&[ArgValue::Str(&c)]).unwrap().into_object().unwrap())
                    .unwrap();
            assert_eq!(m.node().save_to_binary().unwrap(), want, "{name}");
        }
        let m = Module::from_object(
            by_key
                .call(&[ArgValue::Str(&c)])
                .unwrap()
                .into_object()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(m.type_key(), "relax.VMExecutable");
        let stats = match m.function("stats").unwrap().call(&[]).unwrap() {
            RetValue::Str(s) => s,
            o => panic!("{o:?}"),
        };
        assert!(
            stats.starts_with("Relax VM executable statistics:\n  Constant pool (# "),
            "{stats}"
        );
    }
    let e = load
        .call(&[ArgValue::Str(c"/nonexistent/x.bin")])
        .unwrap_err();
    assert!(e.message.contains("/nonexistent/x.bin"), "{}", e.message);
}

#[test]
fn python_registered_set_operators_are_native() {
    let f = |n: &str| tvm_runtime::Function::get_global(n).unwrap();
    let x = NDArray::from_slice(&[3i32, 1, 3, 0, 1, 7], &[2, 3]).unwrap();
    let get = |r: RetValue| NDArray::from_object(r.into_object().unwrap()).unwrap();
    let u = get(f("relax.run.unique")
        .call(&[
            (&x).into(),
            ArgValue::Int(1),
            ArgValue::Int(0),
            ArgValue::Int(0),
            ArgValue::Int(0),
        ])
        .unwrap());
    assert_eq!(u.to_vec::<i32>().unwrap(), vec![0, 1, 3, 7]);
    // Unsorted: values at their first occurrences (0, 1, 3, 5), latest first.
    let u = get(f("relax.run.unique")
        .call(&[
            (&x).into(),
            ArgValue::Int(0),
            ArgValue::Int(0),
            ArgValue::Int(0),
            ArgValue::Int(0),
        ])
        .unwrap());
    assert_eq!(u.to_vec::<i32>().unwrap(), vec![7, 0, 1, 3]);
    let nz = get(f("relax.run.nonzero").call(&[(&x).into()]).unwrap());
    assert_eq!(nz.shape(), &[2, 5]);
    assert_eq!(
        nz.to_vec::<i64>().unwrap(),
        vec![0, 0, 0, 1, 1, 0, 1, 2, 1, 2]
    );
    let s = tvm_runtime::object::containers::ShapeTupleObj::new_ref(&[4, 5]);
    // SAFETY: `s` is alive for the call.
    let sarg =
        ArgValue::Object(unsafe { tvm_runtime::packed_func::value::ObjArg::new(s.as_ptr()) });
    let t = get(f("relax.run.shape_to_tensor").call(&[sarg]).unwrap());
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![4, 5]);
    let e = f("relax.run.assert_op")
        .call(&[ArgValue::Int(0), ArgValue::Str(c"bad {}"), ArgValue::Int(3)])
        .unwrap_err();
    assert!(e.message.contains("bad 3"), "{}", e.message);
}

/// A module whose `get_params` returns 40 (stands in for a parameter pack).
struct Params;

impl tvm_runtime::module::ModuleNode for Params {
    fn type_key(&self) -> &str {
        "params"
    }
    fn get_function(
        &self,
        name: &str,
        _this: Option<&tvm_runtime::object::ObjectRef>,
    ) -> tvm_runtime::Result<Option<tvm_runtime::Function>> {
        Ok((name == "get_params").then(|| {
            tvm_runtime::Function::from_rust(|_, rv| {
                *rv = RetValue::Int(40);
                Ok(())
            })
        }))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[test]
fn set_input_with_param_module_calls_get_params() {
    setup();
    let vm = vm_of(&program());
    let p = Module::new(Box::new(Params));
    let po = p.as_object().clone();
    // SAFETY: `po` is alive for the call.
    let parg =
        ArgValue::Object(unsafe { tvm_runtime::packed_func::value::ObjArg::new(po.as_ptr()) });
    call(
        &vm,
        "set_input_with_param_module",
        &[ArgValue::Str(c"main"), ArgValue::Int(1), parg],
    )
    .unwrap();
    call(&vm, "invoke_stateful", &[ArgValue::Str(c"main")]).unwrap();
    assert_eq!(
        call(&vm, "get_output", &[ArgValue::Str(c"main")])
            .unwrap()
            .as_i64()
            .unwrap(),
        42
    );
    let e = call(&vm, "invoke_stateful", &[ArgValue::Str(c"pick")]).unwrap_err();
    assert!(e.message.contains("set_input"), "{}", e.message);
}

/// `vm.builtin.tuple_reset_item` has TVM's semantics: `Array::Set` on the builtin's own
/// reference, which copies on write because the caller still holds the tuple, so the caller's
/// tuple keeps its item; a bad index is an error.
#[test]
fn tuple_reset_item_copies_on_write_like_tvm() {
    let f = |n: &str| tvm_runtime::Function::get_global(n).unwrap();
    let a = NDArray::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let b = NDArray::from_slice(&[3.0f32], &[1]).unwrap();
    let t = f("vm.builtin.make_tuple")
        .call(&[(&a).into(), (&b).into()])
        .unwrap()
        .into_object()
        .unwrap();
    // SAFETY: `t` outlives the calls that borrow it.
    let targ =
        || ArgValue::Object(unsafe { tvm_runtime::packed_func::value::ObjArg::new(t.as_ptr()) });
    f("vm.builtin.tuple_reset_item")
        .call(&[targ(), ArgValue::Int(0)])
        .unwrap();
    let item = |i: i64| {
        f("vm.builtin.tuple_getitem")
            .call(&[targ(), ArgValue::Int(i)])
            .unwrap()
            .into_object()
            .unwrap()
    };
    assert!(item(0).same_as(a.as_object()));
    assert!(item(1).same_as(b.as_object()));
    let err = f("vm.builtin.tuple_reset_item")
        .call(&[targ(), ArgValue::Int(2)])
        .unwrap_err();
    assert!(err.message.contains("tuple_reset_item"), "{}", err.message);
}
