//! A recorded segment built into a graph, and the updates of its nodes.
//!
//! - [`materialize`]: a segment's [`Ops`] as a `CUgraph`, in order: each op
//!   after the ops it depends on (a chain: the stream order the eager calls
//!   would have), with a programmatic edge where the op launches with PDL
//!   after a kernel on a CUDA 12.3+ driver (see
//!   [`crate::nodes::programmatic_edge`]), given to the driver in batches
//!   ([`crate::nodes::EDGE_BATCH`]); a conditional op becomes its setter
//!   kernel, the conditional node and its bodies' nodes.
//! - [`NodeSet`]: the nodes the ops became, conditional bodies included.
//! - [`BuiltNodes`]: what an executable made from ops keeps, so that a
//!   re-recording of the same shape is applied node by node
//!   ([`BuiltNodes::fit`], [`BuiltNodes::update`]), inside conditional
//!   bodies too: unchanged nodes make no driver call.

use cuda_sys::*;

use crate::driver::{bound, RawCtx};
use crate::error::Result;
use crate::nodes::{
    add_child_node, add_conditional_node, add_kernel_node, add_kernel_node_params, add_memset_node,
    create_conditional_handle, pdl_change, programmatic_edge, set_kernel_node_params, update_child_node,
    update_kernel_node, update_memset_node, LaunchSpec, PendingEdges,
};
use crate::segment::{same_params, CondKind, CondOp, Op, Ops};

#[cfg(doc)]
use crate::nodes::ChildShape;

/// A graph built from ops, and the nodes the ops became.
pub(crate) struct Built {
    pub(crate) graph: CUgraph,
    pub(crate) nodes: NodeSet,
}

/// The nodes ops became in one graph (a segment's, or a conditional node's
/// body): the node of each op (a conditional op's is the conditional node),
/// and what each conditional op became besides, in the order of the ops.
#[derive(Default)]
pub(crate) struct NodeSet {
    nodes: Vec<CUgraphNode>,
    conds: Vec<CondNodes>,
    /// Whether a foreign section's child node is among them (in a
    /// conditional's body too).
    children: bool,
}

impl NodeSet {
    /// The nodes `ops` became: `nodes` one per op, `conds` one per
    /// conditional op, in order.
    fn new(nodes: Vec<CUgraphNode>, conds: Vec<CondNodes>, ops: &[Op]) -> NodeSet {
        let children = ops.iter().any(|op| matches!(op, Op::Child { .. }))
            || conds.iter().any(|c| c.bodies.iter().any(|b| b.children));
        NodeSet { nodes, conds, children }
    }

    /// Nodes for ops without conditionals (an executable whose nodes are
    /// not known: an empty set).
    #[cfg(test)]
    pub(crate) fn of(nodes: Vec<CUgraphNode>) -> NodeSet {
        NodeSet { nodes, conds: Vec::new(), children: false }
    }

    /// Null nodes shaped as `ops` would make them (conditionals with
    /// their setters and bodies), for tests that apply no update.
    #[cfg(test)]
    pub(crate) fn shaped_as(ops: &Ops) -> NodeSet {
        let conds: Vec<CondNodes> = ops
            .list
            .iter()
            .filter_map(|op| match op {
                Op::Cond(c) => Some(CondNodes {
                    handle: 0,
                    counter: c.counter_addr(),
                    setter: std::ptr::null_mut(),
                    setter_src: c.src,
                    end_setter: matches!(c.kind, CondKind::While | CondKind::Repeat).then(std::ptr::null_mut),
                    end_src: (c.kind == CondKind::While).then_some(c.src),
                    bodies: c.bodies.iter().map(NodeSet::shaped_as).collect(),
                }),
                _ => None,
            })
            .collect();
        NodeSet::new(vec![std::ptr::null_mut(); ops.len()], conds, &ops.list)
    }

    /// How many ops the set has nodes for.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }
}

/// What a conditional op became besides its conditional node: the setter
/// kernel before it and, in a loop, the one that ends its body; the
/// condition source each was last given (a REPEAT's countdown reads only
/// the counter, which never changes: `None`); the condition's handle and
/// the REPEAT's counter they read; and each body's nodes.
struct CondNodes {
    handle: u64,
    counter: u64,
    setter: CUgraphNode,
    setter_src: u64,
    end_setter: Option<CUgraphNode>,
    end_src: Option<u64>,
    bodies: Vec<NodeSet>,
}

impl CondNodes {
    /// The setter's launch with the condition read from `src`.
    fn setter(&self, c: &CondOp, src: u64) -> SetterLaunch {
        match c.kind {
            CondKind::Repeat => SetterLaunch::new(c.kernels.load, &[self.handle, self.counter, src]),
            _ => SetterLaunch::new(c.kernels.set, &[self.handle, src]),
        }
    }

    /// The launch that ends a loop's body (`None` for IF and SWITCH).
    fn end_setter(&self, c: &CondOp, src: u64) -> Option<SetterLaunch> {
        match c.kind {
            CondKind::Repeat => Some(SetterLaunch::new(c.kernels.countdown, &[self.handle, self.counter])),
            CondKind::While => Some(SetterLaunch::new(c.kernels.set, &[self.handle, src])),
            _ => None,
        }
    }

    /// Whether the setters hold another source than `src`.
    fn src_differs(&self, src: u64) -> bool {
        self.setter_src != src || self.end_src.is_some_and(|s| s != src)
    }
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
        // Flags must be 0.
        let graph = cuda_sys::result::graph::create(d, 0)?;
        // SAFETY: our live graph, bound here.
        match unsafe { add_ops(d, graph, ops, raw_ctx, programmatic) } {
            Ok(nodes) => Ok(Built { graph, nodes }),
            Err(e) => {
                // SAFETY: the graph made above, destroyed once.
                let _ = unsafe { cuda_sys::result::graph::destroy(d, graph) };
                Err(e)
            }
        }
    })
}

