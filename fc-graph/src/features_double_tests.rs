//! [`features_of`](super::features_of) and the library's own in-place
//! update step (`graph::update_in_place`) against the driver double
//! (`fc_driver_double`), which follows NVIDIA's `cuGetProcAddress`
//! versioning rules, at driver versions 11040, 12000, 12030 and 13000: the
//! update of a real executable, replayed. CPU only; runs in CI.

use super::{features_of, Feature};
use crate::graph::update_in_place;
use crate::test_double::load as load_double;

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

/// Elements of the buffers (one block of 256 threads).
const N: usize = 256;

fn check(driver_version: i32) {
    let rig = load_double("features", driver_version);
    let (driver, probe) = (&rig.driver, &rig.probe);
    let all = features_of(driver);
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

    // The library's own update step, through the ABI this driver has: an
    // executable of one kernel updated from a graph of the same shape whose
    // kernel reads another operand; replayed, it computes that.
    let abi = if driver_version >= 12000 { 12000 } else { 10020 };
    let (x, y, out) = (rig.buffer(&[1.0; N]), rig.buffer(&[2.0; N]), rig.alloc(N));
    let one_kernel = |a| {
        let g = rig.graph();
        rig.add_kernel(g, &[], rig.add, [a, y, out], N as u32);
        g
    };
    let exec = rig.instantiate(one_kernel(x));
    let graph = one_kernel(y);
    probe.reset_last_called();
    // SAFETY: a live executable and graph of the rig's context, current
    // on this thread.
    let updated = unsafe { update_in_place(driver, exec, graph) };
    assert!(matches!(updated, Ok(true)), "driver {driver_version}: {updated:?}");
    assert_eq!(probe.last_called(), Some(("cuGraphExecUpdate".to_string(), abi)));
    rig.launch(exec);
    assert_eq!(rig.download(out, N), [4.0; N], "the executable runs the new graph's launch: y + y");

    // A refused update (a graph of two kernels: another topology; through
    // the 10020 ABI's out-parameters on 11.4) is "not updated", not an
    // error: the caller instantiates anew. The executable is as it was.
    let two = rig.graph();
    let first = rig.add_kernel(two, &[], rig.add, [x, y, out], N as u32);
    rig.add_kernel(two, &[first], rig.add, [x, y, out], N as u32);
    probe.reset_last_called();
    // SAFETY: as above.
    let refused = unsafe { update_in_place(driver, exec, two) };
    assert!(matches!(refused, Ok(false)), "driver {driver_version}: {refused:?}");
    assert_eq!(probe.last_called(), Some(("cuGraphExecUpdate".to_string(), abi)));
    rig.launch(exec);
    assert_eq!(rig.download(out, N), [4.0; N], "a refused update leaves the executable as it was");
    assert_eq!(probe.over_requests(), 0);
    assert!(probe.misuses().is_empty(), "driver {driver_version}: misuses of the double: {:?}", probe.misuses());
}

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double")]
fn features_and_update_on_driver_11040() {
    check(11040);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double")]
fn features_and_update_on_driver_12000() {
    check(12000);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double")]
fn features_and_update_on_driver_12030() {
    check(12030);
}

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double")]
fn features_and_update_on_driver_13000() {
    check(13000);
}
