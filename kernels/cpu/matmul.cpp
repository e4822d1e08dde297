// matmul (CPU starter): C[M,N] = A[M,K] · B[K,N], fp32 accumulation (DESIGN §2).
//
// Blocked GEMM in the BLIS style, all in fp32 whatever the storage dtype:
//  * the columns are processed in panels of at most NC; each panel of B (all K rows) is packed
//    once, converted to fp32, into NR-wide strips laid out k-major (cooperatively by all threads);
//  * the rows are split into blocks of MC (or, for small M, the panel's columns are split) and
//    each thread owns whole blocks ("items"): per KC slice of K it packs its rows of A into
//    MR-row micro-panels and runs the MR×NR register-blocked micro-kernel over every strip,
//    accumulating in a thread-local fp32 tile that is rounded once into C at the end;
//  * edges are handled by zero padding in the packed operands, so the micro-kernel always runs
//    full tiles; only the final store is clipped.
// Each C element is accumulated in a fixed k order (KC slices in order, k ascending inside),
// independent of the thread split, so results are bitwise deterministic.
#include "vb_kernel.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour):
// @vb-param KC 256 {128,256,384,512}  depth of one packed K slice
#ifndef KC
#define KC 256
#endif
// @vb-param MC_ROWS 144 {72,144,216,288}  rows per block (a multiple of MR = 12)
#ifndef MC_ROWS
#define MC_ROWS 144
#endif
// @vb-param NC_COLS 1024 {512,1024,2048}  columns per panel (a multiple of NR = 32)
#ifndef NC_COLS
#define NC_COLS 1024
#endif
// @vb-param NUM_THREADS 0 {0,1,2,4,8,16,32,64}  OpenMP threads (0 = the runtime's default)
#ifndef NUM_THREADS
#define NUM_THREADS 0
#endif

#include <omp.h>

#include <algorithm>
#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
// 12×32 fp32 accumulators need 512-bit registers (24 zmm); generic tuning may prefer 256.
#pragma GCC target("prefer-vector-width=512")
#endif

