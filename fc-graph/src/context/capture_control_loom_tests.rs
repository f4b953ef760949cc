//! Loom's models of the break-state hand-off, over the real
//! [`CaptureControl`] (its state mutex is loom's under `--cfg loom`), the
//! real per-thread break frames of [`crate::capture_state`] (loom's
//! thread-locals: one stack per model thread) and the real [`Sink`]. What
//! a recording does with them is [`Rec`]'s: the steps of
//! [`crate::Recording`]'s `begin`, `brk` and `close` for a recording that
//! builds its graph (the default), in their order, without the driver.
//! Run by `scripts/loom.sh`; each prints
//! `loom: NAME: N interleavings, 0 failures`.
//!
//! Invariants: at most one recording is open on a context at a time (the
//! model's own slot, [`Model::open`], is written by the open recording
//! alone: loom reports a second one beside it as a race, and the slot says
//! who holds it); a break that starts ends, once, leaving the recording
//! open and recording with its next segment taking launches (also when
//! its function unwinds); inside it the stream does not record, no
//! recording begins and the break's own launches run eagerly; another
//! thread never sees itself inside the recording thread's break, nor one
//! replay thread inside another's (no latch, issue 17), and each sees its
//! own thread value; every launch the sink takes is in exactly one
//! segment; when all is done the context is idle and its locks free.

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use super::CaptureControl;
use crate::error::Result;
use crate::segment::loom_tests::dsts;
use crate::segment::tests::memset;
use crate::segment::{Ops, Sink};
use crate::sync::model;

/// The parts of a context the hand-off touches, and the model's record of
/// which recording is open.
#[derive(Default)]
struct Model {
    capture: CaptureControl,
    sink: Sink,
    /// The thread whose recording is open: set right after its begin,
    /// cleared right before its close, by that recording alone.
    open: UnsafeCell<Option<i64>>,
}

/// A recording of [`Model`] opened by the thread `tid` (a model's thread
/// number: loom's threads share one OS thread).
struct Rec<'a> {
    m: &'a Model,
    tid: i64,
}

impl Model {
    /// `Recording::begin`: refused while a recording is open or inside a
    /// break of this context on this thread; the check, the sink's open
    /// and the state's begin under one hold of the state lock.
    fn begin(&self, tid: i64) -> Result<Rec<'_>> {
        let in_break = self.capture.in_break();
        let mut state = self.capture.state();
        state.check_can_begin(in_break)?;
        self.sink.open();
        state.begin(tid, in_break)?;
        drop(state);
        self.open.with_mut(|o| {
            // SAFETY: loom checks that no other access to the slot races.
            let o = unsafe { &mut *o };
            assert_eq!(*o, None, "thread {tid} began a recording while one is open");
            *o = Some(tid);
        });
        Ok(Rec { m: self, tid })
    }

    /// Idle: no recording open, none paused, the sink taking nothing, its
    /// locks free; this thread in no break.
    fn assert_idle(&self) {
        let state = self.capture.state().clone();
        assert!(!state.is_open() && !state.is_paused(), "{state:?}");
        assert!(!self.sink.is_active(), "the sink still takes launches");
        assert!(!self.capture.in_break());
        assert!(self.capture.thread_value().is_null());
        self.open.with(|o| {
            // SAFETY: as in `begin`.
            assert_eq!(unsafe { *o }, None);
        });
        self.assert_unlocked();
    }

    fn assert_unlocked(&self) {
        assert!(self.sink.is_unlocked(), "a lock of the sink is still held");
        assert!(self.capture.state.try_lock().is_ok(), "the state lock is still held");
    }
}

impl Rec<'_> {
    /// `Recording::brk` (breaks run): ends the segment, runs `f` paused
    /// (marked as in a break of the context), opens the next segment, also
    /// when `f` unwinds (then the unwinding goes on after).
    fn brk(&mut self, f: impl FnOnce()) -> Ops {
        let ops = self.m.sink.close().unwrap_or_default();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.m.capture.run_paused(f)));
        self.m.sink.open();
        if let Err(panic) = ran {
            std::panic::resume_unwind(panic);
        }
        ops
    }

    /// `Recording::close` (its end, abort or drop): closes the segment,
    /// then the state.
    fn close(self) -> Ops {
        let tid = self.tid;
        self.m.open.with_mut(|o| {
            // SAFETY: as in `Model::begin`.
            let o = unsafe { &mut *o };
            assert_eq!(*o, Some(tid), "thread {tid} closes a recording it does not hold");
            *o = None;
        });
        let ops = self.m.sink.close().unwrap_or_default();
        self.m.capture.state().end();
        ops
    }

    /// Open and recording: the state records, the sink takes launches.
    fn assert_recording(&self) {
        let state = self.m.capture.state().clone();
        assert!(state.is_recording() && !state.is_paused(), "{state:?}");
        assert!(self.m.sink.is_active(), "the next segment takes launches");
    }
}

/// What a break function checks inside: it runs marked, the stream does
/// not record, a break reached now passes through, no recording begins,
/// and its own launches run eagerly.
fn inside_the_break(m: &Model) {
    assert!(m.capture.in_break(), "the break function runs marked");
    assert!(m.capture.is_open() && !m.capture.is_recording(), "paused: the stream does not record");
    assert!(m.capture.break_passes_through(), "a break inside the break just runs");
    assert!(m.capture.check_can_begin().is_err(), "no recording begins inside a break");
    assert!(!m.sink.push(memset(0x1ff, 1), 0), "the break's own launches run eagerly");
}

