// Instantiated for target h200-host (vladbud variants):
// Scalar two-pass softmax per query row in reference order (scores, max, exp, P·V), single-threaded.
#include "vb_variant.h"

#include <cmath>

namespace {
/// One query row: s[j] = sm_scale·(q·k_j) for the n visible keys, m = max s, p_j = exp(s_j − m),
/// o = Σ p_j·v_j / Σ p_j. Scalar loops in index order (vectorization disabled). s: [n] scratch.
__attribute__((optimize("no-tree-vectorize"))) void attend_row(const float* q, const float* K,
                                                               const float* V, vbv::i64 n, vbv::i64 D,
                                                               float scale, float* s, float* o) {
  float m = -__builtin_inff();
  for (vbv::i64 j = 0; j < n; ++j) {
    float a = 0;
#pragma clang loop vectorize(disable) interleave(disable)
    for (vbv::i64 d = 0; d < D; ++d) a += q[d] * K[j * D + d];
    s[j] = a * scale;
    m = s[j] > m ? s[j] : m;
  }
  float l = 0;
  for (vbv::i64 j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    l += s[j];
  }
  for (vbv::i64 d = 0; d < D; ++d) o[d] = 0;
  for (vbv::i64 j = 0; j < n; ++j) {
#pragma clang loop vectorize(disable) interleave(disable)
    for (vbv::i64 d = 0; d < D; ++d) o[d] += s[j] * V[j * D + d];
  }
  const float inv = 1.0f / l;
#pragma clang loop vectorize(disable) interleave(disable)
  for (vbv::i64 d = 0; d < D; ++d) o[d] *= inv;
}

/// Every (batch·head, query) row in order; query i sees keys [0, i] when causal, else all S.
/// Query head h (flattened over batch) reads KV head h / group (group = H/H_kv, GQA).
/// Returns false on allocation failure.
bool attend(const float* Q, const float* K, const float* V, void* o, vbk::Dt dt, vbv::i64 BH,
            vbv::i64 group, vbv::i64 S, vbv::i64 D, bool causal, float scale) {
  vbk::Scratch sbuf(S), obuf(D);
  if (!sbuf.ok() || !obuf.ok()) return false;
  for (vbv::i64 h = 0; h < BH; ++h)
    for (vbv::i64 i = 0; i < S; ++i) {
      const vbv::i64 base = h * S * D, kv = (h / group) * S * D;
      attend_row(Q + base + i * D, K + kv, V + kv, causal ? i + 1 : S, D, scale, sbuf.get(),
                 obuf.get());
      vbk::store_f32(obuf.get(), dt, o, base + i * D, D);
    }
  return true;
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
