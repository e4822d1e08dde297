// Instantiated for target h200-host (vladbud variants): VEC_BYTES=64 (card 64 -> allowed 64); ACC=4 (default (the card has no value));
// Multi-accumulator (ACC x VEC_BYTES/4 lanes, fixed pairwise combine), OpenMP-threaded over rows.
#include "vb_variant.h"

#include <cmath>

// @vb-param VEC_BYTES 64 {16,32,64}  SIMD width the lane arrays are written for (card: vector_width)
#ifndef VEC_BYTES
#define VEC_BYTES 64
#endif
// @vb-param ACC 4 {2,4,8}  independent accumulator vectors per statistic
#ifndef ACC
#define ACC 4
#endif

namespace {
constexpr int L = VEC_BYTES / 4 * ACC;

/// Pairwise combine of the L lanes (fixed order: bitwise deterministic).
inline float combine(float* a) {
  for (int h = L / 2; h > 0; h /= 2)
    for (int j = 0; j < h; ++j) a[j] += a[j + h];
  return a[0];
}

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

/// In place on an fp32 row [D]: Σx, then Σ(x−m) and Σ(x−m)² over L independent lanes (no
/// loop-carried dependency longer than one add per lane), corrected mean, then the affine output.
void ln_row(float* __restrict row, const float* __restrict w, const float* __restrict b, vbv::i64 D,
            float eps) {
  alignas(64) float as[L] = {};
  vbv::i64 i = 0;
  for (; i + L <= D; i += L) {
#pragma omp simd
    for (int j = 0; j < L; ++j) as[j] += row[i + j];
  }
  for (int j = 0; i + j < D; ++j) as[j] += row[i + j];
  const float fn = static_cast<float>(D);
  const float m = combine(as) / fn;
  alignas(64) float ad[L] = {}, aq[L] = {};
  i = 0;
  for (; i + L <= D; i += L) {
#pragma omp simd
    for (int j = 0; j < L; ++j) {
      const float t = row[i + j] - m;
      ad[j] += t;
      aq[j] += t * t;
    }
  }
  for (int j = 0; i + j < D; ++j) {
    const float t = row[i + j] - m;
    ad[j] += t;
    aq[j] += t * t;
  }
  const float d = combine(ad), q = combine(aq);
  if (!std::isfinite(m) || !std::isfinite(q)) return ln_row_double(row, w, b, row, D, eps);
  const float dm = d / fn;
  const float rstd = 1.0f / std::sqrt(std::fmax(q / fn - dm * dm, 0.0f) + eps);
#pragma omp simd
  for (vbv::i64 k = 0; k < D; ++k) row[k] = ((row[k] - m) - dm) * rstd * w[k] + b[k];
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
#pragma omp parallel if (B > 1 && B * D >= (vbv::i64{1} << 15))
  {
    vbk::Scratch buf(D);
    float* row = buf.get();
    if (!row) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
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
