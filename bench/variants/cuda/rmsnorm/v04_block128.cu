// variant: row per 128-thread block (more vectors per thread; fp32 8192-rows fall back to streaming)
// Ranking-study variant of kernels/cuda/rmsnorm.cu (parameters below, everything else default).
#define BLOCK_THREADS 128
#include "../../../../kernels/cuda/rmsnorm.cu"
