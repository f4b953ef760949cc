//! Kernel parameter signatures parsed from PTX text.
//!
//! Engines ship their own PTX and launch kernels by name. Before calling
//! `cuLaunchKernel` we check the argument count and sizes against the
//! `.entry` signature found here.
//!
//! Supported syntax, per parameter of an `.entry NAME ( ... )` list:
//!
//! * scalars: `.param .u32 n`
//! * pointers: `.param .u64 .ptr .global .align 4 a` (the `.align` after
//!   `.ptr` is the *pointee* alignment and does not change the parameter's
//!   own alignment, which stays the natural one)
//! * arrays: `.param .align 8 .b8 p[16]` (also `p[2][8]`; lengths multiply)
//!
//! Types are `.u8 .u16 .u32 .u64 .s8 .s16 .s32 .s64 .b8 .b16 .b32 .b64 .f16
//! .f32 .f64`; anything else is an error. `//` and `/* */` comments are
//! ignored, as is anything inside string literals (e.g. `.file` paths).
//! `.func` declarations are not entries and are skipped. A repeated
//! identical `.entry` (declaration plus definition) is reported once.

use std::fmt;

/// Scalar type of a PTX kernel parameter (or array element).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// `.u8`
    U8,
    /// `.u16`
    U16,
    /// `.u32`
    U32,
    /// `.u64`
    U64,
    /// `.s8`
    S8,
    /// `.s16`
    S16,
    /// `.s32`
    S32,
    /// `.s64`
    S64,
    /// `.b8` (untyped bits)
    B8,
    /// `.b16` (untyped bits)
    B16,
    /// `.b32` (untyped bits)
    B32,
    /// `.b64` (untyped bits)
    B64,
    /// `.f16`
    F16,
    /// `.f32`
    F32,
    /// `.f64`
    F64,
}

impl ParamKind {
    /// Parses a PTX type directive such as `.u64`.
    pub fn from_directive(d: &str) -> Option<ParamKind> {
        let k = match d {
            ".u8" => ParamKind::U8,
            ".u16" => ParamKind::U16,
            ".u32" => ParamKind::U32,
            ".u64" => ParamKind::U64,
            ".s8" => ParamKind::S8,
            ".s16" => ParamKind::S16,
            ".s32" => ParamKind::S32,
            ".s64" => ParamKind::S64,
            ".b8" => ParamKind::B8,
            ".b16" => ParamKind::B16,
            ".b32" => ParamKind::B32,
            ".b64" => ParamKind::B64,
            ".f16" => ParamKind::F16,
            ".f32" => ParamKind::F32,
            ".f64" => ParamKind::F64,
            _ => return None,
        };
        Some(k)
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            ParamKind::U8 | ParamKind::S8 | ParamKind::B8 => 1,
            ParamKind::U16 | ParamKind::S16 | ParamKind::B16 | ParamKind::F16 => 2,
            ParamKind::U32 | ParamKind::S32 | ParamKind::B32 | ParamKind::F32 => 4,
            ParamKind::U64 | ParamKind::S64 | ParamKind::B64 | ParamKind::F64 => 8,
        }
    }

    /// `true` for `.f16`, `.f32`, `.f64`.
    pub fn is_float(self) -> bool {
        matches!(self, ParamKind::F16 | ParamKind::F32 | ParamKind::F64)
    }

    /// `true` for the signed and unsigned integer types (`.uN`, `.sN`);
    /// untyped bit types (`.bN`) are neither integer nor float.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            ParamKind::U8
                | ParamKind::U16
                | ParamKind::U32
                | ParamKind::U64
                | ParamKind::S8
                | ParamKind::S16
                | ParamKind::S32
                | ParamKind::S64
        )
    }
}

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxParam {
    /// Parameter name as written in the PTX.
    pub name: String,
    /// Element type.
    pub kind: ParamKind,
    /// Array length, 1 for scalars.
    pub count: usize,
    /// Alignment in bytes: the explicit `.align` or the element size.
    pub align: usize,
    /// Total size in bytes (`kind.size() * count`).
    pub size: usize,
}

/// One `.entry` (kernel) with its parameters in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// Kernel name (mangled, as in the PTX).
    pub name: String,
    /// Parameters in declaration order.
    pub params: Vec<PtxParam>,
}

