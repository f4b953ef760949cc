//! Captured graphs: a sequence of instantiated segments and eager breaks,
//! replayed in order on the context's stream.

use cuda_sys::result::{graph, graph_exec};
use cuda_sys::*;

use std::ffi::{CStr, CString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::built_segment::{Built, BuiltNodes, Fit, NodeSet};
use crate::context::Context;
use crate::driver::shielded;
use crate::error::{Error, Result};
use crate::nodes::destroy_graph;
use crate::segment::Ops;
use crate::topology::Topology;

/// A break's host function: receives the context and the *live* value
/// passed to [`Graph::replay`].
pub type BreakFn<L> = Box<dyn Fn(&Context, &L) -> Result<()> + Send + Sync>;

/// An instantiated executable graph and the graph it was made from; both
/// destroyed on drop. Keeping the source graph until then keeps its
/// destruction out of `Capture::end` (it costs microseconds per capture).
///
/// Order of destruction: `Drop::drop` destroys both graphs while `ctx`
/// still holds the context; the context reference is released after, by
/// the field drop.
pub(crate) struct GraphExec {
    exec: CUgraphExec,
    source: CUgraph,
    /// Nodes in `source`, once known: counted at the capture's end when
    /// that was cheap, else by the first update or [`GraphExec::node_count`].
    /// An in-place update keeps it (same topology, same count).
    nodes: OnceLock<usize>,
    /// The source's topology where the library alone recorded it (see
    /// [`crate::topology`]): a re-capture of the same topology is updated
    /// without counting either graph.
    topology: Option<Topology>,
    /// The ops the source was built from and their nodes, where it was
    /// built node by node (see [`crate::segment`]): re-recordings of the
    /// same shape update it node by node.
    built: Option<BuiltNodes>,
    ctx: Context,
}

/// A graph that a capture segment recorded, and its node count where the
/// end of the segment knew it. `cuGraphGetNodes` walks the whole graph (67
/// µs for 2,600 nodes on an H200, as long as re-capturing 200 kernels), so
/// a graph is counted only where the count is needed: never on the way to
/// instantiation, once (the new graph) on the way to an in-place update.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Captured {
    pub(crate) graph: CUgraph,
    pub(crate) nodes: Option<usize>,
    /// Its topology, where the library alone recorded it.
    pub(crate) topology: Option<Topology>,
}

// SAFETY: executable graphs may be launched and destroyed from any thread.
unsafe impl Send for GraphExec {}
// SAFETY: launching takes the handle by value; the driver serialises use.
unsafe impl Sync for GraphExec {}

impl GraphExec {
    /// Instantiates `captured` and takes ownership of its graph (destroyed
    /// with the executable, or right away when instantiation fails).
    pub(crate) fn instantiate(ctx: &Context, captured: Captured) -> Result<GraphExec> {
        let Captured { graph, nodes, topology } = captured;
        let raw_ctx = ctx.cuda().raw();
        let exec = shielded(raw_ctx, |d| {
            // SAFETY: a live graph of the context bound here.
            Ok(unsafe { graph_exec::instantiate(d, graph, 0) }?)
        });
        match exec {
            Ok(exec) => Ok(GraphExec {
                exec,
                source: graph,
                nodes: nodes.map(OnceLock::from).unwrap_or_default(),
                topology,
                built: None,
                ctx: ctx.clone(),
            }),
            Err(e) => {
                destroy_graph(raw_ctx, graph);
                Err(e)
            }
        }
    }

    /// Instantiates a graph built from `ops` (taking ownership of it).
    pub(crate) fn instantiate_built(ctx: &Context, built: Built, ops: Ops) -> Result<GraphExec> {
        let Built { graph, nodes } = built;
        // A conditional op is two nodes at this level: its setter kernel and
        // the conditional node (its bodies are in graphs of their own).
        let count = nodes.len() + ops.conditionals();
        let mut exec = Self::instantiate(ctx, Captured { graph, nodes: Some(count), topology: None })?;
        exec.built = Some(BuiltNodes::new(nodes, ops));
        Ok(exec)
    }

    /// How `ops` fits this executable: node by node or not, and whether
    /// anything changed (see [`BuiltNodes::fit`]).
    pub(crate) fn node_fit(&self, ops: &Ops) -> Fit {
        self.built.as_ref().map_or(Fit::No, |b| b.fit(ops))
    }

