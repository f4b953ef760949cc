/* interop_bench.c - benchmark rows of issue 10: cuBLAS and NCCL work inside
 * fc graphs, replayed, against the same work queued eagerly, and the
 * scaling of a replay loop from one GPU to two.
 *
 *   interop_bench [--rounds R] [--iters N] [--loop-iters L] [--count C] [--quick]
 *
 * Defaults: 5 rounds, N = 2000 timed iterations per timing row, L = 10000
 * iterations per replay loop, C = 4096 floats (16 KiB: one decode step's
 * hidden state) per all-reduce; --quick is 2 rounds, N = 300, L = 500.
 *
 * JSON lines on stdout (one per row and round; bench/report.py keeps each
 * row's best round), progress on stderr. Every row has "impl":"fc", "row",
 * "kernels" (work items in the step: our kernels + the cuBLAS / NCCL call)
 * and "round"; timing rows have median_us, p10_us, p90_us, n; rate rows
 * have iters_per_s (higher is better), per_device, and the 2-device rows
 * ratio_vs_1dev (this round's 2-device rate / this round's 1-device rate).
 * A row that cannot run here is {"impl":"fc","row":...,"skipped":"why"}.
 *
 * Rows (every time includes fc_sync_ctx, i.e. the step is complete):
 *   interop_cublas_eager_sync        A = A0 .* S (fc_mul), C = 0.5 A B (cublasSgemm_v2, M,N,K = 256,128,64),
 *                                    OUT = C + D (fc_add), queued eagerly + sync; kernels 3
 *   interop_cublas_replay_sync       the same captured: fc_graph_launch + sync
 *   interop_nccl_eager_sync_1dev     step = cnt += 1 (fc_add), x = cnt .* w (fc_mul), y = all-reduce sum of x
 *                                    (ncclAllReduce, C floats), acc += y (fc_add); eager + sync; kernels 4.
 *                                    1dev: a 1-rank communicator on device 0
 *   interop_nccl_replay_sync_1dev    the step captured: launch + sync
 *   interop_nccl_eager_sync_2dev     the same on devices 0 and 1 (2-rank communicator from ncclCommInitAll),
 *   interop_nccl_replay_sync_2dev    one thread and fc context each, at once; median of device 0's iterations
 *                                    (device 1's in median_us_dev1)
 *   interop_nccl_replay_loop_per_s_1dev / _2dev
 *                                    L x (launch + sync) of the NCCL step graph; iterations/s summed
 *                                    over the devices. The scaling goal reads _2dev's ratio_vs_1dev (>= 1.9).
 *                                    The 1-device baseline replays the same captured step with a 1-rank
 *                                    communicator (its all-reduce is a device-local copy of x to y), so the
 *                                    per-GPU work is the same; the 2-device loop adds the NVLink exchange and
 *                                    the wait for the peer, which the ratio includes.
 *   interop_fc_replay_loop_per_s_1dev / _2dev
 *                                    the same loop of the step without the all-reduce (acc += x): the scaling of
 *                                    fc-graph's own replay path, with no coupling between the devices.
 *
 * NCCL_NVLS_ENABLE is forced to 0. Libraries: see examples/interop/interop_libs.h (FC_CUBLAS_LIBRARY,
 * FC_NCCL_LIBRARY). A stalled command (a collective without its peer) ends the program after
 * FC_INTEROP_TIMEOUT_S seconds (300) with the workers' states.
 */
#include "../../examples/interop/interop_libs.h"
#include "cuda/fc_cuda.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define GM 256
#define GN 128
#define GK 64
#define NWORKERS 2

static int g_rounds = 5, g_iters = 2000, g_loop_iters = 10000;
static size_t g_count = 4096;
static il_cublas g_cublas;
static il_nccl g_nccl;
static int g_have_cublas, g_have_nccl;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[interop-bench] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* p in [0, 1] of sorted v[0..n). */
static double pct(const double *v, int n, double p)
{
    double idx = p * (n - 1);
    int lo = (int)idx;
    int hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (idx - lo);
}

static double median_of(double *us, int n)
{
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    return pct(us, n, 0.5);
}

