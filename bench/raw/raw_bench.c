/*
 * raw_bench.c - raw CUDA driver API baseline for the fc-graph benchmark (issue #4).
 *
 * Same workload as `fc-bench` and `bench/torch_bench.py`: a chain of K tiny
 * element-wise f32 kernels over n = 4096 elements, alternating
 *     z = x + y   (fc_add_f32)
 *     x = z * y   (fc_mul_f32)
 * loaded from the SAME PTX file (kernels/elementwise.ptx) with cuModuleLoadData,
 * on the primary context of the device with a non-blocking stream.
 *
 * Programmatic dependent launch (PDL) rows (suffix `_pdl`): the same rows with
 * the sm_90 variant of the kernels (kernels/elementwise_sm90.ptx, which wait
 * with griddepcontrol.wait and trigger dependents early), each launched with
 * cuLaunchKernelEx and CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1,
 * on devices of compute capability 9.0+ under drivers of CUDA 12.3+ (as
 * fc-graph decides); elsewhere the `_pdl` rows are emitted as skipped.
 *
 * recapture_update: the timer covers begin capture, the K launches, end
 * capture, cuGraphExecUpdate AND the destruction of the graph just captured
 * (the executable no longer needs it). fc-graph's end_update does the same,
 * so both timers hold exactly one K-node cuGraphDestroy.
 *
 * Multi-GPU rows (K = 26, one thread and context per device, each loop run
 * for --multi-gpu-secs on 1 device, then on 2 devices at once; per second,
 * higher is better; PDL launches where every device has PDL, like fc-graph):
 *   multi_gpu_captures_per_s_*: capture + instantiate + launch + sync + destroy
 *   multi_gpu_replays_per_s_*:  launch + sync of one captured graph
 *   multi_gpu_updates_per_s_*:  re-capture + cuGraphExecUpdate + destroy of the
 *                               captured graph + launch + sync
 *
 * Build (on the GPU machine):
 *   gcc -O2 -std=c11 bench/raw/raw_bench.c -I/usr/local/cuda/include -lcuda -lpthread -o raw_bench
 *   (or -L/usr/local/cuda/lib64/stubs if libcuda.so is not on the linker path)
 * Run:
 *   ./raw_bench kernels/elementwise.ptx [--kernels 26,260,2600] [--n 4096]
 *       [--warmup 5] [--iters N] [--device 0] [--multi-gpu-secs 1.0]
 *       [--no-multi-gpu] [--quick] [--pdl-ptx PATH] [--no-pdl]
 *   (--pdl-ptx defaults to elementwise_sm90.ptx next to the first PTX file)
 *
 * One JSON object per row goes to stdout; human-readable lines go to stderr.
 * Every driver call is checked; a failure prints the call, file, line and the
 * driver's error name/string and exits with status 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IMPL "raw"
#define BLOCK 256u
#define MAX_KS 16
/* Oldest driver with PDL in captured graphs (edge data), as fc-graph. */
#define PDL_MIN_DRIVER 12030

/* ------------------------------------------------------------------------- */
/* error handling                                                            */

static void die_cu(CUresult r, const char *what, const char *file, int line) {
    const char *name = NULL, *str = NULL;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL) name = "?";
    if (cuGetErrorString(r, &str) != CUDA_SUCCESS || str == NULL) str = "?";
    fprintf(stderr, "[raw] FATAL %s:%d: %s -> %s (%d): %s\n", file, line, what, name, (int)r, str);
    fflush(stderr);
    exit(1);
}

