//! `fc-bench --rerecord-profile SECS`: a re-recording of K = 26 split into
//! its steps beside the driver's floor (rows `rerecord_phases`), then a
//! loop of re-recordings for a sampling profiler (row `rerecord_loop`).

use std::time::Instant;

use fc_graph::{CaptureMode, Result};
use serde_json::json;

use super::builder::{Change, UpdatePair};
use super::rigs::Rig;
use super::rows::StepOutput;
use crate::stats::{round, us_since, Summary, IMPL};

/// `fc-bench --rerecord-profile SECS`: where a re-recording of K = 26
/// kernels spends its time on this host. For each launch mode (PDL where
/// the device has it, then plain) and each change (every node, none), the
/// medians of `begin_capture`, the K `binary` calls and `end_update`, each
/// timed alone, beside the driver's floor (K bare
/// `cuGraphExecKernelNodeSetParams`) in the same mode; one JSON line per
/// mode and change. Then it re-records plainly, every node changed, for
/// `secs` seconds, so that a sampling profiler sees the path alone.
pub fn rerecord_profile(device: usize, n: usize, secs: f64, out: &mut dyn FnMut(String)) -> Result<()> {
    const K: usize = 26;
    const ROUNDS: usize = 4000;
    let d = fc_graph::driver()?;
    let rig = Rig::open(device, n)?;
    let modes: &[bool] = if rig.pdl.get() { &[true, false] } else { &[false] };
    for &pdl in modes {
        rig.set_pdl(pdl);
        let mut pair = UpdatePair::new(d, &rig, K)?;
        let mut floor = None;
        pair.set_params_floor(d, &rig, "set_params_floor", ROUNDS, &mut |o| {
            if let StepOutput::Row(r) = o {
                floor = Some(r.summary.median);
            }
        })?;
        for change in [Change::Every, Change::Nothing] {
            let (mut begin, mut ops, mut end, mut total) = (vec![], vec![], vec![], vec![]);
            for _ in 0..ROUNDS + 20 {
                change.apply(&mut pair.fc_swap);
                let t0 = Instant::now();
                let cap = rig.chain.ctx.begin_capture(CaptureMode::ThreadLocal)?;
                let t1 = Instant::now();
                for i in 0..K {
                    let (op, a, b, o) = rig.chain.node(i, pair.fc_swap[i]);
                    rig.chain.ctx.binary(op, a, b, o, rig.chain.n)?;
                }
                let t2 = Instant::now();
                let report = cap.end_update(&mut pair.g)?;
                let t3 = Instant::now();
                if report.node_calls != change.node_calls(K) || report.instantiated != 0 {
                    return Err(fc_graph::Error::invalid(format!("rerecord profile: {report:?}")));
                }
                begin.push(us_since(t0, t1));
                ops.push(us_since(t1, t2));
                end.push(us_since(t2, t3));
                total.push(us_since(t0, t3));
            }
            let med = |v: &mut Vec<f64>| round(Summary::of(&mut v[20..]).median, 3);
            let change_name = if change == Change::Every { "every" } else { "none" };
            out(json!({
                "row": "rerecord_phases",
                "impl": IMPL,
                "k": K,
                "pdl": pdl,
                "change": change_name,
                "rounds": ROUNDS,
                "begin_us": med(&mut begin),
                "ops_us": med(&mut ops),
                "end_us": med(&mut end),
                "total_us": med(&mut total),
                "set_params_floor_us": floor.map(|f| round(f, 3)),
            })
            .to_string());
        }
        pair.destroy(d);
    }
    rig.set_pdl(false);
    let mut pair = UpdatePair::new(d, &rig, K)?;
    let t0 = Instant::now();
    let mut rounds = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        Change::Every.apply(&mut pair.fc_swap);
        let swap = &pair.fc_swap;
        rig.chain.rerecord(&mut pair.g, K, |i| swap[i])?;
        rounds += 1;
    }
    let us = us_since(t0, Instant::now()) / rounds.max(1) as f64;
    out(json!({"row": "rerecord_loop", "impl": IMPL, "k": K, "rounds": rounds, "us_per_round": round(us, 3)})
        .to_string());
    pair.destroy(d);
    Ok(())
}
