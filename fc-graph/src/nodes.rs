//! Graph nodes as the driver sees them, and the driver steps that add and
//! update them: shared by recordings ([`crate::segment`]) and the explicit
//! [`crate::GraphBuilder`].
//!
//! - [`LaunchSpec`]: a kernel launch reduced to function, configuration,
//!   argument words and PDL; two equal specs are the same launch, so an
//!   update compares them instead of asking the driver.
//! - [`MemsetRaw`]: a memset node's parameters.
//! - [`add_kernel_node`], [`update_kernel_node`], [`add_edges`]: through
//!   whichever ABI the driver has (cuda-sys's checked calls,
//!   `cuda_sys::result::{graph, graph_exec}`, over its adapters: the 12.0
//!   ABIs with v2 kernel parameters, or the 10000/10010 ABIs with v1
//!   parameters on older drivers such as 470).
//! - [`programmatic_edge`]: which edges carry PDL; [`PendingEdges`]: those
//!   not yet given to the driver, in batches of [`EDGE_BATCH`].

use std::os::raw::c_void;
use std::ptr;

use cuda_sys::result::{graph, graph_exec};
use cuda_sys::*;
use smallvec::SmallVec;

use crate::driver::{shielded, RawCtx};
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;

/// Argument words kept inline in a [`LaunchSpec`] (larger launches spill).
pub(crate) const INLINE_WORDS: usize = 8;

/// A kernel launch reduced to what the driver sees: function,
/// configuration, argument bytes (each argument in 8-byte words of its
/// own) and whether it launches with PDL. Two launches with equal specs are
/// the same launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaunchSpec {
    pub(crate) func: CUfunction,
    pub(crate) cfg: LaunchConfig,
    /// Argument values; argument `i` starts at word `starts[i]`.
    pub(crate) words: SmallVec<[u64; INLINE_WORDS]>,
    pub(crate) starts: SmallVec<[u32; INLINE_WORDS]>,
    pub(crate) pdl: bool,
}

/// Most kernel parameters a launch spec passes without allocating its
/// pointer array.
const INLINE_PARAMS: usize = 16;

impl LaunchSpec {
    /// A launch of `func` with one 8-byte word per argument.
    pub(crate) fn of_words(func: CUfunction, cfg: LaunchConfig, words: &[u64], pdl: bool) -> LaunchSpec {
        LaunchSpec { func, cfg, words: SmallVec::from_slice(words), starts: (0..words.len() as u32).collect(), pdl }
    }

    /// Appends one argument of `bytes` (little-endian, in words of its own).
    pub(crate) fn push_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let first = self.words.len();
        self.starts.push(u32::try_from(first).map_err(|_| Error::invalid("kernel arguments too large"))?);
        self.words.resize(first + bytes.len().div_ceil(8).max(1), 0);
        for (i, byte) in bytes.iter().enumerate() {
            self.words[first + i / 8] |= (*byte as u64) << (8 * (i % 8));
        }
        Ok(())
    }

    /// Appends one argument of one word.
    pub(crate) fn push_word(&mut self, word: u64) -> Result<()> {
        let first = self.words.len();
        self.starts.push(u32::try_from(first).map_err(|_| Error::invalid("kernel arguments too large"))?);
        self.words.push(word);
        Ok(())
    }

    /// An empty launch of `func` (arguments pushed after).
    pub(crate) fn empty(func: CUfunction, cfg: LaunchConfig, pdl: bool) -> LaunchSpec {
        LaunchSpec { func, cfg, words: SmallVec::new(), starts: SmallVec::new(), pdl }
    }

    /// Calls `f` with the v2 node parameters of this launch; its
    /// `kernelParams` point into `self.words`, valid during `f` only.
    pub(crate) fn with_params<T>(&self, f: impl FnOnce(&CUDA_KERNEL_NODE_PARAMS_v2) -> T) -> T {
        let base = self.words.as_ptr() as *mut u64;
        // Every start lies inside `words` (the constructors make it so), so
        // the pointers are in bounds; the driver only reads through them.
        let ptr_at = |s: u32| base.wrapping_add(s as usize).cast::<c_void>();
        let mut inline = [ptr::null_mut::<c_void>(); INLINE_PARAMS];
        let mut heap = Vec::new();
        let params: *mut *mut c_void = if self.starts.len() <= INLINE_PARAMS {
            for (slot, &s) in inline.iter_mut().zip(&self.starts) {
                *slot = ptr_at(s);
            }
            inline.as_mut_ptr()
        } else {
            heap.extend(self.starts.iter().map(|&s| ptr_at(s)));
            heap.as_mut_ptr()
        };
        let params = if self.starts.is_empty() { ptr::null_mut() } else { params };
        f(&node_params(self.func, &self.cfg, params))
    }
}

