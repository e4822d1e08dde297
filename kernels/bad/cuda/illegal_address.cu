// BAD (crash): writes through a pointer into unmapped device memory
// (CUDA_ERROR_ILLEGAL_ADDRESS: a sticky fault that kills the context).
#include "bad_common.cuh"

__global__ void write_wild(float* p) {
  p[threadIdx.x] = 1.f;
}

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  // 16 bytes above address 0: never mapped in a CUDA context.
  write_wild<<<1, 32, 0, vbk::as_stream(stream)>>>(reinterpret_cast<float*>(16));
  VBK_CUDA_CHECK_LAUNCH("write_wild");
  return 0;
}
