//! The executable format (`relax.Executable` / `relax.VMExecutable`): parser and writer.
//!
//! `SaveToBinary` output is one length-prefixed byte string holding: `u64` magic, the version
//! string (`"0.14"`), the function table (`u64` count, then per function `i32 kind`, name,
//! `i64 start_instr, end_instr, num_args, register_file_size`, parameter names), the constant
//! pool (`u64` count, then per constant an `i32` tag and its payload), and the code section
//! (`instr_offset` and `instr_data`, each a `u64` count of `i64` words). Little-endian.
//! Everything is read with bounds checks and validated before a VM runs it.

use super::bytecode::{self, num, owned, push, Instr, Words};
use crate::executor::params::{read_arrays, save_ndarray, skip_ndarray, ByteSource};
use crate::module::blob::{copy_out, FileSpan};
use crate::module::SymbolMap;
use crate::ndarray::NDArray;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::DLDataType;

/// `kTVMVMBytecodeMagic`.
pub const MAGIC: u64 = 0xD225_DE2F_4214_151D;
/// The only format version there is (`RELAX_VM_VERSION`).
pub const VERSION: &str = "0.14";

/// What a function-table entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuncKind {
    /// A PackedFunc resolved at initialisation (kernels, builtins).
    PackedFunc,
    /// A function interpreted from bytecode.
    VmFunc,
    /// A function compiled to TIR (`__vmtir__<name>` in the kernel library).
    VmTirFunc,
}

impl FuncKind {
    fn from_i32(v: i32) -> Option<FuncKind> {
        Some(match v {
            0 => FuncKind::PackedFunc,
            1 => FuncKind::VmFunc,
            2 => FuncKind::VmTirFunc,
            _ => return None,
        })
    }

    fn as_i32(self) -> i32 {
        match self {
            FuncKind::PackedFunc => 0,
            FuncKind::VmFunc => 1,
            FuncKind::VmTirFunc => 2,
        }
    }
}

/// One entry of the function table (`VMFuncInfo`).
#[derive(Clone, Debug)]
pub struct FuncInfo {
    /// Kind.
    pub kind: FuncKind,
    /// Name.
    pub name: String,
    /// First instruction (VM functions).
    pub start_instr: i64,
    /// One past the last instruction (VM functions).
    pub end_instr: i64,
    /// Number of arguments (`-2` for packed functions).
    pub num_args: i64,
    /// Registers a frame needs.
    pub register_file_size: i64,
    /// Parameter names.
    pub param_names: Vec<String>,
}

/// One constant of the pool.
#[derive(Clone, Debug)]
pub enum Constant {
    /// A CPU array.
    NDArray(NDArray),
    /// A data type.
    DataType(DLDataType),
    /// A shape.
    Shape(Vec<i64>),
    /// A string (bytes, as stored).
    Str(Vec<u8>),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
}

/// A parsed, validated executable.
pub struct Executable {
    /// The function table.
    pub funcs: Vec<FuncInfo>,
    /// Function names to table indices.
    pub func_map: SymbolMap,
    /// The constant pool.
    pub constants: Vec<Constant>,
    /// Decoded instructions (one per `instr_offset` entry).
    pub(crate) code: Vec<Instr>,
    /// Call arguments of all decoded instructions.
    pub(crate) call_args: Vec<bytecode::PackedArg>,
    /// The code section's words as read, kept only where re-encoding `code` would not give
    /// them back (a layout no compiler writes); otherwise they are re-encoded when needed.
    raw_code: Option<Box<(Vec<i64>, Vec<i64>)>>,
}

/// Largest register number an instruction may name (guards against absurd values; a
/// function's register file is bounded by [`MAX_FRAME_REGISTERS`]).
pub const MAX_REGISTERS: i64 = 1 << 24;

/// Largest register file (and argument count) a VM function may declare: 2^18 registers,
/// about 6 MiB per frame. An executable that declares more is refused at load; the
/// frames running at once are bounded too
/// ([`MAX_STACK_REGISTERS`](super::interp::MAX_STACK_REGISTERS)). Compiled models use
/// at most a few thousand.
pub const MAX_FRAME_REGISTERS: i64 = 1 << 18;

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Where `data` lies in the library file, when it came from one (large constants are
    /// read from it).
    file: Option<FileSpan<'a>>,
    /// The error that stopped the parse: the first one only. The reads answer a zero, an
    /// empty value or `None` and leave their error here, so that each of the many reads of a
    /// load passes its value on, not an error, and the parse looks at this at a few points
    /// ([`Reader::check`]).
    err: Option<Error>,
}

