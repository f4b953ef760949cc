//! Sequences of C ABI calls on the driver double (two simulated devices).
//!
//! Each input decodes into up to 192 calls: contexts (primary, green,
//! private; lanes), buffers (allocated, wrapped, freed), kernels of a
//! user module, recordings (begin/end/update/abort, breaks, foreign
//! sections, conditionals, recording modes), whole captures, graphs
//! (launch, counts, DOT), graph caches and bucket lists; with live, freed,
//! never-created, wrong-kind and NULL handles and sizes at 0, SIZE_MAX and
//! between, and with one driver call made to fail (`fc_double_set_faults`).
//! Break, record and foreign functions run a sub-sequence of calls taken
//! from the input (nested at most two deep): calls from a break, from a
//! recording, on the context being recorded.
//!
//! A crash is: a panic or abort, a sanitizer report, a status the header
//! does not document (or FC_ERR_INTERNAL), a failure without its code and
//! message in fc_last_error, a wrong value read back from a fill or an
//! upload, a context that cannot do plain work once the input's faults are
//! lifted (nothing latches), handles or contexts left alive once every
//! handle is freed (fc_live_objects), driver objects left alive (the
//! double's counts), or a misuse report of the double (a call the real
//! driver would answer with undefined behaviour).
//!
//! The harness keeps the C contract itself: host pointers it passes are
//! valid for the sizes it passes (a size past its host copy is only passed
//! where the library must refuse it first), a kernel's arguments are live
//! buffers and an element count they hold, and memory that a graph may
//! still address (a buffer, module or kernel, once the input began any
//! recording, capture or cache) is not freed before the end, as the header
//! asks of callers, and no WHILE or REPEAT loop is recorded (one whose flag
//! nothing clears never ends, on a GPU too).
#![no_main]
#![allow(unused_unsafe)] // some exports are safe Rust functions; all are called as C

use std::cell::RefCell;
use std::ffi::{c_int, c_void, CString};
use std::ptr::null_mut;

use fc_graph_fuzz::*;
use fcgraph::header::{
    FC_CAPTURE_MODE_GLOBAL, FC_CAPTURE_MODE_RELAXED, FC_CAPTURE_MODE_THREAD_LOCAL, FC_COND_REPEAT, FC_COND_WHILE,
};
use fcgraph::*;
use libfuzzer_sys::fuzz_target;

/// Calls in an input, and in a sub-sequence.
const MAX_CALLS: usize = 192;
const MAX_SUB_CALLS: usize = 24;
/// How deep callbacks nest.
const MAX_DEPTH: u32 = 2;
/// Largest host copy the harness makes for an upload or download.
const HOST_MAX: usize = 1 << 20;

static PTX: &str = include_str!("../../kernels/elementwise.ptx");

/// Driver calls an input may make fail once, and the codes they fail
/// with. Destroy and free calls are left out (a driver that cannot free
/// leaks by itself), and so are the calls whose injected failure would
/// leave the double in a state no real driver reaches (an end of capture
/// that fails but keeps capturing, a context push that half happens).
const FAULT_SYMBOLS: [&str; 28] = [
    "cuMemAlloc",
    "cuMemcpyHtoDAsync",
    "cuMemcpyDtoHAsync",
    "cuMemcpyDtoDAsync",
    "cuMemsetD8Async",
    "cuMemsetD32Async",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuGraphCreate",
    "cuGraphAddKernelNode",
    "cuGraphAddMemsetNode",
    "cuGraphAddNode",
    "cuGraphAddDependencies",
    "cuGraphAddChildGraphNode",
    "cuGraphInstantiateWithFlags",
    "cuGraphExecUpdate",
    "cuGraphExecKernelNodeSetParams",
    "cuGraphLaunch",
    "cuGraphConditionalHandleCreate",
    "cuStreamBeginCapture",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuModuleLoadDataEx",
    "cuModuleGetFunction",
    "cuGreenCtxCreate",
];
const FAULT_CODES: [u32; 6] = [1, 2, 200, 801, 900, 999];

#[derive(Clone, Copy)]
struct Slot<T> {
    h: *mut T,
    live: bool,
}

#[derive(Clone, Copy)]
struct Buf {
    h: *mut fc_buffer,
    live: bool,
    size: usize,
    ptr: u64,
    /// The context handle it was made on.
    ctx: *mut fc_cuda_ctx,
    /// The buffer whose memory a wrap views (its index).
    parent: Option<usize>,
}

/// What an input made, freed or not.
#[derive(Default)]
struct World {
    ctxs: Vec<Slot<fc_cuda_ctx>>,
    bufs: Vec<Buf>,
    graphs: Vec<Slot<fc_graph>>,
    modules: Vec<Slot<fc_module>>,
    kernels: Vec<Slot<fc_kernel>>,
    caches: Vec<Slot<fc_graph_cache>>,
    buckets: Vec<Slot<fc_buckets>>,
    /// Sub-sequences that callbacks run, by index (their `user`).
    scripts: Vec<Vec<u8>>,
    depth: u32,
    /// A fault was injected: values read back are not checked.
    faulted: bool,
    /// A recording, capture or cache was begun: a graph may address any
    /// buffer, module or kernel, so none is freed until the end.
    recorded: bool,
}

thread_local! {
    static WORLD: RefCell<World> = RefCell::new(World::default());
}

