//! The node-level driver steps (`add_kernel_node`, `update_kernel_node`,
//! `add_edges`, the PDL edge rule) against cuda-sys's driver double
//! (`cuda-sys/tests/support/double.rs`) at driver versions 11040, 12000,
//! 12030 and 13000: each runs through the ABI that driver has, and an
//! update that changes nothing makes no driver call. CPU only; runs in CI.

use cuda_sys::*;

use super::{add_edges, add_kernel_node, programmatic_edge, update_kernel_node, LaunchSpec};
use crate::launch_config::LaunchConfig;
use crate::test_double::load as load_double;

fn spec(a: u64, pdl: bool) -> LaunchSpec {
    let cfg = LaunchConfig { grid: (16, 1, 1), block: (256, 1, 1), shared_mem_bytes: 0 };
    LaunchSpec::of_words(0xF10usize as CUfunction, cfg, &[a, 0xB0, 0xC0, 4096], pdl)
}

fn check(driver_version: i32) {
    let (driver, probe, dir) = load_double("builder-double", driver_version);
    let (add_abi, set_abi) = if driver_version >= 12000 { (12000, 12000) } else { (10000, 10010) };
    let graph = 0xA3usize as CUgraph;

    // Adding: through the ABI the driver has, the launch read in its layout.
    probe.reset_last_called();
    // SAFETY: the double only reads the parameters.
    let n0 = unsafe { add_kernel_node(&driver, graph, &[], &spec(0xA0, false)) }.expect("added");
    assert_eq!(probe.last_called(), Some(("cuGraphAddKernelNode".to_string(), add_abi)));
    let a = probe.last_args();
    assert_eq!(a[0], n0 as u64);
    assert_eq!(&a[1..7], &[0, 0xF10, 16, 256, 0, 0xA0], "driver {driver_version}");
    // SAFETY: as above.
    let n1 = unsafe { add_kernel_node(&driver, graph, &[n0], &spec(0xA1, false)) }.expect("added");
    assert_eq!(probe.last_args()[1], 1, "one full dependency");

    // Updating: equal parameters make no call; changed ones one call.
    let exec = 0xA4usize as CUgraphExec;
    probe.reset_last_called();
    // SAFETY: the double only reads the parameters.
    let same = unsafe { update_kernel_node(&driver, exec, n1, &spec(0xA1, false), &spec(0xA1, false)) };
    assert!(matches!(same, Ok(false)), "{same:?}");
    assert_eq!(probe.last_called(), None, "driver {driver_version}: no call for an unchanged node");
    // SAFETY: as above.
    let changed = unsafe { update_kernel_node(&driver, exec, n1, &spec(0xA1, false), &spec(0xD1, false)) };
    assert!(matches!(changed, Ok(true)), "{changed:?}");
    assert_eq!(probe.last_called(), Some(("cuGraphExecKernelNodeSetParams".to_string(), set_abi)));
    assert_eq!(&probe.last_args()[..7], &[exec as u64, n1 as u64, 0xF10, 16, 256, 0, 0xD1]);
    probe.reset_last_called();
    // SAFETY: as above.
    let pdl_flip = unsafe { update_kernel_node(&driver, exec, n1, &spec(0xA1, false), &spec(0xD1, true)) };
    assert!(pdl_flip.is_err(), "PDL cannot change in an update");
    assert_eq!(probe.last_called(), None, "refused without a call");

    // Edges: programmatic ones exist only from 12.3, one call for all.
    let programmatic = driver.has_programmatic_edges();
    assert_eq!(programmatic, driver_version >= 12030);
    let edge = programmatic_edge(true, true, programmatic);
    assert_eq!(edge.is_some(), programmatic, "PDL becomes a programmatic edge only where the driver has them");
    if let Some(e) = edge {
        probe.reset_last_called();
        // SAFETY: the double only reads the arrays.
        unsafe { add_edges(&driver, graph, &[n0, n1], &[n1, n0], &[e, e]) }.expect("edges added");
        assert_eq!(probe.last_called(), Some(("cuGraphAddDependencies".to_string(), 12030)));
        assert_eq!(&probe.last_args()[..7], &[2, n0 as u64, n1 as u64, 1, 1, 1, 1]);
    }
    probe.reset_last_called();
    // SAFETY: no edges: no call.
    unsafe { add_edges(&driver, graph, &[], &[], &[]) }.expect("nothing to add");
    assert_eq!(probe.last_called(), None);
    assert_eq!(probe.over_requests(), 0);
    drop((driver, probe));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library")]
fn graph_building_on_driver_11040() {
    check(11040);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library")]
fn graph_building_on_driver_12000() {
    check(12000);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library")]
fn graph_building_on_driver_12030() {
    check(12030);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library")]
fn graph_building_on_driver_13000() {
    check(13000);
}
