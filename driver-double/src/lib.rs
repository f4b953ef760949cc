//! A driver double: a simulated CUDA driver that fc-graph's CPU tests load
//! in place of `libcuda` (`FC_CUDA_LIBRARY=.../libfc_cuda_double.so`), so
//! that the engine's two-GPU test, the C suite and the Rust suites run on
//! every CI machine, none of which has a GPU.
//!
//! What it simulates:
//! - the driver's **versioning contract** at any version (11.4 to 13.x:
//!   [`abi`]), every ABI its own function, the ABIs fc-graph's table does
//!   not use reported when called;
//! - **N devices** (`FC_DOUBLE_DEVICES`, default 2) with primary, created
//!   and green contexts, each thread's context stack ([`sim::context`], [`thread`]);
//! - **memory**: host memory stands in, so memsets, copies and kernels
//!   really change bytes; every access is checked against its allocation
//!   and device ([`memory`]);
//! - **modules** of PTX, checked against the driver's ISA and the
//!   device's architecture ([`ptx`], [`sim::module`]); the JIT linker
//!   ([`objects::link`]); and **kernels run on the host** by name and signature
//!   ([`kernels`]): fc-graph's built-ins, the conditional setters, the C
//!   suite's user kernels;
//! - **streams and events**, work queued until something waits for it
//!   ([`sim::stream`]);
//! - **graphs** built node by node, captured, instantiated, updated node
//!   by node or whole, and replayed with real values, conditional nodes
//!   included ([`sim::graph`], [`sim::exec`]);
//! - **stream capture** and its rules on potentially unsafe calls: capture
//!   modes, each thread's interaction mode, invalidation ([`sim::capture`]).
//!
//! What no correct client does is a **misuse** ([`report`]): reported on
//! standard error at once and, unless taken back by a test, ending the
//! process with status 86. Faults can be injected on request
//! (`FC_DOUBLE_FAULTS`, [`config`]).
//!
//! The loadable libraries are two thin crates under `so/` (the CUDA 11
//! build has no `cuGetProcAddress_v2`, as those drivers have none); this
//! crate exports nothing itself. Tests find them with [`probe::library`]
//! and read their state through [`probe::Probe`].

pub mod abi;
pub mod api;
pub mod calls;
pub mod config;
pub mod control;
pub mod exports;
pub mod handle;
pub mod interp;
pub mod kernel_run;
pub mod kernels;
pub mod memory;
pub mod objects;
pub mod probe;
pub mod ptx;
pub mod report;
pub mod sim;
pub mod state;
pub mod thread;

pub use probe::{fresh_copy, library, Build, Probe};

/// The driver API's types, for the export tables' wrappers.
#[doc(hidden)]
pub use cuda_sys;
