/* fc_side.c - the fc-graph side of the coexistence runs; see fc_side.h.
 * Plain C99 + POSIX; fc_cuda.h, and for isolated-cublas cuBLAS and two
 * driver calls opened at run time (dlopen; no build dependency). */
#define _POSIX_C_SOURCE 200809L

#include "fc_side.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/fc_cuda.h"
/* il_cublas_load, il_required: cuBLAS opened at run time, as the C tests do. */
#include "../../examples/interop/interop_libs.h"

#define N 4096
#define PAIRS 13 /* 26 kernels */
#define OUR_KERNELS (2 * PAIRS)

/* The GEMM of isolated-cublas, column-major: OUT = (A0 .* S) B + D, with
 * A0, B in [-4, 4] integers, S in {0.5, 1, 2}, D in [-8, 8] integers: every
 * product is a multiple of 1/2 of at most 32 in magnitude, every partial
 * sum of GM_K of them at most 512, so each float result is exact (also in
 * TF32 or any summation order) and the host's equals the GPU's. */
#define GM_M 64
#define GM_N 32
#define GM_K 16

/* CUresult cuCtxPushCurrent_v2(CUcontext) / cuCtxPopCurrent_v2(CUcontext *):
 * cuBLAS uses the CUDA context current on the calling thread, and an
 * isolated context is never left current, so its calls are bracketed. */
typedef int (*cu_push_fn)(void *ctx);
typedef int (*cu_pop_fn)(void **ctx);

typedef struct blas_side {
    il_cublas api;
    il_cublas_handle h;
    void *cuda_lib;
    cu_push_fn push;
    cu_pop_fn pop;
    void *cu_ctx;
    fc_buffer *a0, *sc, *a, *b, *c, *d, *out, *ws;
    float ha0[GM_M * GM_K], hs[GM_M * GM_K], hb[GM_K * GM_N], hd[GM_M * GM_N];
    float want[GM_M * GM_N], got[GM_M * GM_N];
} blas_side;

struct fc_side {
    int config;
    fc_cuda_ctx *ctx;
    fc_buffer *x, *y, *z;
    blas_side *blas; /* isolated-cublas only */
    char why[FC_SIDE_MSG - 64]; /* a failure inside record_work that fc_last_error does not hold */
    float xs[N], ys[N], want[N], got[N];
};

static const char *const NAMES[FC_SIDE_CONFIGS] = {"primary-plain", "primary-retry", "isolated", "primary-capture",
                                                   "isolated-cublas"};
static const char *const RECORDING_NAMES[] = {"auto", "build", "capture"};

size_t fc_side_sizeof_counts(void)
{
    return sizeof(fc_side_counts);
}

size_t fc_side_sizeof_foreign(void)
{
    return sizeof(fc_side_foreign);
}

const char *fc_side_config_name(int config)
{
    return config >= 0 && config < FC_SIDE_CONFIGS ? NAMES[config] : NULL;
}

int fc_side_config_from_name(const char *name)
{
    for (int i = 0; name && i < FC_SIDE_CONFIGS; i++)
        if (strcmp(name, NAMES[i]) == 0)
            return i;
    return -1;
}

int fc_side_recording_mode(const char *value)
{
    if (!value)
        return FC_SIDE_RECORDING_AUTO;
    while (*value && isspace((unsigned char)*value))
        value++;
    size_t len = strlen(value);
    while (len && isspace((unsigned char)value[len - 1]))
        len--;
    if (len == 0)
        return FC_SIDE_RECORDING_AUTO;
    for (int m = 0; m < 3; m++) {
        const char *name = RECORDING_NAMES[m];
        if (strlen(name) != len)
            continue;
        size_t i = 0;
        while (i < len && tolower((unsigned char)value[i]) == name[i])
            i++;
        if (i == len)
            return m;
    }
    return -1;
}

int fc_side_recording_ok(int config, const char *value, char *why, size_t len)
{
    int mode = fc_side_recording_mode(value);
    const char *problem = NULL;
    if (mode < 0)
        problem = "is not auto, build or capture (the library refuses it)";
    else if (config == FC_SIDE_PRIMARY_CAPTURE && mode != FC_SIDE_RECORDING_CAPTURE)
        problem = "must be capture for primary-capture (set it in the environment before the process starts: "
                  "the library reads it once)";
    else if ((config == FC_SIDE_PRIMARY_PLAIN || config == FC_SIDE_PRIMARY_RETRY) &&
             mode == FC_SIDE_RECORDING_CAPTURE)
        problem = "is capture, but this configuration tests the default recording (unset it or use auto)";
    else if (config == FC_SIDE_ISOLATED_CUBLAS && mode == FC_SIDE_RECORDING_BUILD)
        problem = "is build: cuBLAS's work on fc_ctx_stream would run outside the recordings (unset it or use auto)";
    if (!problem)
        return 0;
    if (why && len)
        snprintf(why, len, "FC_RECORDING=\"%.40s\" %s", value ? value : "", problem);
    return -1;
}

