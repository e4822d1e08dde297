// BAD (guard guard_band): correct softmax, then writes one element past the end of y.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  bad::softmax(in, out, in[0].shape[0]);
  const std::int64_t n = vbk::numel(out[0]);
  const int esz = out[0].dtype.bits / 8;
  std::memset(static_cast<char*>(vbk::data_ptr(out[0])) + n * esz, 0,
              static_cast<std::size_t>(esz));
  return 0;
}
