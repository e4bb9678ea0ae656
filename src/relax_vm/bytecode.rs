//! Bytecode: instruction decoding and validation, and the two disassemblies (`as_text`,
//! `as_python`).
//!
//! Words are `i64`. `Call: [1, dst, func_idx, nargs, args...]`, `Ret: [2, reg]`,
//! `Goto: [3, pc_offset]`, `If: [4, cond_reg, false_offset]`. Call arguments carry their kind
//! in the top 8 bits (0 register, 1 immediate, 2 constant index, 3 function index) and a
//! sign-extended 56-bit value below. Registers at or above `1 << 54` are special: the void
//! register (reads as null, writes are dropped) and the VM context register.

use super::exec::{Executable, FuncKind, MAX_FRAME_REGISTERS, MAX_REGISTERS};
use crate::packed_func::error::{Error, Result};

/// Appends formatted text (one out-of-line call per site, no intermediate string).
macro_rules! put {
    ($os:expr, $($t:tt)*) => {
        let _ = std::fmt::Write::write_fmt($os, format_args!($($t)*));
    };
}

/// First special register.
pub const BEGIN_SPECIAL_REG: i64 = 1 << 54;
/// The void register.
pub const VOID_REG: i64 = 1 << 54;
/// The VM context register.
pub const VM_REG: i64 = (1 << 54) + 1;

/// A register operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// A register of the frame.
    R(u32),
    /// The void register.
    Void,
    /// The VM context register.
    Vm,
}

/// A call argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A register.
    Reg(Reg),
    /// An immediate integer.
    Imm(i64),
    /// A constant-pool index.
    Const(u32),
    /// A function-table index.
    Func(u32),
}

/// A call argument as the interpreter keeps it: one word, the kind in the low three bits and
/// the value above them ([`PackedArg::get`] gives the [`Arg`]). Half the size of an `Arg`, so
/// that an executable's argument list takes fewer fresh pages when it is loaded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PackedArg(i64);

impl PackedArg {
    /// Packs an argument (immediates are 56-bit values, so three more bits fit).
    pub fn new(a: Arg) -> PackedArg {
        let (value, kind) = match a {
            Arg::Reg(Reg::R(i)) => (i as i64, 0),
            Arg::Reg(Reg::Void) => (0, 1),
            Arg::Reg(Reg::Vm) => (0, 2),
            Arg::Imm(v) => (v, 3),
            Arg::Const(c) => (c as i64, 4),
            Arg::Func(g) => (g as i64, 5),
        };
        PackedArg(value << 3 | kind)
    }
    /// The argument.
    #[inline(always)]
    pub fn get(self) -> Arg {
        let v = self.0 >> 3;
        match self.0 & 7 {
            0 => Arg::Reg(Reg::R(v as u32)),
            1 => Arg::Reg(Reg::Void),
            2 => Arg::Reg(Reg::Vm),
            3 => Arg::Imm(v),
            4 => Arg::Const(v as u32),
            _ => Arg::Func(v as u32),
        }
    }
}

impl std::fmt::Debug for PackedArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// A decoded instruction.
#[derive(Clone, Copy, Debug)]
pub enum Instr {
    /// Calls `func` with `call_args[args_begin..args_begin + nargs]`, result into `dst`.
    Call {
        /// Destination register.
        dst: Reg,
        /// Function-table index.
        func: u32,
        /// First argument in the executable's argument list.
        args_begin: u32,
        /// Number of arguments.
        nargs: u32,
    },
    /// Returns a register.
    Ret(Reg),
    /// Jumps by an offset.
    Goto(i64),
    /// Continues when the register is non-zero, else jumps by the offset.
    If(Reg, i64),
}

#[cold]
#[inline(never)]
fn bad(msg: std::fmt::Arguments<'_>) -> Error {
    Error::value_fmt(format_args!("invalid Relax VM executable: {msg}"))
}

#[cold]
#[inline(never)]
fn bad_reg(at: usize, r: i64) -> Error {
    bad(format_args!("instruction {at}: invalid register {r}"))
}