fn world<R>(f: impl FnOnce(&mut World) -> R) -> R {
    WORLD.with(|w| f(&mut w.borrow_mut()))
}

/// A handle from `list`: NULL, a never-created value, one of another kind,
/// or one made before (live or freed).
fn pick<T>(list: &[Slot<T>], other: *mut c_void, b: &mut Bytes) -> *mut T {
    let sel = b.u8();
    match sel % 16 {
        0 => null_mut(),
        1 => (b.u64() | 1) as usize as *mut T,
        2 => other.cast(),
        _ if list.is_empty() => null_mut(),
        _ => {
            // Mostly live ones.
            let live: Vec<&Slot<T>> = list.iter().filter(|s| s.live).collect();
            if sel % 16 < 12 && !live.is_empty() {
                live[b.u8() as usize % live.len()].h
            } else {
                list[b.u8() as usize % list.len()].h
            }
        }
    }
}

fn any_handle(w: &World) -> *mut c_void {
    w.bufs
        .first()
        .map(|b| b.h.cast())
        .or_else(|| w.graphs.first().map(|g| g.h.cast()))
        .or_else(|| w.ctxs.first().map(|c| c.h.cast()))
        .unwrap_or(0x5a5a_5a5a as *mut c_void)
}

fn ctx(b: &mut Bytes) -> *mut fc_cuda_ctx {
    world(|w| {
        let other = w.bufs.first().map(|x| x.h.cast()).unwrap_or(null_mut());
        pick(&w.ctxs, other, b)
    })
}
fn buf(b: &mut Bytes) -> *mut fc_buffer {
    world(|w| {
        let other = w.ctxs.first().map(|x| x.h.cast()).unwrap_or(null_mut());
        let slots: Vec<Slot<fc_buffer>> = w.bufs.iter().map(|x| Slot { h: x.h, live: x.live }).collect();
        pick(&slots, other, b)
    })
}
fn graph(b: &mut Bytes) -> *mut fc_graph {
    world(|w| pick(&w.graphs, any_handle(w), b))
}
fn module(b: &mut Bytes) -> *mut fc_module {
    world(|w| pick(&w.modules, any_handle(w), b))
}
fn kernel(b: &mut Bytes) -> *mut fc_kernel {
    world(|w| pick(&w.kernels, any_handle(w), b))
}
fn cache(b: &mut Bytes) -> *mut fc_graph_cache {
    world(|w| pick(&w.caches, any_handle(w), b))
}
fn buckets(b: &mut Bytes) -> *mut fc_buckets {
    world(|w| pick(&w.buckets, any_handle(w), b))
}

fn mode(b: &mut Bytes) -> c_int {
    match b.u8() % 8 {
        0 => FC_CAPTURE_MODE_GLOBAL as c_int,
        1 | 2 => FC_CAPTURE_MODE_THREAD_LOCAL as c_int,
        3 | 4 => FC_CAPTURE_MODE_RELAXED as c_int,
        _ => b.int(),
    }
}

/// Whether a graph could address memory the harness would free: any
/// graph or cache alive, or any context recording.
fn memory_in_use() -> bool {
    let (graphs, caches, ctxs) = world(|w| {
        (
            w.recorded || w.graphs.iter().any(|g| g.live),
            w.caches.iter().any(|c| c.live),
            w.ctxs.iter().filter(|c| c.live).map(|c| c.h).collect::<Vec<_>>(),
        )
    });
    // SAFETY: live handles (a query).
    graphs || caches || ctxs.into_iter().any(|c| unsafe { fc_graph_is_capturing_ctx(c) } != 0)
}

fn add_buf(h: *mut fc_buffer, size: usize, ctx: *mut fc_cuda_ctx, parent: Option<usize>) {
    // SAFETY: a live buffer handle (a query).
    let ptr = unsafe { fc_buffer_device_ptr(h) };
    assert_ne!(ptr, 0, "a new buffer has no device address");
    // SAFETY: as above.
    let got = unsafe { fc_buffer_size(h) };
    assert_eq!(got, size, "fc_buffer_size of a new buffer");
    world(|w| w.bufs.push(Buf { h, live: true, size, ptr, ctx, parent }));
}

/// Frees buffer `i` and the wraps over it (theirs first).
fn free_buf_at(i: usize) {
    let children: Vec<usize> =
        world(|w| (0..w.bufs.len()).filter(|&j| w.bufs[j].live && w.bufs[j].parent == Some(i)).collect());
    for j in children {
        free_buf_at(j);
    }
    let h = world(|w| {
        w.bufs[i].live = false;
        w.bufs[i].h
    });
    // SAFETY: a live handle, freed once.
    unsafe { fc_buffer_free(h) };
}

/// The element count (f32) that every buffer in `bs` holds, at most `n`.
fn safe_count(bs: &[*mut fc_buffer], n: usize) -> Option<u32> {
    world(|w| {
        let mut m = n.min(4096);
        for &h in bs {
            let b = w.bufs.iter().find(|x| x.h == h && x.live)?;
            m = m.min(b.size / 4);
        }
        Some(m as u32)
    })
}

unsafe extern "C" fn on_break(c: *mut fc_cuda_ctx, _live: *mut c_void, user: *mut c_void) -> c_int {
    run_script(user as usize, c)
}
unsafe extern "C" fn on_record(c: *mut fc_cuda_ctx, user: *mut c_void) -> c_int {
    run_script(user as usize, c)
}
unsafe extern "C" fn on_foreign(_stream: *mut c_void, user: *mut c_void) -> c_int {
    run_script(user as usize, null_mut())
}

/// Registers a sub-sequence read from the input; its index is the
/// callback's `user`.
fn script(b: &mut Bytes) -> *mut c_void {
    let len = (b.u8() % 48) as usize;
    let bytes = b.take(len).to_vec();
    world(|w| {
        w.scripts.push(bytes);
        opaque(w.scripts.len() - 1)
    })
}

/// Runs script `i` as a callback: its first byte says what it returns
/// (mostly 0); its calls may use `c` (the context the callback got).
fn run_script(i: usize, c: *mut fc_cuda_ctx) -> c_int {
    let (bytes, depth) = world(|w| (w.scripts.get(i).cloned().unwrap_or_default(), w.depth));
    if depth >= MAX_DEPTH {
        return 0;
    }
    world(|w| {
        w.depth += 1;
        if !c.is_null() && !w.ctxs.iter().any(|s| s.h == c) {
            // The context a callback receives is live (or freed, on a
            // replay after its handle went): keep it as a freed handle
            // to pick, never to free.
            w.ctxs.push(Slot { h: c, live: false });
        }
    });
    let mut b = Bytes::new(&bytes);
    let ret = match b.u8() % 8 {
        0 => 7,
        _ => 0,
    };
    let mut calls = 0;
    while !b.done() && calls < MAX_SUB_CALLS {
        if !c.is_null() && b.u8() % 2 == 0 {
            call_on(c, &mut b);
        } else {
            call(&mut b);
        }
        calls += 1;
    }
    world(|w| w.depth -= 1);
    ret
}

/// A call on the callback's own context.
fn call_on(c: *mut fc_cuda_ctx, b: &mut Bytes) {
    let op = b.u8() % 8;
    if matches!(op, 2 | 6) {
        world(|w| w.recorded = true);
    }
    // SAFETY (each call below): handles are checked by the library; the
    // pointers passed are valid locals.
    unsafe {
        match op {
            0 => {
                let (a, o) = (buf(b), buf(b));
                let n = safe_count(&[a, o], b.size()).map(|n| n as usize).unwrap_or_else(|| b.size());
                check("fc_add_ctx", fc_add_ctx(c, a, a, o, n));
            }
            1 => {
                let x = buf(b);
                check("fc_buffer_fill_ctx", fc_buffer_fill_ctx(c, x, b.size(), b.size(), b.u8()));
            }
            2 => {
                check("fc_graph_break_ctx", fc_graph_break_ctx(c, Some(on_break), script(b)));
            }
            3 => {
                let g = check_ptr("fc_graph_end_ctx", fc_graph_end_ctx(c));
                if !g.is_null() {
                    world(|w| w.graphs.push(Slot { h: g, live: true }));
                }
            }
            4 => {
                check("fc_sync_ctx", fc_sync_ctx(c));
            }
            5 => {
                check("fc_graph_abort_ctx", fc_graph_abort_ctx(c));
            }
            6 => {
                let m = mode(b);
                check("fc_graph_begin_ctx_mode", fc_graph_begin_ctx_mode(c, m));
            }
            _ => {
                let size = b.size();
                let h = check_ptr("fc_buffer_alloc_ctx", fc_buffer_alloc_ctx(c, size));
                if !h.is_null() {
                    add_buf(h, size, c, None);
                }
            }
        }
    }
}

