// variant: 4-byte accesses (2 halves or 1 float each) instead of 16-byte vectors; 512-thread block per row, 16 accesses cached per thread
// Ranking-study variant of kernels/cuda/softmax.cu (parameters below, everything else default).
#define VEC_BYTES 4
#define BLOCK_THREADS 512
#define MAX_PACKS 16
#include "../../../../kernels/cuda/softmax.cu"
