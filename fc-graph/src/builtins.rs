//! The built-in element-wise kernels, loaded once per context on first use:
//! `kernels/elementwise_sm90.ptx`, launched with programmatic dependent
//! launch, where the device and driver allow it and `FC_PDL` does not
//! forbid it; else `kernels/elementwise.ptx` (sm_35), launched plainly. See
//! [`crate::launch`] for why PDL is automatic for these kernels.

use std::os::raw::c_void;

use cuda_sys::CUfunction;

use crate::buffer::DeviceBuffer;
pub use crate::builtin_kernels::{BinaryOp, ELEMENTWISE_PTX, ELEMENTWISE_SM90_PTX};
use crate::builtin_kernels::{Builtins, BLOCK};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::launch::{launch_kernel, pdl_allowed_on};
use crate::launch_config::LaunchConfig;
use crate::nodes::{LaunchSpec, WordLaunch};
use crate::segment::Op;

/// One built-in launch: the kernel, its configuration, its arguments
/// `(a, b, out, n)` and whether it uses PDL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BinaryLaunch {
    pub(crate) func: CUfunction,
    pub(crate) cfg: LaunchConfig,
    pub(crate) args: (u64, u64, u64, u32),
    pub(crate) pdl: bool,
}

impl BinaryLaunch {
    /// The launch as a node's parameters: (u64, u64, u64, u32), each in a
    /// word of its own.
    pub(crate) fn words(&self) -> WordLaunch {
        let (a, b, out, n) = self.args;
        WordLaunch { func: self.func, cfg: self.cfg, words: [a, b, out, n as u64], pdl: self.pdl }
    }

    /// The launch as a general node's parameters.
    pub(crate) fn spec(&self) -> LaunchSpec {
        self.words().spec()
    }
}

/// The error of an operand too small for `n` floats.
#[cold]
#[inline(never)]
fn too_small(what: &str, buf: &DeviceBuffer, n: usize) -> Error {
    let need = n.saturating_mul(std::mem::size_of::<f32>());
    Error::BufferTooSmall(format!("{what} holds {} bytes, {n} floats need {need}", buf.size()))
}

impl Context {
    /// The built-in kernels, loaded on first use (the PDL variant where
    /// the device, the driver and `FC_PDL` allow it).
    #[inline]
    fn builtins(&self) -> Result<&Builtins> {
        self.kernels().builtins(self.cuda().raw(), || pdl_allowed_on(&self.device()))
    }

    /// Checks that `buf` can take part in an `n`-element f32 operation here.
    #[inline]
    fn check_operand(&self, what: &str, buf: &DeviceBuffer, n: usize) -> Result<()> {
        self.check_usable(what, buf.context())?;
        if buf.size() / std::mem::size_of::<f32>() < n {
            return Err(too_small(what, buf, n));
        }
        Ok(())
    }

    /// The launch [`Context::binary`] makes for these operands (checked
    /// here), or `None` for `n == 0` (nothing to launch). Shared with graph
    /// building ([`crate::graph_builder`]), so a node's parameters are the
    /// eager launch's.
    #[inline]
    pub(crate) fn binary_launch(
        &self,
        op: BinaryOp,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        out: &DeviceBuffer,
        n: usize,
    ) -> Result<Option<BinaryLaunch>> {
        if n > u32::MAX as usize {
            return Err(Error::invalid(format!("n = {n} exceeds the kernel's 32-bit count")));
        }
        self.check_operand("a", a, n)?;
        self.check_operand("b", b, n)?;
        self.check_operand("out", out, n)?;
        if n == 0 {
            return Ok(None);
        }
        let builtins = self.builtins()?;
        let func = match op {
            BinaryOp::Add => builtins.add,
            BinaryOp::Mul => builtins.mul,
        };
        Ok(Some(BinaryLaunch {
            func,
            cfg: LaunchConfig { grid: ((n as u32).div_ceil(BLOCK), 1, 1), block: (BLOCK, 1, 1), shared_mem_bytes: 0 },
            args: (a.as_raw(), b.as_raw(), out.as_raw(), n as u32),
            pdl: builtins.pdl && self.kernels().pdl_switch_on(),
        }))
    }

