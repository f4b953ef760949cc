//! GPU suite of recording by construction (issue 18): recordings build
//! their graphs node by node by default, equal to the eager work and to a
//! stream capture of it (results and edges); a foreign device-wide
//! synchronisation cannot invalidate them; re-recordings update the
//! executable node by node (every node, one node, none: no driver call);
//! foreign sections record work enqueued on the context's stream, and a
//! re-recorded one of the same shape updates its child node in place; a
//! context whose stream was handed out records by stream capture in
//! `RecordingMode::Auto`; fills and user kernels become nodes; events are
//! refused while building. Skips visibly without a driver.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use cuda_sys::result::{context, graph, memory};
use cuda_sys::*;
use fc_graph::{
    CaptureMode, Context, DeviceBuffer, Error, Event, Graph, KernelArg, LaunchConfig, Module, RecordingMode,
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
        "gpu_recording",
        vec![
            t("recording_builds_and_equals_eager", 1, recording_builds_and_equals_eager),
            t("recorded_edges_match_the_stream_capture", 1, recorded_edges_match_the_stream_capture),
            t(SYNC_TEST, 1, foreign_device_syncs_cannot_invalidate_a_recording),
            t("re_recordings_update_node_by_node", 1, re_recordings_update_node_by_node),
            t("foreign_section_records_stream_work", 1, foreign_section_records_stream_work),
            t("foreign_section_rules", 1, foreign_section_rules),
            t("re_recorded_foreign_sections_update_in_place", 1, re_recorded_foreign_sections_update_in_place),
            t("handed_out_stream_records_by_capture_in_auto", 1, handed_out_stream_records_by_capture_in_auto),
            t("fills_and_user_kernels_are_nodes", 1, fills_and_user_kernels_are_nodes),
            t("events_are_refused_while_building", 1, events_are_refused_while_building),
            t("launches_from_other_threads_are_recorded", 1, launches_from_other_threads_are_recorded),
            t("isolated_context_recordings_build", 1, isolated_context_recordings_build),
            t("lanes_joined_equal_eager_and_edges_match", 1, lanes_joined_equal_eager_and_edges_match),
            t("lanes_in_a_capturing_recording", 1, lanes_in_a_capturing_recording),
            t("lane_rules", 1, lane_rules),
        ],
    )
}

const N: usize = 4096;
/// 26 built-ins: 13 pairs of (z = x + y; x = z * y).
const PAIRS: usize = 13;

fn inputs(seed: u64) -> (Vec<f32>, Vec<f32>) {
    chain_inputs(seed, N)
}

fn record_chain(ctx: &Context, x: &DeviceBuffer, y: &DeviceBuffer, z: &DeviceBuffer) -> fc_graph::Result<Graph> {
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
    if !cap.builds() {
        return Err(Error::invalid("the recording does not build (FC_RECORDING set?)"));
    }
    chain_n(ctx, x, y, z, N, PAIRS)?;
    cap.end()
}

