/* test_foreign.c - recordings that build, foreign sections and recording
 * modes (GPU; [SKIP] without a CUDA device).
 *
 * The caller's own work is a driver call the test makes itself, without a
 * toolkit: cuMemsetD32Async, opened at run time from the driver the library
 * uses ($FC_CUDA_LIBRARY or libcuda.so.1), as the interop tests open cuBLAS
 * and NCCL. The work, N floats:
 *     T   = A + B           fc_add_ctx
 *     C   = 3.0             cuMemsetD32Async on the section's stream
 *     OUT = T * C           fc_mul_ctx
 *
 *   build_with_foreign_section  FC_RECORDING_BUILD: the add, a foreign
 *                               section with the memset, the mul; nothing
 *                               runs while recording; one segment; the
 *                               replay equals the eager computation and the
 *                               host, bit for bit; fc_ctx_stream() does not
 *                               make a BUILD context capture.
 *   record_foreign_function     the same through fc_graph_record_foreign_ctx;
 *                               a failing function gives FC_ERR_CALLBACK and
 *                               its section is ended.
 *   auto_after_stream_captures  FC_RECORDING_AUTO: builds until fc_ctx_stream()
 *                               is asked for, then captures (builds_ctx 0),
 *                               and the memset queued on the cached stream
 *                               without a section is recorded, not run.
 *   build_runs_foreign_work_outside_sections
 *                               FC_RECORDING_BUILD: the memset queued on the
 *                               stream outside a section runs at once.
 *   update_reports_node_calls   re-recordings ended with
 *                               fc_graph_end_update_ex_ctx: nothing changed
 *                               -> 0 node calls; one kernel's arguments
 *                               changed -> 1; both -> 2; every replay right.
 *                               A recording with a foreign section of the
 *                               same shape updates node by node: the
 *                               changed add and the section's child node.
 *   lanes_fork_join             fc_ctx_lane / fc_ctx_wait_lane: T = A + B on
 *                               lane 1 and U = B + B on lane 2, joined, then
 *                               OUT = T * U on lane 0; eager and recorded
 *                               (FC_RECORDING_BUILD) equal the host; a lane
 *                               handle refuses begin; bad lanes and handles
 *                               of two contexts are refused.
 *   own_stream_synchronised_while_recording
 *                               the caller's cuStreamSynchronize of the
 *                               recording's own stream: in a recording that
 *                               captures, the driver refuses it and the end
 *                               fails with FC_ERR_CAPTURE_INVALIDATED; in one
 *                               that builds it is fine outside a section and
 *                               spoils the recording inside one (the
 *                               section's end and the recording's end fail
 *                               with FC_ERR_CAPTURE_INVALIDATED). Each time
 *                               nothing latches: the next recording equals
 *                               the host.
 */
#include "check.h"
#include "expect.h"

#include <dlfcn.h>

#define N 4096
#define THREE_BITS 0x40400000u /* 3.0f */

/* ---- the driver calls of the test ------------------------------------------ */

typedef int (*memset_d32_async_fn)(unsigned long long dst, unsigned int value, size_t n, void *stream);
typedef int (*ctx_set_current_fn)(void *ctx);
typedef int (*stream_synchronize_fn)(void *stream);

static struct {
    void *lib;
    memset_d32_async_fn memset_d32_async; /* CUresult cuMemsetD32Async(CUdeviceptr, unsigned, size_t, CUstream) */
    ctx_set_current_fn ctx_set_current;   /* CUresult cuCtxSetCurrent(CUcontext) */
    stream_synchronize_fn stream_synchronize; /* CUresult cuStreamSynchronize(CUstream) */
} drv;

static int load_sym(const char *name, void *slot, size_t size)
{
    void *sym = dlsym(drv.lib, name);
    if (!sym || size != sizeof sym) {
        printf("[FAIL] %s: %s not found in the driver: %s\n", ct_prog, name, sym ? "size" : dlerror());
        return -1;
    }
    memcpy(slot, &sym, sizeof sym); /* POSIX: function pointers are object-pointer sized */
    return 0;
}

