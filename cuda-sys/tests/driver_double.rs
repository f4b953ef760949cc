//! The loader against a driver double that follows NVIDIA's
//! `cuGetProcAddress` versioning rules (`support/double.rs`), at driver
//! versions 11040 (CUDA 11.4, driver 470), 12000, 12020 (the first ABI of
//! `cuGraphAddNode`), 12030 and 13000:
//!
//! - every resolved entry is the stub of the ABI its type expects (the
//!   mismatch count is printed and must be 0);
//! - optional entries appear exactly where that driver has them, at the ABI
//!   NVIDIA's history gives;
//! - no request ever exceeds the driver's version (the double counts them);
//! - an in-place update runs through the ABI that driver has (10020 before
//!   12.0), success and failure decoded into the 12.0 form; the edge query
//!   through its ABI, with edge data only at 12030;
//! - graph building (kernel nodes, their updates in executable graphs,
//!   edges) through the ABI that driver has, the v2 kernel parameters
//!   converted to v1 before 12.0, programmatic edges only from 12.3;
//!   kernel nodes of graphs not instantiated set the same way; nodes of any
//!   type (conditional ones, with their condition handles and body graphs)
//!   from 12.2, edge data for their dependencies only from 12.3; node types;
//! - the JIT linker (create, add data and files, complete, destroy) at its
//!   6050/5050 ABIs on every supported driver, as required entries.
//!
//! Runs in CI (plain `cargo test`); without a C compiler it fails, as the
//! loader tests do.

#![cfg(target_os = "linux")]

#[path = "support/double.rs"]
mod double;

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};

use cuda_sys::audit::abi_versions;
use cuda_sys::functions::FUNCTIONS;
use cuda_sys::*;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda-sys-driver-double")
}