/// Errors of [`parse_entries`]; lines are 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PtxParseError {
    /// A `/*` comment is never closed.
    UnterminatedComment {
        /// Where the comment opens.
        line: usize,
    },
    /// A `"` string is never closed.
    UnterminatedString {
        /// Where the string opens.
        line: usize,
    },
    /// `.entry` is not followed by a kernel name.
    MissingEntryName {
        /// The line of the `.entry`.
        line: usize,
    },
    /// The parameter list of `entry` has no closing `)`.
    UnterminatedParamList {
        /// The kernel.
        entry: String,
        /// Where its list opens.
        line: usize,
    },
    /// Parameter `index` (0-based) of `entry` is malformed.
    BadParam {
        /// The kernel.
        entry: String,
        /// The parameter's position (0-based).
        index: usize,
        /// Where the parameter is.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// `entry` is declared twice with different parameters.
    ConflictingEntry {
        /// The kernel.
        entry: String,
        /// The second declaration.
        line: usize,
    },
}

impl fmt::Display for PtxParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PtxParseError::UnterminatedComment { line } => {
                write!(f, "line {line}: unterminated /* comment")
            }
            PtxParseError::UnterminatedString { line } => {
                write!(f, "line {line}: unterminated string literal")
            }
            PtxParseError::MissingEntryName { line } => {
                write!(f, "line {line}: .entry without a kernel name")
            }
            PtxParseError::UnterminatedParamList { entry, line } => {
                write!(f, "line {line}: unterminated parameter list of entry {entry}")
            }
            PtxParseError::BadParam { entry, index, line, reason } => {
                write!(f, "line {line}: entry {entry}, parameter {index}: {reason}")
            }
            PtxParseError::ConflictingEntry { entry, line } => {
                write!(f, "line {line}: entry {entry} declared with different parameters")
            }
        }
    }
}

impl std::error::Error for PtxParseError {}

/// A lexical token with its 1-based line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Token<'a> {
    text: &'a str,
    line: usize,
}

/// Characters that continue a word (identifier, number or directive).
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '%'
}

/// Replaces comments and string literals with spaces, keeping newlines (and
/// so line numbers) intact.
fn strip_comments(src: &str) -> Result<String, PtxParseError> {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    let mut line = 1;
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                let start = line;
                chars.next();
                let mut prev = ' ';
                let mut closed = false;
                for n in chars.by_ref() {
                    if n == '\n' {
                        line += 1;
                        out.push('\n');
                    }
                    if prev == '*' && n == '/' {
                        closed = true;
                        break;
                    }
                    prev = n;
                }
                if !closed {
                    return Err(PtxParseError::UnterminatedComment { line: start });
                }
                out.push(' ');
            }
            '"' => {
                let start = line;
                let mut closed = false;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' => {
                            chars.next();
                        }
                        '\n' => return Err(PtxParseError::UnterminatedString { line: start }),
                        _ => {}
                    }
                }
                if !closed {
                    return Err(PtxParseError::UnterminatedString { line: start });
                }
                out.push(' ');
            }
            '\n' => {
                line += 1;
                out.push('\n');
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// Splits comment-free text into words (`ld`, `.param`, `42`, `%r1`) and
/// single punctuation characters. A directive like `.ptr.global` yields
/// `.ptr` and `.global`.
fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut iter = text.char_indices().peekable();
    while let Some((start, c)) = iter.next() {
        if c == '\n' {
            line += 1;
            continue;
        }
        if c.is_whitespace() {
            continue;
        }
        let mut end = start + c.len_utf8();
        if is_word_char(c) || c == '.' {
            while let Some(&(i, n)) = iter.peek() {
                if !is_word_char(n) {
                    break;
                }
                end = i + n.len_utf8();
                iter.next();
            }
        }
        tokens.push(Token { text: &text[start..end], line });
    }
    tokens
}

/// Parses a decimal or `0x` hexadecimal integer.
fn parse_number(s: &str) -> Option<usize> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => usize::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `true` for a PTX identifier (not a directive, punctuation or number).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$' || c == '%' => s.chars().all(is_word_char),
        _ => false,
    }
}

