/* test_user_kernel.c - user PTX through fc_module_load_ptx /
 * fc_module_get_kernel / fc_kernel_launch_ctx, eagerly and captured.
 *
 *   load_and_count        both entries found, fc_kernel_param_count 3 and 4.
 *   eager_scale           x *= s over n = 1, 1000, 1<<20 + 1 floats: exact, and
 *                         the poisoned tail after n untouched.
 *   eager_axpy            y += a * x (separate mul and add roundings): exact.
 *   kernel_outlives_module  the kernel launches after fc_module_free.
 *   captured_kernels      axpy, scale and fc_add_ctx captured together; the
 *                         argument values are taken at capture (changing the
 *                         host variables afterwards changes nothing); 3
 *                         replays on fresh inputs == CPU; segment count 1.
 *   kernel_in_break       a user kernel launched from a break function, with
 *                         the scale taken from the replay's live value.
 */
#include "check.h"
#include "user_ptx.h"

#define PAD 200

static unsigned blocks_for(size_t n, unsigned block)
{
    return (unsigned)((n + block - 1) / block);
}

static int launch_scale(fc_cuda_ctx *ctx, const fc_kernel *k, fc_buffer *x, float s, size_t n)
{
    uint64_t p = fc_buffer_device_ptr(x);
    uint32_t nn = (uint32_t)n;
    void *args[3] = {&p, &s, &nn};
    return fc_kernel_launch_ctx(ctx, k, blocks_for(n, 128), 1, 1, 128, 1, 1, 0, args, 3);
}

static int launch_axpy(fc_cuda_ctx *ctx, const fc_kernel *k, fc_buffer *y, fc_buffer *x, float a, size_t n)
{
    uint64_t py = fc_buffer_device_ptr(y), px = fc_buffer_device_ptr(x);
    uint32_t nn = (uint32_t)n;
    void *args[4] = {&py, &px, &a, &nn};
    return fc_kernel_launch_ctx(ctx, k, blocks_for(n, 256), 1, 1, 256, 1, 1, 0, args, 4);
}

static float cpu_mul(float a, float b)
{
    volatile float r = a * b;
    return r;
}

static float cpu_add(float a, float b)
{
    volatile float r = a + b;
    return r;
}

static void load_and_count(fc_cuda_ctx *ctx)
{
    fc_module *m = NULL;
    fc_kernel *k1 = NULL, *k2 = NULL, *k3 = NULL;
    CHECK_NOTNULL(m = fc_module_load_ptx(ctx, USER_PTX));
    CHECK_NOTNULL(k1 = fc_module_get_kernel(m, "scale_f32"));
    CHECK_NOTNULL(k2 = fc_module_get_kernel(m, "axpy_f32"));
    CHECK_NOTNULL(k3 = fc_module_get_kernel(m, "scale_f32")); /* twice is fine */
    CHECK_MSG(fc_kernel_param_count(k1) == 3, "scale_f32 params %d, want 3", fc_kernel_param_count(k1));
    CHECK_MSG(fc_kernel_param_count(k2) == 4, "axpy_f32 params %d, want 4", fc_kernel_param_count(k2));
    CHECK(fc_kernel_param_count(k3) == 3);
done:
    fc_kernel_free(k1);
    fc_kernel_free(k2);
    fc_kernel_free(k3);
    fc_module_free(m);
}

static void scale_case(fc_cuda_ctx *ctx, size_t n)
{
    const size_t total = n + PAD, bytes = total * sizeof(float);
    fc_module *m = NULL;
    fc_kernel *k = NULL;
    fc_buffer *x = NULL;
    float *hx = NULL, *got = NULL, *want = NULL;
    const float s = 2.5f;

    CHECK_NOTNULL(hx = ct_floats(total));
    CHECK_NOTNULL(got = ct_floats(total));
    CHECK_NOTNULL(want = ct_floats(total));
    ct_seed((uint32_t)(n + 11));
    ct_fill_random(hx, n);
    ct_fill_poison(hx + n, PAD);
    for (size_t i = 0; i < n; i++) want[i] = cpu_mul(hx[i], s);
    ct_fill_poison(want + n, PAD);

    CHECK_NOTNULL(m = fc_module_load_ptx(ctx, USER_PTX));
    CHECK_NOTNULL(k = fc_module_get_kernel(m, "scale_f32"));
    CHECK_NOTNULL(x = ct_upload_new(ctx, hx, total));
    CHECK_OK(launch_scale(ctx, k, x, s, n));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(x, got, bytes));
    CHECK_FLOATS(got, want, n, "x * 2.5");
    CHECK_FLOATS(got + n, want + n, PAD, "poisoned tail after n (written past n?)");
done:
    fc_buffer_free(x);
    fc_kernel_free(k);
    fc_module_free(m);
    CT_FREE(hx, got, want);
}

static void eager_scale_n1(fc_cuda_ctx *ctx)
{
    scale_case(ctx, 1);
}

