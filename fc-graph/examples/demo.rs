//! The main job's demo: prints the driver and devices fc-graph finds and,
//! with a GPU present, captures the seed test's layer body (13 x add, mul)
//! on each device, replays it on fresh inputs and checks it against the CPU.
//! Without a driver it says why and exits 0.

use clap::Parser;
use fc_graph::{CaptureMode, Context, Device, DeviceBuffer, Result};

#[derive(Parser)]
#[command(about = "fc-graph demo: driver, devices, capture + replay + check")]
struct Args {
    /// Elements per buffer.
    #[arg(long, default_value_t = 4096)]
    n: usize,
    /// add+mul pairs in the captured body.
    #[arg(long, default_value_t = 13)]
    pairs: usize,
    /// Replays to check per device.
    #[arg(long, default_value_t = 3)]
    replays: usize,
}

fn inputs(n: usize, seed: u32) -> (Vec<f32>, Vec<f32>) {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        (s >> 8) as f32 / (1u32 << 24) as f32
    };
    let x = (0..n).map(|_| next() * 2.0 - 1.0).collect();
    let y = (0..n).map(|_| next() * 3.0 - 1.5).collect();
    (x, y)
}

fn demo_device(ordinal: usize, args: &Args) -> Result<bool> {
    let ctx = Context::new(ordinal)?;
    let bytes = args.n * 4;
    let (x, y, z): (DeviceBuffer, DeviceBuffer, DeviceBuffer) =
        (ctx.alloc(bytes)?, ctx.alloc(bytes)?, ctx.alloc(bytes)?);
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
    for _ in 0..args.pairs {
        ctx.add(&x, &y, &z, args.n)?;
        ctx.mul(&z, &y, &x, args.n)?;
    }
    let graph = cap.end()?;
    let mut all_ok = true;
    for replay in 0..args.replays {
        let (xs, ys) = inputs(args.n, (ordinal * 100 + replay) as u32 + 1);
        x.upload(&xs)?;
        y.upload(&ys)?;
        graph.launch()?;
        ctx.synchronize()?;
        let mut got = vec![0f32; args.n];
        x.download(&mut got)?;
        let mut want = xs;
        for _ in 0..args.pairs {
            for (w, yv) in want.iter_mut().zip(&ys) {
                *w = (*w + yv) * yv;
            }
        }
        let bad = got.iter().zip(&want).filter(|(g, w)| g.to_bits() != w.to_bits()).count();
        println!(
            "  device {ordinal}: replay {replay}: {} kernels, {bad} of {} elements differ from the CPU",
            2 * args.pairs,
            args.n
        );
        all_ok &= bad == 0;
    }
    Ok(all_ok)
}

fn main() {
    let args = Args::parse();
    println!("fc-graph {}", fc_graph::VERSION);
    let driver = match fc_graph::driver() {
        Ok(d) => d,
        Err(e) => {
            println!("[SKIP] {e}");
            return;
        }
    };
    let v = driver.driver_version();
    println!("driver: {} (CUDA {}.{})", driver.library_path(), v / 1000, (v % 1000) / 10);
    let missing: Vec<String> =
        driver.missing_optional().iter().map(|f| format!("{} (needs ABI {})", f.name, f.abi_version)).collect();
    if !missing.is_empty() {
        println!("optional entry points this driver lacks: {}", missing.join(", "));
    }
    let count = match Device::count() {
        Ok(n) => n,
        Err(e) => {
            println!("[SKIP] cannot count devices: {e}");
            return;
        }
    };
    println!("devices: {count}");
    let mut ok = true;
    for i in 0..count {
        match Device::get(i).and_then(|d| Ok((d.name()?, d.compute_capability()?, d.total_memory()?))) {
            Ok((name, (ma, mi), mem)) => {
                println!("  device {i}: {name}, sm_{ma}{mi}, {} MiB", mem >> 20)
            }
            Err(e) => println!("  device {i}: {e}"),
        }
        match demo_device(i, &args) {
            Ok(true) => {}
            Ok(false) => ok = false,
            Err(e) => {
                println!("  device {i}: FAILED: {e}");
                ok = false;
            }
        }
    }
    if count > 0 {
        println!("{}", if ok { "[PASS] capture + replay matches the CPU" } else { "[FAIL] capture + replay" });
        if !ok {
            std::process::exit(1);
        }
    }
}
