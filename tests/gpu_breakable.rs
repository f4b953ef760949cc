//! Breakable graph suite: the intent of the reference PyTorch suite
//! (`test_breakable_cuda_graph.py`) on fc-graph's primitives.
//!
//! How the reference maps here:
//! - a "Linear" `x @ w` is the element-wise `x * w` of the built-in `mul`
//!   (weights broadcast per row where rows matter), so replay and eager
//!   agree exactly: every element is the same chain of single IEEE ops;
//! - the eager "break" op is the `relu_f32` user kernel launched inside a
//!   break closure;
//! - `break_here` outside a capture is [`break_here`] below (runs the
//!   closure directly) and, in the C API, `fc_graph_break_ctx`;
//! - the ambient forward context is the live value `L` of `Graph<L>`.
//!
//! Semantics the tests rely on: nothing executes while the stream records;
//! a break's closure runs once at capture time (eagerly) and again at every
//! replay with the live value given to `replay`; buffers allocated while
//! the context records come from its capture pool and keep their address.

use std::ffi::{CStr, CString};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use fc_graph::buckets::{padded_tail_range, real_rows, BucketError, BucketedRunner};
use fc_graph::cache::{CacheConfig, GraphCache, Outcome};
use fc_graph::ptx_params::ParamKind;
use fc_graph::{
    Capture, CaptureMode, Context, DeviceBuffer, Error, Graph, Kernel, KernelArg, LaunchConfig, Module, Origin,
};
use fc_graph_tests::{download, ensure, fail, run_gpu_tests, upload, GpuTest, Rng, TEST_PTX};
use fcgraph::{self as capi, fc_buffer, fc_cuda_ctx, fc_kernel, fc_module};
use libtest_mimic::Failed;

type TestResult = Result<(), Failed>;

/// Written into outputs before a run, to show what a run did not touch.
const SENTINEL: f32 = -12345.5;
const MIB: usize = 1 << 20;

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

/// A context on device 0 with the test kernels loaded and everything
/// warmed up (the reference warms up before capturing).
struct Rig {
    ctx: Context,
    relu: Kernel,
    scale: Kernel,
    rng: Rng,
}

fn rig(seed: u64) -> Result<Rig, Failed> {
    let ctx = Context::new(0)?;
    let module = Module::from_ptx(&ctx, TEST_PTX)?;
    let relu = module.kernel("relu_f32")?;
    let scale = module.kernel("scale_f32")?;
    // Warm-up: loads the built-in module and runs each kernel once.
    let x = upload(&ctx, &[1.0; 256])?;
    let out = ctx.alloc(256 * 4)?;
    ctx.add(&x, &x, &out, 256)?;
    ctx.mul(&x, &x, &out, 256)?;
    launch_relu(&relu, &ctx, &x, &out, 256)?;
    launch_scale(&scale, &ctx, &x, 2.0, &out, 256)?;
    ctx.synchronize()?;
    Ok(Rig { ctx, relu, scale, rng: Rng::new(seed) })
}

fn cfg(n: usize) -> LaunchConfig {
    LaunchConfig::for_elements(n as u32, 256)
}

/// `out[i] = max(x[i], 0)` for `i < n`, on `ctx`'s stream.
fn launch_relu(k: &Kernel, ctx: &Context, x: &DeviceBuffer, out: &DeviceBuffer, n: usize) -> fc_graph::Result<()> {
    k.launch_on(ctx, cfg(n), &[KernelArg::Buffer(x), KernelArg::Buffer(out), KernelArg::U32(n as u32)])
}

/// `out[i] = x[i] * s` for `i < n`, on `ctx`'s stream.
fn launch_scale(
    k: &Kernel,
    ctx: &Context,
    x: &DeviceBuffer,
    s: f32,
    out: &DeviceBuffer,
    n: usize,
) -> fc_graph::Result<()> {
    k.launch_on(
        ctx,
        cfg(n),
        &[KernelArg::Buffer(x), KernelArg::F32(s), KernelArg::Buffer(out), KernelArg::U32(n as u32)],
    )
}

fn alloc_f32(ctx: &Context, n: usize) -> fc_graph::Result<Arc<DeviceBuffer>> {
    Ok(Arc::new(ctx.alloc(n * 4)?))
}

/// The CPU relu the kernel computes (`max(v, 0)`; the sign of a zero may
/// differ, which [`assert_same`] ignores).
fn relu(v: f32) -> f32 {
    if v > 0.0 {
        v
    } else {
        0.0
    }
}

/// `row` repeated `rows` times: a per-row (broadcast) weight.
fn row_broadcast(row: &[f32], rows: usize) -> Vec<f32> {
    (0..rows).flat_map(|_| row.iter().copied()).collect()
}

/// CPU reference of [`chain_forward`]: `x * ws[0]`, then per layer
/// `relu`, `* ws[i + 1]` (each weight's first `x.len()` elements).
fn cpu_chain(x: &[f32], ws: &[Vec<f32>]) -> Vec<f32> {
    let mut h: Vec<f32> = x.iter().zip(&ws[0]).map(|(a, b)| a * b).collect();
    for w in &ws[1..] {
        h = h.iter().zip(w).map(|(a, b)| relu(*a) * b).collect();
    }
    h
}

/// Exact element-wise equality (`==`: one IEEE op per step on both sides;
/// `+0 == -0`, NaN never equal). Reports how many differ and the first.
fn assert_same(what: &str, got: &[f32], want: &[f32]) -> TestResult {
    ensure!(got.len() == want.len(), "{what}: length {} vs {}", got.len(), want.len());
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    if let Some(&i) = bad.first() {
        return Err(Failed::from(format!(
            "{what}: {} of {} elements differ; first at {i}: got {} ({:#010x}) want {} ({:#010x})",
            bad.len(),
            got.len(),
            got[i],
            got[i].to_bits(),
            want[i],
            want[i].to_bits()
        )));
    }
    Ok(())
}

fn expect_err<T>(what: &str, r: fc_graph::Result<T>, ok: fn(&Error) -> bool, want: &str) -> TestResult {
    match r {
        Ok(_) => Err(Failed::from(format!("{what}: succeeded, expected {want}"))),
        Err(e) if ok(&e) => Ok(()),
        Err(e) => Err(Failed::from(format!("{what}: expected {want}, got {e:?}"))),
    }
}

/// A break closure running `relu(src) -> dst` over `n` floats.
fn relu_break(
    relu: &Kernel,
    src: &Arc<DeviceBuffer>,
    dst: &Arc<DeviceBuffer>,
    n: usize,
) -> impl Fn(&Context, &()) -> fc_graph::Result<()> + Send + Sync + 'static {
    let (k, src, dst) = (relu.clone(), src.clone(), dst.clone());
    move |ctx: &Context, _: &()| launch_relu(&k, ctx, &src, &dst, n)
}

/// A forward's output and every buffer its graph (or eager work) uses.
struct Chain {
    out: Arc<DeviceBuffer>,
    keep: Vec<Arc<DeviceBuffer>>,
}

/// `h = x * ws[0]`; for each further weight: `dst = relu(h)` as a break,
/// `h = dst * w`. `ws.len() - 1` breaks. Captured when `cap` is given
/// (buffers then come from the pool), eager otherwise.
fn chain_forward(
    cap: Option<&mut Capture<()>>,
    ctx: &Context,
    relu: &Kernel,
    x: &DeviceBuffer,
    ws: &[DeviceBuffer],
    n: usize,
) -> fc_graph::Result<Chain> {
    let mut cap = cap;
    let mut keep = Vec::new();
    let mut h = alloc_f32(ctx, n)?;
    ctx.mul(x, &ws[0], &h, n)?;
    for w in &ws[1..] {
        let dst = alloc_f32(ctx, n)?;
        fc_graph::break_here(cap.as_deref_mut(), ctx, &(), relu_break(relu, &h, &dst, n))?;
        let next = alloc_f32(ctx, n)?;
        ctx.mul(&dst, w, &next, n)?;
        keep.push(h);
        keep.push(dst);
        h = next;
    }
    Ok(Chain { out: h, keep })
}

/// A captured [`chain_forward`] and the buffers its graph uses.
struct CapturedChain {
    graph: Graph<()>,
    chain: Chain,
}

/// Warms up eagerly, then captures [`chain_forward`].
fn capture_chain(
    ctx: &Context,
    relu: &Kernel,
    x: &DeviceBuffer,
    ws: &[DeviceBuffer],
    n: usize,
) -> fc_graph::Result<CapturedChain> {
    let warm = chain_forward(None, ctx, relu, x, ws, n)?;
    ctx.synchronize()?;
    drop(warm);
    let mut cap = ctx.begin_breakable::<()>(CaptureMode::ThreadLocal)?;
    let chain = chain_forward(Some(&mut cap), ctx, relu, x, ws, n)?;
    let graph = cap.end()?;
    Ok(CapturedChain { graph, chain })
}

/// Random weights on the host and the device.
fn weights(
    ctx: &Context,
    rng: &mut Rng,
    count: usize,
    n: usize,
    lo: f32,
    hi: f32,
) -> Result<(Vec<Vec<f32>>, Vec<DeviceBuffer>), Failed> {
    let host: Vec<Vec<f32>> = (0..count).map(|_| (0..n).map(|_| rng.f32_in(lo, hi)).collect()).collect();
    let dev = host.iter().map(|w| upload(ctx, w)).collect::<fc_graph::Result<Vec<_>>>()?;
    Ok((host, dev))
}

/// Zeroes rows `num_real..rows` of each buffer (`row_floats` floats a row)
/// on its context's stream; `None` entries are skipped, unpadded buffers
/// untouched (the reference's `scrub_padding_tail`).
fn scrub_padding_tail(num_real: usize, bufs: &[Option<(&DeviceBuffer, usize, usize)>]) -> fc_graph::Result<()> {
    for (buf, rows, row_floats) in bufs.iter().flatten() {
        if let Some(tail) = padded_tail_range(*rows, num_real) {
            let row_bytes = row_floats * 4;
            buf.fill_bytes(tail.start * row_bytes, tail.len() * row_bytes, 0)?;
        }
    }
    Ok(())
}

