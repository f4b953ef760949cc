//! The loader against the driver double (`fc_driver_double`, the simulated
//! driver of `driver-double/`, following NVIDIA's `cuGetProcAddress`
//! versioning rules with the ABI history of `tests/abi_history.txt`), at
//! driver versions 11040 (CUDA 11.4, driver 470), 12000, 12020 (the first
//! ABI of `cuGraphAddNode`), 12030 and 13000, with objects the double made
//! (a context, a stream, memory, fc-graph's element-wise kernels, graphs)
//! and the results read back from its memory:
//!
//! - every resolved entry is the double's function of the ABI its type
//!   expects (the mismatch count is printed and must be 0);
//! - optional entries appear exactly where that driver has them, at the ABI
//!   NVIDIA's history gives;
//! - no request ever exceeds the driver's version (the double counts them);
//! - an in-place update runs through the ABI that driver has (10020 before
//!   12.0): from a graph of the same topology it succeeds (a replay computes
//!   the new graph's launches), from one of another topology it is refused,
//!   decoded into the 12.0 form with the error edge's nodes (the one it
//!   comes from through the 12000 ABI only); the edge query through its
//!   ABI, with edge data only at 12030;
//! - graph building (kernel nodes, their updates in executable graphs,
//!   edges) through the ABI that driver has, the v2 kernel parameters
//!   converted to v1 before 12.0 (the double's nodes hold the launch as
//!   given; a replay computes an executable's updated node), programmatic
//!   edges only from 12.3; kernel nodes of graphs not instantiated set the
//!   same way; nodes of any type (conditional ones, with their condition
//!   handles and body graphs, replayed) from 12.2, edge data for their
//!   dependencies only from 12.3; node types;
//! - the JIT linker (create, add data and files, complete, destroy) at its
//!   6050/5050 ABIs on every supported driver, as required entries: PTX
//!   from memory and from a file linked into an image that loads and runs.
//!
//! Each test ends with no misuse reported by the double (one it provokes on
//! purpose it takes back and checks). Runs in CI (plain `cargo test`): the
//! double's libraries are dev-dependencies, built next to this test.

#![cfg(target_os = "linux")]

#[path = "support/rig.rs"]
mod rig;

use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};

use cuda_sys::audit::abi_versions;
use cuda_sys::functions::FUNCTIONS;
use cuda_sys::*;
use fc_driver_double::{fresh_copy, Probe};
use rig::{launch, node_of, ok, Args, Rig};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda-sys-driver-double")
}

/// The ABI history the double serves: `symbol -> versions`, oldest first.
fn history() -> BTreeMap<String, Vec<i32>> {
    match fc_driver_double::abi::history() {
        Ok(h) => h.into_iter().collect(),
        Err(e) => panic!("tests/abi_history.txt: {e}"),
    }
}

/// A copy of the double at `version` that is opened, configured and never
/// loaded as a driver: its `cuGetProcAddress` is asked directly.
fn contract_probe(version: i32) -> Probe {
    let (path, probe) = fresh_copy(&dir(), "fcdouble_contract", version, 1).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(path);
    probe
}

/// The ABI NVIDIA's contract gives each table entry on a driver of
/// `driver_version` when it is requested the loader's way: the newest ABI
/// of the table's list at or below the driver's version, if the driver has
/// the symbol at all (its first ABI at or below its version).
fn expected_abi(name: &str, driver_version: i32, history: &BTreeMap<String, Vec<i32>>) -> Option<i32> {
    let first = *history.get(name)?.first()?;
    if first > driver_version {
        return None;
    }
    abi_versions(name).into_iter().find(|&v| v <= driver_version)
}

