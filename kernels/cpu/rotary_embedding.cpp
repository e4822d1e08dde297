// rotary_embedding (CPU starter): y[B,H,S,D] = RoPE(x) with cos/sin tables [S, D/2] indexed by
// the position s (DESIGN §2).
//   interleaved = 0 (half-split, NeoX / LLaMA-HF), h = D/2, i < h:
//     y[i]   = x[i]·c[i] − x[i+h]·s[i]        y[i+h] = x[i+h]·c[i] + x[i]·s[i]
//   interleaved = 1 (GPT-J pairs):
//     y[2i]  = x[2i]·c[i] − x[2i+1]·s[i]      y[2i+1] = x[2i+1]·c[i] + x[2i]·s[i]
// Work items are blocks of consecutive rows of D elements (B·H·S rows in all), split statically
// over OpenMP threads; each row is read once and rotated in fp32 into a thread-local block that
// is rounded once and written (non-temporal stores, vbk::stream_store_f32, from 2^STREAM_MIN_LOG2
// output bytes on). fp16/bf16 cos/sin tables are converted to fp32 once per call (fp32 tables
// are used in place).
// fp32 with AVX-512 and D a multiple of 32 skips the thread-local block: each row is rotated in
// registers and written straight into y (rope_*_stream; non-temporal stores need y 64-byte
// aligned, else this path is skipped), the next rows prefetched meanwhile (PREFETCH_ROWS ahead).
// On either path, outputs under 2^STREAM_MIN_LOG2 bytes (a model's activations, read back at
// once by the next op) use ordinary stores.
#include "vb_kernel.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour):
// @vb-param PREFETCH_ROWS 8 {0,2,4,8,16}  rows of x prefetched ahead (the fp32 AVX-512 direct path only)
#ifndef PREFETCH_ROWS
#define PREFETCH_ROWS 8
#endif
// @vb-param STREAM_MIN_LOG2 22 {0,18,20,22,24,62}  non-temporal stores only from 2^k output bytes on
#ifndef STREAM_MIN_LOG2
#define STREAM_MIN_LOG2 22
#endif
// @vb-param DIRECT 1 {0,1}  1 fp32 rows (D % 32 == 0) rotated straight into y (AVX-512 builds only); 0 through the thread-local block
#ifndef DIRECT
#define DIRECT 1
#endif

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace {

using vbk::Dt;
using i64 = std::int64_t;

inline void rope_half(const float* __restrict x, const float* __restrict c,
                      const float* __restrict s, float* __restrict y, i64 h) {
#pragma omp simd
  for (i64 i = 0; i < h; ++i) {
    const float a = x[i], b = x[i + h];
    y[i] = a * c[i] - b * s[i];
    y[i + h] = b * c[i] + a * s[i];
  }
}

inline void rope_interleaved(const float* __restrict x, const float* __restrict c,
                             const float* __restrict s, float* __restrict y, i64 h) {
#pragma omp simd
  for (i64 i = 0; i < h; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    y[2 * i] = a * c[i] - b * s[i];
    y[2 * i + 1] = b * c[i] + a * s[i];
  }
}

#if defined(__AVX512F__)
/// Stores 16 floats at y: non-temporal when `nt` (y 64-byte aligned), else ordinary.
inline void store16(float* y, __m512 v, bool nt) {
  if (nt) _mm512_stream_ps(y, v);
  else _mm512_storeu_ps(y, v);
}

/// rope_half written straight to the output row y (h a multiple of 16).
inline void rope_half_stream(const float* __restrict x, const float* __restrict c,
                             const float* __restrict s, float* __restrict y, i64 h, bool nt) {
  for (i64 i = 0; i < h; i += 16) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + h);
    const __m512 vc = _mm512_loadu_ps(c + i), vs = _mm512_loadu_ps(s + i);
    store16(y + i, _mm512_fnmadd_ps(b, vs, _mm512_mul_ps(a, vc)), nt);
    store16(y + i + h, _mm512_fmadd_ps(a, vs, _mm512_mul_ps(b, vc)), nt);
  }
}

