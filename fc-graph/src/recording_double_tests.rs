//! Whole recordings through the safe API against cuda-sys's driver double
//! (`cuda-sys/tests/support/double.rs`), at driver versions 11040 (the
//! engine's driver 470 has the 11.4 ABI), 12000, 12030 and 13000: each
//! builds its graph node by node through the ABI that driver has, and
//! updates it node by node; a re-recording that changes nothing makes no
//! driver call at all. CPU only; runs in CI.
//!
//! The driver is loaded once per process, so each version runs in a child
//! process of this test binary ([`child`], with `FC_CUDA_LIBRARY` naming
//! that version's double).

use std::process::Command;

use crate::context::{CaptureMode, Context};
use crate::graph::UpdateReport;
use crate::test_double::double;
use crate::BinaryOp;

/// The child's environment variable: the driver version of the double that
/// `FC_CUDA_LIBRARY` names.
const CHILD_VERSION: &str = "FC_DOUBLE_RECORDING_VERSION";

const K: usize = 26;
const N: usize = 4096;

#[test]
#[cfg_attr(miri, ignore = "FFI: builds and loads a C library, runs a child process")]
fn recordings_on_the_double_at_each_driver_version() {
    let exe = std::env::current_exe().expect("the test binary");
    for version in [11040, 12000, 12030, 13000] {
        let dir = std::env::temp_dir().join(format!("fc-graph-recording-double-{}-{version}", std::process::id()));
        let path = double::build(&dir, &format!("fcrecording_{version}"), version).unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(&exe)
            .args(["--exact", "recording::double_tests::child", "--ignored", "--nocapture", "--test-threads=1"])
            .env("FC_CUDA_LIBRARY", &path)
            .env(CHILD_VERSION, version.to_string())
            .output()
            .expect("the child runs");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.status.success(), "driver {version}:\n{text}");
        assert!(text.contains("test result: ok. 1 passed"), "driver {version}: the child ran no test:\n{text}");
        assert!(text.contains(&format!("double {version}: checked")), "driver {version}:\n{text}");
    }
}

/// Re-records the chain (node `i` with its operands swapped where
/// `swap(i)`: other parameters, the same shape) into `g`.
fn rerecord(
    ctx: &Context,
    bufs: &[crate::DeviceBuffer; 3],
    g: &mut crate::Graph,
    swap: impl Fn(usize) -> bool,
) -> UpdateReport {
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).expect("begun");
    assert!(cap.builds(), "recordings build by default");
    chain(ctx, bufs, K, swap);
    cap.end_update(g).expect("updated")
}

fn chain(ctx: &Context, [x, y, z]: &[crate::DeviceBuffer; 3], k: usize, swap: impl Fn(usize) -> bool) {
    for i in 0..k {
        let r = match (i % 2 == 0, swap(i)) {
            (true, false) => ctx.binary(BinaryOp::Add, x, y, z, N),
            (true, true) => ctx.binary(BinaryOp::Add, y, x, z, N),
            (false, false) => ctx.binary(BinaryOp::Mul, z, y, x, N),
            (false, true) => ctx.binary(BinaryOp::Mul, y, z, x, N),
        };
        r.expect("recorded");
    }
}

#[test]
#[ignore = "run in a child process by recordings_on_the_double_at_each_driver_version"]
fn child() {
    let version: i32 = std::env::var(CHILD_VERSION).expect("run by the parent test").parse().expect("a version");
    let path = std::env::var("FC_CUDA_LIBRARY").expect("the double's path");
    let probe = double::Probe::open(std::path::Path::new(&path)).expect("the double opens");
    let ctx = Context::new(0).expect("a context on the double");
    let bufs = [0, 1, 2].map(|_| ctx.alloc(N * 4).expect("allocated"));
    let pdl = version >= 12030;
    assert_eq!(ctx.pdl_enabled(), pdl, "PDL (a 9.0 device) from 12.3 on");

    // Record: built node by node (the ABIs of each node call: `nodes`'s
    // double tests).
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).expect("begun");
    chain(&ctx, &bufs, K, |_| false);
    let mut g = cap.end().expect("instantiated");
    assert_eq!(g.node_count().expect("counted"), K);

    // Nothing changed: no driver call at all, from begin to end.
    probe.reset_last_called();
    let none = rerecord(&ctx, &bufs, &mut g, |_| false);
    assert_eq!((none.updated, none.instantiated, none.node_calls), (1, 0, 0), "{none:?}");
    assert_eq!(probe.last_called(), None, "driver {version}: a re-recording that changes nothing calls nothing");

    // One node changed: one call, through the ABI this driver has.
    let set_abi = if version >= 12000 { 12000 } else { 10010 };
    probe.reset_last_called();
    let one = rerecord(&ctx, &bufs, &mut g, |i| i == K / 2);
    assert_eq!((one.updated, one.instantiated, one.node_calls), (1, 0, 1), "{one:?}");
    assert_eq!(probe.last_called(), Some(("cuGraphExecKernelNodeSetParams".to_string(), set_abi)));
    let args = probe.last_args();
    assert_eq!(args[6], bufs[1].as_raw(), "node K/2 (a Mul) now reads y first");

    // Back again, every node changed: K calls; then the same again: none.
    let back = rerecord(&ctx, &bufs, &mut g, |i| i != K / 2);
    assert_eq!((back.updated, back.node_calls), (1, K), "{back:?}");
    probe.reset_last_called();
    let same = rerecord(&ctx, &bufs, &mut g, |i| i != K / 2);
    assert_eq!(same.node_calls, 0, "{same:?}");
    assert_eq!(probe.last_called(), None);

    // A long chain: its nodes through the ABI this driver has; with PDL
    // its programmatic edges in batches of 64, the rest at the end.
    let (add_abi, long) = (if version >= 12000 { 12000 } else { 10000 }, 200);
    let nodes_before = probe.calls("cuGraphAddKernelNode", add_abi);
    let edges_before = probe.calls("cuGraphAddDependencies", 12030);
    let cap = ctx.begin_capture(CaptureMode::ThreadLocal).expect("begun");
    chain(&ctx, &bufs, long, |_| false);
    let g_long = cap.end().expect("instantiated");
    assert_eq!(probe.calls("cuGraphAddKernelNode", add_abi) - nodes_before, long as i32);
    let batches = probe.calls("cuGraphAddDependencies", 12030) - edges_before;
    if pdl {
        assert_eq!(batches, 4, "199 programmatic edges: 64 + 64 + 64 + 7");
        // The last building call was the last batch (instantiating records
        // no arguments).
        let last = probe.last_args();
        assert_eq!((last[0], last[3], last[5]), (7, 1, 1), "7 edges, with edge data, programmatic");
    } else {
        assert_eq!(batches, 0, "no programmatic edges without PDL");
    }
    assert_eq!(probe.calls("cuGraphAddDependencies", 10000), 0, "full edges go with their node");
    drop(g_long);
    assert_eq!(probe.over_requests(), 0, "no ABI asked above the driver's version");
    println!("double {version}: checked");
}
