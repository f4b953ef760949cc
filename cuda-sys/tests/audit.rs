//! Audit of every hand-written declaration in `cuda-sys` against NVIDIA's
//! `cuda.h` / `cudaTypedefs.h` of CUDA 12 and CUDA 13.
//!
//! The headers are fetched by `scripts/fetch-cuda-headers.sh` into
//! `<workspace>/.headers/cuda-{12,13}/` (or the directory named by
//! `FC_CUDA_HEADERS_DIR`). bindgen translates them; its output is parsed with
//! syn into a model of the header's typedefs, constants, structs and layout
//! numbers. Both sides are reduced to a canonical type form (typedef chains
//! resolved, C scalar names mapped to fixed-width ones) and compared.
//!
//! Structs and unions are checked alike: size, alignment, and every field's
//! offset and type (a member bindgen asserts no offset of, an anonymous
//! union, at the offset C gives it after the previous field). A union may declare a subset of the header's members
//! (they are alternatives; the headers of CUDA 12.9 and 13.0 list different
//! ones), but every member it declares must be the header's.
//!
//! Entry points are checked at every ABI the loader may resolve: the newest
//! (`audit::functions()`) and the older ones it falls back to on older
//! drivers (`audit::older_abis()`, e.g. `cuGraphExecUpdate` 10020). The
//! driver double's ABI history (`tests/abi_history.txt`) is checked to be
//! the headers' `PFN_<name>_v<N>` typedefs, exactly.
//!
//! The audit enumerates the tables in `cuda_sys::audit`, which the
//! declaration macros emit from the declared tokens: there is no hand-kept
//! list here. Without the headers or libclang the audit skips with a visible
//! `[SKIP]` line, unless `FC_REQUIRE_AUDIT=1` (scripts/test.sh, CI) makes that a
//! failure; `FC_SKIP_HEADER_AUDIT=1` skips it on request.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use cuda_sys::audit::{self, AliasDecl, ConstDecl, FunctionDecl, StructDecl, UnionDecl};
use cuda_sys::functions::proc_address::BOOTSTRAP;

/// (label used in messages, sub-directory of the headers directory).
const HEADER_SETS: &[(&str, &str)] = &[("CUDA 12", "cuda-12"), ("CUDA 13", "cuda-13")];
/// The headers each set must contain.
const HEADER_FILES: &[&str] = &["cuda.h", "cudaTypedefs.h"];
const SKIP_ENV: &str = "FC_SKIP_HEADER_AUDIT";
const REQUIRE_ENV: &str = "FC_REQUIRE_AUDIT";
const DIR_ENV: &str = "FC_CUDA_HEADERS_DIR";

// ---------------------------------------------------------------------------
// Canonical types
// ---------------------------------------------------------------------------

/// A type with every typedef resolved and C scalar names mapped to
/// fixed-width Rust ones (x86-64 Linux, LP64).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Canon {
    /// A scalar: `i32`, `u64`, `usize`, `void`, ...
    Prim(&'static str),
    /// A struct or union, by name (opaque handles included).
    Named(String),
    Ptr {
        mutable: bool,
        to: Box<Canon>,
    },
    Array(Box<Canon>, i128),
    /// A function pointer (bindgen's `Option<unsafe extern "C" fn>` or ours).
    Fn(Vec<Canon>, Box<Canon>),
    /// `()`, a function without a return value.
    Unit,
    /// Tokens the canonicaliser does not understand (always a mismatch).
    Unknown(String),
}

impl fmt::Display for Canon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Canon::Prim(p) => write!(f, "{p}"),
            Canon::Named(n) => write!(f, "{n}"),
            Canon::Ptr { mutable, to } => {
                write!(f, "*{} {to}", if *mutable { "mut" } else { "const" })
            }
            Canon::Array(elem, n) => write!(f, "[{elem}; {n}]"),
            Canon::Fn(params, ret) => {
                let ps: Vec<String> = params.iter().map(|p| p.to_string()).collect();
                write!(f, "fn({}) -> {ret}", ps.join(", "))
            }
            Canon::Unit => write!(f, "()"),
            Canon::Unknown(t) => write!(f, "<unparsed: {t}>"),
        }
    }
}

/// The fixed-width name of a Rust or C scalar type name.
fn primitive(name: &str) -> Option<&'static str> {
    Some(match name {
        "c_char" | "c_schar" | "i8" => "i8",
        "c_uchar" | "u8" => "u8",
        "c_short" | "i16" => "i16",
        "c_ushort" | "u16" => "u16",
        "c_int" | "i32" => "i32",
        "c_uint" | "u32" => "u32",
        "c_long" | "c_longlong" | "i64" => "i64",
        "c_ulong" | "c_ulonglong" | "u64" => "u64",
        "usize" | "size_t" => "usize",
        "isize" | "ssize_t" => "isize",
        "c_float" | "f32" => "f32",
        "c_double" | "f64" => "f64",
        "c_void" => "void",
        "bool" => "bool",
        _ => return None,
    })
}

/// Typedefs as syn types, by name: bindgen's `pub type` / `pub use X as Y`,
/// or our `audit::aliases()`.
type Typedefs = HashMap<String, syn::Type>;

/// How deep a typedef chain may go before it is taken for a loop.
const MAX_DEPTH: usize = 64;

/// The canonical form of `ty`, resolving names through `defs`.
fn canon(ty: &syn::Type, defs: &Typedefs) -> Canon {
    canon_depth(ty, defs, 0)
}

/// The canonical form of the type written as `tokens` (e.g. `* mut c_int`).
fn canon_str(tokens: &str, defs: &Typedefs) -> Canon {
    match syn::parse_str::<syn::Type>(tokens) {
        Ok(ty) => canon(&ty, defs),
        Err(_) => Canon::Unknown(tokens.to_string()),
    }
}

