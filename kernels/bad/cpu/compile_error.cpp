// BAD (build): does not compile; the evaluator must show the compiler's file:line diagnostic.
#include "vb_kernel.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int, void*) {
  return undeclared_identifier + n_in;
}
