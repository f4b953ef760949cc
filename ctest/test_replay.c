/* test_replay.c - capture with fc_graph_begin_ctx / fc_graph_end_ctx and
 * replay with fc_graph_launch.
 *
 *   chain_replay      13 x (z = x + y; x = z * y), the seed's layer body,
 *                     captured once; 5 trials of fresh inputs, launch, sync,
 *                     download; x and z must equal both the CPU chain (each
 *                     op one IEEE f32 op: exact) and the same chain run
 *                     eagerly on the GPU in other buffers. Segment count 1.
 *   capture_modes     the chain captured in GLOBAL, THREAD_LOCAL and RELAXED
 *                     mode (fc_graph_begin_ctx_mode 0, 1, 2), replayed, exact;
 *                     fc_graph_is_capturing_ctx is 1 inside and 0 outside.
 *   many_launches     acc = acc + one captured once, launched 1000 times:
 *                     acc == 1000 exactly (launches run in order, each once).
 *   free_in_flight    a 13-add graph over 1M floats launched 20 times, freed
 *                     right after the last launch, then fc_sync_ctx: OK and
 *                     the result (acc == 260) is complete.
 *   recapture         several graphs captured one after another on one
 *                     context, each replayed (begin after end works).
 */
#include "check.h"

#define LAYERS 13

/* CPU reference of the chain: z = x + y; x = z * y, LAYERS times. */
static void cpu_chain(float *x, float *z, const float *y, size_t n, int layers)
{
    for (size_t i = 0; i < n; i++) {
        volatile float xi = x[i], zi = z[i];
        for (int l = 0; l < layers; l++) {
            zi = xi + y[i];
            xi = zi * y[i];
        }
        x[i] = xi;
        z[i] = zi;
    }
}

static int gpu_chain(fc_cuda_ctx *ctx, fc_buffer *x, fc_buffer *y, fc_buffer *z, size_t n, int layers)
{
    for (int l = 0; l < layers; l++) {
        int rc = fc_add_ctx(ctx, x, y, z, n);
        if (rc != FC_OK) return rc;
        rc = fc_mul_ctx(ctx, z, y, x, n);
        if (rc != FC_OK) return rc;
    }
    return FC_OK;
}

/* Captures the chain in `mode` (-1: fc_graph_begin_ctx) and checks 5 replays
 * (3 when not `full`) against the CPU and, when `full`, the eager GPU chain. */
