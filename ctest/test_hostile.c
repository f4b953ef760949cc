/* test_hostile.c - the bad-input matrix over every export (GPU).
 *
 * Every case makes one bad call (or a short bad sequence) and checks:
 *   1. the exact status (expect.h: what a status is for each return type);
 *   2. fc_last_error_code() is that status and fc_last_error() names the
 *      problem (keywords, and for handles the parameter's name);
 *   3. afterwards every context of the fixture is still usable: not
 *      capturing, and a follow-up add + download gives 1.5 + 2 = 3.5.
 * Table rows run twice where it makes sense: with the primary context idle
 * and while it captures; in the capturing run the capture must survive the
 * refused call (the runner then records an add into it, ends it and checks
 * the replay), unless the row says the call ends it.
 *
 * Groups:
 *   handle_sweep   every export x every handle parameter x {NULL, freed,
 *                  other kind, forged} (exports.h);
 *   sizes, copies, fills, elementwise, ptx, launches, modes, order,
 *   wrong_kinds, null_outputs, lanes_and_conditionals
 *                  table rows: zero/huge/overflowing sizes, wrong device
 *                  (two GPUs) and wrong context (isolated vs primary), garbage
 *                  PTX, wrong kernel arguments and launch dimensions, out of
 *                  memory, capture calls in the wrong order, handles of the
 *                  wrong kind (a buffer as a graph...), the output pointers that
 *                  may be NULL, lanes out of range or
 *                  of another context, recordings ended or split on a lane
 *                  handle, bad condition buffers;
 *   scenarios      capture rules inside break and record functions (what a
 *                  break may call and what it may not), calls from other
 *                  threads during a capture, stale handles after slot reuse,
 *                  a dead context handle inside a break and the objects of a
 *                  freed context, a graph and a context freed inside their
 *                  own break functions, foreign sections in the wrong order, on
 *                  other threads, around breaks and failing functions, in
 *                  each recording mode, conditionals nested too deep, a lane
 *                  left unjoined in a recording that captures, a graph
 *                  cache's record function ending or splitting the cache's
 *                  recording, a cache whose context handle was freed.
 * docs/bad-input.md names these cases, class by class.
 * The last lines print the number of cases.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "exports.h"

#include <limits.h>
#include <pthread.h>

#define N 256                      /* floats in a fixture buffer */
#define BIG_BYTES ((size_t)2 << 20) /* one 2 MiB allocation (for wrap) */

/* ---- the fixture ------------------------------------------------------------ */

/* A context with a full set of live handles: a = 1.5, b = 2.0, out scratch,
 * big (2 MiB), a module with its scale_f32 kernel and valid arguments for
 * it (out, 1.0, N: harmless), and a graph of out = a + b. */
typedef struct {
    const char *name;
    fc_cuda_ctx *ctx;
    fc_buffer *a, *b, *out, *big;
    fc_module *module;
    fc_kernel *kernel;
    fc_graph *graph;
    fc_graph_cache *cache; /* one key (1) captured: out = a + b */
    fc_cuda_ctx *lane1;    /* a handle of lane 1 of ctx */
    fc_cuda_ctx *lane0;    /* a second handle of lane 0 (fc_ctx_lane(ctx, 0)) */
    uint64_t kx;
    float ks;
    uint32_t kn;
    void *args[3];
} ctx_set;

static struct {
    ctx_set p0;  /* primary context of device 0: the target of most rows */
    ctx_set p0b; /* a second fc context on device 0's primary context (shares memory with p0) */
    ctx_set iso; /* an isolated context of device 0 */
    ctx_set d1;  /* device 1 (has_d1) */
    int has_d1;
    fc_buckets *buckets; /* the ladder up to 2048 */
    fc_buffer *odd;      /* 16 bytes of p0.big at offset 1: not 4-byte aligned */
    fc_buffer *tiny;     /* 2 bytes of p0 */
    struct {
        fc_cuda_ctx *ctx;
        fc_buffer *buf;
        fc_graph *graph;
        fc_module *module;
        fc_kernel *kernel;
        fc_graph_cache *cache;
        fc_buckets *buckets;
    } dead; /* freed handles of every kind */
} F;

#define P0 F.p0
#define P0B F.p0b
#define ISO F.iso
#define D1 F.d1

static float host_a[N], host_b[N], host_poison[N];
static unsigned char host_big[4 * N + 64];
static double forged_target;

/* The work of each set's cache key 1: out = a + b. */
static int set_record_add(fc_cuda_ctx *ctx, void *user)
{
    const ctx_set *s = (const ctx_set *)user;
    return fc_add_ctx(ctx, s->a, s->b, s->out, N);
}

static int set_make(ctx_set *s, const char *name, fc_cuda_ctx *ctx)
{
    s->name = name;
    s->ctx = ctx;
    if (!ctx) return 0;
    if (!(s->a = ct_upload_new(ctx, host_a, N)) || !(s->b = ct_upload_new(ctx, host_b, N)) ||
        !(s->out = ct_upload_new(ctx, host_poison, N)) || !(s->big = fc_buffer_alloc_ctx(ctx, BIG_BYTES)))
        return 0;
    if (!(s->module = fc_module_load_ptx(ctx, USER_PTX)) || !(s->kernel = fc_module_get_kernel(s->module, "scale_f32")))
        return 0;
    s->kx = fc_buffer_device_ptr(s->out);
    s->ks = 1.0f;
    s->kn = N;
    s->args[0] = &s->kx;
    s->args[1] = &s->ks;
    s->args[2] = &s->kn;
    if (!(s->lane1 = fc_ctx_lane(ctx, 1)) || !(s->lane0 = fc_ctx_lane(ctx, 0))) return 0;
    if (fc_graph_begin_ctx(ctx) != FC_OK || fc_add_ctx(ctx, s->a, s->b, s->out, N) != FC_OK) return 0;
    if (!(s->graph = fc_graph_end_ctx(ctx))) return 0;
    int outcome = -1;
    if (!(s->cache = fc_graph_cache_new(ctx, NULL)) ||
        fc_graph_cache_run(s->cache, 1, set_record_add, s, NULL, &outcome) != FC_OK || outcome != FC_CACHE_CAPTURED)
        return 0;
    return fc_sync_ctx(ctx) == FC_OK;
}

static void set_free(ctx_set *s)
{
    fc_graph_cache_free(s->cache);
    fc_graph_free(s->graph);
    fc_kernel_free(s->kernel);
    fc_module_free(s->module);
    CT_FREE_BUFFERS(s->a, s->b, s->out, s->big);
    fc_cuda_ctx_free(s->lane0);
    fc_cuda_ctx_free(s->lane1);
    fc_cuda_ctx_free(s->ctx);
    memset(s, 0, sizeof *s);
}

/* Whether the set is still usable: not capturing, every handle alive, and
 * out = a + b computes 3.5. Says why not in `why`. */
static int set_usable(ctx_set *s, char *why, size_t len)
{
    float got[N];
    if (!s->ctx) return 1;
    if (fc_graph_is_capturing_ctx(s->ctx) != 0) {
        snprintf(why, len, "%s: the context is still capturing", s->name);
        return 0;
    }
    if (fc_buffer_size(s->a) != N * sizeof(float) || fc_buffer_size(s->big) != BIG_BYTES ||
        fc_kernel_param_count(s->kernel) != 3 || fc_graph_segment_count(s->graph) != 1 ||
        fc_graph_cache_node_count(s->cache, 1) != 1 || fc_buckets_count(F.buckets) != 39) {
        snprintf(why, len, "%s: a fixture handle died: %s", s->name, fc_last_error());
        return 0;
    }
    if (fc_buffer_upload(s->out, host_poison, sizeof host_poison) != FC_OK ||
        fc_add_ctx(s->ctx, s->a, s->b, s->out, N) != FC_OK || fc_sync_ctx(s->ctx) != FC_OK ||
        fc_buffer_download(s->out, got, sizeof got) != FC_OK) {
        snprintf(why, len, "%s: add + download failed: code %d: %s", s->name, fc_last_error_code(), fc_last_error());
        return 0;
    }
    for (int i = 0; i < N; i++) {
        if (got[i] != 3.5f) {
            snprintf(why, len, "%s: add gave out[%d] = %g, want 3.5", s->name, i, (double)got[i]);
            return 0;
        }
    }
    return 1;
}

static int all_usable(char *why, size_t len)
{
    return set_usable(&P0, why, len) && set_usable(&P0B, why, len) && set_usable(&ISO, why, len) &&
           set_usable(&D1, why, len);
}

static int fixture_make(void)
{
    ct_fill_value(host_a, N, 1.5f);
    ct_fill_value(host_b, N, 2.0f);
    ct_fill_poison(host_poison, N);
    F.has_d1 = fc_cuda_device_count() >= 2;
    if (!set_make(&P0, "p0 (primary, device 0)", fc_cuda_init_device(0)) ||
        !set_make(&P0B, "p0b (second primary context, device 0)", fc_cuda_init_device(0)) ||
        !set_make(&ISO, "iso (isolated, device 0)", fc_cuda_init_device_isolated(0)) ||
        (F.has_d1 && !set_make(&D1, "d1 (primary, device 1)", fc_cuda_init_device(1)))) {
        printf("[FAIL] %s: fixture: code %d: %s\n", ct_prog, fc_last_error_code(), fc_last_error());
        return 0;
    }
    /* One freed handle of every kind. */
    F.dead.ctx = fc_cuda_init_device(0);
    F.dead.buf = fc_buffer_alloc_ctx(P0.ctx, 64);
    F.dead.module = fc_module_load_ptx(P0.ctx, USER_PTX);
    F.dead.kernel = fc_module_get_kernel(P0.module, "axpy_f32");
    if (fc_graph_begin_ctx(P0.ctx) == FC_OK && fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N) == FC_OK)
        F.dead.graph = fc_graph_end_ctx(P0.ctx);
    F.dead.cache = fc_graph_cache_new(P0.ctx, NULL);
    F.dead.buckets = fc_buckets_ladder(64);
    F.buckets = fc_buckets_ladder(2048);
    F.odd = fc_buffer_wrap_ctx(P0.ctx, fc_buffer_device_ptr(P0.big) + 1, 16);
    F.tiny = fc_buffer_alloc_ctx(P0.ctx, 2);
    if (!F.odd || !F.tiny) {
        printf("[FAIL] %s: fixture (odd and tiny buffers): %s\n", ct_prog, fc_last_error());
        return 0;
    }
    if (!F.dead.ctx || !F.dead.buf || !F.dead.module || !F.dead.kernel || !F.dead.graph || !F.dead.cache ||
        !F.dead.buckets || !F.buckets) {
        printf("[FAIL] %s: fixture (dead handles): %s\n", ct_prog, fc_last_error());
        return 0;
    }
    fc_cuda_ctx_free(F.dead.ctx);
    fc_buffer_free(F.dead.buf);
    fc_module_free(F.dead.module);
    fc_kernel_free(F.dead.kernel);
    fc_graph_free(F.dead.graph);
    fc_graph_cache_free(F.dead.cache);
    fc_buckets_free(F.dead.buckets);
    char why[512];
    if (!all_usable(why, sizeof why)) {
        printf("[FAIL] %s: fixture unusable from the start: %s\n", ct_prog, why);
        return 0;
    }
    return 1;
}

/* ---- running a call idle and while capturing ----------------------------------- */

enum {
    W_IDLE = 1,       /* run with p0 idle */
    W_CAPTURING = 2,  /* run while p0 captures (THREAD_LOCAL) */
    W_BOTH = 3,
    W_ENDS = 4,       /* in the capturing run, the call ends p0's capture */
    W_D1 = 8,         /* needs device 1 */
    W_PRIV = 16,      /* needs iso to be a private context (skipped where it is green) */
    W_GREEN = 32,     /* needs iso to be a green context (skipped where it is private) */
};

/* Records out = a + b into p0's open capture, ends it and checks the replay. */
static int capture_still_works(char *why, size_t len)
{
    if (fc_graph_is_capturing_ctx(P0.ctx) != 1) {
        snprintf(why, len, "the refused call closed p0's capture");
        return 0;
    }
    if (fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N) != FC_OK) {
        snprintf(why, len, "recording into p0's capture after the call failed: %s", fc_last_error());
        return 0;
    }
    fc_graph *g = fc_graph_end_ctx(P0.ctx);
    if (!g) {
        snprintf(why, len, "p0's capture no longer ends: code %d: %s", fc_last_error_code(), fc_last_error());
        return 0;
    }
    int ok = ct_replay_gives(P0.ctx, g, P0.out, host_poison, N, 3.5f);
    fc_graph_free(g);
    if (!ok) snprintf(why, len, "p0's capture, ended after the call, replays wrong numbers");
    return ok;
}

/* Runs `call` once, in the given state, as one counted case. */
static void run_case(const char *name, int capturing, int ends, int (*call)(void *), void *arg, int code,
                     const char *keywords, const char *also)
{
    char full[160], why[1400];
    snprintf(full, sizeof full, "%s[%s]", name, capturing ? "capturing" : "idle");
    int ok = 1;
    if (capturing && fc_graph_begin_ctx(P0.ctx) != FC_OK) {
        snprintf(why, sizeof why, "could not begin the capture: %s", fc_last_error());
        ok = 0;
    }
    if (ok) {
        fc_clear_last_error();
        int st = call(arg);
        ok = ct_outcome_ok(st, code, keywords, also, why, sizeof why);
    }
    if (ok && capturing) {
        if (ends) {
            if (fc_graph_is_capturing_ctx(P0.ctx) != 0) {
                snprintf(why, sizeof why, "p0 still captures after a call that must leave capture");
                ok = 0;
            }
        } else {
            ok = capture_still_works(why, sizeof why);
        }
    }
    if (fc_graph_is_capturing_ctx(P0.ctx) == 1 && fc_graph_abort_ctx(P0.ctx) != FC_OK)
        (void)fc_graph_abort_ctx(P0.lane0); /* a recording begun through the second handle */
    if (ok) {
        char uwhy[512];
        if (!all_usable(uwhy, sizeof uwhy)) {
            snprintf(why, sizeof why, "after the call: %s", uwhy);
            ok = 0;
        }
    }
    ct_case_result(full, ok, why);
}

/* ---- group: the handle sweep -------------------------------------------------------- */

static void *valid_slot(int slot)
{
    switch (slot) {
    case CT_S_CTX: return P0.ctx;
    case CT_S_A: return P0.a;
    case CT_S_B: return P0.b;
    case CT_S_OUT: return P0.out;
    case CT_S_GRAPH: return P0.graph;
    case CT_S_MODULE: return P0.module;
    case CT_S_CACHE: return P0.cache;
    case CT_S_BUCKETS: return F.buckets;
    default: return P0.kernel;
    }
}

static void *dead_of(int kind)
{
    switch (kind) {
    case CT_K_CTX: return F.dead.ctx;
    case CT_K_BUFFER: return F.dead.buf;
    case CT_K_GRAPH: return F.dead.graph;
    case CT_K_MODULE: return F.dead.module;
    case CT_K_CACHE: return F.dead.cache;
    case CT_K_BUCKETS: return F.dead.buckets;
    default: return F.dead.kernel;
    }
}

/* A live handle of another kind than `kind`. */
static void *other_kind_of(int kind)
{
    switch (kind) {
    case CT_K_CTX: return P0.a;
    case CT_K_BUFFER: return P0.graph;
    case CT_K_GRAPH: return P0.kernel;
    case CT_K_MODULE: return P0.ctx;
    case CT_K_CACHE: return P0.graph;
    case CT_K_BUCKETS: return P0.cache;
    default: return P0.module;
    }
}

typedef struct {
    size_t export_index;
    ct_handles h;
} sweep_call;

static int call_sweep(void *arg)
{
    sweep_call *c = (sweep_call *)arg;
    return ct_call_export(c->export_index, &c->h);
}

static void handle_sweep(fc_cuda_ctx *unused)
{
    (void)unused;
    enum { V_NULL, V_FREED, V_OTHER_KIND, V_FORGED, V_COUNT };
    static const char *const vname[V_COUNT] = {"NULL", "freed", "other kind", "forged"};
    for (size_t e = 0; e < CT_EXPORT_COUNT; e++) {
        const ct_export *x = &ct_exports[e];
        for (int p = 0; p < ct_export_nparams(x); p++) {
            int slot = x->params[p].slot, kind = ct_slot_kind(slot);
            const char *pname = x->params[p].name;
            for (int v = 0; v < V_COUNT; v++) {
                sweep_call c;
                memset(&c, 0, sizeof c);
                c.export_index = e;
                for (int s = 1; s < CT_SLOTS; s++) c.h.slot[s] = valid_slot(s);
                c.h.dptr = fc_buffer_device_ptr(P0.big);
                c.h.args = P0.args;
                c.h.nargs = 3;
                void *bad = v == V_NULL ? NULL
                            : v == V_FREED ? dead_of(kind)
                            : v == V_OTHER_KIND ? other_kind_of(kind)
                                                : (void *)&forged_target;
                c.h.slot[slot] = bad;
                char name[160], kw[96], problem[96];
                snprintf(name, sizeof name, "%s(%s=%s)", x->name, pname, vname[v]);
                int code;
                if (v == V_NULL) {
                    code = ct_is_free(x) ? FC_OK : FC_ERR_INVALID_ARGUMENT;
                    snprintf(kw, sizeof kw, "%s is NULL", pname);
                    problem[0] = 0;
                } else {
                    code = FC_ERR_INVALID_HANDLE;
                    snprintf(kw, sizeof kw, "%s (0x", pname);
                    if (v == V_FREED)
                        snprintf(problem, sizeof problem, "already freed");
                    else if (v == V_OTHER_KIND)
                        snprintf(problem, sizeof problem, "not an %s", ct_kind_name[kind]);
                    else
                        snprintf(problem, sizeof problem, "not a handle made by this library");
                }
                int ends = slot == CT_S_GRAPH && (!strcmp(x->name, "fc_graph_end_update_ctx") ||
                                                  !strcmp(x->name, "fc_graph_end_update_ex_ctx"));
                for (int capturing = 0; capturing < 2; capturing++) {
                    sweep_call run = c; /* the call may update its copy (counters, outputs) */
                    run_case(name, capturing, ends, call_sweep, &run, code, code == FC_OK ? NULL : kw,
                             problem[0] ? problem : NULL);
                }
            }
        }
    }
}

