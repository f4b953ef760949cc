//! The multi-GPU rows of `fc-bench` (`multi_gpu_*_per_s_{1,2}dev`): loops
//! of capture, replay and update of the K = 26 chain on one device alone,
//! then on two devices at once, one thread each.

use fc_bench::chain::Chain;
use fc_bench::rates::per_second_at_once;
use fc_bench::stats::{round, IMPL};
use fc_graph::{Context, Device, Error, Graph, Result};
use serde_json::json;

use crate::Args;

/// The chain length of the multi-GPU rows (and of the cache rows).
pub(crate) const MULTI_GPU_KERNELS: usize = 26;

/// The loops of the multi-GPU rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loop {
    /// capture + instantiate + launch + sync (+ drop) per iteration.
    Capture,
    /// launch + sync of one captured graph.
    Replay,
    /// re-capture + `end_update` + launch + sync.
    Update,
}

impl Loop {
    const ALL: [Loop; 3] = [Loop::Capture, Loop::Replay, Loop::Update];

    fn row(self) -> &'static str {
        match self {
            Loop::Capture => "multi_gpu_captures_per_s",
            Loop::Replay => "multi_gpu_replays_per_s",
            Loop::Update => "multi_gpu_updates_per_s",
        }
    }

    /// The JSON field of the rate (`captures_per_s` as in earlier runs).
    fn field(self) -> &'static str {
        match self {
            Loop::Capture => "captures_per_s",
            _ => "per_s",
        }
    }

    fn doc(self) -> &'static str {
        match self {
            Loop::Capture => "capture+instantiate+launch+sync",
            Loop::Replay => "launch+sync of one graph",
            Loop::Update => "re-capture+end_update+launch+sync",
        }
    }
}

fn capture_launch_once(c: &Chain, k: usize) -> Result<()> {
    let g = c.capture(k)?;
    g.launch()?;
    c.ctx.synchronize()?;
    drop(g);
    Ok(())
}

/// One iteration of `kind` on `c`; `g` is the chain's graph for the replay
/// and update loops.
fn loop_once(kind: Loop, c: &Chain, g: &mut Option<Graph<()>>, k: usize) -> Result<()> {
    let graph = match (kind, g.as_mut()) {
        (Loop::Capture, _) => return capture_launch_once(c, k),
        (_, Some(graph)) => graph,
        (_, None) => return Err(Error::InvalidArgument("the replay and update loops need a graph".into())),
    };
    if kind == Loop::Update {
        let rep = c.recapture(graph, k)?;
        if rep.updated != 1 {
            return Err(Error::InvalidArgument(format!("update loop: not updated in place ({rep:?})")));
        }
    }
    graph.launch()?;
    c.ctx.synchronize()
}

/// One thread per chain, all started together; each loops `kind` for
/// `secs`. Returns the iterations per second per chain.
fn run_workers(chains: &[&Chain], kind: Loop, k: usize, secs: f64) -> Result<Vec<f64>> {
    let warm = |c: &Chain| {
        let mut g = None;
        if kind != Loop::Capture {
            g = Some(c.capture(k)?);
        }
        (0..5).try_for_each(|_| loop_once(kind, c, &mut g, k))?;
        Ok(g)
    };
    per_second_at_once(chains, secs, warm, |c, g| loop_once(kind, c, g, k))
}

/// The multi-GPU rows: each loop on device 0 alone, then on devices 0
/// and 1 at once (one thread each), for `--multi-gpu-secs` each.
pub(crate) fn bench_multi_gpu(args: &Args) -> Result<()> {
    let k = MULTI_GPU_KERNELS;
    let secs = args.multi_gpu_secs;
    let count = Device::count()?;
    let c0 = Chain::new(Context::new(0)?, args.n)?;
    let c1 = if count >= 2 { Some(Chain::new(Context::new(1)?, args.n)?) } else { None };
    let pdl = c0.ctx.pdl_enabled() && c1.as_ref().is_none_or(|c| c.ctx.pdl_enabled());
    let in_place = fc_graph::driver()?.cuGraphExecUpdate.is_some();
    for kind in Loop::ALL {
        let (row, field) = (kind.row(), kind.field());
        if kind == Loop::Update && !in_place {
            eprintln!("[fc] [SKIP] {row}: the driver lacks cuGraphExecUpdate (CUDA 10.2+)");
            for dev in ["1dev", "2dev"] {
                let skipped = "no in-place update in this driver";
                println!("{}", json!({"impl": IMPL, "row": format!("{row}_{dev}"), "kernels": k, "skipped": skipped}));
            }
            continue;
        }
        let one = run_workers(&[&c0], kind, k, secs)?[0];
        let mut r = json!({"impl": IMPL, "row": format!("{row}_1dev"), "kernels": k});
        r[field] = json!(round(one, 1));
        r["secs"] = json!(round(secs, 3));
        r["devices"] = json!(1);
        r["pdl"] = json!(pdl);
        println!("{r}");
        eprintln!("[fc] {row} 1 device : {one:.1}/s ({}, K={k}{})", kind.doc(), if pdl { ", PDL" } else { "" });
        let Some(c1) = c1.as_ref() else {
            eprintln!("[fc] [SKIP] {row} 2 devices: only {count} CUDA device(s) visible");
            let skipped = format!("only {count} CUDA device(s)");
            println!("{}", json!({"impl": IMPL, "row": format!("{row}_2dev"), "kernels": k, "skipped": skipped}));
            continue;
        };
        let per = run_workers(&[&c0, c1], kind, k, secs)?;
        let two: f64 = per.iter().sum();
        let ratio = two / one;
        let mut r = json!({"impl": IMPL, "row": format!("{row}_2dev"), "kernels": k});
        r[field] = json!(round(two, 1));
        r["per_device"] = json!([round(per[0], 1), round(per[1], 1)]);
        r["ratio_vs_1dev"] = json!(round(ratio, 3));
        r["secs"] = json!(round(secs, 3));
        r["devices"] = json!(2);
        r["pdl"] = json!(pdl);
        println!("{r}");
        eprintln!("[fc] {row} 2 devices: {two:.1}/s ({:.1} + {:.1}), {ratio:.2}x one device", per[0], per[1]);
    }
    Ok(())
}
