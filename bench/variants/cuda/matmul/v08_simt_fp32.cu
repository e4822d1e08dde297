// variant: no tensor cores (clearly slower): every dtype on the fp32 FFMA SIMT path, 128x128x8 tiles
#define USE_MMA 0
#define USE_WGMMA 0  // the mma.sync path (the starter defaults to wgmma on sm_90a)
#include "../../../../kernels/cuda/matmul.cu"
