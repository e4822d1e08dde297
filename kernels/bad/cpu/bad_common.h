// Shared pieces of the deliberately bad kernels (test fixtures for the evaluator's guards).
// Each bad kernel is a correct simple kernel except for ONE defect that a named guard or stage
// must catch. Kept scalar and short on purpose: they exist to be rejected, not to be fast.
#pragma once

#include "vb_kernel.h"

#include <cmath>
#include <vector>

namespace bad {

/// Correct softmax of one row of length c from src (fp32) into dst (fp32).
inline void softmax_row(const float* src, float* dst, std::int64_t c) {
  float m = -INFINITY;
  for (std::int64_t j = 0; j < c; ++j) m = std::fmax(m, src[j]);
  float s = 0;
  for (std::int64_t j = 0; j < c; ++j) s += (dst[j] = std::exp(src[j] - m));
  for (std::int64_t j = 0; j < c; ++j) dst[j] /= s;
}

/// Correct softmax over x[R,C] -> y[R,C] for any float dtype, rows [0, rows).
inline int softmax(const DLTensor* in, DLTensor* out, std::int64_t rows) {
  const std::int64_t c = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> a(static_cast<std::size_t>(c)), b(static_cast<std::size_t>(c));
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * c, c, a.data());
    softmax_row(a.data(), b.data(), c);
    vbk::store_f32(b.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * c, c);
  }
  return 0;
}

/// Checks softmax's arguments; returns 0 or a vbk::fail code.
inline int softmax_args(const DLTensor* in, int n_in, DLTensor* out, int n_out, int n_attrs) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (in[0].ndim != 2) return vbk::fail("softmax expects x[R,C]");
  return 0;
}

}  // namespace bad
