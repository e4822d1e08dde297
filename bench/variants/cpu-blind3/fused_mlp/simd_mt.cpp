// Instantiated for target h200-host (vladbud variants):
// Compiler-vectorized dot products (omp simd reductions), OpenMP-threaded over hidden units, then over outputs.
#include "vb_variant.h"

#include <cmath>

namespace {
/// a·b over n (omp simd reduction).
inline float dot(const float* __restrict a, const float* __restrict b, vbv::i64 n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (vbv::i64 i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// Phase 1, threads over hidden units j (each weight row read once, reused by every token):
/// h[b,j] = silu(x_b·wg_j)·(x_b·wu_j). Phase 2, threads over outputs d: y[b,d] = h_b·wd_d.
/// All in fp32; h: [B,H], y: [B,D]. Each output has one fixed accumulation order (deterministic).
void mlp(const float* X, const float* Wg, const float* Wu, const float* Wd, float* h, float* y,
         vbv::i64 B, vbv::i64 D, vbv::i64 H) {
  const bool par = B * D * H >= (vbv::i64{1} << 18);
#pragma omp parallel for schedule(static) if (par)
  for (vbv::i64 j = 0; j < H; ++j)
    for (vbv::i64 b = 0; b < B; ++b) {
      const float g = dot(X + b * D, Wg + j * D, D), u = dot(X + b * D, Wu + j * D, D);
      h[b * H + j] = g / (1.0f + std::exp(-g)) * u;
    }
#pragma omp parallel for schedule(static) if (par)
  for (vbv::i64 d = 0; d < D; ++d)
    for (vbv::i64 b = 0; b < B; ++b) y[b * D + d] = dot(h + b * H, Wd + d * H, H);
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
