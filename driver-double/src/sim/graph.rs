//! Building graphs: nodes and edges checked and added, deep copies (child
//! graph nodes), destruction with what nodes own, dependency order, and a
//! graph's place among the graphs that own it.

use cuda_sys::*;

use crate::handle::Kind;
use crate::objects::graph::{Edge, EdgeData, Graph, Node, NodeKind, Owner};
use crate::objects::work::Work;
use crate::state::{State, R};

impl State {
    /// A new empty graph.
    pub fn new_graph(&mut self, owner: Owner) -> u64 {
        let serial = self.serial();
        self.graphs.insert(serial, Graph { nodes: Vec::new(), edges: Vec::new(), owner })
    }

    /// Checks that `deps` are distinct nodes of `graph`.
    pub fn check_deps(&self, graph: u64, deps: &[u64]) -> R {
        for (i, &d) in deps.iter().enumerate() {
            match self.nodes.get(d) {
                Ok(n) if n.graph == graph => {}
                Ok(_) => {
                    return Err(
                        self.misuse(CUDA_ERROR_INVALID_VALUE, format!("dependency {d:#x} is a node of another graph"))
                    )
                }
                Err(bad) => return Err(self.bad_handle(bad, Kind::Node, d)),
            }
            if deps[..i].contains(&d) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
        }
        Ok(())
    }

