/* test_cublas.c - cuBLAS GEMMs inside fc graphs (issue 10). cuBLAS is
 * opened at run time (examples/interop/interop_libs.h): [SKIP] without a
 * CUDA device or without libcublas ([FAIL] for the latter when
 * FC_REQUIRE_INTEROP=1, as scripts/gpu-interop.sh sets).
 *
 * The work, column-major, M, N, K = 256, 128, 64, alpha = 0.5, beta = 0:
 *     A = A0 .* S            fc_mul_ctx
 *     C = alpha * A * B      cublasSgemm_v2 on fc_ctx_stream(ctx)
 *     OUT = C + D            fc_add_ctx
 *
 *   gemm_in_graph       the work captured with fc_graph_begin_ctx / end_ctx.
 *                       C lives inside an engine-owned arena at an offset
 *                       and reaches fc_add_ctx through fc_buffer_wrap_ctx.
 *                       The same work runs eagerly once before the capture
 *                       (warm-up: cuBLAS picks and loads its kernels) and
 *                       next to every replay, into separate buffers. Before
 *                       the first launch OUT is still poisoned (the capture
 *                       recorded, it did not run). 5 replays on fresh
 *                       inputs: trial 0 uses small integers, where every
 *                       FP32 sum is exact, so replay and eager must equal
 *                       the host bit for bit; trials 1-4 use random floats
 *                       in +-[0.25, 4], checked against a double-precision
 *                       host reference within the FP32 error bound below.
 *   replays_accumulate  fc_graph_capture_ctx of (A = A0 .* S, C = alpha A B,
 *                       ACC = ACC + C), launched 20 times back to back with
 *                       one sync at the end: ACC == 20 C exactly (integer
 *                       inputs), so each replay ran once and in order.
 *   gemm_on_a_lane      lanes (fc_ctx_lane, fc_ctx_wait_lane) in a recording
 *                       that builds (FC_RECORDING_BUILD), integer inputs:
 *                           fork: lane 1 waits for lane 0
 *                           lane 1: C = alpha A B     cublasSgemm_v2 on lane 1's
 *                                                     stream, in a foreign section
 *                                                     on lane 1
 *                           lane 0: X = X + Y, 26 x   fc_add_ctx, queued while
 *                                                     the section is open
 *                           join: lane 0 waits for lane 1
 *                           lane 0: OUT = C + X       fc_add_ctx
 *                       While the section is open, lane 0 waiting for lane 1
 *                       is refused (FC_ERR_CAPTURE_STATE). The graph has 28
 *                       nodes (26 adds, the section's child node, the last
 *                       add); recording ran nothing (OUT still poisoned, X
 *                       still X0); one launch gives the host's OUT exactly,
 *                       and the same calls run eagerly (fork, the GEMM on
 *                       lane 1's stream, the adds, join, add) into other
 *                       buffers give it bit for bit. The recording mode is
 *                       restored at the end.
 *
 * Tolerance of the random trials, per element (u = 2^-24, K = 64,
 * gamma_K = K u / (1 - K u)):
 *     |out - (c + d)| <= (1 + u) gamma_K alpha sum_k |a_ik b_kj| + u |c + d|
 * with c the exact alpha A B: an FP32 dot product of K terms, summed in any
 * order (split-K, tiles, FMA or not), is within gamma_K sum |a b| of the
 * exact value (Higham, Accuracy and Stability of Numerical Algorithms,
 * 2nd ed., eq. 3.5); alpha = 0.5 scales exactly; fc_add rounds once more
 * (u |c + d|). The host sum in double adds < 1e-12 relative (added too).
 * TF32 or other reduced-precision math would exceed it; the handle uses
 * CUBLAS_DEFAULT_MATH (FP32 arithmetic for SGEMM).
 */
#include "../examples/interop/interop_libs.h"
#include "check.h"

#include <math.h>

#define M 256
#define N 128
#define K 64
#define ALPHA 0.5f
#define C_OFFSET 4096 /* bytes: where C starts inside the arena */
#define TRIALS 5
#define ACC_LAUNCHES 20

static il_cublas g_cublas;

