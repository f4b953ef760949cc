//! What the double reads of a PTX module: its ISA version and target, its
//! kernels with their parameter layouts, and the functions it declares
//! `.extern`. Nothing is compiled here: the kernel models above this
//! module (native, or the PTX interpreter) run what it parses.

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Byte offset in the parameter buffer.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
    /// What it is, as far as the models care.
    pub ty: ParamType,
}

/// A parameter's type class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `.u64`, `.s64`, `.b64` (pointers among them).
    U64,
    /// `.u32`, `.s32`, `.b32`.
    U32,
    /// `.f32`.
    F32,
    /// Anything else (`.f64`, 16- and 8-bit scalars, byte arrays).
    Other,
}

/// One `.entry`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// Its parameters, in order.
    pub params: Vec<Param>,
    /// Its body's text (between its braces; none for a declaration).
    pub body: Option<String>,
}

impl Entry {
    /// The parameters' names, in order.
    pub fn param_names(&self) -> Vec<String> {
        self.params.iter().map(|p| p.name.clone()).collect()
    }

    /// The parameter buffer's size.
    pub fn param_bytes(&self) -> usize {
        self.params.last().map(|p| p.offset + p.size).unwrap_or(0)
    }
}

/// A parsed module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ptx {
    /// `.version M.m` as `M * 10 + m`.
    pub isa: i32,
    /// `.target sm_XY` as `XY`.
    pub target: i32,
    /// The kernels.
    pub entries: Vec<Entry>,
    /// Functions declared `.extern .func`.
    pub externs: Vec<String>,
}

/// Drops `//` and `/* */` comments.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else {
            let start = i;
            while i < b.len() && b[i] != b'/' {
                i += 1;
            }
            if i == start {
                out.push('/');
                i += 1;
            } else {
                out.push_str(&src[start..i]);
            }
        }
    }
    out
}

fn scalar(ty: &str) -> Option<(usize, ParamType)> {
    Some(match ty {
        ".u64" | ".s64" | ".b64" => (8, ParamType::U64),
        ".f64" => (8, ParamType::Other),
        ".u32" | ".s32" | ".b32" => (4, ParamType::U32),
        ".f32" => (4, ParamType::F32),
        ".u16" | ".s16" | ".b16" | ".f16" => (2, ParamType::Other),
        ".u8" | ".s8" | ".b8" => (1, ParamType::Other),
        _ => return None,
    })
}

/// One `.param` declaration's size and alignment, e.g. `.param .u64 a`,
/// `.param .u64 .ptr .global .align 4 a`, `.param .align 8 .b8 s[24]`.
fn param(decl: &str) -> Result<(String, usize, usize, ParamType), String> {
    let words: Vec<&str> = decl.split_whitespace().collect();
    if words.first() != Some(&".param") {
        return Err(format!("not a parameter: {decl:?}"));
    }
    let mut align = None;
    let mut ty = None;
    let mut name = "";
    let mut i = 1;
    while i < words.len() {
        let w = words[i];
        if w == ".align" {
            align = words.get(i + 1).and_then(|a| a.parse::<usize>().ok());
            i += 2;
            continue;
        }
        if let Some(t) = scalar(w) {
            if ty.is_none() {
                ty = Some(t);
            }
        } else if !w.starts_with('.') {
            name = w;
        }
        i += 1;
    }
    let (elem, class) = ty.ok_or_else(|| format!("parameter without a type: {decl:?}"))?;
    let count = match name.split_once('[') {
        Some((_, n)) => n.trim_end_matches(']').parse::<usize>().map_err(|_| format!("bad array: {decl:?}"))?,
        None => 1,
    };
    let class = if count == 1 { class } else { ParamType::Other };
    let size = elem * count;
    // A `.ptr` pointer's `.align` is its pointee's; the parameter itself
    // is aligned to its own size.
    let align = if decl.contains(".ptr") { elem } else { align.unwrap_or(elem) };
    let base = name.split('[').next().unwrap_or(name).to_string();
    Ok((base, size, align.max(1), class))
}

