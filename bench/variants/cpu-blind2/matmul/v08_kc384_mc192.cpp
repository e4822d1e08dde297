// variant v08_kc384_mc192 of the blind ranking study cpu-blind2 (bench/ranking_variants.py): KC=384, MC_ROWS=192
#define KC 384
#define MC_ROWS 192
// matmul (CPU starter): C[M,N] = A[M,K] · B[K,N], fp32 accumulation (DESIGN §2).
//
// Blocked GEMM in the BLIS/Goto style, all in fp32 whatever the storage dtype:
//  * the register tile (MR rows × NR = NV vectors of columns) is sized from the static Highway
//    target's vector width and register count, so its MR·NV accumulators never spill:
//    AVX2/SSE4 (16 registers): 6 × 2 vectors (AVX2: 6×16, 12 ymm accumulators + 2 B + 1 A);
//    AVX-512 (32 registers): 8 × 3 vectors (8×48, 24 zmm accumulators + 3 B + 1 A);
//    AArch64 NEON (32 registers): 8 × 2 vectors (8×8; see the note at the constants);
//  * A is packed once into MR-row micro-panels per KC slice (all of M and K), before the
//    parallel region when small (no barrier), else cooperatively;
//  * the work items are column chunks (≤ NC columns, ~4 per thread, taken dynamically so that
//    a thread slowed by other load on a shared 2-core machine delays little), split by rows
//    only when there are too few chunks (for M = 64, GPT-2 at 64 tokens, the threads split N);
//    each item packs the B blocks of its own columns (KC × NC, 256 KiB at the defaults, in L2)
//    into NR-wide k-major strips, so no B element is packed twice when there is one row group;
//  * per B block, A blocks of MC rows (≤ 120 KiB, L2) × strips × micro-panels, strip outer, so
//    one B strip (KC × NR × 4 B = 16 KiB on AVX2) stays in L1 while the A panels stream;
//  * edges are zero padded in the packed operands and in the thread's fp32 C tile, so the
//    micro-kernel always runs full tiles; only the final store (with dtype conversion) clips.
// bf16 inputs on an AVX512-BF16 build (BF16_DOT) keep A and B in bf16, packed as pairs of k
// (two bf16 in 32 bits), and multiply them with vdpbf16ps: two exact products per fp32 lane
// and instruction, half the instructions of the fp32 path at the same fp32 accumulation
// (PyTorch's bf16 mm, oneDNN, does the same; the fp32 path ran at 0.51x it here). The
// instruction flushes subnormal inputs and products to zero, so operands holding a subnormal,
// or whose smallest nonzero magnitudes multiply below 2^-126, take the fp32 path.
// Each C element is accumulated in a fixed k order (KC slices in order, k ascending inside a
// slice, each slice's partial sum added to the running sum), independent of the thread split,
// so results are bitwise deterministic.
#include "vb_kernel.h"

// Tunable parameters (read by `vladbud optimize`; the defaults are the starter's behaviour).
// Defaults sized for AMD EPYC Zen 3 (lscpu: 32 KiB L1d and 512 KiB L2 per core, 32 MiB L3):
// B strip KC×NR×4 = 16 KiB (L1), B block KC×NC×4 = 256 KiB + A slice MC×KC×4 ≤ 120 KiB (L2).
// @vb-param KC 256 {128,192,256,384,512}  depth of one packed K slice
#ifndef KC
#define KC 256
#endif
// @vb-param MC_ROWS 120 {48,72,96,120,144,192}  rows per block (rounded up to a multiple of MR)
#ifndef MC_ROWS
#define MC_ROWS 120
#endif
// @vb-param NC_COLS 256 {128,256,512,1024}  columns per packed B block and C tile (rounded to NR)
#ifndef NC_COLS
#define NC_COLS 256
#endif
// @vb-param NUM_THREADS 0 {0,1,2,4,8,16,32,64}  OpenMP threads (0 = the runtime's default)
#ifndef NUM_THREADS
#define NUM_THREADS 0
#endif
// @vb-param MR_TILE 0 {0,4,6,8}  rows of the register tile (0 = from the target, see below)
#ifndef MR_TILE
#define MR_TILE 0
#endif
// @vb-param NV_TILE 0 {0,1,2,3}  vectors of columns of the register tile (0 = from the target)
#ifndef NV_TILE
#define NV_TILE 0
#endif

