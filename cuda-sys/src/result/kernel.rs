//! Kernels: launches (plain and with attributes) and a function's own
//! attributes and parameter layout. The launches are the hottest calls of
//! the library: `#[inline]`, and a failure is a [`DriverError`] until the
//! caller converts it.

use std::os::raw::{c_int, c_uint, c_void};

use super::{DriverError, Result};
use crate::functions::DriverFns;
use crate::types::*;

/// `cuLaunchKernel`: launches `f` with `grid` blocks of `block` threads
/// and `shared_mem_bytes` of dynamic shared memory on `stream`.
///
/// # Safety
/// `f` is a live function and `stream` a live stream, of one context (the
/// current one, on drivers that need it current); `params` is null for a
/// kernel without parameters, else one pointer per kernel parameter, each
/// to a value of that parameter's size, readable during the call; `extra`
/// is null or a valid `CU_LAUNCH_PARAM_*` list.
#[inline]
#[allow(clippy::too_many_arguments)]
pub unsafe fn launch(
    d: &DriverFns,
    f: CUfunction,
    grid: (c_uint, c_uint, c_uint),
    block: (c_uint, c_uint, c_uint),
    shared_mem_bytes: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> Result<()> {
    // SAFETY: the caller's promise.
    let code = unsafe {
        (d.cuLaunchKernel)(
            f,
            grid.0,
            grid.1,
            grid.2,
            block.0,
            block.1,
            block.2,
            shared_mem_bytes,
            stream,
            params,
            extra,
        )
    };
    DriverError::check("cuLaunchKernel", code)
}

/// `cuLaunchKernelEx(config, f, params, extra)` (CUDA 11.8+; `None`
/// without it).
///
/// # Safety
/// As [`launch`], with `config` naming the stream and its `attrs` pointing
/// at `numAttrs` valid attributes, readable during the call.
#[inline]
pub unsafe fn launch_ex(
    d: &DriverFns,
    config: &CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> Option<Result<()>> {
    let launch_ex = d.cuLaunchKernelEx?;
    // SAFETY: the caller's promise.
    Some(DriverError::check("cuLaunchKernelEx", unsafe { launch_ex(config, f, params, extra) }))
}

/// `cuFuncGetAttribute(attrib, f)`.
///
/// # Safety
/// `f` is a live function.
#[inline]
pub unsafe fn get_attribute(d: &DriverFns, attrib: CUfunction_attribute, f: CUfunction) -> Result<c_int> {
    let mut v: c_int = 0;
    // SAFETY: the caller's promise; valid out-pointer.
    DriverError::check("cuFuncGetAttribute", unsafe { (d.cuFuncGetAttribute)(&mut v, attrib, f) })?;
    Ok(v)
}

/// `cuFuncGetParamInfo(f, index)` (CUDA 12.4+; `None` without it): the
/// (offset, size) in bytes of parameter `index`. An index past the last
/// parameter is `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `f` is a live function.
#[inline]
pub unsafe fn get_param_info(d: &DriverFns, f: CUfunction, index: usize) -> Option<Result<(usize, usize)>> {
    let param_info = d.cuFuncGetParamInfo?;
    let (mut offset, mut size) = (0usize, 0usize);
    // SAFETY: the caller's promise; valid out-pointers.
    let code = unsafe { param_info(f, index, &mut offset, &mut size) };
    Some(DriverError::check("cuFuncGetParamInfo", code).map(|()| (offset, size)))
}
