// BAD (guard crash): dereferences a null pointer.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor*, int, DLTensor*, int, const double*, int, void*) {
  volatile int* p = nullptr;
  *p = 42;
  return 0;
}
