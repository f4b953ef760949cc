//! Contexts: the device's primary context, private contexts, and the
//! calling thread's current context.

use super::{DriverError, Result};
use crate::functions::DriverFns;
use crate::types::*;

/// `cuDevicePrimaryCtxRetain(dev)`: the device's primary context, with
/// one more reference (release it with [`primary_release`]).
#[inline]
pub fn primary_retain(d: &DriverFns, dev: CUdevice) -> Result<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks the device.
    DriverError::check("cuDevicePrimaryCtxRetain", unsafe { (d.cuDevicePrimaryCtxRetain)(&mut ctx, dev) })?;
    Ok(ctx)
}

/// `cuDevicePrimaryCtxRelease(dev)`.
///
/// # Safety
/// Gives back a reference taken with [`primary_retain`], once: the last
/// release resets the primary context, whose handles (streams, memory,
/// modules) nothing may use afterwards.
#[inline]
pub unsafe fn primary_release(d: &DriverFns, dev: CUdevice) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuDevicePrimaryCtxRelease", unsafe { (d.cuDevicePrimaryCtxRelease)(dev) })
}

/// `cuCtxCreate(flags, dev)`: a new context, made current on this thread
/// (pushed: [`pop_current`] undoes it).
#[inline]
pub fn create(d: &DriverFns, flags: CUctx_flags, dev: CUdevice) -> Result<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks flags and device.
    DriverError::check("cuCtxCreate", unsafe { (d.cuCtxCreate)(&mut ctx, flags, dev) })?;
    Ok(ctx)
}

/// `cuCtxDestroy(ctx)`.
///
/// # Safety
/// `ctx` was made by [`create`] and is destroyed once; nothing uses it or
/// anything of it afterwards, and it is current on no other thread.
#[inline]
pub unsafe fn destroy(d: &DriverFns, ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuCtxDestroy", unsafe { (d.cuCtxDestroy)(ctx) })
}

/// `cuCtxGetCurrent`: this thread's current context (null for none).
#[inline]
pub fn get_current(d: &DriverFns) -> Result<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    DriverError::check("cuCtxGetCurrent", unsafe { (d.cuCtxGetCurrent)(&mut ctx) })?;
    Ok(ctx)
}

/// `cuCtxSetCurrent(ctx)` (null: no context current).
///
/// # Safety
/// `ctx` is null or a live context, which stays alive while it is current.
#[inline]
pub unsafe fn set_current(d: &DriverFns, ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuCtxSetCurrent", unsafe { (d.cuCtxSetCurrent)(ctx) })
}

/// `cuCtxPushCurrent(ctx)`.
///
/// # Safety
/// As [`set_current`], for a non-null `ctx`.
#[inline]
pub unsafe fn push_current(d: &DriverFns, ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuCtxPushCurrent", unsafe { (d.cuCtxPushCurrent)(ctx) })
}

/// `cuCtxPopCurrent`: pops this thread's current context, returned.
#[inline]
pub fn pop_current(d: &DriverFns) -> Result<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    DriverError::check("cuCtxPopCurrent", unsafe { (d.cuCtxPopCurrent)(&mut ctx) })?;
    Ok(ctx)
}

/// `cuCtxSynchronize`: waits for every stream of the current context.
#[inline]
pub fn synchronize(d: &DriverFns) -> Result<()> {
    // SAFETY: no arguments.
    DriverError::check("cuCtxSynchronize", unsafe { (d.cuCtxSynchronize)() })
}
