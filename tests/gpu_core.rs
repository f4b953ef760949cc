//! GPU suite of the core layer (issue 2): devices, buffers, built-in
//! kernels, capture/replay, capture-state rules, the capture-mode shield
//! and multi-thread, multi-device concurrency. Skips visibly without a GPU.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use cuda_sys::result::{context, memory, stream};
use cuda_sys::*;
use fc_graph::{CaptureMode, Context, Device, DeviceBuffer, Error, Event, Module, Origin, RecordingMode};
use fc_graph_tests::{
    assert_exact, chain_cpu, download, ensure, fail, rerun_with_env, run_gpu_tests, upload, GpuTest, Rng,
};
use libtest_mimic::Failed;

type TestResult = Result<(), Failed>;

fn main() {
    let t = |name, devices, body| GpuTest { name, devices, body };
    run_gpu_tests(
        "gpu_core",
        vec![
            t("device_info", 1, device_info),
            t("elementwise_matches_cpu", 1, elementwise_matches_cpu),
            t("replay_equals_eager_on_fresh_inputs", 1, replay_equals_eager_on_fresh_inputs),
            t("every_capture_mode_captures", 1, every_capture_mode_captures),
            t("second_begin_is_refused", 1, second_begin_is_refused),
            t("dropped_guard_aborts_capture", 1, dropped_guard_aborts_capture),
            t("sync_and_copies_refused_while_capturing", 1, sync_and_copies_refused_while_capturing),
            t("bad_operands_launch_nothing", 1, bad_operands_launch_nothing),
            t("wrong_device_operands_refused", 2, wrong_device_operands_refused),
            t("capture_pool_serves_allocations_while_capturing", 1, capture_pool_serves_allocations_while_capturing),
            t("graph_freed_while_in_flight", 1, graph_freed_while_in_flight),
            t("events_time_device_work", 1, events_time_device_work),
            t("contexts_on_one_device_are_independent", 1, contexts_on_one_device_are_independent),
            t("recapture_updates_graph_in_place", 1, recapture_updates_graph_in_place),
            t(
                "recapture_topology_changes_never_reach_the_driver",
                1,
                recapture_topology_changes_never_reach_the_driver,
            ),
            t("shield_against_foreign_global_capture", 2, shield_against_foreign_global_capture),
            t("seed_scenario_in_rust", 2, seed_scenario_in_rust),
            t("builtins_ignore_the_current_context", 1, builtins_ignore_the_current_context),
            t(BIND_TEST, 1, fc_bind_launches_1_binds_every_launch),
        ],
    )
}

const N: usize = 4096;

const BIND_TEST: &str = "fc_bind_launches_1_binds_every_launch";

/// The seed's layer body on N floats (see `fc_graph_tests::chain_n`).
fn chain(ctx: &Context, x: &DeviceBuffer, y: &DeviceBuffer, z: &DeviceBuffer, pairs: usize) -> fc_graph::Result<()> {
    fc_graph_tests::chain_n(ctx, x, y, z, N, pairs)
}

fn device_info() -> TestResult {
    let n = Device::count().map_err(fail)?;
    ensure!(n >= 1, "no devices");
    for i in 0..n {
        let d = Device::get(i).map_err(fail)?;
        let name = d.name().map_err(fail)?;
        let (major, minor) = d.compute_capability().map_err(fail)?;
        let mem = d.total_memory().map_err(fail)?;
        println!("device {i}: {name}, sm_{major}{minor}, {} MiB, {}", mem >> 20, d.uuid().map_err(fail)?);
        ensure!(!name.is_empty() && major >= 3 && mem > 0, "implausible device {i}");
    }
    let drv = fc_graph::driver().map_err(fail)?;
    ensure!(drv.driver_version() >= 11040, "driver {}", drv.driver_version());
    ensure!(Device::get(n).is_err(), "device {n} must not exist");
    Ok(())
}