#[cold]
#[inline(never)]
fn runs_past_end(i: usize, off: i64, words: usize) -> Error {
    bad(format_args!(
        "instruction {i} at word {off} runs past the end of the code ({words} words)"
    ))
}

#[inline]
fn reg(raw: i64, at: usize) -> Result<Reg> {
    match raw {
        VOID_REG => Ok(Reg::Void),
        VM_REG => Ok(Reg::Vm),
        r if (0..MAX_REGISTERS).contains(&r) => Ok(Reg::R(r as u32)),
        r => Err(bad_reg(at, r)),
    }
}

/// One call argument word: its kind in the top 8 bits, a sign-extended 56-bit value below.
#[inline]
fn decode_arg(w: i64, at: usize, k: usize) -> Result<Arg> {
    let value = (w << 8) >> 8;
    Ok(match (w as u64) >> 56 {
        0 => Arg::Reg(reg(value, at)?),
        1 => Arg::Imm(value),
        kind @ (2 | 3) => {
            let Ok(v) = u32::try_from(value) else {
                return Err(bad(format_args!(
                    "instruction {at}: argument {k} index {value} is out of range"
                )));
            };
            if kind == 2 {
                Arg::Const(v)
            } else {
                Arg::Func(v)
            }
        }
        k2 => {
            return Err(bad(format_args!(
                "instruction {at}: argument {k} has unknown kind {k2}"
            )))
        }
    })
}

/// A run of little-endian `i64` words, as the code section stores them.
#[derive(Clone, Copy, Debug)]
pub struct Words<'a>(&'a [u8]);

impl<'a> Words<'a> {
    /// The words of `bytes`; a trailing partial word is ignored.
    pub fn new(bytes: &'a [u8]) -> Self {
        Words(&bytes[..bytes.len() - bytes.len() % 8])
    }
    /// The number of words.
    pub fn len(&self) -> usize {
        self.0.len() / 8
    }
    /// Whether there are no words.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Word `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<i64> {
        if i >= self.len() {
            return None;
        }
        // SAFETY: `i < len()`, so bytes `8 * i .. 8 * i + 8` lie in the slice (whose length
        // is a multiple of 8); an unaligned read of them.
        let b = unsafe {
            self.0
                .as_ptr()
                .add(8 * i)
                .cast::<[u8; 8]>()
                .read_unaligned()
        };
        Some(i64::from_le_bytes(b))
    }
    /// All words.
    pub fn iter(self) -> impl Iterator<Item = i64> + 'a {
        (0..self.len()).filter_map(move |i| self.get(i))
    }
    /// All words, in a vector (a plain loop into an exact allocation).
    #[inline(never)]
    pub fn to_vec(self) -> Vec<i64> {
        let mut v = Vec::with_capacity(self.len());
        for c in self.0.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            v.push(i64::from_le_bytes(b));
        }
        v
    }
}

