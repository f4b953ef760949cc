//! The C ABI's own cost (`capi/`, called in-process): `handle_check`
//! (`fc_buffer_size` against `DeviceBuffer::size`, the best of blocks
//! spread over the run, emitted last), `handle_check_2threads` (the same,
//! two threads on one handle) and `c_graph_launch` (`fc_graph_launch`
//! against a bare `cuGraphLaunch` of the same chain's twin).

use std::time::Instant;

use cuda_sys::result::graph_exec;
use cuda_sys::*;
use fc_graph::{Context, DeviceBuffer, Graph, Result};

use super::config::StepsConfig;
use super::rigs::{ok, CRig};
use super::rows::{StepOutput, Variant};
use super::timing::emit;
use crate::chain::Chain;
use crate::stats::{us_since, Summary};

/// The steps of [`rows`], in the order it emits them.
pub(super) const STEPS: &[&str] = &["handle_check_2threads", "c_graph_launch"];

/// The step of [`HandleCheck::emit`].
pub(super) const HANDLE_CHECK_STEPS: &[&str] = &["handle_check"];

/// The C ABI's own cost, on the C context and buffers of [`HandleCheck`]
/// (which times the single-thread `handle_check`).
/// `handle_check_2threads`: `fc_buffer_size(h)` against
/// `DeviceBuffer::size`, two threads on one handle at once.
/// `c_graph_launch`: `fc_graph_launch` of a C-ABI graph of K kernels
/// against the bare `cuGraphLaunch` of the same executable's twin.
pub(super) fn rows(cfg: &StepsConfig, handles: &HandleCheck, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    use fcgraph as c;
    const BATCH: usize = 1000;
    let fail = |what: &str| fc_graph::Error::invalid(format!("{what} failed in the C ABI rows"));
    let (crig, rust_buf) = (&handles.crig, &handles.rust_buf);
    let (cctx, bufs) = (crig.ctx, &crig.bufs);
    // Two threads on the same handle at once (an engine's decode and
    // connection threads on one context): per call, per thread.
    let (mut fc2, mut bare2) = (Vec::new(), Vec::new());
    let h = bufs[0] as usize;
    for _ in 0..cfg.single_call_samples.max(100) / 10 {
        let per_call = |f: fn(usize, &DeviceBuffer) -> usize| {
            let t0 = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        for _ in 0..BATCH * 10 {
                            std::hint::black_box(f(std::hint::black_box(h), rust_buf));
                        }
                    });
                }
            });
            us_since(t0, Instant::now()) / (BATCH * 10) as f64
        };
        fc2.push(per_call(|h, _| c::fc_buffer_size(h as *const c::fc_buffer)));
        bare2.push(per_call(|_, b| b.size()));
    }
    emit(out, "handle_check_2threads", Variant::Fc, 1, &mut fc2);
    emit(out, "handle_check_2threads", Variant::Bare, 1, &mut bare2);

    let d = fc_graph::driver()?;
    let stream = c::fc_ctx_stream(cctx) as CUstream;
    for &(k, iters) in &cfg.chains {
        let cg = crig.capture(k)?;
        // The bare twin: the same chain captured through the library's
        // Rust API, launched with cuGraphLaunch on the C context's stream.
        let (mut fc, mut bare) = (Vec::new(), Vec::new());
        let (twin, _twin_chain) = capture_twin(cfg, k)?;
        let exec = twin.raw_execs().first().copied().ok_or_else(|| fail("the twin capture"))?;
        for _ in 0..iters {
            let t0 = Instant::now();
            let rc = c::fc_graph_launch(cg);
            fc.push(us_since(t0, Instant::now()));
            if rc != 0 || c::fc_sync_ctx(cctx) != 0 {
                c::fc_graph_free(cg);
                return Err(fail("fc_graph_launch"));
            }
            let t0 = Instant::now();
            // SAFETY: a live executable of the same device's primary
            // context, launched on the C context's live stream.
            ok(unsafe { graph_exec::launch(d, exec, stream) })?;
            bare.push(us_since(t0, Instant::now()));
            if c::fc_sync_ctx(cctx) != 0 {
                c::fc_graph_free(cg);
                return Err(fail("fc_sync_ctx"));
            }
        }
        c::fc_graph_free(cg);
        emit(out, "c_graph_launch", Variant::Fc, k, &mut fc);
        emit(out, "c_graph_launch", Variant::Bare, k, &mut bare);
    }
    Ok(())
}

/// `handle_check`: `fc_buffer_size(h)` (handle decode, table lookup,
/// hazard-pointer announce + fence, generation compare, under
/// `catch_unwind`) against `DeviceBuffer::size`, in batches of calls (one sample = the mean of a batch), measured in blocks
/// spread over the steps run ([`HandleCheck::measure`] after each K); the
/// row is the block with the lowest median, as the benchmark keeps each
/// implementation's best round: host timings on the benchmark VMs move by
/// up to 2x in phases of a few seconds (GPU runs 34-36).
pub(super) struct HandleCheck {
    crig: CRig,
    rust_buf: DeviceBuffer,
    samples: usize,
    best: Option<(Vec<f64>, Vec<f64>)>,
}

impl HandleCheck {
    pub(super) fn new(cfg: &StepsConfig) -> Result<HandleCheck> {
        Ok(HandleCheck {
            crig: CRig::new(cfg.device, cfg.n)?,
            rust_buf: Context::new(cfg.device)?.alloc(cfg.n * 4)?,
            samples: cfg.single_call_samples.max(100),
            best: None,
        })
    }

    /// One block of samples; kept if its median is the lowest so far.
    pub(super) fn measure(&mut self) {
        const BATCH: usize = 1000;
        let h = self.crig.bufs[0];
        let (mut fc, mut bare) = (Vec::new(), Vec::new());
        for _ in 0..self.samples {
            let t0 = Instant::now();
            for _ in 0..BATCH {
                std::hint::black_box(fcgraph::fc_buffer_size(std::hint::black_box(h)));
            }
            fc.push(us_since(t0, Instant::now()) / BATCH as f64);
            let t0 = Instant::now();
            for _ in 0..BATCH {
                std::hint::black_box(std::hint::black_box(&self.rust_buf).size());
            }
            bare.push(us_since(t0, Instant::now()) / BATCH as f64);
        }
        let median = |v: &[f64]| Summary::of(&mut v.to_vec()).median;
        if self.best.as_ref().is_none_or(|(best, _)| median(&fc) < median(best)) {
            self.best = Some((fc, bare));
        }
    }

    pub(super) fn emit(self, out: &mut dyn FnMut(StepOutput)) {
        if let Some((mut fc, mut bare)) = self.best {
            emit(out, "handle_check", Variant::Fc, 1, &mut fc);
            emit(out, "handle_check", Variant::Bare, 1, &mut bare);
        }
    }
}

/// K built-in kernels captured on a fresh primary context of the device,
/// with the chain whose buffers the graph uses (keep it alive while the
/// graph is launched).
fn capture_twin(cfg: &StepsConfig, k: usize) -> Result<(Graph, Chain)> {
    let chain = Chain::alloc(Context::new(cfg.device)?, cfg.n)?;
    Ok((chain.capture(k)?, chain))
}
