/* test_breakable.c - breaks (eager host functions between captured
 * segments) and the capture pool, through the C API.
 *
 *   break_basic        segment z = x + y | break out2 = z * s, s uploaded in
 *                      the break from live->scale | segment w = out2 + y.
 *                      3 pieces; the break ran once at capture with the
 *                      capture live pointer and not capturing, once per
 *                      replay with the replay's live pointer, same user and
 *                      ctx; w == (x + y) * scale + y exactly; inside the
 *                      break at replay, z already holds x + y (the segment
 *                      before it finished). fc_graph_launch passes NULL.
 *   six_breaks         6 breaks: 13 pieces, replay == CPU chain.
 *   pass_through       outside a capture, fc_graph_break_ctx runs fn now
 *                      with live == NULL; a failing fn gives FC_ERR_CALLBACK.
 *   nested_break       a break calling fc_graph_break_ctx: one break recorded
 *                      (3 pieces), the inner fn sees no capture and the
 *                      outer's live pointer, at capture and at replay; a
 *                      begin inside the break is refused (CAPTURE_STATE).
 *   break_fails        break returning non-zero: FC_ERR_CALLBACK, end gives
 *                      NULL with a message, the context captures again.
 *   break_fails_replay a break that fails only at replay: launch_live gives
 *                      FC_ERR_CALLBACK; the next good replay is correct.
 *   begin_inside_capture  second begin refused, capture still fine.
 *   pool_addresses     buffers allocated while capturing come from the pool
 *                      (pool grows), keep their address and hold the replay's
 *                      results.
 *   pool_reuse         a capture that allocates and frees a 4 MiB scratch
 *                      grows the pool once; later same-size captures do not
 *                      grow it, and all their graphs replay correctly.
 */
#include "check.h"

typedef struct {
    float scale;
    int calls;
} live_t;

/* user of scale_break: out = in * s, where s is filled with
 * (live ? live->scale : 1) + add inside the break. */
typedef struct {
    fc_buffer *in, *s, *out;
    size_t n;
    float add;
    float *host_s; /* n floats of scratch */
    float *peek;   /* when set: `in` is downloaded here inside the break */
    int calls;
    void *last_live;
    fc_cuda_ctx *last_ctx;
    int capturing_seen;
    int err; /* first failing call inside the break (line) */
} scale_user;

static float break_factor(const live_t *l, float add)
{
    volatile float f = (l ? l->scale : 1.0f) + add;
    return f;
}

static int scale_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    scale_user *u = (scale_user *)user;
    live_t *l = (live_t *)live;
    u->calls++;
    u->last_live = live;
    u->last_ctx = ctx;
    u->capturing_seen = fc_graph_is_capturing_ctx(ctx);
    if (l) l->calls++;
    const float f = break_factor(l, u->add);
    for (size_t i = 0; i < u->n; i++) u->host_s[i] = f;
    if (fc_buffer_upload(u->s, u->host_s, u->n * sizeof(float)) != FC_OK) {
        if (!u->err) u->err = __LINE__;
        return 11;
    }
    if (u->peek && fc_buffer_download(u->in, u->peek, u->n * sizeof(float)) != FC_OK) {
        if (!u->err) u->err = __LINE__;
        return 12;
    }
    if (fc_mul_ctx(ctx, u->in, u->s, u->out, u->n) != FC_OK) {
        if (!u->err) u->err = __LINE__;
        return 13;
    }
    return 0;
}

