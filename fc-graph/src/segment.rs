//! Segments recorded by construction: while a recording is open, the
//! library's own work on a context (built-in and user kernels, fills) is
//! written down as [`Op`]s instead of being enqueued, and becomes a graph
//! built node by node when the segment ends. No stream enters capture mode
//! for it, so nothing another thread or library does (a device-wide
//! synchronisation, a GLOBAL capture, a context created or destroyed) can
//! invalidate, refuse or crash it.
//!
//! - [`Op`], [`Ops`]: the work written down, and what each op depends on.
//! - [`Sink`]: where a context's launches go while one of its recordings
//!   is open (any thread's, as a stream capture would take them).
//!
//! [`crate::built_segment`] builds the ops into a graph and updates its
//! nodes from a re-recording.

use std::sync::Arc;

use smallvec::SmallVec;

use cuda_sys::*;

use crate::driver::RawCtx;
use crate::error::Result;
use crate::nodes::{destroy_graph, ChildShape, LaunchSpec, MemsetRaw, WordLaunch};
use crate::sync::shim::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::SpinLock;

/// Loom's models of the sink (launches from several threads into one open
/// segment, racing its close): `scripts/loom.sh`.
#[cfg(all(test, loom))]
#[path = "segment_loom_tests.rs"]
pub(crate) mod loom_tests;

/// A graph the recording owns (a captured foreign section), destroyed on
/// drop in its context.
pub(crate) struct OwnedGraph {
    graph: CUgraph,
    raw: RawCtx,
}

impl OwnedGraph {
    /// Takes ownership of `graph`, a graph of the context `raw`.
    pub(crate) fn new(graph: CUgraph, raw: RawCtx) -> OwnedGraph {
        OwnedGraph { graph, raw }
    }

    /// The graph (still owned).
    pub(crate) fn raw(&self) -> CUgraph {
        self.graph
    }
}

impl Drop for OwnedGraph {
    fn drop(&mut self) {
        destroy_graph(self.raw, self.graph);
    }
}

/// A user kernel's launch, and what keeps its module loaded for as long
/// as a graph made from it lives.
pub(crate) struct KernelOp {
    pub(crate) spec: LaunchSpec,
    pub(crate) _module: Arc<dyn Send + Sync>,
}

/// One piece of recorded work.
pub(crate) enum Op {
    /// A built-in launch (its kernels live with the context), inline.
    Binary(WordLaunch),
    /// A user kernel's launch.
    Kernel(Box<KernelOp>),
    /// A memset (fills).
    Memset(MemsetRaw),
    /// Work captured from the context's stream (a foreign section: cuBLAS,
    /// NCCL, the engine's own kernels), added as a child graph node: the
    /// graph (`None` once copied into a built graph or used for an
    /// update), its node count, and its shape where it was read (what a
    /// node-by-node update of the child node needs to match).
    Child { graph: Option<OwnedGraph>, nodes: usize, shape: Option<Box<ChildShape>> },
    /// A conditional node (IF, WHILE, SWITCH) with its bodies, and the
    /// setter kernel before it (see [`CondOp`]).
    Cond(Box<CondOp>),
}

/// What decides a recorded conditional node, read on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CondKind {
    /// Runs its body while the `u32` at `src` is non-zero (read before
    /// every iteration, the first included).
    While,
    /// Runs its body `*src` times (`src` read once, when the node starts).
    Repeat,
    /// Runs body 0 if the `u32` at `src` is non-zero, else body 1 (when
    /// there are two).
    If,
    /// Runs body `*src` (none when `*src` is not below the body count).
    Switch,
}

/// A recorded conditional node. It becomes, after its dependencies: a
/// setter kernel (`fc_cond_set`, or `fc_cond_load` for [`CondKind::Repeat`])
/// that sets the node's condition from device memory, then the conditional
/// node, whose bodies are built from `bodies`; a loop's body ends with the
/// setter again (`fc_cond_set`, or `fc_cond_countdown`).
pub(crate) struct CondOp {
    pub(crate) kind: CondKind,
    /// The device address the condition is read from.
    pub(crate) src: u64,
    pub(crate) bodies: Vec<Ops>,
    /// [`CondKind::Repeat`]'s counter: its device address (4 bytes) and
    /// what keeps it allocated while a graph made from the op lives.
    pub(crate) counter: Option<(u64, Box<dyn Send + Sync>)>,
    pub(crate) kernels: Arc<crate::conditional_kernels::CondKernels>,
}

