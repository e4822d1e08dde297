// BAD (stage 4 determinism): an accurate row sum (64 strided partial sums) whose partials are
// combined forward on one call and backward on the next, so identical inputs give different
// low-order bits.
#include "bad_common.h"

static int calls = 0;

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  const std::int64_t rows = in[0].shape[0], n = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(n));
  const bool backward = (calls++ % 2) == 1;
  constexpr int kParts = 64;
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, x.data());
    float part[kParts] = {0};
    for (std::int64_t j = 0; j < n; ++j) part[j % kParts] += x[static_cast<std::size_t>(j)];
    float s = 0;
    if (backward)
      for (int p = kParts - 1; p >= 0; --p) s += part[p];
    else
      for (int p = 0; p < kParts; ++p) s += part[p];
    vbk::store_f32(&s, vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r, 1);
  }
  return 0;
}