int fc_side_time_cap_reached(long long done, double elapsed, double max_seconds)
{
    return done >= FC_SIDE_MIN_ITERS && elapsed > max_seconds;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Notes the first failure: its code and a message. */
static void note_text(fc_side_counts *c, int code, const char *what, const char *msg)
{
    if (c->first_code != FC_OK)
        return;
    c->first_code = code;
    snprintf(c->first_error, sizeof c->first_error, "%s: code %d: %s", what, code, msg);
}

/* Notes the first failure with fc_last_error(), copied at once. */
static void note(fc_side_counts *c, int code, const char *what)
{
    if (c->first_code != FC_OK)
        return;
    char msg[FC_SIDE_MSG - 64];
    fc_last_error_copy(msg, sizeof msg);
    note_text(c, code, what, msg);
}

/* ---- cuBLAS (isolated-cublas) -------------------------------------------- */

static const char *blas_status(const blas_side *b, int st, char *buf, size_t len)
{
    return il_cublas_status(&b->api, st, buf, len);
}

/* Makes the context current on this thread for cuBLAS. 0, or -1 with the
 * reason in why. */
static int blas_enter(fc_side *s)
{
    int r = s->blas->push(s->blas->cu_ctx);
    if (r != 0) {
        snprintf(s->why, sizeof s->why, "cuCtxPushCurrent of the isolated context returned CUresult %d", r);
        return -1;
    }
    return 0;
}

/* Pops it again; checks that it was the one on top. */
static int blas_leave(fc_side *s)
{
    void *popped = NULL;
    int r = s->blas->pop(&popped);
    if (r != 0 || popped != s->blas->cu_ctx) {
        if (!s->why[0])
            snprintf(s->why, sizeof s->why, "cuCtxPopCurrent returned CUresult %d (context %p, pushed %p)", r,
                     popped, s->blas->cu_ctx);
        return -1;
    }
    return 0;
}

/* A = A0 .* S (fc_mul), C = A B (cuBLAS SGEMM on fc_ctx_stream), OUT = C + D
 * (fc_add), queued on ctx: eager outside a recording, recorded inside one
 * (the context records by stream capture: its stream was handed out). */
static int record_gemm(fc_cuda_ctx *ctx, fc_side *s)
{
    blas_side *b = s->blas;
    int rc = fc_mul_ctx(ctx, b->a0, b->sc, b->a, (size_t)GM_M * GM_K);
    if (rc != FC_OK)
        return rc;
    if (blas_enter(s) != 0)
        return FC_ERR_CALLBACK;
    const float one = 1.0f, zero = 0.0f;
    const float *A = (const float *)(uintptr_t)fc_buffer_device_ptr(b->a);
    const float *B = (const float *)(uintptr_t)fc_buffer_device_ptr(b->b);
    float *C = (float *)(uintptr_t)fc_buffer_device_ptr(b->c);
    int st = b->api.cublasSgemm_v2(b->h, IL_CUBLAS_OP_N, IL_CUBLAS_OP_N, GM_M, GM_N, GM_K, &one, A, GM_M, B, GM_K,
                                   &zero, C, GM_M);
    if (st != IL_CUBLAS_STATUS_SUCCESS) {
        char buf[64];
        snprintf(s->why, sizeof s->why, "cublasSgemm_v2 returned %s", blas_status(b, st, buf, sizeof buf));
    }
    int left = blas_leave(s);
    if (st != IL_CUBLAS_STATUS_SUCCESS || left != 0)
        return FC_ERR_CALLBACK;
    return fc_add_ctx(ctx, b->c, b->d, b->out, (size_t)GM_M * GM_N);
}

/* Deterministic GEMM inputs and the host's OUT (exact, see GM_M). */
static void fill_gemm(blas_side *b)
{
    uint64_t r = 0xD1B54A32D192ED03ull;
#define NEXT() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, (int)(r >> 40))
    for (int i = 0; i < GM_M * GM_K; i++) {
        b->ha0[i] = (float)(NEXT() % 9 - 4);
        b->hs[i] = (float)(1 << (NEXT() % 3)) * 0.5f; /* 0.5, 1, 2 */
    }
    for (int i = 0; i < GM_K * GM_N; i++)
        b->hb[i] = (float)(NEXT() % 9 - 4);
    for (int i = 0; i < GM_M * GM_N; i++)
        b->hd[i] = (float)(NEXT() % 17 - 8);
#undef NEXT
    for (int j = 0; j < GM_N; j++)
        for (int i = 0; i < GM_M; i++) {
            double sum = 0.0;
            for (int k = 0; k < GM_K; k++)
                sum += (double)(b->ha0[i + k * GM_M] * b->hs[i + k * GM_M]) * (double)b->hb[k + j * GM_K];
            b->want[i + j * GM_M] = (float)(sum + (double)b->hd[i + j * GM_M]);
        }
}

/* Loads cuBLAS and the driver's push/pop. Returns 0; 1 when libcublas is
 * not found (a skip, the reason in c->first_error); -1 on another failure
 * (the reason in c->first_error). */
static int blas_load(blas_side *b, fc_side_counts *c)
{
    char err[2048]; /* il_open_first's lines are up to 1280 bytes */
    if (il_cublas_load(&b->api, err, sizeof err) != 0) {
        if (!b->api.lib) {
            snprintf(c->first_error, sizeof c->first_error, "libcublas not found (set FC_CUBLAS_LIBRARY): %.250s",
                     err);
            return 1;
        }
        snprintf(c->first_error, sizeof c->first_error, "%.120s is not a usable cuBLAS: %.160s", b->api.path, err);
        return -1;
    }
    const char *env = getenv("FC_CUDA_LIBRARY");
    const char *name = env && env[0] ? env : "libcuda.so.1";
    b->cuda_lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!b->cuda_lib) {
        const char *why = dlerror();
        snprintf(c->first_error, sizeof c->first_error, "dlopen(%.100s): %.200s", name, why ? why : "failed");
        return -1;
    }
    err[0] = '\0';
    if (il_sym(b->cuda_lib, "cuCtxPushCurrent_v2", (void *)&b->push, sizeof b->push, 1, err, sizeof err) != 0 ||
        il_sym(b->cuda_lib, "cuCtxPopCurrent_v2", (void *)&b->pop, sizeof b->pop, 1, err, sizeof err) != 0) {
        snprintf(c->first_error, sizeof c->first_error, "%.100s: %.200s", name, err);
        return -1;
    }
    return 0;
}

