//! Bare driver objects for the shield check's "foreign library": a
//! context made current, a stream, an allocation, a capture, a graph and
//! its executable, each released by its guard (in reverse order of
//! creation, as locals drop), so no failure path leaks or leaves a capture
//! open.

use std::ptr;

use cuda_sys::*;

use super::common::Failure;

/// `call` failed with `rc`, named as the driver names it.
pub fn rc_failure(d: &Driver, call: &str, rc: CUresult) -> Failure {
    Failure(format!("{call} failed: {} ({rc}): {}", d.error_name(rc), d.error_string(rc)))
}

/// `Ok` for `CUDA_SUCCESS`, else the failure naming `call`.
pub fn check(d: &Driver, call: &str, rc: CUresult) -> Result<(), Failure> {
    if rc == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(rc_failure(d, call, rc))
    }
}

/// A context pushed current on this thread, popped on drop.
pub struct Current<'d> {
    d: &'d Driver,
}

impl<'d> Current<'d> {
    /// Pushes `ctx` (which the caller keeps alive) onto this thread's stack.
    pub fn push(d: &'d Driver, ctx: CUcontext) -> Result<Current<'d>, Failure> {
        // SAFETY: `ctx` is a live context (the caller holds a retain on it).
        check(d, "cuCtxPushCurrent", unsafe { (d.cuCtxPushCurrent)(ctx) })?;
        Ok(Current { d })
    }
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        let mut popped: CUcontext = ptr::null_mut();
        // SAFETY: pops the context `push` pushed on this same thread.
        let _ = unsafe { (self.d.cuCtxPopCurrent)(&mut popped) };
    }
}

/// A non-blocking stream of the current context.
pub struct Stream<'d> {
    d: &'d Driver,
    /// The raw handle.
    pub raw: CUstream,
}

impl<'d> Stream<'d> {
    /// Creates a stream in the current context.
    pub fn new(d: &'d Driver) -> Result<Stream<'d>, Failure> {
        let mut raw: CUstream = ptr::null_mut();
        // SAFETY: valid out-pointer; a context is current (see `Current`).
        check(d, "cuStreamCreate", unsafe { (d.cuStreamCreate)(&mut raw, CU_STREAM_NON_BLOCKING) })?;
        Ok(Stream { d, raw })
    }

    /// Waits for the stream's work.
    pub fn synchronize(&self) -> Result<(), Failure> {
        // SAFETY: our live stream.
        check(self.d, "cuStreamSynchronize", unsafe { (self.d.cuStreamSynchronize)(self.raw) })
    }

    /// The stream's capture status.
    pub fn capture_status(&self) -> Result<CUstreamCaptureStatus, Failure> {
        let mut status = CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: our live stream and a valid out-pointer.
        check(self.d, "cuStreamIsCapturing", unsafe { (self.d.cuStreamIsCapturing)(self.raw, &mut status) })?;
        Ok(status)
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        // SAFETY: our stream, destroyed once; queued work still completes.
        let _ = unsafe { (self.d.cuStreamDestroy)(self.raw) };
    }
}

/// Device memory of the current context.
pub struct Alloc<'d> {
    d: &'d Driver,
    /// The device address.
    pub ptr: CUdeviceptr,
    /// Its size in bytes.
    pub bytes: usize,
}

impl<'d> Alloc<'d> {
    /// `cuMemAlloc` of `bytes` bytes in the current context.
    pub fn new(d: &'d Driver, bytes: usize) -> Result<Alloc<'d>, Failure> {
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: valid out-pointer; a context is current.
        check(d, "cuMemAlloc", unsafe { (d.cuMemAlloc)(&mut ptr, bytes) })?;
        Ok(Alloc { d, ptr, bytes })
    }

    /// Queues a fill of bytes `range` with `value` on `stream`.
    pub fn fill(&self, stream: &Stream<'_>, range: std::ops::Range<usize>, value: u8) -> Result<(), Failure> {
        if range.start > range.end || range.end > self.bytes {
            return Err(Failure(format!("fill {range:?} outside an allocation of {} bytes", self.bytes)));
        }
        // SAFETY: the range lies inside the allocation (checked above).
        check(self.d, "cuMemsetD8Async", unsafe {
            (self.d.cuMemsetD8Async)(self.ptr + range.start as u64, value, range.len(), stream.raw)
        })
    }

    /// Copies the whole allocation to the host after `stream`'s work.
    pub fn read(&self, stream: &Stream<'_>) -> Result<Vec<u8>, Failure> {
        let mut host = vec![0u8; self.bytes];
        // SAFETY: `host` holds `bytes` bytes and outlives the copy (the
        // stream is synchronized before returning).
        check(self.d, "cuMemcpyDtoHAsync", unsafe {
            (self.d.cuMemcpyDtoHAsync)(host.as_mut_ptr().cast(), self.ptr, self.bytes, stream.raw)
        })?;
        stream.synchronize()?;
        Ok(host)
    }
}

impl Drop for Alloc<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc, freed once.
        let _ = unsafe { (self.d.cuMemFree)(self.ptr) };
    }
}

