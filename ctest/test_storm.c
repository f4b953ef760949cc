/* test_storm.c - many threads capture, launch and check at once on every
 * device, while contexts, buffers and modules churn (GPU).
 *
 * Each thread owns a context (re-created every FC_STORM_CHURN captures; one
 * context in four is isolated) and loops: allocate and free a scratch
 * buffer, capture (plain begin/end, fc_graph_capture_ctx with re-recording,
 * a capture with a break running a user kernel with a live scale, an
 * end_update into the previous graph, or a graph cache keyed by the token
 * bucket of the size, as an engine does; capture modes THREAD_LOCAL, GLOBAL
 * and RELAXED in turn, with capture-pool intermediates), replay into a
 * poisoned output and compare every element with the CPU, bit for bit. A
 * cache call that falls back to eager work counts as a failure.
 *
 * Required: 0 failures, 0 wrong results, every handle and context of the
 * storm gone (fc_live_objects back to the monitors and the bucket ladder),
 * and each device's free memory back to its starting level. Memory is read
 * with fc_ctx_mem_info on a PRIVATE isolated monitor context per device, held for
 * the whole run, so that no primary context outlives the storm's own: once
 * the last of them is freed, the driver tears the primary context down with
 * everything it allocated for it (JIT and module caches, launch and graph
 * bookkeeping). Reads: at the start (before any primary context exists),
 * after each of two warm-up rounds (FC_STORM_WARMUP captures per thread,
 * same threads, same churn) and after the storm. Each must be within 2 MiB
 * (the granularity at which the driver's free memory moves) of the start.
 * A leak of anything that holds a context would keep the whole primary
 * context (hundreds of MiB); a leak per capture scales with the work.
 * FC_STORM_MEM_TOLERANCE_MIB replaces the 2 MiB.
 * Env: FC_STORM_THREADS (per device, 8), FC_STORM_CAPTURES (per thread,
 * 2000), FC_STORM_DEVICES (all, at most 2 by default), FC_STORM_CHURN (250),
 * FC_STORM_WARMUP (20), FC_STORM_MEM_TOLERANCE_MIB (2).
 * Last lines: a one-line summary with every count, then [PASS] or [FAIL].
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "check.h"
#include "user_ptx.h"

#include <pthread.h>
#include <stdarg.h>
#include <time.h>

#define NMAX 4096
#define MAX_DEVICES 16
#define MAX_NOTES 12

static long env_long(const char *name, long fallback, long lo, long hi)
{
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        printf("%s: ignoring %s=%s (want %ld..%ld)\n", ct_prog, name, v, lo, hi);
        return fallback;
    }
    return x;
}

/* ---- shared results ---------------------------------------------------------------- */

static float g_poison[NMAX]; /* filled by main before any thread starts */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_notes[MAX_NOTES][400];
static int g_note_count;
static long g_notes_dropped;

static void note(const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_lock);
    if (g_note_count < MAX_NOTES)
        snprintf(g_notes[g_note_count++], sizeof g_notes[0], "%s", buf);
    else
        g_notes_dropped++;
    pthread_mutex_unlock(&g_lock);
}

typedef struct {
    long ok, failed, wrong, invalidated;
    long via_capture_fn, rerecorded, with_break, updates, updated_in_place, cache_captures, cache_hits;
    long contexts, isolated, buffers, modules;
} counts;

static void add_counts(counts *to, const counts *c)
{
    long *t = (long *)to;
    const long *s = (const long *)c;
    for (size_t i = 0; i < sizeof *to / sizeof(long); i++) t[i] += s[i];
}

/* ---- one worker ---------------------------------------------------------------------- */

typedef struct {
    int device, index;
    long captures, churn;
    counts c;
    /* the current context and what lives on it */
    fc_cuda_ctx *ctx;
    fc_buffer *x, *y, *z, *out;
    fc_module *module;
    fc_kernel *kernel;
    fc_graph *prev; /* the last plain capture, for end_update */
    fc_graph_cache *cache; /* keyed by token bucket */
    size_t prev_n;
    float hx[NMAX], hy[NMAX], got[NMAX], want[NMAX];
    uint32_t rng;
    size_t n; /* elements of the current capture */
} worker;

