//! Behaviour without a usable driver (runs on every machine): this test
//! binary points `FC_CUDA_LIBRARY` at a library that does not exist before
//! anything loads the driver, so every entry point must answer with an
//! error value, never a panic.

use std::ffi::CStr;

use ::fc_graph::{Context, Device, Error};
use fcgraph::*;

fn without_driver() {
    // Set before the first driver() call of this process; every test sets
    // the same value, so the order of the tests does not matter.
    std::env::set_var(cuda_sys::FC_CUDA_LIBRARY_ENV, "/nonexistent/libcuda.so.1");
}

#[test]
fn rust_api_reports_no_driver() {
    without_driver();
    let e = Context::new(0).expect_err("no driver, no context");
    assert!(matches!(e, Error::NoDriver(_)), "got {e:?}");
    assert!(e.to_string().contains("/nonexistent/libcuda.so.1"), "message names the path: {e}");
    assert!(Device::count().is_err());
    assert!(::fc_graph::driver().is_err());
}

#[test]
fn c_api_returns_null_with_reason() {
    without_driver();
    let ctx = fc_cuda_init_device(0);
    assert!(ctx.is_null());
    assert_eq!(fc_last_error_code(), header::FC_ERR_NO_DRIVER as i32);
    // SAFETY: fc_last_error returns a NUL-terminated thread-local string.
    let msg = unsafe { CStr::from_ptr(fc_last_error()) }.to_string_lossy().into_owned();
    assert!(msg.contains("no usable CUDA driver"), "{msg}");
    assert_eq!(fc_cuda_device_count(), 0);
    // SAFETY: NULL handles are accepted by every entry point.
    unsafe {
        assert_eq!(fc_sync_ctx(std::ptr::null_mut()), header::FC_ERR_INVALID_ARGUMENT as i32);
        assert!(fc_buffer_alloc_ctx(std::ptr::null_mut(), 16).is_null());
        assert_eq!(fc_graph_begin_ctx(std::ptr::null_mut()), header::FC_ERR_INVALID_ARGUMENT as i32);
        assert!(fc_graph_end_ctx(std::ptr::null_mut()).is_null());
        assert_eq!(fc_graph_launch(std::ptr::null_mut()), header::FC_ERR_INVALID_ARGUMENT as i32);
        assert_eq!(fc_graph_segment_count(std::ptr::null()), -1);
        assert_eq!(fc_cuda_ctx_device_id(std::ptr::null()), -1);
        fc_buffer_free(std::ptr::null_mut());
        fc_graph_free(std::ptr::null_mut());
        fc_cuda_ctx_free(std::ptr::null_mut());
        fc_module_free(std::ptr::null_mut());
        fc_kernel_free(std::ptr::null_mut());
    }
    // SAFETY: static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(fc_version()) }.to_string_lossy().into_owned();
    assert_eq!(v, ::fc_graph::VERSION);
}

/// The build-time signature check (capi/build.rs) covers every function
/// the header declares: count the declarations in the header text.
#[test]
fn header_functions_are_all_checked() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../include/cuda/fc_cuda.h");
    let text = std::fs::read_to_string(path).expect("header readable");
    let mut code = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..].find("*/").map_or("", |end| &rest[start + end + 2..]);
    }
    code.push_str(rest);
    let mut names: Vec<&str> = code
        .match_indices("fc_")
        // Not part of a longer identifier, and not a function-pointer typedef `(*fc_...)`.
        .filter(|&(i, _)| i == 0 || !code.as_bytes()[i - 1].is_ascii_alphanumeric() && !code[..i].ends_with("(*"))
        .filter_map(|(i, _)| {
            let name_len = code[i..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            code[i + name_len..].starts_with('(').then(|| &code[i..i + name_len])
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.contains(&"fc_graph_begin_ctx") && names.contains(&"fc_version"), "{names:?}");
    assert_eq!(names.len(), HEADER_FUNCTION_COUNT, "declared: {names:?}");
}
