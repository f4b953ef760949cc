//! The C API without a usable driver, and the checks that need no device
//! (runs on every machine, in CI): this test binary points
//! `FC_CUDA_LIBRARY` at a library that does not exist before anything loads
//! the driver, so every export must answer with a status code and a
//! message, never a crash.

use std::ffi::CStr;
use std::os::raw::c_int;

use fcgraph::*;

fn without_driver() {
    // Set before the first driver() call of this process; every test sets
    // the same value, so the order of the tests does not matter.
    std::env::set_var(cuda_sys::FC_CUDA_LIBRARY_ENV, "/nonexistent/libcuda.so.1");
}

fn last_error() -> String {
    // SAFETY: fc_last_error returns a NUL-terminated per-thread string.
    unsafe { CStr::from_ptr(fc_last_error()) }.to_string_lossy().into_owned()
}

const INVALID_ARGUMENT: c_int = header::FC_ERR_INVALID_ARGUMENT as c_int;
const INVALID_HANDLE: c_int = header::FC_ERR_INVALID_HANDLE as c_int;

#[test]
fn constructors_return_null_with_the_reason() {
    without_driver();
    assert!(fc_cuda_init_device(0).is_null());
    assert_eq!(fc_last_error_code(), header::FC_ERR_NO_DRIVER as c_int);
    assert!(last_error().contains("no usable CUDA driver"), "{}", last_error());
    fc_clear_last_error();
    assert!(fc_cuda_init_device_isolated(0).is_null());
    assert_eq!(fc_last_error_code(), header::FC_ERR_NO_DRIVER as c_int);
    assert_eq!(fc_cuda_device_count(), 0);
    assert!(fc_cuda_init_device(-1).is_null());
    assert_eq!(fc_last_error_code(), INVALID_ARGUMENT);
    assert!(last_error().contains("negative"), "{}", last_error());
}

#[test]
fn null_handles_are_invalid_arguments_and_frees_accept_null() {
    without_driver();
    assert_eq!(fc_sync_ctx(std::ptr::null_mut()), INVALID_ARGUMENT);
    assert!(fc_buffer_alloc_ctx(std::ptr::null_mut(), 16).is_null());
    assert_eq!(fc_graph_begin_ctx(std::ptr::null_mut()), INVALID_ARGUMENT);
    assert!(fc_graph_end_ctx(std::ptr::null_mut()).is_null());
    assert_eq!(fc_graph_launch(std::ptr::null_mut()), INVALID_ARGUMENT);
    assert_eq!(fc_graph_segment_count(std::ptr::null()), -1);
    assert_eq!(fc_cuda_ctx_device_id(std::ptr::null()), -1);
    assert!(fc_ctx_stream(std::ptr::null()).is_null());
    assert!(fc_ctx_cu_context(std::ptr::null()).is_null());
    fc_clear_last_error();
    fc_buffer_free(std::ptr::null_mut());
    fc_graph_free(std::ptr::null_mut());
    fc_cuda_ctx_free(std::ptr::null_mut());
    fc_module_free(std::ptr::null_mut());
    fc_kernel_free(std::ptr::null_mut());
    assert_eq!(fc_last_error_code(), 0, "freeing NULL is a no-op, not an error");
}

/// Values that are not live handles never reach the library's objects.
#[test]
fn forged_and_foreign_handles_are_invalid_handles() {
    without_driver();
    let local = 0u64;
    let foreign = &local as *const u64 as *mut fc_buffer;
    fc_clear_last_error();
    fc_buffer_free(foreign);
    assert_eq!(fc_last_error_code(), INVALID_HANDLE);
    assert!(last_error().contains("not a handle made by this library"), "{}", last_error());
    assert_eq!(fc_buffer_size(foreign), 0);
    assert_eq!(fc_last_error_code(), INVALID_HANDLE);
    // A well-formed but never-issued graph handle (odd tag of fc_graph).
    let forged = 0x0000_0001_000f_ffc5usize as *mut fc_graph;
    assert_eq!(fc_graph_launch(forged), INVALID_HANDLE);
    assert!(last_error().contains("fc_graph"), "{}", last_error());
    // A context-kind value given where a buffer is expected.
    let ctx_kind = 0x0000_0001_0000_00c1usize as *mut fc_buffer;
    fc_buffer_free(ctx_kind);
    assert!(last_error().contains("is an fc_cuda_ctx handle, not an fc_buffer"), "{}", last_error());
}

#[test]
fn last_error_copy_and_clear() {
    without_driver();
    assert_eq!(fc_sync_ctx(std::ptr::null_mut()), INVALID_ARGUMENT);
    let full = last_error();
    let mut buf = [0 as std::os::raw::c_char; 8];
    // SAFETY: `buf` holds 8 bytes.
    let n = unsafe { fc_last_error_copy(buf.as_mut_ptr(), buf.len()) };
    assert_eq!(n, full.len());
    // SAFETY: NUL-terminated by fc_last_error_copy.
    let cut = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
    assert_eq!(cut, full[..7]);
    fc_clear_last_error();
    assert_eq!((fc_last_error_code(), last_error()), (0, String::new()));
}

#[test]
fn version_is_the_crates() {
    // SAFETY: static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(fc_version()) }.to_string_lossy().into_owned();
    assert_eq!(v, ::fc_graph::VERSION);
}

/// The header, embedded at compile time so that the test binary runs from
/// any folder (a GPU bundle copies the binaries without the source tree).
const HEADER: &str = include_str!("../../include/cuda/fc_cuda.h");

/// The build-time signature check (capi/build.rs) covers every function
/// the header declares: count the declarations in the header text.
#[test]
fn header_functions_are_all_checked() {
    let text = HEADER;
    assert!(text.contains("int fc_graph_begin_ctx(fc_cuda_ctx *ctx);"), "the embedded text is fc_cuda.h");
    let mut code = String::new();
    let mut rest = text;
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