/* ---- table rows ---------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int (*call)(void);
    int when;
    int code;
    const char *keywords;
} row;

static int call_row(void *arg)
{
    return ((const row *)arg)->call();
}

static void run_rows(const row *rows, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const row *r = &rows[i];
        for (int capturing = 0; capturing < 2; capturing++) {
            if (!(r->when & (capturing ? W_CAPTURING : W_IDLE))) continue;
            int iso_green = fc_ctx_isolation(ISO.ctx) == FC_ISOLATION_GREEN;
            if (((r->when & W_D1) && !F.has_d1) || ((r->when & W_PRIV) && iso_green) ||
                ((r->when & W_GREEN) && !iso_green)) {
                ct_matrix_skipped++;
                continue;
            }
            run_case(r->name, capturing, (r->when & W_ENDS) != 0, call_row, (void *)r, r->code, r->keywords,
                     NULL);
        }
    }
}

/* ROWS(X) lists X(name, when, expected status, keywords, status expression);
 * DEFINE_ROWS(group, ROWS) makes the row functions, the table and the group. */
#define ROW_FN(name, when, code, kw, expr) \
    static int row_##name(void) { return (expr); }
#define ROW_ENTRY(name, when, code, kw, expr) {#name, row_##name, when, code, kw},
#define DEFINE_ROWS(group, ROWS)                              \
    ROWS(ROW_FN)                                              \
    static const row group##_rows[] = {ROWS(ROW_ENTRY)};      \
    static void group(fc_cuda_ctx *unused)                    \
    {                                                         \
        (void)unused;                                         \
        run_rows(group##_rows, CT_COUNT(group##_rows));       \
    }

static int wrap(fc_cuda_ctx *ctx, uint64_t ptr, size_t bytes)
{
    return ST_NEW(fc_buffer_wrap_ctx(ctx, ptr, bytes));
}

static uint64_t ptr_of(const fc_buffer *b)
{
    return fc_buffer_device_ptr(b);
}

#define KW_OOM "OUT_OF_MEMORY"
#define KW_OTHER_CTX "another CUDA context"

/* clang-format off */
#define SIZE_ROWS(X)                                                                                              \
    X(alloc_0_bytes, W_BOTH, FC_ERR_INVALID_ARGUMENT, "0 bytes", ST_NEW(fc_buffer_alloc_ctx(P0.ctx, 0)))         \
    X(alloc_SIZE_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, "overflows", ST_NEW(fc_buffer_alloc_ctx(P0.ctx, SIZE_MAX))) \
    X(alloc_SIZE_MAX_minus_256, W_BOTH, FC_ERR_INVALID_ARGUMENT, "overflows",                                    \
      ST_NEW(fc_buffer_alloc_ctx(P0.ctx, SIZE_MAX - 256)))                                                       \
    X(alloc_SIZE_MAX_minus_511, W_BOTH, FC_ERR_INVALID_ARGUMENT, "overflows",                                    \
      ST_NEW(fc_buffer_alloc_ctx(P0.ctx, SIZE_MAX - 511)))                                                       \
    X(alloc_1_TiB, W_BOTH, FC_ERR_OUT_OF_MEMORY, KW_OOM, ST_NEW(fc_buffer_alloc_ctx(P0.ctx, (size_t)1 << 40)))   \
    X(alloc_half_the_address_space, W_BOTH, FC_ERR_OUT_OF_MEMORY, KW_OOM,                                        \
      ST_NEW(fc_buffer_alloc_ctx(P0.ctx, SIZE_MAX / 2)))                                                         \
    X(alloc_1_TiB_isolated, W_IDLE, FC_ERR_OUT_OF_MEMORY, KW_OOM,                                                \
      ST_NEW(fc_buffer_alloc_ctx(ISO.ctx, (size_t)1 << 40)))                                                     \
    X(wrap_null_pointer, W_BOTH, FC_ERR_INVALID_ARGUMENT, "null device pointer", wrap(P0.ctx, 0, 16))           \
    X(wrap_0_bytes, W_BOTH, FC_ERR_INVALID_ARGUMENT, "0 bytes", wrap(P0.ctx, ptr_of(P0.big), 0))                 \
    X(wrap_end_past_2_pow_64, W_BOTH, FC_ERR_INVALID_ARGUMENT, "overflows", wrap(P0.ctx, UINT64_MAX - 8, 16))    \
    X(wrap_SIZE_MAX_bytes, W_BOTH, FC_ERR_INVALID_ARGUMENT, "overflows", wrap(P0.ctx, ptr_of(P0.big), SIZE_MAX)) \
    X(wrap_past_the_allocation, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "past the end",                                 \
      wrap(P0.ctx, ptr_of(P0.big) + 8, BIG_BYTES))                                                               \
    X(wrap_host_memory, W_BOTH, FC_ERR_INVALID_ARGUMENT, "not device memory",                                    \
      wrap(P0.ctx, (uint64_t)(uintptr_t)host_big, 16))                                                           \
    X(wrap_isolated_memory_on_primary, W_BOTH | W_PRIV, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                      \
      wrap(P0.ctx, ptr_of(ISO.big), 16))                                                                         \
    X(wrap_primary_memory_on_isolated, W_BOTH | W_PRIV, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                      \
      wrap(ISO.ctx, ptr_of(P0.big), 16))                                                                         \
    X(wrap_green_memory_on_primary, W_BOTH | W_GREEN, FC_OK, NULL, wrap(P0.ctx, ptr_of(ISO.big), 16))            \
    X(wrap_primary_memory_on_green, W_BOTH | W_GREEN, FC_OK, NULL, wrap(ISO.ctx, ptr_of(P0.big), 16))            \
    X(wrap_own_memory_on_isolated, W_BOTH, FC_OK, NULL, wrap(ISO.ctx, ptr_of(ISO.big) + 64, 16))                 \
    X(wrap_device_1_memory_on_device_0, W_BOTH | W_D1, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                       \
      wrap(P0.ctx, ptr_of(D1.big), 16))                                                                          \
    X(wrap_memory_of_the_same_primary_context, W_BOTH, FC_OK, NULL, wrap(P0B.ctx, ptr_of(P0.big) + 64, 4096))
/* clang-format on */
DEFINE_ROWS(sizes, SIZE_ROWS)

/* clang-format off */
#define COPY_ROWS(X)                                                                                              \
    X(upload_NULL_src, W_BOTH, FC_ERR_INVALID_ARGUMENT, "src is NULL", fc_buffer_upload(P0.big, NULL, 16))      \
    X(download_NULL_dst, W_BOTH, FC_ERR_INVALID_ARGUMENT, "dst is NULL", fc_buffer_download(P0.big, NULL, 16))  \
    X(upload_0_bytes_from_NULL, W_BOTH, FC_OK, NULL, fc_buffer_upload(P0.big, NULL, 0))                          \
    X(download_0_bytes_to_NULL, W_BOTH, FC_OK, NULL, fc_buffer_download(P0.big, NULL, 0))                        \
    X(upload_one_byte_too_many, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "1025 bytes into a buffer of 1024",             \
      fc_buffer_upload(P0.a, host_big, 4 * N + 1))                                                               \
    X(download_one_byte_too_many, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "1025 bytes into a buffer of 1024",           \
      fc_buffer_download(P0.a, host_big, 4 * N + 1))                                                             \
    X(upload_SIZE_MAX, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "into a buffer of 1024",                                 \
      fc_buffer_upload(P0.a, host_big, SIZE_MAX))                                                                \
    X(download_SIZE_MAX, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "into a buffer of 1024",                               \
      fc_buffer_download(P0.a, host_big, SIZE_MAX))                                                              \
    X(upload_SIZE_MAX_minus_256, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "into a buffer of 1024",                       \
      fc_buffer_upload(P0.a, host_big, SIZE_MAX - 256))                                                          \
    X(download_SIZE_MAX_minus_256, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "into a buffer of 1024",                     \
      fc_buffer_download(P0.a, host_big, SIZE_MAX - 256))                                                        \
    X(upload_while_capturing, W_CAPTURING, FC_ERR_CAPTURE_STATE, "while this context is capturing",              \
      fc_buffer_upload(P0.big, host_big, 16))                                                                    \
    X(download_while_capturing, W_CAPTURING, FC_ERR_CAPTURE_STATE, "while this context is capturing",            \
      fc_buffer_download(P0.big, host_big, 16))                                                                  \
    X(fill_offset_SIZE_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, "overflows",                                        \
      fc_buffer_fill_ctx(P0.ctx, P0.a, SIZE_MAX, 1, 0))                                                          \
    X(fill_len_SIZE_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, "overflows", fc_buffer_fill_ctx(P0.ctx, P0.a, 8, SIZE_MAX, 0)) \
    X(fill_range_wraps_around, W_BOTH, FC_ERR_INVALID_ARGUMENT, "overflows",                                     \
      fc_buffer_fill_ctx(P0.ctx, P0.a, SIZE_MAX - 256, 512, 0))                                                  \
    X(fill_one_byte_past_the_end, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "in a buffer of 1024",                        \
      fc_buffer_fill_ctx(P0.ctx, P0.a, 4 * N, 1, 0))                                                             \
    X(fill_empty_range_past_the_end, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "in a buffer of 1024",                     \
      fc_buffer_fill_ctx(P0.ctx, P0.a, 4 * N + 1, 0, 0))                                                         \
    X(fill_empty_range_at_the_end, W_BOTH, FC_OK, NULL, fc_buffer_fill_ctx(P0.ctx, P0.a, 4 * N, 0, 0xff))        \
    X(fill_isolated_buffer_on_primary, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                               \
      fc_buffer_fill_ctx(P0.ctx, ISO.a, 0, 4, 0))                                                                \
    X(fill_primary_buffer_on_isolated, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                               \
      fc_buffer_fill_ctx(ISO.ctx, P0.a, 0, 4, 0))                                                                \
    X(fill_device_1_buffer_on_device_0, W_BOTH | W_D1, FC_ERR_WRONG_DEVICE, "lives on device 1",                 \
      fc_buffer_fill_ctx(P0.ctx, D1.a, 0, 4, 0))
/* clang-format on */
DEFINE_ROWS(copies_and_fills, COPY_ROWS)

/* clang-format off */
#define ELEMENTWISE_ROWS(X)                                                                                       \
    X(add_n_one_too_many, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "257 floats need 1028",                               \
      fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N + 1))                                                             \
    X(mul_n_one_too_many, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "257 floats need 1028",                               \
      fc_mul_ctx(P0.ctx, P0.a, P0.b, P0.out, N + 1))                                                             \
    X(add_out_too_small, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "out holds 1024 bytes",                                \
      fc_add_ctx(P0.ctx, P0.big, P0.big, P0.out, N + 1))                                                         \
    X(add_n_SIZE_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, "32-bit", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, SIZE_MAX)) \
    X(add_n_2_pow_32, W_BOTH, FC_ERR_INVALID_ARGUMENT, "32-bit",                                                 \
      fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, (size_t)UINT32_MAX + 1))                                            \
    X(mul_n_UINT32_MAX, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "floats need",                                          \
      fc_mul_ctx(P0.ctx, P0.a, P0.b, P0.out, UINT32_MAX))                                                        \
    X(add_0_elements, W_BOTH, FC_OK, NULL, fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, 0))                            \
    X(add_a_of_isolated_context, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                                     \
      fc_add_ctx(P0.ctx, ISO.a, P0.b, P0.out, N))                                                                \
    X(add_b_of_isolated_context, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                                     \
      fc_add_ctx(P0.ctx, P0.a, ISO.b, P0.out, N))                                                                \
    X(mul_out_of_isolated_context, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                                   \
      fc_mul_ctx(P0.ctx, P0.a, P0.b, ISO.out, N))                                                                \
    X(add_primary_buffer_on_isolated_context, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                        \
      fc_add_ctx(ISO.ctx, ISO.a, P0.b, ISO.out, N))                                                              \
    X(add_a_of_device_1, W_BOTH | W_D1, FC_ERR_WRONG_DEVICE, "lives on device 1",                                \
      fc_add_ctx(P0.ctx, D1.a, P0.b, P0.out, N))                                                                 \
    X(mul_out_of_device_1, W_BOTH | W_D1, FC_ERR_WRONG_DEVICE, "lives on device 1",                              \
      fc_mul_ctx(P0.ctx, P0.a, P0.b, D1.out, N))                                                                 \
    X(add_device_0_buffers_on_device_1, W_BOTH | W_D1, FC_ERR_WRONG_DEVICE, "lives on device 0",                 \
      fc_add_ctx(D1.ctx, P0.a, D1.b, D1.out, N))                                                                 \
    X(add_buffers_of_another_primary_context, W_BOTH, FC_OK, NULL, fc_add_ctx(P0.ctx, P0B.a, P0B.b, P0.out, N))
/* clang-format on */
DEFINE_ROWS(elementwise, ELEMENTWISE_ROWS)

/* ---- PTX ---- */

static char ptx_random_bytes[4096], ptx_random_text[4096], ptx_cut_in_params[4096], ptx_cut_in_body[4096],
    ptx_bad_version[4096], ptx_bad_target[4096], ptx_open_comment[4096];

static const char ptx_unknown_instruction[] = ".version 7.0\n.target sm_35\n.address_size 64\n"
                                              ".visible .entry broken(.param .u32 n)\n{\n"
                                              "\tfrobnicate.f32 %f1, %f2;\n\tret;\n}\n";
static const char ptx_bad_param_type[] = ".version 7.0\n.target sm_35\n.address_size 64\n"
                                         ".visible .entry k(.param .u128 n)\n{\n\tret;\n}\n";
static const char ptx_conflicting_entries[] = ".version 7.0\n.target sm_35\n.address_size 64\n"
                                              ".visible .entry k(.param .u32 n)\n{\n\tret;\n}\n"
                                              ".visible .entry k(.param .u64 n)\n{\n\tret;\n}\n";

/* Copies USER_PTX into dst with `from` replaced by `to` (or cut before
 * `from` when `to` is NULL, or cut after `from` when `to` is ""). */
static void ptx_edit(char *dst, size_t len, const char *from, const char *to)
{
    const char *at = strstr(USER_PTX, from);
    size_t head = at ? (size_t)(at - USER_PTX) : strlen(USER_PTX);
    if (to && !to[0] && at) head += strlen(from);
    snprintf(dst, len, "%.*s%s%s", (int)head, USER_PTX, to && to[0] ? to : "",
             to && to[0] && at ? at + strlen(from) : "");
}

