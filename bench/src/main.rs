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
//! | `multi_gpu_captures_per_s_1dev`  | capture+instantiate+launch+sync of K=26 in a loop, device 0 |
//! | `multi_gpu_captures_per_s_2dev`  | the same on devices 0 and 1 at once, one thread each       |
//!
//! Without a usable CUDA driver it prints `[SKIP] no usable CUDA driver: <reason>`
//! and exits 0.

use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::Parser;
use fc_graph::{CaptureMode, Context, Device, DeviceBuffer, Graph, Result};

const IMPL: &str = "fc";
const MULTI_GPU_KERNELS: usize = 26;

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
    /// Timed iterations per row; 0 means 50 for K <= 260 and 20 above.
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
    /// Smoke mode: K=26 only, 2 warm-ups, 5 iterations, 0.1 s multi-GPU.
    #[arg(long)]
    quick: bool,
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

    let chain = Chain::new(Context::new(args.device)?, args.n)?;
    for &k in &args.kernels {
        let iters = if args.iters > 0 {
            args.iters
        } else if k <= 260 {
            50
        } else {
            20
        };
        bench_k(&chain, k, args.warmup, iters)?;
    }
    drop(chain);

    if !args.no_multi_gpu {
        bench_multi_gpu(args)?;
    }
    Ok(())
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
        self.ctx.synchronize()?;
        let mut h = vec![0.0f32; self.n];
        self.x.download(&mut h)?;
        let want = (k / 2) as f32;
        if let Some(i) = h.iter().position(|&v| v != want) {
            eprintln!("[fc] FATAL wrong result after {what}, K={k}: x[{i}] = {}, want {want}", h[i]);
            std::process::exit(1);
        }
        eprintln!("[fc] check {what} K={k}: ok (x == {want})");
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// statistics and output

/// Linear interpolation between closest ranks (numpy's default); `v` sorted.
/// Same definition in raw_bench.c and torch_bench.py.
fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

fn emit_row(row: &str, kernels: usize, us: &mut [f64]) {
    us.sort_by(f64::total_cmp);
    let (med, p10, p90) = (percentile(us, 0.5), percentile(us, 0.1), percentile(us, 0.9));
    println!(
        "{{\"impl\":\"{IMPL}\",\"row\":\"{row}\",\"kernels\":{kernels},\"median_us\":{med:.3},\"p10_us\":{p10:.3},\"p90_us\":{p90:.3},\"n\":{},\"build\":\"{}\"}}",
        us.len(),
        if cfg!(debug_assertions) { "debug" } else { "release" },
    );
    eprintln!("[fc] {row:<26} K={kernels:<5} median {med:10.3} us  (p10 {p10:10.3}, p90 {p90:10.3}, n={})", us.len());
}

#[inline]
fn us_since(t0: Instant, t1: Instant) -> f64 {
    t1.duration_since(t0).as_nanos() as f64 / 1e3
}

// ---------------------------------------------------------------------------
// single-device rows

fn bench_k(c: &Chain, k: usize, warmup: usize, iters: usize) -> Result<()> {
    let mut a = vec![0.0f64; iters];
    let mut b = vec![0.0f64; iters];

    // correctness of the eager chain
    c.reset()?;
    c.enqueue(k)?;
    c.check(k, "eager")?;

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
    emit_row("eager_enqueue_per_kernel", k, &mut a);
    emit_row("eager_enqueue_sync", k, &mut b);

    // 2. one captured graph: launch (host) and launch + sync
    let graph = c.capture(k)?;
    c.reset()?;
    graph.launch()?;
    c.check(k, "graph")?;
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
    emit_row("graph_launch_host", k, &mut a);
    emit_row("graph_launch_sync", k, &mut b);
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
    emit_row("capture_instantiate", k, &mut a);
    Ok(())
}

// ---------------------------------------------------------------------------
// multi-GPU: captures/s on one device alone vs two devices at once

fn capture_launch_once(c: &Chain, k: usize) -> Result<()> {
    let g = c.capture(k)?;
    g.launch()?;
    c.ctx.synchronize()?;
    drop(g);
    Ok(())
}

/// One thread per chain, all started together; each loops
/// capture+instantiate+launch+sync for `secs`. Returns captures/s per chain.
fn run_workers(chains: &[&Chain], k: usize, secs: f64) -> Result<Vec<f64>> {
    let barrier = Barrier::new(chains.len());
    let limit = Duration::from_secs_f64(secs);
    std::thread::scope(|s| {
        let handles: Vec<_> = chains
            .iter()
            .map(|&c| {
                let barrier = &barrier;
                s.spawn(move || -> Result<f64> {
                    let warm = (0..5).try_for_each(|_| capture_launch_once(c, k));
                    barrier.wait(); // always reached, so no peer waits forever
                    warm?;
                    let t0 = Instant::now();
                    let mut count = 0u64;
                    let elapsed = loop {
                        capture_launch_once(c, k)?;
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
    let one = run_workers(&[&c0], k, secs)?[0];
    println!(
        "{{\"impl\":\"{IMPL}\",\"row\":\"multi_gpu_captures_per_s_1dev\",\"kernels\":{k},\"captures_per_s\":{one:.1},\"secs\":{secs:.3},\"devices\":1}}"
    );
    eprintln!("[fc] multi_gpu 1 device : {one:.1} captures/s (capture+instantiate+launch+sync, K={k})");
    if count < 2 {
        eprintln!("[fc] [SKIP] multi_gpu 2 devices: only {count} CUDA device(s) visible");
        println!(
            "{{\"impl\":\"{IMPL}\",\"row\":\"multi_gpu_captures_per_s_2dev\",\"kernels\":{k},\"skipped\":\"only {count} CUDA device(s)\"}}"
        );
        return Ok(());
    }
    let c1 = Chain::new(Context::new(1)?, args.n)?;
    let per = run_workers(&[&c0, &c1], k, secs)?;
    let two: f64 = per.iter().sum();
    let ratio = two / one;
    println!(
        "{{\"impl\":\"{IMPL}\",\"row\":\"multi_gpu_captures_per_s_2dev\",\"kernels\":{k},\"captures_per_s\":{two:.1},\"per_device\":[{:.1},{:.1}],\"ratio_vs_1dev\":{ratio:.3},\"secs\":{secs:.3},\"devices\":2}}",
        per[0], per[1]
    );
    eprintln!("[fc] multi_gpu 2 devices: {two:.1} captures/s ({:.1} + {:.1}), {ratio:.2}x one device", per[0], per[1]);
    Ok(())
}
