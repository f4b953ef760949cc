/* test_bad_env.c - a bad value of an environment variable the library reads
 * once per process is refused loudly, never ignored, and breaks nothing
 * else:
 *
 *   recording_typo   FC_RECORDING=grpah: every context creation (primary,
 *                    isolated, isolated_as) returns NULL with
 *                    FC_ERR_INVALID_ARGUMENT naming the variable and its
 *                    value, the second time as the first; calls that make no
 *                    context (device count, token buckets) work.
 *   isolation_typo   FC_ISOLATION=greenish: fc_cuda_init_device_isolated
 *                    returns NULL with FC_ERR_INVALID_ARGUMENT naming it; a
 *                    primary context and an isolated context of an explicit
 *                    kind (fc_cuda_init_device_isolated_as) are made and
 *                    compute right.
 *
 * Each scenario runs in a child process (this program, spawned again with
 * the variable set and "--child NAME"), as the variables are read once per
 * process. Without a driver the children check what creation reports then
 * (FC_ERR_NO_DRIVER before a bad FC_RECORDING; a bad FC_ISOLATION first),
 * so they run either way.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "expect.h"

#include <errno.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define N 256

/* ---- children ----------------------------------------------------------------- */

/* NULL from a context constructor, with `code` and a message holding both
 * `a` and `b`. */
static void expect_refused(const char *name, fc_cuda_ctx *c, int code, const char *a, const char *b)
{
    char msg[1024];
    int got = fc_last_error_code();
    (void)fc_last_error_copy(msg, sizeof msg);
    if (c) fc_cuda_ctx_free(c);
    EXPECT_TRUE(name, !c && got == code && ct_contains_any(msg, a) && ct_contains_any(msg, b),
                "%s, code %d, message \"%s\" (want NULL, code %d, \"%s\" and \"%s\")", c ? "a context" : "NULL", got,
                msg, code, a, b);
}

/* A context computes 1.5 + 2 = 3.5 over N floats. */
static int computes(fc_cuda_ctx *ctx)
{
    float a[N], b[N], got[N];
    ct_fill_value(a, N, 1.5f);
    ct_fill_value(b, N, 2.0f);
    fc_buffer *x = ct_upload_new(ctx, a, N), *y = ct_upload_new(ctx, b, N), *z = fc_buffer_alloc_ctx(ctx, sizeof got);
    int ok = x && y && z && fc_add_ctx(ctx, x, y, z, N) == FC_OK && fc_sync_ctx(ctx) == FC_OK &&
             fc_buffer_download(z, got, sizeof got) == FC_OK;
    for (int i = 0; ok && i < N; i++) ok = got[i] == 3.5f;
    CT_FREE_BUFFERS(x, y, z);
    return ok;
}

static void child_recording_typo(int have_driver)
{
    const int code = have_driver ? FC_ERR_INVALID_ARGUMENT : FC_ERR_NO_DRIVER;
    const char *a = have_driver ? "FC_RECORDING" : "no usable CUDA driver";
    const char *b = have_driver ? "grpah" : "driver";
    fc_clear_last_error();
    expect_refused("primary context", fc_cuda_init_device(0), code, a, b);
    fc_clear_last_error();
    expect_refused("primary context, again", fc_cuda_init_device(0), code, a, b);
    fc_clear_last_error();
    expect_refused("isolated context", fc_cuda_init_device_isolated(0), code, a, b);
    fc_clear_last_error();
    expect_refused("private context", fc_cuda_init_device_isolated_as(0, FC_ISOLATION_PRIVATE), code, a, b);
    EXPECT("token buckets still work", ST_NEW(fc_buckets_ladder(64)), FC_OK, NULL);
    if (have_driver) EXPECT("the device count works", ST_VALUE(fc_cuda_device_count() > 0), FC_OK, NULL);
}

