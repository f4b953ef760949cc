//! A PTX interpreter for the instructions small element-wise kernels use:
//! parameter, global and call-parameter loads and stores; integer and f32
//! arithmetic; comparisons, selects and conversions; branches; the special
//! registers of the thread's position; `cudaGraphSetConditional` calls;
//! `griddepcontrol` and fences (no-ops when threads run one after the
//! other). Threads run one after the other, block by block, so
//! instructions that need threads to meet (barriers, shared memory, warp
//! shuffles, atomics across threads) are refused at compile time: such a
//! kernel has no model, and its launch is reported as a misuse.
//!
//! Every global access is checked against the kernel's device memory.

use std::collections::HashMap;

use crate::kernel_run::{Fault, Run};
use crate::ptx::Entry;

/// A value type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    U(u8),
    S(u8),
    F32,
    F64,
    Pred,
}

impl Ty {
    fn parse(t: &str) -> Option<Ty> {
        Some(match t {
            "u8" | "b8" => Ty::U(8),
            "s8" => Ty::S(8),
            "u16" | "b16" => Ty::U(16),
            "s16" => Ty::S(16),
            "u32" | "b32" => Ty::U(32),
            "s32" => Ty::S(32),
            "u64" | "b64" => Ty::U(64),
            "s64" => Ty::S(64),
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
            _ => return None,
        })
    }

    fn bytes(self) -> usize {
        match self {
            Ty::U(b) | Ty::S(b) => usize::from(b / 8),
            Ty::F32 => 4,
            Ty::F64 => 8,
            Ty::Pred => 1,
        }
    }

    /// Truncates (and sign-extends, for signed types) to the type's width.
    fn norm(self, v: u64) -> u64 {
        match self {
            Ty::U(64) | Ty::S(64) | Ty::F64 => v,
            Ty::U(b) => v & ((1u64 << b) - 1),
            Ty::S(b) => (((v << (64 - b)) as i64) >> (64 - b)) as u64,
            Ty::F32 => v & 0xFFFF_FFFF,
            Ty::Pred => u64::from(v != 0),
        }
    }
}

/// Where a thread is.
#[derive(Debug, Clone, Copy)]
enum Special {
    Tid(usize),
    Ntid(usize),
    Ctaid(usize),
    Nctaid(usize),
    Laneid,
    WarpSize,
}

/// A value operand.
#[derive(Debug, Clone, Copy)]
enum Src {
    Reg(u16),
    Imm(u64),
    Special(Special),
}

#[derive(Debug, Clone, Copy)]
enum BinOp {
    Add,
    Sub,
    MulLo,
    MulHi,
    MulWide,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

#[derive(Debug, Clone, Copy)]
enum UnOp {
    Neg,
    Abs,
    Not,
}

#[derive(Debug, Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone)]
enum Inst {
    LdParam { ty: Ty, d: u16, offset: usize },
    LdGlobal { ty: Ty, d: u16, base: Src, offset: i64 },
    StGlobal { ty: Ty, base: Src, offset: i64, s: Src },
    StLocal { ty: Ty, slot: u16, offset: usize, s: Src },
    Mov { ty: Ty, d: u16, s: Src },
    Bin { op: BinOp, ty: Ty, d: u16, a: Src, b: Src },
    Mad { wide: bool, ty: Ty, d: u16, a: Src, b: Src, c: Src },
    Un { op: UnOp, ty: Ty, d: u16, a: Src },
    Setp { cmp: Cmp, ty: Ty, p: u16, a: Src, b: Src },
    Selp { ty: Ty, d: u16, a: Src, b: Src, p: Src },
    Cvt { dty: Ty, sty: Ty, round_int: bool, d: u16, a: Src },
    Bra { target: usize },
    Ret,
    SetConditional { handle: u16, value: u16 },
    Nop,
}

/// One compiled kernel.
#[derive(Debug, Clone)]
pub struct Program {
    insts: Vec<(Option<(u16, bool)>, Inst)>,
    registers: usize,
    locals: usize,
}

/// The most instructions one thread may run (a loop that never ends is a
/// fault, not a hang).
const STEPS_PER_THREAD: u64 = 1 << 22;

struct Compiler<'a> {
    entry: &'a Entry,
    regs: HashMap<String, u16>,
    locals: HashMap<String, u16>,
    labels: HashMap<String, usize>,
    insts: Vec<(Option<(u16, bool)>, Inst)>,
    /// Branches to patch: (instruction, label).
    branches: Vec<(usize, String)>,
    /// `call` argument lists to patch once the locals are known.
    params: Vec<String>,
}

