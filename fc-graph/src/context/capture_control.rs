//! The context's capture-state machine ([`CaptureControl`]): the one open
//! recording's state ([`crate::capture_state::CaptureState`], behind a
//! lock: at most one recording, none begun inside a break function, the
//! stream records only while no capture-time break runs, its first driver
//! failure), and the per-thread break frames and live values that
//! [`crate::capture_state`] keys by this part's address.
//!
//! A capture-time break hands over between two segments
//! ([`crate::Recording::brk`], on the thread that splits the recording,
//! which holds it `&mut`: one break of a recording at a time): the
//! segment ends, the state pauses (under the lock), the function runs
//! marked as in a break on that thread ([`CaptureControl::run_paused`]),
//! the state resumes (a guard: also when the function unwinds), and the
//! next segment opens (also when the function fails or unwinds; the
//! recording then fails). Meanwhile the recording stays open, so another
//! thread's begin is refused (the check and the begin are one hold of the
//! lock: one recording per context); the stream does not record, so
//! breaks reached now pass through and stream-synchronous work is
//! allowed; launches run eagerly (the sink is closed). Only that break
//! pauses and resumes the state; replay breaks on other threads only push
//! frames on their own stacks, so no thread's break leaves a mark on
//! another (no latch). The loom models of `capture_control_loom_tests.rs`
//! check these steps, with this part, the real sink and the real frames,
//! over every interleaving with another thread's begin, launch or replay
//! break.

use std::os::raw::c_void;

use crate::capture_state::{self, CaptureState, CtxKey};
use crate::error::{Error, Result};
use crate::sync::shim::{lock, Mutex, MutexGuard};

/// Loom's models of the break-state hand-off (a recording's capture-time
/// break against other threads' begins, launches and replay breaks):
/// `scripts/loom.sh`.
#[cfg(all(test, loom))]
#[path = "capture_control_loom_tests.rs"]
mod loom_tests;

/// The capture-state part of a context.
#[derive(Default)]
#[cfg_attr(not(loom), derive(Debug))]
pub(crate) struct CaptureControl {
    state: Mutex<CaptureState>,
}

/// loom's mutex has no `Debug`.
#[cfg(loom)]
impl std::fmt::Debug for CaptureControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureControl").finish_non_exhaustive()
    }
}

impl CaptureControl {
    /// The state, locked: for steps that must not interleave with another
    /// thread's (a recording's begin and close).
    pub(crate) fn state(&self) -> MutexGuard<'_, CaptureState> {
        lock(&self.state)
    }

    /// This context's key in the per-thread break frames: the part's
    /// address, stable while the context's shared state lives.
    fn key(&self) -> CtxKey {
        self as *const CaptureControl as CtxKey
    }

    /// Whether a capture is open (also while one of its breaks runs).
    pub(crate) fn is_open(&self) -> bool {
        self.state().is_open()
    }

    /// Whether the stream records now: a capture is open and none of its
    /// break functions runs.
    pub(crate) fn is_recording(&self) -> bool {
        self.state().is_recording()
    }

    /// Whether the calling thread runs a break function of this context.
    pub(crate) fn in_break(&self) -> bool {
        capture_state::thread_in_break(self.key())
    }

    /// Whether a break reached now just runs its function (see
    /// [`CaptureState::break_passes_through`]).
    pub(crate) fn break_passes_through(&self) -> bool {
        let in_break = self.in_break();
        self.state().break_passes_through(in_break)
    }

    /// Refuses a capture now: one is open, or the calling thread is inside
    /// a break function of this context.
    pub(crate) fn check_can_begin(&self) -> Result<()> {
        let in_break = self.in_break();
        self.state().check_can_begin(in_break)
    }

    /// Refuses stream-synchronous work (`what`) while the stream records.
    pub(crate) fn refuse_while_recording(&self, what: &str) -> Result<()> {
        if self.is_recording() {
            return Err(Error::capture_state(format!(
                "cannot {what} while this context is capturing (it would invalidate the capture)"
            )));
        }
        Ok(())
    }

    /// Notes a driver failure as the open capture's first failure.
    pub(crate) fn note_failure(&self, e: &Error) {
        self.state().note_failure(e);
    }

    /// Runs a break function with the calling thread marked as inside a
    /// break of this context (a frame on its stack, gone when `f` returns
    /// or unwinds).
    pub(crate) fn run_break<T>(&self, f: impl FnOnce() -> T) -> T {
        capture_state::run_as_break(self.key(), f)
    }

    /// Runs a break function of the open capture at capture time: the
    /// stream is out of capture meanwhile, so nothing records until `f`
    /// returns or unwinds; the thread is marked as in
    /// [`CaptureControl::run_break`].
    pub(crate) fn run_paused<T>(&self, f: impl FnOnce() -> T) -> T {
        self.state().pause();
        struct Resume<'a>(&'a CaptureControl);
        impl Drop for Resume<'_> {
            fn drop(&mut self) {
                self.0.state().resume();
            }
        }
        let _resume = Resume(self);
        self.run_break(f)
    }

    /// Runs `f` with `value` as the calling thread's value for this context.
    pub(crate) fn with_thread_value<T>(&self, value: *mut c_void, f: impl FnOnce() -> T) -> T {
        capture_state::run_with_live(self.key(), value, f)
    }

    /// The innermost value published on the calling thread, or null.
    pub(crate) fn thread_value(&self) -> *mut c_void {
        capture_state::thread_running_live(self.key())
    }
}
