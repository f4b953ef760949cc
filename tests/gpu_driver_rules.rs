//! The driver's own rules that the driver double (driver-double/) models,
//! asserted against whichever driver is loaded: on a GPU host the real
//! one, in CI the double (scripts/test-double.sh). Passing on both is what
//! says the double follows the driver; a rule the two disagree on fails
//! here first.
//!
//! Stream capture's interaction rules (NVIDIA's documentation of
//! `cuThreadExchangeStreamCaptureMode`): a GLOBAL capture refuses another
//! thread's potentially unsafe call and is invalidated by it; a
//! THREAD_LOCAL one does not; a RELAXED thread is never refused; the
//! capturing thread's own unsafe call is refused under THREAD_LOCAL. Calls
//! that conflict with a capture in any mode: querying the capturing
//! stream, a device-wide synchronisation of its context. Forks and joins
//! through events, and an unjoined fork. Graph queries and updates the
//! library relies on: edge counts without edge data, node handles after a
//! whole-graph update, memset node updates, launches on a stream of
//! another context.
//!
//! Raw driver calls: this suite tests the driver, not the library.

use std::ffi::c_void;
use std::thread;

use cuda_sys::*;
use fc_graph_tests::{ensure, fail, run_gpu_tests_one_at_a_time, GpuTest};
use libtest_mimic::Failed;

type TestResult = Result<(), Failed>;

fn main() {
    let t = |name, devices, body| GpuTest { name, devices, body };
    // One at a time: a GLOBAL capture refuses every other thread's unsafe
    // calls, a sibling test's included.
    run_gpu_tests_one_at_a_time(
        "gpu_driver_rules",
        vec![
            t("global_capture_refuses_another_threads_alloc", 1, global_capture_refuses_another_threads_alloc),
            t("thread_local_capture_leaves_other_threads_alone", 1, thread_local_capture_leaves_other_threads_alone),
            t("relaxed_thread_is_not_refused", 1, relaxed_thread_is_not_refused),
            t("own_unsafe_call_refused_in_thread_local_capture", 1, own_unsafe_call_refused_in_thread_local_capture),
            t(
                "device_sync_conflicts_with_a_capture_of_its_context",
                1,
                device_sync_conflicts_with_a_capture_of_its_context,
            ),
            t("querying_a_capturing_stream_invalidates_it", 1, querying_a_capturing_stream_invalidates_it),
            t("fork_join_and_unjoined_forks", 1, fork_join_and_unjoined_forks),
            t("edge_count_needs_no_edge_data", 1, edge_count_needs_no_edge_data),
            t(
                "exec_nodes_keep_their_source_handles_after_an_update",
                1,
                exec_nodes_keep_their_source_handles_after_an_update,
            ),
            t("memset_node_update_changes_element_size", 1, memset_node_update_changes_element_size),
            t("launch_on_a_stream_of_another_context", 2, launch_on_a_stream_of_another_context),
        ],
    )
}

const N: usize = 1024;
const ELEMENTWISE: &str = concat!(include_str!("../fc-graph/kernels/elementwise.ptx"), "\0");

fn d() -> &'static Driver {
    match fc_graph::driver() {
        Ok(d) => d,
        Err(e) => panic!("the harness found a driver: {e}"),
    }
}

fn ok(call: &str, rc: CUresult) -> TestResult {
    ensure!(rc == CUDA_SUCCESS, "{call} returned {rc}");
    Ok(())
}

/// A device's primary context with a stream, a module of the built-ins and
/// three buffers of N floats.
struct Rig {
    device: CUdevice,
    ctx: CUcontext,
    stream: CUstream,
    add: CUfunction,
    bufs: [CUdeviceptr; 3],
}

// SAFETY: driver handles, usable from any thread.
unsafe impl Send for Rig {}
// SAFETY: as above; the fields are never written after construction.
unsafe impl Sync for Rig {}

