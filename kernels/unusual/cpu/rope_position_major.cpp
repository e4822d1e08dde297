// UNUSUAL but correct: RoPE with the loops turned inside out -- position outermost, so each
// row of the cos/sin tables is converted once and applied to every (batch, head); the output is
// written with a stride of S·D between consecutive writes. Reads the tables as given (any base,
// scaling or position offset). Must pass every stage.
#include "vb_kernel.h"

#include <vector>

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t bh = in[0].shape[0] * in[0].shape[1], s_len = in[0].shape[2],
                     d = in[0].shape[3], half = d / 2;
  const bool inter = attrs[0] != 0.0;
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> c(static_cast<std::size_t>(half)), s(c), x(static_cast<std::size_t>(d)),
      y(x);
  for (std::int64_t pos = 0; pos < s_len; ++pos) {
    vbk::load_f32(vbk::data_ptr(in[1]), dt, pos * half, half, c.data());
    vbk::load_f32(vbk::data_ptr(in[2]), dt, pos * half, half, s.data());
    for (std::int64_t h = bh - 1; h >= 0; --h) {  // heads in reverse, for good measure
      const std::int64_t row = h * s_len + pos;
      vbk::load_f32(vbk::data_ptr(in[0]), dt, row * d, d, x.data());
      for (std::int64_t i = 0; i < half; ++i) {
        const auto a = static_cast<std::size_t>(inter ? 2 * i : i);
        const auto b = static_cast<std::size_t>(inter ? 2 * i + 1 : i + half);
        const auto k = static_cast<std::size_t>(i);
        y[a] = x[a] * c[k] - x[b] * s[k];
        y[b] = x[b] * c[k] + x[a] * s[k];
      }
      vbk::store_f32(y.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), row * d, d);
    }
  }
  return 0;
}
