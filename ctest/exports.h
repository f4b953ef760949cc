/* exports.h - every function of fc_cuda.h, with its handle parameters and a
 * call of it whose other arguments are valid, for the handle sweeps of
 * test_hostile.c (GPU) and test_no_gpu.c (CI).
 *
 * CT_EXPORTS lists one CT_EXPORT(name, status expression, params...) per
 * function the header declares (ctest/run.sh checks that the list and the
 * header name the same functions). The params are the function's handle
 * parameters as CT_P(slot, "name in the header"); functions without one say
 * CT_NONE. The status expression (see expect.h for what a status is) calls
 * the function with the handles in h->slot[] and valid values elsewhere:
 * so when exactly one slot holds a bad value, the status says how that one
 * value was answered.
 */
#ifndef FC_CTEST_EXPORTS_H
#define FC_CTEST_EXPORTS_H

#include "expect.h"
#include "user_ptx.h"

/* Handle slots; each holds one kind. */
enum {
    CT_S_NONE,
    CT_S_CTX,
    CT_S_A,
    CT_S_B,
    CT_S_OUT,
    CT_S_GRAPH,
    CT_S_MODULE,
    CT_S_KERNEL,
    CT_S_CACHE,
    CT_S_BUCKETS,
    CT_SLOTS
};

enum { CT_K_CTX, CT_K_BUFFER, CT_K_GRAPH, CT_K_MODULE, CT_K_KERNEL, CT_K_CACHE, CT_K_BUCKETS, CT_KINDS };

static const char *const ct_kind_name[CT_KINDS] = {"fc_cuda_ctx", "fc_buffer",      "fc_graph",  "fc_module",
                                                   "fc_kernel",   "fc_graph_cache", "fc_buckets"};

static inline int ct_slot_kind(int slot)
{
    switch (slot) {
    case CT_S_CTX: return CT_K_CTX;
    case CT_S_A:
    case CT_S_B:
    case CT_S_OUT: return CT_K_BUFFER;
    case CT_S_GRAPH: return CT_K_GRAPH;
    case CT_S_MODULE: return CT_K_MODULE;
    case CT_S_CACHE: return CT_K_CACHE;
    case CT_S_BUCKETS: return CT_K_BUCKETS;
    default: return CT_K_KERNEL;
    }
}

/* Bytes every buffer of the sweeps holds at least (and the calls use). */
#define CT_SWEEP_BYTES 64
#define CT_SWEEP_N (CT_SWEEP_BYTES / sizeof(float))

#define ST_CALLBACK_RAN (-1003) /* a break or record function ran for a refused call */

/* The arguments of one sweep call. */
typedef struct {
    void *slot[CT_SLOTS];
    unsigned char host[CT_SWEEP_BYTES]; /* host memory for copies */
    uint64_t dptr;                      /* an address inside a live device buffer (for wrap) */
    void **args;                        /* valid arguments of KERNEL (scale_f32) */
    size_t nargs;
    int callbacks;                      /* break/record/foreign functions run */
    int updated;
    fc_graph_cache_stats stats;
} ct_handles;

#define CTX ((fc_cuda_ctx *)h->slot[CT_S_CTX])
#define A ((fc_buffer *)h->slot[CT_S_A])
#define B ((fc_buffer *)h->slot[CT_S_B])
#define OUT ((fc_buffer *)h->slot[CT_S_OUT])
#define GRAPH ((fc_graph *)h->slot[CT_S_GRAPH])
#define MODULE ((fc_module *)h->slot[CT_S_MODULE])
#define KERNEL ((fc_kernel *)h->slot[CT_S_KERNEL])
#define CACHE ((fc_graph_cache *)h->slot[CT_S_CACHE])
#define BUCKETS ((fc_buckets *)h->slot[CT_S_BUCKETS])
#define CT_DOT_PATH "/nonexistent-fc-dir/sweep.dot" /* never written: the calls are refused first */

static int ct_counting_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)live;
    ((ct_handles *)user)->callbacks++;
    return 0;
}

static int ct_counting_record(fc_cuda_ctx *ctx, void *user)
{
    (void)ctx;
    ((ct_handles *)user)->callbacks++;
    return 0;
}

/* fc_graph_break_ctx: a refused break must not run its function. */
static inline int ct_st_break(ct_handles *h)
{
    int before = h->callbacks;
    int rc = fc_graph_break_ctx(CTX, ct_counting_break, h);
    return rc != FC_OK && h->callbacks != before ? ST_CALLBACK_RAN : rc;
}

