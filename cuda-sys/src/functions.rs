//! The driver entry points fc-graph uses, each with the ABI version it is
//! resolved at through `cuGetProcAddress`.
//!
//! One line per entry point: `required` ones must exist on the oldest
//! supported driver (CUDA 11.4, driver 470) and loading fails without them;
//! `optional` ones may be newer, their field is an `Option`, and the feature
//! that needs them reports "unsupported by this driver". The signature is the
//! header's `PFN_<name>_v<version>` typedef, checked by `tests/audit.rs`.
//!
//! Resolution is version-exact: the loader reads the driver's version first
//! and never requests an ABI above it (CUDA 11.x/12.x drivers would hand out
//! an older ABI of the symbol, CUDA 13 drivers refuse). An optional entry
//! newer than the driver is absent, unless the table lists older ABIs for
//! it; then the newest one the driver reaches is resolved with its own type
//! (see [`abi`]) and called through an adapter ([`crate::adapt`]).

use crate::decl::FunctionDecl;
use crate::types::*;

/// One resolved entry point: which ABI the driver gave, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// The entry point's base name.
    pub name: &'static str,
    /// The ABI version it was requested at (and so has).
    pub abi_version: i32,
    /// The address `cuGetProcAddress` returned.
    pub address: *const c_void,
}

