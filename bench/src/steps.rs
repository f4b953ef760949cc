//! Where fc-graph's time goes (`fc-bench --steps`):
//! times each step of the library's launch, capture and replay paths next
//! to the bare driver call it wraps, in the same process on the same
//! stream, alternating, so the difference is the library's own cost. Where
//! the library launches its built-ins with programmatic dependent launch
//! (PDL), the bare calls do too (`cuLaunchKernelEx` with the same
//! attribute, on the same sm_90 PTX).
//!
//! [`run_steps`] hands each finished row to a callback; `fc-bench` prints
//! them as JSON rows (`step_<step>_<fc|bare|...>`), or with `--table` as
//! the table of [`crate::steps_table`].

use std::os::raw::c_void;
use std::time::Instant;

use cuda_sys::result::{context, graph, graph_exec, kernel, stream};
use cuda_sys::*;
use fc_graph::{
    BinaryOp, CaptureMode, Context, DeviceBuffer, Graph, KernelArg, LaunchConfig, Module, RecordingMode, Result,
    UpdateReport,
};

use serde_json::json;

use crate::stats::{no_extra, round, row_json, us_since, Summary, IMPL};

mod build_profile;
pub use build_profile::build_profile;

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepsConfig {
    /// The device to measure on.
    pub device: usize,
    /// Elements per buffer (f32).
    pub n: usize,
    /// Chain lengths K, each with its number of timed iterations per row.
    pub chains: Vec<(usize, usize)>,
    /// Samples of each single driver call (`ctx_get_current`,
    /// `capture_mode_exchange_pair`).
    pub single_call_samples: usize,
    /// Also probe which hot-path calls work with no context current.
    pub probe_without_context: bool,
}

impl StepsConfig {
    /// `fc-bench --steps`: K = 26 (400 iterations per row), 260 (200) and
    /// 2600 (50), 2000 samples of each single call, and the no-context
    /// probe. (Run 48 took 100 / 50 / 20: its medians of record +
    /// instantiate moved by more than the 5% a goal asks for between rows
    /// that time the same steps, so the rows now take 4x / 4x / 2.5x the
    /// samples.)
    pub fn full(device: usize, n: usize) -> StepsConfig {
        StepsConfig {
            device,
            n,
            chains: vec![(26, 400), (260, 200), (2600, 50)],
            single_call_samples: 2000,
            probe_without_context: true,
        }
    }

    /// About a second: K = 26 only, 40 iterations, 500 single-call samples.
    pub fn quick(device: usize, n: usize) -> StepsConfig {
        StepsConfig { device, n, chains: vec![(26, 40)], single_call_samples: 500, probe_without_context: false }
    }
}

/// Which implementation a row timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// fc-graph's call.
    Fc,
    /// The bare driver call(s) fc-graph's call wraps.
    Bare,
    /// The bare call between two capture-mode exchanges (what the shield adds).
    BareWithExchange,
    /// A single driver call with no fc-graph counterpart.
    BareOnly,
    /// Re-capture + update by bare calls that keep the re-captured graph
    /// as the executable's source and destroy the replaced one (as
    /// fc-graph's `end_update` did in runs 18-30), instead of destroying the
    /// re-captured graph right after the update ([`Variant::Bare`], and
    /// fc-graph since run 31).
    BareKeepNew,
}

impl Variant {
    /// The suffix of the row name (`_fc`, `_bare`, ...; none for [`Variant::BareOnly`]).
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Fc => "_fc",
            Variant::Bare => "_bare",
            Variant::BareWithExchange => "_bare_with_exchange",
            Variant::BareOnly => "",
            Variant::BareKeepNew => "_bare_keep_new",
        }
    }
}

/// One measured row: microseconds per sample.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    /// The step, e.g. `eager_per_kernel` (see [`step_label`]).
    pub step: &'static str,
    /// Library or bare driver calls.
    pub variant: Variant,
    /// Chain length K (1 for single calls).
    pub kernels: usize,
    /// The samples' statistics, in microseconds.
    pub summary: Summary,
    /// On the fc row of a pair timed by [`alternate_blocks`]: fc / bare
    /// over adjacent blocks ([`paired_ratio`]).
    pub paired: Option<Paired>,
}

/// fc / bare of a row pair timed in alternating blocks, block by block:
/// the median over block pairs of (fc block median / bare block median).
/// Adjacent blocks see the same state of the host, so a change of the
/// host's speed during the row (seen in GPU run 53) weighs on both sides
/// of each pair alike, where the ratio of the two rows' medians takes
/// whichever state most of each side's rounds fell into.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// The median of the block pairs' ratios.
    pub ratio: f64,
    /// Block pairs.
    pub blocks: usize,
}

impl StepRow {
    /// The row name of the JSON schema: `step_<step><suffix>`.
    pub fn row_name(&self) -> String {
        format!("step_{}{}", self.step, self.variant.suffix())
    }

    /// The row as one JSON object (the schema `bench/report.py` reads).
    pub fn json(&self) -> String {
        let extra = match self.paired {
            Some(p) => json!({ "paired_fc_over_bare": round(p.ratio, 4), "paired_blocks": p.blocks }),
            None => no_extra(),
        };
        row_json(&self.row_name(), self.kernels, &self.summary, extra)
    }
}

/// Result codes of the hot-path calls made with no context current on the
/// thread (0 = success; -1 = not attempted because an earlier call failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoContextProbe {
    /// `cuLaunchKernel`.
    pub launch: CUresult,
    /// `cuStreamBeginCapture`.
    pub begin_capture: CUresult,
    /// `cuLaunchKernel` into the capture.
    pub launch_captured: CUresult,
    /// `cuStreamEndCapture`.
    pub end_capture: CUresult,
    /// `cuGraphInstantiateWithFlags`.
    pub instantiate: i64,
    /// `cuGraphLaunch`.
    pub graph_launch: i64,
    /// `cuStreamSynchronize`.
    pub sync: CUresult,
    /// Whether the rig's bare launches used PDL.
    pub pdl: bool,
}

impl NoContextProbe {
    /// The probe as its JSON row (`probe_no_current_context`).
    pub fn json(&self) -> String {
        json!({"impl": IMPL, "row": "probe_no_current_context", "kernels": 0, "median_us": null,
               "rc_launch": self.launch, "rc_begin_capture": self.begin_capture,
               "rc_launch_captured": self.launch_captured, "rc_end_capture": self.end_capture,
               "rc_instantiate": self.instantiate, "rc_graph_launch": self.graph_launch, "rc_sync": self.sync,
               "pdl": self.pdl})
        .to_string()
    }
}

/// What [`run_steps`] hands its callback, in measurement order.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutput {
    /// First: whether the built-ins (and so the bare launches) use
    /// programmatic dependent launch on this device.
    Pdl(bool),
    /// A finished row.
    Row(StepRow),
    /// The no-context probe's result.
    Probe(NoContextProbe),
}

/// A one-line description of each step, for tables.
pub fn step_label(step: &str) -> &'static str {
    match step {
        "ctx_get_current" => "cuCtxGetCurrent (the context check before each call)",
        "capture_mode_exchange_pair" => "two cuThreadExchangeStreamCaptureMode (the shield)",
        "eager_per_kernel" => "eager kernel launch, per kernel",
        "capture_begin" => "capture begin",
        "capture_per_kernel" => "kernel launch while capturing, per kernel",
        "capture_end_instantiate" => "capture end + instantiate",
        "capture_launch_sync_destroy" => "capture + instantiate + launch + sync + destroy",
        "graph_launch" => "graph launch (host side)",
        "handle_check" => "C ABI handle check: fc_buffer_size vs DeviceBuffer::size, per call",
        "handle_check_2threads" => "the same, two threads on one handle at once, per call and thread",
        "c_graph_launch" => "graph launch through the C ABI (fc_graph_launch) vs bare",
        "recapture_update" => "re-capture + in-place update (cuGraphExecUpdate) + one graph destroy",
        "c_recapture_update" => "the same re-capture + update through the C ABI vs bare",
        "graph_node_count" => "cuGraphGetNodes, count only, of a K-node graph",
        "table_capture_instantiate_pdl" => "the table's capture_instantiate, PDL on both sides",
        "table_capture_instantiate_plain" => "the table's capture_instantiate, plain launches on both sides",
        "table_recapture_update_pdl" => "the table's recapture_update, PDL on both sides",
        "table_recapture_update_plain" => "the table's recapture_update, plain launches on both sides",
        "build_instantiate" => "recording (built node by node) + instantiate vs stream capture + instantiate",
        "node_update_all" => {
            "re-recording, every node changed (K node calls) vs re-capture + cuGraphExecUpdate + destroy, \
             the rig's launches (PDL where the device has it)"
        }
        "node_update_all_plain" => {
            "re-recording, every node changed (K node calls) vs re-capture + cuGraphExecUpdate + destroy, \
             plain launches on both sides"
        }
        "node_update_one" => "re-recording, one node changed (1 node call) vs re-capture + cuGraphExecUpdate + destroy",
        "node_update_none" => {
            "re-recording, nothing changed (no driver call) vs re-capture + cuGraphExecUpdate + destroy"
        }
        "lanes_replay_pdl" => "two joined lanes of 26 (fc column) vs one chain of 52 (bare column, also fc-graph), PDL",
        "lanes_replay_plain" => {
            "two joined lanes of 26 (fc column) vs one chain of 52 (bare column, also fc-graph), plain"
        }
        "while_loop_32x26" => {
            "32 iterations of a 26-kernel body + countdown: one WHILE node (fc column) vs the host loop (launch the \
             body, copy the flag back, sync, decide; bare column, also fc-graph)"
        }
        "set_params_floor" => "K bare cuGraphExecKernelNodeSetParams, every node changed (the driver's floor)",
        "set_params_floor_plain" => {
            "K bare cuGraphExecKernelNodeSetParams, every node changed (the driver's floor), plain launches"
        }
        "built_launch_sync" => "launch + sync of the recorded graph vs the captured one (bare cuGraphLaunch)",
        _ => "",
    }
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

