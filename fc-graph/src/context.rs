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

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cuda_sys::result::{context, memory, stream};
use cuda_sys::*;

use crate::builtin_kernels::Builtins;
use crate::capture_state::{self, CaptureState, CtxKey};
use crate::conditional_kernels::CondKernels;
use crate::device::Device;
use crate::driver::{bound, driver, shielded, CaptureShield, RawCtx};
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::isolation::{self, Isolation, IsolationRequest, Plan};
use crate::lane_streams::{LaneStream, LaneStreams};
use crate::pool::PoolAllocator;
use crate::recording_mode::RecordingMode;
use crate::segment::{Op, Sink};
pub(crate) use crate::sync::lock;
use crate::topology::SegmentTrace;

/// How a capture restricts "potentially unsafe" driver calls (the driver's
/// `CUstreamCaptureMode`). fc-graph opens captures in [`ThreadLocal`] mode
/// by default: only the capturing thread is restricted.
///
/// [`ThreadLocal`]: CaptureMode::ThreadLocal
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CaptureMode {
    /// Restricts every thread of the process (the old, harmful default).
    Global,
    /// Restricts only the capturing thread.
    #[default]
    ThreadLocal,
    /// Restricts nothing.
    Relaxed,
}

impl CaptureMode {
    pub(crate) fn raw(self) -> CUstreamCaptureMode {
        match self {
            CaptureMode::Global => CU_STREAM_CAPTURE_MODE_GLOBAL,
            CaptureMode::ThreadLocal => CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            CaptureMode::Relaxed => CU_STREAM_CAPTURE_MODE_RELAXED,
        }
    }
}

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

// SAFETY: the shared state is `Send + Sync` (ContextInner's impls); the
// stream is a driver handle usable from any thread, owned by that state.
unsafe impl Send for Context {}
// SAFETY: as above; both fields beside it are immutable.
unsafe impl Sync for Context {}

/// In declaration order (`repr(C)`): what every launch reads first, so that
/// it shares the allocation's first cache lines with the reference counts.
#[repr(C)]
pub(crate) struct ContextInner {
    raw: RawCtx,
    stream: CUstream,
    /// The context's programmatic-dependent-launch switch (see
    /// [`Context::set_pdl`]); on by default.
    pdl_switch: AtomicBool,
    /// Where the library's launches go while a recording of this context
    /// builds its graph (see [`crate::segment`]).
    sink: Sink,
    /// The [`RecordingMode`] of recordings begun from now on.
    recording_mode: AtomicU8,
    /// What the open capture segment recorded through the library (see
    /// [`crate::topology`]).
    segment: SegmentTrace,
    builtins: OnceLock<Builtins>,
    /// The conditional nodes' setter kernels, once a recording needed them.
    cond_kernels: Mutex<Option<Arc<CondKernels>>>,
    device: Device,
    kind: ContextKind,
    capture_state: Mutex<CaptureState>,
    pool: Mutex<PoolAllocator>,
    /// The streams and events of the context's lanes (see [`crate::lanes`]).
    lanes: LaneStreams,
    /// What the context is isolated by ([`Isolation::None`] for primary).
    isolation: Isolation,
    /// The green context behind `raw` (null unless green).
    green: CUgreenCtx,
    /// The CUDA context that owns memory allocated in this one, as
    /// `CU_POINTER_ATTRIBUTE_CONTEXT` reports it: `raw` itself, except for
    /// a green context, whose memory is the device's primary context's.
    memory_owner: CUcontext,
    /// The green context's gate, which `raw.gate` points to (see
    /// [`crate::gate::Gate`]); dropped after the context is destroyed.
    _gate: Option<Box<Gate>>,
}

// SAFETY: CUcontext and CUstream are driver handles that the driver allows
// from any thread; all mutable state is behind mutexes or atomics.
unsafe impl Send for ContextInner {}
// SAFETY: as above; shared access only reads immutable handles or locks.
unsafe impl Sync for ContextInner {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.device.ordinal())
            .field("kind", &self.inner.kind)
            .field("isolation", &self.inner.isolation)
            .field("lane", &self.lane)
            .field("stream", &self.stream)
            .finish()
    }
}

