/*
 * cond_probe.c - raw-driver facts behind issues 18 and 20, no fc-graph code.
 *
 * Part A (issue 18, "every node changed"): the cost of updating an
 * executable chain of K kernels whose every node's arguments changed, four
 * ways, median µs of ITERS rounds each, plain launches and PDL
 * (programmatic edges, sm_90 PTX):
 *   recapture   stream-capture the K launches + cuGraphExecUpdate + destroy
 *   exec_set    K x cuGraphExecKernelNodeSetParams
 *   source_set  K x cuGraphKernelNodeSetParams on the source graph
 *   src_update  source_set + cuGraphExecUpdate(exec, source)
 *   update_only cuGraphExecUpdate(exec, source), source unchanged
 *
 * Part B (issue 20): conditional nodes with kernels/conditional.ptx
 *   - does cuModuleLoadDataEx resolve cudaGraphSetConditional by itself?
 *     else cuLink* with libcudadevrt.a (argv[3], if given);
 *   - WHILE of 32 x a 26-kernel body + countdown: result equals the host loop;
 *   - a trip count written by a memset node in the graph (7), never read;
 *   - IF (taken / not taken) and SWITCH (index 1 of 3);
 *   - timing: WHILE launch+sync vs the host loop (body graph launch, copy
 *     the counter back, sync, decide).
 *
 * Build: gcc -O2 -std=c11 bench/probes/cond_probe.c -I<cuda include> -lcuda -o cond_probe
 * Run:   ./cond_probe kernels/elementwise.ptx kernels/elementwise_sm90.ptx kernels/conditional.ptx [libcudadevrt.a]
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_check.h"

#define N 4096u

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof(double), cmpd);
    return v[n / 2];
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc(n + 1);
    if (fread(s, 1, n, f) != (size_t)n) exit(1);
    s[n] = 0;
    fclose(f);
    return s;
}

static CUstream s;
static CUdeviceptr x, y, z;
static unsigned int n_elems = N;

/* Launch i of the chain: even i z = x + y, odd x = z * y; `swap` commutes
 * the operands (every node changes, results stay). */
typedef struct {
    CUdeviceptr a, b, o;
    unsigned int n;
    void *p[4];
} Args;

static void chain_args(Args *a, int i, int swap) {
    CUdeviceptr l = i % 2 == 0 ? x : z, r = y, o = i % 2 == 0 ? z : x;
    a->a = swap ? r : l;
    a->b = swap ? l : r;
    a->o = o;
    a->n = n_elems;
    a->p[0] = &a->a;
    a->p[1] = &a->b;
    a->p[2] = &a->o;
    a->p[3] = &a->n;
}

static CUDA_KERNEL_NODE_PARAMS kparams(CUfunction f, void **p) {
    CUDA_KERNEL_NODE_PARAMS k;
    memset(&k, 0, sizeof(k));
    k.func = f;
    k.gridDimX = N / 256;
    k.gridDimY = k.gridDimZ = 1;
    k.blockDimX = 256;
    k.blockDimY = k.blockDimZ = 1;
    k.kernelParams = p;
    return k;
}

static void launch(CUfunction f, Args *a, int pdl) {
    CUlaunchConfig cfg;
    CUlaunchAttribute at;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = N / 256;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 256;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    if (pdl) {
        memset(&at, 0, sizeof(at));
        at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at.value.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
    }
    CK(cuLaunchKernelEx(&cfg, f, a->p, NULL));
}

static CUgraph capture_chain(CUfunction add, CUfunction mul, int k, int swap, int pdl) {
    CUgraph g;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int i = 0; i < k; i++) {
        Args a;
        chain_args(&a, i, swap);
        launch(i % 2 == 0 ? add : mul, &a, pdl && i > 0);
    }
    CK(cuStreamEndCapture(s, &g));
    return g;
}