/// Binds `ctx` on this thread and calls `f` with the driver.
fn with_current<T>(ctx: &Context, f: impl FnOnce(&'static Driver) -> T) -> Result<T, Failed> {
    let d = fc_graph::driver().map_err(fail)?;
    // SAFETY: a context alive while `ctx` is.
    let rc = status(unsafe { context::set_current(d, ctx.raw_context()) });
    ensure!(rc == CUDA_SUCCESS, "cuCtxSetCurrent: {rc}");
    Ok(f(d))
}

/// Edge types of `graph` (255: no edge data), sorted.
fn edge_types(d: &Driver, graph: CUgraph) -> Result<Vec<u8>, Failed> {
    // SAFETY: a live graph, not changed during the call.
    let edges = unsafe { graph::get_edges(d, graph) }.ok_or_else(|| fail("no cuGraphGetEdges"))?;
    let edges = edges.map_err(|e| fail(format!("cuGraphGetEdges: {}", e.code)))?;
    let mut t: Vec<u8> = edges.iter().map(|e| e.data.map_or(255, |d| d.type_)).collect();
    t.sort_unstable();
    Ok(t)
}

fn recording_builds_and_equals_eager() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    ensure!(!ctx.recordings_capture(), "a fresh primary context's recordings should build");
    let (xs, ys) = inputs(1);
    let y = upload(&ctx, &ys).map_err(fail)?;
    let (x_eager, x_rec) = (upload(&ctx, &xs).map_err(fail)?, upload(&ctx, &xs).map_err(fail)?);
    let (z1, z2) = (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    chain_n(&ctx, &x_eager, &y, &z1, N, PAIRS).map_err(fail)?;
    let g = record_chain(&ctx, &x_rec, &y, &z2).map_err(fail)?;
    ensure!(g.built_segments() == 1 && g.node_count().map_err(fail)? == 26, "one built segment of 26 nodes");
    ctx.synchronize().map_err(fail)?;
    assert_exact("recorded work did not run at record time", &download(&x_rec, N).map_err(fail)?, &xs)?;
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut want = xs.clone();
    chain_cpu(&mut want, &ys, PAIRS);
    let eager = download(&x_eager, N).map_err(fail)?;
    assert_exact("eager vs CPU", &eager, &want)?;
    assert_exact("recorded vs eager", &download(&x_rec, N).map_err(fail)?, &eager)?;
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("second replay", &download(&x_rec, N).map_err(fail)?, &want)?;
    println!("gpu_recording: pdl_enabled {}", ctx.pdl_enabled());
    Ok(())
}

/// The recording's graph has the edges a stream capture of the same eager
/// calls has (programmatic where the built-ins use PDL), as a chain.
fn recorded_edges_match_the_stream_capture() -> TestResult {
    let built_ctx = Context::new(0).map_err(fail)?;
    let captured_ctx = Context::new(0).map_err(fail)?;
    captured_ctx.set_recording_mode(RecordingMode::Capture);
    let (xs, ys) = inputs(2);
    let (x, y, z) = (
        upload(&built_ctx, &xs).map_err(fail)?,
        upload(&built_ctx, &ys).map_err(fail)?,
        built_ctx.alloc(N * 4).map_err(fail)?,
    );
    let built = record_chain(&built_ctx, &x, &y, &z).map_err(fail)?;
    let cap = captured_ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ensure!(!cap.builds(), "RecordingMode::Capture should capture");
    chain_n(&captured_ctx, &x, &y, &z, N, PAIRS).map_err(fail)?;
    let captured = cap.end().map_err(fail)?;
    ensure!(captured.built_segments() == 0, "the captured graph is no built one");
    let d = fc_graph::driver().map_err(fail)?;
    if !d.has_edge_data() {
        println!("[SKIP] gpu_recording::recorded_edges_match_the_stream_capture: needs edge data (CUDA 12.3+)");
        return Ok(());
    }
    let (b, c) = (built.raw_graphs(), captured.raw_graphs());
    ensure!(b.len() == 1 && c.len() == 1, "one graph each");
    let tb = with_current(&built_ctx, |d| edge_types(d, b[0]))??;
    let tc = with_current(&captured_ctx, |d| edge_types(d, c[0]))??;
    ensure!(tb.len() == 25, "a chain of 26 has 25 edges, got {}", tb.len());
    ensure!(tb == tc, "edge types: built {tb:?}, captured {tc:?}");
    println!("gpu_recording: 25 edges, types {:?}", &tb[..1]);
    Ok(())
}

/// The device-wide synchronisation test's name, and the variable under
/// which it runs alone.
const SYNC_TEST: &str = "foreign_device_syncs_cannot_invalidate_a_recording";
const ALONE_ENV: &str = "FC_TEST_ALONE";

/// A foreign thread loops `cuCtxSynchronize` on the primary context (what
/// `cudaDeviceSynchronize` does) while 300 recordings of 26 kernels are
/// made, instantiated and replayed there: none fails, no sync fails.
///
/// It runs in a process of its own (this binary again, with
/// `FC_TEST_ALONE=1`): its syncs would invalidate the stream captures other
/// tests of this binary open on the same primary context meanwhile (foreign
/// sections capture), which is the driver's rule, not a fault of theirs.
fn foreign_device_syncs_cannot_invalidate_a_recording() -> TestResult {
    if std::env::var_os(ALONE_ENV).is_none() {
        return rerun_with_env(SYNC_TEST, ALONE_ENV, "1");
    }
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(3);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (syncs, failed_syncs) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let raw = ctx.raw_context() as usize;
    let foreign = {
        let (stop, syncs, failed_syncs) = (Arc::clone(&stop), Arc::clone(&syncs), Arc::clone(&failed_syncs));
        std::thread::spawn(move || {
            let Ok(d) = fc_graph::driver() else { return };
            // SAFETY: the primary context, retained by the test's context.
            let _ = unsafe { context::set_current(d, raw as CUcontext) };
            while !stop.load(Ordering::Relaxed) {
                // The context is current.
                let rc = status(context::synchronize(d));
                syncs.fetch_add(1, Ordering::Relaxed);
                if rc != CUDA_SUCCESS {
                    failed_syncs.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let mut failures = Vec::new();
    let rounds = 300;
    for _ in 0..rounds {
        match record_chain(&ctx, &x, &y, &z).and_then(|g| g.launch()) {
            Ok(()) => {}
            Err(e) => failures.push(e.to_string()),
        }
    }
    let synced = ctx.synchronize();
    stop.store(true, Ordering::Relaxed);
    foreign.join().map_err(|_| fail("the foreign thread panicked"))?;
    synced.map_err(fail)?;
    let (s, f) = (syncs.load(Ordering::Relaxed), failed_syncs.load(Ordering::Relaxed));
    println!("gpu_recording: {rounds} recordings + replays, {} failed; {s} foreign syncs, {f} failed", failures.len());
    ensure!(failures.is_empty(), "recordings failed: {:?}", &failures[..failures.len().min(3)]);
    ensure!(f == 0, "{f} of {s} foreign syncs failed");
    ensure!(s > 0, "the foreign thread never synchronised");
    let mut want = xs;
    for _ in 0..rounds {
        chain_cpu(&mut want, &ys, PAIRS);
    }
    assert_exact("after every replay", &download(&x, N).map_err(fail)?, &want)
}

/// Re-recordings into the same graph: every node changed (26 calls), one
/// node changed (1 call), nothing changed (no call); results follow.
fn re_recordings_update_node_by_node() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(4);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let x2 = upload(&ctx, &xs).map_err(fail)?;
    let mut g = record_chain(&ctx, &x, &y, &z).map_err(fail)?;
    let rerecord = |g: &mut Graph, xb: &DeviceBuffer, first_n: usize| -> fc_graph::Result<fc_graph::UpdateReport> {
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
        for i in 0..PAIRS {
            ctx.add(xb, &y, &z, if i == 0 { first_n } else { N })?;
            ctx.mul(&z, &y, xb, N)?;
        }
        cap.end_update(g)
    };
    // Every node: other x.
    let r = rerecord(&mut g, &x2, N).map_err(fail)?;
    ensure!(r.updated == 1 && r.instantiated == 0 && r.node_calls == 26, "all changed: {r:?}");
    // One node: the first add over fewer elements.
    let r = rerecord(&mut g, &x2, N / 2).map_err(fail)?;
    ensure!(r.updated == 1 && r.node_calls == 1, "one changed: {r:?}");
    // Nothing.
    let r = rerecord(&mut g, &x2, N / 2).map_err(fail)?;
    ensure!(r.updated == 1 && r.node_calls == 0, "none changed: {r:?}");
    // Back to every element: one node; then replay and compare with the CPU.
    let r = rerecord(&mut g, &x2, N).map_err(fail)?;
    ensure!(r.node_calls == 1, "back: {r:?}");
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut want = xs.clone();
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("updated graph writes x2", &download(&x2, N).map_err(fail)?, &want)?;
    assert_exact("x untouched", &download(&x, N).map_err(fail)?, &xs)?;
    // Another length: instantiated anew (no node-by-node update possible).
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ctx.add(&x, &y, &z, N).map_err(fail)?;
    let r = cap.end_update(&mut g).map_err(fail)?;
    ensure!(r.updated + r.instantiated == 1 && r.node_calls == 0, "another topology: {r:?}");
    ensure!(g.node_count().map_err(fail)? == 1, "one node now");
    println!("gpu_recording: node-by-node updates: all 26 calls, one 1, none 0");
    Ok(())
}

/// A foreign section records work enqueued on the context's stream (here
/// a driver memset, as another library would enqueue), between the
/// library's own nodes, as one child node; the result equals eager.
fn foreign_section_records_stream_work() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    ctx.set_recording_mode(RecordingMode::Build);
    let (xs, ys) = inputs(5);
    let (x, y, z, w) = (
        upload(&ctx, &xs).map_err(fail)?,
        upload(&ctx, &ys).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
    );
    let wraw = w.as_raw();
    let mut cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ensure!(cap.builds(), "Build mode builds, also after raw_stream");
    ctx.add(&x, &y, &z, N).map_err(fail)?; // z = x + y
    let stream_seen = cap
        .foreign(CaptureMode::ThreadLocal, |stream| {
            let d = fc_graph::driver()?;
            // SAFETY: the context's stream, capturing; `w` holds N * 4 bytes.
            let rc = status(unsafe { memory::memset_d8_async(d, wraw, 0x40, N * 4, stream) });
            if rc != CUDA_SUCCESS {
                return Err(Error::invalid(format!("cuMemsetD8Async in the foreign section: {rc}")));
            }
            ctx.mul(&z, &w, &z, N)?; // our own work inside the section: captured with it
            Ok(stream)
        })
        .map_err(fail)?;
    ensure!(stream_seen == ctx.raw_stream(), "the section hands out the context's stream");
    ctx.add(&z, &y, &x, N).map_err(fail)?; // x = z + y
    let g = cap.end().map_err(fail)?;
    ensure!(g.node_count().map_err(fail)? == 3, "add, child, add: {} nodes", g.node_count().map_err(fail)?);
    ctx.synchronize().map_err(fail)?;
    assert_exact("nothing ran at record time", &download(&x, N).map_err(fail)?, &xs)?;
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let wv = f32::from_bits(0x4040_4040);
    let want: Vec<f32> = (0..N).map(|i| ((xs[i] + ys[i]) * wv) + ys[i]).collect();
    assert_exact("recorded foreign section", &download(&x, N).map_err(fail)?, &want)?;
    Ok(())
}

/// Re-recordings whose foreign section captured work of the same shape
/// update its child node in place (`cuGraphExecChildGraphNodeSetParams`:
/// one call) beside the library's own nodes; a section of another shape
/// is instantiated anew; every replay equals the CPU.
fn re_recorded_foreign_sections_update_in_place() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    ctx.set_recording_mode(RecordingMode::Build);
    let (xs, ys) = inputs(7);
    let (_, ys2) = inputs(8);
    let (x, y, y2, z, w) = (
        upload(&ctx, &xs).map_err(fail)?,
        upload(&ctx, &ys).map_err(fail)?,
        upload(&ctx, &ys2).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
    );
    let wraw = w.as_raw();
    // x = ((x + y) * w) + y, with w filled with `byte` (once, or twice) in
    // the foreign section.
    let record = |byte: u8, fills: usize, yb: &DeviceBuffer| -> fc_graph::Result<fc_graph::Capture> {
        let mut cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
        ctx.add(&x, yb, &z, N)?;
        cap.foreign(CaptureMode::ThreadLocal, |stream| {
            let d = fc_graph::driver()?;
            for _ in 0..fills {
                // SAFETY: the context's stream, capturing; `w` holds N * 4 bytes.
                let rc = status(unsafe { memory::memset_d8_async(d, wraw, byte, N * 4, stream) });
                if rc != CUDA_SUCCESS {
                    return Err(Error::invalid(format!("cuMemsetD8Async in the foreign section: {rc}")));
                }
            }
            ctx.mul(&z, &w, &z, N)
        })?;
        ctx.add(&z, yb, &x, N)?;
        Ok(cap)
    };
    let check = |g: &Graph, byte: u8, ys: &[f32], what: &str| -> TestResult {
        x.upload(&xs).map_err(fail)?;
        g.launch().map_err(fail)?;
        ctx.synchronize().map_err(fail)?;
        let wv = f32::from_bits(u32::from_ne_bytes([byte; 4]));
        let want: Vec<f32> = (0..N).map(|i| ((xs[i] + ys[i]) * wv) + ys[i]).collect();
        assert_exact(what, &download(&x, N).map_err(fail)?, &want)
    };
    let mut g = record(0x40, 1, &y).map_err(fail)?.end().map_err(fail)?;
    check(&g, 0x40, &ys, "first recording")?;
    let r = record(0x3f, 1, &y).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(r.updated == 1 && r.instantiated == 0 && r.node_calls == 1, "another fill value: the child only: {r:?}");
    check(&g, 0x3f, &ys, "the child node's new fill")?;
    let r = record(0x3f, 1, &y2).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(r.updated == 1 && r.instantiated == 0 && r.node_calls == 3, "both adds and the child: {r:?}");
    check(&g, 0x3f, &ys2, "the adds read y2")?;
    let r = record(0x40, 2, &y2).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(r.instantiated == 1 && r.node_calls == 0, "a section of another shape: instantiated anew: {r:?}");
    check(&g, 0x40, &ys2, "after re-instantiation")?;
    let r = record(0x41, 2, &y2).map_err(fail)?.end_update(&mut g).map_err(fail)?;
    ensure!(r.updated == 1 && r.instantiated == 0 && r.node_calls == 1, "the new shape, in place again: {r:?}");
    check(&g, 0x41, &ys2, "the new shape's child updated")?;
    // A section of one node and no edge (w = byte), then z = x + w.
    let fill_only = |byte: u8| -> fc_graph::Result<fc_graph::Capture> {
        let mut cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
        cap.foreign(CaptureMode::ThreadLocal, |stream| {
            let d = fc_graph::driver()?;
            // SAFETY: the context's stream, capturing; `w` holds N * 4 bytes.
            let rc = status(unsafe { memory::memset_d8_async(d, wraw, byte, N * 4, stream) });
            if rc != CUDA_SUCCESS {
                return Err(Error::invalid(format!("cuMemsetD8Async in the foreign section: {rc}")));
            }
            Ok(())
        })?;
        ctx.add(&x, &w, &z, N)?;
        Ok(cap)
    };
    let mut g1 = fill_only(0x40).map_err(fail)?.end().map_err(fail)?;
    let r = fill_only(0x3f).map_err(fail)?.end_update(&mut g1).map_err(fail)?;
    ensure!(r.updated == 1 && r.instantiated == 0 && r.node_calls == 1, "a one-node section in place: {r:?}");
    x.upload(&xs).map_err(fail)?;
    g1.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let wv = f32::from_bits(0x3f3f_3f3f);
    let want: Vec<f32> = xs.iter().map(|v| v + wv).collect();
    assert_exact("the one-node section's new fill", &download(&z, N).map_err(fail)?, &want)
}

/// Breaks inside a section are refused (the section intact); a second
/// begin is refused; `end` closes an open section and keeps its work.
fn foreign_section_rules() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(6);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let mut cap = ctx.begin_breakable::<()>(CaptureMode::ThreadLocal).map_err(fail)?;
    ensure!(matches!(cap.foreign_end(), Err(Error::CaptureState(_))), "end without a section");
    cap.foreign_begin(CaptureMode::ThreadLocal).map_err(fail)?;
    ensure!(matches!(cap.foreign_begin(CaptureMode::ThreadLocal), Err(Error::CaptureState(_))), "a second section");
    ensure!(matches!(cap.brk(&(), |_, _| Ok(())), Err(Error::CaptureState(_))), "a break in a section");
    ctx.add(&x, &y, &z, N).map_err(fail)?; // inside the section: captured
    let g = cap.end().map_err(fail)?; // ends the section, keeps its work
    ensure!(g.node_count().map_err(fail)? == 1, "the section's child node");
    g.launch().map_err(fail)?;
    let want: Vec<f32> = (0..N).map(|i| xs[i] + ys[i]).collect();
    assert_exact("section kept by end", &download(&z, N).map_err(fail)?, &want)?;
    // The context records normally afterwards.
    let g = record_chain(&ctx, &x, &y, &z).map_err(fail)?;
    ensure!(g.built_segments() == 1, "built again");
    Ok(())
}

/// In `RecordingMode::Auto`, once the stream's handle was handed out, a
/// recording captures the stream: work anyone enqueues on it is recorded.
fn handed_out_stream_records_by_capture_in_auto() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    ensure!(ctx.recording_mode() == RecordingMode::Auto, "default mode");
    let (xs, ys) = inputs(7);
    let (x, y, z, w) = (
        upload(&ctx, &xs).map_err(fail)?,
        upload(&ctx, &ys).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
    );
    let stream = ctx.raw_stream();
    ensure!(ctx.stream_handed_out() && ctx.recordings_capture(), "a handed-out stream captures in Auto");
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ensure!(!cap.builds(), "captures");
    ctx.add(&x, &y, &z, N).map_err(fail)?;
    let d = fc_graph::driver().map_err(fail)?;
    // SAFETY: the context's stream, capturing; `w` holds N * 4 bytes.
    let rc = status(unsafe { memory::memset_d8_async(d, w.as_raw(), 0x40, N * 4, stream) });
    ensure!(rc == CUDA_SUCCESS, "memset on the capturing stream: {rc}");
    ctx.mul(&z, &w, &x, N).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    ensure!(g.built_segments() == 0, "a stream capture");
    g.launch().map_err(fail)?;
    let wv = f32::from_bits(0x4040_4040);
    let want: Vec<f32> = (0..N).map(|i| (xs[i] + ys[i]) * wv).collect();
    assert_exact("foreign work on the cached stream was recorded", &download(&x, N).map_err(fail)?, &want)?;
    // Build mode on the same context: built again.
    ctx.set_recording_mode(RecordingMode::Build);
    let g = record_chain(&ctx, &x, &y, &z).map_err(fail)?;
    ensure!(g.built_segments() == 1, "Build mode builds");
    Ok(())
}

fn fills_and_user_kernels_are_nodes() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let module = Module::from_ptx(&ctx, TEST_PTX).map_err(fail)?;
    let scale = module.kernel("scale_f32").map_err(fail)?;
    let (xs, _) = inputs(8);
    let (x, out) = (upload(&ctx, &xs).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
    let run = |ctx: &Context| -> fc_graph::Result<()> {
        out.fill_bytes(0, N * 4, 0)?;
        out.fill_bytes(0, 16, 0x3f)?; // first 4 floats: 0x3f3f3f3f
        scale.launch_on(
            ctx,
            LaunchConfig::for_elements(N as u32 / 2, 256),
            &[KernelArg::Buffer(&x), KernelArg::F32(-2.0), KernelArg::Buffer(&out), KernelArg::U32(N as u32 / 2)],
        )
    };
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    run(&ctx).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    ensure!(g.built_segments() == 1 && g.node_count().map_err(fail)? == 3, "two memsets and a kernel");
    out.fill_bytes(0, N * 4, 0x7f).map_err(fail)?;
    g.launch().map_err(fail)?;
    let got = download(&out, N).map_err(fail)?;
    run(&ctx).map_err(fail)?;
    let eager = download(&out, N).map_err(fail)?;
    assert_exact("recorded fills + user kernel vs eager", &got, &eager)?;
    ensure!(eager[0] == xs[0] * -2.0 && eager[N - 1] == 0.0, "eager result itself");
    Ok(())
}

fn events_are_refused_while_building() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let e = Event::new(&ctx).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ensure!(matches!(e.record(), Err(Error::CaptureState(_))), "an event record while building");
    drop(cap);
    e.record().map_err(fail)?;
    e.synchronize().map_err(fail)?;
    Ok(())
}

