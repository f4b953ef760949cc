/* fc_cuda.h - C API of libfcgraph: CUDA contexts, buffers, kernels and
 * graph capture/replay for inference engines.
 *
 * Link with -lfcgraph (pkg-config fcgraph, or CMake find_package(fcgraph)
 * and the target fcgraph::fcgraph). The CUDA driver (libcuda.so.1) is
 * loaded at run time; nothing here needs the CUDA toolkit.
 *
 * ---- Conventions ---------------------------------------------------------
 *
 * Status and errors
 *   - Functions returning int return FC_OK (0) on success or one of the
 *     FC_ERR_* codes below. Constructors return NULL on failure; queries
 *     return their documented fallback. In every failing case
 *     fc_last_error() / fc_last_error_code() then describe the failure on
 *     the calling thread. Successes do not clear them (fc_clear_last_error
 *     does).
 *   - Bad input (NULL, zero or overflowing sizes, wrong device, calls in
 *     the wrong capture state, garbage PTX...) gets a clear code and
 *     message and changes nothing: the context stays usable.
 *     docs/bad-input.md lists each class of bad input with the status and
 *     message it gets and the test that checks it.
 *   - Nothing in this library aborts the process or lets a panic escape,
 *     including calls made from thread-exit paths (pthread key or C++
 *     thread_local destructors, atexit handlers).
 *
 * Handles
 *   - Handles are opaque, checked values, not addresses. A freed, never
 *     created or wrong-kind handle (a double free, a use after free, a
 *     buffer passed as a context) is refused with FC_ERR_INVALID_HANDLE and
 *     a message; NULL is refused with FC_ERR_INVALID_ARGUMENT. Every *_free
 *     accepts NULL (a no-op) and records FC_ERR_INVALID_HANDLE for a handle
 *     that is not live (it returns nothing).
 *   - Ownership: the caller owns every handle a constructor returns and
 *     frees it once with the matching *_free. Objects keep what they need
 *     alive: a buffer, graph, module or kernel keeps its CUDA context alive
 *     after fc_cuda_ctx_free, and a kernel its module after fc_module_free.
 *     The recommended order is still: graphs, kernels, modules, buffers,
 *     then the context (a break function of a graph replayed after its
 *     fc_cuda_ctx was freed receives a dead context handle, and its fc_*
 *     calls on it fail with FC_ERR_INVALID_HANDLE).
 *   - A handle freed on one thread while another thread is inside a call
 *     on it stays valid for that call; the object is destroyed when that
 *     call returns (at the latest, at the end of a later call into the
 *     library on any thread).
 *   - Cost: each handle a call takes is checked once, with a hazard
 *     pointer on the calling thread's own record (no counter shared with
 *     other threads): about 5 ns for a call taking one handle on an H200
 *     host; a call taking several (fc_add_ctx takes four) pays one fence
 *     for all. A re-capture of 26 to 2,600 element-wise kernels through
 *     this API costs 1.04-1.15x the bare driver calls, through the Rust API
 *     1.02-1.06x (GPU run 38).
 *
 * Threads
 *   - Every function may be called from any thread. One context may be
 *     used by several threads at once: calls that queue work on its stream
 *     are ordered by the driver in the order they are made. A capture is
 *     opened, split and ended by calls on the context; in THREAD_LOCAL
 *     mode (the default) the driver restricts only the capturing thread.
 *   - Every potentially unsafe driver call the library makes runs with the
 *     calling thread's capture mode exchanged to RELAXED (the "shield"), so
 *     captures that other libraries open on other threads (PyTorch's are
 *     GLOBAL) neither refuse nor are invalidated by our calls. The shield
 *     covers only the library's own calls, not work the caller queues on
 *     fc_ctx_stream() itself.
 *
 * Memory and aliasing
 *   - New buffers are not initialised (as cuMemAlloc); zero them with
 *     fc_buffer_fill_ctx if needed.
 *   - Work is queued on the context's own non-blocking stream and runs in
 *     the order it was queued; launches are asynchronous unless stated
 *     otherwise. Buffers may be used by several contexts that share a CUDA
 *     context (all primary contexts of one device do); an isolated
 *     context's buffers only by that context (FC_ERR_WRONG_CONTEXT).
 *
 * This header is checked against the library at build time: every function
 * declared here is exported by libfcgraph.so with exactly this signature.
 */
#ifndef FC_CUDA_H
#define FC_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ------------------------------------------------------ */
#define FC_OK 0
#define FC_ERR_INVALID_ARGUMENT 1     /* NULL, zero or overflowing size, bad name */
#define FC_ERR_NO_DRIVER 2            /* no usable CUDA driver (or too old)       */
#define FC_ERR_CUDA 3                 /* a driver call failed; see the message    */
#define FC_ERR_WRONG_DEVICE 4         /* a buffer/kernel lives on another device  */
#define FC_ERR_BUFFER_TOO_SMALL 5     /* a buffer is smaller than needed          */
#define FC_ERR_CAPTURE_STATE 6        /* not allowed in this capture state        */
#define FC_ERR_UNSUPPORTED 7          /* the driver is too old for the feature    */
#define FC_ERR_OUT_OF_MEMORY 8        /* device memory exhausted                  */
#define FC_ERR_CALLBACK 9             /* a break or record function returned != 0 */
#define FC_ERR_INTERNAL 10            /* internal error (a bug); see the message  */
#define FC_ERR_INVALID_HANDLE 11      /* freed, unknown or wrong-kind handle      */
#define FC_ERR_CAPTURE_INVALIDATED 12 /* the capture was invalidated (see below)  */
#define FC_ERR_WRONG_CONTEXT 13       /* buffer/kernel of another CUDA context    */

/* ---- capture modes (CUstreamCaptureMode) ------------------------------- */
#define FC_CAPTURE_MODE_GLOBAL 0
#define FC_CAPTURE_MODE_THREAD_LOCAL 1
#define FC_CAPTURE_MODE_RELAXED 2

/* ---- context isolation (fc_ctx_isolation) ------------------------------ */
#define FC_ISOLATION_NONE 0    /* the device's primary context              */
#define FC_ISOLATION_GREEN 1   /* a green context over all SMs (CUDA 12.4+) */
#define FC_ISOLATION_PRIVATE 2 /* a private context (cuCtxCreate)           */

/* ---- opaque handles ---------------------------------------------------- */
typedef struct fc_cuda_ctx fc_cuda_ctx;
typedef struct fc_buffer fc_buffer;
typedef struct fc_graph fc_graph;
typedef struct fc_module fc_module;
typedef struct fc_kernel fc_kernel;
typedef struct fc_graph_cache fc_graph_cache;
typedef struct fc_buckets fc_buckets;

/* ---- library ----------------------------------------------------------- */
/* Library version, e.g. "0.1.0". A static string. */
const char *fc_version(void);
/* Message of the most recent failure on the calling thread ("" if none).
 * The pointer stays valid for the life of the thread (it points into a
 * per-thread buffer, so it never dangles), but the text is replaced by the
 * next failing call on this thread: copy it (fc_last_error_copy) before
 * making another fc_* call. Evaluating it in the same expression as a
 * failing call, as in printf("%d %s", fc_x(), fc_last_error()), may read
 * the message from before fc_x, since C leaves the order open. */
const char *fc_last_error(void);
/* Status code of the most recent failure on this thread (FC_OK if none). */
int fc_last_error_code(void);
/* Copies the message of the most recent failure on this thread into buf
 * (at most len bytes, always NUL-terminated when len > 0) and returns its
 * full length, as snprintf does. buf may be NULL when len is 0. */
size_t fc_last_error_copy(char *buf, size_t len);
/* Resets this thread's last error to FC_OK and "". */
void fc_clear_last_error(void);
/* Number of visible CUDA devices; 0 when there is no driver or no device
 * (then fc_last_error() says why). */
int fc_cuda_device_count(void);
/* Leak check: *handles receives the number of live handles of every kind
 * (created and not freed), *contexts the number of contexts alive (a
 * context lives while its handle or any buffer, graph, module, kernel or
 * cache made from it does). Either pointer may be NULL. Returns FC_OK. */
