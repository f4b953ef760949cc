/* test_cache.c - the keyed graph cache, token buckets and graph diagnostics
 * through the C API.
 *
 *   decode_loop        a bucketed decode loop: 2000 steps with random sizes
 *                      n in 1..512, bucket = fc_buckets_for(ladder(512), n),
 *                      run through the cache keyed by bucket; each step has
 *                      fresh inputs and a poisoned output, and all `bucket`
 *                      computed elements equal the CPU's (x + y) * y. First
 *                      use of a bucket is CAPTURED, later ones HIT; the hit
 *                      rate is printed; stats agree with the outcomes.
 *   warmup_then_hit    cfg.warmup: the first call runs record eagerly, then
 *                      captures (WARMED_UP); later calls are HITs; every
 *                      result is right.
 *   invalidate_updates_in_place  record reads an input chosen by `user`;
 *                      after changing it, a HIT still reads the old one;
 *                      fc_graph_cache_invalidate, then REFRESHED reads the
 *                      new one and stats.updates == 1 (cuGraphExecUpdate);
 *                      a refresh with one more kernel is a reinstantiation.
 *   eviction_small_cap max_entries 2 with 3 keys in LRU order (evictions
 *                      counted, evicted keys captured again), then max_bytes
 *                      below two entries whose captures keep a 2 KiB pool
 *                      buffer each (stats.bytes == 2048).
 *   fallback_and_recovery  a record function that fails under capture 3
 *                      times: EAGER_FAILED (results right, fc_last_error
 *                      names the failure, FC_OK returned), back-off after 2
 *                      failures (EAGER_BACKOFF, no capture tried), doubled
 *                      back-off after the third, then CAPTURED and HIT.
 *                      With backoff_ms 0 the next call tries again.
 *   breaks_with_live   record splits the work with fc_graph_break_ctx; the
 *                      break adds addend[live->which] and counts its runs:
 *                      results follow each call's live pointer, and the
 *                      break ran exactly once per call (not at capture),
 *                      with and without warm-up, across a refresh.
 *   reentry_refused    record calling fc_graph_cache_stats_get or
 *                      fc_graph_cache_run on its own cache gets
 *                      FC_ERR_CAPTURE_STATE, no deadlock.
 *   buckets_api        ladder and explicit lists, fc_buckets_for against
 *                      a linear search for every n, errors for 0 / above top.
 *   bad_arguments      bad configs, NULL record, NULL out, wrong-kind and
 *                      freed handles: clear codes, nothing changes.
 *   diagnostics        node counts per piece and in total, DOT files of a
 *                      graph with a break and of a cached graph.
 *   hit_cost           time of a cache HIT vs fc_graph_launch of the same
 *                      26-kernel graph (printed; loose bound).
 */
#include "check.h" /* first: it sets _POSIX_C_SOURCE */

#include <time.h>
#include <unistd.h>

#define N 512

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The decode step: out[0..n) = (in[0..n) + y) * y. */
typedef struct {
    fc_buffer *in, *y, *z, *out;
    size_t n;
    int runs;       /* record calls */
    int captured;   /* record calls while capturing */
    int fail_left;  /* > 0: fail (return 7) while capturing, and count down */
    int extra_muls; /* out = out * y, this many times more */
    fc_buffer *kept[8];
    int nkept; /* buffers allocated while capturing, kept alive */
} step_t;

static int record_step(fc_cuda_ctx *ctx, void *user)
{
    step_t *s = (step_t *)user;
    int capturing = fc_graph_is_capturing_ctx(ctx);
    s->runs++;
    s->captured += capturing;
    if (capturing && s->fail_left > 0) {
        s->fail_left--;
        return 7;
    }
    if (fc_add_ctx(ctx, s->in, s->y, s->z, s->n) != FC_OK) return 1;
    if (fc_mul_ctx(ctx, s->z, s->y, s->out, s->n) != FC_OK) return 2;
    for (int i = 0; i < s->extra_muls; i++)
        if (fc_mul_ctx(ctx, s->out, s->y, s->out, s->n) != FC_OK) return 3;
    return 0;
}

/* As record_step, but the intermediate is a buffer allocated while
 * capturing (from the capture pool) and kept alive: the entry's bytes. */
static int record_keeping(fc_cuda_ctx *ctx, void *user)
{
    step_t *s = (step_t *)user;
    fc_buffer *tmp = s->z;
    if (fc_graph_is_capturing_ctx(ctx)) {
        if (s->nkept >= 8) return 4;
        tmp = fc_buffer_alloc_ctx(ctx, s->n * sizeof(float));
        if (!tmp) return 5;
        s->kept[s->nkept++] = tmp;
    }
    if (fc_add_ctx(ctx, s->in, s->y, tmp, s->n) != FC_OK) return 1;
    if (fc_mul_ctx(ctx, tmp, s->y, s->out, s->n) != FC_OK) return 2;
    return 0;
}

