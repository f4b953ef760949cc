//! Contexts: a device's CUDA context plus a non-blocking stream of our own.
//!
//! Two kinds (see [`Context::new`] and [`Context::isolated`]):
//! - **primary**: the device's primary context, shared with the CUDA runtime
//!   and every library in the process (PyTorch, cuBLAS, NCCL); memory and
//!   modules are shared with them;
//! - **isolated**: a green context over all the device's SMs where the
//!   driver has them (CUDA 12.4+), else a private context of our own
//!   (`cuCtxCreate`) (see [`crate::isolation`] and [`Context::isolation`]);
//!   another library's device-wide synchronisation or capture neither sees
//!   nor invalidates its captures, at the price of objects that other
//!   contexts' kernels cannot use.
//!
//! Several contexts on one device are independent (each its own stream,
//! capture state and capture pool).
//!
//! # Parts
//!
//! A [`Context`] is a handle (a lane and its stream) on shared state made
//! of six parts, each a crate-private type of its own in `context/`; the
//! context holds them, hands out references (`Context::cuda()`,
//! `recorder()`, `kernels()`, `capture()`, `pool()`) and tears them down
//! in order. The rest of the crate asks for the part it needs and uses
//! its methods, never another part's fields:
//!
//! - **CUDA context** (`cuda_context.rs`, `CudaContext`): the device, how
//!   it is isolated, the raw handle and how it is made current (a green
//!   context's gate), who owns its memory; released last. Every object
//!   made in the context binds it for its driver calls (buffers, graphs,
//!   modules, recordings, events, built-in and setter kernels); `api.rs`
//!   answers [`Context::device`], [`Context::isolation`],
//!   [`Context::raw_context`] and memory-sharing checks from it.
//! - **Streams** (`streams.rs`, `Streams`): the context's own stream and,
//!   made on first use, each lane's stream and event: the lane handles
//!   ([`Context::lane`], [`crate::lanes`]) and the teardown.
//! - **Recorder** (`recorder.rs`, `Recorder`): the sink that takes the
//!   library's work while a recording builds, the trace of what a
//!   stream-captured segment recorded (and whether the stream was handed
//!   out), the recording mode. Fed by every launch path (built-ins, user
//!   kernels, fills, events, lane waits); opened, closed and read by
//!   [`crate::recording`], [`crate::conditional`] and [`crate::graph`].
//! - **Capture state** (`capture_control.rs`, `CaptureControl`): the one
//!   open recording's state machine ([`crate::capture_state`]), its first
//!   failure, the break frames and thread values. Used by
//!   [`crate::recording`] (begin, close, capture-time breaks),
//!   [`crate::graph`] (breaks at replay), [`crate::cache`] (may a capture
//!   begin), the calls refused while the stream records (copies,
//!   synchronisation, replays) and every driver failure (noted).
//! - **Capture pool** (`capture_pool.rs`, `CapturePool`): memory allocated
//!   while the context records ([`crate::buffer`]; bookkeeping in
//!   [`crate::pool`]).
//! - **Kernel set** (`kernels.rs`, `KernelSet`): the PDL switch, the
//!   built-in kernels ([`crate::builtins`]) and the conditional setters
//!   ([`crate::conditional`]); [`crate::launch`] and [`crate::module`]
//!   read the switch.
//!
//! The public methods that answer from one part are in `api.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cuda_sys::*;

use crate::device::Device;
use crate::driver::{driver, shielded};
use crate::error::{Error, Result};
use crate::isolation::{self, IsolationRequest, Plan};
use crate::recording_mode::RecordingMode;
use crate::segment::Op;

mod api;
mod capture_control;
mod capture_pool;
mod cuda_context;
mod kernels;
mod recorder;
// Crate-visible for `crate::lanes`, which re-exports `MAX_LANES`.
pub(crate) mod streams;
#[cfg(test)]
mod tests;

/// Where the type was defined before it moved beside the capture modules:
/// the path `fc_graph::context::CaptureMode` stays.
pub use crate::capture_mode::CaptureMode;
use capture_control::CaptureControl;
use capture_pool::CapturePool;
pub(crate) use cuda_context::CudaContext;
use kernels::KernelSet;
pub(crate) use recorder::Recorder;
use streams::{LaneStream, Streams};

/// Which CUDA context a [`Context`] runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextKind {
    /// The device's primary context (shared with the CUDA runtime).
    Primary,
    /// A context created for this [`Context`] alone: a green context or a
    /// private one ([`Context::isolation`] tells which).
    Isolated,
}

/// A context on one device. Cheap to clone (shared handle); `Send + Sync`.
/// A clone may stand for one of the context's lanes ([`Context::lane`]):
/// its work goes on that lane.
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
    /// The lane this handle queues work on (0: the context's own stream).
    lane: u32,
    /// That lane's stream.
    stream: CUstream,
}

