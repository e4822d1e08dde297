// flash_attention (CUDA starter): O = softmax(Q·Kᵀ·sm_scale + mask)·V per (batch, head) over
// row-major Q, O [B,H,S,D] and K, V [B,H_kv,S,D] (DESIGN §2); grouped-query attention (GQA):
// H % H_kv == 0 and query head h reads KV head h / (H/H_kv), read in place (no expanded copy;
// H_kv = H is plain multi-head attention, H_kv = 1 multi-query). Causal mask top-left aligned
// (key j visible to query i iff j <= i), as in PyTorch SDPA.
//
// fp16 / bf16 with D % 8 == 0, D <= 256 and 16-byte aligned tensors: FlashAttention-2 forward
// (Dao 2023) on tensor cores. A CTA owns BLOCK_Q = FA_WARP_ROWS·FA_WARPS query rows of one head
// (head dim 64; 16·FA_WARPS otherwise, and with FA_SPLIT_SMALL_GRIDS for grids under two CTAs per
// SM), each warp FA_WARP_ROWS rows as one or two m16 tiles
// that share every K and V fragment it loads (two tiles halve the shared-memory reads per MMA,
// as FlashAttention-2's 128-row tiles with four warps do); K/V tiles of BLOCK_KV keys stream
// through a double-buffered cp.async ring. Per tile a warp computes S = Q·Kᵀ with mma.sync
// m16n8k16 (Q by ldmatrix, kept in registers for head dim 64, and 128 with one m16 tile per
// warp; K by ldmatrix non-transposed:
// K[S,D] row-major is the "col" operand of Q·Kᵀ), masks, updates the running row max m of the
// raw scores and row sum l in fp32 (online softmax; p = 2^((s - m)·c), c = sm_scale·log2(e), one
// FADD, one FMUL and one SFU ex2 per score, sm_scale > 0 and c finite on this path; the
// subtraction comes first so the row maximum's weight is exactly 1: the one-FFMA form
// 2^(s·c - fl(m·c)) gives it 2^(rounding error of m·c), which overflows or flushes once |m·c|
// passes 2^31 and made NaN rows, the stability stage's huge_logits case), rescales its fp32 O
// accumulators and adds P·V, with P rounded to the input dtype and re-used from the S
// accumulators as the A fragment (no shared-memory round trip; V by ldmatrix .trans). Head dims
// are padded to DP ∈ {64, 80, 96, 128, 256} with zero-filled columns (they add 0 to Q·Kᵀ and
// are not stored). Under causal masking the K/V loop stops at the diagonal and warps skip the
// tiles that lie entirely above their rows. Rows (query or key) past S are zero-filled; keys past
// S are masked.
//
// fp32 (true fp32, never TF32) and any other case (D not a multiple of 8, misaligned bases,
// sm_scale <= 0):
// the same algorithm on the SIMT cores in fp32 FFMA, 64 query rows × 32 keys per tile, 256
// threads, every thread 4 rows × 2 keys of S and 4 rows × D/16 columns of O.
//
// Determinism: fixed reduction orders (butterfly shuffles give every lane identical bits).
// No fast-math: RNE conversions; the SIMT path's exp2f keeps subnormal results; the tensor-core
// path's ex2 flushes weights below 2^-126 (relative to a row sum >= 1; see ex2_ftz).
#include "vb_cuda.cuh"

#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

// @vb-param FA_WARPS 4 {4,8}  warps per CTA on the tensor-core path (FA_WARP_ROWS query rows each)
#ifndef FA_WARPS
#define FA_WARPS 4
#endif
// @vb-param FA_WARP_ROWS 32 {16,32}  query rows per warp on the tensor-core path, head dim 64
#ifndef FA_WARP_ROWS
#define FA_WARP_ROWS 32
#endif
// @vb-param FA_SPLIT_SMALL_GRIDS 0 {0,1}  1: with FA_WARP_ROWS 32, grids under two CTAs per SM use 16 rows per warp
#ifndef FA_SPLIT_SMALL_GRIDS
#define FA_SPLIT_SMALL_GRIDS 0
#endif
// @vb-param FA_MIN_CTAS 1 {1,3,4}  CTAs per SM the register allocation must leave room for (head dim 64, one m16 tile per warp)
#ifndef FA_MIN_CTAS
#define FA_MIN_CTAS 1
#endif
// @vb-param FA_BLOCK_KV 64 {32,64,128}  keys per K/V tile on the tensor-core path, head dim <= 128
#ifndef FA_BLOCK_KV
#define FA_BLOCK_KV 64
#endif
// @vb-param FA_BLOCK_KV_WIDE 32 {16,32}  keys per K/V tile for head dims 129..256 (register budget)
#ifndef FA_BLOCK_KV_WIDE
#define FA_BLOCK_KV_WIDE 32
#endif

// @vb-param USE_WGMMA 1 {0,1}  1: fp16/bf16 with head dim 64 or 128 through TMA + wgmma on sm_90a (else mma.sync)
#ifndef USE_WGMMA
#define USE_WGMMA 1
#endif
// @vb-param FA_WG_BLOCK_KV 128 {64,128}  keys per K/V tile on the wgmma path
#ifndef FA_WG_BLOCK_KV
#define FA_WG_BLOCK_KV 128
#endif
// @vb-param FA_WG_STAGES 3 {2,3}  K/V tiles in flight (TMA ring depth) on the wgmma path
#ifndef FA_WG_STAGES
#define FA_WG_STAGES 3
#endif
// @vb-param FA_WG_PINGPONG 1 {0,1}  1: the two consumer warpgroups take turns issuing their GEMMs (softmax overlaps the other's MMAs)
#ifndef FA_WG_PINGPONG
#define FA_WG_PINGPONG 1
#endif

#include "vb_cuda_mma.cuh"
#if USE_WGMMA
#include "vb_cuda_wgmma.cuh"
#endif