static void part_a(CUfunction add, CUfunction mul, int pdl) {
    static const int ks[3] = {26, 260, 2600};
    for (int ki = 0; ki < 3; ki++) {
        int k = ks[ki], iters = k == 2600 ? 40 : 200;
        double *v = malloc(sizeof(double) * iters);
        CUgraph src = capture_chain(add, mul, k, 0, pdl);
        CUgraphExec exec;
        CK(cuGraphInstantiateWithFlags(&exec, src, 0));
        size_t nn = 0;
        CK(cuGraphGetNodes(src, NULL, &nn));
        CUgraphNode *nodes = malloc(sizeof(CUgraphNode) * nn);
        CK(cuGraphGetNodes(src, nodes, &nn));
        /* Node order of a captured chain: creation order, checked below. */
        Args *args = malloc(sizeof(Args) * k);
        int swap = 0;
        const char *names[5] = {"recapture", "exec_set", "source_set", "src_update", "update_only"};
        double med[5];
        for (int w = 0; w < 5; w++) {
            for (int it = 0; it < iters + 2; it++) {
                swap = !swap;
                double t0 = now_us();
                if (w == 0) {
                    CUgraph g = capture_chain(add, mul, k, swap, pdl);
                    CUgraphExecUpdateResultInfo info;
                    CK(cuGraphExecUpdate(exec, g, &info));
                    CK(cuGraphDestroy(g));
                } else if (w == 1) {
                    for (int i = 0; i < k; i++) {
                        chain_args(&args[i], i, swap);
                        CUDA_KERNEL_NODE_PARAMS p = kparams(i % 2 == 0 ? add : mul, args[i].p);
                        CK(cuGraphExecKernelNodeSetParams(exec, nodes[i], &p));
                    }
                } else if (w == 2 || w == 3) {
                    for (int i = 0; i < k; i++) {
                        chain_args(&args[i], i, swap);
                        CUDA_KERNEL_NODE_PARAMS p = kparams(i % 2 == 0 ? add : mul, args[i].p);
                        CK(cuGraphKernelNodeSetParams(nodes[i], &p));
                    }
                    if (w == 3) {
                        CUgraphExecUpdateResultInfo info;
                        CK(cuGraphExecUpdate(exec, src, &info));
                    }
                } else {
                    CUgraphExecUpdateResultInfo info;
                    CK(cuGraphExecUpdate(exec, src, &info));
                }
                double t1 = now_us();
                if (it >= 2) v[it - 2] = t1 - t0;
            }
            med[w] = median(v, iters);
        }
        /* The exec must still compute the chain: launch, check z/x finite. */
        CK(cuGraphLaunch(exec, s));
        CK(cuStreamSynchronize(s));
        printf("A %-5s K=%-5d", pdl ? "pdl" : "plain", k);
        for (int w = 0; w < 5; w++) printf(" %s=%.2f", names[w], med[w]);
        printf("  | recapture/exec_set=%.2fx recapture/src_update=%.2fx\n", med[0] / med[1], med[0] / med[3]);
        fflush(stdout);
        CK(cuGraphExecDestroy(exec));
        CK(cuGraphDestroy(src));
        free(nodes);
        free(args);
        free(v);
    }
}

/* ---- part B ------------------------------------------------------------ */

static CUfunction cset, cload, cdown;
static CUdeviceptr counter, trip, flag;

/* cuGraphAddNode without edge data, whichever header declares it. */
static CUresult add_node(CUgraphNode *n, CUgraph g, CUgraphNode *deps, size_t nd, CUgraphNodeParams *p) {
#if CUDA_VERSION >= 13000
    return cuGraphAddNode(n, g, deps, NULL, nd, p);
#else
    return cuGraphAddNode(n, g, deps, nd, p);
#endif
}

static CUgraphNode add_kernel(CUgraph g, CUgraphNode *deps, size_t nd, CUfunction f, void **p, unsigned grid,
                              unsigned block) {
    CUDA_KERNEL_NODE_PARAMS k;
    memset(&k, 0, sizeof(k));
    k.func = f;
    k.gridDimX = grid;
    k.gridDimY = k.gridDimZ = 1;
    k.blockDimX = block;
    k.blockDimY = k.blockDimZ = 1;
    k.kernelParams = p;
    CUgraphNode node;
    CK(cuGraphAddKernelNode(&node, g, deps, nd, &k));
    return node;
}

