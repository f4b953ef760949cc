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
        if n == 0 {
            // No second call with empty arrays (which some drivers refuse).
            return Some(Ok(Vec::new()));
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

/// Any node's parameters (`cuGraphAddNode`), made without union code.
impl CUgraphNodeParams_st {
    /// All zeros but `type_`: reserved bytes and the union's unused ones.
    fn zeroed(type_: CUgraphNodeType) -> Self {
        CUgraphNodeParams_st {
            type_,
            reserved0: [0; 3],
            __bindgen_anon_1: CUgraphNodeParams_st__bindgen_ty_1 { reserved1: [0; 29] },
            reserved2: 0,
        }
    }

    /// The parameters of a conditional node (`CU_GRAPH_NODE_TYPE_CONDITIONAL`),
    /// every other byte zero. After `cuGraphAddNode`, read the body graphs
    /// the driver made through [`Self::conditional_params`].
    pub fn conditional(params: CUDA_CONDITIONAL_NODE_PARAMS) -> Self {
        let mut p = Self::zeroed(CU_GRAPH_NODE_TYPE_CONDITIONAL);
        p.__bindgen_anon_1.conditional = params;
        p
    }

    /// The parameters of a kernel node (`CU_GRAPH_NODE_TYPE_KERNEL`) with
    /// the launch `params` describes, every other byte zero (the kernel
    /// member's padding too: its fields are set one by one over zeros).
    pub fn kernel(params: &CUDA_KERNEL_NODE_PARAMS_v2) -> Self {
        let mut p = Self::zeroed(CU_GRAPH_NODE_TYPE_KERNEL);
        let k = &mut p.__bindgen_anon_1;
        k.kernel.func = params.func;
        k.kernel.gridDimX = params.gridDimX;
        k.kernel.gridDimY = params.gridDimY;
        k.kernel.gridDimZ = params.gridDimZ;
        k.kernel.blockDimX = params.blockDimX;
        k.kernel.blockDimY = params.blockDimY;
        k.kernel.blockDimZ = params.blockDimZ;
        k.kernel.sharedMemBytes = params.sharedMemBytes;
        k.kernel.kernelParams = params.kernelParams;
        k.kernel.extra = params.extra;
        k.kernel.kern = params.kern;
        k.kernel.ctx = params.ctx;
        p
    }

    /// The conditional node's parameters when `type_` is
    /// `CU_GRAPH_NODE_TYPE_CONDITIONAL` (with `phGraph_out` as the driver
    /// set it, after `cuGraphAddNode`); `None` for any other type.
    pub fn conditional_params(&self) -> Option<CUDA_CONDITIONAL_NODE_PARAMS> {
        if self.type_ != CU_GRAPH_NODE_TYPE_CONDITIONAL {
            return None;
        }
        // `reserved1`, `kernel` and `conditional` all initialise bytes 0..32
        // (`kernel`'s padding is at 36..40), which hold integers and raw
        // pointers, valid whatever their bits.
        // SAFETY: each union member sets the 32 bytes read (ints, pointers).
        Some(unsafe { self.__bindgen_anon_1.conditional })
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

    /// Sets a kernel node's parameters in a graph that is not instantiated
    /// through whichever ABI of `cuGraphKernelNodeSetParams` the driver has
    /// (v2 as given at 12000, v1 at 10000; a `kern`-only launch is
    /// `CUDA_ERROR_NOT_SUPPORTED` at 10000, without a driver call). `None`
    /// when it has neither; else the call's status.
    ///
    /// # Safety
    /// `node` is a kernel node of a live graph not used by another thread
    /// during the call, `params` a valid launch as for
    /// [`DriverFns::graph_add_kernel_node`].
    pub unsafe fn graph_kernel_node_set_params(
        &self,
        node: CUgraphNode,
        params: &CUDA_KERNEL_NODE_PARAMS_v2,
    ) -> Option<CUresult> {
        Some(match self.cuGraphKernelNodeSetParams? {
            // SAFETY: the 12.0 ABI; the caller's promise.
            abi::cuGraphKernelNodeSetParams::Abi::V12000(f) => unsafe { f(node, params) },
            abi::cuGraphKernelNodeSetParams::Abi::V10000(f) => {
                if params.func.is_null() {
                    return Some(CUDA_ERROR_NOT_SUPPORTED);
                }
                let v1 = kernel_node_params_v1(params);
                // SAFETY: the 10000 ABI with the same launch in the v1 layout.
                unsafe { f(node, &v1) }
            }
        })
    }

    /// Adds a node of any type to `graph` after `deps` through whichever
    /// ABI of `cuGraphAddNode` the driver has. `edge_data` (one annotation
    /// per dependency, or `None` for full edges) goes to the 12030 ABI as
    /// given; the 12020 ABI takes full edges only, so an annotation other
    /// than the default one is `CUDA_ERROR_NOT_SUPPORTED` there (no driver
    /// call), as is edge data of another length than `deps`
    /// (`CUDA_ERROR_INVALID_VALUE`) through either. `None` when the driver
    /// has neither ABI; else the node or the failing status. The driver
    /// may write to `*params` (a conditional node's body graphs: read them
    /// with [`CUgraphNodeParams_st::conditional_params`]).
    ///
    /// # Safety
    /// `graph` is a live graph not used by another thread during the call;
    /// `deps` are nodes of it; `params` points at parameters valid for
    /// their `type_` (made with [`CUgraphNodeParams_st::conditional`] or
    /// [`CUgraphNodeParams_st::kernel`]), writable and not otherwise
    /// borrowed during the call.
    pub unsafe fn graph_add_node(
        &self,
        graph: CUgraph,
        deps: &[CUgraphNode],
        edge_data: Option<&[CUgraphEdgeData]>,
        params: *mut CUgraphNodeParams,
    ) -> Option<Result<CUgraphNode, CUresult>> {
        let abi = self.cuGraphAddNode?;
        if edge_data.is_some_and(|d| d.len() != deps.len()) {
            return Some(Err(CUDA_ERROR_INVALID_VALUE));
        }
        let mut node: CUgraphNode = ptr::null_mut();
        let deps_ptr = if deps.is_empty() { ptr::null() } else { deps.as_ptr() };
        let res = match abi {
            abi::cuGraphAddNode::Abi::V12030(f) => {
                let d = match edge_data {
                    Some(d) if !d.is_empty() => d.as_ptr(),
                    _ => ptr::null(),
                };
                // SAFETY: the 12.3 ABI; `deps` (and the edge data, if any)
                // hold `deps.len()` entries; the caller's promise for the
                // handles and parameters; valid out-pointer.
                unsafe { f(&mut node, graph, deps_ptr, d, deps.len(), params) }
            }
            abi::cuGraphAddNode::Abi::V12020(f) => {
                if edge_data.is_some_and(|d| !d.iter().all(edge_is_default)) {
                    return Some(Err(CUDA_ERROR_NOT_SUPPORTED));
                }
                // SAFETY: the 12.2 ABI; as above, without edge data.
                unsafe { f(&mut node, graph, deps_ptr, deps.len(), params) }
            }
        };
        Some(if res == CUDA_SUCCESS { Ok(node) } else { Err(res) })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The 256 bytes of `p`.
    fn bytes(p: &CUgraphNodeParams) -> [u8; 256] {
        let mut out = [0u8; 256];
        // SAFETY: the constructors initialise every byte (zeros, then fields over them).
        unsafe { ptr::copy_nonoverlapping((p as *const CUgraphNodeParams).cast::<u8>(), out.as_mut_ptr(), 256) };
        out
    }

    #[test]
    fn conditional_params_zero_every_other_byte() {
        let c = CUDA_CONDITIONAL_NODE_PARAMS {
            handle: 0x0102_0304_0506_0708,
            type_: CU_GRAPH_COND_TYPE_WHILE,
            size: 1,
            phGraph_out: ptr::null_mut(),
            ctx: 0x40usize as CUcontext,
        };
        let p = CUgraphNodeParams::conditional(c);
        assert_eq!(p.type_, CU_GRAPH_NODE_TYPE_CONDITIONAL);
        let b = bytes(&p);
        assert_eq!(&b[..4], &CU_GRAPH_NODE_TYPE_CONDITIONAL.to_ne_bytes());
        assert_eq!(&b[16..24], &c.handle.to_ne_bytes());
        assert_eq!(&b[24..28], &CU_GRAPH_COND_TYPE_WHILE.to_ne_bytes());
        assert_eq!(&b[28..32], &1u32.to_ne_bytes());
        assert_eq!(&b[40..48], &0x40usize.to_ne_bytes());
        assert!(b[4..16].iter().chain(&b[32..40]).chain(&b[48..]).all(|&x| x == 0));
        let back = p.conditional_params().expect("conditional");
        assert_eq!((back.handle, back.type_, back.size, back.ctx), (c.handle, c.type_, 1, c.ctx));
    }

    #[test]
    fn kernel_params_zero_every_other_byte_padding_included() {
        let k = CUDA_KERNEL_NODE_PARAMS_v2 {
            func: 0xF0usize as CUfunction,
            gridDimX: 1,
            gridDimY: 2,
            gridDimZ: 3,
            blockDimX: 4,
            blockDimY: 5,
            blockDimZ: 6,
            sharedMemBytes: 7,
            kernelParams: 0x80usize as *mut *mut c_void,
            extra: ptr::null_mut(),
            kern: ptr::null_mut(),
            ctx: 0x90usize as CUcontext,
        };
        let p = CUgraphNodeParams::kernel(&k);
        assert_eq!(p.type_, CU_GRAPH_NODE_TYPE_KERNEL);
        assert!(p.conditional_params().is_none());
        let b = bytes(&p);
        assert_eq!(&b[16..24], &0xF0usize.to_ne_bytes());
        for (i, v) in (1u32..=7).enumerate() {
            assert_eq!(&b[24 + 4 * i..28 + 4 * i], &v.to_ne_bytes(), "dimension {i}");
        }
        assert_eq!(&b[52..56], &[0; 4], "the member's padding");
        assert_eq!(&b[56..64], &0x80usize.to_ne_bytes());
        assert_eq!(&b[80..88], &0x90usize.to_ne_bytes());
        assert!(b[4..16].iter().chain(&b[64..80]).chain(&b[88..]).all(|&x| x == 0));
    }
}
