/* interop_bench.c - benchmark rows of issue 10: cuBLAS and NCCL work inside
 * fc graphs, replayed, against the same work queued eagerly, and the
 * scaling of a replay loop from one GPU to two.
 *
 *   interop_bench [--rounds R] [--iters N] [--loop-iters L] [--count C] [--ptx FILE] [--quick]
 *
 * Defaults: 5 rounds, N = 2000 timed iterations per timing row, L = 10000
 * iterations per replay loop, C = 4096 floats (16 KiB: one decode step's
 * hidden state) per all-reduce; --quick is 2 rounds, N = 300, L = 500.
 *
 * --ptx FILE: the PTX of the raw driver rows (default kernels/elementwise.ptx,
 * relative to the working directory: the repository root under
 * scripts/gpu-interop.sh).
 *
 * JSON lines on stdout (one per row and round; bench/report.py keeps each
 * row's best round), progress on stderr. Every row has "impl" ("fc", or
 * "raw" for the interop_raw_* rows), "row", "kernels" (work items in the
 * step: our kernels + the cuBLAS / NCCL call) and "round"; timing rows have
 * median_us, p10_us, p90_us, n; rate rows have iters_per_s (higher is
 * better), iters, and the 2-device rows per_device and ratio_vs_1dev (this
 * round's 2-device rate / this round's 1-device rate). A row that cannot
 * run here is {"impl":...,"row":...,"kernels":...,"skipped":"why"}; a row whose
 * result check failed has "error":"why" too (and "skipped":"error: why").
 *
 * Rows (every time includes the sync, fc_sync_ctx or in the raw rows cuStreamSynchronize, i.e. the step
 * is complete):
 *   interop_cublas_eager_sync        A = A0 .* S (fc_mul), C = 0.5 A B (cublasSgemm_v2, M,N,K = 256,128,64),
 *                                    OUT = C + D (fc_add), queued eagerly + sync; kernels 3
 *   interop_cublas_replay_sync       the same captured: fc_graph_launch + sync
 *   interop_cublas_lanes_replay_sync one graph, recorded node by node (FC_RECORDING_BUILD) on its own context:
 *                                    lane 1 (fc_ctx_lane) waits for lane 0, then C = A B (cublasSgemm_v2,
 *                                    M = N = K = 1024, alpha 1, beta 0, CUBLAS_DEFAULT_MATH: FP32) on lane 1's
 *                                    stream inside fc_graph_foreign_begin_on_ctx(lane 1) ... foreign_end (one
 *                                    child node), while 26 x (X = X + Y, fc_add, 4096 floats) are queued on
 *                                    lane 0; lane 0 waits for lane 1 (join). fc_graph_launch + sync; kernels 27.
 *                                    Its "gain_vs_one_lane" is this round's one-lane median / lanes median (the
 *                                    overlap gain of the GEMM beside the adds)
 *   interop_cublas_one_lane_replay_sync
 *                                    the same work all on lane 0: the GEMM in fc_graph_foreign_begin_ctx ...
 *                                    foreign_end, then the 26 adds; launch + sync; kernels 27. The two graphs are
 *                                    timed in one round, alternating in blocks of N/20 launches (lanes, one lane,
 *                                    one lane, lanes, ...), so drift affects both. After each round both graphs'
 *                                    C and X are downloaded: equal bit for bit, C equal to the host at a few
 *                                    elements (integer inputs: exact), X equal to 26 x launches; otherwise (and
 *                                    when the setup fails) both rows are emitted as
 *                                    {"impl":"fc","row":...,"kernels":27,"skipped":"error: why","error":"why"}
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
 *   interop_raw_nccl_replay_loop_per_s_1dev / _2dev  ("impl":"raw")
 *                                    the same NCCL step loop with no fc-graph: the baseline that says whether
 *                                    the scaling above is NCCL/driver-limited. Per device, on the same worker
 *                                    thread: the primary context (cuDevicePrimaryCtxRetain + cuCtxSetCurrent),
 *                                    a non-blocking stream, fc_add_f32 / fc_mul_f32 of --ptx launched with
 *                                    cuLaunchKernel (block 256; plain launches, where the fc rows use
 *                                    fc-graph's defaults: PDL on sm_90), cuMemAlloc'ed buffers, the same
 *                                    warm-up (5 eager steps, then 5 replays), the step captured with
 *                                    cuStreamBeginCapture(THREAD_LOCAL) ... ncclAllReduce on that stream ...
 *                                    cuStreamEndCapture + cuGraphInstantiateWithFlags, on its own 1-rank and
 *                                    2-rank communicators; the loop is L x (cuGraphLaunch +
 *                                    cuStreamSynchronize), timed like the fc loop, in each round right after
 *                                    the fc NCCL loop rows, and checked the same way afterwards (y[0] = the
 *                                    sum over the ranks of cnt[0] * w). The driver is opened at run time
 *                                    ($FC_CUDA_LIBRARY, else libcuda.so.1, as libfcgraph does); its types come
 *                                    from cuda.h, found through the include path (scripts/gpu-interop.sh finds
 *                                    it like scripts/gpu-bench.sh). Built without cuda.h, or with no readable
 *                                    PTX file or driver entry point, these rows are emitted as skipped.
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

/* The raw driver rows need cuda.h's types (the driver itself is opened at
 * run time); without it they are emitted as skipped. */
#if defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#define INTEROP_HAVE_CUDA_H 1
#endif
#endif

#define GM 256
#define GN 128
#define GK 64
#define NWORKERS 2

static int g_rounds = 5, g_iters = 2000, g_loop_iters = 10000;
static size_t g_count = 4096;
static const char *g_ptx_path = "kernels/elementwise.ptx";
static il_cublas g_cublas;
static il_nccl g_nccl;
static int g_have_cublas, g_have_nccl;
static int g_have_raw;      /* the raw driver rows can run (driver, PTX and NCCL loaded) */
static char g_no_raw[4096]; /* why they cannot */

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