static int ct_counting_foreign(void *stream, void *user)
{
    (void)stream;
    ((ct_handles *)user)->callbacks++;
    return 0;
}

#define CT_UNWRITTEN ((void *)(uintptr_t)0x5e17) /* what a refused call must leave in an out-pointer */

/* fc_graph_foreign_begin_ctx: a refused begin writes no stream (a section
 * it opens is ended again). */
static inline int ct_st_foreign_begin(ct_handles *h)
{
    void *stream = CT_UNWRITTEN;
    int rc = fc_graph_foreign_begin_ctx(CTX, FC_CAPTURE_MODE_THREAD_LOCAL, &stream);
    if (rc == FC_OK) {
        (void)fc_graph_foreign_end_ctx(CTX);
        return rc;
    }
    return stream == CT_UNWRITTEN ? rc : ST_WRONG_FALLBACK;
}

/* fc_graph_foreign_begin_on_ctx (ctx's own lane 0): as above. */
static inline int ct_st_foreign_begin_on(ct_handles *h)
{
    void *stream = CT_UNWRITTEN;
    int rc = fc_graph_foreign_begin_on_ctx(CTX, CTX, FC_CAPTURE_MODE_THREAD_LOCAL, &stream);
    if (rc == FC_OK) {
        (void)fc_graph_foreign_end_ctx(CTX);
        return rc;
    }
    return stream == CT_UNWRITTEN ? rc : ST_WRONG_FALLBACK;
}

/* fc_graph_record_foreign_ctx: a refused section runs no function. */
static inline int ct_st_record_foreign(ct_handles *h)
{
    int before = h->callbacks;
    int rc = fc_graph_record_foreign_ctx(CTX, FC_CAPTURE_MODE_THREAD_LOCAL, ct_counting_foreign, h);
    return rc != FC_OK && h->callbacks != before ? ST_CALLBACK_RAN : rc;
}

/* fc_graph_end_update_ex_ctx: a refused update writes none of its outputs. */
static inline int ct_st_end_update_ex(ct_handles *h)
{
    int updated = -7, instantiated = -7, node_calls = -7;
    int rc = fc_graph_end_update_ex_ctx(CTX, GRAPH, &updated, &instantiated, &node_calls);
    if (rc != FC_OK && (updated != -7 || instantiated != -7 || node_calls != -7)) return ST_WRONG_FALLBACK;
    return rc;
}

/* fc_graph_capture_ctx: a refused capture runs no recording and writes no graph. */
static inline int ct_st_capture(ct_handles *h)
{
    int before = h->callbacks;
    fc_graph *g = (fc_graph *)(uintptr_t)0x5e17;
    int rc = fc_graph_capture_ctx(CTX, FC_CAPTURE_MODE_THREAD_LOCAL, ct_counting_record, h, 3, &g);
    if (rc == FC_OK) {
        fc_graph_free(g);
        return rc;
    }
    if (h->callbacks != before) return ST_CALLBACK_RAN;
    return g == (fc_graph *)(uintptr_t)0x5e17 ? rc : ST_WRONG_FALLBACK;
}

/* fc_graph_cache_run: a refused run records nothing, runs nothing, and
 * says -1 in *outcome. */
static inline int ct_st_cache_run(ct_handles *h)
{
    int before = h->callbacks, outcome = 77;
    int rc = fc_graph_cache_run(CACHE, 7, ct_counting_record, h, NULL, &outcome);
    if (rc != FC_OK && h->callbacks != before) return ST_CALLBACK_RAN;
    if (rc != FC_OK && outcome != -1) return ST_WRONG_FALLBACK;
    return rc;
}

/* fc_ctx_mem_info: a refused query writes neither output. */
static inline int ct_st_mem_info(ct_handles *h)
{
    size_t free_b = 12345, total_b = 67890;
    int rc = fc_ctx_mem_info(CTX, &free_b, &total_b);
    if (rc != FC_OK && (free_b != 12345 || total_b != 67890)) return ST_WRONG_FALLBACK;
    return rc;
}

#define CT_P(slot, name) {slot, name}
#define CT_NONE {CT_S_NONE, NULL}
#define CT_NO_HANDLES FC_OK /* never called by the sweeps */

