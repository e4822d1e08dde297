// Instantiated for target h200-host (vladbud variants):
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
