//! Captures held by the context itself, for callers that cannot keep a
//! [`crate::Capture`] guard across calls: the C API's begin / break / end,
//! an engine's layer loop that opens a capture in one function and ends it
//! in another. The context owns the capture, its live value and the live
//! value of the break function running now; graphs of held captures are
//! `Graph<LivePtr>`.
//!
//! The rules are those of a guarded capture (one capture per context, no
//! capture begun inside a break); in addition a held capture cannot be
//! begun, ended or aborted from inside one of its own break functions
//! (refused with [`Error::CaptureState`] instead of deadlocking), and a
//! THREAD_LOCAL or GLOBAL one is ended, split and aborted only on the thread
//! that opened it (the driver's rule; refused elsewhere, the capture intact).

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, TryLockError};

use cuda_sys::CUstream;

use crate::capture::{retry_invalidated, Recaptured, Recording};
use crate::capture_state;
use crate::context::{CaptureMode, Context, LivePtr};
use crate::error::{Error, Result};
use crate::graph::{Graph, UpdateReport};

/// A break function of a held capture: receives the context and the live
/// value (the capture's at capture time, the replay's at replay).
pub type HeldBreakFn = dyn Fn(&Context, LivePtr) -> Result<()> + Send + Sync;

impl Context {
    fn held_slot(&self) -> Result<MutexGuard<'_, Option<Recording<LivePtr>>>> {
        match self.inner.held.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(Error::capture_state(
                "the context's held capture is busy (called from inside one of its break functions?)",
            )),
        }
    }

    /// Opens a capture held by the context; `capture_live` is the live value
    /// its breaks receive while they run at capture time.
    pub fn begin_held(&self, mode: CaptureMode, capture_live: LivePtr) -> Result<()> {
        let mut slot = self.held_slot()?;
        if slot.is_some() {
            return Err(Error::capture_state("a capture is already open on this context"));
        }
        *slot = Some(Recording::begin(self, mode)?);
        self.inner.capture_live.store(capture_live.0, Ordering::SeqCst);
        Ok(())
    }

    /// Whether a held capture is open.
    pub fn held_open(&self) -> bool {
        self.held_slot().map(|s| s.is_some()).unwrap_or(true)
    }

    /// Takes the held capture out of the context to `what` it (end, abort);
    /// refused, leaving it held, on a thread that may not end it.
    fn take_held(&self, what: &str) -> Result<Recording<LivePtr>> {
        let mut slot = self.held_slot()?;
        let no_capture = || Error::capture_state("no capture is open on this context");
        slot.as_ref().ok_or_else(no_capture)?.check_thread(self, what)?;
        slot.take().ok_or_else(no_capture)
    }

    /// Ends the held capture and instantiates it. The stream leaves capture
    /// either way; on error the message names the first failing call inside
    /// the capture. A THREAD_LOCAL or GLOBAL capture is ended only on the
    /// thread that opened it: on another thread the call is refused with
    /// [`Error::CaptureState`] and the capture stays open.
    pub fn end_held(&self) -> Result<Graph<LivePtr>> {
        self.take_held("end")?.end(self)
    }

    /// Ends the held capture into `graph`, updating its segments in place
    /// where the topology allows (see [`crate::Capture::end_update`]). The
    /// stream leaves capture either way (threads as for [`Context::end_held`]).
    pub fn end_held_update(&self, graph: &mut Graph<LivePtr>) -> Result<UpdateReport> {
        self.take_held("end")?.end_update(self, graph)
    }

    /// Drops the held capture: the stream leaves capture, nothing is kept
    /// (threads as for [`Context::end_held`]).
    pub fn abort_held(&self) -> Result<()> {
        self.take_held("abort")?.abort(self);
        Ok(())
    }

    /// The live value a pass-through break receives now: that of the held
    /// capture's break function of this context running on the calling
    /// thread (innermost), or null. Per thread: replays on other threads
    /// neither see nor change it.
    pub fn running_live(&self) -> LivePtr {
        LivePtr(capture_state::thread_running_live(self.key()))
    }

    /// Runs `f` with `live` published as the calling thread's running live
    /// value (what a pass-through [`Context::break_held`] on this thread
    /// hands its function), until `f` returns or unwinds.
    pub(crate) fn with_running_live<T>(&self, live: LivePtr, f: impl FnOnce() -> T) -> T {
        capture_state::run_with_live(self.key(), live.0, f)
    }

    /// A break in the held capture: while it records, ends the current
    /// segment, runs `f` once now with the capture's live value, records it
    /// and opens the next segment. Outside a held capture, or while another
    /// break function runs, `f` just runs now with the running live value.
    pub fn break_held<F>(&self, f: F) -> Result<()>
    where
        F: Fn(&Context, LivePtr) -> Result<()> + Send + Sync + 'static,
    {
        let f: Arc<HeldBreakFn> = Arc::new(f);
        let run = move |ctx: &Context, live: &LivePtr| {
            let live = *live;
            ctx.with_running_live(live, || f(ctx, live))
        };
        if self.break_passes_through() {
            return run(self, &self.running_live());
        }
        let mut slot = self.held_slot()?;
        let Some(rec) = slot.as_mut() else {
            // A guarded (Rust) capture is open: no held capture to split.
            drop(slot);
            return Err(Error::capture_state(
                "break_held: the open capture is a guarded one (Capture::brk splits it), not held by the context",
            ));
        };
        rec.check_thread(self, "split")?;
        let live = LivePtr(self.inner.capture_live.load(Ordering::SeqCst));
        rec.brk(self, &live, Box::new(run))
    }

    /// Records `record` into a held capture, recording it again (up to
    /// `max_tries` recordings) when the capture is invalidated; see
    /// [`Context::capture_with_retry`]. `record` may use [`Context::break_held`].
    pub fn capture_held_with_retry<F>(
        &self,
        mode: CaptureMode,
        capture_live: LivePtr,
        max_tries: u32,
        mut record: F,
    ) -> Result<Recaptured<LivePtr>>
    where
        F: FnMut(&Context) -> Result<()>,
    {
        retry_invalidated(max_tries, || {
            self.record_held(mode, capture_live, &mut record)?;
            self.end_held()
        })
        .map(|(graph, tries)| Recaptured { graph, tries })
    }

    /// Like [`Context::capture_held_with_retry`], but ends each recording
    /// into `graph` with [`Context::end_held_update`] (segments updated in
    /// place where the topology allows). Returns what the update did and
    /// how many recordings it took.
    pub fn update_held_with_retry<F>(
        &self,
        mode: CaptureMode,
        capture_live: LivePtr,
        max_tries: u32,
        graph: &mut Graph<LivePtr>,
        mut record: F,
    ) -> Result<(UpdateReport, u32)>
    where
        F: FnMut(&Context) -> Result<()>,
    {
        retry_invalidated(max_tries, || {
            self.record_held(mode, capture_live, &mut record)?;
            self.end_held_update(graph)
        })
    }

    /// Opens a held capture and runs `record`; on failure the capture is
    /// dropped, and a failure on an invalidated capture becomes
    /// [`Error::CaptureInvalidated`].
    fn record_held(
        &self,
        mode: CaptureMode,
        capture_live: LivePtr,
        record: &mut impl FnMut(&Context) -> Result<()>,
    ) -> Result<()> {
        self.begin_held(mode, capture_live)?;
        let recorded = record(self);
        if let Err(e) = recorded {
            let invalidated = self.held_slot()?.as_ref().is_some_and(|r| r.stream_invalidated(self));
            let _ = self.abort_held();
            if invalidated && !e.is_capture_invalidated() {
                return Err(Error::CaptureInvalidated { call: "the recording", detail: format!(" ({e})") });
            }
            return Err(e);
        }
        Ok(())
    }

    /// Opens a foreign section in the held recording (see
    /// [`crate::Capture::foreign_begin`]) and returns the context's stream.
    pub fn foreign_held_begin(&self, mode: CaptureMode) -> Result<CUstream> {
        let mut slot = self.held_slot()?;
        let rec = slot.as_mut().ok_or_else(|| Error::capture_state("no capture is open on this context"))?;
        rec.foreign_begin(self, mode)
    }

    /// Ends the held recording's foreign section (see
    /// [`crate::Capture::foreign_end`]).
    pub fn foreign_held_end(&self) -> Result<()> {
        let mut slot = self.held_slot()?;
        let rec = slot.as_mut().ok_or_else(|| Error::capture_state("no capture is open on this context"))?;
        rec.foreign_end(self)
    }

    /// Whether the held recording builds its graphs node by node (`None`:
    /// no held recording is open).
    pub fn held_builds(&self) -> Option<bool> {
        self.held_slot().ok()?.as_ref().map(Recording::builds)
    }

    /// Makes the open held capture record its later breaks without running
    /// their function (see `Recording::defer_breaks`).
    pub(crate) fn defer_held_breaks(&self) -> Result<()> {
        self.held_slot()?
            .as_mut()
            .map(Recording::defer_breaks)
            .ok_or_else(|| Error::capture_state("no capture is open on this context"))
    }
}
