/* foreign_cudart.cu - coexistence client A (issue 9, item 5): a plain CUDA
 * runtime program that shares one GPU, in one process, with libfcgraph.
 *
 * A foreign thread loops, on the device's primary context (the runtime's):
 *   - a kernel on the legacy default stream + cudaDeviceSynchronize,
 *   - cudaMalloc, a kernel on the new memory, cudaFree,
 *   - a GLOBAL-mode stream capture of 3 kernels (cudaStreamBeginCapture(...,
 *     cudaStreamCaptureModeGlobal)), instantiate, launch, stream sync,
 *   - a copy back and a check of the iteration's result,
 * counting every call that fails. Meanwhile the main thread runs the fc
 * side (fc_side.c) in each configuration asked for (default: primary-plain,
 * primary-retry, isolated; also primary-capture, which needs
 * FC_RECORDING=capture in the environment, the library reading it once per
 * process, and isolated-cublas). One summary line per configuration
 * (fc_side_report); exit status 0 when no configuration FAILed (PASS, SKIP
 * and the control's INFO do not), 1 otherwise, 2 for bad arguments or a
 * failed start.
 *
 *   foreign_cudart [--device D] [--iters N] [--max-tries T] [--max-seconds S]
 *                  [--config NAME]... [--reps R] [--elements E] [--pause-us U]
 *
 * Built on the GPU machine by scripts/gpu-coexist.sh:
 *   nvcc -O2 foreign_cudart.cu -lfcside -lfcgraph
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fc_side.h"

/* x[i] += 1 (counts the launches), after `reps` multiply-adds on scratch[i]
 * (the work that makes the kernel take a realistic time). */
__global__ void work_kernel(float *x, float *scratch, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = scratch[i];
        for (int r = 0; r < reps; r++)
            v = v * 0.999f + 0.001f;
        scratch[i] = v;
        x[i] += 1.0f;
    }
}

#define CHECKED 4096 /* elements copied back and checked per iteration */

struct foreign {
    int device;
    int n;
    int reps;
    int pause_us;
    int stop;    /* set by main (__atomic) */
    int started; /* set by the thread after its first full iteration */
    int setup_failed;
    fc_side_foreign stats;
};

enum kind { SYNC, ALLOC, CAPTURE, OTHER };

/* Counts one call; a failure is counted by kind, its error cleared
 * (cudaGetLastError), the first one kept. Returns whether it succeeded. */
static bool call(struct foreign *f, cudaError_t e, enum kind k, const char *what)
{
    f->stats.calls++;
    if (e == cudaSuccess)
        return true;
    (void)cudaGetLastError();
    f->stats.failed++;
    switch (k) {
    case SYNC: f->stats.sync_failed++; break;
    case ALLOC: f->stats.alloc_failed++; break;
    case CAPTURE: f->stats.capture_failed++; break;
    default: f->stats.other_failed++; break;
    }
    if (!f->stats.first_error[0])
        snprintf(f->stats.first_error, sizeof f->stats.first_error, "%s: %s (%d)", what, cudaGetErrorString(e),
                 (int)e);
    return false;
}

/* One GLOBAL-mode capture of 3 kernels on s, instantiated, launched and
 * waited for. Returns whether every step succeeded. */
static bool foreign_capture(struct foreign *f, cudaStream_t s, float *x, float *scratch, int grid)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (!call(f, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), CAPTURE, "cudaStreamBeginCapture"))
        return false;
    bool ok = true;
    for (int k = 0; k < 3; k++) {
        work_kernel<<<grid, 256, 0, s>>>(x, scratch, f->n, f->reps);
        ok = call(f, cudaGetLastError(), CAPTURE, "kernel launch inside the capture") && ok;
    }
    /* Always end the capture, so the stream leaves capture mode. */
    ok = call(f, cudaStreamEndCapture(s, &graph), CAPTURE, "cudaStreamEndCapture") && ok;
    if (ok)
        ok = call(f, cudaGraphInstantiate(&exec, graph, 0), CAPTURE, "cudaGraphInstantiate");
    if (ok)
        ok = call(f, cudaGraphLaunch(exec, s), CAPTURE, "cudaGraphLaunch");
    if (ok)
        ok = call(f, cudaStreamSynchronize(s), OTHER, "cudaStreamSynchronize");
    if (exec)
        call(f, cudaGraphExecDestroy(exec), CAPTURE, "cudaGraphExecDestroy");
    if (graph)
        call(f, cudaGraphDestroy(graph), CAPTURE, "cudaGraphDestroy");
    return ok;
}

