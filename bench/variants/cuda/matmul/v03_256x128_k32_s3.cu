// variant: 256x128x32, 8 warps (4x2, warp tile 64x64), 3 stages
#define BLOCK_M 256
#define BLOCK_N 128
#define BLOCK_K 32
#define WARPS_M 4
#define WARPS_N 2
#define STAGES 3
#define USE_WGMMA 0  // the mma.sync path (the starter defaults to wgmma on sm_90a)
#include "../../../../kernels/cuda/matmul.cu"
