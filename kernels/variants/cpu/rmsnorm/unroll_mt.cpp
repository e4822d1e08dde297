// Multi-accumulator (ACC x VEC_BYTES/4 lanes), OpenMP-threaded over rows.
#include "vb_variant.h"

#include <cmath>

// @vb-param VEC_BYTES 64 {16,32,64}  SIMD width the lane arrays are written for
#ifndef VEC_BYTES
#define VEC_BYTES 64
#endif
// @vb-param ACC 4 {2,4,8}  independent accumulator vectors for the sum of squares
#ifndef ACC
#define ACC 4
#endif

namespace {
constexpr int L = VEC_BYTES / 4 * ACC;
/// ACC x (VEC_BYTES/4) independent partial sums of squares (fixed pairwise combine), then scale.
void rms_row(float* __restrict row, const float* __restrict w, vbv::i64 C, float eps) {
  alignas(64) float acc[L] = {};
  vbv::i64 i = 0;
  for (; i + L <= C; i += L) {
#pragma omp simd
    for (int j = 0; j < L; ++j) acc[j] += row[i + j] * row[i + j];
  }
  for (int j = 0; i + j < C; ++j) acc[j] += row[i + j] * row[i + j];
  for (int h = L / 2; h > 0; h /= 2)
    for (int j = 0; j < h; ++j) acc[j] += acc[j + h];
  const float inv = 1.0f / std::sqrt(acc[0] / static_cast<float>(C) + eps);
#pragma omp simd
  for (vbv::i64 k = 0; k < C; ++k) row[k] = row[k] * inv * w[k];
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
#pragma omp parallel if (R > 1 && R * C >= (vbv::i64{1} << 15))
  {
    vbk::Scratch buf(C);
    float* row = buf.get();
    if (!row) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
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
