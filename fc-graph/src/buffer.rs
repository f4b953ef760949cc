//! Device buffers: plain driver allocations, or capture-pool blocks when
//! allocated while their context captures.

use cuda_sys::result::{memory, stream};
use cuda_sys::*;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::nodes::MemsetRaw;
use crate::pool::{block_size, slab_size_for};
use crate::segment::Op;

/// Where a buffer's memory came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Its own `cuMemAlloc`.
    Driver,
    /// A block of the context's capture pool.
    Pool {
        /// Bytes reserved for it in the pool (its size rounded up).
        block: u64,
    },
    /// Memory the caller owns, wrapped by [`Context::wrap_device_memory`]:
    /// never freed by the buffer.
    Borrowed,
}

/// Device memory of one context. Freed on drop (except
/// [`Origin::Borrowed`] memory, which its owner frees).
///
/// Contents: newly allocated memory is **not** initialised (as with
/// `cuMemAlloc`); use [`DeviceBuffer::fill_bytes`] to zero it.
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
        if block_size(bytes).and_then(slab_size_for).is_none() {
            return Err(Error::invalid(format!("cannot allocate {bytes} bytes: the size overflows")));
        }
        if self.is_capturing() {
            return self.alloc_from_pool(bytes);
        }
        // In the context, made current here.
        let ptr = self.shielded(|d| Ok(memory::alloc(d, bytes)?))?;
        Ok(DeviceBuffer { ctx: self.clone(), ptr, size: bytes, origin: Origin::Driver })
    }

    fn alloc_from_pool(&self, bytes: usize) -> Result<DeviceBuffer> {
        let overflow = || Error::invalid(format!("cannot allocate {bytes} bytes: the size overflows"));
        let block = block_size(bytes).ok_or_else(overflow)?;
        let ptr = self.pool().alloc(block, |block| {
            let slab = slab_size_for(block).ok_or_else(overflow)?;
            let slab_bytes = usize::try_from(slab).map_err(|_| overflow())?;
            // The shield keeps our own capture (and others') valid across
            // this call.
            let base = self.shielded(|d| Ok(memory::alloc(d, slab_bytes)?))?;
            Ok((base, slab))
        })?;
        Ok(DeviceBuffer { ctx: self.clone(), ptr, size: bytes, origin: Origin::Pool { block } })
    }

    /// A buffer over `bytes` bytes of device memory at `ptr` that the
    /// caller owns (allocated by cudaMalloc, PyTorch, another library...),
    /// so fc-graph's kernels and copies can use it. The buffer never frees
    /// it. The range must lie inside one allocation of this context's CUDA
    /// context (checked with `cuPointerGetAttribute` where the driver can
    /// tell; an isolated context accepts only its own memory).
    ///
    /// # Safety
    /// The memory must stay allocated for as long as the buffer, and every
    /// graph that recorded work on it, is used.
    pub unsafe fn wrap_device_memory(&self, ptr: CUdeviceptr, bytes: usize) -> Result<DeviceBuffer> {
        if ptr == 0 {
            return Err(Error::invalid("cannot wrap a null device pointer"));
        }
        if bytes == 0 {
            return Err(Error::invalid("cannot wrap 0 bytes"));
        }
        let end = ptr
            .checked_add(bytes as u64)
            .ok_or_else(|| Error::invalid(format!("{ptr:#x} + {bytes} bytes overflows the address space")))?;
        self.check_owned_range(ptr, end)?;
        Ok(DeviceBuffer { ctx: self.clone(), ptr, size: bytes, origin: Origin::Borrowed })
    }

    /// Checks that `[ptr, end)` lies in one device allocation of this
    /// context's CUDA context.
    fn check_owned_range(&self, ptr: CUdeviceptr, end: CUdeviceptr) -> Result<()> {
        let raw = self.raw_context();
        self.shielded(|d| {
            let owner = memory::pointer_context(d, ptr).map_err(|e| {
                Error::invalid(format!("{ptr:#x} is not device memory this driver knows ({})", e.name(d)))
            })?;
            // Memory mapped with the virtual memory API belongs to no context
            // (null owner); anything else must be this context's (for a
            // green context: the device's primary context, which owns the
            // green context's memory and shares it).
            if !owner.is_null() && owner != raw && owner != self.cuda().memory_owner() {
                return Err(Error::WrongContext(format!(
                    "{ptr:#x} belongs to another CUDA context than this {:?} context's",
                    self.kind()
                )));
            }
            let start = memory::pointer_range_start(d, ptr)?;
            let size = memory::pointer_range_size(d, ptr)?;
            if end > start.saturating_add(size as u64) {
                return Err(Error::BufferTooSmall(format!(
                    "{:#x}..{end:#x} runs past the end of its allocation ({start:#x}, {size} bytes)",
                    ptr
                )));
            }
            Ok(())
        })
    }
}

