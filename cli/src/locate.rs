//! Where things are: this binary, an installed `libfcgraph.so.0` next to
//! it, the driver library file, the NVIDIA kernel module's version.

use std::ffi::CStr;
use std::os::raw::c_void;
use std::path::{Path, PathBuf};

use cuda_sys::Driver;

/// A file and, when it is a symbolic link, the file it resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The path as found.
    pub path: PathBuf,
    /// The resolved path, when it differs.
    pub resolved: Option<PathBuf>,
}

impl Located {
    fn of(path: PathBuf) -> Located {
        let resolved = std::fs::canonicalize(&path).ok().filter(|r| *r != path);
        Located { path, resolved }
    }

    /// "path" or "path -> resolved".
    pub fn display(&self) -> String {
        match &self.resolved {
            Some(r) => format!("{} -> {}", self.path.display(), r.display()),
            None => self.path.display().to_string(),
        }
    }
}

/// The running binary.
pub fn binary() -> Option<Located> {
    std::env::current_exe().ok().map(Located::of)
}

/// `libfcgraph.so.0` in `../lib` next to the binary's directory (an
/// installed prefix: `bin/fcgraph`, `lib/libfcgraph.so.0`).
pub fn installed_library(binary: &Path) -> Option<Located> {
    let candidate = binary.parent()?.parent()?.join("lib").join("libfcgraph.so.0");
    candidate.exists().then(|| Located::of(candidate))
}

/// The file the driver's entry points live in (`dladdr` of `cuInit`): the
/// library the loader actually opened, e.g. `libcuda.so.1` resolved to
/// `libcuda.so.580.65.06`.
pub fn driver_library(d: &Driver) -> Option<Located> {
    let addr = d.cuInit as *const c_void;
    // SAFETY: an all-zero Dl_info is a valid value (null pointers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    let found = unsafe { libc::dladdr(addr, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader,
    // valid while the library stays loaded (the driver never unloads).
    let name = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    Some(Located::of(PathBuf::from(name)))
}

/// The NVIDIA kernel module's version, if `/proc/driver/nvidia/version` says.
pub fn kernel_module_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    crate::format::kernel_module_version(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_library_in_the_sibling_lib_directory() {
        let root = std::env::temp_dir().join(format!("fcgraph-locate-{}", std::process::id()));
        let (bin, lib) = (root.join("bin"), root.join("lib"));
        std::fs::create_dir_all(&bin).expect("temp dir");
        std::fs::create_dir_all(&lib).expect("temp dir");
        let exe = bin.join("fcgraph");
        assert_eq!(installed_library(&exe), None, "nothing installed yet");
        std::fs::write(lib.join("libfcgraph.so.0.1.0"), b"").expect("write");
        std::os::unix::fs::symlink("libfcgraph.so.0.1.0", lib.join("libfcgraph.so.0")).expect("symlink");
        let found = installed_library(&exe).expect("found");
        assert_eq!(found.path, lib.join("libfcgraph.so.0"));
        let resolved = found.resolved.clone().expect("a symlink resolves");
        assert!(resolved.ends_with("lib/libfcgraph.so.0.1.0"), "{resolved:?}");
        assert!(found.display().contains(" -> "), "{}", found.display());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn this_test_binary_is_located() {
        let me = binary().expect("current_exe");
        assert!(me.path.exists());
    }
}