/// The v2 kernel-node parameters of a launch of `func` with `cfg` and the
/// `cuLaunchKernel`-style argument array `params` (or null).
fn node_params(func: CUfunction, cfg: &LaunchConfig, params: *mut *mut c_void) -> CUDA_KERNEL_NODE_PARAMS_v2 {
    let (g, b) = (cfg.grid, cfg.block);
    CUDA_KERNEL_NODE_PARAMS_v2 {
        func,
        gridDimX: g.0,
        gridDimY: g.1,
        gridDimZ: g.2,
        blockDimX: b.0,
        blockDimY: b.1,
        blockDimZ: b.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        kernelParams: params,
        extra: ptr::null_mut(),
        kern: ptr::null_mut(),
        ctx: ptr::null_mut(),
    }
}

/// A launch whose arguments are four 8-byte words (the built-ins:
/// `(a, b, out, n)`), kept inline: what a recording writes down for each
/// built-in launch, 80 bytes and no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WordLaunch {
    pub(crate) func: CUfunction,
    pub(crate) cfg: LaunchConfig,
    pub(crate) words: [u64; 4],
    pub(crate) pdl: bool,
}

impl WordLaunch {
    /// Calls `f` with the v2 node parameters of this launch (valid during
    /// `f` only).
    pub(crate) fn with_params<T>(&self, f: impl FnOnce(&CUDA_KERNEL_NODE_PARAMS_v2) -> T) -> T {
        let mut w = self.words;
        let base = w.as_mut_ptr();
        let mut params: [*mut c_void; 4] =
            [base.cast(), base.wrapping_add(1).cast(), base.wrapping_add(2).cast(), base.wrapping_add(3).cast()];
        f(&node_params(self.func, &self.cfg, params.as_mut_ptr()))
    }

    /// The same launch as a general [`LaunchSpec`].
    pub(crate) fn spec(&self) -> LaunchSpec {
        LaunchSpec::of_words(self.func, self.cfg, &self.words, self.pdl)
    }
}

/// A memset node as the driver sees it: `count` elements of
/// `element_size` (1 or 4) bytes from `dst` set to `value`, in one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemsetRaw {
    pub(crate) dst: CUdeviceptr,
    pub(crate) value: u32,
    pub(crate) element_size: u32,
    pub(crate) count: usize,
}

impl MemsetRaw {
    pub(crate) fn params(&self) -> CUDA_MEMSET_NODE_PARAMS_v1 {
        CUDA_MEMSET_NODE_PARAMS_v1 {
            dst: self.dst,
            pitch: 0,
            value: self.value,
            elementSize: self.element_size,
            width: self.count,
            height: 1,
        }
    }

    /// Whether an executable memset node made as `self` may be set to
    /// `other` in place: the driver may reject other widths or element
    /// sizes, so only the address and the value change.
    pub(crate) fn same_shape(&self, other: &MemsetRaw) -> bool {
        self.element_size == other.element_size && self.count == other.count
    }
}

/// The annotation of an edge into a node that launches with `pdl` from a
/// node that is a kernel node or not, on a driver with programmatic edges
/// or not: `Some` for a programmatic edge (added separately), `None` for a
/// full edge (given to the node's own add call).
pub(crate) fn programmatic_edge(
    pdl: bool,
    from_kernel: bool,
    driver_has_programmatic: bool,
) -> Option<CUgraphEdgeData> {
    (pdl && from_kernel && driver_has_programmatic).then_some(CUgraphEdgeData {
        from_port: CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
        to_port: 0,
        type_: CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8,
        reserved: [0; 5],
    })
}

/// Adds a kernel node through whichever ABI the driver has.
///
/// # Safety
/// `graph` is a live graph of the context current on this thread, `deps`
/// are its nodes, `spec` a launch of a live function of that context whose
/// arguments match its parameters.
pub(crate) unsafe fn add_kernel_node(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    spec: &LaunchSpec,
) -> Result<CUgraphNode> {
    // SAFETY: the caller's promise.
    spec.with_params(|p| unsafe { add_kernel_node_params(d, graph, deps, p) })
}

