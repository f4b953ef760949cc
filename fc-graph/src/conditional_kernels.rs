//! The built-in kernels that set a conditional node's condition from device
//! memory (`kernels/conditional.ptx`), loaded into a context the first time
//! one of its recordings adds a conditional node.
//!
//! They call the CUDA device runtime's `cudaGraphSetConditional`. Drivers
//! resolve it when the module loads (the H200's driver 580 does: GPU run 47);
//! where a driver refuses that plain load, the PTX is linked at run time with
//! the device runtime library `libcudadevrt.a` found by [`find_device_runtime`]
//! (no toolkit is needed at build time).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuda_sys::*;

use crate::driver::RawCtx;
use crate::error::{Error, Result};
use crate::module_handle::ModuleHandle;

/// The PTX text (ISA 7.0, sm_50), embedded at build time.
pub const CONDITIONAL_PTX: &str = include_str!("../kernels/conditional.ptx");

/// `FC_CONDITIONAL_SETTERS=link` skips the plain load and links the setter
/// kernels with the device runtime library (read at each context's first
/// load): for drivers whose plain load misbehaves, and to test that path.
pub const SETTERS_ENV: &str = "FC_CONDITIONAL_SETTERS";

/// Whether `value` of [`SETTERS_ENV`] asks for linking.
fn link_asked(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("link"))
}

/// How the setter kernels' module was loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetterSource {
    /// The driver resolved `cudaGraphSetConditional` by itself.
    Driver,
    /// Linked with this device runtime library.
    Linked(PathBuf),
}

/// The loaded setter kernels of one context.
pub(crate) struct CondKernels {
    /// `fc_cond_set(handle, src)`: condition = `*src`.
    pub(crate) set: CUfunction,
    /// `fc_cond_load(handle, counter, n)`: `*counter = *n`, condition =
    /// `*n != 0`.
    pub(crate) load: CUfunction,
    /// `fc_cond_countdown(handle, counter)`: one step down, condition =
    /// `*counter != 0`.
    pub(crate) countdown: CUfunction,
    pub(crate) source: SetterSource,
    // Dropped after the function handles it owns (`None` in unit tests).
    _module: Option<ModuleHandle>,
}

// SAFETY: function handles may be used from any thread; the module is kept
// alive alongside and never mutated after loading.
unsafe impl Send for CondKernels {}
// SAFETY: as above.
unsafe impl Sync for CondKernels {}

