//! GPU suite of programmatic dependent launch (PDL, issue 11): long chains,
//! breaks between PDL segments, in-place updates, user kernels that opt in
//! or not, the programmatic edges a capture keeps (cuGraphGetEdges, CUDA
//! 12.3+), the per-context switch and `FC_PDL=0`. Skips visibly without a
//! GPU; on a device or driver without PDL the tests that need it print a
//! `[SKIP]` line and the others check the plain path.

use std::ffi::CString;
use std::sync::Arc;

use cuda_sys::result::{context, graph, stream};
use cuda_sys::*;
use fc_graph::{
    supports_pdl, CaptureMode, Context, DeviceBuffer, Kernel, KernelArg, LaunchConfig, LaunchOptions, Module,
};
use fc_graph_tests::{
    assert_exact, chain_cpu, download, ensure, fail, rerun_with_env, run_gpu_tests, upload, GpuTest, Rng, PDL_TEST_PTX,
    TEST_PTX,
};
use libtest_mimic::Failed;

type TestResult = Result<(), Failed>;

fn main() {
    let t = |name, devices, body| GpuTest { name, devices, body };
    run_gpu_tests(
        "gpu_pdl",
        vec![
            t("pdl_status_is_consistent", 1, pdl_status_is_consistent),
            t("long_chain_2600_with_pdl_matches_cpu", 1, long_chain_2600_with_pdl_matches_cpu),
            t("pdl_segments_across_breaks_replay_correctly", 1, pdl_segments_across_breaks_replay_correctly),
            t("end_update_of_pdl_graph_with_new_buffers", 1, end_update_of_pdl_graph_with_new_buffers),
            t("user_kernel_opted_in_mixed_with_builtins", 1, user_kernel_opted_in_mixed_with_builtins),
            t("user_kernel_not_opted_in_after_pdl_builtin", 1, user_kernel_not_opted_in_after_pdl_builtin),
            t(
                "captured_edges_programmatic_when_on_none_when_off",
                1,
                captured_edges_programmatic_when_on_none_when_off,
            ),
            t("context_switch_is_per_context", 1, context_switch_is_per_context),
            t(ENV_TEST, 1, fc_pdl_0_turns_pdl_off_process_wide),
        ],
    )
}

const N: usize = 4096;
const ENV_TEST: &str = "fc_pdl_0_turns_pdl_off_process_wide";

/// Whether device 0 and the driver do PDL (and `FC_PDL` allows it); prints
/// a visible `[SKIP]` line for `test` when not.
fn pdl_available(ctx: &Context, test: &str) -> Result<bool, Failed> {
    let supported = supports_pdl(&ctx.device()).map_err(fail)?;
    let env_allows = fc_graph::launch::pdl_env_allows();
    if !(supported && env_allows) {
        let drv = fc_graph::driver().map_err(fail)?;
        println!(
            "[SKIP] gpu_pdl::{test}: PDL unavailable (device sm_{:?}, driver {}, cuLaunchKernelEx {}, FC_PDL allows {env_allows}); \
             only the plain path was checked",
            ctx.device().compute_capability().map_err(fail)?,
            drv.driver_version(),
            drv.cuLaunchKernelEx.is_some(),
        );
    }
    Ok(supported && env_allows)
}

/// The seed's layer body on N floats (see `fc_graph_tests::chain_n`).
fn chain(ctx: &Context, x: &DeviceBuffer, y: &DeviceBuffer, z: &DeviceBuffer, pairs: usize) -> fc_graph::Result<()> {
    fc_graph_tests::chain_n(ctx, x, y, z, N, pairs)
}

/// Inputs whose chain results depend on every step: where y is 1, each
/// pair adds exactly 1 to x, so a step that read stale data shows.
fn chain_inputs(rng: &mut Rng) -> (Vec<f32>, Vec<f32>) {
    let xs: Vec<f32> = (0..N).map(|_| rng.f32_in(-4.0, 4.0)).collect();
    let pick = [1.0f32, 1.0, -1.0, 0.5, 1.0, 0.75];
    let ys: Vec<f32> = (0..N).map(|_| pick[(rng.next_u64() % pick.len() as u64) as usize]).collect();
    (xs, ys)
}

