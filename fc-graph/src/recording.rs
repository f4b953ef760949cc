//! Recordings: the object that owns what a recording of a context took
//! until it ends: its segments (ops or captured graphs), breaks, open
//! foreign section, first failure. Begin one on a context, split it at
//! breaks, end it into a [`Graph`] (or into an existing one, updating it in
//! place). Dropped without `end`, it aborts. [`crate::Capture`] is the
//! guard that keeps one on the thread that began it; callers that cannot
//! keep a guard across calls (the C API) hold a `Recording` themselves.
//!
//! A recording takes the context's work in one of two ways, chosen when it
//! begins (see [`crate::recording_mode`]):
//! - **built** (the default): the library's own work is written down as
//!   ops (the crate-private `segment` module) and each segment becomes a graph built node
//!   by node when it ends; no stream enters capture mode, except during a
//!   *foreign section* ([`crate::Capture::foreign`]), which captures the stream
//!   for the work other libraries enqueue on it and adds what it recorded
//!   as one child graph node;
//! - **captured**: the context's stream captures for the whole recording
//!   (contexts whose stream was handed out, in [`RecordingMode::Auto`]).
//!
//! One recording at a time per context (the context's capture state,
//! [`crate::capture_state`], refuses a second).
//!
//! [`RecordingMode::Auto`]: crate::RecordingMode::Auto

use std::panic::AssertUnwindSafe;

use cuda_sys::result::stream;
use cuda_sys::*;
use smallvec::SmallVec;

use crate::built_segment::{materialize, Built, Fit};
use crate::capture_mode::CaptureMode;
use crate::capture_state::ThreadTag;
use crate::context::{Context, CudaContext, Recorder};
use crate::driver::{bound, RawCtx};
use crate::error::{Error, Result};
use crate::graph::{node_count, BreakFn, Captured, Graph, GraphExec, NewPieces, Piece, UpdateReport};
use crate::nodes::{child_shape, destroy_graph};
use crate::segment::{Op, Ops, OwnedGraph};

/// Whole recordings against the driver double (`fc_driver_double`).
#[cfg(all(test, target_os = "linux"))]
#[path = "recording_double_tests.rs"]
mod double_tests;

/// A piece recorded by an open recording. Segments stay unbuilt (ops) or
/// raw graphs until the recording ends, so an update can update any of them
/// in place.
enum Pending<L> {
    /// A segment the stream captured; `None` when it recorded nothing.
    Segment(Option<Captured>),
    /// A segment recorded by construction.
    Built(Ops),
    Break(BreakFn<L>),
}

/// The pieces of an open recording: inline while it is one segment (no
/// break), so that recording allocates nothing for them.
type PendingPieces<L> = SmallVec<[Pending<L>; 1]>;

/// An open foreign section: who opened it, in which capture mode, on
/// which lane (and its stream).
#[derive(Debug, Clone, Copy)]
struct Foreign {
    tid: i64,
    mode: CaptureMode,
    lane: usize,
    stream: CUstream,
}

/// An open recording of a context (see the [module docs](self)). `L` is
/// the live value its breaks receive at replay. Every consuming method, and
/// dropping it, leaves the stream out of capture and closes the context's
/// capture state. When the recording captures the stream (or a foreign
/// section is open) in THREAD_LOCAL or GLOBAL mode, end, abort or drop it
/// on the thread that began it: the driver refuses to end such a capture
/// elsewhere (the stream would keep capturing).
pub struct Recording<L = ()> {
    ctx: Context,
    /// Ended or aborted: nothing left to close.
    closed: bool,
    mode: CaptureMode,
    /// Built node by node (else the stream captures).
    built: bool,
    pieces: PendingPieces<L>,
    segment_open: bool,
    /// The open foreign section of a built recording.
    foreign: Option<Foreign>,
    failed: Option<Error>,
    /// Whether a break's function runs once when the break is recorded
    /// (the default); a graph cache records without running them.
    run_breaks: bool,
}

// SAFETY: the raw graphs are driver handles usable from any thread, and
// break functions are `Send + Sync`. Ending a THREAD_LOCAL capture from
// another thread is refused by the driver with an error, not undefined.
unsafe impl<L> Send for Recording<L> {}

impl<L> std::fmt::Debug for Recording<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("device", &self.ctx.device_id())
            .field("mode", &self.mode)
            .field("builds", &self.built)
            .field("pieces_so_far", &self.pieces.len())
            .field("foreign_section_open", &self.foreign.is_some())
            .finish()
    }
}

