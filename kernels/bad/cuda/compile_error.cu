// BAD (build): does not compile; the error must be reported by file and line.
#include "vb_cuda.cuh"

extern "C" int vb_kernel_run(const DLTensor*, int, DLTensor*, int, const double*, int, void*) {
  return undeclared_identifier;  // line 5: the error
}