impl DeviceBuffer {
    /// Size in bytes, as requested.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device address.
    #[inline]
    pub fn as_raw(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The owning context.
    #[inline]
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

    fn check_len(&self, bytes: usize, what: &str) -> Result<()> {
        if bytes > self.size {
            return Err(Error::BufferTooSmall(format!("{what} of {bytes} bytes into a buffer of {} bytes", self.size)));
        }
        Ok(())
    }

    /// Copies `src` to the start of the buffer and waits for the copy (and
    /// the work queued before it on the context's stream).
    ///
    /// `T` must be plain data without padding or other uninitialised bytes
    /// ([`bytemuck::NoUninit`]: numbers, arrays of them, `#[repr(C)]`
    /// structs deriving it), since its bytes are read as they are. A type
    /// with padding does not compile:
    ///
    /// ```compile_fail,E0277
    /// # fn demo(buf: &fc_graph::DeviceBuffer) -> fc_graph::Result<()> {
    /// #[derive(Clone, Copy)]
    /// #[repr(C)]
    /// struct Padded {
    ///     tag: u8, // followed by 3 padding bytes
    ///     value: u32,
    /// }
    /// buf.upload(&[Padded { tag: 1, value: 2 }])?; // refused: padding is uninitialised
    /// # Ok(())
    /// # }
    /// ```
    pub fn upload<T: bytemuck::NoUninit>(&self, src: &[T]) -> Result<()> {
        let src: &[u8] = bytemuck::try_cast_slice(src)
            .map_err(|e| Error::invalid(format!("upload: cannot view the source as bytes: {e}")))?;
        let bytes = src.len();
        self.check_len(bytes, "upload")?;
        self.ctx.capture().refuse_while_recording("upload")?;
        let stream = self.ctx.stream();
        let ptr = self.ptr;
        self.ctx.shielded(|d| {
            // SAFETY: the buffer holds at least `src.len()` bytes (checked
            // above); the stream is synchronized before `src` can go away.
            unsafe { memory::memcpy_htod_async(d, ptr, src, stream) }?;
            // SAFETY: our stream.
            Ok(unsafe { stream::synchronize(d, stream) }?)
        })
    }

    /// Copies the start of the buffer into `dst`, after the work queued
    /// before it on the context's stream.
    ///
    /// `T` must be valid for any bit pattern ([`bytemuck::AnyBitPattern`]:
    /// integers, floats, arrays and plain structs of them), since the
    /// device's bytes are written into it as they are:
    ///
    /// ```no_run
    /// # fn demo(buf: &fc_graph::DeviceBuffer) -> fc_graph::Result<()> {
    /// let mut flags = [0u8; 4];
    /// buf.download(&mut flags)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// A `bool` (only 0 and 1 are valid), `char`, reference or enum does
    /// not compile:
    ///
    /// ```compile_fail,E0277
    /// # fn demo(buf: &fc_graph::DeviceBuffer) -> fc_graph::Result<()> {
    /// let mut flags = [false; 4];
    /// buf.download(&mut flags)?; // refused: a byte 2 would be an invalid bool
    /// # Ok(())
    /// # }
    /// ```
    pub fn download<T: bytemuck::AnyBitPattern>(&self, dst: &mut [T]) -> Result<()> {
        let bytes = std::mem::size_of_val(dst);
        self.check_len(bytes, "download")?;
        self.ctx.capture().refuse_while_recording("download")?;
        let stream = self.ctx.stream();
        let ptr = self.ptr;
        let dst = dst.as_mut_ptr();
        self.ctx.shielded(|d| {
            // SAFETY: `dst` is valid for `bytes` bytes of writes (the whole
            // slice, borrowed mutably for this call), and any bytes the
            // device holds make valid `T`s (`T: AnyBitPattern`); the stream
            // is synchronized before the borrow ends.
            unsafe { memory::memcpy_dtoh_async(d, dst.cast(), ptr, bytes, stream) }?;
            // SAFETY: our stream.
            Ok(unsafe { stream::synchronize(d, stream) }?)
        })
    }

    /// Sets `len` bytes starting at `offset` to `value`, queued on the
    /// owning context's stream (captured when that context captures).
    pub fn fill_bytes(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        self.fill_bytes_on(&self.ctx, offset, len, value)
    }

    /// Like [`fill_bytes`](Self::fill_bytes), queued on `ctx`'s stream
    /// (which must share the buffer's CUDA context).
    pub fn fill_bytes_on(&self, ctx: &Context, offset: usize, len: usize, value: u8) -> Result<()> {
        ctx.check_usable("the buffer", &self.ctx)?;
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
        let ptr = self.ptr + offset as u64;
        if ctx.records_by_construction() {
            let m = MemsetRaw { dst: ptr, value: u32::from(value), element_size: 1, count: len };
            if ctx.record_op(Op::Memset(m)) {
                return Ok(());
            }
        }
        let stream = ctx.stream();
        ctx.recorder().trace().note_other();
        ctx.bound(|d| {
            // SAFETY: the range lies inside the buffer (checked above).
            Ok(unsafe { memory::memset_d8_async(d, ptr, value, len, stream) }?)
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match self.origin {
            Origin::Pool { block } => {
                self.ctx.pool().free(self.ptr, block);
            }
            Origin::Driver => {
                let ptr = self.ptr;
                let _ = self.ctx.shielded(|d| {
                    // SAFETY: allocated by cuMemAlloc in this context, freed once.
                    Ok(unsafe { memory::free(d, ptr) }?)
                });
            }
            Origin::Borrowed => {}
        }
        // `self.ctx` is released after this, by the field drop.
    }
}
