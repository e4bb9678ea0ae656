//! Bytecode: instruction decoding and validation, and the two disassemblies (`as_text`,
//! `as_python`).
//!
//! Words are `i64`. `Call: [1, dst, func_idx, nargs, args...]`, `Ret: [2, reg]`,
//! `Goto: [3, pc_offset]`, `If: [4, cond_reg, false_offset]`. Call arguments carry their kind
//! in the top 8 bits (0 register, 1 immediate, 2 constant index, 3 function index) and a
//! sign-extended 56-bit value below. Registers at or above `1 << 54` are special: the void
//! register (reads as null, writes are dropped) and the VM context register.

use super::exec::{Executable, FuncKind, MAX_REGISTERS};
use crate::packed_func::error::{Error, Result};

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

fn bad(msg: String) -> Error {
    Error::value(format!("invalid Relax VM executable: {msg}"))
}

#[inline]
fn reg(raw: i64, at: usize) -> Result<Reg> {
    match raw {
        VOID_REG => Ok(Reg::Void),
        VM_REG => Ok(Reg::Vm),
        r if (0..MAX_REGISTERS).contains(&r) => Ok(Reg::R(r as u32)),
        r => Err(bad(format!("instruction {at}: invalid register {r}"))),
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
                return Err(bad(format!(
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
            return Err(bad(format!(
                "instruction {at}: argument {k} has unknown kind {k2}"
            )))
        }
    })
}

/// Decodes every instruction (structure only; indices are checked by [`validate`]).
pub fn decode(offsets: &[i64], data: &[i64]) -> Result<(Vec<Instr>, Vec<Arg>)> {
    let mut code = Vec::with_capacity(offsets.len());
    // Every call argument takes one word of `data`, after the call's four.
    let mut args = Vec::with_capacity(data.len().saturating_sub(4 * offsets.len()));
    for (i, &off) in offsets.iter().enumerate() {
        let past_end = || {
            bad(format!(
                "instruction {i} at word {off} runs past the end of the code ({} words)",
                data.len()
            ))
        };
        // The instruction's words: from its offset to the end of the code.
        let w = usize::try_from(off)
            .ok()
            .and_then(|o| data.get(o..))
            .filter(|w| !w.is_empty())
            .ok_or_else(past_end)?;
        let field = |k: usize| w.get(k).copied().ok_or_else(past_end);
        let ins = match w[0] {
            1 => {
                let dst = reg(field(1)?, i)?;
                let func = field(2)?;
                let nargs = field(3)?;
                let Ok(func) = u32::try_from(func) else {
                    return Err(bad(format!(
                        "instruction {i}: function index {func} is out of range"
                    )));
                };
                if nargs < 0 || nargs > data.len() as i64 {
                    return Err(bad(format!(
                        "instruction {i}: invalid argument count {nargs}"
                    )));
                }
                let words = w.get(4..4 + nargs as usize).ok_or_else(past_end)?;
                let begin = args.len();
                for (k, &x) in words.iter().enumerate() {
                    args.push(decode_arg(x, i, k)?);
                }
                if args.len() > u32::MAX as usize {
                    return Err(bad("too many call arguments".into()));
                }
                Instr::Call {
                    dst,
                    func,
                    args_begin: begin as u32,
                    nargs: nargs as u32,
                }
            }
            2 => Instr::Ret(reg(field(1)?, i)?),
            3 => Instr::Goto(field(1)?),
            4 => Instr::If(reg(field(1)?, i)?, field(2)?),
            op => return Err(bad(format!("instruction {i}: unknown opcode {op}"))),
        };
        code.push(ins);
    }
    Ok((code, args))
}

/// Checks every VM function: its instruction range, the registers, constant and function
/// indices its instructions use, and that jumps stay inside it.
pub fn validate(exec: &Executable) -> Result<()> {
    let n_instr = exec.code.len() as i64;
    let nconst = exec.constants.len() as u64;
    let nfunc = exec.funcs.len() as u64;
    for f in &exec.funcs {
        if f.kind == FuncKind::PackedFunc {
            continue;
        }
        let ctx = |m: String| bad(format!("function {}: {m}", f.name));
        if f.num_args < 0 || f.num_args > MAX_REGISTERS {
            return Err(ctx(format!("invalid argument count {}", f.num_args)));
        }
        if f.register_file_size < 0 || f.register_file_size > MAX_REGISTERS {
            return Err(ctx(format!(
                "invalid register file size {}",
                f.register_file_size
            )));
        }
        if f.kind == FuncKind::VmTirFunc {
            continue;
        }
        if !(0 <= f.start_instr && f.start_instr < f.end_instr && f.end_instr <= n_instr) {
            return Err(ctx(format!(
                "instruction range [{}, {}) is outside the {n_instr} instructions",
                f.start_instr, f.end_instr
            )));
        }
        let nreg = f.register_file_size.max(f.num_args) as u64;
        let check_reg = |r: Reg, pc: i64| -> Result<()> {
            match r {
                Reg::R(i) if i as u64 >= nreg => Err(ctx(format!(
                    "instruction {pc}: register %{i} is outside the register file of {nreg}"
                ))),
                _ => Ok(()),
            }
        };
        for pc in f.start_instr..f.end_instr {
            let in_fn = |t: i64| f.start_instr <= t && t < f.end_instr;
            match exec.code[pc as usize] {
                Instr::Call {
                    dst,
                    func,
                    args_begin,
                    nargs,
                } => {
                    check_reg(dst, pc)?;
                    if func as u64 >= nfunc {
                        return Err(ctx(format!(
                            "instruction {pc}: function index {func} is out of range ({nfunc} functions)"
                        )));
                    }
                    let a = &exec.call_args[args_begin as usize..(args_begin + nargs) as usize];
                    for arg in a {
                        match *arg {
                            Arg::Reg(r) => check_reg(r, pc)?,
                            Arg::Const(c) if c as u64 >= nconst => {
                                return Err(ctx(format!(
                                    "instruction {pc}: constant index {c} is out of range ({nconst} constants)"
                                )))
                            }
                            Arg::Func(g) if g as u64 >= nfunc => {
                                return Err(ctx(format!(
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
                        return Err(ctx(format!(
                            "instruction {pc}: goto {off} jumps outside the function"
                        )));
                    }
                }
                Instr::If(c, off) => {
                    check_reg(c, pc)?;
                    if off <= 1 || !pc.checked_add(off).is_some_and(in_fn) || !in_fn(pc + 1) {
                        return Err(ctx(format!(
                            "instruction {pc}: if with false offset {off} jumps outside the function"
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

fn reg_text(r: Reg) -> String {
    match r {
        Reg::R(i) => format!("%{i}"),
        Reg::Void => "%void".into(),
        Reg::Vm => "%vm".into(),
    }
}

fn reg_raw(r: Reg) -> i64 {
    match r {
        Reg::R(i) => i as i64,
        Reg::Void => VOID_REG,
        Reg::Vm => VM_REG,
    }
}

/// `as_text()`: the reference's readable disassembly.
pub fn as_text(exec: &Executable) -> String {
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
            match exec.code[pc as usize] {
                Instr::Call {
                    dst,
                    func,
                    args_begin,
                    nargs,
                } => {
                    let a = &exec.call_args[args_begin as usize..(args_begin + nargs) as usize];
                    let args: Vec<String> = a
                        .iter()
                        .map(|a| match *a {
                            Arg::Reg(r) => reg_text(r),
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
                        reg_text(dst)
                    );
                }
                Instr::Ret(r) => os += &format!("{:<6}{}\n", "ret ", reg_text(r)),
                Instr::Goto(off) => os += &format!("{:<6}{off}\n", "goto"),
                Instr::If(c, off) => os += &format!("{:<6}{}, {off}\n", "If", reg_text(c)),
            }
        }
        os += "\n";
    }
    os
}

/// `as_python()`: the disassembly as calls of TVM's Python `rx.Builder`.
pub fn as_python(exec: &Executable) -> String {
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
            match exec.code[pc as usize] {
                Instr::Call {
                    dst,
                    func,
                    args_begin,
                    nargs,
                } => {
                    let a = &exec.call_args[args_begin as usize..(args_begin + nargs) as usize];
                    let args: Vec<String> = a
                        .iter()
                        .map(|a| match *a {
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
