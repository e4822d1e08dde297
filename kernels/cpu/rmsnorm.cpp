// rmsnorm (CPU starter): y[M,N] = x / sqrt(mean(x²) + eps) * weight (DESIGN §2).
//
// One row at a time, rows split statically over OpenMP threads. Per row, in fp32:
//   pass 1  ss = Σ x²  (64 fixed lanes, pairwise combine: deterministic)
//   pass 2  y = x * rsqrt(ss/N + eps) * w, rounded once to the output dtype
// Statistics are fp32 whatever the storage dtype, so fp16 rows whose Σx² exceeds 65504 stay
// finite. If Σx² overflows fp32 (bf16/fp32 values near the dtype's max) the row's statistic is
// recomputed in double, so the result matches the fp64 oracle instead of collapsing to 0.
// The row is read from memory once; pass 2 runs from cache into a thread-local row that is
// written out (outputs of >= 2^STREAM_MIN_LOG2 bytes; smaller ones, a model's activations that
// the next op reads at once, go straight into y with ordinary stores) with non-temporal stores (vbk::stream_store_f32: no read-for-ownership of the
// output lines). The weight is converted to fp32 once per call. fp32 rows with AVX-512 skip
// the row buffer: pass 2 streams straight into y (apply_stream; 4096x4096 here 4.26 -> 3.17 ms,
// 97 % of a non-temporal copy of the same bytes in the same minute).
// PIPELINE (fp32, AVX-512, non-temporal output, N % 16 == 0): each thread takes a contiguous
// share of rows and runs ONE loop per row that streams row r's output while it reads row r+1
// from DRAM and sums its squares (software prefetch PIPE_AHEAD bytes ahead), so the DRAM reads
// and the non-temporal stores run together as in a streaming copy and no pass leaves the bus
// idle (4096x4096 fp32 on this 2-core Ice Lake VM, 2026-12-07, in-process medians: 4.04-4.12 ->
// 3.23-3.32 ms, 71 -> 88 % of the 46.1 GB/s copy ceiling; bench 3419 us, 84.7 %).
#include "vb_kernel.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour):
// @vb-param LANES 64 {16,32,64,128}  fp32 accumulator lanes of the row reductions (fixed order; the PIPELINE path always sums over 64)
#ifndef LANES
#define LANES 64
#endif
// @vb-param NUM_THREADS 0 {0,1,2,4,8,16,32,64}  OpenMP threads (0 = the runtime's default)
#ifndef NUM_THREADS
#define NUM_THREADS 0
#endif
// @vb-param PAR_MIN_LOG2 15 {12,15,18,21}  split rows over threads from 2^k elements on
#ifndef PAR_MIN_LOG2
#define PAR_MIN_LOG2 15
#endif
// @vb-param PREFETCH_NEXT 1 {0,1}  1 prefetch the next row while this one is scaled
#ifndef PREFETCH_NEXT
#define PREFETCH_NEXT 1
#endif
// @vb-param STREAM_STORES 1 {0,1}  1 non-temporal output stores, 0 ordinary stores
#ifndef STREAM_STORES
#define STREAM_STORES 1
#endif
// @vb-param STREAM_MIN_LOG2 22 {0,18,20,22,24}  non-temporal stores only from 2^k output bytes on
#ifndef STREAM_MIN_LOG2
#define STREAM_MIN_LOG2 22
#endif

// @vb-param PIPELINE 1 {0,1}  1 (fp32, AVX-512, non-temporal output): one loop per row that streams this row's output while it reads the next row and sums its squares
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

