// Textbook i-j-k order, scalar, single-threaded (B walked down its columns).
#include "vb_variant.h"

namespace {
/// C[i,j] = sum_k A[i,k] B[k,j]: the textbook i-j-k order (B read down a column), scalar.
__attribute__((optimize("no-tree-vectorize"))) void gemm(const float* A, const float* B, float* C,
                                                         vbv::i64 M, vbv::i64 N, vbv::i64 K) {
  for (vbv::i64 i = 0; i < M; ++i)
    for (vbv::i64 j = 0; j < N; ++j) {
      float s = 0;
#pragma clang loop vectorize(disable) interleave(disable)
      for (vbv::i64 k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
      C[i * N + j] = s;
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
