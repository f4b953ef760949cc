//! Graphs under construction: nodes (kernel, memset, copy, child graph,
//! empty, conditional), edges with their annotations, conditional handles,
//! and who owns a graph (the client, or a node: child copies, conditional
//! bodies).

use cuda_sys::*;

use crate::objects::work::Work;

/// An edge's annotation (`CUgraphEdgeData`): from port, to port, type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct EdgeData {
    /// `from_port`.
    pub from_port: u8,
    /// `to_port`.
    pub to_port: u8,
    /// `type` (`CU_GRAPH_DEPENDENCY_TYPE_*`).
    pub ty: u8,
}

impl EdgeData {
    /// Whether it is a plain full dependency.
    pub fn is_default(&self) -> bool {
        *self == EdgeData::default()
    }
}

/// An edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// The node it leaves.
    pub from: u64,
    /// The node it enters.
    pub to: u64,
    /// Its annotation.
    pub data: EdgeData,
}

/// What a node does.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// Device work: a kernel, a memset or a copy.
    Work(Work),
    /// A child graph (the node owns its copy).
    Child(u64),
    /// Nothing (a join point).
    Empty,
    /// A conditional node: its handle, type and body graphs (owned).
    Conditional {
        /// The condition's handle.
        handle: u64,
        /// `CU_GRAPH_COND_TYPE_*`.
        ty: u32,
        /// The body graphs.
        bodies: Vec<u64>,
    },
}

impl NodeKind {
    /// The `CU_GRAPH_NODE_TYPE_*` value.
    pub fn type_value(&self) -> CUgraphNodeType {
        match self {
            NodeKind::Work(Work::Kernel(_)) => CU_GRAPH_NODE_TYPE_KERNEL,
            NodeKind::Work(Work::Memset(_)) => CU_GRAPH_NODE_TYPE_MEMSET,
            NodeKind::Work(Work::Copy(_)) => CU_GRAPH_NODE_TYPE_MEMCPY,
            NodeKind::Child(_) => CU_GRAPH_NODE_TYPE_GRAPH,
            NodeKind::Empty => CU_GRAPH_NODE_TYPE_EMPTY,
            NodeKind::Conditional { .. } => CU_GRAPH_NODE_TYPE_CONDITIONAL,
        }
    }
}

/// A node.
#[derive(Debug)]
pub struct Node {
    /// The graph it is in.
    pub graph: u64,
    /// What it does.
    pub kind: NodeKind,
    /// The body graphs' handles, as `phGraph_out` hands them out (stable
    /// memory the driver owns).
    pub bodies_out: Box<[u64]>,
}

/// Who owns a graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The client (`cuGraphCreate`, `cuStreamEndCapture`).
    Client,
    /// A node: a child graph node's copy or a conditional node's body.
    Node(u64),
}

/// A graph.
#[derive(Debug)]
pub struct Graph {
    /// Its nodes, in insertion order.
    pub nodes: Vec<u64>,
    /// Its edges, in insertion order.
    pub edges: Vec<Edge>,
    /// Who owns it.
    pub owner: Owner,
}

/// A conditional handle (`cuGraphConditionalHandleCreate`).
#[derive(Debug)]
pub struct Condition {
    /// The graph it was created in.
    pub graph: u64,
    /// Its context.
    pub ctx: u64,
    /// The value each launch starts from (with `CU_GRAPH_COND_ASSIGN_DEFAULT`).
    pub default: u32,
    /// Its flags.
    pub flags: u32,
}