/// A 1-D launch over N elements.
fn cfg() -> LaunchConfig {
    LaunchConfig::for_elements(N as u32, 256)
}

// ---------------------------------------------------------------------------
// Raw captures, to inspect edges (fc's Graph does not expose its CUgraphs)
// ---------------------------------------------------------------------------

/// A raw graph, destroyed on drop.
struct RawGraph(CUgraph);

impl Drop for RawGraph {
    fn drop(&mut self) {
        if let Ok(d) = fc_graph::driver() {
            // SAFETY: a graph this test captured, destroyed once.
            let _ = unsafe { graph::destroy(d, self.0) };
        }
    }
}

fn cu<T>(r: Result<T, DriverError>) -> Result<T, Failed> {
    r.map_err(|e| fail(format!("{} failed: {}", e.call, e.code)))
}

/// Records what `f` enqueues on `ctx`'s stream with the driver's own stream
/// capture (the same capture fc's `Capture` opens), so the graph's edges can
/// be read.
fn capture_raw(ctx: &Context, f: impl FnOnce() -> fc_graph::Result<()>) -> Result<RawGraph, Failed> {
    let d = fc_graph::driver().map_err(fail)?;
    let stream = ctx.raw_stream();
    // SAFETY: a retained primary context, alive while `ctx` is.
    cu(unsafe { context::set_current(d, ctx.raw_context()) })?;
    // SAFETY: the context's own stream, not capturing.
    cu(unsafe { stream::begin_capture(d, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) })?;
    let recorded = f();
    // SAFETY: the stream capturing since above (a graph a failed end hands
    // out is destroyed by the call).
    let ended = unsafe { stream::end_capture(d, stream) };
    let graph = RawGraph(ended.as_ref().map_or(std::ptr::null_mut(), |g| *g));
    recorded.map_err(fail)?;
    cu(ended)?;
    Ok(graph)
}

/// The kernel chain of a captured linear graph: for node i > 0 in launch
/// order, the data of its one incoming edge.
fn chain_edges(g: &RawGraph) -> Result<Vec<CUgraphEdgeData>, Failed> {
    let d = fc_graph::driver().map_err(fail)?;
    ensure!(d.has_edge_data(), "cuGraphGetEdges with edge data (ABI 12030, CUDA 12.3+) is missing");
    // SAFETY: live graph of the context current on this thread (capture_raw
    // made it current), used by this thread only.
    let edges = unsafe { graph::get_edges(d, g.0) }.ok_or_else(|| fail("cuGraphGetEdges is missing"))?;
    let edges = cu(edges)?;
    let n = edges.len();
    let from: Vec<CUgraphNode> = edges.iter().map(|e| e.from).collect();
    let to: Vec<CUgraphNode> = edges.iter().map(|e| e.to).collect();
    let data: Vec<CUgraphEdgeData> =
        edges.iter().map(|e| e.data.ok_or_else(|| fail("an edge without edge data"))).collect::<Result<_, _>>()?;
    // Walk the chain from the node without an incoming edge.
    // SAFETY: live graph.
    let nodes = cu(unsafe { graph::node_count(d, g.0) })?;
    ensure!(n + 1 == nodes, "a chain of {nodes} nodes has {n} edges (want {})", nodes.saturating_sub(1));
    let mut current = match from.iter().find(|f| !to.contains(f)) {
        Some(&root) => root,
        None if n == 0 => return Ok(Vec::new()),
        None => return Err(fail("no first node")),
    };
    let mut ordered = Vec::with_capacity(n);
    for _ in 0..n {
        let i = from.iter().position(|&f| f == current).ok_or_else(|| fail("the chain breaks"))?;
        ensure!(from.iter().filter(|&&f| f == current).count() == 1, "a node with two successors");
        ordered.push(data[i]);
        current = to[i];
    }
    Ok(ordered)
}