/// Contexts alive in the process (created and not yet torn down).
static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Context {
    /// A context for device `ordinal` in its **primary** context (retained),
    /// plus a new non-blocking stream. Memory and modules are shared with
    /// every other user of the primary context (the CUDA runtime, PyTorch,
    /// cuBLAS, NCCL), so their pointers can be used here and ours there.
    pub fn new(ordinal: usize) -> Result<Context> {
        let device = Device::get(ordinal)?;
        let d = driver()?;
        // Shielded like every call that another thread's GLOBAL capture may
        // refuse (and be invalidated by).
        let shield = CaptureShield::raise(d)?;
        let raw = context::primary_retain(d, device.handle())?;
        drop(shield);
        let raw = RawCtx { raw, leave_current: true, gate: std::ptr::null() };
        Self::with_stream(device, Owner::primary(raw)).inspect_err(|_| {
            let _shield = CaptureShield::raise(d);
            // SAFETY: releases the retain made above.
            let _ = unsafe { context::primary_release(d, device.handle()) };
        })
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
        let d = driver()?;
        match isolation::plan_for(d, request)? {
            Plan::Private => Self::private(device, d),
            Plan::Green { fallback } => match Self::green(device, d) {
                Ok(c) => Ok(c),
                Err(e) if fallback => {
                    isolation::note_green_failure(&e);
                    Self::private(device, d)
                }
                Err(e) => Err(e),
            },
        }
    }

    /// An isolated context in a private CUDA context (`cuCtxCreate`).
    fn private(device: Device, d: &'static Driver) -> Result<Context> {
        // Creating a context is a potentially unsafe call: shielded, so that
        // another thread's GLOBAL capture neither refuses it nor breaks.
        let shield = CaptureShield::raise(d)?;
        // cuCtxCreate makes the new context current on this thread, which
        // the pop below undoes.
        let raw = context::create(d, CU_CTX_SCHED_AUTO, device.handle())?;
        let pop = context::pop_current(d).map(drop).map_err(Error::from);
        drop(shield);
        let raw = RawCtx { raw, leave_current: false, gate: std::ptr::null() };
        let owner = Owner {
            raw,
            isolation: Isolation::Private,
            green: std::ptr::null_mut(),
            memory_owner: raw.raw,
            gate: None,
        };
        pop.and_then(|()| Self::with_stream(device, owner)).inspect_err(|_| {
            let _shield = CaptureShield::raise(d);
            // SAFETY: destroys the context created above, used by nothing else.
            let _ = unsafe { context::destroy(d, raw.raw) };
        })
    }

    /// An isolated context in a green context over all the device's SMs.
    fn green(device: Device, d: &'static Driver) -> Result<Context> {
        let g = isolation::create_green(d, device)?;
        let gate = Box::new(Gate::default());
        let raw = RawCtx { raw: g.ctx, leave_current: false, gate: &*gate };
        let owner =
            Owner { raw, isolation: Isolation::Green, green: g.green, memory_owner: g.primary, gate: Some(gate) };
        // On failure `with_stream` has dropped the gate with `owner`;
        // nothing else refers to the green context.
        Self::with_stream(device, owner).inspect_err(|_| isolation::destroy_green(d, g.green))
    }

    fn with_stream(device: Device, owner: Owner) -> Result<Context> {
        let Owner { raw, isolation, green, memory_owner, gate } = owner;
        let stream = shielded(raw, |d| {
            if isolation == Isolation::Green {
                return isolation::green_stream(d, green);
            }
            // In the context, current here.
            Ok(stream::create(d, CU_STREAM_NON_BLOCKING)?)
        })?;
        let kind = if isolation == Isolation::None { ContextKind::Primary } else { ContextKind::Isolated };
        let recording_mode = match RecordingMode::from_env() {
            Ok(m) => m,
            Err(e) => {
                let _ = shielded(raw, |d| {
                    // SAFETY: the stream made above, used by nothing else yet.
                    let _ = unsafe { stream::destroy(d, stream) };
                    Ok(())
                });
                return Err(e);
            }
        };
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Context {
            inner: Arc::new(ContextInner {
                device,
                kind,
                raw,
                stream,
                builtins: OnceLock::new(),
                cond_kernels: Mutex::new(None),
                capture_state: Mutex::new(CaptureState::default()),
                pool: Mutex::new(PoolAllocator::default()),
                pdl_switch: AtomicBool::new(true),
                sink: Sink::default(),
                recording_mode: AtomicU8::new(recording_mode.to_u8()),
                segment: SegmentTrace::default(),
                isolation,
                green,
                memory_owner,
                lanes: LaneStreams::default(),
                _gate: gate,
            }),
            lane: 0,
            stream,
        })
    }

    /// How many contexts are alive in the process: created and not yet torn
    /// down (a context lives while any clone, buffer, graph, module, kernel
    /// or cache of it does). A diagnostic for leak checks.
    pub fn live_count() -> usize {
        LIVE.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The device ordinal.
    pub fn device_id(&self) -> usize {
        self.inner.device.ordinal()
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// Primary or isolated.
    pub fn kind(&self) -> ContextKind {
        self.inner.kind
    }

    /// What the context is isolated by: [`Isolation::None`] for a primary
    /// context, [`Isolation::Green`] or [`Isolation::Private`] for an
    /// isolated one.
    pub fn isolation(&self) -> Isolation {
        self.inner.isolation
    }

    /// The raw stream handle (`CUstream`), for interop: work another library
    /// queues on it while this context captures is recorded into the graph
    /// (the capture-mode shield covers only fc-graph's own calls). Valid
    /// while any clone of this context is alive.
    ///
    /// Asking for it marks the context for good as one whose captures may
    /// hold foreign work, so re-captures ending in
    /// [`crate::Capture::end_update`] count their nodes first (see the
    /// crate guide on in-place updates).
    pub fn raw_stream(&self) -> CUstream {
        self.inner.segment.note_shared();
        self.stream
    }

    /// The stream of this handle's lane, for the library's own calls.
    #[inline]
    pub(crate) fn stream(&self) -> CUstream {
        self.stream
    }

    /// The lane this handle queues work on (0: the context itself).
    pub fn lane_index(&self) -> usize {
        self.lane as usize
    }

    /// This context's handle for lane `i` (made on first use).
    pub(crate) fn lane_handle(&self, i: usize) -> Result<(Context, LaneStream)> {
        let l = self.inner.lanes.get(self.inner.raw, self.inner.green, self.inner.stream, i)?;
        let lane = u32::try_from(i).map_err(|_| Error::invalid(format!("lane {i}")))?;
        Ok((Context { inner: Arc::clone(&self.inner), lane, stream: l.stream }, l))
    }

    /// Whether two handles are lanes of one context (or the same lane).
    pub fn same_context(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Lane `a`'s next op also depends on lane `b`'s work so far in the
    /// open recording (`false`: no recording builds now).
    pub(crate) fn record_wait(&self, a: usize, b: usize) -> bool {
        self.inner.sink.wait(a, b)
    }

    /// Where the library's launches go while a recording builds.
    #[inline]
    pub(crate) fn sink(&self) -> &Sink {
        &self.inner.sink
    }

    /// The context's capture state (one recording at a time).
    pub(crate) fn capture_state_cell(&self) -> &Mutex<CaptureState> {
        &self.inner.capture_state
    }

    /// The capture pool.
    pub(crate) fn pool_cell(&self) -> &Mutex<PoolAllocator> {
        &self.inner.pool
    }

    /// What the open stream-capture segment recorded through the library.
    pub(crate) fn segment_trace(&self) -> &SegmentTrace {
        &self.inner.segment
    }

    /// The built-in kernels, once loaded.
    #[inline]
    pub(crate) fn builtins_cell(&self) -> &OnceLock<Builtins> {
        &self.inner.builtins
    }

    /// The conditional nodes' setter kernels, loaded on first use (a
    /// failure is not kept: the next call tries again).
    pub(crate) fn cond_kernels(&self) -> Result<Arc<CondKernels>> {
        let mut cell = lock(&self.inner.cond_kernels);
        if let Some(k) = cell.as_ref() {
            return Ok(Arc::clone(k));
        }
        let k = CondKernels::load(self.raw_ctx())?;
        *cell = Some(Arc::clone(&k));
        Ok(k)
    }

    /// Loads (once per context) the kernels that set conditional nodes'
    /// conditions on the device, and says how they loaded: resolved by the
    /// driver, or linked with the device runtime library (see
    /// [`crate::conditional_kernels`]). Recordings load them when they first
    /// need them; this tells ahead of time (`fcgraph info` does).
    pub fn conditional_setters(&self) -> Result<crate::conditional_kernels::SetterSource> {
        Ok(self.cond_kernels()?.source.clone())
    }

    /// The programmatic-dependent-launch switch.
    #[inline]
    pub(crate) fn pdl_switch_cell(&self) -> &AtomicBool {
        &self.inner.pdl_switch
    }

    /// The CUDA context that owns memory allocated in this one.
    pub(crate) fn memory_owner(&self) -> CUcontext {
        self.inner.memory_owner
    }

    /// Whether the stream's handle was handed out ([`Context::raw_stream`]).
    pub fn stream_handed_out(&self) -> bool {
        self.inner.segment.is_shared()
    }

    /// Sets how recordings begun from now on take this context's work (see
    /// [`crate::recording_mode`]); a recording already open keeps its way.
    /// Shared by every clone of the context.
    pub fn set_recording_mode(&self, mode: RecordingMode) {
        self.inner.recording_mode.store(mode.to_u8(), Ordering::Relaxed);
    }

    /// How recordings begun now take this context's work.
    pub fn recording_mode(&self) -> RecordingMode {
        RecordingMode::from_u8(self.inner.recording_mode.load(Ordering::Relaxed))
    }

    /// Whether a recording begun now captures the stream (rather than
    /// building its graph node by node).
    pub fn recordings_capture(&self) -> bool {
        self.recording_mode().captures(self.stream_handed_out())
    }

    /// Whether the library's own work on this context is being recorded by
    /// construction right now (a hint for the launch paths, which then try
    /// [`Context::record_op`]).
    #[inline]
    pub(crate) fn records_by_construction(&self) -> bool {
        self.inner.sink.is_active()
    }

    /// Records `op` into the open recording's segment; `false` when none
    /// takes it (the caller enqueues the work eagerly).
    #[inline]
    pub(crate) fn record_op(&self, op: Op) -> bool {
        self.inner.sink.push(op, self.lane as usize)
    }

    /// The raw CUDA context handle (`CUcontext`): the device's primary
    /// context, or the private one of an isolated context, or the one
    /// `cuCtxFromGreenCtx` gives for its green context (current to one
    /// thread at a time). Valid while any clone of this context is alive.
    #[inline]
    pub fn raw_context(&self) -> CUcontext {
        self.inner.raw.raw
    }

    pub(crate) fn raw_ctx(&self) -> RawCtx {
        self.inner.raw
    }

    /// Whether two contexts run in the same CUDA context (so that buffers
    /// and kernels of one may be used by the other).
    #[inline]
    pub fn shares_memory_with(&self, other: &Context) -> bool {
        self.raw_context() == other.raw_context()
    }

    /// Checks that something of `owner` (a buffer, a kernel) may be used on
    /// this context.
    #[inline]
    pub(crate) fn check_usable(&self, what: &str, owner: &Context) -> Result<()> {
        if self.shares_memory_with(owner) {
            return Ok(());
        }
        Err(self.unusable(what, owner))
    }

    /// Why something of `owner` may not be used here.
    #[cold]
    #[inline(never)]
    fn unusable(&self, what: &str, owner: &Context) -> Error {
        if owner.device_id() != self.device_id() {
            return Error::WrongDevice(format!(
                "{what} lives on device {}, the context on device {}",
                owner.device_id(),
                self.device_id()
            ));
        }
        Error::WrongContext(format!(
            "{what} belongs to another CUDA context of device {} (a {:?} context; this one is {:?}): \
             isolated contexts share no memory or modules",
            self.device_id(),
            owner.kind(),
            self.kind()
        ))
    }

    /// Whether a capture is open on this context (also while one of its
    /// break functions runs).
    pub fn capture_open(&self) -> bool {
        lock(&self.inner.capture_state).is_open()
    }

    /// Whether the context's stream is recording right now: a capture is
    /// open and none of its break functions is running.
    pub fn is_capturing(&self) -> bool {
        lock(&self.inner.capture_state).is_recording()
    }

    /// Whether the calling thread is running a break function of this
    /// context (at capture or at replay; other threads' breaks do not count).
    pub fn in_break(&self) -> bool {
        capture_state::thread_in_break(self.key())
    }

    /// Whether a break reached now just runs its function: the stream does
    /// not record (no capture open, or one of its break functions runs at
    /// capture time), or the calling thread is inside a break function of
    /// this context (no nested split).
    pub fn break_passes_through(&self) -> bool {
        lock(&self.inner.capture_state).break_passes_through(self.in_break())
    }

    /// Refuses a capture now: one is open, or the calling thread is inside
    /// a break function of this context.
    pub(crate) fn check_can_begin(&self) -> Result<()> {
        lock(&self.inner.capture_state).check_can_begin(self.in_break())
    }

    /// This context's key in the per-thread break frames.
    pub(crate) fn key(&self) -> CtxKey {
        Arc::as_ptr(&self.inner) as CtxKey
    }

    /// Runs `f` with `value` published as the calling thread's value for
    /// this context (what [`Context::thread_value`] returns meanwhile, on
    /// this thread only; the innermost publication wins), until `f` returns
    /// or unwinds. For callers that hand an opaque value to nested callbacks
    /// (the C API's live pointer of a break function that passes through).
    pub fn with_thread_value<T>(&self, value: *mut std::os::raw::c_void, f: impl FnOnce() -> T) -> T {
        capture_state::run_with_live(self.key(), value, f)
    }

    /// The innermost value published on the calling thread for this context
    /// by [`Context::with_thread_value`], or null.
    pub fn thread_value(&self) -> *mut std::os::raw::c_void {
        capture_state::thread_running_live(self.key())
    }

    /// Runs a break function with the calling thread marked as inside a
    /// break of this context (at capture and at replay): on this thread,
    /// nested breaks pass through and no capture may begin meanwhile; other
    /// threads are not affected. The mark is the thread's own (a frame on
    /// its stack), gone when `f` returns or unwinds, so overlapping replays
    /// on several threads cannot leave it set.
    pub(crate) fn run_break<T>(&self, f: impl FnOnce() -> T) -> T {
        capture_state::run_as_break(self.key(), f)
    }

    /// Runs a break function of the open capture at capture time: the
    /// stream is out of capture meanwhile (its segment ended), so the
    /// context does not record until `f` returns or unwinds; the thread is
    /// marked as in [`Context::run_break`].
    pub(crate) fn run_capture_break<T>(&self, f: impl FnOnce() -> T) -> T {
        lock(&self.inner.capture_state).pause();
        struct Resume<'a>(&'a Context);
        impl Drop for Resume<'_> {
            fn drop(&mut self) {
                lock(&self.0.inner.capture_state).resume();
            }
        }
        let _resume = Resume(self);
        self.run_break(f)
    }

    /// Refuses stream-synchronous work while a capture is open.
    pub(crate) fn ensure_not_capturing(&self, what: &str) -> Result<()> {
        if self.is_capturing() {
            return Err(Error::capture_state(format!(
                "cannot {what} while this context is capturing (it would invalidate the capture)"
            )));
        }
        Ok(())
    }

    /// Waits for the work queued on this context's stream (only this
    /// stream, never the whole device).
    pub fn synchronize(&self) -> Result<()> {
        self.ensure_not_capturing("synchronize")?;
        let stream = self.stream;
        self.shielded(|d| {
            // SAFETY: our stream, alive while the context is.
            Ok(unsafe { stream::synchronize(d, stream) }?)
        })
    }

    /// Free and total device memory, in bytes, as the driver reports them
    /// for this context's device (`cuMemGetInfo`).
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        // Of the context, current here.
        self.shielded(|d| Ok(memory::get_info(d)?))
    }

    /// Runs `f` with the context current (stream work: launches, copies).
    /// A failure while the context records is noted as the capture's first
    /// failure (named when the capture ends in error).
    #[inline]
    pub(crate) fn bound<T>(&self, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
        bound(self.inner.raw, f).inspect_err(|e| self.note_failure(e))
    }

    /// Runs `f` with the context current and the capture shield raised.
    pub(crate) fn shielded<T>(&self, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
        shielded(self.inner.raw, f).inspect_err(|e| self.note_failure(e))
    }

    /// The error of a failed stream call (noted as the open capture's
    /// first failure, as [`Context::bound`] does).
    #[cold]
    #[inline(never)]
    pub(crate) fn failed(&self, failed: DriverError) -> Error {
        let e = Error::from(failed);
        self.note_failure(&e);
        e
    }

    /// Notes a driver failure as the open capture's first failure (no-op
    /// without an open capture, or for errors that are not driver calls).
    pub(crate) fn note_failure(&self, e: &Error) {
        lock(&self.inner.capture_state).note_failure(e);
    }

    /// Bytes of device memory this context's capture pool holds.
    pub fn pool_reserved_bytes(&self) -> usize {
        lock(&self.inner.pool).reserved() as usize
    }

    /// Bytes of the capture pool currently handed out to live buffers.
    pub fn pool_in_use_bytes(&self) -> usize {
        lock(&self.inner.pool).in_use() as usize
    }
}

