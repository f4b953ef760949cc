//! Capture guards: begin a capture on a context's stream, split it at
//! breaks, end it into a [`Graph`] (or into an existing one, updating it in
//! place). A guard dropped without `end` aborts the capture and leaves the
//! stream out of capture.

use cuda_sys::*;

use crate::context::{lock, CaptureMode, Context};
use crate::driver::check;
use crate::error::{Error, Result};
use crate::graph::{destroy_graph, BreakFn, Graph, GraphExec, Piece, UpdateReport};

/// A piece recorded by an open capture. Segments stay raw graphs until the
/// capture ends, so [`Capture::end_update`] can update any of them in place.
enum Pending<L> {
    Segment(Option<CUgraph>),
    Break(BreakFn<L>),
}

/// An open capture on a context. `L` is the live value type its breaks
/// receive (see [`Graph::replay`]).
pub struct Capture<L = ()> {
    ctx: Context,
    mode: CaptureMode,
    pieces: Vec<Pending<L>>,
    segment_open: bool,
    failed: Option<Error>,
}

// SAFETY: the raw graphs are driver handles usable from any thread, and
// break functions are `Send + Sync`. Ending a THREAD_LOCAL capture from
// another thread is refused by the driver with an error, not undefined.
unsafe impl<L> Send for Capture<L> {}

impl Context {
    /// Opens a capture on this context's stream. Refused while another
    /// capture is open on the same context.
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<Capture<()>> {
        self.begin_breakable(mode)
    }

    /// Opens a capture whose breaks receive a live `L` at replay.
    pub fn begin_breakable<L>(&self, mode: CaptureMode) -> Result<Capture<L>> {
        let mut state = lock(&self.inner.capture_state);
        let mut next = *state;
        next.begin(std::thread::current().id())?;
        self.begin_segment(mode)?;
        *state = next;
        Ok(Capture { ctx: self.clone(), mode, pieces: Vec::new(), segment_open: true, failed: None })
    }

    fn begin_segment(&self, mode: CaptureMode) -> Result<()> {
        let stream = self.raw_stream();
        self.bound(|d| {
            // SAFETY: our stream; the mode is a valid enum value.
            check("cuStreamBeginCapture", unsafe { (d.cuStreamBeginCapture)(stream, mode.raw()) })
        })
    }

    /// Ends the stream's capture and returns the recorded graph, or `None`
    /// (already destroyed) when it holds no node. The stream is out of
    /// capture afterwards, even on error. The caller destroys the graph.
    fn end_segment(&self) -> Result<Option<CUgraph>> {
        let stream = self.raw_stream();
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
        let nodes = self.bound(|d| {
            let mut nodes = 0usize;
            // SAFETY: live graph; a null node array asks for the count only.
            check("cuGraphGetNodes", unsafe { (d.cuGraphGetNodes)(graph, std::ptr::null_mut(), &mut nodes) })?;
            Ok(nodes)
        });
        match nodes {
            Ok(n) if n > 0 => Ok(Some(graph)),
            other => {
                self.destroy_graph(Some(graph));
                other.map(|_| None)
            }
        }
    }