    /// Whether a graph built from `ops` may update this executable with
    /// `cuGraphExecUpdate` without being refused (only an executable built
    /// from ops can tell; a captured one is instantiated anew instead).
    pub(crate) fn may_update_whole(&self, ops: &Ops) -> bool {
        self.built.as_ref().is_some_and(|b| b.may_update_whole(ops))
    }

    /// The first step of a node-by-node update with changed parameters:
    /// the foreign sections' work (see [`BuiltNodes::update_children`]);
    /// on error, update through the whole graph instead.
    pub(crate) fn update_children(&self, ops: &Ops) -> Result<usize> {
        match self.built.as_ref() {
            Some(b) => b.update_children(self.ctx.cuda().raw(), self.exec, ops),
            None => Err(Error::invalid("not a graph built node by node")),
        }
    }

    /// Applies `ops`, whose [`GraphExec::node_fit`] is `fit`, node by
    /// node; returns the driver calls made (0 when nothing changed).
    pub(crate) fn update_nodes(&mut self, mut ops: Ops, fit: Fit) -> Result<usize> {
        let exec = self.exec;
        let done = match self.built.as_mut() {
            Some(b) => b.update(self.ctx.cuda().raw(), exec, &mut ops, fit),
            None => Err(Error::invalid("not a graph built node by node")),
        };
        // The re-recording's list (emptied, or equal ops) serves the next.
        self.ctx.recorder().sink().recycle(ops.list);
        done
    }

    /// After a whole-graph update from a graph built from `ops`: keeps the
    /// ops (their parameters are the executable's now, and they keep user
    /// modules loaded).
    pub(crate) fn keep_built_ops(&mut self, ops: Ops) {
        match self.built.as_mut() {
            Some(b) => {
                let old = b.replace_ops(ops);
                self.ctx.recorder().sink().recycle(old);
            }
            None => self.built = Some(BuiltNodes::new(NodeSet::default(), ops)),
        }
    }

    /// After a whole-graph update from a captured graph: what the ops said
    /// of the parameters is stale.
    pub(crate) fn forget_built(&mut self) {
        self.built = None;
    }

    /// Updates this executable graph in place from `captured` (same
    /// topology, new parameters). `Ok(true)`: done, and the new graph is
    /// destroyed (the executable keeps the source it was instantiated from,
    /// of the same topology).
    /// `Ok(false)`: the driver cannot (a different node count, a topology
    /// the driver refuses, or a driver without `cuGraphExecUpdate`; 11.x
    /// drivers have its 10020 ABI, which [`update_in_place`] adapts) and
    /// the caller still owns the graph, as on error.
    ///
    /// Whether the topologies match is settled first, so that a plainly
    /// different graph costs no failing driver call (a failed
    /// `cuGraphExecUpdate` is an API error to compute-sanitizer): by the
    /// [`Topology`] both captures carry where the library alone recorded
    /// them (free; different ones are not tried, even where only the launch
    /// kinds differ), else by comparing node counts. Then the new graph is
    /// counted here unless its count is known (and `captured` keeps it for
    /// the caller), and the executable's count is counted once and kept.
    /// One context binding covers the counts, the update and the destroy.
    pub(crate) fn update_from(&mut self, captured: &mut Captured) -> Result<bool> {
        let (exec, old_source, graph) = (self.exec, self.source, captured.graph);
        // Both known: equal means updatable, different means not (another
        // length, or other launch kinds and so other edge types).
        let known = self.topology.zip(captured.topology).map(|(old, new)| old == new);
        if known == Some(false) {
            return Ok(false);
        }
        let (known_old, known_new) = (self.nodes.get().copied(), captured.nodes);
        let (updated, counts) = shielded(self.ctx.cuda().raw(), |d| {
            let counts = if known == Some(true) {
                None
            } else {
                let old_nodes = match known_old {
                    Some(n) => n,
                    None => node_count(d, old_source)?,
                };
                let new_nodes = match known_new {
                    Some(n) => n,
                    None => node_count(d, graph)?,
                };
                Some((old_nodes, new_nodes))
            };
            let differ = counts.is_some_and(|(old, new)| old != new);
            if differ {
                return Ok((false, counts));
            }
            // SAFETY: live executable graph and source graph of the context
            // bound here; the executable is ours (`&mut self`).
            if !unsafe { update_in_place(d, exec, graph) }? {
                return Ok((false, counts));
            }
            // SAFETY: the re-captured graph, ours (the caller gave it up by
            // asking for the update), destroyed once; the executable does
            // not need it. Destroying it rather than the old source costs
            // the same at 26 and 2,600 nodes and 13 µs less at 260 (GPU run
            // 31): its nodes are still in the caches.
            let _ = unsafe { graph::destroy(d, graph) };
            Ok((true, counts))
        })?;
        if let Some((old_nodes, new_nodes)) = counts {
            captured.nodes = Some(new_nodes);
            // Updated: the new graph's count is the old one's (same topology).
            let _ = self.nodes.set(old_nodes);
        }
        if updated {
            self.topology = captured.topology;
        }
        Ok(updated)
    }

