//! The capture state machine of one context, kept apart from the driver so
//! that its rules are tested on any machine: at most one capture open per
//! context, no capture begun inside a break function, and the stream
//! records only while a capture is open and none of its break functions
//! runs. It also keeps the first driver failure seen while the capture
//! records, so that a failed capture can name it.
//!
//! Two kinds of state, kept apart so that nothing latches:
//!
//! - **Per context** ([`CaptureState`]): what belongs to the one open
//!   capture: who opened it, whether one of *its* break functions runs at
//!   capture time (the stream is then out of capture), its first failure.
//!   Only the capture that set a mark clears it, and ending the capture
//!   clears them all.
//! - **Per thread** (`run_as_break`, `thread_in_break`,
//!   `run_with_live`, `thread_running_live`): which break functions run
//!   on the calling thread, at capture or at replay, and the live value a
//!   pass-through break receives. A stack of frames on the thread's own
//!   stack, pushed and popped in strict LIFO order (also when a break
//!   function unwinds), so replays of one graph on several threads at once
//!   never see or restore each other's marks. "Inside a break function"
//!   means: on this thread, inside a break function of this context. The
//!   stack's head is a thread-local of `crate::sync::shim` (loom's under
//!   `--cfg loom`, one per model thread: the loom models of
//!   `context/capture_control_loom_tests.rs` run replay breaks on two
//!   threads against a recording's begin and end).

use std::cell::Cell;
use std::os::raw::c_void;
use std::ptr;

use crate::error::{Error, Result};
use crate::sync::shim;

/// An OS thread, identified without Rust's thread-locals (so it can be read
/// on a thread that is exiting): its kernel thread id and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadTag {
    /// The kernel's thread id (`gettid`).
    pub tid: i64,
    /// The thread's name (`pthread_getname_np`), possibly empty.
    pub name: String,
}

thread_local! {
    /// The calling thread's kernel thread id, once asked for (0: not yet).
    /// No destructor: readable while the thread exits.
    static TID: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

fn gettid() -> i64 {
    // SAFETY: gettid has no preconditions.
    i64::from(unsafe { libc::gettid() })
}

impl ThreadTag {
    /// The calling thread's kernel thread id: one system call on a thread's
    /// first capture, a thread-local read after.
    pub fn current_tid() -> i64 {
        TID.try_with(|t| {
            if t.get() == 0 {
                t.set(gettid());
            }
            t.get()
        })
        .unwrap_or_else(|_| gettid())
    }

    /// The thread `tid` of this process, named as the kernel knows it now
    /// (`/proc/self/task/<tid>/comm`; empty when it has exited).
    pub fn of(tid: i64) -> ThreadTag {
        let name = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
            .map(|n| n.trim_end().to_string())
            .unwrap_or_default();
        ThreadTag { tid, name }
    }

    /// The calling thread.
    pub fn current() -> ThreadTag {
        let tid = Self::current_tid();
        let mut buf = [0 as libc::c_char; 64];
        // SAFETY: the buffer holds `len` bytes; the call NUL-terminates it.
        let rc = unsafe { libc::pthread_getname_np(libc::pthread_self(), buf.as_mut_ptr(), buf.len()) };
        let name = if rc == 0 {
            let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            String::new()
        };
        ThreadTag { tid, name }
    }
}

impl std::fmt::Display for ThreadTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name.is_empty() {
            write!(f, "thread {}", self.tid)
        } else {
            write!(f, "thread '{}' ({})", self.name, self.tid)
        }
    }
}

/// The key of a context in the per-thread break frames: the address of its
/// capture-state part inside its shared state, stable while any clone of
/// the context lives. A frame
/// is only on a thread's stack while the break function it marks runs, and
/// that function's caller holds the context, so a key never outlives it.
pub(crate) type CtxKey = usize;

/// What a frame marks.
#[derive(Clone, Copy)]
enum Mark {
    /// A break function of the context runs (at capture or at replay).
    Break,
    /// A held-capture break function (or a cache's eager recording) runs
    /// with this live value: what a pass-through break receives.
    Live(*mut c_void),
}

/// One frame of the calling thread's break stack. It lives on the stack of
/// the [`with_frame`] call that pushed it and is popped before that call
/// returns or unwinds.
struct Frame {
    ctx: CtxKey,
    mark: Mark,
    prev: *const Frame,
}

