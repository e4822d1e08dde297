// Multi-accumulator, single-threaded: ACC independent vectors of VEC_BYTES/4 fp32 lanes hide
// the add latency; fixed combine order (bitwise deterministic).
#include "vb_variant.h"

// @vb-param VEC_BYTES 64 {16,32,64}  SIMD width the lane arrays are written for
#ifndef VEC_BYTES
#define VEC_BYTES 64
#endif
// @vb-param ACC 4 {2,4,8}  independent accumulator vectors
#ifndef ACC
#define ACC 4
#endif

namespace {
constexpr int W = VEC_BYTES / 4, L = W * ACC;
}

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 2) return vbk::fail("x: expected [M,N]");
  const vbv::i64 M = in[0].shape[0], N = in[0].shape[1];
  if (int e = vbk::check_shape(out[0], "y", {M})) return e;
  const auto dt = vbk::dtype_of(in[0]);
  const void* x = vbk::data_ptr(in[0]);
  alignas(64) float stage[vbv::kChunk];
  for (vbv::i64 r = 0; r < M; ++r) {
    alignas(64) float acc[L] = {};
    vbv::for_chunks(x, dt, r * N, N, stage, [&](const float* p, vbv::i64 n, vbv::i64) {
      vbv::i64 i = 0;
      for (; i + L <= n; i += L) {
#pragma omp simd
        for (int j = 0; j < L; ++j) acc[j] += p[i + j];
      }
      for (int j = 0; i + j < n; ++j) acc[j] += p[i + j];
    });
    for (int w = L / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    vbk::store_f32(acc, dt, vbk::data_ptr(out[0]), r, 1);
  }
  return 0;
}
