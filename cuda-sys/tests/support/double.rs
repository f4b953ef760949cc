//! A driver double: a stand-in `libcuda` (C, generated here and built with
//! the `cc` crate's compiler) that follows NVIDIA's `cuGetProcAddress`
//! versioning contract for every symbol of cuda-sys's table, with the real
//! ABI history of each (`abi_history.txt`, checked against `cudaTypedefs.h`
//! by `tests/audit.rs`).
//!
//! The contract, for a driver of version `D` and a request of `symbol` at
//! version `V`:
//! - `V > D` is counted (the loader must never do it); a CUDA 13 driver
//!   (`D >= 13000`) refuses it with `CUDA_ERROR_INVALID_VALUE`, older ones
//!   go on with `min(V, D)`;
//! - a symbol the driver does not have (unknown, or first ABI newer than
//!   `D`) is not found (`CUDA_ERROR_NOT_FOUND`, status `SYMBOL_NOT_FOUND`);
//! - below the symbol's first ABI: not found (status
//!   `VERSION_NOT_SUFFICIENT`);
//! - else the symbol's newest ABI with version `<= min(V, D)`.
//!
//! `cuGetProcAddress` (11.3 ABI) is always exported, `cuGetProcAddress_v2`
//! (12.0 ABI) only for `D >= 12000`.
//!
//! Every ABI of every symbol is its own C function, so a test can tell
//! which one it got (`identify`) and which one ran (`last_called`). Most
//! stubs only record that they ran; `cuDriverGetVersion`, both ABIs of
//! `cuGraphExecUpdate` and both of `cuGraphGetEdges` behave like the driver
//! (a fixed four-node chain for the edges; an update result the test sets),
//! and both ABIs of `cuGraphAddKernelNode`, `cuGraphExecKernelNodeSetParams`,
//! `cuGraphKernelNodeSetParams`, `cuGraphAddDependencies` and
//! `cuGraphAddNode` record the arguments they read through their own
//! parameter layout ([`Probe::last_args`]). `cuGraphAddNode` also refuses
//! parameters whose unused bytes are not zero and hands a conditional node
//! body graphs ([`BODY_GRAPHS`]); `cuGraphConditionalHandleCreate` hands
//! out handles, `cuGraphNodeGetType` reports the type of each node the
//! double added, and the linker (`cuLinkCreate` 6050 to `cuLinkDestroy`)
//! keeps one link of counted inputs and hands out [`LINKED_CUBIN`].
//!
//! It is also enough of a device for a whole recording through fc-graph's
//! safe API: one device (`cuDeviceGetCount`, `cuDeviceGet`, attributes of
//! a compute capability 9.0 device with 1024 threads a block), a primary
//! context and each thread's current context (`cuCtxGetCurrent`, `Set`,
//! `Push`, `Pop`), streams, memory (`cuMemAlloc`: distinct fake
//! addresses), modules and functions (`cuModuleLoadDataEx`,
//! `cuModuleGetFunction`: one fake handle per name and module,
//! `cuFuncGetAttribute`, and `cuFuncGetParamInfo` for the built-in
//! kernels' `(u64, u64, u64, u32)`), graphs and executables (`cuGraphCreate`,
//! `cuGraphInstantiateWithFlags`): fake handles, nothing run.
//!
//! Shared by the cuda-sys and fc-graph tests (`#[path]`), so it uses only
//! `cc`, `libloading` and std.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The ABI history the double serves: `symbol -> versions`, oldest first.
pub const HISTORY: &str = include_str!("../abi_history.txt");

/// The parsed history, or why a line does not parse.
pub fn history() -> Result<BTreeMap<String, Vec<i32>>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in HISTORY.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let name = words.next().ok_or_else(|| format!("line {}: empty", i + 1))?;
        let versions: Vec<i32> = words
            .map(|w| w.parse().map_err(|_| format!("line {}: bad version {w:?}", i + 1)))
            .collect::<Result<_, _>>()?;
        if versions.is_empty() || versions.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("line {}: versions must be ascending and non-empty: {line}", i + 1));
        }
        if out.insert(name.to_string(), versions).is_some() {
            return Err(format!("line {}: {name} listed twice", i + 1));
        }
    }
    Ok(out)
}

/// The (symbol, version) pairs with hand-written behaviour in [`PRELUDE`];
/// every other pair gets a stub that only records that it ran.
const SPECIAL: &[(&str, i32)] = &[
    ("cuDriverGetVersion", 2020),
    ("cuGraphExecUpdate", 10020),
    ("cuGraphExecUpdate", 12000),
    ("cuGraphGetEdges", 10000),
    ("cuGraphGetEdges", 12030),
    ("cuGraphAddKernelNode", 10000),
    ("cuGraphAddKernelNode", 12000),
    ("cuGraphExecKernelNodeSetParams", 10010),
    ("cuGraphExecKernelNodeSetParams", 12000),
    ("cuGraphAddDependencies", 10000),
    ("cuGraphAddDependencies", 12030),
    ("cuGraphKernelNodeSetParams", 10000),
    ("cuGraphKernelNodeSetParams", 12000),
    ("cuGraphAddNode", 12020),
    ("cuGraphAddNode", 12030),
    ("cuGraphConditionalHandleCreate", 12030),
    ("cuGraphNodeGetType", 10000),
    ("cuLinkCreate", 6050),
    ("cuLinkAddData", 6050),
    ("cuLinkAddFile", 6050),
    ("cuLinkComplete", 5050),
    ("cuLinkDestroy", 5050),
    // Enough of a device for a whole recording (see the module docs).
    ("cuDeviceGetCount", 2000),
    ("cuDeviceGet", 2000),
    ("cuDeviceGetAttribute", 2000),
    ("cuDevicePrimaryCtxRetain", 7000),
    ("cuCtxGetCurrent", 4000),
    ("cuCtxSetCurrent", 4000),
    ("cuCtxPushCurrent", 4000),
    ("cuCtxPopCurrent", 4000),
    ("cuStreamCreate", 2000),
    ("cuMemAlloc", 3020),
    ("cuModuleLoadDataEx", 2010),
    ("cuModuleGetFunction", 2000),
    ("cuFuncGetAttribute", 2020),
    ("cuGraphCreate", 10000),
    ("cuGraphInstantiateWithFlags", 11040),
    ("cuFuncGetParamInfo", 12040),
];