int fc_live_objects(size_t *handles, size_t *contexts);

/* ---- contexts ------------------------------------------------------------
 * A context is a CUDA context of one device plus a non-blocking stream of
 * its own, a capture state and a capture pool. Several contexts on one
 * device are independent.
 *
 * Which to choose:
 *   - fc_cuda_init_device: the device's PRIMARY context, shared with the
 *     CUDA runtime and every library in the process (PyTorch, cuBLAS,
 *     NCCL): their device pointers work with fc_buffer_wrap_ctx and ours
 *     in their kernels. But another library's device-wide synchronisation
 *     (cudaDeviceSynchronize, torch.cuda.synchronize(), cudaFree) while
 *     our stream captures invalidates that capture
 *     (FC_ERR_CAPTURE_INVALIDATED; fc_graph_capture_ctx records again). The
 *     stream captures only during recordings that capture it (see "graph
 *     capture": FC_RECORDING_CAPTURE, or FC_RECORDING_AUTO once
 *     fc_ctx_stream() was asked for) and during foreign sections; a
 *     recording that builds its graph (the default) is not exposed outside
 *     its foreign sections.
 *   - fc_cuda_init_device_isolated: an ISOLATED context: a GREEN context
 *     over all the device's SMs where the driver has them (CUDA 12.4+;
 *     cuGreenCtxCreate), else a PRIVATE context (cuCtxCreate). Other
 *     libraries' synchronisations and captures neither see nor break its
 *     captures (a synchronisation of the primary context still waits for a
 *     green context's work). Its buffer, module and kernel handles belong
 *     to it alone (mixing them with another context's gives
 *     FC_ERR_WRONG_CONTEXT); fc_buffer_wrap_ctx refuses another context's
 *     memory, except that a green context's memory is the device's primary
 *     context's (the driver shares it, and reports the primary context as
 *     its owner), so memory wraps between the two; and every call pushes and pops the context on
 *     the calling thread (it is never left current, so other libraries on
 *     the thread are not affected; a green context is made current on one
 *     thread at a time, the library's calls on other threads wait). A
 *     green context runs beside the primary context at full speed. A
 *     private one costs one more context on the device (about 530 MiB on
 *     an H200), and when it and another context both have work in flight
 *     the GPU time-slices them (a primary + a private context replayed at
 *     0.09x of two streams of one context on an H200).
 *     The environment variable FC_ISOLATION, read once per process, picks:
 *     "auto" (or unset: green where possible; when creating the green
 *     context fails, e.g. under MPS, private), "green" (green or NULL with
 *     the reason) or "private" (always cuCtxCreate). fc_ctx_isolation
 *     tells which a context got; `fcgraph info` which this driver gives.
 *   Use isolated contexts when the engine shares the GPU with other CUDA
 *   users in the same process, does not exchange memory with them, and
 *   their GPU work is light; when both keep the GPU busy, share the primary
 *   context and keep device-wide synchronisations out of capture windows.
 *   Known driver bug (seen with driver 580.159.04 on H200): when one thread
 *   synchronises a whole context (cuCtxSynchronize, cudaDeviceSynchronize,
 *   torch.cuda.synchronize()) while another thread's stream of the SAME
 *   context is capturing, the driver can crash the process (SIGSEGV inside
 *   cuCtxSynchronize); ctest/coexist/driver_race.c reproduces it without
 *   fc-graph. No library can prevent that on a shared primary context; an
 *   isolated context is not affected (docs/coexistence.md has the counts),
 *   and a recording that builds exposes the stream only during its foreign
 *   sections.
 *
 * Both return NULL with the reason when the device does not exist or
 * there is no driver. A primary context is left current on threads that
 * have no current context (as the CUDA runtime does). */
fc_cuda_ctx *fc_cuda_init_device(int device);
fc_cuda_ctx *fc_cuda_init_device_isolated(int device);
/* An isolated context of the kind asked for, whatever FC_ISOLATION says:
 * isolation is FC_ISOLATION_GREEN (a green context, or NULL with the
 * reason where the driver or device has none) or FC_ISOLATION_PRIVATE (a
 * private context, cuCtxCreate); any other value gives NULL and
 * FC_ERR_INVALID_ARGUMENT. Otherwise as fc_cuda_init_device_isolated: any
 * thread; the caller owns the handle (fc_cuda_ctx_free). Pick PRIVATE
 * when the context must not share memory or lifetime with the device's
 * primary context: a green context's memory is the primary context's
 * (fc_buffer_wrap_ctx accepts it both ways), and a green context keeps
 * the primary context alive until it is freed. */
fc_cuda_ctx *fc_cuda_init_device_isolated_as(int device, int isolation);
/* Frees the handle. A capture still open on it is aborted (free it on the
 * capturing thread: see "Threads" under graph capture). Work queued on
 * its stream still runs; buffers, graphs, modules and kernels made from it
 * stay usable (they keep the CUDA context alive) but are best freed
 * first. */
void fc_cuda_ctx_free(fc_cuda_ctx *ctx);
/* Device ordinal of the context, or -1 (and an error) for a bad handle. */
int fc_cuda_ctx_device_id(const fc_cuda_ctx *ctx);
/* 1 for an isolated context (green or private), 0 for a primary one, -1
 * (and an error) for a bad handle. */
int fc_ctx_is_isolated(const fc_cuda_ctx *ctx);
/* What the context is isolated by: FC_ISOLATION_NONE (a primary context),
 * FC_ISOLATION_GREEN or FC_ISOLATION_PRIVATE; -1 (and an error) for a bad
 * handle. A value fixed when the context was made: callable from any
 * thread, at any time, also while the context captures. */
int fc_ctx_isolation(const fc_cuda_ctx *ctx);
/* Waits for the work queued on this context's stream only (never the whole
 * device). Refused with FC_ERR_CAPTURE_STATE while the context captures. */
int fc_sync_ctx(fc_cuda_ctx *ctx);
/* Bytes of device memory held by the context's capture pool. */
size_t fc_ctx_pool_bytes(const fc_cuda_ctx *ctx);
/* Free and total memory of the context's device, in bytes (cuMemGetInfo).
 * Either pointer may be NULL. */
int fc_ctx_mem_info(const fc_cuda_ctx *ctx, size_t *free_bytes, size_t *total_bytes);

/* ---- interop --------------------------------------------------------------
 * The context's CUstream and CUcontext, as void *, for the caller's own
 * work (cuBLAS, NCCL, cudaMemcpyAsync, its own kernels). Valid until the
 * context handle is freed; NULL (and an error) for a bad handle. Work the
 * caller queues on the stream is ordered with ours. During a recording of
 * the context it is RECORDED into the graph (and replayed with it), not
 * run, whenever the stream captures: in a recording that captures (which,
 * in the default FC_RECORDING_AUTO mode, is every recording begun after
 * this call) and inside a foreign section. In a recording that builds
 * (FC_RECORDING_BUILD) it RUNS at once outside foreign sections.
 * Asking for the stream marks the context for good: in FC_RECORDING_AUTO
 * mode its recordings capture the stream from then on, so callers that
 * cache the stream and queue their own work on it between begin and end
 * keep working unchanged; and updates of captured segments count nodes
 * (see fc_graph_end_update_ctx). An engine that puts its own work into
 * recordings explicitly, with foreign sections, sets FC_RECORDING_BUILD
 * and keeps building (see "recording modes and foreign sections").
 * The capture-mode shield covers only fc-graph's own calls: the caller's
 * potentially unsafe calls on a capturing thread (cudaMalloc, cudaMemcpy
 * without Async, synchronisations) follow the capture mode's rules.
 *
 * cuBLAS and NCCL use the CUDA context current on the calling thread:
 * create the (primary) fc context on that thread first (it is then left
 * current), then the cuBLAS handle; cublasSetStream(h, fc_ctx_stream(ctx)),
 * then cublasSetWorkspace (setting the stream resets it) with memory from
 * fc_buffer_alloc_ctx; run the work once eagerly before capturing it.
 * Examples: examples/interop/ (a cuBLAS GEMM between fc kernels in one
 * graph) and ctest/test_nccl.c (ncclAllReduce in one graph per device,
 * replayed from one thread per device). */
