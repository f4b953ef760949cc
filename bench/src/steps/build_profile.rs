//! `fc-bench --build-profile ROUNDS`: where recording + instantiating the
//! rig's K-kernel chain spends its time, for K = 26, 260 and 2600 in each
//! launch mode (PDL where the device has it, then plain). Each round times
//! every way of making the same graph, one after the other:
//!
//! - `capture`: bare stream capture (begin, K launches, end);
//! - `add_kernel_bulk`: bare `cuGraphCreate` + K `cuGraphAddKernelNode`
//!   (a PDL node without dependencies), then the programmatic edges in one
//!   `cuGraphAddDependencies` (with PDL);
//! - `add_kernel_bulk8`, `_bulk16`, `_bulk64`: the same with one
//!   `cuGraphAddDependencies` per 8, 16 or 64 edges (PDL only; the library
//!   builds with batches of 64);
//! - `add_node_edges`: bare `cuGraphCreate` + K `cuGraphAddNode`, each with
//!   its edge and the edge's annotation (CUDA 12.3+);
//! - `fc`: the library's recording: `begin_capture` and the K `binary`
//!   calls, then `end`, which builds the graph and instantiates it (timed
//!   as its instantiation).
//!
//! then instantiates each bare graph (`cuGraphInstantiateWithFlags`),
//! timed apart. One JSON line per mode, K and way: the medians of making
//! the graph, of instantiating it, and of both.

use std::os::raw::c_void;
use std::time::Instant;

use cuda_sys::result::{graph, graph_exec};
use cuda_sys::*;
use fc_graph::{BinaryOp, CaptureMode, Result};
use serde_json::json;

use super::rigs::{bare_capture, chain_node_params, ok, Rig};
use crate::stats::{round, us_since, Summary, IMPL};

/// The ways of making the graph, in the order each round times them.
const WAYS: [&str; 7] = [
    "capture",
    "add_kernel_bulk",
    "add_kernel_bulk8",
    "add_kernel_bulk16",
    "add_kernel_bulk64",
    "add_node_edges",
    "fc",
];

/// `fc-bench --build-profile ROUNDS`: one JSON line to `out` per launch
/// mode, K and way of making the graph (see the module's documentation).
pub fn build_profile(device: usize, n: usize, rounds: usize, out: &mut dyn FnMut(String)) -> Result<()> {
    let d = fc_graph::driver()?;
    let rig = Rig::open(device, n)?;
    let modes: &[bool] = if rig.pdl.get() { &[true, false] } else { &[false] };
    for &pdl in modes {
        rig.set_pdl(pdl);
        for k in [26usize, 260, 2600] {
            let rounds = if k >= 2600 { rounds.div_ceil(4) } else { rounds };
            let mut make = vec![Vec::with_capacity(rounds); WAYS.len()];
            let mut inst = vec![Vec::with_capacity(rounds); WAYS.len()];
            for round in 0..rounds + 2 {
                for j in 0..WAYS.len() {
                    let way = (round + j) % WAYS.len();
                    let Some((m, i)) = time_way(d, &rig, k, WAYS[way])? else { continue };
                    if round >= 2 {
                        make[way].push(m);
                        inst[way].push(i);
                    }
                }
            }
            for (way, name) in WAYS.iter().enumerate() {
                if make[way].is_empty() {
                    continue;
                }
                let both: Vec<f64> = make[way].iter().zip(&inst[way]).map(|(m, i)| m + i).collect();
                let med = |v: &[f64]| round(Summary::of(&mut v.to_vec()).median, 3);
                out(json!({
                    "row": "build_phases",
                    "impl": IMPL,
                    "pdl": pdl,
                    "k": k,
                    "way": name,
                    "rounds": make[way].len(),
                    "make_us": med(&make[way]),
                    "instantiate_us": med(&inst[way]),
                    "total_us": med(&both),
                })
                .to_string());
            }
        }
    }
    rig.set_pdl(false);
    Ok(())
}

/// One round of `way`: (making the graph, instantiating it) in µs, the
/// graph and executable destroyed untimed; `None` where the driver lacks
/// what the way needs.
fn time_way(d: &Driver, rig: &Rig, k: usize, way: &str) -> Result<Option<(f64, f64)>> {
    if way == "fc" {
        let t0 = Instant::now();
        let cap = rig.chain.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        rig.chain.enqueue(k)?;
        let t1 = Instant::now();
        let g = cap.end()?;
        let t2 = Instant::now();
        drop(g);
        return Ok(Some((us_since(t0, t1), us_since(t1, t2))));
    }
    if way == "add_node_edges"
        && !matches!(d.cuGraphAddNode, Some(cuda_sys::functions::abi::cuGraphAddNode::Abi::V12030(_)))
    {
        return Ok(None);
    }
    if matches!(way, "add_kernel_bulk8" | "add_kernel_bulk16" | "add_kernel_bulk64") && !rig.pdl.get() {
        return Ok(None);
    }
    let t0 = Instant::now();
    let graph = match way {
        "capture" => bare_capture(d, rig, k, |_| false)?,
        _ => {
            // Flags 0.
            let graph = ok(graph::create(d, 0))?;
            let how = match way {
                "add_node_edges" => How::PerNode,
                "add_kernel_bulk8" => How::Bulk(8),
                "add_kernel_bulk16" => How::Bulk(16),
                "add_kernel_bulk64" => How::Bulk(64),
                _ => How::Bulk(usize::MAX),
            };
            // SAFETY: the graph made above, used by this thread only.
            if let Err(e) = unsafe { build_chain(d, rig, graph, k, how) } {
                // SAFETY: ours, destroyed once.
                let _ = unsafe { graph::destroy(d, graph) };
                return Err(e);
            }
            graph
        }
    };
    let t1 = Instant::now();
    // SAFETY: live graph.
    let made = unsafe { graph_exec::instantiate(d, graph, 0) };
    let t2 = Instant::now();
    // SAFETY: ours, destroyed once (the executable only if made).
    unsafe {
        if let Ok(exec) = made {
            let _ = graph_exec::destroy(d, exec);
        }
        let _ = graph::destroy(d, graph);
    }
    ok(made)?;
    Ok(Some((us_since(t0, t1), us_since(t1, t2))))
}

