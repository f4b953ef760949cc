//! Check 4: a breakable replay. A capture with one break (`Capture::brk`)
//! whose host function reads the replay's live value: segment
//! `h = x + y`, break `h = h * live` (the live value uploaded by the host),
//! segment `out = h + y`. Replayed with two different live values on fresh
//! inputs, it must equal the same steps run eagerly and the CPU, bit for bit.

use std::sync::Arc;

use fc_graph::{CaptureMode, Context, DeviceBuffer};

use super::common::{download, ensure, expect_exact, upload, Doing, Outcome, Rng, N};
use super::Target;

/// The live values of the two replays (the capture runs with 1.0).
const LIVE: [f32; 2] = [2.5, -0.75];

/// The break's body: `h = h * live`, `live` broadcast into `w` by the host.
fn scale_by_live(ctx: &Context, h: &DeviceBuffer, w: &DeviceBuffer, live: f32) -> fc_graph::Result<()> {
    w.upload(&vec![live; N])?;
    ctx.mul(h, w, h, N)
}

/// Runs the check.
pub fn run(t: &Target) -> Outcome {
    let ctx = Context::new(t.device).doing("open a context")?;
    let mut rng = Rng::new(0xb4ea + t.device as u64);
    let x = upload(&ctx, &rng.floats(N, -1.0, 1.0)).doing("upload x")?;
    let y = upload(&ctx, &rng.floats(N, -1.0, 1.0)).doing("upload y")?;
    let h = Arc::new(ctx.alloc(N * 4).doing("alloc h")?);
    let w = Arc::new(ctx.alloc(N * 4).doing("alloc w")?);
    let out = ctx.alloc(N * 4).doing("alloc out")?;

    let mut cap = ctx.begin_breakable::<f32>(CaptureMode::ThreadLocal).doing("begin capture")?;
    ctx.add(&x, &y, &h, N).doing("record h = x + y")?;
    {
        let (h, w) = (h.clone(), w.clone());
        cap.brk(&1.0, move |ctx: &Context, live: &f32| scale_by_live(ctx, &h, &w, *live)).doing("break")?;
    }
    ctx.add(&h, &y, &out, N).doing("record out = h + y")?;
    let graph = cap.end().doing("end capture + instantiate")?;
    ensure!(
        graph.segment_count() == 3 && graph.break_count() == 1,
        "expected 2 segments around 1 break, got {} pieces and {} breaks",
        graph.segment_count(),
        graph.break_count()
    );

    for live in LIVE {
        let (xs, ys) = (rng.floats(N, -1.0, 1.0), rng.floats(N, -1.0, 1.0));
        x.upload(&xs).doing("upload x")?;
        y.upload(&ys).doing("upload y")?;
        graph.replay(&live).doing(&format!("replay with live value {live}"))?;
        ctx.synchronize().doing("synchronize after replay")?;
        let replayed = download(&out, N).doing("download the replay's result")?;

        out.upload(&vec![f32::NAN; N]).doing("clear out")?;
        ctx.add(&x, &y, &h, N).doing("eager h = x + y")?;
        scale_by_live(&ctx, &h, &w, live).doing("eager h = h * live")?;
        ctx.add(&h, &y, &out, N).doing("eager out = h + y")?;
        ctx.synchronize().doing("synchronize after the eager run")?;
        let eager = download(&out, N).doing("download the eager result")?;

        let want: Vec<f32> = xs.iter().zip(&ys).map(|(a, b)| (a + b) * live + b).collect();
        expect_exact(&format!("live {live}: replay vs eager"), &replayed, &eager)?;
        expect_exact(&format!("live {live}: replay vs CPU"), &replayed, &want)?;
    }
    Ok(format!(
        "2 segments + 1 break; replays with live values {} and {} == eager == CPU, bit for bit",
        LIVE[0], LIVE[1]
    ))
}
