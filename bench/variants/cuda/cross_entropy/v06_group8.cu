// variant: split, ring, items of 8 chunks (16 per row)
// Tuning variant of kernels/cuda/cross_entropy.cu (parameters below, everything else default).
#define CHUNK_GROUP 8
#include "../../../../kernels/cuda/cross_entropy.cu"
