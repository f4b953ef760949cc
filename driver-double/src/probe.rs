//! The test side: where the loadable doubles are, a fresh copy of one for
//! each driver version a test process needs (each loaded copy has its own
//! state), and [`Probe`], which opens a loaded copy a second time and
//! reads its control functions.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::{Path, PathBuf};

/// Which export table: CUDA 11.x drivers have no `cuGetProcAddress_v2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// `libfc_cuda_double_11.so`: drivers before 12.0.
    Cuda11,
    /// `libfc_cuda_double.so`: drivers 12.0 and later.
    Cuda12,
}

impl Build {
    /// The build for a driver version.
    pub fn for_version(version: i32) -> Build {
        if version >= 12000 {
            Build::Cuda12
        } else {
            Build::Cuda11
        }
    }

    /// Its file name.
    pub fn file_name(self) -> &'static str {
        match self {
            Build::Cuda11 => "libfc_cuda_double_11.so",
            Build::Cuda12 => "libfc_cuda_double.so",
        }
    }
}

/// Where the built library is: `FC_DRIVER_DOUBLE_DIR` if set, else next to
/// the running executable (cargo puts a test's dev-dependencies there) or
/// one folder up (`target/<profile>/`, where `cargo build` puts it).
pub fn library(build: Build) -> Result<PathBuf, String> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("FC_DRIVER_DOUBLE_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            dirs.push(dir.to_path_buf());
            if let Some(up) = dir.parent() {
                dirs.push(up.to_path_buf());
                dirs.push(up.join("deps"));
            }
        }
    }
    dirs.iter().map(|d| d.join(build.file_name())).find(|p| p.is_file()).ok_or_else(|| {
        format!(
            "no {} in {dirs:?}: build it with `cargo build -p fc-cuda-double-{}` (a dev-dependency builds it too)",
            build.file_name(),
            if build == Build::Cuda11 { "11" } else { "12" }
        )
    })
}

/// A copy of the double for `version` in `dir` (its own state once
/// loaded), configured with `devices` devices: the path to load.
pub fn fresh_copy(dir: &Path, name: &str, version: i32, devices: usize) -> Result<(PathBuf, Probe), String> {
    let src = library(Build::for_version(version))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dst = dir.join(format!("lib{name}_{version}_{}.so", std::process::id()));
    std::fs::copy(&src, &dst).map_err(|e| format!("{} -> {}: {e}", src.display(), dst.display()))?;
    let probe = Probe::open(&dst)?;
    if !probe.configure(version, devices) {
        return Err(format!("{}: already configured", dst.display()));
    }
    Ok((dst, probe))
}

/// The control functions of a loaded double, from a second handle on the
/// same library (both handles share its state).
pub struct Probe {
    lib: libloading::Library,
}

type IdentifyFn = unsafe extern "C" fn(*const c_void, *mut *const c_char, *mut c_int) -> c_int;
type CountFn = unsafe extern "C" fn() -> c_int;
type TextFn = unsafe extern "C" fn(c_int, *mut c_char, usize) -> c_int;

impl Probe {
    /// Opens the double at `path`.
    pub fn open(path: &Path) -> Result<Probe, String> {
        // SAFETY: the double's initialisers only register nothing; loading
        // it has no preconditions.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
        Ok(Probe { lib })
    }

    fn sym<T: Copy>(&self, name: &[u8]) -> T {
        // SAFETY: every name asked for is exported by the double with type `T`.
        match unsafe { self.lib.get::<T>(name) } {
            Ok(s) => *s,
            Err(e) => panic!("the driver double lacks {}: {e}", String::from_utf8_lossy(name)),
        }
    }

    fn name_of(p: *const c_char) -> String {
        // SAFETY: the double hands out NUL-terminated names that live as long as it.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Sets the driver version and device count (before any other call).
    pub fn configure(&self, version: i32, devices: usize) -> bool {
        let f: unsafe extern "C" fn(c_int, c_int) -> c_int = self.sym(b"fc_double_configure\0");
        // SAFETY: plain values.
        unsafe { f(version, devices as c_int) == 0 }
    }

    /// Which (symbol, ABI version) the function at `address` is.
    // The double compares the address with its table; it never reads it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn identify(&self, address: *const c_void) -> Option<(String, i32)> {
        let f: IdentifyFn = self.sym(b"fc_double_identify\0");
        let (mut name, mut version) = (std::ptr::null(), 0);
        // SAFETY: valid out-pointers.
        (unsafe { f(address, &mut name, &mut version) } == 1).then(|| (Self::name_of(name), version))
    }

    fn abi(&self, i: c_int) -> Option<(String, i32)> {
        let f: unsafe extern "C" fn(c_int, *mut *const c_char, *mut c_int) -> c_int = self.sym(b"fc_double_abi\0");
        let (mut name, mut version) = (std::ptr::null(), 0);
        // SAFETY: valid out-pointers.
        (unsafe { f(i, &mut name, &mut version) } == 1).then(|| (Self::name_of(name), version))
    }

    /// The (symbol, ABI version) called last, if any.
    pub fn last_called(&self) -> Option<(String, i32)> {
        let f: CountFn = self.sym(b"fc_double_last_called\0");
        // SAFETY: no arguments.
        self.abi(unsafe { f() })
    }

