/* check.h - tiny test harness shared by the C tests of libfcgraph.
 *
 * A test program is a list of cases; each case is a function
 *     static void case_x(fc_cuda_ctx *ctx)
 * run by CT_RUN(fn) (or from a table of CT_CASE(fn) by ct_run_cases /
 * ct_main) with a fresh context on device 0, which is freed afterwards
 * (freeing it also drops a capture a failed case left open).
 * Inside a case, the CHECK* macros print "[FAIL] <case>: file:line: ..."
 * with fc_last_error() and jump to the case's `done:` label, where it
 * frees what it allocated (so declare handles NULL-initialised at the top;
 * CT_FREE / CT_FREE_BUFFERS / CT_FREE_GRAPHS free lists of them).
 *
 * main() calls ct_init(argv[0]) first: when fc_cuda_init_device(0) returns
 * NULL it prints "[SKIP] <fc_last_error()>" and exits 0. It ends with
 * `return ct_finish();` (non-zero when a case failed). ct_main(argc, argv,
 * cases, CT_COUNT(cases)) is that whole main() for a plain table of cases.
 */
#ifndef FC_CTEST_CHECK_H
#define FC_CTEST_CHECK_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/fc_cuda.h"

static const char *ct_prog = "test";
static const char *ct_case = "?";
static int ct_case_failed;
static int ct_passed, ct_failed, ct_skipped;

static inline const char *ct_err(void)
{
    const char *e = fc_last_error();
    return e ? e : "(null)";
}

/* Reports a failure of the current case (the first one only). */
static inline void ct_fail_at(const char *file, int line, const char *detail)
{
    if (!ct_case_failed) {
        printf("[FAIL] %s/%s: %s:%d: %s (fc_last_error: code %d \"%s\")\n", ct_prog, ct_case, file, line, detail,
               fc_last_error_code(), ct_err());
        fflush(stdout);
    }
    ct_case_failed = 1;
}

#define CT_FAILF(...)                                                      \
    do {                                                                   \
        char ct_buf_[768];                                                 \
        snprintf(ct_buf_, sizeof ct_buf_, __VA_ARGS__);                    \
        ct_fail_at(__FILE__, __LINE__, ct_buf_);                           \
    } while (0)

/* CHECK(cond): fails the case and jumps to `done` when cond is false. */
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            ct_fail_at(__FILE__, __LINE__, "CHECK(" #cond ")");            \
            goto done;                                                     \
        }                                                                  \
    } while (0)

/* CHECK_MSG(cond, fmt, ...): as CHECK with a formatted detail. */
#define CHECK_MSG(cond, ...)                                               \
    do {                                                                   \
        if (!(cond)) {                                                     \
            CT_FAILF(__VA_ARGS__);                                         \
            goto done;                                                     \
        }                                                                  \
    } while (0)