#define CK(call)                                                  \
    do {                                                          \
        CUresult ck_r_ = (call);                                  \
        if (ck_r_ != CUDA_SUCCESS) die_cu(ck_r_, #call, __FILE__, __LINE__); \
    } while (0)

static void die_msg(const char *msg) {
    fprintf(stderr, "[raw] FATAL %s\n", msg);
    fflush(stderr);
    exit(1);
}

/* ------------------------------------------------------------------------- */
/* clocks and statistics                                                     */

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks (numpy's default), q in [0,1].
 * `v` must be sorted. Same definition in fc-bench and torch_bench.py. */
static double percentile(const double *v, int n, double q) {
    if (n <= 0) return 0.0;
    double pos = q * (double)(n - 1);
    int lo = (int)pos;
    int hi = lo + 1 < n ? lo + 1 : n - 1;
    double frac = pos - (double)lo;
    return v[lo] + (v[hi] - v[lo]) * frac;
}

/* Sorts `us` (microseconds) in place and prints the JSON row + a human line.
 * `suffix` ("" or "_pdl") is appended to the row name. */
static void emit_row(const char *row_base, const char *suffix, int kernels, double *us, int n) {
    char row[96];
    snprintf(row, sizeof(row), "%s%s", row_base, suffix);
    qsort(us, (size_t)n, sizeof(double), cmp_double);
    double med = percentile(us, n, 0.5), p10 = percentile(us, n, 0.1), p90 = percentile(us, n, 0.9);
    printf("{\"impl\":\"%s\",\"row\":\"%s\",\"kernels\":%d,\"median_us\":%.3f,\"p10_us\":%.3f,"
           "\"p90_us\":%.3f,\"n\":%d,\"pdl\":%s}\n",
           IMPL, row, kernels, med, p10, p90, n, suffix[0] ? "true" : "false");
    fflush(stdout);
    fprintf(stderr, "[raw] %-26s K=%-5d median %10.3f us  (p10 %10.3f, p90 %10.3f, n=%d)\n", row, kernels,
            med, p10, p90, n);
}

/* ------------------------------------------------------------------------- */
/* per-device state                                                          */

typedef struct {
    int ordinal;
    CUdevice dev;
    CUcontext ctx; /* primary context */
    CUmodule mod;
    CUfunction add, mul;
    /* PDL: the sm_90 variant, launched with the programmatic attribute */
    int has_pdl;
    char no_pdl_reason[160];
    CUmodule mod_pdl;
    CUfunction add_pdl, mul_pdl;
    CUstream stream; /* non-blocking */
    CUdeviceptr x, y, z;
    unsigned int n;
    char name[256];
} Dev;

/* Loads the PDL variant when the device (9.0+) and driver (12.3+) allow it
 * and `pdl_ptx` is given; else records why not. */
static void dev_setup_pdl(Dev *d, const char *pdl_ptx) {
    int drv = 0, major = 0;
    CK(cuDriverGetVersion(&drv));
    CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev));
    if (!pdl_ptx) {
        snprintf(d->no_pdl_reason, sizeof(d->no_pdl_reason), "PDL off (--no-pdl or no sm_90 PTX file)");
    } else if (major < 9) {
        snprintf(d->no_pdl_reason, sizeof(d->no_pdl_reason), "device compute capability %d.x < 9.0", major);
    } else if (drv < PDL_MIN_DRIVER) {
        snprintf(d->no_pdl_reason, sizeof(d->no_pdl_reason), "driver API %d < %d", drv, PDL_MIN_DRIVER);
    } else {
        CK(cuModuleLoadData(&d->mod_pdl, pdl_ptx));
        CK(cuModuleGetFunction(&d->add_pdl, d->mod_pdl, "fc_add_f32"));
        CK(cuModuleGetFunction(&d->mul_pdl, d->mod_pdl, "fc_mul_f32"));
        d->has_pdl = 1;
    }
}

static void dev_setup(Dev *d, int ordinal, const char *ptx, const char *pdl_ptx, unsigned int n) {
    memset(d, 0, sizeof(*d));
    d->ordinal = ordinal;
    d->n = n;
    CK(cuDeviceGet(&d->dev, ordinal));
    CK(cuDeviceGetName(d->name, (int)sizeof(d->name) - 1, d->dev));
    CK(cuDevicePrimaryCtxRetain(&d->ctx, d->dev));
    CK(cuCtxSetCurrent(d->ctx));
    CK(cuModuleLoadData(&d->mod, ptx));
    CK(cuModuleGetFunction(&d->add, d->mod, "fc_add_f32"));
    CK(cuModuleGetFunction(&d->mul, d->mod, "fc_mul_f32"));
    dev_setup_pdl(d, pdl_ptx);
    CK(cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING));
    size_t bytes = (size_t)n * sizeof(float);
    CK(cuMemAlloc(&d->x, bytes));
    CK(cuMemAlloc(&d->y, bytes));
    CK(cuMemAlloc(&d->z, bytes));
}