static int load_driver(void)
{
    const char *env = getenv("FC_CUDA_LIBRARY");
    const char *name = env && env[0] ? env : "libcuda.so.1";
    drv.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!drv.lib) {
        printf("[FAIL] %s: dlopen(%s): %s\n", ct_prog, name, dlerror());
        return -1;
    }
    if (load_sym("cuMemsetD32Async", &drv.memset_d32_async, sizeof drv.memset_d32_async) ||
        load_sym("cuCtxSetCurrent", &drv.ctx_set_current, sizeof drv.ctx_set_current) ||
        load_sym("cuStreamSynchronize", &drv.stream_synchronize, sizeof drv.stream_synchronize))
        return -1;
    return 0;
}

/* Makes ctx's CUDA context current on this thread (the driver call below
 * uses the current one). */
static int make_current(fc_cuda_ctx *ctx)
{
    return drv.ctx_set_current(fc_ctx_cu_context(ctx));
}

/* The test's own work: buf = 3.0 (N floats), queued on `stream`. */
static int memset_three(void *stream, const fc_buffer *buf)
{
    return drv.memset_d32_async(fc_buffer_device_ptr(buf), THREE_BITS, N, stream);
}

/* ---- data -------------------------------------------------------------------- */

typedef struct {
    fc_buffer *a, *b, *c, *t, *out;
    float ha[N], hb[N], poison[N], got[N], want[N];
} bufs;

static int bufs_make(fc_cuda_ctx *ctx, bufs *w, uint32_t seed)
{
    ct_seed_fill2(seed, w->ha, w->hb, N);
    ct_fill_poison(w->poison, N);
    w->a = ct_upload_new(ctx, w->ha, N);
    w->b = ct_upload_new(ctx, w->hb, N);
    w->c = ct_upload_new(ctx, w->poison, N);
    w->t = ct_upload_new(ctx, w->poison, N);
    w->out = ct_upload_new(ctx, w->poison, N);
    return w->a && w->b && w->c && w->t && w->out;
}

static void bufs_free(bufs *w)
{
    CT_FREE_BUFFERS(w->a, w->b, w->c, w->t, w->out);
}

/* want[i] = (a[i] + b[i]) * 3, rounded as the kernels round (each op once). */
static void host_reference(const float *a, const float *b, float *want)
{
    for (size_t i = 0; i < N; i++) {
        float t = a[i] + b[i];
        want[i] = t * 3.0f;
    }
}

/* Poisons c and out, launches g, syncs and downloads out into w->got. */
static int replay(fc_cuda_ctx *ctx, fc_graph *g, bufs *w)
{
    return fc_buffer_upload(w->c, w->poison, sizeof w->poison) == FC_OK &&
           fc_buffer_upload(w->out, w->poison, sizeof w->poison) == FC_OK && fc_graph_launch(g) == FC_OK &&
           fc_sync_ctx(ctx) == FC_OK && fc_buffer_download(w->out, w->got, sizeof w->got) == FC_OK;
}

/* Whether `buf` still holds the poison (nothing ran into it). */
static int still_poisoned(fc_cuda_ctx *ctx, const fc_buffer *buf, bufs *w)
{
    if (fc_sync_ctx(ctx) != FC_OK || fc_buffer_download(buf, w->got, sizeof w->got) != FC_OK) return 0;
    return ct_first_mismatch(w->got, w->poison, N) == (size_t)-1;
}

/* The eager computation on the device, into fresh buffers: T = A + B, C =
 * 3.0 (uploaded), OUT = T * C. Leaves OUT in `eager`. */
static int eager_result(fc_cuda_ctx *ctx, const bufs *w, float *eager)
{
    float three[N];
    ct_fill_value(three, N, 3.0f);
    fc_buffer *t = fc_buffer_alloc_ctx(ctx, sizeof three), *c = ct_upload_new(ctx, three, N),
              *out = fc_buffer_alloc_ctx(ctx, sizeof three);
    int ok = t && c && out && fc_add_ctx(ctx, w->a, w->b, t, N) == FC_OK && fc_mul_ctx(ctx, t, c, out, N) == FC_OK &&
             fc_sync_ctx(ctx) == FC_OK && fc_buffer_download(out, eager, sizeof three) == FC_OK;
    CT_FREE_BUFFERS(t, c, out);
    return ok;
}

/* ---- cases ------------------------------------------------------------------- */