static void chain_case(fc_cuda_ctx *ctx, int mode, size_t n, int full)
{
    float *hx = NULL, *hy = NULL, *hz = NULL, *wx = NULL, *wz = NULL, *gx = NULL, *gz = NULL;
    fc_buffer *x = NULL, *y = NULL, *z = NULL, *x2 = NULL, *y2 = NULL, *z2 = NULL;
    fc_graph *g = NULL;
    const size_t bytes = n * sizeof(float);

    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(hz = ct_floats(n));
    CHECK_NOTNULL(wx = ct_floats(n));
    CHECK_NOTNULL(wz = ct_floats(n));
    CHECK_NOTNULL(gx = ct_floats(n));
    CHECK_NOTNULL(gz = ct_floats(n));
    CHECK_NOTNULL(x = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(y = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(z = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(x2 = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(y2 = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(z2 = fc_buffer_alloc_ctx(ctx, bytes));

    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);
    if (mode < 0)
        CHECK_OK(fc_graph_begin_ctx(ctx));
    else
        CHECK_OK(fc_graph_begin_ctx_mode(ctx, mode));
    CHECK(fc_graph_is_capturing_ctx(ctx) == 1);
    CHECK_OK(gpu_chain(ctx, x, y, z, n, LAYERS));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);
    CHECK_MSG(fc_graph_segment_count(g) == 1, "segment count %d, want 1", fc_graph_segment_count(g));

    const int trials = full ? 5 : 3;
    for (int t = 0; t < trials; t++) {
        ct_seed_fill2((uint32_t)(1000 + 17 * t + 3 * (mode + 1)), hx, hy, n);
        ct_fill_poison(hz, n);
        CHECK_OK(fc_buffer_upload(x, hx, bytes));
        CHECK_OK(fc_buffer_upload(y, hy, bytes));
        CHECK_OK(fc_buffer_upload(z, hz, bytes));
        if (full) {
            CHECK_OK(fc_buffer_upload(x2, hx, bytes));
            CHECK_OK(fc_buffer_upload(y2, hy, bytes));
            CHECK_OK(fc_buffer_upload(z2, hz, bytes));
        }
        memcpy(wx, hx, bytes);
        memcpy(wz, hz, bytes);
        cpu_chain(wx, wz, hy, n, LAYERS);

        CHECK_OK(fc_graph_launch(g));
        if (full) CHECK_OK(gpu_chain(ctx, x2, y2, z2, n, LAYERS));
        CHECK_OK(fc_sync_ctx(ctx));
        CHECK_OK(fc_buffer_download(x, gx, bytes));
        CHECK_OK(fc_buffer_download(z, gz, bytes));
        CHECK_FLOATS(gx, wx, n, "replayed x vs CPU chain");
        CHECK_FLOATS(gz, wz, n, "replayed z vs CPU chain");
        if (full) {
            CHECK_OK(fc_buffer_download(x2, gx, bytes));
            CHECK_OK(fc_buffer_download(z2, gz, bytes));
            CHECK_FLOATS(gx, wx, n, "eager GPU x vs CPU chain");
            CHECK_FLOATS(gz, wz, n, "eager GPU z vs CPU chain");
        }
    }

done:
    fc_graph_free(g);
    CT_FREE_BUFFERS(x, y, z, x2, y2, z2);
    CT_FREE(hx, hy, hz, wx, wz, gx, gz);
}

static void chain_replay(fc_cuda_ctx *ctx)
{
    chain_case(ctx, -1, 4096, 1);
}

static void chain_replay_1m(fc_cuda_ctx *ctx)
{
    chain_case(ctx, -1, (1u << 20) + 3, 0);
}

static void capture_mode_global(fc_cuda_ctx *ctx)
{
    chain_case(ctx, FC_CAPTURE_MODE_GLOBAL, 1000, 0);
}

static void capture_mode_thread_local(fc_cuda_ctx *ctx)
{
    chain_case(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, 1000, 0);
}

static void capture_mode_relaxed(fc_cuda_ctx *ctx)
{
    chain_case(ctx, FC_CAPTURE_MODE_RELAXED, 1000, 0);
}

/* Captures `adds` x (acc = acc + one) over n floats. */
static fc_graph *capture_acc(fc_cuda_ctx *ctx, fc_buffer *acc, fc_buffer *one, size_t n, int adds)
{
    if (fc_graph_begin_ctx(ctx) != FC_OK) return NULL;
    for (int i = 0; i < adds; i++) {
        if (fc_add_ctx(ctx, acc, one, acc, n) != FC_OK) {
            fc_graph_abort_ctx(ctx);
            return NULL;
        }
    }
    return fc_graph_end_ctx(ctx);
}

static void many_launches(fc_cuda_ctx *ctx)
{
    const size_t n = 1024;
    const int launches = 1000;
    float *h = NULL, *want = NULL;
    fc_buffer *acc = NULL, *one = NULL;
    fc_graph *g = NULL;

    CHECK_NOTNULL(h = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    ct_fill_value(h, n, 1.0f);
    CHECK_NOTNULL(one = ct_upload_new(ctx, h, n));
    ct_fill_value(h, n, 0.0f);
    CHECK_NOTNULL(acc = ct_upload_new(ctx, h, n));
    CHECK_NOTNULL(g = capture_acc(ctx, acc, one, n, 1));
    CHECK(fc_graph_segment_count(g) == 1);
    /* Capturing must not have run the work. */
    CHECK_OK(fc_buffer_download(acc, h, n * sizeof(float)));
    ct_fill_value(want, n, 0.0f);
    CHECK_FLOATS(h, want, n, "acc after capture (capture must not execute)");

    for (int i = 0; i < launches; i++) CHECK_OK(fc_graph_launch(g));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(acc, h, n * sizeof(float)));
    ct_fill_value(want, n, (float)launches);
    CHECK_FLOATS(h, want, n, "acc after 1000 launches");

    /* fc_graph_launch_live(g, NULL) is the same thing. */
    CHECK_OK(fc_graph_launch_live(g, NULL));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(acc, h, n * sizeof(float)));
    ct_fill_value(want, n, (float)(launches + 1));
    CHECK_FLOATS(h, want, n, "acc after one more launch_live");

done:
    fc_graph_free(g);
    CT_FREE_BUFFERS(acc, one);
    CT_FREE(h, want);
}

static void free_in_flight(fc_cuda_ctx *ctx)
{
    const size_t n = 1u << 20;
    const int launches = 20, adds = 13;
    float *h = NULL, *want = NULL;
    fc_buffer *acc = NULL, *one = NULL;
    fc_graph *g = NULL;

    CHECK_NOTNULL(h = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    ct_fill_value(h, n, 1.0f);
    CHECK_NOTNULL(one = ct_upload_new(ctx, h, n));
    ct_fill_value(h, n, 0.0f);
    CHECK_NOTNULL(acc = ct_upload_new(ctx, h, n));
    CHECK_NOTNULL(g = capture_acc(ctx, acc, one, n, adds));
    for (int i = 0; i < launches; i++) CHECK_OK(fc_graph_launch(g));
    fc_graph_free(g); /* work still queued / running on the device */
    g = NULL;
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(acc, h, n * sizeof(float)));
    ct_fill_value(want, n, (float)(launches * adds));
    CHECK_FLOATS(h, want, n, "acc after freeing the graph in flight");

    /* The context keeps working afterwards. */
    CHECK_NOTNULL(g = capture_acc(ctx, acc, one, n, 1));
    CHECK_OK(fc_graph_launch(g));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(acc, h, n * sizeof(float)));
    ct_fill_value(want, n, (float)(launches * adds + 1));
    CHECK_FLOATS(h, want, n, "acc after a new capture");

done:
    fc_graph_free(g);
    CT_FREE_BUFFERS(acc, one);
    CT_FREE(h, want);
}

/* Several graphs on one context, captured back to back, replayed in an
 * interleaved order: each replays its own work. */
static void recapture(fc_cuda_ctx *ctx)
{
    const size_t n = 777;
    float *h = NULL, *want = NULL;
    fc_buffer *acc = NULL, *one = NULL;
    fc_graph *g1 = NULL, *g2 = NULL, *g3 = NULL;

    CHECK_NOTNULL(h = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    ct_fill_value(h, n, 1.0f);
    CHECK_NOTNULL(one = ct_upload_new(ctx, h, n));
    ct_fill_value(h, n, 0.0f);
    CHECK_NOTNULL(acc = ct_upload_new(ctx, h, n));
    CHECK_NOTNULL(g1 = capture_acc(ctx, acc, one, n, 1));
    CHECK_NOTNULL(g2 = capture_acc(ctx, acc, one, n, 2));
    CHECK_NOTNULL(g3 = capture_acc(ctx, acc, one, n, 4));
    CHECK_OK(fc_graph_launch(g3)); /* 4 */
    CHECK_OK(fc_graph_launch(g1)); /* 5 */
    CHECK_OK(fc_graph_launch(g2)); /* 7 */
    fc_graph_free(g2);
    g2 = NULL;
    CHECK_OK(fc_graph_launch(g3)); /* 11 */
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(acc, h, n * sizeof(float)));
    ct_fill_value(want, n, 11.0f);
    CHECK_FLOATS(h, want, n, "acc after g3 g1 g2 g3");

done:
    CT_FREE_GRAPHS(g1, g2, g3);
    CT_FREE_BUFFERS(acc, one);
    CT_FREE(h, want);
}

static const ct_case_def cases[] = {
    CT_CASE(chain_replay),
    CT_CASE(chain_replay_1m),
    CT_CASE(capture_mode_global),
    CT_CASE(capture_mode_thread_local),
    CT_CASE(capture_mode_relaxed),
    CT_CASE(many_launches),
    CT_CASE(free_in_flight),
    CT_CASE(recapture),
};

int main(int argc, char **argv)
{
    return ct_main(argc, argv, cases, CT_COUNT(cases));
}
