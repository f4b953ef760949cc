//! The fc-graph feature rows of `fc-bench` (after the main rows; alone
//! with `--features-only`): re-capture + in-place update
//! (`recapture_update`), breakable replay against an unbroken graph plus
//! host calls (`breakable_replay_*`, `unbroken_plus_host_calls_*`,
//! `cost_per_break_*`), the graph cache's hit (`cache_rows`) and the
//! capture pool's growth (`pool_bytes_after_capture_*`, `pool_growth_*`).

use std::time::Instant;

use fc_bench::chain::Chain;
use fc_bench::stats::{build_kind, round, us_since, Summary, IMPL};
use fc_graph::{CaptureMode, Context, DeviceBuffer, Error, Graph, Result};
use serde_json::json;

use crate::print::{emit_row_with, in_both_modes, print_row, Mode};
use crate::{cache_rows, Args, Check};

/// Breakable-replay rows: `BREAKS` breaks split the chain into
/// `BREAKS + 1` segments of `SEGMENT_KERNELS` kernels (add+mul pairs).
const BREAKS: usize = 6;
const SEGMENT_KERNELS: usize = 4;
/// Default timed iterations of the breakable-replay rows (small numbers).
const BREAK_ITERS: usize = 500;

/// Pool-growth rows: the forward's widths and depth, and its row counts.
const POOL_D: usize = 512;
const POOL_D2: usize = 2048;
const POOL_LAYERS: usize = 4;
const POOL_ROWS: [usize; 3] = [4096, 2048, 4096];
const POOL_ROWS_QUICK: [usize; 3] = [512, 256, 512];
const MIB: f64 = (1u64 << 20) as f64;

/// The feature rows, after the main rows (alone with `--features-only`).
pub(crate) fn bench_features(args: &Args) -> Result<()> {
    let chain = Chain::new(Context::new(args.device)?, args.n)?;
    for &k in &args.kernels {
        in_both_modes(&chain, k, &["recapture_update"], |mode| {
            bench_recapture_update(&chain, k, args.warmup, args.iters_for(k), mode)
        })?;
    }
    let iters = if args.iters > 0 { args.iters } else { BREAK_ITERS };
    bench_breakable(&chain, args.warmup, iters)?;
    cache_rows::bench_cache_hit(&chain, args.warmup, if args.iters > 0 { args.iters } else { 2000 })?;
    drop(chain);
    bench_pool_growth(args)
}

/// `recapture_update`: begin capture, K enqueues, `end_update` into the
/// graph of an earlier capture of the same chain (host clock, end to end;
/// includes destroying the re-captured graph, as raw's timer includes
/// destroying the graph it re-captured: one K-node destroy each).
fn bench_recapture_update(c: &Chain, k: usize, warmup: usize, iters: usize, mode: Mode) -> Result<()> {
    let mut g = c.capture(k)?;
    let first = c.recapture(&mut g, k)?;
    let in_place = first.updated == 1;
    if !in_place {
        eprintln!(
            "[fc] recapture_update K={k}: end_update reported {} updated, {} instantiated: driver lacks in-place update",
            first.updated, first.instantiated
        );
    }
    for _ in 0..warmup {
        c.recapture(&mut g, k)?;
    }
    let mut a = vec![0.0f64; iters];
    let mut all_in_place = in_place;
    for slot in a.iter_mut() {
        let t0 = Instant::now();
        let rep = c.recapture(&mut g, k)?;
        let t1 = Instant::now();
        all_in_place &= rep.updated == 1;
        *slot = us_since(t0, t1);
    }
    let mut extra = json!({"updated": first.updated, "instantiated": first.instantiated});
    if !in_place {
        extra["note"] = json!("driver lacks in-place update");
    } else if !all_in_place {
        extra["note"] = json!("some timed re-captures were instantiated anew");
    }
    mode.emit("recapture_update", k, &mut a, extra);
    c.reset()?;
    g.launch()?;
    c.check(k, if mode.pdl { "updated graph (PDL)" } else { "updated graph" })
}

/// The breakable chain: `BREAKS + 1` segments of `SEGMENT_KERNELS` chain
/// kernels, each break one eager `x = x + y` on the live chain.
fn capture_breakable(c: &Chain) -> Result<Graph<Chain>> {
    let mut cap = c.ctx.begin_breakable::<Chain>(CaptureMode::ThreadLocal)?;
    c.enqueue(SEGMENT_KERNELS)?;
    for _ in 0..BREAKS {
        cap.brk(c, |ctx: &Context, live: &Chain| live.break_kernel(ctx))?;
        c.enqueue(SEGMENT_KERNELS)?;
    }
    cap.end()
}

/// The baseline: one graph of the same segment kernels, then the breaks'
/// kernels as eager host calls.
#[inline]
fn run_unbroken(c: &Chain, g: &Graph<()>) -> Result<()> {
    g.launch()?;
    for _ in 0..BREAKS {
        c.break_kernel(&c.ctx)?;
    }
    Ok(())
}

