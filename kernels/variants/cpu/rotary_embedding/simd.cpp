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
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 4) return vbk::fail("x: expected 4 dimensions [B,H,S,D], got %d", in[0].ndim);
  const vbv::i64 B = in[0].shape[0], H = in[0].shape[1], S = in[0].shape[2], D = in[0].shape[3];
  if (D % 2 != 0) return vbk::fail("x: head dim D = %lld must be even", (long long)D);
  const vbv::i64 h = D / 2;
  if (int e = vbk::check_shape(in[0], "x", {B, H, S, D})) return e;
  if (int e = vbk::check_shape(in[1], "cos", {S, h})) return e;
  if (int e = vbk::check_shape(in[2], "sin", {S, h})) return e;
  if (int e = vbk::check_shape(out[0], "y", {B, H, S, D})) return e;
  if (attrs[0] != 0.0 && attrs[0] != 1.0) return vbk::fail("interleaved must be 0 or 1 (got %g)", attrs[0]);
  const bool interleaved = attrs[0] != 0.0;
  const vbv::i64 rows = B * H * S;
  if (rows == 0 || D == 0) return 0;
  const auto dt = vbk::dtype_of(in[0]);
  vbk::Scratch sc, ss;
  const float* cs = vbv::as_f32(in[1], sc);
  const float* sn = vbv::as_f32(in[2], ss);
  if (!cs || !sn) return vbk::fail("out of memory (fp32 cos/sin tables)");
  if (!rope(vbk::data_ptr(in[0]), vbk::data_ptr(out[0]), dt, cs, sn, rows, S, D, interleaved)) return vbk::fail("out of memory (row scratch)");
  return 0;
}
