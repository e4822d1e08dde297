// variant: no register cache (MAX_PACKS 1): every long row streamed twice by a 1024-thread block, online softmax
// Ranking-study variant of kernels/cuda/softmax.cu (parameters below, everything else default).
#define MAX_PACKS 1
#define LONG_BLOCK_THREADS 1024
#define UNROLL 4
#include "../../../../kernels/cuda/softmax.cu"