impl<'a> Reader<'a> {
    /// Keeps `e` as the parse's error, unless an earlier one is kept; `None`, to return.
    #[cold]
    #[inline(never)]
    fn fail<T>(&mut self, e: Error) -> Option<T> {
        if self.err.is_none() {
            self.err = Some(e);
        }
        None
    }
    /// Keeps the error of a read past the end (unless an earlier one is kept).
    #[cold]
    #[inline(never)]
    fn bad(&mut self, section: &str, what: &str) {
        if self.err.is_none() {
            self.err = Some(Error::value_fmt(format_args!(
                "invalid Relax VM executable: the {section} section is truncated or corrupted \
                 (cannot read {what} at byte {} of {})",
                self.pos,
                self.data.len()
            )));
        }
    }
    /// `None` once a read has failed.
    fn check(&self) -> Option<()> {
        match self.err {
            Some(_) => None,
            None => Some(()),
        }
    }
    #[inline(never)]
    fn take(&mut self, n: usize, section: &str, what: &str) -> Option<&'a [u8]> {
        if n > self.data.len() - self.pos {
            self.bad(section, what);
            return None;
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }
    /// The next `n` bytes (at most 8) as a little-endian number (0 where they are missing).
    #[inline(never)]
    fn le(&mut self, n: usize, section: &str, what: &str) -> u64 {
        let b = self.take(n, section, what).unwrap_or_default();
        b.iter().rev().fold(0, |acc, &x| acc << 8 | u64::from(x))
    }
    fn u64(&mut self, section: &str, what: &str) -> u64 {
        self.le(8, section, what)
    }
    fn i64(&mut self, section: &str, what: &str) -> i64 {
        self.le(8, section, what) as i64
    }
    fn i32(&mut self, section: &str, what: &str) -> i32 {
        self.le(4, section, what) as u32 as i32
    }
    #[inline(never)]
    fn count(&mut self, elem: usize, section: &str, what: &str) -> usize {
        let n = self.u64(section, what);
        if n > ((self.data.len() - self.pos) / elem.max(1)) as u64 {
            self.bad(section, what);
            return 0;
        }
        n as usize
    }
    #[inline(never)]
    fn bytes(&mut self, section: &str, what: &str) -> &'a [u8] {
        let n = self.count(1, section, what);
        self.take(n, section, what).unwrap_or_default()
    }
    #[inline(never)]
    fn string(&mut self, section: &str, what: &str) -> String {
        let b = self.bytes(section, what);
        match std::str::from_utf8(b) {
            Ok(s) => owned(s),
            Err(_) => {
                self.fail::<()>(Error::value_fmt(format_args!(
                    "invalid Relax VM executable: {what} in the {section} section is not UTF-8"
                )));
                String::new()
            }
        }
    }
    fn words(&mut self, section: &str, what: &str) -> Words<'a> {
        let n = self.count(8, section, what);
        Words::new(self.take(n * 8, section, what).unwrap_or_default())
    }
    /// The error a read left, as a result.
    fn error<T>(&mut self) -> Result<T> {
        Err(self
            .err
            .take()
            .unwrap_or_else(|| Error::internal("the executable reader failed without an error")))
    }
}

impl ByteSource for Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        match Reader::take(self, n, "constant", what) {
            Some(s) => Ok(s),
            None => self.error(),
        }
    }
    unsafe fn take_into(&mut self, n: usize, dst: *mut u8, copy: usize, what: &str) -> Result<()> {
        let at = self.pos;
        let Some(src) = Reader::take(self, n, "constant", what) else {
            return self.error();
        };
        // SAFETY: forwarded contract.
        unsafe { copy_out(self.file, at, &src[..copy.min(n)], dst) };
        Ok(())
    }
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }
    fn position(&self) -> Option<usize> {
        Some(self.pos)
    }
    fn seek(&mut self, pos: usize) -> Result<()> {
        if pos > self.data.len() {
            return Err(Error::internal(
                "the executable reader cannot seek past its end",
            ));
        }
        self.pos = pos;
        Ok(())
    }
}

