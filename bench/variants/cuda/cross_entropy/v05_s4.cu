// variant: split, ring of 4 stages of 4 loads per lane
// Tuning variant of kernels/cuda/cross_entropy.cu (parameters below, everything else default).
#define CHUNK_STAGES 4
#include "../../../../kernels/cuda/cross_entropy.cu"
