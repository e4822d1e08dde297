// variant: split, ring of 3 stages of 8 loads per lane
// Tuning variant of kernels/cuda/cross_entropy.cu (parameters below, everything else default).
#define CHUNK_LOADS 8
#include "../../../../kernels/cuda/cross_entropy.cu"