/* Fresh random inputs in `in` (host copy in xs), output poisoned. */
static int fresh_inputs(fc_cuda_ctx *ctx, step_t *s, float *xs)
{
    ct_fill_random(xs, N);
    if (fc_buffer_upload(s->in, xs, N * sizeof(float)) != FC_OK) return 0;
    return fc_buffer_fill_ctx(ctx, s->out, 0, N * sizeof(float), 0xff) == FC_OK;
}

/* 1 when out[0..n) == ((xs + ys) * ys) * ys^extra. */
static int step_result_ok(fc_cuda_ctx *ctx, const step_t *s, const float *xs, const float *ys, size_t n,
                          int extra, float *got, float *want)
{
    if (fc_sync_ctx(ctx) != FC_OK) return 0;
    if (fc_buffer_download(s->out, got, N * sizeof(float)) != FC_OK) return 0;
    for (size_t i = 0; i < n; i++) {
        volatile float v = xs[i] + ys[i];
        v = v * ys[i];
        for (int k = 0; k < extra; k++) v = v * ys[i];
        want[i] = v;
    }
    size_t bad = ct_first_mismatch(got, want, n);
    if (bad != (size_t)-1)
        printf("  mismatch at [%zu] of %zu: got %.9g want %.9g\n", bad, n, (double)got[bad], (double)want[bad]);
    return bad == (size_t)-1;
}

/* Buffers of a step; ys uploaded to y. */
static int make_step(fc_cuda_ctx *ctx, step_t *s, float *ys)
{
    memset(s, 0, sizeof *s);
    ct_fill_random(ys, N);
    s->y = ct_upload_new(ctx, ys, N);
    s->in = fc_buffer_alloc_ctx(ctx, N * sizeof(float));
    s->z = fc_buffer_alloc_ctx(ctx, N * sizeof(float));
    s->out = fc_buffer_alloc_ctx(ctx, N * sizeof(float));
    s->n = N;
    return s->y && s->in && s->z && s->out;
}

static void free_step(step_t *s)
{
    CT_FREE_BUFFERS(s->in, s->y, s->z, s->out);
    for (int i = 0; i < s->nkept; i++) fc_buffer_free(s->kept[i]);
    s->nkept = 0;
}

static fc_graph_cache_config unlimited(void)
{
    fc_graph_cache_config cfg;
    fc_graph_cache_config_default(&cfg);
    cfg.max_entries = 0;
    return cfg;
}

static void decode_loop(fc_cuda_ctx *ctx)
{
    step_t s = {0};
    fc_graph_cache *cache = NULL;
    fc_buckets *buckets = NULL;
    float *xs = ct_floats(N), *ys = ct_floats(N), *got = ct_floats(N), *want = ct_floats(N);
    int used[N + 1] = {0};
    int distinct = 0, hits = 0;
    const int steps = 2000;
    CHECK_NOTNULL(xs && ys && got && want ? xs : NULL);
    ct_seed(101);
    CHECK(make_step(ctx, &s, ys));
    CHECK_NOTNULL(buckets = fc_buckets_ladder(N));
    fc_graph_cache_config cfg = unlimited();
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, &cfg));
    for (int step = 0; step < steps; step++) {
        size_t n = 1 + ct_rand_u32() % N;
        size_t b = fc_buckets_for(buckets, n);
        CHECK_MSG(b >= n && b <= N, "step %d: bucket %zu for n %zu", step, b, n);
        CHECK(fresh_inputs(ctx, &s, xs));
        s.n = b;
        int outcome = -2;
        CHECK_OK(fc_graph_cache_run(cache, (uint64_t)b, record_step, &s, NULL, &outcome));
        int first = !used[b];
        if (first) {
            used[b] = 1;
            distinct++;
        }
        CHECK_MSG(outcome == (first ? FC_CACHE_CAPTURED : FC_CACHE_HIT), "step %d, bucket %zu: outcome %d", step, b,
                  outcome);
        hits += outcome == FC_CACHE_HIT;
        CHECK_MSG(step_result_ok(ctx, &s, xs, ys, b, 0, got, want), "step %d: n %zu, bucket %zu", step, n, b);
    }
    fc_graph_cache_stats st;
    CHECK_OK(fc_graph_cache_stats_get(cache, &st));
    printf("  decode loop: %d steps, %d of %zu buckets used, hit rate %.3f (hits %llu, misses %llu, captures %llu)\n",
           steps, distinct, fc_buckets_count(buckets), (double)hits / steps, (unsigned long long)st.hits,
           (unsigned long long)st.misses, (unsigned long long)st.captures);
    CHECK(st.hits == (uint64_t)hits && st.hits + st.misses == (uint64_t)steps);
    CHECK(st.captures == (uint64_t)distinct && st.graphs == (size_t)distinct && st.entries == (size_t)distinct);
    CHECK(st.fallbacks == 0 && st.failures == 0 && st.evictions == 0);
    CHECK(s.captured == distinct && s.runs == distinct);
done:
    fc_graph_cache_free(cache);
    fc_buckets_free(buckets);
    free_step(&s);
    CT_FREE(xs, ys, got, want);
}