fn pool_block(b: &DeviceBuffer) -> Option<u64> {
    match b.origin() {
        Origin::Pool { block } => Some(block),
        Origin::Driver | Origin::Borrowed => None,
    }
}

/// Error type of the bucketed runner's closures.
#[derive(Debug)]
struct TestError(String);

impl std::fmt::Display for TestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl From<BucketError> for TestError {
    fn from(e: BucketError) -> Self {
        TestError(format!("bucket: {e}"))
    }
}
impl From<Error> for TestError {
    fn from(e: Error) -> Self {
        TestError(format!("fc-graph: {e}"))
    }
}

// ---------------------------------------------------------------------------
// C API helpers (RAII handles; the break functions are `extern "C"`)
// ---------------------------------------------------------------------------

mod c {
    use super::*;

    pub fn last_error() -> String {
        // SAFETY: fc_last_error returns a valid NUL-terminated string.
        unsafe { CStr::from_ptr(capi::fc_last_error()) }.to_string_lossy().into_owned()
    }

    pub fn check(rc: c_int, what: &str) -> TestResult {
        if rc == 0 {
            Ok(())
        } else {
            Err(Failed::from(format!("{what}: status {rc}: {}", last_error())))
        }
    }

    pub struct Ctx(pub *mut fc_cuda_ctx);

    impl Ctx {
        pub fn new(device: c_int) -> Result<Ctx, Failed> {
            let p = capi::fc_cuda_init_device(device);
            ensure!(!p.is_null(), "fc_cuda_init_device({device}): {}", last_error());
            Ok(Ctx(p))
        }
        pub fn sync(&self) -> TestResult {
            check(capi::fc_sync_ctx(self.0), "fc_sync_ctx")
        }
        pub fn is_capturing(&self) -> c_int {
            capi::fc_graph_is_capturing_ctx(self.0)
        }
    }

    impl Drop for Ctx {
        fn drop(&mut self) {
            capi::fc_cuda_ctx_free(self.0)
        }
    }

    pub struct Buf(pub *mut fc_buffer);

    impl Buf {
        pub fn alloc(ctx: &Ctx, floats: usize) -> Result<Buf, Failed> {
            let p = capi::fc_buffer_alloc_ctx(ctx.0, floats * 4);
            ensure!(!p.is_null(), "fc_buffer_alloc_ctx({} bytes): {}", floats * 4, last_error());
            Ok(Buf(p))
        }
        pub fn with(ctx: &Ctx, data: &[f32]) -> Result<Buf, Failed> {
            let b = Buf::alloc(ctx, data.len())?;
            b.upload(data)?;
            Ok(b)
        }
        pub fn upload(&self, data: &[f32]) -> TestResult {
            // SAFETY: live buffer; `data` holds the bytes given.
            let rc = unsafe { capi::fc_buffer_upload(self.0, data.as_ptr().cast(), data.len() * 4) };
            check(rc, "fc_buffer_upload")
        }
        pub fn download(&self, n: usize) -> Result<Vec<f32>, Failed> {
            let mut v = vec![f32::NAN; n];
            // SAFETY: live buffer; `v` has room for the bytes asked.
            let rc = unsafe { capi::fc_buffer_download(self.0, v.as_mut_ptr().cast(), n * 4) };
            check(rc, "fc_buffer_download")?;
            Ok(v)
        }
        pub fn ptr(&self) -> u64 {
            capi::fc_buffer_device_ptr(self.0)
        }
    }

    impl Drop for Buf {
        fn drop(&mut self) {
            capi::fc_buffer_free(self.0)
        }
    }

    /// One kernel of TEST_PTX loaded through the C API.
    pub struct Kern {
        pub module: *mut fc_module,
        pub kernel: *mut fc_kernel,
    }

    impl Kern {
        pub fn load(ctx: &Ctx, name: &str) -> Result<Kern, Failed> {
            let ptx = CString::new(TEST_PTX).map_err(fail)?;
            // SAFETY: live context, NUL-terminated PTX.
            let module = unsafe { capi::fc_module_load_ptx(ctx.0, ptx.as_ptr()) };
            ensure!(!module.is_null(), "fc_module_load_ptx: {}", last_error());
            let cname = CString::new(name).map_err(fail)?;
            // SAFETY: live module, NUL-terminated name.
            let kernel = unsafe { capi::fc_module_get_kernel(module, cname.as_ptr()) };
            let k = Kern { module, kernel };
            ensure!(!kernel.is_null(), "fc_module_get_kernel({name}): {}", last_error());
            Ok(k)
        }
    }

    impl Drop for Kern {
        fn drop(&mut self) {
            capi::fc_kernel_free(self.kernel);
            capi::fc_module_free(self.module);
        }
    }

    pub struct CGraph(pub *mut capi::fc_graph);

    impl Drop for CGraph {
        fn drop(&mut self) {
            capi::fc_graph_free(self.0)
        }
    }

    /// Launches `kernel` over `n` threads (blocks of 256) with `args`.
    ///
    /// # Safety
    /// Live handles; `args` point at values of the parameters' sizes.
    pub unsafe fn launch(ctx: *mut fc_cuda_ctx, kernel: *const fc_kernel, n: u32, args: &mut [*mut c_void]) -> c_int {
        // SAFETY: per this function's contract.
        unsafe {
            capi::fc_kernel_launch_ctx(
                ctx,
                kernel,
                n.div_ceil(256).max(1),
                1,
                1,
                256,
                1,
                1,
                0,
                args.as_mut_ptr(),
                args.len(),
            )
        }
    }
}

/// What a C relu break does: `relu(src) -> dst` over `n` floats, logging
/// each call (whether the context reported capturing, and the live pointer).
struct ReluCall {
    kernel: *const fc_kernel,
    src: u64,
    dst: u64,
    n: u32,
    calls: AtomicUsize,
    capturing_seen: Mutex<Vec<c_int>>,
    live_seen: Mutex<Vec<usize>>,
}

impl ReluCall {
    fn new(kernel: *const fc_kernel, src: u64, dst: u64, n: usize) -> ReluCall {
        ReluCall {
            kernel,
            src,
            dst,
            n: n as u32,
            calls: AtomicUsize::new(0),
            capturing_seen: Mutex::new(Vec::new()),
            live_seen: Mutex::new(Vec::new()),
        }
    }
    fn user(&self) -> *mut c_void {
        self as *const ReluCall as *mut c_void
    }
}

/// `fc_break_fn` running a [`ReluCall`] (`user`). Never panics.
unsafe extern "C" fn relu_break_fn(ctx: *mut fc_cuda_ctx, live: *mut c_void, user: *mut c_void) -> c_int {
    // SAFETY: `user` is a live ReluCall (the tests keep it alive).
    let call = unsafe { &*(user as *const ReluCall) };
    call.calls.fetch_add(1, Ordering::SeqCst);
    let capturing = capi::fc_graph_is_capturing_ctx(ctx);
    if let Ok(mut v) = call.capturing_seen.lock() {
        v.push(capturing);
    }
    if let Ok(mut v) = call.live_seen.lock() {
        v.push(live as usize);
    }
    let (mut x, mut out, mut n) = (call.src, call.dst, call.n);
    let mut args: [*mut c_void; 3] =
        [(&mut x as *mut u64).cast(), (&mut out as *mut u64).cast(), (&mut n as *mut u32).cast()];
    // SAFETY: relu_f32 takes (u64, u64, u32); each slot points at such a value.
    unsafe { c::launch(ctx, call.kernel, call.n, &mut args) }
}

/// A decorated "method" for the C passthrough test: `out = x * scale`
/// over `n` floats (n may be 0), logging `n` per call.
struct ScaleCall {
    kernel: *const fc_kernel,
    x: u64,
    out: u64,
    n: u32,
    scale: f32,
    calls: Arc<Mutex<Vec<u32>>>,
}

unsafe extern "C" fn scale_break_fn(ctx: *mut fc_cuda_ctx, _live: *mut c_void, user: *mut c_void) -> c_int {
    // SAFETY: `user` is a live ScaleCall.
    let call = unsafe { &*(user as *const ScaleCall) };
    if let Ok(mut v) = call.calls.lock() {
        v.push(call.n);
    }
    let (mut x, mut s, mut out, mut n) = (call.x, call.scale, call.out, call.n);
    let mut args: [*mut c_void; 4] = [
        (&mut x as *mut u64).cast(),
        (&mut s as *mut f32).cast(),
        (&mut out as *mut u64).cast(),
        (&mut n as *mut u32).cast(),
    ];
    // SAFETY: scale_f32 takes (u64, f32, u64, u32); each slot points at such a value.
    unsafe { c::launch(ctx, call.kernel, call.n, &mut args) }
}

/// The outer break of the nested-break test: runs the inner relu break
/// through `fc_graph_break_ctx` (it must pass straight through), then
/// `out = dst * w1`.
struct OuterCall {
    inner: *const ReluCall,
    dst: *mut fc_buffer,
    w1: *mut fc_buffer,
    out: *mut fc_buffer,
    n: usize,
    calls: AtomicUsize,
    capturing_seen: Mutex<Vec<c_int>>,
    inner_rc: Mutex<Vec<c_int>>,
}

unsafe extern "C" fn outer_break_fn(ctx: *mut fc_cuda_ctx, _live: *mut c_void, user: *mut c_void) -> c_int {
    // SAFETY: `user` is a live OuterCall.
    let call = unsafe { &*(user as *const OuterCall) };
    call.calls.fetch_add(1, Ordering::SeqCst);
    let capturing = capi::fc_graph_is_capturing_ctx(ctx);
    if let Ok(mut v) = call.capturing_seen.lock() {
        v.push(capturing);
    }
    let rc = capi::fc_graph_break_ctx(ctx, Some(relu_break_fn), call.inner as *mut c_void);
    if let Ok(mut v) = call.inner_rc.lock() {
        v.push(rc);
    }
    if rc != 0 {
        return rc;
    }
    capi::fc_mul_ctx(ctx, call.dst, call.w1, call.out, call.n)
}