typedef struct {
    fc_buffer *a0, *s, *a, *b, *c, *d, *out;
    int accumulate; /* 0: out = c + d; 1: out = out + c */
} work_bufs;

/* Queues the work on ctx's stream (recorded while ctx captures). 0, or -1
 * with the failing call in why. */
static int queue_work(fc_cuda_ctx *ctx, il_cublas_handle h, const work_bufs *w, char *why, size_t len)
{
    int rc = fc_mul_ctx(ctx, w->a0, w->s, w->a, (size_t)M * K);
    if (rc != FC_OK) {
        snprintf(why, len, "fc_mul_ctx returned %d: %s", rc, fc_last_error());
        return -1;
    }
    const float alpha = ALPHA, beta = 0.0f;
    const float *A = (const float *)(uintptr_t)fc_buffer_device_ptr(w->a);
    const float *B = (const float *)(uintptr_t)fc_buffer_device_ptr(w->b);
    float *C = (float *)(uintptr_t)fc_buffer_device_ptr(w->c);
    int st = g_cublas.cublasSgemm_v2(h, IL_CUBLAS_OP_N, IL_CUBLAS_OP_N, M, N, K, &alpha, A, M, B, K, &beta, C, M);
    if (st != IL_CUBLAS_STATUS_SUCCESS) {
        char buf[64];
        snprintf(why, len, "cublasSgemm_v2 returned %s", il_cublas_status(&g_cublas, st, buf, sizeof buf));
        return -1;
    }
    rc = w->accumulate ? fc_add_ctx(ctx, w->out, w->c, w->out, (size_t)M * N)
                       : fc_add_ctx(ctx, w->c, w->d, w->out, (size_t)M * N);
    if (rc != FC_OK) {
        snprintf(why, len, "fc_add_ctx returned %d: %s", rc, fc_last_error());
        return -1;
    }
    return 0;
}

/* A cuBLAS handle for ctx: checks that ctx's CUDA context is current on
 * this thread (cuBLAS uses the current one), sets the stream, then the
 * workspace (cublasSetStream resets it), then FP32 math. NULL on failure
 * (after reporting it). */
static il_cublas_handle make_handle(fc_cuda_ctx *ctx, fc_buffer *workspace)
{
    char buf[64];
    void *current = NULL;
    if (il_current_cu_context(&current) == 0 && current != fc_ctx_cu_context(ctx)) {
        CT_FAILF("the thread's current CUDA context is %p, the fc context's is %p: cuBLAS would run in another "
                 "context",
                 current, fc_ctx_cu_context(ctx));
        return NULL;
    }
    il_cublas_handle h = NULL;
    int st = g_cublas.cublasCreate_v2(&h);
    if (st != IL_CUBLAS_STATUS_SUCCESS || !h) {
        CT_FAILF("cublasCreate_v2 returned %s", il_cublas_status(&g_cublas, st, buf, sizeof buf));
        return NULL;
    }
    const char *step = "cublasSetStream_v2(fc_ctx_stream(ctx))";
    st = g_cublas.cublasSetStream_v2(h, fc_ctx_stream(ctx));
    if (st == IL_CUBLAS_STATUS_SUCCESS) {
        step = "cublasSetWorkspace_v2";
        st = g_cublas.cublasSetWorkspace_v2(h, (void *)(uintptr_t)fc_buffer_device_ptr(workspace),
                                            fc_buffer_size(workspace));
    }
    if (st == IL_CUBLAS_STATUS_SUCCESS) {
        step = "cublasSetMathMode(CUBLAS_DEFAULT_MATH)";
        st = g_cublas.cublasSetMathMode(h, IL_CUBLAS_DEFAULT_MATH);
    }
    if (st != IL_CUBLAS_STATUS_SUCCESS) {
        CT_FAILF("%s returned %s", step, il_cublas_status(&g_cublas, st, buf, sizeof buf));
        g_cublas.cublasDestroy_v2(h);
        return NULL;
    }
    return h;
}

/* ---- inputs and the host reference --------------------------------------- */

typedef struct {
    float a0[M * K], s[M * K], b[K * N], d[M * N];
} inputs;

