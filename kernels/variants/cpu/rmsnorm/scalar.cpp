// Scalar, single-threaded: sum of squares then scale, loop vectorization disabled.
#include "vb_variant.h"

#include <cmath>

namespace {
/// Sum of squares, then y = x * rsqrt(mean + eps) * w. Scalar (vectorization disabled).
__attribute__((optimize("no-tree-vectorize"))) void rms_row(float* row, const float* w, vbv::i64 C, float eps) {
  float ss = 0;
#pragma clang loop vectorize(disable) interleave(disable)
  for (vbv::i64 i = 0; i < C; ++i) ss += row[i] * row[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(C) + eps);
#pragma clang loop vectorize(disable) interleave(disable)
  for (vbv::i64 i = 0; i < C; ++i) row[i] = row[i] * inv * w[i];
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  (void)attrs;
  vbv::i64 R = 0, C = 0;
  if (int e = vbv::check_rows(in, n_in, 2, out, n_out, n_attrs, 1, R, C)) return e;
  if (R == 0 || C == 0) return 0;
  const auto dt = vbk::dtype_of(in[0]);
  const void* x = vbk::data_ptr(in[0]);
  void* y = vbk::data_ptr(out[0]);
  vbk::Scratch wbuf;
  const float* w = vbv::as_f32(in[1], wbuf);
  if (!w) return vbk::fail("out of memory (weight)");
  const float eps = static_cast<float>(attrs[0]);
  bool oom = false;
  {
    vbk::Scratch buf(C);
    float* row = buf.get();
    if (!row) {
#pragma omp atomic write
      oom = true;
    }
    for (vbv::i64 r = 0; r < R; ++r) {
      if (!row) continue;
      vbk::load_f32(x, dt, r * C, C, row);
      rms_row(row, w, C, eps);
      vbk::store_f32(row, dt, y, r * C, C);
    }
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