static uint32_t next_rand(worker *w)
{
    uint32_t x = w->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return w->rng = x;
}

static float rand_float(worker *w)
{
    uint32_t r = next_rand(w);
    float mag = 0.25f + 3.75f * (float)(r >> 8) / 16777216.0f;
    return (r & 1u) ? -mag : mag;
}

static void drop_context(worker *w)
{
    fc_graph_cache_free(w->cache);
    w->cache = NULL;
    fc_graph_free(w->prev);
    fc_kernel_free(w->kernel);
    fc_module_free(w->module);
    CT_FREE_BUFFERS(w->x, w->y, w->z, w->out);
    fc_cuda_ctx_free(w->ctx);
    w->prev = NULL;
    w->kernel = NULL;
    w->module = NULL;
    w->x = w->y = w->z = w->out = NULL;
    w->ctx = NULL;
}

static int fail(worker *w, const char *what)
{
    w->c.failed++;
    if (fc_last_error_code() == FC_ERR_CAPTURE_INVALIDATED) w->c.invalidated++;
    note("device %d thread %d: %s: code %d: %s", w->device, w->index, what, fc_last_error_code(), fc_last_error());
    if (w->ctx && fc_graph_is_capturing_ctx(w->ctx)) (void)fc_graph_abort_ctx(w->ctx);
    return 0;
}

static int new_context(worker *w, long generation)
{
    drop_context(w);
    int isolated = (w->index + generation) % 4 == 3;
    w->ctx = isolated ? fc_cuda_init_device_isolated(w->device) : fc_cuda_init_device(w->device);
    if (!w->ctx) return fail(w, "create a context");
    w->c.contexts++;
    w->c.isolated += isolated;
    for (int i = 0; i < NMAX; i++) {
        w->hx[i] = rand_float(w);
        w->hy[i] = rand_float(w);
    }
    w->x = ct_upload_new(w->ctx, w->hx, NMAX);
    w->y = ct_upload_new(w->ctx, w->hy, NMAX);
    w->z = fc_buffer_alloc_ctx(w->ctx, NMAX * sizeof(float));
    w->out = fc_buffer_alloc_ctx(w->ctx, NMAX * sizeof(float));
    if (!w->x || !w->y || !w->z || !w->out) return fail(w, "allocate the context's buffers");
    w->module = fc_module_load_ptx(w->ctx, USER_PTX);
    w->kernel = w->module ? fc_module_get_kernel(w->module, "scale_f32") : NULL;
    if (!w->kernel) return fail(w, "load the module");
    w->c.modules++;
    if (!(w->cache = fc_graph_cache_new(w->ctx, NULL))) return fail(w, "create a graph cache");
    return 1;
}

/* out = (x + y) * y + x, with the intermediate from the capture pool. */
static int record_chain(fc_cuda_ctx *ctx, void *user)
{
    worker *w = (worker *)user;
    fc_buffer *t = fc_buffer_alloc_ctx(ctx, w->n * sizeof(float));
    if (!t) return fc_last_error_code();
    int rc = fc_add_ctx(ctx, w->x, w->y, w->z, w->n);
    if (rc == FC_OK) rc = fc_mul_ctx(ctx, w->z, w->y, t, w->n);
    if (rc == FC_OK) rc = fc_add_ctx(ctx, t, w->x, w->out, w->n);
    fc_buffer_free(t);
    return rc;
}

static void want_chain(worker *w)
{
    for (size_t i = 0; i < w->n; i++) {
        volatile float z = w->hx[i] + w->hy[i];
        volatile float t = z * w->hy[i];
        w->want[i] = t + w->hx[i];
    }
}

