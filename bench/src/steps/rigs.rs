//! The two rigs every family of `--steps` rows measures on: [`Rig`], the
//! library's chain and the bare driver calls it wraps, on two streams of
//! one CUDA context (with [`BareExec`], a bare executable of the chain,
//! and [`ChainRun`], what a family measures at one chain length), and
//! [`CRig`], the same chain through the C ABI.

use std::os::raw::c_void;

use cuda_sys::result::{graph, graph_exec, kernel, stream};
use cuda_sys::*;
use fc_graph::{BinaryOp, Context, Graph, Module, Result};

use crate::chain::Chain;

/// A bare driver call's result, its failure named by the driver (as a
/// plain `Error::Cuda`, whatever the code).
pub(super) fn ok<T>(r: std::result::Result<T, DriverError>) -> Result<T> {
    r.map_err(|e| {
        let (name, description) = match fc_graph::driver() {
            Ok(d) => (e.name(d), e.description(d)),
            Err(_) => (format!("CUDA_ERROR_{}", e.code), String::new()),
        };
        fc_graph::Error::Cuda { call: e.call, code: e.code, name, description }
    })
}

/// The status of a bare driver call (`CUDA_SUCCESS` when it succeeded).
pub(super) fn rc<T>(r: std::result::Result<T, DriverError>) -> CUresult {
    r.err().map_or(CUDA_SUCCESS, |e| e.code)
}

/// The library's K-kernel chain and the bare driver calls it wraps: the
/// same built-in kernels (loaded a second time as a module of the rig's
/// own) on the same buffers, launched on a second stream of the same CUDA
/// context.
pub(super) struct Rig {
    /// The library's side: its context and the chain's buffers.
    pub(super) chain: Chain,
    pub(super) func_add: CUfunction,
    pub(super) func_mul: CUfunction,
    /// The bare launches use PDL (as the library's built-ins do here;
    /// [`Rig::set_pdl`] switches both sides).
    pub(super) pdl: std::cell::Cell<bool>,
    /// A second stream of the same CUDA context for the bare calls: asking
    /// for the chain context's own stream would mark it as shared with
    /// foreign work, which makes the library's re-capture updates count
    /// nodes (see `Context::raw_stream`).
    pub(super) bare_stream: CUstream,
    bare: Context,
    _module: Module,
}

impl Rig {
    /// The rig on `device` with `n`-float buffers, the built-ins loaded
    /// and the context bound to this thread (one warm-up chain run).
    pub(super) fn open(device: usize, n: usize) -> Result<Rig> {
        let ctx = Context::new(device)?;
        let pdl = ctx.pdl_enabled();
        let ptx = if pdl { fc_graph::builtins::ELEMENTWISE_SM90_PTX } else { fc_graph::builtins::ELEMENTWISE_PTX };
        let module = Module::from_ptx(&ctx, ptx)?;
        let bare = Context::new(device)?;
        let rig = Rig {
            chain: Chain::alloc(ctx, n)?,
            func_add: module.kernel("fc_add_f32")?.raw_function(),
            func_mul: module.kernel("fc_mul_f32")?.raw_function(),
            pdl: std::cell::Cell::new(pdl),
            bare_stream: bare.raw_stream(),
            bare,
            _module: module,
        };
        rig.chain.enqueue(26)?; // loads the built-ins, binds the context to this thread
        rig.sync()?;
        Ok(rig)
    }

    /// Launch mode of both sides: the library's built-ins (its PDL switch)
    /// and the bare launches.
    pub(super) fn set_pdl(&self, on: bool) {
        self.chain.ctx.set_pdl(on);
        self.pdl.set(on);
    }

    /// Waits for both streams.
    pub(super) fn sync(&self) -> Result<()> {
        self.chain.ctx.synchronize()?;
        self.bare.synchronize()
    }

    /// K kernels re-captured through the library into `g`, updated in
    /// place (an error if the library instantiated instead).
    pub(super) fn fc_recapture(&self, g: &mut Graph, k: usize) -> Result<()> {
        let rep = self.chain.recapture(g, k)?;
        if rep.updated != 1 {
            return Err(fc_graph::Error::invalid(format!("re-capture K={k}: not updated in place ({rep:?})")));
        }
        Ok(())
    }

    /// The same K kernels as bare cuLaunchKernel calls on the same stream.
    pub(super) fn raw_chain(&self, d: &Driver, k: usize) -> Result<()> {
        self.raw_chain_with(d, k, |_| false)
    }