void *fc_ctx_stream(const fc_cuda_ctx *ctx);
void *fc_ctx_cu_context(const fc_cuda_ctx *ctx);

/* ---- buffers -------------------------------------------------------------
 * fc_buffer_alloc_ctx: `bytes` (> 0) of uninitialised device memory. While
 * the context captures, it comes from the context's capture pool: its
 * address stays valid for every replay, and freeing it returns it to the
 * pool for later captures of the same context (graphs of one context
 * replay in order on its stream, so a capture's dead intermediates may
 * share memory with another's). Sizes that overflow are refused with
 * FC_ERR_INVALID_ARGUMENT, sizes the device cannot hold with
 * FC_ERR_OUT_OF_MEMORY. */
fc_buffer *fc_buffer_alloc_ctx(fc_cuda_ctx *ctx, size_t bytes);
/* A buffer over `bytes` of device memory at `device_ptr` that the CALLER
 * owns (cudaMalloc, PyTorch, NCCL buffers...), so our kernels, copies and
 * user kernels can use it. The range must lie inside one allocation of the
 * context's CUDA context (checked). fc_buffer_free frees only the handle,
 * never the memory; the caller keeps the memory allocated as long as the
 * buffer, or any graph that recorded work on it, is used. */
fc_buffer *fc_buffer_wrap_ctx(fc_cuda_ctx *ctx, uint64_t device_ptr, size_t bytes);
/* Frees the buffer (memory of fc_buffer_alloc_ctx goes back to the driver
 * or the capture pool). Work already queued that uses it must be finished
 * or the memory's reuse is the caller's race: synchronise first. */
void fc_buffer_free(fc_buffer *buf);
/* Size in bytes (0 and an error for a bad handle). */
size_t fc_buffer_size(const fc_buffer *buf);
/* Device address, for passing to user kernels (0 for a bad handle). */
uint64_t fc_buffer_device_ptr(const fc_buffer *buf);
/* Blocking copies of `bytes` bytes to / from the start of the buffer,
 * ordered after the work queued on the buffer's context stream. src / dst
 * may be NULL only when bytes is 0. FC_ERR_BUFFER_TOO_SMALL when `bytes`
 * exceeds the buffer; refused with FC_ERR_CAPTURE_STATE while the buffer's
 * context captures. */
int fc_buffer_upload(fc_buffer *buf, const void *src, size_t bytes);
int fc_buffer_download(const fc_buffer *buf, void *dst, size_t bytes);
/* Queues a byte fill of [offset, offset + len) on ctx's stream (recorded
 * while ctx captures), e.g. to zero a new buffer or a padded tail. */
int fc_buffer_fill_ctx(fc_cuda_ctx *ctx, fc_buffer *buf, size_t offset, size_t len, uint8_t value);

/* ---- built-in element-wise kernels --------------------------------------
 * out[i] = a[i] op b[i] for i < n floats, queued on the context's stream.
 * Each buffer must hold n floats and be usable by the context; else an
 * error code is returned and nothing is launched. n == 0 does nothing.
 * Aliasing: out may be the same buffer as a and/or b (each element is read
 * before it is written by the same thread); partially overlapping views
 * of one allocation are not supported. */
int fc_add_ctx(fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n);
int fc_mul_ctx(fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n);

/* ---- user kernels ------------------------------------------------------- */
/* JIT-compiles NUL-terminated PTX into the context. Garbage PTX is refused
 * with FC_ERR_INVALID_ARGUMENT (unparsable) or FC_ERR_CUDA with the JIT
 * log in the message. */
fc_module *fc_module_load_ptx(fc_cuda_ctx *ctx, const char *ptx);
void fc_module_free(fc_module *module);
/* A kernel by its .entry name; it stays valid after fc_module_free. */
fc_kernel *fc_module_get_kernel(const fc_module *module, const char *name);
void fc_kernel_free(fc_kernel *kernel);
/* Number of parameters the kernel's PTX declares, or -1 for a bad handle. */
int fc_kernel_param_count(const fc_kernel *kernel);
/* Launches on ctx's stream (recorded while ctx captures). `args` holds
 * `nargs` pointers, one per kernel parameter, each to a value of that
 * parameter's size, as for cuLaunchKernel; nargs must equal the parameter
 * count and no entry may be NULL. The kernel must belong to ctx's CUDA
 * context. Zero grid or block dimensions, and dimensions, threads per block
 * or dynamic shared memory past the device's or the kernel's limits, are
 * refused with FC_ERR_INVALID_ARGUMENT before they reach the driver (whose
 * refusal would also invalidate an open capture). Asynchronous: the
 * argument values are copied before the call returns. */
int fc_kernel_launch_ctx(fc_cuda_ctx *ctx, const fc_kernel *kernel,
                         unsigned grid_x, unsigned grid_y, unsigned grid_z,
                         unsigned block_x, unsigned block_y, unsigned block_z,
                         unsigned shared_mem_bytes, void **args, size_t nargs);

/* ---- programmatic dependent launch (PDL) ----------------------------------
 * On Hopper and newer GPUs (compute capability 9.0+) with a CUDA 12.3+
 * driver, a kernel launched with PDL may start while the kernel before it
 * on the stream finishes, and captures keep these programmatic edges: a
 * replayed chain of small kernels runs about 1.25x faster. The built-in
 * kernels use it automatically (they wait for their predecessor before
 * touching memory, so it is always safe for them). A user kernel must opt
 * in, because only its author knows that it executes
 * `griddepcontrol.wait` before touching memory the previous kernel reads
 * or writes (a kernel that does not would race). Turn PDL off per context
 * with fc_ctx_set_pdl(ctx, 0), or for the process with FC_PDL=0 in the
 * environment (read once). */
/* Launch flags of fc_kernel_launch_ex_ctx: 0 uses the kernel's setting. */
#define FC_LAUNCH_PDL 1u   /* this launch with PDL (where allowed)  */
#define FC_LAUNCH_PLAIN 2u /* this launch without PDL               */
/* Turns PDL on (default) or off for every launch on ctx: built-ins and
 * opted-in user kernels. Launches already queued or captured keep theirs. */
int fc_ctx_set_pdl(fc_cuda_ctx *ctx, int enabled);
/* 1 when built-in kernels launched on ctx use PDL, 0 when not, -1 for a
 * bad handle. */
int fc_ctx_pdl_enabled(const fc_cuda_ctx *ctx);
/* 1 when the device and driver support PDL, 0 when not, -1 on error. */
int fc_device_supports_pdl(int device);
/* Opts this kernel handle in to PDL (enabled != 0) or out (the default):
 * its fc_kernel_launch_ctx launches then use PDL where allowed. */
int fc_kernel_set_pdl(fc_kernel *kernel, int enabled);
/* fc_kernel_launch_ctx with per-launch flags (0, FC_LAUNCH_PDL or
 * FC_LAUNCH_PLAIN; anything else is FC_ERR_INVALID_ARGUMENT). */
int fc_kernel_launch_ex_ctx(fc_cuda_ctx *ctx, const fc_kernel *kernel,
                            unsigned grid_x, unsigned grid_y, unsigned grid_z,
                            unsigned block_x, unsigned block_y, unsigned block_z,
                            unsigned shared_mem_bytes, void **args, size_t nargs, unsigned flags);