static float small_int(int lo, int hi)
{
    return (float)(lo + (int)(ct_rand_u32() % (uint32_t)(hi - lo + 1)));
}

/* integers: A0, B in [-4, 4], S in {0.5, 1, 2}, D in [-8, 8]: every
 * product and partial sum is a multiple of 1/2 below 2^12, exact in FP32. */
static void make_inputs(inputs *in, int integers, uint32_t seed)
{
    ct_seed(seed);
    for (size_t i = 0; i < M * K; i++) {
        in->a0[i] = integers ? small_int(-4, 4) : ct_rand_float();
        in->s[i] = integers ? ldexpf(1.0f, (int)(ct_rand_u32() % 3) - 1) : ct_rand_float();
    }
    for (size_t i = 0; i < K * N; i++) in->b[i] = integers ? small_int(-4, 4) : ct_rand_float();
    for (size_t i = 0; i < M * N; i++) in->d[i] = integers ? small_int(-8, 8) : ct_rand_float();
}

/* want[i] = alpha (A0 .* S) B + D in double (A0 .* S rounded to FP32 as
 * fc_mul does), tol[i] the bound above. */
static void host_reference(const inputs *in, double *want, double *tol)
{
    const double u = ldexp(1.0, -24), gamma_k = K * u / (1.0 - K * u);
    for (int j = 0; j < N; j++) {
        for (int i = 0; i < M; i++) {
            double sum = 0.0, abs_sum = 0.0;
            for (int k = 0; k < K; k++) {
                volatile float a = in->a0[i + k * M] * in->s[i + k * M]; /* one FP32 rounding, as fc_mul */
                double p = (double)a * (double)in->b[k + j * K];        /* exact in double */
                sum += p;
                abs_sum += fabs(p);
            }
            double c = (double)ALPHA * sum, d = in->d[i + j * M];
            want[i + j * M] = c + d;
            tol[i + j * M] = (1.0 + u) * gamma_k * ALPHA * abs_sum + u * fabs(c + d) +
                             1e-12 * (ALPHA * abs_sum + fabs(d));
        }
    }
}

/* Checks got against want within tol (tol NULL: bit-exact against
 * (float)want). Returns the largest |err| / tol (0 when exact), or -1
 * after reporting the first violation. */
static double compare(const float *got, const double *want, const double *tol, const char *what)
{
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)M * N; i++) {
        float w = (float)want[i];
        if (!tol) {
            if (ct_bits(got[i]) != ct_bits(w) && !(got[i] == w)) {
                CT_FAILF("%s: [%zu] (row %zu, col %zu) = %.9g (0x%08x), want exactly %.9g", what, i, i % M, i / M,
                         (double)got[i], (unsigned)ct_bits(got[i]), (double)w);
                return -1;
            }
            continue;
        }
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= tol[i])) { /* also catches NaN */
            CT_FAILF("%s: [%zu] (row %zu, col %zu) = %.9g, want %.9g +- %.3g (error %.3g = %.2f x the bound)", what,
                     i, i % M, i / M, (double)got[i], want[i], tol[i], err, err / tol[i]);
            return -1;
        }
        if (err / tol[i] > worst) worst = err / tol[i];
    }
    return worst;
}

static int upload_inputs(const work_bufs *w, const inputs *in)
{
    int rc = fc_buffer_upload(w->a0, in->a0, sizeof in->a0);
    if (rc == FC_OK) rc = fc_buffer_upload(w->s, in->s, sizeof in->s);
    if (rc == FC_OK) rc = fc_buffer_upload(w->b, in->b, sizeof in->b);
    if (rc == FC_OK && w->d) rc = fc_buffer_upload(w->d, in->d, sizeof in->d);
    return rc;
}

/* ---- cases ------------------------------------------------------------------- */

