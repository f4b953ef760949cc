//! Executable graphs: launch, destroy, whole-graph and node-by-node
//! updates.

use cuda_sys::*;

use super::{h, p, LaunchArgs};
use crate::handle::Kind;
use crate::objects::exec::{Plan, Step};
use crate::objects::stream::Op;
use crate::objects::work::Work;
use crate::state::{entry, input, out, State, R};

impl State {
    /// A live executable.
    fn exec(&self, e: CUgraphExec) -> R<u64> {
        let v = h(e);
        self.execs.get(v).map_err(|b| self.bad_handle(b, Kind::Exec, v))?;
        Ok(v)
    }

    /// `cuGraphExecKernelNodeSetParams`' shared part: the function's
    /// context may not change.
    fn exec_set_kernel(&mut self, exec: CUgraphExec, node: CUgraphNode, a: &LaunchArgs) -> R {
        let e = self.exec(exec)?;
        let step = self.exec_step(e, h(node))?;
        let old_ctx = match &self.execs.get(e).map_err(|_| CUDA_ERROR_INVALID_VALUE)?.plan.steps[step] {
            Step::Work(Work::Kernel(l)) => l.ctx,
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        let l = self.launch_of(a)?;
        if l.ctx != old_ctx {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        self.set_step(e, step, Step::Work(Work::Kernel(l)))
    }

    /// `cuGraphExecUpdate`'s shared part: the status and the result.
    fn exec_update(&mut self, exec: CUgraphExec, graph: CUgraph) -> R<Result<(), crate::objects::exec::Refusal>> {
        let e = self.exec(exec)?;
        let g = self.graph(graph)?;
        self.update_exec(e, g)
    }

    /// Overwrites the steps of `list` in `plan` with those of `new` in
    /// `from` (the same shape: a child graph's update).
    fn overwrite(plan: &mut Plan, list: &[usize], from: &Plan, new: &[usize]) {
        for (&o, &n) in list.iter().zip(new) {
            match (plan.steps[o].clone(), &from.steps[n]) {
                (Step::Child(ol), Step::Child(nl)) => Self::overwrite(plan, &ol, from, nl),
                (Step::Conditional { bodies: ob, .. }, Step::Conditional { handle, ty, bodies: nb }) => {
                    for (x, y) in ob.iter().zip(nb) {
                        Self::overwrite(plan, x, from, y);
                    }
                    plan.steps[o] = Step::Conditional { handle: *handle, ty: *ty, bodies: ob };
                }
                (_, s) => plan.steps[o] = s.clone(),
            }
        }
    }
}

/// `cuGraphLaunch` (10000): queued with the executable's work as it is
/// now (later updates change later launches only). Launching into a
/// capture is not simulated (refused, the capture invalidated).
pub unsafe extern "C" fn cuGraphLaunch_v10000(exec: CUgraphExec, stream: CUstream) -> CUresult {
    entry("cuGraphLaunch", 10000, |s| {
        let e = s.exec(exec)?;
        let v = s.stream(stream)?;
        if let Some((id, _)) = s.capture_of(v) {
            s.invalidate(id);
            return Err(s.misuse(
                CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                "cuGraphLaunch into a capturing stream is not simulated",
            ));
        }
        let (device, plan) = {
            let x = s.execs.get(e).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
            (x.device, x.plan.clone())
        };
        let sdev = s.ctx_device(s.streams.get(v).map(|st| st.ctx).unwrap_or(0));
        let has_work = plan.steps.iter().any(|st| matches!(st, Step::Work(_)));
        if has_work && sdev != device {
            return Err(s.misuse(
                CUDA_ERROR_INVALID_VALUE,
                format!("a graph of device {device}'s work launched on stream {v:#x} of device {sdev}"),
            ));
        }
        s.gate_legacy(v)?;
        s.enqueue(v, Op::Graph { exec: e, plan })?;
        Ok(())
    })
}

/// `cuGraphExecDestroy` (10000): queued launches still run.
pub unsafe extern "C" fn cuGraphExecDestroy_v10000(exec: CUgraphExec) -> CUresult {
    entry("cuGraphExecDestroy", 10000, |s| {
        let e = s.exec(exec)?;
        let _ = s.execs.remove(e);
        Ok(())
    })
}

/// `cuGraphExecUpdate` (12000).
pub unsafe extern "C" fn cuGraphExecUpdate_v12000(
    exec: CUgraphExec,
    graph: CUgraph,
    info: *mut CUgraphExecUpdateResultInfo,
) -> CUresult {
    entry("cuGraphExecUpdate", 12000, |s| {
        let i = out(info)?;
        match s.exec_update(exec, graph)? {
            Ok(()) => {
                *i = CUgraphExecUpdateResultInfo {
                    result: 0,
                    errorNode: std::ptr::null_mut(),
                    errorFromNode: std::ptr::null_mut(),
                };
                Ok(())
            }
            Err(r) => {
                *i = CUgraphExecUpdateResultInfo { result: r.result, errorNode: p(r.node), errorFromNode: p(r.from) };
                Err(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
            }
        }
    })
}

/// `cuGraphExecUpdate` (10020: the result in two out-parameters).
pub unsafe extern "C" fn cuGraphExecUpdate_v10020(
    exec: CUgraphExec,
    graph: CUgraph,
    error_node: *mut CUgraphNode,
    result: *mut CUgraphExecUpdateResult,
) -> CUresult {
    entry("cuGraphExecUpdate", 10020, |s| {
        let (n, r) = (out(error_node)?, out(result)?);
        match s.exec_update(exec, graph)? {
            Ok(()) => {
                *n = std::ptr::null_mut();
                *r = 0;
                Ok(())
            }
            Err(x) => {
                *n = p(x.node);
                *r = x.result;
                Err(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
            }
        }
    })
}

/// `cuGraphExecKernelNodeSetParams` (12000).
pub unsafe extern "C" fn cuGraphExecKernelNodeSetParams_v12000(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const CUDA_KERNEL_NODE_PARAMS_v2,
) -> CUresult {
    entry("cuGraphExecKernelNodeSetParams", 12000, |s| s.exec_set_kernel(exec, node, &LaunchArgs::from(input(params)?)))
}

/// `cuGraphExecKernelNodeSetParams` (10010).
pub unsafe extern "C" fn cuGraphExecKernelNodeSetParams_v10010(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const CUDA_KERNEL_NODE_PARAMS_v1,
) -> CUresult {
    entry("cuGraphExecKernelNodeSetParams", 10010, |s| s.exec_set_kernel(exec, node, &LaunchArgs::from(input(params)?)))
}

/// `cuGraphExecMemsetNodeSetParams` (10020): a 1-D memset may change its
/// destination, value, element size and width (as drivers accept); it may
/// not become 2-D, a 2-D one may not change its rows or pitch, and the
/// device may not change.
pub unsafe extern "C" fn cuGraphExecMemsetNodeSetParams_v10020(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const CUDA_MEMSET_NODE_PARAMS_v1,
    ctx: CUcontext,
) -> CUresult {
    entry("cuGraphExecMemsetNodeSetParams", 10020, |s| {
        let e = s.exec(exec)?;
        let step = s.exec_step(e, h(node))?;
        let m = input(params)?;
        let c = s.live_ctx(h(ctx))?;
        let old = match &s.execs.get(e).map_err(|_| CUDA_ERROR_INVALID_VALUE)?.plan.steps[step] {
            Step::Work(Work::Memset(m)) => *m,
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        let device = s.ctx_device(c);
        let two_d = |h: usize| h > 1;
        if device != old.device
            || !matches!(m.elementSize, 1 | 2 | 4)
            || two_d(m.height) != two_d(old.height)
            || (two_d(m.height) && (m.height != old.height || m.pitch != old.pitch))
        {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let new =
            crate::objects::work::Memset { dst: m.dst, value: m.value, element: m.elementSize, width: m.width, ..old };
        let span = new.span().ok_or(CUDA_ERROR_INVALID_VALUE)?;
        if span > 0 {
            s.memory
                .check(new.dst, span, Some(device))
                .map_err(|a| s.misuse(CUDA_ERROR_INVALID_VALUE, format!("memset node: {}", a.describe())))?;
        }
        s.set_step(e, step, Step::Work(Work::Memset(new)))
    })
}

/// `cuGraphExecChildGraphNodeSetParams` (11010): the child's topology and
/// insertion order must match the node's.
pub unsafe extern "C" fn cuGraphExecChildGraphNodeSetParams_v11010(
    exec: CUgraphExec,
    node: CUgraphNode,
    child: CUgraph,
) -> CUresult {
    entry("cuGraphExecChildGraphNodeSetParams", 11010, |s| {
        let e = s.exec(exec)?;
        let n = h(node);
        let step = s.exec_step(e, n)?;
        let c = s.graph(child)?;
        let current = match s.nodes.get(n).map(|x| &x.kind) {
            Ok(crate::objects::graph::NodeKind::Child(g)) => *g,
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        if s.shape(current, &mut Vec::new())? != s.shape(c, &mut Vec::new())? {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let tmp = s.instantiate(c)?;
        let from = s.execs.remove(tmp).map_err(|_| CUDA_ERROR_INVALID_VALUE)?.plan;
        let x = s.execs.get_mut(e).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        let plan = std::sync::Arc::make_mut(&mut x.plan);
        let list = match &plan.steps[step] {
            Step::Child(l) => l.clone(),
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        State::overwrite(plan, &list, &from, &from.root);
        Ok(())
    })
}