static void build_with_foreign_section(fc_cuda_ctx *ctx)
{
    static bufs w;
    static float eager[N];
    fc_graph *g = NULL;
    void *stream = NULL;
    CHECK(bufs_make(ctx, &w, 0xF0E1));
    CHECK_RC(make_current(ctx), 0);
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_BUILD));
    CHECK_RC(fc_ctx_recording_mode(ctx), FC_RECORDING_BUILD);
    CHECK_RC(fc_graph_builds_ctx(ctx), 1);

    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_RC(fc_graph_builds_ctx(ctx), 1);
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    CHECK_OK(fc_graph_foreign_begin_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &stream));
    CHECK_MSG(stream != NULL, "the section gave no stream");
    CHECK_RC(memset_three(stream, w.c), 0);
    CHECK_OK(fc_graph_foreign_end_ctx(ctx));
    CHECK_OK(fc_mul_ctx(ctx, w.t, w.c, w.out, N));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));

    CHECK_MSG(still_poisoned(ctx, w.c, &w), "the memset ran while recording");
    CHECK_MSG(still_poisoned(ctx, w.out, &w), "the kernels ran while recording");
    CHECK_RC(fc_graph_segment_count(g), 1);

    host_reference(w.ha, w.hb, w.want);
    CHECK(eager_result(ctx, &w, eager));
    CHECK_FLOATS(eager, w.want, N, "eager vs host");
    for (int r = 0; r < 3; r++) {
        CHECK(replay(ctx, g, &w));
        CHECK_FLOATS(w.got, eager, N, "replay vs eager");
    }
    CHECK(fc_buffer_download(w.c, w.got, sizeof w.got) == FC_OK);
    ct_fill_value(w.want, N, 3.0f);
    CHECK_FLOATS(w.got, w.want, N, "C after the replay (the section's memset)");

    /* The section's stream is the context's; asking for it does not make a
     * BUILD context capture. */
    CHECK_MSG(fc_ctx_stream(ctx) == stream, "the section's stream %p is not fc_ctx_stream() %p", stream,
              fc_ctx_stream(ctx));
    CHECK_RC(fc_graph_builds_ctx(ctx), 1);
done:
    if (fc_graph_is_capturing_ctx(ctx)) (void)fc_graph_abort_ctx(ctx);
    fc_graph_free(g);
    bufs_free(&w);
}

typedef struct {
    const fc_buffer *c;
    int calls;
    int fail_with;
} foreign_args;

static int foreign_memset(void *stream, void *user)
{
    foreign_args *f = (foreign_args *)user;
    f->calls++;
    if (f->fail_with) return f->fail_with;
    return memset_three(stream, f->c) == 0 ? 0 : -1;
}

static void record_foreign_function(fc_cuda_ctx *ctx)
{
    static bufs w;
    static float eager[N];
    fc_graph *g = NULL;
    foreign_args f = {NULL, 0, 0};
    CHECK(bufs_make(ctx, &w, 0xF0E2));
    CHECK_RC(make_current(ctx), 0);
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_BUILD));
    f.c = w.c;

    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    CHECK_OK(fc_graph_record_foreign_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, foreign_memset, &f));
    CHECK_RC(f.calls, 1);
    CHECK_OK(fc_mul_ctx(ctx, w.t, w.c, w.out, N));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(still_poisoned(ctx, w.out, &w), "the work ran while recording");
    CHECK(eager_result(ctx, &w, eager));
    CHECK(replay(ctx, g, &w));
    CHECK_FLOATS(w.got, eager, N, "replay vs eager");

    /* A failing function: FC_ERR_CALLBACK, the section ended anyway. */
    f.fail_with = 3;
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_RC(fc_graph_record_foreign_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, foreign_memset, &f), FC_ERR_CALLBACK);
    CHECK_MSG(strstr(fc_last_error(), "foreign function returned 3") != NULL, "message \"%s\"", fc_last_error());
    CHECK_RC(f.calls, 2);
    CHECK_RC(fc_graph_foreign_end_ctx(ctx), FC_ERR_CAPTURE_STATE);
    CHECK_OK(fc_graph_abort_ctx(ctx));
    /* A NULL function and a bad mode are refused before anything runs. */
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_RC(fc_graph_record_foreign_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, NULL, &f), FC_ERR_INVALID_ARGUMENT);
    CHECK_RC(fc_graph_record_foreign_ctx(ctx, 3, foreign_memset, &f), FC_ERR_INVALID_ARGUMENT);
    CHECK_RC(f.calls, 2);
    CHECK_OK(fc_graph_abort_ctx(ctx));
done:
    if (fc_graph_is_capturing_ctx(ctx)) (void)fc_graph_abort_ctx(ctx);
    fc_graph_free(g);
    bufs_free(&w);
}

