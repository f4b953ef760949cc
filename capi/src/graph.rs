//! Capture, break and graph exports.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::context::{ctx_arc, ctx_handle, lock_slot, CLive, CtxHandle};
use super::header::{fc_break_fn, fc_cuda_ctx, fc_graph};
use super::{deref, handle_or_null, release, status, value};
use ::fc_graph::context::CaptureMode;
use ::fc_graph::graph::Graph;
use ::fc_graph::{Error, Result};

/// A C break function with its frozen `user` pointer and the handle it is
/// given back.
struct CBreak {
    f: unsafe extern "C" fn(*mut fc_cuda_ctx, *mut c_void, *mut c_void) -> c_int,
    user: *mut c_void,
    handle: Arc<CtxHandle>,
}

// SAFETY: the C caller promises its break functions and `user` pointers
// may be used from the thread that replays the graph (documented in the
// header); the handle is an Arc of a Sync type.
unsafe impl Send for CBreak {}
// SAFETY: as above; `call` only reads the fields.
unsafe impl Sync for CBreak {}

impl CBreak {
    /// Runs the function with `live`, publishing it for pass-through breaks.
    fn call(&self, live: *mut c_void) -> Result<()> {
        let prev = self.handle.running_live.swap(live, Ordering::SeqCst);
        let ctx = Arc::as_ptr(&self.handle) as *mut fc_cuda_ctx;
        // SAFETY: a C function pointer supplied by the caller for exactly
        // this signature; `ctx` is kept alive by `self.handle`.
        let rc = unsafe { (self.f)(ctx, live, self.user) };
        self.handle.running_live.store(prev, Ordering::SeqCst);
        if rc != 0 {
            return Err(Error::Callback(format!("break function returned {rc}")));
        }
        Ok(())
    }
}

fn capture_mode(mode: c_int) -> Result<CaptureMode> {
    match mode as u32 {
        super::header::FC_CAPTURE_MODE_GLOBAL => Ok(CaptureMode::Global),
        super::header::FC_CAPTURE_MODE_THREAD_LOCAL => Ok(CaptureMode::ThreadLocal),
        super::header::FC_CAPTURE_MODE_RELAXED => Ok(CaptureMode::Relaxed),
        _ => Err(Error::invalid(format!("unknown capture mode {mode}"))),
    }
}

/// Shared body of the begin exports.
///
/// # Safety
/// `ctx` is NULL or a live handle.
unsafe fn begin(ctx: *mut fc_cuda_ctx, mode: c_int, live: *mut c_void) -> c_int {
    status(|| {
        // SAFETY: per the caller's contract.
        let h = unsafe { ctx_handle(ctx) }?;
        let mode = capture_mode(mode)?;
        let mut slot = lock_slot(h)?;
        if slot.is_some() {
            return Err(Error::capture_state("a capture is already open on this context"));
        }
        *slot = Some(h.ctx.begin_breakable::<CLive>(mode)?);
        h.capture_live.store(live, Ordering::SeqCst);
        Ok(())
    })
}

/// `int fc_graph_begin_ctx(fc_cuda_ctx *ctx)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_begin_ctx(ctx: *mut fc_cuda_ctx) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { begin(ctx, super::header::FC_CAPTURE_MODE_THREAD_LOCAL as c_int, std::ptr::null_mut()) }
}

/// `int fc_graph_begin_ctx_mode(fc_cuda_ctx *ctx, int mode)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_begin_ctx_mode(ctx: *mut fc_cuda_ctx, mode: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { begin(ctx, mode, std::ptr::null_mut()) }
}

/// `int fc_graph_begin_live_ctx(fc_cuda_ctx *ctx, int mode, void *capture_live)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_begin_live_ctx(
    ctx: *mut fc_cuda_ctx,
    mode: c_int,
    capture_live: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { begin(ctx, mode, capture_live) }
}

/// `fc_graph *fc_graph_end_ctx(fc_cuda_ctx *ctx)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_end_ctx(ctx: *mut fc_cuda_ctx) -> *mut fc_graph {
    handle_or_null(|| {
        // SAFETY: per this function's contract.
        let h = unsafe { ctx_handle(ctx) }?;
        let capture = lock_slot(h)?.take().ok_or_else(|| Error::capture_state("no capture is open on this context"))?;
        let graph: Graph<CLive> = capture.end()?;
        Ok(Box::into_raw(Box::new(graph)).cast::<fc_graph>())
    })
}

