/* test_elementwise.c - fc_add_ctx / fc_mul_ctx against the CPU.
 *
 * For n in {1, 255, 256, 257, 4096, 1<<20} and each op: random a, b (never
 * zero, |v| in [0.25, 4]), an output buffer of n + PAD floats poisoned with
 * NaN, op over n, then every element of [0, n) must equal the CPU result
 * exactly (one IEEE f32 op, round-to-nearest) and the PAD tail must still
 * hold the poison (nothing written past n). Also: in-place operation
 * (out == a), and n == 0 launching nothing.
 */
#include "check.h"

#define PAD 300 /* floats of poisoned tail after n: more than one block */

enum op { OP_ADD, OP_MUL };

static int launch_op(enum op op, fc_cuda_ctx *ctx, const fc_buffer *a, const fc_buffer *b, fc_buffer *out, size_t n)
{
    return op == OP_ADD ? fc_add_ctx(ctx, a, b, out, n) : fc_mul_ctx(ctx, a, b, out, n);
}

static float cpu_op(enum op op, float x, float y)
{
    volatile float r = op == OP_ADD ? x + y : x * y;
    return r;
}

static void run_op(fc_cuda_ctx *ctx, enum op op, size_t n)
{
    float *ha = NULL, *hb = NULL, *hout = NULL, *want = NULL;
    fc_buffer *a = NULL, *b = NULL, *out = NULL;
    const size_t total = n + PAD;

    CHECK_NOTNULL(ha = ct_floats(n));
    CHECK_NOTNULL(hb = ct_floats(n));
    CHECK_NOTNULL(hout = ct_floats(total));
    CHECK_NOTNULL(want = ct_floats(total));
    ct_seed_fill2((uint32_t)(n * 2654435761u + (unsigned)op + 1u), ha, hb, n);
    for (size_t i = 0; i < n; i++) want[i] = cpu_op(op, ha[i], hb[i]);
    ct_fill_poison(want + n, PAD);

    CHECK_NOTNULL(a = ct_upload_new(ctx, ha, n));
    CHECK_NOTNULL(b = ct_upload_new(ctx, hb, n));
    CHECK_NOTNULL(out = fc_buffer_alloc_ctx(ctx, total * sizeof(float)));
    CHECK(fc_buffer_size(out) == total * sizeof(float));
    CHECK(fc_buffer_device_ptr(out) != 0);

    /* Poison the whole output so unwritten elements show up as NaN. */
    ct_fill_poison(hout, total);
    CHECK_OK(fc_buffer_upload(out, hout, total * sizeof(float)));

    CHECK_OK(launch_op(op, ctx, a, b, out, n));
    CHECK_OK(fc_sync_ctx(ctx));
    memset(hout, 0, total * sizeof(float));
    CHECK_OK(fc_buffer_download(out, hout, total * sizeof(float)));
    CHECK_FLOATS(hout, want, n, op == OP_ADD ? "add" : "mul");
    CHECK_FLOATS(hout + n, want + n, PAD, "poisoned tail after n (written past n?)");

    /* Inputs are untouched. */
    CHECK_OK(fc_buffer_download(a, hout, n * sizeof(float)));
    CHECK_FLOATS(hout, ha, n, "input a after the op");

    /* Second run with fresh data into the same buffers (no stale results). */
    ct_fill_random(ha, n);
    for (size_t i = 0; i < n; i++) want[i] = cpu_op(op, ha[i], hb[i]);
    CHECK_OK(fc_buffer_upload(a, ha, n * sizeof(float)));
    CHECK_OK(launch_op(op, ctx, a, b, out, n));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(out, hout, total * sizeof(float)));
    CHECK_FLOATS(hout, want, n, "second run");
    CHECK_FLOATS(hout + n, want + n, PAD, "poisoned tail, second run");

done:
    CT_FREE_BUFFERS(a, b, out);
    CT_FREE(ha, hb, hout, want);
}

#define SIZE_CASES(N)                                                      \
    static void add_n##N(fc_cuda_ctx *ctx) { run_op(ctx, OP_ADD, (N)); }   \
    static void mul_n##N(fc_cuda_ctx *ctx) { run_op(ctx, OP_MUL, (N)); }

SIZE_CASES(1)
SIZE_CASES(255)
SIZE_CASES(256)
SIZE_CASES(257)
SIZE_CASES(4096)
SIZE_CASES(1048576)

/* out aliases a: a = a + b, then a = a * b. */
static void in_place(fc_cuda_ctx *ctx)
{
    const size_t n = 4097;
    float *ha = NULL, *hb = NULL, *got = NULL, *want = NULL;
    fc_buffer *a = NULL, *b = NULL;

    CHECK_NOTNULL(ha = ct_floats(n));
    CHECK_NOTNULL(hb = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    ct_seed_fill2(77, ha, hb, n);
    for (size_t i = 0; i < n; i++) want[i] = cpu_op(OP_MUL, cpu_op(OP_ADD, ha[i], hb[i]), hb[i]);
    CHECK_NOTNULL(a = ct_upload_new(ctx, ha, n));
    CHECK_NOTNULL(b = ct_upload_new(ctx, hb, n));
    CHECK_OK(fc_add_ctx(ctx, a, b, a, n));
    CHECK_OK(fc_mul_ctx(ctx, a, b, a, n));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(a, got, n * sizeof(float)));
    CHECK_FLOATS(got, want, n, "in-place (a + b) * b");

done:
    CT_FREE_BUFFERS(a, b);
    CT_FREE(ha, hb, got, want);
}

/* n == 0 does nothing and succeeds. */
static void zero_n(fc_cuda_ctx *ctx)
{
    const size_t n = 64;
    float h[64], got[64];
    fc_buffer *a = NULL, *out = NULL;

    ct_fill_value(h, n, 3.0f);
    CHECK_NOTNULL(a = ct_upload_new(ctx, h, n));
    ct_fill_poison(h, n);
    CHECK_NOTNULL(out = ct_upload_new(ctx, h, n));
    CHECK_OK(fc_add_ctx(ctx, a, a, out, 0));
    CHECK_OK(fc_mul_ctx(ctx, a, a, out, 0));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(out, got, sizeof got));
    CHECK_FLOATS(got, h, n, "output after n == 0 (must be untouched)");

done:
    CT_FREE_BUFFERS(a, out);
}

/* add_nN, mul_nN: in that order, as SIZE_CASES defines them. */
#define SIZE_CASE_ENTRIES(N) CT_CASE(add_n##N), CT_CASE(mul_n##N)

static const ct_case_def cases[] = {
    SIZE_CASE_ENTRIES(1),
    SIZE_CASE_ENTRIES(255),
    SIZE_CASE_ENTRIES(256),
    SIZE_CASE_ENTRIES(257),
    SIZE_CASE_ENTRIES(4096),
    SIZE_CASE_ENTRIES(1048576),
    CT_CASE(in_place),
    CT_CASE(zero_n),
};

int main(int argc, char **argv)
{
    return ct_main(argc, argv, cases, CT_COUNT(cases));
}
