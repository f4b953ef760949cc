//! Capture, break and graph exports (captures held by the context).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{RwLock, TryLockError};

use ::fc_graph::graph::Graph;
use ::fc_graph::{CaptureMode, Context, Error as LibError, UpdateReport};

use super::context::ctx;
use super::error::{Error, Result};
use super::handles::{self, handle_kind, Live};
use super::header::{self, fc_break_fn, fc_cuda_ctx, fc_graph, fc_record_fn};
use super::held::LivePtr;
use super::{handle_or_null, release, status, value};

/// What an `fc_graph *` stands for: the graph, and how many recordings its
/// capture took.
pub(crate) struct CGraph {
    graph: RwLock<Graph<LivePtr>>,
    tries: u32,
}

handle_kind!(CGraph => fc_graph, "fc_graph");

impl CGraph {
    fn new(graph: Graph<LivePtr>, tries: u32) -> CGraph {
        CGraph { graph: RwLock::new(graph), tries }
    }

    /// Runs `f` on the graph, shared: refused while an update holds it.
    fn read<T>(&self, f: impl FnOnce(&Graph<LivePtr>) -> ::fc_graph::Result<T>) -> Result<T> {
        match self.graph.try_read() {
            Ok(g) => Ok(f(&g)?),
            Err(TryLockError::Poisoned(p)) => Ok(f(&p.into_inner())?),
            Err(TryLockError::WouldBlock) => Err(Error::capture_state("the graph is being updated on another thread")),
        }
    }

    /// Runs `f` on the graph, exclusively; `None` while it is launched or
    /// updated on another thread.
    fn write<T>(&self, f: impl FnOnce(&mut Graph<LivePtr>) -> T) -> Option<T> {
        match self.graph.try_write() {
            Ok(mut g) => Some(f(&mut g)),
            Err(TryLockError::Poisoned(p)) => Some(f(&mut p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

fn graph(g: *const fc_graph) -> Result<Live<CGraph>> {
    handles::get::<CGraph>(g, "graph")
}

pub(crate) fn capture_mode(mode: c_int) -> Result<CaptureMode> {
    match u32::try_from(mode) {
        Ok(header::FC_CAPTURE_MODE_GLOBAL) => Ok(CaptureMode::Global),
        Ok(header::FC_CAPTURE_MODE_THREAD_LOCAL) => Ok(CaptureMode::ThreadLocal),
        Ok(header::FC_CAPTURE_MODE_RELAXED) => Ok(CaptureMode::Relaxed),
        _ => Err(Error::invalid(format!("unknown capture mode {mode}"))),
    }
}

/// `int fc_graph_begin_ctx(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_begin_ctx(c: *mut fc_cuda_ctx) -> c_int {
    status(|| Ok(ctx(c)?.begin_held(CaptureMode::ThreadLocal, LivePtr::NULL)?))
}

/// `int fc_graph_begin_ctx_mode(fc_cuda_ctx *ctx, int mode)`
#[no_mangle]
pub extern "C" fn fc_graph_begin_ctx_mode(c: *mut fc_cuda_ctx, mode: c_int) -> c_int {
    status(|| Ok(ctx(c)?.begin_held(capture_mode(mode)?, LivePtr::NULL)?))
}

/// `int fc_graph_begin_live_ctx(fc_cuda_ctx *ctx, int mode, void *capture_live)`
#[no_mangle]
pub extern "C" fn fc_graph_begin_live_ctx(c: *mut fc_cuda_ctx, mode: c_int, capture_live: *mut c_void) -> c_int {
    status(|| Ok(ctx(c)?.begin_held(capture_mode(mode)?, LivePtr(capture_live))?))
}

/// `fc_graph *fc_graph_end_ctx(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_end_ctx(c: *mut fc_cuda_ctx) -> *mut fc_graph {
    handle_or_null(|| handles::insert(CGraph::new(ctx(c)?.end_held()?, 1)))
}

/// Ends `c`'s held capture into `g` (see `fc_graph_end_update_ctx`).
fn end_update(c: *mut fc_cuda_ctx, g: *mut fc_graph) -> Result<UpdateReport> {
    let c = ctx(c)?;
    // The stream leaves capture either way, as documented: a bad or busy
    // graph drops the capture (unless this thread may not end it, which
    // is then the error: the capture stays open).
    let leave_capture = |e: Error| -> Error {
        if !c.held_open() {
            return e;
        }
        match c.abort_held() {
            Ok(()) => e,
            Err(LibError::CaptureState(refused)) => {
                Error::capture_state(format!("{refused}; the graph was refused as well: {e}"))
            }
            Err(other) => other.into(),
        }
    };
    let target = graph(g).map_err(leave_capture)?;
    match target.write(|g| c.end_held_update(g)) {
        Some(report) => Ok(report?),
        None => Err(leave_capture(Error::capture_state("the graph is being launched or updated on another thread"))),
    }
}

/// Writes `n` (at most `INT_MAX`) to `out` unless it is NULL.
///
/// # Safety
/// `out` is NULL or valid for one write.
unsafe fn put_count(out: *mut c_int, n: usize) {
    // SAFETY: NULL or valid for one write, per the contract.
    if let Some(out) = unsafe { out.as_mut() } {
        *out = c_int::try_from(n).unwrap_or(c_int::MAX);
    }
}

/// `int fc_graph_end_update_ctx(fc_cuda_ctx *ctx, fc_graph *graph, int *updated_in_place)`
///
/// # Safety
/// `updated_in_place` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_end_update_ctx(
    c: *mut fc_cuda_ctx,
    g: *mut fc_graph,
    updated_in_place: *mut c_int,
) -> c_int {
    status(|| {
        let report = end_update(c, g)?;
        // SAFETY: NULL or valid for one write, per the contract.
        unsafe { put_count(updated_in_place, report.updated) };
        Ok(())
    })
}

/// `int fc_graph_end_update_ex_ctx(fc_cuda_ctx *ctx, fc_graph *graph, int *updated_in_place, int *instantiated, int *node_calls)`
///
/// # Safety
/// Each of `updated_in_place`, `instantiated` and `node_calls` is NULL or
/// valid for one write (they may alias: each is written in turn).
#[no_mangle]
pub unsafe extern "C" fn fc_graph_end_update_ex_ctx(
    c: *mut fc_cuda_ctx,
    g: *mut fc_graph,
    updated_in_place: *mut c_int,
    instantiated: *mut c_int,
    node_calls: *mut c_int,
) -> c_int {
    status(|| {
        let report = end_update(c, g)?;
        // SAFETY: each NULL or valid for one write, per the contract.
        unsafe {
            put_count(updated_in_place, report.updated);
            put_count(instantiated, report.instantiated);
            put_count(node_calls, report.node_calls);
        }
        Ok(())
    })
}

/// `int fc_graph_abort_ctx(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_abort_ctx(c: *mut fc_cuda_ctx) -> c_int {
    status(|| Ok(ctx(c)?.abort_held()?))
}

/// `int fc_graph_is_capturing_ctx(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_is_capturing_ctx(c: *const fc_cuda_ctx) -> c_int {
    value(0, || Ok(c_int::from(ctx(c)?.is_capturing())))
}

