//! `fc-bench`: times fc-graph on a chain of K tiny element-wise f32 kernels
//! over n = 4096 elements, alternating `z = x + y; x = z * y`, the same
//! workload as `bench/raw/raw_bench.c` (raw driver API) and
//! `bench/torch_bench.py` (PyTorch). See issue #4 and `scripts/gpu-bench.sh`.
//!
//! Rows (one JSON object per line on stdout, human lines on stderr):
//!
//! | row                              | what is timed (host monotonic clock)                       |
//! |----------------------------------|------------------------------------------------------------|
//! | `eager_enqueue_per_kernel`       | K enqueues (no sync inside) / K                            |
//! | `eager_enqueue_sync`             | K enqueues + stream synchronize                            |
//! | `graph_launch_host`              | `graph.launch()` of one captured graph of the K kernels    |
//! | `graph_launch_sync`              | `graph.launch()` + stream synchronize                      |
//! | `capture_instantiate`            | begin capture, K enqueues, end capture + instantiate       |
//! | `recapture_update`               | begin capture, K enqueues, `end_update` into the existing  |
//! |                                  | graph (`cuGraphExecUpdate`; destroys the re-captured graph) |
//! | `multi_gpu_captures_per_s_1dev`  | capture+instantiate+launch+sync of K=26 in a loop, device 0 |
//! | `multi_gpu_captures_per_s_2dev`  | the same on devices 0 and 1 at once, one thread each       |
//! | `multi_gpu_replays_per_s_{1,2}dev` | launch+sync of one captured K=26 graph in a loop         |
//! | `multi_gpu_updates_per_s_{1,2}dev` | re-capture + `end_update` + launch + sync, in a loop     |
//!
//! The rows above run with the library's defaults: programmatic dependent
//! launch (PDL) for the built-ins where the device allows it (each row says
//! `"pdl":true/false`). The single-device rows are repeated with PDL turned
//! off on the context (`Context::set_pdl(false)`), suffix `_nopdl`, skipped
//! when PDL is unavailable anyway. `bench/raw/raw_bench.c` emits the raw
//! plain rows and raw PDL rows (suffix `_pdl`).
//!
//! fc-graph feature rows (after the rows above; alone with `--features-only`):
//!
//! | row                              | what is measured                                           |
//! |----------------------------------|------------------------------------------------------------|
//! | `breakable_replay_6breaks_sync`  | replay of 7 segments of 4 kernels split by 6 breaks (each  |
//! |                                  | break one eager kernel) + stream synchronize               |
//! | `unbroken_plus_host_calls_sync`  | the same 28 kernels as one graph, launched, then the same  |
//! |                                  | 6 kernels as eager host calls + stream synchronize         |
//! | `breakable_replay_6breaks_host`  | the breakable replay alone (no synchronize)                |
//! | `unbroken_plus_host_calls_host`  | launch + the 6 host calls alone (no synchronize)           |
//! | `cost_per_break_us`              | (median sync A - median sync B) / 6, in microseconds       |
//! | `cost_per_break_host_us`         | (median host A - median host B) / 6, in microseconds       |
//! | `pool_bytes_after_capture_{1,2,3}` | capture pool bytes after capturing a 4-layer forward     |
//! |                                  | (d=512, d2=2048) at 4096, then 2048, then 4096 rows        |
//! | `pool_growth_{2,3}_over_1`       | bytes capture 2 (3) added / bytes capture 1 added          |
//!
//! `--rerecord-profile SECS` splits a re-recording of K = 26 into its
//! steps beside the driver's floor (rows `rerecord_phases`), then
//! re-records for SECS seconds for a sampling profiler (`rerecord_loop`).
//! `--build-profile ROUNDS` times each way of making the chain's graph and
//! its instantiation apart (rows `build_phases`).
//!
//! Without a usable CUDA driver it prints `[SKIP] no usable CUDA driver: <reason>`
//! and exits 0.

use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::Parser;
use fc_bench::stats::{build_kind, no_extra, percentile, round, row_json, us_since, Summary, IMPL};
use fc_bench::steps::{run_steps, StepOutput, StepsConfig};
use fc_bench::steps_table;
use fc_graph::{CaptureMode, Context, Device, DeviceBuffer, Error, Graph, Result, UpdateReport};
use serde_json::{json, Value};

mod cache_rows;
mod isolated;

const MULTI_GPU_KERNELS: usize = 26;

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

