/* test_nccl.c - NCCL all-reduce inside fc graphs on 2 GPUs (issue 10).
 * NCCL is opened at run time (examples/interop/interop_libs.h): [SKIP]
 * without 2 CUDA devices or without libnccl ([FAIL] for the latter when
 * FC_REQUIRE_INTEROP=1, as scripts/gpu-interop.sh sets). NCCL_NVLS_ENABLE
 * is forced to 0 before NCCL initialises (NVLink multicast stays off).
 *
 * One process: ncclCommInitAll over devices 0 and 1, then one thread and
 * one fc context (fc_cuda_init_device: the primary context) per device.
 * The step on device d, over COUNT floats:
 *     cnt = cnt + one            fc_add_ctx  (a replay counter on the device)
 *     x   = cnt .* w_d           fc_mul_ctx  (w_d[i] = i % 7 + 1 + 8 d)
 *     y   = all-reduce sum of x  ncclAllReduce on fc_ctx_stream(ctx)
 *     acc = acc + y              fc_add_ctx  (after the collective)
 * After r steps: cnt = r, y = r s, acc = r (r + 1) / 2 s, where
 * s = w_0 + w_1 = 2 (i % 7 + 1) + 8. All are integers below 2^24
 * (acc <= 500500 * 22), so FP32 is exact and the checks are exact.
 *
 *   setup          contexts, buffers; the thread's current CUDA context is
 *                  the fc context's (NCCL uses the current one).
 *   eager_step     the step once, eagerly (warm-up: NCCL connects peers):
 *                  cnt = 1, y = s, acc = s on both devices.
 *   capture        cnt and acc reset; the step captured on each thread
 *                  (fc_graph_begin_ctx / end_ctx, THREAD_LOCAL mode): one
 *                  segment, and cnt still 0 (recorded, not run).
 *   replay_1000    both threads launch their graph 1000 times at once. At
 *                  replays 1, 2, 10, 250, 500 and 999 and after the loop
 *                  (1000) each thread syncs its own stream and checks cnt,
 *                  y and acc; y on one device holds the peer's replay of
 *                  the same number, so each check covers both devices.
 *                  ncclCommGetAsyncError stays ncclSuccess.
 *
 * A thread that stalls (a collective whose peer never came) is caught by a
 * watchdog: after FC_INTEROP_TIMEOUT_S seconds (300) the program prints
 * [FAIL] with each thread's phase, replays launched and errors, and exits 1.
 */
#include "../examples/interop/interop_libs.h"
#include "check.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define NDEV 2
#define COUNT ((size_t)1 << 15)
#define REPLAYS 1000
#define FAIL_GRACE_S 10

static const int checkpoints[] = {1, 2, 10, 250, 500, 999, REPLAYS};

enum { PHASE_SETUP, PHASE_EAGER, PHASE_CAPTURE, PHASE_REPLAY, PHASE_CLEANUP, NPHASES };
static const char *const phase_names[NPHASES] = {"setup", "eager_step", "capture", "replay_1000", "cleanup"};

static il_nccl g_nccl;

typedef struct {
    int dev;
    il_nccl_comm comm;
    fc_cuda_ctx *ctx;
    fc_buffer *cnt, *one, *w, *x, *y, *acc;
    fc_graph *graph;
    float *host; /* COUNT floats */
    atomic_int phase;
    atomic_int launched;
    atomic_int failed;
    char msg[1024];
} worker;

/* Coordination: main opens phase p (phase_go = p), workers run it and
 * count themselves in `finished`; stop ends the workers. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_phase_go = -1, g_finished, g_stop;

static int fail(worker *wk, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(worker *wk, const char *fmt, ...)
{
    if (!wk->failed) {
        char text[768];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        snprintf(wk->msg, sizeof wk->msg, "device %d: %s", wk->dev, text);
    }
    /* Wakes main, which then waits only FAIL_GRACE_S for the peer (that
     * may be stuck in a collective this thread will never join). */
    pthread_mutex_lock(&g_mu);
    atomic_store(&wk->failed, 1);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return -1;
}

