//! Lanes (issue 20): two joined lanes of 26 kernels against one chain of
//! 52, both recorded through fc-graph: `lanes_replay_pdl` and
//! `lanes_replay_plain`.

use std::time::Instant;

use fc_graph::{CaptureMode, Result};

use super::rigs::ChainRun;
use super::rows::{StepOutput, Variant};
use super::timing::emit;
use crate::stats::us_since;

/// The steps of [`lanes_rows`], in the order it emits them (the `_pdl`
/// one where the rig uses PDL).
pub(super) const STEPS: &[&str] = &["lanes_replay_pdl", "lanes_replay_plain"];

/// Lanes (issue 20): two independent 26-kernel chains recorded on two
/// lanes of the rig's context and joined, against one recorded chain of
/// 52, launch + sync alternating, with PDL (where the rig has it) and
/// plain: `lanes_replay_pdl` / `lanes_replay_plain` (fc column: the lanes;
/// bare column: the chain of 52, also through fc-graph).
/// Measured at K = 26 only (other chain lengths: no rows).
pub(super) fn lanes_rows(at: ChainRun, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let ChainRun { rig, k, iters, .. } = at;
    if k != 26 {
        return Ok(());
    }
    let n = rig.chain.n;
    let (x2, z2) = (rig.chain.ctx.alloc(n * 4)?, rig.chain.ctx.alloc(n * 4)?);
    x2.fill_bytes(0, n * 4, 0)?;
    let pdl_default = rig.pdl.get();
    let mut run = || -> Result<()> {
        for (pdl, step) in [(true, "lanes_replay_pdl"), (false, "lanes_replay_plain")] {
            if pdl && !pdl_default {
                continue;
            }
            rig.set_pdl(pdl);
            let cap = rig.chain.ctx.begin_capture(CaptureMode::ThreadLocal)?;
            let lanes = rig.chain.ctx.fork(2)?;
            for (lane, (x, z)) in lanes.iter().zip([(&rig.chain.x, &rig.chain.z), (&x2, &z2)]) {
                for i in 0..26 {
                    if i % 2 == 0 {
                        lane.add(x, &rig.chain.y, z, n)?;
                    } else {
                        lane.mul(z, &rig.chain.y, x, n)?;
                    }
                }
            }
            rig.chain.ctx.join(&lanes)?;
            let g_lanes = cap.end()?;
            let g_chain = rig.chain.capture(52)?;
            if g_lanes.node_count()? != 52 || g_chain.node_count()? != 52 {
                return Err(fc_graph::Error::invalid("lanes rows: 52 nodes on each side expected"));
            }
            let (mut lanes_t, mut chain_t) = (vec![], vec![]);
            for it in 0..iters + 2 {
                let t0 = Instant::now();
                g_lanes.launch()?;
                rig.chain.ctx.synchronize()?;
                let t1 = Instant::now();
                g_chain.launch()?;
                rig.chain.ctx.synchronize()?;
                let t2 = Instant::now();
                if it >= 2 {
                    lanes_t.push(us_since(t0, t1));
                    chain_t.push(us_since(t1, t2));
                }
            }
            emit(out, step, Variant::Fc, 26, &mut lanes_t);
            emit(out, step, Variant::Bare, 26, &mut chain_t);
        }
        Ok(())
    };
    let result = run();
    rig.set_pdl(pdl_default);
    result
}