static void *foreign_main(void *arg)
{
    struct foreign *f = (struct foreign *)arg;
    size_t bytes = (size_t)f->n * sizeof(float);
    int grid = (f->n + 255) / 256;
    float *x = NULL, *scratch = NULL;
    float *host = (float *)malloc(CHECKED * sizeof(float));
    cudaStream_t s = NULL;
    if (!host || !call(f, cudaSetDevice(f->device), OTHER, "cudaSetDevice") ||
        !call(f, cudaMalloc((void **)&x, bytes), ALLOC, "cudaMalloc") ||
        !call(f, cudaMalloc((void **)&scratch, bytes), ALLOC, "cudaMalloc") ||
        !call(f, cudaMemset(scratch, 0, bytes), OTHER, "cudaMemset") ||
        !call(f, cudaStreamCreate(&s), OTHER, "cudaStreamCreate")) {
        f->setup_failed = 1;
        __atomic_store_n(&f->started, 1, __ATOMIC_SEQ_CST);
        free(host);
        return NULL;
    }
    while (!__atomic_load_n(&f->stop, __ATOMIC_SEQ_CST)) {
        bool ok = true;
        /* Eager work on the legacy stream, then a device-wide sync. */
        ok = call(f, cudaMemsetAsync(x, 0, bytes, 0), OTHER, "cudaMemsetAsync") && ok;
        work_kernel<<<grid, 256>>>(x, scratch, f->n, f->reps);
        ok = call(f, cudaGetLastError(), OTHER, "kernel launch") && ok;
        ok = call(f, cudaDeviceSynchronize(), SYNC, "cudaDeviceSynchronize") && ok;

        /* Allocate, use, free (cudaFree synchronises the device). */
        float *tmp = NULL;
        if (call(f, cudaMalloc((void **)&tmp, bytes), ALLOC, "cudaMalloc")) {
            work_kernel<<<grid, 256>>>(tmp, scratch, f->n, 1);
            call(f, cudaGetLastError(), OTHER, "kernel launch");
            /* A refused free is retried (and counted each time): memory is not leaked. */
            for (int t = 0; t < 10000 && !call(f, cudaFree(tmp), ALLOC, "cudaFree"); t++)
                usleep(50);
        }

        /* A GLOBAL capture of 3 more kernels on x. */
        ok = foreign_capture(f, s, x, scratch, grid) && ok;

        /* x == 4 everywhere (1 eager + 3 captured launches) when all of the above ran. */
        if (call(f, cudaMemcpy(host, x, CHECKED * sizeof(float), cudaMemcpyDeviceToHost), OTHER, "cudaMemcpy") && ok) {
            for (int i = 0; i < CHECKED; i++)
                if (host[i] != 4.0f) {
                    f->stats.wrong++;
                    break;
                }
        }
        f->stats.iters++;
        __atomic_store_n(&f->started, 1, __ATOMIC_SEQ_CST);
        if (f->pause_us > 0)
            usleep((useconds_t)f->pause_us);
    }
    cudaStreamDestroy(s);
    cudaFree(x);
    cudaFree(scratch);
    free(host);
    return NULL;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--device D] [--iters N] [--max-tries T] [--max-seconds S] [--config NAME]...\n"
            "          [--reps R] [--elements E] [--pause-us U]\n"
            "configs: primary-plain primary-retry isolated primary-capture isolated-cublas\n"
            "         (default: primary-plain primary-retry isolated, in that order; primary-capture\n"
            "         needs FC_RECORDING=capture in the environment)\n",
            prog);
}