/* The break: z *= live scale, with the user kernel (eager, on this thread). */
static int scale_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    worker *w = (worker *)user;
    uint64_t p = fc_buffer_device_ptr(w->z);
    float s = live ? *(const float *)live : 1.0f;
    uint32_t n = (uint32_t)w->n;
    void *args[3] = {&p, &s, &n};
    return fc_kernel_launch_ctx(ctx, w->kernel, (n + 255) / 256, 1, 1, 256, 1, 1, 0, args, 3);
}

static void want_break(worker *w, float s)
{
    for (size_t i = 0; i < w->n; i++) {
        volatile float z = w->hx[i] + w->hy[i];
        volatile float zs = z * s;
        w->want[i] = zs * w->hy[i];
    }
}

/* Poisons out, replays g with `live`, downloads and compares n elements. */
static int replay_and_check(worker *w, fc_graph *g, void *live, const char *what)
{
    if (fc_buffer_upload(w->out, g_poison, sizeof g_poison) != FC_OK) return fail(w, "upload the poison");
    if (fc_graph_launch_live(g, live) != FC_OK) return fail(w, "launch");
    if (fc_sync_ctx(w->ctx) != FC_OK) return fail(w, "sync");
    if (fc_buffer_download(w->out, w->got, w->n * sizeof(float)) != FC_OK) return fail(w, "download");
    size_t bad = ct_first_mismatch(w->got, w->want, w->n);
    if (bad != (size_t)-1) {
        w->c.wrong++;
        note("device %d thread %d: %s, n = %zu: out[%zu] = %.9g, want %.9g", w->device, w->index, what, w->n, bad,
             (double)w->got[bad], (double)w->want[bad]);
        return 0;
    }
    return 1;
}

static const int modes[3] = {FC_CAPTURE_MODE_THREAD_LOCAL, FC_CAPTURE_MODE_GLOBAL, FC_CAPTURE_MODE_RELAXED};
static fc_buckets *g_buckets; /* the ladder up to NMAX, made by main */

/* The size padded to its bucket, run through the context's graph cache
 * (captured on the bucket's first call, replayed after). */
static int cached_run(worker *w)
{
    size_t bucket = fc_buckets_for(g_buckets, w->n);
    if (!bucket) return fail(w, "fc_buckets_for");
    w->n = bucket;
    if (fc_buffer_upload(w->out, g_poison, sizeof g_poison) != FC_OK) return fail(w, "upload the poison");
    int outcome = -1;
    if (fc_graph_cache_run(w->cache, bucket, record_chain, w, NULL, &outcome) != FC_OK)
        return fail(w, "fc_graph_cache_run");
    if (outcome == FC_CACHE_HIT)
        w->c.cache_hits++;
    else if (outcome == FC_CACHE_CAPTURED)
        w->c.cache_captures++;
    else
        return fail(w, outcome == FC_CACHE_EAGER_FAILED ? "the cache's capture failed (eager fallback)"
                                                        : "unexpected cache outcome");
    if (fc_sync_ctx(w->ctx) != FC_OK) return fail(w, "sync");
    if (fc_buffer_download(w->out, w->got, w->n * sizeof(float)) != FC_OK) return fail(w, "download");
    want_chain(w);
    size_t bad = ct_first_mismatch(w->got, w->want, w->n);
    if (bad != (size_t)-1) {
        w->c.wrong++;
        note("device %d thread %d: cached graph, bucket %zu: out[%zu] = %.9g, want %.9g", w->device, w->index, w->n,
             bad, (double)w->got[bad], (double)w->want[bad]);
        return 0;
    }
    return 1;
}

