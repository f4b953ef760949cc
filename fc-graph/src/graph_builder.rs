//! Graphs built node by node: no stream enters capture mode, so nothing
//! another thread or library does on the GPU (a device-wide
//! synchronisation, a capture in GLOBAL mode) can invalidate or refuse the
//! recording, and executable graphs are updated node by node.
//!
//! A [`GraphBuilder`] owns a `CUgraph` of one [`Context`] (destroyed on
//! drop). Its nodes are the library's own launches, with the parameters the
//! eager launch would use:
//! - built-in kernels ([`GraphBuilder::add`], [`GraphBuilder::mul`],
//!   [`KernelParams::binary`]): the same function, grid, block and
//!   arguments as [`Context::binary`];
//! - user kernels ([`KernelParams::kernel`]): the arguments checked against
//!   the PTX signature as [`Kernel::launch_with`] checks them;
//! - memsets ([`GraphBuilder::fill_bytes`], [`MemsetParams`]);
//! - copies of other built graphs ([`GraphBuilder::add_child`]).
//!
//! **Dependencies and PDL.** Each `add_*` takes the nodes it depends on;
//! the `push_*` forms and the built-in conveniences depend on the node added
//! last, as a stream would order them. Where the eager launch would use
//! programmatic dependent launch (built-ins where [`Context::pdl_enabled`],
//! user kernels that opted in, see [`crate::launch`]) and the driver has
//! annotated edges (CUDA 12.3+: `cuGraphAddDependencies` 12030), the edge
//! from each kernel node it depends on is programmatic
//! (`CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC` from
//! `CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC`), the edge a stream capture of
//! the PDL launch leaves; edges from other nodes, and every edge on older
//! drivers (11.4-12.2, where PDL is never used), are full ones. Programmatic
//! edges are given to the driver in batches of 64 (one
//! `cuGraphAddDependencies` call each), and the rest before the graph is
//! instantiated or its edges are read.
//!
//! **Driver ABIs.** Kernel nodes go through `cuGraphAddKernelNode` and
//! `cuGraphExecKernelNodeSetParams` at their 12.0 ABI (v2 parameters), or
//! at the 10000/10010 ABI with v1 parameters on older drivers (driver 470),
//! through cuda-sys's checked calls (`cuda_sys::result::graph`), which
//! adapt to whichever ABI the driver has.
//!
//! **Updates.** [`GraphBuilder::instantiate`] makes a [`BuiltGraph`], whose
//! [`BuiltGraph::set_kernel_params`] and [`BuiltGraph::set_memset_params`]
//! change one node of the executable graph in place
//! (`cuGraphExecKernelNodeSetParams`, `cuGraphExecMemsetNodeSetParams`).
//! A node whose parameters did not change costs no driver call (so a
//! re-recording that changes nothing makes none; [`BuiltGraph::update_calls`]
//! counts them). An update cannot change a node's edges, so it cannot turn
//! PDL on or off for a node: that is refused (build anew).
//!
//! **Memory.** As for captured graphs ([`crate::Graph`]), a node records
//! device addresses, not buffers: the buffers a built graph's nodes use
//! must stay allocated for as long as the graph may replay, and a graph
//! must not replay after memory it writes was given to other uses. The
//! graph keeps its [`Context`] (and so the context's built-in kernels) and
//! every user kernel's module alive itself.

use std::collections::HashMap;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use cuda_sys::result::{graph, graph_exec};
use cuda_sys::*;

use crate::buffer::DeviceBuffer;
use crate::builtins::BinaryOp;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::launch::LaunchOptions;
use crate::module::{Kernel, KernelArg, LaunchConfig};
use crate::nodes::destroy_graph;
use crate::nodes::{
    add_child_node, add_kernel_node, add_memset_node, programmatic_edge, update_kernel_node, update_memset_node,
    LaunchSpec, MemsetRaw, PendingEdges,
};

/// Gives every builder its own id, so a [`Node`] of one graph is refused by
/// another.
static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// A node of one [`GraphBuilder`] (and of the [`BuiltGraph`] made from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Node {
    graph: u64,
    index: u32,
}

impl Node {
    /// Its position in the order nodes were added (0 first).
    pub fn index(self) -> usize {
        self.index as usize
    }
}

