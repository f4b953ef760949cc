//! The node-level driver steps (`add_kernel_node`, `update_kernel_node`,
//! `add_edges`, the PDL edge rule) against the driver double
//! (`fc_driver_double`) at driver versions 11040, 12000, 12030 and 13000:
//! each runs through the ABI that driver has (the double's nodes hold the
//! launch as given; an updated executable, replayed, computes the new
//! launch), and an update that changes nothing makes no driver call. CPU
//! only; runs in CI.

use cuda_sys::*;

use super::{add_edges, add_kernel_node, programmatic_edge, update_kernel_node, LaunchSpec};
use crate::launch_config::LaunchConfig;
use crate::test_double::{load as load_double, node_of};

/// Elements each launch computes: 16 blocks of 256 threads.
const N: usize = 4096;

/// `func(a, b, out, N)` over 16 blocks of 256 threads.
fn spec(func: CUfunction, [a, b, out]: [CUdeviceptr; 3], pdl: bool) -> LaunchSpec {
    let cfg = LaunchConfig { grid: (16, 1, 1), block: (256, 1, 1), shared_mem_bytes: 0 };
    LaunchSpec::of_words(func, cfg, &[a, b, out, N as u64], pdl)
}

fn check(driver_version: i32) {
    let rig = load_double("builder", driver_version);
    let (driver, probe) = (&rig.driver, &rig.probe);
    let (add_abi, set_abi) = if driver_version >= 12000 { (12000, 12000) } else { (10000, 10010) };
    let (x, y, z) = (rig.buffer(&[1.0; N]), rig.buffer(&[2.0; N]), rig.buffer(&[5.0; N]));
    let (out0, out1) = (rig.alloc(N), rig.alloc(N));
    let add = |a, out| spec(rig.add, [a, y, out], false);
    let graph = rig.graph();

    // Adding: through the ABI the driver has, the launch read in its layout.
    probe.reset_last_called();
    // SAFETY: a live graph of the rig's context; a launch of its kernel
    // with the kernel's four arguments.
    let n0 = unsafe { add_kernel_node(driver, graph, &[], &add(x, out0)) }.expect("added");
    assert_eq!(probe.last_called(), Some(("cuGraphAddKernelNode".to_string(), add_abi)));
    let (kernel, func, ctx) = (u64::from(CU_GRAPH_NODE_TYPE_KERNEL), rig.add as u64, rig.ctx as u64);
    assert_eq!(node_of(probe, n0), [kernel, func, 16, 256, 0, x, 0, ctx], "driver {driver_version}");
    // SAFETY: as above.
    let n1 = unsafe { add_kernel_node(driver, graph, &[n0], &add(x, out1)) }.expect("added");
    assert_eq!(node_of(probe, n1)[6], 1, "one full dependency");

    // Updating: equal parameters make no call; changed ones one call.
    let exec = rig.instantiate(graph);
    probe.reset_last_called();
    // SAFETY: a live executable of the graph `n1` is a node of; launches as above.
    let same = unsafe { update_kernel_node(driver, exec, n1, &add(x, out1), &add(x, out1)) };
    assert!(matches!(same, Ok(false)), "{same:?}");
    assert_eq!(probe.last_called(), None, "driver {driver_version}: no call for an unchanged node");
    // SAFETY: as above.
    let changed = unsafe { update_kernel_node(driver, exec, n1, &add(x, out1), &add(z, out1)) };
    assert!(matches!(changed, Ok(true)), "{changed:?}");
    assert_eq!(probe.last_called(), Some(("cuGraphExecKernelNodeSetParams".to_string(), set_abi)));
    rig.launch(exec);
    assert_eq!(rig.download(out1, N), [7.0; N], "driver {driver_version}: n1 adds z now, over every element");
    assert_eq!(rig.download(out0, N), [3.0; N], "n0 as it was");
    probe.reset_last_called();
    let with_pdl = spec(rig.add, [z, y, out1], true);
    // SAFETY: as above.
    let pdl_flip = unsafe { update_kernel_node(driver, exec, n1, &add(x, out1), &with_pdl) };
    assert!(pdl_flip.is_err(), "PDL cannot change in an update");
    assert_eq!(probe.last_called(), None, "refused without a call");

    // Edges: programmatic ones exist only from 12.3, one call for all.
    let programmatic = driver.has_programmatic_edges();
    assert_eq!(programmatic, driver_version >= 12030);
    let edge = programmatic_edge(true, true, programmatic);
    assert_eq!(edge.is_some(), programmatic, "PDL becomes a programmatic edge only where the driver has them");
    if let Some(e) = edge {
        // SAFETY: as above.
        let root = || unsafe { add_kernel_node(driver, graph, &[], &add(x, out0)) }.expect("added");
        let (n2, n3) = (root(), root());
        let calls = probe.calls("cuGraphAddDependencies", 12030);
        probe.reset_last_called();
        // SAFETY: a live graph and its nodes.
        unsafe { add_edges(driver, graph, &[n1, n2], &[n2, n3], &[e, e]) }.expect("edges added");
        assert_eq!(probe.last_called(), Some(("cuGraphAddDependencies".to_string(), 12030)));
        assert_eq!(probe.calls("cuGraphAddDependencies", 12030) - calls, 1, "one call for both");
        let port_type = (CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8);
        let edges: Vec<_> =
            rig.edges(graph).iter().map(|e| (e.from, e.to, e.data.map(|d| (d.from_port, d.type_)))).collect();
        assert_eq!(
            edges,
            [(n0, n1, Some((0, 0))), (n1, n2, Some(port_type)), (n2, n3, Some(port_type))],
            "two programmatic edges from the programmatic port"
        );
    }
    probe.reset_last_called();
    // SAFETY: no edges: no call.
    unsafe { add_edges(driver, graph, &[], &[], &[]) }.expect("nothing to add");
    assert_eq!(probe.last_called(), None);
    assert_eq!(probe.over_requests(), 0);
    assert!(probe.misuses().is_empty(), "driver {driver_version}: misuses of the double: {:?}", probe.misuses());
}

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double")]
fn graph_building_on_driver_11040() {
    check(11040);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double")]
fn graph_building_on_driver_12000() {
    check(12000);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double")]
fn graph_building_on_driver_12030() {
    check(12030);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double")]
fn graph_building_on_driver_13000() {
    check(13000);
}
