//! Graphs: creating, destroying and inspecting them, and adding nodes and
//! edges. Calls of entries with several ABIs go through [`crate::adapt`].

use std::ffi::CStr;
use std::os::raw::c_uint;

use super::{check, ptr_or_null, DriverError, Result};
use crate::adapt::GraphEdge;
use crate::functions::DriverFns;
use crate::types::*;

/// `cuGraphCreate(flags)` (`flags` must be 0): an empty graph.
#[inline]
pub fn create(d: &DriverFns, flags: c_uint) -> Result<CUgraph> {
    let mut g: CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks the flags.
    DriverError::check("cuGraphCreate", unsafe { (d.cuGraphCreate)(&mut g, flags) })?;
    Ok(g)
}

/// `cuGraphDestroy(graph)`.
///
/// # Safety
/// `graph` is a live graph we own, destroyed once, not used afterwards
/// (executables instantiated from it do not need it).
#[inline]
pub unsafe fn destroy(d: &DriverFns, graph: CUgraph) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuGraphDestroy", unsafe { (d.cuGraphDestroy)(graph) })
}

/// `cuGraphGetNodes(graph, NULL)`: how many nodes `graph` has.
///
/// # Safety
/// `graph` is a live graph.
#[inline]
pub unsafe fn node_count(d: &DriverFns, graph: CUgraph) -> Result<usize> {
    let mut n = 0usize;
    // SAFETY: the caller's promise; a null array asks for the count only.
    DriverError::check("cuGraphGetNodes", unsafe { (d.cuGraphGetNodes)(graph, std::ptr::null_mut(), &mut n) })?;
    Ok(n)
}

/// `cuGraphGetNodes(graph, nodes)`: fills `nodes` with the graph's first
/// nodes; how many the graph has (more than `nodes.len()` when it did not
/// hold them all). An empty slice asks for the count only.
///
/// # Safety
/// `graph` is a live graph.
#[inline]
pub unsafe fn get_nodes_into(d: &DriverFns, graph: CUgraph, nodes: &mut [CUgraphNode]) -> Result<usize> {
    let mut n = nodes.len();
    let array = super::mut_ptr_or_null(nodes);
    // SAFETY: the caller's promise; room for `n` nodes (the driver writes at
    // most `n`), or null to ask for the count.
    DriverError::check("cuGraphGetNodes", unsafe { (d.cuGraphGetNodes)(graph, array, &mut n) })?;
    Ok(n)
}

/// Every node of `graph`, in the driver's order: the count, then (for a
/// graph with nodes) the list, two `cuGraphGetNodes`.
///
/// # Safety
/// `graph` is a live graph, not changed by another thread during the call.
pub unsafe fn get_nodes(d: &DriverFns, graph: CUgraph) -> Result<Vec<CUgraphNode>> {
    // SAFETY: the caller's promise.
    let n = unsafe { node_count(d, graph) }?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut nodes: Vec<CUgraphNode> = vec![std::ptr::null_mut(); n];
    // SAFETY: the caller's promise.
    let got = unsafe { get_nodes_into(d, graph, &mut nodes) }?;
    nodes.truncate(got);
    Ok(nodes)
}

/// `cuGraphNodeGetType(node)`: a `CU_GRAPH_NODE_TYPE_*` value.
///
/// # Safety
/// `node` is a node of a live graph.
#[inline]
pub unsafe fn node_get_type(d: &DriverFns, node: CUgraphNode) -> Result<CUgraphNodeType> {
    let mut t: CUgraphNodeType = 0;
    // SAFETY: the caller's promise; valid out-pointer.
    DriverError::check("cuGraphNodeGetType", unsafe { (d.cuGraphNodeGetType)(node, &mut t) })?;
    Ok(t)
}

/// Every edge of `graph` (`cuGraphGetEdges`, whichever ABI the driver has:
/// annotations only through the 12030 ABI; `None` without either). See
/// [`DriverFns::graph_edges`].
///
/// # Safety
/// `graph` is a live graph, not changed by another thread during the call.
pub unsafe fn get_edges(d: &DriverFns, graph: CUgraph) -> Option<Result<Vec<GraphEdge>>> {
    // SAFETY: the caller's promise.
    let edges = unsafe { d.graph_edges(graph) }?;
    Some(edges.map_err(|code| DriverError { call: "cuGraphGetEdges", code }))
}

/// `cuGraphAddKernelNode` after `deps` (full edges), whichever ABI the
/// driver has (`None` without either). See
/// [`DriverFns::graph_add_kernel_node`].
///
/// # Safety
/// As [`DriverFns::graph_add_kernel_node`].
#[inline]
pub unsafe fn add_kernel_node(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    params: &CUDA_KERNEL_NODE_PARAMS_v2,
) -> Option<Result<CUgraphNode>> {
    // SAFETY: the caller's promise.
    let added = unsafe { d.graph_add_kernel_node(graph, deps, params) }?;
    Some(added.map_err(|code| DriverError { call: "cuGraphAddKernelNode", code }))
}

