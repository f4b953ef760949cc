/* fc_cuda.h - C API of libfcgraph: CUDA contexts, buffers, kernels and
 * graph capture/replay for inference engines.
 *
 * Conventions
 *   - Handles are opaque. Every *_free accepts NULL.
 *   - Functions returning int return FC_OK (0) on success or one of the
 *     FC_ERR_* codes below; constructors return NULL on failure. Either
 *     way fc_last_error() then describes the most recent failure on the
 *     calling thread (it is not cleared by later successes).
 *   - Every potentially unsafe driver call the library makes runs with the
 *     calling thread's capture mode exchanged to RELAXED, so captures that
 *     other libraries open on other threads (even in GLOBAL mode) neither
 *     refuse nor are invalidated by our calls.
 *   - Work is queued on the context's own non-blocking stream; launches
 *     are asynchronous unless stated otherwise.
 *   - Queries given a NULL handle (fc_buffer_size, fc_graph_segment_count,
 *     ...) return their documented fallback and record
 *     FC_ERR_INVALID_ARGUMENT like any other failure.
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
#define FC_ERR_INVALID_ARGUMENT 1 /* NULL handle, zero size, bad name...    */
#define FC_ERR_NO_DRIVER 2        /* no usable CUDA driver (or too old)     */
#define FC_ERR_CUDA 3             /* a driver call failed; see the message  */
#define FC_ERR_WRONG_DEVICE 4     /* a buffer lives on another device       */
#define FC_ERR_BUFFER_TOO_SMALL 5 /* a buffer is smaller than needed        */
#define FC_ERR_CAPTURE_STATE 6    /* not allowed in this capture state      */
#define FC_ERR_UNSUPPORTED 7      /* the driver is too old for the feature  */
#define FC_ERR_OUT_OF_MEMORY 8    /* device memory exhausted                */
#define FC_ERR_CALLBACK 9         /* a break function returned non-zero     */
#define FC_ERR_INTERNAL 10        /* internal error (a bug); see message    */

/* ---- capture modes (CUstreamCaptureMode) ------------------------------- */
#define FC_CAPTURE_MODE_GLOBAL 0
#define FC_CAPTURE_MODE_THREAD_LOCAL 1
#define FC_CAPTURE_MODE_RELAXED 2

/* ---- opaque handles ---------------------------------------------------- */
typedef struct fc_cuda_ctx fc_cuda_ctx;
typedef struct fc_buffer fc_buffer;
typedef struct fc_graph fc_graph;
typedef struct fc_module fc_module;
typedef struct fc_kernel fc_kernel;

/* ---- library ----------------------------------------------------------- */
/* Library version, e.g. "0.1.0". Static string. */
const char *fc_version(void);
/* Message of the most recent failure on this thread ("" if none). Valid
 * until the next failing call on this thread. */
const char *fc_last_error(void);
/* Status code of the most recent failure on this thread (FC_OK if none). */
int fc_last_error_code(void);
/* Number of visible CUDA devices; 0 when there is no driver or no device
 * (then fc_last_error() says why). */
int fc_cuda_device_count(void);

/* ---- contexts ------------------------------------------------------------
 * A context is a device's primary context plus a non-blocking stream of its
 * own. Several contexts on one device are fine and independent. */
fc_cuda_ctx *fc_cuda_init_device(int device);
void fc_cuda_ctx_free(fc_cuda_ctx *ctx);
/* Device ordinal of the context, or -1 for NULL. */
int fc_cuda_ctx_device_id(const fc_cuda_ctx *ctx);
/* Waits for the work queued on this context's stream only (never the whole
 * device). Refused with FC_ERR_CAPTURE_STATE while the context captures. */
int fc_sync_ctx(fc_cuda_ctx *ctx);
/* Bytes of device memory held by the context's capture pool. */
size_t fc_ctx_pool_bytes(const fc_cuda_ctx *ctx);

/* ---- buffers -------------------------------------------------------------
 * While the context captures, allocations come from its capture pool:
 * their addresses stay valid for every replay, and freeing one returns it
 * to the pool for later captures of the same context. */
fc_buffer *fc_buffer_alloc_ctx(fc_cuda_ctx *ctx, size_t bytes);
void fc_buffer_free(fc_buffer *buf);
/* Size in bytes (0 for NULL). */
size_t fc_buffer_size(const fc_buffer *buf);
/* Device address, for passing to user kernels (0 for NULL). */
uint64_t fc_buffer_device_ptr(const fc_buffer *buf);
/* Blocking copies of `bytes` bytes to / from the start of the buffer,
 * ordered after the work queued on the buffer's context stream.
 * FC_ERR_BUFFER_TOO_SMALL when `bytes` exceeds the buffer; refused with
 * FC_ERR_CAPTURE_STATE while the buffer's context captures. */
int fc_buffer_upload(fc_buffer *buf, const void *src, size_t bytes);
int fc_buffer_download(const fc_buffer *buf, void *dst, size_t bytes);
/* Queues a byte fill of [offset, offset + len) on the context's stream
 * (captured while capturing), e.g. to zero a padded tail. */
int fc_buffer_fill_ctx(fc_cuda_ctx *ctx, fc_buffer *buf, size_t offset, size_t len, uint8_t value);

