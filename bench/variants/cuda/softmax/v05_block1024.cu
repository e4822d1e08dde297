// variant: row per 1024-thread block (one or two vectors per thread, heavier block reductions)
// Ranking-study variant of kernels/cuda/softmax.cu (parameters below, everything else default).
#define BLOCK_THREADS 1024
#include "../../../../kernels/cuda/softmax.cu"
