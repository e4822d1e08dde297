// i-k-j order with omp simd over the C row (unit stride), single-threaded.
#include "vb_variant.h"

namespace {
/// i-k-j order: each C row accumulates a[i,k] * B[k,:] (unit stride, omp simd over j).
void gemm(const float* __restrict A, const float* __restrict B, float* __restrict C, vbv::i64 M,
          vbv::i64 N, vbv::i64 K) {
  for (vbv::i64 i = 0; i < M; ++i) {
    float* c = C + i * N;
#pragma omp simd
    for (vbv::i64 j = 0; j < N; ++j) c[j] = 0;
    for (vbv::i64 k = 0; k < K; ++k) {
      const float a = A[i * K + k];
      const float* b = B + k * N;
#pragma omp simd
      for (vbv::i64 j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 2 || in[1].ndim != 2) return vbk::fail("A, B: expected 2 dimensions");
  const vbv::i64 M = in[0].shape[0], K = in[0].shape[1], N = in[1].shape[1];
  if (int e = vbk::check_shape(in[1], "B", {K, N})) return e;
  if (int e = vbk::check_shape(out[0], "C", {M, N})) return e;
  if (M == 0 || N == 0) return 0;
  const auto dt = vbk::dtype_of(out[0]);
  vbk::Scratch sa, sb, sc;
  const float* A = vbv::as_f32(in[0], sa);
  const float* B = vbv::as_f32(in[1], sb);
  float* C = dt == vbk::Dt::F32 ? static_cast<float*>(vbk::data_ptr(out[0])) : sc.alloc(M * N);
  if (!A || !B || !C) return vbk::fail("out of memory (fp32 staging)");
  gemm(A, B, C, M, N, K);
  if (dt != vbk::Dt::F32) vbk::store_f32(C, dt, vbk::data_ptr(out[0]), 0, M * N);
  return 0;
}
