//! Executable graphs: instantiation into a plan (a snapshot of the graph's
//! work in dependency order), node-by-node updates of it, whole-graph
//! updates (`cuGraphExecUpdate`'s topology rules), and running a plan.
//!
//! Node handles: an executable's nodes are named by the nodes of the graph
//! it was instantiated from (also after a whole-graph update, as NVIDIA's
//! documentation says), conditional bodies' nodes included; a child
//! graph's inner nodes are not addressable.

use std::collections::HashMap;
use std::sync::Arc;

use cuda_sys::*;

use crate::graph::{EdgeData, NodeKind};
use crate::state::{State, R};
use crate::work::Work;

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
    nodes: Vec<NodeShape>,
    edges: Vec<(usize, usize, EdgeData)>,
}

#[derive(Debug, Clone, PartialEq)]
enum NodeShape {
    Kernel { ctx: u64 },
    Memset { device: usize, two_d: bool },
    Copy,
    Empty,
    Child(Box<Shape>),
    Conditional { ty: u32, bodies: Vec<Shape> },
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
    /// Launches still queued.
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

impl State {
    /// The shape of `graph`, and its nodes in the order the shape lists
    /// them (every level, depth first).
    pub fn shape(&self, graph: u64, order: &mut Vec<u64>) -> R<Shape> {
        let g = self.graphs.get(graph).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        let mut nodes = Vec::with_capacity(g.nodes.len());
        let index: HashMap<u64, usize> = g.nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        for &n in &g.nodes {
            order.push(n);
            let node = self.nodes.get(n).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
            nodes.push(match &node.kind {
                NodeKind::Work(Work::Kernel(l)) => NodeShape::Kernel { ctx: l.ctx },
                NodeKind::Work(Work::Memset(m)) => NodeShape::Memset { device: m.device, two_d: m.height > 1 },
                NodeKind::Work(Work::Copy(_)) => NodeShape::Copy,
                NodeKind::Empty => NodeShape::Empty,
                NodeKind::Child(c) => NodeShape::Child(Box::new(self.shape(*c, &mut Vec::new())?)),
                NodeKind::Conditional { ty, bodies, .. } => {
                    let mut shapes = Vec::new();
                    for b in bodies {
                        shapes.push(self.shape(*b, order)?);
                    }
                    NodeShape::Conditional { ty: *ty, bodies: shapes }
                }
            });
        }
        let edges = g.edges.iter().map(|e| (index[&e.from], index[&e.to], e.data)).collect();
        Ok(Shape { nodes, edges })
    }

    /// Builds the plan of `graph` into `plan`: the step list of its level,
    /// and each addressable node's step.
    fn plan_level(
        &self,
        graph: u64,
        plan: &mut Plan,
        steps: &mut HashMap<u64, usize>,
        addressable: bool,
    ) -> R<Vec<usize>> {
        let order = self
            .topological(graph)
            .ok_or_else(|| self.misuse(CUDA_ERROR_INVALID_VALUE, format!("graph {graph:#x} has a cycle")))?;
        let mut out = Vec::with_capacity(order.len());
        for n in order {
            let node = self.nodes.get(n).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
            let step = match &node.kind {
                NodeKind::Work(w) => Step::Work(w.clone()),
                NodeKind::Empty => Step::Empty,
                NodeKind::Child(c) => Step::Child(self.plan_level(*c, plan, steps, false)?),
                NodeKind::Conditional { handle, ty, bodies } => {
                    let c = self.conditions.get(*handle).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
                    if !plan.conditions.iter().any(|(h, _, _)| h == handle) {
                        plan.conditions.push((*handle, c.default, c.flags));
                    }
                    let mut lists = Vec::new();
                    for b in bodies {
                        lists.push(self.plan_level(*b, plan, steps, addressable)?);
                    }
                    Step::Conditional { handle: *handle, ty: *ty, bodies: lists }
                }
            };
            plan.steps.push(step);
            let i = plan.steps.len() - 1;
            if addressable {
                steps.insert(n, i);
            }
            out.push(i);
        }
        Ok(out)
    }