/// A bare driver call's result, its failure named by the driver (as a
/// plain `Error::Cuda`, whatever the code).
fn ok<T>(r: std::result::Result<T, DriverError>) -> Result<T> {
    r.map_err(|e| {
        let (name, description) = match fc_graph::driver() {
            Ok(d) => (e.name(d), e.description(d)),
            Err(_) => (format!("CUDA_ERROR_{}", e.code), String::new()),
        };
        fc_graph::Error::Cuda { call: e.call, code: e.code, name, description }
    })
}

/// The status of a bare driver call (`CUDA_SUCCESS` when it succeeded).
fn rc<T>(r: std::result::Result<T, DriverError>) -> CUresult {
    r.err().map_or(CUDA_SUCCESS, |e| e.code)
}

struct Rig {
    ctx: Context,
    x: DeviceBuffer,
    y: DeviceBuffer,
    z: DeviceBuffer,
    n: usize,
    func_add: CUfunction,
    func_mul: CUfunction,
    /// The bare launches use PDL (as the library's built-ins do here;
    /// [`Rig::set_pdl`] switches both sides).
    pdl: std::cell::Cell<bool>,
    /// A second stream of the same CUDA context for the bare calls: asking
    /// for `ctx`'s own stream would mark it as shared with foreign work,
    /// which makes the library's re-capture updates count nodes (see
    /// `Context::raw_stream`).
    bare_stream: CUstream,
    bare: Context,
    _module: Module,
}

impl Rig {
    /// The rig on `device` with `n`-float buffers, the built-ins loaded
    /// and the context bound to this thread (one warm-up chain run).
    fn open(device: usize, n: usize) -> Result<Rig> {
        let ctx = Context::new(device)?;
        let pdl = ctx.pdl_enabled();
        let ptx = if pdl { fc_graph::builtins::ELEMENTWISE_SM90_PTX } else { fc_graph::builtins::ELEMENTWISE_PTX };
        let module = Module::from_ptx(&ctx, ptx)?;
        let bare = Context::new(device)?;
        let rig = Rig {
            x: ctx.alloc(n * 4)?,
            y: ctx.alloc(n * 4)?,
            z: ctx.alloc(n * 4)?,
            n,
            func_add: module.kernel("fc_add_f32")?.raw_function(),
            func_mul: module.kernel("fc_mul_f32")?.raw_function(),
            pdl: std::cell::Cell::new(pdl),
            bare_stream: bare.raw_stream(),
            bare,
            _module: module,
            ctx,
        };
        rig.fc_chain(26)?; // loads the built-ins, binds the context to this thread
        rig.sync()?;
        Ok(rig)
    }

    /// Launch mode of both sides: the library's built-ins (its PDL switch)
    /// and the bare launches.
    fn set_pdl(&self, on: bool) {
        self.ctx.set_pdl(on);
        self.pdl.set(on);
    }

    /// Waits for both streams.
    fn sync(&self) -> Result<()> {
        self.ctx.synchronize()?;
        self.bare.synchronize()
    }

    /// K kernels through the library.
    fn fc_chain(&self, k: usize) -> Result<()> {
        for i in 0..k {
            if i % 2 == 0 {
                self.ctx.add(&self.x, &self.y, &self.z, self.n)?;
            } else {
                self.ctx.mul(&self.z, &self.y, &self.x, self.n)?;
            }
        }
        Ok(())
    }

    /// K kernels captured through the library (one executable).
    fn fc_capture(&self, k: usize) -> Result<Graph> {
        let cap = self.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        self.fc_chain(k)?;
        cap.end()
    }

    /// K kernels re-captured through the library into `g`, updated in
    /// place (an error if the library instantiated instead).
    fn fc_recapture(&self, g: &mut Graph, k: usize) -> Result<()> {
        let cap = self.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        self.fc_chain(k)?;
        let rep = cap.end_update(g)?;
        if rep.updated != 1 {
            return Err(fc_graph::Error::invalid(format!("re-capture K={k}: not updated in place ({rep:?})")));
        }
        Ok(())
    }

    /// The same K kernels as bare cuLaunchKernel calls on the same stream.
    fn raw_chain(&self, d: &Driver, k: usize) -> Result<()> {
        self.raw_chain_with(d, k, |_| false)
    }