/* ---- graph capture ------------------------------------------------------
 * begin opens a recording (a "capture": this header uses both words for the
 * time between begin and end, however the work is taken) on the context,
 * in THREAD_LOCAL mode unless a mode is given; a second begin on a
 * recording context is refused with FC_ERR_CAPTURE_STATE, as is a begin
 * inside a break function. While it is open, the library's work queued on
 * the context (fc_add_ctx, fc_mul_ctx, fc_kernel_launch_ctx,
 * fc_buffer_fill_ctx, from any thread) is recorded, not run; fc_sync_ctx,
 * uploads and downloads are refused. How the recording takes the work is
 * fixed when it begins, by the context's recording mode (see "recording
 * modes and foreign sections" below):
 *   - it BUILDS (the default): each call adds a node to the graph directly
 *     and the context's stream does not enter capture mode. Work the caller
 *     queues on fc_ctx_stream() meanwhile runs at once, outside the graph;
 *     it enters the graph only inside a foreign section
 *     (fc_graph_foreign_begin_ctx ... fc_graph_foreign_end_ctx), which
 *     captures the stream and becomes one node of the graph. A device-wide
 *     synchronisation elsewhere cannot invalidate a recording that builds,
 *     except during a foreign section.
 *   - it CAPTURES the stream (cuStreamBeginCapture in the mode given, from
 *     begin to end): everything queued on the stream, ours and the
 *     caller's own, is recorded in order. Recordings do this in
 *     FC_RECORDING_CAPTURE mode, and in FC_RECORDING_AUTO mode (the
 *     default) on a context whose fc_ctx_stream() was asked for, so callers
 *     that cache the stream and queue their own work on it keep the
 *     behaviour they had before recordings were built.
 * fc_graph_builds_ctx tells which. The mode (FC_CAPTURE_MODE_*) is the
 * driver's capture mode of the whole recording when it captures; when it
 * builds, each foreign section names its own. Either way it decides which
 * threads may end the recording (below).
 * end ends the recording and instantiates it, or returns NULL with the
 * reason (naming the first failing call inside the recording, its thread
 * and the CUDA error); either way the stream leaves capture. A recording
 * that recorded nothing gives a valid graph whose launch does nothing.
 * Threads: a RELAXED recording may be split (fc_graph_break_ctx), ended and
 * aborted on any thread; a THREAD_LOCAL or GLOBAL one only on the thread
 * that began it (the driver's rule for captures, kept for recordings that
 * build): elsewhere those calls are refused with FC_ERR_CAPTURE_STATE and
 * the recording stays open, intact. Work may be queued into an open
 * recording from any thread. None of begin, end, end_update and abort may
 * be called from inside one of the recording's break functions
 * (FC_ERR_CAPTURE_STATE). */
int fc_graph_begin_ctx(fc_cuda_ctx *ctx);
int fc_graph_begin_ctx_mode(fc_cuda_ctx *ctx, int mode);
/* Like fc_graph_begin_ctx_mode; `capture_live` is the live pointer break
 * functions receive while the capture runs them once. */
int fc_graph_begin_live_ctx(fc_cuda_ctx *ctx, int mode, void *capture_live);
fc_graph *fc_graph_end_ctx(fc_cuda_ctx *ctx);
/* Ends the open capture into `graph`, an earlier graph of the same context,
 * instead of creating a new one: each segment is updated in place where it
 * can be (several times cheaper than instantiating), the others are
 * instantiated anew, and the breaks become the new capture's.
 * `updated_in_place` (may be NULL) receives how many segments were updated
 * in place (fc_graph_end_update_ex_ctx tells more). How:
 *   - a segment that was built and is built again from the same kernels
 *     (each launched with the same PDL setting), fills, foreign sections
 *     whose captured graphs have the same shape (node types in the same
 *     order, the same edges) and conditional nodes whose bodies do too, in
 *     the same order, is updated node by node: one driver call
 *     (cuGraphExecKernelNodeSetParams, cuGraphExecMemsetNodeSetParams) per
 *     node whose parameters changed and one per foreign section
 *     (cuGraphExecChildGraphNodeSetParams, always made: its work is not
 *     compared), no call at all when nothing changed and no foreign section
 *     was recorded;
 *   - any other built segment (other kernels, another order, a foreign
 *     section of another shape) is updated with cuGraphExecUpdate from a
 *     graph built from the new recording, or instantiated anew when the
 *     driver refuses;
 *   - a captured segment is updated with cuGraphExecUpdate where its
 *     topology matches. Whether it matches is known for free when only
 *     fc-graph's kernel launches recorded it; once fc_ctx_stream() was asked
 *     for (the caller's own work may be in the graph) or a segment holds a
 *     fill, each update counts the new graph's nodes first (cuGraphGetNodes,
 *     about 23 ns per node on an H200), so a changed topology never reaches
 *     the driver as a refused update.
 * Refused with
 * FC_ERR_CAPTURE_STATE while `graph` is launched on another thread. The
 * stream leaves capture either way, also when `graph` is NULL or not a
 * live graph (the capture is then dropped and the graph's error returned,
 * also when no capture was open), except on a thread that may not end the
 * capture (see "Threads" above). */
int fc_graph_end_update_ctx(fc_cuda_ctx *ctx, fc_graph *graph, int *updated_in_place);
/* fc_graph_end_update_ctx, telling more of what the update did. Each
 * pointer may be NULL; they are written only on success (a failing call
 * leaves them as they were): *updated_in_place the segments updated in
 * place (as fc_graph_end_update_ctx), *instantiated the segments
 * instantiated anew, *node_calls the driver calls made by segments updated
 * node by node (one per node whose parameters changed; 0 when the
 * re-recording changed nothing, however many nodes the graph has; segments
 * updated with cuGraphExecUpdate add nothing). Values above INT_MAX are
 * written as INT_MAX. Two pointers may point to the same int: it then holds
 * the last value written (the order is updated_in_place, instantiated,
 * node_calls). The same rules, threads and errors as
 * fc_graph_end_update_ctx; the caller keeps owning `graph`, which is
 * updated, not replaced. */
int fc_graph_end_update_ex_ctx(fc_cuda_ctx *ctx, fc_graph *graph, int *updated_in_place, int *instantiated,
                               int *node_calls);
/* Drops an open capture, and its open foreign section with what that
 * recorded (FC_ERR_CAPTURE_STATE when none is open). */
int fc_graph_abort_ctx(fc_cuda_ctx *ctx);
/* 1 while a capture is open on ctx and none of its breaks is running;
 * 0 otherwise (also, with an error, for a bad handle). */
int fc_graph_is_capturing_ctx(const fc_cuda_ctx *ctx);

/* A break function: runs eagerly between captured segments. `live` is the
 * pointer given to fc_graph_launch_live (or fc_graph_begin_live_ctx while
 * capturing); `user` is the pointer given to fc_graph_break_ctx, frozen at
 * capture. Return 0 on success. It may queue work on ctx (fc_add_ctx,
 * fc_kernel_launch_ctx...) and must be callable from whichever thread
 * replays the graph. */
typedef int (*fc_break_fn)(fc_cuda_ctx *ctx, void *live, void *user);

/* A break. While ctx captures: ends the current segment, runs fn once now,
 * records it and opens the next segment (N breaks give 2N+1 pieces).
 * Outside a capture, or inside another break function of ctx on the
 * calling thread, it just calls fn(ctx, live, user), `live` being that of
 * the break function running on this thread (NULL if none). If fn fails,
 * FC_ERR_CALLBACK is returned and the capture is spoiled: fc_graph_end_ctx
 * then returns NULL (work queued meanwhile is recorded, never run). */
int fc_graph_break_ctx(fc_cuda_ctx *ctx, fc_break_fn fn, void *user);

/* A recording for fc_graph_capture_ctx: queues the work to capture on ctx
 * (and may call fc_graph_break_ctx). Return 0 on success. It may run
 * several times, so it must not have side effects beyond queuing work
 * (recorded work is not executed). */
typedef int (*fc_record_fn)(fc_cuda_ctx *ctx, void *user);

