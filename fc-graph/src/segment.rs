//! Segments recorded by construction: while a recording is open, the
//! library's own work on a context (built-in and user kernels, fills) is
//! written down as [`Op`]s instead of being enqueued, and becomes a graph
//! built node by node when the segment ends. No stream enters capture mode
//! for it, so nothing another thread or library does (a device-wide
//! synchronisation, a GLOBAL capture, a context created or destroyed) can
//! invalidate, refuse or crash it.
//!
//! - [`Sink`]: where a context's launches go while one of its recordings
//!   is open (any thread's, as a stream capture would take them).
//! - [`materialize`]: the ops as a `CUgraph`, in order: each op depends on
//!   the one before (the stream order the eager calls would have), with a
//!   programmatic edge where the op launches with PDL after a kernel on a
//!   CUDA 12.3+ driver (see [`crate::nodes::programmatic_edge`]).
//! - [`BuiltNodes`]: what an executable made from ops keeps, so that a
//!   re-recording of the same shape is applied node by node
//!   ([`BuiltNodes::update`]): unchanged nodes make no driver call.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use smallvec::SmallVec;

use cuda_sys::*;

use crate::driver::{bound, RawCtx};
use crate::error::Result;
use crate::nodes::{
    add_child_node, add_edges, add_kernel_node, add_kernel_node_params, add_memset_node, destroy_graph, pdl_change,
    programmatic_edge, set_kernel_node_params, update_kernel_node, update_memset_node, LaunchSpec, MemsetRaw,
    WordLaunch,
};
use crate::sync::lock;

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
    /// graph (`None` once copied into a built graph) and its node count.
    Child { graph: Option<OwnedGraph>, nodes: usize },
}

// SAFETY: function handles and graphs are driver handles usable from any
// thread; modules are kept alive by the `Arc`.
unsafe impl Send for Op {}

impl Op {
    fn is_kernel(&self) -> bool {
        matches!(self, Op::Binary(_) | Op::Kernel(_))
    }

    /// Whether `new` may be applied to a node made from `self` in place.
    fn same_shape(&self, new: &Op) -> bool {
        match (self, new) {
            (Op::Binary(a), Op::Binary(b)) => a.func == b.func && a.pdl == b.pdl,
            (Op::Kernel(a), Op::Kernel(b)) => a.spec.func == b.spec.func && a.spec.pdl == b.spec.pdl,
            (Op::Memset(a), Op::Memset(b)) => a.same_shape(b),
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
    /// `deps[i]`: the ops op `i` depends on (its lane's previous op, and
    /// the last ops of lanes its lane waited for).
    pub(crate) deps: Vec<Deps>,
}

impl Ops {
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }
}

/// An open segment: its ops and each lane's frontier (the ops its next op
/// depends on).
struct Open {
    ops: Ops,
    frontier: Vec<Deps>,
}

impl Open {
    fn push(&mut self, op: Op, lane: usize) {
        let i = self.ops.list.len() as u32;
        if self.frontier.len() <= lane {
            self.frontier.resize(lane + 1, Deps::new());
        }
        let deps = std::mem::replace(&mut self.frontier[lane], smallvec::smallvec![i]);
        self.ops.list.push(op);
        self.ops.deps.push(deps);
    }
}

/// Where a context's launches go while one of its recordings is open.
/// `active` is a hint read without the lock by every launch (an eager
/// launch pays one atomic load); the ops themselves are behind the mutex.
#[derive(Default)]
pub(crate) struct Sink {
    active: AtomicBool,
    /// A foreign section is open: lane 0's stream captures.
    foreign: AtomicBool,
    open: Mutex<Option<Open>>,
    /// Ops the last closed segment held: the next one starts with room for
    /// as many (recordings of a model repeat).
    hint: AtomicUsize,
}

impl Sink {
    /// Starts taking launches into a new segment (every lane starts at the
    /// segment's beginning).
    pub(crate) fn open(&self) {
        let room = self.hint.load(Ordering::Relaxed).min(1 << 16);
        let ops = Ops { list: Vec::with_capacity(room), deps: Vec::with_capacity(room) };
        let mut open = lock(&self.open);
        *open = Some(Open { ops, frontier: vec![Deps::new()] });
        self.foreign.store(false, Ordering::Release);
        self.active.store(true, Ordering::Release);
    }