/* Buffers, inputs and the cuBLAS handle on s->ctx (isolated). FC_OK, or a
 * failing status with the step in *step / the message in s->why. */
static int blas_open(fc_side *s, const char **step)
{
    blas_side *b = s->blas;
    fc_cuda_ctx *ctx = s->ctx;
    size_t mk = (size_t)GM_M * GM_K * sizeof(float), kn = (size_t)GM_K * GM_N * sizeof(float),
           mn = (size_t)GM_M * GM_N * sizeof(float);
    *step = "fc_buffer_alloc_ctx (GEMM)";
    b->a0 = fc_buffer_alloc_ctx(ctx, mk);
    b->sc = fc_buffer_alloc_ctx(ctx, mk);
    b->a = fc_buffer_alloc_ctx(ctx, mk);
    b->b = fc_buffer_alloc_ctx(ctx, kn);
    b->c = fc_buffer_alloc_ctx(ctx, mn);
    b->d = fc_buffer_alloc_ctx(ctx, mn);
    b->out = fc_buffer_alloc_ctx(ctx, mn);
    b->ws = fc_buffer_alloc_ctx(ctx, IL_CUBLAS_WORKSPACE_BYTES);
    if (!b->a0 || !b->sc || !b->a || !b->b || !b->c || !b->d || !b->out || !b->ws)
        return fc_last_error_code() != FC_OK ? fc_last_error_code() : FC_ERR_INTERNAL;
    *step = "fc_buffer_upload (GEMM inputs)";
    int rc = fc_buffer_upload(b->a0, b->ha0, mk);
    if (rc == FC_OK)
        rc = fc_buffer_upload(b->sc, b->hs, mk);
    if (rc == FC_OK)
        rc = fc_buffer_upload(b->b, b->hb, kn);
    if (rc == FC_OK)
        rc = fc_buffer_upload(b->d, b->hd, mn);
    if (rc != FC_OK)
        return rc;
    /* From here on the context records by stream capture (its stream was
     * handed out), which is what puts cuBLAS's work into the recordings. */
    *step = "fc_ctx_stream / fc_ctx_cu_context";
    void *stream = fc_ctx_stream(ctx);
    b->cu_ctx = fc_ctx_cu_context(ctx);
    if (!stream || !b->cu_ctx)
        return fc_last_error_code() != FC_OK ? fc_last_error_code() : FC_ERR_INTERNAL;
    *step = "the cuBLAS handle";
    if (blas_enter(s) != 0)
        return FC_ERR_CALLBACK;
    char buf[64];
    const char *what = "cublasCreate_v2";
    int st = b->api.cublasCreate_v2(&b->h);
    if (st == IL_CUBLAS_STATUS_SUCCESS && !b->h)
        st = -1;
    if (st == IL_CUBLAS_STATUS_SUCCESS) {
        what = "cublasSetStream_v2(fc_ctx_stream(ctx))";
        st = b->api.cublasSetStream_v2(b->h, stream);
    }
    if (st == IL_CUBLAS_STATUS_SUCCESS) { /* after the stream: setting it resets the workspace */
        what = "cublasSetWorkspace_v2";
        st = b->api.cublasSetWorkspace_v2(b->h, (void *)(uintptr_t)fc_buffer_device_ptr(b->ws),
                                          fc_buffer_size(b->ws));
    }
    if (st == IL_CUBLAS_STATUS_SUCCESS) {
        what = "cublasSetMathMode(CUBLAS_DEFAULT_MATH)";
        st = b->api.cublasSetMathMode(b->h, IL_CUBLAS_DEFAULT_MATH);
    }
    int version = 0;
    if (st == IL_CUBLAS_STATUS_SUCCESS) {
        what = "cublasGetVersion_v2";
        st = b->api.cublasGetVersion_v2(b->h, &version);
    }
    if (st != IL_CUBLAS_STATUS_SUCCESS)
        snprintf(s->why, sizeof s->why, "%s returned %s", what, blas_status(b, st, buf, sizeof buf));
    if (blas_leave(s) != 0 || st != IL_CUBLAS_STATUS_SUCCESS)
        return FC_ERR_CALLBACK;
    fprintf(stderr, "[fc_side] cuBLAS %s, version %d, handle on the isolated context's stream\n", b->api.path,
            version);
    return FC_OK;
}