fn call(b: &mut Bytes) {
    let op = b.u8() % 64;
    if matches!(op, 31..=45 | 52..=55) {
        world(|w| w.recorded = true);
    }
    // SAFETY (each call below): handles are checked by the library; every
    // pointer passed is a valid local of the size passed, or NULL where
    // the header allows it or must refuse it.
    unsafe {
        match op {
            // ---- contexts
            0..=3 => {
                let dev = match b.u8() % 8 {
                    0 => -1,
                    1 => 2,
                    2 => c_int::MAX,
                    n => c_int::from(n % 2),
                };
                let c = match op {
                    0 | 1 => fc_cuda_init_device(dev),
                    2 => fc_cuda_init_device_isolated(dev),
                    _ => {
                        let iso = match b.u8() % 6 {
                            5 => b.int(),
                            n => c_int::from(n % 3),
                        };
                        fc_cuda_init_device_isolated_as(dev, iso)
                    }
                };
                let c = check_ptr("fc_cuda_init_device*", c);
                if !c.is_null() {
                    world(|w| w.ctxs.push(Slot { h: c, live: true }));
                }
            }
            4 => {
                let c = ctx(b);
                let lane = match b.u8() % 8 {
                    0 => -1,
                    1 => 64,
                    2 => c_int::MAX,
                    n => c_int::from(n),
                };
                let l = check_ptr("fc_ctx_lane", fc_ctx_lane(c, lane));
                if !l.is_null() {
                    world(|w| w.ctxs.push(Slot { h: l, live: true }));
                }
            }
            5 => {
                let c = ctx(b);
                fc_cuda_ctx_free(c);
                world(|w| w.ctxs.iter_mut().filter(|s| s.h == c).for_each(|s| s.live = false));
            }
            6 => {
                let c = ctx(b);
                let _ = fc_cuda_ctx_device_id(c);
                let _ = fc_ctx_is_isolated(c);
                let _ = fc_ctx_isolation(c);
                let _ = fc_ctx_pool_bytes(c);
                let _ = fc_ctx_cu_context(c);
                let _ = fc_ctx_lane_index(c);
                let _ = fc_ctx_pdl_enabled(c);
                let _ = fc_ctx_recording_mode(c);
                let _ = fc_graph_builds_ctx(c);
                let _ = fc_graph_is_capturing_ctx(c);
                let (mut free, mut total) = (0usize, 0usize);
                if check("fc_ctx_mem_info", fc_ctx_mem_info(c, &mut free, &mut total)) == 0 {
                    assert!(free <= total, "fc_ctx_mem_info: free {free} > total {total}");
                }
                let mut handles = 0usize;
                check("fc_live_objects", fc_live_objects(&mut handles, null_mut()));
            }
            7 => {
                let c = ctx(b);
                check("fc_sync_ctx", fc_sync_ctx(c));
            }
            8 => {
                let c = ctx(b);
                let _ = fc_ctx_stream(c);
            }
            9 => {
                let c = ctx(b);
                let v = b.int();
                check("fc_ctx_set_pdl", fc_ctx_set_pdl(c, v));
                let _ = fc_device_supports_pdl(b.int());
            }
            10 => {
                let c = ctx(b);
                let m = match b.u8() % 5 {
                    4 => b.int(),
                    n => c_int::from(n % 3),
                };
                check("fc_ctx_set_recording_mode", fc_ctx_set_recording_mode(c, m));
            }
            11 => {
                let (c, o) = (ctx(b), ctx(b));
                check("fc_ctx_wait_lane", fc_ctx_wait_lane(c, o));
            }
            // ---- buffers
            12..=14 => {
                let c = ctx(b);
                let size = b.size();
                let h = check_ptr("fc_buffer_alloc_ctx", fc_buffer_alloc_ctx(c, size));
                if !h.is_null() {
                    add_buf(h, size, c, None);
                }
            }
            15 => {
                let c = ctx(b);
                let parent = world(|w| {
                    let live: Vec<usize> = (0..w.bufs.len()).filter(|&i| w.bufs[i].live).collect();
                    (!live.is_empty()).then(|| live[b.u8() as usize % live.len()])
                });
                let (ptr, bytes, parent) = match (b.u8() % 4, parent) {
                    (0, _) | (_, None) => {
                        let p = match b.u8() % 4 {
                            0 => 0,
                            1 => u64::MAX,
                            2 => 0xdead_0000,
                            _ => 4096,
                        };
                        (p, b.size(), None)
                    }
                    (_, Some(i)) => {
                        let (p, s) = world(|w| (w.bufs[i].ptr, w.bufs[i].size));
                        let off = (b.u16() as usize) % (s + 64);
                        let len = match b.u8() % 4 {
                            0 => b.size(),
                            _ => s.saturating_sub(off).min(b.u16() as usize + 1),
                        };
                        (p.wrapping_add(off as u64), len, Some(i))
                    }
                };
                let h = check_ptr("fc_buffer_wrap_ctx", fc_buffer_wrap_ctx(c, ptr, bytes));
                if !h.is_null() {
                    assert!(
                        parent.is_some() || ![0, u64::MAX, 0xdead_0000, 4096].contains(&ptr),
                        "fc_buffer_wrap_ctx accepted {bytes} bytes at {ptr:#x}, no device memory"
                    );
                    // The live allocation the view starts in (pool memory
                    // and the library's own may hold none of ours).
                    let parent = world(|w| {
                        (0..w.bufs.len()).find(|&i| {
                            let x = &w.bufs[i];
                            x.live && x.parent.is_none() && ptr >= x.ptr && ptr - x.ptr < x.size as u64
                        })
                    });
                    add_buf(h, bytes, c, parent);
                }
            }
            16 | 17 => {
                let h = buf(b);
                let idx = world(|w| w.bufs.iter().position(|x| x.h == h && x.live));
                match idx {
                    // A live buffer: freed only while no graph can address it.
                    Some(i) => {
                        let wrap = world(|w| w.bufs[i].parent.is_some());
                        if wrap || !memory_in_use() {
                            free_buf_at(i);
                        }
                    }
                    None => fc_buffer_free(h),
                }
            }
            18 | 19 => {
                let h = buf(b);
                let bytes = b.size();
                let info = world(|w| w.bufs.iter().find(|x| x.h == h && x.live).copied());
                // A size past the host copy only where it must be refused.
                if bytes > HOST_MAX && info.is_some_and(|x| bytes <= x.size) {
                    return;
                }
                let mut host: Vec<u8> = (0..bytes.min(HOST_MAX)).map(|i| (i as u8) ^ 0x5a).collect();
                let p = if b.u8() % 8 == 0 { null_mut() } else { host.as_mut_ptr() };
                if op == 18 {
                    let rc = check("fc_buffer_upload", fc_buffer_upload(h, p.cast(), bytes));
                    if rc == 0 && !p.is_null() && bytes > 0 && bytes <= HOST_MAX {
                        let mut back = vec![0u8; bytes];
                        let rc2 = check("fc_buffer_download", fc_buffer_download(h, back.as_mut_ptr().cast(), bytes));
                        if rc2 == 0 && !world(|w| w.faulted) {
                            assert!(back == host, "a download did not return the bytes just uploaded");
                        }
                    }
                } else {
                    check("fc_buffer_download", fc_buffer_download(h, p.cast(), bytes));
                }
            }
            20 | 21 => {
                let (c, h) = (ctx(b), buf(b));
                let (off, len, v) = (b.size(), b.size(), b.u8());
                let rc = check("fc_buffer_fill_ctx", fc_buffer_fill_ctx(c, h, off, len, v));
                let own = world(|w| w.bufs.iter().find(|x| x.h == h && x.live).copied());
                let end = off.checked_add(len);
                if rc == 0 && len > 0 {
                    if let Some(x) = own {
                        assert!(
                            end.is_some_and(|e| e <= x.size),
                            "a fill of [{off}, +{len}) in a {}-byte buffer succeeded",
                            x.size
                        );
                    }
                }
                let own = own.filter(|x| x.ctx == c && x.parent.is_none());
                let plain = fc_graph_is_capturing_ctx(c) == 0 && fc_ctx_lane_index(c) == 0 && !world(|w| w.faulted);
                if let (0, Some(_), Some(end), true) = (rc, own, end, plain) {
                    if len > 0 && end <= HOST_MAX {
                        let mut back = vec![0u8; end];
                        if check("fc_buffer_download", fc_buffer_download(h, back.as_mut_ptr().cast(), end)) == 0 {
                            assert!(back[off..].iter().all(|&y| y == v), "a fill's bytes did not read back");
                        }
                    }
                }
            }
            22 | 23 => {
                let c = ctx(b);
                let (a, bb, o) = (buf(b), buf(b), buf(b));
                let n = b.size();
                let f = if op == 22 { fc_add_ctx } else { fc_mul_ctx };
                check("fc_add_ctx/fc_mul_ctx", f(c, a, bb, o, n));
            }
            // ---- modules and kernels
            24 => {
                let c = ctx(b);
                let text = match b.u8() % 4 {
                    0 => CString::new(b.take(32).iter().map(|&x| x.max(1)).collect::<Vec<u8>>()).expect("no NUL"),
                    _ => CString::new(PTX).expect("no NUL in the PTX"),
                };
                let p = if b.u8() % 16 == 0 { std::ptr::null() } else { text.as_ptr() };
                let m = check_ptr("fc_module_load_ptx", fc_module_load_ptx(c, p));
                if !m.is_null() {
                    world(|w| w.modules.push(Slot { h: m, live: true }));
                }
            }
            25 => {
                let m = module(b);
                let name = match b.u8() % 6 {
                    0 => "fc_mul_f32",
                    1 => "",
                    2 => "nope",
                    _ => "fc_add_f32",
                };
                let name = CString::new(name).expect("no NUL");
                let p = if b.u8() % 16 == 0 { std::ptr::null() } else { name.as_ptr() };
                let k = check_ptr("fc_module_get_kernel", fc_module_get_kernel(m, p));
                if !k.is_null() {
                    assert_eq!(fc_kernel_param_count(k), 4, "the element-wise kernels take 4 parameters");
                    world(|w| w.kernels.push(Slot { h: k, live: true }));
                }
            }
            26 => {
                let m = module(b);
                let live = world(|w| w.modules.iter().any(|s| s.h == m && s.live));
                if !live || !memory_in_use() {
                    fc_module_free(m);
                    world(|w| w.modules.iter_mut().filter(|s| s.h == m).for_each(|s| s.live = false));
                }
            }
            27 => {
                let k = kernel(b);
                let live = world(|w| w.kernels.iter().any(|s| s.h == k && s.live));
                if !live || !memory_in_use() {
                    fc_kernel_free(k);
                    world(|w| w.kernels.iter_mut().filter(|s| s.h == k).for_each(|s| s.live = false));
                }
            }
            28 => {
                let k = kernel(b);
                check("fc_kernel_set_pdl", fc_kernel_set_pdl(k, b.int()));
                let _ = fc_kernel_param_count(k);
            }
            29 | 30 => {
                let c = ctx(b);
                let k = kernel(b);
                let (a, bb, o) = (buf(b), buf(b), buf(b));
                // Arguments the kernel reads: live buffers and a count they hold.
                let Some(n) = safe_count(&[a, bb, o], b.size()) else {
                    return;
                };
                // The kernel reads them in the launching context's memory.
                let here = fc_ctx_cu_context(c);
                let owners = world(|w| [a, bb, o].map(|h| w.bufs.iter().find(|x| x.h == h).map(|x| x.ctx)));
                if here.is_null() || owners.iter().any(|o| o.is_none_or(|o| fc_ctx_cu_context(o) != here)) {
                    return;
                }
                let ptrs = world(|w| [a, bb, o].map(|h| w.bufs.iter().find(|x| x.h == h).map(|x| x.ptr).unwrap_or(0)));
                let mut words: [u64; 6] = [ptrs[0], ptrs[1], ptrs[2], u64::from(n), 0, 0];
                let mut args: Vec<*mut c_void> = words.iter_mut().map(|x| (x as *mut u64).cast()).collect();
                let nargs = match b.u8() % 8 {
                    0 => 3,
                    1 => 5,
                    2 => 0,
                    _ => 4,
                };
                let argp = if b.u8() % 16 == 0 { null_mut() } else { args.as_mut_ptr() };
                let (gx, gy, gz, bx, by, bz, shm) = match b.u8() % 8 {
                    0 => (0, 1, 1, 256, 1, 1, 0),
                    1 => (1, 1, 1, 1025, 1, 1, 0),
                    2 => (1, 65536, 1, 1, 1, 1, 0),
                    3 => (1, 1, 1, 0, 1, 1, 0),
                    4 => (1, 1, 1, 32, 1, 1, 1 << 30),
                    _ => ((n + 255) / 256, 1, 1, 256, 1, 1, 0),
                };
                if op == 29 {
                    check(
                        "fc_kernel_launch_ctx",
                        fc_kernel_launch_ctx(c, k, gx.max(1), gy, gz, bx, by, bz, shm, argp, nargs),
                    );
                } else {
                    let flags = match b.u8() % 4 {
                        0 => 0,
                        1 => 1,
                        2 => 2,
                        _ => b.u32(),
                    };
                    check(
                        "fc_kernel_launch_ex_ctx",
                        fc_kernel_launch_ex_ctx(c, k, gx, gy, gz, bx, by, bz, shm, argp, nargs, flags),
                    );
                }
            }
            // ---- recordings
            31 | 32 => {
                let c = ctx(b);
                let rc = match b.u8() % 3 {
                    0 => fc_graph_begin_ctx(c),
                    1 => fc_graph_begin_ctx_mode(c, mode(b)),
                    _ => fc_graph_begin_live_ctx(c, mode(b), opaque(b.u8() as usize)),
                };
                check("fc_graph_begin_ctx*", rc);
            }
            33 | 34 => {
                let c = ctx(b);
                let g = check_ptr("fc_graph_end_ctx", fc_graph_end_ctx(c));
                if !g.is_null() {
                    world(|w| w.graphs.push(Slot { h: g, live: true }));
                }
            }
            35 => {
                let (c, g) = (ctx(b), graph(b));
                let (mut upd, mut inst, mut calls) = (0, 0, 0);
                let rc = match b.u8() % 3 {
                    0 => fc_graph_end_update_ctx(c, g, &mut upd),
                    1 => fc_graph_end_update_ctx(c, g, null_mut()),
                    _ => fc_graph_end_update_ex_ctx(c, g, &mut upd, &mut inst, &mut calls),
                };
                check("fc_graph_end_update_ctx", rc);
            }
            36 => {
                check("fc_graph_abort_ctx", fc_graph_abort_ctx(ctx(b)));
            }
            37 | 38 => {
                let c = ctx(b);
                check("fc_graph_break_ctx", fc_graph_break_ctx(c, Some(on_break), script(b)));
            }
            39 => {
                check("fc_graph_break_ctx", fc_graph_break_ctx(ctx(b), None, null_mut()));
            }
            40 => {
                let c = ctx(b);
                let m = mode(b);
                let tries = b.int();
                let user = script(b);
                let mut g: *mut fc_graph = null_mut();
                let out = if b.u8() % 16 == 0 { null_mut() } else { &mut g as *mut _ };
                let rc = check("fc_graph_capture_ctx", fc_graph_capture_ctx(c, m, Some(on_record), user, tries, out));
                if rc == 0 {
                    assert!(!g.is_null(), "fc_graph_capture_ctx succeeded without a graph");
                    assert!(fc_graph_capture_tries(g) >= 1);
                    world(|w| w.graphs.push(Slot { h: g, live: true }));
                } else {
                    assert!(g.is_null(), "fc_graph_capture_ctx failed and wrote a graph");
                }
            }
            41 => {
                let c = ctx(b);
                let mut s: *mut c_void = null_mut();
                let out = if b.u8() % 8 == 0 { null_mut() } else { &mut s as *mut _ };
                let rc = if b.u8() % 2 == 0 {
                    fc_graph_foreign_begin_ctx(c, mode(b), out)
                } else {
                    let l = ctx(b);
                    fc_graph_foreign_begin_on_ctx(c, l, mode(b), out)
                };
                check("fc_graph_foreign_begin*", rc);
            }
            42 => {
                check("fc_graph_foreign_end_ctx", fc_graph_foreign_end_ctx(ctx(b)));
            }
            43 => {
                let c = ctx(b);
                let m = mode(b);
                let f: fc_foreign_fn = if b.u8() % 16 == 0 { None } else { Some(on_foreign) };
                check("fc_graph_record_foreign_ctx", fc_graph_record_foreign_ctx(c, m, f, script(b)));
            }
            44 => {
                let c = ctx(b);
                let kind = match b.u8() % 6 {
                    5 => b.int(),
                    n => c_int::from(n),
                };
                let cond = buf(b);
                let cases = match b.u8() % 4 {
                    0 => 0,
                    1 => u32::MAX,
                    _ => u32::from(b.u8() % 4),
                };
                // A WHILE loop whose flag nothing clears runs for ever on the
                // device, as the caller wrote it, and a REPEAT of whatever
                // bytes its count buffer holds (0x10101010 times) nearly so
                // (the C and Rust suites test loops that stop).
                if kind == FC_COND_WHILE as c_int || kind == FC_COND_REPEAT as c_int {
                    return;
                }
                check("fc_graph_cond_begin_ctx", fc_graph_cond_begin_ctx(c, kind, cond, cases));
            }
            45 => {
                let c = ctx(b);
                let rc = match b.u8() % 3 {
                    0 => fc_graph_cond_next_ctx(c),
                    1 => fc_graph_cond_end_ctx(c),
                    _ => fc_graph_cond_abort_ctx(c),
                };
                check("fc_graph_cond_*", rc);
                let _ = fc_cond_support();
            }
            // ---- graphs
            46..=48 => {
                let g = graph(b);
                let rc =
                    if b.u8() % 2 == 0 { fc_graph_launch(g) } else { fc_graph_launch_live(g, opaque(b.u8() as usize)) };
                check("fc_graph_launch", rc);
            }
            49 => {
                let g = graph(b);
                let _ = fc_graph_segment_count(g);
                let n = fc_graph_node_count(g);
                let _ = fc_graph_segment_node_count(g, b.size());
                let _ = fc_graph_capture_tries(g);
                let segs = fc_graph_segment_count(g);
                if segs > 0 {
                    let sum: usize = (0..segs as usize).map(|i| fc_graph_segment_node_count(g, i)).sum();
                    assert!(sum <= n, "segments hold {sum} nodes, the graph {n}");
                }
            }
            50 => {
                let g = graph(b);
                fc_graph_free(g);
                world(|w| w.graphs.iter_mut().filter(|s| s.h == g).for_each(|s| s.live = false));
            }
            51 => {
                let g = graph(b);
                let path = dot_path(b.u8());
                let p = if b.u8() % 8 == 0 { std::ptr::null() } else { path.as_ptr() };
                check("fc_graph_debug_dot", fc_graph_debug_dot(g, p));
                let _ = std::fs::remove_file(path.to_str().unwrap_or_default());
            }
            // ---- caches
            52 => {
                let c = ctx(b);
                let mut cfg: fc_graph_cache_config = std::mem::zeroed();
                fc_graph_cache_config_default(&mut cfg);
                if b.u8() % 2 == 0 {
                    cfg.max_entries = b.size();
                    cfg.max_bytes = b.size();
                    cfg.warmup = b.int();
                    cfg.max_tries = b.int();
                    cfg.fail_threshold = b.int();
                    cfg.backoff_ms = u32::from(b.u8() % 3);
                    cfg.max_backoff_ms = u32::from(b.u8() % 4);
                    cfg.mode = mode(b);
                }
                let p = if b.u8() % 8 == 0 { std::ptr::null() } else { &cfg as *const _ };
                let h = check_ptr("fc_graph_cache_new", fc_graph_cache_new(c, p));
                if !h.is_null() {
                    world(|w| w.caches.push(Slot { h, live: true }));
                }
            }
            53..=55 => {
                let h = cache(b);
                let key = u64::from(b.u8() % 4);
                let user = script(b);
                let rec: fc_record_fn = if b.u8() % 16 == 0 { None } else { Some(on_record) };
                let mut outcome = -2;
                let rc = check(
                    "fc_graph_cache_run",
                    fc_graph_cache_run(h, key, rec, user, opaque(b.u8() as usize), &mut outcome),
                );
                if rc == 0 {
                    assert!((0..=5).contains(&outcome), "fc_graph_cache_run: outcome {outcome}");
                } else {
                    assert_eq!(outcome, -1, "a failed fc_graph_cache_run's outcome");
                }
            }
            56 => {
                let h = cache(b);
                let key = u64::from(b.u8() % 4);
                let rc = match b.u8() % 4 {
                    0 => fc_graph_cache_invalidate(h, key),
                    1 => fc_graph_cache_invalidate_all(h),
                    2 => fc_graph_cache_remove(h, key),
                    _ => fc_graph_cache_clear(h),
                };
                check("fc_graph_cache_*", rc);
            }
            57 => {
                let h = cache(b);
                let mut st: fc_graph_cache_stats = std::mem::zeroed();
                if check("fc_graph_cache_stats_get", fc_graph_cache_stats_get(h, &mut st)) == 0 {
                    assert!(st.graphs <= st.entries, "cache stats: {} graphs in {} entries", st.graphs, st.entries);
                }
                let key = u64::from(b.u8() % 4);
                let _ = fc_graph_cache_node_count(h, key);
                if b.u8() % 4 == 0 {
                    let path = dot_path(b.u8());
                    check("fc_graph_cache_debug_dot", fc_graph_cache_debug_dot(h, key, path.as_ptr()));
                    let _ = std::fs::remove_file(path.to_str().unwrap_or_default());
                }
            }
            58 => {
                let h = cache(b);
                fc_graph_cache_free(h);
                world(|w| w.caches.iter_mut().filter(|s| s.h == h).for_each(|s| s.live = false));
            }
            // ---- buckets
            59 => {
                let h = if b.u8() % 2 == 0 {
                    fc_buckets_ladder(b.size() % (1 << 25))
                } else {
                    let sizes: Vec<usize> = (0..b.u8() % 8).map(|_| b.size()).collect();
                    let p = if sizes.is_empty() && b.u8() % 2 == 0 { std::ptr::null() } else { sizes.as_ptr() };
                    fc_buckets_from_list(p, sizes.len(), b.size())
                };
                let h = check_ptr("fc_buckets_*", h);
                if !h.is_null() {
                    world(|w| w.buckets.push(Slot { h, live: true }));
                }
            }
            60 => {
                let h = buckets(b);
                let n = fc_buckets_count(h);
                let _ = fc_buckets_get(h, b.size());
                let _ = fc_buckets_for(h, b.size());
                if n > 0 {
                    let last = fc_buckets_get(h, n - 1);
                    assert_eq!(fc_buckets_for(h, last), last, "a bucket's own size maps to itself");
                }
            }
            61 => {
                let h = buckets(b);
                fc_buckets_free(h);
                world(|w| w.buckets.iter_mut().filter(|s| s.h == h).for_each(|s| s.live = false));
            }
            // ---- driver faults and the thread's error state
            62 => {
                let sym = FAULT_SYMBOLS[b.u8() as usize % FAULT_SYMBOLS.len()];
                let code = FAULT_CODES[b.u8() as usize % FAULT_CODES.len()];
                let nth = 1 + b.u8() % 8;
                double().set_faults(&format!("fail={sym}:{code}@{nth}"));
                world(|w| w.faulted = true);
            }
            _ => {
                let mut small = [0 as std::ffi::c_char; 8];
                let len = fc_last_error_copy(small.as_mut_ptr(), small.len());
                assert_eq!(small[7.min(len)], 0, "fc_last_error_copy did not NUL-terminate");
                assert_eq!(len, last_message().len(), "fc_last_error_copy's length");
                let _ = fc_last_error_copy(null_mut(), 0);
                fc_clear_last_error();
                assert_eq!(fc_last_error_code(), 0);
                let _ = fc_cuda_device_count();
                let _ = fc_version();
            }
        }
    }
}

