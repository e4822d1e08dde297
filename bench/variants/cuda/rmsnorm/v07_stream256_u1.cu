// variant: streamed rows, 256-thread blocks, ONE load in flight per thread per step
// Ranking-study variant of kernels/cuda/rmsnorm.cu (parameters below, everything else default).
#define MAX_PACKS 1
#define LONG_BLOCK_THREADS 256
#define UNROLL 1
#include "../../../../kernels/cuda/rmsnorm.cu"