impl Rig {
    fn new(ordinal: i32) -> Result<Rig, Failed> {
        let d = d();
        let mut device: CUdevice = 0;
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: valid out-pointers throughout; the context is made current
        // before the calls that need one.
        unsafe {
            ok("cuDeviceGet", (d.cuDeviceGet)(&mut device, ordinal))?;
            ok("cuDevicePrimaryCtxRetain", (d.cuDevicePrimaryCtxRetain)(&mut ctx, device))?;
            ok("cuCtxSetCurrent", (d.cuCtxSetCurrent)(ctx))?;
        }
        let mut stream: CUstream = std::ptr::null_mut();
        let mut module: CUmodule = std::ptr::null_mut();
        let mut add: CUfunction = std::ptr::null_mut();
        let mut bufs = [0; 3];
        // SAFETY: as above; the image is NUL-terminated PTX.
        unsafe {
            ok("cuStreamCreate", (d.cuStreamCreate)(&mut stream, CU_STREAM_NON_BLOCKING))?;
            let mut none: [CUjit_option; 0] = [];
            let mut values: [*mut c_void; 0] = [];
            ok(
                "cuModuleLoadDataEx",
                (d.cuModuleLoadDataEx)(
                    &mut module,
                    ELEMENTWISE.as_ptr().cast(),
                    0,
                    none.as_mut_ptr(),
                    values.as_mut_ptr(),
                ),
            )?;
            ok("cuModuleGetFunction", (d.cuModuleGetFunction)(&mut add, module, c"fc_add_f32".as_ptr()))?;
            for b in &mut bufs {
                ok("cuMemAlloc", (d.cuMemAlloc)(b, N * 4))?;
                ok("cuMemsetD8Async", (d.cuMemsetD8Async)(*b, 0, N * 4, stream))?;
            }
            ok("cuStreamSynchronize", (d.cuStreamSynchronize)(stream))?;
        }
        Ok(Rig { device, ctx, stream, add, bufs })
    }

    fn current(&self) -> TestResult {
        // SAFETY: a retained primary context.
        ok("cuCtxSetCurrent", unsafe { (d().cuCtxSetCurrent)(self.ctx) })
    }

    /// `bufs[2] = bufs[0] + bufs[1]` on `stream`.
    fn launch_add(&self, stream: CUstream) -> CUresult {
        let [a, b, c] = self.bufs;
        let n = N as u32;
        let mut args: [*mut c_void; 4] = [
            &a as *const u64 as *mut c_void,
            &b as *const u64 as *mut c_void,
            &c as *const u64 as *mut c_void,
            &n as *const u32 as *mut c_void,
        ];
        // SAFETY: the kernel's four parameters, each pointing to a live value.
        unsafe {
            (d().cuLaunchKernel)(self.add, 4, 1, 1, 256, 1, 1, 0, stream, args.as_mut_ptr(), std::ptr::null_mut())
        }
    }

    fn begin(&self, mode: CUstreamCaptureMode) -> TestResult {
        // SAFETY: our stream, not capturing.
        ok("cuStreamBeginCapture", unsafe { (d().cuStreamBeginCapture)(self.stream, mode) })
    }

    fn status(&self) -> Result<CUstreamCaptureStatus, Failed> {
        let mut s = 99;
        // SAFETY: valid out-pointer.
        ok("cuStreamIsCapturing", unsafe { (d().cuStreamIsCapturing)(self.stream, &mut s) })?;
        Ok(s)
    }

    /// Ends the capture: its status, and destroys the graph it made.
    fn end(&self) -> CUresult {
        let mut g: CUgraph = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the graph, if any, is ours to destroy.
        unsafe {
            let rc = (d().cuStreamEndCapture)(self.stream, &mut g);
            if !g.is_null() {
                (d().cuGraphDestroy)(g);
            }
            rc
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let d = d();
        // SAFETY: what `new` made, freed once, the context current.
        unsafe {
            (d.cuCtxSetCurrent)(self.ctx);
            (d.cuStreamSynchronize)(self.stream);
            for b in self.bufs {
                (d.cuMemFree)(b);
            }
            (d.cuStreamDestroy)(self.stream);
            (d.cuDevicePrimaryCtxRelease)(self.device);
        }
    }
}

/// `f` on a new thread with `rig`'s context current; its result.
fn on_other_thread<T: Send>(rig: &Rig, f: impl FnOnce() -> T + Send) -> Result<T, Failed> {
    thread::scope(|s| s.spawn(|| rig.current().map(|()| f())).join()).map_err(|_| fail("the other thread panicked"))?
}

fn alloc_free() -> CUresult {
    let mut p: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; freed at once.
    unsafe {
        let rc = (d().cuMemAlloc)(&mut p, 1 << 16);
        if rc == CUDA_SUCCESS {
            (d().cuMemFree)(p);
        }
        rc
    }
}

fn global_capture_refuses_another_threads_alloc() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_GLOBAL)?;
    ok("cuLaunchKernel (captured)", rig.launch_add(rig.stream))?;
    let rc = on_other_thread(&rig, alloc_free)?;
    let status = rig.status()?;
    let end = rig.end();
    println!("GLOBAL capture: other thread's cuMemAlloc {rc}, status {status}, end {end}");
    ensure!(rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the other thread's alloc returned {rc}");
    ensure!(status == CU_STREAM_CAPTURE_STATUS_INVALIDATED, "status {status}");
    ensure!(end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "end {end}");
    Ok(())
}

