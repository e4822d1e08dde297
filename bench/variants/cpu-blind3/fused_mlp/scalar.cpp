// Instantiated for target h200-host (vladbud variants):
// Scalar reference order: per token, gate/up dot products, silu(g)·u, then the down dot products; single-threaded.
#include "vb_variant.h"

#include <cmath>

namespace {
/// y[B,D] = (silu(X·Wgᵀ) ⊙ (X·Wuᵀ))·Wdᵀ in fp32, every dot product one scalar accumulator in
/// index order (vectorization disabled). h: [B,H] fp32 hidden activations (never rounded to the
/// storage dtype). silu(g) = g / (1 + exp(−g)) gives −0 for g ≲ −89 (exp overflows to inf).
__attribute__((optimize("no-tree-vectorize"))) void mlp(const float* X, const float* Wg, const float* Wu,
                                                        const float* Wd, float* h, float* y, vbv::i64 B,
                                                        vbv::i64 D, vbv::i64 H) {
  for (vbv::i64 b = 0; b < B; ++b) {
    const float* xb = X + b * D;
    for (vbv::i64 j = 0; j < H; ++j) {
      float g = 0, u = 0;
#pragma clang loop vectorize(disable) interleave(disable)
      for (vbv::i64 k = 0; k < D; ++k) {
        g += xb[k] * Wg[j * D + k];
        u += xb[k] * Wu[j * D + k];
      }
      h[b * H + j] = g / (1.0f + std::exp(-g)) * u;
    }
  }
  for (vbv::i64 b = 0; b < B; ++b)
    for (vbv::i64 d = 0; d < D; ++d) {
      float a = 0;
#pragma clang loop vectorize(disable) interleave(disable)
      for (vbv::i64 j = 0; j < H; ++j) a += h[b * H + j] * Wd[d * H + j];
      y[b * D + d] = a;
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