static int alloc_n(fc_cuda_ctx *ctx, size_t n, fc_buffer **bufs, int count)
{
    for (int i = 0; i < count; i++) {
        bufs[i] = fc_buffer_alloc_ctx(ctx, n * sizeof(float));
        if (!bufs[i]) return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */

static void break_basic(fc_cuda_ctx *ctx)
{
    const size_t n = 4096, bytes = n * sizeof(float);
    enum { X, Y, Z, S, OUT2, W, NB };
    fc_buffer *b[NB] = {0};
    float *hx = NULL, *hy = NULL, *hs = NULL, *peek = NULL, *got = NULL, *want = NULL, *wz = NULL;
    fc_graph *g = NULL;
    live_t cap_live = {2.0f, 0};
    scale_user u;
    static const float scales[] = {5.0f, 0.5f, -3.0f};

    memset(&u, 0, sizeof u);
    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(hs = ct_floats(n));
    CHECK_NOTNULL(peek = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    CHECK_NOTNULL(wz = ct_floats(n));
    CHECK(alloc_n(ctx, n, b, NB));
    u.in = b[Z];
    u.s = b[S];
    u.out = b[OUT2];
    u.n = n;
    u.host_s = hs;
    u.peek = peek;

    CHECK_OK(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &cap_live));
    CHECK(fc_graph_is_capturing_ctx(ctx) == 1);
    CHECK_OK(fc_add_ctx(ctx, b[X], b[Y], b[Z], n));
    CHECK_OK(fc_graph_break_ctx(ctx, scale_break, &u));
    CHECK(fc_graph_is_capturing_ctx(ctx) == 1);
    CHECK_OK(fc_add_ctx(ctx, b[OUT2], b[Y], b[W], n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);

    CHECK_MSG(u.err == 0, "a call inside the break failed at capture (line %d)", u.err);
    CHECK_MSG(u.calls == 1, "break ran %d times during capture, want 1", u.calls);
    CHECK_MSG(cap_live.calls == 1, "capture live pointer used %d times, want 1", cap_live.calls);
    CHECK_MSG(u.last_live == &cap_live, "break got live %p at capture, want the capture live %p", u.last_live,
              (void *)&cap_live);
    CHECK_MSG(u.capturing_seen == 0, "fc_graph_is_capturing_ctx was 1 inside the break");
    CHECK_MSG(u.last_ctx == ctx, "break got ctx %p, want %p", (void *)u.last_ctx, (void *)ctx);
    CHECK_MSG(fc_graph_segment_count(g) == 3, "segment count %d, want 3", fc_graph_segment_count(g));

    for (int t = 0; t < 3; t++) {
        live_t live = {scales[t], 0};
        ct_seed_fill2((uint32_t)(200 + t), hx, hy, n);
        CHECK_OK(fc_buffer_upload(b[X], hx, bytes));
        CHECK_OK(fc_buffer_upload(b[Y], hy, bytes));
        ct_fill_poison(got, n);
        CHECK_OK(fc_buffer_upload(b[W], got, bytes));
        CHECK_OK(fc_buffer_upload(b[Z], got, bytes));
        CHECK_OK(fc_buffer_upload(b[OUT2], got, bytes));
        ct_fill_poison(peek, n);

        CHECK_OK(fc_graph_launch_live(g, &live));
        CHECK_OK(fc_sync_ctx(ctx));
        CHECK_OK(fc_buffer_download(b[W], got, bytes));
        for (size_t i = 0; i < n; i++) {
            volatile float z = hx[i] + hy[i];
            volatile float o = z * live.scale;
            wz[i] = z;
            want[i] = o + hy[i];
        }
        CHECK_MSG(u.err == 0, "a call inside the break failed at replay %d (line %d)", t, u.err);
        CHECK_FLOATS(peek, wz, n, "z seen inside the break at replay (segment before it not finished?)");
        CHECK_FLOATS(got, want, n, "w = (x + y) * scale + y");
        CHECK_MSG(u.calls == 2 + t, "break calls %d after replay %d, want %d", u.calls, t, 2 + t);
        CHECK_MSG(live.calls == 1, "replay live pointer used %d times, want 1", live.calls);
        CHECK_MSG(u.last_live == &live, "break got live %p at replay, want %p", u.last_live, (void *)&live);
        CHECK_MSG(u.capturing_seen == 0, "fc_graph_is_capturing_ctx was 1 inside the break at replay");
        CHECK_MSG(u.last_ctx == ctx, "break got another ctx at replay");
    }
    CHECK(cap_live.calls == 1);

    /* fc_graph_launch(g) == fc_graph_launch_live(g, NULL): factor 1. */
    ct_fill_random(hx, n);
    CHECK_OK(fc_buffer_upload(b[X], hx, bytes));
    CHECK_OK(fc_graph_launch(g));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(b[W], got, bytes));
    for (size_t i = 0; i < n; i++) {
        volatile float z = hx[i] + hy[i];
        volatile float o = z * 1.0f;
        want[i] = o + hy[i];
    }
    CHECK_FLOATS(got, want, n, "w after fc_graph_launch (live NULL)");
    CHECK_MSG(u.last_live == NULL, "fc_graph_launch gave the break live %p, want NULL", u.last_live);
    CHECK(u.calls == 5);

done:
    fc_graph_free(g);
    ct_free_buffers(b, NB);
    CT_FREE(hx, hy, hs, peek, got, want, wz);
}

/* ------------------------------------------------------------------------ */

#define NBRK 6

static void six_breaks(fc_cuda_ctx *ctx)
{
    const size_t n = 3000, bytes = n * sizeof(float);
    fc_buffer *x = NULL, *y = NULL, *c[NBRK + 1] = {0}, *d[NBRK + 1] = {0}, *s[NBRK + 1] = {0};
    float *hx = NULL, *hy = NULL, *hs[NBRK + 1] = {0}, *got = NULL, *want = NULL;
    scale_user u[NBRK + 1];
    fc_graph *g = NULL;
    live_t cap_live = {3.0f, 0};
    static const float scales[] = {1.5f, -2.0f, 0.25f};

    memset(u, 0, sizeof u);
    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    CHECK_NOTNULL(x = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(y = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK(alloc_n(ctx, n, c, NBRK + 1));
    CHECK(alloc_n(ctx, n, d + 1, NBRK));
    CHECK(alloc_n(ctx, n, s + 1, NBRK));
    for (int k = 1; k <= NBRK; k++) {
        CHECK_NOTNULL(hs[k] = ct_floats(n));
        u[k].in = c[k - 1];
        u[k].s = s[k];
        u[k].out = d[k];
        u[k].n = n;
        u[k].add = (float)k;
        u[k].host_s = hs[k];
    }

    CHECK_OK(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &cap_live));
    CHECK_OK(fc_add_ctx(ctx, x, y, c[0], n));
    for (int k = 1; k <= NBRK; k++) {
        CHECK_OK(fc_graph_break_ctx(ctx, scale_break, &u[k]));
        CHECK_OK(fc_add_ctx(ctx, d[k], y, c[k], n));
    }
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(fc_graph_segment_count(g) == 2 * NBRK + 1, "segment count %d, want %d", fc_graph_segment_count(g),
              2 * NBRK + 1);
    CHECK_MSG(cap_live.calls == NBRK, "capture live used %d times, want %d", cap_live.calls, NBRK);
    for (int k = 1; k <= NBRK; k++) {
        CHECK_MSG(u[k].calls == 1 && u[k].last_live == &cap_live && u[k].err == 0,
                  "break %d at capture: calls %d, live %p, err line %d", k, u[k].calls, u[k].last_live, u[k].err);
    }

    for (int t = 0; t < 3; t++) {
        live_t live = {scales[t], 0};
        ct_seed_fill2((uint32_t)(300 + t), hx, hy, n);
        CHECK_OK(fc_buffer_upload(x, hx, bytes));
        CHECK_OK(fc_buffer_upload(y, hy, bytes));
        ct_fill_poison(got, n);
        CHECK_OK(fc_buffer_upload(c[NBRK], got, bytes));
        CHECK_OK(fc_graph_launch_live(g, &live));
        CHECK_OK(fc_sync_ctx(ctx));
        CHECK_OK(fc_buffer_download(c[NBRK], got, bytes));
        for (size_t i = 0; i < n; i++) {
            volatile float v = hx[i] + hy[i];
            for (int k = 1; k <= NBRK; k++) {
                v = v * break_factor(&live, (float)k);
                v = v + hy[i];
            }
            want[i] = v;
        }
        CHECK_FLOATS(got, want, n, "output of the 6-break chain");
        CHECK_MSG(live.calls == NBRK, "replay live used %d times, want %d", live.calls, NBRK);
        for (int k = 1; k <= NBRK; k++) {
            CHECK_MSG(u[k].calls == 2 + t && u[k].last_live == &live && u[k].err == 0,
                      "break %d at replay %d: calls %d, live %p, err line %d", k, t, u[k].calls, u[k].last_live,
                      u[k].err);
        }
    }

done:
    fc_graph_free(g);
    CT_FREE_BUFFERS(x, y);
    ct_free_buffers(c, NBRK + 1);
    ct_free_buffers(d, NBRK + 1);
    ct_free_buffers(s, NBRK + 1);
    for (int k = 0; k <= NBRK; k++) free(hs[k]);
    CT_FREE(hx, hy, got, want);
}

/* ------------------------------------------------------------------------ */

static int fail_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)live;
    (*(int *)user)++;
    return 7;
}

static void pass_through(fc_cuda_ctx *ctx)
{
    const size_t n = 1000, bytes = n * sizeof(float);
    enum { Z, S, OUT, NB };
    fc_buffer *b[NB] = {0};
    float *hz = NULL, *hs = NULL, *got = NULL;
    scale_user u;
    int fails = 0;

    memset(&u, 0, sizeof u);
    CHECK_NOTNULL(hz = ct_floats(n));
    CHECK_NOTNULL(hs = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK(alloc_n(ctx, n, b, NB));
    ct_seed(400);
    ct_fill_random(hz, n);
    CHECK_OK(fc_buffer_upload(b[Z], hz, bytes));
    ct_fill_poison(got, n);
    CHECK_OK(fc_buffer_upload(b[OUT], got, bytes));
    u.in = b[Z];
    u.s = b[S];
    u.out = b[OUT];
    u.n = n;
    u.add = 0.0f;
    u.host_s = hs;
    u.last_live = &u; /* must become NULL */

    CHECK_OK(fc_graph_break_ctx(ctx, scale_break, &u));
    CHECK_MSG(u.calls == 1, "pass-through break ran %d times, want 1", u.calls);
    CHECK_MSG(u.last_live == NULL, "pass-through break got live %p, want NULL", u.last_live);
    CHECK(u.last_ctx == ctx);
    CHECK(u.err == 0);
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(b[OUT], got, bytes));
    CHECK_FLOATS(got, hz, n, "out = z * 1 from the pass-through break");

    int rc = fc_graph_break_ctx(ctx, fail_break, &fails);
    CHECK_MSG(rc == FC_ERR_CALLBACK, "failing pass-through break: rc %d, want FC_ERR_CALLBACK", rc);
    CHECK(fails == 1);
    CHECK(fc_last_error_code() == FC_ERR_CALLBACK);
    CHECK(fc_last_error()[0] != 0);
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);

done:
    ct_free_buffers(b, NB);
    CT_FREE(hz, hs, got);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    scale_user inner;
    int outer_calls;
    int outer_capturing;
    int nested_rc;
    int try_begin;
    int begin_rc;
    void *outer_live;
} nest_user;