/* Capture with bounded automatic re-recording: opens a capture in `mode`,
 * calls record(ctx, user), ends and instantiates it; when the capture is
 * invalidated (FC_ERR_CAPTURE_INVALIDATED: another thread synchronised the
 * whole device or freed memory in the same CUDA context, or an unsafe call
 * was made during a GLOBAL capture) it backs off briefly (20 us, doubling, at most 2 ms) and
 * records again, up to `max_tries` (>= 1) recordings in all. On success
 * *graph_out receives the graph (fc_graph_capture_tries tells how many
 * recordings it took). Any other failure ends it at once; after max_tries
 * invalidated recordings FC_ERR_CAPTURE_INVALIDATED is returned. */
int fc_graph_capture_ctx(fc_cuda_ctx *ctx, int mode, fc_record_fn record, void *user, int max_tries,
                         fc_graph **graph_out);
/* Recordings the graph's capture took: 1 for fc_graph_end_ctx graphs and
 * first-try captures; -1 for a bad handle. */
int fc_graph_capture_tries(const fc_graph *graph);

/* Replays the graph on its context's stream: segments are launched
 * asynchronously, break functions run on the calling thread with `live`.
 * fc_graph_launch(g) is fc_graph_launch_live(g, NULL). Returns once the
 * work is queued; use fc_sync_ctx to wait for it. If a break function
 * fails (FC_ERR_CALLBACK), the replay stops there: later pieces are not
 * launched; work already queued still runs. While a break function runs,
 * fc_graph_begin_ctx on its context is refused on the thread running it
 * (other threads are not affected, and nothing is left behind when it
 * returns). A graph may be launched from several threads at once; launches
 * are queued in the order they are made. A launch that finds, after one of
 * its break functions, that another thread began a capture on the context
 * stops there with FC_ERR_CAPTURE_STATE rather than launching the rest
 * into that capture.
 * Refused with FC_ERR_CAPTURE_STATE while its context captures. */
int fc_graph_launch(fc_graph *graph);
int fc_graph_launch_live(fc_graph *graph, void *live);
/* Pieces in the graph (captured segments plus breaks), or -1 for a bad
 * handle. */
int fc_graph_segment_count(const fc_graph *graph);
/* May be called while a launch is still running on the device (the driver
 * finishes it first). */
void fc_graph_free(fc_graph *graph);

/* ---- recording modes and foreign sections ----------------------------------
 * A context's recording mode decides how its recordings take its work (see
 * "graph capture"):
 *   FC_RECORDING_AUTO     (the default) build, unless fc_ctx_stream() was
 *                         ever called on this context handle: then every
 *                         recording captures the stream for its whole
 *                         length, so that work queued on a cached stream is
 *                         still recorded.
 *   FC_RECORDING_BUILD    always build. The caller's own work enters a
 *                         recording only through foreign sections; queued
 *                         on the stream outside one during a recording, it
 *                         runs at once. This is the way to have both: hand
 *                         the stream out (fc_ctx_stream) and build.
 *   FC_RECORDING_CAPTURE  always capture the stream for the whole recording.
 * The environment variable FC_RECORDING ("auto", "build" or "capture", any
 * case; read once per process) sets the mode of every new context; any
 * other value makes every context creation fail with
 * FC_ERR_INVALID_ARGUMENT naming it, so a typo is never ignored. */
#define FC_RECORDING_AUTO 0
#define FC_RECORDING_BUILD 1
#define FC_RECORDING_CAPTURE 2
/* Sets ctx's recording mode to `mode`, an FC_RECORDING_* value (any other
 * is refused with FC_ERR_INVALID_ARGUMENT, changing nothing). Recordings
 * begun from now on take it; a recording already open keeps its way until
 * it ends. The mode belongs to this context handle (other handles of the
 * same device keep theirs). Any thread, at any time, also while ctx
 * records and from inside break, record and foreign functions. */
int fc_ctx_set_recording_mode(fc_cuda_ctx *ctx, int mode);
/* ctx's recording mode as set (FC_RECORDING_*; AUTO stays AUTO, see
 * fc_graph_builds_ctx for what it resolves to); -1 (and an error) for a bad
 * handle. Any thread, at any time. */
int fc_ctx_recording_mode(const fc_cuda_ctx *ctx);
/* Whether ctx's recordings build: 1 when the recording open on ctx builds
 * its graph node by node, 0 when it captures the stream. With no recording
 * open (and from inside one of the open recording's break functions, where
 * the recording is out of reach), the answer is for a recording begun now:
 * from the mode and whether fc_ctx_stream() was asked for. -1 (and an
 * error) for a bad handle. Any thread; a snapshot that another thread's
 * begin, end or fc_ctx_set_recording_mode may change at once. */
int fc_graph_builds_ctx(const fc_cuda_ctx *ctx);

/* A foreign section puts the caller's own work (cuBLAS, NCCL, its own
 * kernels, driver calls such as cuMemsetD32Async) into a recording that
 * builds. fc_graph_foreign_begin_ctx(ctx, mode, &stream) puts ctx's stream
 * into capture (cuStreamBeginCapture in `mode`, an FC_CAPTURE_MODE_* value;
 * another is FC_ERR_INVALID_ARGUMENT) and writes the stream, a CUstream (the
 * one fc_ctx_stream returns), to *stream_out; stream_out may be NULL, and is
 * written only on success. Until fc_graph_foreign_end_ctx(ctx), everything
 * queued on that stream is recorded, not run: the caller's work and the
 * library's own on ctx (fc_add_ctx ...), from any thread, in the order
 * queued. The end makes what the section recorded ONE child-graph node of
 * the recording, after the work recorded before the section and before the
 * work recorded after it (a section that recorded nothing adds nothing).
 * Getting the stream here does not mark the context as fc_ctx_stream()
 * does: in FC_RECORDING_AUTO mode later recordings still build. Queue
 * nothing on the stream after the end unless it should run at once.
 *
 * In a recording that captures anyway (FC_RECORDING_CAPTURE, or
 * FC_RECORDING_AUTO after fc_ctx_stream()), begin and end change nothing:
 * begin writes the stream and returns FC_OK (its mode is not used: the
 * recording's applies), end returns FC_OK (also without a begin), and the
 * work is recorded in order with the rest.
 *
 * Sections belong to recordings held by the context (fc_graph_begin_ctx*,
 * and fc_graph_capture_ctx's record function); a graph cache's recordings
 * have none (see "graph cache").
 *
 * Refused with FC_ERR_CAPTURE_STATE, nothing changed and the recording
 * intact:
 *   - begin and end with no recording open on ctx (a graph cache's
 *     recording included), or from inside one of the recording's break
 *     functions;
 *   - begin while a section is open (sections do not nest);
 *   - end without an open section, in a recording that builds;
 *   - fc_graph_break_ctx while a section is open: end the section first;
 *   - end of a THREAD_LOCAL or GLOBAL section on another thread than the
 *     one that began it (the driver's rule; whatever the recording's own
 *     mode). A RELAXED section may be ended on any thread.
 * fc_graph_end_ctx and fc_graph_end_update_ctx with a section open end it
 * first, keeping its work; fc_graph_abort_ctx drops it. A section the
 * driver invalidated (on a primary context, another library's device-wide
 * synchronisation, for one) fails its end with FC_ERR_CAPTURE_INVALIDATED
 * and spoils the recording: fc_graph_end_ctx then returns NULL with that
 * error (fc_graph_capture_ctx records again). Inside a section the caller's
 * own calls follow the capture mode's rules, as in any stream capture
 * (nothing synchronous: cudaMemcpy, cudaMalloc, synchronisations); the
 * shield covers only fc-graph's own calls.
 * Threads and ownership: any thread may begin a section (it need not be the
 * thread that began the recording); a THREAD_LOCAL or GLOBAL section is
 * ended by the thread that began it, as above. The stream stays the
 * context's: never destroy it; it is valid until the context handle is
 * freed. */
