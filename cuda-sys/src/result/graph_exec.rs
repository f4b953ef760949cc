//! Executable graphs: instantiation, launch, destruction and updates in
//! place (whole-graph and node by node).

use std::os::raw::c_ulonglong;

use super::{check, DriverError, Result};
use crate::adapt::GraphExecUpdate;
use crate::constants::*;
use crate::functions::DriverFns;
use crate::types::*;

/// `cuGraphInstantiateWithFlags(graph, flags)`.
///
/// # Safety
/// `graph` is a live graph of the current context, not changed by another
/// thread during the call.
#[inline]
pub unsafe fn instantiate(d: &DriverFns, graph: CUgraph, flags: c_ulonglong) -> Result<CUgraphExec> {
    let mut exec: CUgraphExec = std::ptr::null_mut();
    // SAFETY: the caller's promise; valid out-pointer.
    DriverError::check("cuGraphInstantiateWithFlags", unsafe {
        (d.cuGraphInstantiateWithFlags)(&mut exec, graph, flags)
    })?;
    Ok(exec)
}

/// `cuGraphLaunch(exec, stream)`.
///
/// # Safety
/// `exec` is a live executable graph and `stream` a live stream, of one
/// context; the memory its nodes use stays valid until the launch is done.
#[inline]
pub unsafe fn launch(d: &DriverFns, exec: CUgraphExec, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuGraphLaunch", unsafe { (d.cuGraphLaunch)(exec, stream) })
}

/// `cuGraphExecDestroy(exec)` (a launch in flight completes first).
///
/// # Safety
/// `exec` is a live executable graph, destroyed once, not used afterwards.
#[inline]
pub unsafe fn destroy(d: &DriverFns, exec: CUgraphExec) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuGraphExecDestroy", unsafe { (d.cuGraphExecDestroy)(exec) })
}

/// `cuGraphExecUpdate(exec, graph)`, whichever ABI the driver has (`None`
/// without either; see [`DriverFns::graph_exec_update`]). `Ok` when the
/// executable was updated or the driver refused the update
/// (`CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`: [`GraphExecUpdate::refused`],
/// the executable unchanged and usable); any other status is an error.
///
/// # Safety
/// As [`DriverFns::graph_exec_update`].
#[inline]
pub unsafe fn update(d: &DriverFns, exec: CUgraphExec, graph: CUgraph) -> Option<Result<GraphExecUpdate>> {
    // SAFETY: the caller's promise.
    let outcome = unsafe { d.graph_exec_update(exec, graph) }?;
    Some(match outcome.status {
        CUDA_SUCCESS | CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE => Ok(outcome),
        code => Err(DriverError { call: "cuGraphExecUpdate", code }),
    })
}

/// `cuGraphExecKernelNodeSetParams`, whichever ABI the driver has (`None`
/// without either). See [`DriverFns::graph_exec_kernel_node_set_params`].
///
/// # Safety
/// As [`DriverFns::graph_exec_kernel_node_set_params`].
#[inline]
pub unsafe fn kernel_node_set_params(
    d: &DriverFns,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: &CUDA_KERNEL_NODE_PARAMS_v2,
) -> Option<Result<()>> {
    // SAFETY: the caller's promise.
    let code = unsafe { d.graph_exec_kernel_node_set_params(exec, node, params) }?;
    Some(check("cuGraphExecKernelNodeSetParams", code))
}

/// `cuGraphExecMemsetNodeSetParams`: a memset node's parameters, for
/// memory of `ctx`.
///
/// # Safety
/// `exec` is a live executable graph of `ctx` not used by another thread
/// during the call, `node` a memset node of its source graph, and the
/// range `params` describes lies inside memory of `ctx`.
#[inline]
pub unsafe fn memset_node_set_params(
    d: &DriverFns,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: &CUDA_MEMSET_NODE_PARAMS_v1,
    ctx: CUcontext,
) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuGraphExecMemsetNodeSetParams", unsafe {
        (d.cuGraphExecMemsetNodeSetParams)(exec, node, params, ctx)
    })
}

/// `cuGraphExecChildGraphNodeSetParams(exec, node, child)` (CUDA 11.1+;
/// `None` without it): the child graph node's work from `child`.
///
/// # Safety
/// `exec` is a live executable graph not used by another thread during the
/// call; `node` a child graph node of its source graph, whose graph has
/// `child`'s topology and node order; `child` a live graph of the same
/// context.
#[inline]
pub unsafe fn child_graph_node_set_params(
    d: &DriverFns,
    exec: CUgraphExec,
    node: CUgraphNode,
    child: CUgraph,
) -> Option<Result<()>> {
    let set = d.cuGraphExecChildGraphNodeSetParams?;
    // SAFETY: the caller's promise.
    Some(DriverError::check("cuGraphExecChildGraphNodeSetParams", unsafe { set(exec, node, child) }))
}
