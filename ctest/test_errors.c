/* test_errors.c - every bad input is answered with the right status code
 * and a non-empty message that names the problem.
 *
 * Because fc_last_error() is not cleared by successes, each expected
 * failure is preceded by a "poison" failure with a different status code
 * (on a spare context), so a call that fails without recording its own
 * error cannot pass on a stale one. Messages are matched case-insensitively
 * against '|'-separated keywords.
 */
#include "check.h"
#include "expect.h"
#include "user_ptx.h"

#include <ctype.h>
#include <pthread.h>

static fc_cuda_ctx *g_spare; /* never captures: used to record poison errors */

/* Records a failure whose code differs from `expected`. */
static void poison_error(int expected)
{
    if (expected == FC_ERR_CAPTURE_STATE)
        (void)fc_graph_launch(NULL); /* FC_ERR_INVALID_ARGUMENT */
    else
        (void)fc_graph_abort_ctx(g_spare); /* FC_ERR_CAPTURE_STATE: none open */
}

/* Checks the recorded error: code, and a non-empty message with a keyword. */
#define CHECK_LAST_ERROR(what, code, keywords)                                                 \
    do {                                                                                       \
        int ct_code_ = fc_last_error_code();                                                   \
        const char *ct_msg_ = fc_last_error();                                                 \
        CHECK_MSG(ct_code_ == (code), "%s: fc_last_error_code() = %d, expected %s (%d)", what, \
                  ct_code_, #code, (int)(code));                                               \
        CHECK_MSG(ct_msg_ && ct_msg_[0], "%s: empty error message", what);                     \
        CHECK_MSG(ct_contains_any(ct_msg_, keywords), "%s: message \"%s\" mentions none of \"%s\"", \
                  what, ct_msg_, keywords);                                                    \
    } while (0)

/* EXPECT_ERR(call, code, keywords): an int-returning call fails with code. */
#define EXPECT_ERR(call, code, keywords)                                                       \
    do {                                                                                       \
        poison_error(code);                                                                    \
        int ct_rc2_ = (call);                                                                  \
        CHECK_MSG(ct_rc2_ == (code), "%s returned %d, expected %s (%d)", #call, ct_rc2_, #code, \
                  (int)(code));                                                                \
        CHECK_LAST_ERROR(#call, code, keywords);                                               \
    } while (0)

/* EXPECT_NULL(call, code, keywords): a constructor returns NULL with code. */
#define EXPECT_NULL(call, code, keywords)                                                      \
    do {                                                                                       \
        poison_error(code);                                                                    \
        const void *ct_p_ = (const void *)(call);                                              \
        CHECK_MSG(ct_p_ == NULL, "%s returned a handle, expected NULL", #call);                \
        CHECK_LAST_ERROR(#call, code, keywords);                                               \
    } while (0)

#define KW_NULL "null"
#define KW_CAPTURE "captur"

static int dummy_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)live;
    if (user) (*(int *)user)++;
    return 0;
}

static void library_info(fc_cuda_ctx *ctx)
{
    const char *v = fc_version();
    CHECK(v != NULL);
    CHECK_MSG(v[0] != 0, "fc_version() is empty");
    CHECK(fc_cuda_device_count() >= 1);
    CHECK(fc_cuda_ctx_device_id(ctx) == 0);
    CHECK(fc_cuda_ctx_device_id(NULL) == -1);
    CHECK(fc_graph_segment_count(NULL) == -1);
    CHECK(fc_kernel_param_count(NULL) == -1);
    CHECK(fc_buffer_size(NULL) == 0);
    CHECK(fc_buffer_device_ptr(NULL) == 0);
    CHECK(fc_graph_is_capturing_ctx(NULL) == 0);
    CHECK(fc_ctx_pool_bytes(NULL) == 0);
done:;
}

static void bad_device(fc_cuda_ctx *ctx)
{
    (void)ctx;
    poison_error(FC_ERR_INVALID_ARGUMENT);
    fc_cuda_ctx *c = fc_cuda_init_device(-1);
    CHECK_MSG(c == NULL, "fc_cuda_init_device(-1) returned a context");
    CHECK_MSG(fc_last_error_code() != FC_OK && fc_last_error_code() != FC_ERR_CAPTURE_STATE,
              "fc_cuda_init_device(-1): code %d", fc_last_error_code());
    CHECK_MSG(ct_contains_any(fc_last_error(), "-1|device|negative"), "message \"%s\"", fc_last_error());

    poison_error(FC_ERR_INVALID_ARGUMENT);
    c = fc_cuda_init_device(9999);
    CHECK_MSG(c == NULL, "fc_cuda_init_device(9999) returned a context");
    CHECK_MSG(fc_last_error_code() != FC_OK && fc_last_error_code() != FC_ERR_CAPTURE_STATE,
              "fc_cuda_init_device(9999): code %d", fc_last_error_code());
    CHECK_MSG(ct_contains_any(fc_last_error(), "9999|device|ordinal"), "message \"%s\"", fc_last_error());
done:
    if (c) fc_cuda_ctx_free(c);
}

static void free_null_is_noop(fc_cuda_ctx *ctx)
{
    (void)ctx;
    fc_cuda_ctx_free(NULL);
    fc_buffer_free(NULL);
    fc_graph_free(NULL);
    fc_module_free(NULL);
    fc_kernel_free(NULL);
    CHECK(1);
done:;
}

/* NULL ctx / buffer / graph / module / kernel / host pointer everywhere. */
static void null_handles(fc_cuda_ctx *ctx)
{
    const size_t n = 16;
    float host[16] = {0};
    int counter = 0;
    fc_buffer *a = NULL, *b = NULL, *o = NULL;
    fc_module *m = NULL;
    fc_kernel *k = NULL;

    CHECK_NOTNULL(a = ct_upload_new(ctx, host, n));
    CHECK_NOTNULL(b = ct_upload_new(ctx, host, n));
    CHECK_NOTNULL(o = ct_upload_new(ctx, host, n));
    CHECK_NOTNULL(m = fc_module_load_ptx(ctx, USER_PTX));
    CHECK_NOTNULL(k = fc_module_get_kernel(m, "scale_f32"));

    EXPECT_ERR(fc_sync_ctx(NULL), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_NULL(fc_buffer_alloc_ctx(NULL, 16), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_buffer_upload(NULL, host, sizeof host), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_buffer_upload(a, NULL, sizeof host), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_buffer_download(NULL, host, sizeof host), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_buffer_download(a, NULL, sizeof host), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_buffer_fill_ctx(NULL, a, 0, 4, 0), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_buffer_fill_ctx(ctx, NULL, 0, 4, 0), FC_ERR_INVALID_ARGUMENT, KW_NULL);

    EXPECT_ERR(fc_add_ctx(NULL, a, b, o, n), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_add_ctx(ctx, NULL, b, o, n), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_add_ctx(ctx, a, NULL, o, n), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_add_ctx(ctx, a, b, NULL, n), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_mul_ctx(NULL, a, b, o, n), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_mul_ctx(ctx, NULL, b, o, n), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_mul_ctx(ctx, a, NULL, o, n), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_mul_ctx(ctx, a, b, NULL, n), FC_ERR_INVALID_ARGUMENT, KW_NULL);

    EXPECT_NULL(fc_module_load_ptx(NULL, USER_PTX), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_NULL(fc_module_load_ptx(ctx, NULL), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_NULL(fc_module_get_kernel(NULL, "scale_f32"), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_NULL(fc_module_get_kernel(m, NULL), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    {
        uint64_t p = fc_buffer_device_ptr(a);
        float s = 1.0f;
        uint32_t nn = (uint32_t)n;
        void *args[3] = {&p, &s, &nn};
        void *args_hole[3] = {&p, NULL, &nn};
        EXPECT_ERR(fc_kernel_launch_ctx(NULL, k, 1, 1, 1, 32, 1, 1, 0, args, 3), FC_ERR_INVALID_ARGUMENT, KW_NULL);
        EXPECT_ERR(fc_kernel_launch_ctx(ctx, NULL, 1, 1, 1, 32, 1, 1, 0, args, 3), FC_ERR_INVALID_ARGUMENT, KW_NULL);
        EXPECT_ERR(fc_kernel_launch_ctx(ctx, k, 1, 1, 1, 32, 1, 1, 0, NULL, 3), FC_ERR_INVALID_ARGUMENT, KW_NULL);
        EXPECT_ERR(fc_kernel_launch_ctx(ctx, k, 1, 1, 1, 32, 1, 1, 0, args_hole, 3), FC_ERR_INVALID_ARGUMENT,
                   KW_NULL);
    }

    EXPECT_ERR(fc_graph_begin_ctx(NULL), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_graph_begin_ctx_mode(NULL, FC_CAPTURE_MODE_THREAD_LOCAL), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_graph_begin_live_ctx(NULL, FC_CAPTURE_MODE_THREAD_LOCAL, &counter), FC_ERR_INVALID_ARGUMENT,
               KW_NULL);
    EXPECT_NULL(fc_graph_end_ctx(NULL), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_graph_abort_ctx(NULL), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_graph_break_ctx(NULL, dummy_break, &counter), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_graph_break_ctx(ctx, NULL, &counter), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    CHECK_MSG(counter == 0, "a break function ran %d times for a NULL ctx", counter);
    EXPECT_ERR(fc_graph_launch(NULL), FC_ERR_INVALID_ARGUMENT, KW_NULL);
    EXPECT_ERR(fc_graph_launch_live(NULL, &counter), FC_ERR_INVALID_ARGUMENT, KW_NULL);

    /* None of that disturbed the context. */
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);
    CHECK_OK(fc_sync_ctx(ctx));

done:
    fc_kernel_free(k);
    fc_module_free(m);
    CT_FREE_BUFFERS(a, b, o);
}

static void alloc_zero(fc_cuda_ctx *ctx)
{
    EXPECT_NULL(fc_buffer_alloc_ctx(ctx, 0), FC_ERR_INVALID_ARGUMENT, "0 bytes|zero|size|0");
done:;
}

/* n = 1025 floats need 4100 bytes: a 4096-byte operand is refused with
 * FC_ERR_BUFFER_TOO_SMALL and nothing is written. */
static void buffer_too_small(fc_cuda_ctx *ctx)
{
    float big_host[2048], small_host[1024], got[2048], sentinel_big[2048], sentinel_small[1024];
    fc_buffer *a_big = NULL, *b_big = NULL, *o_big = NULL, *a_small = NULL, *o_small = NULL;

    ct_seed(5);
    ct_fill_random(big_host, 2048);
    ct_fill_random(small_host, 1024);
    ct_fill_value(sentinel_big, 2048, 1234.5f);
    ct_fill_value(sentinel_small, 1024, -777.25f);
    CHECK_NOTNULL(a_big = ct_upload_new(ctx, big_host, 2048));
    CHECK_NOTNULL(b_big = ct_upload_new(ctx, big_host, 2048));
    CHECK_NOTNULL(a_small = ct_upload_new(ctx, small_host, 1024));
    CHECK_NOTNULL(o_big = ct_upload_new(ctx, sentinel_big, 2048));
    CHECK_NOTNULL(o_small = ct_upload_new(ctx, sentinel_small, 1024));
    CHECK(fc_buffer_size(o_small) == 4096);

    /* out too small */
    EXPECT_ERR(fc_add_ctx(ctx, a_big, b_big, o_small, 1025), FC_ERR_BUFFER_TOO_SMALL, "small|4096|4100");
    EXPECT_ERR(fc_mul_ctx(ctx, a_big, b_big, o_small, 1025), FC_ERR_BUFFER_TOO_SMALL, "small|4096|4100");
    /* an input too small: out (big) must not be written either */
    EXPECT_ERR(fc_add_ctx(ctx, a_small, b_big, o_big, 1025), FC_ERR_BUFFER_TOO_SMALL, "small|4096|4100");
    EXPECT_ERR(fc_mul_ctx(ctx, b_big, a_small, o_big, 1025), FC_ERR_BUFFER_TOO_SMALL, "small|4096|4100");
    EXPECT_ERR(fc_add_ctx(ctx, a_big, b_big, o_big, 2049), FC_ERR_BUFFER_TOO_SMALL, "small|8192|8196");
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(o_small, got, 4096));
    CHECK_FLOATS(got, sentinel_small, 1024, "small out after refused ops (must be untouched)");
    CHECK_OK(fc_buffer_download(o_big, got, 8192));
    CHECK_FLOATS(got, sentinel_big, 2048, "big out after refused ops (must be untouched)");

    /* Boundary: exactly 1024 floats fit in 4096 bytes. */
    CHECK_OK(fc_add_ctx(ctx, a_big, b_big, o_small, 1024));
    CHECK_OK(fc_sync_ctx(ctx));

    /* Copies larger than the buffer. */
    EXPECT_ERR(fc_buffer_upload(o_small, big_host, 4100), FC_ERR_BUFFER_TOO_SMALL, "small|4096|4100");
    EXPECT_ERR(fc_buffer_download(o_small, got, 4100), FC_ERR_BUFFER_TOO_SMALL, "small|4096|4100");

done:
    CT_FREE_BUFFERS(a_big, b_big, o_big, a_small, o_small);
}

/* fc_buffer_fill_ctx: in-range fills work, out-of-range ones are refused. */
static void fill_ranges(fc_cuda_ctx *ctx)
{
    float host[256], got[256], want[256];
    fc_buffer *buf = NULL;

    ct_fill_value(host, 256, 1.0f);
    CHECK_NOTNULL(buf = ct_upload_new(ctx, host, 256));
    /* zero floats [250, 256) (bytes 1000..1024) and [0, 2) */
    CHECK_OK(fc_buffer_fill_ctx(ctx, buf, 1000, 24, 0));
    CHECK_OK(fc_buffer_fill_ctx(ctx, buf, 0, 8, 0));
    CHECK_OK(fc_buffer_fill_ctx(ctx, buf, 1024, 0, 0xff)); /* empty range at the end */
    EXPECT_ERR(fc_buffer_fill_ctx(ctx, buf, 1000, 25, 0xff), FC_ERR_BUFFER_TOO_SMALL, "small|1024|1025");
    EXPECT_ERR(fc_buffer_fill_ctx(ctx, buf, 1025, 1, 0xff), FC_ERR_BUFFER_TOO_SMALL, "small|1024|1026");
    /* offset + len wraps around: refused, not written */
    poison_error(FC_ERR_INVALID_ARGUMENT);
    int rc = fc_buffer_fill_ctx(ctx, buf, (size_t)-8, 16, 0xff);
    CHECK_MSG(rc == FC_ERR_INVALID_ARGUMENT || rc == FC_ERR_BUFFER_TOO_SMALL, "wrapping fill range: rc %d", rc);
    CHECK_MSG(fc_last_error_code() == rc && fc_last_error()[0], "wrapping fill range: last error code %d",
              fc_last_error_code());
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(buf, got, sizeof got));
    ct_fill_value(want, 256, 1.0f);
    for (int i = 250; i < 256; i++) want[i] = 0.0f;
    want[0] = want[1] = 0.0f;
    CHECK_FLOATS(got, want, 256, "buffer after fills");
done:
    fc_buffer_free(buf);
}

static void wrong_device(fc_cuda_ctx *ctx)
{
    const size_t n = 256;
    float host[256], got[256], sentinel[256];
    fc_cuda_ctx *ctx1 = NULL;
    fc_buffer *a0 = NULL, *o0 = NULL, *a1 = NULL, *o1 = NULL;
    fc_module *m1 = NULL;
    fc_kernel *k1 = NULL;

    CHECK_NOTNULL(ctx1 = fc_cuda_init_device(1));
    CHECK(fc_cuda_ctx_device_id(ctx1) == 1);
    ct_seed(9);
    ct_fill_random(host, n);
    ct_fill_value(sentinel, n, 42.0f);
    CHECK_NOTNULL(a0 = ct_upload_new(ctx, host, n));
    CHECK_NOTNULL(o0 = ct_upload_new(ctx, sentinel, n));
    CHECK_NOTNULL(a1 = ct_upload_new(ctx1, host, n));
    CHECK_NOTNULL(o1 = ct_upload_new(ctx1, sentinel, n));

    EXPECT_ERR(fc_add_ctx(ctx, a1, a0, o0, n), FC_ERR_WRONG_DEVICE, "device");
    EXPECT_ERR(fc_add_ctx(ctx, a0, a1, o0, n), FC_ERR_WRONG_DEVICE, "device");
    EXPECT_ERR(fc_mul_ctx(ctx, a0, a0, o1, n), FC_ERR_WRONG_DEVICE, "device");
    EXPECT_ERR(fc_buffer_fill_ctx(ctx, o1, 0, 16, 0), FC_ERR_WRONG_DEVICE, "device");

    /* a kernel loaded on device 1 launched on device 0's context */
    CHECK_NOTNULL(m1 = fc_module_load_ptx(ctx1, USER_PTX));
    CHECK_NOTNULL(k1 = fc_module_get_kernel(m1, "scale_f32"));
    {
        uint64_t p = fc_buffer_device_ptr(o0);
        float s = 2.0f;
        uint32_t nn = (uint32_t)n;
        void *args[3] = {&p, &s, &nn};
        EXPECT_ERR(fc_kernel_launch_ctx(ctx, k1, 1, 1, 1, 256, 1, 1, 0, args, 3), FC_ERR_WRONG_DEVICE, "device");
    }

    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_sync_ctx(ctx1));
    CHECK_OK(fc_buffer_download(o0, got, sizeof got));
    CHECK_FLOATS(got, sentinel, n, "device-0 out after refused ops");
    CHECK_OK(fc_buffer_download(o1, got, sizeof got));
    CHECK_FLOATS(got, sentinel, n, "device-1 out after refused ops");

done:
    fc_kernel_free(k1);
    fc_module_free(m1);
    CT_FREE_BUFFERS(a0, o0, a1, o1);
    fc_cuda_ctx_free(ctx1);
}

/* Uploads x, y (n floats of 1.5 and 2.0), captures z = x + y; w = z * y
 * around `middle`, and checks the replayed w == 7.0. */
typedef struct {
    fc_buffer *x, *y, *z, *w;
    size_t n;
} xyzw;

static int xyzw_alloc(fc_cuda_ctx *ctx, xyzw *t, size_t n)
{
    float h[512];
    t->n = n;
    ct_fill_value(h, n, 1.5f);
    t->x = ct_upload_new(ctx, h, n);
    ct_fill_value(h, n, 2.0f);
    t->y = ct_upload_new(ctx, h, n);
    ct_fill_value(h, n, -1.0f);
    t->z = ct_upload_new(ctx, h, n);
    t->w = ct_upload_new(ctx, h, n);
    return t->x && t->y && t->z && t->w;
}

static void xyzw_free(xyzw *t)
{
    CT_FREE_BUFFERS(t->x, t->y, t->z, t->w);
}

/* Resets w to -1, replays g and checks w == (1.5 + 2) * 2 == 7 everywhere. */
static int xyzw_replay_ok(fc_cuda_ctx *ctx, fc_graph *g, xyzw *t)
{
    float before[512];
    ct_fill_value(before, t->n, -1.0f);
    return ct_replay_gives(ctx, g, t->w, before, t->n, 7.0f);
}

static void begin_twice(fc_cuda_ctx *ctx)
{
    xyzw t = {0};
    fc_graph *g = NULL;
    CHECK(xyzw_alloc(ctx, &t, 512));
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, t.x, t.y, t.z, t.n));
    EXPECT_ERR(fc_graph_begin_ctx(ctx), FC_ERR_CAPTURE_STATE, "already|open|" KW_CAPTURE);
    EXPECT_ERR(fc_graph_begin_ctx_mode(ctx, FC_CAPTURE_MODE_RELAXED), FC_ERR_CAPTURE_STATE,
               "already|open|" KW_CAPTURE);
    EXPECT_ERR(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_GLOBAL, &t), FC_ERR_CAPTURE_STATE,
               "already|open|" KW_CAPTURE);
    CHECK(fc_graph_is_capturing_ctx(ctx) == 1);
    CHECK_OK(fc_mul_ctx(ctx, t.z, t.y, t.w, t.n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(fc_graph_segment_count(g) == 1);
    CHECK_MSG(xyzw_replay_ok(ctx, g, &t), "the first capture does not replay correctly after refused begins");
done:
    fc_graph_free(g);
    xyzw_free(&t);
}

static void end_without_begin(fc_cuda_ctx *ctx)
{
    EXPECT_NULL(fc_graph_end_ctx(ctx), FC_ERR_CAPTURE_STATE, "no capture|not capturing|" KW_CAPTURE);
    EXPECT_ERR(fc_graph_abort_ctx(ctx), FC_ERR_CAPTURE_STATE, "no capture|not capturing|" KW_CAPTURE);
    CHECK_OK(fc_sync_ctx(ctx));
done:;
}

static void sync_during_capture(fc_cuda_ctx *ctx)
{
    xyzw t = {0};
    fc_graph *g = NULL;
    CHECK(xyzw_alloc(ctx, &t, 300));
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, t.x, t.y, t.z, t.n));
    EXPECT_ERR(fc_sync_ctx(ctx), FC_ERR_CAPTURE_STATE, KW_CAPTURE);
    CHECK(fc_graph_is_capturing_ctx(ctx) == 1);
    CHECK_OK(fc_mul_ctx(ctx, t.z, t.y, t.w, t.n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(xyzw_replay_ok(ctx, g, &t), "capture not usable after the refused sync");
done:
    fc_graph_free(g);
    xyzw_free(&t);
}

static void copies_during_capture(fc_cuda_ctx *ctx)
{
    xyzw t = {0};
    fc_graph *g = NULL;
    float h[300];
    ct_fill_value(h, 300, 5.0f);
    CHECK(xyzw_alloc(ctx, &t, 300));
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, t.x, t.y, t.z, t.n));
    EXPECT_ERR(fc_buffer_upload(t.x, h, sizeof h), FC_ERR_CAPTURE_STATE, KW_CAPTURE);
    EXPECT_ERR(fc_buffer_download(t.x, h, sizeof h), FC_ERR_CAPTURE_STATE, KW_CAPTURE);
    CHECK(fc_graph_is_capturing_ctx(ctx) == 1);
    CHECK_OK(fc_mul_ctx(ctx, t.z, t.y, t.w, t.n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(xyzw_replay_ok(ctx, g, &t), "capture not usable after the refused copies");
done:
    fc_graph_free(g);
    xyzw_free(&t);
}

static void bad_capture_mode(fc_cuda_ctx *ctx)
{
    int live = 0;
    fc_graph *g = NULL;
    xyzw t = {0};
    CHECK(xyzw_alloc(ctx, &t, 64));
    EXPECT_ERR(fc_graph_begin_ctx_mode(ctx, 7), FC_ERR_INVALID_ARGUMENT, "mode");
    EXPECT_ERR(fc_graph_begin_ctx_mode(ctx, 3), FC_ERR_INVALID_ARGUMENT, "mode");
    EXPECT_ERR(fc_graph_begin_ctx_mode(ctx, -1), FC_ERR_INVALID_ARGUMENT, "mode");
    EXPECT_ERR(fc_graph_begin_live_ctx(ctx, 7, &live), FC_ERR_INVALID_ARGUMENT, "mode");
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);
    CHECK_OK(fc_sync_ctx(ctx));
    /* a valid begin still works */
    CHECK_OK(fc_graph_begin_ctx_mode(ctx, FC_CAPTURE_MODE_THREAD_LOCAL));
    CHECK_OK(fc_add_ctx(ctx, t.x, t.y, t.z, t.n));
    CHECK_OK(fc_mul_ctx(ctx, t.z, t.y, t.w, t.n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(xyzw_replay_ok(ctx, g, &t));
done:
    fc_graph_free(g);
    xyzw_free(&t);
}

static void abort_capture(fc_cuda_ctx *ctx)
{
    xyzw t = {0};
    fc_graph *g = NULL;
    float got[128], want[128];
    CHECK(xyzw_alloc(ctx, &t, 128));
    EXPECT_ERR(fc_graph_abort_ctx(ctx), FC_ERR_CAPTURE_STATE, KW_CAPTURE);
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, t.x, t.y, t.z, t.n));
    CHECK_OK(fc_graph_abort_ctx(ctx));
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);
    EXPECT_ERR(fc_graph_abort_ctx(ctx), FC_ERR_CAPTURE_STATE, KW_CAPTURE);
    EXPECT_NULL(fc_graph_end_ctx(ctx), FC_ERR_CAPTURE_STATE, KW_CAPTURE);
    CHECK_OK(fc_sync_ctx(ctx));
    /* the aborted (recorded, never executed) add did not run */
    CHECK_OK(fc_buffer_download(t.z, got, sizeof got));
    ct_fill_value(want, 128, -1.0f);
    CHECK_FLOATS(got, want, 128, "z after an aborted capture");
    /* and the context captures again */
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, t.x, t.y, t.z, t.n));
    CHECK_OK(fc_mul_ctx(ctx, t.z, t.y, t.w, t.n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(xyzw_replay_ok(ctx, g, &t));
done:
    fc_graph_free(g);
    xyzw_free(&t);
}

static void module_errors(fc_cuda_ctx *ctx)
{
    static const char broken_body[] = ".version 7.0\n.target sm_35\n.address_size 64\n"
                                      ".visible .entry broken(.param .u32 n)\n{\n"
                                      "\tfrobnicate.f32 %f1, %f2;\n\tret;\n}\n";
    fc_module *m = NULL, *bad = NULL;
    fc_kernel *k = NULL, *none = NULL;
    float host[64];
    fc_buffer *buf = NULL;

    poison_error(FC_ERR_INVALID_ARGUMENT);
    bad = fc_module_load_ptx(ctx, "this is not PTX at all { ]");
    CHECK_MSG(bad == NULL, "garbage PTX loaded");
    CHECK_MSG(fc_last_error_code() == FC_ERR_INVALID_ARGUMENT || fc_last_error_code() == FC_ERR_CUDA,
              "garbage PTX: code %d", fc_last_error_code());
    CHECK_MSG(fc_last_error()[0] && fc_last_error_code() != FC_ERR_CAPTURE_STATE, "garbage PTX: no message");

    poison_error(FC_ERR_INVALID_ARGUMENT);
    bad = fc_module_load_ptx(ctx, broken_body);
    CHECK_MSG(bad == NULL, "PTX with an unknown instruction loaded");
    CHECK_MSG(fc_last_error_code() == FC_ERR_INVALID_ARGUMENT || fc_last_error_code() == FC_ERR_CUDA,
              "broken PTX: code %d", fc_last_error_code());
    CHECK_MSG(fc_last_error()[0] && fc_last_error_code() != FC_ERR_CAPTURE_STATE, "broken PTX: no message");
    printf("  (broken PTX message: %.300s)\n", fc_last_error());

    CHECK_NOTNULL(m = fc_module_load_ptx(ctx, USER_PTX));
    EXPECT_NULL(none = fc_module_get_kernel(m, "no_such_kernel"), FC_ERR_INVALID_ARGUMENT, "no_such_kernel");
    EXPECT_NULL(none = fc_module_get_kernel(m, "scale_f3"), FC_ERR_INVALID_ARGUMENT, "scale_f3");
    CHECK_NOTNULL(k = fc_module_get_kernel(m, "scale_f32"));
    CHECK(fc_kernel_param_count(k) == 3);

    ct_fill_value(host, 64, 3.0f);
    CHECK_NOTNULL(buf = ct_upload_new(ctx, host, 64));
    {
        uint64_t p = fc_buffer_device_ptr(buf);
        float s = 2.0f;
        uint32_t nn = 64;
        void *args[4] = {&p, &s, &nn, &nn};
        EXPECT_ERR(fc_kernel_launch_ctx(ctx, k, 1, 1, 1, 64, 1, 1, 0, args, 2), FC_ERR_INVALID_ARGUMENT,
                   "argument");
        EXPECT_ERR(fc_kernel_launch_ctx(ctx, k, 1, 1, 1, 64, 1, 1, 0, args, 4), FC_ERR_INVALID_ARGUMENT,
                   "argument");
        EXPECT_ERR(fc_kernel_launch_ctx(ctx, k, 1, 1, 1, 64, 1, 1, 0, NULL, 0), FC_ERR_INVALID_ARGUMENT,
                   "argument");
        /* zero launch dimensions are refused (by us or by the driver) */
        poison_error(FC_ERR_INVALID_ARGUMENT);
        int rc = fc_kernel_launch_ctx(ctx, k, 0, 1, 1, 64, 1, 1, 0, args, 3);
        CHECK_MSG(rc == FC_ERR_INVALID_ARGUMENT || rc == FC_ERR_CUDA, "zero grid: rc %d", rc);
        CHECK_MSG(fc_last_error_code() == rc, "zero grid: last code %d", fc_last_error_code());
        /* nothing ran: buf is still 3.0 */
        CHECK_OK(fc_sync_ctx(ctx));
        float got[64], want[64];
        CHECK_OK(fc_buffer_download(buf, got, sizeof got));
        ct_fill_value(want, 64, 3.0f);
        CHECK_FLOATS(got, want, 64, "buffer after refused launches");
        /* and the right call works */
        CHECK_OK(fc_kernel_launch_ctx(ctx, k, 1, 1, 1, 64, 1, 1, 0, args, 3));
        CHECK_OK(fc_sync_ctx(ctx));
        CHECK_OK(fc_buffer_download(buf, got, sizeof got));
        ct_fill_value(want, 64, 6.0f);
        CHECK_FLOATS(got, want, 64, "buffer after a correct launch");
    }
done:
    fc_buffer_free(buf);
    fc_kernel_free(none);
    fc_kernel_free(k);
    fc_module_free(m);
    fc_module_free(bad);
}

/* fc_last_error survives later successes; it is per thread. */
typedef struct {
    int code_before, code_after;
    char msg_before[256];
} thread_probe;

static void *probe_thread(void *arg)
{
    thread_probe *p = arg;
    p->code_before = fc_last_error_code();
    snprintf(p->msg_before, sizeof p->msg_before, "%s", fc_last_error());
    (void)fc_sync_ctx(NULL);
    p->code_after = fc_last_error_code();
    return NULL;
}

static void last_error_semantics(fc_cuda_ctx *ctx)
{
    thread_probe probe;
    pthread_t th;
    char saved[512];

    poison_error(FC_ERR_INVALID_ARGUMENT); /* CAPTURE_STATE on this thread */
    CHECK(fc_last_error_code() == FC_ERR_CAPTURE_STATE);
    snprintf(saved, sizeof saved, "%s", fc_last_error());
    CHECK(saved[0] != 0);
    /* successes do not clear it */
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK(fc_cuda_ctx_device_id(ctx) == 0);
    CHECK_MSG(fc_last_error_code() == FC_ERR_CAPTURE_STATE, "code %d after successes", fc_last_error_code());
    CHECK_MSG(strcmp(fc_last_error(), saved) == 0, "message changed by successes: \"%s\"", fc_last_error());

    /* another thread has its own (empty) error state */
    memset(&probe, 0, sizeof probe);
    CHECK(pthread_create(&th, NULL, probe_thread, &probe) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_MSG(probe.code_before == FC_OK, "fresh thread sees code %d", probe.code_before);
    CHECK_MSG(probe.msg_before[0] == 0, "fresh thread sees message \"%s\"", probe.msg_before);
    CHECK_MSG(probe.code_after == FC_ERR_INVALID_ARGUMENT, "thread's own failure: code %d", probe.code_after);
    /* and its failure did not touch ours */
    CHECK_MSG(fc_last_error_code() == FC_ERR_CAPTURE_STATE, "main thread code became %d", fc_last_error_code());
    CHECK_MSG(strcmp(fc_last_error(), saved) == 0, "main thread message became \"%s\"", fc_last_error());
done:;
}

static const ct_case_def cases[] = {
    CT_CASE(library_info),
    CT_CASE(bad_device),
    CT_CASE(free_null_is_noop),
    CT_CASE(null_handles),
    CT_CASE(alloc_zero),
    CT_CASE(buffer_too_small),
    CT_CASE(fill_ranges),
    CT_CASE_NEEDS(wrong_device, 2),
    CT_CASE(begin_twice),
    CT_CASE(end_without_begin),
    CT_CASE(sync_during_capture),
    CT_CASE(copies_during_capture),
    CT_CASE(bad_capture_mode),
    CT_CASE(abort_capture),
    CT_CASE(module_errors),
    CT_CASE(last_error_semantics),
};

int main(int argc, char **argv)
{
    (void)argc;
    ct_init(argv[0]);
    g_spare = fc_cuda_init_device(0);
    if (!g_spare) {
        printf("[FAIL] test_errors: could not open the spare context: %s\n", fc_last_error());
        return 1;
    }
    ct_run_cases(cases, CT_COUNT(cases));
    fc_cuda_ctx_free(g_spare);
    return ct_finish();
}
