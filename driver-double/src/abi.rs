//! The double's ABI table: every (symbol, ABI version) of NVIDIA's history
//! (`cuda-sys/tests/abi_history.txt`, checked against `cudaTypedefs.h` by
//! cuda-sys's audit) is its own function, so a test can tell which ABI it
//! was handed and which one ran (the counts, by symbol and version, are in
//! [`crate::calls`]); and `cuGetProcAddress`'s versioning contract, for a
//! driver of version `D` asked for `symbol` at version `V`:
//!
//! - `V > D` is counted ([`crate::calls::over_requests`]: a loader must
//!   never ask it); a CUDA 13 driver (`D >= 13000`) refuses it with
//!   `CUDA_ERROR_INVALID_VALUE`, older ones go on with `min(V, D)`;
//! - a symbol the driver does not have (unknown, or first ABI newer than
//!   `D`) is not found (`CUDA_ERROR_NOT_FOUND`, status `SYMBOL_NOT_FOUND`);
//! - below the symbol's first ABI: not found (`VERSION_NOT_SUFFICIENT`);
//! - else the symbol's newest ABI at or below `min(V, D)`.
//!
//! The ABIs fc-graph's table uses are implemented ([`implementation`]);
//! every other one is a stub whose call is a misuse (the loader resolved
//! an ABI it must not use). The table sits above the entry points it
//! names ([`crate::api`]); nothing below imports it.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

use cuda_sys::*;

use crate::{api, calls, report};

/// The ABI history the double serves: `symbol versions...`, oldest first.
pub const HISTORY: &str = include_str!("../../cuda-sys/tests/abi_history.txt");

/// The parsed history, or why a line does not parse.
pub fn history() -> Result<Vec<(String, Vec<i32>)>, String> {
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for (i, line) in HISTORY.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let name = words.next().ok_or_else(|| format!("line {}: empty", i + 1))?;
        let versions: Vec<i32> = words
            .map(|w| w.parse().map_err(|_| format!("line {}: bad version {w:?}", i + 1)))
            .collect::<Result<_, _>>()?;
        if versions.is_empty() || versions.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("line {}: versions must be ascending and non-empty: {line}", i + 1));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("line {}: {name} listed twice", i + 1));
        }
        out.push((name.to_string(), versions));
    }
    Ok(out)
}

/// ABIs beyond fc-graph's table that foreign clients use (the C suite's
/// own driver calls), served like the history's.
pub const EXTRA: &[(&str, i32)] = &[("cuMemsetD32Async", 3020)];

