//! The driver's entry points, one `extern "C"` function per ABI the double
//! implements (named `<symbol>_v<abi>`), grouped by area. Each runs
//! through [`crate::state::entry`]; what an entry point checks and does is
//! documented where it differs from NVIDIA's reference.
//!
//! # Safety
//! Every entry point is an `unsafe extern "C" fn` whose contract is the
//! CUDA driver API's for that function (valid pointers, NUL-terminated
//! strings, arrays of the lengths given); the double checks what a driver
//! checks and reports the rest as misuse.

#![allow(non_snake_case, clippy::missing_safety_doc)]

pub mod capture;
pub mod context;
pub mod device;
pub mod exec;
pub mod graph;
pub mod green;
pub mod init;
pub mod launch;
pub mod link;
pub mod memory;
pub mod module;
pub mod stream;

use cuda_sys::*;

use crate::objects::graph::EdgeData;
use crate::objects::work::Launch;
use crate::state::{slice, State, R};

/// A handle's value.
pub fn h<T>(p: *mut T) -> u64 {
    p as usize as u64
}

/// A handle value as the pointer type the API hands out.
pub fn p<T>(v: u64) -> *mut T {
    v as usize as *mut T
}

/// The edge annotations of a call (`None`: full edges).
pub fn edge_data(data: *const CUgraphEdgeData, n: usize) -> R<Option<Vec<EdgeData>>> {
    if data.is_null() {
        return Ok(None);
    }
    let d = slice(data, n)?;
    if d.iter().any(|e| e.reserved != [0; 5]) {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    Ok(Some(d.iter().map(|e| EdgeData { from_port: e.from_port, to_port: e.to_port, ty: e.type_ }).collect()))
}

/// What a kernel launch (a call or a kernel node) gives.
pub struct LaunchArgs {
    /// The function.
    pub func: CUfunction,
    /// Grid.
    pub grid: [u32; 3],
    /// Block.
    pub block: [u32; 3],
    /// Dynamic shared memory.
    pub shared: u32,
    /// `kernelParams`.
    pub params: *mut *mut c_void,
    /// `extra`.
    pub extra: *mut *mut c_void,
    /// A node's `kern` (v2 parameters): the double hands out none.
    pub kern: CUkernel,
    /// A node's `ctx` (v2 parameters; NULL: the function's).
    pub ctx: CUcontext,
}

impl From<&CUDA_KERNEL_NODE_PARAMS_v1> for LaunchArgs {
    fn from(p: &CUDA_KERNEL_NODE_PARAMS_v1) -> LaunchArgs {
        LaunchArgs {
            func: p.func,
            grid: [p.gridDimX, p.gridDimY, p.gridDimZ],
            block: [p.blockDimX, p.blockDimY, p.blockDimZ],
            shared: p.sharedMemBytes,
            params: p.kernelParams,
            extra: p.extra,
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        }
    }
}

impl From<&CUDA_KERNEL_NODE_PARAMS_v3> for LaunchArgs {
    fn from(p: &CUDA_KERNEL_NODE_PARAMS_v3) -> LaunchArgs {
        LaunchArgs {
            func: p.func,
            grid: [p.gridDimX, p.gridDimY, p.gridDimZ],
            block: [p.blockDimX, p.blockDimY, p.blockDimZ],
            shared: p.sharedMemBytes,
            params: p.kernelParams,
            extra: p.extra,
            kern: p.kern,
            ctx: p.ctx,
        }
    }
}

impl From<&CUDA_KERNEL_NODE_PARAMS_v2> for LaunchArgs {
    fn from(p: &CUDA_KERNEL_NODE_PARAMS_v2) -> LaunchArgs {
        LaunchArgs {
            func: p.func,
            grid: [p.gridDimX, p.gridDimY, p.gridDimZ],
            block: [p.blockDimX, p.blockDimY, p.blockDimZ],
            shared: p.sharedMemBytes,
            params: p.kernelParams,
            extra: p.extra,
            kern: p.kern,
            ctx: p.ctx,
        }
    }
}

/// `CU_LAUNCH_PARAM_BUFFER_POINTER`, `_SIZE` and `_END` as `extra` holds them.
const PARAM_BUFFER_POINTER: usize = 1;
const PARAM_BUFFER_SIZE: usize = 2;
const PARAM_END: usize = 0;

impl State {
    /// Checks a launch and copies its parameters, as the driver does when
    /// a kernel is launched or a kernel node is added or set.
    pub fn launch_of(&self, a: &LaunchArgs) -> R<Launch> {
        if !a.kern.is_null() {
            return Err(
                self.misuse(CUDA_ERROR_INVALID_VALUE, "a CUkernel (the double hands out none: no cuLibrary calls)")
            );
        }
        let fh = h(a.func);
        let f = self.funcs.get(fh).map_err(|b| self.bad_handle(b, crate::handle::Kind::Function, fh))?;
        if !a.ctx.is_null() {
            let c = h(a.ctx);
            self.ctxs.get(c).map_err(|b| self.bad_handle(b, crate::handle::Kind::Context, c))?;
            if self.owner(c) != f.ctx {
                return Err(self.misuse(
                    CUDA_ERROR_INVALID_VALUE,
                    format!("kernel {} belongs to context {:#x}, the node names {c:#x}", f.entry.name, f.ctx),
                ));
            }
        }
        let [gx, gy, gz] = a.grid;
        let [bx, by, bz] = a.block;
        let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
        if gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        if gx > 0x7fff_ffff || gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 || bz > 64 || threads > 1024 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        if a.shared > 48 << 10 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let layout = &f.entry.params;
        let mut params = vec![0u8; f.entry.param_bytes()];
        match (a.params.is_null(), a.extra.is_null()) {
            (false, false) => return Err(CUDA_ERROR_INVALID_VALUE),
            (true, true) => {
                if !layout.is_empty() {
                    return Err(self.misuse(
                        CUDA_ERROR_INVALID_VALUE,
                        format!(
                            "kernel {} takes {} parameters; neither kernelParams nor extra given",
                            f.entry.name,
                            layout.len()
                        ),
                    ));
                }
            }
            (false, true) => {
                let ptrs = slice(a.params.cast_const(), layout.len())?;
                for (i, (p, at)) in ptrs.iter().zip(layout).enumerate() {
                    if p.is_null() {
                        return Err(self.misuse(
                            CUDA_ERROR_INVALID_VALUE,
                            format!("kernel {}: kernelParams[{i}] is NULL", f.entry.name),
                        ));
                    }
                    let src = slice(p.cast_const().cast::<u8>(), at.size)?;
                    params[at.offset..at.offset + at.size].copy_from_slice(src);
                }
            }
            (true, false) => {
                let (mut buf, mut size): (*const u8, usize) = (std::ptr::null(), 0);
                let mut i = 0;
                loop {
                    let pair = slice(a.extra.cast_const(), i + 2)?;
                    match pair[i] as usize {
                        PARAM_END => break,
                        PARAM_BUFFER_POINTER => buf = pair[i + 1].cast_const().cast(),
                        PARAM_BUFFER_SIZE => size = *crate::state::input(pair[i + 1].cast_const().cast::<usize>())?,
                        _ => return Err(CUDA_ERROR_INVALID_VALUE),
                    }
                    i += 2;
                    if i > 16 {
                        return Err(CUDA_ERROR_INVALID_VALUE);
                    }
                }
                if size < params.len() || buf.is_null() {
                    return Err(CUDA_ERROR_INVALID_VALUE);
                }
                let n = params.len();
                params.copy_from_slice(slice(buf, n)?);
            }
        }
        Ok(Launch {
            func: fh,
            grid: a.grid,
            block: a.block,
            shared: a.shared,
            params,
            device: self.ctx_device(f.ctx),
            ctx: f.ctx,
        })
    }
}
