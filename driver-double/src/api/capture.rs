//! Stream capture's entry points (the rules are in [`crate::sim::capture`]).

use cuda_sys::*;

use super::{edge_data, h, p};
use crate::handle::Kind;
use crate::objects::capture::Status;
use crate::objects::graph::Owner;
use crate::state::{entry, out, slice};
use crate::thread;

/// `cuStreamBeginCapture` (10010).
pub unsafe extern "C" fn cuStreamBeginCapture_v10010(stream: CUstream, mode: CUstreamCaptureMode) -> CUresult {
    entry("cuStreamBeginCapture", 10010, |s| {
        let v = s.stream(stream)?;
        s.begin_capture(v, mode, None)
    })
}

/// `cuStreamBeginCaptureToGraph` (12030): into a graph of the client's,
/// after `deps` (with their annotations).
pub unsafe extern "C" fn cuStreamBeginCaptureToGraph_v12030(
    stream: CUstream,
    graph: CUgraph,
    deps: *const CUgraphNode,
    data: *const CUgraphEdgeData,
    n: usize,
    mode: CUstreamCaptureMode,
) -> CUresult {
    entry("cuStreamBeginCaptureToGraph", 12030, |s| {
        let v = s.stream(stream)?;
        let g = h(graph);
        s.graphs.get(g).map_err(|b| s.bad_handle(b, Kind::Graph, g))?;
        let nodes: Vec<u64> = slice(deps, n)?.iter().map(|d| h(*d)).collect();
        s.check_deps(g, &nodes)?;
        let data = edge_data(data, n)?.unwrap_or_else(|| vec![Default::default(); n]);
        s.begin_capture(v, mode, Some((g, nodes.into_iter().zip(data).collect())))
    })
}

/// `cuStreamEndCapture` (10000): the graph, or NULL with the reason.
pub unsafe extern "C" fn cuStreamEndCapture_v10000(stream: CUstream, graph: *mut CUgraph) -> CUresult {
    entry("cuStreamEndCapture", 10000, |s| {
        let o = out(graph)?;
        *o = std::ptr::null_mut();
        let v = s.stream(stream)?;
        let g = s.end_capture(v)?;
        if let Ok(gr) = s.graphs.get_mut(g) {
            gr.owner = Owner::Client;
        }
        *o = p(g);
        Ok(())
    })
}

/// `cuStreamIsCapturing` (10000).
pub unsafe extern "C" fn cuStreamIsCapturing_v10000(stream: CUstream, status: *mut CUstreamCaptureStatus) -> CUresult {
    entry("cuStreamIsCapturing", 10000, |s| {
        let o = out(status)?;
        let v = s.stream(stream)?;
        *o = match s.capture_of(v) {
            None => CU_STREAM_CAPTURE_STATUS_NONE,
            Some((_, Status::Active)) => CU_STREAM_CAPTURE_STATUS_ACTIVE,
            Some((_, Status::Invalidated)) => CU_STREAM_CAPTURE_STATUS_INVALIDATED,
        };
        Ok(())
    })
}

/// `cuStreamGetCaptureInfo` (11030, the v2 form): status (required), id,
/// graph, dependencies (valid until the next call on the stream).
pub unsafe extern "C" fn cuStreamGetCaptureInfo_v11030(
    stream: CUstream,
    status: *mut CUstreamCaptureStatus,
    id: *mut cuuint64_t,
    graph: *mut CUgraph,
    deps: *mut *const CUgraphNode,
    ndeps: *mut usize,
) -> CUresult {
    entry("cuStreamGetCaptureInfo", 11030, |s| {
        let st = out(status)?;
        let v = s.stream(stream)?;
        let cap = s.capture_of(v);
        *st = match cap {
            None => CU_STREAM_CAPTURE_STATUS_NONE,
            Some((_, Status::Active)) => CU_STREAM_CAPTURE_STATUS_ACTIVE,
            Some((_, Status::Invalidated)) => CU_STREAM_CAPTURE_STATUS_INVALIDATED,
        };
        let Some((cid, _)) = cap else { return Ok(()) };
        if !id.is_null() {
            *out(id)? = cid;
        }
        if !graph.is_null() {
            *out(graph)? = p(s.captures.get(&cid).map(|c| c.graph).unwrap_or(0));
        }
        let stream_obj = s.streams.get_mut(v).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
        stream_obj.info_deps = stream_obj.deps.iter().map(|d| d.0).collect();
        if !deps.is_null() {
            // Handles are pointer-sized values: the array reads as `CUgraphNode`s.
            *out(deps)? = stream_obj.info_deps.as_ptr().cast::<CUgraphNode>();
        }
        if !ndeps.is_null() {
            *out(ndeps)? = stream_obj.info_deps.len();
        }
        Ok(())
    })
}

/// `cuThreadExchangeStreamCaptureMode` (10010). Under the fault
/// `capture-global` the mode set counts against the thread's own captures
/// only.
pub unsafe extern "C" fn cuThreadExchangeStreamCaptureMode_v10010(mode: *mut CUstreamCaptureMode) -> CUresult {
    entry("cuThreadExchangeStreamCaptureMode", 10010, |_| {
        let m = out(mode)?;
        if *m > CU_STREAM_CAPTURE_MODE_RELAXED {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let previous = thread::swap_thread_mode(*m);
        *m = previous;
        Ok(())
    })
}