/// Adds `ops` to `graph` (see [`materialize`]); the node of each op.
///
/// # Safety
/// `graph` is a live graph of the context `raw_ctx`, current on this
/// thread (a recording's graph or a conditional node's body).
unsafe fn add_ops(
    d: &DriverFns,
    graph: CUgraph,
    ops: &mut Ops,
    raw_ctx: CUcontext,
    programmatic: bool,
) -> Result<NodeSet> {
    let n = ops.len();
    let mut nodes: Vec<CUgraphNode> = Vec::with_capacity(n);
    let mut conds = Vec::new();
    let mut edges = PendingEdges::with_capacity(if programmatic { n } else { 0 });
    let mut dep_nodes: Vec<CUgraphNode> = Vec::with_capacity(4);
    let mut kernel_flags: Vec<bool> = Vec::with_capacity(n);
    let (list, deps_of) = ops.list_and_deps();
    for (at, op) in list.iter_mut().enumerate() {
        let deps = deps_of(at);
        dep_nodes.clear();
        for &i in &deps {
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
                // SAFETY: the caller's live graph, bound; `full` its nodes;
                // the launch was checked when recorded.
                unsafe { add_kernel_node_params(d, graph, full, p) }
            })?,
            // SAFETY: as above.
            Op::Kernel(k) => unsafe { add_kernel_node(d, graph, full, &k.spec) }?,
            // SAFETY: the caller's live graph and its nodes; the range lies
            // inside memory of this context (checked when recorded).
            Op::Memset(m) => unsafe { add_memset_node(d, graph, full, m, raw_ctx) }?,
            Op::Child { graph: child, .. } => {
                let Some(c) = child.as_ref() else {
                    return Err(crate::error::Error::invalid("a recorded foreign section was built already"));
                };
                // SAFETY: two live graphs of this context; the child is
                // copied.
                let node = unsafe { add_child_node(d, graph, full, c.raw()) }?;
                *child = None;
                node
            }
            Op::Cond(c) => {
                // SAFETY: the caller's live graph and its nodes.
                let (node, made) = unsafe { add_conditional(d, graph, full, c, raw_ctx, programmatic) }?;
                conds.push(made);
                node
            }
        };
        if let (Some(e), Some(&from)) = (edge, dep_nodes.first()) {
            if edges.push(from, node, e) {
                // SAFETY: the caller's live graph and its nodes.
                unsafe { edges.flush(d, graph) }?;
            }
        }
        nodes.push(node);
        kernel_flags.push(op.is_kernel());
    }
    // SAFETY: as above.
    unsafe { edges.flush(d, graph) }?;
    Ok(NodeSet::new(nodes, conds, list))
}

/// Adds a recorded conditional node after `deps`: the setter kernel, then
/// the node (on the setter), then each body into the graphs the driver made
/// for it, a loop's body ending with its setter. Returns the conditional
/// node and what else the op became.
///
/// # Safety
/// As [`add_ops`]; `deps` are nodes of `graph`.
unsafe fn add_conditional(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    c: &mut CondOp,
    raw_ctx: CUcontext,
    programmatic: bool,
) -> Result<(CUgraphNode, CondNodes)> {
    // SAFETY: the caller's promise.
    let handle = unsafe { create_conditional_handle(d, graph, raw_ctx) }?;
    let mut made = CondNodes {
        handle,
        counter: c.counter_addr(),
        setter: std::ptr::null_mut(),
        setter_src: c.src,
        end_setter: None,
        end_src: None,
        bodies: Vec::with_capacity(c.bodies.len()),
    };
    let setter = made.setter(c, c.src);
    // SAFETY: the caller's live graph and nodes; a setter of this context
    // with (u64 handle, u64 pointer...) arguments as its PTX declares.
    made.setter = setter.spec.with_params(|p| unsafe { add_kernel_node_params(d, graph, deps, p) })?;
    let (type_, size) = match c.kind {
        CondKind::While | CondKind::Repeat => (CU_GRAPH_COND_TYPE_WHILE, 1),
        CondKind::If => (CU_GRAPH_COND_TYPE_IF, c.bodies.len().clamp(1, 2) as u32),
        CondKind::Switch => (CU_GRAPH_COND_TYPE_SWITCH, c.bodies.len().max(1) as u32),
    };
    // SAFETY: the caller's promise; the parameters name this context and
    // a handle of this graph.
    let (node, bodies) = unsafe { add_conditional_node(d, graph, made.setter, handle, type_, size, raw_ctx) }?;
    let end_setter = made.end_setter(c, c.src);
    for (body_ops, &body) in c.bodies.iter_mut().zip(&bodies) {
        // SAFETY: a body graph the driver made for the node, of this context.
        let body_nodes = unsafe { add_ops(d, body, body_ops, raw_ctx, programmatic) }?;
        if let Some(s) = &end_setter {
            let leaves = leaves(body_ops, &body_nodes.nodes);
            // SAFETY: the body graph and its nodes; a setter as above.
            let end = s.spec.with_params(|p| unsafe { add_kernel_node_params(d, body, &leaves, p) })?;
            made.end_setter = Some(end);
            made.end_src = (c.kind == CondKind::While).then_some(c.src);
        }
        made.bodies.push(body_nodes);
    }
    Ok((node, made))
}

