//! Recordings built node by node (fc-graph's recording API, as engines
//! call it) against bare stream capture: `build_instantiate`, the
//! re-recording rows `node_update_*` beside the driver's floor
//! `set_params_floor*`, and `built_launch_sync`; with the pair of graphs
//! they update ([`UpdatePair`]), which `--rerecord-profile` times too.

use std::os::raw::c_void;
use std::time::Instant;

use cuda_sys::result::{graph, graph_exec, stream};
use cuda_sys::*;
use fc_graph::{BinaryOp, CaptureMode, Graph, Result};

use super::capture::capture_instantiate_samples;
use super::rigs::{chain_node_params, ok, rc, BareExec, ChainRun, Rig};
use super::rows::{StepOutput, Variant};
use super::timing::{alternate_blocks, emit, emit_alternated};
use crate::stats::us_since;

/// The steps of [`builder_rows`], in the order it emits them (the update
/// rows where the driver has in-place update).
pub(super) const STEPS: &[&str] = &[
    "build_instantiate",
    "node_update_all",
    "node_update_one",
    "node_update_none",
    "set_params_floor",
    "built_launch_sync",
    "node_update_all_plain",
    "set_params_floor_plain",
];

/// What each round of a node-update row changes, against the same side's
/// previous round (the other side's rounds touch only their own graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// Every node's operands (K node calls on the library's side).
    Every,
    /// Node K / 2's operands (1 node call).
    One,
    /// Nothing (no driver call).
    Nothing,
}

impl Change {
    /// The library's node calls per round.
    pub(super) fn node_calls(self, k: usize) -> usize {
        match self {
            Change::Every => k,
            Change::One => 1,
            Change::Nothing => 0,
        }
    }

    /// The next round's operand variants (see [`Chain::node`](crate::chain::Chain::node)) from the
    /// current ones: every node, node K / 2 or none flipped.
    pub(super) fn apply(self, swap: &mut [bool]) {
        match self {
            Change::Every => swap.iter_mut().for_each(|s| *s = !*s),
            Change::One => {
                let one = swap.len() / 2;
                if let Some(s) = swap.get_mut(one) {
                    *s = !*s;
                }
            }
            Change::Nothing => {}
        }
    }
}

/// A graph recorded through the library and a bare executable of the same
/// K-kernel chain, with the operand variant of each node (see
/// [`Chain::node`](crate::chain::Chain::node)) that each of them holds now: each side's rounds change
/// exactly what the row says against that side's previous round, whatever
/// the rows before left behind.
pub(super) struct UpdatePair {
    pub(super) g: Graph,
    exec: BareExec,
    pub(super) fc_swap: Vec<bool>,
    bare_swap: Vec<bool>,
}

impl UpdatePair {
    /// Both sides recorded / captured in the rig's current launch mode.
    pub(super) fn new(d: &Driver, rig: &Rig, k: usize) -> Result<UpdatePair> {
        let g = rig.chain.capture(k)?;
        let exec = BareExec::new(d, rig, k)?;
        Ok(UpdatePair { g, exec, fc_swap: vec![false; k], bare_swap: vec![false; k] })
    }

    pub(super) fn destroy(self, d: &Driver) {
        self.exec.destroy(d);
    }

    /// Row `step`: the library's re-recording + update (`end_update`),
    /// checked from its report (one segment updated in place, with
    /// `change`'s node calls, every round, warm-ups included), against bare
    /// re-capture + `cuGraphExecUpdate` + destroying the re-captured graph,
    /// both changing `change`'s nodes each round.
    pub(super) fn update_row(
        &mut self,
        d: &Driver,
        rig: &Rig,
        step: &'static str,
        change: Change,
        iters: usize,
        out: &mut dyn FnMut(StepOutput),
    ) -> Result<()> {
        let k = self.fc_swap.len();
        let want = change.node_calls(k);
        let UpdatePair { g, exec, fc_swap, bare_swap } = self;
        let (mut fc, mut bare) = alternate_blocks(
            iters,
            |round| {
                change.apply(fc_swap);
                let t0 = Instant::now();
                let report = rig.chain.rerecord(g, k, |i| fc_swap[i])?;
                let t = us_since(t0, Instant::now());
                if report.updated != 1 || report.instantiated != 0 || report.node_calls != want {
                    return Err(fc_graph::Error::invalid(format!(
                        "{step} K={k}, round {round}: {report:?}, want {want} node calls in one update"
                    )));
                }
                Ok(t)
            },
            |_| {
                change.apply(bare_swap);
                let t0 = Instant::now();
                exec.recapture_with(d, rig, k, false, |i| bare_swap[i])?;
                Ok(us_since(t0, Instant::now()))
            },
        )?;
        emit_alternated(out, step, k, iters, &mut fc, &mut bare);
        Ok(())
    }

