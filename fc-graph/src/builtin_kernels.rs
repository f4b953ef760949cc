//! The built-in element-wise kernels as device code: their PTX (the sm_35
//! variant, and the sm_90 variant with `griddepcontrol` for programmatic
//! dependent launch), their operations, and the module a context loads
//! once. How they are launched is [`crate::builtins`].

use cuda_sys::*;

use crate::driver::RawCtx;
use crate::error::Result;
use crate::module_handle::ModuleHandle;

/// The PTX text (ISA 7.0, sm_35), embedded at build time.
pub const ELEMENTWISE_PTX: &str = include_str!("../kernels/elementwise.ptx");

/// The PDL variant (ISA 7.8, sm_90): the same kernels and parameters, which
/// wait for their stream predecessor with `griddepcontrol.wait` before
/// touching memory and let their successor launch early.
pub const ELEMENTWISE_SM90_PTX: &str = include_str!("../kernels/elementwise_sm90.ptx");

/// Threads per block of the element-wise kernels.
pub(crate) const BLOCK: u32 = 256;

/// The element-wise operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `out[i] = a[i] + b[i]`
    Add,
    /// `out[i] = a[i] * b[i]`
    Mul,
}

impl BinaryOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "fc_add_f32",
            BinaryOp::Mul => "fc_mul_f32",
        }
    }
}

/// The loaded module and its two kernels.
pub(crate) struct Builtins {
    pub(crate) add: CUfunction,
    pub(crate) mul: CUfunction,
    /// The sm_90 variant is loaded: launches use PDL (unless the context's
    /// switch is off).
    pub(crate) pdl: bool,
    // Dropped after the function handles it owns.
    _module: ModuleHandle,
}

// SAFETY: function handles may be used from any thread; the module is kept alive alongside.
unsafe impl Send for Builtins {}
// SAFETY: never mutated after loading.
unsafe impl Sync for Builtins {}

impl Builtins {
    /// Loads the PDL variant where it can be used (`pdl_allowed`: device,
    /// driver and `FC_PDL` allow it), else the sm_35 one. A driver that
    /// fails to JIT the sm_90 variant gets the sm_35 one (and no PDL:
    /// `Context::pdl_enabled` then says `false`).
    pub(crate) fn load(raw_ctx: RawCtx, pdl_allowed: bool) -> Result<Builtins> {
        if pdl_allowed {
            if let Ok(b) = Self::load_variant(raw_ctx, ELEMENTWISE_SM90_PTX, true) {
                return Ok(b);
            }
        }
        Self::load_variant(raw_ctx, ELEMENTWISE_PTX, false)
    }

    fn load_variant(raw_ctx: RawCtx, ptx: &str, pdl: bool) -> Result<Builtins> {
        // The context destroys its built-ins itself, before releasing itself.
        let module = ModuleHandle::load(raw_ctx, ptx)?;
        let (add, _) = module.function(BinaryOp::Add.name())?;
        let (mul, _) = module.function(BinaryOp::Mul.name())?;
        Ok(Builtins { add, mul, pdl, _module: module })
    }
}
