//! Contexts: primary contexts (retain, release), created contexts, the
//! thread's context stack, device-wide synchronisation.

use cuda_sys::*;

use super::{h, p};
use crate::handle::Kind;
use crate::objects::context::CtxKind;
use crate::state::{entry, out, State, R};
use crate::thread;

impl State {
    /// A live, active context handle (misuse otherwise).
    pub fn live_ctx(&self, c: u64) -> R<u64> {
        match self.ctxs.get(c) {
            Ok(ctx) if ctx.active => Ok(c),
            Ok(_) => {
                Err(self
                    .misuse(CUDA_ERROR_INVALID_CONTEXT, format!("context {c:#x} is a primary context not retained")))
            }
            Err(b) => Err(self.bad_handle(b, Kind::Context, c)),
        }
    }

    /// Releases one retain of `device`'s primary context; the last one
    /// destroys what the context holds.
    pub fn release_primary(&mut self, device: usize) -> R {
        let d = &mut self.devices[device];
        if d.primary_refs == 0 {
            return Err(self.misuse(
                CUDA_ERROR_INVALID_CONTEXT,
                format!("device {device}'s primary context released more often than retained"),
            ));
        }
        d.primary_refs -= 1;
        if d.primary_refs == 0 {
            let primary = d.primary;
            self.tear_down_ctx(primary);
            if let Ok(c) = self.ctxs.get_mut(primary) {
                c.active = false;
            }
        }
        Ok(())
    }
}

/// `cuDevicePrimaryCtxRetain` (7000).
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain_v7000(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    entry("cuDevicePrimaryCtxRetain", 7000, |s| {
        let o = out(pctx)?;
        let d = s.device(dev)?;
        s.gate_unsafe()?;
        let primary = s.devices[d].primary;
        s.devices[d].primary_refs += 1;
        if let Ok(c) = s.ctxs.get_mut(primary) {
            c.active = true;
        }
        *o = p(primary);
        Ok(())
    })
}

/// `cuDevicePrimaryCtxRelease` (11000).
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v11000(dev: CUdevice) -> CUresult {
    entry("cuDevicePrimaryCtxRelease", 11000, |s| {
        let d = s.device(dev)?;
        s.gate_unsafe()?;
        s.release_primary(d)
    })
}

/// `cuCtxCreate` (3020): the new context is pushed on the calling thread.
pub unsafe extern "C" fn cuCtxCreate_v3020(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) -> CUresult {
    entry("cuCtxCreate", 3020, |s| {
        let o = out(pctx)?;
        let d = s.device(dev)?;
        if flags > 0x1f {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        s.gate_unsafe()?;
        let c = s.new_ctx(d, CtxKind::Created, true);
        if !thread::push(c) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        *o = p(c);
        Ok(())
    })
}

/// `cuCtxDestroy` (4000): created contexts only; popped from the calling
/// thread when current there.
pub unsafe extern "C" fn cuCtxDestroy_v4000(ctx: CUcontext) -> CUresult {
    entry("cuCtxDestroy", 4000, |s| {
        let c = h(ctx);
        let kind = s.ctxs.get(c).map_err(|b| s.bad_handle(b, Kind::Context, c))?.kind;
        if kind != CtxKind::Created {
            return Err(s.misuse(CUDA_ERROR_INVALID_CONTEXT, format!("cuCtxDestroy of {kind:?} context {c:#x}")));
        }
        s.gate_unsafe()?;
        s.tear_down_ctx(c);
        let _ = s.ctxs.remove(c);
        if thread::current() == c {
            thread::pop();
        }
        Ok(())
    })
}

/// `cuCtxPushCurrent` (4000).
pub unsafe extern "C" fn cuCtxPushCurrent_v4000(ctx: CUcontext) -> CUresult {
    entry("cuCtxPushCurrent", 4000, |s| {
        let c = s.live_ctx(h(ctx))?;
        if !thread::push(c) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        Ok(())
    })
}

/// `cuCtxPopCurrent` (4000).
pub unsafe extern "C" fn cuCtxPopCurrent_v4000(pctx: *mut CUcontext) -> CUresult {
    entry("cuCtxPopCurrent", 4000, |_| {
        if thread::current() == 0 {
            return Err(CUDA_ERROR_INVALID_CONTEXT);
        }
        let c = thread::pop();
        if !pctx.is_null() {
            *out(pctx)? = p(c);
        }
        Ok(())
    })
}

/// `cuCtxGetCurrent` (4000).
pub unsafe extern "C" fn cuCtxGetCurrent_v4000(pctx: *mut CUcontext) -> CUresult {
    entry("cuCtxGetCurrent", 4000, |_| {
        *out(pctx)? = p(thread::current());
        Ok(())
    })
}

/// `cuCtxSetCurrent` (4000): NULL pops.
pub unsafe extern "C" fn cuCtxSetCurrent_v4000(ctx: CUcontext) -> CUresult {
    entry("cuCtxSetCurrent", 4000, |s| {
        let c = h(ctx);
        if c != 0 {
            s.live_ctx(c)?;
        }
        thread::set_current(c);
        Ok(())
    })
}

/// `cuCtxSynchronize` (2000): every stream of the current context (a
/// primary context's: its green contexts' too). Unsafe during a capture,
/// and refused while the context itself has a capturing stream.
pub unsafe extern "C" fn cuCtxSynchronize_v2000() -> CUresult {
    entry("cuCtxSynchronize", 2000, |s| {
        let c = s.current_ctx()?;
        s.gate_unsafe()?;
        s.gate_ctx_sync(c)?;
        s.flush_ctx(c);
        for st in s.streams.handles_where(|st| st.ctx == c) {
            s.take_error(st)?;
        }
        Ok(())
    })
}
