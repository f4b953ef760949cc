//! Modules and functions.

use cuda_sys::*;

use super::{h, p};
use crate::handle::Kind;
use crate::objects::module::read_image;
use crate::state::{entry, out, slice};

/// Writes `msg` into the JIT error log the options name, if any
/// (`CU_JIT_ERROR_LOG_BUFFER` and its size, which becomes the bytes
/// written).
fn write_log(n: c_uint, options: *mut CUjit_option, values: *mut *mut c_void, msg: &str) {
    let (Ok(opts), Ok(vals)) = (slice(options.cast_const(), n as usize), slice(values.cast_const(), n as usize)) else {
        return;
    };
    let buf = opts.iter().position(|&o| o == CU_JIT_ERROR_LOG_BUFFER).map(|i| vals[i].cast::<u8>());
    let size_at = opts.iter().position(|&o| o == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
    let (Some(buf), Some(size_at)) = (buf, size_at) else { return };
    let size = vals[size_at] as usize;
    if buf.is_null() || size == 0 {
        return;
    }
    let n = msg.len().min(size - 1);
    // SAFETY: the option's buffer holds `size` bytes (the JIT options'
    // contract); `n + 1 <= size`.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), buf, n);
        *buf.add(n) = 0;
    }
    // SAFETY: the size option's value slot is the caller's array element,
    // which the driver overwrites with the bytes written.
    unsafe { *values.add(size_at) = (n + 1) as *mut c_void };
}

/// `cuModuleLoadDataEx` (2010): PTX checked against the driver's ISA, the
/// device's architecture and the device runtime functions it can resolve;
/// the JIT error log says why a module was refused.
pub unsafe extern "C" fn cuModuleLoadDataEx_v2010(
    module: *mut CUmodule,
    image: *const c_void,
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
) -> CUresult {
    entry("cuModuleLoadDataEx", 2010, |s| {
        let o = out(module)?;
        let ctx = s.current_ctx()?;
        s.gate_unsafe()?;
        // SAFETY: the image argument's contract (a PTX text or a cubin).
        let img = unsafe { read_image(image.cast()) }?;
        match s.load_module(ctx, img) {
            Ok(m) => {
                *o = p(m);
                Ok(())
            }
            Err((code, msg)) => {
                write_log(n, options, values, &msg);
                Err(code)
            }
        }
    })
}

/// `cuModuleUnload` (2000): the device's queued work runs first.
pub unsafe extern "C" fn cuModuleUnload_v2000(module: CUmodule) -> CUresult {
    entry("cuModuleUnload", 2000, |s| {
        let m = h(module);
        let ctx = s.modules.get(m).map_err(|b| s.bad_handle(b, Kind::Module, m))?.ctx;
        s.gate_unsafe()?;
        let device = s.ctx_device(ctx);
        s.flush_device(device);
        s.unload_module(m);
        Ok(())
    })
}

/// `cuModuleGetFunction` (2000).
pub unsafe extern "C" fn cuModuleGetFunction_v2000(
    func: *mut CUfunction,
    module: CUmodule,
    name: *const c_char,
) -> CUresult {
    entry("cuModuleGetFunction", 2000, |s| {
        let o = out(func)?;
        let m = h(module);
        let md = s.modules.get(m).map_err(|b| s.bad_handle(b, Kind::Module, m))?;
        if name.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: a NUL-terminated name (the call's contract).
        let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
        let f = md.funcs.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).ok_or(CUDA_ERROR_NOT_FOUND)?;
        *o = p(f);
        Ok(())
    })
}

/// `cuFuncGetAttribute` (2020): 1024 threads a block, 48 KiB of dynamic
/// shared memory, 32 registers, the PTX and binary versions; no static
/// shared, constant or local memory.
pub unsafe extern "C" fn cuFuncGetAttribute_v2020(
    v: *mut c_int,
    attr: CUfunction_attribute,
    func: CUfunction,
) -> CUresult {
    entry("cuFuncGetAttribute", 2020, |s| {
        let o = out(v)?;
        let fh = h(func);
        let f = s.funcs.get(fh).map_err(|b| s.bad_handle(b, Kind::Function, fh))?;
        *o = match attr {
            0 => 1024,
            1..=3 => 0,
            4 => 32,
            5 => f.isa,
            6 => s.cfg.cc.0 * 10 + s.cfg.cc.1,
            7 => 0,
            8 => 48 << 10,
            9 => -1,
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        Ok(())
    })
}

/// `cuFuncGetParamInfo` (12040): from the PTX's parameter list.
pub unsafe extern "C" fn cuFuncGetParamInfo_v12040(
    func: CUfunction,
    index: usize,
    offset: *mut usize,
    size: *mut usize,
) -> CUresult {
    entry("cuFuncGetParamInfo", 12040, |s| {
        let (o, z) = (out(offset)?, out(size)?);
        let fh = h(func);
        let f = s.funcs.get(fh).map_err(|b| s.bad_handle(b, Kind::Function, fh))?;
        let p = f.entry.params.get(index).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        *o = p.offset;
        *z = p.size;
        Ok(())
    })
}