/// First fake node handle the double's `cuGraphAddKernelNode` hands out
/// (then one more per call).
pub const ADDED_NODE_BASE: usize = 0x2000;

/// Fake node handles of the double's graph: a chain n1 -> n2 -> n3 -> n4
/// whose middle edge is programmatic (type 1, from port 1).
pub const NODES: [usize; 4] = [0x1100, 0x1200, 0x1300, 0x1400];

/// The body graphs the double's `cuGraphAddNode` hands out for a
/// conditional node (`phGraph_out`, at most four).
pub const BODY_GRAPHS: [usize; 4] = [0x3100, 0x3200, 0x3300, 0x3400];

/// The first condition handle the double's `cuGraphConditionalHandleCreate`
/// hands out (then one more per call).
pub const CONDITION_BASE: u64 = 0xC0DE_0000;

/// The link state the double's `cuLinkCreate` hands out.
pub const LINK_STATE: usize = 0x4C00;

/// The cubin the double's `cuLinkComplete` hands out (its size: the bytes
/// before the NUL).
pub const LINKED_CUBIN: &str = "fc-double-cubin";

const PRELUDE: &str = r#"
#include <stddef.h>
#include <string.h>

typedef unsigned int CUresult;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE 910
#define ST_SUCCESS 0
#define ST_SYMBOL_NOT_FOUND 1
#define ST_VERSION_NOT_SUFFICIENT 2

typedef struct { unsigned result; void *errorNode; void *errorFromNode; } UpdateInfo;
typedef struct { unsigned char from_port, to_port, type, reserved[5]; } EdgeData;

static int g_last_called = -1;
static int g_calls[N_PAIRS];
#define CALLED(i) do { g_last_called = (i); (void)__atomic_fetch_add(&g_calls[(i)], 1, __ATOMIC_RELAXED); } while (0)
static unsigned g_update_result = 0;
static void *g_update_error_node = NULL;
static void *g_update_error_from = NULL;
static void *g_update_exec = NULL;
static void *g_update_graph = NULL;

#define MAX_REQUESTS 512
static char g_req_name[MAX_REQUESTS][64];
static int g_req_version[MAX_REQUESTS];
static int g_requests = 0;
static int g_over = 0;

void fc_double_set_update(unsigned result, void *error_node, void *error_from) {
    g_update_result = result; g_update_error_node = error_node; g_update_error_from = error_from;
}
void fc_double_last_update_args(void **exec, void **graph) { *exec = g_update_exec; *graph = g_update_graph; }
int fc_double_last_called(void) { return g_last_called; }
int fc_double_calls(int i) { return i >= 0 && i < N_PAIRS ? __atomic_load_n(&g_calls[i], __ATOMIC_RELAXED) : 0; }
void fc_double_reset_last_called(void) { g_last_called = -1; }
int fc_double_requests(void) { return g_requests; }
int fc_double_over_requests(void) { return g_over; }
int fc_double_request(int i, const char **name, int *version) {
    if (i < 0 || i >= g_requests || i >= MAX_REQUESTS) return 0;
    *name = g_req_name[i]; *version = g_req_version[i]; return 1;
}

static CUresult abi_cuDriverGetVersion_v2020(int *v) {
    CALLED(IDX_cuDriverGetVersion_v2020);
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = DRIVER_VERSION;
    return CUDA_SUCCESS;
}

static CUresult update_common(void *exec, void *graph) {
    g_update_exec = exec; g_update_graph = graph;
    return g_update_result ? CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE : CUDA_SUCCESS;
}
static CUresult abi_cuGraphExecUpdate_v12000(void *exec, void *graph, UpdateInfo *info) {
    CALLED(IDX_cuGraphExecUpdate_v12000);
    if (!info) return CUDA_ERROR_INVALID_VALUE;
    info->result = g_update_result;
    info->errorNode = g_update_error_node;
    info->errorFromNode = g_update_error_from;
    return update_common(exec, graph);
}
static CUresult abi_cuGraphExecUpdate_v10020(void *exec, void *graph, void **error_node, unsigned *result) {
    CALLED(IDX_cuGraphExecUpdate_v10020);
    if (!error_node || !result) return CUDA_ERROR_INVALID_VALUE;
    *error_node = g_update_error_node;
    *result = g_update_result;
    return update_common(exec, graph);
}

#define N_EDGES 3
static void *edge_from[N_EDGES] = { (void *)NODE1, (void *)NODE2, (void *)NODE3 };
static void *edge_to[N_EDGES] = { (void *)NODE2, (void *)NODE3, (void *)NODE4 };
static const EdgeData edge_data[N_EDGES] = { {0, 0, 0, {0}}, {1, 0, 1, {0}}, {0, 0, 0, {0}} };

/* Graph building: the stubs record their arguments (fc_double_last_args). */
typedef struct {
    void *func; unsigned gx, gy, gz, bx, by, bz, shmem; void **kernelParams; void **extra;
} KernelParamsV1;
typedef struct {
    void *func; unsigned gx, gy, gz, bx, by, bz, shmem; void **kernelParams; void **extra; void *kern; void *ctx;
} KernelParamsV2;

