/* driver_race.c - the coexistence crash without fc-graph: the CUDA driver
 * API alone, two threads on one device's primary context.
 *
 *   driver_race PTX MODE SECONDS [CAPTURE_MODE]
 *
 * Thread 1 loops, on a non-blocking stream of the primary context, by MODE:
 *   capture   begin a THREAD_LOCAL capture, 26 kernels, end, instantiate,
 *             launch, synchronise the stream, destroy both graphs (what an
 *             engine's capture loop does);
 *   record    begin, 26 kernels, end, destroy the graph (no instantiate);
 *   eager     26 kernels and a stream synchronise (no capture at all).
 * CAPTURE_MODE is thread_local (default), global or relaxed.
 * Thread 2 loops cuCtxSynchronize on the same primary context (what
 * cudaDeviceSynchronize and torch.cuda.synchronize() do), counting its
 * results. Prints one line: MODE, iterations of each thread, how many
 * syncs were refused (900) and captures invalidated (901). A driver crash
 * shows as the process dying (SIGSEGV). Build: gcc -O2 -I<cuda>/include
 * driver_race.c -lcuda -lpthread.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define K 26
#define N 4096

static CUcontext g_ctx;
static volatile int g_stop;
static long g_syncs, g_refused;

static void die(const char *what, CUresult r)
{
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("driver_race: %s failed: %s (%d)\n", what, name, (int)r);
    exit(2);
}
#define CK(call)                                                                                                       \
    do {                                                                                                               \
        CUresult r_ = (call);                                                                                          \
        if (r_ != CUDA_SUCCESS) die(#call, r_);                                                                        \
    } while (0)

static void *syncer(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(g_ctx));
    while (!g_stop) {
        CUresult r = cuCtxSynchronize();
        g_syncs++;
        if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) g_refused++;
        else if (r != CUDA_SUCCESS) die("cuCtxSynchronize", r);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s PTX capture|record|eager SECONDS [thread_local|global|relaxed]\n", argv[0]);
        return 2;
    }
    const char *cmode = argc == 5 ? argv[4] : "thread_local";
    CUstreamCaptureMode capture_mode = !strcmp(cmode, "global")    ? CU_STREAM_CAPTURE_MODE_GLOBAL
                                       : !strcmp(cmode, "relaxed") ? CU_STREAM_CAPTURE_MODE_RELAXED
                                                                   : CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    const char *mode = argv[2];
    double seconds = atof(argv[3]);
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    static char ptx[1 << 16];
    size_t len = fread(ptx, 1, sizeof ptx - 1, f);
    fclose(f);
    ptx[len] = 0;

    CUdevice dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&g_ctx, dev));
    CK(cuCtxSetCurrent(g_ctx));
    CUmodule mod;
    CUfunction add, mul;
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&add, mod, "fc_add_f32"));
    CK(cuModuleGetFunction(&mul, mod, "fc_mul_f32"));
    CUdeviceptr x, y, z;
    CK(cuMemAlloc(&x, N * 4));
    CK(cuMemAlloc(&y, N * 4));
    CK(cuMemAlloc(&z, N * 4));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned n = N;
    void *pa[] = {&x, &y, &z, &n}, *pm[] = {&z, &y, &x, &n};

    pthread_t th;
    pthread_create(&th, NULL, syncer, NULL);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long iters = 0, invalidated = 0;
    int capture = strcmp(mode, "eager") != 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > seconds) break;
        if (capture) CK(cuStreamBeginCapture(s, capture_mode));
        CUresult r = CUDA_SUCCESS;
        for (int i = 0; i < K && r == CUDA_SUCCESS; i++)
            r = cuLaunchKernel(i % 2 ? mul : add, N / 256, 1, 1, 256, 1, 1, 0, s, i % 2 ? pm : pa, NULL);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) die("cuLaunchKernel", r);
        if (capture) {
            CUgraph g = NULL;
            r = cuStreamEndCapture(s, &g);
            if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
                invalidated++;
                if (g) cuGraphDestroy(g);
                iters++;
                continue;
            }
            if (r != CUDA_SUCCESS) die("cuStreamEndCapture", r);
            if (!strcmp(mode, "capture")) {
                CUgraphExec e;
                CK(cuGraphInstantiateWithFlags(&e, g, 0));
                CK(cuGraphLaunch(e, s));
                CK(cuStreamSynchronize(s));
                CK(cuGraphExecDestroy(e));
            }
            CK(cuGraphDestroy(g));
        } else {
            CK(cuStreamSynchronize(s));
        }
        iters++;
    }
    g_stop = 1;
    pthread_join(th, NULL);
    printf("driver_race %s %s: %.0f s, %ld iterations (%ld captures invalidated), %ld foreign syncs (%ld refused: "
           "900)\n",
           mode, capture ? cmode : "-", seconds, iters, invalidated, g_syncs, g_refused);
    return 0;
}
