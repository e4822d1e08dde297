// variant: default tile: 128x256x32, 8 warps (2x4, warp tile 64x64), 4 cp.async stages, GROUP_M 8
#define BLOCK_M 128
#define BLOCK_N 256
#define BLOCK_K 32
#define WARPS_M 2
#define WARPS_N 4
#define STAGES 4
#define GROUP_M 8
#define USE_WGMMA 0  // the mma.sync path (the starter defaults to wgmma on sm_90a)
#include "../../../../kernels/cuda/matmul.cu"
