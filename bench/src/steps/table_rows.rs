//! The benchmark table's host-bound rows in one process:
//! `table_capture_instantiate_{pdl,plain}` and
//! `table_recapture_update_{pdl,plain}`.

use std::time::Instant;

use cuda_sys::Driver;
use fc_graph::Result;

use super::capture::capture_instantiate_samples;
use super::rigs::{BareExec, ChainRun, Rig};
use super::rows::{StepOutput, Variant};
use super::timing::{emit, emit_alternated};
use crate::stats::us_since;

/// The steps of [`table_rows`], in the order it emits them (the `_pdl`
/// ones where the built-ins use PDL; the update rows where the driver has
/// in-place update).
pub(super) const STEPS: &[&str] = &[
    "table_capture_instantiate_pdl",
    "table_recapture_update_pdl",
    "table_capture_instantiate_plain",
    "table_recapture_update_plain",
];

/// The benchmark table's host-bound rows, `capture_instantiate` and
/// `recapture_update`, timed end to end as fc-bench and raw_bench time
/// them, but in one process, alternating library and bare driver calls
/// (capture + instantiate in blocks, [`alternate_blocks`](super::timing::alternate_blocks); re-capture +
/// update iteration by iteration), in each launch mode (`table_<row>_pdl` where
/// the built-ins use PDL, and `table_<row>_plain`). Host timings on the
/// benchmark VMs move by up to 2x between processes and phases of a few
/// seconds (GPU runs 34-36); alternating calls see the same phases.
pub(super) fn table_rows(at: ChainRun, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let ChainRun { d, rig, k, iters } = at;
    let default = rig.pdl.get();
    let modes: &[bool] = if default { &[true, false] } else { &[false] };
    let mut result = Ok(());
    for &pdl in modes {
        rig.set_pdl(pdl);
        result = table_rows_in_mode(d, rig, k, iters, pdl, out);
        if result.is_err() {
            break;
        }
    }
    rig.set_pdl(default);
    result
}

fn table_rows_in_mode(
    d: &Driver,
    rig: &Rig,
    k: usize,
    iters: usize,
    pdl: bool,
    out: &mut dyn FnMut(StepOutput),
) -> Result<()> {
    let (capture_step, update_step) = if pdl {
        ("table_capture_instantiate_pdl", "table_recapture_update_pdl")
    } else {
        ("table_capture_instantiate_plain", "table_recapture_update_plain")
    };
    // Capture + instantiate (destroyed untimed), alternating in blocks.
    let (mut fc, mut bare) = capture_instantiate_samples(d, rig, k, iters)?;
    emit_alternated(out, capture_step, k, iters, &mut fc, &mut bare);

    // Re-capture + update in place, each side into its own executable.
    if d.cuGraphExecUpdate.is_none() {
        return Ok(());
    }
    let mut g = rig.chain.capture(k)?;
    let mut exec = BareExec::new(d, rig, k)?;
    let (mut fc, mut bare) = (vec![], vec![]);
    let mut run = || -> Result<()> {
        for it in 0..iters + 2 {
            let t0 = Instant::now();
            rig.fc_recapture(&mut g, k)?;
            let t1 = Instant::now();
            exec.recapture(d, rig, k, false)?;
            let t2 = Instant::now();
            if it >= 2 {
                fc.push(us_since(t0, t1));
                bare.push(us_since(t1, t2));
            }
        }
        Ok(())
    };
    let result = run();
    exec.destroy(d);
    result?;
    emit(out, update_step, Variant::Fc, k, &mut fc);
    emit(out, update_step, Variant::Bare, k, &mut bare);
    Ok(())
}
