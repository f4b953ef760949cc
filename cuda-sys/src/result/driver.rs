//! Initialisation, the driver's version and its names for error codes.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint};

use super::{DriverError, Result};
use crate::functions::DriverFns;
use crate::types::CUresult;

/// `cuInit(flags)` (`flags` must be 0).
#[inline]
pub fn init(d: &DriverFns, flags: c_uint) -> Result<()> {
    // SAFETY: no pointer arguments.
    DriverError::check("cuInit", unsafe { (d.cuInit)(flags) })
}

/// `cuDriverGetVersion`: the driver's CUDA API version (e.g. 13000).
#[inline]
pub fn get_version(d: &DriverFns) -> Result<c_int> {
    let mut v: c_int = 0;
    // SAFETY: valid out-pointer.
    DriverError::check("cuDriverGetVersion", unsafe { (d.cuDriverGetVersion)(&mut v) })?;
    Ok(v)
}

/// Copies a static string the driver returned, or `None` for null.
fn owned(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the driver returns NUL-terminated static strings.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `cuGetErrorName(code)`: the code's name (e.g. `CUDA_ERROR_OUT_OF_MEMORY`),
/// `None` when the driver returned no string.
pub fn get_error_name(d: &DriverFns, code: CUresult) -> Result<Option<String>> {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: valid out-pointer; the driver returns a static string or an error.
    DriverError::check("cuGetErrorName", unsafe { (d.cuGetErrorName)(code, &mut p) })?;
    Ok(owned(p))
}

/// `cuGetErrorString(code)`: the code's description, `None` when the
/// driver returned no string.
pub fn get_error_string(d: &DriverFns, code: CUresult) -> Result<Option<String>> {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: valid out-pointer; the driver returns a static string or an error.
    DriverError::check("cuGetErrorString", unsafe { (d.cuGetErrorString)(code, &mut p) })?;
    Ok(owned(p))
}

/// The driver's name for `code`, or `CUDA_ERROR_<code>` when it has none.
pub fn error_name_or_code(d: &DriverFns, code: CUresult) -> String {
    get_error_name(d, code).ok().flatten().unwrap_or_else(|| format!("CUDA_ERROR_{code}"))
}

/// The driver's description of `code`, or `unknown error` when it has none.
pub fn error_description_or_unknown(d: &DriverFns, code: CUresult) -> String {
    get_error_string(d, code).ok().flatten().unwrap_or_else(|| "unknown error".to_string())
}
