// cross_entropy (CPU starter): loss = mean over non-ignored rows r of
// logsumexp(logits[r,:]) − logits[r, targets[r]]   (0-d fp32 output; DESIGN §2).
//
// Targets are validated first (each must be ignore_index or in [0, V)). Each row is cut into
// fixed chunks of CHUNK logits; a work item is one (row, chunk) pair of a non-ignored row, so a
// few long vocabulary rows still spread over the OpenMP threads (static schedule). Per chunk,
// in fp32: m = max (exact), s = Σ exp(x − m) over 64 fixed lanes (pass 2 runs from cache,
// while the next chunk is prefetched; with AVX-512 exp is vbk::exp_f32x16).
// The chunks of a row are merged in chunk order (M = max m_c, S = Σ s_c·exp(m_c − M)), then
// loss_r = M + log(S) − x[target]; the row losses are summed in row order in double and divided
// by their count (0/0 = NaN when every row is ignored, as PyTorch). Every order is fixed by the
// shape alone, so results are bitwise deterministic. -inf logits contribute exp(-inf) = 0.
// ONLINE (AVX-512, default): a chunk is read once, in a single streaming pass with a running
// max per lane (online logsumexp, lse_block): per vector one compare against the lanes' max
// (true almost only in the first blocks; then the lanes' sums are rescaled by the change of
// constant) and exp by vb_cpu_exp.h's 2^(x·log2 e + c) (one FMA + degree-5 polynomial); the 64
// lanes are merged exactly (the constants' rounding d_j is undone in double). Each thread reads
// STREAMS of its chunks at a time, interleaved in STREAM_BLOCK pieces, with software prefetch
// AHEAD_BYTES ahead. A chunk whose lane max exceeds 2^20 in magnitude is recomputed by the two
// passes. 32x128256 fp32 on this 2-core Ice Lake VM (2026-12-07): in-process medians 850-920 ->
// 730-775 us; in `vladbud bench` (stepped, cold calls) 845-905 -> 810-945 us, about equal: per
// core this VM streams at most ~13-15 GB/s, whether from DRAM or L3 (L3-resident: 570-640 us),
// so 16.4 MB take >= ~550 us however the exponentials are scheduled.
#include "vb_kernel.h"
#include "vb_cpu_exp.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using vbk::Dt;
using i64 = std::int64_t;
constexpr int LANES = 64;
// @vb-param PREFETCH_NEXT 1 {0,1}  1 prefetch the next chunk while this one's exponentials run
#ifndef PREFETCH_NEXT
#define PREFETCH_NEXT 1
#endif
constexpr i64 CHUNK = 1 << 15;  // logits per work item (128 KiB of fp32: stays in L2)
// @vb-param ONLINE 1 {0,1}  1 (AVX-512): one streaming pass per chunk with a running max per lane (online logsumexp); 0: max pass, then Σ exp pass from cache
#ifndef ONLINE
#define ONLINE 1
#endif
// @vb-param STREAMS 4 {1,2,4,8}  online pass: chunks of one thread read together, interleaved (DRAM streams in flight per core)
#ifndef STREAMS
#define STREAMS 4
#endif
// @vb-param STREAM_BLOCK 128 {64,128,256,512}  online pass: logits of one chunk per visit before the next stream (a multiple of 64)
#ifndef STREAM_BLOCK
#define STREAM_BLOCK 128
#endif
// @vb-param AHEAD_BYTES 4096 {0,1024,2048,4096,8192}  online pass: software prefetch this far ahead of the reads (0 = the hardware prefetcher alone)
#ifndef AHEAD_BYTES
#define AHEAD_BYTES 4096
#endif
// @vb-param AHEAD_LOCALITY 1 {0,1,2,3}  __builtin_prefetch locality of those hints (1 prefetcht2, 3 prefetcht0)
#ifndef AHEAD_LOCALITY
#define AHEAD_LOCALITY 1
#endif
static_assert(STREAM_BLOCK % 64 == 0, "STREAM_BLOCK must be a multiple of 64 (4 vectors of 16)");