#[derive(Parser, Debug)]
#[command(
    name = "fc-bench",
    about = "Times fc-graph eager launches, graph replay and capture on a chain of tiny element-wise kernels",
    after_help = "Prints one JSON object per row on stdout; human-readable lines on stderr."
)]
struct Args {
    /// Chain lengths K (number of kernels), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "26,260,2600")]
    kernels: Vec<usize>,
    /// Elements per buffer.
    #[arg(long, default_value_t = 4096)]
    n: usize,
    /// Untimed warm-up iterations before each measured row.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Timed iterations per row; 0 means 50 for K <= 260 and 20 above
    /// (500 for the breakable-replay rows).
    #[arg(long, default_value_t = 0)]
    iters: usize,
    /// Device for the single-device rows.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Seconds each multi-GPU measurement runs.
    #[arg(long, default_value_t = 1.0)]
    multi_gpu_secs: f64,
    /// Skip the multi-GPU rows.
    #[arg(long)]
    no_multi_gpu: bool,
    /// Smoke mode: K=26 only, 2 warm-ups, 5 iterations, 0.1 s multi-GPU,
    /// pool-growth captures of 512/256/512 rows.
    #[arg(long)]
    quick: bool,
    /// Run only the fc-graph feature rows (recapture_update, breakable
    /// replay, pool growth), not the eager/graph/capture/multi-GPU rows.
    #[arg(long)]
    features_only: bool,
    /// Time the library's individual steps next to the bare driver calls
    /// they wrap (rows `step_*`), then exit. With --quick: about a second
    /// (K = 26 only, fewer samples, no no-context probe).
    #[arg(long)]
    steps: bool,
    /// With --steps: print the comparison as a table for people instead of
    /// JSON rows.
    #[arg(long, requires = "steps")]
    table: bool,
    /// Time an isolated context next to a primary one, alternating in one
    /// process, and two contexts replaying on one GPU (rows `ctx_*`, see
    /// bench/src/isolated.rs), then exit.
    #[arg(long)]
    isolated: bool,
    /// Split a re-recording of K = 26 into its steps (begin, the K calls,
    /// end_update) beside the driver's floor, then re-record for SECS
    /// seconds for a sampling profiler (rows `rerecord_*`), then exit.
    #[arg(long, value_name = "SECS")]
    rerecord_profile: Option<f64>,
    /// Time each way of making the K-kernel chain's graph (bare stream
    /// capture, bare node building in two forms, the library's recording)
    /// and its instantiation, ROUNDS rounds at K = 26 and 260 (a quarter
    /// at 2600), in each launch mode (rows `build_phases`), then exit.
    #[arg(long, value_name = "ROUNDS")]
    build_profile: Option<usize>,
}

