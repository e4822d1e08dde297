// variant v07_q16_micro4 of the blind ranking study cpu-blind2 (bench/ranking_variants.py): BLOCK_Q=16, MICRO_ROWS=4
#define BLOCK_Q 16
#define MICRO_ROWS 4
// flash_attention (CPU starter): o = softmax(q·kᵀ·sm_scale + mask)·v per (batch, head), with
// q, o of shape [B,H,S,D] and k, v of shape [B,H_kv,S,D]; causal mask top-left aligned (key j
// visible to query i iff j ≤ i, as PyTorch SDPA with is_causal) (DESIGN §2). Grouped-query
// attention: H_kv (k.shape[1]) divides H and query head h reads KV head h / (H/H_kv); H_kv = H
// is plain multi-head attention, H_kv = 1 multi-query attention.
//
// Flash-attention tiling in fp32 (block sizes: the tunables below). KV heads are processed in
// groups (bounded scratch). Phase 1 converts the group's K into transposed fp32 blocks
// Kᵀ [Dp × BK] and V into fp32 rows (head dim zero-padded to Dp, a multiple of 32; fp32 V with
// D = Dp is used in place), once per call
// and KV head (shared by its H/H_kv query heads), parallel over key blocks. Phase 2 runs the
// (query head, block of BQ queries) items of the group's KV heads round-robin over the OpenMP
// threads (static, chunk 1: balances the causal triangle). Per item the Q block is
// converted to fp32, then for each block of BK keys (only up to the diagonal when causal):
//   1. S = (sm_scale·Q)·Kᵀ by a register-blocked RQ×CW micro-kernel (tiles above the causal
//      diagonal skipped), masked with -inf;
//   2. online softmax per row: m' = max(m, max S), α = exp(m − m'), P = exp(S − m'),
//      l = α·l + ΣP (l kept as 16 lanes), O = α·O + P·V (P·V by the same micro-kernel, over
//      visible keys only);
// and finally O / l is rounded once into o. Accumulation order depends only on the shape, so
// results are bitwise deterministic.
#include "vb_kernel.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour).
// Smaller query blocks skip more of the causal triangle and make more items to spread over the
// threads (GPT-2 at 64 tokens has 12 heads x 1 block of 64 queries); larger key blocks make
// fewer online-softmax rescales.
// @vb-param BLOCK_Q 64 {16,32,64,128}  queries per work item (a multiple of MICRO_ROWS)
#ifndef BLOCK_Q
#define BLOCK_Q 64
#endif
// @vb-param BLOCK_K 64 {32,64,128}  keys per block (a multiple of 32)
#ifndef BLOCK_K
#define BLOCK_K 64
#endif
// @vb-param MICRO_ROWS 8 {4,8}  rows of the register-blocked micro-kernel (divides BLOCK_Q)
#ifndef MICRO_ROWS
#define MICRO_ROWS 8
#endif
// @vb-param NUM_THREADS 0 {0,1,2,4,8,16,32,64}  OpenMP threads (0 = the runtime's default)
#ifndef NUM_THREADS
#define NUM_THREADS 0
#endif

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#pragma GCC target("prefer-vector-width=512")
#endif

