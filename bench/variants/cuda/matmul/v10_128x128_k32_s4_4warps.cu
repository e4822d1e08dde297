// variant: 128x128x32, 4 warps (2x2, warp tile 64x64), 4 stages
#define BLOCK_M 128
#define BLOCK_N 128
#define BLOCK_K 32
#define WARPS_M 2
#define WARPS_N 2
#define STAGES 4
#define USE_WGMMA 0  // the mma.sync path (the starter defaults to wgmma on sm_90a)
#include "../../../../kernels/cuda/matmul.cu"