// ---------------------------------------------------------------------------
// TestBreakableCudaGraph
// ---------------------------------------------------------------------------

/// break_here outside a capture runs the function directly: through the C
/// API (`fc_graph_break_ctx` with no capture open) and through the Rust
/// equivalent ([`break_here`] without a capture).
fn break_here_passthrough_when_inactive() -> TestResult {
    let (n, d) = (8, 16);
    let mut rng = Rng::new(10);
    let hv = rng.floats(n * d);
    let want: Vec<f32> = hv.iter().map(|&v| relu(v)).collect();

    // C API.
    let ctx = c::Ctx::new(0)?;
    ensure!(ctx.is_capturing() == 0, "fresh C context reports capturing");
    let k = c::Kern::load(&ctx, "relu_f32")?;
    let h = c::Buf::with(&ctx, &hv)?;
    let dst = c::Buf::with(&ctx, &vec![SENTINEL; n * d])?;
    let call = ReluCall::new(k.kernel, h.ptr(), dst.ptr(), n * d);
    let rc = capi::fc_graph_break_ctx(ctx.0, Some(relu_break_fn), call.user());
    c::check(rc, "fc_graph_break_ctx outside a capture")?;
    ensure!(
        call.calls.load(Ordering::SeqCst) == 1,
        "break ran {} times, want 1 (direct call)",
        call.calls.load(Ordering::SeqCst)
    );
    ensure!(
        *call.capturing_seen.lock().map_err(fail)? == vec![0],
        "break saw capturing: {:?}",
        call.capturing_seen.lock().map_err(fail)?
    );
    ensure!(*call.live_seen.lock().map_err(fail)? == vec![0], "pass-through live pointer should be NULL");
    ctx.sync()?;
    assert_same("C pass-through relu output (dst)", &dst.download(n * d)?, &want)?;

    // Rust: no capture, the closure runs at once on the context's stream.
    let Rig { ctx, relu: relu_k, .. } = rig(10)?;
    ensure!(!ctx.capture_open() && !ctx.is_capturing(), "fresh context reports a capture");
    let h = Arc::new(upload(&ctx, &hv)?);
    let dst = Arc::new(upload(&ctx, &vec![SENTINEL; n * d])?);
    fc_graph::break_here::<(), _>(None, &ctx, &(), relu_break(&relu_k, &h, &dst, n * d))?;
    ctx.synchronize()?;
    assert_same("Rust pass-through relu output", &download(&dst, n * d)?, &want)
}

/// The reference's `_build_capture`: Linear -> relu break -> Linear on
/// an 8 x 16 static input. Returns the rig pieces, weights and graph.
struct Reference {
    rig: Rig,
    x_static: DeviceBuffer,
    ws_host: Vec<Vec<f32>>,
    _ws: Vec<DeviceBuffer>,
    cap: CapturedChain,
    pieces_before_end: usize,
    n: usize,
}

fn build_reference(seed: u64) -> Result<Reference, Failed> {
    let mut rig = rig(seed)?;
    let n = 8 * 16;
    let x_static = upload(&rig.ctx, &vec![0.0; n])?;
    let (ws_host, ws) = weights(&rig.ctx, &mut rig.rng, 2, n, -4.0, 4.0)?;
    for _ in 0..3 {
        let warm = chain_forward(None, &rig.ctx, &rig.relu, &x_static, &ws, n)?;
        rig.ctx.synchronize()?;
        drop(warm);
    }
    let mut capture = rig.ctx.begin_breakable::<()>(CaptureMode::ThreadLocal)?;
    ensure!(rig.ctx.is_capturing(), "context not capturing after begin");
    let chain = chain_forward(Some(&mut capture), &rig.ctx, &rig.relu, &x_static, &ws, n)?;
    let pieces_before_end = capture.pieces_so_far();
    let graph = capture.end()?;
    ensure!(!rig.ctx.capture_open(), "capture still open after end");
    Ok(Reference { rig, x_static, ws_host, _ws: ws, cap: CapturedChain { graph, chain }, pieces_before_end, n })
}

/// One break splits the capture: 2 segments + 1 break = 3 pieces; the
/// buffers allocated while recording come from the capture pool.
fn segments_split_at_break() -> TestResult {
    let r = build_reference(0)?;
    let g = &r.cap.graph;
    ensure!(r.pieces_before_end == 2, "pieces before end: {} (want segment + break = 2)", r.pieces_before_end);
    ensure!(g.segment_count() == 3, "segment_count {} (want 3: 2 segments + 1 break)", g.segment_count());
    ensure!(g.break_count() == 1, "break_count {} (want 1)", g.break_count());
    ensure!(pool_block(&r.cap.chain.out).is_some(), "captured output not from the pool: {:?}", r.cap.chain.out);
    for b in &r.cap.chain.keep {
        ensure!(pool_block(b).is_some(), "captured intermediate not from the pool: {b:?}");
    }
    ensure!(pool_block(&r.x_static).is_none(), "the static input (allocated eagerly) came from the pool");
    Ok(())
}

/// Replay == eager over 5 trials with fresh random inputs copied into the
/// static input buffer.
fn replay_matches_eager() -> TestResult {
    let mut r = build_reference(0)?;
    let out_addr = r.cap.chain.out.as_raw();
    for trial in 0..5 {
        let new_x = r.rig.rng.floats(r.n);
        r.x_static.upload(&new_x)?;
        r.cap.graph.replay(&())?;
        r.rig.ctx.synchronize()?;
        let got = download(&r.cap.chain.out, r.n)?;
        assert_same(&format!("trial {trial}"), &got, &cpu_chain(&new_x, &r.ws_host))?;
        ensure!(r.cap.chain.out.as_raw() == out_addr, "output moved");
    }
    Ok(())
}

/// Depth-6 chain of relu breaks: 7 segments + 6 breaks = 13 pieces;
/// replay == eager (CPU) for 4 trials.
fn multiple_breaks_chain() -> TestResult {
    let Rig { ctx, relu, mut rng, .. } = rig(3)?;
    let (n, depth) = (8 * 16, 6);
    let x_static = upload(&ctx, &vec![0.0; n])?;
    let (ws_host, ws) = weights(&ctx, &mut rng, depth + 1, n, -2.0, 2.0)?;
    let cap = capture_chain(&ctx, &relu, &x_static, &ws, n)?;
    ensure!(cap.graph.segment_count() == 2 * depth + 1, "segment_count {} (want 13)", cap.graph.segment_count());
    ensure!(cap.graph.break_count() == depth, "break_count {} (want {depth})", cap.graph.break_count());
    for trial in 0..4 {
        let new_x = rng.floats(n);
        x_static.upload(&new_x)?;
        cap.graph.replay(&())?;
        ctx.synchronize()?;
        assert_same(&format!("trial {trial}"), &download(&cap.chain.out, n)?, &cpu_chain(&new_x, &ws_host))?;
    }
    Ok(())
}

/// Issue requirement: a 6-break chain (13 pieces) replays equal to eager
/// on fresh random inputs, eager computed twice: on the GPU by the same
/// forward run without a capture on separate buffers, and on the CPU.
fn six_break_chain_replay_equals_eager_fresh_inputs() -> TestResult {
    let Rig { ctx, relu, mut rng, .. } = rig(6)?;
    let (n, depth) = (256 * 64, 6);
    let x_static = upload(&ctx, &vec![0.0; n])?;
    let (ws_host, ws) = weights(&ctx, &mut rng, depth + 1, n, -2.0, 2.0)?;
    let cap = capture_chain(&ctx, &relu, &x_static, &ws, n)?;
    ensure!(cap.graph.segment_count() == 13, "segment_count {} (want 13)", cap.graph.segment_count());
    for trial in 0..8 {
        let new_x = rng.floats(n);
        x_static.upload(&new_x)?;
        cap.graph.replay(&())?;
        ctx.synchronize()?;
        let replayed = download(&cap.chain.out, n)?;
        let eager = chain_forward(None, &ctx, &relu, &x_static, &ws, n)?;
        ctx.synchronize()?;
        let eager_gpu = download(&eager.out, n)?;
        drop(eager);
        assert_same(&format!("trial {trial}: replay vs GPU eager"), &replayed, &eager_gpu)?;
        assert_same(&format!("trial {trial}: replay vs CPU eager"), &replayed, &cpu_chain(&new_x, &ws_host))?;
    }
    Ok(())
}

/// A second capture on a capturing context is refused with CaptureState
/// (Rust and C API); the first capture is unaffected and still works.
fn nested_capture_rejected() -> TestResult {
    let Rig { ctx, mut rng, .. } = rig(4)?;
    let n = 128;
    let av = rng.floats(n);
    let bv = rng.floats(n);
    let a = upload(&ctx, &av)?;
    let b = upload(&ctx, &bv)?;
    let out = upload(&ctx, &vec![SENTINEL; n])?;

    let mut cap = ctx.begin_breakable::<()>(CaptureMode::ThreadLocal)?;
    expect_err(
        "second begin_breakable on a capturing context",
        ctx.begin_breakable::<()>(CaptureMode::ThreadLocal).map(|_| ()),
        |e| matches!(e, Error::CaptureState(_)),
        "Error::CaptureState",
    )?;
    expect_err(
        "begin_capture on a capturing context",
        ctx.begin_capture(CaptureMode::Global).map(|_| ()),
        |e| matches!(e, Error::CaptureState(_)),
        "Error::CaptureState",
    )?;
    ensure!(ctx.is_capturing(), "the refused begin closed the first capture");
    ctx.add(&a, &b, &out, n)?;
    cap.brk(&(), |_, _| Ok(()))?;
    let graph = cap.end()?;
    ensure!(graph.segment_count() == 3, "segment_count {} (want 3)", graph.segment_count());
    ensure!(!ctx.capture_open(), "capture open after end");
    graph.replay(&())?;
    ctx.synchronize()?;
    let want: Vec<f32> = av.iter().zip(&bv).map(|(x, y)| x + y).collect();
    assert_same("first capture's replay", &download(&out, n)?, &want)?;
    // A new capture may open once the first has ended; aborting it closes it.
    let again = ctx.begin_breakable::<()>(CaptureMode::ThreadLocal)?;
    drop(again);
    ensure!(!ctx.capture_open(), "aborted capture still open");
    ctx.synchronize()?;

    // C API.
    let cctx = c::Ctx::new(0)?;
    c::check(capi::fc_graph_begin_ctx(cctx.0), "first fc_graph_begin_ctx")?;
    let rc = capi::fc_graph_begin_ctx(cctx.0);
    let want_rc = capi::header::FC_ERR_CAPTURE_STATE as c_int;
    ensure!(
        rc == want_rc,
        "second fc_graph_begin_ctx returned {rc}, want FC_ERR_CAPTURE_STATE ({want_rc}); {}",
        c::last_error()
    );
    ensure!(capi::fc_last_error_code() == want_rc, "fc_last_error_code {}", capi::fc_last_error_code());
    ensure!(cctx.is_capturing() == 1, "first C capture closed by the refused begin");
    c::check(capi::fc_graph_abort_ctx(cctx.0), "fc_graph_abort_ctx")?;
    ensure!(cctx.is_capturing() == 0, "C capture open after abort");
    Ok(())
}