// @vb-param BF16_DOT 1 {0,1}  bf16 inputs: 1 multiply bf16 pairs with vdpbf16ps (AVX512-BF16 builds; fp32 accumulation), 0 convert to fp32 and use fp32 FMAs
#ifndef BF16_DOT
#define BF16_DOT 1
#endif

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

// Static dispatch only: the target is fixed by -march/-mcpu. Arrays of SVE (or RVV) vectors
// are not allowed (sizeless types), so scalable targets are disabled and an Arm SVE build
// uses NEON, whose 128 bits are also the SVE width of the Arm targets here (Neoverse V2,
// data/targets/neoverse-v2.json: vector_width 128 bits).
#define HWY_COMPILE_ONLY_STATIC 1
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif
#include <hwy/highway.h>

namespace {

namespace hn = hwy::HWY_NAMESPACE;
using vbk::Dt;
using i64 = std::int64_t;
using D = hn::ScalableTag<float>;  // a full vector of the static target (not scalable here)

constexpr int V = static_cast<int>(hn::MaxLanes(D()));  // fp32 lanes: 8 AVX2, 16 AVX-512, 4 NEON
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kRegs = 32, kMR = 8, kNV = 3;  // AVX-512: 24 accumulators + 3 B + 1 A broadcast
constexpr int kARegs = 1;                     // registers holding broadcast A values
#elif HWY_ARCH_ARM_A64
// NEON: GCC keeps the MR broadcast A values in MR registers (fmla by element), so 8×3 would
// need 24 + 3 + 8 > 32 registers and spills (seen in aarch64-linux-gnu-g++ 12 -S); 8×2 fits.
constexpr int kRegs = 32, kMR = 8, kNV = 2, kARegs = kMR;
#else
constexpr int kRegs = 16, kMR = 6, kNV = 2;  // AVX2/SSE4: 12 accumulators + 2 B + 1 A broadcast
constexpr int kARegs = 1;
#endif
constexpr int MR = MR_TILE > 0 ? MR_TILE : kMR;  // rows of the register tile
constexpr int NV = NV_TILE > 0 ? NV_TILE : kNV;  // vectors of columns of the register tile
constexpr int NR = NV * V;                       // columns of the register tile
static_assert(MR * NV + NV + (kARegs == 1 ? 1 : MR) <= kRegs,
              "MR_TILE x NV_TILE: the accumulators, B vectors and A broadcasts exceed the "
              "vector register file of this target (they would spill)");

constexpr i64 MC_MAX = (MC_ROWS + MR - 1) / MR * MR;  // rows per block
constexpr i64 NC_MAX = (NC_COLS + NR - 1) / NR * NR;  // columns per B block / C tile

/// c[0:MR, 0:NR] (row stride ldc floats) = (first ? 0 : c) + Σ_{p<kc} a[p][:] ⊗ b[p][:], with
/// a: kc × MR and b: kc × NR packed k-major (a micro-panel of A and a strip of B). The MR × NV
/// accumulators live in vector registers for the whole k loop.
HWY_ATTR HWY_INLINE void micro_kernel(i64 kc, const float* HWY_RESTRICT a,
                                      const float* HWY_RESTRICT b, float* HWY_RESTRICT c, i64 ldc,
                                      bool first) {
  const D d;
  hn::Vec<D> acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = hn::Zero(d);
  for (i64 p = 0; p < kc; ++p) {
    hn::Vec<D> bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = hn::Load(d, b + j * V);
    for (int i = 0; i < MR; ++i) {
      const auto ai = hn::Set(d, a[i]);
      for (int j = 0; j < NV; ++j) acc[i][j] = hn::MulAdd(ai, bv[j], acc[i][j]);
    }
    a += MR;
    b += NR;
  }
  for (int i = 0; i < MR; ++i) {
    float* HWY_RESTRICT ci = c + i * ldc;
    for (int j = 0; j < NV; ++j) {
      const auto v = first ? acc[i][j] : hn::Add(hn::Load(d, ci + j * V), acc[i][j]);
      hn::Store(v, d, ci + j * V);
    }
  }
}

#if defined(__AVX512BF16__) && HWY_TARGET <= HWY_AVX3
#define VB_BF16_DOT BF16_DOT
#else
#define VB_BF16_DOT 0
#endif

#if VB_BF16_DOT
static_assert(KC % 2 == 0, "KC must be even on the bf16 path (its slices hold KC/2 pairs of k)");
/// The bf16 path's micro-kernel: c[0:MR, 0:NR] = (first ? 0 : c) + Σ over kp pairs of k of
/// a_pair ⊗ b_pair, each 32-bit element of a and b holding bf16 values k = 2p (low half) and
/// 2p + 1 (high half); vdpbf16ps adds both exact products into the fp32 accumulator (the odd
/// k first, then the even one, each rounded: a fixed order, so results stay deterministic).
/// a: kp × MR pairs, b: kp × NR pairs, k-major.
inline void micro_kernel_bf16(i64 kp, const std::uint32_t* __restrict a,
                              const std::uint32_t* __restrict b, float* __restrict c, i64 ldc,
                              bool first) {
  static_assert(V == 16, "the bf16 path is written for 16 fp32 lanes (AVX-512)");
  __m512 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_ps();
  for (i64 p = 0; p < kp; ++p) {
    __m512bh bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = (__m512bh)_mm512_loadu_si512(b + j * V);
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i]));
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], ai, bv[j]);
    }
    a += MR;
    b += NR;
  }
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    for (int j = 0; j < NV; ++j) {
      const __m512 v = first ? acc[i][j] : _mm512_add_ps(_mm512_loadu_ps(ci + j * V), acc[i][j]);
      _mm512_storeu_ps(ci + j * V, v);
    }
  }
}

