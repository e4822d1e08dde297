// layernorm (CPU starter): y[B,D] = (x - mean) / sqrt(var + eps) * weight + bias, biased variance
// over the last dim (DESIGN §2).
//
// One row at a time, rows split statically over OpenMP threads. Per row, in fp32, the corrected
// two-pass algorithm (no one-pass E[x²]−E[x]², which cancels catastrophically on rows like
// 2000 + N(0,1)):
//   pass 1  m1 = Σx / D                                  (64 fixed lanes, pairwise combine)
//   pass 2  d = Σ(x − m1),  q = Σ(x − m1)²               (m1 is close to the mean, so x − m1 is
//           mean = m1 + d/D,  var = q/D − (d/D)²          exact-ish and d/D fixes m1's rounding)
//   pass 3  y = ((x − m1) − d/D) · rstd · w + b           rounded once to the output dtype
// Keeping the mean as m1 + d/D (never rounded into one fp32) keeps large-mean rows accurate and
// makes all-equal rows give exactly (0 · rstd) · w + b = b. If a statistic overflows fp32 (values
// near the dtype's max) the row is recomputed in double. The row is read from memory once;
// passes 2-3 run from cache into a thread-local row written out with non-temporal stores
// (vbk::stream_store_f32; outputs under 2^STREAM_MIN_LOG2 bytes, a model's activations that the
// next op reads at once, go straight into y with ordinary stores instead), and pass 3 prefetches the next row (PREFETCH_NEXT). fp32 rows with
// AVX-512 skip the row buffer: pass 3 streams straight into y (apply_stream; 4096x4096 here
// 4.46 -> 3.51 ms, 84 % of a non-temporal copy of the same bytes in the same minute). Weight and bias are converted to fp32 once per call.
// PIPELINE (fp32, AVX-512, non-temporal output, D % 16 == 0): each thread takes a contiguous
// share of rows and runs ONE loop per row that streams row r's output while it reads row r+1
// from DRAM (software prefetch PIPE_AHEAD bytes ahead) for its shifted sums around c = x[0]
// (d = Σ(x−c), q = Σ(x−c)²; the same formulas as passes 2-3 with that shift). If x[0] was far
// from the mean (q/D > 4·var) the sums are retaken around c + d/D from cache (the two-pass
// algorithm), so nothing cancels by more than a few bits (outlier, large-mean and all-equal
// rows: same worst row error as before, 2.8e-7). The DRAM reads and non-temporal stores then
// run together (4096x4096 fp32 here, 2026-12-07, in-process medians: 4.16-4.34 -> 3.9-4.04 ms;
// bench 3982 us, 72.8 % of the 46.1 GB/s copy ceiling). A three-row version (Σx of row r+2 and
// the shifted sums of row r+1 in the same loop) was no faster: x, weight, bias and the incoming
// row (64 KiB) overflow the 48 KiB L1.
#include "vb_kernel.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour):
// @vb-param PREFETCH_NEXT 1 {0,1}  1 prefetch the next row while pass 3 runs from cache
#ifndef PREFETCH_NEXT
#define PREFETCH_NEXT 1
#endif
// @vb-param STREAM_MIN_LOG2 22 {0,18,20,22,24,62}  non-temporal stores only from 2^k output bytes on
#ifndef STREAM_MIN_LOG2
#define STREAM_MIN_LOG2 22
#endif

// @vb-param PIPELINE 1 {0,1}  1 (fp32, AVX-512, non-temporal output): one loop per row that streams this row's output while it reads the next row and sums it (its second statistic pass then runs from cache)
#ifndef PIPELINE
#define PIPELINE 1
#endif
// @vb-param PIPE_AHEAD 4096 {0,1024,4096,8192}  pipelined path: software prefetch (prefetcht2) this many bytes ahead of the next row's reads (0 = the hardware prefetcher alone)
#ifndef PIPE_AHEAD
#define PIPE_AHEAD 4096
#endif

#include <omp.h>

#include <cmath>
#include <cstdint>