fn thread_local_capture_leaves_other_threads_alone() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    ok("cuLaunchKernel (captured)", rig.launch_add(rig.stream))?;
    let rc = on_other_thread(&rig, alloc_free)?;
    let end = rig.end();
    ensure!(rc == CUDA_SUCCESS, "the other thread's alloc returned {rc}");
    ensure!(end == CUDA_SUCCESS, "end {end}");
    Ok(())
}

fn relaxed_thread_is_not_refused() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_GLOBAL)?;
    let rc = on_other_thread(&rig, || {
        let mut mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: valid in/out pointer; restored after the call.
        unsafe { (d().cuThreadExchangeStreamCaptureMode)(&mut mode) };
        let rc = alloc_free();
        // SAFETY: as above.
        unsafe { (d().cuThreadExchangeStreamCaptureMode)(&mut mode) };
        rc
    })?;
    let end = rig.end();
    ensure!(rc == CUDA_SUCCESS, "a RELAXED thread's alloc returned {rc}");
    ensure!(end == CUDA_SUCCESS, "end {end}");
    Ok(())
}

fn own_unsafe_call_refused_in_thread_local_capture() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let rc = alloc_free();
    let end = rig.end();
    ensure!(rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the capturing thread's alloc returned {rc}");
    ensure!(end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "end {end}");
    // The same under RELAXED thread mode: allowed.
    rig.begin(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let mut mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: valid in/out pointer; restored below.
    unsafe { (d().cuThreadExchangeStreamCaptureMode)(&mut mode) };
    let rc = alloc_free();
    // SAFETY: as above.
    unsafe { (d().cuThreadExchangeStreamCaptureMode)(&mut mode) };
    let end = rig.end();
    ensure!(rc == CUDA_SUCCESS && end == CUDA_SUCCESS, "RELAXED: alloc {rc}, end {end}");
    Ok(())
}

fn device_sync_conflicts_with_a_capture_of_its_context() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    ok("cuLaunchKernel (captured)", rig.launch_add(rig.stream))?;
    let rc = on_other_thread(&rig, || {
        // SAFETY: no arguments; the context is current.
        unsafe { (d().cuCtxSynchronize)() }
    })?;
    let status = rig.status()?;
    let end = rig.end();
    println!("THREAD_LOCAL capture: other thread's cuCtxSynchronize {rc}, status {status}, end {end}");
    ensure!(rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuCtxSynchronize returned {rc}");
    ensure!(end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "end {end}");
    Ok(())
}

fn querying_a_capturing_stream_invalidates_it() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_RELAXED)?;
    // SAFETY: our stream.
    let rc = unsafe { (d().cuStreamQuery)(rig.stream) };
    let end = rig.end();
    println!("cuStreamQuery of a capturing stream {rc}, end {end}");
    ensure!(rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamQuery returned {rc}");
    ensure!(end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "end {end}");
    Ok(())
}

