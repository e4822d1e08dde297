// Instantiated for target h200-host (vladbud variants):
// Scalar two-pass in row order (corrected mean, double fallback), single-threaded, no vectorization.
#include "vb_variant.h"

#include <cmath>

namespace {
/// Whole row in double: the fallback when an fp32 statistic is not finite (values near the dtype's
/// max; inf/NaN inputs propagate as in the fp64 oracle). y may be x.
void ln_row_double(const float* x, const float* w, const float* b, float* y, vbv::i64 D, float eps) {
  double s = 0;
  for (vbv::i64 i = 0; i < D; ++i) s += x[i];
  const double mean = s / static_cast<double>(D);
  double q = 0;
  for (vbv::i64 i = 0; i < D; ++i) q += (x[i] - mean) * (x[i] - mean);
  const double rstd = 1.0 / std::sqrt(q / static_cast<double>(D) + eps);
  for (vbv::i64 i = 0; i < D; ++i) y[i] = static_cast<float>((x[i] - mean) * rstd * w[i] + b[i]);
}

/// In place on an fp32 row [D]: m = Σx/D; d = Σ(x−m), q = Σ(x−m)² (one element at a time, in
/// index order); mean = m + d/D, var = q/D − (d/D)²; y = ((x−m) − d/D)·rstd·w + b. The residual
/// d/D corrects m's rounding, so all-equal rows give exactly b.
__attribute__((optimize("no-tree-vectorize"))) void ln_row(float* row, const float* w, const float* b,
                                                           vbv::i64 D, float eps) {
  float s = 0;
#pragma clang loop vectorize(disable) interleave(disable)
  for (vbv::i64 i = 0; i < D; ++i) s += row[i];
  const float fn = static_cast<float>(D);
  const float m = s / fn;
  float d = 0, q = 0;
#pragma clang loop vectorize(disable) interleave(disable)
  for (vbv::i64 i = 0; i < D; ++i) {
    const float t = row[i] - m;
    d += t;
    q += t * t;
  }
  if (!std::isfinite(m) || !std::isfinite(q)) return ln_row_double(row, w, b, row, D, eps);
  const float dm = d / fn;
  const float var = std::fmax(q / fn - dm * dm, 0.0f);
  const float rstd = 1.0f / std::sqrt(var + eps);
#pragma clang loop vectorize(disable) interleave(disable)
  for (vbv::i64 i = 0; i < D; ++i) row[i] = ((row[i] - m) - dm) * rstd * w[i] + b[i];
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 2) return vbk::fail("x: expected 2 dimensions [B,D], got %d", in[0].ndim);
  const vbv::i64 B = in[0].shape[0], D = in[0].shape[1];
  if (int e = vbk::check_shape(in[0], "x", {B, D})) return e;
  if (int e = vbk::check_shape(in[1], "weight", {D})) return e;
  if (int e = vbk::check_shape(in[2], "bias", {D})) return e;
  if (int e = vbk::check_shape(out[0], "y", {B, D})) return e;
  const float eps = static_cast<float>(attrs[0]);
  if (!(eps >= 0.0f)) return vbk::fail("eps must be >= 0 (got %g)", attrs[0]);
  if (B == 0 || D == 0) return 0;
  const auto dt = vbk::dtype_of(in[0]);
  vbk::Scratch wbuf, bbuf, rbuf(D);
  const float* w = vbv::as_f32(in[1], wbuf);
  const float* b = vbv::as_f32(in[2], bbuf);
  float* row = rbuf.get();
  if (!w || !b || !row) return vbk::fail("out of memory (weight/bias/row scratch)");
  for (vbv::i64 r = 0; r < B; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * D, D, row);
    ln_row(row, w, b, D, eps);
    vbk::store_f32(row, dt, vbk::data_ptr(out[0]), r * D, D);
  }
  return 0;
}