static void auto_after_stream_captures(fc_cuda_ctx *ctx)
{
    static bufs w;
    static float eager[N];
    fc_graph *g = NULL;
    void *cached = NULL, *section = NULL;
    CHECK(bufs_make(ctx, &w, 0xF0E3));
    CHECK_RC(make_current(ctx), 0);
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_AUTO));
    CHECK_RC(fc_graph_builds_ctx(ctx), 1);
    CHECK_NOTNULL(cached = fc_ctx_stream(ctx));
    CHECK_RC(fc_graph_builds_ctx(ctx), 0);
    CHECK_RC(fc_ctx_recording_mode(ctx), FC_RECORDING_AUTO);
    /* The other modes resolve as set, whatever the stream. */
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_BUILD));
    CHECK_RC(fc_graph_builds_ctx(ctx), 1);
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_CAPTURE));
    CHECK_RC(fc_graph_builds_ctx(ctx), 0);
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_AUTO));

    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_RC(fc_graph_builds_ctx(ctx), 0);
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    CHECK_RC(memset_three(cached, w.c), 0); /* on the cached stream, no section */
    /* A section changes nothing in a recording that captures. */
    CHECK_OK(fc_graph_foreign_begin_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &section));
    CHECK_MSG(section == cached, "the section's stream %p is not the cached %p", section, cached);
    CHECK_OK(fc_graph_foreign_end_ctx(ctx));
    CHECK_OK(fc_mul_ctx(ctx, w.t, w.c, w.out, N));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(still_poisoned(ctx, w.c, &w), "the memset on the cached stream ran instead of being recorded");
    CHECK_MSG(still_poisoned(ctx, w.out, &w), "the kernels ran while recording");
    CHECK(eager_result(ctx, &w, eager));
    CHECK(replay(ctx, g, &w));
    CHECK_FLOATS(w.got, eager, N, "replay vs eager");
done:
    if (fc_graph_is_capturing_ctx(ctx)) (void)fc_graph_abort_ctx(ctx);
    fc_graph_free(g);
    bufs_free(&w);
}

static void build_runs_foreign_work_outside_sections(fc_cuda_ctx *ctx)
{
    static bufs w;
    fc_graph *g = NULL;
    void *stream = NULL;
    CHECK(bufs_make(ctx, &w, 0xF0E4));
    CHECK_RC(make_current(ctx), 0);
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_BUILD));
    CHECK_NOTNULL(stream = fc_ctx_stream(ctx));
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_RC(fc_graph_builds_ctx(ctx), 1);
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    CHECK_RC(memset_three(stream, w.c), 0); /* outside a section: runs now */
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(still_poisoned(ctx, w.t, &w), "the add ran while recording");
    CHECK(fc_buffer_download(w.c, w.got, sizeof w.got) == FC_OK);
    ct_fill_value(w.want, N, 3.0f);
    CHECK_FLOATS(w.got, w.want, N, "C right after the recording (the memset ran at once)");
done:
    if (fc_graph_is_capturing_ctx(ctx)) (void)fc_graph_abort_ctx(ctx);
    fc_graph_free(g);
    bufs_free(&w);
}

/* Records T = X + B, OUT = T * Y and ends it into *g (a new graph when *g
 * is NULL). -1 on failure. */
static int record_pair(fc_cuda_ctx *ctx, fc_graph **g, const fc_buffer *x, const fc_buffer *b, const fc_buffer *y,
                       fc_buffer *t, fc_buffer *out, int *updated, int *instantiated, int *node_calls)
{
    if (fc_graph_begin_ctx(ctx) != FC_OK || fc_add_ctx(ctx, x, b, t, N) != FC_OK ||
        fc_mul_ctx(ctx, t, y, out, N) != FC_OK) {
        if (fc_graph_is_capturing_ctx(ctx)) (void)fc_graph_abort_ctx(ctx);
        return -1;
    }
    if (!*g) return (*g = fc_graph_end_ctx(ctx)) ? 0 : -1;
    *updated = *instantiated = *node_calls = -7;
    return fc_graph_end_update_ex_ctx(ctx, *g, updated, instantiated, node_calls) == FC_OK ? 0 : -1;
}

/* want[i] = (x[i] + b[i]) * y[i]. */
static void pair_reference(const float *x, const float *b, const float *y, float *want)
{
    for (size_t i = 0; i < N; i++) {
        float t = x[i] + b[i];
        want[i] = t * y[i];
    }
}