static void make_bad_ptx(void)
{
    ct_seed(0xBAD);
    for (size_t i = 0; i + 1 < sizeof ptx_random_bytes; i++) {
        unsigned char c = (unsigned char)(ct_rand_u32() >> 24);
        ptx_random_bytes[i] = (char)(c ? c : 0xff);
    }
    ptx_random_bytes[0] = (char)0xff; /* never valid UTF-8 */
    ptx_random_bytes[sizeof ptx_random_bytes - 1] = 0;
    static const char printable[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \t\n.,;:{}[]()<>+-*%$_!?#@&|=~^";
    for (size_t i = 0; i + 1 < sizeof ptx_random_text; i++)
        ptx_random_text[i] = printable[ct_rand_u32() % (sizeof printable - 1)];
    ptx_random_text[sizeof ptx_random_text - 1] = 0;
    ptx_edit(ptx_cut_in_params, sizeof ptx_cut_in_params, "\t.param .f32 s,\n", "");
    ptx_edit(ptx_cut_in_body, sizeof ptx_cut_in_body, "\tmul.rn.f32", NULL);
    ptx_edit(ptx_bad_version, sizeof ptx_bad_version, ".version 7.0", ".version 99.9");
    ptx_edit(ptx_bad_target, sizeof ptx_bad_target, ".target sm_35", ".target sm_9999");
    snprintf(ptx_open_comment, sizeof ptx_open_comment, "%s\n/* this comment never ends\n", USER_PTX);
}

#define LOAD(text) ST_NEW(fc_module_load_ptx(P0.ctx, (text)))
#define KW_JIT "cuModuleLoadDataEx"

/* clang-format off */
#define PTX_ROWS(X)                                                                                               \
    X(ptx_NULL, W_BOTH, FC_ERR_INVALID_ARGUMENT, "ptx is NULL", LOAD(NULL))                                       \
    X(ptx_empty, W_BOTH, FC_ERR_CUDA, KW_JIT, LOAD(""))                                                           \
    X(ptx_random_bytes, W_BOTH, FC_ERR_INVALID_ARGUMENT, "UTF-8", LOAD(ptx_random_bytes))                        \
    X(ptx_random_text, W_BOTH, FC_ERR_CUDA, KW_JIT, LOAD(ptx_random_text))                                        \
    X(ptx_cut_in_the_parameter_list, W_BOTH, FC_ERR_INVALID_ARGUMENT, "unterminated parameter list",             \
      LOAD(ptx_cut_in_params))                                                                                    \
    X(ptx_cut_in_a_body, W_BOTH, FC_ERR_CUDA, KW_JIT, LOAD(ptx_cut_in_body))                                      \
    X(ptx_version_99_9, W_BOTH, FC_ERR_CUDA, KW_JIT, LOAD(ptx_bad_version))                                       \
    X(ptx_target_sm_9999, W_BOTH, FC_ERR_CUDA, KW_JIT, LOAD(ptx_bad_target))                                      \
    X(ptx_unknown_instruction, W_BOTH, FC_ERR_CUDA, KW_JIT, LOAD(ptx_unknown_instruction))                        \
    X(ptx_parameter_type_u128, W_BOTH, FC_ERR_INVALID_ARGUMENT, "unsupported type", LOAD(ptx_bad_param_type))    \
    X(ptx_conflicting_entries, W_BOTH, FC_ERR_INVALID_ARGUMENT, "different parameters",                          \
      LOAD(ptx_conflicting_entries))                                                                              \
    X(ptx_unterminated_comment, W_BOTH, FC_ERR_INVALID_ARGUMENT, "unterminated /* comment", LOAD(ptx_open_comment)) \
    X(ptx_on_isolated_context_loads, W_BOTH, FC_OK, NULL, ST_NEW(fc_module_load_ptx(ISO.ctx, USER_PTX)))        \
    X(kernel_NULL_name, W_BOTH, FC_ERR_INVALID_ARGUMENT, "name is NULL", ST_NEW(fc_module_get_kernel(P0.module, NULL))) \
    X(kernel_unknown_name, W_BOTH, FC_ERR_INVALID_ARGUMENT, "no kernel named",                                   \
      ST_NEW(fc_module_get_kernel(P0.module, "no_such_kernel")))                                                 \
    X(kernel_empty_name, W_BOTH, FC_ERR_INVALID_ARGUMENT, "no kernel named", ST_NEW(fc_module_get_kernel(P0.module, ""))) \
    X(kernel_name_prefix, W_BOTH, FC_ERR_INVALID_ARGUMENT, "scale_f3", ST_NEW(fc_module_get_kernel(P0.module, "scale_f3"))) \
    X(kernel_name_not_utf8, W_BOTH, FC_ERR_INVALID_ARGUMENT, "UTF-8",                                            \
      ST_NEW(fc_module_get_kernel(P0.module, "\xff\xfe")))
/* clang-format on */
DEFINE_ROWS(ptx, PTX_ROWS)

/* ---- launches ---- */

static int launch(fc_cuda_ctx *ctx, const fc_kernel *k, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                  unsigned by, unsigned bz, unsigned smem, void **args, size_t nargs)
{
    return fc_kernel_launch_ctx(ctx, k, gx, gy, gz, bx, by, bz, smem, args, nargs);
}

static void *args4[4], *hole0[3], *hole1[3], *hole2[3];

static void make_bad_args(void)
{
    for (int i = 0; i < 3; i++) {
        args4[i] = hole0[i] = hole1[i] = hole2[i] = P0.args[i];
    }
    args4[3] = P0.args[2];
    hole0[0] = hole1[1] = hole2[2] = NULL;
}

#define KLAUNCH(gx, gy, gz, bx, by, bz, smem, args, nargs) launch(P0.ctx, P0.kernel, gx, gy, gz, bx, by, bz, smem, args, nargs)
#define KW_DIMS "launch dimensions must be non-zero"
#define KW_LIMIT "exceeds"

/* clang-format off */
#define LAUNCH_ROWS(X)                                                                                            \
    X(launch_2_of_3_arguments, W_BOTH, FC_ERR_INVALID_ARGUMENT, "2 arguments given",                             \
      KLAUNCH(1, 1, 1, 32, 1, 1, 0, P0.args, 2))                                                                  \
    X(launch_4_arguments, W_BOTH, FC_ERR_INVALID_ARGUMENT, "4 arguments given", KLAUNCH(1, 1, 1, 32, 1, 1, 0, args4, 4)) \
    X(launch_0_arguments, W_BOTH, FC_ERR_INVALID_ARGUMENT, "0 arguments given", KLAUNCH(1, 1, 1, 32, 1, 1, 0, NULL, 0)) \
    X(launch_SIZE_MAX_arguments, W_BOTH, FC_ERR_INVALID_ARGUMENT, "arguments given",                             \
      KLAUNCH(1, 1, 1, 32, 1, 1, 0, P0.args, SIZE_MAX))                                                           \
    X(launch_NULL_args, W_BOTH, FC_ERR_INVALID_ARGUMENT, "args is NULL", KLAUNCH(1, 1, 1, 32, 1, 1, 0, NULL, 3))  \
    X(launch_NULL_argument_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, "args[0] is NULL", KLAUNCH(1, 1, 1, 32, 1, 1, 0, hole0, 3)) \
    X(launch_NULL_argument_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, "args[1] is NULL", KLAUNCH(1, 1, 1, 32, 1, 1, 0, hole1, 3)) \
    X(launch_NULL_argument_2, W_BOTH, FC_ERR_INVALID_ARGUMENT, "args[2] is NULL", KLAUNCH(1, 1, 1, 32, 1, 1, 0, hole2, 3)) \
    X(launch_grid_x_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_DIMS, KLAUNCH(0, 1, 1, 32, 1, 1, 0, P0.args, 3))       \
    X(launch_grid_y_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_DIMS, KLAUNCH(1, 0, 1, 32, 1, 1, 0, P0.args, 3))       \
    X(launch_grid_z_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_DIMS, KLAUNCH(1, 1, 0, 32, 1, 1, 0, P0.args, 3))       \
    X(launch_block_x_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_DIMS, KLAUNCH(1, 1, 1, 0, 1, 1, 0, P0.args, 3))       \
    X(launch_block_y_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_DIMS, KLAUNCH(1, 1, 1, 32, 0, 1, 0, P0.args, 3))      \
    X(launch_block_z_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_DIMS, KLAUNCH(1, 1, 1, 32, 1, 0, 0, P0.args, 3))      \
    X(launch_2048_threads_per_block, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_LIMIT,                                  \
      KLAUNCH(1, 1, 1, 2048, 1, 1, 0, P0.args, 3))                                                                \
    X(launch_block_z_128, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_LIMIT, KLAUNCH(1, 1, 1, 1, 1, 128, 0, P0.args, 3)) \
    X(launch_grid_y_65536, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_LIMIT, KLAUNCH(1, 65536, 1, 32, 1, 1, 0, P0.args, 3)) \
    X(launch_grid_x_UINT_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_LIMIT, KLAUNCH(UINT_MAX, 1, 1, 32, 1, 1, 0, P0.args, 3)) \
    X(launch_1_MiB_shared_memory, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_LIMIT,                                     \
      KLAUNCH(1, 1, 1, 32, 1, 1, 1u << 20, P0.args, 3))                                                           \
    X(launch_isolated_kernel_on_primary, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                             \
      launch(P0.ctx, ISO.kernel, 1, 1, 1, 32, 1, 1, 0, P0.args, 3))                                               \
    X(launch_primary_kernel_on_isolated, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                             \
      launch(ISO.ctx, P0.kernel, 1, 1, 1, 32, 1, 1, 0, ISO.args, 3))                                              \
    X(launch_device_1_kernel_on_device_0, W_BOTH | W_D1, FC_ERR_WRONG_DEVICE, "lives on device 1",               \
      launch(P0.ctx, D1.kernel, 1, 1, 1, 32, 1, 1, 0, P0.args, 3))                                                \
    X(launch_kernel_of_another_primary_context, W_BOTH, FC_OK, NULL,                                              \
      launch(P0.ctx, P0B.kernel, 1, 1, 1, 256, 1, 1, 0, P0.args, 3))                                              \
    X(launch_ex_unknown_flags, W_BOTH, FC_ERR_INVALID_ARGUMENT, "unknown launch flags",                          \
      fc_kernel_launch_ex_ctx(P0.ctx, P0.kernel, 1, 1, 1, 32, 1, 1, 0, P0.args, 3, 4u))                           \
    X(launch_ex_both_flags, W_BOTH, FC_ERR_INVALID_ARGUMENT, "unknown launch flags",                             \
      fc_kernel_launch_ex_ctx(P0.ctx, P0.kernel, 1, 1, 1, 32, 1, 1, 0, P0.args, 3, FC_LAUNCH_PDL | FC_LAUNCH_PLAIN)) \
    X(launch_ex_past_the_limits, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_LIMIT,                                      \
      fc_kernel_launch_ex_ctx(P0.ctx, P0.kernel, 1, 1, 1, 4096, 1, 1, 0, P0.args, 3, FC_LAUNCH_PLAIN))            \
    X(launch_ex_2_of_3_arguments, W_BOTH, FC_ERR_INVALID_ARGUMENT, "2 arguments given",                          \
      fc_kernel_launch_ex_ctx(P0.ctx, P0.kernel, 1, 1, 1, 32, 1, 1, 0, P0.args, 2, 0))                            \
    X(launch_ex_isolated_kernel_on_primary, W_BOTH, FC_ERR_WRONG_CONTEXT, KW_OTHER_CTX,                          \
      fc_kernel_launch_ex_ctx(P0.ctx, ISO.kernel, 1, 1, 1, 32, 1, 1, 0, P0.args, 3, FC_LAUNCH_PLAIN))             \
    X(launch_ex_plain, W_BOTH, FC_OK, NULL,                                                                       \
      fc_kernel_launch_ex_ctx(P0.ctx, P0.kernel, 1, 1, 1, 256, 1, 1, 0, P0.args, 3, FC_LAUNCH_PLAIN))             \
    X(pdl_supported_on_device_minus_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, "negative",                              \
      ST_VALUE(fc_device_supports_pdl(-1) == -1))                                                                 \
    X(pdl_supported_on_device_9999, W_BOTH, FC_ERR_INVALID_ARGUMENT, "does not exist",                           \
      ST_VALUE(fc_device_supports_pdl(9999) == -1))
/* clang-format on */
DEFINE_ROWS(launches, LAUNCH_ROWS)

/* ---- capture modes and callback arguments ---- */

static int record_add(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    return fc_add_ctx(ctx, P0.a, P0.b, P0.out, N);
}

/* fc_graph_capture_ctx; frees a graph it returns; a refused call must
 * leave *graph_out alone. */
static int capture(fc_cuda_ctx *ctx, int mode, fc_record_fn rec, int tries)
{
    fc_graph *g = (fc_graph *)(uintptr_t)0x5e17;
    int rc = fc_graph_capture_ctx(ctx, mode, rec, NULL, tries, &g);
    if (rc == FC_OK) {
        fc_graph_free(g);
        return rc;
    }
    return g == (fc_graph *)(uintptr_t)0x5e17 ? rc : ST_WRONG_FALLBACK;
}

static int end_update(fc_cuda_ctx *ctx, fc_graph *g)
{
    int updated = -7;
    int rc = fc_graph_end_update_ctx(ctx, g, &updated);
    return rc != FC_OK && updated != -7 ? ST_WRONG_FALLBACK : rc;
}

/* fc_graph_end_update_ex_ctx; a refused call must write no output. */
static int end_update_ex(fc_cuda_ctx *ctx, fc_graph *g)
{
    int updated = -7, instantiated = -7, node_calls = -7;
    int rc = fc_graph_end_update_ex_ctx(ctx, g, &updated, &instantiated, &node_calls);
    return rc != FC_OK && (updated != -7 || instantiated != -7 || node_calls != -7) ? ST_WRONG_FALLBACK : rc;
}

/* fc_ctx_set_recording_mode; a refused call must leave the mode alone. */
static int set_recording_mode(fc_cuda_ctx *ctx, int mode)
{
    int before = fc_ctx_recording_mode(ctx);
    fc_clear_last_error();
    int rc = fc_ctx_set_recording_mode(ctx, mode);
    return rc != FC_OK && fc_ctx_recording_mode(ctx) != before ? ST_WRONG_FALLBACK : rc;
}

/* fc_graph_foreign_begin_ctx; a refused begin must write no stream, a
 * section it opens is ended again. */
static int foreign_begin(fc_cuda_ctx *ctx, int mode)
{
    void *stream = CT_UNWRITTEN;
    int rc = fc_graph_foreign_begin_ctx(ctx, mode, &stream);
    if (rc == FC_OK) {
        (void)fc_graph_foreign_end_ctx(ctx);
        return stream && stream != CT_UNWRITTEN ? rc : ST_WRONG_FALLBACK;
    }
    return stream == CT_UNWRITTEN ? rc : ST_WRONG_FALLBACK;
}

static int foreign_calls; /* calls of counting_foreign */

static int counting_foreign(void *stream, void *user)
{
    (void)stream;
    (void)user;
    foreign_calls++;
    return 0;
}

/* fc_graph_record_foreign_ctx; a refused section must call nothing. */
static int record_foreign(fc_cuda_ctx *ctx, int mode, fc_foreign_fn fn)
{
    int before = foreign_calls;
    int rc = fc_graph_record_foreign_ctx(ctx, mode, fn, NULL);
    return rc != FC_OK && foreign_calls != before ? ST_CALLBACK_RAN : rc;
}

#define TL FC_CAPTURE_MODE_THREAD_LOCAL
#define KW_MODE "unknown capture mode"
#define KW_REC_MODE "unknown recording mode"
#define KW_COND_KIND "unknown conditional kind"

/* clang-format off */
#define MODE_ROWS(X)                                                                                              \
    X(begin_mode_3, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, fc_graph_begin_ctx_mode(P0.ctx, 3))                 \
    X(begin_mode_minus_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, fc_graph_begin_ctx_mode(P0.ctx, -1))          \
    X(begin_mode_INT_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, fc_graph_begin_ctx_mode(P0.ctx, INT_MAX))     \
    X(begin_mode_INT_MIN, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, fc_graph_begin_ctx_mode(P0.ctx, INT_MIN))     \
    X(begin_live_mode_7, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, fc_graph_begin_live_ctx(P0.ctx, 7, &F))        \
    X(capture_mode_9, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, capture(P0.ctx, 9, record_add, 3))                \
    X(capture_NULL_record, W_BOTH, FC_ERR_INVALID_ARGUMENT, "record is NULL", capture(P0.ctx, TL, NULL, 3))       \
    X(capture_NULL_graph_out, W_BOTH, FC_ERR_INVALID_ARGUMENT, "graph_out is NULL",                              \
      fc_graph_capture_ctx(P0.ctx, TL, record_add, NULL, 3, NULL))                                               \
    X(capture_0_tries, W_BOTH, FC_ERR_INVALID_ARGUMENT, "max_tries", capture(P0.ctx, TL, record_add, 0))          \
    X(capture_minus_1_tries, W_BOTH, FC_ERR_INVALID_ARGUMENT, "max_tries", capture(P0.ctx, TL, record_add, -1))   \
    X(capture_INT_MIN_tries, W_BOTH, FC_ERR_INVALID_ARGUMENT, "max_tries", capture(P0.ctx, TL, record_add, INT_MIN)) \
    X(break_NULL_fn, W_BOTH, FC_ERR_INVALID_ARGUMENT, "fn is NULL", fc_graph_break_ctx(P0.ctx, NULL, NULL))       \
    X(recording_mode_3, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_REC_MODE, set_recording_mode(P0.ctx, 3))             \
    X(recording_mode_minus_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_REC_MODE, set_recording_mode(P0.ctx, -1))      \
    X(recording_mode_INT_MIN, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_REC_MODE, set_recording_mode(P0.ctx, INT_MIN)) \
    X(recording_mode_INT_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_REC_MODE, set_recording_mode(P0.ctx, INT_MAX)) \
    X(foreign_begin_mode_3, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, foreign_begin(P0.ctx, 3))                   \
    X(foreign_begin_mode_minus_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, foreign_begin(P0.ctx, -1))            \
    X(record_foreign_mode_INT_MIN, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE,                                     \
      record_foreign(P0.ctx, INT_MIN, counting_foreign))                                                          \
    X(record_foreign_NULL_fn, W_BOTH, FC_ERR_INVALID_ARGUMENT, "fn is NULL", record_foreign(P0.ctx, TL, NULL))    \
    X(cond_kind_5, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_COND_KIND, fc_graph_cond_begin_ctx(P0.ctx, 5, P0.a, 0))     \
    X(cond_kind_minus_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_COND_KIND, fc_graph_cond_begin_ctx(P0.ctx, -1, P0.a, 0)) \
    X(cond_kind_INT_MIN, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_COND_KIND,                                          \
      fc_graph_cond_begin_ctx(P0.ctx, INT_MIN, P0.a, 0))                                                          \
    X(cond_switch_0_cases, W_BOTH, FC_ERR_INVALID_ARGUMENT, "cases",                                             \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_SWITCH, P0.a, 0))                                                   \
    X(cond_switch_65537_cases, W_BOTH, FC_ERR_INVALID_ARGUMENT, "cases",                                         \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_SWITCH, P0.a, 65537))                                               \
    X(cond_switch_UINT_MAX_cases, W_BOTH, FC_ERR_INVALID_ARGUMENT, "cases",                                      \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_SWITCH, P0.a, UINT_MAX))                                            \
    X(cond_begin_on_isolated_contexts_buffer, W_BOTH, FC_ERR_WRONG_CONTEXT, NULL,                               \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, ISO.a, 0))                                                      \
    X(capture_on_isolated_context_works, W_BOTH, FC_OK, NULL, capture(ISO.ctx, TL, record_add_iso, 1))
/* clang-format on */

static int record_add_iso(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    return fc_add_ctx(ctx, ISO.a, ISO.b, ISO.out, N);
}
DEFINE_ROWS(modes, MODE_ROWS)

/* ---- capture calls in the wrong order ---- */

#define KW_NO_CAPTURE "no capture is open"
#define KW_OPEN "already open"
#define KW_WHILE "while this context is capturing"
#define KW_NO_BODY "no conditional body is open"

