//! Events: ordering between streams, and timing.

use std::os::raw::c_uint;

use super::{DriverError, Result};
use crate::functions::DriverFns;
use crate::types::*;

/// `cuEventCreate(flags)`: an event of the current context.
#[inline]
pub fn create(d: &DriverFns, flags: c_uint) -> Result<CUevent> {
    let mut e: CUevent = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks the flags.
    DriverError::check("cuEventCreate", unsafe { (d.cuEventCreate)(&mut e, flags) })?;
    Ok(e)
}

/// `cuEventRecord(event, stream)`.
///
/// # Safety
/// `event` and `stream` are live, of one context.
#[inline]
pub unsafe fn record(d: &DriverFns, event: CUevent, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuEventRecord", unsafe { (d.cuEventRecord)(event, stream) })
}

/// `cuEventSynchronize(event)`.
///
/// # Safety
/// `event` is live.
#[inline]
pub unsafe fn synchronize(d: &DriverFns, event: CUevent) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuEventSynchronize", unsafe { (d.cuEventSynchronize)(event) })
}

/// `cuEventElapsedTime(start, end)`: milliseconds between two recorded
/// events.
///
/// # Safety
/// Both events are live, of one context.
#[inline]
pub unsafe fn elapsed_time(d: &DriverFns, start: CUevent, end: CUevent) -> Result<f32> {
    let mut ms = 0f32;
    // SAFETY: the caller's promise; valid out-pointer.
    DriverError::check("cuEventElapsedTime", unsafe { (d.cuEventElapsedTime)(&mut ms, start, end) })?;
    Ok(ms)
}

/// `cuEventDestroy(event)`.
///
/// # Safety
/// `event` is live, destroyed once, not used afterwards.
#[inline]
pub unsafe fn destroy(d: &DriverFns, event: CUevent) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuEventDestroy", unsafe { (d.cuEventDestroy)(event) })
}
