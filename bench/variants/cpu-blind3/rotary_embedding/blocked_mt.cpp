// Instantiated for target h200-host (vladbud variants): L1D_BYTES=49152 (card 49152 -> allowed 49152);
// Position-major blocks (one cos/sin row reused by every batch·head, block size from the card's L1D), omp simd, OpenMP-threaded over blocks.
#include "vb_variant.h"

#include <algorithm>

// @vb-param L1D_BYTES 49152 {32768,49152,65536,131072}  L1 data cache per core (card: caches)
#ifndef L1D_BYTES
#define L1D_BYTES 49152
#endif

namespace {
/// One row [D], half-split or interleaved (see rope_row of scalar.cpp), omp simd.
inline void rope_row(const float* __restrict x, const float* __restrict c, const float* __restrict s,
                     float* __restrict y, vbv::i64 h, bool interleaved) {
  if (interleaved) {
#pragma omp simd
    for (vbv::i64 i = 0; i < h; ++i) {
      const float a = x[2 * i], b = x[2 * i + 1];
      y[2 * i] = a * c[i] - b * s[i];
      y[2 * i + 1] = b * c[i] + a * s[i];
    }
  } else {
#pragma omp simd
    for (vbv::i64 i = 0; i < h; ++i) {
      y[i] = x[i] * c[i] - x[i + h] * s[i];
      y[i + h] = x[i + h] * c[i] + x[i] * s[i];
    }
  }
}

/// Work items are blocks of PB consecutive positions; each item walks every (batch, head) for
/// its positions, so its PB cos/sin rows (PB·D·4 bytes, at most half of L1D) stay in L1 while
/// all B·H heads use them. x rows are converted into `xs`, rotated into `ys`, rounded once.
bool rope(const void* x, void* y, vbk::Dt dt, const float* cs, const float* sn, vbv::i64 rows,
          vbv::i64 S, vbv::i64 D, bool interleaved) {
  const vbv::i64 h = D / 2, BH = rows / S;
  const vbv::i64 PB = std::clamp<vbv::i64>(L1D_BYTES / (8 * D), 1, 256);
  const vbv::i64 blocks = (S + PB - 1) / PB;
  bool oom = false;
#pragma omp parallel if (blocks > 1 && rows * D >= (vbv::i64{1} << 15))
  {
    vbk::Scratch buf(2 * D);
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (vbv::i64 blk = 0; blk < blocks; ++blk) {
      if (!buf.ok()) continue;
      float* xs = buf.get();
      float* ys = xs + D;
      const vbv::i64 p0 = blk * PB, p1 = std::min(S, p0 + PB);
      for (vbv::i64 bh = 0; bh < BH; ++bh)
        for (vbv::i64 pos = p0; pos < p1; ++pos) {
          const vbv::i64 r = bh * S + pos;
          const float* xr = xs;
          if (dt == vbk::Dt::F32)
            xr = static_cast<const float*>(x) + r * D;
          else
            vbk::load_f32(x, dt, r * D, D, xs);
          rope_row(xr, cs + pos * h, sn + pos * h, ys, h, interleaved);
          vbk::store_f32(ys, dt, y, r * D, D);
        }
    }
  }
  return !oom;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  vbv::RopeArgs a;
  if (int e = vbv::check_rope(in, n_in, out, n_out, attrs, n_attrs, a)) return e;
  const vbv::i64 S = a.S, D = a.D;
  const bool interleaved = a.interleaved;
  const vbv::i64 rows = a.B * a.H * S;
  if (rows == 0 || D == 0) return 0;
  const auto dt = a.dt;
  vbk::Scratch sc, ss;
  const float* cs = vbv::as_f32(in[1], sc);
  const float* sn = vbv::as_f32(in[2], ss);
  if (!cs || !sn) return vbk::fail("out of memory (fp32 cos/sin tables)");
  if (!rope(vbk::data_ptr(in[0]), vbk::data_ptr(out[0]), dt, cs, sn, rows, S, D, interleaved)) return vbk::fail("out of memory (row scratch)");
  return 0;
}