/* clang-format off */
#define ORDER_ROWS(X)                                                                                             \
    X(end_without_begin, W_IDLE, FC_ERR_CAPTURE_STATE, KW_NO_CAPTURE, ST_NEW(fc_graph_end_ctx(P0.ctx)))           \
    X(abort_without_begin, W_IDLE, FC_ERR_CAPTURE_STATE, KW_NO_CAPTURE, fc_graph_abort_ctx(P0.ctx))               \
    X(foreign_begin_without_begin, W_IDLE, FC_ERR_CAPTURE_STATE, KW_NO_CAPTURE, foreign_begin(P0.ctx, TL))        \
    X(foreign_end_without_begin, W_IDLE, FC_ERR_CAPTURE_STATE, KW_NO_CAPTURE, fc_graph_foreign_end_ctx(P0.ctx))   \
    X(record_foreign_without_begin, W_IDLE, FC_ERR_CAPTURE_STATE, KW_NO_CAPTURE,                                 \
      record_foreign(P0.ctx, TL, counting_foreign))                                                               \
    X(end_update_ex_without_begin, W_IDLE, FC_ERR_CAPTURE_STATE, KW_NO_CAPTURE, end_update_ex(P0.ctx, P0.graph))  \
    X(end_update_ex_NULL_graph, W_CAPTURING | W_ENDS, FC_ERR_INVALID_ARGUMENT, "graph is NULL",                  \
      end_update_ex(P0.ctx, NULL))                                                                                \
    X(end_update_ex_buffer_as_graph, W_CAPTURING | W_ENDS, FC_ERR_INVALID_HANDLE, "not an fc_graph",             \
      end_update_ex(P0.ctx, (fc_graph *)P0.a))                                                                    \
    X(end_update_without_begin, W_IDLE, FC_ERR_CAPTURE_STATE, KW_NO_CAPTURE, end_update(P0.ctx, P0.graph))        \
    X(end_update_NULL_graph_without_begin, W_IDLE, FC_ERR_INVALID_ARGUMENT, "graph is NULL", end_update(P0.ctx, NULL)) \
    X(end_update_freed_graph_without_begin, W_IDLE, FC_ERR_INVALID_HANDLE, "already freed",                      \
      end_update(P0.ctx, F.dead.graph))                                                                           \
    X(cond_begin_without_recording, W_IDLE, FC_ERR_CAPTURE_STATE, "needs an open recording",                    \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, P0.a, 0))                                                       \
    X(cond_next_without_begin, W_BOTH, FC_ERR_CAPTURE_STATE, KW_NO_BODY, fc_graph_cond_next_ctx(P0.ctx))          \
    X(cond_end_without_begin, W_BOTH, FC_ERR_CAPTURE_STATE, KW_NO_BODY, fc_graph_cond_end_ctx(P0.ctx))            \
    X(cond_abort_without_begin, W_BOTH, FC_ERR_CAPTURE_STATE, "no conditional is open",                         \
      fc_graph_cond_abort_ctx(P0.ctx))                                                                            \
    X(begin_twice, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_OPEN, fc_graph_begin_ctx(P0.ctx))                        \
    X(begin_relaxed_twice, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_OPEN,                                           \
      fc_graph_begin_ctx_mode(P0.ctx, FC_CAPTURE_MODE_RELAXED))                                                   \
    X(begin_live_global_twice, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_OPEN,                                       \
      fc_graph_begin_live_ctx(P0.ctx, FC_CAPTURE_MODE_GLOBAL, &F))                                                \
    X(capture_inside_a_capture, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_OPEN, capture(P0.ctx, TL, record_add, 3))   \
    X(sync_while_capturing, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_WHILE, fc_sync_ctx(P0.ctx))                     \
    X(launch_own_graph_while_capturing, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_WHILE, fc_graph_launch(P0.graph))   \
    X(launch_live_own_graph_while_capturing, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_WHILE,                        \
      fc_graph_launch_live(P0.graph, &F))                                                                         \
    X(launch_other_contexts_graph_while_capturing, W_CAPTURING, FC_OK, NULL, fc_graph_launch(P0B.graph))          \
    X(end_update_NULL_graph, W_CAPTURING | W_ENDS, FC_ERR_INVALID_ARGUMENT, "graph is NULL", end_update(P0.ctx, NULL)) \
    X(end_update_freed_graph, W_CAPTURING | W_ENDS, FC_ERR_INVALID_HANDLE, "already freed",                      \
      end_update(P0.ctx, F.dead.graph))                                                                           \
    X(end_update_buffer_as_graph, W_CAPTURING | W_ENDS, FC_ERR_INVALID_HANDLE, "not an fc_graph",                \
      end_update(P0.ctx, (fc_graph *)P0.a))                                                                       \
    X(end_update_isolated_contexts_graph, W_CAPTURING | W_ENDS, FC_ERR_INVALID_ARGUMENT, "another context",      \
      end_update(P0.ctx, ISO.graph))                                                                              \
    X(end_update_another_primary_contexts_graph, W_CAPTURING | W_ENDS, FC_ERR_INVALID_ARGUMENT, "another context", \
      end_update(P0.ctx, P0B.graph))                                                                              \
    X(end_update_device_1_graph, W_CAPTURING | W_ENDS | W_D1, FC_ERR_INVALID_ARGUMENT, "another context",       \
      end_update(P0.ctx, D1.graph))
/* clang-format on */
DEFINE_ROWS(order, ORDER_ROWS)

/* ---- handles of the wrong kind, named ---- */

#define KW_KIND "not an"

/* clang-format off */
#define KIND_ROWS(X)                                                                                              \
    X(launch_a_buffer_as_a_graph, W_BOTH, FC_ERR_INVALID_HANDLE, "not an fc_graph", fc_graph_launch((fc_graph *)P0.a)) \
    X(free_a_buffer_as_a_graph, W_BOTH, FC_ERR_INVALID_HANDLE, "not an fc_graph",                                \
      ST_VOID(fc_graph_free((fc_graph *)P0.a)))                                                                   \
    X(add_a_graph_as_a_buffer, W_BOTH, FC_ERR_INVALID_HANDLE, "not an fc_buffer",                                \
      fc_add_ctx(P0.ctx, (const fc_buffer *)P0.graph, P0.b, P0.out, N))                                           \
    X(sync_a_buffer_as_a_context, W_BOTH, FC_ERR_INVALID_HANDLE, "not an fc_cuda_ctx",                           \
      fc_sync_ctx((fc_cuda_ctx *)P0.a))                                                                           \
    X(launch_a_module_as_a_kernel, W_BOTH, FC_ERR_INVALID_HANDLE, "not an fc_kernel",                            \
      fc_kernel_launch_ctx(P0.ctx, (const fc_kernel *)P0.module, 1, 1, 1, 32, 1, 1, 0, P0.args, 3))               \
    X(run_a_graph_as_a_cache, W_BOTH, FC_ERR_INVALID_HANDLE, "not an fc_graph_cache",                            \
      fc_graph_cache_run((fc_graph_cache *)P0.graph, 1, record_add, NULL, NULL, NULL))
/* clang-format on */
DEFINE_ROWS(wrong_kinds, KIND_ROWS)

/* ---- outputs that may be NULL ---- */

/* Records out = a + b, then again into that graph with a NULL
 * updated_in_place; the updated graph must replay 3.5. */
static int end_update_null_output(void)
{
    fc_graph *g = NULL;
    if (fc_graph_begin_ctx(P0.ctx) != FC_OK || fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N) != FC_OK ||
        !(g = fc_graph_end_ctx(P0.ctx)))
        return ST_WRONG_FALLBACK;
    int rc = fc_graph_begin_ctx(P0.ctx);
    if (rc == FC_OK) rc = fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N);
    if (rc == FC_OK) rc = fc_graph_end_update_ctx(P0.ctx, g, NULL);
    if (rc == FC_OK && !ct_replay_gives(P0.ctx, g, P0.out, host_poison, N, 3.5f)) rc = ST_WRONG_FALLBACK;
    fc_graph_free(g);
    return rc;
}

/* A foreign section begun with a NULL stream_out, ended again. */
static int foreign_begin_null_output(void)
{
    int rc = fc_graph_foreign_begin_ctx(P0.ctx, TL, NULL);
    if (rc == FC_OK) rc = fc_graph_foreign_end_ctx(P0.ctx);
    return rc;
}

/* clang-format off */
#define NULL_OUTPUT_ROWS(X)                                                                                       \
    X(mem_info_NULL_outputs, W_BOTH, FC_OK, NULL, fc_ctx_mem_info(P0.ctx, NULL, NULL))                            \
    X(live_objects_NULL_outputs, W_BOTH, FC_OK, NULL, fc_live_objects(NULL, NULL))                                \
    X(last_error_copy_NULL_buffer_with_a_length, W_BOTH, FC_OK, NULL, ST_VALUE(fc_last_error_copy(NULL, 64) == 0)) \
    X(end_update_NULL_updated_in_place, W_IDLE, FC_OK, NULL, end_update_null_output())                            \
    X(foreign_begin_NULL_stream_out, W_CAPTURING, FC_OK, NULL, foreign_begin_null_output())                       \
    X(cache_run_NULL_outcome, W_IDLE, FC_OK, NULL, fc_graph_cache_run(P0.cache, 1, record_add, NULL, NULL, NULL)) \
    X(cache_new_NULL_config, W_BOTH, FC_OK, NULL, ST_NEW(fc_graph_cache_new(P0.ctx, NULL)))                       \
    X(buckets_from_list_NULL_sizes_0_count, W_BOTH, FC_OK, NULL, ST_NEW(fc_buckets_from_list(NULL, 0, 64)))
/* clang-format on */
DEFINE_ROWS(null_outputs, NULL_OUTPUT_ROWS)

/* ---- lanes and conditionals ---- */

/* fc_graph_foreign_begin_on_ctx; a refused begin must write no stream, a
 * section it opens is ended again. */
static int foreign_begin_on(fc_cuda_ctx *ctx, const fc_cuda_ctx *lane)
{
    void *stream = CT_UNWRITTEN;
    int rc = fc_graph_foreign_begin_on_ctx(ctx, lane, TL, &stream);
    if (rc == FC_OK) {
        (void)fc_graph_foreign_end_ctx(ctx);
        return stream && stream != CT_UNWRITTEN ? rc : ST_WRONG_FALLBACK;
    }
    return stream == CT_UNWRITTEN ? rc : ST_WRONG_FALLBACK;
}

static int lane_breaks; /* calls of lane_counting_break */

static int lane_counting_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)live;
    (void)user;
    lane_breaks++;
    return 0;
}

/* fc_graph_break_ctx on `ctx`; a refused break must run nothing. */
static int break_on(fc_cuda_ctx *ctx)
{
    int before = lane_breaks;
    int rc = fc_graph_break_ctx(ctx, lane_counting_break, NULL);
    return rc != FC_OK && lane_breaks != before ? ST_CALLBACK_RAN : rc;
}

/* Lane 1 forked from lane 0, an add on it, joined back. */
static int fork_add_join(void)
{
    int rc = fc_ctx_wait_lane(P0.lane1, P0.ctx);
    if (rc == FC_OK) rc = fc_add_ctx(P0.lane1, P0.a, P0.b, P0.big, N);
    if (rc == FC_OK) rc = fc_ctx_wait_lane(P0.ctx, P0.lane1);
    return rc;
}

/* A foreign section on lane 1, `what` tried while it is open, the section
 * ended again: the status of `what` (1: lane 0 waits for lane 1; 2: lane
 * 1 waits for lane 0; 3: a conditional begins on lane 1). */
static int in_a_lane_section(int what)
{
    int rc = fc_graph_foreign_begin_on_ctx(P0.ctx, P0.lane1, TL, NULL);
    if (rc != FC_OK) return ST_WRONG_FALLBACK;
    fc_clear_last_error();
    rc = what == 1   ? fc_ctx_wait_lane(P0.ctx, P0.lane1)
         : what == 2 ? fc_ctx_wait_lane(P0.lane1, P0.ctx)
                     : fc_graph_cond_begin_ctx(P0.lane1, FC_COND_IF, P0.a, 0);
    if (rc == FC_OK && what == 3) (void)fc_graph_cond_abort_ctx(P0.lane1);
    /* (a success leaves the call's error in place for the check) */
    if (fc_graph_foreign_end_ctx(P0.ctx) != FC_OK) return ST_WRONG_FALLBACK;
    return rc;
}

#define KW_LANES "a context has lanes 0 to 63"
#define KW_TWO_CONTEXTS "belong to different contexts"
#define KW_LANE_OTHER "the lane belongs to another context"
#define KW_ON_A_LANE "no capture is open on a lane handle"
#define KW_OTHER_HANDLE "begun through another of its handles"

/* clang-format off */
#define LANE_ROWS(X)                                                                                              \
    X(lane_minus_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, "lane -1 is negative", ST_NEW(fc_ctx_lane(P0.ctx, -1)))     \
    X(lane_INT_MIN, W_BOTH, FC_ERR_INVALID_ARGUMENT, "is negative", ST_NEW(fc_ctx_lane(P0.ctx, INT_MIN)))         \
    X(lane_64, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_LANES, ST_NEW(fc_ctx_lane(P0.ctx, 64)))                        \
    X(lane_INT_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_LANES, ST_NEW(fc_ctx_lane(P0.ctx, INT_MAX)))              \
    X(lane_63_is_the_last, W_BOTH, FC_OK, NULL, ST_NEW(fc_ctx_lane(P0.ctx, 63)))                                  \
    X(lane_of_a_lane_handle, W_BOTH, FC_OK, NULL, ST_NEW(fc_ctx_lane(P0.lane1, 2)))                               \
    X(wait_lane_for_another_primary_context, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_TWO_CONTEXTS,                   \
      fc_ctx_wait_lane(P0.ctx, P0B.ctx))                                                                          \
    X(wait_lane_for_a_lane_of_another_primary_context, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_TWO_CONTEXTS,         \
      fc_ctx_wait_lane(P0.lane1, P0B.lane1))                                                                      \
    X(wait_lane_for_the_isolated_context, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_TWO_CONTEXTS,                      \
      fc_ctx_wait_lane(P0.ctx, ISO.ctx))                                                                          \
    X(wait_isolated_lane_for_the_primary_context, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_TWO_CONTEXTS,              \
      fc_ctx_wait_lane(ISO.lane1, P0.ctx))                                                                        \
    X(wait_lane_for_device_1, W_BOTH | W_D1, FC_ERR_INVALID_ARGUMENT, KW_TWO_CONTEXTS,                           \
      fc_ctx_wait_lane(P0.ctx, D1.ctx))                                                                           \
    X(wait_device_1_lane_for_a_device_0_lane, W_BOTH | W_D1, FC_ERR_INVALID_ARGUMENT, KW_TWO_CONTEXTS,           \
      fc_ctx_wait_lane(D1.lane1, P0.lane1))                                                                       \
    X(wait_lane_for_itself, W_BOTH, FC_OK, NULL, fc_ctx_wait_lane(P0.lane1, P0.lane1))                            \
    X(wait_lane_for_NULL, W_BOTH, FC_ERR_INVALID_ARGUMENT, "other is NULL", fc_ctx_wait_lane(P0.ctx, NULL))       \
    X(wait_lane_for_a_freed_context, W_BOTH, FC_ERR_INVALID_HANDLE, "already freed",                             \
      fc_ctx_wait_lane(P0.ctx, F.dead.ctx))                                                                       \
    X(foreign_begin_on_a_NULL_lane, W_CAPTURING, FC_ERR_INVALID_ARGUMENT, "lane is NULL",                        \
      foreign_begin_on(P0.ctx, NULL))                                                                             \
    X(lane_fork_add_join, W_BOTH, FC_OK, NULL, fork_add_join())                                                   \
    X(foreign_begin_on_without_a_recording, W_IDLE, FC_ERR_CAPTURE_STATE, KW_NO_CAPTURE,                         \
      foreign_begin_on(P0.ctx, P0.lane1))                                                                         \
    X(foreign_begin_on_a_lane_of_another_primary_context, W_CAPTURING, FC_ERR_INVALID_ARGUMENT, KW_LANE_OTHER,   \
      foreign_begin_on(P0.ctx, P0B.lane1))                                                                        \
    X(foreign_begin_on_the_isolated_context, W_CAPTURING, FC_ERR_INVALID_ARGUMENT, KW_LANE_OTHER,                \
      foreign_begin_on(P0.ctx, ISO.ctx))                                                                          \
    X(foreign_begin_on_a_device_1_lane, W_CAPTURING | W_D1, FC_ERR_INVALID_ARGUMENT, KW_LANE_OTHER,              \
      foreign_begin_on(P0.ctx, D1.lane1))                                                                         \
    X(foreign_begin_on_its_own_lane_1, W_CAPTURING, FC_OK, NULL, foreign_begin_on(P0.ctx, P0.lane1))              \
    X(begin_on_a_lane_handle, W_BOTH, FC_ERR_CAPTURE_STATE, "begins on the context itself (lane 0)",             \
      fc_graph_begin_ctx(P0.lane1))                                                                               \
    X(capture_on_a_lane_handle, W_BOTH, FC_ERR_CAPTURE_STATE, "lane 0", capture(P0.lane1, TL, record_add, 1))     \
    X(cache_on_a_lane_handle, W_BOTH, FC_ERR_INVALID_ARGUMENT, "records on the context itself (lane 0)",        \
      ST_NEW(fc_graph_cache_new(P0.lane1, NULL)))                                                                 \
    X(break_on_a_lane_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_ON_A_LANE, break_on(P0.lane1))                \
    X(end_on_a_lane_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_ON_A_LANE, ST_NEW(fc_graph_end_ctx(P0.lane1)))  \
    X(end_update_on_a_lane_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_ON_A_LANE,                              \
      end_update(P0.lane1, P0.graph))                                                                             \
    X(abort_on_a_lane_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_ON_A_LANE, fc_graph_abort_ctx(P0.lane1))      \
    X(foreign_begin_on_a_lane_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_ON_A_LANE, foreign_begin(P0.lane1, TL)) \
    X(foreign_end_on_a_lane_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_ON_A_LANE,                             \
      fc_graph_foreign_end_ctx(P0.lane1))                                                                         \
    X(end_through_a_second_lane_0_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_OTHER_HANDLE,                    \
      ST_NEW(fc_graph_end_ctx(P0.lane0)))                                                                         \
    X(break_through_a_second_lane_0_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_OTHER_HANDLE, break_on(P0.lane0)) \
    X(abort_through_a_second_lane_0_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_OTHER_HANDLE,                  \
      fc_graph_abort_ctx(P0.lane0))                                                                               \
    X(begin_through_a_second_lane_0_handle, W_CAPTURING, FC_ERR_CAPTURE_STATE, KW_OPEN,                          \
      fc_graph_begin_ctx(P0.lane0))                                                                               \
    X(wait_for_a_lane_in_a_foreign_section, W_CAPTURING, FC_ERR_CAPTURE_STATE, "end the section first",         \
      in_a_lane_section(1))                                                                                       \
    X(wait_of_a_lane_in_a_foreign_section, W_CAPTURING, FC_ERR_CAPTURE_STATE, "end the section first",          \
      in_a_lane_section(2))                                                                                       \
    X(cond_begin_on_a_lane_in_a_foreign_section, W_CAPTURING, FC_ERR_CAPTURE_STATE, "end the section first",    \
      in_a_lane_section(3))                                                                                       \
    X(cond_begin_misaligned_buffer, W_BOTH, FC_ERR_INVALID_ARGUMENT, "not 4-byte aligned",                       \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, F.odd, 0))                                                      \
    X(cond_begin_2_byte_buffer, W_BOTH, FC_ERR_BUFFER_TOO_SMALL, "the buffer holds 2",                           \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_WHILE, F.tiny, 0))                                                  \
    X(cond_begin_on_device_1_buffer, W_BOTH | W_D1, FC_ERR_WRONG_DEVICE, "lives on device 1",                    \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, D1.a, 0))                                                       \
    X(cond_begin_freed_buffer, W_BOTH, FC_ERR_INVALID_HANDLE, "already freed",                                   \
      fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, F.dead.buf, 0))
