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
#include "vb_kernel.h"

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
