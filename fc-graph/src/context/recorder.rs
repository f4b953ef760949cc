//! Where a context's work goes while a recording is open ([`Recorder`]):
//! the sink of a recording that builds its graph node by node
//! ([`crate::segment::Sink`]), the trace of what a stream-captured segment
//! recorded through the library ([`crate::topology::SegmentTrace`], which
//! also knows whether the stream's handle was handed out), and the
//! [`RecordingMode`] that chooses between the two for recordings begun
//! from now on.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::recording_mode::RecordingMode;
use crate::segment::Sink;
use crate::topology::SegmentTrace;

/// The recording part of a context. The trace and then the sink come
/// first: every eager launch notes itself in the trace and asks the sink
/// whether a recording builds (a recording's launches give it their op).
#[repr(C)]
pub(crate) struct Recorder {
    trace: SegmentTrace,
    sink: Sink,
    /// The [`RecordingMode`] of recordings begun from now on.
    mode: AtomicU8,
}

impl Recorder {
    /// Nothing recording; recordings begun in `mode`.
    pub(crate) fn new(mode: RecordingMode) -> Recorder {
        Recorder { trace: SegmentTrace::default(), sink: Sink::default(), mode: AtomicU8::new(mode.to_u8()) }
    }

    /// Where the fields every launch reads end (the context's layout test).
    #[cfg(test)]
    pub(crate) fn hot_end() -> usize {
        std::mem::offset_of!(Recorder, sink) + Sink::hot_end()
    }

    /// Where the library's work goes while a recording builds.
    #[inline]
    pub(crate) fn sink(&self) -> &Sink {
        &self.sink
    }

    /// What the open stream-capture segment recorded through the library.
    #[inline]
    pub(crate) fn trace(&self) -> &SegmentTrace {
        &self.trace
    }

    /// How recordings begun now take the context's work.
    pub(crate) fn mode(&self) -> RecordingMode {
        RecordingMode::from_u8(self.mode.load(Ordering::Relaxed))
    }

    /// Sets how recordings begun from now on take the context's work.
    pub(crate) fn set_mode(&self, mode: RecordingMode) {
        self.mode.store(mode.to_u8(), Ordering::Relaxed);
    }

    /// Whether a recording begun now captures the stream (rather than
    /// building its graph node by node).
    pub(crate) fn captures(&self) -> bool {
        self.mode().captures(self.trace.is_shared())
    }
}