    /// Stops taking launches and hands over what the segment recorded.
    pub(crate) fn close(&self) -> Option<Ops> {
        let mut open = lock(&self.open);
        self.active.store(false, Ordering::Release);
        self.foreign.store(false, Ordering::Release);
        let taken = open.take().map(|o| o.ops);
        if let Some(v) = &taken {
            self.hint.store(v.len(), Ordering::Relaxed);
        }
        taken
    }

    /// Stops taking launches for a while (a foreign section, during which
    /// the stream itself captures), keeping what was recorded.
    pub(crate) fn pause(&self) {
        let _open = lock(&self.open);
        self.active.store(false, Ordering::Release);
        self.foreign.store(true, Ordering::Release);
    }

    /// Takes launches again after [`Sink::pause`] (no-op when closed).
    pub(crate) fn resume(&self) {
        let open = lock(&self.open);
        self.foreign.store(false, Ordering::Release);
        self.active.store(open.is_some(), Ordering::Release);
    }

    /// Whether a foreign section is open (launches are paused for it).
    #[inline]
    pub(crate) fn in_foreign(&self) -> bool {
        self.foreign.load(Ordering::Acquire)
    }

    /// Whether launches are taken now (a hint; [`Sink::push`] decides).
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Records `op` on `lane` if launches are taken now: `false` when not
    /// (the caller enqueues the work eagerly; `op` is dropped).
    pub(crate) fn push(&self, op: Op, lane: usize) -> bool {
        let mut open = lock(&self.open);
        match open.as_mut() {
            Some(o) if self.active.load(Ordering::Acquire) => {
                o.push(op, lane);
                true
            }
            _ => false,
        }
    }

    /// Records `op` on lane 0 even while paused (the end of a foreign
    /// section); `false` (and `op` dropped) when the segment is closed.
    pub(crate) fn push_paused(&self, op: Op) -> bool {
        match lock(&self.open).as_mut() {
            Some(o) => {
                o.push(op, 0);
                true
            }
            None => false,
        }
    }