    /// Forgets which ABI ran last.
    pub fn reset_last_called(&self) {
        let f: unsafe extern "C" fn() = self.sym(b"fc_double_reset_last_called\0");
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// How often `symbol` ran at ABI `version`.
    pub fn calls(&self, symbol: &str, version: i32) -> i32 {
        let f: unsafe extern "C" fn(c_int) -> c_int = self.sym(b"fc_double_calls\0");
        (0..)
            .map_while(|i| self.abi(i).map(|a| (i, a)))
            .find(|(_, (n, v))| n == symbol && *v == version)
            // SAFETY: an index the double has.
            .map(|(i, _)| unsafe { f(i) })
            .unwrap_or(0)
    }

    fn texts(&self, count: &[u8], get: &[u8]) -> Vec<(String, c_int)> {
        let n: CountFn = self.sym(count);
        let g: TextFn = self.sym(get);
        let mut buf = vec![0 as c_char; 4096];
        // SAFETY: no arguments; then a buffer of its length.
        (0..unsafe { n() })
            .map(|i| {
                // SAFETY: `buf` holds `buf.len()` bytes.
                let r = unsafe { g(i, buf.as_mut_ptr(), buf.len()) };
                (Self::name_of(buf.as_ptr()), r)
            })
            .collect()
    }

    /// Every `cuGetProcAddress` request so far: (symbol, version asked).
    pub fn requests(&self) -> Vec<(String, i32)> {
        self.texts(b"fc_double_requests\0", b"fc_double_request\0")
    }

    /// Requests above the driver's version.
    pub fn over_requests(&self) -> i32 {
        let f: CountFn = self.sym(b"fc_double_over_requests\0");
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// The misuse reports kept.
    pub fn misuses(&self) -> Vec<String> {
        self.texts(b"fc_double_misuses\0", b"fc_double_misuse\0").into_iter().map(|(t, _)| t).collect()
    }

    /// Takes the misuse reports back (a test that provoked them).
    pub fn take_misuses(&self) -> Vec<String> {
        let all = self.misuses();
        let f: CountFn = self.sym(b"fc_double_take_misuses\0");
        // SAFETY: no arguments.
        unsafe { f() };
        all
    }

    /// Live objects of a kind (`contexts`, `streams`, `events`, `modules`,
    /// `graphs`, `execs`, `allocations`, `links`, `primary_retains`).
    pub fn live(&self, kind: &str) -> i64 {
        let f: unsafe extern "C" fn(*const c_char) -> i64 = self.sym(b"fc_double_live\0");
        let k = CString::new(kind).unwrap_or_default();
        // SAFETY: NUL-terminated.
        unsafe { f(k.as_ptr()) }
    }

    /// How often kernel `name` ran.
    pub fn kernel_runs(&self, name: &str) -> i64 {
        let f: unsafe extern "C" fn(*const c_char) -> i64 = self.sym(b"fc_double_kernel_runs\0");
        let k = CString::new(name).unwrap_or_default();
        // SAFETY: NUL-terminated.
        unsafe { f(k.as_ptr()) }
    }

    /// Replaces the injected faults.
    pub fn set_faults(&self, spec: &str) -> bool {
        let f: unsafe extern "C" fn(*const c_char) -> c_int = self.sym(b"fc_double_set_faults\0");
        let k = CString::new(spec).unwrap_or_default();
        // SAFETY: NUL-terminated.
        unsafe { f(k.as_ptr()) == 0 }
    }

    /// A node as the double holds it: `[type, function, gridDimX,
    /// blockDimX, sharedMemBytes, first 8 parameter bytes, dependencies,
    /// context]`.
    // The node is a handle the double looks up; it never reads through it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn node(&self, node: *mut c_void) -> Option<[u64; 8]> {
        let f: unsafe extern "C" fn(*mut c_void, *mut u64) -> c_int = self.sym(b"fc_double_node\0");
        let mut out = [0u64; 8];
        // SAFETY: eight values.
        (unsafe { f(node, out.as_mut_ptr()) } == 1).then_some(out)
    }

    /// Asks the double's `cuGetProcAddress` (11.3 ABI) directly.
    pub fn raw_request(&self, symbol: &CStr, version: i32) -> (u32, *mut c_void) {
        type ProcFn = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> c_uint;
        let f: ProcFn = self.sym(b"cuGetProcAddress\0");
        let mut p = std::ptr::null_mut();
        // SAFETY: NUL-terminated name, valid out-pointer.
        let res = unsafe { f(symbol.as_ptr(), &mut p, version, 0) };
        (res, p)
    }

    /// Asks the double's `cuGetProcAddress_v2` (12.0 ABI) directly; `None`
    /// when it exports none (the CUDA 11 build).
    pub fn raw_request_v2(&self, symbol: &CStr, version: i32) -> Option<(u32, *mut c_void, i32)> {
        type ProcFn = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> c_uint;
        // SAFETY: the double's export has this type when present.
        let f = unsafe { self.lib.get::<ProcFn>(b"cuGetProcAddress_v2\0") }.ok().map(|s| *s)?;
        let (mut p, mut status) = (std::ptr::null_mut(), -1);
        // SAFETY: NUL-terminated name, valid out-pointers.
        let res = unsafe { f(symbol.as_ptr(), &mut p, version, 0, &mut status) };
        Some((res, p, status))
    }
}
