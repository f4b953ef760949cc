//! What a C context is: the safe [`Context`] plus the recording the C API
//! holds for it between calls (`fc_graph_begin_ctx` ... `fc_graph_end_ctx`,
//! breaks, foreign sections), its live pointer, and the graph cache's
//! backend over that recording. C-only machinery: Rust callers keep a
//! [`fc_graph::Capture`] guard or a [`Recording`] themselves.
//!
//! The rules are those of a guarded recording (one per context, none begun
//! inside a break); in addition the held recording cannot be begun, ended
//! or aborted from inside one of its own break functions (refused with
//! [`Error::CaptureState`] instead of deadlocking), and a THREAD_LOCAL or
//! GLOBAL one is ended, split and aborted only on the thread that opened it
//! (the driver's rule; refused elsewhere, the recording intact). While a
//! graph cache's recording is held, the C API's own calls cannot end,
//! update or abort it, nor open foreign sections in it: only the cache
//! ends it. A handle that holds no recording (a lane's, or another handle
//! of the same context) says so when asked to end or split one.

use std::os::raw::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use ::fc_graph::cache::{check_context, pool_delta, Backend, Built, Refresh};
use ::fc_graph::capture::{retry_invalidated, Recaptured};
use ::fc_graph::graph::{Graph, UpdateReport};
use ::fc_graph::{CaptureMode, Context, Error, Recording, Result};
use cuda_sys::CUstream;

/// An opaque, pointer-sized live value (the C API's `void *live`): break
/// functions receive it, the library never dereferences it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LivePtr(pub(crate) *mut c_void);

impl LivePtr {
    /// The null live value.
    pub(crate) const NULL: LivePtr = LivePtr(std::ptr::null_mut());
}

// SAFETY: an opaque pointer the caller owns; the library only hands it back
// to the caller's break functions, on whichever thread replays.
unsafe impl Send for LivePtr {}
// SAFETY: as above; never dereferenced here.
unsafe impl Sync for LivePtr {}

/// A break function of a held recording: receives the context and the live
/// value (the recording's at record time, the replay's at replay).
type HeldBreakFn = dyn Fn(&Context, LivePtr) -> Result<()> + Send + Sync;

/// A C context (`fc_cuda_ctx *`): the context and its held recording.
pub(crate) struct CContext {
    ctx: Context,
    held: Mutex<Option<Recording<LivePtr>>>,
    /// The live value breaks of the held recording receive while it records.
    capture_live: AtomicPtr<c_void>,
    /// Whether the held recording is a graph cache's (set by the cache's
    /// backend after it begins one, cleared when it leaves the slot).
    cache_owned: AtomicBool,
}

impl std::ops::Deref for CContext {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl Drop for CContext {
    /// A recording still held is aborted now, not when the last graph or
    /// buffer of the context lets go of it.
    fn drop(&mut self) {
        let held = self.held.get_mut().map(Option::take).unwrap_or_else(|p| p.into_inner().take());
        if let Some(rec) = held {
            rec.abort();
        }
    }
}

impl CContext {
    pub(crate) fn new(ctx: Context) -> CContext {
        CContext {
            ctx,
            held: Mutex::new(None),
            capture_live: AtomicPtr::new(std::ptr::null_mut()),
            cache_owned: AtomicBool::new(false),
        }
    }