impl CondKernels {
    /// Loads the setter kernels into `raw_ctx` (kept alive by the caller
    /// for as long as the result): plainly, else linked with the device
    /// runtime. The error says what was tried.
    pub(crate) fn load(raw_ctx: RawCtx) -> Result<Arc<CondKernels>> {
        let plain = if link_asked(std::env::var(SETTERS_ENV).ok().as_deref()) {
            Err(Error::invalid(format!("{SETTERS_ENV}=link: the plain load was skipped")))
        } else {
            ModuleHandle::load(raw_ctx, CONDITIONAL_PTX)
        };
        let (module, source) = match plain {
            Ok(m) => (m, SetterSource::Driver),
            Err(plain) => {
                let Some(lib) = find_device_runtime() else {
                    return Err(Error::Unsupported {
                        feature: "conditional nodes set from device memory (cudaGraphSetConditional)",
                        needs: format!(
                            "a driver that resolves the device runtime's setter when a module loads (this one \
                             refused: {plain}), or the device runtime library libcudadevrt.a (set \
                             FC_CUDADEVRT to its path; searched: {})",
                            device_runtime_candidates()
                                .iter()
                                .map(|p| p.display().to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    });
                };
                let m = ModuleHandle::load_linked(raw_ctx, CONDITIONAL_PTX, &lib).map_err(|linked| {
                    Error::invalid(format!(
                        "the conditional setters load neither plainly ({plain}) nor linked with {} ({linked})",
                        lib.display()
                    ))
                })?;
                (m, SetterSource::Linked(lib))
            }
        };
        let (set, _) = module.function("fc_cond_set")?;
        let (load, _) = module.function("fc_cond_load")?;
        let (countdown, _) = module.function("fc_cond_countdown")?;
        Ok(Arc::new(CondKernels { set, load, countdown, source, _module: Some(module) }))
    }
}

/// Setter "kernels" with made-up handles, for tests that never launch.
#[cfg(test)]
pub(crate) fn fake_kernels() -> Arc<CondKernels> {
    let f = |n: usize| std::ptr::null_mut::<u8>().wrapping_add(n).cast();
    Arc::new(CondKernels {
        set: f(0x51),
        load: f(0x52),
        countdown: f(0x53),
        source: SetterSource::Driver,
        _module: None,
    })
}

/// Where the device runtime library may be, in the order searched:
/// `$FC_CUDADEVRT` (the file itself), the toolkit under `$CUDA_HOME`,
/// `$CUDA_PATH` and `/usr/local/cuda`, then NVIDIA's Python wheels in the
/// active virtual or conda environment (`nvidia/cu13/lib`,
/// `nvidia/cuda_runtime/lib`).
pub fn device_runtime_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("FC_CUDADEVRT") {
        out.push(PathBuf::from(p));
    }
    let arch = if cfg!(target_arch = "aarch64") { "sbsa-linux" } else { "x86_64-linux" };
    let mut roots: Vec<PathBuf> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    for r in &roots {
        out.push(r.join("lib64/libcudadevrt.a"));
        out.push(r.join("targets").join(arch).join("lib/libcudadevrt.a"));
    }
    for env in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        let Some(prefix) = std::env::var_os(env) else { continue };
        let lib = Path::new(&prefix).join("lib");
        let Ok(dirs) = std::fs::read_dir(&lib) else { continue };
        let mut pys: Vec<PathBuf> = dirs.flatten().map(|e| e.path()).filter(|p| is_python_dir(p)).collect();
        pys.sort();
        for py in pys {
            for wheel in ["nvidia/cu13/lib", "nvidia/cuda_runtime/lib"] {
                out.push(py.join("site-packages").join(wheel).join("libcudadevrt.a"));
            }
        }
    }
    out
}

fn is_python_dir(p: &Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3"))
}

/// The first of [`device_runtime_candidates`] that is a file.
pub fn find_device_runtime() -> Option<PathBuf> {
    device_runtime_candidates().into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx_params::parse_entries;

    #[test]
    fn the_setters_take_a_handle_and_device_pointers() {
        let entries = parse_entries(CONDITIONAL_PTX).expect("parsed");
        let shape: Vec<(String, Vec<usize>)> =
            entries.iter().map(|e| (e.name.clone(), e.params.iter().map(|p| p.size).collect())).collect();
        assert_eq!(
            shape,
            vec![
                ("fc_cond_set".to_string(), vec![8, 8]),
                ("fc_cond_load".to_string(), vec![8, 8, 8]),
                ("fc_cond_countdown".to_string(), vec![8, 8]),
            ]
        );
        assert!(CONDITIONAL_PTX.contains(".extern .func cudaGraphSetConditional"));
    }

    #[test]
    fn only_link_asks_for_linking() {
        assert!(link_asked(Some("link")) && link_asked(Some(" LINK ")));
        assert!(!link_asked(None) && !link_asked(Some("")) && !link_asked(Some("auto")) && !link_asked(Some("1")));
    }

    #[test]
    fn the_device_runtime_is_searched_where_toolkits_and_wheels_put_it() {
        let c = device_runtime_candidates();
        assert!(c.iter().any(|p| p.ends_with("lib64/libcudadevrt.a") && p.starts_with("/usr/local/cuda")));
        assert!(c.iter().all(|p| p.file_name().is_some()));
    }
}