static int outer_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    nest_user *u = (nest_user *)user;
    u->outer_calls++;
    u->outer_live = live;
    u->outer_capturing = fc_graph_is_capturing_ctx(ctx);
    u->nested_rc = fc_graph_break_ctx(ctx, scale_break, &u->inner);
    if (u->try_begin) {
        u->begin_rc = fc_graph_begin_ctx(ctx);
        if (u->begin_rc == FC_OK) (void)fc_graph_abort_ctx(ctx); /* undo a wrongly accepted begin */
    }
    return u->nested_rc;
}

static void nested_break(fc_cuda_ctx *ctx)
{
    const size_t n = 2048, bytes = n * sizeof(float);
    enum { X, Y, Z, S, OUT2, W, NB };
    fc_buffer *b[NB] = {0};
    float *hx = NULL, *hy = NULL, *hs = NULL, *got = NULL, *want = NULL;
    fc_graph *g = NULL;
    live_t cap_live = {2.0f, 0};
    nest_user u;

    memset(&u, 0, sizeof u);
    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(hs = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    CHECK(alloc_n(ctx, n, b, NB));
    u.inner.in = b[Z];
    u.inner.s = b[S];
    u.inner.out = b[OUT2];
    u.inner.n = n;
    u.inner.host_s = hs;
    u.try_begin = 1;
    u.begin_rc = -12345;

    CHECK_OK(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &cap_live));
    CHECK_OK(fc_add_ctx(ctx, b[X], b[Y], b[Z], n));
    CHECK_OK(fc_graph_break_ctx(ctx, outer_break, &u));
    CHECK_OK(fc_add_ctx(ctx, b[OUT2], b[Y], b[W], n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));

    CHECK_MSG(fc_graph_segment_count(g) == 3, "segment count %d, want 3 (one break)", fc_graph_segment_count(g));
    CHECK_MSG(u.nested_rc == FC_OK, "nested fc_graph_break_ctx returned %d", u.nested_rc);
    CHECK_MSG(u.outer_calls == 1 && u.inner.calls == 1, "at capture: outer ran %d, inner %d times (want 1, 1)",
              u.outer_calls, u.inner.calls);
    CHECK_MSG(u.outer_live == &cap_live, "outer got live %p at capture", u.outer_live);
    CHECK_MSG(u.inner.last_live == &cap_live, "inner got live %p at capture, want the outer's %p",
              u.inner.last_live, (void *)&cap_live);
    CHECK_MSG(u.inner.capturing_seen == 0, "inner saw fc_graph_is_capturing_ctx == 1");
    CHECK_MSG(u.outer_capturing == 0, "outer saw fc_graph_is_capturing_ctx == 1");
    CHECK_MSG(u.begin_rc == FC_ERR_CAPTURE_STATE, "fc_graph_begin_ctx inside a break at capture returned %d, want %d",
              u.begin_rc, FC_ERR_CAPTURE_STATE);
    CHECK(u.inner.err == 0);

    u.try_begin = 0; /* at replay no capture is open: a begin would succeed */
    for (int t = 0; t < 2; t++) {
        live_t live = {t ? -0.75f : 4.0f, 0};
        ct_seed_fill2((uint32_t)(500 + t), hx, hy, n);
        CHECK_OK(fc_buffer_upload(b[X], hx, bytes));
        CHECK_OK(fc_buffer_upload(b[Y], hy, bytes));
        CHECK_OK(fc_graph_launch_live(g, &live));
        CHECK_OK(fc_sync_ctx(ctx));
        CHECK_OK(fc_buffer_download(b[W], got, bytes));
        for (size_t i = 0; i < n; i++) {
            volatile float z = hx[i] + hy[i];
            volatile float o = z * live.scale;
            want[i] = o + hy[i];
        }
        CHECK_FLOATS(got, want, n, "w with a nested break");
        CHECK_MSG(u.outer_calls == 2 + t && u.inner.calls == 2 + t, "replay %d: outer ran %d, inner %d times", t,
                  u.outer_calls, u.inner.calls);
        CHECK_MSG(u.inner.last_live == &live, "inner got live %p at replay, want %p", u.inner.last_live,
                  (void *)&live);
        CHECK_MSG(u.inner.capturing_seen == 0, "inner saw a capture at replay");
        CHECK(u.nested_rc == FC_OK);
        CHECK(live.calls == 1);
    }

done:
    fc_graph_free(g);
    ct_free_buffers(b, NB);
    CT_FREE(hx, hy, hs, got, want);
}

