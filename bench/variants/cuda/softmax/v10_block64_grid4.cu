// variant: 64-thread blocks: rows of 8192 no longer fit their register cache and go to the streaming path (1024-thread blocks, the row read twice); grid capped at 4 blocks per SM
// Ranking-study variant of kernels/cuda/softmax.cu (parameters below, everything else default).
#define BLOCK_THREADS 64
#define MAX_BLOCKS_PER_SM 4
#include "../../../../kernels/cuda/softmax.cu"
