//! Captured graphs: a sequence of instantiated segments and eager breaks,
//! replayed in order on the context's stream.

use cuda_sys::*;

use crate::context::Context;
use crate::driver::{check, shielded};
use crate::error::Result;

/// A break's host function: receives the context and the *live* value
/// passed to [`Graph::replay`].
pub type BreakFn<L> = Box<dyn Fn(&Context, &L) -> Result<()> + Send + Sync>;

/// An instantiated executable graph; destroyed on drop.
pub(crate) struct GraphExec {
    exec: CUgraphExec,
    raw_ctx: CUcontext,
}

// SAFETY: executable graphs may be launched and destroyed from any thread.
unsafe impl Send for GraphExec {}
// SAFETY: launching takes the handle by value; the driver serialises use.
unsafe impl Sync for GraphExec {}

impl GraphExec {
    /// Instantiates `graph` (which the caller still owns and destroys).
    pub(crate) fn instantiate(raw_ctx: CUcontext, graph: CUgraph) -> Result<GraphExec> {
        let exec = shielded(raw_ctx, |d| {
            let mut exec: CUgraphExec = std::ptr::null_mut();
            // SAFETY: valid out-pointer and a live graph.
            check("cuGraphInstantiateWithFlags", unsafe {
                (d.cuGraphInstantiateWithFlags)(&mut exec, graph, 0)
            })?;
            Ok(exec)
        })?;
        Ok(GraphExec { exec, raw_ctx })
    }

    /// Launches on `stream` (asynchronous).
    pub(crate) fn launch(&self, stream: CUstream) -> Result<()> {
        let exec = self.exec;
        shielded(self.raw_ctx, |d| {
            // SAFETY: live executable graph and stream of the same context.
            check("cuGraphLaunch", unsafe { (d.cuGraphLaunch)(exec, stream) })
        })
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        let exec = self.exec;
        let _ = shielded(self.raw_ctx, |d| {
            // SAFETY: destroyed once; a launch still in flight completes first
            // (the driver frees it asynchronously).
            check("cuGraphExecDestroy", unsafe {
                (d.cuGraphExecDestroy)(exec)
            })
        });
    }
}

/// One piece of a captured graph.
pub(crate) enum Piece<L> {
    /// A captured segment; `None` when it recorded no work.
    Segment(Option<GraphExec>),
    /// An eager break, run on the host at replay.
    Break(BreakFn<L>),
}

/// A captured graph: `N` breaks give `2N + 1` pieces. `L` is the type of
/// the live value breaks receive at replay (`()` for unbroken graphs).
pub struct Graph<L = ()> {
    ctx: Context,
    pieces: Vec<Piece<L>>,
}

impl<L> std::fmt::Debug for Graph<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("device", &self.ctx.device_id())
            .field("segment_count", &self.segment_count())
            .field("break_count", &self.break_count())
            .finish()
    }
}

impl<L> Graph<L> {
    pub(crate) fn new(ctx: Context, pieces: Vec<Piece<L>>) -> Graph<L> {
        Graph { ctx, pieces }
    }

    /// Pieces in the graph: captured segments plus breaks (`2N + 1`).
    pub fn segment_count(&self) -> usize {
        self.pieces.len()
    }

    /// Breaks in the graph.
    pub fn break_count(&self) -> usize {
        self.pieces
            .iter()
            .filter(|p| matches!(p, Piece::Break(_)))
            .count()
    }

    /// The context whose stream the graph replays on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Replays every piece in order on the context's stream: segments are
    /// launched (asynchronously), breaks run their function on this thread
    /// with `live`. Returns before the device work finishes.
    pub fn replay(&self, live: &L) -> Result<()> {
        self.ctx.ensure_not_capturing("replay a graph")?;
        let stream = self.ctx.raw_stream();
        for piece in &self.pieces {
            match piece {
                Piece::Segment(Some(exec)) => exec.launch(stream)?,
                Piece::Segment(None) => {}
                Piece::Break(f) => f(&self.ctx, live)?,
            }
        }
        Ok(())
    }
}

impl Graph<()> {
    /// Launches the graph on its context's stream. Asynchronous: the call
    /// returns once the work is queued; [`Context::synchronize`] waits.
    pub fn launch(&self) -> Result<()> {
        self.replay(&())
    }
}
