// Instantiated for target h200-host (vladbud variants):
// Compiler-vectorized two-pass (omp simd reductions, corrected mean), single-threaded.
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

/// In place on an fp32 row [D]: m = Σx/D, then d = Σ(x−m), q = Σ(x−m)² (omp simd reductions);
/// mean = m + d/D, var = q/D − (d/D)²; y = ((x−m) − d/D)·rstd·w + b (omp simd).
void ln_row(float* __restrict row, const float* __restrict w, const float* __restrict b, vbv::i64 D,
            float eps) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (vbv::i64 i = 0; i < D; ++i) s += row[i];
  const float fn = static_cast<float>(D);
  const float m = s / fn;
  float d = 0, q = 0;
#pragma omp simd reduction(+ : d, q)
  for (vbv::i64 i = 0; i < D; ++i) {
    const float t = row[i] - m;
    d += t;
    q += t * t;
  }
  if (!std::isfinite(m) || !std::isfinite(q)) return ln_row_double(row, w, b, row, D, eps);
  const float dm = d / fn;
  const float rstd = 1.0f / std::sqrt(std::fmax(q / fn - dm * dm, 0.0f) + eps);
#pragma omp simd
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
  const void* x = vbk::data_ptr(in[0]);
  void* y = vbk::data_ptr(out[0]);
  vbk::Scratch wbuf, bbuf;
  const float* w = vbv::as_f32(in[1], wbuf);
  const float* b = vbv::as_f32(in[2], bbuf);
  if (!w || !b) return vbk::fail("out of memory (weight/bias)");
  bool oom = false;
  {
    vbk::Scratch buf(D);
    float* row = buf.get();
    if (!row) {
#pragma omp atomic write
      oom = true;
    }
    for (vbv::i64 r = 0; r < B; ++r) {
      if (!row) continue;
      vbk::load_f32(x, dt, r * D, D, row);
      ln_row(row, w, b, D, eps);
      vbk::store_f32(row, dt, y, r * D, D);
    }
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
