/* expect.h - checking a failing call: its status, fc_last_error_code() and
 * a message that names the problem. Shared by the hostile tests.
 *
 * A "status" here is what a call reports, whatever its C return type:
 *   - int exports: the int they return;
 *   - constructors: FC_OK when they returned a handle (which ST_NEW frees),
 *     else the recorded fc_last_error_code() (ST_SILENT_NULL when NULL came
 *     back with no error recorded);
 *   - queries with a fallback value: ST_WRONG_FALLBACK when the value is not
 *     the documented fallback, else the recorded code;
 *   - void exports (*_free): the recorded code.
 * Every expectation calls fc_clear_last_error() first, so a call that fails
 * without recording its own error cannot pass on a stale one.
 */
#ifndef FC_CTEST_EXPECT_H
#define FC_CTEST_EXPECT_H

#include <ctype.h>
#include <stdarg.h>

#include "check.h"

#define ST_SILENT_NULL (-1001)   /* NULL returned, nothing recorded */
#define ST_WRONG_FALLBACK (-1002) /* a query returned something else than its fallback */

static inline const char *ct_status_name(int st)
{
    switch (st) {
    case FC_OK: return "FC_OK";
    case FC_ERR_INVALID_ARGUMENT: return "FC_ERR_INVALID_ARGUMENT";
    case FC_ERR_NO_DRIVER: return "FC_ERR_NO_DRIVER";
    case FC_ERR_CUDA: return "FC_ERR_CUDA";
    case FC_ERR_WRONG_DEVICE: return "FC_ERR_WRONG_DEVICE";
    case FC_ERR_BUFFER_TOO_SMALL: return "FC_ERR_BUFFER_TOO_SMALL";
    case FC_ERR_CAPTURE_STATE: return "FC_ERR_CAPTURE_STATE";
    case FC_ERR_UNSUPPORTED: return "FC_ERR_UNSUPPORTED";
    case FC_ERR_OUT_OF_MEMORY: return "FC_ERR_OUT_OF_MEMORY";
    case FC_ERR_CALLBACK: return "FC_ERR_CALLBACK";
    case FC_ERR_INTERNAL: return "FC_ERR_INTERNAL";
    case FC_ERR_INVALID_HANDLE: return "FC_ERR_INVALID_HANDLE";
    case FC_ERR_CAPTURE_INVALIDATED: return "FC_ERR_CAPTURE_INVALIDATED";
    case FC_ERR_WRONG_CONTEXT: return "FC_ERR_WRONG_CONTEXT";
    case ST_SILENT_NULL: return "NULL with no error recorded";
    case ST_WRONG_FALLBACK: return "a value other than the documented fallback";
    default: return "an unknown status";
    }
}

/* Case-insensitive: does msg contain one of the '|'-separated keywords? */
static inline int ct_contains_any(const char *msg, const char *keywords)
{
    char low[2048];
    size_t i;
    for (i = 0; msg[i] && i + 1 < sizeof low; i++) low[i] = (char)tolower((unsigned char)msg[i]);
    low[i] = 0;
    const char *k = keywords;
    while (*k) {
        char kw[160];
        size_t j = 0;
        while (k[j] && k[j] != '|' && j + 1 < sizeof kw) {
            kw[j] = (char)tolower((unsigned char)k[j]);
            j++;
        }
        kw[j] = 0;
        if (j > 0 && strstr(low, kw)) return 1;
        k += j;
        if (*k == '|') k++;
    }
    return 0;
}

/* ---- statuses of non-int exports ---------------------------------------- */

static inline int ct_st_handle(const void *h, void (*free_fn)(void *))
{
    if (h) {
        free_fn((void *)h);
        return FC_OK;
    }
    int code = fc_last_error_code();
    return code == FC_OK ? ST_SILENT_NULL : code;
}

static inline void ct_free_ctx_(void *h) { fc_cuda_ctx_free((fc_cuda_ctx *)h); }
static inline void ct_free_buffer_(void *h) { fc_buffer_free((fc_buffer *)h); }
static inline void ct_free_graph_(void *h) { fc_graph_free((fc_graph *)h); }
static inline void ct_free_module_(void *h) { fc_module_free((fc_module *)h); }
static inline void ct_free_kernel_(void *h) { fc_kernel_free((fc_kernel *)h); }
static inline void ct_free_cache_(void *h) { fc_graph_cache_free((fc_graph_cache *)h); }
static inline void ct_free_buckets_(void *h) { fc_buckets_free((fc_buckets *)h); }