fn canon_depth(ty: &syn::Type, defs: &Typedefs, depth: usize) -> Canon {
    if depth > MAX_DEPTH {
        return Canon::Unknown(format!("typedef loop at {}", tokens(ty)));
    }
    match ty {
        syn::Type::Ptr(p) => {
            Canon::Ptr { mutable: p.mutability.is_some(), to: Box::new(canon_depth(&p.elem, defs, depth + 1)) }
        }
        syn::Type::Array(a) => match int_value(&a.len) {
            Some(n) => Canon::Array(Box::new(canon_depth(&a.elem, defs, depth + 1)), n),
            None => Canon::Unknown(tokens(ty)),
        },
        syn::Type::Paren(p) => canon_depth(&p.elem, defs, depth + 1),
        syn::Type::Group(g) => canon_depth(&g.elem, defs, depth + 1),
        syn::Type::Tuple(t) if t.elems.is_empty() => Canon::Unit,
        syn::Type::BareFn(f) => canon_fn(f, defs, depth),
        syn::Type::Path(p) => canon_path(p, defs, depth),
        _ => Canon::Unknown(tokens(ty)),
    }
}

fn canon_fn(f: &syn::TypeBareFn, defs: &Typedefs, depth: usize) -> Canon {
    let params = f.inputs.iter().map(|a| canon_depth(&a.ty, defs, depth + 1)).collect();
    let ret = match &f.output {
        syn::ReturnType::Default => Canon::Unit,
        syn::ReturnType::Type(_, t) => canon_depth(t, defs, depth + 1),
    };
    Canon::Fn(params, Box::new(ret))
}

fn canon_path(p: &syn::TypePath, defs: &Typedefs, depth: usize) -> Canon {
    let Some(last) = p.path.segments.last() else {
        return Canon::Unknown(tokens(&syn::Type::Path(p.clone())));
    };
    let name = last.ident.to_string();
    if name == "Option" {
        if let Some(inner) = option_inner(last) {
            return canon_depth(inner, defs, depth + 1);
        }
    }
    if let Some(prim) = primitive(&name) {
        return Canon::Prim(prim);
    }
    match defs.get(&name) {
        Some(target) => canon_depth(target, defs, depth + 1),
        None => Canon::Named(name),
    }
}

/// `T` of `Option<T>` when `T` is a function pointer (bindgen's nullable
/// function pointers).
fn option_inner(seg: &syn::PathSegment) -> Option<&syn::Type> {
    let syn::PathArguments::AngleBracketed(args) = &seg.arguments else {
        return None;
    };
    match args.args.first() {
        Some(syn::GenericArgument::Type(t @ syn::Type::BareFn(_))) => Some(t),
        _ => None,
    }
}

fn tokens(ty: &syn::Type) -> String {
    quote::quote!(#ty).to_string()
}

/// The value of an integer constant expression as bindgen writes them:
/// literals, negation, parentheses and casts.
fn int_value(e: &syn::Expr) -> Option<i128> {
    match e {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse::<i128>().ok(),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => int_value(&u.expr).map(|v| -v),
        syn::Expr::Paren(p) => int_value(&p.expr),
        syn::Expr::Group(g) => int_value(&g.expr),
        syn::Expr::Cast(c) => int_value(&c.expr),
        _ => None,
    }
}

/// Our typedefs, from `audit::aliases()`.
fn our_typedefs() -> Typedefs {
    audit::aliases().iter().filter_map(|a| Some((a.name.to_string(), syn::parse_str(a.target).ok()?))).collect()
}

// ---------------------------------------------------------------------------
// The header model
// ---------------------------------------------------------------------------

/// Size, alignment and field offsets from bindgen's layout assertions.
#[derive(Debug, Default)]
struct Layout {
    size: Option<i128>,
    align: Option<i128>,
    offsets: HashMap<String, i128>,
}

/// A constant of the header: value, and its enum type when it is an
/// enumerator (macros carry a type bindgen guessed, which is not compared).
#[derive(Debug)]
struct HeaderConst {
    value: i128,
    enum_type: Option<Canon>,
}

/// What the audit needs of one header set, all canonicalised (syn types are
/// not `Sync`, so they are not kept).
#[derive(Debug)]
struct Header {
    label: &'static str,
    /// Every typedef, resolved.
    types: HashMap<String, Canon>,
    consts: HashMap<String, HeaderConst>,
    /// Struct and union fields, in order.
    fields: HashMap<String, Vec<(String, Canon)>>,
    /// Which of `fields` are unions (the others are structs).
    unions: HashSet<String>,
    layouts: HashMap<String, Layout>,
}

/// Everything collected from bindgen's output before canonicalisation.
#[derive(Default)]
struct RawHeader {
    typedefs: Typedefs,
    consts: Vec<(String, syn::Type, i128)>,
    fields: Vec<(String, Vec<(String, syn::Type)>)>,
    unions: HashSet<String>,
    layouts: HashMap<String, Layout>,
}

/// Runs bindgen over `cuda.h` + `cudaTypedefs.h` in `dir`.
fn run_bindgen(dir: &std::path::Path) -> Result<String, String> {
    let wrapper: String = HEADER_FILES.iter().map(|f| format!("#include <{f}>\n")).collect();
    let bindings = bindgen::Builder::default()
        .header_contents("fc_audit_wrapper.h", &wrapper)
        .clang_arg(format!("-I{}", dir.display()))
        .with_codegen_config(bindgen::CodegenConfig::TYPES | bindgen::CodegenConfig::VARS)
        .prepend_enum_name(false)
        .layout_tests(true)
        .generate_comments(false)
        .derive_debug(false)
        .derive_copy(false);
    // bindgen panics ("Unable to find libclang") when libclang cannot be loaded.
    let generated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bindings.generate())).map_err(|_| {
        "bindgen could not load libclang (install it with scripts/deps.sh or set LIBCLANG_PATH)".to_string()
    })?;
    let bindings = generated.map_err(|e| format!("bindgen failed on {}: {e}", dir.display()))?;
    Ok(bindings.to_string())
}