#define N_ARGS 8
static unsigned long long g_args[N_ARGS];
static unsigned long long g_added = 0;
void fc_double_last_args(unsigned long long *out) { memcpy(out, g_args, sizeof g_args); }
static void record_v1(const KernelParamsV1 *p) {
    g_args[2] = (unsigned long long)(size_t)p->func;
    g_args[3] = p->gx; g_args[4] = p->bx; g_args[5] = p->shmem;
    /* the first kernel parameter's first 8 bytes */
    g_args[6] = p->kernelParams ? *(const unsigned long long *)p->kernelParams[0] : 0;
}
static void record_v2(const KernelParamsV2 *p) {
    g_args[2] = (unsigned long long)(size_t)p->func;
    g_args[3] = p->gx; g_args[4] = p->bx; g_args[5] = p->shmem;
    g_args[6] = p->kernelParams ? *(const unsigned long long *)p->kernelParams[0] : 0;
    g_args[7] = (unsigned long long)(size_t)p->kern | (unsigned long long)(size_t)p->ctx;
}
/* The type of each node handed out (cuGraphNodeGetType), by index. */
#define MAX_NODES 256
static unsigned g_node_type[MAX_NODES];
static CUresult add_node_common(void **node, size_t ndeps, unsigned type) {
    if (!node) return CUDA_ERROR_INVALID_VALUE;
    if (g_added < MAX_NODES) g_node_type[g_added] = type;
    *node = (void *)(size_t)(ADDED_NODE_BASE + g_added++);
    g_args[0] = (unsigned long long)(size_t)*node; g_args[1] = ndeps;
    return CUDA_SUCCESS;
}
static CUresult add_kernel_common(void **node, size_t ndeps) { return add_node_common(node, ndeps, 0); }
static CUresult abi_cuGraphAddKernelNode_v12000(void **node, void *graph, void *const *deps, size_t ndeps,
                                                const KernelParamsV2 *p) {
    (void)graph; (void)deps;
    CALLED(IDX_cuGraphAddKernelNode_v12000);
    memset(g_args, 0, sizeof g_args);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    record_v2(p);
    return add_kernel_common(node, ndeps);
}
static CUresult abi_cuGraphAddKernelNode_v10000(void **node, void *graph, void *const *deps, size_t ndeps,
                                                const KernelParamsV1 *p) {
    (void)graph; (void)deps;
    CALLED(IDX_cuGraphAddKernelNode_v10000);
    memset(g_args, 0, sizeof g_args);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    record_v1(p);
    return add_kernel_common(node, ndeps);
}
static CUresult abi_cuGraphExecKernelNodeSetParams_v12000(void *exec, void *node, const KernelParamsV2 *p) {
    CALLED(IDX_cuGraphExecKernelNodeSetParams_v12000);
    memset(g_args, 0, sizeof g_args);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    record_v2(p);
    g_args[0] = (unsigned long long)(size_t)exec; g_args[1] = (unsigned long long)(size_t)node;
    return CUDA_SUCCESS;
}
static CUresult abi_cuGraphExecKernelNodeSetParams_v10010(void *exec, void *node, const KernelParamsV1 *p) {
    CALLED(IDX_cuGraphExecKernelNodeSetParams_v10010);
    memset(g_args, 0, sizeof g_args);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    record_v1(p);
    g_args[0] = (unsigned long long)(size_t)exec; g_args[1] = (unsigned long long)(size_t)node;
    return CUDA_SUCCESS;
}
static CUresult abi_cuGraphAddDependencies_v12030(void *graph, void *const *from, void *const *to,
                                                  const EdgeData *data, size_t n) {
    (void)graph;
    CALLED(IDX_cuGraphAddDependencies_v12030);
    memset(g_args, 0, sizeof g_args);
    if (!from || !to) return CUDA_ERROR_INVALID_VALUE;
    g_args[0] = n;
    g_args[1] = (unsigned long long)(size_t)from[0]; g_args[2] = (unsigned long long)(size_t)to[0];
    g_args[3] = data ? 1 : 0;
    if (data) { g_args[4] = data[0].from_port; g_args[5] = data[0].type; g_args[6] = data[n - 1].type; }
    return CUDA_SUCCESS;
}
static CUresult abi_cuGraphAddDependencies_v10000(void *graph, void *const *from, void *const *to, size_t n) {
    (void)graph;
    CALLED(IDX_cuGraphAddDependencies_v10000);
    memset(g_args, 0, sizeof g_args);
    if (!from || !to) return CUDA_ERROR_INVALID_VALUE;
    g_args[0] = n;
    g_args[1] = (unsigned long long)(size_t)from[0]; g_args[2] = (unsigned long long)(size_t)to[0];
    return CUDA_SUCCESS;
}

static CUresult abi_cuGraphKernelNodeSetParams_v12000(void *node, const KernelParamsV2 *p) {
    CALLED(IDX_cuGraphKernelNodeSetParams_v12000);
    memset(g_args, 0, sizeof g_args);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    record_v2(p);
    g_args[0] = (unsigned long long)(size_t)node;
    return CUDA_SUCCESS;
}
static CUresult abi_cuGraphKernelNodeSetParams_v10000(void *node, const KernelParamsV1 *p) {
    CALLED(IDX_cuGraphKernelNodeSetParams_v10000);
    memset(g_args, 0, sizeof g_args);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    record_v1(p);
    g_args[0] = (unsigned long long)(size_t)node;
    return CUDA_SUCCESS;
}