/// The parameters of one kernel node: a launch as the library would make
/// it eagerly, checked when made.
#[derive(Clone)]
pub struct KernelParams {
    spec: LaunchSpec,
    /// The context whose memory and functions the launch uses.
    owner: Context,
    /// A user kernel's handle, keeping its module loaded.
    kernel: Option<Kernel>,
}

// SAFETY: a CUfunction handle may be used from any thread; the module it
// belongs to is kept alive by `kernel` (user kernels) or `owner` (built-ins).
unsafe impl Send for KernelParams {}
// SAFETY: as above; nothing is mutated through a shared reference.
unsafe impl Sync for KernelParams {}

impl std::fmt::Debug for KernelParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelParams")
            .field("kernel", &self.kernel.as_ref().map(|k| k.name().to_string()))
            .field("cfg", &self.spec.cfg)
            .field("pdl", &self.spec.pdl)
            .finish_non_exhaustive()
    }
}

impl KernelParams {
    /// The launch of `out = a op b` over `n` floats on `ctx`, exactly as
    /// [`Context::binary`] makes it (PDL where [`Context::pdl_enabled`]).
    /// `n == 0` is refused: the eager call launches nothing, and a graph
    /// node cannot do nothing.
    pub fn binary(
        ctx: &Context,
        op: BinaryOp,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        out: &DeviceBuffer,
        n: usize,
    ) -> Result<KernelParams> {
        match ctx.binary_launch(op, a, b, out, n)? {
            Some(l) => Ok(KernelParams { spec: l.spec(), owner: ctx.clone(), kernel: None }),
            None => Err(Error::invalid("a built-in node over n = 0 elements launches nothing; leave it out")),
        }
    }

    /// The launch of `kernel` on `ctx`'s device with `args`, checked as
    /// [`Kernel::launch_on_with`] checks it, with PDL where that launch
    /// would use it (`opts.pdl`, the device, the driver, `FC_PDL`, `ctx`'s
    /// switch).
    pub fn kernel(
        kernel: &Kernel,
        ctx: &Context,
        cfg: LaunchConfig,
        args: &[KernelArg<'_>],
        opts: LaunchOptions,
    ) -> Result<KernelParams> {
        let spec = kernel.launch_spec(ctx, cfg, args, opts)?;
        Ok(KernelParams { spec, owner: ctx.clone(), kernel: Some(kernel.clone()) })
    }

    /// Whether the node launches with PDL (a programmatic edge from the
    /// kernel nodes it depends on, where the driver has them).
    pub fn pdl(&self) -> bool {
        self.spec.pdl
    }

    /// Its launch configuration.
    pub fn config(&self) -> LaunchConfig {
        self.spec.cfg
    }
}

/// The parameters of one memset node: `count` elements of 1 or 4 bytes set
/// to `value`, in one row.
#[derive(Clone)]
pub struct MemsetParams {
    raw: MemsetRaw,
    owner: Context,
}

impl std::fmt::Debug for MemsetParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.raw.fmt(f)
    }
}

impl MemsetParams {
    fn checked(buf: &DeviceBuffer, offset: usize, count: usize, element_size: u32, value: u32) -> Result<Self> {
        let len = count.checked_mul(element_size as usize).ok_or_else(|| Error::invalid("memset size overflows"))?;
        let end = offset.checked_add(len).ok_or_else(|| Error::invalid("memset range overflows"))?;
        if end > buf.size() {
            return Err(Error::BufferTooSmall(format!(
                "memset of bytes {offset}..{end} in a buffer of {} bytes",
                buf.size()
            )));
        }
        if count == 0 {
            return Err(Error::invalid("a memset node of 0 bytes sets nothing; leave it out"));
        }
        if offset % element_size as usize != 0 {
            return Err(Error::invalid(format!("memset offset {offset} is not a multiple of {element_size}")));
        }
        let raw = MemsetRaw { dst: buf.as_raw() + offset as u64, value, element_size, count };
        Ok(MemsetParams { raw, owner: buf.context().clone() })
    }

    /// `len` bytes of `buf` from `offset` set to `value` (what
    /// [`DeviceBuffer::fill_bytes`] does eagerly).
    pub fn bytes(buf: &DeviceBuffer, offset: usize, len: usize, value: u8) -> Result<MemsetParams> {
        Self::checked(buf, offset, len, 1, value as u32)
    }