static void eager_scale_n1000(fc_cuda_ctx *ctx)
{
    scale_case(ctx, 1000);
}

static void eager_scale_n1m(fc_cuda_ctx *ctx)
{
    scale_case(ctx, (1u << 20) + 1);
}

static void eager_axpy(fc_cuda_ctx *ctx)
{
    const size_t n = 5000, bytes = n * sizeof(float);
    fc_module *m = NULL;
    fc_kernel *k = NULL;
    fc_buffer *x = NULL, *y = NULL;
    float *hx = NULL, *hy = NULL, *got = NULL, *want = NULL;
    const float a = -1.75f;

    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    ct_seed_fill2(31, hx, hy, n);
    for (size_t i = 0; i < n; i++) want[i] = cpu_add(hy[i], cpu_mul(a, hx[i]));
    CHECK_NOTNULL(m = fc_module_load_ptx(ctx, USER_PTX));
    CHECK_NOTNULL(k = fc_module_get_kernel(m, "axpy_f32"));
    CHECK_NOTNULL(x = ct_upload_new(ctx, hx, n));
    CHECK_NOTNULL(y = ct_upload_new(ctx, hy, n));
    CHECK_OK(launch_axpy(ctx, k, y, x, a, n));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(y, got, bytes));
    CHECK_FLOATS(got, want, n, "y + a * x");
    CHECK_OK(fc_buffer_download(x, got, bytes));
    CHECK_FLOATS(got, hx, n, "x (input) after axpy");
done:
    CT_FREE_BUFFERS(x, y);
    fc_kernel_free(k);
    fc_module_free(m);
    CT_FREE(hx, hy, got, want);
}

static void kernel_outlives_module(fc_cuda_ctx *ctx)
{
    const size_t n = 300;
    fc_module *m = NULL;
    fc_kernel *k = NULL;
    fc_buffer *x = NULL;
    float h[300], want[300];

    ct_fill_value(h, n, 3.0f);
    ct_fill_value(want, n, 12.0f);
    CHECK_NOTNULL(m = fc_module_load_ptx(ctx, USER_PTX));
    CHECK_NOTNULL(k = fc_module_get_kernel(m, "scale_f32"));
    fc_module_free(m);
    m = NULL;
    CHECK(fc_kernel_param_count(k) == 3);
    CHECK_NOTNULL(x = ct_upload_new(ctx, h, n));
    CHECK_OK(launch_scale(ctx, k, x, 4.0f, n));
    CHECK_OK(fc_sync_ctx(ctx));
    CHECK_OK(fc_buffer_download(x, h, sizeof h));
    CHECK_FLOATS(h, want, n, "x * 4 after fc_module_free");
done:
    fc_buffer_free(x);
    fc_kernel_free(k);
    fc_module_free(m);
}

