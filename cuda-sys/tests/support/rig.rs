//! A device on the driver double (`fc_driver_double`, the simulated driver
//! of `driver-double/`) for tests that call the driver table directly: a
//! fresh copy of the double at one driver version (its own state), loaded
//! with cuda-sys's loader, initialised, device 0's primary context current
//! on the calling thread, a stream, and fc-graph's element-wise kernels
//! (`fc-graph/kernels/elementwise.ptx`: `fc_add_f32`, `fc_mul_f32`, whose
//! parameters are `(u64 a, u64 b, u64 out, u32 n)`) loaded; with the calls
//! tests need to make real objects and read real values back.
//!
//! Every handle a test passes to the double must be one the double made:
//! anything else is a misuse, which ends the process with status 86 unless
//! taken back (`Probe::take_misuses`).
//!
//! Shared by cuda-sys's tests and fc-graph's (`#[path]`), so it uses only
//! cuda-sys, fc-driver-double and std.

#![allow(dead_code)]

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};

use cuda_sys::*;
use fc_driver_double::{fresh_copy, Probe};

/// fc-graph's element-wise kernels (ISA 7.0, sm_35: every simulated driver
/// and device loads them).
pub const ELEMENTWISE_PTX: &str = include_str!("../../../fc-graph/kernels/elementwise.ptx");

/// Asserts that a driver call succeeded.
#[track_caller]
pub fn ok(res: CUresult, what: &str) {
    assert_eq!(res, CUDA_SUCCESS, "{what}");
}

/// A device on a fresh copy of the driver double.
pub struct Rig {
    /// The loaded double.
    pub driver: Driver,
    /// Its control functions (the same state as `driver`).
    pub probe: Probe,
    /// The driver version it was configured with.
    pub version: i32,
    /// Device 0's primary context, current on the thread that made the rig.
    pub ctx: CUcontext,
    /// A stream of that context.
    pub stream: CUstream,
    /// The element-wise kernels' module.
    pub module: CUmodule,
    /// `fc_add_f32(a, b, out, n)`: `out[i] = a[i] + b[i]`.
    pub add: CUfunction,
    /// `fc_mul_f32(a, b, out, n)`: `out[i] = a[i] * b[i]`.
    pub mul: CUfunction,
    /// The loaded copy's file.
    path: PathBuf,
    /// A folder of the rig's own, removed with it.
    own_dir: Option<PathBuf>,
}

impl Rig {
    /// A copy of the double at `version` in `dir` (`lib<name>_<version>_<pid>.so`),
    /// with one device, loaded and set up on the calling thread.
    pub fn new(dir: &Path, name: &str, version: i32) -> Rig {
        let (path, probe) = fresh_copy(dir, name, version, 1).unwrap_or_else(|e| panic!("{e}"));
        let driver = match Driver::load_from(&[path.to_str().expect("utf-8 path")]) {
            Ok(d) => d,
            Err(e) => panic!("the double of {version} ({}) should load: {e}", path.display()),
        };
        // SAFETY: plain values and valid out-pointers throughout; the
        // context is the one the double hands out, made current before the
        // calls that need one.
        let (ctx, stream) = unsafe {
            ok((driver.cuInit)(0), "cuInit");
            let mut dev: CUdevice = 0;
            ok((driver.cuDeviceGet)(&mut dev, 0), "cuDeviceGet");
            let mut ctx: CUcontext = std::ptr::null_mut();
            ok((driver.cuDevicePrimaryCtxRetain)(&mut ctx, dev), "cuDevicePrimaryCtxRetain");
            ok((driver.cuCtxSetCurrent)(ctx), "cuCtxSetCurrent");
            let mut stream: CUstream = std::ptr::null_mut();
            ok((driver.cuStreamCreate)(&mut stream, 0), "cuStreamCreate");
            (ctx, stream)
        };
        let mut rig = Rig {
            driver,
            probe,
            version,
            ctx,
            stream,
            module: std::ptr::null_mut(),
            add: std::ptr::null_mut(),
            mul: std::ptr::null_mut(),
            path,
            own_dir: None,
        };
        rig.module = rig.load_module(ELEMENTWISE_PTX);
        rig.add = rig.function(rig.module, "fc_add_f32");
        rig.mul = rig.function(rig.module, "fc_mul_f32");
        rig
    }

