// BAD (guard_band): a correct softmax that also writes one element past the end of its output.
#include "bad_common.cuh"

template <typename T>
__global__ void write_one_past(T* y, long long n) {
  y[n] = vbk::from_f32<T>(0.f);  // y has n elements: y[n] is out of bounds
}

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (int e = bad::softmax(in, out, vbk::as_stream(stream))) return e;
  const long long n = out[0].shape[0] * out[0].shape[1];
  return vbk::dispatch_float(vbk::dtype_of(out[0]), [&](auto tag) {
    using T = decltype(tag);
    write_one_past<T><<<1, 1, 0, vbk::as_stream(stream)>>>(static_cast<T*>(out[0].data), n);
    VBK_CUDA_CHECK_LAUNCH("write_one_past");
    return 0;
  });
}