int fc_graph_foreign_begin_ctx(fc_cuda_ctx *ctx, int mode, void **stream_out);
int fc_graph_foreign_end_ctx(fc_cuda_ctx *ctx);
/* fc_graph_foreign_begin_ctx on a lane: `lane` is a handle of a lane of
 * ctx (fc_ctx_lane; lane 0 is ctx itself), and that lane's stream captures.
 * What it captured becomes one node on that lane, after the lane's earlier
 * work, when fc_graph_foreign_end_ctx(ctx) ends the section. The other
 * lanes go on recording meanwhile, so a library's work on one lane (a cuBLAS
 * GEMM) overlaps the library's own kernels on another; waits from or for
 * the section's lane are refused (FC_ERR_CAPTURE_STATE) until it ends.
 * Overlap pays where the work leaves SMs free: a decode step's GEMM
 * (4096 x 16 x 4096) beside 26 kernels replayed 1.24x faster than on one
 * lane, a 1024^3 GEMM that fills the GPU 0.77x (slower; GPU run 59).
 * *stream_out receives the lane's stream. In a recording that captures the
 * stream, returns the lane's stream and changes nothing (wait the lane for
 * lane 0 first, so that the capture takes its work). Ownership, threads and
 * errors as fc_graph_foreign_begin_ctx; `lane` stays the caller's and may be
 * ctx itself; a lane of another context FC_ERR_INVALID_ARGUMENT. */
int fc_graph_foreign_begin_on_ctx(fc_cuda_ctx *ctx, const fc_cuda_ctx *lane, int mode, void **stream_out);

/* A foreign function: queues work on `stream` (ctx's stream, a CUstream,
 * inside a foreign section) and returns 0 on success. `user` is the pointer
 * given to fc_graph_record_foreign_ctx. */
typedef int (*fc_foreign_fn)(void *stream, void *user);
/* A foreign section around one function: fc_graph_foreign_begin_ctx(ctx,
 * mode), fn(stream, user) on the calling thread, then
 * fc_graph_foreign_end_ctx(ctx) on the same thread, also when fn fails (so
 * any mode works from any thread). fn and user are used during the call
 * only, never kept. Returns FC_OK, or: FC_ERR_INVALID_ARGUMENT for a NULL
 * fn or a bad mode, or one of the begin's errors above (fn is then not
 * called); FC_ERR_CALLBACK ("foreign function
 * returned N") when fn returns N != 0 (the section is still ended and what
 * fn queued stays in the recording, which is not spoiled: abort it with
 * fc_graph_abort_ctx to drop that work); else the end's error. fn may queue
 * work on the stream and call fc_* functions that queue work on ctx (all of
 * it recorded in the section, in order); it must not begin or end the
 * section, break (refused) or end the recording (the section's end then
 * fails with FC_ERR_CAPTURE_STATE). */
int fc_graph_record_foreign_ctx(fc_cuda_ctx *ctx, int mode, fc_foreign_fn fn, void *user);

/* ---- lanes ----------------------------------------------------------------
 * Parallel branches of a context's work. A context has lane 0 (itself) and
 * up to 63 more. fc_ctx_lane returns a NEW handle for lane `lane` of `ctx`
 * (lane 0: another handle of the context itself); work queued through it
 * (fc_add_ctx, fc_mul_ctx, fc_kernel_launch_ctx, fc_buffer_fill_ctx,
 * fc_ctx_stream's stream) goes on that lane. Work on one lane is ordered;
 * work on different lanes is not, except where a lane waits for another:
 * fc_ctx_wait_lane(ctx, other) makes `ctx`'s lane run its next work after
 * `other`'s work queued so far (both handles of one context, in either
 * order; waiting for itself does nothing). A fork is each lane waiting for
 * lane 0, a join lane 0 waiting for each lane.
 *   - Eagerly a lane is an extra non-blocking stream of the context (made
 *     on the lane's first use), and a wait an event recorded on one stream
 *     and waited for on the other.
 *   - In a recording that builds, a wait is graph edges (no driver call):
 *     the lane's next node depends on the other lane's last nodes. A
 *     recording that captures the stream takes the eager events instead
 *     (the driver's cross-stream capture: every lane forked into it must be
 *     joined back to lane 0 before fc_graph_end_ctx, or the end fails).
 *   - A recording begins, breaks and ends on lane 0 (on a lane handle those
 *     are refused with FC_ERR_CAPTURE_STATE, as are end, break and abort on
 *     a second handle of lane 0, fc_ctx_lane(ctx, 0), of a recording begun
 *     through another handle). A break ends the segment, so
 *     every lane has finished when the break runs; lanes start again from
 *     the break. A foreign section captures one lane's stream (lane 0's, or
 *     the one fc_graph_foreign_begin_on_ctx names): the other lanes go on
 *     recording meanwhile; waits from or for its lane are refused with
 *     FC_ERR_CAPTURE_STATE until it ends.
 * Ownership: the lane handle is the caller's, freed with fc_cuda_ctx_free
 * (NULL-tolerant); it keeps the context alive, and the context's lane
 * streams live until the context itself is torn down. fc_sync_ctx on a lane
 * handle waits for that lane only.
 * Threads: any thread, as for other context calls; lanes exist to be fed
 * from one thread, but each call is safe from any.
 * Errors: bad handles FC_ERR_INVALID_HANDLE; a negative lane or one past
 * the last FC_ERR_INVALID_ARGUMENT; handles of two different contexts
 * FC_ERR_INVALID_ARGUMENT. fc_ctx_lane returns NULL on error,
 * fc_ctx_lane_index -1. */
fc_cuda_ctx *fc_ctx_lane(fc_cuda_ctx *ctx, int lane);
int fc_ctx_lane_index(const fc_cuda_ctx *ctx);
int fc_ctx_wait_lane(fc_cuda_ctx *ctx, const fc_cuda_ctx *other);

/* ---- conditional nodes -----------------------------------------------------
 * Branches and loops decided on the GPU inside a recording (CUDA 12.3+
 * drivers; SWITCH 12.8+). Between fc_graph_cond_begin_ctx and
 * fc_graph_cond_end_ctx, the work queued on the context (fc_add_ctx,
 * fc_mul_ctx, fc_kernel_launch_ctx, fc_buffer_fill_ctx, foreign sections,
 * lane waits, nested conditionals, from any thread) goes into the node's
 * body instead of the recording. The condition is the uint32_t at the start
 * of `cond`, read on the device by a built-in setter kernel that runs just
 * before the node, after everything the recording did before on its lane;
 * so a kernel of the recording may compute it and the host never reads it.
 *   FC_COND_WHILE    the body runs while *cond != 0, tested before every
 *                    iteration (the first too); the body must change it.
 *   FC_COND_REPEAT   the body runs *cond times (read once per replay; the
 *                    graph counts with 4 bytes of its own).
 *   FC_COND_IF       the body runs if *cond != 0.
 *   FC_COND_IF_ELSE  body 0 if *cond != 0, else body 1 (begin it with
 *                    fc_graph_cond_next_ctx); CUDA 12.8+ drivers.
 *   FC_COND_SWITCH   body *cond of `cases` (1..65536); none when
 *                    *cond >= cases; fc_graph_cond_next_ctx moves to the
 *                    next case; cases never recorded are empty.
 * `cases` is read for FC_COND_SWITCH only. The node goes on the lane of the
 * handle that began it. Bodies take kernels, fills, foreign sections whose
 * captured nodes are kernels, copies, memsets or child graphs (others are
 * refused when the section ends: FC_ERR_INVALID_ARGUMENT, the section's work
 * dropped), lanes and nested conditionals (32 deep). A break inside a body
 * is refused (FC_ERR_CAPTURE_STATE); ending the recording with a body open
 * fails the end (FC_ERR_CAPTURE_STATE).
 * Updates: re-recording into a graph with fc_graph_end_update_ctx a
 * conditional of the same kind whose bodies have the same shape (as many
 * launches, each of the same kernel) updates it in place: one driver call
 * per changed launch inside or outside its bodies, one per setter whose
 * `cond` buffer changed (two for a WHILE), none when nothing changed.
 * Other changes re-instantiate that segment.
 * The setter kernels load into the context the first time (the driver
 * resolves cudaGraphSetConditional itself; where it does not, they are
 * linked at run time with the CUDA device runtime, libcudadevrt.a, found
 * through FC_CUDADEVRT, CUDA_HOME, CUDA_PATH, /usr/local/cuda or NVIDIA's
 * Python wheels; else FC_ERR_UNSUPPORTED). FC_CONDITIONAL_SETTERS=link
 * skips the plain load and links them.
 * Ownership: `cond` stays the caller's; it must stay allocated while any
 * graph recorded with it is launched (the graph reads its address).
 * Threads: any thread; one body is open at a time per nesting level, shared
 * by every thread feeding the context, like the recording itself.
 * Aliases: `cond` may be any buffer of the context, also one the body
 * writes (that is how a WHILE ends).
 * Errors (nothing is recorded, the recording stays usable):
 * FC_ERR_INVALID_HANDLE for bad handles; FC_ERR_INVALID_ARGUMENT for an
 * unknown kind, a SWITCH of 0 or more than 65536 cases, a misaligned buffer;
 * FC_ERR_BUFFER_TOO_SMALL for a buffer under 4 bytes; FC_ERR_WRONG_CONTEXT /
 * FC_ERR_WRONG_DEVICE for a buffer of another context; FC_ERR_CAPTURE_STATE
 * without an open recording that builds (see FC_RECORDING_*), during a
 * foreign section, or (next, end, abort) with no conditional open, or
 * (next) past the last body; FC_ERR_UNSUPPORTED on drivers without the
 * node type (IF_ELSE and SWITCH: before 12.8). fc_graph_cond_abort_ctx drops the innermost open conditional
 * with its bodies. */
