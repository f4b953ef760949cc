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
//! It calls the driver through cuda-sys's checked-call layer: it tests the
//! driver, not the library.

use std::ffi::c_void;
use std::thread;

use cuda_sys::result::{self as cu, DriverError};
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

/// A failed call as a test failure.
fn f(e: DriverError) -> Failed {
    fail(e)
}

/// The status a call returned.
fn code<T>(r: cu::Result<T>) -> CUresult {
    match r {
        Ok(_) => CUDA_SUCCESS,
        Err(e) => e.code,
    }
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
        let device = cu::device::get(d, ordinal).map_err(f)?;
        let ctx = cu::context::primary_retain(d, device).map_err(f)?;
        // SAFETY: a context just retained.
        unsafe { cu::context::set_current(d, ctx) }.map_err(f)?;
        let stream = cu::stream::create(d, CU_STREAM_NON_BLOCKING).map_err(f)?;
        // SAFETY: NUL-terminated PTX; no options.
        let module =
            unsafe { cu::module::load_data_ex(d, ELEMENTWISE.as_ptr().cast(), &mut [], &mut []) }.map_err(f)?;
        // SAFETY: a live module.
        let add = unsafe { cu::module::get_function(d, module, c"fc_add_f32") }.map_err(f)?;
        let mut bufs = [0; 3];
        for b in &mut bufs {
            *b = cu::memory::alloc(d, N * 4).map_err(f)?;
            // SAFETY: the allocation just made, on our stream.
            unsafe { cu::memory::memset_d8_async(d, *b, 0, N * 4, stream) }.map_err(f)?;
        }
        // SAFETY: our stream.
        unsafe { cu::stream::synchronize(d, stream) }.map_err(f)?;
        Ok(Rig { device, ctx, stream, add, bufs })
    }

    fn current(&self) -> TestResult {
        // SAFETY: a retained primary context.
        unsafe { cu::context::set_current(d(), self.ctx) }.map_err(f)
    }

    /// `bufs[2] = bufs[0] + bufs[1]` (the first `n` floats) on `stream`.
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
        code(unsafe {
            cu::kernel::launch(
                d(),
                self.add,
                (4, 1, 1),
                (256, 1, 1),
                0,
                stream,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    fn begin(&self, mode: CUstreamCaptureMode) -> TestResult {
        // SAFETY: our stream, not capturing.
        unsafe { cu::stream::begin_capture(d(), self.stream, mode) }.map_err(f)
    }

    fn status(&self) -> Result<CUstreamCaptureStatus, Failed> {
        // SAFETY: our stream.
        unsafe { cu::stream::is_capturing(d(), self.stream) }.map_err(f)
    }

    /// Ends the capture: its status; the graph it made is destroyed.
    fn end(&self) -> CUresult {
        // SAFETY: our stream; the graph, if any, is ours to destroy.
        match unsafe { cu::stream::end_capture(d(), self.stream) } {
            Ok(g) => {
                // SAFETY: as above.
                let _ = unsafe { cu::graph::destroy(d(), g) };
                CUDA_SUCCESS
            }
            Err(e) => e.code,
        }
    }

    /// The first `n` floats of buffer `i`.
    fn download(&self, i: usize, n: usize) -> Result<Vec<f32>, Failed> {
        let mut host = vec![0f32; n];
        // SAFETY: `host` holds `n` floats; our buffer and stream.
        unsafe {
            cu::memory::memcpy_dtoh_async(d(), host.as_mut_ptr().cast(), self.bufs[i], n * 4, self.stream)
                .map_err(f)?;
            cu::stream::synchronize(d(), self.stream).map_err(f)?;
        }
        Ok(host)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let d = d();
        // SAFETY: what `new` made, freed once, the context current.
        unsafe {
            let _ = cu::context::set_current(d, self.ctx);
            let _ = cu::stream::synchronize(d, self.stream);
            for b in self.bufs {
                let _ = cu::memory::free(d, b);
            }
            let _ = cu::stream::destroy(d, self.stream);
            let _ = cu::context::primary_release(d, self.device);
        }
    }
}

/// `g` on a new thread with `rig`'s context current; its result.
fn on_other_thread<T: Send>(rig: &Rig, g: impl FnOnce() -> T + Send) -> Result<T, Failed> {
    thread::scope(|s| s.spawn(|| rig.current().map(|()| g())).join()).map_err(|_| fail("the other thread panicked"))?
}

fn alloc_free() -> CUresult {
    match cu::memory::alloc(d(), 1 << 16) {
        Ok(p) => {
            // SAFETY: freed once, at once.
            let _ = unsafe { cu::memory::free(d(), p) };
            CUDA_SUCCESS
        }
        Err(e) => e.code,
    }
}

/// `g` with the calling thread's capture mode RELAXED (restored after).
fn relaxed<T>(g: impl FnOnce() -> T) -> Result<T, Failed> {
    let previous = cu::stream::thread_exchange_capture_mode(d(), CU_STREAM_CAPTURE_MODE_RELAXED).map_err(f)?;
    let r = g();
    cu::stream::thread_exchange_capture_mode(d(), previous).map_err(f)?;
    Ok(r)
}

fn global_capture_refuses_another_threads_alloc() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_GLOBAL)?;
    ensure!(rig.launch_add(rig.stream) == CUDA_SUCCESS, "captured launch");
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
    ensure!(rig.launch_add(rig.stream) == CUDA_SUCCESS, "captured launch");
    let rc = on_other_thread(&rig, alloc_free)?;
    let end = rig.end();
    ensure!(rc == CUDA_SUCCESS, "the other thread's alloc returned {rc}");
    ensure!(end == CUDA_SUCCESS, "end {end}");
    Ok(())
}