static void blas_close(fc_side *s)
{
    blas_side *b = s->blas;
    if (!b)
        return;
    if (b->h && b->push && b->cu_ctx && b->push(b->cu_ctx) == 0) {
        b->api.cublasDestroy_v2(b->h);
        void *popped = NULL;
        b->pop(&popped);
    }
    fc_buffer_free(b->a0);
    fc_buffer_free(b->sc);
    fc_buffer_free(b->a);
    fc_buffer_free(b->b);
    fc_buffer_free(b->c);
    fc_buffer_free(b->d);
    fc_buffer_free(b->out);
    fc_buffer_free(b->ws);
    /* The libraries stay loaded: cuBLAS may be the one PyTorch uses, and
     * dlclose gains nothing at the end of a run. */
    free(b);
    s->blas = NULL;
}

/* ---- the work ------------------------------------------------------------ */

/* The chain, recorded on ctx: 13 x (z = x + y; x = z * y). Returns the
 * first failing status. */
static int record_chain(fc_cuda_ctx *ctx, fc_side *s)
{
    for (int i = 0; i < PAIRS; i++) {
        int rc = fc_add_ctx(ctx, s->x, s->y, s->z, N);
        if (rc == FC_OK)
            rc = fc_mul_ctx(ctx, s->z, s->y, s->x, N);
        if (rc != FC_OK)
            return rc;
    }
    return FC_OK;
}

/* Everything one recording holds: the chain, then (isolated-cublas) the
 * GEMM work. An fc_record_fn. */
static int record_work(fc_cuda_ctx *ctx, void *user)
{
    fc_side *s = (fc_side *)user;
    s->why[0] = '\0';
    int rc = record_chain(ctx, s);
    if (rc == FC_OK && s->blas)
        rc = record_gemm(ctx, s);
    return rc;
}

/* Notes a failure of record_work: s->why when it says why, else
 * fc_last_error(). */
static void note_work(fc_side *s, fc_side_counts *c, int code, const char *what)
{
    if (s->why[0])
        note_text(c, code, what, s->why);
    else
        note(c, code, what);
}

/* The chain on the CPU; the volatile intermediate keeps the compiler from
 * fusing the add and the multiply (the GPU rounds after each). */
static void chain_cpu(float *x, const float *y)
{
    for (int p = 0; p < PAIRS; p++)
        for (int i = 0; i < N; i++) {
            volatile float z = x[i] + y[i];
            x[i] = z * y[i];
        }
}

/* Deterministic inputs: x in [-1, 1), y in [0.5, 1). */
static void fill_inputs(fc_side *s)
{
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        s->xs[i] = -1.0f + 2.0f * (float)(r >> 40) / 16777216.0f;
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        s->ys[i] = 0.5f + 0.5f * (float)(r >> 40) / 16777216.0f;
    }
    memcpy(s->want, s->xs, sizeof s->want);
    chain_cpu(s->want, s->ys);
}

void fc_side_close(fc_side *s)
{
    if (!s)
        return;
    if (s->ctx)
        fc_sync_ctx(s->ctx);
    blas_close(s);
    fc_buffer_free(s->x);
    fc_buffer_free(s->y);
    fc_buffer_free(s->z);
    fc_cuda_ctx_free(s->ctx);
    free(s);
}

/* One recording of the work: plain begin/end, or fc_graph_capture_ctx.
 * Returns the graph or NULL; *code gets the failing status, *tries the
 * recordings made. */
