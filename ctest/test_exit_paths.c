/* test_exit_paths.c - fc_* calls made while a thread or the process exits
 * never abort: in a pthread key destructor, a C++ thread_local destructor
 * (exit_paths_cxx.cpp), a C++ static destructor and an atexit handler, on a
 * thread that had already recorded an error.
 *
 * Each scenario runs in a child process (this program, spawned again with
 * "--child NAME"); the parent checks that the child exited with status 0,
 * not by a signal, and that its hook ran (each hook prints "hook-ran"). The
 * hook makes failing calls and reads the error slot (fc_last_error,
 * fc_last_error_code, fc_last_error_copy, fc_clear_last_error); it needs no
 * GPU, so CI runs those scenarios. With a GPU, the "live" scenarios also
 * free real handles (a context with an open capture, an isolated context,
 * a buffer, a graph, a module, a kernel) in those places; without one they
 * are skipped. A hook that finds a wrong answer prints "hook-fail" and ends
 * the process with _exit(20).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "check.h"
#include "user_ptx.h"

#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef FC_NO_CXX
int cxx_worker_thread_local(int touch_first, int with_live);
void cxx_arm_main_thread_local(const char *where, int expect_code, void *live);
void cxx_arm_static(const char *where, int expect_code, void *live);
#endif

static double forged_target; /* its address is no handle */

/* Writes a line with write(2): stdio may be half torn down at exit. */
static void say(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof buf - 2) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(STDOUT_FILENO, buf, (size_t)n);
    (void)w;
}

/* ---- live handles (GPU) ------------------------------------------------------ */

typedef struct {
    fc_cuda_ctx *ctx, *capturing, *isolated;
    fc_buffer *buf;
    fc_graph *graph;
    fc_module *module;
    fc_kernel *kernel;
} live_set;

/* Makes one of every kind of handle on this thread, a graph that was
 * launched, and a context left with an open capture. NULL (after saying
 * why) on failure. */
void *exit_live_make(void)
{
    static float host[256];
    live_set *l = (live_set *)calloc(1, sizeof *l);
    if (!l) return NULL;
    for (int i = 0; i < 256; i++) host[i] = 1.5f;
    if (!(l->ctx = fc_cuda_init_device(0))) goto fail;
    if (!(l->isolated = fc_cuda_init_device_isolated(0))) goto fail;
    if (!(l->capturing = fc_cuda_init_device(0))) goto fail;
    if (!(l->buf = fc_buffer_alloc_ctx(l->ctx, sizeof host))) goto fail;
    if (fc_buffer_upload(l->buf, host, sizeof host) != FC_OK) goto fail;
    if (!(l->module = fc_module_load_ptx(l->ctx, USER_PTX))) goto fail;
    if (!(l->kernel = fc_module_get_kernel(l->module, "scale_f32"))) goto fail;
    if (fc_graph_begin_ctx(l->ctx) != FC_OK) goto fail;
    if (fc_add_ctx(l->ctx, l->buf, l->buf, l->buf, 256) != FC_OK) goto fail;
    if (!(l->graph = fc_graph_end_ctx(l->ctx))) goto fail;
    if (fc_graph_launch(l->graph) != FC_OK) goto fail;
    if (fc_graph_begin_ctx(l->capturing) != FC_OK) goto fail;
    if (fc_add_ctx(l->capturing, l->buf, l->buf, l->buf, 256) != FC_OK) goto fail;
    return l;
fail:
    say("live-fail: could not make live handles: code %d: %s", fc_last_error_code(), fc_last_error());
    return NULL;
}

/* Frees every live handle, then frees each again: the first frees record
 * nothing, the second ones FC_ERR_INVALID_HANDLE. Returns failures. */
