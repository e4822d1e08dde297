// variant: row per 512-thread block with 8-byte accesses
// Ranking-study variant of kernels/cuda/softmax.cu (parameters below, everything else default).
#define BLOCK_THREADS 512
#define VEC_BYTES 8
#include "../../../../kernels/cuda/softmax.cu"