inline float combine_sum(float* acc) {
  for (int w = LANES / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

/// max over n floats; NaN if any element is NaN (the oracle's logsumexp is then NaN).
inline float chunk_max(const float* __restrict x, i64 n) {
  float acc[LANES], nan_seen[LANES];
  for (int j = 0; j < LANES; ++j) acc[j] = -__builtin_inff(), nan_seen[j] = 0.0f;
  i64 i = 0;
  for (; i + LANES <= n; i += LANES) {
#pragma omp simd
    for (int j = 0; j < LANES; ++j) {
      const float v = x[i + j];
      acc[j] = v > acc[j] ? v : acc[j];
      nan_seen[j] = v != v ? 1.0f : nan_seen[j];
    }
  }
  for (int j = 0; i + j < n; ++j) {
    const float v = x[i + j];
    acc[j] = v > acc[j] ? v : acc[j];
    nan_seen[j] = v != v ? 1.0f : nan_seen[j];
  }
  float m = acc[0], any_nan = nan_seen[0];
  for (int j = 1; j < LANES; ++j) {
    m = acc[j] > m ? acc[j] : m;
    any_nan = nan_seen[j] > any_nan ? nan_seen[j] : any_nan;
  }
  return any_nan > 0.0f ? __builtin_nanf("") : m;
}

/// Σ exp(x − m) over 64 fixed lanes. `next` (nullable): the next work item's logits
/// (`next_bytes` of them), prefetched meanwhile so their DRAM reads overlap this arithmetic.
inline float chunk_sumexp(const float* __restrict x, i64 n, float m, const char* next,
                          i64 next_bytes) {
  float acc[LANES] = {};
  i64 i = 0;
#if defined(__AVX512F__)
  {  // the same lanes, 16 per zmm register, exp by vbk::exp_f32x16 (this pass is compute-bound)
    static_assert(LANES % 16 == 0, "LANES must be a multiple of 16 for the AVX-512 path");
    __m512 a[LANES / 16];
    for (int k = 0; k < LANES / 16; ++k) a[k] = _mm512_setzero_ps();
    const __m512 mv = _mm512_set1_ps(m);
    for (; i + LANES <= n; i += LANES) {
      if (PREFETCH_NEXT && next)
        for (i64 b = i * 4; b < (i + LANES) * 4 && b < next_bytes; b += 64)
          __builtin_prefetch(next + b, 0, 3);
      for (int k = 0; k < LANES / 16; ++k)
        a[k] = _mm512_add_ps(a[k], vbk::exp_f32x16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16 * k), mv)));
    }
    // The tail (< LANES elements) by masked vectors: every logit's exp is the same function.
    for (int k = 0; k < LANES / 16 && i + 16 * k < n; ++k) {
      const i64 left = n - (i + 16 * k);
      const __mmask16 mk = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
      const __m512 e = vbk::exp_f32x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + i + 16 * k), mv));
      a[k] = _mm512_mask_add_ps(a[k], mk, a[k], e);
    }
    i = n;
    for (int k = 0; k < LANES / 16; ++k) _mm512_storeu_ps(acc + 16 * k, a[k]);
  }
#endif
  for (; i + LANES <= n; i += LANES) {
    if (PREFETCH_NEXT && next)
      for (i64 b = i * 4; b < (i + LANES) * 4 && b < next_bytes; b += 64)
        __builtin_prefetch(next + b, 0, 3);
#pragma omp simd
    for (int j = 0; j < LANES; ++j) acc[j] += vbk::exp_f32(x[i + j] - m);
  }
  for (int j = 0; i + j < n; ++j) acc[j] += vbk::exp_f32(x[i + j] - m);
  return combine_sum(acc);
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)  // masked 16-bit loads
/// Online logsumexp state of one chunk: 64 lanes (4 vectors of 16; element i of the chunk goes
/// to lane i mod 64), each with its running max m, the constant c = −m·log2(e) (rounded once,
/// capped at FLT_MAX so that m = −inf gives a finite constant) and s = Σ 2^(x·log2(e) + c) over
/// the lane's elements so far. A NaN logit sets `nan`.
struct alignas(64) LseState {
  float m[64], c[64], s[64];
  bool nan = false;
  void reset() {
    for (int j = 0; j < 64; ++j) m[j] = -__builtin_inff(), c[j] = 3.4028234663852886e38f, s[j] = 0.0f;
    nan = false;
  }
};

/// Loads 16 logits (fp32, or bf16/fp16 converted in registers) at element i; lanes outside
/// `mk` read as −inf (they add 2^-inf = 0 and never raise the max).
inline __m512 load16(const void* x, Dt dt, i64 i, __mmask16 mk) {
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  if (dt == Dt::F32) return _mm512_mask_loadu_ps(ninf, mk, static_cast<const float*>(x) + i);
  const __m256i h = _mm256_maskz_loadu_epi16(mk, static_cast<const std::uint16_t*>(x) + i);
  const __m512 v = dt == Dt::BF16
                       ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                       : _mm512_cvtph_ps(h);
  return _mm512_mask_mov_ps(ninf, mk, v);
}