static int free_live(live_set *l)
{
    int failures = 0;
    fc_clear_last_error();
    int rc = fc_sync_ctx(l->ctx); /* may fail late in exit (the driver may be torn down): no crash is the point */
    say("  live: fc_sync_ctx at exit -> %d", rc);
    fc_clear_last_error();
    fc_kernel_free(l->kernel);
    fc_module_free(l->module);
    fc_graph_free(l->graph);
    fc_buffer_free(l->buf);
    fc_cuda_ctx_free(l->capturing); /* aborts its open capture */
    fc_cuda_ctx_free(l->isolated);
    fc_cuda_ctx_free(l->ctx);
    if (fc_last_error_code() != FC_OK) {
        say("  live: freeing live handles recorded error %d: %s", fc_last_error_code(), fc_last_error());
        failures++;
    }
    static const char *const twice[] = {"kernel", "module", "graph", "buffer", "ctx"};
    for (size_t i = 0; i < CT_COUNT(twice); i++) {
        fc_clear_last_error();
        switch (i) {
        case 0: fc_kernel_free(l->kernel); break;
        case 1: fc_module_free(l->module); break;
        case 2: fc_graph_free(l->graph); break;
        case 3: fc_buffer_free(l->buf); break;
        default: fc_cuda_ctx_free(l->ctx); break;
        }
        if (fc_last_error_code() != FC_ERR_INVALID_HANDLE || !strstr(fc_last_error(), "already freed")) {
            say("  live: second free of the %s: code %d \"%s\", expected FC_ERR_INVALID_HANDLE (already freed)",
                twice[i], fc_last_error_code(), fc_last_error());
            failures++;
        }
    }
    free(l);
    return failures;
}

/* ---- the hook ------------------------------------------------------------------ */

#define HOOK_CHECK(cond, ...)                                                                                 \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            char hook_buf_[512];                                                                              \
            snprintf(hook_buf_, sizeof hook_buf_, __VA_ARGS__);                                               \
            say("hook-fail [%s]: %s", where, hook_buf_);                                                      \
            failures++;                                                                                       \
        }                                                                                                     \
    } while (0)

/* Runs in an exit path: reads the error this thread recorded earlier
 * (`expect_code`, or FC_OK for a thread that never failed), makes failing
 * calls and checks what they record, then frees `live` if given. */
void exit_hook(const char *where, int expect_code, void *live)
{
    int failures = 0;
    char buf[256];

    int code = fc_last_error_code();
    const char *msg = fc_last_error();
    HOOK_CHECK(code == expect_code, "earlier error: code %d, expected %d", code, expect_code);
    HOOK_CHECK(msg != NULL && (expect_code == FC_OK) == (msg[0] == 0), "earlier message \"%s\"", msg ? msg : "(null)");
    size_t n = fc_last_error_copy(buf, sizeof buf);
    HOOK_CHECK(msg && n == strlen(msg) && strcmp(buf, msg) == 0, "copy of the earlier message: %zu \"%s\"", n, buf);

    HOOK_CHECK(fc_sync_ctx(NULL) == FC_ERR_INVALID_ARGUMENT, "fc_sync_ctx(NULL) status");
    HOOK_CHECK(fc_last_error_code() == FC_ERR_INVALID_ARGUMENT, "code after fc_sync_ctx(NULL): %d",
               fc_last_error_code());
    n = fc_last_error_copy(buf, sizeof buf);
    HOOK_CHECK(strcmp(buf, "invalid argument: ctx is NULL") == 0 && n == strlen(buf), "message \"%s\"", buf);

    fc_buffer_free((fc_buffer *)&forged_target);
    HOOK_CHECK(fc_last_error_code() == FC_ERR_INVALID_HANDLE, "code after freeing a forged buffer: %d",
               fc_last_error_code());
    HOOK_CHECK(strstr(fc_last_error(), "not a handle made by this library") != NULL, "message \"%s\"",
               fc_last_error());

    HOOK_CHECK(fc_cuda_init_device(-1) == NULL && fc_last_error_code() == FC_ERR_INVALID_ARGUMENT,
               "fc_cuda_init_device(-1): code %d", fc_last_error_code());
    fc_graph *g = NULL;
    HOOK_CHECK(fc_graph_capture_ctx(NULL, 0, NULL, NULL, 1, &g) == FC_ERR_INVALID_ARGUMENT && g == NULL,
               "fc_graph_capture_ctx(NULL...)");
    HOOK_CHECK(fc_graph_launch((fc_graph *)&forged_target) == FC_ERR_INVALID_HANDLE, "fc_graph_launch(forged)");
    int devices = fc_cuda_device_count(); /* may load the driver here, at exit */
    HOOK_CHECK(devices >= 0, "fc_cuda_device_count() = %d", devices);
    fc_clear_last_error();
    HOOK_CHECK(fc_last_error_code() == FC_OK && fc_last_error()[0] == 0 && fc_last_error_copy(buf, sizeof buf) == 0,
               "fc_clear_last_error left code %d \"%s\"", fc_last_error_code(), fc_last_error());

    if (live) failures += free_live((live_set *)live);

    if (failures) {
        say("hook-fail [%s]: %d check(s) failed", where, failures);
        _exit(20);
    }
    say("hook-ran [%s]%s", where, live ? " (freed live handles)" : "");
}