/// The nodes of `ops` no other op depends on (where a body ends).
fn leaves(ops: &Ops, nodes: &[CUgraphNode]) -> Vec<CUgraphNode> {
    let mut used = vec![false; ops.len()];
    for at in 0..ops.len() {
        for &i in &ops.deps_of(at) {
            if let Some(u) = used.get_mut(i as usize) {
                *u = true;
            }
        }
    }
    nodes.iter().zip(used).filter(|(_, u)| !u).map(|(&n, _)| n).collect()
}

/// A setter kernel's launch: one thread, its arguments as words.
struct SetterLaunch {
    spec: LaunchSpec,
}

impl SetterLaunch {
    fn new(func: CUfunction, words: &[u64]) -> SetterLaunch {
        let cfg = crate::launch_config::LaunchConfig { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
        SetterLaunch { spec: LaunchSpec::of_words(func, cfg, words, false) }
    }
}

/// Whether op `i` (already added) is a kernel.
fn ops_is_kernel_at(kernel_flags: &[bool], i: usize) -> bool {
    kernel_flags.get(i).copied().unwrap_or(false)
}

/// How a re-recorded segment fits an executable built from ops
/// ([`BuiltNodes::fit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Not node by node (another count, shape or dependencies).
    No,
    /// Node by node, and every parameter is equal: nothing to do.
    Same,
    /// Node by node, with changed parameters.
    Changed,
}

/// What an executable graph built from ops keeps: the node of each op in
/// its source graph and the parameters it was last given. The ops also
/// keep user kernels' modules loaded while the graph lives.
pub(crate) struct BuiltNodes {
    nodes: NodeSet,
    ops: Ops,
}

// SAFETY: node handles are driver handles; see `Op`.
unsafe impl Send for BuiltNodes {}
// SAFETY: never mutated through a shared reference.
unsafe impl Sync for BuiltNodes {}

impl BuiltNodes {
    pub(crate) fn new(nodes: NodeSet, ops: Ops) -> BuiltNodes {
        BuiltNodes { nodes, ops }
    }

    /// Whether `new` can be applied node by node: as many ops, with the
    /// same dependencies, each of the same kind and shape (a kernel of the
    /// same function and PDL, a memset of the same size, a foreign section
    /// whose graph has the same [`ChildShape`] as the one it replaces, a
    /// conditional whose bodies fit in turn).
    #[cfg(test)]
    pub(crate) fn accepts(&self, new: &Ops) -> bool {
        self.fit(new) != Fit::No
    }

    /// How `new` fits the ops this executable was made from, in one pass:
    /// [`Fit::No`] unless it can be applied node by node (see
    /// [`BuiltNodes::accepts`]), else whether any parameter changed.
    pub(crate) fn fit(&self, new: &Ops) -> Fit {
        fit_ops(&self.nodes, &self.ops, new)
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
            && self.ops.same_deps(new)
            && self.ops.list.iter().zip(&new.list).all(|(a, b)| match (a, b) {
                (Op::Memset(x), Op::Memset(y)) => x.same_shape(y),
                (Op::Child { nodes: x, .. }, Op::Child { nodes: y, .. }) => x == y,
                _ => pdl(a).is_some() && pdl(a) == pdl(b),
            })
    }

    /// The first step of applying `new`, whose [`BuiltNodes::fit`] is
    /// [`Fit::Changed`]: each foreign section's work goes to its child node
    /// (`cuGraphExecChildGraphNodeSetParams`), before any other node is
    /// set, so that a refusal (a child whose shape matched but whose nodes
    /// the driver cannot update in place, a memset of another size, say)
    /// leaves `new` whole for an update through the whole graph, which
    /// replaces the work of every node, or a new instantiation. Returns the
    /// calls made (none where no foreign section was recorded).
    pub(crate) fn update_children(&self, ctx: RawCtx, exec: CUgraphExec, new: &Ops) -> Result<usize> {
        if !self.nodes.children {
            return Ok(0);
        }
        let mut calls = 0usize;
        bound(ctx, |d| {
            // SAFETY: our live executable (its owner holds it mutably),
            // bound here; `self.nodes` the nodes of its source graph that
            // `new` fits.
            unsafe { update_children_of(d, exec, &self.nodes, new, &mut calls) }
        })?;
        Ok(calls)
    }

    /// Applies `new`, whose [`BuiltNodes::fit`] is `fit` (not
    /// [`Fit::No`]), to `exec`, node by node, conditional bodies included:
    /// only changed nodes make a driver call, and [`Fit::Same`] none at
    /// all. Returns the calls made. On error the nodes set so far keep
    /// their new parameters (and are known to), the rest their old ones.
    pub(crate) fn update(&mut self, ctx: RawCtx, exec: CUgraphExec, new: &mut Ops, fit: Fit) -> Result<usize> {
        match fit {
            // The old ops stay: equal, and a conditional's counter is the
            // one the executable reads.
            Fit::Same => return Ok(0),
            Fit::No => return Err(crate::error::Error::invalid("the re-recording has another shape")),
            Fit::Changed => {}
        }
        let mut calls = 0usize;
        let (set, ops) = (&mut self.nodes, &mut self.ops);
        bound(ctx, |d| {
            // SAFETY: our live executable (its owner holds it mutably),
            // bound here; `set` the nodes of its source graph that `ops`
            // became; `new` fits them.
            unsafe { update_ops(d, exec, set, ops, new, ctx.raw, &mut calls) }
        })?;
        Ok(calls)
    }