static void update_reports_node_calls(fc_cuda_ctx *ctx)
{
    static bufs w;
    static float hx2[N];
    fc_graph *g = NULL;
    fc_buffer *x2 = NULL;
    int updated = -7, instantiated = -7, node_calls = -7;
    void *stream = NULL;
    CHECK(bufs_make(ctx, &w, 0xF0E5));
    CHECK_RC(make_current(ctx), 0);
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_BUILD));
    ct_seed(0xF0E6);
    ct_fill_random(hx2, N);
    CHECK_NOTNULL(x2 = ct_upload_new(ctx, hx2, N));

    /* out = (a + b) * b */
    CHECK(record_pair(ctx, &g, w.a, w.b, w.b, w.t, w.out, &updated, &instantiated, &node_calls) == 0);
    CHECK(replay(ctx, g, &w));
    pair_reference(w.ha, w.hb, w.hb, w.want);
    CHECK_FLOATS(w.got, w.want, N, "first recording");

    /* The same again: updated in place, no driver call. */
    CHECK(record_pair(ctx, &g, w.a, w.b, w.b, w.t, w.out, &updated, &instantiated, &node_calls) == 0);
    CHECK_MSG(updated >= 1 && instantiated == 0 && node_calls == 0,
              "unchanged: updated %d, instantiated %d, node_calls %d (want >= 1, 0, 0)", updated, instantiated,
              node_calls);
    CHECK(replay(ctx, g, &w));
    CHECK_FLOATS(w.got, w.want, N, "unchanged re-recording");

    /* The add reads x2 instead of a: one node changed. */
    CHECK(record_pair(ctx, &g, x2, w.b, w.b, w.t, w.out, &updated, &instantiated, &node_calls) == 0);
    CHECK_MSG(updated >= 1 && instantiated == 0 && node_calls == 1,
              "one node changed: updated %d, instantiated %d, node_calls %d (want >= 1, 0, 1)", updated,
              instantiated, node_calls);
    CHECK(replay(ctx, g, &w));
    pair_reference(hx2, w.hb, w.hb, w.want);
    CHECK_FLOATS(w.got, w.want, N, "one node changed");

    /* Back to a, and the mul multiplies by a: both nodes changed. */
    CHECK(record_pair(ctx, &g, w.a, w.b, w.a, w.t, w.out, &updated, &instantiated, &node_calls) == 0);
    CHECK_MSG(updated >= 1 && instantiated == 0 && node_calls == 2,
              "two nodes changed: updated %d, instantiated %d, node_calls %d (want >= 1, 0, 2)", updated,
              instantiated, node_calls);
    CHECK(replay(ctx, g, &w));
    pair_reference(w.ha, w.hb, w.ha, w.want);
    CHECK_FLOATS(w.got, w.want, N, "two nodes changed");

    /* NULL outputs are fine in the _ex form; fc_graph_end_update_ctx still
     * reports the segments updated in place. */
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    CHECK_OK(fc_mul_ctx(ctx, w.t, w.a, w.out, N));
    CHECK_OK(fc_graph_end_update_ex_ctx(ctx, g, NULL, NULL, NULL));
    updated = -7;
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    CHECK_OK(fc_mul_ctx(ctx, w.t, w.a, w.out, N));
    CHECK_OK(fc_graph_end_update_ctx(ctx, g, &updated));
    CHECK_MSG(updated >= 1, "fc_graph_end_update_ctx: updated %d", updated);

    /* With a foreign section of the same shape (three memsets) the segment
     * is updated node by node: the changed add and the section's child node
     * (cuGraphExecChildGraphNodeSetParams), 2 calls; the replay is right. */
    fc_graph_free(g);
    g = NULL;
    for (int round = 0; round < 2; round++) {
        CHECK_OK(fc_graph_begin_ctx(ctx));
        CHECK_OK(fc_add_ctx(ctx, round ? x2 : w.a, w.b, w.t, N));
        CHECK_OK(fc_graph_foreign_begin_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &stream));
        CHECK_RC(memset_three(stream, w.c), 0);
        CHECK_OK(fc_graph_foreign_end_ctx(ctx));
        CHECK_OK(fc_mul_ctx(ctx, w.t, w.c, w.out, N));
        if (round == 0) {
            CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
        } else {
            updated = instantiated = node_calls = -7;
            CHECK_OK(fc_graph_end_update_ex_ctx(ctx, g, &updated, &instantiated, &node_calls));
            CHECK_MSG(updated == 1 && instantiated == 0 && node_calls == 2,
                      "with a section: updated %d, instantiated %d, node_calls %d (want 1, 0, 2)", updated,
                      instantiated, node_calls);
        }
        CHECK(replay(ctx, g, &w));
        host_reference(round ? hx2 : w.ha, w.hb, w.want);
        CHECK_FLOATS(w.got, w.want, N, round ? "with a section, updated" : "with a section");
    }