/// Writes the graph as DOT for a failure message (when the driver can).
fn dot_for_failure(g: &RawGraph, name: &str) -> String {
    let Ok(d) = fc_graph::driver() else { return String::new() };
    if d.cuGraphDebugDotPrint.is_none() {
        return String::new();
    }
    let path = std::env::temp_dir().join(format!("fc-gpu-pdl-{name}-{}.dot", std::process::id()));
    let Ok(cpath) = CString::new(path.to_string_lossy().into_owned()) else { return String::new() };
    // SAFETY: live graph, NUL-terminated path.
    let res = unsafe { graph::debug_dot_print(d, g.0, &cpath, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) };
    if matches!(res, Some(Ok(()))) {
        format!(" (graph written to {})", path.display())
    } else {
        String::new()
    }
}

/// Checks edge `types` (one per edge, in chain order) against `want`.
fn expect_edges(g: &RawGraph, name: &str, want: &[CUgraphDependencyType]) -> TestResult {
    let edges = chain_edges(g)?;
    let types: Vec<CUgraphDependencyType> = edges.iter().map(|e| e.type_ as CUgraphDependencyType).collect();
    if types != want {
        let show = |v: &[CUgraphDependencyType]| v.iter().map(|t| t.to_string()).collect::<Vec<_>>().join("");
        return Err(fail(format!(
            "{name}: edge types (1 = programmatic) {} want {}{}",
            show(&types),
            show(want),
            dot_for_failure(g, name)
        )));
    }
    for e in edges.iter().filter(|e| e.type_ as CUgraphDependencyType == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) {
        ensure!(
            e.from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
                || e.from_port == CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER,
            "{name}: a programmatic edge from port {}",
            e.from_port
        );
    }
    Ok(())
}

/// Whether this driver reports edge data (`cuGraphGetEdges` at its 12030
/// ABI, CUDA 12.3+; the 10000 ABI of older drivers has none), else a `[SKIP]`.
fn has_edge_query(test: &str) -> Result<bool, Failed> {
    let has = fc_graph::driver().map_err(fail)?.has_edge_data();
    if !has {
        println!(
            "[SKIP] gpu_pdl::{test}: the driver lacks cuGraphGetEdges with edge data (CUDA 12.3+); edges not checked"
        );
    }
    Ok(has)
}

const P: CUgraphDependencyType = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
const D: CUgraphDependencyType = CU_GRAPH_DEPENDENCY_TYPE_DEFAULT;

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

fn pdl_status_is_consistent() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let dev = ctx.device();
    let supported = supports_pdl(&dev).map_err(fail)?;
    let drv = fc_graph::driver().map_err(fail)?;
    let cc = dev.compute_capability().map_err(fail)?;
    let before = ctx.pdl_enabled();
    // Loading the built-ins must not change the answer.
    let x = upload(&ctx, &vec![1.0f32; N]).map_err(fail)?;
    ctx.add(&x, &x, &x, N).map_err(fail)?;
    let after = ctx.pdl_enabled();
    println!(
        "device sm_{}{}, driver {}, cuLaunchKernelEx {}, supports_pdl {supported}, FC_PDL allows {}, \
         pdl_enabled {before} before / {after} after loading the built-ins",
        cc.0,
        cc.1,
        drv.driver_version(),
        drv.cuLaunchKernelEx.is_some(),
        fc_graph::launch::pdl_env_allows()
    );
    ensure!(before == after, "loading the built-ins changed pdl_enabled: {before} -> {after}");
    let expected = cc >= (9, 0) && drv.driver_version() >= 12030 && drv.cuLaunchKernelEx.is_some();
    ensure!(supported == expected, "supports_pdl {supported}, expected {expected}");
    ensure!(after == (supported && fc_graph::launch::pdl_env_allows()), "pdl_enabled {after}");
    ensure!(download(&x, N).map_err(fail)? == vec![2.0f32; N], "x + x");
    Ok(())
}

