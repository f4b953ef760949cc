//! Contexts: a device's primary context plus a non-blocking stream of our
//! own. Several contexts on one device are independent (each its own
//! stream, capture state and capture pool).

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cuda_sys::*;

use crate::builtins::Builtins;
use crate::capture_state::CaptureState;
use crate::device::Device;
use crate::driver::{bound, check, driver, shielded};
use crate::error::{Error, Result};
use crate::pool::PoolAllocator;

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

/// A context on one device. Cheap to clone (shared handle); `Send + Sync`.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

pub(crate) struct ContextInner {
    pub(crate) device: Device,
    pub(crate) raw: CUcontext,
    pub(crate) stream: CUstream,
    pub(crate) builtins: OnceLock<Builtins>,
    pub(crate) capture_state: Mutex<CaptureState>,
    pub(crate) pool: Mutex<PoolAllocator>,
}

// SAFETY: CUcontext and CUstream are driver handles that the driver allows
// from any thread; all mutable state is behind mutexes.
unsafe impl Send for ContextInner {}
// SAFETY: as above; shared access only reads immutable handles or locks.
unsafe impl Sync for ContextInner {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.device.ordinal())
            .field("stream", &self.inner.stream)
            .finish()
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Context {
    /// A context for device `ordinal`: its primary context, retained, plus
    /// a new non-blocking stream.
    pub fn new(ordinal: usize) -> Result<Context> {
        let device = Device::get(ordinal)?;
        let d = driver()?;
        let mut raw: CUcontext = std::ptr::null_mut();
        // SAFETY: valid out-pointer and device handle.
        check("cuDevicePrimaryCtxRetain", unsafe { (d.cuDevicePrimaryCtxRetain)(&mut raw, device.handle()) })?;
        let stream = shielded(raw, |d| {
            let mut s: CUstream = std::ptr::null_mut();
            // SAFETY: valid out-pointer; the context is current.
            check("cuStreamCreate", unsafe { (d.cuStreamCreate)(&mut s, CU_STREAM_NON_BLOCKING) })?;
            Ok(s)
        });
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: releases the retain made above.
                unsafe { (d.cuDevicePrimaryCtxRelease)(device.handle()) };
                return Err(e);
            }
        };
        Ok(Context {
            inner: Arc::new(ContextInner {
                device,
                raw,
                stream,
                builtins: OnceLock::new(),
                capture_state: Mutex::new(CaptureState::default()),
                pool: Mutex::new(PoolAllocator::default()),
            }),
        })
    }

    /// The device ordinal.
    pub fn device_id(&self) -> usize {
        self.inner.device.ordinal()
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// The raw stream handle, for interop with other CUDA code.
    pub fn raw_stream(&self) -> CUstream {
        self.inner.stream
    }

    /// The raw (primary) context handle.
    pub fn raw_context(&self) -> CUcontext {
        self.inner.raw
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

    /// Whether a break function of this context is running (while a
    /// capture records it, or during a replay).
    pub fn in_break(&self) -> bool {
        lock(&self.inner.capture_state).in_break()
    }

    /// Whether a break reached now just runs its function: no capture is
    /// open, or another break's function is running (no nested split).
    pub fn break_passes_through(&self) -> bool {
        lock(&self.inner.capture_state).break_passes_through()
    }

    /// Runs a break function with the context marked as inside a break (at
    /// capture and at replay): nested breaks pass through and no capture
    /// may begin meanwhile. The mark is restored even if `f` fails.
    pub(crate) fn run_break<T>(&self, f: impl FnOnce() -> T) -> T {
        let was = lock(&self.inner.capture_state).enter_break();
        struct Restore<'a>(&'a Context, bool);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                lock(&self.0.inner.capture_state).leave_break(self.1);
            }
        }
        let _restore = Restore(self, was);
        f()
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
        let stream = self.inner.stream;
        shielded(self.inner.raw, |d| {
            // SAFETY: our stream, alive while the context is.
            check("cuStreamSynchronize", unsafe { (d.cuStreamSynchronize)(stream) })
        })
    }

    /// Runs `f` with the context current (stream work: launches, copies).
    pub(crate) fn bound<T>(&self, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
        bound(self.inner.raw, f)
    }

    /// Runs `f` with the context current and the capture shield raised.
    pub(crate) fn shielded<T>(&self, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
        shielded(self.inner.raw, f)
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
    fn drop(&mut self) {
        let Ok(d) = driver() else { return };
        let raw = self.raw;
        let stream = self.stream;
        let builtins = self.builtins.take();
        let slabs: Vec<(u64, u64)> = lock(&self.pool).slabs().collect();
        let _ = shielded(raw, |d| {
            // SAFETY: our stream; waits for queued work before tearing down.
            unsafe { (d.cuStreamSynchronize)(stream) };
            drop(builtins);
            for (base, _) in slabs {
                // SAFETY: slabs were allocated with cuMemAlloc by this context
                // and no buffer refers to them any more (buffers hold the context).
                unsafe { (d.cuMemFree)(base) };
            }
            // SAFETY: our stream, no longer used by anyone.
            unsafe { (d.cuStreamDestroy)(stream) };
            Ok(())
        });
        // SAFETY: releases the retain taken in `Context::new`.
        unsafe { (d.cuDevicePrimaryCtxRelease)(self.device.handle()) };
    }
}
