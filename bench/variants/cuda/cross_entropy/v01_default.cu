// variant: defaults: rows over 4096 split into chunks of 32 lanes x 4 16-byte loads; a range of chunks per warp through a 3-stage cp.async ring, blocks of 256; one kernel (rows finished in it)
// Tuning variant of kernels/cuda/cross_entropy.cu (parameters below, everything else default).
#include "../../../../kernels/cuda/cross_entropy.cu"