/// rope_interleaved written straight to y (h a multiple of 8): 16 outputs = 8 (even, odd)
/// pairs; c and s are duplicated per pair, the pair swapped, the sign of s alternated.
inline void rope_interleaved_stream(const float* __restrict x, const float* __restrict c,
                                    const float* __restrict s, float* __restrict y, i64 h, bool nt) {
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  // y[2i] = a·c − b·s, y[2i+1] = b·c + a·s: x·c + swap(x)·(∓s)
  const __m512 sign = _mm512_set_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
  for (i64 i = 0; i < h; i += 8) {
    const __m512 v = _mm512_loadu_ps(x + 2 * i);
    const __m512 sw = _mm512_permute_ps(v, 0xB1);  // (b, a) in each pair
    const __m512 vc = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(c + i)));
    const __m512 vs = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(s + i)));
    store16(y + 2 * i, _mm512_fmadd_ps(sw, _mm512_mul_ps(vs, sign), _mm512_mul_ps(v, vc)), nt);
  }
}
#endif

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)stream;
  if (int e = vbk::check_args(inputs, n_inputs, 3, outputs, n_outputs, 1, n_attrs, 1)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  DLTensor& ty = outputs[0];
  if (tx.ndim != 4) return vbk::fail("x: expected 4 dimensions [B,H,S,D], got %d", tx.ndim);
  const i64 B = tx.shape[0], H = tx.shape[1], S = tx.shape[2], D = tx.shape[3];
  if (D % 2 != 0) return vbk::fail("x: head dim D = %lld must be even", (long long)D);
  const i64 h = D / 2;
  if (int e = vbk::check_shape(tx, "x", {B, H, S, D})) return e;
  if (int e = vbk::check_shape(inputs[1], "cos", {S, h})) return e;
  if (int e = vbk::check_shape(inputs[2], "sin", {S, h})) return e;
  if (int e = vbk::check_shape(ty, "y", {B, H, S, D})) return e;
  if (attrs[0] != 0.0 && attrs[0] != 1.0)
    return vbk::fail("interleaved must be 0 or 1 (got %g)", attrs[0]);
  const bool interleaved = attrs[0] != 0.0;
  const i64 rows = B * H * S;
  if (rows == 0 || D == 0) return 0;

  const Dt dt = vbk::dtype_of(tx);
  const void* x = vbk::data_ptr(tx);
  void* y = vbk::data_ptr(ty);
  const bool f32 = dt == Dt::F32;

  vbk::Scratch tab(f32 ? 0 : 2 * S * h);
  if (!tab.ok()) return vbk::fail("out of memory (cos/sin tables)");
  const float *cs, *sn;
  if (f32) {
    cs = static_cast<const float*>(vbk::data_ptr(inputs[1]));
    sn = static_cast<const float*>(vbk::data_ptr(inputs[2]));
  } else {
    vbk::load_f32(vbk::data_ptr(inputs[1]), dt, 0, S * h, tab.get());
    vbk::load_f32(vbk::data_ptr(inputs[2]), dt, 0, S * h, tab.get() + S * h);
    cs = tab.get();
    sn = tab.get() + S * h;
  }

  // Non-temporal stores skip the read-for-ownership but leave y out of the cache: right for an
  // output far larger than the LLC, wrong for activations the next op reads back at once.
  const bool nt_stores = rows * D * (f32 ? 4 : 2) >= (i64{1} << STREAM_MIN_LOG2);
#if defined(__AVX512F__)
  if (DIRECT && f32 && D % 32 == 0 &&
      (!nt_stores || reinterpret_cast<std::uintptr_t>(y) % 64 == 0)) {
    const float* xf = static_cast<const float*>(x);
    float* yf = static_cast<float*>(y);
    const bool par_rows = rows > 1 && rows * D >= (i64{1} << 15);
#pragma omp parallel if (par_rows)
    {
#pragma omp for schedule(static)
      for (i64 r = 0; r < rows; ++r) {
        if (PREFETCH_ROWS > 0 && r + PREFETCH_ROWS < rows)
          vbk::prefetch_span(xf + (r + PREFETCH_ROWS) * D, 0, D * 4, D * 4);
        const i64 pos = r % S;
        if (interleaved)
          rope_interleaved_stream(xf + r * D, cs + pos * h, sn + pos * h, yf + r * D, h, nt_stores);
        else
          rope_half_stream(xf + r * D, cs + pos * h, sn + pos * h, yf + r * D, h, nt_stores);
      }
      if (nt_stores) vbk::stream_fence();
    }
    return 0;
  }
#endif
  // Work items are blocks of consecutive rows (~8 KiB of fp32 output each), so that the
  // output, contiguous across rows, is written with long non-temporal stores.
  const i64 RB = std::max<i64>(1, 2048 / D);
  const i64 blocks = (rows + RB - 1) / RB;
  const bool par = blocks > 1 && rows * D >= (i64{1} << 15);
  bool oom = false;
#pragma omp parallel if (par)
  {
    // Thread-local: one input row [D], the block's fp32 output [RB*D], 16-bit staging [RB*D/2].
    vbk::Scratch buf(D + RB * D + (RB * D + 1) / 2);
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (i64 blk = 0; blk < blocks; ++blk) {
      if (!buf.ok()) continue;
      float* xrow = buf.get();
      float* out = xrow + D;
      const i64 r0 = blk * RB, nr = std::min(RB, rows - r0);
      for (i64 r = r0; r < r0 + nr; ++r) {
        const i64 pos = r % S;
        const float* c = cs + pos * h;
        const float* s = sn + pos * h;
        const float* xr;
        if (f32) {
          xr = static_cast<const float*>(x) + r * D;
        } else {
          vbk::load_f32(x, dt, r * D, D, xrow);
          xr = xrow;
        }
        float* yr = out + (r - r0) * D;
        if (interleaved)
          rope_interleaved(xr, c, s, yr, h);
        else
          rope_half(xr, c, s, yr, h);
      }
      if (nt_stores)
        vbk::stream_store_f32(out, dt, y, r0 * D, nr * D, out + RB * D);  // non-temporal stores
      else
        vbk::store_f32(out, dt, y, r0 * D, nr * D);
    }
    if (nt_stores) vbk::stream_fence();
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
