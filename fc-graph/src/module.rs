//! User device code: PTX modules, kernels looked up by name, and checked
//! launches (eager, or recorded when the context captures), plain or, for
//! kernels that opt in, with programmatic dependent launch
//! ([`crate::launch`]).

use std::os::raw::c_void;
use std::sync::Arc;

use cuda_sys::*;

use crate::buffer::DeviceBuffer;
use crate::context::{Context, CudaContext};
use crate::error::{Error, Result};
use crate::launch::{launch_kernel, pdl_env_allows, supports_pdl, LaunchOptions};
pub use crate::launch_config::{LaunchConfig, LaunchLimits};
use crate::module_handle::ModuleHandle;
use crate::nodes::LaunchSpec;
use crate::ptx_params::{ParamKind, PtxEntry, PtxParam};
use crate::segment::{KernelOp, Op};

/// A loaded module and the context it belongs to. Field order is drop
/// order: the module is unloaded while `_owner` still holds the context.
pub(crate) struct OwnedModule {
    pub(crate) handle: ModuleHandle,
    _owner: Context,
}

impl OwnedModule {
    /// JIT-compiles `ptx` in `ctx`, which the module keeps alive.
    fn load(ctx: &Context, ptx: &str) -> Result<OwnedModule> {
        Ok(OwnedModule { handle: ModuleHandle::load(ctx.cuda().raw(), ptx)?, _owner: ctx.clone() })
    }
}

/// A PTX module loaded into a context.
#[derive(Clone)]
pub struct Module {
    ctx: Context,
    handle: Arc<OwnedModule>,
    /// The device and driver can launch with PDL.
    pdl_capable: bool,
}

impl Module {
    /// Loads (JIT-compiles) `ptx` into `ctx`.
    pub fn from_ptx(ctx: &Context, ptx: &str) -> Result<Module> {
        let handle = Arc::new(OwnedModule::load(ctx, ptx)?);
        // A device that cannot be asked gets plain launches (always correct).
        let pdl_capable = supports_pdl(&ctx.device()).unwrap_or(false);
        Ok(Module { ctx: ctx.clone(), handle, pdl_capable })
    }

    /// The `.entry` kernels the PTX declares.
    pub fn entries(&self) -> &[PtxEntry] {
        &self.handle.handle.entries
    }

    /// A kernel by name (launched plainly until [`Kernel::set_pdl`]).
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let (func, entry) = self.handle.handle.function(name)?;
        let limits = query_limits(self.ctx.cuda(), func)?;
        Ok(Kernel {
            ctx: self.ctx.clone(),
            _module: self.handle.clone(),
            func,
            entry,
            pdl: false,
            pdl_capable: self.pdl_capable,
            limits,
        })
    }
}