/// What NVIDIA's history says each optional entry is at on these drivers
/// (`None`: absent). Written out, not computed, as the reference.
fn optional_reference(driver_version: i32) -> &'static [(&'static str, Option<i32>)] {
    match driver_version {
        11040 => &[
            ("cuLaunchKernelEx", None),
            ("cuFuncGetParamInfo", None),
            ("cuGraphExecUpdate", Some(10020)),
            ("cuGraphGetEdges", Some(10000)),
            ("cuGraphDebugDotPrint", Some(11030)),
            ("cuGraphAddKernelNode", Some(10000)),
            ("cuGraphAddDependencies", Some(10000)),
            ("cuGraphExecKernelNodeSetParams", Some(10010)),
            ("cuStreamBeginCaptureToGraph", None),
            ("cuGraphKernelNodeSetParams", Some(10000)),
            ("cuGraphAddNode", None),
            ("cuGraphConditionalHandleCreate", None),
        ],
        12000 => &[
            ("cuLaunchKernelEx", Some(11060)),
            ("cuFuncGetParamInfo", None),
            ("cuGraphExecUpdate", Some(12000)),
            ("cuGraphGetEdges", Some(10000)),
            ("cuGraphDebugDotPrint", Some(11030)),
            ("cuGraphAddKernelNode", Some(12000)),
            ("cuGraphAddDependencies", Some(10000)),
            ("cuGraphExecKernelNodeSetParams", Some(12000)),
            ("cuStreamBeginCaptureToGraph", None),
            ("cuGraphKernelNodeSetParams", Some(12000)),
            ("cuGraphAddNode", None),
            ("cuGraphConditionalHandleCreate", None),
        ],
        12020 => &[
            ("cuLaunchKernelEx", Some(11060)),
            ("cuFuncGetParamInfo", None),
            ("cuGraphExecUpdate", Some(12000)),
            ("cuGraphGetEdges", Some(10000)),
            ("cuGraphDebugDotPrint", Some(11030)),
            ("cuGraphAddKernelNode", Some(12000)),
            ("cuGraphAddDependencies", Some(10000)),
            ("cuGraphExecKernelNodeSetParams", Some(12000)),
            ("cuStreamBeginCaptureToGraph", None),
            ("cuGraphKernelNodeSetParams", Some(12000)),
            ("cuGraphAddNode", Some(12020)),
            ("cuGraphConditionalHandleCreate", None),
        ],
        12030 => &[
            ("cuLaunchKernelEx", Some(11060)),
            ("cuFuncGetParamInfo", None),
            ("cuGraphExecUpdate", Some(12000)),
            ("cuGraphGetEdges", Some(12030)),
            ("cuGraphDebugDotPrint", Some(11030)),
            ("cuGraphAddKernelNode", Some(12000)),
            ("cuGraphAddDependencies", Some(12030)),
            ("cuGraphExecKernelNodeSetParams", Some(12000)),
            ("cuStreamBeginCaptureToGraph", Some(12030)),
            ("cuGraphKernelNodeSetParams", Some(12000)),
            ("cuGraphAddNode", Some(12030)),
            ("cuGraphConditionalHandleCreate", Some(12030)),
        ],
        13000 => &[
            ("cuLaunchKernelEx", Some(11060)),
            ("cuFuncGetParamInfo", Some(12040)),
            ("cuGraphExecUpdate", Some(12000)),
            ("cuGraphGetEdges", Some(12030)),
            ("cuGraphDebugDotPrint", Some(11030)),
            ("cuGraphAddKernelNode", Some(12000)),
            ("cuGraphAddDependencies", Some(12030)),
            ("cuGraphExecKernelNodeSetParams", Some(12000)),
            ("cuStreamBeginCaptureToGraph", Some(12030)),
            ("cuGraphKernelNodeSetParams", Some(12000)),
            ("cuGraphAddNode", Some(12030)),
            ("cuGraphConditionalHandleCreate", Some(12030)),
        ],
        _ => &[],
    }
}

/// Elements of the test buffers (one block of 256 threads).
const N: usize = 256;

fn called(name: &str, abi: i32) -> Option<(String, i32)> {
    Some((name.to_string(), abi))
}

/// The annotation of a programmatic edge (CUDA 12.3+).
const PROGRAMMATIC: CUgraphEdgeData = CUgraphEdgeData {
    from_port: CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
    to_port: 0,
    type_: CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8,
    reserved: [0; 5],
};

/// Everything the issue asks of one driver version.
fn check_driver_version(driver_version: i32) {
    let rig = Rig::new(&dir(), "fcdouble", driver_version);
    let (driver, probe) = (&rig.driver, &rig.probe);
    let history = history();
    assert_eq!(driver.driver_version(), driver_version);

    // 1. Every resolved entry is the double's function of the ABI its type
    //    expects.
    let resolved = driver.resolved();
    let mut mismatches = Vec::new();
    for r in &resolved {
        match probe.identify(r.address) {
            Some((name, abi)) if name == r.name && abi == r.abi_version => {}
            got => mismatches.push(format!("{} typed as ABI {}: got {got:?}", r.name, r.abi_version)),
        }
    }
    println!(
        "driver {driver_version}: {} entries resolved, {} ABI mismatches, {} requests, {} above the driver version",
        resolved.len(),
        mismatches.len(),
        probe.requests().len(),
        probe.over_requests()
    );
    assert!(mismatches.is_empty(), "driver {driver_version}: ABI mismatches:\n  {}", mismatches.join("\n  "));

    // 2. Each entry is where NVIDIA's history has it, at that ABI.
    for f in FUNCTIONS {
        let want = expected_abi(f.name, driver_version, &history);
        assert_eq!(driver.resolved_abi(f.name), want, "driver {driver_version}: {}", f.name);
        if f.required {
            assert!(want.is_some(), "{} is required and the history has it on {driver_version}", f.name);
        }
    }
    for &(name, want) in optional_reference(driver_version) {
        assert_eq!(driver.resolved_abi(name), want, "driver {driver_version}: {name} (reference)");
    }
    let mut missing: Vec<&str> = driver.missing_optional().iter().map(|d| d.name).collect();
    missing.sort_unstable();
    let mut want_missing: Vec<&str> = FUNCTIONS
        .iter()
        .filter(|f| !f.required && expected_abi(f.name, driver_version, &history).is_none())
        .map(|f| f.name)
        .collect();
    want_missing.sort_unstable();
    assert_eq!(missing, want_missing, "driver {driver_version}: missing optional entries");

    // 3. No request above the driver's version; entries the driver cannot
    //    have are not requested at all; each request is at an ABI the
    //    table types.
    let requests = probe.requests();
    assert_eq!(probe.over_requests(), 0, "driver {driver_version}: requests above it: {requests:?}");
    assert!(requests.iter().all(|(_, v)| *v <= driver_version), "{requests:?}");
    for (name, v) in &requests {
        assert!(abi_versions(name).contains(v), "{name} requested at {v}, not an ABI of the table");
    }
    for f in FUNCTIONS.iter().filter(|f| abi_versions(f.name).iter().all(|&v| v > driver_version)) {
        assert!(
            requests.iter().all(|(n, _)| n != f.name),
            "driver {driver_version}: {} (ABIs {:?}) was requested",
            f.name,
            abi_versions(f.name)
        );
    }
    assert_eq!(requests.first().map(|(n, v)| (n.as_str(), *v)), Some(("cuDriverGetVersion", 2020)), "first request");

    // 4. In-place update through the ABI this driver has, decoded.
    check_update(&rig);
    // 5. The edges through the ABI this driver has; edge data at 12030 only.
    check_edges(&rig);
    // 6. Graph building through the ABIs this driver has: kernel nodes and
    //    their executable-graph updates in the v2 layout at 12000+, else
    //    converted to v1; edges with data at 12030+, else full ones only.
    check_graph_building(&rig);
    // 7. Nodes of any type, conditional ones, node types, and the linker.
    check_generic_nodes(&rig);
    check_linker(&rig);
    assert_eq!(probe.over_requests(), 0, "no request after loading either");
    assert!(probe.misuses().is_empty(), "driver {driver_version}: misuses of the double: {:?}", probe.misuses());
}

