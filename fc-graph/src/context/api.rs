//! The public methods of [`Context`] that answer from its handle or one of
//! its parts, or set something in one (see the [parts map](super)): live
//! contexts, the raw stream and lane, the device and isolation, memory
//! sharing, capture state and breaks, the recording mode, the capture
//! pool, the conditional setters, synchronisation and memory figures.

use std::os::raw::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cuda_sys::result::{memory, stream};
use cuda_sys::*;

use super::{Context, ContextKind, LIVE};
use crate::conditional_kernels::SetterSource;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::isolation::Isolation;
use crate::recording_mode::RecordingMode;

impl Context {
    /// How many contexts are alive in the process: created and not yet torn
    /// down (a context lives while any clone, buffer, graph, module, kernel
    /// or cache of it does). A diagnostic for leak checks.
    pub fn live_count() -> usize {
        LIVE.load(Ordering::Relaxed)
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
        self.recorder().trace().note_shared();
        self.stream()
    }

    /// The lane this handle queues work on (0: the context itself).
    pub fn lane_index(&self) -> usize {
        self.lane as usize
    }

    /// Whether two handles are lanes of one context (or the same lane).
    pub fn same_context(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The device ordinal.
    pub fn device_id(&self) -> usize {
        self.cuda().device().ordinal()
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.cuda().device()
    }

    /// Primary or isolated.
    pub fn kind(&self) -> ContextKind {
        match self.cuda().isolation() {
            Isolation::None => ContextKind::Primary,
            Isolation::Green | Isolation::Private => ContextKind::Isolated,
        }
    }

    /// What the context is isolated by: [`Isolation::None`] for a primary
    /// context, [`Isolation::Green`] or [`Isolation::Private`] for an
    /// isolated one.
    pub fn isolation(&self) -> Isolation {
        self.cuda().isolation()
    }

    /// The raw CUDA context handle (`CUcontext`): the device's primary
    /// context, or the private one of an isolated context, or the one
    /// `cuCtxFromGreenCtx` gives for its green context (current to one
    /// thread at a time). Valid while any clone of this context is alive.
    #[inline]
    pub fn raw_context(&self) -> CUcontext {
        self.cuda().handle()
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
        self.capture().is_open()
    }

    /// Whether the context's stream is recording right now: a capture is
    /// open and none of its break functions is running.
    pub fn is_capturing(&self) -> bool {
        self.capture().is_recording()
    }

    /// Whether the calling thread is running a break function of this
    /// context (at capture or at replay; other threads' breaks do not count).
    pub fn in_break(&self) -> bool {
        self.capture().in_break()
    }

    /// Whether a break reached now just runs its function: the stream does
    /// not record (no capture open, or one of its break functions runs at
    /// capture time), or the calling thread is inside a break function of
    /// this context (no nested split).
    pub fn break_passes_through(&self) -> bool {
        self.capture().break_passes_through()
    }

    /// Runs `f` with `value` published as the calling thread's value for
    /// this context (what [`Context::thread_value`] returns meanwhile, on
    /// this thread only; the innermost publication wins), until `f` returns
    /// or unwinds. For callers that hand an opaque value to nested callbacks
    /// (the C API's live pointer of a break function that passes through).
    pub fn with_thread_value<T>(&self, value: *mut c_void, f: impl FnOnce() -> T) -> T {
        self.capture().with_thread_value(value, f)
    }

    /// The innermost value published on the calling thread for this context
    /// by [`Context::with_thread_value`], or null.
    pub fn thread_value(&self) -> *mut c_void {
        self.capture().thread_value()
    }

    /// Whether the stream's handle was handed out ([`Context::raw_stream`]).
    pub fn stream_handed_out(&self) -> bool {
        self.recorder().trace().is_shared()
    }

    /// Sets how recordings begun from now on take this context's work (see
    /// [`crate::recording_mode`]); a recording already open keeps its way.
    /// Shared by every clone of the context.
    pub fn set_recording_mode(&self, mode: RecordingMode) {
        self.recorder().set_mode(mode);
    }

    /// How recordings begun now take this context's work.
    pub fn recording_mode(&self) -> RecordingMode {
        self.recorder().mode()
    }

    /// Whether a recording begun now captures the stream (rather than
    /// building its graph node by node).
    pub fn recordings_capture(&self) -> bool {
        self.recorder().captures()
    }

    /// Loads (once per context) the kernels that set conditional nodes'
    /// conditions on the device, and says how they loaded: resolved by the
    /// driver, or linked with the device runtime library (see
    /// [`crate::conditional_kernels`]). Recordings load them when they first
    /// need them; this tells ahead of time (`fcgraph info` does).
    pub fn conditional_setters(&self) -> Result<SetterSource> {
        Ok(self.kernels().setters(self.cuda().raw())?.source.clone())
    }

    /// Waits for the work queued on this context's stream (only this
    /// stream, never the whole device).
    pub fn synchronize(&self) -> Result<()> {
        self.capture().refuse_while_recording("synchronize")?;
        let s = self.stream();
        self.shielded(|d| {
            // SAFETY: our stream, alive while the context is.
            Ok(unsafe { stream::synchronize(d, s) }?)
        })
    }

    /// Free and total device memory, in bytes, as the driver reports them
    /// for this context's device (`cuMemGetInfo`).
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        // Of the context, current here.
        self.shielded(|d| Ok(memory::get_info(d)?))
    }

    /// Bytes of device memory this context's capture pool holds.
    pub fn pool_reserved_bytes(&self) -> usize {
        self.pool().reserved() as usize
    }

    /// Bytes of the capture pool currently handed out to live buffers.
    pub fn pool_in_use_bytes(&self) -> usize {
        self.pool().in_use() as usize
    }
}