/* clang-format off */
#define CT_EXPORTS(CT_EXPORT)                                                                                      \
    CT_EXPORT(fc_version, CT_NO_HANDLES, CT_NONE)                                                                  \
    CT_EXPORT(fc_last_error, CT_NO_HANDLES, CT_NONE)                                                               \
    CT_EXPORT(fc_last_error_code, CT_NO_HANDLES, CT_NONE)                                                          \
    CT_EXPORT(fc_last_error_copy, CT_NO_HANDLES, CT_NONE)                                                          \
    CT_EXPORT(fc_clear_last_error, CT_NO_HANDLES, CT_NONE)                                                         \
    CT_EXPORT(fc_cuda_device_count, CT_NO_HANDLES, CT_NONE)                                                        \
    CT_EXPORT(fc_live_objects, CT_NO_HANDLES, CT_NONE)                                                             \
    CT_EXPORT(fc_cuda_init_device, CT_NO_HANDLES, CT_NONE)                                                         \
    CT_EXPORT(fc_cuda_init_device_isolated, CT_NO_HANDLES, CT_NONE)                                                \
    CT_EXPORT(fc_cuda_init_device_isolated_as, CT_NO_HANDLES, CT_NONE)                                             \
    CT_EXPORT(fc_cuda_ctx_free, ST_VOID(fc_cuda_ctx_free(CTX)), CT_P(CT_S_CTX, "ctx"))                            \
    CT_EXPORT(fc_cuda_ctx_device_id, ST_VALUE(fc_cuda_ctx_device_id(CTX) == -1), CT_P(CT_S_CTX, "ctx"))           \
    CT_EXPORT(fc_ctx_is_isolated, ST_VALUE(fc_ctx_is_isolated(CTX) == -1), CT_P(CT_S_CTX, "ctx"))                 \
    CT_EXPORT(fc_ctx_isolation, ST_VALUE(fc_ctx_isolation(CTX) == -1), CT_P(CT_S_CTX, "ctx"))                     \
    CT_EXPORT(fc_sync_ctx, fc_sync_ctx(CTX), CT_P(CT_S_CTX, "ctx"))                                               \
    CT_EXPORT(fc_ctx_pool_bytes, ST_VALUE(fc_ctx_pool_bytes(CTX) == 0), CT_P(CT_S_CTX, "ctx"))                    \
    CT_EXPORT(fc_ctx_mem_info, ct_st_mem_info(h), CT_P(CT_S_CTX, "ctx"))                                          \
    CT_EXPORT(fc_ctx_stream, ST_VALUE(fc_ctx_stream(CTX) == NULL), CT_P(CT_S_CTX, "ctx"))                         \
    CT_EXPORT(fc_ctx_cu_context, ST_VALUE(fc_ctx_cu_context(CTX) == NULL), CT_P(CT_S_CTX, "ctx"))                 \
    CT_EXPORT(fc_ctx_set_pdl, fc_ctx_set_pdl(CTX, 1), CT_P(CT_S_CTX, "ctx"))                                      \
    CT_EXPORT(fc_ctx_pdl_enabled, ST_VALUE(fc_ctx_pdl_enabled(CTX) == -1), CT_P(CT_S_CTX, "ctx"))                 \
    CT_EXPORT(fc_device_supports_pdl, CT_NO_HANDLES, CT_NONE)                                                      \
    CT_EXPORT(fc_buffer_alloc_ctx, ST_NEW(fc_buffer_alloc_ctx(CTX, CT_SWEEP_BYTES)), CT_P(CT_S_CTX, "ctx"))       \
    CT_EXPORT(fc_buffer_wrap_ctx, ST_NEW(fc_buffer_wrap_ctx(CTX, h->dptr, CT_SWEEP_BYTES)), CT_P(CT_S_CTX, "ctx")) \
    CT_EXPORT(fc_buffer_free, ST_VOID(fc_buffer_free(A)), CT_P(CT_S_A, "buf"))                                    \
    CT_EXPORT(fc_buffer_size, ST_VALUE(fc_buffer_size(A) == 0), CT_P(CT_S_A, "buf"))                              \
    CT_EXPORT(fc_buffer_device_ptr, ST_VALUE(fc_buffer_device_ptr(A) == 0), CT_P(CT_S_A, "buf"))                  \
    CT_EXPORT(fc_buffer_upload, fc_buffer_upload(A, h->host, CT_SWEEP_BYTES), CT_P(CT_S_A, "buf"))                \
    CT_EXPORT(fc_buffer_download, fc_buffer_download(A, h->host, CT_SWEEP_BYTES), CT_P(CT_S_A, "buf"))            \
    CT_EXPORT(fc_buffer_fill_ctx, fc_buffer_fill_ctx(CTX, A, 0, 4, 0), CT_P(CT_S_CTX, "ctx"), CT_P(CT_S_A, "buf")) \
    CT_EXPORT(fc_add_ctx, fc_add_ctx(CTX, A, B, OUT, CT_SWEEP_N), CT_P(CT_S_CTX, "ctx"), CT_P(CT_S_A, "a"),       \
              CT_P(CT_S_B, "b"), CT_P(CT_S_OUT, "out"))                                                            \
    CT_EXPORT(fc_mul_ctx, fc_mul_ctx(CTX, A, B, OUT, CT_SWEEP_N), CT_P(CT_S_CTX, "ctx"), CT_P(CT_S_A, "a"),       \
              CT_P(CT_S_B, "b"), CT_P(CT_S_OUT, "out"))                                                            \
    CT_EXPORT(fc_module_load_ptx, ST_NEW(fc_module_load_ptx(CTX, USER_PTX)), CT_P(CT_S_CTX, "ctx"))               \
    CT_EXPORT(fc_module_free, ST_VOID(fc_module_free(MODULE)), CT_P(CT_S_MODULE, "module"))                       \
    CT_EXPORT(fc_module_get_kernel, ST_NEW(fc_module_get_kernel(MODULE, "scale_f32")),                            \
              CT_P(CT_S_MODULE, "module"))                                                                         \
    CT_EXPORT(fc_kernel_free, ST_VOID(fc_kernel_free(KERNEL)), CT_P(CT_S_KERNEL, "kernel"))                       \
    CT_EXPORT(fc_kernel_param_count, ST_VALUE(fc_kernel_param_count(KERNEL) == -1), CT_P(CT_S_KERNEL, "kernel"))  \
    CT_EXPORT(fc_kernel_launch_ctx, fc_kernel_launch_ctx(CTX, KERNEL, 1, 1, 1, 32, 1, 1, 0, h->args, h->nargs),   \
              CT_P(CT_S_CTX, "ctx"), CT_P(CT_S_KERNEL, "kernel"))                                                  \
    CT_EXPORT(fc_kernel_set_pdl, fc_kernel_set_pdl(KERNEL, 0), CT_P(CT_S_KERNEL, "kernel"))                       \
    CT_EXPORT(fc_kernel_launch_ex_ctx,                                                                             \
              fc_kernel_launch_ex_ctx(CTX, KERNEL, 1, 1, 1, 32, 1, 1, 0, h->args, h->nargs, FC_LAUNCH_PLAIN),      \
              CT_P(CT_S_CTX, "ctx"), CT_P(CT_S_KERNEL, "kernel"))                                                  \
    CT_EXPORT(fc_graph_begin_ctx, fc_graph_begin_ctx(CTX), CT_P(CT_S_CTX, "ctx"))                                 \
    CT_EXPORT(fc_graph_begin_ctx_mode, fc_graph_begin_ctx_mode(CTX, FC_CAPTURE_MODE_THREAD_LOCAL),                \
              CT_P(CT_S_CTX, "ctx"))                                                                               \
    CT_EXPORT(fc_graph_begin_live_ctx, fc_graph_begin_live_ctx(CTX, FC_CAPTURE_MODE_THREAD_LOCAL, h),             \
              CT_P(CT_S_CTX, "ctx"))                                                                               \
    CT_EXPORT(fc_graph_end_ctx, ST_NEW(fc_graph_end_ctx(CTX)), CT_P(CT_S_CTX, "ctx"))                             \
    CT_EXPORT(fc_graph_end_update_ctx, fc_graph_end_update_ctx(CTX, GRAPH, &h->updated), CT_P(CT_S_CTX, "ctx"),   \
              CT_P(CT_S_GRAPH, "graph"))                                                                           \
    CT_EXPORT(fc_graph_end_update_ex_ctx, ct_st_end_update_ex(h), CT_P(CT_S_CTX, "ctx"), CT_P(CT_S_GRAPH, "graph")) \
    CT_EXPORT(fc_graph_abort_ctx, fc_graph_abort_ctx(CTX), CT_P(CT_S_CTX, "ctx"))                                 \
    CT_EXPORT(fc_graph_is_capturing_ctx, ST_VALUE(fc_graph_is_capturing_ctx(CTX) == 0), CT_P(CT_S_CTX, "ctx"))    \
    CT_EXPORT(fc_graph_break_ctx, ct_st_break(h), CT_P(CT_S_CTX, "ctx"))                                          \
    CT_EXPORT(fc_graph_capture_ctx, ct_st_capture(h), CT_P(CT_S_CTX, "ctx"))                                      \
    CT_EXPORT(fc_graph_capture_tries, ST_VALUE(fc_graph_capture_tries(GRAPH) == -1), CT_P(CT_S_GRAPH, "graph"))   \
    CT_EXPORT(fc_graph_launch, fc_graph_launch(GRAPH), CT_P(CT_S_GRAPH, "graph"))                                 \
    CT_EXPORT(fc_graph_launch_live, fc_graph_launch_live(GRAPH, h), CT_P(CT_S_GRAPH, "graph"))                    \
    CT_EXPORT(fc_graph_segment_count, ST_VALUE(fc_graph_segment_count(GRAPH) == -1), CT_P(CT_S_GRAPH, "graph"))   \
    CT_EXPORT(fc_graph_free, ST_VOID(fc_graph_free(GRAPH)), CT_P(CT_S_GRAPH, "graph"))                           \
    CT_EXPORT(fc_graph_node_count, ST_VALUE(fc_graph_node_count(GRAPH) == 0), CT_P(CT_S_GRAPH, "graph"))          \
    CT_EXPORT(fc_graph_segment_node_count, ST_VALUE(fc_graph_segment_node_count(GRAPH, 0) == 0),                  \
              CT_P(CT_S_GRAPH, "graph"))                                                                           \
    CT_EXPORT(fc_graph_debug_dot, fc_graph_debug_dot(GRAPH, CT_DOT_PATH), CT_P(CT_S_GRAPH, "graph"))              \
    CT_EXPORT(fc_ctx_set_recording_mode, fc_ctx_set_recording_mode(CTX, FC_RECORDING_AUTO), CT_P(CT_S_CTX, "ctx")) \
    CT_EXPORT(fc_ctx_recording_mode, ST_VALUE(fc_ctx_recording_mode(CTX) == -1), CT_P(CT_S_CTX, "ctx"))           \
    CT_EXPORT(fc_graph_builds_ctx, ST_VALUE(fc_graph_builds_ctx(CTX) == -1), CT_P(CT_S_CTX, "ctx"))               \
    CT_EXPORT(fc_graph_foreign_begin_ctx, ct_st_foreign_begin(h), CT_P(CT_S_CTX, "ctx"))                          \
    CT_EXPORT(fc_graph_foreign_begin_on_ctx, ct_st_foreign_begin_on(h), CT_P(CT_S_CTX, "ctx"))                    \
    CT_EXPORT(fc_graph_foreign_end_ctx, fc_graph_foreign_end_ctx(CTX), CT_P(CT_S_CTX, "ctx"))                     \
    CT_EXPORT(fc_graph_record_foreign_ctx, ct_st_record_foreign(h), CT_P(CT_S_CTX, "ctx"))                        \
    CT_EXPORT(fc_ctx_lane, ST_NEW(fc_ctx_lane(CTX, 1)), CT_P(CT_S_CTX, "ctx"))                                    \
    CT_EXPORT(fc_ctx_lane_index, ST_VALUE(fc_ctx_lane_index(CTX) == -1), CT_P(CT_S_CTX, "ctx"))                   \
    CT_EXPORT(fc_ctx_wait_lane, fc_ctx_wait_lane(CTX, CTX), CT_P(CT_S_CTX, "ctx"))                                \
    CT_EXPORT(fc_graph_cond_begin_ctx, fc_graph_cond_begin_ctx(CTX, FC_COND_WHILE, A, 0), CT_P(CT_S_CTX, "ctx"),   \
              CT_P(CT_S_A, "cond"))                                                                                \
    CT_EXPORT(fc_graph_cond_next_ctx, fc_graph_cond_next_ctx(CTX), CT_P(CT_S_CTX, "ctx"))                         \
    CT_EXPORT(fc_graph_cond_end_ctx, fc_graph_cond_end_ctx(CTX), CT_P(CT_S_CTX, "ctx"))                           \
    CT_EXPORT(fc_graph_cond_abort_ctx, fc_graph_cond_abort_ctx(CTX), CT_P(CT_S_CTX, "ctx"))                       \
    CT_EXPORT(fc_cond_support, CT_NO_HANDLES, CT_NONE)                                                             \
    CT_EXPORT(fc_buckets_ladder, CT_NO_HANDLES, CT_NONE)                                                           \
    CT_EXPORT(fc_buckets_from_list, CT_NO_HANDLES, CT_NONE)                                                        \
    CT_EXPORT(fc_buckets_free, ST_VOID(fc_buckets_free(BUCKETS)), CT_P(CT_S_BUCKETS, "buckets"))                  \
    CT_EXPORT(fc_buckets_count, ST_VALUE(fc_buckets_count(BUCKETS) == 0), CT_P(CT_S_BUCKETS, "buckets"))          \
    CT_EXPORT(fc_buckets_get, ST_VALUE(fc_buckets_get(BUCKETS, 0) == 0), CT_P(CT_S_BUCKETS, "buckets"))           \
    CT_EXPORT(fc_buckets_for, ST_VALUE(fc_buckets_for(BUCKETS, 1) == 0), CT_P(CT_S_BUCKETS, "buckets"))           \
    CT_EXPORT(fc_graph_cache_config_default, CT_NO_HANDLES, CT_NONE)                                               \
    CT_EXPORT(fc_graph_cache_new, ST_NEW(fc_graph_cache_new(CTX, NULL)), CT_P(CT_S_CTX, "ctx"))                   \
    CT_EXPORT(fc_graph_cache_free, ST_VOID(fc_graph_cache_free(CACHE)), CT_P(CT_S_CACHE, "cache"))                \
    CT_EXPORT(fc_graph_cache_run, ct_st_cache_run(h), CT_P(CT_S_CACHE, "cache"))                                  \
    CT_EXPORT(fc_graph_cache_invalidate, fc_graph_cache_invalidate(CACHE, 7), CT_P(CT_S_CACHE, "cache"))          \
    CT_EXPORT(fc_graph_cache_invalidate_all, fc_graph_cache_invalidate_all(CACHE), CT_P(CT_S_CACHE, "cache"))     \
    CT_EXPORT(fc_graph_cache_remove, fc_graph_cache_remove(CACHE, 7), CT_P(CT_S_CACHE, "cache"))                  \
    CT_EXPORT(fc_graph_cache_clear, fc_graph_cache_clear(CACHE), CT_P(CT_S_CACHE, "cache"))                       \
    CT_EXPORT(fc_graph_cache_stats_get, fc_graph_cache_stats_get(CACHE, &h->stats), CT_P(CT_S_CACHE, "cache"))    \
    CT_EXPORT(fc_graph_cache_node_count, ST_VALUE(fc_graph_cache_node_count(CACHE, 7) == 0),                      \
              CT_P(CT_S_CACHE, "cache"))                                                                           \
    CT_EXPORT(fc_graph_cache_debug_dot, fc_graph_cache_debug_dot(CACHE, 7, CT_DOT_PATH), CT_P(CT_S_CACHE, "cache"))
