//! What a capture segment recorded, as far as the library itself recorded
//! it: so that a re-capture can be matched against the graph it updates
//! without walking either graph.
//!
//! `cuGraphExecUpdate` refuses a graph whose topology differs from the
//! executable's (and compute-sanitizer reports the refusal as an API
//! error), so [`crate::Capture::end_update`] must know beforehand whether
//! the topologies match. Counting nodes answers that, but
//! `cuGraphGetNodes` walks the whole graph (60 µs at 2,600 nodes on an
//! H200). Most captures need no count: when every node of a segment is a
//! kernel the library launched on the context's own stream, the segment is
//! a chain whose topology is the sequence of its launches (plain or PDL,
//! which decides each edge's type). The context keeps that sequence's
//! length and hash while a segment records ([`SegmentTrace`]); a segment
//! ends with a [`Topology`] when nothing else can have added nodes:
//!
//! - no other kind of stream work went through the library meanwhile
//!   (fills, event records: [`SegmentTrace::note_other`]);
//! - the stream's handle was never handed out ([`crate::Context::raw_stream`]
//!   marks the context for good: another library may enqueue on it, as
//!   engines do with cuBLAS and NCCL).
//!
//! Everything else falls back to counting. A wrong match (two threads
//! launching into one segment at once, say) can only cost a refused update,
//! which the library then handles by instantiating anew: the driver checks
//! the topology itself and never applies a mismatched update.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The topology of a segment of kernel launches only: how many, and a hash
/// of their sequence of launch kinds (plain or PDL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Topology {
    pub(crate) kernels: u64,
    pub(crate) hash: u64,
}

/// FNV-1a's offset basis and prime (64-bit).
const HASH_START: u64 = 0xcbf2_9ce4_8422_2325;
const HASH_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The running record of the context's open capture segment. Written by
/// every launch (so by any thread), read when the segment ends; relaxed
/// atomics, since a race can only make a later update fall back.
#[derive(Debug)]
pub(crate) struct SegmentTrace {
    kernels: AtomicU64,
    hash: AtomicU64,
    /// Other stream work went through the library since the segment began.
    other_work: AtomicBool,
    /// The stream's handle was handed out: foreign work may be recorded.
    stream_shared: AtomicBool,
}

impl Default for SegmentTrace {
    fn default() -> Self {
        SegmentTrace {
            kernels: AtomicU64::new(0),
            hash: AtomicU64::new(HASH_START),
            other_work: AtomicBool::new(false),
            stream_shared: AtomicBool::new(false),
        }
    }
}

impl SegmentTrace {
    /// A segment begins (before the stream starts capturing).
    pub(crate) fn begin(&self) {
        self.kernels.store(0, Ordering::Relaxed);
        self.hash.store(HASH_START, Ordering::Relaxed);
        self.other_work.store(false, Ordering::Relaxed);
    }

    /// A kernel was launched on the stream (`pdl`: with programmatic
    /// dependent launch). Cheap: loads and stores, no read-modify-write.
    #[inline]
    pub(crate) fn note_kernel(&self, pdl: bool) {
        let k = self.kernels.load(Ordering::Relaxed);
        self.kernels.store(k + 1, Ordering::Relaxed);
        let h = self.hash.load(Ordering::Relaxed);
        self.hash.store((h ^ (1 + pdl as u64)).wrapping_mul(HASH_PRIME), Ordering::Relaxed);
    }

    /// Other stream work (a fill, an event record) was enqueued.
    pub(crate) fn note_other(&self) {
        if !self.other_work.load(Ordering::Relaxed) {
            self.other_work.store(true, Ordering::Relaxed);
        }
    }

    /// The stream's handle was handed out, for good.
    pub(crate) fn note_shared(&self) {
        if !self.stream_shared.load(Ordering::Relaxed) {
            self.stream_shared.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the stream's handle was handed out.
    pub(crate) fn is_shared(&self) -> bool {
        self.stream_shared.load(Ordering::Relaxed)
    }

    /// The segment's topology, when only the library's kernel launches can
    /// have recorded nodes into it (and it recorded at least one).
    pub(crate) fn topology(&self) -> Option<Topology> {
        if self.stream_shared.load(Ordering::Relaxed) || self.other_work.load(Ordering::Relaxed) {
            return None;
        }
        let kernels = self.kernels.load(Ordering::Relaxed);
        (kernels > 0).then(|| Topology { kernels, hash: self.hash.load(Ordering::Relaxed) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(trace: &SegmentTrace, launches: &[bool]) -> Option<Topology> {
        trace.begin();
        for &pdl in launches {
            trace.note_kernel(pdl);
        }
        trace.topology()
    }

    #[test]
    fn equal_launch_sequences_have_equal_topologies() {
        let t = SegmentTrace::default();
        let a = record(&t, &[true, true, false, true]);
        let b = record(&t, &[true, true, false, true]);
        assert!(a.is_some());
        assert_eq!(a, b);
        assert_eq!(a.map(|t| t.kernels), Some(4));
    }

    #[test]
    fn length_and_edge_kinds_tell_topologies_apart() {
        let t = SegmentTrace::default();
        let base = record(&t, &[true, false, true]);
        for other in [&[true, false][..], &[true, false, true, true], &[false, true, true], &[true, true, false]] {
            assert_ne!(base, record(&t, other), "{other:?}");
        }
    }

    #[test]
    fn other_work_or_a_shared_stream_leave_the_topology_unknown() {
        let t = SegmentTrace::default();
        t.begin();
        t.note_kernel(false);
        t.note_other();
        assert_eq!(t.topology(), None, "a fill or event record");
        assert!(record(&t, &[false]).is_some(), "the next segment starts clean");
        assert_eq!(record(&t, &[]), None, "no kernel: nothing known");
        t.note_shared();
        assert_eq!(record(&t, &[false, true]), None, "a shared stream, for good");
    }
}