static void gemm_in_graph(fc_cuda_ctx *ctx)
{
    const size_t ak = (size_t)M * K * sizeof(float), kn = (size_t)K * N * sizeof(float);
    const size_t mn = (size_t)M * N * sizeof(float);
    fc_buffer *a0 = NULL, *s = NULL, *b = NULL, *d = NULL, *ws = NULL, *arena = NULL, *c_view = NULL;
    fc_buffer *a_g = NULL, *out_g = NULL, *a_e = NULL, *c_e = NULL, *out_e = NULL;
    fc_graph *g = NULL;
    il_cublas_handle h = NULL;
    inputs *in = NULL;
    double *want = NULL, *tol = NULL;
    float *got = NULL, *got_e = NULL, *poison = NULL;
    char why[512];

    CHECK_NOTNULL(in = (inputs *)malloc(sizeof *in));
    CHECK_NOTNULL(want = (double *)malloc((size_t)M * N * sizeof(double)));
    CHECK_NOTNULL(tol = (double *)malloc((size_t)M * N * sizeof(double)));
    CHECK_NOTNULL(got = ct_floats((size_t)M * N));
    CHECK_NOTNULL(got_e = ct_floats((size_t)M * N));
    CHECK_NOTNULL(poison = ct_floats((size_t)M * N));
    ct_fill_poison(poison, (size_t)M * N);

    CHECK_NOTNULL(a0 = fc_buffer_alloc_ctx(ctx, ak));
    CHECK_NOTNULL(s = fc_buffer_alloc_ctx(ctx, ak));
    CHECK_NOTNULL(b = fc_buffer_alloc_ctx(ctx, kn));
    CHECK_NOTNULL(d = fc_buffer_alloc_ctx(ctx, mn));
    CHECK_NOTNULL(ws = fc_buffer_alloc_ctx(ctx, IL_CUBLAS_WORKSPACE_BYTES));
    /* The engine's own memory: C at an offset inside a larger allocation,
     * made usable by fc kernels with fc_buffer_wrap_ctx. */
    CHECK_NOTNULL(arena = fc_buffer_alloc_ctx(ctx, C_OFFSET + mn + 4096));
    CHECK_NOTNULL(c_view = fc_buffer_wrap_ctx(ctx, fc_buffer_device_ptr(arena) + C_OFFSET, mn));
    CHECK_MSG(fc_buffer_size(c_view) == mn, "wrapped size %zu, want %zu", fc_buffer_size(c_view), mn);
    CHECK_NOTNULL(a_g = fc_buffer_alloc_ctx(ctx, ak));
    CHECK_NOTNULL(out_g = fc_buffer_alloc_ctx(ctx, mn));
    CHECK_NOTNULL(a_e = fc_buffer_alloc_ctx(ctx, ak));
    CHECK_NOTNULL(c_e = fc_buffer_alloc_ctx(ctx, mn));
    CHECK_NOTNULL(out_e = fc_buffer_alloc_ctx(ctx, mn));
    const work_bufs graph_w = {a0, s, a_g, b, c_view, d, out_g, 0};
    const work_bufs eager_w = {a0, s, a_e, b, c_e, d, out_e, 0};

    CHECK_NOTNULL(h = make_handle(ctx, ws));
    int version = 0;
    if (g_cublas.cublasGetVersion_v2(h, &version) == IL_CUBLAS_STATUS_SUCCESS)
        printf("test_cublas: cuBLAS version %d\n", version);

    /* Warm-up: the work once, eagerly. */
    make_inputs(in, 1, 7);
    CHECK_OK(upload_inputs(&eager_w, in));
    CHECK_MSG(queue_work(ctx, h, &eager_w, why, sizeof why) == 0, "eager warm-up: %s", why);
    CHECK_OK(fc_sync_ctx(ctx));

    CHECK_OK(fc_buffer_upload(out_g, poison, mn));
    CHECK_OK(fc_graph_begin_ctx(ctx));
    if (queue_work(ctx, h, &graph_w, why, sizeof why) != 0) {
        fc_graph_abort_ctx(ctx);
        CHECK_MSG(0, "while capturing: %s", why);
    }
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(fc_graph_segment_count(g) == 1, "segment count %d, want 1", fc_graph_segment_count(g));
    CHECK_OK(fc_buffer_download(out_g, got, mn));
    CHECK_MSG(ct_bits(got[0]) == CT_POISON_BITS && ct_bits(got[M * N - 1]) == CT_POISON_BITS,
              "OUT changed by the capture itself (0x%08x): the work ran instead of being recorded",
              (unsigned)ct_bits(got[0]));

    for (int t = 0; t < TRIALS; t++) {
        const int integers = t == 0;
        make_inputs(in, integers, 1000u + 31u * (uint32_t)t);
        host_reference(in, want, tol);
        CHECK_OK(upload_inputs(&graph_w, in));
        CHECK_OK(fc_buffer_upload(out_g, poison, mn));
        CHECK_OK(fc_buffer_upload(out_e, poison, mn));
        CHECK_OK(fc_graph_launch(g));
        CHECK_MSG(queue_work(ctx, h, &eager_w, why, sizeof why) == 0, "eager, trial %d: %s", t, why);
        CHECK_OK(fc_sync_ctx(ctx));

        char what[96];
        CHECK_OK(fc_buffer_download(out_g, got, mn));
        snprintf(what, sizeof what, "trial %d, replay", t);
        double worst_g = compare(got, want, integers ? NULL : tol, what);
        CHECK(worst_g >= 0);
        CHECK_OK(fc_buffer_download(out_e, got_e, mn));
        snprintf(what, sizeof what, "trial %d, eager", t);
        double worst_e = compare(got_e, want, integers ? NULL : tol, what);
        CHECK(worst_e >= 0);
        size_t differ = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) differ += ct_bits(got[i]) != ct_bits(got_e[i]);
        printf("test_cublas: trial %d (%s): max error / bound: replay %.3f, eager %.3f; replay and eager differ "
               "in %zu of %d elements\n",
               t, integers ? "integers, exact" : "random floats", worst_g, worst_e, differ, M * N);
    }

