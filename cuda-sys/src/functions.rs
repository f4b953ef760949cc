//! The driver entry points fc-graph uses, each with the ABI version it is
//! resolved at through `cuGetProcAddress`.
//!
//! One line per entry point: `required` ones must exist on the oldest
//! supported driver (CUDA 11.4, driver 470) and loading fails without them;
//! `optional` ones are newer, their field is an `Option`, and the feature
//! that needs them reports "unsupported by this driver". The signature is the
//! header's `PFN_<name>_v<version>` typedef, checked by `tests/audit.rs`.

use crate::audit::FunctionDecl;
use crate::types::*;

/// The field type of a table entry: a plain pointer or an `Option` of one.
macro_rules! entry_type {
    (required, $t:ty) => { $t };
    (optional, $t:ty) => { Option<$t> };
}

/// Whether an entry is required.
macro_rules! entry_required {
    (required) => {
        true
    };
    (optional) => {
        false
    };
}

/// Declares the entry-point table: a `pfn` type per entry, the [`DriverFns`]
/// struct, its loader and the [`FUNCTIONS`] audit table.
macro_rules! driver_functions {
    ($( $(#[$m:meta])* $kind:ident fn $name:ident ( $( $p:ident : $t:ty ),* $(,)? ) -> $ret:ty = $ver:literal; )*) => {
        /// Function-pointer types, one per entry point, named like the
        /// driver's base symbol.
        pub mod pfn {
            use super::*;
            $( $(#[$m])* #[doc = concat!("`PFN_", stringify!($name), "_v", stringify!($ver), "` of `cudaTypedefs.h`.")] pub type $name = unsafe extern "C" fn($( $p: $t ),*) -> $ret; )*
        }

        /// Resolved driver entry points. Optional ones are `None` when the
        /// driver is too old to have them.
        #[derive(Clone, Copy)]
        pub struct DriverFns {
            $( $(#[$m])* #[doc = concat!("`", stringify!($name), "` (ABI ", stringify!($ver), ", ", stringify!($kind), ").")] pub $name: entry_type!($kind, pfn::$name), )*
        }

        impl DriverFns {
            /// Fills the table through `resolve(name, abi_version)`, which
            /// returns the symbol's address or why it has none.
            ///
            /// # Safety
            /// Every address `resolve` returns for `(name, version)` must be
            /// a function with the ABI of the header's
            /// `PFN_<name>_v<version>`, as `cuGetProcAddress` guarantees.
            pub(crate) unsafe fn resolve_with(
                mut resolve: impl FnMut(&'static str, i32) -> Result<*mut c_void, String>,
            ) -> Result<Self, crate::LoadError> {
                Ok(Self {
                    $( $name: driver_functions!(@load $kind, $name, $ver, resolve(stringify!($name), $ver)), )*
                })
            }

            /// The optional entry points this driver lacks.
            pub fn missing_optional(&self) -> Vec<&'static FunctionDecl> {
                let mut missing = Vec::new();
                $( driver_functions!(@missing $kind, self.$name, stringify!($name), missing); )*
                missing
            }
        }

        /// Every entry point, in declaration order, for the audit and for
        /// error messages.
        pub const FUNCTIONS: &[FunctionDecl] = &[
            $( FunctionDecl {
                name: stringify!($name),
                abi_version: $ver,
                required: entry_required!($kind),
                params: &[ $( (stringify!($p), stringify!($t)) ),* ],
                ret: stringify!($ret),
            } ),*
        ];
    };
    (@load required, $name:ident, $ver:literal, $res:expr) => {
        match $res {
            // SAFETY: the caller guarantees the address has this ABI.
            Ok(p) => unsafe { std::mem::transmute::<*mut c_void, pfn::$name>(p) },
            Err(detail) => {
                return Err(crate::LoadError::MissingSymbol {
                    name: stringify!($name),
                    version: $ver,
                    detail,
                })
            }
        }
    };
    (@load optional, $name:ident, $ver:literal, $res:expr) => {
        // SAFETY: the caller guarantees the address has this ABI.
        $res.ok().map(|p| unsafe { std::mem::transmute::<*mut c_void, pfn::$name>(p) })
    };
    (@missing required, $field:expr, $name:expr, $out:ident) => {};
    (@missing optional, $field:expr, $name:expr, $out:ident) => {
        if $field.is_none() {
            if let Some(d) = FUNCTIONS.iter().find(|d| d.name == $name) {
                $out.push(d);
            }
        }
    };
}

driver_functions! {
    // --- initialisation and errors --------------------------------------
    required fn cuInit(Flags: c_uint) -> CUresult = 2000;
    required fn cuDriverGetVersion(driverVersion: *mut c_int) -> CUresult = 2020;
    required fn cuGetErrorName(error: CUresult, pStr: *mut *const c_char) -> CUresult = 6000;
    required fn cuGetErrorString(error: CUresult, pStr: *mut *const c_char) -> CUresult = 6000;

    // --- devices ---------------------------------------------------------
    required fn cuDeviceGetCount(count: *mut c_int) -> CUresult = 2000;
    required fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult = 2000;
    required fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult = 2000;
    required fn cuDeviceGetAttribute(pi: *mut c_int, attrib: CUdevice_attribute, dev: CUdevice) -> CUresult = 2000;
    required fn cuDeviceTotalMem(bytes: *mut usize, dev: CUdevice) -> CUresult = 3020;
    required fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) -> CUresult = 11040;

    // --- contexts ----------------------------------------------------------
    required fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult = 7000;
    required fn cuDevicePrimaryCtxRelease(dev: CUdevice) -> CUresult = 11000;
    required fn cuCtxPushCurrent(ctx: CUcontext) -> CUresult = 4000;
    required fn cuCtxPopCurrent(pctx: *mut CUcontext) -> CUresult = 4000;
    required fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CUresult = 4000;
    required fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult = 4000;
    /// A private context (isolated from the primary context's device-wide
    /// synchronisations); the 3.2 ABI (`cuCtxCreate_v2`), in every driver.
    required fn cuCtxCreate(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) -> CUresult = 3020;
    required fn cuCtxDestroy(ctx: CUcontext) -> CUresult = 4000;
    /// Waits for every stream of the current context: what the CUDA
    /// runtime's `cudaDeviceSynchronize` does. The library never calls it
    /// (it synchronises its own stream only); the coexistence tests use it
    /// to play a foreign library's device-wide synchronisation.
    required fn cuCtxSynchronize() -> CUresult = 2000;

    // --- streams and capture ---------------------------------------------
    required fn cuStreamCreate(phStream: *mut CUstream, Flags: c_uint) -> CUresult = 2000;
    required fn cuStreamDestroy(hStream: CUstream) -> CUresult = 4000;
    required fn cuStreamSynchronize(hStream: CUstream) -> CUresult = 2000;
    required fn cuStreamQuery(hStream: CUstream) -> CUresult = 2000;
    required fn cuStreamBeginCapture(hStream: CUstream, mode: CUstreamCaptureMode) -> CUresult = 10010;
    required fn cuStreamEndCapture(hStream: CUstream, phGraph: *mut CUgraph) -> CUresult = 10000;
    required fn cuStreamIsCapturing(hStream: CUstream, captureStatus: *mut CUstreamCaptureStatus) -> CUresult = 10000;
    /// The capture's status, id, graph and current dependency set (the v2 form).
    required fn cuStreamGetCaptureInfo(hStream: CUstream, captureStatus_out: *mut CUstreamCaptureStatus, id_out: *mut cuuint64_t, graph_out: *mut CUgraph, dependencies_out: *mut *const CUgraphNode, numDependencies_out: *mut usize) -> CUresult = 11030;
    required fn cuThreadExchangeStreamCaptureMode(mode: *mut CUstreamCaptureMode) -> CUresult = 10010;

    // --- memory --------------------------------------------------------------
    required fn cuMemAlloc(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult = 3020;
    required fn cuMemFree(dptr: CUdeviceptr) -> CUresult = 3020;
    required fn cuMemGetInfo(free: *mut usize, total: *mut usize) -> CUresult = 3020;
    required fn cuMemcpyHtoDAsync(dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) -> CUresult = 3020;
    required fn cuMemcpyDtoHAsync(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) -> CUresult = 3020;
    required fn cuMemcpyDtoDAsync(dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) -> CUresult = 3020;
    /// Which context owns an address, and the allocation it lies in.
    required fn cuPointerGetAttribute(data: *mut c_void, attribute: CUpointer_attribute, ptr: CUdeviceptr) -> CUresult = 4000;
    required fn cuMemsetD8Async(dstDevice: CUdeviceptr, uc: c_uchar, N: usize, hStream: CUstream) -> CUresult = 3020;

    // --- modules and kernels ---------------------------------------------
    required fn cuModuleLoadDataEx(module: *mut CUmodule, image: *const c_void, numOptions: c_uint, options: *mut CUjit_option, optionValues: *mut *mut c_void) -> CUresult = 2010;
    required fn cuModuleUnload(hmod: CUmodule) -> CUresult = 2000;
    required fn cuModuleGetFunction(hfunc: *mut CUfunction, hmod: CUmodule, name: *const c_char) -> CUresult = 2000;
    required fn cuLaunchKernel(f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) -> CUresult = 4000;
    /// Launch with attributes (CUDA 11.8+): programmatic dependent launch.
    optional fn cuLaunchKernelEx(config: *const CUlaunchConfig, f: CUfunction, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) -> CUresult = 11060;
    /// A kernel's own launch limits (threads per block, dynamic shared
    /// memory), checked before launching.
    required fn cuFuncGetAttribute(pi: *mut c_int, attrib: CUfunction_attribute, hfunc: CUfunction) -> CUresult = 2020;
    /// Driver-side parameter layout of a kernel (CUDA 12.4+): cross-checks
    /// the PTX-declared parameters when present.
    optional fn cuFuncGetParamInfo(func: CUfunction, paramIndex: usize, paramOffset: *mut usize, paramSize: *mut usize) -> CUresult = 12040;

    // --- graphs --------------------------------------------------------------
    required fn cuGraphInstantiateWithFlags(phGraphExec: *mut CUgraphExec, hGraph: CUgraph, flags: c_ulonglong) -> CUresult = 11040;
    required fn cuGraphLaunch(hGraphExec: CUgraphExec, hStream: CUstream) -> CUresult = 10000;
    required fn cuGraphExecDestroy(hGraphExec: CUgraphExec) -> CUresult = 10000;
    required fn cuGraphDestroy(hGraph: CUgraph) -> CUresult = 10000;
    required fn cuGraphGetNodes(hGraph: CUgraph, nodes: *mut CUgraphNode, numNodes: *mut usize) -> CUresult = 10000;
    /// In-place update of an executable graph, ABI of CUDA 12.0 (the 10020
    /// ABI takes different parameters; we only resolve this one).
    optional fn cuGraphExecUpdate(hGraphExec: CUgraphExec, hGraph: CUgraph, resultInfo: *mut CUgraphExecUpdateResultInfo) -> CUresult = 12000;
    /// A graph's edges with their annotations (CUDA 12.3+ ABI; the 10000
    /// ABI has no `edgeData`): tells programmatic edges from full ones.
    optional fn cuGraphGetEdges(hGraph: CUgraph, from: *mut CUgraphNode, to: *mut CUgraphNode, edgeData: *mut CUgraphEdgeData, numEdges: *mut usize) -> CUresult = 12030;
    /// Writes a graph as Graphviz DOT (diagnostics; CUDA 11.3+).
    optional fn cuGraphDebugDotPrint(hGraph: CUgraph, path: *const c_char, flags: c_uint) -> CUresult = 11030;

    // --- events (timing) ---------------------------------------------------
    required fn cuEventCreate(phEvent: *mut CUevent, Flags: c_uint) -> CUresult = 2000;
    required fn cuEventRecord(hEvent: CUevent, hStream: CUstream) -> CUresult = 2000;
    required fn cuEventSynchronize(hEvent: CUevent) -> CUresult = 2000;
    required fn cuEventElapsedTime(pMilliseconds: *mut f32, hStart: CUevent, hEnd: CUevent) -> CUresult = 2000;
    required fn cuEventDestroy(hEvent: CUevent) -> CUresult = 4000;

    // --- green contexts (CUDA 12.4+; `Context::isolated`) ------------------
    /// The device's resources of one type (all its SMs).
    optional fn cuDeviceGetDevResource(dev: CUdevice, result: *mut CUdevResource, type_: CUdevResourceType) -> CUresult = 12040;
    /// A descriptor of resources, the argument of `cuGreenCtxCreate`.
    optional fn cuDevResourceGenerateDesc(phDesc: *mut CUdevResourceDesc, resources: *mut CUdevResource, nbResources: c_uint) -> CUresult = 12040;
    /// A green context over a descriptor's resources (it retains the
    /// primary context; `CU_GREEN_CTX_DEFAULT_STREAM` is required).
    optional fn cuGreenCtxCreate(phCtx: *mut CUgreenCtx, desc: CUdevResourceDesc, dev: CUdevice, flags: c_uint) -> CUresult = 12040;
    /// Destroys a green context (its streams must be destroyed first).
    optional fn cuGreenCtxDestroy(hCtx: CUgreenCtx) -> CUresult = 12040;
    /// The `CUcontext` that stands for a green context (made current, it
    /// routes streams, modules and launches to the green context).
    optional fn cuCtxFromGreenCtx(pContext: *mut CUcontext, hCtx: CUgreenCtx) -> CUresult = 12040;
    /// A stream of a green context, whatever context is current (CUDA 12.5+;
    /// on 12.4 the stream is made with `cuStreamCreate`, the green
    /// context's `CUcontext` current).
    optional fn cuGreenCtxStreamCreate(phStream: *mut CUstream, greenCtx: CUgreenCtx, flags: c_uint, priority: c_int) -> CUresult = 12050;
}

/// `cuGetProcAddress` itself, found with `dlsym`. The unversioned export has
/// the CUDA 11.3 ABI; drivers of CUDA 12.0 and later also export
/// `cuGetProcAddress_v2` with the 12.0 ABI, which the loader prefers.
pub mod proc_address {
    use crate::audit::FunctionDecl;
    use crate::types::*;

    /// Declares the bootstrap pointer types and their audit entries.
    macro_rules! bootstrap {
        ($( $ty:ident = $name:literal $ver:literal $required:literal ( $( $p:ident : $t:ty ),* $(,)? ) -> $ret:ty; )*) => {
            $( #[doc = concat!("`PFN_", $name, "_v", stringify!($ver), "`.")]
               pub type $ty = unsafe extern "C" fn($( $p: $t ),*) -> $ret; )*
            /// The bootstrap entry points, described like [`super::FUNCTIONS`].
            pub const BOOTSTRAP: &[FunctionDecl] = &[
                $( FunctionDecl {
                    name: $name,
                    abi_version: $ver,
                    required: $required,
                    params: &[ $( (stringify!($p), stringify!($t)) ),* ],
                    ret: stringify!($ret),
                } ),*
            ];
        };
    }

    bootstrap! {
        cuGetProcAddress_v11030 = "cuGetProcAddress" 11030 true
            (symbol: *const c_char, pfn: *mut *mut c_void, driverVersion: c_int, flags: cuuint64_t) -> CUresult;
        cuGetProcAddress_v12000 = "cuGetProcAddress" 12000 false
            (symbol: *const c_char, pfn: *mut *mut c_void, driverVersion: c_int, flags: cuuint64_t,
             symbolStatus: *mut CUdriverProcAddressQueryResult) -> CUresult;
    }
}
