//! GPU suite of graph building (issue 18's foundation, `fc_graph::graph_builder`):
//! chains built node by node replay to the eager and the captured results,
//! their edges are programmatic exactly where the eager launches use PDL
//! (sm_90, CUDA 12.3+, not under `FC_PDL=0` or a context switched off),
//! and executable graphs are updated node by node: all nodes, one node, and
//! none (no driver call). Skips visibly without a driver.

use cuda_sys::result::{context, graph, stream};
use cuda_sys::*;
use fc_graph::graph_builder::{EdgeKind, Node};
use fc_graph::{
    BinaryOp, CaptureMode, Context, DeviceBuffer, GraphBuilder, KernelArg, KernelParams, LaunchConfig, LaunchOptions,
    MemsetParams, Module,
};
use fc_graph_tests::{
    assert_exact, chain_buffers, chain_cpu, chain_inputs, chain_n, download, ensure, fail, rerun_with_env,
    run_gpu_tests, status, upload, GpuTest, TEST_PTX,
};
use libtest_mimic::Failed;

type TestResult = Result<(), Failed>;

fn main() {
    let t = |name, devices, body| GpuTest { name, devices, body };
    run_gpu_tests(
        "gpu_builder",
        vec![
            t("chain_26_built_equals_eager_and_capture", 1, chain_26_built_equals_eager_and_capture),
            t("edges_match_the_stream_capture", 1, edges_match_the_stream_capture),
            t("pdl_switched_off_builds_full_edges", 1, pdl_switched_off_builds_full_edges),
            t("update_every_node", 1, update_every_node),
            t("update_one_node", 1, update_one_node),
            t("unchanged_update_makes_no_driver_call", 1, unchanged_update_makes_no_driver_call),
            t("pdl_cannot_change_in_an_update", 1, pdl_cannot_change_in_an_update),
            t("memset_nodes_and_their_update", 1, memset_nodes_and_their_update),
            t("user_kernel_node_matches_its_launch", 1, user_kernel_node_matches_its_launch),
            t("built_on_a_thread_without_a_current_context", 1, built_on_a_thread_without_a_current_context),
            t("nodes_of_another_graph_are_refused", 1, nodes_of_another_graph_are_refused),
            t(ENV_TEST, 1, fc_pdl_0_builds_full_edges),
        ],
    )
}

const N: usize = 4096;
/// 26 built-ins: 13 pairs of (z = x + y; x = z * y).
const PAIRS: usize = 13;
const ENV_TEST: &str = "fc_pdl_0_builds_full_edges";

/// Inputs whose chain results depend on every step (as gpu_pdl's).
fn inputs(seed: u64) -> (Vec<f32>, Vec<f32>) {
    chain_inputs(seed, N)
}

/// The chain built node by node, one line per op.
fn build_chain(
    b: &mut GraphBuilder,
    x: &DeviceBuffer,
    y: &DeviceBuffer,
    z: &DeviceBuffer,
    pairs: usize,
) -> fc_graph::Result<Vec<Node>> {
    let mut nodes = Vec::new();
    for _ in 0..pairs {
        nodes.push(b.add(x, y, z, N)?);
        nodes.push(b.mul(z, y, x, N)?);
    }
    Ok(nodes)
}

/// The kind every edge of a chain built on `ctx` should have.
fn expected_kind(ctx: &Context) -> Result<EdgeKind, Failed> {
    let d = fc_graph::driver().map_err(fail)?;
    Ok(if !d.has_edge_data() {
        EdgeKind::Unannotated
    } else if ctx.pdl_enabled() && d.has_programmatic_edges() {
        EdgeKind::Programmatic
    } else {
        EdgeKind::Full
    })
}

/// Checks that `b` is a chain of `n` nodes: node i -> i + 1, each `kind`.
fn expect_chain_edges(b: &mut GraphBuilder, n: usize, kind: EdgeKind) -> TestResult {
    let mut edges = b.edges().map_err(fail)?;
    edges.sort_by_key(|e| e.to.index());
    ensure!(edges.len() == n - 1, "{} edges, want {}", edges.len(), n - 1);
    for (i, e) in edges.iter().enumerate() {
        ensure!(e.from.index() == i && e.to.index() == i + 1, "edge {i}: {e:?}");
        ensure!(e.kind == kind, "edge {i}: {:?}, want {kind:?}", e.kind);
    }
    Ok(())
}