#define FC_TRY(wk, call)                                                                                    \
    do {                                                                                                     \
        int rc_ = (call);                                                                                    \
        if (rc_ != FC_OK) {                                                                                  \
            char e_[512];                                                                                    \
            fc_last_error_copy(e_, sizeof e_);                                                               \
            return fail((wk), "%s returned %d: %s", #call, rc_, e_);                                         \
        }                                                                                                    \
    } while (0)

static float w_value(int dev, size_t i)
{
    return (float)(i % 7 + 1 + 8 * (size_t)dev);
}

static float s_value(size_t i)
{
    return w_value(0, i) + w_value(1, i);
}

/* The step, queued on the worker's stream (recorded while it captures). */
static int queue_step(worker *wk)
{
    FC_TRY(wk, fc_add_ctx(wk->ctx, wk->cnt, wk->one, wk->cnt, COUNT));
    FC_TRY(wk, fc_mul_ctx(wk->ctx, wk->cnt, wk->w, wk->x, COUNT));
    const void *send = (const void *)(uintptr_t)fc_buffer_device_ptr(wk->x);
    void *recv = (void *)(uintptr_t)fc_buffer_device_ptr(wk->y);
    int r = g_nccl.ncclAllReduce(send, recv, COUNT, IL_NCCL_FLOAT32, IL_NCCL_SUM, wk->comm, fc_ctx_stream(wk->ctx));
    if (r != IL_NCCL_SUCCESS) {
        char buf[512];
        return fail(wk, "ncclAllReduce: %s", il_nccl_error(&g_nccl, r, wk->comm, buf, sizeof buf));
    }
    FC_TRY(wk, fc_add_ctx(wk->ctx, wk->acc, wk->y, wk->acc, COUNT));
    return 0;
}

/* Downloads `buf` and compares every element with want(i) = scale * base(i). */
static int check_buffer(worker *wk, fc_buffer *buf, const char *name, int after, double scale, int per_element)
{
    FC_TRY(wk, fc_buffer_download(buf, wk->host, COUNT * sizeof(float)));
    for (size_t i = 0; i < COUNT; i++) {
        float want = (float)(scale * (per_element ? (double)s_value(i) : 1.0));
        if (ct_bits(wk->host[i]) != ct_bits(want))
            return fail(wk, "after %d step(s): %s[%zu] = %.9g, want %.9g", after, name, i, (double)wk->host[i],
                        (double)want);
    }
    return 0;
}

/* cnt = r, y = r s, acc = r (r + 1) / 2 s (the caller synced). */
static int check_state(worker *wk, int r)
{
    if (check_buffer(wk, wk->cnt, "cnt", r, (double)r, 0)) return -1;
    if (check_buffer(wk, wk->y, "y", r, (double)r, 1)) return -1;
    return check_buffer(wk, wk->acc, "acc", r, (double)r * (r + 1) / 2.0, 1);
}

static int phase_setup(worker *wk)
{
    wk->ctx = fc_cuda_init_device(wk->dev);
    if (!wk->ctx) return fail(wk, "fc_cuda_init_device: %s", fc_last_error());
    void *current = NULL;
    if (il_current_cu_context(&current) == 0 && current != fc_ctx_cu_context(wk->ctx))
        return fail(wk, "the thread's current CUDA context is %p, the fc context's is %p: NCCL would enqueue "
                        "in another context",
                    current, fc_ctx_cu_context(wk->ctx));
    if (!(wk->host = ct_floats(COUNT))) return fail(wk, "out of host memory");
    fc_buffer **bufs[] = {&wk->cnt, &wk->one, &wk->w, &wk->x, &wk->y, &wk->acc};
    for (size_t b = 0; b < CT_COUNT(bufs); b++)
        if (!(*bufs[b] = fc_buffer_alloc_ctx(wk->ctx, COUNT * sizeof(float))))
            return fail(wk, "fc_buffer_alloc_ctx: %s", fc_last_error());
    for (size_t i = 0; i < COUNT; i++) wk->host[i] = w_value(wk->dev, i);
    FC_TRY(wk, fc_buffer_upload(wk->w, wk->host, COUNT * sizeof(float)));
    ct_fill_value(wk->host, COUNT, 1.0f);
    FC_TRY(wk, fc_buffer_upload(wk->one, wk->host, COUNT * sizeof(float)));
    FC_TRY(wk, fc_buffer_fill_ctx(wk->ctx, wk->cnt, 0, COUNT * sizeof(float), 0));
    FC_TRY(wk, fc_buffer_fill_ctx(wk->ctx, wk->acc, 0, COUNT * sizeof(float), 0));
    FC_TRY(wk, fc_sync_ctx(wk->ctx));
    return 0;
}

static int phase_eager(worker *wk)
{
    if (queue_step(wk)) return -1;
    FC_TRY(wk, fc_sync_ctx(wk->ctx));
    return check_state(wk, 1);
}

static int phase_capture(worker *wk)
{
    FC_TRY(wk, fc_buffer_fill_ctx(wk->ctx, wk->cnt, 0, COUNT * sizeof(float), 0));
    FC_TRY(wk, fc_buffer_fill_ctx(wk->ctx, wk->acc, 0, COUNT * sizeof(float), 0));
    FC_TRY(wk, fc_sync_ctx(wk->ctx));
    FC_TRY(wk, fc_graph_begin_ctx(wk->ctx));
    if (queue_step(wk)) {
        fc_graph_abort_ctx(wk->ctx);
        return -1;
    }
    wk->graph = fc_graph_end_ctx(wk->ctx);
    if (!wk->graph) return fail(wk, "fc_graph_end_ctx: %s", fc_last_error());
    int segments = fc_graph_segment_count(wk->graph);
    if (segments != 1) return fail(wk, "segment count %d, want 1", segments);
    return check_buffer(wk, wk->cnt, "cnt (right after the capture)", 0, 0.0, 0);
}

static int phase_replay(worker *wk)
{
    size_t next = 0;
    for (int r = 1; r <= REPLAYS; r++) {
        FC_TRY(wk, fc_graph_launch(wk->graph));
        atomic_store(&wk->launched, r);
        if (next < CT_COUNT(checkpoints) && r == checkpoints[next]) {
            next++;
            FC_TRY(wk, fc_sync_ctx(wk->ctx));
            if (check_state(wk, r)) return -1;
        }
    }
    int async_error = 0;
    int r = g_nccl.ncclCommGetAsyncError(wk->comm, &async_error);
    if (r != IL_NCCL_SUCCESS || async_error != IL_NCCL_SUCCESS) {
        char buf[512];
        return fail(wk, "ncclCommGetAsyncError: returned %d, async error %s", r,
                    il_nccl_error(&g_nccl, async_error, wk->comm, buf, sizeof buf));
    }
    return 0;
}

static void phase_cleanup(worker *wk)
{
    fc_graph_free(wk->graph);
    wk->graph = NULL;
    CT_FREE_BUFFERS(wk->cnt, wk->one, wk->w, wk->x, wk->y, wk->acc);
    wk->cnt = wk->one = wk->w = wk->x = wk->y = wk->acc = NULL;
}

static void *worker_main(void *arg)
{
    worker *wk = (worker *)arg;
    for (int p = 0; p < NPHASES; p++) {
        pthread_mutex_lock(&g_mu);
        while (g_phase_go < p && !g_stop) pthread_cond_wait(&g_cv, &g_mu);
        int stop = g_stop;
        pthread_mutex_unlock(&g_mu);
        if (stop) break;
        atomic_store(&wk->phase, p);
        switch (p) {
        case PHASE_SETUP: phase_setup(wk); break;
        case PHASE_EAGER: phase_eager(wk); break;
        case PHASE_CAPTURE: phase_capture(wk); break;
        case PHASE_REPLAY: phase_replay(wk); break;
        default: phase_cleanup(wk); break;
        }
        pthread_mutex_lock(&g_mu);
        g_finished++;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
    }
    return NULL;
}

/* Prints every worker's state and leaves at once (a stalled collective
 * cannot be cleaned up). */
static void die_stalled(worker *wks, int phase, const char *why)
{
    printf("[FAIL] %s/%s: %s\n", ct_prog, phase_names[phase], why);
    for (int d = 0; d < NDEV; d++)
        printf("       device %d: in %s, %d replay(s) launched%s%s\n", d, phase_names[atomic_load(&wks[d].phase)],
               atomic_load(&wks[d].launched), wks[d].failed ? ", failed: " : "", wks[d].failed ? wks[d].msg : "");
    fflush(stdout);
    _exit(1);
}

int main(int argc, char **argv)
{
    (void)argc;
    ct_init(argv[0]);
    int ndev = fc_cuda_device_count();
    if (ndev < NDEV) {
        printf("[SKIP] %s: needs %d CUDA devices, %d visible\n", ct_prog, NDEV, ndev);
        return 0;
    }
    const char *previous = il_nccl_disable_nvls();
    if (previous && strcmp(previous, "0") != 0)
        printf("%s: NCCL_NVLS_ENABLE was '%s'; set to 0 (NVLink multicast stays off)\n", ct_prog, previous);
    char err[4096];
    if (il_nccl_load(&g_nccl, err, sizeof err) != 0) {
        if (il_required()) {
            printf("[FAIL] %s: NCCL could not be loaded (FC_REQUIRE_INTEROP=1): %s\n", ct_prog, err);
            return 1;
        }
        printf("[SKIP] %s: no NCCL (set FC_NCCL_LIBRARY to a libnccl.so path): %s\n", ct_prog, err);
        return 0;
    }
    int version = 0;
    g_nccl.ncclGetVersion(&version);
    printf("%s: NCCL %d from %s, NCCL_NVLS_ENABLE=%s\n", ct_prog, version, g_nccl.path, getenv("NCCL_NVLS_ENABLE"));
    const char *t = getenv("FC_INTEROP_TIMEOUT_S");
    int timeout_s = t && atoi(t) > 0 ? atoi(t) : 300;

    /* Device 0's primary context stays retained (and current on this
     * thread) for the whole run. */
    fc_cuda_ctx *keeper = fc_cuda_init_device(0);
    il_nccl_comm comms[NDEV] = {NULL};
    const int devlist[NDEV] = {0, 1};
    int r = g_nccl.ncclCommInitAll(comms, NDEV, devlist);
    if (r != IL_NCCL_SUCCESS) {
        char buf[512];
        printf("[FAIL] %s/setup: ncclCommInitAll(2, {0, 1}): %s\n", ct_prog,
               il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
        return 1;
    }

    static worker wks[NDEV];
    pthread_t threads[NDEV];
    for (int d = 0; d < NDEV; d++) {
        wks[d].dev = d;
        wks[d].comm = comms[d];
        if (pthread_create(&threads[d], NULL, worker_main, &wks[d]) != 0) {
            printf("[FAIL] %s/setup: pthread_create failed\n", ct_prog);
            fflush(stdout);
            _exit(1);
        }
    }

    int all_ok = 1;
    for (int p = 0; p < NPHASES && all_ok; p++) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += timeout_s;
        pthread_mutex_lock(&g_mu);
        g_finished = 0;
        g_phase_go = p;
        pthread_cond_broadcast(&g_cv);
        int grace = 0;
        while (g_finished < NDEV) {
            if (!grace && (atomic_load(&wks[0].failed) || atomic_load(&wks[1].failed))) {
                grace = 1; /* one side failed: the other may wait forever in a collective */
                clock_gettime(CLOCK_REALTIME, &deadline);
                deadline.tv_sec += FAIL_GRACE_S;
            }
            if (pthread_cond_timedwait(&g_cv, &g_mu, &deadline) == ETIMEDOUT && g_finished < NDEV) {
                pthread_mutex_unlock(&g_mu);
                char why[160];
                if (grace)
                    snprintf(why, sizeof why, "a thread failed and its peer did not finish within %d s",
                             FAIL_GRACE_S);
                else
                    snprintf(why, sizeof why, "no progress for %d s (FC_INTEROP_TIMEOUT_S)", timeout_s);
                die_stalled(wks, p, why);
            }
        }
        pthread_mutex_unlock(&g_mu);
        for (int d = 0; d < NDEV; d++) {
            if (wks[d].failed) {
                printf("[FAIL] %s/%s: %s\n", ct_prog, phase_names[p], wks[d].msg);
                all_ok = 0;
            }
        }
        if (all_ok && p != PHASE_CLEANUP) {
            printf("[PASS] %s/%s\n", ct_prog, phase_names[p]);
            ct_passed++;
        }
        if (!all_ok) {
            /* Work may be stuck in a collective: leave without cleanup. */
            ct_failed++;
            fflush(stdout);
            _exit(ct_finish());
        }
    }
    for (int d = 0; d < NDEV; d++) pthread_join(threads[d], NULL);
    for (int d = 0; d < NDEV; d++) {
        r = g_nccl.ncclCommDestroy(comms[d]);
        if (r != IL_NCCL_SUCCESS) {
            char buf[512];
            printf("[FAIL] %s/cleanup: ncclCommDestroy(device %d): %s\n", ct_prog, d,
                   il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
            ct_failed++;
        }
        fc_cuda_ctx_free(wks[d].ctx);
        free(wks[d].host);
    }
    fc_cuda_ctx_free(keeper);
    return ct_finish();
}