    /// The K kernels as bare launches, node `i` in operand variant
    /// `swap(i)` (see [`chain_node`]; all `false`: [`Rig::raw_chain`]).
    fn raw_chain_with(&self, d: &Driver, k: usize, swap: impl Fn(usize) -> bool) -> Result<()> {
        let grid = (self.n as u32).div_ceil(256);
        for i in 0..k {
            let (op, a, b, o) = chain_node(self, i, swap(i));
            let f = if op == BinaryOp::Add { self.func_add } else { self.func_mul };
            let (mut a, mut b, mut o, mut n) = (a.as_raw(), b.as_raw(), o.as_raw(), self.n as u32);
            let mut p: [*mut c_void; 4] = [
                (&mut a as *mut u64).cast(),
                (&mut b as *mut u64).cast(),
                (&mut o as *mut u64).cast(),
                (&mut n as *mut u32).cast(),
            ];
            if self.pdl.get() {
                let mut value = CUlaunchAttributeValue { pad: [0; 64] };
                value.programmaticStreamSerializationAllowed = 1;
                let mut attr =
                    CUlaunchAttribute { id: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, pad: [0; 4], value };
                let config = CUlaunchConfig {
                    gridDimX: grid,
                    gridDimY: 1,
                    gridDimZ: 1,
                    blockDimX: 256,
                    blockDimY: 1,
                    blockDimZ: 1,
                    sharedMemBytes: 0,
                    hStream: self.bare_stream,
                    attrs: &mut attr,
                    numAttrs: 1,
                };
                // SAFETY: as below; `config` and its attribute live across the call.
                let launched = unsafe { kernel::launch_ex(d, &config, f, p.as_mut_ptr(), std::ptr::null_mut()) };
                let Some(launched) = launched else {
                    return Err(fc_graph::Error::invalid("no cuLaunchKernelEx"));
                };
                ok(launched)?;
                continue;
            }
            // SAFETY: (u64, u64, u64, u32) parameters as the PTX declares; live stream.
            ok(unsafe {
                kernel::launch(
                    d,
                    f,
                    (grid, 1, 1),
                    (256, 1, 1),
                    0,
                    self.bare_stream,
                    p.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            })?;
        }
        Ok(())
    }
}

/// Emits one row.
fn emit(out: &mut dyn FnMut(StepOutput), step: &'static str, variant: Variant, kernels: usize, samples: &mut [f64]) {
    out(StepOutput::Row(StepRow { step, variant, kernels, summary: Summary::of(samples), paired: None }));
}

/// Emits the fc and bare rows of a pair timed by [`alternate_blocks`]
/// with `iters` (samples in round order), the fc row with its
/// [`paired_ratio`].
fn emit_alternated(
    out: &mut dyn FnMut(StepOutput),
    step: &'static str,
    kernels: usize,
    iters: usize,
    fc: &mut [f64],
    bare: &mut [f64],
) {
    let paired = paired_ratio(fc, bare, block_rounds(iters));
    out(StepOutput::Row(StepRow { step, variant: Variant::Fc, kernels, summary: Summary::of(fc), paired }));
    emit(out, step, Variant::Bare, kernels, bare);
}

/// Measures every step as `cfg` says, handing each row to `out` as soon as
/// it is measured.
pub fn run_steps(cfg: &StepsConfig, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let (device, n) = (cfg.device, cfg.n);
    if n == 0 || cfg.chains.iter().any(|&(k, iters)| k == 0 || iters == 0) || cfg.single_call_samples == 0 {
        return Err(fc_graph::Error::invalid(
            "steps: n, every K, every iteration count and the sample count must be positive",
        ));
    }
    let d = fc_graph::driver()?;
    let rig = Rig::open(device, n)?;
    let stream = rig.bare_stream;
    out(StepOutput::Pdl(rig.pdl.get()));

    // Single driver calls the library adds around the work.
    let mut v = sample(cfg.single_call_samples, || ok(context::get_current(d)).map(drop))?;
    emit(out, "ctx_get_current", Variant::BareOnly, 1, &mut v);
    let mut v = sample(cfg.single_call_samples, || {
        // The second call restores the mode.
        let m = ok(stream::thread_exchange_capture_mode(d, CU_STREAM_CAPTURE_MODE_RELAXED))?;
        ok(stream::thread_exchange_capture_mode(d, m)).map(drop)
    })?;
    emit(out, "capture_mode_exchange_pair", Variant::BareOnly, 1, &mut v);

    if cfg.probe_without_context {
        out(StepOutput::Probe(probe_without_current_context(d, &rig)?));
    }

    let mut handle_check = HandleCheck::new(cfg)?;
    handle_check.measure();
    c_abi_rows(cfg, &handle_check, out)?;

    for &(k, iters) in &cfg.chains {
        // Eager enqueue per kernel, alternating.
        let (mut fc, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..iters {
            let t0 = Instant::now();
            rig.fc_chain(k)?;
            fc.push(us_since(t0, Instant::now()) / k as f64);
            rig.sync()?;
            let t0 = Instant::now();
            rig.raw_chain(d, k)?;
            raw.push(us_since(t0, Instant::now()) / k as f64);
            rig.sync()?;
        }
        emit(out, "eager_per_kernel", Variant::Fc, k, &mut fc);
        emit(out, "eager_per_kernel", Variant::Bare, k, &mut raw);

        // Capture: begin, the K enqueues, end + instantiate, each timed.
        let (mut fb, mut fl, mut fe, mut rb, mut rl, mut re) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..iters {
            let t0 = Instant::now();
            let cap = rig.ctx.begin_capture(CaptureMode::ThreadLocal)?;
            let t1 = Instant::now();
            rig.fc_chain(k)?;
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

        // Graph launch (host), the library's graph, alternating with a bare
        // cuGraphLaunch of the very same executable.
        let g = rig.fc_capture(k)?;
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
            let cap = rig.ctx.begin_capture(CaptureMode::ThreadLocal)?;
            rig.fc_chain(k)?;
            let g = cap.end()?;
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

        recapture_rows(d, &rig, k, iters, out)?;
        table_rows(d, &rig, k, iters, out)?;
        builder_rows(d, &rig, k, iters, out)?;
        if k == 26 {
            lanes_rows(&rig, iters, out)?;
            while_rows(&rig, iters, out)?;
        }
        handle_check.measure();
    }
    handle_check.emit(out);
    Ok(())
}

/// The benchmark table's host-bound rows, `capture_instantiate` and
/// `recapture_update`, timed end to end as fc-bench and raw_bench time
/// them, but in one process, alternating library and bare driver calls
/// (capture + instantiate in blocks, [`alternate_blocks`]; re-capture +
/// update iteration by iteration), in each launch mode (`table_<row>_pdl` where
/// the built-ins use PDL, and `table_<row>_plain`). Host timings on the
/// benchmark VMs move by up to 2x between processes and phases of a few
/// seconds (GPU runs 34-36); alternating calls see the same phases.
fn table_rows(d: &Driver, rig: &Rig, k: usize, iters: usize, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let default = rig.pdl.get();
    let modes: &[bool] = if default { &[true, false] } else { &[false] };
    let mut result = Ok(());
    for &pdl in modes {
        rig.set_pdl(pdl);
        result = table_rows_in_mode(d, rig, k, iters, pdl, out);
        if result.is_err() {
            break;
        }
    }
    rig.set_pdl(default);
    result
}

fn table_rows_in_mode(
    d: &Driver,
    rig: &Rig,
    k: usize,
    iters: usize,
    pdl: bool,
    out: &mut dyn FnMut(StepOutput),
) -> Result<()> {
    let (capture_step, update_step) = if pdl {
        ("table_capture_instantiate_pdl", "table_recapture_update_pdl")
    } else {
        ("table_capture_instantiate_plain", "table_recapture_update_plain")
    };
    // Capture + instantiate (destroyed untimed), alternating in blocks.
    let (mut fc, mut bare) = capture_instantiate_samples(d, rig, k, iters)?;
    emit_alternated(out, capture_step, k, iters, &mut fc, &mut bare);

    // Re-capture + update in place, each side into its own executable.
    if d.cuGraphExecUpdate.is_none() {
        return Ok(());
    }
    let mut g = rig.fc_capture(k)?;
    let mut exec = BareExec::new(d, rig, k)?;
    let (mut fc, mut bare) = (vec![], vec![]);
    let mut run = || -> Result<()> {
        for it in 0..iters + 2 {
            let t0 = Instant::now();
            rig.fc_recapture(&mut g, k)?;
            let t1 = Instant::now();
            exec.recapture(d, rig, k, false)?;
            let t2 = Instant::now();
            if it >= 2 {
                fc.push(us_since(t0, t1));
                bare.push(us_since(t1, t2));
            }
        }
        Ok(())
    };
    let result = run();
    exec.destroy(d);
    result?;
    emit(out, update_step, Variant::Fc, k, &mut fc);
    emit(out, update_step, Variant::Bare, k, &mut bare);
    Ok(())
}

/// A bare capture of the rig's K kernels (begin, launches, end), node `i`
/// in operand variant `swap(i)` (see [`chain_node`]).
fn bare_capture(d: &Driver, rig: &Rig, k: usize, swap: impl Fn(usize) -> bool) -> Result<CUgraph> {
    let stream = rig.bare_stream;
    // SAFETY: our stream, not capturing.
    ok(unsafe { stream::begin_capture(d, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) })?;
    let chain = rig.raw_chain_with(d, k, swap);
    // SAFETY: our capturing stream (a graph a failed end hands out is
    // destroyed by the call).
    let end = ok(unsafe { stream::end_capture(d, stream) });
    if let Err(e) = chain {
        if let Ok(g) = end {
            if !g.is_null() {
                // SAFETY: the graph the end handed us, destroyed once.
                let _ = unsafe { graph::destroy(d, g) };
            }
        }
        return Err(e);
    }
    end
}

/// One executable and the graph it keeps, for the bare update rows.
struct BareExec {
    exec: CUgraphExec,
    source: CUgraph,
}

impl BareExec {
    fn new(d: &Driver, rig: &Rig, k: usize) -> Result<BareExec> {
        let source = bare_capture(d, rig, k, |_| false)?;
        // SAFETY: live graph.
        match ok(unsafe { graph_exec::instantiate(d, source, 0) }) {
            Ok(exec) => Ok(BareExec { exec, source }),
            Err(e) => {
                // SAFETY: ours, destroyed once.
                let _ = unsafe { graph::destroy(d, source) };
                Err(e)
            }
        }
    }

    /// Re-captures and updates in place; `keep_new`: the re-captured graph
    /// becomes `source` and the old one is destroyed, else the re-captured
    /// one is destroyed after the update.
    fn recapture(&mut self, d: &Driver, rig: &Rig, k: usize, keep_new: bool) -> Result<()> {
        self.recapture_with(d, rig, k, keep_new, |_| false)
    }

    /// [`BareExec::recapture`] of the chain with node `i` in operand
    /// variant `swap(i)` (see [`chain_node`]).
    fn recapture_with(
        &mut self,
        d: &Driver,
        rig: &Rig,
        k: usize,
        keep_new: bool,
        swap: impl Fn(usize) -> bool,
    ) -> Result<()> {
        let g = bare_capture(d, rig, k, swap)?;
        // SAFETY: live executable and graph of the rig's context; the
        // executable is ours (`&mut self`).
        let outcome = unsafe { graph_exec::update(d, self.exec, g) };
        let res = match outcome {
            None => Err(fc_graph::Error::invalid("no cuGraphExecUpdate")),
            // A refusal is an error here too (`GraphExecUpdate::status`).
            Some(o) => ok(o.and_then(|o| DriverError::check("cuGraphExecUpdate", o.status))),
        };
        let victim = if keep_new && res.is_ok() { std::mem::replace(&mut self.source, g) } else { g };
        // SAFETY: a graph we own that nothing needs any more, destroyed once.
        let _ = unsafe { graph::destroy(d, victim) };
        res
    }

    fn destroy(self, d: &Driver) {
        // SAFETY: ours, destroyed once.
        unsafe {
            let _ = graph_exec::destroy(d, self.exec);
            let _ = graph::destroy(d, self.source);
        }
    }
}

/// A one-thread kernel that counts a u32 flag down (the loop body's own
/// stop condition in `while_rows`).
const COUNTDOWN_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry bench_flag_countdown(
	.param .u64 flag
)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [flag];
	cvta.to.global.u64 	%rd2, %rd1;
	ld.global.u32 	%r1, [%rd2];
	sub.u32 	%r2, %r1, 1;
	st.global.u32 	[%rd2], %r2;
	ret;
}
"#;

/// Device-side loops (issue 20): 32 iterations of a body of the rig's 26
/// built-ins (PDL where the rig uses it) and a one-thread kernel that
/// counts a flag down. `while_loop_32x26` fc column: one recording holding
/// the body in a WHILE node (`Context::while_loop`, stopped when the flag
/// the body counts down reaches 0), launch + sync; bare column: the loop
/// an engine writes without conditional nodes, over a recording of the
/// body alone: launch it, copy the flag back and synchronize
/// (`DeviceBuffer::download`: cuMemcpyDtoHAsync + cuStreamSynchronize),
/// decide on the host. The flag is set to 32 before each run, untimed.
/// Both runs must leave the same `x`, bit for bit, and the flag at 0.
fn while_rows(rig: &Rig, iters: usize, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    const TRIPS: u32 = 32;
    if !fc_graph::conditional::support().if_while {
        eprintln!("[fc] while_loop_32x26: the driver has no conditional nodes (CUDA 12.3+); skipped");
        return Ok(());
    }
    let module = Module::from_ptx(&rig.ctx, COUNTDOWN_PTX)?;
    let countdown = module.kernel("bench_flag_countdown")?;
    let one = LaunchConfig { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
    let flag = rig.ctx.alloc(4)?;
    let body = |c: &Context| -> Result<()> {
        for i in 0..26 {
            let (op, a, b, o) = chain_node(rig, i, false);
            c.binary(op, a, b, o, rig.n)?;
        }
        countdown.launch_on(c, one, &[KernelArg::Buffer(&flag)])
    };
    let mode = rig.ctx.recording_mode();
    rig.ctx.set_recording_mode(RecordingMode::Build);
    let recorded = (|| -> Result<(Graph, Graph)> {
        let cap = rig.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        rig.ctx.while_loop(&flag, body)?;
        let looped = cap.end()?;
        let cap = rig.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        body(&rig.ctx)?;
        Ok((looped, cap.end()?))
    })();
    rig.ctx.set_recording_mode(mode);
    let (looped, one_trip) = recorded?;
    let device_loop = || -> Result<f64> {
        flag.upload(&[TRIPS])?;
        let t0 = Instant::now();
        looped.launch()?;
        rig.ctx.synchronize()?;
        Ok(us_since(t0, Instant::now()))
    };
    let host_loop = || -> Result<f64> {
        flag.upload(&[TRIPS])?;
        let t0 = Instant::now();
        loop {
            one_trip.launch()?;
            let mut f = [0u32];
            flag.download(&mut f)?;
            if f[0] == 0 {
                break;
            }
        }
        Ok(us_since(t0, Instant::now()))
    };
    // Equal results: both from the same x.
    let mut start = vec![0f32; rig.n];
    rig.x.download(&mut start)?;
    let after = |run: &dyn Fn() -> Result<f64>| -> Result<(Vec<f32>, u32)> {
        rig.x.upload(&start)?;
        run()?;
        let (mut x, mut f) = (vec![0f32; rig.n], [1u32]);
        rig.x.download(&mut x)?;
        flag.download(&mut f)?;
        Ok((x, f[0]))
    };
    let (on_device, on_host) = (after(&device_loop)?, after(&host_loop)?);
    let same = on_device.0.iter().zip(&on_host.0).all(|(a, b)| a.to_bits() == b.to_bits());
    if !same || on_device.1 != 0 || on_host.1 != 0 {
        return Err(fc_graph::Error::invalid(format!(
            "while_loop_32x26: the WHILE node and the host loop differ (same x: {same}, flags {} and {})",
            on_device.1, on_host.1
        )));
    }
    let (mut fc, mut bare) = alternate_blocks(iters, |_| device_loop(), |_| host_loop())?;
    rig.x.upload(&start)?;
    emit_alternated(out, "while_loop_32x26", 26, iters, &mut fc, &mut bare);
    Ok(())
}

/// Lanes (issue 20): two independent 26-kernel chains recorded on two
/// lanes of the rig's context and joined, against one recorded chain of
/// 52, launch + sync alternating, with PDL (where the rig has it) and
/// plain: `lanes_replay_pdl` / `lanes_replay_plain` (fc column: the lanes;
/// bare column: the chain of 52, also through fc-graph).
fn lanes_rows(rig: &Rig, iters: usize, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let n = rig.n;
    let (x2, z2) = (rig.ctx.alloc(n * 4)?, rig.ctx.alloc(n * 4)?);
    x2.fill_bytes(0, n * 4, 0)?;
    let pdl_default = rig.pdl.get();
    let mut run = || -> Result<()> {
        for (pdl, step) in [(true, "lanes_replay_pdl"), (false, "lanes_replay_plain")] {
            if pdl && !pdl_default {
                continue;
            }
            rig.set_pdl(pdl);
            let cap = rig.ctx.begin_capture(CaptureMode::ThreadLocal)?;
            let lanes = rig.ctx.fork(2)?;
            for (lane, (x, z)) in lanes.iter().zip([(&rig.x, &rig.z), (&x2, &z2)]) {
                for i in 0..26 {
                    if i % 2 == 0 {
                        lane.add(x, &rig.y, z, n)?;
                    } else {
                        lane.mul(z, &rig.y, x, n)?;
                    }
                }
            }
            rig.ctx.join(&lanes)?;
            let g_lanes = cap.end()?;
            let g_chain = rig.fc_capture(52)?;
            if g_lanes.node_count()? != 52 || g_chain.node_count()? != 52 {
                return Err(fc_graph::Error::invalid("lanes rows: 52 nodes on each side expected"));
            }
            let (mut lanes_t, mut chain_t) = (vec![], vec![]);
            for it in 0..iters + 2 {
                let t0 = Instant::now();
                g_lanes.launch()?;
                rig.ctx.synchronize()?;
                let t1 = Instant::now();
                g_chain.launch()?;
                rig.ctx.synchronize()?;
                let t2 = Instant::now();
                if it >= 2 {
                    lanes_t.push(us_since(t0, t1));
                    chain_t.push(us_since(t1, t2));
                }
            }
            emit(out, step, Variant::Fc, 26, &mut lanes_t);
            emit(out, step, Variant::Bare, 26, &mut chain_t);
        }
        Ok(())
    };
    let result = run();
    rig.set_pdl(pdl_default);
    result
}

/// A context and three buffers made through the C ABI, recording the
/// K-kernel chain through it (`c_graph_launch`, `c_recapture_update`).
struct CRig {
    ctx: *mut fcgraph::fc_cuda_ctx,
    bufs: Vec<*mut fcgraph::fc_buffer>,
    n: usize,
}

impl CRig {
    fn new(device: usize, n: usize) -> Result<CRig> {
        use fcgraph as c;
        let device = std::os::raw::c_int::try_from(device).map_err(|_| fc_graph::Error::invalid("device"))?;
        let ctx = c::fc_cuda_init_device(device);
        if ctx.is_null() {
            return Err(c_failure("fc_cuda_init_device"));
        }
        let mut rig = CRig { ctx, bufs: Vec::new(), n };
        rig.bufs = (0..3).map(|_| c::fc_buffer_alloc_ctx(ctx, n * 4)).collect();
        if rig.bufs.iter().any(|b| b.is_null()) {
            return Err(c_failure("fc_buffer_alloc_ctx"));
        }
        Ok(rig)
    }

    /// Begins a capture and records the K kernels through the C ABI.
    fn record(&self, k: usize) -> Result<()> {
        use fcgraph as c;
        if c::fc_graph_begin_ctx(self.ctx) != 0 {
            return Err(c_failure("fc_graph_begin_ctx"));
        }
        let b = &self.bufs;
        for i in 0..k {
            let rc = if i % 2 == 0 {
                c::fc_add_ctx(self.ctx, b[0], b[1], b[2], self.n)
            } else {
                c::fc_mul_ctx(self.ctx, b[2], b[1], b[0], self.n)
            };
            if rc != 0 {
                c::fc_graph_abort_ctx(self.ctx);
                return Err(c_failure("fc_add_ctx / fc_mul_ctx"));
            }
        }
        Ok(())
    }

    /// A graph of the K kernels, which the caller frees.
    fn capture(&self, k: usize) -> Result<*mut fcgraph::fc_graph> {
        self.record(k)?;
        let graph = fcgraph::fc_graph_end_ctx(self.ctx);
        if graph.is_null() {
            return Err(c_failure("fc_graph_end_ctx"));
        }
        Ok(graph)
    }

    /// Re-records the K kernels into `graph`; in place or an error.
    fn recapture(&self, graph: *mut fcgraph::fc_graph, k: usize) -> Result<()> {
        self.record(k)?;
        let mut updated = 0;
        // SAFETY: a live context and graph of it; a valid out-pointer.
        let rc = unsafe { fcgraph::fc_graph_end_update_ctx(self.ctx, graph, &mut updated) };
        if rc != 0 || updated != 1 {
            return Err(fc_graph::Error::invalid(format!(
                "c_recapture_update K={k}: fc_graph_end_update_ctx returned {rc}, {updated} updated in place"
            )));
        }
        Ok(())
    }
}

impl Drop for CRig {
    fn drop(&mut self) {
        use fcgraph as c;
        for &b in &self.bufs {
            c::fc_buffer_free(b);
        }
        c::fc_cuda_ctx_free(self.ctx);
    }
}

/// The error of a failed C ABI call in the steps.
fn c_failure(what: &str) -> fc_graph::Error {
    let msg = fcgraph::fc_last_error();
    let detail = if msg.is_null() {
        String::new()
    } else {
        // SAFETY: fc_last_error returns NULL or a NUL-terminated string that
        // stays valid until the next failing call on this thread.
        unsafe { std::ffi::CStr::from_ptr(msg) }.to_string_lossy().into_owned()
    };
    fc_graph::Error::invalid(format!("{what} failed in the steps: {detail}"))
}

/// `recapture_update`: the library's `end_update` against bare re-capture +
/// `cuGraphExecUpdate` (destroying the re-captured graph, as the raw C
/// baseline does; or keeping it and destroying the replaced one), each into
/// its own executable, alternating. `c_recapture_update`: the same
/// re-capture through the C ABI (`fc_graph_begin_ctx`, K `fc_add_ctx` /
/// `fc_mul_ctx`, `fc_graph_end_update_ctx`, each call checking its handles)
/// against the same bare calls. Also `graph_node_count`.
/// No rows on a driver without in-place update (`cuGraphExecUpdate`).
fn recapture_rows(d: &Driver, rig: &Rig, k: usize, iters: usize, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    if d.cuGraphExecUpdate.is_none() {
        return Ok(());
    }
    let mut g = rig.fc_capture(k)?;
    let mut bare = BareExec::new(d, rig, k)?;
    let mut keep = match BareExec::new(d, rig, k) {
        Ok(e) => e,
        Err(e) => {
            bare.destroy(d);
            return Err(e);
        }
    };
    let crig = CRig::new(rig.ctx.device_id(), rig.n).and_then(|r| Ok((r.capture(k)?, r)));
    let (cgraph, crig) = match crig {
        Ok(r) => r,
        Err(e) => {
            bare.destroy(d);
            keep.destroy(d);
            return Err(e);
        }
    };
    let (mut fc, mut b, mut kn, mut count, mut cabi) = (vec![], vec![], vec![], vec![], vec![]);
    let mut run = || -> Result<()> {
        for it in 0..iters + 2 {
            let t0 = Instant::now();
            rig.fc_recapture(&mut g, k)?;
            let t1 = Instant::now();
            bare.recapture(d, rig, k, false)?;
            let t2 = Instant::now();
            keep.recapture(d, rig, k, true)?;
            let t3 = Instant::now();
            // SAFETY: live graph.
            let nodes = ok(unsafe { graph::node_count(d, keep.source) })?;
            let t4 = Instant::now();
            crig.recapture(cgraph, k)?;
            let t5 = Instant::now();
            if nodes != k {
                return Err(fc_graph::Error::invalid(format!("graph_node_count: {nodes} nodes, want {k}")));
            }
            if it >= 2 {
                fc.push(us_since(t0, t1));
                b.push(us_since(t1, t2));
                kn.push(us_since(t2, t3));
                count.push(us_since(t3, t4));
                cabi.push(us_since(t4, t5));
            }
        }
        Ok(())
    };
    let result = run();
    bare.destroy(d);
    keep.destroy(d);
    fcgraph::fc_graph_free(cgraph);
    drop(crig);
    result?;
    emit(out, "recapture_update", Variant::Fc, k, &mut fc);
    emit(out, "recapture_update", Variant::Bare, k, &mut b);
    emit(out, "recapture_update", Variant::BareKeepNew, k, &mut kn);
    emit(out, "graph_node_count", Variant::BareOnly, k, &mut count);
    let mut bare_again = b.clone();
    emit(out, "c_recapture_update", Variant::Fc, k, &mut cabi);
    emit(out, "c_recapture_update", Variant::Bare, k, &mut bare_again);
    Ok(())
}

/// The C ABI's own cost, on the C context and buffers of [`HandleCheck`]
/// (which times the single-thread `handle_check`).
/// `handle_check_2threads`: `fc_buffer_size(h)` against
/// `DeviceBuffer::size`, two threads on one handle at once.
/// `c_graph_launch`: `fc_graph_launch` of a C-ABI graph of K kernels
/// against the bare `cuGraphLaunch` of the same executable's twin.
fn c_abi_rows(cfg: &StepsConfig, handles: &HandleCheck, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
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
        let (twin, _twin_buffers) = capture_twin(cfg, k)?;
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
struct HandleCheck {
    crig: CRig,
    rust_buf: DeviceBuffer,
    samples: usize,
    best: Option<(Vec<f64>, Vec<f64>)>,
}

impl HandleCheck {
    fn new(cfg: &StepsConfig) -> Result<HandleCheck> {
        Ok(HandleCheck {
            crig: CRig::new(cfg.device, cfg.n)?,
            rust_buf: Context::new(cfg.device)?.alloc(cfg.n * 4)?,
            samples: cfg.single_call_samples.max(100),
            best: None,
        })
    }

    /// One block of samples; kept if its median is the lowest so far.
    fn measure(&mut self) {
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

    fn emit(self, out: &mut dyn FnMut(StepOutput)) {
        if let Some((mut fc, mut bare)) = self.best {
            emit(out, "handle_check", Variant::Fc, 1, &mut fc);
            emit(out, "handle_check", Variant::Bare, 1, &mut bare);
        }
    }
}

/// K built-in kernels captured on a fresh primary context of the device,
/// with the buffers the graph uses (keep them alive while it is launched).
fn capture_twin(cfg: &StepsConfig, k: usize) -> Result<(Graph, [DeviceBuffer; 3])> {
    let ctx = Context::new(cfg.device)?;
    let (x, y, z) = (ctx.alloc(cfg.n * 4)?, ctx.alloc(cfg.n * 4)?, ctx.alloc(cfg.n * 4)?);
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
    for i in 0..k {
        if i % 2 == 0 {
            ctx.add(&x, &y, &z, cfg.n)?;
        } else {
            ctx.mul(&z, &y, &x, cfg.n)?;
        }
    }
    Ok((cap.end()?, [x, y, z]))
}

/// Which of the calls on the hot paths work with no context current on the
/// calling thread (the driver takes the context from the stream or handle):
/// those need no per-call context binding.
fn probe_without_current_context(d: &Driver, rig: &Rig) -> Result<NoContextProbe> {
    let stream = rig.bare_stream;
    let prev = ok(context::get_current(d))?;
    // SAFETY: unbinds this thread's context; restored below.
    ok(unsafe { context::set_current(d, std::ptr::null_mut()) })?;
    let (mut x, mut y, mut z, mut n) = (rig.x.as_raw(), rig.y.as_raw(), rig.z.as_raw(), rig.n as u32);
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

/// Node `i`'s operation and operands in variant `swap` (the commuted
/// operands: other parameters, the same results).
fn chain_node(rig: &Rig, i: usize, swap: bool) -> (BinaryOp, &DeviceBuffer, &DeviceBuffer, &DeviceBuffer) {
    match (i % 2 == 0, swap) {
        (true, false) => (BinaryOp::Add, &rig.x, &rig.y, &rig.z),
        (true, true) => (BinaryOp::Add, &rig.y, &rig.x, &rig.z),
        (false, false) => (BinaryOp::Mul, &rig.z, &rig.y, &rig.x),
        (false, true) => (BinaryOp::Mul, &rig.y, &rig.z, &rig.x),
    }
}

/// The v2 node parameters of one kernel of the rig's chain: `func` over
/// `grid` blocks of 256 threads, with the `cuLaunchKernel`-style argument
/// array `params`.
fn chain_node_params(func: CUfunction, grid: u32, params: *mut *mut c_void) -> CUDA_KERNEL_NODE_PARAMS_v2 {
    CUDA_KERNEL_NODE_PARAMS_v2 {
        func,
        gridDimX: grid,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 256,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: params,
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// Re-records the rig's K-kernel chain into `g` (node `i` in variant
/// `swap(i)`) through the library's recording API: what an engine does.
fn fc_rerecord(rig: &Rig, g: &mut Graph, k: usize, swap: impl Fn(usize) -> bool) -> Result<UpdateReport> {
    let cap = rig.ctx.begin_capture(CaptureMode::ThreadLocal)?;
    for i in 0..k {
        let (op, a, b, o) = chain_node(rig, i, swap(i));
        rig.ctx.binary(op, a, b, o, rig.n)?;
    }
    cap.end_update(g)
}

/// Rounds per block of [`alternate_blocks`] (fewer where `iters / 4` is).
const BLOCK_ROUNDS: usize = 8;

/// The timed rounds per block [`alternate_blocks`] uses for `iters`.
fn block_rounds(iters: usize) -> usize {
    BLOCK_ROUNDS.min(iters / 4).max(1)
}

/// fc / bare block by block ([`Paired`]): `fc` and `bare` are the samples
/// of [`alternate_blocks`] in round order, in timed blocks of `block`
/// rounds (each side's last block may be shorter). The i-th block of fc
/// and the i-th of bare are adjacent in time (ABBA order). `None` when a
/// side has no samples, the sides' block counts differ or a bare block's
/// median is not positive.
pub fn paired_ratio(fc: &[f64], bare: &[f64], block: usize) -> Option<Paired> {
    let block = block.max(1);
    let (f, b) = (fc.chunks(block), bare.chunks(block));
    if fc.is_empty() || f.len() != b.len() {
        return None;
    }
    let mut ratios = Vec::with_capacity(f.len());
    for (x, y) in f.zip(b) {
        let (mut x, mut y) = (x.to_vec(), y.to_vec());
        let (fm, bm) = (Summary::of(&mut x).median, Summary::of(&mut y).median);
        if bm.is_nan() || bm <= 0.0 || !fm.is_finite() {
            return None;
        }
        ratios.push(fm / bm);
    }
    let blocks = ratios.len();
    Some(Paired { ratio: Summary::of(&mut ratios).median, blocks })
}

/// Untimed rounds at the start of a side's first block.
const FIRST_WARMUP_ROUNDS: usize = 2;

/// Times `fc` against `bare`, `iters` timed rounds each, alternating in
/// blocks of B = min(8, iters / 4) (at least 1) rounds in ABBA order: fc,
/// bare, bare, fc, fc, bare, ... Drift over the run weighs on both sides
/// alike, but no timed round directly follows the other side's round: each
/// block that follows the other side's round begins with one untimed
/// warm-up round of its own side (the first block of each side with
/// [`FIRST_WARMUP_ROUNDS`]); a block that follows a block of its own side
/// (the middle of "bb" and "ff") needs none. Each closure gets its side's
/// round number (warm-ups included, from 0) and returns its round's timed
/// part in µs. Returns the (fc, bare) samples in round order.
fn alternate_blocks(
    iters: usize,
    mut fc: impl FnMut(usize) -> Result<f64>,
    mut bare: impl FnMut(usize) -> Result<f64>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let block = block_rounds(iters);
    let mut samples = [Vec::with_capacity(iters), Vec::with_capacity(iters)];
    let mut rounds = [0usize; 2];
    let mut previous: Option<usize> = None;
    for j in 0.. {
        if samples.iter().all(|v| v.len() >= iters) {
            break;
        }
        let side = [0, 1, 1, 0][j % 4];
        let timed = block.min(iters - samples[side].len());
        if timed == 0 {
            continue;
        }
        let warmup = match previous {
            _ if rounds[side] == 0 => FIRST_WARMUP_ROUNDS,
            Some(p) if p == side => 0,
            _ => 1,
        };
        for r in 0..warmup + timed {
            let round = rounds[side];
            rounds[side] += 1;
            let us = if side == 0 { fc(round)? } else { bare(round)? };
            if r >= warmup {
                samples[side].push(us);
            }
        }
        previous = Some(side);
    }
    let [fc, bare] = samples;
    Ok((fc, bare))
}

/// The library's record (or capture) + instantiate of the rig's K-kernel
/// chain and the bare stream capture + instantiate, alternating in blocks
/// ([`alternate_blocks`]), graphs destroyed untimed: (fc, bare) samples in µs.
fn capture_instantiate_samples(d: &Driver, rig: &Rig, k: usize, iters: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    alternate_blocks(
        iters,
        |_| {
            let t0 = Instant::now();
            let g = rig.fc_capture(k)?;
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

/// What each round of a node-update row changes, against the same side's
/// previous round (the other side's rounds touch only their own graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// Every node's operands (K node calls on the library's side).
    Every,
    /// Node K / 2's operands (1 node call).
    One,
    /// Nothing (no driver call).
    Nothing,
}

impl Change {
    /// The library's node calls per round.
    fn node_calls(self, k: usize) -> usize {
        match self {
            Change::Every => k,
            Change::One => 1,
            Change::Nothing => 0,
        }
    }

    /// The next round's operand variants (see [`chain_node`]) from the
    /// current ones: every node, node K / 2 or none flipped.
    fn apply(self, swap: &mut [bool]) {
        match self {
            Change::Every => swap.iter_mut().for_each(|s| *s = !*s),
            Change::One => {
                let one = swap.len() / 2;
                if let Some(s) = swap.get_mut(one) {
                    *s = !*s;
                }
            }
            Change::Nothing => {}
        }
    }
}

/// A graph recorded through the library and a bare executable of the same
/// K-kernel chain, with the operand variant of each node (see
/// [`chain_node`]) that each of them holds now: each side's rounds change
/// exactly what the row says against that side's previous round, whatever
/// the rows before left behind.
struct UpdatePair {
    g: Graph,
    exec: BareExec,
    fc_swap: Vec<bool>,
    bare_swap: Vec<bool>,
}

impl UpdatePair {
    /// Both sides recorded / captured in the rig's current launch mode.
    fn new(d: &Driver, rig: &Rig, k: usize) -> Result<UpdatePair> {
        let g = rig.fc_capture(k)?;
        let exec = BareExec::new(d, rig, k)?;
        Ok(UpdatePair { g, exec, fc_swap: vec![false; k], bare_swap: vec![false; k] })
    }

    fn destroy(self, d: &Driver) {
        self.exec.destroy(d);
    }

    /// Row `step`: the library's re-recording + update (`end_update`),
    /// checked from its report (one segment updated in place, with
    /// `change`'s node calls, every round, warm-ups included), against bare
    /// re-capture + `cuGraphExecUpdate` + destroying the re-captured graph,
    /// both changing `change`'s nodes each round.
    fn update_row(
        &mut self,
        d: &Driver,
        rig: &Rig,
        step: &'static str,
        change: Change,
        iters: usize,
        out: &mut dyn FnMut(StepOutput),
    ) -> Result<()> {
        let k = self.fc_swap.len();
        let want = change.node_calls(k);
        let UpdatePair { g, exec, fc_swap, bare_swap } = self;
        let (mut fc, mut bare) = alternate_blocks(
            iters,
            |round| {
                change.apply(fc_swap);
                let t0 = Instant::now();
                let report = fc_rerecord(rig, g, k, |i| fc_swap[i])?;
                let t = us_since(t0, Instant::now());
                if report.updated != 1 || report.instantiated != 0 || report.node_calls != want {
                    return Err(fc_graph::Error::invalid(format!(
                        "{step} K={k}, round {round}: {report:?}, want {want} node calls in one update"
                    )));
                }
                Ok(t)
            },
            |_| {
                change.apply(bare_swap);
                let t0 = Instant::now();
                exec.recapture_with(d, rig, k, false, |i| bare_swap[i])?;
                Ok(us_since(t0, Instant::now()))
            },
        )?;
        emit_alternated(out, step, k, iters, &mut fc, &mut bare);
        Ok(())
    }

    /// The driver's own floor of a node-by-node update, row `step`: K bare
    /// `cuGraphExecKernelNodeSetParams` calls on the bare executable, every
    /// node changed against the previous round (commuted operands, the same
    /// results), no library code; two untimed rounds first. Skipped with a
    /// note when the driver refuses a call.
    fn set_params_floor(
        &mut self,
        d: &Driver,
        rig: &Rig,
        step: &'static str,
        iters: usize,
        out: &mut dyn FnMut(StepOutput),
    ) -> Result<()> {
        let k = self.bare_swap.len();
        let mut nodes: Vec<CUgraphNode> = vec![std::ptr::null_mut(); k];
        // SAFETY: the bare executable's live source graph.
        let n = ok(unsafe { graph::get_nodes_into(d, self.exec.source, &mut nodes) })?;
        if n != k {
            println!("[fc] {step} K={k}: the graph has {n} nodes; skipped");
            return Ok(());
        }
        let grid = (rig.n as u32).div_ceil(256);
        let mut v = Vec::with_capacity(iters);
        for it in 0..iters + 2 {
            let t0 = Instant::now();
            for (i, &node) in nodes.iter().enumerate() {
                let swap = !self.bare_swap[i];
                let (op, a, b, o) = chain_node(rig, i, swap);
                let func = if op == BinaryOp::Add { rig.func_add } else { rig.func_mul };
                let mut w = [a.as_raw(), b.as_raw(), o.as_raw(), rig.n as u64];
                let base = w.as_mut_ptr();
                let mut params: [*mut c_void; 4] = [
                    base.cast(),
                    base.wrapping_add(1).cast(),
                    base.wrapping_add(2).cast(),
                    base.wrapping_add(3).cast(),
                ];
                let p = chain_node_params(func, grid, params.as_mut_ptr());
                // SAFETY: the bare live executable, a kernel node of its source
                // (creation order: node i is the chain's launch i), parameters
                // of the same (u64, u64, u64, u32) kernel, live across the call.
                let res = unsafe { graph_exec::kernel_node_set_params(d, self.exec.exec, node, &p) };
                if res != Some(Ok(())) {
                    let res = res.map(rc);
                    println!("[fc] {step} K={k}: node {i} refused ({res:?}); skipped");
                    return Ok(());
                }
                self.bare_swap[i] = swap;
            }
            if it >= 2 {
                v.push(us_since(t0, Instant::now()));
            }
        }
        emit(out, step, Variant::BareOnly, k, &mut v);
        Ok(())
    }

    /// `built_launch_sync`: launch + sync of the recorded graph against a
    /// bare `cuGraphLaunch` + sync of the captured executable, alternating
    /// in blocks.
    fn launch_sync_row(&self, d: &Driver, rig: &Rig, iters: usize, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
        let k = self.fc_swap.len();
        let (g, exec) = (&self.g, self.exec.exec);
        let (mut fc, mut bare) = alternate_blocks(
            iters,
            |_| {
                let t0 = Instant::now();
                g.launch()?;
                rig.ctx.synchronize()?;
                Ok(us_since(t0, Instant::now()))
            },
            |_| {
                let t0 = Instant::now();
                // SAFETY: live executable and stream of the rig.
                ok(unsafe { graph_exec::launch(d, exec, rig.bare_stream) })?;
                // SAFETY: our stream.
                ok(unsafe { stream::synchronize(d, rig.bare_stream) })?;
                Ok(us_since(t0, Instant::now()))
            },
        )?;
        emit_alternated(out, "built_launch_sync", k, iters, &mut fc, &mut bare);
        Ok(())
    }
}

/// Recordings (built node by node: fc-graph's recording API, as engines
/// call it) against bare stream capture, each pair alternating in blocks
/// ([`alternate_blocks`]), with the rig's launch mode (PDL where the
/// built-ins use it): `build_instantiate` (record + instantiate);
/// `node_update_all` / `_one` / `_none` (re-record into the same graph with
/// every, one or no node changed, against bare re-capture with the same
/// change + `cuGraphExecUpdate` + destroying the re-captured graph; the
/// library's driver calls are checked from its update report: K, 1 and 0);
/// `set_params_floor` (K bare `cuGraphExecKernelNodeSetParams`);
/// `built_launch_sync` (the recorded graph against the bare captured one,
/// launch + sync). Then `node_update_all_plain` and
/// `set_params_floor_plain`: the same with plain launches on both sides
/// ([`plain_update_rows`]).
fn builder_rows(d: &Driver, rig: &Rig, k: usize, iters: usize, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    if !rig.ctx.begin_capture(CaptureMode::ThreadLocal)?.builds() {
        return Err(fc_graph::Error::invalid("the rig's recordings do not build (FC_RECORDING set?)"));
    }
    let (mut fc, mut bare) = capture_instantiate_samples(d, rig, k, iters)?;
    emit_alternated(out, "build_instantiate", k, iters, &mut fc, &mut bare);

    if d.cuGraphExecUpdate.is_none() {
        return Ok(());
    }
    let mut pair = UpdatePair::new(d, rig, k)?;
    let mut run = || -> Result<()> {
        for (step, change) in [
            ("node_update_all", Change::Every),
            ("node_update_one", Change::One),
            ("node_update_none", Change::Nothing),
        ] {
            pair.update_row(d, rig, step, change, iters, out)?;
        }
        pair.set_params_floor(d, rig, "set_params_floor", iters, out)?;
        pair.launch_sync_row(d, rig, iters, out)
    };
    let result = run();
    pair.destroy(d);
    result?;
    plain_update_rows(d, rig, k, iters, out)
}

/// `node_update_all_plain` and `set_params_floor_plain`: `node_update_all`
/// and `set_params_floor` with PDL off on both sides, on a graph and a bare
/// executable recorded for them with PDL off (measured also where the rig
/// is plain anyway, so that the rows are always there). The rig's launch
/// mode is restored afterwards, also on error.
fn plain_update_rows(d: &Driver, rig: &Rig, k: usize, iters: usize, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let default = rig.pdl.get();
    rig.set_pdl(false);
    let result = UpdatePair::new(d, rig, k).and_then(|mut pair| {
        let result = pair
            .update_row(d, rig, "node_update_all_plain", Change::Every, iters, out)
            .and_then(|()| pair.set_params_floor(d, rig, "set_params_floor_plain", iters, out));
        pair.destroy(d);
        result
    });
    rig.set_pdl(default);
    result
}

/// `fc-bench --rerecord-profile SECS`: where a re-recording of K = 26
/// kernels spends its time on this host. For each launch mode (PDL where
/// the device has it, then plain) and each change (every node, none), the
/// medians of `begin_capture`, the K `binary` calls and `end_update`, each
/// timed alone, beside the driver's floor (K bare
/// `cuGraphExecKernelNodeSetParams`) in the same mode; one JSON line per
/// mode and change. Then it re-records plainly, every node changed, for
/// `secs` seconds, so that a sampling profiler sees the path alone.
pub fn rerecord_profile(device: usize, n: usize, secs: f64, out: &mut dyn FnMut(String)) -> Result<()> {
    const K: usize = 26;
    const ROUNDS: usize = 4000;
    let d = fc_graph::driver()?;
    let rig = Rig::open(device, n)?;
    let modes: &[bool] = if rig.pdl.get() { &[true, false] } else { &[false] };
    for &pdl in modes {
        rig.set_pdl(pdl);
        let mut pair = UpdatePair::new(d, &rig, K)?;
        let mut floor = None;
        pair.set_params_floor(d, &rig, "set_params_floor", ROUNDS, &mut |o| {
            if let StepOutput::Row(r) = o {
                floor = Some(r.summary.median);
            }
        })?;
        for change in [Change::Every, Change::Nothing] {
            let (mut begin, mut ops, mut end, mut total) = (vec![], vec![], vec![], vec![]);
            for _ in 0..ROUNDS + 20 {
                change.apply(&mut pair.fc_swap);
                let t0 = Instant::now();
                let cap = rig.ctx.begin_capture(CaptureMode::ThreadLocal)?;
                let t1 = Instant::now();
                for i in 0..K {
                    let (op, a, b, o) = chain_node(&rig, i, pair.fc_swap[i]);
                    rig.ctx.binary(op, a, b, o, rig.n)?;
                }
                let t2 = Instant::now();
                let report = cap.end_update(&mut pair.g)?;
                let t3 = Instant::now();
                if report.node_calls != change.node_calls(K) || report.instantiated != 0 {
                    return Err(fc_graph::Error::invalid(format!("rerecord profile: {report:?}")));
                }
                begin.push(us_since(t0, t1));
                ops.push(us_since(t1, t2));
                end.push(us_since(t2, t3));
                total.push(us_since(t0, t3));
            }
            let med = |v: &mut Vec<f64>| {
                let v = &mut v[20..];
                v.sort_by(f64::total_cmp);
                round(crate::stats::percentile(v, 0.5), 3)
            };
            let change_name = if change == Change::Every { "every" } else { "none" };
            out(json!({
                "row": "rerecord_phases",
                "impl": IMPL,
                "k": K,
                "pdl": pdl,
                "change": change_name,
                "rounds": ROUNDS,
                "begin_us": med(&mut begin),
                "ops_us": med(&mut ops),
                "end_us": med(&mut end),
                "total_us": med(&mut total),
                "set_params_floor_us": floor.map(|f| round(f, 3)),
            })
            .to_string());
        }
        pair.destroy(d);
    }
    rig.set_pdl(false);
    let mut pair = UpdatePair::new(d, &rig, K)?;
    let t0 = Instant::now();
    let mut rounds = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        Change::Every.apply(&mut pair.fc_swap);
        let swap = &pair.fc_swap;
        fc_rerecord(&rig, &mut pair.g, K, |i| swap[i])?;
        rounds += 1;
    }
    let us = us_since(t0, Instant::now()) / rounds.max(1) as f64;
    out(json!({"row": "rerecord_loop", "impl": IMPL, "k": K, "rounds": rounds, "us_per_round": round(us, 3)})
        .to_string());
    pair.destroy(d);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Runs [`alternate_blocks`] with closures that log each round as
    /// (side, the side's round number) and return the round's position in
    /// the log: (the log, the positions of the timed fc and bare rounds).
    fn trace(iters: usize) -> (Vec<(usize, usize)>, Vec<usize>, Vec<usize>) {
        let log = RefCell::new(Vec::new());
        let round = |side: usize, r: usize| {
            let mut l = log.borrow_mut();
            l.push((side, r));
            Ok((l.len() - 1) as f64)
        };
        let (fc, bare) = alternate_blocks(iters, |r| round(0, r), |r| round(1, r)).expect("no round fails");
        let pos = |v: Vec<f64>| v.into_iter().map(|p| p as usize).collect();
        (log.into_inner(), pos(fc), pos(bare))
    }

    #[test]
    fn paired_ratio_cancels_a_speed_switch_inside_a_row() {
        // The host doubles its speed halfway through a row of 40 rounds a
        // side: fc takes 10 µs slow / 5 fast, bare 15 / 7.5, so fc / bare is
        // 2/3 in either state. The ABBA order puts more fc than bare rounds
        // into the slow half here, so the medians' ratio is off; the paired
        // ratio is exact.
        let iters = 40;
        let slow_until = 45; // rounds of the whole run, both sides
        let clock = std::cell::Cell::new(0usize);
        let tick = |slow: f64| {
            let t = clock.get();
            clock.set(t + 1);
            Ok(if t < slow_until { slow } else { slow / 2.0 })
        };
        let (fc, bare) = alternate_blocks(iters, |_| tick(10.0), |_| tick(15.0)).expect("no round fails");
        let p = paired_ratio(&fc, &bare, block_rounds(iters)).expect("paired");
        assert_eq!(p.blocks, 5);
        assert!((p.ratio - 2.0 / 3.0).abs() < 1e-12, "{p:?}");
        let (mut f, mut b) = (fc.clone(), bare.clone());
        let medians = Summary::of(&mut f).median / Summary::of(&mut b).median;
        assert!((medians - 2.0 / 3.0).abs() > 0.1, "the medians' ratio is thrown off: {medians}");
    }

    #[test]
    fn paired_ratio_takes_the_median_of_block_ratios() {
        // Blocks of 2: ratios 1.0, 0.5, 4.0 (one outlier block) -> 1.0.
        let fc = [2.0, 2.0, 1.0, 1.0, 8.0, 8.0];
        let bare = [2.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        assert_eq!(paired_ratio(&fc, &bare, 2), Some(Paired { ratio: 1.0, blocks: 3 }));
        // A shorter last block pairs with the other side's shorter one.
        assert_eq!(paired_ratio(&[1.0, 1.0, 3.0], &[2.0, 2.0, 3.0], 2), Some(Paired { ratio: 0.75, blocks: 2 }));
        // Nothing to pair, unequal block counts, a bare median of 0.
        assert_eq!(paired_ratio(&[], &[], 2), None);
        assert_eq!(paired_ratio(&[1.0, 1.0, 1.0], &[1.0], 2), None);
        assert_eq!(paired_ratio(&[1.0], &[0.0], 1), None);
    }

    #[test]
    fn the_fc_row_of_a_pair_carries_its_paired_ratio() {
        let mut rows = Vec::new();
        let (mut fc, mut bare) = (vec![1.0, 1.0, 3.0, 3.0], vec![2.0, 2.0, 6.0, 6.0]);
        emit_alternated(
            &mut |o| {
                if let StepOutput::Row(r) = o {
                    rows.push(r)
                }
            },
            "build_instantiate",
            26,
            8,
            &mut fc,
            &mut bare,
        );
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].paired, Some(Paired { ratio: 0.5, blocks: 2 }));
        assert_eq!(rows[1].paired, None);
        let v: serde_json::Value = serde_json::from_str(&rows[0].json()).expect("JSON");
        assert_eq!((v["paired_fc_over_bare"].as_f64(), v["paired_blocks"].as_u64()), (Some(0.5), Some(2)));
        assert!(serde_json::from_str::<serde_json::Value>(&rows[1].json()).expect("JSON")["paired_blocks"].is_null());
    }

    #[test]
    fn each_side_gets_iters_timed_rounds_in_order() {
        for iters in 1..=130 {
            let (log, fc, bare) = trace(iters);
            assert_eq!((fc.len(), bare.len()), (iters, iters), "iters {iters}");
            for (side, timed) in [(0, &fc), (1, &bare)] {
                assert!(timed.windows(2).all(|w| w[0] < w[1]), "iters {iters}: in round order");
                assert!(timed.iter().all(|&p| log[p].0 == side), "iters {iters}: each side's own rounds");
                // Each side's round numbers count from 0, warm-ups included.
                let numbers: Vec<usize> = log.iter().filter(|e| e.0 == side).map(|e| e.1).collect();
                assert_eq!(numbers, (0..numbers.len()).collect::<Vec<_>>(), "iters {iters}");
            }
        }
    }

    #[test]
    fn no_timed_round_follows_the_other_sides_round() {
        for iters in 1..=130 {
            let (log, fc, bare) = trace(iters);
            for &p in fc.iter().chain(&bare) {
                assert!(p > 0 && log[p - 1].0 == log[p].0, "iters {iters}: timed round {p} follows {:?}", log[p - 1]);
            }
            // Each side's first two rounds warm up.
            for side in 0..2 {
                let first: Vec<usize> = (0..log.len()).filter(|&p| log[p].0 == side).take(2).collect();
                assert!(first.iter().all(|p| !fc.contains(p) && !bare.contains(p)), "iters {iters}");
            }
        }
    }

    #[test]
    fn blocks_of_eight_in_abba_order() {
        let (log, fc, _) = trace(100);
        // The sides' runs: fc (2 warm-ups + 8), bare (2 + 8), bare again
        // (8, no warm-up), fc (1 + 8), fc (8), ...
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &(side, _) in &log {
            match runs.last_mut() {
                Some((s, n)) if *s == side => *n += 1,
                _ => runs.push((side, 1)),
            }
        }
        assert_eq!(&runs[..4], &[(0, 10), (1, 18), (0, 17), (1, 17)]);
        assert!(runs.windows(2).all(|w| w[0].0 != w[1].0));
        // 100 = 12 blocks of 8 + 4: 2 warm-ups at the start, then one per switch.
        let switches = runs.len() - 1;
        assert_eq!(log.len(), 200 + 2 * 2 + (switches - 1));
        assert_eq!(fc[..8], (2..10).collect::<Vec<_>>()[..]);
        // Small counts: blocks of iters / 4.
        let (log, _, _) = trace(20);
        assert_eq!(log.iter().take_while(|e| e.0 == 0).count(), 2 + 5);
    }

    #[test]
    fn drift_weighs_on_both_sides_alike() {
        // ABBA: the timed rounds' mean positions in the run are close.
        for iters in [20, 50, 100] {
            let (log, fc, bare) = trace(iters);
            let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
            let gap = (mean(&fc) - mean(&bare)).abs() / log.len() as f64;
            assert!(gap < 0.05, "iters {iters}: mean positions {} vs {}", mean(&fc), mean(&bare));
        }
    }

    #[test]
    fn a_failing_round_stops_the_loop() {
        let mut calls = 0;
        let r = alternate_blocks(
            40,
            |round| if round == 3 { Err(fc_graph::Error::invalid("round 3")) } else { Ok(1.0) },
            |_| {
                calls += 1;
                Ok(1.0)
            },
        );
        assert!(r.is_err());
        assert_eq!(calls, 0, "fc's first block (2 warm-ups + 8) fails before bare runs");
    }

    #[test]
    fn each_change_flips_what_its_row_says() {
        for k in [1, 2, 26, 2600] {
            for (change, want) in [(Change::Every, k), (Change::One, 1), (Change::Nothing, 0)] {
                assert_eq!(change.node_calls(k), want);
                // Whatever an earlier row left behind (a mixed state).
                let mut swap: Vec<bool> = (0..k).map(|i| i % 3 == 0).collect();
                for _ in 0..4 {
                    let before = swap.clone();
                    change.apply(&mut swap);
                    let changed: Vec<usize> = (0..k).filter(|&i| before[i] != swap[i]).collect();
                    assert_eq!(changed.len(), want, "{change:?} K={k}");
                    if change == Change::One {
                        assert_eq!(changed, [k / 2]);
                    }
                }
            }
        }
    }
}
