// reduce (CPU starter): y[M] = Σ_j x[M,N] over the last dim, fp32 accumulation, output in the
// input dtype (DESIGN §2).
//
// Each row is cut into fixed chunks of CHUNK elements; a work item is one (row, chunk) pair, so
// both many short rows and a few very long rows spread over the OpenMP threads (static
// schedule). A chunk is summed in fp32 over 64 fixed lanes with a pairwise combine; the chunk
// partials of a row are then added in chunk order. Both orders are fixed by the shape alone, so
// results are bitwise deterministic and independent of the thread count. fp16/bf16 chunks are
// converted to fp32 in registers with AVX-512 (AVX512_16BIT), else in pieces of PIECE elements
// through a stack buffer; both give bitwise the same sums (one pass over memory either way).
// If a row's fp32 sum overflows while its inputs are finite (values near the dtype's max with
// cancellation), the row is re-summed in double so the result matches the fp64 oracle.
// The reads are software-prefetched PREFETCH_BYTES ahead of the summing position (across row
// ends: a thread's rows are contiguous), which keeps more DRAM reads in flight than the
// hardware prefetcher alone: 4096x4096 fp32 on this 2-core EPYC VM went from 0.93-0.96x to
// 1.09-1.13x torch.sum (same process, alternating, 9-11 rounds, 2026-12-05); prefetcht2 rather
// than prefetchnta (PREFETCH_LOCALITY 1 vs 0): 2211 -> 2106 us median of 8 alternating runs
// (2026-12-05). Rows that fit in one work item (N <= CHUNK) are summed in a single parallel
// region, with no partial-sum pass and no barrier between passes; each thread cuts its rows
// into ROW_GROUP contiguous streams and sums one row of each at a time, GROUP_BLOCK elements of
// a row per visit, so 8 sequential DRAM streams per core are in flight instead of one (4096x4096
// fp32 on this 2-core Ice Lake VM, 2026-12-07: 2.64-2.74 -> 2.20-2.26 ms, 53-55 % -> 65-66 % of
// the 46.1 GB/s copy ceiling; 2 cores read at most ~30 GB/s whatever the pattern).
#include "vb_kernel.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour):
// @vb-param LANES 64 {16,32,64,128}  fp32 accumulator lanes (PIECE stays a multiple)
#ifndef LANES
#define LANES 64
#endif
// @vb-param CHUNK_LOG2 16 {14,16,18,20}  elements per work item = 2^k
#ifndef CHUNK_LOG2
#define CHUNK_LOG2 16
#endif
// @vb-param NUM_THREADS 0 {0,1,2,4,8,16,32,64}  OpenMP threads (0 = the runtime's default)
#ifndef NUM_THREADS
#define NUM_THREADS 0
#endif
// @vb-param PAR_MIN_LOG2 15 {12,15,18,21}  use threads from 2^k elements on
#ifndef PAR_MIN_LOG2
#define PAR_MIN_LOG2 15
#endif
// @vb-param PREFETCH_BYTES 8192 {0,2048,4096,8192,16384,32768}  software prefetch distance ahead of the reads (0 = none)
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 8192
#endif

// @vb-param PREFETCH_LOCALITY 1 {0,1,2,3}  __builtin_prefetch locality: 0 non-temporal (prefetchnta), 1 (prefetcht2), 2 (t1), 3 (t0)
#ifndef PREFETCH_LOCALITY
#define PREFETCH_LOCALITY 1
#endif

// @vb-param AVX512_16BIT 1 {0,1}  1 bf16/fp16 converted in registers (AVX-512 builds only); 0 through a stack buffer
#ifndef AVX512_16BIT
#define AVX512_16BIT 1
#endif

// @vb-param ROW_GROUP 8 {1,4,8,16,32}  DRAM streams per thread when a row is one work item: a thread's rows are cut into this many contiguous streams, summed one row of each at a time, interleaved (1 = one row after the other)
#ifndef ROW_GROUP
#define ROW_GROUP 8
#endif
// @vb-param GROUP_BLOCK 64 {64,128,256,512}  elements of one row read before moving to the next stream (rounded up to a multiple of LANES)
#ifndef GROUP_BLOCK
#define GROUP_BLOCK 64
#endif
// @vb-param GROUP_PREFETCH 0 {0,1}  1 software prefetch inside the row groups as well (the hardware prefetcher follows the interleaved streams by itself)
#ifndef GROUP_PREFETCH
#define GROUP_PREFETCH 0
#endif

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

using vbk::Dt;
using i64 = std::int64_t;
constexpr i64 CHUNK = i64{1} << CHUNK_LOG2;  // elements per work item
constexpr i64 PIECE = 2048;     // conversion piece (8 KiB of fp32 on the stack)
// Elements of one row per visit in the interleaved row groups: a multiple of LANES, so that
// every visit starts on lane 0 and the lane order is that of chunk_sum.
constexpr i64 GBLOCK = (GROUP_BLOCK + LANES - 1) / LANES * LANES;

