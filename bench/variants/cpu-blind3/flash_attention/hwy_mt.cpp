// Instantiated for target h200-host (vladbud variants):
// Highway SIMD (static dispatch: FMA dot products, hn::Exp, vector P·V), OpenMP-threaded over query rows.
#include "vb_variant.h"

#include <cmath>

// Static dispatch only: the target is fixed by -march/-mcpu.
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

namespace hn = hwy::HWY_NAMESPACE;

namespace {
/// q·k over D with two FMA accumulators and a scalar tail.
HWY_ATTR inline float dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, vbv::i64 D) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = hn::Zero(d);
  vbv::i64 i = 0;
  for (; i + 2 * N <= D; i += 2 * N) {
    a0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), a0);
    a1 = hn::MulAdd(hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N), a1);
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
  for (; i < D; ++i) s += a[i] * b[i];
  return s;
}

/// One query row, two passes over its n visible keys: s_j = sm_scale·(q·k_j) (Highway dots),
/// m = max, p = hn::Exp(s − m) and l = Σp (vector), o = Σ p_j·v_j (vector FMA), o /= l.
/// s: [n] scratch, o: [D].
HWY_ATTR void attend_row(const float* HWY_RESTRICT q, const float* HWY_RESTRICT K,
                         const float* HWY_RESTRICT V, vbv::i64 n, vbv::i64 D, float scale,
                         float* HWY_RESTRICT s, float* HWY_RESTRICT o) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  float m = -__builtin_inff();
  for (vbv::i64 j = 0; j < n; ++j) {
    s[j] = dot(q, K + j * D, D) * scale;
    m = s[j] > m ? s[j] : m;
  }
  const auto vm = hn::Set(d, m);
  auto vl = hn::Zero(d);
  vbv::i64 j = 0;
  for (; j + N <= n; j += N) {
    const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, s + j), vm));
    hn::StoreU(e, d, s + j);
    vl = hn::Add(vl, e);
  }
  float l = hn::GetLane(hn::SumOfLanes(d, vl));
  for (; j < n; ++j) {
    s[j] = vbk::exp_f32(s[j] - m);
    l += s[j];
  }
  vbv::i64 i = 0;
  for (; i + N <= D; i += N) hn::StoreU(hn::Zero(d), d, o + i);
  for (; i < D; ++i) o[i] = 0;
  for (j = 0; j < n; ++j) {
    const auto p = hn::Set(d, s[j]);
    const float* HWY_RESTRICT v = V + j * D;
    for (i = 0; i + N <= D; i += N) hn::StoreU(hn::MulAdd(p, hn::LoadU(d, v + i), hn::LoadU(d, o + i)), d, o + i);
    for (; i < D; ++i) o[i] += s[j] * v[i];
  }
  const auto inv = hn::Set(d, 1.0f / l);
  for (i = 0; i + N <= D; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, o + i), inv), d, o + i);
  for (; i < D; ++i) o[i] *= 1.0f / l;
}

/// Every (batch·head, query) row, round-robin over the threads; query head h (flattened over
/// batch) reads KV head h / group (group = H/H_kv, GQA). Returns false on allocation failure.
bool attend(const float* Q, const float* K, const float* V, void* out, vbk::Dt dt, vbv::i64 BH,
            vbv::i64 group, vbv::i64 S, vbv::i64 D, bool causal, float scale) {
  bool oom = false;
  const vbv::i64 rows = BH * S;
#pragma omp parallel if (rows > 1 && rows * S * D >= (vbv::i64{1} << 18))
  {
    vbk::Scratch sbuf(S), obuf(D);
    if (!sbuf.ok() || !obuf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static, 1)
    for (vbv::i64 r = 0; r < rows; ++r) {
      if (!sbuf.ok() || !obuf.ok()) continue;
      const vbv::i64 h = r / S, i = r % S, kv = (h / group) * S * D;
      attend_row(Q + r * D, K + kv, V + kv, causal ? i + 1 : S, D, scale, sbuf.get(), obuf.get());
      vbk::store_f32(obuf.get(), dt, out, r * D, D);
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
