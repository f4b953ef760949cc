/* interop_libs.h - cuBLAS and NCCL opened at run time (dlopen), for the
 * interop example, the C tests (ctest/test_cublas.c, ctest/test_nccl.c) and
 * the benchmark (bench/interop/interop_bench.c) of libfcgraph.
 *
 * libfcgraph never links cuBLAS or NCCL: the engine brings them. An engine
 * built with the CUDA toolkit includes <cublas_v2.h> / <nccl.h> and links
 * -lcublas / -lnccl instead; the calls are the same. This header declares
 * only the entry points used here, with the ABI of NVIDIA's public headers
 * (cublas_api.h of cuBLAS 12 and 13, nccl.h of NCCL 2.x):
 *   - status and enum arguments (cublasStatus_t, cublasOperation_t,
 *     cublasMath_t, ncclResult_t, ncclDataType_t, ncclRedOp_t) are C enums,
 *     passed and returned as int;
 *   - cublasHandle_t is `struct cublasContext *`, ncclComm_t is
 *     `struct ncclComm *` (the headers' own opaque tags);
 *   - cudaStream_t is `struct CUstream_st *`, the same object as the
 *     driver's CUstream: fc_ctx_stream() is passed as is (void *).
 * The exported names are the ones the headers' macros map to (cublasCreate
 * is #define'd to cublasCreate_v2, and so on).
 *
 * Which library is opened:
 *   cuBLAS: $FC_CUBLAS_LIBRARY (a path or a soname) when set, else
 *           libcublas.so.13, libcublas.so.12, libcublas.so. With a path,
 *           the libcublasLt next to it is opened first, so a wheel's
 *           directory (site-packages/nvidia/cu13/lib) works without
 *           LD_LIBRARY_PATH.
 *   NCCL:   $FC_NCCL_LIBRARY when set, else libnccl.so.2, libnccl.so.
 * Both libraries link the CUDA runtime statically: nothing else is needed.
 * They use the CUDA context current on the calling thread, and the contexts
 * of fc_cuda_init_device are the devices' primary contexts, left current on
 * threads that had none: create the fc context on the thread first, then
 * the cuBLAS handle (il_current_cu_context checks it).
 */
#ifndef FC_INTEROP_LIBS_H
#define FC_INTEROP_LIBS_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv (and, for the programs, pthread barriers) */
#endif

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cuBLAS (cublas_api.h) ------------------------------------------------ */
typedef struct cublasContext *il_cublas_handle; /* cublasHandle_t */

#define IL_CUBLAS_STATUS_SUCCESS 0 /* cublasStatus_t */
#define IL_CUBLAS_OP_N 0           /* cublasOperation_t */
#define IL_CUBLAS_OP_T 1
#define IL_CUBLAS_DEFAULT_MATH 0 /* cublasMath_t: FP32 routines compute in FP32 (no TF32) */
#define IL_CUBLAS_PEDANTIC_MATH 2

/* cuBLAS' recommended user workspace on Hopper (sm_90) is 32 MiB (4 MiB
 * on older GPUs); graph capture needs one, as cuBLAS must not allocate
 * while the stream captures. */
#define IL_CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct il_cublas {
    void *lib, *lt;
    char path[1024]; /* the name or path that was opened */
    int (*cublasCreate_v2)(il_cublas_handle *handle);
    int (*cublasDestroy_v2)(il_cublas_handle handle);
    int (*cublasGetVersion_v2)(il_cublas_handle handle, int *version);
    /* Also resets the handle's workspace to cuBLAS' default pool: set the
     * workspace after the stream. */
    int (*cublasSetStream_v2)(il_cublas_handle handle, void *stream);
    int (*cublasSetWorkspace_v2)(il_cublas_handle handle, void *workspace, size_t workspace_bytes);
    int (*cublasSetMathMode)(il_cublas_handle handle, int mode);
    /* Column-major C = alpha * op(A) * op(B) + beta * C; alpha and beta are
     * host pointers (the default pointer mode), read during the call, so a
     * capture records their values. */
    int (*cublasSgemm_v2)(il_cublas_handle handle, int transa, int transb, int m, int n, int k, const float *alpha,
                          const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc);
    const char *(*cublasGetStatusName)(int status); /* optional (cuBLAS >= 11.4.2) */
} il_cublas;

/* ---- NCCL (nccl.h) ---------------------------------------------------------- */
typedef struct ncclComm *il_nccl_comm; /* ncclComm_t */