namespace {

using vbk::Dt;
using i64 = std::int64_t;
constexpr int LANES = 64;

inline float combine_sum(float* acc) {
  for (int w = LANES / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

inline float row_sum(const float* __restrict x, i64 n) {
  float acc[LANES] = {};
  i64 i = 0;
  for (; i + LANES <= n; i += LANES) {
#pragma omp simd
    for (int j = 0; j < LANES; ++j) acc[j] += x[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
  return combine_sum(acc);
}

/// d = Σ(x − c), q = Σ(x − c)².
inline void shifted_sums(const float* __restrict x, i64 n, float c, float& d, float& q) {
  float ad[LANES] = {}, aq[LANES] = {};
  i64 i = 0;
  for (; i + LANES <= n; i += LANES) {
#pragma omp simd
    for (int j = 0; j < LANES; ++j) {
      const float t = x[i + j] - c;
      ad[j] += t;
      aq[j] += t * t;
    }
  }
  for (int j = 0; i + j < n; ++j) {
    const float t = x[i + j] - c;
    ad[j] += t;
    aq[j] += t * t;
  }
  d = combine_sum(ad);
  q = combine_sum(aq);
}

/// y = ((x − c) − dm) · rstd · w + b (y may be x: same-index in-place update). Meanwhile the
/// next row (`next`, `esz` bytes per element; nullable) is prefetched, a slice per 64 elements.
inline void apply(const float* x, const float* __restrict w, const float* __restrict b, float* y,
                  i64 n, float c, float dm, float rstd, const void* next, int esz) {
  for (i64 i0 = 0; i0 < n; i0 += 64) {
    const i64 i1 = i0 + 64 < n ? i0 + 64 : n;
    if (PREFETCH_NEXT) vbk::prefetch_span(next, i0 * esz, i1 * esz, n * esz);
#pragma omp simd
    for (i64 i = i0; i < i1; ++i) y[i] = ((x[i] - c) - dm) * rstd * w[i] + b[i];
  }
}

#if defined(__AVX512F__)
/// apply() written straight to the output row `y` with non-temporal stores (no row buffer, no
/// second pass over it). Needs y 64-byte aligned; the n % 16 tail uses ordinary stores.
inline void apply_stream(const float* x, const float* __restrict w, const float* __restrict b,
                         float* y, i64 n, float c, float dm, float rstd, const void* next, int esz) {
  const __m512 vc = _mm512_set1_ps(c), vdm = _mm512_set1_ps(dm), vr = _mm512_set1_ps(rstd);
  i64 i = 0;
  for (; i + 16 <= n; i += 16) {
    if (PREFETCH_NEXT && (i & 63) == 0) vbk::prefetch_span(next, i * esz, (i + 64) * esz, n * esz);
    const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vc), vdm), vr);
    _mm512_stream_ps(y + i, _mm512_fmadd_ps(t, _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i)));
  }
  for (; i < n; ++i) y[i] = ((x[i] - c) - dm) * rstd * w[i] + b[i];
}
#endif

/// Row statistics in fp32: shift c, residual mean dm (mean = c + dm), rstd = 1/sqrt(var + eps).
/// Returns false when a statistic is not finite (fp32 overflow or inf/NaN inputs).
inline bool row_stats(const float* __restrict x, i64 n, float eps, float& c, float& dm, float& rstd) {
  const float fn = static_cast<float>(n);
  c = row_sum(x, n) / fn;
  if (!std::isfinite(c)) return false;
  float d = 0.0f, q = 0.0f;
  shifted_sums(x, n, c, d, q);
  if (!std::isfinite(q)) return false;
  dm = d / fn;
  const float var = std::fmax(q / fn - dm * dm, 0.0f);
  rstd = 1.0f / std::sqrt(var + eps);
  return true;
}

#if defined(__AVX512F__)
/// Pairwise combine of 4 vectors of lane sums (lane 16k + j of vector k), as combine_sum.
inline float combine4(const __m512* a) {
  alignas(64) float acc[64];
  for (int k = 0; k < 4; ++k) _mm512_store_ps(acc + 16 * k, a[k]);
  for (int w = 32; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

/// Σx over 64 lanes (element i to lane i mod 64), pairwise combine: row_sum's lanes and order.
inline float row_sum_v(const float* __restrict x, i64 n) {
  __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (i64 i = 0; i < n; i += 16) {
    const i64 left = n - i;
    const __mmask16 mk = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
    a[(i >> 4) & 3] = _mm512_add_ps(a[(i >> 4) & 3], _mm512_maskz_loadu_ps(mk, x + i));
  }
  return combine4(a);
}

/// One pipelined loop over a row's n elements (n % 16 == 0, y 64-byte aligned): row x's output
/// streamed into y (apply_stream) while the next row x1 (nullable) is read from DRAM
/// (PIPE_AHEAD bytes prefetched ahead) for its shifted sums d1 = Σ(x1 − k1), q1 = Σ(x1 − k1)²
/// around k1 = x1[0] (64 lanes, element i to lane i mod 64, pairwise combine). The DRAM reads
/// and the non-temporal stores run together all the time, as in a streaming copy.
inline void pipe2(const float* x, const float* __restrict w, const float* __restrict b, float* y,
                  i64 n, float c, float dm, float rstd, const float* x1, float k1, float& d1,
                  float& q1) {
  const __m512 vc = _mm512_set1_ps(c), vdm = _mm512_set1_ps(dm), vr = _mm512_set1_ps(rstd);
  const __m512 vk = _mm512_set1_ps(k1);
  __m512 ad[4], aq[4];
  for (int k = 0; k < 4; ++k) ad[k] = aq[k] = _mm512_setzero_ps();
  for (i64 i = 0; i < n; i += 16) {
    const int k = static_cast<int>((i >> 4) & 3);
    if (x1) {
      if (PIPE_AHEAD > 0) __builtin_prefetch(x1 + i + PIPE_AHEAD / 4, 0, 1);
      const __m512 t1 = _mm512_sub_ps(_mm512_loadu_ps(x1 + i), vk);
      ad[k] = _mm512_add_ps(ad[k], t1);
      aq[k] = _mm512_fmadd_ps(t1, t1, aq[k]);
    }
    const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vc), vdm), vr);
    _mm512_stream_ps(y + i, _mm512_fmadd_ps(t, _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i)));
  }
  if (x1) d1 = combine4(ad), q1 = combine4(aq);
}