/// The PTX instructions the double's JIT accepts (the ISA's, by base name).
const OPCODES: &[&str] = &[
    "abs",
    "activemask",
    "add",
    "addc",
    "alloca",
    "and",
    "applypriority",
    "atom",
    "bar",
    "barrier",
    "bfe",
    "bfi",
    "bfind",
    "bmsk",
    "bra",
    "brev",
    "brkpt",
    "brx",
    "call",
    "clz",
    "cnot",
    "copysign",
    "cos",
    "cp",
    "createpolicy",
    "cvt",
    "cvta",
    "discard",
    "div",
    "dp2a",
    "dp4a",
    "elect",
    "ex2",
    "exit",
    "fence",
    "fma",
    "fns",
    "getctarank",
    "griddepcontrol",
    "isspacep",
    "istypep",
    "ld",
    "ldmatrix",
    "ldu",
    "lg2",
    "lop3",
    "mad",
    "mad24",
    "madc",
    "mapa",
    "match",
    "max",
    "mbarrier",
    "membar",
    "min",
    "mma",
    "mov",
    "movmatrix",
    "mul",
    "mul24",
    "multimem",
    "nanosleep",
    "neg",
    "not",
    "or",
    "pmevent",
    "popc",
    "prefetch",
    "prefetchu",
    "prmt",
    "rcp",
    "red",
    "redux",
    "rem",
    "ret",
    "rsqrt",
    "sad",
    "selp",
    "set",
    "setmaxnreg",
    "setp",
    "shf",
    "shfl",
    "shl",
    "shr",
    "sin",
    "slct",
    "sqrt",
    "st",
    "stackrestore",
    "stacksave",
    "stmatrix",
    "sub",
    "subc",
    "suld",
    "suq",
    "sured",
    "sust",
    "szext",
    "tanh",
    "testp",
    "tex",
    "tld4",
    "trap",
    "txq",
    "vabsdiff",
    "vabsdiff2",
    "vabsdiff4",
    "vadd",
    "vadd2",
    "vadd4",
    "vavrg2",
    "vavrg4",
    "vmad",
    "vmax",
    "vmax2",
    "vmax4",
    "vmin",
    "vmin2",
    "vmin4",
    "vote",
    "vset",
    "vset2",
    "vset4",
    "vshl",
    "vshr",
    "vsub",
    "vsub2",
    "vsub4",
    "wgmma",
    "wmma",
    "xor",
    "tcgen05",
    "clusterlaunchcontrol",
    "st.async",
    "red.async",
];

/// Checks every instruction of the module's function bodies against the
/// ISA's opcodes: the first unknown one is the error.
fn check_instructions(text: &str) -> Result<(), String> {
    let mut depth = 0usize;
    let mut stmt = String::new();
    for c in text.chars() {
        match c {
            '{' => {
                depth += 1;
                stmt.clear();
            }
            '}' => {
                depth = depth.saturating_sub(1);
                stmt.clear();
            }
            ';' if depth > 0 => {
                check_statement(&stmt)?;
                stmt.clear();
            }
            _ if depth > 0 => stmt.push(c),
            _ => {}
        }
    }
    if depth > 0 {
        return Err("unexpected end of file: a '{' is never closed".to_string());
    }
    Ok(())
}

fn check_statement(stmt: &str) -> Result<(), String> {
    let mut s = stmt.trim();
    // Labels (`$L__done:`) and predicates (`@%p1`, `@!%p1`).
    while let Some((label, rest)) = s.split_once(':') {
        if label.trim().chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$') && !label.trim().is_empty() {
            s = rest.trim();
        } else {
            break;
        }
    }
    if let Some(rest) = s.strip_prefix('@') {
        s = rest.split_once(char::is_whitespace).map(|(_, r)| r.trim()).unwrap_or("");
    }
    if s.is_empty() || s.starts_with('.') {
        return Ok(());
    }
    let word = s.split_whitespace().next().unwrap_or("");
    let base = word.split('.').next().unwrap_or("");
    if OPCODES.contains(&base) {
        Ok(())
    } else {
        Err(format!("unknown instruction '{word}'"))
    }
}