/// A break function that panics, the unwinding caught by the caller: the
/// recording stays open and records again (the next segment opened, so
/// work launched until it ends is recorded and never runs eagerly), and
/// its end fails, naming the panic; nothing recorded runs.
fn a_break_that_panics_fails_the_recording() -> TestResult {
    let Rig { ctx, mut rng, .. } = rig(7)?;
    let n = 128;
    let a = upload(&ctx, &rng.floats(n))?;
    let out = upload(&ctx, &vec![SENTINEL; n])?;
    let mut cap = ctx.begin_breakable::<()>(CaptureMode::ThreadLocal)?;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cap.brk(&(), |_, _| std::panic::resume_unwind(Box::new("the break function panics")))
    }));
    ensure!(unwound.is_err(), "the break's unwinding did not reach the caller");
    ensure!(ctx.is_capturing(), "after the panicking break the context does not record");
    ctx.add(&a, &a, &out, n)?;
    expect_err(
        "end after a panicking break",
        cap.end().map(|_| ()),
        |e| matches!(e, Error::Callback(m) if m.contains("panicked")),
        "Error::Callback naming the panic",
    )?;
    ensure!(!ctx.capture_open(), "capture open after the failed end");
    ctx.synchronize()?;
    ensure!(
        download(&out, n)?.iter().all(|&v| v == SENTINEL),
        "the add launched after the panicking break ran eagerly"
    );
    Ok(())
}

/// Scrubbing zeroes rows [num_real, rows) in place across buffers, skips
/// None, leaves unpadded buffers untouched; captured, it runs at replay
/// only.
fn scrub_padding_tail_zeroes_tail() -> TestResult {
    let ctx = Context::new(0)?;
    let t1 = upload(&ctx, &[1.0; 18])?; // 6 x 3
    let t2 = upload(&ctx, &[1.0; 6])?; // 6
    let t3 = upload(&ctx, &[1.0; 12])?; // 4 x 3, unpadded
    scrub_padding_tail(4, &[Some((&t1, 6, 3)), None, Some((&t2, 6, 1))])?;
    scrub_padding_tail(4, &[Some((&t3, 4, 3))])?;
    let mut want1 = vec![1.0; 12];
    want1.extend([0.0; 6]);
    assert_same("t1 (6x3, 4 real)", &download(&t1, 18)?, &want1)?;
    assert_same("t2 (6, 4 real)", &download(&t2, 6)?, &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0])?;
    assert_same("t3 (unpadded, untouched)", &download(&t3, 12)?, &[1.0; 12])?;

    // Captured scrub: nothing happens until replay.
    t1.upload(&[1.0f32; 18])?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
    scrub_padding_tail(4, &[Some((&t1, 6, 3))])?;
    let graph = cap.end()?;
    assert_same("t1 after capturing the scrub (must be untouched)", &download(&t1, 18)?, &[1.0; 18])?;
    graph.launch()?;
    ctx.synchronize()?;
    assert_same("t1 after replaying the scrub", &download(&t1, 18)?, &want1)
}

/// `[:num_real]` per buffer: padded buffers give their first rows, an
/// unpadded one passes through whole.
fn slice_to_real_tokens() -> TestResult {
    let ctx = Context::new(0)?;
    let arange: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let a = upload(&ctx, &arange)?;
    let c4 = upload(&ctx, &arange[..4])?;
    ensure!(real_rows(6, 4) == 4 && real_rows(4, 4) == 4, "real_rows");
    ensure!(padded_tail_range(4, 4).is_none(), "unpadded buffer has a tail");
    assert_same("a[:4]", &download(&a, real_rows(6, 4))?, &arange[..4])?;
    assert_same("c (unpadded)", &download(&c4, real_rows(4, 4))?, &arange[..4])
}

// ---------------------------------------------------------------------------
// TestBucketedCapture
// ---------------------------------------------------------------------------

/// Issue requirement: n = 3, 4, 5, 8, 11, 16, 1 over buckets 4, 8, 16,
/// depth-3 chain with relu breaks, per-row weights; static input 16 x 16
/// zeroed then filled with n rows; each bucket captured lazily once
/// (exactly 4, 8, 16: 3 captures), replayed; first n rows == eager, padded
/// rows == 0.
fn replay_matches_eager_across_buckets() -> TestResult {
    let Rig { ctx, relu, mut rng, .. } = rig(1)?;
    let (d, depth, max_rows) = (16, 3, 16);
    let ws_host: Vec<Vec<f32>> = (0..=depth).map(|_| row_broadcast(&rng.floats(d), max_rows)).collect();
    let ws = ws_host.iter().map(|w| upload(&ctx, w)).collect::<fc_graph::Result<Vec<_>>>()?;
    let x_static = ctx.alloc(max_rows * d * 4)?;
    x_static.fill_bytes(0, x_static.size(), 0)?;
    let mut runner = BucketedRunner::<CapturedChain>::new(vec![4, 8, 16]).map_err(fail)?;
    let mut captures = Vec::new();
    let mut used = Vec::new();
    for n in [3, 4, 5, 8, 11, 16, 1] {
        let new_x = rng.floats(n * d);
        x_static.fill_bytes(0, x_static.size(), 0)?; // scrub the padded tail
        x_static.upload(&new_x)?;
        let bucket = runner
            .run::<TestError>(
                n,
                |b| {
                    captures.push(b);
                    Ok(capture_chain(&ctx, &relu, &x_static, &ws, b * d)?)
                },
                |g, _| Ok(g.graph.replay(&())?),
            )
            .map_err(fail)?;
        ctx.synchronize()?;
        used.push(bucket);
        let g = runner.get(bucket).ok_or_else(|| fail(format!("bucket {bucket} not stored")))?;
        ensure!(g.graph.segment_count() == 2 * depth + 1, "bucket {bucket}: segment_count {}", g.graph.segment_count());
        let got = download(&g.chain.out, bucket * d)?;
        let want = cpu_chain(&new_x, &ws_host);
        assert_same(&format!("n={n} (bucket {bucket}) real rows"), &got[..n * d], &want)?;
        if let Some(i) = (n * d..bucket * d).find(|&i| got[i] != 0.0) {
            return Err(fail(format!("n={n} (bucket {bucket}): padded element {i} is {}, want 0", got[i])));
        }
    }
    ensure!(runner.captured_buckets() == vec![4, 8, 16], "captured buckets {:?}", runner.captured_buckets());
    ensure!(captures == vec![4, 8, 16], "captures {captures:?} (want exactly [4, 8, 16], 3 captures)");
    ensure!(used == vec![4, 4, 8, 8, 16, 16, 4], "buckets used {used:?}");
    Ok(())
}

// ---------------------------------------------------------------------------
// TestBreakPointAndAmbientCtx
// ---------------------------------------------------------------------------

/// Off the capture path a break always runs its function, including for a
/// 0-row input (C API, `fc_graph_break_ctx` with no capture).
fn break_point_passthrough_runs_method_when_not_capturing() -> TestResult {
    let (n, d) = (4, 16);
    let mut rng = Rng::new(2);
    let xv = rng.floats(n * d);
    let ctx = c::Ctx::new(0)?;
    let k = c::Kern::load(&ctx, "scale_f32")?;
    let x = c::Buf::with(&ctx, &xv)?;
    let out = c::Buf::with(&ctx, &vec![SENTINEL; n * d])?;
    let empty_x = c::Buf::with(&ctx, &[1.0; 16])?; // holds 0 rows of real data
    let out0 = c::Buf::with(&ctx, &[SENTINEL; 16])?;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let four =
        ScaleCall { kernel: k.kernel, x: x.ptr(), out: out.ptr(), n: (n * d) as u32, scale: 3.0, calls: calls.clone() };
    let zero =
        ScaleCall { kernel: k.kernel, x: empty_x.ptr(), out: out0.ptr(), n: 0, scale: 9.0, calls: calls.clone() };
    ensure!(ctx.is_capturing() == 0, "context capturing");
    for (what, call) in [("4 rows", &four), ("0 rows", &zero)] {
        // SAFETY: live context; `call` outlives the direct call.
        let rc = capi::fc_graph_break_ctx(ctx.0, Some(scale_break_fn), call as *const ScaleCall as *mut c_void);
        c::check(rc, &format!("fc_graph_break_ctx ({what})"))?;
    }
    ctx.sync()?;
    let seen = calls.lock().map_err(fail)?.clone();
    ensure!(seen == vec![(n * d) as u32, 0], "method calls {seen:?} (want [{}, 0]: it ran for both)", n * d);
    let want: Vec<f32> = xv.iter().map(|v| v * 3.0).collect();
    assert_same("4-row output", &out.download(n * d)?, &want)?;
    assert_same("0-row output buffer (nothing written)", &out0.download(16)?, &[SENTINEL; 16])
}

