// rotary_embedding (CPU starter): y[B,H,S,D] = RoPE(x) with cos/sin tables [S, D/2] indexed by
// the position s (DESIGN §2).
//   interleaved = 0 (half-split, NeoX / LLaMA-HF), h = D/2, i < h:
//     y[i]   = x[i]·c[i] − x[i+h]·s[i]        y[i+h] = x[i+h]·c[i] + x[i]·s[i]
//   interleaved = 1 (GPT-J pairs):
//     y[2i]  = x[2i]·c[i] − x[2i+1]·s[i]      y[2i+1] = x[2i+1]·c[i] + x[2i]·s[i]
// Work items are blocks of consecutive rows of D elements (B·H·S rows in all), split statically
// over OpenMP threads; each row is read once and rotated in fp32 into a thread-local block that
// is rounded once and written with non-temporal stores (vbk::stream_store_f32). fp16/bf16
// cos/sin tables are converted to fp32 once per call (fp32 tables are used in place).
#include "vb_kernel.h"

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
      vbk::stream_store_f32(out, dt, y, r0 * D, nr * D, out + RB * D);  // non-temporal stores
    }
    vbk::stream_fence();
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
