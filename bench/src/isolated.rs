//! `fc-bench --isolated`: what an isolated context (`Context::isolated`: a
//! green context where the driver has them, else a private CUDA context)
//! costs next to a primary one (issue 9, item 5; issue 18, item 4), and a
//! private context forced (`IsolationRequest::Private`) beside it, so that
//! one run compares green, private and two streams of one context.
//!
//! Same workload as the main rows (K = 26 kernels, `z = x + y; x = z * y`
//! over n floats). The primary and the isolated rig live in one process and
//! alternate iteration by iteration (order swapped every iteration), so the
//! difference is the context's, not the process's. Rows (JSON on stdout):
//!
//! | row                                       | what is measured                                  |
//! |-------------------------------------------|---------------------------------------------------|
//! | `ctx_isolated_memory_bytes`               | device memory an isolated context takes: free     |
//! |                                           | memory before - after creating it, its stream,    |
//! |                                           | built-in module and 3 buffers of n floats         |
//! | `ctx_graph_launch_sync_{primary,isolated}`| launch of the captured K-kernel graph + sync      |
//! | `ctx_eager_enqueue_per_kernel_{..}`       | K enqueues / K (host; sync untimed)               |
//! | `ctx_capture_instantiate_{..}`            | begin, K enqueues, end + instantiate (host)       |
//! | `ctx_replays_per_s_1ctx_{primary,isolated}` | one thread looping launch + sync on one context |
//! | `ctx_replays_per_s_2ctx_primary`          | two threads, two primary contexts (two streams of |
//! |                                           | one CUDA context) on one GPU, at once             |
//! | `ctx_replays_per_s_2ctx_isolated`         | two threads, two isolated contexts (two CUDA      |
//! |                                           | contexts, time-sliced by the GPU)                 |
//! | `ctx_replays_per_s_2ctx_mixed`            | one primary + one isolated (an engine beside      |
//! |                                           | PyTorch)                                          |
//! | `ctx_private_memory_bytes`                | as the isolated row, for a forced private context |
//! | `ctx_replays_per_s_1ctx_private`          | one thread, a forced private context              |
//! | `ctx_replays_per_s_2ctx_mixed_private`    | one primary + one forced private context          |
//!
//! Every row of an isolated or private context carries `isolation`
//! (`green` or `private`: what the context got). The mixed rows also carry
//! `ratio_vs_2ctx_primary`: their total against two primary contexts' (the
//! goal: primary + isolated ≥ 0.9x two streams of one context).
//!
//! Isolated timing rows carry `primary_median_us` and `ratio_vs_primary`;
//! the replay rows carry `replays_per_s`, `per_context` and `ratio_vs_1ctx`
//! (against the one-context row of the same kind; mixed against primary).
//! `bench/isolated_table.py` turns the rows into a markdown table.

use std::time::Instant;

use fc_bench::chain::Chain;
use fc_bench::rates::per_second_at_once;
use fc_bench::stats::{build_kind, round, us_since, Summary, IMPL};
use fc_graph::{Context, Error, Graph, Isolation, IsolationRequest, Result};
use serde_json::json;

use crate::print::emit_row_with;
use crate::Args;

/// Kernels of the timed chain (the seed's layer: 13 add/mul pairs).
const K: usize = 26;
/// Default timed iterations per row (each alternates both contexts).
const ITERS: usize = 300;

/// What an isolated or primary context got, for the human lines.
fn kind(c: &Chain) -> &'static str {
    match c.ctx.isolation() {
        Isolation::None => "primary",
        Isolation::Green => "isolated (green)",
        Isolation::Private => "isolated (private)",
    }
}

/// After one chain of `k` kernels from `reset()`, x == k/2 everywhere (an
/// error naming the context's kind otherwise).
fn check(c: &Chain, k: usize, what: &str) -> Result<()> {
    let want = (k / 2) as f32;
    if let Some((i, v)) = c.x_mismatch(want)? {
        return Err(Error::InvalidArgument(format!(
            "wrong result after {what} on the {} context, K={k}: x[{i}] = {v}, want {want}",
            kind(c)
        )));
    }
    eprintln!("[fc] check {what} K={k} on the {} context: ok (x == {want})", kind(c));
    Ok(())
}

/// Runs `f(0)` and `f(1)` once per iteration, alternating which goes first,
/// after `warmup` untimed rounds; `f` returns the sample (µs).
fn paired(warmup: usize, iters: usize, mut f: impl FnMut(usize) -> Result<f64>) -> Result<[Vec<f64>; 2]> {
    for _ in 0..warmup {
        f(0)?;
        f(1)?;
    }
    let mut out = [Vec::with_capacity(iters), Vec::with_capacity(iters)];
    for i in 0..iters {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for j in order {
            let v = f(j)?;
            out[j].push(v);
        }
    }
    Ok(out)
}

