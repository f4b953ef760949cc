//! Graph building: graphs, nodes of each kind through each ABI, edges,
//! conditional handles, queries, DOT output.

use cuda_sys::*;

use super::{edge_data, h, p, LaunchArgs};
use crate::handle::Kind;
use crate::objects::graph::{Condition, EdgeData, Node, NodeKind, Owner};
use crate::objects::work::{Memset, Work};
use crate::state::{entry, input, out, slice, State, CUDA_ERROR_LOSSY_QUERY, R};

/// `CU_GRAPH_INSTANTIATE_FLAG_*` the double accepts (auto-free on launch,
/// upload, use node priority); device launch is not simulated.
const INSTANTIATE_FLAGS: u64 = 1 | 2 | 8;

impl State {
    /// A live graph.
    pub fn graph(&self, g: CUgraph) -> R<u64> {
        let v = h(g);
        self.graphs.get(v).map_err(|b| self.bad_handle(b, Kind::Graph, v))?;
        Ok(v)
    }

    /// The dependencies of a node-adding call.
    fn deps(&self, graph: u64, deps: *const CUgraphNode, n: usize) -> R<Vec<u64>> {
        let d: Vec<u64> = slice(deps, n)?.iter().map(|x| h(*x)).collect();
        self.check_deps(graph, &d)?;
        Ok(d)
    }

    /// A memset node's work from its parameters and context.
    fn memset_of(&self, m: &CUDA_MEMSET_NODE_PARAMS_v1, ctx: CUcontext) -> R<Memset> {
        let c = h(ctx);
        let c = self.live_ctx(c)?;
        if !matches!(m.elementSize, 1 | 2 | 4) || (m.height > 1 && m.pitch < m.width * m.elementSize as usize) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let w = Memset {
            dst: m.dst,
            pitch: m.pitch,
            value: m.value,
            element: m.elementSize,
            width: m.width,
            height: m.height,
            device: self.ctx_device(c),
        };
        let span = w.span().ok_or(CUDA_ERROR_INVALID_VALUE)?;
        if span > 0 {
            self.memory
                .check(w.dst, span, Some(w.device))
                .map_err(|a| self.misuse(CUDA_ERROR_INVALID_VALUE, format!("memset node: {}", a.describe())))?;
        }
        Ok(w)
    }

    /// A kernel node's work.
    fn kernel_of(&self, a: &LaunchArgs) -> R<Work> {
        Ok(Work::Kernel(self.launch_of(a)?))
    }

    /// Sets a kernel node's parameters (graph not instantiated).
    fn set_kernel_node(&mut self, node: CUgraphNode, a: &LaunchArgs) -> R {
        let n = h(node);
        let old = self.nodes.get(n).map_err(|b| self.bad_handle(b, Kind::Node, n))?;
        if !matches!(old.kind, NodeKind::Work(Work::Kernel(_))) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let w = self.kernel_of(a)?;
        if let Ok(nd) = self.nodes.get_mut(n) {
            nd.kind = NodeKind::Work(w);
        }
        Ok(())
    }