/// The first row of a thread: pipe2's shifted sums alone.
inline void shifted_sums_v(const float* __restrict x, i64 n, float k1, float& d, float& q) {
  const __m512 vk = _mm512_set1_ps(k1);
  __m512 ad[4], aq[4];
  for (int k = 0; k < 4; ++k) ad[k] = aq[k] = _mm512_setzero_ps();
  for (i64 i = 0; i < n; i += 16) {
    const int k = static_cast<int>((i >> 4) & 3);
    const __m512 t1 = _mm512_sub_ps(_mm512_loadu_ps(x + i), vk);
    ad[k] = _mm512_add_ps(ad[k], t1);
    aq[k] = _mm512_fmadd_ps(t1, t1, aq[k]);
  }
  d = combine4(ad), q = combine4(aq);
}

/// Statistics of a row from its shifted sums (d, q) around the shift c (mean = c + dm): false
/// when not finite. When the shift was far from the mean (q/n > 4·var: x[0] an outlier), the
/// sums are retaken around c + dm from cache (the corrected two-pass algorithm), so a one-pass
/// E[(x−c)²] − E[x−c]² never cancels by more than a few bits.
inline bool stats_shifted(const float* __restrict x, i64 n, float eps, float& c, float d, float q,
                          float& dm, float& rstd) {
  const float fn = static_cast<float>(n);
  if (!std::isfinite(c) || !std::isfinite(q)) return false;
  dm = d / fn;
  float var = std::fmax(q / fn - dm * dm, 0.0f);
  if (!(q / fn <= 4.0f * var)) {
    c = c + dm;
    shifted_sums(x, n, c, d, q);
    if (!std::isfinite(c) || !std::isfinite(q)) return false;
    dm = d / fn;
    var = std::fmax(q / fn - dm * dm, 0.0f);
  }
  rstd = 1.0f / std::sqrt(var + eps);
  return true;
}


#endif