/// Little-endian bytes of words (for [`Words`] over words held in memory).
pub fn words_to_bytes(words: &[i64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The decoded code section.
pub struct Decoded {
    /// One instruction per offset.
    pub code: Vec<Instr>,
    /// The call arguments of all instructions, in order.
    pub args: Vec<PackedArg>,
    /// Whether the words are exactly what [`encode`] makes of `code` and `args`: each
    /// instruction right after the previous one, none overlapping, no word left over (what a
    /// compiler writes).
    pub canonical: bool,
}

/// Decodes every instruction (structure only; indices are checked by [`validate`]).
#[inline(never)]
pub fn decode(offsets: Words<'_>, data: Words<'_>) -> Result<Decoded> {
    let n = offsets.len();
    // The argument list is sized exactly first (one fresh heap page costs more than the pass).
    let nargs_total = offsets
        .iter()
        .filter_map(|off| {
            let o = usize::try_from(off).ok()?;
            (data.get(o)? == 1).then(|| data.get(o.checked_add(3)?))?
        })
        .filter(|&k| (0..=data.len() as i64).contains(&k))
        .fold(0usize, |acc, k| acc.saturating_add(k as usize));
    // Each argument has a word of its own unless calls overlap, which no compiler writes and
    // which could otherwise make a small executable decode into billions of arguments.
    if nargs_total > data.len() {
        return Err(bad(format_args!(
            "the calls have {nargs_total} arguments in all, more than the {} words of the \
             code (instructions overlap)",
            data.len()
        )));
    }
    let mut code = Vec::with_capacity(n);
    let mut args = Vec::with_capacity(nargs_total);
    let mut next = 0i64;
    let mut canonical = true;
    for (i, off) in offsets.iter().enumerate() {
        let past_end = || runs_past_end(i, off, data.len());
        // The instruction's words: from its offset to the end of the code.
        let start = usize::try_from(off)
            .ok()
            .filter(|&o| o < data.len())
            .ok_or_else(past_end)?;
        let field = |k: usize| data.get(start + k).ok_or_else(past_end);
        let (ins, len) = match field(0)? {
            1 => {
                let dst = reg(field(1)?, i)?;
                let func = field(2)?;
                let nargs = field(3)?;
                let Ok(func) = u32::try_from(func) else {
                    return Err(bad(format_args!(
                        "instruction {i}: function index {func} is out of range"
                    )));
                };
                if nargs < 0 || nargs > data.len() as i64 {
                    return Err(bad(format_args!(
                        "instruction {i}: invalid argument count {nargs}"
                    )));
                }
                let nargs = nargs as usize;
                if start + 4 + nargs > data.len() {
                    return Err(past_end());
                }
                let begin = args.len();
                for k in 0..nargs {
                    args.push(PackedArg::new(decode_arg(field(4 + k)?, i, k)?));
                }
                if args.len() > u32::MAX as usize {
                    return Err(bad(format_args!("too many call arguments")));
                }
                let ins = Instr::Call {
                    dst,
                    func,
                    args_begin: begin as u32,
                    nargs: nargs as u32,
                };
                (ins, 4 + nargs as i64)
            }
            2 => (Instr::Ret(reg(field(1)?, i)?), 2),
            3 => (Instr::Goto(field(1)?), 2),
            4 => (Instr::If(reg(field(1)?, i)?, field(2)?), 3),
            op => return Err(bad(format_args!("instruction {i}: unknown opcode {op}"))),
        };
        canonical &= off == next;
        next = off + len;
        code.push(ins);
    }
    canonical &= next == data.len() as i64;
    Ok(Decoded {
        code,
        args,
        canonical,
    })
}

fn arg_raw(a: Arg) -> i64 {
    const LOW56: i64 = (1 << 56) - 1;
    let (kind, value) = match a {
        Arg::Reg(r) => (0i64, reg_raw(r)),
        Arg::Imm(v) => (1, v),
        Arg::Const(c) => (2, c as i64),
        Arg::Func(g) => (3, g as i64),
    };
    (kind << 56) | (value & LOW56)
}

/// The code section's words (`instr_offset`, `instr_data`) for decoded instructions: the
/// inverse of [`decode`] where it found the layout canonical.
pub fn encode(exec: &Executable) -> (Vec<i64>, Vec<i64>) {
    let mut offsets = Vec::with_capacity(exec.code.len());
    let mut data = Vec::with_capacity(4 * exec.code.len() + exec.call_args.len());
    for ins in &exec.code {
        offsets.push(data.len() as i64);
        match *ins {
            Instr::Call {
                dst, func, nargs, ..
            } => {
                data.extend_from_slice(&[1, reg_raw(dst), func as i64, nargs as i64]);
                data.extend(exec.args_of(ins).iter().map(|a| arg_raw(a.get())));
            }
            Instr::Ret(r) => data.extend_from_slice(&[2, reg_raw(r)]),
            Instr::Goto(off) => data.extend_from_slice(&[3, off]),
            Instr::If(c, off) => data.extend_from_slice(&[4, reg_raw(c), off]),
        }
    }
    (offsets, data)
}

/// Checks every VM function: its instruction range, the registers, constant and function
/// indices its instructions use, and that jumps stay inside it.
#[inline(never)]
pub fn validate(exec: &Executable) -> Result<()> {
    let n_instr = exec.code.len() as i64;
    let nconst = exec.constants.len() as u64;
    let nfunc = exec.funcs.len() as u64;
    for f in &exec.funcs {
        if f.kind == FuncKind::PackedFunc {
            continue;
        }
        let ctx = |m: std::fmt::Arguments<'_>| bad(format_args!("function {}: {m}", f.name));
        if f.num_args < 0 || f.num_args > MAX_FRAME_REGISTERS {
            return Err(ctx(format_args!(
                "invalid argument count {} (at most {MAX_FRAME_REGISTERS})",
                f.num_args
            )));
        }
        if f.register_file_size < 0 || f.register_file_size > MAX_FRAME_REGISTERS {
            return Err(ctx(format_args!(
                "invalid register file size {}: the per-frame register budget is \
                 {MAX_FRAME_REGISTERS}",
                f.register_file_size
            )));
        }
        if f.kind == FuncKind::VmTirFunc {
            continue;
        }
        if !(0 <= f.start_instr && f.start_instr < f.end_instr && f.end_instr <= n_instr) {
            return Err(ctx(format_args!(
                "instruction range [{}, {}) is outside the {n_instr} instructions",
                f.start_instr, f.end_instr
            )));
        }
        let nreg = f.register_file_size.max(f.num_args) as u64;
        let check_reg = |r: Reg, pc: i64| -> Result<()> {
            match r {
                Reg::R(i) if i as u64 >= nreg => Err(ctx(format_args!(
                    "instruction {pc}: register %{i} is outside the register file of {nreg}"
                ))),
                _ => Ok(()),
            }
        };
        for pc in f.start_instr..f.end_instr {
            let in_fn = |t: i64| f.start_instr <= t && t < f.end_instr;
            let ins = &exec.code[pc as usize];
            match *ins {
                Instr::Call { dst, func, .. } => {
                    check_reg(dst, pc)?;
                    if func as u64 >= nfunc {
                        return Err(ctx(format_args!(
                            "instruction {pc}: function index {func} is out of range ({nfunc} functions)"
                        )));
                    }
                    for arg in exec.args_of(ins) {
                        match arg.get() {
                            Arg::Reg(r) => check_reg(r, pc)?,
                            Arg::Const(c) if c as u64 >= nconst => {
                                return Err(ctx(format_args!(
                                    "instruction {pc}: constant index {c} is out of range ({nconst} constants)"
                                )))
                            }
                            Arg::Func(g) if g as u64 >= nfunc => {
                                return Err(ctx(format_args!(
                                    "instruction {pc}: function index {g} is out of range ({nfunc} functions)"
                                )))
                            }
                            _ => {}
                        }
                    }
                }
                Instr::Ret(r) => check_reg(r, pc)?,
                Instr::Goto(off) => {
                    if off == 0 || !pc.checked_add(off).is_some_and(in_fn) {
                        return Err(ctx(format_args!(
                            "instruction {pc}: goto {off} jumps outside the function"
                        )));
                    }
                }
                Instr::If(c, off) => {
                    check_reg(c, pc)?;
                    if off <= 1 || !pc.checked_add(off).is_some_and(in_fn) || !in_fn(pc + 1) {
                        return Err(ctx(format_args!(
                            "instruction {pc}: if with false offset {off} jumps outside the function"
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The shared out-of-line string helpers, used all over this room.
pub(crate) use crate::packed_func::text::{owned, push};

/// Appends `pre`, `v` in decimal and `post` (the disassemblies' and `stats`' one formatting
/// site for integers).
#[inline(never)]
pub(crate) fn num(os: &mut String, pre: &str, v: i64, post: &str) {
    push(os, pre);
    put!(os, "{v}");
    push(os, post);
}

fn reg_text(os: &mut String, r: Reg) {
    match r {
        Reg::R(i) => num(os, "%", i as i64, ""),
        Reg::Void => push(os, "%void"),
        Reg::Vm => push(os, "%vm"),
    }
}

fn reg_raw(r: Reg) -> i64 {
    match r {
        Reg::R(i) => i as i64,
        Reg::Void => VOID_REG,
        Reg::Vm => VM_REG,
    }
}

/// The instructions of function `f` (none where its range is not in the code).
fn code_of<'a>(exec: &'a Executable, f: &super::exec::FuncInfo) -> &'a [Instr] {
    exec.code
        .get(f.start_instr as usize..f.end_instr as usize)
        .unwrap_or_default()
}

/// `as_text()`: the reference's readable disassembly.
pub fn as_text(exec: &Executable) -> String {
    let name = |os: &mut String, i: u32| match exec.funcs.get(i as usize) {
        Some(f) => push(os, &f.name),
        None => num(os, "unknown_func_index(", i as i64, ")"),
    };
    let mut os = String::new();
    let mut args = String::new();
    let mut callee = String::new();
    for f in &exec.funcs {
        push(&mut os, "@");
        push(&mut os, &f.name);
        match f.kind {
            FuncKind::PackedFunc => {
                push(&mut os, " packed_func;\n\n");
                continue;
            }
            FuncKind::VmTirFunc => {
                num(&mut os, " num_inputs=", f.num_args, " vm_tir_func;\n\n");
                continue;
            }
            FuncKind::VmFunc => {}
        }
        push(&mut os, ":\n");
        for ins in code_of(exec, f) {
            push(&mut os, "  ");
            match *ins {
                Instr::Call { dst, func, .. } => {
                    args.clear();
                    for (k, a) in exec.args_of(ins).iter().enumerate() {
                        if k > 0 {
                            push(&mut args, ", ");
                        }
                        match a.get() {
                            Arg::Reg(r) => reg_text(&mut args, r),
                            Arg::Imm(v) => num(&mut args, "i", v, ""),
                            Arg::Const(c) => num(&mut args, "c[", c as i64, "]"),
                            Arg::Func(g) => {
                                push(&mut args, "f[");
                                name(&mut args, g);
                                push(&mut args, "]");
                            }
                        }
                    }
                    callee.clear();
                    name(&mut callee, func);
                    put!(&mut os, "call  {callee:<16} in: {args:<12} dst: ");
                    reg_text(&mut os, dst);
                }
                Instr::Ret(r) => {
                    push(&mut os, "ret   ");
                    reg_text(&mut os, r);
                }
                Instr::Goto(off) => num(&mut os, "goto  ", off, ""),
                Instr::If(c, off) => {
                    push(&mut os, "If    ");
                    reg_text(&mut os, c);
                    num(&mut os, ", ", off, "");
                }
            }
            push(&mut os, "\n");
        }
        push(&mut os, "\n");
    }
    os
}

/// `as_python()`: the disassembly as calls of TVM's Python `rx.Builder`.
pub fn as_python(exec: &Executable) -> String {
    let name = |os: &mut String, i: u32| match exec.funcs.get(i as usize) {
        Some(f) => {
            push(os, "\"");
            push(os, &f.name);
            push(os, "\"");
        }
        None => num(os, "ib.unknown_func_index(", i as i64, ")"),
    };
    let mut os = owned("ib = rx.Builder()\n");
    for f in exec.funcs.iter().filter(|f| f.kind == FuncKind::VmFunc) {
        push(&mut os, "with ib.function(\"");
        push(&mut os, &f.name);
        num(&mut os, "\", num_inputs=", f.num_args, "):\n");
        for ins in code_of(exec, f) {
            match *ins {
                Instr::Call { dst, func, .. } => {
                    push(&mut os, "    ib.emit_call(");
                    name(&mut os, func);
                    push(&mut os, ", args=[");
                    for (k, a) in exec.args_of(ins).iter().enumerate() {
                        if k > 0 {
                            push(&mut os, ", ");
                        }
                        match a.get() {
                            Arg::Reg(Reg::Vm) => push(&mut os, "ib.r(vm)"),
                            Arg::Reg(r) => num(&mut os, "ib.r(", reg_raw(r), ")"),
                            Arg::Imm(v) => num(&mut os, "ib.imm(", v, ")"),
                            Arg::Const(c) => num(&mut os, "ib.c(", c as i64, ")"),
                            Arg::Func(g) => {
                                push(&mut os, "ib.f(");
                                name(&mut os, g);
                                push(&mut os, ")");
                            }
                        }
                    }
                    push(&mut os, "]");
                    if dst != Reg::Void {
                        num(&mut os, ", dst=ib.r(", reg_raw(dst), ")");
                    }
                    push(&mut os, ")\n");
                }
                Instr::Ret(r) => num(&mut os, "    ib.emit_ret(ib.r(", reg_raw(r), "))\n"),
                Instr::Goto(off) => num(&mut os, "    ib.emit_goto(", off, ")\n"),
                Instr::If(c, off) => {
                    num(&mut os, "    ib.emit_if(ib.r(", reg_raw(c), "), ");
                    num(&mut os, "", off, ")\n");
                }
            }
        }
    }
    os
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_arguments_give_back_every_argument_at_the_ends_of_its_range() {
        let max_imm = (1i64 << 55) - 1;
        let all = [
            Arg::Reg(Reg::R(0)),
            Arg::Reg(Reg::R(MAX_REGISTERS as u32 - 1)),
            Arg::Reg(Reg::Void),
            Arg::Reg(Reg::Vm),
            Arg::Imm(0),
            Arg::Imm(-1),
            Arg::Imm(max_imm),
            Arg::Imm(-max_imm - 1),
            Arg::Const(0),
            Arg::Const(u32::MAX),
            Arg::Func(0),
            Arg::Func(u32::MAX),
        ];
        for a in all {
            assert_eq!(PackedArg::new(a).get(), a);
            // And through the stored word, as decoding reads it.
            assert_eq!(decode_arg(arg_raw(a), 0, 0).unwrap(), a);
        }
        assert_eq!(std::mem::size_of::<PackedArg>(), 8);
    }

    // The disassemblies as first written (formatting each piece into a string of its own),
    // the reference for the ones above.
    fn old_reg_text(r: Reg) -> String {
        match r {
            Reg::R(i) => format!("%{i}"),
            Reg::Void => "%void".into(),
            Reg::Vm => "%vm".into(),
        }
    }

    /// `as_text()`: the reference's readable disassembly.
    fn old_as_text(exec: &Executable) -> String {
        let name = |i: u32| -> String {
            exec.funcs
                .get(i as usize)
                .map(|f| f.name.clone())
                .unwrap_or_else(|| format!("unknown_func_index({i})"))
        };
        let mut os = String::new();
        for f in &exec.funcs {
            match f.kind {
                FuncKind::PackedFunc => {
                    os += &format!("@{} packed_func;\n\n", f.name);
                    continue;
                }
                FuncKind::VmTirFunc => {
                    os += &format!("@{} num_inputs={} vm_tir_func;\n\n", f.name, f.num_args);
                    continue;
                }
                FuncKind::VmFunc => {}
            }
            os += &format!("@{}:\n", f.name);
            for pc in f.start_instr..f.end_instr {
                os += "  ";
                let ins = &exec.code[pc as usize];
                match *ins {
                    Instr::Call { dst, func, .. } => {
                        let args: Vec<String> = exec
                            .args_of(ins)
                            .iter()
                            .map(|a| match a.get() {
                                Arg::Reg(r) => old_reg_text(r),
                                Arg::Imm(v) => format!("i{v}"),
                                Arg::Const(c) => format!("c[{c}]"),
                                Arg::Func(g) => format!("f[{}]", name(g)),
                            })
                            .collect();
                        os += &format!(
                            "{:<6}{:<16} in: {:<12} dst: {}\n",
                            "call",
                            name(func),
                            args.join(", "),
                            old_reg_text(dst)
                        );
                    }
                    Instr::Ret(r) => os += &format!("{:<6}{}\n", "ret ", old_reg_text(r)),
                    Instr::Goto(off) => os += &format!("{:<6}{off}\n", "goto"),
                    Instr::If(c, off) => os += &format!("{:<6}{}, {off}\n", "If", old_reg_text(c)),
                }
            }
            os += "\n";
        }
        os
    }

    /// `as_python()`: the disassembly as calls of TVM's Python `rx.Builder`.
    fn old_as_python(exec: &Executable) -> String {
        let name = |i: u32| -> String {
            exec.funcs
                .get(i as usize)
                .map(|f| format!("\"{}\"", f.name))
                .unwrap_or_else(|| format!("ib.unknown_func_index({i})"))
        };
        let mut os = String::from("ib = rx.Builder()\n");
        for f in exec.funcs.iter().filter(|f| f.kind == FuncKind::VmFunc) {
            os += &format!(
                "with ib.function(\"{}\", num_inputs={}):\n",
                f.name, f.num_args
            );
            for pc in f.start_instr..f.end_instr {
                let ins = &exec.code[pc as usize];
                match *ins {
                    Instr::Call { dst, func, .. } => {
                        let args: Vec<String> = exec
                            .args_of(ins)
                            .iter()
                            .map(|a| match a.get() {
                                Arg::Reg(Reg::Vm) => "ib.r(vm)".to_string(),
                                Arg::Reg(r) => format!("ib.r({})", reg_raw(r)),
                                Arg::Imm(v) => format!("ib.imm({v})"),
                                Arg::Const(c) => format!("ib.c({c})"),
                                Arg::Func(g) => format!("ib.f({})", name(g)),
                            })
                            .collect();
                        os += &format!(
                            "    ib.emit_call({}, args=[{}]",
                            name(func),
                            args.join(", ")
                        );
                        if dst != Reg::Void {
                            os += &format!(", dst=ib.r({})", reg_raw(dst));
                        }
                        os += ")\n";
                    }
                    Instr::Ret(r) => os += &format!("    ib.emit_ret(ib.r({}))\n", reg_raw(r)),
                    Instr::Goto(off) => os += &format!("    ib.emit_goto({off})\n"),
                    Instr::If(c, off) => {
                        os += &format!("    ib.emit_if(ib.r({}), {off})\n", reg_raw(c))
                    }
                }
            }
        }
        os
    }

    #[test]
    fn the_disassemblies_are_those_of_the_reference_implementation() {
        use crate::relax_vm::exec::{Constant, FuncInfo};
        let func = |kind, name: &str, start, end| FuncInfo {
            kind,
            name: name.into(),
            start_instr: start,
            end_instr: end,
            num_args: 2,
            register_file_size: 6,
            param_names: vec!["x".into(), "y".into()],
        };
        let funcs = vec![
            func(FuncKind::PackedFunc, "a.kernel.with.a.long.name", 0, 0),
            func(FuncKind::VmTirFunc, "tir", 0, 0),
            func(FuncKind::VmFunc, "main", 0, 6),
            func(FuncKind::VmFunc, "f", 6, 7),
        ];
        let arg = |kind: i64, v: i64| kind << 56 | (v & ((1 << 56) - 1));
        let data = vec![
            // %5 = kernel(%0, %void, %vm, -7, c[0], f[main]); %void = f(); ret %1;
            // if %2 goto +2; goto -1; ret %vm; ret %void.
            1,
            5,
            0,
            6,
            arg(0, 0),
            arg(0, VOID_REG),
            arg(0, VM_REG),
            arg(1, -7),
            arg(2, 0),
            arg(3, 2),
            1,
            VOID_REG,
            3,
            0,
            2,
            1,
            4,
            2,
            2,
            3,
            -1,
            2,
            VM_REG,
            2,
            VOID_REG,
        ];
        let offsets = vec![0, 10, 14, 16, 19, 21, 23];
        let e = Executable::from_parts(funcs, vec![Constant::Int(3)], offsets, data).unwrap();
        assert_eq!(as_text(&e), old_as_text(&e));
        assert_eq!(as_python(&e), old_as_python(&e));
        assert!(as_text(&e).contains(
            "call  a.kernel.with.a.long.name in: %0, %void, %vm, i-7, c[0], f[main] dst: %5\n"
        ));
    }
}
