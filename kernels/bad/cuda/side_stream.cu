// BAD (timer_cross_check): correct results, but the work runs on a private non-blocking stream,
// so the evaluator's events on the given stream see (almost) none of it. A 5 ms busy-wait is
// added on that side stream so the escape is unmistakable.
#include "bad_common.cuh"

__global__ void busy_wait(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = vbk::check_cuda_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  cudaStream_t side = nullptr;
  if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess)
    return vbk::fail("cudaStreamCreateWithFlags failed");
  busy_wait<<<1, 1, 0, side>>>(10000000LL);  // ~5 ms at ~2 GHz
  VBK_CUDA_CHECK_LAUNCH("busy_wait");
  if (int e = bad::softmax(in, out, side)) return e;
  cudaStreamDestroy(side);  // returns at once; the work still runs
  return 0;
}
