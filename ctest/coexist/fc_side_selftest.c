/* fc_side_selftest.c - checks fc_side.c where no GPU is needed: the
 * verdict of every configuration and the summary line, and a clean
 * refusal to open without a usable driver (when there is none). Prints
 * "N passed, N failed". */
#include <stdio.h>
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

/* Counts of a clean run: every iteration fine, foreign client busy. */
static void clean(fc_side_counts *fc, fc_side_foreign *f)
{
    memset(fc, 0, sizeof *fc);
    memset(f, 0, sizeof *f);
    fc->iters = fc->ok = 10;
    fc->tries_hist[1] = 10;
    fc->max_tries = 1;
    f->iters = 5;
    f->calls = 50;
}

static int verdict(int config, const fc_side_counts *fc, const fc_side_foreign *f, char *line, size_t len)
{
    int pass = fc_side_report("selftest", config, fc, f, line, len);
    int says_pass = strstr(line, " verdict=PASS ") != NULL;
    int says_fail = strstr(line, " verdict=FAIL ") != NULL;
    check(pass ? says_pass && !says_fail : says_fail && !says_pass, "the line's verdict matches the return value");
    return pass;
}

int main(void)
{
    char line[2048];
    fc_side_counts fc;
    fc_side_foreign f;

    check(fc_side_config_from_name("primary-plain") == FC_SIDE_PRIMARY_PLAIN, "names");
    check(fc_side_config_from_name("primary-retry") == FC_SIDE_PRIMARY_RETRY, "names");
    check(fc_side_config_from_name("isolated") == FC_SIDE_ISOLATED, "names");
    check(fc_side_config_from_name("nope") == -1 && fc_side_config_from_name(NULL) == -1, "unknown names");
    check(fc_side_config_name(3) == NULL && fc_side_config_name(-1) == NULL, "unknown configs");

    /* primary-plain: the control needs at least one invalidated capture. */
    clean(&fc, &f);
    check(!verdict(FC_SIDE_PRIMARY_PLAIN, &fc, &f, line, sizeof line), "primary-plain without invalidation fails");
    check(strstr(line, "control") != NULL, "the reason names the control");
    fc.ok = 7, fc.failed = 3, fc.failed_invalidated = 3, fc.invalidated_recordings = 3;
    f.failed = f.sync_failed = 4;
    check(verdict(FC_SIDE_PRIMARY_PLAIN, &fc, &f, line, sizeof line), "primary-plain with invalidations passes");
    check(strstr(line, "fc_failed_invalidated=3 ") && strstr(line, "foreign_sync_failed=4 "), "counts printed");
    fc.wrong = 1;
    check(!verdict(FC_SIDE_PRIMARY_PLAIN, &fc, &f, line, sizeof line), "a wrong result fails primary-plain");

    /* primary-retry: no unrecovered failure; foreign failures allowed. */
    clean(&fc, &f);
    fc.tries_hist[1] = 7, fc.tries_hist[2] = 2, fc.tries_hist[FC_SIDE_TRIES_SLOTS - 1] = 1;
    fc.retried = 3, fc.invalidated_recordings = 65, fc.max_tries = 64;
    f.failed = f.sync_failed = 9;
    check(verdict(FC_SIDE_PRIMARY_RETRY, &fc, &f, line, sizeof line), "primary-retry, all recovered, passes");
    check(strstr(line, " fc_tries=1:7,2:2,64+:1 ") != NULL, "tries histogram");
    fc.failed = fc.failed_invalidated = 1;
    check(!verdict(FC_SIDE_PRIMARY_RETRY, &fc, &f, line, sizeof line), "an unrecovered failure fails primary-retry");
    check(strstr(line, "unrecovered") != NULL, "the reason says unrecovered");

    /* isolated: nothing fails on either side. */
    clean(&fc, &f);
    check(verdict(FC_SIDE_ISOLATED, &fc, &f, line, sizeof line), "clean isolated run passes");
    f.failed = f.sync_failed = 1;
    check(!verdict(FC_SIDE_ISOLATED, &fc, &f, line, sizeof line), "a foreign failure fails isolated");
    clean(&fc, &f);
    fc.failed = fc.failed_other = 1;
    check(!verdict(FC_SIDE_ISOLATED, &fc, &f, line, sizeof line), "an fc failure fails isolated");
    clean(&fc, &f);
    f.wrong = 1;
    check(!verdict(FC_SIDE_ISOLATED, &fc, &f, line, sizeof line), "a foreign wrong result fails isolated");
    clean(&fc, &f);
    f.iters = 0;
    check(!verdict(FC_SIDE_ISOLATED, &fc, &f, line, sizeof line), "an idle foreign client fails");
    clean(&fc, &f);
    fc.setup_failed = 1;
    check(!verdict(FC_SIDE_ISOLATED, &fc, &f, line, sizeof line), "a failed setup fails");
    check(!verdict(7, &fc, &f, line, sizeof line), "an unknown configuration fails");

    /* Error line: quotes and newlines are made harmless. */
    clean(&fc, &f);
    snprintf(fc.first_error, sizeof fc.first_error, "say \"hi\"\nthere");
    fc_side_report_errors("selftest", FC_SIDE_ISOLATED, &fc, &f, line, sizeof line);
    check(strstr(line, "fc_first_error=\"say 'hi''there\"") != NULL && strchr(line, '\n') == NULL, "sanitized");
    check(strstr(line, "foreign_first_error=\"none\"") != NULL, "no foreign error");

    /* Opening: without a driver, a clean refusal that says why; with one,
     * a working context (checked by the clients on the GPU machine). */
    if (fc_cuda_device_count() == 0) {
        fc_side *s = fc_side_open(0, FC_SIDE_ISOLATED, &fc);
        check(s == NULL && fc.setup_failed == 1 && fc.first_error[0] != '\0', "no driver: open refused");
        printf("no driver: %s\n", fc.first_error);
        fc_side_close(s);
        check(fc_side_loop(NULL, 1, 1, 1.0, &fc) == -1, "loop without a side refused");
    } else {
        fc_side *s = fc_side_open(0, FC_SIDE_ISOLATED, &fc);
        check(s != NULL && !fc.setup_failed, "open with a driver");
        check(fc_side_loop(s, 20, 1, 10.0, &fc) == 0 && fc.ok == 20 && fc.wrong == 0, "20 quiet iterations");
        check(fc_side_loop(s, 1, 0, 10.0, &fc) == -1, "max_tries 0 refused");
        fc_side_close(s);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
