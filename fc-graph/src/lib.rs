#![warn(missing_docs)]
//! # fc-graph: safe, fast CUDA graph capture and replay
//!
//! fc-graph records chains of GPU work (an inference engine's layers) into
//! CUDA graphs and replays them, at the cost of the bare driver calls, from
//! Rust or from C (`libfcgraph.so`, `include/cuda/fc_cuda.h`). The CUDA
//! driver is loaded at run time: building needs no CUDA toolkit, no GPU and
//! no libclang, and without a driver every call returns
//! [`Error::NoDriver`] instead of failing to link or panicking.
//!
//! ## Capture and replay
//!
//! A [`Context`] is a CUDA context of one device plus a non-blocking stream
//! of its own. Work queued on it while a [`Capture`] is open is *recorded*,
//! not run; [`Capture::end`] instantiates it into a [`Graph`], which
//! [`Graph::launch`] replays (asynchronously) on the context's stream.
//!
//! ```no_run
//! use fc_graph::{CaptureMode, Context};
//!
//! # fn main() -> fc_graph::Result<()> {
//! let ctx = Context::new(0)?; // device 0, primary context, own stream
//! let n = 4096;
//! let (x, y, z) = (ctx.alloc(n * 4)?, ctx.alloc(n * 4)?, ctx.alloc(n * 4)?);
//! x.upload(&vec![1.0f32; n])?;
//! y.upload(&vec![2.0f32; n])?;
//!
//! let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?; // guard: dropped = aborted
//! ctx.add(&x, &y, &z, n)?; // recorded: z = x + y
//! ctx.mul(&z, &y, &x, n)?; // recorded: x = z * y
//! let graph = cap.end()?; // instantiated
//!
//! graph.launch()?; // queued on ctx's stream
//! ctx.synchronize()?; // waits for this stream only, never the whole device
//! let mut out = vec![0f32; n];
//! x.download(&mut out)?;
//! assert_eq!(out[0], (1.0 + 2.0) * 2.0);
//! # Ok(()) }
//! ```
//!
//! ## Recording by construction
//!
//! By default a recording does not put any stream into capture mode: each
//! call of the library (built-ins, user kernels, fills) is written down as
//! a node with the parameters the eager launch would use (PDL as
//! programmatic edges on CUDA 12.3+), and the graph is built node by node
//! when the recording ends. Nothing another thread or library does on the
//! GPU (a `cudaDeviceSynchronize`, a GLOBAL-mode capture, a context made or
//! destroyed) can invalidate, refuse or crash it, and recording costs less
//! than the driver's stream capture. Work other libraries enqueue (cuBLAS,
//! NCCL, the engine's own kernels) enters a recording through a *foreign
//! section* ([`Capture::foreign`]), which captures the context's stream for
//! its duration and becomes one child node. A context whose raw stream was
//! handed out ([`Context::raw_stream`]) records by stream capture instead,
//! so that work queued on a cached stream is still recorded; see
//! [`recording_mode`] to choose. [`Recording`] is the recording object
//! itself, for callers that begin and end it in different places.
//!
//! Re-recording the same work with other parameters (new buffers, new
//! sizes of the same shape) and [`Capture::end_update`] updates an existing
//! graph in place: node by node where the same kernels and fills, foreign
//! sections of the same shape and conditionals whose bodies fit were
//! recorded in the same order (one driver call per changed node and per
//! foreign section, none when nothing changed: [`UpdateReport::node_calls`]),
//! else with
//! `cuGraphExecUpdate`, several times cheaper than instantiating anew:
//!
//! ```no_run
//! # use fc_graph::{CaptureMode, Context};
//! # fn main() -> fc_graph::Result<()> {
//! # let ctx = Context::new(0)?;
//! # let (a, b, c) = (ctx.alloc(64)?, ctx.alloc(64)?, ctx.alloc(64)?);
//! let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
//! ctx.add(&a, &b, &c, 16)?;
//! let mut graph = cap.end()?;
//!
//! let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
//! ctx.add(&c, &b, &a, 16)?; // same topology, other buffers
//! let report = cap.end_update(&mut graph)?;
//! assert_eq!(report.updated, 1);
//! # Ok(()) }
//! ```
//!
//! A changed topology (more kernels, other launch kinds) is instantiated
//! anew instead, and never reaches the driver as a refused update (which
//! compute-sanitizer would report). Where the library's own kernel
//! launches recorded a segment, their sequence tells whether it still
//! matches, for free; once [`Context::raw_stream`] was handed out (another
//! library may record into the graph) or a segment holds a fill, each
//! update counts the re-captured graph's nodes first (`cuGraphGetNodes`,
//! about 23 ns per node on an H200).
//!
//! ## Lanes: parallel branches
//!
//! [`Context::fork`] gives lanes (extra streams of the context, eagerly;
//! branches of the graph, recorded) whose work runs beside each other;
//! [`Context::join`] waits for them. The same code runs eagerly and
//! recorded; see [`lanes`].
//!
//! ```no_run
//! # use fc_graph::{CaptureMode, Context};
//! # fn main() -> fc_graph::Result<()> {
//! # let ctx = Context::new(0)?;
//! # let (a, b, c, d) = (ctx.alloc(64)?, ctx.alloc(64)?, ctx.alloc(64)?, ctx.alloc(64)?);
//! let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
//! let lanes = ctx.fork(2)?;
//! lanes[0].add(&a, &b, &a, 16)?; // runs beside
//! lanes[1].mul(&c, &b, &c, 16)?; // this one
//! ctx.join(&lanes)?;
//! ctx.add(&a, &c, &d, 16)?; // after both
//! let graph = cap.end()?;
//! # Ok(()) }
//! ```
//!
//! A foreign section can capture any lane's stream
//! ([`Capture::foreign_begin_on`]): a cuBLAS GEMM on one lane is recorded
//! beside the library's own kernels on another.
//!
//! ## Conditional nodes: loops and branches decided on the GPU
//!
//! In a recording that builds (CUDA 12.3+ drivers), [`Context::while_loop`],
//! [`Context::repeat`], [`Context::if_then`], [`Context::if_else`] and
//! [`Context::switch`] (12.8+) record their closure's work as the body of a
//! conditional node; a `u32` in device memory decides, read on the device,
//! so a kernel of the same graph may compute it. See [`conditional`].
//!
//! ```no_run
//! # use fc_graph::{CaptureMode, Context};
//! # fn main() -> fc_graph::Result<()> {
//! # let ctx = Context::new(0)?;
//! # let (x, y) = (ctx.alloc(64)?, ctx.alloc(64)?);
//! let steps = ctx.alloc(4)?;
//! steps.upload(&[8u32])?; // or written by a kernel of the recording
//! let cap = ctx.begin_capture(CaptureMode::ThreadLocal)?;
//! ctx.repeat(&steps, |c| c.add(&x, &y, &x, 16))?; // x += y, *steps times
//! let graph = cap.end()?;
//! graph.launch()?;
//! # Ok(()) }
//! ```
//!
//! ## Breaks: host code between captured segments
//!
//! Some steps cannot be captured (host decisions, data-dependent shapes,
//! libraries that synchronise). [`Capture::brk`] ends the current segment,
//! runs a function now, records it and opens the next segment; at replay
//! the function runs again between the two segments with the *live* value
//! given to [`Graph::replay`] (values it captured by move stay frozen).
//! [`break_here`] is the same for code that also runs eagerly.
//!
//! ```no_run
//! use fc_graph::{CaptureMode, Context};
//!
//! struct Step { scale: f32 }
//!
//! # fn main() -> fc_graph::Result<()> {
//! let ctx = Context::new(0)?;
//! let (x, y) = (ctx.alloc(1024)?, ctx.alloc(1024)?);
//! let mut cap = ctx.begin_breakable::<Step>(CaptureMode::ThreadLocal)?;
//! ctx.add(&x, &x, &y, 256)?; // segment 1
//! cap.brk(&Step { scale: 1.0 }, |ctx, step| {
//!     // runs eagerly now, and at every replay with that replay's Step
//!     let _ = step.scale;
//!     ctx.synchronize()
//! })?;
//! ctx.mul(&y, &y, &x, 256)?; // segment 2
//! let graph = cap.end()?; // 3 pieces: segment, break, segment
//! graph.replay(&Step { scale: 0.5 })?;
//! # Ok(()) }
//! ```
//!
//! ## Memory: the capture pool
//!
//! [`Context::alloc`] takes plain `cuMemAlloc` memory, except while the
//! context captures: then the memory comes from the context's capture
//! [`pool`], so its address stays valid for every replay, and a buffer
//! dropped inside the capture (a dead intermediate) goes back to the pool
//! for later captures of the same context instead of to the driver. Graphs
//! of one context replay in order on its one stream, so this reuse is safe
//! for intermediates; buffers you keep (outputs) are never reused. New
//! memory is not initialised. Memory another library owns can be used
//! through [`Context::wrap_device_memory`].
//!
//! ## Capture modes and the shield
//!
//! Captures open in [`CaptureMode::ThreadLocal`] by default: the driver
//! then restricts "potentially unsafe" calls (allocations, synchronisations)
//! on the capturing thread only. In addition, every potentially unsafe call
//! the library makes runs with the thread's capture mode exchanged to
//! RELAXED (the *shield*), so a capture another library opened on another
//! thread, even in GLOBAL mode (PyTorch's), neither refuses our calls nor is
//! destroyed by them. The shield covers only fc-graph's own calls.
//!
//! ## Primary or isolated contexts
//!
//! [`Context::new`] runs in the device's primary context, shared with the
//! CUDA runtime and every library of the process (PyTorch, cuBLAS, NCCL):
//! pointers can be exchanged freely. But a device-wide synchronisation by
//! another library (`cudaDeviceSynchronize`, `torch.cuda.synchronize()`,
//! `cudaFree`) while one of our captures is open invalidates that capture
//! ([`Error::CaptureInvalidated`]). [`Context::isolated`] creates a context
//! of its own, a green context where the driver has them (CUDA 12.4+),
//! else a private CUDA context ([`Context::isolation`] tells which;
//! [`isolation`] explains the choice): other libraries' synchronisations
//! neither see nor break its captures, at the price of memory and modules
//! of its own. A green context runs beside the primary context at full
//! speed; a private one time-slices the GPU with it.
//! [`Context::capture_with_retry`] records a capture again when it was
//! invalidated:
//!
//! ```no_run
//! # use fc_graph::{CaptureMode, Context};
//! # fn main() -> fc_graph::Result<()> {
//! let ctx = Context::new(0)?;
//! let (a, b) = (ctx.alloc(1024)?, ctx.alloc(1024)?);
//! let done = ctx.capture_with_retry::<(), _>(CaptureMode::ThreadLocal, 8, |cap| {
//!     let ctx = cap.context();
//!     ctx.add(&a, &b, &a, 256)
//! })?;
//! println!("captured in {} recording(s)", done.tries);
//! done.graph.launch()?;
//! # Ok(()) }
//! ```
//!
//! ## User kernels
//!
//! [`Module::from_ptx`] JIT-compiles PTX; [`Kernel::launch`] checks every
//! [`KernelArg`] against the parameters the PTX declares (count, size,
//! integer or float, buffers of the right context) before launching, so a
//! wrong argument is an error, not a corrupted launch:
//!
//! ```no_run
//! use fc_graph::{Context, KernelArg, LaunchConfig, Module};
//!
//! # fn main() -> fc_graph::Result<()> {
//! let ptx = r#"
//! .version 7.0
//! .target sm_35
//! .address_size 64
//! .visible .entry fill(.param .u64 out, .param .f32 v, .param .u32 n)
//! { ret; }
//! "#;
//! let ctx = Context::new(0)?;
//! let out = ctx.alloc(4096)?;
//! let fill = Module::from_ptx(&ctx, ptx)?.kernel("fill")?;
//! fill.launch(LaunchConfig::for_elements(1024, 256), &[KernelArg::Buffer(&out), 1.5f32.into(), 1024u32.into()])?;
//! # Ok(()) }
//! ```
//!
//! ## Programmatic dependent launch (PDL)
//!
//! On compute capability 9.0+ under CUDA 12.3+ drivers the built-in kernels
//! launch with PDL: each may start while its predecessor finishes and waits
//! for it on the device (`griddepcontrol.wait`), and a captured chain
//! replays about 1.25x faster. Nothing to do for that; [`Context::set_pdl`]
//! `(false)` or `FC_PDL=0` turns it off. A user kernel that waits with
//! `griddepcontrol.wait` before touching memory opts in with
//! [`Kernel::set_pdl`] or per launch with [`LaunchOptions`]; one that does
//! not must stay plain (the default). See [`launch`].
//!
//! ```no_run
//! use fc_graph::{supports_pdl, Context, Module};
//!
//! # fn main() -> fc_graph::Result<()> {
//! # let (pdl_ptx, plain_ptx) = ("", "");
//! let ctx = Context::new(0)?;
//! let pdl = supports_pdl(&ctx.device())?;
//! let module = Module::from_ptx(&ctx, if pdl { pdl_ptx } else { plain_ptx })?;
//! let mut k = module.kernel("my_kernel")?;
//! k.set_pdl(pdl); // only because my_kernel waits with griddepcontrol.wait
//! # Ok(()) }
//! ```
//!
//! ## Threads
//!
//! [`Context`], [`DeviceBuffer`], [`Graph`], [`Module`] and [`Kernel`] are
//! `Send + Sync`. One context may be used from several threads: work is
//! queued on its stream in the order the calls are made. At most one
//! capture is open per context; a [`Capture`] guard stays on the thread that
//! opened it (the driver lets only that thread end it), and a
//! [`Recording`] itself serves callers that open and end a recording in
//! different places (the C API holds one per context between calls). Contexts on different devices,
//! or several on one device, capture independently and concurrently.
//!
//! ## Errors
//!
//! Every fallible call returns [`Result`]; nothing panics on bad input or a
//! missing driver. Driver failures carry the CUDA error name and the call;
//! a failed capture names the first failing call inside it, its thread and
//! the CUDA error.
//!
//! ## Token buckets
//!
//! Prefill graphs are captured per token *bucket*; [`buckets`] computes the
//! ladder and picks the bucket for a batch:
//!
//! ```
//! use fc_graph::buckets::{bucket_for, token_buckets, BucketConfig};
//!
//! let ladder = token_buckets(&BucketConfig { max_tokens: 512, chunk_size: None, ..Default::default() });
//! assert_eq!(&ladder[..6], &[1, 2, 4, 8, 16, 32]);
//! assert_eq!(bucket_for(&ladder, 100), Some(112));
//! assert_eq!(bucket_for(&ladder, 513), None);
//! ```
//!
//! ## Graph cache
//!
//! [`GraphCache`] keeps one graph per key (a bucket, a shape) and runs a
//! key's work once per call: replayed when its graph is ready, captured
//! (optionally after an eager warm-up) when it is not, updated in place
//! after [`GraphCache::invalidate`], and run eagerly when capturing fails,
//! with bounded retries and a time-based backoff instead of a permanent
//! latch; least recently used graphs are evicted under a count and a byte
//! cap. See [`cache`].
//!
//! ```no_run
//! use fc_graph::{CacheConfig, Context, GraphCache};
//!
//! # fn main() -> fc_graph::Result<()> {
//! let ctx = Context::new(0)?;
//! let (x, y) = (ctx.alloc(4096 * 4)?, ctx.alloc(4096 * 4)?);
//! let cache: GraphCache<usize> = GraphCache::new(&ctx, CacheConfig::default())?;
//! for n in [16, 32, 16] {
//!     cache.run(&n, &(), |rec| rec.context().add(&x, &y, &x, n))?; // captured, captured, replayed
//! }
//! # Ok(()) }
//! ```
//!
//! ## Layout
//!
//! [`driver()`] loads the driver ([`cuda_sys`]; every driver call goes
//! through its checked-call layer, `cuda_sys::result`); [`device`],
//! [`context`], [`buffer`] and [`pool`] hold devices, contexts and memory
//! (a context is a composition of parts: its CUDA context, streams,
//! recorder, capture state, capture pool and kernel set: [their
//! map](context#parts) says what each owns and who calls it); [`builtins`]
//! and [`module`] the kernels, [`launch`] how they are launched (with
//! programmatic dependent launch where it pays); [`recording`] (a
//! recording: its segments, breaks and foreign sections; how it takes the
//! work is [`recording_mode`]'s choice), [`capture`] (its guard and
//! re-recording; [`CaptureMode`] beside it), [`capture_state`] (one
//! recording per context) and
//! [`graph`] record and replay; [`graph_builder`] builds graphs node by
//! node explicitly;
//! [`isolation`] how isolated contexts are made; [`event`]
//! timing events; [`buckets`] token buckets; [`cache`] the graph cache.