impl Executable {
    /// Parses `SaveToBinary` output (the outer length-prefixed string included).
    pub fn load(data: &[u8]) -> Result<Executable> {
        let mut r = Reader {
            data,
            pos: 0,
            file: None,
            err: None,
        };
        let body = r.bytes("header", "the executable length");
        match r.check() {
            Some(()) => Self::load_body(body),
            None => r.error(),
        }
    }

    /// Parses the executable's body (what sits inside the outer string), which must be
    /// consumed exactly.
    pub fn load_body(body: &[u8]) -> Result<Executable> {
        Self::load_body_in(body, None)
    }

    /// [`Executable::load_body`] for a body that also lies in a library file: large constants
    /// are read from the file.
    pub fn load_body_in(body: &[u8], file: Option<FileSpan<'_>>) -> Result<Executable> {
        let mut r = Reader {
            data: body,
            pos: 0,
            file,
            err: None,
        };
        match Self::parse(&mut r) {
            Some((funcs, constants, offsets, data)) => {
                Self::from_words(funcs, constants, offsets, data)
            }
            None => r.error(),
        }
    }

    /// The sections of an executable's body; `None` with the error left in the reader.
    #[allow(clippy::type_complexity)]
    #[inline(never)]
    fn parse<'a>(
        r: &mut Reader<'a>,
    ) -> Option<(Vec<FuncInfo>, Vec<Constant>, Words<'a>, Words<'a>)> {
        let body_len = r.data.len();
        if r.u64("header", "the magic number") != MAGIC {
            r.fail::<()>(Error::value_fmt(format_args!(
                "invalid Relax VM executable: bad magic number (expected {MAGIC:#018x})"
            )));
        }
        let version = r.bytes("header", "the version");
        if version != VERSION.as_bytes() {
            r.fail::<()>(Error::value_fmt(format_args!(
                "invalid Relax VM executable: version \"{}\" is not supported (expected \"{VERSION}\")",
                String::from_utf8_lossy(&version[..version.len().min(32)])
            )));
        }
        // Function table: each entry takes at least 4 + 8 + 4 * 8 + 8 bytes.
        let n = r.count(52, "global", "the number of functions");
        r.check()?;
        let mut funcs = Vec::with_capacity(n);
        for _ in 0..n {
            let kind_raw = r.i32("global", "a function kind");
            let kind = FuncKind::from_i32(kind_raw);
            if kind.is_none() {
                r.fail::<()>(Error::value_fmt(format_args!(
                    "invalid Relax VM executable: unknown function kind {kind_raw}"
                )));
            }
            let name = r.string("global", "a function name");
            let start_instr = r.i64("global", "start_instr");
            let end_instr = r.i64("global", "end_instr");
            let num_args = r.i64("global", "num_args");
            let register_file_size = r.i64("global", "register_file_size");
            let np = r.count(8, "global", "the number of parameter names");
            let mut param_names = Vec::with_capacity(np);
            for _ in 0..np {
                param_names.push(r.string("global", "a parameter name"));
            }
            r.check()?;
            funcs.push(FuncInfo {
                kind: kind?,
                name,
                start_instr,
                end_instr,
                num_args,
                register_file_size,
                param_names,
            });
        }
        let nc = r.count(4, "constant", "the number of constants");
        let mut constants = Vec::with_capacity(nc);
        // Arrays are read after the section: their headers first, so that they can share
        // one allocation (see `params::read_arrays`).
        let mut arrays = Vec::new();
        for i in 0..nc {
            let tag = r.i32("constant", "a constant tag");
            // Before an array is skipped: its reads report their errors themselves.
            r.check()?;
            let c = match tag {
                0 => {
                    let pending = match skip_ndarray(r) {
                        Ok(Some(p)) => p,
                        Ok(None) => {
                            return r.fail(Error::internal("the executable reader cannot seek"))
                        }
                        Err(e) => {
                            return r.fail(e.context(format_args!(
                                "invalid Relax VM executable: constant {i}"
                            )))
                        }
                    };
                    arrays.push((i, pending));
                    // Replaced by the array below.
                    Constant::Int(0)
                }
                1 => {
                    let b = r.le(4, "constant", "a data type");
                    Constant::DataType(DLDataType::new(b as u8, (b >> 8) as u8, (b >> 16) as u16))
                }
                2 => Constant::Shape(r.words("constant", "a shape").to_vec()),
                3 => Constant::Str(r.bytes("constant", "a string").to_vec()),
                4 => Constant::Int(r.i64("constant", "an integer")),
                5 => Constant::Float(f64::from_bits(r.u64("constant", "a float"))),
                t => {
                    return r.fail(Error::value_fmt(format_args!(
                        "invalid Relax VM executable: constant {i} has unknown type tag {t}"
                    )))
                }
            };
            constants.push(c);
        }
        r.check()?;
        let mut index = Vec::with_capacity(arrays.len());
        let mut pending = Vec::with_capacity(arrays.len());
        for (i, p) in arrays {
            index.push(i);
            pending.push(p);
        }
        let loaded = match read_arrays(r, &pending) {
            Ok(l) => l,
            Err(e) => return r.fail(e.context("invalid Relax VM executable: a constant array")),
        };
        for (i, a) in index.into_iter().zip(loaded) {
            if let Some(c) = constants.get_mut(i) {
                *c = Constant::NDArray(a);
            }
        }
        let instr_offset = r.words("code", "the instruction offsets");
        let instr_data = r.words("code", "the instruction data");
        if r.pos != body_len {
            r.fail::<()>(Error::value_fmt(format_args!(
                "invalid Relax VM executable: {} unexpected bytes after the code section",
                body_len - r.pos
            )));
        }
        r.check()?;
        Some((funcs, constants, instr_offset, instr_data))
    }

    /// Builds and validates an executable from its sections.
    pub fn from_parts(
        funcs: Vec<FuncInfo>,
        constants: Vec<Constant>,
        instr_offset: Vec<i64>,
        instr_data: Vec<i64>,
    ) -> Result<Executable> {
        let (o, d) = (
            bytecode::words_to_bytes(&instr_offset),
            bytecode::words_to_bytes(&instr_data),
        );
        Self::from_words(funcs, constants, Words::new(&o), Words::new(&d))
    }

    /// Builds and validates an executable from its sections, the code as stored.
    #[inline(never)]
    fn from_words(
        funcs: Vec<FuncInfo>,
        constants: Vec<Constant>,
        instr_offset: Words<'_>,
        instr_data: Words<'_>,
    ) -> Result<Executable> {
        let mut func_map = SymbolMap::with_capacity_and_hasher(funcs.len(), Default::default());
        for (i, f) in funcs.iter().enumerate() {
            func_map.insert(f.name.clone(), i);
        }
        let d = bytecode::decode(instr_offset, instr_data)?;
        let raw_code =
            (!d.canonical).then(|| Box::new((instr_offset.to_vec(), instr_data.to_vec())));
        let exec = Executable {
            funcs,
            func_map,
            constants,
            code: d.code,
            call_args: d.args,
            raw_code,
        };
        bytecode::validate(&exec)?;
        Ok(exec)
    }

    /// The code section as stored: the start word of each instruction (`instr_offset`) and
    /// the instruction words (`instr_data`).
    pub fn code_words(&self) -> (Vec<i64>, Vec<i64>) {
        match &self.raw_code {
            Some(raw) => raw.as_ref().clone(),
            None => bytecode::encode(self),
        }
    }

    /// The decoded instruction at `pc`.
    pub fn instr(&self, pc: usize) -> Option<Instr> {
        self.code.get(pc).copied()
    }

    /// The arguments of a call instruction of this executable (none for the others).
    #[inline]
    pub fn args_of(&self, ins: &Instr) -> &[bytecode::PackedArg] {
        match *ins {
            Instr::Call {
                args_begin, nargs, ..
            } => self
                .call_args
                .get(args_begin as usize..(args_begin + nargs) as usize)
                .unwrap_or_default(),
            _ => &[],
        }
    }

    /// `SaveToBinary`: the executable in the reference's format, byte for byte.
    pub fn save(&self) -> Result<Vec<u8>> {
        // The body after its length, filled in last.
        let mut out = vec![0u8; 8];
        self.save_body(&mut out)?;
        let n = (out.len() - 8) as u64;
        for (d, b) in out.iter_mut().zip(n.to_le_bytes()) {
            *d = b;
        }
        Ok(out)
    }

    fn save_body(&self, out: &mut Vec<u8>) -> Result<()> {
        // Out of line: one copy of the vector's append for the many fields.
        #[inline(never)]
        fn put(out: &mut Vec<u8>, b: &[u8]) {
            out.extend_from_slice(b);
        }
        #[inline(never)]
        fn w64(out: &mut Vec<u8>, w: u64) {
            put(out, &w.to_le_bytes());
        }
        #[inline(never)]
        fn w32(out: &mut Vec<u8>, w: i32) {
            put(out, &w.to_le_bytes());
        }
        fn s(out: &mut Vec<u8>, b: &[u8]) {
            w64(out, b.len() as u64);
            put(out, b);
        }
        fn v(out: &mut Vec<u8>, words: &[i64]) {
            w64(out, words.len() as u64);
            for &w in words {
                w64(out, w as u64);
            }
        }
        w64(out, MAGIC);
        s(out, VERSION.as_bytes());
        w64(out, self.funcs.len() as u64);
        for f in &self.funcs {
            w32(out, f.kind.as_i32());
            s(out, f.name.as_bytes());
            for w in [f.start_instr, f.end_instr, f.num_args, f.register_file_size] {
                w64(out, w as u64);
            }
            w64(out, f.param_names.len() as u64);
            for p in &f.param_names {
                s(out, p.as_bytes());
            }
        }
        w64(out, self.constants.len() as u64);
        for c in &self.constants {
            match c {
                Constant::NDArray(a) => {
                    w32(out, 0);
                    save_ndarray(out, a)?;
                }
                Constant::DataType(t) => {
                    w32(out, 1);
                    let word =
                        u32::from(t.code) | u32::from(t.bits) << 8 | u32::from(t.lanes) << 16;
                    w32(out, word as i32);
                }
                Constant::Shape(d) => {
                    w32(out, 2);
                    v(out, d);
                }
                Constant::Str(b) => {
                    w32(out, 3);
                    s(out, b);
                }
                Constant::Int(i) => {
                    w32(out, 4);
                    w64(out, *i as u64);
                }
                Constant::Float(f) => {
                    w32(out, 5);
                    w64(out, f.to_bits());
                }
            }
        }
        // The words as read, or re-encoded (no copy of the kept ones).
        let encoded;
        let (instr_offset, instr_data) = match &self.raw_code {
            Some(raw) => (&raw.0, &raw.1),
            None => {
                encoded = bytecode::encode(self);
                (&encoded.0, &encoded.1)
            }
        };
        v(out, instr_offset);
        v(out, instr_data);
        Ok(())
    }

    /// The function-table index of a name.
    pub fn func_index(&self, name: &str) -> Option<usize> {
        self.func_map.get(name).copied()
    }

    /// `stats()`: constants and globals, as the reference prints them.
    pub fn stats(&self) -> String {
        let mut s = String::new();
        num(
            &mut s,
            "Relax VM executable statistics:\n  Constant pool (# ",
            self.constants.len() as i64,
            "): [",
        );
        for (k, c) in self.constants.iter().enumerate() {
            if k > 0 {
                push(&mut s, ", ");
            }
            match c {
                Constant::NDArray(a) if a.shape().is_empty() => push(&mut s, "scalar"),
                Constant::NDArray(a) => join_into(&mut s, "[", a.shape()),
                Constant::Shape(d) => join_into(&mut s, "shapetuple[", d),
                Constant::Str(b) => {
                    s.push('"');
                    push(&mut s, &String::from_utf8_lossy(b));
                    s.push('"');
                }
                Constant::Int(i) => num(&mut s, "", *i, ""),
                Constant::Float(f) => crate::packed_func::float_text::write_display(*f, &mut s),
                Constant::DataType(t) => {
                    push(&mut s, &crate::packed_func::dtype::dtype_to_string(*t))
                }
            }
        }
        num(&mut s, "]\n  Globals (#", self.funcs.len() as i64, "): [");
        for (k, f) in self.funcs.iter().enumerate() {
            if k > 0 {
                push(&mut s, ", ");
            }
            push(&mut s, &f.name);
        }
        push(&mut s, "]\n");
        s
    }
}