/// [`add_kernel_node`] with the node parameters made by the caller.
///
/// # Safety
/// As [`add_kernel_node`], for the launch `p` describes.
pub(crate) unsafe fn add_kernel_node_params(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    p: &CUDA_KERNEL_NODE_PARAMS_v2,
) -> Result<CUgraphNode> {
    // SAFETY: the caller's promise; the parameters live across the call.
    let added = unsafe { graph::add_kernel_node(d, graph, deps, p) };
    match added {
        None => Err(Error::Unsupported {
            feature: "cuGraphAddKernelNode (graph building)",
            needs: "a CUDA 10.0+ driver".into(),
        }),
        Some(added) => Ok(added?),
    }
}

/// Adds a memset node after `deps`.
///
/// # Safety
/// `graph` is a live graph of the context `ctx`, current on this thread,
/// `deps` its nodes, and the range of `m` lies inside memory of `ctx`.
pub(crate) unsafe fn add_memset_node(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    m: &MemsetRaw,
    ctx: CUcontext,
) -> Result<CUgraphNode> {
    let p = m.params();
    // SAFETY: the caller's promise; `p` lives across the call.
    Ok(unsafe { graph::add_memset_node(d, graph, deps, &p, ctx) }?)
}

/// Adds a copy of `child` as one node after `deps`.
///
/// # Safety
/// `graph` and `child` are live graphs of the context current on this
/// thread, `deps` nodes of `graph`.
pub(crate) unsafe fn add_child_node(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    child: CUgraph,
) -> Result<CUgraphNode> {
    // SAFETY: the caller's promise; the child is copied.
    Ok(unsafe { graph::add_child_graph_node(d, graph, deps, child) }?)
}

/// A conditional handle of `graph` (default value 0, applied at every
/// launch), for a conditional node of that graph.
///
/// # Safety
/// `graph` is a live graph of the context `ctx`, current on this thread.
pub(crate) unsafe fn create_conditional_handle(
    d: &DriverFns,
    graph: CUgraph,
    ctx: CUcontext,
) -> Result<CUgraphConditionalHandle> {
    // SAFETY: the caller's promise.
    match unsafe { graph::conditional_handle_create(d, graph, ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT) } {
        None => Err(Error::Unsupported { feature: "conditional nodes", needs: "a CUDA 12.3+ driver".into() }),
        Some(handle) => Ok(handle?),
    }
}

/// Adds a conditional node of `type_` with `size` bodies after `dep`;
/// returns it and its body graphs (owned by the node).
///
/// # Safety
/// `graph` is a live graph of `ctx`, current on this thread; `dep` one of
/// its nodes; `handle` a conditional handle of `graph`.
pub(crate) unsafe fn add_conditional_node(
    d: &DriverFns,
    graph: CUgraph,
    dep: CUgraphNode,
    handle: CUgraphConditionalHandle,
    type_: CUgraphConditionalNodeType,
    size: u32,
    ctx: CUcontext,
) -> Result<(CUgraphNode, Vec<CUgraph>)> {
    let mut params = CUgraphNodeParams::conditional(CUDA_CONDITIONAL_NODE_PARAMS {
        handle,
        type_,
        size,
        phGraph_out: ptr::null_mut(),
        ctx,
    });
    // SAFETY: the caller's promise; `params` lives across the call.
    let node = match unsafe { graph::add_node(d, graph, &[dep], None, &mut params) } {
        None => {
            return Err(Error::Unsupported {
                feature: "conditional nodes (cuGraphAddNode)",
                needs: "a CUDA 12.3+ driver".into(),
            })
        }
        Some(added) => added?,
    };
    let out = params.conditional_params().map(|c| c.phGraph_out).unwrap_or(ptr::null_mut());
    if out.is_null() {
        return Err(Error::invalid("cuGraphAddNode made a conditional node without body graphs"));
    }
    // SAFETY: the driver's array of `size` body graphs, valid for the
    // node's lifetime (copied out here).
    let bodies = unsafe { std::slice::from_raw_parts(out, size as usize) }.to_vec();
    Ok((node, bodies))
}

/// Sets kernel node `node` of `exec` to `new` unless it equals `current`
/// (then no driver call is made): `Ok(true)` when a call was made, and
/// `current` is then `new`.
///
/// # Safety
/// `exec` is a live executable graph of the context current on this
/// thread, not used by another thread during the call; `node` a kernel node
/// of its source graph; `new` a launch as for [`add_kernel_node`].
pub(crate) unsafe fn update_kernel_node(
    d: &DriverFns,
    exec: CUgraphExec,
    node: CUgraphNode,
    current: &LaunchSpec,
    new: &LaunchSpec,
) -> Result<bool> {
    if current == new {
        return Ok(false);
    }
    if current.pdl != new.pdl {
        return Err(pdl_change());
    }
    // SAFETY: the caller's promise.
    new.with_params(|p| unsafe { set_kernel_node_params(d, exec, node, p) }).map(|()| true)
}

