/* fc_side_selftest.c - checks fc_side.c where no GPU is needed: the
 * verdict of every configuration and the summary line, the FC_RECORDING
 * rules, the time cap's floor, and a clean refusal to open without a usable
 * driver (when there is none). With a driver it also runs quiet loops: 20
 * iterations on an isolated and (when FC_RECORDING allows) a primary
 * context, and 1000 under a time cap that has already passed. Prints
 * "N passed, N failed". */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/fc_cuda.h"
#include "fc_side.h"

static int passed, failed;

static void check(int cond, const char *what)
{
    if (cond) {
        passed++;
    } else {
        failed++;
        printf("[FAIL] %s\n", what);
    }
}

/* Counts of a clean run: every iteration fine (FC_SIDE_MIN_ITERS of them),
 * foreign client busy. */
static void clean(fc_side_counts *fc, fc_side_foreign *f)
{
    memset(fc, 0, sizeof *fc);
    memset(f, 0, sizeof *f);
    fc->iters = fc->ok = fc->requested = FC_SIDE_MIN_ITERS;
    fc->tries_hist[1] = FC_SIDE_MIN_ITERS;
    fc->max_tries = 1;
    f->iters = 5;
    f->calls = 50;
}

/* The verdict word of the line ("PASS", "FAIL", "SKIP", "INFO"), or "". */
static const char *word(const char *line)
{
    static char w[8];
    const char *p = strstr(line, " verdict=");
    w[0] = '\0';
    if (p)
        sscanf(p + 9, "%7s", w);
    return w;
}

/* Reports config; checks that the line's verdict agrees with the return
 * value (FAIL <=> 0) and is `want`. Returns the return value. */
static int verdict_is(int config, const fc_side_counts *fc, const fc_side_foreign *f, char *line, size_t len,
                      const char *want, const char *what)
{
    int pass = fc_side_report("selftest", config, fc, f, line, len);
    const char *w = word(line);
    check(pass == (strcmp(w, "FAIL") != 0), "the line's verdict matches the return value");
    if (strcmp(w, want) != 0) {
        failed++;
        printf("[FAIL] %s: verdict %s, want %s (%s)\n", what, w, want, line);
    } else {
        passed++;
    }
    check(strchr(line, '\n') == NULL, "one line");
    return pass;
}

#define EXPECT(config, want, what) verdict_is((config), &fc, &f, line, sizeof line, (want), (what))