fn elementwise_matches_cpu() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let mut rng = Rng::new(1);
    for n in [1usize, 255, 256, 257, 4096, 1 << 20] {
        let (a, b) = (rng.floats(n), rng.floats(n));
        let (da, db) = (upload(&ctx, &a).map_err(fail)?, upload(&ctx, &b).map_err(fail)?);
        let out = upload(&ctx, &vec![f32::NAN; n]).map_err(fail)?;
        ctx.add(&da, &db, &out, n).map_err(fail)?;
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_exact(&format!("add n={n}"), &download(&out, n).map_err(fail)?, &want)?;
        out.upload(&vec![f32::NAN; n]).map_err(fail)?;
        ctx.mul(&da, &db, &out, n).map_err(fail)?;
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        assert_exact(&format!("mul n={n}"), &download(&out, n).map_err(fail)?, &want)?;
    }
    Ok(())
}

fn replay_equals_eager_on_fresh_inputs() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (x, y, z) = (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x, &y, &z, 13).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    ensure!(g.segment_count() == 1 && g.break_count() == 0, "unbroken graph: {g:?}");
    let mut rng = Rng::new(2);
    for trial in 0..5 {
        let xs: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.0, 1.0)).collect();
        let ys: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.5, 1.5)).collect();
        x.upload(&xs).map_err(fail)?;
        y.upload(&ys).map_err(fail)?;
        g.launch().map_err(fail)?;
        ctx.synchronize().map_err(fail)?;
        let mut want = xs.clone();
        chain_cpu(&mut want, &ys, 13);
        assert_exact(&format!("replay trial {trial}"), &download(&x, N).map_err(fail)?, &want)?;
        // The same inputs eagerly on the GPU give the same bits.
        x.upload(&xs).map_err(fail)?;
        chain(&ctx, &x, &y, &z, 13).map_err(fail)?;
        assert_exact(&format!("eager trial {trial}"), &download(&x, N).map_err(fail)?, &want)?;
    }
    Ok(())
}

fn every_capture_mode_captures() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let mut rng = Rng::new(3);
    let (xs, ys) = (rng.floats(N), rng.floats(N));
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    for mode in [CaptureMode::Global, CaptureMode::ThreadLocal, CaptureMode::Relaxed] {
        let cap = ctx.begin_capture(mode).map_err(fail)?;
        ctx.add(&x, &y, &z, N).map_err(fail)?;
        let g = cap.end().map_err(fail)?;
        z.upload(&vec![f32::NAN; N]).map_err(fail)?;
        g.launch().map_err(fail)?;
        let want: Vec<f32> = xs.iter().zip(&ys).map(|(a, b)| a + b).collect();
        assert_exact(&format!("{mode:?}"), &download(&z, N).map_err(fail)?, &want)?;
    }
    Ok(())
}

fn second_begin_is_refused() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    match ctx.begin_capture(CaptureMode::ThreadLocal) {
        Err(Error::CaptureState(m)) => ensure!(m.contains("already open"), "message: {m}"),
        other => return Err(fail(format!("second begin gave {other:?}"))),
    }
    ensure!(ctx.is_capturing(), "first capture still open");
    drop(cap.end().map_err(fail)?);
    ensure!(!ctx.is_capturing(), "capture closed");
    Ok(())
}

fn dropped_guard_aborts_capture() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (x, y, z) = (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    {
        let _cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
        ctx.add(&x, &y, &z, N).map_err(fail)?;
    }
    ensure!(!ctx.is_capturing(), "guard drop ended the capture");
    let d = fc_graph::driver().map_err(fail)?;
    // SAFETY: our stream.
    let (rc, status) = match unsafe { stream::is_capturing(d, ctx.raw_stream()) } {
        Ok(status) => (CUDA_SUCCESS, status),
        Err(e) => (e.code, CU_STREAM_CAPTURE_STATUS_ACTIVE),
    };
    ensure!(rc == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_NONE, "stream still capturing ({rc}, {status})");
    ctx.synchronize().map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ctx.add(&x, &y, &z, N).map_err(fail)?;
    cap.end().map_err(fail)?.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)
}

fn sync_and_copies_refused_while_capturing() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let mut rng = Rng::new(4);
    let (xs, ys) = (rng.floats(N), rng.floats(N));
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ctx.mul(&x, &y, &z, N).map_err(fail)?;
    ensure!(matches!(ctx.synchronize(), Err(Error::CaptureState(_))), "sync during capture must be refused");
    ensure!(matches!(x.upload(&xs), Err(Error::CaptureState(_))), "upload during capture must be refused");
    let mut tmp = vec![0f32; N];
    ensure!(matches!(z.download(&mut tmp), Err(Error::CaptureState(_))), "download during capture must be refused");
    let g = cap.end().map_err(fail)?;
    g.launch().map_err(fail)?;
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(a, b)| a * b).collect();
    assert_exact("capture survived the refusals", &download(&z, N).map_err(fail)?, &want)
}

