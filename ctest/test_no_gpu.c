/* test_no_gpu.c - the bad-input checks that need no GPU, so CI runs them:
 * every export with NULL and forged handles, and with a live handle of
 * another kind (token buckets need no GPU); bad device ordinals; token
 * buckets (sizes, double free, use after free); the cache configuration;
 * recording modes and foreign sections (bad modes, outputs and functions
 * untouched by refused calls, the handle checked before anything else);
 * the per-thread error slot (fc_last_error, _code, _copy,
 * fc_clear_last_error).
 * It never skips: with or without a driver every case runs (a few cases
 * depend on which, and say so).
 *
 * Each checked expectation is one case; the last lines give their count.
 */
#include "exports.h"

#include <limits.h>
#include <pthread.h>

static int g_have_driver; /* fc_cuda_device_count() > 0 */

/* Values that are not handles of this library. */
static const struct {
    const char *what;
    uintptr_t value;
} forged_values[] = {
    {"an address of static data", 0}, /* filled in by main: &forged_target */
    {"a heap address", 0},            /* filled in by main */
    {"1", 1},
    {"0x1000", 0x1000},
    {"SIZE_MAX", (uintptr_t)SIZE_MAX},
};
static uintptr_t forged[sizeof forged_values / sizeof forged_values[0]];
static double forged_target[4];

static void setup_handles(ct_handles *h, void *value, void **args)
{
    static uint64_t p;
    static float s;
    static uint32_t n;
    memset(h, 0, sizeof *h);
    for (int i = 0; i < CT_SLOTS; i++) h->slot[i] = value;
    args[0] = &p;
    args[1] = &s;
    args[2] = &n;
    h->args = args;
    h->nargs = 3;
}

/* Every export that takes handles, with each of them NULL: an invalid
 * argument naming a NULL parameter; the *_free functions do nothing. */
static void sweep_null(fc_cuda_ctx *unused)
{
    (void)unused;
    for (size_t e = 0; e < CT_EXPORT_COUNT; e++) {
        const ct_export *x = &ct_exports[e];
        if (ct_export_nparams(x) == 0) continue;
        ct_handles h;
        void *args[3];
        setup_handles(&h, NULL, args);
        char name[96];
        snprintf(name, sizeof name, "%s(NULL)", x->name);
        if (ct_is_free(x))
            EXPECT(name, ct_call_export(e, &h), FC_OK, NULL);
        else
            EXPECT(name, ct_call_export(e, &h), FC_ERR_INVALID_ARGUMENT, "is NULL");
    }
}

/* Every export that takes handles, each handle `value` (named `label` in
 * case names): refused with FC_ERR_INVALID_HANDLE, its message holding
 * `msg`; nothing runs, nothing is freed. */
static void expect_refused_everywhere(uintptr_t value, const char *label, const char *msg)
{
    for (size_t e = 0; e < CT_EXPORT_COUNT; e++) {
        const ct_export *x = &ct_exports[e];
        if (ct_export_nparams(x) == 0) continue;
        ct_handles h;
        void *args[3];
        setup_handles(&h, (void *)value, args);
        char name[128];
        snprintf(name, sizeof name, "%s(%s)", x->name, label);
        EXPECT(name, ct_call_export(e, &h), FC_ERR_INVALID_HANDLE, msg);
    }
}

/* Forged values: "not a handle made by this library". */
static void sweep_forged(fc_cuda_ctx *unused)
{
    (void)unused;
    for (size_t v = 0; v < CT_COUNT(forged_values); v++)
        expect_refused_everywhere(forged[v], forged_values[v].what, "not a handle made by this library");
}

/* A small odd number is shaped like a handle (kind tags are odd): still
 * refused, whatever kind it looks like. */
static void sweep_handle_shaped(fc_cuda_ctx *unused)
{
    (void)unused;
    static const uintptr_t shaped[] = {0xC1, 0xC3, 0xC5, 0xC7, 0xC9, 0x1FFFFFC1};
    for (size_t v = 0; v < CT_COUNT(shaped); v++) {
        char label[32];
        snprintf(label, sizeof label, "%#lx", (unsigned long)shaped[v]);
        expect_refused_everywhere(shaped[v], label, "handle");
    }
}

/* A live fc_buckets handle given for every other kind of handle: refused
 * as the wrong kind, and not freed by the *_free functions. */