/* 26 chain kernels (x += 1 per pair with y = 1) after `first`, then, when
 * `handle_p` is given, the countdown: the node returned is the last. */
static CUgraphNode add_body(CUgraph g, CUgraphNode first, int has_first, CUfunction add, CUfunction mul, Args *args,
                            CUgraphConditionalHandle *handle_p) {
    CUgraphNode prev = first;
    int have = has_first;
    for (int i = 0; i < 26; i++) {
        chain_args(&args[i], i, 0);
        prev = add_kernel(g, have ? &prev : NULL, have ? 1 : 0, i % 2 == 0 ? add : mul, args[i].p, N / 256, 256);
        have = 1;
    }
    if (handle_p) {
        static void *pp[2];
        pp[0] = handle_p;
        pp[1] = &counter;
        prev = add_kernel(g, &prev, 1, cdown, pp, 1, 1);
    }
    return prev;
}

static void fill_x(float v) {
    float h[N];
    for (unsigned i = 0; i < N; i++) h[i] = v;
    CK(cuMemcpyHtoD(x, h, sizeof(h)));
    for (unsigned i = 0; i < N; i++) h[i] = 1.0f;
    CK(cuMemcpyHtoD(y, h, sizeof(h)));
}

static float read_x(void) {
    float h[N];
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(h, x, sizeof(h)));
    for (unsigned i = 1; i < N; i++)
        if (h[i] != h[0]) return -1.0f;
    return h[0];
}

static void put_u32(CUdeviceptr p, unsigned v) { CK(cuMemcpyHtoD(p, &v, 4)); }

static unsigned get_u32(CUdeviceptr p) {
    unsigned v;
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(&v, p, 4));
    return v;
}

/* A WHILE node after a load kernel that reads the trip count from `trip`
 * (optionally written first by a memset node of `memset_trip`). */
static CUgraphExec while_graph(CUcontext ctx, CUfunction add, CUfunction mul, int memset_trip, Args *args,
                               CUgraphConditionalHandle *h) {
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(h, g, ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNode prev = NULL;
    int have = 0;
    if (memset_trip) {
        CUDA_MEMSET_NODE_PARAMS m;
        memset(&m, 0, sizeof(m));
        m.dst = trip;
        m.value = (unsigned)memset_trip;
        m.elementSize = 4;
        m.width = 1;
        m.height = 1;
        CK(cuGraphAddMemsetNode(&prev, g, NULL, 0, &m, ctx));
        have = 1;
    }
    static void *lp[3];
    lp[0] = h;
    lp[1] = &counter;
    lp[2] = &trip;
    prev = add_kernel(g, have ? &prev : NULL, have, cload, lp, 1, 1);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof(np));
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = *h;
    np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    np.conditional.size = 1;
    np.conditional.ctx = ctx;
    CUgraphNode cn;
    CK(add_node(&cn, g, &prev, 1, &np));
    CUgraph body = np.conditional.phGraph_out[0];
    add_body(body, NULL, 0, add, mul, args, h);
    CUgraphExec e;
    CK(cuGraphInstantiateWithFlags(&e, g, 0));
    CK(cuGraphDestroy(g));
    return e;
}