/// The implemented function of one ABI, if the double implements it.
pub fn implementation(name: &str, version: i32) -> Option<*const c_void> {
    Some(match (name, version) {
        ("cuInit", 2000) => api::init::cuInit_v2000 as *const c_void,
        ("cuDriverGetVersion", 2020) => api::init::cuDriverGetVersion_v2020 as *const c_void,
        ("cuGetErrorName", 6000) => api::init::cuGetErrorName_v6000 as *const c_void,
        ("cuGetErrorString", 6000) => api::init::cuGetErrorString_v6000 as *const c_void,
        ("cuDeviceGetCount", 2000) => api::device::cuDeviceGetCount_v2000 as *const c_void,
        ("cuDeviceGet", 2000) => api::device::cuDeviceGet_v2000 as *const c_void,
        ("cuDeviceGetName", 2000) => api::device::cuDeviceGetName_v2000 as *const c_void,
        ("cuDeviceGetAttribute", 2000) => api::device::cuDeviceGetAttribute_v2000 as *const c_void,
        ("cuDeviceTotalMem", 3020) => api::device::cuDeviceTotalMem_v3020 as *const c_void,
        ("cuDeviceGetUuid", 11040) => api::device::cuDeviceGetUuid_v11040 as *const c_void,
        ("cuDevicePrimaryCtxRetain", 7000) => api::context::cuDevicePrimaryCtxRetain_v7000 as *const c_void,
        ("cuDevicePrimaryCtxRelease", 11000) => api::context::cuDevicePrimaryCtxRelease_v11000 as *const c_void,
        ("cuCtxPushCurrent", 4000) => api::context::cuCtxPushCurrent_v4000 as *const c_void,
        ("cuCtxPopCurrent", 4000) => api::context::cuCtxPopCurrent_v4000 as *const c_void,
        ("cuCtxGetCurrent", 4000) => api::context::cuCtxGetCurrent_v4000 as *const c_void,
        ("cuCtxSetCurrent", 4000) => api::context::cuCtxSetCurrent_v4000 as *const c_void,
        ("cuCtxCreate", 3020) => api::context::cuCtxCreate_v3020 as *const c_void,
        ("cuCtxDestroy", 4000) => api::context::cuCtxDestroy_v4000 as *const c_void,
        ("cuCtxSynchronize", 2000) => api::context::cuCtxSynchronize_v2000 as *const c_void,
        ("cuStreamCreate", 2000) => api::stream::cuStreamCreate_v2000 as *const c_void,
        ("cuStreamDestroy", 4000) => api::stream::cuStreamDestroy_v4000 as *const c_void,
        ("cuStreamSynchronize", 2000) => api::stream::cuStreamSynchronize_v2000 as *const c_void,
        ("cuStreamQuery", 2000) => api::stream::cuStreamQuery_v2000 as *const c_void,
        ("cuStreamWaitEvent", 3020) => api::stream::cuStreamWaitEvent_v3020 as *const c_void,
        ("cuStreamBeginCapture", 10010) => api::capture::cuStreamBeginCapture_v10010 as *const c_void,
        ("cuStreamBeginCaptureToGraph", 12030) => api::capture::cuStreamBeginCaptureToGraph_v12030 as *const c_void,
        ("cuStreamEndCapture", 10000) => api::capture::cuStreamEndCapture_v10000 as *const c_void,
        ("cuStreamIsCapturing", 10000) => api::capture::cuStreamIsCapturing_v10000 as *const c_void,
        ("cuStreamGetCaptureInfo", 11030) => api::capture::cuStreamGetCaptureInfo_v11030 as *const c_void,
        ("cuThreadExchangeStreamCaptureMode", 10010) => {
            api::capture::cuThreadExchangeStreamCaptureMode_v10010 as *const c_void
        }
        ("cuMemAlloc", 3020) => api::memory::cuMemAlloc_v3020 as *const c_void,
        ("cuMemFree", 3020) => api::memory::cuMemFree_v3020 as *const c_void,
        ("cuMemGetInfo", 3020) => api::memory::cuMemGetInfo_v3020 as *const c_void,
        ("cuMemcpyHtoDAsync", 3020) => api::memory::cuMemcpyHtoDAsync_v3020 as *const c_void,
        ("cuMemcpyDtoHAsync", 3020) => api::memory::cuMemcpyDtoHAsync_v3020 as *const c_void,
        ("cuMemcpyDtoDAsync", 3020) => api::memory::cuMemcpyDtoDAsync_v3020 as *const c_void,
        ("cuPointerGetAttribute", 4000) => api::memory::cuPointerGetAttribute_v4000 as *const c_void,
        ("cuMemsetD8Async", 3020) => api::memory::cuMemsetD8Async_v3020 as *const c_void,
        ("cuModuleLoadDataEx", 2010) => api::module::cuModuleLoadDataEx_v2010 as *const c_void,
        ("cuModuleUnload", 2000) => api::module::cuModuleUnload_v2000 as *const c_void,
        ("cuModuleGetFunction", 2000) => api::module::cuModuleGetFunction_v2000 as *const c_void,
        ("cuFuncGetAttribute", 2020) => api::module::cuFuncGetAttribute_v2020 as *const c_void,
        ("cuFuncGetParamInfo", 12040) => api::module::cuFuncGetParamInfo_v12040 as *const c_void,
        ("cuLaunchKernel", 4000) => api::launch::cuLaunchKernel_v4000 as *const c_void,
        ("cuLaunchKernelEx", 11060) => api::launch::cuLaunchKernelEx_v11060 as *const c_void,
        ("cuLinkCreate", 6050) => api::link::cuLinkCreate_v6050 as *const c_void,
        ("cuLinkAddData", 6050) => api::link::cuLinkAddData_v6050 as *const c_void,
        ("cuLinkAddFile", 6050) => api::link::cuLinkAddFile_v6050 as *const c_void,
        ("cuLinkComplete", 5050) => api::link::cuLinkComplete_v5050 as *const c_void,
        ("cuLinkDestroy", 5050) => api::link::cuLinkDestroy_v5050 as *const c_void,
        ("cuGraphInstantiateWithFlags", 11040) => api::graph::cuGraphInstantiateWithFlags_v11040 as *const c_void,
        ("cuGraphLaunch", 10000) => api::exec::cuGraphLaunch_v10000 as *const c_void,
        ("cuGraphExecDestroy", 10000) => api::exec::cuGraphExecDestroy_v10000 as *const c_void,
        ("cuGraphDestroy", 10000) => api::graph::cuGraphDestroy_v10000 as *const c_void,
        ("cuGraphGetNodes", 10000) => api::graph::cuGraphGetNodes_v10000 as *const c_void,
        ("cuGraphNodeGetType", 10000) => api::graph::cuGraphNodeGetType_v10000 as *const c_void,
        ("cuGraphExecUpdate", 10020) => api::exec::cuGraphExecUpdate_v10020 as *const c_void,
        ("cuGraphExecUpdate", 12000) => api::exec::cuGraphExecUpdate_v12000 as *const c_void,
        ("cuGraphGetEdges", 10000) => api::graph::cuGraphGetEdges_v10000 as *const c_void,
        ("cuGraphGetEdges", 12030) => api::graph::cuGraphGetEdges_v12030 as *const c_void,
        ("cuGraphDebugDotPrint", 11030) => api::graph::cuGraphDebugDotPrint_v11030 as *const c_void,
        ("cuEventCreate", 2000) => api::stream::cuEventCreate_v2000 as *const c_void,
        ("cuEventRecord", 2000) => api::stream::cuEventRecord_v2000 as *const c_void,
        ("cuEventSynchronize", 2000) => api::stream::cuEventSynchronize_v2000 as *const c_void,
        ("cuEventElapsedTime", 2000) => api::stream::cuEventElapsedTime_v2000 as *const c_void,
        ("cuEventDestroy", 4000) => api::stream::cuEventDestroy_v4000 as *const c_void,
        ("cuDeviceGetDevResource", 12040) => api::green::cuDeviceGetDevResource_v12040 as *const c_void,
        ("cuDevResourceGenerateDesc", 12040) => api::green::cuDevResourceGenerateDesc_v12040 as *const c_void,
        ("cuGreenCtxCreate", 12040) => api::green::cuGreenCtxCreate_v12040 as *const c_void,
        ("cuGreenCtxDestroy", 12040) => api::green::cuGreenCtxDestroy_v12040 as *const c_void,
        ("cuCtxFromGreenCtx", 12040) => api::green::cuCtxFromGreenCtx_v12040 as *const c_void,
        ("cuGreenCtxStreamCreate", 12050) => api::green::cuGreenCtxStreamCreate_v12050 as *const c_void,
        ("cuGraphCreate", 10000) => api::graph::cuGraphCreate_v10000 as *const c_void,
        ("cuGraphAddKernelNode", 10000) => api::graph::cuGraphAddKernelNode_v10000 as *const c_void,
        ("cuGraphAddKernelNode", 12000) => api::graph::cuGraphAddKernelNode_v12000 as *const c_void,
        ("cuGraphAddMemsetNode", 10000) => api::graph::cuGraphAddMemsetNode_v10000 as *const c_void,
        ("cuGraphAddChildGraphNode", 10000) => api::graph::cuGraphAddChildGraphNode_v10000 as *const c_void,
        ("cuGraphAddDependencies", 10000) => api::graph::cuGraphAddDependencies_v10000 as *const c_void,
        ("cuGraphAddDependencies", 12030) => api::graph::cuGraphAddDependencies_v12030 as *const c_void,
        ("cuGraphExecKernelNodeSetParams", 10010) => api::exec::cuGraphExecKernelNodeSetParams_v10010 as *const c_void,
        ("cuGraphExecKernelNodeSetParams", 12000) => api::exec::cuGraphExecKernelNodeSetParams_v12000 as *const c_void,
        ("cuGraphExecMemsetNodeSetParams", 10020) => api::exec::cuGraphExecMemsetNodeSetParams_v10020 as *const c_void,
        ("cuGraphExecChildGraphNodeSetParams", 11010) => {
            api::exec::cuGraphExecChildGraphNodeSetParams_v11010 as *const c_void
        }
        ("cuGraphKernelNodeSetParams", 10000) => api::graph::cuGraphKernelNodeSetParams_v10000 as *const c_void,
        ("cuGraphKernelNodeSetParams", 12000) => api::graph::cuGraphKernelNodeSetParams_v12000 as *const c_void,
        ("cuGraphAddNode", 12020) => api::graph::cuGraphAddNode_v12020 as *const c_void,
        ("cuGraphAddNode", 12030) => api::graph::cuGraphAddNode_v12030 as *const c_void,
        ("cuGraphConditionalHandleCreate", 12030) => api::graph::cuGraphConditionalHandleCreate_v12030 as *const c_void,
        ("cuMemsetD32Async", 3020) => api::memory::cuMemsetD32Async_v3020 as *const c_void,
        _ => return None,
    })
}