inline float combine_sum(float* acc) {
  for (int w = LANES / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

/// Σ x² over 64 fixed lanes.
inline float sum_squares(const float* __restrict x, i64 n) {
  float acc[LANES] = {};
  i64 i = 0;
  for (; i + LANES <= n; i += LANES) {
#pragma omp simd
    for (int j = 0; j < LANES; ++j) acc[j] += x[i + j] * x[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j] * x[i + j];
  return combine_sum(acc);
}

/// 1 / sqrt(mean(x²) + eps), with a double fallback when fp32 Σx² overflows.
inline float inv_rms(const float* __restrict x, i64 n, float eps) {
  const float ss = sum_squares(x, n);
  if (std::isfinite(ss)) return 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  double d = 0.0;  // rare path: huge values (or inf/NaN inputs, which then propagate)
  for (i64 i = 0; i < n; ++i) d += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(d / static_cast<double>(n) + eps));
}

/// y = x * r * w (y may be x: same-index in-place update). Meanwhile the next row (`next`,
/// `esz` bytes per element; nullable) is prefetched, a slice per block of 64 elements.
inline void apply(const float* x, const float* __restrict w, float* y, i64 n, float r,
                  const void* next, int esz) {
  for (i64 i0 = 0; i0 < n; i0 += 64) {
    const i64 i1 = i0 + 64 < n ? i0 + 64 : n;
    if (PREFETCH_NEXT) vbk::prefetch_span(next, i0 * esz, i1 * esz, n * esz);
#pragma omp simd
    for (i64 i = i0; i < i1; ++i) y[i] = x[i] * r * w[i];
  }
}

#if defined(__AVX512F__)
/// apply() written straight to the output row `y` with non-temporal stores (no row buffer, no
/// second pass over it). Needs y 64-byte aligned; the n % 16 tail uses ordinary stores.
inline void apply_stream(const float* x, const float* __restrict w, float* y, i64 n, float r,
                         const void* next, int esz) {
  const __m512 vr = _mm512_set1_ps(r);
  i64 i = 0;
  for (; i + 16 <= n; i += 16) {
    if (PREFETCH_NEXT && (i & 63) == 0) vbk::prefetch_span(next, i * esz, (i + 64) * esz, n * esz);
    _mm512_stream_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vr), _mm512_loadu_ps(w + i)));
  }
  for (; i < n; ++i) y[i] = x[i] * r * w[i];
}
#endif

