//! A PTX module loaded into a context: JIT compilation (with the JIT's
//! error log on failure), kernel lookup cross-checked against the driver's
//! own parameter list, unloading.

use std::ffi::CString;
use std::os::raw::c_void;

use cuda_sys::result::{kernel, link, module};
use cuda_sys::*;

use crate::driver::{bound, RawCtx};
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
            // SAFETY: `image` is NUL-terminated PTX; one value per option, and
            // the log buffer outlives the call.
            let loaded = unsafe { module::load_data_ex(d, image.as_ptr().cast(), &mut options, &mut values) };
            loaded.map_err(|e| with_jit_log(e.into(), &log))
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
            // SAFETY: one value per option; the log buffer outlives the link
            // state (destroyed below, before `log` is dropped).
            let state = unsafe { link::create(d, &mut options, &mut values) }?;
            let jit_failure = |e: DriverError| with_jit_log(e.into(), &log);
            let linked = (|| {
                // SAFETY: a live link state; NUL-terminated PTX (with its
                // NUL), a NUL-terminated name.
                unsafe {
                    link::add_data(
                        d,
                        state,
                        CU_JIT_INPUT_PTX,
                        image.as_bytes_with_nul(),
                        c"fc-graph.ptx",
                        &mut [],
                        &mut [],
                    )
                }
                .map_err(jit_failure)?;
                // SAFETY: a live link state; a NUL-terminated path.
                unsafe { link::add_file(d, state, CU_JIT_INPUT_LIBRARY, &path, &mut [], &mut []) }
                    .map_err(jit_failure)?;
                // SAFETY: a live link state. The image belongs to the state
                // and is read before it is destroyed.
                let (cubin, _size) = unsafe { link::complete(d, state) }.map_err(jit_failure)?;
                // SAFETY: the linked image, alive until the state is destroyed.
                Ok(unsafe { module::load_data_ex(d, cubin, &mut [], &mut []) }?)
            })();
            // SAFETY: the state created above, destroyed once.
            let _ = unsafe { link::destroy(d, state) };
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
            // SAFETY: a live module.
            Ok(unsafe { module::get_function(d, module, &cname) }?)
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
            for (i, p) in entry.params.iter().enumerate() {
                // SAFETY: live function; `i` is below the parameter count the
                // PTX declares. A driver without the entry: nothing to check.
                let Some(info) = (unsafe { kernel::get_param_info(d, f, i) }) else { return Ok(()) };
                let size = match info {
                    Ok((_offset, size)) => size,
                    Err(e) if e.code == CUDA_ERROR_INVALID_VALUE => {
                        return Err(Error::invalid(format!(
                            "{}: the driver knows {i} parameters, the PTX text declares {}",
                            entry.name,
                            entry.params.len()
                        )));
                    }
                    Err(e) => return Err(e.into()),
                };
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
            Ok(unsafe { module::unload(d, module) }?)
        });
    }
}
