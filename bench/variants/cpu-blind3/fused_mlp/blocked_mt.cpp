// Instantiated for target h200-host (vladbud variants): L2_BYTES=2097152 (card 2097152 -> allowed 2097152);
// Blocked gate/up GEMM (hidden-unit blocks sized from the card's L2, 4-token register tiles), OpenMP-threaded over blocks.
#include "vb_variant.h"

#include <algorithm>
#include <cmath>

// @vb-param L2_BYTES 2097152 {524288,1048576,2097152}  L2 per core (card: caches)
#ifndef L2_BYTES
#define L2_BYTES 2097152
#endif

namespace {
constexpr int TB = 4;  // tokens per register tile

/// silu(g)·u = g / (1 + exp(−g))·u (−0 when exp(−g) overflows).
inline float swiglu(float g, float u) { return g / (1.0f + std::exp(-g)) * u; }

/// Gate and up for TB tokens and one hidden unit at once: 2·TB accumulators over k (omp simd), so
/// each loaded weight element feeds TB FMAs. x: TB token rows (stride D).
inline void gate_up_tile(const float* __restrict x, const float* __restrict wg, const float* __restrict wu,
                         vbv::i64 D, float* __restrict g, float* __restrict u) {
  float g0 = 0, g1 = 0, g2 = 0, g3 = 0, u0 = 0, u1 = 0, u2 = 0, u3 = 0;
  const float *x0 = x, *x1 = x + D, *x2 = x + 2 * D, *x3 = x + 3 * D;
#pragma omp simd reduction(+ : g0, g1, g2, g3, u0, u1, u2, u3)
  for (vbv::i64 k = 0; k < D; ++k) {
    const float a = wg[k], c = wu[k];
    g0 += x0[k] * a, g1 += x1[k] * a, g2 += x2[k] * a, g3 += x3[k] * a;
    u0 += x0[k] * c, u1 += x1[k] * c, u2 += x2[k] * c, u3 += x3[k] * c;
  }
  g[0] = g0, g[1] = g1, g[2] = g2, g[3] = g3;
  u[0] = u0, u[1] = u1, u[2] = u2, u[3] = u3;
}

/// TB dot products h_b·w for one down-projection row w (4 accumulators, omp simd).
inline void down_tile(const float* __restrict h, const float* __restrict w, vbv::i64 H, float* __restrict y,
                      vbv::i64 ldy) {
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  const float *h0 = h, *h1 = h + H, *h2 = h + 2 * H, *h3 = h + 3 * H;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
  for (vbv::i64 j = 0; j < H; ++j) a0 += h0[j] * w[j], a1 += h1[j] * w[j], a2 += h2[j] * w[j], a3 += h3[j] * w[j];
  y[0] = a0, y[ldy] = a1, y[2 * ldy] = a2, y[3 * ldy] = a3;
}

/// a·b over n (omp simd reduction), for the token tail.
inline float dot(const float* __restrict a, const float* __restrict b, vbv::i64 n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (vbv::i64 i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// Phase 1: blocks of JB hidden units whose gate and up rows (2·JB·D·4 bytes) fill half of L2
/// are split over the threads; within a block every TB-token tile of X streams past the cached
/// weight rows (gate_up_tile), then h = silu(g)·u. Phase 2: blocks of DB rows of w_down, TB-token
/// tiles again (down_tile). h: [B,H] fp32, y: [B,D]. Fixed accumulation orders (deterministic).
void mlp(const float* X, const float* Wg, const float* Wu, const float* Wd, float* h, float* y,
         vbv::i64 B, vbv::i64 D, vbv::i64 H) {
  const vbv::i64 JB = std::clamp<vbv::i64>(L2_BYTES / (16 * std::max<vbv::i64>(D, 1)), 4, 512);
  const vbv::i64 DB = std::clamp<vbv::i64>(L2_BYTES / (8 * std::max<vbv::i64>(H, 1)), 4, 512);
  const vbv::i64 BT = B / TB * TB;
  const bool par = B * D * H >= (vbv::i64{1} << 18);
#pragma omp parallel for schedule(static) if (par)
  for (vbv::i64 j0 = 0; j0 < H; j0 += JB) {
    const vbv::i64 j1 = std::min(H, j0 + JB);
    float g[TB], u[TB];
    for (vbv::i64 b0 = 0; b0 < BT; b0 += TB)
      for (vbv::i64 j = j0; j < j1; ++j) {
        gate_up_tile(X + b0 * D, Wg + j * D, Wu + j * D, D, g, u);
        for (int t = 0; t < TB; ++t) h[(b0 + t) * H + j] = swiglu(g[t], u[t]);
      }
    for (vbv::i64 b = BT; b < B; ++b)
      for (vbv::i64 j = j0; j < j1; ++j)
        h[b * H + j] = swiglu(dot(X + b * D, Wg + j * D, D), dot(X + b * D, Wu + j * D, D));
  }
#pragma omp parallel for schedule(static) if (par)
  for (vbv::i64 d0 = 0; d0 < D; d0 += DB) {
    const vbv::i64 d1 = std::min(D, d0 + DB);
    for (vbv::i64 b0 = 0; b0 < BT; b0 += TB)
      for (vbv::i64 d = d0; d < d1; ++d) down_tile(h + b0 * H, Wd + d * H, H, y + b0 * D + d, D);
    for (vbv::i64 b = BT; b < B; ++b)
      for (vbv::i64 d = d0; d < d1; ++d) y[b * D + d] = dot(h + b * H, Wd + d * H, H);
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