static void dev_teardown(Dev *d) {
    CK(cuCtxSetCurrent(d->ctx));
    CK(cuStreamSynchronize(d->stream));
    CK(cuMemFree(d->x));
    CK(cuMemFree(d->y));
    CK(cuMemFree(d->z));
    CK(cuStreamDestroy(d->stream));
    CK(cuModuleUnload(d->mod));
    if (d->has_pdl) CK(cuModuleUnload(d->mod_pdl));
    CK(cuDevicePrimaryCtxRelease(d->dev));
}

static inline void launch(Dev *d, CUfunction f, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out) {
    unsigned int n = d->n;
    void *params[4] = {&a, &b, &out, &n};
    unsigned int grid = (n + BLOCK - 1) / BLOCK;
    CK(cuLaunchKernel(f, grid, 1, 1, BLOCK, 1, 1, 0, d->stream, params, NULL));
}

/* The same launch with programmatic dependent launch (sm_90 variant `f`). */
static inline void launch_pdl(Dev *d, CUfunction f, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out) {
    unsigned int n = d->n;
    void *params[4] = {&a, &b, &out, &n};
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof(attr));
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = (n + BLOCK - 1) / BLOCK;
    cfg.gridDimY = 1;
    cfg.gridDimZ = 1;
    cfg.blockDimX = BLOCK;
    cfg.blockDimY = 1;
    cfg.blockDimZ = 1;
    cfg.sharedMemBytes = 0;
    cfg.hStream = d->stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    CK(cuLaunchKernelEx(&cfg, f, params, NULL));
}

/* K kernels: z = x + y; x = z * y; ... (PDL launches when `pdl`) */
static inline void enqueue_chain(Dev *d, int K, int pdl) {
    for (int i = 0; i < K; i++) {
        if (pdl) {
            if ((i & 1) == 0)
                launch_pdl(d, d->add_pdl, d->x, d->y, d->z);
            else
                launch_pdl(d, d->mul_pdl, d->z, d->y, d->x);
        } else if ((i & 1) == 0) {
            launch(d, d->add, d->x, d->y, d->z);
        } else {
            launch(d, d->mul, d->z, d->y, d->x);
        }
    }
}