/// The one request made for an entry whose ABI is `version`: never above
/// the driver's own version (`driver_version`), whatever the table says.
fn request(
    get: &mut dyn FnMut(&'static str, i32) -> Result<*mut c_void, String>,
    name: &'static str,
    version: i32,
    driver_version: i32,
) -> Result<*mut c_void, String> {
    if version > driver_version {
        return Err(format!("not requested: ABI {version} is newer than the driver ({driver_version})"));
    }
    get(name, version)
}

/// Every ABI version the table knows for `name` ([`FUNCTIONS`] and
/// [`OLDER_ABIS`]), newest first; `audit::abi_versions`.
pub(crate) fn abi_versions(name: &str) -> Vec<i32> {
    let mut v: Vec<i32> =
        FUNCTIONS.iter().chain(OLDER_ABIS).filter(|f| f.name == name).map(|f| f.abi_version).collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}

/// Declares the entry-point table: a `pfn` type per entry (and, for entries
/// with older ABIs, an `abi::<name>` module with their types and an `Abi`
/// enum of the one resolved), the [`DriverFns`] struct, its loader and the
/// [`FUNCTIONS`] / [`OLDER_ABIS`] audit tables.
///
/// An entry is `required` or `optional`, then its newest ABI as the
/// header's `PFN_<name>_v<version>` typedef. The loader requests an entry
/// only at an ABI version at or below the driver's version:
/// - a `required` entry's ABI must exist on the oldest supported driver
///   (`ABI <= MIN_DRIVER_VERSION`, a compile-time check), so it is always
///   requested at its ABI;
/// - an `optional` entry newer than the driver is not requested at all
///   (absent), unless it lists older ABIs: `= NEWEST as VNEWEST else
///   VOLD(params) -> ret = OLD ...` (descending, a compile-time check); then
///   the newest ABI the driver's version reaches is requested, with its own
///   type, and the field is an `Option<abi::<name>::Abi>`.
macro_rules! driver_functions {
    ($( $(#[$m:meta])* $kind:ident fn $name:ident ( $( $p:ident : $t:ty ),* $(,)? ) -> $ret:ty = $ver:literal
        $( as $newv:ident $( else $oldv:ident ( $( $op:ident : $ot:ty ),* $(,)? ) -> $oret:ty = $over:literal )+ )? ; )*) => {
        /// Function-pointer types, one per entry point (its newest ABI),
        /// named like the driver's base symbol.
        pub mod pfn {
            use super::*;
            $( $(#[$m])* #[doc = concat!("`PFN_", stringify!($name), "_v", stringify!($ver), "` of `cudaTypedefs.h`.")] pub type $name = unsafe extern "C" fn($( $p: $t ),*) -> $ret; )*
        }

        /// The entry points that have older ABIs: per entry, a type per ABI
        /// and the `Abi` enum of the one the driver gave.
        pub mod abi {
            $( $( driver_functions!(@abi_mod $name, $ver, $newv, $( $oldv ( $( $op : $ot ),* ) -> $oret = $over ),+ ); )? )*
        }

        $( driver_functions!(@check $kind, $name, $ver); )*

        /// Resolved driver entry points. Optional ones are `None` when the
        /// driver is too old to have them.
        #[derive(Clone, Copy)]
        pub struct DriverFns {
            $( $(#[$m])* #[doc = concat!("`", stringify!($name), "` (ABI ", stringify!($ver), ", ", stringify!($kind), ").")] pub $name: driver_functions!(@field $kind, $name $(, $newv)?), )*
        }

        impl DriverFns {
            /// Fills the table through `get(name, abi_version)`, which
            /// returns the symbol's address or why it has none, for a driver
            /// of API version `driver_version`: no request is made above it.
            ///
            /// # Safety
            /// Every address `get` returns for `(name, version)` must be a
            /// function with the ABI of the header's `PFN_<name>_v<version>`,
            /// as `cuGetProcAddress` guarantees for a version at or below the
            /// driver's.
            pub(crate) unsafe fn resolve_with(
                driver_version: i32,
                mut get: impl FnMut(&'static str, i32) -> Result<*mut c_void, String>,
            ) -> Result<Self, crate::LoadError> {
                Ok(Self {
                    $( $name: driver_functions!(@load $kind, $name, $ver, get, driver_version $(, $newv)?), )*
                })
            }

            /// The optional entry points this driver lacks.
            pub fn missing_optional(&self) -> Vec<&'static FunctionDecl> {
                let mut missing = Vec::new();
                $( driver_functions!(@missing $kind, self.$name, stringify!($name), missing); )*
                missing
            }

            /// Every entry point the driver has, with the ABI it was
            /// resolved at and its address, in table order.
            pub fn resolved(&self) -> Vec<Resolved> {
                let mut out = Vec::with_capacity(FUNCTIONS.len());
                $( driver_functions!(@resolved $kind, self.$name, $name, $ver, out $(, $newv)?); )*
                out
            }

            /// The ABI `name` was resolved at; `None` when the driver lacks
            /// it (or the table has no such entry).
            pub fn resolved_abi(&self, name: &str) -> Option<i32> {
                self.resolved().into_iter().find(|r| r.name == name).map(|r| r.abi_version)
            }
        }

        /// Every entry point at its newest ABI, in declaration order, for
        /// the audit and for error messages.
        pub const FUNCTIONS: &[FunctionDecl] = &[
            $( FunctionDecl {
                name: stringify!($name),
                abi_version: $ver,
                required: entry_required!($kind),
                params: &[ $( (stringify!($p), stringify!($t)) ),* ],
                ret: stringify!($ret),
            } ),*
        ];

        /// The older ABIs the loader falls back to on drivers older than an
        /// entry's newest ABI, newest first per entry (audited like
        /// [`FUNCTIONS`]).
        pub const OLDER_ABIS: &[FunctionDecl] = &[
            $( $( $( FunctionDecl {
                name: stringify!($name),
                abi_version: $over,
                required: false,
                params: &[ $( (stringify!($op), stringify!($ot)) ),* ],
                ret: stringify!($oret),
            }, )+ )? )*
        ];
    };
    (@abi_mod $name:ident, $ver:literal, $newv:ident, $( $oldv:ident ( $( $op:ident : $ot:ty ),* ) -> $oret:ty = $over:literal ),+ ) => {
        #[doc = concat!("The ABIs of `", stringify!($name), "`, newest first.")]
        pub mod $name {
            use crate::types::*;

            #[doc = concat!("`PFN_", stringify!($name), "_v", stringify!($ver), "`, the newest ABI.")]
            pub type $newv = crate::functions::pfn::$name;
            $( #[doc = concat!("`PFN_", stringify!($name), "_v", stringify!($over), "` of `cudaTypedefs.h`.")]
               pub type $oldv = unsafe extern "C" fn($( $op: $ot ),*) -> $oret; )+

            // Newest first, strictly descending.
            const _: () = {
                let v: &[i32] = &[$ver, $( $over ),+];
                let mut i = 1;
                while i < v.len() {
                    assert!(v[i] < v[i - 1], concat!(stringify!($name), ": older ABIs must be listed newest first"));
                    i += 1;
                }
            };

            /// The ABI the driver gave, with its own type.
            #[derive(Debug, Clone, Copy)]
            pub enum Abi {
                #[doc = concat!("ABI ", stringify!($ver), ".")]
                $newv($newv),
                $( #[doc = concat!("ABI ", stringify!($over), ".")] $oldv($oldv), )+
            }

            impl Abi {
                /// The ABI version.
                pub fn abi_version(self) -> i32 {
                    match self {
                        Abi::$newv(_) => $ver,
                        $( Abi::$oldv(_) => $over, )+
                    }
                }

                /// The function's address.
                pub fn address(self) -> *const c_void {
                    match self {
                        Abi::$newv(f) => f as *const c_void,
                        $( Abi::$oldv(f) => f as *const c_void, )+
                    }
                }
            }

            /// Requests the newest ABI at or below `driver_version`, at
            /// exactly that ABI's version; none above it.
            ///
            /// # Safety
            /// As [`super::super::DriverFns::resolve_with`].
            pub(crate) unsafe fn resolve(
                driver_version: i32,
                get: &mut dyn FnMut(&'static str, i32) -> Result<*mut c_void, String>,
            ) -> Result<Abi, String> {
                let name = stringify!($name);
                if $ver <= driver_version {
                    // SAFETY: the caller guarantees the address has this ABI.
                    return get(name, $ver).map(|p| Abi::$newv(unsafe { std::mem::transmute::<*mut c_void, $newv>(p) }));
                }
                $( if $over <= driver_version {
                    // SAFETY: the caller guarantees the address has this ABI.
                    return get(name, $over).map(|p| Abi::$oldv(unsafe { std::mem::transmute::<*mut c_void, $oldv>(p) }));
                } )+
                Err(format!("not requested: every ABI of {name} is newer than the driver ({driver_version})"))
            }
        }
    };
    (@check required, $name:ident, $ver:literal) => {
        const _: () = assert!(
            $ver <= crate::MIN_DRIVER_VERSION,
            concat!(stringify!($name), ": a required entry's ABI must exist on the oldest supported driver")
        );
    };
    (@check optional, $name:ident, $ver:literal) => {};
    (@field required, $name:ident) => { pfn::$name };
    (@field optional, $name:ident) => { Option<pfn::$name> };
    (@field optional, $name:ident, $newv:ident) => { Option<abi::$name::Abi> };
    (@field required, $name:ident, $newv:ident) => {
        compile_error!(concat!(stringify!($name), ": a required entry has one ABI, the oldest supported driver's"))
    };
    (@load required, $name:ident, $ver:literal, $get:ident, $dv:ident) => {
        match request(&mut $get, stringify!($name), $ver, $dv) {
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
    (@load optional, $name:ident, $ver:literal, $get:ident, $dv:ident) => {
        // SAFETY: the caller guarantees the address has this ABI.
        request(&mut $get, stringify!($name), $ver, $dv).ok().map(|p| unsafe { std::mem::transmute::<*mut c_void, pfn::$name>(p) })
    };
    (@load optional, $name:ident, $ver:literal, $get:ident, $dv:ident, $newv:ident) => {
        // SAFETY: the caller's guarantee is `abi::<name>::resolve`'s.
        unsafe { abi::$name::resolve($dv, &mut $get) }.ok()
    };
    (@missing required, $field:expr, $name:expr, $out:ident) => {};
    (@missing optional, $field:expr, $name:expr, $out:ident) => {
        if $field.is_none() {
            if let Some(d) = FUNCTIONS.iter().find(|d| d.name == $name) {
                $out.push(d);
            }
        }
    };
    (@resolved required, $field:expr, $name:ident, $ver:literal, $out:ident) => {
        $out.push(Resolved { name: stringify!($name), abi_version: $ver, address: $field as *const c_void });
    };
    (@resolved optional, $field:expr, $name:ident, $ver:literal, $out:ident) => {
        if let Some(f) = $field {
            $out.push(Resolved { name: stringify!($name), abi_version: $ver, address: f as *const c_void });
        }
    };
    (@resolved optional, $field:expr, $name:ident, $ver:literal, $out:ident, $newv:ident) => {
        if let Some(a) = $field {
            $out.push(Resolved { name: stringify!($name), abi_version: a.abi_version(), address: a.address() });
        }
    };
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
    /// Orders a stream after an event (lanes of a context: fork, join, wait).
    required fn cuStreamWaitEvent(hStream: CUstream, hEvent: CUevent, Flags: c_uint) -> CUresult = 3020;
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

    // --- the JIT linker (PTX linked with a static device library) --------
    /// A link in progress, with its JIT options (the 6.5 ABI,
    /// `cuLinkCreate_v2`, in every supported driver).
    required fn cuLinkCreate(numOptions: c_uint, options: *mut CUjit_option, optionValues: *mut *mut c_void, stateOut: *mut CUlinkState) -> CUresult = 6050;
    /// Adds an input from memory (PTX, cubin, fatbinary, object or library;
    /// the 6.5 ABI, `cuLinkAddData_v2`).
    required fn cuLinkAddData(state: CUlinkState, type_: CUjitInputType, data: *mut c_void, size: usize, name: *const c_char, numOptions: c_uint, options: *mut CUjit_option, optionValues: *mut *mut c_void) -> CUresult = 6050;
    /// Adds an input from a file (the 6.5 ABI, `cuLinkAddFile_v2`).
    required fn cuLinkAddFile(state: CUlinkState, type_: CUjitInputType, path: *const c_char, numOptions: c_uint, options: *mut CUjit_option, optionValues: *mut *mut c_void) -> CUresult = 6050;
    /// Links the inputs: a cubin owned by the link, valid until
    /// `cuLinkDestroy`.
    required fn cuLinkComplete(state: CUlinkState, cubinOut: *mut *mut c_void, sizeOut: *mut usize) -> CUresult = 5050;
    /// Ends a link and frees its cubin.
    required fn cuLinkDestroy(state: CUlinkState) -> CUresult = 5050;

    // --- graphs --------------------------------------------------------------
    required fn cuGraphInstantiateWithFlags(phGraphExec: *mut CUgraphExec, hGraph: CUgraph, flags: c_ulonglong) -> CUresult = 11040;
    required fn cuGraphLaunch(hGraphExec: CUgraphExec, hStream: CUstream) -> CUresult = 10000;
    required fn cuGraphExecDestroy(hGraphExec: CUgraphExec) -> CUresult = 10000;
    required fn cuGraphDestroy(hGraph: CUgraph) -> CUresult = 10000;
    required fn cuGraphGetNodes(hGraph: CUgraph, nodes: *mut CUgraphNode, numNodes: *mut usize) -> CUresult = 10000;
    /// A node's kind (a `CU_GRAPH_NODE_TYPE_*` value).
    required fn cuGraphNodeGetType(hNode: CUgraphNode, type_: *mut CUgraphNodeType) -> CUresult = 10000;
    /// In-place update of an executable graph: the 12.0 ABI, else (CUDA
    /// 10.2-11.x drivers, e.g. 470) the 10020 ABI, which reports the result
    /// through two out-parameters. Call it through
    /// [`DriverFns::graph_exec_update`], which hides the difference.
    optional fn cuGraphExecUpdate(hGraphExec: CUgraphExec, hGraph: CUgraph, resultInfo: *mut CUgraphExecUpdateResultInfo) -> CUresult = 12000 as V12000
        else V10020(hGraphExec: CUgraphExec, hGraph: CUgraph, hErrorNode_out: *mut CUgraphNode, updateResult_out: *mut CUgraphExecUpdateResult) -> CUresult = 10020;
    /// A graph's edges: the 12.3 ABI with their annotations (tells
    /// programmatic edges from full ones), else the 10000 ABI without
    /// `edgeData`. Call it through [`DriverFns::graph_edges`].
    optional fn cuGraphGetEdges(hGraph: CUgraph, from: *mut CUgraphNode, to: *mut CUgraphNode, edgeData: *mut CUgraphEdgeData, numEdges: *mut usize) -> CUresult = 12030 as V12030
        else V10000(hGraph: CUgraph, from: *mut CUgraphNode, to: *mut CUgraphNode, numEdges: *mut usize) -> CUresult = 10000;
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
    // --- graph building --------------------------------------------------
    /// An empty graph, to add nodes to.
    required fn cuGraphCreate(phGraph: *mut CUgraph, flags: c_uint) -> CUresult = 10000;
    /// A kernel node: the 12.0 ABI (v2 parameters), else the 10000 ABI (v1
    /// parameters, driver 470). Call it through
    /// [`DriverFns::graph_add_kernel_node`].
    optional fn cuGraphAddKernelNode(phGraphNode: *mut CUgraphNode, hGraph: CUgraph, dependencies: *const CUgraphNode, numDependencies: usize, nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2) -> CUresult = 12000 as V12000
        else V10000(phGraphNode: *mut CUgraphNode, hGraph: CUgraph, dependencies: *const CUgraphNode, numDependencies: usize, nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1) -> CUresult = 10000;
    /// A memset node (one ABI since CUDA 10.0).
    required fn cuGraphAddMemsetNode(phGraphNode: *mut CUgraphNode, hGraph: CUgraph, dependencies: *const CUgraphNode, numDependencies: usize, memsetParams: *const CUDA_MEMSET_NODE_PARAMS_v1, ctx: CUcontext) -> CUresult = 10000;
    /// A child-graph node (a copy of `childGraph`).
    required fn cuGraphAddChildGraphNode(phGraphNode: *mut CUgraphNode, hGraph: CUgraph, dependencies: *const CUgraphNode, numDependencies: usize, childGraph: CUgraph) -> CUresult = 10000;
    /// Edges: the 12.3 ABI with their annotations (programmatic edges),
    /// else the 10000 ABI (full edges only). Call it through
    /// [`DriverFns::graph_add_dependencies`].
    optional fn cuGraphAddDependencies(hGraph: CUgraph, from: *const CUgraphNode, to: *const CUgraphNode, edgeData: *const CUgraphEdgeData, numDependencies: usize) -> CUresult = 12030 as V12030
        else V10000(hGraph: CUgraph, from: *const CUgraphNode, to: *const CUgraphNode, numDependencies: usize) -> CUresult = 10000;
    /// A kernel node's parameters in an executable graph: the 12.0 ABI (v2),
    /// else the 10010 ABI (v1). Call it through
    /// [`DriverFns::graph_exec_kernel_node_set_params`].
    optional fn cuGraphExecKernelNodeSetParams(hGraphExec: CUgraphExec, hNode: CUgraphNode, nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2) -> CUresult = 12000 as V12000
        else V10010(hGraphExec: CUgraphExec, hNode: CUgraphNode, nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1) -> CUresult = 10010;
    /// A memset node's parameters in an executable graph (CUDA 10.2+).
    required fn cuGraphExecMemsetNodeSetParams(hGraphExec: CUgraphExec, hNode: CUgraphNode, memsetParams: *const CUDA_MEMSET_NODE_PARAMS_v1, ctx: CUcontext) -> CUresult = 10020;
    /// A child graph node's work in an executable graph, from another graph
    /// of the same topology and node insertion order (CUDA 11.1+).
    optional fn cuGraphExecChildGraphNodeSetParams(hGraphExec: CUgraphExec, hNode: CUgraphNode, childGraph: CUgraph) -> CUresult = 11010;
    /// Capture a stream into an existing graph, after given nodes (CUDA 12.3+).
    optional fn cuStreamBeginCaptureToGraph(hStream: CUstream, hGraph: CUgraph, dependencies: *const CUgraphNode, dependencyData: *const CUgraphEdgeData, numDependencies: usize, mode: CUstreamCaptureMode) -> CUresult = 12030;
    /// A kernel node's parameters in a graph that is not instantiated: the
    /// 12.0 ABI (v2), else the 10000 ABI (v1). Call it through
    /// [`DriverFns::graph_kernel_node_set_params`].
    optional fn cuGraphKernelNodeSetParams(hNode: CUgraphNode, nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2) -> CUresult = 12000 as V12000
        else V10000(hNode: CUgraphNode, nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1) -> CUresult = 10000;
    /// A node of any type from its parameters (conditional nodes among
    /// them): the 12.3 ABI with edge data for its dependencies, else the
    /// 12.2 ABI (full edges only). Call it through
    /// [`DriverFns::graph_add_node`].
    optional fn cuGraphAddNode(phGraphNode: *mut CUgraphNode, hGraph: CUgraph, dependencies: *const CUgraphNode, dependencyData: *const CUgraphEdgeData, numDependencies: usize, nodeParams: *mut CUgraphNodeParams) -> CUresult = 12030 as V12030
        else V12020(phGraphNode: *mut CUgraphNode, hGraph: CUgraph, dependencies: *const CUgraphNode, numDependencies: usize, nodeParams: *mut CUgraphNodeParams) -> CUresult = 12020;
    /// The condition of conditional nodes of a graph, with its default
    /// value (CUDA 12.3+).
    optional fn cuGraphConditionalHandleCreate(pHandle_out: *mut CUgraphConditionalHandle, hGraph: CUgraph, ctx: CUcontext, defaultLaunchValue: c_uint, flags: c_uint) -> CUresult = 12030;
}

/// `cuGetProcAddress` itself, found with `dlsym`. The unversioned export has
/// the CUDA 11.3 ABI; drivers of CUDA 12.0 and later also export
/// `cuGetProcAddress_v2` with the 12.0 ABI, which the loader prefers.
pub mod proc_address {
    use crate::decl::FunctionDecl;
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

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn never_called() {}

    /// The requests `resolve_with` makes for a driver of `driver_version`
    /// that has every symbol, and the table it fills.
    fn requests_at(driver_version: i32) -> (DriverFns, Vec<(&'static str, i32)>) {
        let mut log = Vec::new();
        // SAFETY: no entry of the table is ever called here; the address is
        // a real function, so every pointer is non-null.
        let fns = unsafe {
            DriverFns::resolve_with(driver_version, |name, version| {
                log.push((name, version));
                Ok(never_called as *mut c_void)
            })
        };
        match fns {
            Ok(f) => (f, log),
            Err(e) => panic!("driver {driver_version}: {e}"),
        }
    }

    #[test]
    fn no_request_above_the_driver_version() {
        for dv in [11040, 11060, 11080, 12000, 12020, 12030, 12040, 12090, 13000] {
            let (fns, log) = requests_at(dv);
            assert!(log.iter().all(|&(_, v)| v <= dv), "driver {dv}: {log:?}");
            // One request per entry at most: the newest ABI the driver reaches.
            for f in FUNCTIONS {
                let asked: Vec<i32> = log.iter().filter(|(n, _)| *n == f.name).map(|&(_, v)| v).collect();
                let want = abi_versions(f.name).into_iter().find(|&v| v <= dv);
                assert_eq!(asked, want.into_iter().collect::<Vec<_>>(), "driver {dv}: {}", f.name);
                assert_eq!(fns.resolved_abi(f.name), want, "driver {dv}: {}", f.name);
            }
        }
    }

    #[test]
    fn older_abis_where_the_driver_predates_the_newest() {
        let (fns, _) = requests_at(11040);
        assert!(matches!(fns.cuGraphExecUpdate, Some(abi::cuGraphExecUpdate::Abi::V10020(_))));
        assert!(matches!(fns.cuGraphGetEdges, Some(abi::cuGraphGetEdges::Abi::V10000(_))));
        assert!(fns.cuLaunchKernelEx.is_none() && fns.cuFuncGetParamInfo.is_none());
        let mut missing: Vec<&str> = fns.missing_optional().iter().map(|d| d.name).collect();
        missing.sort_unstable();
        let mut want = [
            "cuCtxFromGreenCtx",
            "cuDevResourceGenerateDesc",
            "cuDeviceGetDevResource",
            "cuFuncGetParamInfo",
            "cuGraphAddNode",
            "cuGraphConditionalHandleCreate",
            "cuGreenCtxCreate",
            "cuGreenCtxDestroy",
            "cuGreenCtxStreamCreate",
            "cuLaunchKernelEx",
            "cuStreamBeginCaptureToGraph",
        ];
        want.sort_unstable();
        assert_eq!(missing, want);
        assert!(matches!(fns.cuGraphAddKernelNode, Some(abi::cuGraphAddKernelNode::Abi::V10000(_))));
        assert!(matches!(fns.cuGraphAddDependencies, Some(abi::cuGraphAddDependencies::Abi::V10000(_))));
        assert!(matches!(
            fns.cuGraphExecKernelNodeSetParams,
            Some(abi::cuGraphExecKernelNodeSetParams::Abi::V10010(_))
        ));
        assert!(matches!(fns.cuGraphKernelNodeSetParams, Some(abi::cuGraphKernelNodeSetParams::Abi::V10000(_))));
        assert!(!fns.has_programmatic_edges());
        let (fns, _) = requests_at(12000);
        assert!(matches!(fns.cuGraphExecUpdate, Some(abi::cuGraphExecUpdate::Abi::V12000(_))));
        assert!(matches!(fns.cuGraphGetEdges, Some(abi::cuGraphGetEdges::Abi::V10000(_))));
        assert!(!fns.has_edge_data());
        assert!(matches!(fns.cuGraphAddKernelNode, Some(abi::cuGraphAddKernelNode::Abi::V12000(_))));
        assert!(matches!(
            fns.cuGraphExecKernelNodeSetParams,
            Some(abi::cuGraphExecKernelNodeSetParams::Abi::V12000(_))
        ));
        assert!(!fns.has_programmatic_edges() && fns.cuStreamBeginCaptureToGraph.is_none());
        assert!(matches!(fns.cuGraphKernelNodeSetParams, Some(abi::cuGraphKernelNodeSetParams::Abi::V12000(_))));
        assert!(fns.cuGraphAddNode.is_none() && fns.cuGraphConditionalHandleCreate.is_none());
        let (fns, _) = requests_at(12020);
        assert!(matches!(fns.cuGraphAddNode, Some(abi::cuGraphAddNode::Abi::V12020(_))));
        assert!(fns.cuGraphConditionalHandleCreate.is_none());
        let (fns, _) = requests_at(12030);
        assert!(fns.has_edge_data());
        assert!(fns.has_programmatic_edges() && fns.cuStreamBeginCaptureToGraph.is_some());
        assert!(matches!(fns.cuGraphAddNode, Some(abi::cuGraphAddNode::Abi::V12030(_))));
        assert!(fns.cuGraphConditionalHandleCreate.is_some());
        assert_eq!(fns.resolved_abi("cuFuncGetParamInfo"), None);
    }

    #[test]
    fn older_abis_are_listed_newest_first_below_the_newest() {
        for old in OLDER_ABIS {
            let newest = FUNCTIONS.iter().find(|f| f.name == old.name).expect("an entry of the table");
            assert!(!newest.required, "{}: only optional entries have older ABIs", old.name);
            assert!(old.abi_version < newest.abi_version, "{}", old.name);
        }
        assert_eq!(abi_versions("cuGraphExecUpdate"), [12000, 10020]);
        assert_eq!(abi_versions("cuGraphGetEdges"), [12030, 10000]);
        assert_eq!(abi_versions("cuGraphAddKernelNode"), [12000, 10000]);
        assert_eq!(abi_versions("cuGraphAddDependencies"), [12030, 10000]);
        assert_eq!(abi_versions("cuGraphExecKernelNodeSetParams"), [12000, 10010]);
        assert_eq!(abi_versions("cuGraphKernelNodeSetParams"), [12000, 10000]);
        assert_eq!(abi_versions("cuGraphAddNode"), [12030, 12020]);
    }

    #[test]
    fn the_loader_reads_the_version_at_the_tables_abi() {
        let d = FUNCTIONS.iter().find(|f| f.name == "cuDriverGetVersion").expect("listed");
        assert_eq!(d.abi_version, 2020, "loader.rs asks cuDriverGetVersion at 2020 before the table");
    }
}