namespace {

static_assert(FA_BLOCK_KV % 16 == 0 && FA_BLOCK_KV_WIDE % 16 == 0, "K/V tiles: multiples of 16");
static_assert(FA_WARP_ROWS == 16 || FA_WARP_ROWS == 32, "FA_WARP_ROWS: 16 or 32");

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
/// 2^x by the SFU's ex2 (PTX ex2.approx.ftz.f32: max relative error 2^-22.5 on sm_90, PTX ISA
/// §9.7.4.6), results below 2^-126 flushed to +0 and 2^-inf = +0. Used for the softmax
/// weights p = 2^(x - m) <= 1 and the rescale factors 2^(m_old - m_new) <= 1: a flushed weight
/// is < 2^-126 while the row sum holds the row maximum's weight 1, so flushing changes O by
/// less than 2^-126 relative; CUDA's exp2f would add a subnormal fix-up (compare, select,
/// multiply) to every one of them.
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// (a, b) rounded (RNE) to T and packed, a in the low half.
template <typename T>
__device__ __forceinline__ u32 pack2(float a, float b) {
  if constexpr (std::is_same<T, __half>::value) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const u32*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const u32*>(&h);
  }
}

// ---- tensor-core kernel ------------------------------------------------------------------------

template <int DP, int BKV, int MT>
constexpr std::size_t mma_smem_bytes() {
  return static_cast<std::size_t>(16 * MT * FA_WARPS + 4 * BKV) * (DP + 8) * 2;
}

/// One CTA = BLOCK_Q = 16·MT·FA_WARPS query rows of one (batch, head) bh; its K/V are those of
/// KV head bh / group (group = H / H_kv: b·H + h over group is b·H_kv + h/group). Grid =
/// q_tiles · BH, the last query tiles (the most K/V tiles under causal masking) first, heads
/// that share a KV head adjacent. DP: padded head dim (multiple of 16, >= D). MT: m16 tiles per
/// warp (1 or 2); warp w owns rows q0 + 16·MT·w .. +16·MT-1.
/// Minimum resident CTAs per SM for __launch_bounds__: FA_MIN_CTAS at DP = 64 with one m16 tile
/// per warp (4 CTAs of 4 warps cap ptxas at 128 registers, where this kernel needs ~132 on
/// sm_90 without spilling), 1 (no bound) otherwise.
template <int DP, int MT>
constexpr int min_ctas() {
  return DP == 64 && MT == 1 ? FA_MIN_CTAS : 1;
}