    /// The driver's own floor of a node-by-node update, row `step`: K bare
    /// `cuGraphExecKernelNodeSetParams` calls on the bare executable, every
    /// node changed against the previous round (commuted operands, the same
    /// results), no library code; two untimed rounds first. Skipped with a
    /// note when the driver refuses a call.
    pub(super) fn set_params_floor(
        &mut self,
        d: &Driver,
        rig: &Rig,
        step: &'static str,
        iters: usize,
        out: &mut dyn FnMut(StepOutput),
    ) -> Result<()> {
        let k = self.bare_swap.len();
        let mut nodes: Vec<CUgraphNode> = vec![std::ptr::null_mut(); k];
        // SAFETY: the bare executable's live source graph.
        let n = ok(unsafe { graph::get_nodes_into(d, self.exec.source, &mut nodes) })?;
        if n != k {
            println!("[fc] {step} K={k}: the graph has {n} nodes; skipped");
            return Ok(());
        }
        let grid = (rig.chain.n as u32).div_ceil(256);
        let mut v = Vec::with_capacity(iters);
        for it in 0..iters + 2 {
            let t0 = Instant::now();
            for (i, &node) in nodes.iter().enumerate() {
                let swap = !self.bare_swap[i];
                let (op, a, b, o) = rig.chain.node(i, swap);
                let func = if op == BinaryOp::Add { rig.func_add } else { rig.func_mul };
                let mut w = [a.as_raw(), b.as_raw(), o.as_raw(), rig.chain.n as u64];
                let base = w.as_mut_ptr();
                let mut params: [*mut c_void; 4] = [
                    base.cast(),
                    base.wrapping_add(1).cast(),
                    base.wrapping_add(2).cast(),
                    base.wrapping_add(3).cast(),
                ];
                let p = chain_node_params(func, grid, params.as_mut_ptr());
                // SAFETY: the bare live executable, a kernel node of its source
                // (creation order: node i is the chain's launch i), parameters
                // of the same (u64, u64, u64, u32) kernel, live across the call.
                let res = unsafe { graph_exec::kernel_node_set_params(d, self.exec.exec, node, &p) };
                if res != Some(Ok(())) {
                    let res = res.map(rc);
                    println!("[fc] {step} K={k}: node {i} refused ({res:?}); skipped");
                    return Ok(());
                }
                self.bare_swap[i] = swap;
            }
            if it >= 2 {
                v.push(us_since(t0, Instant::now()));
            }
        }
        emit(out, step, Variant::BareOnly, k, &mut v);
        Ok(())
    }

    /// `built_launch_sync`: launch + sync of the recorded graph against a
    /// bare `cuGraphLaunch` + sync of the captured executable, alternating
    /// in blocks.
    pub(super) fn launch_sync_row(
        &self,
        d: &Driver,
        rig: &Rig,
        iters: usize,
        out: &mut dyn FnMut(StepOutput),
    ) -> Result<()> {
        let k = self.fc_swap.len();
        let (g, exec) = (&self.g, self.exec.exec);
        let (mut fc, mut bare) = alternate_blocks(
            iters,
            |_| {
                let t0 = Instant::now();
                g.launch()?;
                rig.chain.ctx.synchronize()?;
                Ok(us_since(t0, Instant::now()))
            },
            |_| {
                let t0 = Instant::now();
                // SAFETY: live executable and stream of the rig.
                ok(unsafe { graph_exec::launch(d, exec, rig.bare_stream) })?;
                // SAFETY: our stream.
                ok(unsafe { stream::synchronize(d, rig.bare_stream) })?;
                Ok(us_since(t0, Instant::now()))
            },
        )?;
        emit_alternated(out, "built_launch_sync", k, iters, &mut fc, &mut bare);
        Ok(())
    }
}

