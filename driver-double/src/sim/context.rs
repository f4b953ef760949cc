//! Contexts at work: checking device ordinals and the current context,
//! the context that owns a green context's memory and modules, and
//! tearing a context down (its pending work run first).

use cuda_sys::*;

use crate::objects::context::{Ctx, CtxKind};
use crate::state::{State, R};
use crate::thread::current;

impl State {
    /// The device ordinal `dev`, checked.
    pub fn device(&self, dev: CUdevice) -> R<usize> {
        usize::try_from(dev).ok().filter(|&d| d < self.devices.len()).ok_or(CUDA_ERROR_INVALID_DEVICE)
    }

    /// The calling thread's current context, live and active: no context is
    /// `CUDA_ERROR_INVALID_CONTEXT`; a destroyed one a misuse.
    pub fn current_ctx(&self) -> R<u64> {
        let c = current();
        if c == 0 {
            return Err(CUDA_ERROR_INVALID_CONTEXT);
        }
        match self.ctxs.get(c) {
            Ok(ctx) if ctx.active => Ok(c),
            Ok(_) => {
                Err(self.misuse(CUDA_ERROR_CONTEXT_IS_DESTROYED, format!("the current context {c:#x} was released")))
            }
            Err(_) => Err(self.misuse(
                CUDA_ERROR_CONTEXT_IS_DESTROYED,
                format!("the current context {c:#x} was destroyed (still current on this thread)"),
            )),
        }
    }

    /// The context whose memory and modules `ctx` uses: the primary
    /// context of the device for a green context, else `ctx` itself.
    pub fn owner(&self, ctx: u64) -> u64 {
        match self.ctxs.get(ctx) {
            Ok(Ctx { kind: CtxKind::Green(_), device, .. }) => self.devices[*device].primary,
            _ => ctx,
        }
    }

    /// The device of a live context.
    pub fn ctx_device(&self, ctx: u64) -> usize {
        self.ctxs.get(ctx).map(|c| c.device).unwrap_or(usize::MAX)
    }

    /// Destroys what a context owns (its streams, events, modules, memory),
    /// after running its pending work: a context's destruction or its
    /// primary context's last release.
    pub fn tear_down_ctx(&mut self, ctx: u64) {
        let owned: Vec<u64> = self.streams.handles_where(|s| s.ctx == ctx);
        for s in &owned {
            self.flush(*s);
        }
        let owner_of_resources = self.owner(ctx) == ctx;
        for s in owned {
            let _ = self.streams.remove(s);
        }
        for e in self.events.handles_where(|e| e.ctx == ctx) {
            let _ = self.events.remove(e);
        }
        if owner_of_resources {
            for m in self.modules.handles_where(|m| m.ctx == ctx) {
                self.unload_module(m);
            }
            self.memory.free_owned_by(ctx);
        }
        // Recreate the legacy stream for a primary context's next life.
        if let Ok(c) = self.ctxs.get(ctx) {
            if c.kind == CtxKind::Primary {
                let legacy = self.new_stream(ctx, 0, true);
                if let Ok(c) = self.ctxs.get_mut(ctx) {
                    c.legacy = legacy;
                }
            }
        }
    }
}