/// Launches on the context from another thread while a recording is open
/// are recorded (as a stream capture would take them), not run.
fn launches_from_other_threads_are_recorded() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(9);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    std::thread::scope(|s| s.spawn(|| chain_n(&ctx, &x, &y, &z, N, PAIRS)).join())
        .map_err(|_| fail("thread panicked"))?
        .map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    assert_exact("not run at record time", &download(&x, N).map_err(fail)?, &xs)?;
    g.launch().map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("recorded from another thread", &download(&x, N).map_err(fail)?, &want)
}

fn isolated_context_recordings_build() -> TestResult {
    let ctx = Context::isolated(0).map_err(fail)?;
    let (xs, ys) = inputs(10);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    let mut g = record_chain(&ctx, &x, &y, &z).map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain_n(&ctx, &x, &y, &z, N, PAIRS).map_err(fail)?;
    let r = cap.end_update(&mut g).map_err(fail)?;
    ensure!(r.updated == 1 && r.node_calls == 0, "unchanged: {r:?}");
    g.launch().map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact(&format!("{:?} context", ctx.isolation()), &download(&x, N).map_err(fail)?, &want)
}

/// Two lanes of 26 kernels each, joined, then 26 more on lane 0 that
/// combine them: eager (lanes are streams) and recorded (lanes are edges)
/// give the CPU's results; the recorded graph has 78 nodes and the edges
/// of that shape (25 + 25 inside the lanes, 2 joins, 25 after).
fn lanes_joined_equal_eager_and_edges_match() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let (xs, ys) = inputs(11);
    let (x2s, _) = inputs(12);
    let y = upload(&ctx, &ys).map_err(fail)?;
    let run = |ctx: &Context,
               x1: &DeviceBuffer,
               x2: &DeviceBuffer,
               z1: &DeviceBuffer,
               z2: &DeviceBuffer|
     -> fc_graph::Result<()> {
        let lanes = ctx.fork(2)?;
        chain_n(&lanes[0], x1, &y, z1, N, PAIRS)?;
        chain_n(&lanes[1], x2, &y, z2, N, PAIRS)?;
        ctx.join(&lanes)?;
        ctx.add(x1, x2, z1, N)?; // z1 = x1 + x2
        chain_n(ctx, z1, &y, z2, N, PAIRS)?; // 26 more on lane 0, on z1
        Ok(())
    };
    let bufs = || -> fc_graph::Result<[DeviceBuffer; 4]> {
        Ok([upload(&ctx, &xs)?, upload(&ctx, &x2s)?, ctx.alloc(N * 4)?, ctx.alloc(N * 4)?])
    };
    let [a1, a2, az1, az2] = bufs().map_err(fail)?;
    run(&ctx, &a1, &a2, &az1, &az2).map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut w1 = xs.clone();
    chain_cpu(&mut w1, &ys, PAIRS);
    let mut w2 = x2s.clone();
    chain_cpu(&mut w2, &ys, PAIRS);
    let mut want: Vec<f32> = (0..N).map(|i| w1[i] + w2[i]).collect();
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("eager lanes vs CPU", &download(&az1, N).map_err(fail)?, &want)?;

    let [b1, b2, bz1, bz2] = bufs().map_err(fail)?;
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    run(&ctx, &b1, &b2, &bz1, &bz2).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    ensure!(g.built_segments() == 1 && g.node_count().map_err(fail)? == 79, "79 nodes: {:?}", g.node_count());
    ctx.synchronize().map_err(fail)?;
    assert_exact("not run at record time", &download(&b1, N).map_err(fail)?, &xs)?;
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    assert_exact("recorded lanes vs eager", &download(&bz1, N).map_err(fail)?, &want)?;
    let d = fc_graph::driver().map_err(fail)?;
    let graphs = g.raw_graphs();
    let types = with_current(&ctx, |d| edge_types(d, graphs[0]))??;
    // 25 + 25 inside the lanes, the add after both (2), 26 after it.
    ensure!(types.len() == 78, "{} edges, want 78", types.len());
    if d.has_edge_data() && ctx.pdl_enabled() {
        let programmatic = types.iter().filter(|&&t| t == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8).count();
        // The join's two edges are full; every single-kernel dependency of
        // a PDL launch is programmatic.
        ensure!(programmatic == 76, "{programmatic} programmatic edges of 78, want 76");
    }
    println!("gpu_recording: lanes 2 x 26 + join + 27: 79 nodes, 78 edges, results equal eager");
    Ok(())
}