fn bad_operands_launch_nothing() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let small = upload(&ctx, &vec![7.0f32; 1024]).map_err(fail)?;
    let big = upload(&ctx, &vec![1.0f32; 2048]).map_err(fail)?;
    let out = upload(&ctx, &vec![-3.0f32; 1024]).map_err(fail)?;
    match ctx.add(&big, &big, &out, 1025) {
        Err(Error::BufferTooSmall(m)) => {
            ensure!(m.contains("out"), "message names the operand: {m}")
        }
        other => return Err(fail(format!("expected BufferTooSmall, got {other:?}"))),
    }
    ensure!(matches!(ctx.mul(&small, &big, &out, 2048), Err(Error::BufferTooSmall(_))), "a too small");
    ctx.synchronize().map_err(fail)?;
    assert_exact("out untouched", &download(&out, 1024).map_err(fail)?, &vec![-3.0; 1024])?;
    ensure!(ctx.add(&small, &small, &out, 0).is_ok(), "n = 0 is a no-op");
    ensure!(matches!(ctx.alloc(0), Err(Error::InvalidArgument(_))), "0-byte alloc refused");
    ensure!(matches!(out.upload(&vec![0f32; 1025]), Err(Error::BufferTooSmall(_))), "oversized upload");
    Ok(())
}

fn wrong_device_operands_refused() -> TestResult {
    let (c0, c1) = (Context::new(0).map_err(fail)?, Context::new(1).map_err(fail)?);
    let a0 = upload(&c0, &vec![1.0f32; N]).map_err(fail)?;
    let a1 = upload(&c1, &vec![2.0f32; N]).map_err(fail)?;
    let out = upload(&c0, &vec![5.0f32; N]).map_err(fail)?;
    match c0.add(&a0, &a1, &out, N) {
        Err(Error::WrongDevice(m)) => ensure!(m.contains("device 1"), "message: {m}"),
        other => return Err(fail(format!("expected WrongDevice, got {other:?}"))),
    }
    assert_exact("out untouched", &download(&out, N).map_err(fail)?, &vec![5.0; N])
}

fn capture_pool_serves_allocations_while_capturing() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let mut rng = Rng::new(5);
    let (xs, ys) = (rng.floats(N), rng.floats(N));
    let (x, y) = (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?);
    ensure!(x.origin() == Origin::Driver, "eager allocations come from the driver");
    let before = ctx.pool_reserved_bytes();
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    let tmp = ctx.alloc(N * 4).map_err(fail)?;
    let out = ctx.alloc(N * 4).map_err(fail)?;
    ensure!(matches!(out.origin(), Origin::Pool { .. }), "capture-time allocation from the pool");
    ctx.add(&x, &y, &tmp, N).map_err(fail)?;
    ctx.mul(&tmp, &y, &out, N).map_err(fail)?;
    drop(tmp);
    let g = cap.end().map_err(fail)?;
    ensure!(ctx.pool_reserved_bytes() > before, "the pool grew");
    let addr = out.as_raw();
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(a, b)| (a + b) * b).collect();
    for _ in 0..3 {
        g.launch().map_err(fail)?;
        ensure!(out.as_raw() == addr, "address stable");
        assert_exact("pool-backed output", &download(&out, N).map_err(fail)?, &want)?;
    }
    ensure!(ctx.alloc(16).map_err(fail)?.origin() == Origin::Driver, "after the capture: driver again");
    Ok(())
}

fn graph_freed_while_in_flight() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let mut rng = Rng::new(6);
    let xs: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.0, 1.0)).collect();
    let ys: Vec<f32> = (0..N).map(|_| rng.f32_in(0.5, 1.0)).collect();
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x, &y, &z, 1300).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    g.launch().map_err(fail)?;
    drop(g); // while 2600 kernels are still running
    ctx.synchronize().map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, 1300);
    assert_exact("2600-kernel graph", &download(&x, N).map_err(fail)?, &want)
}

