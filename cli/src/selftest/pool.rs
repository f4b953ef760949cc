//! Check 5: capture-pool reuse. Two captures of the same shape each
//! allocate two 2 MiB intermediates (from the context's capture pool, one
//! slab each) and drop them before the capture ends. The first capture
//! grows the pool; the second must add 0 bytes, reusing the very blocks the
//! first freed; both graphs must still replay correctly.

use fc_graph::pool::SLAB_GRANULE;
use fc_graph::{CaptureMode, Context, DeviceBuffer, Graph, Origin};

use super::common::{download, ensure, expect_exact, upload, Doing, Failure, Outcome, Rng};
use super::Target;

/// Floats per buffer: one pool slab per intermediate.
const FLOATS: usize = SLAB_GRANULE as usize / 4;

/// One capture: `t1 = x + y; t2 = t1 * y; out = t2 + y`, with `t1` and `t2`
/// allocated while capturing and dropped before the end. Returns the graph
/// and the intermediates' addresses.
fn capture_once(
    ctx: &Context,
    x: &DeviceBuffer,
    y: &DeviceBuffer,
    out: &DeviceBuffer,
) -> Result<(Graph, [u64; 2]), Failure> {
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).doing("begin capture")?;
    let t1 = ctx.alloc(FLOATS * 4).doing("alloc t1 while capturing")?;
    let t2 = ctx.alloc(FLOATS * 4).doing("alloc t2 while capturing")?;
    ensure!(
        matches!(t1.origin(), Origin::Pool { .. }) && matches!(t2.origin(), Origin::Pool { .. }),
        "allocations while capturing did not come from the capture pool ({:?}, {:?})",
        t1.origin(),
        t2.origin()
    );
    ctx.add(x, y, &t1, FLOATS).doing("record t1 = x + y")?;
    ctx.mul(&t1, y, &t2, FLOATS).doing("record t2 = t1 * y")?;
    ctx.add(&t2, y, out, FLOATS).doing("record out = t2 + y")?;
    let addrs = [t1.as_raw(), t2.as_raw()];
    drop((t1, t2));
    let graph = cap.end().doing("end capture + instantiate")?;
    Ok((graph, addrs))
}

fn mib(bytes: usize) -> String {
    format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// Runs the check.
pub fn run(t: &Target) -> Outcome {
    let ctx = Context::new(t.device).doing("open a context")?;
    let mut rng = Rng::new(0x9001 + t.device as u64);
    let (xs, ys) = (rng.floats(FLOATS, -1.0, 1.0), rng.floats(FLOATS, -1.0, 1.0));
    let x = upload(&ctx, &xs).doing("upload x")?;
    let y = upload(&ctx, &ys).doing("upload y")?;
    let out1 = ctx.alloc(FLOATS * 4).doing("alloc out1")?;
    let out2 = ctx.alloc(FLOATS * 4).doing("alloc out2")?;

    let before = ctx.pool_reserved_bytes();
    let (g1, a1) = capture_once(&ctx, &x, &y, &out1).doing("capture 1")?;
    let after1 = ctx.pool_reserved_bytes();
    ensure!(after1 > before, "capture 1 allocated from the pool but it did not grow ({before} bytes)");
    ensure!(
        ctx.pool_in_use_bytes() == 0,
        "capture 1's dropped intermediates still hold {} pool bytes",
        ctx.pool_in_use_bytes()
    );
    let (g2, a2) = capture_once(&ctx, &x, &y, &out2).doing("capture 2")?;
    let after2 = ctx.pool_reserved_bytes();
    ensure!(
        after2 == after1,
        "capture 2 added {} bytes to the pool (it held {} after capture 1)",
        after2 as i64 - after1 as i64,
        after1
    );
    ensure!(
        a2.iter().all(|a| a1.contains(a)),
        "capture 2's intermediates ({a2:#x?}) are not the blocks capture 1 freed ({a1:#x?})"
    );

    let want: Vec<f32> = xs.iter().zip(&ys).map(|(a, b)| (a + b) * b + b).collect();
    for (i, (g, out)) in [(&g1, &out1), (&g2, &out2)].into_iter().enumerate() {
        out.upload(&vec![f32::NAN; FLOATS]).doing("clear the output")?;
        g.launch().doing(&format!("replay capture {}", i + 1))?;
        ctx.synchronize().doing("synchronize")?;
        expect_exact(&format!("capture {} replay vs CPU", i + 1), &download(out, FLOATS).doing("download")?, &want)?;
    }
    Ok(format!(
        "capture 1 grew the pool by {} (2 x {} intermediates, dropped while capturing); capture 2 reused the same \
         blocks: +0 bytes; both replay == CPU",
        mib(after1 - before),
        mib(FLOATS * 4)
    ))
}