/* ---- scenarios (in the child) ------------------------------------------------- */

static pthread_key_t g_key;
static int g_rearm;
static const char *g_atexit_where;
static int g_atexit_expect;
static void *g_atexit_live;

typedef struct {
    const char *where;
    int expect;
    void *live;
} key_value;

static void key_destructor(void *v)
{
    key_value *kv = (key_value *)v;
    exit_hook(kv->where, kv->expect, kv->live);
    kv->live = NULL;
    if (g_rearm) { /* glibc runs destructors again for keys set meanwhile */
        g_rearm = 0;
        kv->where = "pthread key destructor, second round";
        kv->expect = FC_OK; /* the hook cleared the slot */
        pthread_setspecific(g_key, kv);
    }
}

typedef struct {
    int fail_first;
    int with_live;
    int ok;
} key_args;

static void *key_worker(void *p)
{
    key_args *a = (key_args *)p;
    static key_value kv;
    kv.where = a->fail_first ? "pthread key destructor" : "pthread key destructor (first fc_* call of the thread)";
    kv.expect = FC_OK;
    kv.live = NULL;
    if (a->with_live && !(kv.live = exit_live_make())) return NULL;
    if (a->fail_first) {
        (void)fc_graph_launch(NULL);
        kv.expect = FC_ERR_INVALID_ARGUMENT;
    }
    pthread_setspecific(g_key, &kv);
    a->ok = 1;
    return NULL;
}

static int run_key_worker(int fail_first, int with_live)
{
    key_args a = {fail_first, with_live, 0};
    pthread_t th;
    if (pthread_key_create(&g_key, key_destructor) != 0) return 1;
    if (pthread_create(&th, NULL, key_worker, &a) != 0) return 1;
    pthread_join(th, NULL);
    return a.ok ? 0 : 1;
}

static void atexit_hook(void)
{
    exit_hook(g_atexit_where, g_atexit_expect, g_atexit_live);
}

static void *exiting_worker(void *p)
{
    (void)p;
    (void)fc_buffer_download(NULL, NULL, 0);
    g_atexit_where = "atexit handler run by exit() on a worker thread";
    g_atexit_expect = FC_ERR_INVALID_ARGUMENT;
    exit(0); /* runs atexit_hook on this thread */
}

static int need_gpu(void)
{
    if (fc_cuda_device_count() > 0) return 1;
    say("child-skip: no CUDA device: %s", fc_last_error());
    return 0;
}

