/* test_break_latch.c - replays of one graph with a break from several
 * threads at once leave no mark on the context (issue 17, "no latches").
 *
 *   concurrent_break_replays  a graph z = x + y | break (out = z * s, s
 *                      uploaded in it) | w = out + y, launched by 4 pthreads
 *                      at once, 5 rounds. In every round all 4 threads are
 *                      inside the break function together (a barrier), then
 *                      leave it in a staggered order (thread 0 first): the
 *                      interleaving that left a per-context "in a break"
 *                      flag set for good. Inside its break each thread gets
 *                      FC_ERR_CAPTURE_STATE for fc_graph_begin_ctx, and a
 *                      nested fc_graph_break_ctx receives that thread's own
 *                      live pointer; meanwhile the main thread (in no break)
 *                      begins and ends a capture. After each round: w is
 *                      right, fc_graph_begin_ctx ... fc_graph_end_ctx
 *                      records a new graph that replays right, and a graph
 *                      cache run on a new key captures (FC_CACHE_CAPTURED)
 *                      and computes right.
 */
/* check.h first: it sets _POSIX_C_SOURCE before any system header. */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define N 1024
#define THREADS 4
#define ROUNDS 5

typedef struct {
    int index;
} live_t;

typedef struct {
    fc_buffer *x, *y, *z, *s, *out, *w;
    float host_s[THREADS][N];
    atomic_int calls;
    atomic_int gating;
    atomic_int refused_inside;  /* begins refused inside a replay break */
    atomic_int begin_accepted;  /* begins accepted inside a break (bad) */
    atomic_int nested_live_bad; /* nested breaks that saw another live */
    atomic_int failed_line;     /* first failing call inside the break */
    pthread_barrier_t inside, main_done;
} rig_t;

static rig_t R;

static void note_fail(int line)
{
    int zero = 0;
    atomic_compare_exchange_strong(&R.failed_line, &zero, line);
}

static int nested_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    *(void **)user = live;
    return 0;
}

static int mul_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)user;
    live_t *l = (live_t *)live;
    atomic_fetch_add(&R.calls, 1);
    const int replaying = atomic_load(&R.gating);
    if (replaying) {
        int rc = fc_graph_begin_ctx(ctx);
        if (rc == FC_ERR_CAPTURE_STATE) {
            atomic_fetch_add(&R.refused_inside, 1);
        } else {
            atomic_fetch_add(&R.begin_accepted, 1);
            if (rc == FC_OK) (void)fc_graph_abort_ctx(ctx);
        }
        pthread_barrier_wait(&R.inside);
        pthread_barrier_wait(&R.main_done);
        /* Every thread has published its live pointer by now. */
        void *seen = NULL;
        if (fc_graph_break_ctx(ctx, nested_break, &seen) != FC_OK) note_fail(__LINE__);
        if (seen != live) atomic_fetch_add(&R.nested_live_bad, 1);
        struct timespec ts = {0, 2000000L * (l ? l->index : 0)};
        nanosleep(&ts, NULL);
    }
    /* s = 3, uploaded from this thread's own host row (a blocking upload). */
    float *row = R.host_s[l ? l->index : 0];
    for (size_t i = 0; i < N; i++) row[i] = 3.0f;
    if (fc_buffer_upload(R.s, row, N * sizeof(float)) != FC_OK) {
        note_fail(__LINE__);
        return 1;
    }
    if (fc_mul_ctx(ctx, R.z, R.s, R.out, N) != FC_OK) {
        note_fail(__LINE__);
        return 2;
    }
    return 0;
}

typedef struct {
    fc_graph *g;
    live_t live;
    int rc;
    char err[256];
} replay_arg;

static void *replay_thread(void *p)
{
    replay_arg *a = (replay_arg *)p;
    a->rc = fc_graph_launch_live(a->g, &a->live);
    if (a->rc != FC_OK) fc_last_error_copy(a->err, sizeof a->err);
    return NULL;
}

typedef struct {
    fc_buffer *x, *y, *out;
} add_user;

