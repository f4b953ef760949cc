//! The C ABI of `libfcgraph.so`, declared in `include/cuda/fc_cuda.h`.
//!
//! Every export runs its body under [`status`], [`handle_or_null`] or
//! [`value`]: failures become a status code (or NULL) plus a thread-local
//! message for `fc_last_error()`, and a panic is caught here, never
//! crossing into C. The opaque handle types come from the header itself
//! (bindgen, at build time), and `header_check` proves at compile time that
//! every function the header declares is exported with that exact type.

use std::cell::RefCell;
use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use ::fc_graph::{Error, Result};

mod buffer;
mod context;
mod graph;
mod info;
mod kernel;

pub use buffer::*;
pub use context::*;
pub use graph::*;
pub use info::*;
pub use kernel::*;

/// The header's declarations: bindgen's translation of
/// `include/cuda/fc_cuda.h`, committed as `src/header_bindings.rs` and
/// checked against the header by `build.rs` whenever libclang is available.
#[allow(non_camel_case_types, non_upper_case_globals, dead_code, missing_docs)]
pub mod header {
    include!("header_bindings.rs");
}

/// Compile-time proof that the exports match the header (see `build.rs`).
#[allow(non_camel_case_types, unused_imports)]
mod header_check {
    use super::header::*;
    include!(concat!(env!("OUT_DIR"), "/fc_cuda_h_check.rs"));
}

/// How many functions `fc_cuda.h` declares (each checked at compile time).
pub const HEADER_FUNCTION_COUNT: usize = header_check::HEADER_FUNCTIONS;

pub use header::{fc_break_fn, fc_buffer, fc_cuda_ctx, fc_graph, fc_kernel, fc_module};

/// The header's status code for an error.
pub fn status_code(e: &Error) -> c_int {
    let code = match e {
        Error::InvalidArgument(_) => header::FC_ERR_INVALID_ARGUMENT,
        Error::NoDriver(_) => header::FC_ERR_NO_DRIVER,
        Error::Cuda { code, .. } if *code == cuda_sys::CUDA_ERROR_OUT_OF_MEMORY => header::FC_ERR_OUT_OF_MEMORY,
        Error::Cuda { .. } => header::FC_ERR_CUDA,
        Error::WrongDevice(_) => header::FC_ERR_WRONG_DEVICE,
        Error::BufferTooSmall(_) => header::FC_ERR_BUFFER_TOO_SMALL,
        Error::CaptureState(_) => header::FC_ERR_CAPTURE_STATE,
        Error::Unsupported { .. } => header::FC_ERR_UNSUPPORTED,
        Error::Callback(_) => header::FC_ERR_CALLBACK,
        Error::Panic(_) => header::FC_ERR_INTERNAL,
    };
    code as c_int
}

thread_local! {
    static LAST_ERROR: RefCell<(c_int, CString)> = RefCell::new((0, CString::default()));
}

/// Records `e` as this thread's last error and returns its status code.
pub(crate) fn record(e: &Error) -> c_int {
    let code = status_code(e);
    let msg = CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = (code, msg));
    code
}

/// Pointer to this thread's last error message (valid until the next failure).
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().1.as_ptr())
}

/// This thread's last error code.
pub(crate) fn last_error_code() -> c_int {
    LAST_ERROR.with(|l| l.borrow().0)
}

fn panic_error(p: Box<dyn std::any::Any + Send>) -> Error {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    Error::Panic(msg)
}

/// Runs `f`, returning FC_OK or the recorded error's code.
pub(crate) fn status(f: impl FnOnce() -> Result<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => record(&e),
        Err(p) => record(&panic_error(p)),
    }
}

/// Runs `f`, returning its value or `fallback` after recording the error.
pub(crate) fn value<T>(fallback: T, f: impl FnOnce() -> Result<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            record(&e);
            fallback
        }
        Err(p) => {
            record(&panic_error(p));
            fallback
        }
    }
}

/// Runs a constructor, returning NULL after recording the error.
pub(crate) fn handle_or_null<T>(f: impl FnOnce() -> Result<*mut T>) -> *mut T {
    value(std::ptr::null_mut(), f)
}

/// Runs a destructor body; a panic is recorded and swallowed.
pub(crate) fn release(f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        record(&panic_error(p));
    }
}

/// Borrows the value behind a handle, refusing NULL.
///
/// # Safety
/// A non-null `p` must point at a live `T` created by this library.
pub(crate) unsafe fn deref<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: per the caller's contract, non-null means live.
    unsafe { p.as_ref() }.ok_or_else(|| Error::invalid(format!("{what} is NULL")))
}