/// Parses the tokens of one parameter (between commas). Errors are reasons.
fn parse_param(toks: &[Token<'_>]) -> Result<PtxParam, String> {
    let mut it = toks.iter().map(|t| t.text).peekable();
    if it.next() != Some(".param") {
        return Err("expected .param".to_string());
    }
    let mut kind = None;
    let mut align = None;
    let mut after_ptr = false;
    let mut name = None;
    while let Some(t) = it.next() {
        match t {
            ".align" => {
                let n = it
                    .next()
                    .and_then(parse_number)
                    .filter(|n| n.is_power_of_two())
                    .ok_or("expected a power-of-two value after .align")?;
                if after_ptr {
                    continue; // pointee alignment
                }
                if align.replace(n).is_some() {
                    return Err("duplicate .align".to_string());
                }
            }
            ".ptr" => {
                if kind.is_none() || after_ptr {
                    return Err(".ptr must follow the type once".to_string());
                }
                after_ptr = true;
            }
            ".global" | ".const" | ".local" | ".shared" => {
                if !after_ptr {
                    return Err(format!("state space {t} without .ptr"));
                }
            }
            _ if t.starts_with('.') => {
                let k = ParamKind::from_directive(t).ok_or_else(|| format!("unsupported type or qualifier {t}"))?;
                if kind.replace(k).is_some() {
                    return Err("more than one type".to_string());
                }
            }
            _ if is_identifier(t) => {
                name = Some(t.to_string());
                break;
            }
            _ => return Err(format!("unexpected token {t:?}")),
        }
    }
    let name = name.ok_or("missing parameter name")?;
    let kind = kind.ok_or("missing parameter type")?;
    let mut count: usize = 1;
    while let Some(t) = it.next() {
        if t != "[" {
            return Err(format!("unexpected token {t:?} after name"));
        }
        let n = it.next().and_then(parse_number).filter(|&n| n > 0).ok_or("expected a positive array length")?;
        if it.next() != Some("]") {
            return Err("expected ] after array length".to_string());
        }
        count = count.checked_mul(n).ok_or("array too large")?;
    }
    let size = kind.size().checked_mul(count).ok_or("array too large")?;
    Ok(PtxParam { name, kind, count, align: align.unwrap_or(kind.size()), size })
}

/// Parses the parameter list whose `(` is at `toks[open]`. Returns the
/// parameters and the index just past the closing `)`.
fn parse_param_list(toks: &[Token<'_>], open: usize, entry: &str) -> Result<(Vec<PtxParam>, usize), PtxParseError> {
    let unterminated = || PtxParseError::UnterminatedParamList { entry: entry.to_string(), line: toks[open].line };
    let rest = &toks[open + 1..];
    let close = rest
        .iter()
        .position(|t| matches!(t.text, ")" | "(" | "{" | "}" | ";" | ".entry" | ".func"))
        .filter(|&i| rest[i].text == ")")
        .ok_or_else(unterminated)?;
    let inner = &rest[..close];
    let mut params = Vec::new();
    if !inner.is_empty() {
        for (index, chunk) in inner.split(|t| t.text == ",").enumerate() {
            let param = parse_param(chunk).map_err(|reason| PtxParseError::BadParam {
                entry: entry.to_string(),
                index,
                line: chunk.first().map_or(toks[open].line, |t| t.line),
                reason,
            })?;
            params.push(param);
        }
    }
    Ok((params, open + 1 + close + 1))
}

/// Adds `entry`, skipping an identical repeat and rejecting a conflicting one.
fn push_entry(entries: &mut Vec<PtxEntry>, entry: PtxEntry, line: usize) -> Result<(), PtxParseError> {
    match entries.iter().find(|e| e.name == entry.name) {
        Some(old) if *old == entry => Ok(()),
        Some(_) => Err(PtxParseError::ConflictingEntry { entry: entry.name, line }),
        None => {
            entries.push(entry);
            Ok(())
        }
    }
}

/// Parses every `.entry` of a PTX module, in order of appearance.
///
/// `.func` declarations are skipped; an entry without a parameter list or
/// with `()` has no parameters. Malformed input gives an error, never a
/// panic.
pub fn parse_entries(ptx: &str) -> Result<Vec<PtxEntry>, PtxParseError> {
    let text = strip_comments(ptx)?;
    let toks = tokenize(&text);
    let mut entries = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].text != ".entry" {
            i += 1;
            continue;
        }
        let line = toks[i].line;
        let name = toks
            .get(i + 1)
            .map(|t| t.text)
            .filter(|t| is_identifier(t))
            .ok_or(PtxParseError::MissingEntryName { line })?;
        let (params, next) = if toks.get(i + 2).map(|t| t.text) == Some("(") {
            parse_param_list(&toks, i + 2, name)?
        } else {
            (Vec::new(), i + 2)
        };
        let entry = PtxEntry { name: name.to_string(), params };
        push_entry(&mut entries, entry, line)?;
        i = next;
    }
    Ok(entries)
}

/// The first entry called `name`.
pub fn find_entry<'a>(entries: &'a [PtxEntry], name: &str) -> Option<&'a PtxEntry> {
    entries.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NVCC_ADD: &str = r#"//
// Generated by NVIDIA NVVM Compiler
//
// Compiler Build ID: CL-34097967
// Cuda compilation tools, release 12.4, V12.4.131
// Based on NVVM 7.0.1
//

.version 8.4
.target sm_52
.address_size 64

	// .globl	_Z3addPfS_S_i

