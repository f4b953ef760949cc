//! Whole recordings through the safe API against the driver double
//! (`fc_driver_double`), at driver versions 11040 (the engine's driver 470
//! has the 11.4 ABI), 12000, 12030 and 13000: each builds its graph node by
//! node through the ABI that driver has, and updates it node by node; a
//! re-recording that changes nothing makes no driver call at all; each
//! graph, replayed, computes what the host computes for its recording.
//! CPU only; runs in CI.
//!
//! The driver is loaded once per process, so each version runs in a child
//! process of this test binary ([`child`], with `FC_CUDA_LIBRARY` naming
//! the double's library for that version and `FC_DOUBLE_DRIVER_VERSION`
//! configuring it).

use std::process::Command;

use fc_driver_double::{library, Build, Probe};

use crate::context::{CaptureMode, Context};
use crate::graph::UpdateReport;
use crate::BinaryOp;

/// The child's environment variable: the driver version of the double that
/// `FC_CUDA_LIBRARY` names.
const CHILD_VERSION: &str = "FC_DOUBLE_RECORDING_VERSION";

const K: usize = 26;
const N: usize = 4096;

#[test]
#[cfg_attr(miri, ignore = "FFI: loads the driver double, runs a child process")]
fn recordings_on_the_double_at_each_driver_version() {
    let exe = std::env::current_exe().expect("the test binary");
    for version in [11040, 12000, 12030, 13000] {
        let path = library(Build::for_version(version)).unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(&exe)
            .args(["--exact", "recording::double_tests::child", "--ignored", "--nocapture", "--test-threads=1"])
            .env("FC_CUDA_LIBRARY", &path)
            .env("FC_DOUBLE_DRIVER_VERSION", version.to_string())
            .env("FC_DOUBLE_DEVICES", "1")
            .env(CHILD_VERSION, version.to_string())
            .output()
            .expect("the child runs");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "driver {version} (a misuse of the double exits with 86):\n{text}");
        assert!(text.contains("test result: ok. 1 passed"), "driver {version}: the child ran no test:\n{text}");
        assert!(text.contains(&format!("double {version}: checked")), "driver {version}:\n{text}");
    }
}

/// Re-records the chain (node `i` with other operands where `swap(i)`:
/// other parameters, the same shape) into `g`.
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

/// `k` ops alternating `z = x + y` and `x = z * y`; where `swap(i)`, op
/// `i` reads `y` twice instead (`z = y + y`, `x = y * y`).
fn chain(ctx: &Context, [x, y, z]: &[crate::DeviceBuffer; 3], k: usize, swap: impl Fn(usize) -> bool) {
    for i in 0..k {
        let r = match (i % 2 == 0, swap(i)) {
            (true, false) => ctx.binary(BinaryOp::Add, x, y, z, N),
            (true, true) => ctx.binary(BinaryOp::Add, y, y, z, N),
            (false, false) => ctx.binary(BinaryOp::Mul, z, y, x, N),
            (false, true) => ctx.binary(BinaryOp::Mul, y, y, x, N),
        };
        r.expect("recorded");
    }
}

/// The inputs of every replay: `x`, `y`, `z`.
fn inputs() -> [Vec<f32>; 3] {
    [
        (0..N).map(|i| (i % 7) as f32 + 0.5).collect(),
        (0..N).map(|i| 1.0 + (i % 4) as f32 * 0.25).collect(),
        vec![0.0; N],
    ]
}

/// What [`chain`] computes on the host: `x` and `z` after it.
fn on_host(k: usize, swap: impl Fn(usize) -> bool) -> [Vec<f32>; 2] {
    let [mut x, y, mut z] = inputs();
    for i in 0..k {
        for j in 0..N {
            match (i % 2 == 0, swap(i)) {
                (true, false) => z[j] = x[j] + y[j],
                (true, true) => z[j] = y[j] + y[j],
                (false, false) => x[j] = z[j] * y[j],
                (false, true) => x[j] = y[j] * y[j],
            }
        }
    }
    [x, z]
}

