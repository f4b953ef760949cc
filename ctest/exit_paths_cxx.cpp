// exit_paths_cxx.cpp - the C++ destructors of test_exit_paths.c: a
// thread_local object and a static object whose destructors make fc_* calls
// while a thread, or the process, exits. Built by ctest/run.sh with $CXX and
// linked into test_exit_paths.
#include <pthread.h>

#include "cuda/fc_cuda.h"

extern "C" {
// Defined in test_exit_paths.c.
void exit_hook(const char *where, int expect_code, void *live);
void *exit_live_make(void);

int cxx_worker_thread_local(int touch_first, int with_live);
void cxx_arm_main_thread_local(const char *where, int expect_code, void *live);
void cxx_arm_static(const char *where, int expect_code, void *live);
}

namespace {

// Runs the hook from its destructor once armed.
struct Hook {
    const char *where = nullptr;
    int expect_code = 0;
    void *live = nullptr;
    bool armed = false;
    ~Hook()
    {
        if (armed) exit_hook(where, expect_code, live);
    }
};

thread_local Hook tls_hook;
// Constructed before main, so destroyed after every atexit handler
// registered later (the driver's included).
Hook static_hook;

struct WorkerArgs {
    int touch_first;
    int with_live;
    int ok;
};

void *worker(void *p)
{
    auto *args = static_cast<WorkerArgs *>(p);
    if (args->touch_first) tls_hook.armed = false; // constructs it before any fc_* call
    void *live = args->with_live ? exit_live_make() : nullptr;
    if (args->with_live && live == nullptr) return nullptr; // exit_live_make said why
    (void)fc_sync_ctx(nullptr); // this thread records FC_ERR_INVALID_ARGUMENT
    tls_hook.where = args->touch_first ? "C++ thread_local destructor (constructed first)"
                                       : "C++ thread_local destructor (constructed last)";
    tls_hook.expect_code = FC_ERR_INVALID_ARGUMENT;
    tls_hook.live = live;
    tls_hook.armed = true;
    args->ok = 1;
    return nullptr;
}

} // namespace

// Runs a thread whose thread_local destructor calls the hook; returns 0 when
// the thread ran to its end (the hook itself exits the process on failure).
int cxx_worker_thread_local(int touch_first, int with_live)
{
    WorkerArgs args{touch_first, with_live, 0};
    pthread_t th;
    if (pthread_create(&th, nullptr, worker, &args) != 0) return -1;
    pthread_join(th, nullptr);
    return args.ok ? 0 : -1;
}

void cxx_arm_main_thread_local(const char *where, int expect_code, void *live)
{
    tls_hook.where = where;
    tls_hook.expect_code = expect_code;
    tls_hook.live = live;
    tls_hook.armed = true;
}

void cxx_arm_static(const char *where, int expect_code, void *live)
{
    static_hook.where = where;
    static_hook.expect_code = expect_code;
    static_hook.live = live;
    static_hook.armed = true;
}
