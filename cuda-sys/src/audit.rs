//! Machine-readable descriptions of every hand-written declaration.
//!
//! The declaration macros in [`crate::types`] (aliases, structs, unions),
//! [`crate::constants`] and [`crate::functions`] emit these tables from the
//! very tokens they declare, so the audit test (`tests/audit.rs`) enumerates
//! what we actually declare rather than a hand-kept list. The rows' types
//! live in a leaf module of their own, which those modules import.

pub use crate::decl::{AliasDecl, ConstDecl, FunctionDecl, StructDecl, UnionDecl};

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
    crate::functions::abi_versions(name)
}
