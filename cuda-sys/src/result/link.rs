//! The JIT linker: PTX linked with a static device library, then loaded
//! ([`super::module::load_data_ex`]).

use std::ffi::CStr;
use std::os::raw::c_void;

use super::{count_u32, invalid, mut_ptr_or_null, DriverError, Result};
use crate::functions::DriverFns;
use crate::types::*;

/// One value per option, as a count for the driver (slices of different
/// lengths, or too long, are refused).
fn option_count(call: &'static str, options: &[CUjit_option], values: &[*mut c_void]) -> Result<u32> {
    match count_u32(options.len()) {
        Some(n) if options.len() == values.len() => Ok(n),
        _ => Err(invalid(call)),
    }
}

/// `cuLinkCreate(options, values)`: a link with its JIT options (`options`
/// and `values` of different lengths are `CUDA_ERROR_INVALID_VALUE`
/// without a call).
///
/// # Safety
/// Each value is what its option asks for, valid until [`destroy`] (a log
/// buffer is written while the link runs).
pub unsafe fn create(d: &DriverFns, options: &mut [CUjit_option], values: &mut [*mut c_void]) -> Result<CUlinkState> {
    const CALL: &str = "cuLinkCreate";
    let n = option_count(CALL, options, values)?;
    let mut state: CUlinkState = std::ptr::null_mut();
    // SAFETY: the caller's promise; two arrays of `n` entries (or null).
    DriverError::check(CALL, unsafe {
        (d.cuLinkCreate)(n, mut_ptr_or_null(options), mut_ptr_or_null(values), &mut state)
    })?;
    Ok(state)
}

/// `cuLinkAddData(state, type_, data, name, options, values)`: adds an
/// input held in memory (for PTX: the text with its NUL).
///
/// # Safety
/// `state` is a live link; `data` is an input of `type_`; each value is
/// what its option asks for.
pub unsafe fn add_data(
    d: &DriverFns,
    state: CUlinkState,
    type_: CUjitInputType,
    data: &[u8],
    name: &CStr,
    options: &mut [CUjit_option],
    values: &mut [*mut c_void],
) -> Result<()> {
    const CALL: &str = "cuLinkAddData";
    let n = option_count(CALL, options, values)?;
    // SAFETY: the caller's promise; the driver only reads `data`, whose
    // length goes with it; a NUL-terminated name.
    DriverError::check(CALL, unsafe {
        (d.cuLinkAddData)(
            state,
            type_,
            data.as_ptr() as *mut c_void,
            data.len(),
            name.as_ptr(),
            n,
            mut_ptr_or_null(options),
            mut_ptr_or_null(values),
        )
    })
}

/// `cuLinkAddFile(state, type_, path, options, values)`: adds an input
/// read from a file.
///
/// # Safety
/// As [`add_data`].
pub unsafe fn add_file(
    d: &DriverFns,
    state: CUlinkState,
    type_: CUjitInputType,
    path: &CStr,
    options: &mut [CUjit_option],
    values: &mut [*mut c_void],
) -> Result<()> {
    const CALL: &str = "cuLinkAddFile";
    let n = option_count(CALL, options, values)?;
    // SAFETY: the caller's promise; a NUL-terminated path.
    DriverError::check(CALL, unsafe {
        (d.cuLinkAddFile)(state, type_, path.as_ptr(), n, mut_ptr_or_null(options), mut_ptr_or_null(values))
    })
}

/// `cuLinkComplete(state)`: the linked cubin's address and size, owned by
/// the link (valid until [`destroy`]).
///
/// # Safety
/// `state` is a live link.
#[inline]
pub unsafe fn complete(d: &DriverFns, state: CUlinkState) -> Result<(*mut c_void, usize)> {
    let (mut cubin, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    // SAFETY: the caller's promise; valid out-pointers.
    DriverError::check("cuLinkComplete", unsafe { (d.cuLinkComplete)(state, &mut cubin, &mut size) })?;
    Ok((cubin, size))
}

/// `cuLinkDestroy(state)`, which frees its cubin.
///
/// # Safety
/// `state` is a live link, destroyed once; its cubin is not used afterwards.
#[inline]
pub unsafe fn destroy(d: &DriverFns, state: CUlinkState) -> Result<()> {
    // SAFETY: the caller's promise.
    DriverError::check("cuLinkDestroy", unsafe { (d.cuLinkDestroy)(state) })
}