static fc_graph *record(fc_side *s, int max_tries, int *code, int *tries, fc_side_counts *c)
{
    fc_graph *g = NULL;
    *tries = 1;
    if (s->config == FC_SIDE_PRIMARY_RETRY) {
        s->why[0] = '\0';
        *code = fc_graph_capture_ctx(s->ctx, FC_CAPTURE_MODE_THREAD_LOCAL, record_work, s, max_tries, &g);
        if (*code != FC_OK) {
            note_work(s, c, *code, "fc_graph_capture_ctx");
            *tries = max_tries;
            return NULL;
        }
        *tries = fc_graph_capture_tries(g);
        return g;
    }
    *code = fc_graph_begin_ctx(s->ctx);
    if (*code != FC_OK) {
        note(c, *code, "fc_graph_begin_ctx");
        return NULL;
    }
    *code = record_work(s->ctx, s);
    if (*code != FC_OK) {
        note_work(s, c, *code, "the work inside the recording");
        fc_graph_abort_ctx(s->ctx);
        return NULL;
    }
    g = fc_graph_end_ctx(s->ctx);
    if (!g) {
        *code = fc_last_error_code();
        note(c, *code, "fc_graph_end_ctx");
    }
    return g;
}

/* Downloads the results (x, and OUT for isolated-cublas) after poisoning
 * the host copies. FC_OK or the failing status (noted). */
static int download(fc_side *s, fc_side_counts *c)
{
    memset(s->got, 0xff, sizeof s->got);
    int rc = fc_buffer_download(s->x, s->got, sizeof s->got);
    if (rc != FC_OK) {
        note(c, rc, "fc_buffer_download");
        return rc;
    }
    if (s->blas) {
        memset(s->blas->got, 0xff, sizeof s->blas->got);
        rc = fc_buffer_download(s->blas->out, s->blas->got, sizeof s->blas->got);
        if (rc != FC_OK)
            note(c, rc, "fc_buffer_download (GEMM result)");
    }
    return rc;
}

/* Whether the downloaded results equal the host's: x bit for bit, OUT
 * exactly (==, so NaN never passes). */
static int exact(const fc_side *s)
{
    if (memcmp(s->got, s->want, sizeof s->want) != 0)
        return 0;
    if (s->blas)
        for (int i = 0; i < GM_M * GM_N; i++)
            if (!(s->blas->got[i] == s->blas->want[i]))
                return 0;
    return 1;
}

/* Launches g after poisoning the GEMM's intermediates on the device (A, C
 * and OUT hold NaNs, so a replay without the recorded fc_mul, GEMM or
 * fc_add cannot pass), then downloads. FC_OK or the failing status. */
static int replay(fc_side *s, fc_graph *g, fc_side_counts *c)
{
    int rc = FC_OK;
    if (s->blas) {
        blas_side *b = s->blas;
        rc = fc_buffer_fill_ctx(s->ctx, b->a, 0, fc_buffer_size(b->a), 0xff);
        if (rc == FC_OK)
            rc = fc_buffer_fill_ctx(s->ctx, b->c, 0, fc_buffer_size(b->c), 0xff);
        if (rc == FC_OK)
            rc = fc_buffer_fill_ctx(s->ctx, b->out, 0, fc_buffer_size(b->out), 0xff);
        if (rc != FC_OK) {
            note(c, rc, "fc_buffer_fill_ctx (poison before the replay)");
            return rc;
        }
    }
    rc = fc_graph_launch(g);
    if (rc != FC_OK) {
        note(c, rc, "fc_graph_launch");
        return rc;
    }
    return download(s, c);
}

/* One eager run and one recording + replay, checked, before anything
 * interferes: loads the kernels (ours and cuBLAS's). Returns the failing
 * status and names the step. */
static int warm_up(fc_side *s, fc_side_counts *c, const char **step)
{
    *step = "warm-up upload";
    int rc = fc_buffer_upload(s->y, s->ys, sizeof s->ys);
    if (rc == FC_OK)
        rc = fc_buffer_upload(s->x, s->xs, sizeof s->xs);
    if (rc != FC_OK)
        return rc;
    *step = "warm-up eager run";
    rc = record_work(s->ctx, s);
    if (rc != FC_OK) {
        if (s->why[0])
            snprintf(c->first_error, sizeof c->first_error, "warm-up eager run: %s", s->why);
        return rc;
    }
    rc = download(s, c);
    if (rc != FC_OK)
        return rc;
    if (!exact(s)) {
        snprintf(c->first_error, sizeof c->first_error, "warm-up: the eager run computed a wrong result");
        return FC_ERR_INTERNAL;
    }
    *step = "warm-up recording";
    int tries;
    fc_graph *g = record(s, 1, &rc, &tries, c);
    if (!g)
        return rc;
    size_t nodes = fc_graph_node_count(g);
    *step = "warm-up replay";
    rc = fc_buffer_upload(s->x, s->xs, sizeof s->xs);
    if (rc == FC_OK)
        rc = replay(s, g, c);
    fc_graph_free(g);
    if (rc == FC_OK && !exact(s)) {
        snprintf(c->first_error, sizeof c->first_error, "warm-up: the replay computed a wrong result");
        return FC_ERR_INTERNAL;
    }
    if (rc == FC_OK && s->blas) {
        size_t used = strlen(c->note);
        snprintf(c->note + used, sizeof c->note - used, "; graph nodes %zu (%d ours + fc_mul + fc_add + cuBLAS's %lld)",
                 nodes, OUR_KERNELS, (long long)nodes - OUR_KERNELS - 2);
    }
    return rc;
}