/// `cuGraphAddMemsetNode` after `deps`, for memory of `ctx`.
///
/// # Safety
/// `graph` is a live graph of `ctx` not used by another thread during the
/// call, `deps` its nodes, and the range `params` describes lies inside
/// memory of `ctx`.
#[inline]
pub unsafe fn add_memset_node(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    params: &CUDA_MEMSET_NODE_PARAMS_v1,
    ctx: CUcontext,
) -> Result<CUgraphNode> {
    let mut node: CUgraphNode = std::ptr::null_mut();
    // SAFETY: the caller's promise; `deps` holds `deps.len()` nodes (or is
    // null); valid out-pointer.
    DriverError::check("cuGraphAddMemsetNode", unsafe {
        (d.cuGraphAddMemsetNode)(&mut node, graph, ptr_or_null(deps), deps.len(), params, ctx)
    })?;
    Ok(node)
}

/// `cuGraphAddChildGraphNode` after `deps`: a copy of `child` as one node.
///
/// # Safety
/// `graph` and `child` are live graphs of one context, `graph` not used by
/// another thread during the call, `deps` its nodes.
#[inline]
pub unsafe fn add_child_graph_node(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    child: CUgraph,
) -> Result<CUgraphNode> {
    let mut node: CUgraphNode = std::ptr::null_mut();
    // SAFETY: the caller's promise; as in `add_memset_node`.
    DriverError::check("cuGraphAddChildGraphNode", unsafe {
        (d.cuGraphAddChildGraphNode)(&mut node, graph, ptr_or_null(deps), deps.len(), child)
    })?;
    Ok(node)
}

/// `cuGraphAddNode` after `deps`, whichever ABI the driver has (`None`
/// without either); the driver may write to `params` (a conditional node's
/// bodies). See [`DriverFns::graph_add_node`].
///
/// # Safety
/// As [`DriverFns::graph_add_node`].
#[inline]
pub unsafe fn add_node(
    d: &DriverFns,
    graph: CUgraph,
    deps: &[CUgraphNode],
    edge_data: Option<&[CUgraphEdgeData]>,
    params: &mut CUgraphNodeParams,
) -> Option<Result<CUgraphNode>> {
    // SAFETY: the caller's promise; `params` is borrowed mutably for the call.
    let added = unsafe { d.graph_add_node(graph, deps, edge_data, params) }?;
    Some(added.map_err(|code| DriverError { call: "cuGraphAddNode", code }))
}

/// `cuGraphAddDependencies`: the edges `from[i] -> to[i]`, with `data[i]`
/// (or full edges), whichever ABI the driver has (`None` without either).
/// See [`DriverFns::graph_add_dependencies`].
///
/// # Safety
/// As [`DriverFns::graph_add_dependencies`].
#[inline]
pub unsafe fn add_dependencies(
    d: &DriverFns,
    graph: CUgraph,
    from: &[CUgraphNode],
    to: &[CUgraphNode],
    data: Option<&[CUgraphEdgeData]>,
) -> Option<Result<()>> {
    // SAFETY: the caller's promise.
    let code = unsafe { d.graph_add_dependencies(graph, from, to, data) }?;
    Some(check("cuGraphAddDependencies", code))
}

/// `cuGraphKernelNodeSetParams` (a graph that is not instantiated),
/// whichever ABI the driver has (`None` without either). See
/// [`DriverFns::graph_kernel_node_set_params`].
///
/// # Safety
/// As [`DriverFns::graph_kernel_node_set_params`].
#[inline]
pub unsafe fn kernel_node_set_params(
    d: &DriverFns,
    node: CUgraphNode,
    params: &CUDA_KERNEL_NODE_PARAMS_v2,
) -> Option<Result<()>> {
    // SAFETY: the caller's promise.
    let code = unsafe { d.graph_kernel_node_set_params(node, params) }?;
    Some(check("cuGraphKernelNodeSetParams", code))
}

/// `cuGraphConditionalHandleCreate(graph, ctx, default, flags)` (CUDA
/// 12.3+; `None` without it): a condition for conditional nodes of
/// `graph`.
///
/// # Safety
/// `graph` is a live graph of `ctx`.
#[inline]
pub unsafe fn conditional_handle_create(
    d: &DriverFns,
    graph: CUgraph,
    ctx: CUcontext,
    default_launch_value: c_uint,
    flags: c_uint,
) -> Option<Result<CUgraphConditionalHandle>> {
    let create = d.cuGraphConditionalHandleCreate?;
    let mut handle: CUgraphConditionalHandle = 0;
    // SAFETY: the caller's promise; valid out-pointer.
    let code = unsafe { create(&mut handle, graph, ctx, default_launch_value, flags) };
    Some(DriverError::check("cuGraphConditionalHandleCreate", code).map(|()| handle))
}

/// `cuGraphDebugDotPrint(graph, path, flags)` (CUDA 11.3+; `None` without
/// it): writes the graph as Graphviz DOT.
///
/// # Safety
/// `graph` is a live graph.
#[inline]
pub unsafe fn debug_dot_print(d: &DriverFns, graph: CUgraph, path: &CStr, flags: c_uint) -> Option<Result<()>> {
    let print = d.cuGraphDebugDotPrint?;
    // SAFETY: the caller's promise; a NUL-terminated path.
    Some(DriverError::check("cuGraphDebugDotPrint", unsafe { print(graph, path.as_ptr(), flags) }))
}