template <typename T, int DP, int BKV, int MT>
__global__ void __launch_bounds__(FA_WARPS * 32, min_ctas<DP, MT>())
    fa_mma_kernel(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
                  T* __restrict__ O, int S, int D, int BH, int group, int q_tiles,
                  float scale_log2, int causal) {
  constexpr int WR = 16 * MT, BQ = WR * FA_WARPS, P = DP + 8, NTH = FA_WARPS * 32, CH = DP / 8;
  static_assert(DP % 16 == 0, "padded head dim must be a multiple of 16");
  static_assert(MT == 1 || MT == 2, "one or two m16 tiles per warp");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const Qs = reinterpret_cast<T*>(smem_raw);
  T* const Ks = Qs + BQ * P;       // [2][BKV][P]
  T* const Vs = Ks + 2 * BKV * P;  // [2][BKV][P]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qt = q_tiles - 1 - static_cast<int>(blockIdx.x / BH);
  const int bh = static_cast<int>(blockIdx.x % BH);
  const std::size_t base = static_cast<std::size_t>(bh) * S * D;
  const std::size_t kv_base = static_cast<std::size_t>(bh / group) * S * D;
  const T* const q = Q + base;
  const T* const k = K + kv_base;
  const T* const v = V + kv_base;
  const int q0 = qt * BQ;

  // Rows [r0, r0+NR) of a [S, D] matrix -> dst[NR][P]; rows >= S and columns >= D zero. A
  // whole tile (every row < S, D = DP) takes the unrolled path without bounds checks: thread
  // tid copies the 16-byte chunk (tid % CH) of rows tid / CH + i·NTH/CH.
  const bool full_width = D == DP;
  auto load_rows = [&](auto nrows, T* dst, const T* src, int r0) {
    constexpr int NR = decltype(nrows)::value;
    if (full_width && r0 + NR <= S && NTH % CH == 0 && (NR * CH) % NTH == 0) {
      const int r = tid / CH, cc = (tid % CH) * 8;
      const T* g = src + static_cast<std::size_t>(r0 + r) * D + cc;
      const u32 sa = smem_addr(dst + r * P + cc);
#pragma unroll
      for (int i = 0; i < (NR * CH) / NTH; ++i)
        cp_async16(sa + i * (NTH / CH) * P * 2, g + static_cast<std::size_t>(i) * (NTH / CH) * D, true);
    } else {
      for (int c = tid; c < NR * CH; c += NTH) {
        const int r = c / CH, cc = (c % CH) * 8;
        const bool ok = r0 + r < S && cc < D;
        cp_async16(smem_addr(dst + r * P + cc),
                   ok ? src + static_cast<std::size_t>(r0 + r) * D + cc : src, ok);
      }
    }
  };
  using RowsQ = std::integral_constant<int, BQ>;
  using RowsKV = std::integral_constant<int, BKV>;
  const int kv_end = causal ? min(S, q0 + BQ) : S;
  const int n_kv = (kv_end + BKV - 1) / BKV;
  load_rows(RowsQ{}, Qs, q, q0);
  load_rows(RowsKV{}, Ks, k, 0);
  load_rows(RowsKV{}, Vs, v, 0);
  cp_async_commit();

  const int g = lane >> 2, t4 = lane & 3;
  const int wq0 = q0 + warp * WR;  // this warp's first query row
  float o[MT][DP / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < DP / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
  // Running row max m and this lane's partial row sum l: [m-tile][row g, row g + 8].
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }
  // Head dim 64 (and 128 with one m16 tile per warp): the warp's Q fragments stay in registers
  // (MT · DP/16 × 4 words) after the first tile; other head dims re-read them from shared memory
  // (with them in registers, ptxas spills for DP = 96 on sm_80 and for DP = 128 with two tiles,
  // and DP = 256 has no registers to spare).
  constexpr bool kQInRegs = DP == 64 || (DP == 128 && MT == 1);
  u32 qf[kQInRegs ? MT : 1][kQInRegs ? DP / 16 : 1][4];

  for (int j = 0; j < n_kv; ++j) {
    cp_async_wait_all();  // tile j (the only group in flight) has landed
    __syncthreads();      // ... for every thread; all warps are done with tile j-1's buffer
    if constexpr (kQInRegs) {
      if (j == 0) {  // Q landed with tile 0
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < DP; kk += 16)
            ldsm_x4(qf[mt][kk / 16],
                    smem_addr(Qs + (warp * WR + mt * 16 + (lane & 15)) * P + kk + (lane >> 4) * 8));
      }
    }
    if (j + 1 < n_kv) {
      const int nb = (j + 1) & 1;
      load_rows(RowsKV{}, Ks + nb * BKV * P, k, (j + 1) * BKV);
      load_rows(RowsKV{}, Vs + nb * BKV * P, v, (j + 1) * BKV);
    }
    cp_async_commit();
    const int kv0 = j * BKV;
    if (causal && kv0 > wq0 + WR - 1) continue;  // tile entirely above this warp's rows
    const T* const ks = Ks + (j & 1) * BKV * P;
    const T* const vs = Vs + (j & 1) * BKV * P;

    // S = Q·Kᵀ (WR × BKV per warp); each K fragment feeds all MT m16 tiles.
    float s[MT][BKV / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < BKV / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DP; kk += 16) {
      u32 a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (kQInRegs) {
          a[mt][0] = qf[mt][kk / 16][0];
          a[mt][1] = qf[mt][kk / 16][1];
          a[mt][2] = qf[mt][kk / 16][2];
          a[mt][3] = qf[mt][kk / 16][3];
        } else {
          ldsm_x4(a[mt],
                  smem_addr(Qs + (warp * WR + mt * 16 + (lane & 15)) * P + kk + (lane >> 4) * 8));
        }
      }
#pragma unroll
      for (int np = 0; np < BKV / 16; ++np) {
        // Matrices: (keys 0-7, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15).
        u32 r[4];
        ldsm_x4(r, smem_addr(ks + (np * 16 + (lane & 7) + (lane >> 4) * 8) * P + kk +
                             ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(s[mt][2 * np], a[mt], r[0], r[1]);
          mma16816<T>(s[mt][2 * np + 1], a[mt], r[2], r[3]);
        }
      }
    }

    // Per m16 tile: mask (diagonal and tail tiles only), row max of the raw scores over the
    // quad (lanes 4g..4g+3), online-softmax update of m and l in raw-score units (scale > 0 on
    // this path, so the max commutes with the scaling), p = 2^((s - m)·c) with c =
    // scale·log2(e) (subtract first: the row maximum's weight is exactly 1), rescale of O.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int tq0 = wq0 + mt * 16, row0 = tq0 + g, row1 = row0 + 8;
      const bool need_mask = kv0 + BKV > S || (causal && kv0 + BKV - 1 > tq0);
      if (need_mask) {
#pragma unroll
        for (int nt = 0; nt < BKV / 8; ++nt) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int key = kv0 + nt * 8 + 2 * t4 + (i & 1);
            const int row = i < 2 ? row0 : row1;
            if (key >= S || (causal && key > row)) s[mt][nt][i] = -INFINITY;
          }
        }
      }
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < BKV / 8; ++nt) {
        mx0 = fmaxf(mx0, fmaxf(s[mt][nt][0], s[mt][nt][1]));
        mx1 = fmaxf(mx1, fmaxf(s[mt][nt][2], s[mt][nt][3]));
      }
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
      const float mn0 = fmaxf(m[mt][0], mx0), mn1 = fmaxf(m[mt][1], mx1);
      const float ms0 = mn0 == -INFINITY ? 0.0f : mn0;  // a row with nothing visible yet
      const float ms1 = mn1 == -INFINITY ? 0.0f : mn1;
      const float al0 = ex2_ftz((m[mt][0] - ms0) * scale_log2);
      const float al1 = ex2_ftz((m[mt][1] - ms1) * scale_log2);
      m[mt][0] = mn0;
      m[mt][1] = mn1;
      float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
      for (int nt = 0; nt < BKV / 8; ++nt) {
        s[mt][nt][0] = ex2_ftz((s[mt][nt][0] - ms0) * scale_log2);
        s[mt][nt][1] = ex2_ftz((s[mt][nt][1] - ms0) * scale_log2);
        s[mt][nt][2] = ex2_ftz((s[mt][nt][2] - ms1) * scale_log2);
        s[mt][nt][3] = ex2_ftz((s[mt][nt][3] - ms1) * scale_log2);
        ps0 += s[mt][nt][0] + s[mt][nt][1];
        ps1 += s[mt][nt][2] + s[mt][nt][3];
      }
      l[mt][0] = l[mt][0] * al0 + ps0;  // this lane's partial sum; the quad is reduced at the end
      l[mt][1] = l[mt][1] * al1 + ps1;
#pragma unroll
      for (int dt = 0; dt < DP / 8; ++dt) {
        o[mt][dt][0] *= al0;
        o[mt][dt][1] *= al0;
        o[mt][dt][2] *= al1;
        o[mt][dt][3] *= al1;
      }
    }

    // O += P·V: the accumulators of key tiles 2jj, 2jj+1 are the A fragment of keys 16jj..+15;
    // each V fragment feeds all MT m16 tiles.
#pragma unroll
    for (int jj = 0; jj < BKV / 16; ++jj) {
      u32 a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = pack2<T>(s[mt][2 * jj][0], s[mt][2 * jj][1]);
        a[mt][1] = pack2<T>(s[mt][2 * jj][2], s[mt][2 * jj][3]);
        a[mt][2] = pack2<T>(s[mt][2 * jj + 1][0], s[mt][2 * jj + 1][1]);
        a[mt][3] = pack2<T>(s[mt][2 * jj + 1][2], s[mt][2 * jj + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < DP / 16; ++dp) {
        // Matrices: (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15).
        u32 r[4];
        ldsm_x4_t(r, smem_addr(vs + (jj * 16 + (lane & 15)) * P + dp * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(o[mt][2 * dp], a[mt], r[0], r[1]);
          mma16816<T>(o[mt][2 * dp + 1], a[mt], r[2], r[3]);
        }
      }
    }
  }
  cp_async_wait_all();

  T* const out = O + base;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float l0 = l[mt][0], l1 = l[mt][1];
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
    const int row0 = wq0 + mt * 16 + g, row1 = row0 + 8;
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
      const int col = dt * 8 + 2 * t4;  // D % 8 == 0: col < D implies col + 1 < D
      if (col >= D) continue;
      if (row0 < S)
        *reinterpret_cast<u32*>(out + static_cast<std::size_t>(row0) * D + col) =
            pack2<T>(o[mt][dt][0] * inv0, o[mt][dt][1] * inv0);
      if (row1 < S)
        *reinterpret_cast<u32*>(out + static_cast<std::size_t>(row1) * D + col) =
            pack2<T>(o[mt][dt][2] * inv1, o[mt][dt][3] * inv1);
    }
  }
}

