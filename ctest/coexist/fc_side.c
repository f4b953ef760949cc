/* fc_side.c - the fc-graph side of the coexistence runs; see fc_side.h.
 * Plain C99 + POSIX; only fc_cuda.h. */
#define _POSIX_C_SOURCE 200809L

#include "fc_side.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/fc_cuda.h"

#define N 4096
#define PAIRS 13 /* 26 kernels */

struct fc_side {
    int config;
    fc_cuda_ctx *ctx;
    fc_buffer *x, *y, *z;
    float xs[N], ys[N], want[N], got[N];
};

static const char *const NAMES[FC_SIDE_CONFIGS] = {"primary-plain", "primary-retry", "isolated"};

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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Notes the first failure: its code and fc_last_error(), copied at once. */
static void note(fc_side_counts *c, int code, const char *what)
{
    if (c->first_code != FC_OK)
        return;
    char msg[FC_SIDE_MSG - 64];
    fc_last_error_copy(msg, sizeof msg);
    c->first_code = code;
    snprintf(c->first_error, sizeof c->first_error, "%s: code %d: %s", what, code, msg);
}

/* The chain, recorded on ctx: 13 x (z = x + y; x = z * y). Returns the
 * first failing status. */
static int record_chain(fc_cuda_ctx *ctx, void *user)
{
    fc_side *s = (fc_side *)user;
    for (int i = 0; i < PAIRS; i++) {
        int rc = fc_add_ctx(ctx, s->x, s->y, s->z, N);
        if (rc == FC_OK)
            rc = fc_mul_ctx(ctx, s->z, s->y, s->x, N);
        if (rc != FC_OK)
            return rc;
    }
    return FC_OK;
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
    fc_buffer_free(s->x);
    fc_buffer_free(s->y);
    fc_buffer_free(s->z);
    fc_cuda_ctx_free(s->ctx);
    free(s);
}

/* One capture of the chain: plain begin/end, or fc_graph_capture_ctx.
 * Returns the graph or NULL; *code gets the failing status, *tries the
 * recordings made. */
