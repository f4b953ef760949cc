/* fc_side.h - the fc-graph side of the coexistence runs (issue 9, item 5).
 *
 * One configuration of libfcgraph captures, run while a foreign CUDA client
 * (foreign_cudart.cu: CUDA runtime; torch_coexist.py: PyTorch) works on
 * the same GPU in the same process. Built into libfcside.so (linked with
 * -lfcgraph) by scripts/gpu-coexist.sh; the clients call it:
 *
 *   fc_side *s = fc_side_open(device, config, counts);  before the foreign
 *                                                        client starts
 *   fc_side_loop(s, iters, max_tries, max_seconds, counts); meanwhile
 *   fc_side_close(s);                                    after it stopped
 *   fc_side_report(client, config, counts, foreign, line, sizeof line);
 *
 * Each iteration: upload x, capture 26 kernels (13 x: z = x + y; x = z * y)
 * on the context's stream in THREAD_LOCAL mode, launch the graph, download
 * x and compare it bit for bit with the same chain on the CPU.
 *
 * Configurations:
 *   FC_SIDE_PRIMARY_PLAIN  primary context, fc_graph_begin_ctx / end
 *                          (invalidations expected and counted; also the
 *                          control: at least one must happen, or the
 *                          foreign client never overlapped our captures)
 *   FC_SIDE_PRIMARY_RETRY  primary context, fc_graph_capture_ctx with
 *                          max_tries (required: 0 unrecovered failures)
 *   FC_SIDE_ISOLATED       isolated context, fc_graph_begin_ctx / end
 *                          (required: 0 failures on either side)
 * Every configuration also requires 0 wrong results on either side.
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
#define FC_SIDE_CONFIGS 3

/* tries_hist[t] counts graphs that took t recordings (1..63);
 * tries_hist[64] those that took 64 or more. */
#define FC_SIDE_TRIES_SLOTS 65
#define FC_SIDE_MSG 320

/* What the fc side saw. Plain fields only (mirrored by ctypes in
 * torch_coexist.py: keep the order). */
typedef struct fc_side_counts {
    long long iters;       /* iterations run                                  */
    long long ok;          /* captured, replayed and exact                     */
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
    double seconds;        /* wall time of the loop                            */
    int setup_failed;      /* 1 when fc_side_open failed                        */
    int first_code;        /* status code of the first failure                 */
    char first_error[FC_SIDE_MSG]; /* its message                             */
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

/* "primary-plain", "primary-retry", "isolated" (NULL for others). */
const char *fc_side_config_name(int config);
/* The configuration of a name, or -1. */
int fc_side_config_from_name(const char *name);

/* Opens the context (primary or isolated), allocates and fills the
 * buffers and warms up (one eager chain, one capture and replay, so the
 * built-in kernels are loaded before the foreign client starts). Resets
 * *counts. NULL on failure (counts->setup_failed = 1, first_error says why). */
fc_side *fc_side_open(int device, int config, fc_side_counts *counts);
/* Runs `iters` iterations (max_tries recordings per graph for
 * FC_SIDE_PRIMARY_RETRY), stopping early after max_seconds (> 0). Adds to
 * *counts. Returns 0, or -1 for bad arguments. */
int fc_side_loop(fc_side *s, long long iters, int max_tries, double max_seconds, fc_side_counts *counts);
/* Frees the buffers and the context. NULL is a no-op. */
void fc_side_close(fc_side *s);

/* Writes the summary line of one configuration into line (one line, no
 * newline; "COEXIST client=... config=... verdict=PASS|FAIL key=value ...
 * reason=\"...\"") and returns 1 when the configuration's required results
 * hold, 0 otherwise. */
int fc_side_report(const char *client, int config, const fc_side_counts *fc, const fc_side_foreign *foreign,
                   char *line, size_t len);
/* The first errors of both sides as a second line ("COEXIST-ERRORS ..."). */
void fc_side_report_errors(const char *client, int config, const fc_side_counts *fc,
                           const fc_side_foreign *foreign, char *line, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* FC_SIDE_H */