// ---- wgmma kernel (fp16 / bf16, head dim 64 or 128, sm_90a; USE_WGMMA = 1) --------------------
#if USE_WGMMA

constexpr int kWgBQ = 128;  // query rows per CTA: 2 consumer warpgroups x 64
constexpr int kWgBKV = FA_WG_BLOCK_KV;
constexpr int kWgStages = FA_WG_STAGES;
constexpr int kWgThreads = 3 * 128;  // warpgroup 0: TMA producer; 1, 2: consumers
constexpr int kWgConsumerThreads = 2 * 128;
constexpr std::size_t kWgBarrierBytes = (1 + 2 * kWgStages) * sizeof(std::uint64_t);

/// Dynamic shared memory of the wgmma kernel at head dim D: the Q tile and kWgStages K and V
/// tiles, each stored as D/64 chunks of [rows][64] 16-bit elements (128-byte rows, 128B
/// swizzle), + 1024 for the alignment of the base to the swizzle atom.
template <int D>
__host__ __device__ constexpr std::size_t fa_wg_smem_bytes() {
  return static_cast<std::size_t>(kWgBQ * D * 2) + std::size_t{kWgStages} * 2 * (kWgBKV * D * 2) +
         1024;
}

static_assert(kWgBKV == 64 || kWgBKV == 128, "FA_WG_BLOCK_KV must be 64 or 128");
static_assert(kWgStages >= 2, "the K/V ring needs at least 2 stages");
static_assert(kWgThreads == 128 + kWgConsumerThreads, "one producer warpgroup + the consumers");
static_assert(fa_wg_smem_bytes<128>() + kWgBarrierBytes <= 227 * 1024,
              "FA_WG_STAGES x K/V tile bytes exceed the 227 KiB of shared memory per CTA on sm_90: "
              "lower FA_WG_STAGES or FA_WG_BLOCK_KV");

