// BAD (stage 3 stability, guard accuracy): layernorm with the one-pass fp32 variance
// E[x^2] - E[x]^2, which cancels catastrophically on rows 2000 + N(0,1).
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t rows = in[0].shape[0], d = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(d)), w(static_cast<std::size_t>(d)),
      b(static_cast<std::size_t>(d));
  vbk::load_f32(vbk::data_ptr(in[1]), dt, 0, d, w.data());
  vbk::load_f32(vbk::data_ptr(in[2]), dt, 0, d, b.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * d, d, x.data());
    float s = 0, s2 = 0;
    for (float v : x) s += v, s2 += v * v;
    const float mean = s / static_cast<float>(d);
    const float var = std::fmax(s2 / static_cast<float>(d) - mean * mean, 0.0f);
    const float inv = 1.0f / std::sqrt(var + static_cast<float>(attrs[0]));
    for (std::int64_t j = 0; j < d; ++j) {
      const auto k = static_cast<std::size_t>(j);
      x[k] = (x[k] - mean) * inv * w[k] + b[k];
    }
    vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * d, d);
  }
  return 0;
}