    fn held_slot(&self) -> Result<MutexGuard<'_, Option<Recording<LivePtr>>>> {
        match self.held.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(Error::capture_state(
                "the context's held capture is busy (called from inside one of its break functions?)",
            )),
        }
    }

    /// Why this handle holds no recording to `what`: none is open, or the
    /// open one is held by another handle of the context (lane handles hold
    /// none; `fc_ctx_lane(ctx, 0)` is a second handle of lane 0).
    fn no_capture(&self, what: &str) -> Error {
        let lane = self.ctx.lane_index();
        if lane != 0 {
            Error::capture_state(format!(
                "{what} on lane {lane}: no capture is open on a lane handle; a recording begins, breaks and ends on \
                 the context itself (lane 0)"
            ))
        } else if self.ctx.capture_open() {
            Error::capture_state(format!(
                "{what}: no capture is open on this handle; the context's open recording was begun through another \
                 of its handles (fc_ctx_lane(ctx, 0) makes one): use that handle"
            ))
        } else {
            Error::capture_state("no capture is open on this context")
        }
    }

    /// Refuses the C API's own `what` (end, update, abort, a foreign
    /// section) while the held recording is a graph cache's: only the
    /// cache ends it, and its recordings have no foreign sections.
    fn check_not_cache(&self, what: &str) -> Result<()> {
        if self.cache_owned.load(Ordering::SeqCst) {
            return Err(Error::capture_state(format!(
                "{what}: the open recording is a graph cache's (fc_graph_cache_run), which only the cache ends \
                 and which takes no foreign sections (they belong to recordings held by the context: \
                 fc_graph_begin_ctx*, fc_graph_capture_ctx)"
            )));
        }
        Ok(())
    }

    /// Opens a held recording; `capture_live` is the live value its breaks
    /// receive while they run at record time.
    pub(crate) fn begin_held(&self, mode: CaptureMode, capture_live: LivePtr) -> Result<()> {
        let mut slot = self.held_slot()?;
        if slot.is_some() {
            return Err(Error::capture_state("a capture is already open on this context"));
        }
        *slot = Some(Recording::begin(&self.ctx, mode)?);
        self.cache_owned.store(false, Ordering::SeqCst);
        self.capture_live.store(capture_live.0, Ordering::SeqCst);
        Ok(())
    }

    /// Whether a held recording is open.
    pub(crate) fn held_open(&self) -> bool {
        self.held_slot().map(|s| s.is_some()).unwrap_or(true)
    }

    /// Takes the held recording out to `what` it (end, abort); refused,
    /// leaving it held, on a thread that may not end it.
    fn take_held(&self, what: &str) -> Result<Recording<LivePtr>> {
        let mut slot = self.held_slot()?;
        slot.as_ref().ok_or_else(|| self.no_capture(what))?.check_thread(what)?;
        let rec = slot.take().ok_or_else(|| self.no_capture(what))?;
        self.cache_owned.store(false, Ordering::SeqCst);
        Ok(rec)
    }

    /// Ends the held recording and instantiates it (see [`Recording::end`]):
    /// `fc_graph_end_ctx`, refused while the recording is a graph cache's.
    pub(crate) fn end_held(&self) -> Result<Graph<LivePtr>> {
        self.check_not_cache("end")?;
        self.take_held("end")?.end()
    }

    /// Ends the held recording into `graph` (see [`Recording::end_update`]):
    /// `fc_graph_end_update_ctx`, refused while it is a graph cache's.
    pub(crate) fn end_held_update(&self, graph: &mut Graph<LivePtr>) -> Result<UpdateReport> {
        self.check_not_cache("end_update")?;
        self.take_held("end")?.end_update(graph)
    }

    /// Drops the held recording: `fc_graph_abort_ctx`, refused while it is
    /// a graph cache's.
    pub(crate) fn abort_held(&self) -> Result<()> {
        self.check_not_cache("abort")?;
        self.abort_own()
    }

    /// Drops the held recording, whoever began it (the recordings of
    /// [`CContext::capture_held_with_retry`] and the graph cache's).
    fn abort_own(&self) -> Result<()> {
        self.take_held("abort")?.abort();
        Ok(())
    }

    /// The live value a pass-through break receives now: that of the held
    /// recording's break function running on the calling thread
    /// (innermost), or null. Per thread.
    fn running_live(&self) -> LivePtr {
        LivePtr(self.ctx.thread_value())
    }

    /// A break in the held recording: while it records, ends the current
    /// segment, runs `f` once now with the recording's live value, records
    /// it and opens the next segment. Outside a held recording, or while
    /// another break function runs, `f` just runs now with the running live
    /// value.
    pub(crate) fn break_held<F>(&self, f: F) -> Result<()>
    where
        F: Fn(&Context, LivePtr) -> Result<()> + Send + Sync + 'static,
    {
        let f: Arc<HeldBreakFn> = Arc::new(f);
        let run = move |ctx: &Context, live: &LivePtr| {
            let live = *live;
            ctx.with_thread_value(live.0, || f(ctx, live))
        };
        if self.ctx.break_passes_through() {
            return run(&self.ctx, &self.running_live());
        }
        let mut slot = self.held_slot()?;
        let Some(rec) = slot.as_mut() else {
            return Err(self.no_capture("break"));
        };
        rec.check_thread("split")?;
        let live = LivePtr(self.capture_live.load(Ordering::SeqCst));
        rec.brk(&live, Box::new(run))
    }

    /// Opens a foreign section in the held recording
    /// ([`Recording::foreign_begin`]) and returns the context's stream.
    pub(crate) fn foreign_held_begin(&self, mode: CaptureMode) -> Result<CUstream> {
        self.check_not_cache("foreign section begin")?;
        self.held_slot()?.as_mut().ok_or_else(|| self.no_capture("foreign section begin"))?.foreign_begin(mode)
    }

    /// Opens a foreign section on a lane of the context in the held
    /// recording ([`Recording::foreign_begin_on`]) and returns the lane's
    /// stream.
    pub(crate) fn foreign_held_begin_on(&self, lane: &Context, mode: CaptureMode) -> Result<CUstream> {
        self.check_not_cache("foreign section begin")?;
        self.held_slot()?.as_mut().ok_or_else(|| self.no_capture("foreign section begin"))?.foreign_begin_on(lane, mode)
    }

    /// Ends the held recording's foreign section.
    pub(crate) fn foreign_held_end(&self) -> Result<()> {
        self.check_not_cache("foreign section end")?;
        self.held_slot()?.as_mut().ok_or_else(|| self.no_capture("foreign section end"))?.foreign_end()
    }

    /// Whether the held recording builds (`None`: none open, or busy).
    pub(crate) fn held_builds(&self) -> Option<bool> {
        self.held_slot().ok()?.as_ref().map(Recording::builds)
    }

    /// Records `record` into a held recording, recording it again (up to
    /// `max_tries` recordings) when it is invalidated; see
    /// [`Context::capture_with_retry`].
    pub(crate) fn capture_held_with_retry<F>(
        &self,
        mode: CaptureMode,
        capture_live: LivePtr,
        max_tries: u32,
        mut record: F,
    ) -> Result<Recaptured<LivePtr>>
    where
        F: FnMut(&CContext) -> Result<()>,
    {
        retry_invalidated(max_tries, || {
            self.record_held(mode, capture_live, &mut record)?;
            self.take_held("end")?.end()
        })
        .map(|(graph, tries)| Recaptured { graph, tries })
    }

    /// Like [`CContext::capture_held_with_retry`], ending each recording
    /// into `graph`.
    fn update_held_with_retry<F>(
        &self,
        mode: CaptureMode,
        capture_live: LivePtr,
        max_tries: u32,
        graph: &mut Graph<LivePtr>,
        mut record: F,
    ) -> Result<(UpdateReport, u32)>
    where
        F: FnMut(&CContext) -> Result<()>,
    {
        retry_invalidated(max_tries, || {
            self.record_held(mode, capture_live, &mut record)?;
            self.take_held("end")?.end_update(graph)
        })
    }

    /// Opens a held recording and runs `record`; on failure the recording
    /// is dropped, and a failure of an invalidated one becomes
    /// [`Error::CaptureInvalidated`].
    fn record_held(
        &self,
        mode: CaptureMode,
        capture_live: LivePtr,
        record: &mut impl FnMut(&CContext) -> Result<()>,
    ) -> Result<()> {
        self.begin_held(mode, capture_live)?;
        if let Err(e) = record(self) {
            let invalidated = self.held_slot()?.as_ref().is_some_and(Recording::is_invalidated);
            let _ = self.abort_own();
            if invalidated && !e.is_capture_invalidated() {
                return Err(Error::CaptureInvalidated { call: "the recording", detail: format!(" ({e})") });
            }
            return Err(e);
        }
        Ok(())
    }

    /// Makes the held recording a graph cache's: its later breaks are
    /// recorded without running, and the C API's end, update, abort and
    /// foreign sections are refused until the cache ends it.
    fn hold_for_cache(&self) -> Result<()> {
        let mut slot = self.held_slot()?;
        slot.as_mut().map(Recording::defer_breaks).ok_or_else(|| self.no_capture("record"))?;
        self.cache_owned.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// The graph cache's backend for C callers: recordings held by the C
/// context, whose record function queues work through the C API and splits
/// it with `fc_graph_break_ctx`, whose functions receive `live`.
pub(crate) struct HeldBackend<'a, F> {
    pub(crate) cctx: &'a CContext,
    pub(crate) mode: CaptureMode,
    pub(crate) max_tries: u32,
    pub(crate) live: LivePtr,
    pub(crate) record: F,
}

