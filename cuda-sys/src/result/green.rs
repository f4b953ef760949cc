//! Green contexts (CUDA 12.4+): a device's resources, descriptors, green
//! contexts, their `CUcontext` and their streams. Every entry is optional:
//! `None` when the driver lacks it (no call made).

use std::os::raw::{c_int, c_uint};

use super::{count_u32, invalid, DriverError, Result};
use crate::constants::*;
use crate::functions::DriverFns;
use crate::types::*;

/// `cuDeviceGetDevResource(dev, type_)`: the device's resources of one type.
#[inline]
pub fn device_get_resource(d: &DriverFns, dev: CUdevice, type_: CUdevResourceType) -> Option<Result<CUdevResource>> {
    let get = d.cuDeviceGetDevResource?;
    let mut resource = CUdevResource {
        type_: CU_DEV_RESOURCE_TYPE_INVALID,
        _internal_padding: [0; 92],
        __bindgen_anon_1: CUdevResource_st__bindgen_ty_1 { _oversize: [0; 48] },
    };
    // SAFETY: valid out-pointer to a CUdevResource of the header's layout
    // (audited); the driver checks the device and type.
    let code = unsafe { get(dev, &mut resource, type_) };
    Some(DriverError::check("cuDeviceGetDevResource", code).map(|()| resource))
}

/// `cuDevResourceGenerateDesc(resources)`: a descriptor of them, the
/// argument of [`create`] (an empty or overlong slice is
/// `CUDA_ERROR_INVALID_VALUE` without a call).
///
/// # Safety
/// Each resource is one the driver filled ([`device_get_resource`]), or
/// derived from one as the driver documents.
#[inline]
pub unsafe fn generate_desc(d: &DriverFns, resources: &mut [CUdevResource]) -> Option<Result<CUdevResourceDesc>> {
    let generate = d.cuDevResourceGenerateDesc?;
    const CALL: &str = "cuDevResourceGenerateDesc";
    let n = match count_u32(resources.len()) {
        Some(n) if n > 0 => n,
        _ => return Some(Err(invalid(CALL))),
    };
    let mut desc: CUdevResourceDesc = std::ptr::null_mut();
    // SAFETY: the caller's promise; `n` resources; valid out-pointer.
    let code = unsafe { generate(&mut desc, resources.as_mut_ptr(), n) };
    Some(DriverError::check(CALL, code).map(|()| desc))
}

/// `cuGreenCtxCreate(desc, dev, flags)` (`CU_GREEN_CTX_DEFAULT_STREAM` is
/// required): a green context over the descriptor's resources; it retains
/// the device's primary context.
///
/// # Safety
/// `desc` is a live descriptor of `dev`'s resources.
#[inline]
pub unsafe fn create(
    d: &DriverFns,
    desc: CUdevResourceDesc,
    dev: CUdevice,
    flags: c_uint,
) -> Option<Result<CUgreenCtx>> {
    let create = d.cuGreenCtxCreate?;
    let mut green: CUgreenCtx = std::ptr::null_mut();
    // SAFETY: the caller's promise; valid out-pointer.
    let code = unsafe { create(&mut green, desc, dev, flags) };
    Some(DriverError::check("cuGreenCtxCreate", code).map(|()| green))
}

/// `cuGreenCtxDestroy(green)`.
///
/// # Safety
/// `green` is a live green context, destroyed once, whose streams and
/// modules are gone and that is current on no thread.
#[inline]
pub unsafe fn destroy(d: &DriverFns, green: CUgreenCtx) -> Option<Result<()>> {
    let destroy = d.cuGreenCtxDestroy?;
    // SAFETY: the caller's promise.
    Some(DriverError::check("cuGreenCtxDestroy", unsafe { destroy(green) }))
}

/// `cuCtxFromGreenCtx(green)`: the `CUcontext` that stands for it.
///
/// # Safety
/// `green` is a live green context.
#[inline]
pub unsafe fn context_of(d: &DriverFns, green: CUgreenCtx) -> Option<Result<CUcontext>> {
    let from_green = d.cuCtxFromGreenCtx?;
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: the caller's promise; valid out-pointer.
    let code = unsafe { from_green(&mut ctx, green) };
    Some(DriverError::check("cuCtxFromGreenCtx", code).map(|()| ctx))
}

/// `cuGreenCtxStreamCreate(green, flags, priority)` (CUDA 12.5+):
/// a stream of the green context, whatever context is current
/// (`CU_STREAM_NON_BLOCKING` is required).
///
/// # Safety
/// `green` is a live green context.
#[inline]
pub unsafe fn stream_create(
    d: &DriverFns,
    green: CUgreenCtx,
    flags: c_uint,
    priority: c_int,
) -> Option<Result<CUstream>> {
    let create = d.cuGreenCtxStreamCreate?;
    let mut s: CUstream = std::ptr::null_mut();
    // SAFETY: the caller's promise; valid out-pointer.
    let code = unsafe { create(&mut s, green, flags, priority) };
    Some(DriverError::check("cuGreenCtxStreamCreate", code).map(|()| s))
}
