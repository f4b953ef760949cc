/*
 * ctx_probe.c - what the driver does with a CUfunction launch when the
 * calling thread's current context is not the function's (issue #11: can
 * fc-graph skip its per-launch cuCtxGetCurrent?), and what the candidate
 * calls cost.
 *
 * For each "current context" case (the function's own A, none, device 1's
 * primary B, an isolated context C on device 0), eager and inside a
 * THREAD_LOCAL capture of A's stream:
 *   - the launch's return code (cuLaunchKernel and cuLaunchKernelEx);
 *   - whether the capture is still active afterwards;
 *   - after re-binding A and launching again: whether the capture ends and
 *     its graph computes the right result.
 * Then timings (ns per call, median of 7 x 20000): cuCtxGetCurrent,
 * cuStreamGetCaptureInfo on a capturing stream, a captured cuLaunchKernel.
 *
 * Build: gcc -O2 -std=c11 bench/probes/ctx_probe.c -I<cuda include> -lcuda -o ctx_probe
 * Run:   ./ctx_probe kernels/elementwise.ptx
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_check.h"

#define N 4096u

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static CUcontext A, B, C;
static CUfunction add;
static CUstream s;
static CUdeviceptr x, y, z;

static CUresult launch_plain(void) {
    unsigned int n = N;
    void *p[4] = {&x, &y, &z, &n};
    return cuLaunchKernel(add, N / 256, 1, 1, 256, 1, 1, 0, s, p, NULL);
}

static CUresult launch_ex(void) {
    unsigned int n = N;
    void *p[4] = {&x, &y, &z, &n};
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = N / 256;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 256;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    return cuLaunchKernelEx(&cfg, add, p, NULL);
}

/* z = x + y with x = 1, y = 2: z == 3 */
static int check_z(void) {
    float h[N];
    CK(cuCtxPushCurrent(A));
    CK(cuStreamSynchronize(s));
    CK(cuMemcpyDtoH(h, z, sizeof(h)));
    CK(cuMemsetD32(z, 0, N));
    CUcontext t;
    CK(cuCtxPopCurrent(&t));
    for (unsigned i = 0; i < N; i++)
        if (h[i] != 3.0f) return 0;
    return 1;
}

static void set_case(int c) {
    CUcontext cur = c == 0 ? A : c == 1 ? NULL : c == 2 ? B : C;
    CK(cuCtxSetCurrent(cur));
}

static const char *case_name[4] = {"A (own)", "none", "B (dev1 primary)", "C (isolated, dev0)"};

static void probe(int c, int ex) {
    const char *how = ex ? "cuLaunchKernelEx" : "cuLaunchKernel";
    /* eager */
    set_case(c);
    CUresult r = ex ? launch_ex() : launch_plain();
    int ok = r == CUDA_SUCCESS ? check_z() : -1;
    printf("eager    %-20s %-16s -> %-28s result %s\n", case_name[c], how, ename(r),
           ok == 1 ? "right" : ok == 0 ? "WRONG" : "n/a");
    /* captured */
    CK(cuCtxSetCurrent(A));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    set_case(c);
    r = ex ? launch_ex() : launch_plain();
    CUstreamCaptureStatus st;
    CUresult rq = cuStreamIsCapturing(s, &st);
    CK(cuCtxSetCurrent(A));
    CUstreamCaptureStatus st2;
    CK(cuStreamIsCapturing(s, &st2));
    CUresult r2 = CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) r2 = ex ? launch_ex() : launch_plain(); /* retry bound */
    CUgraph g = NULL;
    CUresult re = cuStreamEndCapture(s, &g);
    size_t nodes = 0;
    int gok = -1;
    if (re == CUDA_SUCCESS && g) {
        CK(cuGraphGetNodes(g, NULL, &nodes));
        CUgraphExec ge;
        CK(cuGraphInstantiateWithFlags(&ge, g, 0));
        CK(cuGraphLaunch(ge, s));
        gok = check_z();
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
    }
    printf("captured %-20s %-16s -> %-28s status(q %s)=%d after-rebind=%d retry=%s end=%s nodes=%zu graph %s\n",
           case_name[c], how, ename(r), ename(rq), (int)st, (int)st2, ename(r2), ename(re), nodes,
           gok == 1 ? "right" : gok == 0 ? "WRONG" : "n/a");
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x1 = *(const uint64_t *)a, y1 = *(const uint64_t *)b;
    return x1 < y1 ? -1 : x1 > y1;
}