static void sweep_other_kind(fc_cuda_ctx *unused)
{
    (void)unused;
    fc_buckets *live = fc_buckets_ladder(64);
    EXPECT_TRUE("make a bucket list", live != NULL, "%s", fc_last_error());
    if (!live) return;
    for (size_t e = 0; e < CT_EXPORT_COUNT; e++) {
        const ct_export *x = &ct_exports[e];
        int n = ct_export_nparams(x), takes_buckets = 0;
        for (int p = 0; p < n; p++) takes_buckets |= x->params[p].slot == CT_S_BUCKETS;
        if (n == 0 || takes_buckets) continue;
        ct_handles h;
        void *args[3];
        setup_handles(&h, live, args);
        char name[128];
        snprintf(name, sizeof name, "%s(an fc_buckets handle)", x->name);
        EXPECT(name, ct_call_export(e, &h), FC_ERR_INVALID_HANDLE, "is an fc_buckets handle, not an");
    }
    EXPECT("the bucket list survived (1, 2, 4, 8, 16, 32, 48, 64)", ST_VALUE(fc_buckets_count(live) == 8), FC_OK, NULL);
    fc_buckets_free(live);
}

/* Token buckets: sizes, lookups, double free and use after free. */
static void buckets(fc_cuda_ctx *unused)
{
    (void)unused;
    const char *kw_max = "max_tokens";
    EXPECT("ladder(0)", ST_NEW(fc_buckets_ladder(0)), FC_ERR_INVALID_ARGUMENT, kw_max);
    EXPECT("ladder(SIZE_MAX)", ST_NEW(fc_buckets_ladder(SIZE_MAX)), FC_ERR_INVALID_ARGUMENT, "largest ladder");
    EXPECT("ladder(SIZE_MAX - 256)", ST_NEW(fc_buckets_ladder(SIZE_MAX - 256)), FC_ERR_INVALID_ARGUMENT,
           "largest ladder");
    EXPECT("ladder(2^24 + 1)", ST_NEW(fc_buckets_ladder(((size_t)1 << 24) + 1)), FC_ERR_INVALID_ARGUMENT,
           "largest ladder");
    EXPECT("from_list(NULL, 3)", ST_NEW(fc_buckets_from_list(NULL, 3, 64)), FC_ERR_INVALID_ARGUMENT,
           "sizes is NULL");
    size_t one = 8;
    EXPECT("from_list(count SIZE_MAX)", ST_NEW(fc_buckets_from_list(&one, SIZE_MAX, 64)), FC_ERR_INVALID_ARGUMENT,
           "larger than any array");
    EXPECT("from_list(max_tokens 0)", ST_NEW(fc_buckets_from_list(&one, 1, 0)), FC_ERR_INVALID_ARGUMENT, kw_max);

    fc_buckets *b = fc_buckets_ladder(2048);
    EXPECT_TRUE("ladder(2048)", b != NULL, "%s", fc_last_error());
    if (!b) return;
    EXPECT("ladder(2048) has 39 buckets", ST_VALUE(fc_buckets_count(b) == 39), FC_OK, NULL);
    EXPECT("bucket 20 is 288", ST_VALUE(fc_buckets_get(b, 20) == 288), FC_OK, NULL);
    EXPECT("for(257) is 288", ST_VALUE(fc_buckets_for(b, 257) == 288), FC_OK, NULL);
    EXPECT("for(2048) is 2048", ST_VALUE(fc_buckets_for(b, 2048) == 2048), FC_OK, NULL);
    EXPECT("get(39)", ST_VALUE(fc_buckets_get(b, 39) == 0), FC_ERR_INVALID_ARGUMENT, "out of range");
    EXPECT("get(SIZE_MAX)", ST_VALUE(fc_buckets_get(b, SIZE_MAX) == 0), FC_ERR_INVALID_ARGUMENT, "out of range");
    EXPECT("for(0)", ST_VALUE(fc_buckets_for(b, 0) == 0), FC_ERR_INVALID_ARGUMENT, "outside the bucket range");
    EXPECT("for(2049)", ST_VALUE(fc_buckets_for(b, 2049) == 0), FC_ERR_INVALID_ARGUMENT, "outside the bucket range");
    EXPECT("for(SIZE_MAX)", ST_VALUE(fc_buckets_for(b, SIZE_MAX) == 0), FC_ERR_INVALID_ARGUMENT,
           "outside the bucket range");
    EXPECT("free", ST_VOID(fc_buckets_free(b)), FC_OK, NULL);
    EXPECT("double free", ST_VOID(fc_buckets_free(b)), FC_ERR_INVALID_HANDLE, "already freed");
    EXPECT("use after free", ST_VALUE(fc_buckets_count(b) == 0), FC_ERR_INVALID_HANDLE, "already freed");
    /* The freed slot is reused by the next list: the stale handle stays dead. */
    fc_buckets *again = fc_buckets_ladder(16);
    EXPECT("stale handle after reuse", ST_VALUE(fc_buckets_for(b, 1) == 0), FC_ERR_INVALID_HANDLE, "already freed");
    EXPECT("stale free after reuse", ST_VOID(fc_buckets_free(b)), FC_ERR_INVALID_HANDLE, "already freed");
    EXPECT("the new list lives", ST_VALUE(fc_buckets_count(again) == 5), FC_OK, NULL);
    fc_buckets_free(again);
}