/* ------------------------------------------------------------------------ */

/* Poisons w, replays g and checks w == (x + y) * y for x = 1.5, y = 2: 7. */
static int check_seven(fc_cuda_ctx *ctx, fc_graph *g, fc_buffer *w, size_t n)
{
    float before[512];
    ct_fill_poison(before, n);
    return ct_replay_gives(ctx, g, w, before, n, 7.0f);
}

static void break_fails(fc_cuda_ctx *ctx)
{
    const size_t n = 512;
    enum { X, Y, Z, W, NB };
    fc_buffer *b[NB] = {0};
    float h[512];
    fc_graph *g = NULL;
    int fails = 0;

    CHECK(alloc_n(ctx, n, b, NB));
    ct_fill_value(h, n, 1.5f);
    CHECK_OK(fc_buffer_upload(b[X], h, sizeof h));
    ct_fill_value(h, n, 2.0f);
    CHECK_OK(fc_buffer_upload(b[Y], h, sizeof h));

    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, b[X], b[Y], b[Z], n));
    int rc = fc_graph_break_ctx(ctx, fail_break, &fails);
    CHECK_MSG(rc == FC_ERR_CALLBACK, "failing break returned %d, want FC_ERR_CALLBACK", rc);
    CHECK(fails == 1);
    CHECK(fc_last_error_code() == FC_ERR_CALLBACK);
    CHECK(fc_last_error()[0] != 0);
    g = fc_graph_end_ctx(ctx);
    CHECK_MSG(g == NULL, "fc_graph_end_ctx returned a graph after a failed break");
    CHECK_MSG(fc_last_error_code() != FC_OK && fc_last_error()[0] != 0, "end after a failed break: code %d",
              fc_last_error_code());
    printf("  (end after a failed break: code %d, \"%s\")\n", fc_last_error_code(), fc_last_error());
    CHECK(fc_graph_is_capturing_ctx(ctx) == 0);
    CHECK_OK(fc_sync_ctx(ctx));

    /* the context can capture again */
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, b[X], b[Y], b[Z], n));
    CHECK_OK(fc_mul_ctx(ctx, b[Z], b[Y], b[W], n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(check_seven(ctx, g, b[W], n), "capture after a failed break does not replay correctly");
    CHECK(fails == 1);

done:
    fc_graph_free(g);
    ct_free_buffers(b, NB);
}

/* Fails when live says so (at replay only). */
typedef struct {
    int rc;
    int calls;
} fail_live;

static int maybe_fail(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)user;
    fail_live *l = (fail_live *)live;
    if (!l) return 0;
    l->calls++;
    return l->rc;
}