/* begin capture, K launches, end capture, instantiate */
static CUgraphExec capture_instantiate(Dev *d, int K, int pdl, CUgraph *graph_out) {
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    CK(cuStreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    enqueue_chain(d, K, pdl);
    CK(cuStreamEndCapture(d->stream, &g));
    CK(cuGraphInstantiateWithFlags(&ge, g, 0));
    *graph_out = g;
    return ge;
}

/* x = 0, y = 1 */
static void reset_inputs(Dev *d) {
    CK(cuMemsetD32Async(d->x, 0u, d->n, d->stream));
    CK(cuMemsetD32Async(d->y, 0x3f800000u /* 1.0f */, d->n, d->stream));
    CK(cuMemsetD32Async(d->z, 0u, d->n, d->stream));
    CK(cuStreamSynchronize(d->stream));
}

/* After one chain of K kernels starting from x = 0, y = 1: x == K/2 everywhere. */
static void check_result(Dev *d, int K, const char *what) {
    float *h = (float *)malloc(sizeof(float) * d->n);
    if (!h) die_msg("out of host memory");
    CK(cuStreamSynchronize(d->stream));
    CK(cuMemcpyDtoHAsync(h, d->x, sizeof(float) * d->n, d->stream));
    CK(cuStreamSynchronize(d->stream));
    float want = (float)(K / 2);
    for (unsigned int i = 0; i < d->n; i++) {
        if (h[i] != want) {
            fprintf(stderr, "[raw] FATAL wrong result after %s, K=%d: x[%u] = %g, want %g\n", what, K, i,
                    (double)h[i], (double)want);
            exit(1);
        }
    }
    free(h);
    fprintf(stderr, "[raw] check %s K=%d: ok (x == %g)\n", what, K, (double)want);
}

/* ------------------------------------------------------------------------- */
/* single-device rows                                                        */

/* One mode's rows: plain launches (`pdl` 0, rows as named) or PDL launches
 * (`pdl` 1, rows suffixed "_pdl"). */
static void bench_k_mode(Dev *d, int K, int warmup, int iters, int pdl) {
    const char *sfx = pdl ? "_pdl" : "";
    const char *what = pdl ? "eager (PDL)" : "eager";
    double *a = (double *)calloc((size_t)iters, sizeof(double));
    double *b = (double *)calloc((size_t)iters, sizeof(double));
    if (!a || !b) die_msg("out of host memory");
    CK(cuCtxSetCurrent(d->ctx));

    /* correctness of the eager chain */
    reset_inputs(d);
    enqueue_chain(d, K, pdl);
    check_result(d, K, what);

    /* 1. eager: enqueue (per kernel) and enqueue + sync */
    for (int w = 0; w < warmup; w++) {
        enqueue_chain(d, K, pdl);
        CK(cuStreamSynchronize(d->stream));
    }
    for (int it = 0; it < iters; it++) {
        uint64_t t0 = now_ns();
        enqueue_chain(d, K, pdl);
        uint64_t t1 = now_ns();
        CK(cuStreamSynchronize(d->stream));
        uint64_t t2 = now_ns();
        a[it] = (double)(t1 - t0) / 1e3 / (double)K;
        b[it] = (double)(t2 - t0) / 1e3;
    }
    emit_row("eager_enqueue_per_kernel", sfx, K, a, iters);
    emit_row("eager_enqueue_sync", sfx, K, b, iters);

    /* 2. one captured graph: launch (host) and launch + sync */
    CUgraph g = NULL;
    CUgraphExec ge = capture_instantiate(d, K, pdl, &g);
    reset_inputs(d);
    CK(cuGraphLaunch(ge, d->stream));
    check_result(d, K, pdl ? "graph (PDL)" : "graph");
    for (int w = 0; w < warmup; w++) {
        CK(cuGraphLaunch(ge, d->stream));
        CK(cuStreamSynchronize(d->stream));
    }
    for (int it = 0; it < iters; it++) {
        uint64_t t0 = now_ns();
        CK(cuGraphLaunch(ge, d->stream));
        uint64_t t1 = now_ns();
        CK(cuStreamSynchronize(d->stream));
        uint64_t t2 = now_ns();
        a[it] = (double)(t1 - t0) / 1e3;
        b[it] = (double)(t2 - t0) / 1e3;
    }
    emit_row("graph_launch_host", sfx, K, a, iters);
    emit_row("graph_launch_sync", sfx, K, b, iters);

    /* 3. capture + instantiate, end to end (destroyed untimed) */
    for (int w = 0; w < warmup; w++) {
        CUgraph g2 = NULL;
        CUgraphExec ge2 = capture_instantiate(d, K, pdl, &g2);
        CK(cuGraphExecDestroy(ge2));
        CK(cuGraphDestroy(g2));
    }
    for (int it = 0; it < iters; it++) {
        CUgraph g2 = NULL;
        uint64_t t0 = now_ns();
        CUgraphExec ge2 = capture_instantiate(d, K, pdl, &g2);
        uint64_t t1 = now_ns();
        CK(cuGraphExecDestroy(ge2));
        CK(cuGraphDestroy(g2));
        a[it] = (double)(t1 - t0) / 1e3;
    }
    emit_row("capture_instantiate", sfx, K, a, iters);

    /* 4. re-capture + cuGraphExecUpdate into the existing exec; the timer
     * includes destroying the graph just captured (one K-node destroy, as
     * fc-graph's end_update) */
    for (int it = -warmup; it < iters; it++) {
        CUgraph g2 = NULL;
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof(info));
        uint64_t t0 = now_ns();
        CK(cuStreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        enqueue_chain(d, K, pdl);
        CK(cuStreamEndCapture(d->stream, &g2));
        CK(cuGraphExecUpdate(ge, g2, &info));
        CK(cuGraphDestroy(g2));
        uint64_t t1 = now_ns();
        if (info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
            fprintf(stderr, "[raw] FATAL cuGraphExecUpdate result %d\n", (int)info.result);
            exit(1);
        }
        if (it >= 0) a[it] = (double)(t1 - t0) / 1e3;
    }
    emit_row("recapture_update", sfx, K, a, iters);
    reset_inputs(d);
    CK(cuGraphLaunch(ge, d->stream));
    check_result(d, K, pdl ? "updated graph (PDL)" : "updated graph");

    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));
    free(a);
    free(b);
}

static const char *const ROWS_PER_MODE[] = {"eager_enqueue_per_kernel", "eager_enqueue_sync", "graph_launch_host",
                                            "graph_launch_sync", "capture_instantiate", "recapture_update"};

