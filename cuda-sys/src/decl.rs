//! The declaration types: one per kind of hand-written declaration, the
//! rows of the tables the declaration macros of [`crate::types`],
//! [`crate::constants`] and [`crate::functions`] emit. A leaf module: it
//! names no other module of the crate, so the modules that declare and the
//! one that gathers their tables ([`crate::audit`], where these types are
//! public) never import each other back.

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
