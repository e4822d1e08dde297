// variant: no tensor cores (clearly slower): every dtype on the fp32 FFMA SIMT path, 128x128x8 tiles
#define USE_MMA 0
#include "../../../../kernels/cuda/matmul.cu"