fn err<T>(msg: impl Into<String>) -> Result<T, String> {
    Err(msg.into())
}

impl Compiler<'_> {
    fn reg(&mut self, name: &str) -> Result<u16, String> {
        if !name.starts_with('%') || name.contains('.') {
            return err(format!("not a register: {name}"));
        }
        let n = self.regs.len() as u16;
        Ok(*self.regs.entry(name.to_string()).or_insert(n))
    }

    fn src(&mut self, t: &str, ty: Ty) -> Result<Src, String> {
        let t = t.trim();
        if let Some(sp) = special(t) {
            return Ok(Src::Special(sp));
        }
        if t.starts_with('%') {
            return Ok(Src::Reg(self.reg(t)?));
        }
        immediate(t, ty).map(Src::Imm).ok_or_else(|| format!("bad operand {t:?}"))
    }

    /// `[name]`, `[name+off]`, `[%rd]`, `[%rd+off]`: the base and offset.
    fn address(&self, t: &str) -> Result<(String, i64), String> {
        let inner = t
            .trim()
            .strip_prefix('[')
            .and_then(|x| x.strip_suffix(']'))
            .ok_or_else(|| format!("not an address: {t}"))?;
        let (base, off) = match inner.split_once('+') {
            Some((b, o)) => (b.trim(), parse_int(o.trim()).ok_or_else(|| format!("bad offset in {t}"))? as i64),
            None => match inner.find('-').filter(|&i| i > 0) {
                Some(i) => (
                    inner[..i].trim(),
                    -(parse_int(inner[i + 1..].trim()).ok_or_else(|| format!("bad offset in {t}"))? as i64),
                ),
                None => (inner.trim(), 0),
            },
        };
        Ok((base.to_string(), off))
    }

    fn param_offset(&self, name: &str) -> Option<usize> {
        // The parameter's position among the entry's, by name order in the
        // PTX (the entry keeps offsets; names are matched by declaration).
        self.entry.param_names().iter().position(|n| n == name).map(|i| self.entry.params[i].offset)
    }

    fn statement(&mut self, stmt: &str) -> Result<(), String> {
        let mut s = stmt.trim();
        loop {
            match s.split_once(':') {
                Some((label, rest))
                    if !label.trim().is_empty()
                        && label.trim().chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$') =>
                {
                    self.labels.insert(label.trim().to_string(), self.insts.len());
                    s = rest.trim();
                }
                _ => break,
            }
        }
        if s.is_empty() {
            return Ok(());
        }
        if s.starts_with(".reg") || s.starts_with(".pragma") || s.starts_with(".loc") || s.starts_with(".file") {
            return Ok(());
        }
        if s.starts_with(".param") {
            let name = s.split_whitespace().last().unwrap_or("").to_string();
            let n = self.locals.len() as u16;
            self.locals.insert(name, n);
            return Ok(());
        }
        if s.starts_with('.') {
            return err(format!("directive {s:?} inside a body is not simulated (shared or local memory)"));
        }
        let mut pred = None;
        if let Some(rest) = s.strip_prefix('@') {
            let (p, rest) = rest.split_once(char::is_whitespace).ok_or("a predicate without an instruction")?;
            let (neg, p) = match p.strip_prefix('!') {
                Some(p) => (true, p),
                None => (false, p),
            };
            pred = Some((self.reg(p)?, neg));
            s = rest.trim();
        }
        let (op, args) = match s.split_once(char::is_whitespace) {
            Some((o, a)) => (o, a.trim()),
            None => (s, ""),
        };
        let parts: Vec<&str> = op.split('.').collect();
        let base = parts[0];
        let types: Vec<Ty> = parts.iter().filter_map(|p| Ty::parse(p)).collect();
        let ty = types.last().copied().unwrap_or(Ty::U(32));
        let has = |m: &str| parts.contains(&m);
        let ops: Vec<&str> = if base == "call" { Vec::new() } else { split_operands(args) };
        let need = |n: usize| -> Result<(), String> {
            if ops.len() == n {
                Ok(())
            } else {
                err(format!("{op}: {} operands, want {n}", ops.len()))
            }
        };
        let inst = match base {
            "ld" => {
                need(2)?;
                if parts.iter().any(|p| p.starts_with('v') && p.len() == 2) {
                    return err(format!("vector load {op} is not simulated"));
                }
                let d = self.reg(ops[0])?;
                let (b, offset) = self.address(ops[1])?;
                if has("param") {
                    if let Some(o) = self.param_offset(&b) {
                        Inst::LdParam { ty, d, offset: (o as i64 + offset) as usize }
                    } else {
                        return err(format!("ld.param of {b}, not a parameter of {}", self.entry.name));
                    }
                } else if has("global") || parts.len() == 2 {
                    let base = self.src(&b, Ty::U(64))?;
                    Inst::LdGlobal { ty, d, base, offset }
                } else {
                    return err(format!("{op} is not simulated"));
                }
            }
            "st" => {
                need(2)?;
                let (b, offset) = self.address(ops[0])?;
                let s = self.src(ops[1], ty)?;
                if has("param") {
                    let slot = *self.locals.get(&b).ok_or_else(|| format!("st.param to {b}, not a call parameter"))?;
                    Inst::StLocal { ty, slot, offset: offset as usize, s }
                } else if has("global") || parts.len() == 2 {
                    let base = self.src(&b, Ty::U(64))?;
                    Inst::StGlobal { ty, base, offset, s }
                } else {
                    return err(format!("{op} is not simulated"));
                }
            }
            "mov" => {
                need(2)?;
                Inst::Mov { ty, d: self.reg(ops[0])?, s: self.src(ops[1], ty)? }
            }
            "cvta" => {
                need(2)?;
                Inst::Mov { ty: Ty::U(64), d: self.reg(ops[0])?, s: self.src(ops[1], Ty::U(64))? }
            }
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor" | "shl" | "shr" => {
                need(3)?;
                let bop = match base {
                    "add" => BinOp::Add,
                    "sub" => BinOp::Sub,
                    "mul" if has("wide") => BinOp::MulWide,
                    "mul" if has("hi") => BinOp::MulHi,
                    "mul" => BinOp::MulLo,
                    "div" => BinOp::Div,
                    "rem" => BinOp::Rem,
                    "min" => BinOp::Min,
                    "max" => BinOp::Max,
                    "and" => BinOp::And,
                    "or" => BinOp::Or,
                    "xor" => BinOp::Xor,
                    "shl" => BinOp::Shl,
                    _ => BinOp::Shr,
                };
                if parts.iter().any(|p| *p == "sat" || *p == "cc") {
                    return err(format!("{op} is not simulated"));
                }
                let bty = if matches!(bop, BinOp::Shl | BinOp::Shr) { Ty::U(32) } else { ty };
                Inst::Bin { op: bop, ty, d: self.reg(ops[0])?, a: self.src(ops[1], ty)?, b: self.src(ops[2], bty)? }
            }
            "mad" | "fma" => {
                need(4)?;
                if base == "mad" && !(has("lo") || has("wide")) && ty != Ty::F32 {
                    return err(format!("{op} is not simulated"));
                }
                Inst::Mad {
                    wide: has("wide"),
                    ty,
                    d: self.reg(ops[0])?,
                    a: self.src(ops[1], ty)?,
                    b: self.src(ops[2], ty)?,
                    c: self.src(ops[3], if has("wide") { widen(ty) } else { ty })?,
                }
            }
            "neg" | "abs" | "not" => {
                need(2)?;
                let u = match base {
                    "neg" => UnOp::Neg,
                    "abs" => UnOp::Abs,
                    _ => UnOp::Not,
                };
                Inst::Un { op: u, ty, d: self.reg(ops[0])?, a: self.src(ops[1], ty)? }
            }
            "setp" => {
                need(3)?;
                let cmp = match parts.get(1).copied() {
                    Some("eq") => Cmp::Eq,
                    Some("ne") => Cmp::Ne,
                    Some("lt") | Some("lo") => Cmp::Lt,
                    Some("le") | Some("ls") => Cmp::Le,
                    Some("gt") | Some("hi") => Cmp::Gt,
                    Some("ge") | Some("hs") => Cmp::Ge,
                    _ => return err(format!("{op} is not simulated")),
                };
                if parts.len() > 3 {
                    return err(format!("{op} is not simulated"));
                }
                Inst::Setp { cmp, ty, p: self.reg(ops[0])?, a: self.src(ops[1], ty)?, b: self.src(ops[2], ty)? }
            }
            "selp" => {
                need(4)?;
                Inst::Selp {
                    ty,
                    d: self.reg(ops[0])?,
                    a: self.src(ops[1], ty)?,
                    b: self.src(ops[2], ty)?,
                    p: self.src(ops[3], Ty::Pred)?,
                }
            }
            "cvt" => {
                need(2)?;
                if types.len() != 2 {
                    return err(format!("{op} is not simulated"));
                }
                let round_int =
                    parts.iter().any(|p| matches!(*p, "rni" | "rn")) && matches!(types[1], Ty::F32 | Ty::F64);
                Inst::Cvt {
                    dty: types[0],
                    sty: types[1],
                    round_int,
                    d: self.reg(ops[0])?,
                    a: self.src(ops[1], types[1])?,
                }
            }
            "bra" => {
                if ops.len() != 1 {
                    return err("bra takes one label");
                }
                self.branches.push((self.insts.len(), ops[0].trim().to_string()));
                Inst::Bra { target: usize::MAX }
            }
            "ret" | "exit" => Inst::Ret,
            "griddepcontrol" | "membar" | "fence" => Inst::Nop,
            "call" => {
                let (target, rest) = args.split_once(',').ok_or("call without arguments")?;
                if target.trim() != "cudaGraphSetConditional" {
                    return err(format!("call of {} is not simulated", target.trim()));
                }
                let list = rest.trim().trim_start_matches('(').trim_end_matches(')');
                let names: Vec<&str> = list.split(',').map(str::trim).collect();
                if names.len() != 2 {
                    return err("cudaGraphSetConditional takes two arguments");
                }
                let slot = |c: &Self, n: &str| {
                    c.locals.get(n).copied().ok_or_else(|| format!("call argument {n} is not declared"))
                };
                Inst::SetConditional { handle: slot(self, names[0])?, value: slot(self, names[1])? }
            }
            other => return err(format!("instruction {other} ({op}) is not simulated")),
        };
        self.insts.push((pred, inst));
        Ok(())
    }
}