namespace {

using vbk::Dt;
using i64 = std::int64_t;
constexpr int BQ = BLOCK_Q;    // queries per item
constexpr int BK = BLOCK_K;    // keys per block (a multiple of CW and of 16)
constexpr int RQ = MICRO_ROWS; // rows of the micro-kernel (divides BQ)
constexpr int CW = 32;         // columns of the micro-kernel (2 × 16 fp32 lanes)
static_assert(BQ > 0 && RQ > 0 && BQ % RQ == 0, "BLOCK_Q must be a positive multiple of MICRO_ROWS");
static_assert(BK > 0 && BK % CW == 0, "BLOCK_K must be a positive multiple of 32");

/// c[RQ][CW] (row stride ldc) = (accumulate ? c : 0) + a[RQ][0:kd] (row stride lda) ·
/// b[0:kd][CW] (row stride ldb).
inline void micro_kernel(const float* __restrict a, i64 lda, const float* __restrict b, i64 ldb,
                         int kd, float* __restrict c, i64 ldc, bool accumulate) {
  float acc[RQ][CW];
  for (int r = 0; r < RQ; ++r) {
#pragma omp simd
    for (int j = 0; j < CW; ++j) acc[r][j] = accumulate ? c[r * ldc + j] : 0.0f;
  }
  for (int k = 0; k < kd; ++k) {
    const float* __restrict bk = b + k * ldb;
    for (int r = 0; r < RQ; ++r) {
      const float av = a[r * lda + k];
#pragma omp simd
      for (int j = 0; j < CW; ++j) acc[r][j] += av * bk[j];
    }
  }
  for (int r = 0; r < RQ; ++r) {
#pragma omp simd
    for (int j = 0; j < CW; ++j) c[r * ldc + j] = acc[r][j];
  }
}

struct Work {
  float* q;  // [BQ][Dp]
  float* o;  // [BQ][Dp]
  float* s;  // [BQ][BK]
  float* m;      // [BQ] running row max
  float* lv;     // [BQ][16] running row sums l, kept as 16 lanes until the end
  float* mx;     // [BQ] row max of the current block
  float* shift;  // [BQ] exponent shift of the current block
  float* alpha;  // [BQ] rescale factor exp(m_old - shift) of the current block
};

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)stream;
  if (int e = vbk::check_args(inputs, n_inputs, 3, outputs, n_outputs, 1, n_attrs, 2)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tq = inputs[0];
  if (tq.ndim != 4) return vbk::fail("q: expected 4 dimensions [B,H,S,D], got %d", tq.ndim);
  if (inputs[1].ndim != 4)
    return vbk::fail("k: expected 4 dimensions [B,H_kv,S,D], got %d", inputs[1].ndim);
  const i64 B = tq.shape[0], H = tq.shape[1], S = tq.shape[2], D = tq.shape[3];
  const i64 Hkv = inputs[1].shape[1];  // KV heads (GQA); H for multi-head attention
  if (int e = vbk::check_shape(tq, "q", {B, H, S, D})) return e;
  if (int e = vbk::check_shape(inputs[1], "k", {B, Hkv, S, D})) return e;
  if (int e = vbk::check_shape(inputs[2], "v", {B, Hkv, S, D})) return e;
  if (Hkv < 1 || H % Hkv != 0)
    return vbk::fail("k, v: %lld KV heads (dim 1) must be >= 1 and divide the %lld query heads of "
                     "q (GQA: query head h reads KV head h / (H/H_kv))",
                     (long long)Hkv, (long long)H);
  if (int e = vbk::check_shape(outputs[0], "o", {B, H, S, D})) return e;
  if (attrs[0] != 0.0 && attrs[0] != 1.0) return vbk::fail("causal must be 0 or 1 (got %g)", attrs[0]);
  const bool causal = attrs[0] != 0.0;
  const float scale = static_cast<float>(attrs[1]);
  if (!std::isfinite(scale)) return vbk::fail("sm_scale must be finite (got %g)", attrs[1]);
  if (B * H * S == 0 || D == 0) return 0;  // empty output

  const Dt dt = vbk::dtype_of(tq);
  const void* q = vbk::data_ptr(tq);
  const void* k = vbk::data_ptr(inputs[1]);
  const void* v = vbk::data_ptr(inputs[2]);
  void* o = vbk::data_ptr(outputs[0]);
  const i64 Dp = (D + CW - 1) / CW * CW;
  const bool v_direct = dt == Dt::F32 && D == Dp;  // fp32 V rows usable in place

  const i64 qblocks = (S + BQ - 1) / BQ;
  const i64 kblocks = (S + BK - 1) / BK;
  const i64 rep = H / Hkv;    // query heads per KV head
  const i64 BHkv = B * Hkv;   // flattened KV heads; KV head g serves query heads g·rep .. g·rep+rep-1
  // KV heads are processed in groups whose converted K/V (Kᵀ blocks [Dp][BK] and V rows [Dp],
  // fp32) take at most ~16 MiB; within a group, phase 1 converts K and V once (parallel over
  // key blocks), phase 2 runs the (query head, query block) items of the group's KV heads.
  const i64 kv_floats_per_head = kblocks * BK * Dp * (v_direct ? 1 : 2);
  const i64 G = std::max<i64>(1, std::min<i64>(BHkv, (i64{4} << 20) / kv_floats_per_head));
  vbk::Scratch kvbuf(G * kv_floats_per_head);
  if (!kvbuf.ok()) return vbk::fail("out of memory (converted K/V)");
  float* const kt_all = kvbuf.get();                             // [G][kblocks][Dp][BK]
  float* const v_all = kvbuf.get() + G * kblocks * BK * Dp;      // [G][kblocks*BK][Dp]

  const double work = static_cast<double>(B * H) * static_cast<double>(S) *
                      static_cast<double>(S) * static_cast<double>(D);
  const bool par = work >= 1.0e6;
  const i64 per_thread = 2 * BQ * Dp + BQ * BK + BQ * 16 + 4 * BQ + Dp;
  bool oom = false;

#pragma omp parallel if (par) num_threads(NUM_THREADS > 0 ? NUM_THREADS : omp_get_max_threads())
  {
    vbk::Scratch scratch(per_thread);
    if (!scratch.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp barrier
    Work w{};
    float* row = nullptr;
    if (scratch.ok()) {
      float* p = scratch.get();
      w.q = p; p += BQ * Dp;
      w.o = p; p += BQ * Dp;
      w.s = p; p += BQ * BK;
      w.m = p; p += BQ;
      w.lv = p; p += BQ * 16;
      w.mx = p; p += BQ;
      w.shift = p; p += BQ;
      w.alpha = p; p += BQ;
      row = p;
    }
    for (i64 g0 = 0; g0 < BHkv && !oom; g0 += G) {
      const i64 ng = std::min(G, BHkv - g0);

      // Phase 1: K -> Kᵀ blocks, V -> padded fp32 rows (zero padding past S and D).
#pragma omp for schedule(static)
      for (i64 it = 0; it < ng * kblocks; ++it) {
        const i64 gh = it / kblocks, kb = it % kblocks;
        const i64 base = (g0 + gh) * S * D;  // element offset of this KV head in k and v
        float* kt = kt_all + (gh * kblocks + kb) * BK * Dp;
        for (int j = 0; j < BK; ++j) {
          const i64 key = kb * BK + j;
          if (key < S) {
            vbk::load_f32(k, dt, base + key * D, D, row);
            for (i64 d = 0; d < D; ++d) kt[d * BK + j] = row[d];
          } else {
            for (i64 d = 0; d < D; ++d) kt[d * BK + j] = 0.0f;
          }
        }
        for (i64 d = D; d < Dp; ++d)
          for (int j = 0; j < BK; ++j) kt[d * BK + j] = 0.0f;
        if (!v_direct) {
          for (int j = 0; j < BK; ++j) {
            const i64 key = kb * BK + j;
            float* vj = v_all + (gh * kblocks * BK + key) * Dp;
            if (key < S) {
              vbk::load_f32(v, dt, base + key * D, D, vj);
              for (i64 d = D; d < Dp; ++d) vj[d] = 0.0f;
            } else {
              for (i64 d = 0; d < Dp; ++d) vj[d] = 0.0f;
            }
          }
        }
      }
      // (implicit barrier)

      // Phase 2: (query head, query block) items, round-robin (balances the causal triangle).
#pragma omp for schedule(static, 1)
      for (i64 it = 0; it < ng * rep * qblocks; ++it) {
        const i64 gh = it / (rep * qblocks), qb = it % qblocks;  // KV head in group, query block
        const i64 kv_base = (g0 + gh) * S * D;                 // this KV head in k and v
        // Flattened query head (g0 + gh)·rep + r = b·H + h with h / rep the KV head in batch b.
        const i64 base = ((g0 + gh) * rep + (it / qblocks) % rep) * S * D;  // in q and o
        const i64 q0 = qb * BQ, nq = std::min<i64>(BQ, S - q0);

        // Q block -> fp32 scaled by sm_scale, zero-padded to BQ × Dp; O, m, l initialised.
        for (i64 i = 0; i < BQ; ++i) {
          float* qi = w.q + i * Dp;
          if (i < nq) {
            vbk::load_f32(q, dt, base + (q0 + i) * D, D, qi);
#pragma omp simd
            for (i64 d = 0; d < D; ++d) qi[d] *= scale;
          }
          for (i64 d = (i < nq ? D : 0); d < Dp; ++d) qi[d] = 0.0f;
        }
        std::fill(w.o, w.o + BQ * Dp, 0.0f);
        std::fill(w.m, w.m + BQ, -__builtin_inff());
        std::fill(w.lv, w.lv + BQ * 16, 0.0f);

        const i64 kv_end = causal ? q0 + nq : S;  // keys past the block's last query are masked
        for (i64 k0 = 0; k0 < kv_end; k0 += BK) {
          const int nk = static_cast<int>(std::min<i64>(BK, kv_end - k0));
          const float* kt = kt_all + (gh * kblocks + k0 / BK) * BK * Dp;
          const float* vb;
          i64 ldv;
          if (v_direct) {
            vb = static_cast<const float*>(v) + kv_base + k0 * D;
            ldv = D;
          } else {
            vb = v_all + (gh * kblocks * BK + k0) * Dp;
            ldv = Dp;
          }
          const bool diag = causal && k0 + BK - 1 > q0;  // block crosses the causal diagonal

          // S = Q·Kᵀ (BQ × BK); tiles entirely above the diagonal are skipped (masked below).
          for (int r0 = 0; r0 < BQ; r0 += RQ)
            for (int c0 = 0; c0 < BK; c0 += CW) {
              if (diag && k0 + c0 > q0 + r0 + RQ - 1) continue;
              micro_kernel(w.q + r0 * Dp, Dp, kt + c0, BK, static_cast<int>(Dp), w.s + r0 * BK + c0,
                           BK, false);
            }

          // Online softmax. (a) mask (causal diagonal, key tail) and row max of this block.
          const bool need_mask = nk < BK || diag;
          for (int i = 0; i < BQ; ++i) {
            float* si = w.s + i * BK;
            if (need_mask) {
              const i64 lim = causal ? std::min<i64>(nk, q0 + i - k0 + 1) : nk;  // keys [0, lim) visible
#pragma omp simd
              for (int j = 0; j < BK; ++j) {  // bit-mask select: if-converts on every target
                const std::uint32_t keep = 0u - static_cast<std::uint32_t>(j < lim);
                si[j] = vbk::bits_to_float((vbk::float_to_bits(si[j]) & keep) | (0xff800000u & ~keep));
              }
            }
            float mx = -__builtin_inff();
#pragma omp simd reduction(max : mx)
            for (int j = 0; j < BK; ++j) mx = si[j] > mx ? si[j] : mx;
            w.mx[i] = mx;
          }
          // (b) per row, vectorized over rows: m' = max(m, mx), α = exp(m − m'). A row with
          // nothing visible yet (padding rows) keeps m' = -inf: its shift is 0 so that
          // exp(-inf - 0) = 0 instead of NaN.
#pragma omp simd
          for (int i = 0; i < BQ; ++i) {
            const float m_old = w.m[i];
            const float m_new = w.mx[i] > m_old ? w.mx[i] : m_old;
            const std::uint32_t live = 0u - static_cast<std::uint32_t>(vbk::float_to_bits(m_new) != 0xff800000u);
            const float sh = vbk::bits_to_float(vbk::float_to_bits(m_new) & live);
            w.shift[i] = sh;
            w.alpha[i] = vbk::exp_f32(m_old - sh);
            w.m[i] = m_new;
          }
          // (c) P = exp(S − shift); l = α·l + ΣP (16 lanes); O *= α.
          for (int i = 0; i < BQ; ++i) {
            float* si = w.s + i * BK;
            float* li = w.lv + i * 16;
            const float sh = w.shift[i], alpha = w.alpha[i];
            float psum[16] = {};
            for (int j0 = 0; j0 < BK; j0 += 16) {
#pragma omp simd
              for (int j = 0; j < 16; ++j) {
                const float e = vbk::exp_f32(si[j0 + j] - sh);
                si[j0 + j] = e;
                psum[j] += e;
              }
            }
#pragma omp simd
            for (int j = 0; j < 16; ++j) li[j] = li[j] * alpha + psum[j];
            if (alpha != 1.0f) {
              float* oi = w.o + i * Dp;
#pragma omp simd
              for (i64 d = 0; d < Dp; ++d) oi[d] *= alpha;
            }
          }

          // O += P·V (BQ × Dp) over the keys visible to each row group.
          for (int r0 = 0; r0 < BQ; r0 += RQ) {
            const i64 vis = causal ? std::min<i64>(nk, q0 + r0 + RQ - k0) : nk;
            if (vis <= 0) continue;
            for (i64 c0 = 0; c0 < Dp; c0 += CW)
              micro_kernel(w.s + r0 * BK, BK, vb + c0, ldv, static_cast<int>(vis), w.o + r0 * Dp + c0,
                           Dp, true);
          }
        }

        // o = O / l, rounded once (l: pairwise sum of its 16 lanes).
        for (i64 i = 0; i < nq; ++i) {
          float* oi = w.o + i * Dp;
          float* li = w.lv + i * 16;
          for (int h = 8; h > 0; h /= 2)
            for (int j = 0; j < h; ++j) li[j] += li[j + h];
          const float inv = 1.0f / li[0];
#pragma omp simd
          for (i64 d = 0; d < D; ++d) oi[d] *= inv;
          vbk::store_f32(oi, dt, o, base + (q0 + i) * D, D);
        }
      }
      // (implicit barrier before the next group overwrites the converted K/V)
    }
  }
  if (oom) return vbk::fail("out of memory (per-thread scratch)");
  return 0;
}