/// `int fc_graph_end_update_ctx(fc_cuda_ctx *ctx, fc_graph *graph, int *updated_in_place)`
///
/// # Safety
/// `ctx` and `graph` are NULL or live handles; `updated_in_place` is NULL
/// or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_end_update_ctx(
    ctx: *mut fc_cuda_ctx,
    graph: *mut fc_graph,
    updated_in_place: *mut c_int,
) -> c_int {
    status(|| {
        // SAFETY: per this function's contract.
        let h = unsafe { ctx_handle(ctx) }?;
        // SAFETY: per this function's contract; the graph is not shared meanwhile.
        let g = unsafe { graph.cast::<Graph<CLive>>().as_mut() }.ok_or_else(|| Error::invalid("graph is NULL"))?;
        let capture = lock_slot(h)?.take().ok_or_else(|| Error::capture_state("no capture is open on this context"))?;
        let report = capture.end_update(g)?;
        // SAFETY: NULL or valid for one write, per the contract.
        if let Some(out) = unsafe { updated_in_place.as_mut() } {
            *out = report.updated as c_int;
        }
        Ok(())
    })
}

/// `int fc_graph_abort_ctx(fc_cuda_ctx *ctx)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_abort_ctx(ctx: *mut fc_cuda_ctx) -> c_int {
    status(|| {
        // SAFETY: per this function's contract.
        let h = unsafe { ctx_handle(ctx) }?;
        let capture = lock_slot(h)?.take().ok_or_else(|| Error::capture_state("no capture is open on this context"))?;
        drop(capture);
        Ok(())
    })
}

/// `int fc_graph_is_capturing_ctx(const fc_cuda_ctx *ctx)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_is_capturing_ctx(ctx: *const fc_cuda_ctx) -> c_int {
    // SAFETY: per this function's contract.
    value(0, || Ok(unsafe { ctx_handle(ctx) }?.ctx.is_capturing() as c_int))
}

/// `int fc_graph_break_ctx(fc_cuda_ctx *ctx, fc_break_fn fn, void *user)`
///
/// # Safety
/// `ctx` is NULL or a live handle; `f` is NULL or a function of the
/// `fc_break_fn` type, callable with `user` from any thread that replays.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_break_ctx(ctx: *mut fc_cuda_ctx, f: fc_break_fn, user: *mut c_void) -> c_int {
    status(|| {
        // SAFETY: per this function's contract.
        let h = unsafe { ctx_handle(ctx) }?;
        let f = f.ok_or_else(|| Error::invalid("fn is NULL"))?;
        let brk = CBreak {
            f,
            user,
            // SAFETY: `ctx` is a live, non-null handle (checked above).
            handle: unsafe { ctx_arc(ctx) },
        };
        // Pass straight through outside a capture and inside a running break.
        if h.ctx.break_passes_through() {
            return brk.call(h.running_live.load(Ordering::SeqCst));
        }
        let mut slot = lock_slot(h)?;
        let Some(capture) = slot.as_mut() else {
            drop(slot);
            return brk.call(h.running_live.load(Ordering::SeqCst));
        };
        let live = CLive(h.capture_live.load(Ordering::SeqCst));
        capture.brk(&live, move |_ctx, live: &CLive| brk.call(live.0))
    })
}

/// Borrows the graph behind `graph`.
///
/// # Safety
/// A non-null `graph` must come from `fc_graph_end_ctx` and not be freed.
unsafe fn graph_ref<'a>(graph: *const fc_graph) -> Result<&'a Graph<CLive>> {
    // SAFETY: per the caller's contract.
    unsafe { deref(graph.cast::<Graph<CLive>>(), "graph") }
}

/// `int fc_graph_launch(fc_graph *graph)`
///
/// # Safety
/// `graph` is NULL or a live graph.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_launch(graph: *mut fc_graph) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fc_graph_launch_live(graph, std::ptr::null_mut()) }
}

/// `int fc_graph_launch_live(fc_graph *graph, void *live)`
///
/// # Safety
/// `graph` is NULL or a live graph.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_launch_live(graph: *mut fc_graph, live: *mut c_void) -> c_int {
    // SAFETY: per this function's contract.
    status(|| unsafe { graph_ref(graph) }?.replay(&CLive(live)))
}

/// `int fc_graph_segment_count(const fc_graph *graph)`
///
/// # Safety
/// `graph` is NULL or a live graph.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_segment_count(graph: *const fc_graph) -> c_int {
    // SAFETY: per this function's contract.
    value(-1, || Ok(unsafe { graph_ref(graph) }?.segment_count() as c_int))
}

/// `void fc_graph_free(fc_graph *graph)`
///
/// # Safety
/// `graph` is NULL or a live graph, freed once.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_free(graph: *mut fc_graph) {
    if graph.is_null() {
        return;
    }
    // SAFETY: a live graph from Box::into_raw, released once here.
    release(|| drop(unsafe { Box::from_raw(graph.cast::<Graph<CLive>>()) }))
}