impl CondOp {
    /// Whether `other` records the same node (its counter aside).
    fn same_as(&self, other: &CondOp) -> bool {
        self.kind == other.kind
            && self.src == other.src
            && self.bodies.len() == other.bodies.len()
            && self.bodies.iter().zip(&other.bodies).all(|(a, b)| same_ops(a, b))
    }

    pub(crate) fn counter_addr(&self) -> u64 {
        self.counter.as_ref().map_or(0, |c| c.0)
    }
}

/// Whether two segments record the same work with the same parameters.
fn same_ops(a: &Ops, b: &Ops) -> bool {
    a.len() == b.len() && a.same_deps(b) && a.list.iter().zip(&b.list).all(|(x, y)| same_params(x, y))
}

// SAFETY: function handles and graphs are driver handles usable from any
// thread; modules are kept alive by the `Arc`.
unsafe impl Send for Op {}

impl Op {
    pub(crate) fn is_kernel(&self) -> bool {
        matches!(self, Op::Binary(_) | Op::Kernel(_))
    }

    /// Whether `new` may be applied to a node made from `self` in place.
    pub(crate) fn same_shape(&self, new: &Op) -> bool {
        match (self, new) {
            (Op::Binary(a), Op::Binary(b)) => a.func == b.func && a.pdl == b.pdl,
            (Op::Kernel(a), Op::Kernel(b)) => a.spec.func == b.spec.func && a.spec.pdl == b.spec.pdl,
            (Op::Memset(a), Op::Memset(b)) => a.same_shape(b),
            (Op::Cond(a), Op::Cond(b)) => a.same_as(b),
            _ => false,
        }
    }
}

/// The ops an op depends on (indices into the segment), usually one.
pub(crate) type Deps = SmallVec<[u32; 2]>;

/// The ops of a segment and what each depends on.
#[derive(Default)]
pub(crate) struct Ops {
    pub(crate) list: Vec<Op>,
    /// `Some(deps)`: `deps[i]` lists the ops op `i` depends on (its lane's
    /// previous op, and the last ops of lanes its lane waited for). `None`:
    /// a chain, each op depending on the one before (every op on lane 0
    /// and no wait: the common case, kept without a list, so that recording
    /// an op is one push and comparing two chains is free).
    deps: Option<Vec<Deps>>,
}

/// Op `i`'s dependency in a chain: the op before it.
fn chain_dep(i: usize) -> Deps {
    match i {
        0 => Deps::new(),
        _ => smallvec::smallvec![(i - 1) as u32],
    }
}

/// Op `i`'s dependencies under `deps` (see [`Ops`]).
fn deps_at(deps: &Option<Vec<Deps>>, i: usize) -> Deps {
    match deps {
        Some(d) => d.get(i).cloned().unwrap_or_default(),
        None => chain_dep(i),
    }
}

impl Ops {
    /// Ops with explicit dependencies (`deps[i]` for op `i`).
    #[cfg(test)]
    pub(crate) fn with_deps(list: Vec<Op>, deps: Vec<Deps>) -> Ops {
        Ops { list, deps: Some(deps) }
    }

