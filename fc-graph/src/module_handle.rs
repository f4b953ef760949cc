//! A PTX module loaded into a context: JIT compilation (with the JIT's
//! error log on failure), kernel lookup cross-checked against the driver's
//! own parameter list, unloading.

use std::ffi::CString;
use std::os::raw::{c_char, c_uint, c_void};

use cuda_sys::*;

use crate::driver::{bound, check, RawCtx};
use crate::error::{Error, Result};
use crate::ptx_params::{find_entry, parse_entries, PtxEntry};

/// A loaded module; unloaded on drop. It does not keep its context alive:
/// its owner does ([`crate::Module`] holds the context beside it, the
/// context destroys its own built-in module before releasing itself).
pub(crate) struct ModuleHandle {
    raw_ctx: RawCtx,
    module: CUmodule,
    pub(crate) entries: Vec<PtxEntry>,
}

// SAFETY: module handles may be used from any thread of the process.
unsafe impl Send for ModuleHandle {}
// SAFETY: the handle is immutable after loading.
unsafe impl Sync for ModuleHandle {}

impl ModuleHandle {
    /// JIT-compiles `ptx` in the context `raw_ctx`, which the caller keeps
    /// alive until the handle is dropped (shielded: module loads are
    /// "potentially unsafe" during other threads' captures).
    pub(crate) fn load(raw_ctx: RawCtx, ptx: &str) -> Result<ModuleHandle> {
        let entries = parse_entries(ptx).map_err(|e| Error::invalid(format!("PTX: {e}")))?;
        let image = CString::new(ptx).map_err(|_| Error::invalid("PTX text contains a NUL byte"))?;
        let module = crate::driver::shielded(raw_ctx, |d| {
            let mut log = vec![0u8; 8192];
            let mut options = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
            let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
            let mut m: CUmodule = std::ptr::null_mut();
            // SAFETY: `image` is NUL-terminated PTX; the option arrays have two
            // entries each and the log buffer outlives the call.
            let res = unsafe {
                (d.cuModuleLoadDataEx)(
                    &mut m,
                    image.as_ptr().cast(),
                    options.len() as c_uint,
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                )
            };
            check("cuModuleLoadDataEx", res).map_err(|e| with_jit_log(e, &log))?;
            Ok(m)
        })?;
        Ok(ModuleHandle { raw_ctx, module, entries })
    }

