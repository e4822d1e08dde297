// variant: sm_90a TMA + wgmma path (USE_WGMMA 1, the starter's defaults since 2026-12-02): CTA tile 128x256x64, 3 warpgroups (1 TMA
// producer + 2 consumers of 64x256, wgmma.m64n256k16), 4-stage TMA/mbarrier ring (192 KiB);
// shapes the wgmma path does not take (K or N not a multiple of 8, misaligned, not sm_90a) run
// the default mma.sync tile (128x128x32, 4 warps, 4 stages)
#define USE_WGMMA 1
#define WG_BLOCK_N 256
#define WG_STAGES 4
#define GROUP_M 8
#include "../../../../kernels/cuda/matmul.cu"