/* `why` for a JSON string: the characters JSON would need escaped ('"',
 * '\\', control characters: a dlopen error may hold them) become '\'', cut
 * at len - 1 bytes. */
static void json_safe(char *safe, size_t len, const char *why)
{
    size_t i = 0;
    for (; why[i] && i + 1 < len; i++)
        safe[i] = why[i] == '"' || why[i] == '\\' || (unsigned char)why[i] < 0x20 ? '\'' : why[i];
    safe[i] = '\0';
}

/* A skipped row, `why` made JSON-safe and cut at 511 bytes. */
static void emit_skip_as(const char *impl, const char *row, int kernels, const char *why)
{
    char safe[512];
    json_safe(safe, sizeof safe, why);
    printf("{\"impl\":\"%s\",\"row\":\"%s\",\"kernels\":%d,\"skipped\":\"%s\"}\n", impl, row, kernels, safe);
    fflush(stdout);
    logf_("%s skipped: %s", row, why);
}

static void emit_skip(const char *row, int kernels, const char *why) { emit_skip_as("fc", row, kernels, why); }

/* A row whose setup or result check failed: skipped, with "error" (escaped
 * as emit_skip_as does). */
static void emit_error(const char *row, int kernels, const char *why)
{
    char safe[512];
    json_safe(safe, sizeof safe, why);
    printf("{\"impl\":\"fc\",\"row\":\"%s\",\"kernels\":%d,\"skipped\":\"error: %s\",\"error\":\"%s\"}\n", row,
           kernels, safe, safe);
    fflush(stdout);
    logf_("%s FAILED: %s", row, why);
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

/* ---- cuBLAS on a lane beside fc kernels (device 0, this thread) -------------- */

#define LANE_ADDS 26
#define LANE_ADD_FLOATS 4096
#define LANE_KERNELS (LANE_ADDS + 1)

enum { LANES = 0, ONE_LANE = 1 };

/* The GEMM shapes (column-major C[m x n] = A[m x k] B[k x n]) and their rows:
 * a square GEMM that fills the GPU, and a decode step's projection (4096
 * features, 16 tokens), the latency-bound kind engines overlap. */
typedef struct {
    const char *rows[2]; /* [LANES], [ONE_LANE] */
    int m, n, k;
} lane_shape;
static const lane_shape k_lane_shapes[2] = {
    {{"interop_cublas_lanes_replay_sync", "interop_cublas_one_lane_replay_sync"}, 1024, 1024, 1024},
    {{"interop_cublas_lanes_decode_replay_sync", "interop_cublas_one_lane_decode_replay_sync"}, 4096, 16, 4096},
};

typedef struct {
    const lane_shape *sh;
    fc_cuda_ctx *ctx, *l1; /* a context of its own (FC_RECORDING_BUILD) and its lane 1 */
    il_cublas_handle h[2]; /* [LANES] on lane 1's stream, [ONE_LANE] on lane 0's */
    fc_buffer *a, *b, *y, *ws[2];
    fc_buffer *c[2], *x[2]; /* each graph's own C (m x n) and X (LANE_ADD_FLOATS) */
    fc_graph *g[2];
    long launches[2];
    double *us[2];
    float *ha, *hb, *got[2]; /* the inputs; downloads for the check */
    char why[512];           /* why the setup failed */
} lanes_bench;

/* The GEMM inputs: small integers, so every C element is an exact FP32 sum. */
static float lane_a(size_t i) { return (float)((int)(i % 7) - 3); }
static float lane_b(size_t i) { return (float)((int)(i % 5) - 2); }

/* Fails the setup (lanes_setup's `fail:`) with the call and fc_last_error. */
#define LB_TRY(lb, call)                                                                                    \
    do {                                                                                                     \
        int rc_ = (call);                                                                                    \
        if (rc_ != FC_OK) {                                                                                  \
            char e_[384];                                                                                    \
            fc_last_error_copy(e_, sizeof e_);                                                               \
            snprintf((lb)->why, sizeof (lb)->why, "%s returned %d: %s", #call, rc_, e_);                     \
            goto fail;                                                                                       \
        }                                                                                                    \
    } while (0)

/* C = A B on h's stream. 0, or -1 with the reason in lb->why. */
static int lanes_gemm(lanes_bench *lb, il_cublas_handle h, fc_buffer *c)
{
    const float alpha = 1.0f, beta = 0.0f;
    const int m = lb->sh->m, n = lb->sh->n, k = lb->sh->k;
    int st = g_cublas.cublasSgemm_v2(h, IL_CUBLAS_OP_N, IL_CUBLAS_OP_N, m, n, k, &alpha,
                                     (const float *)(uintptr_t)fc_buffer_device_ptr(lb->a), m,
                                     (const float *)(uintptr_t)fc_buffer_device_ptr(lb->b), k, &beta,
                                     (float *)(uintptr_t)fc_buffer_device_ptr(c), m);
    if (st != IL_CUBLAS_STATUS_SUCCESS) {
        char buf[64];
        snprintf(lb->why, sizeof lb->why, "cublasSgemm_v2 (%d x %d x %d): %s", m, n, k,
                 il_cublas_status(&g_cublas, st, buf, sizeof buf));
        return -1;
    }
    return 0;
}

/* X = X + Y, LANE_ADDS times, on ctx's lane 0. */
static int lanes_adds(lanes_bench *lb, fc_buffer *x)
{
    for (int i = 0; i < LANE_ADDS; i++) {
        int rc = fc_add_ctx(lb->ctx, x, lb->y, x, LANE_ADD_FLOATS);
        if (rc != FC_OK) return rc;
    }
    return FC_OK;
}

/* A cuBLAS handle on `stream` with `ws` as workspace, FP32 math; NULL with
 * the reason in lb->why. */
static il_cublas_handle lanes_handle(lanes_bench *lb, void *stream, fc_buffer *ws)
{
    char buf[64];
    il_cublas_handle h = NULL;
    int st = g_cublas.cublasCreate_v2(&h);
    if (st == IL_CUBLAS_STATUS_SUCCESS) st = g_cublas.cublasSetStream_v2(h, stream);
    if (st == IL_CUBLAS_STATUS_SUCCESS)
        st = g_cublas.cublasSetWorkspace_v2(h, (void *)(uintptr_t)fc_buffer_device_ptr(ws), fc_buffer_size(ws));
    if (st == IL_CUBLAS_STATUS_SUCCESS) st = g_cublas.cublasSetMathMode(h, IL_CUBLAS_DEFAULT_MATH);
    if (st != IL_CUBLAS_STATUS_SUCCESS) {
        snprintf(lb->why, sizeof lb->why, "cuBLAS handle setup (lanes): %s",
                 il_cublas_status(&g_cublas, st, buf, sizeof buf));
        if (h) g_cublas.cublasDestroy_v2(h);
        return NULL;
    }
    return h;
}

/* Both graphs' C and X: equal bit for bit; C equal to the host at a few
 * elements; X[0] = LANE_ADDS x launches (Y = 1; exact below 2^24). 0, or -1
 * with the reason in why. Call with nothing in flight. */
static int lanes_check(lanes_bench *lb, char *why, size_t len)
{
    const size_t m = (size_t)lb->sh->m, n = (size_t)lb->sh->n, kk_ = (size_t)lb->sh->k, nn = m * n;
    for (int k = 0; k < 2; k++) FC_MUST(fc_buffer_download(lb->c[k], lb->got[k], nn * sizeof(float)));
    for (size_t i = 0; i < nn; i++) {
        if (memcmp(&lb->got[0][i], &lb->got[1][i], sizeof(float)) != 0) {
            snprintf(why, len, "C differs between the graphs at [%zu]: lanes %.9g, one lane %.9g", i,
                     (double)lb->got[0][i], (double)lb->got[1][i]);
            return -1;
        }
    }
    const size_t spots[][2] = {{0, 0}, {m - 1, n - 1}, {17, 923}, {511, 3}, {1000, 512}};
    for (size_t s = 0; s < sizeof spots / sizeof spots[0]; s++) {
        const size_t i = spots[s][0] % m, j = spots[s][1] % n;
        double want = 0.0;
        for (size_t k = 0; k < kk_; k++) want += (double)lb->ha[i + k * m] * (double)lb->hb[k + j * kk_];
        if ((double)lb->got[0][i + j * m] != want) {
            snprintf(why, len, "C[%zu, %zu] = %.9g in both graphs, want %.9g", i, j, (double)lb->got[0][i + j * m],
                     want);
            return -1;
        }
    }
    for (int k = 0; k < 2; k++) FC_MUST(fc_buffer_download(lb->x[k], lb->got[k], LANE_ADD_FLOATS * sizeof(float)));
    if (memcmp(lb->got[0], lb->got[1], LANE_ADD_FLOATS * sizeof(float)) != 0) {
        snprintf(why, len, "X differs between the graphs (X[0]: lanes %.9g, one lane %.9g)", (double)lb->got[0][0],
                 (double)lb->got[1][0]);
        return -1;
    }
    if (lb->launches[0] != lb->launches[1]) {
        snprintf(why, len, "launch counts differ: %ld, %ld", lb->launches[0], lb->launches[1]);
        return -1;
    }
    const double want_x = (double)LANE_ADDS * (double)lb->launches[0];
    if (want_x < 16777216.0 && (double)lb->got[0][0] != want_x) {
        snprintf(why, len, "X[0] = %.9g in both graphs, want %.0f (%d adds x %ld launches)", (double)lb->got[0][0],
                 want_x, LANE_ADDS, lb->launches[0]);
        return -1;
    }
    return 0;
}

/* Sets up both graphs: 0, or -1 with the reason in lb->why (free it with
 * lanes_free either way). */
static int lanes_setup(lanes_bench *lb, const lane_shape *sh)
{
    memset(lb, 0, sizeof *lb);
    lb->sh = sh;
    const size_t mk = (size_t)sh->m * sh->k, kn = (size_t)sh->k * sh->n, nn = (size_t)sh->m * sh->n;
    const size_t got_n = nn > LANE_ADD_FLOATS ? nn : LANE_ADD_FLOATS;
    lb->ctx = fc_cuda_init_device(0);
    if (!lb->ctx) {
        snprintf(lb->why, sizeof lb->why, "fc_cuda_init_device(0): %s", fc_last_error());
        return -1;
    }
    check_context(lb->ctx, "cuBLAS lanes thread");
    /* BUILD before fc_ctx_stream is asked for: recordings build node by
     * node, and only the foreign sections capture a stream. */
    LB_TRY(lb, fc_ctx_set_recording_mode(lb->ctx, FC_RECORDING_BUILD));
    lb->l1 = fc_ctx_lane(lb->ctx, 1);
    if (!lb->l1) {
        snprintf(lb->why, sizeof lb->why, "fc_ctx_lane(ctx, 1): %s", fc_last_error());
        goto fail;
    }
    for (int k = 0; k < 2; k++) {
        if (!(lb->us[k] = (double *)malloc((size_t)g_iters * sizeof(double))) ||
            !(lb->got[k] = (float *)malloc(got_n * sizeof(float))))
            die("out of host memory");
    }
    if (!(lb->ha = (float *)malloc(mk * sizeof(float))) || !(lb->hb = (float *)malloc(kn * sizeof(float))))
        die("out of host memory");
    for (size_t i = 0; i < mk; i++) lb->ha[i] = lane_a(i);
    for (size_t i = 0; i < kn; i++) lb->hb[i] = lane_b(i);
    lb->a = must_alloc(lb->ctx, mk * sizeof(float));
    lb->b = must_alloc(lb->ctx, kn * sizeof(float));
    lb->y = must_alloc(lb->ctx, LANE_ADD_FLOATS * sizeof(float));
    FC_MUST(fc_buffer_upload(lb->a, lb->ha, mk * sizeof(float)));
    FC_MUST(fc_buffer_upload(lb->b, lb->hb, kn * sizeof(float)));
    fill_const(lb->y, LANE_ADD_FLOATS, 1.0f);
    for (int k = 0; k < 2; k++) {
        lb->c[k] = must_alloc(lb->ctx, nn * sizeof(float));
        lb->x[k] = must_alloc(lb->ctx, LANE_ADD_FLOATS * sizeof(float));
        lb->ws[k] = must_alloc(lb->ctx, IL_CUBLAS_WORKSPACE_BYTES);
    }
    if (!(lb->h[LANES] = lanes_handle(lb, fc_ctx_stream(lb->l1), lb->ws[LANES]))) goto fail;
    if (!(lb->h[ONE_LANE] = lanes_handle(lb, fc_ctx_stream(lb->ctx), lb->ws[ONE_LANE]))) goto fail;

    /* Warm-up, eagerly (cuBLAS picks and loads its kernels): the two ways. */
    for (int i = 0; i < 5; i++) {
        LB_TRY(lb, fc_ctx_wait_lane(lb->l1, lb->ctx));
        if (lanes_gemm(lb, lb->h[LANES], lb->c[LANES])) goto fail;
        LB_TRY(lb, lanes_adds(lb, lb->x[LANES]));
        LB_TRY(lb, fc_ctx_wait_lane(lb->ctx, lb->l1));
        if (lanes_gemm(lb, lb->h[ONE_LANE], lb->c[ONE_LANE])) goto fail;
        LB_TRY(lb, lanes_adds(lb, lb->x[ONE_LANE]));
    }
    /* From here C and X are the graphs' own: C poisoned differently in each
     * (a GEMM that never ran shows), X = 0. */
    for (int k = 0; k < 2; k++) {
        LB_TRY(lb, fc_buffer_fill_ctx(lb->ctx, lb->c[k], 0, nn * sizeof(float), k == LANES ? 0xff : 0xfe));
        LB_TRY(lb, fc_buffer_fill_ctx(lb->ctx, lb->x[k], 0, LANE_ADD_FLOATS * sizeof(float), 0));
    }
    LB_TRY(lb, fc_sync_ctx(lb->ctx));

    /* Lanes: the GEMM in a section on lane 1, the adds on lane 0 meanwhile. */
    LB_TRY(lb, fc_graph_begin_ctx(lb->ctx));
    LB_TRY(lb, fc_ctx_wait_lane(lb->l1, lb->ctx)); /* fork */
    LB_TRY(lb, fc_graph_foreign_begin_on_ctx(lb->ctx, lb->l1, FC_CAPTURE_MODE_THREAD_LOCAL, NULL));
    if (lanes_gemm(lb, lb->h[LANES], lb->c[LANES])) goto fail;
    LB_TRY(lb, lanes_adds(lb, lb->x[LANES]));
    LB_TRY(lb, fc_graph_foreign_end_ctx(lb->ctx));
    LB_TRY(lb, fc_ctx_wait_lane(lb->ctx, lb->l1)); /* join */
    if (!(lb->g[LANES] = fc_graph_end_ctx(lb->ctx))) {
        snprintf(lb->why, sizeof lb->why, "fc_graph_end_ctx (lanes): %s", fc_last_error());
        goto fail;
    }
    /* One lane: the GEMM in a section on lane 0, then the adds. */
    LB_TRY(lb, fc_graph_begin_ctx(lb->ctx));
    LB_TRY(lb, fc_graph_foreign_begin_ctx(lb->ctx, FC_CAPTURE_MODE_THREAD_LOCAL, NULL));
    if (lanes_gemm(lb, lb->h[ONE_LANE], lb->c[ONE_LANE])) goto fail;
    LB_TRY(lb, fc_graph_foreign_end_ctx(lb->ctx));
    LB_TRY(lb, lanes_adds(lb, lb->x[ONE_LANE]));
    if (!(lb->g[ONE_LANE] = fc_graph_end_ctx(lb->ctx))) {
        snprintf(lb->why, sizeof lb->why, "fc_graph_end_ctx (one lane): %s", fc_last_error());
        goto fail;
    }
    logf_("lanes graphs: %zu nodes (lanes), %zu nodes (one lane); %d expected each",
          fc_graph_node_count(lb->g[LANES]), fc_graph_node_count(lb->g[ONE_LANE]), LANE_KERNELS);
    for (int i = 0; i < 20; i++) {
        for (int k = 0; k < 2; k++) {
            LB_TRY(lb, fc_graph_launch(lb->g[k]));
            lb->launches[k]++;
        }
    }
    LB_TRY(lb, fc_sync_ctx(lb->ctx));
    if (lanes_check(lb, lb->why, sizeof lb->why) != 0) return -1;
    return 0;
fail:
    if (fc_graph_is_capturing_ctx(lb->ctx) == 1) (void)fc_graph_abort_ctx(lb->ctx);
    return -1;
}

/* One round: each graph g_iters x (launch + sync), alternating in blocks
 * of g_iters / 20 (lanes, one lane, one lane, lanes, ...; the first block
 * alternates with the round); then the check, then both rows. */
static void lanes_round(lanes_bench *lb, int round)
{
    const int block = g_iters / 20 > 0 ? g_iters / 20 : 1;
    int done[2] = {0, 0};
    for (int k = 0; done[LANES] < g_iters || done[ONE_LANE] < g_iters; k++) {
        for (int j = 0; j < 2; j++) {
            const int gi = ((k + round) & 1) ^ j;
            for (int i = 0; i < block && done[gi] < g_iters; i++) {
                double t0 = now_us();
                FC_MUST(fc_graph_launch(lb->g[gi]));
                FC_MUST(fc_sync_ctx(lb->ctx));
                lb->us[gi][done[gi]++] = now_us() - t0;
                lb->launches[gi]++;
            }
        }
    }
    char why[512];
    if (lanes_check(lb, why, sizeof why) != 0) {
        for (int k = 0; k < 2; k++) emit_error(lb->sh->rows[k], LANE_KERNELS, why);
        return;
    }
    const double lanes = median_of(lb->us[LANES], g_iters), one = median_of(lb->us[ONE_LANE], g_iters);
    char extra[64] = "";
    if (lanes > 0.0) snprintf(extra, sizeof extra, ",\"gain_vs_one_lane\":%.4f", one / lanes);
    emit_times(lb->sh->rows[LANES], LANE_KERNELS, lb->us[LANES], g_iters, round, extra);
    emit_times(lb->sh->rows[ONE_LANE], LANE_KERNELS, lb->us[ONE_LANE], g_iters, round, NULL);
    if (lanes > 0.0)
        logf_("round %d lanes (%d x %d x %d): %.2fx faster than one lane", round, lb->sh->m, lb->sh->n, lb->sh->k,
              one / lanes);
}

static void lanes_free(lanes_bench *lb)
{
    if (lb->ctx && fc_sync_ctx(lb->ctx) != FC_OK) logf_("lanes: fc_sync_ctx at the end: %s", fc_last_error());
    for (int k = 0; k < 2; k++) {
        fc_graph_free(lb->g[k]);
        if (lb->h[k]) g_cublas.cublasDestroy_v2(lb->h[k]);
        fc_buffer_free(lb->c[k]);
        fc_buffer_free(lb->x[k]);
        fc_buffer_free(lb->ws[k]);
        free(lb->us[k]);
        free(lb->got[k]);
    }
    fc_buffer_free(lb->a);
    fc_buffer_free(lb->b);
    fc_buffer_free(lb->y);
    free(lb->ha);
    free(lb->hb);
    fc_cuda_ctx_free(lb->l1);
    fc_cuda_ctx_free(lb->ctx);
    memset(lb, 0, sizeof *lb);
}

/* ---- raw driver baseline of the NCCL step loop (no fc-graph) ------------------ */

#define RAW_BLOCK 256u

typedef struct raw_dev raw_dev;

#ifdef INTEROP_HAVE_CUDA_H

/* The driver entry points, opened at run time. cuda.h maps the names to
 * their current versions (cuMemAlloc is cuMemAlloc_v2, ...): RAW_FIELD and
 * RAW_STR expand them, so the members, the symbols looked up and the
 * prototypes (__typeof__) all follow the header. */
#define RAW_DRIVER_FUNCS(X)                                                                                  \
    X(cuInit)                                                                                                \
    X(cuGetErrorName)                                                                                        \
    X(cuGetErrorString)                                                                                      \
    X(cuDeviceGet)                                                                                           \
    X(cuDevicePrimaryCtxRetain)                                                                              \
    X(cuDevicePrimaryCtxRelease)                                                                             \
    X(cuCtxSetCurrent)                                                                                       \
    X(cuModuleLoadData)                                                                                      \
    X(cuModuleGetFunction)                                                                                   \
    X(cuModuleUnload)                                                                                        \
    X(cuStreamCreate)                                                                                        \
    X(cuStreamDestroy)                                                                                       \
    X(cuStreamSynchronize)                                                                                   \
    X(cuMemAlloc)                                                                                            \
    X(cuMemFree)                                                                                             \
    X(cuMemsetD32Async)                                                                                      \
    X(cuMemcpyDtoH)                                                                                          \
    X(cuLaunchKernel)                                                                                        \
    X(cuStreamBeginCapture)                                                                                  \
    X(cuStreamEndCapture)                                                                                    \
    X(cuGraphInstantiateWithFlags)                                                                           \
    X(cuGraphLaunch)                                                                                         \
    X(cuGraphExecDestroy)                                                                                    \
    X(cuGraphDestroy)

#define RAW_STR_(x) #x
#define RAW_STR(x) RAW_STR_(x)
#define RAW_FIELD(fn) __typeof__(fn) *fn;

static struct {
    void *lib;
    char path[1024];
    RAW_DRIVER_FUNCS(RAW_FIELD)
} g_drv;
static char *g_ptx; /* the PTX text of --ptx, NUL-terminated */

struct raw_dev {
    int dev;
    CUdevice cu_dev;
    CUcontext ctx; /* the device's primary context */
    CUmodule mod;
    CUfunction add, mul;
    CUstream stream; /* non-blocking */
    CUdeviceptr cnt, one, w, x, y, acc;
    CUgraph g[2];      /* the step on the 1-rank [0] and the 2-rank [1] communicator */
    CUgraphExec ge[2];
};

static void raw_die(CUresult r, const char *what, const char *file, int line) __attribute__((noreturn));
static void raw_die(CUresult r, const char *what, const char *file, int line)
{
    const char *name = NULL, *str = NULL;
    if (g_drv.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "?";
    if (g_drv.cuGetErrorString(r, &str) != CUDA_SUCCESS || !str) str = "?";
    die("%s:%d: %s returned %s (%d): %s", file, line, what, name, (int)r, str);
}

#define RAW_MUST(call)                                                                                       \
    do {                                                                                                     \
        CUresult raw_r_ = (call);                                                                            \
        if (raw_r_ != CUDA_SUCCESS) raw_die(raw_r_, #call, __FILE__, __LINE__);                             \
    } while (0)

/* The whole file at `path`, NUL-terminated (cuModuleLoadData needs that),
 * or NULL with the reason in why. */
static char *raw_read_text(const char *path, char *why, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, len, "cannot open the PTX file %s: %s (--ptx)", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = (char *)malloc((size_t)n + 1)) != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0';
    } else {
        snprintf(why, len, "cannot read the PTX file %s: %s", path, buf ? "short read" : strerror(errno));
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* Opens the driver ($FC_CUDA_LIBRARY, else libcuda.so.1: the one libfcgraph
 * loaded), looks up RAW_DRIVER_FUNCS, calls cuInit and reads the PTX file.
 * 0, or -1 with the reason in why. */
static int raw_load(char *why, size_t len)
{
    why[0] = '\0';
    const char *env = getenv("FC_CUDA_LIBRARY");
    const char *names[] = {env && env[0] ? env : "libcuda.so.1", NULL};
    g_drv.lib = il_open_first(names, g_drv.path, sizeof g_drv.path, why, len);
    if (!g_drv.lib) return -1;
    int rc = 0;
#define RAW_LOAD(fn) rc |= il_sym(g_drv.lib, RAW_STR(fn), (void *)&g_drv.fn, sizeof g_drv.fn, 1, why, len);
    RAW_DRIVER_FUNCS(RAW_LOAD)
#undef RAW_LOAD
    if (rc) return -1;
    CUresult r = g_drv.cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(why, len, "cuInit(0) returned %d", (int)r);
        return -1;
    }
    return (g_ptx = raw_read_text(g_ptx_path, why, len)) ? 0 : -1;
}

static const char *raw_driver_path(void) { return g_drv.path; }

static void raw_launch(raw_dev *r, CUfunction f, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out)
{
    unsigned int n = (unsigned int)g_count;
    void *params[4] = {&a, &b, &out, &n};
    RAW_MUST(g_drv.cuLaunchKernel(f, (n + RAW_BLOCK - 1) / RAW_BLOCK, 1, 1, RAW_BLOCK, 1, 1, 0, r->stream, params,
                                  NULL));
}

/* The step of step_queue(KIND_NCCL), on the raw stream. */
static void raw_step_queue(raw_dev *r, il_nccl_comm comm)
{
    raw_launch(r, r->add, r->cnt, r->one, r->cnt);
    raw_launch(r, r->mul, r->cnt, r->w, r->x);
    int n = g_nccl.ncclAllReduce((const void *)(uintptr_t)r->x, (void *)(uintptr_t)r->y, g_count, IL_NCCL_FLOAT32,
                                 IL_NCCL_SUM, comm, (void *)r->stream);
    if (n != IL_NCCL_SUCCESS) {
        char buf[512];
        die("device %d (raw): ncclAllReduce: %s", r->dev, il_nccl_error(&g_nccl, n, comm, buf, sizeof buf));
    }
    raw_launch(r, r->add, r->acc, r->y, r->acc);
}

static void raw_fill(raw_dev *r, CUdeviceptr p, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    RAW_MUST(g_drv.cuMemsetD32Async(p, bits, g_count, r->stream));
}

/* Device `dev`'s raw state on the calling (worker) thread: as worker_setup,
 * eager warm-up, then the step captured once per communicator and replayed. */
static raw_dev *raw_setup(int dev, il_nccl_comm comm1, il_nccl_comm comm2)
{
    raw_dev *r = (raw_dev *)calloc(1, sizeof *r);
    if (!r) die("out of host memory");
    r->dev = dev;
    RAW_MUST(g_drv.cuDeviceGet(&r->cu_dev, dev));
    RAW_MUST(g_drv.cuDevicePrimaryCtxRetain(&r->ctx, r->cu_dev));
    RAW_MUST(g_drv.cuCtxSetCurrent(r->ctx));
    RAW_MUST(g_drv.cuModuleLoadData(&r->mod, g_ptx));
    RAW_MUST(g_drv.cuModuleGetFunction(&r->add, r->mod, "fc_add_f32"));
    RAW_MUST(g_drv.cuModuleGetFunction(&r->mul, r->mod, "fc_mul_f32"));
    RAW_MUST(g_drv.cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr *bufs[] = {&r->cnt, &r->one, &r->w, &r->x, &r->y, &r->acc};
    for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) RAW_MUST(g_drv.cuMemAlloc(bufs[b], g_count * 4));
    for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) raw_fill(r, *bufs[b], 0.0f);
    raw_fill(r, r->one, 1.0f);
    raw_fill(r, r->w, (float)(1 + dev));
    const il_nccl_comm comms[2] = {comm1, comm2};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 2; k++)
            if (comms[k]) raw_step_queue(r, comms[k]);
    RAW_MUST(g_drv.cuStreamSynchronize(r->stream));
    for (int k = 0; k < 2; k++) {
        if (!comms[k]) continue;
        RAW_MUST(g_drv.cuStreamBeginCapture(r->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        raw_step_queue(r, comms[k]);
        RAW_MUST(g_drv.cuStreamEndCapture(r->stream, &r->g[k]));
        RAW_MUST(g_drv.cuGraphInstantiateWithFlags(&r->ge[k], r->g[k], 0));
    }
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 2; k++)
            if (r->ge[k]) RAW_MUST(g_drv.cuGraphLaunch(r->ge[k], r->stream));
    RAW_MUST(g_drv.cuStreamSynchronize(r->stream));
    return r;
}

/* Before a loop: the device's primary context current on this thread (it
 * already is: the fc context is the same primary context). */
static void raw_make_current(raw_dev *r) { RAW_MUST(g_drv.cuCtxSetCurrent(r->ctx)); }

/* One iteration of the loop: the step graph of the ndev-rank communicator. */
static void raw_replay_sync(raw_dev *r, int ndev)
{
    CUgraphExec ge = r->ge[ndev - 1];
    if (!ge) die("device %d (raw): no %d-rank step graph", r->dev, ndev);
    RAW_MUST(g_drv.cuGraphLaunch(ge, r->stream));
    RAW_MUST(g_drv.cuStreamSynchronize(r->stream));
}

/* Element 0 of cnt and y. */
static void raw_read(raw_dev *r, float *cnt0, float *y0)
{
    RAW_MUST(g_drv.cuMemcpyDtoH(cnt0, r->cnt, sizeof *cnt0));
    RAW_MUST(g_drv.cuMemcpyDtoH(y0, r->y, sizeof *y0));
}

static void raw_free(raw_dev *r)
{
    if (!r) return;
    RAW_MUST(g_drv.cuCtxSetCurrent(r->ctx));
    RAW_MUST(g_drv.cuStreamSynchronize(r->stream));
    for (int k = 0; k < 2; k++) {
        if (r->ge[k]) RAW_MUST(g_drv.cuGraphExecDestroy(r->ge[k]));
        if (r->g[k]) RAW_MUST(g_drv.cuGraphDestroy(r->g[k]));
    }
    CUdeviceptr bufs[] = {r->cnt, r->one, r->w, r->x, r->y, r->acc};
    for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) RAW_MUST(g_drv.cuMemFree(bufs[b]));
    RAW_MUST(g_drv.cuStreamDestroy(r->stream));
    RAW_MUST(g_drv.cuModuleUnload(r->mod));
    RAW_MUST(g_drv.cuDevicePrimaryCtxRelease(r->cu_dev));
    free(r);
}

#else /* !INTEROP_HAVE_CUDA_H: the raw rows are skipped; the rest cannot be reached. */

static int raw_load(char *why, size_t len)
{
    snprintf(why, len, "built without cuda.h (scripts/gpu-interop.sh puts the one it finds on the include path)");
    return -1;
}
static const char *raw_driver_path(void) { return "-"; }
static raw_dev *raw_setup(int dev, il_nccl_comm comm1, il_nccl_comm comm2)
{
    (void)comm1;
    (void)comm2;
    die("device %d: raw_setup without cuda.h", dev);
}
static void raw_make_current(raw_dev *r) { (void)r; }
static void raw_replay_sync(raw_dev *r, int ndev)
{
    (void)r;
    die("raw_replay_sync(%d devices) without cuda.h", ndev);
}
static void raw_read(raw_dev *r, float *cnt0, float *y0)
{
    (void)r;
    *cnt0 = *y0 = 0.0f;
}
static void raw_free(raw_dev *r) { (void)r; }

#endif /* INTEROP_HAVE_CUDA_H */

/* ---- NCCL and fc-only rows (one worker thread per device) -------------------- */

enum { OP_SETUP, OP_EAGER_SYNC, OP_REPLAY_SYNC, OP_LOOP, OP_FREE, OP_EXIT };
enum { KIND_NCCL, KIND_FC, KIND_RAW }; /* KIND_RAW: OP_LOOP only */

typedef struct {
    int op, kind, ndev, iters;
} command;

typedef struct {
    int dev;
    il_nccl_comm comm1, comm2;         /* 1-rank (device 0 only) and 2-rank communicators */
    il_nccl_comm raw_comm1, raw_comm2; /* the raw rows' own, alike */
    raw_dev *raw;                      /* NULL without the raw rows */
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
    if (g_have_raw) wk->raw = raw_setup(wk->dev, wk->raw_comm1, wk->raw_comm2);
}

static void worker_run(worker *wk, const command *c)
{
    il_nccl_comm comm = c->ndev == 1 ? wk->comm1 : wk->comm2;
    fc_graph *g = c->kind == KIND_FC ? wk->g_fc : (c->ndev == 1 ? wk->g_nccl1 : wk->g_nccl2);
    const int raw = c->kind == KIND_RAW;
    if (raw) {
        if (!wk->raw || c->op != OP_LOOP) die("device %d: no raw state for op %d", wk->dev, c->op);
        raw_make_current(wk->raw);
    }
    if (c->ndev == 2) pthread_barrier_wait(&g_start2);
    double start = now_us();
    for (int i = 0; i < c->iters; i++) {
        double t0 = now_us();
        if (raw) {
            raw_replay_sync(wk->raw, c->ndev); /* cuGraphLaunch + cuStreamSynchronize */
        } else {
            if (c->op == OP_EAGER_SYNC)
                step_queue(wk, c->kind, comm);
            else
                FC_MUST(fc_graph_launch(g));
            FC_MUST(fc_sync_ctx(wk->ctx));
        }
        wk->us[i] = now_us() - t0;
    }
    wk->elapsed_us = now_us() - start;
    if (raw) {
        raw_read(wk->raw, &wk->cnt0, &wk->y0);
        return;
    }
    FC_MUST(fc_buffer_download(wk->cnt, &wk->cnt0, sizeof(float)));
    FC_MUST(fc_buffer_download(wk->y, &wk->y0, sizeof(float)));
}

static void worker_free(worker *wk)
{
    fc_graph_free(wk->g_nccl1);
    fc_graph_free(wk->g_nccl2);
    fc_graph_free(wk->g_fc);
    wk->g_nccl1 = wk->g_nccl2 = wk->g_fc = NULL;
    raw_free(wk->raw);
    wk->raw = NULL;
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

/* After an NCCL or raw command: y = sum over the ranks of cnt_d * w_d (w_d = 1 + d). */
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
    const char *base = kind == KIND_NCCL  ? "interop_nccl_replay_loop_per_s"
                       : kind == KIND_RAW ? "interop_raw_nccl_replay_loop_per_s"
                                          : "interop_fc_replay_loop_per_s";
    const char *impl = kind == KIND_RAW ? "raw" : "fc";
    const int kernels = kind == KIND_FC ? 3 : 4;
    double rate1 = 0.0;
    for (int ndev = 1; ndev <= (two ? 2 : 1); ndev++) {
        run_command(OP_LOOP, kind, ndev, g_loop_iters, nworkers);
        if (kind != KIND_FC) check_nccl_result(ndev);
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
        printf("{\"impl\":\"%s\",\"row\":\"%s_%ddev\",\"kernels\":%d,\"iters_per_s\":%.1f,\"iters\":%d,"
               "\"round\":%d%s}\n",
               impl, base, ndev, kernels, total, g_loop_iters, round, extra);
        fflush(stdout);
        logf_("round %d %s_%ddev %.0f iterations/s%s", round, base, ndev, total, note);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: interop_bench [--rounds R] [--iters N] [--loop-iters N] [--count FLOATS] [--ptx FILE] "
                    "[--quick]\n");
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
        } else if (!strcmp(a, "--ptx") && has_value) {
            g_ptx_path = argv[++i];
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
    if (!g_have_nccl)
        snprintf(g_no_raw, sizeof g_no_raw, "no libnccl");
    else if (!(g_have_raw = raw_load(g_no_raw, sizeof g_no_raw) == 0))
        logf_("no raw driver rows: %s", g_no_raw);
    logf_("libfcgraph %s, %d device(s), cuBLAS %s, NCCL %s, raw driver %s (PTX %s), count %zu floats, rounds %d, "
          "iters %d, loop %d",
          fc_version(), ndev, g_have_cublas ? g_cublas.path : "-", g_have_nccl ? g_nccl.path : "-",
          g_have_raw ? raw_driver_path() : "-", g_ptx_path, g_count, g_rounds, g_iters, g_loop_iters);
    if (il_required() && (!g_have_cublas || !g_have_nccl)) die("FC_REQUIRE_INTEROP=1 and a library is missing");

    gemm_bench gb;
    double *us = (double *)malloc((size_t)g_iters * sizeof(double));
    if (!us) die("out of host memory");
    if (g_have_cublas) gemm_setup(&gb);
    lanes_bench lb[2];
    int have_lanes[2] = {0, 0};
    memset(lb, 0, sizeof lb);
    for (int s = 0; s < 2; s++) {
        /* One shape's setup at a time (each its own context). */
        if (g_have_cublas) have_lanes[s] = lanes_setup(&lb[s], &k_lane_shapes[s]) == 0;
    }

    const int two = ndev >= 2;
    const int nworkers = two ? 2 : 1;
    il_nccl_comm comm1 = NULL, comm2[2] = {NULL, NULL};
    il_nccl_comm raw_comm1 = NULL, raw_comm2[2] = {NULL, NULL};
    if (g_have_nccl) {
        const int devs[2] = {0, 1};
        char buf[512];
        int r = g_nccl.ncclCommInitAll(&comm1, 1, devs);
        if (r != IL_NCCL_SUCCESS) die("ncclCommInitAll(1, {0}): %s", il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
        if (two && (r = g_nccl.ncclCommInitAll(comm2, 2, devs)) != IL_NCCL_SUCCESS)
            die("ncclCommInitAll(2, {0, 1}): %s", il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
        if (g_have_raw && (r = g_nccl.ncclCommInitAll(&raw_comm1, 1, devs)) != IL_NCCL_SUCCESS)
            die("ncclCommInitAll(1, {0}) (raw rows): %s", il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
        if (g_have_raw && two && (r = g_nccl.ncclCommInitAll(raw_comm2, 2, devs)) != IL_NCCL_SUCCESS)
            die("ncclCommInitAll(2, {0, 1}) (raw rows): %s", il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
    }
    pthread_t threads[NWORKERS];
    if (pthread_barrier_init(&g_start2, NULL, 2) != 0) die("pthread_barrier_init failed");
    for (int d = 0; d < nworkers; d++) {
        g_workers[d].dev = d;
        g_workers[d].comm1 = d == 0 ? comm1 : NULL;
        g_workers[d].comm2 = comm2[d];
        g_workers[d].raw_comm1 = d == 0 ? raw_comm1 : NULL;
        g_workers[d].raw_comm2 = raw_comm2[d];
        atomic_store(&g_workers[d].busy_op, -1);
        if (pthread_create(&threads[d], NULL, worker_main, &g_workers[d]) != 0) die("pthread_create failed");
    }
    run_command(OP_SETUP, KIND_NCCL, nworkers, 0, nworkers);

    if (!g_have_cublas) {
        emit_skip("interop_cublas_eager_sync", 3, "no libcublas");
        emit_skip("interop_cublas_replay_sync", 3, "no libcublas");
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < 2; k++) emit_skip(k_lane_shapes[s].rows[k], LANE_KERNELS, "no libcublas");
    } else {
        for (int s = 0; s < 2; s++)
            if (!have_lanes[s])
                for (int k = 0; k < 2; k++) emit_error(k_lane_shapes[s].rows[k], LANE_KERNELS, lb[s].why);
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
    if (!g_have_raw) {
        emit_skip_as("raw", "interop_raw_nccl_replay_loop_per_s_1dev", 4, g_no_raw);
        emit_skip_as("raw", "interop_raw_nccl_replay_loop_per_s_2dev", 4, g_no_raw);
    } else if (!two) {
        char why[64];
        snprintf(why, sizeof why, "needs 2 CUDA devices, %d visible", ndev);
        emit_skip_as("raw", "interop_raw_nccl_replay_loop_per_s_2dev", 4, why);
    }
    if (!two) {
        char why[64];
        snprintf(why, sizeof why, "needs 2 CUDA devices, %d visible", ndev);
        emit_skip("interop_fc_replay_loop_per_s_2dev", 3, why);
    }

    for (int round = 1; round <= g_rounds; round++) {
        if (g_have_cublas) gemm_round(&gb, round, us);
        for (int s = 0; s < 2; s++)
            if (have_lanes[s]) lanes_round(&lb[s], round);
        if (g_have_nccl) {
            for (int n = 1; n <= (two ? 2 : 1); n++) {
                int first = round % 2 ? OP_EAGER_SYNC : OP_REPLAY_SYNC;
                nccl_times(first, n, round, nworkers);
                nccl_times(first == OP_EAGER_SYNC ? OP_REPLAY_SYNC : OP_EAGER_SYNC, n, round, nworkers);
            }
            loop_rows(KIND_NCCL, round, two, nworkers);
            if (g_have_raw) loop_rows(KIND_RAW, round, two, nworkers);
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
        il_nccl_comm raw_comms[3] = {raw_comm1, raw_comm2[0], raw_comm2[1]};
        for (int k = 0; k < 3; k++) {
            int r = raw_comms[k] ? g_nccl.ncclCommDestroy(raw_comms[k]) : IL_NCCL_SUCCESS;
            char buf[512];
            if (r != IL_NCCL_SUCCESS)
                die("ncclCommDestroy (raw rows): %s", il_nccl_error(&g_nccl, r, NULL, buf, sizeof buf));
        }
    }
    for (int d = 0; d < nworkers; d++) {
        fc_cuda_ctx_free(g_workers[d].ctx);
        free(g_workers[d].us);
    }
    if (g_have_cublas) gemm_free(&gb);
    for (int s = 0; s < 2; s++) lanes_free(&lb[s]);
    free(us);
    fc_cuda_ctx_free(probe);
    logf_("done");
    return 0;
}