#define FC_COND_WHILE 0
#define FC_COND_REPEAT 1
#define FC_COND_IF 2
#define FC_COND_IF_ELSE 3
#define FC_COND_SWITCH 4
int fc_graph_cond_begin_ctx(fc_cuda_ctx *ctx, int kind, const fc_buffer *cond, unsigned cases);
int fc_graph_cond_next_ctx(fc_cuda_ctx *ctx);
int fc_graph_cond_end_ctx(fc_cuda_ctx *ctx);
int fc_graph_cond_abort_ctx(fc_cuda_ctx *ctx);
/* What the loaded driver offers: FC_COND_SUPPORT_IF_WHILE (IF, WHILE,
 * REPEAT; 12.3+) | FC_COND_SUPPORT_SWITCH (12.8+) | FC_COND_SUPPORT_IF_ELSE
 * (12.8+), 0 for none; -1 with FC_ERR_NO_DRIVER when no driver loads. Any
 * thread. */
#define FC_COND_SUPPORT_IF_WHILE 1
#define FC_COND_SUPPORT_SWITCH 2
#define FC_COND_SUPPORT_IF_ELSE 4
int fc_cond_support(void);

/* ---- graph diagnostics ----------------------------------------------------
 * Node counts come from the graphs the segments were instantiated from
 * (cuGraphGetNodes), so they are exact after instantiation and updates. */
/* Nodes in the graph, summed over its segments (breaks have none); 0 and
 * an error for a bad handle. */
size_t fc_graph_node_count(const fc_graph *graph);
/* Nodes in piece `index` (0 <= index < fc_graph_segment_count(graph)): the
 * segment's node count, 0 for a break or a segment that recorded no work;
 * 0 and an error for a bad handle or an index out of range. */
size_t fc_graph_segment_node_count(const fc_graph *graph, size_t index);
/* Writes the graph as Graphviz DOT to `path` (created or replaced) with
 * cuGraphDebugDotPrint (verbose: kernel names, parameters, memset and copy
 * nodes). The file holds one `digraph` per non-empty segment, in replay
 * order, each preceded by a `//` comment naming its piece; breaks and empty
 * segments appear as comments only (`dot -Tsvg file` renders every digraph).
 * A segment updated in place (fc_graph_end_update_ctx) shows its topology
 * with the parameters of its last instantiation.
 * Per-segment files `.fc-piece<i>-<pid>-<n>.tmp` are written next to it and
 * removed. FC_ERR_UNSUPPORTED on drivers before CUDA 11.3,
 * FC_ERR_INVALID_ARGUMENT when `path` is NULL or cannot be written. */
int fc_graph_debug_dot(const fc_graph *graph, const char *path);

/* ---- token buckets --------------------------------------------------------
 * Bucket sizes (token counts) that graphs are captured for: a batch of n
 * tokens is padded up to fc_buckets_for(b, n) and run through that
 * bucket's graph, e.g. with a graph cache keyed on the bucket. A bucket
 * list is immutable: any thread may read it; free it once.
 *
 * fc_buckets_ladder(max_tokens): 1, 2, 4, 8, 16, then steps of 16 up to
 * 256, then from a bucket b >= 256 steps of b/8 rounded down to a multiple
 * of 16 (at least 16, at most 512), keeping every rung below max_tokens
 * and ending with max_tokens exactly (2048 gives 1, 2, 4, 8, 16, 32, ...,
 * 256, 288, 320, 352, 384, 432, 480, 528, 592, 656, 736, 816, 912, 1024,
 * 1152, 1296, 1456, 1632, 1824, 2048). NULL with FC_ERR_INVALID_ARGUMENT
 * when max_tokens is 0 or above 16777216 (2^24; such a ladder would hold
 * more than 33 thousand buckets: use an explicit list).
 * fc_buckets_from_list(sizes, count, max_tokens): the `count` sizes given,
 * zeros dropped, each clamped to max_tokens, max_tokens added, sorted,
 * duplicates removed ({256, 1024, 4096} with 2048 gives 256, 1024, 2048).
 * `sizes` may be NULL only when count is 0; NULL with
 * FC_ERR_INVALID_ARGUMENT when max_tokens is 0. */
fc_buckets *fc_buckets_ladder(size_t max_tokens);
fc_buckets *fc_buckets_from_list(const size_t *sizes, size_t count, size_t max_tokens);
void fc_buckets_free(fc_buckets *buckets);
/* Number of buckets (>= 1); 0 and an error for a bad handle. */
size_t fc_buckets_count(const fc_buckets *buckets);
/* Bucket i (0 <= i < count), increasing with i; 0 and an error
 * (FC_ERR_INVALID_ARGUMENT) when i is out of range. */
size_t fc_buckets_get(const fc_buckets *buckets, size_t i);
/* The smallest bucket >= n; 0 and an error (FC_ERR_INVALID_ARGUMENT) when
 * n is 0 or above the largest bucket. */
size_t fc_buckets_for(const fc_buckets *buckets, size_t n);

