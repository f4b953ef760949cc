//! Buffer and built-in kernel exports.

use std::os::raw::{c_int, c_void};

use super::context::ctx_handle;
use super::header::{fc_buffer, fc_cuda_ctx};
use super::{deref, handle_or_null, release, status, value};
use ::fc_graph::buffer::DeviceBuffer;
use ::fc_graph::builtins::BinaryOp;
use ::fc_graph::{Error, Result};

/// Borrows the buffer behind `buf`.
///
/// # Safety
/// A non-null `buf` must come from `fc_buffer_alloc_ctx` and not be freed.
pub(crate) unsafe fn buffer<'a>(buf: *const fc_buffer, what: &str) -> Result<&'a DeviceBuffer> {
    // SAFETY: per the caller's contract.
    unsafe { deref(buf.cast::<DeviceBuffer>(), what) }
}

/// `fc_buffer *fc_buffer_alloc_ctx(fc_cuda_ctx *ctx, size_t bytes)`
///
/// # Safety
/// `ctx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_alloc_ctx(ctx: *mut fc_cuda_ctx, bytes: usize) -> *mut fc_buffer {
    handle_or_null(|| {
        // SAFETY: per this function's contract.
        let h = unsafe { ctx_handle(ctx) }?;
        let buf = h.ctx.alloc(bytes)?;
        Ok(Box::into_raw(Box::new(buf)).cast::<fc_buffer>())
    })
}

/// `void fc_buffer_free(fc_buffer *buf)`
///
/// # Safety
/// `buf` is NULL or a live buffer, freed once.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_free(buf: *mut fc_buffer) {
    if buf.is_null() {
        return;
    }
    // SAFETY: a live buffer from Box::into_raw, released once here.
    release(|| drop(unsafe { Box::from_raw(buf.cast::<DeviceBuffer>()) }))
}

/// `size_t fc_buffer_size(const fc_buffer *buf)`
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_size(buf: *const fc_buffer) -> usize {
    // SAFETY: per this function's contract.
    value(0, || Ok(unsafe { buffer(buf, "buf") }?.size()))
}

/// `uint64_t fc_buffer_device_ptr(const fc_buffer *buf)`
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_device_ptr(buf: *const fc_buffer) -> u64 {
    // SAFETY: per this function's contract.
    value(0, || Ok(unsafe { buffer(buf, "buf") }?.as_raw()))
}

/// Views `len` bytes at `p` (NULL only when `len` is 0).
///
/// # Safety
/// A non-null `p` must be valid for `len` bytes.
unsafe fn host_bytes<'a>(p: *const c_void, len: usize, what: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: per the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// `int fc_buffer_upload(fc_buffer *buf, const void *src, size_t bytes)`
///
/// # Safety
/// `buf` is NULL or live; `src` is NULL or valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_upload(buf: *mut fc_buffer, src: *const c_void, bytes: usize) -> c_int {
    status(|| {
        // SAFETY: per this function's contract.
        let (b, s) = unsafe { (buffer(buf, "buf")?, host_bytes(src, bytes, "src")?) };
        b.upload(s)
    })
}

/// `int fc_buffer_download(const fc_buffer *buf, void *dst, size_t bytes)`
///
/// # Safety
/// `buf` is NULL or live; `dst` is NULL or valid for writing `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_download(buf: *const fc_buffer, dst: *mut c_void, bytes: usize) -> c_int {
    status(|| {
        // SAFETY: per this function's contract.
        let b = unsafe { buffer(buf, "buf") }?;
        if bytes == 0 {
            return Ok(());
        }
        if dst.is_null() {
            return Err(Error::invalid("dst is NULL"));
        }
        // SAFETY: `dst` is valid for `bytes` bytes per the contract.
        let d = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), bytes) };
        b.download(d)
    })
}

/// `int fc_buffer_fill_ctx(fc_cuda_ctx *ctx, fc_buffer *buf, size_t offset, size_t len, uint8_t value)`
///
/// # Safety
/// `ctx` and `buf` are NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_fill_ctx(
    ctx: *mut fc_cuda_ctx,
    buf: *mut fc_buffer,
    offset: usize,
    len: usize,
    value: u8,
) -> c_int {
    status(|| {
        // SAFETY: per this function's contract.
        let (h, b) = unsafe { (ctx_handle(ctx)?, buffer(buf, "buf")?) };
        b.fill_bytes_on(&h.ctx, offset, len, value)
    })
}

/// Shared body of the element-wise exports.
///
/// # Safety
/// Each pointer is NULL or a live handle.
unsafe fn binary(
    op: BinaryOp,
    ctx: *mut fc_cuda_ctx,
    a: *const fc_buffer,
    b: *const fc_buffer,
    out: *mut fc_buffer,
    n: usize,
) -> c_int {
    status(|| {
        // SAFETY: per the caller's contract.
        let (h, a, b, o) = unsafe { (ctx_handle(ctx)?, buffer(a, "a")?, buffer(b, "b")?, buffer(out, "out")?) };
        h.ctx.binary(op, a, b, o, n)
    })
}

/// `int fc_add_ctx(fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n)`
///
/// # Safety
/// Each pointer is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_add_ctx(
    ctx: *mut fc_cuda_ctx,
    a: *const fc_buffer,
    b: *const fc_buffer,
    out: *mut fc_buffer,
    n: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { binary(BinaryOp::Add, ctx, a, b, out, n) }
}

/// `int fc_mul_ctx(fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n)`
///
/// # Safety
/// Each pointer is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fc_mul_ctx(
    ctx: *mut fc_cuda_ctx,
    a: *const fc_buffer,
    b: *const fc_buffer,
    out: *mut fc_buffer,
    n: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { binary(BinaryOp::Mul, ctx, a, b, out, n) }
}