namespace {

using vbk::Dt;
using i64 = std::int64_t;

constexpr int MR = 12;        // rows of the register tile
constexpr int NR = 32;        // columns of the register tile (2 × 16 fp32 lanes)
constexpr i64 MC_MAX = MC_ROWS;   // rows per block (A block 144×256×4 = 144 KiB in L2)
constexpr i64 NC_MAX = NC_COLS;  // columns per panel

/// acc[MR][NR] = Σ_p a[p][:] ⊗ b[p][:]; c[i][j] += acc[i][j]. a: kc×MR, b: kc×NR (packed).
inline void micro_kernel(int kc, const float* __restrict a, const float* __restrict b,
                         float* __restrict c, i64 ldc) {
  float acc[MR][NR] = {};
  for (int p = 0; p < kc; ++p) {
    const float* __restrict ap = a + static_cast<i64>(p) * MR;
    const float* __restrict bp = b + static_cast<i64>(p) * NR;
    for (int i = 0; i < MR; ++i) {
      const float ai = ap[i];
#pragma omp simd
      for (int j = 0; j < NR; ++j) acc[i][j] += ai * bp[j];
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* __restrict ci = c + i * ldc;
#pragma omp simd
    for (int j = 0; j < NR; ++j) ci[j] += acc[i][j];
  }
}

/// Packs rows [row0, row0+mrows) × cols [pc, pc+kc) of A (row-major, K columns) into
/// ceil(mrows/MR) micro-panels of kc×MR floats, zero-padding missing rows. tmp: kc floats.
void pack_a(const void* A, Dt dt, i64 K, i64 row0, i64 mrows, i64 pc, int kc,
            float* __restrict ap, float* __restrict tmp) {
  const i64 panels = (mrows + MR - 1) / MR;
  for (i64 q = 0; q < panels; ++q) {
    float* __restrict dst = ap + q * kc * MR;
    for (int i = 0; i < MR; ++i) {
      const i64 r = q * MR + i;
      if (r < mrows) {
        vbk::load_f32(A, dt, (row0 + r) * K + pc, kc, tmp);
        for (int p = 0; p < kc; ++p) dst[static_cast<i64>(p) * MR + i] = tmp[p];
      } else {
        for (int p = 0; p < kc; ++p) dst[static_cast<i64>(p) * MR + i] = 0.0f;
      }
    }
  }
}

/// Packs row p of the panel B[:, jc:jc+nc] into the strips of bp (strip s holds columns
/// [s*NR, s*NR+NR) of the panel, K×NR floats, k-major), zero-padding past nc. tmp: NC_MAX floats.
inline void pack_b_row(const void* B, Dt dt, i64 K, i64 N, i64 p, i64 jc, i64 nc,
                       float* __restrict bp, float* __restrict tmp) {
  vbk::load_f32(B, dt, p * N + jc, nc, tmp);
  const i64 strips = (nc + NR - 1) / NR;
  for (i64 s = 0; s < strips; ++s) {
    float* __restrict dst = bp + s * K * NR + p * NR;
    const i64 w = std::min<i64>(NR, nc - s * NR);
    const float* __restrict src = tmp + s * NR;
    if (w == NR) {
#pragma omp simd
      for (int j = 0; j < NR; ++j) dst[j] = src[j];
    } else {
      for (int j = 0; j < NR; ++j) dst[j] = j < w ? src[j] : 0.0f;
    }
  }
}

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)attrs;
  (void)stream;
  if (int e = vbk::check_args(inputs, n_inputs, 2, outputs, n_outputs, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tA = inputs[0];
  const DLTensor& tB = inputs[1];
  DLTensor& tC = outputs[0];
  if (tA.ndim != 2) return vbk::fail("A: expected 2 dimensions [M,K], got %d", tA.ndim);
  const i64 M = tA.shape[0], K = tA.shape[1];
  if (tB.ndim != 2) return vbk::fail("B: expected 2 dimensions [K,N], got %d", tB.ndim);
  if (tB.shape[0] != K)
    return vbk::fail("B: shape[0]=%lld does not match A.shape[1]=%lld", (long long)tB.shape[0],
                     (long long)K);
  const i64 N = tB.shape[1];
  if (int e = vbk::check_shape(tA, "A", {M, K})) return e;
  if (int e = vbk::check_shape(tB, "B", {K, N})) return e;
  if (int e = vbk::check_shape(tC, "C", {M, N})) return e;
  if (M == 0 || N == 0) return 0;

  const Dt dt = vbk::dtype_of(tA);
  const void* A = vbk::data_ptr(tA);
  const void* B = vbk::data_ptr(tB);
  void* C = vbk::data_ptr(tC);

  if (K == 0) {  // empty sum: C = 0
    vbk::Scratch z(N);
    if (!z.ok()) return vbk::fail("out of memory");
    std::fill(z.get(), z.get() + N, 0.0f);
    for (i64 r = 0; r < M; ++r) vbk::store_f32(z.get(), dt, C, r * N, N);
    return 0;
  }

  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int nth =
      flops >= 2.0e6 ? std::max(1, NUM_THREADS > 0 ? NUM_THREADS : omp_get_max_threads()) : 1;

  // Panel width: at most NC_MAX columns, packed B panel (K × nc) at most ~16 MiB.
  const i64 n_pad = (N + NR - 1) / NR * NR;
  i64 nc_cap = std::max<i64>(NR, ((i64{4} << 20) / K) / NR * NR);
  const i64 NC = std::min({NC_MAX / NR * NR, n_pad, nc_cap});

  // Row blocks: a multiple of nth when there are enough micro-panels, else split columns.
  const i64 m_panels = (M + MR - 1) / MR;
  i64 n_ib = (M + MC_MAX - 1) / MC_MAX;
  i64 n_js = 1;
  if (m_panels >= nth) {
    n_ib = (n_ib + nth - 1) / nth * nth;
    n_ib = std::min(n_ib, m_panels);
  } else {
    n_ib = m_panels;
    n_js = nth;
  }
  const i64 mc = ((M + n_ib - 1) / n_ib + MR - 1) / MR * MR;
  n_ib = (M + mc - 1) / mc;
  const i64 n_items = n_ib * n_js;

  vbk::Scratch bpack(K * NC);
  if (!bpack.ok()) return vbk::fail("out of memory (packed B panel)");
  float* const bp = bpack.get();
  bool oom = false;

#pragma omp parallel num_threads(nth)
  {
    // Thread-local scratch: packed A block, fp32 C tile, conversion row.
    vbk::Scratch apack(mc * KC), ctile(mc * NC), rowtmp(std::max<i64>(NC_MAX, KC));
    const bool ok = apack.ok() && ctile.ok() && rowtmp.ok();
    if (!ok) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp barrier
    if (!oom) {
      float* const ap = apack.get();
      float* const cw = ctile.get();
      float* const tmp = rowtmp.get();
      for (i64 jc = 0; jc < N; jc += NC) {
        const i64 nc = std::min(NC, N - jc);
        const i64 strips = (nc + NR - 1) / NR;
#pragma omp for schedule(static)
        for (i64 p = 0; p < K; ++p) pack_b_row(B, dt, K, N, p, jc, nc, bp, tmp);
        // (implicit barrier: the panel is packed)
#pragma omp for schedule(static)
        for (i64 item = 0; item < n_items; ++item) {
          const i64 ib = item / n_js, js = item % n_js;
          const i64 row0 = ib * mc, mrows = std::min(mc, M - row0);
          const i64 s0 = strips * js / n_js, s1 = strips * (js + 1) / n_js;
          if (s0 >= s1) continue;
          const i64 mpan = (mrows + MR - 1) / MR;
          const i64 ldc = (s1 - s0) * NR;
          std::fill(cw, cw + mpan * MR * ldc, 0.0f);
          for (i64 pc = 0; pc < K; pc += KC) {
            const int kc = static_cast<int>(std::min<i64>(KC, K - pc));
            pack_a(A, dt, K, row0, mrows, pc, kc, ap, tmp);
            for (i64 s = s0; s < s1; ++s) {
              const float* bs = bp + s * K * NR + pc * NR;
              for (i64 q = 0; q < mpan; ++q)
                micro_kernel(kc, ap + q * kc * MR, bs, cw + q * MR * ldc + (s - s0) * NR, ldc);
            }
          }
          const i64 c0 = s0 * NR, cols = std::min(s1 * NR, nc) - c0;
          for (i64 r = 0; r < mrows; ++r) vbk::store_f32(cw + r * ldc, dt, C, (row0 + r) * N + jc + c0, cols);
        }
        // (implicit barrier before the next panel overwrites bp)
      }
    }
  }
  if (oom) return vbk::fail("out of memory (per-thread scratch)");
  return 0;
}
