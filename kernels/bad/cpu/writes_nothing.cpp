// BAD (stage 1 smoke, guard poisoned_output): returns success without writing its output.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  return bad::softmax_args(in, n_in, out, n_out, n_attrs);
}