/// The live value a break reads is the one given at replay: captured with
/// scale 2.0, replayed with 5.0 (then 2.0 again); out =
/// relu((x * w0) * w1) * live.scale.
fn ambient_ctx_rebinds_at_replay() -> TestResult {
    #[derive(Debug)]
    struct Live {
        scale: f32,
    }
    let Rig { ctx, relu: relu_k, scale: scale_k, mut rng } = rig(2)?;
    let n = 8 * 16;
    let x_static = upload(&ctx, &vec![0.0; n])?;
    let (wh, ws) = weights(&ctx, &mut rng, 2, n, -4.0, 4.0)?;
    let w1 = Arc::new(ws.into_iter().nth(1).ok_or_else(|| fail("weights"))?);
    let w0 = upload(&ctx, &wh[0])?;
    // (live scale, capture_open, is_capturing, in_break) per run of the break.
    type Seen = Vec<(f32, bool, bool, bool)>;
    let seen: Arc<Mutex<Seen>> = Arc::new(Mutex::new(Vec::new()));

    let mut cap = ctx.begin_breakable::<Live>(CaptureMode::ThreadLocal)?;
    let h = alloc_f32(&ctx, n)?;
    ctx.mul(&x_static, &w0, &h, n)?;
    let (t, r, out) = (alloc_f32(&ctx, n)?, alloc_f32(&ctx, n)?, alloc_f32(&ctx, n)?);
    {
        let (h, w1, t, r, out, seen) = (h.clone(), w1.clone(), t.clone(), r.clone(), out.clone(), seen.clone());
        let (relu_k, scale_k) = (relu_k.clone(), scale_k.clone());
        cap.brk(&Live { scale: 2.0 }, move |ctx: &Context, live: &Live| {
            if let Ok(mut s) = seen.lock() {
                s.push((live.scale, ctx.capture_open(), ctx.is_capturing(), ctx.in_break()));
            }
            ctx.mul(&h, &w1, &t, n)?;
            launch_relu(&relu_k, ctx, &t, &r, n)?;
            launch_scale(&scale_k, ctx, &r, live.scale, &out, n)
        })?;
    }
    let graph = cap.end()?;
    ensure!(graph.segment_count() == 3, "segment_count {} (want 3)", graph.segment_count());

    let new_x = rng.floats(n);
    x_static.upload(&new_x)?;
    let expected =
        |s: f32| -> Vec<f32> { new_x.iter().enumerate().map(|(i, x)| relu((x * wh[0][i]) * wh[1][i]) * s).collect() };
    graph.replay(&Live { scale: 5.0 })?;
    ctx.synchronize()?;
    assert_same("replay with live scale 5.0", &download(&out, n)?, &expected(5.0))?;
    graph.replay(&Live { scale: 2.0 })?;
    ctx.synchronize()?;
    assert_same("replay with live scale 2.0", &download(&out, n)?, &expected(2.0))?;

    let seen = seen.lock().map_err(fail)?.clone();
    let want = vec![(2.0, true, false, true), (5.0, false, false, true), (2.0, false, false, true)];
    ensure!(seen == want, "break runs (live scale, capture_open, is_capturing, in_break): {seen:?}, want {want:?}");
    Ok(())
}

/// Values a break closure captured stay frozen at capture time; values it
/// reads off the live argument follow the replay's live value.
fn break_reads_live_scalar_not_frozen_arg() -> TestResult {
    struct Live {
        mode: &'static str,
        mult: f32,
    }
    let Rig { ctx, scale: scale_k, mut rng, .. } = rig(2)?;
    let n = 8 * 16;
    let x_static = upload(&ctx, &vec![0.0; n])?;
    let w0v = rng.floats(n);
    let w0 = upload(&ctx, &w0v)?;
    // (frozen arg, live mode, live mult) per run.
    let seen: Arc<Mutex<Vec<(String, String, f32)>>> = Arc::new(Mutex::new(Vec::new()));

    let mut cap = ctx.begin_breakable::<Live>(CaptureMode::ThreadLocal)?;
    let h = alloc_f32(&ctx, n)?;
    ctx.mul(&x_static, &w0, &h, n)?;
    let out = alloc_f32(&ctx, n)?;
    {
        let frozen_mode = String::from("EXTEND");
        let (h, out, seen, scale_k) = (h.clone(), out.clone(), seen.clone(), scale_k.clone());
        cap.brk(&Live { mode: "EXTEND", mult: 1.0 }, move |ctx: &Context, live: &Live| {
            if let Ok(mut s) = seen.lock() {
                s.push((frozen_mode.clone(), live.mode.to_string(), live.mult));
            }
            launch_scale(&scale_k, ctx, &h, live.mult, &out, n)
        })?;
    }
    let graph = cap.end()?;

    let new_x = rng.floats(n);
    x_static.upload(&new_x)?;
    graph.replay(&Live { mode: "MIXED", mult: 4.0 })?;
    ctx.synchronize()?;
    let seen = seen.lock().map_err(fail)?.clone();
    ensure!(seen.len() == 2, "break ran {} times (want capture + replay = 2): {seen:?}", seen.len());
    ensure!(seen[1].0 == "EXTEND", "frozen arg at replay is {:?}, want EXTEND", seen[1].0);
    ensure!(seen[1].1 == "MIXED" && seen[1].2 == 4.0, "live value at replay is {:?}, want (MIXED, 4.0)", seen[1]);
    ensure!(seen[0].1 == "EXTEND" && seen[0].2 == 1.0, "live value at capture is {:?}, want (EXTEND, 1.0)", seen[0]);
    let want: Vec<f32> = new_x.iter().zip(&w0v).map(|(x, w)| (x * w) * 4.0).collect();
    assert_same("output scaled by the live multiplier 4.0", &download(&out, n)?, &want)
}

/// A narrow break: its output has a computed shape (rows x d/2) matching no
/// input: out[r][j] = relu(h[r][j]) * wv[r][j] for j < d/2, h = x * w0.
fn break_point_computed_out_shape() -> TestResult {
    let Rig { ctx, relu: relu_k, mut rng, .. } = rig(5)?;
    let (rows, d) = (8, 16);
    let d2 = d / 2;
    let x_static = upload(&ctx, &vec![0.0; rows * d])?;
    let w0v = rng.floats(rows * d);
    let wvv = rng.floats(rows * d2);
    let w0 = upload(&ctx, &w0v)?;
    let wv = Arc::new(upload(&ctx, &wvv)?);

    let mut cap = ctx.begin_breakable::<()>(CaptureMode::ThreadLocal)?;
    let h = alloc_f32(&ctx, rows * d)?;
    ctx.mul(&x_static, &w0, &h, rows * d)?;
    let out = alloc_f32(&ctx, rows * d2)?; // the computed (narrow) shape
    {
        let (h, out, wv, k) = (h.clone(), out.clone(), wv.clone(), relu_k.clone());
        cap.brk(&(), move |ctx: &Context, _: &()| {
            for r in 0..rows {
                let src = h.as_raw() + (r * d * 4) as u64;
                let dst = out.as_raw() + (r * d2 * 4) as u64;
                k.launch_on(ctx, cfg(d2), &[KernelArg::Ptr(src), KernelArg::Ptr(dst), KernelArg::U32(d2 as u32)])?;
            }
            ctx.mul(&out, &wv, &out, rows * d2)
        })?;
    }
    let graph = cap.end()?;
    ensure!(graph.segment_count() == 3, "segment_count {} (want 3)", graph.segment_count());
    ensure!(out.size() == rows * d2 * 4, "output is {} bytes, want {} (rows x d/2 floats)", out.size(), rows * d2 * 4);

    let new_x = rng.floats(rows * d);
    x_static.upload(&new_x)?;
    graph.replay(&())?;
    ctx.synchronize()?;
    let mut want = Vec::with_capacity(rows * d2);
    for r in 0..rows {
        for j in 0..d2 {
            let i = r * d + j;
            want.push(relu(new_x[i] * w0v[i]) * wvv[r * d2 + j]);
        }
    }
    assert_same("narrow break output", &download(&out, rows * d2)?, &want)
}