static fc_graph *capture(fc_side *s, int max_tries, int *code, int *tries, fc_side_counts *c)
{
    fc_graph *g = NULL;
    *tries = 1;
    if (s->config == FC_SIDE_PRIMARY_RETRY) {
        *code = fc_graph_capture_ctx(s->ctx, FC_CAPTURE_MODE_THREAD_LOCAL, record_chain, s, max_tries, &g);
        if (*code != FC_OK) {
            note(c, *code, "fc_graph_capture_ctx");
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
    *code = record_chain(s->ctx, s);
    if (*code != FC_OK) {
        note(c, *code, "fc_add_ctx/fc_mul_ctx inside the capture");
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

/* One eager chain and one capture + replay, checked, before anything
 * interferes: loads the built-in kernels. Returns the failing status and
 * names the step. */
static int warm_up(fc_side *s, fc_side_counts *c, const char **step)
{
    *step = "warm-up upload";
    int rc = fc_buffer_upload(s->y, s->ys, sizeof s->ys);
    if (rc == FC_OK)
        rc = fc_buffer_upload(s->x, s->xs, sizeof s->xs);
    if (rc != FC_OK)
        return rc;
    *step = "warm-up eager chain";
    rc = record_chain(s->ctx, s);
    if (rc == FC_OK)
        rc = fc_buffer_download(s->x, s->got, sizeof s->got);
    if (rc != FC_OK)
        return rc;
    if (memcmp(s->got, s->want, sizeof s->want) != 0) {
        snprintf(c->first_error, sizeof c->first_error, "warm-up: the eager chain computed a wrong result");
        return FC_ERR_INTERNAL;
    }
    *step = "warm-up capture";
    int tries;
    fc_graph *g = capture(s, 1, &rc, &tries, c);
    if (!g)
        return rc;
    *step = "warm-up replay";
    rc = fc_buffer_upload(s->x, s->xs, sizeof s->xs);
    if (rc == FC_OK)
        rc = fc_graph_launch(g);
    if (rc == FC_OK)
        rc = fc_buffer_download(s->x, s->got, sizeof s->got);
    fc_graph_free(g);
    if (rc == FC_OK && memcmp(s->got, s->want, sizeof s->want) != 0) {
        snprintf(c->first_error, sizeof c->first_error, "warm-up: the replay computed a wrong result");
        return FC_ERR_INTERNAL;
    }
    return rc;
}

fc_side *fc_side_open(int device, int config, fc_side_counts *c)
{
    memset(c, 0, sizeof *c);
    c->setup_failed = 1; /* until the end */
    if (!fc_side_config_name(config)) {
        snprintf(c->first_error, sizeof c->first_error, "unknown configuration %d", config);
        return NULL;
    }
    fc_side *s = (fc_side *)calloc(1, sizeof *s);
    if (!s) {
        snprintf(c->first_error, sizeof c->first_error, "out of host memory");
        return NULL;
    }
    s->config = config;
    fill_inputs(s);
    const char *step = config == FC_SIDE_ISOLATED ? "fc_cuda_init_device_isolated" : "fc_cuda_init_device";
    int rc = FC_ERR_INTERNAL;
    s->ctx = config == FC_SIDE_ISOLATED ? fc_cuda_init_device_isolated(device) : fc_cuda_init_device(device);
    if (s->ctx) {
        step = "fc_buffer_alloc_ctx";
        s->x = fc_buffer_alloc_ctx(s->ctx, N * sizeof(float));
        s->y = fc_buffer_alloc_ctx(s->ctx, N * sizeof(float));
        s->z = fc_buffer_alloc_ctx(s->ctx, N * sizeof(float));
        if (s->x && s->y && s->z)
            rc = warm_up(s, c, &step);
    }
    if (rc == FC_OK && fc_ctx_is_isolated(s->ctx) != (config == FC_SIDE_ISOLATED)) {
        snprintf(c->first_error, sizeof c->first_error, "fc_ctx_is_isolated does not match the configuration");
        rc = FC_ERR_INTERNAL;
    }
    int isolation = rc == FC_OK ? fc_ctx_isolation(s->ctx) : -1;
    if (rc == FC_OK && (config == FC_SIDE_ISOLATED) != (isolation == FC_ISOLATION_GREEN ||
                                                         isolation == FC_ISOLATION_PRIVATE)) {
        snprintf(c->first_error, sizeof c->first_error, "fc_ctx_isolation (%d) does not match the configuration",
                 isolation);
        rc = FC_ERR_INTERNAL;
    }
    if (rc == FC_OK && config == FC_SIDE_ISOLATED)
        fprintf(stderr, "[fc_side] the isolated context is a %s context\n",
                isolation == FC_ISOLATION_GREEN ? "green" : "private");
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
    double t0 = now_s();
    for (long long i = 0; i < iters; i++) {
        if (now_s() - t0 > max_seconds) {
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
        fc_graph *g = capture(s, max_tries, &rc, &tries, c);
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
        rc = fc_graph_launch(g);
        if (rc != FC_OK) {
            note(c, rc, "fc_graph_launch");
        } else {
            memset(s->got, 0xff, sizeof s->got);
            rc = fc_buffer_download(s->x, s->got, sizeof s->got);
            if (rc != FC_OK)
                note(c, rc, "fc_buffer_download");
        }
        fc_graph_free(g);
        if (rc != FC_OK) {
            c->failed++, c->failed_other++;
        } else if (memcmp(s->got, s->want, sizeof s->want) != 0) {
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
    char reason[256] = "";
    int pass = 1;
#define REQUIRE(cond, text)                                                                                           \
    do {                                                                                                              \
        if (pass && !(cond)) {                                                                                        \
            pass = 0;                                                                                                 \
            snprintf(reason, sizeof reason, "%s", text);                                                              \
        }                                                                                                             \
    } while (0)
    REQUIRE(fc_side_config_name(config) != NULL, "unknown configuration");
    REQUIRE(!fc->setup_failed, "fc setup failed");
    REQUIRE(fc->iters > 0, "no fc iteration ran");
    REQUIRE(f->iters > 0, "the foreign client ran no iteration");
    REQUIRE(fc->wrong == 0, "fc replays computed wrong results");
    REQUIRE(f->wrong == 0, "the foreign client computed wrong results");
    switch (config) {
    case FC_SIDE_PRIMARY_PLAIN:
        REQUIRE(fc->failed_invalidated > 0,
                "control: no primary capture was invalidated, so the foreign client never overlapped our captures "
                "and the other configurations prove nothing");
        break;
    case FC_SIDE_PRIMARY_RETRY:
        REQUIRE(fc->failed == 0, "unrecovered fc failures with fc_graph_capture_ctx");
        break;
    case FC_SIDE_ISOLATED:
        REQUIRE(fc->failed == 0, "fc failures on the isolated context");
        REQUIRE(f->failed == 0, "foreign failures beside the isolated context");
        break;
    default:
        break;
    }
#undef REQUIRE
    if (pass)
        snprintf(reason, sizeof reason, "required results hold");

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

    snprintf(line, len,
             "COEXIST client=%s config=%s verdict=%s fc_iters=%lld fc_ok=%lld fc_failed=%lld "
             "fc_failed_invalidated=%lld fc_failed_other=%lld fc_invalidated_recordings=%lld fc_retried=%lld "
             "fc_max_tries=%lld fc_tries=%s fc_wrong=%lld fc_seconds=%.2f fc_time_capped=%lld "
             "foreign_iters=%lld foreign_calls=%lld foreign_failed=%lld foreign_sync_failed=%lld "
             "foreign_alloc_failed=%lld foreign_capture_failed=%lld foreign_other_failed=%lld foreign_wrong=%lld "
             "reason=\"%s\"",
             client ? client : "?", fc_side_config_name(config) ? fc_side_config_name(config) : "?",
             pass ? "PASS" : "FAIL", fc->iters, fc->ok, fc->failed, fc->failed_invalidated, fc->failed_other,
             fc->invalidated_recordings, fc->retried, fc->max_tries, hist, fc->wrong, fc->seconds, fc->time_capped,
             f->iters, f->calls, f->failed, f->sync_failed, f->alloc_failed, f->capture_failed, f->other_failed,
             f->wrong, reason);
    return pass;
}

void fc_side_report_errors(const char *client, int config, const fc_side_counts *fc, const fc_side_foreign *f,
                           char *line, size_t len)
{
    char a[FC_SIDE_MSG], b[FC_SIDE_MSG];
    sanitize(a, sizeof a, fc->first_error[0] ? fc->first_error : "none");
    sanitize(b, sizeof b, f->first_error[0] ? f->first_error : "none");
    snprintf(line, len, "COEXIST-ERRORS client=%s config=%s fc_first_error=\"%s\" foreign_first_error=\"%s\"",
             client ? client : "?", fc_side_config_name(config) ? fc_side_config_name(config) : "?", a, b);
}