impl Args {
    /// Timed iterations of the K-kernel rows.
    fn iters_for(&self, k: usize) -> usize {
        if self.iters > 0 {
            self.iters
        } else if k <= 260 {
            50
        } else {
            20
        }
    }
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.kernels = vec![26];
        args.warmup = 2;
        args.iters = 5;
        args.multi_gpu_secs = 0.1;
    }
    if args.n == 0 || args.kernels.is_empty() || args.kernels.contains(&0) {
        eprintln!("[fc] FATAL: --n and every --kernels value must be positive");
        return ExitCode::from(2);
    }
    if !(args.multi_gpu_secs > 0.0 && args.multi_gpu_secs.is_finite()) {
        eprintln!("[fc] FATAL: --multi-gpu-secs must be a positive number");
        return ExitCode::from(2);
    }

    if let Err(e) = fc_graph::driver() {
        // Visible on both streams; report.py ignores non-JSON lines.
        println!("[SKIP] {e}");
        eprintln!("[SKIP] {e}");
        return ExitCode::SUCCESS;
    }
    match Device::count() {
        Ok(0) => {
            println!("[SKIP] no CUDA device visible");
            eprintln!("[SKIP] no CUDA device visible");
            return ExitCode::SUCCESS;
        }
        Ok(_) => {}
        Err(e) => {
            eprintln!("[fc] FATAL: counting devices: {e}");
            return ExitCode::FAILURE;
        }
    }

    match run(&args) {
        Ok(()) => {
            eprintln!("[fc] done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("[fc] FATAL: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<()> {
    if args.steps {
        return steps(args);
    }
    if args.isolated {
        return isolated::bench_isolated(args);
    }
    if let Some(secs) = args.rerecord_profile {
        return fc_bench::steps::rerecord_profile(args.device, args.n, secs, &mut |line| println!("{line}"));
    }
    if let Some(rounds) = args.build_profile {
        return fc_bench::steps::build_profile(args.device, args.n, rounds, &mut |line| println!("{line}"));
    }
    let count = Device::count()?;
    let dev = Device::get(args.device)?;
    let drv = fc_graph::driver()?;
    eprintln!(
        "[fc] driver API {} ({}), {count} device(s); device {}: {}; n={}, warmup={}, {} build",
        drv.driver_version(),
        drv.library_path(),
        args.device,
        dev.name()?,
        args.n,
        args.warmup,
        if cfg!(debug_assertions) { "DEBUG (numbers not representative)" } else { "release" },
    );

    if !args.features_only {
        let chain = Chain::new(Context::new(args.device)?, args.n)?;
        for &k in &args.kernels {
            in_both_modes(&chain, k, ROWS_PER_MODE, |mode| bench_k(&chain, k, args.warmup, args.iters_for(k), mode))?;
        }
        drop(chain);

        if !args.no_multi_gpu {
            bench_multi_gpu(args)?;
        }
    }

    bench_features(args)
}

/// `--steps`: JSON rows (as soon as each is measured), or with `--table`
/// the comparison table at the end.
fn steps(args: &Args) -> Result<()> {
    let cfg = if args.quick { StepsConfig::quick(args.device, args.n) } else { StepsConfig::full(args.device, args.n) };
    let (mut rows, mut pdl) = (Vec::new(), None);
    let result = run_steps(&cfg, &mut |o| match o {
        StepOutput::Row(r) => {
            if !args.table {
                println!("{}", r.json());
            }
            log_row(&r.row_name(), r.kernels, &r.summary);
            rows.push(r);
        }
        StepOutput::Probe(p) => {
            if !args.table {
                println!("{}", p.json());
            }
        }
        StepOutput::Pdl(p) => pdl = Some(p),
    });
    if args.table && !rows.is_empty() {
        let name = Device::get(args.device).and_then(|d| d.name()).map_or_else(
            |e| format!("device {} (name unreadable: {e})", args.device),
            |n| format!("device {} ({n})", args.device),
        );
        println!("{}", steps_table::text(&name, pdl, &steps_table::lines(&rows)));
    }
    result
}

// ---------------------------------------------------------------------------
// workload

/// Three buffers of `n` f32 on one context; the chain is
/// `z = x + y; x = z * y; ...` (K kernels).
struct Chain {
    ctx: Context,
    x: DeviceBuffer,
    y: DeviceBuffer,
    z: DeviceBuffer,
    n: usize,
}

impl Chain {
    fn new(ctx: Context, n: usize) -> Result<Chain> {
        let bytes = n * std::mem::size_of::<f32>();
        let x = ctx.alloc(bytes)?;
        let y = ctx.alloc(bytes)?;
        let z = ctx.alloc(bytes)?;
        let c = Chain { ctx, x, y, z, n };
        c.reset()?;
        Ok(c)
    }

    /// Enqueues the K kernels on the context's stream (no synchronization).
    #[inline]
    fn enqueue(&self, k: usize) -> Result<()> {
        for i in 0..k {
            if i & 1 == 0 {
                self.ctx.add(&self.x, &self.y, &self.z, self.n)?;
            } else {
                self.ctx.mul(&self.z, &self.y, &self.x, self.n)?;
            }
        }
        Ok(())
    }

    /// Begin capture, K enqueues, end capture + instantiate.
    #[inline]
    fn capture(&self, k: usize) -> Result<Graph<()>> {
        let cap = self.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        self.enqueue(k)?;
        cap.end()
    }

    /// x = 0, y = 1, z = 0.
    fn reset(&self) -> Result<()> {
        self.ctx.synchronize()?;
        self.x.upload(&vec![0.0f32; self.n])?;
        self.y.upload(&vec![1.0f32; self.n])?;
        self.z.upload(&vec![0.0f32; self.n])?;
        Ok(())
    }

    /// After one chain of K kernels from `reset()`, x == K/2 everywhere.
    fn check(&self, k: usize, what: &str) -> Result<()> {
        self.check_x((k / 2) as f32, what, k)
    }

    /// Exits the process unless x == `want` everywhere.
    fn check_x(&self, want: f32, what: &str, k: usize) -> Result<()> {
        self.ctx.synchronize()?;
        let mut h = vec![0.0f32; self.n];
        self.x.download(&mut h)?;
        if let Some(i) = h.iter().position(|&v| v != want) {
            eprintln!("[fc] FATAL wrong result after {what}, K={k}: x[{i}] = {}, want {want}", h[i]);
            std::process::exit(1);
        }
        eprintln!("[fc] check {what} K={k}: ok (x == {want})");
        Ok(())
    }

    /// The breaks' kernel, `x = x + y` (x += 1 after `reset()`), enqueued
    /// on `ctx`'s stream.
    #[inline]
    fn break_kernel(&self, ctx: &Context) -> Result<()> {
        ctx.add(&self.x, &self.y, &self.x, self.n)
    }
}

// ---------------------------------------------------------------------------
// statistics and output

/// How the single-device rows run: the library's default (PDL where the
/// device allows it) or with PDL turned off on the context.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// Appended to the row names (`""` or `"_nopdl"`).
    suffix: &'static str,
    /// Whether the built-ins launch with PDL.
    pdl: bool,
}

impl Mode {
    /// Emits `row` + suffix with `"pdl"` and the fields of `extra` (a JSON
    /// object) appended; returns the median.
    fn emit(&self, row: &str, kernels: usize, us: &mut [f64], extra: Value) -> f64 {
        let mut fields = json!({"pdl": self.pdl});
        if let (Some(map), Value::Object(more)) = (fields.as_object_mut(), extra) {
            map.extend(more);
        }
        emit_row_with(&format!("{row}{}", self.suffix), kernels, us, fields)
    }
}

/// The rows `bench_k` emits per mode.
const ROWS_PER_MODE: &[&str] = &[
    "eager_enqueue_per_kernel",
    "eager_enqueue_sync",
    "graph_launch_host",
    "graph_launch_sync",
    "capture_instantiate",
];

/// Runs `f` in the default mode, then with PDL off on the context (rows
/// `<row>_nopdl`); when the default is already plain, the `_nopdl` rows of
/// `rows` are emitted as skipped.
fn in_both_modes(c: &Chain, k: usize, rows: &[&str], mut f: impl FnMut(Mode) -> Result<()>) -> Result<()> {
    let pdl = c.ctx.pdl_enabled();
    f(Mode { suffix: "", pdl })?;
    if !pdl {
        for row in rows {
            let skipped = "PDL unavailable here: the default rows are plain";
            println!("{}", json!({"impl": IMPL, "row": format!("{row}_nopdl"), "kernels": k, "skipped": skipped}));
        }
        return Ok(());
    }
    c.ctx.set_pdl(false);
    let off = f(Mode { suffix: "_nopdl", pdl: false });
    c.ctx.set_pdl(true);
    off
}

/// Sorts `us`, prints its row with the fields of `extra` (a JSON object)
/// appended, and returns the median.
fn emit_row_with(row: &str, kernels: usize, us: &mut [f64], extra: Value) -> f64 {
    let s = Summary::of(us);
    println!("{}", row_json(row, kernels, &s, extra));
    log_row(row, kernels, &s);
    s.median
}

/// One JSON row of the common schema on stdout, the fields of `extra` (a
/// JSON object) appended, and its human line on stderr.
fn print_row(row: &str, kernels: usize, med: f64, p10: f64, p90: f64, n: usize, extra: Value) {
    let s = Summary { median: med, p10, p90, n };
    println!("{}", row_json(row, kernels, &s, extra));
    log_row(row, kernels, &s);
}

/// The human line of a row, on stderr.
fn log_row(row: &str, kernels: usize, s: &Summary) {
    let Summary { median, p10, p90, n } = *s;
    eprintln!("[fc] {row:<26} K={kernels:<5} median {median:10.3} us  (p10 {p10:10.3}, p90 {p90:10.3}, n={n})");
}

// ---------------------------------------------------------------------------
// single-device rows

fn bench_k(c: &Chain, k: usize, warmup: usize, iters: usize, mode: Mode) -> Result<()> {
    let mut a = vec![0.0f64; iters];
    let mut b = vec![0.0f64; iters];
    let tag = if mode.pdl { " (PDL)" } else { "" };

    // correctness of the eager chain
    c.reset()?;
    c.enqueue(k)?;
    c.check(k, &format!("eager{tag}"))?;

    // 1. eager: enqueue (per kernel) and enqueue + sync
    for _ in 0..warmup {
        c.enqueue(k)?;
        c.ctx.synchronize()?;
    }
    for i in 0..iters {
        let t0 = Instant::now();
        c.enqueue(k)?;
        let t1 = Instant::now();
        c.ctx.synchronize()?;
        let t2 = Instant::now();
        a[i] = us_since(t0, t1) / k as f64;
        b[i] = us_since(t0, t2);
    }
    mode.emit("eager_enqueue_per_kernel", k, &mut a, no_extra());
    mode.emit("eager_enqueue_sync", k, &mut b, no_extra());

    // 2. one captured graph: launch (host) and launch + sync
    let graph = c.capture(k)?;
    c.reset()?;
    graph.launch()?;
    c.check(k, &format!("graph{tag}"))?;
    for _ in 0..warmup {
        graph.launch()?;
        c.ctx.synchronize()?;
    }
    for i in 0..iters {
        let t0 = Instant::now();
        graph.launch()?;
        let t1 = Instant::now();
        c.ctx.synchronize()?;
        let t2 = Instant::now();
        a[i] = us_since(t0, t1);
        b[i] = us_since(t0, t2);
    }
    mode.emit("graph_launch_host", k, &mut a, no_extra());
    mode.emit("graph_launch_sync", k, &mut b, no_extra());
    drop(graph);

    // 3. capture + instantiate, end to end (the graph is dropped untimed)
    for _ in 0..warmup {
        drop(c.capture(k)?);
    }
    for slot in a.iter_mut() {
        let t0 = Instant::now();
        let g = c.capture(k)?;
        let t1 = Instant::now();
        drop(g);
        *slot = us_since(t0, t1);
    }
    mode.emit("capture_instantiate", k, &mut a, no_extra());
    Ok(())
}

// ---------------------------------------------------------------------------
// multi-GPU: loops on one device alone vs two devices at once

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
        let rep = recapture_update(c, graph, k)?;
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
    let barrier = Barrier::new(chains.len());
    let limit = Duration::from_secs_f64(secs);
    std::thread::scope(|s| {
        let handles: Vec<_> = chains
            .iter()
            .map(|&c| {
                let barrier = &barrier;
                s.spawn(move || -> Result<f64> {
                    let mut g = None;
                    let warm = (|| {
                        if kind != Loop::Capture {
                            g = Some(c.capture(k)?);
                        }
                        (0..5).try_for_each(|_| loop_once(kind, c, &mut g, k))
                    })();
                    barrier.wait(); // always reached, so no peer waits forever
                    warm?;
                    let t0 = Instant::now();
                    let mut count = 0u64;
                    let elapsed = loop {
                        loop_once(kind, c, &mut g, k)?;
                        count += 1;
                        let e = t0.elapsed();
                        if e >= limit {
                            break e;
                        }
                    };
                    Ok(count as f64 / elapsed.as_secs_f64())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

fn bench_multi_gpu(args: &Args) -> Result<()> {
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

// ---------------------------------------------------------------------------
// fc-graph features: re-capture + in-place update, breakable replay, pool growth

fn bench_features(args: &Args) -> Result<()> {
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

/// Re-captures the K kernels into `g` (updated in place where the driver can).
#[inline]
fn recapture_update(c: &Chain, g: &mut Graph<()>, k: usize) -> Result<UpdateReport> {
    let cap = c.ctx.begin_capture(CaptureMode::ThreadLocal)?;
    c.enqueue(k)?;
    cap.end_update(g)
}

/// `recapture_update`: begin capture, K enqueues, `end_update` into the
/// graph of an earlier capture of the same chain (host clock, end to end;
/// includes destroying the re-captured graph, as raw's timer includes
/// destroying the graph it re-captured: one K-node destroy each).
fn bench_recapture_update(c: &Chain, k: usize, warmup: usize, iters: usize, mode: Mode) -> Result<()> {
    let mut g = c.capture(k)?;
    let first = recapture_update(c, &mut g, k)?;
    let in_place = first.updated == 1;
    if !in_place {
        eprintln!(
            "[fc] recapture_update K={k}: end_update reported {} updated, {} instantiated: driver lacks in-place update",
            first.updated, first.instantiated
        );
    }
    for _ in 0..warmup {
        recapture_update(c, &mut g, k)?;
    }
    let mut a = vec![0.0f64; iters];
    let mut all_in_place = in_place;
    for slot in a.iter_mut() {
        let t0 = Instant::now();
        let rep = recapture_update(c, &mut g, k)?;
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

/// Sorted-percentile summary of `v` (sorted in place): (median, p10, p90).
fn summary(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (percentile(v, 0.5), percentile(v, 0.1), percentile(v, 0.9))
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
        let (paired_med, p10, p90) = summary(d);
        let cost = (a_med - b_med) / per;
        let extra =
            json!({"breaks": BREAKS, "from": a_row, "baseline": b_row, "paired_median_us": round(paired_med, 3)});
        print_row(row, kernels, cost, p10, p90, d.len(), extra);
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