/// The refusal of an update that would turn PDL on or off for a node.
pub(crate) fn pdl_change() -> Error {
    Error::invalid("an update cannot turn PDL on or off for a node (its edges would change); build the graph anew")
}

/// Sets kernel node `node` of `exec` to the launch `p` describes.
///
/// # Safety
/// As [`update_kernel_node`], for the launch `p` describes.
pub(crate) unsafe fn set_kernel_node_params(
    d: &DriverFns,
    exec: CUgraphExec,
    node: CUgraphNode,
    p: &CUDA_KERNEL_NODE_PARAMS_v2,
) -> Result<()> {
    // SAFETY: the caller's promise; the parameters live across the call.
    let set = unsafe { graph_exec::kernel_node_set_params(d, exec, node, p) };
    match set {
        None => Err(Error::Unsupported {
            feature: "cuGraphExecKernelNodeSetParams (node-by-node update)",
            needs: "a CUDA 10.1+ driver".into(),
        }),
        Some(set) => Ok(set?),
    }
}

/// Sets memset node `node` of `exec` to `m`.
///
/// # Safety
/// `exec` is a live executable graph of `ctx`, current on this thread, not
/// used by another thread during the call; `node` a memset node of its
/// source graph; the range of `m` lies inside memory of `ctx`.
pub(crate) unsafe fn update_memset_node(
    d: &DriverFns,
    exec: CUgraphExec,
    node: CUgraphNode,
    m: &MemsetRaw,
    ctx: CUcontext,
) -> Result<()> {
    let p = m.params();
    // SAFETY: the caller's promise; `p` lives across the call.
    Ok(unsafe { graph_exec::memset_node_set_params(d, exec, node, &p, ctx) }?)
}

/// Adds the pending edges `from[i] -> to[i]` with `data[i]`, in one call.
///
/// # Safety
/// `graph` is a live graph, every node one of its nodes.
pub(crate) unsafe fn add_edges(
    d: &DriverFns,
    graph: CUgraph,
    from: &[CUgraphNode],
    to: &[CUgraphNode],
    data: &[CUgraphEdgeData],
) -> Result<()> {
    if from.is_empty() {
        return Ok(());
    }
    // SAFETY: the caller's promise; equal-length arrays.
    match unsafe { graph::add_dependencies(d, graph, from, to, Some(data)) } {
        None => Err(Error::Unsupported { feature: "cuGraphAddDependencies", needs: "a CUDA 10.0+ driver".into() }),
        Some(added) => Ok(added?),
    }
}

/// What an executable's child graph node must keep for its work to be
/// replaced from another graph (`cuGraphExecChildGraphNodeSetParams`
/// requires the same topology and node insertion order): the node types in
/// the order the driver lists them, and every edge by node index, with its
/// annotation where the driver reports one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildShape {
    types: Vec<CUgraphNodeType>,
    /// (from, to, from port, to port, type), sorted.
    edges: Vec<(u32, u32, u8, u8, u8)>,
}

impl ChildShape {
    /// How many nodes the graph has.
    pub(crate) fn nodes(&self) -> usize {
        self.types.len()
    }

    /// Each node's type, in the order the driver lists the nodes.
    pub(crate) fn types(&self) -> &[CUgraphNodeType] {
        &self.types
    }

    /// A shape from its parts (tests).
    #[cfg(test)]
    pub(crate) fn of(types: Vec<CUgraphNodeType>, edges: Vec<(u32, u32, u8, u8, u8)>) -> ChildShape {
        ChildShape { types, edges }
    }
}