    /// `count` 4-byte words of `buf` from byte `offset` (a multiple of 4)
    /// set to `value` (e.g. `1.0f32.to_bits()`).
    pub fn words(buf: &DeviceBuffer, offset: usize, count: usize, value: u32) -> Result<MemsetParams> {
        Self::checked(buf, offset, count, 4, value)
    }
}

/// What a node is, and the parameters it was last given.
#[derive(Clone)]
enum NodeKind {
    Kernel(Box<KernelParams>),
    Memset(MemsetParams),
    Child,
}

#[derive(Clone)]
struct Record {
    raw: CUgraphNode,
    kind: NodeKind,
}

/// The kind of an edge of a built graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// A full dependency: the node starts once its dependency completed.
    Full,
    /// A programmatic dependency (PDL): the node may start once every
    /// block of its dependency triggered (`griddepcontrol.launch_dependents`).
    Programmatic,
    /// Not known: the driver's `cuGraphGetEdges` has no edge data (before
    /// CUDA 12.3), where only full edges are built.
    Unannotated,
}

/// One edge of a built graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// The node it leaves.
    pub from: Node,
    /// The node it enters.
    pub to: Node,
    /// Its kind.
    pub kind: EdgeKind,
}

/// A graph under construction, node by node; see the [module
/// docs](self). Destroyed on drop unless instantiated.
pub struct GraphBuilder {
    ctx: Context,
    graph: CUgraph,
    id: u64,
    nodes: Vec<Record>,
    /// Programmatic edges not yet given to the driver.
    pending: PendingEdges,
    /// The driver builds annotated (programmatic) edges.
    programmatic: bool,
    last: Option<Node>,
}

// SAFETY: a graph handle may be used from any thread; `&mut self` methods
// keep one thread at a time on it.
unsafe impl Send for GraphBuilder {}

impl std::fmt::Debug for GraphBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphBuilder")
            .field("device", &self.ctx.device_id())
            .field("nodes", &self.nodes.len())
            .field("pending_programmatic_edges", &self.pending.len())
            .finish()
    }
}

impl GraphBuilder {
    /// An empty graph of `ctx` (`cuGraphCreate`).
    pub fn new(ctx: &Context) -> Result<GraphBuilder> {
        // Flags must be 0.
        let graph = ctx.bound(|d| Ok(graph::create(d, 0)?))?;
        let programmatic = crate::driver::driver().map(|d| d.has_programmatic_edges()).unwrap_or(false);
        Ok(GraphBuilder {
            ctx: ctx.clone(),
            graph,
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            nodes: Vec::new(),
            pending: PendingEdges::default(),
            programmatic,
            last: None,
        })
    }

    /// The context the graph belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Nodes added so far.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The node added last (the one the `push_*` forms depend on).
    pub fn last(&self) -> Option<Node> {
        self.last
    }

    /// Whether PDL launches become programmatic edges here (a CUDA 12.3+
    /// driver); else every edge is a full one.
    pub fn builds_programmatic_edges(&self) -> bool {
        self.programmatic
    }

    /// The raw graph, for interop and inspection (valid while the builder
    /// lives; programmatic edges appear once [`GraphBuilder::edges`] or
    /// [`GraphBuilder::flush_edges`] ran).
    pub fn raw_graph(&self) -> CUgraph {
        self.graph
    }

    fn raw_of(&self, n: Node) -> Result<&Record> {
        if n.graph != self.id {
            return Err(Error::invalid(format!("node {} belongs to another graph", n.index)));
        }
        self.nodes.get(n.index as usize).ok_or_else(|| Error::invalid(format!("no node {}", n.index)))
    }

    fn push_record(&mut self, raw: CUgraphNode, kind: NodeKind) -> Result<Node> {
        let index = u32::try_from(self.nodes.len()).map_err(|_| Error::invalid("too many nodes"))?;
        self.nodes.push(Record { raw, kind });
        let node = Node { graph: self.id, index };
        self.last = Some(node);
        Ok(node)
    }

