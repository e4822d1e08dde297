// BAD (timing, guard fresh_inputs): correct on small problems (every correctness stage), but on
// a large one (>= 2^22 elements, the sets a timing rotates) it computes only every third call
// and returns at once otherwise, leaving its output as it found it: the median of the timed
// calls then measures the skipped ones. The timing verifies sets chosen after the reply; when
// one batch times every call (large sets), ceil(k/2) of them, so a kernel that skips more than
// half of the calls (what moving the median takes) always meets a verified one.
#include "bad_common.h"

namespace {
long calls = 0;
}

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const bool large = in[0].shape[0] * in[0].shape[1] >= (std::int64_t{1} << 22);
  if (large && ++calls % 3 != 0) return 0;
  bad::softmax(in, out, in[0].shape[0]);
  return 0;
}