/// How [`build_chain`] adds nodes and edges.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    /// Each node through `cuGraphAddNode` with its edge.
    PerNode,
    /// `cuGraphAddKernelNode`, the programmatic edges through one
    /// `cuGraphAddDependencies` per this many (and one at the end).
    Bulk(usize),
}

/// Adds the rig's K-kernel chain to `graph`: node `i` after node `i - 1`,
/// through a programmatic edge where the rig launches with PDL, else a
/// full one (given to the node's own add call).
///
/// # Safety
/// `graph` is a live graph of the rig's context, used by this thread only.
unsafe fn build_chain(d: &Driver, rig: &Rig, graph: CUgraph, k: usize, how: How) -> Result<()> {
    let per_node = how == How::PerNode;
    let every = match how {
        How::Bulk(n) => n,
        _ => 1,
    };
    let pdl = rig.pdl.get();
    let edge = CUgraphEdgeData {
        from_port: if pdl { CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC } else { CU_GRAPH_KERNEL_NODE_PORT_DEFAULT },
        to_port: 0,
        type_: if pdl { CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC } else { CU_GRAPH_DEPENDENCY_TYPE_DEFAULT } as u8,
        reserved: [0; 5],
    };
    let grid = (rig.chain.n as u32).div_ceil(256);
    let (mut from, mut to) = (Vec::with_capacity(k), Vec::with_capacity(k));
    let mut prev: Option<CUgraphNode> = None;
    for i in 0..k {
        let (op, a, b, o) = rig.chain.node(i, false);
        let func = if op == BinaryOp::Add { rig.func_add } else { rig.func_mul };
        let mut words = [a.as_raw(), b.as_raw(), o.as_raw(), rig.chain.n as u64];
        let [w0, w1, w2, w3] = &mut words;
        let mut p: [*mut c_void; 4] = [w0, w1, w2, w3].map(|w| (w as *mut u64).cast());
        let params = chain_node_params(func, grid, p.as_mut_ptr());
        let deps: &[CUgraphNode] = match &prev {
            Some(p) => std::slice::from_ref(p),
            None => &[],
        };
        let added = if per_node {
            let mut any = CUgraphNodeParams::kernel(&params);
            let data = [edge];
            // SAFETY: the caller's graph; `deps` its node; the parameters
            // (and the argument words they point at) live across the call.
            unsafe { graph::add_node(d, graph, deps, Some(&data[..deps.len()]), &mut any) }
        } else {
            let full = if pdl { &[][..] } else { deps };
            // SAFETY: as above.
            unsafe { graph::add_kernel_node(d, graph, full, &params) }
        };
        let node = match added {
            Some(added) => ok(added)?,
            None => return Err(fc_graph::Error::invalid("no cuGraphAdd*Node")),
        };
        if let (Some(p), true, false) = (prev, pdl, per_node) {
            from.push(p);
            to.push(node);
            if from.len() >= every {
                // SAFETY: the caller's graph and its nodes.
                unsafe { flush(d, graph, &mut from, &mut to, edge) }?;
            }
        }
        prev = Some(node);
    }
    // SAFETY: as above.
    unsafe { flush(d, graph, &mut from, &mut to, edge) }
}

/// Adds the pending edges `from[i] -> to[i]` with `edge` in one call.
///
/// # Safety
/// `graph` is a live graph used by this thread only; the nodes are its.
unsafe fn flush(
    d: &Driver,
    graph: CUgraph,
    from: &mut Vec<CUgraphNode>,
    to: &mut Vec<CUgraphNode>,
    edge: CUgraphEdgeData,
) -> Result<()> {
    if from.is_empty() {
        return Ok(());
    }
    let data = vec![edge; from.len()];
    // SAFETY: the caller's graph and its nodes; equal-length arrays.
    let res = unsafe { graph::add_dependencies(d, graph, from, to, Some(&data)) };
    from.clear();
    to.clear();
    match res {
        Some(res) => ok(res),
        None => Err(fc_graph::Error::invalid("no cuGraphAddDependencies")),
    }
}
