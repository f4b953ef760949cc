//! Timing events on a context's stream.

use cuda_sys::result::event;
use cuda_sys::*;

use crate::context::Context;
use crate::error::Result;

/// A CUDA event recorded on its context's stream.
pub struct Event {
    ctx: Context,
    raw: CUevent,
}

// SAFETY: event handles may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: all operations go through the driver, which synchronises them.
unsafe impl Sync for Event {}

impl Event {
    /// A timing event on `ctx`.
    pub fn new(ctx: &Context) -> Result<Event> {
        // In the context, made current here.
        let raw = ctx.bound(|d| Ok(event::create(d, CU_EVENT_DEFAULT)?))?;
        Ok(Event { ctx: ctx.clone(), raw })
    }

    /// Records the event on the context's stream. Refused while a
    /// recording of the context builds its graph (events are not graph
    /// nodes of fc-graph's recordings; record them outside the recording,
    /// or inside a foreign section).
    pub fn record(&self) -> Result<()> {
        if self.ctx.records_by_construction() {
            return Err(crate::error::Error::capture_state(
                "cannot record an event while a recording of this context is open (its work is built into a \
                 graph, not enqueued); record it before or after the recording, or inside a foreign section",
            ));
        }
        let (e, s) = (self.raw, self.ctx.stream());
        self.ctx.recorder().trace().note_other();
        self.ctx.bound(|d| {
            // SAFETY: live event and stream of one context.
            Ok(unsafe { event::record(d, e, s) }?)
        })
    }

    /// Waits until the work recorded before the event is done.
    pub fn synchronize(&self) -> Result<()> {
        let e = self.raw;
        self.ctx.shielded(|d| {
            // SAFETY: live event.
            Ok(unsafe { event::synchronize(d, e) }?)
        })
    }

    /// Milliseconds of device time from `start` to this event.
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        let (s, e) = (start.raw, self.raw);
        self.ctx.bound(|d| {
            // SAFETY: both events are live and recorded.
            Ok(unsafe { event::elapsed_time(d, s, e) }?)
        })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let e = self.raw;
        let _ = self.ctx.bound(|d| {
            // SAFETY: destroyed once.
            Ok(unsafe { event::destroy(d, e) }?)
        });
    }
}
