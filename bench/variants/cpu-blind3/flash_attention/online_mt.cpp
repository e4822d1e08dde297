// Instantiated for target h200-host (vladbud variants):
// Single-pass online softmax per query row (running max and sum, omp simd), OpenMP-threaded over rows.
#include "vb_variant.h"

#include <cmath>

namespace {
/// One query row in one pass over its n visible keys: a = sm_scale·(q·k_j) (omp simd reduction);
/// when a exceeds the running max m the running sum l and accumulator o are rescaled by
/// exp(m − a); then l += exp(a − m), o += exp(a − m)·v_j (omp simd). Finally o /= l.
void attend_row(const float* __restrict q, const float* __restrict K, const float* __restrict V,
                vbv::i64 n, vbv::i64 D, float scale, float* __restrict o) {
  float m = -__builtin_inff(), l = 0;
#pragma omp simd
  for (vbv::i64 d = 0; d < D; ++d) o[d] = 0;
  for (vbv::i64 j = 0; j < n; ++j) {
    const float* __restrict k = K + j * D;
    const float* __restrict v = V + j * D;
    float a = 0;
#pragma omp simd reduction(+ : a)
    for (vbv::i64 d = 0; d < D; ++d) a += q[d] * k[d];
    a *= scale;
    if (a > m) {
      const float alpha = std::exp(m - a);  // 0 for the first key (m = -inf)
      l *= alpha;
#pragma omp simd
      for (vbv::i64 d = 0; d < D; ++d) o[d] *= alpha;
      m = a;
    }
    const float p = std::exp(a - m);
    l += p;
#pragma omp simd
    for (vbv::i64 d = 0; d < D; ++d) o[d] += p * v[d];
  }
  const float inv = 1.0f / l;
#pragma omp simd
  for (vbv::i64 d = 0; d < D; ++d) o[d] *= inv;
}

/// Every (batch·head, query) row, round-robin over the threads (balances the causal triangle).
/// Query head h (flattened over batch) reads KV head h / group (group = H/H_kv, GQA).
/// Returns false on allocation failure.
bool attend(const float* Q, const float* K, const float* V, void* o, vbk::Dt dt, vbv::i64 BH,
            vbv::i64 group, vbv::i64 S, vbv::i64 D, bool causal, float scale) {
  bool oom = false;
  const vbv::i64 rows = BH * S;
#pragma omp parallel if (rows > 1 && rows * S * D >= (vbv::i64{1} << 18))
  {
    vbk::Scratch obuf(D);
    if (!obuf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static, 1)
    for (vbv::i64 r = 0; r < rows; ++r) {
      if (!obuf.ok()) continue;
      const vbv::i64 h = r / S, i = r % S, kv = (h / group) * S * D;
      attend_row(Q + r * D, K + kv, V + kv, causal ? i + 1 : S, D, scale, obuf.get());
      vbk::store_f32(obuf.get(), dt, o, r * D, D);
    }
  }
  return !oom;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  vbv::AttentionArgs a;
  if (int e = vbv::check_attention(in, n_in, out, n_out, attrs, n_attrs, a)) return e;
  const vbv::i64 B = a.B, H = a.H, S = a.S, D = a.D;
  const bool causal = a.causal;
  const float scale = a.scale;
  if (B * H * S == 0 || D == 0) return 0;
  const auto dt = a.dt;
  vbk::Scratch sq, sk, sv;
  const float* Q = vbv::as_f32(in[0], sq);
  const float* K = vbv::as_f32(in[1], sk);
  const float* V = vbv::as_f32(in[2], sv);
  if (!Q || !K || !V) return vbk::fail("out of memory (fp32 q/k/v)");
  if (!attend(Q, K, V, vbk::data_ptr(out[0]), dt, B * H, a.group(), S, D, causal, scale)) return vbk::fail("out of memory (per-thread scratch)");
  return 0;
}
