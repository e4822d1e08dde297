// Online softmax, single-threaded: running max and rescaled sum per lane in one pass, then one output pass.
#include "vb_variant.h"

// @vb-param VEC_BYTES 64 {16,32,64}  SIMD width the lane arrays are written for
#ifndef VEC_BYTES
#define VEC_BYTES 64
#endif

namespace {
constexpr int W = VEC_BYTES / 4;
constexpr float NEG_INF = -__builtin_inff();

/// Online softmax (Milakov & Gimelshein 2018): one pass keeps a running max and a rescaled
/// running sum per lane, a second pass writes exp(x - max) / sum. Two reads of the row, not three.
void softmax_row(float* __restrict row, vbv::i64 C) {
  alignas(64) float m[W], s[W];
  for (int j = 0; j < W; ++j) m[j] = NEG_INF, s[j] = 0;
  vbv::i64 i = 0;
  for (; i + W <= C; i += W) {
#pragma omp simd
    for (int j = 0; j < W; ++j) {
      const float v = row[i + j];
      const float mn = v > m[j] ? v : m[j];
      const bool none = mn == NEG_INF;
      s[j] = none ? 0.0f : s[j] * vbk::exp_f32(m[j] - mn) + vbk::exp_f32(v - mn);
      m[j] = mn;
    }
  }
  for (int j = 0; i + j < C; ++j) {
    const float v = row[i + j];
    const float mn = v > m[j] ? v : m[j];
    s[j] = mn == NEG_INF ? 0.0f : s[j] * vbk::exp_f32(m[j] - mn) + vbk::exp_f32(v - mn);
    m[j] = mn;
  }
  float M = NEG_INF;
  for (int j = 0; j < W; ++j) M = m[j] > M ? m[j] : M;
  float S = 0;
  for (int j = 0; j < W; ++j)
    if (m[j] != NEG_INF) S += s[j] * vbk::exp_f32(m[j] - M);
  if (M == NEG_INF) S = 0.0f * __builtin_nanf("");  // all -inf row: NaN (PyTorch)
  // NaN entries never win the max; they propagate through exp and the sum.
  for (vbv::i64 k = 0; k < C; ++k)
    if (row[k] != row[k]) S = row[k];
  const float inv = 1.0f / S;
#pragma omp simd
  for (vbv::i64 k = 0; k < C; ++k) row[k] = vbk::exp_f32(row[k] - M) * inv;
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
      softmax_row(row, C);
      vbk::store_f32(row, dt, y, r * C, C);
    }
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
