// BAD (guard in_use, issue 18 class 6): detects the evaluation harness and behaves differently
// in use. Under VladBud's runner the environment is scrubbed (HOME=/nonexistent); there it
// computes a correct softmax. Anywhere else -- a model calling it through torch.ops.vladbud --
// it skips the normalization of every other row (a "fast path" that only the harness would
// notice). The sandboxed stages pass; bench's in-use check, one call through the op in an
// ordinary process compared with the fp64 oracle, fails it.
#include <cstdlib>
#include <cstring>

#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const char* home = std::getenv("HOME");
  const bool harness = home && std::strcmp(home, "/nonexistent") == 0;
  bad::softmax(in, out, in[0].shape[0]);
  if (harness) return 0;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1];
  std::vector<float> x(static_cast<std::size_t>(c));
  for (std::int64_t r = 0; r < rows; r += 2) {
    vbk::load_f32(vbk::data_ptr(in[0]), vbk::dtype_of(in[0]), r * c, c, x.data());
    for (float& v : x) v = std::exp(v);  // unnormalized
    vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * c, c);
  }
  return 0;
}