/// The limits of launches of `f`, a function of `cuda`.
fn query_limits(cuda: &CudaContext, f: CUfunction) -> Result<LaunchLimits> {
    let device = cuda.device();
    let dev = |attr| device.attribute(attr).map(|v| v.max(0) as u32);
    let func = |attr| {
        cuda.bound(|d| {
            // SAFETY: a live function of this context.
            let v = unsafe { cuda_sys::result::kernel::get_attribute(d, attr, f) }?;
            Ok(v.max(0) as u32)
        })
    };
    Ok(LaunchLimits {
        threads: func(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        block: (
            dev(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            dev(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            dev(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ),
        grid: (
            dev(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            dev(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            dev(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ),
        dynamic_shared: func(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
    })
}

/// One kernel argument, typed. Checked against the PTX parameter list
/// before anything is launched.
#[derive(Debug, Clone, Copy)]
pub enum KernelArg<'a> {
    /// A buffer's device address (a `.u64`/`.b64`/`.s64` parameter); it
    /// must live on the launching context's device.
    Buffer(&'a DeviceBuffer),
    /// A raw device address (not checked: the caller vouches that it is
    /// valid on the launching device).
    Ptr(CUdeviceptr),
    /// A `.u32`/`.s32`/`.b32` parameter.
    U32(u32),
    /// A `.s32`/`.u32`/`.b32` parameter.
    I32(i32),
    /// A `.u64`/`.s64`/`.b64` parameter.
    U64(u64),
    /// A `.s64`/`.u64`/`.b64` parameter.
    I64(i64),
    /// A `.f32`/`.b32` parameter.
    F32(f32),
    /// A `.f64`/`.b64` parameter.
    F64(f64),
    /// Raw bytes for `.b8` arrays (structs passed by value).
    Bytes(&'a [u8]),
}

impl<'a> From<&'a DeviceBuffer> for KernelArg<'a> {
    fn from(b: &'a DeviceBuffer) -> Self {
        KernelArg::Buffer(b)
    }
}
macro_rules! arg_from {
    ($($t:ty => $v:ident),*) => { $( impl From<$t> for KernelArg<'_> { fn from(x: $t) -> Self { KernelArg::$v(x) } } )* };
}
arg_from!(u32 => U32, i32 => I32, u64 => U64, i64 => I64, f32 => F32, f64 => F64);

/// The argument's size, and whether it is a float.
fn arg_shape(arg: &KernelArg<'_>) -> (usize, Option<bool>) {
    match arg {
        KernelArg::Buffer(_) | KernelArg::Ptr(_) | KernelArg::U64(_) | KernelArg::I64(_) => (8, Some(false)),
        KernelArg::U32(_) | KernelArg::I32(_) => (4, Some(false)),
        KernelArg::F32(_) => (4, Some(true)),
        KernelArg::F64(_) => (8, Some(true)),
        KernelArg::Bytes(b) => (b.len(), None),
    }
}

/// Checks one argument against its PTX parameter.
pub fn check_arg(kernel: &str, index: usize, param: &PtxParam, arg: &KernelArg<'_>) -> Result<()> {
    let (size, is_float) = arg_shape(arg);
    let bits = matches!(param.kind, ParamKind::B8 | ParamKind::B16 | ParamKind::B32 | ParamKind::B64);
    let kind_ok = match is_float {
        None => param.kind == ParamKind::B8 || param.count > 1 || bits,
        Some(true) => param.kind.is_float() || bits,
        Some(false) => param.kind.is_integer() || bits,
    };
    if size != param.size || !kind_ok {
        return Err(Error::invalid(format!(
            "{kernel}: argument {index} ({}) is {arg:?} ({size} bytes) but the kernel declares {:?}{} ({} bytes)",
            param.name,
            param.kind,
            if param.count > 1 { format!("[{}]", param.count) } else { String::new() },
            param.size
        )));
    }
    Ok(())
}

/// A kernel of a loaded module.
#[derive(Clone)]
pub struct Kernel {
    ctx: Context,
    _module: Arc<OwnedModule>,
    func: CUfunction,
    entry: PtxEntry,
    /// Opted in to PDL ([`Kernel::set_pdl`]): the default of its launches.
    pdl: bool,
    /// The device and driver can launch with PDL.
    pdl_capable: bool,
    limits: LaunchLimits,
}

// SAFETY: CUfunction handles may be used from any thread; the module they
// belong to is kept alive by `_module`.
unsafe impl Send for Kernel {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Kernel {}

impl Kernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// The raw function handle, for interop with other CUDA code (valid
    /// while this kernel is alive).
    pub fn raw_function(&self) -> CUfunction {
        self.func
    }

    /// Its PTX parameters.
    pub fn params(&self) -> &[PtxParam] {
        &self.entry.params
    }

    /// The context the kernel was loaded into.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Opts this kernel handle in to programmatic dependent launch (or out
    /// again): its launches without explicit [`LaunchOptions`] use PDL where
    /// the device, the driver, `FC_PDL` and the launching context's switch
    /// allow it. Only for kernels that execute `griddepcontrol.wait` before
    /// touching memory their stream's previous kernel reads or writes (see
    /// [`crate::launch`]); a kernel that does not would race with it.
    /// Clones made afterwards inherit the setting.
    pub fn set_pdl(&mut self, on: bool) {
        self.pdl = on;
    }

    /// Whether this kernel opted in to PDL ([`Kernel::set_pdl`]).
    pub fn pdl(&self) -> bool {
        self.pdl
    }

    /// The options of a launch without explicit ones.
    pub fn default_options(&self) -> LaunchOptions {
        LaunchOptions { pdl: self.pdl }
    }

    /// Whether a launch with `opts` on `ctx` uses PDL.
    pub fn uses_pdl(&self, ctx: &Context, opts: LaunchOptions) -> bool {
        opts.pdl && self.pdl_capable && pdl_env_allows() && ctx.kernels().pdl_switch_on()
    }

    /// What one launch may ask for (checked by every launch).
    pub fn limits(&self) -> LaunchLimits {
        self.limits
    }

    /// Checks `args` against the PTX signature and that buffers live on the
    /// kernel's device.
    pub fn check_args(&self, args: &[KernelArg<'_>]) -> Result<()> {
        if args.len() != self.entry.params.len() {
            return Err(Error::invalid(format!(
                "{}: {} arguments given, the kernel takes {}",
                self.entry.name,
                args.len(),
                self.entry.params.len()
            )));
        }
        for (i, (p, a)) in self.entry.params.iter().zip(args).enumerate() {
            check_arg(&self.entry.name, i, p, a)?;
            if let KernelArg::Buffer(b) = a {
                self.ctx.check_usable(&format!("{}: argument {i}", self.entry.name), b.context())?;
            }
        }
        Ok(())
    }

    /// Launches on the kernel's context stream (recorded into the capture
    /// when the context captures), with PDL if the kernel opted in.
    /// Asynchronous.
    pub fn launch(&self, cfg: LaunchConfig, args: &[KernelArg<'_>]) -> Result<()> {
        self.launch_on_with(&self.ctx, cfg, args, self.default_options())
    }

    /// [`Kernel::launch`] with explicit options (e.g. PDL for this launch
    /// only: `LaunchOptions::PDL`).
    pub fn launch_with(&self, cfg: LaunchConfig, args: &[KernelArg<'_>], opts: LaunchOptions) -> Result<()> {
        self.launch_on_with(&self.ctx, cfg, args, opts)
    }

    /// Launches on another context's stream of the same device.
    pub fn launch_on(&self, ctx: &Context, cfg: LaunchConfig, args: &[KernelArg<'_>]) -> Result<()> {
        self.launch_on_with(ctx, cfg, args, self.default_options())
    }

    /// [`Kernel::launch_on`] with explicit options.
    pub fn launch_on_with(
        &self,
        ctx: &Context,
        cfg: LaunchConfig,
        args: &[KernelArg<'_>],
        opts: LaunchOptions,
    ) -> Result<()> {
        cfg.validate()?;
        self.check_args(args)?;
        if ctx.records_by_construction() {
            let spec = self.launch_spec(ctx, cfg, args, opts)?;
            if ctx.record_op(Op::Kernel(Box::new(KernelOp { spec, _module: self._module.clone() }))) {
                return Ok(());
            }
        }
        // Argument values laid out in 8-byte slots; `Bytes` point at the caller's slice.
        let slots: Vec<u64> = args.iter().map(arg_word).collect();
        let mut ptrs: Vec<*mut c_void> = args
            .iter()
            .zip(&slots)
            .map(|(a, s)| match a {
                KernelArg::Bytes(b) => b.as_ptr() as *mut c_void,
                _ => s as *const u64 as *mut c_void,
            })
            .collect();
        // SAFETY: every pointer in `ptrs` points at a live value of the size
        // the PTX parameter declares (little-endian slot, checked above).
        unsafe { self.launch_raw_with(ctx, cfg, ptrs.as_mut_ptr(), opts) }
    }

    /// The launch of this kernel on `ctx` with `args` as a graph node's
    /// parameters, checked as [`Kernel::launch_on_with`] checks it, with
    /// PDL where that launch would use it.
    pub(crate) fn launch_spec(
        &self,
        ctx: &Context,
        cfg: LaunchConfig,
        args: &[KernelArg<'_>],
        opts: LaunchOptions,
    ) -> Result<LaunchSpec> {
        cfg.validate()?;
        self.limits.check(&self.entry.name, &cfg)?;
        ctx.check_usable(&format!("kernel {}", self.entry.name), &self.ctx)?;
        self.check_args(args)?;
        let mut spec = LaunchSpec::empty(self.func, cfg, self.uses_pdl(ctx, opts));
        for a in args {
            match *a {
                KernelArg::Bytes(b) => spec.push_bytes(b)?,
                _ => spec.push_word(arg_word(a))?,
            }
        }
        Ok(spec)
    }

    /// Launches with a `cuLaunchKernel`-style parameter array (PDL if the
    /// kernel opted in).
    ///
    /// # Safety
    /// `params` must hold one pointer per kernel parameter, each to a value
    /// of that parameter's size, valid for the duration of the call.
    pub unsafe fn launch_raw_on(&self, ctx: &Context, cfg: LaunchConfig, params: *mut *mut c_void) -> Result<()> {
        // SAFETY: the caller's contract is this function's.
        unsafe { self.launch_raw_with(ctx, cfg, params, self.default_options()) }
    }

    /// [`Kernel::launch_raw_on`] with explicit options.
    ///
    /// # Safety
    /// As [`Kernel::launch_raw_on`].
    pub unsafe fn launch_raw_with(
        &self,
        ctx: &Context,
        cfg: LaunchConfig,
        params: *mut *mut c_void,
        opts: LaunchOptions,
    ) -> Result<()> {
        cfg.validate()?;
        self.limits.check(&self.entry.name, &cfg)?;
        ctx.check_usable(&format!("kernel {}", self.entry.name), &self.ctx)?;
        let pdl = self.uses_pdl(ctx, opts);
        if ctx.records_by_construction() {
            let mut spec = LaunchSpec::empty(self.func, cfg, pdl);
            for (i, p) in self.entry.params.iter().enumerate() {
                // SAFETY: per the caller's contract, `params` holds one
                // pointer per kernel parameter, each to `p.size` readable
                // bytes, valid for this call.
                let bytes = unsafe { std::slice::from_raw_parts((*params.add(i)).cast::<u8>(), p.size) };
                spec.push_bytes(bytes)?;
            }
            if ctx.record_op(Op::Kernel(Box::new(KernelOp { spec, _module: self._module.clone() }))) {
                return Ok(());
            }
        }
        // SAFETY: a live function usable on `ctx` (checked above); `params`
        // per the caller's contract; PDL only where the caller opted in for
        // this kernel.
        unsafe { launch_kernel(ctx, self.func, &cfg, params, pdl) }
    }
}

/// A scalar kernel argument in one little-endian 8-byte word (`Bytes`
/// are laid out by the caller).
fn arg_word(a: &KernelArg<'_>) -> u64 {
    match *a {
        KernelArg::Buffer(b) => b.as_raw(),
        KernelArg::Ptr(p) => p,
        KernelArg::U32(v) => v as u64,
        KernelArg::I32(v) => v as u32 as u64,
        KernelArg::U64(v) => v,
        KernelArg::I64(v) => v as u64,
        KernelArg::F32(v) => v.to_bits() as u64,
        KernelArg::F64(v) => v.to_bits(),
        KernelArg::Bytes(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx_params::parse_entries;

    const PTX: &str = "
.version 7.0
.target sm_35
.address_size 64
.visible .entry k(
	.param .u64 ptr,
	.param .f32 scale,
	.param .u32 n,
	.param .b32 bits,
	.param .align 4 .b8 blob[12],
	.param .s64 offset
)
{
	ret;
}
";

    fn params() -> Vec<PtxParam> {
        parse_entries(PTX).expect("test PTX parses")[0].params.clone()
    }

    fn accepts(index: usize, arg: KernelArg<'_>) -> bool {
        check_arg("k", index, &params()[index], &arg).is_ok()
    }

    #[test]
    fn pointer_parameters_take_64_bit_integers() {
        assert!(accepts(0, KernelArg::Ptr(0x1000)));
        assert!(accepts(0, KernelArg::U64(1)));
        assert!(accepts(0, KernelArg::I64(-1)));
        assert!(!accepts(0, KernelArg::U32(1)), "4 bytes for an 8-byte parameter");
        assert!(!accepts(0, KernelArg::F64(1.0)), "a float for an integer parameter");
        assert!(accepts(5, KernelArg::I64(-8)));
    }

    #[test]
    fn float_and_integer_parameters_are_not_mixed() {
        assert!(accepts(1, KernelArg::F32(2.0)));
        assert!(!accepts(1, KernelArg::U32(2)));
        assert!(!accepts(1, KernelArg::F64(2.0)));
        assert!(accepts(2, KernelArg::U32(7)));
        assert!(accepts(2, KernelArg::I32(-7)));
        assert!(!accepts(2, KernelArg::F32(7.0)));
    }

    #[test]
    fn bit_parameters_take_either_kind_of_the_right_size() {
        assert!(accepts(3, KernelArg::F32(1.0)));
        assert!(accepts(3, KernelArg::U32(1)));
        assert!(!accepts(3, KernelArg::U64(1)));
    }

    #[test]
    fn byte_arrays_take_exactly_their_size() {
        assert!(accepts(4, KernelArg::Bytes(&[0; 12])));
        assert!(!accepts(4, KernelArg::Bytes(&[0; 8])));
        assert!(!accepts(4, KernelArg::U64(0)));
    }

    #[test]
    fn mismatch_message_names_kernel_argument_and_declaration() {
        let e = check_arg("k", 1, &params()[1], &KernelArg::U32(3)).unwrap_err().to_string();
        assert!(e.contains("k: argument 1 (scale)") && e.contains("F32"), "{e}");
    }

    #[test]
    fn launches_past_the_limits_are_refused() {
        // An H200's limits, for a kernel that may use 1024 threads and 48 KiB.
        let limits = LaunchLimits {
            threads: 1024,
            block: (1024, 1024, 64),
            grid: (i32::MAX as u32, 65535, 65535),
            dynamic_shared: 49152,
        };
        let ok = LaunchConfig { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
        assert!(limits.check("k", &ok).is_ok());
        assert!(limits.check("k", &LaunchConfig { block: (1024, 1, 1), shared_mem_bytes: 49152, ..ok }).is_ok());
        assert!(limits.check("k", &LaunchConfig { grid: (i32::MAX as u32, 65535, 65535), ..ok }).is_ok());
        let refused = |cfg: LaunchConfig, what: &str| {
            let e = limits.check("k", &cfg).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(ref m) if m.starts_with("k: ") && m.contains(what)), "{e}");
        };
        refused(LaunchConfig { block: (2048, 1, 1), ..ok }, "exceeds the device's maximum block dimensions");
        refused(LaunchConfig { block: (1, 1, 128), ..ok }, "exceeds the device's maximum block dimensions");
        refused(LaunchConfig { block: (32, 32, 2), ..ok }, "2048 threads per block exceeds the kernel's limit of 1024");
        refused(LaunchConfig { block: (1024, 1024, 64), ..ok }, "threads per block exceeds");
        refused(LaunchConfig { grid: (1, 65536, 1), ..ok }, "exceeds the device's maximum grid dimensions");
        refused(LaunchConfig { grid: (u32::MAX, 1, 1), ..ok }, "exceeds the device's maximum grid dimensions");
        refused(LaunchConfig { shared_mem_bytes: 1 << 20, ..ok }, "1048576 bytes of dynamic shared memory exceeds");
        let few = LaunchLimits { threads: 256, ..limits };
        assert!(few.check("k", &LaunchConfig { block: (512, 1, 1), ..ok }).is_err(), "the kernel's own limit");
    }

    #[test]
    fn launch_dimensions_must_be_non_zero() {
        let ok = LaunchConfig::for_elements(1000, 256);
        assert_eq!(ok.grid, (4, 1, 1));
        assert!(ok.validate().is_ok());
        let bad = LaunchConfig { grid: (1, 0, 1), ..ok };
        assert!(matches!(bad.validate(), Err(Error::InvalidArgument(_))));
        assert_eq!(LaunchConfig::for_elements(0, 256).grid, (1, 1, 1));
    }
}