#define IL_NCCL_SUCCESS 0 /* ncclResult_t */
#define IL_NCCL_FLOAT32 7 /* ncclDataType_t ncclFloat32 */
#define IL_NCCL_SUM 0     /* ncclRedOp_t ncclSum */

typedef struct il_nccl {
    void *lib;
    char path[1024];
    int (*ncclGetVersion)(int *version);
    /* One communicator per device of devlist, in one process (NCCL sets and
     * restores the current device itself). */
    int (*ncclCommInitAll)(il_nccl_comm *comms, int ndev, const int *devlist);
    int (*ncclCommDestroy)(il_nccl_comm comm);
    int (*ncclCommGetAsyncError)(il_nccl_comm comm, int *async_error);
    int (*ncclAllReduce)(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, il_nccl_comm comm,
                         void *stream);
    const char *(*ncclGetErrorString)(int result);
    const char *(*ncclGetLastError)(il_nccl_comm comm); /* optional (NCCL >= 2.13) */
} il_nccl;

/* ---- loading ---------------------------------------------------------------- */

/* Appends to err (NUL-terminated, errlen bytes). */
static inline void il_append(char *err, size_t errlen, const char *text)
{
    size_t used = strlen(err);
    if (used + 1 < errlen) snprintf(err + used, errlen - used, "%s", text);
}

/* dlsym of `name` into the function pointer at `slot` (object pointer to a
 * function pointer of `size` bytes). 0, or -1 with the reason in err. */
static inline int il_sym(void *lib, const char *name, void *slot, size_t size, int required, char *err,
                         size_t errlen)
{
    dlerror();
    void *sym = dlsym(lib, name);
    if (!sym) {
        if (!required) return 0; /* stays NULL */
        const char *why = dlerror();
        char line[512];
        snprintf(line, sizeof line, "%smissing symbol %s (%s)", err[0] ? "; " : "", name, why ? why : "NULL");
        il_append(err, errlen, line);
        return -1;
    }
    if (size != sizeof sym) {
        il_append(err, errlen, "function pointers are not object-pointer sized");
        return -1;
    }
    memcpy(slot, &sym, sizeof sym); /* POSIX: function pointers are object-pointer sized */
    return 0;
}

#define IL_SYM(api, name, required) il_sym((api)->lib, #name, (void *)&(api)->name, sizeof((api)->name), (required), err, errlen)

/* Opens the first of `names` (NULL-terminated) that dlopen accepts; the
 * errors of all tried go to err. */
static inline void *il_open_first(const char *const *names, char *opened, size_t opened_len, char *err, size_t errlen)
{
    for (size_t i = 0; names[i]; i++) {
        dlerror();
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(opened, opened_len, "%s", names[i]);
            return lib;
        }
        const char *why = dlerror();
        char line[1280];
        snprintf(line, sizeof line, "%sdlopen(%s): %s", err[0] ? "; " : "", names[i], why ? why : "failed");
        il_append(err, errlen, line);
    }
    return NULL;
}

/* Loads cuBLAS into *api (zeroed first). 0 on success; -1 with the reason
 * in err (every name tried and its dlopen error, or the missing symbol). */
static inline int il_cublas_load(il_cublas *api, char *err, size_t errlen)
{
    memset(api, 0, sizeof *api);
    err[0] = '\0';
    const char *env = getenv("FC_CUBLAS_LIBRARY");
    const char *defaults[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL};
    const char *from_env[] = {env, NULL};
    if (env && env[0] && strchr(env, '/')) {
        /* libcublas needs libcublasLt; open the one next to it first. */
        char lt[1024];
        const char *base = strrchr(env, '/') + 1;
        if (strncmp(base, "libcublas.so", 12) == 0 &&
            (size_t)snprintf(lt, sizeof lt, "%.*slibcublasLt%s", (int)(base - env), env, base + 9) < sizeof lt)
            api->lt = dlopen(lt, RTLD_NOW | RTLD_GLOBAL);
    }
    api->lib = il_open_first(env && env[0] ? from_env : defaults, api->path, sizeof api->path, err, errlen);
    if (!api->lib) return -1;
    int rc = 0;
    rc |= IL_SYM(api, cublasCreate_v2, 1);
    rc |= IL_SYM(api, cublasDestroy_v2, 1);
    rc |= IL_SYM(api, cublasGetVersion_v2, 1);
    rc |= IL_SYM(api, cublasSetStream_v2, 1);
    rc |= IL_SYM(api, cublasSetWorkspace_v2, 1);
    rc |= IL_SYM(api, cublasSetMathMode, 1);
    rc |= IL_SYM(api, cublasSgemm_v2, 1);
    rc |= IL_SYM(api, cublasGetStatusName, 0);
    return rc ? -1 : 0;
}

