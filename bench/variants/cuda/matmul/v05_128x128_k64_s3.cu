// variant: 128x128x64, 8 warps (2x4), 3 stages
#define BLOCK_M 128
#define BLOCK_N 128
#define BLOCK_K 64
#define WARPS_M 2
#define WARPS_N 4
#define STAGES 3
#define USE_WGMMA 0  // the mma.sync path (the starter defaults to wgmma on sm_90a)
#include "../../../../kernels/cuda/matmul.cu"