/// Parses bindgen's output into the raw model.
fn parse_bindings(src: &str) -> Result<RawHeader, String> {
    let file = syn::parse_file(src).map_err(|e| format!("cannot parse bindgen output: {e}"))?;
    let mut raw = RawHeader::default();
    for item in &file.items {
        collect_item(item, &mut raw);
    }
    Ok(raw)
}

fn collect_item(item: &syn::Item, raw: &mut RawHeader) {
    match item {
        syn::Item::Type(t) => {
            raw.typedefs.insert(t.ident.to_string(), (*t.ty).clone());
        }
        syn::Item::Use(u) => collect_use(&u.tree, raw),
        syn::Item::Const(c) if c.ident == "_" => collect_layout(&c.expr, &mut raw.layouts),
        syn::Item::Const(c) => {
            if let Some(v) = int_value(&c.expr) {
                raw.consts.push((c.ident.to_string(), (*c.ty).clone(), v));
            }
        }
        syn::Item::Struct(s) if is_bindgen_union(s) => {
            // bindgen's union without `Copy` members: a struct of
            // `__BindgenUnionField<T>` plus a `bindgen_union_field` of the size.
            let fields = s
                .fields
                .iter()
                .filter(|f| f.ident.as_ref().is_some_and(|i| i != BINDGEN_UNION_STORAGE))
                .filter_map(named_field)
                .map(|(n, t)| (n, bindgen_union_member(t)))
                .collect();
            raw.fields.push((s.ident.to_string(), fields));
            raw.unions.insert(s.ident.to_string());
        }
        syn::Item::Struct(s) => {
            let fields = s.fields.iter().filter_map(named_field).collect();
            raw.fields.push((s.ident.to_string(), fields));
        }
        syn::Item::Union(u) => {
            let fields = u.fields.named.iter().filter_map(named_field).collect();
            raw.fields.push((u.ident.to_string(), fields));
            raw.unions.insert(u.ident.to_string());
        }
        _ => {}
    }
}

/// The storage member bindgen adds to a union it writes as a struct.
const BINDGEN_UNION_STORAGE: &str = "bindgen_union_field";
/// The wrapper type of each member of such a union.
const BINDGEN_UNION_WRAPPER: &str = "__BindgenUnionField";

fn is_bindgen_union(s: &syn::ItemStruct) -> bool {
    s.fields.iter().any(|f| f.ident.as_ref().is_some_and(|i| i == BINDGEN_UNION_STORAGE))
}

/// `T` of `__BindgenUnionField<T>`; any other type unchanged.
fn bindgen_union_member(ty: syn::Type) -> syn::Type {
    if let syn::Type::Path(p) = &ty {
        if let Some(seg) = p.path.segments.last().filter(|s| s.ident == BINDGEN_UNION_WRAPPER) {
            if let syn::PathArguments::AngleBracketed(args) = &seg.arguments {
                if let Some(syn::GenericArgument::Type(inner)) = args.args.first() {
                    return inner.clone();
                }
            }
        }
    }
    ty
}

fn named_field(f: &syn::Field) -> Option<(String, syn::Type)> {
    Some((f.ident.as_ref()?.to_string(), f.ty.clone()))
}

/// `pub use self::X as Y;` is bindgen's typedef of an enum: Y = X.
fn collect_use(tree: &syn::UseTree, raw: &mut RawHeader) {
    match tree {
        syn::UseTree::Path(p) => collect_use(&p.tree, raw),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| collect_use(t, raw)),
        syn::UseTree::Rename(r) => {
            let target = syn::Type::Path(syn::TypePath { qself: None, path: syn::Path::from(r.ident.clone()) });
            raw.typedefs.insert(r.rename.to_string(), target);
        }
        _ => {}
    }
}

/// Reads `const _: () = { ["Size of X"][size_of::<X>() - 16usize]; ... };`.
fn collect_layout(expr: &syn::Expr, layouts: &mut HashMap<String, Layout>) {
    let syn::Expr::Block(block) = expr else {
        return;
    };
    for stmt in &block.block.stmts {
        if let syn::Stmt::Expr(e, _) = stmt {
            if let Some((label, n)) = layout_assertion(e) {
                record_layout(&label, n, layouts);
            }
        }
    }
}

/// `["label"][expr - N]` → (label, N).
fn layout_assertion(e: &syn::Expr) -> Option<(String, i128)> {
    let syn::Expr::Index(ix) = e else {
        return None;
    };
    let syn::Expr::Array(arr) = &*ix.expr else {
        return None;
    };
    let Some(syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(label), .. })) = arr.elems.first() else {
        return None;
    };
    let syn::Expr::Binary(bin) = &*ix.index else {
        return None;
    };
    Some((label.value(), int_value(&bin.right)?))
}

fn record_layout(label: &str, n: i128, layouts: &mut HashMap<String, Layout>) {
    if let Some(name) = label.strip_prefix("Size of ") {
        layouts.entry(name.to_string()).or_default().size = Some(n);
    } else if let Some(name) = label.strip_prefix("Alignment of ") {
        layouts.entry(name.to_string()).or_default().align = Some(n);
    } else if let Some(rest) = label.strip_prefix("Offset of field: ") {
        if let Some((name, field)) = rest.split_once("::") {
            let layout = layouts.entry(name.to_string()).or_default();
            layout.offsets.insert(field.to_string(), n);
        }
    }
}

