//! The built-in element-wise kernels (`kernels/elementwise.ptx`), loaded
//! once per context on first use.

use std::os::raw::c_void;

use cuda_sys::*;

use crate::buffer::DeviceBuffer;
use crate::context::Context;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::module::ModuleHandle;

/// The PTX text, embedded at build time.
pub const ELEMENTWISE_PTX: &str = include_str!("../kernels/elementwise.ptx");

/// Threads per block of the element-wise kernels.
const BLOCK: u32 = 256;

/// The element-wise operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `out[i] = a[i] + b[i]`
    Add,
    /// `out[i] = a[i] * b[i]`
    Mul,
}

impl BinaryOp {
    fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "fc_add_f32",
            BinaryOp::Mul => "fc_mul_f32",
        }
    }
}

/// The loaded module and its two kernels.
pub(crate) struct Builtins {
    add: CUfunction,
    mul: CUfunction,
    // Dropped after the function handles it owns.
    _module: ModuleHandle,
}

// SAFETY: function handles may be used from any thread; the module is kept alive alongside.
unsafe impl Send for Builtins {}
// SAFETY: never mutated after loading.
unsafe impl Sync for Builtins {}

impl Builtins {
    fn load(ctx: &Context) -> Result<Builtins> {
        // No owner: the context destroys its built-ins itself, first.
        let module = ModuleHandle::load_unowned(ctx.raw_ctx(), ELEMENTWISE_PTX)?;
        let (add, _) = module.function(BinaryOp::Add.name())?;
        let (mul, _) = module.function(BinaryOp::Mul.name())?;
        Ok(Builtins { add, mul, _module: module })
    }
}

impl Context {
    fn builtins(&self) -> Result<&Builtins> {
        if let Some(b) = self.inner.builtins.get() {
            return Ok(b);
        }
        // Two threads may race here; the loser's module is simply unloaded.
        let loaded = Builtins::load(self)?;
        let _ = self.inner.builtins.set(loaded);
        self.inner.builtins.get().ok_or_else(|| Error::invalid("built-in kernels failed to register"))
    }

    /// Checks that `buf` can take part in an `n`-element f32 operation here.
    fn check_operand(&self, what: &str, buf: &DeviceBuffer, n: usize) -> Result<()> {
        self.check_usable(what, buf.context())?;
        let need = n * std::mem::size_of::<f32>();
        if buf.size() < need {
            return Err(Error::BufferTooSmall(format!("{what} holds {} bytes, {n} floats need {need}", buf.size())));
        }
        Ok(())
    }

    /// Enqueues `out[i] = a[i] op b[i]` for `i < n` on the context's stream
    /// (recorded when the context captures). Checks every buffer first and
    /// launches nothing when one is wrong. `n == 0` does nothing.
    pub fn binary(&self, op: BinaryOp, a: &DeviceBuffer, b: &DeviceBuffer, out: &DeviceBuffer, n: usize) -> Result<()> {
        if n > u32::MAX as usize {
            return Err(Error::invalid(format!("n = {n} exceeds the kernel's 32-bit count")));
        }
        self.check_operand("a", a, n)?;
        self.check_operand("b", b, n)?;
        self.check_operand("out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        let builtins = self.builtins()?;
        let f = match op {
            BinaryOp::Add => builtins.add,
            BinaryOp::Mul => builtins.mul,
        };
        let (mut pa, mut pb, mut po, mut pn) = (a.as_raw(), b.as_raw(), out.as_raw(), n as u32);
        let mut params: [*mut c_void; 4] = [
            (&mut pa as *mut u64).cast(),
            (&mut pb as *mut u64).cast(),
            (&mut po as *mut u64).cast(),
            (&mut pn as *mut u32).cast(),
        ];
        let grid = (n as u32).div_ceil(BLOCK);
        let stream = self.raw_stream();
        self.bound(|d| {
            // SAFETY: `f` takes (u64, u64, u64, u32) as declared in the PTX;
            // each params entry points at a live value of that size.
            check("cuLaunchKernel", unsafe {
                (d.cuLaunchKernel)(f, grid, 1, 1, BLOCK, 1, 1, 0, stream, params.as_mut_ptr(), std::ptr::null_mut())
            })
        })
    }

    /// `out = a + b` over `n` floats; see [`Context::binary`].
    pub fn add(&self, a: &DeviceBuffer, b: &DeviceBuffer, out: &DeviceBuffer, n: usize) -> Result<()> {
        self.binary(BinaryOp::Add, a, b, out, n)
    }

    /// `out = a * b` over `n` floats; see [`Context::binary`].
    pub fn mul(&self, a: &DeviceBuffer, b: &DeviceBuffer, out: &DeviceBuffer, n: usize) -> Result<()> {
        self.binary(BinaryOp::Mul, a, b, out, n)
    }
}