    /// [`Rig::new`] in a folder of the rig's own (`dir`, made for it),
    /// removed when the rig is dropped.
    pub fn in_own_dir(dir: &Path, name: &str, version: i32) -> Rig {
        let mut rig = Rig::new(dir, name, version);
        rig.own_dir = Some(dir.to_path_buf());
        rig
    }

    /// Loads a module from PTX text into the rig's context.
    pub fn load_module(&self, ptx: &str) -> CUmodule {
        let text = CString::new(ptx).expect("PTX without NUL");
        let mut m: CUmodule = std::ptr::null_mut();
        // SAFETY: a NUL-terminated PTX text; no options; valid out-pointer.
        let res = unsafe {
            (self.driver.cuModuleLoadDataEx)(
                &mut m,
                text.as_ptr().cast(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        ok(res, "cuModuleLoadDataEx");
        m
    }

    /// Function `name` of `module`.
    pub fn function(&self, module: CUmodule, name: &str) -> CUfunction {
        let n = CString::new(name).expect("name without NUL");
        let mut f: CUfunction = std::ptr::null_mut();
        // SAFETY: a live module, a NUL-terminated name, a valid out-pointer.
        ok(unsafe { (self.driver.cuModuleGetFunction)(&mut f, module, n.as_ptr()) }, name);
        f
    }

    /// Device memory for `n` f32 (or other 4-byte) values.
    pub fn alloc(&self, n: usize) -> CUdeviceptr {
        let mut p: CUdeviceptr = 0;
        // SAFETY: a valid out-pointer; the rig's context is current.
        ok(unsafe { (self.driver.cuMemAlloc)(&mut p, n * 4) }, "cuMemAlloc");
        p
    }

    /// Device memory holding `values`.
    pub fn buffer(&self, values: &[f32]) -> CUdeviceptr {
        let p = self.alloc(values.len());
        self.upload(p, values);
        p
    }

    /// Device memory holding `values` (conditions, counts).
    pub fn buffer_u32(&self, values: &[u32]) -> CUdeviceptr {
        let p = self.alloc(values.len());
        self.upload_bytes(p, values.as_ptr().cast(), std::mem::size_of_val(values));
        p
    }

    /// Copies `values` to `dst` (waits for the copy).
    pub fn upload(&self, dst: CUdeviceptr, values: &[f32]) {
        self.upload_bytes(dst, values.as_ptr().cast(), std::mem::size_of_val(values));
    }

    /// Copies `bytes` bytes at `src` to `dst` (waits for the copy).
    fn upload_bytes(&self, dst: CUdeviceptr, src: *const c_void, bytes: usize) {
        // SAFETY: `src` holds `bytes` bytes, live until the stream is
        // synchronised below (the callers' slices); `dst` holds as many
        // (the caller's allocation).
        ok(unsafe { (self.driver.cuMemcpyHtoDAsync)(dst, src, bytes, self.stream) }, "cuMemcpyHtoDAsync");
        self.sync();
    }

    /// `n` f32 values at `src` (after the stream's work).
    pub fn download(&self, src: CUdeviceptr, n: usize) -> Vec<f32> {
        let mut out = vec![0f32; n];
        // SAFETY: `out` holds `n` values and lives until the stream is
        // synchronised below.
        ok(
            unsafe { (self.driver.cuMemcpyDtoHAsync)(out.as_mut_ptr().cast(), src, n * 4, self.stream) },
            "cuMemcpyDtoHAsync",
        );
        self.sync();
        out
    }

    /// Waits for the rig's stream.
    pub fn sync(&self) {
        // SAFETY: the rig's live stream.
        ok(unsafe { (self.driver.cuStreamSynchronize)(self.stream) }, "cuStreamSynchronize");
    }

    /// A new, empty graph.
    pub fn graph(&self) -> CUgraph {
        let mut g: CUgraph = std::ptr::null_mut();
        // SAFETY: a valid out-pointer, no flags.
        ok(unsafe { (self.driver.cuGraphCreate)(&mut g, 0) }, "cuGraphCreate");
        g
    }

    /// `graph` instantiated.
    pub fn instantiate(&self, graph: CUgraph) -> CUgraphExec {
        let mut e: CUgraphExec = std::ptr::null_mut();
        // SAFETY: a live graph of the rig's context; a valid out-pointer.
        ok(unsafe { (self.driver.cuGraphInstantiateWithFlags)(&mut e, graph, 0) }, "cuGraphInstantiateWithFlags");
        e
    }

    /// Launches `exec` on the rig's stream and waits for it.
    pub fn launch(&self, exec: CUgraphExec) {
        // SAFETY: a live executable of the rig's context, its stream.
        ok(unsafe { (self.driver.cuGraphLaunch)(exec, self.stream) }, "cuGraphLaunch");
        self.sync();
    }

    /// Adds `func(a, b, out, n)` (one thread per element, blocks of 256)
    /// to `graph` after `deps`, through whichever ABI the driver has.
    pub fn add_kernel(
        &self,
        graph: CUgraph,
        deps: &[CUgraphNode],
        func: CUfunction,
        [a, b, out]: [CUdeviceptr; 3],
        n: u32,
    ) -> CUgraphNode {
        let args = Args::new(a, b, out, n);
        let mut params = args.pointers();
        let p = launch(func, n.div_ceil(256), 256, 0, &mut params);
        // SAFETY: a live graph and its nodes; `params` points at one value
        // per kernel parameter, live across the call.
        match unsafe { self.driver.graph_add_kernel_node(graph, deps, &p) } {
            Some(Ok(node)) => node,
            other => panic!("cuGraphAddKernelNode: {other:?}"),
        }
    }

    /// Every edge of `graph`, through whichever ABI the driver has.
    pub fn edges(&self, graph: CUgraph) -> Vec<GraphEdge> {
        // SAFETY: a live graph of the rig's context.
        match unsafe { self.driver.graph_edges(graph) } {
            Some(Ok(e)) => e,
            other => panic!("cuGraphGetEdges: {other:?}"),
        }
    }

    /// The type of `node` (`cuGraphNodeGetType`).
    pub fn node_type(&self, node: CUgraphNode) -> CUgraphNodeType {
        let mut t: CUgraphNodeType = 99;
        // SAFETY: a node the double made; a valid out-pointer.
        ok(unsafe { (self.driver.cuGraphNodeGetType)(node, &mut t) }, "cuGraphNodeGetType");
        t
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // The copy stays mapped (the double is linked `-z nodelete`); its
        // file is not needed once loaded.
        let _ = std::fs::remove_file(&self.path);
        if let Some(d) = &self.own_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// The arguments of an element-wise kernel, each in storage of its own for
/// `kernelParams`.
pub struct Args {
    pub a: u64,
    pub b: u64,
    pub out: u64,
    pub n: u32,
}

impl Args {
    /// `(a, b, out, n)`.
    pub fn new(a: CUdeviceptr, b: CUdeviceptr, out: CUdeviceptr, n: u32) -> Args {
        Args { a, b, out, n }
    }

    /// `kernelParams` for them (valid while `self` is neither moved nor
    /// dropped).
    pub fn pointers(&self) -> [*mut c_void; 4] {
        [
            (&self.a as *const u64).cast_mut().cast(),
            (&self.b as *const u64).cast_mut().cast(),
            (&self.out as *const u64).cast_mut().cast(),
            (&self.n as *const u32).cast_mut().cast(),
        ]
    }
}

/// The v2 node parameters of a 1-D launch of `func` with `params`.
pub fn launch(
    func: CUfunction,
    grid: u32,
    block: u32,
    shared: u32,
    params: &mut [*mut c_void],
) -> CUDA_KERNEL_NODE_PARAMS_v2 {
    CUDA_KERNEL_NODE_PARAMS_v2 {
        func,
        gridDimX: grid,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: shared,
        kernelParams: params.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// `[type, function, gridDimX, blockDimX, sharedMemBytes, first 8
/// parameter bytes, dependencies, context]` of `node` as the double holds it.
pub fn node_of(probe: &Probe, node: CUgraphNode) -> [u64; 8] {
    probe.node(node.cast()).unwrap_or_else(|| panic!("{node:?} is a node of the double"))
}
