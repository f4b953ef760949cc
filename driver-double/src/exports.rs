//! The loadable libraries' exports, as macros: [`exports!`](crate::exports!)
//! is invoked once in each thin library crate under `driver-double/so/`
//! (with the build's default driver version, and whether it has
//! `cuGetProcAddress_v2`), so the rlib itself exports nothing (a Rust
//! cdylib re-exports every `#[no_mangle]` function of its dependencies,
//! and the CUDA 11 build must not have `cuGetProcAddress_v2`). Each export
//! passes its call on to [`crate::control`] or, for the entry points
//! exported by their `cuda.h` names, to [`crate::api`].

/// Entry points exported by their `cuda.h` names, as `libcuda` exports them,
/// for clients that open the driver and look functions up by name (the C
/// suite's own driver calls): each the ABI its name stands for.
#[macro_export]
#[doc(hidden)]
macro_rules! named_exports {
    ($( $export:ident = $module:ident :: $f:ident ( $( $a:ident : $t:ty ),* ); )*) => {
        $(
            #[doc = concat!("`", stringify!($export), "`, exported by name.")]
            ///
            /// # Safety
            /// The driver API's contract for this function.
            #[no_mangle]
            pub unsafe extern "C" fn $export($( $a: $t ),*) -> $crate::cuda_sys::CUresult {
                // SAFETY: the caller's promises, passed on.
                unsafe { $crate::api::$module::$f($( $a ),*) }
            }
        )*
    };
}

/// The named exports of both builds.
#[macro_export]
#[doc(hidden)]
macro_rules! all_named_exports {
    () => {
        use $crate::cuda_sys::*;
        $crate::named_exports! {
            cuInit = init::cuInit_v2000(flags: c_uint);
            cuDriverGetVersion = init::cuDriverGetVersion_v2020(v: *mut c_int);
            cuGetErrorName = init::cuGetErrorName_v6000(code: CUresult, s: *mut *const c_char);
            cuGetErrorString = init::cuGetErrorString_v6000(code: CUresult, s: *mut *const c_char);
            cuDeviceGet = device::cuDeviceGet_v2000(d: *mut CUdevice, ordinal: c_int);
            cuDeviceGetCount = device::cuDeviceGetCount_v2000(n: *mut c_int);
            cuDeviceGetAttribute = device::cuDeviceGetAttribute_v2000(v: *mut c_int, attr: CUdevice_attribute, d: CUdevice);
            cuDevicePrimaryCtxRetain = context::cuDevicePrimaryCtxRetain_v7000(c: *mut CUcontext, d: CUdevice);
            cuDevicePrimaryCtxRelease_v2 = context::cuDevicePrimaryCtxRelease_v11000(d: CUdevice);
            cuCtxGetCurrent = context::cuCtxGetCurrent_v4000(c: *mut CUcontext);
            cuCtxSetCurrent = context::cuCtxSetCurrent_v4000(c: CUcontext);
            cuCtxPushCurrent_v2 = context::cuCtxPushCurrent_v4000(c: CUcontext);
            cuCtxPopCurrent_v2 = context::cuCtxPopCurrent_v4000(c: *mut CUcontext);
            cuCtxSynchronize = context::cuCtxSynchronize_v2000();
            cuStreamCreate = stream::cuStreamCreate_v2000(s: *mut CUstream, flags: c_uint);
            cuStreamDestroy_v2 = stream::cuStreamDestroy_v4000(s: CUstream);
            cuStreamSynchronize = stream::cuStreamSynchronize_v2000(s: CUstream);
            cuStreamQuery = stream::cuStreamQuery_v2000(s: CUstream);
            cuStreamWaitEvent = stream::cuStreamWaitEvent_v3020(s: CUstream, e: CUevent, flags: c_uint);
            cuEventCreate = stream::cuEventCreate_v2000(e: *mut CUevent, flags: c_uint);
            cuEventRecord = stream::cuEventRecord_v2000(e: CUevent, s: CUstream);
            cuEventSynchronize = stream::cuEventSynchronize_v2000(e: CUevent);
            cuEventDestroy_v2 = stream::cuEventDestroy_v4000(e: CUevent);
            cuStreamBeginCapture_v2 = capture::cuStreamBeginCapture_v10010(s: CUstream, mode: CUstreamCaptureMode);
            cuStreamEndCapture = capture::cuStreamEndCapture_v10000(s: CUstream, g: *mut CUgraph);
            cuStreamIsCapturing = capture::cuStreamIsCapturing_v10000(s: CUstream, st: *mut CUstreamCaptureStatus);
            cuThreadExchangeStreamCaptureMode = capture::cuThreadExchangeStreamCaptureMode_v10010(m: *mut CUstreamCaptureMode);
            cuMemAlloc_v2 = memory::cuMemAlloc_v3020(p: *mut CUdeviceptr, n: usize);
            cuMemFree_v2 = memory::cuMemFree_v3020(p: CUdeviceptr);
            cuMemGetInfo_v2 = memory::cuMemGetInfo_v3020(f: *mut usize, t: *mut usize);
            cuMemcpyHtoDAsync_v2 = memory::cuMemcpyHtoDAsync_v3020(d: CUdeviceptr, s: *const c_void, n: usize, st: CUstream);
            cuMemcpyDtoHAsync_v2 = memory::cuMemcpyDtoHAsync_v3020(d: *mut c_void, s: CUdeviceptr, n: usize, st: CUstream);
            cuMemcpyDtoDAsync_v2 = memory::cuMemcpyDtoDAsync_v3020(d: CUdeviceptr, s: CUdeviceptr, n: usize, st: CUstream);
            cuMemsetD8Async = memory::cuMemsetD8Async_v3020(d: CUdeviceptr, v: c_uchar, n: usize, st: CUstream);
            cuMemsetD32Async = memory::cuMemsetD32Async_v3020(d: CUdeviceptr, v: c_uint, n: usize, st: CUstream);
            cuModuleLoadDataEx = module::cuModuleLoadDataEx_v2010(m: *mut CUmodule, img: *const c_void, n: c_uint, o: *mut CUjit_option, v: *mut *mut c_void);
            cuModuleGetFunction = module::cuModuleGetFunction_v2000(f: *mut CUfunction, m: CUmodule, name: *const c_char);
            cuModuleUnload = module::cuModuleUnload_v2000(m: CUmodule);
            cuLaunchKernel = launch::cuLaunchKernel_v4000(f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, sh: c_uint, st: CUstream, p: *mut *mut c_void, x: *mut *mut c_void);
            cuGraphInstantiateWithFlags = graph::cuGraphInstantiateWithFlags_v11040(e: *mut CUgraphExec, g: CUgraph, flags: c_ulonglong);
            cuGraphLaunch = exec::cuGraphLaunch_v10000(e: CUgraphExec, s: CUstream);
            cuGraphExecDestroy = exec::cuGraphExecDestroy_v10000(e: CUgraphExec);
            cuGraphDestroy = graph::cuGraphDestroy_v10000(g: CUgraph);
        }
    };
}

