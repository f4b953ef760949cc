//! Device memory: allocation, copies, memsets, and what the driver knows
//! of an address.

use std::os::raw::{c_uchar, c_void};

use super::{DriverError, Result};
use crate::constants::*;
use crate::functions::DriverFns;
use crate::types::*;

/// `cuMemAlloc(bytes)`, in the current context.
#[inline]
pub fn alloc(d: &DriverFns, bytes: usize) -> Result<CUdeviceptr> {
    let mut p: CUdeviceptr = 0;
    // SAFETY: valid out-pointer.
    DriverError::check("cuMemAlloc", unsafe { (d.cuMemAlloc)(&mut p, bytes) })?;
    Ok(p)
}

/// `cuMemFree(ptr)`.
///
/// # Safety
/// `ptr` was returned by [`alloc`], is freed once, and no queued or later
/// work uses it.
#[inline]
pub unsafe fn free(d: &DriverFns, ptr: CUdeviceptr) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuMemFree", unsafe { (d.cuMemFree)(ptr) })
}

/// `cuMemGetInfo`: (free, total) bytes of the current context's device.
#[inline]
pub fn get_info(d: &DriverFns) -> Result<(usize, usize)> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers.
    DriverError::check("cuMemGetInfo", unsafe { (d.cuMemGetInfo)(&mut free, &mut total) })?;
    Ok((free, total))
}

/// `cuMemcpyHtoDAsync`: copies `src` to `dst` on `stream`.
///
/// # Safety
/// `dst` is device memory of the stream's context with room for
/// `src.len()` bytes; `src` stays alive and unchanged until the stream
/// reaches the copy; `stream` is live.
#[inline]
pub unsafe fn memcpy_htod_async(d: &DriverFns, dst: CUdeviceptr, src: &[u8], stream: CUstream) -> Result<()> {
    // SAFETY: the caller's promise; `src` holds `src.len()` bytes.
    DriverError::check("cuMemcpyHtoDAsync", unsafe {
        (d.cuMemcpyHtoDAsync)(dst, src.as_ptr().cast(), src.len(), stream)
    })
}

/// `cuMemcpyDtoHAsync`: copies `bytes` bytes at `src` to host memory at
/// `dst` on `stream`.
///
/// # Safety
/// `dst` is valid for `bytes` bytes of writes until the stream reaches the
/// copy, and any bytes are valid there; `src` is device memory of the
/// stream's context holding `bytes` bytes; `stream` is live.
#[inline]
pub unsafe fn memcpy_dtoh_async(
    d: &DriverFns,
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuMemcpyDtoHAsync", unsafe { (d.cuMemcpyDtoHAsync)(dst, src, bytes, stream) })
}

/// `cuMemcpyDtoDAsync`: copies `bytes` bytes from `src` to `dst` on `stream`.
///
/// # Safety
/// Both ranges are device memory of the stream's context; `stream` is live.
#[inline]
pub unsafe fn memcpy_dtod_async(
    d: &DriverFns,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuMemcpyDtoDAsync", unsafe { (d.cuMemcpyDtoDAsync)(dst, src, bytes, stream) })
}

/// `cuMemsetD8Async`: sets `n` bytes at `dst` to `value` on `stream`.
///
/// # Safety
/// `dst` is device memory of the stream's context holding `n` bytes that
/// no other work uses meanwhile; `stream` is live.
#[inline]
pub unsafe fn memset_d8_async(
    d: &DriverFns,
    dst: CUdeviceptr,
    value: c_uchar,
    n: usize,
    stream: CUstream,
) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuMemsetD8Async", unsafe { (d.cuMemsetD8Async)(dst, value, n, stream) })
}

/// `cuPointerGetAttribute` for an attribute whose value is a `T`.
///
/// # Safety
/// `T` is the type the driver writes for `attribute`.
#[inline]
unsafe fn pointer_attribute<T>(d: &DriverFns, attribute: CUpointer_attribute, ptr: CUdeviceptr, zero: T) -> Result<T> {
    let mut v = zero;
    // SAFETY: an out-pointer of the attribute's type (the caller's
    // promise); the driver only looks the address up.
    DriverError::check("cuPointerGetAttribute", unsafe {
        (d.cuPointerGetAttribute)((&mut v as *mut T).cast(), attribute, ptr)
    })?;
    Ok(v)
}

/// The context that owns the allocation `ptr` lies in
/// (`CU_POINTER_ATTRIBUTE_CONTEXT`; null for memory of the virtual memory
/// API). An address the driver does not know is an error.
#[inline]
pub fn pointer_context(d: &DriverFns, ptr: CUdeviceptr) -> Result<CUcontext> {
    // SAFETY: the attribute's value is a CUcontext.
    unsafe { pointer_attribute(d, CU_POINTER_ATTRIBUTE_CONTEXT, ptr, std::ptr::null_mut()) }
}

/// Where the allocation `ptr` lies in starts
/// (`CU_POINTER_ATTRIBUTE_RANGE_START_ADDR`).
#[inline]
pub fn pointer_range_start(d: &DriverFns, ptr: CUdeviceptr) -> Result<CUdeviceptr> {
    // SAFETY: the attribute's value is a CUdeviceptr.
    unsafe { pointer_attribute(d, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr, 0) }
}

/// The size in bytes of the allocation `ptr` lies in
/// (`CU_POINTER_ATTRIBUTE_RANGE_SIZE`).
#[inline]
pub fn pointer_range_size(d: &DriverFns, ptr: CUdeviceptr) -> Result<usize> {
    // SAFETY: the attribute's value is a size_t.
    unsafe { pointer_attribute(d, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr, 0usize) }
}
