// BAD (stage 4 determinism): an accurate row sum that, on rows of 65536 elements or more, adds
// its 64 partial sums in an order drawn from the clock on every call (as an atomic split-row
// reduction would) -- deterministic on the first shape-sweep size, not on the long-row one.
#include "bad_common.h"

#include <algorithm>
#include <chrono>
#include <random>

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  const std::int64_t rows = in[0].shape[0], n = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(n));
  constexpr int kParts = 64;
  int order[kParts];
  for (int p = 0; p < kParts; ++p) order[p] = p;
  std::mt19937_64 rng(static_cast<std::uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count()));
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, x.data());
    float part[kParts] = {0};
    for (std::int64_t j = 0; j < n; ++j) part[j % kParts] += x[static_cast<std::size_t>(j)];
    if (n >= 65536) std::shuffle(order, order + kParts, rng);
    float s = 0;
    for (int p = 0; p < kParts; ++p) s += part[order[p]];
    vbk::store_f32(&s, vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r, 1);
  }
  return 0;
}