/// FlashAttention forward with Hopper's asynchronous tensor cores (the structure of
/// FlashAttention-3, Shah et al. 2024: warp specialization, and with FA_WG_PINGPONG its ping-pong
/// between the consumer warpgroups; P·V of a tile deferred into the next tile's commit group, not
/// FA3's intra-warpgroup overlap of softmax and GEMMs): one CTA = 128 query
/// rows of one (batch, head) bh, 3 warpgroups. Warpgroup 0 (one thread) loads the Q tile once and
/// streams K and V tiles of kWgBKV keys of KV head bh / group by TMA (3-D maps [BH, S, D]: rows
/// past S read as zeros) into a kWgStages ring (full/empty mbarriers). Warpgroups 1 and 2 own 64
/// query rows each: per K/V tile, S = Q·Kᵀ by wgmma.m64n{BKV}k16 (Q and K K-major from shared
/// memory), mask, online softmax in registers (m, l in fp32; p = 2^((s - m)·c) with c =
/// sm_scale·log2(e) > 0), O rescaled in registers, then O += P·V by wgmma.m64n{D}k16 with P from
/// registers (the S accumulators, rounded to T, are the A fragments) and V N-major from shared
/// memory. Grid = q_tiles · BH, the last query tiles (the most K/V tiles under causal masking)
/// first. Deterministic (fixed orders); rows past S are computed from zeros and not stored.
template <typename T, int D>
__global__ void __launch_bounds__(kWgThreads, 1)
    fa_wgmma_kernel(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                    const __grid_constant__ CUtensorMap tmV, T* __restrict__ O, int S, int BH,
                    int group, int q_tiles, float scale_log2, int causal) {
#ifdef VB_WGMMA_BODY
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  constexpr int kQBytes = kWgBQ * D * 2, kKVBytes = kWgBKV * D * 2;
  constexpr int kQChunk = kWgBQ * 128, kKVChunk = kWgBKV * 128;  // bytes of one 64-column chunk
  __shared__ __align__(8) std::uint64_t bars[1 + 2 * kWgStages];  // q, full[S], empty[S]
  extern __shared__ __align__(1024) unsigned char wg_smem[];
  const u32 base = (smem_addr(wg_smem) + 1023u) & ~1023u;
  const u32 q_bar = smem_addr(&bars[0]);
  auto full_bar = [&](int st) { return q_bar + 8u * (1 + st); };
  auto empty_bar = [&](int st) { return q_bar + 8u * (1 + kWgStages + st); };
  auto k_tile = [&](int st) { return base + kQBytes + static_cast<u32>(st) * 2 * kKVBytes; };
  auto v_tile = [&](int st) { return k_tile(st) + kKVBytes; };

  const int tid = threadIdx.x, wg = tid / 128;
  const int qt = q_tiles - 1 - static_cast<int>(blockIdx.x / BH);
  const int bh = static_cast<int>(blockIdx.x % BH);
  const int bkv = bh / group;
  const int q0 = qt * kWgBQ;
  const int kv_end = causal ? min(S, q0 + kWgBQ) : S;
  const int n_kv = (kv_end + kWgBKV - 1) / kWgBKV;

  if (tid == 0) {
    prefetch_tensormap(&tmQ);
    prefetch_tensormap(&tmK);
    prefetch_tensormap(&tmV);
    mbar_init(q_bar, 1);
    for (int st = 0; st < kWgStages; ++st) {
      mbar_init(full_bar(st), 1);                    // the producer's arrive.expect_tx
      mbar_init(empty_bar(st), kWgConsumerThreads);  // every consumer thread arrives
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (tid == 0) {
      mbar_arrive_expect_tx(q_bar, kQBytes);
#pragma unroll
      for (int ch = 0; ch < D / 64; ++ch) tma_load_3d(base + ch * kQChunk, &tmQ, q_bar, 64 * ch, q0, bh);
      for (int j = 0; j < n_kv; ++j) {
        const int st = j % kWgStages;
        mbar_wait(empty_bar(st), ((j / kWgStages) & 1) ^ 1);  // first pass: the phase before 0
        mbar_arrive_expect_tx(full_bar(st), 2 * kKVBytes);
#pragma unroll
        for (int ch = 0; ch < D / 64; ++ch) {
          tma_load_3d(k_tile(st) + ch * kKVChunk, &tmK, full_bar(st), 64 * ch, j * kWgBKV, bkv);
          tma_load_3d(v_tile(st) + ch * kKVChunk, &tmV, full_bar(st), 64 * ch, j * kWgBKV, bkv);
        }
      }
    }
    return;  // no CTA-wide barrier follows
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int c = wg - 1;  // consumer: query rows q0 + 64c .. +63
  const int warp = (tid / 32) % 4, lane = tid % 32, t4 = lane % 4;
  const int wrow0 = q0 + 64 * c + 16 * warp;  // this warp's first row
  const int row0 = wrow0 + lane / 4, row1 = row0 + 8;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  const u32 q_rows = base + static_cast<u32>(64 * c) * 128;  // this warpgroup's 64 rows

  // Warpgroup turns (FA_WG_PINGPONG): named barriers 1 and 2 (0 is __syncthreads) order the
  // GEMM issue of the two consumers, so one's softmax runs while the other's GEMMs occupy the
  // tensor cores (FlashAttention-3's ping-pong). Consumer 1 lets consumer 0 go first.
  auto wait_turn = [&] {
    if constexpr (FA_WG_PINGPONG != 0) asm volatile("bar.sync %0, 256;\n" ::"r"(1 + c) : "memory");
  };
  auto pass_turn = [&] {
    if constexpr (FA_WG_PINGPONG != 0) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - c) : "memory");
  };
  if (c == 1) pass_turn();

  // Per K/V tile j: one commit group holds O += P_{j-1}·V_{j-1} (the previous tile's weights,
  // deferred) and S = Q·K_jᵀ; the softmax of S then yields P_j. Stage j is released once the
  // group that read V_j (iteration j+1's) has completed. The loop is peeled (tile 0: S only;
  // after the last tile: P·V only) so that no wgmma sits in a data-dependent branch, which
  // would make ptxas serialize them. Tiles above all of a warpgroup's rows (causal, FA_WG_BLOCK_KV
  // 64) are computed fully masked: their weights are 0.
  u32 pa[kWgBKV / 16][4] = {};
  float sc[kWgBKV / 2];
  // Before wgmma_fence: every register a wgmma reads or writes (O, S and the P fragments) is
  // final, so the compiler cannot sink their producers past the fence (as CUTLASS fences them).
  auto fence_all = [&] {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) fence_operand(o[i]);
#pragma unroll
    for (int i = 0; i < kWgBKV / 2; ++i) fence_operand(sc[i]);
#pragma unroll
    for (int kk = 0; kk < kWgBKV / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(pa[kk][r])::"memory");
  };
  auto issue_pv = [&](int stage) {
#pragma unroll
    for (int kk = 0; kk < kWgBKV / 16; ++kk)
      WgmmaRA<T, D, 1>::run(o, pa[kk], wg_desc(v_tile(stage) + kk * 16 * 128, kKVChunk, 1024));
  };
  auto issue_qk = [&](int stage) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const u32 off = static_cast<u32>(kk % 4) * 32;  // +32 bytes per k16 in a 128-byte row
      Wgmma<T, kWgBKV, 0>::run(sc, wg_desc(q_rows + (kk / 4) * kQChunk + off, 16, 1024),
                               wg_desc(k_tile(stage) + (kk / 4) * kKVChunk + off, 16, 1024));
    }
  };
  auto finish_group = [&] {  // commit, hand the turn over, wait; keep P alive until then
    wgmma_commit();
    pass_turn();
    wgmma_wait<0>();
    fence_all();  // O, S and P (kept alive until the asynchronous reads have completed)
  };
  auto zero_scores = [&] {
#pragma unroll
    for (int i = 0; i < kWgBKV / 2; ++i) sc[i] = 0.0f;
  };
  // Mask, online softmax, O rescale, P_j into pa. sc[4n + 2h + i]: row (h ? row1 : row0), key
  // kv0 + 8n + 2·t4 + i.
  auto softmax = [&](int kv0) {
    if (kv0 + kWgBKV > S || (causal && kv0 + kWgBKV - 1 > wrow0)) {
#pragma unroll
      for (int n = 0; n < kWgBKV / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = kv0 + 8 * n + 2 * t4 + (i & 1);
          const int row = i < 2 ? row0 : row1;
          if (key >= S || (causal && key > row)) sc[4 * n + i] = -INFINITY;
        }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int n = 0; n < kWgBKV / 8; ++n) {
      mx0 = fmaxf(mx0, fmaxf(sc[4 * n], sc[4 * n + 1]));
      mx1 = fmaxf(mx1, fmaxf(sc[4 * n + 2], sc[4 * n + 3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float ms0 = mn0 == -INFINITY ? 0.0f : mn0;  // a row with nothing visible yet
    const float ms1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float al0 = ex2_ftz((m0 - ms0) * scale_log2), al1 = ex2_ftz((m1 - ms1) * scale_log2);
    m0 = mn0;
    m1 = mn1;
    float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
    for (int n = 0; n < kWgBKV / 8; ++n) {
      sc[4 * n] = ex2_ftz((sc[4 * n] - ms0) * scale_log2);
      sc[4 * n + 1] = ex2_ftz((sc[4 * n + 1] - ms0) * scale_log2);
      sc[4 * n + 2] = ex2_ftz((sc[4 * n + 2] - ms1) * scale_log2);
      sc[4 * n + 3] = ex2_ftz((sc[4 * n + 3] - ms1) * scale_log2);
      ps0 += sc[4 * n] + sc[4 * n + 1];
      ps1 += sc[4 * n + 2] + sc[4 * n + 3];
    }
    l0 = l0 * al0 + ps0;  // this lane's partial sums; the quad is reduced at the end
    l1 = l1 * al1 + ps1;
    // O already holds P_{j-1}·V_{j-1}: rescale it to the new maximum before P_j·V_j is added.
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[4 * n] *= al0;
      o[4 * n + 1] *= al0;
      o[4 * n + 2] *= al1;
      o[4 * n + 3] *= al1;
    }
    // The accumulators of keys 16kk..16kk+15 (sc[8kk..8kk+7]) are P_j's A fragments.
#pragma unroll
    for (int kk = 0; kk < kWgBKV / 16; ++kk) {
      pa[kk][0] = pack2<T>(sc[8 * kk], sc[8 * kk + 1]);
      pa[kk][1] = pack2<T>(sc[8 * kk + 2], sc[8 * kk + 3]);
      pa[kk][2] = pack2<T>(sc[8 * kk + 4], sc[8 * kk + 5]);
      pa[kk][3] = pack2<T>(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
  };

  mbar_wait(q_bar, 0);
  // Tile 0: S only.
  mbar_wait(full_bar(0), 0);
  zero_scores();
  wait_turn();
  fence_all();
  wgmma_fence();
  issue_qk(0);
  finish_group();
  softmax(0);
  // Tiles 1 .. n_kv-1: P_{j-1}·V_{j-1} and S_j in one group.
  for (int j = 1; j < n_kv; ++j) {
    const int st = j % kWgStages, prev = (j - 1) % kWgStages;
    mbar_wait(full_bar(st), (j / kWgStages) & 1);
    zero_scores();
    wait_turn();
    fence_all();
    wgmma_fence();
    issue_pv(prev);
    issue_qk(st);
    finish_group();
    mbar_arrive(empty_bar(prev));  // V_{j-1} (and K_{j-1}) no longer read
    softmax(j * kWgBKV);
  }
  // After the last tile: its P·V.
  wait_turn();
  fence_all();
  wgmma_fence();
  issue_pv((n_kv - 1) % kWgStages);
  finish_group();
  mbar_arrive(empty_bar((n_kv - 1) % kWgStages));
  if constexpr (FA_WG_PINGPONG != 0) {
    // Consumer 1's first pass_turn left one more arrival on barrier 1 than consumer 0 syncs.
    if (c == 0) wait_turn();
  }
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  T* const out = O + static_cast<std::size_t>(bh) * S * D;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int col = 8 * n + 2 * t4;
    if (row0 < S)
      *reinterpret_cast<u32*>(out + static_cast<std::size_t>(row0) * D + col) =
          pack2<T>(o[4 * n] * inv0, o[4 * n + 1] * inv0);
    if (row1 < S)
      *reinterpret_cast<u32*>(out + static_cast<std::size_t>(row1) * D + col) =
          pack2<T>(o[4 * n + 2] * inv1, o[4 * n + 3] * inv1);
  }
#else
  (void)tmQ, (void)tmK, (void)tmV, (void)O, (void)S, (void)BH, (void)group, (void)q_tiles,
      (void)scale_log2, (void)causal;
#endif  // VB_WGMMA_BODY
}

#endif  // USE_WGMMA

// ---- SIMT fp32 kernel (fp32, and every shape the tensor-core path does not take) --------------

constexpr int kSimtBQ = 64, kSimtBKV = 32, kSimtThreads = 256;

template <int DMAX>
constexpr std::size_t simt_smem_bytes() {
  return static_cast<std::size_t>(kSimtBQ * (DMAX + 1) + kSimtBKV * (DMAX + 1) + kSimtBKV * DMAX +
                                  kSimtBQ * (kSimtBKV + 1)) *
         4;
}

/// One CTA = 64 query rows of one (batch, head) bh, 256 threads, K/V of KV head bh / group;
/// thread (tr, tc) = (tid/16, tid%16) owns rows 4tr..4tr+3, keys tc and tc+16 of each tile,
/// O columns tc + 16t. D <= DMAX.
template <typename T, int DMAX>
__global__ void __launch_bounds__(kSimtThreads)
    fa_simt_kernel(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
                   T* __restrict__ O, int S, int D, int BH, int group, int q_tiles,
                   float scale_log2, int causal) {
  constexpr int QP = DMAX + 1, KP = DMAX + 1, VP = DMAX, PP = kSimtBKV + 1, OT = DMAX / 16;
  extern __shared__ float fsm[];
  float* const Qs = fsm;                    // [64][QP]
  float* const Ks = Qs + kSimtBQ * QP;      // [32][KP]
  float* const Vs = Ks + kSimtBKV * KP;     // [32][VP]
  float* const Ps = Vs + kSimtBKV * VP;     // [64][PP]

  const int tid = threadIdx.x, tr = tid >> 4, tc = tid & 15;
  const int qt = q_tiles - 1 - static_cast<int>(blockIdx.x / BH);
  const int bh = static_cast<int>(blockIdx.x % BH);
  const std::size_t base = static_cast<std::size_t>(bh) * S * D;
  const std::size_t kv_base = static_cast<std::size_t>(bh / group) * S * D;
  const T* const q = Q + base;
  const T* const k = K + kv_base;
  const T* const v = V + kv_base;
  const int q0 = qt * kSimtBQ;

  for (int e = tid; e < kSimtBQ * D; e += kSimtThreads) {
    const int r = e / D, c = e % D;
    Qs[r * QP + c] = q0 + r < S ? vbk::to_f32(q[static_cast<std::size_t>(q0 + r) * D + c]) : 0.0f;
  }
  const int kv_end = causal ? min(S, q0 + kSimtBQ) : S;
  const int n_kv = (kv_end + kSimtBKV - 1) / kSimtBKV;

  float o[4][OT];
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int t = 0; t < OT; ++t) o[i][t] = 0.0f;
  }

  for (int j = 0; j < n_kv; ++j) {
    const int kv0 = j * kSimtBKV;
    __syncthreads();  // the previous tile's K, V, P are no longer read
    for (int e = tid; e < kSimtBKV * D; e += kSimtThreads) {
      const int r = e / D, c = e % D;
      const bool ok = kv0 + r < S;
      const std::size_t gi = static_cast<std::size_t>(kv0 + r) * D + c;
      Ks[r * KP + c] = ok ? vbk::to_f32(k[gi]) : 0.0f;
      Vs[r * VP + c] = ok ? vbk::to_f32(v[gi]) : 0.0f;
    }
    __syncthreads();

    float s[4][2] = {};
    for (int d = 0; d < D; ++d) {
      const float k0v = Ks[tc * KP + d], k1v = Ks[(tc + 16) * KP + d];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float qv = Qs[(tr * 4 + i) * QP + d];
        s[i][0] = fmaf(qv, k0v, s[i][0]);
        s[i][1] = fmaf(qv, k1v, s[i][1]);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = q0 + tr * 4 + i;
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int key = kv0 + tc + 16 * c;
        float x = s[i][c] * scale_log2;
        if (key >= S || (causal && key > row)) x = -INFINITY;
        s[i][c] = x;
        mx = fmaxf(mx, x);
      }
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float mn = fmaxf(m[i], mx);
      const float ms = mn == -INFINITY ? 0.0f : mn;
      const float al = exp2f(m[i] - ms);
      m[i] = mn;
      const float p0 = exp2f(s[i][0] - ms), p1 = exp2f(s[i][1] - ms);
      l[i] = l[i] * al + (p0 + p1);
      Ps[(tr * 4 + i) * PP + tc] = p0;
      Ps[(tr * 4 + i) * PP + tc + 16] = p1;
#pragma unroll
      for (int t = 0; t < OT; ++t) o[i][t] *= al;
    }
    __syncthreads();  // P visible
    for (int c = 0; c < kSimtBKV; ++c) {
      float p[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) p[i] = Ps[(tr * 4 + i) * PP + c];
#pragma unroll
      for (int t = 0; t < OT; ++t) {
        if (tc + 16 * t < D) {
          const float vv = Vs[c * VP + tc + 16 * t];
#pragma unroll
          for (int i = 0; i < 4; ++i) o[i][t] = fmaf(p[i], vv, o[i][t]);
        }
      }
    }
  }

  T* const out = O + base;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float li = l[i];
#pragma unroll
    for (int off = 1; off < 16; off <<= 1) li += __shfl_xor_sync(0xffffffffu, li, off);
    const int row = q0 + tr * 4 + i;
    if (row >= S) continue;
    const float inv = 1.0f / li;
#pragma unroll
    for (int t = 0; t < OT; ++t) {
      const int col = tc + 16 * t;
      if (col < D) out[static_cast<std::size_t>(row) * D + col] = vbk::from_f32<T>(o[i][t] * inv);
    }
  }
}