/* CUgraphNodeParams: 256 bytes, the union at offset 16 (232 bytes). */
typedef struct {
    unsigned long long handle; unsigned type; unsigned size; void **phGraph_out; void *ctx;
} ConditionalParams;
typedef struct {
    unsigned type; int reserved0[3];
    union { long long reserved1[29]; KernelParamsV2 kernel; ConditionalParams conditional; } u;
    long long reserved2;
} NodeParams;
typedef char node_params_is_256_bytes[sizeof(NodeParams) == 256 ? 1 : -1];
#define TYPE_KERNEL 0
#define TYPE_CONDITIONAL 13
static void *body_graphs[4] = { (void *)BODY1, (void *)BODY2, (void *)BODY3, (void *)BODY4 };
/* Whether every byte the node's type does not use is zero, as the driver requires. */
static int unused_bytes_zero(const NodeParams *p) {
    const unsigned char *b = (const unsigned char *)p;
    size_t i, used = p->type == TYPE_KERNEL ? sizeof(KernelParamsV2)
                   : p->type == TYPE_CONDITIONAL ? sizeof(ConditionalParams) : 0;
    for (i = 4; i < 256; i++) {
        int in_member = i >= 16 && i < 16 + used;
        /* the kernel member's padding after sharedMemBytes */
        int padding = p->type == TYPE_KERNEL && i >= 16 + 36 && i < 16 + 40;
        if ((!in_member || padding) && b[i]) return 0;
    }
    return 1;
}
static CUresult add_node(void **node, void *const *deps, const EdgeData *data, size_t ndeps, NodeParams *p) {
    CUresult res;
    (void)deps;
    memset(g_args, 0, sizeof g_args);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    g_args[2] = p->type;
    g_args[3] = data ? 1 : 0;
    if (data && ndeps) g_args[4] = data[0].type;
    if (p->type == TYPE_KERNEL) {
        g_args[5] = (unsigned long long)(size_t)p->u.kernel.func; g_args[6] = p->u.kernel.gx;
    } else if (p->type == TYPE_CONDITIONAL) {
        g_args[5] = p->u.conditional.handle;
        g_args[6] = p->u.conditional.type | (unsigned long long)p->u.conditional.size << 32;
    }
    g_args[7] = (unsigned long long)unused_bytes_zero(p);
    if (!g_args[7]) return CUDA_ERROR_INVALID_VALUE;
    if (p->type == TYPE_CONDITIONAL) {
        if (p->u.conditional.size < 1 || p->u.conditional.size > 4) return CUDA_ERROR_INVALID_VALUE;
        p->u.conditional.phGraph_out = body_graphs;
    }
    res = add_node_common(node, ndeps, p->type);
    return res;
}
static CUresult abi_cuGraphAddNode_v12030(void **node, void *graph, void *const *deps, const EdgeData *data,
                                          size_t ndeps, NodeParams *p) {
    (void)graph;
    CALLED(IDX_cuGraphAddNode_v12030);
    return add_node(node, deps, data, ndeps, p);
}
static CUresult abi_cuGraphAddNode_v12020(void **node, void *graph, void *const *deps, size_t ndeps,
                                          NodeParams *p) {
    (void)graph;
    CALLED(IDX_cuGraphAddNode_v12020);
    return add_node(node, deps, NULL, ndeps, p);
}
static unsigned long long g_conditions = 0;
static CUresult abi_cuGraphConditionalHandleCreate_v12030(unsigned long long *out, void *graph, void *ctx,
                                                          unsigned default_value, unsigned flags) {
    CALLED(IDX_cuGraphConditionalHandleCreate_v12030);
    memset(g_args, 0, sizeof g_args);
    if (!out || !graph || flags > 1) return CUDA_ERROR_INVALID_VALUE;
    *out = CONDITION_BASE + g_conditions++;
    g_args[0] = *out; g_args[1] = (unsigned long long)(size_t)graph; g_args[2] = (unsigned long long)(size_t)ctx;
    g_args[3] = default_value; g_args[4] = flags;
    return CUDA_SUCCESS;
}
static CUresult abi_cuGraphNodeGetType_v10000(void *node, unsigned *type) {
    size_t i = (size_t)node - ADDED_NODE_BASE;
    CALLED(IDX_cuGraphNodeGetType_v10000);
    if (!type || (size_t)node < ADDED_NODE_BASE || i >= g_added || i >= MAX_NODES) return CUDA_ERROR_INVALID_VALUE;
    *type = g_node_type[i];
    return CUDA_SUCCESS;
}

/* The JIT linker: one link at a time, its inputs counted. */
static const char linked_cubin[] = LINKED_CUBIN;
static int g_link_live = 0;
static unsigned long long g_link_inputs = 0;
static CUresult abi_cuLinkCreate_v6050(unsigned n, unsigned *options, void **values, void **state) {
    (void)values;
    CALLED(IDX_cuLinkCreate_v6050);
    memset(g_args, 0, sizeof g_args);
    if (!state || (n && !options)) return CUDA_ERROR_INVALID_VALUE;
    *state = (void *)LINK_STATE; g_link_live = 1; g_link_inputs = 0;
    g_args[0] = n; g_args[1] = n ? options[0] : 0;
    return CUDA_SUCCESS;
}
static CUresult abi_cuLinkAddData_v6050(void *state, unsigned type, void *data, size_t size, const char *name,
                                        unsigned n, unsigned *options, void **values) {
    (void)options; (void)values;
    CALLED(IDX_cuLinkAddData_v6050);
    memset(g_args, 0, sizeof g_args);
    if (state != (void *)LINK_STATE || !g_link_live || !data || !size) return CUDA_ERROR_INVALID_VALUE;
    g_link_inputs++;
    g_args[0] = (unsigned long long)(size_t)state; g_args[1] = type; g_args[2] = size;
    g_args[3] = *(const unsigned char *)data; g_args[4] = name ? strlen(name) : 0; g_args[5] = n;
    return CUDA_SUCCESS;
}
static CUresult abi_cuLinkAddFile_v6050(void *state, unsigned type, const char *path, unsigned n,
                                        unsigned *options, void **values) {
    (void)options; (void)values;
    CALLED(IDX_cuLinkAddFile_v6050);
    memset(g_args, 0, sizeof g_args);
    if (state != (void *)LINK_STATE || !g_link_live || !path) return CUDA_ERROR_INVALID_VALUE;
    g_link_inputs++;
    g_args[0] = (unsigned long long)(size_t)state; g_args[1] = type; g_args[2] = strlen(path); g_args[5] = n;
    return CUDA_SUCCESS;
}
static CUresult abi_cuLinkComplete_v5050(void *state, void **cubin, size_t *size) {
    CALLED(IDX_cuLinkComplete_v5050);
    memset(g_args, 0, sizeof g_args);
    if (state != (void *)LINK_STATE || !g_link_live || !cubin || !size || !g_link_inputs)
        return CUDA_ERROR_INVALID_VALUE;
    *cubin = (void *)linked_cubin; *size = sizeof linked_cubin - 1;
    g_args[0] = (unsigned long long)(size_t)state; g_args[1] = g_link_inputs;
    return CUDA_SUCCESS;
}
static CUresult abi_cuLinkDestroy_v5050(void *state) {
    CALLED(IDX_cuLinkDestroy_v5050);
    memset(g_args, 0, sizeof g_args);
    if (state != (void *)LINK_STATE || !g_link_live) return CUDA_ERROR_INVALID_VALUE;
    g_link_live = 0;
    g_args[0] = (unsigned long long)(size_t)state;
    return CUDA_SUCCESS;
}