int main(int argc, char **argv)
{
    int device = 0, max_tries = 64, reps = 2000, n = 1 << 20, pause_us = 0;
    long long iters = 20000;
    double max_seconds = 40.0;
    int configs[FC_SIDE_CONFIGS * 4], nconfigs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage(argv[0]);
            return 2;
        }
        i++;
        if (!strcmp(a, "--device"))
            device = atoi(v);
        else if (!strcmp(a, "--iters"))
            iters = atoll(v);
        else if (!strcmp(a, "--max-tries"))
            max_tries = atoi(v);
        else if (!strcmp(a, "--max-seconds"))
            max_seconds = atof(v);
        else if (!strcmp(a, "--reps"))
            reps = atoi(v);
        else if (!strcmp(a, "--elements"))
            n = atoi(v);
        else if (!strcmp(a, "--pause-us"))
            pause_us = atoi(v);
        else if (!strcmp(a, "--config") && nconfigs < (int)(sizeof configs / sizeof configs[0])) {
            configs[nconfigs] = fc_side_config_from_name(v);
            if (configs[nconfigs++] < 0) {
                usage(argv[0]);
                return 2;
            }
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (iters < 1 || max_tries < 1 || !(max_seconds > 0) || reps < 0 || n < CHECKED || pause_us < 0) {
        usage(argv[0]);
        return 2;
    }
    if (nconfigs == 0) {
        configs[nconfigs++] = FC_SIDE_PRIMARY_PLAIN;
        configs[nconfigs++] = FC_SIDE_PRIMARY_RETRY;
        configs[nconfigs++] = FC_SIDE_ISOLATED;
    }

    /* The runtime's primary context exists before fc-graph opens its contexts. */
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaFree(0);
    if (e != cudaSuccess) {
        printf("foreign_cudart: CUDA runtime start failed on device %d: %s\n", device, cudaGetErrorString(e));
        return 2;
    }
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
        printf("foreign_cudart: device %d: %s; fc iterations %lld (at most %.0f s once %d ran), max_tries %d; "
               "foreign kernel %d elements x %d reps, pause %d us; FC_RECORDING=%s\n",
               device, prop.name, iters, max_seconds, FC_SIDE_MIN_ITERS, max_tries, n, reps, pause_us,
               getenv("FC_RECORDING") ? getenv("FC_RECORDING") : "(unset)");
    fflush(stdout);

    int failures = 0;
    for (int k = 0; k < nconfigs; k++) {
        int config = configs[k];
        fc_side_counts fc;
        struct foreign f;
        memset(&f, 0, sizeof f);
        f.device = device, f.n = n, f.reps = reps, f.pause_us = pause_us;

        fc_side *side = fc_side_open(device, config, &fc);
        pthread_t th;
        bool thread_ok = false;
        if (side) {
            thread_ok = pthread_create(&th, NULL, foreign_main, &f) == 0;
            /* The foreign client is warm (one full iteration) before fc starts. */
            while (thread_ok && !__atomic_load_n(&f.started, __ATOMIC_SEQ_CST))
                usleep(100);
            if (thread_ok && !f.setup_failed)
                fc_side_loop(side, iters, max_tries, max_seconds, &fc);
            __atomic_store_n(&f.stop, 1, __ATOMIC_SEQ_CST);
            if (thread_ok)
                pthread_join(th, NULL);
            else
                snprintf(f.stats.first_error, sizeof f.stats.first_error, "pthread_create failed");
        }
        fc_side_close(side);

        char line[4096];
        int pass = fc_side_report("cudart", config, &fc, &f.stats, line, sizeof line);
        printf("%s\n", line);
        fc_side_report_errors("cudart", config, &fc, &f.stats, line, sizeof line);
        printf("%s\n", line);
        fflush(stdout);
        failures += !pass;
    }
    return failures ? 1 : 0;
}
