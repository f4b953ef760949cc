//! Green contexts (CUDA 12.4+): a device's SM resource, a descriptor of
//! it, green contexts over it, their `CUcontext`s and streams. A green
//! context retains its device's primary context; its memory and modules
//! are the primary context's.

use cuda_sys::*;

use super::{h, p};
use crate::handle::Kind;
use crate::objects::context::{CtxKind, Green, ResourceDesc};
use crate::state::{entry, out, slice};

/// Where `CUdevSmResource::smCount` sits in a `CUdevResource`.
const SM_COUNT_OFFSET: usize = 96;

fn sm_count(r: &CUdevResource) -> u32 {
    // SAFETY: `CUdevResource` is 144 bytes (audited); `smCount` is the
    // first field of the union at offset 96.
    unsafe { std::ptr::read_unaligned((r as *const CUdevResource).cast::<u8>().add(SM_COUNT_OFFSET).cast::<u32>()) }
}

/// `cuDeviceGetDevResource` (12040): all the device's SMs.
pub unsafe extern "C" fn cuDeviceGetDevResource_v12040(
    dev: CUdevice,
    res: *mut CUdevResource,
    ty: CUdevResourceType,
) -> CUresult {
    entry("cuDeviceGetDevResource", 12040, |s| {
        let o = out(res)?;
        s.device(dev)?;
        if ty != CU_DEV_RESOURCE_TYPE_SM {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let sms: u32 = if s.cfg.cc.0 >= 9 { 132 } else { 13 };
        // SAFETY: `o` is a whole `CUdevResource`: zeroed, then its type and
        // SM count written at their offsets.
        unsafe {
            let b = (o as *mut CUdevResource).cast::<u8>();
            b.write_bytes(0, std::mem::size_of::<CUdevResource>());
            std::ptr::write_unaligned(b.cast::<u32>(), CU_DEV_RESOURCE_TYPE_SM);
            std::ptr::write_unaligned(b.add(SM_COUNT_OFFSET).cast::<u32>(), sms);
        }
        Ok(())
    })
}

/// `cuDevResourceGenerateDesc` (12040): one SM resource.
pub unsafe extern "C" fn cuDevResourceGenerateDesc_v12040(
    desc: *mut CUdevResourceDesc,
    resources: *mut CUdevResource,
    n: c_uint,
) -> CUresult {
    entry("cuDevResourceGenerateDesc", 12040, |s| {
        let o = out(desc)?;
        let r = slice(resources.cast_const(), n as usize)?;
        if r.len() != 1 || r[0].type_ != CU_DEV_RESOURCE_TYPE_SM || sm_count(&r[0]) == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let serial = s.serial();
        *o = p(s.descs.insert(serial, ResourceDesc { sm_count: sm_count(&r[0]), device: None }));
        Ok(())
    })
}

/// `cuGreenCtxCreate` (12040): `CU_GREEN_CTX_DEFAULT_STREAM` is required.
pub unsafe extern "C" fn cuGreenCtxCreate_v12040(
    green: *mut CUgreenCtx,
    desc: CUdevResourceDesc,
    dev: CUdevice,
    flags: c_uint,
) -> CUresult {
    entry("cuGreenCtxCreate", 12040, |s| {
        let o = out(green)?;
        let d = s.device(dev)?;
        let dh = h(desc);
        let sm_count = s.descs.get(dh).map_err(|b| s.bad_handle(b, Kind::ResourceDesc, dh))?.sm_count;
        if flags != CU_GREEN_CTX_DEFAULT_STREAM {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        s.gate_unsafe()?;
        let serial = s.serial();
        let g = s.greens.insert(serial, Green { device: d, ctx: 0, sm_count });
        let c = s.new_ctx(d, CtxKind::Green(g), true);
        if let Ok(gr) = s.greens.get_mut(g) {
            gr.ctx = c;
        }
        s.devices[d].primary_refs += 1;
        let primary = s.devices[d].primary;
        if let Ok(pc) = s.ctxs.get_mut(primary) {
            pc.active = true;
        }
        *o = p(g);
        Ok(())
    })
}

/// `cuCtxFromGreenCtx` (12040).
pub unsafe extern "C" fn cuCtxFromGreenCtx_v12040(ctx: *mut CUcontext, green: CUgreenCtx) -> CUresult {
    entry("cuCtxFromGreenCtx", 12040, |s| {
        let o = out(ctx)?;
        let g = h(green);
        *o = p(s.greens.get(g).map_err(|b| s.bad_handle(b, Kind::Green, g))?.ctx);
        Ok(())
    })
}

/// `cuGreenCtxStreamCreate` (12050): `CU_STREAM_NON_BLOCKING` is required.
pub unsafe extern "C" fn cuGreenCtxStreamCreate_v12050(
    stream: *mut CUstream,
    green: CUgreenCtx,
    flags: c_uint,
    _priority: c_int,
) -> CUresult {
    entry("cuGreenCtxStreamCreate", 12050, |s| {
        let o = out(stream)?;
        let g = h(green);
        let ctx = s.greens.get(g).map_err(|b| s.bad_handle(b, Kind::Green, g))?.ctx;
        if flags != CU_STREAM_NON_BLOCKING {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        *o = p(s.new_stream(ctx, flags, false));
        Ok(())
    })
}

/// `cuGreenCtxDestroy` (12040): its streams and events go with it; its
/// retain of the primary context is released.
pub unsafe extern "C" fn cuGreenCtxDestroy_v12040(green: CUgreenCtx) -> CUresult {
    entry("cuGreenCtxDestroy", 12040, |s| {
        let g = h(green);
        let (ctx, device) = {
            let gr = s.greens.get(g).map_err(|b| s.bad_handle(b, Kind::Green, g))?;
            (gr.ctx, gr.device)
        };
        s.gate_unsafe()?;
        s.tear_down_ctx(ctx);
        let _ = s.ctxs.remove(ctx);
        let _ = s.greens.remove(g);
        s.release_primary(device)
    })
}