    /// The K kernels as bare launches, node `i` in operand variant
    /// `swap(i)` (see [`Chain::node`]; all `false`: [`Rig::raw_chain`]).
    pub(super) fn raw_chain_with(&self, d: &Driver, k: usize, swap: impl Fn(usize) -> bool) -> Result<()> {
        let grid = (self.chain.n as u32).div_ceil(256);
        for i in 0..k {
            let (op, a, b, o) = self.chain.node(i, swap(i));
            let f = if op == BinaryOp::Add { self.func_add } else { self.func_mul };
            let (mut a, mut b, mut o, mut n) = (a.as_raw(), b.as_raw(), o.as_raw(), self.chain.n as u32);
            let mut p: [*mut c_void; 4] = [
                (&mut a as *mut u64).cast(),
                (&mut b as *mut u64).cast(),
                (&mut o as *mut u64).cast(),
                (&mut n as *mut u32).cast(),
            ];
            if self.pdl.get() {
                let mut value = CUlaunchAttributeValue { pad: [0; 64] };
                value.programmaticStreamSerializationAllowed = 1;
                let mut attr =
                    CUlaunchAttribute { id: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, pad: [0; 4], value };
                let config = CUlaunchConfig {
                    gridDimX: grid,
                    gridDimY: 1,
                    gridDimZ: 1,
                    blockDimX: 256,
                    blockDimY: 1,
                    blockDimZ: 1,
                    sharedMemBytes: 0,
                    hStream: self.bare_stream,
                    attrs: &mut attr,
                    numAttrs: 1,
                };
                // SAFETY: as below; `config` and its attribute live across the call.
                let launched = unsafe { kernel::launch_ex(d, &config, f, p.as_mut_ptr(), std::ptr::null_mut()) };
                let Some(launched) = launched else {
                    return Err(fc_graph::Error::invalid("no cuLaunchKernelEx"));
                };
                ok(launched)?;
                continue;
            }
            // SAFETY: (u64, u64, u64, u32) parameters as the PTX declares; live stream.
            ok(unsafe {
                kernel::launch(
                    d,
                    f,
                    (grid, 1, 1),
                    (256, 1, 1),
                    0,
                    self.bare_stream,
                    p.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            })?;
        }
        Ok(())
    }
}

/// What a family of per-chain rows measures on: the driver, the rig, the
/// chain length K and the timed iterations per row.
#[derive(Clone, Copy)]
pub(super) struct ChainRun<'a> {
    pub(super) d: &'a Driver,
    pub(super) rig: &'a Rig,
    pub(super) k: usize,
    pub(super) iters: usize,
}

/// A bare capture of the rig's K kernels (begin, launches, end), node `i`
/// in operand variant `swap(i)` (see [`Chain::node`]).
pub(super) fn bare_capture(d: &Driver, rig: &Rig, k: usize, swap: impl Fn(usize) -> bool) -> Result<CUgraph> {
    let stream = rig.bare_stream;
    // SAFETY: our stream, not capturing.
    ok(unsafe { stream::begin_capture(d, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) })?;
    let chain = rig.raw_chain_with(d, k, swap);
    // SAFETY: our capturing stream (a graph a failed end hands out is
    // destroyed by the call).
    let end = ok(unsafe { stream::end_capture(d, stream) });
    if let Err(e) = chain {
        if let Ok(g) = end {
            if !g.is_null() {
                // SAFETY: the graph the end handed us, destroyed once.
                let _ = unsafe { graph::destroy(d, g) };
            }
        }
        return Err(e);
    }
    end
}

/// One executable and the graph it keeps, for the bare update rows.
pub(super) struct BareExec {
    pub(super) exec: CUgraphExec,
    pub(super) source: CUgraph,
}

impl BareExec {
    pub(super) fn new(d: &Driver, rig: &Rig, k: usize) -> Result<BareExec> {
        let source = bare_capture(d, rig, k, |_| false)?;
        // SAFETY: live graph.
        match ok(unsafe { graph_exec::instantiate(d, source, 0) }) {
            Ok(exec) => Ok(BareExec { exec, source }),
            Err(e) => {
                // SAFETY: ours, destroyed once.
                let _ = unsafe { graph::destroy(d, source) };
                Err(e)
            }
        }
    }

    /// Re-captures and updates in place; `keep_new`: the re-captured graph
    /// becomes `source` and the old one is destroyed, else the re-captured
    /// one is destroyed after the update.
    pub(super) fn recapture(&mut self, d: &Driver, rig: &Rig, k: usize, keep_new: bool) -> Result<()> {
        self.recapture_with(d, rig, k, keep_new, |_| false)
    }

    /// [`BareExec::recapture`] of the chain with node `i` in operand
    /// variant `swap(i)` (see [`Chain::node`]).
    pub(super) fn recapture_with(
        &mut self,
        d: &Driver,
        rig: &Rig,
        k: usize,
        keep_new: bool,
        swap: impl Fn(usize) -> bool,
    ) -> Result<()> {
        let g = bare_capture(d, rig, k, swap)?;
        // SAFETY: live executable and graph of the rig's context; the
        // executable is ours (`&mut self`).
        let outcome = unsafe { graph_exec::update(d, self.exec, g) };
        let res = match outcome {
            None => Err(fc_graph::Error::invalid("no cuGraphExecUpdate")),
            // A refusal is an error here too (`GraphExecUpdate::status`).
            Some(o) => ok(o.and_then(|o| DriverError::check("cuGraphExecUpdate", o.status))),
        };
        let victim = if keep_new && res.is_ok() { std::mem::replace(&mut self.source, g) } else { g };
        // SAFETY: a graph we own that nothing needs any more, destroyed once.
        let _ = unsafe { graph::destroy(d, victim) };
        res
    }