    /// Adds a kernel node after `deps`; see the module docs for which
    /// edges are programmatic.
    pub fn add_kernel(&mut self, params: &KernelParams, deps: &[Node]) -> Result<Node> {
        self.ctx.check_usable("the kernel node's launch", &params.owner)?;
        let mut full = Vec::with_capacity(deps.len());
        let mut programmatic = Vec::new();
        for &dep in deps {
            let r = self.raw_of(dep)?;
            let from_kernel = matches!(r.kind, NodeKind::Kernel(_));
            match programmatic_edge(params.spec.pdl, from_kernel, self.programmatic) {
                Some(e) => programmatic.push((r.raw, e)),
                None => full.push(r.raw),
            }
        }
        let graph = self.graph;
        // SAFETY: our live graph, bound here; `full` are its nodes; the
        // launch was checked against its kernel when `params` was made.
        let raw = self.ctx.bound(|d| unsafe { add_kernel_node(d, graph, &full, &params.spec) })?;
        let record = self.push_record(raw, NodeKind::Kernel(Box::new(params.clone())))?;
        let mut full_batch = false;
        for (from, e) in programmatic {
            full_batch |= self.pending.push(from, raw, e);
        }
        if full_batch {
            // The node is added either way; a failed batch stays pending,
            // and the next flush (at the latest the one instantiation
            // makes) tries it again and reports the failure.
            let _ = self.flush_edges();
        }
        Ok(record)
    }

    /// [`GraphBuilder::add_kernel`] after the node added last (stream order).
    pub fn push_kernel(&mut self, params: &KernelParams) -> Result<Node> {
        let deps: Vec<Node> = self.last.into_iter().collect();
        self.add_kernel(params, &deps)
    }

    /// `out = a op b` over `n` floats after the node added last: the node
    /// [`Context::binary`] would launch.
    pub fn binary(
        &mut self,
        op: BinaryOp,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        out: &DeviceBuffer,
        n: usize,
    ) -> Result<Node> {
        let params = KernelParams::binary(&self.ctx, op, a, b, out, n)?;
        self.push_kernel(&params)
    }

    /// `out = a + b` after the node added last (as [`Context::add`]).
    pub fn add(&mut self, a: &DeviceBuffer, b: &DeviceBuffer, out: &DeviceBuffer, n: usize) -> Result<Node> {
        self.binary(BinaryOp::Add, a, b, out, n)
    }

    /// `out = a * b` after the node added last (as [`Context::mul`]).
    pub fn mul(&mut self, a: &DeviceBuffer, b: &DeviceBuffer, out: &DeviceBuffer, n: usize) -> Result<Node> {
        self.binary(BinaryOp::Mul, a, b, out, n)
    }

    /// Adds a memset node after `deps` (full edges).
    pub fn add_memset(&mut self, params: &MemsetParams, deps: &[Node]) -> Result<Node> {
        self.ctx.check_usable("the memset's buffer", &params.owner)?;
        let raw_deps = deps.iter().map(|&n| self.raw_of(n).map(|r| r.raw)).collect::<Result<Vec<_>>>()?;
        let (graph, m, raw_ctx) = (self.graph, params.raw, self.ctx.raw_context());
        // SAFETY: our live graph and its nodes, bound here; the range lies
        // inside a buffer of this context (checked when `params` was made).
        let raw = self.ctx.bound(|d| unsafe { add_memset_node(d, graph, &raw_deps, &m, raw_ctx) })?;
        self.push_record(raw, NodeKind::Memset(params.clone()))
    }

    /// [`GraphBuilder::add_memset`] after the node added last.
    pub fn push_memset(&mut self, params: &MemsetParams) -> Result<Node> {
        let deps: Vec<Node> = self.last.into_iter().collect();
        self.add_memset(params, &deps)
    }

    /// `len` bytes of `buf` from `offset` set to `value`, after the node
    /// added last (as [`DeviceBuffer::fill_bytes`]).
    pub fn fill_bytes(&mut self, buf: &DeviceBuffer, offset: usize, len: usize, value: u8) -> Result<Node> {
        let params = MemsetParams::bytes(buf, offset, len, value)?;
        self.push_memset(&params)
    }