shim::thread_local! {
    /// The innermost frame of this thread's break stack (null: none). A
    /// `Cell` of a raw pointer: no destructor, so it stays readable on a
    /// thread that is exiting (a break replayed from a thread-exit path).
    static INNERMOST: Cell<*const Frame> = const { Cell::new(ptr::null()) };
}

/// Runs `f` with a frame `(ctx, mark)` pushed on this thread's break stack.
fn with_frame<T>(ctx: CtxKey, mark: Mark, f: impl FnOnce() -> T) -> T {
    struct Pop(*const Frame);
    impl Drop for Pop {
        fn drop(&mut self) {
            let prev = self.0;
            let _ = INNERMOST.try_with(|top| top.set(prev));
        }
    }
    let Ok(prev) = INNERMOST.try_with(Cell::get) else {
        // No thread-local storage left (cannot happen for a destructor-free
        // `Cell`; kept total): run unmarked rather than fail.
        return f();
    };
    let frame = Frame { ctx, mark, prev };
    let _ = INNERMOST.try_with(|top| top.set(&frame));
    let _pop = Pop(prev);
    f()
}

/// The first frame of `ctx`, innermost first, for which `pick` gives a value.
fn find<T>(ctx: CtxKey, pick: impl Fn(Mark) -> Option<T>) -> Option<T> {
    let mut at = INNERMOST.try_with(Cell::get).unwrap_or(ptr::null());
    while !at.is_null() {
        // SAFETY: every frame reachable from `INNERMOST` lives on this
        // thread's stack, in a `with_frame` call still running (each call
        // pops its frame before it returns or unwinds, in LIFO order), and
        // no `&mut` to a frame exists.
        let frame = unsafe { &*at };
        if frame.ctx == ctx {
            if let Some(v) = pick(frame.mark) {
                return Some(v);
            }
        }
        at = frame.prev;
    }
    None
}

/// Runs `f` as a break function of the context `ctx` on this thread (at
/// capture or at replay): meanwhile `thread_in_break` holds for `ctx` on
/// this thread only.
pub(crate) fn run_as_break<T>(ctx: CtxKey, f: impl FnOnce() -> T) -> T {
    with_frame(ctx, Mark::Break, f)
}

/// Runs `f` with `live` as this thread's running live value of `ctx` (what
/// `thread_running_live` returns meanwhile, on this thread only).
pub(crate) fn run_with_live<T>(ctx: CtxKey, live: *mut c_void, f: impl FnOnce() -> T) -> T {
    with_frame(ctx, Mark::Live(live), f)
}

/// Whether the calling thread is inside a break function of the context
/// `ctx` (at capture or at replay, at any depth).
pub(crate) fn thread_in_break(ctx: CtxKey) -> bool {
    find(ctx, |m| matches!(m, Mark::Break).then_some(())).is_some()
}

/// The innermost live value published on this thread for `ctx` by
/// `run_with_live`, or null.
pub(crate) fn thread_running_live(ctx: CtxKey) -> *mut c_void {
    find(ctx, |m| match m {
        Mark::Live(p) => Some(p),
        Mark::Break => None,
    })
    .unwrap_or(ptr::null_mut())
}

/// What a context is doing, capture-wise. The caller says whether the
/// calling thread is inside one of the context's break functions (see
/// `thread_in_break`): that is per thread, not kept here.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CaptureState {
    /// The thread (kernel id) that opened the current capture, if one is open.
    capturing: Option<i64>,
    /// A break function of the open capture runs at capture time: the
    /// stream is out of capture between two segments. Set and cleared by
    /// that capture's break alone (breaks of one capture never overlap: a
    /// capture is split by one caller at a time), cleared by `end`.
    paused: bool,
    /// The first driver failure while the open capture recorded.
    first_failure: Option<String>,
}

impl CaptureState {
    /// Whether a capture may be opened now: none open, and the calling
    /// thread not inside a break function of this context (`in_break`).
    /// Other threads' break functions do not matter.
    pub fn check_can_begin(&self, in_break: bool) -> Result<()> {
        if let Some(owner) = self.capturing {
            return Err(Error::capture_state(format!(
                "a capture is already open on this context (opened by {})",
                ThreadTag::of(owner)
            )));
        }
        if in_break {
            return Err(Error::capture_state("cannot begin a capture inside a break function"));
        }
        Ok(())
    }

    /// Opens a capture for the thread `tid` ([`ThreadTag::current_tid`]);
    /// refused while one is open or while `tid` runs a break function of
    /// this context (`in_break`).
    pub fn begin(&mut self, tid: i64, in_break: bool) -> Result<()> {
        self.check_can_begin(in_break)?;
        self.capturing = Some(tid);
        self.paused = false;
        self.first_failure = None;
        Ok(())
    }