fn chain_26_built_equals_eager_and_capture() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(1);
    let y = upload(&ctx, &ys).map_err(fail)?;
    let (x_eager, x_cap, x_built) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &xs).map_err(fail)?);
    let (z1, z2, z3) =
        (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);

    chain_n(&ctx, &x_eager, &y, &z1, N, PAIRS).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain_n(&ctx, &x_cap, &y, &z2, N, PAIRS).map_err(fail)?;
    let captured = cap.end().map_err(fail)?;
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    let nodes = build_chain(&mut b, &x_built, &y, &z3, PAIRS).map_err(fail)?;
    ensure!(nodes.len() == 26 && b.node_count() == 26, "26 nodes");
    let built = b.instantiate().map_err(fail)?;
    ensure!(built.node_count() == 26, "26 nodes instantiated");
    captured.launch().map_err(fail)?;
    built.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;

    let mut want = xs.clone();
    chain_cpu(&mut want, &ys, PAIRS);
    let eager = download(&x_eager, N).map_err(fail)?;
    assert_exact("eager vs CPU", &eager, &want)?;
    assert_exact("captured vs eager", &download(&x_cap, N).map_err(fail)?, &eager)?;
    assert_exact("built vs eager", &download(&x_built, N).map_err(fail)?, &eager)?;
    // Replays again: the graph, not a one-off.
    built.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("built, second replay", &download(&x_built, N).map_err(fail)?, &want)?;
    println!("gpu_builder: pdl_enabled {}, edges {:?}", ctx.pdl_enabled(), expected_kind(&ctx)?);
    Ok(())
}

/// Edge types of a graph the driver's own stream capture recorded.
fn captured_edge_types(ctx: &Context, f: impl FnOnce() -> fc_graph::Result<()>) -> Result<Vec<u8>, Failed> {
    let d = fc_graph::driver().map_err(fail)?;
    let stream = ctx.raw_stream();
    // SAFETY: a retained primary context, alive while `ctx` is.
    ensure!(status(unsafe { context::set_current(d, ctx.raw_context()) }) == CUDA_SUCCESS, "cuCtxSetCurrent");
    // SAFETY: the context's own stream, not capturing.
    let res = status(unsafe { stream::begin_capture(d, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) });
    ensure!(res == CUDA_SUCCESS, "cuStreamBeginCapture: {res}");
    let recorded = f();
    // SAFETY: the stream capturing since above (a graph a failed end hands
    // out is destroyed by the call).
    let (res, g) = match unsafe { stream::end_capture(d, stream) } {
        Ok(g) => (CUDA_SUCCESS, g),
        Err(e) => (e.code, std::ptr::null_mut()),
    };
    // SAFETY: the graph just captured; not changed during the call.
    let edges = if g.is_null() { None } else { unsafe { graph::get_edges(d, g) } };
    if !g.is_null() {
        // SAFETY: ours, destroyed once.
        let _ = unsafe { graph::destroy(d, g) };
    }
    recorded.map_err(fail)?;
    ensure!(res == CUDA_SUCCESS, "cuStreamEndCapture: {res}");
    let edges =
        edges.ok_or_else(|| fail("no cuGraphGetEdges"))?.map_err(|e| fail(format!("cuGraphGetEdges: {}", e.code)))?;
    let mut types: Vec<u8> = edges.iter().map(|e| e.data.map_or(255, |d| d.type_)).collect();
    types.sort_unstable();
    Ok(types)
}