    /// Ops that form a chain (each depends on the one before).
    #[cfg(test)]
    pub(crate) fn chain(list: Vec<Op>) -> Ops {
        Ops { list, deps: None }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The ops, to change in place, beside a reader of each op's
    /// dependencies.
    pub(crate) fn list_and_deps(&mut self) -> (&mut Vec<Op>, impl Fn(usize) -> Deps + '_) {
        let Ops { list, deps } = self;
        let deps = &*deps;
        (list, move |i| deps_at(deps, i))
    }

    /// The ops op `i` depends on.
    pub(crate) fn deps_of(&self, i: usize) -> Deps {
        deps_at(&self.deps, i)
    }

    /// Every op's dependencies, in order (for tests and messages).
    #[cfg(test)]
    pub(crate) fn all_deps(&self) -> Vec<Vec<u32>> {
        (0..self.len()).map(|i| self.deps_of(i).to_vec()).collect()
    }

    /// Whether both have the same dependencies (op for op; the lengths are
    /// the caller's to compare). Two chains are, at no cost.
    pub(crate) fn same_deps(&self, other: &Ops) -> bool {
        match (&self.deps, &other.deps) {
            (None, None) => true,
            (Some(a), Some(b)) => a == b,
            _ => (0..self.len().max(other.len())).all(|i| self.deps_of(i) == other.deps_of(i)),
        }
    }

    /// The explicit dependency list, made from the chain on first use.
    fn explicit_deps(&mut self) -> &mut Vec<Deps> {
        let n = self.list.len();
        let cap = self.list.capacity();
        self.deps.get_or_insert_with(|| {
            let mut d = Vec::with_capacity(cap);
            d.extend((0..n).map(chain_dep));
            d
        })
    }

    /// How many of the ops are conditional nodes (each also adds its setter
    /// kernel to the graph).
    pub(crate) fn conditionals(&self) -> usize {
        self.list.iter().filter(|o| matches!(o, Op::Cond(_))).count()
    }
}

/// An open segment: its ops and each lane's frontier (the ops its next op
/// depends on; kept only once the ops' dependencies are explicit, see
/// [`Ops`]). While a conditional body records, `ops` and `frontier` are
/// the body's, and the enclosing ones wait in `bodies`.
struct Open {
    ops: Ops,
    frontier: Vec<Deps>,
    bodies: Vec<BodyFrame>,
}

/// A conditional node whose bodies are being recorded: the enclosing ops
/// and frontier, the lane the node goes on, the node so far (its bodies
/// recorded before the open one) and how many bodies it may have.
struct BodyFrame {
    outer_ops: Ops,
    outer_frontier: Vec<Deps>,
    lane: usize,
    cond: Box<CondOp>,
    max_bodies: usize,
}

/// Deepest nesting of conditional bodies a recording takes.
pub(crate) const MAX_BODY_DEPTH: usize = 32;

impl Open {
    #[inline]
    fn push(&mut self, op: Op, lane: usize) {
        if lane == 0 && self.ops.deps.is_none() {
            // Still a chain: the op depends on the one before.
            self.ops.list.push(op);
            return;
        }
        self.make_explicit();
        let i = self.ops.list.len() as u32;
        if self.frontier.len() <= lane {
            self.frontier.resize(lane + 1, Deps::new());
        }
        let deps = std::mem::replace(&mut self.frontier[lane], smallvec::smallvec![i]);
        self.ops.list.push(op);
        self.ops.explicit_deps().push(deps);
    }

    /// Makes the ops' dependencies explicit (a first op on another lane,
    /// or a wait), with lane 0's frontier at the chain's last op.
    fn make_explicit(&mut self) {
        if self.ops.deps.is_none() {
            self.ops.explicit_deps();
            let n = self.ops.list.len();
            self.frontier = vec![if n == 0 { Deps::new() } else { smallvec::smallvec![(n - 1) as u32] }];
        }
    }
}

/// Where a context's launches go while one of its recordings is open.
/// `active` is a hint read without the lock by every launch (an eager
/// launch pays one atomic load); the ops themselves are behind a spin lock
/// ([`SpinLock`]: held for one push, one atomic compare-exchange to take).
/// That compare-exchange is most of what recording a launch costs (a
/// profile of 26-launch re-recordings against the driver double: about 30%
/// of one that changes nothing); a lock-free push would have to keep the
/// order of launches from several threads. `repr(C)`, `active` first: in
/// the context's shared state it lies beside the other fields every launch
/// reads (see `crate::context::ContextInner`).
///
/// Why no launch is lost or taken twice: the open segment is reached only
/// under its lock, and `active` and `foreign` change only under it too, so
/// [`Sink::push`], which re-reads both under the lock, either pushes into
/// the segment open then (each op once, in the order the lock was taken,
/// so a thread's launches stay in its order) or refuses; a segment closed
/// (taken under the lock) gets nothing after. Read without the lock,
/// `active` only says whether to try. `hint` is a size, read relaxed. The
/// loom models of `segment_loom_tests.rs` check this over every
/// interleaving of launches from two threads, and of launches against a
/// close and the next open.
#[repr(C)]
pub(crate) struct Sink {
    active: AtomicBool,
    /// The lane whose stream a foreign section captures ([`NO_LANE`]: none):
    /// its launches are not taken (they go to its capturing stream).
    foreign: AtomicUsize,
    open: SpinLock<Option<Open>>,
    /// Ops the last closed segment held: the next one starts with room for
    /// as many (recordings of a model repeat).
    hint: AtomicUsize,
    /// An empty op list whose room the next segment reuses (handed back by
    /// [`Sink::recycle`] when a graph built from ops goes, or an update is
    /// done with its ops), so that recording a model again allocates
    /// nothing.
    spare: SpinLock<Vec<Op>>,
}

/// Largest op list (in ops) kept for reuse.
const MAX_SPARE_OPS: usize = 1 << 16;

/// No lane (no foreign section is open).
const NO_LANE: usize = usize::MAX;

impl Default for Sink {
    fn default() -> Sink {
        Sink {
            active: AtomicBool::new(false),
            foreign: AtomicUsize::new(NO_LANE),
            open: SpinLock::new(None),
            hint: AtomicUsize::new(0),
            spare: SpinLock::new(Vec::new()),
        }
    }
}

impl Sink {
    /// Where the fields every launch reads end (`active`), in bytes from
    /// the start (the context's layout test).
    #[cfg(test)]
    pub(crate) fn hot_end() -> usize {
        std::mem::offset_of!(Sink, active) + std::mem::size_of::<AtomicBool>()
    }

