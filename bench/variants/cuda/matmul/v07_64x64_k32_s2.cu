// variant: small tiles (slow on purpose): 64x64x32, 4 warps (warp tile 32x32), 2 stages, no rasterization groups
#define BLOCK_M 64
#define BLOCK_N 64
#define BLOCK_K 32
#define WARPS_M 2
#define WARPS_N 2
#define STAGES 2
#define GROUP_M 1
#define USE_WGMMA 0  // the mma.sync path (the starter defaults to wgmma on sm_90a)
#include "../../../../kernels/cuda/matmul.cu"