static void warmup_then_hit(fc_cuda_ctx *ctx)
{
    step_t s = {0};
    fc_graph_cache *cache = NULL;
    float *xs = ct_floats(N), *ys = ct_floats(N), *got = ct_floats(N), *want = ct_floats(N);
    CHECK_NOTNULL(xs && ys && got && want ? xs : NULL);
    ct_seed(102);
    CHECK(make_step(ctx, &s, ys));
    fc_graph_cache_config cfg = unlimited();
    cfg.warmup = 1;
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, &cfg));
    for (int call = 0; call < 4; call++) {
        int outcome = -2;
        CHECK(fresh_inputs(ctx, &s, xs));
        CHECK_OK(fc_graph_cache_run(cache, 42, record_step, &s, NULL, &outcome));
        CHECK_MSG(outcome == (call == 0 ? FC_CACHE_WARMED_UP : FC_CACHE_HIT), "call %d: outcome %d", call, outcome);
        CHECK_MSG(step_result_ok(ctx, &s, xs, ys, N, 0, got, want), "call %d", call);
    }
    CHECK_MSG(s.runs == 2 && s.captured == 1, "record ran %d times, %d captured (want eager + capture)", s.runs,
              s.captured);
done:
    fc_graph_cache_free(cache);
    free_step(&s);
    CT_FREE(xs, ys, got, want);
}

static void invalidate_updates_in_place(fc_cuda_ctx *ctx)
{
    step_t s = {0};
    fc_graph_cache *cache = NULL;
    fc_buffer *in2 = NULL, *in1 = NULL;
    float *xs = ct_floats(N), *x2s = ct_floats(N), *ys = ct_floats(N), *got = ct_floats(N), *want = ct_floats(N);
    fc_graph_cache_stats st;
    int outcome = -2;
    CHECK_NOTNULL(xs && x2s && ys && got && want ? xs : NULL);
    ct_seed(103);
    CHECK(make_step(ctx, &s, ys));
    in1 = s.in;
    ct_fill_random(x2s, N);
    CHECK_NOTNULL(in2 = ct_upload_new(ctx, x2s, N));
    fc_graph_cache_config cfg = unlimited();
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, &cfg));
    CHECK(fresh_inputs(ctx, &s, xs));
    CHECK_OK(fc_graph_cache_run(cache, 1, record_step, &s, NULL, &outcome));
    CHECK(outcome == FC_CACHE_CAPTURED);
    CHECK(step_result_ok(ctx, &s, xs, ys, N, 0, got, want));

    s.in = in2; /* the graph still reads in1 until it is refreshed */
    CHECK_OK(fc_buffer_fill_ctx(ctx, s.out, 0, N * sizeof(float), 0xff));
    CHECK_OK(fc_graph_cache_run(cache, 1, record_step, &s, NULL, &outcome));
    CHECK(outcome == FC_CACHE_HIT);
    CHECK_MSG(step_result_ok(ctx, &s, xs, ys, N, 0, got, want), "a hit replays the graph as captured");

    CHECK_OK(fc_graph_cache_invalidate(cache, 1));
    CHECK_OK(fc_graph_cache_invalidate(cache, 999)); /* unknown keys are ignored */
    CHECK_OK(fc_buffer_fill_ctx(ctx, s.out, 0, N * sizeof(float), 0xff));
    CHECK_OK(fc_graph_cache_run(cache, 1, record_step, &s, NULL, &outcome));
    CHECK_MSG(outcome == FC_CACHE_REFRESHED, "outcome %d", outcome);
    CHECK_MSG(step_result_ok(ctx, &s, x2s, ys, N, 0, got, want), "the refreshed graph reads the new input");
    CHECK_OK(fc_graph_cache_stats_get(cache, &st));
    CHECK_MSG(st.updates == 1 && st.reinstantiations == 0 && st.captures == 1,
              "updates %llu, reinstantiations %llu, captures %llu (in-place update needs a CUDA 12.0+ driver)",
              (unsigned long long)st.updates, (unsigned long long)st.reinstantiations,
              (unsigned long long)st.captures);
    CHECK_OK(fc_graph_cache_run(cache, 1, record_step, &s, NULL, &outcome));
    CHECK(outcome == FC_CACHE_HIT);

    /* One more kernel: the topology changed, the segment is instantiated anew. */
    s.extra_muls = 1;
    CHECK_OK(fc_graph_cache_invalidate_all(cache));
    CHECK_OK(fc_buffer_fill_ctx(ctx, s.out, 0, N * sizeof(float), 0xff));
    CHECK_OK(fc_graph_cache_run(cache, 1, record_step, &s, NULL, &outcome));
    CHECK(outcome == FC_CACHE_REFRESHED);
    CHECK(step_result_ok(ctx, &s, x2s, ys, N, 1, got, want));
    CHECK_OK(fc_graph_cache_stats_get(cache, &st));
    CHECK(st.updates == 1 && st.reinstantiations == 1);
    CHECK_MSG(fc_graph_cache_node_count(cache, 1) == 3, "node count %zu", fc_graph_cache_node_count(cache, 1));
