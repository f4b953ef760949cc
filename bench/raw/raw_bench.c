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
 * Build (on the GPU machine):
 *   gcc -O2 -std=c11 bench/raw/raw_bench.c -I/usr/local/cuda/include -lcuda -lpthread -o raw_bench
 *   (or -L/usr/local/cuda/lib64/stubs if libcuda.so is not on the linker path)
 * Run:
 *   ./raw_bench kernels/elementwise.ptx [--kernels 26,260,2600] [--n 4096]
 *       [--warmup 5] [--iters N] [--device 0] [--multi-gpu-secs 1.0]
 *       [--no-multi-gpu] [--quick]
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

/* Sorts `us` (microseconds) in place and prints the JSON row + a human line. */
static void emit_row(const char *row, int kernels, double *us, int n) {
    qsort(us, (size_t)n, sizeof(double), cmp_double);
    double med = percentile(us, n, 0.5), p10 = percentile(us, n, 0.1), p90 = percentile(us, n, 0.9);
    printf("{\"impl\":\"%s\",\"row\":\"%s\",\"kernels\":%d,\"median_us\":%.3f,\"p10_us\":%.3f,"
           "\"p90_us\":%.3f,\"n\":%d}\n",
           IMPL, row, kernels, med, p10, p90, n);
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
    CUstream stream; /* non-blocking */
    CUdeviceptr x, y, z;
    unsigned int n;
    char name[256];
} Dev;

static void dev_setup(Dev *d, int ordinal, const char *ptx, unsigned int n) {
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
    CK(cuDevicePrimaryCtxRelease(d->dev));
}

static inline void launch(Dev *d, CUfunction f, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out) {
    unsigned int n = d->n;
    void *params[4] = {&a, &b, &out, &n};
    unsigned int grid = (n + BLOCK - 1) / BLOCK;
    CK(cuLaunchKernel(f, grid, 1, 1, BLOCK, 1, 1, 0, d->stream, params, NULL));
}

/* K kernels: z = x + y; x = z * y; ... */
static inline void enqueue_chain(Dev *d, int K) {
    for (int i = 0; i < K; i++) {
        if ((i & 1) == 0)
            launch(d, d->add, d->x, d->y, d->z);
        else
            launch(d, d->mul, d->z, d->y, d->x);
    }
}

/* begin capture, K launches, end capture, instantiate */
static CUgraphExec capture_instantiate(Dev *d, int K, CUgraph *graph_out) {
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    CK(cuStreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    enqueue_chain(d, K);
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

static void bench_k(Dev *d, int K, int warmup, int iters) {
    double *a = (double *)calloc((size_t)iters, sizeof(double));
    double *b = (double *)calloc((size_t)iters, sizeof(double));
    if (!a || !b) die_msg("out of host memory");
    CK(cuCtxSetCurrent(d->ctx));

    /* correctness of the eager chain */
    reset_inputs(d);
    enqueue_chain(d, K);
    check_result(d, K, "eager");

    /* 1. eager: enqueue (per kernel) and enqueue + sync */
    for (int w = 0; w < warmup; w++) {
        enqueue_chain(d, K);
        CK(cuStreamSynchronize(d->stream));
    }
    for (int it = 0; it < iters; it++) {
        uint64_t t0 = now_ns();
        enqueue_chain(d, K);
        uint64_t t1 = now_ns();
        CK(cuStreamSynchronize(d->stream));
        uint64_t t2 = now_ns();
        a[it] = (double)(t1 - t0) / 1e3 / (double)K;
        b[it] = (double)(t2 - t0) / 1e3;
    }
    emit_row("eager_enqueue_per_kernel", K, a, iters);
    emit_row("eager_enqueue_sync", K, b, iters);

    /* 2. one captured graph: launch (host) and launch + sync */
    CUgraph g = NULL;
    CUgraphExec ge = capture_instantiate(d, K, &g);
    reset_inputs(d);
    CK(cuGraphLaunch(ge, d->stream));
    check_result(d, K, "graph");
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
    emit_row("graph_launch_host", K, a, iters);
    emit_row("graph_launch_sync", K, b, iters);

    /* 3. capture + instantiate, end to end */
    for (int w = 0; w < warmup; w++) {
        CUgraph g2 = NULL;
        CUgraphExec ge2 = capture_instantiate(d, K, &g2);
        CK(cuGraphExecDestroy(ge2));
        CK(cuGraphDestroy(g2));
    }
    for (int it = 0; it < iters; it++) {
        CUgraph g2 = NULL;
        uint64_t t0 = now_ns();
        CUgraphExec ge2 = capture_instantiate(d, K, &g2);
        uint64_t t1 = now_ns();
        CK(cuGraphExecDestroy(ge2));
        CK(cuGraphDestroy(g2));
        a[it] = (double)(t1 - t0) / 1e3;
    }
    emit_row("capture_instantiate", K, a, iters);

    /* 4. re-capture + cuGraphExecUpdate into the existing exec */
    for (int it = -warmup; it < iters; it++) {
        CUgraph g2 = NULL;
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof(info));
        uint64_t t0 = now_ns();
        CK(cuStreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        enqueue_chain(d, K);
        CK(cuStreamEndCapture(d->stream, &g2));
        CK(cuGraphExecUpdate(ge, g2, &info));
        uint64_t t1 = now_ns();
        if (info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
            fprintf(stderr, "[raw] FATAL cuGraphExecUpdate result %d\n", (int)info.result);
            exit(1);
        }
        CK(cuGraphDestroy(g2));
        if (it >= 0) a[it] = (double)(t1 - t0) / 1e3;
    }
    emit_row("recapture_update", K, a, iters);
    reset_inputs(d);
    CK(cuGraphLaunch(ge, d->stream));
    check_result(d, K, "updated graph");

    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));
    free(a);
    free(b);
}

