// softmax (CPU starter): y[R,C] = softmax(x[R,C]) over the last dim, max-subtracted (DESIGN §2).
//
// One row at a time, rows split statically over OpenMP threads. Per row (fp32 throughout):
//   pass 1  m = max(x)                               (64 fixed lanes, exact)
//   pass 2  e = exp(x - m) into a thread-local fp32 row, s = Σ e (64 fixed lanes, pairwise
//           combine); with AVX-512 exp is vbk::exp_shifted_f32x16 (vb_cpu_exp.h: 2^(x·log2 e -
//           m·log2 e), one FMA for the shift, a degree-5 polynomial; 10 vector ops against 15
//           for vbk::exp_f32x16(x - m), which rows with |m| > 2^20 still take). The pass is
//           compute-bound next to the DRAM stream on this machine's cores.
//   pass 3  y = e * (1/s), rounded once to the output dtype and written (non-temporal stores,
//           for outputs of >= 2^STREAM_MIN_LOG2 bytes: no read-for-ownership; ordinary ones
//           below, so a model's next op finds y in cache), in pieces interleaved with the next
//           row's pass 2 (two row buffers), so the stores drain while exp is computed: fp32
//           rows scale and stream in one AVX-512 loop, F32_BLOCK (128) elements per piece,
//           16-bit rows convert through vbk::stream_store_f32 in WRITE_BLOCK pieces.
// 4096x4096 fp32 on this 2-core Ice Lake VM (2026-12-07, in-process medians): 4.7-5.0 ms ->
// 3.9-4.05 ms (58-62 % -> 72-74 % of the 46.1 GB/s copy ceiling) from the cheaper exp, the
// fused scale+store, 128-element pieces (512: 4.2 ms) and prefetcht2 for the next row.
// The row is read from memory once (fp16/bf16 rows are converted into the thread-local row;
// fp32 rows are read in place) and passes 2-3 run from cache. While pass 2 computes, the next
// row is prefetched into L2 (PREFETCH_NEXT; L1 holds this row and its output), so its DRAM reads overlap this row's arithmetic instead of
// leaving the memory bus idle (4096x4096 fp32 here: 7.4-8.4 ms -> 5.5-5.7 ms). Semantics follow PyTorch:
// -inf entries give 0, an all -inf row gives NaN (exp(-inf - -inf) = NaN), NaN propagates.
// The lane structure is fixed, so results are bitwise deterministic.
#include "vb_kernel.h"
#include "vb_cpu_exp.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour):
// @vb-param LANES 64 {16,32,64,128}  fp32 accumulator lanes of the row reductions (fixed order)
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
// @vb-param STREAM_STORES 1 {0,1}  1 non-temporal output stores, 0 ordinary stores
#ifndef STREAM_STORES
#define STREAM_STORES 1
#endif
// @vb-param STREAM_MIN_LOG2 22 {0,18,20,22,24}  non-temporal stores only from 2^k output bytes on
#ifndef STREAM_MIN_LOG2
#define STREAM_MIN_LOG2 22
#endif

// @vb-param PREFETCH_NEXT 1 {0,1,2,3}  k > 0: prefetch row r + k while row r is computed (0 = none)
#ifndef PREFETCH_NEXT
#define PREFETCH_NEXT 1
#endif
// @vb-param PREFETCH_LOCALITY 1 {1,2,3}  __builtin_prefetch locality of those hints: 1 prefetcht2, 2 prefetcht1 (L2), 3 prefetcht0 (L1)
#ifndef PREFETCH_LOCALITY
#define PREFETCH_LOCALITY 1
#endif
// @vb-param F32_BLOCK 128 {64,128,256,512}  fp32 rows: elements per block of the pipelined pass 2 / output (a multiple of LANES; smaller blocks spread the non-temporal stores between the exponentials)
#ifndef F32_BLOCK
#define F32_BLOCK 128
#endif
// @vb-param WRITE_BLOCK 512 {512,1024,2048}  elements per block of the pipelined pass 2 / output (>= 512: fp16/bf16 non-temporal stores need 512)
#ifndef WRITE_BLOCK
#define WRITE_BLOCK 512
#endif
static_assert(WRITE_BLOCK % LANES == 0, "WRITE_BLOCK must be a multiple of LANES (the sum's lane order)");
static_assert(WRITE_BLOCK >= 512 || !STREAM_STORES, "WRITE_BLOCK: fp16/bf16 non-temporal stores need 512");

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace {

using vbk::Dt;
using i64 = std::int64_t;

/// Pairwise combine of the 64 lane accumulators (fixed order).
inline float combine_sum(float* acc) {
  for (int w = LANES / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

/// max over n floats (NaN entries are skipped here; they still propagate through exp and Σ).
inline float row_max(const float* __restrict x, i64 n) {
#if defined(__AVX512F__)
  {  // 4 zmm accumulators (max is exact: the order does not matter); vmaxps returns its second
     // operand when one is NaN, so NaN entries are skipped as below
    __m512 a0 = _mm512_set1_ps(-__builtin_inff()), a1 = a0, a2 = a0, a3 = a0;
    i64 i = 0;
    for (; i + 64 <= n; i += 64) {
      a0 = _mm512_max_ps(_mm512_loadu_ps(x + i), a0);
      a1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), a1);
      a2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), a2);
      a3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), a3);
    }
    for (; i < n; i += 16) {
      const __mmask16 mk = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
      a0 = _mm512_mask_max_ps(a0, mk, _mm512_maskz_loadu_ps(mk, x + i), a0);
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
  }
