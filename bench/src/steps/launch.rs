//! Launches, the library's against the bare driver calls, alternating
//! iteration by iteration: `eager_per_kernel` (the K kernels enqueued one
//! by one, per kernel) and `graph_launch` (one launch of the captured
//! chain, host side; also between the shield's two mode exchanges), with
//! `capture_launch_sync_destroy` (the multi-GPU capture rows' cycle).

use std::time::Instant;

use cuda_sys::result::{graph, graph_exec, stream};
use cuda_sys::*;
use fc_graph::Result;

use super::rigs::{ok, ChainRun};
use super::rows::{StepOutput, Variant};
use super::timing::emit;
use crate::stats::us_since;

/// The steps of [`eager_rows`], in the order it emits them.
pub(super) const EAGER_STEPS: &[&str] = &["eager_per_kernel"];

/// `eager_per_kernel`: K enqueues through the library against K bare
/// launches on the rig's bare stream, per kernel, both streams waited for
/// (untimed) after each side.
pub(super) fn eager_rows(at: ChainRun, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let ChainRun { d, rig, k, iters } = at;
    let (mut fc, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..iters {
        let t0 = Instant::now();
        rig.chain.enqueue(k)?;
        fc.push(us_since(t0, Instant::now()) / k as f64);
        rig.sync()?;
        let t0 = Instant::now();
        rig.raw_chain(d, k)?;
        raw.push(us_since(t0, Instant::now()) / k as f64);
        rig.sync()?;
    }
    emit(out, "eager_per_kernel", Variant::Fc, k, &mut fc);
    emit(out, "eager_per_kernel", Variant::Bare, k, &mut raw);
    Ok(())
}

/// The steps of [`graph_launch_rows`], in the order it emits them.
pub(super) const GRAPH_LAUNCH_STEPS: &[&str] = &["capture_launch_sync_destroy", "graph_launch"];

/// `graph_launch`: the library's launch of its graph of the K kernels
/// against a bare `cuGraphLaunch` of the very same executable, and the
/// bare launch between two capture-mode exchanges. Then (measured after,
/// emitted first) `capture_launch_sync_destroy`: capture + instantiate +
/// launch + sync + destroy, library against bare calls.
pub(super) fn graph_launch_rows(at: ChainRun, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let ChainRun { d, rig, k, iters } = at;
    let stream = rig.bare_stream;
    let g = rig.chain.capture(k)?;
    let Some(&exec) = g.raw_execs().first() else {
        return Err(fc_graph::Error::invalid(format!("the capture of {k} kernels recorded no executable graph")));
    };
    let (mut fc, mut raw, mut shielded) = (vec![], vec![], vec![]);
    for _ in 0..iters {
        let t0 = Instant::now();
        g.launch()?;
        fc.push(us_since(t0, Instant::now()));
        rig.sync()?;
        let t0 = Instant::now();
        // SAFETY: live executable and stream.
        ok(unsafe { graph_exec::launch(d, exec, stream) })?;
        raw.push(us_since(t0, Instant::now()));
        rig.sync()?;
        let t0 = Instant::now();
        // Exchange, launch, exchange back.
        let m = ok(stream::thread_exchange_capture_mode(d, CU_STREAM_CAPTURE_MODE_RELAXED))?;
        // SAFETY: live executable and stream.
        ok(unsafe { graph_exec::launch(d, exec, stream) })?;
        ok(stream::thread_exchange_capture_mode(d, m))?;
        shielded.push(us_since(t0, Instant::now()));
        rig.sync()?;
    }
    drop(g);

    // The multi-GPU row's cycle: capture + instantiate + launch + sync +
    // destroy, library against bare calls, alternating.
    let (mut fc_cycle, mut bare_cycle) = (vec![], vec![]);
    for _ in 0..iters {
        let t0 = Instant::now();
        let g = rig.chain.capture(k)?;
        g.launch()?;
        rig.sync()?;
        drop(g);
        fc_cycle.push(us_since(t0, Instant::now()));
        let t0 = Instant::now();
        // SAFETY: our stream and live handles; everything made here is destroyed here.
        unsafe {
            ok(stream::begin_capture(d, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))?;
            rig.raw_chain(d, k)?;
            let cg = ok(stream::end_capture(d, stream))?;
            let e = ok(graph_exec::instantiate(d, cg, 0))?;
            ok(graph_exec::launch(d, e, stream))?;
            ok(stream::synchronize(d, stream))?;
            ok(graph_exec::destroy(d, e))?;
            ok(graph::destroy(d, cg))?;
        }
        bare_cycle.push(us_since(t0, Instant::now()));
    }
    emit(out, "capture_launch_sync_destroy", Variant::Fc, k, &mut fc_cycle);
    emit(out, "capture_launch_sync_destroy", Variant::Bare, k, &mut bare_cycle);

    emit(out, "graph_launch", Variant::Fc, k, &mut fc);
    emit(out, "graph_launch", Variant::Bare, k, &mut raw);
    emit(out, "graph_launch", Variant::BareWithExchange, k, &mut shielded);
    Ok(())
}
