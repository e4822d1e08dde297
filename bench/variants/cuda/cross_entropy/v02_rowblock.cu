// variant: no split: one 512-thread block streams each row, then a final kernel (the starter before the split path)
// Tuning variant of kernels/cuda/cross_entropy.cu (parameters below, everything else default).
#define SPLIT_COLS 0
#include "../../../../kernels/cuda/cross_entropy.cu"
