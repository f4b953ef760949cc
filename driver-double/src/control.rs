//! What the loadable libraries' exports do: `cuGetProcAddress` (and, in
//! the CUDA 12+ build, `cuGetProcAddress_v2`) on the ABI table, and the
//! `fc_double_*` control functions that tests use through
//! [`crate::probe::Probe`] (or from C): the configuration, the ABI table
//! by index (calls are counted by symbol and version: [`calls()`] maps
//! the index), the requests, the misuse reports, live objects, kernel
//! runs, injected faults, graph nodes. The exports themselves are defined
//! by the macros of `exports.rs`, above this module.

use std::ffi::{c_char, c_int, c_void};

use cuda_sys::*;

use crate::{abi, calls, report, state};

/// `cuGetProcAddress` (the 11.3 ABI).
///
/// # Safety
/// `symbol` is NULL or NUL-terminated; `pfn` is NULL or writable.
pub unsafe fn get_proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    status: *mut c_int,
) -> CUresult {
    let driver = state::with(|s| s.cfg.version);
    if !pfn.is_null() {
        // SAFETY: writable (the caller's promise).
        unsafe { *pfn = std::ptr::null_mut() };
    }
    // SAFETY: the caller's promise on `symbol`.
    let (res, address, st) = unsafe { abi::lookup(symbol, driver, version) };
    if pfn.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: as above.
    unsafe { *pfn = address.cast_mut() };
    if !status.is_null() {
        // SAFETY: writable (the caller's promise).
        unsafe { *status = st };
    }
    res
}

/// Checks that this build's export table fits the configured version: the
/// CUDA 11 build serves drivers before 12.0 only, the CUDA 12 build 12.0
/// on. A mismatch is a misuse (the loader would take the wrong path).
pub fn check_build(has_v2: bool) {
    let v = state::with(|s| s.cfg.version);
    if has_v2 != (v >= 12000) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            report::misuse(
                "cuGetProcAddress",
                &format!(
                    "driver version {v} configured in the {} build: use libfc_cuda_double{}.so",
                    if has_v2 { "CUDA 12+" } else { "CUDA 11" },
                    if v >= 12000 { "" } else { "_11" }
                ),
            )
        });
    }
}

/// Copies `text` into `buf` (`len` bytes, NUL-terminated); its length.
fn copy_out(text: &str, buf: *mut c_char, len: usize) -> c_int {
    if !buf.is_null() && len > 0 {
        let n = text.len().min(len - 1);
        // SAFETY: `buf` holds `len` bytes (the caller's promise).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, n);
            *buf.add(n) = 0;
        }
    }
    text.len() as c_int
}

/// `fc_double_configure`: the version and device count, before any call.
pub fn configure(version: c_int, devices: c_int) -> c_int {
    if state::configure(version, devices.max(0) as usize) {
        0
    } else {
        -1
    }
}

/// `fc_double_identify`: which ABI the function at `address` is (its name
/// stays valid for the process's life).
///
/// # Safety
/// `name` and `version` are writable.
pub unsafe fn identify(address: *const c_void, name: *mut *const c_char, version: *mut c_int) -> c_int {
    match abi::identify(address) {
        Some(a) => {
            // SAFETY: writable (the caller's promise).
            unsafe {
                *name = leak_c(a.name);
                *version = a.version;
            }
            1
        }
        None => 0,
    }
}

/// A NUL-terminated copy of a static name, made once per name.
fn leak_c(name: &'static str) -> *const c_char {
    static NAMES: std::sync::Mutex<Vec<(&'static str, std::ffi::CString)>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = names.iter().find(|(n, _)| *n == name) {
        return c.as_ptr();
    }
    let c = std::ffi::CString::new(name).unwrap_or_default();
    let p = c.as_ptr();
    names.push((name, c));
    p
}

/// `fc_double_abi`: the ABI at table index `i`.
///
/// # Safety
/// `name` and `version` are writable.
pub unsafe fn abi_at(i: c_int, name: *mut *const c_char, version: *mut c_int) -> c_int {
    match usize::try_from(i).ok().and_then(|i| abi::table().get(i)) {
        Some(a) => {
            // SAFETY: writable (the caller's promise).
            unsafe {
                *name = leak_c(a.name);
                *version = a.version;
            }
            1
        }
        None => 0,
    }
}

