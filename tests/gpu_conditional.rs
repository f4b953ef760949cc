//! GPU suite of conditional nodes (issue 20): loops and branches decided on
//! the device inside a recording that builds. A WHILE stopped by a flag its
//! body counts down, a REPEAT whose trip count a kernel of the same graph
//! computes (never read by the host), IF / IF_ELSE / SWITCH, nesting, a
//! foreign section inside a body, the refusals inside bodies, and updates
//! of re-recorded conditionals, node by node inside their bodies. Results are compared with the same work run
//! eagerly (the loop unrolled on the host). Skips visibly without a driver
//! or on drivers without conditional nodes (CUDA 12.3+).

use fc_graph::conditional::support;
use fc_graph::{CaptureMode, Context, DeviceBuffer, Error, KernelArg, LaunchConfig, Module, RecordingMode};
use fc_graph_tests::{
    assert_exact, chain_cpu, chain_n, download, ensure, fail, rerun_with_env, run_gpu_tests, upload, GpuTest, Rng,
    TEST_PTX,
};
use libtest_mimic::Failed;

type TestResult = Result<(), Failed>;

fn main() {
    let t = |name, devices, body| GpuTest { name, devices, body };
    run_gpu_tests(
        "gpu_conditional",
        vec![
            t("while_stops_on_a_flag_the_body_counts_down", 1, while_stops_on_a_flag_the_body_counts_down),
            t("repeat_count_computed_on_the_device", 1, repeat_count_computed_on_the_device),
            t("if_else_and_switch_pick_their_bodies", 1, if_else_and_switch_pick_their_bodies),
            t("nested_loops_and_a_foreign_section_in_a_body", 1, nested_loops_and_a_foreign_section_in_a_body),
            t("bodies_refuse_what_they_cannot_hold", 1, bodies_refuse_what_they_cannot_hold),
            t("re_recorded_conditionals_update", 1, re_recorded_conditionals_update),
            t("re_recorded_bodies_update_node_by_node", 1, re_recorded_bodies_update_node_by_node),
            t("setters_linked_with_the_device_runtime", 1, setters_linked_with_the_device_runtime),
        ],
    )
}

const N: usize = 4096;
/// A 26-kernel body: 13 pairs of (z = x + y; x = z * y).
const PAIRS: usize = 13;

/// A context that builds its recordings, or a skip note where the driver
/// has no conditional nodes (the test then passes as skipped, saying so).
fn context() -> Result<Option<Context>, Failed> {
    let ctx = Context::new(0).map_err(fail)?;
    if !support().if_while {
        println!("    SKIP: the driver has no conditional nodes (CUDA 12.3+)");
        return Ok(None);
    }
    ctx.set_recording_mode(RecordingMode::Build);
    Ok(Some(ctx))
}

fn inputs(seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(seed);
    let xs: Vec<f32> = (0..N).map(|_| rng.f32_in(-4.0, 4.0)).collect();
    let pick = [1.0f32, 1.0, -1.0, 0.5, 1.0, 0.75];
    let ys: Vec<f32> = (0..N).map(|i| pick[i % pick.len()]).collect();
    (xs, ys)
}

fn u32_buffer(ctx: &Context, v: u32) -> fc_graph::Result<DeviceBuffer> {
    let b = ctx.alloc(4)?;
    b.upload(&[v])?;
    Ok(b)
}

fn read_u32(b: &DeviceBuffer) -> fc_graph::Result<u32> {
    let mut v = [0u32];
    b.download(&mut v)?;
    Ok(v[0])
}