    /// Whether both locks are free (the loom models check that every path
    /// lets go).
    #[cfg(all(test, loom))]
    pub(crate) fn is_unlocked(&self) -> bool {
        !self.open.is_locked() && !self.spare.is_locked()
    }

    /// Starts taking launches into a new segment (every lane starts at the
    /// segment's beginning).
    pub(crate) fn open(&self) {
        let room = self.hint.load(Ordering::Relaxed).min(MAX_SPARE_OPS);
        let spare = std::mem::take(&mut *self.spare.lock());
        let list = if spare.capacity() >= room { spare } else { Vec::with_capacity(room) };
        let ops = Ops { list, deps: None };
        let mut open = self.open.lock();
        let left = open.replace(Open { ops, frontier: Vec::new(), bodies: Vec::new() });
        self.foreign.store(NO_LANE, Ordering::Release);
        self.active.store(true, Ordering::Release);
        drop(open);
        // Whatever an earlier segment left is dropped outside the lock (its
        // foreign sections' graphs are destroyed by driver calls).
        drop(left);
    }

    /// Takes `list` back for the next segment's ops (emptied here, outside
    /// the lock: a foreign section's graph is destroyed by a driver call);
    /// the larger of it and the spare already kept stays.
    pub(crate) fn recycle(&self, mut list: Vec<Op>) {
        list.clear();
        if list.capacity() == 0 || list.capacity() > MAX_SPARE_OPS {
            return;
        }
        let mut spare = self.spare.lock();
        if list.capacity() > spare.capacity() {
            std::mem::swap(&mut *spare, &mut list);
        }
        drop(spare);
        drop(list);
    }

    /// Stops taking launches and hands over what the segment recorded
    /// (conditional bodies still open are dropped: see
    /// [`Sink::open_bodies`]).
    pub(crate) fn close(&self) -> Option<Ops> {
        let taken = self.take_open(false).unwrap_or_default();
        // Open bodies are dropped outside the lock (see `Sink::open`).
        let ops = taken.map(|mut o| match o.bodies.drain(..).next() {
            Some(outermost) => outermost.outer_ops,
            None => o.ops,
        });
        self.note_length(&ops);
        ops
    }

    /// [`Sink::close`] unless conditional bodies are open: then nothing
    /// changes and `Err` says how many (one lock for both).
    pub(crate) fn close_unless_in_body(&self) -> std::result::Result<Option<Ops>, usize> {
        let ops = self.take_open(true)?.map(|o| o.ops);
        self.note_length(&ops);
        Ok(ops)
    }

    /// Stops taking launches and takes the open segment, under one lock;
    /// with `refuse_in_body`, changes nothing while conditional bodies are
    /// open and says how many.
    fn take_open(&self, refuse_in_body: bool) -> std::result::Result<Option<Open>, usize> {
        let mut open = self.open.lock();
        if let Some(n) = open.as_ref().map(|o| o.bodies.len()).filter(|&n| refuse_in_body && n > 0) {
            return Err(n);
        }
        self.active.store(false, Ordering::Release);
        self.foreign.store(NO_LANE, Ordering::Release);
        Ok(open.take())
    }

    /// Keeps the closed segment's length as the next one's room.
    fn note_length(&self, ops: &Option<Ops>) {
        if let Some(v) = ops {
            self.hint.store(v.len(), Ordering::Relaxed);
        }
    }

    /// Stops taking `lane`'s launches for a while (a foreign section,
    /// during which that lane's stream captures them), keeping what was
    /// recorded; the other lanes' launches are still taken.
    pub(crate) fn pause(&self, lane: usize) {
        let _open = self.open.lock();
        self.foreign.store(lane, Ordering::Release);
    }

    /// Takes every lane's launches again after [`Sink::pause`].
    pub(crate) fn resume(&self) {
        let _open = self.open.lock();
        self.foreign.store(NO_LANE, Ordering::Release);
    }

