//! Calls that hide which ABI of an entry point the driver gave.
//!
//! Entries with older ABIs (see [`crate::functions::abi`]) are resolved
//! with the type of the ABI the driver's version reaches; callers go
//! through these methods and get one result form whichever ABI ran.

use std::ptr;

use crate::constants::*;
use crate::functions::abi;
use crate::functions::DriverFns;
use crate::types::*;

/// What an in-place update (`cuGraphExecUpdate`) reported, in the 12.0 form.
#[derive(Debug, Clone, Copy)]
pub struct GraphExecUpdate {
    /// The call's status: `CUDA_SUCCESS`, `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`
    /// when the driver refused the update, or another error.
    pub status: CUresult,
    /// The update result. Through the 10020 ABI, `result` and `errorNode`
    /// come from its two out-parameters and `errorFromNode` is null (that
    /// ABI does not report it).
    pub info: CUgraphExecUpdateResultInfo,
    /// The ABI that ran (12000 or 10020).
    pub abi_version: i32,
}

impl GraphExecUpdate {
    /// Whether the executable was updated.
    pub fn updated(&self) -> bool {
        self.status == CUDA_SUCCESS && self.info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS
    }

    /// Whether the driver refused the update (the executable is unchanged
    /// and still usable; re-instantiate instead).
    pub fn refused(&self) -> bool {
        self.status == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE
    }
}

/// One edge of a graph (`cuGraphGetEdges`).
#[derive(Debug, Clone, Copy)]
pub struct GraphEdge {
    /// The node the edge leaves.
    pub from: CUgraphNode,
    /// The node the edge enters.
    pub to: CUgraphNode,
    /// Its annotation, only through the 12030 ABI (CUDA 12.3+ drivers);
    /// `None` through the 10000 ABI, which has no edge data.
    pub data: Option<CUgraphEdgeData>,
}

impl DriverFns {
    /// Updates `exec` in place from `graph` through whichever ABI of
    /// `cuGraphExecUpdate` the driver has; `None` when it has none.
    ///
    /// # Safety
    /// `exec` and `graph` are live handles of the context current on this
    /// thread, and nothing else uses `exec` during the call.
    pub unsafe fn graph_exec_update(&self, exec: CUgraphExec, graph: CUgraph) -> Option<GraphExecUpdate> {
        let mut info = CUgraphExecUpdateResultInfo {
            result: CU_GRAPH_EXEC_UPDATE_SUCCESS,
            errorNode: ptr::null_mut(),
            errorFromNode: ptr::null_mut(),
        };
        let abi = self.cuGraphExecUpdate?;
        let status = match abi {
            abi::cuGraphExecUpdate::Abi::V12000(f) => {
                // SAFETY: the 12.0 ABI; live handles (the caller's promise),
                // valid out-pointer.
                unsafe { f(exec, graph, &mut info) }
            }
            abi::cuGraphExecUpdate::Abi::V10020(f) => {
                let mut error_node: CUgraphNode = ptr::null_mut();
                let mut result: CUgraphExecUpdateResult = CU_GRAPH_EXEC_UPDATE_SUCCESS;
                // SAFETY: the 10020 ABI; live handles (the caller's promise),
                // valid out-pointers.
                let status = unsafe { f(exec, graph, &mut error_node, &mut result) };
                info.result = result;
                info.errorNode = error_node;
                status
            }
        };
        Some(GraphExecUpdate { status, info, abi_version: abi.abi_version() })
    }

    /// Whether `cuGraphGetEdges` reports edge data here (its 12030 ABI).
    pub fn has_edge_data(&self) -> bool {
        matches!(self.cuGraphGetEdges, Some(abi::cuGraphGetEdges::Abi::V12030(_)))
    }

