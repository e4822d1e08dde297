// variant: defaults but the grid capped at 2 blocks per SM (low occupancy, few bytes in flight)
// Ranking-study variant of kernels/cuda/rmsnorm.cu (parameters below, everything else default).
#define MAX_BLOCKS_PER_SM 2
#include "../../../../kernels/cuda/rmsnorm.cu"