inline float combine_sum(float* acc) {
  for (int w = LANES / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

/// Hints the cache lines of bytes [p, p + n) (a prefetch never faults, so p may run past the
/// end of the input; it has no effect on results).
inline void prefetch_bytes(const void* p, i64 n) {
  const char* c = static_cast<const char*>(p);
  for (i64 b = 0; b < n; b += 64) __builtin_prefetch(c + b, 0, PREFETCH_LOCALITY);
}

/// acc[j] += x[i] for i ≡ j (mod LANES), over n floats; `prefetch`: hint the input
/// PREFETCH_BYTES ahead (x is the input itself, not a converted copy).
inline void lane_accumulate(float* __restrict acc, const float* __restrict x, i64 n,
                            bool prefetch) {
  i64 i = 0;
  for (; i + LANES <= n; i += LANES) {
    if (PREFETCH_BYTES > 0 && prefetch) prefetch_bytes(x + i + PREFETCH_BYTES / 4, LANES * 4);
#pragma omp simd
    for (int j = 0; j < LANES; ++j) acc[j] += x[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
}

#if defined(__AVX512F__)
/// lane_accumulate over n 16-bit elements (bf16 or fp16) converted in registers, no staging
/// buffer: the same lanes and the same order (element i goes to lane i mod LANES), so the sums
/// are bitwise those of the buffered path. Prefetches PREFETCH_BYTES ahead.
inline void lane_accumulate_16(float* __restrict acc, const std::uint16_t* __restrict x, i64 n,
                               bool bf16) {
  static_assert(LANES % 16 == 0, "LANES must be a multiple of 16 for the AVX-512 path");
  __m512 a[LANES / 16];
  for (int k = 0; k < LANES / 16; ++k) a[k] = _mm512_loadu_ps(acc + 16 * k);
  i64 i = 0;
  for (; i + LANES <= n; i += LANES) {
    if (PREFETCH_BYTES > 0) prefetch_bytes(x + i + PREFETCH_BYTES / 2, LANES * 2);
    for (int k = 0; k < LANES / 16; ++k) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 16 * k));
      const __m512 v = bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                            : _mm512_cvtph_ps(h);
      a[k] = _mm512_add_ps(a[k], v);
    }
  }
  for (int k = 0; k < LANES / 16; ++k) _mm512_storeu_ps(acc + 16 * k, a[k]);
  for (int j = 0; i + j < n; ++j)
    acc[j] += bf16 ? vbk::bf16_to_float(x[i + j]) : vbk::half_to_float(x[i + j]);
}
#endif

/// Σ of elements [off, off+n) of x (dtype dt) in fp32.
inline float chunk_sum(const void* x, Dt dt, i64 off, i64 n) {
  float acc[LANES] = {};
  if (dt == Dt::F32) {
    lane_accumulate(acc, static_cast<const float*>(x) + off, n, true);
  } else {
#if defined(__AVX512F__) && AVX512_16BIT
    lane_accumulate_16(acc, static_cast<const std::uint16_t*>(x) + off, n, dt == Dt::BF16);
#else
    alignas(64) float buf[PIECE];
    for (i64 p = 0; p < n; p += PIECE) {
      const i64 k = std::min(PIECE, n - p);
      if (PREFETCH_BYTES > 0)
        prefetch_bytes(static_cast<const char*>(x) + (off + p) * 2 + PREFETCH_BYTES, k * 2);
      vbk::load_f32(x, dt, off + p, k, buf);
      lane_accumulate(acc, buf, k, false);  // PIECE is a multiple of LANES: lanes stay aligned
    }
#endif
  }
  return combine_sum(acc);
}

/// Σ of each of g <= ROW_GROUP rows of x (row length n <= CHUNK) into out[0..g),
/// bitwise equal to chunk_sum of each row: the same lanes (element i to lane i mod LANES) and
/// the same order, only the rows are visited in turn, GBLOCK elements at a time, so that g
/// sequential DRAM streams are in flight per core (one stream per core leaves this machine's
/// memory bus partly idle: 2 cores read 24-25 GB/s from one stream each, 29-30 GB/s from 8-16).
/// `rows`: the g row indices.
inline void group_sums(const void* x, Dt dt, const i64* rows, i64 g, i64 n, float* out) {
  alignas(64) float acc[ROW_GROUP][LANES] = {};
  const i64 full = n / LANES * LANES;  // whole lane groups; the tail is added per row below
  for (i64 i0 = 0; i0 < full; i0 += GBLOCK) {
    const i64 len = std::min<i64>(GBLOCK, full - i0);
    for (i64 k = 0; k < g; ++k) {
      const i64 off = rows[k] * n + i0;
      if (dt == Dt::F32) {
        lane_accumulate(acc[k], static_cast<const float*>(x) + off, len, GROUP_PREFETCH);
      } else {
#if defined(__AVX512F__) && AVX512_16BIT
        lane_accumulate_16(acc[k], static_cast<const std::uint16_t*>(x) + off, len, dt == Dt::BF16);
#else
        alignas(64) float buf[GBLOCK];
        vbk::load_f32(x, dt, off, len, buf);
        lane_accumulate(acc[k], buf, len, false);
#endif
      }
    }
  }
  for (i64 k = 0; k < g; ++k) {
    const i64 off = rows[k] * n;
    if (dt == Dt::F32) {
      lane_accumulate(acc[k], static_cast<const float*>(x) + off + full, n - full, false);
    } else {
      for (i64 j = 0; full + j < n; ++j) {
        const std::uint16_t h = static_cast<const std::uint16_t*>(x)[off + full + j];
        acc[k][j] += dt == Dt::BF16 ? vbk::bf16_to_float(h) : vbk::half_to_float(h);
      }
    }
    out[k] = combine_sum(acc[k]);
  }
}

/// Rare path: Σ in double.
inline double row_sum_double(const void* x, Dt dt, i64 off, i64 n) {
  double s = 0.0;
  alignas(64) float buf[PIECE];
  for (i64 p = 0; p < n; p += PIECE) {
    const i64 k = std::min(PIECE, n - p);
    vbk::load_f32(x, dt, off + p, k, buf);
    for (i64 i = 0; i < k; ++i) s += buf[i];
  }
  return s;
}

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)attrs;
  (void)stream;
  if (int e = vbk::check_args(inputs, n_inputs, 1, outputs, n_outputs, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  DLTensor& ty = outputs[0];
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [M,N], got %d", tx.ndim);
  const i64 M = tx.shape[0], N = tx.shape[1];
  if (int e = vbk::check_shape(tx, "x", {M, N})) return e;
  if (int e = vbk::check_shape(ty, "y", {M})) return e;
  if (M == 0) return 0;

  const Dt dt = vbk::dtype_of(tx);
  const void* x = vbk::data_ptr(tx);
  void* y = vbk::data_ptr(ty);

  const i64 chunks = std::max<i64>(1, (N + CHUNK - 1) / CHUNK);
  const i64 items = M * chunks;
  vbk::Scratch part(items), rows(M);
  if (!part.ok() || !rows.ok()) return vbk::fail("out of memory (partial sums)");
  float* const ps = part.get();
  float* const ys = rows.get();
  const bool par = items > 1 && M * N >= (i64{1} << PAR_MIN_LOG2);
  const int n_threads = NUM_THREADS > 0 ? NUM_THREADS : omp_get_max_threads();

  // Σ of row r from its chunk partials, re-summed in double if fp32 overflowed on finite inputs.
  auto finish_row = [&](i64 r, float s) {
    if (!std::isfinite(s)) {
      const double sd = row_sum_double(x, dt, r * N, N);  // overflow with finite inputs?
      if (std::isfinite(sd)) s = static_cast<float>(sd);   // rounds to ±inf past fp32 range
    }
    ys[r] = s;
  };
  if (chunks == 1 && ROW_GROUP > 1 && N >= GBLOCK) {
    // Rows of one work item: each thread's contiguous share of rows is cut into ROW_GROUP
    // contiguous streams, and the threads sum one row of each stream at a time, interleaved, so
    // that ROW_GROUP long sequential DRAM streams are in flight per core. The result does not
    // depend on the grouping (each row's lanes and order are those of chunk_sum).
#pragma omp parallel if (par) num_threads(n_threads)
    {
      const i64 T = omp_get_num_threads(), t = omp_get_thread_num();
      const i64 lo = M * t / T, hi = M * (t + 1) / T;
      const i64 per = (hi - lo + ROW_GROUP - 1) / ROW_GROUP;  // rows per stream
      for (i64 j = 0; j < per; ++j) {
        i64 rs[ROW_GROUP];
        i64 g = 0;
        for (i64 k = 0; k < ROW_GROUP; ++k)
          if (j < std::min(per, hi - lo - k * per)) rs[g++] = lo + k * per + j;
        float s[ROW_GROUP];
        group_sums(x, dt, rs, g, N, s);
        for (i64 k = 0; k < g; ++k) finish_row(rs[k], s[k]);
      }
    }
    vbk::store_f32(ys, dt, y, 0, M);
    return 0;
  }
  if (chunks == 1) {  // a row is one work item: one loop, no partial sums, no inner barrier
#pragma omp parallel for if (par) num_threads(n_threads) schedule(static)
    for (i64 r = 0; r < M; ++r) finish_row(r, N > 0 ? chunk_sum(x, dt, r * N, N) : 0.0f);
    vbk::store_f32(ys, dt, y, 0, M);
    return 0;
  }
#pragma omp parallel if (par) num_threads(n_threads)
  {
#pragma omp for schedule(static)
    for (i64 it = 0; it < items; ++it) {
      const i64 r = it / chunks, c = it % chunks;
      const i64 c0 = c * CHUNK, n = std::min(CHUNK, N - c0);
      ps[it] = n > 0 ? chunk_sum(x, dt, r * N + c0, n) : 0.0f;
    }
#pragma omp for schedule(static)
    for (i64 r = 0; r < M; ++r) {
      float s = 0.0f;
      for (i64 c = 0; c < chunks; ++c) s += ps[r * chunks + c];
      finish_row(r, s);
    }
  }
  vbk::store_f32(ys, dt, y, 0, M);
  return 0;
}
