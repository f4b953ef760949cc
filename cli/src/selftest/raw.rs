//! Bare driver objects for the shield check's "foreign library": a
//! context made current, a stream, an allocation, a capture, a graph and
//! its executable, each released by its guard (in reverse order of
//! creation, as locals drop), so no failure path leaks or leaves a capture
//! open. Bare means without fc-graph: the calls go straight through
//! cuda-sys's checked-call layer, as another library's would.

use cuda_sys::result::{context, graph, graph_exec, memory, stream};
use cuda_sys::*;

use super::common::Failure;

/// The failure of a driver call, named as the driver names its code.
pub fn failure(d: &Driver, e: DriverError) -> Failure {
    Failure(format!("{} failed: {} ({}): {}", e.call, e.name(d), e.code, e.description(d)))
}

/// A driver call's result, its failure named by the driver.
pub fn check<T>(d: &Driver, r: Result<T, DriverError>) -> Result<T, Failure> {
    r.map_err(|e| failure(d, e))
}

/// A context pushed current on this thread, popped on drop.
pub struct Current<'d> {
    d: &'d Driver,
}

impl<'d> Current<'d> {
    /// Pushes `ctx` (which the caller keeps alive) onto this thread's stack.
    pub fn push(d: &'d Driver, ctx: CUcontext) -> Result<Current<'d>, Failure> {
        // SAFETY: `ctx` is a live context (the caller holds a retain on it).
        check(d, unsafe { context::push_current(d, ctx) })?;
        Ok(Current { d })
    }
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        // Pops the context `push` pushed on this same thread.
        let _ = context::pop_current(self.d);
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
        // A context is current (see `Current`).
        let raw = check(d, stream::create(d, CU_STREAM_NON_BLOCKING))?;
        Ok(Stream { d, raw })
    }

    /// Waits for the stream's work.
    pub fn synchronize(&self) -> Result<(), Failure> {
        // SAFETY: our live stream.
        check(self.d, unsafe { stream::synchronize(self.d, self.raw) })
    }

    /// The stream's capture status.
    pub fn capture_status(&self) -> Result<CUstreamCaptureStatus, Failure> {
        // SAFETY: our live stream.
        check(self.d, unsafe { stream::is_capturing(self.d, self.raw) })
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        // SAFETY: our stream, destroyed once; queued work still completes.
        let _ = unsafe { stream::destroy(self.d, self.raw) };
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
        // A context is current.
        let ptr = check(d, memory::alloc(d, bytes))?;
        Ok(Alloc { d, ptr, bytes })
    }

    /// Queues a fill of bytes `range` with `value` on `stream`.
    pub fn fill(&self, stream: &Stream<'_>, range: std::ops::Range<usize>, value: u8) -> Result<(), Failure> {
        if range.start > range.end || range.end > self.bytes {
            return Err(Failure(format!("fill {range:?} outside an allocation of {} bytes", self.bytes)));
        }
        // SAFETY: the range lies inside the allocation (checked above).
        check(self.d, unsafe {
            memory::memset_d8_async(self.d, self.ptr + range.start as u64, value, range.len(), stream.raw)
        })
    }

    /// Copies the whole allocation to the host after `stream`'s work.
    pub fn read(&self, stream: &Stream<'_>) -> Result<Vec<u8>, Failure> {
        let mut host = vec![0u8; self.bytes];
        // SAFETY: `host` holds `bytes` bytes and outlives the copy (the
        // stream is synchronized before returning).
        check(self.d, unsafe {
            memory::memcpy_dtoh_async(self.d, host.as_mut_ptr().cast(), self.ptr, self.bytes, stream.raw)
        })?;
        stream.synchronize()?;
        Ok(host)
    }
}

impl Drop for Alloc<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc, freed once.
        let _ = unsafe { memory::free(self.d, self.ptr) };
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
        check(d, unsafe { stream::begin_capture(d, stream.raw, mode) })?;
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
    // SAFETY: our capturing stream. A graph a failed end hands out is
    // destroyed by the call.
    let raw = check(d, unsafe { stream::end_capture(d, stream.raw) })?;
    // A `Graph` destroys its handle on drop, so one is made only for a
    // non-null handle (`cuGraphDestroy(NULL)` otherwise).
    if raw.is_null() {
        return Err(Failure("cuStreamEndCapture returned no graph".into()));
    }
    Ok(Graph { d, raw })
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
        // SAFETY: a live graph.
        let raw = check(self.d, unsafe { graph_exec::instantiate(self.d, self.raw, 0) })?;
        Ok(Exec { d: self.d, raw })
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        // SAFETY: our graph, destroyed once.
        let _ = unsafe { graph::destroy(self.d, self.raw) };
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
        check(self.d, unsafe { graph_exec::launch(self.d, self.raw, stream.raw) })
    }
}

impl Drop for Exec<'_> {
    fn drop(&mut self) {
        // SAFETY: our executable graph, destroyed once.
        let _ = unsafe { graph_exec::destroy(self.d, self.raw) };
    }
}
