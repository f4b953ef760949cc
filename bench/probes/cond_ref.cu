#include <cuda_runtime.h>
extern "C" __global__ void ref_set(cudaGraphConditionalHandle h, const unsigned *p) { cudaGraphSetConditional(h, *p); }
