//! Buffer and built-in kernel exports.

use std::os::raw::{c_int, c_void};

use ::fc_graph::builtins::BinaryOp;
use ::fc_graph::DeviceBuffer;

use super::context::ctx;
use super::error::{Error, Result};
use super::handles::{self, handle_kind, Live};
use super::header::{fc_buffer, fc_cuda_ctx};
use super::held::CContext;
use super::{handle_or_null, release, status, value};

handle_kind!(DeviceBuffer => fc_buffer, "fc_buffer");

/// The buffer behind `buf`, named `what` in messages.
#[inline]
pub(crate) fn buffer(buf: *const fc_buffer, what: &str) -> Result<Live<DeviceBuffer>> {
    handles::get::<DeviceBuffer>(buf, what)
}

/// Checks a host copy of `bytes` bytes (`what`, through the host pointer
/// named `host`, null or not) before any slice is formed: `Ok(false)` when
/// there is nothing to copy, an error when the pointer is NULL or the copy
/// is larger than the buffer (so the slice stays within `isize::MAX`).
fn check_copy(b: &DeviceBuffer, host: &str, host_is_null: bool, bytes: usize, what: &str) -> Result<bool> {
    if bytes == 0 {
        return Ok(false);
    }
    if host_is_null {
        return Err(Error::invalid(format!("{host} is NULL")));
    }
    if bytes > b.size() {
        let msg = format!("{what} of {bytes} bytes into a buffer of {} bytes", b.size());
        return Err(::fc_graph::Error::BufferTooSmall(msg).into());
    }
    Ok(true)
}

/// `fc_buffer *fc_buffer_alloc_ctx(fc_cuda_ctx *ctx, size_t bytes)`
#[no_mangle]
pub extern "C" fn fc_buffer_alloc_ctx(c: *mut fc_cuda_ctx, bytes: usize) -> *mut fc_buffer {
    handle_or_null(|| handles::insert(ctx(c)?.alloc(bytes)?))
}

/// `fc_buffer *fc_buffer_wrap_ctx(fc_cuda_ctx *ctx, uint64_t device_ptr, size_t bytes)`
#[no_mangle]
pub extern "C" fn fc_buffer_wrap_ctx(c: *mut fc_cuda_ctx, device_ptr: u64, bytes: usize) -> *mut fc_buffer {
    handle_or_null(|| {
        let c = ctx(c)?;
        // SAFETY: the header makes the caller responsible for keeping the
        // memory allocated while the buffer and graphs using it are in use.
        handles::insert(unsafe { c.wrap_device_memory(device_ptr, bytes) }?)
    })
}

/// `void fc_buffer_free(fc_buffer *buf)`
#[no_mangle]
pub extern "C" fn fc_buffer_free(buf: *mut fc_buffer) {
    release(buf, |b| handles::remove::<DeviceBuffer>(b, "buf").map(drop))
}

/// `size_t fc_buffer_size(const fc_buffer *buf)`
#[no_mangle]
pub extern "C" fn fc_buffer_size(buf: *const fc_buffer) -> usize {
    value(0, || Ok(buffer(buf, "buf")?.size()))
}

/// `uint64_t fc_buffer_device_ptr(const fc_buffer *buf)`
#[no_mangle]
pub extern "C" fn fc_buffer_device_ptr(buf: *const fc_buffer) -> u64 {
    value(0, || Ok(buffer(buf, "buf")?.as_raw()))
}

/// `int fc_buffer_upload(fc_buffer *buf, const void *src, size_t bytes)`
///
/// # Safety
/// `src` is NULL or valid for reading `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_upload(buf: *mut fc_buffer, src: *const c_void, bytes: usize) -> c_int {
    status(|| {
        let b = buffer(buf, "buf")?;
        if !check_copy(&b, "src", src.is_null(), bytes, "upload")? {
            return Ok(());
        }
        // SAFETY: `src` is valid for `bytes` bytes per the contract, and
        // `bytes` is at most the buffer's size (so at most isize::MAX).
        Ok(b.upload(unsafe { std::slice::from_raw_parts(src.cast::<u8>(), bytes) })?)
    })
}

/// `int fc_buffer_download(const fc_buffer *buf, void *dst, size_t bytes)`
///
/// # Safety
/// `dst` is NULL or valid for writing `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn fc_buffer_download(buf: *const fc_buffer, dst: *mut c_void, bytes: usize) -> c_int {
    status(|| {
        let b = buffer(buf, "buf")?;
        if !check_copy(&b, "dst", dst.is_null(), bytes, "download")? {
            return Ok(());
        }
        // SAFETY: `dst` is valid for `bytes` bytes per the contract, and
        // `bytes` is at most the buffer's size (so at most isize::MAX).
        Ok(b.download(unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), bytes) })?)
    })
}

/// `int fc_buffer_fill_ctx(fc_cuda_ctx *ctx, fc_buffer *buf, size_t offset, size_t len, uint8_t value)`
#[no_mangle]
pub extern "C" fn fc_buffer_fill_ctx(
    c: *mut fc_cuda_ctx,
    buf: *mut fc_buffer,
    offset: usize,
    len: usize,
    v: u8,
) -> c_int {
    status(|| {
        handles::get_all!(b: DeviceBuffer = buf, "buf"; c: CContext = c, "ctx");
        Ok(b.fill_bytes_on(&c, offset, len, v)?)
    })
}

/// Shared body of the element-wise exports.
fn binary(
    op: BinaryOp,
    c: *mut fc_cuda_ctx,
    a: *const fc_buffer,
    b: *const fc_buffer,
    out: *mut fc_buffer,
    n: usize,
) -> c_int {
    status(|| {
        handles::get_all!(c: CContext = c, "ctx"; a: DeviceBuffer = a, "a"; b: DeviceBuffer = b, "b";
            out: DeviceBuffer = out, "out");
        Ok(c.binary(op, &a, &b, &out, n)?)
    })
}

/// `int fc_add_ctx(fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n)`
#[no_mangle]
pub extern "C" fn fc_add_ctx(
    c: *mut fc_cuda_ctx,
    a: *const fc_buffer,
    b: *const fc_buffer,
    out: *mut fc_buffer,
    n: usize,
) -> c_int {
    binary(BinaryOp::Add, c, a, b, out, n)
}

/// `int fc_mul_ctx(fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n)`
#[no_mangle]
pub extern "C" fn fc_mul_ctx(
    c: *mut fc_cuda_ctx,
    a: *const fc_buffer,
    b: *const fc_buffer,
    out: *mut fc_buffer,
    n: usize,
) -> c_int {
    binary(BinaryOp::Mul, c, a, b, out, n)
}
