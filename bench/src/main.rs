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
use std::time::Instant;

use clap::Parser;
use fc_bench::chain::Chain;
use fc_bench::stats::{no_extra, us_since};
use fc_bench::steps::{run_steps, StepOutput, StepsConfig};
use fc_bench::steps_table;
use fc_graph::{Context, Device, Result};

use print::{in_both_modes, log_row, Mode};

mod cache_rows;
mod features;
mod isolated;
mod multi_gpu;
mod print;

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
            multi_gpu::bench_multi_gpu(args)?;
        }
    }

    features::bench_features(args)
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

/// The checks of the main rows on their chain: a wrong result ends the
/// process (exit status 1) after a `FATAL` line.
trait Check {
    /// After one chain of K kernels from `reset()`, x == K/2 everywhere.
    fn check(&self, k: usize, what: &str) -> Result<()>;
    /// Exits the process unless x == `want` everywhere.
    fn check_x(&self, want: f32, what: &str, k: usize) -> Result<()>;
}

impl Check for Chain {
    fn check(&self, k: usize, what: &str) -> Result<()> {
        self.check_x((k / 2) as f32, what, k)
    }

    fn check_x(&self, want: f32, what: &str, k: usize) -> Result<()> {
        if let Some((i, v)) = self.x_mismatch(want)? {
            eprintln!("[fc] FATAL wrong result after {what}, K={k}: x[{i}] = {v}, want {want}");
            std::process::exit(1);
        }
        eprintln!("[fc] check {what} K={k}: ok (x == {want})");
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// single-device rows

/// The rows `bench_k` emits per mode.
const ROWS_PER_MODE: &[&str] = &[
    "eager_enqueue_per_kernel",
    "eager_enqueue_sync",
    "graph_launch_host",
    "graph_launch_sync",
    "capture_instantiate",
];

/// The single-device rows of one chain length, in one launch mode.
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