fn events_time_device_work() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (x, y, z) = (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let (start, end) = (Event::new(&ctx).map_err(fail)?, Event::new(&ctx).map_err(fail)?);
    start.record().map_err(fail)?;
    chain(&ctx, &x, &y, &z, 100).map_err(fail)?;
    end.record().map_err(fail)?;
    end.synchronize().map_err(fail)?;
    let ms = end.elapsed_ms_since(&start).map_err(fail)?;
    ensure!(ms > 0.0 && ms < 1000.0, "elapsed {ms} ms");
    Ok(())
}

fn contexts_on_one_device_are_independent() -> TestResult {
    let (c1, c2) = (Context::new(0).map_err(fail)?, Context::new(0).map_err(fail)?);
    ensure!(c1.raw_stream() != c2.raw_stream(), "each context has its own stream");
    let (x, y, z) = (c1.alloc(N * 4).map_err(fail)?, c1.alloc(N * 4).map_err(fail)?, c1.alloc(N * 4).map_err(fail)?);
    let cap = c1.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&c1, &x, &y, &z, 13).map_err(fail)?;
    // Another thread works eagerly on the second context of the same device.
    let other = thread::scope(|s| {
        s.spawn(|| -> fc_graph::Result<Vec<f32>> {
            let a = upload(&c2, &vec![1.5f32; N])?;
            let out = c2.alloc(N * 4)?;
            c2.add(&a, &a, &out, N)?;
            c2.synchronize()?;
            download(&out, N)
        })
        .join()
    });
    let got = other.map_err(|_| fail("thread panicked"))?.map_err(fail)?;
    assert_exact("second context", &got, &vec![3.0; N])?;
    ensure!(!c2.is_capturing(), "capture state is per context");
    cap.end().map_err(fail)?.launch().map_err(fail)?;
    c1.synchronize().map_err(fail)
}

/// Re-capturing the same topology on other buffers updates the executable
/// graph in place (drivers with cuGraphExecUpdate); a changed topology is
/// instantiated anew. Either way the graph then computes the new capture.
fn recapture_updates_graph_in_place() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let mut rng = Rng::new(7);
    type Inputs = (Vec<f32>, Vec<f32>, DeviceBuffer, DeviceBuffer, DeviceBuffer);
    let bufs = |rng: &mut Rng| -> fc_graph::Result<Inputs> {
        let xs: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.0, 1.0)).collect();
        let ys: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.5, 1.5)).collect();
        let (x, y) = (upload(&ctx, &xs)?, upload(&ctx, &ys)?);
        Ok((xs, ys, x, y, ctx.alloc(N * 4)?))
    };
    let (_, _, x1, y1, z1) = bufs(&mut rng).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x1, &y1, &z1, 13).map_err(fail)?;
    let mut g = cap.end().map_err(fail)?;
    // Same topology, other buffers.
    let (xs2, ys2, x2, y2, z2) = bufs(&mut rng).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x2, &y2, &z2, 13).map_err(fail)?;
    let report = cap.end_update(&mut g).map_err(fail)?;
    let in_place = fc_graph::driver().map_err(fail)?.cuGraphExecUpdate.is_some();
    println!("update report {report:?} (driver has cuGraphExecUpdate: {in_place})");
    ensure!(report.updated + report.instantiated == 1, "one segment: {report:?}");
    ensure!(!in_place || report.updated == 1, "same topology must update in place: {report:?}");
    g.launch().map_err(fail)?;
    let mut want = xs2.clone();
    chain_cpu(&mut want, &ys2, 13);
    assert_exact("updated graph computes on the new buffers", &download(&x2, N).map_err(fail)?, &want)?;
    // Node counts are not taken at the end of a capture that recorded work
    // (cuGraphGetNodes walks the graph); the update counted both graphs.
    ensure!(g.node_count().map_err(fail)? == 26, "26 nodes (13 pairs) after the update");
    // Changed topology: one more pair. The counts differ, so no update is
    // tried (a failing cuGraphExecUpdate would be an API error to
    // compute-sanitizer, which runs this test).
    x2.upload(&xs2).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x2, &y2, &z2, 14).map_err(fail)?;
    let report = cap.end_update(&mut g).map_err(fail)?;
    ensure!(report.instantiated == 1 && report.updated == 0, "changed topology re-instantiates: {report:?}");
    ensure!(g.node_count().map_err(fail)? == 28, "28 nodes (14 pairs) after the re-instantiation");
    g.launch().map_err(fail)?;
    let mut want = xs2;
    chain_cpu(&mut want, &ys2, 14);
    assert_exact("re-instantiated graph", &download(&x2, N).map_err(fail)?, &want)
}

