//! Check 3: the foreign-GLOBAL-capture shield. A "foreign library" (bare
//! driver calls on a raw stream of this device's primary context, as
//! PyTorch makes them) holds a capture open in GLOBAL mode while another
//! thread makes fc-graph calls on the same device, in a primary-context
//! [`Context`]: allocate, upload, launch, synchronize, capture +
//! instantiate + launch, download, free. Every call must succeed, and the
//! foreign capture must stay active after each of them, end cleanly and
//! replay what it recorded. When that fails, the same scenario is run
//! again with [`Context::isolated`] and its result added to the report.
//! The control: a bare `cuMemAlloc` on another thread during such a
//! capture must be refused with `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`
//! (900); if the driver let it through, this check could not fail and
//! says so.

use std::thread;

use cuda_sys::*;
use fc_graph::{CaptureMode, Context, ContextKind};

use super::common::{download, ensure, upload, Doing, Failure, Outcome, N};
use super::raw::{self, Alloc, Current, Stream};
use super::Target;

/// Rounds of fc-graph work done under the foreign capture.
const ROUNDS: usize = 5;
/// Bytes of the foreign library's buffer; the capture fills the first half
/// with `BEFORE` and the second with `AFTER`.
const FOREIGN_BYTES: usize = 1 << 16;
const BEFORE: u8 = 0x5a;
const AFTER: u8 = 0xa5;

/// The foreign library's stream, handed to the other thread so it can
/// tell after which of its calls the foreign capture stopped being active.
#[derive(Clone, Copy)]
struct Watched(CUstream);

// SAFETY: a stream handle may be used from any thread; the other thread
// only queries its capture status, while this thread keeps it alive.
unsafe impl Send for Watched {}
// SAFETY: as above (read-only use).
unsafe impl Sync for Watched {}

impl Watched {
    /// Fails unless the foreign capture is still active after `what`.
    fn still_active(self, d: &Driver, what: &str) -> Result<(), Failure> {
        // SAFETY: a live stream (kept alive by the thread that owns it);
        // querying a capture is legal during it.
        let status = raw::check(d, unsafe { cuda_sys::result::stream::is_capturing(d, self.0) })
            .doing(&format!("after {what}: query the foreign capture"))?;
        ensure!(
            status == CU_STREAM_CAPTURE_STATUS_ACTIVE,
            "the foreign capture became {} after fc-graph's {what}",
            status_name(status)
        );
        Ok(())
    }
}

/// What the other thread does through fc-graph on `ctx` while the foreign
/// capture is open, checking after each step that the foreign capture
/// survived it.
fn fc_graph_work(d: &Driver, ctx: &Context, foreign: Watched) -> Result<(), Failure> {
    let step = |what: &str| foreign.still_active(d, what);
    for round in 1..=ROUNDS {
        let at = |what: &str| format!("round {round}: {what}");
        let a = upload(ctx, &vec![1.0f32; N]).doing(&at("alloc + upload"))?;
        step(&at("alloc + upload"))?;
        let b = ctx.alloc(N * 4).doing(&at("alloc"))?;
        step(&at("alloc"))?;
        ctx.add(&a, &a, &b, N).doing(&at("eager add"))?;
        step(&at(if round == 1 { "eager add (loading the built-in kernels)" } else { "eager add" }))?;
        ctx.synchronize().doing(&at("synchronize"))?;
        step(&at("synchronize"))?;
        let cap = ctx.begin_capture(CaptureMode::ThreadLocal).doing(&at("begin capture"))?;
        ctx.mul(&b, &b, &a, N).doing(&at("record mul"))?;
        let graph = cap.end().doing(&at("end capture + instantiate"))?;
        step(&at("capture + instantiate"))?;
        graph.launch().doing(&at("graph launch"))?;
        ctx.synchronize().doing(&at("synchronize"))?;
        step(&at("graph launch + synchronize"))?;
        let got = download(&a, N).doing(&at("download"))?;
        step(&at("download"))?;
        ensure!(got.iter().all(|&v| v == 4.0), "round {round}: (1 + 1)^2 computed as {}", got[0]);
        drop(graph);
        step(&at("graph destroy"))?;
        drop((a, b));
        step(&at("free"))?;
    }
    Ok(())
}