fn edges_match_the_stream_capture() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(2);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    build_chain(&mut b, &x, &y, &z, PAIRS).map_err(fail)?;
    let kind = expected_kind(&ctx)?;
    expect_chain_edges(&mut b, 26, kind)?;
    let d = fc_graph::driver().map_err(fail)?;
    if d.has_edge_data() {
        let captured = captured_edge_types(&ctx, || chain_n(&ctx, &x, &y, &z, N, PAIRS))?;
        let mut built: Vec<u8> = b
            .edges()
            .map_err(fail)?
            .iter()
            .map(|e| if e.kind == EdgeKind::Programmatic { CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8 } else { 0 })
            .collect();
        built.sort_unstable();
        ensure!(built == captured, "edge types: built {built:?}, captured {captured:?}");
    } else {
        println!("[SKIP] gpu_builder::edges_match_the_stream_capture: capture comparison needs edge data (CUDA 12.3+)");
    }
    // A memset in the chain: the edge from it is a full one, whatever PDL.
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    b.fill_bytes(&z, 0, N * 4, 0).map_err(fail)?;
    b.add(&x, &y, &z, N).map_err(fail)?;
    b.mul(&z, &y, &x, N).map_err(fail)?;
    let mut edges = b.edges().map_err(fail)?;
    edges.sort_by_key(|e| e.to.index());
    let full = if d.has_edge_data() { EdgeKind::Full } else { EdgeKind::Unannotated };
    ensure!(edges.len() == 2 && edges[0].kind == full && edges[1].kind == kind, "memset chain edges: {edges:?}");
    Ok(())
}

fn pdl_switched_off_builds_full_edges() -> TestResult {
    let ctx = Context::isolated(0).map_err(fail)?;
    ctx.set_pdl(false);
    let (xs, ys) = inputs(3);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    build_chain(&mut b, &x, &y, &z, PAIRS).map_err(fail)?;
    let kind = expected_kind(&ctx)?;
    ensure!(kind != EdgeKind::Programmatic, "switched off: no PDL");
    expect_chain_edges(&mut b, 26, kind)?;
    let g = b.instantiate().map_err(fail)?;
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("built with PDL off", &download(&x, N).map_err(fail)?, &want)
}

/// Runs itself again with `FC_PDL=0` (read once per process).
fn fc_pdl_0_builds_full_edges() -> TestResult {
    if std::env::var(fc_graph::launch::PDL_ENV).as_deref() != Ok("0") {
        return rerun_with_env(ENV_TEST, fc_graph::launch::PDL_ENV, "0");
    }
    let ctx = Context::new(0).map_err(fail)?;
    ensure!(!ctx.pdl_enabled(), "FC_PDL=0: no PDL");
    let (xs, ys) = inputs(4);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    build_chain(&mut b, &x, &y, &z, PAIRS).map_err(fail)?;
    let kind = expected_kind(&ctx)?;
    ensure!(kind != EdgeKind::Programmatic, "FC_PDL=0: full edges");
    expect_chain_edges(&mut b, 26, kind)?;
    let g = b.instantiate().map_err(fail)?;
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("built under FC_PDL=0", &download(&x, N).map_err(fail)?, &want)
}

fn update_every_node() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(5);
    let (xs2, ys2) = inputs(6);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let (x2, y2, z2) =
        (upload(&ctx, &xs2).map_err(fail)?, upload(&ctx, &ys2).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    let nodes = build_chain(&mut b, &x, &y, &z, PAIRS).map_err(fail)?;
    let mut g = b.instantiate().map_err(fail)?;
    for (i, &node) in nodes.iter().enumerate() {
        let changed = if i % 2 == 0 {
            g.set_binary(node, BinaryOp::Add, &x2, &y2, &z2, N)
        } else {
            g.set_binary(node, BinaryOp::Mul, &z2, &y2, &x2, N)
        }
        .map_err(fail)?;
        ensure!(changed, "node {i} changed");
    }
    ensure!(g.update_calls() == 26, "{} driver calls, want 26", g.update_calls());
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut want = xs2;
    chain_cpu(&mut want, &ys2, PAIRS);
    assert_exact("updated graph on the new buffers", &download(&x2, N).map_err(fail)?, &want)?;
    assert_exact("old buffers untouched", &download(&x, N).map_err(fail)?, &xs)
}