/* Sorts us and prints a timing row. */
static void emit_times(const char *row, int kernels, double *us, int n, int round, const char *extra)
{
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    printf("{\"impl\":\"fc\",\"row\":\"%s\",\"kernels\":%d,\"median_us\":%.3f,\"p10_us\":%.3f,\"p90_us\":%.3f,"
           "\"n\":%d,\"round\":%d%s}\n",
           row, kernels, pct(us, n, 0.5), pct(us, n, 0.1), pct(us, n, 0.9), n, round, extra ? extra : "");
    fflush(stdout);
    logf_("round %d %-34s median %9.3f us (p10 %9.3f, p90 %9.3f, n=%d)", round, row, pct(us, n, 0.5),
          pct(us, n, 0.1), pct(us, n, 0.9), n);
}

static void emit_skip(const char *row, int kernels, const char *why)
{
    printf("{\"impl\":\"fc\",\"row\":\"%s\",\"kernels\":%d,\"skipped\":\"%s\"}\n", row, kernels, why);
    fflush(stdout);
    logf_("%s skipped: %s", row, why);
}

/* Leaves with status 1 after a failure (work may be stuck on a device). */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[interop-bench] FAILED: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

#define FC_MUST(call)                                                                                       \
    do {                                                                                                     \
        int rc_ = (call);                                                                                    \
        if (rc_ != FC_OK) {                                                                                  \
            char e_[512];                                                                                    \
            fc_last_error_copy(e_, sizeof e_);                                                               \
            die("%s:%d: %s returned %d: %s", __FILE__, __LINE__, #call, rc_, e_);                            \
        }                                                                                                    \
    } while (0)

static fc_buffer *must_alloc(fc_cuda_ctx *ctx, size_t bytes)
{
    fc_buffer *b = fc_buffer_alloc_ctx(ctx, bytes);
    if (!b) die("fc_buffer_alloc_ctx(%zu): %s", bytes, fc_last_error());
    return b;
}

static void fill_const(fc_buffer *b, size_t n, float v)
{
    float *h = (float *)malloc(n * sizeof(float));
    if (!h) die("out of host memory");
    for (size_t i = 0; i < n; i++) h[i] = v;
    FC_MUST(fc_buffer_upload(b, h, n * sizeof(float)));
    free(h);
}

static void check_context(fc_cuda_ctx *ctx, const char *who)
{
    void *current = NULL;
    if (il_current_cu_context(&current) == 0 && current != fc_ctx_cu_context(ctx))
        die("%s: the thread's current CUDA context is %p, the fc context's %p", who, current,
            fc_ctx_cu_context(ctx));
}

/* ---- cuBLAS rows (device 0, this thread) ------------------------------------ */

typedef struct {
    fc_cuda_ctx *ctx;
    il_cublas_handle h;
    fc_buffer *a0, *s, *a, *b, *c, *d, *out, *ws;
    fc_graph *g;
} gemm_bench;

static void gemm_queue(gemm_bench *gb)
{
    FC_MUST(fc_mul_ctx(gb->ctx, gb->a0, gb->s, gb->a, (size_t)GM * GK));
    const float alpha = 0.5f, beta = 0.0f;
    int st = g_cublas.cublasSgemm_v2(gb->h, IL_CUBLAS_OP_N, IL_CUBLAS_OP_N, GM, GN, GK, &alpha,
                                     (const float *)(uintptr_t)fc_buffer_device_ptr(gb->a), GM,
                                     (const float *)(uintptr_t)fc_buffer_device_ptr(gb->b), GK, &beta,
                                     (float *)(uintptr_t)fc_buffer_device_ptr(gb->c), GM);
    if (st != IL_CUBLAS_STATUS_SUCCESS) {
        char buf[64];
        die("cublasSgemm_v2: %s", il_cublas_status(&g_cublas, st, buf, sizeof buf));
    }
    FC_MUST(fc_add_ctx(gb->ctx, gb->c, gb->d, gb->out, (size_t)GM * GN));
}

static void gemm_setup(gemm_bench *gb)
{
    memset(gb, 0, sizeof *gb);
    gb->ctx = fc_cuda_init_device(0);
    if (!gb->ctx) die("fc_cuda_init_device(0): %s", fc_last_error());
    check_context(gb->ctx, "cuBLAS thread");
    const size_t ak = (size_t)GM * GK * 4, kn = (size_t)GK * GN * 4, mn = (size_t)GM * GN * 4;
    gb->a0 = must_alloc(gb->ctx, ak);
    gb->s = must_alloc(gb->ctx, ak);
    gb->a = must_alloc(gb->ctx, ak);
    gb->b = must_alloc(gb->ctx, kn);
    gb->c = must_alloc(gb->ctx, mn);
    gb->d = must_alloc(gb->ctx, mn);
    gb->out = must_alloc(gb->ctx, mn);
    gb->ws = must_alloc(gb->ctx, IL_CUBLAS_WORKSPACE_BYTES);
    fill_const(gb->a0, (size_t)GM * GK, 1.0f);
    fill_const(gb->s, (size_t)GM * GK, 0.5f);
    fill_const(gb->b, (size_t)GK * GN, 2.0f);
    fill_const(gb->d, (size_t)GM * GN, 1.0f);
    char buf[64];
    int st = g_cublas.cublasCreate_v2(&gb->h);
    if (st == IL_CUBLAS_STATUS_SUCCESS) st = g_cublas.cublasSetStream_v2(gb->h, fc_ctx_stream(gb->ctx));
    if (st == IL_CUBLAS_STATUS_SUCCESS)
        st = g_cublas.cublasSetWorkspace_v2(gb->h, (void *)(uintptr_t)fc_buffer_device_ptr(gb->ws),
                                            IL_CUBLAS_WORKSPACE_BYTES);
    if (st == IL_CUBLAS_STATUS_SUCCESS) st = g_cublas.cublasSetMathMode(gb->h, IL_CUBLAS_DEFAULT_MATH);
    if (st != IL_CUBLAS_STATUS_SUCCESS) die("cuBLAS handle setup: %s", il_cublas_status(&g_cublas, st, buf, sizeof buf));
    for (int i = 0; i < 20; i++) gemm_queue(gb); /* warm-up */
    FC_MUST(fc_sync_ctx(gb->ctx));
    FC_MUST(fc_graph_begin_ctx(gb->ctx));
    gemm_queue(gb);
    gb->g = fc_graph_end_ctx(gb->ctx);
    if (!gb->g) die("fc_graph_end_ctx (cuBLAS step): %s", fc_last_error());
    for (int i = 0; i < 20; i++) FC_MUST(fc_graph_launch(gb->g));
    FC_MUST(fc_sync_ctx(gb->ctx));
    /* Sanity: OUT = 0.5 * sum_k (1 * 0.5) * 2 + 1 = 0.5 K + 1. */
    float out0 = 0.0f;
    FC_MUST(fc_buffer_download(gb->out, &out0, sizeof out0));
    if (out0 != 0.5f * GK + 1.0f) die("cuBLAS step computed %g, want %g", (double)out0, 0.5 * GK + 1.0);
}

static void gemm_round(gemm_bench *gb, int round, double *us)
{
    for (int order = 0; order < 2; order++) {
        int replay = (order + round) % 2;
        for (int i = 0; i < g_iters; i++) {
            double t0 = now_us();
            if (replay)
                FC_MUST(fc_graph_launch(gb->g));
            else
                gemm_queue(gb);
            FC_MUST(fc_sync_ctx(gb->ctx));
            us[i] = now_us() - t0;
        }
        emit_times(replay ? "interop_cublas_replay_sync" : "interop_cublas_eager_sync", 3, us, g_iters, round, NULL);
    }
}

static void gemm_free(gemm_bench *gb)
{
    fc_graph_free(gb->g);
    if (gb->h) g_cublas.cublasDestroy_v2(gb->h);
    fc_buffer *bufs[] = {gb->a0, gb->s, gb->a, gb->b, gb->c, gb->d, gb->out, gb->ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) fc_buffer_free(bufs[i]);
    fc_cuda_ctx_free(gb->ctx);
}

/* ---- NCCL and fc-only rows (one worker thread per device) -------------------- */

enum { OP_SETUP, OP_EAGER_SYNC, OP_REPLAY_SYNC, OP_LOOP, OP_FREE, OP_EXIT };
enum { KIND_NCCL, KIND_FC };

typedef struct {
    int op, kind, ndev, iters;
} command;

typedef struct {
    int dev;
    il_nccl_comm comm1, comm2; /* 1-rank (device 0 only) and 2-rank communicators */
    fc_cuda_ctx *ctx;
    fc_buffer *cnt, *one, *w, *x, *y, *acc;
    fc_graph *g_nccl1, *g_nccl2, *g_fc;
    double *us;
    double elapsed_us;
    float cnt0, y0; /* element 0 after the command */
    atomic_int busy_op;
} worker;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t g_start2;
static command g_cmd;
static int g_cmd_seq, g_done;
static worker g_workers[NWORKERS];

static void step_queue(worker *wk, int kind, il_nccl_comm comm)
{
    FC_MUST(fc_add_ctx(wk->ctx, wk->cnt, wk->one, wk->cnt, g_count));
    FC_MUST(fc_mul_ctx(wk->ctx, wk->cnt, wk->w, wk->x, g_count));
    if (kind == KIND_FC) {
        FC_MUST(fc_add_ctx(wk->ctx, wk->acc, wk->x, wk->acc, g_count));
        return;
    }
    int r = g_nccl.ncclAllReduce((const void *)(uintptr_t)fc_buffer_device_ptr(wk->x),
                                 (void *)(uintptr_t)fc_buffer_device_ptr(wk->y), g_count, IL_NCCL_FLOAT32,
                                 IL_NCCL_SUM, comm, fc_ctx_stream(wk->ctx));
    if (r != IL_NCCL_SUCCESS) {
        char buf[512];
        die("device %d: ncclAllReduce: %s", wk->dev, il_nccl_error(&g_nccl, r, comm, buf, sizeof buf));
    }
    FC_MUST(fc_add_ctx(wk->ctx, wk->acc, wk->y, wk->acc, g_count));
}

static fc_graph *capture_step(worker *wk, int kind, il_nccl_comm comm)
{
    FC_MUST(fc_graph_begin_ctx(wk->ctx));
    step_queue(wk, kind, comm);
    fc_graph *g = fc_graph_end_ctx(wk->ctx);
    if (!g) die("device %d: fc_graph_end_ctx: %s", wk->dev, fc_last_error());
    return g;
}

static void worker_setup(worker *wk)
{
    wk->ctx = fc_cuda_init_device(wk->dev);
    if (!wk->ctx) die("fc_cuda_init_device(%d): %s", wk->dev, fc_last_error());
    check_context(wk->ctx, wk->dev ? "device 1 worker" : "device 0 worker");
    fc_buffer **bufs[] = {&wk->cnt, &wk->one, &wk->w, &wk->x, &wk->y, &wk->acc};
    for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) *bufs[b] = must_alloc(wk->ctx, g_count * 4);
    fill_const(wk->one, g_count, 1.0f);
    fill_const(wk->w, g_count, (float)(1 + wk->dev));
    FC_MUST(fc_buffer_fill_ctx(wk->ctx, wk->cnt, 0, g_count * 4, 0));
    FC_MUST(fc_buffer_fill_ctx(wk->ctx, wk->acc, 0, g_count * 4, 0));
    if (!(wk->us = (double *)malloc((size_t)(g_iters > g_loop_iters ? g_iters : g_loop_iters) * sizeof(double))))
        die("out of host memory");
    /* Warm-up eagerly (NCCL connects its peers on first use), then capture. */
    for (int i = 0; i < 5; i++) {
        if (wk->comm1) step_queue(wk, KIND_NCCL, wk->comm1);
        if (wk->comm2) step_queue(wk, KIND_NCCL, wk->comm2);
        step_queue(wk, KIND_FC, NULL);
    }
    FC_MUST(fc_sync_ctx(wk->ctx));
    if (wk->comm1) wk->g_nccl1 = capture_step(wk, KIND_NCCL, wk->comm1);
    if (wk->comm2) wk->g_nccl2 = capture_step(wk, KIND_NCCL, wk->comm2);
    wk->g_fc = capture_step(wk, KIND_FC, NULL);
    fc_graph *gs[] = {wk->g_nccl1, wk->g_nccl2, wk->g_fc};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 3; k++)
            if (gs[k]) FC_MUST(fc_graph_launch(gs[k]));
    FC_MUST(fc_sync_ctx(wk->ctx));
}