/// The scenario: a foreign GLOBAL capture open on this device while
/// another thread works through a fc-graph context of `kind` on it.
fn foreign_capture_survives(d: &Driver, device: usize, kind: ContextKind) -> Result<(), Failure> {
    // Opened before the foreign capture begins (and released after it
    // ends): the calls under test are the work, not context creation.
    let ours = match kind {
        ContextKind::Primary => Context::new(device),
        ContextKind::Isolated => Context::isolated(device),
    }
    .doing("open fc-graph's context")?;
    // The foreign library works in the device's primary context, like the
    // CUDA runtime; this context only keeps it retained.
    let holder = Context::new(device).doing("retain the primary context")?;
    let _current = Current::push(d, holder.raw_context())?;
    let stream = Stream::new(d)?;
    let foreign = Alloc::new(d, FOREIGN_BYTES)?;
    let half = FOREIGN_BYTES / 2;

    let cap = raw::Capture::begin(&stream, CU_STREAM_CAPTURE_MODE_GLOBAL)?;
    foreign.fill(&stream, 0..half, BEFORE).doing("foreign capture: record the first fill")?;
    let watched = Watched(stream.raw);
    let worked = thread::scope(|s| s.spawn(|| fc_graph_work(d, &ours, watched)).join())
        .map_err(|_| Failure("the fc-graph thread panicked".into()))?;
    worked?;
    let status = stream.capture_status().doing("foreign capture: query its status")?;
    ensure!(
        status == CU_STREAM_CAPTURE_STATUS_ACTIVE,
        "the foreign capture is {} after the fc-graph calls (expected active)",
        status_name(status)
    );
    foreign.fill(&stream, half..FOREIGN_BYTES, AFTER).doing("foreign capture: record the second fill")?;
    let graph = cap.end().doing("foreign capture: end")?;
    let exec = graph.instantiate().doing("foreign graph: instantiate")?;
    foreign.fill(&stream, 0..FOREIGN_BYTES, 0).doing("foreign buffer: clear")?;
    exec.launch(&stream).doing("foreign graph: launch")?;
    let bytes = foreign.read(&stream).doing("foreign graph: read back")?;
    let right = bytes[..half].iter().all(|&b| b == BEFORE) && bytes[half..].iter().all(|&b| b == AFTER);
    ensure!(right, "the foreign graph's replay wrote the wrong bytes");
    Ok(())
}

/// The control: what the driver answers a bare `cuMemAlloc` on another
/// thread while a GLOBAL capture is open on this device.
fn control(d: &Driver, device: usize) -> Result<CUresult, Failure> {
    let holder = Context::new(device).doing("retain the primary context")?;
    let _current = Current::push(d, holder.raw_context())?;
    let stream = Stream::new(d)?;
    let foreign = Alloc::new(d, FOREIGN_BYTES)?;
    let cap = raw::Capture::begin(&stream, CU_STREAM_CAPTURE_MODE_GLOBAL).doing("begin")?;
    foreign.fill(&stream, 0..FOREIGN_BYTES, BEFORE).doing("record a fill")?;
    let rc = thread::scope(|s| s.spawn(|| unshielded_alloc(d, holder.raw_context())).join())
        .map_err(|_| Failure("the thread panicked".into()))??;
    drop(cap); // ends the (probably invalidated) capture
    Ok(rc)
}

/// A bare `cuMemAlloc` with `raw_ctx` current and no shield, as any other
/// library would make it: the driver's answer.
fn unshielded_alloc(d: &Driver, raw_ctx: CUcontext) -> Result<CUresult, Failure> {
    let _current = Current::push(d, raw_ctx)?;
    // A context is current.
    match cuda_sys::result::memory::alloc(d, 1 << 20) {
        Ok(p) => {
            // SAFETY: just allocated, freed once.
            let _ = unsafe { cuda_sys::result::memory::free(d, p) };
            Ok(CUDA_SUCCESS)
        }
        Err(e) => Ok(e.code),
    }
}

fn status_name(s: CUstreamCaptureStatus) -> &'static str {
    match s {
        CU_STREAM_CAPTURE_STATUS_NONE => "not capturing",
        CU_STREAM_CAPTURE_STATUS_ACTIVE => "active",
        CU_STREAM_CAPTURE_STATUS_INVALIDATED => "invalidated",
        _ => "unknown",
    }
}

/// Runs the check.
pub fn run(t: &Target) -> Outcome {
    let d = fc_graph::driver().doing("load the driver")?;
    if let Err(Failure(why)) = foreign_capture_survives(d, t.device, ContextKind::Primary) {
        let isolated = match foreign_capture_survives(d, t.device, ContextKind::Isolated) {
            Ok(()) => "passes".to_string(),
            Err(Failure(f)) => format!("fails too: {f}"),
        };
        return Err(Failure(format!(
            "fc-graph work (primary context) under a foreign GLOBAL capture: {why} [the same with Context::isolated: \
             {isolated}]"
        )));
    }
    let rc = control(d, t.device).doing("control")?;
    ensure!(
        rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
        "control: a bare cuMemAlloc on another thread during the GLOBAL capture returned {} ({rc}), expected \
         CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900); without that refusal this check cannot tell the shield works",
        d.error_name(rc)
    );
    Ok(format!(
        "{ROUNDS} rounds of alloc/upload/add/sync/capture/launch/download/free on another thread (primary context) \
         all succeeded under a foreign GLOBAL capture, which stayed active after each call and replayed correctly; \
         control: a bare cuMemAlloc was refused (900)"
    ))
}