fn update_one_node() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(7);
    let (_, ys_other) = inputs(8);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let y_other = upload(&ctx, &ys_other).map_err(fail)?;
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    let nodes = build_chain(&mut b, &x, &y, &z, PAIRS).map_err(fail)?;
    let mut g = b.instantiate().map_err(fail)?;
    // Re-set every node; only node 0 differs (it adds y_other).
    for (i, &node) in nodes.iter().enumerate() {
        let yy = if i == 0 { &y_other } else { &y };
        let changed = if i % 2 == 0 {
            g.set_binary(node, BinaryOp::Add, &x, yy, &z, N)
        } else {
            g.set_binary(node, BinaryOp::Mul, &z, &y, &x, N)
        }
        .map_err(fail)?;
        ensure!(changed == (i == 0), "node {i}: changed {changed}");
    }
    ensure!(g.update_calls() == 1, "{} driver calls, want 1", g.update_calls());
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut want = xs;
    for i in 0..N {
        let zz = want[i] + ys_other[i];
        want[i] = zz * ys[i];
    }
    chain_cpu(&mut want, &ys, PAIRS - 1);
    assert_exact("one node updated", &download(&x, N).map_err(fail)?, &want)
}

fn unchanged_update_makes_no_driver_call() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(9);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    let nodes = build_chain(&mut b, &x, &y, &z, PAIRS).map_err(fail)?;
    let mut g = b.instantiate().map_err(fail)?;
    for round in 0..3 {
        for (i, &node) in nodes.iter().enumerate() {
            let changed = if i % 2 == 0 {
                g.set_binary(node, BinaryOp::Add, &x, &y, &z, N)
            } else {
                g.set_binary(node, BinaryOp::Mul, &z, &y, &x, N)
            }
            .map_err(fail)?;
            ensure!(!changed, "round {round}, node {i}: reported a change");
        }
    }
    ensure!(g.update_calls() == 0, "{} driver calls for 78 unchanged nodes, want 0", g.update_calls());
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("after unchanged updates", &download(&x, N).map_err(fail)?, &want)
}

fn pdl_cannot_change_in_an_update() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (x, y, z) = (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    let nodes = build_chain(&mut b, &x, &y, &z, 1).map_err(fail)?;
    let mut g = b.instantiate().map_err(fail)?;
    // Another context object of the same primary context, switched off.
    let off = Context::new(0).map_err(fail)?;
    off.set_pdl(false);
    let plain = KernelParams::binary(&off, BinaryOp::Add, &x, &y, &z, N).map_err(fail)?;
    let ours = KernelParams::binary(&ctx, BinaryOp::Add, &x, &y, &z, N).map_err(fail)?;
    if !ours.pdl() {
        println!("[SKIP] gpu_builder::pdl_cannot_change_in_an_update: PDL unavailable here (both plain)");
        // The same launch again: no change. (`plain` is another context
        // object's: its own load of the built-ins, another function handle.)
        ensure!(!g.set_kernel_params(nodes[0], &ours).map_err(fail)?, "same launch: no change");
        return Ok(());
    }
    ensure!(g.set_kernel_params(nodes[0], &plain).is_err(), "turning PDL off in an update must be refused");
    ensure!(g.update_calls() == 0, "refused without a driver call");
    Ok(())
}

fn memset_nodes_and_their_update() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (_, ys) = inputs(10);
    let (x, y, z) =
        (ctx.alloc(N * 4).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    let fill = b.fill_bytes(&x, 0, N * 4, 0).map_err(fail)?;
    b.add(&x, &y, &z, N).map_err(fail)?;
    let mut g = b.instantiate().map_err(fail)?;
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    assert_exact("z = 0 + y", &download(&z, N).map_err(fail)?, &ys)?;
    let ones = MemsetParams::words(&x, 0, N, 1.0f32.to_bits()).map_err(fail)?;
    ensure!(g.set_memset_params(fill, &ones).map_err(fail)?, "memset changed");
    ensure!(!g.set_memset_params(fill, &ones).map_err(fail)?, "same memset: no call");
    ensure!(g.update_calls() == 1, "{} calls", g.update_calls());
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let want: Vec<f32> = ys.iter().map(|v| 1.0 + v).collect();
    assert_exact("z = 1 + y", &download(&z, N).map_err(fail)?, &want)
}