done:
    fc_graph_cache_free(cache);
    s.in = in1;
    fc_buffer_free(in2);
    free_step(&s);
    CT_FREE(xs, x2s, ys, got, want);
}

static void eviction_small_cap(fc_cuda_ctx *ctx)
{
    step_t s = {0};
    fc_graph_cache *cache = NULL, *by_bytes = NULL;
    float *xs = ct_floats(N), *ys = ct_floats(N), *got = ct_floats(N), *want = ct_floats(N);
    fc_graph_cache_stats st;
    CHECK_NOTNULL(xs && ys && got && want ? xs : NULL);
    ct_seed(104);
    CHECK(make_step(ctx, &s, ys));
    fc_graph_cache_config cfg = unlimited();
    cfg.max_entries = 2;
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, &cfg));
    /* key -> expected outcome; the key is also n */
    const uint64_t keys[] = {64, 128, 64, 256, 64, 128, 256};
    const int expect[] = {FC_CACHE_CAPTURED, FC_CACHE_CAPTURED, FC_CACHE_HIT, FC_CACHE_CAPTURED,
                          FC_CACHE_HIT,      FC_CACHE_CAPTURED, FC_CACHE_CAPTURED};
    for (size_t i = 0; i < CT_COUNT(keys); i++) {
        int outcome = -2;
        CHECK(fresh_inputs(ctx, &s, xs));
        s.n = (size_t)keys[i];
        CHECK_OK(fc_graph_cache_run(cache, keys[i], record_step, &s, NULL, &outcome));
        CHECK_MSG(outcome == expect[i], "call %zu (key %llu): outcome %d, want %d", i, (unsigned long long)keys[i],
                  outcome, expect[i]);
        CHECK_MSG(step_result_ok(ctx, &s, xs, ys, s.n, 0, got, want), "call %zu", i);
    }
    CHECK_OK(fc_graph_cache_stats_get(cache, &st));
    CHECK_MSG(st.entries == 2 && st.evictions == 3 && st.captures == 5 && st.hits == 2,
              "entries %zu, evictions %llu, captures %llu, hits %llu", st.entries,
              (unsigned long long)st.evictions, (unsigned long long)st.captures, (unsigned long long)st.hits);
    CHECK_OK(fc_graph_cache_remove(cache, 256));
    CHECK_OK(fc_graph_cache_remove(cache, 256));
    CHECK_OK(fc_graph_cache_stats_get(cache, &st));
    CHECK(st.entries == 1);
    CHECK_OK(fc_graph_cache_clear(cache));
    CHECK_OK(fc_graph_cache_stats_get(cache, &st));
    CHECK(st.entries == 0 && st.graphs == 0 && st.captures == 5);

    /* Byte cap: each capture keeps one 2 KiB pool buffer; 3 KiB holds one. */
    cfg = unlimited();
    cfg.max_bytes = 3 * N * sizeof(float) / 2;
    CHECK_NOTNULL(by_bytes = fc_graph_cache_new(ctx, &cfg));
    s.n = N;
    const uint64_t bkeys[] = {1, 2, 2, 1};
    for (size_t i = 0; i < CT_COUNT(bkeys); i++) {
        int outcome = -2;
        CHECK(fresh_inputs(ctx, &s, xs));
        CHECK_OK(fc_graph_cache_run(by_bytes, bkeys[i], record_keeping, &s, NULL, &outcome));
        CHECK_MSG(outcome == (i == 2 ? FC_CACHE_HIT : FC_CACHE_CAPTURED), "byte cap call %zu: outcome %d", i, outcome);
        CHECK(step_result_ok(ctx, &s, xs, ys, N, 0, got, want));
        CHECK_OK(fc_graph_cache_stats_get(by_bytes, &st));
        CHECK_MSG(st.entries == 1 && st.bytes == N * sizeof(float), "call %zu: entries %zu, bytes %zu", i,
                  st.entries, st.bytes);
    }
    CHECK(st.evictions == 2);
done:
    fc_graph_cache_free(cache);
    fc_graph_cache_free(by_bytes); /* before the kept buffers its graphs use */
    free_step(&s);
    CT_FREE(xs, ys, got, want);
}

