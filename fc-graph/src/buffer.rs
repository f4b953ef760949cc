//! Device buffers: plain driver allocations, or capture-pool blocks when
//! allocated while their context captures.

use cuda_sys::*;

use crate::context::{lock, Context};
use crate::driver::check;
use crate::error::{Error, Result};
use crate::pool::{block_size, slab_size_for};

/// Where a buffer's memory came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Its own `cuMemAlloc`.
    Driver,
    /// A block of the context's capture pool (`block` bytes reserved).
    Pool { block: u64 },
}

/// Device memory owned by one context. Freed on drop.
pub struct DeviceBuffer {
    ctx: Context,
    ptr: CUdeviceptr,
    size: usize,
    origin: Origin,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("device", &self.ctx.device_id())
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("size", &self.size)
            .field("origin", &self.origin)
            .finish()
    }
}

impl Context {
    /// Allocates `bytes` bytes. While the context captures, the memory comes
    /// from its capture pool: the address stays valid for replays and the
    /// allocation does not disturb the capture.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer> {
        if bytes == 0 {
            return Err(Error::invalid("cannot allocate 0 bytes"));
        }
        if self.is_capturing() {
            return self.alloc_from_pool(bytes);
        }
        let ptr = self.shielded(|d| {
            let mut p: CUdeviceptr = 0;
            // SAFETY: valid out-pointer; the context is current.
            check("cuMemAlloc", unsafe { (d.cuMemAlloc)(&mut p, bytes) })?;
            Ok(p)
        })?;
        Ok(DeviceBuffer { ctx: self.clone(), ptr, size: bytes, origin: Origin::Driver })
    }

    fn alloc_from_pool(&self, bytes: usize) -> Result<DeviceBuffer> {
        let block = block_size(bytes);
        let mut pool = lock(&self.inner.pool);
        let ptr = match pool.alloc(block) {
            Some(p) => p,
            None => {
                let slab = slab_size_for(block);
                let base = self.shielded(|d| {
                    let mut p: CUdeviceptr = 0;
                    // SAFETY: valid out-pointer; the shield keeps our own
                    // capture (and others') valid across this call.
                    check("cuMemAlloc", unsafe { (d.cuMemAlloc)(&mut p, slab as usize) })?;
                    Ok(p)
                })?;
                pool.add_slab(base, slab);
                pool.alloc(block).ok_or_else(|| Error::invalid("capture pool: a fresh slab did not fit its block"))?
            }
        };
        Ok(DeviceBuffer { ctx: self.clone(), ptr, size: bytes, origin: Origin::Pool { block } })
    }
}

impl DeviceBuffer {
    /// Size in bytes, as requested.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device address.
    pub fn as_raw(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The owning context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Where the memory came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The device this buffer lives on.
    pub fn device_id(&self) -> usize {
        self.ctx.device_id()
    }

    fn check_len<T>(&self, len: usize, what: &str) -> Result<usize> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::invalid(format!("{what}: size overflows")))?;
        if bytes > self.size {
            return Err(Error::BufferTooSmall(format!("{what} of {bytes} bytes into a buffer of {} bytes", self.size)));
        }
        Ok(bytes)
    }

    /// Copies `src` to the start of the buffer and waits for the copy (and
    /// the work queued before it on the context's stream).
    pub fn upload<T: Copy>(&self, src: &[T]) -> Result<()> {
        let bytes = self.check_len::<T>(src.len(), "upload")?;
        self.ctx.ensure_not_capturing("upload")?;
        let stream = self.ctx.inner.stream;
        let ptr = self.ptr;
        self.ctx.shielded(|d| {
            // SAFETY: `src` holds `bytes` bytes; the buffer holds at least that
            // many; the stream is synchronized before `src` can go away.
            check("cuMemcpyHtoDAsync", unsafe { (d.cuMemcpyHtoDAsync)(ptr, src.as_ptr().cast(), bytes, stream) })?;
            // SAFETY: our stream.
            check("cuStreamSynchronize", unsafe { (d.cuStreamSynchronize)(stream) })
        })
    }

    /// Copies the start of the buffer into `dst`, after the work queued
    /// before it on the context's stream.
    pub fn download<T: Copy>(&self, dst: &mut [T]) -> Result<()> {
        let bytes = self.check_len::<T>(dst.len(), "download")?;
        self.ctx.ensure_not_capturing("download")?;
        let stream = self.ctx.inner.stream;
        let ptr = self.ptr;
        self.ctx.shielded(|d| {
            // SAFETY: `dst` holds `bytes` bytes of plain data (`T: Copy`); the
            // stream is synchronized before `dst` is released.
            check("cuMemcpyDtoHAsync", unsafe { (d.cuMemcpyDtoHAsync)(dst.as_mut_ptr().cast(), ptr, bytes, stream) })?;
            // SAFETY: our stream.
            check("cuStreamSynchronize", unsafe { (d.cuStreamSynchronize)(stream) })
        })
    }

    /// Sets `len` bytes starting at `offset` to `value`, queued on the
    /// owning context's stream (captured when that context captures).
    pub fn fill_bytes(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        self.fill_bytes_on(&self.ctx, offset, len, value)
    }

    /// Like [`fill_bytes`](Self::fill_bytes), queued on `ctx`'s stream
    /// (which must be on the buffer's device).
    pub fn fill_bytes_on(&self, ctx: &Context, offset: usize, len: usize, value: u8) -> Result<()> {
        if ctx.device_id() != self.device_id() {
            return Err(Error::WrongDevice(format!(
                "buffer lives on device {}, the context on device {}",
                self.device_id(),
                ctx.device_id()
            )));
        }
        let end = offset.checked_add(len).ok_or_else(|| Error::invalid("fill range overflows"))?;
        if end > self.size {
            return Err(Error::BufferTooSmall(format!(
                "fill of bytes {offset}..{end} in a buffer of {} bytes",
                self.size
            )));
        }
        if len == 0 {
            return Ok(());
        }
        let stream = ctx.raw_stream();
        let ptr = self.ptr + offset as u64;
        ctx.bound(|d| {
            // SAFETY: the range lies inside the buffer (checked above).
            check("cuMemsetD8Async", unsafe { (d.cuMemsetD8Async)(ptr, value, len, stream) })
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match self.origin {
            Origin::Pool { block } => {
                lock(&self.ctx.inner.pool).free(self.ptr, block);
            }
            Origin::Driver => {
                let ptr = self.ptr;
                let _ = self.ctx.shielded(|d| {
                    // SAFETY: allocated by cuMemAlloc in this context, freed once.
                    check("cuMemFree", unsafe { (d.cuMemFree)(ptr) })
                });
            }
        }
    }
}