fn long_chain_2600_with_pdl_matches_cpu() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    pdl_available(&ctx, "long_chain_2600_with_pdl_matches_cpu")?;
    const PAIRS: usize = 1300; // 2600 kernels
    let mut rng = Rng::new(11);
    let (xs, ys) = chain_inputs(&mut rng);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let mut want = xs.clone();
    chain_cpu(&mut want, &ys, PAIRS);

    // Eager, with PDL launches.
    chain(&ctx, &x, &y, &z, PAIRS).map_err(fail)?;
    assert_exact("eager 2600-kernel chain", &download(&x, N).map_err(fail)?, &want)?;

    // Captured and replayed, several times on fresh inputs.
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x, &y, &z, PAIRS).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    for trial in 0..3 {
        let (xs, ys) = chain_inputs(&mut rng);
        x.upload(&xs).map_err(fail)?;
        y.upload(&ys).map_err(fail)?;
        g.launch().map_err(fail)?;
        ctx.synchronize().map_err(fail)?;
        let mut want = xs;
        chain_cpu(&mut want, &ys, PAIRS);
        assert_exact(&format!("replay {trial} of the 2600-kernel graph"), &download(&x, N).map_err(fail)?, &want)?;
    }
    // Back-to-back replays without a host wait in between.
    x.upload(&xs).map_err(fail)?;
    y.upload(&ys).map_err(fail)?;
    for _ in 0..4 {
        g.launch().map_err(fail)?;
    }
    let mut want = xs;
    chain_cpu(&mut want, &ys, 4 * PAIRS);
    assert_exact("four back-to-back replays", &download(&x, N).map_err(fail)?, &want)
}

/// Live value of the breaks: the scale the second break applies.
struct Live {
    scale: f32,
}

fn pdl_segments_across_breaks_replay_correctly() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    pdl_available(&ctx, "pdl_segments_across_breaks_replay_correctly")?;
    const PAIRS: usize = 150; // 300 kernels per segment, 3 segments
    let m = Module::from_ptx(&ctx, TEST_PTX).map_err(fail)?;
    let scale = m.kernel("scale_f32").map_err(fail)?; // sm_35, not opted in
    let mut rng = Rng::new(12);
    let (xs, ys) = chain_inputs(&mut rng);
    let x = Arc::new(upload(&ctx, &xs).map_err(fail)?);
    let y = Arc::new(upload(&ctx, &ys).map_err(fail)?);
    let z = ctx.alloc(N * 4).map_err(fail)?;

    let mut cap = ctx.begin_breakable::<Live>(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x, &y, &z, PAIRS).map_err(fail)?;
    // Break 1: a PDL built-in, eager: x = x + y.
    let (bx, by) = (x.clone(), y.clone());
    cap.brk(&Live { scale: 1.0 }, move |ctx: &Context, _: &Live| ctx.add(&bx, &by, &bx, N)).map_err(fail)?;
    chain(&ctx, &x, &y, &z, PAIRS).map_err(fail)?;
    // Break 2: a plain user kernel with the live scale: x = x * scale.
    let bx = x.clone();
    cap.brk(&Live { scale: 1.0 }, move |ctx: &Context, live: &Live| {
        scale.launch_on(
            ctx,
            cfg(),
            &[KernelArg::Buffer(&bx), KernelArg::F32(live.scale), KernelArg::Buffer(&bx), KernelArg::U32(N as u32)],
        )
    })
    .map_err(fail)?;
    chain(&ctx, &x, &y, &z, PAIRS).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    ensure!(g.break_count() == 2 && g.segment_count() == 5, "graph {g:?}");

    for (trial, s) in [0.5f32, -2.0, 0.25].into_iter().enumerate() {
        let (xs, ys) = chain_inputs(&mut rng);
        x.upload(&xs).map_err(fail)?;
        y.upload(&ys).map_err(fail)?;
        g.replay(&Live { scale: s }).map_err(fail)?;
        ctx.synchronize().map_err(fail)?;
        let mut want = xs;
        chain_cpu(&mut want, &ys, PAIRS);
        want.iter_mut().zip(&ys).for_each(|(w, yv)| *w += yv);
        chain_cpu(&mut want, &ys, PAIRS);
        want.iter_mut().for_each(|w| *w *= s);
        chain_cpu(&mut want, &ys, PAIRS);
        assert_exact(&format!("breakable replay {trial} (scale {s})"), &download(&x, N).map_err(fail)?, &want)?;
    }
    Ok(())
}