static void bench_k(Dev *d, int K, int warmup, int iters) {
    bench_k_mode(d, K, warmup, iters, 0);
    if (d->has_pdl) {
        bench_k_mode(d, K, warmup, iters, 1);
        return;
    }
    for (size_t i = 0; i < sizeof(ROWS_PER_MODE) / sizeof(ROWS_PER_MODE[0]); i++) {
        printf("{\"impl\":\"%s\",\"row\":\"%s_pdl\",\"kernels\":%d,\"skipped\":\"%s\"}\n", IMPL, ROWS_PER_MODE[i], K,
               d->no_pdl_reason);
    }
    fflush(stdout);
    fprintf(stderr, "[raw] [SKIP] PDL rows K=%d: %s\n", K, d->no_pdl_reason);
}

/* ------------------------------------------------------------------------- */
/* multi-GPU: loops on 1 device alone vs 2 devices at once                   */

typedef enum { LOOP_CAPTURE, LOOP_REPLAY, LOOP_UPDATE } LoopKind;

static const char *const LOOP_ROW[] = {"multi_gpu_captures_per_s", "multi_gpu_replays_per_s",
                                       "multi_gpu_updates_per_s"};
static const char *const LOOP_DOC[] = {"capture+instantiate+launch+sync+destroy", "launch+sync of one graph",
                                       "re-capture+update+destroy+launch+sync"};

typedef struct {
    Dev *d;
    int K;
    int pdl;
    LoopKind kind;
    double secs;
    pthread_barrier_t *barrier;
    CUgraph g; /* LOOP_REPLAY / LOOP_UPDATE: the graph and its executable */
    CUgraphExec ge;
    long count;
    double elapsed_s;
} Worker;

/* One iteration of the worker's loop. */
static void loop_once(Worker *w) {
    Dev *d = w->d;
    switch (w->kind) {
    case LOOP_CAPTURE: {
        CUgraph g = NULL;
        CUgraphExec ge = capture_instantiate(d, w->K, w->pdl, &g);
        CK(cuGraphLaunch(ge, d->stream));
        CK(cuStreamSynchronize(d->stream));
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
        break;
    }
    case LOOP_REPLAY:
        CK(cuGraphLaunch(w->ge, d->stream));
        CK(cuStreamSynchronize(d->stream));
        break;
    case LOOP_UPDATE: {
        CUgraph g2 = NULL;
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof(info));
        CK(cuStreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        enqueue_chain(d, w->K, w->pdl);
        CK(cuStreamEndCapture(d->stream, &g2));
        CK(cuGraphExecUpdate(w->ge, g2, &info));
        CK(cuGraphDestroy(g2));
        if (info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) die_msg("cuGraphExecUpdate did not update in place");
        CK(cuGraphLaunch(w->ge, d->stream));
        CK(cuStreamSynchronize(d->stream));
        break;
    }
    }
}

static void *worker_main(void *arg) {
    Worker *w = (Worker *)arg;
    CK(cuCtxSetCurrent(w->d->ctx));
    if (w->kind != LOOP_CAPTURE) w->ge = capture_instantiate(w->d, w->K, w->pdl, &w->g);
    for (int i = 0; i < 5; i++) loop_once(w); /* warm-up */
    pthread_barrier_wait(w->barrier);
    uint64_t t0 = now_ns();
    uint64_t limit = (uint64_t)(w->secs * 1e9);
    long count = 0;
    uint64_t t;
    do {
        loop_once(w);
        count++;
        t = now_ns();
    } while (t - t0 < limit);
    w->count = count;
    w->elapsed_s = (double)(t - t0) / 1e9;
    if (w->kind != LOOP_CAPTURE) {
        CK(cuGraphExecDestroy(w->ge));
        CK(cuGraphDestroy(w->g));
    }
    return NULL;
}

/* Runs `ndev` workers at once on devs[0..ndev); returns the total per second. */
static double run_workers(Dev *devs, int ndev, LoopKind kind, int K, int pdl, double secs, double *per_dev) {
    pthread_t th[2];
    Worker w[2];
    pthread_barrier_t barrier;
    if (pthread_barrier_init(&barrier, NULL, (unsigned)ndev) != 0) die_msg("pthread_barrier_init");
    for (int i = 0; i < ndev; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].d = &devs[i];
        w[i].K = K;
        w[i].pdl = pdl;
        w[i].kind = kind;
        w[i].secs = secs;
        w[i].barrier = &barrier;
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) die_msg("pthread_create");
    }
    double total = 0;
    for (int i = 0; i < ndev; i++) {
        pthread_join(th[i], NULL);
        per_dev[i] = (double)w[i].count / w[i].elapsed_s;
        total += per_dev[i];
    }
    pthread_barrier_destroy(&barrier);
    return total;
}