done:
    fc_graph_free(g);
    if (h) g_cublas.cublasDestroy_v2(h);
    CT_FREE_BUFFERS(c_view, arena, a0, s, b, d, ws, a_g, out_g, a_e, c_e, out_e);
    CT_FREE(in, want, tol, got, got_e, poison);
}

typedef struct {
    il_cublas_handle h;
    work_bufs w;
    char why[512];
} record_state;

static int record_accumulate(fc_cuda_ctx *ctx, void *user)
{
    record_state *st = (record_state *)user;
    return queue_work(ctx, st->h, &st->w, st->why, sizeof st->why) == 0 ? 0 : 1;
}

static void replays_accumulate(fc_cuda_ctx *ctx)
{
    const size_t ak = (size_t)M * K * sizeof(float), kn = (size_t)K * N * sizeof(float);
    const size_t mn = (size_t)M * N * sizeof(float);
    fc_buffer *ws = NULL, *a0 = NULL, *s = NULL, *a = NULL, *b = NULL, *c = NULL, *acc = NULL;
    fc_graph *g = NULL;
    inputs *in = NULL;
    double *want = NULL, *tol = NULL;
    float *got = NULL;
    record_state st;
    memset(&st, 0, sizeof st);

    CHECK_NOTNULL(in = (inputs *)malloc(sizeof *in));
    CHECK_NOTNULL(want = (double *)malloc((size_t)M * N * sizeof(double)));
    CHECK_NOTNULL(tol = (double *)malloc((size_t)M * N * sizeof(double)));
    CHECK_NOTNULL(got = ct_floats((size_t)M * N));
    CHECK_NOTNULL(ws = fc_buffer_alloc_ctx(ctx, IL_CUBLAS_WORKSPACE_BYTES));
    CHECK_NOTNULL(a0 = fc_buffer_alloc_ctx(ctx, ak));
    CHECK_NOTNULL(s = fc_buffer_alloc_ctx(ctx, ak));
    CHECK_NOTNULL(a = fc_buffer_alloc_ctx(ctx, ak));
    CHECK_NOTNULL(b = fc_buffer_alloc_ctx(ctx, kn));
    CHECK_NOTNULL(c = fc_buffer_alloc_ctx(ctx, mn));
    CHECK_NOTNULL(acc = fc_buffer_alloc_ctx(ctx, mn));
    st.w = (work_bufs){a0, s, a, b, c, NULL, acc, 1};
    CHECK_NOTNULL(st.h = make_handle(ctx, ws));

    make_inputs(in, 1, 99);
    CHECK_OK(upload_inputs(&st.w, in));
    /* Warm-up, eagerly: ACC = 0 + C. */
    CHECK_OK(fc_buffer_fill_ctx(ctx, acc, 0, mn, 0));
    CHECK_MSG(record_accumulate(ctx, &st) == 0, "eager warm-up: %s", st.why);
    CHECK_OK(fc_sync_ctx(ctx));

    int rc = fc_graph_capture_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, record_accumulate, &st, 3, &g);
    CHECK_MSG(rc == FC_OK && g, "fc_graph_capture_ctx returned %d (%s)%s%s", rc, fc_last_error(),
              st.why[0] ? "; recording: " : "", st.why);
    CHECK_MSG(fc_graph_capture_tries(g) == 1, "capture took %d recordings", fc_graph_capture_tries(g));

    CHECK_OK(fc_buffer_fill_ctx(ctx, acc, 0, mn, 0));
    for (int i = 0; i < ACC_LAUNCHES; i++) CHECK_OK(fc_graph_launch(g));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(acc, got, mn));
    for (size_t i = 0; i < (size_t)M * N; i++) in->d[i] = 0.0f; /* want = alpha A B */
    host_reference(in, want, tol);
    for (size_t i = 0; i < (size_t)M * N; i++) want[i] *= ACC_LAUNCHES; /* multiples of 1/2 below 2^16: exact */
    CHECK(compare(got, want, NULL, "ACC after 20 launches") >= 0);

