//! Modules: loading an image (PTX, cubin) with JIT options, unloading,
//! finding a kernel.

use std::ffi::CStr;
use std::os::raw::c_void;

use super::{count_u32, invalid, mut_ptr_or_null, DriverError, Result};
use crate::functions::DriverFns;
use crate::types::*;

/// `cuModuleLoadDataEx(image, options, values)`: loads `image` into the
/// current context with one value per JIT option (`options` and `values`
/// of different lengths are `CUDA_ERROR_INVALID_VALUE` without a call;
/// empty ones are passed as null).
///
/// # Safety
/// `image` points at a NUL-terminated PTX text, or a cubin or fatbinary,
/// readable during the call; each value is what its option asks for (a
/// log buffer's address valid for its size during the call, sizes as
/// `usize` in the pointer).
pub unsafe fn load_data_ex(
    d: &DriverFns,
    image: *const c_void,
    options: &mut [CUjit_option],
    values: &mut [*mut c_void],
) -> Result<CUmodule> {
    const CALL: &str = "cuModuleLoadDataEx";
    let n = match count_u32(options.len()) {
        Some(n) if options.len() == values.len() => n,
        _ => return Err(invalid(CALL)),
    };
    let mut m: CUmodule = std::ptr::null_mut();
    // SAFETY: the caller's promise; two arrays of `n` entries (or null).
    DriverError::check(CALL, unsafe {
        (d.cuModuleLoadDataEx)(&mut m, image, n, mut_ptr_or_null(options), mut_ptr_or_null(values))
    })?;
    Ok(m)
}

/// `cuModuleUnload(module)`.
///
/// # Safety
/// `module` is a live module, unloaded once; none of its functions is used
/// afterwards (launches already queued may still run).
#[inline]
pub unsafe fn unload(d: &DriverFns, module: CUmodule) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuModuleUnload", unsafe { (d.cuModuleUnload)(module) })
}

/// `cuModuleGetFunction(module, name)`.
///
/// # Safety
/// `module` is a live module.
#[inline]
pub unsafe fn get_function(d: &DriverFns, module: CUmodule, name: &CStr) -> Result<CUfunction> {
    let mut f: CUfunction = std::ptr::null_mut();
    // SAFETY: the caller's promise; valid out-pointer, NUL-terminated name.
    DriverError::check("cuModuleGetFunction", unsafe { (d.cuModuleGetFunction)(&mut f, module, name.as_ptr()) })?;
    Ok(f)
}