    /// Adds a copy of `child`'s graph as one node after `deps` (full
    /// edges; `cuGraphAddChildGraphNode`). The child's pending programmatic
    /// edges are added first, so the copy has them. Its nodes cannot be
    /// updated through the parent.
    pub fn add_child(&mut self, child: &mut GraphBuilder, deps: &[Node]) -> Result<Node> {
        self.ctx.check_usable("the child graph", &child.ctx)?;
        child.flush_edges()?;
        let raw_deps = deps.iter().map(|&n| self.raw_of(n).map(|r| r.raw)).collect::<Result<Vec<_>>>()?;
        let (graph, child_graph) = (self.graph, child.graph);
        // SAFETY: two live graphs of this context, bound here; the child is copied.
        let raw = self.ctx.bound(|d| unsafe { add_child_node(d, graph, &raw_deps, child_graph) })?;
        self.push_record(raw, NodeKind::Child)
    }

    /// Gives the pending programmatic edges to the driver (one
    /// `cuGraphAddDependencies` call); instantiation does it by itself.
    pub fn flush_edges(&mut self) -> Result<()> {
        if self.pending.len() == 0 {
            return Ok(());
        }
        let (graph, pending) = (self.graph, &mut self.pending);
        // SAFETY: our live graph and its nodes.
        self.ctx.bound(|d| unsafe { pending.flush(d, graph) })
    }

    /// Every edge of the graph as the driver reports it
    /// (`cuGraphGetEdges`), after adding the pending ones.
    pub fn edges(&mut self) -> Result<Vec<Edge>> {
        self.flush_edges()?;
        let by_raw: HashMap<usize, Node> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, r)| (r.raw as usize, Node { graph: self.id, index: i as u32 }))
            .collect();
        let graph = self.graph;
        // SAFETY: our live graph, not changed during the call (`&mut self`).
        let edges = self.ctx.bound(|d| match unsafe { graph::get_edges(d, graph) } {
            None => Err(Error::Unsupported { feature: "cuGraphGetEdges", needs: "a CUDA 10.0+ driver".into() }),
            Some(edges) => Ok(edges?),
        })?;
        edges
            .into_iter()
            .map(|e| {
                let find = |raw: CUgraphNode| {
                    by_raw
                        .get(&(raw as usize))
                        .copied()
                        .ok_or_else(|| Error::invalid("an edge to a node not added here"))
                };
                let kind = match e.data {
                    None => EdgeKind::Unannotated,
                    Some(d) if d.type_ as CUgraphDependencyType == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC => {
                        EdgeKind::Programmatic
                    }
                    Some(_) => EdgeKind::Full,
                };
                Ok(Edge { from: find(e.from)?, to: find(e.to)?, kind })
            })
            .collect()
    }

    /// Instantiates the graph (`cuGraphInstantiateWithFlags`, after adding
    /// the pending edges). The builder's graph moves into the result, which
    /// needs it for node updates; on failure it is destroyed.
    pub fn instantiate(mut self) -> Result<BuiltGraph> {
        self.flush_edges()?;
        let graph = self.graph;
        let exec = self.ctx.shielded(|d| {
            // SAFETY: our live graph.
            Ok(unsafe { graph_exec::instantiate(d, graph, 0) }?)
        })?;
        // The graph now belongs to the executable: not destroyed by our drop.
        self.graph = ptr::null_mut();
        Ok(BuiltGraph {
            ctx: self.ctx.clone(),
            exec,
            graph,
            id: self.id,
            nodes: std::mem::take(&mut self.nodes),
            update_calls: 0,
        })
    }
}

impl Drop for GraphBuilder {
    fn drop(&mut self) {
        if !self.graph.is_null() {
            destroy_graph(self.ctx.cuda().raw(), self.graph);
        }
    }
}

/// An executable graph built node by node, with the graph it was made from
/// (both destroyed on drop), updated node by node.
pub struct BuiltGraph {
    ctx: Context,
    exec: CUgraphExec,
    graph: CUgraph,
    id: u64,
    nodes: Vec<Record>,
    update_calls: u64,
}

// SAFETY: executable graphs may be launched and destroyed from any thread;
// updates take `&mut self`.
unsafe impl Send for BuiltGraph {}
// SAFETY: `&self` methods only launch, which the driver serialises.
unsafe impl Sync for BuiltGraph {}

impl std::fmt::Debug for BuiltGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltGraph")
            .field("device", &self.ctx.device_id())
            .field("nodes", &self.nodes.len())
            .field("update_calls", &self.update_calls)
            .finish()
    }
}

