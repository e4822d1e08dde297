// Instantiated for target h200-host (vladbud variants): VEC_BYTES=64 (card 64 -> allowed 64);
// Chunked online logsumexp (one pass over memory; per-chunk max and Σ exp merged by rescaling, VEC_BYTES-wide lanes), OpenMP-threaded over rows.
#include "vb_variant.h"

#include <cmath>
#include <vector>

// @vb-param VEC_BYTES 64 {16,32,64}  SIMD width the lane arrays are written for (card: vector_width)
#ifndef VEC_BYTES
#define VEC_BYTES 64
#endif

namespace {
constexpr int L = VEC_BYTES / 4 * 2;  // two vectors of independent lanes

/// Pairwise combine of L lanes (fixed order).
inline float combine_sum(float* a) {
  for (int h = L / 2; h > 0; h /= 2)
    for (int j = 0; j < h; ++j) a[j] += a[j + h];
  return a[0];
}

/// loss = lse − x_t from the row max m, Σ exp(x − m) and a NaN flag: NaN if a logit is NaN,
/// m − x_t when m is ±inf (the max decides the logsumexp), else (m − x_t) + log(sum).
inline float finish_loss(float m, float sum, bool nan, float xt) {
  if (nan) return __builtin_nanf("");
  if (!std::isfinite(m)) return m - xt;
  return (m - xt) + std::log(sum);
}

/// One row, read once in chunks of vbv::kChunk logits (converted into `stage` for 16-bit
/// dtypes) while the chunk is in L1: chunk max c (L lanes, NaN flagged), chunk sum
/// t = Σ exp(x − c) (L lanes), merged into the running (M, S): M' = max(M, c),
/// S = S·exp(M − M') + t·exp(c − M'). All -inf chunks add nothing; a +inf chunk decides M.
float row_loss(const void* x, vbk::Dt dt, vbv::i64 off, vbv::i64 V, float xt, float* stage) {
  float M = -__builtin_inff(), S = 0;
  bool nan = false;
  vbv::for_chunks(x, dt, off, V, stage, [&](const float* __restrict p, vbv::i64 n, vbv::i64) {
    alignas(64) float am[L], an[L];
    for (int j = 0; j < L; ++j) am[j] = -__builtin_inff(), an[j] = 0;
    vbv::i64 i = 0;
    for (; i + L <= n; i += L) {
#pragma omp simd
      for (int j = 0; j < L; ++j) {
        const float v = p[i + j];
        am[j] = v > am[j] ? v : am[j];
        an[j] = v != v ? 1.0f : an[j];
      }
    }
    for (int j = 0; i + j < n; ++j) {
      const float v = p[i + j];
      am[j] = v > am[j] ? v : am[j];
      an[j] = v != v ? 1.0f : an[j];
    }
    float c = am[0];
    for (int j = 1; j < L; ++j) {
      c = am[j] > c ? am[j] : c;
      nan |= an[j] != 0.0f;
    }
    nan |= an[0] != 0.0f;
    if (c == -__builtin_inff()) return;  // all -inf: exp(-inf) = 0
    if (c == __builtin_inff() || M == __builtin_inff()) {  // a +inf logit decides the row's M
      M = c > M ? c : M;
      return;
    }
    alignas(64) float as[L] = {};
    i = 0;
    for (; i + L <= n; i += L) {
#pragma omp simd
      for (int j = 0; j < L; ++j) as[j] += vbk::exp_f32(p[i + j] - c);
    }
    for (int j = 0; i + j < n; ++j) as[j] += vbk::exp_f32(p[i + j] - c);
    const float t = combine_sum(as);
    if (c > M) {
      S = S * std::exp(M - c) + t;  // exp(-inf) = 0 for the first chunk
      M = c;
    } else {
      S += t * std::exp(c - M);
    }
  });
  return finish_loss(M, S, nan, xt);
}

/// fp32 staging floats per thread for a row of V logits of dtype dt.
inline vbv::i64 stage_floats(vbk::Dt dt, vbv::i64 V) {
  (void)dt, (void)V;
  return vbv::kChunk;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  vbv::CrossEntropyArgs a;
  if (int e = vbv::check_cross_entropy(in, n_in, out, n_out, attrs, n_attrs, a)) return e;
  const vbv::i64 V = a.V;
  const auto dt = a.dt;
  const void* x = vbk::data_ptr(in[0]);
  const vbv::i64* tgt = static_cast<const vbv::i64*>(vbk::data_ptr(in[1]));
  float* loss_out = static_cast<float*>(vbk::data_ptr(out[0]));
  const std::vector<vbv::i64>& rows = a.rows;  // the non-ignored rows, in order
  const vbv::i64 nr = static_cast<vbv::i64>(rows.size());
  if (nr == 0) {
    *loss_out = __builtin_nanf("");  // mean over no rows: 0/0, as PyTorch
    return 0;
  }
  vbk::Scratch lbuf(nr);
  if (!lbuf.ok()) return vbk::fail("out of memory (row losses)");
  float* loss = lbuf.get();
  bool oom = false;
#pragma omp parallel if (nr > 1 && nr * V >= (vbv::i64{1} << 15))
  {
    vbk::Scratch buf(stage_floats(dt, V));
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (vbv::i64 k = 0; k < nr; ++k) {
      if (!buf.ok()) continue;
      const vbv::i64 r = rows[static_cast<std::size_t>(k)];
      float xt;
      vbk::load_f32(x, dt, r * V + tgt[r], 1, &xt);
      loss[k] = row_loss(x, dt, r * V, V, xt, buf.get());
    }
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  double total = 0;  // row losses summed in row order, in double
  for (vbv::i64 k = 0; k < nr; ++k) total += static_cast<double>(loss[k]);
  *loss_out = static_cast<float>(total / static_cast<double>(nr));
  return 0;
}