static int one_capture(worker *w, long i)
{
    int mode = modes[i % 3];
    w->n = 64 + next_rand(w) % (NMAX - 63);
    /* buffer churn outside the capture */
    fc_buffer *scratch = fc_buffer_alloc_ctx(w->ctx, 1024 + (next_rand(w) % (1 << 20)));
    if (!scratch) return fail(w, "allocate a scratch buffer");
    fc_buffer_free(scratch);
    w->c.buffers++;

    fc_graph *g = NULL;
    int variant = (int)(i % 5);
    if (variant == 3 && !w->prev) variant = 0;
    if (variant == 4) return cached_run(w);
    switch (variant) {
    case 0: /* plain begin / end; kept for a later end_update */
        if (fc_graph_begin_ctx_mode(w->ctx, mode) != FC_OK) return fail(w, "begin");
        if (record_chain(w->ctx, w) != FC_OK) return fail(w, "record");
        if (!(g = fc_graph_end_ctx(w->ctx))) return fail(w, "end");
        want_chain(w);
        if (!replay_and_check(w, g, NULL, "plain capture")) {
            fc_graph_free(g);
            return 0;
        }
        fc_graph_free(w->prev);
        w->prev = g;
        return 1;
    case 1: { /* fc_graph_capture_ctx, re-recording invalidated captures */
        int rc = fc_graph_capture_ctx(w->ctx, mode, record_chain, w, 8, &g);
        if (rc != FC_OK) return fail(w, "fc_graph_capture_ctx");
        w->c.via_capture_fn++;
        w->c.rerecorded += fc_graph_capture_tries(g) - 1;
        want_chain(w);
        int ok = replay_and_check(w, g, NULL, "fc_graph_capture_ctx");
        fc_graph_free(g);
        return ok;
    }
    case 2: { /* a break running the user kernel with the replay's live scale */
        static const float scales[4] = {0.5f, 2.0f, -1.25f, 3.0f};
        float at_capture = 1.0f, s = scales[next_rand(w) % 4];
        if (fc_graph_begin_live_ctx(w->ctx, mode, &at_capture) != FC_OK) return fail(w, "begin_live");
        if (fc_add_ctx(w->ctx, w->x, w->y, w->z, w->n) != FC_OK) return fail(w, "record add");
        if (fc_graph_break_ctx(w->ctx, scale_break, w) != FC_OK) return fail(w, "break");
        if (fc_mul_ctx(w->ctx, w->z, w->y, w->out, w->n) != FC_OK) return fail(w, "record mul");
        if (!(g = fc_graph_end_ctx(w->ctx))) return fail(w, "end after a break");
        w->c.with_break++;
        want_break(w, s);
        int ok = fc_graph_segment_count(g) == 3 ? replay_and_check(w, g, &s, "capture with a break")
                                                : fail(w, "segment count of a capture with a break");
        fc_graph_free(g);
        return ok;
    }
    default: { /* the same recording ended into the previous graph */
        int updated = -1;
        if (fc_graph_begin_ctx_mode(w->ctx, mode) != FC_OK) return fail(w, "begin (update)");
        if (record_chain(w->ctx, w) != FC_OK) return fail(w, "record (update)");
        if (fc_graph_end_update_ctx(w->ctx, w->prev, &updated) != FC_OK) return fail(w, "end_update");
        w->c.updates++;
        w->c.updated_in_place += updated;
        want_chain(w);
        return replay_and_check(w, w->prev, NULL, "updated graph");
    }
    }
}

static void *work(void *arg)
{
    worker *w = (worker *)arg;
    for (long i = 0; i < w->captures; i++) {
        if (i % w->churn == 0 && !new_context(w, i / w->churn)) {
            /* Count the captures this context would have made as failed. */
            long skip = w->churn - 1;
            if (skip > w->captures - i - 1) skip = w->captures - i - 1;
            w->c.failed += skip;
            i += skip;
            continue;
        }
        if (one_capture(w, i)) w->c.ok++;
    }
    drop_context(w);
    return NULL;
}

