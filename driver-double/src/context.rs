//! Devices, contexts (primary, created, green) and each thread's context
//! stack and stream-capture mode.

use std::cell::Cell;

use cuda_sys::*;

use crate::state::{State, R};

/// One simulated device.
#[derive(Debug)]
pub struct Device {
    /// Its primary context's handle (the same for the device's life).
    pub primary: u64,
    /// Retains of the primary context not yet released.
    pub primary_refs: u32,
}

/// What kind of context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtxKind {
    /// A device's primary context.
    Primary,
    /// `cuCtxCreate`'s.
    Created,
    /// The `CUcontext` of a green context (its handle is the green one).
    Green(u64),
}

/// A context.
#[derive(Debug)]
pub struct Ctx {
    /// Its device's ordinal.
    pub device: usize,
    /// Its kind.
    pub kind: CtxKind,
    /// Whether it is active (a primary context between its first retain
    /// and its last release; others from creation to destruction).
    pub active: bool,
    /// Its legacy (NULL) stream.
    pub legacy: u64,
}

/// A green context.
#[derive(Debug)]
pub struct Green {
    /// Its device.
    pub device: usize,
    /// The `CUcontext` that stands for it.
    pub ctx: u64,
    /// Its SMs.
    pub sm_count: u32,
}

/// A resource descriptor (`cuDevResourceGenerateDesc`).
#[derive(Debug)]
pub struct ResourceDesc {
    /// The SMs it describes.
    pub sm_count: u32,
    /// Their device.
    pub device: Option<usize>,
}

const STACK: usize = 32;

thread_local! {
    /// This thread's context stack (the top is current) and its depth.
    static CTX_STACK: Cell<([u64; STACK], usize)> = const { Cell::new(([0; STACK], 0)) };
    /// This thread's stream-capture interaction mode.
    static CAPTURE_MODE: Cell<u32> = const { Cell::new(CU_STREAM_CAPTURE_MODE_GLOBAL) };
    /// This thread's id for capture bookkeeping (0: not assigned yet).
    static THREAD_ID: Cell<u64> = const { Cell::new(0) };
}

static NEXT_THREAD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The calling thread's id (stable for its life, never reused).
pub fn thread_id() -> u64 {
    THREAD_ID.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_THREAD.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        t.get()
    })
}

/// The calling thread's capture mode.
pub fn thread_mode() -> u32 {
    CAPTURE_MODE.with(Cell::get)
}

/// Swaps the calling thread's capture mode.
pub fn swap_thread_mode(mode: u32) -> u32 {
    CAPTURE_MODE.with(|m| m.replace(mode))
}

/// The context current on the calling thread (0: none).
pub fn current() -> u64 {
    CTX_STACK.with(|c| {
        let (stack, depth) = c.get();
        if depth == 0 {
            0
        } else {
            stack[depth - 1]
        }
    })
}

/// Pushes `ctx`; `false` when the stack is full.
pub fn push(ctx: u64) -> bool {
    CTX_STACK.with(|c| {
        let (mut stack, depth) = c.get();
        if depth == STACK {
            return false;
        }
        stack[depth] = ctx;
        c.set((stack, depth + 1));
        true
    })
}

/// Pops the current context (0 when the stack was empty).
pub fn pop() -> u64 {
    CTX_STACK.with(|c| {
        let (stack, depth) = c.get();
        if depth == 0 {
            return 0;
        }
        c.set((stack, depth - 1));
        stack[depth - 1]
    })
}

/// Replaces the top of the stack (pushes on an empty one); `0` pops.
pub fn set_current(ctx: u64) {
    CTX_STACK.with(|c| {
        let (mut stack, depth) = c.get();
        match (ctx, depth) {
            (0, 0) => {}
            (0, d) => c.set((stack, d - 1)),
            (_, 0) => {
                stack[0] = ctx;
                c.set((stack, 1));
            }
            (_, d) => {
                stack[d - 1] = ctx;
                c.set((stack, d));
            }
        }
    })
}

impl State {
    /// Creates the configured devices and their (inactive) primary contexts.
    pub fn make_devices(&mut self) {
        for device in 0..self.cfg.devices {
            let primary = self.new_ctx(device, CtxKind::Primary, false);
            self.devices.push(Device { primary, primary_refs: 0 });
        }
    }

    /// A new context of `device`, with its legacy stream.
    pub fn new_ctx(&mut self, device: usize, kind: CtxKind, active: bool) -> u64 {
        let serial = self.serial();
        let ctx = self.ctxs.insert(serial, Ctx { device, kind, active, legacy: 0 });
        let legacy = self.new_stream(ctx, 0, true);
        if let Ok(c) = self.ctxs.get_mut(ctx) {
            c.legacy = legacy;
        }
        ctx
    }

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
