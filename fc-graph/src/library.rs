//! Context-less kernels: PTX loaded as a context-independent library
//! (`cuLibraryLoadData`, CUDA 12.0+), whose kernels (`CUkernel`) launch in
//! the context of the stream they are launched on. `cuda.h` documents it
//! for `cuLaunchKernel` and `cuLaunchKernelEx`: "the context to launch the
//! kernel on will either be taken from the specified stream or the current
//! context in case of NULL stream". Our streams are never NULL, so such a
//! launch needs no current-context check (`cuCtxGetCurrent`, 0.036 µs on an
//! H200, about a tenth of a captured launch).
//!
//! The built-ins use this where the driver is CUDA 13.0 or newer (the first
//! driver on which NVIDIA's own libraries rely on it, and the one we test);
//! older drivers, drivers without the library API, or `FC_CONTEXTLESS=0`
//! keep the module path with its context check. User kernels always take
//! the module path.
//!
//! The library's kernels are made resident in the context at load time
//! (`cuKernelGetFunction` with the context current), so no launch, and in
//! particular no launch inside a capture, loads code lazily.

use std::ffi::{c_char, c_uint, c_void, CString};
use std::sync::OnceLock;

use cuda_sys::*;

use crate::driver::{check, driver, shielded, RawCtx};
use crate::error::{Error, Result};

/// The variable that turns context-less built-in launches off (`0`, `off`,
/// `false`, `no`), read once.
pub const CONTEXTLESS_ENV: &str = "FC_CONTEXTLESS";

/// The first driver version (CUDA 13.0) on which built-ins launch context-less.
pub const CONTEXTLESS_MIN_DRIVER_VERSION: i32 = 13000;

/// Whether a value of [`CONTEXTLESS_ENV`] allows context-less launches.
pub fn contextless_env_value_allows(value: Option<&str>) -> bool {
    let Some(v) = value else { return true };
    !matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "off" | "false" | "no")
}

/// Whether this process may launch built-ins context-less: the driver is
/// new enough, has the library API, and the environment allows it.
pub(crate) fn contextless_allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let env = contextless_env_value_allows(std::env::var(CONTEXTLESS_ENV).ok().as_deref());
        env && driver().is_ok_and(|d| {
            d.driver_version() >= CONTEXTLESS_MIN_DRIVER_VERSION
                && d.cuLibraryLoadData.is_some()
                && d.cuLibraryUnload.is_some()
                && d.cuLibraryGetKernel.is_some()
                && d.cuKernelGetFunction.is_some()
        })
    })
}

/// A loaded library; unloaded on drop (from every context).
pub(crate) struct LibraryHandle {
    raw_ctx: RawCtx,
    library: CUlibrary,
}

// SAFETY: library handles may be used from any thread of the process.
unsafe impl Send for LibraryHandle {}
// SAFETY: the handle is immutable after loading.
unsafe impl Sync for LibraryHandle {}

impl LibraryHandle {
    /// Loads `ptx` and returns its kernels `names`, in order, each already
    /// resident in `raw_ctx` (which the caller keeps alive until the handle
    /// is dropped). Shielded: loading is "potentially unsafe" during other
    /// threads' captures.
    pub(crate) fn load(raw_ctx: RawCtx, ptx: &str, names: &[&str]) -> Result<(LibraryHandle, Vec<CUkernel>)> {
        let image = CString::new(ptx).map_err(|_| Error::invalid("PTX text contains a NUL byte"))?;
        let cnames = names
            .iter()
            .map(|n| CString::new(*n).map_err(|_| Error::invalid("kernel name contains a NUL byte")))
            .collect::<Result<Vec<_>>>()?;
        shielded(raw_ctx, |d| {
            let (Some(load), Some(get_kernel), Some(get_function), true) =
                (d.cuLibraryLoadData, d.cuLibraryGetKernel, d.cuKernelGetFunction, d.cuLibraryUnload.is_some())
            else {
                return Err(Error::Unsupported {
                    feature: "context-independent libraries (cuLibraryLoadData)",
                    needs: "a CUDA 12.0+ driver".into(),
                });
            };
            let mut log = vec![0u8; 8192];
            let mut options = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
            let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
            let mut library: CUlibrary = std::ptr::null_mut();
            // SAFETY: `image` is NUL-terminated PTX; the JIT option arrays have
            // two entries each and the log buffer outlives the call; no
            // library options.
            let res = unsafe {
                load(
                    &mut library,
                    image.as_ptr().cast(),
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                    options.len() as c_uint,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                )
            };
            check("cuLibraryLoadData", res).map_err(|e| crate::module::with_jit_log(e, &log))?;
            let handle = LibraryHandle { raw_ctx, library };
            let mut kernels = Vec::with_capacity(cnames.len());
            for name in &cnames {
                let mut kernel: CUkernel = std::ptr::null_mut();
                // SAFETY: live library, NUL-terminated name, valid out-pointer.
                check("cuLibraryGetKernel", unsafe {
                    get_kernel(&mut kernel, library, name.as_ptr() as *const c_char)
                })?;
                let mut f: CUfunction = std::ptr::null_mut();
                // SAFETY: live kernel, valid out-pointer; our context is current.
                check("cuKernelGetFunction", unsafe { get_function(&mut f, kernel) })?;
                kernels.push(kernel);
            }
            // On an early return above, dropping `handle` unloads the library.
            Ok((handle, kernels))
        })
    }
}

impl Drop for LibraryHandle {
    fn drop(&mut self) {
        let library = self.library;
        let _ = shielded(self.raw_ctx, |d| match d.cuLibraryUnload {
            // SAFETY: a library we loaded, unloaded once; no launch uses its
            // kernels any more (the context's stream was synchronised).
            Some(unload) => check("cuLibraryUnload", unsafe { unload(library) }),
            None => Ok(()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fc_contextless_zero_off_false_no_turn_it_off() {
        for v in ["0", "off", "OFF", " false ", "No"] {
            assert!(!contextless_env_value_allows(Some(v)), "{v:?}");
        }
        for v in [None, Some(""), Some("1"), Some("on"), Some("yes")] {
            assert!(contextless_env_value_allows(v), "{v:?}");
        }
    }
}
