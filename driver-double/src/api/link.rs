//! The JIT linker: create, add data or files, complete, destroy.

use cuda_sys::*;

use super::{h, p};
use crate::handle::Kind;
use crate::objects::link::Link;
use crate::objects::module::{encode_cubin, read_image};
use crate::state::{entry, out, slice, State, R};

/// `CUDA_ERROR_FILE_NOT_FOUND`.
const CUDA_ERROR_FILE_NOT_FOUND: CUresult = 301;

impl State {
    /// Adds one input to a link.
    fn link_input(&mut self, link: u64, ty: CUjitInputType, bytes: &[u8], name: &str) -> R {
        let l = self.links.get_mut(link).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
        match ty {
            CU_JIT_INPUT_PTX => {
                let text = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
                let text = std::str::from_utf8(text).map_err(|_| CUDA_ERROR_INVALID_PTX)?;
                l.ptx.push(text.to_string());
            }
            CU_JIT_INPUT_LIBRARY if bytes.starts_with(b"!<arch>\n") || name.contains("cudadevrt") => {
                if name.contains("cudadevrt") {
                    l.device_runtime = true;
                }
            }
            CU_JIT_INPUT_CUBIN | CU_JIT_INPUT_FATBINARY | CU_JIT_INPUT_OBJECT | CU_JIT_INPUT_LIBRARY => {
                let mut with_nul = bytes.to_vec();
                with_nul.push(0);
                // SAFETY: `with_nul` is NUL-terminated and holds the whole input.
                let img = unsafe { read_image(with_nul.as_ptr()) }?;
                l.ptx.extend(img.ptx);
                l.device_runtime |= img.device_runtime;
            }
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        }
        l.inputs += 1;
        Ok(())
    }
}

/// `cuLinkCreate` (6050).
pub unsafe extern "C" fn cuLinkCreate_v6050(
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
    state: *mut CUlinkState,
) -> CUresult {
    entry("cuLinkCreate", 6050, |s| {
        let o = out(state)?;
        slice(options.cast_const(), n as usize)?;
        slice(values.cast_const(), n as usize)?;
        s.current_ctx()?;
        let serial = s.serial();
        *o = p(s.links.insert(serial, Link::default()));
        Ok(())
    })
}

/// `cuLinkAddData` (6050): PTX, or the double's own cubin, or the device
/// runtime library.
pub unsafe extern "C" fn cuLinkAddData_v6050(
    state: CUlinkState,
    ty: CUjitInputType,
    data: *mut c_void,
    size: usize,
    name: *const c_char,
    _n: c_uint,
    _options: *mut CUjit_option,
    _values: *mut *mut c_void,
) -> CUresult {
    entry("cuLinkAddData", 6050, |s| {
        let l = h(state);
        s.links.get(l).map_err(|b| s.bad_handle(b, Kind::Link, l))?;
        if size == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let bytes = slice(data.cast_const().cast::<u8>(), size)?.to_vec();
        let name = if name.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated name (the call's contract).
            unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned()
        };
        s.link_input(l, ty, &bytes, &name)
    })
}

/// `cuLinkAddFile` (6050).
pub unsafe extern "C" fn cuLinkAddFile_v6050(
    state: CUlinkState,
    ty: CUjitInputType,
    path: *const c_char,
    _n: c_uint,
    _options: *mut CUjit_option,
    _values: *mut *mut c_void,
) -> CUresult {
    entry("cuLinkAddFile", 6050, |s| {
        let l = h(state);
        s.links.get(l).map_err(|b| s.bad_handle(b, Kind::Link, l))?;
        if path.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: a NUL-terminated path (the call's contract).
        let path = unsafe { std::ffi::CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let bytes = std::fs::read(&path).map_err(|_| CUDA_ERROR_FILE_NOT_FOUND)?;
        s.link_input(l, ty, &bytes, &path)
    })
}

/// `cuLinkComplete` (5050): the linked image, owned by the link.
pub unsafe extern "C" fn cuLinkComplete_v5050(
    state: CUlinkState,
    cubin: *mut *mut c_void,
    size: *mut usize,
) -> CUresult {
    entry("cuLinkComplete", 5050, |s| {
        let (o, z) = (out(cubin)?, out(size)?);
        let l = h(state);
        let link = s.links.get_mut(l).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
        if link.inputs == 0 || link.ptx.is_empty() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let image = encode_cubin(&link.ptx, link.device_runtime);
        let image = link.cubin.insert(image);
        *o = image.as_mut_ptr().cast();
        *z = image.len();
        Ok(())
    })
}

/// `cuLinkDestroy` (5050).
pub unsafe extern "C" fn cuLinkDestroy_v5050(state: CUlinkState) -> CUresult {
    entry("cuLinkDestroy", 5050, |s| {
        let l = h(state);
        s.links.remove(l).map_err(|b| s.bad_handle(b, Kind::Link, l))?;
        Ok(())
    })
}