/// Rare path, the whole row in double: values near the dtype's max overflow fp32 statistics
/// (inf/NaN inputs also land here and propagate as in the fp64 oracle). y may be x.
inline void row_double(const float* x, const float* __restrict w, const float* __restrict b, float* y,
                       i64 n, float eps) {
  double s = 0.0;
  for (i64 i = 0; i < n; ++i) s += x[i];
  const double mean = s / static_cast<double>(n);
  double v = 0.0;
  for (i64 i = 0; i < n; ++i) v += (x[i] - mean) * (x[i] - mean);
  const double rstd = 1.0 / std::sqrt(v / static_cast<double>(n) + eps);
  for (i64 i = 0; i < n; ++i) y[i] = static_cast<float>((x[i] - mean) * rstd * w[i] + b[i]);
}

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)stream;
  if (int e = vbk::check_args(inputs, n_inputs, 3, outputs, n_outputs, 1, n_attrs, 1)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  DLTensor& ty = outputs[0];
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [B,D], got %d", tx.ndim);
  const i64 B = tx.shape[0], D = tx.shape[1];
  if (int e = vbk::check_shape(tx, "x", {B, D})) return e;
  if (int e = vbk::check_shape(inputs[1], "weight", {D})) return e;
  if (int e = vbk::check_shape(inputs[2], "bias", {D})) return e;
  if (int e = vbk::check_shape(ty, "y", {B, D})) return e;
  const float eps = static_cast<float>(attrs[0]);
  if (!(eps >= 0.0f)) return vbk::fail("eps must be >= 0 (got %g)", attrs[0]);
  if (B == 0 || D == 0) return 0;

  const Dt dt = vbk::dtype_of(tx);
  const void* x = vbk::data_ptr(tx);
  void* y = vbk::data_ptr(ty);
  const bool f32 = dt == Dt::F32;

  vbk::Scratch wb(f32 ? 0 : 2 * D);
  if (!wb.ok()) return vbk::fail("out of memory (weight/bias)");
  const float *w, *b;
  if (f32) {
    w = static_cast<const float*>(vbk::data_ptr(inputs[1]));
    b = static_cast<const float*>(vbk::data_ptr(inputs[2]));
  } else {
    vbk::load_f32(vbk::data_ptr(inputs[1]), dt, 0, D, wb.get());
    vbk::load_f32(vbk::data_ptr(inputs[2]), dt, 0, D, wb.get() + D);
    w = wb.get();
    b = wb.get() + D;
  }

  const bool par = B > 1 && B * D >= (i64{1} << 15);
  // Non-temporal stores skip the read-for-ownership but leave y out of the cache: right for an
  // output far larger than the LLC, wrong for a model's activations that the next op reads
  // back at once (GPT-2 at 64 tokens: 64x768, 192 KiB). From 4 MiB on by default.
  const bool nt_stores = B * D * (f32 ? 4 : 2) >= (i64{1} << STREAM_MIN_LOG2);
  bool oom = false;
#if defined(__AVX512F__)
  // fp32 with non-temporal stores into a 64-byte-aligned y whose rows stay aligned: each
  // thread's rows in one pipelined loop per row (this row's output streamed out while the next
  // row is read and summed; its shifted sums then run from cache).
  if (PIPELINE && f32 && nt_stores && (reinterpret_cast<std::uintptr_t>(y) & 63) == 0 && D % 16 == 0) {
    const float* xf = static_cast<const float*>(x);
    float* yf = static_cast<float*>(y);
#pragma omp parallel if (par)
    {
      const i64 T = omp_get_num_threads(), t = omp_get_thread_num();
      const i64 lo = B * t / T, hi = B * (t + 1) / T;
      // Row r's shifted sums (d, q) around c = x_r[0] are ready when its output loop runs, in
      // which row r+1's are taken.
      float c = 0.0f, d = 0.0f, q = 0.0f;
      if (lo < hi) {
        c = xf[lo * D];
        shifted_sums_v(xf + lo * D, D, c, d, q);
      }
      for (i64 r = lo; r < hi; ++r) {
        const float* xr = xf + r * D;
        const float* x1 = r + 1 < hi ? xf + (r + 1) * D : nullptr;
        const float c1 = x1 ? x1[0] : 0.0f;
        float d1 = 0.0f, q1 = 0.0f, dm = 0.0f, rstd = 0.0f;
        if (stats_shifted(xr, D, eps, c, d, q, dm, rstd)) {
          pipe2(xr, w, b, yf + r * D, D, c, dm, rstd, x1, c1, d1, q1);
        } else {  // rare: fp32 statistics overflowed (or inf/NaN inputs)
          row_double(xr, w, b, yf + r * D, D, eps);
          if (x1) shifted_sums_v(x1, D, c1, d1, q1);
        }
        c = c1, d = d1, q = q1;
      }
      vbk::stream_fence();
    }
    return 0;
  }
#endif
#pragma omp parallel if (par)
  {
    // Thread-local fp32 row [D] + staging for a 16-bit output row [D/2 floats].
    vbk::Scratch buf(D + (D + 1) / 2);
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (i64 r = 0; r < B; ++r) {
      if (!buf.ok()) continue;
      float* row = buf.get();
      float c = 0.0f, dm = 0.0f, rstd = 0.0f;
      const float* xr;
      if (f32) {
        xr = static_cast<const float*>(x) + r * D;
      } else {
        vbk::load_f32(x, dt, r * D, D, row);
        xr = row;
      }
      const int esz = f32 ? 4 : 2;
      const void* next = r + 1 < B ? static_cast<const char*>(x) + (r + 1) * D * esz : nullptr;
      const bool ok = row_stats(xr, D, eps, c, dm, rstd);
      float* const yr = static_cast<float*>(y) + r * D;
      if (ok && f32 && !nt_stores) {  // a model-sized output: ordinary stores straight into y
        apply(xr, w, b, yr, D, c, dm, rstd, next, esz);
        continue;
      }
#if defined(__AVX512F__)
      if (ok && f32 && (reinterpret_cast<std::uintptr_t>(yr) & 63) == 0) {
        apply_stream(xr, w, b, yr, D, c, dm, rstd, next, esz);  // no row buffer
        continue;
      }
#endif
      if (ok)
        apply(xr, w, b, row, D, c, dm, rstd, next, esz);
      else
        row_double(xr, w, b, row, D, eps);
      if (nt_stores)
        vbk::stream_store_f32(row, dt, y, r * D, D, row + D);  // written once: non-temporal stores
      else
        vbk::store_f32(row, dt, y, r * D, D);
    }
    vbk::stream_fence();
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
