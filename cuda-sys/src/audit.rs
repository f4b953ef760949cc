//! Machine-readable descriptions of every hand-written declaration.
//!
//! The declaration macros in [`crate::types`] (aliases, structs, unions),
//! [`crate::constants`] and [`crate::functions`] emit these tables from the
//! very tokens they declare, so the audit test (`tests/audit.rs`) enumerates
//! what we actually declare rather than a hand-kept list.

/// One `pub type NAME = TARGET;` declaration.
#[derive(Debug, Clone, Copy)]
pub struct AliasDecl {
    /// The alias's name.
    pub name: &'static str,
    /// The Rust type tokens of the target, as written.
    pub target: &'static str,
}

/// One `#[repr(C)]` struct with its layout as Rust computes it.
#[derive(Debug, Clone, Copy)]
pub struct StructDecl {
    /// The struct's name.
    pub name: &'static str,
    /// `size_of`, in bytes.
    pub size: usize,
    /// `align_of`, in bytes.
    pub align: usize,
    /// (field name, offset, type tokens)
    pub fields: &'static [(&'static str, usize, &'static str)],
}

/// One `#[repr(C)]` union with its layout as Rust computes it. Every
/// member of a `repr(C)` union sits at offset 0.
#[derive(Debug, Clone, Copy)]
pub struct UnionDecl {
    /// The union's name.
    pub name: &'static str,
    /// `size_of`, in bytes.
    pub size: usize,
    /// `align_of`, in bytes.
    pub align: usize,
    /// (member name, type tokens)
    pub fields: &'static [(&'static str, &'static str)],
}

/// One constant (enum value or flag).
#[derive(Debug, Clone, Copy)]
pub struct ConstDecl {
    /// The constant's name.
    pub name: &'static str,
    /// The type tokens of the constant.
    pub ty: &'static str,
    /// Its value.
    pub value: i128,
}

/// One driver entry point.
#[derive(Debug, Clone, Copy)]
pub struct FunctionDecl {
    /// Base name passed to `cuGetProcAddress`.
    pub name: &'static str,
    /// ABI version passed to `cuGetProcAddress`; the header's typedef is
    /// `PFN_<name>_v<abi_version>`.
    pub abi_version: i32,
    /// Whether loading fails without it (else the feature reports
    /// "unsupported by this driver").
    pub required: bool,
    /// (parameter name, type tokens), in order.
    pub params: &'static [(&'static str, &'static str)],
    /// The return type tokens.
    pub ret: &'static str,
}

/// All struct declarations.
pub fn structs() -> &'static [StructDecl] {
    crate::types::STRUCTS
}
/// All union declarations.
pub fn unions() -> &'static [UnionDecl] {
    crate::types::UNIONS
}
/// All typedef declarations.
pub fn aliases() -> &'static [AliasDecl] {
    crate::types::ALIASES
}
/// All constants.
pub fn constants() -> &'static [ConstDecl] {
    crate::constants::CONSTANTS
}
/// All entry points resolved through `cuGetProcAddress`, at their newest ABI.
pub fn functions() -> &'static [FunctionDecl] {
    crate::functions::FUNCTIONS
}
/// The older ABIs of entry points the loader resolves on older drivers.
pub fn older_abis() -> &'static [FunctionDecl] {
    crate::functions::OLDER_ABIS
}
/// Every ABI version the table knows for `name`, newest first.
pub fn abi_versions(name: &str) -> Vec<i32> {
    let mut v: Vec<i32> =
        functions().iter().chain(older_abis()).filter(|f| f.name == name).map(|f| f.abi_version).collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}
