//! Behaviour of the Rust API without a usable driver (runs on every
//! machine): this test binary points `FC_CUDA_LIBRARY` at a library that
//! does not exist before anything loads the driver, so every entry point
//! must answer with an error value, never a panic. The C API's behaviour
//! without a driver is tested in capi/tests/no_driver.rs.

use ::fc_graph::{Context, Device, Error};

fn without_driver() {
    // Set before the first driver() call of this process.
    std::env::set_var(cuda_sys::FC_CUDA_LIBRARY_ENV, "/nonexistent/libcuda.so.1");
}

#[test]
fn rust_api_reports_no_driver() {
    without_driver();
    let e = Context::new(0).expect_err("no driver, no context");
    assert!(matches!(e, Error::NoDriver(_)), "got {e:?}");
    assert!(e.to_string().contains("/nonexistent/libcuda.so.1"), "message names the path: {e}");
    let e = Context::isolated(0).expect_err("no driver, no isolated context");
    assert!(matches!(e, Error::NoDriver(_)), "got {e:?}");
    assert!(Device::count().is_err());
    assert!(::fc_graph::driver().is_err());
}
