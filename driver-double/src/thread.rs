//! What each thread holds for the driver: its context stack (the top is
//! current), its stream-capture interaction mode, and its id for capture
//! bookkeeping.

use std::cell::Cell;

use cuda_sys::*;

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