/// A: replay of the 6-break chain; B: the same kernels as one unbroken
/// graph plus the 6 break kernels as host calls. A and B alternate within
/// each iteration (order swapped every iteration). The cost per break is
/// (median A - median B) / 6; its p10/p90 are those of the per-iteration
/// paired differences (A_i - B_i) / 6.
fn bench_breakable(c: &Chain, warmup: usize, iters: usize) -> Result<()> {
    let graph_kernels = SEGMENT_KERNELS * (BREAKS + 1);
    let kernels = graph_kernels + BREAKS;
    let want = (graph_kernels / 2 + BREAKS) as f32;

    let broken = capture_breakable(c)?;
    if broken.break_count() != BREAKS || broken.segment_count() != 2 * BREAKS + 1 {
        return Err(Error::InvalidArgument(format!(
            "breakable capture has {} pieces and {} breaks, want {} and {BREAKS}",
            broken.segment_count(),
            broken.break_count(),
            2 * BREAKS + 1
        )));
    }
    let unbroken = c.capture(graph_kernels)?;
    c.reset()?;
    broken.replay(c)?;
    c.check_x(want, "breakable replay (6 breaks)", kernels)?;
    c.reset()?;
    run_unbroken(c, &unbroken)?;
    c.check_x(want, "unbroken graph + host calls", kernels)?;

    for _ in 0..warmup {
        broken.replay(c)?;
        c.ctx.synchronize()?;
        run_unbroken(c, &unbroken)?;
        c.ctx.synchronize()?;
    }
    let (mut a_host, mut a_sync) = (vec![0.0f64; iters], vec![0.0f64; iters]);
    let (mut b_host, mut b_sync) = (vec![0.0f64; iters], vec![0.0f64; iters]);
    for i in 0..iters {
        for pass in 0..2 {
            if (pass == 0) == (i % 2 == 0) {
                let t0 = Instant::now();
                broken.replay(c)?;
                let t1 = Instant::now();
                c.ctx.synchronize()?;
                let t2 = Instant::now();
                a_host[i] = us_since(t0, t1);
                a_sync[i] = us_since(t0, t2);
            } else {
                let t0 = Instant::now();
                run_unbroken(c, &unbroken)?;
                let t1 = Instant::now();
                c.ctx.synchronize()?;
                let t2 = Instant::now();
                b_host[i] = us_since(t0, t1);
                b_sync[i] = us_since(t0, t2);
            }
        }
    }
    let per = BREAKS as f64;
    let mut d_sync: Vec<f64> = a_sync.iter().zip(&b_sync).map(|(a, b)| (a - b) / per).collect();
    let mut d_host: Vec<f64> = a_host.iter().zip(&b_host).map(|(a, b)| (a - b) / per).collect();

    let a_extra =
        json!({"segments": BREAKS + 1, "breaks": BREAKS, "graph_kernels": graph_kernels, "break_kernels": BREAKS});
    let b_extra = json!({"graph_kernels": graph_kernels, "host_kernels": BREAKS});
    let a_sync_med = emit_row_with("breakable_replay_6breaks_sync", kernels, &mut a_sync, a_extra.clone());
    let b_sync_med = emit_row_with("unbroken_plus_host_calls_sync", kernels, &mut b_sync, b_extra.clone());
    let a_host_med = emit_row_with("breakable_replay_6breaks_host", kernels, &mut a_host, a_extra);
    let b_host_med = emit_row_with("unbroken_plus_host_calls_host", kernels, &mut b_host, b_extra);

    for (row, a_med, b_med, d, a_row, b_row) in [
        (
            "cost_per_break_us",
            a_sync_med,
            b_sync_med,
            &mut d_sync,
            "breakable_replay_6breaks_sync",
            "unbroken_plus_host_calls_sync",
        ),
        (
            "cost_per_break_host_us",
            a_host_med,
            b_host_med,
            &mut d_host,
            "breakable_replay_6breaks_host",
            "unbroken_plus_host_calls_host",
        ),
    ] {
        let paired = Summary::of(d);
        let cost = Summary { median: (a_med - b_med) / per, ..paired };
        let extra =
            json!({"breaks": BREAKS, "from": a_row, "baseline": b_row, "paired_median_us": round(paired.median, 3)});
        print_row(row, kernels, &cost, extra);
    }
    Ok(())
}

