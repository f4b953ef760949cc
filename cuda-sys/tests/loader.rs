//! Loader behaviour without a GPU, against stand-in driver libraries built
//! from a small C file with the `cc` crate's compiler.
//!
//! The stand-in exports `cuGetProcAddress` (CUDA 11.3 ABI) and, when built
//! with `WITH_V2`, `cuGetProcAddress_v2` (CUDA 12.0 ABI). Both hand out one
//! generic stub for every symbol except `cuDriverGetVersion`, which reports
//! `DRIVER_VERSION`, and the names in `MISSING_LIST`, which they do not find.
//! Only `cuDriverGetVersion` is ever called. These stand-ins ignore the
//! requested version; the versioning contract is modelled by the driver
//! double of `tests/driver_double.rs`.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;

use cuda_sys::{Driver, LoadError, FC_CUDA_LIBRARY_ENV, MIN_DRIVER_VERSION};

const STUB_SOURCE: &str = r#"
#include <stddef.h>
#include <string.h>

#ifndef DRIVER_VERSION
#define DRIVER_VERSION 12040
#endif
#ifndef MISSING_LIST
#define MISSING_LIST 0
#endif

typedef int CUresult;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_FOUND 500
#define CU_GET_PROC_ADDRESS_SUCCESS 0
#define CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1

static const char *const missing[] = { MISSING_LIST, 0 };

static int is_missing(const char *symbol) {
    size_t i;
    for (i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        if (missing[i] && strcmp(missing[i], symbol) == 0) return 1;
    }
    return 0;
}

static CUresult stub_any(void) { return CUDA_SUCCESS; }

static CUresult stub_driver_get_version(int *version) {
    *version = DRIVER_VERSION;
    return CUDA_SUCCESS;
}

static void *lookup(const char *symbol) {
    if (is_missing(symbol)) return NULL;
    if (strcmp(symbol, "cuDriverGetVersion") == 0) return (void *)stub_driver_get_version;
    return (void *)stub_any;
}