impl BuiltGraph {
    /// Launches on the context's stream (asynchronous).
    pub fn launch(&self) -> Result<()> {
        self.ctx.capture().refuse_while_recording("launch a built graph")?;
        let (exec, stream) = (self.exec, self.ctx.stream());
        self.ctx.shielded(|d| {
            // SAFETY: live executable graph and stream of the same context.
            Ok(unsafe { graph_exec::launch(d, exec, stream) }?)
        })
    }

    /// The context whose stream it replays on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Nodes in the graph.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The raw executable graph (valid while this value lives).
    pub fn raw_exec(&self) -> CUgraphExec {
        self.exec
    }

    /// The raw graph it was instantiated from (valid while this value
    /// lives; updates change the executable, not this graph).
    pub fn raw_graph(&self) -> CUgraph {
        self.graph
    }

    /// Node-parameter driver calls made by updates so far (unchanged nodes
    /// make none).
    pub fn update_calls(&self) -> u64 {
        self.update_calls
    }

    fn record(&mut self, n: Node) -> Result<&mut Record> {
        if n.graph != self.id {
            return Err(Error::invalid(format!("node {} belongs to another graph", n.index)));
        }
        self.nodes.get_mut(n.index as usize).ok_or_else(|| Error::invalid(format!("no node {}", n.index)))
    }

    /// Sets kernel node `node` to `params` in the executable graph
    /// (`cuGraphExecKernelNodeSetParams`); the next launch uses them.
    /// Parameters equal to the node's current ones make no driver call:
    /// `Ok(false)`. PDL cannot be turned on or off (the edges are fixed).
    pub fn set_kernel_params(&mut self, node: Node, params: &KernelParams) -> Result<bool> {
        self.ctx.check_usable("the kernel node's launch", &params.owner)?;
        let exec = self.exec;
        let ctx = self.ctx.clone();
        let r = self.record(node)?;
        let raw = r.raw;
        let NodeKind::Kernel(current) = &mut r.kind else {
            return Err(Error::invalid(format!("node {} is not a kernel node", node.index)));
        };
        if current.spec == params.spec {
            return Ok(false);
        }
        let (old, new) = (&current.spec, &params.spec);
        // SAFETY: our live executable (`&mut self`), bound here; `raw` a
        // kernel node of its source graph; the launch was checked when made.
        let called = ctx.bound(|d| unsafe { update_kernel_node(d, exec, raw, old, new) })?;
        **current = params.clone();
        if called {
            self.update_calls += 1;
        }
        Ok(called)
    }

    /// `out = a op b` over `n` floats for kernel node `node` (a built-in
    /// node): [`BuiltGraph::set_kernel_params`] with the eager launch's
    /// parameters.
    pub fn set_binary(
        &mut self,
        node: Node,
        op: BinaryOp,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        out: &DeviceBuffer,
        n: usize,
    ) -> Result<bool> {
        let params = KernelParams::binary(&self.ctx, op, a, b, out, n)?;
        self.set_kernel_params(node, &params)
    }

    /// Sets memset node `node` to `params` in the executable graph
    /// (`cuGraphExecMemsetNodeSetParams`); equal parameters make no driver
    /// call (`Ok(false)`).
    pub fn set_memset_params(&mut self, node: Node, params: &MemsetParams) -> Result<bool> {
        self.ctx.check_usable("the memset's buffer", &params.owner)?;
        let (exec, raw_ctx) = (self.exec, self.ctx.raw_context());
        let ctx = self.ctx.clone();
        let r = self.record(node)?;
        let raw = r.raw;
        let NodeKind::Memset(current) = &mut r.kind else {
            return Err(Error::invalid(format!("node {} is not a memset node", node.index)));
        };
        if current.raw == params.raw {
            return Ok(false);
        }
        let m = params.raw;
        // SAFETY: our live executable and a memset node of its source; the
        // range lies inside a buffer of this context.
        ctx.bound(|d| unsafe { update_memset_node(d, exec, raw, &m, raw_ctx) })?;
        *current = params.clone();
        self.update_calls += 1;
        Ok(true)
    }
}

impl Drop for BuiltGraph {
    fn drop(&mut self) {
        let exec = self.exec;
        let _ = self.ctx.shielded(|d| {
            // SAFETY: destroyed once; a launch in flight completes first.
            Ok(unsafe { graph_exec::destroy(d, exec) }?)
        });
        destroy_graph(self.ctx.cuda().raw(), self.graph);
    }
}