/// Packs panel q of A (bf16, row-major M×K) for the bf16 path: KC slice pc starts at
/// ap + (pc/2)·mpad and holds mpad/MR micro-panels of ceil(kc/2)×MR bf16 pairs (k-major);
/// rows ≥ M and the high half of an odd slice's last pair are zero.
void pack_a_panel_bf16(const std::uint16_t* A, i64 M, i64 K, i64 q, i64 mpad,
                       std::uint32_t* __restrict ap) {
  for (i64 i = 0; i < MR; ++i) {
    const i64 r = q * MR + i;
    const std::uint16_t* row = r < M ? A + r * K : nullptr;
    for (i64 pc = 0; pc < K; pc += KC) {
      const i64 kc = std::min<i64>(KC, K - pc), kp = (kc + 1) / 2;
      std::uint32_t* dst = ap + (pc / 2) * mpad + q * kp * MR + i;
      for (i64 p = 0; p < kp; ++p) {
        std::uint32_t v = 0;
        if (r < M) {
          const i64 k = pc + 2 * p;
          v = row[k] | (k + 1 < pc + kc ? static_cast<std::uint32_t>(row[k + 1]) << 16 : 0u);
        }
        dst[p * MR] = v;
      }
    }
  }
}

/// Packs B[pc:pc+kc, c0:c0+nc] (bf16, row-major K×N) into ceil(nc/NR) strips of
/// ceil(kc/2)×NR bf16 pairs (k-major; the pair of rows 2p, 2p+1 interleaved per column), zero
/// past nc and past kc.
void pack_b_bf16(const std::uint16_t* B, i64 N, i64 pc, i64 kc, i64 c0, i64 nc,
                 std::uint32_t* __restrict bp) {
  const i64 strips = (nc + NR - 1) / NR, kp = (kc + 1) / 2, full = nc / NR;
  for (i64 p = 0; p < kp; ++p) {
    const std::uint16_t* r0 = B + (pc + 2 * p) * N + c0;
    const bool two = 2 * p + 1 < kc;
    const std::uint16_t* r1 = two ? r0 + N : nullptr;
    for (i64 s = 0; s < full; ++s) {
      std::uint32_t* dst = bp + s * kp * NR + p * NR;
      for (int j = 0; j < NV; ++j) {
        // 16 columns: interleave row 2p (low halves) with row 2p+1 (high halves).
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + s * NR + j * V));
        const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + s * NR + j * V))
                               : _mm256_setzero_si256();
        const __m512i v = _mm512_or_si512(_mm512_cvtepu16_epi32(lo),
                                          _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
        _mm512_storeu_si512(dst + j * V, v);
      }
    }
    if (strips > full) {
      std::uint32_t* dst = bp + full * kp * NR + p * NR;
      const i64 rem = nc - full * NR;
      for (i64 j = 0; j < NR; ++j)
        dst[j] = j < rem ? (r0[full * NR + j] |
                            (two ? static_cast<std::uint32_t>(r1[full * NR + j]) << 16 : 0u))
                         : 0u;
    }
  }
}