fc_side *fc_side_open(int device, int config, fc_side_counts *c)
{
    memset(c, 0, sizeof *c);
    c->setup_failed = 1; /* until the end */
    if (!fc_side_config_name(config)) {
        c->recording = -1;
        snprintf(c->first_error, sizeof c->first_error, "unknown configuration %d", config);
        return NULL;
    }
    const char *recording = getenv("FC_RECORDING");
    c->recording = fc_side_recording_mode(recording);
    if (fc_side_recording_ok(config, recording, c->first_error, sizeof c->first_error) != 0)
        return NULL;
    int isolated = config == FC_SIDE_ISOLATED || config == FC_SIDE_ISOLATED_CUBLAS;
    fc_side *s = (fc_side *)calloc(1, sizeof *s);
    if (!s) {
        snprintf(c->first_error, sizeof c->first_error, "out of host memory");
        return NULL;
    }
    s->config = config;
    fill_inputs(s);
    if (config == FC_SIDE_ISOLATED_CUBLAS) {
        s->blas = (blas_side *)calloc(1, sizeof *s->blas);
        if (!s->blas) {
            snprintf(c->first_error, sizeof c->first_error, "out of host memory");
            fc_side_close(s);
            return NULL;
        }
        fill_gemm(s->blas);
        int loaded = blas_load(s->blas, c);
        if (loaded == 1 && !il_required()) {
            c->setup_failed = 0;
            c->skipped = 1;
            fc_side_close(s);
            return NULL;
        }
        if (loaded != 0) {
            if (loaded == 1) {
                size_t used = strlen(c->first_error);
                snprintf(c->first_error + used, sizeof c->first_error - used, " (FC_REQUIRE_INTEROP=1: a failure)");
            }
            fc_side_close(s);
            return NULL;
        }
    }
    const char *step = isolated ? "fc_cuda_init_device_isolated" : "fc_cuda_init_device";
    int rc = FC_ERR_INTERNAL;
    s->ctx = isolated ? fc_cuda_init_device_isolated(device) : fc_cuda_init_device(device);
    if (s->ctx) {
        step = "fc_buffer_alloc_ctx";
        s->x = fc_buffer_alloc_ctx(s->ctx, N * sizeof(float));
        s->y = fc_buffer_alloc_ctx(s->ctx, N * sizeof(float));
        s->z = fc_buffer_alloc_ctx(s->ctx, N * sizeof(float));
        if (s->x && s->y && s->z)
            rc = FC_OK;
    }
    int isolation = rc == FC_OK ? fc_ctx_isolation(s->ctx) : -1;
    if (rc == FC_OK) {
        snprintf(c->note, sizeof c->note, "%s context; FC_RECORDING=%s",
                 isolation == FC_ISOLATION_GREEN     ? "green"
                 : isolation == FC_ISOLATION_PRIVATE ? "private"
                 : isolation == FC_ISOLATION_NONE    ? "primary"
                                                     : "unknown",
                 recording && recording[0] ? RECORDING_NAMES[c->recording] : "unset");
        if (isolated)
            fprintf(stderr, "[fc_side] the isolated context is a %s context\n",
                    isolation == FC_ISOLATION_GREEN ? "green" : "private");
    }
    if (rc == FC_OK && fc_ctx_is_isolated(s->ctx) != isolated) {
        snprintf(c->first_error, sizeof c->first_error, "fc_ctx_is_isolated does not match the configuration");
        rc = FC_ERR_INTERNAL;
    }
    if (rc == FC_OK && isolated != (isolation == FC_ISOLATION_GREEN || isolation == FC_ISOLATION_PRIVATE)) {
        snprintf(c->first_error, sizeof c->first_error, "fc_ctx_isolation (%d) does not match the configuration",
                 isolation);
        rc = FC_ERR_INTERNAL;
    }
    if (rc == FC_OK && s->blas) {
        rc = blas_open(s, &step);
        if (rc != FC_OK && s->why[0])
            snprintf(c->first_error, sizeof c->first_error, "setup: %s: %s", step, s->why);
        if (rc == FC_OK) {
            size_t used = strlen(c->note);
            snprintf(c->note + used, sizeof c->note - used, "; cuBLAS %s", s->blas->api.path);
        }
    }
    if (rc == FC_OK) {
        /* The configuration takes the recording path it is meant to test:
         * the default builds; primary-capture (FC_RECORDING=capture) and
         * isolated-cublas (fc_ctx_stream was asked for) capture the stream. */
        int want = config == FC_SIDE_PRIMARY_CAPTURE || config == FC_SIDE_ISOLATED_CUBLAS ||
                           c->recording == FC_SIDE_RECORDING_CAPTURE
                       ? 0
                       : 1;
        int builds = fc_graph_builds_ctx(s->ctx);
        size_t used = strlen(c->note);
        snprintf(c->note + used, sizeof c->note - used, "; recordings %s",
                 builds == 1 ? "build" : builds == 0 ? "capture the stream" : "?");
        if (builds != want) {
            step = "fc_graph_builds_ctx";
            if (builds >= 0)
                snprintf(c->first_error, sizeof c->first_error,
                         "fc_graph_builds_ctx says the recordings %s, but %s must %s", builds ? "build" : "capture",
                         NAMES[config], want ? "build (the default recording)" : "capture the stream");
            rc = builds < 0 ? fc_last_error_code() : FC_ERR_INTERNAL;
        }
    }
    if (rc == FC_OK)
        rc = warm_up(s, c, &step);
    if (rc == FC_OK) {
        c->setup_failed = 0;
        c->first_code = FC_OK;
        c->first_error[0] = '\0';
        return s;
    }
    if (!c->first_error[0]) {
        char msg[FC_SIDE_MSG - 64];
        fc_last_error_copy(msg, sizeof msg);
        snprintf(c->first_error, sizeof c->first_error, "setup: %s failed: %s", step, msg);
    }
    fc_side_close(s);
    return NULL;
}