static CUresult edges_common(void **from, void **to, EdgeData *data, size_t *n) {
    size_t i, want;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    if (!from && !to) { *n = N_EDGES; return CUDA_SUCCESS; }
    if (!from || !to) return CUDA_ERROR_INVALID_VALUE;
    want = *n;
    for (i = 0; i < want; i++) {
        from[i] = i < N_EDGES ? edge_from[i] : NULL;
        to[i] = i < N_EDGES ? edge_to[i] : NULL;
        if (data) {
            if (i < N_EDGES) data[i] = edge_data[i]; else memset(&data[i], 0, sizeof data[i]);
        }
    }
    *n = want < N_EDGES ? want : N_EDGES;
    return CUDA_SUCCESS;
}
/* Enough of a device for a whole recording: fake handles, nothing run. */
static unsigned long long g_handles = 0;
static unsigned long long g_next_ptr = 0x7f0000000000ULL;
static __thread void *t_ctx_stack[16];
static __thread int t_ctx_depth = 0; /* t_ctx_stack[t_ctx_depth - 1] is current */
#define FAKE_PRIMARY ((void *)0xC7C70000)
static void *fake_handle(unsigned long long base) { return (void *)(size_t)(base + ++g_handles); }
static CUresult abi_cuDeviceGetCount_v2000(int *n) {
    CALLED(IDX_cuDeviceGetCount_v2000);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}