    /// Every edge of `graph` through whichever ABI of `cuGraphGetEdges` the
    /// driver has (edge data only through the 12030 ABI); `None` when it has
    /// none, `Some(Err(status))` when a call failed.
    ///
    /// # Safety
    /// `graph` is a live graph of the context current on this thread, not
    /// changed by another thread during the call.
    pub unsafe fn graph_edges(&self, graph: CUgraph) -> Option<Result<Vec<GraphEdge>, CUresult>> {
        let abi = self.cuGraphGetEdges?;
        let null = ptr::null_mut();
        let mut n = 0usize;
        let res = match abi {
            // SAFETY: live graph; all-null arrays ask for the count only.
            abi::cuGraphGetEdges::Abi::V12030(f) => unsafe { f(graph, null, null, ptr::null_mut(), &mut n) },
            // SAFETY: as above, the 10000 ABI.
            abi::cuGraphGetEdges::Abi::V10000(f) => unsafe { f(graph, null, null, &mut n) },
        };
        if res != CUDA_SUCCESS {
            return Some(Err(res));
        }
        let mut from = vec![ptr::null_mut(); n];
        let mut to = vec![ptr::null_mut(); n];
        let zero = CUgraphEdgeData { from_port: 0, to_port: 0, type_: 0, reserved: [0; 5] };
        let mut got = n;
        let (res, data) = match abi {
            abi::cuGraphGetEdges::Abi::V12030(f) => {
                let mut data = vec![zero; n];
                // SAFETY: each array holds `n` entries, as `got` says.
                let res = unsafe { f(graph, from.as_mut_ptr(), to.as_mut_ptr(), data.as_mut_ptr(), &mut got) };
                (res, Some(data))
            }
            abi::cuGraphGetEdges::Abi::V10000(f) => {
                // SAFETY: each array holds `n` entries, as `got` says.
                (unsafe { f(graph, from.as_mut_ptr(), to.as_mut_ptr(), &mut got) }, None)
            }
        };
        if res != CUDA_SUCCESS {
            return Some(Err(res));
        }
        let count = got.min(n);
        let edges =
            (0..count).map(|i| GraphEdge { from: from[i], to: to[i], data: data.as_ref().map(|d| d[i]) }).collect();
        Some(Ok(edges))
    }
}

// --- graph building

/// The v1 layout of `p` (the 10000/10010 ABIs): its first ten fields.
/// `kern` and `ctx` have no v1 counterpart; with `func` set the driver
/// ignores them in v2 as well, so the two describe the same launch.
pub fn kernel_node_params_v1(p: &CUDA_KERNEL_NODE_PARAMS_v2) -> CUDA_KERNEL_NODE_PARAMS_v1 {
    CUDA_KERNEL_NODE_PARAMS_v1 {
        func: p.func,
        gridDimX: p.gridDimX,
        gridDimY: p.gridDimY,
        gridDimZ: p.gridDimZ,
        blockDimX: p.blockDimX,
        blockDimY: p.blockDimY,
        blockDimZ: p.blockDimZ,
        sharedMemBytes: p.sharedMemBytes,
        kernelParams: p.kernelParams,
        extra: p.extra,
    }
}

/// Whether an edge annotation is the plain one (a full dependency from the
/// default port), which the 10000 ABI of `cuGraphAddDependencies` expresses.
pub fn edge_is_default(e: &CUgraphEdgeData) -> bool {
    e.from_port == CU_GRAPH_KERNEL_NODE_PORT_DEFAULT
        && e.to_port == 0
        && e.type_ as CUgraphDependencyType == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT
}

impl DriverFns {
    /// Adds a kernel node to `graph` after `deps` (full edges) through
    /// whichever ABI of `cuGraphAddKernelNode` the driver has: the v2
    /// parameters as given (12000), or converted to v1 (10000, which needs
    /// `func` set: a `kern`-only launch is `CUDA_ERROR_NOT_SUPPORTED`
    /// there, without a driver call). `None` when the driver has neither;
    /// else the node or the failing status.
    ///
    /// # Safety
    /// `graph` is a live graph not used by another thread during the call;
    /// `deps` are nodes of it; `params` describes a valid launch of a live
    /// function (its `kernelParams` point at one value per kernel parameter,
    /// read during the call only).
    pub unsafe fn graph_add_kernel_node(
        &self,
        graph: CUgraph,
        deps: &[CUgraphNode],
        params: &CUDA_KERNEL_NODE_PARAMS_v2,
    ) -> Option<Result<CUgraphNode, CUresult>> {
        let mut node: CUgraphNode = ptr::null_mut();
        let deps_ptr = if deps.is_empty() { ptr::null() } else { deps.as_ptr() };
        let res = match self.cuGraphAddKernelNode? {
            // SAFETY: the 12.0 ABI; the caller's promise for the handles and
            // parameters; `deps` holds `deps.len()` nodes; valid out-pointer.
            abi::cuGraphAddKernelNode::Abi::V12000(f) => unsafe { f(&mut node, graph, deps_ptr, deps.len(), params) },
            abi::cuGraphAddKernelNode::Abi::V10000(f) => {
                if params.func.is_null() {
                    return Some(Err(CUDA_ERROR_NOT_SUPPORTED));
                }
                let v1 = kernel_node_params_v1(params);
                // SAFETY: as above, through the 10000 ABI with the same
                // launch in the v1 layout.
                unsafe { f(&mut node, graph, deps_ptr, deps.len(), &v1) }
            }
        };
        Some(if res == CUDA_SUCCESS { Ok(node) } else { Err(res) })
    }