/* The value field of a loop's rows: captures_per_s (kept from earlier runs) or per_s. */
static const char *loop_field(LoopKind kind) { return kind == LOOP_CAPTURE ? "captures_per_s" : "per_s"; }

static void bench_multi_gpu(const char *ptx, const char *pdl_ptx, unsigned int n, double secs) {
    const int K = 26;
    int count = 0;
    CK(cuDeviceGetCount(&count));
    Dev devs[2];
    int ndev = count >= 2 ? 2 : 1;
    for (int i = 0; i < ndev; i++) dev_setup(&devs[i], i, ptx, pdl_ptx, n);
    int pdl = devs[0].has_pdl && (ndev < 2 || devs[1].has_pdl);
    const LoopKind kinds[3] = {LOOP_CAPTURE, LOOP_REPLAY, LOOP_UPDATE};
    for (int k = 0; k < 3; k++) {
        LoopKind kind = kinds[k];
        const char *row = LOOP_ROW[kind], *field = loop_field(kind);
        double per[2] = {0, 0};
        double one = run_workers(devs, 1, kind, K, pdl, secs, per);
        printf("{\"impl\":\"%s\",\"row\":\"%s_1dev\",\"kernels\":%d,\"%s\":%.1f,\"secs\":%.3f,\"devices\":1,"
               "\"pdl\":%s}\n",
               IMPL, row, K, field, one, secs, pdl ? "true" : "false");
        fflush(stdout);
        fprintf(stderr, "[raw] %s 1 device : %.1f/s (%s, K=%d%s)\n", row, one, LOOP_DOC[kind], K, pdl ? ", PDL" : "");
        if (ndev < 2) {
            fprintf(stderr, "[raw] [SKIP] %s 2 devices: only %d CUDA device(s) visible\n", row, count);
            printf("{\"impl\":\"%s\",\"row\":\"%s_2dev\",\"kernels\":%d,\"skipped\":\"only %d CUDA device(s)\"}\n", IMPL,
                   row, K, count);
            fflush(stdout);
            continue;
        }
        double two = run_workers(devs, 2, kind, K, pdl, secs, per);
        printf("{\"impl\":\"%s\",\"row\":\"%s_2dev\",\"kernels\":%d,\"%s\":%.1f,\"per_device\":[%.1f,%.1f],"
               "\"ratio_vs_1dev\":%.3f,\"secs\":%.3f,\"devices\":2,\"pdl\":%s}\n",
               IMPL, row, K, field, two, per[0], per[1], two / one, secs, pdl ? "true" : "false");
        fflush(stdout);
        fprintf(stderr, "[raw] %s 2 devices: %.1f/s (%.1f + %.1f), %.2fx one device\n", row, two, per[0], per[1],
                two / one);
    }
    for (int i = ndev - 1; i >= 0; i--) dev_teardown(&devs[i]);
}

