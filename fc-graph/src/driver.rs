//! The process-wide driver handle, error conversion, and the two guards
//! every driver call goes through: the current-context binding and the
//! capture-mode shield.
//!
//! Every driver call of the crate goes through cuda-sys's checked-call
//! layer ([`cuda_sys::result`]), whose failures are small
//! [`DriverError`] values; they become an [`Error`] here, out of line
//! (`From<DriverError> for Error`, so `?` converts them).

use std::sync::OnceLock;

use cuda_sys::result::{context, stream};
use cuda_sys::*;

use crate::error::{Error, Result};
use crate::gate::Gate;

static DRIVER: OnceLock<Result<Driver>> = OnceLock::new();

/// The loaded and initialised driver (`cuInit(0)` done), loaded on first use.
/// Without a driver this is an error value, never a panic.
#[inline]
pub fn driver() -> Result<&'static Driver> {
    // The fast path: loaded already (every call after the first).
    if let Some(Ok(d)) = DRIVER.get() {
        return Ok(d);
    }
    load_driver()
}

/// The first call's path of [`driver`]: loads the driver (once).
#[cold]
#[inline(never)]
fn load_driver() -> Result<&'static Driver> {
    DRIVER
        .get_or_init(|| {
            let d = Driver::load()?;
            cuda_sys::result::driver::init(&d, 0).map_err(|e| error_with(Some(&d), e.call, e.code))?;
            Ok(d)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A context handle plus how to make it current: a primary context is left
/// current on threads that had none (as the CUDA runtime does), an isolated
/// one is always pushed and popped again, so other libraries on the thread
/// never find it current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawCtx {
    pub(crate) raw: CUcontext,
    pub(crate) leave_current: bool,
    /// A green context's gate (null for other contexts): held while the
    /// library has the context pushed on a thread, since a green context
    /// may be current to one thread at a time. It lives in the
    /// [`crate::context::CudaContext`] this handle belongs to, which
    /// outlives every copy of the handle (their owners hold the context).
    pub(crate) gate: *const Gate,
}

// SAFETY: a driver context handle, usable from any thread, and a pointer
// to a gate that is `Sync` and outlives the handle.
unsafe impl Send for RawCtx {}
// SAFETY: as above; the value is immutable.
unsafe impl Sync for RawCtx {}

/// The error of `call` failing with `res`, named by the driver when there
/// is one to ask.
fn error_with(d: Option<&Driver>, call: &'static str, res: CUresult) -> Error {
    if res == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED {
        return Error::CaptureInvalidated { call, detail: String::new() };
    }
    match d {
        Some(d) => Error::Cuda { call, code: res, name: d.error_name(res), description: d.error_string(res) },
        None => Error::Cuda { call, code: res, name: format!("CUDA_ERROR_{res}"), description: String::new() },
    }
}

/// Makes a context current on this thread for the guard's life. A no-op
/// when it already is current. When the thread had no current context, a
/// primary context is made current and left so (as the CUDA runtime does),
/// which makes later calls on this thread free; otherwise (another context
/// current, or an isolated context) ours is pushed and popped again on drop.
pub(crate) struct ContextBinding {
    pushed: bool,
    /// The gate entered with the push (null when none).
    gate: *const Gate,
}

/// A failed driver call (cuda-sys's [`DriverError`], small, so hot paths
/// such as launches carry it cheaply) becomes an [`Error`] here, out of
/// line: [`Error::CaptureInvalidated`] for an invalidated capture, else
/// [`Error::Cuda`] with the driver's name and description of the code.
impl From<DriverError> for Error {
    #[cold]
    #[inline(never)]
    fn from(e: DriverError) -> Error {
        error_with(driver().ok(), e.call, e.code)
    }
}

impl ContextBinding {
    #[inline]
    pub(crate) fn bind(d: &Driver, ctx: RawCtx) -> Result<ContextBinding> {
        Ok(Self::bind_raw(d, ctx)?)
    }

    /// [`ContextBinding::bind`] with the failure left unconverted.
    #[inline]
    pub(crate) fn bind_raw(d: &Driver, ctx: RawCtx) -> std::result::Result<ContextBinding, DriverError> {
        let current = context::get_current(d)?;
        let unbound = ContextBinding { pushed: false, gate: std::ptr::null() };
        if current == ctx.raw {
            return Ok(unbound);
        }
        if current.is_null() && ctx.leave_current {
            // SAFETY: `ctx` is a live context the caller holds a reference to.
            unsafe { context::set_current(d, ctx.raw) }?;
            return Ok(unbound);
        }
        // SAFETY: a non-null gate lives as long as the context (see RawCtx).
        if let Some(gate) = unsafe { ctx.gate.as_ref() } {
            gate.enter();
        }
        // Made before the push, so that a failed push leaves the gate again.
        let mut binding = ContextBinding { pushed: false, gate: ctx.gate };
        // SAFETY: `ctx` is a live context the caller holds a reference to.
        unsafe { context::push_current(d, ctx.raw) }?;
        binding.pushed = true;
        Ok(binding)
    }
}

impl Drop for ContextBinding {
    fn drop(&mut self) {
        if self.pushed {
            if let Ok(d) = driver() {
                // Pops the context `bind` pushed on this same thread.
                let _ = context::pop_current(d);
            }
        }
        // SAFETY: a non-null gate lives as long as the context (see RawCtx);
        // this binding entered it.
        if let Some(gate) = unsafe { self.gate.as_ref() } {
            gate.leave();
        }
    }
}

/// The capture-mode shield: while alive, this thread's stream-capture
/// interaction mode is RELAXED, so a capture another library opened in
/// GLOBAL or THREAD_LOCAL mode on another stream can neither refuse our
/// "potentially unsafe" call nor be invalidated by it. Restores the
/// previous mode on drop.
pub(crate) struct CaptureShield<'d> {
    driver: &'d Driver,
    previous: CUstreamCaptureMode,
}