static void worker_run(worker *wk, const command *c)
{
    il_nccl_comm comm = c->ndev == 1 ? wk->comm1 : wk->comm2;
    fc_graph *g = c->kind == KIND_FC ? wk->g_fc : (c->ndev == 1 ? wk->g_nccl1 : wk->g_nccl2);
    if (c->ndev == 2) pthread_barrier_wait(&g_start2);
    double start = now_us();
    for (int i = 0; i < c->iters; i++) {
        double t0 = now_us();
        if (c->op == OP_EAGER_SYNC)
            step_queue(wk, c->kind, comm);
        else
            FC_MUST(fc_graph_launch(g));
        FC_MUST(fc_sync_ctx(wk->ctx));
        wk->us[i] = now_us() - t0;
    }
    wk->elapsed_us = now_us() - start;
    FC_MUST(fc_buffer_download(wk->cnt, &wk->cnt0, sizeof(float)));
    FC_MUST(fc_buffer_download(wk->y, &wk->y0, sizeof(float)));
}

static void worker_free(worker *wk)
{
    fc_graph_free(wk->g_nccl1);
    fc_graph_free(wk->g_nccl2);
    fc_graph_free(wk->g_fc);
    wk->g_nccl1 = wk->g_nccl2 = wk->g_fc = NULL;
    fc_buffer *bufs[] = {wk->cnt, wk->one, wk->w, wk->x, wk->y, wk->acc};
    for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) fc_buffer_free(bufs[b]);
}

