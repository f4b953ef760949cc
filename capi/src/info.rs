//! Library-level exports: version, last error, device count.

use std::os::raw::{c_char, c_int};

use super::{last_error_code, last_error_ptr, value};
use ::fc_graph::device::Device;

static VERSION_C: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// `const char *fc_version(void)`
#[no_mangle]
pub extern "C" fn fc_version() -> *const c_char {
    VERSION_C.as_ptr().cast()
}

/// `const char *fc_last_error(void)`
#[no_mangle]
pub extern "C" fn fc_last_error() -> *const c_char {
    value(c"".as_ptr(), || Ok(last_error_ptr()))
}

/// `int fc_last_error_code(void)`
#[no_mangle]
pub extern "C" fn fc_last_error_code() -> c_int {
    value(0, || Ok(last_error_code()))
}

/// `int fc_cuda_device_count(void)`
#[no_mangle]
pub extern "C" fn fc_cuda_device_count() -> c_int {
    value(0, || Ok(Device::count()? as c_int))
}