/// An open capture on a stream; ended (and its graph destroyed) on drop if
/// [`Capture::end`] was not called.
pub struct Capture<'s, 'd> {
    stream: &'s Stream<'d>,
    open: bool,
}

impl<'s, 'd> Capture<'s, 'd> {
    /// `cuStreamBeginCapture` in `mode`.
    pub fn begin(stream: &'s Stream<'d>, mode: CUstreamCaptureMode) -> Result<Capture<'s, 'd>, Failure> {
        let d = stream.d;
        // SAFETY: our live stream, not capturing; a valid mode.
        check(d, "cuStreamBeginCapture", unsafe { (d.cuStreamBeginCapture)(stream.raw, mode) })?;
        Ok(Capture { stream, open: true })
    }

    /// Ends the capture: the recorded graph, or the driver's error (the
    /// stream is out of capture either way).
    pub fn end(mut self) -> Result<Graph<'d>, Failure> {
        self.open = false;
        end_capture(self.stream)
    }
}

fn end_capture<'d>(stream: &Stream<'d>) -> Result<Graph<'d>, Failure> {
    let d = stream.d;
    let mut raw: CUgraph = ptr::null_mut();
    // SAFETY: our capturing stream and a valid out-pointer.
    let rc = unsafe { (d.cuStreamEndCapture)(stream.raw, &mut raw) };
    // A `Graph` destroys its handle on drop, so one is made only for a
    // non-null handle (`then_some` would build, and drop, one for NULL too:
    // `cuGraphDestroy(NULL)`).
    let graph = if raw.is_null() { None } else { Some(Graph { d, raw }) };
    check(d, "cuStreamEndCapture", rc)?;
    graph.ok_or_else(|| Failure("cuStreamEndCapture returned no graph".into()))
}

impl Drop for Capture<'_, '_> {
    fn drop(&mut self) {
        if self.open {
            let _ = end_capture(self.stream);
        }
    }
}

/// A graph, destroyed on drop.
pub struct Graph<'d> {
    d: &'d Driver,
    raw: CUgraph,
}

impl<'d> Graph<'d> {
    /// Instantiates the graph.
    pub fn instantiate(&self) -> Result<Exec<'d>, Failure> {
        let mut raw: CUgraphExec = ptr::null_mut();
        // SAFETY: a live graph and a valid out-pointer.
        check(self.d, "cuGraphInstantiateWithFlags", unsafe {
            (self.d.cuGraphInstantiateWithFlags)(&mut raw, self.raw, 0)
        })?;
        Ok(Exec { d: self.d, raw })
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        // SAFETY: our graph, destroyed once.
        let _ = unsafe { (self.d.cuGraphDestroy)(self.raw) };
    }
}

/// An executable graph, destroyed on drop.
pub struct Exec<'d> {
    d: &'d Driver,
    raw: CUgraphExec,
}

impl Exec<'_> {
    /// Launches on `stream`.
    pub fn launch(&self, stream: &Stream<'_>) -> Result<(), Failure> {
        // SAFETY: a live executable graph and stream of the same context.
        check(self.d, "cuGraphLaunch", unsafe { (self.d.cuGraphLaunch)(self.raw, stream.raw) })
    }
}

impl Drop for Exec<'_> {
    fn drop(&mut self) {
        // SAFETY: our executable graph, destroyed once.
        let _ = unsafe { (self.d.cuGraphExecDestroy)(self.raw) };
    }
}