    /// Enqueues `out[i] = a[i] op b[i]` for `i < n` on the context's stream
    /// (recorded when a recording of the context is open), with programmatic dependent
    /// launch where [`Context::pdl_enabled`]. Checks every buffer first and
    /// launches nothing when one is wrong. `n == 0` does nothing.
    pub fn binary(&self, op: BinaryOp, a: &DeviceBuffer, b: &DeviceBuffer, out: &DeviceBuffer, n: usize) -> Result<()> {
        let Some(launch) = self.binary_launch(op, a, b, out, n)? else {
            return Ok(());
        };
        if self.records_by_construction() && self.record_op(Op::Binary(launch.words())) {
            return Ok(());
        }
        let BinaryLaunch { func, cfg, args, pdl } = launch;
        let (mut pa, mut pb, mut po, mut pn) = args;
        let mut params: [*mut c_void; 4] = [
            (&mut pa as *mut u64).cast(),
            (&mut pb as *mut u64).cast(),
            (&mut po as *mut u64).cast(),
            (&mut pn as *mut u32).cast(),
        ];
        // SAFETY: `func` is a built-in of this context taking (u64, u64,
        // u64, u32) as both PTX variants declare; each params entry points
        // at a live value of that size. Both variants wait before touching
        // memory, so PDL is safe for them.
        unsafe { launch_kernel(self, func, &cfg, params.as_mut_ptr(), pdl) }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx_params::parse_entries;

    /// The body of entry `name` in `ptx`, from its name to its closing brace.
    fn body<'a>(ptx: &'a str, name: &str) -> &'a str {
        let start = ptx.find(&format!(".entry {name}(")).expect("entry present");
        let rest = &ptx[start..];
        &rest[..rest.find("\n}").expect("entry closed")]
    }

    #[test]
    fn both_variants_declare_the_same_kernels() {
        let plain = parse_entries(ELEMENTWISE_PTX).expect("sm_35 PTX parses");
        let pdl = parse_entries(ELEMENTWISE_SM90_PTX).expect("sm_90 PTX parses");
        assert_eq!(format!("{plain:?}"), format!("{pdl:?}"));
        let names: Vec<&str> = plain.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, [BinaryOp::Add.name(), BinaryOp::Mul.name()]);
    }

    #[test]
    fn the_pdl_variant_waits_before_touching_memory() {
        assert!(ELEMENTWISE_SM90_PTX.contains("\n.version 7.8\n.target sm_90\n"));
        for op in [BinaryOp::Add, BinaryOp::Mul] {
            let b = body(ELEMENTWISE_SM90_PTX, op.name());
            let wait = b.find("griddepcontrol.wait;").expect("waits");
            let trigger = b.find("griddepcontrol.launch_dependents;").expect("triggers");
            let first_memory = ["ld.global", "st.global"].iter().filter_map(|m| b.find(m)).min().expect("memory");
            let early_exit = b.find("bra").expect("bounds check");
            assert!(wait < first_memory && wait < early_exit, "{}: wait first", op.name());
            assert!(trigger < wait, "{}: dependents launch early", op.name());
            // Apart from the two instructions, the kernels are the sm_35 ones.
            let plain = body(ELEMENTWISE_PTX, op.name());
            let stripped: String = b.lines().filter(|l| !l.contains("griddepcontrol")).collect::<Vec<_>>().join("\n");
            assert_eq!(stripped, plain, "{}", op.name());
        }
    }

    #[test]
    fn the_plain_variant_has_no_griddepcontrol() {
        assert!(ELEMENTWISE_PTX.contains("\n.target sm_35\n"));
        assert!(!ELEMENTWISE_PTX.contains("griddepcontrol"));
    }
}
