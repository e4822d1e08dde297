// variant: split, one warp per chunk with a register prefetch of the next, no ring; merge and final kernels
// Tuning variant of kernels/cuda/cross_entropy.cu (parameters below, everything else default).
#define CHUNK_STAGES 0
#include "../../../../kernels/cuda/cross_entropy.cu"