impl Drop for ContextInner {
    /// Tears down in an explicit order: wait for the stream; drop what an
    /// open recording's segment holds (a recording holds the context, so
    /// none is open unless its owner leaked it); destroy the built-in module; free the
    /// capture pool; destroy the stream; and only then release (primary) or
    /// destroy (private or green) the CUDA context. Everything else that uses the
    /// context (buffers, graphs, modules, events) holds a `Context` clone,
    /// so it is gone before this runs.
    fn drop(&mut self) {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let Ok(d) = driver() else { return };
        let raw = self.raw;
        let stream = self.stream;
        let builtins = self.builtins.take();
        let cond_kernels = lock(&self.cond_kernels).take();
        let slabs: Vec<(u64, u64)> = lock(&self.pool).slabs().collect();
        let _ = shielded(raw, |d| {
            // SAFETY: our stream; waits for queued work before tearing down.
            let _ = unsafe { stream::synchronize(d, stream) };
            // Ops of an open segment (child graphs among them) go while the
            // context still exists.
            drop(self.sink.close());
            self.lanes.destroy(d);
            drop(builtins);
            drop(cond_kernels);
            for (base, _) in slabs {
                // SAFETY: slabs were allocated with cuMemAlloc by this context
                // and no buffer refers to them any more (buffers hold the context).
                let _ = unsafe { memory::free(d, base) };
            }
            // SAFETY: our stream, no longer used by anyone.
            let _ = unsafe { stream::destroy(d, stream) };
            Ok(())
        });
        // Releasing or destroying a context is potentially unsafe too.
        let _shield = CaptureShield::raise(d);
        match self.isolation {
            Isolation::None => {
                // SAFETY: releases the retain taken in `Context::new`.
                let _ = unsafe { context::primary_release(d, self.device.handle()) };
            }
            Isolation::Private => {
                // SAFETY: destroys the context created in `Context::private`;
                // nothing refers to it any more, and it is not current
                // anywhere (it is only ever pushed and popped around calls).
                let _ = unsafe { context::destroy(d, raw.raw) };
            }
            // Its stream and modules are gone (above); it is not current
            // anywhere. Destroying it releases its retain of the primary
            // context.
            Isolation::Green => {
                drop(_shield);
                isolation::destroy_green(d, self.green);
            }
        }
    }
}

/// What `with_stream` makes a context of: the handle, how it is isolated,
/// and what tears it down.
struct Owner {
    raw: RawCtx,
    isolation: Isolation,
    green: CUgreenCtx,
    memory_owner: CUcontext,
    gate: Option<Box<Gate>>,
}

impl Owner {
    fn primary(raw: RawCtx) -> Owner {
        Owner { raw, isolation: Isolation::None, green: std::ptr::null_mut(), memory_owner: raw.raw, gate: None }
    }
}
