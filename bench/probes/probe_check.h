/*
 * probe_check.h - the error check the probes in this folder share: CK(x)
 * prints the failing call, its file and line and the driver's error name,
 * then exits 1. Included as "probe_check.h", so each probe still builds on
 * its own (see its Build line).
 */
#ifndef FC_PROBE_CHECK_H
#define FC_PROBE_CHECK_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static const char *ename(CUresult r) {
    const char *s = NULL;
    cuGetErrorName(r, &s);
    return s ? s : "?";
}

#define CK(x)                                                                                  \
    do {                                                                                       \
        CUresult r_ = (x);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "FATAL %s:%d %s -> %s\n", __FILE__, __LINE__, #x, ename(r_));      \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif
