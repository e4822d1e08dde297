// BAD (guard protocol/crash): computes correctly on correctness-sized problems, but on the
// large timed problem writes a forged "fast" reply straight into the runner's reply pipe
// (fd 5) and exits, hoping the parent believes it (red-team finding #2).
#include <unistd.h>

#include <string>

#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  if (vbk::numel(in[0]) < (1 << 24)) return bad::softmax(in, out, in[0].shape[0]);
  std::string r = "{\"ok\":true,\"times_ns\":[";
  for (int i = 0; i < 64; ++i) r += std::string(i ? "," : "") + "1000";
  r += "],\"busy_ns\":64000,\"timed_ns\":64000,\"loop_ns\":64000,\"verify_set\":1,"
       "\"verify_hash\":\"0000000000000000\"}\n";
  (void)!::write(5, r.data(), r.size());
  _exit(0);
}