/// One capture of the pool forward at `n` rows (the context is capturing):
/// per layer `h = xin * w1` (n x d2), `h[..n*d] += x`, `dst = h * w1`
/// (n x d2), `x' = dst * w2` (n x d); h and dst are dropped inside the
/// capture (their pool blocks return for reuse), as is the previous x.
/// Returns the last x.
fn pool_forward(
    ctx: &Context,
    xin: &DeviceBuffer,
    w1: &DeviceBuffer,
    w2: &DeviceBuffer,
    n: usize,
) -> Result<DeviceBuffer> {
    let (nd, nd2) = (n * POOL_D, n * POOL_D2);
    let mut x: Option<DeviceBuffer> = None;
    for _ in 0..POOL_LAYERS {
        let h = ctx.alloc(nd2 * 4)?;
        ctx.mul(xin, w1, &h, nd2)?;
        ctx.add(&h, x.as_ref().unwrap_or(xin), &h, nd)?;
        let dst = ctx.alloc(nd2 * 4)?;
        ctx.mul(&h, w1, &dst, nd2)?;
        drop(h);
        let next = ctx.alloc(nd * 4)?;
        ctx.mul(&dst, w2, &next, nd)?;
        drop(dst);
        x = Some(next); // the previous x returns to the pool here
    }
    x.ok_or_else(|| Error::InvalidArgument("pool forward of 0 layers".into()))
}

/// Pool bytes after each of three captures of the forward (4096, 2048,
/// 4096 rows) on a fresh context; graphs and outputs stay alive throughout.
fn bench_pool_growth(args: &Args) -> Result<()> {
    let rows = if args.quick { POOL_ROWS_QUICK } else { POOL_ROWS };
    let max_rows = rows.iter().copied().max().unwrap_or(1);
    let (xin_v, w1_v, w2_v) = (1.0f32, 1.0f32, 0.25f32);
    let kernels = 4 * POOL_LAYERS;

    let ctx = Context::new(args.device)?;
    let xin = ctx.alloc(max_rows * POOL_D2 * 4)?;
    xin.upload(&vec![xin_v; max_rows * POOL_D2])?;
    let w1 = ctx.alloc(max_rows * POOL_D2 * 4)?;
    w1.upload(&vec![w1_v; max_rows * POOL_D2])?;
    let w2 = ctx.alloc(max_rows * POOL_D * 4)?;
    w2.upload(&vec![w2_v; max_rows * POOL_D])?;
    // The same f32 operations on the host (every element is equal).
    let mut want = xin_v;
    for _ in 0..POOL_LAYERS {
        let h = xin_v * w1_v + want;
        want = (h * w1_v) * w2_v;
    }

    let baseline = ctx.pool_reserved_bytes();
    let mut kept: Vec<(Graph<()>, DeviceBuffer)> = Vec::new();
    let mut added = [0i64; 3];
    for (i, &n) in rows.iter().enumerate() {
        let before = ctx.pool_reserved_bytes();
        let t0 = Instant::now();
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
        let out = pool_forward(&ctx, &xin, &w1, &w2, n)?;
        let graph = cap.end()?;
        let t1 = Instant::now();
        graph.launch()?;
        ctx.synchronize()?;
        let mut h = vec![0.0f32; n * POOL_D];
        out.download(&mut h)?;
        if let Some(j) = h.iter().position(|&v| v != want) {
            eprintln!("[fc] FATAL wrong result of pool capture {} (n={n}): out[{j}] = {}, want {want}", i + 1, h[j]);
            std::process::exit(1);
        }
        let after = ctx.pool_reserved_bytes();
        added[i] = after as i64 - before as i64;
        let capture_us = us_since(t0, t1);
        println!(
            "{}",
            json!({"impl": IMPL, "row": format!("pool_bytes_after_capture_{}", i + 1), "kernels": kernels,
                   "median_us": null, "bytes": after, "mib": round(after as f64 / MIB, 3), "added_bytes": added[i],
                   "baseline_bytes": baseline, "rows": n, "d": POOL_D, "d2": POOL_D2, "layers": POOL_LAYERS,
                   "capture_us": round(capture_us, 3), "build": build_kind()})
        );
        eprintln!(
            "[fc] pool after capture {} (n={n}): {:.3} MiB reserved ({:+.3} MiB; capture+instantiate {capture_us:.1} us; output ok)",
            i + 1,
            after as f64 / MIB,
            added[i] as f64 / MIB
        );
        kept.push((graph, out));
    }

    let first = added[0];
    let bound = ((2u64 << 20) as i64).max(first / 10);
    for (i, &add) in added.iter().enumerate().skip(1) {
        let fraction = (first > 0).then(|| round(add as f64 / first as f64, 4));
        let met = add < bound;
        println!(
            "{}",
            json!({"impl": IMPL, "row": format!("pool_growth_{}_over_1", i + 1), "kernels": kernels,
                   "median_us": null, "fraction": fraction, "added_bytes": add, "first_growth_bytes": first,
                   "bound_bytes": bound, "goal_met": met, "build": build_kind()})
        );
        let fraction = fraction.map_or_else(|| "null".to_string(), |f| format!("{f:.4}"));
        eprintln!(
            "[fc] pool capture {} added {:.3} MiB = {fraction} of capture 1's {:.3} MiB (bound {:.3} MiB): {}",
            i + 1,
            add as f64 / MIB,
            first as f64 / MIB,
            bound as f64 / MIB,
            if met { "met" } else { "MISSED" }
        );
    }
    drop(kept);
    Ok(())
}
