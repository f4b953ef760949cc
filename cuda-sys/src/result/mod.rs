//! The checked-call layer: one Rust function per driver entry point the
//! workspace uses, with typed arguments, returning
//! `Result<T, `[`DriverError`]`>`. Everything outside this crate calls the
//! driver through these functions only (`scripts/check-raw-calls.sh` checks
//! it); the raw table ([`crate::functions`]) and the ABI adapters
//! ([`crate::adapt`]) sit under it.
//!
//! ```no_run
//! use cuda_sys::result::{device, driver};
//!
//! fn first_device() -> Result<(), Box<dyn std::error::Error>> {
//!     let d = cuda_sys::Driver::load()?;
//!     driver::init(&d, 0)?;
//!     let dev = device::get(&d, 0)?;
//!     println!("{}: {} bytes", device::get_name(&d, dev)?, device::total_mem(&d, dev)?);
//!     Ok(())
//! }
//! ```
//!
//! One module per area: [`driver`] (initialisation, version, error names),
//! [`device`], [`context`] (primary and private contexts, the current
//! context), [`stream`] (streams, stream capture, the thread's capture
//! mode), [`memory`], [`module`], [`kernel`] (launches and function
//! attributes), [`link`] (the JIT linker), [`graph`] (building and
//! inspecting graphs), [`graph_exec`] (executable graphs: instantiate,
//! launch, update), [`event`] and [`green`] (green contexts).
//!
//! # Errors
//!
//! A failed call is a [`DriverError`]: the entry point's name and the
//! `CUresult` it returned, two words, `Copy`. Building it costs a compare
//! and a move, so the hottest paths (kernel launches, graph building) carry
//! it as cheaply as a bare status; turning it into a message is left to the
//! caller, out of line. [`DriverError::name`] and
//! [`DriverError::description`] ask the driver (`cuGetErrorName`,
//! `cuGetErrorString`) and fall back to `CUDA_ERROR_<code>` and
//! `unknown error`. fc-graph converts it into its own error in one cold
//! function (`From<DriverError> for fc_graph::Error`): a capture
//! invalidated (`CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`) becomes
//! `Error::CaptureInvalidated`, anything else `Error::Cuda` with the
//! driver's name and description.
//!
//! Entry points the driver may lack (the table's `optional` ones) return
//! `Option<Result<T>>`: `None` when this driver does not have the entry (no
//! call is made), so each caller says what the missing feature means.
//! Entries with several ABIs go through [`crate::adapt`], which calls
//! whichever ABI the driver gave; the result is the same either way.
//!
//! A few functions check their arguments before calling: slices that must
//! have one length (JIT options and their values, edge arrays) give
//! `CUDA_ERROR_INVALID_VALUE` without a driver call, empty slices are
//! passed as null pointers, and out-parameters are the function's own.
//!
//! # Safety
//!
//! A function is safe when the driver checks everything it is given:
//! ordinals, flags, sizes, device handles (`CUdevice` is an ordinal), and
//! addresses it only looks up (`cuPointerGetAttribute`). Calls that create
//! something (a context, stream, event, graph, allocation) are safe too.
//! A function is `unsafe` when an argument can break memory safety:
//! - **handles** (`CUcontext`, `CUstream`, `CUevent`, `CUmodule`,
//!   `CUfunction`, `CUgraph`, `CUgraphNode`, `CUgraphExec`, `CUlinkState`,
//!   `CUgreenCtx`, `CUdevResourceDesc`): the driver does not promise to
//!   detect a destroyed or made-up handle, so each must be live (and of the
//!   context the call needs current);
//! - **destroying, freeing or releasing** something: nothing may use it
//!   afterwards, and each is destroyed once;
//! - **host or device memory** the driver reads or writes (copies, memsets,
//!   JIT images and options, kernel parameter arrays, node parameters):
//!   it must be valid for that access, for asynchronous calls until the
//!   stream reaches them.
//!
//! Each `unsafe fn` says what it needs in its `# Safety` section.

use std::fmt;

use crate::constants::CUDA_SUCCESS;
use crate::types::CUresult;

pub mod context;
pub mod device;
pub mod driver;
pub mod event;
pub mod graph;
pub mod graph_exec;
pub mod green;
pub mod kernel;
pub mod link;
pub mod memory;
pub mod module;
pub mod stream;

#[cfg(test)]
mod tests;

/// A driver call that failed: which entry point, and what it returned.
/// Small and `Copy`; see the [module docs](self) for how it becomes a
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DriverError {
    /// The entry point, e.g. `"cuMemAlloc"`.
    pub call: &'static str,
    /// The status it returned (never `CUDA_SUCCESS`).
    pub code: CUresult,
}

/// The result of a checked driver call.
pub type Result<T, E = DriverError> = std::result::Result<T, E>;

impl DriverError {
    /// `Ok` for `CUDA_SUCCESS`, else the failure of `call` with `code`.
    #[inline(always)]
    pub fn check(call: &'static str, code: CUresult) -> Result<()> {
        if code == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(DriverError { call, code })
        }
    }

    /// The driver's name for the code (`cuGetErrorName`, e.g.
    /// `CUDA_ERROR_OUT_OF_MEMORY`), or `CUDA_ERROR_<code>` when it has none.
    pub fn name(&self, d: &crate::DriverFns) -> String {
        driver::error_name_or_code(d, self.code)
    }

    /// The driver's description of the code (`cuGetErrorString`), or
    /// `unknown error` when it has none.
    pub fn description(&self, d: &crate::DriverFns) -> String {
        driver::error_description_or_unknown(d, self.code)
    }
}

impl fmt::Display for DriverError {
    /// `cuMemAlloc failed: CUresult 2` (without the driver's name for the
    /// code, which needs the driver: see [`DriverError::name`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: CUresult {}", self.call, self.code)
    }
}

impl std::error::Error for DriverError {}

/// `CUDA_ERROR_INVALID_VALUE` for `call`, refused before calling (arguments
/// that disagree, such as slices of different lengths).
#[inline]
pub(crate) fn invalid(call: &'static str) -> DriverError {
    DriverError { call, code: crate::constants::CUDA_ERROR_INVALID_VALUE }
}

/// The status of an adapter ([`crate::adapt`]) as a result of `call`.
#[inline(always)]
pub(crate) fn check(call: &'static str, code: CUresult) -> Result<()> {
    DriverError::check(call, code)
}

/// A slice's address for the driver: null when it is empty (the driver
/// then reads nothing, as for an absent array).
#[inline(always)]
pub(crate) fn ptr_or_null<T>(s: &[T]) -> *const T {
    if s.is_empty() {
        std::ptr::null()
    } else {
        s.as_ptr()
    }
}

/// [`ptr_or_null`] for arrays the driver may write.
#[inline(always)]
pub(crate) fn mut_ptr_or_null<T>(s: &mut [T]) -> *mut T {
    if s.is_empty() {
        std::ptr::null_mut()
    } else {
        s.as_mut_ptr()
    }
}

/// A slice's length as the driver's `unsigned int` count, or `None` when
/// it does not fit.
#[inline]
pub(crate) fn count_u32(len: usize) -> Option<std::os::raw::c_uint> {
    std::os::raw::c_uint::try_from(len).ok()
}