/// Defines the loadable library's exports; `with_v2` adds
/// `cuGetProcAddress_v2` (the CUDA 12+ build). `$default` is the driver
/// version the build answers when `FC_DOUBLE_DRIVER_VERSION` is unset.
#[macro_export]
macro_rules! exports {
    ($default:expr, $with_v2:tt) => {
        use std::ffi::{c_char, c_int, c_uint, c_void};

        /// Sets this build's default driver version when the library loads,
        /// before any call (named exports included) can read it.
        extern "C" fn at_load() {
            $crate::state::set_default_version($default);
        }

        #[used]
        #[link_section = ".init_array"]
        static AT_LOAD: extern "C" fn() = at_load;

        fn start() {
            $crate::control::check_build($crate::exports!(@has_v2 $with_v2));
        }

        /// `cuGetProcAddress` (the 11.3 ABI).
        ///
        /// # Safety
        /// As the driver API's.
        #[no_mangle]
        pub unsafe extern "C" fn cuGetProcAddress(
            symbol: *const c_char,
            pfn: *mut *mut c_void,
            version: c_int,
            _flags: u64,
        ) -> c_uint {
            start();
            // SAFETY: the caller's promises, passed on.
            unsafe { $crate::control::get_proc_address(symbol, pfn, version, std::ptr::null_mut()) }
        }

        $crate::exports!(@v2 $with_v2);

        /// The driver API's entry points by their names.
        mod named {
            $crate::all_named_exports!();
        }

        /// Sets the driver version and device count before any call (0;
        /// -1 once the double's state exists).
        #[no_mangle]
        pub extern "C" fn fc_double_configure(version: c_int, devices: c_int) -> c_int {
            $crate::control::configure(version, devices)
        }

        /// Which ABI the function at `address` is (1) or none (0).
        ///
        /// # Safety
        /// `name` and `version` are writable.
        #[no_mangle]
        pub unsafe extern "C" fn fc_double_identify(address: *const c_void, name: *mut *const c_char, version: *mut c_int) -> c_int {
            // SAFETY: the caller's promises, passed on.
            unsafe { $crate::control::identify(address, name, version) }
        }

        /// The ABI at table index `i` (1) or none (0).
        ///
        /// # Safety
        /// `name` and `version` are writable.
        #[no_mangle]
        pub unsafe extern "C" fn fc_double_abi(i: c_int, name: *mut *const c_char, version: *mut c_int) -> c_int {
            // SAFETY: the caller's promises, passed on.
            unsafe { $crate::control::abi_at(i, name, version) }
        }

        /// Calls of the ABI at table index `i`.
        #[no_mangle]
        pub extern "C" fn fc_double_calls(i: c_int) -> c_int {
            $crate::control::calls(i)
        }

        /// The table index of the ABI called last (-1: none).
        #[no_mangle]
        pub extern "C" fn fc_double_last_called() -> c_int {
            $crate::control::last_called()
        }

        /// Forgets which ABI ran last.
        #[no_mangle]
        pub extern "C" fn fc_double_reset_last_called() {
            $crate::calls::reset_last()
        }

        /// `cuGetProcAddress` requests so far.
        #[no_mangle]
        pub extern "C" fn fc_double_requests() -> c_int {
            $crate::calls::requests().len() as c_int
        }

        /// Request `i`: its symbol into `buf` (`len` bytes), its version returned (-1: none).
        #[no_mangle]
        pub extern "C" fn fc_double_request(i: c_int, buf: *mut c_char, len: usize) -> c_int {
            $crate::control::request(i, buf, len)
        }

        /// Requests above the driver's version so far.
        #[no_mangle]
        pub extern "C" fn fc_double_over_requests() -> c_int {
            $crate::calls::over_requests() as c_int
        }

        /// Misuse reports kept.
        #[no_mangle]
        pub extern "C" fn fc_double_misuses() -> c_int {
            $crate::report::count() as c_int
        }

        /// Report `i` into `buf` (`len` bytes); its length (-1: none).
        #[no_mangle]
        pub extern "C" fn fc_double_misuse(i: c_int, buf: *mut c_char, len: usize) -> c_int {
            $crate::control::misuse_at(i, buf, len)
        }

        /// Takes every report back (provoked on purpose); how many there were.
        #[no_mangle]
        pub extern "C" fn fc_double_take_misuses() -> c_int {
            $crate::report::take().len() as c_int
        }

        /// Live objects of a kind (see the double's docs); -1 for an unknown kind.
        ///
        /// # Safety
        /// `kind` is NUL-terminated.
        #[no_mangle]
        pub unsafe extern "C" fn fc_double_live(kind: *const c_char) -> i64 {
            if kind.is_null() {
                return -1;
            }
            // SAFETY: NUL-terminated (the caller's promise).
            let k = unsafe { std::ffi::CStr::from_ptr(kind) }.to_string_lossy();
            $crate::control::live(&k)
        }

        /// How often kernel `name` ran.
        ///
        /// # Safety
        /// `name` is NUL-terminated.
        #[no_mangle]
        pub unsafe extern "C" fn fc_double_kernel_runs(name: *const c_char) -> i64 {
            if name.is_null() {
                return -1;
            }
            // SAFETY: NUL-terminated (the caller's promise).
            let n = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
            $crate::control::kernel_runs(&n)
        }

        /// Replaces the injected faults (`FC_DOUBLE_FAULTS` syntax); -1 when it does not parse.
        ///
        /// # Safety
        /// `spec` is NUL-terminated.
        #[no_mangle]
        pub unsafe extern "C" fn fc_double_set_faults(spec: *const c_char) -> c_int {
            if spec.is_null() {
                return -1;
            }
            // SAFETY: NUL-terminated (the caller's promise).
            let s = unsafe { std::ffi::CStr::from_ptr(spec) }.to_string_lossy();
            $crate::control::set_faults(&s)
        }

        /// A graph node as the double holds it (1), or none (0).
        ///
        /// # Safety
        /// `out` holds eight values.
        #[no_mangle]
        pub unsafe extern "C" fn fc_double_node(node: *mut c_void, out: *mut u64) -> c_int {
            if out.is_null() {
                return 0;
            }
            let mut v = [0u64; 8];
            let r = $crate::control::node(node as usize as u64, &mut v);
            // SAFETY: `out` holds eight values (the caller's promise).
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), out, 8) };
            r
        }
    };
    (@has_v2 with_v2) => { true };
    (@has_v2 without_v2) => { false };
    (@v2 with_v2) => {
        /// `cuGetProcAddress_v2` (the 12.0 ABI).
        ///
        /// # Safety
        /// As the driver API's.
        #[no_mangle]
        pub unsafe extern "C" fn cuGetProcAddress_v2(
            symbol: *const c_char,
            pfn: *mut *mut c_void,
            version: c_int,
            _flags: u64,
            status: *mut c_int,
        ) -> c_uint {
            start();
            // SAFETY: the caller's promises, passed on.
            unsafe { $crate::control::get_proc_address(symbol, pfn, version, status) }
        }
    };
    (@v2 without_v2) => {};
}
