/* fc_side.h - the fc-graph side of the coexistence runs (issue 9, item 5).
 *
 * One configuration of libfcgraph recordings, run while a foreign CUDA
 * client (foreign_cudart.cu: CUDA runtime; torch_coexist.py: PyTorch) works
 * on the same GPU in the same process. Built into libfcside.so (linked with
 * -lfcgraph, and -ldl for the run-time loading of cuBLAS and the driver) by
 * scripts/gpu-coexist.sh; the clients call it:
 *
 *   fc_side *s = fc_side_open(device, config, counts);  before the foreign
 *                                                        client starts
 *   fc_side_loop(s, iters, max_tries, max_seconds, counts); meanwhile
 *   fc_side_close(s);                                    after it stopped
 *   fc_side_report(client, config, counts, foreign, line, sizeof line);
 *
 * Each iteration: upload x, record 26 kernels (13 x: z = x + y; x = z * y)
 * on the context in THREAD_LOCAL mode, instantiate, launch the graph,
 * download x and compare it bit for bit with the same chain on the CPU.
 *
 * How a recording takes the work depends on the context (the library's
 * FC_RECORDING, auto|build|capture, read once per process): by default it
 * is built node by node and no stream enters capture mode, so foreign
 * device-wide synchronisations cannot invalidate it; a context whose
 * fc_ctx_stream() was asked for, or every context with FC_RECORDING=capture,
 * records by stream capture (the old path).
 *
 * Configurations (the environment each needs is checked by fc_side_open):
 *   FC_SIDE_PRIMARY_PLAIN    primary context, fc_graph_begin_ctx / end, the
 *                            default recording (FC_RECORDING unset, auto or
 *                            build). Required: 0 fc failures, 0 invalidated
 *                            recordings, 0 foreign failures, and at least
 *                            FC_SIDE_MIN_ITERS iterations.
 *   FC_SIDE_PRIMARY_RETRY    primary context, fc_graph_capture_ctx with
 *                            max_tries, the default recording. Required: 0 fc
 *                            failures, 0 invalidated recordings (so no graph
 *                            retried), 0 foreign failures.
 *   FC_SIDE_ISOLATED         isolated context, fc_graph_begin_ctx / end.
 *                            Required: 0 failures on either side.
 *   FC_SIDE_PRIMARY_CAPTURE  as primary-plain with FC_RECORDING=capture in
 *                            the environment: the old stream-capture path,
 *                            the informational control. Expected to see
 *                            invalidations (and it may die in the driver,
 *                            docs/coexistence.md); never a failure: its
 *                            verdict is INFO.
 *   FC_SIDE_ISOLATED_CUBLAS  isolated context whose recordings hold our
 *                            kernels AND a cuBLAS SGEMM enqueued on
 *                            fc_ctx_stream(ctx) (so the context records by
 *                            stream capture, safe on an isolated context):
 *                            A = A0 .* S (fc_mul), C = A B (cublasSgemm),
 *                            OUT = C + D (fc_add) after the 26-kernel chain,
 *                            small integer-valued matrices (every float
 *                            result exact), checked exactly against the
 *                            host. cuBLAS is opened at run time
 *                            (examples/interop/interop_libs.h:
 *                            $FC_CUBLAS_LIBRARY, else libcublas.so.13, .12,
 *                            .so). Required: 0 failures on either side, 0
 *                            wrong. Without libcublas the verdict is SKIP
 *                            (a failure with FC_REQUIRE_INTEROP=1).
 * Every configuration except the control also requires 0 wrong results on
 * either side and a foreign client that ran.
 */
#ifndef FC_SIDE_H
#define FC_SIDE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FC_SIDE_PRIMARY_PLAIN 0
#define FC_SIDE_PRIMARY_RETRY 1
#define FC_SIDE_ISOLATED 2
#define FC_SIDE_PRIMARY_CAPTURE 3
#define FC_SIDE_ISOLATED_CUBLAS 4
#define FC_SIDE_CONFIGS 5

/* The fewest iterations a loop runs before max_seconds may stop it (fewer
 * only when fewer are asked for), and what primary-plain requires. */
#define FC_SIDE_MIN_ITERS 1000

/* FC_RECORDING as the library reads it (fc_side_recording_mode). */
#define FC_SIDE_RECORDING_AUTO 0
#define FC_SIDE_RECORDING_BUILD 1
#define FC_SIDE_RECORDING_CAPTURE 2

/* tries_hist[t] counts graphs that took t recordings (1..63);
 * tries_hist[64] those that took 64 or more. */
#define FC_SIDE_TRIES_SLOTS 65
#define FC_SIDE_MSG 320

/* What the fc side saw. Plain fields only (mirrored by ctypes in
 * torch_coexist.py: keep the order; the sizes are checked at start). */