/// One ABI the double serves.
#[derive(Debug, Clone, Copy)]
pub struct Abi {
    /// The symbol.
    pub name: &'static str,
    /// The ABI version.
    pub version: i32,
    /// Its function.
    pub address: *const c_void,
    /// Whether it is implemented (else a misuse stub).
    pub implemented: bool,
}

// SAFETY: function addresses and static strings, immutable.
unsafe impl Send for Abi {}
// SAFETY: as above.
unsafe impl Sync for Abi {}

/// How many misuse stubs there are (more than the history's pairs).
const STUBS: usize = 192;

/// A stub of an ABI the double does not implement: its call is a misuse.
extern "C" fn stub<const I: usize>() -> CUresult {
    let (name, version) = table().get(I).map(|a| (a.name, a.version)).unwrap_or(("?", 0));
    report::misuse(
        name,
        &format!(
            "ABI {version} of {name} was called: fc-graph's table never uses it (the loader resolved the wrong ABI)"
        ),
    );
    CUDA_ERROR_NOT_SUPPORTED
}

macro_rules! stubs {
    ($($i:literal)*) => { [$(stub::<$i> as extern "C" fn() -> CUresult),*] };
}

/// Every ABI, in history order (symbol by symbol, oldest first).
pub fn table() -> &'static [Abi] {
    static TABLE: OnceLock<Vec<Abi>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let stubs: [extern "C" fn() -> CUresult; STUBS] = stubs!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127 128 129 130 131 132 133 134 135 136 137 138 139 140 141 142 143 144 145 146 147 148 149 150 151 152 153 154 155 156 157 158 159 160 161 162 163 164 165 166 167 168 169 170 171 172 173 174 175 176 177 178 179 180 181 182 183 184 185 186 187 188 189 190 191);
        let mut hist = history().unwrap_or_default();
        hist.extend(EXTRA.iter().map(|(n, v)| (n.to_string(), vec![*v])));
        let mut out = Vec::new();
        for (name, versions) in hist {
            let name: &'static str = Box::leak(name.into_boxed_str());
            for v in versions {
                let i = out.len();
                let (address, implemented) = match implementation(name, v) {
                    Some(a) => (a, true),
                    None => (stubs.get(i).map(|s| *s as *const c_void).unwrap_or(std::ptr::null()), false),
                };
                out.push(Abi { name, version: v, address, implemented });
            }
        }
        out
    })
}