/// Smallest nonzero |x| of n bf16 values as a float (0 when there is a subnormal, so that
/// the caller's product test fails; +inf when every value is zero).
inline float min_nonzero_abs_bf16(const std::uint16_t* __restrict x, i64 n) {
  // Branch-free so that it vectorizes (a scalar scan of 2 M values cost ~1 ms per 1024³ call).
  // Magnitudes 1..0x7f are subnormal (exponent bits 0); 0 maps to 0xffff for the minimum.
  unsigned m = 0xffffu, sub = 0;
#pragma omp simd reduction(min : m) reduction(| : sub)
  for (i64 i = 0; i < n; ++i) {
    const unsigned a = x[i] & 0x7fffu;
    sub |= static_cast<unsigned>(a - 1u < 0x7fu);
    const unsigned key = a == 0 ? 0xffffu : a;
    m = key < m ? key : m;
  }
  if (sub) return 0.0f;
  return m == 0xffffu ? __builtin_inff() : vbk::bf16_to_float(static_cast<std::uint16_t>(m));
}
#endif

/// Packs the MR rows [q·MR, q·MR+MR) of A (row-major M×K, dtype dt) for all of K into ap,
/// rows ≥ M zero: KC slice pc starts at ap + pc·mpad (mpad = ceil(M/MR)·MR floats per k) and
/// holds mpad/MR micro-panels of kc×MR floats (k-major); this is panel q of every slice.
/// tmp: K floats.
void pack_a_panel(const void* A, Dt dt, i64 M, i64 K, i64 q, i64 mpad, float* HWY_RESTRICT ap,
                  float* HWY_RESTRICT tmp) {
  for (i64 i = 0; i < MR; ++i) {
    const i64 r = q * MR + i;
    if (r < M) vbk::load_f32(A, dt, r * K, K, tmp);
    for (i64 pc = 0; pc < K; pc += KC) {
      const i64 kc = std::min<i64>(KC, K - pc);
      float* HWY_RESTRICT dst = ap + pc * mpad + q * kc * MR + i;
      if (r < M) {
        for (i64 p = 0; p < kc; ++p) dst[p * MR] = tmp[pc + p];
      } else {
        for (i64 p = 0; p < kc; ++p) dst[p * MR] = 0.0f;
      }
    }
  }
}

/// Packs B[pc:pc+kc, c0:c0+nc] (row-major K×N, dtype dt) into ceil(nc/NR) strips of kc×NR
/// floats (k-major; strip s holds columns c0+s·NR …), zero past nc. tmp: NC_MAX floats.
HWY_ATTR void pack_b(const void* B, Dt dt, i64 N, i64 pc, i64 kc, i64 c0, i64 nc,
                     float* HWY_RESTRICT bp, float* HWY_RESTRICT tmp) {
  const D d;
  const i64 full = nc / NR, strips = (nc + NR - 1) / NR, rem = nc - full * NR;
  for (i64 p = 0; p < kc; ++p) {
    const float* src;
    if (dt == Dt::F32) {
      src = static_cast<const float*>(B) + (pc + p) * N + c0;
    } else {
      vbk::load_f32(B, dt, (pc + p) * N + c0, nc, tmp);
      src = tmp;
    }
    for (i64 s = 0; s < full; ++s) {
      float* HWY_RESTRICT dst = bp + s * kc * NR + p * NR;
      for (int j = 0; j < NV; ++j) hn::Store(hn::LoadU(d, src + s * NR + j * V), d, dst + j * V);
    }
    if (strips > full) {
      float* HWY_RESTRICT dst = bp + full * kc * NR + p * NR;
      for (i64 j = 0; j < NR; ++j) dst[j] = j < rem ? src[full * NR + j] : 0.0f;
    }
  }
}

