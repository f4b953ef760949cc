//! The parts' layout: what every launch reads lies in the first cache
//! lines of the shared state's allocation (see [`ContextInner`]).

use std::mem::{offset_of, size_of};

use super::cuda_context::CudaContext;
use super::kernels::KernelSet;
use super::recorder::Recorder;
use super::ContextInner;

/// An `Arc`'s reference counts, before its value.
const ARC_HEADER: usize = 2 * size_of::<usize>();

#[test]
fn what_every_launch_reads_lies_in_the_first_four_cache_lines() {
    let hot = [
        ("the raw handle", offset_of!(ContextInner, cuda) + CudaContext::hot_end()),
        ("the PDL switch and built-ins", offset_of!(ContextInner, kernels) + KernelSet::hot_end()),
        ("the segment trace and the sink's flag", offset_of!(ContextInner, recorder) + Recorder::hot_end()),
    ];
    for (what, end) in hot {
        assert!(ARC_HEADER + end <= 4 * 64, "{what} ends at byte {} of the allocation", ARC_HEADER + end);
    }
    // The cold parts follow the hot ones.
    let last_hot = offset_of!(ContextInner, recorder);
    for cold in [offset_of!(ContextInner, streams), offset_of!(ContextInner, capture), offset_of!(ContextInner, pool)] {
        assert!(cold > last_hot);
    }
}

#[test]
fn the_shared_state_is_send_and_sync() {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<ContextInner>();
}