fn end_update_of_pdl_graph_with_new_buffers() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    pdl_available(&ctx, "end_update_of_pdl_graph_with_new_buffers")?;
    const PAIRS: usize = 130; // 260 kernels
    let mut rng = Rng::new(13);
    type Inputs = (Vec<f32>, Vec<f32>, DeviceBuffer, DeviceBuffer, DeviceBuffer);
    let bufs = |rng: &mut Rng| -> fc_graph::Result<Inputs> {
        let (xs, ys) = chain_inputs(rng);
        let (x, y) = (upload(&ctx, &xs)?, upload(&ctx, &ys)?);
        Ok((xs, ys, x, y, ctx.alloc(N * 4)?))
    };
    let (xs1, ys1, x1, y1, z1) = bufs(&mut rng).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x1, &y1, &z1, PAIRS).map_err(fail)?;
    let mut g = cap.end().map_err(fail)?;
    let execs_before = g.raw_execs();

    let (xs2, ys2, x2, y2, z2) = bufs(&mut rng).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x2, &y2, &z2, PAIRS).map_err(fail)?;
    let report = cap.end_update(&mut g).map_err(fail)?;
    let in_place = fc_graph::driver().map_err(fail)?.cuGraphExecUpdate.is_some();
    println!("update report {report:?} (driver has cuGraphExecUpdate: {in_place}, PDL {})", ctx.pdl_enabled());
    if in_place {
        ensure!(report.updated == 1 && report.instantiated == 0, "same topology must update in place: {report:?}");
        ensure!(g.raw_execs() == execs_before, "an in-place update keeps the executable graph");
    }
    g.launch().map_err(fail)?;
    let mut want = xs2.clone();
    chain_cpu(&mut want, &ys2, PAIRS);
    assert_exact("updated graph computes on the new buffers", &download(&x2, N).map_err(fail)?, &want)?;
    assert_exact("the old buffers are untouched", &download(&x1, N).map_err(fail)?, &xs1)?;

    // And back to the first buffers, replayed twice.
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x1, &y1, &z1, PAIRS).map_err(fail)?;
    let report = cap.end_update(&mut g).map_err(fail)?;
    ensure!(!in_place || report.updated == 1, "second update in place: {report:?}");
    g.launch().map_err(fail)?;
    g.launch().map_err(fail)?;
    let mut want = xs1;
    chain_cpu(&mut want, &ys1, 2 * PAIRS);
    assert_exact("updated back, replayed twice", &download(&x1, N).map_err(fail)?, &want)
}

/// The mixed chain: per step z = x + y (built-in), x = z * s (user kernel).
fn mixed_step(
    ctx: &Context,
    k: &Kernel,
    opts: LaunchOptions,
    x: &DeviceBuffer,
    y: &DeviceBuffer,
    z: &DeviceBuffer,
    s: f32,
) -> fc_graph::Result<()> {
    ctx.add(x, y, z, N)?;
    k.launch_on_with(
        ctx,
        cfg(),
        &[KernelArg::Buffer(z), KernelArg::F32(s), KernelArg::Buffer(x), KernelArg::U32(N as u32)],
        opts,
    )
}

fn mixed_cpu(x: &mut [f32], y: &[f32], s: f32, steps: usize) {
    for _ in 0..steps {
        for i in 0..x.len() {
            x[i] = (x[i] + y[i]) * s;
        }
    }
}