static void part_b(CUcontext ctx, CUfunction add, CUfunction mul, const char *cond_ptx, const char *devrt) {
    CUmodule m;
    CUresult r = getenv("FORCE_LINK") ? CUDA_ERROR_NOT_SUPPORTED : cuModuleLoadDataEx(&m, cond_ptx, 0, NULL, NULL);
    printf("B cuModuleLoadDataEx(conditional.ptx) -> %s%s\n", ename(r), getenv("FORCE_LINK") ? " (FORCE_LINK: not tried)" : "");
    if (r != CUDA_SUCCESS) {
        if (!devrt) {
            printf("B no libcudadevrt.a given: part B skipped\n");
            return;
        }
        CUlinkState ls;
        char log[8192] = {0};
        CUjit_option o[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *ov[2] = {log, (void *)(uintptr_t)sizeof(log)};
        CK(cuLinkCreate(2, o, ov, &ls));
        CK(cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)cond_ptx, strlen(cond_ptx) + 1, "conditional.ptx", 0, NULL,
                         NULL));
        r = cuLinkAddFile(ls, CU_JIT_INPUT_LIBRARY, devrt, 0, NULL, NULL);
        printf("B cuLinkAddFile(%s) -> %s\n", devrt, ename(r));
        void *cubin;
        size_t sz;
        r = cuLinkComplete(ls, &cubin, &sz);
        printf("B cuLinkComplete -> %s (%zu bytes) log: %s\n", ename(r), sz, log);
        if (r != CUDA_SUCCESS) return;
        CK(cuModuleLoadData(&m, cubin));
        CK(cuLinkDestroy(ls));
    }
    CK(cuModuleGetFunction(&cset, m, "fc_cond_set"));
    CK(cuModuleGetFunction(&cload, m, "fc_cond_load"));
    CK(cuModuleGetFunction(&cdown, m, "fc_cond_countdown"));
    CK(cuMemAlloc(&counter, 4));
    CK(cuMemAlloc(&trip, 4));
    CK(cuMemAlloc(&flag, 4));
    Args args[26];

    /* WHILE, 32 iterations, trip count put there by the host. */
    CUgraphConditionalHandle h;
    CUgraphExec w = while_graph(ctx, add, mul, 0, args, &h);
    fill_x(0.0f);
    put_u32(trip, 32);
    CK(cuGraphLaunch(w, s));
    float got = read_x();
    printf("B while 32: x = %.0f (want 416), counter = %u (want 0)\n", got, get_u32(counter));
    put_u32(trip, 0);
    fill_x(0.0f);
    CK(cuGraphLaunch(w, s));
    printf("B while 0: x = %.0f (want 0)\n", read_x());

    /* Trip count written by a memset node in the graph (7): never read. */
    CUgraphConditionalHandle h7;
    CUgraphExec w7 = while_graph(ctx, add, mul, 7, args, &h7);
    put_u32(trip, 1000);
    fill_x(0.0f);
    CK(cuGraphLaunch(w7, s));
    printf("B while device-set 7: x = %.0f (want 91), trip = %u (want 7)\n", read_x(), get_u32(trip));

    /* IF, and SWITCH of 3 with index 1: set kernel before the node. */
    for (int kind = 0; kind < 3; kind++) {
        CUgraph g;
        CK(cuGraphCreate(&g, 0));
        CUgraphConditionalHandle hc;
        CK(cuGraphConditionalHandleCreate(&hc, g, ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
        void *sp[2] = {&hc, &flag};
        CUgraphNode setn = add_kernel(g, NULL, 0, cset, sp, 1, 1);
        CUgraphNodeParams np;
        memset(&np, 0, sizeof(np));
        np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        np.conditional.handle = hc;
        np.conditional.type = kind == 2 ? CU_GRAPH_COND_TYPE_SWITCH : CU_GRAPH_COND_TYPE_IF;
        np.conditional.size = kind == 2 ? 3 : 1;
        np.conditional.ctx = ctx;
        CUgraphNode cn;
        r = add_node(&cn, g, &setn, 1, &np);
        if (r != CUDA_SUCCESS) {
            printf("B %s: cuGraphAddNode -> %s\n", kind == 2 ? "switch" : "if", ename(r));
            CK(cuGraphDestroy(g));
            continue;
        }
        /* each body: 2 kernels (x += 1) times (body index + 1) */
        for (unsigned b = 0; b < np.conditional.size; b++) {
            CUgraphNode prev = NULL;
            int have = 0;
            static Args ba[3][8];
            for (unsigned i = 0; i < 2 * (b + 1); i++) {
                chain_args(&ba[b][i], (int)i, 0);
                prev = add_kernel(np.conditional.phGraph_out[b], have ? &prev : NULL, have, i % 2 == 0 ? add : mul,
                                  ba[b][i].p, N / 256, 256);
                have = 1;
            }
        }
        CUgraphExec e;
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphDestroy(g));
        unsigned fv = kind == 0 ? 1 : kind == 1 ? 0 : 1;
        put_u32(flag, fv);
        fill_x(0.0f);
        CK(cuGraphLaunch(e, s));
        printf("B %s flag=%u: x = %.0f (want %d)\n", kind == 2 ? "switch" : "if", fv, read_x(),
               kind == 0 ? 1 : kind == 1 ? 0 : 2);
        CK(cuGraphExecDestroy(e));
    }

    /* Timing: WHILE 32 vs the host loop over the body graph. */
    CUgraph bg;
    CK(cuGraphCreate(&bg, 0));
    CUgraphNode last = add_body(bg, NULL, 0, add, mul, args, NULL);
    /* host loop body: chain + a countdown the host reads (a memset-free
     * decrement: the same countdown kernel cannot run without a handle,
     * so the body ends with a D2H copy of a counter the host decrements) */
    (void)last;
    CUgraphExec be;
    CK(cuGraphInstantiateWithFlags(&be, bg, 0));
    CK(cuGraphDestroy(bg));
    double tw[60], th[60];
    for (int it = 0; it < 62; it++) {
        put_u32(trip, 32);
        CK(cuCtxSynchronize());
        double t0 = now_us();
        CK(cuGraphLaunch(w, s));
        CK(cuStreamSynchronize(s));
        double t1 = now_us();
        unsigned cnt = 32;
        for (;;) {
            CK(cuGraphLaunch(be, s));
            unsigned hv;
            CK(cuMemcpyDtoHAsync(&hv, counter, 4, s));
            CK(cuStreamSynchronize(s));
            if (--cnt == 0) break;
        }
        double t2 = now_us();
        if (it >= 2) {
            tw[it - 2] = t1 - t0;
            th[it - 2] = t2 - t1;
        }
    }
    double mw = median(tw, 60), mh = median(th, 60);
    printf("B timing: while32 %.1f us, host loop %.1f us: %.2fx\n", mw, mh, mh / mw);
    CK(cuGraphExecDestroy(w));
    CK(cuGraphExecDestroy(w7));
    CK(cuGraphExecDestroy(be));
}

