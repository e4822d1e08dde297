// Instantiated for target h200-host (vladbud variants): L1D_BYTES=49152 (card 49152 -> allowed 49152); L2_BYTES=2097152 (card 2097152 -> allowed 2097152);
// KV-block tiling with online softmax (block sizes from the card's L1D and L2), OpenMP-threaded over query blocks.
#include "vb_variant.h"

#include <algorithm>
#include <cmath>

// @vb-param L1D_BYTES 49152 {32768,49152,65536,131072}  L1 data cache per core (card: caches)
#ifndef L1D_BYTES
#define L1D_BYTES 49152
#endif
// @vb-param L2_BYTES 2097152 {524288,1048576,2097152}  L2 per core (card: caches)
#ifndef L2_BYTES
#define L2_BYTES 2097152
#endif

namespace {
/// Keys per block: the fp32 K and V tiles (2·BK·D·4 bytes) fill at most half of L2, 16..256.
vbv::i64 key_block(vbv::i64 D) {
  const vbv::i64 bk = L2_BYTES / (16 * D) / 16 * 16;
  return std::clamp<vbv::i64>(bk, 16, 256);
}
/// Queries per block: the O rows and score rows (4·BQ·(D + BK) bytes) fit in L1D, 4..64.
vbv::i64 query_block(vbv::i64 D, vbv::i64 BK) {
  return std::clamp<vbv::i64>(L1D_BYTES / (4 * (D + BK)), 4, 64);
}

/// One (head, query block) item: for each block of BK keys (up to the diagonal when causal), per
/// query row: scores against the block (omp simd dots), m' = max(m, block max), α = exp(m − m'),
/// p = exp(s − m'), l = α·l + Σp, o = α·o + Σ p_j·v_j; finally o / l, rounded once into `out`.
/// The K/V block is reused by all BQ rows while it is in cache. base / kv_base: element offsets of
/// the query head in Q and out / of its KV head in K and V. o: [BQ·D], s: [BQ·BK], ml: [2·BQ]
/// scratch.
void attend_block(const float* __restrict Q, const float* __restrict K, const float* __restrict V,
                  void* out, vbk::Dt dt, vbv::i64 base, vbv::i64 kv_base, vbv::i64 q0, vbv::i64 nq, vbv::i64 S,
                  vbv::i64 D, vbv::i64 BK, bool causal, float scale, float* __restrict o,
                  float* __restrict s, float* __restrict ml) {
  float* m = ml;
  float* l = ml + nq;
  for (vbv::i64 i = 0; i < nq; ++i) m[i] = -__builtin_inff(), l[i] = 0;
  std::fill(o, o + nq * D, 0.0f);
  const vbv::i64 kv_end = causal ? q0 + nq : S;
  for (vbv::i64 k0 = 0; k0 < kv_end; k0 += BK) {
    const vbv::i64 nk = std::min(BK, kv_end - k0);
    const float* __restrict Kb = K + kv_base + k0 * D;
    const float* __restrict Vb = V + kv_base + k0 * D;
    for (vbv::i64 i = 0; i < nq; ++i) {
      const vbv::i64 lim = causal ? std::min(nk, q0 + i - k0 + 1) : nk;  // visible keys [0, lim)
      if (lim <= 0) continue;
      const float* __restrict q = Q + base + (q0 + i) * D;
      float* __restrict si = s + i * BK;
      float mx = -__builtin_inff();
      for (vbv::i64 j = 0; j < lim; ++j) {
        float a = 0;
#pragma omp simd reduction(+ : a)
        for (vbv::i64 d = 0; d < D; ++d) a += q[d] * Kb[j * D + d];
        si[j] = a * scale;
        mx = si[j] > mx ? si[j] : mx;
      }
      const float mnew = mx > m[i] ? mx : m[i];
      const float alpha = std::exp(m[i] - mnew);  // 0 on the first visible block
      float ps = 0;
#pragma omp simd reduction(+ : ps)
      for (vbv::i64 j = 0; j < lim; ++j) {
        si[j] = vbk::exp_f32(si[j] - mnew);
        ps += si[j];
      }
      l[i] = l[i] * alpha + ps;
      m[i] = mnew;
      float* __restrict oi = o + i * D;
#pragma omp simd
      for (vbv::i64 d = 0; d < D; ++d) oi[d] *= alpha;
      for (vbv::i64 j = 0; j < lim; ++j) {
        const float p = si[j];
#pragma omp simd
        for (vbv::i64 d = 0; d < D; ++d) oi[d] += p * Vb[j * D + d];
      }
    }
  }
  for (vbv::i64 i = 0; i < nq; ++i) {
    float* oi = o + i * D;
    const float inv = 1.0f / l[i];
#pragma omp simd
    for (vbv::i64 d = 0; d < D; ++d) oi[d] *= inv;
    vbk::store_f32(oi, dt, out, base + (q0 + i) * D, D);
  }
}

/// All (head, query block) items, round-robin over the threads; query head h (flattened over
/// batch) reads KV head h / group (group = H/H_kv, GQA). Returns false on allocation failure.
bool attend(const float* Q, const float* K, const float* V, void* out, vbk::Dt dt, vbv::i64 BH,
            vbv::i64 group, vbv::i64 S, vbv::i64 D, bool causal, float scale) {
  const vbv::i64 BK = key_block(D), BQ = query_block(D, BK);
  const vbv::i64 qblocks = (S + BQ - 1) / BQ, items = BH * qblocks;
  bool oom = false;
#pragma omp parallel if (items > 1 && BH * S * S * D >= (vbv::i64{1} << 18))
  {
    vbk::Scratch buf(BQ * D + BQ * BK + 2 * BQ);
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static, 1)
    for (vbv::i64 it = 0; it < items; ++it) {
      if (!buf.ok()) continue;
      const vbv::i64 h = it / qblocks, q0 = (it % qblocks) * BQ;
      float* p = buf.get();
      attend_block(Q, K, V, out, dt, h * S * D, (h / group) * S * D, q0, std::min(BQ, S - q0), S, D, BK, causal, scale,
                   p, p + BQ * D, p + BQ * D + BQ * BK);
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