/// The shape of `graph` (see [`ChildShape`]): two `cuGraphGetNodes`, a
/// `cuGraphNodeGetType` per node, two `cuGraphGetEdges`.
///
/// # Safety
/// `graph` is a live graph of the context current on this thread, not
/// changed by another thread during the call.
pub(crate) unsafe fn child_shape(d: &DriverFns, graph: CUgraph) -> Result<ChildShape> {
    // SAFETY: the caller's live graph. An empty one takes one call.
    let nodes = unsafe { graph::get_nodes(d, graph) }?;
    if nodes.is_empty() {
        return Ok(ChildShape { types: Vec::new(), edges: Vec::new() });
    }
    let mut types = Vec::with_capacity(nodes.len());
    for &node in &nodes {
        // SAFETY: a node of the caller's graph.
        types.push(unsafe { graph::node_get_type(d, node) }?);
    }
    let index: std::collections::HashMap<usize, u32> =
        nodes.iter().enumerate().map(|(i, &node)| (node as usize, i as u32)).collect();
    // SAFETY: the caller's promise.
    let edges = match unsafe { graph::get_edges(d, graph) } {
        None => return Err(Error::Unsupported { feature: "cuGraphGetEdges", needs: "a CUDA 10.0+ driver".into() }),
        Some(edges) => edges?,
    };
    let mut out = Vec::with_capacity(edges.len());
    for e in edges {
        let (Some(&from), Some(&to)) = (index.get(&(e.from as usize)), index.get(&(e.to as usize))) else {
            return Err(Error::invalid("cuGraphGetEdges named a node cuGraphGetNodes did not list"));
        };
        let a = e.data.unwrap_or(CUgraphEdgeData { from_port: 0, to_port: 0, type_: 0, reserved: [0; 5] });
        out.push((from, to, a.from_port, a.to_port, a.type_));
    }
    out.sort_unstable();
    Ok(ChildShape { types, edges: out })
}

/// Replaces the work of the child graph node `node` of `exec` with
/// `child`'s (`cuGraphExecChildGraphNodeSetParams`, CUDA 11.1+).
///
/// # Safety
/// `exec` is a live executable graph of the context current on this
/// thread, not used by another thread during the call; `node` a child graph
/// node of the graph it was instantiated from, whose graph has the
/// [`ChildShape`] of `child`, a live graph of the same context.
pub(crate) unsafe fn update_child_node(
    d: &DriverFns,
    exec: CUgraphExec,
    node: CUgraphNode,
    child: CUgraph,
) -> Result<()> {
    // SAFETY: the caller's promise.
    match unsafe { graph_exec::child_graph_node_set_params(d, exec, node, child) } {
        None => Err(Error::Unsupported {
            feature: "cuGraphExecChildGraphNodeSetParams",
            needs: "a CUDA 11.1+ driver".into(),
        }),
        Some(set) => Ok(set?),
    }
}

/// Most programmatic edges a graph under construction waits for: they are
/// given to the driver in one `cuGraphAddDependencies` call per this many.
/// A node whose only edge is programmatic is added without dependencies,
/// as a root, until its edge is added; the driver's cost of adding each
/// node grows with the roots a graph has. Measured on the H200 (driver
/// 580, `fc-bench --build-profile`, GPU run 58), building a chain of 2,600
/// PDL kernels took 2,257-2,665 µs with every edge added at the end and
/// 1,965-2,214 µs with batches of 64; at 26 and 260 kernels the two are
/// equal, and batches of 8 or 16 cost more there.
pub(crate) const EDGE_BATCH: usize = 64;

/// Programmatic edges of a graph under construction not yet given to the
/// driver: `from[i] -> to[i]` with `data[i]`.
#[derive(Default)]
pub(crate) struct PendingEdges {
    from: Vec<CUgraphNode>,
    to: Vec<CUgraphNode>,
    data: Vec<CUgraphEdgeData>,
}

impl PendingEdges {
    /// Room for `n` edges (a batch at most).
    pub(crate) fn with_capacity(n: usize) -> PendingEdges {
        let n = n.min(EDGE_BATCH);
        PendingEdges { from: Vec::with_capacity(n), to: Vec::with_capacity(n), data: Vec::with_capacity(n) }
    }

    pub(crate) fn len(&self) -> usize {
        self.from.len()
    }

    /// Notes the edge `from -> to`; `true` when a batch is full (time to
    /// [`PendingEdges::flush`]).
    pub(crate) fn push(&mut self, from: CUgraphNode, to: CUgraphNode, data: CUgraphEdgeData) -> bool {
        self.from.push(from);
        self.to.push(to);
        self.data.push(data);
        self.from.len() >= EDGE_BATCH
    }