/* clang-format on */

typedef struct {
    int slot;
    const char *name;
} ct_param;

typedef struct {
    const char *name;
    ct_param params[4]; /* slot CT_S_NONE ends the list */
} ct_export;

#define CT_EXPORT_ENTRY(fn, call, ...) {#fn, {__VA_ARGS__}},
static const ct_export ct_exports[] = {CT_EXPORTS(CT_EXPORT_ENTRY)};
#undef CT_EXPORT_ENTRY

#define CT_EXPORT_COUNT (sizeof ct_exports / sizeof ct_exports[0])

/* Calls export number `e` (index into ct_exports) with `h`; returns its status. */
static inline int ct_call_export(size_t e, ct_handles *h)
{
    size_t i = 0;
#define CT_EXPORT_CASE(fn, call, ...) \
    if (e == i++) return (call);
    CT_EXPORTS(CT_EXPORT_CASE)
#undef CT_EXPORT_CASE
    return ST_WRONG_FALLBACK;
}

static inline int ct_export_nparams(const ct_export *x)
{
    int n = 0;
    while (n < 4 && x->params[n].slot != CT_S_NONE) n++;
    return n;
}

/* Whether the export only releases its handle (NULL is a no-op there). */
static inline int ct_is_free(const ct_export *x)
{
    size_t n = strlen(x->name);
    return n > 5 && strcmp(x->name + n - 5, "_free") == 0;
}

#undef CTX
#undef A
#undef B
#undef OUT
#undef GRAPH
#undef MODULE
#undef KERNEL
#undef CACHE
#undef BUCKETS

#endif /* FC_CTEST_EXPORTS_H */