/// Prints the primary and the isolated row of one metric.
fn emit_pair(metric: &str, isolation: Isolation, [mut primary, mut isolated]: [Vec<f64>; 2]) {
    let p = emit_row_with(&format!("ctx_{metric}_primary"), K, &mut primary, json!({"context": "primary"}));
    let i = Summary::of(&mut isolated).median;
    let extra = json!({"context": "isolated", "isolation": isolation.to_string(), "primary_median_us": round(p, 3),
                       "ratio_vs_primary": round(i / p, 3)});
    emit_row_with(&format!("ctx_{metric}_isolated"), K, &mut isolated, extra);
}

/// Graph launches + syncs per second, one thread per chain, all at once
/// for `secs` (each thread captures its own graph first and warms it up).
fn replays_per_s(chains: &[&Chain], secs: f64) -> Result<Vec<f64>> {
    let warm = |c: &Chain| -> Result<Graph<()>> {
        let g = c.capture(K)?;
        for _ in 0..5 {
            g.launch()?;
            c.ctx.synchronize()?;
        }
        Ok(g)
    };
    per_second_at_once(chains, secs, warm, |c, g| {
        g.launch()?;
        c.ctx.synchronize()
    })
}

/// What one replay row compares with, besides its kind's one context.
#[derive(Clone, Copy, Default)]
struct Compare {
    /// Replays/s of one context of the row's kind (`ratio_vs_1ctx`).
    one: Option<f64>,
    /// Replays/s of two primary contexts (`ratio_vs_2ctx_primary`).
    two_primary: Option<f64>,
    /// The isolated context's isolation, when the row has one.
    isolation: Option<Isolation>,
}

fn emit_replays(row: &str, per: &[f64], cmp: Compare, kinds: &str, secs: f64) -> f64 {
    let total: f64 = per.iter().sum();
    let per_list: Vec<String> = per.iter().map(|v| format!("{v:.1}")).collect();
    let baseline = cmp.one;
    let mut r = json!({"impl": IMPL, "row": row, "kernels": K, "replays_per_s": round(total, 1),
                       "per_context": per.iter().map(|&v| round(v, 1)).collect::<Vec<_>>(),
                       "contexts": per.len(), "kinds": kinds, "secs": round(secs, 3)});
    if let Some(b) = baseline {
        r["ratio_vs_1ctx"] = json!(round(total / b, 3));
    }
    if let Some(two) = cmp.two_primary {
        r["two_primary_replays_per_s"] = json!(round(two, 1));
        r["ratio_vs_2ctx_primary"] = json!(round(total / two, 3));
    }
    if let Some(i) = cmp.isolation {
        r["isolation"] = json!(i.to_string());
    }
    r["build"] = json!(build_kind());
    println!("{r}");
    eprintln!(
        "[fc] {row:<36} {total:10.1} replays/s ({}){}{}",
        per_list.join(" + "),
        baseline.map_or(String::new(), |b| format!(", {:.2}x one context", total / b)),
        cmp.two_primary.map_or(String::new(), |t| format!(", {:.2}x two streams of one context", total / t))
    );
    total
}

/// Device memory a context takes: free memory before and after creating
/// it with `make`, its stream, built-ins and buffers (one row).
fn footprint(row: &str, before: &Chain, n: usize, make: impl FnOnce() -> Result<Context>) -> Result<Chain> {
    before.enqueue(2)?;
    before.ctx.synchronize()?;
    let (free_before, total) = before.ctx.mem_info()?;
    let rig = Chain::new(make()?, n)?;
    rig.enqueue(2)?;
    rig.ctx.synchronize()?;
    let (free_after, _) = rig.ctx.mem_info()?;
    let bytes = free_before.saturating_sub(free_after);
    println!(
        "{}",
        json!({"impl": IMPL, "row": row, "kernels": 0, "median_us": null, "bytes": bytes,
               "mib": round(bytes as f64 / (1u64 << 20) as f64, 1), "buffer_bytes": 3 * n * std::mem::size_of::<f32>(),
               "device_total_bytes": total, "isolation": rig.ctx.isolation().to_string(), "build": build_kind()})
    );
    eprintln!("[fc] {} context footprint: {:.1} MiB of device memory", kind(&rig), bytes as f64 / (1u64 << 20) as f64);
    Ok(rig)
}

