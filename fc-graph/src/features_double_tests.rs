//! [`features_of`](super::features_of) and the library's own in-place
//! update step (`graph::update_in_place`) against cuda-sys's driver double
//! (`cuda-sys/tests/support/double.rs`), which follows NVIDIA's
//! `cuGetProcAddress` versioning rules, at driver versions 11040, 12000,
//! 12030 and 13000. CPU only; runs in CI.

use std::ffi::c_void;

use cuda_sys::{CUgraph, CUgraphExec, CU_GRAPH_EXEC_UPDATE_ERROR, CU_GRAPH_EXEC_UPDATE_SUCCESS};

use super::{features_of, Feature};
use crate::graph::update_in_place;
use crate::test_double::{double, load as load_double};

fn feature<'a>(all: &'a [Feature], entry: &str) -> &'a Feature {
    all.iter().find(|f| f.entry_point == entry).unwrap_or_else(|| panic!("{entry} listed"))
}

/// (entry point, resolved ABI, feature present) per driver version: what
/// NVIDIA's history gives, written out.
fn reference(driver_version: i32) -> [(&'static str, Option<i32>, bool); 5] {
    match driver_version {
        11040 => [
            ("cuLaunchKernelEx", None, false),
            ("cuFuncGetParamInfo", None, false),
            ("cuGraphExecUpdate", Some(10020), true),
            ("cuGraphGetEdges", Some(10000), false),
            ("cuGraphDebugDotPrint", Some(11030), true),
        ],
        12000 => [
            ("cuLaunchKernelEx", Some(11060), true),
            ("cuFuncGetParamInfo", None, false),
            ("cuGraphExecUpdate", Some(12000), true),
            ("cuGraphGetEdges", Some(10000), false),
            ("cuGraphDebugDotPrint", Some(11030), true),
        ],
        12030 => [
            ("cuLaunchKernelEx", Some(11060), true),
            ("cuFuncGetParamInfo", None, false),
            ("cuGraphExecUpdate", Some(12000), true),
            ("cuGraphGetEdges", Some(12030), true),
            ("cuGraphDebugDotPrint", Some(11030), true),
        ],
        _ => [
            ("cuLaunchKernelEx", Some(11060), true),
            ("cuFuncGetParamInfo", Some(12040), true),
            ("cuGraphExecUpdate", Some(12000), true),
            ("cuGraphGetEdges", Some(12030), true),
            ("cuGraphDebugDotPrint", Some(11030), true),
        ],
    }
}

fn check(driver_version: i32) {
    let (driver, probe, dir) = load_double("double", driver_version);
    let all = features_of(&driver);
    for (entry, abi, present) in reference(driver_version) {
        let f = feature(&all, entry);
        assert_eq!((f.resolved_abi, f.present), (abi, present), "driver {driver_version}: {f:?}");
    }
    // Every feature is present exactly when its ABI is resolved at one
    // that delivers it.
    for f in &all {
        assert_eq!(f.present, f.resolved_abi.is_some_and(|a| a >= f.needs_abi), "{f:?}");
        assert_eq!(f.resolved_abi, driver.resolved_abi(f.entry_point), "{f:?}");
    }

    // The library's own update step, through the ABI this driver has.
    let abi = if driver_version >= 12000 { 12000 } else { 10020 };
    let (exec, graph) = (0xA1usize as CUgraphExec, 0xA2usize as CUgraph);
    probe.set_update(CU_GRAPH_EXEC_UPDATE_SUCCESS, std::ptr::null_mut(), std::ptr::null_mut());
    probe.reset_last_called();
    // SAFETY: the double only records the handles.
    let updated = unsafe { update_in_place(&driver, exec, graph) };
    assert!(matches!(updated, Ok(true)), "driver {driver_version}: {updated:?}");
    assert_eq!(probe.last_called(), Some(("cuGraphExecUpdate".to_string(), abi)));
    assert_eq!(probe.last_update_args(), (exec as *mut c_void, graph as *mut c_void));

    // A refused update (through the 10020 ABI's out-parameters on 11.4) is
    // "not updated", not an error: the caller instantiates anew.
    probe.set_update(CU_GRAPH_EXEC_UPDATE_ERROR, double::NODES[1] as *mut c_void, std::ptr::null_mut());
    probe.reset_last_called();
    // SAFETY: as above.
    let refused = unsafe { update_in_place(&driver, exec, graph) };
    assert!(matches!(refused, Ok(false)), "driver {driver_version}: {refused:?}");
    assert_eq!(probe.last_called(), Some(("cuGraphExecUpdate".to_string(), abi)));
    assert_eq!(probe.over_requests(), 0);
    drop((driver, probe));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library")]
fn features_and_update_on_driver_11040() {
    check(11040);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library")]
fn features_and_update_on_driver_12000() {
    check(12000);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library")]
fn features_and_update_on_driver_12030() {
    check(12030);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library")]
fn features_and_update_on_driver_13000() {
    check(13000);
}
