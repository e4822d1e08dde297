// BAD (guard timeout): never returns.
#include <unistd.h>

#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor*, int, DLTensor*, int, const double*, int, void*) {
  for (;;) ::sleep(1);
}