    /// Links `ptx` with the static device library at `library` (an archive
    /// such as the CUDA device runtime, `libcudadevrt.a`) with the driver's
    /// JIT linker and loads the result in the context `raw_ctx` (kept alive
    /// by the caller as for [`ModuleHandle::load`]). The kernels are those
    /// `ptx` declares.
    pub(crate) fn load_linked(raw_ctx: RawCtx, ptx: &str, library: &std::path::Path) -> Result<ModuleHandle> {
        let entries = parse_entries(ptx).map_err(|e| Error::invalid(format!("PTX: {e}")))?;
        let image = CString::new(ptx).map_err(|_| Error::invalid("PTX text contains a NUL byte"))?;
        let path = CString::new(library.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::invalid("library path contains a NUL byte"))?;
        let module = crate::driver::shielded(raw_ctx, |d| {
            let mut log = vec![0u8; 8192];
            let mut options = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
            let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
            let mut state: CUlinkState = std::ptr::null_mut();
            // SAFETY: two options with their values; the log buffer outlives
            // the link state (destroyed below, before `log` is dropped).
            let res = unsafe {
                (d.cuLinkCreate)(options.len() as c_uint, options.as_mut_ptr(), values.as_mut_ptr(), &mut state)
            };
            check("cuLinkCreate", res)?;
            let linked = (|| {
                // SAFETY: a live link state; NUL-terminated PTX of the
                // given size (with its NUL), a NUL-terminated name.
                let res = unsafe {
                    (d.cuLinkAddData)(
                        state,
                        CU_JIT_INPUT_PTX,
                        image.as_ptr() as *mut c_void,
                        image.as_bytes_with_nul().len(),
                        c"fc-graph.ptx".as_ptr(),
                        0,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                check("cuLinkAddData", res).map_err(|e| with_jit_log(e, &log))?;
                // SAFETY: a live link state; a NUL-terminated path.
                let res = unsafe {
                    (d.cuLinkAddFile)(
                        state,
                        CU_JIT_INPUT_LIBRARY,
                        path.as_ptr(),
                        0,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                check("cuLinkAddFile", res).map_err(|e| with_jit_log(e, &log))?;
                let (mut cubin, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
                // SAFETY: a live link state; valid out-pointers. The image
                // belongs to the state and is read before it is destroyed.
                let res = unsafe { (d.cuLinkComplete)(state, &mut cubin, &mut size) };
                check("cuLinkComplete", res).map_err(|e| with_jit_log(e, &log))?;
                let mut m: CUmodule = std::ptr::null_mut();
                // SAFETY: the linked image, alive until the state is destroyed.
                check("cuModuleLoadDataEx", unsafe {
                    (d.cuModuleLoadDataEx)(&mut m, cubin, 0, std::ptr::null_mut(), std::ptr::null_mut())
                })?;
                Ok(m)
            })();
            // SAFETY: the state created above, destroyed once.
            unsafe { (d.cuLinkDestroy)(state) };
            linked
        })?;
        Ok(ModuleHandle { raw_ctx, module, entries })
    }

    /// Looks a kernel up by name.
    pub(crate) fn function(&self, name: &str) -> Result<(CUfunction, PtxEntry)> {
        let entry = find_entry(&self.entries, name)
            .ok_or_else(|| Error::invalid(format!("no kernel named {name:?} in the module")))?
            .clone();
        let cname = CString::new(name).map_err(|_| Error::invalid("kernel name contains a NUL byte"))?;
        let module = self.module;
        let f = bound(self.raw_ctx, |d| {
            let mut f: CUfunction = std::ptr::null_mut();
            // SAFETY: valid out-pointer, live module, NUL-terminated name.
            check("cuModuleGetFunction", unsafe {
                (d.cuModuleGetFunction)(&mut f, module, cname.as_ptr() as *const c_char)
            })?;
            Ok(f)
        })?;
        self.cross_check(f, &entry)?;
        Ok((f, entry))
    }

    /// Compares the parameter list parsed from the PTX with the driver's
    /// own (`cuFuncGetParamInfo`, CUDA 12.4+ drivers; skipped on older
    /// ones), so argument checking never rests on a misparsed signature.
    /// Only parameters the PTX declares are queried: probing past the last
    /// one would be a failing driver call, which sanitizers report (the PTX
    /// parser, tested on its own, is the authority on the count).
    fn cross_check(&self, f: CUfunction, entry: &PtxEntry) -> Result<()> {
        bound(self.raw_ctx, |d| {
            let Some(param_info) = d.cuFuncGetParamInfo else { return Ok(()) };
            let (mut offset, mut size) = (0usize, 0usize);
            for (i, p) in entry.params.iter().enumerate() {
                // SAFETY: live function; valid out-pointers; `i` is below the
                // parameter count the PTX declares.
                let res = unsafe { param_info(f, i, &mut offset, &mut size) };
                if res == CUDA_ERROR_INVALID_VALUE {
                    return Err(Error::invalid(format!(
                        "{}: the driver knows {i} parameters, the PTX text declares {}",
                        entry.name,
                        entry.params.len()
                    )));
                }
                check("cuFuncGetParamInfo", res)?;
                if size != p.size {
                    return Err(Error::invalid(format!(
                        "{}: parameter {i} ({}) is {size} bytes to the driver, {} bytes in the PTX text",
                        entry.name, p.name, p.size
                    )));
                }
            }
            Ok(())
        })
    }
}

/// Appends the JIT's error log to a load failure.
fn with_jit_log(e: Error, log: &[u8]) -> Error {
    let text: String = String::from_utf8_lossy(log).trim_end_matches('\0').trim().to_string();
    match e {
        Error::Cuda { call, code, name, description } if !text.is_empty() => {
            Error::Cuda { call, code, name, description: format!("{description}; JIT log: {text}") }
        }
        other => other,
    }
}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        let module = self.module;
        let _ = crate::driver::shielded(self.raw_ctx, |d| {
            // SAFETY: loaded by us, unloaded once; kernels hold the handle alive.
            check("cuModuleUnload", unsafe { (d.cuModuleUnload)(module) })
        });
    }
}