/// `cuGraphExecUpdate` through the ABI this driver has: an executable of a
/// chain of three kernels updated from the same chain with another first
/// operand (its replay computes that), then refused from a graph of another
/// topology, with the nodes of the edge at fault, and left as it was.
fn check_update(rig: &Rig) {
    let (driver, probe) = (&rig.driver, &rig.probe);
    let update_abi = if rig.version >= 12000 { 12000 } else { 10020 };
    let (x, y) = (rig.buffer(&[1.0; N]), rig.buffer(&[2.0; N]));
    let outs = [rig.alloc(N), rig.alloc(N), rig.alloc(N)];
    // outs[0] = first + y, outs[i] = outs[i - 1] + y, the nodes after the
    // nodes `edges` give.
    let build = |first: CUdeviceptr, edges: [(usize, usize); 2]| -> (CUgraph, Vec<CUgraphNode>) {
        let graph = rig.graph();
        let mut nodes: Vec<CUgraphNode> = Vec::new();
        for i in 0..3 {
            let deps: Vec<CUgraphNode> = edges.iter().filter(|e| e.1 == i).map(|e| nodes[e.0]).collect();
            let a = if i == 0 { first } else { outs[i - 1] };
            nodes.push(rig.add_kernel(graph, &deps, rig.add, [a, y, outs[i]], N as u32));
        }
        (graph, nodes)
    };
    let chain = [(0, 1), (1, 2)];
    let exec = rig.instantiate(build(x, chain).0);
    rig.launch(exec);
    assert_eq!(rig.download(outs[2], N), [7.0; N], "x + 3y");

    let (same_shape, _) = build(y, chain);
    probe.reset_last_called();
    // SAFETY: a live executable and graph of the rig's context.
    let ok = unsafe { driver.graph_exec_update(exec, same_shape) }.expect("cuGraphExecUpdate resolved");
    assert_eq!(probe.last_called(), called("cuGraphExecUpdate", update_abi));
    assert_eq!(ok.abi_version, update_abi);
    assert!(ok.updated() && !ok.refused(), "{ok:?}");
    assert!(ok.info.errorNode.is_null() && ok.info.errorFromNode.is_null(), "{ok:?}");
    rig.launch(exec);
    assert_eq!(rig.download(outs[2], N), [8.0; N], "the executable runs the new graph's launches: y + 3y");

    // The third node after the first: the edge 0 -> 2 is the old graph's
    // 1 -> 2 no more.
    let (other, nodes) = build(x, [(0, 1), (0, 2)]);
    probe.reset_last_called();
    // SAFETY: as above.
    let refused = unsafe { driver.graph_exec_update(exec, other) }.expect("cuGraphExecUpdate resolved");
    assert_eq!(probe.last_called(), called("cuGraphExecUpdate", update_abi));
    assert!(refused.refused() && !refused.updated(), "{refused:?}");
    assert_eq!(refused.status, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    assert_eq!(refused.info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    assert_eq!(refused.info.errorNode, nodes[2], "the error edge's \"to\" node, from the ABI's own out-parameter");
    // The 10020 ABI does not report the node the error edge comes from.
    let want_from = if update_abi == 12000 { nodes[0] } else { std::ptr::null_mut() };
    assert_eq!(refused.info.errorFromNode, want_from);
    rig.launch(exec);
    assert_eq!(rig.download(outs[2], N), [8.0; N], "a refused update leaves the executable as it was");
}

/// `cuGraphGetEdges` through the ABI this driver has: a chain n1 -> n2 ->
/// n3 -> n4 whose middle edge is programmatic where the driver builds such
/// edges (12.3+; a full edge before), read back with its annotation at
/// 12030 only.
fn check_edges(rig: &Rig) {
    let (driver, probe) = (&rig.driver, &rig.probe);
    let edges_abi = if rig.version >= 12030 { 12030 } else { 10000 };
    assert_eq!(driver.has_edge_data(), edges_abi == 12030);
    let (x, out) = (rig.buffer(&[1.0; N]), rig.alloc(N));
    let graph = rig.graph();
    let kernel = |deps: &[CUgraphNode]| rig.add_kernel(graph, deps, rig.add, [x, x, out], N as u32);
    let n1 = kernel(&[]);
    let n2 = kernel(&[n1]);
    let n3 = if edges_abi == 12030 {
        let n3 = kernel(&[]);
        // SAFETY: a live graph and two of its nodes.
        let res = unsafe { driver.graph_add_dependencies(graph, &[n2], &[n3], Some(&[PROGRAMMATIC])) };
        ok(res.expect("cuGraphAddDependencies resolved"), "a programmatic edge");
        n3
    } else {
        kernel(&[n2])
    };
    let n4 = kernel(&[n3]);
    probe.reset_last_called();
    let edges = rig.edges(graph);
    assert_eq!(probe.last_called(), called("cuGraphGetEdges", edges_abi));
    let pairs: Vec<(CUgraphNode, CUgraphNode)> = edges.iter().map(|e| (e.from, e.to)).collect();
    assert_eq!(pairs, [(n1, n2), (n2, n3), (n3, n4)]);
    let types: Vec<Option<u8>> = edges.iter().map(|e| e.data.map(|d| d.type_)).collect();
    if edges_abi == 12030 {
        assert_eq!(types, [Some(0), Some(CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8), Some(0)]);
        assert_eq!(edges[1].data.map(|d| d.from_port), Some(CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC));
    } else {
        assert_eq!(types, [None, None, None]);
    }
}

/// Kernel nodes, their updates in an executable and edges through the ABIs
/// this driver has (see [`check_driver_version`]).
fn check_graph_building(rig: &Rig) {
    let (driver, probe) = (&rig.driver, &rig.probe);
    let v2 = rig.version >= 12000;
    let (kernel_abi, set_abi) = if v2 { (12000, 12000) } else { (10000, 10010) };
    // Seven blocks of 256 threads over as many elements, 48 bytes of
    // dynamic shared memory.
    const M: usize = 7 * 256;
    let (a, b, out) = (rig.buffer(&[1.0; M]), rig.buffer(&[2.0; M]), rig.alloc(M));
    let (func, ctx, kernel) = (rig.add as u64, rig.ctx as u64, u64::from(CU_GRAPH_NODE_TYPE_KERNEL));
    let args = Args::new(a, b, out, M as u32);
    let mut ptrs = args.pointers();
    let params = launch(rig.add, 7, 256, 48, &mut ptrs);
    let graph = rig.graph();
    probe.reset_last_called();
    // SAFETY: a live graph; `params` points at the kernel's four arguments.
    let n0 = unsafe { driver.graph_add_kernel_node(graph, &[], &params) }.expect("resolved").expect("added");
    assert_eq!(probe.last_called(), called("cuGraphAddKernelNode", kernel_abi));
    assert_eq!(node_of(probe, n0), [kernel, func, 7, 256, 48, a, 0, ctx], "the launch, read through the ABI's layout");
    // SAFETY: as above; one dependency.
    let n1 = unsafe { driver.graph_add_kernel_node(graph, &[n0], &params) }.expect("resolved").expect("added");
    assert_ne!(n0, n1);
    assert_eq!(node_of(probe, n1)[6], 1, "one dependency");
    // A kern-only launch has no v1 form: refused before any call there.
    // The v2 ABI reads it (the double hands out no CUkernel, as nothing
    // here calls cuLibrary*, so it refuses this one and reports it: taken
    // back here).
    let kern_only = CUDA_KERNEL_NODE_PARAMS_v2 { func: std::ptr::null_mut(), kern: 0x77usize as CUkernel, ..params };
    let kern_refused = |r: CUresult, call: &str| {
        assert_eq!(r, CUDA_ERROR_INVALID_VALUE, "{call}");
        assert_eq!(probe.last_called(), called(call, 12000), "kern reaches the v2 ABI");
        let m = probe.take_misuses();
        assert!(m.len() == 1 && m[0].contains(call) && m[0].contains("CUkernel"), "{m:?}");
    };
    probe.reset_last_called();
    // SAFETY: as above.
    let r = unsafe { driver.graph_add_kernel_node(graph, &[], &kern_only) }.expect("resolved");
    if v2 {
        kern_refused(r.err().unwrap_or(CUDA_SUCCESS), "cuGraphAddKernelNode");
    } else {
        assert_eq!(r, Err(CUDA_ERROR_NOT_SUPPORTED));
        assert_eq!(probe.last_called(), None, "no call through the v1 ABI");
    }

    // The executable's n1 (run last) set to add `a2`, through the ABI this
    // driver has: a replay computes it.
    let exec = rig.instantiate(graph);
    let a2 = rig.buffer(&[5.0; M]);
    let args2 = Args::new(a2, b, out, M as u32);
    let mut ptrs2 = args2.pointers();
    let params2 = launch(rig.add, 7, 256, 48, &mut ptrs2);
    probe.reset_last_called();
    // SAFETY: a live executable, a node of its graph, the kernel's arguments.
    let res = unsafe { driver.graph_exec_kernel_node_set_params(exec, n1, &params2) }.expect("resolved");
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuGraphExecKernelNodeSetParams", set_abi));
    rig.launch(exec);
    assert_eq!(rig.download(out, M), [7.0; M], "every element: a2 + b, the launch read through the ABI's layout");

    // Edges: annotated at 12030+, full ones only before.
    let with_data = rig.version >= 12030;
    assert_eq!(driver.has_programmatic_edges(), with_data);
    let dep_abi = if with_data { 12030 } else { 10000 };
    // SAFETY: as above.
    let root = || unsafe { driver.graph_add_kernel_node(graph, &[], &params) }.expect("resolved").expect("added");
    let (n2, n3) = (root(), root());
    probe.reset_last_called();
    // SAFETY: a live graph and its nodes.
    let res = unsafe { driver.graph_add_dependencies(graph, &[n1, n2], &[n2, n3], None) }.expect("resolved");
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuGraphAddDependencies", dep_abi));
    let full = if with_data { Some(0) } else { None };
    let edges: Vec<_> = rig.edges(graph).iter().map(|e| (e.from, e.to, e.data.map(|d| d.type_))).collect();
    assert_eq!(edges, [(n0, n1, full), (n1, n2, full), (n2, n3, full)], "two full edges added");
    probe.reset_last_called();
    // SAFETY: as above.
    let res = unsafe { driver.graph_add_dependencies(graph, &[n0], &[n3], Some(&[PROGRAMMATIC])) }.expect("resolved");
    if with_data {
        assert_eq!(res, CUDA_SUCCESS);
        assert_eq!(probe.last_called(), called("cuGraphAddDependencies", 12030));
        let last = rig.edges(graph).last().map(|e| (e.from, e.to, e.data.map(|d| (d.from_port, d.type_))));
        assert_eq!(
            last,
            Some((n0, n3, Some((CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8)))),
            "a programmatic edge from the programmatic port"
        );
    } else {
        assert_eq!(res, CUDA_ERROR_NOT_SUPPORTED, "no programmatic edges before 12.3");
        assert_eq!(probe.last_called(), None, "refused without a call");
    }
    probe.reset_last_called();
    // SAFETY: mismatched lengths are refused before any call.
    let res = unsafe { driver.graph_add_dependencies(graph, &[n0, n1], &[n1], None) }.expect("resolved");
    assert_eq!(res, CUDA_ERROR_INVALID_VALUE);
    assert_eq!(probe.last_called(), None, "refused without a call");

    // A kernel node of a graph not instantiated: v2 at 12000+, else v1.
    let node_set_abi = if v2 { 12000 } else { 10000 };
    let a3 = rig.buffer(&[3.0; M]);
    let args3 = Args::new(a3, b, out, M as u32);
    let mut ptrs3 = args3.pointers();
    let params3 = launch(rig.add, 7, 256, 48, &mut ptrs3);
    probe.reset_last_called();
    // SAFETY: a live node; the kernel's arguments.
    let res = unsafe { driver.graph_kernel_node_set_params(n1, &params3) }.expect("resolved");
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuGraphKernelNodeSetParams", node_set_abi));
    let set = [kernel, func, 7, 256, 48, a3, 1, ctx];
    assert_eq!(node_of(probe, n1), set, "the new launch, read through the ABI's layout");
    probe.reset_last_called();
    // SAFETY: as above.
    let res = unsafe { driver.graph_kernel_node_set_params(n1, &kern_only) }.expect("resolved");
    if v2 {
        kern_refused(res, "cuGraphKernelNodeSetParams");
        assert_eq!(node_of(probe, n1), set, "the node as it was");
    } else {
        assert_eq!(res, CUDA_ERROR_NOT_SUPPORTED);
        assert_eq!(probe.last_called(), None, "no call through the v1 ABI");
    }
}

/// `cuGraphAddNode` through the ABI the driver has (none before 12.2; the
/// 12020 ABI, full edges only, on 12.2; edge data from 12.3), conditional
/// nodes with a condition from `cuGraphConditionalHandleCreate` (12.3+),
/// their body graphs filled and replayed, and `cuGraphNodeGetType` of the
/// nodes added.
fn check_generic_nodes(rig: &Rig) {
    let (driver, probe, version) = (&rig.driver, &rig.probe, rig.version);
    // Three blocks of 32 threads over as many elements.
    const K: usize = 96;
    let (x, y, out) = (rig.buffer(&[3.0; K]), rig.buffer(&[4.0; K]), rig.alloc(K));
    let args = Args::new(x, y, out, K as u32);
    let mut ptrs = args.pointers();
    let kernel = launch(rig.add, 3, 32, 0, &mut ptrs);
    let mut kernel_params = CUgraphNodeParams::kernel(&kernel);
    let graph = rig.graph();
    let add_abi = match version {
        v if v >= 12030 => Some(12030),
        v if v >= 12020 => Some(12020),
        _ => None,
    };
    let Some(add_abi) = add_abi else {
        // SAFETY: the driver has no cuGraphAddNode: nothing is called.
        let none = unsafe { driver.graph_add_node(graph, &[], None, &mut kernel_params) };
        assert!(none.is_none(), "driver {version}: no cuGraphAddNode before 12.2");
        assert!(driver.cuGraphConditionalHandleCreate.is_none());
        return;
    };
    probe.reset_last_called();
    // SAFETY: a live graph; the parameters of a launch of a live kernel
    // with its four arguments (for conditional nodes, written by the driver).
    let k = unsafe { driver.graph_add_node(graph, &[], None, &mut kernel_params) }.expect("resolved").expect("added");
    assert_eq!(probe.last_called(), called("cuGraphAddNode", add_abi));
    // The double refuses parameters whose unused bytes are not zero.
    let (func, ctx) = (rig.add as u64, rig.ctx as u64);
    assert_eq!(
        node_of(probe, k),
        [u64::from(CU_GRAPH_NODE_TYPE_KERNEL), func, 3, 32, 0, x, 0, ctx],
        "the kernel member"
    );
    assert_eq!(kernel_params.conditional_params().map(|c| c.handle), None, "not a conditional node");

    let plain = CUgraphEdgeData { from_port: 0, to_port: 0, type_: 0, reserved: [0; 5] };
    // Default annotations are full edges: every ABI takes them.
    probe.reset_last_called();
    // SAFETY: as above.
    let k2 = unsafe { driver.graph_add_node(graph, &[k], Some(&[plain]), &mut kernel_params) }
        .expect("resolved")
        .expect("added");
    assert_eq!(probe.last_called(), called("cuGraphAddNode", add_abi));
    assert_eq!(node_of(probe, k2)[6], 1, "one dependency");
    let full_edge = |from, to| {
        rig.edges(graph)
            .iter()
            .any(|e| (e.from, e.to) == (from, to) && e.data.is_none_or(|d| cuda_sys::adapt::edge_is_default(&d)))
    };
    assert!(full_edge(k, k2), "a full edge k -> k2");
    // A programmatic edge: 12030 only; refused without a call before.
    probe.reset_last_called();
    // SAFETY: as above.
    let r = unsafe { driver.graph_add_node(graph, &[k], Some(&[PROGRAMMATIC]), &mut kernel_params) }.expect("resolved");
    if add_abi == 12030 {
        let n = r.expect("added");
        let e = rig.edges(graph).into_iter().find(|e| (e.from, e.to) == (k, n)).and_then(|e| e.data);
        assert_eq!(
            e.map(|d| (d.from_port, d.type_)),
            Some((CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8)),
            "the edge data reaches the 12030 ABI"
        );
    } else {
        assert_eq!(r, Err(CUDA_ERROR_NOT_SUPPORTED));
        assert_eq!(probe.last_called(), None, "no call through the 12020 ABI");
    }
    // SAFETY: edge data of another length than the dependencies: refused before any call.
    let r = unsafe { driver.graph_add_node(graph, &[k, k2], Some(&[plain]), &mut kernel_params) }.expect("resolved");
    assert_eq!(r, Err(CUDA_ERROR_INVALID_VALUE));
    assert_eq!(rig.node_type(k), CU_GRAPH_NODE_TYPE_KERNEL);

    // Conditional nodes: the handle from 12.3 on.
    let Some(create) = driver.cuGraphConditionalHandleCreate else {
        assert!(version < 12030, "driver {version}: cuGraphConditionalHandleCreate");
        return;
    };
    let mut handle: CUgraphConditionalHandle = 0;
    // SAFETY: a live graph and context; a valid out-pointer.
    let res = unsafe { create(&mut handle, graph, rig.ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT) };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuGraphConditionalHandleCreate", 12030));
    assert_ne!(handle, 0);
    let if_node = |size: u32| {
        CUgraphNodeParams::conditional(CUDA_CONDITIONAL_NODE_PARAMS {
            handle,
            type_: CU_GRAPH_COND_TYPE_IF,
            size,
            phGraph_out: std::ptr::null_mut(),
            ctx: rig.ctx,
        })
    };
    // An IF has an else body (two bodies) from CUDA 12.8 on, one body before.
    let size = if version >= 12080 { 2 } else { 1 };
    if size == 1 {
        let mut two = if_node(2);
        // SAFETY: as above.
        let r = unsafe { driver.graph_add_node(graph, &[k], None, &mut two) }.expect("resolved");
        assert_eq!(r, Err(CUDA_ERROR_INVALID_VALUE), "driver {version}: an IF of two bodies needs 12.8");
    }
    let mut cond = if_node(size);
    assert_eq!(cond.type_, CU_GRAPH_NODE_TYPE_CONDITIONAL);
    probe.reset_last_called();
    // SAFETY: as above; the driver points `phGraph_out` at its body graphs.
    let c = unsafe { driver.graph_add_node(graph, &[k], None, &mut cond) }.expect("resolved").expect("added");
    assert_eq!(probe.last_called(), called("cuGraphAddNode", 12030));
    let held = node_of(probe, c);
    assert_eq!((held[0], held[6]), (u64::from(CU_GRAPH_NODE_TYPE_CONDITIONAL), 1), "a conditional node after k");
    let out_params = cond.conditional_params().expect("a conditional node");
    assert_eq!(
        (out_params.handle, out_params.type_, out_params.size, out_params.ctx),
        (handle, CU_GRAPH_COND_TYPE_IF, size, rig.ctx)
    );
    assert!(!out_params.phGraph_out.is_null(), "the driver's body graphs");
    // SAFETY: the driver's array of `size` body graphs, live with the node.
    let bodies = unsafe { std::slice::from_raw_parts(out_params.phGraph_out, size as usize) }.to_vec();
    assert!(bodies.iter().all(|b| !b.is_null() && *b != graph), "{bodies:?}");
    assert_eq!(rig.node_type(c), CU_GRAPH_NODE_TYPE_CONDITIONAL);

    // The bodies are graphs of their own: the first multiplies, the else
    // body (from 12.8) adds, each into an output of its own. Replayed, the
    // condition starts at its default value 1 (CU_GRAPH_COND_ASSIGN_DEFAULT):
    // the IF runs its first body only.
    let outs: Vec<CUdeviceptr> = bodies.iter().map(|_| rig.buffer(&[0.0; K])).collect();
    for (i, (&body, &o)) in bodies.iter().zip(&outs).enumerate() {
        rig.add_kernel(body, &[], if i == 0 { rig.mul } else { rig.add }, [x, y, o], K as u32);
    }
    rig.launch(rig.instantiate(graph));
    assert_eq!(rig.download(out, K), [7.0; K], "the kernels: x + y");
    assert_eq!(rig.download(outs[0], K), [12.0; K], "the IF's body ran: x * y");
    if let Some(&o) = outs.get(1) {
        assert_eq!(rig.download(o, K), [0.0; K], "the else body did not");
    }
}

/// A kernel of its own for the linker's file input.
const FILE_PTX: &str = "\
.version 7.0
.target sm_35
.address_size 64

.visible .entry fc_test_empty()
{
\tret;
}
";

/// The JIT linker, required on every supported driver: the 6050 ABIs of
/// create and add (`_v2`), the 5050 ones of complete and destroy; fc-graph's
/// element-wise kernels from memory and a kernel from a file linked into
/// one image, which loads with both and runs.
fn check_linker(rig: &Rig) {
    let (driver, probe) = (&rig.driver, &rig.probe);
    for (name, abi) in [
        ("cuLinkCreate", 6050),
        ("cuLinkAddData", 6050),
        ("cuLinkAddFile", 6050),
        ("cuLinkComplete", 5050),
        ("cuLinkDestroy", 5050),
        ("cuGraphNodeGetType", 10000),
    ] {
        assert_eq!(driver.resolved_abi(name), Some(abi), "{name}");
    }
    let mut state: CUlinkState = std::ptr::null_mut();
    // SAFETY: one option claimed without its arrays: the driver reads
    // `numOptions` and refuses it; a valid out-pointer.
    let res = unsafe { (driver.cuLinkCreate)(1, std::ptr::null_mut(), std::ptr::null_mut(), &mut state) };
    assert_eq!(res, CUDA_ERROR_INVALID_VALUE, "one option, no options");
    let mut options = [CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut values = [std::ptr::null_mut::<c_void>()];
    // SAFETY: one option and its value; valid out-pointer.
    let res = unsafe { (driver.cuLinkCreate)(1, options.as_mut_ptr(), values.as_mut_ptr(), &mut state) };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuLinkCreate", 6050));
    assert!(!state.is_null());
    assert_eq!(probe.live("links"), 1);

    let ptx = CString::new(rig::ELEMENTWISE_PTX).expect("no NUL");
    let bytes = ptx.as_bytes_with_nul();
    let name = CString::new("elementwise.ptx").expect("no NUL");
    let (none, no_values) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: `bytes` holds `bytes.len()` bytes; NUL-terminated name; no options.
    let res = unsafe {
        (driver.cuLinkAddData)(
            state,
            CU_JIT_INPUT_PTX,
            bytes.as_ptr().cast_mut().cast(),
            bytes.len(),
            name.as_ptr(),
            0,
            none,
            no_values,
        )
    };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuLinkAddData", 6050));
    let file = dir().join(format!("fc_test_empty_{}_{}.ptx", rig.version, std::process::id()));
    std::fs::write(&file, FILE_PTX).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let path = CString::new(file.to_str().expect("utf-8 path")).expect("no NUL");
    // SAFETY: NUL-terminated path; no options.
    let res = unsafe { (driver.cuLinkAddFile)(state, CU_JIT_INPUT_PTX, path.as_ptr(), 0, none, no_values) };
    let _ = std::fs::remove_file(&file);
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuLinkAddFile", 6050));

    let (mut cubin, mut size) = (std::ptr::null_mut(), 0usize);
    // SAFETY: valid out-pointers.
    let res = unsafe { (driver.cuLinkComplete)(state, &mut cubin, &mut size) };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuLinkComplete", 5050));
    assert!(!cubin.is_null() && size > 0, "an image of {size} bytes");
    // The image (the link's, live until it is destroyed) loads with the
    // kernels of both inputs.
    let mut module: CUmodule = std::ptr::null_mut();
    // SAFETY: the linked image; no options; a valid out-pointer.
    let res = unsafe { (driver.cuModuleLoadDataEx)(&mut module, cubin, 0, none, no_values) };
    ok(res, "cuModuleLoadDataEx of the linked image");
    let (add, _empty) = (rig.function(module, "fc_add_f32"), rig.function(module, "fc_test_empty"));
    // SAFETY: the live link.
    assert_eq!(unsafe { (driver.cuLinkDestroy)(state) }, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), called("cuLinkDestroy", 5050));
    assert_eq!(probe.live("links"), 0);
    let (x, out) = (rig.buffer(&[1.5; N]), rig.alloc(N));
    let graph = rig.graph();
    rig.add_kernel(graph, &[], add, [x, x, out], N as u32);
    rig.launch(rig.instantiate(graph));
    assert_eq!(rig.download(out, N), [3.0; N], "the linked fc_add_f32 runs");

    // SAFETY: a destroyed link: the double refuses it and reports the
    // misuse, taken back here.
    assert_eq!(unsafe { (driver.cuLinkDestroy)(state) }, CUDA_ERROR_INVALID_HANDLE);
    let m = probe.take_misuses();
    assert!(m.len() == 1 && m[0].contains("cuLinkDestroy") && m[0].contains("destroyed"), "{m:?}");
}

#[test]
fn versioned_double_11040() {
    check_driver_version(11040);
}

#[test]
fn versioned_double_12000() {
    check_driver_version(12000);
}

#[test]
fn versioned_double_12020() {
    check_driver_version(12020);
}

#[test]
fn versioned_double_12030() {
    check_driver_version(12030);
}

#[test]
fn versioned_double_13000() {
    check_driver_version(13000);
}

/// The double itself models the contract (so its 0 above is not vacuous):
/// an over-version request is counted, answered with an older ABI by 11.x
/// and 12.x drivers and refused by 13.x ones; unknown and not-yet symbols
/// are not found; below a symbol's first ABI is VERSION_NOT_SUFFICIENT.
#[test]
fn double_follows_the_versioning_contract() {
    let name = |s: &str| CString::new(s).expect("no NUL");
    let update = name("cuGraphExecUpdate");

    // 11.4: the old loader's request (12000) yields the 10020 ABI, which it
    // then called with the 12000 arguments: the defect this fixes.
    let p11 = contract_probe(11040);
    let (res, f) = p11.raw_request(&update, 12000);
    assert_eq!((res, p11.identify(f)), (CUDA_SUCCESS, called("cuGraphExecUpdate", 10020)));
    assert_eq!(p11.over_requests(), 1, "counted");
    assert!(p11.raw_request_v2(&update, 10020).is_none(), "no cuGetProcAddress_v2 before 12.0");
    let (res, f) = p11.raw_request(&name("cuFuncGetParamInfo"), 11040);
    assert_eq!((res, f.is_null()), (CUDA_ERROR_NOT_FOUND, true), "introduced after the driver");
    let (res, _) = p11.raw_request(&name("cuNoSuchEntry"), 11040);
    assert_eq!(res, CUDA_ERROR_NOT_FOUND);

    // 12.0: at or above the first ABI the newest at or below the request.
    let p12 = contract_probe(12000);
    let edges = name("cuGraphGetEdges");
    let (res, f, status) = p12.raw_request_v2(&edges, 12030).expect("v2 from 12.0 on");
    assert_eq!((res, status), (CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS as i32));
    assert_eq!(p12.identify(f), called("cuGraphGetEdges", 10000), "12.x hands out the older ABI");
    assert_eq!(p12.over_requests(), 1);
    let (res, f, status) = p12.raw_request_v2(&update, 10010).expect("v2");
    assert_eq!(
        (res, f.is_null(), status),
        (CUDA_ERROR_NOT_FOUND, true, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT as i32)
    );
    let (_, f, status) = p12.raw_request_v2(&update, 11040).expect("v2");
    assert_eq!((p12.identify(f), status), (called("cuGraphExecUpdate", 10020), 0));
    let (res, _, status) = p12.raw_request_v2(&name("cuNoSuchEntry"), 12000).expect("v2");
    assert_eq!((res, status), (CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND as i32));

    // 13.0: above the driver's version is an error.
    let p13 = contract_probe(13000);
    let (res, f, _) = p13.raw_request_v2(&update, 13010).expect("v2");
    assert_eq!((res, f.is_null()), (CUDA_ERROR_INVALID_VALUE, true));
    assert_eq!(p13.over_requests(), 1);
    let (res, f, _) = p13.raw_request_v2(&update, 13000).expect("v2");
    assert_eq!((res, p13.identify(f)), (CUDA_SUCCESS, called("cuGraphExecUpdate", 12000)));
    for p in [&p11, &p12, &p13] {
        assert!(p.misuses().is_empty(), "misuses of the double: {:?}", p.misuses());
    }
}

/// A driver older than the oldest supported is refused after one request
/// (its version), before the table is resolved.
#[test]
fn too_old_driver_is_refused_after_reading_its_version() {
    let (path, probe) = fresh_copy(&dir(), "fcdouble_old", 11030, 1).unwrap_or_else(|e| panic!("{e}"));
    let loaded = Driver::load_from(&[path.to_str().expect("utf-8")]);
    let _ = std::fs::remove_file(&path);
    match loaded {
        Err(LoadError::DriverTooOld { found: 11030, min }) => assert_eq!(min, MIN_DRIVER_VERSION),
        other => panic!("expected DriverTooOld, got {other:?}"),
    }
    assert_eq!(probe.requests(), [("cuDriverGetVersion".to_string(), 2020)]);
    assert!(probe.misuses().is_empty(), "misuses of the double: {:?}", probe.misuses());
}
