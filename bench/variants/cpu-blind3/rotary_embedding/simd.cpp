// Instantiated for target h200-host (vladbud variants):
// Compiler-vectorized rotation (omp simd, separate half-split and interleaved loops), single-threaded.
#include "vb_variant.h"

namespace {
/// Half-split: y[i] = x[i]·c − x[i+h]·s, y[i+h] = x[i+h]·c + x[i]·s (omp simd).
void rope_half(const float* __restrict x, const float* __restrict c, const float* __restrict s,
               float* __restrict y, vbv::i64 h) {
#pragma omp simd
  for (vbv::i64 i = 0; i < h; ++i) {
    y[i] = x[i] * c[i] - x[i + h] * s[i];
    y[i + h] = x[i + h] * c[i] + x[i] * s[i];
  }
}
/// GPT-J pairs: y[2i] = x[2i]·c − x[2i+1]·s, y[2i+1] = x[2i+1]·c + x[2i]·s (omp simd, strided).
void rope_pairs(const float* __restrict x, const float* __restrict c, const float* __restrict s,
                float* __restrict y, vbv::i64 h) {
#pragma omp simd
  for (vbv::i64 i = 0; i < h; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    y[2 * i] = a * c[i] - b * s[i];
    y[2 * i + 1] = b * c[i] + a * s[i];
  }
}

/// Every row r of x (position r mod S): fp32 rows in place, else converted; rounded once into y.
bool rope(const void* x, void* y, vbk::Dt dt, const float* cs, const float* sn, vbv::i64 rows,
          vbv::i64 S, vbv::i64 D, bool interleaved) {
  vbk::Scratch buf(2 * D);
  if (!buf.ok()) return false;
  float* xs = buf.get();
  float* yr = xs + D;
  const vbv::i64 h = D / 2;
  for (vbv::i64 r = 0; r < rows; ++r) {
    const vbv::i64 pos = r % S;
    const float* xr = xs;
    if (dt == vbk::Dt::F32)
      xr = static_cast<const float*>(x) + r * D;
    else
      vbk::load_f32(x, dt, r * D, D, xs);
    if (interleaved)
      rope_pairs(xr, cs + pos * h, sn + pos * h, yr, h);
    else
      rope_half(xr, cs + pos * h, sn + pos * h, yr, h);
    vbk::store_f32(yr, dt, y, r * D, D);
  }
  return true;
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