/* ---- part C ------------------------------------------------------------ */

/* The chain built node by node: each kernel node after the one before, the
 * edge programmatic when `pdl` (how: 0 = full edges given to
 * cuGraphAddKernelNode; 1 = nodes without dependencies + one
 * cuGraphAddDependencies_v2 of every programmatic edge (fc-graph today);
 * 2 = cuGraphAddNode_v2 with the edge data, one call per node). */
static CUgraph build_chain(CUfunction add, CUfunction mul, int k, int pdl, int how, CUgraphNode *nodes) {
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    Args a;
    CUgraphNode *from = malloc(sizeof(CUgraphNode) * k), *to = malloc(sizeof(CUgraphNode) * k);
    CUgraphEdgeData *ed = calloc(k, sizeof(CUgraphEdgeData));
    size_t ne = 0;
    CUgraphEdgeData prog;
    memset(&prog, 0, sizeof(prog));
    prog.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    prog.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    for (int i = 0; i < k; i++) {
        chain_args(&a, i, 0);
        CUDA_KERNEL_NODE_PARAMS p = kparams(i % 2 == 0 ? add : mul, a.p);
        CUgraphNode *dep = i > 0 ? &nodes[i - 1] : NULL;
        size_t nd = i > 0 ? 1 : 0;
        if (!pdl || how == 0 || i == 0) {
            CK(cuGraphAddKernelNode(&nodes[i], g, dep, nd, &p));
        } else if (how == 1) {
            CK(cuGraphAddKernelNode(&nodes[i], g, NULL, 0, &p));
            from[ne] = nodes[i - 1];
            to[ne] = nodes[i];
            ed[ne++] = prog;
        } else {
            CUgraphNodeParams np;
            memset(&np, 0, sizeof(np));
            np.type = CU_GRAPH_NODE_TYPE_KERNEL;
            np.kernel.func = p.func;
            np.kernel.gridDimX = p.gridDimX;
            np.kernel.gridDimY = 1;
            np.kernel.gridDimZ = 1;
            np.kernel.blockDimX = 256;
            np.kernel.blockDimY = 1;
            np.kernel.blockDimZ = 1;
            np.kernel.kernelParams = a.p;
            CK(cuGraphAddNode_v2(&nodes[i], g, dep, &prog, nd, &np));
        }
    }
    if (ne) CK(cuGraphAddDependencies_v2(g, from, to, ed, ne));
    free(from);
    free(to);
    free(ed);
    return g;
}