/// In a recording that captures the stream, lanes are the eager events
/// (the driver's cross-stream capture): forked and joined, the work of both
/// lanes is recorded.
fn lanes_in_a_capturing_recording() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    ctx.set_recording_mode(RecordingMode::Capture);
    let (xs, ys) = inputs(13);
    let (x1, x2, y, z1, z2) = (
        upload(&ctx, &xs).map_err(fail)?,
        upload(&ctx, &xs).map_err(fail)?,
        upload(&ctx, &ys).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
        ctx.alloc(N * 4).map_err(fail)?,
    );
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    ensure!(!cap.builds(), "captures");
    let lanes = ctx.fork(2).map_err(fail)?;
    chain_n(&lanes[0], &x1, &y, &z1, N, PAIRS).map_err(fail)?;
    chain_n(&lanes[1], &x2, &y, &z2, N, PAIRS).map_err(fail)?;
    ctx.join(&lanes).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    ensure!(g.node_count().map_err(fail)? >= 52, "both lanes recorded: {:?}", g.node_count());
    g.launch().map_err(fail)?;
    ctx.synchronize().map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("lane 1", &download(&x1, N).map_err(fail)?, &want)?;
    assert_exact("lane 2", &download(&x2, N).map_err(fail)?, &want)
}

fn lane_rules() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let other = Context::new(0).map_err(fail)?;
    let l1 = ctx.lane(1).map_err(fail)?;
    ensure!(l1.lane_index() == 1 && ctx.lane_index() == 0, "lane indices");
    ensure!(l1.same_context(&ctx) && !other.same_context(&ctx), "same_context");
    ensure!(matches!(ctx.lane(fc_graph::lanes::MAX_LANES), Err(Error::InvalidArgument(_))), "past the last lane");
    ensure!(matches!(ctx.wait_lane(&other.lane(1).map_err(fail)?), Err(Error::InvalidArgument(_))), "another context");
    ensure!(matches!(ctx.fork(0), Err(Error::InvalidArgument(_))), "fork(0)");
    ensure!(
        matches!(l1.begin_capture(CaptureMode::ThreadLocal), Err(Error::CaptureState(_))),
        "a recording begins on lane 0"
    );
    ensure!(l1.raw_stream() != ctx.raw_stream(), "a lane has a stream of its own");
    // While a foreign section captures one lane's stream, the other lanes
    // go on recording, and waits from or for the section's lane are
    // refused. A section on lane 1 records that lane's work as one child
    // node after the lane's earlier work. (`raw_stream` above made this
    // context's recordings capture in Auto mode: build.)
    {
        ctx.set_recording_mode(RecordingMode::Build);
        let (xs, ys) = inputs(15);
        let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
        let (x2, z2) = (upload(&ctx, &xs).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
        let mut cap = ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
        ensure!(cap.builds(), "Build mode builds");
        cap.foreign_begin(CaptureMode::ThreadLocal).map_err(fail)?;
        l1.add(&x, &y, &z, N).map_err(fail)?; // lane 1: recorded as a node
        ensure!(matches!(ctx.wait_lane(&l1), Err(Error::CaptureState(_))), "a lane wait in a foreign section");
        cap.foreign_end().map_err(fail)?; // empty: no node
        cap.foreign_begin_on(&l1, CaptureMode::ThreadLocal).map_err(fail)?;
        l1.mul(&z, &y, &x, N).map_err(fail)?; // captured by lane 1's section
        ensure!(matches!(l1.wait_lane(&ctx), Err(Error::CaptureState(_))), "the section's lane cannot wait");
        ctx.add(&x2, &y, &z2, N).map_err(fail)?; // lane 0: recorded as a node meanwhile
        cap.foreign_end().map_err(fail)?;
        ctx.join(std::slice::from_ref(&l1)).map_err(fail)?;
        let g = cap.end().map_err(fail)?;
        ensure!(g.node_count().map_err(fail)? == 3, "lane 1's add, its section (one child) and lane 0's add");
        x.upload(&xs).map_err(fail)?;
        g.launch().map_err(fail)?;
        let mut want = xs.clone();
        chain_cpu(&mut want, &ys, 1);
        assert_exact("lane 1: add, then the section's mul", &download(&x, N).map_err(fail)?, &want)?;
        let sum: Vec<f32> = xs.iter().zip(&ys).map(|(a, b)| a + b).collect();
        assert_exact("lane 0's add beside the section", &download(&z2, N).map_err(fail)?, &sum)?;
        ctx.set_recording_mode(RecordingMode::Auto);
    }
    // Eagerly a lane's synchronize waits for that lane.
    let (xs, ys) = inputs(14);
    let (x, y, z) = chain_buffers(&ctx, &xs, &ys).map_err(fail)?;
    l1.wait_lane(&ctx).map_err(fail)?;
    chain_n(&l1, &x, &y, &z, N, PAIRS).map_err(fail)?;
    l1.synchronize().map_err(fail)?;
    let mut want = xs;
    chain_cpu(&mut want, &ys, PAIRS);
    assert_exact("eager lane", &download(&x, N).map_err(fail)?, &want)
}
