//! Context exports.

use std::os::raw::{c_int, c_void};

use ::fc_graph::{Context, ContextKind, Isolation, IsolationRequest};

use super::error::{Error, Result};
use super::handles::{self, handle_kind, Live};
use super::header::fc_cuda_ctx;
use super::held::CContext;
use super::{handle_or_null, release, status, value};

handle_kind!(CContext => fc_cuda_ctx, "fc_cuda_ctx");

/// The context behind `ctx`.
#[inline]
pub(crate) fn ctx(h: *const fc_cuda_ctx) -> Result<Live<CContext>> {
    handles::get::<CContext>(h, "ctx")
}

fn ordinal(device: c_int) -> Result<usize> {
    usize::try_from(device).map_err(|_| Error::invalid(format!("device {device} is negative")))
}

/// `fc_cuda_ctx *fc_cuda_init_device(int device)`
#[no_mangle]
pub extern "C" fn fc_cuda_init_device(device: c_int) -> *mut fc_cuda_ctx {
    handle_or_null(|| handles::insert(CContext::new(Context::new(ordinal(device)?)?)))
}

/// `fc_cuda_ctx *fc_cuda_init_device_isolated(int device)`
#[no_mangle]
pub extern "C" fn fc_cuda_init_device_isolated(device: c_int) -> *mut fc_cuda_ctx {
    handle_or_null(|| handles::insert(CContext::new(Context::isolated(ordinal(device)?)?)))
}

/// `fc_cuda_ctx *fc_cuda_init_device_isolated_as(int device, int isolation)`
#[no_mangle]
pub extern "C" fn fc_cuda_init_device_isolated_as(device: c_int, isolation: c_int) -> *mut fc_cuda_ctx {
    handle_or_null(|| {
        let request = match isolation {
            1 => IsolationRequest::Green,
            2 => IsolationRequest::Private,
            other => {
                return Err(Error::invalid(format!(
                    "isolation {other} is neither FC_ISOLATION_GREEN (1) nor FC_ISOLATION_PRIVATE (2)"
                )))
            }
        };
        handles::insert(CContext::new(Context::isolated_with(ordinal(device)?, request)?))
    })
}

/// `void fc_cuda_ctx_free(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_cuda_ctx_free(ctx: *mut fc_cuda_ctx) {
    release(ctx, |h| {
        let c = handles::remove::<CContext>(h, "ctx")?;
        // A capture still held is aborted now, not when the last graph or
        // buffer of the context lets go of it.
        if c.held_open() {
            let _ = c.abort_held();
        }
        Ok(())
    })
}

/// `int fc_cuda_ctx_device_id(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_cuda_ctx_device_id(h: *const fc_cuda_ctx) -> c_int {
    value(-1, || Ok(c_int::try_from(ctx(h)?.device_id()).unwrap_or(c_int::MAX)))
}

/// `int fc_ctx_is_isolated(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_ctx_is_isolated(h: *const fc_cuda_ctx) -> c_int {
    value(-1, || Ok(c_int::from(ctx(h)?.kind() == ContextKind::Isolated)))
}

/// `FC_ISOLATION_NONE`, `FC_ISOLATION_GREEN`, `FC_ISOLATION_PRIVATE` of the
/// header, for `isolation`.
pub(crate) fn isolation_code(isolation: Isolation) -> c_int {
    match isolation {
        Isolation::None => 0,
        Isolation::Green => 1,
        Isolation::Private => 2,
    }
}

/// `int fc_ctx_isolation(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_ctx_isolation(h: *const fc_cuda_ctx) -> c_int {
    value(-1, || Ok(isolation_code(ctx(h)?.isolation())))
}

/// `int fc_sync_ctx(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_sync_ctx(h: *mut fc_cuda_ctx) -> c_int {
    status(|| Ok(ctx(h)?.synchronize()?))
}

/// `size_t fc_ctx_pool_bytes(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_ctx_pool_bytes(h: *const fc_cuda_ctx) -> usize {
    value(0, || Ok(ctx(h)?.pool_reserved_bytes()))
}

/// `void *fc_ctx_stream(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_ctx_stream(h: *const fc_cuda_ctx) -> *mut c_void {
    value(std::ptr::null_mut(), || Ok(ctx(h)?.raw_stream().cast()))
}

/// `void *fc_ctx_cu_context(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_ctx_cu_context(h: *const fc_cuda_ctx) -> *mut c_void {
    value(std::ptr::null_mut(), || Ok(ctx(h)?.raw_context().cast()))
}

/// `int fc_ctx_mem_info(const fc_cuda_ctx *ctx, size_t *free_bytes, size_t *total_bytes)`
///
/// # Safety
/// `free_bytes` and `total_bytes` are NULL or valid for one write each.
#[no_mangle]
pub unsafe extern "C" fn fc_ctx_mem_info(
    h: *const fc_cuda_ctx,
    free_bytes: *mut usize,
    total_bytes: *mut usize,
) -> c_int {
    status(|| {
        let (free, total) = ctx(h)?.mem_info()?;
        // SAFETY: NULL or valid for one write, per the contract.
        if let Some(out) = unsafe { free_bytes.as_mut() } {
            *out = free;
        }
        // SAFETY: as above.
        if let Some(out) = unsafe { total_bytes.as_mut() } {
            *out = total;
        }
        Ok(())
    })
}

/// `int fc_ctx_set_pdl(fc_cuda_ctx *ctx, int enabled)`
#[no_mangle]
pub extern "C" fn fc_ctx_set_pdl(h: *mut fc_cuda_ctx, enabled: c_int) -> c_int {
    status(|| {
        ctx(h)?.set_pdl(enabled != 0);
        Ok(())
    })
}

/// `int fc_ctx_pdl_enabled(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_ctx_pdl_enabled(h: *const fc_cuda_ctx) -> c_int {
    value(-1, || Ok(c_int::from(ctx(h)?.pdl_enabled())))
}

/// `int fc_device_supports_pdl(int device)`
#[no_mangle]
pub extern "C" fn fc_device_supports_pdl(device: c_int) -> c_int {
    value(-1, || Ok(c_int::from(::fc_graph::launch::supports_pdl(&::fc_graph::Device::get(ordinal(device)?)?)?)))
}

/// Handles of this module's kinds alive now.
pub(crate) fn live_handles() -> usize {
    <CContext as super::handles::Kind>::table().live()
}