/// Canonicalises everything in `raw`.
fn canonicalise(label: &'static str, raw: RawHeader) -> Header {
    let defs = &raw.typedefs;
    let types = defs.iter().map(|(name, ty)| (name.clone(), canon(ty, defs))).collect();
    let consts = raw
        .consts
        .iter()
        .map(|(name, ty, value)| {
            let enum_type = is_enum_type(ty).then(|| canon(ty, defs));
            (name.clone(), HeaderConst { value: *value, enum_type })
        })
        .collect();
    let fields = raw
        .fields
        .iter()
        .map(|(name, fs)| {
            let fs = fs.iter().map(|(f, t)| (f.clone(), canon(t, defs))).collect();
            (name.clone(), fs)
        })
        .collect();
    Header { label, types, consts, fields, unions: raw.unions, layouts: raw.layouts }
}

/// Whether a constant's declared type is a named (enum) type rather than a
/// scalar bindgen picked for a `#define`.
fn is_enum_type(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| primitive(&s.ident.to_string()).is_none()),
        _ => false,
    }
}

fn load_header(label: &'static str, dir: &std::path::Path) -> Result<Header, String> {
    let src = run_bindgen(dir)?;
    let raw = parse_bindings(&src)?;
    Ok(canonicalise(label, raw))
}

// ---------------------------------------------------------------------------
// Locating the headers
// ---------------------------------------------------------------------------

fn headers_dir() -> PathBuf {
    match std::env::var_os(DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.headers")),
    }
}

fn skip_requested() -> bool {
    std::env::var(SKIP_ENV).is_ok_and(|v| v == "1")
}

/// The header files missing from the headers directory.
fn missing_header_files(dir: &std::path::Path) -> Vec<PathBuf> {
    HEADER_SETS
        .iter()
        .flat_map(|(_, sub)| HEADER_FILES.iter().map(move |f| dir.join(sub).join(f)))
        .filter(|p| !p.is_file())
        .collect()
}

/// Both header models, built once per test process (bindgen runs one at a
/// time).
fn headers() -> &'static Result<Vec<Header>, String> {
    static HEADERS: OnceLock<Result<Vec<Header>, String>> = OnceLock::new();
    HEADERS.get_or_init(build_headers)
}

fn build_headers() -> Result<Vec<Header>, String> {
    let dir = headers_dir();
    let missing = missing_header_files(&dir);
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
        return Err(format!(
            "CUDA headers missing: {}\nRun `scripts/fetch-cuda-headers.sh` (or point {DIR_ENV} \
             at a directory with cuda-12/ and cuda-13/), or set {SKIP_ENV}=1 to skip the audit.",
            list.join(", ")
        ));
    }
    HEADER_SETS.iter().map(|(label, sub)| load_header(label, &dir.join(sub))).collect()
}

/// The header models, or `None` when the audit is skipped: on request
/// (`FC_SKIP_HEADER_AUDIT=1`), or because the headers or libclang are
/// missing and `FC_REQUIRE_AUDIT=1` (set by `scripts/test.sh` and CI) is not
/// set. A skip prints one `[SKIP]` line past the test harness's capture.
fn headers_or_skip() -> Option<&'static [Header]> {
    if skip_requested() {
        skip_line(&format!("{SKIP_ENV}=1"));
        return None;
    }
    match headers() {
        Ok(h) => Some(h),
        Err(msg) if !require_requested() => {
            skip_line(msg.lines().next().unwrap_or("headers unavailable"));
            None
        }
        Err(msg) => panic!("{REQUIRE_ENV}=1 and the audit cannot run: {msg}"),
    }
}

fn require_requested() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