    /// Takes the ops of a whole-graph update (`cuGraphExecUpdate`), which
    /// keeps the executable's nodes: same count and order, new parameters;
    /// returns the old ones' list.
    pub(crate) fn replace_ops(&mut self, new: Ops) -> Vec<Op> {
        std::mem::replace(&mut self.ops, new).list
    }

    /// The op list, given up (when the executable goes).
    pub(crate) fn into_list(self) -> Vec<Op> {
        self.ops.list
    }
}

/// How `new` fits `old`, whose ops became `set` (see [`BuiltNodes::fit`]):
/// as many ops with the same dependencies, each of the same shape; a
/// conditional of the same kind whose bodies fit in turn (its condition's
/// source may change: its setters are kernels).
fn fit_ops(set: &NodeSet, old: &Ops, new: &Ops) -> Fit {
    if set.nodes.len() != old.len() || old.len() != new.len() || !old.same_deps(new) {
        return Fit::No;
    }
    let mut changed = false;
    let mut conds = set.conds.iter();
    for (a, b) in old.list.iter().zip(&new.list) {
        if let (Op::Child { shape: x, .. }, Op::Child { shape: y, .. }) = (a, b) {
            // A child node's work is replaced from the new graph when the
            // two have one shape (its parameters are not compared: one
            // call either way).
            match (x, y) {
                (Some(x), Some(y)) if x == y => changed = true,
                _ => return Fit::No,
            }
            continue;
        }
        if let (Op::Cond(x), Op::Cond(y)) = (a, b) {
            let Some(made) = conds.next() else { return Fit::No };
            if x.kind != y.kind || x.bodies.len() != y.bodies.len() || made.bodies.len() != x.bodies.len() {
                return Fit::No;
            }
            changed |= made.src_differs(y.src);
            for ((xb, yb), nb) in x.bodies.iter().zip(&y.bodies).zip(&made.bodies) {
                match fit_ops(nb, xb, yb) {
                    Fit::No => return Fit::No,
                    Fit::Changed => changed = true,
                    Fit::Same => {}
                }
            }
            continue;
        }
        if !a.same_shape(b) {
            return Fit::No;
        }
        changed = changed || !same_params(a, b);
    }
    if changed {
        Fit::Changed
    } else {
        Fit::Same
    }
}

/// Applies `new` (which fits `old`, see [`fit_ops`]) to the nodes `set` of
/// `exec`'s source graph: a driver call per changed node, counted in
/// `calls`; each op set is replaced by its new one (a conditional keeps its
/// counter, which its setters read; a setter's new source is noted once
/// set; a foreign section's work went to its child node before, through
/// [`BuiltNodes::update_children`]).
///
/// # Safety
/// `exec` is a live executable graph of the context `raw_ctx`, current on
/// this thread, not used by another thread during the call, and `set` are
/// the nodes `old` became in its source graph.
unsafe fn update_ops(
    d: &DriverFns,
    exec: CUgraphExec,
    set: &mut NodeSet,
    old: &mut Ops,
    new: &mut Ops,
    raw_ctx: CUcontext,
    calls: &mut usize,
) -> Result<()> {
    let mut conds = set.conds.iter_mut();
    for ((old, new), &node) in old.list.iter_mut().zip(new.list.drain(..)).zip(&set.nodes) {
        match (old, new) {
            // Its work went to the executable first
            // ([`BuiltNodes::update_children`]); the new graph goes.
            (old @ Op::Child { .. }, Op::Child { nodes, shape, .. }) => *old = Op::Child { graph: None, nodes, shape },
            (Op::Binary(a), Op::Binary(b)) => {
                if *a == b {
                    continue;
                }
                if a.pdl != b.pdl {
                    return Err(pdl_change());
                }
                // SAFETY: the caller's executable; `node` a kernel node of
                // its source; the launch was checked when recorded.
                b.with_params(|p| unsafe { set_kernel_node_params(d, exec, node, p) })?;
                *calls += 1;
                *a = b;
            }
            (Op::Kernel(a), Op::Kernel(b)) => {
                // SAFETY: as above.
                let called = unsafe { update_kernel_node(d, exec, node, &a.spec, &b.spec) }?;
                *calls += usize::from(called);
                *a = b;
            }
            (Op::Memset(a), Op::Memset(b)) => {
                if *a == b {
                    continue;
                }
                // SAFETY: as above, for a memset node of this context.
                unsafe { update_memset_node(d, exec, node, &b, raw_ctx) }?;
                *calls += 1;
                *a = b;
            }
            (Op::Cond(a), Op::Cond(mut b)) => {
                let Some(made) = conds.next() else {
                    return Err(crate::error::Error::invalid("a conditional op without its nodes"));
                };
                // SAFETY: as above; `made` what `a` became.
                unsafe { update_cond(d, exec, made, a, &mut b, raw_ctx, calls) }?;
            }
            (old, new) => *old = new,
        }
    }
    Ok(())
}