// ---- host side ---------------------------------------------------------------------------------

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

struct Args {
  int S, D, BH;
  int group;  // H / H_kv: query heads per KV head
  float scale_log2;
  int causal;
};

/// Sets the dynamic shared-memory limit of `kern` and launches it over q_tiles · BH CTAs.
template <typename T>
int launch_kernel(void (*kern)(const T*, const T*, const T*, T*, int, int, int, int, int, float,
                               int),
                  int block_q, int threads, std::size_t smem, const Args& a, const T* q,
                  const T* k, const T* v, T* o, cudaStream_t s, const char* what) {
  const int q_tiles = (a.S + block_q - 1) / block_q;
  const long long ctas = static_cast<long long>(q_tiles) * a.BH;
  if (ctas > INT_MAX) return vbk::fail("flash_attention: %lld CTAs exceed the grid limit", ctas);
  const cudaError_t e =
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess)
    return vbk::fail("flash_attention: cannot reserve %zu bytes of shared memory per CTA for %s (%s)",
                     smem, what, cudaGetErrorString(e));
  kern<<<static_cast<unsigned>(ctas), threads, smem, s>>>(q, k, v, o, a.S, a.D, a.BH, a.group,
                                                          q_tiles, a.scale_log2, a.causal);
  VBK_CUDA_CHECK_LAUNCH(what);
  return 0;
}

