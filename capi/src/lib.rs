//! The C ABI of fc-graph: `libfcgraph.so` / `libfcgraph.a`, declared in
//! `include/cuda/fc_cuda.h`.
//!
//! A thin layer: every export decodes its handles (module `handles`), calls the
//! safe layer (`fc_graph`) and turns the result into a status code (or a
//! NULL / fallback value) plus a thread-local message for
//! `fc_last_error()` (module `last_error`). Every body runs under
//! `catch_unwind`: a panic becomes `FC_ERR_INTERNAL`, never crossing into
//! C. `header_check` proves at compile time that every function the header
//! declares is exported with exactly that type.

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

mod buckets;
mod buffer;
mod cache;
mod context;
mod error;
mod fences;
mod graph;
pub(crate) mod handles;
mod hazard;
mod held;
mod info;
mod kernel;
mod last_error;
mod recording;
mod sync;

pub use buckets::*;
pub use buffer::*;
pub use cache::*;
pub use context::*;
pub use error::Error;
pub(crate) use error::Result;
pub use graph::*;
pub use info::*;
pub use kernel::*;
pub use recording::*;

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

pub use header::{
    fc_break_fn, fc_buckets, fc_buffer, fc_cuda_ctx, fc_foreign_fn, fc_graph, fc_graph_cache, fc_graph_cache_config,
    fc_graph_cache_stats, fc_kernel, fc_module, fc_record_fn,
};

/// The header's status code for an error.
pub fn status_code(e: &Error) -> c_int {
    use ::fc_graph::Error as Lib;
    use header::*;
    let code = match e {
        Error::Lib(e) => match e {
            Lib::InvalidArgument(_) => FC_ERR_INVALID_ARGUMENT,
            Lib::NoDriver(_) => FC_ERR_NO_DRIVER,
            Lib::Cuda { code, .. } if *code == cuda_sys::CUDA_ERROR_OUT_OF_MEMORY => FC_ERR_OUT_OF_MEMORY,
            Lib::Cuda { .. } => FC_ERR_CUDA,
            Lib::CaptureInvalidated { .. } => FC_ERR_CAPTURE_INVALIDATED,
            Lib::WrongDevice(_) => FC_ERR_WRONG_DEVICE,
            Lib::WrongContext(_) => FC_ERR_WRONG_CONTEXT,
            Lib::BufferTooSmall(_) => FC_ERR_BUFFER_TOO_SMALL,
            Lib::CaptureState(_) => FC_ERR_CAPTURE_STATE,
            Lib::Unsupported { .. } => FC_ERR_UNSUPPORTED,
            Lib::Callback(_) => FC_ERR_CALLBACK,
        },
        Error::InvalidHandle(_) => FC_ERR_INVALID_HANDLE,
        Error::Panic(_) => FC_ERR_INTERNAL,
    };
    code as c_int
}

fn panic_error(p: Box<dyn std::any::Any + Send>) -> Error {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    Error::Panic(msg)
}

/// Records `e` for `fc_last_error()` and returns its status code.
fn fail(e: &Error) -> c_int {
    let code = status_code(e);
    last_error::record(code, &e.to_string());
    code
}

/// [`fail`] for an export's own error, which it consumes: out of line, so
/// that an export's success path carries no error value (an [`Error`] is
/// several words; passed on, it costs copies on every call).
#[cold]
#[inline(never)]
fn failed(e: Error) -> c_int {
    fail(&e)
}

/// Runs `f` (an export's body), records its error if it fails, and then
/// runs `handles::after_call`, which may destroy an object freed while `f`
/// or another call held it. Ok: `f`'s result or the recorded error's code;
/// Err: a panic, caught.
#[inline]
fn call<T>(f: impl FnOnce() -> Result<T>) -> std::thread::Result<Result<T, c_int>> {
    catch_unwind(AssertUnwindSafe(|| {
        let r = f().map_err(failed);
        handles::after_call();
        r
    }))
}

/// A caught panic: recorded as FC_ERR_INTERNAL, whose code it returns.
#[cold]
#[inline(never)]
fn panicked(p: Box<dyn std::any::Any + Send>) -> c_int {
    fail(&panic_error(p))
}

/// Runs `f`, returning FC_OK or the recorded error's code.
#[inline]
pub(crate) fn status(f: impl FnOnce() -> Result<()>) -> c_int {
    match call(f) {
        Ok(Ok(())) => 0,
        Ok(Err(code)) => code,
        Err(p) => panicked(p),
    }
}

/// Runs `f`, returning its value or `fallback` after recording the error.
#[inline]
pub(crate) fn value<T>(fallback: T, f: impl FnOnce() -> Result<T>) -> T {
    match call(f) {
        Ok(Ok(v)) => v,
        Ok(Err(_)) => fallback,
        Err(p) => {
            panicked(p);
            fallback
        }
    }
}

/// Runs a constructor, returning NULL after recording the error.
pub(crate) fn handle_or_null<T>(f: impl FnOnce() -> Result<*mut T>) -> *mut T {
    value(std::ptr::null_mut(), f)
}

/// Runs a `void` destructor body: NULL is a no-op, an invalid handle or a
/// panic is recorded for `fc_last_error()` and swallowed.
pub(crate) fn release<C>(h: *mut C, f: impl FnOnce(*mut C) -> Result<()>) {
    if h.is_null() {
        return;
    }
    let _ = status(|| f(h));
}