static int child(const char *name)
{
    if (!strcmp(name, "key_dtor")) return run_key_worker(1, 0);
    if (!strcmp(name, "key_dtor_first_call")) return run_key_worker(0, 0);
    if (!strcmp(name, "key_dtor_second_round")) {
        g_rearm = 1;
        return run_key_worker(1, 0);
    }
    if (!strcmp(name, "atexit_main")) {
        atexit(atexit_hook);
        (void)fc_sync_ctx(NULL);
        g_atexit_where = "atexit handler";
        g_atexit_expect = FC_ERR_INVALID_ARGUMENT;
        return 0;
    }
    if (!strcmp(name, "atexit_worker_exit")) {
        pthread_t th;
        atexit(atexit_hook);
        (void)fc_graph_begin_ctx(NULL); /* the main thread's own error, not the worker's */
        if (pthread_create(&th, NULL, exiting_worker, NULL) != 0) return 1;
        pthread_join(th, NULL); /* never returns: the worker exits the process */
        return 1;
    }
#ifndef FC_NO_CXX
    if (!strcmp(name, "cxx_thread_local_first")) return cxx_worker_thread_local(1, 0) ? 1 : 0;
    if (!strcmp(name, "cxx_thread_local_last")) return cxx_worker_thread_local(0, 0) ? 1 : 0;
    if (!strcmp(name, "cxx_thread_local_main")) {
        (void)fc_ctx_stream(NULL);
        cxx_arm_main_thread_local("C++ thread_local destructor of the main thread", FC_ERR_INVALID_ARGUMENT, NULL);
        return 0;
    }
    if (!strcmp(name, "cxx_static")) {
        (void)fc_module_free((fc_module *)&forged_target);
        cxx_arm_static("C++ static destructor", FC_ERR_INVALID_HANDLE, NULL);
        return 0;
    }
#endif
    /* live handles (GPU) */
    if (!strcmp(name, "live_key_dtor")) return need_gpu() ? run_key_worker(1, 1) : 0;
    if (!strcmp(name, "live_atexit_main")) {
        if (!need_gpu()) return 0;
        if (!(g_atexit_live = exit_live_make())) return 1;
        atexit(atexit_hook); /* registered after the driver loaded: runs before its own exit handlers */
        (void)fc_sync_ctx(NULL);
        g_atexit_where = "atexit handler freeing live handles";
        g_atexit_expect = FC_ERR_INVALID_ARGUMENT;
        return 0;
    }
    if (!strcmp(name, "live_atexit_registered_first")) {
        atexit(atexit_hook); /* registered before the driver loaded: runs after its exit handlers */
        if (!need_gpu()) {
            g_atexit_where = "atexit handler (no GPU)";
            g_atexit_expect = FC_ERR_NO_DRIVER;
            return 0;
        }
        if (!(g_atexit_live = exit_live_make())) return 1;
        (void)fc_sync_ctx(NULL);
        g_atexit_where = "atexit handler registered before the driver loaded, freeing live handles";
        g_atexit_expect = FC_ERR_INVALID_ARGUMENT;
        return 0;
    }
#ifndef FC_NO_CXX
    if (!strcmp(name, "live_cxx_thread_local")) return need_gpu() ? (cxx_worker_thread_local(0, 1) ? 1 : 0) : 0;
    if (!strcmp(name, "live_cxx_static")) {
        if (!need_gpu()) return 0;
        void *live = exit_live_make();
        if (!live) return 1;
        (void)fc_sync_ctx(NULL);
        cxx_arm_static("C++ static destructor freeing live handles", FC_ERR_INVALID_ARGUMENT, live);
        return 0;
    }
#endif
    if (!strcmp(name, "live_leaked_at_exit")) {
        /* Handles never freed, a capture left open: the process still exits cleanly. */
        if (!need_gpu()) return 0;
        if (!exit_live_make()) return 1;
        say("hook-ran [exit with live handles and an open capture, never freed]");
        return 0;
    }
    say("unknown scenario %s", name);
    return 2;
}

/* ---- the parent ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    int hooks; /* "hook-ran" lines expected */
    int cxx;   /* needs the C++ part */
} scenario;

static const scenario scenarios[] = {
    {"key_dtor", 1, 0},
    {"key_dtor_first_call", 1, 0},
    {"key_dtor_second_round", 2, 0},
    {"atexit_main", 1, 0},
    {"atexit_worker_exit", 1, 0},
    {"cxx_thread_local_first", 1, 1},
    {"cxx_thread_local_last", 1, 1},
    {"cxx_thread_local_main", 1, 1},
    {"cxx_static", 1, 1},
    {"live_key_dtor", 1, 0},
    {"live_atexit_main", 1, 0},
    {"live_atexit_registered_first", 1, 0},
    {"live_cxx_thread_local", 1, 1},
    {"live_cxx_static", 1, 1},
    {"live_leaked_at_exit", 1, 0},
};