static CUresult abi_cuDeviceGet_v2000(int *dev, int ordinal) {
    CALLED(IDX_cuDeviceGet_v2000);
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = 0;
    return CUDA_SUCCESS;
}
static CUresult abi_cuDeviceGetAttribute_v2000(int *v, int attr, int dev) {
    CALLED(IDX_cuDeviceGetAttribute_v2000);
    if (!v || dev != 0) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case 1: case 2: case 3: *v = 1024; break; /* threads a block, block x, y */
    case 4: *v = 64; break;                   /* block z */
    case 5: *v = 0x7fffffff; break;           /* grid x */
    case 6: case 7: *v = 65535; break;        /* grid y, z */
    case 8: *v = 49152; break;                /* shared memory a block */
    case 75: *v = 9; break;                   /* compute capability 9.0 */
    case 76: *v = 0; break;
    default: *v = 1; break;
    }
    return CUDA_SUCCESS;
}
static CUresult abi_cuDevicePrimaryCtxRetain_v7000(void **ctx, int dev) {
    CALLED(IDX_cuDevicePrimaryCtxRetain_v7000);
    if (!ctx || dev != 0) return CUDA_ERROR_INVALID_VALUE;
    *ctx = FAKE_PRIMARY;
    return CUDA_SUCCESS;
}
static CUresult abi_cuCtxGetCurrent_v4000(void **ctx) {
    CALLED(IDX_cuCtxGetCurrent_v4000);
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    *ctx = t_ctx_depth ? t_ctx_stack[t_ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}
static CUresult abi_cuCtxSetCurrent_v4000(void *ctx) {
    CALLED(IDX_cuCtxSetCurrent_v4000);
    if (!ctx) {
        if (t_ctx_depth) t_ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!t_ctx_depth) t_ctx_depth = 1;
    t_ctx_stack[t_ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}
static CUresult abi_cuCtxPushCurrent_v4000(void *ctx) {
    CALLED(IDX_cuCtxPushCurrent_v4000);
    if (!ctx || t_ctx_depth >= 16) return CUDA_ERROR_INVALID_VALUE;
    t_ctx_stack[t_ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}
static CUresult abi_cuCtxPopCurrent_v4000(void **ctx) {
    CALLED(IDX_cuCtxPopCurrent_v4000);
    if (!t_ctx_depth) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    t_ctx_depth--;
    if (ctx) *ctx = t_ctx_stack[t_ctx_depth];
    return CUDA_SUCCESS;
}
static CUresult abi_cuStreamCreate_v2000(void **s, unsigned flags) {
    (void)flags;
    CALLED(IDX_cuStreamCreate_v2000);
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    *s = fake_handle(0x57000000ULL);
    return CUDA_SUCCESS;
}
static CUresult abi_cuMemAlloc_v3020(unsigned long long *p, size_t bytes) {
    CALLED(IDX_cuMemAlloc_v3020);
    if (!p || !bytes) return CUDA_ERROR_INVALID_VALUE;
    *p = g_next_ptr;
    g_next_ptr += (bytes + 255) & ~255ULL;
    return CUDA_SUCCESS;
}
static CUresult abi_cuModuleLoadDataEx_v2010(void **m, const void *image, unsigned n, void *opts, void **vals) {
    (void)n; (void)opts; (void)vals;
    CALLED(IDX_cuModuleLoadDataEx_v2010);
    if (!m || !image) return CUDA_ERROR_INVALID_VALUE;
    *m = fake_handle(0x40000000ULL);
    return CUDA_SUCCESS;
}
/* Functions handed out: (module, name), the handle is FUNC_BASE + 16 * index. */
#define MAX_FUNCS 64
#define FUNC_BASE 0xF0000000000ULL
static void *g_func_module[MAX_FUNCS];
static char g_func_name[MAX_FUNCS][64];
static int g_funcs = 0;
static CUresult abi_cuModuleGetFunction_v2000(void **f, void *m, const char *name) {
    int i;
    CALLED(IDX_cuModuleGetFunction_v2000);
    if (!f || !m || !name) return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < g_funcs; i++)
        if (g_func_module[i] == m && strncmp(g_func_name[i], name, 63) == 0) break;
    if (i == g_funcs) {
        if (g_funcs == MAX_FUNCS) return CUDA_ERROR_INVALID_VALUE;
        g_func_module[i] = m;
        strncpy(g_func_name[i], name, 63);
        g_func_name[i][63] = 0;
        g_funcs++;
    }
    *f = (void *)(size_t)(FUNC_BASE + 16ULL * (unsigned)i);
    return CUDA_SUCCESS;
}
/* The parameters of the built-in kernels (fc_add_f32, fc_mul_f32: u64 a, u64 b,
   u64 out, u32 n); INVALID_VALUE past the last, NOT_FOUND for other kernels. */
static CUresult abi_cuFuncGetParamInfo_v12040(void *f, size_t index, size_t *offset, size_t *size) {
    static const size_t sizes[4] = {8, 8, 8, 4};
    size_t i = ((size_t)f - (size_t)FUNC_BASE) / 16;
    CALLED(IDX_cuFuncGetParamInfo_v12040);
    if (!offset || !size || (size_t)f < (size_t)FUNC_BASE || i >= (size_t)g_funcs) return CUDA_ERROR_INVALID_VALUE;
    if (strcmp(g_func_name[i], "fc_add_f32") != 0 && strcmp(g_func_name[i], "fc_mul_f32") != 0) return CUDA_ERROR_NOT_FOUND;
    if (index >= 4) return CUDA_ERROR_INVALID_VALUE;
    *offset = 8 * index;
    *size = sizes[index];
    return CUDA_SUCCESS;
}
static CUresult abi_cuFuncGetAttribute_v2020(int *v, int attr, void *f) {
    CALLED(IDX_cuFuncGetAttribute_v2020);
    if (!v || !f) return CUDA_ERROR_INVALID_VALUE;
    *v = attr == 0 ? 1024 : 0; /* max threads a block; no static shared memory, no registers */
    return CUDA_SUCCESS;
}
static CUresult abi_cuGraphCreate_v10000(void **g, unsigned flags) {
    CALLED(IDX_cuGraphCreate_v10000);
    if (!g || flags) return CUDA_ERROR_INVALID_VALUE;
    *g = fake_handle(0x6A000000ULL);
    return CUDA_SUCCESS;
}
static CUresult abi_cuGraphInstantiateWithFlags_v11040(void **e, void *g, unsigned long long flags) {
    (void)flags;
    CALLED(IDX_cuGraphInstantiateWithFlags_v11040);
    if (!e || !g) return CUDA_ERROR_INVALID_VALUE;
    *e = fake_handle(0xE0000000ULL);
    return CUDA_SUCCESS;
}

static CUresult abi_cuGraphGetEdges_v12030(void *graph, void **from, void **to, EdgeData *data, size_t *n) {
    (void)graph;
    CALLED(IDX_cuGraphGetEdges_v12030);
    return edges_common(from, to, data, n);
}
static CUresult abi_cuGraphGetEdges_v10000(void *graph, void **from, void **to, size_t *n) {
    (void)graph;
    CALLED(IDX_cuGraphGetEdges_v10000);
    return edges_common(from, to, NULL, n);
}
"#;

const RESOLVER: &str = r#"
static int symbol_known(const char *symbol) {
    size_t i;
    for (i = 0; i < N_ABIS; i++)
        if (strcmp(abis[i].name, symbol) == 0 && abis[i].version <= DRIVER_VERSION) return 1;
    return 0;
}

static CUresult lookup(const char *symbol, void **pfn, int version, int *status) {
    size_t i;
    int cap = version < DRIVER_VERSION ? version : DRIVER_VERSION;
    const Abi *best = NULL;
    if (g_requests < MAX_REQUESTS) {
        strncpy(g_req_name[g_requests], symbol ? symbol : "", 63);
        g_req_name[g_requests][63] = 0;
        g_req_version[g_requests] = version;
    }
    g_requests++;
    if (pfn) *pfn = NULL;
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (version > DRIVER_VERSION) {
        g_over++;
        if (DRIVER_VERSION >= 13000) return CUDA_ERROR_INVALID_VALUE;
    }
    if (!symbol_known(symbol)) {
        if (status) *status = ST_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    for (i = 0; i < N_ABIS; i++)
        if (strcmp(abis[i].name, symbol) == 0 && abis[i].version <= cap &&
            (!best || abis[i].version > best->version))
            best = &abis[i];
    if (!best) {
        if (status) *status = ST_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = best->fn;
    if (status) *status = ST_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    (void)flags;
    return lookup(symbol, pfn, version, NULL);
}

#if DRIVER_VERSION >= 12000
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *symbolStatus) {
    (void)flags;
    return lookup(symbol, pfn, version, symbolStatus);
}
#endif

int fc_double_identify(const void *p, const char **name, int *version) {
    size_t i;
    for (i = 0; i < N_ABIS; i++)
        if (abis[i].fn == p) { *name = abis[i].name; *version = abis[i].version; return 1; }
    return 0;
}
int fc_double_abi(int index, const char **name, int *version) {
    if (index < 0 || (size_t)index >= N_ABIS) return 0;
    *name = abis[index].name; *version = abis[index].version; return 1;
}
"#;

/// The double's C source for a driver of version `driver_version`.
pub fn source(driver_version: i32) -> Result<String, String> {
    let hist = history()?;
    let pairs: Vec<(&str, i32)> = hist.iter().flat_map(|(n, vs)| vs.iter().map(move |&v| (n.as_str(), v))).collect();
    let mut c = format!("#define DRIVER_VERSION {driver_version}\n");
    c += &format!("#define ADDED_NODE_BASE 0x{ADDED_NODE_BASE:x}\n");
    for (i, n) in NODES.iter().enumerate() {
        c += &format!("#define NODE{} 0x{n:x}\n", i + 1);
    }
    for (i, g) in BODY_GRAPHS.iter().enumerate() {
        c += &format!("#define BODY{} 0x{g:x}\n", i + 1);
    }
    c += &format!("#define CONDITION_BASE 0x{CONDITION_BASE:x}ULL\n");
    c += &format!("#define LINK_STATE 0x{LINK_STATE:x}\n");
    c += &format!("#define LINKED_CUBIN \"{LINKED_CUBIN}\"\n");
    for (i, (n, v)) in pairs.iter().enumerate() {
        c += &format!("#define IDX_{n}_v{v} {i}\n");
    }
    c += &format!("#define N_PAIRS {}\n", pairs.len());
    c += PRELUDE;
    for (i, &(n, v)) in pairs.iter().enumerate() {
        if !SPECIAL.contains(&(n, v)) {
            c += &format!("static CUresult abi_{n}_v{v}(void) {{ CALLED({i}); return CUDA_SUCCESS; }}\n");
        }
    }
    c += "typedef struct { const char *name; int version; void *fn; } Abi;\nstatic const Abi abis[] = {\n";
    for (n, v) in &pairs {
        c += &format!("    {{\"{n}\", {v}, (void *)abi_{n}_v{v}}},\n");
    }
    c += "};\n#define N_ABIS (sizeof abis / sizeof abis[0])\n";
    c += RESOLVER;
    Ok(c)
}

/// Builds the double for `driver_version` as `lib<name>.so` under `dir`.
pub fn build(dir: &Path, name: &str, driver_version: i32) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join(format!("{name}.{}.c", std::process::id()));
    std::fs::write(&src, source(driver_version)?).map_err(|e| format!("{}: {e}", src.display()))?;
    let out = dir.join(format!("lib{name}.so"));
    let tmp = dir.join(format!("lib{name}.so.{}.tmp", std::process::id()));
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .target(&triple)
        .host(&triple)
        .opt_level(0)
        .try_get_compiler()
        .map_err(|e| format!("no C compiler: {e}"))?;
    let mut cmd: Command = compiler.to_command();
    cmd.args(["-shared", "-fPIC", "-O0", "-Wall", "-Werror", "-o"]).arg(&tmp).arg(&src);
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!("building the driver double failed: {cmd:?}"));
    }
    std::fs::rename(&tmp, &out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}

/// The double's introspection functions, from a second handle on the same
/// library (the loader's handle and this one share its state).
pub struct Probe {
    lib: libloading::Library,
}

type IdentifyFn = unsafe extern "C" fn(*const c_void, *mut *const c_char, *mut c_int) -> c_int;
type IndexFn = unsafe extern "C" fn(c_int, *mut *const c_char, *mut c_int) -> c_int;
type CountFn = unsafe extern "C" fn() -> c_int;
type SetUpdateFn = unsafe extern "C" fn(c_uint, *mut c_void, *mut c_void);
type UpdateArgsFn = unsafe extern "C" fn(*mut *mut c_void, *mut *mut c_void);
type VoidFn = unsafe extern "C" fn();

impl Probe {
    /// Opens the double at `path`.
    pub fn open(path: &Path) -> Result<Probe, String> {
        // SAFETY: the double has no initialisers.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
        Ok(Probe { lib })
    }

    fn sym<T: Copy>(&self, name: &[u8]) -> T {
        // SAFETY: every name asked for is exported by the double with type `T`.
        match unsafe { self.lib.get::<T>(name) } {
            Ok(s) => *s,
            Err(e) => panic!("the driver double lacks {}: {e}", String::from_utf8_lossy(name)),
        }
    }

    fn pair(name: *const c_char, version: c_int) -> (String, i32) {
        // SAFETY: the double hands out NUL-terminated strings of its own.
        (unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned(), version)
    }

    /// Which (symbol, ABI version) the stub at `address` is, if it is one.
    pub fn identify(&self, address: *const c_void) -> Option<(String, i32)> {
        let f: IdentifyFn = self.sym(b"fc_double_identify\0");
        let (mut name, mut version) = (std::ptr::null(), 0);
        // SAFETY: valid out-pointers.
        (unsafe { f(address, &mut name, &mut version) } == 1).then(|| Self::pair(name, version))
    }

    /// The (symbol, ABI version) of the stub that ran last, if any.
    pub fn last_called(&self) -> Option<(String, i32)> {
        let last: CountFn = self.sym(b"fc_double_last_called\0");
        let abi: IndexFn = self.sym(b"fc_double_abi\0");
        let (mut name, mut version) = (std::ptr::null(), 0);
        // SAFETY: no arguments; then valid out-pointers.
        let i = unsafe { last() };
        // SAFETY: valid out-pointers.
        (unsafe { abi(i, &mut name, &mut version) } == 1).then(|| Self::pair(name, version))
    }

    /// How often the stub of `symbol` at ABI `version` ran so far.
    pub fn calls(&self, symbol: &str, version: i32) -> i32 {
        let abi: IndexFn = self.sym(b"fc_double_abi\0");
        let calls: unsafe extern "C" fn(c_int) -> c_int = self.sym(b"fc_double_calls\0");
        for i in 0.. {
            let (mut name, mut v) = (std::ptr::null(), 0);
            // SAFETY: valid out-pointers.
            if unsafe { abi(i, &mut name, &mut v) } != 1 {
                break;
            }
            if Self::pair(name, v) == (symbol.to_string(), version) {
                // SAFETY: an index the double has.
                return unsafe { calls(i) };
            }
        }
        0
    }

    /// Forgets which stub ran last.
    pub fn reset_last_called(&self) {
        let f: VoidFn = self.sym(b"fc_double_reset_last_called\0");
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// Every `cuGetProcAddress` request so far: (symbol, requested version).
    pub fn requests(&self) -> Vec<(String, i32)> {
        let count: CountFn = self.sym(b"fc_double_requests\0");
        let get: IndexFn = self.sym(b"fc_double_request\0");
        // SAFETY: no arguments.
        let n = unsafe { count() };
        (0..n)
            .filter_map(|i| {
                let (mut name, mut version) = (std::ptr::null(), 0);
                // SAFETY: valid out-pointers.
                (unsafe { get(i, &mut name, &mut version) } == 1).then(|| Self::pair(name, version))
            })
            .collect()
    }

    /// How many requests asked above the driver's version.
    pub fn over_requests(&self) -> i32 {
        let f: CountFn = self.sym(b"fc_double_over_requests\0");
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// Makes later in-place updates report `result` (0: success; else the
    /// update fails with `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`) and these
    /// nodes.
    pub fn set_update(&self, result: u32, error_node: *mut c_void, error_from: *mut c_void) {
        let f: SetUpdateFn = self.sym(b"fc_double_set_update\0");
        // SAFETY: plain values.
        unsafe { f(result, error_node, error_from) }
    }

    /// The (exec, graph) the last update was called with.
    pub fn last_update_args(&self) -> (*mut c_void, *mut c_void) {
        let f: UpdateArgsFn = self.sym(b"fc_double_last_update_args\0");
        let (mut exec, mut graph) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers.
        unsafe { f(&mut exec, &mut graph) };
        (exec, graph)
    }

    /// What the last graph-building stub recorded (zeros where it records
    /// nothing). `cuGraphAddKernelNode`: `[node, numDependencies, func,
    /// gridDimX, blockDimX, sharedMemBytes, first 8 bytes of parameter 0,
    /// kern | ctx (v2 only)]`; `cuGraphExecKernelNodeSetParams`: the same
    /// with `[exec, node, ...]` first; `cuGraphKernelNodeSetParams`: the
    /// same with `[node, 0, ...]` first; `cuGraphAddDependencies`: `[n,
    /// from[0], to[0], has edge data, data[0].from_port, data[0].type,
    /// data[n-1].type]`; `cuGraphAddNode`: `[node, numDependencies, type,
    /// has edge data, data[0].type, member word 0, member word 1, unused
    /// bytes all zero]` (member words: a kernel's `func` and `gridDimX`; a
    /// conditional's `handle` and `type | size << 32`);
    /// `cuGraphConditionalHandleCreate`: `[handle, graph, ctx,
    /// defaultLaunchValue, flags]`; `cuLinkCreate`: `[numOptions,
    /// options[0]]`; `cuLinkAddData`: `[state, type, size, first byte,
    /// strlen(name), numOptions]`; `cuLinkAddFile`: `[state, type,
    /// strlen(path), 0, 0, numOptions]`; `cuLinkComplete`: `[state, inputs
    /// added]`; `cuLinkDestroy`: `[state]`.
    pub fn last_args(&self) -> [u64; 8] {
        let f: unsafe extern "C" fn(*mut u64) = self.sym(b"fc_double_last_args\0");
        let mut out = [0u64; 8];
        // SAFETY: the double writes eight values.
        unsafe { f(out.as_mut_ptr()) };
        out
    }

    /// Asks the double's `cuGetProcAddress` (11.3 ABI) directly.
    pub fn raw_request(&self, symbol: &CStr, version: i32) -> (u32, *mut c_void) {
        type ProcFn = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> c_uint;
        let f: ProcFn = self.sym(b"cuGetProcAddress\0");
        let mut p = std::ptr::null_mut();
        // SAFETY: NUL-terminated name, valid out-pointer.
        let res = unsafe { f(symbol.as_ptr(), &mut p, version, 0) };
        (res, p)
    }

    /// Asks the double's `cuGetProcAddress_v2` (12.0 ABI) directly; `None`
    /// when it does not export one (drivers before 12.0).
    pub fn raw_request_v2(&self, symbol: &CStr, version: i32) -> Option<(u32, *mut c_void, i32)> {
        type ProcFn = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> c_uint;
        // SAFETY: the double's export has this type when present.
        let f = unsafe { self.lib.get::<ProcFn>(b"cuGetProcAddress_v2\0") }.ok().map(|s| *s)?;
        let (mut p, mut status) = (std::ptr::null_mut(), -1);
        // SAFETY: NUL-terminated name, valid out-pointers.
        let res = unsafe { f(symbol.as_ptr(), &mut p, version, 0, &mut status) };
        Some((res, p, status))
    }
}