fn widen(t: Ty) -> Ty {
    match t {
        Ty::U(b) => Ty::U(b * 2),
        Ty::S(b) => Ty::S(b * 2),
        t => t,
    }
}

fn special(t: &str) -> Option<Special> {
    let dim = |s: &str| match s {
        "x" => Some(0),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    let (name, d) = t.split_once('.').unwrap_or((t, ""));
    Some(match name {
        "%tid" => Special::Tid(dim(d)?),
        "%ntid" => Special::Ntid(dim(d)?),
        "%ctaid" => Special::Ctaid(dim(d)?),
        "%nctaid" => Special::Nctaid(dim(d)?),
        "%laneid" => Special::Laneid,
        "WARP_SZ" => Special::WarpSize,
        _ => return None,
    })
}

fn parse_int(t: &str) -> Option<u64> {
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let t = t.trim_end_matches('U');
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else {
        t.parse::<u64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn immediate(t: &str, ty: Ty) -> Option<u64> {
    if let Some(h) = t.strip_prefix("0f").or_else(|| t.strip_prefix("0F")) {
        let bits = u32::from_str_radix(h, 16).ok()?;
        return Some(if ty == Ty::F64 { f64::from(f32::from_bits(bits)).to_bits() } else { u64::from(bits) });
    }
    if let Some(h) = t.strip_prefix("0d").or_else(|| t.strip_prefix("0D")) {
        let bits = u64::from_str_radix(h, 16).ok()?;
        return Some(if ty == Ty::F32 { u64::from((f64::from_bits(bits) as f32).to_bits()) } else { bits });
    }
    match ty {
        Ty::F32 if t.contains('.') || t.contains('e') => Some(u64::from(t.parse::<f32>().ok()?.to_bits())),
        Ty::F64 if t.contains('.') || t.contains('e') => Some(t.parse::<f64>().ok()?.to_bits()),
        Ty::F32 => Some(u64::from((parse_int(t)? as i64 as f32).to_bits())),
        Ty::F64 => Some((parse_int(t)? as i64 as f64).to_bits()),
        _ => parse_int(t).map(|v| ty.norm(v)),
    }
}

/// Splits `a, [b+4], c` at its top-level commas.
fn split_operands(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

/// Compiles an entry's body.
pub fn compile(entry: &Entry) -> Result<Program, String> {
    let body = entry.body.as_deref().ok_or("a declaration without a body")?;
    let mut c = Compiler {
        entry,
        regs: HashMap::new(),
        locals: HashMap::new(),
        labels: HashMap::new(),
        insts: Vec::new(),
        branches: Vec::new(),
        params: Vec::new(),
    };
    let flat: String = body.chars().map(|ch| if ch == '{' || ch == '}' { ';' } else { ch }).collect();
    for stmt in flat.split(';') {
        c.statement(stmt).map_err(|e| format!("{}: {e}", entry.name))?;
    }
    for (at, label) in std::mem::take(&mut c.branches) {
        let target = *c.labels.get(&label).ok_or_else(|| format!("{}: no label {label}", entry.name))?;
        c.insts[at].1 = Inst::Bra { target };
    }
    let _ = &c.params;
    Ok(Program { registers: c.regs.len(), locals: c.locals.len(), insts: c.insts })
}

fn as_f32(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

fn from_f32(f: f32) -> u64 {
    u64::from(f.to_bits())
}

fn signed(ty: Ty) -> bool {
    matches!(ty, Ty::S(_))
}

fn bin(op: BinOp, ty: Ty, a: u64, b: u64) -> u64 {
    if ty == Ty::F32 {
        let (x, y) = (as_f32(a), as_f32(b));
        return from_f32(match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::MulLo | BinOp::MulHi | BinOp::MulWide => x * y,
            BinOp::Div => x / y,
            BinOp::Min => x.min(y),
            BinOp::Max => x.max(y),
            _ => 0.0,
        });
    }
    if ty == Ty::F64 {
        let (x, y) = (f64::from_bits(a), f64::from_bits(b));
        return match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::MulLo | BinOp::MulHi | BinOp::MulWide => x * y,
            BinOp::Div => x / y,
            BinOp::Min => x.min(y),
            BinOp::Max => x.max(y),
            _ => 0.0,
        }
        .to_bits();
    }
    let bits = match ty {
        Ty::U(b) | Ty::S(b) => u32::from(b),
        _ => 32,
    };
    let (a, b) = (ty.norm(a), ty.norm(b));
    let r = match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::MulLo => a.wrapping_mul(b),
        BinOp::MulWide => {
            return widen(ty).norm(if signed(ty) {
                (a as i64).wrapping_mul(b as i64) as u64
            } else {
                a.wrapping_mul(b)
            })
        }
        BinOp::MulHi => {
            let full =
                if signed(ty) { i128::from(a as i64) * i128::from(b as i64) } else { i128::from(a) * i128::from(b) };
            (full >> bits) as u64
        }
        BinOp::Div => {
            if b == 0 {
                u64::MAX
            } else if signed(ty) {
                (a as i64).wrapping_div(b as i64) as u64
            } else {
                a / b
            }
        }
        BinOp::Rem => {
            if b == 0 {
                a
            } else if signed(ty) {
                (a as i64).wrapping_rem(b as i64) as u64
            } else {
                a % b
            }
        }
        BinOp::Min => {
            if signed(ty) {
                (a as i64).min(b as i64) as u64
            } else {
                a.min(b)
            }
        }
        BinOp::Max => {
            if signed(ty) {
                (a as i64).max(b as i64) as u64
            } else {
                a.max(b)
            }
        }
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        BinOp::Shl => {
            if b >= u64::from(bits) {
                0
            } else {
                a << b
            }
        }
        BinOp::Shr => {
            let s = b.min(u64::from(bits));
            if signed(ty) {
                ((a as i64) >> s.min(63)) as u64
            } else if s >= 64 {
                0
            } else {
                a >> s
            }
        }
    };
    ty.norm(r)
}

fn compare(cmp: Cmp, ty: Ty, a: u64, b: u64) -> bool {
    use std::cmp::Ordering as O;
    let ord = match ty {
        Ty::F32 => as_f32(a).partial_cmp(&as_f32(b)),
        Ty::F64 => f64::from_bits(a).partial_cmp(&f64::from_bits(b)),
        Ty::S(_) => Some((ty.norm(a) as i64).cmp(&(ty.norm(b) as i64))),
        _ => Some(ty.norm(a).cmp(&ty.norm(b))),
    };
    match (cmp, ord) {
        (Cmp::Ne, None) => true,
        (_, None) => false,
        (Cmp::Eq, Some(o)) => o == O::Equal,
        (Cmp::Ne, Some(o)) => o != O::Equal,
        (Cmp::Lt, Some(o)) => o == O::Less,
        (Cmp::Le, Some(o)) => o != O::Greater,
        (Cmp::Gt, Some(o)) => o == O::Greater,
        (Cmp::Ge, Some(o)) => o != O::Less,
    }
}

fn convert(dty: Ty, sty: Ty, round_int: bool, v: u64) -> u64 {
    let float = |f: f64| -> u64 {
        let f = if round_int { f.round_ties_even() } else { f.trunc() };
        match dty {
            Ty::U(b) => {
                let max = if b == 64 { u64::MAX as f64 } else { ((1u64 << b) - 1) as f64 };
                if f.is_nan() {
                    0
                } else {
                    f.clamp(0.0, max) as u64
                }
            }
            Ty::S(b) => {
                let (lo, hi) = (-((1i128 << (b - 1)) as f64), ((1i128 << (b - 1)) - 1) as f64);
                if f.is_nan() {
                    0
                } else {
                    dty.norm(f.clamp(lo, hi) as i64 as u64)
                }
            }
            _ => 0,
        }
    };
    match (dty, sty) {
        (Ty::F32, Ty::F64) => from_f32(f64::from_bits(v) as f32),
        (Ty::F64, Ty::F32) => f64::from(as_f32(v)).to_bits(),
        (Ty::F32, Ty::S(_)) => from_f32(sty.norm(v) as i64 as f32),
        (Ty::F32, _) => from_f32(sty.norm(v) as f32),
        (Ty::F64, Ty::S(_)) => (sty.norm(v) as i64 as f64).to_bits(),
        (Ty::F64, _) => (sty.norm(v) as f64).to_bits(),
        (_, Ty::F32) => float(f64::from(as_f32(v))),
        (_, Ty::F64) => float(f64::from_bits(v)),
        _ => dty.norm(sty.norm(v)),
    }
}

impl Program {
    /// Runs the kernel over its grid: block by block; inside a block, the
    /// threads step together, each instruction for every thread at the
    /// lowest program counter (so branches that part threads meet again
    /// where their paths join), which runs each instruction over many
    /// threads at once.
    pub fn run(&self, run: &mut Run<'_>, params: &[u8], grid: [u32; 3], block: [u32; 3]) -> Result<(), Fault> {
        let w = (block[0] * block[1] * block[2]) as usize;
        let mut regs = vec![0u64; self.registers.max(1) * w];
        let mut locals = vec![[0u8; 16]; self.locals.max(1) * w];
        let mut pcs = vec![0usize; w];
        let mut active: Vec<usize> = Vec::with_capacity(w);
        let tid: Vec<[u32; 3]> =
            (0..w as u32).map(|t| [t % block[0], (t / block[0]) % block[1], t / (block[0] * block[1])]).collect();
        for bz in 0..grid[2] {
            for by in 0..grid[1] {
                for bx in 0..grid[0] {
                    regs.fill(0);
                    pcs.fill(0);
                    let at = Block { ctaid: [bx, by, bz], nctaid: grid, ntid: block, tid: &tid, w };
                    self.block(run, params, &at, &mut regs, &mut locals, &mut pcs, &mut active)?;
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn block(
        &self,
        run: &mut Run<'_>,
        params: &[u8],
        at: &Block<'_>,
        regs: &mut [u64],
        locals: &mut [[u8; 16]],
        pcs: &mut [usize],
        active: &mut Vec<usize>,
    ) -> Result<(), Fault> {
        let w = at.w;
        let end = self.insts.len();
        let val = |regs: &[u64], s: Src, t: usize| -> u64 {
            match s {
                Src::Reg(r) => regs[r as usize * w + t],
                Src::Imm(v) => v,
                Src::Special(sp) => u64::from(match sp {
                    Special::Tid(d) => at.tid[t][d],
                    Special::Ntid(d) => at.ntid[d],
                    Special::Ctaid(d) => at.ctaid[d],
                    Special::Nctaid(d) => at.nctaid[d],
                    Special::Laneid => (t % 32) as u32,
                    Special::WarpSize => 32,
                }),
            }
        };
        let mut steps = 0u64;
        loop {
            let Some(pc) = pcs.iter().copied().filter(|&p| p < end).min() else { return Ok(()) };
            active.clear();
            active.extend((0..w).filter(|&t| pcs[t] == pc));
            steps += 1;
            if steps > STEPS_PER_THREAD {
                return Err(Fault::Runaway);
            }
            let (pred, inst) = &self.insts[pc];
            if let Some((p, neg)) = *pred {
                active.retain(|&t| {
                    let on = (regs[p as usize * w + t] != 0) != neg;
                    if !on {
                        pcs[t] = pc + 1;
                    }
                    on
                });
            }
            let mut next = pc + 1;
            match *inst {
                Inst::LdParam { ty, d, offset } => {
                    let mut b = [0u8; 8];
                    let n = ty.bytes();
                    if let Some(src) = params.get(offset..offset + n) {
                        b[..n].copy_from_slice(src);
                    }
                    let v = ty.norm(u64::from_le_bytes(b));
                    for &t in active.iter() {
                        regs[d as usize * w + t] = v;
                    }
                }
                Inst::LdGlobal { ty, d, base, offset } => {
                    for &t in active.iter() {
                        let addr = val(regs, base, t).wrapping_add(offset as u64);
                        regs[d as usize * w + t] = ty.norm(run.load(addr, ty.bytes())?);
                    }
                }
                Inst::StGlobal { ty, base, offset, s } => {
                    for &t in active.iter() {
                        let addr = val(regs, base, t).wrapping_add(offset as u64);
                        run.store(addr, ty.bytes(), val(regs, s, t))?;
                    }
                }
                Inst::StLocal { ty, slot, offset, s } => {
                    for &t in active.iter() {
                        let bytes = val(regs, s, t).to_le_bytes();
                        let n = ty.bytes().min(16usize.saturating_sub(offset));
                        locals[slot as usize * w + t][offset..offset + n].copy_from_slice(&bytes[..n]);
                    }
                }
                Inst::Mov { ty, d, s } => {
                    for &t in active.iter() {
                        regs[d as usize * w + t] = ty.norm(val(regs, s, t));
                    }
                }
                Inst::Bin { op, ty, d, a, b } => {
                    for &t in active.iter() {
                        regs[d as usize * w + t] = bin(op, ty, val(regs, a, t), val(regs, b, t));
                    }
                }
                Inst::Mad { wide, ty, d, a, b, c } => {
                    for &t in active.iter() {
                        let (x, y, z) = (val(regs, a, t), val(regs, b, t), val(regs, c, t));
                        regs[d as usize * w + t] = if ty == Ty::F32 {
                            from_f32(as_f32(x).mul_add(as_f32(y), as_f32(z)))
                        } else if ty == Ty::F64 {
                            f64::from_bits(x).mul_add(f64::from_bits(y), f64::from_bits(z)).to_bits()
                        } else {
                            let (op, out) = if wide { (BinOp::MulWide, widen(ty)) } else { (BinOp::MulLo, ty) };
                            bin(BinOp::Add, out, bin(op, ty, x, y), z)
                        };
                    }
                }
                Inst::Un { op, ty, d, a } => {
                    for &t in active.iter() {
                        let v = val(regs, a, t);
                        regs[d as usize * w + t] = match (op, ty) {
                            (UnOp::Neg, Ty::F32) => from_f32(-as_f32(v)),
                            (UnOp::Abs, Ty::F32) => from_f32(as_f32(v).abs()),
                            (UnOp::Neg, t) => t.norm(v.wrapping_neg()),
                            (UnOp::Abs, t) => t.norm((t.norm(v) as i64).unsigned_abs()),
                            (UnOp::Not, Ty::Pred) => u64::from(v == 0),
                            (UnOp::Not, t) => t.norm(!v),
                        };
                    }
                }
                Inst::Setp { cmp, ty, p, a, b } => {
                    for &t in active.iter() {
                        regs[p as usize * w + t] = u64::from(compare(cmp, ty, val(regs, a, t), val(regs, b, t)));
                    }
                }
                Inst::Selp { ty, d, a, b, p } => {
                    for &t in active.iter() {
                        let v = if val(regs, p, t) != 0 { val(regs, a, t) } else { val(regs, b, t) };
                        regs[d as usize * w + t] = ty.norm(v);
                    }
                }
                Inst::Cvt { dty, sty, round_int, d, a } => {
                    for &t in active.iter() {
                        regs[d as usize * w + t] = convert(dty, sty, round_int, val(regs, a, t));
                    }
                }
                Inst::Bra { target } => next = target,
                Inst::Ret => next = end,
                Inst::SetConditional { handle, value } => {
                    for &t in active.iter() {
                        let l = &locals[..];
                        let h = u64::from_le_bytes(l[handle as usize * w + t][..8].try_into().unwrap_or([0; 8]));
                        let v = u32::from_le_bytes(l[value as usize * w + t][..4].try_into().unwrap_or([0; 4]));
                        run.set_condition(h, v)?;
                    }
                }
                Inst::Nop => {}
            }
            for &t in active.iter() {
                pcs[t] = next;
            }
        }
    }
}

/// Where a block is, and its threads' positions.
struct Block<'a> {
    ctaid: [u32; 3],
    nctaid: [u32; 3],
    ntid: [u32; 3],
    tid: &'a [[u32; 3]],
    w: usize,
}
