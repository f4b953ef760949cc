/* A stand-in CUDA driver for the fcgraph CLI's tests: two "Stand-in GPU"
 * devices (one with FC_STAND_IN_DEVICES=1) (compute capability 9.0, 80 GiB, 70 GiB free) whose every other
 * call succeeds and does nothing: no memory is written, no kernel runs
 * (captures end with a one-node graph that instantiates and "launches").
 * cuGraphExecUpdate is missing (an optional feature absent); the
 * element-wise kernels' parameters are reported as (8, 8, 8, 4) bytes.
 * Reached through cuGetProcAddress, as the real driver is. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef struct { char bytes[16]; } CUuuid;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_FOUND 500
#define CU_GET_PROC_ADDRESS_SUCCESS 0
#define CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1

static int context_token, graph_token, exec_token;

static CUresult any(void) { return CUDA_SUCCESS; }
static CUresult driver_version(int *v) { *v = 12080; return CUDA_SUCCESS; }
/* FC_STAND_IN_DEVICES=1 makes a one-device machine. */
static int devices(void) {
    const char *env = getenv("FC_STAND_IN_DEVICES");
    return env && *env == '1' ? 1 : 2;
}
static CUresult device_count(int *n) { *n = devices(); return CUDA_SUCCESS; }
static CUresult device_get(int *dev, int ordinal) {
    if (ordinal < 0 || ordinal >= devices()) return CUDA_ERROR_INVALID_VALUE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}
static CUresult device_name(char *name, int len, int dev) {
    (void)dev;
    if (len < 1) return CUDA_ERROR_INVALID_VALUE;
    strncpy(name, "Stand-in GPU", (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}
static CUresult device_attribute(int *v, int attr, int dev) {
    (void)dev;
    *v = attr == 75 ? 9 : attr == 76 ? 0 : 1; /* compute capability major, minor */
    return CUDA_SUCCESS;
}
static CUresult total_mem(size_t *bytes, int dev) { (void)dev; *bytes = (size_t)80 << 30; return CUDA_SUCCESS; }
static CUresult mem_info(size_t *free_bytes, size_t *total) {
    *free_bytes = (size_t)70 << 30;
    *total = (size_t)80 << 30;
    return CUDA_SUCCESS;
}
static CUresult device_uuid(CUuuid *u, int dev) {
    int i;
    for (i = 0; i < 16; i++) u->bytes[i] = (char)(dev * 16 + i);
    return CUDA_SUCCESS;
}
static CUresult primary_retain(void **ctx, int dev) { (void)dev; *ctx = &context_token; return CUDA_SUCCESS; }
static CUresult param_info(void *f, size_t index, size_t *offset, size_t *size) {
    (void)f;
    if (index > 3) return CUDA_ERROR_INVALID_VALUE;
    *offset = index * 8;
    *size = index < 3 ? 8 : 4;
    return CUDA_SUCCESS;
}

/* Captures record one node, so graphs are instantiated and launched. */
static CUresult end_capture(void *stream, void **graph) { (void)stream; *graph = &graph_token; return CUDA_SUCCESS; }
static CUresult graph_nodes(void *graph, void **nodes, size_t *count) {
    (void)graph;
    if (nodes && *count >= 1) nodes[0] = &graph_token;
    *count = 1;
    return CUDA_SUCCESS;
}
static CUresult instantiate(void **exec, void *graph, unsigned long long flags) {
    (void)graph; (void)flags;
    *exec = &exec_token;
    return CUDA_SUCCESS;
}

static void *lookup(const char *s) {
    if (strcmp(s, "cuGraphExecUpdate") == 0) return NULL;
    /* No conditional nodes either: their body graphs would need a model. */
    if (strcmp(s, "cuGraphConditionalHandleCreate") == 0) return NULL;
    if (strcmp(s, "cuDriverGetVersion") == 0) return (void *)driver_version;
    if (strcmp(s, "cuDeviceGetCount") == 0) return (void *)device_count;
    if (strcmp(s, "cuDeviceGet") == 0) return (void *)device_get;
    if (strcmp(s, "cuDeviceGetName") == 0) return (void *)device_name;
    if (strcmp(s, "cuDeviceGetAttribute") == 0) return (void *)device_attribute;
    if (strcmp(s, "cuDeviceTotalMem") == 0) return (void *)total_mem;
    if (strcmp(s, "cuMemGetInfo") == 0) return (void *)mem_info;
    if (strcmp(s, "cuDeviceGetUuid") == 0) return (void *)device_uuid;
    if (strcmp(s, "cuDevicePrimaryCtxRetain") == 0) return (void *)primary_retain;
    if (strcmp(s, "cuFuncGetParamInfo") == 0) return (void *)param_info;
    if (strcmp(s, "cuStreamEndCapture") == 0) return (void *)end_capture;
    if (strcmp(s, "cuGraphGetNodes") == 0) return (void *)graph_nodes;
    if (strcmp(s, "cuGraphInstantiateWithFlags") == 0) return (void *)instantiate;
    return (void *)any;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int driverVersion,
                             unsigned long long flags, int *symbolStatus) {
    (void)driverVersion; (void)flags;
    *pfn = lookup(symbol);
    if (symbolStatus)
        *symbolStatus = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