static void *worker_main(void *arg)
{
    worker *wk = (worker *)arg;
    int seen = 0;
    for (;;) {
        pthread_mutex_lock(&g_mu);
        while (g_cmd_seq == seen) pthread_cond_wait(&g_cv, &g_mu);
        seen = g_cmd_seq;
        command c = g_cmd;
        pthread_mutex_unlock(&g_mu);
        if (c.op == OP_EXIT) return NULL;
        if (wk->dev < c.ndev) {
            atomic_store(&wk->busy_op, c.op);
            switch (c.op) {
            case OP_SETUP: worker_setup(wk); break;
            case OP_FREE: worker_free(wk); break;
            default: worker_run(wk, &c); break;
            }
            atomic_store(&wk->busy_op, -1);
        }
        pthread_mutex_lock(&g_mu);
        g_done++;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
    }
}

static int g_timeout_s = 300;

/* Runs a command on the workers and waits (watchdog: g_timeout_s). */
static void run_command(int op, int kind, int ndev, int iters, int nworkers)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += g_timeout_s;
    pthread_mutex_lock(&g_mu);
    g_cmd = (command){op, kind, ndev, iters};
    g_done = 0;
    g_cmd_seq++;
    pthread_cond_broadcast(&g_cv);
    while (g_done < nworkers) {
        if (pthread_cond_timedwait(&g_cv, &g_mu, &deadline) == ETIMEDOUT && g_done < nworkers)
            die("command %d (kind %d, %d device(s)) made no progress for %d s (FC_INTEROP_TIMEOUT_S); workers busy "
                "with op %d / %d",
                op, kind, ndev, g_timeout_s, atomic_load(&g_workers[0].busy_op), atomic_load(&g_workers[1].busy_op));
    }
    pthread_mutex_unlock(&g_mu);
}