done:
    fc_graph_free(g);
    if (st.h) g_cublas.cublasDestroy_v2(st.h);
    CT_FREE_BUFFERS(a0, s, a, b, c, acc, ws);
    CT_FREE(in, want, tol, got);
}

/* ---- a GEMM on a lane beside the library's kernels ------------------------------ */

#define LANE_ADDS 26

typedef struct {
    fc_buffer *c, *x, *out; /* C = alpha A B, X += Y (LANE_ADDS x), OUT = C + X */
} lane_bufs;

/* C = alpha A B on h's stream (lane 1's). 0, or -1 with the reason in why. */
static int lane_gemm(il_cublas_handle h, fc_buffer *a, fc_buffer *b, fc_buffer *c, char *why, size_t len)
{
    const float alpha = ALPHA, beta = 0.0f;
    int st = g_cublas.cublasSgemm_v2(h, IL_CUBLAS_OP_N, IL_CUBLAS_OP_N, M, N, K, &alpha,
                                     (const float *)(uintptr_t)fc_buffer_device_ptr(a), M,
                                     (const float *)(uintptr_t)fc_buffer_device_ptr(b), K, &beta,
                                     (float *)(uintptr_t)fc_buffer_device_ptr(c), M);
    if (st != IL_CUBLAS_STATUS_SUCCESS) {
        char buf[64];
        snprintf(why, len, "cublasSgemm_v2 returned %s", il_cublas_status(&g_cublas, st, buf, sizeof buf));
        return -1;
    }
    return 0;
}

/* X = X + Y, LANE_ADDS times, on ctx's lane. */
static int lane_adds(fc_cuda_ctx *ctx, fc_buffer *x, fc_buffer *y)
{
    for (int i = 0; i < LANE_ADDS; i++) {
        int rc = fc_add_ctx(ctx, x, y, x, (size_t)M * N);
        if (rc != FC_OK) return rc;
    }
    return FC_OK;
}