/// A break run from inside another break passes straight through: one
/// break in the graph (3 pieces), and the inner saw no active capture
/// (C API: outer break fn calls `fc_graph_break_ctx`).
fn nested_break_inner_passes_through() -> TestResult {
    let n = 8 * 16;
    let mut rng = Rng::new(7);
    let (w0v, w1v, xv) = (rng.floats(n), rng.floats(n), rng.floats(n));
    let ctx = c::Ctx::new(0)?;
    let k = c::Kern::load(&ctx, "relu_f32")?;
    let x_static = c::Buf::with(&ctx, &vec![0.0; n])?;
    let w0 = c::Buf::with(&ctx, &w0v)?;
    let w1 = c::Buf::with(&ctx, &w1v)?;
    // Warm-up of the built-ins outside the capture.
    c::check(capi::fc_mul_ctx(ctx.0, x_static.0, w0.0, w1.0, 0), "warm-up fc_mul_ctx")?;
    ctx.sync()?;

    c::check(capi::fc_graph_begin_ctx(ctx.0), "fc_graph_begin_ctx")?;
    ensure!(ctx.is_capturing() == 1, "not capturing after begin");
    let h = c::Buf::alloc(&ctx, n)?;
    let dst = c::Buf::alloc(&ctx, n)?;
    let out = c::Buf::alloc(&ctx, n)?;
    c::check(capi::fc_mul_ctx(ctx.0, x_static.0, w0.0, h.0, n), "captured fc_mul_ctx")?;
    let inner = ReluCall::new(k.kernel, h.ptr(), dst.ptr(), n);
    let outer = OuterCall {
        inner: &inner,
        dst: dst.0,
        w1: w1.0,
        out: out.0,
        n,
        calls: AtomicUsize::new(0),
        capturing_seen: Mutex::new(Vec::new()),
        inner_rc: Mutex::new(Vec::new()),
    };
    // SAFETY: live context; `outer` and `inner` outlive the graph (freed first below).
    let rc = capi::fc_graph_break_ctx(ctx.0, Some(outer_break_fn), &outer as *const OuterCall as *mut c_void);
    c::check(rc, "outer fc_graph_break_ctx")?;
    ensure!(ctx.is_capturing() == 1, "not capturing after the break");
    let graph = c::CGraph(capi::fc_graph_end_ctx(ctx.0));
    ensure!(!graph.0.is_null(), "fc_graph_end_ctx: {}", c::last_error());
    let pieces = capi::fc_graph_segment_count(graph.0);
    ensure!(pieces == 3, "segment count {pieces} (want 3: exactly one break, the outer)");

    x_static.upload(&xv)?;
    c::check(capi::fc_graph_launch(graph.0), "fc_graph_launch")?;
    ctx.sync()?;
    let want: Vec<f32> = (0..n).map(|i| relu(xv[i] * w0v[i]) * w1v[i]).collect();
    assert_same("nested-break output", &out.download(n)?, &want)?;

    let outer_calls = outer.calls.load(Ordering::SeqCst);
    let inner_calls = inner.calls.load(Ordering::SeqCst);
    ensure!(
        outer_calls == 2 && inner_calls == 2,
        "calls outer {outer_calls}, inner {inner_calls} (want 2 each: capture + replay)"
    );
    let inner_seen = inner.capturing_seen.lock().map_err(fail)?.clone();
    ensure!(inner_seen == vec![0, 0], "inner saw capturing {inner_seen:?} (want [0, 0])");
    let outer_seen = outer.capturing_seen.lock().map_err(fail)?.clone();
    ensure!(outer_seen == vec![0, 0], "outer saw capturing {outer_seen:?} (want [0, 0])");
    let rcs = outer.inner_rc.lock().map_err(fail)?.clone();
    ensure!(rcs == vec![0, 0], "inner fc_graph_break_ctx returned {rcs:?}");
    drop(graph);
    Ok(())
}

// ---------------------------------------------------------------------------
// Concurrent replays of one graph with a break (issue 17: no latch)
// ---------------------------------------------------------------------------