/* Loads NCCL into *api, as il_cublas_load. */
static inline int il_nccl_load(il_nccl *api, char *err, size_t errlen)
{
    memset(api, 0, sizeof *api);
    err[0] = '\0';
    const char *env = getenv("FC_NCCL_LIBRARY");
    const char *defaults[] = {"libnccl.so.2", "libnccl.so", NULL};
    const char *from_env[] = {env, NULL};
    api->lib = il_open_first(env && env[0] ? from_env : defaults, api->path, sizeof api->path, err, errlen);
    if (!api->lib) return -1;
    int rc = 0;
    rc |= IL_SYM(api, ncclGetVersion, 1);
    rc |= IL_SYM(api, ncclCommInitAll, 1);
    rc |= IL_SYM(api, ncclCommDestroy, 1);
    rc |= IL_SYM(api, ncclCommGetAsyncError, 1);
    rc |= IL_SYM(api, ncclAllReduce, 1);
    rc |= IL_SYM(api, ncclGetErrorString, 1);
    rc |= IL_SYM(api, ncclGetLastError, 0);
    return rc ? -1 : 0;
}

/* "CUBLAS_STATUS_..." for a status (or "cuBLAS status N" when the library
 * lacks cublasGetStatusName). `buf` holds the fallback text. */
static inline const char *il_cublas_status(const il_cublas *api, int status, char *buf, size_t len)
{
    if (api->cublasGetStatusName) {
        const char *name = api->cublasGetStatusName(status);
        if (name) return name;
    }
    snprintf(buf, len, "cuBLAS status %d", status);
    return buf;
}

/* "<error string> (<last error>)" of an NCCL result, into buf. comm may be
 * NULL. */
static inline const char *il_nccl_error(const il_nccl *api, int result, il_nccl_comm comm, char *buf, size_t len)
{
    const char *what = api->ncclGetErrorString ? api->ncclGetErrorString(result) : NULL;
    /* ncclGetLastError reports the calling thread's last NCCL error; comm may be NULL. */
    const char *last = api->ncclGetLastError ? api->ncclGetLastError(comm) : NULL;
    snprintf(buf, len, "ncclResult %d: %s%s%s%s", result, what ? what : "?", last && last[0] ? " (last error: " : "",
             last && last[0] ? last : "", last && last[0] ? ")" : "");
    return buf;
}

/* Sets NCCL_NVLS_ENABLE=0 before NCCL initialises (the GPU machine
 * requires NVLink multicast off). Returns the previous value (NULL if
 * unset) so the caller can say that it overrode one. */
static inline const char *il_nccl_disable_nvls(void)
{
    static char previous[64];
    const char *old = getenv("NCCL_NVLS_ENABLE");
    if (old) snprintf(previous, sizeof previous, "%s", old);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    return old ? previous : NULL;
}

/* ---- diagnostics ---------------------------------------------------------- */

/* The CUcontext current on the calling thread (cuCtxGetCurrent of the
 * driver the process already loaded: $FC_CUDA_LIBRARY or libcuda.so.1),
 * to check that cuBLAS/NCCL calls made here run in the fc context's CUDA
 * context. 0 with *current set (NULL: none current), -1 when the driver
 * cannot be opened. */
static inline int il_current_cu_context(void **current)
{
    const char *env = getenv("FC_CUDA_LIBRARY");
    void *lib = dlopen(env && env[0] ? env : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    int (*get_current)(void **ctx) = NULL; /* CUresult cuCtxGetCurrent(CUcontext *pctx) */
    void *sym = dlsym(lib, "cuCtxGetCurrent");
    int rc = -1;
    if (sym) {
        memcpy(&get_current, &sym, sizeof sym);
        *current = NULL;
        rc = get_current(current) == 0 ? 0 : -1;
    }
    dlclose(lib);
    return rc;
}

/* Whether missing libraries are failures ($FC_REQUIRE_INTEROP=1, set by
 * scripts/gpu-interop.sh) rather than skips. */
static inline int il_required(void)
{
    const char *v = getenv("FC_REQUIRE_INTEROP");
    return v && strcmp(v, "1") == 0;
}

#endif /* FC_INTEROP_LIBS_H */