impl<L> Recording<L> {
    /// Opens a recording of `ctx`: refused while another recording is open
    /// on the context or one of its break functions runs on this thread.
    /// Whether it builds or captures is the context's recording mode's
    /// choice now ([`Context::recordings_capture`]).
    pub fn begin(ctx: &Context, mode: CaptureMode) -> Result<Recording<L>> {
        if ctx.lane_index() != 0 {
            return Err(Error::capture_state(format!(
                "a recording begins on the context itself (lane 0), not on lane {}",
                ctx.lane_index()
            )));
        }
        let in_break = ctx.capture().in_break();
        let mut state = ctx.capture().state();
        state.check_can_begin(in_break)?;
        let built = !ctx.recordings_capture();
        if built {
            ctx.recorder().sink().open();
        } else {
            begin_segment(ctx.cuda(), ctx.recorder(), ctx.stream(), mode)?;
        }
        let mut rec = Recording {
            ctx: ctx.clone(),
            closed: false,
            mode,
            built,
            pieces: SmallVec::new(),
            segment_open: true,
            foreign: None,
            failed: None,
            run_breaks: true,
        };
        if let Err(e) = state.begin(ThreadTag::current_tid(), in_break) {
            drop(state);
            rec.discard();
            rec.closed = true;
            return Err(e);
        }
        Ok(rec)
    }

    /// The context recorded.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The capture mode it was begun with.
    pub fn mode(&self) -> CaptureMode {
        self.mode
    }

    /// Whether this recording builds its graphs node by node (else the
    /// context's stream captures).
    pub fn builds(&self) -> bool {
        self.built
    }

    /// Refuses to end, split or abort a THREAD_LOCAL or GLOBAL capture on
    /// another thread than the one that opened it (see
    /// [`CaptureState::check_owner`](crate::capture_state::CaptureState::check_owner)):
    /// nothing is touched and the capture stays open.
    pub fn check_thread(&self, what: &str) -> Result<()> {
        if self.mode == CaptureMode::Relaxed {
            return Ok(());
        }
        self.ctx.capture().state().check_owner(ThreadTag::current_tid(), what)
    }

    fn fail(&mut self, e: Error) -> Error {
        self.failed = Some(e.clone());
        e
    }

    /// Pieces recorded so far (segments ended plus breaks).
    pub fn pieces_so_far(&self) -> usize {
        self.pieces.len()
    }

    /// From now on breaks are recorded without running their function (it
    /// runs at replay only): for callers whose capture must have no effect
    /// beyond recording, such as the graph cache.
    pub fn defer_breaks(&mut self) {
        self.run_breaks = false;
    }

    /// Opens a foreign section: until [`Recording::foreign_end`], the
    /// context's stream captures (in `mode`) whatever is enqueued on it,
    /// the library's own work included, in order. Returns the stream. In a
    /// captured recording the stream captures already: nothing changes.
    pub fn foreign_begin(&mut self, mode: CaptureMode) -> Result<CUstream> {
        let ctx = self.ctx.clone();
        self.foreign_begin_on(&ctx, mode)
    }

    /// [`Recording::foreign_begin`] on a lane of the recorded context
    /// (`lane`, from [`Context::lane`]; the context itself is lane 0): that
    /// lane's stream captures, and what it captured becomes one child graph
    /// node on that lane, after the lane's work recorded before. Work on
    /// the other lanes goes on being recorded meanwhile, so a library's call
    /// on one lane (a cuBLAS GEMM) runs beside the library's own kernels on
    /// another. While the section is open, waits from or for its lane are
    /// refused. In a captured recording, returns the lane's stream and
    /// changes nothing (fork the lane into the capture first).
    pub fn foreign_begin_on(&mut self, lane: &Context, mode: CaptureMode) -> Result<CUstream> {
        let ctx = &self.ctx;
        if !lane.same_context(ctx) {
            return Err(Error::invalid("foreign_begin_on: the lane belongs to another context"));
        }
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if !self.segment_open {
            return Err(Error::capture_state(
                "no segment is recording (a foreign section cannot begin inside a break)",
            ));
        }
        if !self.built {
            return Ok(lane.stream());
        }
        if self.foreign.is_some() {
            return Err(Error::capture_state("a foreign section is already open in this recording"));
        }
        let stream = lane.stream();
        let lane_index = lane.lane_index();
        ctx.recorder().sink().pause(lane_index);
        let begun = bound(ctx.cuda().raw(), |d| {
            // SAFETY: our stream, not capturing; the mode is a valid value.
            Ok(unsafe { stream::begin_capture(d, stream, mode.raw()) }?)
        });
        if let Err(e) = begun {
            ctx.recorder().sink().resume();
            return Err(e);
        }
        self.foreign = Some(Foreign { tid: ThreadTag::current_tid(), mode, lane: lane_index, stream });
        Ok(stream)
    }