    /// A conditional node: its condition's checks, its body graphs.
    fn add_conditional(
        &mut self,
        graph: u64,
        deps: &[u64],
        data: Option<&[EdgeData]>,
        c: &mut CUDA_CONDITIONAL_NODE_PARAMS,
    ) -> R<u64> {
        let cond = self.conditions.get(c.handle).map_err(|b| self.bad_handle(b, Kind::Condition, c.handle))?;
        let mut graphs = vec![graph];
        graphs.extend(self.ancestors(graph));
        if !graphs.contains(&cond.graph) {
            return Err(self.misuse(
                CUDA_ERROR_INVALID_VALUE,
                format!(
                    "condition {:#x} belongs to graph {:#x}, not to this node's graph or its parents",
                    c.handle, cond.graph
                ),
            ));
        }
        if !c.ctx.is_null() && self.owner(h(c.ctx)) != self.owner(cond.ctx) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let v12_8 = self.cfg.version >= 12080;
        let size_ok = match c.type_ {
            CU_GRAPH_COND_TYPE_IF => c.size == 1 || (v12_8 && c.size == 2),
            CU_GRAPH_COND_TYPE_WHILE => c.size == 1,
            CU_GRAPH_COND_TYPE_SWITCH => v12_8 && c.size >= 1 && c.size <= 1024,
            _ => false,
        };
        if !size_ok {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let node = self.add_node(graph, deps, data, NodeKind::Empty)?;
        let mut bodies = Vec::new();
        for _ in 0..c.size {
            bodies.push(self.new_graph(Owner::Node(node)));
        }
        let out: Box<[u64]> = bodies.clone().into_boxed_slice();
        let nd = self.nodes.get_mut(node).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        nd.kind = NodeKind::Conditional { handle: c.handle, ty: c.type_, bodies };
        nd.bodies_out = out;
        // Handles are pointer-sized values: the array reads as `CUgraph`s.
        c.phGraph_out = nd.bodies_out.as_ptr().cast::<CUgraph>().cast_mut();
        Ok(node)
    }

    /// `cuGraphAddNode`'s shared part (both ABIs).
    fn add_generic(
        &mut self,
        node: *mut CUgraphNode,
        graph: CUgraph,
        deps: *const CUgraphNode,
        data: Option<Vec<EdgeData>>,
        n: usize,
        params: *mut CUgraphNodeParams,
    ) -> R {
        let o = out(node)?;
        let g = self.graph(graph)?;
        let d = self.deps(g, deps, n)?;
        let prm = out(params)?;
        if prm.reserved0 != [0; 3] || prm.reserved2 != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `prm` is a whole `CUgraphNodeParams` (256 bytes, audited).
        let bytes = unsafe { std::slice::from_raw_parts((prm as *const CUgraphNodeParams).cast::<u8>(), 256) };
        let used = match prm.type_ {
            CU_GRAPH_NODE_TYPE_KERNEL => std::mem::size_of::<CUDA_KERNEL_NODE_PARAMS_v3>(),
            CU_GRAPH_NODE_TYPE_CONDITIONAL => std::mem::size_of::<CUDA_CONDITIONAL_NODE_PARAMS>(),
            CU_GRAPH_NODE_TYPE_EMPTY => 0,
            other => {
                return Err(
                    self.misuse(CUDA_ERROR_NOT_SUPPORTED, format!("cuGraphAddNode of type {other} is not simulated"))
                )
            }
        };
        // The driver requires every byte the type does not use to be zero
        // (the kernel member's padding after sharedMemBytes included).
        let padding = |i: usize| prm.type_ == CU_GRAPH_NODE_TYPE_KERNEL && (16 + 36..16 + 40).contains(&i);
        if bytes[16..248].iter().enumerate().any(|(i, b)| *b != 0 && (i >= used || padding(i + 16))) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let dd = data.as_deref();
        let created = match prm.type_ {
            CU_GRAPH_NODE_TYPE_KERNEL => {
                // SAFETY: the type says which union member is set.
                let k = unsafe { prm.__bindgen_anon_1.kernel };
                let w = self.kernel_of(&LaunchArgs::from(&k))?;
                self.add_node(g, &d, dd, NodeKind::Work(w))?
            }
            CU_GRAPH_NODE_TYPE_CONDITIONAL => {
                if self.cfg.version < 12030 {
                    return Err(CUDA_ERROR_INVALID_VALUE);
                }
                // SAFETY: as above.
                let c = unsafe { &mut prm.__bindgen_anon_1.conditional };
                self.add_conditional(g, &d, dd, c)?
            }
            _ => self.add_node(g, &d, dd, NodeKind::Empty)?,
        };
        *o = p(created);
        Ok(())
    }

    /// `cuGraphAddDependencies`'s shared part.
    fn add_dependencies(
        &mut self,
        graph: CUgraph,
        from: *const CUgraphNode,
        to: *const CUgraphNode,
        data: Option<Vec<EdgeData>>,
        n: usize,
    ) -> R {
        let g = self.graph(graph)?;
        let f: Vec<u64> = slice(from, n)?.iter().map(|x| h(*x)).collect();
        let t: Vec<u64> = slice(to, n)?.iter().map(|x| h(*x)).collect();
        self.add_edges(g, &f, &t, data.as_deref())
    }

    /// `cuGraphGetEdges`' shared part: the count, or the edges.
    fn get_edges(
        &self,
        graph: CUgraph,
        from: *mut CUgraphNode,
        to: *mut CUgraphNode,
        data: Option<*mut CUgraphEdgeData>,
        n: *mut usize,
    ) -> R {
        let g = self.graph(graph)?;
        let count = out(n)?;
        let edges = &self.graphs.get(g).map_err(|_| CUDA_ERROR_INVALID_VALUE)?.edges;
        let wants_data = data.is_some_and(|d| !d.is_null());
        if from.is_null() && to.is_null() {
            *count = edges.len();
            return Ok(());
        }
        if from.is_null() || to.is_null() || *count == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        if !wants_data && edges.iter().any(|e| !e.data.is_default()) {
            return Err(CUDA_ERROR_LOSSY_QUERY);
        }
        let want = *count;
        for i in 0..want {
            let e = edges.get(i);
            // SAFETY: the arrays hold `*count` entries (the call's contract).
            unsafe {
                *from.add(i) = e.map(|e| p(e.from)).unwrap_or(std::ptr::null_mut());
                *to.add(i) = e.map(|e| p(e.to)).unwrap_or(std::ptr::null_mut());
                if let Some(d) = data.filter(|d| !d.is_null()) {
                    let ed = e.map(|e| e.data).unwrap_or_default();
                    *d.add(i) = CUgraphEdgeData {
                        from_port: ed.from_port,
                        to_port: ed.to_port,
                        type_: ed.ty,
                        reserved: [0; 5],
                    };
                }
            }
        }
        *count = want.min(edges.len());
        Ok(())
    }
}

/// `cuGraphCreate` (10000): flags must be 0.
pub unsafe extern "C" fn cuGraphCreate_v10000(graph: *mut CUgraph, flags: c_uint) -> CUresult {
    entry("cuGraphCreate", 10000, |s| {
        let o = out(graph)?;
        if flags != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        *o = p(s.new_graph(Owner::Client));
        Ok(())
    })
}

/// `cuGraphDestroy` (10000): a graph of the client's (a body or child
/// copy belongs to its node).
pub unsafe extern "C" fn cuGraphDestroy_v10000(graph: CUgraph) -> CUresult {
    entry("cuGraphDestroy", 10000, |s| {
        let g = s.graph(graph)?;
        if let Ok(gr) = s.graphs.get(g) {
            if let Owner::Node(n) = gr.owner {
                return Err(s.misuse(
                    CUDA_ERROR_INVALID_VALUE,
                    format!("cuGraphDestroy of graph {g:#x}, which node {n:#x} owns"),
                ));
            }
        }
        s.destroy_graph(g);
        Ok(())
    })
}

/// `cuGraphAddKernelNode` (12000: v2 parameters).
pub unsafe extern "C" fn cuGraphAddKernelNode_v12000(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    n: usize,
    params: *const CUDA_KERNEL_NODE_PARAMS_v2,
) -> CUresult {
    entry("cuGraphAddKernelNode", 12000, |s| {
        let o = out(node)?;
        let g = s.graph(graph)?;
        let d = s.deps(g, deps, n)?;
        let w = s.kernel_of(&LaunchArgs::from(input(params)?))?;
        *o = p(s.add_node(g, &d, None, NodeKind::Work(w))?);
        Ok(())
    })
}

/// `cuGraphAddKernelNode` (10000: v1 parameters).
pub unsafe extern "C" fn cuGraphAddKernelNode_v10000(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    n: usize,
    params: *const CUDA_KERNEL_NODE_PARAMS_v1,
) -> CUresult {
    entry("cuGraphAddKernelNode", 10000, |s| {
        let o = out(node)?;
        let g = s.graph(graph)?;
        let d = s.deps(g, deps, n)?;
        let w = s.kernel_of(&LaunchArgs::from(input(params)?))?;
        *o = p(s.add_node(g, &d, None, NodeKind::Work(w))?);
        Ok(())
    })
}

/// `cuGraphAddMemsetNode` (10000).
pub unsafe extern "C" fn cuGraphAddMemsetNode_v10000(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    n: usize,
    params: *const CUDA_MEMSET_NODE_PARAMS_v1,
    ctx: CUcontext,
) -> CUresult {
    entry("cuGraphAddMemsetNode", 10000, |s| {
        let o = out(node)?;
        let g = s.graph(graph)?;
        let d = s.deps(g, deps, n)?;
        let m = s.memset_of(input(params)?, ctx)?;
        *o = p(s.add_node(g, &d, None, NodeKind::Work(Work::Memset(m)))?);
        Ok(())
    })
}

/// `cuGraphAddChildGraphNode` (10000): the node owns a copy of the child.
pub unsafe extern "C" fn cuGraphAddChildGraphNode_v10000(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    n: usize,
    child: CUgraph,
) -> CUresult {
    entry("cuGraphAddChildGraphNode", 10000, |s| {
        let o = out(node)?;
        let g = s.graph(graph)?;
        let c = s.graph(child)?;
        if c == g {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let d = s.deps(g, deps, n)?;
        let created = s.add_node(g, &d, None, NodeKind::Empty)?;
        let copy = s.clone_graph(c, Owner::Node(created), &mut Vec::new())?;
        if let Ok(nd) = s.nodes.get_mut(created) {
            nd.kind = NodeKind::Child(copy);
        }
        *o = p(created);
        Ok(())
    })
}

/// `cuGraphAddDependencies` (12030: with edge data).
pub unsafe extern "C" fn cuGraphAddDependencies_v12030(
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    data: *const CUgraphEdgeData,
    n: usize,
) -> CUresult {
    entry("cuGraphAddDependencies", 12030, |s| {
        let d = edge_data(data, n)?;
        s.add_dependencies(graph, from, to, d, n)
    })
}

/// `cuGraphAddDependencies` (10000).
pub unsafe extern "C" fn cuGraphAddDependencies_v10000(
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    n: usize,
) -> CUresult {
    entry("cuGraphAddDependencies", 10000, |s| s.add_dependencies(graph, from, to, None, n))
}

/// `cuGraphKernelNodeSetParams` (12000).
pub unsafe extern "C" fn cuGraphKernelNodeSetParams_v12000(
    node: CUgraphNode,
    params: *const CUDA_KERNEL_NODE_PARAMS_v2,
) -> CUresult {
    entry("cuGraphKernelNodeSetParams", 12000, |s| s.set_kernel_node(node, &LaunchArgs::from(input(params)?)))
}

/// `cuGraphKernelNodeSetParams` (10000).
pub unsafe extern "C" fn cuGraphKernelNodeSetParams_v10000(
    node: CUgraphNode,
    params: *const CUDA_KERNEL_NODE_PARAMS_v1,
) -> CUresult {
    entry("cuGraphKernelNodeSetParams", 10000, |s| s.set_kernel_node(node, &LaunchArgs::from(input(params)?)))
}

/// `cuGraphAddNode` (12030: edge data for the dependencies): kernel,
/// empty and conditional nodes; the unused bytes must be zero.
pub unsafe extern "C" fn cuGraphAddNode_v12030(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    data: *const CUgraphEdgeData,
    n: usize,
    params: *mut CUgraphNodeParams,
) -> CUresult {
    entry("cuGraphAddNode", 12030, |s| {
        let d = edge_data(data, n)?;
        s.add_generic(node, graph, deps, d, n, params)
    })
}

/// `cuGraphAddNode` (12020).
pub unsafe extern "C" fn cuGraphAddNode_v12020(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    n: usize,
    params: *mut CUgraphNodeParams,
) -> CUresult {
    entry("cuGraphAddNode", 12020, |s| s.add_generic(node, graph, deps, None, n, params))
}

/// `cuGraphConditionalHandleCreate` (12030).
pub unsafe extern "C" fn cuGraphConditionalHandleCreate_v12030(
    handle: *mut CUgraphConditionalHandle,
    graph: CUgraph,
    ctx: CUcontext,
    default: c_uint,
    flags: c_uint,
) -> CUresult {
    entry("cuGraphConditionalHandleCreate", 12030, |s| {
        let o = out(handle)?;
        let g = s.graph(graph)?;
        let c = s.live_ctx(h(ctx))?;
        if flags > CU_GRAPH_COND_ASSIGN_DEFAULT {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let serial = s.serial();
        *o = s.conditions.insert(serial, Condition { graph: g, ctx: c, default, flags });
        Ok(())
    })
}

/// `cuGraphGetNodes` (10000).
pub unsafe extern "C" fn cuGraphGetNodes_v10000(graph: CUgraph, nodes: *mut CUgraphNode, n: *mut usize) -> CUresult {
    entry("cuGraphGetNodes", 10000, |s| {
        let g = s.graph(graph)?;
        let count = out(n)?;
        let all = &s.graphs.get(g).map_err(|_| CUDA_ERROR_INVALID_VALUE)?.nodes;
        if nodes.is_null() {
            *count = all.len();
            return Ok(());
        }
        for i in 0..*count {
            // SAFETY: `nodes` holds `*count` entries (the call's contract).
            unsafe { *nodes.add(i) = all.get(i).map(|x| p(*x)).unwrap_or(std::ptr::null_mut()) };
        }
        *count = (*count).min(all.len());
        Ok(())
    })
}

/// `cuGraphNodeGetType` (10000).
pub unsafe extern "C" fn cuGraphNodeGetType_v10000(node: CUgraphNode, ty: *mut CUgraphNodeType) -> CUresult {
    entry("cuGraphNodeGetType", 10000, |s| {
        let o = out(ty)?;
        let n = h(node);
        let Node { kind, .. } = s.nodes.get(n).map_err(|b| s.bad_handle(b, Kind::Node, n))?;
        *o = kind.type_value();
        Ok(())
    })
}

/// `cuGraphGetEdges` (12030: with edge data; a graph with annotated
/// edges queried without is `CUDA_ERROR_LOSSY_QUERY`).
pub unsafe extern "C" fn cuGraphGetEdges_v12030(
    graph: CUgraph,
    from: *mut CUgraphNode,
    to: *mut CUgraphNode,
    data: *mut CUgraphEdgeData,
    n: *mut usize,
) -> CUresult {
    entry("cuGraphGetEdges", 12030, |s| s.get_edges(graph, from, to, Some(data), n))
}

/// `cuGraphGetEdges` (10000).
pub unsafe extern "C" fn cuGraphGetEdges_v10000(
    graph: CUgraph,
    from: *mut CUgraphNode,
    to: *mut CUgraphNode,
    n: *mut usize,
) -> CUresult {
    entry("cuGraphGetEdges", 10000, |s| s.get_edges(graph, from, to, None, n))
}

/// `cuGraphDebugDotPrint` (11030): a DOT file of the graph's nodes (kernel
/// names, launch dimensions) and edges.
pub unsafe extern "C" fn cuGraphDebugDotPrint_v11030(graph: CUgraph, path: *const c_char, _flags: c_uint) -> CUresult {
    entry("cuGraphDebugDotPrint", 11030, |s| {
        let g = s.graph(graph)?;
        if path.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: a NUL-terminated path (the call's contract).
        let path = unsafe { std::ffi::CStr::from_ptr(path) };
        // The path's bytes as they are, as the driver's fopen takes them
        // (a lossy UTF-8 copy would write another file).
        let path = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path.to_bytes());
        let text = s.dot(g);
        std::fs::write(path, text).map_err(|_| 304)
    })
}

impl State {
    /// The DOT text of a graph (bodies and child graphs as clusters).
    fn dot(&self, g: u64) -> String {
        let mut out = String::from("digraph fc_driver_double {\n");
        self.dot_level(g, &mut out, 1);
        out.push_str("}\n");
        out
    }

    fn dot_level(&self, g: u64, out: &mut String, depth: usize) {
        let Ok(graph) = self.graphs.get(g) else { return };
        let pad = "  ".repeat(depth);
        for &n in &graph.nodes {
            let Ok(node) = self.nodes.get(n) else { continue };
            let label = match &node.kind {
                NodeKind::Work(Work::Kernel(l)) => {
                    let name = self.funcs.get(l.func).map(|f| f.entry.name.clone()).unwrap_or_default();
                    format!("KERNEL {name} grid {:?} block {:?}", l.grid, l.block)
                }
                NodeKind::Work(Work::Memset(m)) => format!("MEMSET {:#x} x{}", m.dst, m.width),
                NodeKind::Work(Work::Copy(c)) => format!("MEMCPY {} bytes", c.len),
                NodeKind::Empty => "EMPTY".to_string(),
                NodeKind::Child(_) => "GRAPH".to_string(),
                NodeKind::Conditional { ty, .. } => format!("CONDITIONAL type {ty}"),
            };
            out.push_str(&format!("{pad}\"n{n:x}\" [label=\"{label}\"];\n"));
            let inner: Vec<u64> = match &node.kind {
                NodeKind::Child(c) => vec![*c],
                NodeKind::Conditional { bodies, .. } => bodies.clone(),
                _ => Vec::new(),
            };
            for b in inner {
                out.push_str(&format!("{pad}subgraph \"cluster_{b:x}\" {{\n"));
                self.dot_level(b, out, depth + 1);
                out.push_str(&format!("{pad}}}\n"));
            }
        }
        for e in &graph.edges {
            out.push_str(&format!("{pad}\"n{:x}\" -> \"n{:x}\";\n", e.from, e.to));
        }
    }
}

/// `cuGraphInstantiateWithFlags` (11040).
pub unsafe extern "C" fn cuGraphInstantiateWithFlags_v11040(
    exec: *mut CUgraphExec,
    graph: CUgraph,
    flags: c_ulonglong,
) -> CUresult {
    entry("cuGraphInstantiateWithFlags", 11040, |s| {
        let o = out(exec)?;
        let g = s.graph(graph)?;
        if flags & !INSTANTIATE_FLAGS != 0 {
            return Err(if flags & 4 != 0 { CUDA_ERROR_NOT_SUPPORTED } else { CUDA_ERROR_INVALID_VALUE });
        }
        if let Ok(gr) = s.graphs.get(g) {
            if gr.owner != Owner::Client {
                return Err(
                    s.misuse(CUDA_ERROR_INVALID_VALUE, format!("instantiating graph {g:#x}, which a node owns"))
                );
            }
        }
        s.gate_unsafe()?;
        *o = p(s.instantiate(g)?);
        Ok(())
    })
}