/// Four threads replay one graph that holds a break, several rounds, with
/// all four inside the break function at once and leaving it in a
/// staggered order (the interleaving that left a per-context "in a break"
/// flag set for good). Inside its break each thread must be refused a new
/// capture ("inside a break"), while the main thread, in no break, may open
/// and close one meanwhile. After every round the context must record a
/// new graph, replay it correctly, and serve a graph-cache capture.
fn concurrent_break_replays_leave_no_latch() -> TestResult {
    use std::sync::Barrier;
    const THREADS: usize = 4;
    const ROUNDS: usize = 5;
    let Rig { ctx, relu: relu_k, mut rng, .. } = rig(17)?;
    let n = 8 * 16;
    let (xv, wv) = (rng.floats(n), rng.floats(n));
    let x = upload(&ctx, &xv)?;
    let w = upload(&ctx, &wv)?;
    let (h, r, out) = (alloc_f32(&ctx, n)?, alloc_f32(&ctx, n)?, alloc_f32(&ctx, n)?);
    // Barriers of the break function: all threads (and main) inside, main
    // done with its capture, then the threads leave one by one.
    let inside = Arc::new(Barrier::new(THREADS + 1));
    let main_done = Arc::new(Barrier::new(THREADS + 1));
    let breaks_run = Arc::new(AtomicUsize::new(0));
    let gating = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // What each break saw: (in_break, begin refused "inside a break").
    let seen: Arc<Mutex<Vec<(bool, bool)>>> = Arc::new(Mutex::new(Vec::new()));

    let mut cap = ctx.begin_breakable::<usize>(CaptureMode::ThreadLocal)?;
    ctx.mul(&x, &w, &h, n)?;
    {
        let (h, r, relu_k) = (h.clone(), r.clone(), relu_k.clone());
        let (inside, main_done, breaks_run, gating, seen) =
            (inside.clone(), main_done.clone(), breaks_run.clone(), gating.clone(), seen.clone());
        cap.brk(&0, move |ctx: &Context, thread: &usize| {
            breaks_run.fetch_add(1, Ordering::SeqCst);
            let refused = matches!(
                ctx.begin_capture(CaptureMode::ThreadLocal).map(|_| ()),
                Err(Error::CaptureState(ref m)) if m.contains("inside a break")
            );
            if let Ok(mut s) = seen.lock() {
                s.push((ctx.in_break(), refused));
            }
            if gating.load(Ordering::SeqCst) {
                inside.wait();
                main_done.wait();
                // Leave in a staggered order: thread 0 first, thread 3 last.
                std::thread::sleep(std::time::Duration::from_millis(2 * *thread as u64));
            }
            launch_relu(&relu_k, ctx, &h, &r, n)
        })?;
    }
    ctx.mul(&r, &w, &out, n)?;
    let graph = Arc::new(cap.end()?);
    ensure!(graph.segment_count() == 3, "segment_count {} (want 3)", graph.segment_count());
    let want: Vec<f32> = (0..n).map(|i| relu(xv[i] * wv[i]) * wv[i]).collect();
    ensure!(seen.lock().map_err(fail)?.len() == 1, "the break ran once at capture");
    seen.lock().map_err(fail)?.clear();
    gating.store(true, Ordering::SeqCst);

    let sum_want: Vec<f32> = (0..n).map(|i| xv[i] + wv[i]).collect();
    for round in 0..ROUNDS {
        let replays: Vec<_> = (0..THREADS)
            .map(|t| {
                let graph = graph.clone();
                std::thread::Builder::new()
                    .name(format!("fc-replay-{t}"))
                    .spawn(move || graph.replay(&t).map_err(|e| e.to_string()))
                    .map_err(fail)
            })
            .collect::<Result<_, _>>()?;
        inside.wait();
        // All four threads are inside their break: this thread is not, and
        // may open (and close) a capture meanwhile.
        ensure!(!ctx.in_break(), "round {round}: the main thread counts as inside another thread's break");
        let empty = ctx.begin_capture(CaptureMode::ThreadLocal).and_then(|c| c.end());
        main_done.wait();
        let empty = empty.map_err(|e| fail(format!("round {round}: begin while other threads' breaks ran: {e}")))?;
        ensure!(empty.node_count()? == 0, "round {round}: the empty capture recorded work");
        for (t, j) in replays.into_iter().enumerate() {
            j.join()
                .map_err(|_| fail(format!("round {round}: replay thread {t} panicked")))?
                .map_err(|e| fail(format!("round {round}: replay on thread {t}: {e}")))?;
        }
        ctx.synchronize()?;
        assert_same(&format!("round {round}: output after 4 concurrent replays"), &download(&out, n)?, &want)?;

        // No latch: a new recording on the same context, replayed.
        ensure!(!ctx.in_break() && !ctx.capture_open(), "round {round}: a break or capture mark was left");
        let sum = alloc_f32(&ctx, n)?;
        let again = ctx
            .begin_capture(CaptureMode::ThreadLocal)
            .map_err(|e| fail(format!("round {round}: begin after the concurrent replays: {e}")))?;
        ctx.add(&x, &w, &sum, n)?;
        let g2 = again.end().map_err(|e| fail(format!("round {round}: end: {e}")))?;
        g2.launch()?;
        ctx.synchronize()?;
        assert_same(&format!("round {round}: the new recording"), &download(&sum, n)?, &sum_want)?;

        // And the graph cache captures on it (a new key each round).
        let cache: GraphCache<usize> = GraphCache::new(&ctx, CacheConfig::default())?;
        let cached = alloc_f32(&ctx, n)?;
        let o = cache.run(&round, &(), |rec| rec.context().add(&x, &w, &cached, n))?;
        ensure!(o == Outcome::Captured, "round {round}: graph cache after the replays: {o:?} (want Captured)");
        ctx.synchronize()?;
        assert_same(&format!("round {round}: the cache's graph"), &download(&cached, n)?, &sum_want)?;
    }
    let runs = breaks_run.load(Ordering::SeqCst);
    ensure!(runs == 1 + THREADS * ROUNDS, "break ran {runs} times (want {})", 1 + THREADS * ROUNDS);
    let seen = seen.lock().map_err(fail)?.clone();
    ensure!(
        seen.len() == THREADS * ROUNDS && seen.iter().all(|&(in_break, refused)| in_break && refused),
        "each replay's break must see in_break and a refused begin: {seen:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// TestPoolReuseAcrossCaptures and pool addresses
// ---------------------------------------------------------------------------

/// Scales of the four n x d chunks of the n x d2 "up-projection".
const UP_SCALES: [f32; 4] = [1.5, -0.5, 2.0, -1.25];

/// The reference's pool forward at d = 512, d2 = 2048: per layer
/// `h = x @ w1` (n x d2: four chunks `x * UP_SCALES[q]`), `dst = relu(h)`
/// as a break, `x = dst[chunk 0] * w2` (n x d). Intermediates are dropped
/// inside the capture (the break holds raw addresses, like the
/// reference's weak refs), so their pool blocks return for reuse; the last
/// `x` is the kept output.
fn pool_forward(
    cap: &mut Capture<()>,
    rig: (&Context, &Kernel, &Kernel),
    xbuf: &DeviceBuffer,
    w2: &DeviceBuffer,
    n: usize,
    dims: (usize, usize, usize),
) -> fc_graph::Result<DeviceBuffer> {
    let (ctx, relu, scale) = rig;
    let (d, d2, depth) = dims;
    let mut x: Option<DeviceBuffer> = None;
    for _ in 0..depth {
        let src = x.as_ref().unwrap_or(xbuf);
        let h = ctx.alloc(n * d2 * 4)?;
        for (q, s) in UP_SCALES.iter().enumerate() {
            let chunk = h.as_raw() + (q * n * d * 4) as u64;
            scale.launch_on(
                ctx,
                cfg(n * d),
                &[KernelArg::Buffer(src), KernelArg::F32(*s), KernelArg::Ptr(chunk), KernelArg::U32((n * d) as u32)],
            )?;
        }
        let dst = ctx.alloc(n * d2 * 4)?;
        let (hp, dp, count, k) = (h.as_raw(), dst.as_raw(), (n * d2) as u32, relu.clone());
        cap.brk(&(), move |ctx: &Context, _: &()| {
            k.launch_on(ctx, cfg(count as usize), &[KernelArg::Ptr(hp), KernelArg::Ptr(dp), KernelArg::U32(count)])
        })?;
        drop(h);
        let next = ctx.alloc(n * d * 4)?;
        ctx.mul(&dst, w2, &next, n * d)?;
        drop(dst);
        x = Some(next); // the previous x (pool) is freed here
    }
    x.ok_or_else(|| Error::InvalidArgument("depth 0".into()))
}

/// CPU reference of [`pool_forward`] (only chunk 0 feeds the next layer).
fn cpu_pool_forward(x: &[f32], w2: &[f32], depth: usize) -> Vec<f32> {
    let mut x = x.to_vec();
    for _ in 0..depth {
        for (i, v) in x.iter_mut().enumerate() {
            *v = relu(*v * UP_SCALES[0]) * w2[i];
        }
    }
    x
}

/// Pool memory must not grow per capture: captures at 4096, 2048, 4096
/// rows; the later two add less than max(2 MiB, 10% of the first's
/// growth); every capture still replays correctly afterwards; output
/// addresses stay put; dead intermediates went back to the pool.
fn same_and_smaller_captures_reuse_pool() -> TestResult {
    let Rig { ctx, relu, scale, mut rng } = rig(8)?;
    let dims @ (d, _d2, depth) = (512, 2048, 4);
    let max_rows = 4096;
    let xv = rng.floats(max_rows * d);
    let w2v: Vec<f32> = (0..max_rows * d).map(|_| rng.f32_in(-2.0, 2.0)).collect();
    let xbuf = upload(&ctx, &xv)?;
    let w2 = upload(&ctx, &w2v)?;
    ensure!(ctx.pool_in_use_bytes() == 0, "pool in use before any capture: {}", ctx.pool_in_use_bytes());

    struct Captured {
        n: usize,
        graph: Graph<()>,
        out: DeviceBuffer,
        addr: u64,
    }
    let mut caps: Vec<Captured> = Vec::new();
    let mut deltas = Vec::new();
    for n in [4096, 2048, 4096] {
        let before = ctx.pool_reserved_bytes();
        let mut cap = ctx.begin_breakable::<()>(CaptureMode::ThreadLocal)?;
        let out = pool_forward(&mut cap, (&ctx, &relu, &scale), &xbuf, &w2, n, dims)?;
        let graph = cap.end()?;
        ensure!(graph.segment_count() == 2 * depth + 1, "n={n}: segment_count {}", graph.segment_count());
        ensure!(pool_block(&out).is_some(), "n={n}: output not from the pool: {out:?}");
        graph.replay(&())?;
        ctx.synchronize()?;
        assert_same(
            &format!("n={n}: first replay"),
            &download(&out, n * d)?,
            &cpu_pool_forward(&xv[..n * d], &w2v, depth),
        )?;
        deltas.push(ctx.pool_reserved_bytes() as i64 - before as i64);
        let addr = out.as_raw();
        caps.push(Captured { n, graph, out, addr });
    }
    let mib: Vec<f64> = deltas.iter().map(|&b| b as f64 / MIB as f64).collect();
    ensure!(deltas[0] > 0, "first capture did not grow the pool: deltas {mib:?} MiB");
    let bound = (2 * MIB as i64).max(deltas[0] / 10);
    ensure!(
        deltas[1] < bound && deltas[2] < bound,
        "later captures grew the pool: deltas {mib:?} MiB, bound {} MiB",
        bound as f64 / MIB as f64
    );
    // Only the three kept outputs are still handed out.
    let kept: u64 = caps.iter().filter_map(|c| pool_block(&c.out)).sum();
    ensure!(
        ctx.pool_in_use_bytes() as u64 == kept,
        "pool in use {} bytes, but the kept outputs hold {kept}: dropped intermediates not returned",
        ctx.pool_in_use_bytes()
    );

    // Every capture still replays correctly on a fresh static input (one
    // at a time: a replay may reuse the dead blocks another graph's output
    // now occupies, as with a shared pool).
    let reserved = ctx.pool_reserved_bytes();
    let xv2 = rng.floats(max_rows * d);
    xbuf.upload(&xv2)?;
    for (k, c) in caps.iter().enumerate() {
        c.graph.replay(&())?;
        ctx.synchronize()?;
        let want = cpu_pool_forward(&xv2[..c.n * d], &w2v, depth);
        assert_same(
            &format!("capture {k} (n={}) replayed after all captures", c.n),
            &download(&c.out, c.n * d)?,
            &want,
        )?;
        ensure!(c.out.as_raw() == c.addr, "capture {k}: output moved {:#x} -> {:#x}", c.addr, c.out.as_raw());
    }
    ensure!(ctx.pool_reserved_bytes() == reserved, "replays changed the pool size");
    Ok(())
}

/// Pool buffers keep their addresses across replays; replays allocate
/// nothing; eager allocations never come from the pool; a second capture's
/// buffers never overlap the first's live buffers, and both keep
/// replaying correctly.
fn capture_pool_addresses_stable_across_replays() -> TestResult {
    let Rig { ctx, relu, mut rng, .. } = rig(9)?;
    let (n, depth) = (1024, 3);
    let x_static = upload(&ctx, &vec![0.0; n])?;
    let (ws_host, ws) = weights(&ctx, &mut rng, depth + 1, n, -2.0, 2.0)?;
    let a = capture_chain(&ctx, &relu, &x_static, &ws, n)?;
    let bufs_of = |c: &CapturedChain| -> Vec<(u64, u64)> {
        c.chain.keep.iter().chain([&c.chain.out]).map(|b| (b.as_raw(), pool_block(b).unwrap_or(0))).collect()
    };
    let a_bufs = bufs_of(&a);
    ensure!(a_bufs.iter().all(|&(_, block)| block > 0), "a captured buffer is not from the pool: {a_bufs:x?}");
    let (reserved, in_use) = (ctx.pool_reserved_bytes(), ctx.pool_in_use_bytes());
    let used: u64 = a_bufs.iter().map(|&(_, b)| b).sum();
    ensure!(in_use as u64 == used, "pool in use {in_use}, the capture's buffers hold {used}");

    let check_a = |trial: &str, rng: &mut Rng| -> TestResult {
        let new_x = rng.floats(n);
        x_static.upload(&new_x)?;
        a.graph.replay(&())?;
        ctx.synchronize()?;
        assert_same(trial, &download(&a.chain.out, n)?, &cpu_chain(&new_x, &ws_host))?;
        ensure!(bufs_of(&a) == a_bufs, "{trial}: pool buffer addresses changed");
        ensure!(
            ctx.pool_reserved_bytes() == reserved && ctx.pool_in_use_bytes() == in_use,
            "{trial}: the replay changed the pool ({} / {} bytes, were {reserved} / {in_use})",
            ctx.pool_reserved_bytes(),
            ctx.pool_in_use_bytes()
        );
        Ok(())
    };
    for trial in 0..3 {
        check_a(&format!("capture A replay {trial}"), &mut rng)?;
    }

    let eager = ctx.alloc(4096)?;
    ensure!(eager.origin() == Origin::Driver, "eager allocation came from the pool: {eager:?}");

    let b = capture_chain(&ctx, &relu, &x_static, &ws, n)?;
    for (pb, bb) in bufs_of(&b) {
        ensure!(bb > 0, "capture B buffer at {pb:#x} is not from the pool");
        if let Some((pa, ba)) = a_bufs.iter().find(|&&(pa, ba)| pb < pa + ba && pa < pb + bb) {
            return Err(fail(format!("capture B buffer {pb:#x}+{bb} overlaps capture A's live buffer {pa:#x}+{ba}")));
        }
    }
    let new_x = rng.floats(n);
    x_static.upload(&new_x)?;
    b.graph.replay(&())?;
    ctx.synchronize()?;
    assert_same("capture B replay", &download(&b.chain.out, n)?, &cpu_chain(&new_x, &ws_host))?;
    let in_use_ab = ctx.pool_in_use_bytes();
    drop(b);
    ensure!(
        ctx.pool_in_use_bytes() == in_use,
        "after dropping capture B the pool has {} bytes in use (A alone: {in_use}; A+B: {in_use_ab})",
        ctx.pool_in_use_bytes()
    );
    let reserved_now = ctx.pool_reserved_bytes();
    check_a("capture A replay after capture B", &mut rng)
        .map_err(|e| fail(format!("{} (pool reserved {reserved_now})", e.message().unwrap_or(""))))
}

// ---------------------------------------------------------------------------
// User kernels
// ---------------------------------------------------------------------------

/// relu_f32 / scale_f32 from TEST_PTX: signatures parsed, eager launch
/// correct (and bounded by n), launched inside a capture nothing runs
/// until replay, then replays are correct for fresh inputs.
fn user_kernel_signature_eager_and_captured() -> TestResult {
    let ctx = Context::new(0)?;
    let module = Module::from_ptx(&ctx, TEST_PTX)?;
    let names: Vec<&str> = module.entries().iter().map(|e| e.name.as_str()).collect();
    ensure!(names.contains(&"relu_f32") && names.contains(&"scale_f32"), "entries {names:?}");
    let relu_k = module.kernel("relu_f32")?;
    let scale_k = module.kernel("scale_f32")?;
    let kinds = |k: &Kernel| k.params().iter().map(|p| p.kind).collect::<Vec<_>>();
    ensure!(relu_k.params().len() == 3, "relu_f32 has {} params, want 3", relu_k.params().len());
    ensure!(kinds(&relu_k) == [ParamKind::U64, ParamKind::U64, ParamKind::U32], "relu_f32 params {:?}", kinds(&relu_k));
    ensure!(
        kinds(&scale_k) == [ParamKind::U64, ParamKind::F32, ParamKind::U64, ParamKind::U32],
        "scale_f32 params {:?}",
        kinds(&scale_k)
    );
    ensure!(relu_k.name() == "relu_f32", "name {}", relu_k.name());

    let mut rng = Rng::new(12);
    let n = 1000; // not a multiple of the block
    let xv = rng.floats(n);
    let x = upload(&ctx, &xv)?;
    let out = upload(&ctx, &vec![SENTINEL; n + 24])?;
    launch_relu(&relu_k, &ctx, &x, &out, n)?;
    ctx.synchronize()?;
    let got = download(&out, n + 24)?;
    assert_same("eager relu", &got[..n], &xv.iter().map(|&v| relu(v)).collect::<Vec<_>>())?;
    assert_same("elements past n (must be untouched)", &got[n..], &[SENTINEL; 24])?;

    // Captured: tmp = x * 2.5; out2 = relu(tmp).
    let out2 = upload(&ctx, &vec![SENTINEL; n])?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
    let tmp = ctx.alloc(n * 4)?;
    launch_scale(&scale_k, &ctx, &x, 2.5, &tmp, n)?;
    launch_relu(&relu_k, &ctx, &tmp, &out2, n)?;
    let graph = cap.end()?;
    ensure!(graph.segment_count() == 1, "segment_count {}", graph.segment_count());
    assert_same("output after capture, before replay (nothing ran)", &download(&out2, n)?, &vec![SENTINEL; n])?;
    for trial in 0..2 {
        let xv = rng.floats(n);
        x.upload(&xv)?;
        graph.launch()?;
        ctx.synchronize()?;
        let want: Vec<f32> = xv.iter().map(|&v| relu(v * 2.5)).collect();
        assert_same(&format!("captured scale+relu, replay {trial}"), &download(&out2, n)?, &want)?;
    }
    Ok(())
}

/// Wrong argument count, a float for a pointer, an integer for a float, a
/// zero grid: each refused with InvalidArgument before anything is
/// launched (output untouched), eagerly and inside a capture (which then
/// still ends and replays fine).
fn user_kernel_bad_args_rejected_before_launch() -> TestResult {
    let ctx = Context::new(0)?;
    let module = Module::from_ptx(&ctx, TEST_PTX)?;
    let relu_k = module.kernel("relu_f32")?;
    let scale_k = module.kernel("scale_f32")?;
    let n = 256;
    let xv: Vec<f32> = (0..n).map(|i| i as f32 - 100.0).collect();
    let x = upload(&ctx, &xv)?;
    let out = upload(&ctx, &vec![SENTINEL; n])?;
    let invalid = |e: &Error| matches!(e, Error::InvalidArgument(_));
    let nn = n as u32;

    let attempts = |ctx: &Context| -> TestResult {
        expect_err(
            "relu_f32 with 2 arguments",
            relu_k.launch_on(ctx, cfg(n), &[KernelArg::Buffer(&x), KernelArg::Buffer(&out)]),
            invalid,
            "InvalidArgument",
        )?;
        expect_err(
            "relu_f32 with 4 arguments",
            relu_k.launch_on(
                ctx,
                cfg(n),
                &[KernelArg::Buffer(&x), KernelArg::Buffer(&out), KernelArg::U32(nn), KernelArg::U32(0)],
            ),
            invalid,
            "InvalidArgument",
        )?;
        expect_err(
            "relu_f32 with an F32 for the .u64 x",
            relu_k.launch_on(ctx, cfg(n), &[KernelArg::F32(1.0), KernelArg::Buffer(&out), KernelArg::U32(nn)]),
            invalid,
            "InvalidArgument",
        )?;
        expect_err(
            "relu_f32 with a U64 for the .u32 n",
            relu_k.launch_on(ctx, cfg(n), &[KernelArg::Buffer(&x), KernelArg::Buffer(&out), KernelArg::U64(n as u64)]),
            invalid,
            "InvalidArgument",
        )?;
        expect_err(
            "scale_f32 with a U32 for the .f32 s",
            scale_k.launch_on(
                ctx,
                cfg(n),
                &[KernelArg::Buffer(&x), KernelArg::U32(2), KernelArg::Buffer(&out), KernelArg::U32(nn)],
            ),
            invalid,
            "InvalidArgument",
        )?;
        let zero_grid = LaunchConfig { grid: (0, 1, 1), block: (256, 1, 1), shared_mem_bytes: 0 };
        expect_err(
            "relu_f32 with a zero grid",
            relu_k.launch_on(ctx, zero_grid, &[KernelArg::Buffer(&x), KernelArg::Buffer(&out), KernelArg::U32(nn)]),
            invalid,
            "InvalidArgument",
        )?;
        expect_err(
            "check_args with an F32 for x",
            relu_k.check_args(&[KernelArg::F32(1.0), KernelArg::Buffer(&out), KernelArg::U32(nn)]),
            invalid,
            "InvalidArgument",
        )?;
        relu_k.check_args(&[KernelArg::Buffer(&x), KernelArg::Buffer(&out), KernelArg::U32(nn)])?;
        Ok(())
    };

    attempts(&ctx)?;
    ctx.synchronize()?;
    assert_same("output after refused eager launches", &download(&out, n)?, &vec![SENTINEL; n])?;

    // Inside a capture: refused launches leave the capture usable.
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
    attempts(&ctx)?;
    ensure!(ctx.is_capturing(), "a refused launch ended the capture");
    launch_relu(&relu_k, &ctx, &x, &out, n)?;
    let graph = cap.end()?;
    assert_same("output after the capture, before replay", &download(&out, n)?, &vec![SENTINEL; n])?;
    graph.launch()?;
    ctx.synchronize()?;
    assert_same(
        "replay of the capture that saw refused launches",
        &download(&out, n)?,
        &xv.iter().map(|&v| relu(v)).collect::<Vec<_>>(),
    )
}

/// A buffer of device 1 given to a kernel (or built-in, or fill) of device
/// 0 is refused with WrongDevice before launching.
fn user_kernel_buffer_on_other_device_rejected() -> TestResult {
    let ctx0 = Context::new(0)?;
    let ctx1 = Context::new(1)?;
    let module = Module::from_ptx(&ctx0, TEST_PTX)?;
    let relu_k = module.kernel("relu_f32")?;
    let n = 256;
    let x0 = upload(&ctx0, &vec![1.0; n])?;
    let out0 = upload(&ctx0, &vec![SENTINEL; n])?;
    let x1 = upload(&ctx1, &vec![1.0; n])?;
    let wrong = |e: &Error| matches!(e, Error::WrongDevice(_));
    let nn = n as u32;
    expect_err(
        "relu_f32 (device 0) with x on device 1",
        relu_k.launch(cfg(n), &[KernelArg::Buffer(&x1), KernelArg::Buffer(&out0), KernelArg::U32(nn)]),
        wrong,
        "WrongDevice",
    )?;
    expect_err(
        "relu_f32 (device 0) launched on device 1's context",
        relu_k.launch_on(&ctx1, cfg(n), &[KernelArg::Buffer(&x0), KernelArg::Buffer(&out0), KernelArg::U32(nn)]),
        wrong,
        "WrongDevice",
    )?;
    expect_err("ctx0.add with a device-1 operand", ctx0.add(&x0, &x1, &out0, n), wrong, "WrongDevice")?;
    expect_err("fill of a device-1 buffer on ctx0", x1.fill_bytes_on(&ctx0, 0, 4, 0), wrong, "WrongDevice")?;
    ctx0.synchronize()?;
    ctx1.synchronize()?;
    assert_same("device-0 output after refused launches", &download(&out0, n)?, &vec![SENTINEL; n])
}

fn main() {
    let t = |name: &'static str, body: fn() -> Result<(), Failed>| GpuTest { name, devices: 1, body };
    run_gpu_tests(
        "gpu_breakable",
        vec![
            t("break_here_passthrough_when_inactive", break_here_passthrough_when_inactive),
            t("segments_split_at_break", segments_split_at_break),
            t("replay_matches_eager", replay_matches_eager),
            t("multiple_breaks_chain", multiple_breaks_chain),
            t("six_break_chain_replay_equals_eager_fresh_inputs", six_break_chain_replay_equals_eager_fresh_inputs),
            t("nested_capture_rejected", nested_capture_rejected),
            t("a_break_that_panics_fails_the_recording", a_break_that_panics_fails_the_recording),
            t("scrub_padding_tail", scrub_padding_tail_zeroes_tail),
            t("slice_to_real_tokens", slice_to_real_tokens),
            t("replay_matches_eager_across_buckets", replay_matches_eager_across_buckets),
            t(
                "break_point_passthrough_runs_method_when_not_capturing",
                break_point_passthrough_runs_method_when_not_capturing,
            ),
            t("ambient_ctx_rebinds_at_replay", ambient_ctx_rebinds_at_replay),
            t("break_reads_live_scalar_not_frozen_arg", break_reads_live_scalar_not_frozen_arg),
            t("break_point_computed_out_shape", break_point_computed_out_shape),
            t("nested_break_inner_passes_through", nested_break_inner_passes_through),
            t("concurrent_break_replays_leave_no_latch", concurrent_break_replays_leave_no_latch),
            t("same_and_smaller_captures_reuse_pool", same_and_smaller_captures_reuse_pool),
            t("capture_pool_addresses_stable_across_replays", capture_pool_addresses_stable_across_replays),
            t("user_kernel_signature_eager_and_captured", user_kernel_signature_eager_and_captured),
            t("user_kernel_bad_args_rejected_before_launch", user_kernel_bad_args_rejected_before_launch),
            GpuTest {
                name: "user_kernel_buffer_on_other_device_rejected",
                devices: 2,
                body: user_kernel_buffer_on_other_device_rejected,
            },
        ],
    );
}