// SAFETY: the shared state is `Send + Sync` (its parts'); the stream is a
// driver handle usable from any thread, owned by that state.
unsafe impl Send for Context {}
// SAFETY: as above; both fields beside it are immutable.
unsafe impl Sync for Context {}

/// The parts (see the [module docs](self)), `repr(C)` in this order so
/// that what every launch reads lies in the allocation's first four cache
/// lines, beside the reference counts. An eager built-in launch
/// (`Context::add`/`mul`, then `launch::launch_kernel`) reads the CUDA
/// context's raw handle (`check_usable` on each operand; the binding where
/// a launch needs it), the PDL switch and the built-ins (functions and
/// variant), the segment trace (the launch noted) and the sink's `active`
/// flag (whether a recording builds; a recording's launch then takes the
/// sink's lock, which follows it); the stream is the handle's own field.
/// Each of these parts starts with those fields (the layout test checks
/// it); the cold parts come last. Fields drop in this order after
/// `Drop::drop` has torn everything down, the CUDA context first.
#[repr(C)]
pub(crate) struct ContextInner {
    cuda: CudaContext,
    kernels: KernelSet,
    recorder: Recorder,
    streams: Streams,
    capture: CaptureControl,
    pool: CapturePool,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.device_id())
            .field("kind", &self.kind())
            .field("isolation", &self.isolation())
            .field("lane", &self.lane)
            .field("stream", &self.stream)
            .finish()
    }
}

/// Contexts alive in the process (created and not yet torn down).
static LIVE: AtomicUsize = AtomicUsize::new(0);

impl Context {
    /// A context for device `ordinal` in its **primary** context (retained),
    /// plus a new non-blocking stream. Memory and modules are shared with
    /// every other user of the primary context (the CUDA runtime, PyTorch,
    /// cuBLAS, NCCL), so their pointers can be used here and ours there.
    pub fn new(ordinal: usize) -> Result<Context> {
        let device = Device::get(ordinal)?;
        Self::with_parts(CudaContext::primary(device)?)
    }

    /// A context for device `ordinal` isolated from the other users of the
    /// device, plus a new non-blocking stream: a **green context** over all
    /// the device's SMs where the driver has them (CUDA 12.4+), else a
    /// **private** CUDA context (`cuCtxCreate`). `FC_ISOLATION` (`auto`,
    /// `green` or `private`, read once) can force either; see
    /// [`Context::isolated_with`] and [`crate::isolation`].
    ///
    /// Choose it when other libraries in the process work on the same GPU:
    /// their device-wide synchronisations (`cudaDeviceSynchronize`,
    /// `torch.cuda.synchronize()`, `cudaFree`) and captures neither see nor
    /// invalidate this context's captures (a synchronisation of the
    /// primary context still *waits* for a green context's work). The
    /// price: its buffers and modules belong to it alone (other contexts'
    /// kernels cannot use them, and it cannot use theirs: such mixes are
    /// refused with [`Error::WrongContext`]), and each call pushes and pops
    /// the context on the calling thread (it is never left current on a
    /// thread; for a green context, one thread at a time). A private
    /// context also costs a second context on the device (about 530 MiB on
    /// an H200), and while it and another context both have work in flight
    /// the GPU time-slices them (a primary + a private context replayed at
    /// 0.09x of two streams of one context on an H200); a green context
    /// runs beside the primary context at full speed. See
    /// `docs/coexistence.md`.
    pub fn isolated(ordinal: usize) -> Result<Context> {
        Self::isolated_with(ordinal, IsolationRequest::from_env()?)
    }

    /// [`Context::isolated`] with an explicit request instead of
    /// `FC_ISOLATION`: [`IsolationRequest::Auto`] (green where possible,
    /// else private; a failed green creation falls back to private and is
    /// kept in [`isolation::last_green_failure`]),
    /// [`IsolationRequest::Green`] (green or an error) or
    /// [`IsolationRequest::Private`] (`cuCtxCreate` even where green
    /// contexts exist).
    pub fn isolated_with(ordinal: usize, request: IsolationRequest) -> Result<Context> {
        let device = Device::get(ordinal)?;
        let private = || Self::with_parts(CudaContext::private(device)?);
        match isolation::plan_for(driver()?, request)? {
            Plan::Private => private(),
            Plan::Green { fallback } => match CudaContext::green(device).and_then(Self::with_parts) {
                Ok(c) => Ok(c),
                Err(e) if fallback => {
                    isolation::note_green_failure(&e);
                    private()
                }
                Err(e) => Err(e),
            },
        }
    }