/// Adds elements [i0, i1) of the chunk at `x` (element offset `base`) to `st`. i0 is a multiple
/// of 64; only the chunk's last block has i1 % 64 != 0. Per vector: one compare against the
/// running max (x > m, or NaN) that is almost never true after the first blocks, then
/// 2^(x·log2 e + c) added to s; when it is true the lanes' max moves up and s is rescaled by
/// 2^(c_new − c_old), exactly the change of constant.
inline void lse_block(LseState& st, const void* x, Dt dt, i64 base, i64 i0, i64 i1) {
  const __m512 L = _mm512_set1_ps(1.44269504088896341f);
  __m512 m[4], c[4], s[4];
  for (int k = 0; k < 4; ++k)
    m[k] = _mm512_load_ps(st.m + 16 * k), c[k] = _mm512_load_ps(st.c + 16 * k),
    s[k] = _mm512_load_ps(st.s + 16 * k);
  const i64 esz = dt == Dt::F32 ? 4 : 2;
  for (i64 i = i0; i < i1; i += 64) {
    if (AHEAD_BYTES > 0)  // a hint: may point past the chunk or the tensor (never faults)
      for (i64 b = 0; b < 64 * esz; b += 64)
        __builtin_prefetch(static_cast<const char*>(x) + (base + i) * esz + AHEAD_BYTES + b, 0,
                           AHEAD_LOCALITY);
    for (int k = 0; k < 4; ++k) {
      const i64 left = i1 - (i + 16 * k);
      if (left <= 0) break;
      const __mmask16 mk = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
      const __m512 v = load16(x, dt, base + i + 16 * k, mk);
      if (__builtin_expect(_mm512_cmp_ps_mask(v, m[k], _CMP_NLE_UQ) != 0, 0)) {
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) st.nan = true;
        const __m512 mn = _mm512_max_ps(v, m[k]);  // a NaN lane keeps m (2nd operand)
        const __m512 cn = _mm512_min_ps(_mm512_mul_ps(mn, _mm512_set1_ps(-1.44269504088896341f)),
                                        _mm512_set1_ps(3.4028234663852886e38f));
        const __mmask16 moved = _mm512_cmp_ps_mask(mn, m[k], _CMP_NEQ_UQ);
        s[k] = _mm512_mask_mul_ps(s[k], moved, s[k], vbk::exp2_f32x16(_mm512_sub_ps(cn, c[k])));
        m[k] = mn;
        c[k] = cn;
      }
      s[k] = _mm512_add_ps(s[k], vbk::exp2_f32x16(_mm512_fmadd_ps(v, L, c[k])));
    }
  }
  for (int k = 0; k < 4; ++k)
    _mm512_store_ps(st.m + 16 * k, m[k]), _mm512_store_ps(st.c + 16 * k, c[k]),
    _mm512_store_ps(st.s + 16 * k, s[k]);
}

