/* cublas_graph.c - a cuBLAS GEMM between fc-graph kernels, captured into
 * one fc graph and replayed on fresh inputs (see README.md here).
 *
 *   x   = x0 .* scale     fc_mul_ctx                     (K x N)
 *   y   = W x             cublasSgemm_v2 on the fc stream (M x N, column-major)
 *   out = y + bias        fc_add_ctx                     (M x N)
 *
 * Build against the library (cuBLAS is opened at run time, not linked):
 *   cc -std=c11 -O2 -I include examples/interop/cublas_graph.c \
 *      -L target/release -lfcgraph -ldl -o cublas_graph
 * Run: FC_CUBLAS_LIBRARY=/path/to/libcublas.so.13 ./cublas_graph
 * Exit status 0 when every replay matched the host (inputs are small
 * integers, so FP32 results are exact), 1 otherwise, with the reason.
 */
#include "interop_libs.h"

#include "cuda/fc_cuda.h"

#define M 512 /* rows of W (outputs) */
#define K 256 /* columns of W (inputs) */
#define N 8   /* columns of x (tokens in the batch) */
#define STEPS 10

static int fc_fail(const char *what, int rc)
{
    fprintf(stderr, "cublas_graph: %s failed (%d): %s\n", what, rc, fc_last_error());
    return 1;
}

/* Queues the three steps on ctx's stream: run now, or recorded while ctx
 * captures. */
static int queue_layer(fc_cuda_ctx *ctx, const il_cublas *blas, il_cublas_handle h, fc_buffer *x0, fc_buffer *scale,
                       fc_buffer *x, fc_buffer *w, fc_buffer *y, fc_buffer *bias, fc_buffer *out)
{
    int rc = fc_mul_ctx(ctx, x0, scale, x, (size_t)K * N);
    if (rc != FC_OK) return fc_fail("fc_mul_ctx", rc);
    const float one = 1.0f, zero = 0.0f; /* host pointers: their values are recorded */
    rc = blas->cublasSgemm_v2(h, IL_CUBLAS_OP_N, IL_CUBLAS_OP_N, M, N, K, &one,
                              (const float *)(uintptr_t)fc_buffer_device_ptr(w), M,
                              (const float *)(uintptr_t)fc_buffer_device_ptr(x), K, &zero,
                              (float *)(uintptr_t)fc_buffer_device_ptr(y), M);
    if (rc != IL_CUBLAS_STATUS_SUCCESS) {
        char buf[64];
        fprintf(stderr, "cublas_graph: cublasSgemm_v2: %s\n", il_cublas_status(blas, rc, buf, sizeof buf));
        return 1;
    }
    rc = fc_add_ctx(ctx, y, bias, out, (size_t)M * N);
    return rc == FC_OK ? 0 : fc_fail("fc_add_ctx", rc);
}

static float small_int(unsigned *state, int range)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)((int)((*state >> 16) % (unsigned)(2 * range + 1)) - range);
}