impl<'d> CaptureShield<'d> {
    pub(crate) fn raise(driver: &'d Driver) -> Result<CaptureShield<'d>> {
        let previous = stream::thread_exchange_capture_mode(driver, CU_STREAM_CAPTURE_MODE_RELAXED)?;
        Ok(CaptureShield { driver, previous })
    }
}

impl Drop for CaptureShield<'_> {
    fn drop(&mut self) {
        // Restores the mode `raise` replaced.
        let _ = stream::thread_exchange_capture_mode(self.driver, self.previous);
    }
}

/// Runs `f` with `ctx` current and the capture shield raised: the wrapper
/// for every potentially unsafe call (allocate, free, synchronize, load a
/// module, instantiate, launch or destroy a graph).
pub(crate) fn shielded<T>(ctx: RawCtx, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
    let d = driver()?;
    let _bind = ContextBinding::bind(d, ctx)?;
    let _shield = CaptureShield::raise(d)?;
    f(d)
}

/// Runs `f` with `ctx` current (no shield): for stream work such as kernel
/// launches and async copies, which are legal during captures.
#[inline]
pub(crate) fn bound<T>(ctx: RawCtx, f: impl FnOnce(&'static Driver) -> Result<T>) -> Result<T> {
    let d = driver()?;
    let _bind = ContextBinding::bind(d, ctx)?;
    f(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_driver_a_failure_is_named_by_its_code() {
        match error_with(None, "cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY) {
            Error::Cuda { call, code, name, description } => {
                assert_eq!((call, code, name.as_str(), description.as_str()), ("cuMemAlloc", 2, "CUDA_ERROR_2", ""));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "FFI: asks the driver (dlopen) for the code's name")]
    fn a_driver_error_becomes_the_crates_error_with_its_call_and_code() {
        let invalidated = DriverError { call: "cuStreamEndCapture", code: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED };
        let e = Error::from(invalidated);
        assert!(matches!(e, Error::CaptureInvalidated { call: "cuStreamEndCapture", .. }), "{e:?}");
        assert_eq!(e.cuda_code(), Some(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED));
        let e = Error::from(DriverError { call: "cuMemAlloc", code: CUDA_ERROR_OUT_OF_MEMORY });
        assert!(matches!(e, Error::Cuda { call: "cuMemAlloc", code: 2, .. }), "{e:?}");
        assert!(e.to_string().starts_with("cuMemAlloc failed: "), "{e}");
        // `?` converts too.
        let converted = (|| -> Result<()> { Err(DriverError { call: "cuInit", code: 3 })? })();
        assert_eq!(converted.err().and_then(|e| e.cuda_code()), Some(3));
    }
}
