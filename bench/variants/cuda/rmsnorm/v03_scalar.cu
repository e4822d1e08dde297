// variant: coalesced 2-/4-byte scalar accesses only (VEC_BYTES 2 disables vectors); 512-thread block per row, 16 scalars cached per thread
// Ranking-study variant of kernels/cuda/rmsnorm.cu (parameters below, everything else default).
#define VEC_BYTES 2
#define BLOCK_THREADS 512
#define MAX_PACKS 16
#include "../../../../kernels/cuda/rmsnorm.cu"