/// True when a grid of BLOCK_Q = block_q query rows per CTA would give the current device fewer
/// than two CTAs per SM (two CTAs of four warps with two m16 tiles each are what fits in the
/// register file: ~250 registers per thread); false when the SM count cannot be read.
[[maybe_unused]] bool small_grid(const Args& a, int block_q) {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) {
    (void)cudaGetLastError();  // not sticky; leave no error behind for the launch check
    return false;
  }
  const long long ctas = static_cast<long long>((a.S + block_q - 1) / block_q) * a.BH;
  return ctas < 2LL * sms;
}

template <typename T, int DP>
int launch_mma(const Args& a, const T* q, const T* k, const T* v, T* o, cudaStream_t s) {
  constexpr int BKV = DP > 128 ? FA_BLOCK_KV_WIDE : FA_BLOCK_KV;
  // Two m16 tiles per warp need 215-255 registers at DP = 64 (ptxas, sm_90, BLOCK_KV 32-64);
  // from DP = 80 up they spill, so wider heads keep one.
  constexpr int MT = DP > 64 ? 1 : FA_WARP_ROWS / 16;
  if constexpr (MT == 2 && FA_SPLIT_SMALL_GRIDS != 0) {
    // Few (batch, head) pairs and short sequences (GPT-2 small at 1x1024: 12 heads, 96 CTAs of
    // 128 rows for 132 SMs on an H100/H200): one m16 tile per warp, twice the CTAs.
    if (small_grid(a, 16 * MT * FA_WARPS))
      return launch_kernel<T>(fa_mma_kernel<T, DP, BKV, 1>, 16 * FA_WARPS, FA_WARPS * 32,
                              mma_smem_bytes<DP, BKV, 1>(), a, q, k, v, o, s, "fa_mma_kernel");
  }
  return launch_kernel<T>(fa_mma_kernel<T, DP, BKV, MT>, 16 * MT * FA_WARPS, FA_WARPS * 32,
                          mma_smem_bytes<DP, BKV, MT>(), a, q, k, v, o, s, "fa_mma_kernel");
}

template <typename T, int DMAX>
int launch_simt(const Args& a, const T* q, const T* k, const T* v, T* o, cudaStream_t s) {
  return launch_kernel<T>(fa_simt_kernel<T, DMAX>, kSimtBQ, kSimtThreads, simt_smem_bytes<DMAX>(),
                          a, q, k, v, o, s, "fa_simt_kernel");
}

