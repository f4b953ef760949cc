//! Running one unit of device work: a memset, a copy, or a kernel (its
//! native model or the PTX interpreter), every access checked; a fault is
//! a misuse.

use std::collections::HashMap;

use cuda_sys::*;

use crate::kernel_run::{Fault, Run};
use crate::kernels::Model;
use crate::objects::work::{Copy, Launch, Place, Work};
use crate::state::{State, R};

impl State {
    /// Runs one unit of work; a fault is reported as a misuse and answered
    /// with the status a GPU would give (`CUDA_ERROR_ILLEGAL_ADDRESS`,
    /// `CUDA_ERROR_LAUNCH_FAILED`).
    pub fn run_work(&mut self, w: &Work, conditions: Option<&mut HashMap<u64, u32>>) -> R {
        match w {
            Work::Kernel(l) => self.run_kernel(l, conditions),
            Work::Memset(m) => {
                let span = m.span().ok_or(CUDA_ERROR_INVALID_VALUE)?;
                if span == 0 {
                    return Ok(());
                }
                let p = self
                    .memory
                    .check(m.dst, span, Some(m.device))
                    .map_err(|a| self.misuse(CUDA_ERROR_ILLEGAL_ADDRESS, format!("memset: {}", a.describe())))?;
                let bytes = m.value.to_le_bytes();
                for row in 0..m.height.max(1) {
                    for i in 0..m.width {
                        for (k, b) in bytes.iter().take(m.element as usize).enumerate() {
                            // SAFETY: the whole span was checked to lie in one allocation.
                            unsafe { p.add(row * m.pitch + i * m.element as usize + k).write(*b) };
                        }
                    }
                }
                Ok(())
            }
            Work::Copy(c) => self.run_copy(c),
        }
    }

    fn run_copy(&mut self, c: &Copy) -> R {
        if c.len == 0 {
            return Ok(());
        }
        let dev = |s: &State, p: u64| {
            s.memory
                .check(p, c.len, None)
                .map_err(|a| s.misuse(CUDA_ERROR_ILLEGAL_ADDRESS, format!("copy: {}", a.describe())))
        };
        let src: *const u8 = match &c.src {
            Place::Device(p) => dev(self, *p)?,
            Place::Host(h) => *h as *const u8,
            Place::Staged(b) => b.as_ptr(),
        };
        let dst: *mut u8 = match &c.dst {
            Place::Device(p) => dev(self, *p)?,
            Place::Host(h) => *h as *mut u8,
            Place::Staged(_) => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        // SAFETY: device ends were checked against their allocations; host
        // ends are the client's buffers of `len` bytes (the driver API's
        // contract for the copy calls); `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, c.len) };
        Ok(())
    }

    fn run_kernel(&mut self, l: &Launch, conditions: Option<&mut HashMap<u64, u32>>) -> R {
        let f = match self.funcs.get(l.func) {
            Ok(f) => f.clone(),
            Err(_) => {
                return Err(self.misuse(
                    CUDA_ERROR_LAUNCH_FAILED,
                    format!("a launch of function {:#x}, whose module was unloaded before it ran", l.func),
                ))
            }
        };
        let model = match &f.model {
            Ok(m) => m.clone(),
            Err(why) => {
                return Err(self.misuse(
                    CUDA_ERROR_LAUNCH_FAILED,
                    format!("kernel {} cannot run in the driver double ({why}); it ran nothing", f.entry.name),
                ))
            }
        };
        let threads = u64::from(l.grid[0]) * u64::from(l.block[0]);
        *self.kernel_runs.entry(f.entry.name.clone()).or_insert(0) += 1;
        let mut run = Run { memory: &self.memory, device: l.device, conditions, last: Default::default() };
        let total =
            threads * u64::from(l.grid[1]) * u64::from(l.grid[2]) * u64::from(l.block[1]) * u64::from(l.block[2]);
        let result = match model {
            Model::Native(n) => run.kernel(n, &f.entry, &l.params, threads),
            Model::Interpreted(_) if total > 1 << 24 => {
                return Err(self.misuse(
                    CUDA_ERROR_LAUNCH_FAILED,
                    format!("kernel {}: {total} threads are more than the interpreter runs (2^24)", f.entry.name),
                ))
            }
            Model::Interpreted(p) => p.run(&mut run, &l.params, l.grid, l.block),
        };
        match result {
            Ok(()) => Ok(()),
            Err(Fault::Memory(a)) => {
                Err(self.misuse(CUDA_ERROR_ILLEGAL_ADDRESS, format!("kernel {}: {}", f.entry.name, a.describe())))
            }
            Err(Fault::Runaway) => Err(self.misuse(
                CUDA_ERROR_LAUNCH_FAILED,
                format!(
                    "kernel {}: a thread ran more instructions than the interpreter allows (a loop that never ends?)",
                    f.entry.name
                ),
            )),
            Err(Fault::Condition(h)) => Err(self.misuse(
                CUDA_ERROR_LAUNCH_FAILED,
                format!(
                    "kernel {} called cudaGraphSetConditional({h:#x}) outside a graph that owns that handle",
                    f.entry.name
                ),
            )),
        }
    }
}