fn relaxed_thread_is_not_refused() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_GLOBAL)?;
    let rc = on_other_thread(&rig, || relaxed(alloc_free))??;
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
    let rc = relaxed(alloc_free)?;
    let end = rig.end();
    ensure!(rc == CUDA_SUCCESS && end == CUDA_SUCCESS, "RELAXED: alloc {rc}, end {end}");
    Ok(())
}

fn device_sync_conflicts_with_a_capture_of_its_context() -> TestResult {
    let rig = Rig::new(0)?;
    rig.begin(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    ensure!(rig.launch_add(rig.stream) == CUDA_SUCCESS, "captured launch");
    let rc = on_other_thread(&rig, || code(cu::context::synchronize(d())))?;
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
    let rc = code(unsafe { cu::stream::query(d(), rig.stream) });
    let end = rig.end();
    println!("cuStreamQuery of a capturing stream {rc}, end {end}");
    ensure!(rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamQuery returned {rc}");
    ensure!(end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "end {end}");
    Ok(())
}

fn fork_join_and_unjoined_forks() -> TestResult {
    let rig = Rig::new(0)?;
    let d = d();
    let side = cu::stream::create(d, CU_STREAM_NON_BLOCKING).map_err(f)?;
    let fork = cu::event::create(d, CU_EVENT_DISABLE_TIMING).map_err(f)?;
    let join = cu::event::create(d, CU_EVENT_DISABLE_TIMING).map_err(f)?;
    let round = |rejoin: bool| -> Result<(CUresult, usize), Failed> {
        rig.begin(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        // SAFETY: our streams and events; the side stream joins the capture
        // through the fork event.
        unsafe {
            cu::event::record(d, fork, rig.stream).map_err(f)?;
            cu::stream::wait_event(d, side, fork, 0).map_err(f)?;
            ensure!(rig.launch_add(side) == CUDA_SUCCESS, "side launch");
            ensure!(rig.launch_add(rig.stream) == CUDA_SUCCESS, "origin launch");
            if rejoin {
                cu::event::record(d, join, side).map_err(f)?;
                cu::stream::wait_event(d, rig.stream, join, 0).map_err(f)?;
            }
            match cu::stream::end_capture(d, rig.stream) {
                Ok(g) => {
                    let n = cu::graph::node_count(d, g).map_err(f)?;
                    let _ = cu::graph::destroy(d, g);
                    Ok((CUDA_SUCCESS, n))
                }
                Err(e) => Ok((e.code, 0)),
            }
        }
    };
    let (rc, nodes) = round(true)?;
    ensure!(rc == CUDA_SUCCESS && nodes == 2, "joined fork: end {rc}, {nodes} nodes");
    let (rc, _) = round(false)?;
    println!("unjoined fork: end {rc}");
    ensure!(rc == CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "unjoined fork: end {rc}");
    // SAFETY: ours, destroyed once; the side stream left the capture.
    unsafe {
        let _ = cu::event::destroy(d, fork);
        let _ = cu::event::destroy(d, join);
        let _ = cu::stream::destroy(d, side);
    }
    Ok(())
}

/// Kernel node parameters of `bufs[2] = bufs[0] + bufs[1]` over `n` floats,
/// their argument values in `words`.
fn add_params(rig: &Rig, words: &mut [u64; 4], args: &mut [*mut c_void; 4], n: u32) -> CUDA_KERNEL_NODE_PARAMS_v2 {
    *words = [rig.bufs[0], rig.bufs[1], rig.bufs[2], u64::from(n)];
    for (a, w) in args.iter_mut().zip(words.iter_mut()) {
        *a = (w as *mut u64).cast();
    }
    CUDA_KERNEL_NODE_PARAMS_v2 {
        func: rig.add,
        gridDimX: n.div_ceil(256),
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
    }
}

/// A graph of two kernel nodes, the second after the first through a
/// programmatic edge where the driver and device have them (12.3+, sm_90),
/// else a full one.
fn two_node_graph(rig: &Rig) -> Result<(CUgraph, [CUgraphNode; 2], bool), Failed> {
    let d = d();
    let (mut words, mut args) = ([0u64; 4], [std::ptr::null_mut(); 4]);
    let p = add_params(rig, &mut words, &mut args, N as u32);
    let g = cu::graph::create(d, 0).map_err(f)?;
    let no = || fail("no cuGraphAddKernelNode");
    // SAFETY: the parameters point to live values; nodes of `g`.
    let n0 = unsafe { cu::graph::add_kernel_node(d, g, &[], &p) }.ok_or_else(no)?.map_err(f)?;
    // SAFETY: as above.
    let n1 = unsafe { cu::graph::add_kernel_node(d, g, &[], &p) }.ok_or_else(no)?.map_err(f)?;
    let cc = cu::device::get_attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rig.device).map_err(f)?;
    let programmatic = d.has_programmatic_edges() && cc >= 9;
    let data = CUgraphEdgeData {
        from_port: if programmatic { CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC } else { 0 },
        to_port: 0,
        type_: if programmatic { CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8 } else { 0 },
        reserved: [0; 5],
    };
    // SAFETY: nodes of `g`; one edge.
    unsafe { cu::graph::add_dependencies(d, g, &[n0], &[n1], programmatic.then_some(&[data][..])) }
        .ok_or_else(|| fail("no cuGraphAddDependencies"))?
        .map_err(f)?;
    Ok((g, [n0, n1], programmatic))
}

fn edge_count_needs_no_edge_data() -> TestResult {
    let rig = Rig::new(0)?;
    let (g, _, programmatic) = two_node_graph(&rig)?;
    // The adapter asks the count first with no arrays and no edge data,
    // then the edges (with their data where the ABI has it).
    // SAFETY: our graph.
    let edges = unsafe { cu::graph::get_edges(d(), g) }.ok_or_else(|| fail("no cuGraphGetEdges"))?.map_err(f)?;
    println!("edges ({}): {edges:?}", if programmatic { "programmatic" } else { "full" });
    ensure!(edges.len() == 1, "{} edges", edges.len());
    if programmatic {
        ensure!(edges[0].data.map(|e| e.type_) == Some(CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8), "{edges:?}");
    }
    // SAFETY: ours, destroyed once.
    let _ = unsafe { cu::graph::destroy(d(), g) };
    Ok(())
}

fn exec_nodes_keep_their_source_handles_after_an_update() -> TestResult {
    let rig = Rig::new(0)?;
    let d = d();
    let (g1, [n0, _], _) = two_node_graph(&rig)?;
    let (g2, _, _) = two_node_graph(&rig)?;
    // SAFETY: our graphs and executable throughout; the parameters point to
    // live values.
    unsafe {
        let exec = cu::graph_exec::instantiate(d, g1, 0).map_err(f)?;
        let u = cu::graph_exec::update(d, exec, g2).ok_or_else(|| fail("no cuGraphExecUpdate"))?.map_err(f)?;
        ensure!(u.updated(), "update refused: {u:?}");
        // The node of the graph the executable was instantiated from still
        // names its node after the update: here, an add of 7 floats only.
        let (mut words, mut args) = ([0u64; 4], [std::ptr::null_mut(); 4]);
        let p = add_params(&rig, &mut words, &mut args, 7);
        cu::graph_exec::kernel_node_set_params(d, exec, n0, &p).ok_or_else(|| fail("no set params"))?.map_err(f)?;
        let _ = cu::graph_exec::destroy(d, exec);
        let _ = cu::graph::destroy(d, g1);
        let _ = cu::graph::destroy(d, g2);
    }
    Ok(())
}

fn memset_node_update_changes_element_size() -> TestResult {
    let rig = Rig::new(0)?;
    let d = d();
    let bytes =
        CUDA_MEMSET_NODE_PARAMS_v1 { dst: rig.bufs[0], pitch: 0, value: 0, elementSize: 1, width: N * 4, height: 1 };
    let words = CUDA_MEMSET_NODE_PARAMS_v1 { elementSize: 4, width: N, value: 1.0f32.to_bits(), ..bytes };
    let g = cu::graph::create(d, 0).map_err(f)?;
    // SAFETY: our graph, buffer, context and stream throughout.
    unsafe {
        let node = cu::graph::add_memset_node(d, g, &[], &bytes, rig.ctx).map_err(f)?;
        let exec = cu::graph_exec::instantiate(d, g, 0).map_err(f)?;
        cu::graph_exec::memset_node_set_params(d, exec, node, &words, rig.ctx).map_err(f)?;
        cu::graph_exec::launch(d, exec, rig.stream).map_err(f)?;
        let host = rig.download(0, N)?;
        let _ = cu::graph_exec::destroy(d, exec);
        let _ = cu::graph::destroy(d, g);
        ensure!(host.iter().all(|&v| v == 1.0), "the updated memset wrote {:?}", &host[..4]);
    }
    Ok(())
}

fn launch_on_a_stream_of_another_context() -> TestResult {
    if d().driver_version() < 13000 {
        println!("[SKIP] gpu_driver_rules::launch_on_a_stream_of_another_context: needs a CUDA 13 driver");
        return Ok(());
    }
    let (r0, r1) = (Rig::new(0)?, Rig::new(1)?);
    // Device 1's kernel on device 1's stream, device 0's context current.
    r0.current()?;
    let rc = r1.launch_add(r1.stream);
    r1.current()?;
    ensure!(rc == CUDA_SUCCESS, "launch {rc}");
    // SAFETY: device 1's stream, its context current.
    unsafe { cu::stream::synchronize(d(), r1.stream) }.map_err(f)?;
    Ok(())
}
