//! Hand-audited bindings of the CUDA **driver** API subset that fc-graph uses.
//!
//! Nothing here links against `libcuda`: [`Driver::load`] opens the library at
//! run time with `libloading`, reads the driver's version, and resolves
//! every entry point through `cuGetProcAddress` with the exact ABI version
//! written next to its declaration in [`functions`] (or an older ABI listed
//! there, with its own type, where the driver predates the newest). A missing library or symbol is a
//! [`LoadError`], never a panic.
//!
//! Layout:
//! - [`types`]: scalar typedefs, opaque handles and structs;
//! - [`constants`]: enum values and flags;
//! - [`functions`]: the entry-point table (name, ABI version, signature,
//!   required or optional, oldest driver that has it);
//! - [`loader`]: opening the library and filling the table, never
//!   requesting an ABI above the driver's version;
//! - [`adapt`]: calls that hide which ABI of an entry the driver gave;
//! - [`result`]: the checked-call layer, one safe-as-possible function per
//!   entry point returning `Result<T, DriverError>`: the only way the
//!   workspace's other crates call the driver (see its docs for how errors
//!   map and which calls are `unsafe`, and why);
//! - [`audit`]: the machine-readable description of all of the above, which
//!   `tests/audit.rs` compares against NVIDIA's `cuda.h` for CUDA 12 and 13.

#![allow(non_camel_case_types, non_snake_case)]
#![warn(missing_docs)]

pub mod adapt;
pub mod audit;
pub mod constants;
mod decl;
mod error;
pub mod functions;
pub mod loader;
pub mod result;
pub mod types;

pub use adapt::{GraphEdge, GraphExecUpdate};
pub use constants::*;
pub use error::{LoadError, FC_CUDA_LIBRARY_ENV};
pub use functions::{DriverFns, Resolved};
pub use loader::Driver;
pub use result::DriverError;
pub use types::*;

/// Oldest driver API version the library supports: CUDA 11.4 (driver 470).
pub const MIN_DRIVER_VERSION: i32 = 11040;