    /// Instantiates `graph`.
    pub fn instantiate(&mut self, graph: u64) -> R<u64> {
        let mut plan = Plan::default();
        let mut steps = HashMap::new();
        plan.root = self.plan_level(graph, &mut plan, &mut steps, true)?;
        let mut order = Vec::new();
        let shape = self.shape(graph, &mut order)?;
        let device = plan
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Work(Work::Kernel(l)) => Some(l.device),
                Step::Work(Work::Memset(m)) => Some(m.device),
                _ => None,
            })
            .unwrap_or(0);
        let conditions = plan.conditions.iter().map(|(h, d, _)| (*h, *d)).collect();
        let serial = self.serial();
        Ok(self.execs.insert(serial, Exec { graph, plan: Arc::new(plan), steps, order, shape, conditions, device }))
    }

    /// Compares shapes: `None` when `new` may update `old`.
    fn compare(old: &Shape, new: &Shape, nodes: &[u64], at: &mut usize) -> Option<Refusal> {
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
                    let r = Self::compare(a, b, &[], &mut inner);
                    if r.is_some() {
                        return Some(Refusal::at(UPDATE_ERROR_TOPOLOGY_CHANGED, node));
                    }
                }
                (NodeShape::Conditional { ty: a, bodies: x }, NodeShape::Conditional { ty: b, bodies: y }) => {
                    if a != b || x.len() != y.len() {
                        return Some(Refusal::at(UPDATE_ERROR_PARAMETERS_CHANGED, node));
                    }
                    for (bx, by) in x.iter().zip(y) {
                        if let Some(r) = Self::compare(bx, by, nodes, at) {
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

    /// `cuGraphExecUpdate`: updates `exec` from `graph` when their shapes
    /// match; the refusal otherwise (the executable unchanged).
    pub fn update_exec(&mut self, exec: u64, graph: u64) -> R<Result<(), Refusal>> {
        let mut order = Vec::new();
        let shape = self.shape(graph, &mut order)?;
        let e = self.execs.get(exec).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        let mut at = 0;
        if let Some(r) = Self::compare(&e.shape, &shape, &order, &mut at) {
            return Ok(Err(r));
        }
        // Same shape: the new graph's work replaces the old, node for node
        // (the source graph's node handles keep naming them).
        let mut plan = Plan::default();
        let mut new_steps = HashMap::new();
        plan.root = self.plan_level(graph, &mut plan, &mut new_steps, true)?;
        let e = self.execs.get(exec).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        let steps: HashMap<u64, usize> =
            e.order.iter().zip(&order).filter_map(|(old, new)| new_steps.get(new).map(|s| (*old, *s))).collect();
        let conditions = plan.conditions.iter().map(|(h, d, _)| (*h, *d)).collect();
        let e = self.execs.get_mut(exec).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        e.plan = Arc::new(plan);
        e.steps = steps;
        e.conditions = conditions;
        Ok(Ok(()))
    }

    /// The step of `node` in `exec` (a misuse when `node` is no
    /// addressable node of the graph `exec` was instantiated from).
    pub fn exec_step(&self, exec: u64, node: u64) -> R<usize> {
        let e = self.execs.get(exec).map_err(|b| self.bad_handle(b, crate::handle::Kind::Exec, exec))?;
        if let Some(s) = e.steps.get(&node) {
            return Ok(*s);
        }
        Err(match self.nodes.get(node) {
            Err(bad) => self.bad_handle(bad, crate::handle::Kind::Node, node),
            Ok(_) => self.misuse(
                CUDA_ERROR_INVALID_VALUE,
                format!("node {node:#x} is not a node of the graph executable {exec:#x} was instantiated from"),
            ),
        })
    }

    /// Replaces one step's work (a node-by-node update).
    pub fn set_step(&mut self, exec: u64, step: usize, s: Step) -> R {
        let e = self.execs.get_mut(exec).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        let plan = Arc::make_mut(&mut e.plan);
        match plan.steps.get_mut(step) {
            Some(slot) => {
                *slot = s;
                Ok(())
            }
            None => Err(CUDA_ERROR_INVALID_VALUE),
        }
    }

    /// Runs a plan (a graph launch reaching the front of its stream).
    pub fn run_plan(&mut self, exec: u64, plan: &Plan) -> R {
        let mut conditions = match self.execs.get(exec) {
            Ok(e) => e.conditions.clone(),
            Err(_) => plan.conditions.iter().map(|(h, d, _)| (*h, *d)).collect(),
        };
        for (h, d, flags) in &plan.conditions {
            if flags & CU_GRAPH_COND_ASSIGN_DEFAULT != 0 {
                conditions.insert(*h, *d);
            }
        }
        let r = self.run_steps(plan, &plan.root, &mut conditions);
        if let Ok(e) = self.execs.get_mut(exec) {
            e.conditions = conditions;
        }
        r
    }

    fn run_steps(&mut self, plan: &Plan, list: &[usize], conditions: &mut HashMap<u64, u32>) -> R {
        for &i in list {
            match &plan.steps[i] {
                Step::Work(w) => self.run_work(w, Some(conditions))?,
                Step::Empty => {}
                Step::Child(inner) => self.run_steps(plan, inner, conditions)?,
                Step::Conditional { handle, ty, bodies } => {
                    let value = |c: &HashMap<u64, u32>| c.get(handle).copied().unwrap_or(0);
                    match *ty {
                        CU_GRAPH_COND_TYPE_IF => {
                            let v = value(conditions);
                            if v != 0 {
                                self.run_steps(plan, &bodies[0], conditions)?;
                            } else if let Some(b) = bodies.get(1) {
                                self.run_steps(plan, b, conditions)?;
                            }
                        }
                        CU_GRAPH_COND_TYPE_WHILE => {
                            let mut rounds = 0u64;
                            while value(conditions) != 0 {
                                self.run_steps(plan, &bodies[0], conditions)?;
                                rounds += 1;
                                if rounds > 1 << 24 {
                                    return Err(self.misuse(
                                        CUDA_ERROR_LAUNCH_FAILED,
                                        format!("the WHILE node of condition {handle:#x} ran {rounds} rounds without ending"),
                                    ));
                                }
                            }
                        }
                        _ => {
                            let v = value(conditions) as usize;
                            if let Some(b) = bodies.get(v) {
                                self.run_steps(plan, b, conditions)?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
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
        State::compare(old, new, nodes, &mut 0)
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
