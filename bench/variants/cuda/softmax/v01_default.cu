// variant: defaults: row per 256-thread block cached in registers, 16-byte vectors
// Ranking-study variant of kernels/cuda/softmax.cu (parameters below, everything else default).
#include "../../../../kernels/cuda/softmax.cu"
