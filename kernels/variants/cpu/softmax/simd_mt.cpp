// Compiler-vectorized (omp simd), OpenMP-threaded over rows.
#include "vb_variant.h"

namespace {
/// Three passes over the fp32 row with omp simd reductions: max, exp and sum, scale.
void softmax_row(float* __restrict row, vbv::i64 C) {
  float m = -__builtin_inff();
#pragma omp simd reduction(max : m)
  for (vbv::i64 i = 0; i < C; ++i) m = row[i] > m ? row[i] : m;
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (vbv::i64 i = 0; i < C; ++i) {
    const float e = vbk::exp_f32(row[i] - m);
    row[i] = e;
    s += e;
  }
  const float inv = 1.0f / s;
#pragma omp simd
  for (vbv::i64 i = 0; i < C; ++i) row[i] *= inv;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  (void)attrs;
  vbv::i64 R = 0, C = 0;
  if (int e = vbv::check_rows(in, n_in, 1, out, n_out, n_attrs, 0, R, C)) return e;
  if (R == 0 || C == 0) return 0;
  const auto dt = vbk::dtype_of(in[0]);
  const void* x = vbk::data_ptr(in[0]);
  void* y = vbk::data_ptr(out[0]);
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
      softmax_row(row, C);
      vbk::store_f32(row, dt, y, r * C, C);
    }
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