fn fork_join_and_unjoined_forks() -> TestResult {
    let rig = Rig::new(0)?;
    let d = d();
    let (mut side, mut fork, mut join) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: valid out-pointers; the context is current.
    unsafe {
        ok("cuStreamCreate", (d.cuStreamCreate)(&mut side, CU_STREAM_NON_BLOCKING))?;
        ok("cuEventCreate", (d.cuEventCreate)(&mut fork, CU_EVENT_DISABLE_TIMING))?;
        ok("cuEventCreate", (d.cuEventCreate)(&mut join, CU_EVENT_DISABLE_TIMING))?;
    }
    let round = |rejoin: bool| -> Result<(CUresult, usize), Failed> {
        rig.begin(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        // SAFETY: our streams and events; the side stream joins the capture
        // through the fork event.
        unsafe {
            ok("cuEventRecord", (d.cuEventRecord)(fork, rig.stream))?;
            ok("cuStreamWaitEvent", (d.cuStreamWaitEvent)(side, fork, 0))?;
            ok("launch (side)", rig.launch_add(side))?;
            ok("launch (origin)", rig.launch_add(rig.stream))?;
            if rejoin {
                ok("cuEventRecord", (d.cuEventRecord)(join, side))?;
                ok("cuStreamWaitEvent", (d.cuStreamWaitEvent)(rig.stream, join, 0))?;
            }
            let mut g: CUgraph = std::ptr::null_mut();
            let rc = (d.cuStreamEndCapture)(rig.stream, &mut g);
            let mut n = 0usize;
            if !g.is_null() {
                (d.cuGraphGetNodes)(g, std::ptr::null_mut(), &mut n);
                (d.cuGraphDestroy)(g);
            }
            Ok((rc, n))
        }
    };
    let (rc, nodes) = round(true)?;
    ensure!(rc == CUDA_SUCCESS && nodes == 2, "joined fork: end {rc}, {nodes} nodes");
    let (rc, _) = round(false)?;
    println!("unjoined fork: end {rc}");
    ensure!(rc == CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "unjoined fork: end {rc}");
    // SAFETY: ours, destroyed once; the side stream left the capture.
    unsafe {
        (d.cuEventDestroy)(fork);
        (d.cuEventDestroy)(join);
        (d.cuStreamDestroy)(side);
    }
    Ok(())
}

/// A graph of two kernel nodes, the second after the first through a
/// programmatic edge where the driver and device have them (12.3+, sm_90),
/// else a full one.
fn two_node_graph(rig: &Rig) -> Result<(CUgraph, [CUgraphNode; 2], bool), Failed> {
    let d = d();
    let [a, b, c] = rig.bufs;
    let n = N as u32;
    let mut args: [*mut c_void; 4] = [
        &a as *const u64 as *mut c_void,
        &b as *const u64 as *mut c_void,
        &c as *const u64 as *mut c_void,
        &n as *const u32 as *mut c_void,
    ];
    let p = CUDA_KERNEL_NODE_PARAMS_v2 {
        func: rig.add,
        gridDimX: 4,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 256,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: args.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    };
    let mut g: CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    ok("cuGraphCreate", unsafe { (d.cuGraphCreate)(&mut g, 0) })?;
    // SAFETY: the parameters point to live values; nodes of `g`.
    let n0 = unsafe { d.graph_add_kernel_node(g, &[], &p) }
        .ok_or_else(|| fail("no cuGraphAddKernelNode"))?
        .map_err(|rc| fail(format!("add: {rc}")))?;
    // SAFETY: as above.
    let n1 = unsafe { d.graph_add_kernel_node(g, &[], &p) }
        .ok_or_else(|| fail("no cuGraphAddKernelNode"))?
        .map_err(|rc| fail(format!("add: {rc}")))?;
    let mut cc = 0;
    // SAFETY: valid out-pointer.
    unsafe { (d.cuDeviceGetAttribute)(&mut cc, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rig.device) };
    let programmatic = d.has_programmatic_edges() && cc >= 9;
    let data = CUgraphEdgeData {
        from_port: if programmatic { CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC } else { 0 },
        to_port: 0,
        type_: if programmatic { CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8 } else { 0 },
        reserved: [0; 5],
    };
    // SAFETY: nodes of `g`; one edge.
    let rc = unsafe { d.graph_add_dependencies(g, &[n0], &[n1], programmatic.then_some(&[data][..])) }
        .ok_or_else(|| fail("no cuGraphAddDependencies"))?;
    ok("cuGraphAddDependencies", rc)?;
    Ok((g, [n0, n1], programmatic))
}

fn edge_count_needs_no_edge_data() -> TestResult {
    let rig = Rig::new(0)?;
    let d = d();
    let (g, _, programmatic) = two_node_graph(&rig)?;
    let mut n = 0usize;
    let rc = match d.cuGraphGetEdges {
        // SAFETY: a count query: no arrays.
        Some(cuda_sys::functions::abi::cuGraphGetEdges::Abi::V12030(f)) => unsafe {
            f(g, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), &mut n)
        },
        // SAFETY: as above.
        Some(cuda_sys::functions::abi::cuGraphGetEdges::Abi::V10000(f)) => unsafe {
            f(g, std::ptr::null_mut(), std::ptr::null_mut(), &mut n)
        },
        None => return Err(fail("no cuGraphGetEdges")),
    };
    println!(
        "edge count without edge data ({}): {rc}, {n} edge(s)",
        if programmatic { "programmatic" } else { "full" }
    );
    ensure!(rc == CUDA_SUCCESS && n == 1, "count query: {rc}, {n} edges");
    // SAFETY: our graph's edges, read through the adapter.
    let edges = unsafe { d.graph_edges(g) }
        .ok_or_else(|| fail("no cuGraphGetEdges"))?
        .map_err(|rc| fail(format!("edges: {rc}")))?;
    ensure!(edges.len() == 1, "{} edges", edges.len());
    if programmatic {
        ensure!(edges[0].data.map(|e| e.type_) == Some(CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8), "{edges:?}");
    }
    // SAFETY: ours, destroyed once.
    unsafe { (d.cuGraphDestroy)(g) };
    Ok(())
}