static void fallback_and_recovery(fc_cuda_ctx *ctx)
{
    step_t s = {0};
    fc_graph_cache *cache = NULL, *quick = NULL;
    float *xs = ct_floats(N), *ys = ct_floats(N), *got = ct_floats(N), *want = ct_floats(N);
    fc_graph_cache_stats st;
    CHECK_NOTNULL(xs && ys && got && want ? xs : NULL);
    ct_seed(105);
    CHECK(make_step(ctx, &s, ys));
    fc_graph_cache_config cfg = unlimited();
    cfg.fail_threshold = 2;
    cfg.backoff_ms = 300;
    cfg.max_backoff_ms = 1000;
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, &cfg));
    s.fail_left = 3;
    /* (sleep before, expected outcome) */
    const long sleeps[] = {0, 0, 0, 350, 0, 650, 0};
    const int expect[] = {FC_CACHE_EAGER_FAILED,  FC_CACHE_EAGER_FAILED, FC_CACHE_EAGER_BACKOFF, FC_CACHE_EAGER_FAILED,
                          FC_CACHE_EAGER_BACKOFF, FC_CACHE_CAPTURED,     FC_CACHE_HIT};
    for (size_t i = 0; i < CT_COUNT(expect); i++) {
        int outcome = -2, captured_before = s.captured;
        sleep_ms(sleeps[i]);
        CHECK(fresh_inputs(ctx, &s, xs));
        fc_clear_last_error();
        CHECK_OK(fc_graph_cache_run(cache, 5, record_step, &s, NULL, &outcome));
        CHECK_MSG(outcome == expect[i], "call %zu: outcome %d, want %d", i, outcome, expect[i]);
        CHECK_MSG(step_result_ok(ctx, &s, xs, ys, N, 0, got, want), "call %zu", i);
        if (outcome == FC_CACHE_EAGER_FAILED) {
            CHECK_MSG(fc_last_error_code() == FC_ERR_CALLBACK && strstr(fc_last_error(), "record function returned 7"),
                      "call %zu: the failure is left in fc_last_error", i);
        }
        if (outcome == FC_CACHE_EAGER_BACKOFF) CHECK_MSG(s.captured == captured_before, "no capture while backing off");
    }
    CHECK_OK(fc_graph_cache_stats_get(cache, &st));
    CHECK_MSG(st.failures == 3 && st.fallbacks == 5 && st.captures == 1 && st.hits == 1,
              "failures %llu, fallbacks %llu, captures %llu, hits %llu", (unsigned long long)st.failures,
              (unsigned long long)st.fallbacks, (unsigned long long)st.captures, (unsigned long long)st.hits);
    CHECK(!fc_graph_is_capturing_ctx(ctx));

    /* backoff_ms 0: retry at the next call. */
    cfg.fail_threshold = 1;
    cfg.backoff_ms = 0;
    cfg.max_backoff_ms = 0;
    CHECK_NOTNULL(quick = fc_graph_cache_new(ctx, &cfg));
    s.fail_left = 1;
    for (int call = 0; call < 3; call++) {
        int outcome = -2;
        CHECK(fresh_inputs(ctx, &s, xs));
        CHECK_OK(fc_graph_cache_run(quick, 6, record_step, &s, NULL, &outcome));
        const int want_o[] = {FC_CACHE_EAGER_FAILED, FC_CACHE_CAPTURED, FC_CACHE_HIT};
        CHECK_MSG(outcome == want_o[call], "backoff 0, call %d: outcome %d", call, outcome);
        CHECK(step_result_ok(ctx, &s, xs, ys, N, 0, got, want));
    }
done:
    fc_graph_cache_free(cache);
    fc_graph_cache_free(quick);
    free_step(&s);
    CT_FREE(xs, ys, got, want);
}

/* breaks_with_live: z = x + y | break: z += addend[live->which], runs++ | out = z * y */
typedef struct {
    int which;
} pick_t;

typedef struct {
    fc_buffer *x, *y, *z, *out, *addend[2];
    int break_runs;
    int break_fails; /* first failing line inside the break */
} brk_t;

static int add_addend(fc_cuda_ctx *ctx, void *live, void *user)
{
    brk_t *b = (brk_t *)user;
    const pick_t *p = (const pick_t *)live;
    b->break_runs++;
    if (!p || p->which < 0 || p->which > 1) {
        if (!b->break_fails) b->break_fails = __LINE__;
        return 20;
    }
    return fc_add_ctx(ctx, b->z, b->addend[p->which], b->z, N) == FC_OK ? 0 : 21;
}

static int record_with_break(fc_cuda_ctx *ctx, void *user)
{
    brk_t *b = (brk_t *)user;
    if (fc_add_ctx(ctx, b->x, b->y, b->z, N) != FC_OK) return 1;
    if (fc_graph_break_ctx(ctx, add_addend, b) != FC_OK) return 2;
    return fc_mul_ctx(ctx, b->z, b->y, b->out, N) == FC_OK ? 0 : 3;
}