    /// Nodes in the graph this executable was made from (or last updated
    /// from): known from the capture, or counted once now.
    pub(crate) fn node_count(&self) -> Result<usize> {
        if let Some(&n) = self.nodes.get() {
            return Ok(n);
        }
        let source = self.source;
        let n = shielded(self.ctx.cuda().raw(), |d| node_count(d, source))?;
        Ok(*self.nodes.get_or_init(|| n))
    }

    /// Writes the source graph as Graphviz DOT to `path` (verbose): the
    /// graph the executable was instantiated from (an in-place update
    /// changes the executable's parameters, not this graph).
    pub(crate) fn debug_dot(&self, path: &CStr) -> Result<()> {
        let source = self.source;
        shielded(self.ctx.cuda().raw(), |d| {
            // SAFETY: a live graph; the flags are a valid
            // CUgraphDebugDot_flags value.
            match unsafe { graph::debug_dot_print(d, source, path, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) } {
                None => Err(Error::Unsupported {
                    feature: "cuGraphDebugDotPrint (graph DOT output)",
                    needs: "a CUDA 11.3+ driver".into(),
                }),
                Some(printed) => Ok(printed?),
            }
        })
    }

    /// Launches on `stream` (asynchronous).
    pub(crate) fn launch(&self, stream: CUstream) -> Result<()> {
        let exec = self.exec;
        shielded(self.ctx.cuda().raw(), |d| {
            // SAFETY: live executable graph and stream of the same context.
            Ok(unsafe { graph_exec::launch(d, exec, stream) }?)
        })
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        let exec = self.exec;
        let _ = shielded(self.ctx.cuda().raw(), |d| {
            // SAFETY: destroyed once; a launch still in flight completes first
            // (the driver frees it asynchronously).
            Ok(unsafe { graph_exec::destroy(d, exec) }?)
        });
        destroy_graph(self.ctx.cuda().raw(), self.source);
        // The ops' list serves the context's next recording (their modules
        // and foreign sections' graphs go now).
        if let Some(b) = self.built.take() {
            self.ctx.recorder().sink().recycle(b.into_list());
        }
        // `self.ctx` is released after this, by the field drop.
    }
}

/// Updates `exec` in place from `graph` through whichever ABI of
/// `cuGraphExecUpdate` the driver has (the 10020 ABI on 10.2-11.x drivers,
/// adapted by cuda-sys): `Ok(true)` updated; `Ok(false)` not (no such entry
/// point, or the driver refused: the executable is unchanged and the caller
/// instantiates anew; also a success status with a failed update result,
/// which no driver reports but which is not taken for an update); an error
/// for any other status.
///
/// # Safety
/// `exec` and `graph` are live handles of the context current on this
/// thread, and nothing else uses `exec` during the call.
pub(crate) unsafe fn update_in_place(d: &DriverFns, exec: CUgraphExec, graph: CUgraph) -> Result<bool> {
    // SAFETY: the caller's promise.
    let Some(outcome) = (unsafe { graph_exec::update(d, exec, graph) }) else {
        return Ok(false);
    };
    let outcome = outcome?;
    Ok(!outcome.refused() && outcome.updated())
}