static int record_add(fc_cuda_ctx *ctx, void *user)
{
    add_user *u = (add_user *)user;
    return fc_add_ctx(ctx, u->x, u->y, u->out, N);
}

static void concurrent_break_replays(fc_cuda_ctx *ctx)
{
    float *hx = ct_floats(N), *hy = ct_floats(N), *got = ct_floats(N), *want_w = ct_floats(N),
          *want_sum = ct_floats(N);
    fc_graph *g = NULL, *g2 = NULL, *empty = NULL;
    fc_buffer *sum = NULL, *cached = NULL;
    fc_graph_cache *cache = NULL;
    int barriers = 0;
    memset(&R, 0, sizeof R);
    CHECK_NOTNULL(hx);
    CHECK_NOTNULL(hy);
    CHECK_NOTNULL(got);
    CHECK_NOTNULL(want_w);
    CHECK_NOTNULL(want_sum);
    ct_seed_fill2(17, hx, hy, N);
    for (size_t i = 0; i < N; i++) {
        volatile float z = hx[i] + hy[i];
        volatile float o = z * 3.0f;
        want_w[i] = o + hy[i];
        want_sum[i] = z;
    }
    CHECK_NOTNULL(R.x = ct_upload_new(ctx, hx, N));
    CHECK_NOTNULL(R.y = ct_upload_new(ctx, hy, N));
    CHECK_NOTNULL(R.z = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    CHECK_NOTNULL(R.s = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    CHECK_NOTNULL(R.out = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    CHECK_NOTNULL(R.w = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    CHECK_NOTNULL(sum = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    CHECK_NOTNULL(cached = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    CHECK(pthread_barrier_init(&R.inside, NULL, THREADS + 1) == 0);
    CHECK(pthread_barrier_init(&R.main_done, NULL, THREADS + 1) == 0);
    barriers = 1;
    /* Warm-up of the built-ins outside the capture. */
    CHECK_OK(fc_add_ctx(ctx, R.x, R.y, R.z, N));
    CHECK_OK(fc_mul_ctx(ctx, R.z, R.y, R.out, N));
    CHECK_OK(fc_sync_ctx(ctx));

    live_t capture_live = {0};
    CHECK_OK(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &capture_live));
    CHECK_OK(fc_add_ctx(ctx, R.x, R.y, R.z, N));
    CHECK_OK(fc_graph_break_ctx(ctx, mul_break, NULL));
    CHECK_OK(fc_add_ctx(ctx, R.out, R.y, R.w, N));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(fc_graph_segment_count(g) == 3, "segment count %d, want 3", fc_graph_segment_count(g));
    CHECK_MSG(atomic_load(&R.calls) == 1, "the break ran %d times at capture, want 1", atomic_load(&R.calls));
    atomic_store(&R.gating, 1);

    fc_graph_cache_config cfg;
    fc_graph_cache_config_default(&cfg);
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, &cfg));

    for (int round = 0; round < ROUNDS; round++) {
        pthread_t th[THREADS];
        replay_arg args[THREADS];
        int started = 0;
        for (int t = 0; t < THREADS; t++) {
            args[t].g = g;
            args[t].live.index = t;
            args[t].rc = -1;
            args[t].err[0] = 0;
            if (pthread_create(&th[t], NULL, replay_thread, &args[t]) != 0) break;
            started++;
        }
        if (started < THREADS) {
            /* Cannot meet the barriers: unblock nothing, fail loudly. */
            CT_FAILF("round %d: only %d of %d threads started", round, started, THREADS);
            exit(1);
        }
        pthread_barrier_wait(&R.inside);
        /* All four are inside their break: this thread is not, and may
         * begin and end a capture meanwhile. */
        int begin_rc = fc_graph_begin_ctx(ctx);
        char begin_err[256] = "";
        if (begin_rc != FC_OK) fc_last_error_copy(begin_err, sizeof begin_err);
        empty = begin_rc == FC_OK ? fc_graph_end_ctx(ctx) : NULL;
        pthread_barrier_wait(&R.main_done);
        for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
        CHECK_MSG(begin_rc == FC_OK, "round %d: begin on the main thread while other threads' breaks ran: %d (%s)",
                  round, begin_rc, begin_err);
        CHECK_MSG(empty != NULL, "round %d: end of the empty capture: %s", round, ct_err());
        fc_graph_free(empty);
        empty = NULL;
        for (int t = 0; t < THREADS; t++)
            CHECK_MSG(args[t].rc == FC_OK, "round %d: launch on thread %d returned %d (%s)", round, t, args[t].rc,
                      args[t].err);
        CHECK_MSG(atomic_load(&R.failed_line) == 0, "round %d: a call inside the break failed (line %d)", round,
                  atomic_load(&R.failed_line));
        CHECK_OK(fc_sync_ctx(ctx));
        ct_fill_poison(got, N);
        CHECK_OK(fc_buffer_download(R.w, got, N * sizeof(float)));
        CHECK_FLOATS(got, want_w, N, "w after the concurrent launches");

        /* No latch: a new capture on the same context. */
        CHECK_MSG(fc_graph_is_capturing_ctx(ctx) == 0, "round %d: the context reports capturing", round);
        int rc = fc_graph_begin_ctx(ctx);
        CHECK_MSG(rc == FC_OK, "round %d: fc_graph_begin_ctx after the concurrent launches returned %d (%s)", round,
                  rc, ct_err());
        CHECK_OK(fc_add_ctx(ctx, R.x, R.y, sum, N));
        CHECK_NOTNULL(g2 = fc_graph_end_ctx(ctx));
        CHECK_OK(fc_graph_launch(g2));
        CHECK_OK(fc_sync_ctx(ctx));
        ct_fill_poison(got, N);
        CHECK_OK(fc_buffer_download(sum, got, N * sizeof(float)));
        CHECK_FLOATS(got, want_sum, N, "the new capture's output");
        fc_graph_free(g2);
        g2 = NULL;

        /* And the graph cache captures (a new key each round). */
        add_user u = {R.x, R.y, cached};
        int outcome = -1;
        rc = fc_graph_cache_run(cache, (uint64_t)round, record_add, &u, NULL, &outcome);
        CHECK_MSG(rc == FC_OK && outcome == FC_CACHE_CAPTURED,
                  "round %d: fc_graph_cache_run returned %d, outcome %d (want FC_CACHE_CAPTURED %d): %s", round, rc,
                  outcome, FC_CACHE_CAPTURED, ct_err());
        CHECK_OK(fc_sync_ctx(ctx));
        ct_fill_poison(got, N);
        CHECK_OK(fc_buffer_download(cached, got, N * sizeof(float)));
        CHECK_FLOATS(got, want_sum, N, "the cache's output");
    }
    CHECK_MSG(atomic_load(&R.calls) == 1 + THREADS * ROUNDS, "the break ran %d times, want %d",
              atomic_load(&R.calls), 1 + THREADS * ROUNDS);
    CHECK_MSG(atomic_load(&R.refused_inside) == THREADS * ROUNDS && atomic_load(&R.begin_accepted) == 0,
              "begins inside a replay's break: %d refused, %d not refused (want %d, 0)",
              atomic_load(&R.refused_inside), atomic_load(&R.begin_accepted), THREADS * ROUNDS);
    CHECK_MSG(atomic_load(&R.nested_live_bad) == 0, "%d nested breaks received another thread's live pointer",
              atomic_load(&R.nested_live_bad));
done:
    fc_graph_free(empty);
    fc_graph_free(g2);
    fc_graph_free(g);
    fc_graph_cache_free(cache);
    fc_buffer *bufs[] = {R.x, R.y, R.z, R.s, R.out, R.w, sum, cached};
    ct_free_buffers(bufs, CT_COUNT(bufs));
    if (barriers) {
        pthread_barrier_destroy(&R.inside);
        pthread_barrier_destroy(&R.main_done);
    }
    void *host[] = {hx, hy, got, want_w, want_sum};
    ct_free_list(host, CT_COUNT(host));
}

int main(int argc, char **argv)
{
    static const ct_case_def cases[] = {
        CT_CASE(concurrent_break_replays),
    };
    return ct_main(argc, argv, cases, CT_COUNT(cases));
}
