// variant: 128x128x32, 8 warps (2x4, warp tile 64x32), 4 stages, 2 CTAs per SM
#define BLOCK_M 128
#define BLOCK_N 128
#define BLOCK_K 32
#define WARPS_M 2
#define WARPS_N 4
#define STAGES 4
#define MIN_BLOCKS 2
#define USE_WGMMA 0  // the mma.sync path (the starter defaults to wgmma on sm_90a)
#include "../../../../kernels/cuda/matmul.cu"
