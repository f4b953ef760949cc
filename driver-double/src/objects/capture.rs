//! Capture sequences: where each began, its mode, thread and graph, and
//! whether it still records.

/// Whether a capture is still recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Recording.
    Active,
    /// Invalidated: its end fails.
    Invalidated,
}

/// A capture sequence.
#[derive(Debug)]
pub struct Capture {
    /// The stream it began on (it must end there).
    pub origin: u64,
    /// Its mode.
    pub mode: u32,
    /// The thread that began it.
    pub thread: u64,
    /// The graph it records into.
    pub graph: u64,
    /// Whether the graph was the client's (`cuStreamBeginCaptureToGraph`).
    pub to_graph: bool,
    /// Its status.
    pub status: Status,
}