fn index() -> &'static HashMap<(&'static str, i32), usize> {
    static INDEX: OnceLock<HashMap<(&'static str, i32), usize>> = OnceLock::new();
    INDEX.get_or_init(|| table().iter().enumerate().map(|(i, a)| ((a.name, a.version), i)).collect())
}

/// The table index of `name` at ABI `version`.
pub fn index_of(name: &str, version: i32) -> Option<usize> {
    index().get(&(name, version)).copied()
}

/// `CU_GET_PROC_ADDRESS_*` statuses.
const SUCCESS: i32 = 0;
const SYMBOL_NOT_FOUND: i32 = 1;
const VERSION_NOT_SUFFICIENT: i32 = 2;

/// `cuGetProcAddress`'s contract (see the module docs): the status, the
/// address, and the query result.
///
/// # Safety
/// `symbol` is NULL or NUL-terminated.
pub unsafe fn lookup(symbol: *const c_char, driver: i32, version: i32) -> (CUresult, *const c_void, i32) {
    let name = if symbol.is_null() {
        None
    } else {
        // SAFETY: NUL-terminated (the caller's promise).
        Some(unsafe { CStr::from_ptr(symbol) }.to_string_lossy().into_owned())
    };
    calls::requested(name.clone().unwrap_or_default(), version, name.is_some() && version > driver);
    let Some(name) = name else { return (CUDA_ERROR_INVALID_VALUE, std::ptr::null(), SYMBOL_NOT_FOUND) };
    if version > driver && driver >= 13000 {
        return (CUDA_ERROR_INVALID_VALUE, std::ptr::null(), SYMBOL_NOT_FOUND);
    }
    let cap = version.min(driver);
    let abis: Vec<&Abi> = table().iter().filter(|a| a.name == name).collect();
    if abis.iter().all(|a| a.version > driver) {
        return (CUDA_ERROR_NOT_FOUND, std::ptr::null(), SYMBOL_NOT_FOUND);
    }
    match abis.iter().filter(|a| a.version <= cap).max_by_key(|a| a.version) {
        Some(a) => (CUDA_SUCCESS, a.address, SUCCESS),
        None => (CUDA_ERROR_NOT_FOUND, std::ptr::null(), VERSION_NOT_SUFFICIENT),
    }
}

/// Which ABI the function at `address` is.
pub fn identify(address: *const c_void) -> Option<Abi> {
    table().iter().find(|a| a.address == address).copied()
}