/// Re-captures into one graph, each changing what the previous recorded:
/// the library's launch sequence tells it without counting nodes whether
/// the topology still matches, and a change never reaches
/// cuGraphExecUpdate as a refused update (compute-sanitizer runs this
/// test): more kernels, other launch kinds (PDL off), a fill in the
/// segment, and, after the stream was handed out (foreign work possible),
/// the node-count check. Every graph computes exactly.
fn recapture_topology_changes_never_reach_the_driver() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let in_place = fc_graph::driver().map_err(fail)?.cuGraphExecUpdate.is_some();
    let pdl = ctx.pdl_enabled();
    let mut rng = Rng::new(41);
    let xs: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.0, 1.0)).collect();
    let ys: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.5, 1.5)).collect();
    let (x, y, z) =
        (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &ys).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let pad = ctx.alloc(64).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&ctx, &x, &y, &z, 13).map_err(fail)?;
    let mut g = cap.end().map_err(fail)?;
    // (what changes, pairs, PDL switch, fill in the segment, stream handed
    // out first, updated in place?)
    let steps: [(&str, usize, bool, bool, bool, bool); 7] = [
        ("same launches", 13, true, false, false, true),
        ("one pair more", 14, true, false, false, false),
        ("same again", 14, true, false, false, true),
        ("PDL off: other edge kinds", 14, false, false, false, !pdl),
        ("a fill in the segment", 14, false, true, false, false),
        ("the same with the fill", 14, false, true, false, true),
        ("stream handed out: counted, same topology", 14, false, true, true, true),
    ];
    for (what, pairs, pdl_on, fill, share, want_updated) in steps {
        ctx.set_pdl(pdl_on);
        if share {
            ensure!(!ctx.raw_stream().is_null(), "{what}: a stream");
        }
        x.upload(&xs).map_err(fail)?;
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
        if fill {
            pad.fill_bytes(0, 64, 7).map_err(fail)?;
        }
        chain(&ctx, &x, &y, &z, pairs).map_err(fail)?;
        let report = cap.end_update(&mut g).map_err(fail)?;
        println!("{what}: {report:?}");
        let want_updated = want_updated && in_place;
        ensure!(
            report.updated == usize::from(want_updated) && report.instantiated == usize::from(!want_updated),
            "{what}: updated in place {want_updated} expected, got {report:?}"
        );
        ensure!(g.node_count().map_err(fail)? == 2 * pairs + usize::from(fill), "{what}: node count");
        g.launch().map_err(fail)?;
        let mut want = xs.clone();
        chain_cpu(&mut want, &ys, pairs);
        assert_exact(what, &download(&x, N).map_err(fail)?, &want)?;
    }
    ctx.set_pdl(true);
    Ok(())
}