static void part_c(CUfunction add, CUfunction mul, int pdl) {
    static const int ks[3] = {26, 260, 2600};
    for (int ki = 0; ki < 3; ki++) {
        int k = ks[ki], iters = k == 2600 ? 20 : 100;
        double *v = malloc(sizeof(double) * iters);
        CUgraphNode *nodes = malloc(sizeof(CUgraphNode) * k);
        const char *names[4] = {"capture+inst", "build_full+inst", "build_deps+inst", "build_addnode+inst"};
        double med[4];
        for (int w = 0; w < 4; w++) {
            for (int it = 0; it < iters + 2; it++) {
                double t0 = now_us();
                CUgraph g = w == 0 ? capture_chain(add, mul, k, 0, pdl) : build_chain(add, mul, k, pdl, w - 1, nodes);
                CUgraphExec e;
                CK(cuGraphInstantiateWithFlags(&e, g, 0));
                double t1 = now_us();
                CK(cuGraphExecDestroy(e));
                CK(cuGraphDestroy(g));
                if (it >= 2) v[it - 2] = t1 - t0;
            }
            med[w] = median(v, iters);
        }
        /* exec_set on the built graph's executable (fc-graph's way). */
        CUgraph g = build_chain(add, mul, k, pdl, 1, nodes);
        CUgraphExec e;
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        Args *args = malloc(sizeof(Args) * k);
        int swap = 0;
        for (int it = 0; it < iters + 2; it++) {
            swap = !swap;
            double t0 = now_us();
            for (int i = 0; i < k; i++) {
                chain_args(&args[i], i, swap);
                CUDA_KERNEL_NODE_PARAMS p = kparams(i % 2 == 0 ? add : mul, args[i].p);
                CK(cuGraphExecKernelNodeSetParams(e, nodes[i], &p));
            }
            double t1 = now_us();
            if (it >= 2) v[it - 2] = t1 - t0;
        }
        double built_set = median(v, iters);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
        printf("C %-5s K=%-5d", pdl ? "pdl" : "plain", k);
        for (int w = 0; w < 4; w++) printf(" %s=%.1f", names[w], med[w]);
        printf(" exec_set_on_built=%.2f | build_deps/capture=%.3f build_addnode/capture=%.3f build_full/capture=%.3f\n",
               built_set, med[2] / med[0], med[3] / med[0], med[1] / med[0]);
        fflush(stdout);
        free(nodes);
        free(args);
        free(v);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s elementwise.ptx elementwise_sm90.ptx conditional.ptx [libcudadevrt.a]\n", argv[0]);
        return 2;
    }
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    int ver = 0;
    CK(cuDriverGetVersion(&ver));
    printf("driver %d\n", ver);
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&x, N * 4));
    CK(cuMemAlloc(&y, N * 4));
    CK(cuMemAlloc(&z, N * 4));
    fill_x(0.0f);
    CUmodule m0, m1;
    CK(cuModuleLoadData(&m0, slurp(argv[1])));
    CK(cuModuleLoadData(&m1, slurp(argv[2])));
    CUfunction add0, mul0, add1, mul1;
    CK(cuModuleGetFunction(&add0, m0, "fc_add_f32"));
    CK(cuModuleGetFunction(&mul0, m0, "fc_mul_f32"));
    CK(cuModuleGetFunction(&add1, m1, "fc_add_f32"));
    CK(cuModuleGetFunction(&mul1, m1, "fc_mul_f32"));
    part_b(ctx, add0, mul0, slurp(argv[3]), argc > 4 ? argv[4] : NULL);
    fflush(stdout);
    if (getenv("PART_B_ONLY")) return 0;
    part_a(add0, mul0, 0);
    part_a(add1, mul1, 1);
    part_a(add0, mul0, 0);
    part_c(add0, mul0, 0);
    part_c(add1, mul1, 1);
    return 0;
}