int fc_side_loop(fc_side *s, long long iters, int max_tries, double max_seconds, fc_side_counts *c)
{
    if (!s || !c || iters < 0 || max_tries < 1 || !(max_seconds > 0))
        return -1;
    c->requested += iters;
    double t0 = now_s();
    for (long long i = 0; i < iters; i++) {
        if (fc_side_time_cap_reached(i, now_s() - t0, max_seconds)) {
            c->time_capped = 1;
            break;
        }
        c->iters++;
        int rc = fc_buffer_upload(s->x, s->xs, sizeof s->xs);
        if (rc != FC_OK) {
            note(c, rc, "fc_buffer_upload");
            c->failed++, c->failed_other++;
            continue;
        }
        int tries = 1;
        fc_graph *g = record(s, max_tries, &rc, &tries, c);
        if (!g) {
            c->failed++;
            if (rc == FC_ERR_CAPTURE_INVALIDATED) {
                c->failed_invalidated++;
                c->invalidated_recordings += tries;
            } else {
                c->failed_other++;
            }
            continue;
        }
        if (tries < 1)
            tries = 1;
        c->invalidated_recordings += tries - 1;
        c->retried += tries > 1;
        if (tries > c->max_tries)
            c->max_tries = tries;
        c->tries_hist[tries < FC_SIDE_TRIES_SLOTS - 1 ? tries : FC_SIDE_TRIES_SLOTS - 1]++;
        rc = replay(s, g, c);
        fc_graph_free(g);
        if (rc != FC_OK) {
            c->failed++, c->failed_other++;
        } else if (!exact(s)) {
            c->wrong++;
        } else {
            c->ok++;
        }
    }
    c->seconds += now_s() - t0;
    return 0;
}

/* Copies src into dst with double quotes and control characters replaced,
 * so the message fits in one quoted field. */
static void sanitize(char *dst, size_t len, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < len; i++)
        dst[i] = (src[i] == '"' || (unsigned char)src[i] < 0x20) ? '\'' : src[i];
    if (len)
        dst[i] = '\0';
}