/// A C function pointer with the `user` value it was registered with.
#[derive(Clone, Copy)]
pub(crate) struct CCallback<F> {
    pub(crate) f: F,
    pub(crate) user: *mut c_void,
    /// The context handle the function receives back (where it does).
    pub(crate) ctx: *mut fc_cuda_ctx,
}

// SAFETY: the header requires C break, record and foreign functions, with
// their `user` pointers, to be callable from whichever thread replays or records;
// the context handle is a number, not an address.
unsafe impl<F> Send for CCallback<F> {}
// SAFETY: as above; the fields are only read.
unsafe impl<F> Sync for CCallback<F> {}

type BreakFnPtr = unsafe extern "C" fn(*mut fc_cuda_ctx, *mut c_void, *mut c_void) -> c_int;
type RecordFnPtr = unsafe extern "C" fn(*mut fc_cuda_ctx, *mut c_void) -> c_int;

impl CCallback<BreakFnPtr> {
    fn call(&self, live: LivePtr) -> ::fc_graph::Result<()> {
        // SAFETY: a C function of the fc_break_fn type, called with the
        // handle and pointers the caller registered, per the header.
        returned("break function", unsafe { (self.f)(self.ctx, live.0, self.user) })
    }
}

impl CCallback<RecordFnPtr> {
    fn call(&self) -> ::fc_graph::Result<()> {
        // SAFETY: a C function of the fc_record_fn type, called with the
        // handle and pointer the caller gave, per the header.
        returned("record function", unsafe { (self.f)(self.ctx, self.user) })
    }
}

/// `Ok` for a C function's 0, else [`LibError::Callback`] naming `what`
/// (the safe layer's error: these run inside its break and record calls).
pub(crate) fn returned(what: &str, rc: c_int) -> ::fc_graph::Result<()> {
    match rc {
        0 => Ok(()),
        rc => Err(LibError::Callback(format!("{what} returned {rc}"))),
    }
}

/// `int fc_graph_break_ctx(fc_cuda_ctx *ctx, fc_break_fn fn, void *user)`
#[no_mangle]
pub extern "C" fn fc_graph_break_ctx(c: *mut fc_cuda_ctx, f: fc_break_fn, user: *mut c_void) -> c_int {
    status(|| {
        let context = ctx(c)?;
        let f: BreakFnPtr = f.ok_or_else(|| Error::invalid("fn is NULL"))?;
        let cb = CCallback { f, user, ctx: c };
        Ok(context.break_held(move |_: &Context, live: LivePtr| cb.call(live))?)
    })
}