/// Appends `open`, the numbers separated by ", ", and `]`.
fn join_into(s: &mut String, open: &str, v: &[i64]) {
    push(s, open);
    for (k, &d) in v.iter().enumerate() {
        num(s, if k > 0 { ", " } else { "" }, d, "");
    }
    s.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::blob::{BlobFile, BlobReader};

    /// `stats()` as first written (one string per constant, joined), the reference for
    /// [`Executable::stats`].
    fn old_stats(e: &Executable) -> String {
        fn join(v: &[i64]) -> String {
            v.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
        let mut items = Vec::new();
        for c in &e.constants {
            items.push(match c {
                Constant::NDArray(a) => {
                    if a.shape().is_empty() {
                        "scalar".to_string()
                    } else {
                        format!("[{}]", join(a.shape()))
                    }
                }
                Constant::Shape(d) => format!("shapetuple[{}]", join(d)),
                Constant::Str(b) => format!("\"{}\"", String::from_utf8_lossy(b)),
                Constant::Int(i) => i.to_string(),
                Constant::Float(f) => f.to_string(),
                Constant::DataType(t) => crate::packed_func::dtype::dtype_to_string(*t),
            });
        }
        let names: Vec<&str> = e.funcs.iter().map(|f| f.name.as_str()).collect();
        format!(
            "Relax VM executable statistics:\n  Constant pool (# {}): [{}]\n  Globals (#{}): [{}]\n",
            e.constants.len(),
            items.join(", "),
            e.funcs.len(),
            names.join(", ")
        )
    }

    #[test]
    fn stats_are_those_first_written() {
        let f = |name: &str| FuncInfo {
            kind: FuncKind::PackedFunc,
            name: name.into(),
            start_instr: 0,
            end_instr: 0,
            num_args: -2,
            register_file_size: 0,
            param_names: vec![],
        };
        let scalar = NDArray::from_slice(&[1.5f32], &[]).unwrap();
        let arr = NDArray::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
        let consts = vec![
            Constant::NDArray(scalar),
            Constant::NDArray(arr),
            Constant::Shape(vec![]),
            Constant::Shape(vec![1, -2, 3]),
            Constant::Str(b"a \"b\" \xff".to_vec()),
            Constant::Int(-7),
            Constant::Float(0.1),
            Constant::Float(1e300),
            Constant::Float(f64::NAN),
            Constant::DataType(DLDataType::new(2, 32, 1)),
        ];
        for (funcs, consts) in [
            (vec![], vec![]),
            (vec![f("main"), f("vm.builtin.alloc_storage")], consts),
        ] {
            let e = Executable::from_parts(funcs, consts, vec![], vec![]).unwrap();
            assert_eq!(e.stats(), old_stats(&e));
        }
    }

    #[test]
    fn large_constants_of_an_executable_in_a_library_file_are_read_from_it() {
        let n = 20_000usize; // 80,000 bytes: above the file-read threshold
        let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let big = NDArray::from_slice(&values, &[n as i64]).unwrap();
        let small = NDArray::from_slice(&[-1.5f32, -2.5], &[2]).unwrap();
        let exec = Executable::from_parts(
            vec![],
            vec![Constant::NDArray(big), Constant::NDArray(small)],
            vec![],
            vec![],
        )
        .unwrap();
        let blob = exec.save().unwrap();
        // The file holds the blob after 100 bytes of something else, with the first byte of
        // each array's data changed, so that a read from the file can be told from a copy.
        let mut file_bytes = vec![0xEEu8; 100];
        file_bytes.extend_from_slice(&blob);
        let find = |a: f32, b: f32| {
            let pat = [a.to_le_bytes(), b.to_le_bytes()].concat();
            100 + blob.windows(8).position(|w| w == pat).unwrap()
        };
        let (big_at, small_at) = (find(0.0, 1.0), find(-1.5, -2.5));
        file_bytes[big_at] ^= 0x01;
        file_bytes[small_at] ^= 0x01;
        let dir = std::env::temp_dir().join(format!("tvmrt_exec_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lib.bin");
        std::fs::write(&path, &file_bytes).unwrap();
        let first_words = |file: Option<BlobFile>| {
            let mut r = BlobReader::new(&blob, "t");
            if let Some(f) = file {
                r = r.with_file(f);
            }
            let (body, span) = r.read_blob_span("the executable").unwrap();
            let e = Executable::load_body_in(body, span).unwrap();
            let first = |c: &Constant| match c {
                Constant::NDArray(a) => a.to_vec::<f32>().unwrap()[0].to_bits(),
                _ => unreachable!(),
            };
            (first(&e.constants[0]), first(&e.constants[1]))
        };
        let open = || BlobFile::new(std::fs::File::open(&path).unwrap(), 100);
        // The large array from the file (its changed byte shows), the small one from the blob.
        let small = (-1.5f32).to_bits();
        assert_eq!(first_words(Some(open())), (1, small));
        // Without a file, both from the blob.
        assert_eq!(first_words(None), (0, small));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn ret_main(end_instr: i64, offsets: Vec<i64>, data: Vec<i64>) -> Executable {
        let main = FuncInfo {
            kind: FuncKind::VmFunc,
            name: "main".into(),
            start_instr: 0,
            end_instr,
            num_args: 1,
            register_file_size: 1,
            param_names: vec!["x".into()],
        };
        Executable::from_parts(vec![main], vec![], offsets, data).unwrap()
    }

    #[test]
    fn code_is_re_encoded_when_saved_and_kept_as_read_where_that_would_differ() {
        // What a compiler writes (goto +2; %0 = main(-5, %0); ret %0): nothing is kept, the
        // words come back from the decoded code.
        let imm = |v: i64| 1 << 56 | (v & ((1 << 56) - 1));
        let offsets = vec![0, 2, 8];
        let data = vec![3, 2, 1, 0, 0, 2, imm(-5), 0, 2, 0];
        let e = ret_main(3, offsets.clone(), data.clone());
        assert!(e.raw_code.is_none());
        assert_eq!(e.code_words(), (offsets, data));
        // Layouts no compiler writes: a word before the first instruction, two instructions
        // on the same words, a word after the last. Saved back word for word.
        for (end, offsets, data) in [
            (1, vec![1], vec![77, 2, 0]),
            (2, vec![0, 0], vec![2, 0]),
            (1, vec![0], vec![2, 0, 77]),
        ] {
            let e = ret_main(end, offsets.clone(), data.clone());
            assert!(e.raw_code.is_some());
            assert_eq!(e.code_words(), (offsets.clone(), data.clone()));
            let again = Executable::load(&e.save().unwrap()).unwrap();
            assert_eq!(again.code_words(), (offsets, data));
            assert_eq!(again.save().unwrap(), e.save().unwrap());
        }
        // Calls that share their argument words: refused before anything is allocated for
        // them (10,000 offsets onto one call of 10,000 arguments would be 10^8 arguments).
        let mut data = vec![1, 0, 0, 10_000];
        data.extend(std::iter::repeat_n(0, 10_000));
        let main = FuncInfo {
            kind: FuncKind::VmFunc,
            name: "main".into(),
            start_instr: 0,
            end_instr: 10_000,
            num_args: 1,
            register_file_size: 1,
            param_names: vec!["x".into()],
        };
        let e = Executable::from_parts(vec![main], vec![], vec![0; 10_000], data)
            .err()
            .unwrap();
        assert!(
            e.message
                .contains("100000000 arguments in all, more than the 10004 words"),
            "{}",
            e.message
        );
    }

    #[test]
    fn large_constant_arrays_share_one_block_and_keep_their_values() {
        // Three arrays, 3 MiB and more together: one block, each array 64-byte aligned in it.
        let a: Vec<f32> = (0..400_000).map(|i| i as f32).collect();
        let b: Vec<i32> = (0..300_001).map(|i| -i).collect();
        let c = [7u8, 8, 9];
        let exec = Executable::from_parts(
            vec![],
            vec![
                Constant::NDArray(NDArray::from_slice(&a, &[400_000]).unwrap()),
                Constant::Int(5),
                Constant::NDArray(NDArray::from_slice(&b, &[300_001]).unwrap()),
                Constant::NDArray(NDArray::from_slice(&c, &[3]).unwrap()),
            ],
            vec![],
            vec![],
        )
        .unwrap();
        let back = Executable::load(&exec.save().unwrap()).unwrap();
        let arr = |i: usize| match &back.constants[i] {
            Constant::NDArray(x) => x.clone(),
            _ => panic!("constant {i} is not an array"),
        };
        assert_eq!(arr(0).to_vec::<f32>().unwrap(), a);
        assert_eq!(arr(2).to_vec::<i32>().unwrap(), b);
        assert_eq!(arr(3).to_vec::<u8>().unwrap(), c);
        assert!(matches!(back.constants[1], Constant::Int(5)));
        let data = |i: usize| arr(i).dltensor().data as usize;
        assert_eq!(data(2) - data(0), 1_600_000);
        assert_eq!(data(3) - data(2), 1_200_064);
        assert!((0..4).filter(|&i| i != 1).all(|i| data(i) % 64 == 0));
        // Saved again, byte for byte.
        assert_eq!(back.save().unwrap(), exec.save().unwrap());
        // The arrays keep their block alive after the executable is gone.
        let kept = arr(2);
        drop(back);
        assert_eq!(kept.to_vec::<i32>().unwrap(), b);
    }
}
