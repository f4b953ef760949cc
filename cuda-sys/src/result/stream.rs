//! Streams, stream capture, and the calling thread's capture mode.

use super::{ptr_or_null, DriverError, Result};
use crate::constants::{CUDA_ERROR_NOT_READY, CUDA_SUCCESS};
use crate::functions::DriverFns;
use crate::types::*;

/// `cuStreamCreate(flags)`: a stream of the current context.
#[inline]
pub fn create(d: &DriverFns, flags: CUstream_flags) -> Result<CUstream> {
    let mut s: CUstream = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks the flags.
    DriverError::check("cuStreamCreate", unsafe { (d.cuStreamCreate)(&mut s, flags) })?;
    Ok(s)
}

/// `cuStreamDestroy(stream)`.
///
/// # Safety
/// `stream` is a live stream, destroyed once; nothing uses it afterwards.
#[inline]
pub unsafe fn destroy(d: &DriverFns, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuStreamDestroy", unsafe { (d.cuStreamDestroy)(stream) })
}

/// `cuStreamSynchronize(stream)`.
///
/// # Safety
/// `stream` is a live stream.
#[inline]
pub unsafe fn synchronize(d: &DriverFns, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuStreamSynchronize", unsafe { (d.cuStreamSynchronize)(stream) })
}

/// `cuStreamQuery(stream)`: `true` when its work is done, `false` while
/// some is pending (`CUDA_ERROR_NOT_READY`).
///
/// # Safety
/// `stream` is a live stream.
#[inline]
pub unsafe fn query(d: &DriverFns, stream: CUstream) -> Result<bool> {
    // SAFETY: the caller's promise.
    match unsafe { (d.cuStreamQuery)(stream) } {
        CUDA_SUCCESS => Ok(true),
        CUDA_ERROR_NOT_READY => Ok(false),
        code => Err(DriverError { call: "cuStreamQuery", code }),
    }
}

/// `cuStreamWaitEvent(stream, event, flags)`: the stream's later work waits
/// for the event's last record.
///
/// # Safety
/// `stream` and `event` are live, of one context.
#[inline]
pub unsafe fn wait_event(d: &DriverFns, stream: CUstream, event: CUevent, flags: std::os::raw::c_uint) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuStreamWaitEvent", unsafe { (d.cuStreamWaitEvent)(stream, event, flags) })
}

/// `cuStreamBeginCapture(stream, mode)`.
///
/// # Safety
/// `stream` is a live stream of the context current on this thread.
#[inline]
pub unsafe fn begin_capture(d: &DriverFns, stream: CUstream, mode: CUstreamCaptureMode) -> Result<()> {
    // SAFETY: the caller's promise; the driver checks the mode.
    DriverError::check("cuStreamBeginCapture", unsafe { (d.cuStreamBeginCapture)(stream, mode) })
}

/// `cuStreamBeginCaptureToGraph` (CUDA 12.3+; `None` without it): capture
/// into the existing `graph`, after `deps` (with one annotation each in
/// `edge_data`, or none for full edges; other lengths are
/// `CUDA_ERROR_INVALID_VALUE` without a call).
///
/// # Safety
/// `stream` is a live stream of the current context; `graph` a live graph
/// of it, not used by another thread while the capture runs; `deps` its
/// nodes.
pub unsafe fn begin_capture_to_graph(
    d: &DriverFns,
    stream: CUstream,
    graph: CUgraph,
    deps: &[CUgraphNode],
    edge_data: Option<&[CUgraphEdgeData]>,
    mode: CUstreamCaptureMode,
) -> Option<Result<()>> {
    let f = d.cuStreamBeginCaptureToGraph?;
    const CALL: &str = "cuStreamBeginCaptureToGraph";
    if edge_data.is_some_and(|e| e.len() != deps.len()) {
        return Some(Err(super::invalid(CALL)));
    }
    let data = edge_data.map_or(std::ptr::null(), ptr_or_null);
    // SAFETY: the caller's promise; the arrays hold `deps.len()` entries.
    Some(DriverError::check(CALL, unsafe { f(stream, graph, ptr_or_null(deps), data, deps.len(), mode) }))
}

/// `cuStreamEndCapture(stream)`: the graph the capture recorded (null if
/// the driver returned none), owned by the caller. When the call fails and
/// the driver still handed out a graph, that graph is destroyed here
/// (`cuGraphDestroy`), so a failure leaves nothing behind.
///
/// # Safety
/// `stream` is a live stream of the current context.
pub unsafe fn end_capture(d: &DriverFns, stream: CUstream) -> Result<CUgraph> {
    let mut g: CUgraph = std::ptr::null_mut();
    // SAFETY: the caller's promise; valid out-pointer.
    let code = unsafe { (d.cuStreamEndCapture)(stream, &mut g) };
    if code != CUDA_SUCCESS && !g.is_null() {
        // SAFETY: the graph the failed end handed us, destroyed once.
        unsafe { (d.cuGraphDestroy)(g) };
    }
    DriverError::check("cuStreamEndCapture", code)?;
    Ok(g)
}

/// `cuStreamIsCapturing(stream)`: none, active or invalidated.
///
/// # Safety
/// `stream` is a live stream.
#[inline]
pub unsafe fn is_capturing(d: &DriverFns, stream: CUstream) -> Result<CUstreamCaptureStatus> {
    let mut status: CUstreamCaptureStatus = crate::constants::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: the caller's promise; valid out-pointer.
    DriverError::check("cuStreamIsCapturing", unsafe { (d.cuStreamIsCapturing)(stream, &mut status) })?;
    Ok(status)
}

/// What `cuStreamGetCaptureInfo` reports.
#[derive(Debug, Clone, Copy)]
pub struct CaptureInfo {
    /// None, active or invalidated.
    pub status: CUstreamCaptureStatus,
    /// The capture's id (meaningful while active).
    pub id: cuuint64_t,
    /// The graph being captured (while active).
    pub graph: CUgraph,
    /// The nodes the next captured work depends on: the driver's array,
    /// valid until the next call on the stream.
    pub dependencies: *const CUgraphNode,
    /// How many there are.
    pub num_dependencies: usize,
}

/// `cuStreamGetCaptureInfo(stream)` (the v2 form).
///
/// # Safety
/// `stream` is a live stream.
#[inline]
pub unsafe fn get_capture_info(d: &DriverFns, stream: CUstream) -> Result<CaptureInfo> {
    let mut info = CaptureInfo {
        status: crate::constants::CU_STREAM_CAPTURE_STATUS_NONE,
        id: 0,
        graph: std::ptr::null_mut(),
        dependencies: std::ptr::null(),
        num_dependencies: 0,
    };
    // SAFETY: the caller's promise; valid out-pointers.
    DriverError::check("cuStreamGetCaptureInfo", unsafe {
        (d.cuStreamGetCaptureInfo)(
            stream,
            &mut info.status,
            &mut info.id,
            &mut info.graph,
            &mut info.dependencies,
            &mut info.num_dependencies,
        )
    })?;
    Ok(info)
}

/// `cuThreadExchangeStreamCaptureMode`: makes `mode` this thread's capture
/// interaction mode and returns the one it replaces.
#[inline]
pub fn thread_exchange_capture_mode(d: &DriverFns, mode: CUstreamCaptureMode) -> Result<CUstreamCaptureMode> {
    let mut m = mode;
    // SAFETY: valid in/out pointer; the driver checks the mode.
    DriverError::check("cuThreadExchangeStreamCaptureMode", unsafe { (d.cuThreadExchangeStreamCaptureMode)(&mut m) })?;
    Ok(m)
}