/// The chunk's (max, Σ exp(x − max)) from its online state, as chunk_max / chunk_sumexp give
/// them (max NaN if a logit is NaN; Σ 0 when the max is not finite). Returns false when a lane
/// max has |m| > 2^20: the constants' rounding is then too coarse, and the caller recomputes
/// the chunk by the two passes.
inline bool lse_finish(const LseState& st, float& cm, float& cs) {
  float M = -__builtin_inff();
  for (int j = 0; j < 64; ++j) M = st.m[j] > M ? st.m[j] : M;
  if (st.nan) {
    cm = __builtin_nanf(""), cs = 0.0f;
    return true;
  }
  cm = M;
  cs = 0.0f;
  if (!std::isfinite(M)) return true;
  // s_j = Σ exp(x − m_j)·2^d_j with d_j = m_j·log2(e)_f32 + c_j exactly (both fp32 products
  // are exact in double), so Σ exp(x − M) = Σ_j s_j·2^t_j with t_j = (m_j − M)·log2(e) − d_j
  // (t_j <= ~0.1); the 2^t_j by the vector exp2, 64 lanes in 4 calls.
  alignas(64) float t[64];
  for (int j = 0; j < 64; ++j) {
    if (st.m[j] == -__builtin_inff()) {  // no finite logit in this lane: s = 0
      t[j] = -__builtin_inff();
      continue;
    }
    if (!vbk::exp_shift_fits(st.m[j])) return false;
    const double d = static_cast<double>(st.m[j]) * static_cast<double>(1.44269504088896341f) +
                     static_cast<double>(st.c[j]);
    t[j] = static_cast<float>((static_cast<double>(st.m[j]) - M) * 1.4426950408889634 - d);
  }
  alignas(64) float w[64];
  for (int k = 0; k < 4; ++k)
    _mm512_store_ps(w + 16 * k, _mm512_mul_ps(_mm512_load_ps(st.s + 16 * k),
                                              vbk::exp2_f32x16(_mm512_load_ps(t + 16 * k))));
  double S = 0.0;
  for (int j = 0; j < 64; ++j) S += static_cast<double>(w[j]);
  cs = static_cast<float>(S);
  return true;
}
#endif

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)stream;
  if (int e = vbk::check_args(inputs, n_inputs, 2, outputs, n_outputs, 1, n_attrs, 1, 0x2u))
    return e;
  const DLTensor& tl = inputs[0];
  const DLTensor& tt = inputs[1];
  DLTensor& tout = outputs[0];
  if (vbk::dtype_of(tout) != Dt::F32) return vbk::fail("loss: expected fp32 output");
  if (tl.ndim != 2) return vbk::fail("logits: expected 2 dimensions [B,V], got %d", tl.ndim);
  const i64 B = tl.shape[0], V = tl.shape[1];
  if (int e = vbk::check_shape(tl, "logits", {B, V})) return e;
  if (int e = vbk::check_shape(tt, "targets", {B})) return e;
  if (int e = vbk::check_shape(tout, "loss", {})) return e;
  const double ig_d = attrs[0];
  if (!(std::fabs(ig_d) < 9.0e18) || ig_d != std::floor(ig_d))
    return vbk::fail("ignore_index must be an integer (got %g)", ig_d);
  const i64 ig = static_cast<i64>(ig_d);

  const Dt dt = vbk::dtype_of(tl);
  const void* x = vbk::data_ptr(tl);
  const std::int64_t* tgt = static_cast<const std::int64_t*>(vbk::data_ptr(tt));
  float* out = static_cast<float*>(vbk::data_ptr(tout));

  std::vector<i64> rows;  // non-ignored rows, in order
  try {
    rows.reserve(static_cast<std::size_t>(B));
  } catch (...) {
    return vbk::fail("out of memory (row list)");
  }
  for (i64 r = 0; r < B; ++r) {
    const i64 t = tgt[r];
    if (t == ig) continue;
    if (t < 0 || t >= V)
      return vbk::fail("targets[%lld] = %lld is outside [0, %lld) and is not ignore_index",
                       (long long)r, (long long)t, (long long)V);
    rows.push_back(r);
  }
  const i64 nr = static_cast<i64>(rows.size());
  if (nr == 0) {
    *out = __builtin_nanf("");  // mean over no rows: 0/0
    return 0;
  }

  const i64 chunks = (V + CHUNK - 1) / CHUNK;
  const i64 items = nr * chunks;
  vbk::Scratch cmbuf(items), csbuf(items);  // per (row, chunk): max and Σ exp(x - max)
  if (!cmbuf.ok() || !csbuf.ok()) return vbk::fail("out of memory (chunk statistics)");
  float* const cm = cmbuf.get();
  float* const cs = csbuf.get();
  const bool par = items > 1 && nr * V >= (i64{1} << 15);
  const bool f32 = dt == Dt::F32;
  const i64 esz = f32 ? 4 : 2;
  bool oom = false;

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if (ONLINE) {
    // One streaming pass per chunk (online logsumexp); each thread takes a contiguous share of
    // the work items (as schedule(static)) and reads STREAMS of them at a time, interleaved in
    // STREAM_BLOCK pieces, so that several DRAM streams per core are in flight. A chunk's result
    // does not depend on the grouping (its lanes and their order are fixed).
    bool redo_any = false;
#pragma omp parallel if (par)
    {
      const i64 T = omp_get_num_threads(), t = omp_get_thread_num();
      const i64 lo = items * t / T, hi = items * (t + 1) / T;
      LseState st[STREAMS];
      for (i64 g0 = lo; g0 < hi; g0 += STREAMS) {
        const i64 g = std::min<i64>(STREAMS, hi - g0);
        i64 base[STREAMS], len[STREAMS], longest = 0;
        for (i64 k = 0; k < g; ++k) {
          const i64 it = g0 + k;
          const i64 r = rows[static_cast<std::size_t>(it / chunks)], c0 = (it % chunks) * CHUNK;
          base[k] = r * V + c0;
          len[k] = std::min(CHUNK, V - c0);
          longest = std::max(longest, len[k]);
          st[k].reset();
        }
        for (i64 i0 = 0; i0 < longest; i0 += STREAM_BLOCK)
          for (i64 k = 0; k < g; ++k)
            if (i0 < len[k]) lse_block(st[k], x, dt, base[k], i0, std::min(len[k], i0 + STREAM_BLOCK));
        for (i64 k = 0; k < g; ++k)
          if (!lse_finish(st[k], cm[g0 + k], cs[g0 + k])) {
            cm[g0 + k] = __builtin_nanf("");  // marks the item for the two-pass path below
            cs[g0 + k] = -1.0f;
#pragma omp atomic write
            redo_any = true;
          }
      }
    }
    if (redo_any) {  // rare: a chunk with |max| > 2^20 (values near the dtype's max)
      vbk::Scratch buf(f32 ? 0 : std::min(CHUNK, V));
      if (!buf.ok()) return vbk::fail("out of memory (chunk scratch)");
      for (i64 it = 0; it < items; ++it) {
        if (!(cs[it] == -1.0f)) continue;
        const i64 r = rows[static_cast<std::size_t>(it / chunks)], c = it % chunks;
        const i64 c0 = c * CHUNK, n = std::min(CHUNK, V - c0);
        const float* xc;
        if (f32) {
          xc = static_cast<const float*>(x) + r * V + c0;
        } else {
          vbk::load_f32(x, dt, r * V + c0, n, buf.get());
          xc = buf.get();
        }
        cm[it] = chunk_max(xc, n);
        cs[it] = std::isfinite(cm[it]) ? chunk_sumexp(xc, n, cm[it], nullptr, 0) : 0.0f;
      }
    }
  } else