#endif
  float acc[LANES];
  for (int j = 0; j < LANES; ++j) acc[j] = -__builtin_inff();
  i64 i = 0;
  for (; i + LANES <= n; i += LANES) {
#pragma omp simd
    for (int j = 0; j < LANES; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = acc[0];
  for (int j = 1; j < LANES; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

/// y[i] = exp(x[i] - m) for i in [i0, i1), accumulated into the LANES lanes acc (lane = i mod
/// LANES, so the sum's order does not depend on the block boundaries when i0 is a multiple of
/// LANES). x and y may be the same buffer. `next` (nullable): the next row's input, the same
/// slice prefetched meanwhile (`esz` bytes per element), so its DRAM reads overlap this row's
/// arithmetic.
inline void exp_shift_acc(const float* x, float* y, i64 i0, i64 i1, float m, const char* next,
                          int esz, float* acc) {
  i64 i = i0;
#if defined(__AVX512F__)
  if constexpr (LANES % 16 == 0) {  // the same lanes, 16 per zmm register, exp by exp_f32x16
    __m512 a[LANES / 16];
    for (int k = 0; k < LANES / 16; ++k) a[k] = _mm512_loadu_ps(acc + 16 * k);
    auto run = [&](auto expv) {
      for (; i + LANES <= i1; i += LANES) {
        if (PREFETCH_NEXT && next)
          for (int b = 0; b < LANES * esz; b += 64)
            __builtin_prefetch(next + i * esz + b, 0, PREFETCH_LOCALITY);
        for (int k = 0; k < LANES / 16; ++k) {
          const __m512 e = expv(_mm512_loadu_ps(x + i + 16 * k));
          _mm512_storeu_ps(y + i + 16 * k, e);
          a[k] = _mm512_add_ps(a[k], e);
        }
      }
      // The tail (< LANES elements, starting on a lane boundary) by masked vectors, so every
      // element's exp is the same function whatever its position (equal inputs, equal outputs).
      for (int k = 0; k < LANES / 16 && i + 16 * k < i1; ++k) {
        const i64 left = i1 - (i + 16 * k);
        const __mmask16 mk = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
        const __m512 e = expv(_mm512_maskz_loadu_ps(mk, x + i + 16 * k));
        _mm512_mask_storeu_ps(y + i + 16 * k, mk, e);
        a[k] = _mm512_mask_add_ps(a[k], mk, a[k], e);
      }
    };
    if (vbk::exp_shift_fits(m)) {  // exp(x - m) as 2^(x·log2 e - m·log2 e): one FMA, 10 ops
      const __m512 c = vbk::exp_shift_const(m);
      run([c](__m512 v) { return vbk::exp_shifted_f32x16(v, c); });
    } else {  // |m| > 2^20 (or not finite): subtract first, as the oracle does
      const __m512 mv = _mm512_set1_ps(m);
      run([mv](__m512 v) { return vbk::exp_f32x16(_mm512_sub_ps(v, mv)); });
    }
    for (int k = 0; k < LANES / 16; ++k) _mm512_storeu_ps(acc + 16 * k, a[k]);
    return;
  }
#endif
  for (; i + LANES <= i1; i += LANES) {
    if (PREFETCH_NEXT && next)
      for (int b = 0; b < LANES * esz; b += 64) __builtin_prefetch(next + i * esz + b, 0, PREFETCH_LOCALITY);
#pragma omp simd
    for (int j = 0; j < LANES; ++j) {
      const float e = vbk::exp_f32(x[i + j] - m);
      y[i + j] = e;
      acc[j] += e;
    }
  }
  for (int j = 0; i + j < i1; ++j) {
    const float e = vbk::exp_f32(x[i + j] - m);
    y[i + j] = e;
    acc[j] += e;
  }
}

#if defined(__AVX512F__)
/// y[off + i] = e[i] * s for i in [0, n), fp32: one pass, non-temporal stores (`nt`) for the
/// 64-byte-aligned body, ordinary masked stores for the head and tail.
inline void write_scaled_f32(const float* __restrict e, float s, float* __restrict y, i64 n,
                             bool nt) {
  const __m512 sv = _mm512_set1_ps(s);
  i64 i = 0;
  if (nt) {
    const i64 head = std::min<i64>(n, ((64 - (reinterpret_cast<std::uintptr_t>(y) & 63)) & 63) / 4);
    if (head > 0) {
      const __mmask16 mk = __mmask16((1u << head) - 1u);
      _mm512_mask_storeu_ps(y, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, e), sv));
      i = head;
    }
    if (reinterpret_cast<std::uintptr_t>(y + i) % 64 == 0)
      for (; i + 16 <= n; i += 16) _mm512_stream_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(e + i), sv));
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(e + i), sv));
  if (i < n) {
    const __mmask16 mk = __mmask16((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, e + i), sv));
  }
}
#endif