/* The graph cache's configuration (the cache itself needs a context). */
static void cache_config(fc_cuda_ctx *unused)
{
    (void)unused;
    fc_graph_cache_config c;
    memset(&c, 0xff, sizeof c);
    EXPECT("config_default(NULL)", ST_VOID(fc_graph_cache_config_default(NULL)), FC_ERR_INVALID_ARGUMENT,
           "cfg is NULL");
    EXPECT("config_default", ST_VOID(fc_graph_cache_config_default(&c)), FC_OK, NULL);
    EXPECT_TRUE("the documented defaults",
                c.max_entries == 256 && c.max_bytes == 0 && c.warmup == 0 && c.max_tries == 3 &&
                    c.fail_threshold == 3 && c.backoff_ms == 100 && c.max_backoff_ms == 10000 &&
                    c.mode == FC_CAPTURE_MODE_THREAD_LOCAL,
                "entries %zu, bytes %zu, warmup %d, tries %d, threshold %d, backoff %u..%u, mode %d", c.max_entries,
                c.max_bytes, c.warmup, c.max_tries, c.fail_threshold, c.backoff_ms, c.max_backoff_ms, c.mode);
    EXPECT("new(NULL ctx, defaults)", ST_NEW(fc_graph_cache_new(NULL, &c)), FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
}

/* A foreign function that counts its calls (none expected here). */
static int counting_foreign(void *stream, void *user)
{
    (void)stream;
    (*(int *)user)++;
    return 0;
}

/* Recording modes, foreign sections and the extended update without a
 * context: the handle is checked first (a bad mode does not hide it), a
 * refused call writes no output and calls no function. */
static void recording_modes(fc_cuda_ctx *unused)
{
    (void)unused;
    fc_cuda_ctx *forged_ctx = (fc_cuda_ctx *)forged[0];
    const int tl = FC_CAPTURE_MODE_THREAD_LOCAL;
    EXPECT_TRUE("FC_RECORDING_AUTO, _BUILD, _CAPTURE are 0, 1, 2",
                FC_RECORDING_AUTO == 0 && FC_RECORDING_BUILD == 1 && FC_RECORDING_CAPTURE == 2, "%d %d %d",
                FC_RECORDING_AUTO, FC_RECORDING_BUILD, FC_RECORDING_CAPTURE);
    EXPECT("set_recording_mode(NULL, BUILD)", fc_ctx_set_recording_mode(NULL, FC_RECORDING_BUILD),
           FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT("set_recording_mode(NULL, 3): the handle first", fc_ctx_set_recording_mode(NULL, 3),
           FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT("set_recording_mode(forged, -1): the handle first", fc_ctx_set_recording_mode(forged_ctx, -1),
           FC_ERR_INVALID_HANDLE, "not a handle made by this library");
    EXPECT("recording_mode(NULL) is -1", ST_VALUE(fc_ctx_recording_mode(NULL) == -1), FC_ERR_INVALID_ARGUMENT,
           "ctx is NULL");
    EXPECT("recording_mode(forged) is -1", ST_VALUE(fc_ctx_recording_mode(forged_ctx) == -1),
           FC_ERR_INVALID_HANDLE, "not a handle made by this library");
    EXPECT("builds(NULL) is -1", ST_VALUE(fc_graph_builds_ctx(NULL) == -1), FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT("builds(forged) is -1", ST_VALUE(fc_graph_builds_ctx(forged_ctx) == -1), FC_ERR_INVALID_HANDLE,
           "not a handle made by this library");

    void *stream = CT_UNWRITTEN;
    EXPECT("foreign_begin(NULL, THREAD_LOCAL, &stream)", fc_graph_foreign_begin_ctx(NULL, tl, &stream),
           FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT("foreign_begin(forged, 9, &stream): the handle first", fc_graph_foreign_begin_ctx(forged_ctx, 9, &stream),
           FC_ERR_INVALID_HANDLE, "not a handle made by this library");
    EXPECT_TRUE("refused begins write no stream", stream == CT_UNWRITTEN, "stream_out = %p", stream);
    EXPECT("foreign_begin(NULL, THREAD_LOCAL, NULL)", fc_graph_foreign_begin_ctx(NULL, tl, NULL),
           FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT("foreign_end(NULL)", fc_graph_foreign_end_ctx(NULL), FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT("foreign_end(forged)", fc_graph_foreign_end_ctx(forged_ctx), FC_ERR_INVALID_HANDLE,
           "not a handle made by this library");

    int calls = 0;
    EXPECT("record_foreign(NULL, ..., fn)", fc_graph_record_foreign_ctx(NULL, tl, counting_foreign, &calls),
           FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT("record_foreign(forged, -1, fn)", fc_graph_record_foreign_ctx(forged_ctx, -1, counting_foreign, &calls),
           FC_ERR_INVALID_HANDLE, "not a handle made by this library");
    EXPECT("record_foreign(NULL, ..., NULL fn): the handle first", fc_graph_record_foreign_ctx(NULL, tl, NULL, NULL),
           FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT_TRUE("refused sections call no function", calls == 0, "called %d times", calls);

    int updated = -7, instantiated = -7, node_calls = -7;
    EXPECT("end_update_ex(NULL, NULL, outs)",
           fc_graph_end_update_ex_ctx(NULL, NULL, &updated, &instantiated, &node_calls), FC_ERR_INVALID_ARGUMENT,
           "ctx is NULL");
    EXPECT("end_update_ex(forged, forged, outs)",
           fc_graph_end_update_ex_ctx(forged_ctx, (fc_graph *)forged[1], &updated, &instantiated, &node_calls),
           FC_ERR_INVALID_HANDLE, "ctx (0x");
    EXPECT_TRUE("refused updates write no output", updated == -7 && instantiated == -7 && node_calls == -7,
                "updated %d, instantiated %d, node_calls %d", updated, instantiated, node_calls);
    EXPECT("end_update_ex(NULL, NULL, NULL outs)", fc_graph_end_update_ex_ctx(NULL, NULL, NULL, NULL, NULL),
           FC_ERR_INVALID_ARGUMENT, "ctx is NULL");
}

static void devices(fc_cuda_ctx *unused)
{
    (void)unused;
    EXPECT("fc_cuda_init_device(-1)", ST_NEW(fc_cuda_init_device(-1)), FC_ERR_INVALID_ARGUMENT, "negative");
    EXPECT("fc_cuda_init_device(INT_MIN)", ST_NEW(fc_cuda_init_device(INT_MIN)), FC_ERR_INVALID_ARGUMENT,
           "negative");
    EXPECT("fc_cuda_init_device_isolated(-1)", ST_NEW(fc_cuda_init_device_isolated(-1)), FC_ERR_INVALID_ARGUMENT,
           "negative");
    EXPECT("fc_device_supports_pdl(-1)", ST_VALUE(fc_device_supports_pdl(-1) == -1), FC_ERR_INVALID_ARGUMENT,
           "negative");
    EXPECT("fc_cuda_init_device_isolated_as(0, FC_ISOLATION_NONE)",
           ST_NEW(fc_cuda_init_device_isolated_as(0, FC_ISOLATION_NONE)), FC_ERR_INVALID_ARGUMENT,
           "neither FC_ISOLATION_GREEN");
    EXPECT("fc_cuda_init_device_isolated_as(0, 77)", ST_NEW(fc_cuda_init_device_isolated_as(0, 77)),
           FC_ERR_INVALID_ARGUMENT, "neither FC_ISOLATION_GREEN");
    EXPECT("fc_cuda_init_device_isolated_as(-1, FC_ISOLATION_PRIVATE)",
           ST_NEW(fc_cuda_init_device_isolated_as(-1, FC_ISOLATION_PRIVATE)), FC_ERR_INVALID_ARGUMENT, "negative");
    if (g_have_driver) {
        EXPECT("fc_cuda_init_device(INT_MAX)", ST_NEW(fc_cuda_init_device(INT_MAX)), FC_ERR_INVALID_ARGUMENT,
               "does not exist");
        EXPECT("fc_cuda_init_device_isolated(INT_MAX)", ST_NEW(fc_cuda_init_device_isolated(INT_MAX)),
               FC_ERR_INVALID_ARGUMENT, "does not exist");
        EXPECT("fc_device_supports_pdl(INT_MAX)", ST_VALUE(fc_device_supports_pdl(INT_MAX) == -1),
               FC_ERR_INVALID_ARGUMENT, "does not exist");
    } else {
        EXPECT("fc_cuda_init_device(0) without a driver", ST_NEW(fc_cuda_init_device(0)), FC_ERR_NO_DRIVER,
               "no usable CUDA driver");
        EXPECT("fc_cuda_init_device_isolated(0) without a driver", ST_NEW(fc_cuda_init_device_isolated(0)),
               FC_ERR_NO_DRIVER, "no usable CUDA driver");
        EXPECT("fc_cuda_init_device_isolated_as(0, FC_ISOLATION_PRIVATE) without a driver",
               ST_NEW(fc_cuda_init_device_isolated_as(0, FC_ISOLATION_PRIVATE)), FC_ERR_NO_DRIVER,
               "no usable CUDA driver");
        EXPECT("fc_cuda_device_count() without a driver", ST_VALUE(fc_cuda_device_count() == 0), FC_ERR_NO_DRIVER,
               "no usable CUDA driver");
        EXPECT("fc_device_supports_pdl(0) without a driver", ST_VALUE(fc_device_supports_pdl(0) == -1),
               FC_ERR_NO_DRIVER, "no usable CUDA driver");
    }
    const char *v = fc_version();
    int major = -1, minor = -1, patch = -1;
    EXPECT_TRUE("fc_version() is x.y.z", v && sscanf(v, "%d.%d.%d", &major, &minor, &patch) == 3 && major >= 0,
                "fc_version() = \"%s\"", v ? v : "(null)");
}

/* fc_last_error_copy copies like snprintf: full length returned, output cut
 * and NUL-terminated; NULL with 0 only asks for the length. */
static void error_copy(fc_cuda_ctx *unused)
{
    (void)unused;
    char full[512], buf[512];
    memset(buf, 'x', sizeof buf);
    fc_clear_last_error();
    (void)fc_sync_ctx(NULL);
    const char *p = fc_last_error();
    snprintf(full, sizeof full, "%s", p);
    size_t len = strlen(full);
    EXPECT_TRUE("message of fc_sync_ctx(NULL)", strcmp(full, "invalid argument: ctx is NULL") == 0,
                "message \"%s\"", full);
    EXPECT_TRUE("copy(NULL, 0) returns the length", fc_last_error_copy(NULL, 0) == len, "returned %zu, want %zu",
                fc_last_error_copy(NULL, 0), len);
    buf[0] = 'x';
    EXPECT_TRUE("copy(buf, 0) writes nothing", fc_last_error_copy(buf, 0) == len && buf[0] == 'x',
                "buf[0] = %d", buf[0]);
    EXPECT_TRUE("copy(buf, 1) writes an empty string", fc_last_error_copy(buf, 1) == len && buf[0] == 0 &&
                                                                buf[1] == 'x',
                "buf = \"%.8s\"", buf);
    memset(buf, 'x', sizeof buf);
    EXPECT_TRUE("copy(buf, len) cuts the last byte",
                fc_last_error_copy(buf, len) == len && strncmp(buf, full, len - 1) == 0 && buf[len - 1] == 0 &&
                    buf[len] == 'x',
                "buf = \"%s\"", buf);
    memset(buf, 'x', sizeof buf);
    EXPECT_TRUE("copy(buf, len + 1) copies all", fc_last_error_copy(buf, len + 1) == len && strcmp(buf, full) == 0,
                "buf = \"%s\"", buf);
    EXPECT_TRUE("copies leave the code alone", fc_last_error_code() == FC_ERR_INVALID_ARGUMENT,
                "code %d after copies", fc_last_error_code());
    EXPECT_TRUE("fc_last_error() pointer is stable", fc_last_error() == p, "pointer moved");
    (void)fc_graph_launch((fc_graph *)forged[0]);
    EXPECT_TRUE("the stable pointer shows the newest message", strstr(p, "graph (0x") != NULL,
                "old pointer reads \"%s\"", p);
    fc_clear_last_error();
    EXPECT_TRUE("fc_clear_last_error resets code and message", fc_last_error_code() == FC_OK && p[0] == 0 &&
                                                                   fc_last_error_copy(buf, sizeof buf) == 0 &&
                                                                   buf[0] == 0,
                "code %d, message \"%s\"", fc_last_error_code(), p);
}

/* Successes do not clear the slot; NULL frees are successes. */
static void successes_keep_the_error(fc_cuda_ctx *unused)
{
    (void)unused;
    char saved[256];
    fc_clear_last_error();
    (void)fc_buffer_download(NULL, saved, 4);
    snprintf(saved, sizeof saved, "%s", fc_last_error());
    fc_buffer_free(NULL);
    fc_graph_free(NULL);
    fc_cuda_ctx_free(NULL);
    fc_module_free(NULL);
    fc_kernel_free(NULL);
    (void)fc_version();
    EXPECT_TRUE("NULL frees keep the last error",
                fc_last_error_code() == FC_ERR_INVALID_ARGUMENT && strcmp(fc_last_error(), saved) == 0,
                "code %d, message \"%s\" (was \"%s\")", fc_last_error_code(), fc_last_error(), saved);
}

typedef struct {
    int code_before;
    char msg_before[128];
    int code_after;
    char msg_after[256];
} probe;

static void *probe_thread(void *arg)
{
    probe *p = (probe *)arg;
    p->code_before = fc_last_error_code();
    (void)fc_last_error_copy(p->msg_before, sizeof p->msg_before);
    fc_buffer_free((fc_buffer *)forged[0]);
    p->code_after = fc_last_error_code();
    (void)fc_last_error_copy(p->msg_after, sizeof p->msg_after);
    return NULL;
}

/* The slot is per thread. */
static void per_thread(fc_cuda_ctx *unused)
{
    (void)unused;
    probe pr;
    pthread_t th;
    memset(&pr, 0, sizeof pr);
    fc_clear_last_error();
    (void)fc_graph_begin_ctx(NULL);
    int rc = pthread_create(&th, NULL, probe_thread, &pr);
    EXPECT_TRUE("pthread_create", rc == 0, "rc %d", rc);
    if (rc != 0) return;
    pthread_join(th, NULL);
    EXPECT_TRUE("a new thread starts with no error", pr.code_before == FC_OK && pr.msg_before[0] == 0,
                "code %d, message \"%s\"", pr.code_before, pr.msg_before);
    EXPECT_TRUE("the thread records its own error",
                pr.code_after == FC_ERR_INVALID_HANDLE && strstr(pr.msg_after, "buf (0x") != NULL,
                "code %d, message \"%s\"", pr.code_after, pr.msg_after);
    EXPECT_TRUE("this thread's error is untouched",
                fc_last_error_code() == FC_ERR_INVALID_ARGUMENT && strstr(fc_last_error(), "ctx is NULL"),
                "code %d, message \"%s\"", fc_last_error_code(), fc_last_error());
}

static const ct_case_def cases[] = {
    CT_CASE(sweep_null),   CT_CASE(sweep_forged), CT_CASE(sweep_handle_shaped),      CT_CASE(sweep_other_kind),
    CT_CASE(buckets),      CT_CASE(cache_config), CT_CASE(recording_modes),          CT_CASE(devices),
    CT_CASE(error_copy),   CT_CASE(successes_keep_the_error),                        CT_CASE(per_thread),
};

int main(int argc, char **argv)
{
    (void)argc;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *slash = strrchr(argv[0], '/');
    ct_prog = slash ? slash + 1 : argv[0];
    void *heap = malloc(64);
    forged[0] = (uintptr_t)&forged_target[0];
    forged[1] = (uintptr_t)heap;
    for (size_t i = 2; i < CT_COUNT(forged_values); i++) forged[i] = forged_values[i].value;

    g_have_driver = fc_cuda_device_count() > 0;
    printf("%s: libfcgraph %s, %s (%d CUDA device(s)); %zu exports in the sweep table\n", ct_prog, fc_version(),
           g_have_driver ? "driver present" : "no usable driver", fc_cuda_device_count(), CT_EXPORT_COUNT);
    for (size_t i = 0; i < CT_COUNT(cases); i++) {
        ct_case = cases[i].name;
        ct_case_failed = 0;
        cases[i].fn(NULL);
        if (ct_case_failed) {
            ct_failed++;
        } else {
            printf("[PASS] %s/%s\n", ct_prog, cases[i].name);
            ct_passed++;
        }
    }
    free(heap);
    ct_matrix_summary("no-GPU matrix");
    return ct_finish();
}
