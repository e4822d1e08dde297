// fused_mlp (CPU starter): SwiGLU MLP, y[B,D] = (silu(x·w_gateᵀ) ⊙ (x·w_upᵀ))·w_downᵀ with
// x[B,D], w_gate[H,D], w_up[H,D], w_down[D,H]; silu on the gate (DESIGN §2).
//
// Three blocked GEMMs of the form C = A·Wᵀ (W row-major [N,K], as nn.Linear stores weights),
// all in fp32 whatever the storage dtype:
//   g = x·w_gateᵀ, u = x·w_upᵀ   -> fp32 scratch [B,H]
//   h = silu(g) ⊙ u              -> in place, vectorized (silu(g) = g / (1 + exp(-g)))
//   y = h·w_downᵀ                -> rounded once into y
// The hidden activations never round to the storage dtype. B (tokens) is small next to the
// weights, so each GEMM is computed as Cᵀ = W·Aᵀ: A is packed once per call, transposed and
// converted to fp32, into NR-wide strips of rows (k-major, zero padded); the weight rows are
// split statically over the OpenMP threads in micro-panels of MR rows. Per KC slice a thread
// copies/converts its MR weight rows into a contiguous fp32 buffer and runs the MR×NR
// register-blocked micro-kernel (weights broadcast, NR token lanes) over every strip, into a
// thread-local fp32 tile that is written (transposed, rounded once) at the end. Every weight
// element is read from memory once and never transposed. Accumulation order depends only on
// the shape, so results are bitwise deterministic.
#include "vb_kernel.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour):
// @vb-param TILE 0 {0,1,2,3}  register tile: 0 = chosen per call from the token count, k = the target's k-th tile (VB_TILES; past the last: the last)
#ifndef TILE
#define TILE 0
#endif

#include <omp.h>

#include <algorithm>
#include <cstdint>

// Static dispatch only: the target is fixed by -march/-mcpu. Arrays of SVE (or RVV) vectors
// are not allowed (sizeless types), so scalable targets are disabled and an Arm SVE build uses
// NEON, 128 bits like the SVE of the Arm targets here (data/targets/neoverse-v2.json).
#define HWY_COMPILE_ONLY_STATIC 1
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif
#include <hwy/highway.h>