/// One work item: C[q0·MR : min(q1·MR, M), c0:c1] for all of K from the packed A (ap, see
/// pack_a_panel). Scratch: bp (KC × w), ct ((q1-q0)·MR × w) with w = min(c1-c0, NC_MAX)
/// rounded up to NR, tmp (NC_MAX) floats.
/// kBf16 (the bf16 path, VB_BF16_DOT): ap and bp hold bf16 pairs (pack_a_panel_bf16,
/// pack_b_bf16) and k runs in pairs; otherwise fp32.
template <bool kBf16>
HWY_ATTR void run_share(const float* ap, const void* B, void* C, Dt dt, i64 M, i64 N, i64 K,
                        i64 mpad, i64 q0, i64 q1, i64 c0, i64 c1, float* bp, float* ct,
                        float* tmp) {
  constexpr i64 kMcPanels = MC_MAX / MR;  // micro-panels per A block (L2)
  const i64 row0 = q0 * MR, mrows = std::min(q1 * MR, M) - row0;
  for (i64 jc = c0; jc < c1; jc += NC_MAX) {
    const i64 nc = std::min(NC_MAX, c1 - jc), strips = (nc + NR - 1) / NR, ldc = strips * NR;
    for (i64 pc = 0; pc < K; pc += KC) {
      const i64 kc = std::min<i64>(KC, K - pc);
      // Packed elements along k: k itself, or its pairs on the bf16 path.
      const i64 kk = kBf16 ? (kc + 1) / 2 : kc;
      if constexpr (kBf16) {
#if VB_BF16_DOT
        pack_b_bf16(static_cast<const std::uint16_t*>(B), N, pc, kc, jc, nc,
                    reinterpret_cast<std::uint32_t*>(bp));
#endif
      } else {
        pack_b(B, dt, N, pc, kc, jc, nc, bp, tmp);
      }
      const float* as = ap + (kBf16 ? pc / 2 : pc) * mpad;
      for (i64 qb = q0; qb < q1; qb += kMcPanels) {
        const i64 qe = std::min(q1, qb + kMcPanels);
        for (i64 s = 0; s < strips; ++s)
          for (i64 q = qb; q < qe; ++q) {
            if constexpr (kBf16) {
#if VB_BF16_DOT
              micro_kernel_bf16(kk, reinterpret_cast<const std::uint32_t*>(as + q * kk * MR),
                                reinterpret_cast<const std::uint32_t*>(bp + s * kk * NR),
                                ct + (q - q0) * MR * ldc + s * NR, ldc, pc == 0);
#endif
            } else {
              micro_kernel(kk, as + q * kk * MR, bp + s * kk * NR,
                           ct + (q - q0) * MR * ldc + s * NR, ldc, pc == 0);
            }
          }
      }
    }
    for (i64 r = 0; r < mrows; ++r) vbk::store_f32(ct + r * ldc, dt, C, (row0 + r) * N + jc, nc);
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

  // Below ~2 MFLOP (~20 µs on one core) a second thread costs more than it saves.
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int nth =
      flops >= 2.0e6 ? std::max(1, NUM_THREADS > 0 ? NUM_THREADS : omp_get_max_threads()) : 1;

  // Work items: column chunks (≤ NC columns, about 4 per thread so that a thread delayed by
  // other load on a shared machine holds up at most a small chunk; dynamic schedule) × row
  // groups (only when there are too few column chunks). Each item packs the B blocks of its
  // own columns, so with one row group no B element is packed twice.
  // The chunk count is rounded up to a multiple of the thread count and the strips are spread
  // evenly (sizes differ by at most one, larger chunks first, so the dynamic schedule ends
  // balanced): 64 strips of 48 columns (GPT-2's 64x3072x768 on AVX-512) were 11 chunks of <= 6
  // strips, one thread doing 34 strips and the other 30.
  const i64 m_panels = (M + MR - 1) / MR, strips = (N + NR - 1) / NR, mpad = m_panels * MR;
  const i64 want = 4 * static_cast<i64>(nth);
  const i64 max_cs = NC_MAX / NR;  // strips per column chunk at most (B block in L2)
  i64 n_cc = std::max<i64>(std::min<i64>(want, strips), (strips + max_cs - 1) / max_cs);
  if (n_cc % nth != 0 && n_cc + (nth - n_cc % nth) <= strips) n_cc += nth - n_cc % nth;
  const i64 cs_base = strips / n_cc, cs_extra = strips % n_cc;  // chunk c: cs_base (+1 if c < extra)
  const i64 cs = cs_base + (cs_extra > 0 ? 1 : 0);               // the largest chunk, in strips
  i64 n_rg = nth > 1 && n_cc < want ? std::min((want + n_cc - 1) / n_cc, m_panels) : 1;
  const i64 rg_panels = (m_panels + n_rg - 1) / n_rg;  // micro-panels per row group
  n_rg = (m_panels + rg_panels - 1) / rg_panels;
  const i64 n_items = n_rg * n_cc;

  // bf16 inputs take the vdpbf16ps path unless an operand holds a subnormal or the smallest
  // nonzero magnitudes of A and B multiply below the fp32 normal range: the instruction
  // treats subnormal inputs and products as 0, so the fp32 path keeps those. What the path
  // can still flush is a sum that cancels into the subnormal range, an absolute error below
  // 2^-126.
  bool bf16_dot = false;
#if VB_BF16_DOT
  if (dt == Dt::BF16) {
    const float na = min_nonzero_abs_bf16(static_cast<const std::uint16_t*>(A), M * K);
    const float nb = min_nonzero_abs_bf16(static_cast<const std::uint16_t*>(B), K * N);
    bf16_dot = static_cast<double>(na) * static_cast<double>(nb) >= 0x1p-126;
  }
#endif

  vbk::Scratch apack(mpad * K);  // A packed once for all threads (bf16 pairs: fewer than K)
  if (!apack.ok()) return vbk::fail("out of memory (packed A)");
  float* const ap = apack.get();
  auto pack_a = [&](i64 q, float* tmp) {
#if VB_BF16_DOT
    if (bf16_dot) {
      pack_a_panel_bf16(static_cast<const std::uint16_t*>(A), M, K, q, mpad,
                        reinterpret_cast<std::uint32_t*>(ap));
      return;
    }
#endif
    pack_a_panel(A, dt, M, K, q, mpad, ap, tmp);
  };
  // A small A (GPT-2 at 64 tokens: 66 × 768 or 66 × 3072 floats) is packed here, before the
  // parallel region, so that no barrier waits for a thread that the OS has not scheduled yet;
  // a large one cooperatively (dynamic: whichever thread runs packs).
  const bool serial_a = nth == 1 || mpad * K <= (i64{1} << 18);
  if (serial_a) {
    vbk::Scratch rowtmp(K);
    if (!rowtmp.ok()) return vbk::fail("out of memory (conversion row)");
    for (i64 q = 0; q < m_panels; ++q) pack_a(q, rowtmp.get());
  }
  bool oom = false;
#pragma omp parallel num_threads(nth)
  {
    // Thread-local scratch: packed B block, fp32 C tile, conversion row.
    vbk::Scratch bpack(KC * cs * NR), ctile(rg_panels * MR * cs * NR),
        rowtmp(std::max<i64>(K, NC_MAX));
    const bool ok = bpack.ok() && ctile.ok() && rowtmp.ok();
    if (!serial_a) {
#pragma omp for schedule(dynamic, 1)
      for (i64 q = 0; q < m_panels; ++q) {
        if (ok) {
          pack_a(q, rowtmp.get());
        } else {
#pragma omp atomic write
          oom = true;
        }
      }
      // (implicit barrier: A is packed)
    }
    // A thread without scratch takes items only to flag them: the call then fails.
#pragma omp for schedule(dynamic, 1) nowait
    for (i64 item = 0; item < n_items; ++item) {
      if (!ok) {
#pragma omp atomic write
        oom = true;
        continue;
      }
      const i64 rg = item / n_cc, cc = item % n_cc;
      const i64 q0 = rg * rg_panels, q1 = std::min(m_panels, q0 + rg_panels);
      const i64 s0 = cc * cs_base + std::min(cc, cs_extra);
      const i64 c0 = s0 * NR, c1 = std::min(N, (s0 + cs_base + (cc < cs_extra ? 1 : 0)) * NR);
      if (bf16_dot)
        run_share<true>(ap, B, C, dt, M, N, K, mpad, q0, q1, c0, c1, bpack.get(), ctile.get(),
                        rowtmp.get());
      else
        run_share<false>(ap, B, C, dt, M, N, K, mpad, q0, q1, c0, c1, bpack.get(), ctile.get(),
                         rowtmp.get());
    }
  }
  if (oom) return vbk::fail("out of memory (per-thread scratch)");
  return 0;
}