/* ------------------------------------------------------------------------- */

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "[raw] FATAL cannot open PTX file %s\n", path);
        exit(1);
    }
    if (fseek(f, 0, SEEK_END) != 0) die_msg("fseek");
    long len = ftell(f);
    if (len < 0) die_msg("ftell");
    rewind(f);
    char *buf = (char *)malloc((size_t)len + 1);
    if (!buf) die_msg("out of host memory");
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) die_msg("short read of PTX file");
    buf[len] = '\0'; /* cuModuleLoadData needs a NUL-terminated PTX image */
    fclose(f);
    return buf;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s PTX_FILE [--kernels 26,260,2600] [--n 4096] [--warmup 5] [--iters N]\n"
            "          [--device 0] [--multi-gpu-secs 1.0] [--no-multi-gpu] [--quick]\n"
            "          [--pdl-ptx PATH (default: elementwise_sm90.ptx beside PTX_FILE)] [--no-pdl]\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv) {
    const char *ptx_path = NULL;
    int ks[MAX_KS] = {26, 260, 2600};
    int nks = 3;
    unsigned int n = 4096;
    int warmup = 5;
    int iters = 0; /* 0: 50 for K <= 260, 20 above */
    int device = 0;
    double mg_secs = 1.0;
    int multi_gpu = 1;
    const char *pdl_ptx_path = NULL;
    int no_pdl = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_next = i + 1 < argc;
        if (strcmp(a, "--kernels") == 0 && has_next) {
            char *s = argv[++i];
            nks = 0;
            for (char *tok = strtok(s, ","); tok && nks < MAX_KS; tok = strtok(NULL, ",")) ks[nks++] = atoi(tok);
        } else if (strcmp(a, "--n") == 0 && has_next) {
            n = (unsigned int)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(a, "--warmup") == 0 && has_next) {
            warmup = atoi(argv[++i]);
        } else if (strcmp(a, "--iters") == 0 && has_next) {
            iters = atoi(argv[++i]);
        } else if (strcmp(a, "--device") == 0 && has_next) {
            device = atoi(argv[++i]);
        } else if (strcmp(a, "--multi-gpu-secs") == 0 && has_next) {
            mg_secs = atof(argv[++i]);
        } else if (strcmp(a, "--no-multi-gpu") == 0) {
            multi_gpu = 0;
        } else if (strcmp(a, "--pdl-ptx") == 0 && has_next) {
            pdl_ptx_path = argv[++i];
        } else if (strcmp(a, "--no-pdl") == 0) {
            no_pdl = 1;
        } else if (strcmp(a, "--quick") == 0) {
            ks[0] = 26;
            nks = 1;
            warmup = 2;
            iters = 5;
            mg_secs = 0.1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(argv[0]);
        } else if (a[0] == '-') {
            fprintf(stderr, "[raw] unknown option %s\n", a);
            usage(argv[0]);
        } else if (!ptx_path) {
            ptx_path = a;
        } else {
            usage(argv[0]);
        }
    }
    if (!ptx_path) usage(argv[0]);
    if (n == 0 || nks == 0 || warmup < 0 || iters < 0) usage(argv[0]);
    for (int i = 0; i < nks; i++)
        if (ks[i] <= 0) usage(argv[0]);

    char *ptx = read_file(ptx_path);
    /* The PDL variant: --pdl-ptx, else elementwise_sm90.ptx beside PTX_FILE. */
    char pdl_default[4096];
    if (!pdl_ptx_path) {
        const char *slash = strrchr(ptx_path, '/');
        int dir_len = slash ? (int)(slash - ptx_path + 1) : 0;
        snprintf(pdl_default, sizeof(pdl_default), "%.*selementwise_sm90.ptx", dir_len, ptx_path);
        pdl_ptx_path = pdl_default;
    }
    char *pdl_ptx = NULL;
    if (!no_pdl) {
        FILE *f = fopen(pdl_ptx_path, "rb");
        if (f) {
            fclose(f);
            pdl_ptx = read_file(pdl_ptx_path);
        } else {
            fprintf(stderr, "[raw] no PDL PTX at %s: PDL rows are skipped\n", pdl_ptx_path);
        }
    }
    CK(cuInit(0));
    int drv = 0, count = 0;
    CK(cuDriverGetVersion(&drv));
    CK(cuDeviceGetCount(&count));
    if (count == 0) die_msg("no CUDA device");
    if (device >= count) die_msg("--device out of range");

    Dev d;
    dev_setup(&d, device, ptx, pdl_ptx, n);
    fprintf(stderr, "[raw] driver API %d, %d device(s); device %d: %s; n=%u, warmup=%d, PTX %s; PDL: %s%s\n", drv,
            count, device, d.name, n, warmup, ptx_path, d.has_pdl ? "yes, " : "no, ",
            d.has_pdl ? pdl_ptx_path : d.no_pdl_reason);

    for (int i = 0; i < nks; i++) {
        int K = ks[i];
        int it = iters > 0 ? iters : (K <= 260 ? 50 : 20);
        bench_k(&d, K, warmup, it);
    }
    dev_teardown(&d);

    if (multi_gpu) bench_multi_gpu(ptx, pdl_ptx, n, mg_secs);

    free(pdl_ptx);
    free(ptx);
    fprintf(stderr, "[raw] done\n");
    return 0;
}
