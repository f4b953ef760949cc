//! User module and kernel exports.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use ::fc_graph::launch::LaunchOptions;
use ::fc_graph::module::{Kernel, LaunchConfig, Module};

use super::context::ctx;
use super::error::{Error, Result};
use super::handles::{self, handle_kind};
use super::header::{fc_cuda_ctx, fc_kernel, fc_module};
use super::held::CContext;
use super::{handle_or_null, release, status, value};

handle_kind!(Module => fc_module, "fc_module");
handle_kind!(CKernel => fc_kernel, "fc_kernel");

/// What an `fc_kernel *` stands for: the kernel and its PDL opt-in (a
/// setting of the handle, changed by `fc_kernel_set_pdl`).
pub(crate) struct CKernel {
    kernel: Kernel,
    pdl: AtomicBool,
}

fn kernel(k: *const fc_kernel) -> Result<super::handles::Live<CKernel>> {
    handles::get::<CKernel>(k, "kernel")
}

/// Launch flags of `fc_kernel_launch_ex_ctx`.
const FLAG_PDL: c_uint = super::header::FC_LAUNCH_PDL;
const FLAG_PLAIN: c_uint = super::header::FC_LAUNCH_PLAIN;

/// Reads a NUL-terminated string argument.
///
/// # Safety
/// A non-null `p` must point at a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: per the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| Error::invalid(format!("{what} is not UTF-8")))
}

/// `fc_module *fc_module_load_ptx(fc_cuda_ctx *ctx, const char *ptx)`
///
/// # Safety
/// `ptx` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fc_module_load_ptx(c: *mut fc_cuda_ctx, ptx: *const c_char) -> *mut fc_module {
    handle_or_null(|| {
        let c = ctx(c)?;
        // SAFETY: per this function's contract.
        let text = unsafe { c_str(ptx, "ptx") }?;
        handles::insert(Module::from_ptx(&c, text)?)
    })
}

/// `void fc_module_free(fc_module *module)`
#[no_mangle]
pub extern "C" fn fc_module_free(module: *mut fc_module) {
    release(module, |m| handles::remove::<Module>(m, "module").map(drop))
}

/// `fc_kernel *fc_module_get_kernel(const fc_module *module, const char *name)`
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fc_module_get_kernel(module: *const fc_module, name: *const c_char) -> *mut fc_kernel {
    handle_or_null(|| {
        let m = handles::get::<Module>(module, "module")?;
        // SAFETY: per this function's contract.
        let name = unsafe { c_str(name, "name") }?;
        handles::insert(CKernel { kernel: m.kernel(name)?, pdl: AtomicBool::new(false) })
    })
}

/// `void fc_kernel_free(fc_kernel *kernel)`
#[no_mangle]
pub extern "C" fn fc_kernel_free(kernel: *mut fc_kernel) {
    release(kernel, |k| handles::remove::<CKernel>(k, "kernel").map(drop))
}

/// `int fc_kernel_param_count(const fc_kernel *kernel)`
#[no_mangle]
pub extern "C" fn fc_kernel_param_count(kernel: *const fc_kernel) -> c_int {
    value(-1, || Ok(c_int::try_from(self::kernel(kernel)?.kernel.params().len()).unwrap_or(c_int::MAX)))
}

/// `int fc_kernel_set_pdl(fc_kernel *kernel, int enabled)`
#[no_mangle]
pub extern "C" fn fc_kernel_set_pdl(k: *mut fc_kernel, enabled: c_int) -> c_int {
    status(|| {
        kernel(k)?.pdl.store(enabled != 0, Ordering::Relaxed);
        Ok(())
    })
}

/// `int fc_kernel_launch_ctx(...)`: see the header.
///
/// # Safety
/// `args` is NULL or holds `nargs` pointers, each to a value of its
/// parameter's size.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn fc_kernel_launch_ctx(
    c: *mut fc_cuda_ctx,
    k: *const fc_kernel,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem_bytes: c_uint,
    args: *mut *mut c_void,
    nargs: usize,
) -> c_int {
    // SAFETY: forwarded contract; flags 0 = the kernel's own setting.
    unsafe {
        fc_kernel_launch_ex_ctx(
            c,
            k,
            grid_x,
            grid_y,
            grid_z,
            block_x,
            block_y,
            block_z,
            shared_mem_bytes,
            args,
            nargs,
            0,
        )
    }
}

/// `int fc_kernel_launch_ex_ctx(..., unsigned flags)`: see the header.
///
/// # Safety
/// `args` is NULL or holds `nargs` pointers, each to a value of its
/// parameter's size.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn fc_kernel_launch_ex_ctx(
    c: *mut fc_cuda_ctx,
    k: *const fc_kernel,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem_bytes: c_uint,
    args: *mut *mut c_void,
    nargs: usize,
    flags: c_uint,
) -> c_int {
    status(|| {
        handles::get_all!(c: CContext = c, "ctx"; ck: CKernel = k, "kernel");
        let k = &ck.kernel;
        let opts = match flags {
            0 => LaunchOptions { pdl: ck.pdl.load(Ordering::Relaxed) },
            FLAG_PDL => LaunchOptions::PDL,
            FLAG_PLAIN => LaunchOptions::PLAIN,
            other => return Err(Error::invalid(format!("unknown launch flags {other:#x}"))),
        };
        let want = k.params().len();
        if nargs != want {
            return Err(Error::invalid(format!("{}: {nargs} arguments given, the kernel takes {want}", k.name())));
        }
        if want > 0 && args.is_null() {
            return Err(Error::invalid("args is NULL"));
        }
        let slots: &[*mut c_void] = if want == 0 {
            &[]
        } else {
            // SAFETY: `args` holds `nargs` entries per the contract.
            unsafe { std::slice::from_raw_parts(args, nargs) }
        };
        if let Some(i) = slots.iter().position(|p| p.is_null()) {
            return Err(Error::invalid(format!("{}: args[{i}] is NULL", k.name())));
        }
        let cfg = LaunchConfig { grid: (grid_x, grid_y, grid_z), block: (block_x, block_y, block_z), shared_mem_bytes };
        // SAFETY: count and non-null entries checked; sizes per the contract.
        Ok(unsafe { k.launch_raw_with(&c, cfg, args, opts) }?)
    })
}

/// Handles of this module's kinds alive now.
pub(crate) fn live_handles() -> usize {
    <Module as super::handles::Kind>::table().live() + <CKernel as super::handles::Kind>::table().live()
}
