//! Streams, the operations they queue, and events.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use cuda_sys::*;

use crate::objects::exec::Plan;
use crate::objects::graph::EdgeData;
use crate::objects::work::Work;

/// Queued work.
#[derive(Debug)]
pub enum Op {
    /// Device work.
    Work(Work),
    /// An event's record.
    Record(u64),
    /// A wait for another stream's work up to a sequence number.
    Wait {
        /// The stream waited for.
        stream: u64,
        /// Its last operation to wait for.
        seq: u64,
    },
    /// A graph launch: the executable and its plan at launch time.
    Graph {
        /// The executable.
        exec: u64,
        /// Its work when launched.
        plan: Arc<Plan>,
    },
}

/// A stream.
#[derive(Debug)]
pub struct Stream {
    /// Its context.
    pub ctx: u64,
    /// `CU_STREAM_*` flags.
    pub flags: u32,
    /// Whether it is its context's legacy stream.
    pub legacy: bool,
    /// Queued operations with their sequence numbers.
    pub queue: VecDeque<(u64, Op)>,
    /// The last sequence number enqueued.
    pub last: u64,
    /// The capture sequence it is part of.
    pub capture: Option<u64>,
    /// Its dependencies in the capture (the nodes its next work follows).
    pub deps: Vec<(u64, EdgeData)>,
    /// The dependencies `cuStreamGetCaptureInfo` last handed out (their
    /// memory stays valid until the next call on the stream).
    pub info_deps: Vec<u64>,
    /// A fault of its work, reported at its next synchronisation.
    pub error: Option<CUresult>,
}

/// An event.
#[derive(Debug)]
pub struct Event {
    /// Its context.
    pub ctx: u64,
    /// `CU_EVENT_*` flags.
    pub flags: u32,
    /// Its last record: the stream and sequence number, if any.
    pub record: Option<(u64, u64)>,
    /// When its last record ran.
    pub done: Option<Instant>,
    /// The capture its last record was made in, with the capture's
    /// dependencies at that point.
    pub captured: Option<(u64, Vec<(u64, EdgeData)>)>,
}