/* ST_NEW(constructor call): its status (a handle it returns is freed). */
#define ST_NEW(expr)                                                                       \
    ct_st_handle((const void *)(expr), _Generic((expr), fc_cuda_ctx *: ct_free_ctx_,       \
                                                fc_buffer *: ct_free_buffer_,              \
                                                fc_graph *: ct_free_graph_,                \
                                                fc_module *: ct_free_module_,              \
                                                fc_kernel *: ct_free_kernel_,              \
                                                fc_graph_cache *: ct_free_cache_,          \
                                                fc_buckets *: ct_free_buckets_))

/* ST_VALUE(query == fallback): the recorded code, or ST_WRONG_FALLBACK. */
#define ST_VALUE(is_fallback) ((is_fallback) ? fc_last_error_code() : ST_WRONG_FALLBACK)

/* ST_VOID(void call): the recorded code. */
#define ST_VOID(call) ((call), fc_last_error_code())

/* ---- checking one outcome -------------------------------------------------- */

/* Checks a status against the expectation: FC_OK expects nothing recorded;
 * an error expects the same code from fc_last_error_code() and a non-empty
 * message containing one of `keywords` and, when `also` is not NULL, one of
 * `also` too. Writes why not into `why` and returns 0 on a mismatch. */
static inline int ct_outcome_ok(int st, int want, const char *keywords, const char *also, char *why, size_t len)
{
    int code = fc_last_error_code();
    char msg[1024];
    (void)fc_last_error_copy(msg, sizeof msg);
    if (st != want) {
        snprintf(why, len, "status %d (%s), expected %d (%s); last error %d \"%s\"", st, ct_status_name(st), want,
                 ct_status_name(want), code, msg);
        return 0;
    }
    if (want == FC_OK) {
        if (code != FC_OK) {
            snprintf(why, len, "succeeded but recorded error %d \"%s\"", code, msg);
            return 0;
        }
        return 1;
    }
    if (code != want) {
        snprintf(why, len, "fc_last_error_code() = %d (%s), expected %d (%s)", code, ct_status_name(code), want,
                 ct_status_name(want));
        return 0;
    }
    if (!msg[0]) {
        snprintf(why, len, "empty error message");
        return 0;
    }
    if (keywords && !ct_contains_any(msg, keywords)) {
        snprintf(why, len, "message \"%s\" mentions none of \"%s\"", msg, keywords);
        return 0;
    }
    if (also && !ct_contains_any(msg, also)) {
        snprintf(why, len, "message \"%s\" mentions none of \"%s\"", msg, also);
        return 0;
    }
    return 1;
}

/* ---- counted cases ----------------------------------------------------------
 * The matrix programs count every checked expectation as one case and print
 * each failing one as "[FAIL] <prog>/<group>/<case>: why" (check.h prints
 * only a group's first failure). */

static long ct_matrix_run, ct_matrix_failed, ct_matrix_skipped;

static inline void ct_case_fail(const char *name, const char *fmt, ...)
{
    char buf[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("[FAIL] %s/%s/%s: %s\n", ct_prog, ct_case, name, buf);
    fflush(stdout);
    ct_case_failed = 1;
    ct_matrix_failed++;
}

/* Counts one case; returns `ok`. */
static inline int ct_case_result(const char *name, int ok, const char *why)
{
    ct_matrix_run++;
    if (!ok) ct_case_fail(name, "%s", why);
    return ok;
}

/* EXPECT(name, status expression, code, keywords): one counted case. The
 * status expression is evaluated after fc_clear_last_error(). */
#define EXPECT(name, st_expr, code, keywords)                                     \
    do {                                                                          \
        char ct_why_[1200];                                                       \
        fc_clear_last_error();                                                    \
        int ct_st_ = (st_expr);                                                   \
        ct_case_result((name), ct_outcome_ok(ct_st_, (code), (keywords), NULL,    \
                                             ct_why_, sizeof ct_why_),            \
                       ct_why_);                                                  \
    } while (0)

/* EXPECT_TRUE(name, cond, fmt, ...): one counted case for a plain condition. */
#define EXPECT_TRUE(name, cond, ...)                                              \
    do {                                                                          \
        char ct_why_[1200];                                                       \
        int ct_ok_ = (cond) ? 1 : 0;                                              \
        if (!ct_ok_) snprintf(ct_why_, sizeof ct_why_, __VA_ARGS__);              \
        ct_case_result((name), ct_ok_, ct_ok_ ? "" : ct_why_);                    \
    } while (0)

static inline void ct_matrix_summary(const char *what)
{
    printf("%s: %ld cases, %ld passed, %ld failed, %ld skipped\n", what, ct_matrix_run,
           ct_matrix_run - ct_matrix_failed, ct_matrix_failed, ct_matrix_skipped);
    fflush(stdout);
}

#endif /* FC_CTEST_EXPECT_H */