int fc_side_report(const char *client, int config, const fc_side_counts *fc, const fc_side_foreign *f, char *line,
                   size_t len)
{
    char reason[512] = "";
    const char *verdict = "PASS";
    int pass = 1;
#define REQUIRE(cond, text)                                                                                           \
    do {                                                                                                              \
        if (pass && !(cond)) {                                                                                        \
            pass = 0;                                                                                                 \
            verdict = "FAIL";                                                                                         \
            snprintf(reason, sizeof reason, "%s", text);                                                              \
        }                                                                                                             \
    } while (0)
    REQUIRE(fc_side_config_name(config) != NULL, "unknown configuration");
    if (pass && config == FC_SIDE_PRIMARY_CAPTURE) {
        /* The informational control: the old stream-capture path. Reported,
         * never a failure. */
        verdict = "INFO";
        if (fc->setup_failed) {
            snprintf(reason, sizeof reason, "informational control (stream capture): fc setup failed");
        } else {
            snprintf(reason, sizeof reason,
                     "informational control (stream capture): %lld of %lld fc iterations failed (%lld invalidated), "
                     "%lld recordings invalidated%s, %lld fc wrong, %lld foreign failures, %lld foreign wrong",
                     fc->failed, fc->iters, fc->failed_invalidated, fc->invalidated_recordings,
                     fc->invalidated_recordings ? "" : " (none: the foreign client may not have overlapped)",
                     fc->wrong, f->failed, f->wrong);
        }
    } else if (pass && fc->skipped && !fc->setup_failed && config == FC_SIDE_ISOLATED_CUBLAS) {
        verdict = "SKIP";
        char why[FC_SIDE_MSG];
        sanitize(why, sizeof why, fc->first_error[0] ? fc->first_error : "no reason given");
        snprintf(reason, sizeof reason, "skipped: %s", why);
    } else {
        REQUIRE(!fc->skipped, "skipped, but only isolated-cublas may be");
        REQUIRE(!fc->setup_failed, "fc setup failed");
        REQUIRE(fc->iters > 0, "no fc iteration ran");
        REQUIRE(f->iters > 0, "the foreign client ran no iteration");
        REQUIRE(fc->wrong == 0, "fc replays computed wrong results");
        REQUIRE(f->wrong == 0, "the foreign client computed wrong results");
        switch (config) {
        case FC_SIDE_PRIMARY_PLAIN:
            REQUIRE(fc->iters >= FC_SIDE_MIN_ITERS, "fewer fc iterations than required (at least 1000)");
            REQUIRE(fc->invalidated_recordings == 0,
                    "recordings on the primary context were invalidated: the default recording must not be "
                    "invalidated by foreign synchronisations");
            REQUIRE(fc->failed == 0, "fc failures on the primary context (default recording)");
            REQUIRE(f->failed == 0, "foreign failures beside the primary context's recordings");
            break;
        case FC_SIDE_PRIMARY_RETRY:
            REQUIRE(fc->failed == 0, "unrecovered fc failures with fc_graph_capture_ctx");
            REQUIRE(fc->invalidated_recordings == 0 && fc->retried == 0,
                    "fc_graph_capture_ctx re-recorded invalidated recordings: the default recording must not be "
                    "invalidated");
            REQUIRE(f->failed == 0, "foreign failures beside fc_graph_capture_ctx on the primary context");
            break;
        case FC_SIDE_ISOLATED:
            REQUIRE(fc->failed == 0, "fc failures on the isolated context");
            REQUIRE(f->failed == 0, "foreign failures beside the isolated context");
            break;
        case FC_SIDE_ISOLATED_CUBLAS:
            REQUIRE(fc->failed == 0, "fc failures on the isolated context with cuBLAS in its recordings");
            REQUIRE(f->failed == 0, "foreign failures beside the isolated context with cuBLAS");
            break;
        default:
            break;
        }
        if (pass)
            snprintf(reason, sizeof reason, "required results hold");
    }
#undef REQUIRE

    char hist[512] = "";
    size_t used = 0;
    for (int t = 1; t < FC_SIDE_TRIES_SLOTS && used < sizeof hist; t++) {
        if (!fc->tries_hist[t])
            continue;
        int n = snprintf(hist + used, sizeof hist - used, "%s%d%s:%lld", used ? "," : "", t,
                         t == FC_SIDE_TRIES_SLOTS - 1 ? "+" : "", fc->tries_hist[t]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (!hist[0])
        snprintf(hist, sizeof hist, "none");

    const char *rec = fc->recording >= 0 && fc->recording <= 2 ? RECORDING_NAMES[fc->recording] : "invalid";
    snprintf(line, len,
             "COEXIST client=%s config=%s verdict=%s recording=%s fc_iters=%lld fc_ok=%lld fc_failed=%lld "
             "fc_failed_invalidated=%lld fc_failed_other=%lld fc_invalidated_recordings=%lld fc_retried=%lld "
             "fc_max_tries=%lld fc_tries=%s fc_wrong=%lld fc_requested=%lld fc_min_iters=%d fc_seconds=%.2f "
             "fc_time_capped=%lld foreign_iters=%lld foreign_calls=%lld foreign_failed=%lld "
             "foreign_sync_failed=%lld foreign_alloc_failed=%lld foreign_capture_failed=%lld "
             "foreign_other_failed=%lld foreign_wrong=%lld reason=\"%s\"",
             client ? client : "?", fc_side_config_name(config) ? fc_side_config_name(config) : "?", verdict, rec,
             fc->iters, fc->ok, fc->failed, fc->failed_invalidated, fc->failed_other, fc->invalidated_recordings,
             fc->retried, fc->max_tries, hist, fc->wrong, fc->requested, FC_SIDE_MIN_ITERS, fc->seconds,
             fc->time_capped, f->iters, f->calls, f->failed, f->sync_failed, f->alloc_failed, f->capture_failed,
             f->other_failed, f->wrong, reason);
    return pass;
}

void fc_side_report_errors(const char *client, int config, const fc_side_counts *fc, const fc_side_foreign *f,
                           char *line, size_t len)
{
    char a[FC_SIDE_MSG], b[FC_SIDE_MSG], n[FC_SIDE_MSG];
    sanitize(a, sizeof a, fc->first_error[0] ? fc->first_error : "none");
    sanitize(b, sizeof b, f->first_error[0] ? f->first_error : "none");
    sanitize(n, sizeof n, fc->note[0] ? fc->note : "none");
    snprintf(line, len,
             "COEXIST-ERRORS client=%s config=%s fc_first_error=\"%s\" foreign_first_error=\"%s\" fc_note=\"%s\"",
             client ? client : "?", fc_side_config_name(config) ? fc_side_config_name(config) : "?", a, b, n);
}