namespace {

namespace hn = hwy::HWY_NAMESPACE;
using vbk::Dt;
using i64 = std::int64_t;
using Df = hn::ScalableTag<float>;  // a full vector of the static target (not scalable here)

constexpr int V = static_cast<int>(hn::MaxLanes(Df()));  // fp32 lanes: 8 AVX2, 16 AVX-512, 4 NEON
// Register tile MR weight rows × NV vectors of token lanes, sized so that the MR·NV
// accumulators stay in registers (same reasons as kernels/cpu/matmul.cpp). The token count B
// is the tile's lane dimension, so a tile whose NV·V lanes do not divide B computes padding:
// with AVX-512's 8×3 tile (48 lanes) B = 64 tokens runs 96 lanes, a third of the FMAs wasted.
// Each target therefore offers a few tiles of the same accumulator count and a call picks,
// from B alone, the one that pads least (ties: the first listed), so results stay a function
// of the shape. TILE (tunable) fixes one of the listed tiles instead.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kRegs = 32;  // AVX-512: 24 accumulators + NV B vectors + 1 broadcast
constexpr bool kWeightRegsPerRow = false;
#define VB_TILES(X) X(8, 3) X(12, 2) X(6, 4)
#elif HWY_ARCH_ARM_A64
constexpr int kRegs = 32;  // NEON: MR·NV accumulators + NV B + MR weights (fmla by lane)
constexpr bool kWeightRegsPerRow = true;
#define VB_TILES(X) X(8, 2) X(4, 4)
#else
constexpr int kRegs = 16;  // AVX2/SSE4: 12 accumulators + NV B + 1 broadcast
constexpr bool kWeightRegsPerRow = false;
#define VB_TILES(X) X(6, 2) X(4, 3)
#endif
constexpr int KC = 256;  // depth of one slice (Aᵀ micro-panel KC×NR×4 = 16 KiB at NR = 16, L1)

/// c[i][j] += Σ_p a[i][p] · b[p][j] for an MR×NR tile (NR = NV·V). a: MR weight rows with
/// row stride KC (broadcast), b: packed kc×NR strip of Aᵀ (row stride NR), c: row stride ldc.
/// The MR × NV accumulators live in vector registers for the whole k loop.
/// Not forced inline: gemm_nt has no HWY_ATTR (an Arm SVE build's NEON attribute differs).
template <int MR, int NV>
HWY_ATTR void micro_kernel(int kc, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                           float* HWY_RESTRICT c, i64 ldc) {
  static_assert(MR * NV + NV + (kWeightRegsPerRow ? MR : 1) <= kRegs,
                "register tile exceeds the register file");
  constexpr int NR = NV * V;
  const Df d;
  hn::Vec<Df> acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = hn::Zero(d);
  for (int p = 0; p < kc; ++p) {
    hn::Vec<Df> bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = hn::LoadU(d, b + static_cast<i64>(p) * NR + j * V);
    for (int i = 0; i < MR; ++i) {
      const auto ai = hn::Set(d, a[i * KC + p]);
      for (int j = 0; j < NV; ++j) acc[i][j] = hn::MulAdd(ai, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* HWY_RESTRICT ci = c + i * ldc;
    for (int j = 0; j < NV; ++j)
      hn::StoreU(hn::Add(hn::LoadU(d, ci + j * V), acc[i][j]), d, ci + j * V);
  }
}

/// C[M,N] (dtype dtc, row stride ldc) = A[M,K] (dtype dta, row stride lda) · W[N,K]ᵀ (dtype
/// dtw), computed as Cᵀ = W·Aᵀ with an MR×(NV·V) register tile. K ≥ 1. Returns false on
/// allocation failure.
template <int MR, int NV>
bool gemm_nt_tile(i64 M, i64 N, i64 K, const void* A, Dt dta, i64 lda, const void* W, Dt dtw,
                  void* C, Dt dtc, i64 ldc) {
  constexpr int NR = NV * V;  // token lanes of the register tile
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int nth = flops >= 2.0e6 ? std::max(1, omp_get_max_threads()) : 1;
  const i64 strips = (M + NR - 1) / NR;  // NR-row strips of A
  const i64 Mp = strips * NR;
  const i64 kchunks = (K + KC - 1) / KC;
  const i64 panels = (N + MR - 1) / MR;  // MR-row micro-panels of W

  vbk::Scratch apack(strips * K * NR);  // Aᵀ strips: [strip][k][NR]
  if (!apack.ok()) return false;
  float* const at = apack.get();
  bool oom = false;

#pragma omp parallel num_threads(nth)
  {
    vbk::Scratch wbuf(MR * KC), ctile(MR * Mp), rowtmp(std::max<i64>(KC, MR));
    if (!(wbuf.ok() && ctile.ok() && rowtmp.ok())) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp barrier
    if (!oom) {
      float* const wb = wbuf.get();
      float* const ct = ctile.get();
      float* const tmp = rowtmp.get();
      // Pack Aᵀ: item = (strip, KC chunk); rows past M are zero.
#pragma omp for schedule(static)
      for (i64 it = 0; it < strips * kchunks; ++it) {
        const i64 s = it / kchunks, p0 = (it % kchunks) * KC;
        const i64 kc = std::min<i64>(KC, K - p0);
        float* dst = at + s * K * NR + p0 * NR;
        for (int r = 0; r < NR; ++r) {
          const i64 m = s * NR + r;
          if (m < M) {
            vbk::load_f32(A, dta, m * lda + p0, kc, tmp);
            for (i64 p = 0; p < kc; ++p) dst[p * NR + r] = tmp[p];
          } else {
            for (i64 p = 0; p < kc; ++p) dst[p * NR + r] = 0.0f;
          }
        }
      }
      // (implicit barrier: Aᵀ is packed)
#pragma omp for schedule(static)
      for (i64 q = 0; q < panels; ++q) {
        const i64 j0 = q * MR;
        const int nj = static_cast<int>(std::min<i64>(MR, N - j0));
        std::fill(ct, ct + MR * Mp, 0.0f);
        for (i64 pc = 0; pc < K; pc += KC) {
          const int kc = static_cast<int>(std::min<i64>(KC, K - pc));
          for (int i = 0; i < MR; ++i) {  // weight rows -> wb[i][0:kc] in fp32
            if (i < nj)
              vbk::load_f32(W, dtw, (j0 + i) * K + pc, kc, wb + i * KC);
            else
              std::fill(wb + i * KC, wb + i * KC + kc, 0.0f);
          }
          for (i64 s = 0; s < strips; ++s)
            micro_kernel<MR, NV>(kc, wb, at + s * K * NR + pc * NR, ct + s * NR, Mp);
        }
        // C[m][j0 + i] = ct[i][m], rounded once.
        for (i64 m = 0; m < M; ++m) {
          for (int i = 0; i < nj; ++i) tmp[i] = ct[i * Mp + m];
          vbk::store_f32(tmp, dtc, C, m * ldc + j0, nj);
        }
      }
    }
  }
  return !oom;
}

/// The register tile a GEMM with M token rows uses: the TILE-th of the target's tiles
/// (VB_TILES, counted from 1; past the last: the last) when TILE > 0, else the one that pads M
/// least, the first listed on a tie.
struct TileChoice {
  int mr = 0, nv = 0;
};
TileChoice choose_tile(i64 M) {
  TileChoice best;
  i64 best_lanes = -1;
  int index = 0;
#define VB_CONSIDER(mr_, nv_)                                      \
  {                                                                \
    ++index;                                                       \
    const i64 nr = static_cast<i64>(nv_) * V;                      \
    const i64 lanes = (M + nr - 1) / nr * nr;                      \
    if (TILE > 0 ? index <= TILE : (best_lanes < 0 || lanes < best_lanes)) { \
      best = {mr_, nv_};                                           \
      best_lanes = lanes;                                          \
    }                                                              \
  }
  VB_TILES(VB_CONSIDER)
#undef VB_CONSIDER
  return best;
}

/// gemm_nt_tile with the tile choose_tile(M) picks.
bool gemm_nt(i64 M, i64 N, i64 K, const void* A, Dt dta, i64 lda, const void* W, Dt dtw, void* C,
             Dt dtc, i64 ldc) {
  const TileChoice t = choose_tile(M);
#define VB_DISPATCH(mr_, nv_) \
  if (t.mr == (mr_) && t.nv == (nv_)) return gemm_nt_tile<mr_, nv_>(M, N, K, A, dta, lda, W, dtw, C, dtc, ldc);
  VB_TILES(VB_DISPATCH)
#undef VB_DISPATCH
  return false;  // unreachable: choose_tile returns a listed tile
}

/// h = silu(g) ⊙ u = g / (1 + exp(-g)) · u, in place in g.
void swiglu(float* g, const float* __restrict u, i64 n) {
#pragma omp simd
  for (i64 i = 0; i < n; ++i) {
    const float z = g[i];
    g[i] = z / (1.0f + vbk::exp_f32(-z)) * u[i];
  }
}

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)attrs;
  (void)stream;
  if (int e = vbk::check_args(inputs, n_inputs, 4, outputs, n_outputs, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [B,D], got %d", tx.ndim);
  const i64 B = tx.shape[0], D = tx.shape[1];
  if (inputs[1].ndim != 2) return vbk::fail("w_gate: expected 2 dimensions [H,D], got %d", inputs[1].ndim);
  const i64 H = inputs[1].shape[0];
  if (int e = vbk::check_shape(tx, "x", {B, D})) return e;
  if (int e = vbk::check_shape(inputs[1], "w_gate", {H, D})) return e;
  if (int e = vbk::check_shape(inputs[2], "w_up", {H, D})) return e;
  if (int e = vbk::check_shape(inputs[3], "w_down", {D, H})) return e;
  if (int e = vbk::check_shape(outputs[0], "y", {B, D})) return e;
  if (B == 0 || D == 0) return 0;

  const Dt dt = vbk::dtype_of(tx);
  const void* x = vbk::data_ptr(tx);
  void* y = vbk::data_ptr(outputs[0]);

  if (H == 0) {  // empty hidden layer: y = 0
    vbk::Scratch z(D);
    if (!z.ok()) return vbk::fail("out of memory");
    std::fill(z.get(), z.get() + D, 0.0f);
    for (i64 r = 0; r < B; ++r) vbk::store_f32(z.get(), dt, y, r * D, D);
    return 0;
  }

  vbk::Scratch gbuf(B * H), ubuf(B * H);
  if (!gbuf.ok() || !ubuf.ok()) return vbk::fail("out of memory (hidden activations)");
  float* const g = gbuf.get();
  float* const u = ubuf.get();
  if (!gemm_nt(B, H, D, x, dt, D, vbk::data_ptr(inputs[1]), dt, g, Dt::F32, H) ||
      !gemm_nt(B, H, D, x, dt, D, vbk::data_ptr(inputs[2]), dt, u, Dt::F32, H))
    return vbk::fail("out of memory (GEMM scratch)");

  const bool par = B * H >= (i64{1} << 15);
#pragma omp parallel for schedule(static) if (par)
  for (i64 r = 0; r < B; ++r) swiglu(g + r * H, u + r * H, H);

  if (!gemm_nt(B, D, H, g, Dt::F32, H, vbk::data_ptr(inputs[3]), dt, y, dt, D))
    return vbk::fail("out of memory (GEMM scratch)");
  return 0;
}