    /// Ends the open foreign section: what the stream captured becomes one
    /// child graph node after the work recorded before the section, and
    /// the library's work is built again. A THREAD_LOCAL or GLOBAL section
    /// ends only on the thread that opened it (the driver's rule): refused
    /// elsewhere, the section intact. A section the driver invalidated fails
    /// the recording (ending it then fails with the same error).
    pub fn foreign_end(&mut self) -> Result<()> {
        let ctx = self.ctx.clone();
        let ctx = &ctx;
        let Some(f) = self.foreign else {
            if !self.built && self.segment_open {
                return Ok(());
            }
            return Err(Error::capture_state("no foreign section is open in this recording"));
        };
        if f.mode != CaptureMode::Relaxed && f.tid != ThreadTag::current_tid() {
            return Err(Error::capture_state(format!(
                "the foreign section was opened by {} in {:?} mode; only that thread can end it",
                ThreadTag::of(f.tid),
                f.mode
            )));
        }
        self.foreign = None;
        let ended = end_capture(ctx.cuda().raw(), f.stream);
        let result = match ended {
            Ok(Some(g)) => {
                let owned = OwnedGraph::new(g, ctx.cuda().raw());
                // The shape (node types, edges) lets a re-recording update
                // the child node in place, and tells whether a conditional
                // body may hold it; where it cannot be read, the count alone
                // (updates then go through the whole graph).
                // SAFETY: the graph the capture just handed us, ours.
                let shape = bound(ctx.cuda().raw(), |d| unsafe { child_shape(d, g) });
                let refused = match &shape {
                    _ if ctx.recorder().sink().open_bodies() == 0 => None,
                    Ok(s) => check_body_types(s.types()).err(),
                    Err(e) => Some(e.clone()),
                };
                let shape = shape.ok().map(Box::new);
                let nodes = match &shape {
                    Some(s) => s.nodes(),
                    None => bound(ctx.cuda().raw(), |d| node_count(d, g)).unwrap_or(usize::MAX),
                };
                if let Some(e) = refused {
                    // The section's work is dropped (with `owned`); the
                    // recording goes on.
                    ctx.recorder().sink().resume();
                    return Err(e);
                }
                // A section that captured nothing adds no node (its empty
                // graph is destroyed with `owned`).
                if nodes > 0 {
                    let op = Op::Child { graph: Some(owned), nodes, shape };
                    // A closed segment cannot happen here (the section
                    // belongs to the open one); the op is dropped
                    // (destroyed) if it did.
                    let _ = ctx.recorder().sink().push_paused(op, f.lane);
                }
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(self.fail(e)),
        };
        ctx.recorder().sink().resume();
        result
    }

    /// A break: ends the current segment, runs `f` once now with `live`
    /// (unless breaks are deferred), records it and opens the next segment,
    /// also when `f` fails (the error is returned) or unwinds (the
    /// unwinding goes on after): either fails the recording, whose later
    /// work is then recorded and discarded, never run eagerly.
    pub fn brk(&mut self, live: &L, f: BreakFn<L>) -> Result<()> {
        let ctx = self.ctx.clone();
        let ctx = &ctx;
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.foreign.is_some() {
            return Err(Error::capture_state(
                "a break cannot split an open foreign section; end the foreign section first",
            ));
        }
        if ctx.recorder().sink().open_bodies() > 0 {
            return Err(Error::capture_state(
                "a break cannot go inside a conditional node's body; end the conditional first",
            ));
        }
        self.segment_open = false;
        if self.built {
            let ops = ctx.recorder().sink().close().unwrap_or_default();
            self.pieces.push(Pending::Built(ops));
        } else {
            match end_segment(ctx) {
                Ok(seg) => self.pieces.push(Pending::Segment(seg)),
                Err(e) => return Err(self.fail(e)),
            }
        }
        let ran = if self.run_breaks {
            // An unwinding break function is held here until the next
            // segment is open (see below), then goes on unwinding.
            std::panic::catch_unwind(AssertUnwindSafe(|| ctx.capture().run_paused(|| f(ctx, live))))
        } else {
            Ok(Ok(()))
        };
        self.pieces.push(Pending::Break(f));
        // Reopen the next segment even after a failed or unwound break, so
        // that work queued before `end` is recorded (and discarded), never
        // run eagerly (the hand-off loom checks: context/capture_control's
        // `loom_` models).
        let reopened = if self.built {
            ctx.recorder().sink().open();
            Ok(())
        } else {
            begin_segment(ctx.cuda(), ctx.recorder(), ctx.stream(), self.mode)
        };
        let ran = match ran {
            Ok(ran) => ran,
            Err(panic) => {
                // The recording fails (its end says so), whoever catches
                // the unwinding.
                self.segment_open = reopened.is_ok();
                self.fail(reopened.err().unwrap_or_else(|| Error::Callback("the break function panicked".into())));
                std::panic::resume_unwind(panic);
            }
        };
        if let Err(e) = reopened {
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

    /// Whether the driver reports the stream's capture as invalidated (a
    /// foreign device-wide synchronisation, say), so that recording it again
    /// may succeed. A built recording can be invalidated only inside a
    /// foreign section.
    pub fn is_invalidated(&self) -> bool {
        let ctx = &self.ctx;
        let capturing = if self.built { self.foreign.is_some() } else { self.segment_open };
        if !capturing {
            return false;
        }
        let stream = ctx.stream();
        bound(ctx.cuda().raw(), |d| {
            // SAFETY: our stream.
            let status = unsafe { stream::is_capturing(d, stream) }?;
            Ok(status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        })
        .unwrap_or(false)
    }

    /// Ends the recording and instantiates every segment. On error nothing
    /// is returned, the stream is left out of capture, and the message names
    /// the first failing call inside the recording (call, thread, CUDA
    /// error).
    pub fn end(mut self) -> Result<Graph<L>> {
        let ctx = self.ctx.clone();
        let result = self.end_pieces(&ctx);
        self.close(result)
    }

    fn end_pieces(&mut self, ctx: &Context) -> Result<Graph<L>> {
        let pieces = self.finish(ctx)?;
        let mut built = Vec::with_capacity(pieces.len());
        let mut failure = None;
        for p in pieces {
            built.push(match p {
                Pending::Segment(Some(g)) => instantiate_piece(ctx, g, &mut failure),
                Pending::Segment(None) => Piece::Segment(None),
                Pending::Built(ops) => build_piece(ctx, ops, &mut failure),
                Pending::Break(f) => Piece::Break(f),
            });
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(Graph::new(ctx.clone(), built)),
        }
    }

    /// Ends the recording into `graph`, an earlier recording of the same
    /// context: segments built from the same kernels and fills, foreign
    /// sections of the same shape and conditionals whose bodies fit, in the
    /// same order, are updated node by node (one driver call per changed
    /// node and per foreign section, none when nothing changed), other
    /// segments whose topology matches are updated with
    /// `cuGraphExecUpdate`, the rest instantiated anew, and the breaks
    /// become this recording's. On error `graph` keeps its
    /// old pieces, but segments already updated carry the new parameters.
    /// Do not replay `graph` meanwhile.
    pub fn end_update(mut self, graph: &mut Graph<L>) -> Result<UpdateReport> {
        let ctx = self.ctx.clone();
        let result = self.end_update_pieces(&ctx, graph);
        self.close(result)
    }

    fn end_update_pieces(&mut self, ctx: &Context, graph: &mut Graph<L>) -> Result<UpdateReport> {
        if !graph.context().shares_memory_with(ctx) || graph.context().stream() != ctx.stream() {
            return Err(Error::invalid("end_update: the graph belongs to another context"));
        }
        let pieces = self.finish(ctx)?;
        let mut report = UpdateReport::default();
        let mut built: NewPieces<L> = SmallVec::with_capacity(pieces.len());
        let mut failure = None;
        for (i, p) in pieces.into_iter().enumerate() {
            let piece = match p {
                Pending::Break(f) => Piece::Break(f),
                Pending::Segment(None) => Piece::Segment(None),
                Pending::Built(ops) if ops.is_empty() => Piece::Segment(None),
                Pending::Built(ops) => update_built(ctx, graph.segment_exec(i), i, ops, &mut report, &mut failure),
                Pending::Segment(Some(mut g)) => {
                    let updated = match graph.segment_exec(i) {
                        Some(exec) => exec.update_from(&mut g).inspect(|&done| {
                            if done {
                                exec.forget_built();
                            }
                        }),
                        None => Ok(false),
                    };
                    match updated {
                        Ok(true) => {
                            report.updated += 1;
                            Piece::Reuse(i)
                        }
                        Ok(false) => {
                            report.instantiated += 1;
                            instantiate_piece(ctx, g, &mut failure)
                        }
                        Err(e) => {
                            destroy_graph(ctx.cuda().raw(), g.graph);
                            failure.get_or_insert(e);
                            Piece::Segment(None)
                        }
                    }
                }
            };
            built.push(piece);
        }
        if let Some(e) = failure {
            return Err(e);
        }
        graph.replace_pieces(built);
        Ok(report)
    }

    /// Aborts: leaves the stream out of capture, throws everything
    /// recorded away and closes the context's capture state.
    pub fn abort(mut self) {
        let _ = self.close(Ok(()));
    }

    /// Ends the last segment (and an open foreign section, keeping its
    /// work) and hands over the recorded pieces.
    fn finish(&mut self, ctx: &Context) -> Result<PendingPieces<L>> {
        if self.foreign.is_some() {
            if let Err(e) = self.foreign_end() {
                self.failed.get_or_insert(e);
            }
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.built {
            let ops = ctx.recorder().sink().close_unless_in_body().map_err(|open_bodies| {
                Error::capture_state(format!(
                    "the recording ended with {open_bodies} conditional node(s) open; end each with \
                     conditional_end (or drop it with conditional_abort) before ending the recording"
                ))
            })?;
            self.segment_open = false;
            self.pieces.push(Pending::Built(ops.unwrap_or_default()));
        } else {
            self.segment_open = false;
            let last = end_segment(ctx)?;
            self.pieces.push(Pending::Segment(last));
        }
        Ok(std::mem::take(&mut self.pieces))
    }

    /// Leaves the stream out of capture, drops what is left (without
    /// touching the context's capture state).
    fn discard(&mut self) {
        let ctx = &self.ctx;
        if let Some(f) = self.foreign.take() {
            if let Ok(Some(g)) = end_capture(ctx.cuda().raw(), f.stream) {
                destroy_graph(ctx.cuda().raw(), g);
            }
        }
        if self.segment_open {
            self.segment_open = false;
            if self.built {
                drop(ctx.recorder().sink().close());
            } else if let Ok(Some(g)) = end_capture(ctx.cuda().raw(), ctx.stream()) {
                destroy_graph(ctx.cuda().raw(), g);
            }
        }
        for p in self.pieces.drain(..) {
            if let Pending::Segment(Some(c)) = p {
                destroy_graph(ctx.cuda().raw(), c.graph);
            }
        }
    }

    /// Leaves the stream out of capture, destroys what is left, names the
    /// capture's first failure in an error, and closes the capture state.
    fn close<T>(&mut self, result: Result<T>) -> Result<T> {
        if self.closed {
            return result;
        }
        self.closed = true;
        self.discard();
        let mut state = self.ctx.capture().state();
        let result = result.map_err(|e| match state.first_failure() {
            Some(note) if !e.to_string().contains(&note) => e.with_note(&note),
            _ => e,
        });
        state.end();
        result
    }
}

impl<L> Drop for Recording<L> {
    fn drop(&mut self) {
        let _ = self.close(Ok(()));
    }
}

/// Builds a recorded segment and instantiates it; on failure records the
/// first error in `failure` and yields an empty segment.
fn build_piece<L>(ctx: &Context, mut ops: Ops, failure: &mut Option<Error>) -> Piece<L> {
    if ops.is_empty() {
        return Piece::Segment(None);
    }
    let built = match materialize(ctx.cuda().raw(), &mut ops) {
        Ok(b) => b,
        Err(e) => {
            failure.get_or_insert(e);
            return Piece::Segment(None);
        }
    };
    match GraphExec::instantiate_built(ctx, built, ops) {
        Ok(e) => Piece::Segment(Some(e)),
        Err(e) => {
            failure.get_or_insert(e);
            Piece::Segment(None)
        }
    }
}

/// Applies a re-recorded segment `ops` to `old` (segment `i` of the graph
/// being updated): node by node where the shapes match (no driver call for
/// unchanged nodes), else through `cuGraphExecUpdate` on a graph built from
/// the ops, else instantiated anew.
fn update_built<L>(
    ctx: &Context,
    old: Option<&mut GraphExec>,
    i: usize,
    mut ops: Ops,
    report: &mut UpdateReport,
    failure: &mut Option<Error>,
) -> Piece<L> {
    let Some(exec) = old else {
        report.instantiated += 1;
        return build_piece(ctx, ops, failure);
    };
    let fit = exec.node_fit(&ops);
    // Foreign sections first: where the driver refuses one in place, the
    // ops are still whole for the update through the whole graph below.
    let children = match fit {
        Fit::Changed => exec.update_children(&ops).ok(),
        Fit::Same => Some(0),
        Fit::No => None,
    };
    if let Some(child_calls) = children {
        return match exec.update_nodes(ops, fit) {
            Ok(calls) => {
                report.updated += 1;
                report.node_calls += calls + child_calls;
                Piece::Reuse(i)
            }
            Err(e) => {
                failure.get_or_insert(e);
                Piece::Segment(None)
            }
        };
    }
    if !exec.may_update_whole(&ops) {
        report.instantiated += 1;
        return build_piece(ctx, ops, failure);
    }
    let built = match materialize(ctx.cuda().raw(), &mut ops) {
        Ok(b) => b,
        Err(e) => {
            failure.get_or_insert(e);
            return Piece::Segment(None);
        }
    };
    let nodes = built.nodes.len();
    let mut captured = Captured { graph: built.graph, nodes: Some(nodes), topology: None };
    match exec.update_from(&mut captured) {
        Ok(true) => {
            exec.keep_built_ops(ops);
            report.updated += 1;
            Piece::Reuse(i)
        }
        Ok(false) => {
            report.instantiated += 1;
            match GraphExec::instantiate_built(ctx, Built { graph: captured.graph, nodes: built.nodes }, ops) {
                Ok(e) => Piece::Segment(Some(e)),
                Err(e) => {
                    failure.get_or_insert(e);
                    Piece::Segment(None)
                }
            }
        }
        Err(e) => {
            destroy_graph(ctx.cuda().raw(), captured.graph);
            failure.get_or_insert(e);
            Piece::Segment(None)
        }
    }
}

/// Refuses a foreign section's captured graph, whose nodes have `types`,
/// as part of a conditional node's body when it holds a node the driver
/// does not allow there (only kernels, copies, memsets, empty nodes, child
/// graphs and conditionals).
fn check_body_types(types: &[CUgraphNodeType]) -> Result<()> {
    match types.iter().find(|&&t| !allowed_in_body(t)) {
        Some(&t) => Err(Error::invalid(format!(
            "a conditional node's body cannot hold a {} node (the foreign section captured one); bodies take \
             kernels, copies, memsets, empty nodes, child graphs and conditionals",
            node_type_name(t)
        ))),
        None => Ok(()),
    }
}

/// Whether the driver allows a node of type `t` in a conditional body.
pub(crate) fn allowed_in_body(t: CUgraphNodeType) -> bool {
    matches!(
        t,
        CU_GRAPH_NODE_TYPE_KERNEL
            | CU_GRAPH_NODE_TYPE_MEMCPY
            | CU_GRAPH_NODE_TYPE_MEMSET
            | CU_GRAPH_NODE_TYPE_EMPTY
            | CU_GRAPH_NODE_TYPE_GRAPH
            | CU_GRAPH_NODE_TYPE_CONDITIONAL
    )
}

/// A graph node type's name, for messages.
fn node_type_name(t: CUgraphNodeType) -> String {
    let name = match t {
        CU_GRAPH_NODE_TYPE_HOST => "host",
        CU_GRAPH_NODE_TYPE_WAIT_EVENT => "event wait",
        CU_GRAPH_NODE_TYPE_EVENT_RECORD => "event record",
        CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL => "external semaphore signal",
        CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT => "external semaphore wait",
        CU_GRAPH_NODE_TYPE_MEM_ALLOC => "memory allocation",
        CU_GRAPH_NODE_TYPE_MEM_FREE => "memory free",
        CU_GRAPH_NODE_TYPE_BATCH_MEM_OP => "batch memory operation",
        _ => return format!("type-{t}"),
    };
    name.to_string()
}

/// Starts capturing on `stream` of `cuda`, a new segment in `recorder`'s
/// trace. (Not the capture-state part: callers may hold its lock, so a
/// failure here is not noted as the capture's first.)
fn begin_segment(cuda: &CudaContext, recorder: &Recorder, stream: CUstream, mode: CaptureMode) -> Result<()> {
    recorder.trace().begin();
    cuda.bound(|d| {
        // SAFETY: our stream; the mode is a valid enum value.
        Ok(unsafe { stream::begin_capture(d, stream, mode.raw()) }?)
    })
}

/// Ends `stream`'s capture; the graph it recorded, if the driver returned
/// one. The stream is out of capture afterwards, even on error.
fn end_capture(raw: RawCtx, stream: CUstream) -> Result<Option<CUgraph>> {
    bound(raw, |d| end_capture_bound(d, stream))
}

/// [`end_capture`] with the context already bound.
fn end_capture_bound(d: &Driver, stream: CUstream) -> Result<Option<CUgraph>> {
    // SAFETY: our stream, capturing. A graph a failed end hands out is
    // destroyed by the call.
    let g = unsafe { stream::end_capture(d, stream) }?;
    Ok((!g.is_null()).then_some(g))
}

/// How many nodes the next captured work on `stream` would depend on (the
/// capture's open ends), or `None` when the driver cannot say (the capture
/// is not active, or the query failed). Constant time, unlike counting the
/// graph's nodes.
fn open_ends(d: &Driver, stream: CUstream) -> Option<usize> {
    // SAFETY: our stream (the dependency array stays the driver's and is
    // not read).
    let info = unsafe { stream::get_capture_info(d, stream) }.ok()?;
    (info.status == CU_STREAM_CAPTURE_STATUS_ACTIVE).then_some(info.num_dependencies)
}

/// Ends the stream's capture and returns the recorded graph, or `None`
/// (already destroyed) when it holds no node. The caller destroys the graph.
///
/// A capture whose stream has open ends recorded work (the ends are nodes
/// of its graph), so its nodes are not counted here: `cuGraphGetNodes`
/// walks the whole graph. Only a capture without open ends (usually one
/// that recorded nothing, where counting is free) is counted. A segment of
/// the library's kernel launches alone carries its [`Topology`] instead
/// (see [`crate::topology`]), so that even an update needs no count.
///
/// [`Topology`]: crate::topology::Topology
fn end_segment(ctx: &Context) -> Result<Option<Captured>> {
    let stream = ctx.stream();
    let (graph, ends) = ctx.bound(|d| {
        let ends = open_ends(d, stream);
        Ok((end_capture_bound(d, stream)?, ends))
    })?;
    let Some(graph) = graph else {
        return Ok(None);
    };
    if ends.is_some_and(|n| n > 0) {
        let topology = ctx.recorder().trace().topology();
        return Ok(Some(Captured { graph, nodes: None, topology }));
    }
    let nodes = ctx.bound(|d| node_count(d, graph));
    match nodes {
        Ok(nodes) if nodes > 0 => Ok(Some(Captured { graph, nodes: Some(nodes), topology: None })),
        other => {
            destroy_graph(ctx.cuda().raw(), graph);
            other.map(|_| None)
        }
    }
}

/// Instantiates a recorded segment (taking ownership of `g`); on failure
/// records the first error in `failure` and yields an empty segment, so
/// the caller still disposes of every other recorded graph.
fn instantiate_piece<L>(ctx: &Context, g: Captured, failure: &mut Option<Error>) -> Piece<L> {
    match GraphExec::instantiate(ctx, g) {
        Ok(e) => Piece::Segment(Some(e)),
        Err(e) => {
            failure.get_or_insert(e);
            Piece::Segment(None)
        }
    }
}

#[cfg(test)]
mod body_check_tests {
    use super::*;

    #[test]
    fn bodies_take_only_the_node_types_the_driver_allows_there() {
        let fine = [CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_MEMCPY];
        assert!(check_body_types(&fine).is_ok());
        assert!(check_body_types(&[]).is_ok(), "nothing captured");
        let e = check_body_types(&[CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_EVENT_RECORD])
            .expect_err("an event record is refused");
        assert!(e.to_string().contains("cannot hold a event record node"), "{e}");
        let e = check_body_types(&[CU_GRAPH_NODE_TYPE_HOST]).expect_err("a host node is refused");
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    }
}
