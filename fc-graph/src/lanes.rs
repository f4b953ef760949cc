//! Lanes: parallel branches of a context's work, for overlapping
//! independent kernels (attention beside MoE routing, communication beside
//! compute).
//!
//! A context has lane 0 (its own stream) and up to
//! [`MAX_LANES`]` - 1` more; [`Context::lane`] gives the handle of one,
//! and work queued through that handle (built-ins, user kernels, fills,
//! the raw stream) goes on that lane. Work on one lane is ordered; work on
//! different lanes is not, except where a lane waits for another
//! ([`Context::wait_lane`]): its next work runs after the other's work
//! queued so far. [`Context::fork`] makes lanes wait for this one, and
//! [`Context::join`] makes this one wait for lanes.
//!
//! The same code runs eagerly and recorded:
//! - **eagerly**, a lane is an extra non-blocking stream of the context and
//!   a wait is an event recorded on one stream and waited for on another;
//! - **recorded** (a recording that builds), a wait is graph edges: the
//!   lane's next node depends on the other lane's last nodes; nothing is
//!   enqueued. A recording that captures the stream takes the eager
//!   events (the driver's cross-stream capture); every lane forked into it
//!   must be joined back before it ends, as for any stream capture.
//!
//! A break ends the segment, so every lane of it has finished when the
//! break runs (a break joins every lane first); after a break, lanes start
//! from the break. A recording is begun, split and ended on lane 0. A
//! foreign section captures one lane's stream (lane 0's, or the one
//! [`crate::Recording::foreign_begin_on`] names): the other lanes go on
//! recording meanwhile, so a library's call on one lane (a cuBLAS GEMM)
//! runs beside the library's own kernels on another; waits from or for the
//! section's lane are refused ([`crate::Error::CaptureState`]) until it
//! ends.
//! Eagerly, [`Context::synchronize`] on a lane waits for that lane only.

pub use crate::context::streams::MAX_LANES;
use crate::context::Context;
use crate::error::{Error, Result};

impl Context {
    /// This context's lane `i` (0: the context itself; at most
    /// [`MAX_LANES`]` - 1`). The first use of a lane makes its stream and
    /// event. The handle is a [`Context`] (a clone of this one) whose work
    /// goes on that lane.
    pub fn lane(&self, i: usize) -> Result<Context> {
        Ok(self.lane_handle(i)?.0)
    }

    /// Lanes `1..=n`, each made to wait for this lane's work so far (a
    /// fork): their next work runs after it.
    pub fn fork(&self, n: usize) -> Result<Vec<Context>> {
        if n == 0 || n >= MAX_LANES {
            return Err(Error::invalid(format!("fork({n}): between 1 and {} lanes", MAX_LANES - 1)));
        }
        let start = if self.lane_index() == 0 { 1 } else { 0 };
        let mut lanes = Vec::with_capacity(n);
        for i in (start..).filter(|&i| i != self.lane_index()).take(n) {
            let lane = self.lane(i)?;
            lane.wait_lane(self)?;
            lanes.push(lane);
        }
        Ok(lanes)
    }

    /// Makes this lane wait for every lane in `lanes` (a join): its next
    /// work runs after their work so far.
    pub fn join(&self, lanes: &[Context]) -> Result<()> {
        for l in lanes {
            self.wait_lane(l)?;
        }
        Ok(())
    }

    /// Makes this lane's next work run after `other`'s work queued so far
    /// (both lanes of this context). Eagerly: `cuEventRecord` on `other`'s
    /// stream and `cuStreamWaitEvent` on this one; while a recording builds:
    /// edges of the graph, no driver call. Waiting for itself does nothing.
    pub fn wait_lane(&self, other: &Context) -> Result<()> {
        if !self.same_context(other) {
            return Err(Error::invalid("wait_lane: the lanes belong to different contexts"));
        }
        let (a, b) = (self.lane_index(), other.lane_index());
        if a == b {
            return Ok(());
        }
        if let Some(l) = self.recorder().sink().foreign_lane().filter(|&l| l == a || l == b) {
            return Err(Error::capture_state(format!(
                "lane {l} cannot wait or be waited for while a foreign section captures its stream; end the \
                 section first"
            )));
        }
        if self.records_by_construction() && self.recorder().sink().wait(a, b) {
            return Ok(());
        }
        let (_, theirs) = self.lane_handle(b)?;
        let (mine, theirs_stream) = (self.stream(), other.stream());
        self.bound(|d| {
            // SAFETY: the event and stream of lane `b` of this context.
            unsafe { cuda_sys::result::event::record(d, theirs.event, theirs_stream) }?;
            // SAFETY: a stream of this context and that event.
            Ok(unsafe { cuda_sys::result::stream::wait_event(d, mine, theirs.event, 0) }?)
        })
    }
}
