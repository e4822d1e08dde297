// BAD (timeout): a kernel that never finishes.
#include "bad_common.cuh"

__global__ void spin() {
  // clock64() and __nanosleep are volatile: the loop cannot be optimized away.
  while (clock64() != -1) __nanosleep(100000);
}

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  spin<<<1, 1, 0, vbk::as_stream(stream)>>>();
  VBK_CUDA_CHECK_LAUNCH("spin");
  return 0;
}
