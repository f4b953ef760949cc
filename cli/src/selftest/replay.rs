//! Check 1: a captured chain of 26 add/mul kernels, replayed on fresh
//! inputs, equals the same chain run eagerly and the CPU reference, bit
//! for bit.

use fc_graph::{CaptureMode, Context};

use super::common::{chain, chain_cpu, download, ensure, expect_exact, Doing, Outcome, Rng, N, PAIRS};
use super::Target;

/// Fresh inputs the graph is replayed on.
const TRIALS: usize = 3;

/// Runs the check.
pub fn run(t: &Target) -> Outcome {
    let ctx = Context::new(t.device).doing("open a context")?;
    let bufs = (ctx.alloc(N * 4)?, ctx.alloc(N * 4)?, ctx.alloc(N * 4)?);
    let (x, y, z) = (&bufs.0, &bufs.1, &bufs.2);
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).doing("begin capture")?;
    chain(&ctx, (x, y, z), PAIRS).doing("record the chain")?;
    let graph = cap.end().doing("end capture + instantiate")?;
    ensure!(graph.segment_count() == 1, "expected one captured segment, got {}", graph.segment_count());

    let mut rng = Rng::new(0x5e1f + t.device as u64);
    for trial in 0..TRIALS {
        let xs = rng.floats(N, -1.0, 1.0);
        let ys = rng.floats(N, -1.5, 1.5);
        let mut want = xs.clone();
        chain_cpu(&mut want, &ys, PAIRS);

        x.upload(&xs).doing("upload x")?;
        y.upload(&ys).doing("upload y")?;
        graph.launch().doing("replay")?;
        ctx.synchronize().doing("synchronize after replay")?;
        let replayed = download(x, N).doing("download the replay's result")?;

        x.upload(&xs).doing("upload x")?;
        chain(&ctx, (x, y, z), PAIRS).doing("run the chain eagerly")?;
        ctx.synchronize().doing("synchronize after the eager run")?;
        let eager = download(x, N).doing("download the eager result")?;

        expect_exact(&format!("input {}: replay vs eager", trial + 1), &replayed, &eager)?;
        expect_exact(&format!("input {}: replay vs CPU", trial + 1), &replayed, &want)?;
    }
    Ok(format!("{} kernels x {N} floats, {TRIALS} fresh inputs: replay == eager == CPU, bit for bit", 2 * PAIRS))
}