    fn destroy_graph(&self, graph: Option<CUgraph>) {
        if let Some(g) = graph {
            destroy_graph(self.raw_context(), g);
        }
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
            Ok(seg) => self.pieces.push(Pending::Segment(seg)),
            Err(e) => return Err(self.fail(e)),
        }
        let ran = self.ctx.run_break(|| f(&self.ctx, live));
        self.pieces.push(Pending::Break(Box::new(f)));
        // Reopen the next segment even after a failed break, so that work
        // queued before `end` is recorded (and discarded), never run eagerly.
        if let Err(e) = self.ctx.begin_segment(self.mode) {
            return Err(self.fail(e));
        }
        self.segment_open = true;
        ran.map_err(|e| {
            let e = match e {
                Error::Callback(_) => e,
                other => Error::Callback(other.to_string()),
            };
            self.fail(e)
        })
    }

    /// Ends the capture and instantiates every segment. On error nothing is
    /// returned and the stream is left out of capture.
    pub fn end(mut self) -> Result<Graph<L>> {
        let pieces = self.finish()?;
        let mut built = Vec::with_capacity(pieces.len());
        let mut failure = None;
        for p in pieces {
            built.push(match p {
                Pending::Segment(Some(g)) => self.instantiate_piece(g, &mut failure),
                Pending::Segment(None) => Piece::Segment(None),
                Pending::Break(f) => Piece::Break(f),
            });
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(Graph::new(self.ctx.clone(), built)),
        }
    }

    /// Ends the capture into `graph`, an earlier capture of the same
    /// context: each segment whose topology matches the one at the same
    /// position is updated in place with `cuGraphExecUpdate` (CUDA 12.0+
    /// drivers; several times cheaper than instantiating), the others are
    /// instantiated anew, and the breaks become the new capture's. On error
    /// `graph` keeps its old pieces, but segments already updated in place
    /// carry the new parameters. Do not replay `graph` meanwhile.
    pub fn end_update(mut self, graph: &mut Graph<L>) -> Result<UpdateReport> {
        if graph.context().raw_stream() != self.ctx.raw_stream() {
            return Err(Error::invalid("end_update: the graph belongs to another context"));
        }
        let pieces = self.finish()?;
        let mut report = UpdateReport::default();
        let mut built = Vec::with_capacity(pieces.len());
        let mut failure = None;
        for (i, p) in pieces.into_iter().enumerate() {
            let Pending::Segment(Some(g)) = p else {
                built.push(match p {
                    Pending::Break(f) => Piece::Break(f),
                    _ => Piece::Segment(None),
                });
                continue;
            };
            let updated = match graph.segment_exec(i) {
                Some(exec) => exec.update_from(g),
                None => Ok(false),
            };
            built.push(match updated {
                Ok(true) => {
                    report.updated += 1;
                    Piece::Reuse(i)
                }
                Ok(false) => {
                    report.instantiated += 1;
                    self.instantiate_piece(g, &mut failure)
                }
                Err(e) => {
                    self.ctx.destroy_graph(Some(g));
                    failure.get_or_insert(e);
                    Piece::Segment(None)
                }
            });
        }
        if let Some(e) = failure {
            return Err(e);
        }
        graph.replace_pieces(built);
        Ok(report)
    }

    /// Instantiates a recorded segment (taking ownership of `g`); on failure
    /// records the first error in `failure` and yields an empty segment, so
    /// the caller still disposes of every other recorded graph.
    fn instantiate_piece(&self, g: CUgraph, failure: &mut Option<Error>) -> Piece<L> {
        match GraphExec::instantiate(&self.ctx, g) {
            Ok(e) => Piece::Segment(Some(e)),
            Err(e) => {
                failure.get_or_insert(e);
                Piece::Segment(None)
            }
        }
    }

    /// Ends the last segment and hands over the recorded pieces.
    fn finish(&mut self) -> Result<Vec<Pending<L>>> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.segment_open = false;
        let last = self.ctx.end_segment()?;
        self.pieces.push(Pending::Segment(last));
        Ok(std::mem::take(&mut self.pieces))
    }
}

/// A break point for code that runs both under a capture and eagerly (a
/// model's forward): with a capture, [`Capture::brk`]; without one, `f`
/// runs right away with `live`.
pub fn break_here<L, F>(capture: Option<&mut Capture<L>>, ctx: &Context, live: &L, f: F) -> Result<()>
where
    F: Fn(&Context, &L) -> Result<()> + Send + Sync + 'static,
{
    match capture {
        Some(c) => c.brk(live, f),
        None => f(ctx, live),
    }
}

impl<L> Drop for Capture<L> {
    fn drop(&mut self) {
        if self.segment_open {
            // Abort: end the stream's capture and throw the graph away.
            if let Ok(g) = self.ctx.end_segment() {
                self.ctx.destroy_graph(g);
            }
        }
        for p in self.pieces.drain(..) {
            if let Pending::Segment(g) = p {
                self.ctx.destroy_graph(g);
            }
        }
        lock(&self.ctx.inner.capture_state).end();
    }
}
