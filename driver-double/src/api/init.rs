//! `cuInit`, `cuDriverGetVersion` and the error strings.

use cuda_sys::*;

use crate::state::{entry, out};

/// Names and descriptions of the statuses the double returns.
const ERRORS: &[(CUresult, &str, &str)] = &[
    (0, "CUDA_SUCCESS", "no error"),
    (1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"),
    (3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"),
    (4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"),
    (34, "CUDA_ERROR_LOSSY_QUERY", "the query would lose information"),
    (100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"),
    (101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"),
    (200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"),
    (201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"),
    (209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"),
    (218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"),
    (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."),
    (301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"),
    (304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"),
    (400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"),
    (401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"),
    (500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"),
    (600, "CUDA_ERROR_NOT_READY", "device not ready"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"),
    (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"),
    (719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"),
    (801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"),
    (900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"),
    (901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"),
    (902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"),
    (903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"),
    (904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"),
    (905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"),
    (906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"),
    (907, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream"),
    (908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"),
    (910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"),
    (999, "CUDA_ERROR_UNKNOWN", "unknown error"),
];

/// Strings handed out: NUL-terminated copies of the table, made once.
fn c_string(code: CUresult, name: bool) -> Option<*const c_char> {
    static TABLE: std::sync::OnceLock<Vec<(CUresult, std::ffi::CString, std::ffi::CString)>> =
        std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        ERRORS
            .iter()
            .filter_map(|(c, n, d)| Some((*c, std::ffi::CString::new(*n).ok()?, std::ffi::CString::new(*d).ok()?)))
            .collect()
    });
    t.iter().find(|(c, _, _)| *c == code).map(|(_, n, d)| if name { n.as_ptr() } else { d.as_ptr() })
}

/// `cuInit` (2000): flags must be 0; no device is `CUDA_ERROR_NO_DEVICE`.
pub unsafe extern "C" fn cuInit_v2000(flags: c_uint) -> CUresult {
    entry("cuInit", 2000, |s| {
        if flags != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        if s.devices.is_empty() {
            return Err(CUDA_ERROR_NO_DEVICE);
        }
        s.initialized = true;
        Ok(())
    })
}

/// `cuDriverGetVersion` (2020).
pub unsafe extern "C" fn cuDriverGetVersion_v2020(v: *mut c_int) -> CUresult {
    entry("cuDriverGetVersion", 2020, |s| {
        *out(v)? = s.cfg.version;
        Ok(())
    })
}

/// `cuGetErrorName` (6000): unknown codes are `CUDA_ERROR_INVALID_VALUE`
/// with NULL.
pub unsafe extern "C" fn cuGetErrorName_v6000(code: CUresult, p: *mut *const c_char) -> CUresult {
    entry("cuGetErrorName", 6000, |_| {
        let o = out(p)?;
        *o = std::ptr::null();
        *o = c_string(code, true).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        Ok(())
    })
}

/// `cuGetErrorString` (6000).
pub unsafe extern "C" fn cuGetErrorString_v6000(code: CUresult, p: *mut *const c_char) -> CUresult {
    entry("cuGetErrorString", 6000, |_| {
        let o = out(p)?;
        *o = std::ptr::null();
        *o = c_string(code, false).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        Ok(())
    })
}