#define REPS 7
#define ITERS 20000

static void timing(void) {
    uint64_t t[REPS];
    CK(cuCtxSetCurrent(A));
    for (int r = 0; r < REPS; r++) {
        CUcontext cur;
        uint64_t t0 = now_ns();
        for (int i = 0; i < ITERS; i++) cuCtxGetCurrent(&cur);
        t[r] = now_ns() - t0;
    }
    qsort(t, REPS, sizeof(t[0]), cmp_u64);
    printf("timing cuCtxGetCurrent: %.1f ns\n", (double)t[REPS / 2] / ITERS);

    for (int r = 0; r < REPS; r++) {
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        CK(launch_plain());
        uint64_t t0 = now_ns();
        for (int i = 0; i < ITERS; i++) {
            CUstreamCaptureStatus st;
            cuuint64_t id;
            CUgraph g;
            const CUgraphNode *deps;
            size_t nd;
#if CUDA_VERSION >= 13000
            cuStreamGetCaptureInfo(s, &st, &id, &g, &deps, NULL, &nd);
#else
            cuStreamGetCaptureInfo_v3(s, &st, &id, &g, &deps, NULL, &nd);
#endif
        }
        t[r] = now_ns() - t0;
        CUgraph g;
        CK(cuStreamEndCapture(s, &g));
        CK(cuGraphDestroy(g));
    }
    qsort(t, REPS, sizeof(t[0]), cmp_u64);
    printf("timing cuStreamGetCaptureInfo (capturing): %.1f ns\n", (double)t[REPS / 2] / ITERS);

    for (int mode = 0; mode < 2; mode++) {
        for (int r = 0; r < REPS; r++) {
            CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
            uint64_t t0 = now_ns();
            for (int i = 0; i < 2000; i++) {
                if (mode == 1) {
                    CUcontext cur;
                    cuCtxGetCurrent(&cur);
                }
                CK(launch_plain());
            }
            t[r] = now_ns() - t0;
            CUgraph g;
            CK(cuStreamEndCapture(s, &g));
            CK(cuGraphDestroy(g));
        }
        qsort(t, REPS, sizeof(t[0]), cmp_u64);
        printf("timing captured cuLaunchKernel%s: %.1f ns\n", mode ? " + cuCtxGetCurrent" : "",
               (double)t[REPS / 2] / 2000);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s elementwise.ptx\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    static char ptx[1 << 20];
    size_t len = fread(ptx, 1, sizeof(ptx) - 1, f);
    fclose(f);
    ptx[len] = 0;
    int drv = 0;
    CK(cuInit(0));
    CK(cuDriverGetVersion(&drv));
    int count = 0;
    CK(cuDeviceGetCount(&count));
    printf("driver %d, %d devices\n", drv, count);
    CUdevice d0, d1;
    CK(cuDeviceGet(&d0, 0));
    CK(cuDeviceGet(&d1, count > 1 ? 1 : 0));
    CK(cuDevicePrimaryCtxRetain(&A, d0));
    CK(cuDevicePrimaryCtxRetain(&B, d1));
#if CUDA_VERSION >= 13000
    CK(cuCtxCreate(&C, NULL, 0, d0));
#else
    CK(cuCtxCreate(&C, 0, d0));
#endif
    CK(cuCtxSetCurrent(A));
    CUmodule m;
    CK(cuModuleLoadData(&m, ptx));
    CK(cuModuleGetFunction(&add, m, "fc_add_f32"));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&x, N * 4));
    CK(cuMemAlloc(&y, N * 4));
    CK(cuMemAlloc(&z, N * 4));
    CK(cuMemsetD32(x, 0x3f800000u, N));
    CK(cuMemsetD32(y, 0x40000000u, N));
    CK(cuMemsetD32(z, 0, N));
    for (int ex = 0; ex < 2; ex++)
        for (int c = 0; c < 4; c++) probe(c, ex);
    if (argc < 3 || strcmp(argv[2], "--no-timing") != 0) timing();
    return 0;
}