fn user_kernel_opted_in_mixed_with_builtins() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    if !pdl_available(&ctx, "user_kernel_opted_in_mixed_with_builtins")? {
        return Ok(()); // the sm_90 test PTX cannot even load here
    }
    const STEPS: usize = 500;
    let m = Module::from_ptx(&ctx, PDL_TEST_PTX).map_err(fail)?;
    let mut k = m.kernel("pdl_scale_f32").map_err(fail)?;
    ensure!(!k.pdl(), "kernels start plain");
    k.set_pdl(true);
    ensure!(k.pdl() && k.uses_pdl(&ctx, k.default_options()), "opted in on a PDL device");
    let mut rng = Rng::new(14);
    let (xs, ys) = chain_inputs(&mut rng);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let s = 1.0f32;
    let run = |opts| -> fc_graph::Result<()> { (0..STEPS).try_for_each(|_| mixed_step(&ctx, &k, opts, &x, &y, &z, s)) };

    // Eager, then captured + replayed.
    run(k.default_options()).map_err(fail)?;
    let mut want = xs.clone();
    mixed_cpu(&mut want, &ys, s, STEPS);
    assert_exact("eager mixed chain", &download(&x, N).map_err(fail)?, &want)?;
    x.upload(&xs).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    run(k.default_options()).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    g.launch().map_err(fail)?;
    let mut want = xs.clone();
    mixed_cpu(&mut want, &ys, s, STEPS);
    assert_exact("replayed mixed chain", &download(&x, N).map_err(fail)?, &want)?;

    if has_edge_query("user_kernel_opted_in_mixed_with_builtins")? {
        // Opted in: every edge programmatic.
        let g = capture_raw(&ctx, || run(k.default_options()))?;
        expect_edges(&g, "opted_in", &vec![P; 2 * STEPS - 1])?;
        // Per launch: this launch plain although the kernel opted in; the
        // built-in after it is programmatic again.
        let g = capture_raw(&ctx, || {
            mixed_step(&ctx, &k, LaunchOptions::PLAIN, &x, &y, &z, s).and_then(|()| ctx.add(&x, &y, &z, N))
        })?;
        expect_edges(&g, "per_launch_plain", &[D, P])?;
        // Per launch: PDL for a kernel handle that did not opt in.
        let plain = m.kernel("pdl_scale_f32").map_err(fail)?;
        let g = capture_raw(&ctx, || mixed_step(&ctx, &plain, LaunchOptions::PDL, &x, &y, &z, s))?;
        expect_edges(&g, "per_launch_pdl", &[P])?;
    }
    Ok(())
}

fn user_kernel_not_opted_in_after_pdl_builtin() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let pdl = pdl_available(&ctx, "user_kernel_not_opted_in_after_pdl_builtin")?;
    const STEPS: usize = 500;
    let m = Module::from_ptx(&ctx, TEST_PTX).map_err(fail)?;
    let k = m.kernel("scale_f32").map_err(fail)?; // sm_35, no griddepcontrol
    ensure!(!k.uses_pdl(&ctx, k.default_options()), "a kernel that did not opt in launches plainly");
    let mut rng = Rng::new(15);
    let (xs, ys) = chain_inputs(&mut rng);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let s = 1.0f32;
    let run = || -> fc_graph::Result<()> {
        (0..STEPS).try_for_each(|_| mixed_step(&ctx, &k, k.default_options(), &x, &y, &z, s))
    };

    run().map_err(fail)?;
    let mut want = xs.clone();
    mixed_cpu(&mut want, &ys, s, STEPS);
    assert_exact("eager: plain user kernel after PDL built-ins", &download(&x, N).map_err(fail)?, &want)?;
    x.upload(&xs).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    run().map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    for _ in 0..2 {
        g.launch().map_err(fail)?;
    }
    let mut want = xs.clone();
    mixed_cpu(&mut want, &ys, s, 2 * STEPS);
    assert_exact("replayed twice: plain user kernel after PDL built-ins", &download(&x, N).map_err(fail)?, &want)?;

    if pdl && has_edge_query("user_kernel_not_opted_in_after_pdl_builtin")? {
        // built-in -> user: full edge; user -> built-in: programmatic.
        let g = capture_raw(&ctx, run)?;
        let want: Vec<CUgraphDependencyType> = (1..2 * STEPS).map(|i| if i % 2 == 1 { D } else { P }).collect();
        expect_edges(&g, "not_opted_in", &want)?;
    }
    Ok(())
}

