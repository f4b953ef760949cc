//! The capture state machine of one context, kept apart from the driver so
//! that its rules are tested on any machine: at most one capture open per
//! context, no capture begun inside a break function, and the stream
//! records only while a capture is open and no break function runs. It also
//! keeps the first driver failure seen while the capture records, so that a
//! failed capture can name it.

use crate::error::{Error, Result};

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

/// What a context is doing, capture-wise.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CaptureState {
    /// The thread (kernel id) that opened the current capture, if one is open.
    capturing: Option<i64>,
    /// A break function of this context is running (at capture or replay).
    in_break: bool,
    /// The first driver failure while the open capture recorded.
    first_failure: Option<String>,
}

impl CaptureState {
    /// Whether a capture may be opened now (none open, no break running).
    pub fn check_can_begin(&self) -> Result<()> {
        if let Some(owner) = self.capturing {
            return Err(Error::capture_state(format!(
                "a capture is already open on this context (opened by {})",
                ThreadTag::of(owner)
            )));
        }
        if self.in_break {
            return Err(Error::capture_state("cannot begin a capture inside a break function"));
        }
        Ok(())
    }

    /// Opens a capture for the thread `tid` ([`ThreadTag::current_tid`]);
    /// refused while one is open or while a break function runs.
    pub fn begin(&mut self, tid: i64) -> Result<()> {
        self.check_can_begin()?;
        self.capturing = Some(tid);
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

    /// Closes the capture (ended or aborted).
    pub fn end(&mut self) {
        self.capturing = None;
        self.in_break = false;
        self.first_failure = None;
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

    #[test]
    fn the_first_driver_failure_is_named_with_its_thread() {
        let mut s = CaptureState::default();
        let invalidated = Error::CaptureInvalidated { call: "cuLaunchKernel", detail: String::new() };
        s.note_failure(&invalidated);
        assert_eq!(s.first_failure(), None, "no capture open: nothing noted");
        std::thread::Builder::new()
            .name("decode-7".into())
            .spawn(move || {
                s.begin(me()).unwrap();
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
        s.begin(me()).unwrap();
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
