// Highway register-tiled 4 x 2-vector micro-kernel, OpenMP-threaded over row tiles.
#include "vb_variant.h"

#include <cmath>

// Static dispatch only: the target is fixed by -march/-mcpu.
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>

namespace hn = hwy::HWY_NAMESPACE;

namespace {
/// Register-tiled micro-kernel: a 4 x 2-vector tile of C lives in 8 vector registers while k
/// runs (4 broadcasts of A, 2 loads of B, 8 FMAs per k); row tiles split over OpenMP threads.
/// Column and row tails use the scalar path with the same k order.
HWY_ATTR void gemm(const float* HWY_RESTRICT A, const float* HWY_RESTRICT B, float* HWY_RESTRICT C,
                   vbv::i64 M, vbv::i64 N, vbv::i64 K) {
  const hn::ScalableTag<float> d;
  const vbv::i64 V = static_cast<vbv::i64>(hn::Lanes(d));
  const vbv::i64 NT = N / (2 * V) * (2 * V);
#pragma omp parallel for schedule(static) if (M * N * K >= (vbv::i64{1} << 18))
  for (vbv::i64 i0 = 0; i0 < M; i0 += 4) {
    const vbv::i64 rows = M - i0 < 4 ? M - i0 : 4;
    for (vbv::i64 j = 0; j < NT; j += 2 * V) {
      if (rows == 4) {
        auto c00 = hn::Zero(d), c01 = hn::Zero(d), c10 = hn::Zero(d), c11 = hn::Zero(d);
        auto c20 = hn::Zero(d), c21 = hn::Zero(d), c30 = hn::Zero(d), c31 = hn::Zero(d);
        for (vbv::i64 k = 0; k < K; ++k) {
          const auto b0 = hn::LoadU(d, B + k * N + j), b1 = hn::LoadU(d, B + k * N + j + V);
          const auto a0 = hn::Set(d, A[(i0 + 0) * K + k]), a1 = hn::Set(d, A[(i0 + 1) * K + k]);
          const auto a2 = hn::Set(d, A[(i0 + 2) * K + k]), a3 = hn::Set(d, A[(i0 + 3) * K + k]);
          c00 = hn::MulAdd(a0, b0, c00), c01 = hn::MulAdd(a0, b1, c01);
          c10 = hn::MulAdd(a1, b0, c10), c11 = hn::MulAdd(a1, b1, c11);
          c20 = hn::MulAdd(a2, b0, c20), c21 = hn::MulAdd(a2, b1, c21);
          c30 = hn::MulAdd(a3, b0, c30), c31 = hn::MulAdd(a3, b1, c31);
        }
        hn::StoreU(c00, d, C + (i0 + 0) * N + j), hn::StoreU(c01, d, C + (i0 + 0) * N + j + V);
        hn::StoreU(c10, d, C + (i0 + 1) * N + j), hn::StoreU(c11, d, C + (i0 + 1) * N + j + V);
        hn::StoreU(c20, d, C + (i0 + 2) * N + j), hn::StoreU(c21, d, C + (i0 + 2) * N + j + V);
        hn::StoreU(c30, d, C + (i0 + 3) * N + j), hn::StoreU(c31, d, C + (i0 + 3) * N + j + V);
      } else {
        for (vbv::i64 r = 0; r < rows; ++r) {
          auto c0 = hn::Zero(d), c1 = hn::Zero(d);
          for (vbv::i64 k = 0; k < K; ++k) {
            const auto a = hn::Set(d, A[(i0 + r) * K + k]);
            c0 = hn::MulAdd(a, hn::LoadU(d, B + k * N + j), c0);
            c1 = hn::MulAdd(a, hn::LoadU(d, B + k * N + j + V), c1);
          }
          hn::StoreU(c0, d, C + (i0 + r) * N + j), hn::StoreU(c1, d, C + (i0 + r) * N + j + V);
        }
      }
    }
    for (vbv::i64 r = 0; r < rows; ++r)
      for (vbv::i64 j = NT; j < N; ++j) {
        float s = 0;
        for (vbv::i64 k = 0; k < K; ++k) s = std::fma(A[(i0 + r) * K + k], B[k * N + j], s);
        C[(i0 + r) * N + j] = s;
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