    /// Whether the thread `tid` may end, split or abort the open capture of
    /// a THREAD_LOCAL or GLOBAL mode (a RELAXED one may be ended anywhere;
    /// the caller checks the mode): only the thread that opened it may. The
    /// driver refuses `cuStreamEndCapture` on any other thread
    /// (`CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD`) and the stream then keeps
    /// capturing, so the call is refused before it reaches the driver and
    /// the capture stays open, intact.
    pub fn check_owner(&self, tid: i64, what: &str) -> Result<()> {
        match self.capturing {
            Some(owner) if owner != tid => Err(Error::capture_state(format!(
                "cannot {what} this capture on thread {tid}: it was opened in THREAD_LOCAL or GLOBAL mode by \
                 {}, and the driver ends such a capture only on the thread that began it (open it in \
                 RELAXED mode to end it on another thread); the capture stays open",
                ThreadTag::of(owner)
            ))),
            _ => Ok(()),
        }
    }

    /// Closes the capture (ended or aborted), with every mark it set.
    pub fn end(&mut self) {
        self.capturing = None;
        self.paused = false;
        self.first_failure = None;
    }

    /// The open capture's break function starts running at capture time
    /// (its segment ended; the next one is not open yet).
    pub fn pause(&mut self) {
        self.paused = self.capturing.is_some();
    }

    /// That break function returned (or unwound).
    pub fn resume(&mut self) {
        self.paused = false;
    }

    /// A capture is open (also while one of its break functions runs).
    pub fn is_open(&self) -> bool {
        self.capturing.is_some()
    }

    /// A break function of the open capture runs at capture time.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// The stream records: a capture is open and none of its break
    /// functions runs. Allocations then come from the capture pool, and
    /// stream-synchronous work is refused.
    pub fn is_recording(&self) -> bool {
        self.capturing.is_some() && !self.paused
    }

    /// Whether a break reached now just runs its function: the stream does
    /// not record (no capture open, or one of its break functions runs), or
    /// the calling thread is inside a break function of this context
    /// (`in_break`: no nested split).
    pub fn break_passes_through(&self, in_break: bool) -> bool {
        !self.is_recording() || in_break
    }