/// `fc_double_calls`: calls of the ABI at table index `i`.
pub fn calls(i: c_int) -> c_int {
    match usize::try_from(i).ok().and_then(|i| abi::table().get(i)) {
        Some(a) => calls::count(a.name, a.version) as c_int,
        None => 0,
    }
}

/// `fc_double_last_called`: the table index of the ABI called last (-1:
/// none since the last reset).
pub fn last_called() -> c_int {
    calls::last().and_then(|(name, version)| abi::index_of(name, version)).map(|i| i as c_int).unwrap_or(-1)
}

/// `fc_double_request`: request `i` (symbol into `buf`, version returned;
/// -1 past the last).
pub fn request(i: c_int, buf: *mut c_char, len: usize) -> c_int {
    match usize::try_from(i).ok().and_then(|i| calls::requests().get(i).cloned()) {
        Some((name, v)) => {
            copy_out(&name, buf, len);
            v
        }
        None => -1,
    }
}

/// `fc_double_misuse`: report `i` into `buf`; its length, -1 past the last.
pub fn misuse_at(i: c_int, buf: *mut c_char, len: usize) -> c_int {
    match usize::try_from(i).ok().and_then(report::get) {
        Some(m) => copy_out(&m, buf, len),
        None => -1,
    }
}

/// `fc_double_live`: live objects of a kind ("contexts" created and
/// green, "streams" not legacy, "events", "modules", "graphs" of the
/// client's, "execs", "allocations", "links").
pub fn live(kind: &str) -> i64 {
    state::with(|s| match kind {
        "contexts" => s.ctxs.handles_where(|c| c.kind != crate::objects::context::CtxKind::Primary).len() as i64,
        "streams" => s.streams.handles_where(|x| !x.legacy).len() as i64,
        "events" => s.events.len() as i64,
        "modules" => s.modules.len() as i64,
        "graphs" => s.graphs.handles_where(|g| g.owner == crate::objects::graph::Owner::Client).len() as i64,
        "execs" => s.execs.len() as i64,
        "allocations" => s.memory.count() as i64,
        "links" => s.links.len() as i64,
        "primary_retains" => s.devices.iter().map(|d| i64::from(d.primary_refs)).sum(),
        _ => -1,
    })
}

/// `fc_double_kernel_runs`: how often kernel `name` ran.
pub fn kernel_runs(name: &str) -> i64 {
    state::with(|s| s.kernel_runs.get(name).copied().unwrap_or(0) as i64)
}

/// `fc_double_set_faults`: replaces the injected faults (the same syntax as
/// `FC_DOUBLE_FAULTS`); -1 when it does not parse.
pub fn set_faults(spec: &str) -> c_int {
    match crate::config::Faults::parse(spec) {
        Ok(f) => state::with(|s| {
            s.cfg.faults = f;
            s.calls.clear();
            0
        }),
        Err(e) => {
            report::misuse("fc_double_set_faults", &e.0);
            -1
        }
    }
}

/// `fc_double_node`: what the double holds for a graph node: `[type,
/// function, gridDimX, blockDimX, sharedMemBytes, first 8 parameter
/// bytes, dependencies, context]` (kernel fields 0 for other types).
pub fn node(n: u64, out: &mut [u64; 8]) -> c_int {
    state::with(|s| {
        let Ok(node) = s.nodes.get(n) else { return 0 };
        *out = [0; 8];
        out[0] = u64::from(node.kind.type_value());
        if let crate::objects::graph::NodeKind::Work(crate::objects::work::Work::Kernel(l)) = &node.kind {
            out[1] = l.func;
            out[2] = u64::from(l.grid[0]);
            out[3] = u64::from(l.block[0]);
            out[4] = u64::from(l.shared);
            let mut w = [0u8; 8];
            let k = l.params.len().min(8);
            w[..k].copy_from_slice(&l.params[..k]);
            out[5] = u64::from_le_bytes(w);
            out[7] = l.ctx;
        }
        if let Ok(g) = s.graphs.get(node.graph) {
            out[6] = g.edges.iter().filter(|e| e.to == n).count() as u64;
        }
        1
    })
}