inline void scale_row(float* __restrict y, i64 n, float s) {
#pragma omp simd
  for (i64 i = 0; i < n; ++i) y[i] *= s;
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
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [R,C], got %d", tx.ndim);
  const i64 R = tx.shape[0], C = tx.shape[1];
  if (int e = vbk::check_shape(tx, "x", {R, C})) return e;
  if (int e = vbk::check_shape(ty, "y", {R, C})) return e;
  if (R == 0 || C == 0) return 0;

  const Dt dt = vbk::dtype_of(tx);
  const void* x = vbk::data_ptr(tx);
  void* y = vbk::data_ptr(ty);
  const bool f32 = dt == Dt::F32;
  const bool par = R > 1 && R * C >= (i64{1} << PAR_MIN_LOG2);
  // Non-temporal stores skip the read-for-ownership but leave y out of the cache: right for an
  // output far larger than the LLC, wrong for a model's activations that the next op reads
  // back at once. From 2^STREAM_MIN_LOG2 bytes (4 MiB) on by default.
  const bool nt_stores = STREAM_STORES && R * C * (f32 ? 4 : 2) >= (i64{1} << STREAM_MIN_LOG2);
  const int n_threads = NUM_THREADS > 0 ? NUM_THREADS : omp_get_max_threads();
  bool oom = false;

#pragma omp parallel if (par) num_threads(n_threads)
  {
    // Thread-local: two fp32 rows [C] (this row's exp values and the previous row's, whose
    // output is written while this row is computed) + staging for a 16-bit row [C/2 floats].
    vbk::Scratch buf(2 * C + (C + 1) / 2);
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
    float* cur = buf.ok() ? buf.get() : nullptr;
    float* prev = buf.ok() ? buf.get() + C : nullptr;
    void* stage = buf.ok() ? static_cast<void*>(buf.get() + 2 * C) : nullptr;
    i64 prev_row = -1;  // the row whose exp values `prev` holds, not yet written
    float prev_inv = 0.0f;
    // Writes block [i0, i1) of the pending row: y = e * (1/s), rounded once.
    auto write_prev = [&](i64 i0, i64 i1) {
#if defined(__AVX512F__)
      if (f32) {  // scale and store in one pass (same products as scale_row)
        write_scaled_f32(prev + i0, prev_inv, static_cast<float*>(y) + prev_row * C + i0, i1 - i0,
                         nt_stores);
        return;
      }
#endif
      scale_row(prev + i0, i1 - i0, prev_inv);
      if (nt_stores)
        vbk::stream_store_f32(prev + i0, dt, y, prev_row * C + i0, i1 - i0, stage);
      else
        vbk::store_f32(prev + i0, dt, y, prev_row * C + i0, i1 - i0);
    };
#pragma omp for schedule(static)
    for (i64 r = 0; r < R; ++r) {
      if (!buf.ok()) continue;
      const float* xr;
      if (f32) {
        xr = static_cast<const float*>(x) + r * C;
      } else {
        vbk::load_f32(x, dt, r * C, C, cur);
        xr = cur;
      }
      const float m = row_max(xr, C);
      const int esz = f32 ? 4 : 2;
      const char* next = PREFETCH_NEXT > 0 && r + PREFETCH_NEXT < R
                             ? static_cast<const char*>(x) + (r + PREFETCH_NEXT) * C * esz
                             : nullptr;
      // Pass 2 of this row in blocks, each followed by the same block of the previous row's
      // output (software pipelining: the stores drain while this row's exp is computed).
      float acc[LANES] = {};
      // fp32 pieces: F32_BLOCK rounded up to a multiple of LANES (each piece starts on lane 0)
      const i64 block = f32 ? (F32_BLOCK + LANES - 1) / LANES * LANES : WRITE_BLOCK;
      for (i64 i0 = 0; i0 < C; i0 += block) {
        const i64 i1 = std::min<i64>(C, i0 + block);
        exp_shift_acc(xr, cur, i0, i1, m, next, esz, acc);
        if (prev_row >= 0) write_prev(i0, i1);
      }
      prev_inv = 1.0f / combine_sum(acc);
      prev_row = r;
      std::swap(cur, prev);
    }
    if (prev_row >= 0) write_prev(0, C);
    vbk::stream_fence();
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