    pub(super) fn destroy(self, d: &Driver) {
        // SAFETY: ours, destroyed once.
        unsafe {
            let _ = graph_exec::destroy(d, self.exec);
            let _ = graph::destroy(d, self.source);
        }
    }
}

/// The v2 node parameters of one kernel of the rig's chain: `func` over
/// `grid` blocks of 256 threads, with the `cuLaunchKernel`-style argument
/// array `params`.
pub(super) fn chain_node_params(func: CUfunction, grid: u32, params: *mut *mut c_void) -> CUDA_KERNEL_NODE_PARAMS_v2 {
    CUDA_KERNEL_NODE_PARAMS_v2 {
        func,
        gridDimX: grid,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 256,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: params,
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// A context and three buffers made through the C ABI, recording the
/// K-kernel chain through it (`c_graph_launch`, `c_recapture_update`).
pub(super) struct CRig {
    pub(super) ctx: *mut fcgraph::fc_cuda_ctx,
    pub(super) bufs: Vec<*mut fcgraph::fc_buffer>,
    n: usize,
}

impl CRig {
    pub(super) fn new(device: usize, n: usize) -> Result<CRig> {
        use fcgraph as c;
        let device = std::os::raw::c_int::try_from(device).map_err(|_| fc_graph::Error::invalid("device"))?;
        let ctx = c::fc_cuda_init_device(device);
        if ctx.is_null() {
            return Err(c_failure("fc_cuda_init_device"));
        }
        let mut rig = CRig { ctx, bufs: Vec::new(), n };
        rig.bufs = (0..3).map(|_| c::fc_buffer_alloc_ctx(ctx, n * 4)).collect();
        if rig.bufs.iter().any(|b| b.is_null()) {
            return Err(c_failure("fc_buffer_alloc_ctx"));
        }
        Ok(rig)
    }

    /// Begins a capture and records the K kernels through the C ABI.
    fn record(&self, k: usize) -> Result<()> {
        use fcgraph as c;
        if c::fc_graph_begin_ctx(self.ctx) != 0 {
            return Err(c_failure("fc_graph_begin_ctx"));
        }
        let b = &self.bufs;
        for i in 0..k {
            let rc = if i % 2 == 0 {
                c::fc_add_ctx(self.ctx, b[0], b[1], b[2], self.n)
            } else {
                c::fc_mul_ctx(self.ctx, b[2], b[1], b[0], self.n)
            };
            if rc != 0 {
                c::fc_graph_abort_ctx(self.ctx);
                return Err(c_failure("fc_add_ctx / fc_mul_ctx"));
            }
        }
        Ok(())
    }

    /// A graph of the K kernels, which the caller frees.
    pub(super) fn capture(&self, k: usize) -> Result<*mut fcgraph::fc_graph> {
        self.record(k)?;
        let graph = fcgraph::fc_graph_end_ctx(self.ctx);
        if graph.is_null() {
            return Err(c_failure("fc_graph_end_ctx"));
        }
        Ok(graph)
    }

    /// Re-records the K kernels into `graph`; in place or an error.
    pub(super) fn recapture(&self, graph: *mut fcgraph::fc_graph, k: usize) -> Result<()> {
        self.record(k)?;
        let mut updated = 0;
        // SAFETY: a live context and graph of it; a valid out-pointer.
        let rc = unsafe { fcgraph::fc_graph_end_update_ctx(self.ctx, graph, &mut updated) };
        if rc != 0 || updated != 1 {
            return Err(fc_graph::Error::invalid(format!(
                "c_recapture_update K={k}: fc_graph_end_update_ctx returned {rc}, {updated} updated in place"
            )));
        }
        Ok(())
    }
}

impl Drop for CRig {
    fn drop(&mut self) {
        use fcgraph as c;
        for &b in &self.bufs {
            c::fc_buffer_free(b);
        }
        c::fc_cuda_ctx_free(self.ctx);
    }
}

/// The error of a failed C ABI call in the steps.
pub(super) fn c_failure(what: &str) -> fc_graph::Error {
    let msg = fcgraph::fc_last_error();
    let detail = if msg.is_null() {
        String::new()
    } else {
        // SAFETY: fc_last_error returns NULL or a NUL-terminated string that
        // stays valid until the next failing call on this thread.
        unsafe { std::ffi::CStr::from_ptr(msg) }.to_string_lossy().into_owned()
    };
    fc_graph::Error::invalid(format!("{what} failed in the steps: {detail}"))
}
