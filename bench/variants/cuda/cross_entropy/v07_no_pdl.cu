// variant: split, ring, ce_finish launched after the stream (no programmatic dependent launch)
// Tuning variant of kernels/cuda/cross_entropy.cu (parameters below, everything else default).
#define DEPENDENT_LAUNCH 0
#include "../../../../kernels/cuda/cross_entropy.cu"
