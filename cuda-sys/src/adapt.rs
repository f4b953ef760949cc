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
