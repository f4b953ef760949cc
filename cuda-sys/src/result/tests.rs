//! The result layer without a GPU: a table whose entries are the stubs
//! below (each records that it ran, per thread), or, for every other
//! entry, a function that aborts the test binary if called.

use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};

use super::*;
use crate::constants::*;
use crate::functions::DriverFns;
use crate::types::*;

thread_local! {
    /// The stubs' calls on this thread, by name.
    static CALLS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
    /// The node count `cuGraphGetNodes` reports.
    static NODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn note(name: &'static str) {
    CALLS.with(|c| c.borrow_mut().push(name));
}

fn calls() -> Vec<&'static str> {
    CALLS.with(|c| std::mem::take(&mut *c.borrow_mut()))
}

extern "C" fn not_stubbed() {
    // An entry without a stub was called: a bug of the layer under test.
    std::process::abort();
}

unsafe extern "C" fn get_error_name(code: CUresult, p: *mut *const c_char) -> CUresult {
    note("cuGetErrorName");
    let s: &'static CStr = match code {
        CUDA_ERROR_OUT_OF_MEMORY => c"CUDA_ERROR_OUT_OF_MEMORY",
        CUDA_ERROR_INVALID_VALUE => c"CUDA_ERROR_INVALID_VALUE",
        // The driver succeeds without a string.
        CUDA_ERROR_NOT_FOUND => {
            // SAFETY: the caller's out-pointer.
            unsafe { *p = std::ptr::null() };
            return CUDA_SUCCESS;
        }
        _ => return CUDA_ERROR_INVALID_VALUE,
    };
    // SAFETY: the caller's out-pointer.
    unsafe { *p = s.as_ptr() };
    CUDA_SUCCESS
}