static void captured_kernels(fc_cuda_ctx *ctx)
{
    const size_t n = 4099, bytes = n * sizeof(float);
    fc_module *m = NULL;
    fc_kernel *ks = NULL, *ka = NULL;
    fc_buffer *x = NULL, *y = NULL, *z = NULL;
    float *hx = NULL, *hy = NULL, *got = NULL, *wy = NULL, *wz = NULL;
    fc_graph *g = NULL;

    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(wy = ct_floats(n));
    CHECK_NOTNULL(wz = ct_floats(n));
    CHECK_NOTNULL(m = fc_module_load_ptx(ctx, USER_PTX));
    CHECK_NOTNULL(ks = fc_module_get_kernel(m, "scale_f32"));
    CHECK_NOTNULL(ka = fc_module_get_kernel(m, "axpy_f32"));
    CHECK_NOTNULL(x = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(y = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(z = fc_buffer_alloc_ctx(ctx, bytes));

    {
        /* argument storage that changes after the launch is recorded */
        uint64_t py = fc_buffer_device_ptr(y), px = fc_buffer_device_ptr(x);
        float a = 0.5f, s = 3.0f;
        uint32_t nn = (uint32_t)n;
        void *axpy_args[4] = {&py, &px, &a, &nn};
        void *scale_args[3] = {&py, &s, &nn};

        CHECK_OK(fc_graph_begin_ctx(ctx));
        CHECK_OK(fc_kernel_launch_ctx(ctx, ka, blocks_for(n, 256), 1, 1, 256, 1, 1, 0, axpy_args, 4));
        CHECK_OK(fc_kernel_launch_ctx(ctx, ks, blocks_for(n, 64), 1, 1, 64, 1, 1, 0, scale_args, 3));
        CHECK_OK(fc_add_ctx(ctx, y, x, z, n));
        CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
        a = 100.0f;
        s = -100.0f;
        nn = 1;
        py = 0;
    }
    CHECK(fc_graph_segment_count(g) == 1);

    for (int t = 0; t < 3; t++) {
        ct_seed_fill2((uint32_t)(800 + t), hx, hy, n);
        CHECK_OK(fc_buffer_upload(x, hx, bytes));
        CHECK_OK(fc_buffer_upload(y, hy, bytes));
        CHECK_OK(fc_graph_launch(g));
        CHECK_OK(fc_sync_ctx(ctx));
        for (size_t i = 0; i < n; i++) {
            float y1 = cpu_add(hy[i], cpu_mul(0.5f, hx[i]));
            wy[i] = cpu_mul(y1, 3.0f);
            wz[i] = cpu_add(wy[i], hx[i]);
        }
        CHECK_OK(fc_buffer_download(y, got, bytes));
        CHECK_FLOATS(got, wy, n, "y = (y + 0.5 x) * 3 after replay");
        CHECK_OK(fc_buffer_download(z, got, bytes));
        CHECK_FLOATS(got, wz, n, "z = y + x after replay");
    }

done:
    fc_graph_free(g);
    CT_FREE_BUFFERS(x, y, z);
    fc_kernel_free(ks);
    fc_kernel_free(ka);
    fc_module_free(m);
    CT_FREE(hx, hy, got, wy, wz);
}

typedef struct {
    const fc_kernel *k;
    fc_buffer *x;
    size_t n;
    int calls;
    int rc;
} kbreak_user;

static int kernel_break(fc_cuda_ctx *ctx, void *live, void *user)
{
    kbreak_user *u = (kbreak_user *)user;
    float s = live ? *(const float *)live : 1.0f;
    u->calls++;
    u->rc = launch_scale(ctx, u->k, u->x, s, u->n);
    return u->rc;
}

static void kernel_in_break(fc_cuda_ctx *ctx)
{
    const size_t n = 1000, bytes = n * sizeof(float);
    fc_module *m = NULL;
    fc_kernel *k = NULL;
    fc_buffer *x = NULL, *y = NULL;
    float *hx = NULL, *hy = NULL, *got = NULL, *want = NULL;
    fc_graph *g = NULL;
    kbreak_user u;
    float cap_scale = 2.0f;

    memset(&u, 0, sizeof u);
    CHECK_NOTNULL(hx = ct_floats(n));
    CHECK_NOTNULL(hy = ct_floats(n));
    CHECK_NOTNULL(got = ct_floats(n));
    CHECK_NOTNULL(want = ct_floats(n));
    CHECK_NOTNULL(m = fc_module_load_ptx(ctx, USER_PTX));
    CHECK_NOTNULL(k = fc_module_get_kernel(m, "scale_f32"));
    CHECK_NOTNULL(x = fc_buffer_alloc_ctx(ctx, bytes));
    CHECK_NOTNULL(y = fc_buffer_alloc_ctx(ctx, bytes));
    u.k = k;
    u.x = x;
    u.n = n;

    /* x = x + y | break: x *= live | x = x + y */
    CHECK_OK(fc_graph_begin_live_ctx(ctx, FC_CAPTURE_MODE_THREAD_LOCAL, &cap_scale));
    CHECK_OK(fc_add_ctx(ctx, x, y, x, n));
    CHECK_OK(fc_graph_break_ctx(ctx, kernel_break, &u));
    CHECK_OK(fc_add_ctx(ctx, x, y, x, n));
    CHECK_NOTNULL(g = fc_graph_end_ctx(ctx));
    CHECK(u.calls == 1 && u.rc == FC_OK);
    CHECK(fc_graph_segment_count(g) == 3);

    for (int t = 0; t < 3; t++) {
        float live_scale = t == 0 ? 10.0f : (t == 1 ? -0.5f : 0.125f);
        ct_seed_fill2((uint32_t)(900 + t), hx, hy, n);
        CHECK_OK(fc_buffer_upload(x, hx, bytes));
        CHECK_OK(fc_buffer_upload(y, hy, bytes));
        CHECK_OK(fc_graph_launch_live(g, &live_scale));
        CHECK_OK(fc_sync_ctx(ctx));
        for (size_t i = 0; i < n; i++) want[i] = cpu_add(cpu_mul(cpu_add(hx[i], hy[i]), live_scale), hy[i]);
        CHECK_OK(fc_buffer_download(x, got, bytes));
        CHECK_FLOATS(got, want, n, "x after segment | user-kernel break | segment");
        CHECK(u.calls == 2 + t && u.rc == FC_OK);
    }

done:
    fc_graph_free(g);
    CT_FREE_BUFFERS(x, y);
    fc_kernel_free(k);
    fc_module_free(m);
    CT_FREE(hx, hy, got, want);
}

static const ct_case_def cases[] = {
    CT_CASE(load_and_count),
    CT_CASE(eager_scale_n1),
    CT_CASE(eager_scale_n1000),
    CT_CASE(eager_scale_n1m),
    CT_CASE(eager_axpy),
    CT_CASE(kernel_outlives_module),
    CT_CASE(captured_kernels),
    CT_CASE(kernel_in_break),
};

int main(int argc, char **argv)
{
    return ct_main(argc, argv, cases, CT_COUNT(cases));
}
