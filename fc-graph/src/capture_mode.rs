//! How a capture restricts "potentially unsafe" driver calls:
//! [`CaptureMode`], the mode of every recording ([`crate::Recording`],
//! [`crate::Capture`]) and foreign section. A leaf module beside
//! [`crate::capture`] and [`crate::capture_state`], which the recording,
//! its guard, the graph cache and the context import without importing
//! each other; public as
//! `fc_graph::CaptureMode` (and `fc_graph::context::CaptureMode`, where it
//! was defined before).

use cuda_sys::*;

/// How a capture restricts "potentially unsafe" driver calls (the driver's
/// `CUstreamCaptureMode`). fc-graph opens captures in [`ThreadLocal`] mode
/// by default: only the capturing thread is restricted.
///
/// [`ThreadLocal`]: CaptureMode::ThreadLocal
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CaptureMode {
    /// Restricts every thread of the process (the old, harmful default).
    Global,
    /// Restricts only the capturing thread.
    #[default]
    ThreadLocal,
    /// Restricts nothing.
    Relaxed,
}

impl CaptureMode {
    pub(crate) fn raw(self) -> CUstreamCaptureMode {
        match self {
            CaptureMode::Global => CU_STREAM_CAPTURE_MODE_GLOBAL,
            CaptureMode::ThreadLocal => CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            CaptureMode::Relaxed => CU_STREAM_CAPTURE_MODE_RELAXED,
        }
    }
}