done:
    if (fc_graph_is_capturing_ctx(ctx)) (void)fc_graph_abort_ctx(ctx);
    fc_graph_free(g);
    fc_buffer_free(x2);
    bufs_free(&w);
}

/* T = A + B on lane 1, U = B + B on lane 2, OUT = T * U on lane 0. */
static int lanes_work(fc_cuda_ctx *ctx, fc_cuda_ctx *l1, fc_cuda_ctx *l2, bufs *w)
{
    return fc_ctx_wait_lane(l1, ctx) == FC_OK && fc_ctx_wait_lane(l2, ctx) == FC_OK &&
           fc_add_ctx(l1, w->a, w->b, w->t, N) == FC_OK && fc_add_ctx(l2, w->b, w->b, w->c, N) == FC_OK &&
           fc_ctx_wait_lane(ctx, l1) == FC_OK && fc_ctx_wait_lane(ctx, l2) == FC_OK &&
           fc_mul_ctx(ctx, w->t, w->c, w->out, N) == FC_OK;
}

static void lanes_fork_join(fc_cuda_ctx *ctx)
{
    static bufs w;
    fc_graph *g = NULL;
    fc_cuda_ctx *l1 = NULL, *l2 = NULL, *other = NULL;
    CHECK(bufs_make(ctx, &w, 77));
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_BUILD));
    l1 = fc_ctx_lane(ctx, 1);
    l2 = fc_ctx_lane(ctx, 2);
    CHECK_NOTNULL(l1);
    CHECK_NOTNULL(l2);
    CHECK(fc_ctx_lane_index(l1) == 1 && fc_ctx_lane_index(l2) == 2 && fc_ctx_lane_index(ctx) == 0);
    for (size_t i = 0; i < N; i++) w.want[i] = (w.ha[i] + w.hb[i]) * (w.hb[i] + w.hb[i]);
    /* Eagerly. */
    CHECK(lanes_work(ctx, l1, l2, &w));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(w.out, w.got, sizeof w.got));
    CHECK_FLOATS(w.got, w.want, N, "eager lanes vs host");
    /* Recorded: nothing runs, the replay equals the host. */
    CHECK_OK(fc_buffer_upload(w.out, w.poison, sizeof w.poison));
    CHECK_RC(fc_graph_begin_ctx(l1), FC_ERR_CAPTURE_STATE);
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK(lanes_work(ctx, l1, l2, &w));
    g = fc_graph_end_ctx(ctx);
    CHECK_NOTNULL(g);
    CHECK(fc_graph_node_count(g) == 3);
    CHECK(still_poisoned(ctx, w.out, &w));
    CHECK_OK(fc_graph_launch(g));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(w.out, w.got, sizeof w.got));
    CHECK_FLOATS(w.got, w.want, N, "recorded lanes vs host");
    /* Rules. */
    CHECK(fc_ctx_lane(ctx, -1) == NULL && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    CHECK(fc_ctx_lane(ctx, 64) == NULL && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    other = fc_cuda_init_device(fc_cuda_ctx_device_id(ctx));
    CHECK_NOTNULL(other);
    CHECK_RC(fc_ctx_wait_lane(ctx, other), FC_ERR_INVALID_ARGUMENT);
    CHECK_RC(fc_ctx_wait_lane(ctx, NULL), FC_ERR_INVALID_ARGUMENT);
done:
    fc_graph_free(g);
    fc_cuda_ctx_free(other);
    fc_cuda_ctx_free(l1);
    fc_cuda_ctx_free(l2);
    bufs_free(&w);
    (void)fc_ctx_set_recording_mode(ctx, FC_RECORDING_AUTO);
}

/* Records T = A + B, C = 3 (a section's memset), OUT = T * C on ctx (in its
 * recording mode), replays it and compares OUT with the host. */
static int record_and_replay_right(fc_cuda_ctx *ctx, bufs *w)
{
    void *stream = NULL;
    fc_graph *g = NULL;
    int ok = fc_graph_begin_ctx(ctx) == FC_OK && fc_add_ctx(ctx, w->a, w->b, w->t, N) == FC_OK &&
             fc_graph_foreign_begin_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &stream) == FC_OK &&
             memset_three(stream, w->c) == 0 && fc_graph_foreign_end_ctx(ctx) == FC_OK &&
             fc_mul_ctx(ctx, w->t, w->c, w->out, N) == FC_OK && (g = fc_graph_end_ctx(ctx)) != NULL &&
             replay(ctx, g, w);
    fc_graph_free(g);
    if (fc_graph_is_capturing_ctx(ctx)) (void)fc_graph_abort_ctx(ctx);
    host_reference(w->ha, w->hb, w->want);
    return ok && ct_first_mismatch(w->got, w->want, N) == (size_t)-1;
}

