//! Kernel launches: `cuLaunchKernel` and `cuLaunchKernelEx` (programmatic
//! dependent launch among its attributes, from compute capability 9.0).

use cuda_sys::*;

use super::{h, LaunchArgs};
use crate::objects::work::Work;
use crate::state::{entry, input, slice, State, R};

/// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE` and `_PRIORITY`.
const ATTR_COOPERATIVE: u32 = 2;
const ATTR_PRIORITY: u32 = 8;

/// The first driver whose launches take the context from the function and
/// the stream, whatever is current on the calling thread (measured on CUDA
/// 13 drivers; before, a launch runs in the current context).
const UNBOUND_LAUNCHES: i32 = 13000;

impl State {
    /// The stream of a launch: from CUDA 13 on, a live stream of any
    /// context (NULL: the function's context's legacy stream) whatever is
    /// current; before, as every other stream argument.
    fn launch_stream(&self, stream: CUstream, func: CUfunction) -> R<u64> {
        if self.cfg.version < UNBOUND_LAUNCHES {
            return self.stream(stream);
        }
        let v = h(stream);
        if v <= 2 {
            if crate::thread::current() != 0 {
                return self.stream(stream);
            }
            let f = self.funcs.get(h(func)).map_err(|b| self.bad_handle(b, crate::handle::Kind::Function, h(func)))?;
            return Ok(self.ctxs.get(f.ctx).map(|c| c.legacy).unwrap_or(0));
        }
        self.streams.get(v).map_err(|b| self.bad_handle(b, crate::handle::Kind::Stream, v))?;
        Ok(v)
    }

    fn launch(&mut self, a: &LaunchArgs, stream: CUstream, programmatic: bool) -> R {
        let v = self.launch_stream(stream, a.func)?;
        let l = self.launch_of(a)?;
        let sctx = self.owner(self.streams.get(v).map(|s| s.ctx).unwrap_or(0));
        if sctx != l.ctx {
            let name = self.funcs.get(h(a.func)).map(|f| f.entry.name.clone()).unwrap_or_default();
            return Err(self.misuse(
                CUDA_ERROR_INVALID_HANDLE,
                format!("kernel {name} of context {:#x} launched on stream {v:#x} of context {sctx:#x}", l.ctx),
            ));
        }
        self.submit(v, Work::Kernel(l), programmatic)?;
        Ok(())
    }
}

/// `cuLaunchKernel` (4000).
pub unsafe extern "C" fn cuLaunchKernel_v4000(
    f: CUfunction,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    entry("cuLaunchKernel", 4000, |s| {
        let a = LaunchArgs {
            func: f,
            grid: [gx, gy, gz],
            block: [bx, by, bz],
            shared,
            params,
            extra,
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        };
        s.launch(&a, stream, false)
    })
}

/// `cuLaunchKernelEx` (11060): the attributes the double knows are
/// programmatic stream serialisation (sm_90+), cooperative launch and
/// priority; others are refused as not supported.
pub unsafe extern "C" fn cuLaunchKernelEx_v11060(
    config: *const CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    entry("cuLaunchKernelEx", 11060, |s| {
        let c = input(config)?;
        let attrs = slice(c.attrs.cast_const(), c.numAttrs as usize)?;
        let mut programmatic = false;
        for at in attrs {
            match at.id {
                CU_LAUNCH_ATTRIBUTE_IGNORE => {}
                CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION => {
                    // SAFETY: the attribute's id says which union member is set.
                    let allowed = unsafe { at.value.programmaticStreamSerializationAllowed };
                    if allowed != 0 {
                        if s.cfg.cc.0 < 9 {
                            return Err(CUDA_ERROR_NOT_SUPPORTED);
                        }
                        programmatic = true;
                    }
                }
                ATTR_COOPERATIVE | ATTR_PRIORITY => {}
                other => {
                    return Err(s.misuse(CUDA_ERROR_NOT_SUPPORTED, format!("launch attribute {other} is not simulated")))
                }
            }
        }
        let a = LaunchArgs {
            func: f,
            grid: [c.gridDimX, c.gridDimY, c.gridDimZ],
            block: [c.blockDimX, c.blockDimY, c.blockDimZ],
            shared: c.sharedMemBytes,
            params,
            extra,
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        };
        s.launch(&a, c.hStream, programmatic)
    })
}