static void breaks_with_live(fc_cuda_ctx *ctx)
{
    brk_t b;
    fc_graph_cache *cache = NULL;
    memset(&b, 0, sizeof b);
    float *xs = ct_floats(N), *ys = ct_floats(N), *as[2] = {ct_floats(N), ct_floats(N)}, *got = ct_floats(N),
          *want = ct_floats(N);
    CHECK_NOTNULL(xs && ys && as[0] && as[1] && got && want ? xs : NULL);
    ct_seed(106);
    ct_fill_random(ys, N);
    ct_fill_random(as[0], N);
    ct_fill_random(as[1], N);
    CHECK_NOTNULL(b.y = ct_upload_new(ctx, ys, N));
    CHECK_NOTNULL(b.addend[0] = ct_upload_new(ctx, as[0], N));
    CHECK_NOTNULL(b.addend[1] = ct_upload_new(ctx, as[1], N));
    CHECK_NOTNULL(b.x = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    CHECK_NOTNULL(b.z = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    CHECK_NOTNULL(b.out = fc_buffer_alloc_ctx(ctx, N * sizeof(float)));
    for (int warmup = 0; warmup < 2; warmup++) {
        fc_graph_cache_config cfg = unlimited();
        cfg.warmup = warmup;
        CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, &cfg));
        b.break_runs = 0;
        const int picks[] = {0, 1, 1, 0, 1};
        for (int call = 0; call < 5; call++) {
            pick_t p = {picks[call]};
            int outcome = -2;
            if (call == 3) CHECK_OK(fc_graph_cache_invalidate(cache, 77));
            ct_fill_random(xs, N);
            CHECK_OK(fc_buffer_upload(b.x, xs, N * sizeof(float)));
            CHECK_OK(fc_buffer_fill_ctx(ctx, b.out, 0, N * sizeof(float), 0xff));
            CHECK_OK(fc_graph_cache_run(cache, 77, record_with_break, &b, &p, &outcome));
            int want_o = call == 0 ? (warmup ? FC_CACHE_WARMED_UP : FC_CACHE_CAPTURED)
                                   : (call == 3 ? FC_CACHE_REFRESHED : FC_CACHE_HIT);
            CHECK_MSG(outcome == want_o, "warmup %d, call %d: outcome %d, want %d", warmup, call, outcome, want_o);
            CHECK_MSG(b.break_runs == call + 1, "warmup %d, call %d: the break ran %d times (once per call)", warmup,
                      call, b.break_runs);
            CHECK_OK(fc_sync_ctx(ctx));
            CHECK_OK(fc_buffer_download(b.out, got, N * sizeof(float)));
            for (size_t i = 0; i < N; i++) {
                volatile float v = xs[i] + ys[i];
                v = v + as[p.which][i];
                want[i] = v * ys[i];
            }
            CHECK_FLOATS(got, want, N, "break result");
        }
        CHECK(b.break_fails == 0);
        fc_graph_cache_free(cache);
        cache = NULL;
    }
done:
    fc_graph_cache_free(cache);
    CT_FREE_BUFFERS(b.x, b.y, b.z, b.out, b.addend[0], b.addend[1]);
    CT_FREE(xs, ys, as[0], as[1], got, want);
}

typedef struct {
    fc_graph_cache *cache;
    int stats_rc, run_rc, inner_outcome;
    step_t *s;
} reenter_t;

static int record_reentering(fc_cuda_ctx *ctx, void *user)
{
    reenter_t *r = (reenter_t *)user;
    fc_graph_cache_stats st;
    r->stats_rc = fc_graph_cache_stats_get(r->cache, &st);
    r->run_rc = fc_graph_cache_run(r->cache, 2, record_step, r->s, NULL, &r->inner_outcome);
    return record_step(ctx, r->s);
}

static void reentry_refused(fc_cuda_ctx *ctx)
{
    step_t s = {0};
    fc_graph_cache *cache = NULL;
    float *xs = ct_floats(N), *ys = ct_floats(N), *got = ct_floats(N), *want = ct_floats(N);
    CHECK_NOTNULL(xs && ys && got && want ? xs : NULL);
    ct_seed(107);
    CHECK(make_step(ctx, &s, ys));
    fc_graph_cache_config cfg = unlimited();
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, &cfg));
    reenter_t r = {cache, -1, -1, -2, &s};
    int outcome = -2;
    CHECK(fresh_inputs(ctx, &s, xs));
    CHECK_OK(fc_graph_cache_run(cache, 1, record_reentering, &r, NULL, &outcome));
    CHECK(outcome == FC_CACHE_CAPTURED);
    CHECK_MSG(r.stats_rc == FC_ERR_CAPTURE_STATE && r.run_rc == FC_ERR_CAPTURE_STATE && r.inner_outcome == -1,
              "stats %d, run %d, inner outcome %d", r.stats_rc, r.run_rc, r.inner_outcome);
    CHECK(step_result_ok(ctx, &s, xs, ys, N, 0, got, want));
done:
    fc_graph_cache_free(cache);
    free_step(&s);
    CT_FREE(xs, ys, got, want);
}

