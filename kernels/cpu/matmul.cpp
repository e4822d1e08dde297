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
// Small M (M <= SMALL_M; GPT-2 and LLaMA at 64 tokens) takes run_small instead: packing B in a
// pass of its own cost about as much as the multiply there (M = 64: each B element is used
// 64 times; 0.56x torch.mm at 64x768x768 on a 2-core Ice Lake). It reads fp32 A in place,
// multiplies each SKC x NR block of B straight from B's rows in the first micro-panel's pass
// (which leaves an L1 copy for the other micro-panels), software-prefetches the next B block
// into L2 while the current one is multiplied, and writes the last K slice straight to C.
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

// @vb-param SMALL_M 128 {0,32,64,128,256}  at most this many rows (M) take the small-M path (0: never), see run_small
#ifndef SMALL_M
#define SMALL_M 128
#endif
// @vb-param PF_B 1 {0,1}  small-M path: software-prefetch the next B block into L2 while the current one is multiplied
#ifndef PF_B
#define PF_B 1
#endif
// @vb-param SKC 128 {64,128,192,256,384}  small-M path: depth of one K slice (SKC x NR block of B in L1: 24 KiB on AVX-512)
#ifndef SKC
#define SKC 128
#endif
// @vb-param SMALL_NG 4 {1,2,4,8,16}  small-M path: column strips that share one pass over an A slice
#ifndef SMALL_NG
#define SMALL_NG 4
#endif
// @vb-param SMALL_ITEMS 4 {1,2,4,8}  small-M path: work items per thread (runs of strips; fewer: longer runs of B's rows per item, more: better balance under load)
#ifndef SMALL_ITEMS
#define SMALL_ITEMS 4
#endif

// @vb-param BF16_DOT 1 {0,1}  bf16 inputs: 1 multiply bf16 pairs with vdpbf16ps (AVX512-BF16 builds; fp32 accumulation), 0 convert to fp32 and use fp32 FMAs
#ifndef BF16_DOT
#define BF16_DOT 1
#endif

#include <omp.h>

#include <algorithm>
#include <atomic>
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