/// Writes straight to stderr: libtest captures `eprintln!`, not this.
fn skip_line(reason: &str) {
    use std::io::Write;
    let line = format!(
        "[SKIP] cuda-sys header audit: {reason} (scripts/fetch-cuda-headers.sh fetches the headers; \
         {REQUIRE_ENV}=1 makes this a failure)\n"
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

// ---------------------------------------------------------------------------
// Comparisons: each returns the mismatches it found, as readable lines.
// ---------------------------------------------------------------------------

/// Compares one entry point with the header's `PFN_<name>_v<abi>`.
fn check_function(decl: &FunctionDecl, h: &Header, ours: &Typedefs) -> Vec<String> {
    let pfn = format!("PFN_{}_v{}", decl.name, decl.abi_version);
    let at = format!("{} ({pfn}, {})", decl.name, h.label);
    let Some(header_ty) = h.types.get(&pfn) else {
        let have = abi_versions(decl.name, h);
        return vec![format!("{at}: the header has no {pfn} (it has ABI versions {have:?})")];
    };
    let Canon::Fn(header_params, header_ret) = header_ty else {
        return vec![format!("{at}: {pfn} is not a function pointer but {header_ty}")];
    };
    let mut out = Vec::new();
    if decl.params.len() != header_params.len() {
        out.push(format!("{at}: ours has {} parameters, header {}", decl.params.len(), header_params.len()));
    }
    for (i, ((pname, pty), hty)) in decl.params.iter().zip(header_params).enumerate() {
        let oty = canon_str(pty, ours);
        if &oty != hty {
            out.push(format!("{at}: parameter {} '{pname}': ours {oty}, header {hty}", i + 1));
        }
    }
    let oret = canon_str(decl.ret, ours);
    if &oret != header_ret.as_ref() {
        out.push(format!("{at}: return type: ours {oret}, header {header_ret}"));
    }
    out
}

/// The ABI versions the header has `PFN_<name>_v<N>` typedefs for, sorted.
fn abi_versions(name: &str, h: &Header) -> Vec<i32> {
    let prefix = format!("PFN_{name}_v");
    let mut v: Vec<i32> = h.types.keys().filter_map(|k| k.strip_prefix(&prefix)?.parse().ok()).collect();
    v.sort_unstable();
    v
}

/// Compares one struct's size, alignment, field offsets and field types.
fn check_struct(decl: &StructDecl, h: &Header, ours: &Typedefs) -> Vec<String> {
    let at = format!("struct {} ({})", decl.name, h.label);
    let (Some(layout), Some(fields)) = (h.layouts.get(decl.name), h.fields.get(decl.name)) else {
        return vec![format!("{at}: the header has no struct {}", decl.name)];
    };
    if h.unions.contains(decl.name) {
        return vec![format!("{at}: the header declares {} as a union", decl.name)];
    }
    let mut out = Vec::new();
    if layout.size != Some(decl.size as i128) {
        out.push(format!("{at}: size: ours {}, header {:?}", decl.size, layout.size));
    }
    if layout.align != Some(decl.align as i128) {
        out.push(format!("{at}: alignment: ours {}, header {:?}", decl.align, layout.align));
    }
    if fields.len() != decl.fields.len() {
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        out.push(format!(
            "{at}: ours has {} fields, header {} ({})",
            decl.fields.len(),
            fields.len(),
            names.join(", ")
        ));
    }
    let offsets = header_offsets(layout, fields, h);
    for (fname, offset, fty) in decl.fields {
        out.extend(check_field(&at, fname, *offset, fty, &offsets, fields, ours));
    }
    out
}

/// The header's field offsets of one struct: bindgen's assertions, plus,
/// for members it asserts no offset of (anonymous unions and structs,
/// `__bindgen_anon_N`), the offset C gives them: the end of the previous
/// field rounded up to the member's alignment, all from the header's own
/// sizes and alignments. Left out when a size is unknown.
fn header_offsets(layout: &Layout, fields: &[(String, Canon)], h: &Header) -> HashMap<String, i128> {
    let mut offsets = layout.offsets.clone();
    let mut end: Option<i128> = Some(0);
    for (name, ty) in fields {
        let size_align = size_align(ty, h);
        let offset = match offsets.get(name) {
            Some(&o) => Some(o),
            None => {
                let derived = end.zip(size_align).map(|(e, (_, a))| (e + a - 1) / a * a);
                if let Some(o) = derived {
                    offsets.insert(name.clone(), o);
                }
                derived
            }
        };
        end = offset.zip(size_align).map(|(o, (s, _))| o + s);
    }
    offsets
}

/// (size, alignment) of a canonical type on x86-64 Linux, from the header's
/// layouts for structs and unions.
fn size_align(ty: &Canon, h: &Header) -> Option<(i128, i128)> {
    match ty {
        Canon::Prim(p) => {
            let n = match *p {
                "i8" | "u8" | "bool" => 1,
                "i16" | "u16" => 2,
                "i32" | "u32" | "f32" => 4,
                "i64" | "u64" | "f64" | "usize" | "isize" => 8,
                _ => return None,
            };
            Some((n, n))
        }
        Canon::Ptr { .. } | Canon::Fn(..) => Some((8, 8)),
        Canon::Array(elem, n) => size_align(elem, h).map(|(s, a)| (s * n, a)),
        Canon::Named(name) => {
            let l = h.layouts.get(name)?;
            l.size.zip(l.align)
        }
        Canon::Unit | Canon::Unknown(_) => None,
    }
}

/// Compares one union's size and alignment, and each member it declares
/// (offset 0 in the header, same type). Members the header has and we do
/// not declare are allowed; their count is returned for the summary.
fn check_union(decl: &UnionDecl, h: &Header, ours: &Typedefs) -> (Vec<String>, usize) {
    let at = format!("union {} ({})", decl.name, h.label);
    let (Some(layout), Some(fields)) = (h.layouts.get(decl.name), h.fields.get(decl.name)) else {
        return (vec![format!("{at}: the header has no union {}", decl.name)], 0);
    };
    if !h.unions.contains(decl.name) {
        return (vec![format!("{at}: the header declares {} as a struct", decl.name)], 0);
    }
    let mut out = Vec::new();
    if layout.size != Some(decl.size as i128) {
        out.push(format!("{at}: size: ours {}, header {:?}", decl.size, layout.size));
    }
    if layout.align != Some(decl.align as i128) {
        out.push(format!("{at}: alignment: ours {}, header {:?}", decl.align, layout.align));
    }
    for (fname, fty) in decl.fields {
        out.extend(check_field(&at, fname, 0, fty, &layout.offsets, fields, ours));
    }
    let undeclared = fields.iter().filter(|(n, _)| !decl.fields.iter().any(|(f, _)| f == n)).count();
    (out, undeclared)
}

fn check_field(
    at: &str,
    fname: &str,
    offset: usize,
    fty: &str,
    offsets: &HashMap<String, i128>,
    fields: &[(String, Canon)],
    ours: &Typedefs,
) -> Vec<String> {
    let Some((_, hty)) = fields.iter().find(|(n, _)| n == fname) else {
        return vec![format!("{at}: field '{fname}' is not in the header")];
    };
    let mut out = Vec::new();
    match offsets.get(fname) {
        Some(&h_off) if h_off == offset as i128 => {}
        h_off => out.push(format!("{at}: field '{fname}' offset: ours {offset}, header {h_off:?}")),
    }
    let oty = canon_str(fty, ours);
    if &oty != hty {
        out.push(format!("{at}: field '{fname}' type: ours {oty}, header {hty}"));
    }
    out
}

/// Compares one constant's value (and, for enumerators, its type).
fn check_constant(decl: &ConstDecl, h: &Header, ours: &Typedefs) -> Vec<String> {
    let at = format!("{} ({})", decl.name, h.label);
    let Some(hc) = h.consts.get(decl.name) else {
        return vec![format!("{at}: the header has no constant {}", decl.name)];
    };
    let mut out = Vec::new();
    if hc.value != decl.value {
        out.push(format!("{at}: value: ours {}, header {}", decl.value, hc.value));
    }
    if let Some(hty) = &hc.enum_type {
        let oty = canon_str(decl.ty, ours);
        if &oty != hty {
            out.push(format!("{at}: type {}: ours {oty}, header {hty}", decl.ty));
        }
    }
    out
}

/// Compares one alias with the header's typedef of that name; `None` when
/// the header has no such name (an alias of our own).
fn check_alias(decl: &AliasDecl, h: &Header, ours: &Typedefs) -> Option<Vec<String>> {
    let hty = h.types.get(decl.name)?;
    let oty = canon_str(decl.target, ours);
    if &oty == hty {
        return Some(Vec::new());
    }
    Some(vec![format!("type {} ({}): ours {} = {oty}, header {hty}", decl.name, h.label, decl.target)])
}

// ---------------------------------------------------------------------------
// The audit
// ---------------------------------------------------------------------------

/// The audit of one header set.
#[derive(Default)]
struct Report {
    functions: usize,
    structs: usize,
    unions: usize,
    /// Header union members we do not declare (allowed; informational).
    union_members_undeclared: usize,
    constants: usize,
    aliases: usize,
    /// Our aliases the header has no typedef of.
    aliases_ours_only: Vec<&'static str>,
    mismatches: Vec<String>,
    /// Newer ABIs the header has than the one we pin (informational).
    notes: Vec<String>,
}

fn all_functions() -> impl Iterator<Item = &'static FunctionDecl> {
    audit::functions().iter().chain(audit::older_abis()).chain(BOOTSTRAP.iter())
}

fn audit_header(h: &Header, ours: &Typedefs) -> Report {
    let mut r = Report::default();
    for f in all_functions() {
        r.functions += 1;
        r.mismatches.extend(check_function(f, h, ours));
        r.notes.extend(newer_abi_note(f, h));
    }
    for s in audit::structs() {
        r.structs += 1;
        r.mismatches.extend(check_struct(s, h, ours));
    }
    for u in audit::unions() {
        r.unions += 1;
        let (m, undeclared) = check_union(u, h, ours);
        r.mismatches.extend(m);
        r.union_members_undeclared += undeclared;
    }
    for c in audit::constants() {
        r.constants += 1;
        r.mismatches.extend(check_constant(c, h, ours));
    }
    for a in audit::aliases() {
        match check_alias(a, h, ours) {
            Some(m) => {
                r.aliases += 1;
                r.mismatches.extend(m);
            }
            None => r.aliases_ours_only.push(a.name),
        }
    }
    r
}

/// A note when the header has a newer ABI of `f` than any we resolve.
fn newer_abi_note(f: &FunctionDecl, h: &Header) -> Option<String> {
    let newest = *abi_versions(f.name, h).last()?;
    let ours_newest = all_functions().filter(|g| g.name == f.name).map(|g| g.abi_version).max()?;
    (newest > ours_newest && f.abi_version == ours_newest)
        .then(|| format!("{}: {} has ABI v{newest}, we pin v{}", f.name, h.label, f.abi_version))
}

#[test]
fn declarations_match_cuda_headers() {
    let Some(headers) = headers_or_skip() else {
        return;
    };
    let ours = our_typedefs();
    let mut failures = Vec::new();
    for h in headers {
        let r = audit_header(h, &ours);
        println!(
            "{}: audited {} functions, {} structs, {} unions ({} header members not declared), \
             {} constants, {} aliases ({} aliases of our own, not in the header: {:?})",
            h.label,
            r.functions,
            r.structs,
            r.unions,
            r.union_members_undeclared,
            r.constants,
            r.aliases,
            r.aliases_ours_only.len(),
            r.aliases_ours_only
        );
        for n in &r.notes {
            println!("  note: {n}");
        }
        failures.extend(r.mismatches);
    }
    assert!(
        failures.is_empty(),
        "{} declaration(s) differ from the CUDA headers:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// The versions `N` of every `PFN_<name>_v<N>` typedef in the text of a
/// `cudaTypedefs.h`, including the legacy ones under
/// `__CUDA_API_VERSION_INTERNAL` (e.g. `cuMemAlloc` 2000, the 32-bit ABI
/// before 3.2), which drivers still serve for requests below their
/// successors and which bindgen's model (without that macro) does not see.
fn typedef_versions_in_text(name: &str, text: &str) -> Vec<i32> {
    let needle = format!("*PFN_{name}_v");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(&needle) {
        rest = &rest[at + needle.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if rest[digits.len()..].starts_with(')') {
            if let Ok(v) = digits.parse() {
                out.push(v);
            }
        }
    }
    out
}

/// The ABI history the driver double serves is NVIDIA's: for every entry
/// point of the table, the versions of its `PFN_<name>_v<N>` typedefs in
/// the CUDA 12 and 13 headers (their union, legacy ones included), and
/// nothing else.
#[test]
fn driver_double_history_is_the_headers() {
    let Some(headers) = headers_or_skip() else {
        return;
    };
    // The history as the driver double (`fc_driver_double`) serves it.
    let history: std::collections::BTreeMap<String, Vec<i32>> = match fc_driver_double::abi::history() {
        Ok(h) => h.into_iter().collect(),
        Err(e) => panic!("tests/abi_history.txt: {e}"),
    };
    let header_texts: Vec<String> = HEADER_SETS
        .iter()
        .map(|(_, sub)| {
            let path = headers_dir().join(sub).join("cudaTypedefs.h");
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect();
    let mut names: Vec<&str> = audit::functions().iter().chain(audit::older_abis()).map(|f| f.name).collect();
    names.sort_unstable();
    names.dedup();
    let mut failures = Vec::new();
    for name in &names {
        let mut want: Vec<i32> = header_texts.iter().flat_map(|t| typedef_versions_in_text(name, t)).collect();
        // Every version bindgen's model has is in the text too.
        want.extend(headers.iter().flat_map(|h| abi_versions(name, h)));
        want.sort_unstable();
        want.dedup();
        let line = format!("{name} {}", want.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" "));
        match history.get(*name) {
            Some(have) if *have == want => {}
            Some(have) => failures.push(format!("{name}: history {have:?}, headers {want:?} (want the line `{line}`)")),
            None => failures.push(format!("{name} is not in the history (add the line `{line}`)")),
        }
    }
    for name in history.keys() {
        if !names.contains(&name.as_str()) {
            failures.push(format!("{name} is in the history but not in the table"));
        }
    }
    println!(
        "driver double history: {} entry points, {} ABIs",
        history.len(),
        history.values().map(Vec::len).sum::<usize>()
    );
    assert!(failures.is_empty(), "tests/abi_history.txt differs from the headers:\n  {}", failures.join("\n  "));
}

/// The older ABIs are audited like the newest: changing one is reported.
#[test]
fn older_abis_are_audited() {
    let Some(headers) = headers_or_skip() else {
        return;
    };
    let ours = our_typedefs();
    let old = audit::older_abis().iter().find(|f| f.name == "cuGraphExecUpdate" && f.abi_version == 10020);
    let Some(old) = old else { panic!("the table lists cuGraphExecUpdate 10020") };
    assert!(audit::older_abis().iter().any(|f| f.name == "cuGraphGetEdges" && f.abi_version == 10000));
    for h in headers {
        assert_eq!(check_function(old, h, &ours), Vec::<String>::new());
        // Typed as the 12.0 ABI's single result pointer: reported.
        let as_new = FunctionDecl { params: &old.params[..3], ..*old };
        assert_reports(
            &check_function(&as_new, h, &ours),
            &["PFN_cuGraphExecUpdate_v10020", "ours has 3 parameters, header 4"],
        );
        let retyped = with_param_type(old, 3, "*mut CUgraphExecUpdateResultInfo");
        assert_reports(&check_function(&retyped, h, &ours), &["parameter 4 'updateResult_out'"]);
    }
}

#[test]
fn our_aliases_all_parse() {
    for a in audit::aliases() {
        assert!(syn::parse_str::<syn::Type>(a.target).is_ok(), "alias {} = {} does not parse", a.name, a.target);
    }
}

// ---------------------------------------------------------------------------
// The audit catches changed declarations.
// ---------------------------------------------------------------------------

fn find_fn(name: &str) -> &'static FunctionDecl {
    all_functions().find(|f| f.name == name).unwrap()
}

/// `decl` with parameter `index` retyped to `ty`.
fn with_param_type(decl: &FunctionDecl, index: usize, ty: &'static str) -> FunctionDecl {
    let mut params = decl.params.to_vec();
    params[index].1 = ty;
    FunctionDecl { params: Box::leak(params.into_boxed_slice()), ..*decl }
}

fn assert_reports(mismatches: &[String], needles: &[&str]) {
    let joined = mismatches.join("\n");
    for needle in needles {
        assert!(joined.contains(needle), "expected a mismatch mentioning {needle:?}, got: {joined:?}");
    }
}

#[test]
fn changed_declarations_are_reported() {
    let Some(headers) = headers_or_skip() else {
        return;
    };
    let ours = our_typedefs();
    for h in headers {
        check_changed_function(h, &ours);
        check_changed_constant(h, &ours);
        check_changed_struct(h, &ours);
        check_changed_union(h, &ours);
        check_changed_alias(h, &ours);
    }
}

fn check_changed_function(h: &Header, ours: &Typedefs) {
    let orig = find_fn("cuMemAlloc");
    assert_eq!(check_function(orig, h, ours), Vec::<String>::new());
    let changed = with_param_type(orig, 1, "c_int");
    let m = check_function(&changed, h, ours);
    assert_reports(&m, &["cuMemAlloc", "PFN_cuMemAlloc_v3020", "parameter 2 'bytesize'", "ours i32, header usize"]);

    let fewer = FunctionDecl { params: &orig.params[..1], ..*orig };
    assert_reports(&check_function(&fewer, h, ours), &["cuMemAlloc", "ours has 1 parameters, header 2"]);

    let wrong_ret = FunctionDecl { ret: "c_int", ..*orig };
    assert_reports(&check_function(&wrong_ret, h, ours), &["return type: ours i32, header u32"]);

    let wrong_abi = FunctionDecl { abi_version: 3021, ..*orig };
    assert_reports(&check_function(&wrong_abi, h, ours), &["has no PFN_cuMemAlloc_v3021"]);

    // A const/mut change of a pointer is a difference too.
    let getname = find_fn("cuGetErrorName");
    let mutated = with_param_type(getname, 1, "*mut *mut c_char");
    assert_reports(&check_function(&mutated, h, ours), &["cuGetErrorName", "parameter 2 'pStr'"]);
}

fn check_changed_constant(h: &Header, ours: &Typedefs) {
    let orig = audit::constants().iter().find(|c| c.name == "CUDA_ERROR_NOT_FOUND").unwrap();
    assert_eq!(check_constant(orig, h, ours), Vec::<String>::new());
    let changed = ConstDecl { value: orig.value + 1, ..*orig };
    assert_reports(&check_constant(&changed, h, ours), &["CUDA_ERROR_NOT_FOUND", "ours 501, header 500"]);
    let retyped = ConstDecl { ty: "c_int", ..*orig };
    assert_reports(&check_constant(&retyped, h, ours), &["CUDA_ERROR_NOT_FOUND", "ours i32, header u32"]);
}

fn check_changed_struct(h: &Header, ours: &Typedefs) {
    let orig = audit::structs().iter().find(|s| s.name == "CUgraphExecUpdateResultInfo_st").unwrap();
    assert_eq!(check_struct(orig, h, ours), Vec::<String>::new());
    let mut fields = orig.fields.to_vec();
    fields[1].1 += 4;
    let moved = StructDecl { fields: Box::leak(fields.into_boxed_slice()), ..*orig };
    assert_reports(
        &check_struct(&moved, h, ours),
        &["CUgraphExecUpdateResultInfo_st", "field 'errorNode' offset: ours 12"],
    );
    let bigger = StructDecl { size: orig.size + 8, ..*orig };
    assert_reports(&check_struct(&bigger, h, ours), &["CUgraphExecUpdateResultInfo_st", "size: ours 32"]);

    // An anonymous member (no offset assertion from bindgen) is checked at
    // the offset C gives it.
    let res = audit::structs().iter().find(|s| s.name == "CUdevResource_st").unwrap();
    assert_eq!(check_struct(res, h, ours), Vec::<String>::new());
    let mut fields = res.fields.to_vec();
    fields[2].1 += 4;
    let moved = StructDecl { fields: Box::leak(fields.into_boxed_slice()), ..*res };
    assert_reports(&check_struct(&moved, h, ours), &["field '__bindgen_anon_1' offset: ours 100, header Some(96)"]);

    // Any node's parameters: 256 bytes, the anonymous union at 16 (no
    // offset assertion from bindgen: derived), the conditional member's
    // fields at the header's offsets.
    let params = audit::structs().iter().find(|s| s.name == "CUgraphNodeParams_st").unwrap();
    assert_eq!(check_struct(params, h, ours), Vec::<String>::new());
    assert_eq!((params.size, params.align), (256, 8));
    let mut fields = params.fields.to_vec();
    fields[2].1 += 8;
    let moved = StructDecl { fields: Box::leak(fields.into_boxed_slice()), ..*params };
    assert_reports(&check_struct(&moved, h, ours), &["field '__bindgen_anon_1' offset: ours 24, header Some(16)"]);
    let cond = audit::structs().iter().find(|s| s.name == "CUDA_CONDITIONAL_NODE_PARAMS").unwrap();
    assert_eq!(check_struct(cond, h, ours), Vec::<String>::new());
    let mut fields = cond.fields.to_vec();
    fields[2].2 = "c_int";
    let retyped = StructDecl { fields: Box::leak(fields.into_boxed_slice()), ..*cond };
    assert_reports(&check_struct(&retyped, h, ours), &["field 'size' type: ours i32, header u32"]);
}

fn check_changed_union(h: &Header, ours: &Typedefs) {
    let orig = audit::unions().iter().find(|u| u.name == "CUlaunchAttributeValue_union").unwrap();
    let (m, undeclared) = check_union(orig, h, ours);
    assert_eq!(m, Vec::<String>::new());
    assert!(undeclared > 0, "the header's union has members we leave out, which is allowed");

    let smaller = UnionDecl { size: 32, ..*orig };
    assert_reports(
        &check_union(&smaller, h, ours).0,
        &["union CUlaunchAttributeValue_union", "size: ours 32, header Some(64)"],
    );
    let looser = UnionDecl { align: 4, ..*orig };
    assert_reports(&check_union(&looser, h, ours).0, &["alignment: ours 4, header Some(8)"]);

    let mut fields = orig.fields.to_vec();
    let i = fields.iter().position(|(n, _)| *n == "programmaticStreamSerializationAllowed").unwrap();
    fields[i].1 = "c_uint";
    let retyped = UnionDecl { fields: Box::leak(fields.into_boxed_slice()), ..*orig };
    assert_reports(
        &check_union(&retyped, h, ours).0,
        &["field 'programmaticStreamSerializationAllowed' type: ours u32, header i32"],
    );

    let mut fields = orig.fields.to_vec();
    fields.push(("notAMember", "c_int"));
    let extra = UnionDecl { fields: Box::leak(fields.into_boxed_slice()), ..*orig };
    assert_reports(&check_union(&extra, h, ours).0, &["field 'notAMember' is not in the header"]);

    // A struct declared as a union, and the reverse, are reported.
    let as_union = UnionDecl { name: "CUlaunchAttribute_st", size: 72, align: 8, fields: &[] };
    assert_reports(&check_union(&as_union, h, ours).0, &["declares CUlaunchAttribute_st as a struct"]);
    let as_struct = StructDecl { name: orig.name, size: orig.size, align: orig.align, fields: &[] };
    assert_reports(&check_struct(&as_struct, h, ours), &["declares CUlaunchAttributeValue_union as a union"]);

    // The anonymous union of CUgraphNodeParams: 232 bytes; its kernel member
    // is the header's v3 struct (not v2, the same layout by another name).
    let node = audit::unions().iter().find(|u| u.name == "CUgraphNodeParams_st__bindgen_ty_1").unwrap();
    let (m, undeclared) = check_union(node, h, ours);
    assert_eq!(m, Vec::<String>::new());
    assert!(undeclared > 0, "a member per node type in the header");
    assert_eq!((node.size, node.align), (232, 8));
    let mut fields = node.fields.to_vec();
    let i = fields.iter().position(|(n, _)| *n == "kernel").unwrap();
    fields[i].1 = "CUDA_KERNEL_NODE_PARAMS_v2";
    let retyped = UnionDecl { fields: Box::leak(fields.into_boxed_slice()), ..*node };
    assert_reports(&check_union(&retyped, h, ours).0, &["field 'kernel' type"]);
}

fn check_changed_alias(h: &Header, ours: &Typedefs) {
    let orig = audit::aliases().iter().find(|a| a.name == "CUdeviceptr_v2").unwrap();
    assert_eq!(check_alias(orig, h, ours), Some(Vec::new()));
    let changed = AliasDecl { target: "c_uint", ..*orig };
    let m = check_alias(&changed, h, ours).unwrap_or_default();
    assert_reports(&m, &["CUdeviceptr_v2", "ours c_uint = u32, header u64"]);
}