/// Another "library" opens a GLOBAL-mode capture on device 0 (PyTorch's
/// default). While it is open, another thread uses fc-graph on device 1:
/// allocate, copy, synchronize, free, load a module, capture, instantiate,
/// launch. Every call must succeed and the foreign capture must survive.
/// A raw, unshielded cuMemAlloc in the same situation is the control: the
/// driver must refuse it, or this test proves nothing.
fn shield_against_foreign_global_capture() -> TestResult {
    let foreign = Context::new(0).map_err(fail)?;
    // The foreign library's GLOBAL capture is a stream capture, as
    // PyTorch's is: this context captures its stream rather than building
    // (a built recording puts no stream in capture mode, so it would
    // refuse nothing and the control below would prove nothing).
    foreign.set_recording_mode(RecordingMode::Capture);
    let (fx, fy) =
        (upload(&foreign, &vec![2.0f32; N]).map_err(fail)?, upload(&foreign, &vec![3.0f32; N]).map_err(fail)?);
    let fz = foreign.alloc(N * 4).map_err(fail)?;
    let work_on_device_1 = || -> fc_graph::Result<()> {
        let ctx = Context::new(1)?;
        for _ in 0..20 {
            let a = upload(&ctx, &vec![1.0f32; N])?;
            let b = ctx.alloc(N * 4)?;
            ctx.add(&a, &a, &b, N)?;
            ctx.synchronize()?;
            let m = Module::from_ptx(&ctx, fc_graph_tests::TEST_PTX)?;
            let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
            ctx.mul(&b, &b, &a, N)?;
            let g = cap.end()?;
            g.launch()?;
            ctx.synchronize()?;
            if download(&a, N)? != vec![4.0f32; N] {
                return Err(Error::InvalidArgument("wrong result on device 1".into()));
            }
            drop((m, g));
        }
        Ok(())
    };
    let cap = foreign.begin_capture(CaptureMode::Global).map_err(fail)?;
    foreign.add(&fx, &fy, &fz, N).map_err(fail)?;
    let ours = thread::scope(|s| s.spawn(work_on_device_1).join()).map_err(|_| fail("thread panicked"))?;
    foreign.mul(&fz, &fy, &fz, N).map_err(fail)?;
    let g = cap.end().map_err(|e| fail(format!("foreign capture destroyed: {e}")))?;
    ours.map_err(|e| fail(format!("fc-graph call refused under a foreign GLOBAL capture: {e}")))?;
    g.launch().map_err(fail)?;
    assert_exact("foreign graph", &download(&fz, N).map_err(fail)?, &vec![15.0; N])?;

    // Control: the same situation without the shield is refused.
    let cap = foreign.begin_capture(CaptureMode::Global).map_err(fail)?;
    foreign.add(&fx, &fy, &fz, N).map_err(fail)?;
    let ctx1 = Context::new(1).map_err(fail)?;
    let rc = thread::scope(|s| {
        s.spawn(|| {
            let raw_ctx = ctx1.raw_context();
            let d = fc_graph::driver().expect("driver loaded above");
            // SAFETY: a valid context; balanced push/pop.
            let _ = unsafe { context::push_current(d, raw_ctx) };
            let rc = match memory::alloc(d, 1 << 20) {
                Ok(p) => {
                    // SAFETY: just allocated, freed once.
                    let _ = unsafe { memory::free(d, p) };
                    CUDA_SUCCESS
                }
                Err(e) => e.code,
            };
            let _ = context::pop_current(d);
            rc
        })
        .join()
    })
    .map_err(|_| fail("thread panicked"))?;
    drop(cap);
    ensure!(
        rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
        "control: an unshielded cuMemAlloc during a GLOBAL capture returned {rc}, expected 900"
    );
    Ok(())
}