fn while_stops_on_a_flag_the_body_counts_down() -> TestResult {
    let Some(ctx) = context()? else { return Ok(()) };
    let module = Module::from_ptx(&ctx, TEST_PTX).map_err(fail)?;
    let countdown = module.kernel("flag_countdown").map_err(fail)?;
    let (xs, ys) = inputs(1);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let flag = u32_buffer(&ctx, 0).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ctx.while_loop(&flag, |c| {
        chain_n(c, &x, &y, &z, N, PAIRS)?;
        countdown.launch_on(
            c,
            LaunchConfig { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 },
            &[KernelArg::Buffer(&flag)],
        )
    })
    .map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    ensure!(g.built_segments() == 1, "the recording built its graph");
    // Setter + conditional node at the top level; the body's 27 kernels + setter inside.
    ensure!(g.node_count().map_err(fail)? == 2, "the graph holds the setter and the WHILE node");
    for trips in [5u32, 0, 32] {
        x.upload(&xs).map_err(fail)?;
        flag.upload(&[trips]).map_err(fail)?;
        g.launch().map_err(fail)?;
        let got = download(&x, N).map_err(fail)?;
        let mut want = xs.clone();
        chain_cpu(&mut want, &ys, PAIRS * trips as usize);
        assert_exact(&format!("WHILE of {trips} vs the chain unrolled"), &got, &want)?;
        ensure!(read_u32(&flag).map_err(fail)? == 0, "the body counted the flag down to 0");
    }
    Ok(())
}

