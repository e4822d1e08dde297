// Scalar rotation per row in index order, single-threaded, no vectorization.
#include "vb_variant.h"

namespace {
/// One row [D] rotated into y: half-split pairs (i, i+h) or, interleaved, (2i, 2i+1), with
/// cos/sin c, s [h] of the row's position: y_a = x_a·c − x_b·s, y_b = x_b·c + x_a·s.
__attribute__((optimize("no-tree-vectorize"))) void rope_row(const float* x, const float* c, const float* s,
                                                             float* y, vbv::i64 h, bool interleaved) {
#pragma clang loop vectorize(disable) interleave(disable)
  for (vbv::i64 i = 0; i < h; ++i) {
    const vbv::i64 a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + h;
    const float xa = x[a], xb = x[b];
    y[a] = xa * c[i] - xb * s[i];
    y[b] = xb * c[i] + xa * s[i];
  }
}

/// Every row r of x (position r mod S), converted to fp32, rotated, rounded once into y.
bool rope(const void* x, void* y, vbk::Dt dt, const float* cs, const float* sn, vbv::i64 rows,
          vbv::i64 S, vbv::i64 D, bool interleaved) {
  vbk::Scratch buf(2 * D);
  if (!buf.ok()) return false;
  float* xr = buf.get();
  float* yr = xr + D;
  for (vbv::i64 r = 0; r < rows; ++r) {
    const vbv::i64 pos = r % S;
    vbk::load_f32(x, dt, r * D, D, xr);
    rope_row(xr, cs + pos * (D / 2), sn + pos * (D / 2), yr, D / 2, interleaved);
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