/* Runs `per_device` threads on each of `devices` devices; sums the counts. */
static int run_round(int devices, int per_device, long captures, long churn, uint32_t seed, counts *total)
{
    int nthreads = devices * per_device;
    worker *ws = (worker *)calloc((size_t)nthreads, sizeof *ws);
    pthread_t *th = (pthread_t *)calloc((size_t)nthreads, sizeof *th);
    if (!ws || !th) {
        free(ws);
        free(th);
        return 0;
    }
    int started = 0;
    for (int t = 0; t < nthreads; t++) {
        ws[t].device = t % devices;
        ws[t].index = t / devices;
        ws[t].captures = captures;
        ws[t].churn = churn;
        ws[t].rng = seed ^ (0x9e3779b9u * (uint32_t)(t + 1));
        if (!ws[t].rng) ws[t].rng = 1;
        if (pthread_create(&th[t], NULL, work, &ws[t]) != 0) break;
        started++;
    }
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < started; t++) add_counts(total, &ws[t].c);
    free(ws);
    free(th);
    return started == nthreads;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int free_memory(fc_cuda_ctx **monitors, int devices, size_t *out)
{
    for (int d = 0; d < devices; d++)
        if (fc_ctx_mem_info(monitors[d], &out[d], NULL) != FC_OK) return 0;
    return 1;
}

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