#ifdef NO_PROC_ADDRESS
int fc_stub_has_no_proc_address(void) { return lookup("") != NULL; }
#else
CUresult cuGetProcAddress(const char *symbol, void **pfn, int driverVersion,
                          unsigned long long flags) {
    (void)driverVersion; (void)flags;
    *pfn = lookup(symbol);
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
#ifdef WITH_V2
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int driverVersion,
                             unsigned long long flags, int *symbolStatus) {
    (void)driverVersion; (void)flags;
    *pfn = lookup(symbol);
    if (symbolStatus)
        *symbolStatus = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
#endif
#endif
"#;

/// Where the stand-ins are built.
fn stub_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda-sys-loader-stubs");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds `lib<name>.so` from [`STUB_SOURCE`] with `defines` and returns its
/// path.
fn build_stub(name: &str, defines: &[(&str, &str)]) -> PathBuf {
    let dir = stub_dir();
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, STUB_SOURCE).unwrap();
    let out = dir.join(format!("lib{name}.so"));
    let tmp = dir.join(format!("lib{name}.so.{}.tmp", std::process::id()));
    let mut cmd = compiler();
    cmd.args(["-shared", "-fPIC", "-O0", "-o"]).arg(&tmp).arg(&src);
    for (k, v) in defines {
        cmd.arg(format!("-D{k}={v}"));
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "building the stub {name} failed: {cmd:?}");
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// The host C compiler, as the `cc` crate finds it (honours `CC`).
fn compiler() -> Command {
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .target(&triple)
        .host(&triple)
        .opt_level(0)
        .try_get_compiler()
        .unwrap()
        .to_command()
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The error of a load that must fail.
fn load_err(path: &Path) -> LoadError {
    match Driver::load_from(&[path_str(path)]) {
        Ok(d) => panic!("{} loaded but should not have: {d:?}", path.display()),
        Err(e) => e,
    }
}

/// The driver of a load that must succeed.
fn load_ok(path: &Path) -> Driver {
    match Driver::load_from(&[path_str(path)]) {
        Ok(d) => d,
        Err(e) => panic!("{} should load: {e}", path.display()),
    }
}

#[test]
fn missing_library_is_library_not_found() {
    let dir = stub_dir();
    let a = dir.join("does-not-exist-1.so");
    let b = dir.join("does-not-exist-2.so");
    match Driver::load_from(&[path_str(&a), path_str(&b)]) {
        Err(e @ LoadError::LibraryNotFound { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("no CUDA driver library could be opened"), "{msg}");
            assert!(msg.contains(path_str(&a)) && msg.contains(path_str(&b)), "{msg}");
            // One sentence: each reason once, then what to do.
            assert_eq!(msg.matches("cannot open shared object file").count(), 1, "{msg}");
            assert!(
                msg.ends_with("install the NVIDIA driver, or set FC_CUDA_LIBRARY to the driver library's path"),
                "{msg}"
            );
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

#[test]
fn library_without_proc_address_is_no_proc_address() {
    let lib = build_stub("fcstub_noproc", &[("NO_PROC_ADDRESS", "1")]);
    match load_err(&lib) {
        e @ LoadError::NoProcAddress { .. } => {
            let msg = e.to_string();
            assert!(msg.contains(path_str(&lib)), "{msg}");
            assert!(msg.contains("does not export cuGetProcAddress"), "{msg}");
        }
        other => panic!("expected NoProcAddress, got {other:?}"),
    }
}

/// A required entry point `cuGetProcAddress` does not find.
fn assert_missing_required(lib: &Path) {
    match load_err(lib) {
        LoadError::MissingSymbol { name, version, detail } => {
            assert_eq!(name, "cuGraphInstantiateWithFlags");
            assert_eq!(version, 11040);
            assert_eq!(detail, "symbol not found");
        }
        other => panic!("expected MissingSymbol, got {other:?}"),
    }
    let msg = load_err(lib).to_string();
    assert!(msg.contains("lacks the required entry point cuGraphInstantiateWithFlags (ABI 11040)"), "{msg}");
}

#[test]
fn missing_required_symbol_via_proc_address_v11030() {
    let missing = ("MISSING_LIST", "\"cuGraphInstantiateWithFlags\"");
    let lib = build_stub("fcstub_missing_req_v1", &[missing]);
    assert_missing_required(&lib);
}

#[test]
fn missing_required_symbol_via_proc_address_v12000() {
    let missing = ("MISSING_LIST", "\"cuGraphInstantiateWithFlags\"");
    let lib = build_stub("fcstub_missing_req_v2", &[missing, ("WITH_V2", "1")]);
    assert_missing_required(&lib);
}

/// The names of the optional entry points `driver` lacks.
fn missing_optional_names(driver: &Driver) -> Vec<&'static str> {
    driver.missing_optional().iter().map(|d| d.name).collect()
}

#[test]
fn missing_optional_symbols_load_and_are_reported() {
    let missing = ("MISSING_LIST", "\"cuGraphExecUpdate\",\"cuFuncGetParamInfo\"");
    for (name, v2) in [("fcstub_missing_opt_v1", false), ("fcstub_missing_opt_v2", true)] {
        // A driver new enough for every other optional entry point.
        let mut defines = vec![missing, ("DRIVER_VERSION", "13000")];
        if v2 {
            defines.push(("WITH_V2", "1"));
        }
        let lib = build_stub(name, &defines);
        let driver = load_ok(&lib);
        assert!(driver.cuGraphExecUpdate.is_none());
        assert!(driver.cuFuncGetParamInfo.is_none());
        let mut names = missing_optional_names(&driver);
        names.sort_unstable();
        assert_eq!(names, ["cuFuncGetParamInfo", "cuGraphExecUpdate"]);
        assert!(driver.missing_optional().iter().all(|d| !d.required));
    }
}

#[test]
fn complete_driver_loads_with_its_version() {
    let lib = build_stub("fcstub_complete", &[("DRIVER_VERSION", "13000"), ("WITH_V2", "1")]);
    let driver = load_ok(&lib);
    assert_eq!(driver.driver_version(), 13000);
    assert_eq!(driver.library_path(), path_str(&lib));
    assert!(driver.cuGraphExecUpdate.is_some());
    assert!(driver.cuFuncGetParamInfo.is_some());
    assert!(missing_optional_names(&driver).is_empty());
}

#[test]
fn old_driver_is_driver_too_old() {
    let lib = build_stub("fcstub_old", &[("DRIVER_VERSION", "11030")]);
    match load_err(&lib) {
        e @ LoadError::DriverTooOld { .. } => {
            assert!(matches!(
                e,
                LoadError::DriverTooOld { found: 11030, min } if min == MIN_DRIVER_VERSION
            ));
            let msg = e.to_string();
            assert!(msg.contains("11030") && msg.contains("11040"), "{msg}");
        }
        other => panic!("expected DriverTooOld, got {other:?}"),
    }
}

#[test]
fn oldest_supported_driver_loads() {
    let lib = build_stub("fcstub_oldest", &[("DRIVER_VERSION", "11040")]);
    assert_eq!(load_ok(&lib).driver_version(), 11040);
}

/// The only test that touches the environment (it is process-global).
#[test]
fn load_honours_fc_cuda_library() {
    let lib = build_stub("fcstub_env", &[("DRIVER_VERSION", "12080")]);
    let saved = std::env::var_os(FC_CUDA_LIBRARY_ENV);

    std::env::set_var(FC_CUDA_LIBRARY_ENV, &lib);
    let loaded = Driver::load();

    let absent = stub_dir().join("no-such-libcuda.so");
    std::env::set_var(FC_CUDA_LIBRARY_ENV, &absent);
    let not_found = Driver::load();

    match saved {
        Some(v) => std::env::set_var(FC_CUDA_LIBRARY_ENV, v),
        None => std::env::remove_var(FC_CUDA_LIBRARY_ENV),
    }

    match loaded {
        Ok(d) => {
            assert_eq!(d.library_path(), path_str(&lib));
            assert_eq!(d.driver_version(), 12080);
        }
        Err(e) => panic!("FC_CUDA_LIBRARY={} should load: {e}", lib.display()),
    }
    match not_found {
        Err(LoadError::LibraryNotFound { tried, reason }) => {
            assert_eq!(tried, path_str(&absent));
            assert!(!reason.is_empty());
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}