/* ---- graph cache -----------------------------------------------------------
 * A keyed cache of graphs on one context, for engines that run one graph
 * per batch size (bucket), shape or phase. fc_graph_cache_run(cache, key,
 * record, user, live, &outcome) executes key's work exactly once per call,
 * one of these ways (*outcome):
 *   FC_CACHE_HIT         the key has a ready graph: it is launched with
 *                        `live` (as fc_graph_launch_live); `record` is not
 *                        called.
 *   FC_CACHE_CAPTURED    the key had no graph: record(ctx, user) is
 *                        captured (re-recorded up to max_tries times when
 *                        the capture is invalidated, as
 *                        fc_graph_capture_ctx), instantiated and launched.
 *   FC_CACHE_WARMED_UP   as CAPTURED with cfg.warmup: record runs eagerly
 *                        once first (that run is the call's execution; lazy
 *                        initialisation happens outside the capture), then
 *                        it is captured and instantiated, not launched.
 *   FC_CACHE_REFRESHED   the key was invalidated: record is captured again
 *                        and the key's executable graph updated in place
 *                        (cuGraphExecUpdate; segments whose topology
 *                        changed, or all on a driver without it, are
 *                        instantiated anew), then launched.
 *   FC_CACHE_EAGER_FAILED  capturing failed (an error inside the capture,
 *                        the record function returning non-zero under
 *                        capture, every recording invalidated...): record
 *                        ran eagerly instead, so the work was done. The call
 *                        returns FC_OK and leaves the capture's failure in
 *                        fc_last_error() / fc_last_error_code().
 *   FC_CACHE_EAGER_BACKOFF the key is backing off after failed captures:
 *                        record ran eagerly, no capture was tried.
 * The record function therefore runs both eagerly and under capture, and
 * must queue the same work on ctx either way. Breaks (fc_graph_break_ctx
 * inside record) split the graph as in a held capture: when record runs
 * eagerly their function runs at once with `live`; under a cache capture
 * it is only recorded (not run at capture time, unlike fc_graph_capture_ctx),
 * and runs at every launch with that call's `live`.
 *
 * Failures: after cfg.fail_threshold consecutive failed capture attempts a
 * key runs eagerly for cfg.backoff_ms, then the next call tries to capture
 * again; each further failure doubles the period up to cfg.max_backoff_ms
 * (backoff_ms 0: try again at the next call). A successful capture resets
 * the key. A key never gives up capturing for good;
 * fc_graph_cache_invalidate also ends its backoff.
 *
 * Eviction: least recently used entries (keys the cache knows: with a graph
 * or only failure state) are dropped while there are more than
 * cfg.max_entries or their bytes exceed cfg.max_bytes (0: no limit). The
 * entry of the running call is never evicted by its own call. An entry's
 * bytes are the capture-pool bytes its capture left in use: memory the
 * record function allocated while capturing (fc_buffer_alloc_ctx) and had
 * not freed when it returned, which the graph addresses at every launch;
 * buffers it freed again count 0 (their memory returns to the capture pool).
 * Eviction destroys the graph (a launch in flight finishes first).
 *
 * Threads and ownership: a cache serves the context it was made with (and
 * keeps it alive); record receives that fc_cuda_ctx handle, so free the
 * cache before the context handle. Calls on one cache from any threads
 * serialise (each waits for the one running, also while it captures). A
 * record or break function that calls back into its own cache gets
 * FC_ERR_CAPTURE_STATE, not a deadlock. While a call captures, all work
 * queued on the context is recorded (the library's from any thread, and,
 * when the recording captures the stream, everything queued on the
 * stream): threads sharing the context must not queue work meanwhile
 * (route the context's work through one cache). A cache's recordings
 * follow the context's recording mode, but foreign sections belong to
 * recordings held by the context (fc_graph_begin_ctx*, fc_graph_capture_ctx):
 * inside a cache's record function fc_graph_foreign_begin_ctx is refused
 * (FC_ERR_CAPTURE_STATE), so a record function that queues its own work on
 * the stream needs a recording that captures (FC_RECORDING_CAPTURE, or
 * FC_RECORDING_AUTO with fc_ctx_stream() asked for, as cuBLAS users do).
 * Only the cache ends its recording: while it is open, fc_graph_end_ctx,
 * fc_graph_end_update_ctx, fc_graph_abort_ctx and the foreign-section calls
 * on its context are refused (FC_ERR_CAPTURE_STATE) and the recording goes
 * on. A cache whose context handle was freed fails every run with
 * FC_ERR_INVALID_HANDLE (its record function would receive a dead handle):
 * free the cache first.
 * A call that must capture (or run eagerly) is refused with
 * FC_ERR_CAPTURE_STATE while another capture is open on the context or the
 * calling thread is inside one of its break functions. */
#define FC_CACHE_HIT 0
#define FC_CACHE_CAPTURED 1
#define FC_CACHE_WARMED_UP 2
#define FC_CACHE_REFRESHED 3
#define FC_CACHE_EAGER_FAILED 4
#define FC_CACHE_EAGER_BACKOFF 5

typedef struct fc_graph_cache_config {
    size_t max_entries;      /* most entries kept; 0: no limit (default 256)      */
    size_t max_bytes;        /* most bytes kept, summed; 0: no limit (default 0)  */
    int warmup;              /* non-zero: run record eagerly before a key's
                                capture (default 0)                               */
    int max_tries;           /* recordings per capture attempt while invalidated,
                                >= 1 (default 3)                                  */
    int fail_threshold;      /* consecutive failed attempts before a key backs
                                off, >= 1 (default 3)                             */
    unsigned backoff_ms;     /* first backoff period; 0: retry at the next call
                                (default 100)                                     */
    unsigned max_backoff_ms; /* longest backoff period, >= backoff_ms (10000)     */
    int mode;                /* FC_CAPTURE_MODE_* of the cache's captures
                                (default FC_CAPTURE_MODE_THREAD_LOCAL)            */
} fc_graph_cache_config;

typedef struct fc_graph_cache_stats {
    uint64_t hits;             /* calls that launched a ready graph              */
    uint64_t misses;           /* every other call                               */
    uint64_t captures;         /* graphs captured and instantiated               */
    uint64_t updates;          /* refreshes that updated every segment in place  */
    uint64_t reinstantiations; /* refreshes that instantiated a segment anew     */
    uint64_t fallbacks;        /* calls run eagerly (EAGER_FAILED/EAGER_BACKOFF) */
    uint64_t failures;         /* failed capture attempts (captures, refreshes)  */
    uint64_t evictions;        /* entries dropped for max_entries / max_bytes    */
    size_t entries;            /* entries now                                    */
    size_t graphs;             /* entries now holding a graph                    */
    size_t bytes;              /* bytes now, summed over the entries             */
} fc_graph_cache_stats;

/* Fills *cfg with the defaults above (no-op, with an error, for NULL). */
void fc_graph_cache_config_default(fc_graph_cache_config *cfg);
/* A cache on ctx; cfg NULL means the defaults. NULL with
 * FC_ERR_INVALID_ARGUMENT for a bad setting (max_tries or fail_threshold
 * below 1, max_backoff_ms below backoff_ms, an unknown mode). */
fc_graph_cache *fc_graph_cache_new(fc_cuda_ctx *ctx, const fc_graph_cache_config *cfg);
/* Frees the cache and its graphs (launches in flight finish first). */
void fc_graph_cache_free(fc_graph_cache *cache);
/* Runs key's work once (see above). `record` must not be NULL (even on a
 * hit); `user` is passed to it; `live` is what break functions receive.
 * `outcome` may be NULL; it receives an FC_CACHE_* value, or -1 when the
 * call fails. Errors: the launch or the eager run failed (FC_ERR_CALLBACK
 * when record or a break function returned non-zero, ...), the call
 * re-entered the cache or found the context capturing
 * (FC_ERR_CAPTURE_STATE), a bad handle. A failed capture is not an error:
 * see FC_CACHE_EAGER_FAILED. */
int fc_graph_cache_run(fc_graph_cache *cache, uint64_t key, fc_record_fn record, void *user, void *live,
                       int *outcome);
/* Marks key's graph for a refresh at its next run (re-captured, updated in
 * place) and ends the key's backoff. Keys the cache does not hold are
 * ignored (FC_OK). */
int fc_graph_cache_invalidate(fc_graph_cache *cache, uint64_t key);
/* Invalidates every entry. */
int fc_graph_cache_invalidate_all(fc_graph_cache *cache);
/* Drops key's entry and graph (FC_OK also when it holds none). */
int fc_graph_cache_remove(fc_graph_cache *cache, uint64_t key);
/* Drops every entry; the counters in the statistics are kept. */
int fc_graph_cache_clear(fc_graph_cache *cache);
/* Copies the statistics into *out (not NULL). */
int fc_graph_cache_stats_get(const fc_graph_cache *cache, fc_graph_cache_stats *out);
/* Nodes in key's cached graph (as fc_graph_node_count); 0 and
 * FC_ERR_INVALID_ARGUMENT when the key has no graph. */
size_t fc_graph_cache_node_count(const fc_graph_cache *cache, uint64_t key);
/* Writes key's cached graph as DOT (as fc_graph_debug_dot);
 * FC_ERR_INVALID_ARGUMENT when the key has no graph. */
int fc_graph_cache_debug_dot(const fc_graph_cache *cache, uint64_t key, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* FC_CUDA_H */