    /// The lane a foreign section captures, if one is open.
    #[inline]
    pub(crate) fn foreign_lane(&self) -> Option<usize> {
        Some(self.foreign.load(Ordering::Acquire)).filter(|&l| l != NO_LANE)
    }

    /// Whether a segment takes launches now (a hint; [`Sink::push`]
    /// decides, per lane).
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Records `op` on `lane` if launches are taken now: `false` when not
    /// (no segment is open, or a foreign section captures the lane's
    /// stream: the caller enqueues the work on it; `op` is dropped).
    #[inline]
    pub(crate) fn push(&self, op: Op, lane: usize) -> bool {
        let mut open = self.open.lock();
        match open.as_mut() {
            Some(o) if self.active.load(Ordering::Acquire) && self.foreign.load(Ordering::Acquire) != lane => {
                o.push(op, lane);
                true
            }
            _ => false,
        }
    }

    /// Records `op` on `lane` even while paused (the end of a foreign
    /// section); `false` (and `op` dropped) when the segment is closed.
    pub(crate) fn push_paused(&self, op: Op, lane: usize) -> bool {
        match self.open.lock().as_mut() {
            Some(o) => {
                o.push(op, lane);
                true
            }
            None => false,
        }
    }

    /// How many conditional bodies are open (nested), 0 when the segment
    /// is closed.
    pub(crate) fn open_bodies(&self) -> usize {
        self.open.lock().as_ref().map_or(0, |o| o.bodies.len())
    }

    /// Starts recording the first body of `cond`, a conditional node that
    /// goes on `lane` when it ends and has at most `max_bodies` bodies: the
    /// launches taken from now on are the body's (every lane starts at the
    /// body's beginning). `Err` (and `cond` dropped) when launches are not
    /// taken now or the nesting is too deep.
    pub(crate) fn begin_body(&self, cond: Box<CondOp>, lane: usize, max_bodies: usize) -> Result<()> {
        let mut open = self.open.lock();
        let Some(o) = open.as_mut().filter(|_| self.active.load(Ordering::Acquire)) else {
            return Err(crate::error::Error::capture_state(
                "a conditional node needs an open recording that builds its graph (not one that captures the \
                 stream)",
            ));
        };
        if self.foreign.load(Ordering::Acquire) == lane {
            return Err(crate::error::Error::capture_state(
                "a conditional node cannot begin on a lane whose foreign section is open; end the section first",
            ));
        }
        if o.bodies.len() >= MAX_BODY_DEPTH {
            return Err(crate::error::Error::invalid(format!(
                "conditional nodes nest at most {MAX_BODY_DEPTH} deep in a recording"
            )));
        }
        let outer_ops = std::mem::take(&mut o.ops);
        let outer_frontier = std::mem::take(&mut o.frontier);
        o.bodies.push(BodyFrame { outer_ops, outer_frontier, lane, cond, max_bodies });
        Ok(())
    }

    /// Ends the open body and starts the next one of the same node (an
    /// IF's else, a SWITCH's next case). `Err` when no body is open or the
    /// node has no more.
    pub(crate) fn next_body(&self) -> Result<()> {
        let mut open = self.open.lock();
        let Some(o) = open.as_mut() else { return Err(no_body()) };
        let Some(frame) = o.bodies.last_mut() else { return Err(no_body()) };
        if frame.cond.bodies.len() + 1 >= frame.max_bodies {
            return Err(crate::error::Error::capture_state(format!(
                "this conditional node has {} bodies; all are recorded",
                frame.max_bodies
            )));
        }
        frame.cond.bodies.push(std::mem::take(&mut o.ops));
        o.frontier = Vec::new();
        Ok(())
    }

    /// Ends the open body and its conditional node, which is recorded on
    /// its lane after that lane's last op. Bodies never opened stay empty.
    pub(crate) fn end_body(&self) -> Result<()> {
        let mut open = self.open.lock();
        let Some(o) = open.as_mut() else { return Err(no_body()) };
        let Some(mut frame) = o.bodies.pop() else { return Err(no_body()) };
        frame.cond.bodies.push(std::mem::replace(&mut o.ops, frame.outer_ops));
        o.frontier = frame.outer_frontier;
        o.push(Op::Cond(frame.cond), frame.lane);
        Ok(())
    }