/// Nodes in a graph (`cuGraphGetNodes` walks all of them).
pub(crate) fn node_count(d: &Driver, graph: CUgraph) -> Result<usize> {
    // SAFETY: a live graph.
    Ok(unsafe { graph::node_count(d, graph) }?)
}

/// The pieces an update installs ([`Graph::replace_pieces`]): inline for a
/// recording without breaks.
pub(crate) type NewPieces<L> = smallvec::SmallVec<[Piece<L>; 1]>;

/// One piece of a captured graph.
pub(crate) enum Piece<L> {
    /// A captured segment; `None` when it recorded no work.
    Segment(Option<GraphExec>),
    /// An eager break, run on the host at replay.
    Break(BreakFn<L>),
    /// During an update only: keep the old graph's piece at this index.
    Reuse(usize),
}

/// A captured graph: `N` breaks give `2N + 1` pieces. `L` is the type of
/// the live value breaks receive at replay (`()` for unbroken graphs).
///
/// Memory: buffers a capture allocated and freed again (its dead
/// intermediates) return to the context's capture pool, and a later capture
/// of the same context may reuse that memory. Graphs of one context replay
/// in order on its one stream, so this is safe for intermediates; a buffer
/// you keep alive (an output) is never reused. Read a graph's outputs
/// before replaying another graph that may have reused its freed memory.
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

/// What [`crate::Capture::end_update`] did with each segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateReport {
    /// Segments updated in place (`cuGraphExecUpdate`).
    pub updated: usize,
    /// Segments instantiated anew (first capture, changed topology, or a
    /// driver without in-place update).
    pub instantiated: usize,
    /// Node-parameter driver calls made by segments updated node by node
    /// (`cuGraphExecKernelNodeSetParams`, `cuGraphExecMemsetNodeSetParams`):
    /// one per changed node, 0 when the re-recording changed nothing.
    pub node_calls: usize,
}

impl<L> Graph<L> {
    pub(crate) fn new(ctx: Context, pieces: Vec<Piece<L>>) -> Graph<L> {
        Graph { ctx, pieces }
    }

    /// The executable of segment `i`, if that piece is a non-empty segment.
    pub(crate) fn segment_exec(&mut self, i: usize) -> Option<&mut GraphExec> {
        match self.pieces.get_mut(i) {
            Some(Piece::Segment(Some(e))) => Some(e),
            _ => None,
        }
    }

    /// Installs the pieces of an update; `Piece::Reuse(i)` takes this
    /// graph's piece `i` (an executable updated in place).
    pub(crate) fn replace_pieces(&mut self, new: NewPieces<L>) {
        install_pieces(&mut self.pieces, new);
    }

    /// Pieces in the graph: captured segments plus breaks (`2N + 1`).
    pub fn segment_count(&self) -> usize {
        self.pieces.len()
    }

    /// Breaks in the graph.
    pub fn break_count(&self) -> usize {
        self.pieces.iter().filter(|p| matches!(p, Piece::Break(_))).count()
    }

