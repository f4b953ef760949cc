//! Opening the driver library and resolving the entry-point table.

use std::ffi::CString;
use std::ops::Deref;
use std::ptr;

use libloading::Library;

use crate::constants::*;
use crate::functions::proc_address::{cuGetProcAddress_v11030, cuGetProcAddress_v12000};
use crate::functions::DriverFns;
use crate::types::*;

// Defined in a leaf module: the entry-point table reports LoadError too.
pub use crate::error::{LoadError, FC_CUDA_LIBRARY_ENV};

/// Which `cuGetProcAddress` ABI the library offers.
#[derive(Clone, Copy)]
enum ProcAddress {
    V11030(cuGetProcAddress_v11030),
    V12000(cuGetProcAddress_v12000),
}

impl ProcAddress {
    /// Resolves `name` at ABI `version`.
    fn resolve(self, name: &str, version: i32) -> Result<*mut c_void, String> {
        let cname = CString::new(name).map_err(|_| format!("bad symbol name {name:?}"))?;
        let mut p: *mut c_void = ptr::null_mut();
        let mut status: CUdriverProcAddressQueryResult = CU_GET_PROC_ADDRESS_SUCCESS;
        let res = match self {
            // SAFETY: the pointer has the v11030 ABI; arguments are valid for the call.
            ProcAddress::V11030(f) => unsafe { f(cname.as_ptr(), &mut p, version, 0) },
            // SAFETY: the pointer has the v12000 ABI; arguments are valid for the call.
            ProcAddress::V12000(f) => unsafe { f(cname.as_ptr(), &mut p, version, 0, &mut status) },
        };
        if res == CUDA_SUCCESS && !p.is_null() && status == CU_GET_PROC_ADDRESS_SUCCESS {
            return Ok(p);
        }
        let why = match status {
            CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND => "symbol not found".to_string(),
            CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT => "the driver is older than this ABI version".to_string(),
            _ if res == CUDA_ERROR_NOT_FOUND => "symbol not found".to_string(),
            _ if res != CUDA_SUCCESS => format!("cuGetProcAddress returned {res}"),
            _ => "cuGetProcAddress returned a null pointer".to_string(),
        };
        Err(why)
    }
}

/// The loaded driver: the library handle and its resolved entry points.
/// Derefs to [`DriverFns`].
pub struct Driver {
    fns: DriverFns,
    library_path: String,
    driver_version: i32,
    // Kept last so it is dropped after the table that points into it.
    _lib: Library,
}

impl Deref for Driver {
    type Target = DriverFns;
    fn deref(&self) -> &DriverFns {
        &self.fns
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("library_path", &self.library_path)
            .field("driver_version", &self.driver_version)
            .finish()
    }
}

impl Driver {
    /// Opens the library named by `FC_CUDA_LIBRARY`, else `libcuda.so.1`,
    /// else `libcuda.so`, and resolves every entry point.
    pub fn load() -> Result<Driver, LoadError> {
        match std::env::var(FC_CUDA_LIBRARY_ENV) {
            Ok(path) if !path.is_empty() => Self::load_from(&[path.as_str()]),
            _ => Self::load_from(&["libcuda.so.1", "libcuda.so"]),
        }
    }

    /// Opens the first of `candidates` that loads and resolves every entry
    /// point from it.
    pub fn load_from(candidates: &[&str]) -> Result<Driver, LoadError> {
        let mut reasons = Vec::new();
        for path in candidates {
            // SAFETY: loading the driver runs its initialisers; that is the
            // documented way to use libcuda and it has no other preconditions.
            match unsafe { Library::new(path) } {
                Ok(lib) => return Self::from_library(lib, path),
                // libloading's message names the path already.
                Err(e) => reasons.push(e.to_string()),
            }
        }
        Err(LoadError::LibraryNotFound { tried: candidates.join(", "), reason: reasons.join("; ") })
    }

    fn from_library(lib: Library, path: &str) -> Result<Driver, LoadError> {
        // SAFETY: `cuGetProcAddress_v2` is exported with the 12.0 ABI by every
        // driver that has it; the type matches `PFN_cuGetProcAddress_v12000`.
        let v2 = unsafe { lib.get::<cuGetProcAddress_v12000>(b"cuGetProcAddress_v2\0") }
            .ok()
            .map(|s| ProcAddress::V12000(*s));
        let proc_address = match v2 {
            Some(p) => p,
            // SAFETY: the unversioned export has the 11.3 ABI
            // (`PFN_cuGetProcAddress_v11030`).
            None => match unsafe { lib.get::<cuGetProcAddress_v11030>(b"cuGetProcAddress\0") } {
                Ok(s) => ProcAddress::V11030(*s),
                Err(_) => return Err(LoadError::NoProcAddress { library: path.to_string() }),
            },
        };
        let driver_version = Self::driver_version_of(proc_address)?;
        if driver_version < crate::MIN_DRIVER_VERSION {
            return Err(LoadError::DriverTooOld { found: driver_version, min: crate::MIN_DRIVER_VERSION });
        }
        // SAFETY: cuGetProcAddress returns, for (name, version) with a
        // version at or below the driver's (which `resolve_with` never
        // exceeds), a function with the ABI of `PFN_<name>_v<version>`, which
        // is what each table entry declares (checked by tests/audit.rs).
        let fns = unsafe { DriverFns::resolve_with(driver_version, |name, ver| proc_address.resolve(name, ver)) }?;
        Ok(Driver { fns, library_path: path.to_string(), driver_version, _lib: lib })
    }

    /// The driver's version, read before anything else is resolved:
    /// `cuDriverGetVersion` at its only ABI (2020), which every driver
    /// with `cuGetProcAddress` has.
    fn driver_version_of(proc_address: ProcAddress) -> Result<i32, LoadError> {
        const NAME: &str = "cuDriverGetVersion";
        const VERSION: i32 = 2020;
        let missing = |detail: String| LoadError::MissingSymbol { name: NAME, version: VERSION, detail };
        let p = proc_address.resolve(NAME, VERSION).map_err(missing)?;
        // SAFETY: cuGetProcAddress returned `cuDriverGetVersion` at ABI 2020,
        // `PFN_cuDriverGetVersion_v2020` (the table's own entry, audited).
        let get_version = unsafe { std::mem::transmute::<*mut c_void, crate::functions::pfn::cuDriverGetVersion>(p) };
        let mut driver_version = 0;
        // SAFETY: valid out-pointer; cuDriverGetVersion needs no cuInit.
        let res = unsafe { get_version(&mut driver_version) };
        if res != CUDA_SUCCESS {
            return Err(missing(format!("it returned {res}")));
        }
        Ok(driver_version)
    }

    /// The path the library was opened from.
    pub fn library_path(&self) -> &str {
        &self.library_path
    }

    /// The driver's CUDA API version (e.g. 13000 for CUDA 13.0).
    pub fn driver_version(&self) -> i32 {
        self.driver_version
    }

    /// The driver's name for `code` (e.g. `CUDA_ERROR_OUT_OF_MEMORY`), or
    /// `CUDA_ERROR_<code>` when it has none.
    pub fn error_name(&self, code: CUresult) -> String {
        crate::result::driver::error_name_or_code(&self.fns, code)
    }

    /// The driver's description of `code`, or `unknown error` when it has
    /// none.
    pub fn error_string(&self, code: CUresult) -> String {
        crate::result::driver::error_description_or_unknown(&self.fns, code)
    }
}