/// Parses a module's PTX text.
pub fn parse(src: &str) -> Result<Ptx, String> {
    let text = strip_comments(src);
    check_instructions(&text)?;
    let mut isa = None;
    let mut target = None;
    let mut externs = Vec::new();
    let mut entries = Vec::new();
    let tokens: Vec<&str> = text.split_whitespace().collect();
    for (i, t) in tokens.iter().enumerate() {
        match *t {
            ".version" => {
                let v = tokens.get(i + 1).ok_or(".version without a number")?;
                let (a, b) = v.split_once('.').ok_or_else(|| format!("bad .version {v}"))?;
                isa = Some(
                    a.parse::<i32>().map_err(|_| format!("bad .version {v}"))? * 10
                        + b.parse::<i32>().map_err(|_| format!("bad .version {v}"))?,
                );
            }
            ".target" => {
                let v = tokens.get(i + 1).ok_or(".target without an architecture")?;
                let arch = v.trim_end_matches(',').trim_start_matches("sm_").trim_end_matches(['a', 'f']);
                target = Some(arch.parse::<i32>().map_err(|_| format!("bad .target {v}"))?);
            }
            _ => {}
        }
    }
    // Entries and externs, from the text (parameter lists span lines).
    let mut rest = text.as_str();
    while let Some(at) = rest.find(".entry") {
        let after = &rest[at + ".entry".len()..];
        let open = after.find('(');
        let body = after.find('{');
        let name_end = [open, body, after.find(';')].into_iter().flatten().min().unwrap_or(after.len());
        let name = after[..name_end].trim().to_string();
        if name.is_empty() {
            return Err(".entry without a name".to_string());
        }
        let mut params = Vec::new();
        let mut after_params = name_end;
        if let (Some(o), true) = (open, open < body || body.is_none()) {
            let close = after[o..].find(')').ok_or_else(|| format!("{name}: unclosed parameter list"))? + o;
            after_params = close + 1;
            let mut offset: usize = 0;
            for decl in after[o + 1..close].split(',').map(str::trim).filter(|d| !d.is_empty()) {
                let (pname, size, align, ty) = param(decl).map_err(|e| format!("{name}: {e}"))?;
                offset = offset.div_ceil(align) * align;
                params.push(Param { name: pname, offset, size, ty });
                offset += size;
            }
        }
        // The body: from the next '{' (unless a ';' ends a declaration
        // first) to its matching '}'.
        let tail = &after[after_params..];
        let (body, used) = match (tail.find('{'), tail.find(';')) {
            (Some(b), semi) if semi.is_none_or(|s| b < s) => {
                let mut depth = 0usize;
                let mut end = None;
                for (i, c) in tail[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(b + i);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let end = end.ok_or_else(|| format!("{name}: a body never closed"))?;
                (Some(tail[b + 1..end].to_string()), after_params + end + 1)
            }
            _ => (None, name_end),
        };
        entries.push(Entry { name, params, body });
        rest = &after[used..];
    }
    let mut rest = text.as_str();
    while let Some(at) = rest.find(".extern") {
        let after = &rest[at + ".extern".len()..];
        let words: Vec<&str> = after.split_whitespace().take(4).collect();
        if words.first() == Some(&".func") {
            if let Some(n) = words.iter().skip(1).find(|w| !w.starts_with('.') && !w.starts_with('(')) {
                externs.push(n.trim_end_matches(['(', ';']).to_string());
            }
        }
        rest = after;
    }
    Ok(Ptx {
        isa: isa.ok_or("no .version directive")?,
        target: target.ok_or("no .target directive")?,
        entries,
        externs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_entries_and_layouts() {
        let src = "// c\n.version 7.8\n.target sm_90\n.address_size 64\n\
            .extern .func cudaGraphSetConditional\n(\n.param .b64 a,\n.param .b32 b\n)\n;\n\
            .visible .entry k(\n\t.param .u64 a, /* x */\n\t.param .u32 n,\n\t.param .u64 .ptr .global .align 4 p,\n\
            \t.param .align 4 .b8 s[12],\n\t.param .f32 f\n)\n{ ret; }\n.visible .entry empty()\n{ ret; }\n";
        let p = parse(src).expect("parses");
        assert_eq!((p.isa, p.target), (78, 90));
        assert_eq!(p.externs, ["cudaGraphSetConditional"]);
        assert_eq!(p.entries.len(), 2);
        let k = &p.entries[0];
        assert_eq!(k.name, "k");
        let layout: Vec<(usize, usize)> = k.params.iter().map(|p| (p.offset, p.size)).collect();
        assert_eq!(layout, [(0, 8), (8, 4), (16, 8), (24, 12), (36, 4)]);
        assert_eq!(k.params[4].ty, ParamType::F32);
        assert_eq!(k.param_bytes(), 40);
        assert_eq!(p.entries[1].params, []);
        assert_eq!(p.entries[0].body.as_deref(), Some(" ret; "));
        assert!(parse(".target sm_35").is_err(), "no version");
        let bad =
            ".version 7.0\n.target sm_35\n.visible .entry b(.param .u32 n)\n{\n\tfrobnicate.f32 %f1, %f2;\n\tret;\n}\n";
        assert_eq!(parse(bad).err().as_deref(), Some("unknown instruction 'frobnicate.f32'"));
        let cut = ".version 7.0\n.target sm_35\n.visible .entry b(.param .u32 n)\n{\n\tret;\n";
        assert!(parse(cut).is_err(), "a body cut short");
    }

    #[test]
    fn reads_the_librarys_kernels() {
        for src in [
            include_str!("../../fc-graph/kernels/elementwise.ptx"),
            include_str!("../../fc-graph/kernels/elementwise_sm90.ptx"),
            include_str!("../../fc-graph/kernels/conditional.ptx"),
        ] {
            let p = parse(src).expect("the library's PTX parses");
            assert!(!p.entries.is_empty());
        }
    }
}