/// The engine's seed test, in Rust: captures on device 0 while another
/// thread allocates and synchronizes on device 1. Exact counts.
fn seed_scenario_in_rust() -> TestResult {
    const ROUNDS: usize = 200;
    let a = Context::new(0).map_err(fail)?;
    let b = Context::new(1).map_err(fail)?;
    let (x, y, z) = (a.alloc(N * 4).map_err(fail)?, a.alloc(N * 4).map_err(fail)?, a.alloc(N * 4).map_err(fail)?);
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let interferer = {
        let (b, stop, ok, refused) = (b.clone(), stop.clone(), ok.clone(), refused.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match b.alloc(1 << 20) {
                    Ok(t) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                        if b.synchronize().is_err() {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        drop(t);
                    }
                    Err(_) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    let mut captured = 0;
    let mut failures = Vec::new();
    for _ in 0..ROUNDS {
        let round = || -> fc_graph::Result<()> {
            let cap = a.begin_capture(CaptureMode::ThreadLocal)?;
            chain(&a, &x, &y, &z, 13)?;
            cap.end()?.launch()
        };
        match round() {
            Ok(()) => captured += 1,
            Err(e) => failures.push(e.to_string()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    interferer.join().map_err(|_| fail("interferer panicked"))?;
    a.synchronize().map_err(fail)?;
    let (ok, refused) = (ok.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
    println!("seed scenario: {captured}/{ROUNDS} captures, interferer {ok} ok / {refused} refused");
    ensure!(captured == ROUNDS, "{} captures failed: {:?}", ROUNDS - captured, failures.first());
    ensure!(refused == 0 && ok > 0, "interferer: {ok} ok, {refused} refused");
    Ok(())
}

/// Makes `ctx` current on this thread (raw driver call, as another library
/// would) and returns what was current before.
fn make_current(ctx: CUcontext) -> fc_graph::Result<CUcontext> {
    let d = fc_graph::driver()?;
    let prev = context::get_current(d).unwrap_or(std::ptr::null_mut());
    // SAFETY: a live context (or NULL, which unbinds).
    if let Err(e) = unsafe { context::set_current(d, ctx) } {
        return Err(Error::invalid(format!("cuCtxSetCurrent returned {}", e.code)));
    }
    Ok(prev)
}

fn current_context() -> fc_graph::Result<CUcontext> {
    let d = fc_graph::driver()?;
    Ok(context::get_current(d).unwrap_or(std::ptr::null_mut()))
}

/// An isolated context's built-ins, eager and captured, with another
/// context current on the thread (as another library leaves it): device
/// 0's primary context, then (two devices) device 1's, then none. On
/// CUDA 13+ drivers launches take the context from the function and
/// stream (no binding); on older ones each launch binds the isolated
/// context around itself. Either way the results are exact and the
/// thread's current context is left as it was.
fn builtins_ignore_the_current_context() -> TestResult {
    let iso = Context::isolated(0).map_err(fail)?;
    let keep0 = Context::new(0).map_err(fail)?; // alive while it is made current
    let mut others = vec![keep0.raw_context()];
    let keep1 = if Device::count().map_err(fail)? > 1 { Some(Context::new(1).map_err(fail)?) } else { None };
    if let Some(c) = &keep1 {
        others.push(c.raw_context());
    }
    others.push(std::ptr::null_mut());
    let mut rng = Rng::new(23);
    let xs: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.0, 1.0)).collect();
    let ys: Vec<f32> = (0..N).map(|_| rng.f32_in(-1.5, 1.5)).collect();
    let (x, y, z) =
        (upload(&iso, &xs).map_err(fail)?, upload(&iso, &ys).map_err(fail)?, iso.alloc(N * 4).map_err(fail)?);
    iso.add(&x, &y, &z, N).map_err(fail)?; // loads the built-ins
    let before = current_context().map_err(fail)?;
    let result = (|| -> TestResult {
        for (i, &other) in others.iter().enumerate() {
            make_current(other).map_err(fail)?;
            x.upload(&xs).map_err(fail)?;
            chain(&iso, &x, &y, &z, 13).map_err(fail)?;
            let cap = iso.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
            chain(&iso, &x, &y, &z, 13).map_err(fail)?;
            let g = cap.end().map_err(fail)?;
            ensure!(current_context().map_err(fail)? == other, "case {i}: the current context is left alone");
            g.launch().map_err(fail)?;
            let mut want = xs.clone();
            chain_cpu(&mut want, &ys, 26);
            assert_exact(&format!("case {i}: eager + replayed chain"), &download(&x, N).map_err(fail)?, &want)?;
            ensure!(current_context().map_err(fail)? == other, "case {i}: still left alone");
        }
        Ok(())
    })();
    make_current(before).map_err(fail)?;
    result
}

/// Runs itself again with `FC_BIND_LAUNCHES=1` (read once per process),
/// where launches bind their context first even on CUDA 13+ drivers: the
/// current-context cases and the re-capture sequence are exact that way too.
fn fc_bind_launches_1_binds_every_launch() -> TestResult {
    let env = fc_graph::launch::BIND_LAUNCHES_ENV;
    if std::env::var(env).as_deref() == Ok("1") {
        let version = fc_graph::driver().map_err(fail)?.driver_version();
        ensure!(!fc_graph::launch::unbound_launch_allowed(version, Some("1")), "FC_BIND_LAUNCHES=1 binds");
        builtins_ignore_the_current_context()?;
        return recapture_topology_changes_never_reach_the_driver();
    }
    rerun_with_env(BIND_TEST, env, "1")
}