    /// The context made of `cuda`: its stream and the other parts. On
    /// failure `cuda` is released (dropped) after what was made in it.
    fn with_parts(cuda: CudaContext) -> Result<Context> {
        let streams = Streams::create(&cuda)?;
        let recording_mode = match RecordingMode::from_env() {
            Ok(m) => m,
            Err(e) => {
                let _ = cuda.shielded(|d| {
                    // The stream made above, used by nothing else yet.
                    streams.destroy_main(d);
                    Ok(())
                });
                return Err(e);
            }
        };
        LIVE.fetch_add(1, Ordering::Relaxed);
        let stream = streams.main();
        let inner = ContextInner {
            cuda,
            kernels: KernelSet::default(),
            recorder: Recorder::new(recording_mode),
            streams,
            capture: CaptureControl::default(),
            pool: CapturePool::default(),
        };
        Ok(Context { inner: Arc::new(inner), lane: 0, stream })
    }

    // --- the parts ---------------------------------------------------------

    /// The CUDA context this context runs in.
    #[inline]
    pub(crate) fn cuda(&self) -> &CudaContext {
        &self.inner.cuda
    }

    /// Where the library's work goes while a recording is open.
    #[inline]
    pub(crate) fn recorder(&self) -> &Recorder {
        &self.inner.recorder
    }

    /// The PDL switch, the built-in kernels and the conditional setters.
    #[inline]
    pub(crate) fn kernels(&self) -> &KernelSet {
        &self.inner.kernels
    }

    /// The capture-state machine.
    #[inline]
    pub(crate) fn capture(&self) -> &CaptureControl {
        &self.inner.capture
    }

    /// The capture pool.
    pub(crate) fn pool(&self) -> &CapturePool {
        &self.inner.pool
    }

    // --- this handle: its lane and stream ----------------------------------

    /// The stream of this handle's lane, for the library's own calls.
    #[inline]
    pub(crate) fn stream(&self) -> CUstream {
        self.stream
    }

    /// This context's handle for lane `i` (made on first use).
    pub(crate) fn lane_handle(&self, i: usize) -> Result<(Context, LaneStream)> {
        let l = self.inner.streams.lane(&self.inner.cuda, i)?;
        let lane = u32::try_from(i).map_err(|_| Error::invalid(format!("lane {i}")))?;
        Ok((Context { inner: Arc::clone(&self.inner), lane, stream: l.stream }, l))
    }

    /// Whether the library's own work on this context is being recorded by
    /// construction right now (a hint for the launch paths, which then try
    /// [`Context::record_op`]).
    #[inline]
    pub(crate) fn records_by_construction(&self) -> bool {
        self.inner.recorder.sink().is_active()
    }

    /// Records `op` on this handle's lane of the open recording's segment;
    /// `false` when none takes it (the caller enqueues the work eagerly).
    #[inline]
    pub(crate) fn record_op(&self, op: Op) -> bool {
        self.inner.recorder.sink().push(op, self.lane as usize)
    }

    // --- driver calls in this context --------------------------------------

    /// Runs `f` with the context current (stream work: launches, copies).
    /// A failure while the context records is noted as the capture's first
    /// failure (named when the capture ends in error).
    #[inline]
    pub(crate) fn bound<T>(&self, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
        self.inner.cuda.bound(f).inspect_err(|e| self.inner.capture.note_failure(e))
    }

    /// Runs `f` with the context current and the capture shield raised.
    pub(crate) fn shielded<T>(&self, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
        self.inner.cuda.shielded(f).inspect_err(|e| self.inner.capture.note_failure(e))
    }

    /// The error of a failed stream call (noted as the open capture's
    /// first failure, as [`Context::bound`] does).
    #[cold]
    #[inline(never)]
    pub(crate) fn failed(&self, failed: DriverError) -> Error {
        let e = Error::from(failed);
        self.inner.capture.note_failure(&e);
        e
    }
}

impl Drop for ContextInner {
    /// Tears down in an explicit order: wait for the stream; drop what an
    /// open recording's segment holds (a recording holds the context, so
    /// none is open unless its owner leaked it); destroy the lanes; unload
    /// the built-in and setter modules; free the capture pool; destroy the
    /// stream; and only then (the fields' drop, the CUDA context first)
    /// release (primary) or destroy (private or green) the CUDA context.
    /// Everything else that uses the context (buffers, graphs, modules,
    /// events) holds a `Context` clone, so it is gone before this runs.
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        if driver().is_err() {
            return;
        }
        let loaded = self.kernels.take();
        let slabs = self.pool.slabs();
        let (streams, sink) = (&self.streams, self.recorder.sink());
        let _ = shielded(self.cuda.raw(), |d| {
            streams.synchronize_main(d);
            // Ops of an open segment (child graphs among them) go while the
            // context still exists.
            drop(sink.close());
            streams.destroy_lanes(d);
            drop(loaded);
            for (base, _) in slabs {
                // SAFETY: slabs were allocated with cuMemAlloc by this context
                // and no buffer refers to them any more (buffers hold the context).
                let _ = unsafe { cuda_sys::result::memory::free(d, base) };
            }
            streams.destroy_main(d);
            Ok(())
        });
        // Without the binding, the open segment's ops go now, while the CUDA
        // context (and a green context's gate) still exists.
        drop(self.recorder.sink().close());
    }
}