.visible .entry _Z3addPfS_S_i(
	.param .u64 _Z3addPfS_S_i_param_0,
	.param .u64 _Z3addPfS_S_i_param_1,
	.param .u64 _Z3addPfS_S_i_param_2,
	.param .u32 _Z3addPfS_S_i_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	.reg .f32 	%f<4>;
	.reg .b64 	%rd<11>;


	ld.param.u64 	%rd1, [_Z3addPfS_S_i_param_0];
	ld.param.u64 	%rd2, [_Z3addPfS_S_i_param_1];
	ld.param.u64 	%rd3, [_Z3addPfS_S_i_param_2];
	ld.param.u32 	%r2, [_Z3addPfS_S_i_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;

	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.f32 	%f1, [%rd8];
	ld.global.f32 	%f2, [%rd6];
	add.f32 	%f3, %f2, %f1;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.f32 	[%rd10], %f3;

$L__BB0_2:
	ret;

}
"#;

    fn p(name: &str, kind: ParamKind, count: usize, align: usize) -> PtxParam {
        PtxParam { name: name.to_string(), kind, count, align, size: kind.size() * count }
    }

    #[test]
    fn nvcc_style_entry() {
        let e = parse_entries(NVCC_ADD).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].name, "_Z3addPfS_S_i");
        let n = "_Z3addPfS_S_i_param_";
        assert_eq!(
            e[0].params,
            vec![
                p(&format!("{n}0"), ParamKind::U64, 1, 8),
                p(&format!("{n}1"), ParamKind::U64, 1, 8),
                p(&format!("{n}2"), ParamKind::U64, 1, 8),
                p(&format!("{n}3"), ParamKind::U32, 1, 4),
            ]
        );
        assert_eq!(e[0].params[3].size, 4);
    }

    #[test]
    fn hand_written_entry() {
        let src = ".entry fc_add_f32(.param .u64 a, .param .u64 b, .param .u64 out, .param .u32 n)\n{\n ret;\n}\n";
        let e = parse_entries(src).unwrap();
        let names: Vec<&str> = e[0].params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(e[0].name, "fc_add_f32");
        assert_eq!(names, ["a", "b", "out", "n"]);
        let sizes: Vec<usize> = e[0].params.iter().map(|p| p.size).collect();
        assert_eq!(sizes, [8, 8, 8, 4]);
    }

    #[test]
    fn array_params() {
        let src = ".visible .entry k(\n\t.param .align 4 .b8 p[12],\n\t.param .align 8 .b8 q[16],\n\t.param .f32 r[2][3]\n)\n{ ret; }";
        let e = parse_entries(src).unwrap();
        assert_eq!(
            e[0].params,
            vec![p("p", ParamKind::B8, 12, 4), p("q", ParamKind::B8, 16, 8), p("r", ParamKind::F32, 6, 4),]
        );
        assert_eq!(e[0].params[0].size, 12);
        assert_eq!(e[0].params[2].size, 24);
    }

    #[test]
    fn ptr_qualifiers() {
        let src = ".visible .entry k(\n\t.param .u64 .ptr .global .align 4 k_param_0,\n\t.param .u64 .ptr .const .align 16 k_param_1,\n\t.param .u64 .ptr.global.align 1 k_param_2,\n\t.param .s32 k_param_3\n)\n.maxntid 256, 1, 1\n{ ret; }";
        let e = parse_entries(src).unwrap();
        assert_eq!(
            e[0].params,
            vec![
                p("k_param_0", ParamKind::U64, 1, 8),
                p("k_param_1", ParamKind::U64, 1, 8),
                p("k_param_2", ParamKind::U64, 1, 8),
                p("k_param_3", ParamKind::S32, 1, 4),
            ]
        );
    }

    #[test]
    fn comments_ignored() {
        let src = "/* .entry fake(.param .u32 x) */\n.file 1 \"/tmp/a/*b.cu\"\n// .entry fake2()\n.visible .entry real( // trailing\n\t.param .f64 x, /* inline */ .param .f16 /* mid */ h\n)\n{ ret; }";
        let e = parse_entries(src).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].name, "real");
        assert_eq!(e[0].params, vec![p("x", ParamKind::F64, 1, 8), p("h", ParamKind::F16, 1, 2)]);
    }

    #[test]
    fn multiple_entries_and_funcs() {
        let src = ".func (.param .b32 func_retval0) helper(\n\t.param .b32 helper_param_0\n)\n{ ret; }\n\
                   .visible .func  _Z4sinkv()\n;\n\
                   .visible .entry first(.param .u64 a)\n{\n\tcall.uni (retval0), helper, (param0);\n\tret;\n}\n\
                   .weak .entry second(.param .s64 b, .param .b16 c)\n.maxntid 128, 1, 1\n.minnctapersm 2\n{ ret; }\n";
        let e = parse_entries(src).unwrap();
        let names: Vec<&str> = e.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["first", "second"]);
        assert_eq!(
            find_entry(&e, "second").map(|e| e.params.clone()),
            Some(vec![p("b", ParamKind::S64, 1, 8), p("c", ParamKind::B16, 1, 2)])
        );
        assert!(find_entry(&e, "helper").is_none());
        assert!(find_entry(&e, "nope").is_none());
    }

    #[test]
    fn zero_params() {
        let e = parse_entries(".visible .entry noop()\n{\n\tret;\n}\n").unwrap();
        assert_eq!(e[0].name, "noop");
        assert!(e[0].params.is_empty());
        let e = parse_entries(".entry bare\n{\n\tret;\n}\n").unwrap();
        assert_eq!(e[0].name, "bare");
        assert!(e[0].params.is_empty());
    }

    #[test]
    fn repeated_declaration() {
        let src = ".entry k(.param .u32 a);\n.entry k(.param .u32 a)\n{ ret; }";
        assert_eq!(parse_entries(src).unwrap().len(), 1);
        let bad = ".entry k(.param .u32 a);\n.entry k(.param .u64 a)\n{ ret; }";
        assert!(matches!(parse_entries(bad), Err(PtxParseError::ConflictingEntry { .. })));
    }

    #[test]
    fn unterminated_param_list() {
        let src = ".visible .entry k(\n\t.param .u64 a,\n\t.param .u32 n\n";
        assert_eq!(parse_entries(src), Err(PtxParseError::UnterminatedParamList { entry: "k".to_string(), line: 1 }));
        let src2 = ".entry k(.param .u64 a\n{ ret; }";
        assert!(matches!(parse_entries(src2), Err(PtxParseError::UnterminatedParamList { .. })));
    }

    #[test]
    fn malformed_inputs_error() {
        let cases = [
            ".entry",
            ".entry (",
            ".entry k(.param .u32)",
            ".entry k(.param a)",
            ".entry k(.param .pred p)",
            ".entry k(.param .u32 a,)",
            ".entry k(.param .u32 a .param .u32 b)",
            ".entry k(.param .b8 a[])",
            ".entry k(.param .b8 a[0])",
            ".entry k(.param .b8 a[4)",
            ".entry k(.param .align 3 .b8 a[4])",
            ".entry k(.param .align .b8 a[4])",
            ".entry k(.param .u32 .u64 a)",
            ".entry k(.param .global .u64 a)",
            ".entry k(.u32 a)",
            ".entry k(.param .b8 a[99999999999999999999])",
            ".entry k(.param .b64 a[4611686018427387904])",
            "/* open comment .entry k()",
            ".file 1 \"unterminated\n.entry k()",
        ];
        for src in cases {
            assert!(parse_entries(src).is_err(), "accepted: {src}");
        }
        let err = parse_entries(".entry k(.param .pred p)").err();
        assert_eq!(
            err.map(|e| e.to_string()),
            Some("line 1: entry k, parameter 0: unsupported type or qualifier .pred".to_string())
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "parses every prefix of a module (quadratic): too slow under Miri; no unsafe code")]
    fn no_panic_on_prefixes() {
        let src =
            format!("{NVCC_ADD}\n.entry k(.param .align 8 .b8 p[16], .param .u64 .ptr .global .align 4 q)\n{{ ret; }}");
        for (i, _) in src.char_indices() {
            let _ = parse_entries(&src[..i]);
        }
        assert_eq!(parse_entries(&src).map(|e| e.len()), Ok(2));
    }

    #[test]
    fn empty_module() {
        assert_eq!(parse_entries(""), Ok(vec![]));
        assert_eq!(parse_entries(".version 8.4\n.target sm_90\n"), Ok(vec![]));
    }

    #[test]
    fn kind_predicates() {
        assert!(ParamKind::F16.is_float());
        assert!(ParamKind::F64.is_float());
        assert!(!ParamKind::U32.is_float());
        assert!(ParamKind::S8.is_integer());
        assert!(ParamKind::U64.is_integer());
        assert!(!ParamKind::B32.is_integer());
        assert!(!ParamKind::B32.is_float());
        assert!(!ParamKind::F32.is_integer());
        assert_eq!(ParamKind::from_directive(".b64"), Some(ParamKind::B64));
        assert_eq!(ParamKind::from_directive(".bf16"), None);
    }
}