static void gemm_on_a_lane(fc_cuda_ctx *ctx)
{
    const size_t mn = (size_t)M * N * sizeof(float);
    const int mode = fc_ctx_recording_mode(ctx);
    fc_cuda_ctx *l1 = NULL;
    fc_buffer *a = NULL, *b = NULL, *y = NULL, *ws = NULL;
    lane_bufs gr = {NULL, NULL, NULL}, ea = {NULL, NULL, NULL}; /* the graph's, the eager run's */
    fc_graph *g = NULL;
    il_cublas_handle h = NULL;
    float *ha = NULL, *hb = NULL, *hx0 = NULL, *hy = NULL, *got = NULL, *got_e = NULL, *poison = NULL;
    double *want = NULL;
    char why[512] = "";

    CHECK(mode >= 0);
    CHECK_NOTNULL(ha = ct_floats((size_t)M * K));
    CHECK_NOTNULL(hb = ct_floats((size_t)K * N));
    CHECK_NOTNULL(hx0 = ct_floats((size_t)M * N));
    CHECK_NOTNULL(hy = ct_floats((size_t)M * N));
    CHECK_NOTNULL(got = ct_floats((size_t)M * N));
    CHECK_NOTNULL(got_e = ct_floats((size_t)M * N));
    CHECK_NOTNULL(poison = ct_floats((size_t)M * N));
    CHECK_NOTNULL(want = (double *)malloc((size_t)M * N * sizeof(double)));
    ct_fill_poison(poison, (size_t)M * N);

    /* Integers: A, B, Y in [-4, 4], X0 in [-8, 8]: alpha A B is a multiple
     * of 1/2 of magnitude <= 512, X0 + 26 Y an integer of magnitude <= 112:
     * every FP32 sum on the way is exact, in any order. */
    ct_seed(4242);
    for (size_t i = 0; i < (size_t)M * K; i++) ha[i] = small_int(-4, 4);
    for (size_t i = 0; i < (size_t)K * N; i++) hb[i] = small_int(-4, 4);
    for (size_t i = 0; i < (size_t)M * N; i++) {
        hx0[i] = small_int(-8, 8);
        hy[i] = small_int(-4, 4);
    }
    for (int j = 0; j < N; j++) {
        for (int i = 0; i < M; i++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++) sum += (double)ha[i + k * M] * (double)hb[k + j * K];
            want[i + j * M] = (double)ALPHA * sum + ((double)hx0[i + j * M] + LANE_ADDS * (double)hy[i + j * M]);
        }
    }

    /* BUILD before the stream is asked for (make_handle): the recording
     * builds, and only the foreign section captures lane 1's stream. */
    CHECK_OK(fc_ctx_set_recording_mode(ctx, FC_RECORDING_BUILD));
    CHECK_NOTNULL(l1 = fc_ctx_lane(ctx, 1));
    CHECK_MSG(fc_ctx_lane_index(l1) == 1, "fc_ctx_lane_index(lane 1) = %d", fc_ctx_lane_index(l1));
    CHECK_NOTNULL(a = ct_upload_new(ctx, ha, (size_t)M * K));
    CHECK_NOTNULL(b = ct_upload_new(ctx, hb, (size_t)K * N));
    CHECK_NOTNULL(y = ct_upload_new(ctx, hy, (size_t)M * N));
    CHECK_NOTNULL(ws = fc_buffer_alloc_ctx(ctx, IL_CUBLAS_WORKSPACE_BYTES));
    CHECK_NOTNULL(gr.c = fc_buffer_alloc_ctx(ctx, mn));
    CHECK_NOTNULL(gr.x = ct_upload_new(ctx, hx0, (size_t)M * N));
    CHECK_NOTNULL(gr.out = ct_upload_new(ctx, poison, (size_t)M * N));
    CHECK_NOTNULL(ea.c = fc_buffer_alloc_ctx(ctx, mn));
    CHECK_NOTNULL(ea.x = ct_upload_new(ctx, hx0, (size_t)M * N));
    CHECK_NOTNULL(ea.out = ct_upload_new(ctx, poison, (size_t)M * N));
    CHECK_NOTNULL(h = make_handle(l1, ws)); /* on lane 1's stream */

    /* Eagerly (also cuBLAS' warm-up before the recording): the same calls
     * run on the lane streams. */
    CHECK_OK(fc_ctx_wait_lane(l1, ctx));
    CHECK_MSG(lane_gemm(h, a, b, ea.c, why, sizeof why) == 0, "eager: %s", why);
    CHECK_OK(lane_adds(ctx, ea.x, y));
    CHECK_OK(fc_ctx_wait_lane(ctx, l1));
    CHECK_OK(fc_add_ctx(ctx, ea.c, ea.x, ea.out, (size_t)M * N));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(ea.out, got_e, mn));

    /* Recorded: the adds are queued on lane 0 while lane 1's section is
     * open. */
    CHECK_OK(fc_graph_begin_ctx(ctx));
    CHECK_MSG(fc_graph_builds_ctx(ctx) == 1, "fc_graph_builds_ctx = %d in FC_RECORDING_BUILD",
              fc_graph_builds_ctx(ctx));
    CHECK_OK(fc_ctx_wait_lane(l1, ctx)); /* fork */
    CHECK_OK(fc_graph_foreign_begin_on_ctx(ctx, l1, FC_CAPTURE_MODE_THREAD_LOCAL, NULL));
    CHECK_MSG(lane_gemm(h, a, b, gr.c, why, sizeof why) == 0, "in the section on lane 1: %s", why);
    CHECK_OK(lane_adds(ctx, gr.x, y));
    CHECK_RC(fc_ctx_wait_lane(ctx, l1), FC_ERR_CAPTURE_STATE); /* its lane is in a section */
    CHECK_OK(fc_graph_foreign_end_ctx(ctx));
    CHECK_OK(fc_ctx_wait_lane(ctx, l1)); /* join */
    CHECK_OK(fc_add_ctx(ctx, gr.c, gr.x, gr.out, (size_t)M * N));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK_MSG(fc_graph_node_count(g) == LANE_ADDS + 2, "node count %zu, want %d (%d adds, the section, the add)",
              fc_graph_node_count(g), LANE_ADDS + 2, LANE_ADDS);

    /* Recording ran nothing. */
    CHECK_OK(fc_buffer_download(gr.out, got, mn));
    CHECK_MSG(ct_bits(got[0]) == CT_POISON_BITS && ct_bits(got[M * N - 1]) == CT_POISON_BITS,
              "OUT changed by the recording itself (0x%08x): the work ran instead of being recorded",
              (unsigned)ct_bits(got[0]));
    CHECK_OK(fc_buffer_download(gr.x, got, mn));
    CHECK_FLOATS(got, hx0, (size_t)M * N, "X after the recording (want X0: nothing ran)");

    CHECK_OK(fc_graph_launch(g));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(gr.out, got, mn));
    CHECK(compare(got, want, NULL, "lanes, replay") >= 0);
    CHECK(compare(got_e, want, NULL, "lanes, eager") >= 0);
    CHECK_FLOATS(got, got_e, (size_t)M * N, "lanes: replay vs eager");
    printf("test_cublas: GEMM on lane 1 beside %d adds on lane 0: %zu nodes; replay == eager == host, exactly\n",
           LANE_ADDS, fc_graph_node_count(g));

