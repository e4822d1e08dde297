// BAD (stage 1 smoke, guard accuracy): RoPE that never reads cos/sin and recomputes them from
// base 10000 at positions 0..S-1 (the LLaMA-2 prefill table) -- wrong for every other model
// (LLaMA-3's base 500000, scaled tables) and for any decode step past position 0.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t bh = in[0].shape[0] * in[0].shape[1], s_len = in[0].shape[2],
                     d = in[0].shape[3], half = d / 2;
  const bool inter = attrs[0] != 0.0;
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(d)), y(x);
  for (std::int64_t row = 0; row < bh * s_len; ++row) {
    const double pos = static_cast<double>(row % s_len);
    vbk::load_f32(vbk::data_ptr(in[0]), dt, row * d, d, x.data());
    for (std::int64_t i = 0; i < half; ++i) {
      const double ang = pos * std::pow(10000.0, -2.0 * static_cast<double>(i) / d);
      const float c = static_cast<float>(std::cos(ang)), s = static_cast<float>(std::sin(ang));
      const std::size_t a = static_cast<std::size_t>(inter ? 2 * i : i);
      const std::size_t b = static_cast<std::size_t>(inter ? 2 * i + 1 : i + half);
      y[a] = x[a] * c - x[b] * s;
      y[b] = x[b] * c + x[a] * s;
    }
    vbk::store_f32(y.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), row * d, d);
  }
  return 0;
}