/* CHECK_OK(call): the call returns FC_OK. */
#define CHECK_OK(call)                                                     \
    do {                                                                   \
        int ct_rc_ = (call);                                               \
        if (ct_rc_ != FC_OK) {                                             \
            CT_FAILF("%s returned %d, expected FC_OK", #call, ct_rc_);     \
            goto done;                                                     \
        }                                                                  \
    } while (0)

/* CHECK_RC(call, code): the call returns `code`. */
#define CHECK_RC(call, code)                                               \
    do {                                                                   \
        int ct_rc_ = (call);                                               \
        if (ct_rc_ != (code)) {                                            \
            CT_FAILF("%s returned %d, expected %s (%d)", #call, ct_rc_,    \
                     #code, (int)(code));                                  \
            goto done;                                                     \
        }                                                                  \
    } while (0)

/* CHECK_NOTNULL(var = call): the handle is not NULL. */
#define CHECK_NOTNULL(expr)                                                \
    do {                                                                   \
        if ((expr) == NULL) {                                              \
            ct_fail_at(__FILE__, __LINE__, #expr " returned NULL");        \
            goto done;                                                     \
        }                                                                  \
    } while (0)

/* Prints a skip line for one case (the program still counts as run). */
#define CT_SKIP_CASE(name, ...)                                            \
    do {                                                                   \
        char ct_buf_[512];                                                 \
        snprintf(ct_buf_, sizeof ct_buf_, __VA_ARGS__);                    \
        printf("[SKIP] %s/%s: %s\n", ct_prog, (name), ct_buf_);            \
        fflush(stdout);                                                    \
        ct_skipped++;                                                      \
    } while (0)

typedef void (*ct_case_fn)(fc_cuda_ctx *ctx);

static inline void ct_run(const char *name, ct_case_fn fn)
{
    ct_case = name;
    ct_case_failed = 0;
    fc_cuda_ctx *ctx = fc_cuda_init_device(0);
    if (!ctx) {
        ct_fail_at(__FILE__, __LINE__, "fc_cuda_init_device(0) returned NULL");
    } else {
        fn(ctx);
        fc_cuda_ctx_free(ctx);
    }
    if (ct_case_failed) {
        ct_failed++;
    } else {
        printf("[PASS] %s/%s\n", ct_prog, name);
        ct_passed++;
    }
    fflush(stdout);
}

#define CT_RUN(fn) ct_run(#fn, fn)

static inline void ct_init(const char *argv0)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *slash = strrchr(argv0, '/');
    ct_prog = slash ? slash + 1 : argv0;
    fc_cuda_ctx *probe = fc_cuda_init_device(0);
    if (!probe) {
        printf("[SKIP] %s: no CUDA device 0: %s\n", ct_prog, ct_err());
        exit(0);
    }
    printf("%s: libfcgraph %s, %d CUDA device(s)\n", ct_prog, fc_version(), fc_cuda_device_count());
    fc_cuda_ctx_free(probe);
}

static inline int ct_finish(void)
{
    printf("%s: %d passed, %d failed, %d skipped\n", ct_prog, ct_passed, ct_failed, ct_skipped);
    return ct_failed ? 1 : 0;
}

/* ---- case tables ---------------------------------------------------------- */

typedef struct {
    const char *name;
    ct_case_fn fn;
    int min_devices; /* > 0: skipped when fewer CUDA devices are visible */
} ct_case_def;

/* CT_CASE(fn): a table entry named after the function, as CT_RUN(fn). */
#define CT_CASE(fn) {#fn, fn, 0}
/* CT_CASE_NEEDS(fn, d): as CT_CASE, but printed as
 * "[SKIP] <prog>/<fn>: needs d CUDA devices, N visible" below d devices. */
#define CT_CASE_NEEDS(fn, devices) {#fn, fn, (devices)}

#define CT_COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* Whether `name` is an entry of the comma-separated list `list`. */
static inline int ct_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* Runs (or skips) the cases in table order. CT_ONLY=a,b runs only the
 * cases named; CT_SKIP=a,b skips those named (both print a [SKIP] line):
 * the sanitizer runs use them to keep a case that provokes a failing
 * driver call on purpose out of the runs that report every one. */
static inline void ct_run_cases(const ct_case_def *cases, size_t count)
{
    const char *only = getenv("CT_ONLY"), *skip = getenv("CT_SKIP");
    for (size_t i = 0; i < count; i++) {
        if (only && *only && !ct_listed(only, cases[i].name))
            CT_SKIP_CASE(cases[i].name, "not in CT_ONLY");
        else if (skip && ct_listed(skip, cases[i].name))
            CT_SKIP_CASE(cases[i].name, "in CT_SKIP");
        else if (cases[i].min_devices > 0 && fc_cuda_device_count() < cases[i].min_devices)
            CT_SKIP_CASE(cases[i].name, "needs %d CUDA devices, %d visible", cases[i].min_devices,
                         fc_cuda_device_count());
        else
            ct_run(cases[i].name, cases[i].fn);
    }
}

/* The whole main() of a test program: ct_init, the cases, ct_finish. */
static inline int ct_main(int argc, char **argv, const ct_case_def *cases, size_t count)
{
    (void)argc;
    ct_init(argv[0]);
    ct_run_cases(cases, count);
    return ct_finish();
}

/* ---- data helpers -------------------------------------------------------- */

/* Deterministic xorshift32 generator (same sequence on every libc). */
static uint32_t ct_rng_state = 0x12345678u;

static inline void ct_seed(uint32_t s)
{
    ct_rng_state = s ? s : 0x9e3779b9u;
}

static inline uint32_t ct_rand_u32(void)
{
    uint32_t x = ct_rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    ct_rng_state = x;
    return x;
}

/* A random float in [-4, -0.25] U [0.25, 4]: never zero, never tiny. */
static inline float ct_rand_float(void)
{
    uint32_t r = ct_rand_u32();
    float mag = 0.25f + 3.75f * (float)(r >> 8) / 16777216.0f;
    return (r & 1u) ? -mag : mag;
}

static inline void ct_fill_random(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) v[i] = ct_rand_float();
}

static inline void ct_fill_value(float *v, size_t n, float x)
{
    for (size_t i = 0; i < n; i++) v[i] = x;
}

/* ct_seed(seed), then random a[0..n), then random b[0..n) (in that order). */
static inline void ct_seed_fill2(uint32_t seed, float *a, float *b, size_t n)
{
    ct_seed(seed);
    ct_fill_random(a, n);
    ct_fill_random(b, n);
}

static inline uint32_t ct_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float ct_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A quiet NaN with a recognisable payload, used to poison outputs. */
#define CT_POISON_BITS 0x7fc0deadu

static inline void ct_fill_poison(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) v[i] = ct_from_bits(CT_POISON_BITS);
}