done:
    if (fc_graph_is_capturing_ctx(ctx) == 1) (void)fc_graph_abort_ctx(ctx);
    fc_graph_free(g);
    if (h) g_cublas.cublasDestroy_v2(h);
    CT_FREE_BUFFERS(a, b, y, ws, gr.c, gr.x, gr.out, ea.c, ea.x, ea.out);
    fc_cuda_ctx_free(l1);
    if (mode >= 0) (void)fc_ctx_set_recording_mode(ctx, mode);
    CT_FREE(ha, hb, hx0, hy, got, got_e, poison, want);
}

int main(int argc, char **argv)
{
    (void)argc;
    ct_init(argv[0]);
    char err[4096];
    if (il_cublas_load(&g_cublas, err, sizeof err) != 0) {
        if (il_required()) {
            printf("[FAIL] %s: cuBLAS could not be loaded (FC_REQUIRE_INTEROP=1): %s\n", ct_prog, err);
            return 1;
        }
        printf("[SKIP] %s: no cuBLAS (set FC_CUBLAS_LIBRARY to a libcublas.so path): %s\n", ct_prog, err);
        return 0;
    }
    printf("%s: cuBLAS from %s\n", ct_prog, g_cublas.path);
    /* Holds device 0's primary context for the whole run, so the cases'
     * contexts (created and freed by CT_RUN) all share the one cuBLAS
     * initialised in. */
    fc_cuda_ctx *keeper = fc_cuda_init_device(0);
    CT_RUN(gemm_in_graph);
    CT_RUN(replays_accumulate);
    CT_RUN(gemm_on_a_lane);
    fc_cuda_ctx_free(keeper);
    return ct_finish();
}
