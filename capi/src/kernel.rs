//! User module and kernel exports.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};

use super::context::ctx_handle;
use super::header::{fc_cuda_ctx, fc_kernel, fc_module};
use super::{deref, handle_or_null, release, status, value};
use ::fc_graph::module::{Kernel, LaunchConfig, Module};
use ::fc_graph::{Error, Result};

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
/// `ctx` is NULL or live; `ptx` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fc_module_load_ptx(ctx: *mut fc_cuda_ctx, ptx: *const c_char) -> *mut fc_module {
    handle_or_null(|| {
        // SAFETY: per this function's contract.
        let (h, text) = unsafe { (ctx_handle(ctx)?, c_str(ptx, "ptx")?) };
        let m = Module::from_ptx(&h.ctx, text)?;
        Ok(Box::into_raw(Box::new(m)).cast::<fc_module>())
    })
}

/// `void fc_module_free(fc_module *module)`
///
/// # Safety
/// `module` is NULL or a live module, freed once.
#[no_mangle]
pub unsafe extern "C" fn fc_module_free(module: *mut fc_module) {
    if module.is_null() {
        return;
    }
    // SAFETY: a live module from Box::into_raw, released once here.
    release(|| drop(unsafe { Box::from_raw(module.cast::<Module>()) }))
}

/// `fc_kernel *fc_module_get_kernel(const fc_module *module, const char *name)`
///
/// # Safety
/// `module` is NULL or live; `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fc_module_get_kernel(module: *const fc_module, name: *const c_char) -> *mut fc_kernel {
    handle_or_null(|| {
        // SAFETY: per this function's contract.
        let (m, name) = unsafe { (deref(module.cast::<Module>(), "module")?, c_str(name, "name")?) };
        Ok(Box::into_raw(Box::new(m.kernel(name)?)).cast::<fc_kernel>())
    })
}

/// `void fc_kernel_free(fc_kernel *kernel)`
///
/// # Safety
/// `kernel` is NULL or a live kernel, freed once.
#[no_mangle]
pub unsafe extern "C" fn fc_kernel_free(kernel: *mut fc_kernel) {
    if kernel.is_null() {
        return;
    }
    // SAFETY: a live kernel from Box::into_raw, released once here.
    release(|| drop(unsafe { Box::from_raw(kernel.cast::<Kernel>()) }))
}

/// `int fc_kernel_param_count(const fc_kernel *kernel)`
///
/// # Safety
/// `kernel` is NULL or a live kernel.
#[no_mangle]
pub unsafe extern "C" fn fc_kernel_param_count(kernel: *const fc_kernel) -> c_int {
    // SAFETY: per this function's contract.
    value(-1, || Ok(unsafe { deref(kernel.cast::<Kernel>(), "kernel") }?.params().len() as c_int))
}

/// `int fc_kernel_launch_ctx(...)`: see the header.
///
/// # Safety
/// `ctx`, `kernel` are NULL or live; `args` is NULL or holds `nargs`
/// pointers, each to a value of its parameter's size.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn fc_kernel_launch_ctx(
    ctx: *mut fc_cuda_ctx,
    kernel: *const fc_kernel,
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
    status(|| {
        // SAFETY: per this function's contract.
        let (h, k) = unsafe { (ctx_handle(ctx)?, deref(kernel.cast::<Kernel>(), "kernel")?) };
        let want = k.params().len();
        if nargs != want {
            return Err(Error::invalid(format!("{}: {nargs} arguments given, the kernel takes {want}", k.name())));
        }
        if want > 0 && args.is_null() {
            return Err(Error::invalid("args is NULL"));
        }
        // SAFETY: `args` holds `nargs` entries per the contract.
        let slots = unsafe { std::slice::from_raw_parts(args, nargs) };
        if let Some(i) = slots.iter().position(|p| p.is_null()) {
            return Err(Error::invalid(format!("{}: args[{i}] is NULL", k.name())));
        }
        let cfg = LaunchConfig { grid: (grid_x, grid_y, grid_z), block: (block_x, block_y, block_z), shared_mem_bytes };
        // SAFETY: count and non-null entries checked; sizes per the contract.
        unsafe { k.launch_raw_on(&h.ctx, cfg, args) }
    })
}