fn repeat_count_computed_on_the_device() -> TestResult {
    let Some(ctx) = context()? else { return Ok(()) };
    let module = Module::from_ptx(&ctx, TEST_PTX).map_err(fail)?;
    let trip_from = module.kernel("trip_from_f32").map_err(fail)?;
    let (xs, ys) = inputs(2);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let source = ctx.alloc(4).map_err(fail)?;
    let n = u32_buffer(&ctx, 999).map_err(fail)?;
    let one = LaunchConfig { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    trip_from.launch_on(&ctx, one, &[KernelArg::Buffer(&source), KernelArg::Buffer(&n)]).map_err(fail)?;
    ctx.repeat(&n, |c| chain_n(c, &x, &y, &z, N, PAIRS)).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    for trips in [7u32, 1, 0, 12] {
        x.upload(&xs).map_err(fail)?;
        source.upload(&[trips as f32]).map_err(fail)?;
        g.launch().map_err(fail)?;
        let got = download(&x, N).map_err(fail)?;
        let mut want = xs.clone();
        chain_cpu(&mut want, &ys, PAIRS * trips as usize);
        assert_exact(&format!("REPEAT of a device-computed {trips}"), &got, &want)?;
        ensure!(read_u32(&n).map_err(fail)? == trips, "the kernel wrote the count, untouched by the loop");
    }
    Ok(())
}

fn if_else_and_switch_pick_their_bodies() -> TestResult {
    let Some(ctx) = context()? else { return Ok(()) };
    let (xs, ys) = inputs(3);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let flag = u32_buffer(&ctx, 1).map_err(fail)?;
    // IF_ELSE: then 1 pair, else 2 pairs (CUDA 12.8+; refused before).
    if support().if_else {
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
        ctx.if_else(&flag, |c| chain_n(c, &x, &y, &z, N, 1), |c| chain_n(c, &x, &y, &z, N, 2)).map_err(fail)?;
        let g = cap.end().map_err(fail)?;
        for (f, pairs) in [(1u32, 1usize), (0, 2), (7, 1)] {
            x.upload(&xs).map_err(fail)?;
            flag.upload(&[f]).map_err(fail)?;
            g.launch().map_err(fail)?;
            let mut want = xs.clone();
            chain_cpu(&mut want, &ys, pairs);
            assert_exact(&format!("IF_ELSE with flag {f}"), &download(&x, N).map_err(fail)?, &want)?;
        }
    } else {
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
        let e = ctx.if_else(&flag, |c| chain_n(c, &x, &y, &z, N, 1), |c| chain_n(c, &x, &y, &z, N, 2)).unwrap_err();
        ensure!(matches!(e, Error::Unsupported { .. }), "IF_ELSE before 12.8: {e}");
        cap.end().map_err(fail)?;
        println!("    SKIP (if-else part): the driver has no else bodies (CUDA 12.8+); refused as unsupported");
    }
    // IF without else, not taken: x unchanged.
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ctx.if_then(&flag, |c| chain_n(c, &x, &y, &z, N, 3)).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    x.upload(&xs).map_err(fail)?;
    flag.upload(&[0u32]).map_err(fail)?;
    g.launch().map_err(fail)?;
    assert_exact("IF not taken", &download(&x, N).map_err(fail)?, &xs)?;
    if !support().switch {
        println!("    SKIP (switch part): the driver has no SWITCH nodes (CUDA 12.8+)");
        return Ok(());
    }
    // SWITCH of 3: case i runs i + 1 pairs; 3 and above run nothing.
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ctx.switch(&flag, 3, |i, c| chain_n(c, &x, &y, &z, N, i as usize + 1)).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    for (index, pairs) in [(0u32, 1usize), (2, 3), (1, 2), (3, 0), (u32::MAX, 0)] {
        x.upload(&xs).map_err(fail)?;
        flag.upload(&[index]).map_err(fail)?;
        g.launch().map_err(fail)?;
        let mut want = xs.clone();
        chain_cpu(&mut want, &ys, pairs);
        assert_exact(&format!("SWITCH on {index}"), &download(&x, N).map_err(fail)?, &want)?;
    }
    Ok(())
}

fn nested_loops_and_a_foreign_section_in_a_body() -> TestResult {
    let Some(ctx) = context()? else { return Ok(()) };
    let (xs, ys) = inputs(4);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let (outer, inner) = (u32_buffer(&ctx, 3).map_err(fail)?, u32_buffer(&ctx, 2).map_err(fail)?);
    let mut rec = fc_graph::Recording::<()>::begin(&ctx, CaptureMode::ThreadLocal).map_err(fail)?;
    ctx.conditional_begin(fc_graph::Conditional::Repeat(&outer)).map_err(fail)?;
    chain_n(&ctx, &x, &y, &z, N, 1).map_err(fail)?;
    ctx.repeat(&inner, |c| chain_n(c, &x, &y, &z, N, 1)).map_err(fail)?;
    // A foreign section in the outer body: the library's own add and mul
    // captured from the stream, one child graph node.
    rec.foreign_begin(CaptureMode::ThreadLocal).map_err(fail)?;
    chain_n(&ctx, &x, &y, &z, N, 1).map_err(fail)?;
    rec.foreign_end().map_err(fail)?;
    ensure!(ctx.conditional_depth() == 1, "one conditional open");
    ctx.conditional_end().map_err(fail)?;
    let g = rec.end().map_err(fail)?;
    x.upload(&xs).map_err(fail)?;
    g.launch().map_err(fail)?;
    let mut want = xs.clone();
    chain_cpu(&mut want, &ys, 3 * (1 + 2 + 1));
    assert_exact("REPEAT 3 of (1 pair, REPEAT 2 of 1 pair, a foreign pair)", &download(&x, N).map_err(fail)?, &want)
}

fn bodies_refuse_what_they_cannot_hold() -> TestResult {
    let Some(ctx) = context()? else { return Ok(()) };
    let (xs, ys) = inputs(5);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let flag = u32_buffer(&ctx, 1).map_err(fail)?;
    // Outside a recording: refused, nothing runs.
    let e = ctx.if_then(&flag, |c| chain_n(c, &x, &y, &z, N, 1)).unwrap_err();
    ensure!(matches!(e, Error::CaptureState(_)), "eager conditional: {e}");
    assert_exact("nothing ran eagerly", &download(&x, N).map_err(fail)?, &xs)?;
    let tiny = ctx.alloc(2).map_err(fail)?;
    let mut rec = fc_graph::Recording::<()>::begin(&ctx, CaptureMode::ThreadLocal).map_err(fail)?;
    let e = ctx.conditional_begin(fc_graph::Conditional::If(&tiny)).unwrap_err();
    ensure!(matches!(e, Error::BufferTooSmall(_)), "2-byte condition: {e}");
    ctx.conditional_begin(fc_graph::Conditional::If(&flag)).map_err(fail)?;
    chain_n(&ctx, &x, &y, &z, N, 1).map_err(fail)?;
    let e = rec.brk(&(), Box::new(|_: &Context, _: &()| Ok(()))).unwrap_err();
    ensure!(e.to_string().contains("inside a conditional"), "break in a body: {e}");
    let e = ctx.conditional_next().unwrap_err();
    ensure!(e.to_string().contains("all are recorded"), "next past the IF's body: {e}");
    // A failing body closure drops its conditional and nothing else.
    let e = ctx.while_loop(&flag, |_| Err(Error::invalid("body failed"))).unwrap_err();
    ensure!(e.to_string().contains("body failed") && ctx.conditional_depth() == 1, "{e}");
    ctx.conditional_end().map_err(fail)?;
    let g = rec.end().map_err(fail)?;
    x.upload(&xs).map_err(fail)?;
    g.launch().map_err(fail)?;
    let mut want = xs.clone();
    chain_cpu(&mut want, &ys, 1);
    assert_exact("the IF recorded around the refusals", &download(&x, N).map_err(fail)?, &want)?;
    // A recording ended with a body open fails; the context records again.
    let rec = fc_graph::Recording::<()>::begin(&ctx, CaptureMode::ThreadLocal).map_err(fail)?;
    ctx.conditional_begin(fc_graph::Conditional::While(&flag)).map_err(fail)?;
    let e = rec.end().unwrap_err();
    ensure!(e.to_string().contains("conditional node(s) open"), "{e}");
    ensure!(ctx.conditional_depth() == 0, "the open body went with the recording");
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain_n(&ctx, &x, &y, &z, N, 1).map_err(fail)?;
    cap.end().map_err(fail)?;
    // A recording that captures the stream refuses conditionals.
    ctx.set_recording_mode(RecordingMode::Capture);
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    let e = ctx.if_then(&flag, |c| chain_n(c, &x, &y, &z, N, 1)).unwrap_err();
    ensure!(e.to_string().contains("builds its graph"), "{e}");
    cap.end().map_err(fail)?;
    Ok(())
}

fn re_recorded_conditionals_update() -> TestResult {
    let Some(ctx) = context()? else { return Ok(()) };
    let (xs, ys) = inputs(6);
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let (n3, n5) = (u32_buffer(&ctx, 3).map_err(fail)?, u32_buffer(&ctx, 5).map_err(fail)?);
    let record = |n: &DeviceBuffer| -> fc_graph::Result<fc_graph::Capture> {
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
        ctx.repeat(n, |c| chain_n(c, &x, &y, &z, N, 1))?;
        Ok(cap)
    };
    let mut g = record(&n3).map_err(fail)?.end().map_err(fail)?;
    let check = |g: &fc_graph::Graph, trips: usize, what: &str| -> TestResult {
        x.upload(&xs).map_err(fail)?;
        g.launch().map_err(fail)?;
        let mut want = xs.clone();
        chain_cpu(&mut want, &ys, trips);
        assert_exact(what, &download(&x, N).map_err(fail)?, &want)
    };
    check(&g, 3, "first recording: 3 trips")?;
    let r = record(&n3).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(r.updated == 1 && r.node_calls == 0 && r.instantiated == 0, "the same conditional: {r:?}");
    check(&g, 3, "after a no-op update")?;
    let r = record(&n5).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(
        r.updated == 1 && r.node_calls == 1 && r.instantiated == 0,
        "another count buffer: the setter's one node call: {r:?}"
    );
    check(&g, 5, "after the setter's update: 5 trips")?;
    let r = record(&n3).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(r.updated == 1 && r.node_calls == 1 && r.instantiated == 0, "and back: {r:?}");
    check(&g, 3, "back to 3 trips")
}

/// Re-recordings that change what a conditional's body launches, and the
/// buffer a WHILE's condition is read from, update the executable node by
/// node: one call per changed body kernel, two for a WHILE's new source
/// (the setter before it and the one ending its body); replays follow the
/// new parameters.
fn re_recorded_bodies_update_node_by_node() -> TestResult {
    let Some(ctx) = context()? else { return Ok(()) };
    let module = Module::from_ptx(&ctx, TEST_PTX).map_err(fail)?;
    let countdown = module.kernel("flag_countdown").map_err(fail)?;
    let (xs, ys) = inputs(7);
    let (_, ys2) = inputs(8);
    let (x, y, y2, z) = (
        upload(&ctx, &xs).map_err(fail)?,
        upload(&ctx, &ys).map_err(fail)?,
        upload(&ctx, &ys2).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
    );
    let (f1, f2) = (u32_buffer(&ctx, 0).map_err(fail)?, u32_buffer(&ctx, 0).map_err(fail)?);
    let one = LaunchConfig { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
    let record = |flag: &DeviceBuffer, y: &DeviceBuffer| -> fc_graph::Result<fc_graph::Capture> {
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
        ctx.while_loop(flag, |c| {
            chain_n(c, &x, y, &z, N, PAIRS)?;
            countdown.launch_on(c, one, &[KernelArg::Buffer(flag)])
        })?;
        Ok(cap)
    };
    let run = |g: &fc_graph::Graph, flag: &DeviceBuffer, ys: &[f32], trips: u32, what: &str| -> TestResult {
        x.upload(&xs).map_err(fail)?;
        flag.upload(&[trips]).map_err(fail)?;
        g.launch().map_err(fail)?;
        let mut want = xs.clone();
        chain_cpu(&mut want, ys, PAIRS * trips as usize);
        assert_exact(what, &download(&x, N).map_err(fail)?, &want)?;
        ensure!(read_u32(flag).map_err(fail)? == 0, "{what}: the body counted its flag down");
        Ok(())
    };
    let mut g = record(&f1, &y).map_err(fail)?.end().map_err(fail)?;
    run(&g, &f1, &ys, 4, "first recording")?;
    let r = record(&f1, &y2).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(
        r.updated == 1 && r.node_calls == 2 * PAIRS && r.instantiated == 0,
        "each body kernel reading y changed: {r:?}"
    );
    run(&g, &f1, &ys2, 3, "the body's kernels read y2")?;
    let r = record(&f2, &y2).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(
        r.updated == 1 && r.node_calls == 3 && r.instantiated == 0,
        "another flag: both setters and the countdown kernel: {r:?}"
    );
    f1.upload(&[7u32]).map_err(fail)?;
    run(&g, &f2, &ys2, 5, "the loop reads f2")?;
    ensure!(read_u32(&f1).map_err(fail)? == 7, "f1 is no longer read or counted down");
    let r = record(&f2, &y2).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(r.updated == 1 && r.node_calls == 0, "nothing changed: no call: {r:?}");
    run(&g, &f2, &ys2, 2, "after a no-op update")
}

/// The fallback where a driver refuses the setters' plain load: linked at
/// run time with the device runtime library (`FC_CONDITIONAL_SETTERS=link`
/// forces it). Runs the REPEAT test again in a process of its own with the
/// link forced; skips visibly where no `libcudadevrt.a` is found.
fn setters_linked_with_the_device_runtime() -> TestResult {
    let Some(ctx) = context()? else { return Ok(()) };
    let env = fc_graph::conditional_kernels::SETTERS_ENV;
    if std::env::var(env).is_ok() {
        // The re-run itself: the setters must have been linked.
        let how = ctx.conditional_setters().map_err(fail)?;
        ensure!(matches!(how, fc_graph::conditional_kernels::SetterSource::Linked(_)), "loaded {how:?}");
        println!("    setters: {how:?}");
        return repeat_count_computed_on_the_device();
    }
    match fc_graph::conditional_kernels::find_device_runtime() {
        None => {
            println!("    SKIP: no libcudadevrt.a found (FC_CUDADEVRT, CUDA_HOME, /usr/local/cuda, NVIDIA wheels)");
            Ok(())
        }
        Some(lib) => {
            println!("    device runtime: {}", lib.display());
            rerun_with_env("setters_linked_with_the_device_runtime", env, "link")
        }
    }
}
