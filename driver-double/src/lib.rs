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
//!
//! # Layers
//!
//! Each module imports only modules of the layers below it (no circles):
//!
//! 1. **Leaves**, importing nothing of the double: [`config`] (what the
//!    environment asks for), [`handle`] (handle values and the tables that
//!    hold objects), [`report`] (misuse reports), [`memory`] (device memory),
//!    [`ptx`] (what a PTX module declares), [`thread`] (each thread's
//!    context stack, capture mode and id), [`calls`] (calls per ABI,
//!    `cuGetProcAddress`'s requests), and the test side, [`probe`].
//! 2. **Kernels**: [`kernel_run`] (what a running kernel sees, why it
//!    faults), below [`interp`] (the PTX interpreter), below [`kernels`]
//!    (the native models and the [`kernels::Model`] of each function).
//! 3. **Objects** ([`objects`]): the driver's objects as data (contexts,
//!    streams and events, graphs, executables, modules, captures, links,
//!    units of work) with the methods that need only the object.
//! 4. **State** ([`state`]): the one [`state::State`] that holds every
//!    object, its lock, and [`state::entry`], which every call goes
//!    through.
//! 5. **Behaviour** ([`sim`]): `impl State` blocks, one file per area; the
//!    files import only the layers below, never each other.
//! 6. **Entry points** ([`api`]): one `extern "C"` function per ABI, one
//!    file per area.
//! 7. **Tables and control**: [`abi`] (every ABI, implemented or a misuse
//!    stub, and `cuGetProcAddress`'s contract), [`control`] (what the
//!    `fc_double_*` functions do), and at the top [`exports`](mod@exports) (the macros
//!    that define the libraries' exports).

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