    /// Adds the pending edges to `graph` in one call (none: no call); when
    /// the call fails they stay pending.
    ///
    /// # Safety
    /// `graph` is a live graph not used by another thread during the call,
    /// and every pending edge joins two of its nodes.
    pub(crate) unsafe fn flush(&mut self, d: &DriverFns, graph: CUgraph) -> Result<()> {
        // SAFETY: the caller's promise.
        unsafe { add_edges(d, graph, &self.from, &self.to, &self.data) }?;
        self.from.clear();
        self.to.clear();
        self.data.clear();
        Ok(())
    }
}

/// Destroys a graph we own (errors are ignored: nothing to do about them).
pub(crate) fn destroy_graph(raw_ctx: RawCtx, graph: CUgraph) {
    let _ = shielded(raw_ctx, |d| {
        // SAFETY: a graph we own, destroyed once; executables made from it do
        // not need it.
        Ok(unsafe { graph::destroy(d, graph) }?)
    });
}

/// Node-level driver steps against the driver double (`fc_driver_double`).
#[cfg(all(test, target_os = "linux"))]
#[path = "nodes_double_tests.rs"]
mod double_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(words: &[u64], pdl: bool) -> LaunchSpec {
        let func = std::ptr::null_mut::<u8>().wrapping_add(0x10).cast();
        LaunchSpec::of_words(
            func,
            LaunchConfig { grid: (4, 1, 1), block: (256, 1, 1), shared_mem_bytes: 0 },
            words,
            pdl,
        )
    }

    #[test]
    fn programmatic_edges_only_between_kernels_for_pdl_on_12_3() {
        let e = programmatic_edge(true, true, true).expect("programmatic");
        assert_eq!(e.from_port, CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC);
        assert_eq!(e.type_ as CUgraphDependencyType, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC);
        assert_eq!((e.to_port, e.reserved), (0, [0; 5]));
        assert!(programmatic_edge(false, true, true).is_none(), "a plain launch: full edge");
        assert!(programmatic_edge(true, false, true).is_none(), "from a memset: full edge");
        assert!(programmatic_edge(true, true, false).is_none(), "before 12.3: full edge");
    }

    #[test]
    fn node_parameters_point_at_each_argument() {
        let mut s = spec(&[11, 22], false);
        s.push_bytes(&[0x33, 0, 0, 0, 0, 0, 0, 0, 0x44]).expect("pushed");
        s.push_word(55).expect("pushed");
        assert_eq!(s.starts.as_slice(), &[0, 1, 2, 4]);
        s.with_params(|p| {
            // SAFETY: four parameter pointers into `s.words`, live here.
            let got: Vec<u64> = (0..4).map(|i| unsafe { **p.kernelParams.add(i).cast::<*const u64>() }).collect();
            assert_eq!(got, [11, 22, 0x33, 55]);
            // SAFETY: the third argument spans two words.
            let second = unsafe { *(*p.kernelParams.add(2)).cast::<u64>().add(1) };
            assert_eq!(second, 0x44);
            assert_eq!(
                (p.gridDimX, p.blockDimX, p.extra, p.kern, p.ctx),
                (4, 256, ptr::null_mut(), ptr::null_mut(), ptr::null_mut())
            );
        });
        let words: Vec<u64> = (0..40).collect();
        let many = spec(&words, false);
        many.with_params(|p| {
            // SAFETY: forty parameter pointers, past the inline array.
            let last = unsafe { **p.kernelParams.add(39).cast::<*const u64>() };
            assert_eq!(last, 39);
        });
        spec(&[], false).with_params(|p| assert!(p.kernelParams.is_null()));
    }

    #[test]
    fn equal_launches_compare_equal_and_any_change_differs() {
        let a = spec(&[1, 2, 3, 4096], true);
        assert_eq!(a, spec(&[1, 2, 3, 4096], true));
        assert_ne!(a, spec(&[1, 2, 3, 4095], true));
        assert_ne!(a, spec(&[1, 2, 3, 4096], false));
        let mut b = a.clone();
        b.cfg.grid.0 = 5;
        assert_ne!(a, b);
    }

    #[test]
    fn memsets_keep_their_shape_when_only_address_and_value_change() {
        let m = MemsetRaw { dst: 0x1000, value: 7, element_size: 4, count: 64 };
        assert!(m.same_shape(&MemsetRaw { dst: 0x2000, value: 9, ..m }));
        assert!(!m.same_shape(&MemsetRaw { count: 65, ..m }));
        assert!(!m.same_shape(&MemsetRaw { element_size: 1, ..m }));
        let p = m.params();
        assert_eq!((p.dst, p.value, p.elementSize, p.width, p.height, p.pitch), (0x1000, 7, 4, 64, 1, 0));
    }
}
