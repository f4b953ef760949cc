//! Re-capture + in-place update: `recapture_update` (the library's
//! `end_update` against two ways of bare re-capture + `cuGraphExecUpdate`),
//! `graph_node_count` and `c_recapture_update` (the same re-capture
//! through the C ABI).

use std::time::Instant;

use cuda_sys::result::graph;
use fc_graph::Result;

use super::rigs::{ok, BareExec, CRig, ChainRun};
use super::rows::{StepOutput, Variant};
use super::timing::emit;
use crate::stats::us_since;

/// The steps of [`recapture_rows`], in the order it emits them.
pub(super) const STEPS: &[&str] = &["recapture_update", "graph_node_count", "c_recapture_update"];

/// `recapture_update`: the library's `end_update` against bare re-capture +
/// `cuGraphExecUpdate` (destroying the re-captured graph, as the raw C
/// baseline does; or keeping it and destroying the replaced one), each into
/// its own executable, alternating. `c_recapture_update`: the same
/// re-capture through the C ABI (`fc_graph_begin_ctx`, K `fc_add_ctx` /
/// `fc_mul_ctx`, `fc_graph_end_update_ctx`, each call checking its handles)
/// against the same bare calls. Also `graph_node_count`.
/// No rows on a driver without in-place update (`cuGraphExecUpdate`).
pub(super) fn recapture_rows(at: ChainRun, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let ChainRun { d, rig, k, iters } = at;
    if d.cuGraphExecUpdate.is_none() {
        return Ok(());
    }
    let mut g = rig.chain.capture(k)?;
    let mut bare = BareExec::new(d, rig, k)?;
    let mut keep = match BareExec::new(d, rig, k) {
        Ok(e) => e,
        Err(e) => {
            bare.destroy(d);
            return Err(e);
        }
    };
    let crig = CRig::new(rig.chain.ctx.device_id(), rig.chain.n).and_then(|r| Ok((r.capture(k)?, r)));
    let (cgraph, crig) = match crig {
        Ok(r) => r,
        Err(e) => {
            bare.destroy(d);
            keep.destroy(d);
            return Err(e);
        }
    };
    let (mut fc, mut b, mut kn, mut count, mut cabi) = (vec![], vec![], vec![], vec![], vec![]);
    let mut run = || -> Result<()> {
        for it in 0..iters + 2 {
            let t0 = Instant::now();
            rig.fc_recapture(&mut g, k)?;
            let t1 = Instant::now();
            bare.recapture(d, rig, k, false)?;
            let t2 = Instant::now();
            keep.recapture(d, rig, k, true)?;
            let t3 = Instant::now();
            // SAFETY: live graph.
            let nodes = ok(unsafe { graph::node_count(d, keep.source) })?;
            let t4 = Instant::now();
            crig.recapture(cgraph, k)?;
            let t5 = Instant::now();
            if nodes != k {
                return Err(fc_graph::Error::invalid(format!("graph_node_count: {nodes} nodes, want {k}")));
            }
            if it >= 2 {
                fc.push(us_since(t0, t1));
                b.push(us_since(t1, t2));
                kn.push(us_since(t2, t3));
                count.push(us_since(t3, t4));
                cabi.push(us_since(t4, t5));
            }
        }
        Ok(())
    };
    let result = run();
    bare.destroy(d);
    keep.destroy(d);
    fcgraph::fc_graph_free(cgraph);
    drop(crig);
    result?;
    emit(out, "recapture_update", Variant::Fc, k, &mut fc);
    emit(out, "recapture_update", Variant::Bare, k, &mut b);
    emit(out, "recapture_update", Variant::BareKeepNew, k, &mut kn);
    emit(out, "graph_node_count", Variant::BareOnly, k, &mut count);
    let mut bare_again = b.clone();
    emit(out, "c_recapture_update", Variant::Fc, k, &mut cabi);
    emit(out, "c_recapture_update", Variant::Bare, k, &mut bare_again);
    Ok(())
}