/* Index of the first element where got != want (bit-exact, so a NaN never
 * matches a number), or (size_t)-1 when all n match. */
static inline size_t ct_first_mismatch(const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ct_bits(got[i]) != ct_bits(want[i]) && !(got[i] == want[i])) return i;
    return (size_t)-1;
}

/* CHECK_FLOATS(got, want, n, what): bit-exact compare (+0 == -0 allowed),
 * reporting the first mismatch. */
#define CHECK_FLOATS(got, want, n, what)                                   \
    do {                                                                   \
        size_t ct_i_ = ct_first_mismatch((got), (want), (n));              \
        if (ct_i_ != (size_t)-1) {                                         \
            CT_FAILF("%s: first mismatch at [%zu] of %zu: got %.9g "       \
                     "(0x%08x), want %.9g (0x%08x)",                       \
                     (what), ct_i_, (size_t)(n), (double)(got)[ct_i_],     \
                     (unsigned)ct_bits((got)[ct_i_]),                      \
                     (double)(want)[ct_i_],                                \
                     (unsigned)ct_bits((want)[ct_i_]));                    \
            goto done;                                                     \
        }                                                                  \
    } while (0)

/* malloc that fails the case (via CHECK_NOTNULL at the call site). */
static inline float *ct_floats(size_t n)
{
    return (float *)malloc((n ? n : 1) * sizeof(float));
}

/* Allocates a device buffer of n floats and uploads `host` into it (NULL on
 * failure, with fc_last_error() set by the library). */
static inline fc_buffer *ct_upload_new(fc_cuda_ctx *ctx, const float *host, size_t n)
{
    fc_buffer *b = fc_buffer_alloc_ctx(ctx, n * sizeof(float));
    if (!b) return NULL;
    if (host && fc_buffer_upload(b, host, n * sizeof(float)) != FC_OK) {
        fc_buffer_free(b);
        return NULL;
    }
    return b;
}

/* ---- cleanup ------------------------------------------------------------- */

/* Each free in list order; NULL entries are fine (free(NULL), fc_*_free(NULL)
 * do nothing). For a case's `done:` label. */
static inline void ct_free_list(void **p, size_t count)
{
    for (size_t i = 0; i < count; i++) free(p[i]);
}

static inline void ct_free_buffers(fc_buffer **bufs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        fc_buffer_free(bufs[i]);
        bufs[i] = NULL;
    }
}

static inline void ct_free_graphs(fc_graph **graphs, size_t count)
{
    for (size_t i = 0; i < count; i++) fc_graph_free(graphs[i]);
}

/* CT_FREE(p, q, ...): free(p); free(q); ... (host memory). */
#define CT_FREE(...)                                                       \
    do {                                                                   \
        void *ct_l_[] = {__VA_ARGS__};                                     \
        ct_free_list(ct_l_, CT_COUNT(ct_l_));                              \
    } while (0)

/* CT_FREE_BUFFERS(a, b, ...): fc_buffer_free(a); fc_buffer_free(b); ... */
#define CT_FREE_BUFFERS(...)                                               \
    do {                                                                   \
        fc_buffer *ct_l_[] = {__VA_ARGS__};                                \
        ct_free_buffers(ct_l_, CT_COUNT(ct_l_));                           \
    } while (0)

/* CT_FREE_GRAPHS(g, h, ...): fc_graph_free(g); fc_graph_free(h); ... */
#define CT_FREE_GRAPHS(...)                                                \
    do {                                                                   \
        fc_graph *ct_l_[] = {__VA_ARGS__};                                 \
        ct_free_graphs(ct_l_, CT_COUNT(ct_l_));                            \
    } while (0)

/* Uploads before[0..n) into `out`, launches g, syncs ctx and downloads
 * `out`: 1 when every element equals `value` (as ct_first_mismatch
 * compares), 0 otherwise (including any failing call). */
static inline int ct_replay_gives(fc_cuda_ctx *ctx, fc_graph *g, fc_buffer *out, const float *before, size_t n,
                                  float value)
{
    int ok = 0;
    float *got = ct_floats(n), *want = ct_floats(n);
    if (!got || !want) goto end;
    if (fc_buffer_upload(out, before, n * sizeof(float)) != FC_OK) goto end;
    if (fc_graph_launch(g) != FC_OK) goto end;
    if (fc_sync_ctx(ctx) != FC_OK) goto end;
    if (fc_buffer_download(out, got, n * sizeof(float)) != FC_OK) goto end;
    ct_fill_value(want, n, value);
    ok = ct_first_mismatch(got, want, n) == (size_t)-1;
end:
    free(got);
    free(want);
    return ok;
}

#endif /* FC_CTEST_CHECK_H */