    /// Records a driver failure as the capture's first one, naming the call,
    /// the calling thread and the CUDA error. Ignored without an open
    /// capture, after the first, and for errors that are not driver calls.
    pub fn note_failure(&mut self, e: &Error) {
        if self.capturing.is_none() || self.first_failure.is_some() {
            return;
        }
        let (call, name) = match e {
            Error::Cuda { call, name, .. } => (*call, name.as_str()),
            Error::CaptureInvalidated { call, .. } => (*call, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"),
            _ => return,
        };
        self.first_failure = Some(format!("{call} on {} returned {name}", ThreadTag::current()));
    }

    /// The first failure noted while the capture recorded, as a sentence
    /// fragment for error messages.
    pub fn first_failure(&self) -> Option<String> {
        self.first_failure.as_ref().map(|f| format!("first failure inside the capture: {f}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> i64 {
        ThreadTag::current_tid()
    }

    /// A context key for the frame tests (any distinct number will do: no
    /// context is dereferenced through a key).
    fn key(n: usize) -> CtxKey {
        0x1000 + n
    }

    #[test]
    fn idle_state_records_nothing_and_breaks_pass_through() {
        let s = CaptureState::default();
        assert!(!s.is_open() && !s.is_recording() && !s.is_paused());
        assert!(s.break_passes_through(false));
    }

    #[test]
    fn one_capture_at_a_time() {
        let mut s = CaptureState::default();
        s.begin(me(), false).unwrap();
        assert!(s.is_open() && s.is_recording() && !s.break_passes_through(false));
        let e = s.begin(me(), false).unwrap_err();
        assert!(matches!(e, Error::CaptureState(ref m) if m.contains("already open")), "{e}");
        s.end();
        assert!(!s.is_open());
        s.begin(me(), false).unwrap();
    }

    #[test]
    fn a_capture_time_break_stops_recording_and_nested_breaks_pass_through() {
        let mut s = CaptureState::default();
        s.begin(me(), false).unwrap();
        s.pause();
        assert!(s.is_open() && !s.is_recording() && s.is_paused());
        assert!(s.break_passes_through(true), "a break inside the break does not split");
        assert!(s.break_passes_through(false), "nor one on another thread while the stream is out of capture");
        s.resume();
        assert!(s.is_recording() && !s.break_passes_through(false));
        assert!(s.break_passes_through(true), "a break inside a replay's break function does not split either");
    }

    #[test]
    fn pausing_without_a_capture_marks_nothing() {
        let mut s = CaptureState::default();
        s.pause();
        assert_eq!(s, CaptureState::default());
    }

    #[test]
    fn no_capture_begins_inside_a_break() {
        let mut s = CaptureState::default();
        let e = s.begin(me(), true).unwrap_err();
        assert!(matches!(e, Error::CaptureState(ref m) if m.contains("inside a break")), "{e}");
        assert!(!s.is_open(), "a refused begin leaves nothing open");
        s.begin(me(), false).unwrap();
    }

    #[test]
    fn end_clears_a_break_mark_left_by_an_aborted_capture() {
        let mut s = CaptureState::default();
        s.begin(me(), false).unwrap();
        s.pause();
        s.end();
        assert_eq!(s, CaptureState::default());
    }

    #[test]
    fn break_frames_are_per_context_and_nest() {
        let (a, b) = (key(1), key(2));
        assert!(!thread_in_break(a) && !thread_in_break(b));
        run_as_break(a, || {
            assert!(thread_in_break(a) && !thread_in_break(b));
            run_as_break(b, || {
                assert!(thread_in_break(a) && thread_in_break(b), "a break of b inside a break of a");
                run_as_break(a, || assert!(thread_in_break(a)));
                assert!(thread_in_break(a), "leaving the inner break of a keeps the outer one");
            });
            assert!(thread_in_break(a) && !thread_in_break(b));
        });
        assert!(!thread_in_break(a) && !thread_in_break(b));
    }

    #[test]
    fn a_break_function_that_panics_leaves_no_mark() {
        let a = key(3);
        let caught = std::panic::catch_unwind(|| run_as_break(a, || run_as_break(key(4), || panic!("in the break"))));
        assert!(caught.is_err());
        assert!(!thread_in_break(a) && !thread_in_break(key(4)));
        assert!(INNERMOST.with(Cell::get).is_null(), "the frame stack is empty again");
    }

    #[test]
    fn running_live_values_are_per_thread_and_innermost() {
        let a = key(5);
        let (mut v1, mut v2) = (1u8, 2u8);
        let (p1, p2) = ((&mut v1 as *mut u8).cast::<c_void>(), (&mut v2 as *mut u8).cast::<c_void>());
        assert!(thread_running_live(a).is_null());
        run_with_live(a, p1, || {
            assert_eq!(thread_running_live(a), p1);
            assert!(!thread_in_break(a), "a live value alone is no break");
            assert!(thread_running_live(key(6)).is_null(), "another context's");
            run_as_break(a, || {
                assert_eq!(thread_running_live(a), p1, "a break frame keeps the enclosing live value");
                run_with_live(a, p2, || assert_eq!(thread_running_live(a), p2));
                assert_eq!(thread_running_live(a), p1);
            });
            std::thread::spawn(move || assert!(thread_running_live(a).is_null(), "not on another thread"))
                .join()
                .unwrap();
        });
        assert!(thread_running_live(a).is_null());
    }

    /// The latch of issue 17: replays of one graph on several threads each
    /// ran its break under one per-context flag, saving and restoring it, so
    /// leaves in another order than the enters left it set for good. Here
    /// four threads enter and leave their breaks of one context interleaved
    /// in every order a barrier can force (enter all, then leave in
    /// reverse, in order, and odd/even), with the context's state shared
    /// behind a mutex as the library keeps it.
    #[test]
    fn interleaved_breaks_on_four_threads_leave_no_latch() {
        use std::sync::{Arc, Barrier, Mutex};
        const THREADS: usize = 4;
        let ctx = key(7);
        let state = Arc::new(Mutex::new(CaptureState::default()));
        let leave_orders: [[usize; THREADS]; 3] = [[3, 2, 1, 0], [0, 1, 2, 3], [1, 3, 0, 2]];
        for order in leave_orders {
            let entered = Arc::new(Barrier::new(THREADS + 1));
            let turns: Arc<Vec<Barrier>> = Arc::new((0..=THREADS).map(|_| Barrier::new(THREADS + 1)).collect());
            let threads: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (state, entered, turns) = (state.clone(), entered.clone(), turns.clone());
                    let rank = order.iter().position(|&t| t == i).unwrap();
                    std::thread::spawn(move || {
                        run_as_break(ctx, || {
                            entered.wait();
                            let refused = state.lock().unwrap().check_can_begin(thread_in_break(ctx));
                            assert!(refused.is_err(), "inside its break, thread {i} may not begin");
                            // Leave at this thread's turn.
                            for turn in turns.iter().take(rank + 1) {
                                turn.wait();
                            }
                        });
                        assert!(!thread_in_break(ctx));
                        for turn in turns.iter().skip(rank + 1) {
                            turn.wait();
                        }
                        state.lock().unwrap().check_can_begin(thread_in_break(ctx))
                    })
                })
                .collect();
            entered.wait();
            // Every thread is inside its break: this thread is not, and may
            // begin (and end) a capture meanwhile.
            assert!(!thread_in_break(ctx));
            state.lock().unwrap().begin(me(), thread_in_break(ctx)).unwrap();
            state.lock().unwrap().end();
            for turn in turns.iter().take(THREADS) {
                turn.wait();
            }
            turns[THREADS].wait();
            for t in threads {
                t.join().unwrap().expect("after its break, each thread may begin");
            }
            let mut s = state.lock().unwrap();
            s.begin(me(), thread_in_break(ctx)).expect("after all left (leave order {order:?}), a capture begins");
            s.end();
        }
    }

    #[test]
    fn the_first_driver_failure_is_named_with_its_thread() {
        let mut s = CaptureState::default();
        let invalidated = Error::CaptureInvalidated { call: "cuLaunchKernel", detail: String::new() };
        s.note_failure(&invalidated);
        assert_eq!(s.first_failure(), None, "no capture open: nothing noted");
        std::thread::Builder::new()
            .name("decode-7".into())
            .spawn(move || {
                s.begin(me(), false).unwrap();
                s.note_failure(&Error::invalid("not a driver call"));
                assert_eq!(s.first_failure(), None);
                s.note_failure(&invalidated);
                let later = Error::Cuda {
                    call: "cuMemsetD8Async",
                    code: 1,
                    name: "CUDA_ERROR_INVALID_VALUE".into(),
                    description: String::new(),
                };
                s.note_failure(&later);
                let f = s.first_failure().unwrap();
                assert!(
                    f.starts_with("first failure inside the capture: cuLaunchKernel on thread 'decode-7' ("),
                    "{f}"
                );
                assert!(f.ends_with("returned CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"), "{f}");
                s.end();
                assert_eq!(s.first_failure(), None);
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn only_the_opening_thread_may_end_a_capture() {
        let mut s = CaptureState::default();
        assert!(s.check_owner(ThreadTag::current_tid(), "end").is_ok(), "no capture: nothing to refuse");
        s.begin(me(), false).unwrap();
        assert!(s.check_owner(ThreadTag::current_tid(), "end").is_ok());
        let other = std::thread::spawn(ThreadTag::current_tid).join().unwrap();
        let e = s.check_owner(other, "end").unwrap_err();
        assert!(
            matches!(e, Error::CaptureState(ref m) if m.contains(&format!("cannot end this capture on thread {other}"))
                && m.contains("RELAXED") && m.contains("stays open")),
            "{e}"
        );
        assert!(s.is_open(), "a refused end leaves the capture open");
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads /proc/self/task/<tid>/comm: Miri isolates the host")]
    fn thread_ids_are_cached_and_names_read_by_id() {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("fc-tid".into())
            .spawn(move || {
                let (a, b) = (ThreadTag::current_tid(), ThreadTag::current_tid());
                tid_tx.send((a, b)).unwrap();
                done_rx.recv().unwrap();
            })
            .unwrap();
        let (a, b) = tid_rx.recv().unwrap();
        assert_eq!(a, b, "cached");
        assert_ne!(a, ThreadTag::current_tid());
        assert_eq!(ThreadTag::of(a).name, "fc-tid", "another live thread, named by its id");
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(ThreadTag::of(ThreadTag::current_tid()), ThreadTag::current());
    }

    #[test]
    fn thread_tags_read_the_os_name() {
        let t = std::thread::Builder::new().name("fc-tag".into()).spawn(ThreadTag::current).unwrap().join().unwrap();
        assert_eq!(t.name, "fc-tag");
        assert!(t.tid > 0);
        assert_ne!(t, ThreadTag::current());
        assert!(t.to_string().starts_with("thread 'fc-tag' ("));
    }
}
