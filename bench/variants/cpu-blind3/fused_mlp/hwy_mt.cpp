// Instantiated for target h200-host (vladbud variants):
// Highway SIMD (static dispatch: 2-token x gate/up FMA accumulators), OpenMP-threaded over hidden units, then outputs.
#include "vb_variant.h"

#include <cmath>

// Static dispatch only: the target is fixed by -march/-mcpu.
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>

namespace hn = hwy::HWY_NAMESPACE;

namespace {
/// Dot products of nt (1 or 2) rows a_t (stride lda) with w and, when w2 is not null, with w2:
/// out[t] = a_t·w, out2[t] = a_t·w2. One vector FMA accumulator per (row, weight), scalar tail.
HWY_ATTR void dots(const float* HWY_RESTRICT a, vbv::i64 lda, int nt, const float* HWY_RESTRICT w,
                   const float* HWY_RESTRICT w2, vbv::i64 n, float* out, float* out2) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  const float* a1 = a + (nt > 1 ? lda : 0);
  auto c00 = hn::Zero(d), c01 = hn::Zero(d), c10 = hn::Zero(d), c11 = hn::Zero(d);
  vbv::i64 i = 0;
  for (; i + N <= n; i += N) {
    const auto x0 = hn::LoadU(d, a + i), x1 = hn::LoadU(d, a1 + i), vw = hn::LoadU(d, w + i);
    c00 = hn::MulAdd(x0, vw, c00);
    c10 = hn::MulAdd(x1, vw, c10);
    if (w2) {
      const auto vw2 = hn::LoadU(d, w2 + i);
      c01 = hn::MulAdd(x0, vw2, c01);
      c11 = hn::MulAdd(x1, vw2, c11);
    }
  }
  float s00 = hn::GetLane(hn::SumOfLanes(d, c00)), s10 = hn::GetLane(hn::SumOfLanes(d, c10));
  float s01 = hn::GetLane(hn::SumOfLanes(d, c01)), s11 = hn::GetLane(hn::SumOfLanes(d, c11));
  for (; i < n; ++i) {
    s00 += a[i] * w[i], s10 += a1[i] * w[i];
    if (w2) s01 += a[i] * w2[i], s11 += a1[i] * w2[i];
  }
  out[0] = s00;
  if (nt > 1) out[1] = s10;
  if (w2) {
    out2[0] = s01;
    if (nt > 1) out2[1] = s11;
  }
}

/// Phase 1, threads over hidden units j: for token pairs, gate and up together (4 accumulators,
/// w_gate and w_up rows loaded once per pair), h = silu(g)·u. Phase 2, threads over outputs d:
/// y[b,d] = h_b·wd_d for token pairs. fp32 throughout; h: [B,H], y: [B,D].
void mlp(const float* X, const float* Wg, const float* Wu, const float* Wd, float* h, float* y,
         vbv::i64 B, vbv::i64 D, vbv::i64 H) {
  const bool par = B * D * H >= (vbv::i64{1} << 18);
#pragma omp parallel for schedule(static) if (par)
  for (vbv::i64 j = 0; j < H; ++j)
    for (vbv::i64 b = 0; b < B; b += 2) {
      const int nt = B - b >= 2 ? 2 : 1;
      float g[2], u[2];
      dots(X + b * D, D, nt, Wg + j * D, Wu + j * D, D, g, u);
      for (int t = 0; t < nt; ++t) h[(b + t) * H + j] = g[t] / (1.0f + std::exp(-g[t])) * u[t];
    }
#pragma omp parallel for schedule(static) if (par)
  for (vbv::i64 d = 0; d < D; ++d)
    for (vbv::i64 b = 0; b < B; b += 2) {
      const int nt = B - b >= 2 ? 2 : 1;
      float r[2];
      dots(h + b * H, H, nt, Wd + d * H, nullptr, H, r, nullptr);
      for (int t = 0; t < nt; ++t) y[(b + t) * D + d] = r[t];
    }
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  (void)attrs;
  vbv::MlpArgs a;
  if (int e = vbv::check_mlp(in, n_in, out, n_out, n_attrs, a)) return e;
  const vbv::i64 B = a.B, D = a.D, H = a.H;
  if (B == 0 || D == 0) return 0;
  const auto dt = a.dt;
  vbk::Scratch sx, sg, su, sd, hbuf(B * H), ybuf(B * D);
  const float* X = vbv::as_f32(in[0], sx);
  const float* Wg = vbv::as_f32(in[1], sg);
  const float* Wu = vbv::as_f32(in[2], su);
  const float* Wd = vbv::as_f32(in[3], sd);
  if (!X || !Wg || !Wu || !Wd || !hbuf.ok() || !ybuf.ok())
    return vbk::fail("out of memory (fp32 operands / hidden activations)");
  mlp(X, Wg, Wu, Wd, hbuf.get(), ybuf.get(), B, D, H);
  vbk::store_f32(ybuf.get(), dt, vbk::data_ptr(out[0]), 0, B * D);
  return 0;
}
