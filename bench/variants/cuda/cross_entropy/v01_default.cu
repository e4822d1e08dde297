// variant: defaults: rows over 4096 split into chunks of 32 lanes x 4 16-byte loads, items of 16 chunks swept by a persistent grid through a 3-stage cp.async ring per warp (blocks of 256); ce_finish as a programmatic dependent launch
// Tuning variant of kernels/cuda/cross_entropy.cu (parameters below, everything else default).
#include "../../../../kernels/cuda/cross_entropy.cu"