fn user_kernel_node_matches_its_launch() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let m = Module::from_ptx(&ctx, TEST_PTX).map_err(fail)?;
    let k = m.kernel("scale_f32").map_err(fail)?;
    let (xs, _) = inputs(11);
    let x = upload(&ctx, &xs).map_err(fail)?;
    let (eager_out, node_out) = (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let cfg = LaunchConfig::for_elements(N as u32, 256);
    let args = |out| [KernelArg::Buffer(&x), 2.5f32.into(), KernelArg::Buffer(out), (N as u32).into()];
    k.launch(cfg, &args(&eager_out)).map_err(fail)?;
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    let params = KernelParams::kernel(&k, &ctx, cfg, &args(&node_out), LaunchOptions::PLAIN).map_err(fail)?;
    let node = b.push_kernel(&params).map_err(fail)?;
    // Wrong arguments are refused when the parameters are made.
    ensure!(KernelParams::kernel(&k, &ctx, cfg, &args(&node_out)[..3], LaunchOptions::PLAIN).is_err(), "3 args");
    let mut g = b.instantiate().map_err(fail)?;
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let eager = download(&eager_out, N).map_err(fail)?;
    assert_exact("user kernel node vs its launch", &download(&node_out, N).map_err(fail)?, &eager)?;
    let want: Vec<f32> = xs.iter().map(|v| v * 2.5).collect();
    assert_exact("scale by 2.5", &eager, &want)?;
    // Update its scalar argument only.
    let third = [KernelArg::Buffer(&x), 4.0f32.into(), KernelArg::Buffer(&node_out), (N as u32).into()];
    let p4 = KernelParams::kernel(&k, &ctx, cfg, &third, LaunchOptions::PLAIN).map_err(fail)?;
    ensure!(g.set_kernel_params(node, &p4).map_err(fail)?, "scale changed");
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let want: Vec<f32> = xs.iter().map(|v| v * 4.0).collect();
    assert_exact("scale by 4 after the update", &download(&node_out, N).map_err(fail)?, &want)
}

fn built_on_a_thread_without_a_current_context() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(12);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let done = std::thread::scope(|s| {
        s.spawn(|| -> fc_graph::Result<()> {
            let mut b = GraphBuilder::new(&ctx)?;
            build_chain(&mut b, &x, &y, &z, PAIRS)?;
            let g = b.instantiate()?;
            g.launch()?;
            ctx.synchronize()
        })
        .join()
    });
    done.map_err(|_| fail("the building thread panicked"))?.map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("built on a fresh thread", &download(&x, N).map_err(fail)?, &want)
}

fn nodes_of_another_graph_are_refused() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (x, y, z) = (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let mut a = GraphBuilder::new(&ctx).map_err(fail)?;
    let na = a.add(&x, &y, &z, N).map_err(fail)?;
    let mut b = GraphBuilder::new(&ctx).map_err(fail)?;
    let p = KernelParams::binary(&ctx, BinaryOp::Mul, &z, &y, &x, N).map_err(fail)?;
    ensure!(b.add_kernel(&p, &[na]).is_err(), "a dependency on another graph's node");
    let nb = b.add_kernel(&p, &[]).map_err(fail)?;
    let mut g = a.instantiate().map_err(fail)?;
    ensure!(g.set_kernel_params(nb, &p).is_err(), "another graph's node in an update");
    ensure!(KernelParams::binary(&ctx, BinaryOp::Add, &x, &y, &z, 0).is_err(), "n = 0 is no node");
    ensure!(g.update_calls() == 0, "no driver call");
    let small = ctx.alloc(16).map_err(fail)?;
    ensure!(KernelParams::binary(&ctx, BinaryOp::Add, &x, &y, &small, N).is_err(), "a too small operand");
    Ok(())
}
