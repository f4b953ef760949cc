//! Capture guards: begin a capture on a context's stream, split it at
//! breaks, end it into a [`Graph`]. A guard dropped without `end` aborts
//! the capture and leaves the stream out of capture.

use cuda_sys::*;

use crate::context::{lock, CaptureMode, Context};
use crate::driver::check;
use crate::error::{Error, Result};
use crate::graph::{Graph, GraphExec, Piece};

/// An open capture on a context. `L` is the live value type its breaks
/// receive (see [`Graph::replay`]).
pub struct Capture<L = ()> {
    ctx: Context,
    mode: CaptureMode,
    pieces: Vec<Piece<L>>,
    segment_open: bool,
    failed: Option<Error>,
}

impl Context {
    /// Opens a capture on this context's stream. Refused while another
    /// capture is open on the same context.
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<Capture<()>> {
        self.begin_breakable(mode)
    }

    /// Opens a capture whose breaks receive a live `L` at replay.
    pub fn begin_breakable<L>(&self, mode: CaptureMode) -> Result<Capture<L>> {
        let mut flags = lock(&self.inner.flags);
        if flags.capturing.is_some() {
            return Err(Error::capture_state(
                "a capture is already open on this context",
            ));
        }
        self.begin_segment(mode)?;
        flags.capturing = Some(std::thread::current().id());
        Ok(Capture {
            ctx: self.clone(),
            mode,
            pieces: Vec::new(),
            segment_open: true,
            failed: None,
        })
    }

    fn begin_segment(&self, mode: CaptureMode) -> Result<()> {
        let stream = self.raw_stream();
        self.bound(|d| {
            // SAFETY: our stream; the mode is a valid enum value.
            check("cuStreamBeginCapture", unsafe {
                (d.cuStreamBeginCapture)(stream, mode.raw())
            })
        })
    }

    /// Ends the stream's capture and instantiates what it recorded (`None`
    /// when nothing was). The stream is out of capture afterwards, even on
    /// error.
    fn end_segment(&self) -> Result<Option<GraphExec>> {
        let stream = self.raw_stream();
        let raw_ctx = self.raw_context();
        let graph = self.bound(|d| {
            let mut g: CUgraph = std::ptr::null_mut();
            // SAFETY: our stream, capturing; valid out-pointer.
            let res = unsafe { (d.cuStreamEndCapture)(stream, &mut g) };
            if res != CUDA_SUCCESS && !g.is_null() {
                // SAFETY: a graph the failed end handed us; destroyed once.
                unsafe { (d.cuGraphDestroy)(g) };
            }
            check("cuStreamEndCapture", res)?;
            Ok(g)
        })?;
        let result = self.bound(|d| {
            let mut nodes = 0usize;
            // SAFETY: live graph; a null node array asks for the count only.
            check("cuGraphGetNodes", unsafe {
                (d.cuGraphGetNodes)(graph, std::ptr::null_mut(), &mut nodes)
            })?;
            if nodes == 0 {
                return Ok(None);
            }
            GraphExec::instantiate(raw_ctx, graph).map(Some)
        });
        let _ = self.shielded(|d| {
            // SAFETY: the executable graph (if any) no longer needs its source graph.
            check("cuGraphDestroy", unsafe { (d.cuGraphDestroy)(graph) })
        });
        result
    }
}

impl<L> std::fmt::Debug for Capture<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("device", &self.ctx.device_id())
            .field("mode", &self.mode)
            .field("pieces_so_far", &self.pieces.len())
            .field("failed", &self.failed)
            .finish()
    }
}

impl<L> Capture<L> {
    /// The context being captured.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Pieces recorded so far (segments ended plus breaks).
    pub fn pieces_so_far(&self) -> usize {
        self.pieces.len()
    }

    fn fail(&mut self, e: Error) -> Error {
        self.failed = Some(e.clone());
        e
    }

    /// A break: ends the current segment, runs `f` once now (eagerly, on
    /// the context's stream, with `live`), records it, and opens the next
    /// segment. At replay `f` runs again between the two segments with the
    /// live value given to [`Graph::replay`]. Values `f` captured by move
    /// stay frozen at their capture-time values.
    pub fn brk<F>(&mut self, live: &L, f: F) -> Result<()>
    where
        F: Fn(&Context, &L) -> Result<()> + Send + Sync + 'static,
    {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.segment_open = false;
        match self.ctx.end_segment() {
            Ok(seg) => self.pieces.push(Piece::Segment(seg)),
            Err(e) => return Err(self.fail(e)),
        }
        lock(&self.ctx.inner.flags).in_break = true;
        let ran = f(&self.ctx, live);
        lock(&self.ctx.inner.flags).in_break = false;
        if let Err(e) = ran {
            return Err(self.fail(Error::Callback(e.to_string())));
        }
        self.pieces.push(Piece::Break(Box::new(f)));
        if let Err(e) = self.ctx.begin_segment(self.mode) {
            return Err(self.fail(e));
        }
        self.segment_open = true;
        Ok(())
    }

    /// Ends the capture and instantiates every segment. On error nothing is
    /// returned and the stream is left out of capture.
    pub fn end(mut self) -> Result<Graph<L>> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.segment_open = false;
        let last = self.ctx.end_segment()?;
        self.pieces.push(Piece::Segment(last));
        let pieces = std::mem::take(&mut self.pieces);
        Ok(Graph::new(self.ctx.clone(), pieces))
    }
}

impl<L> Drop for Capture<L> {
    fn drop(&mut self) {
        if self.segment_open {
            // Abort: end the stream's capture and throw the graph away.
            let _ = self.ctx.end_segment();
        }
        let mut flags = lock(&self.ctx.inner.flags);
        flags.capturing = None;
        flags.in_break = false;
    }
}
