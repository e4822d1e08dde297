// BAD (guard poisoned_output): softmax that never processes the last row.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::int64_t rows = in[0].shape[0];
  return bad::softmax(in, out, rows > 1 ? rows - 1 : rows);
}
