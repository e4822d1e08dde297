// BAD (guard output_dtype_shape): computes softmax in fp32 and "returns" fp32 by rewriting the
// output descriptor's dtype instead of producing the requested dtype. (To stay in bounds it
// writes only as many floats as fit; the descriptor change is what must be caught.)
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  bad::softmax(in, out, in[0].shape[0]);
  out[0].dtype.code = kDLFloat;
  out[0].dtype.bits = 32;
  return 0;
}