/* clang-format on */

DEFINE_ROWS(lanes_and_conditionals, LANE_ROWS)

/* ---- the graph cache and graph diagnostics ---- */

static int cache_record_add(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    return fc_add_ctx(ctx, P0.a, P0.b, P0.out, N);
}

/* fc_graph_cache_new with the defaults changed by `tweak`. */
static int cache_with(void (*tweak)(fc_graph_cache_config *))
{
    fc_graph_cache_config c;
    fc_graph_cache_config_default(&c);
    tweak(&c);
    return ST_NEW(fc_graph_cache_new(P0.ctx, &c));
}
static void tries_0(fc_graph_cache_config *c) { c->max_tries = 0; }
static void tries_minus_1(fc_graph_cache_config *c) { c->max_tries = -1; }
static void threshold_0(fc_graph_cache_config *c) { c->fail_threshold = 0; }
static void backoff_inverted(fc_graph_cache_config *c) { c->backoff_ms = 500, c->max_backoff_ms = 100; }
static void mode_9(fc_graph_cache_config *c) { c->mode = 9; }

/* fc_graph_cache_run of a key never captured; -1 in *outcome on failure. */
static int cache_run_new_key(fc_record_fn rec)
{
    int outcome = 77;
    int rc = fc_graph_cache_run(P0.cache, 424242, rec, NULL, NULL, &outcome);
    (void)fc_graph_cache_remove(P0.cache, 424242);
    return rc != FC_OK && outcome != -1 ? ST_WRONG_FALLBACK : rc;
}

static int cache_run_key_1(void)
{
    int outcome = 77;
    int rc = fc_graph_cache_run(P0.cache, 1, cache_record_add, NULL, NULL, &outcome);
    return rc != FC_OK && outcome != -1 ? ST_WRONG_FALLBACK : rc;
}

#define KW_NO_GRAPH "has no cached graph"
#define UNWRITABLE "/nonexistent-fc-dir/graph.dot"

/* clang-format off */
#define CACHE_ROWS(X)                                                                                             \
    X(cache_max_tries_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, "max_tries must be at least 1", cache_with(tries_0))     \
    X(cache_max_tries_minus_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, "max_tries", cache_with(tries_minus_1))           \
    X(cache_fail_threshold_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, "fail_threshold", cache_with(threshold_0))         \
    X(cache_backoff_above_max, W_BOTH, FC_ERR_INVALID_ARGUMENT, "backoff", cache_with(backoff_inverted))          \
    X(cache_mode_9, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_MODE, cache_with(mode_9))                                 \
    X(cache_run_NULL_record, W_BOTH, FC_ERR_INVALID_ARGUMENT, "record is NULL", cache_run_new_key(NULL))          \
    X(cache_run_NULL_record_on_a_hit, W_IDLE, FC_ERR_INVALID_ARGUMENT, "record is NULL",                         \
      fc_graph_cache_run(P0.cache, 1, NULL, NULL, NULL, NULL))                                                     \
    X(cache_run_hit, W_IDLE, FC_OK, NULL, cache_run_key_1())                                                      \
    X(cache_run_while_the_context_captures, W_CAPTURING, FC_ERR_CAPTURE_STATE, "captur",                         \
      cache_run_new_key(cache_record_add))                                                                        \
    X(cache_hit_while_the_context_captures, W_CAPTURING, FC_ERR_CAPTURE_STATE, "captur", cache_run_key_1())       \
    X(cache_stats_NULL_out, W_BOTH, FC_ERR_INVALID_ARGUMENT, "out is NULL", fc_graph_cache_stats_get(P0.cache, NULL)) \
    X(cache_node_count_unknown_key, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_NO_GRAPH,                                \
      ST_VALUE(fc_graph_cache_node_count(P0.cache, 99) == 0))                                                     \
    X(cache_debug_dot_unknown_key, W_BOTH, FC_ERR_INVALID_ARGUMENT, KW_NO_GRAPH,                                 \
      fc_graph_cache_debug_dot(P0.cache, 99, "/tmp/fc-hostile-never.dot"))                                        \
    X(cache_debug_dot_NULL_path, W_BOTH, FC_ERR_INVALID_ARGUMENT, "path is NULL",                                \
      fc_graph_cache_debug_dot(P0.cache, 1, NULL))                                                                \
    X(cache_invalidate_unknown_key, W_BOTH, FC_OK, NULL, fc_graph_cache_invalidate(P0.cache, 99))                \
    X(cache_remove_unknown_key, W_BOTH, FC_OK, NULL, fc_graph_cache_remove(P0.cache, 99))                        \
    X(cache_on_isolated_context, W_BOTH, FC_OK, NULL, ST_NEW(fc_graph_cache_new(ISO.ctx, NULL)))                 \
    X(segment_node_count_index_1, W_BOTH, FC_ERR_INVALID_ARGUMENT, "out of range",                               \
      ST_VALUE(fc_graph_segment_node_count(P0.graph, 1) == 0))                                                    \
    X(segment_node_count_index_SIZE_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, "out of range",                        \
      ST_VALUE(fc_graph_segment_node_count(P0.graph, SIZE_MAX) == 0))                                             \
    X(debug_dot_NULL_path, W_BOTH, FC_ERR_INVALID_ARGUMENT, "path is NULL", fc_graph_debug_dot(P0.graph, NULL))   \
    X(debug_dot_empty_path, W_BOTH, FC_ERR_INVALID_ARGUMENT, "path is empty", fc_graph_debug_dot(P0.graph, ""))   \
    X(debug_dot_unwritable_path, W_BOTH, FC_ERR_INVALID_ARGUMENT, "creating", fc_graph_debug_dot(P0.graph, UNWRITABLE)) \
    X(cache_debug_dot_unwritable_path, W_BOTH, FC_ERR_INVALID_ARGUMENT, "creating",                              \
      fc_graph_cache_debug_dot(P0.cache, 1, UNWRITABLE))                                                          \
    X(buckets_for_0, W_BOTH, FC_ERR_INVALID_ARGUMENT, "outside the bucket range", ST_VALUE(fc_buckets_for(F.buckets, 0) == 0)) \
    X(buckets_ladder_SIZE_MAX, W_BOTH, FC_ERR_INVALID_ARGUMENT, "largest ladder", ST_NEW(fc_buckets_ladder(SIZE_MAX)))
/* clang-format on */
DEFINE_ROWS(cache_and_diagnostics, CACHE_ROWS)

/* ---- scenarios -------------------------------------------------------------------------- */

/* Reads back p0.out after replaying g (poisoned first): all equal to want? */
static int replay_gives(fc_cuda_ctx *ctx, fc_graph *g, fc_buffer *out, float want)
{
    return ct_replay_gives(ctx, g, out, host_poison, N, want);
}

static int out_is(ctx_set *s, float want)
{
    float got[N];
    if (fc_sync_ctx(s->ctx) != FC_OK || fc_buffer_download(s->out, got, sizeof got) != FC_OK) return 0;
    for (int i = 0; i < N; i++)
        if (ct_bits(got[i]) != ct_bits(want) && !(got[i] == want)) return 0;
    return 1;
}

/* Inside a break function at capture time nothing may begin, end, abort or
 * update the capture; breaks pass through; at replay begin is refused too. */
typedef struct {
    int replaying;
    int nested_calls;
} inside_state;

static int nested_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)live;
    ((inside_state *)user)->nested_calls++;
    return 0;
}

#define KW_IN_BREAK "break function"

/* p0's cache key 1 (a hit) from inside a break: launched, no capture. */
static int cache_hit_in_break(void)
{
    int outcome = 77;
    int rc = fc_graph_cache_run(P0.cache, 1, cache_record_add, NULL, NULL, &outcome);
    return rc == FC_OK && outcome != FC_CACHE_HIT ? ST_WRONG_FALLBACK : rc;
}

/* A key p0's cache must capture, from inside a break: refused. */
static int cache_capture_in_break(void)
{
    int outcome = 77;
    int rc = fc_graph_cache_run(P0.cache, 4242, cache_record_add, NULL, NULL, &outcome);
    (void)fc_graph_cache_remove(P0.cache, 4242);
    return rc != FC_OK && outcome != -1 ? ST_WRONG_FALLBACK : rc;
}

static int rules_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    inside_state *s = (inside_state *)user;
    (void)live;
    const char *when = s->replaying ? "at replay" : "at capture";
    char name[96];
#define IN_BREAK(what) (snprintf(name, sizeof name, "%s inside a break %s", what, when), name)
    EXPECT(IN_BREAK("break"), fc_graph_break_ctx(ctx, nested_break, s), FC_OK, NULL);
    EXPECT(IN_BREAK("begin"), fc_graph_begin_ctx(ctx), FC_ERR_CAPTURE_STATE, KW_IN_BREAK);
    EXPECT(IN_BREAK("begin_live"), fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_RELAXED, s), FC_ERR_CAPTURE_STATE,
           KW_IN_BREAK);
    EXPECT(IN_BREAK("capture"), capture(ctx, TL, record_add, 2), FC_ERR_CAPTURE_STATE, KW_IN_BREAK);
    EXPECT(IN_BREAK("is_capturing"), ST_VALUE(fc_graph_is_capturing_ctx(ctx) == 0), FC_OK, NULL);
    /* Eager calls are fine: sync, copies, allocations, another graph, a
     * cache hit, lane waits, the recording mode. */
    EXPECT(IN_BREAK("sync"), fc_sync_ctx(ctx), FC_OK, NULL);
    EXPECT(IN_BREAK("upload"), fc_buffer_upload(P0.big, host_big, 64), FC_OK, NULL);
    EXPECT(IN_BREAK("download"), fc_buffer_download(P0.big, host_big, 64), FC_OK, NULL);
    EXPECT(IN_BREAK("alloc"), ST_NEW(fc_buffer_alloc_ctx(ctx, 4096)), FC_OK, NULL);
    EXPECT(IN_BREAK("launch a graph of the context"), fc_graph_launch(P0.graph), FC_OK, NULL);
    EXPECT(IN_BREAK("cache hit"), cache_hit_in_break(), FC_OK, NULL);
    EXPECT(IN_BREAK("lane wait"), fc_ctx_wait_lane(P0.lane1, ctx), FC_OK, NULL);
    EXPECT(IN_BREAK("set_recording_mode"), fc_ctx_set_recording_mode(ctx, fc_ctx_recording_mode(ctx)), FC_OK, NULL);
    EXPECT(IN_BREAK("builds"), ST_VALUE(fc_graph_builds_ctx(ctx) >= 0), FC_OK, NULL);
    /* Whatever would record or open a recording is refused. */
    EXPECT(IN_BREAK("cache capture"), cache_capture_in_break(), FC_ERR_CAPTURE_STATE, "cannot capture now");
    EXPECT(IN_BREAK("foreign_begin"), foreign_begin(ctx, TL), FC_ERR_CAPTURE_STATE, KW_IN_BREAK "|no capture is open");
    EXPECT(IN_BREAK("foreign_end"), fc_graph_foreign_end_ctx(ctx), FC_ERR_CAPTURE_STATE,
           KW_IN_BREAK "|no capture is open");
    EXPECT(IN_BREAK("cond_begin"), fc_graph_cond_begin_ctx(ctx, FC_COND_IF, P0.a, 0), FC_ERR_CAPTURE_STATE,
           "needs an open recording");
    if (!s->replaying) {
        EXPECT(IN_BREAK("end"), ST_NEW(fc_graph_end_ctx(ctx)), FC_ERR_CAPTURE_STATE, KW_IN_BREAK);
        EXPECT(IN_BREAK("abort"), fc_graph_abort_ctx(ctx), FC_ERR_CAPTURE_STATE, KW_IN_BREAK);
        EXPECT(IN_BREAK("end_update"), end_update(ctx, P0B.graph), FC_ERR_CAPTURE_STATE, KW_IN_BREAK);
    }
    /* Eager work inside a break is fine: out = out * b. */
    return fc_mul_ctx(ctx, P0.out, P0.b, P0.out, N);
#undef IN_BREAK
}

static void capture_rules_inside_breaks(fc_cuda_ctx *unused)
{
    (void)unused;
    inside_state s = {0, 0};
    fc_graph *g = NULL;
    char why[512];
    EXPECT("begin", fc_graph_begin_live_ctx(P0.ctx, TL, &s), FC_OK, NULL);
    EXPECT("record add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    /* (the refused calls inside the break leave their errors in the slot) */
    int rc = fc_graph_break_ctx(P0.ctx, rules_break, &s);
    EXPECT_TRUE("break", rc == FC_OK, "returned %d: %s", rc, fc_last_error());
    EXPECT("record add after the break", fc_add_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
    fc_clear_last_error();
    g = fc_graph_end_ctx(P0.ctx);
    EXPECT_TRUE("end after the break", g != NULL, "end failed: %s", fc_last_error());
    EXPECT_TRUE("nested break ran once at capture", s.nested_calls == 1, "ran %d times", s.nested_calls);
    if (g) {
        s.replaying = 1;
        /* (1.5 + 2) * 2 + 2 = 9 */
        EXPECT_TRUE("replay after the rules", replay_gives(P0.ctx, g, P0.out, 9.0f), "wrong numbers");
        EXPECT_TRUE("nested break ran again at replay", s.nested_calls == 2, "ran %d times", s.nested_calls);
    }
    fc_graph_free(g);
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* Failing break and record functions spoil the capture and close it. */
static int failing_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)live;
    (void)user;
    return -3;
}

static int failing_record(fc_cuda_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 7;
}

static fc_graph *g_record_ended;

static int record_that_ends(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    if (fc_add_ctx(ctx, P0.a, P0.b, P0.out, N) != FC_OK) return 1;
    g_record_ended = fc_graph_end_ctx(ctx);
    return 0;
}

static int record_that_aborts(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    return fc_graph_abort_ctx(ctx);
}

static int record_that_captures(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    return capture(ctx, TL, record_add, 2);
}

static int record_with_failing_break(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    return fc_graph_break_ctx(ctx, failing_break, NULL);
}

static int double_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)live;
    (void)user;
    return fc_mul_ctx(ctx, P0.out, P0.b, P0.out, N);
}

static int record_with_break(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    if (fc_add_ctx(ctx, P0.a, P0.b, P0.out, N) != FC_OK) return 1;
    return fc_graph_break_ctx(ctx, double_break, NULL);
}