    /// The raw executable graphs of the non-empty segments, in order, for
    /// interop and measurement (valid while this graph is alive).
    pub fn raw_execs(&self) -> Vec<CUgraphExec> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Segment(Some(e)) => Some(e.exec),
                _ => None,
            })
            .collect()
    }

    /// The context whose stream the graph replays on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The graphs the non-empty segments were instantiated from, in order,
    /// for inspection (`cuGraphGetEdges`, DOT output; valid while this graph
    /// is alive; an update changes the executables, not these graphs).
    pub fn raw_graphs(&self) -> Vec<CUgraph> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Segment(Some(e)) => Some(e.source),
                _ => None,
            })
            .collect()
    }

    /// Segments built node by node (the others were stream captures).
    pub fn built_segments(&self) -> usize {
        self.pieces.iter().filter(|p| matches!(p, Piece::Segment(Some(e)) if e.built.is_some())).count()
    }

    /// Nodes in each piece, in order (`segment_count()` entries): a
    /// segment's node count (`cuGraphGetNodes` on the graph it was
    /// instantiated or last updated from, counted once, when first needed),
    /// 0 for a break or a segment that recorded no work.
    pub fn piece_node_counts(&self) -> Result<Vec<usize>> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Segment(Some(e)) => e.node_count(),
                _ => Ok(0),
            })
            .collect()
    }

    /// Nodes in the graph: the sum over its segments (breaks have none).
    pub fn node_count(&self) -> Result<usize> {
        Ok(self.piece_node_counts()?.iter().sum())
    }

    /// Writes the graph as Graphviz DOT to `path` (created or replaced), for
    /// debugging: one `digraph` per non-empty segment, in replay order, each
    /// as `cuGraphDebugDotPrint` writes it (verbose: kernel names,
    /// parameters, memory nodes), preceded by a `//` comment naming its piece;
    /// breaks and empty segments appear as comments only. `dot -Tsvg` renders
    /// every digraph of the file. A segment updated in place shows its
    /// topology with the parameters of its last instantiation. Needs a CUDA 11.3+ driver
    /// ([`Error::Unsupported`] otherwise); a path that cannot be created is
    /// an [`Error::InvalidArgument`]. Per-segment files are written next to
    /// `path` (`.fc-piece<i>-<pid>-<n>.tmp`, a short name whatever the
    /// length of `path`'s) and removed again.
    pub fn debug_dot(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let io = |what: &str, p: &Path, e: std::io::Error| Error::invalid(format!("{what} {}: {e}", p.display()));
        // Created first, so an unwritable path is refused before any driver call.
        let mut file = std::fs::File::create(path).map_err(|e| io("creating", path, e))?;
        let counts = self.piece_node_counts()?;
        let segments = self.pieces.iter().filter(|p| matches!(p, Piece::Segment(_))).count();
        let mut out = format!(
            "// fc-graph: {} pieces ({segments} segments, {} breaks), {} nodes; one DOT graph per non-empty segment\n",
            self.pieces.len(),
            self.break_count(),
            counts.iter().sum::<usize>()
        );
        let mut temps = Vec::new();
        let result = (|| {
            for (i, piece) in self.pieces.iter().enumerate() {
                match piece {
                    Piece::Segment(Some(e)) => {
                        let tmp = dot_piece_path(path, i);
                        let c_tmp = CString::new(tmp.as_os_str().as_bytes())
                            .map_err(|_| Error::invalid(format!("path {} contains a NUL byte", path.display())))?;
                        temps.push(tmp.clone());
                        e.debug_dot(&c_tmp)?;
                        let text = std::fs::read_to_string(&tmp).map_err(|err| io("reading", &tmp, err))?;
                        out.push_str(&format!("// piece {i}: segment, {} nodes\n", counts[i]));
                        out.push_str(&text);
                        if !text.ends_with('\n') {
                            out.push('\n');
                        }
                    }
                    Piece::Break(_) => out.push_str(&format!("// piece {i}: break (runs on the host at replay)\n")),
                    Piece::Segment(None) | Piece::Reuse(_) => {
                        out.push_str(&format!("// piece {i}: segment that recorded no work\n"))
                    }
                }
            }
            file.write_all(out.as_bytes()).map_err(|err| io("writing", path, err))
        })();
        for t in temps {
            let _ = std::fs::remove_file(t);
        }
        result
    }

    /// Replays every piece in order on the context's stream: segments are
    /// launched (asynchronously), breaks run their function on this thread
    /// with `live`. Returns before the device work finishes. If a break
    /// fails, the replay stops there: later pieces are not launched, work
    /// already queued still runs.
    ///
    /// Threads: a graph may be replayed from several threads at once. A
    /// break function marks only the thread running it as inside a break
    /// (no capture may begin from inside it); other threads may begin a
    /// capture meanwhile, and a replay that finds, after one of its break
    /// functions, that the context began recording stops there with
    /// [`Error::CaptureState`] rather than launching its remaining
    /// segments into that capture.
    pub fn replay(&self, live: &L) -> Result<()> {
        self.ctx.capture().refuse_while_recording("replay a graph")?;
        let stream = self.ctx.stream();
        for piece in &self.pieces {
            match piece {
                Piece::Segment(Some(exec)) => exec.launch(stream)?,
                Piece::Segment(None) | Piece::Reuse(_) => {}
                Piece::Break(f) => {
                    self.ctx.capture().run_break(|| f(&self.ctx, live))?;
                    if self.ctx.is_capturing() {
                        return Err(Error::capture_state(
                            "a capture began on this context (on another thread) while this replay ran a break \
                             function; the rest of the replay was not launched, so that it is not recorded into \
                             that capture",
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The file segment `i`'s DOT goes to on its way into `path`: in `path`'s
/// folder (which is writable, as `path` was just created there), under a
/// short name of its own, so that neither a long file name (past the
/// file system's 255 bytes once a suffix is added) nor another thread's
/// call writing the same path makes it fail.
fn dot_piece_path(path: &Path, i: usize) -> PathBuf {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!(".fc-piece{i}-{}-{n}.tmp", std::process::id());
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(name),
        _ => PathBuf::from(name),
    }
}

impl Graph<()> {
    /// Launches the graph on its context's stream. Asynchronous: the call
    /// returns once the work is queued; [`Context::synchronize`] waits.
    pub fn launch(&self) -> Result<()> {
        self.replay(&())
    }
}

/// Installs `new` as `pieces`: `Piece::Reuse(i)` takes the old piece `i`
/// (an empty segment if there is none). When every kept piece keeps its
/// place (a re-recording of the same pieces) only the others are replaced
/// and nothing moves or allocates.
fn install_pieces<L>(pieces: &mut Vec<Piece<L>>, new: NewPieces<L>) {
    let in_place =
        new.len() == pieces.len() && new.iter().enumerate().all(|(j, p)| !matches!(p, Piece::Reuse(i) if *i != j));
    if in_place {
        for (slot, p) in pieces.iter_mut().zip(new) {
            if !matches!(p, Piece::Reuse(_)) {
                *slot = p;
            }
        }
        return;
    }
    let mut old: Vec<Option<Piece<L>>> = pieces.drain(..).map(Some).collect();
    *pieces = new
        .into_iter()
        .map(|p| match p {
            Piece::Reuse(i) => old.get_mut(i).and_then(Option::take).unwrap_or(Piece::Segment(None)),
            other => other,
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A break piece whose function captures a value, so that each lives
    /// in an allocation of its own and is told apart by its address (never
    /// called here).
    fn brk() -> Piece<()> {
        let tag = [7u64; 2];
        Piece::Break(Box::new(move |_: &Context, _: &()| {
            std::hint::black_box(tag);
            Ok(())
        }))
    }

    /// Each piece as a name: the break's box address, or "empty".
    fn names(pieces: &[Piece<()>]) -> Vec<String> {
        pieces
            .iter()
            .map(|p| match p {
                Piece::Break(f) => format!("{:p}", &**f as *const _ as *const u8),
                Piece::Segment(None) => "empty".into(),
                Piece::Segment(Some(_)) => "exec".into(),
                Piece::Reuse(i) => format!("reuse {i}"),
            })
            .collect()
    }

    #[test]
    fn kept_pieces_stay_in_place_and_others_are_replaced() {
        let mut pieces = vec![Piece::Segment(None), brk(), Piece::Segment(None)];
        let before = names(&pieces);
        let fresh = brk();
        let fresh_name = names(std::slice::from_ref(&fresh)).remove(0);
        let buffer = pieces.as_ptr();
        install_pieces(&mut pieces, smallvec::smallvec![Piece::Reuse(0), fresh, Piece::Reuse(2)]);
        assert_eq!(names(&pieces), vec![before[0].clone(), fresh_name, before[2].clone()]);
        assert_eq!(pieces.as_ptr(), buffer, "in place: the same vector");
    }

    #[test]
    fn moved_or_missing_pieces_are_rebuilt() {
        let mut pieces = vec![brk(), Piece::Segment(None), brk()];
        let before = names(&pieces);
        install_pieces(&mut pieces, smallvec::smallvec![Piece::Reuse(2), Piece::Reuse(0), Piece::Reuse(7)]);
        assert_eq!(names(&pieces), vec![before[2].clone(), before[0].clone(), "empty".to_string()]);
        let mut short = vec![brk()];
        let first = names(&short);
        install_pieces(&mut short, smallvec::smallvec![Piece::Reuse(0), Piece::Segment(None), brk()]);
        assert_eq!(names(&short)[..2], [first[0].clone(), "empty".to_string()]);
        assert_eq!(short.len(), 3);
    }
}
