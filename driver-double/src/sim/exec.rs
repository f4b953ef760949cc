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

use crate::handle::Kind;
use crate::objects::exec::{compare, Exec, NodeShape, Plan, Refusal, Shape, Step};
use crate::objects::graph::NodeKind;
use crate::objects::work::Work;
use crate::state::{State, R};

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

    /// `cuGraphExecUpdate`: updates `exec` from `graph` when their shapes
    /// match; the refusal otherwise (the executable unchanged).
    pub fn update_exec(&mut self, exec: u64, graph: u64) -> R<Result<(), Refusal>> {
        let mut order = Vec::new();
        let shape = self.shape(graph, &mut order)?;
        let e = self.execs.get(exec).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        let mut at = 0;
        if let Some(r) = compare(&e.shape, &shape, &order, &mut at) {
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
        let e = self.execs.get(exec).map_err(|b| self.bad_handle(b, Kind::Exec, exec))?;
        if let Some(s) = e.steps.get(&node) {
            return Ok(*s);
        }
        Err(match self.nodes.get(node) {
            Err(bad) => self.bad_handle(bad, Kind::Node, node),
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