pub mod buckets;
pub mod buffer;
mod built_segment;
mod builtin_kernels;
pub mod builtins;
pub mod cache;
pub mod capture;
mod capture_mode;
pub mod capture_state;
pub mod conditional;
pub mod conditional_kernels;
pub mod context;
pub mod device;
pub mod driver;
pub mod error;
pub mod event;
pub mod features;
mod gate;
pub mod graph;
pub mod graph_builder;
pub mod isolation;
pub mod lanes;
pub mod launch;
mod launch_config;
pub mod module;
mod module_handle;
mod nodes;
pub mod pool;
pub mod ptx_params;
pub mod recording;
pub mod recording_mode;
mod segment;
mod sync;
#[cfg(test)]
mod test_double;
mod topology;

pub use buffer::{DeviceBuffer, Origin};
pub use builtins::BinaryOp;
pub use cache::{CacheConfig, CacheStats, GraphCache, Outcome};
pub use capture::{break_here, Capture, Recaptured};
pub use capture_mode::CaptureMode;
pub use conditional::Conditional;
pub use context::{Context, ContextKind};
pub use device::Device;
pub use driver::driver;
pub use error::{Error, Result};
pub use event::Event;
pub use graph::{BreakFn, Graph, UpdateReport};
pub use graph_builder::{BuiltGraph, GraphBuilder, KernelParams, MemsetParams};
pub use isolation::{Isolation, IsolationRequest};
pub use launch::{supports_pdl, LaunchOptions};
pub use module::{Kernel, KernelArg, LaunchConfig, LaunchLimits, Module};
pub use recording::Recording;
pub use recording_mode::RecordingMode;

/// The library version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