static void break_fails_replay(fc_cuda_ctx *ctx)
{
    const size_t n = 512;
    enum { X, Y, Z, W, NB };
    fc_buffer *b[NB] = {0};
    float h[512];
    fc_graph *g = NULL;
    fail_live cap = {0, 0}, bad = {5, 0}, good = {0, 0};

    CHECK(alloc_n(ctx, n, b, NB));
    ct_fill_value(h, n, 1.5f);
    CHECK_OK(fc_buffer_upload(b[X], h, sizeof h));
    ct_fill_value(h, n, 2.0f);
    CHECK_OK(fc_buffer_upload(b[Y], h, sizeof h));
    CHECK_OK(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &cap));
    CHECK_OK(fc_add_ctx(ctx, b[X], b[Y], b[Z], n));
    CHECK_OK(fc_graph_break_ctx(ctx, maybe_fail, NULL));
    CHECK_OK(fc_mul_ctx(ctx, b[Z], b[Y], b[W], n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(cap.calls == 1);
    CHECK(fc_graph_segment_count(g) == 3);

    int rc = fc_graph_launch_live(g, &bad);
    CHECK_MSG(rc == FC_ERR_CALLBACK, "replay with a failing break returned %d, want FC_ERR_CALLBACK", rc);
    CHECK(bad.calls == 1);
    CHECK(fc_last_error()[0] != 0);
    CHECK_OK(fc_sync_ctx(ctx));
    /* a good replay afterwards is complete */
    ct_fill_poison(h, n);
    CHECK_OK(fc_buffer_upload(b[W], h, sizeof h));
    CHECK_OK(fc_graph_launch_live(g, &good));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK(good.calls == 1);
    {
        float want[512];
        CHECK_OK(fc_buffer_download(b[W], h, sizeof h));
        ct_fill_value(want, n, 7.0f);
        CHECK_FLOATS(h, want, n, "w after a good replay following a failed one");
    }

done:
    fc_graph_free(g);
    ct_free_buffers(b, NB);
}

static void begin_inside_capture(fc_cuda_ctx *ctx)
{
    const size_t n = 512;
    enum { X, Y, Z, W, NB };
    fc_buffer *b[NB] = {0};
    float h[512];
    fc_graph *g = NULL;
    live_t l = {1.0f, 0};

    CHECK(alloc_n(ctx, n, b, NB));
    ct_fill_value(h, n, 1.5f);
    CHECK_OK(fc_buffer_upload(b[X], h, sizeof h));
    ct_fill_value(h, n, 2.0f);
    CHECK_OK(fc_buffer_upload(b[Y], h, sizeof h));
    CHECK_OK(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &l));
    CHECK_OK(fc_add_ctx(ctx, b[X], b[Y], b[Z], n));
    CHECK_RC(fc_graph_begin_ctx(ctx), FC_ERR_CAPTURE_STATE);
    CHECK_RC(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_RELAXED, NULL), FC_ERR_CAPTURE_STATE);
    CHECK(fc_last_error()[0] != 0);
    CHECK_OK(fc_mul_ctx(ctx, b[Z], b[Y], b[W], n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(check_seven(ctx, g, b[W], n));

done:
    fc_graph_free(g);
    ct_free_buffers(b, NB);
}

/* ------------------------------------------------------------------------ */

static void pool_addresses(fc_cuda_ctx *ctx)
{
    const size_t n = 4096, bytes = n * sizeof(float);
    fc_buffer *x = NULL, *y = NULL, *t = NULL, *o = NULL;
    float *hx = NULL, *hy = NULL, *got = NULL, *want = NULL;
    fc_graph *g = NULL;
    uint64_t tptr = 0, optr = 0;

    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    CHECK_NOTNULL(x = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(y = fc_buffer_alloc_ctx(ctx, bytes));
    const size_t p0 = fc_ctx_pool_bytes(ctx);

    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_NOTNULL(t = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_OK(fc_add_ctx(ctx, x, y, t, n));
    CHECK_NOTNULL(o = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_OK(fc_mul_ctx(ctx, t, y, o, n));
    CHECK(fc_graph_is_capturing_ctx(ctx) == 1);
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    const size_t p1 = fc_ctx_pool_bytes(ctx);
    printf("  (pool bytes: %zu before, %zu after the first capture)\n", p0, p1);
    CHECK_MSG(p1 >= p0 + 2 * bytes, "pool grew from %zu to %zu bytes; two %zu-byte buffers were allocated", p0, p1,
              bytes);
    CHECK(fc_buffer_size(t) == bytes && fc_buffer_size(o) == bytes);
    tptr = fc_buffer_device_ptr(t);
    optr = fc_buffer_device_ptr(o);
    CHECK(tptr != 0 && optr != 0 && tptr != optr);

    for (int r = 0; r < 3; r++) {
        ct_seed_fill2((uint32_t)(600 + r), hx, hy, n);
        CHECK_OK(fc_buffer_upload(x, hx, bytes));
        CHECK_OK(fc_buffer_upload(y, hy, bytes));
        CHECK_OK(fc_graph_launch(g));
        CHECK_OK(fc_sync_ctx(ctx));
        CHECK(fc_buffer_device_ptr(t) == tptr && fc_buffer_device_ptr(o) == optr);
        for (size_t i = 0; i < n; i++) {
            volatile float s = hx[i] + hy[i];
            want[i] = s;
        }
        CHECK_OK(fc_buffer_download(t, got, bytes));
        CHECK_FLOATS(got, want, n, "pool buffer t = x + y after replay");
        for (size_t i = 0; i < n; i++) {
            volatile float p = want[i] * hy[i];
            want[i] = p;
        }
        CHECK_OK(fc_buffer_download(o, got, bytes));
        CHECK_FLOATS(got, want, n, "pool buffer o = t * y after replay");
    }
    CHECK_MSG(fc_ctx_pool_bytes(ctx) == p1, "pool changed during replays: %zu -> %zu", p1, fc_ctx_pool_bytes(ctx));

done:
    fc_graph_free(g);
    CT_FREE_BUFFERS(t, o, x, y);
    CT_FREE(hx, hy, got, want);
}

/* Captures out = (x + y) * (use_x ? x : y) through a pool scratch buffer
 * freed inside the capture. */
static fc_graph *capture_with_scratch(fc_cuda_ctx *ctx, fc_buffer *x, fc_buffer *y, fc_buffer *out, size_t n,
                                      int use_x)
{
    if (fc_graph_begin_ctx(ctx) != FC_OK) return NULL;
    fc_buffer *t = fc_buffer_alloc_ctx(ctx, n * sizeof(float));
    if (!t || fc_add_ctx(ctx, x, y, t, n) != FC_OK || fc_mul_ctx(ctx, t, use_x ? x : y, out, n) != FC_OK) {
        fc_buffer_free(t);
        fc_graph_abort_ctx(ctx);
        return NULL;
    }
    fc_buffer_free(t); /* back to the pool; the graph still uses the address */
    return fc_graph_end_ctx(ctx);
}

static void pool_reuse(fc_cuda_ctx *ctx)
{
    const size_t n = 1u << 20, bytes = n * sizeof(float); /* 4 MiB scratch */
    fc_buffer *x = NULL, *y = NULL, *oa = NULL, *ob = NULL, *oc = NULL;
    float *hx = NULL, *hy = NULL, *got = NULL, *want = NULL;
    fc_graph *ga = NULL, *gb = NULL, *gc = NULL;

    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    CHECK_NOTNULL(x = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(y = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(oa = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(ob = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(oc = fc_buffer_alloc_ctx(ctx, bytes));

    const size_t p0 = fc_ctx_pool_bytes(ctx);
    CHECK_NOTNULL(ga = capture_with_scratch(ctx, x, y, oa, n, 0));
    const size_t pa = fc_ctx_pool_bytes(ctx);
    CHECK_NOTNULL(gb = capture_with_scratch(ctx, x, y, ob, n, 1));
    const size_t pb = fc_ctx_pool_bytes(ctx);
    CHECK_NOTNULL(gc = capture_with_scratch(ctx, x, y, oc, n, 0));
    const size_t pc = fc_ctx_pool_bytes(ctx);
    printf("  (pool bytes: %zu, then %zu, %zu, %zu after three same-size captures)\n", p0, pa, pb, pc);
    CHECK_MSG(pa >= p0 + bytes, "first capture: pool %zu -> %zu, expected growth of >= %zu", p0, pa, bytes);
    CHECK_MSG(pb == pa, "second same-size capture grew the pool: %zu -> %zu", pa, pb);
    CHECK_MSG(pc == pa, "third same-size capture grew the pool: %zu -> %zu", pa, pc);

    for (int r = 0; r < 2; r++) {
        ct_seed_fill2((uint32_t)(700 + r), hx, hy, n);
        CHECK_OK(fc_buffer_upload(x, hx, bytes));
        CHECK_OK(fc_buffer_upload(y, hy, bytes));
        /* the three graphs share the scratch memory; one stream orders them */
        if (r == 0) {
            CHECK_OK(fc_graph_launch(ga));
            CHECK_OK(fc_graph_launch(gb));
            CHECK_OK(fc_graph_launch(gc));
        } else {
            CHECK_OK(fc_graph_launch(gc));
            CHECK_OK(fc_graph_launch(gb));
            CHECK_OK(fc_graph_launch(ga));
        }
        CHECK_OK(fc_sync_ctx(ctx));
        for (size_t i = 0; i < n; i++) {
            volatile float s = hx[i] + hy[i];
            volatile float p = s * hy[i];
            want[i] = p;
        }
        CHECK_OK(fc_buffer_download(oa, got, bytes));
        CHECK_FLOATS(got, want, n, "graph A: (x + y) * y");
        CHECK_OK(fc_buffer_download(oc, got, bytes));
        CHECK_FLOATS(got, want, n, "graph C: (x + y) * y");
        for (size_t i = 0; i < n; i++) {
            volatile float s = hx[i] + hy[i];
            volatile float p = s * hx[i];
            want[i] = p;
        }
        CHECK_OK(fc_buffer_download(ob, got, bytes));
        CHECK_FLOATS(got, want, n, "graph B: (x + y) * x");
    }

done:
    CT_FREE_GRAPHS(ga, gb, gc);
    CT_FREE_BUFFERS(x, y, oa, ob, oc);
    CT_FREE(hx, hy, got, want);
}

static const ct_case_def cases[] = {
    CT_CASE(break_basic),
    CT_CASE(six_breaks),
    CT_CASE(pass_through),
    CT_CASE(nested_break),
    CT_CASE(break_fails),
    CT_CASE(break_fails_replay),
    CT_CASE(begin_inside_capture),
    CT_CASE(pool_addresses),
    CT_CASE(pool_reuse),
};

int main(int argc, char **argv)
{
    return ct_main(argc, argv, cases, CT_COUNT(cases));
}