int main(void)
{
    static float h_w[M * K], h_x0[K * N], h_scale[K * N], h_bias[M * N], h_out[M * N];
    int status = 1;
    unsigned seed = 12345;
    fc_buffer *x0 = NULL, *scale = NULL, *x = NULL, *w = NULL, *y = NULL, *bias = NULL, *out = NULL, *ws = NULL;
    fc_graph *graph = NULL;
    il_cublas blas;
    il_cublas_handle h = NULL;
    char err[4096];

    /* 1. The fc context first: device 0's primary context, which it leaves
     *    current on this thread, so cuBLAS (below) runs in it too. */
    fc_cuda_ctx *ctx = fc_cuda_init_device(0);
    if (!ctx) {
        fprintf(stderr, "cublas_graph: no CUDA device 0: %s\n", fc_last_error());
        return 1;
    }
    if (il_cublas_load(&blas, err, sizeof err) != 0) {
        fprintf(stderr, "cublas_graph: cuBLAS not found (set FC_CUBLAS_LIBRARY): %s\n", err);
        goto done;
    }

    /* 2. Memory: inputs, the GEMM's operands, and cuBLAS' workspace. */
    const size_t kn = (size_t)K * N * 4, mk = (size_t)M * K * 4, mn = (size_t)M * N * 4;
    if (!(x0 = fc_buffer_alloc_ctx(ctx, kn)) || !(scale = fc_buffer_alloc_ctx(ctx, kn)) ||
        !(x = fc_buffer_alloc_ctx(ctx, kn)) || !(w = fc_buffer_alloc_ctx(ctx, mk)) ||
        !(y = fc_buffer_alloc_ctx(ctx, mn)) || !(bias = fc_buffer_alloc_ctx(ctx, mn)) ||
        !(out = fc_buffer_alloc_ctx(ctx, mn)) || !(ws = fc_buffer_alloc_ctx(ctx, IL_CUBLAS_WORKSPACE_BYTES))) {
        fc_fail("fc_buffer_alloc_ctx", fc_last_error_code());
        goto done;
    }
    for (int i = 0; i < M * K; i++) h_w[i] = small_int(&seed, 2);
    for (int i = 0; i < M * N; i++) h_bias[i] = small_int(&seed, 8);
    if (fc_buffer_upload(w, h_w, mk) != FC_OK || fc_buffer_upload(bias, h_bias, mn) != FC_OK) {
        fc_fail("fc_buffer_upload", fc_last_error_code());
        goto done;
    }

    /* 3. cuBLAS on the context's stream. cublasSetStream resets the
     *    workspace, so the workspace comes second; with its own workspace
     *    cuBLAS allocates nothing while the stream captures. */
    int st = blas.cublasCreate_v2(&h);
    if (st == IL_CUBLAS_STATUS_SUCCESS) st = blas.cublasSetStream_v2(h, fc_ctx_stream(ctx));
    if (st == IL_CUBLAS_STATUS_SUCCESS)
        st = blas.cublasSetWorkspace_v2(h, (void *)(uintptr_t)fc_buffer_device_ptr(ws), IL_CUBLAS_WORKSPACE_BYTES);
    if (st != IL_CUBLAS_STATUS_SUCCESS) {
        char buf[64];
        fprintf(stderr, "cublas_graph: cuBLAS setup: %s\n", il_cublas_status(&blas, st, buf, sizeof buf));
        goto done;
    }

    /* 4. Warm-up: the layer once, eagerly (cuBLAS chooses and loads its
     *    kernels on first use, outside the capture). */
    if (queue_layer(ctx, &blas, h, x0, scale, x, w, y, bias, out) || fc_sync_ctx(ctx) != FC_OK) goto done;

    /* 5. Capture: everything queued on the stream, ours and cuBLAS', is
     *    recorded into one graph. */
    int rc = fc_graph_begin_ctx(ctx);
    if (rc != FC_OK) {
        fc_fail("fc_graph_begin_ctx", rc);
        goto done;
    }
    if (queue_layer(ctx, &blas, h, x0, scale, x, w, y, bias, out)) {
        fc_graph_abort_ctx(ctx);
        goto done;
    }
    if (!(graph = fc_graph_end_ctx(ctx))) {
        fc_fail("fc_graph_end_ctx", fc_last_error_code());
        goto done;
    }

    /* 6. Replay on fresh inputs: upload, launch, wait, read. */
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < K * N; i++) {
            h_x0[i] = small_int(&seed, 3);
            h_scale[i] = (float)(1 + (i + step) % 2);
        }
        if (fc_buffer_upload(x0, h_x0, kn) != FC_OK || fc_buffer_upload(scale, h_scale, kn) != FC_OK ||
            fc_graph_launch(graph) != FC_OK || fc_sync_ctx(ctx) != FC_OK || fc_buffer_download(out, h_out, mn) != FC_OK) {
            fc_fail("replay", fc_last_error_code());
            goto done;
        }
        for (int j = 0; j < N; j++) {
            for (int i = 0; i < M; i++) {
                float want = h_bias[i + j * M]; /* integers below 2^13: exact in FP32 */
                for (int k = 0; k < K; k++) want += h_w[i + k * M] * (h_x0[k + j * K] * h_scale[k + j * K]);
                if (h_out[i + j * M] != want) {
                    fprintf(stderr, "cublas_graph: step %d: out[%d, %d] = %g, want %g\n", step, i, j,
                            (double)h_out[i + j * M], (double)want);
                    goto done;
                }
            }
        }
        printf("cublas_graph: replay %d: out[0, 0] = %g (matches the host)\n", step, (double)h_out[0]);
    }
    printf("cublas_graph: %d replays of fc_mul + cublasSgemm + fc_add in one graph, all exact\n", STEPS);
    status = 0;

done:
    /* 7. Graphs, the handle, buffers, then the context. */
    fc_graph_free(graph);
    if (h) blas.cublasDestroy_v2(h);
    fc_buffer *bufs[] = {x0, scale, x, w, y, bias, out, ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) fc_buffer_free(bufs[i]);
    fc_cuda_ctx_free(ctx);
    return status;
}