fn exec_nodes_keep_their_source_handles_after_an_update() -> TestResult {
    let rig = Rig::new(0)?;
    let d = d();
    let (g1, [n0, _], _) = two_node_graph(&rig)?;
    let (g2, _, _) = two_node_graph(&rig)?;
    let mut exec: CUgraphExec = std::ptr::null_mut();
    // SAFETY: valid out-pointer; our graph.
    ok("cuGraphInstantiateWithFlags", unsafe { (d.cuGraphInstantiateWithFlags)(&mut exec, g1, 0) })?;
    // SAFETY: our executable and a graph of the same shape.
    let u = unsafe { d.graph_exec_update(exec, g2) }.ok_or_else(|| fail("no cuGraphExecUpdate"))?;
    ensure!(u.updated(), "update refused: {u:?}");
    let [a, b, c] = rig.bufs;
    let n = 7u32;
    let mut args: [*mut c_void; 4] = [
        &a as *const u64 as *mut c_void,
        &b as *const u64 as *mut c_void,
        &c as *const u64 as *mut c_void,
        &n as *const u32 as *mut c_void,
    ];
    let p = CUDA_KERNEL_NODE_PARAMS_v2 {
        func: rig.add,
        gridDimX: 1,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 32,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: args.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    };
    // The node of the graph the executable was instantiated from still
    // names its node after the update.
    // SAFETY: our executable, a node of its source graph, live parameters.
    let rc = unsafe { d.graph_exec_kernel_node_set_params(exec, n0, &p) }.ok_or_else(|| fail("no set params"))?;
    ok("cuGraphExecKernelNodeSetParams (source node)", rc)?;
    // SAFETY: ours, destroyed once.
    unsafe {
        (d.cuGraphExecDestroy)(exec);
        (d.cuGraphDestroy)(g1);
        (d.cuGraphDestroy)(g2);
    }
    Ok(())
}

fn memset_node_update_changes_element_size() -> TestResult {
    let rig = Rig::new(0)?;
    let d = d();
    let bytes =
        CUDA_MEMSET_NODE_PARAMS_v1 { dst: rig.bufs[0], pitch: 0, value: 0, elementSize: 1, width: N * 4, height: 1 };
    let words = CUDA_MEMSET_NODE_PARAMS_v1 { elementSize: 4, width: N, value: 1.0f32.to_bits(), ..bytes };
    let (mut g, mut node, mut exec) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    let mut host = vec![0f32; N];
    // SAFETY: valid out-pointers, our buffer and context; the copy reads N
    // floats into `host`.
    unsafe {
        ok("cuGraphCreate", (d.cuGraphCreate)(&mut g, 0))?;
        ok("cuGraphAddMemsetNode", (d.cuGraphAddMemsetNode)(&mut node, g, std::ptr::null(), 0, &bytes, rig.ctx))?;
        ok("cuGraphInstantiateWithFlags", (d.cuGraphInstantiateWithFlags)(&mut exec, g, 0))?;
        ok("cuGraphExecMemsetNodeSetParams", (d.cuGraphExecMemsetNodeSetParams)(exec, node, &words, rig.ctx))?;
        ok("cuGraphLaunch", (d.cuGraphLaunch)(exec, rig.stream))?;
        ok("cuMemcpyDtoHAsync", (d.cuMemcpyDtoHAsync)(host.as_mut_ptr().cast(), rig.bufs[0], N * 4, rig.stream))?;
        ok("cuStreamSynchronize", (d.cuStreamSynchronize)(rig.stream))?;
        (d.cuGraphExecDestroy)(exec);
        (d.cuGraphDestroy)(g);
    }
    ensure!(host.iter().all(|&v| v == 1.0), "the updated memset wrote {:?}", &host[..4]);
    Ok(())
}

fn launch_on_a_stream_of_another_context() -> TestResult {
    let d = d();
    if d.driver_version() < 13000 {
        println!("[SKIP] gpu_driver_rules::launch_on_a_stream_of_another_context: needs a CUDA 13 driver");
        return Ok(());
    }
    let (r0, r1) = (Rig::new(0)?, Rig::new(1)?);
    // Device 0's context current, device 1's kernel on device 1's stream.
    r0.current()?;
    let rc = r1.launch_add(r1.stream);
    r1.current()?;
    // SAFETY: device 1's stream, its context current.
    let sync = unsafe { (d.cuStreamSynchronize)(r1.stream) };
    ensure!(rc == CUDA_SUCCESS && sync == CUDA_SUCCESS, "launch {rc}, sync {sync}");
    Ok(())
}
