// Instantiated for target h200-host (vladbud variants):
// Highway SIMD (static dispatch, FMA, two accumulators per statistic), OpenMP-threaded over rows.
#include "vb_variant.h"

#include <cmath>

// Static dispatch only: the target is fixed by -march/-mcpu.
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>

namespace hn = hwy::HWY_NAMESPACE;

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

/// Highway, in place on an fp32 row [D]: vector Σx (two accumulators), vector Σ(x−m) and
/// Σ(x−m)² (FMA), corrected mean, y = ((x−m) − d/D)·rstd·w + b with MulAdd. Scalar tails.
HWY_ATTR void ln_row(float* HWY_RESTRICT row, const float* HWY_RESTRICT w, const float* HWY_RESTRICT b,
                     vbv::i64 D, float eps) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  vbv::i64 i = 0;
  for (; i + 2 * N <= D; i += 2 * N) {
    s0 = hn::Add(s0, hn::LoadU(d, row + i));
    s1 = hn::Add(s1, hn::LoadU(d, row + i + N));
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < D; ++i) s += row[i];
  const float fn = static_cast<float>(D);
  const float m = s / fn;
  const auto vm = hn::Set(d, m);
  auto d0 = hn::Zero(d), q0 = hn::Zero(d), d1 = hn::Zero(d), q1 = hn::Zero(d);
  i = 0;
  for (; i + 2 * N <= D; i += 2 * N) {
    const auto t0 = hn::Sub(hn::LoadU(d, row + i), vm), t1 = hn::Sub(hn::LoadU(d, row + i + N), vm);
    d0 = hn::Add(d0, t0);
    d1 = hn::Add(d1, t1);
    q0 = hn::MulAdd(t0, t0, q0);
    q1 = hn::MulAdd(t1, t1, q1);
  }
  float dd = hn::GetLane(hn::SumOfLanes(d, hn::Add(d0, d1)));
  float q = hn::GetLane(hn::SumOfLanes(d, hn::Add(q0, q1)));
  for (; i < D; ++i) {
    const float t = row[i] - m;
    dd += t;
    q += t * t;
  }
  if (!std::isfinite(m) || !std::isfinite(q)) return ln_row_double(row, w, b, row, D, eps);
  const float dm = dd / fn;
  const float rstd = 1.0f / std::sqrt(std::fmax(q / fn - dm * dm, 0.0f) + eps);
  const auto vr = hn::Set(d, rstd);
  const auto vmm = hn::Set(d, dm);
  i = 0;
  for (; i + N <= D; i += N) {
    const auto c = hn::Sub(hn::Sub(hn::LoadU(d, row + i), vm), vmm);
    hn::StoreU(hn::MulAdd(hn::Mul(c, vr), hn::LoadU(d, w + i), hn::LoadU(d, b + i)), d, row + i);
  }
  for (; i < D; ++i) row[i] = ((row[i] - m) - dm) * rstd * w[i] + b[i];
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
