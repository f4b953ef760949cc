//! The capture state machine of one context, kept apart from the driver so
//! that its rules are tested on any machine: at most one capture open per
//! context, no capture begun inside a break function, and the stream
//! records only while a capture is open and no break function runs.

use std::thread::ThreadId;

use crate::error::{Error, Result};

/// What a context is doing, capture-wise.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CaptureState {
    /// The thread that opened the current capture, if one is open.
    capturing: Option<ThreadId>,
    /// A break function of this context is running (at capture or replay).
    in_break: bool,
}

impl CaptureState {
    /// Opens a capture for `thread`; refused while one is open or while a
    /// break function runs.
    pub fn begin(&mut self, thread: ThreadId) -> Result<()> {
        if let Some(owner) = self.capturing {
            return Err(Error::capture_state(format!(
                "a capture is already open on this context (opened by thread {owner:?})"
            )));
        }
        if self.in_break {
            return Err(Error::capture_state("cannot begin a capture inside a break function"));
        }
        self.capturing = Some(thread);
        Ok(())
    }

    /// Closes the capture (ended or aborted).
    pub fn end(&mut self) {
        self.capturing = None;
        self.in_break = false;
    }

    /// Marks a break function as running; returns the previous mark for
    /// [`CaptureState::leave_break`].
    pub fn enter_break(&mut self) -> bool {
        std::mem::replace(&mut self.in_break, true)
    }

    /// Restores the mark `enter_break` returned.
    pub fn leave_break(&mut self, previous: bool) {
        self.in_break = previous;
    }

    /// A capture is open (also while one of its break functions runs).
    pub fn is_open(&self) -> bool {
        self.capturing.is_some()
    }

    /// A break function is running.
    pub fn in_break(&self) -> bool {
        self.in_break
    }

    /// The stream records: a capture is open and no break function runs.
    /// Allocations then come from the capture pool, and stream-synchronous
    /// work is refused.
    pub fn is_recording(&self) -> bool {
        self.capturing.is_some() && !self.in_break
    }

    /// Whether a break reached now just runs its function (no capture open,
    /// or inside another break: no nested split).
    pub fn break_passes_through(&self) -> bool {
        !self.is_open() || self.in_break
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> ThreadId {
        std::thread::current().id()
    }

    #[test]
    fn idle_state_records_nothing_and_breaks_pass_through() {
        let s = CaptureState::default();
        assert!(!s.is_open() && !s.is_recording() && !s.in_break());
        assert!(s.break_passes_through());
    }

    #[test]
    fn one_capture_at_a_time() {
        let mut s = CaptureState::default();
        s.begin(me()).unwrap();
        assert!(s.is_open() && s.is_recording() && !s.break_passes_through());
        let e = s.begin(me()).unwrap_err();
        assert!(matches!(e, Error::CaptureState(ref m) if m.contains("already open")), "{e}");
        s.end();
        assert!(!s.is_open());
        s.begin(me()).unwrap();
    }

    #[test]
    fn break_stops_recording_and_nested_breaks_pass_through() {
        let mut s = CaptureState::default();
        s.begin(me()).unwrap();
        let outer = s.enter_break();
        assert!(!outer);
        assert!(s.is_open() && !s.is_recording() && s.in_break());
        assert!(s.break_passes_through(), "a break inside a break does not split");
        let inner = s.enter_break();
        assert!(inner);
        s.leave_break(inner);
        assert!(s.in_break(), "leaving the inner break keeps the outer one");
        s.leave_break(outer);
        assert!(s.is_recording());
    }

    #[test]
    fn no_capture_begins_inside_a_break() {
        let mut s = CaptureState::default();
        let prev = s.enter_break(); // a break running at replay
        let e = s.begin(me()).unwrap_err();
        assert!(matches!(e, Error::CaptureState(ref m) if m.contains("inside a break")), "{e}");
        s.leave_break(prev);
        s.begin(me()).unwrap();
    }

    #[test]
    fn end_clears_a_break_mark_left_by_an_aborted_capture() {
        let mut s = CaptureState::default();
        s.begin(me()).unwrap();
        s.enter_break();
        s.end();
        assert_eq!(s, CaptureState::default());
    }
}