/* After an NCCL command: y = sum over the ranks of cnt_d * w_d (w_d = 1 + d). */
static void check_nccl_result(int ndev)
{
    double want = 0.0;
    for (int d = 0; d < ndev; d++) want += (double)g_workers[d].cnt0 * (1 + d);
    for (int d = 0; d < ndev; d++)
        if ((double)g_workers[d].y0 != want)
            die("device %d: y[0] = %g after the %d-device all-reduce, want %g (cnt: %g, %g)", d,
                (double)g_workers[d].y0, ndev, want, (double)g_workers[0].cnt0,
                ndev > 1 ? (double)g_workers[1].cnt0 : 0.0);
}

/* Timing rows of one (op, kind = NCCL, ndev). */
static void nccl_times(int op, int ndev, int round, int nworkers)
{
    run_command(op, KIND_NCCL, ndev, g_iters, nworkers);
    check_nccl_result(ndev);
    char row[96], extra[96] = "";
    snprintf(row, sizeof row, "interop_nccl_%s_sync_%ddev", op == OP_EAGER_SYNC ? "eager" : "replay", ndev);
    if (ndev == 2) snprintf(extra, sizeof extra, ",\"median_us_dev1\":%.3f", median_of(g_workers[1].us, g_iters));
    emit_times(row, 4, g_workers[0].us, g_iters, round, extra);
}