static void buckets_api(fc_cuda_ctx *ctx)
{
    (void)ctx;
    fc_buckets *l = NULL, *e = NULL;
    CHECK_NOTNULL(l = fc_buckets_ladder(2048));
    size_t count = fc_buckets_count(l);
    CHECK_MSG(count == 39, "the 2048 ladder has %zu buckets", count);
    CHECK(fc_buckets_get(l, 0) == 1 && fc_buckets_get(l, count - 1) == 2048 && fc_buckets_get(l, 20) == 288);
    for (size_t i = 1; i < count; i++) CHECK(fc_buckets_get(l, i) > fc_buckets_get(l, i - 1));
    for (size_t n = 1; n <= 2048; n++) {
        size_t want = 0;
        for (size_t i = 0; i < count && !want; i++)
            if (fc_buckets_get(l, i) >= n) want = fc_buckets_get(l, i);
        CHECK_MSG(fc_buckets_for(l, n) == want, "n %zu: %zu, want %zu", n, fc_buckets_for(l, n), want);
    }
    fc_clear_last_error();
    CHECK(fc_buckets_for(l, 0) == 0 && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    CHECK(fc_buckets_for(l, 2049) == 0 && strstr(fc_last_error(), "1..=2048"));
    CHECK(fc_buckets_get(l, count) == 0 && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    const size_t sizes[] = {256, 0, 1024, 4096, 256};
    CHECK_NOTNULL(e = fc_buckets_from_list(sizes, CT_COUNT(sizes), 2048));
    CHECK(fc_buckets_count(e) == 3 && fc_buckets_get(e, 0) == 256 && fc_buckets_get(e, 1) == 1024 &&
          fc_buckets_get(e, 2) == 2048);
    CHECK(fc_buckets_for(e, 1) == 256 && fc_buckets_for(e, 257) == 1024);
    CHECK(fc_buckets_ladder(0) == NULL && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    CHECK(fc_buckets_from_list(NULL, 2, 64) == NULL && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
done:
    fc_buckets_free(l);
    fc_buckets_free(e);
}

static void bad_arguments(fc_cuda_ctx *ctx)
{
    fc_graph_cache *cache = NULL;
    fc_buckets *bk = NULL;
    fc_graph_cache_config cfg = unlimited();
    fc_graph_cache_stats st;
    int outcome = 5;
    cfg.max_tries = 0;
    CHECK(fc_graph_cache_new(ctx, &cfg) == NULL && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    cfg = unlimited();
    cfg.backoff_ms = 10;
    cfg.max_backoff_ms = 5;
    CHECK(fc_graph_cache_new(ctx, &cfg) == NULL && strstr(fc_last_error(), "max_backoff"));
    cfg = unlimited();
    cfg.mode = 9;
    CHECK(fc_graph_cache_new(ctx, &cfg) == NULL && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    CHECK(fc_graph_cache_new(NULL, NULL) == NULL && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, NULL));
    CHECK_RC(fc_graph_cache_run(cache, 1, NULL, NULL, NULL, &outcome), FC_ERR_INVALID_ARGUMENT);
    CHECK(outcome == -1);
    CHECK_RC(fc_graph_cache_stats_get(cache, NULL), FC_ERR_INVALID_ARGUMENT);
    CHECK_OK(fc_graph_cache_stats_get(cache, &st));
    CHECK(st.entries == 0 && st.misses == 0);
    CHECK(fc_graph_cache_node_count(cache, 1) == 0 && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    CHECK_RC(fc_graph_cache_debug_dot(cache, 1, "/tmp/x.dot"), FC_ERR_INVALID_ARGUMENT);
    CHECK_NOTNULL(bk = fc_buckets_ladder(16));
    CHECK_RC(fc_graph_cache_invalidate((fc_graph_cache *)bk, 1), FC_ERR_INVALID_HANDLE);
    CHECK(fc_buckets_count((const fc_buckets *)cache) == 0 && fc_last_error_code() == FC_ERR_INVALID_HANDLE);
    fc_graph_cache_free(cache);
    CHECK_RC(fc_graph_cache_clear(cache), FC_ERR_INVALID_HANDLE);
    fc_clear_last_error();
    fc_graph_cache_free(cache); /* double free: recorded, nothing else */
    CHECK(fc_last_error_code() == FC_ERR_INVALID_HANDLE);
    cache = NULL;
    fc_graph_cache_free(NULL);
    fc_buckets_free(NULL);
done:
    fc_graph_cache_free(cache);
    fc_buckets_free(bk);
}

static int nop_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)live;
    (void)user;
    return 0;
}

/* 1 when `path` exists and holds `needle` exactly `times` times. */
static int file_has(const char *path, const char *needle, int times)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    int count = 0;
    for (const char *p = buf; (p = strstr(p, needle)) != NULL; p += strlen(needle)) count++;
    if (count != times) printf("  %s: \"%s\" found %d times, want %d\n", path, needle, count, times);
    return count == times;
}

static void diagnostics(fc_cuda_ctx *ctx)
{
    step_t s = {0};
    fc_graph *g = NULL;
    fc_graph_cache *cache = NULL;
    float *ys = ct_floats(N);
    char path[256];
    CHECK_NOTNULL(ys);
    ct_seed(108);
    CHECK(make_step(ctx, &s, ys));
    snprintf(path, sizeof path, "/tmp/fc-test-cache-%ld.dot", (long)getpid());
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_OK(fc_add_ctx(ctx, s.in, s.y, s.z, N));
    CHECK_OK(fc_mul_ctx(ctx, s.z, s.y, s.out, N));
    CHECK_OK(fc_graph_break_ctx(ctx, nop_break, NULL));
    CHECK_OK(fc_add_ctx(ctx, s.out, s.y, s.out, N));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(fc_graph_segment_count(g) == 3);
    CHECK_MSG(fc_graph_node_count(g) == 3, "node count %zu", fc_graph_node_count(g));
    CHECK(fc_graph_segment_node_count(g, 0) == 2 && fc_graph_segment_node_count(g, 1) == 0 &&
          fc_graph_segment_node_count(g, 2) == 1);
    CHECK(fc_graph_segment_node_count(g, 3) == 0 && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
    int rc = fc_graph_debug_dot(g, path);
    if (rc == FC_ERR_UNSUPPORTED) {
        CT_SKIP_CASE("diagnostics/dot", "driver without cuGraphDebugDotPrint: %s", fc_last_error());
    } else {
        CHECK_RC(rc, FC_OK);
        CHECK(file_has(path, "digraph", 2) && file_has(path, "// piece 1: break", 1));
        CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, NULL));
        int outcome = -2;
        CHECK_OK(fc_graph_cache_run(cache, 3, record_step, &s, NULL, &outcome));
        CHECK(fc_graph_cache_node_count(cache, 3) == 2);
        CHECK_OK(fc_graph_cache_debug_dot(cache, 3, path));
        CHECK(file_has(path, "digraph", 1));
    }
    CHECK_RC(fc_graph_debug_dot(g, NULL), FC_ERR_INVALID_ARGUMENT);
    CHECK_RC(fc_graph_debug_dot(g, "/nonexistent-dir-fc/x.dot"), FC_ERR_INVALID_ARGUMENT);
    CHECK(fc_graph_node_count(NULL) == 0 && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT);
done:
    remove(path);
    fc_graph_cache_free(cache);
    fc_graph_free(g);
    free_step(&s);
    CT_FREE(ys);
}

/* chain of 26 kernels: 13 x (z = x + y; x = z * y) */
static int record_chain(fc_cuda_ctx *ctx, void *user)
{
    step_t *s = (step_t *)user;
    for (int i = 0; i < 13; i++) {
        if (fc_add_ctx(ctx, s->in, s->y, s->z, N) != FC_OK) return 1;
        if (fc_mul_ctx(ctx, s->z, s->y, s->in, N) != FC_OK) return 2;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void hit_cost(fc_cuda_ctx *ctx)
{
    enum { ITERS = 2000 };
    step_t s = {0};
    fc_graph *g = NULL;
    fc_graph_cache *cache = NULL;
    float *ys = ct_floats(N);
    static double hit[ITERS], bare[ITERS];
    CHECK_NOTNULL(ys);
    ct_seed(109);
    CHECK(make_step(ctx, &s, ys));
    CHECK_OK(fc_graph_capture_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, record_chain, &s, 1, &g));
    CHECK_NOTNULL(cache = fc_graph_cache_new(ctx, NULL));
    int outcome = -2;
    CHECK_OK(fc_graph_cache_run(cache, 26, record_chain, &s, NULL, &outcome));
    CHECK(outcome == FC_CACHE_CAPTURED);
    for (int i = 0; i < ITERS; i++) {
        double t0 = now_us();
        int rc = fc_graph_cache_run(cache, 26, record_chain, &s, NULL, &outcome);
        double t1 = now_us();
        int rc2 = fc_graph_launch(g);
        double t2 = now_us();
        CHECK(rc == FC_OK && rc2 == FC_OK && outcome == FC_CACHE_HIT);
        hit[i] = t1 - t0;
        bare[i] = t2 - t1;
        if (i % 64 == 63) CHECK_OK(fc_sync_ctx(ctx));
    }
    CHECK_OK(fc_sync_ctx(ctx));
    qsort(hit, ITERS, sizeof hit[0], cmp_double);
    qsort(bare, ITERS, sizeof bare[0], cmp_double);
    printf("  hit_cost: fc_graph_cache_run (hit) %.3f us, fc_graph_launch %.3f us, difference %.3f us (medians, K=26)\n",
           hit[ITERS / 2], bare[ITERS / 2], hit[ITERS / 2] - bare[ITERS / 2]);
    CHECK_MSG(hit[ITERS / 2] - bare[ITERS / 2] < 5.0, "a hit costs %.3f us more than a launch",
              hit[ITERS / 2] - bare[ITERS / 2]);
done:
    fc_graph_cache_free(cache);
    fc_graph_free(g);
    free_step(&s);
    CT_FREE(ys);
}

int main(int argc, char **argv)
{
    static const ct_case_def cases[] = {
        CT_CASE(decode_loop),
        CT_CASE(warmup_then_hit),
        CT_CASE(invalidate_updates_in_place),
        CT_CASE(eviction_small_cap),
        CT_CASE(fallback_and_recovery),
        CT_CASE(breaks_with_live),
        CT_CASE(reentry_refused),
        CT_CASE(buckets_api),
        CT_CASE(bad_arguments),
        CT_CASE(diagnostics),
        CT_CASE(hit_cost),
    };
    return ct_main(argc, argv, cases, CT_COUNT(cases));
}