#define CHILD_TIMEOUT_MS 120000

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Runs one scenario in a child; returns its output (malloc'ed) and status. */
static char *spawn_child(const char *self, const char *name, int *status, int *timed_out)
{
    int fds[2];
    size_t cap = 8192, len = 0;
    char *out = (char *)malloc(cap);
    *status = -1;
    *timed_out = 0;
    if (!out || pipe(fds) != 0) return out;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char *argv[] = {(char *)self, (char *)"--child", (char *)name, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        snprintf(out, cap, "posix_spawn failed: %s\n", strerror(rc));
        close(fds[0]);
        return out;
    }
    double deadline = now_ms() + CHILD_TIMEOUT_MS;
    for (;;) {
        struct pollfd p = {fds[0], POLLIN, 0};
        int left = (int)(deadline - now_ms());
        if (left <= 0) {
            *timed_out = 1;
            kill(pid, SIGKILL);
            break;
        }
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        if (len + 4096 + 1 > cap) {
            char *bigger = (char *)realloc(out, cap * 2);
            if (!bigger) break;
            out = bigger;
            cap *= 2;
        }
        ssize_t n = read(fds[0], out + len, cap - len - 1);
        if (n <= 0) break;
        len += (size_t)n;
    }
    out[len] = 0;
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    return out;
}

static int count_lines(const char *out, const char *prefix)
{
    int n = 0;
    size_t plen = strlen(prefix);
    for (const char *p = out; p && *p;) {
        if (!strncmp(p, prefix, plen)) n++;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return n;
}

static void print_indented(const char *out)
{
    for (const char *p = out; *p;) {
        const char *e = strchr(p, '\n');
        int n = e ? (int)(e - p) : (int)strlen(p);
        printf("    | %.*s\n", n, p);
        p = e ? e + 1 : p + n;
    }
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
    printf("%s: libfcgraph %s; each scenario runs in a child process\n", ct_prog, fc_version());

    for (size_t i = 0; i < CT_COUNT(scenarios); i++) {
        const scenario *s = &scenarios[i];
#ifdef FC_NO_CXX
        if (s->cxx) {
            CT_SKIP_CASE(s->name, "built without a C++ compiler");
            continue;
        }
#endif
        int status, timed_out;
        char *out = spawn_child(self, s->name, &status, &timed_out);
        const char *text = out ? out : "";
        char why[256] = "";
        if (timed_out)
            snprintf(why, sizeof why, "child hung (killed after %d s)", CHILD_TIMEOUT_MS / 1000);
        else if (status == -1)
            snprintf(why, sizeof why, "child did not run");
        else if (WIFSIGNALED(status))
            snprintf(why, sizeof why, "child killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        else if (WEXITSTATUS(status) != 0)
            snprintf(why, sizeof why, "child exited with status %d", WEXITSTATUS(status));
        else if (count_lines(text, "child-skip:") == 0 && count_lines(text, "hook-ran") != s->hooks)
            snprintf(why, sizeof why, "%d hook(s) ran, expected %d", count_lines(text, "hook-ran"), s->hooks);
        if (why[0]) {
            printf("[FAIL] %s/%s: %s; child output:\n", ct_prog, s->name, why);
            print_indented(text);
            ct_failed++;
        } else if (count_lines(text, "child-skip:")) {
            const char *sk = strstr(text, "child-skip:");
            const char *e = strchr(sk, '\n');
            CT_SKIP_CASE(s->name, "%.*s", e ? (int)(e - sk) : (int)strlen(sk), sk);
        } else {
            printf("[PASS] %s/%s\n", ct_prog, s->name);
            print_indented(text);
            ct_passed++;
        }
        free(out);
    }
    return ct_finish();
}