fn build(name: &str, driver_version: i32) -> PathBuf {
    match double::build(&dir(), name, driver_version) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn load(path: &Path) -> Driver {
    match Driver::load_from(&[path.to_str().expect("utf-8 path")]) {
        Ok(d) => d,
        Err(e) => panic!("{} should load: {e}", path.display()),
    }
}

/// The ABI NVIDIA's contract gives each table entry on a driver of
/// `driver_version` when it is requested the loader's way: the newest ABI
/// of the table's list at or below the driver's version, if the driver has
/// the symbol at all (its first ABI at or below its version).
fn expected_abi(
    name: &str,
    driver_version: i32,
    history: &std::collections::BTreeMap<String, Vec<i32>>,
) -> Option<i32> {
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

fn node(i: usize) -> CUgraphNode {
    double::NODES[i] as CUgraphNode
}

/// Everything the issue asks of one driver version.
fn check_driver_version(driver_version: i32) {
    let path = build(&format!("fcdouble_{driver_version}"), driver_version);
    let probe = double::Probe::open(&path).expect("the double opens");
    let history = double::history().expect("abi_history.txt parses");
    let driver = load(&path);
    assert_eq!(driver.driver_version(), driver_version);

    // 1. Every resolved entry is the stub of the ABI its type expects.
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
    let update_abi = if driver_version >= 12000 { 12000 } else { 10020 };
    let (exec, graph) = (0xE1usize as CUgraphExec, 0xE2usize as CUgraph);
    probe.set_update(CU_GRAPH_EXEC_UPDATE_SUCCESS, std::ptr::null_mut(), std::ptr::null_mut());
    probe.reset_last_called();
    // SAFETY: the double only records the handles.
    let ok = unsafe { driver.graph_exec_update(exec, graph) }.expect("cuGraphExecUpdate resolved");
    assert_eq!(probe.last_called(), Some(("cuGraphExecUpdate".to_string(), update_abi)));
    assert_eq!(probe.last_update_args(), (exec as *mut c_void, graph as *mut c_void));
    assert_eq!(ok.abi_version, update_abi);
    assert!(ok.updated() && !ok.refused(), "{ok:?}");
    assert!(ok.info.errorNode.is_null() && ok.info.errorFromNode.is_null(), "{ok:?}");

    let (bad, from) = (node(2), node(1));
    probe.set_update(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, bad as *mut c_void, from as *mut c_void);
    probe.reset_last_called();
    // SAFETY: as above.
    let refused = unsafe { driver.graph_exec_update(exec, graph) }.expect("cuGraphExecUpdate resolved");
    assert_eq!(probe.last_called(), Some(("cuGraphExecUpdate".to_string(), update_abi)));
    assert!(refused.refused() && !refused.updated(), "{refused:?}");
    assert_eq!(refused.status, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    assert_eq!(refused.info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    assert_eq!(refused.info.errorNode, bad, "the error node, from the ABI's own out-parameter");
    // The 10020 ABI does not report the node the error came from.
    let want_from = if update_abi == 12000 { from } else { std::ptr::null_mut() };
    assert_eq!(refused.info.errorFromNode, want_from);
    probe.set_update(CU_GRAPH_EXEC_UPDATE_SUCCESS, std::ptr::null_mut(), std::ptr::null_mut());

    // 5. The edges through the ABI this driver has; edge data at 12030 only.
    let edges_abi = if driver_version >= 12030 { 12030 } else { 10000 };
    assert_eq!(driver.has_edge_data(), edges_abi == 12030);
    probe.reset_last_called();
    // SAFETY: the double ignores the graph handle.
    let edges = unsafe { driver.graph_edges(graph) }.expect("cuGraphGetEdges resolved").expect("edges");
    assert_eq!(probe.last_called(), Some(("cuGraphGetEdges".to_string(), edges_abi)));
    let pairs: Vec<(CUgraphNode, CUgraphNode)> = edges.iter().map(|e| (e.from, e.to)).collect();
    assert_eq!(pairs, [(node(0), node(1)), (node(1), node(2)), (node(2), node(3))]);
    let types: Vec<Option<u8>> = edges.iter().map(|e| e.data.map(|d| d.type_)).collect();
    if edges_abi == 12030 {
        assert_eq!(types, [Some(0), Some(CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8), Some(0)]);
        assert_eq!(edges[1].data.map(|d| d.from_port), Some(CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC));
    } else {
        assert_eq!(types, [None, None, None]);
    }

    // 6. Graph building through the ABIs this driver has: kernel nodes and
    //    their executable-graph updates in the v2 layout at 12000+, else
    //    converted to v1; edges with data at 12030+, else full ones only.
    check_graph_building(&driver, &probe, driver_version);
    // 7. Nodes of any type, conditional ones, node types, and the linker.
    check_generic_nodes(&driver, &probe, driver_version);
    check_linker(&driver, &probe);
    assert_eq!(probe.over_requests(), 0, "no request after loading either");
}

fn check_graph_building(driver: &Driver, probe: &double::Probe, driver_version: i32) {
    let v2 = driver_version >= 12000;
    let (kernel_abi, set_abi) = if v2 { (12000, 12000) } else { (10000, 10010) };
    let func = 0xF00usize as CUfunction;
    let mut value: u64 = 0xABCD_0123; // read by the stubs through `params_arr`
    let mut params_arr: [*mut c_void; 1] = [(&mut value as *mut u64).cast()];
    let params = CUDA_KERNEL_NODE_PARAMS_v2 {
        func,
        gridDimX: 7,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 256,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 48,
        kernelParams: params_arr.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    };
    let graph = 0xE3usize as CUgraph;
    probe.reset_last_called();
    // SAFETY: the double only reads the parameters.
    let n0 = unsafe { driver.graph_add_kernel_node(graph, &[], &params) }.expect("resolved").expect("added");
    assert_eq!(probe.last_called(), Some(("cuGraphAddKernelNode".to_string(), kernel_abi)));
    let a = probe.last_args();
    assert_eq!(a[0], n0 as u64, "the node the stub handed out");
    assert_eq!(&a[1..7], &[0, func as u64, 7, 256, 48, 0xABCD_0123], "the launch, read through the ABI's layout");
    // SAFETY: as above; one dependency.
    let n1 = unsafe { driver.graph_add_kernel_node(graph, &[n0], &params) }.expect("resolved").expect("added");
    assert_ne!(n0, n1);
    assert_eq!(probe.last_args()[1], 1, "one dependency");
    // A kern-only launch has no v1 form: refused before any call there.
    let kern_only = CUDA_KERNEL_NODE_PARAMS_v2 { func: std::ptr::null_mut(), kern: 0x77usize as CUkernel, ..params };
    probe.reset_last_called();
    // SAFETY: as above.
    let r = unsafe { driver.graph_add_kernel_node(graph, &[], &kern_only) }.expect("resolved");
    if v2 {
        assert!(r.is_ok());
        assert_eq!(probe.last_args()[7], 0x77, "kern reaches the v2 stub");
    } else {
        assert_eq!(r, Err(CUDA_ERROR_NOT_SUPPORTED));
        assert_eq!(probe.last_called(), None, "no call through the v1 ABI");
    }

    let exec = 0xE4usize as CUgraphExec;
    probe.reset_last_called();
    // SAFETY: `params_arr[0]` points at `value`, live and otherwise unborrowed.
    unsafe { params_arr[0].cast::<u64>().write(0x5555) };
    // SAFETY: the double only reads the parameters.
    let res = unsafe { driver.graph_exec_kernel_node_set_params(exec, n1, &params) }.expect("resolved");
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuGraphExecKernelNodeSetParams".to_string(), set_abi)));
    let a = probe.last_args();
    assert_eq!(&a[..7], &[exec as u64, n1 as u64, func as u64, 7, 256, 48, 0x5555]);

    // Edges: annotated at 12030+, full ones only before.
    let programmatic = CUgraphEdgeData {
        from_port: CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
        to_port: 0,
        type_: CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8,
        reserved: [0; 5],
    };
    let with_data = driver_version >= 12030;
    assert_eq!(driver.has_programmatic_edges(), with_data);
    let dep_abi = if with_data { 12030 } else { 10000 };
    probe.reset_last_called();
    // SAFETY: the double only reads the arrays.
    let res = unsafe { driver.graph_add_dependencies(graph, &[n0, n1], &[n1, n0], None) }.expect("resolved");
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuGraphAddDependencies".to_string(), dep_abi)));
    assert_eq!(&probe.last_args()[..4], &[2, n0 as u64, n1 as u64, 0]);
    probe.reset_last_called();
    // SAFETY: as above.
    let res = unsafe { driver.graph_add_dependencies(graph, &[n0], &[n1], Some(&[programmatic])) }.expect("resolved");
    if with_data {
        assert_eq!(res, CUDA_SUCCESS);
        assert_eq!(probe.last_called(), Some(("cuGraphAddDependencies".to_string(), 12030)));
        let a = probe.last_args();
        assert_eq!(&a[..6], &[1, n0 as u64, n1 as u64, 1, 1, 1], "a programmatic edge from the programmatic port");
    } else {
        assert_eq!(res, CUDA_ERROR_NOT_SUPPORTED, "no programmatic edges before 12.3");
        assert_eq!(probe.last_called(), None, "refused without a call");
    }
    // SAFETY: mismatched lengths are refused before any call.
    let res = unsafe { driver.graph_add_dependencies(graph, &[n0, n1], &[n1], None) }.expect("resolved");
    assert_eq!(res, CUDA_ERROR_INVALID_VALUE);

    // A kernel node of a graph not instantiated: v2 at 12000+, else v1.
    let node_set_abi = if v2 { 12000 } else { 10000 };
    probe.reset_last_called();
    // SAFETY: `params_arr[0]` points at `value`, live and otherwise unborrowed.
    unsafe { params_arr[0].cast::<u64>().write(0x6666) };
    // SAFETY: the double only reads the parameters.
    let res = unsafe { driver.graph_kernel_node_set_params(n1, &params) }.expect("resolved");
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuGraphKernelNodeSetParams".to_string(), node_set_abi)));
    assert_eq!(&probe.last_args()[..7], &[n1 as u64, 0, func as u64, 7, 256, 48, 0x6666]);
    probe.reset_last_called();
    // SAFETY: as above.
    let res = unsafe { driver.graph_kernel_node_set_params(n1, &kern_only) }.expect("resolved");
    if v2 {
        assert_eq!(res, CUDA_SUCCESS);
        assert_eq!(probe.last_args()[7], 0x77, "kern reaches the v2 stub");
    } else {
        assert_eq!(res, CUDA_ERROR_NOT_SUPPORTED);
        assert_eq!(probe.last_called(), None, "no call through the v1 ABI");
    }
}

/// `cuGraphAddNode` through the ABI the driver has (none before 12.2; the
/// 12020 ABI, full edges only, on 12.2; edge data from 12.3), conditional
/// nodes with a condition from `cuGraphConditionalHandleCreate` (12.3+),
/// and `cuGraphNodeGetType` of the nodes added.
fn check_generic_nodes(driver: &Driver, probe: &double::Probe, driver_version: i32) {
    let graph = 0xE5usize as CUgraph;
    let ctx = 0xC7usize as CUcontext;
    let func = 0xF01usize as CUfunction;
    let kernel = CUDA_KERNEL_NODE_PARAMS_v2 {
        func,
        gridDimX: 3,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 32,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: std::ptr::null_mut(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    };
    let mut kernel_params = CUgraphNodeParams::kernel(&kernel);
    let add_abi = match driver_version {
        v if v >= 12030 => Some(12030),
        v if v >= 12020 => Some(12020),
        _ => None,
    };
    let Some(add_abi) = add_abi else {
        // SAFETY: the driver has no cuGraphAddNode: nothing is called.
        let none = unsafe { driver.graph_add_node(graph, &[], None, &mut kernel_params) };
        assert!(none.is_none(), "driver {driver_version}: no cuGraphAddNode before 12.2");
        assert!(driver.cuGraphConditionalHandleCreate.is_none());
        return;
    };
    probe.reset_last_called();
    // SAFETY: the double reads (and for conditional nodes writes) the parameters only.
    let k = unsafe { driver.graph_add_node(graph, &[], None, &mut kernel_params) }.expect("resolved").expect("added");
    assert_eq!(probe.last_called(), Some(("cuGraphAddNode".to_string(), add_abi)));
    let a = probe.last_args();
    assert_eq!(a, [k as u64, 0, CU_GRAPH_NODE_TYPE_KERNEL as u64, 0, 0, func as u64, 3, 1], "unused bytes zero");
    assert_eq!(kernel_params.conditional_params().map(|c| c.handle), None, "not a conditional node");

    let programmatic = CUgraphEdgeData {
        from_port: CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
        to_port: 0,
        type_: CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8,
        reserved: [0; 5],
    };
    let plain = CUgraphEdgeData { from_port: 0, to_port: 0, type_: 0, reserved: [0; 5] };
    // Default annotations are full edges: every ABI takes them.
    probe.reset_last_called();
    // SAFETY: as above.
    let k2 = unsafe { driver.graph_add_node(graph, &[k], Some(&[plain]), &mut kernel_params) }
        .expect("resolved")
        .expect("added");
    assert_eq!(probe.last_called(), Some(("cuGraphAddNode".to_string(), add_abi)));
    assert_eq!(&probe.last_args()[..4], &[k2 as u64, 1, 0, u64::from(add_abi == 12030)]);
    // A programmatic edge: 12030 only; refused without a call before.
    probe.reset_last_called();
    // SAFETY: as above.
    let r = unsafe { driver.graph_add_node(graph, &[k], Some(&[programmatic]), &mut kernel_params) }.expect("resolved");
    if add_abi == 12030 {
        let n = r.expect("added");
        assert_eq!(&probe.last_args()[..5], &[n as u64, 1, 0, 1, 1], "the edge data reaches the 12030 ABI");
    } else {
        assert_eq!(r, Err(CUDA_ERROR_NOT_SUPPORTED));
        assert_eq!(probe.last_called(), None, "no call through the 12020 ABI");
    }
    // SAFETY: edge data of another length than the dependencies: refused before any call.
    let r = unsafe { driver.graph_add_node(graph, &[k, k2], Some(&[plain]), &mut kernel_params) }.expect("resolved");
    assert_eq!(r, Err(CUDA_ERROR_INVALID_VALUE));

    // SAFETY: the double reports the types of the nodes it added.
    let ty = |n: CUgraphNode| unsafe {
        let mut t: CUgraphNodeType = 99;
        ((driver.cuGraphNodeGetType)(n, &mut t), t)
    };
    assert_eq!(ty(k), (CUDA_SUCCESS, CU_GRAPH_NODE_TYPE_KERNEL));

    // Conditional nodes: the handle from 12.3 on.
    let Some(create) = driver.cuGraphConditionalHandleCreate else {
        assert!(driver_version < 12030, "driver {driver_version}: cuGraphConditionalHandleCreate");
        return;
    };
    let mut handle: CUgraphConditionalHandle = 0;
    // SAFETY: valid out-pointer; the double records the handles.
    let res = unsafe { create(&mut handle, graph, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT) };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuGraphConditionalHandleCreate".to_string(), 12030)));
    assert_eq!(handle, double::CONDITION_BASE);
    assert_eq!(&probe.last_args()[..5], &[handle, graph as u64, ctx as u64, 1, 1]);
    let mut cond = CUgraphNodeParams::conditional(CUDA_CONDITIONAL_NODE_PARAMS {
        handle,
        type_: CU_GRAPH_COND_TYPE_IF,
        size: 2,
        phGraph_out: std::ptr::null_mut(),
        ctx,
    });
    assert_eq!(cond.type_, CU_GRAPH_NODE_TYPE_CONDITIONAL);
    probe.reset_last_called();
    // SAFETY: as above; the double points `phGraph_out` at its body graphs.
    let c = unsafe { driver.graph_add_node(graph, &[k], None, &mut cond) }.expect("resolved").expect("added");
    assert_eq!(probe.last_called(), Some(("cuGraphAddNode".to_string(), 12030)));
    let a = probe.last_args();
    let if_of_two = CU_GRAPH_COND_TYPE_IF as u64 | 2 << 32;
    assert_eq!(
        a,
        [c as u64, 1, CU_GRAPH_NODE_TYPE_CONDITIONAL as u64, 0, 0, handle, if_of_two, 1],
        "unused bytes zero"
    );
    let out = cond.conditional_params().expect("a conditional node");
    assert_eq!((out.handle, out.type_, out.size, out.ctx), (handle, CU_GRAPH_COND_TYPE_IF, 2, ctx));
    assert!(!out.phGraph_out.is_null(), "the driver's body graphs");
    // SAFETY: the double's `phGraph_out` is a static array of four graphs.
    let bodies = unsafe { std::slice::from_raw_parts(out.phGraph_out, out.size as usize) };
    assert_eq!(bodies, &[double::BODY_GRAPHS[0] as CUgraph, double::BODY_GRAPHS[1] as CUgraph]);
    assert_eq!(ty(c), (CUDA_SUCCESS, CU_GRAPH_NODE_TYPE_CONDITIONAL));
}

/// The JIT linker, required on every supported driver: the 6050 ABIs of
/// create and add (`_v2`), the 5050 ones of complete and destroy.
fn check_linker(driver: &Driver, probe: &double::Probe) {
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
    let mut options = [CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut values = [std::ptr::null_mut::<c_void>()];
    let mut state: CUlinkState = std::ptr::null_mut();
    // SAFETY: one option and its value; valid out-pointer.
    let res = unsafe { (driver.cuLinkCreate)(1, options.as_mut_ptr(), values.as_mut_ptr(), &mut state) };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuLinkCreate".to_string(), 6050)));
    assert_eq!(state, double::LINK_STATE as CUlinkState);
    assert_eq!(&probe.last_args()[..2], &[1, u64::from(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)]);

    let mut ptx = *b".version 8.0\n\0";
    let name = CString::new("kernels.ptx").expect("no NUL");
    let (none, no_values) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: `ptx` holds `ptx.len()` bytes; NUL-terminated name; no options.
    let res = unsafe {
        (driver.cuLinkAddData)(
            state,
            CU_JIT_INPUT_PTX,
            ptx.as_mut_ptr().cast(),
            ptx.len(),
            name.as_ptr(),
            0,
            none,
            no_values,
        )
    };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuLinkAddData".to_string(), 6050)));
    let want = [state as u64, u64::from(CU_JIT_INPUT_PTX), ptx.len() as u64, u64::from(b'.'), 11, 0];
    assert_eq!(&probe.last_args()[..6], &want);
    let lib = CString::new("/opt/lib/libdevice_code.a").expect("no NUL");
    // SAFETY: NUL-terminated path; no options.
    let res = unsafe { (driver.cuLinkAddFile)(state, CU_JIT_INPUT_LIBRARY, lib.as_ptr(), 0, none, no_values) };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuLinkAddFile".to_string(), 6050)));
    let want = [state as u64, u64::from(CU_JIT_INPUT_LIBRARY), lib.as_bytes().len() as u64];
    assert_eq!(&probe.last_args()[..3], &want);

    let (mut cubin, mut size) = (std::ptr::null_mut(), 0usize);
    // SAFETY: valid out-pointers.
    let res = unsafe { (driver.cuLinkComplete)(state, &mut cubin, &mut size) };
    assert_eq!(res, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuLinkComplete".to_string(), 5050)));
    assert_eq!(&probe.last_args()[..2], &[state as u64, 2], "two inputs linked");
    // SAFETY: the double's cubin is a static string of `size` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(cubin.cast::<u8>(), size) };
    assert_eq!(bytes, double::LINKED_CUBIN.as_bytes());
    // SAFETY: the live link.
    assert_eq!(unsafe { (driver.cuLinkDestroy)(state) }, CUDA_SUCCESS);
    assert_eq!(probe.last_called(), Some(("cuLinkDestroy".to_string(), 5050)));
    // SAFETY: a destroyed link: the double refuses it.
    assert_eq!(unsafe { (driver.cuLinkDestroy)(state) }, CUDA_ERROR_INVALID_VALUE);
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
    let p11 = double::Probe::open(&build("fcdouble_contract_11040", 11040)).expect("opens");
    let (res, f) = p11.raw_request(&update, 12000);
    assert_eq!((res, p11.identify(f)), (CUDA_SUCCESS, Some(("cuGraphExecUpdate".to_string(), 10020))));
    assert_eq!(p11.over_requests(), 1, "counted");
    assert!(p11.raw_request_v2(&update, 10020).is_none(), "no cuGetProcAddress_v2 before 12.0");
    let (res, f) = p11.raw_request(&name("cuFuncGetParamInfo"), 11040);
    assert_eq!((res, f.is_null()), (CUDA_ERROR_NOT_FOUND, true), "introduced after the driver");
    let (res, _) = p11.raw_request(&name("cuNoSuchEntry"), 11040);
    assert_eq!(res, CUDA_ERROR_NOT_FOUND);

    // 12.0: at or above the first ABI the newest at or below the request.
    let p12 = double::Probe::open(&build("fcdouble_contract_12000", 12000)).expect("opens");
    let edges = name("cuGraphGetEdges");
    let (res, f, status) = p12.raw_request_v2(&edges, 12030).expect("v2 from 12.0 on");
    assert_eq!((res, status), (CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS as i32));
    assert_eq!(p12.identify(f), Some(("cuGraphGetEdges".to_string(), 10000)), "12.x hands out the older ABI");
    assert_eq!(p12.over_requests(), 1);
    let (res, f, status) = p12.raw_request_v2(&update, 10010).expect("v2");
    assert_eq!(
        (res, f.is_null(), status),
        (CUDA_ERROR_NOT_FOUND, true, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT as i32)
    );
    let (_, f, status) = p12.raw_request_v2(&update, 11040).expect("v2");
    assert_eq!((p12.identify(f), status), (Some(("cuGraphExecUpdate".to_string(), 10020)), 0));
    let (res, _, status) = p12.raw_request_v2(&name("cuNoSuchEntry"), 12000).expect("v2");
    assert_eq!((res, status), (CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND as i32));

    // 13.0: above the driver's version is an error.
    let p13 = double::Probe::open(&build("fcdouble_contract_13000", 13000)).expect("opens");
    let (res, f, _) = p13.raw_request_v2(&update, 13010).expect("v2");
    assert_eq!((res, f.is_null()), (CUDA_ERROR_INVALID_VALUE, true));
    assert_eq!(p13.over_requests(), 1);
    let (res, f, _) = p13.raw_request_v2(&update, 13000).expect("v2");
    assert_eq!((res, p13.identify(f)), (CUDA_SUCCESS, Some(("cuGraphExecUpdate".to_string(), 12000))));
}

/// A driver older than the oldest supported is refused after one request
/// (its version), before the table is resolved.
#[test]
fn too_old_driver_is_refused_after_reading_its_version() {
    let path = build("fcdouble_11030", 11030);
    let probe = double::Probe::open(&path).expect("opens");
    match Driver::load_from(&[path.to_str().expect("utf-8")]) {
        Err(LoadError::DriverTooOld { found: 11030, min }) => assert_eq!(min, MIN_DRIVER_VERSION),
        other => panic!("expected DriverTooOld, got {other:?}"),
    }
    assert_eq!(probe.requests(), [("cuDriverGetVersion".to_string(), 2020)]);
}
