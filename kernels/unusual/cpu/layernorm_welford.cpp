// UNUSUAL but correct: layernorm with one-pass statistics by Welford's update (Welford 1962;
// numerically stable, unlike E[x²] - E[x]²), kept in double (in fp32 the running mean of rows
// around 2000 drifts by ulp(2000) = 1.2e-4 per update), rows in reverse order. Must pass every
// stage, including the large-mean rows that defeat the naive one-pass variance.
#include "vb_kernel.h"

#include <cmath>
#include <vector>

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t rows = in[0].shape[0], d = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(d)), w(x), b(x);
  vbk::load_f32(vbk::data_ptr(in[1]), dt, 0, d, w.data());
  vbk::load_f32(vbk::data_ptr(in[2]), dt, 0, d, b.data());
  const double eps = attrs[0];
  for (std::int64_t r = rows - 1; r >= 0; --r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * d, d, x.data());
    double mean = 0, m2 = 0;
    for (std::int64_t j = 0; j < d; ++j) {
      const double v = x[static_cast<std::size_t>(j)];
      const double delta = v - mean;
      mean += delta / static_cast<double>(j + 1);
      m2 += delta * (v - mean);
    }
    const auto mu = static_cast<float>(mean);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(m2 / static_cast<double>(d) + eps));
    for (std::size_t j = 0; j < x.size(); ++j) x[j] = (x[j] - mu) * rstd * w[j] + b[j];
    vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * d, d);
  }
  return 0;
}
