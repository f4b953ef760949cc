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

/// `int fc_live_objects(size_t *handles, size_t *contexts)`
///
/// # Safety
/// Each pointer is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn fc_live_objects(handles: *mut usize, contexts: *mut usize) -> c_int {
    use super::handles::Kind;
    let live = super::context::live_handles()
        + <::fc_graph::DeviceBuffer as Kind>::table().live()
        + super::graph::live_handles()
        + super::kernel::live_handles()
        + super::cache::live_handles()
        + super::buckets::live_handles();
    // SAFETY: NULL or valid for one write, per the contract.
    if let Some(out) = unsafe { handles.as_mut() } {
        *out = live;
    }
    // SAFETY: as above.
    if let Some(out) = unsafe { contexts.as_mut() } {
        *out = ::fc_graph::Context::live_count();
    }
    0
}

/// `int fc_cuda_device_count(void)`
#[no_mangle]
pub extern "C" fn fc_cuda_device_count() -> c_int {
    value(0, || Ok(c_int::try_from(Device::count()?).unwrap_or(c_int::MAX)))
}