impl<F> Backend<Graph<LivePtr>> for HeldBackend<'_, F>
where
    F: FnMut() -> Result<()>,
{
    fn check_can_capture(&mut self) -> Result<()> {
        check_context(&self.cctx.ctx)
    }

    fn eager(&mut self) -> Result<()> {
        let (ctx, record) = (&self.cctx.ctx, &mut self.record);
        ctx.with_thread_value(self.live.0, record)
    }

    fn capture(&mut self) -> Result<Built<Graph<LivePtr>>> {
        let (cctx, record) = (self.cctx, &mut self.record);
        let (done, delta) = pool_delta(&cctx.ctx, || {
            cctx.capture_held_with_retry(self.mode, self.live, self.max_tries, |c| {
                c.hold_for_cache()?;
                record()
            })
        })?;
        Ok(Built { graph: done.graph, bytes: delta.max(0) as usize })
    }

    fn refresh(&mut self, graph: &mut Graph<LivePtr>) -> Result<Refresh> {
        let (cctx, record) = (self.cctx, &mut self.record);
        let ((report, _tries), delta) = pool_delta(&cctx.ctx, || {
            cctx.update_held_with_retry(self.mode, self.live, self.max_tries, graph, |c| {
                c.hold_for_cache()?;
                record()
            })
        })?;
        Ok(Refresh { in_place: report.instantiated == 0, bytes_delta: delta })
    }

    fn launch(&mut self, graph: &Graph<LivePtr>) -> Result<()> {
        graph.replay(&self.live)
    }
}