/* ------------------------------------------------------------------------- */
/* multi-GPU: captures/s on 1 device alone vs 2 devices at once              */

typedef struct {
    Dev *d;
    int K;
    double secs;
    pthread_barrier_t *barrier;
    long count;
    double elapsed_s;
} Worker;

static void capture_launch_once(Dev *d, int K) {
    CUgraph g = NULL;
    CUgraphExec ge = capture_instantiate(d, K, &g);
    CK(cuGraphLaunch(ge, d->stream));
    CK(cuStreamSynchronize(d->stream));
    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));
}

static void *worker_main(void *arg) {
    Worker *w = (Worker *)arg;
    CK(cuCtxSetCurrent(w->d->ctx));
    for (int i = 0; i < 5; i++) capture_launch_once(w->d, w->K); /* warm-up */
    pthread_barrier_wait(w->barrier);
    uint64_t t0 = now_ns();
    uint64_t limit = (uint64_t)(w->secs * 1e9);
    long count = 0;
    uint64_t t;
    do {
        capture_launch_once(w->d, w->K);
        count++;
        t = now_ns();
    } while (t - t0 < limit);
    w->count = count;
    w->elapsed_s = (double)(t - t0) / 1e9;
    return NULL;
}

/* Runs `ndev` workers at once on devs[0..ndev); returns total captures/s. */
static double run_workers(Dev *devs, int ndev, int K, double secs, double *per_dev) {
    pthread_t th[2];
    Worker w[2];
    pthread_barrier_t barrier;
    if (pthread_barrier_init(&barrier, NULL, (unsigned)ndev) != 0) die_msg("pthread_barrier_init");
    for (int i = 0; i < ndev; i++) {
        w[i].d = &devs[i];
        w[i].K = K;
        w[i].secs = secs;
        w[i].barrier = &barrier;
        w[i].count = 0;
        w[i].elapsed_s = 0;
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

static void bench_multi_gpu(const char *ptx, unsigned int n, double secs) {
    const int K = 26;
    int count = 0;
    CK(cuDeviceGetCount(&count));
    Dev devs[2];
    dev_setup(&devs[0], 0, ptx, n);
    double per[2] = {0, 0};
    double one = run_workers(devs, 1, K, secs, per);
    printf("{\"impl\":\"%s\",\"row\":\"multi_gpu_captures_per_s_1dev\",\"kernels\":%d,"
           "\"captures_per_s\":%.1f,\"secs\":%.3f,\"devices\":1}\n",
           IMPL, K, one, secs);
    fflush(stdout);
    fprintf(stderr, "[raw] multi_gpu 1 device : %.1f captures/s (capture+instantiate+launch+sync, K=%d)\n", one, K);
    if (count < 2) {
        fprintf(stderr, "[raw] [SKIP] multi_gpu 2 devices: only %d CUDA device(s) visible\n", count);
        printf("{\"impl\":\"%s\",\"row\":\"multi_gpu_captures_per_s_2dev\",\"kernels\":%d,"
               "\"skipped\":\"only %d CUDA device(s)\"}\n",
               IMPL, K, count);
        fflush(stdout);
        dev_teardown(&devs[0]);
        return;
    }
    dev_setup(&devs[1], 1, ptx, n);
    double two = run_workers(devs, 2, K, secs, per);
    printf("{\"impl\":\"%s\",\"row\":\"multi_gpu_captures_per_s_2dev\",\"kernels\":%d,"
           "\"captures_per_s\":%.1f,\"per_device\":[%.1f,%.1f],\"ratio_vs_1dev\":%.3f,\"secs\":%.3f,"
           "\"devices\":2}\n",
           IMPL, K, two, per[0], per[1], two / one, secs);
    fflush(stdout);
    fprintf(stderr, "[raw] multi_gpu 2 devices: %.1f captures/s (%.1f + %.1f), %.2fx one device\n", two, per[0],
            per[1], two / one);
    dev_teardown(&devs[1]);
    dev_teardown(&devs[0]);
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
            "          [--device 0] [--multi-gpu-secs 1.0] [--no-multi-gpu] [--quick]\n",
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
    CK(cuInit(0));
    int drv = 0, count = 0;
    CK(cuDriverGetVersion(&drv));
    CK(cuDeviceGetCount(&count));
    if (count == 0) die_msg("no CUDA device");
    if (device >= count) die_msg("--device out of range");

    Dev d;
    dev_setup(&d, device, ptx, n);
    fprintf(stderr, "[raw] driver API %d, %d device(s); device %d: %s; n=%u, warmup=%d, PTX %s\n", drv, count,
            device, d.name, n, warmup, ptx_path);

    for (int i = 0; i < nks; i++) {
        int K = ks[i];
        int it = iters > 0 ? iters : (K <= 260 ? 50 : 20);
        bench_k(&d, K, warmup, it);
    }
    dev_teardown(&d);

    if (multi_gpu) bench_multi_gpu(ptx, n, mg_secs);

    free(ptx);
    fprintf(stderr, "[raw] done\n");
    return 0;
}
