// variant: sm_90a TMA + wgmma path (USE_WGMMA 1): CTA tile 128x128x64, 3 warpgroups (1 TMA
// producer + 2 consumers of 64x128, wgmma.m64n128k16), 6-stage TMA/mbarrier ring (192 KiB);
// other shapes / targets fall back to the default mma.sync tile (128x128x32, 4 warps, 4 stages)
#define USE_WGMMA 1
#define WG_BLOCK_N 128
#define WG_STAGES 6
#define GROUP_M 8
#include "../../../../kernels/cuda/matmul.cu"