static void failing_callbacks(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    EXPECT("begin", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("failing break at capture", fc_graph_break_ctx(P0.ctx, failing_break, NULL), FC_ERR_CALLBACK,
           "returned -3");
    EXPECT("the capture stays open after a failing break", ST_VALUE(fc_graph_is_capturing_ctx(P0.ctx) == 1), FC_OK,
           NULL);
    EXPECT("end after a failing break", ST_NEW(fc_graph_end_ctx(P0.ctx)), FC_ERR_CALLBACK, "returned -3");
    EXPECT("not capturing after that end", ST_VALUE(fc_graph_is_capturing_ctx(P0.ctx) == 0), FC_OK, NULL);
    EXPECT("failing break outside a capture", fc_graph_break_ctx(P0.ctx, failing_break, NULL), FC_ERR_CALLBACK,
           "returned -3");

    EXPECT("record returns 7", capture(P0.ctx, TL, failing_record, 3), FC_ERR_CALLBACK, "record function returned 7");
    EXPECT("record aborts the capture", capture(P0.ctx, TL, record_that_aborts, 3), FC_ERR_CAPTURE_STATE,
           KW_NO_CAPTURE);
    EXPECT("record captures again", capture(P0.ctx, TL, record_that_captures, 3), FC_ERR_CALLBACK,
           "record function returned 6");
    EXPECT("record with a failing break", capture(P0.ctx, TL, record_with_failing_break, 3), FC_ERR_CALLBACK,
           "record function returned 9");
    g_record_ended = NULL;
    EXPECT("record ends the capture itself", capture(P0.ctx, TL, record_that_ends, 3), FC_ERR_CAPTURE_STATE,
           KW_NO_CAPTURE);
    EXPECT_TRUE("the graph the record function ended works",
                g_record_ended && replay_gives(P0.ctx, g_record_ended, P0.out, 3.5f), "no graph or wrong numbers: %s",
                fc_last_error());
    fc_graph_free(g_record_ended);

    fc_graph *g = NULL;
    EXPECT("record with a break", fc_graph_capture_ctx(P0.ctx, TL, record_with_break, NULL, 4, &g), FC_OK, NULL);
    EXPECT_TRUE("its graph: 3 pieces, 1 try, replays (1.5 + 2) * 2 = 7",
                g && fc_graph_segment_count(g) == 3 && fc_graph_capture_tries(g) == 1 &&
                    replay_gives(P0.ctx, g, P0.out, 7.0f),
                "segments %d, tries %d", fc_graph_segment_count(g), fc_graph_capture_tries(g));
    fc_graph_free(g);
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- other threads during a capture ---- */

typedef enum {
    T_EAGER_WORK,        /* full eager work on p0b and iso, contexts and modules churned */
    T_RECORD_INTO,       /* fc_add_ctx on the capturing p0: recorded */
    T_REFUSED_ON_P0,     /* sync, upload, graph launch on the capturing p0: refused; pool alloc fine */
    T_END_FOREIGN,       /* end / abort / end_update / break of the main thread's capture */
    T_END_RELAXED,       /* break and end the main thread's RELAXED capture */
} thread_job;

typedef struct {
    thread_job job;
    int mode;
    fc_graph *graph; /* T_END_RELAXED: the graph it ended */
} thread_args;

static int double_out(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)live;
    (void)user;
    return fc_mul_ctx(ctx, P0.out, P0.b, P0.out, N);
}

/* Eager work on a set: upload, op, download and check, on this thread. */
static int eager_roundtrip(ctx_set *s, const char *what)
{
    char name[128];
    float h[N], got[N];
    fc_buffer *t = NULL;
    ct_fill_value(h, N, 0.25f);
    snprintf(name, sizeof name, "%s: alloc 1 MiB", what);
    EXPECT(name, (t = fc_buffer_alloc_ctx(s->ctx, 1 << 20)) ? FC_OK : fc_last_error_code(), FC_OK, NULL);
    if (!t) return 0;
    snprintf(name, sizeof name, "%s: upload", what);
    EXPECT(name, fc_buffer_upload(t, h, sizeof h), FC_OK, NULL);
    snprintf(name, sizeof name, "%s: add", what);
    EXPECT(name, fc_add_ctx(s->ctx, t, s->b, t, N), FC_OK, NULL);
    snprintf(name, sizeof name, "%s: sync", what);
    EXPECT(name, fc_sync_ctx(s->ctx), FC_OK, NULL);
    snprintf(name, sizeof name, "%s: download", what);
    EXPECT(name, fc_buffer_download(t, got, sizeof got), FC_OK, NULL);
    int right = 1;
    for (int i = 0; i < N; i++) right &= got[i] == 2.25f;
    snprintf(name, sizeof name, "%s: numbers", what);
    EXPECT_TRUE(name, right, "got %g, want 2.25", (double)got[0]);
    fc_buffer_free(t);
    return 1;
}

static void *capture_thread(void *p)
{
    thread_args *a = (thread_args *)p;
    switch (a->job) {
    case T_EAGER_WORK: {
        eager_roundtrip(&P0B, "other primary context of device 0");
        eager_roundtrip(&ISO, "isolated context of device 0");
        if (F.has_d1) eager_roundtrip(&D1, "device 1");
        fc_cuda_ctx *c;
        EXPECT("create a primary context", (c = fc_cuda_init_device(0)) ? FC_OK : fc_last_error_code(), FC_OK, NULL);
        fc_cuda_ctx_free(c);
        EXPECT("create an isolated context", (c = fc_cuda_init_device_isolated(0)) ? FC_OK : fc_last_error_code(),
               FC_OK, NULL);
        fc_cuda_ctx_free(c);
        fc_module *m = NULL;
        EXPECT("load a module", (m = fc_module_load_ptx(P0B.ctx, USER_PTX)) ? FC_OK : fc_last_error_code(), FC_OK,
               NULL);
        EXPECT("get a kernel", ST_NEW(fc_module_get_kernel(m, "axpy_f32")), FC_OK, NULL);
        fc_module_free(m);
        size_t free_b = 0, total_b = 0;
        EXPECT("fc_ctx_mem_info", fc_ctx_mem_info(P0B.ctx, &free_b, &total_b), FC_OK, NULL);
        EXPECT("graph of another context launches", fc_graph_launch(P0B.graph), FC_OK, NULL);
        EXPECT("and syncs", fc_sync_ctx(P0B.ctx), FC_OK, NULL);
        break;
    }
    case T_RECORD_INTO:
        EXPECT("add on the capturing context from another thread", fc_add_ctx(P0.ctx, P0.a, P0.a, P0.out, N), FC_OK,
               NULL);
        break;
    case T_REFUSED_ON_P0: {
        EXPECT("sync of the capturing context from another thread", fc_sync_ctx(P0.ctx), FC_ERR_CAPTURE_STATE,
               KW_WHILE);
        EXPECT("upload on the capturing context from another thread", fc_buffer_upload(P0.big, host_big, 64),
               FC_ERR_CAPTURE_STATE, KW_WHILE);
        EXPECT("launch of its graph from another thread", fc_graph_launch(P0.graph), FC_ERR_CAPTURE_STATE, KW_WHILE);
        fc_buffer *t = NULL;
        EXPECT("alloc on the capturing context from another thread (capture pool)",
               (t = fc_buffer_alloc_ctx(P0.ctx, 4096)) ? FC_OK : fc_last_error_code(), FC_OK, NULL);
        EXPECT_TRUE("the pool holds it", fc_ctx_pool_bytes(P0.ctx) >= 4096, "pool %zu bytes",
                    fc_ctx_pool_bytes(P0.ctx));
        fc_buffer_free(t);
        break;
    }
    case T_END_FOREIGN: {
        const char *kw = "opened in THREAD_LOCAL or GLOBAL mode";
        EXPECT("end on another thread", ST_NEW(fc_graph_end_ctx(P0.ctx)), FC_ERR_CAPTURE_STATE, kw);
        EXPECT("abort on another thread", fc_graph_abort_ctx(P0.ctx), FC_ERR_CAPTURE_STATE, kw);
        EXPECT("end_update on another thread", end_update(P0.ctx, P0.graph), FC_ERR_CAPTURE_STATE, kw);
        EXPECT("end_update with a NULL graph on another thread", end_update(P0.ctx, NULL), FC_ERR_CAPTURE_STATE,
               "refused as well");
        EXPECT("break on another thread", fc_graph_break_ctx(P0.ctx, double_out, NULL), FC_ERR_CAPTURE_STATE, kw);
        EXPECT("still capturing", ST_VALUE(fc_graph_is_capturing_ctx(P0.ctx) == 1), FC_OK, NULL);
        break;
    }
    case T_END_RELAXED:
        EXPECT("break a RELAXED capture on another thread", fc_graph_break_ctx(P0.ctx, double_out, NULL), FC_OK, NULL);
        EXPECT("record after it on that thread", fc_add_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
        fc_clear_last_error();
        a->graph = fc_graph_end_ctx(P0.ctx);
        EXPECT_TRUE("end a RELAXED capture on another thread", a->graph != NULL, "%s", fc_last_error());
        break;
    }
    return NULL;
}

static void run_thread(thread_args *a)
{
    pthread_t th;
    if (pthread_create(&th, NULL, capture_thread, a) != 0) {
        EXPECT_TRUE("pthread_create", 0, "failed");
        return;
    }
    pthread_join(th, NULL);
}

static void threads_during_a_capture(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    static const int modes[] = {FC_CAPTURE_MODE_THREAD_LOCAL, FC_CAPTURE_MODE_GLOBAL};
    for (size_t m = 0; m < CT_COUNT(modes); m++) {
        const char *mode = modes[m] == FC_CAPTURE_MODE_GLOBAL ? "GLOBAL" : "THREAD_LOCAL";
        char name[128];
        /* Another thread's eager work on the same device, then ops refused on p0. */
        snprintf(name, sizeof name, "%s: begin", mode);
        EXPECT(name, fc_graph_begin_ctx_mode(P0.ctx, modes[m]), FC_OK, NULL);
        EXPECT("record add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
        thread_args a = {T_EAGER_WORK, modes[m], NULL};
        run_thread(&a);
        a.job = T_REFUSED_ON_P0;
        run_thread(&a);
        a.job = T_END_FOREIGN;
        run_thread(&a);
        snprintf(name, sizeof name, "%s: capture survives other threads (replays 3.5)", mode);
        if (getenv("FC_UNDER_SANITIZER")) {
            /* compute-sanitizer's instrumentation synchronises the device
             * around the other thread's calls, which invalidates this
             * capture; the rule is checked in the runs without it. */
            printf("[note] %s: not checked under compute-sanitizer (its instrumentation synchronises the device)\n",
                   name);
        } else {
            EXPECT_TRUE(name, capture_still_works(why, sizeof why), "%s", why);
        }
        if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    }

    /* Work queued into the capture from another thread is recorded, not run. */
    EXPECT("poison p0.out", fc_buffer_upload(P0.out, host_poison, sizeof host_poison), FC_OK, NULL);
    EXPECT("begin", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    thread_args r = {T_RECORD_INTO, TL, NULL};
    run_thread(&r);
    fc_clear_last_error();
    fc_graph *g = fc_graph_end_ctx(P0.ctx);
    EXPECT_TRUE("end", g != NULL, "%s", fc_last_error());
    EXPECT_TRUE("the other thread's add did not run eagerly", out_is(&P0, ct_from_bits(CT_POISON_BITS)),
                "p0.out changed before the replay");
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT_TRUE("its add replays: 1.5 + 1.5 = 3", g && replay_gives(P0.ctx, g, P0.out, 3.0f), "wrong numbers");
    fc_graph_free(g);

    /* A RELAXED capture may be split and ended on another thread. */
    EXPECT("begin RELAXED", fc_graph_begin_ctx_mode(P0.ctx, FC_CAPTURE_MODE_RELAXED), FC_OK, NULL);
    EXPECT("record add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    thread_args e = {T_END_RELAXED, FC_CAPTURE_MODE_RELAXED, NULL};
    run_thread(&e);
    EXPECT_TRUE("its graph replays (1.5 + 2) * 2 + 2 = 9", e.graph && replay_gives(P0.ctx, e.graph, P0.out, 9.0f),
                "wrong numbers");
    fc_graph_free(e.graph);
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- foreign sections ---- */

#define KW_NO_SECTION "no foreign section is open"
#define KW_SECTION_OPEN "foreign section is already open"

static int counting_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    (void)ctx;
    (void)live;
    (*(int *)user)++;
    return 0;
}

static int foreign_fails(void *stream, void *user)
{
    (void)stream;
    (void)user;
    return 5;
}

/* Library work inside the section: recorded in it, in order. */
static int foreign_adds(void *stream, void *user)
{
    (void)stream;
    (void)user;
    return fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N);
}

/* A break inside the section: refused (returns its status). */
static int foreign_breaks(void *stream, void *user)
{
    (void)stream;
    return fc_graph_break_ctx(P0.ctx, counting_break, user);
}

/* Another thread's calls on the main thread's open section. */
typedef struct {
    int relaxed; /* the section is RELAXED: its end succeeds here */
} section_thread;

static void *section_thread_main(void *p)
{
    const section_thread *t = (const section_thread *)p;
    if (t->relaxed) {
        EXPECT("end a RELAXED section on another thread", fc_graph_foreign_end_ctx(P0.ctx), FC_OK, NULL);
        return NULL;
    }
    EXPECT("end a THREAD_LOCAL section on another thread", fc_graph_foreign_end_ctx(P0.ctx), FC_ERR_CAPTURE_STATE,
           "only that thread can end it");
    EXPECT("end its THREAD_LOCAL recording on another thread", ST_NEW(fc_graph_end_ctx(P0.ctx)), FC_ERR_CAPTURE_STATE,
           "opened in THREAD_LOCAL or GLOBAL mode");
    EXPECT("queue work into the section from another thread", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK,
           NULL);
    return NULL;
}

static void run_section_thread(int relaxed)
{
    section_thread t = {relaxed};
    pthread_t th;
    if (pthread_create(&th, NULL, section_thread_main, &t) != 0) {
        EXPECT_TRUE("pthread_create", 0, "failed");
        return;
    }
    pthread_join(th, NULL);
}

/* Ends p0's recording: its graph must replay `want` into p0.out. */
static void end_and_replay(const char *name, float want)
{
    fc_clear_last_error();
    fc_graph *g = fc_graph_end_ctx(P0.ctx);
    EXPECT_TRUE(name, g && replay_gives(P0.ctx, g, P0.out, want), "%s: %s",
                g ? "wrong numbers" : "end failed", fc_last_error());
    fc_graph_free(g);
}

static void foreign_sections(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    void *stream = NULL, *again = CT_UNWRITTEN;
    int breaks = 0;
    const int saved = fc_ctx_recording_mode(P0.ctx);

    EXPECT("set FC_RECORDING_BUILD", fc_ctx_set_recording_mode(P0.ctx, FC_RECORDING_BUILD), FC_OK, NULL);
    EXPECT("it reads back", ST_VALUE(fc_ctx_recording_mode(P0.ctx) == FC_RECORDING_BUILD), FC_OK, NULL);
    EXPECT("a recording begun now builds", ST_VALUE(fc_graph_builds_ctx(P0.ctx) == 1), FC_OK, NULL);

    /* Wrong order, refusals and threads inside one recording; its graph
     * must come out right: (1.5 + 2) * 2 = 7. */
    EXPECT("poison p0.out", fc_buffer_upload(P0.out, host_poison, sizeof host_poison), FC_OK, NULL);
    EXPECT("begin", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("the open recording builds", ST_VALUE(fc_graph_builds_ctx(P0.ctx) == 1), FC_OK, NULL);
    EXPECT("section end without a begin", fc_graph_foreign_end_ctx(P0.ctx), FC_ERR_CAPTURE_STATE, KW_NO_SECTION);
    EXPECT("section begin", fc_graph_foreign_begin_ctx(P0.ctx, TL, &stream), FC_OK, NULL);
    EXPECT_TRUE("it gives the stream", stream != NULL, "stream_out = NULL");
    EXPECT("section begin twice", fc_graph_foreign_begin_ctx(P0.ctx, TL, &again), FC_ERR_CAPTURE_STATE,
           KW_SECTION_OPEN);
    EXPECT_TRUE("the refused begin wrote nothing", again == CT_UNWRITTEN, "stream_out = %p", again);
    EXPECT("record_foreign inside a section", record_foreign(P0.ctx, TL, counting_foreign), FC_ERR_CAPTURE_STATE,
           KW_SECTION_OPEN);
    EXPECT("break inside a section", fc_graph_break_ctx(P0.ctx, counting_break, &breaks), FC_ERR_CAPTURE_STATE,
           "end the foreign section first");
    EXPECT_TRUE("the refused break ran nothing", breaks == 0, "its function ran %d times", breaks);
    EXPECT("still recording", ST_VALUE(fc_graph_is_capturing_ctx(P0.ctx) == 1), FC_OK, NULL);
    EXPECT("mode change while recording", fc_ctx_set_recording_mode(P0.ctx, FC_RECORDING_CAPTURE), FC_OK, NULL);
    EXPECT("the open recording keeps building", ST_VALUE(fc_graph_builds_ctx(P0.ctx) == 1), FC_OK, NULL);
    EXPECT("back to FC_RECORDING_BUILD", fc_ctx_set_recording_mode(P0.ctx, FC_RECORDING_BUILD), FC_OK, NULL);
    run_section_thread(0); /* refused end of section and recording; an add queued into the section */
    EXPECT("section end on its own thread", fc_graph_foreign_end_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("section end again", fc_graph_foreign_end_ctx(P0.ctx), FC_ERR_CAPTURE_STATE, KW_NO_SECTION);
    EXPECT("mul after the section", fc_mul_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
    fc_clear_last_error();
    fc_graph *g = fc_graph_end_ctx(P0.ctx);
    EXPECT_TRUE("end", g != NULL, "%s", fc_last_error());
    EXPECT_TRUE("nothing ran while recording", out_is(&P0, ct_from_bits(CT_POISON_BITS)),
                "p0.out changed before the replay");
    EXPECT_TRUE("one segment (a section is no break)", g && fc_graph_segment_count(g) == 1, "%d segments",
                fc_graph_segment_count(g));
    EXPECT_TRUE("the section's add, then the mul: (1.5 + 2) * 2 = 7", g && replay_gives(P0.ctx, g, P0.out, 7.0f),
                "wrong numbers");
    fc_graph_free(g);

    /* The end of a recording ends an open section and keeps its work. */
    EXPECT("begin (section left open)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("section begin, NULL stream_out", fc_graph_foreign_begin_ctx(P0.ctx, TL, NULL), FC_OK, NULL);
    EXPECT("add in the section", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    end_and_replay("end with the section open keeps its add: 3.5", 3.5f);

    /* A RELAXED section may be ended on another thread. */
    EXPECT("begin (RELAXED section)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("RELAXED section begin", fc_graph_foreign_begin_ctx(P0.ctx, FC_CAPTURE_MODE_RELAXED, NULL), FC_OK, NULL);
    EXPECT("add in the section", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    run_section_thread(1);
    EXPECT("mul after it", fc_mul_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
    end_and_replay("its graph replays 7", 7.0f);

    /* Abort drops an open section. */
    EXPECT("begin (aborted)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("section begin", fc_graph_foreign_begin_ctx(P0.ctx, TL, NULL), FC_OK, NULL);
    EXPECT("add in the section", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    EXPECT("abort with the section open", fc_graph_abort_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("not recording afterwards", ST_VALUE(fc_graph_is_capturing_ctx(P0.ctx) == 0), FC_OK, NULL);
    EXPECT_TRUE("the stream is out of capture: p0 usable", all_usable(why, sizeof why), "%s", why);

    /* fc_graph_record_foreign_ctx: failing and breaking functions, work. */
    EXPECT("begin (record_foreign)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("a foreign function returning 5", record_foreign(P0.ctx, TL, foreign_fails), FC_ERR_CALLBACK,
           "foreign function returned 5");
    EXPECT("its section was ended", fc_graph_foreign_end_ctx(P0.ctx), FC_ERR_CAPTURE_STATE, KW_NO_SECTION);
    breaks = 0;
    fc_clear_last_error();
    int rc = fc_graph_record_foreign_ctx(P0.ctx, TL, foreign_breaks, &breaks);
    EXPECT_TRUE("a foreign function whose break is refused fails with its status (6)",
                rc == FC_ERR_CALLBACK && strstr(fc_last_error(), "returned 6") && breaks == 0,
                "rc %d, break ran %d times, \"%s\"", rc, breaks, fc_last_error());
    EXPECT("a foreign function queuing an add", record_foreign(P0.ctx, TL, foreign_adds), FC_OK, NULL);
    EXPECT("mul after it", fc_mul_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
    end_and_replay("the recording was not spoiled: 7", 7.0f);

    /* FC_RECORDING_CAPTURE: sections change nothing. */
    EXPECT("set FC_RECORDING_CAPTURE", fc_ctx_set_recording_mode(P0.ctx, FC_RECORDING_CAPTURE), FC_OK, NULL);
    EXPECT("a recording begun now captures", ST_VALUE(fc_graph_builds_ctx(P0.ctx) == 0), FC_OK, NULL);
    EXPECT("begin (captures)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("the open recording captures", ST_VALUE(fc_graph_builds_ctx(P0.ctx) == 0), FC_OK, NULL);
    EXPECT("section end without a begin: nothing to do", fc_graph_foreign_end_ctx(P0.ctx), FC_OK, NULL);
    stream = NULL;
    EXPECT("section begin gives the stream", fc_graph_foreign_begin_ctx(P0.ctx, TL, &stream), FC_OK, NULL);
    EXPECT_TRUE("a stream", stream != NULL, "stream_out = NULL");
    EXPECT("add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    EXPECT("section end", fc_graph_foreign_end_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("mul", fc_mul_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
    end_and_replay("its graph replays 7", 7.0f);

    fc_clear_last_error();
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT("restore p0's recording mode", fc_ctx_set_recording_mode(P0.ctx, saved), FC_OK, NULL);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- conditional nodes ---- */

/* A 4-byte buffer of p0 holding v. */
static fc_buffer *u32_buffer(unsigned v)
{
    fc_buffer *b = fc_buffer_alloc_ctx(P0.ctx, 4);
    if (b && fc_buffer_upload(b, &v, 4) != FC_OK) {
        fc_buffer_free(b);
        return NULL;
    }
    return b;
}

static void conditionals(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    int breaks = 0;
    const int saved = fc_ctx_recording_mode(P0.ctx);
    EXPECT("set FC_RECORDING_BUILD", fc_ctx_set_recording_mode(P0.ctx, FC_RECORDING_BUILD), FC_OK, NULL);
    fc_buffer *yes = u32_buffer(1), *no = u32_buffer(0), *three = u32_buffer(3);
    fc_buffer *tiny = fc_buffer_alloc_ctx(P0.ctx, 2);
    EXPECT_TRUE("condition buffers", yes && no && three && tiny, "%s", fc_last_error());
    if (!(fc_cond_support() & FC_COND_SUPPORT_IF_WHILE)) {
        /* Before CUDA 12.3 a good conditional is refused as unsupported,
         * and the recording goes on. */
        printf("  the driver has no conditional nodes (CUDA 12.3+): only their refusal is checked\n");
        EXPECT("begin (no conditional nodes)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
        EXPECT("IF on a driver without conditional nodes", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, yes, 0),
               FC_ERR_UNSUPPORTED, "12.3");
        EXPECT("WHILE on a driver without conditional nodes", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_WHILE, no, 0),
               FC_ERR_UNSUPPORTED, "12.3");
        EXPECT("add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
        end_and_replay("the recording still works: 3.5", 3.5f);
        goto cleanup;
    }

    /* IF taken, with refusals inside its body that lose nothing: 1.5 + 2. */
    EXPECT("begin (IF)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("a 2-byte condition", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, tiny, 0), FC_ERR_BUFFER_TOO_SMALL, NULL);
    EXPECT("IF", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, yes, 0), FC_OK, NULL);
    EXPECT("add in the body", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    EXPECT("next past an IF's one body", fc_graph_cond_next_ctx(P0.ctx), FC_ERR_CAPTURE_STATE, "all are recorded");
    EXPECT("break inside a body", fc_graph_break_ctx(P0.ctx, counting_break, &breaks), FC_ERR_CAPTURE_STATE,
           "inside a conditional");
    EXPECT_TRUE("the refused break ran nothing", breaks == 0, "its function ran %d times", breaks);
    EXPECT("end the IF", fc_graph_cond_end_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("end it twice", fc_graph_cond_end_ctx(P0.ctx), FC_ERR_CAPTURE_STATE, KW_NO_BODY);
    end_and_replay("the IF (taken) replays 3.5", 3.5f);

    /* IF_ELSE not taken: the else body, (1.5 + 2) * 2 = 7 by a mul after
     * (CUDA 12.8+; refused as unsupported before). */
    EXPECT("begin (IF_ELSE)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    if (fc_cond_support() & FC_COND_SUPPORT_IF_ELSE) {
        EXPECT("IF_ELSE", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF_ELSE, no, 0), FC_OK, NULL);
        EXPECT("then: mul (not taken)", fc_mul_ctx(P0.ctx, P0.a, P0.a, P0.out, N), FC_OK, NULL);
        EXPECT("else", fc_graph_cond_next_ctx(P0.ctx), FC_OK, NULL);
        EXPECT("else: add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
        EXPECT("end", fc_graph_cond_end_ctx(P0.ctx), FC_OK, NULL);
    } else {
        EXPECT("IF_ELSE before 12.8", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF_ELSE, no, 0), FC_ERR_UNSUPPORTED,
               "12.8");
        EXPECT("add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    }
    EXPECT("mul after", fc_mul_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
    end_and_replay("the else body, then the mul: 7", 7.0f);

    /* REPEAT 3 times: 3.5 * 2^3 = 28; an aborted nested WHILE records nothing. */
    EXPECT("begin (REPEAT)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    EXPECT("REPEAT", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_REPEAT, three, 0), FC_OK, NULL);
    EXPECT("mul in the body", fc_mul_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
    EXPECT("nested WHILE", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_WHILE, yes, 0), FC_OK, NULL);
    EXPECT("mul in it", fc_mul_ctx(P0.ctx, P0.out, P0.b, P0.out, N), FC_OK, NULL);
    EXPECT("abort the nested WHILE", fc_graph_cond_abort_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("end the REPEAT", fc_graph_cond_end_ctx(P0.ctx), FC_OK, NULL);
    end_and_replay("REPEAT 3: 28", 28.0f);

    /* Conditionals nest 32 deep: the 33rd is refused, the others abort. */
    EXPECT("begin (nesting)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    int depth = 0;
    while (depth < 32 && fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, yes, 0) == FC_OK) depth++;
    EXPECT_TRUE("32 nested conditionals", depth == 32, "only %d: %s", depth, fc_last_error());
    EXPECT("the 33rd nested conditional", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, yes, 0),
           FC_ERR_INVALID_ARGUMENT, "at most 32 deep");
    while (depth > 0 && fc_graph_cond_abort_ctx(P0.ctx) == FC_OK) depth--;
    EXPECT_TRUE("the 32 abort", depth == 0, "%d left open: %s", depth, fc_last_error());
    EXPECT("add after them", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    end_and_replay("the recording still ends and replays 3.5", 3.5f);

    /* Ending the recording with a body open fails the end, not the context. */
    EXPECT("begin (left open)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("WHILE", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_WHILE, no, 0), FC_OK, NULL);
    fc_clear_last_error();
    fc_graph *g = fc_graph_end_ctx(P0.ctx);
    EXPECT_TRUE("the end is refused", !g && fc_last_error_code() == FC_ERR_CAPTURE_STATE &&
                                          strstr(fc_last_error(), "conditional node(s) open"),
                "graph %p, %d \"%s\"", (void *)g, fc_last_error_code(), fc_last_error());
    fc_graph_free(g);
    EXPECT("not recording afterwards", ST_VALUE(fc_graph_is_capturing_ctx(P0.ctx) == 0), FC_OK, NULL);
    EXPECT("no body left open", fc_graph_cond_end_ctx(P0.ctx), FC_ERR_CAPTURE_STATE, KW_NO_BODY);

    /* A recording that captures the stream takes no conditional. */
    EXPECT("set FC_RECORDING_CAPTURE", fc_ctx_set_recording_mode(P0.ctx, FC_RECORDING_CAPTURE), FC_OK, NULL);
    EXPECT("begin (captures)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("IF in a captured recording", fc_graph_cond_begin_ctx(P0.ctx, FC_COND_IF, yes, 0), FC_ERR_CAPTURE_STATE,
           "builds its graph");
    EXPECT("add", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    end_and_replay("the captured recording still works: 3.5", 3.5f);

cleanup:
    fc_buffer_free(yes);
    fc_buffer_free(no);
    fc_buffer_free(three);
    fc_buffer_free(tiny);
    fc_clear_last_error();
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT("restore p0's recording mode", fc_ctx_set_recording_mode(P0.ctx, saved), FC_OK, NULL);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- stale handles after their slot is reused ---- */

static void stale_handles(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    const char *kw = "already freed";
    /* buffer */
    fc_buffer *b1 = fc_buffer_alloc_ctx(P0.ctx, 4096), *b2 = NULL;
    fc_buffer_free(b1);
    b2 = fc_buffer_alloc_ctx(P0.ctx, 8192);
    EXPECT("buffer: free the stale handle", ST_VOID(fc_buffer_free(b1)), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("buffer: use the stale handle", ST_VALUE(fc_buffer_size(b1) == 0), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("buffer: the new one lives", ST_VALUE(fc_buffer_size(b2) == 8192), FC_OK, NULL);
    fc_buffer_free(b2);
    /* context */
    fc_cuda_ctx *c1 = fc_cuda_init_device(0), *c2 = NULL;
    fc_cuda_ctx_free(c1);
    c2 = fc_cuda_init_device_isolated(0);
    EXPECT("ctx: free the stale handle", ST_VOID(fc_cuda_ctx_free(c1)), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("ctx: use the stale handle", fc_sync_ctx(c1), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("ctx: the new one lives", ST_VALUE(fc_ctx_is_isolated(c2) == 1), FC_OK, NULL);
    EXPECT("ctx: an isolated context is green or private",
           ST_VALUE(fc_ctx_isolation(c2) == FC_ISOLATION_GREEN || fc_ctx_isolation(c2) == FC_ISOLATION_PRIVATE),
           FC_OK, NULL);
    {
        fc_cuda_ctx *priv = fc_cuda_init_device_isolated_as(0, FC_ISOLATION_PRIVATE);
        EXPECT("ctx: a private context asked for is private",
               ST_VALUE(priv && fc_ctx_isolation(priv) == FC_ISOLATION_PRIVATE), FC_OK, NULL);
        fc_cuda_ctx_free(priv);
        EXPECT("ctx: isolation 3 is refused", ST_NEW(fc_cuda_init_device_isolated_as(0, 3)),
               FC_ERR_INVALID_ARGUMENT, "neither FC_ISOLATION_GREEN");
        EXPECT("ctx: a device that does not exist", ST_NEW(fc_cuda_init_device_isolated_as(INT_MAX, 2)),
               FC_ERR_INVALID_ARGUMENT, "does not exist");
        if (fc_ctx_isolation(c2) == FC_ISOLATION_GREEN) {
            fc_cuda_ctx *green = fc_cuda_init_device_isolated_as(0, FC_ISOLATION_GREEN);
            EXPECT("ctx: a green context asked for is green",
                   ST_VALUE(green && fc_ctx_isolation(green) == FC_ISOLATION_GREEN), FC_OK, NULL);
            fc_cuda_ctx_free(green);
        }
    }
    EXPECT("ctx: a primary context is not isolated", ST_VALUE(fc_ctx_isolation(P0.ctx) == FC_ISOLATION_NONE), FC_OK,
           NULL);
    fc_cuda_ctx_free(c2);
    /* module and kernel */
    fc_module *m1 = fc_module_load_ptx(P0.ctx, USER_PTX), *m2 = NULL;
    fc_kernel *k1 = fc_module_get_kernel(m1, "scale_f32"), *k2 = NULL;
    fc_kernel_free(k1);
    fc_module_free(m1);
    m2 = fc_module_load_ptx(P0.ctx, USER_PTX);
    k2 = fc_module_get_kernel(m2, "axpy_f32");
    EXPECT("module: free the stale handle", ST_VOID(fc_module_free(m1)), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("module: use the stale handle", ST_NEW(fc_module_get_kernel(m1, "scale_f32")), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("kernel: free the stale handle", ST_VOID(fc_kernel_free(k1)), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("kernel: use the stale handle", ST_VALUE(fc_kernel_param_count(k1) == -1), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("kernel: the new one lives", ST_VALUE(fc_kernel_param_count(k2) == 4), FC_OK, NULL);
    fc_kernel_free(k2);
    fc_module_free(m2);
    /* graph */
    fc_graph *g1 = NULL, *g2 = NULL;
    if (fc_graph_begin_ctx(P0.ctx) == FC_OK && fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N) == FC_OK)
        g1 = fc_graph_end_ctx(P0.ctx);
    fc_graph_free(g1);
    if (fc_graph_begin_ctx(P0.ctx) == FC_OK && fc_mul_ctx(P0.ctx, P0.a, P0.b, P0.out, N) == FC_OK)
        g2 = fc_graph_end_ctx(P0.ctx);
    EXPECT("graph: free the stale handle", ST_VOID(fc_graph_free(g1)), FC_ERR_INVALID_HANDLE, kw);
    EXPECT("graph: launch the stale handle", fc_graph_launch(g1), FC_ERR_INVALID_HANDLE, kw);
    EXPECT_TRUE("graph: the new one replays 1.5 * 2 = 3", g2 && replay_gives(P0.ctx, g2, P0.out, 3.0f),
                "wrong numbers");
    fc_graph_free(g2);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- a context freed while its graphs live ---- */

typedef struct {
    int calls;
    int rc;
    char msg[256];
} dead_probe;

static int dead_ctx_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    dead_probe *p = (dead_probe *)user;
    (void)live;
    p->calls++;
    fc_clear_last_error();
    p->rc = fc_add_ctx(ctx, P0.a, P0.b, P0.out, N);
    (void)fc_last_error_copy(p->msg, sizeof p->msg);
    return p->rc;
}

static void freed_context(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    dead_probe probe = {0, -1, ""};
    fc_cuda_ctx *c = fc_cuda_init_device(0);
    fc_buffer *x = c ? ct_upload_new(c, host_a, N) : NULL, *o = c ? fc_buffer_alloc_ctx(c, 4 * N) : NULL;
    fc_graph *plain = NULL, *broken = NULL;
    fc_module *m = c ? fc_module_load_ptx(c, USER_PTX) : NULL;
    fc_kernel *k = NULL;
    fc_cuda_ctx *lane = c ? fc_ctx_lane(c, 1) : NULL, *ic = NULL;
    fc_buffer *ib = NULL;
    EXPECT_TRUE("set up", c && x && o && m && lane, "%s", fc_last_error());
    if (!(c && x && o && m && lane)) goto done;
    if (fc_graph_begin_ctx(c) == FC_OK && fc_add_ctx(c, x, x, o, N) == FC_OK) plain = fc_graph_end_ctx(c);
    if (fc_graph_begin_ctx(c) == FC_OK && fc_graph_break_ctx(c, dead_ctx_break, &probe) == FC_OK)
        broken = fc_graph_end_ctx(c);
    EXPECT_TRUE("graphs captured", plain && broken && probe.calls == 1 && probe.rc == FC_OK, "%s", fc_last_error());
    fc_cuda_ctx_free(c);
    EXPECT("the freed context handle is refused", fc_sync_ctx(c), FC_ERR_INVALID_HANDLE, "already freed");
    EXPECT("its graph still launches", plain ? fc_graph_launch(plain) : -1, FC_OK, NULL);
    float got[N];
    EXPECT("its buffer still downloads (after the launch)", fc_buffer_download(o, got, sizeof got), FC_OK, NULL);
    EXPECT_TRUE("and holds 1.5 + 1.5", got[0] == 3.0f && got[N - 1] == 3.0f, "got %g", (double)got[0]);
    EXPECT("a break given the dead handle fails its calls", broken ? fc_graph_launch(broken) : -1, FC_ERR_CALLBACK,
           "returned 11");
    EXPECT_TRUE("the break saw FC_ERR_INVALID_HANDLE", probe.rc == FC_ERR_INVALID_HANDLE &&
                                                          strstr(probe.msg, "already freed"),
                "rc %d, message \"%s\"", probe.rc, probe.msg);

    /* Its other objects: the module gives kernels, which launch on another
     * primary context of the device (the same CUDA context); its buffers
     * work there; a lane handle keeps it alive, but is not another
     * context's lane. */
    EXPECT("its module still gives kernels", (k = fc_module_get_kernel(m, "scale_f32")) ? FC_OK : fc_last_error_code(),
           FC_OK, NULL);
    EXPECT("its kernel launches on another primary context",
           k ? fc_kernel_launch_ctx(P0.ctx, k, 1, 1, 1, 256, 1, 1, 0, P0.args, 3) : -1, FC_OK, NULL);
    EXPECT("its buffers in another primary context's add", fc_add_ctx(P0.ctx, x, x, o, N), FC_OK, NULL);
    EXPECT("its lane handle still works", fc_add_ctx(lane, x, x, o, N), FC_OK, NULL);
    EXPECT("and syncs", fc_sync_ctx(lane), FC_OK, NULL);
    EXPECT("its lane is no lane of another context", fc_ctx_wait_lane(P0.ctx, lane), FC_ERR_INVALID_ARGUMENT,
           "different contexts");
    EXPECT("sync p0", fc_sync_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("its buffer downloads", fc_buffer_download(o, got, sizeof got), FC_OK, NULL);
    EXPECT_TRUE("and holds 1.5 + 1.5 again", got[0] == 3.0f && got[N - 1] == 3.0f, "got %g", (double)got[0]);

    /* An isolated context's buffer outlives it, and stays its own. */
    ic = fc_cuda_init_device_isolated(0);
    ib = ic ? ct_upload_new(ic, host_a, N) : NULL;
    EXPECT_TRUE("set up an isolated context", ic && ib, "%s", fc_last_error());
    fc_cuda_ctx_free(ic);
    if (ib) {
        EXPECT("its buffer downloads after the context was freed", fc_buffer_download(ib, got, sizeof got), FC_OK,
               NULL);
        EXPECT_TRUE("and holds 1.5", got[0] == 1.5f && got[N - 1] == 1.5f, "got %g", (double)got[0]);
        EXPECT("a primary context still refuses it", fc_add_ctx(P0.ctx, ib, P0.b, P0.out, N), FC_ERR_WRONG_CONTEXT,
               KW_OTHER_CTX);
    }

    /* Freeing a context with an open capture aborts it: nothing recorded runs. */
    fc_cuda_ctx *c2 = fc_cuda_init_device(0);
    fc_buffer *y = c2 ? ct_upload_new(c2, host_poison, N) : NULL;
    if (c2 && y && fc_graph_begin_ctx(c2) == FC_OK) {
        (void)fc_add_ctx(c2, P0.a, P0.b, y, N);
        fc_clear_last_error();
        fc_cuda_ctx_free(c2);
        EXPECT("free a capturing context", fc_last_error_code(), FC_OK, NULL);
        EXPECT("its buffer still downloads", fc_buffer_download(y, got, sizeof got), FC_OK, NULL);
        EXPECT_TRUE("the recorded add never ran", ct_bits(got[0]) == CT_POISON_BITS, "got %g", (double)got[0]);
    } else {
        EXPECT_TRUE("set up a capturing context", 0, "%s", fc_last_error());
        fc_cuda_ctx_free(c2);
    }
    fc_buffer_free(y);
done:
    fc_graph_free(plain);
    fc_graph_free(broken);
    fc_kernel_free(k);
    fc_module_free(m);
    fc_cuda_ctx_free(lane);
    CT_FREE_BUFFERS(x, o, ib);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- handles freed inside their own calls ---- */

typedef struct {
    fc_graph *graph; /* freed by the break at replay */
    int calls;
    int rc_after; /* a call on the freed context handle inside the break */
    char msg[256];
} self_free;

/* At replay (live = the probe) frees the graph being replayed; then
 * out = out * b either way. */
static int frees_its_graph(fc_cuda_ctx *ctx, void *live, void *user)
{
    self_free *p = (self_free *)user;
    p->calls++;
    if (live == p && p->graph) {
        fc_graph_free(p->graph);
        p->graph = NULL;
    }
    return fc_mul_ctx(ctx, P0.out, P0.b, P0.out, N);
}

/* Frees the context handle it runs on, then uses it. */
static int frees_its_context(fc_cuda_ctx *ctx, void *live, void *user)
{
    self_free *p = (self_free *)user;
    (void)live;
    p->calls++;
    fc_cuda_ctx_free(ctx);
    fc_clear_last_error();
    p->rc_after = fc_add_ctx(ctx, P0.a, P0.b, P0.out, N);
    (void)fc_last_error_copy(p->msg, sizeof p->msg);
    return 0;
}

static void freed_inside_their_own_calls(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    float got[N];
    size_t handles0 = 0, contexts0 = 0, handles1 = 0, contexts1 = 0;
    (void)fc_live_objects(&handles0, &contexts0);

    /* A graph freed by its own break during its replay: the replay goes on
     * to the end; the handle is dead afterwards. */
    self_free p;
    memset(&p, 0, sizeof p);
    fc_graph *g = NULL;
    if (fc_graph_begin_ctx(P0.ctx) == FC_OK && fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N) == FC_OK &&
        fc_graph_break_ctx(P0.ctx, frees_its_graph, &p) == FC_OK && fc_add_ctx(P0.ctx, P0.out, P0.b, P0.out, N) == FC_OK)
        g = fc_graph_end_ctx(P0.ctx);
    EXPECT_TRUE("record add | break | add", g != NULL && p.calls == 1, "%s", fc_last_error());
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    if (g) {
        p.graph = g;
        EXPECT("poison p0.out", fc_buffer_upload(P0.out, host_poison, sizeof host_poison), FC_OK, NULL);
        EXPECT("a replay whose break frees its graph", fc_graph_launch_live(g, &p), FC_OK, NULL);
        EXPECT_TRUE("the replay ran to its end: (1.5 + 2) * 2 + 2 = 9", p.graph == NULL && out_is(&P0, 9.0f),
                    "the break did not free it, or wrong numbers");
        EXPECT("the freed graph is refused afterwards", fc_graph_launch(g), FC_ERR_INVALID_HANDLE, "already freed");
    }

    /* A context handle freed by a break of its own open capture: the break
     * sees the dead handle; the capture is dropped, nothing recorded runs. */
    memset(&p, 0, sizeof p);
    fc_cuda_ctx *c = fc_cuda_init_device(0);
    fc_buffer *y = c ? ct_upload_new(c, host_poison, N) : NULL;
    EXPECT_TRUE("set up a context", c && y, "%s", fc_last_error());
    if (c && y && fc_graph_begin_ctx(c) == FC_OK && fc_add_ctx(c, P0.a, P0.b, y, N) == FC_OK) {
        int rc = fc_graph_break_ctx(c, frees_its_context, &p); /* (leaves the break's own error recorded) */
        EXPECT_TRUE("a break that frees its context returns FC_OK", rc == FC_OK, "returned %d: %s", rc,
                    fc_last_error());
        EXPECT_TRUE("inside it the handle was already dead",
                    p.calls == 1 && p.rc_after == FC_ERR_INVALID_HANDLE && strstr(p.msg, "already freed"),
                    "calls %d, rc %d, \"%s\"", p.calls, p.rc_after, p.msg);
        EXPECT("the handle is refused afterwards", ST_VALUE(fc_graph_is_capturing_ctx(c) == 0), FC_ERR_INVALID_HANDLE,
               "already freed");
        EXPECT("its buffer still downloads", fc_buffer_download(y, got, sizeof got), FC_OK, NULL);
        EXPECT_TRUE("the recorded add never ran", ct_bits(got[0]) == CT_POISON_BITS, "got %g", (double)got[0]);
    } else {
        fc_cuda_ctx_free(c);
    }
    fc_buffer_free(y);
    (void)fc_live_objects(&handles1, &contexts1);
    EXPECT_TRUE("no handle or context left behind", handles1 == handles0 && contexts1 == contexts0,
                "handles %zu -> %zu, contexts %zu -> %zu", handles0, handles1, contexts0, contexts1);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- a lane left unjoined in a recording that captures ---- */

static void unjoined_lane_in_a_captured_recording(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    const int saved = fc_ctx_recording_mode(P0.ctx);
    EXPECT("set FC_RECORDING_CAPTURE", fc_ctx_set_recording_mode(P0.ctx, FC_RECORDING_CAPTURE), FC_OK, NULL);
    EXPECT("begin (captures)", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("fork lane 1", fc_ctx_wait_lane(P0.lane1, P0.ctx), FC_OK, NULL);
    EXPECT("add on lane 1", fc_add_ctx(P0.lane1, P0.a, P0.b, P0.big, N), FC_OK, NULL);
    EXPECT("add on lane 0", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    EXPECT("end with lane 1 not joined", ST_NEW(fc_graph_end_ctx(P0.ctx)), FC_ERR_CUDA, "UNJOINED");
    EXPECT("not recording afterwards", ST_VALUE(fc_graph_is_capturing_ctx(P0.ctx) == 0), FC_OK, NULL);
    EXPECT("lane 1 syncs", fc_sync_ctx(P0.lane1), FC_OK, NULL);
    /* The same recording joined ends and replays. */
    EXPECT("begin again", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("fork, add, join", fork_add_join(), FC_OK, NULL);
    EXPECT("add on lane 0 again", fc_add_ctx(P0.ctx, P0.a, P0.b, P0.out, N), FC_OK, NULL);
    end_and_replay("joined: the recording ends and replays 3.5", 3.5f);
    fc_clear_last_error();
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT("restore p0's recording mode", fc_ctx_set_recording_mode(P0.ctx, saved), FC_OK, NULL);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- calls inside a graph cache's record function ---- */

enum {
    M_END,
    M_END_UPDATE,
    M_END_UPDATE_NULL,
    M_ABORT,
    M_FOREIGN_BEGIN,
    M_FOREIGN_END,
    M_RECORD_FOREIGN,
    M_BEGIN,
    M_CAPTURE,
    M_COUNT
};

typedef struct {
    int misuse;
    int calls; /* record function runs */
    int st;    /* status of its misuse (under capture) */
    int code;
    char msg[512];
} misuse_probe;

static int misuse_record(fc_cuda_ctx *ctx, void *user)
{
    misuse_probe *m = (misuse_probe *)user;
    int before = foreign_calls, st;
    m->calls++;
    if (fc_add_ctx(ctx, P0.a, P0.b, P0.out, N) != FC_OK) return 1;
    fc_clear_last_error();
    switch (m->misuse) {
    case M_END: st = ST_NEW(fc_graph_end_ctx(ctx)); break;
    case M_END_UPDATE: st = end_update(ctx, P0B.graph); break;
    case M_END_UPDATE_NULL: st = end_update(ctx, NULL); break;
    case M_ABORT: st = fc_graph_abort_ctx(ctx); break;
    case M_FOREIGN_BEGIN: st = foreign_begin(ctx, TL); break;
    case M_FOREIGN_END: st = fc_graph_foreign_end_ctx(ctx); break;
    case M_RECORD_FOREIGN: st = record_foreign(ctx, TL, counting_foreign); break;
    case M_BEGIN: st = fc_graph_begin_ctx(ctx); break;
    default: st = capture(ctx, TL, record_add, 1); break;
    }
    m->st = foreign_calls != before ? ST_CALLBACK_RAN : st;
    m->code = fc_last_error_code();
    (void)fc_last_error_copy(m->msg, sizeof m->msg);
    return 0; /* the work goes on: the cache's recording must survive */
}

/* A record function that ends, updates, aborts or opens a section in the
 * cache's recording (or begins another) is refused, and the cache's
 * capture goes on: the key is CAPTURED and its graph replays right. */
static void cache_record_misuse(fc_cuda_ctx *unused)
{
    (void)unused;
    static const char *const names[M_COUNT] = {"end",           "end_update",    "end_update(NULL)",
                                               "abort",         "foreign_begin", "foreign_end",
                                               "record_foreign", "begin",        "capture"};
    char why[512], name[160];
    for (int k = 0; k < M_COUNT; k++) {
        misuse_probe m;
        memset(&m, 0, sizeof m);
        m.misuse = k;
        const uint64_t key = 7000 + (uint64_t)k;
        int outcome = 77;
        EXPECT("poison p0.out", fc_buffer_upload(P0.out, host_poison, sizeof host_poison), FC_OK, NULL);
        fc_clear_last_error();
        int rc = fc_graph_cache_run(P0.cache, key, misuse_record, &m, NULL, &outcome);
        snprintf(name, sizeof name, "%s in a cache's record function: the run captures", names[k]);
        EXPECT_TRUE(name, rc == FC_OK && outcome == FC_CACHE_CAPTURED && m.calls == 1,
                    "rc %d, outcome %d, record ran %d times: %s", rc, outcome, m.calls, fc_last_error());
        snprintf(name, sizeof name, "%s in a cache's record function: refused", names[k]);
        const char *kw = k >= M_BEGIN ? KW_OPEN : "graph cache's";
        EXPECT_TRUE(name,
                    m.st == FC_ERR_CAPTURE_STATE && m.code == FC_ERR_CAPTURE_STATE && ct_contains_any(m.msg, kw),
                    "status %d (%s), code %d, message \"%s\" (want FC_ERR_CAPTURE_STATE, \"%s\")", m.st,
                    ct_status_name(m.st), m.code, m.msg, kw);
        snprintf(name, sizeof name, "%s in a cache's record function: the graph computes 3.5", names[k]);
        EXPECT_TRUE(name, out_is(&P0, 3.5f), "p0.out is not 3.5 after the run");
        outcome = 77;
        EXPECT("and hits next time", fc_graph_cache_run(P0.cache, key, misuse_record, &m, NULL, &outcome), FC_OK,
               NULL);
        EXPECT_TRUE("a hit", outcome == FC_CACHE_HIT && m.calls == 1, "outcome %d, record ran %d times", outcome,
                    m.calls);
        EXPECT("remove the key", fc_graph_cache_remove(P0.cache, key), FC_OK, NULL);
    }
    fc_clear_last_error();
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- a graph cache whose context handle was freed ---- */

static int counting_record_calls;

static int counting_record(fc_cuda_ctx *ctx, void *user)
{
    (void)user;
    counting_record_calls++;
    return fc_add_ctx(ctx, P0.a, P0.b, P0.out, N);
}

static void cache_of_a_freed_context_handle(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    fc_cuda_ctx *c = fc_cuda_init_device(0);
    fc_graph_cache *cache = c ? fc_graph_cache_new(c, NULL) : NULL;
    int outcome = 77;
    EXPECT_TRUE("set up", c && cache, "%s", fc_last_error());
    if (!cache) {
        fc_cuda_ctx_free(c);
        return;
    }
    EXPECT("a run before", fc_graph_cache_run(cache, 1, counting_record, NULL, NULL, &outcome), FC_OK, NULL);
    fc_cuda_ctx_free(c);
    counting_record_calls = 0;
    outcome = 77;
    EXPECT("a hit after the context handle was freed", fc_graph_cache_run(cache, 1, counting_record, NULL, NULL,
                                                                          &outcome),
           FC_ERR_INVALID_HANDLE, "free the cache before its context");
    EXPECT("a new key after it", fc_graph_cache_run(cache, 2, counting_record, NULL, NULL, &outcome),
           FC_ERR_INVALID_HANDLE, "already freed");
    EXPECT_TRUE("no record function ran, outcome -1", counting_record_calls == 0 && outcome == -1,
                "record ran %d times, outcome %d", counting_record_calls, outcome);
    EXPECT("its statistics still read", fc_graph_cache_stats_get(cache, &(fc_graph_cache_stats){0}), FC_OK, NULL);
    EXPECT("the cache frees", ST_VOID(fc_graph_cache_free(cache)), FC_OK, NULL);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- out of memory, then business as usual ---- */

static void out_of_memory_recovers(fc_cuda_ctx *unused)
{
    (void)unused;
    char why[512];
    size_t free_b = 0, total_b = 0;
    EXPECT("mem info", fc_ctx_mem_info(P0.ctx, &free_b, &total_b), FC_OK, NULL);
    EXPECT_TRUE("mem info is plausible", total_b > 0 && free_b <= total_b, "free %zu of %zu", free_b, total_b);
    /* More than the device holds, by a little. */
    EXPECT("alloc total + 2 MiB", ST_NEW(fc_buffer_alloc_ctx(P0.ctx, total_b + (2u << 20))), FC_ERR_OUT_OF_MEMORY,
           KW_OOM);
    EXPECT("alloc total + 2 MiB while capturing", fc_graph_begin_ctx(P0.ctx), FC_OK, NULL);
    EXPECT("  (the pool's slab)", ST_NEW(fc_buffer_alloc_ctx(P0.ctx, total_b + (2u << 20))), FC_ERR_OUT_OF_MEMORY,
           KW_OOM);
    EXPECT_TRUE("  the capture survives", capture_still_works(why, sizeof why), "%s", why);
    fc_buffer *ok = NULL;
    EXPECT("a normal alloc afterwards", (ok = fc_buffer_alloc_ctx(P0.ctx, 1 << 20)) ? FC_OK : fc_last_error_code(),
           FC_OK, NULL);
    fc_buffer_free(ok);
    if (fc_graph_is_capturing_ctx(P0.ctx)) (void)fc_graph_abort_ctx(P0.ctx);
    EXPECT_TRUE("contexts usable afterwards", all_usable(why, sizeof why), "%s", why);
}

/* ---- main ------------------------------------------------------------------------------- */

static const ct_case_def cases[] = {
    CT_CASE(handle_sweep),
    CT_CASE(sizes),
    CT_CASE(copies_and_fills),
    CT_CASE(elementwise),
    CT_CASE(ptx),
    CT_CASE(launches),
    CT_CASE(modes),
    CT_CASE(order),
    CT_CASE(wrong_kinds),
    CT_CASE(null_outputs),
    CT_CASE(lanes_and_conditionals),
    CT_CASE(cache_and_diagnostics),
    CT_CASE(capture_rules_inside_breaks),
    CT_CASE(failing_callbacks),
    CT_CASE(threads_during_a_capture),
    CT_CASE(foreign_sections),
    CT_CASE(conditionals),
    CT_CASE(stale_handles),
    CT_CASE(freed_context),
    CT_CASE(freed_inside_their_own_calls),
    CT_CASE(unjoined_lane_in_a_captured_recording),
    CT_CASE(cache_record_misuse),
    CT_CASE(cache_of_a_freed_context_handle),
    CT_CASE(out_of_memory_recovers),
};

int main(int argc, char **argv)
{
    (void)argc;
    ct_init(argv[0]);
    if (!fixture_make()) return 1;
    make_bad_ptx();
    make_bad_args();
    if (!F.has_d1) printf("%s: one device: the wrong-device cases are skipped\n", ct_prog);
    ct_run_cases(cases, CT_COUNT(cases));
    set_free(&D1);
    set_free(&ISO);
    set_free(&P0B);
    CT_FREE_BUFFERS(F.odd, F.tiny);
    set_free(&P0);
    fc_buckets_free(F.buckets);
    ct_matrix_summary("bad-input matrix");
    return ct_finish();
}