    /// Checks one edge's annotation: the double knows full edges and, from
    /// CUDA 12.3 on, programmatic ones between kernel nodes (sm_90+).
    pub fn check_edge(&self, from: u64, to: u64, data: EdgeData) -> R {
        if data.is_default() {
            return Ok(());
        }
        if self.cfg.version < 12030 {
            return Err(self.misuse(CUDA_ERROR_INVALID_VALUE, "edge data before CUDA 12.3"));
        }
        let kernel = |n: u64| matches!(self.nodes.get(n).map(|n| &n.kind), Ok(NodeKind::Work(Work::Kernel(_))));
        let programmatic = data.ty == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8;
        let ports_ok =
            matches!(data.from_port, CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC | CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER)
                || (data.from_port == CU_GRAPH_KERNEL_NODE_PORT_DEFAULT && !programmatic);
        if data.ty > 1 || data.to_port != 0 || !ports_ok {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        if data.from_port != CU_GRAPH_KERNEL_NODE_PORT_DEFAULT || programmatic {
            if !kernel(from) || !kernel(to) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            if self.cfg.cc.0 < 9 {
                return Err(CUDA_ERROR_NOT_SUPPORTED);
            }
        }
        Ok(())
    }

    /// Adds a node of `kind` to `graph` after `deps` (with their
    /// annotations, default when `None`).
    pub fn add_node(&mut self, graph: u64, deps: &[u64], data: Option<&[EdgeData]>, kind: NodeKind) -> R<u64> {
        self.check_deps(graph, deps)?;
        let serial = self.serial();
        let node = self.nodes.insert(serial, Node { graph, kind, bodies_out: Box::new([]) });
        for (i, &d) in deps.iter().enumerate() {
            let ed = data.map(|d| d[i]).unwrap_or_default();
            if let Err(e) = self.check_edge(d, node, ed) {
                let _ = self.nodes.remove(node);
                return Err(e);
            }
        }
        let g = self.graphs.get_mut(graph).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        g.nodes.push(node);
        for (i, &d) in deps.iter().enumerate() {
            let ed = data.map(|d| d[i]).unwrap_or_default();
            g.edges.push(Edge { from: d, to: node, data: ed });
        }
        Ok(node)
    }

    /// Adds edges (`cuGraphAddDependencies`): nodes of `graph`, no self
    /// edge, none already there.
    pub fn add_edges(&mut self, graph: u64, from: &[u64], to: &[u64], data: Option<&[EdgeData]>) -> R {
        for i in 0..from.len() {
            let (f, t) = (from[i], to[i]);
            for n in [f, t] {
                match self.nodes.get(n) {
                    Ok(node) if node.graph == graph => {}
                    Ok(_) => {
                        return Err(self.misuse(CUDA_ERROR_INVALID_VALUE, format!("node {n:#x} is in another graph")))
                    }
                    Err(bad) => return Err(self.bad_handle(bad, Kind::Node, n)),
                }
            }
            if f == t {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let ed = data.map(|d| d[i]).unwrap_or_default();
            self.check_edge(f, t, ed)?;
            let g = self.graphs.get(graph).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
            if g.edges.iter().any(|e| e.from == f && e.to == t) || from[..i].iter().zip(&to[..i]).any(|p| p == (&f, &t))
            {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
        }
        let g = self.graphs.get_mut(graph).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        for i in 0..from.len() {
            g.edges.push(Edge { from: from[i], to: to[i], data: data.map(|d| d[i]).unwrap_or_default() });
        }
        Ok(())
    }

    /// A deep copy of `src` owned by `owner` (nodes, edges, the graphs its
    /// nodes own); the map from old nodes to new ones is extended.
    pub fn clone_graph(&mut self, src: u64, owner: Owner, map: &mut Vec<(u64, u64)>) -> R<u64> {
        let (nodes, edges) = {
            let g = self.graphs.get(src).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
            (g.nodes.clone(), g.edges.clone())
        };
        let dst = self.new_graph(owner);
        for n in nodes {
            let kind = self.nodes.get(n).map_err(|_| CUDA_ERROR_INVALID_VALUE)?.kind.clone();
            let serial = self.serial();
            let node = self.nodes.insert(serial, Node { graph: dst, kind: NodeKind::Empty, bodies_out: Box::new([]) });
            let kind = match kind {
                NodeKind::Child(c) => NodeKind::Child(self.clone_graph(c, Owner::Node(node), map)?),
                NodeKind::Conditional { handle, ty, bodies } => {
                    let mut copies = Vec::new();
                    for b in bodies {
                        copies.push(self.clone_graph(b, Owner::Node(node), map)?);
                    }
                    NodeKind::Conditional { handle, ty, bodies: copies }
                }
                k => k,
            };
            let out: Box<[u64]> = match &kind {
                NodeKind::Conditional { bodies, .. } => bodies.clone().into_boxed_slice(),
                _ => Box::new([]),
            };
            if let Ok(nd) = self.nodes.get_mut(node) {
                nd.kind = kind;
                nd.bodies_out = out;
            }
            if let Ok(g) = self.graphs.get_mut(dst) {
                g.nodes.push(node);
            }
            map.push((n, node));
        }
        let find = |map: &[(u64, u64)], n: u64| map.iter().rev().find(|(a, _)| *a == n).map(|(_, b)| *b);
        let new_edges: Vec<Edge> = edges
            .iter()
            .filter_map(|e| Some(Edge { from: find(map, e.from)?, to: find(map, e.to)?, data: e.data }))
            .collect();
        if let Ok(g) = self.graphs.get_mut(dst) {
            g.edges = new_edges;
        }
        Ok(dst)
    }

    /// Destroys a graph with its nodes and the graphs they own.
    pub fn destroy_graph(&mut self, graph: u64) {
        let Ok(g) = self.graphs.remove(graph) else { return };
        for n in g.nodes {
            if let Ok(node) = self.nodes.remove(n) {
                match node.kind {
                    NodeKind::Child(c) => self.destroy_graph(c),
                    NodeKind::Conditional { bodies, .. } => {
                        for b in bodies {
                            self.destroy_graph(b);
                        }
                    }
                    _ => {}
                }
            }
        }
        for c in self.conditions.handles_where(|c| c.graph == graph) {
            let _ = self.conditions.remove(c);
        }
    }

    /// The graph's nodes in an order that runs every node after its
    /// dependencies (Kahn's, ties by insertion order); `None` for a cycle.
    pub fn topological(&self, graph: u64) -> Option<Vec<u64>> {
        let g = self.graphs.get(graph).ok()?;
        let mut indeg: Vec<usize> = g.nodes.iter().map(|n| g.edges.iter().filter(|e| e.to == *n).count()).collect();
        let mut order = Vec::with_capacity(g.nodes.len());
        let mut done = vec![false; g.nodes.len()];
        while order.len() < g.nodes.len() {
            let i = (0..g.nodes.len()).find(|&i| !done[i] && indeg[i] == 0)?;
            done[i] = true;
            let n = g.nodes[i];
            order.push(n);
            for e in g.edges.iter().filter(|e| e.from == n) {
                if let Some(j) = g.nodes.iter().position(|m| *m == e.to) {
                    indeg[j] -= 1;
                }
            }
        }
        Some(order)
    }

    /// The graphs `graph` is inside (its owners' graphs, up to the root),
    /// nearest first.
    pub fn ancestors(&self, graph: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut g = graph;
        while let Ok(Graph { owner: Owner::Node(n), .. }) = self.graphs.get(g) {
            match self.nodes.get(*n) {
                Ok(node) => {
                    g = node.graph;
                    out.push(g);
                }
                Err(_) => break,
            }
        }
        out
    }

    /// The root graph `graph` is part of.
    pub fn root_of(&self, graph: u64) -> u64 {
        self.ancestors(graph).last().copied().unwrap_or(graph)
    }
}
