//! The single driver calls the library adds around the work, each timed
//! alone (`ctx_get_current`: the context check before each call;
//! `capture_mode_exchange_pair`: the shield), and, with
//! [`StepsConfig::probe_without_context`], which hot-path calls work with
//! no context current (`probe_no_current_context`). Measured once, first.

use std::os::raw::c_void;
use std::time::Instant;

use cuda_sys::result::{context, graph, graph_exec, kernel, stream};
use cuda_sys::*;
use fc_graph::Result;

use super::config::StepsConfig;
use super::rigs::{ok, rc, Rig};
use super::rows::{NoContextProbe, StepOutput, Variant};
use super::timing::emit;
use crate::stats::us_since;

/// The steps of this family's rows, in the order it emits them.
pub(super) const STEPS: &[&str] = &["ctx_get_current", "capture_mode_exchange_pair"];

/// `ctx_get_current` and `capture_mode_exchange_pair`
/// ([`StepsConfig::single_call_samples`] samples each), then the probe
/// where `cfg` asks for it.
pub(super) fn rows(cfg: &StepsConfig, d: &Driver, rig: &Rig, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let mut v = sample(cfg.single_call_samples, || ok(context::get_current(d)).map(drop))?;
    emit(out, "ctx_get_current", Variant::BareOnly, 1, &mut v);
    let mut v = sample(cfg.single_call_samples, || {
        // The second call restores the mode.
        let m = ok(stream::thread_exchange_capture_mode(d, CU_STREAM_CAPTURE_MODE_RELAXED))?;
        ok(stream::thread_exchange_capture_mode(d, m)).map(drop)
    })?;
    emit(out, "capture_mode_exchange_pair", Variant::BareOnly, 1, &mut v);

    if cfg.probe_without_context {
        out(StepOutput::Probe(probe_without_current_context(d, rig)?));
    }
    Ok(())
}

/// One timed sample per call of `f`, in microseconds.
fn sample(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    let mut v = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t0 = Instant::now();
        f()?;
        v.push(us_since(t0, Instant::now()));
    }
    Ok(v)
}

/// Which of the calls on the hot paths work with no context current on the
/// calling thread (the driver takes the context from the stream or handle):
/// those need no per-call context binding.
fn probe_without_current_context(d: &Driver, rig: &Rig) -> Result<NoContextProbe> {
    let stream = rig.bare_stream;
    let prev = ok(context::get_current(d))?;
    // SAFETY: unbinds this thread's context; restored below.
    ok(unsafe { context::set_current(d, std::ptr::null_mut()) })?;
    let (mut x, mut y, mut z, mut n) =
        (rig.chain.x.as_raw(), rig.chain.y.as_raw(), rig.chain.z.as_raw(), rig.chain.n as u32);
    let mut p: [*mut c_void; 4] = [
        (&mut x as *mut u64).cast(),
        (&mut y as *mut u64).cast(),
        (&mut z as *mut u64).cast(),
        (&mut n as *mut u32).cast(),
    ];
    let params = p.as_mut_ptr();
    let launch = || {
        // SAFETY: parameters as the PTX declares; live function and stream.
        rc(unsafe { kernel::launch(d, rig.func_add, (16, 1, 1), (256, 1, 1), 0, stream, params, std::ptr::null_mut()) })
    };
    let rc_launch = launch();
    // SAFETY: our stream.
    let rc_begin = rc(unsafe { stream::begin_capture(d, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) });
    let rc_launch_captured = launch();
    // SAFETY: our stream (a graph a failed end hands out is destroyed by
    // the call).
    let ended = unsafe { stream::end_capture(d, stream) };
    let g = ended.as_ref().map_or(std::ptr::null_mut(), |g| *g);
    let rc_end = rc(ended);
    let mut e: CUgraphExec = std::ptr::null_mut();
    let rc_inst = if g.is_null() {
        -1
    } else {
        // SAFETY: live graph.
        let made = unsafe { graph_exec::instantiate(d, g, 0) };
        e = made.as_ref().map_or(std::ptr::null_mut(), |e| *e);
        rc(made) as i64
    };
    let rc_graph_launch = if e.is_null() {
        -1
    } else {
        // SAFETY: live executable and stream.
        rc(unsafe { graph_exec::launch(d, e, stream) }) as i64
    };
    // SAFETY: our stream.
    let rc_sync = rc(unsafe { stream::synchronize(d, stream) });
    // SAFETY: restores the previous binding; destroys what we made.
    unsafe {
        let _ = context::set_current(d, prev);
        if !e.is_null() {
            let _ = graph_exec::destroy(d, e);
        }
        if !g.is_null() {
            let _ = graph::destroy(d, g);
        }
    }
    Ok(NoContextProbe {
        launch: rc_launch,
        begin_capture: rc_begin,
        launch_captured: rc_launch_captured,
        end_capture: rc_end,
        instantiate: rc_inst,
        graph_launch: rc_graph_launch,
        sync: rc_sync,
        pdl: rig.pdl.get(),
    })
}
