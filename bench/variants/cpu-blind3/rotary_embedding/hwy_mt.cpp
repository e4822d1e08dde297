// Instantiated for target h200-host (vladbud variants):
// Highway SIMD (static dispatch; interleaved pairs via LoadInterleaved2/StoreInterleaved2), OpenMP-threaded over rows.
#include "vb_variant.h"

// Static dispatch only: the target is fixed by -march/-mcpu.
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>

namespace hn = hwy::HWY_NAMESPACE;

namespace {
/// One row [D] into y. Half-split: vectors of x[i], x[i+h], c, s; y_a = x_a·c − x_b·s
/// (hn::MulSub), y_b = x_b·c + x_a·s (hn::MulAdd). Interleaved: hn::LoadInterleaved2 splits the
/// (2i, 2i+1) pairs into two vectors, hn::StoreInterleaved2 writes them back. Scalar tails.
HWY_ATTR void rope_row(const float* HWY_RESTRICT x, const float* HWY_RESTRICT c,
                       const float* HWY_RESTRICT s, float* HWY_RESTRICT y, vbv::i64 h, bool interleaved) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  vbv::i64 i = 0;
  if (interleaved) {
    for (; i + N <= h; i += N) {
      hn::Vec<decltype(d)> a, b;
      hn::LoadInterleaved2(d, x + 2 * i, a, b);
      const auto vc = hn::LoadU(d, c + i), vs = hn::LoadU(d, s + i);
      const auto ya = hn::MulSub(a, vc, hn::Mul(b, vs)), yb = hn::MulAdd(b, vc, hn::Mul(a, vs));
      hn::StoreInterleaved2(ya, yb, d, y + 2 * i);
    }
    for (; i < h; ++i) {
      const float a = x[2 * i], b = x[2 * i + 1];
      y[2 * i] = a * c[i] - b * s[i];
      y[2 * i + 1] = b * c[i] + a * s[i];
    }
  } else {
    for (; i + N <= h; i += N) {
      const auto a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + i + h);
      const auto vc = hn::LoadU(d, c + i), vs = hn::LoadU(d, s + i);
      hn::StoreU(hn::MulSub(a, vc, hn::Mul(b, vs)), d, y + i);
      hn::StoreU(hn::MulAdd(b, vc, hn::Mul(a, vs)), d, y + i + h);
    }
    for (; i < h; ++i) {
      const float a = x[i], b = x[i + h];
      y[i] = a * c[i] - b * s[i];
      y[i + h] = b * c[i] + a * s[i];
    }
  }
}

/// Every row r of x (position r mod S), split statically over the threads: fp32 rows in place,
/// else converted; rotated into a thread-local row, rounded once into y.
bool rope(const void* x, void* y, vbk::Dt dt, const float* cs, const float* sn, vbv::i64 rows,
          vbv::i64 S, vbv::i64 D, bool interleaved) {
  const vbv::i64 h = D / 2;
  bool oom = false;
#pragma omp parallel if (rows > 1 && rows * D >= (vbv::i64{1} << 15))
  {
    vbk::Scratch buf(2 * D);
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (vbv::i64 r = 0; r < rows; ++r) {
      if (!buf.ok()) continue;
      float* xs = buf.get();
      float* ys = xs + D;
      const vbv::i64 pos = r % S;
      const float* xr = xs;
      if (dt == vbk::Dt::F32)
        xr = static_cast<const float*>(x) + r * D;
      else
        vbk::load_f32(x, dt, r * D, D, xs);
      rope_row(xr, cs + pos * h, sn + pos * h, ys, h, interleaved);
      vbk::store_f32(ys, dt, y, r * D, D);
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