#define CHECK_INVALIDATED(what)                                                                              \
    CHECK_MSG(fc_last_error_code() == FC_ERR_CAPTURE_INVALIDATED &&                                          \
                  ct_contains_any(fc_last_error(), "CAPTURE_INVALIDATED|invalidated"),                      \
              "%s: code %d \"%s\", want FC_ERR_CAPTURE_INVALIDATED", what, fc_last_error_code(), fc_last_error())

static void own_stream_synchronised_while_recording(fc_cuda_ctx *ctx)
{
    static bufs w;
    fc_graph *g = NULL;
    void *stream = NULL;
    int rc;
    CHECK(bufs_make(ctx, &w, 0x5EED));
    CHECK_RC(make_current(ctx), 0);

    /* A recording that captures the stream: the sync is refused by the
     * driver and invalidates the capture. */
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_CAPTURE));
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_NOTNULL(stream = fc_ctx_stream(ctx));
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    rc = drv.stream_synchronize(stream);
    CHECK_MSG(rc != 0, "cuStreamSynchronize of the capturing stream returned 0");
    fc_clear_last_error();
    g = fc_graph_end_ctx(ctx);
    CHECK_MSG(g == NULL, "the invalidated recording ended into a graph");
    CHECK_INVALIDATED("end after the stream's sync");
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_MSG(record_and_replay_right(ctx, &w), "captured recording after the invalidated one");

    /* A recording that builds: outside a section the stream runs eagerly,
     * so the sync is fine and the recording goes on. */
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_BUILD));
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    CHECK_RC(drv.stream_synchronize(fc_ctx_stream(ctx)), 0);
    CHECK(fc_graph_is_capturing_ctx(ctx) == 1);
    CHECK_OK(fc_graph_abort_ctx(ctx));

    /* Inside a foreign section the stream captures: the sync invalidates
     * the section, whose end fails and spoils the recording. */
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, w.a, w.b, w.t, N));
    CHECK_OK(fc_graph_foreign_begin_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &stream));
    rc = drv.stream_synchronize(stream);
    CHECK_MSG(rc != 0, "cuStreamSynchronize of a section's stream returned 0");
    CHECK_RC(fc_graph_foreign_end_ctx(ctx), FC_ERR_CAPTURE_INVALIDATED);
    CHECK_INVALIDATED("section end after the stream's sync");
    fc_clear_last_error();
    g = fc_graph_end_ctx(ctx);
    CHECK_MSG(g == NULL, "the spoiled recording ended into a graph");
    CHECK_INVALIDATED("end of the spoiled recording");
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_MSG(record_and_replay_right(ctx, &w), "built recording after the spoiled one");
done:
    fc_graph_free(g);
    if (fc_graph_is_capturing_ctx(ctx)) (void)fc_graph_abort_ctx(ctx);
    bufs_free(&w);
    (void)fc_ctx_set_recording_mode(ctx, FC_RECORDING_AUTO);
}

static const ct_case_def cases[] = {
    CT_CASE(build_with_foreign_section),
    CT_CASE(record_foreign_function),
    CT_CASE(auto_after_stream_captures),
    CT_CASE(build_runs_foreign_work_outside_sections),
    CT_CASE(update_reports_node_calls),
    CT_CASE(lanes_fork_join),
    CT_CASE(own_stream_synchronised_while_recording),
};

int main(int argc, char **argv)
{
    (void)argc;
    ct_init(argv[0]);
    if (load_driver() != 0) return 1;
    ct_run_cases(cases, CT_COUNT(cases));
    return ct_finish();
}