/// The rows of `fc-bench --isolated`.
pub(crate) fn bench_isolated(args: &Args) -> Result<()> {
    let (dev, n, warmup) = (args.device, args.n, args.warmup);
    let iters = if args.iters > 0 { args.iters } else { ITERS };
    let secs = args.multi_gpu_secs;

    // Footprint of an isolated context: device-wide free memory before and
    // after creating it with its stream, built-ins and buffers.
    let primary = Chain::new(Context::new(dev)?, n)?;
    let isolated = footprint("ctx_isolated_memory_bytes", &primary, n, || Context::isolated(dev))?;
    let iso_kind = isolated.ctx.isolation();

    let rigs = [&primary, &isolated];
    for rig in rigs {
        rig.reset()?;
        rig.enqueue(K)?;
        check(rig, K, "eager")?;
    }

    // Eager enqueue, per kernel (host time of the enqueues; sync untimed).
    let eager = paired(warmup, iters, |j| {
        let t0 = Instant::now();
        rigs[j].enqueue(K)?;
        let t1 = Instant::now();
        rigs[j].ctx.synchronize()?;
        Ok(us_since(t0, t1) / K as f64)
    })?;
    emit_pair("eager_enqueue_per_kernel", iso_kind, eager);

    // Graph launch + sync.
    let graphs = [primary.capture(K)?, isolated.capture(K)?];
    for (rig, g) in rigs.iter().zip(&graphs) {
        rig.reset()?;
        g.launch()?;
        check(rig, K, "graph")?;
    }
    let launch = paired(warmup, iters, |j| {
        let t0 = Instant::now();
        graphs[j].launch()?;
        rigs[j].ctx.synchronize()?;
        Ok(us_since(t0, Instant::now()))
    })?;
    emit_pair("graph_launch_sync", iso_kind, launch);
    drop(graphs);

    // Capture + instantiate (the graph is dropped untimed).
    let capture = paired(warmup, iters, |j| {
        let t0 = Instant::now();
        let g = rigs[j].capture(K)?;
        let t1 = Instant::now();
        drop(g);
        Ok(us_since(t0, t1))
    })?;
    emit_pair("capture_instantiate", iso_kind, capture);

    // Two contexts' work on one GPU.
    let primary2 = Chain::new(Context::new(dev)?, n)?;
    let isolated2 = Chain::new(Context::isolated(dev)?, n)?;
    let iso = Some(iso_kind);
    let one_p = replays_per_s(&[&primary], secs)?[0];
    emit_replays("ctx_replays_per_s_1ctx_primary", &[one_p], Compare::default(), "primary", secs);
    let one_i = replays_per_s(&[&isolated], secs)?[0];
    let c = Compare { isolation: iso, ..Compare::default() };
    emit_replays("ctx_replays_per_s_1ctx_isolated", &[one_i], c, "isolated", secs);
    let per = replays_per_s(&[&primary, &primary2], secs)?;
    let c = Compare { one: Some(one_p), ..Compare::default() };
    let two_p = emit_replays("ctx_replays_per_s_2ctx_primary", &per, c, "primary+primary", secs);
    let per = replays_per_s(&[&isolated, &isolated2], secs)?;
    let c = Compare { one: Some(one_i), two_primary: Some(two_p), isolation: iso };
    emit_replays("ctx_replays_per_s_2ctx_isolated", &per, c, "isolated+isolated", secs);
    let per = replays_per_s(&[&primary, &isolated], secs)?;
    let c = Compare { one: Some(one_p), two_primary: Some(two_p), isolation: iso };
    emit_replays("ctx_replays_per_s_2ctx_mixed", &per, c, "primary+isolated", secs);

    // The same with a private context forced (`cuCtxCreate`), whatever the
    // driver offers: green vs private vs two streams, side by side.
    let private =
        footprint("ctx_private_memory_bytes", &primary, n, || Context::isolated_with(dev, IsolationRequest::Private))?;
    private.reset()?;
    private.enqueue(K)?;
    check(&private, K, "eager")?;
    let pv = Some(Isolation::Private);
    let one_v = replays_per_s(&[&private], secs)?[0];
    let c = Compare { isolation: pv, ..Compare::default() };
    emit_replays("ctx_replays_per_s_1ctx_private", &[one_v], c, "private", secs);
    let per = replays_per_s(&[&primary, &private], secs)?;
    let c = Compare { one: Some(one_p), two_primary: Some(two_p), isolation: pv };
    emit_replays("ctx_replays_per_s_2ctx_mixed_private", &per, c, "primary+private", secs);

    // The rigs still compute after all of it.
    for rig in [&primary, &isolated, &primary2, &isolated2, &private] {
        rig.reset()?;
        rig.enqueue(K)?;
        check(rig, K, "final eager")?;
    }
    Ok(())
}