fn dot_path(n: u8) -> CString {
    let dir = std::env::temp_dir().join(format!("fc-fuzz-dot-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    CString::new(dir.join(format!("g{}.dot", n % 4)).to_string_lossy().into_owned()).expect("no NUL in a temp path")
}

/// Lifts the faults, checks that every live context still does plain
/// work, frees everything, and checks that nothing is left.
fn finish() {
    double().set_faults("");
    let w = WORLD.with(|w| std::mem::take(&mut *w.borrow_mut()));
    // SAFETY (each call below): handles the input made, each freed once.
    unsafe {
        for c in w.ctxs.iter().filter(|c| c.live) {
            if fc_ctx_lane_index(c.h) == 0 {
                let _ = fc_graph_abort_ctx(c.h);
            }
        }
        for c in w.caches.iter().filter(|c| c.live) {
            fc_graph_cache_free(c.h);
        }
        for g in w.graphs.iter().filter(|g| g.live) {
            fc_graph_free(g.h);
        }
        for k in w.kernels.iter().filter(|k| k.live) {
            fc_kernel_free(k.h);
        }
        for m in w.modules.iter().filter(|m| m.live) {
            fc_module_free(m.h);
        }
        for x in w.bufs.iter().rev().filter(|x| x.live) {
            fc_buffer_free(x.h);
        }
        for x in w.buckets.iter().filter(|x| x.live) {
            fc_buckets_free(x.h);
        }
        // Nothing latches: each live context does plain work after the
        // input's failures (its memory freed first).
        for c in w.ctxs.iter().filter(|c| c.live) {
            let x = check_ptr("fc_buffer_alloc_ctx (after the input)", fc_buffer_alloc_ctx(c.h, 64));
            assert!(!x.is_null(), "a context cannot allocate after the input: {}", last_message());
            let rc = fc_buffer_fill_ctx(c.h, x, 0, 64, 0x3c);
            assert_eq!(rc, 0, "fc_buffer_fill_ctx after the input: {}", last_message());
            assert_eq!(fc_add_ctx(c.h, x, x, x, 16), 0, "fc_add_ctx after the input: {}", last_message());
            let mut back = [0u8; 64];
            let rc = fc_buffer_download(x, back.as_mut_ptr().cast(), 64);
            assert_eq!(rc, 0, "a download after the input: {}", last_message());
            // 0x3c3c3c3c as f32, doubled: the exponent goes up by one.
            let want = (f32::from_le_bytes([0x3c; 4]) * 2.0).to_le_bytes();
            assert!(back.chunks(4).all(|v| v == want), "plain work after the input read back wrong: {back:?}");
            fc_buffer_free(x);
        }
        for c in w.ctxs.iter().filter(|c| c.live) {
            fc_cuda_ctx_free(c.h);
        }
        let (mut handles, mut contexts) = (usize::MAX, usize::MAX);
        check("fc_live_objects", fc_live_objects(&mut handles, &mut contexts));
        assert_eq!((handles, contexts), (0, 0), "handles and contexts left alive once every handle was freed");
    }
}

fuzz_target!(|data: &[u8]| {
    let d = double();
    let before = d.live();
    let mut b = Bytes::new(data);
    let mut calls = 0;
    while !b.done() && calls < MAX_CALLS {
        call(&mut b);
        calls += 1;
    }
    finish();
    assert_eq!(d.live(), before, "driver objects left alive once every handle was freed");
    d.assert_no_misuse();
});