/* ---- built-in element-wise kernels --------------------------------------
 * out[i] = a[i] op b[i] for i < n floats, queued on the context's stream.
 * Each buffer must hold n floats and live on the context's device; else an
 * error code is returned and nothing is launched. n == 0 does nothing. */
int fc_add_ctx(fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n);
int fc_mul_ctx(fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n);

/* ---- user kernels ------------------------------------------------------- */
/* JIT-compiles NUL-terminated PTX into the context. */
fc_module *fc_module_load_ptx(fc_cuda_ctx *ctx, const char *ptx);
void fc_module_free(fc_module *module);
/* A kernel by its .entry name; it stays valid after fc_module_free. */
fc_kernel *fc_module_get_kernel(const fc_module *module, const char *name);
void fc_kernel_free(fc_kernel *kernel);
/* Number of parameters the kernel's PTX declares, or -1 for NULL. */
int fc_kernel_param_count(const fc_kernel *kernel);
/* Launches on ctx's stream (recorded while ctx captures). `args` holds
 * `nargs` pointers, one per kernel parameter, each to a value of that
 * parameter's size, as for cuLaunchKernel; nargs must equal the parameter
 * count. The kernel must belong to ctx's device. Asynchronous. */
int fc_kernel_launch_ctx(fc_cuda_ctx *ctx, const fc_kernel *kernel,
                         unsigned grid_x, unsigned grid_y, unsigned grid_z,
                         unsigned block_x, unsigned block_y, unsigned block_z,
                         unsigned shared_mem_bytes, void **args, size_t nargs);

/* ---- graph capture ------------------------------------------------------
 * begin opens a capture on the context's stream (THREAD_LOCAL mode unless
 * a mode is given); a second begin on a capturing context is refused.
 * end ends the capture and instantiates it, or returns NULL with the
 * reason; either way the stream is left out of capture. A capture that
 * recorded nothing gives a valid graph whose launch does nothing. */
int fc_graph_begin_ctx(fc_cuda_ctx *ctx);
int fc_graph_begin_ctx_mode(fc_cuda_ctx *ctx, int mode);
/* Like fc_graph_begin_ctx_mode; `capture_live` is the live pointer break
 * functions receive while the capture runs them once. */
int fc_graph_begin_live_ctx(fc_cuda_ctx *ctx, int mode, void *capture_live);
fc_graph *fc_graph_end_ctx(fc_cuda_ctx *ctx);
/* Ends the open capture into `graph`, an earlier graph of the same context,
 * instead of creating a new one: each segment whose topology matches is
 * updated in place (cuGraphExecUpdate, CUDA 12.0+ drivers; several times
 * cheaper than instantiating), the others are instantiated anew, and the
 * breaks become the new capture's. `updated_in_place` (may be NULL)
 * receives how many segments were updated in place. Do not launch `graph`
 * concurrently. The stream is left out of capture either way. */
int fc_graph_end_update_ctx(fc_cuda_ctx *ctx, fc_graph *graph, int *updated_in_place);
/* Drops an open capture (FC_ERR_CAPTURE_STATE when none is open). */
int fc_graph_abort_ctx(fc_cuda_ctx *ctx);
/* 1 while a capture is open on ctx and none of its breaks is running. */
int fc_graph_is_capturing_ctx(const fc_cuda_ctx *ctx);

/* A break function: runs eagerly between captured segments. `live` is the
 * pointer given to fc_graph_launch_live (or fc_graph_begin_live_ctx while
 * capturing); `user` is the pointer given to fc_graph_break_ctx, frozen at
 * capture. Return 0 on success. It may queue work on ctx (fc_add_ctx,
 * fc_kernel_launch_ctx...). */
typedef int (*fc_break_fn)(fc_cuda_ctx *ctx, void *live, void *user);

/* A break. While ctx captures: ends the current segment, runs fn once now,
 * records it and opens the next segment (N breaks give 2N+1 pieces).
 * Outside a capture, or while another break's function runs, it just calls
 * fn(ctx, NULL or the running break's live pointer, user). If fn fails,
 * FC_ERR_CALLBACK is returned and the capture is spoiled: fc_graph_end_ctx
 * then returns NULL (work queued meanwhile is recorded, never run). */
int fc_graph_break_ctx(fc_cuda_ctx *ctx, fc_break_fn fn, void *user);

/* Replays the graph on its context's stream: segments are launched
 * asynchronously, break functions run on the calling thread with `live`.
 * fc_graph_launch(g) is fc_graph_launch_live(g, NULL). Returns once the
 * work is queued; use fc_sync_ctx to wait for it. If a break function
 * fails (FC_ERR_CALLBACK), the replay stops there: later pieces are not
 * launched; work already queued still runs. While a break function runs,
 * fc_graph_begin_ctx on its context is refused. */
int fc_graph_launch(fc_graph *graph);
int fc_graph_launch_live(fc_graph *graph, void *live);
/* Pieces in the graph (captured segments plus breaks), or -1 for NULL. */
int fc_graph_segment_count(const fc_graph *graph);
/* May be called while a launch is still running on the device. */
void fc_graph_free(fc_graph *graph);

#ifdef __cplusplus
}
#endif

#endif /* FC_CUDA_H */