    /// Lane `a`'s next op also depends on lane `b`'s last ops (a wait, a
    /// fork or a join, recorded): `false` when launches are not taken now
    /// (the caller orders the streams eagerly).
    pub(crate) fn wait(&self, a: usize, b: usize) -> bool {
        let mut open = lock(&self.open);
        let Some(o) = open.as_mut().filter(|_| self.active.load(Ordering::Acquire)) else {
            return false;
        };
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

/// A graph built from ops, and the node each op became.
pub(crate) struct Built {
    pub(crate) graph: CUgraph,
    pub(crate) nodes: Vec<CUgraphNode>,
}

/// Builds `ops` into a new graph of the context `ctx` (see the module
/// docs): each op a node after the nodes of its dependencies. The edge into
/// a kernel that launches with PDL from its one dependency, a kernel, is
/// programmatic (where the driver has such edges); every other edge is a
/// full one. Child ops are copied into the graph and their graphs
/// destroyed. On error nothing is left.
pub(crate) fn materialize(ctx: RawCtx, ops: &mut Ops) -> Result<Built> {
    let d = crate::driver::driver()?;
    let programmatic = d.has_programmatic_edges();
    let raw_ctx = ctx.raw;
    bound(ctx, |d| {
        let mut graph: CUgraph = std::ptr::null_mut();
        // SAFETY: valid out-pointer; flags must be 0.
        crate::driver::check("cuGraphCreate", unsafe { (d.cuGraphCreate)(&mut graph, 0) })?;
        let n = ops.len();
        let mut nodes: Vec<CUgraphNode> = Vec::with_capacity(n);
        let edges = if programmatic { n } else { 0 };
        let (mut from, mut to, mut data) =
            (Vec::with_capacity(edges), Vec::with_capacity(edges), Vec::with_capacity(edges));
        let mut dep_nodes: Vec<CUgraphNode> = Vec::with_capacity(4);
        let mut kernel_flags: Vec<bool> = Vec::with_capacity(n);
        let built = (|| {
            for (op, deps) in ops.list.iter_mut().zip(&ops.deps) {
                dep_nodes.clear();
                for &i in deps {
                    let node = nodes.get(i as usize).copied();
                    dep_nodes.push(node.ok_or_else(|| crate::error::Error::invalid("an op depends on a later op"))?);
                }
                let pdl = match op {
                    Op::Binary(l) => l.pdl,
                    Op::Kernel(k) => k.spec.pdl,
                    _ => false,
                };
                let single_kernel_dep = deps.len() == 1 && ops_is_kernel_at(&kernel_flags, deps[0] as usize);
                let edge = programmatic_edge(pdl, single_kernel_dep, programmatic);
                let full: &[CUgraphNode] = if edge.is_some() { &[] } else { &dep_nodes };
                let node = match op {
                    Op::Binary(l) => l.with_params(|p| {
                        // SAFETY: our live graph, bound here; `full` its
                        // nodes; the launch was checked when recorded.
                        unsafe { add_kernel_node_params(d, graph, full, p) }
                    })?,
                    // SAFETY: as above.
                    Op::Kernel(k) => unsafe { add_kernel_node(d, graph, full, &k.spec) }?,
                    // SAFETY: our live graph and its nodes; the range lies
                    // inside memory of this context (checked when recorded).
                    Op::Memset(m) => unsafe { add_memset_node(d, graph, full, m, raw_ctx) }?,
                    Op::Child { graph: child, .. } => {
                        let Some(c) = child.as_ref() else {
                            return Err(crate::error::Error::invalid("a recorded foreign section was built already"));
                        };
                        // SAFETY: two live graphs of this context; the
                        // child is copied.
                        let node = unsafe { add_child_node(d, graph, full, c.graph) }?;
                        *child = None;
                        node
                    }
                };
                if let Some(e) = edge {
                    from.push(dep_nodes[0]);
                    to.push(node);
                    data.push(e);
                }
                nodes.push(node);
                kernel_flags.push(op.is_kernel());
            }
            // SAFETY: our live graph and its nodes.
            unsafe { add_edges(d, graph, &from, &to, &data) }
        })();
        match built {
            Ok(()) => Ok(Built { graph, nodes }),
            Err(e) => {
                // SAFETY: the graph made above, destroyed once.
                unsafe { (d.cuGraphDestroy)(graph) };
                Err(e)
            }
        }
    })
}

/// Whether op `i` (already added) is a kernel.
fn ops_is_kernel_at(kernel_flags: &[bool], i: usize) -> bool {
    kernel_flags.get(i).copied().unwrap_or(false)
}

/// What an executable graph built from ops keeps: the node of each op in
/// its source graph and the parameters it was last given. The ops also
/// keep user kernels' modules loaded while the graph lives.
pub(crate) struct BuiltNodes {
    nodes: Vec<CUgraphNode>,
    ops: Ops,
}

// SAFETY: node handles are driver handles; see `Op`.
unsafe impl Send for BuiltNodes {}
// SAFETY: never mutated through a shared reference.
unsafe impl Sync for BuiltNodes {}

impl BuiltNodes {
    pub(crate) fn new(nodes: Vec<CUgraphNode>, ops: Ops) -> BuiltNodes {
        BuiltNodes { nodes, ops }
    }

    /// Whether `new` can be applied node by node: as many ops, each of the
    /// same kind and shape (a kernel of the same function and PDL, a
    /// memset of the same size), and no foreign section (child graphs are
    /// updated through `cuGraphExecUpdate`).
    pub(crate) fn accepts(&self, new: &Ops) -> bool {
        self.nodes.len() == self.ops.len()
            && self.ops.len() == new.len()
            && self.ops.deps == new.deps
            && self.ops.list.iter().zip(&new.list).all(|(a, b)| a.same_shape(b))
    }

    /// Whether a graph built from `new` may go to `cuGraphExecUpdate`
    /// against this executable without being refused (a refusal is an API
    /// error to compute-sanitizer): as many ops, each a kernel where a
    /// kernel was (of any function) with the same PDL setting, so the same
    /// edges and edge types, a memset of the same shape where a memset was,
    /// a foreign section of as many nodes where one was.
    pub(crate) fn may_update_whole(&self, new: &Ops) -> bool {
        let pdl = |o: &Op| match o {
            Op::Binary(l) => Some(l.pdl),
            Op::Kernel(k) => Some(k.spec.pdl),
            _ => None,
        };
        self.nodes.len() == self.ops.len()
            && self.ops.len() == new.len()
            && self.ops.deps == new.deps
            && self.ops.list.iter().zip(&new.list).all(|(a, b)| match (a, b) {
                (Op::Memset(x), Op::Memset(y)) => x.same_shape(y),
                (Op::Child { nodes: x, .. }, Op::Child { nodes: y, .. }) => x == y,
                _ => pdl(a).is_some() && pdl(a) == pdl(b),
            })
    }

    /// Applies `new` (which [`BuiltNodes::accepts`]) to `exec`, node by
    /// node: only changed nodes make a driver call. Returns the calls made.
    /// On error the nodes set so far keep their new parameters (and are
    /// known to), the rest their old ones.
    pub(crate) fn update(&mut self, ctx: RawCtx, exec: CUgraphExec, new: Ops) -> Result<usize> {
        let raw_ctx = ctx.raw;
        let mut calls = 0usize;
        let changed = self.ops.list.iter().zip(&new.list).any(|(a, b)| !same_params(a, b));
        if !changed {
            self.ops = new;
            return Ok(0);
        }
        let (nodes, ops) = (&self.nodes, &mut self.ops.list);
        bound(ctx, |d| {
            for ((old, new), &node) in ops.iter_mut().zip(new.list).zip(nodes) {
                match (&*old, &new) {
                    (Op::Binary(a), Op::Binary(b)) if a != b => {
                        if a.pdl != b.pdl {
                            return Err(pdl_change());
                        }
                        // SAFETY: our live executable (its owner holds it
                        // mutably), bound here; `node` a kernel node of its
                        // source; the launch was checked when recorded.
                        b.with_params(|p| unsafe { set_kernel_node_params(d, exec, node, p) })?;
                        calls += 1;
                    }
                    (Op::Kernel(a), Op::Kernel(b)) => {
                        let (a, b) = (&a.spec, &b.spec);
                        // SAFETY: our live executable (its owner holds it
                        // mutably), bound here; `node` a kernel node of its
                        // source; the launch was checked when recorded.
                        let called = unsafe { update_kernel_node(d, exec, node, a, b) }?;
                        calls += usize::from(called);
                    }
                    (Op::Memset(a), Op::Memset(b)) if a != b => {
                        // SAFETY: as above, for a memset node of this context.
                        unsafe { update_memset_node(d, exec, node, b, raw_ctx) }?;
                        calls += 1;
                    }
                    _ => {}
                }
                *old = new;
            }
            Ok(())
        })?;
        Ok(calls)
    }

    /// Takes the ops of a whole-graph update (`cuGraphExecUpdate`), which
    /// keeps the executable's nodes: same count and order, new parameters.
    pub(crate) fn replace_ops(&mut self, new: Ops) {
        self.ops = new;
    }
}

/// Whether two ops of the same shape have equal parameters.
fn same_params(a: &Op, b: &Op) -> bool {
    match (a, b) {
        (Op::Binary(x), Op::Binary(y)) => x == y,
        (Op::Kernel(x), Op::Kernel(y)) => x.spec == y.spec,
        (Op::Memset(x), Op::Memset(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch_config::LaunchConfig;

    fn kernel(func: usize, a: u64, pdl: bool) -> Op {
        let cfg = LaunchConfig { grid: (4, 1, 1), block: (256, 1, 1), shared_mem_bytes: 0 };
        let func = std::ptr::null_mut::<u8>().wrapping_add(func).cast();
        Op::Binary(WordLaunch { func, cfg, words: [a, 2, 3, 1024], pdl })
    }

    /// `ops` as one chain: each depends on the one before.
    fn chain(list: Vec<Op>) -> Ops {
        let deps =
            (0..list.len() as u32).map(|i| if i == 0 { Deps::new() } else { smallvec::smallvec![i - 1] }).collect();
        Ops { list, deps }
    }

    fn memset(dst: u64, count: usize) -> Op {
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
        sink.pause();
        assert!(!sink.is_active() && sink.in_foreign());
        assert!(!sink.push(memset(0x20, 4), 0), "paused: eager");
        assert!(sink.push_paused(memset(0x30, 4)), "a foreign section's end still records");
        sink.resume();
        assert!(!sink.in_foreign());
        assert!(sink.push(memset(0x40, 4), 0));
        let ops = sink.close().expect("open");
        assert_eq!(ops.deps.iter().map(|d| d.to_vec()).collect::<Vec<_>>(), vec![vec![], vec![0], vec![1]]);
        let dsts: Vec<u64> = ops
            .list
            .iter()
            .map(|o| match o {
                Op::Memset(m) => m.dst,
                _ => 0,
            })
            .collect();
        assert_eq!(dsts, [0x10, 0x30, 0x40]);
        assert!(!sink.is_active());
        sink.resume();
        assert!(!sink.is_active(), "resume after close does not reopen");
        assert!(!sink.push_paused(memset(0x50, 4)));
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
        let deps: Vec<Vec<u32>> = ops.deps.iter().map(|d| d.to_vec()).collect();
        assert_eq!(deps, vec![vec![], vec![0], vec![0], vec![1], vec![0, 3, 2], vec![]]);
        assert!(!sink.wait(0, 1), "closed: waits are eager");
        sink.open();
        assert!(sink.push(memset(0x40, 4), 1));
        assert_eq!(sink.close().expect("open").deps[0].len(), 0, "after a segment ends, lanes start anew");
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
    fn node_updates_need_the_same_shape() {
        let mut lanes = chain(vec![kernel(1, 0, true), memset(8, 16), kernel(2, 0, false)]);
        lanes.deps[2] = smallvec::smallvec![0];
        let old = BuiltNodes::new(
            vec![std::ptr::null_mut(); 3],
            chain(vec![kernel(1, 0, true), memset(8, 16), kernel(2, 0, false)]),
        );
        assert!(old.accepts(&chain(vec![kernel(1, 99, true), memset(64, 16), kernel(2, 5, false)])), "new arguments");
        assert!(!old.accepts(&chain(vec![kernel(1, 0, true), memset(8, 16)])), "fewer ops");
        assert!(!old.accepts(&chain(vec![kernel(1, 0, false), memset(8, 16), kernel(2, 0, false)])), "PDL changed");
        assert!(!old.accepts(&chain(vec![kernel(3, 0, true), memset(8, 16), kernel(2, 0, false)])), "another function");
        assert!(
            !old.accepts(&chain(vec![kernel(1, 0, true), memset(8, 17), kernel(2, 0, false)])),
            "another memset size"
        );
        let child = || Op::Child { graph: None, nodes: 3 };
        assert!(!old.accepts(&chain(vec![kernel(1, 0, true), child(), kernel(2, 0, false)])), "a foreign section");
        assert!(
            old.may_update_whole(&chain(vec![kernel(7, 9, true), memset(64, 16), kernel(8, 5, false)])),
            "other functions"
        );
        assert!(
            !old.may_update_whole(&chain(vec![kernel(1, 0, false), memset(8, 16), kernel(2, 0, false)])),
            "PDL: edge kinds"
        );
        assert!(
            !old.may_update_whole(&chain(vec![kernel(1, 0, true), memset(8, 17), kernel(2, 0, false)])),
            "memset size"
        );
        assert!(
            !old.may_update_whole(&chain(vec![kernel(1, 0, true), child(), kernel(2, 0, false)])),
            "a child for a memset"
        );
        let with_child = BuiltNodes::new(vec![std::ptr::null_mut(); 2], chain(vec![kernel(1, 0, true), child()]));
        assert!(with_child.may_update_whole(&chain(vec![kernel(1, 4, true), Op::Child { graph: None, nodes: 3 }])));
        assert!(!with_child.may_update_whole(&chain(vec![kernel(1, 4, true), Op::Child { graph: None, nodes: 4 }])));
        assert!(!with_child.accepts(&chain(vec![kernel(1, 4, true), child()])), "children update as a whole graph");
        assert!(same_params(&kernel(1, 7, true), &kernel(1, 7, true)));
        assert!(!same_params(&kernel(1, 7, true), &kernel(1, 8, true)));
        assert!(!same_params(&memset(8, 16), &memset(9, 16)));
        let old2 = BuiltNodes::new(
            vec![std::ptr::null_mut(); 3],
            chain(vec![kernel(1, 0, true), memset(8, 16), kernel(2, 0, false)]),
        );
        assert!(!old2.accepts(&lanes) && !old2.may_update_whole(&lanes), "other dependencies (lanes)");
    }
}
