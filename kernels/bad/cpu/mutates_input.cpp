// BAD (guard input_mutation): correct softmax, but zeroes the first input element afterwards.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  bad::softmax(in, out, in[0].shape[0]);
  std::memset(vbk::data_ptr(in[0]), 0, static_cast<std::size_t>(in[0].dtype.bits / 8));
  return 0;
}