/// Two threads begin a recording at once, and the one that gets it
/// launches into it and closes it: one opens first, the other's begin is
/// refused or comes after the close; each launch lands in its own
/// recording's segment.
#[test]
fn loom_two_threads_begin_at_once_one_opens() {
    model("break hand-off: two threads begin at once", None, || {
        let m = Arc::new(Model::default());
        let record = |m: &Model, tid: i64| match m.begin(tid) {
            Ok(rec) => {
                assert!(m.sink.push(memset(0x100 * tid as u64, 1), 0), "its own recording takes it");
                assert_eq!(dsts(&rec.close()), [0x100 * tid as u64], "its launch, in its own segment");
                true
            }
            Err(_) => false,
        };
        let other = {
            let m = Arc::clone(&m);
            thread::spawn(move || record(&m, 2))
        };
        let mine = record(&m, 1);
        let theirs = other.join().expect("joined");
        assert!(mine || theirs, "one of the two opened");
        m.assert_idle();
    });
}

/// Another thread begins a recording (and, if it got one, records and
/// closes it) against the recording thread's break and close: it opens
/// only after the first closed (refused before, the break included), and
/// the break runs once, marked, paused, and hands over to the next
/// segment.
#[test]
fn loom_break_hand_off_against_another_threads_begin() {
    model("break hand-off: a recording's break against another thread's begin", None, || {
        let m = Arc::new(Model::default());
        let mut rec = m.begin(1).expect("nothing open: begun");
        let other = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                assert!(!m.capture.in_break(), "the recording thread's break is not this thread's");
                match m.begin(2) {
                    Ok(mine) => {
                        mine.assert_recording();
                        assert!(mine.close().list.is_empty());
                        true
                    }
                    Err(_) => false,
                }
            })
        };
        let mut ran = 0;
        rec.brk(|| {
            ran += 1;
            inside_the_break(&m);
        });
        assert_eq!(ran, 1, "the break ran once");
        rec.assert_recording();
        assert!(!m.capture.in_break(), "the break's mark is gone");
        rec.close();
        other.join().expect("joined");
        m.assert_idle();
    });
}

/// Another thread launches while the recording thread breaks and closes
/// its recording: the launch is taken into exactly one of the two
/// segments, or refused (run eagerly: between the segments, or after the
/// close), never both.
#[test]
fn loom_a_launch_from_another_thread_across_a_break() {
    model("break hand-off: another thread's launch across a break", None, || {
        let m = Arc::new(Model::default());
        let mut rec = m.begin(1).expect("nothing open: begun");
        let other = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.sink.push(memset(0x200, 1), 0))
        };
        let first = rec.brk(|| {
            assert!(m.capture.in_break());
            assert!(!m.sink.push(memset(0x1ff, 1), 0), "the break's own launches run eagerly");
        });
        let second = rec.close();
        let launched = other.join().expect("joined");
        let seen: Vec<u64> = dsts(&first).into_iter().chain(dsts(&second)).collect();
        assert_eq!(seen, if launched { vec![0x200] } else { vec![] }, "a launch taken is in one segment");
        m.assert_idle();
    });
}

/// The recording thread's break function unwinds while another thread
/// begins: the state resumes, the mark goes, the next segment opens (the
/// launches until the recording closes are recorded, never run eagerly;
/// `Recording::brk` then fails the recording and goes on unwinding), and
/// the recording closes as usual.
#[test]
fn loom_a_break_that_unwinds_still_hands_over() {
    model("break hand-off: a break that unwinds", None, || {
        let m = Arc::new(Model::default());
        let mut rec = m.begin(1).expect("nothing open: begun");
        let other = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                if let Ok(mine) = m.begin(2) {
                    mine.close();
                }
            })
        };
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rec.brk(|| {
                inside_the_break(&m);
                // No panic hook runs (no message per interleaving).
                std::panic::resume_unwind(Box::new("the break function fails"));
            })
        }));
        assert!(unwound.is_err(), "the unwinding went on");
        rec.assert_recording();
        assert!(!m.capture.in_break(), "the break's mark is gone");
        assert!(m.sink.push(memset(0x100, 1), 0), "after the break, launches are recorded");
        assert_eq!(dsts(&rec.close()), [0x100]);
        other.join().expect("joined");
        m.assert_idle();
    });
}

/// Two threads replay a graph's break of the context (each with its own
/// thread value) while the recording thread begins and closes a recording:
/// inside its break each thread is refused a recording and sees its own
/// value only; leaving, it leaves no mark (on any thread), and a recording
/// begins after, in every order of the enters and leaves.
#[test]
fn loom_replay_breaks_on_two_threads_leave_no_latch() {
    model("break hand-off: replay breaks on two threads leave no latch", None, || {
        let m = Arc::new(Model::default());
        let replays: Vec<_> = (0..2usize)
            .map(|t| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let value = std::ptr::null_mut::<u8>().wrapping_add(0x10 + t).cast();
                    m.capture.run_break(|| {
                        m.capture.with_thread_value(value, || {
                            assert!(m.capture.in_break());
                            assert_eq!(m.capture.thread_value(), value, "its own value");
                            assert!(m.capture.check_can_begin().is_err(), "inside its break: refused");
                        })
                    });
                    assert!(!m.capture.in_break() && m.capture.thread_value().is_null(), "no mark left");
                })
            })
            .collect();
        assert!(!m.capture.in_break(), "the replays' breaks are theirs");
        let rec = m.begin(1).expect("this thread is in no break: begun");
        rec.assert_recording();
        rec.close();
        for r in replays {
            r.join().expect("joined");
        }
        m.begin(1).expect("after every break left, a recording begins").close();
        m.assert_idle();
    });
}