#if defined(__AVX512F__)
/// Σ x² over 64 lanes (4 vectors of 16, FMA, pairwise combine): the statistic of the pipelined
/// path, in the same order for the first row of a thread and for the rows after it.
inline float sum_squares_v(const float* __restrict x, i64 n) {
  __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (i64 i = 0; i < n; i += 16) {
    const i64 left = n - i;
    const __mmask16 mk = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(mk, x + i);
    a[(i >> 4) & 3] = _mm512_fmadd_ps(v, v, a[(i >> 4) & 3]);
  }
  alignas(64) float acc[64];
  for (int k = 0; k < 4; ++k) _mm512_store_ps(acc + 16 * k, a[k]);
  for (int w = 32; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

/// 1 / sqrt(ss/n + eps) from fp32 Σx² of the row at x, re-summed in double if it overflowed.
inline float inv_rms_from(float ss, const float* x, i64 n, float eps) {
  if (std::isfinite(ss)) return 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  double d = 0.0;  // rare path: huge values (or inf/NaN inputs, which then propagate)
  for (i64 i = 0; i < n; ++i) d += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(d / static_cast<double>(n) + eps));
}

/// y = x * r * w streamed into y (64-byte aligned) while Σ x2² of the next row x2 (nullable) is
/// summed in the same loop, in the lanes and order of sum_squares_v: the next row's DRAM reads
/// and this row's non-temporal stores run together, as in a streaming copy.
inline float apply_stream_next(const float* x, const float* __restrict w, float* y, i64 n,
                               float r, const float* x2) {
  const __m512 vr = _mm512_set1_ps(r);
  __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  i64 i = 0;
  for (; i + 16 <= n; i += 16) {
    if (x2) {
      if (PIPE_AHEAD > 0) __builtin_prefetch(x2 + i + PIPE_AHEAD / 4, 0, 1);
      const __m512 v = _mm512_loadu_ps(x2 + i);
      a[(i >> 4) & 3] = _mm512_fmadd_ps(v, v, a[(i >> 4) & 3]);
    }
    _mm512_stream_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vr), _mm512_loadu_ps(w + i)));
  }
  if (i < n) {
    const __mmask16 mk = __mmask16((1u << (n - i)) - 1u);
    if (x2) {
      const __m512 v = _mm512_maskz_loadu_ps(mk, x2 + i);
      a[(i >> 4) & 3] = _mm512_fmadd_ps(v, v, a[(i >> 4) & 3]);
    }
    for (; i < n; ++i) y[i] = x[i] * r * w[i];
  }
  if (!x2) return 0.0f;
  alignas(64) float acc[64];
  for (int k = 0; k < 4; ++k) _mm512_store_ps(acc + 16 * k, a[k]);
  for (int w2 = 32; w2 > 0; w2 /= 2)
    for (int j = 0; j < w2; ++j) acc[j] += acc[j + w2];
  return acc[0];
}
#endif

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)stream;
  if (int e = vbk::check_args(inputs, n_inputs, 2, outputs, n_outputs, 1, n_attrs, 1)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  const DLTensor& tw = inputs[1];
  DLTensor& ty = outputs[0];
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [M,N], got %d", tx.ndim);
  const i64 M = tx.shape[0], N = tx.shape[1];
  if (int e = vbk::check_shape(tx, "x", {M, N})) return e;
  if (int e = vbk::check_shape(tw, "weight", {N})) return e;
  if (int e = vbk::check_shape(ty, "y", {M, N})) return e;
  const float eps = static_cast<float>(attrs[0]);
  if (!(eps >= 0.0f)) return vbk::fail("eps must be >= 0 (got %g)", attrs[0]);
  if (M == 0 || N == 0) return 0;

  const Dt dt = vbk::dtype_of(tx);
  const void* x = vbk::data_ptr(tx);
  void* y = vbk::data_ptr(ty);
  const bool f32 = dt == Dt::F32;

  vbk::Scratch wbuf(f32 ? 0 : N);
  if (!wbuf.ok()) return vbk::fail("out of memory (weight)");
  const float* w;
  if (f32) {
    w = static_cast<const float*>(vbk::data_ptr(tw));
  } else {
    vbk::load_f32(vbk::data_ptr(tw), dt, 0, N, wbuf.get());
    w = wbuf.get();
  }

  const bool par = M > 1 && M * N >= (i64{1} << PAR_MIN_LOG2);
  // Non-temporal stores skip the read-for-ownership but leave y out of the cache: right for an
  // output far larger than the LLC, wrong for a model's activations that the next op reads
  // back at once (GPT-2/LLaMA at 64 tokens: 128-192 KiB). From 4 MiB on by default.
  const bool nt_stores = STREAM_STORES && M * N * (f32 ? 4 : 2) >= (i64{1} << STREAM_MIN_LOG2);
  const int n_threads = NUM_THREADS > 0 ? NUM_THREADS : omp_get_max_threads();
  bool oom = false;
#if defined(__AVX512F__)
  // fp32 with non-temporal stores into a 64-byte-aligned y whose rows stay aligned: each
  // thread's rows in one pipelined loop per row (this row's output streamed out while the next
  // row is read and its Σx² summed); a row is read from DRAM once and from cache once.
  if (PIPELINE && f32 && nt_stores && (reinterpret_cast<std::uintptr_t>(y) & 63) == 0 && N % 16 == 0) {
    const float* xf = static_cast<const float*>(x);
    float* yf = static_cast<float*>(y);
#pragma omp parallel if (par) num_threads(n_threads)
    {
      const i64 T = omp_get_num_threads(), t = omp_get_thread_num();
      const i64 lo = M * t / T, hi = M * (t + 1) / T;
      if (lo < hi) {
        float ss = sum_squares_v(xf + lo * N, N);
        for (i64 r = lo; r < hi; ++r) {
          const float ir = inv_rms_from(ss, xf + r * N, N, eps);
          ss = apply_stream_next(xf + r * N, w, yf + r * N, N, ir, r + 1 < hi ? xf + (r + 1) * N : nullptr);
        }
      }
      vbk::stream_fence();
    }
    return 0;
  }
#endif
#pragma omp parallel if (par) num_threads(n_threads)
  {
    // Thread-local row [N] (the fp32 result) + staging for the 16-bit output [N/2 floats].
    vbk::Scratch buf(N + (N + 1) / 2);
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (i64 r = 0; r < M; ++r) {
      if (!buf.ok()) continue;
      float* b = buf.get();
      const float* xr;
      if (f32) {
        xr = static_cast<const float*>(x) + r * N;
      } else {
        vbk::load_f32(x, dt, r * N, N, b);
        xr = b;
      }
      const int esz = f32 ? 4 : 2;
      const void* next = r + 1 < M ? static_cast<const char*>(x) + (r + 1) * N * esz : nullptr;
      const float ir = inv_rms(xr, N, eps);
      float* const yr = static_cast<float*>(y) + r * N;
      if (f32 && !nt_stores) {  // a model-sized output: ordinary stores straight into y
        apply(xr, w, yr, N, ir, next, esz);
        continue;
      }
#if defined(__AVX512F__)
      if (f32 && (reinterpret_cast<std::uintptr_t>(yr) & 63) == 0) {
        apply_stream(xr, w, yr, N, ir, next, esz);  // no row buffer
        continue;
      }
#endif
      apply(xr, w, b, N, ir, next, esz);
      if (nt_stores)
        vbk::stream_store_f32(b, dt, y, r * N, N, b + N);  // written once: non-temporal stores
      else
        vbk::store_f32(b, dt, y, r * N, N);
    }
    vbk::stream_fence();
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