fn captured_edges_programmatic_when_on_none_when_off() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let pdl = pdl_available(&ctx, "captured_edges_programmatic_when_on_none_when_off")?;
    if !has_edge_query("captured_edges_programmatic_when_on_none_when_off")? {
        return Ok(());
    }
    const PAIRS: usize = 13; // 26 kernels, the benchmark's chain
    let (x, y, z) = (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let on = if pdl { P } else { D };
    ensure!(ctx.pdl_enabled() == pdl, "pdl_enabled {} on a device where PDL is {pdl}", ctx.pdl_enabled());
    let g = capture_raw(&ctx, || chain(&ctx, &x, &y, &z, PAIRS))?;
    expect_edges(&g, "switch_on", &[on; 2 * PAIRS - 1])?;

    ctx.set_pdl(false);
    ensure!(!ctx.pdl_enabled(), "set_pdl(false)");
    let g = capture_raw(&ctx, || chain(&ctx, &x, &y, &z, PAIRS))?;
    expect_edges(&g, "switch_off", &[D; 2 * PAIRS - 1])?;

    ctx.set_pdl(true);
    ensure!(ctx.pdl_enabled() == pdl, "set_pdl(true) restores");
    let g = capture_raw(&ctx, || chain(&ctx, &x, &y, &z, PAIRS))?;
    expect_edges(&g, "switch_on_again", &[on; 2 * PAIRS - 1])
}

fn context_switch_is_per_context() -> TestResult {
    let a = Context::new(0).map_err(fail)?;
    let b = Context::new(0).map_err(fail)?;
    let pdl = pdl_available(&a, "context_switch_is_per_context")?;
    let a2 = a.clone();
    a.set_pdl(false);
    ensure!(!a.pdl_enabled() && !a2.pdl_enabled(), "clones share the switch");
    ensure!(b.pdl_enabled() == pdl, "another context on the device keeps its own switch");
    drop((a, a2));
    let c = Context::new(0).map_err(fail)?;
    ensure!(c.pdl_enabled() == pdl, "a new context starts with the switch on");
    // Both contexts compute correctly with their own settings.
    c.set_pdl(false);
    let mut rng = Rng::new(16);
    for (name, ctx) in [("switched off", &c), ("switched on", &b)] {
        let (xs, ys) = chain_inputs(&mut rng);
        let (x, y, z) =
            (upload(ctx, &xs).map_err(fail)?, upload(ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
        chain(ctx, &x, &y, &z, 130).map_err(fail)?;
        cap.end().map_err(fail)?.launch().map_err(fail)?;
        let mut want = xs;
        chain_cpu(&mut want, &ys, 130);
        assert_exact(name, &download(&x, N).map_err(fail)?, &want)?;
    }
    Ok(())
}

/// Runs itself again with `FC_PDL=0` (read once per process, so it needs
/// a process of its own), where it checks that nothing uses PDL.
fn fc_pdl_0_turns_pdl_off_process_wide() -> TestResult {
    if std::env::var(fc_graph::launch::PDL_ENV).as_deref() == Ok("0") {
        return pdl_off_in_this_process();
    }
    rerun_with_env(ENV_TEST, fc_graph::launch::PDL_ENV, "0")
}

fn pdl_off_in_this_process() -> TestResult {
    ensure!(!fc_graph::launch::pdl_env_allows(), "FC_PDL=0 is read");
    let ctx = Context::new(0).map_err(fail)?;
    ensure!(!ctx.pdl_enabled(), "built-ins must not use PDL under FC_PDL=0");
    let m = Module::from_ptx(&ctx, TEST_PTX).map_err(fail)?;
    let mut k = m.kernel("scale_f32").map_err(fail)?;
    k.set_pdl(true);
    ensure!(!k.uses_pdl(&ctx, LaunchOptions::PDL), "an opted-in kernel launches plainly under FC_PDL=0");
    let mut rng = Rng::new(17);
    let (xs, ys) = chain_inputs(&mut rng);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    chain(&ctx, &x, &y, &z, 130).map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, 130);
    assert_exact("chain under FC_PDL=0", &download(&x, N).map_err(fail)?, &want)?;
    if fc_graph::driver().map_err(fail)?.has_edge_data() {
        let g = capture_raw(&ctx, || {
            chain(&ctx, &x, &y, &z, 13)?;
            mixed_step(&ctx, &k, k.default_options(), &x, &y, &z, 1.0)
        })?;
        expect_edges(&g, "fc_pdl_0", &[D; 27])?;
    }
    Ok(())
}
