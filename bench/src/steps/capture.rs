//! Stream capture, the library's against the bare driver calls:
//! `capture_begin`, `capture_per_kernel` and `capture_end_instantiate`
//! (each phase of one capture timed apart), and the capture + instantiate
//! samples the table and builder families share
//! ([`capture_instantiate_samples`]).

use std::time::Instant;

use cuda_sys::result::{graph, graph_exec, stream};
use cuda_sys::*;
use fc_graph::{CaptureMode, Graph, Result};

use super::rigs::{ok, BareExec, ChainRun, Rig};
use super::rows::{StepOutput, Variant};
use super::timing::{alternate_blocks, emit};
use crate::stats::us_since;

/// The steps of [`capture_rows`], in the order it emits them.
pub(super) const STEPS: &[&str] = &["capture_begin", "capture_per_kernel", "capture_end_instantiate"];

/// Capture: begin, the K enqueues (per kernel), end + instantiate, each
/// timed; the library's capture and the bare one alternate iteration by
/// iteration, graphs destroyed untimed.
pub(super) fn capture_rows(at: ChainRun, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let ChainRun { d, rig, k, iters } = at;
    let stream = rig.bare_stream;
    let (mut fb, mut fl, mut fe, mut rb, mut rl, mut re) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..iters {
        let t0 = Instant::now();
        let cap = rig.chain.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        let t1 = Instant::now();
        rig.chain.enqueue(k)?;
        let t2 = Instant::now();
        let g: Graph = cap.end()?;
        let t3 = Instant::now();
        drop(g);
        fb.push(us_since(t0, t1));
        fl.push(us_since(t1, t2) / k as f64);
        fe.push(us_since(t2, t3));

        let t0 = Instant::now();
        // SAFETY: our stream, not capturing.
        ok(unsafe { stream::begin_capture(d, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) })?;
        let t1 = Instant::now();
        rig.raw_chain(d, k)?;
        let t2 = Instant::now();
        // SAFETY: our capturing stream.
        let g = ok(unsafe { stream::end_capture(d, stream) })?;
        // SAFETY: live graph.
        let e = ok(unsafe { graph_exec::instantiate(d, g, 0) })?;
        let t3 = Instant::now();
        // SAFETY: ours, destroyed once, untimed.
        unsafe {
            let _ = graph_exec::destroy(d, e);
            let _ = graph::destroy(d, g);
        }
        rb.push(us_since(t0, t1));
        rl.push(us_since(t1, t2) / k as f64);
        re.push(us_since(t2, t3));
    }
    emit(out, "capture_begin", Variant::Fc, k, &mut fb);
    emit(out, "capture_begin", Variant::Bare, k, &mut rb);
    emit(out, "capture_per_kernel", Variant::Fc, k, &mut fl);
    emit(out, "capture_per_kernel", Variant::Bare, k, &mut rl);
    emit(out, "capture_end_instantiate", Variant::Fc, k, &mut fe);
    emit(out, "capture_end_instantiate", Variant::Bare, k, &mut re);
    Ok(())
}

/// The library's record (or capture) + instantiate of the rig's K-kernel
/// chain and the bare stream capture + instantiate, alternating in blocks
/// ([`alternate_blocks`]), graphs destroyed untimed: (fc, bare) samples in µs.
pub(super) fn capture_instantiate_samples(
    d: &Driver,
    rig: &Rig,
    k: usize,
    iters: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    alternate_blocks(
        iters,
        |_| {
            let t0 = Instant::now();
            let g = rig.chain.capture(k)?;
            let t = us_since(t0, Instant::now());
            drop(g);
            Ok(t)
        },
        |_| {
            let t0 = Instant::now();
            let exec = BareExec::new(d, rig, k)?;
            let t = us_since(t0, Instant::now());
            exec.destroy(d);
            Ok(t)
        },
    )
}
