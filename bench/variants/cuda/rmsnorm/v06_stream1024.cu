// variant: no register cache (MAX_PACKS 1): rows streamed twice (Σx², then output) by 1024-thread blocks
// Ranking-study variant of kernels/cuda/rmsnorm.cu (parameters below, everything else default).
#define MAX_PACKS 1
#define LONG_BLOCK_THREADS 1024
#define UNROLL 4
#include "../../../../kernels/cuda/rmsnorm.cu"