unsafe extern "C" fn get_error_string(code: CUresult, p: *mut *const c_char) -> CUresult {
    note("cuGetErrorString");
    if code != CUDA_ERROR_OUT_OF_MEMORY {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's out-pointer.
    unsafe { *p = c"out of memory".as_ptr() };
    CUDA_SUCCESS
}

unsafe extern "C" fn device_get_name(name: *mut c_char, len: c_int, _dev: CUdevice) -> CUresult {
    note("cuDeviceGetName");
    assert_eq!(len, 256);
    let text = b"Fake GPU\0left over";
    // SAFETY: the caller's buffer of `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), name, text.len()) };
    CUDA_SUCCESS
}

unsafe extern "C" fn graph_get_nodes(_g: CUgraph, nodes: *mut CUgraphNode, n: *mut usize) -> CUresult {
    note(if nodes.is_null() { "cuGraphGetNodes(count)" } else { "cuGraphGetNodes(list)" });
    let have = NODES.with(|c| c.get());
    if !nodes.is_null() {
        // SAFETY: the caller's array of `*n` nodes; at most that many written.
        let room = unsafe { *n };
        for i in 0..have.min(room) {
            // SAFETY: as above.
            unsafe { *nodes.add(i) = fake(i + 1) };
        }
    }
    // SAFETY: the caller's out-pointer.
    unsafe { *n = have };
    CUDA_SUCCESS
}

unsafe extern "C" fn stream_query(s: CUstream) -> CUresult {
    note("cuStreamQuery");
    match s as usize {
        1 => CUDA_SUCCESS,
        2 => CUDA_ERROR_NOT_READY,
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}

unsafe extern "C" fn stream_end_capture(s: CUstream, g: *mut CUgraph) -> CUresult {
    note("cuStreamEndCapture");
    // A failed end that still hands out a graph (stream 2), a failure
    // without one (3), success (anything else).
    let graph = fake(0x60);
    match s as usize {
        2 => {
            // SAFETY: the caller's out-pointer.
            unsafe { *g = graph };
            CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
        }
        3 => CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
        _ => {
            // SAFETY: the caller's out-pointer.
            unsafe { *g = graph };
            CUDA_SUCCESS
        }
    }
}

unsafe extern "C" fn graph_destroy(_g: CUgraph) -> CUresult {
    note("cuGraphDestroy");
    CUDA_SUCCESS
}

unsafe extern "C" fn module_load_data_ex(
    m: *mut CUmodule,
    _image: *const c_void,
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
) -> CUresult {
    note("cuModuleLoadDataEx");
    // Empty option arrays arrive as null pointers.
    assert_eq!(n == 0, options.is_null());
    assert_eq!(n == 0, values.is_null());
    // SAFETY: the caller's out-pointer.
    unsafe { *m = fake(0x10) };
    CUDA_SUCCESS
}

unsafe extern "C" fn graph_exec_update(
    _e: CUgraphExec,
    g: CUgraph,
    info: *mut CUgraphExecUpdateResultInfo,
) -> CUresult {
    note("cuGraphExecUpdate");
    // Graph 1 updates, 2 is refused, anything else fails.
    match g as usize {
        1 => CUDA_SUCCESS,
        2 => {
            // SAFETY: the caller's out-pointer.
            unsafe { (*info).result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED };
            CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE
        }
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}

unsafe extern "C" fn graph_add_dependencies(
    _g: CUgraph,
    _from: *const CUgraphNode,
    _to: *const CUgraphNode,
    _data: *const CUgraphEdgeData,
    _n: usize,
) -> CUresult {
    note("cuGraphAddDependencies");
    CUDA_SUCCESS
}

unsafe extern "C" fn thread_exchange(mode: *mut CUstreamCaptureMode) -> CUresult {
    note("cuThreadExchangeStreamCaptureMode");
    // SAFETY: the caller's in/out pointer.
    unsafe {
        let previous = CU_STREAM_CAPTURE_MODE_GLOBAL;
        assert_eq!(*mode, CU_STREAM_CAPTURE_MODE_RELAXED);
        *mode = previous;
    }
    CUDA_SUCCESS
}

/// The stub of `name`, or the aborting function.
fn stub(name: &str) -> *mut c_void {
    let f: *const c_void = match name {
        "cuGetErrorName" => get_error_name as *const c_void,
        "cuGetErrorString" => get_error_string as *const c_void,
        "cuDeviceGetName" => device_get_name as *const c_void,
        "cuGraphGetNodes" => graph_get_nodes as *const c_void,
        "cuStreamQuery" => stream_query as *const c_void,
        "cuStreamEndCapture" => stream_end_capture as *const c_void,
        "cuGraphDestroy" => graph_destroy as *const c_void,
        "cuModuleLoadDataEx" => module_load_data_ex as *const c_void,
        "cuGraphExecUpdate" => graph_exec_update as *const c_void,
        "cuGraphAddDependencies" => graph_add_dependencies as *const c_void,
        "cuThreadExchangeStreamCaptureMode" => thread_exchange as *const c_void,
        _ => not_stubbed as *const c_void,
    };
    f as *mut c_void
}

/// The table of a driver of `version` made of the stubs.
fn table(version: i32) -> DriverFns {
    // SAFETY: each stub has the signature of its entry's newest ABI, which
    // a driver of 13000 resolves; the other entries abort if called (none
    // is, as the tests check).
    match unsafe { DriverFns::resolve_with(version, |name, _| Ok(stub(name))) } {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    }
}

/// A made-up handle at `addr` (never dereferenced).
fn fake<T>(addr: usize) -> *mut T {
    std::ptr::null_mut::<u8>().wrapping_add(addr).cast()
}

#[test]
fn a_driver_error_is_two_words_and_copy() {
    fn is_copy<T: Copy>() {}
    is_copy::<DriverError>();
    assert!(std::mem::size_of::<DriverError>() <= 3 * std::mem::size_of::<usize>());
    assert_eq!(DriverError::check("cuMemAlloc", CUDA_SUCCESS), Ok(()));
    let e = DriverError::check("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY).expect_err("failed");
    assert_eq!((e.call, e.code), ("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY));
    assert_eq!(e.to_string(), "cuMemAlloc failed: CUresult 2");
}

#[test]
fn errors_are_named_by_the_driver_with_fallbacks() {
    let d = table(13000);
    let e = DriverError { call: "cuMemAlloc", code: CUDA_ERROR_OUT_OF_MEMORY };
    assert_eq!(e.name(&d), "CUDA_ERROR_OUT_OF_MEMORY");
    assert_eq!(e.description(&d), "out of memory");
    let unknown = DriverError { call: "cuMemAlloc", code: 12345 };
    assert_eq!(unknown.name(&d), "CUDA_ERROR_12345", "the driver refuses the code");
    assert_eq!(unknown.description(&d), "unknown error");
    assert_eq!(driver::get_error_name(&d, CUDA_ERROR_NOT_FOUND), Ok(None), "success without a string");
    assert_eq!(driver::error_name_or_code(&d, CUDA_ERROR_NOT_FOUND), "CUDA_ERROR_500");
    assert_eq!(
        driver::get_error_name(&d, 12345),
        Err(DriverError { call: "cuGetErrorName", code: CUDA_ERROR_INVALID_VALUE })
    );
    calls();
}

#[test]
fn a_device_name_ends_at_its_nul() {
    let d = table(13000);
    assert_eq!(device::get_name(&d, 0).as_deref(), Ok("Fake GPU"));
    assert_eq!(device::name_of(&[b'a' as c_char, b'b' as c_char]), "ab", "no NUL: all of it");
    assert_eq!(calls(), ["cuDeviceGetName"]);
}

#[test]
fn node_lists_take_two_calls_and_none_for_an_empty_graph() {
    let d = table(13000);
    let g: CUgraph = fake(0x100);
    NODES.with(|c| c.set(3));
    // SAFETY: the stub reads no handle.
    let nodes = unsafe { graph::get_nodes(&d, g) }.expect("listed");
    assert_eq!(nodes, [fake(1), fake(2), fake(3)]);
    assert_eq!(calls(), ["cuGraphGetNodes(count)", "cuGraphGetNodes(list)"]);
    NODES.with(|c| c.set(0));
    // SAFETY: as above.
    assert_eq!(unsafe { graph::get_nodes(&d, g) }, Ok(Vec::new()));
    assert_eq!(calls(), ["cuGraphGetNodes(count)"], "no second call with an empty array");
    NODES.with(|c| c.set(5));
    let mut two = [std::ptr::null_mut(); 2];
    // SAFETY: as above.
    assert_eq!(unsafe { graph::get_nodes_into(&d, g, &mut two) }, Ok(5), "the graph's count, more than fit");
    assert_eq!(two, [fake(1), fake(2)]);
    // SAFETY: as above.
    assert_eq!(unsafe { graph::get_nodes_into(&d, g, &mut []) }, Ok(5));
    assert_eq!(calls(), ["cuGraphGetNodes(list)", "cuGraphGetNodes(count)"]);
}

#[test]
fn a_busy_stream_is_not_an_error() {
    let d = table(13000);
    // SAFETY: the stub reads no handle.
    unsafe {
        assert_eq!(stream::query(&d, fake(1)), Ok(true));
        assert_eq!(stream::query(&d, fake(2)), Ok(false));
        assert_eq!(
            stream::query(&d, fake(3)),
            Err(DriverError { call: "cuStreamQuery", code: CUDA_ERROR_INVALID_HANDLE })
        );
    }
    calls();
}

#[test]
fn a_failed_end_of_capture_destroys_the_graph_it_handed_out() {
    let d = table(13000);
    // SAFETY: the stubs read no handle.
    unsafe {
        assert_eq!(stream::end_capture(&d, fake(1)), Ok(fake(0x60)));
        assert_eq!(calls(), ["cuStreamEndCapture"]);
        let invalidated = DriverError { call: "cuStreamEndCapture", code: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED };
        assert_eq!(stream::end_capture(&d, fake(2)), Err(invalidated));
        assert_eq!(calls(), ["cuStreamEndCapture", "cuGraphDestroy"]);
        assert_eq!(stream::end_capture(&d, fake(3)), Err(invalidated));
        assert_eq!(calls(), ["cuStreamEndCapture"], "no graph, nothing to destroy");
    }
}

#[test]
fn jit_options_and_values_must_pair_up_and_empty_ones_are_null() {
    let d = table(13000);
    let image = c"ptx".as_ptr().cast::<c_void>();
    let mut options = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut one_value = [std::ptr::null_mut::<c_void>()];
    let refused = DriverError { call: "cuModuleLoadDataEx", code: CUDA_ERROR_INVALID_VALUE };
    // SAFETY: refused before any call.
    assert_eq!(unsafe { module::load_data_ex(&d, image, &mut options, &mut one_value) }, Err(refused));
    assert!(calls().is_empty(), "no driver call");
    // SAFETY: no options; the stub reads nothing else.
    assert_eq!(unsafe { module::load_data_ex(&d, image, &mut [], &mut []) }, Ok(fake(0x10)));
    assert_eq!(calls(), ["cuModuleLoadDataEx"]);
    // SAFETY: refused before any call.
    let link = unsafe { link::create(&d, &mut options, &mut one_value) };
    assert_eq!(link, Err(DriverError { call: "cuLinkCreate", code: CUDA_ERROR_INVALID_VALUE }));
    assert!(calls().is_empty());
    assert!(count_u32(usize::MAX).is_none() && count_u32(2) == Some(2));
    assert!(ptr_or_null::<u8>(&[]).is_null() && !ptr_or_null(&[1u8]).is_null());
    assert!(mut_ptr_or_null::<u8>(&mut []).is_null());
}

#[test]
fn an_update_the_driver_refuses_is_an_outcome_and_other_failures_errors() {
    let d = table(13000);
    let e: CUgraphExec = fake(0x200);
    // SAFETY: the stub reads no handle.
    unsafe {
        let ok = graph_exec::update(&d, e, fake(1)).expect("resolved").expect("updated");
        assert!(ok.updated() && !ok.refused() && ok.abi_version == 12000);
        let refused = graph_exec::update(&d, e, fake(2)).expect("resolved").expect("an outcome");
        assert!(refused.refused() && !refused.updated());
        assert_eq!(refused.info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
        assert_eq!(
            graph_exec::update(&d, e, fake(3)).expect("resolved").map(|o| o.status),
            Err(DriverError { call: "cuGraphExecUpdate", code: CUDA_ERROR_INVALID_HANDLE })
        );
    }
    calls();
}

#[test]
fn edge_arrays_of_different_lengths_are_refused_before_calling() {
    let d = table(13000);
    let (a, b): (CUgraphNode, CUgraphNode) = (fake(1), fake(2));
    // SAFETY: refused, or a stub that reads nothing.
    unsafe {
        assert_eq!(
            graph::add_dependencies(&d, fake(0x100), &[a, b], &[b], None),
            Some(Err(DriverError { call: "cuGraphAddDependencies", code: CUDA_ERROR_INVALID_VALUE }))
        );
        assert!(calls().is_empty());
        assert_eq!(graph::add_dependencies(&d, fake(0x100), &[], &[], None), Some(Ok(())), "nothing to add");
        assert!(calls().is_empty());
        assert_eq!(graph::add_dependencies(&d, fake(0x100), &[a], &[b], None), Some(Ok(())));
        assert_eq!(calls(), ["cuGraphAddDependencies"]);
    }
}

#[test]
fn entries_the_driver_lacks_are_none_without_a_call() {
    let d = table(11040);
    let config = CUlaunchConfig {
        gridDimX: 1,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 1,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        hStream: std::ptr::null_mut(),
        attrs: std::ptr::null_mut(),
        numAttrs: 0,
    };
    // SAFETY: absent entries: no call is made.
    unsafe {
        assert!(kernel::launch_ex(&d, &config, fake(1), std::ptr::null_mut(), std::ptr::null_mut()).is_none());
        assert!(kernel::get_param_info(&d, fake(1), 0).is_none());
        assert!(graph::conditional_handle_create(&d, fake(1), fake(2), 0, 0).is_none());
        assert!(graph::add_node(&d, fake(1), &[], None, &mut CUgraphNodeParams::conditional(zero_cond())).is_none());
        assert!(green::create(&d, fake(1), 0, 0).is_none() && green::destroy(&d, fake(1)).is_none());
        assert!(green::stream_create(&d, fake(1), 0, 0).is_none() && green::context_of(&d, fake(1)).is_none());
        assert!(stream::begin_capture_to_graph(&d, fake(1), fake(2), &[], None, 0).is_none());
    }
    assert!(green::device_get_resource(&d, 0, CU_DEV_RESOURCE_TYPE_SM).is_none());
    assert!(calls().is_empty());
}

fn zero_cond() -> CUDA_CONDITIONAL_NODE_PARAMS {
    CUDA_CONDITIONAL_NODE_PARAMS {
        handle: 0,
        type_: CU_GRAPH_COND_TYPE_IF,
        size: 1,
        phGraph_out: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

#[test]
fn the_capture_mode_exchange_returns_the_previous_mode() {
    let d = table(13000);
    assert_eq!(
        stream::thread_exchange_capture_mode(&d, CU_STREAM_CAPTURE_MODE_RELAXED),
        Ok(CU_STREAM_CAPTURE_MODE_GLOBAL)
    );
    assert_eq!(calls(), ["cuThreadExchangeStreamCaptureMode"]);
}
