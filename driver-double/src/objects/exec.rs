//! Executable graphs: a plan (a snapshot of the graph's work in
//! dependency order) and its steps, the shape `cuGraphExecUpdate` compares,
//! and its topology rules ([`compare`]): why an update is refused.

use std::collections::HashMap;
use std::sync::Arc;

use cuda_sys::*;

use crate::objects::graph::EdgeData;
use crate::objects::work::Work;

/// One step of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Device work.
    Work(Work),
    /// Nothing.
    Empty,
    /// A child graph: its steps in order.
    Child(Vec<usize>),
    /// A conditional node.
    Conditional {
        /// Its condition.
        handle: u64,
        /// `CU_GRAPH_COND_TYPE_*`.
        ty: u32,
        /// Each body's steps in order.
        bodies: Vec<Vec<usize>>,
    },
}

/// An instantiated graph's work.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The steps (an arena; [`Plan::root`] and nested lists index it).
    pub steps: Vec<Step>,
    /// The top-level steps in order.
    pub root: Vec<usize>,
    /// The conditions: handle, default value, flags.
    pub conditions: Vec<(u64, u32, u32)>,
}

/// The shape of a graph, as `cuGraphExecUpdate` compares it: per node (in
/// insertion order) its type and what may not change, and the edges as
/// index pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Each node's shape, in insertion order.
    pub nodes: Vec<NodeShape>,
    /// The edges: from and to (indices into `nodes`), and their annotation.
    pub edges: Vec<(usize, usize, EdgeData)>,
}

/// A node's type and what an update may not change of it.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeShape {
    /// A kernel node: its function's context.
    Kernel {
        /// The context.
        ctx: u64,
    },
    /// A memset node: its device, and whether it is 2-D.
    Memset {
        /// The device.
        device: usize,
        /// Whether it has more than one row.
        two_d: bool,
    },
    /// A copy node.
    Copy,
    /// An empty node.
    Empty,
    /// A child graph node: the child's shape.
    Child(Box<Shape>),
    /// A conditional node: its type and its bodies' shapes.
    Conditional {
        /// `CU_GRAPH_COND_TYPE_*`.
        ty: u32,
        /// The bodies' shapes.
        bodies: Vec<Shape>,
    },
}

impl NodeShape {
    fn type_value(&self) -> u32 {
        match self {
            NodeShape::Kernel { .. } => CU_GRAPH_NODE_TYPE_KERNEL,
            NodeShape::Memset { .. } => CU_GRAPH_NODE_TYPE_MEMSET,
            NodeShape::Copy => CU_GRAPH_NODE_TYPE_MEMCPY,
            NodeShape::Empty => CU_GRAPH_NODE_TYPE_EMPTY,
            NodeShape::Child(_) => CU_GRAPH_NODE_TYPE_GRAPH,
            NodeShape::Conditional { .. } => CU_GRAPH_NODE_TYPE_CONDITIONAL,
        }
    }
}

/// An executable graph.
#[derive(Debug)]
pub struct Exec {
    /// The graph it was instantiated from.
    pub graph: u64,
    /// Its work; launches take a reference, so updates touch only later
    /// launches.
    pub plan: Arc<Plan>,
    /// The step of each addressable node of the source graph.
    pub steps: HashMap<u64, usize>,
    /// The source graph's nodes in insertion order, per graph level (for
    /// whole-graph updates): root first, then bodies, depth first.
    pub order: Vec<u64>,
    /// Its shape.
    pub shape: Shape,
    /// The conditions' values between launches.
    pub conditions: HashMap<u64, u32>,
    /// The device its work runs on.
    pub device: usize,
}

/// Why an update was refused: the result code and the node at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// `CU_GRAPH_EXEC_UPDATE_ERROR_*`.
    pub result: u32,
    /// The node of the new graph at fault (0: none, the error is generic):
    /// for edges that do not match, the edge's "to" node.
    pub node: u64,
    /// For edges that do not match, the edge's "from" node (0 otherwise),
    /// as `CUgraphExecUpdateResultInfo::errorFromNode` reports it.
    pub from: u64,
}

impl Refusal {
    /// A refusal at `node` (no edge).
    fn at(result: u32, node: u64) -> Refusal {
        Refusal { result, node, from: 0 }
    }
}

const UPDATE_ERROR_TOPOLOGY_CHANGED: u32 = 2;
const UPDATE_ERROR_NODE_TYPE_CHANGED: u32 = 3;
const UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE: u32 = 7;
const UPDATE_ERROR_PARAMETERS_CHANGED: u32 = 5;