    /// Sets a kernel node's parameters in an executable graph through
    /// whichever ABI of `cuGraphExecKernelNodeSetParams` the driver has
    /// (v2 as given at 12000, v1 at 10010; a `kern`-only launch is
    /// `CUDA_ERROR_NOT_SUPPORTED` at 10010, without a driver call). `None`
    /// when it has neither; else the call's status.
    ///
    /// # Safety
    /// `exec` is a live executable graph not used by another thread during
    /// the call, `node` a kernel node of the graph it was instantiated from,
    /// `params` a valid launch as for [`DriverFns::graph_add_kernel_node`].
    pub unsafe fn graph_exec_kernel_node_set_params(
        &self,
        exec: CUgraphExec,
        node: CUgraphNode,
        params: &CUDA_KERNEL_NODE_PARAMS_v2,
    ) -> Option<CUresult> {
        Some(match self.cuGraphExecKernelNodeSetParams? {
            // SAFETY: the 12.0 ABI; the caller's promise.
            abi::cuGraphExecKernelNodeSetParams::Abi::V12000(f) => unsafe { f(exec, node, params) },
            abi::cuGraphExecKernelNodeSetParams::Abi::V10010(f) => {
                if params.func.is_null() {
                    return Some(CUDA_ERROR_NOT_SUPPORTED);
                }
                let v1 = kernel_node_params_v1(params);
                // SAFETY: the 10010 ABI with the same launch in the v1 layout.
                unsafe { f(exec, node, &v1) }
            }
        })
    }

    /// Whether `cuGraphAddDependencies` takes edge data here (its 12030
    /// ABI): programmatic edges can be built.
    pub fn has_programmatic_edges(&self) -> bool {
        matches!(self.cuGraphAddDependencies, Some(abi::cuGraphAddDependencies::Abi::V12030(_)))
    }

    /// Adds the edges `from[i] -> to[i]` to `graph` through whichever ABI
    /// of `cuGraphAddDependencies` the driver has. `data` (one annotation
    /// per edge, or `None` for full edges) goes to the 12030 ABI as given;
    /// the 10000 ABI takes full edges only, so an annotation other than the
    /// default one is `CUDA_ERROR_NOT_SUPPORTED` there (no driver call), as
    /// are arrays of different lengths (`CUDA_ERROR_INVALID_VALUE`). `None`
    /// when the driver has neither ABI.
    ///
    /// # Safety
    /// `graph` is a live graph not used by another thread during the call,
    /// and every node in `from` and `to` is one of its nodes.
    pub unsafe fn graph_add_dependencies(
        &self,
        graph: CUgraph,
        from: &[CUgraphNode],
        to: &[CUgraphNode],
        data: Option<&[CUgraphEdgeData]>,
    ) -> Option<CUresult> {
        let abi = self.cuGraphAddDependencies?;
        if from.len() != to.len() || data.is_some_and(|d| d.len() != from.len()) {
            return Some(CUDA_ERROR_INVALID_VALUE);
        }
        if from.is_empty() {
            return Some(CUDA_SUCCESS);
        }
        Some(match abi {
            abi::cuGraphAddDependencies::Abi::V12030(f) => {
                let d = data.map_or(ptr::null(), |d| d.as_ptr());
                // SAFETY: the 12.3 ABI; three arrays of `from.len()` entries
                // (or no edge data); the caller's promise for the handles.
                unsafe { f(graph, from.as_ptr(), to.as_ptr(), d, from.len()) }
            }
            abi::cuGraphAddDependencies::Abi::V10000(f) => {
                if data.is_some_and(|d| !d.iter().all(edge_is_default)) {
                    return Some(CUDA_ERROR_NOT_SUPPORTED);
                }
                // SAFETY: the 10000 ABI; two arrays of `from.len()` entries.
                unsafe { f(graph, from.as_ptr(), to.as_ptr(), from.len()) }
            }
        })
    }
}
