// BAD (poisoned_output): a correct softmax except that the last output element is never written.
#include "bad_common.cuh"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  return bad::softmax(in, out, vbk::as_stream(stream), /*skip_last=*/true);
}
