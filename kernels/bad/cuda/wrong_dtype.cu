// BAD (output_dtype_shape): computes softmax, then "returns" another dtype and shape by
// rewriting its output descriptor.
#include "bad_common.cuh"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (int e = bad::softmax(in, out, vbk::as_stream(stream))) return e;
  out[0].dtype.bits = out[0].dtype.bits == 32 ? 16 : 32;  // claims a different element type
  out[0].ndim = 1;                                        // and a flattened shape
  return 0;
}
