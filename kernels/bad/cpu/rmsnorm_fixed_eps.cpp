// BAD (stage 3 stability, guard accuracy): correct rmsnorm except that eps is LLaMA-1's 1e-6
// written into the code instead of attrs[0] -- wrong for LLaMA-2's 1e-5 where mean(x²) is
// comparable to eps.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t rows = in[0].shape[0], n = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(n)), w(x);
  vbk::load_f32(vbk::data_ptr(in[1]), dt, 0, n, w.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, x.data());
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    for (std::size_t j = 0; j < x.size(); ++j) x[j] = static_cast<float>(x[j] * inv * w[j]);
    vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * n, n);
  }
  return 0;
}