static void child_isolation_typo(int have_driver)
{
    /* The variable is read before the driver is asked: the same answer
     * with or without one. */
    fc_clear_last_error();
    expect_refused("isolated context", fc_cuda_init_device_isolated(0), FC_ERR_INVALID_ARGUMENT, "FC_ISOLATION",
                   "greenish");
    fc_clear_last_error();
    expect_refused("isolated context, again", fc_cuda_init_device_isolated(0), FC_ERR_INVALID_ARGUMENT,
                   "FC_ISOLATION", "greenish");
    if (!have_driver) return;
    fc_cuda_ctx *p = fc_cuda_init_device(0);
    EXPECT_TRUE("a primary context is made and computes", p && computes(p), "%s", fc_last_error());
    fc_cuda_ctx_free(p);
    fc_cuda_ctx *priv = fc_cuda_init_device_isolated_as(0, FC_ISOLATION_PRIVATE);
    EXPECT_TRUE("a private context asked for by kind is made and computes",
                priv && fc_ctx_isolation(priv) == FC_ISOLATION_PRIVATE && computes(priv), "%s", fc_last_error());
    fc_cuda_ctx_free(priv);
}

typedef struct {
    const char *name;
    const char *var, *value;
    void (*child)(int have_driver);
} scenario;

static const scenario scenarios[] = {
    {"recording_typo", "FC_RECORDING", "grpah", child_recording_typo},
    {"isolation_typo", "FC_ISOLATION", "greenish", child_isolation_typo},
};

static int child(const char *name)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ct_prog = "child";
    ct_case = name;
    for (size_t i = 0; i < CT_COUNT(scenarios); i++) {
        if (strcmp(scenarios[i].name, name) != 0) continue;
        /* The device count needs no context, and never reads the variables. */
        int have_driver = fc_cuda_device_count() > 0;
        printf("%s\n", have_driver ? "driver present" : "no usable driver: creation reports that first");
        scenarios[i].child(have_driver);
        printf("%ld checks, %ld failed\n", ct_matrix_run, ct_matrix_failed);
        if (ct_matrix_failed == 0 && ct_matrix_run > 0) printf("child-ok\n");
        return 0;
    }
    printf("unknown scenario %s\n", name);
    return 2;
}

/* ---- the parent ----------------------------------------------------------------- */

/* Runs `name` in a child with var=value; returns its output (malloc'ed) and
 * its wait status. */
static char *spawn_child(const char *self, const scenario *s, int *status)
{
    int fds[2];
    size_t cap = 16384, len = 0;
    char *out = (char *)calloc(1, cap);
    *status = -1;
    if (!out || pipe(fds) != 0) return out;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char *argv[] = {(char *)self, (char *)"--child", (char *)s->name, NULL};
    pid_t pid;
    setenv(s->var, s->value, 1);
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
    unsetenv(s->var);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        snprintf(out, cap, "posix_spawn failed: %s\n", strerror(rc));
        close(fds[0]);
        return out;
    }
    for (;;) {
        ssize_t n = read(fds[0], out + len, cap - len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        if (len + 1 >= cap) break;
    }
    out[len] = 0;
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    return out;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--child")) return child(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *slash = strrchr(argv[0], '/');
    ct_prog = slash ? slash + 1 : argv[0];
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        printf("[FAIL] %s: readlink(/proc/self/exe) failed\n", ct_prog);
        return 1;
    }
    self[n] = 0;
    /* Only fc_version here: this process must not read the variables. */
    printf("%s: libfcgraph %s; each scenario runs in a child process\n", ct_prog, fc_version());
    for (size_t i = 0; i < CT_COUNT(scenarios); i++) {
        const scenario *s = &scenarios[i];
        int status;
        char *out = spawn_child(self, s, &status);
        const char *text = out ? out : "";
        int ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(text, "child-ok\n");
        printf("[%s] %s/%s (%s=%s)\n", ok ? "PASS" : "FAIL", ct_prog, s->name, s->var, s->value);
        for (const char *p = text; *p;) {
            const char *e = strchr(p, '\n');
            int len = e ? (int)(e - p) : (int)strlen(p);
            printf("    | %.*s\n", len, p);
            p = e ? e + 1 : p + len;
        }
        if (ok)
            ct_passed++;
        else
            ct_failed++;
        free(out);
    }
    return ct_finish();
}