#endif
#pragma omp parallel if (par)
  {
    vbk::Scratch buf(f32 ? 0 : std::min(CHUNK, V));
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (i64 it = 0; it < items; ++it) {
      if (!buf.ok()) continue;
      const i64 r = rows[static_cast<std::size_t>(it / chunks)], c = it % chunks;
      const i64 c0 = c * CHUNK, n = std::min(CHUNK, V - c0);
      const float* xc;
      if (f32) {
        xc = static_cast<const float*>(x) + r * V + c0;
      } else {
        vbk::load_f32(x, dt, r * V + c0, n, buf.get());
        xc = buf.get();
      }
      const float m = chunk_max(xc, n);
      cm[it] = m;
      // A chunk whose max is ±inf or NaN decides the row's logsumexp by itself (see below).
      const char* next = nullptr;
      i64 next_bytes = 0;
      if (it + 1 < items) {
        const i64 r1 = rows[static_cast<std::size_t>((it + 1) / chunks)];
        const i64 c1 = ((it + 1) % chunks) * CHUNK;
        next = static_cast<const char*>(x) + (r1 * V + c1) * esz;
        next_bytes = std::min(CHUNK, V - c1) * esz;
      }
      cs[it] = std::isfinite(m) ? chunk_sumexp(xc, n, m, next, next_bytes) : 0.0f;
    }
  }
  if (oom) return vbk::fail("out of memory (chunk scratch)");

  double total = 0.0;
  for (i64 k = 0; k < nr; ++k) {
    const i64 r = rows[static_cast<std::size_t>(k)];
    const float* mk = cm + k * chunks;
    const float* sk = cs + k * chunks;
    // Row logsumexp as the oracle: NaN if a logit is NaN, ±inf if the max is ±inf (an all -inf
    // row gives -inf, and -inf - -inf = NaN below), else M + log(Σ_c s_c·exp(m_c − M)).
    // Here: loss = lse − x[target].
    bool any_nan = false;
    float M = -__builtin_inff();
    for (i64 c = 0; c < chunks; ++c) {
      any_nan |= mk[c] != mk[c];
      M = mk[c] > M ? mk[c] : M;
    }
    float xt;
    vbk::load_f32(x, dt, r * V + tgt[r], 1, &xt);
    float loss;
    if (any_nan) {
      loss = __builtin_nanf("");
    } else if (!std::isfinite(M)) {
      loss = M - xt;
    } else {
      float S = 0.0f;
      for (i64 c = 0; c < chunks; ++c)
        if (std::isfinite(mk[c])) S += sk[c] * vbk::exp_f32(mk[c] - M);
      loss = (M - xt) + std::log(S);  // M - xt first: exact when close, keeps large offsets accurate
    }
    total += static_cast<double>(loss);
  }
  *out = static_cast<float>(total / static_cast<double>(nr));
  return 0;
}