typedef struct fc_side_counts {
    long long iters;       /* iterations run                                  */
    long long ok;          /* recorded, replayed and exact                     */
    long long failed;      /* iterations that ended in an fc failure (after
                              the retries, for FC_SIDE_PRIMARY_RETRY)          */
    long long failed_invalidated; /* ... of them with FC_ERR_CAPTURE_INVALIDATED */
    long long failed_other;       /* ... of them with any other code            */
    long long invalidated_recordings; /* recordings lost to invalidation, also
                                         those a retry recovered from           */
    long long wrong;       /* replays whose result differed from the CPU's     */
    long long retried;     /* graphs that took more than one recording         */
    long long max_tries;   /* the most recordings one graph took               */
    long long tries_hist[FC_SIDE_TRIES_SLOTS];
    long long time_capped; /* 1 when max_seconds stopped the loop early        */
    long long requested;   /* iterations asked for (summed over the loops)     */
    double seconds;        /* wall time of the loop                            */
    int setup_failed;      /* 1 when fc_side_open failed                        */
    int skipped;           /* 1 when the configuration cannot run on this
                              machine (isolated-cublas without libcublas);
                              first_error says why                             */
    int first_code;        /* status code of the first failure                 */
    int recording;         /* FC_RECORDING at open: FC_SIDE_RECORDING_*, -1
                              for a value the library refuses                  */
    char first_error[FC_SIDE_MSG]; /* its message (or the reason of a skip)    */
    char note[FC_SIDE_MSG]; /* what was opened: context kind, cuBLAS, nodes    */
} fc_side_counts;

/* What the foreign client saw (filled by the client). */
typedef struct fc_side_foreign {
    long long iters;          /* foreign loop iterations                     */
    long long calls;          /* CUDA / PyTorch calls made                    */
    long long failed;         /* calls that failed (all kinds)                */
    long long sync_failed;    /* device-wide synchronisations that failed     */
    long long alloc_failed;   /* allocations / frees / cache releases         */
    long long capture_failed; /* the foreign graph capture, instantiate, launch */
    long long other_failed;   /* anything else (kernels, copies)              */
    long long wrong;          /* foreign results that were wrong              */
    char first_error[FC_SIDE_MSG];
} fc_side_foreign;

typedef struct fc_side fc_side;

/* sizeof(fc_side_counts) and sizeof(fc_side_foreign), so that other
 * languages' mirrors of the structs (ctypes) can check their layout. */
size_t fc_side_sizeof_counts(void);
size_t fc_side_sizeof_foreign(void);

/* "primary-plain", "primary-retry", "isolated", "primary-capture",
 * "isolated-cublas" (NULL for others). */
const char *fc_side_config_name(int config);
/* The configuration of a name, or -1. */
int fc_side_config_from_name(const char *name);

/* A value of FC_RECORDING as the library parses it (blanks around it and
 * case ignored; NULL or "" is auto): FC_SIDE_RECORDING_*, or -1. */
int fc_side_recording_mode(const char *value);
/* Whether a configuration may run with FC_RECORDING = value (NULL: unset):
 * primary-capture needs "capture"; primary-plain and primary-retry refuse
 * "capture" (they test the default path); isolated-cublas refuses "build"
 * (its cuBLAS work would then run outside the recordings); a value the
 * library refuses is refused everywhere. 0, or -1 with the reason in why. */
int fc_side_recording_ok(int config, const char *value, char *why, size_t len);
/* Whether a loop that has run `done` iterations for `elapsed` seconds
 * stops for max_seconds: only past FC_SIDE_MIN_ITERS iterations. */
int fc_side_time_cap_reached(long long done, double elapsed, double max_seconds);

/* Checks FC_RECORDING (fc_side_recording_ok), opens the context (primary
 * or isolated; for isolated-cublas first cuBLAS and the driver's context
 * push/pop, then the cuBLAS handle on the context's stream), allocates and
 * fills the buffers and warms up (one eager run, one recording and replay,
 * so the kernels are loaded before the foreign client starts). Resets
 * *counts. NULL on failure (counts->setup_failed = 1, first_error says
 * why) or when the configuration cannot run here (counts->skipped = 1). */
fc_side *fc_side_open(int device, int config, fc_side_counts *counts);
/* Runs up to `iters` iterations (max_tries recordings per graph for
 * FC_SIDE_PRIMARY_RETRY), stopping early once max_seconds have passed and
 * at least FC_SIDE_MIN_ITERS iterations ran. Adds to *counts. Returns 0,
 * or -1 for bad arguments. */
int fc_side_loop(fc_side *s, long long iters, int max_tries, double max_seconds, fc_side_counts *counts);
/* Frees the cuBLAS handle, the buffers and the context. NULL is a no-op. */
void fc_side_close(fc_side *s);

/* Writes the summary line of one configuration into line (one line, no
 * newline; "COEXIST client=... config=... verdict=PASS|FAIL|SKIP|INFO
 * key=value ... reason=\"...\"") and returns 1 when the configuration did
 * not fail (PASS, SKIP, or INFO: the primary-capture control never fails),
 * 0 for FAIL. */
int fc_side_report(const char *client, int config, const fc_side_counts *fc, const fc_side_foreign *foreign,
                   char *line, size_t len);
/* The first errors of both sides and the fc side's note as a second line
 * ("COEXIST-ERRORS ..."). */
void fc_side_report_errors(const char *client, int config, const fc_side_counts *fc,
                           const fc_side_foreign *foreign, char *line, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* FC_SIDE_H */