/* A replay loop of `kind` on 1 then 2 devices (2 only when available);
 * prints both rate rows. */
static void loop_rows(int kind, int round, int two, int nworkers)
{
    const char *base = kind == KIND_NCCL ? "interop_nccl_replay_loop_per_s" : "interop_fc_replay_loop_per_s";
    const int kernels = kind == KIND_NCCL ? 4 : 3;
    double rate1 = 0.0;
    for (int ndev = 1; ndev <= (two ? 2 : 1); ndev++) {
        run_command(OP_LOOP, kind, ndev, g_loop_iters, nworkers);
        if (kind == KIND_NCCL) check_nccl_result(ndev);
        double per[NWORKERS] = {0}, total = 0.0;
        for (int d = 0; d < ndev; d++) total += per[d] = g_loop_iters / (g_workers[d].elapsed_us / 1e6);
        char extra[160] = "";
        if (ndev == 2)
            snprintf(extra, sizeof extra, ",\"per_device\":[%.1f,%.1f],\"ratio_vs_1dev\":%.4f", per[0], per[1],
                     total / rate1);
        else
            rate1 = total;
        char note[48] = "";
        if (ndev == 2) snprintf(note, sizeof note, " (%.2fx 1 device)", total / rate1);
        printf("{\"impl\":\"fc\",\"row\":\"%s_%ddev\",\"kernels\":%d,\"iters_per_s\":%.1f,\"iters\":%d,\"round\":%d%s}\n",
               base, ndev, kernels, total, g_loop_iters, round, extra);
        fflush(stdout);
        logf_("round %d %s_%ddev %.0f iterations/s%s", round, base, ndev, total, note);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: interop_bench [--rounds R] [--iters N] [--loop-iters N] [--count FLOATS] [--quick]\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--quick")) {
            g_rounds = 2;
            g_iters = 300;
            g_loop_iters = 500;
        } else if (!strcmp(a, "--rounds") && has_value) {
            g_rounds = atoi(argv[++i]);
        } else if (!strcmp(a, "--iters") && has_value) {
            g_iters = atoi(argv[++i]);
        } else if (!strcmp(a, "--loop-iters") && has_value) {
            g_loop_iters = atoi(argv[++i]);
        } else if (!strcmp(a, "--count") && has_value) {
            g_count = (size_t)strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (g_rounds < 1 || g_iters < 10 || g_loop_iters < 10 || g_count < 1 || g_count > ((size_t)1 << 26)) {
        fprintf(stderr, "interop_bench: need rounds >= 1, iters >= 10, loop-iters >= 10, 1 <= count <= 2^26\n");
        return 2;
    }
    const char *t = getenv("FC_INTEROP_TIMEOUT_S");
    if (t && atoi(t) > 0) g_timeout_s = atoi(t);

    fc_cuda_ctx *probe = fc_cuda_init_device(0);
    if (!probe) {
        fprintf(stderr, "[SKIP] interop_bench: no CUDA device 0: %s\n", fc_last_error());
        return 0;
    }
    const int ndev = fc_cuda_device_count();
    const char *previous = il_nccl_disable_nvls();
    if (previous && strcmp(previous, "0") != 0) logf_("NCCL_NVLS_ENABLE was '%s'; set to 0", previous);
    char err[4096];
    g_have_cublas = il_cublas_load(&g_cublas, err, sizeof err) == 0;
    if (!g_have_cublas) logf_("no cuBLAS: %s", err);
    g_have_nccl = il_nccl_load(&g_nccl, err, sizeof err) == 0;
    if (!g_have_nccl) logf_("no NCCL: %s", err);
    logf_("libfcgraph %s, %d device(s), cuBLAS %s, NCCL %s, count %zu floats, rounds %d, iters %d, loop %d",
          fc_version(), ndev, g_have_cublas ? g_cublas.path : "-", g_have_nccl ? g_nccl.path : "-", g_count,
          g_rounds, g_iters, g_loop_iters);
    if (il_required() && (!g_have_cublas || !g_have_nccl)) die("FC_REQUIRE_INTEROP=1 and a library is missing");

    gemm_bench gb;
    double *us = (double *)malloc((size_t)g_iters * sizeof(double));
    if (!us) die("out of host memory");
    if (g_have_cublas) gemm_setup(&gb);

    const int two = ndev >= 2;
    const int nworkers = two ? 2 : 1;
    il_nccl_comm comm1 = NULL, comm2[2] = {NULL, NULL};
    if (g_have_nccl) {
        const int devs[2] = {0, 1};
        char buf[512];
        int r = g_nccl.ncclCommInitAll(&comm1, 1, devs);
        if (r != IL_NCCL_SUCCESS) die("ncclCommInitAll(1, {0}): %s", il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
        if (two && (r = g_nccl.ncclCommInitAll(comm2, 2, devs)) != IL_NCCL_SUCCESS)
            die("ncclCommInitAll(2, {0, 1}): %s", il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
    }
    pthread_t threads[NWORKERS];
    if (pthread_barrier_init(&g_start2, NULL, 2) != 0) die("pthread_barrier_init failed");
    for (int d = 0; d < nworkers; d++) {
        g_workers[d].dev = d;
        g_workers[d].comm1 = d == 0 ? comm1 : NULL;
        g_workers[d].comm2 = comm2[d];
        atomic_store(&g_workers[d].busy_op, -1);
        if (pthread_create(&threads[d], NULL, worker_main, &g_workers[d]) != 0) die("pthread_create failed");
    }
    run_command(OP_SETUP, KIND_NCCL, nworkers, 0, nworkers);

    if (!g_have_cublas) {
        emit_skip("interop_cublas_eager_sync", 3, "no libcublas");
        emit_skip("interop_cublas_replay_sync", 3, "no libcublas");
    }
    if (!g_have_nccl) {
        const char *rows[] = {"interop_nccl_eager_sync_1dev", "interop_nccl_replay_sync_1dev",
                              "interop_nccl_eager_sync_2dev", "interop_nccl_replay_sync_2dev",
                              "interop_nccl_replay_loop_per_s_1dev", "interop_nccl_replay_loop_per_s_2dev"};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) emit_skip(rows[i], 4, "no libnccl");
    } else if (!two) {
        char why[64];
        snprintf(why, sizeof why, "needs 2 CUDA devices, %d visible", ndev);
        emit_skip("interop_nccl_eager_sync_2dev", 4, why);
        emit_skip("interop_nccl_replay_sync_2dev", 4, why);
        emit_skip("interop_nccl_replay_loop_per_s_2dev", 4, why);
    }
    if (!two) {
        char why[64];
        snprintf(why, sizeof why, "needs 2 CUDA devices, %d visible", ndev);
        emit_skip("interop_fc_replay_loop_per_s_2dev", 3, why);
    }

    for (int round = 1; round <= g_rounds; round++) {
        if (g_have_cublas) gemm_round(&gb, round, us);
        if (g_have_nccl) {
            for (int n = 1; n <= (two ? 2 : 1); n++) {
                int first = round % 2 ? OP_EAGER_SYNC : OP_REPLAY_SYNC;
                nccl_times(first, n, round, nworkers);
                nccl_times(first == OP_EAGER_SYNC ? OP_REPLAY_SYNC : OP_EAGER_SYNC, n, round, nworkers);
            }
            loop_rows(KIND_NCCL, round, two, nworkers);
        }
        loop_rows(KIND_FC, round, two, nworkers);
    }

    run_command(OP_FREE, KIND_NCCL, nworkers, 0, nworkers);
    run_command(OP_EXIT, KIND_NCCL, nworkers, 0, 0); /* workers leave without reporting */
    for (int d = 0; d < nworkers; d++) pthread_join(threads[d], NULL);
    if (g_have_nccl) {
        g_nccl.ncclCommDestroy(comm1);
        for (int d = 0; d < 2; d++)
            if (comm2[d]) g_nccl.ncclCommDestroy(comm2[d]);
    }
    for (int d = 0; d < nworkers; d++) {
        fc_cuda_ctx_free(g_workers[d].ctx);
        free(g_workers[d].us);
    }
    if (g_have_cublas) gemm_free(&gb);
    free(us);
    fc_cuda_ctx_free(probe);
    logf_("done");
    return 0;
}