#if USE_WGMMA
/// Launches the wgmma kernel when the device and the kernel image allow it (`taken` = true;
/// returns 0, or vbk::fail's 1 if the launch failed); otherwise launches nothing, sets `taken` =
/// false and returns 0, and the caller takes the mma.sync path. The caller has checked D (64 or
/// 128), sm_scale > 0 and 16-byte alignment.
template <typename T, int D>
int try_launch_wgmma(const Args& a, const T* q, const T* k, const T* v, T* o, cudaStream_t s,
                     bool& taken) {
  constexpr auto kernel = fa_wgmma_kernel<T, D>;
  taken = false;
  if (!wgmma_image_ok<kernel>(kWgBarrierBytes)) return 0;
  const int q_tiles = (a.S + kWgBQ - 1) / kWgBQ;
  const long long ctas = static_cast<long long>(q_tiles) * a.BH;
  if (ctas > INT_MAX) return 0;
  const int bkv = a.BH / a.group;
  CUtensorMap tq, tk, tv;
  if (!make_tma_map_3d(&tq, q, a.BH, a.S, D, kWgBQ) || !make_tma_map_3d(&tk, k, bkv, a.S, D, kWgBKV) ||
      !make_tma_map_3d(&tv, v, bkv, a.S, D, kWgBKV))
    return 0;
  constexpr std::size_t smem = fa_wg_smem_bytes<D>();
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  taken = true;
  kernel<<<static_cast<unsigned>(ctas), kWgThreads, smem, s>>>(tq, tk, tv, o, a.S, a.BH, a.group,
                                                              q_tiles, a.scale_log2, a.causal);
  VBK_CUDA_CHECK_LAUNCH("fa_wgmma_kernel");
  return 0;
}
#endif  // USE_WGMMA

template <typename T>
int run_attention(const Args& a, const T* q, const T* k, const T* v, T* o, cudaStream_t s) {
  if constexpr (!std::is_same<T, float>::value) {
    if (a.D % 8 == 0 && a.D <= 256 && a.scale_log2 > 0.0f && std::isfinite(a.scale_log2) &&
        aligned16(q) && aligned16(k) &&
        aligned16(v) && aligned16(o)) {
#if USE_WGMMA
      if (a.D == 64 || a.D == 128) {
        bool taken = false;
        const int r = a.D == 64 ? try_launch_wgmma<T, 64>(a, q, k, v, o, s, taken)
                                : try_launch_wgmma<T, 128>(a, q, k, v, o, s, taken);
        if (taken || r != 0) return r;
      }
#endif
      if (a.D <= 64) return launch_mma<T, 64>(a, q, k, v, o, s);
      if (a.D <= 80) return launch_mma<T, 80>(a, q, k, v, o, s);
      if (a.D <= 96) return launch_mma<T, 96>(a, q, k, v, o, s);
      if (a.D <= 128) return launch_mma<T, 128>(a, q, k, v, o, s);
      return launch_mma<T, 256>(a, q, k, v, o, s);
    }
  }
  if (a.D <= 64) return launch_simt<T, 64>(a, q, k, v, o, s);
  if (a.D <= 128) return launch_simt<T, 128>(a, q, k, v, o, s);
  return launch_simt<T, 256>(a, q, k, v, o, s);
}

}  // namespace

/// Kernel ABI (DESIGN §2, §3): inputs q [B,H,S,D], k and v [B,H_kv,S,D] with H % H_kv == 0
/// (GQA; H_kv = H is multi-head attention); output o [B,H,S,D]; one float dtype; attributes
/// causal (0 or 1), sm_scale (finite; NaN resolves to 1/sqrt(D)). D <= 256.
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(inputs, n_inputs, 3, outputs, n_outputs, 1, n_attrs, 2)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tq = inputs[0];
  if (tq.ndim != 4) return vbk::fail("q: expected 4 dimensions [B,H,S,D], got %d", tq.ndim);
  const std::int64_t B = tq.shape[0], H = tq.shape[1], S = tq.shape[2], D = tq.shape[3];
  if (int e = vbk::check_shape(tq, "q", {B, H, S, D})) return e;
  if (int e = vbk::check_shape(inputs[1], "k", {B, -1, S, D})) return e;
  const std::int64_t Hkv = inputs[1].shape[1];
  if (int e = vbk::check_shape(inputs[2], "v", {B, Hkv, S, D})) return e;
  if (Hkv < 1 || H % Hkv != 0)
    return vbk::fail("flash_attention: k and v have %lld heads, which must divide q's %lld heads "
                     "(GQA: query head h reads KV head h/(H/H_kv)); give k/v 1, a divisor of H, "
                     "or H heads", (long long)Hkv, (long long)H);
  if (int e = vbk::check_shape(outputs[0], "o", {B, H, S, D})) return e;
  if (attrs[0] != 0.0 && attrs[0] != 1.0) return vbk::fail("causal must be 0 or 1 (got %g)", attrs[0]);
  double scale = attrs[1];
  if (std::isnan(scale)) scale = 1.0 / std::sqrt(static_cast<double>(D > 0 ? D : 1));
  if (!std::isfinite(scale)) return vbk::fail("sm_scale must be finite (got %g)", attrs[1]);
  if (D > 256) return vbk::fail("flash_attention: head dim D=%lld > 256 is not supported", (long long)D);
  if (B * H > INT_MAX || S > INT_MAX / 2)
    return vbk::fail("flash_attention: B*H=%lld or S=%lld too large", (long long)(B * H), (long long)S);
  if (vbk::numel(outputs[0]) == 0) return 0;  // nothing to write
  const Args a{static_cast<int>(S), static_cast<int>(D), static_cast<int>(B * H),
               static_cast<int>(H / Hkv), static_cast<float>(scale * 1.4426950408889634),
               attrs[0] != 0.0 ? 1 : 0};
  const cudaStream_t s = vbk::as_stream(stream);
  return vbk::dispatch_float(vbk::dtype_of(tq), [&](auto tag) {
    using T = decltype(tag);
    return run_attention<T>(a, static_cast<const T*>(vbk::data_ptr(inputs[0])),
                            static_cast<const T*>(vbk::data_ptr(inputs[1])),
                            static_cast<const T*>(vbk::data_ptr(inputs[2])),
                            static_cast<T*>(vbk::data_ptr(outputs[0])), s);
  });
}