int main(void)
{
    char line[4096], why[256];
    fc_side_counts fc;
    fc_side_foreign f;

    /* Names. */
    static const char *const names[FC_SIDE_CONFIGS] = {"primary-plain", "primary-retry", "isolated",
                                                       "primary-capture", "isolated-cublas"};
    for (int i = 0; i < FC_SIDE_CONFIGS; i++) {
        check(fc_side_config_from_name(names[i]) == i, "name -> config");
        check(fc_side_config_name(i) && strcmp(fc_side_config_name(i), names[i]) == 0, "config -> name");
    }
    check(FC_SIDE_PRIMARY_CAPTURE == 3 && FC_SIDE_ISOLATED_CUBLAS == 4, "numbering (torch_coexist.py's CONFIGS)");
    check(fc_side_config_from_name("nope") == -1 && fc_side_config_from_name(NULL) == -1, "unknown names");
    check(fc_side_config_name(FC_SIDE_CONFIGS) == NULL && fc_side_config_name(-1) == NULL, "unknown configs");

    /* FC_RECORDING, parsed as the library does. */
    check(fc_side_recording_mode(NULL) == FC_SIDE_RECORDING_AUTO, "unset is auto");
    check(fc_side_recording_mode("") == FC_SIDE_RECORDING_AUTO && fc_side_recording_mode("  ") == 0, "empty is auto");
    check(fc_side_recording_mode("auto") == FC_SIDE_RECORDING_AUTO, "auto");
    check(fc_side_recording_mode("BUILD") == FC_SIDE_RECORDING_BUILD, "BUILD");
    check(fc_side_recording_mode(" Capture\n") == FC_SIDE_RECORDING_CAPTURE, "blanks and case ignored");
    check(fc_side_recording_mode("captures") == -1 && fc_side_recording_mode("cap") == -1, "no prefixes");
    check(fc_side_recording_mode("nope") == -1, "unknown value");

    /* Which configuration runs with which FC_RECORDING. */
    check(fc_side_recording_ok(FC_SIDE_PRIMARY_PLAIN, NULL, why, sizeof why) == 0, "plain: unset");
    check(fc_side_recording_ok(FC_SIDE_PRIMARY_PLAIN, "auto", why, sizeof why) == 0, "plain: auto");
    check(fc_side_recording_ok(FC_SIDE_PRIMARY_PLAIN, "build", why, sizeof why) == 0, "plain: build");
    check(fc_side_recording_ok(FC_SIDE_PRIMARY_PLAIN, "capture", why, sizeof why) == -1 &&
              strstr(why, "default") != NULL,
          "plain refuses capture");
    check(fc_side_recording_ok(FC_SIDE_PRIMARY_RETRY, "capture", why, sizeof why) == -1, "retry refuses capture");
    check(fc_side_recording_ok(FC_SIDE_PRIMARY_CAPTURE, "capture", why, sizeof why) == 0, "capture: capture");
    check(fc_side_recording_ok(FC_SIDE_PRIMARY_CAPTURE, NULL, why, sizeof why) == -1 &&
              strstr(why, "must be capture") != NULL,
          "primary-capture needs FC_RECORDING=capture");
    check(fc_side_recording_ok(FC_SIDE_PRIMARY_CAPTURE, "auto", why, sizeof why) == -1, "primary-capture: auto");
    check(fc_side_recording_ok(FC_SIDE_ISOLATED, "capture", why, sizeof why) == 0, "isolated: any mode");
    check(fc_side_recording_ok(FC_SIDE_ISOLATED_CUBLAS, NULL, why, sizeof why) == 0, "cublas: unset");
    check(fc_side_recording_ok(FC_SIDE_ISOLATED_CUBLAS, "capture", why, sizeof why) == 0, "cublas: capture");
    check(fc_side_recording_ok(FC_SIDE_ISOLATED_CUBLAS, "build", why, sizeof why) == -1, "cublas refuses build");
    check(fc_side_recording_ok(FC_SIDE_ISOLATED, "bogus", why, sizeof why) == -1, "a bad value is refused");

    /* The time cap never stops a loop before FC_SIDE_MIN_ITERS iterations. */
    check(!fc_side_time_cap_reached(0, 1e9, 1.0), "cap: not at 0 iterations");
    check(!fc_side_time_cap_reached(FC_SIDE_MIN_ITERS - 1, 1e9, 1.0), "cap: not below the floor");
    check(fc_side_time_cap_reached(FC_SIDE_MIN_ITERS, 2.0, 1.0), "cap: at the floor, past the time");
    check(!fc_side_time_cap_reached(FC_SIDE_MIN_ITERS, 0.5, 1.0), "cap: at the floor, in time");
    check(FC_SIDE_MIN_ITERS == 1000, "the floor is 1000");

    /* primary-plain: the default recording must see nothing at all. */
    clean(&fc, &f);
    EXPECT(FC_SIDE_PRIMARY_PLAIN, "PASS", "clean primary-plain");
    check(strstr(line, " fc_iters=1000 ") && strstr(line, " fc_min_iters=1000 ") &&
              strstr(line, " fc_requested=1000 ") && strstr(line, " recording=auto "),
          "iterations, floor, request and recording printed");
    fc.ok = 997, fc.failed = 3, fc.failed_invalidated = 3, fc.invalidated_recordings = 3;
    EXPECT(FC_SIDE_PRIMARY_PLAIN, "FAIL", "primary-plain with invalidations");
    check(strstr(line, "invalidated") != NULL, "the reason names the invalidation");
    check(strstr(line, "fc_failed_invalidated=3 ") != NULL, "counts printed");
    clean(&fc, &f);
    fc.ok--, fc.failed = fc.failed_other = 1;
    EXPECT(FC_SIDE_PRIMARY_PLAIN, "FAIL", "primary-plain with an fc failure");
    clean(&fc, &f);
    f.failed = f.sync_failed = 1;
    EXPECT(FC_SIDE_PRIMARY_PLAIN, "FAIL", "primary-plain with a foreign failure");
    check(strstr(line, "foreign_sync_failed=1 ") && strstr(line, "foreign failures"), "foreign failure named");
    clean(&fc, &f);
    fc.wrong = 1, fc.ok--;
    EXPECT(FC_SIDE_PRIMARY_PLAIN, "FAIL", "primary-plain with a wrong result");
    clean(&fc, &f);
    fc.iters = fc.ok = FC_SIDE_MIN_ITERS - 1;
    EXPECT(FC_SIDE_PRIMARY_PLAIN, "FAIL", "primary-plain below 1000 iterations");
    check(strstr(line, "at least 1000") != NULL, "the reason names the floor");
    clean(&fc, &f);
    f.iters = 0;
    EXPECT(FC_SIDE_PRIMARY_PLAIN, "FAIL", "primary-plain with an idle foreign client");

    /* primary-retry: nothing to recover from either. */
    clean(&fc, &f);
    EXPECT(FC_SIDE_PRIMARY_RETRY, "PASS", "clean primary-retry");
    check(strstr(line, " fc_tries=1:1000 ") != NULL, "tries histogram");
    fc.tries_hist[1] = 997, fc.tries_hist[2] = 2, fc.tries_hist[FC_SIDE_TRIES_SLOTS - 1] = 1;
    fc.retried = 3, fc.invalidated_recordings = 65, fc.max_tries = 64;
    EXPECT(FC_SIDE_PRIMARY_RETRY, "FAIL", "primary-retry that re-recorded");
    check(strstr(line, " fc_tries=1:997,2:2,64+:1 ") != NULL, "tries histogram with retries");
    check(strstr(line, "re-recorded") != NULL, "the reason says re-recorded");
    fc.failed = fc.failed_invalidated = 1;
    EXPECT(FC_SIDE_PRIMARY_RETRY, "FAIL", "primary-retry with an unrecovered failure");
    check(strstr(line, "unrecovered") != NULL, "the reason says unrecovered");
    clean(&fc, &f);
    f.failed = f.sync_failed = 9;
    EXPECT(FC_SIDE_PRIMARY_RETRY, "FAIL", "primary-retry with foreign failures");

    /* isolated: nothing fails on either side. */
    clean(&fc, &f);
    EXPECT(FC_SIDE_ISOLATED, "PASS", "clean isolated run");
    f.failed = f.sync_failed = 1;
    EXPECT(FC_SIDE_ISOLATED, "FAIL", "a foreign failure beside isolated");
    clean(&fc, &f);
    fc.failed = fc.failed_other = 1;
    EXPECT(FC_SIDE_ISOLATED, "FAIL", "an fc failure on isolated");
    clean(&fc, &f);
    f.wrong = 1;
    EXPECT(FC_SIDE_ISOLATED, "FAIL", "a foreign wrong result beside isolated");
    clean(&fc, &f);
    f.iters = 0;
    EXPECT(FC_SIDE_ISOLATED, "FAIL", "an idle foreign client");
    clean(&fc, &f);
    fc.setup_failed = 1;
    EXPECT(FC_SIDE_ISOLATED, "FAIL", "a failed setup");
    EXPECT(7, "FAIL", "an unknown configuration");
    clean(&fc, &f);
    fc.iters = fc.ok = 20; /* the floor is primary-plain's requirement only */
    EXPECT(FC_SIDE_ISOLATED, "PASS", "isolated with 20 iterations");
    clean(&fc, &f);
    fc.skipped = 1;
    EXPECT(FC_SIDE_ISOLATED, "FAIL", "only isolated-cublas may be skipped");

    /* isolated-cublas: as isolated; SKIP (not PASS, not FAIL) without cuBLAS. */
    clean(&fc, &f);
    EXPECT(FC_SIDE_ISOLATED_CUBLAS, "PASS", "clean isolated-cublas");
    fc.wrong = 1;
    EXPECT(FC_SIDE_ISOLATED_CUBLAS, "FAIL", "isolated-cublas with a wrong result");
    clean(&fc, &f);
    fc.failed = fc.failed_other = 1;
    EXPECT(FC_SIDE_ISOLATED_CUBLAS, "FAIL", "isolated-cublas with an fc failure");
    check(strstr(line, "cuBLAS") != NULL, "the reason names cuBLAS");
    clean(&fc, &f);
    f.failed = f.alloc_failed = 1;
    EXPECT(FC_SIDE_ISOLATED_CUBLAS, "FAIL", "isolated-cublas with a foreign failure");
    memset(&fc, 0, sizeof fc);
    memset(&f, 0, sizeof f);
    fc.skipped = 1;
    snprintf(fc.first_error, sizeof fc.first_error, "libcublas not found: dlopen(\"libcublas.so.13\"): no");
    EXPECT(FC_SIDE_ISOLATED_CUBLAS, "SKIP", "isolated-cublas without libcublas");
    check(strstr(line, "reason=\"skipped: libcublas not found") != NULL, "the skip says why");
    check(strstr(line, "dlopen('libcublas.so.13')") != NULL, "quotes in the reason made harmless");
    fc.setup_failed = 1; /* FC_REQUIRE_INTEROP=1: a missing cuBLAS is a setup failure */
    EXPECT(FC_SIDE_ISOLATED_CUBLAS, "FAIL", "isolated-cublas whose setup failed");

    /* primary-capture: the informational control never fails. */
    clean(&fc, &f);
    fc.recording = FC_SIDE_RECORDING_CAPTURE;
    fc.ok = 600, fc.failed = fc.failed_invalidated = 400, fc.invalidated_recordings = 400;
    f.failed = f.sync_failed = 401;
    EXPECT(FC_SIDE_PRIMARY_CAPTURE, "INFO", "primary-capture with invalidations");
    check(strstr(line, " recording=capture ") && strstr(line, "400 recordings invalidated"), "control counts");
    clean(&fc, &f);
    fc.recording = FC_SIDE_RECORDING_CAPTURE;
    EXPECT(FC_SIDE_PRIMARY_CAPTURE, "INFO", "primary-capture without invalidations");
    check(strstr(line, "may not have overlapped") != NULL, "no invalidation is pointed out");
    fc.wrong = 3, f.wrong = 2;
    EXPECT(FC_SIDE_PRIMARY_CAPTURE, "INFO", "primary-capture with wrong results");
    check(strstr(line, "3 fc wrong") && strstr(line, "2 foreign wrong"), "wrong results reported");
    memset(&fc, 0, sizeof fc);
    memset(&f, 0, sizeof f);
    fc.setup_failed = 1, fc.recording = -1;
    EXPECT(FC_SIDE_PRIMARY_CAPTURE, "INFO", "primary-capture whose setup failed");
    check(strstr(line, "setup failed") && strstr(line, " recording=invalid "), "setup failure reported");

    /* Error line: quotes and newlines are made harmless; the note is there. */
    clean(&fc, &f);
    snprintf(fc.first_error, sizeof fc.first_error, "say \"hi\"\nthere");
    snprintf(fc.note, sizeof fc.note, "green context; cuBLAS \"x\"");
    fc_side_report_errors("selftest", FC_SIDE_ISOLATED, &fc, &f, line, sizeof line);
    check(strstr(line, "fc_first_error=\"say 'hi''there\"") != NULL && strchr(line, '\n') == NULL, "sanitized");
    check(strstr(line, "foreign_first_error=\"none\"") != NULL, "no foreign error");
    check(strstr(line, "fc_note=\"green context; cuBLAS 'x'\"") != NULL, "the note");

    /* Opening. A configuration whose FC_RECORDING is wrong is refused
     * before anything is opened. */
    const char *env = getenv("FC_RECORDING");
    int env_mode = fc_side_recording_mode(env);
    if (env_mode != FC_SIDE_RECORDING_CAPTURE) {
        check(fc_side_open(0, FC_SIDE_PRIMARY_CAPTURE, &fc) == NULL && fc.setup_failed &&
                  strstr(fc.first_error, "FC_RECORDING") != NULL,
              "primary-capture without FC_RECORDING=capture refused");
    } else {
        check(fc_side_open(0, FC_SIDE_PRIMARY_PLAIN, &fc) == NULL && fc.setup_failed &&
                  strstr(fc.first_error, "FC_RECORDING") != NULL,
              "primary-plain with FC_RECORDING=capture refused");
    }
    check(fc_side_open(0, 9, &fc) == NULL && fc.setup_failed, "unknown configuration refused");

    /* Without a driver, a clean refusal that says why; with one, working
     * loops (the clients check the rest on the GPU machine). */
    if (fc_cuda_device_count() == 0) {
        fc_side *s = fc_side_open(0, FC_SIDE_ISOLATED, &fc);
        check(s == NULL && fc.setup_failed == 1 && fc.first_error[0] != '\0', "no driver: open refused");
        printf("no driver: %s\n", fc.first_error);
        fc_side_close(s);
        check(fc_side_loop(NULL, 1, 1, 1.0, &fc) == -1, "loop without a side refused");
        if (env_mode != FC_SIDE_RECORDING_BUILD) {
            s = fc_side_open(0, FC_SIDE_ISOLATED_CUBLAS, &fc);
            check(s == NULL && (fc.skipped ^ fc.setup_failed) && fc.first_error[0] != '\0',
                  "no driver: isolated-cublas skipped (no cuBLAS) or refused");
            printf("no driver, isolated-cublas: %s: %s\n", fc.skipped ? "skipped" : "refused", fc.first_error);
        }
    } else {
        fc_side *s = fc_side_open(0, FC_SIDE_ISOLATED, &fc);
        check(s != NULL && !fc.setup_failed, "open an isolated context");
        if (!s)
            printf("isolated: %s\n", fc.first_error);
        check(fc_side_loop(s, 20, 1, 10.0, &fc) == 0 && fc.ok == 20 && fc.wrong == 0, "20 quiet iterations");
        check(fc_side_loop(s, 1, 0, 10.0, &fc) == -1, "max_tries 0 refused");
        /* The floor: a cap that has passed before the first iteration still
         * lets FC_SIDE_MIN_ITERS run. */
        long long before = fc.iters;
        check(fc_side_loop(s, FC_SIDE_MIN_ITERS + 100, 1, 1e-9, &fc) == 0 &&
                  fc.iters - before == FC_SIDE_MIN_ITERS && fc.time_capped == 1,
              "the time cap stops at the floor, not before");
        check(fc.ok == fc.iters && fc.failed == 0 && fc.wrong == 0, "quiet iterations are exact");
        printf("isolated: %lld iterations in %.2f s (%s)\n", fc.iters, fc.seconds, fc.note);
        fc_side_close(s);
        if (env_mode != FC_SIDE_RECORDING_CAPTURE) {
            s = fc_side_open(0, FC_SIDE_PRIMARY_PLAIN, &fc);
            check(s != NULL && !fc.setup_failed, "open a primary context");
            if (!s)
                printf("primary-plain: %s\n", fc.first_error);
            check(fc_side_loop(s, 20, 1, 10.0, &fc) == 0 && fc.ok == 20 && fc.invalidated_recordings == 0,
                  "20 quiet primary iterations");
            fc_side_close(s);
        }
        if (env_mode != FC_SIDE_RECORDING_BUILD) {
            /* cuBLAS where it is found ($FC_CUBLAS_LIBRARY, else the default
             * names); a skip says why. */
            s = fc_side_open(0, FC_SIDE_ISOLATED_CUBLAS, &fc);
            if (!s && fc.skipped) {
                printf("isolated-cublas skipped: %s\n", fc.first_error);
            } else {
                check(s != NULL && !fc.setup_failed, "open an isolated context with cuBLAS");
                if (!s)
                    printf("isolated-cublas: %s\n", fc.first_error);
                check(fc_side_loop(s, 20, 1, 10.0, &fc) == 0 && fc.ok == 20 && fc.wrong == 0,
                      "20 quiet iterations with cuBLAS");
                if (s)
                    printf("isolated-cublas: %lld iterations, %lld ok (%s)\n", fc.iters, fc.ok, fc.note);
                fc_side_close(s);
            }
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