/// `int fc_graph_capture_ctx(fc_cuda_ctx *ctx, int mode, fc_record_fn record, void *user, int max_tries, fc_graph **graph_out)`
///
/// # Safety
/// `graph_out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_capture_ctx(
    c: *mut fc_cuda_ctx,
    mode: c_int,
    record: fc_record_fn,
    user: *mut c_void,
    max_tries: c_int,
    graph_out: *mut *mut fc_graph,
) -> c_int {
    status(|| {
        let context = ctx(c)?;
        let mode = capture_mode(mode)?;
        let record: RecordFnPtr = record.ok_or_else(|| Error::invalid("record is NULL"))?;
        if graph_out.is_null() {
            return Err(Error::invalid("graph_out is NULL"));
        }
        let tries = u32::try_from(max_tries)
            .ok()
            .filter(|&t| t > 0)
            .ok_or_else(|| Error::invalid(format!("max_tries must be at least 1, got {max_tries}")))?;
        let cb = CCallback { f: record, user, ctx: c };
        let done = context.capture_held_with_retry(mode, LivePtr::NULL, tries, |_| cb.call())?;
        let h = handles::insert(CGraph::new(done.graph, done.tries))?;
        // SAFETY: non-null and valid for one write, per the contract.
        unsafe { *graph_out = h };
        Ok(())
    })
}

/// `int fc_graph_capture_tries(const fc_graph *graph)`
#[no_mangle]
pub extern "C" fn fc_graph_capture_tries(g: *const fc_graph) -> c_int {
    value(-1, || Ok(c_int::try_from(graph(g)?.tries).unwrap_or(c_int::MAX)))
}

/// `int fc_graph_launch(fc_graph *graph)`
#[no_mangle]
pub extern "C" fn fc_graph_launch(g: *mut fc_graph) -> c_int {
    fc_graph_launch_live(g, std::ptr::null_mut())
}

/// `int fc_graph_launch_live(fc_graph *graph, void *live)`
#[no_mangle]
pub extern "C" fn fc_graph_launch_live(g: *mut fc_graph, live: *mut c_void) -> c_int {
    status(|| graph(g)?.read(|g| g.replay(&LivePtr(live))))
}

/// `int fc_graph_segment_count(const fc_graph *graph)`
#[no_mangle]
pub extern "C" fn fc_graph_segment_count(g: *const fc_graph) -> c_int {
    value(-1, || graph(g)?.read(|g| Ok(c_int::try_from(g.segment_count()).unwrap_or(c_int::MAX))))
}

/// `void fc_graph_free(fc_graph *graph)`
#[no_mangle]
pub extern "C" fn fc_graph_free(g: *mut fc_graph) {
    release(g, |g| handles::remove::<CGraph>(g, "graph").map(drop))
}

/// Reads a NUL-terminated file path argument (any bytes but NUL).
///
/// # Safety
/// A non-null `p` must point at a NUL-terminated string.
pub(crate) unsafe fn c_path(p: *const c_char) -> Result<PathBuf> {
    if p.is_null() {
        return Err(Error::invalid("path is NULL"));
    }
    // SAFETY: per the caller's contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    if bytes.is_empty() {
        return Err(Error::invalid("path is empty"));
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

/// `size_t fc_graph_node_count(const fc_graph *graph)`
#[no_mangle]
pub extern "C" fn fc_graph_node_count(g: *const fc_graph) -> usize {
    value(0, || graph(g)?.read(|g| g.node_count()))
}

/// `size_t fc_graph_segment_node_count(const fc_graph *graph, size_t index)`
#[no_mangle]
pub extern "C" fn fc_graph_segment_node_count(g: *const fc_graph, index: usize) -> usize {
    value(0, || {
        let counts = graph(g)?.read(|g| g.piece_node_counts())?;
        counts.get(index).copied().ok_or_else(|| {
            Error::invalid(format!("piece index {index} out of range (the graph has {} pieces)", counts.len()))
        })
    })
}

/// `int fc_graph_debug_dot(const fc_graph *graph, const char *path)`
///
/// # Safety
/// `path` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_debug_dot(g: *const fc_graph, path: *const c_char) -> c_int {
    status(|| {
        let g = graph(g)?;
        // SAFETY: per this function's contract.
        let path = unsafe { c_path(path) }?;
        g.read(|g| g.debug_dot(&path))
    })
}

/// Handles of this module's kinds alive now.
pub(crate) fn live_handles() -> usize {
    <CGraph as super::handles::Kind>::table().live()
}
