// UNUSUAL but correct: softmax that walks each row in chunks of 7 elements (an odd "vector
// width" no tail test was written for) with a scalar remainder, keeping 7 running maxima and
// 7 partial sums in fp32. Every tail length must be accepted. Must pass every stage.
#include "vb_kernel.h"

#include <cmath>
#include <vector>

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1], c7 = c / 7 * 7;
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(c));
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * c, c, x.data());
    float m7[7] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (std::int64_t j = 0; j < c7; j += 7)
      for (int l = 0; l < 7; ++l) m7[l] = std::fmax(m7[l], x[static_cast<std::size_t>(j + l)]);
    float m = -INFINITY;
    for (float v : m7) m = std::fmax(m, v);
    for (std::int64_t j = c7; j < c; ++j) m = std::fmax(m, x[static_cast<std::size_t>(j)]);
    float s7[7] = {0, 0, 0, 0, 0, 0, 0};
    for (std::int64_t j = 0; j < c7; j += 7)
      for (int l = 0; l < 7; ++l) {
        float& v = x[static_cast<std::size_t>(j + l)];
        v = std::exp(v - m);
        s7[l] += v;
      }
    float s = 0;
    for (float v : s7) s += v;
    for (std::int64_t j = c7; j < c; ++j) {
      float& v = x[static_cast<std::size_t>(j)];
      v = std::exp(v - m);
      s += v;
    }
    const float inv = 1.0f / s;
    for (float& v : x) v *= inv;
    vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * c, c);
  }
  return 0;
}