/// [`BuiltNodes::update_children`] for the nodes `set` of `exec`'s source
/// graph that `new` fits, conditional bodies included; counts the calls.
///
/// # Safety
/// As [`update_ops`].
unsafe fn update_children_of(
    d: &DriverFns,
    exec: CUgraphExec,
    set: &NodeSet,
    new: &Ops,
    calls: &mut usize,
) -> Result<()> {
    let mut conds = set.conds.iter();
    for (op, &node) in new.list.iter().zip(&set.nodes) {
        match op {
            Op::Child { graph: Some(child), .. } => {
                // SAFETY: the caller's executable; `node` the child graph
                // node the old op became; the new graph has its shape
                // (`fit_ops`).
                unsafe { update_child_node(d, exec, node, child.raw()) }?;
                *calls += 1;
            }
            Op::Child { graph: None, .. } => {
                return Err(crate::error::Error::invalid("a re-recorded foreign section without its graph"));
            }
            Op::Cond(c) => {
                let Some(made) = conds.next() else {
                    return Err(crate::error::Error::invalid("a conditional op without its nodes"));
                };
                for (body, nodes) in c.bodies.iter().zip(&made.bodies) {
                    // SAFETY: as above, for a body's nodes.
                    unsafe { update_children_of(d, exec, nodes, body, calls) }?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// [`update_ops`] for one conditional op `a` that became `made`, re-recorded
/// as `b`: its setters where the condition's source changed, then its
/// bodies.
///
/// # Safety
/// As [`update_ops`].
unsafe fn update_cond(
    d: &DriverFns,
    exec: CUgraphExec,
    made: &mut CondNodes,
    a: &mut CondOp,
    b: &mut CondOp,
    raw_ctx: CUcontext,
    calls: &mut usize,
) -> Result<()> {
    if made.setter_src != b.src {
        let s = made.setter(a, b.src);
        // SAFETY: the caller's executable; the setter kernel node before
        // the conditional node; a setter launch as built.
        s.spec.with_params(|p| unsafe { set_kernel_node_params(d, exec, made.setter, p) })?;
        *calls += 1;
        made.setter_src = b.src;
    }
    if let (Some(node), Some(src)) = (made.end_setter, made.end_src) {
        if src != b.src {
            if let Some(s) = made.end_setter(a, b.src) {
                // SAFETY: as above, for the setter that ends the loop's body.
                s.spec.with_params(|p| unsafe { set_kernel_node_params(d, exec, node, p) })?;
                *calls += 1;
            }
            made.end_src = Some(b.src);
        }
    }
    a.src = b.src;
    for ((ab, bb), nb) in a.bodies.iter_mut().zip(b.bodies.iter_mut()).zip(made.bodies.iter_mut()) {
        // SAFETY: as above; `nb` the nodes `ab` became in the body's graph.
        unsafe { update_ops(d, exec, nb, ab, bb, raw_ctx, calls) }?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::ChildShape;
    use crate::segment::tests::{chain, cond, kernel, memset};
    use crate::segment::Deps;

    #[test]
    fn foreign_sections_of_one_shape_update_in_place() {
        let shape = |types: Vec<u32>, edges| Some(Box::new(ChildShape::of(types, edges)));
        let memset_then_kernel =
            || shape(vec![CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL], vec![(0, 1, 0, 0, 0)]);
        let child = |shape| Op::Child { graph: None, nodes: 2, shape };
        let ops = chain(vec![kernel(1, 0, true), child(memset_then_kernel()), kernel(2, 0, false)]);
        let old = BuiltNodes::new(NodeSet::shaped_as(&ops), ops);
        let again = |c| chain(vec![kernel(1, 0, true), c, kernel(2, 0, false)]);
        assert_eq!(old.fit(&again(child(memset_then_kernel()))), Fit::Changed, "one call for the child node");
        let reordered = shape(vec![CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMSET], vec![(0, 1, 0, 0, 0)]);
        assert_eq!(old.fit(&again(child(reordered))), Fit::No, "another insertion order");
        let unjoined = shape(vec![CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL], vec![]);
        assert_eq!(old.fit(&again(child(unjoined))), Fit::No, "other edges");
        let programmatic = shape(vec![CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL], vec![(0, 1, 1, 0, 1)]);
        assert_eq!(old.fit(&again(child(programmatic))), Fit::No, "another edge type");
        assert_eq!(old.fit(&again(child(None))), Fit::No, "a shape that could not be read");
        let unknown = chain(vec![kernel(1, 0, true), child(None), kernel(2, 0, false)]);
        let old_unknown = BuiltNodes::new(NodeSet::shaped_as(&unknown), unknown);
        assert_eq!(old_unknown.fit(&again(child(memset_then_kernel()))), Fit::No, "the old shape unknown");
    }

    #[test]
    fn fit_compares_shape_and_parameters_in_one_pass_across_both_forms() {
        let ops = || vec![kernel(1, 0, true), memset(8, 16), kernel(2, 0, false)];
        let old = BuiltNodes::new(NodeSet::of(vec![std::ptr::null_mut(); 3]), chain(ops()));
        assert_eq!(old.fit(&Ops::chain(ops())), Fit::Same, "an implicit chain equals the explicit one");
        assert_eq!(old.fit(&chain(ops())), Fit::Same);
        let changed = vec![kernel(1, 5, true), memset(8, 16), kernel(2, 0, false)];
        assert_eq!(old.fit(&Ops::chain(changed)), Fit::Changed);
        let reshaped = vec![kernel(1, 5, true), memset(8, 17), kernel(2, 0, false)];
        assert_eq!(old.fit(&Ops::chain(reshaped)), Fit::No, "a changed shape after a changed parameter");
        let forked = Ops::with_deps(ops(), vec![Deps::new(), smallvec::smallvec![0], smallvec::smallvec![0]]);
        assert_eq!(old.fit(&forked), Fit::No, "other dependencies");
        let implicit = BuiltNodes::new(NodeSet::of(vec![std::ptr::null_mut(); 3]), Ops::chain(ops()));
        assert_eq!(implicit.fit(&forked), Fit::No);
        assert_eq!(implicit.fit(&chain(ops())), Fit::Same);
        assert_eq!(implicit.fit(&Ops::chain(vec![kernel(1, 0, true), memset(8, 16)])), Fit::No, "fewer ops");
    }

    #[test]
    fn conditionals_update_in_place_bodies_and_sources_included() {
        let body = |a: u64| {
            let mut c = cond(CondKind::Repeat, 5);
            c.bodies.push(chain(vec![memset(a, 4), kernel(1, a, false)]));
            Op::Cond(c)
        };
        let ops = chain(vec![kernel(1, 0, true), body(8)]);
        let old = BuiltNodes::new(NodeSet::shaped_as(&ops), ops);
        assert_eq!(old.fit(&chain(vec![kernel(1, 3, true), body(8)])), Fit::Changed, "same conditional");
        assert_eq!(old.fit(&chain(vec![kernel(1, 0, true), body(8)])), Fit::Same, "nothing changed");
        assert_eq!(old.fit(&chain(vec![kernel(1, 0, true), body(9)])), Fit::Changed, "its body's nodes changed");
        let mut src = cond(CondKind::Repeat, 6);
        src.bodies.push(chain(vec![memset(8, 4), kernel(1, 8, false)]));
        assert_eq!(old.fit(&chain(vec![kernel(1, 0, true), Op::Cond(src)])), Fit::Changed, "its source changed");
        assert!(!old.may_update_whole(&chain(vec![kernel(1, 0, true), body(9)])), "no whole-graph update");
        let mut other = cond(CondKind::While, 5);
        other.bodies.push(chain(vec![memset(8, 4), kernel(1, 8, false)]));
        assert!(!old.accepts(&chain(vec![kernel(1, 0, true), Op::Cond(other)])), "another kind");
        let mut longer = cond(CondKind::Repeat, 5);
        longer.bodies.push(chain(vec![memset(8, 4), kernel(1, 8, false), kernel(1, 8, false)]));
        assert!(!old.accepts(&chain(vec![kernel(1, 0, true), Op::Cond(longer)])), "a longer body");
        let mut reshaped = cond(CondKind::Repeat, 5);
        reshaped.bodies.push(chain(vec![memset(8, 8), kernel(1, 8, false)]));
        assert!(!old.accepts(&chain(vec![kernel(1, 0, true), Op::Cond(reshaped)])), "a memset of another size");
        let unknown =
            BuiltNodes::new(NodeSet::of(vec![std::ptr::null_mut(); 2]), chain(vec![kernel(1, 0, true), body(8)]));
        assert!(!unknown.accepts(&chain(vec![kernel(1, 0, true), body(8)])), "no conditional's nodes known");
    }

    #[test]
    fn node_updates_need_the_same_shape() {
        let lanes = Ops::with_deps(
            vec![kernel(1, 0, true), memset(8, 16), kernel(2, 0, false)],
            vec![Deps::new(), smallvec::smallvec![0], smallvec::smallvec![0]],
        );
        let old = BuiltNodes::new(
            NodeSet::of(vec![std::ptr::null_mut(); 3]),
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
        let child = || Op::Child { graph: None, nodes: 3, shape: None };
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
        let with_child =
            BuiltNodes::new(NodeSet::of(vec![std::ptr::null_mut(); 2]), chain(vec![kernel(1, 0, true), child()]));
        let sized = |nodes| Op::Child { graph: None, nodes, shape: None };
        assert!(with_child.may_update_whole(&chain(vec![kernel(1, 4, true), sized(3)])));
        assert!(!with_child.may_update_whole(&chain(vec![kernel(1, 4, true), sized(4)])));
        assert!(
            !with_child.accepts(&chain(vec![kernel(1, 4, true), child()])),
            "children of unknown shape: whole graph"
        );
        assert!(same_params(&kernel(1, 7, true), &kernel(1, 7, true)));
        assert!(!same_params(&kernel(1, 7, true), &kernel(1, 8, true)));
        assert!(!same_params(&memset(8, 16), &memset(9, 16)));
        let old2 = BuiltNodes::new(
            NodeSet::of(vec![std::ptr::null_mut(); 3]),
            chain(vec![kernel(1, 0, true), memset(8, 16), kernel(2, 0, false)]),
        );
        assert!(!old2.accepts(&lanes) && !old2.may_update_whole(&lanes), "other dependencies (lanes)");
    }
}

/// Conditional nodes built against the driver double (`fc_driver_double`):
/// the setter, the node and its body through the ABIs each driver has,
/// refused before 12.3; built, updated node by node and replayed. CPU only;
/// runs in CI.
#[cfg(all(test, target_os = "linux"))]
mod double_tests {
    use std::sync::Arc;

    use super::*;
    use crate::conditional_kernels::{fake_kernels, CondKernels, CONDITIONAL_PTX};
    use crate::launch_config::LaunchConfig;
    use crate::nodes::WordLaunch;
    use crate::test_double::{load as load_double, node_of, Rig};

    /// Elements each kernel computes: 16 blocks of 256 threads.
    const N: usize = 4096;

    /// `func(a, b, out, n)` over 16 blocks of 256 threads.
    fn launch(func: CUfunction, [a, b, out]: [CUdeviceptr; 3], n: usize) -> Op {
        let cfg = LaunchConfig { grid: (16, 1, 1), block: (256, 1, 1), shared_mem_bytes: 0 };
        Op::Binary(WordLaunch { func, cfg, words: [a, b, out, n as u64], pdl: false })
    }

    /// What the tests build from: the rig, the setter kernels and buffers.
    struct Kit {
        rig: Rig,
        kernels: Arc<CondKernels>,
        /// Operands (1.0, 2.0), the top-level kernel's output.
        x: CUdeviceptr,
        y: CUdeviceptr,
        out: CUdeviceptr,
        /// The body kernel's first operands (10.0, 20.0) and its output.
        b1: CUdeviceptr,
        b2: CUdeviceptr,
        body_out: CUdeviceptr,
        /// A REPEAT's counts (3, 2) and its counter.
        src1: CUdeviceptr,
        src2: CUdeviceptr,
        counter: CUdeviceptr,
    }

    impl Kit {
        fn new(driver_version: i32) -> Kit {
            let rig = load_double("cond", driver_version);
            // The setters need a driver that resolves the device runtime's
            // cudaGraphSetConditional (12.3+, where conditional nodes are);
            // before, nothing may reach the driver with them: made-up
            // handles, which the double would report.
            let mut kernels = fake_kernels();
            if driver_version >= 12030 {
                let module = rig.load_module(CONDITIONAL_PTX);
                let k = Arc::get_mut(&mut kernels).expect("a new Arc");
                k.set = rig.function(module, "fc_cond_set");
                k.load = rig.function(module, "fc_cond_load");
                k.countdown = rig.function(module, "fc_cond_countdown");
            }
            Kit {
                x: rig.buffer(&[1.0; N]),
                y: rig.buffer(&[2.0; N]),
                out: rig.alloc(N),
                b1: rig.buffer(&[10.0; N]),
                b2: rig.buffer(&[20.0; N]),
                body_out: rig.alloc(N),
                src1: rig.buffer_u32(&[3]),
                src2: rig.buffer_u32(&[2]),
                counter: rig.alloc(1),
                kernels,
                rig,
            }
        }

        /// `out = x + y`.
        fn kernel(&self) -> Op {
            launch(self.rig.add, [self.x, self.y, self.out], N)
        }

        /// A conditional of `kind` on `src` around `body`.
        fn cond(&self, kind: CondKind, src: u64, body: Vec<Op>) -> Op {
            let counter: Option<(u64, Box<dyn Send + Sync>)> =
                (kind == CondKind::Repeat).then(|| (self.counter, Box::new(()) as Box<dyn Send + Sync>));
            let bodies = vec![Ops::chain(body)];
            Op::Cond(Box::new(CondOp { kind, src, bodies, counter, kernels: self.kernels.clone() }))
        }

        /// The kernel, then a REPEAT on `src` (its count) of `body_out =
        /// body_a + y`.
        fn repeat(&self, src: u64, body_a: u64) -> Ops {
            let body = vec![launch(self.rig.add, [body_a, self.y, self.body_out], N)];
            Ops::chain(vec![self.kernel(), self.cond(CondKind::Repeat, src, body)])
        }

        /// Launches `exec`: how often `fc_add_f32` ran.
        fn replay(&self, exec: CUgraphExec) -> i64 {
            let before = self.rig.probe.kernel_runs("fc_add_f32");
            self.rig.launch(exec);
            self.rig.probe.kernel_runs("fc_add_f32") - before
        }
    }

    fn check(driver_version: i32) {
        let kit = Kit::new(driver_version);
        let (rig, probe) = (&kit.rig, &kit.rig.probe);
        let mut ops = kit.repeat(kit.src1, kit.b1);
        let graph = rig.graph();
        // SAFETY: a live graph of the rig's context, current on this
        // thread; launches of its kernels with their arguments.
        let added = unsafe { add_ops(&rig.driver, graph, &mut ops, rig.ctx, false) };
        let set = match added {
            Err(e) => {
                assert!(driver_version < 12030, "driver {driver_version}: {e}");
                assert!(e.to_string().contains("12.3"), "{e}");
                None
            }
            Ok(set) => Some(set),
        };
        assert_eq!(set.is_some(), driver_version >= 12030, "conditional nodes from 12.3 on");
        if let Some(set) = set {
            assert_eq!(set.len(), 2, "one node per op: the kernel and the conditional");
            // The last call: the body's countdown setter, after the body's
            // kernel, with the node's handle as its first argument.
            assert_eq!(probe.last_called().map(|(n, _)| n), Some("cuGraphAddKernelNode".to_string()));
            let made = &set.conds[0];
            let end = made.end_setter.expect("a loop's end setter");
            let countdown = kit.kernels.countdown as u64;
            let (kernel, ctx) = (u64::from(CU_GRAPH_NODE_TYPE_KERNEL), rig.ctx as u64);
            assert_ne!(made.handle, 0);
            assert_eq!(
                node_of(probe, end),
                [kernel, countdown, 1, 1, 0, made.handle, 1, ctx],
                "driver {driver_version}"
            );
            // Replayed: the kernel once, the body as often as `src1` says.
            let exec = rig.instantiate(graph);
            assert_eq!(kit.replay(exec), 1 + 3, "the kernel, then the body three times");
            assert_eq!(rig.download(kit.out, N), [3.0; N]);
            assert_eq!(rig.download(kit.body_out, N), [12.0; N], "b1 + y");
            check_updates(&kit, exec, BuiltNodes::new(set, ops));
            check_while_source(&kit);
        }
        assert_eq!(probe.over_requests(), 0);
        assert!(probe.misuses().is_empty(), "driver {driver_version}: misuses of the double: {:?}", probe.misuses());
    }

    /// Re-recordings of the REPEAT built by [`check`], applied node by node
    /// to its executable: a body kernel, then the condition's source, each
    /// one call on the node it changes (replayed, the executable computes
    /// the change); nothing changed, no call; another kind, not node by
    /// node.
    fn check_updates(kit: &Kit, exec: CUgraphExec, mut built: BuiltNodes) {
        let (rig, probe) = (&kit.rig, &kit.rig.probe);
        // `BuiltNodes::update` without the process's driver: its fit, then
        // `update_ops` on the double.
        let update = |built: &mut BuiltNodes, new: &mut Ops| -> usize {
            let mut calls = 0;
            // SAFETY: the executable of the built graph; launches as when built.
            unsafe { update_ops(&rig.driver, exec, &mut built.nodes, &mut built.ops, new, rig.ctx, &mut calls) }
                .expect("updated");
            calls
        };
        let set_params = |p: &fc_driver_double::Probe| p.calls("cuGraphExecKernelNodeSetParams", 12000);

        let mut same = kit.repeat(kit.src1, kit.b1);
        assert_eq!(built.fit(&same), Fit::Same);
        let before = set_params(probe);
        assert_eq!(update(&mut built, &mut same), 0);
        assert_eq!(set_params(probe), before, "no call when nothing changed");

        let mut body = kit.repeat(kit.src1, kit.b2);
        assert_eq!(built.fit(&body), Fit::Changed, "a body kernel's operand changed");
        probe.reset_last_called();
        assert_eq!(update(&mut built, &mut body), 1);
        assert_eq!(probe.last_called(), Some(("cuGraphExecKernelNodeSetParams".to_string(), 12000)));
        assert_eq!(kit.replay(exec), 1 + 3);
        assert_eq!(rig.download(kit.body_out, N), [22.0; N], "the body's kernel node, in place: b2 + y");
        assert_eq!(built.fit(&kit.repeat(kit.src1, kit.b2)), Fit::Same, "the new parameters are known");

        let mut src = kit.repeat(kit.src2, kit.b2);
        assert_eq!(built.fit(&src), Fit::Changed, "another source for the count");
        assert_eq!(update(&mut built, &mut src), 1, "the setter only");
        assert_eq!(kit.replay(exec), 1 + 2, "the setter, with the node's handle, counts from src2");
        assert_eq!(built.fit(&kit.repeat(kit.src2, kit.b2)), Fit::Same);

        let body_of = |a| vec![launch(rig.add, [a, kit.y, kit.body_out], N)];
        let other_kind = Ops::chain(vec![kit.kernel(), kit.cond(CondKind::While, kit.src2, body_of(kit.b2))]);
        assert_eq!(built.fit(&other_kind), Fit::No, "a WHILE is another node than a REPEAT");
        let mut two = body_of(kit.b2);
        two.extend(body_of(kit.b1));
        let two_bodies = Ops::chain(vec![kit.kernel(), kit.cond(CondKind::Repeat, kit.src2, two)]);
        assert_eq!(built.fit(&two_bodies), Fit::No, "a body of another length");
    }

    /// A WHILE reads its source in both setters: a new source is two
    /// calls, the setter's and then the one that ends the body. Its body
    /// (`old = new * y; new = x * 0`) ends the loop after one round when
    /// both setters read `new` (1.0, true); the end setter still reading
    /// `old` (2.0 after the first round) would take a second round, the
    /// first setter still reading it (0.0, false) none.
    fn check_while_source(kit: &Kit) {
        let (rig, probe) = (&kit.rig, &kit.rig.probe);
        let (old, new, zero) = (rig.buffer(&[0.0]), rig.buffer(&[1.0]), rig.buffer(&[0.0]));
        let body = || vec![launch(rig.mul, [new, kit.y, old], 1), launch(rig.mul, [kit.x, zero, new], 1)];
        let mut ops = Ops::chain(vec![kit.cond(CondKind::While, old, body())]);
        let graph = rig.graph();
        // SAFETY: as in `check`.
        let set = unsafe { add_ops(&rig.driver, graph, &mut ops, rig.ctx, false) }.expect("built");
        let exec = rig.instantiate(graph);
        let mut built = BuiltNodes::new(set, ops);
        let (setter, end) = (built.nodes.conds[0].setter, built.nodes.conds[0].end_setter);
        let mut update = Ops::chain(vec![kit.cond(CondKind::While, new, body())]);
        assert_eq!(built.fit(&update), Fit::Changed);
        let (before, mut calls) = (probe.calls("cuGraphExecKernelNodeSetParams", 12000), 0);
        // SAFETY: the executable of the built graph; launches as when built.
        unsafe { update_ops(&rig.driver, exec, &mut built.nodes, &mut built.ops, &mut update, rig.ctx, &mut calls) }
            .expect("updated");
        assert_eq!(calls, 2);
        assert_eq!(probe.calls("cuGraphExecKernelNodeSetParams", 12000) - before, 2);
        assert!(setter != end.expect("a loop's end setter"), "two setter nodes");
        let (muls, sets) = (probe.kernel_runs("fc_mul_f32"), probe.kernel_runs("fc_cond_set"));
        rig.launch(exec);
        assert_eq!(
            probe.kernel_runs("fc_mul_f32") - muls,
            2,
            "one round of the body: both setters read the new source"
        );
        assert_eq!(probe.kernel_runs("fc_cond_set") - sets, 2, "the setter, then the end setter once");
        assert_eq!(rig.download(new, 1), [0.0]);
        assert_eq!(built.fit(&Ops::chain(vec![kit.cond(CondKind::While, new, body())])), Fit::Same);
    }

    #[test]
    #[cfg_attr(miri, ignore = "FFI: loads the driver double")]
    fn conditionals_on_driver_12000_are_refused() {
        check(12000);
    }

    #[test]
    #[cfg_attr(miri, ignore = "FFI: loads the driver double")]
    fn conditionals_on_driver_12030() {
        check(12030);
    }

    #[test]
    #[cfg_attr(miri, ignore = "FFI: loads the driver double")]
    fn conditionals_on_driver_13000() {
        check(13000);
    }
}
