//! The CUDA context a [`crate::Context`] runs in ([`CudaContext`]): its
//! device, how it is isolated (primary, green or private, see
//! [`crate::isolation`]), its raw handle with the way it is made current
//! ([`RawCtx`], with a green context's gate), and which context owns the
//! memory allocated in it. Made by [`CudaContext::primary`],
//! [`CudaContext::private`] or [`CudaContext::green`]; released (primary)
//! or destroyed (private, green) when dropped, after everything made in it.

use cuda_sys::result::context;
use cuda_sys::*;

use crate::device::Device;
use crate::driver::{bound, driver, shielded, CaptureShield, RawCtx};
use crate::error::Result;
use crate::gate::Gate;
use crate::isolation::{self, Isolation};

/// A device's CUDA context as one [`crate::Context`] holds it. The raw
/// handle comes first: launches read it (binding, `check_usable`).
#[repr(C)]
pub(crate) struct CudaContext {
    raw: RawCtx,
    device: Device,
    /// [`Isolation::None`] for the primary context.
    isolation: Isolation,
    /// The green context behind `raw` (null unless green).
    green: CUgreenCtx,
    /// The CUDA context that owns memory allocated in this one, as
    /// `CU_POINTER_ATTRIBUTE_CONTEXT` reports it: `raw` itself, except for
    /// a green context, whose memory is the device's primary context's.
    memory_owner: CUcontext,
    /// The green context's gate, which `raw.gate` points to (see
    /// [`crate::gate::Gate`]); dropped after the context is destroyed
    /// (fields drop after `Drop::drop`).
    _gate: Option<Box<Gate>>,
}

// SAFETY: driver context handles may be used from any thread; the gate is
// `Sync` and immutable here.
unsafe impl Send for CudaContext {}
// SAFETY: as above; shared access only reads the handles.
unsafe impl Sync for CudaContext {}

impl CudaContext {
    /// The device's primary context, retained (released on drop).
    pub(crate) fn primary(device: Device) -> Result<CudaContext> {
        let d = driver()?;
        // Shielded like every call that another thread's GLOBAL capture may
        // refuse (and be invalidated by).
        let shield = CaptureShield::raise(d)?;
        let raw = context::primary_retain(d, device.handle())?;
        drop(shield);
        Ok(CudaContext {
            raw: RawCtx { raw, leave_current: true, gate: std::ptr::null() },
            device,
            isolation: Isolation::None,
            green: std::ptr::null_mut(),
            memory_owner: raw,
            _gate: None,
        })
    }

    /// A private CUDA context of the device (`cuCtxCreate`), never left
    /// current on a thread (destroyed on drop).
    pub(crate) fn private(device: Device) -> Result<CudaContext> {
        let d = driver()?;
        // Creating a context is a potentially unsafe call: shielded, so that
        // another thread's GLOBAL capture neither refuses it nor breaks.
        let shield = CaptureShield::raise(d)?;
        // cuCtxCreate makes the new context current on this thread, which
        // the pop below undoes.
        let raw = context::create(d, CU_CTX_SCHED_AUTO, device.handle())?;
        let pop = context::pop_current(d);
        drop(shield);
        let made = CudaContext {
            raw: RawCtx { raw, leave_current: false, gate: std::ptr::null() },
            device,
            isolation: Isolation::Private,
            green: std::ptr::null_mut(),
            memory_owner: raw,
            _gate: None,
        };
        // A failed pop destroys the context again (`made` drops).
        pop?;
        Ok(made)
    }

    /// A green context over all the device's SMs (destroyed on drop).
    pub(crate) fn green(device: Device) -> Result<CudaContext> {
        let g = isolation::create_green(driver()?, device)?;
        let gate = Box::new(Gate::default());
        Ok(CudaContext {
            raw: RawCtx { raw: g.ctx, leave_current: false, gate: &*gate },
            device,
            isolation: Isolation::Green,
            green: g.green,
            memory_owner: g.primary,
            _gate: Some(gate),
        })
    }

    /// The handle and how to make it current, for the driver calls of
    /// everything made in this context.
    #[inline]
    pub(crate) fn raw(&self) -> RawCtx {
        self.raw
    }

    /// Where the fields every launch reads end (the context's layout test).
    #[cfg(test)]
    pub(crate) fn hot_end() -> usize {
        std::mem::offset_of!(CudaContext, raw) + std::mem::size_of::<RawCtx>()
    }

    /// The raw `CUcontext`.
    #[inline]
    pub(crate) fn handle(&self) -> CUcontext {
        self.raw.raw
    }

    pub(crate) fn device(&self) -> Device {
        self.device
    }

    pub(crate) fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// The green context behind the handle (null unless green).
    pub(crate) fn green_handle(&self) -> CUgreenCtx {
        self.green
    }

    /// The CUDA context that owns memory allocated in this one.
    pub(crate) fn memory_owner(&self) -> CUcontext {
        self.memory_owner
    }

    /// Runs `f` with this context current (stream work).
    #[inline]
    pub(crate) fn bound<T>(&self, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
        bound(self.raw, f)
    }

    /// Runs `f` with this context current and the capture shield raised.
    pub(crate) fn shielded<T>(&self, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
        shielded(self.raw, f)
    }
}

impl Drop for CudaContext {
    /// Releases the primary context's retain, or destroys the private or
    /// green context: last, once the [`crate::Context`] made of it has
    /// destroyed everything it made in it (its teardown runs before its
    /// fields drop). It is not current anywhere: an isolated context is only
    /// ever pushed and popped around calls.
    fn drop(&mut self) {
        let Ok(d) = driver() else { return };
        // Releasing or destroying a context is potentially unsafe too.
        let shield = CaptureShield::raise(d);
        match self.isolation {
            Isolation::None => {
                // SAFETY: gives back the retain taken in `primary`.
                let _ = unsafe { context::primary_release(d, self.device.handle()) };
            }
            Isolation::Private => {
                // SAFETY: destroys the context made in `private`; nothing
                // refers to it any more.
                let _ = unsafe { context::destroy(d, self.raw.raw) };
            }
            // Its streams and modules are gone; destroying it releases its
            // retain of the primary context.
            Isolation::Green => {
                drop(shield);
                isolation::destroy_green(d, self.green);
            }
        }
    }
}
