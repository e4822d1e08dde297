// Cache-blocked i-k-j (panel sizes from the card's L1D and L2), single-threaded.
#include "vb_variant.h"

// @vb-param L1D_BYTES 49152 {32768,49152,65536,131072}  L1 data cache per core (card: caches)
#ifndef L1D_BYTES
#define L1D_BYTES 49152
#endif
// @vb-param L2_BYTES 2097152 {524288,1048576,2097152}  L2 per core (card: caches)
#ifndef L2_BYTES
#define L2_BYTES 2097152
#endif

namespace {
// A C-row segment of JB floats stays in L1 (a quarter of it) while k runs over a KB x JB panel
// of B that stays in L2 (half of it).
constexpr vbv::i64 JB = L1D_BYTES / 16;
constexpr vbv::i64 KB = L2_BYTES / (8 * JB) > 8 ? L2_BYTES / (8 * JB) : 8;

/// Cache-blocked i-k-j: panels of B (KB x JB) reused by every row of C. k order is fixed
/// (ascending), so results are bitwise deterministic for any thread count.
void gemm(const float* __restrict A, const float* __restrict B, float* __restrict C, vbv::i64 M,
          vbv::i64 N, vbv::i64 K) {
  for (vbv::i64 i = 0; i < M * N; ++i) C[i] = 0;
  for (vbv::i64 j0 = 0; j0 < N; j0 += JB) {
    const vbv::i64 j1 = j0 + JB < N ? j0 + JB : N;
    for (vbv::i64 k0 = 0; k0 < K; k0 += KB) {
      const vbv::i64 k1 = k0 + KB < K ? k0 + KB : K;
      for (vbv::i64 i = 0; i < M; ++i) {
        float* c = C + i * N;
        for (vbv::i64 k = k0; k < k1; ++k) {
          const float a = A[i * K + k];
          const float* b = B + k * N;
#pragma omp simd
          for (vbv::i64 j = j0; j < j1; ++j) c[j] += a * b[j];
        }
      }
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