/// Replays `g` from [`inputs`] and compares `x` and `z` with the host's.
fn replays_as_host(
    g: &crate::Graph,
    bufs: &[crate::DeviceBuffer; 3],
    k: usize,
    swap: impl Fn(usize) -> bool,
    what: &str,
) {
    for (b, v) in bufs.iter().zip(inputs()) {
        b.upload(&v).expect("uploaded");
    }
    g.launch().expect("launched");
    let [want_x, want_z] = on_host(k, swap);
    let (mut x, mut z) = (vec![0f32; N], vec![0f32; N]);
    bufs[0].download(&mut x).expect("downloaded");
    bufs[2].download(&mut z).expect("downloaded");
    assert!(x == want_x && z == want_z, "{what}: the replay differs from the host's chain");
}

#[test]
#[ignore = "run in a child process by recordings_on_the_double_at_each_driver_version"]
fn child() {
    let version: i32 = std::env::var(CHILD_VERSION).expect("run by the parent test").parse().expect("a version");
    let path = std::env::var("FC_CUDA_LIBRARY").expect("the double's path");
    let probe = Probe::open(std::path::Path::new(&path)).expect("the double opens");
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
    replays_as_host(&g, &bufs, K, |_| false, "recorded");

    // Nothing changed: no driver call at all, from begin to end.
    probe.reset_last_called();
    let none = rerecord(&ctx, &bufs, &mut g, |_| false);
    assert_eq!((none.updated, none.instantiated, none.node_calls), (1, 0, 0), "{none:?}");
    assert_eq!(probe.last_called(), None, "driver {version}: a re-recording that changes nothing calls nothing");
    replays_as_host(&g, &bufs, K, |_| false, "re-recorded unchanged");

    // One node changed: one call, through the ABI this driver has; node
    // K/2 (a Mul) now reads y first, which the replay computes.
    let set_abi = if version >= 12000 { 12000 } else { 10010 };
    probe.reset_last_called();
    let one = rerecord(&ctx, &bufs, &mut g, |i| i == K / 2);
    assert_eq!((one.updated, one.instantiated, one.node_calls), (1, 0, 1), "{one:?}");
    assert_eq!(probe.last_called(), Some(("cuGraphExecKernelNodeSetParams".to_string(), set_abi)));
    replays_as_host(&g, &bufs, K, |i| i == K / 2, "node K/2 changed");

    // Back again, every node changed: K calls; then the same again: none.
    let back = rerecord(&ctx, &bufs, &mut g, |i| i != K / 2);
    assert_eq!((back.updated, back.node_calls), (1, K), "{back:?}");
    replays_as_host(&g, &bufs, K, |i| i != K / 2, "every node changed");
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
    let d = crate::driver::driver().expect("the loaded double");
    let graphs = g_long.raw_graphs();
    assert_eq!(graphs.len(), 1, "one segment");
    // SAFETY: the live source graph of `g_long`'s segment.
    let edges = match unsafe { cuda_sys::result::graph::get_edges(d, graphs[0]) } {
        Some(Ok(e)) => e,
        other => panic!("cuGraphGetEdges: {other:?}"),
    };
    assert_eq!(edges.len(), long - 1, "a chain");
    let programmatic = edges
        .iter()
        .filter(|e| e.data.is_some_and(|d| d.type_ == cuda_sys::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8))
        .count();
    if pdl {
        assert_eq!(batches, 4, "199 programmatic edges: 64 + 64 + 64 + 7");
        assert_eq!(programmatic, long - 1, "every edge of the chain programmatic");
    } else {
        assert_eq!(batches, 0, "no programmatic edges without PDL");
        assert_eq!(programmatic, 0);
    }
    assert_eq!(probe.calls("cuGraphAddDependencies", 10000), 0, "full edges go with their node");
    replays_as_host(&g_long, &bufs, long, |_| false, "the long chain");
    drop(g_long);
    assert_eq!(probe.over_requests(), 0, "no ABI asked above the driver's version");
    assert!(probe.misuses().is_empty(), "driver {version}: misuses of the double: {:?}", probe.misuses());
    println!("double {version}: checked");
}
