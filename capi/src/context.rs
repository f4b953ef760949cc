//! Context exports, and the state the C API keeps per context.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::AtomicPtr;
use std::sync::{Arc, Mutex};

use super::header::fc_cuda_ctx;
use super::{deref, handle_or_null, release, status, value};
use ::fc_graph::capture::Capture;
use ::fc_graph::context::Context;
use ::fc_graph::{Error, Result};

/// The live pointer C break functions receive.
#[derive(Debug, Clone, Copy)]
pub struct CLive(pub *mut c_void);

// SAFETY: an opaque pointer the C caller owns; the library never
// dereferences it, only hands it back to the caller's break functions.
unsafe impl Send for CLive {}
// SAFETY: as above.
unsafe impl Sync for CLive {}

/// What an `fc_cuda_ctx *` points at (an `Arc`, so graphs whose breaks
/// hand the handle back to C keep it alive).
pub struct CtxHandle {
    pub(crate) ctx: Context,
    /// The capture opened through the C API, if any.
    pub(crate) capture: Mutex<Option<Capture<CLive>>>,
    /// Live pointer for break functions run while capturing.
    pub(crate) capture_live: AtomicPtr<c_void>,
    /// Live pointer of the break function running now (for pass-through breaks).
    pub(crate) running_live: AtomicPtr<c_void>,
}

/// Borrows the handle behind `ctx`.
///
/// # Safety
/// A non-null `ctx` must come from `fc_cuda_init_device` and not be freed.
pub(crate) unsafe fn ctx_handle<'a>(ctx: *const fc_cuda_ctx) -> Result<&'a CtxHandle> {
    // SAFETY: per the caller's contract.
    unsafe { deref(ctx.cast::<CtxHandle>(), "ctx") }
}

/// A new strong reference to the handle behind `ctx`.
///
/// # Safety
/// As [`ctx_handle`], and `ctx` must not be null.
pub(crate) unsafe fn ctx_arc(ctx: *const fc_cuda_ctx) -> Arc<CtxHandle> {
    let p = ctx.cast::<CtxHandle>();
    // SAFETY: `p` came from Arc::into_raw and is alive; we add a count
    // before materialising a second Arc.
    unsafe {
        Arc::increment_strong_count(p);
        Arc::from_raw(p)
    }
}

/// `fc_cuda_ctx *fc_cuda_init_device(int device)`
#[no_mangle]
pub extern "C" fn fc_cuda_init_device(device: c_int) -> *mut fc_cuda_ctx {
    handle_or_null(|| {
        let ordinal = usize::try_from(device).map_err(|_| Error::invalid(format!("device {device} is negative")))?;
        let handle = CtxHandle {
            ctx: Context::new(ordinal)?,
            capture: Mutex::new(None),
            capture_live: AtomicPtr::new(std::ptr::null_mut()),
            running_live: AtomicPtr::new(std::ptr::null_mut()),
        };
        Ok(Arc::into_raw(Arc::new(handle)) as *mut fc_cuda_ctx)
    })
}

/// `void fc_cuda_ctx_free(fc_cuda_ctx *ctx)`
///
/// # Safety
/// `ctx` is NULL or a live handle from `fc_cuda_init_device`, freed once.
#[no_mangle]
pub unsafe extern "C" fn fc_cuda_ctx_free(ctx: *mut fc_cuda_ctx) {
    if ctx.is_null() {
        return;
    }
    release(|| {
        // SAFETY: a live handle from Arc::into_raw, released once here.
        let handle = unsafe { Arc::from_raw(ctx.cast::<CtxHandle>().cast_const()) };
        // Abort an open capture first: its breaks hold references to the handle.
        let open = lock_slot(&handle).ok().and_then(|mut s| s.take());
        drop(open);
        drop(handle);
    })
}

/// Locks the capture slot without blocking: a break function calling back
/// into begin/end/abort would otherwise deadlock.
pub(crate) fn lock_slot(h: &CtxHandle) -> Result<std::sync::MutexGuard<'_, Option<Capture<CLive>>>> {
    match h.capture.try_lock() {
        Ok(g) => Ok(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => {
            Err(Error::capture_state("the context's capture is busy (called from inside one of its break functions?)"))
        }
    }
}

/// `int fc_cuda_ctx_device_id(const fc_cuda_ctx *ctx)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_cuda_ctx_device_id(ctx: *const fc_cuda_ctx) -> c_int {
    // SAFETY: per this function's contract.
    value(-1, || Ok(unsafe { ctx_handle(ctx) }?.ctx.device_id() as c_int))
}

/// `int fc_sync_ctx(fc_cuda_ctx *ctx)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_sync_ctx(ctx: *mut fc_cuda_ctx) -> c_int {
    // SAFETY: per this function's contract.
    status(|| unsafe { ctx_handle(ctx) }?.ctx.synchronize())
}

/// `size_t fc_ctx_pool_bytes(const fc_cuda_ctx *ctx)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_ctx_pool_bytes(ctx: *const fc_cuda_ctx) -> usize {
    // SAFETY: per this function's contract.
    value(0, || Ok(unsafe { ctx_handle(ctx) }?.ctx.pool_reserved_bytes()))
}