int main(int argc, char **argv)
{
    (void)argc;
    ct_init(argv[0]);
    int visible = fc_cuda_device_count();
    int devices = (int)env_long("FC_STORM_DEVICES", visible < 2 ? visible : 2, 1, visible);
    if (devices > MAX_DEVICES) devices = MAX_DEVICES;
    int per_device = (int)env_long("FC_STORM_THREADS", 8, 1, 256);
    long captures = env_long("FC_STORM_CAPTURES", 2000, 1, 100000000);
    long churn = env_long("FC_STORM_CHURN", 250, 1, 100000000);
    long warmup = env_long("FC_STORM_WARMUP", 20, 1, 100000);
    long floor_mib = env_long("FC_STORM_MEM_TOLERANCE_MIB", 2, 0, 1 << 20);
    printf("%s: %d device(s) x %d thread(s) x %ld captures (context churn every %ld, warm-up %ld)\n", ct_prog, devices,
           per_device, captures, churn, warmup);
    if (visible < 2) printf("%s: only %d device visible: the storm runs on it alone\n", ct_prog, visible);

    ct_fill_poison(g_poison, NMAX);
    if (!(g_buckets = fc_buckets_ladder(NMAX))) {
        printf("[FAIL] %s/storm: fc_buckets_ladder: %s\n", ct_prog, fc_last_error());
        return 1;
    }
    fc_cuda_ctx *monitors[MAX_DEVICES] = {0};
    size_t free_start[MAX_DEVICES], free_warm1[MAX_DEVICES], free_warm[MAX_DEVICES], free_end[MAX_DEVICES];
    for (int d = 0; d < devices; d++) {
        /* Private, not green: a green context keeps the primary context
         * alive (NVIDIA's cuGreenCtxCreate retains it), so the primary's
         * teardown would never be seen. */
        if (!(monitors[d] = fc_cuda_init_device_isolated_as(d, FC_ISOLATION_PRIVATE))) {
            printf("[FAIL] %s/storm: monitor context on device %d: %s\n", ct_prog, d, fc_last_error());
            return 1;
        }
    }
    int ok = free_memory(monitors, devices, free_start);
    size_t handles_start = 0, contexts_start = 0, handles_end = 0, contexts_end = 0;
    fc_live_objects(&handles_start, &contexts_start);

    counts warm = {0};
    double t0 = now_s();
    long warm_churn = warmup > 4 ? warmup / 2 : 1;
    ok = ok && run_round(devices, per_device, warmup, warm_churn, 0x51ed, &warm);
    ok = ok && free_memory(monitors, devices, free_warm1);
    ok = ok && run_round(devices, per_device, warmup, warm_churn, 0x51ee, &warm);
    ok = ok && free_memory(monitors, devices, free_warm);
    double t1 = now_s();
    counts c = {0};
    ok = ok && run_round(devices, per_device, captures, churn, 0x5702e, &c);
    double t2 = now_s();
    ok = ok && free_memory(monitors, devices, free_end);
    fc_live_objects(&handles_end, &contexts_end);
    if (!ok) {
        printf("[FAIL] %s/storm: could not run (threads or fc_ctx_mem_info): %s\n", ct_prog, fc_last_error());
        return 1;
    }

    long total = (long)devices * per_device * captures;
    char mem[2048] = "";
    int mem_ok = 1;
    for (int d = 0; d < devices; d++) {
        double first = MIB((double)free_start[d] - (double)free_warm1[d]);
        double second = MIB((double)free_start[d] - (double)free_warm[d]);
        double kept = MIB((double)free_start[d] - (double)free_end[d]);
        mem_ok &= first <= (double)floor_mib && second <= (double)floor_mib && kept <= (double)floor_mib;
        size_t len = strlen(mem);
        snprintf(mem + len, sizeof mem - len,
                 "%sdevice %d: after warm-up 1 %+.1f MiB, warm-up 2 %+.1f MiB, storm %+.1f MiB (each <= %ld)",
                 d ? "; " : "", d, first, second, kept, floor_mib);
    }
    int objects_ok = handles_end == handles_start && contexts_end == contexts_start;
    size_t len = strlen(mem);
    snprintf(mem + len, sizeof mem - len, "; live handles %zu -> %zu, contexts %zu -> %zu", handles_start,
             handles_end, contexts_start, contexts_end);
    /* compute-sanitizer's instrumentation synchronises the device around
     * other threads' calls, which can invalidate a capture: under it (the
     * script sets FC_UNDER_SANITIZER) invalidated captures are reported,
     * not failures; every other rule stands. */
    int sanitizer = getenv("FC_UNDER_SANITIZER") != NULL;
    long excused = sanitizer ? c.invalidated : 0, excused_warm = sanitizer ? warm.invalidated : 0;
    int pass = warm.failed == excused_warm && warm.wrong == 0 && c.failed == excused && c.wrong == 0 &&
               c.ok + excused == total && mem_ok && objects_ok;
    if (excused + excused_warm)
        printf("  %ld invalidated capture(s) excused: running under compute-sanitizer\n", excused + excused_warm);
    for (int i = 0; i < g_note_count; i++) printf("  %s\n", g_notes[i]);
    if (g_notes_dropped) printf("  ... and %ld more\n", g_notes_dropped);
    printf("storm: %d device(s) x %d thread(s) x %ld captures = %ld: %ld ok, %ld failed (%ld invalidated), %ld wrong; "
           "%ld via fc_graph_capture_ctx (%ld re-recorded), %ld with a break, %ld end_update (%ld segments in place), "
           "%ld through graph caches (%ld captured, %ld hits); "
           "%ld contexts (%ld isolated), %ld modules, %ld scratch buffers; warm-up %ld ok, %ld failed, %ld wrong; "
           "memory: %s; %.1f s (warm-ups %.1f s) -> %s\n",
           devices, per_device, captures, total, c.ok, c.failed, c.invalidated, c.wrong, c.via_capture_fn,
           c.rerecorded, c.with_break, c.updates, c.updated_in_place, c.cache_captures + c.cache_hits,
           c.cache_captures, c.cache_hits, c.contexts, c.isolated, c.modules, c.buffers,
           warm.ok, warm.failed, warm.wrong, mem, t2 - t1, t1 - t0, pass ? "PASS" : "FAIL");
    for (int d = 0; d < devices; d++) fc_cuda_ctx_free(monitors[d]);
    fc_buckets_free(g_buckets);
    if (pass) {
        printf("[PASS] %s/storm\n", ct_prog);
        ct_passed++;
    } else {
        printf("[FAIL] %s/storm: see the summary above\n", ct_prog);
        ct_failed++;
    }
    return ct_finish();
}
