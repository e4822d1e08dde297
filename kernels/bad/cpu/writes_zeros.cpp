// BAD (issue 18 class 10; KernelBench issue 165): writes all zeros, as a "kernel" that only
// allocates its output would. Zeros pass a loose absolute tolerance wherever the true values
// are small (softmax of a long row: every probability is below 1e-2); the relative error
// against the fp64 oracle (100 %) fails them.
#include <cstring>

#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  std::memset(vbk::data_ptr(out[0]), 0,
              static_cast<std::size_t>(vbk::numel(out[0]) * out[0].dtype.bits / 8));
  return 0;
}