/// Compares shapes: `None` when `new` may update `old`, else why not.
/// `nodes` are the new graph's nodes in the order its shapes list them
/// (every level, depth first), `at` the position of this level's first:
/// a refusal names the node at fault.
pub fn compare(old: &Shape, new: &Shape, nodes: &[u64], at: &mut usize) -> Option<Refusal> {
    if old.nodes.len() != new.nodes.len() {
        return Some(Refusal::at(UPDATE_ERROR_TOPOLOGY_CHANGED, 0));
    }
    // Where this level's nodes are in `nodes` (bodies' nodes follow
    // their conditional node there).
    let mut positions = Vec::with_capacity(new.nodes.len());
    for (o, n) in old.nodes.iter().zip(&new.nodes) {
        positions.push(*at);
        let node = nodes.get(*at).copied().unwrap_or(0);
        *at += 1;
        if o.type_value() != n.type_value() {
            return Some(Refusal::at(UPDATE_ERROR_NODE_TYPE_CHANGED, node));
        }
        match (o, n) {
            (NodeShape::Kernel { ctx: a }, NodeShape::Kernel { ctx: b }) if a != b => {
                return Some(Refusal::at(UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, node))
            }
            (NodeShape::Memset { device: a, two_d: x }, NodeShape::Memset { device: b, two_d: y })
                if a != b || x != y =>
            {
                return Some(Refusal::at(UPDATE_ERROR_PARAMETERS_CHANGED, node))
            }
            (NodeShape::Child(a), NodeShape::Child(b)) if a != b => {
                let mut inner = 0;
                let r = compare(a, b, &[], &mut inner);
                if r.is_some() {
                    return Some(Refusal::at(UPDATE_ERROR_TOPOLOGY_CHANGED, node));
                }
            }
            (NodeShape::Conditional { ty: a, bodies: x }, NodeShape::Conditional { ty: b, bodies: y }) => {
                if a != b || x.len() != y.len() {
                    return Some(Refusal::at(UPDATE_ERROR_PARAMETERS_CHANGED, node));
                }
                for (bx, by) in x.iter().zip(y) {
                    if let Some(r) = compare(bx, by, nodes, at) {
                        return Some(r);
                    }
                }
            }
            _ => {}
        }
    }
    if old.edges != new.edges {
        // The error edge, as NVIDIA documents `errorNode` and
        // `errorFromNode`: the first edge of the new graph the old one
        // lacks, else the first old edge the new graph lacks (between
        // the new graph's nodes of the same places).
        let edge = new
            .edges
            .iter()
            .find(|e| !old.edges.contains(e))
            .or_else(|| old.edges.iter().find(|e| !new.edges.contains(e)));
        let node_at = |i: usize| positions.get(i).and_then(|p| nodes.get(*p)).copied().unwrap_or(0);
        let (from, node) = edge.map(|e| (node_at(e.0), node_at(e.1))).unwrap_or((0, 0));
        return Some(Refusal { result: UPDATE_ERROR_TOPOLOGY_CHANGED, node, from });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernels(n: usize, edges: &[(usize, usize)]) -> Shape {
        Shape {
            nodes: vec![NodeShape::Kernel { ctx: 1 }; n],
            edges: edges.iter().map(|&(a, b)| (a, b, EdgeData::default())).collect(),
        }
    }

    fn refusal(old: &Shape, new: &Shape, nodes: &[u64]) -> Option<Refusal> {
        compare(old, new, nodes, &mut 0)
    }

    /// Edges that do not match name the error edge: `errorNode` its "to"
    /// node, `errorFromNode` its "from" node, both of the new graph;
    /// a generic topology error names none; a node's own error no edge.
    #[test]
    fn topology_refusals_name_the_error_edge() {
        let chain = kernels(3, &[(0, 1), (1, 2)]);
        let nodes = [10, 11, 12];
        let at = |node, from| Some(Refusal { result: UPDATE_ERROR_TOPOLOGY_CHANGED, node, from });
        assert_eq!(refusal(&chain, &chain, &nodes), None);
        assert_eq!(refusal(&chain, &kernels(3, &[(0, 1), (0, 2)]), &nodes), at(12, 10), "an edge the old graph lacks");
        assert_eq!(refusal(&chain, &kernels(3, &[(0, 1)]), &nodes), at(12, 11), "an edge the new graph lacks");
        let mut programmatic = chain.clone();
        programmatic.edges[0].2 = EdgeData { from_port: 1, to_port: 0, ty: 1 };
        assert_eq!(refusal(&chain, &programmatic, &nodes), at(11, 10), "an edge of another type");
        assert_eq!(refusal(&chain, &kernels(2, &[(0, 1)]), &nodes), at(0, 0), "another node count: generic");
        let mut memset = chain.clone();
        memset.nodes[1] = NodeShape::Memset { device: 0, two_d: false };
        assert_eq!(
            refusal(&chain, &memset, &nodes),
            Some(Refusal { result: UPDATE_ERROR_NODE_TYPE_CHANGED, node: 11, from: 0 })
        );

        // A conditional's body nodes follow it in the node list: the edge
        // of its level names that level's nodes.
        let with_body = |edges: &[(usize, usize)]| Shape {
            nodes: vec![
                NodeShape::Conditional { ty: CU_GRAPH_COND_TYPE_IF, bodies: vec![kernels(1, &[])] },
                NodeShape::Kernel { ctx: 1 },
            ],
            edges: edges.iter().map(|&(a, b)| (a, b, EdgeData::default())).collect(),
        };
        let nodes = [20, 21, 22];
        assert_eq!(refusal(&with_body(&[(0, 1)]), &with_body(&[]), &nodes), at(22, 20));
    }
}