    /// Drops the innermost open body and its node, recording nothing of
    /// either; `false` when none is open.
    pub(crate) fn abort_body(&self) -> bool {
        let mut open = self.open.lock();
        let Some(o) = open.as_mut() else { return false };
        let Some(frame) = o.bodies.pop() else { return false };
        let body = std::mem::replace(&mut o.ops, frame.outer_ops);
        o.frontier = frame.outer_frontier;
        drop(open);
        // The body's ops and its node go outside the lock (see `Sink::open`).
        drop((body, frame.cond));
        true
    }

    /// Lane `a`'s next op also depends on lane `b`'s last ops (a wait, a
    /// fork or a join, recorded): `false` when launches are not taken now
    /// (the caller orders the streams eagerly).
    pub(crate) fn wait(&self, a: usize, b: usize) -> bool {
        let mut open = self.open.lock();
        let Some(o) = open.as_mut().filter(|_| self.active.load(Ordering::Acquire)) else {
            return false;
        };
        o.make_explicit();
        let need = a.max(b) + 1;
        if o.frontier.len() < need {
            o.frontier.resize(need, Deps::new());
        }
        let theirs = o.frontier[b].clone();
        let mine = &mut o.frontier[a];
        for d in theirs {
            if !mine.contains(&d) {
                mine.push(d);
            }
        }
        true
    }
}

fn no_body() -> crate::error::Error {
    crate::error::Error::capture_state("no conditional body is open on this context")
}

/// Whether two ops of the same shape have equal parameters.
pub(crate) fn same_params(a: &Op, b: &Op) -> bool {
    match (a, b) {
        (Op::Binary(x), Op::Binary(y)) => x == y,
        (Op::Kernel(x), Op::Kernel(y)) => x.spec == y.spec,
        (Op::Memset(x), Op::Memset(y)) => x == y,
        (Op::Cond(x), Op::Cond(y)) => x.same_as(y),
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::launch_config::LaunchConfig;

    pub(crate) fn kernel(func: usize, a: u64, pdl: bool) -> Op {
        let cfg = LaunchConfig { grid: (4, 1, 1), block: (256, 1, 1), shared_mem_bytes: 0 };
        let func = std::ptr::null_mut::<u8>().wrapping_add(func).cast();
        Op::Binary(WordLaunch { func, cfg, words: [a, 2, 3, 1024], pdl })
    }

    /// `ops` as one chain: each depends on the one before, listed
    /// explicitly (as a recording with lanes keeps them).
    pub(crate) fn chain(list: Vec<Op>) -> Ops {
        let deps =
            (0..list.len() as u32).map(|i| if i == 0 { Deps::new() } else { smallvec::smallvec![i - 1] }).collect();
        Ops::with_deps(list, deps)
    }

    pub(crate) fn memset(dst: u64, count: usize) -> Op {
        Op::Memset(MemsetRaw { dst, value: 0, element_size: 1, count })
    }

    #[test]
    fn the_sink_takes_launches_only_while_open_and_not_paused() {
        let sink = Sink::default();
        assert!(!sink.is_active());
        assert!(!sink.push(memset(0x10, 4), 0), "closed: the launch runs eagerly");
        sink.open();
        assert!(sink.is_active());
        assert!(sink.push(memset(0x10, 4), 0));
        sink.pause(0);
        assert_eq!(sink.foreign_lane(), Some(0));
        assert!(!sink.push(memset(0x20, 4), 0), "lane 0 paused: its stream captures it");
        assert!(sink.push(memset(0x21, 4), 1), "another lane still records");
        assert!(sink.push_paused(memset(0x30, 4), 0), "a foreign section's end still records");
        sink.resume();
        assert_eq!(sink.foreign_lane(), None);
        assert!(sink.push(memset(0x40, 4), 0));
        sink.pause(1);
        assert!(sink.push(memset(0x41, 4), 0) && !sink.push(memset(0x42, 4), 1), "a section on lane 1");
        assert!(sink.begin_body(super::tests::cond(CondKind::If, 1), 1, 1).is_err(), "no conditional on it");
        sink.resume();
        let ops = sink.close().expect("open");
        assert_eq!(ops.all_deps(), vec![vec![], vec![], vec![0], vec![2], vec![3]]);
        let dsts: Vec<u64> = ops
            .list
            .iter()
            .map(|o| match o {
                Op::Memset(m) => m.dst,
                _ => 0,
            })
            .collect();
        assert_eq!(dsts, [0x10, 0x21, 0x30, 0x40, 0x41]);
        assert!(!sink.is_active());
        sink.resume();
        assert!(!sink.is_active(), "resume after close does not reopen");
        assert!(!sink.push_paused(memset(0x50, 4), 0));
        assert!(sink.close().is_none());
    }

    #[test]
    fn lanes_record_their_own_order_and_waits_become_dependencies() {
        let sink = Sink::default();
        sink.open();
        assert!(sink.push(memset(0x00, 4), 0)); // 0 on lane 0
        assert!(sink.wait(1, 0) && sink.wait(2, 0)); // fork lanes 1 and 2
        assert!(sink.push(memset(0x10, 4), 1)); // 1
        assert!(sink.push(memset(0x20, 4), 2)); // 2
        assert!(sink.push(memset(0x11, 4), 1)); // 3
        assert!(sink.wait(0, 1) && sink.wait(0, 2)); // join both into lane 0
        assert!(sink.wait(0, 2), "a second wait adds nothing twice");
        assert!(sink.push(memset(0x01, 4), 0)); // 4
        assert!(sink.push(memset(0x30, 4), 3)); // 5: lane 3, never forked
        let ops = sink.close().expect("open");
        let deps: Vec<Vec<u32>> = ops.all_deps();
        assert_eq!(deps, vec![vec![], vec![0], vec![0], vec![1], vec![0, 3, 2], vec![]]);
        assert!(!sink.wait(0, 1), "closed: waits are eager");
        sink.open();
        assert!(sink.push(memset(0x40, 4), 1));
        assert_eq!(sink.close().expect("open").deps_of(0).len(), 0, "after a segment ends, lanes start anew");
    }

    #[test]
    fn a_single_lane_records_a_chain_without_a_list_until_lanes_appear() {
        let sink = Sink::default();
        sink.open();
        for i in 0..3 {
            assert!(sink.push(memset(0x10 + i, 4), 0));
        }
        let chain = sink.close().expect("open");
        assert!(chain.deps.is_none(), "lane 0 alone: an implicit chain");
        assert_eq!(chain.all_deps(), vec![vec![], vec![0], vec![1]]);

        sink.open();
        assert!(sink.push(memset(0x10, 4), 0)); // 0
        assert!(sink.push(memset(0x11, 4), 0)); // 1
        assert!(sink.push(memset(0x20, 4), 1)); // 2: lane 1, never forked
        assert!(sink.push(memset(0x12, 4), 0)); // 3: after lane 0's last
        let ops = sink.close().expect("open");
        assert!(ops.deps.is_some(), "a second lane makes the list explicit");
        assert_eq!(ops.all_deps(), vec![vec![], vec![0], vec![], vec![1]]);

        sink.open();
        assert!(sink.push(memset(0x10, 4), 0));
        assert!(sink.wait(0, 0), "a wait of a lane on itself adds nothing");
        assert!(sink.push(memset(0x11, 4), 0));
        let waited = sink.close().expect("open");
        assert!(waited.deps.is_some());
        assert_eq!(waited.all_deps(), vec![vec![], vec![0]]);
    }

    #[test]
    fn a_recycled_list_serves_the_next_segment() {
        let sink = Sink::default();
        sink.open();
        for i in 0..40 {
            assert!(sink.push(memset(i, 4), 0));
        }
        let first = sink.close().expect("open").list;
        let (buffer, cap) = (first.as_ptr(), first.capacity());
        sink.recycle(first);
        sink.open();
        assert!(sink.push(memset(0x99, 4), 0));
        let second = sink.close().expect("open").list;
        assert_eq!((second.as_ptr(), second.capacity()), (buffer, cap), "the same allocation, emptied");
        assert_eq!(second.len(), 1);
        sink.recycle(Vec::with_capacity(4));
        sink.recycle(second);
        sink.open();
        assert_eq!(sink.close().expect("open").list.capacity(), cap, "the larger spare is kept");
        sink.recycle(Vec::with_capacity(MAX_SPARE_OPS + 1));
        sink.open();
        assert!(sink.close().expect("open").list.capacity() <= MAX_SPARE_OPS, "a huge list is not kept");
    }

    pub(crate) fn cond(kind: CondKind, src: u64) -> Box<CondOp> {
        Box::new(CondOp {
            kind,
            src,
            bodies: Vec::new(),
            counter: None,
            kernels: crate::conditional_kernels::fake_kernels(),
        })
    }

    fn dsts(ops: &Ops) -> Vec<u64> {
        ops.list
            .iter()
            .map(|o| match o {
                Op::Memset(m) => m.dst,
                Op::Cond(c) => 0xC000 + c.src,
                _ => u64::MAX,
            })
            .collect()
    }

    #[test]
    fn conditional_bodies_record_apart_and_become_one_op() {
        let sink = Sink::default();
        assert!(sink.begin_body(cond(CondKind::While, 1), 0, 1).is_err(), "closed: refused");
        sink.open();
        assert!(sink.push(memset(0x10, 4), 0)); // 0
        sink.begin_body(cond(CondKind::If, 7), 0, 2).expect("begun");
        assert_eq!(sink.open_bodies(), 1);
        assert!(sink.push(memset(0x20, 4), 0));
        assert!(sink.wait(1, 0));
        assert!(sink.push(memset(0x21, 4), 1));
        sink.next_body().expect("the else body");
        assert!(sink.next_body().is_err(), "an IF has two bodies at most");
        assert!(sink.push(memset(0x30, 4), 0));
        sink.begin_body(cond(CondKind::Repeat, 9), 0, 1).expect("nested");
        assert!(sink.push(memset(0x40, 4), 0));
        assert!(sink.abort_body(), "the nested one dropped");
        sink.end_body().expect("ended");
        assert!(sink.end_body().is_err(), "none open");
        assert!(sink.push(memset(0x50, 4), 0)); // 2
        assert_eq!(sink.open_bodies(), 0);
        let ops = sink.close().expect("open");
        assert_eq!(dsts(&ops), [0x10, 0xC007, 0x50]);
        let deps: Vec<Vec<u32>> = ops.all_deps();
        assert_eq!(deps, vec![vec![], vec![0], vec![1]], "the node follows its lane; work after it follows it");
        let Op::Cond(c) = &ops.list[1] else { panic!("a conditional") };
        assert_eq!(c.bodies.len(), 2);
        assert_eq!(dsts(&c.bodies[0]), [0x20, 0x21]);
        assert_eq!(c.bodies[0].all_deps(), vec![vec![], vec![0]]);
        assert_eq!(dsts(&c.bodies[1]), [0x30], "the aborted nested loop left nothing");
    }

    #[test]
    fn closing_with_bodies_open_keeps_the_outer_ops_and_depth_is_bounded() {
        let sink = Sink::default();
        sink.open();
        assert!(sink.push(memset(0x10, 4), 0));
        for i in 0..MAX_BODY_DEPTH {
            sink.begin_body(cond(CondKind::While, i as u64), 0, 1).expect("nested");
        }
        assert!(sink.begin_body(cond(CondKind::While, 99), 0, 1).is_err(), "too deep");
        assert!(sink.push(memset(0x20, 4), 0));
        let ops = sink.close().expect("open");
        assert_eq!(dsts(&ops), [0x10], "open bodies are dropped with the segment");
        assert_eq!(sink.open_bodies(), 0);
    }

    #[test]
    fn launches_from_many_threads_are_all_recorded_once() {
        let sink = Arc::new(Sink::default());
        sink.open();
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let sink = Arc::clone(&sink);
                std::thread::spawn(move || {
                    for i in 0..25u64 {
                        assert!(sink.push(memset(t * 1000 + i, 1), 0));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("joined");
        }
        let mut dsts: Vec<u64> = sink
            .close()
            .expect("open")
            .list
            .iter()
            .map(|o| match o {
                Op::Memset(m) => m.dst,
                _ => u64::MAX,
            })
            .collect();
        dsts.sort_unstable();
        let mut want: Vec<u64> = (0..4u64).flat_map(|t| (0..25u64).map(move |i| t * 1000 + i)).collect();
        want.sort_unstable();
        assert_eq!(dsts, want);
    }

    #[test]
    fn a_launch_racing_a_close_lands_in_one_segment_or_runs_eagerly() {
        let sink = Arc::new(Sink::default());
        sink.open();
        let pusher = {
            let sink = Arc::clone(&sink);
            std::thread::spawn(move || {
                (0..40u64).filter(|&i| sink.push(memset(i, 1), if i % 3 == 0 { 1 } else { 0 })).collect::<Vec<u64>>()
            })
        };
        let mut recorded = Vec::new();
        for _ in 0..4 {
            let ops = sink.close().expect("open");
            recorded.extend(ops.list.iter().map(|o| match o {
                Op::Memset(m) => m.dst,
                _ => u64::MAX,
            }));
            sink.open();
        }
        let taken = pusher.join().expect("joined");
        recorded.extend(sink.close().expect("open").list.iter().map(|o| match o {
            Op::Memset(m) => m.dst,
            _ => u64::MAX,
        }));
        assert_eq!(recorded, taken, "every taken launch is in exactly one segment, in order");
    }
}
