//! Library-level exports: version, last error, device count.

use std::os::raw::{c_char, c_int};

use ::fc_graph::Device;

use super::{last_error, value};

static VERSION_C: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// `const char *fc_version(void)`
#[no_mangle]
pub extern "C" fn fc_version() -> *const c_char {
    VERSION_C.as_ptr().cast()
}

/// `const char *fc_last_error(void)`
#[no_mangle]
pub extern "C" fn fc_last_error() -> *const c_char {
    last_error::message_ptr()
}

/// `int fc_last_error_code(void)`
#[no_mangle]
pub extern "C" fn fc_last_error_code() -> c_int {
    last_error::code()
}

/// `size_t fc_last_error_copy(char *buf, size_t len)`
///
/// # Safety
/// `buf` is NULL or valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn fc_last_error_copy(buf: *mut c_char, len: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { last_error::copy_to(buf, len) }
}

/// `void fc_clear_last_error(void)`
#[no_mangle]
pub extern "C" fn fc_clear_last_error() {
    last_error::clear();
}

/// `int fc_cuda_device_count(void)`
#[no_mangle]
pub extern "C" fn fc_cuda_device_count() -> c_int {
    value(0, || Ok(c_int::try_from(Device::count()?).unwrap_or(c_int::MAX)))
}
