//! Device memory: allocation, copies, memsets, pointer attributes.

use cuda_sys::*;

use super::p;
use crate::objects::graph::NodeKind;
use crate::objects::stream::Op;
use crate::objects::work::{Copy, Memset, Place, Work};
use crate::state::{entry, out, slice, State, R};

/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`, `_DEVICE_POINTER`, `_DEVICE_ORDINAL`.
const ATTR_MEMORY_TYPE: u32 = 2;
const ATTR_DEVICE_POINTER: u32 = 3;
const ATTR_DEVICE_ORDINAL: u32 = 9;
/// `CU_MEMORYTYPE_DEVICE`.
const MEMORYTYPE_DEVICE: u32 = 2;

impl State {
    /// Submits work to a stream: a node of its capture, or queued.
    pub fn submit(&mut self, stream: u64, work: Work, programmatic: bool) -> R<Option<u64>> {
        if self.capture_of(stream).is_some() {
            self.capture_node(stream, NodeKind::Work(work), programmatic)?;
            return Ok(None);
        }
        self.gate_legacy(stream)?;
        Ok(Some(self.enqueue(stream, Op::Work(work))?))
    }

    /// Checks `len` bytes of device memory at `ptr` (any device).
    fn device_range(&self, ptr: u64, len: usize, what: &str) -> R {
        if len == 0 {
            return Ok(());
        }
        self.memory
            .check(ptr, len, None)
            .map(|_| ())
            .map_err(|a| self.misuse(CUDA_ERROR_INVALID_VALUE, format!("{what}: {}", a.describe())))
    }
}

/// `cuMemAlloc` (3020): in the current context's device (a green
/// context's memory is its primary context's).
pub unsafe extern "C" fn cuMemAlloc_v3020(dptr: *mut CUdeviceptr, size: usize) -> CUresult {
    entry("cuMemAlloc", 3020, |s| {
        let o = out(dptr)?;
        let ctx = s.current_ctx()?;
        s.gate_unsafe()?;
        let (owner, device) = (s.owner(ctx), s.ctx_device(ctx));
        *o = s.memory.alloc(size, device, owner, s.cfg.memory)?;
        Ok(())
    })
}

/// `cuMemFree` (3020): synchronous (the device's queued work runs first).
pub unsafe extern "C" fn cuMemFree_v3020(dptr: CUdeviceptr) -> CUresult {
    entry("cuMemFree", 3020, |s| {
        s.current_ctx()?;
        s.gate_unsafe()?;
        if dptr == 0 {
            return Ok(());
        }
        let Some((start, a)) = s.memory.find(dptr) else {
            return Err(s.misuse(
                CUDA_ERROR_INVALID_VALUE,
                format!("cuMemFree({dptr:#x}): no allocation holds it (freed twice?)"),
            ));
        };
        if start != dptr {
            return Err(s.misuse(
                CUDA_ERROR_INVALID_VALUE,
                format!("cuMemFree({dptr:#x}) inside the allocation at {start:#x}"),
            ));
        }
        let device = a.device;
        s.flush_device(device);
        s.memory.free(dptr).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        Ok(())
    })
}

/// `cuMemGetInfo` (3020).
pub unsafe extern "C" fn cuMemGetInfo_v3020(free: *mut usize, total: *mut usize) -> CUresult {
    entry("cuMemGetInfo", 3020, |s| {
        let (f, t) = (out(free)?, out(total)?);
        let device = s.ctx_device(s.current_ctx()?);
        *t = s.cfg.memory;
        *f = s.cfg.memory.saturating_sub(s.memory.used(device));
        Ok(())
    })
}

/// `cuMemcpyHtoDAsync` (3020): the host bytes are staged at the call
/// (a pageable source), or read at replay when captured.
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v3020(
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    stream: CUstream,
) -> CUresult {
    entry("cuMemcpyHtoDAsync", 3020, |s| {
        let v = s.stream(stream)?;
        s.device_range(dst, n, "cuMemcpyHtoDAsync destination")?;
        let bytes = slice(src.cast::<u8>(), n)?;
        let src = if s.capture_of(v).is_some() { Place::Host(src as usize) } else { Place::Staged(bytes.to_vec()) };
        s.submit(v, Work::Copy(Copy { dst: Place::Device(dst), src, len: n }), false)?;
        Ok(())
    })
}

/// `cuMemcpyDtoHAsync` (3020): returns once the bytes are in host memory
/// (a pageable destination), unless captured.
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v3020(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    stream: CUstream,
) -> CUresult {
    entry("cuMemcpyDtoHAsync", 3020, |s| {
        let v = s.stream(stream)?;
        s.device_range(src, n, "cuMemcpyDtoHAsync source")?;
        if dst.is_null() && n > 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let queued =
            s.submit(v, Work::Copy(Copy { dst: Place::Host(dst as usize), src: Place::Device(src), len: n }), false)?;
        if let Some(seq) = queued {
            s.flush_until(v, seq);
        }
        Ok(())
    })
}

/// `cuMemcpyDtoDAsync` (3020): across devices too (unified addressing).
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v3020(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    stream: CUstream,
) -> CUresult {
    entry("cuMemcpyDtoDAsync", 3020, |s| {
        let v = s.stream(stream)?;
        s.device_range(src, n, "cuMemcpyDtoDAsync source")?;
        s.device_range(dst, n, "cuMemcpyDtoDAsync destination")?;
        s.submit(v, Work::Copy(Copy { dst: Place::Device(dst), src: Place::Device(src), len: n }), false)?;
        Ok(())
    })
}

/// `cuMemsetD8Async` (3020).
pub unsafe extern "C" fn cuMemsetD8Async_v3020(
    dst: CUdeviceptr,
    value: c_uchar,
    n: usize,
    stream: CUstream,
) -> CUresult {
    entry("cuMemsetD8Async", 3020, |s| {
        let v = s.stream(stream)?;
        s.device_range(dst, n, "cuMemsetD8Async")?;
        let device = s.memory.find(dst).map(|(_, a)| a.device).unwrap_or(0);
        let m = Memset { dst, pitch: 0, value: u32::from(value), element: 1, width: n, height: 1, device };
        s.submit(v, Work::Memset(m), false)?;
        Ok(())
    })
}

/// `cuMemsetD32Async` (3020): not in fc-graph's table; foreign clients
/// (the C suite's own driver calls) use it by name.
pub unsafe extern "C" fn cuMemsetD32Async_v3020(
    dst: CUdeviceptr,
    value: c_uint,
    n: usize,
    stream: CUstream,
) -> CUresult {
    entry("cuMemsetD32Async", 3020, |s| {
        let v = s.stream(stream)?;
        if dst % 4 != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        s.device_range(dst, n.checked_mul(4).ok_or(CUDA_ERROR_INVALID_VALUE)?, "cuMemsetD32Async")?;
        let device = s.memory.find(dst).map(|(_, a)| a.device).unwrap_or(0);
        let m = Memset { dst, pitch: 0, value, element: 4, width: n, height: 1, device };
        s.submit(v, Work::Memset(m), false)?;
        Ok(())
    })
}

/// `cuPointerGetAttribute` (4000): the context (a green context's memory
/// reports the primary context), memory type, device pointer, device
/// ordinal, range start and size; an address in no allocation is
/// `CUDA_ERROR_INVALID_VALUE` (not a misuse: it is how a client asks).
pub unsafe extern "C" fn cuPointerGetAttribute_v4000(
    data: *mut c_void,
    attr: CUpointer_attribute,
    ptr: CUdeviceptr,
) -> CUresult {
    entry("cuPointerGetAttribute", 4000, |s| {
        if data.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let (start, a) = s.memory.find(ptr).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        match attr {
            CU_POINTER_ATTRIBUTE_CONTEXT => *out(data.cast::<CUcontext>())? = p(a.ctx),
            ATTR_MEMORY_TYPE => *out(data.cast::<c_uint>())? = MEMORYTYPE_DEVICE,
            ATTR_DEVICE_POINTER => *out(data.cast::<CUdeviceptr>())? = ptr,
            ATTR_DEVICE_ORDINAL => *out(data.cast::<c_int>())? = a.device as c_int,
            CU_POINTER_ATTRIBUTE_RANGE_START_ADDR => *out(data.cast::<CUdeviceptr>())? = start,
            CU_POINTER_ATTRIBUTE_RANGE_SIZE => *out(data.cast::<usize>())? = a.size,
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        }
        Ok(())
    })
}