/// Recordings (built node by node: fc-graph's recording API, as engines
/// call it) against bare stream capture, each pair alternating in blocks
/// ([`alternate_blocks`](super::timing::alternate_blocks)), with the rig's launch mode (PDL where the
/// built-ins use it): `build_instantiate` (record + instantiate);
/// `node_update_all` / `_one` / `_none` (re-record into the same graph with
/// every, one or no node changed, against bare re-capture with the same
/// change + `cuGraphExecUpdate` + destroying the re-captured graph; the
/// library's driver calls are checked from its update report: K, 1 and 0);
/// `set_params_floor` (K bare `cuGraphExecKernelNodeSetParams`);
/// `built_launch_sync` (the recorded graph against the bare captured one,
/// launch + sync). Then `node_update_all_plain` and
/// `set_params_floor_plain`: the same with plain launches on both sides
/// ([`plain_update_rows`]).
pub(super) fn builder_rows(at: ChainRun, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let ChainRun { d, rig, k, iters } = at;
    if !rig.chain.ctx.begin_capture(CaptureMode::ThreadLocal)?.builds() {
        return Err(fc_graph::Error::invalid("the rig's recordings do not build (FC_RECORDING set?)"));
    }
    let (mut fc, mut bare) = capture_instantiate_samples(d, rig, k, iters)?;
    emit_alternated(out, "build_instantiate", k, iters, &mut fc, &mut bare);

    if d.cuGraphExecUpdate.is_none() {
        return Ok(());
    }
    let mut pair = UpdatePair::new(d, rig, k)?;
    let mut run = || -> Result<()> {
        for (step, change) in [
            ("node_update_all", Change::Every),
            ("node_update_one", Change::One),
            ("node_update_none", Change::Nothing),
        ] {
            pair.update_row(d, rig, step, change, iters, out)?;
        }
        pair.set_params_floor(d, rig, "set_params_floor", iters, out)?;
        pair.launch_sync_row(d, rig, iters, out)
    };
    let result = run();
    pair.destroy(d);
    result?;
    plain_update_rows(d, rig, k, iters, out)
}

/// `node_update_all_plain` and `set_params_floor_plain`: `node_update_all`
/// and `set_params_floor` with PDL off on both sides, on a graph and a bare
/// executable recorded for them with PDL off (measured also where the rig
/// is plain anyway, so that the rows are always there). The rig's launch
/// mode is restored afterwards, also on error.
fn plain_update_rows(d: &Driver, rig: &Rig, k: usize, iters: usize, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let default = rig.pdl.get();
    rig.set_pdl(false);
    let result = UpdatePair::new(d, rig, k).and_then(|mut pair| {
        let result = pair
            .update_row(d, rig, "node_update_all_plain", Change::Every, iters, out)
            .and_then(|()| pair.set_params_floor(d, rig, "set_params_floor_plain", iters, out));
        pair.destroy(d);
        result
    });
    rig.set_pdl(default);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_flips_what_its_row_says() {
        for k in [1, 2, 26, 2600] {
            for (change, want) in [(Change::Every, k), (Change::One, 1), (Change::Nothing, 0)] {
                assert_eq!(change.node_calls(k), want);
                // Whatever an earlier row left behind (a mixed state).
                let mut swap: Vec<bool> = (0..k).map(|i| i % 3 == 0).collect();
                for _ in 0..4 {
                    let before = swap.clone();
                    change.apply(&mut swap);
                    let changed: Vec<usize> = (0..k).filter(|&i| before[i] != swap[i]).collect();
                    assert_eq!(changed.len(), want, "{change:?} K={k}");
                    if change == Change::One {
                        assert_eq!(changed, [k / 2]);
                    }
                }
            }
        }
    }
}