/// micro_kernel for the small-M path: b is a kc x NR block with row stride ldb floats (B's own
/// rows read in place, or a packed block with ldb = NR); with kCopy the B vectors are also
/// stored to bcopy (kc x NR, packed k-major) so that the other micro-panels read them from L1
/// (packing fused into the first micro-panel's pass). The sum goes to co (row stride ldo):
/// (first ? 0 : ci) + Σ_p a[p][:] ⊗ b[p][:], ci with row stride NR. Every 8 k steps the loop
/// issues L2 prefetches for up to rpc rows of the next B block (pf: pf_rows rows of pf_span
/// bytes, pf_ld bytes apart), so that B streams from memory while the FMAs run.
template <bool kCopy, bool kRawA>
HWY_ATTR HWY_INLINE void micro_kernel_s(i64 kc, const float* HWY_RESTRICT a, i64 lda,
                                        const float* HWY_RESTRICT b, i64 ldb,
                                        float* HWY_RESTRICT bcopy, const float* ci, bool first,
                                        float* co, i64 ldo, const char* pf, i64 pf_ld,
                                        i64 pf_rows, i64 pf_span) {
  const D d;
  hn::Vec<D> acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = hn::Zero(d);
  const float* ar[MR];  // kRawA: A's own rows (row stride lda), else a packed micro-panel
  for (int i = 0; i < MR; ++i) ar[i] = a + i * lda;
  const i64 chunks = (kc + 7) / 8, rpc = (pf_rows + chunks - 1) / chunks;
  for (i64 p0 = 0; p0 < kc; p0 += 8) {
    for (i64 r = 0; r < rpc && pf_rows > 0; ++r, --pf_rows, pf += pf_ld) {
      for (i64 off = 0; off < pf_span; off += 64) __builtin_prefetch(pf + off, 0, 2);
      __builtin_prefetch(pf + pf_span - 1, 0, 2);
    }
    const i64 pe = std::min<i64>(p0 + 8, kc);
    for (i64 p = p0; p < pe; ++p) {
      hn::Vec<D> bv[NV];
      for (int j = 0; j < NV; ++j) bv[j] = hn::LoadU(d, b + j * V);
      if constexpr (kCopy) {
        for (int j = 0; j < NV; ++j) hn::Store(bv[j], d, bcopy + j * V);
        bcopy += NR;
      }
      for (int i = 0; i < MR; ++i) {
        const auto ai = hn::Set(d, kRawA ? ar[i][p] : a[i]);
        for (int j = 0; j < NV; ++j) acc[i][j] = hn::MulAdd(ai, bv[j], acc[i][j]);
      }
      if constexpr (!kRawA) a += MR;
      b += ldb;
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NV; ++j) {
      const auto v = first ? acc[i][j] : hn::Add(hn::Load(d, ci + i * NR + j * V), acc[i][j]);
      hn::StoreU(v, d, co + i * ldo + j * V);
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
                  float* HWY_RESTRICT tmp, i64 kcs) {
  for (i64 i = 0; i < MR; ++i) {
    const i64 r = q * MR + i;
    if (r < M) vbk::load_f32(A, dt, r * K, K, tmp);
    for (i64 pc = 0; pc < K; pc += kcs) {
      const i64 kc = std::min<i64>(kcs, K - pc);
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

/// The small-M path (M <= SMALL_M, fp32 FMAs; GPT-2 at 64 tokens). The work items are runs of
/// consecutive NR-wide column strips, taken in groups of at most SMALL_NG strips; per group and
/// SKC slice, every MR-row micro-panel of A multiplies the SKC x NR block of B of each strip, so
/// that the A slice (fp32: A's own rows, read in place; else packed once, SKC slices) stays in
/// cache across the group's strips. The B block is not packed in a separate pass (for M = 64,
/// packing all of B cost as much as the multiply): for fp32 and a full strip the first
/// micro-panel reads B's rows in place and stores the copy that the others read from L1;
/// otherwise (conversion, the last partial strip) pack_b packs it. While a block is multiplied,
/// its micro-kernel calls prefetch the next one (the next strip, the next slice, the next group,
/// or the first strip of the item claimed next) into L2, and the last slice writes fp32 results
/// straight to C. Items are claimed from an atomic counter (claim); a thread claims its next
/// item when it reaches the last block of the current one, so that the prefetch runs ahead
/// into it. ct: SMALL_NG x mpad x NR floats, bbuf: SKC x NR, tmp: NC_MAX. Each C element is
/// summed in the big path's order (k slices in order, k ascending inside a slice).
template <class Claim>
HWY_ATTR void run_small(const float* ap, const float* Araw, const void* B, void* C, Dt dt, i64 M,
                        i64 N, i64 K, i64 mpad, i64 n_items, i64 st_base, i64 st_extra,
                        Claim claim, float* ct, float* bbuf, float* tmp) {
  const i64 m_panels = mpad / MR, full = N / NR, esize = dt == Dt::F32 ? 4 : 2;
  const char* const Bc = static_cast<const char*>(B);
  float* const Cf = static_cast<float*>(C);
  auto strip0 = [&](i64 it) { return it * st_base + std::min(it, st_extra); };
  i64 cur = claim();
  while (cur < n_items) {
    const i64 s0 = strip0(cur), s1 = strip0(cur + 1);
    i64 nxt = -1;
    for (i64 g0 = s0; g0 < s1; g0 += SMALL_NG) {
      const i64 g1 = std::min<i64>(s1, g0 + SMALL_NG);
      for (i64 pc = 0; pc < K; pc += SKC) {
        const i64 kc = std::min<i64>(SKC, K - pc);
        const bool last = pc + SKC >= K;
        for (i64 s = g0; s < g1; ++s) {
          const i64 col = s * NR, ncols = std::min<i64>(NR, N - col);
          const bool in_place = dt == Dt::F32 && s < full;  // B read in place, results into C
          float* const cts = ct + (s - g0) * mpad * NR;
          // The next block: (pc, s + 1), (pc + SKC, g0), (0, g1), or (0, next item's first).
          i64 npc = pc, ns = s + 1;
          if (ns == g1) {
            npc = pc + SKC;
            ns = g0;
            if (last) {
              npc = 0;
              ns = g1;
              if (g1 == s1) {
                nxt = claim();
                ns = nxt < n_items ? strip0(nxt) : -1;
              }
            }
          }
          const char* pf = nullptr;
          i64 pf_rows = 0, pf_span = 0;
          if (PF_B && ns >= 0) {
            pf = Bc + (npc * N + ns * NR) * esize;
            pf_rows = std::min<i64>(SKC, K - npc);
            pf_span = std::min<i64>(NR, N - ns * NR) * esize;
          }
          if (!in_place) pack_b(B, dt, N, pc, kc, col, ncols, bbuf, tmp);
          const float* as = ap + pc * mpad;
          const i64 per = (pf_rows + m_panels - 1) / m_panels;  // prefetch rows per micro-panel
          for (i64 q = 0; q < m_panels; ++q) {
            const i64 r0 = std::min(pf_rows, q * per), r1 = std::min(pf_rows, r0 + per);
            const char* pq = pf ? pf + r0 * N * esize : nullptr;
            float* cq = cts + q * MR * NR;
            // The last slice of a full fp32 strip stores into C (rows < M), else into ct.
            const bool to_c = in_place && last && (q + 1) * MR <= M;
            float* co = to_c ? Cf + q * MR * N + col : cq;
            const i64 ldo = to_c ? N : NR;
            if (to_c)  // this micro-panel's rows of C, written at the end of the call
              for (int i = 0; i < MR; ++i) {
                const char* cr = reinterpret_cast<const char*>(co + i * N);
                for (int off = 0; off < NR * 4; off += 64) __builtin_prefetch(cr + off, 1, 3);
                __builtin_prefetch(cr + NR * 4 - 1, 1, 3);
              }
            // fp32 A is read in place but for a partial last micro-panel (packed, rows >= M 0).
            const bool raw_a = Araw && (q + 1) * MR <= M;
            const float* aq = raw_a ? Araw + q * MR * K + pc : as + q * kc * MR;
            const bool copy_b = in_place && q == 0;
            const float* bq = copy_b ? static_cast<const float*>(B) + pc * N + col : bbuf;
            const i64 ldb = copy_b ? N : NR;
            if (copy_b) {
              if (raw_a)
                micro_kernel_s<true, true>(kc, aq, K, bq, ldb, bbuf, cq, pc == 0, co, ldo, pq,
                                           N * esize, r1 - r0, pf_span);
              else
                micro_kernel_s<true, false>(kc, aq, MR, bq, ldb, bbuf, cq, pc == 0, co, ldo, pq,
                                            N * esize, r1 - r0, pf_span);
            } else {
              if (raw_a)
                micro_kernel_s<false, true>(kc, aq, K, bq, ldb, nullptr, cq, pc == 0, co, ldo, pq,
                                            N * esize, r1 - r0, pf_span);
              else
                micro_kernel_s<false, false>(kc, aq, MR, bq, ldb, nullptr, cq, pc == 0, co, ldo,
                                             pq, N * esize, r1 - r0, pf_span);
            }
          }
        }
      }
      for (i64 s = g0; s < g1; ++s) {
        const i64 col = s * NR, ncols = std::min<i64>(NR, N - col);
        const i64 r_done = dt == Dt::F32 && s < full ? M / MR * MR : 0;  // rows already in C
        const float* cts = ct + (s - g0) * mpad * NR;
        for (i64 r = r_done; r < M; ++r) vbk::store_f32(cts + r * NR, dt, C, r * N + col, ncols);
      }
    }
    cur = nxt >= 0 ? nxt : claim();
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

  // The small-M path (run_small): work items of whole strips, claimed from an atomic counter.
  const bool small = SMALL_M > 0 && M <= SMALL_M && !bf16_dot;
  i64 s_items = std::min<i64>(strips, SMALL_ITEMS * static_cast<i64>(nth));
  if (s_items % nth != 0 && s_items + (nth - s_items % nth) <= strips) s_items += nth - s_items % nth;
  const i64 st_base = strips / s_items, st_extra = strips % s_items;
  std::atomic<i64> s_next{0};

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
    pack_a_panel(A, dt, M, K, q, mpad, ap, tmp, small ? SKC : KC);
  };
  // A small A (GPT-2 at 64 tokens: 66 × 768 or 66 × 3072 floats) is packed here, before the
  // parallel region, so that no barrier waits for a thread that the OS has not scheduled yet;
  // a large one cooperatively (dynamic: whichever thread runs packs).
  const bool small_raw_a = small && dt == Dt::F32;
  const bool serial_a = nth == 1 || mpad * K <= (i64{1} << 18) || small_raw_a;
  if (serial_a) {
    vbk::Scratch rowtmp(K);
    if (!rowtmp.ok()) return vbk::fail("out of memory (conversion row)");
    // The small path reads full micro-panels of fp32 A in place: only a partial one is packed.
    for (i64 q = small_raw_a ? M / MR : 0; q < m_panels; ++q) pack_a(q, rowtmp.get());
  }
  bool oom = false;
#pragma omp parallel num_threads(nth)
  {
    // Thread-local scratch: packed B block, fp32 C tile, conversion row.
    vbk::Scratch bpack(small ? SKC * NR : KC * cs * NR),
        ctile(small ? SMALL_NG * mpad * NR : rg_panels * MR * cs * NR), rowtmp(std::max<i64>(K, NC_MAX));
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
    if (small) {
      if (!ok) {
#pragma omp atomic write
        oom = true;
      } else {
        run_small(ap, small_raw_a ? static_cast<const float*>(A) : nullptr, B, C, dt, M, N, K, mpad, s_items, st_base, st_extra,
                  [&] { return s_next.fetch_add(1, std::memory_order_relaxed); }, ctile.get(),
                  bpack.get(), rowtmp.get());
      }
    } else {
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
  }
  if (oom) return vbk::fail("out of memory (per-thread scratch)");
  return 0;
}
