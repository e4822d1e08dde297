// fused_mlp (CUDA starter): SwiGLU feed-forward, y[B,D] = (silu(x·w_gateᵀ) ⊙ (x·w_upᵀ))·w_downᵀ
// with x[B,D], w_gate[H,D], w_up[H,D], w_down[D,H] (nn.Linear layout [out, in]); silu on the
// gate only (DESIGN §2). All three products are "A·Wᵀ" GEMMs with W row-major [N,K], which is
// exactly the "col" operand of mma.sync, so W tiles are read by ldmatrix without .trans.
//
// Two phases on the call's stream, the hidden activations h[B,H] in a stream-ordered scratch
// buffer (cudaMallocAsync / cudaFreeAsync, nothing kept between calls):
//   phase 1  h = silu(x·w_gateᵀ) ⊙ (x·w_upᵀ): one CTA computes the gate AND the up tile of the
//            same BLOCK_M×BLOCK_N block from one A (x) tile and two W tiles (fp32 accumulators
//            for both), and applies silu(g)·u = g/(1+e^-g)·u in fp32 in the epilogue;
//   phase 2  y = h·w_downᵀ.
// h precision: fp16/bf16 inputs store h in the input dtype (what PyTorch's eager SwiGLU does;
// the tensor cores would round it to that dtype for phase 2 anyway); fp32 inputs keep h in fp32.
// The error this adds (one rounding of h, relative 2^-11 for fp16 / 2^-8 for bf16 per element,
// averaging over H terms) sits well inside src/eval/compare.cpp's thresholds (1e-3 fp16,
// 1.6e-2 bf16), and |h| stays far below the fp16 maximum in every regime of
// src/kernels/fused_mlp.cpp (near_max: |h| ≲ 6400).
//
// fp16 / bf16 with USE_WGMMA = 1 (the default) on sm_90a (H100/H200): both phases through TMA +
// wgmma (wgmma_mlp_kernel): a CTA of 3 warpgroups computes 128 rows; warpgroup 0 (one thread)
// streams the 128×64 x (or h) slice and the BN×64 weight slices into a WG_STAGES ring by TMA
// (128B swizzle, full/empty mbarriers); warpgroups 1 and 2 multiply 64 rows each with
// wgmma.m64n{BN}k16, both operands K-major (an nn.Linear weight [N,K] is the K-major B operand
// as it lies in memory: no transpose anywhere). Phase 1 accumulates the gate and the up tile of
// the same 128×WG_UP_BLOCK_N block side by side (2 × 64 fp32 accumulators per thread at 128) and
// applies the SwiGLU in the epilogue; phase 2 is a 128×WG_DOWN_BLOCK_N GEMM. Taken when the
// reduction length is a multiple of 8 (TMA's 16-byte row pitch), the output width even, the
// operands 16-byte aligned and the loaded image holds the sm_90a body; otherwise (and with
// USE_WGMMA = 0) that phase runs on the mma.sync kernel below. The helpers (mbarrier, TMA,
// wgmma, tensor maps) are shared with matmul.cu in vb_cuda_wgmma.cuh.
// fp16 / bf16 elsewhere: mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} (inline PTX, sm_80+), ldmatrix,
// a STAGES-deep cp.async ring, padded shared rows (conflict-free ldmatrix), grouped CTA
// rasterization over a 1-D grid; 16-byte loads need K % 8 == 0 and 16-byte aligned operands,
// any other shape uses guarded element loads in the same kernel. fp32: true fp32 FFMA on the
// SIMT cores (never TF32): g = x·w_gateᵀ into the fp32 scratch, then the up GEMM whose
// epilogue turns it into h in place, then y = h·w_downᵀ.
// Determinism: fixed-order sums, no split-K, no atomics. No fast-math (subnormals kept).
#include "vb_cuda.cuh"

#include <climits>
#include <cstdint>
#include <type_traits>

// @vb-param BLOCK_M 128 {64,128}  rows (tokens) of h / y per CTA (tensor-core path)
#ifndef BLOCK_M
#define BLOCK_M 128
#endif
// @vb-param BLOCK_N 128 {64,128}  columns of h (phase 1, per gate/up tile) or y per CTA
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
// @vb-param BLOCK_K 32 {32,64}  K depth of one pipeline stage
#ifndef BLOCK_K
#define BLOCK_K 32
#endif
// @vb-param WARPS_M 2 {1,2,4}  warps along M
#ifndef WARPS_M
#define WARPS_M 2
#endif
// @vb-param WARPS_N 4 {1,2,4}  warps along N
#ifndef WARPS_N
#define WARPS_N 4
#endif
// @vb-param STAGES 4 {2,3,4}  cp.async pipeline depth
#ifndef STAGES
#define STAGES 4
#endif
// @vb-param GROUP_M 8 {1,4,8}  CTA rasterization: tile rows per group (L2 reuse of W panels)
#ifndef GROUP_M
#define GROUP_M 8
#endif

// @vb-param USE_WGMMA 1 {0,1}  1: fp16/bf16 through TMA + wgmma on sm_90a where the shape allows (else mma.sync)
#ifndef USE_WGMMA
#define USE_WGMMA 1
#endif
// @vb-param WG_UP_BLOCK_N 128 {64,128}  columns of h per CTA on the wgmma gate/up path (rows: 128)
#ifndef WG_UP_BLOCK_N
#define WG_UP_BLOCK_N 128
#endif
// @vb-param WG_DOWN_BLOCK_N 256 {128,256}  columns of y per CTA on the wgmma down path (rows: 128)
#ifndef WG_DOWN_BLOCK_N
#define WG_DOWN_BLOCK_N 256
#endif
// @vb-param WG_STAGES 4 {2,3,4}  TMA ring depth on the wgmma paths (up to 48 KiB per stage)
#ifndef WG_STAGES
#define WG_STAGES 4
#endif

#include "vb_cuda_mma.cuh"
#if USE_WGMMA
#include "vb_cuda_wgmma.cuh"
#endif

namespace {

constexpr int kThreads = WARPS_M * WARPS_N * 32;
constexpr int kWarpTileM = BLOCK_M / WARPS_M;
constexpr int kWarpTileN = BLOCK_N / WARPS_N;
constexpr int kPad = BLOCK_K + 8;  // row pitch (elements) of every shared tile: odd 16-byte chunks
constexpr int kStageA = BLOCK_M * kPad;
constexpr int kStageB = BLOCK_N * kPad;  // one W tile

template <int NB>
constexpr std::size_t smem_bytes() {
  return std::size_t{STAGES} * (kStageA + NB * kStageB) * 2;
}

static_assert(BLOCK_K % 16 == 0, "BLOCK_K must be a multiple of 16 (the mma K)");
static_assert((BLOCK_K / 8) % 2 == 0, "padded pitch must be an odd number of 16-byte chunks");
static_assert(kWarpTileM % 16 == 0, "BLOCK_M / WARPS_M must be a multiple of 16");
static_assert(kWarpTileN % 16 == 0, "BLOCK_N / WARPS_N must be a multiple of 16");
static_assert(STAGES >= 2, "the cp.async ring needs at least 2 stages");

// ---- PTX wrappers (as in matmul.cu) ------------------------------------------------------------

/// Stores (a, b) rounded (RNE) to T at p[0], p[1] as one 32-bit word (p 4-byte aligned).
template <typename T>
__device__ __forceinline__ void store_pair(T* p, float a, float b) {
  if constexpr (std::is_same<T, __half>::value)
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
  else
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

/// silu(g)·u = g/(1+e^-g)·u in fp32; e^-g = inf (g ≲ -89) gives -0·u, not NaN.
__device__ __forceinline__ float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/// (tile row, tile column) of CTA `pid`, GROUP_M tile rows per group (see matmul.cu).
__device__ __forceinline__ void raster(int pid, int tiles_m, int tiles_n, int gm, int& tm, int& tn) {
  const int width = gm * tiles_n;
  const int first_m = (pid / width) * gm;
  const int rows = min(tiles_m - first_m, gm);
  tm = first_m + (pid % width) % rows;
  tn = (pid % width) / rows;
}

// ---- tensor-core kernel: C = epi(A·W0ᵀ [, A·W1ᵀ]) ------------------------------------------------

/// A[M,K], W0/W1[N,K] row-major; NB = 1: C = A·W0ᵀ; NB = 2: C = silu(A·W0ᵀ) ⊙ (A·W1ᵀ). C[M,N] in
/// T. VEC: 16-byte cp.async (K % 8 == 0, 16-byte aligned A, W0, W1); else guarded element loads.
/// Dynamic shared memory: smem_bytes<NB>().
template <typename T, int NB, bool VEC>
__global__ void __launch_bounds__(kThreads)
    mlp_mma_kernel(const T* __restrict__ A, const T* __restrict__ W0, const T* __restrict__ W1,
                   T* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const As = reinterpret_cast<T*>(smem_raw);
  T* const Ws = As + STAGES * kStageA;  // [STAGES][NB][BLOCK_N][kPad]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int tiles_m = (M + BLOCK_M - 1) / BLOCK_M, tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
  int tm, tn;
  raster(blockIdx.x, tiles_m, tiles_n, GROUP_M, tm, tn);
  const int m0 = tm * BLOCK_M, n0 = tn * BLOCK_N;
  const int KT = (K + BLOCK_K - 1) / BLOCK_K;

  // rows [r0, r0+ROWS) × columns [k0, k0+BLOCK_K) of src[R,K] -> dst[ROWS][kPad], zero outside.
  auto load_rows = [&](T* dst, const T* src, int r0, int R, int k0, auto rows_tag) {
    constexpr int ROWS = decltype(rows_tag)::value;
    if constexpr (VEC) {
      constexpr int kCh = ROWS * BLOCK_K / 8;
#pragma unroll
      for (int i = 0; i < (kCh + kThreads - 1) / kThreads; ++i) {
        const int c = tid + i * kThreads;
        if (kCh % kThreads == 0 || c < kCh) {
          const int r = c / (BLOCK_K / 8), kc = (c % (BLOCK_K / 8)) * 8;
          const int gr = r0 + r, gk = k0 + kc;
          const bool v = gr < R && gk < K;
          cp_async16(smem_addr(dst + r * kPad + kc),
                     v ? src + static_cast<std::size_t>(gr) * K + gk : src, v);
        }
      }
    } else {
      const T zero = vbk::from_f32<T>(0.0f);
#pragma unroll 4
      for (int e = tid; e < ROWS * BLOCK_K; e += kThreads) {
        const int r = e / BLOCK_K, kk = e % BLOCK_K;
        const int gr = r0 + r, gk = k0 + kk;
        dst[r * kPad + kk] = (gr < R && gk < K) ? src[static_cast<std::size_t>(gr) * K + gk] : zero;
      }
    }
  };
  auto load_slice = [&](int stage, int kt) {
    const int k0 = kt * BLOCK_K;
    load_rows(As + stage * kStageA, A, m0, M, k0, std::integral_constant<int, BLOCK_M>{});
    T* const ws = Ws + stage * NB * kStageB;
    load_rows(ws, W0, n0, N, k0, std::integral_constant<int, BLOCK_N>{});
    if constexpr (NB == 2) load_rows(ws + kStageB, W1, n0, N, k0, std::integral_constant<int, BLOCK_N>{});
  };

  constexpr int MT = kWarpTileM / 16, NT = kWarpTileN / 8;
  float acc[NB][MT][NT][4];
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[b][i][j][q] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_slice(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();  // slice kt has landed (STAGES-1+kt groups committed)
    __syncthreads();              // visible to all; slice kt-1's stage is free
    {
      const int nk = kt + STAGES - 1;
      if (nk < KT) load_slice(nk % STAGES, nk);
      cp_async_commit();
    }
    const T* const as = As + (kt % STAGES) * kStageA;
    const T* const ws = Ws + (kt % STAGES) * NB * kStageB;
#pragma unroll
    for (int kk = 0; kk < BLOCK_K; kk += 16) {
      u32 af[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        ldsm_x4(af[mt], smem_addr(as + (wm * kWarpTileM + mt * 16 + (lane & 15)) * kPad + kk +
                                  (lane >> 4) * 8));
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        u32 bfr[NT][2];
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          // Matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
          u32 r[4];
          ldsm_x4(r, smem_addr(ws + b * kStageB +
                               (wn * kWarpTileN + np * 16 + (lane & 7) + (lane >> 4) * 8) * kPad +
                               kk + ((lane >> 3) & 1) * 8));
          bfr[2 * np][0] = r[0];
          bfr[2 * np][1] = r[1];
          bfr[2 * np + 1][0] = r[2];
          bfr[2 * np + 1][1] = r[3];
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
            mma16816<T>(acc[b][mt][nt], af[mt], bfr[nt][0], bfr[nt][1]);
      }
    }
  }
  cp_async_wait<0>();

  const int g = lane >> 2, t4 = lane & 3;
  const bool pair_ok = (N % 2 == 0) && ((reinterpret_cast<std::uintptr_t>(C) & 3) == 0);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int col = n0 + wn * kWarpTileN + nt * 8 + t4 * 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm * kWarpTileM + mt * 16 + g + h * 8;
        if (row >= M || col >= N) continue;
        float v0 = acc[0][mt][nt][2 * h], v1 = acc[0][mt][nt][2 * h + 1];
        if constexpr (NB == 2) {
          v0 = swiglu(v0, acc[NB - 1][mt][nt][2 * h]);
          v1 = swiglu(v1, acc[NB - 1][mt][nt][2 * h + 1]);
        }
        T* const dst = C + static_cast<std::size_t>(row) * N + col;
        if (pair_ok) {
          store_pair(dst, v0, v1);
        } else {
          dst[0] = vbk::from_f32<T>(v0);
          if (col + 1 < N) dst[1] = vbk::from_f32<T>(v1);
        }
      }
    }
  }
}

// ---- wgmma kernel (fp16 / bf16 on sm_90a; USE_WGMMA = 1): C = epi(A·W0ᵀ [, A·W1ᵀ]) ------------
#if USE_WGMMA

constexpr int kWgBM = 128;   // 2 consumer warpgroups x 64 rows
constexpr int kWgBK = 64;    // 64 16-bit elements = one 128-byte swizzle row
constexpr int kWgThreads = 3 * 128;  // warpgroup 0: TMA producer; 1, 2: wgmma consumers
constexpr int kWgConsumerThreads = 2 * 128;
constexpr int kWgStages = WG_STAGES;
constexpr int kWgTileABytes = kWgBM * kWgBK * 2;  // 16 KiB: [128 m][64 k], 128B-swizzled rows
constexpr std::size_t kWgBarrierBytes = 2 * kWgStages * sizeof(std::uint64_t);

/// Bytes of one ring stage: the A slice and NB W slices of BN rows × 64 k (K-major, 128 bytes a row).
template <int NB, int BN>
__host__ __device__ constexpr int wg_stage_bytes() {
  return kWgTileABytes + NB * BN * kWgBK * 2;
}
/// Dynamic shared memory (+ 1024: the base is rounded up to the 1024-byte swizzle-atom alignment).
template <int NB, int BN>
constexpr std::size_t wg_smem_bytes() {
  return std::size_t{kWgStages} * wg_stage_bytes<NB, BN>() + 1024;
}

static_assert(WG_UP_BLOCK_N == 64 || WG_UP_BLOCK_N == 128, "WG_UP_BLOCK_N must be 64 or 128");
static_assert(WG_DOWN_BLOCK_N == 128 || WG_DOWN_BLOCK_N == 256, "WG_DOWN_BLOCK_N must be 128 or 256");
static_assert(kWgThreads == 128 + kWgConsumerThreads, "one producer warpgroup + the consumers");
static_assert(kWgStages >= 2, "the TMA ring needs at least 2 stages");
static_assert(wg_smem_bytes<2, WG_UP_BLOCK_N>() + kWgBarrierBytes <= 227 * 1024 &&
                  wg_smem_bytes<1, WG_DOWN_BLOCK_N>() + kWgBarrierBytes <= 227 * 1024,
              "WG_STAGES x stage bytes exceed the 227 KiB of shared memory per CTA on sm_90: lower "
              "WG_STAGES (at most 4 with 48 KiB stages)");

/// One 128×BN tile of C per CTA of 3 warpgroups (sm_90a; the body is empty on every other target,
/// and the host never launches it there). A[M,K], W0/W1[N,K] row-major (nn.Linear weights: both
/// operands K-major, wgmma with trans-b 0). NB = 1: C = A·W0ᵀ; NB = 2: C = silu(A·W0ᵀ) ⊙ (A·W1ᵀ)
/// (gate and up accumulated side by side from one A slice, the SwiGLU in fp32 in the epilogue).
/// Warpgroup 0 (one thread) streams the 128×64 A slice and the BN×64 W slices by TMA into a
/// WG_STAGES ring (full/empty mbarriers); warpgroups 1 and 2 each multiply 64 rows of A by the
/// slices with wgmma.m64n{BN}k16 (4 k16 steps per slice, one wgmma group in flight) and release a
/// stage once the group that read it has retired. TMA zero-fills the M/N/K tails; stores are
/// guarded. Requires K % 8 == 0, N even, 16-byte aligned A/W0/W1, 4-byte aligned C (host checks).
/// Each element of C is one fixed-order sum: deterministic. The static `bars` array exists only
/// in the sm_90a body (wgmma_image_ok reads it back through the static shared-memory size).
template <typename T, int NB, int BN>
__global__ void __launch_bounds__(kWgThreads, 1)
    wgmma_mlp_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmW0,
                     const __grid_constant__ CUtensorMap tmW1, T* __restrict__ C, int M, int N,
                     int K) {
#ifdef VB_WGMMA_BODY
  constexpr int kStage = wg_stage_bytes<NB, BN>();
  constexpr int kTileW = BN * kWgBK * 2;
  constexpr int kAcc = BN / 2;  // fp32 accumulators per thread per W operand
  __shared__ __align__(8) std::uint64_t bars[2 * kWgStages];  // [0,S): full, [S,2S): empty
  extern __shared__ __align__(1024) unsigned char wg_smem[];
  const u32 base = (smem_addr(wg_smem) + 1023u) & ~1023u;
  const u32 full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kWgStages]);
  auto full_bar = [&](int s) { return full0 + 8u * s; };
  auto empty_bar = [&](int s) { return empty0 + 8u * s; };
  auto stage_a = [&](int s) { return base + static_cast<u32>(s) * kStage; };
  auto stage_w = [&](int s, int b) { return stage_a(s) + kWgTileABytes + b * kTileW; };

  const int tid = threadIdx.x, wg = tid / 128;
  const int tiles_m = (M + kWgBM - 1) / kWgBM, tiles_n = (N + BN - 1) / BN;
  int tm, tn;
  raster(blockIdx.x, tiles_m, tiles_n, GROUP_M, tm, tn);
  const int m0 = tm * kWgBM, n0 = tn * BN;
  const int KT = (K + kWgBK - 1) / kWgBK;

  if (tid == 0) {
    prefetch_tensormap(&tmA);
    prefetch_tensormap(&tmW0);
    if constexpr (NB == 2) prefetch_tensormap(&tmW1);
    for (int s = 0; s < kWgStages; ++s) {
      mbar_init(full_bar(s), 1);                    // the producer's arrive.expect_tx
      mbar_init(empty_bar(s), kWgConsumerThreads);  // every consumer thread arrives
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer warpgroup: give registers to the consumers; one thread issues all TMA loads.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % kWgStages;
        // Parity trick: the first pass over the ring waits on the (complete) phase before 0.
        mbar_wait(empty_bar(s), ((kt / kWgStages) & 1) ^ 1);
        mbar_arrive_expect_tx(full_bar(s), kStage);
        const int k0 = kt * kWgBK;
        tma_load_2d(stage_a(s), &tmA, full_bar(s), k0, m0);
        tma_load_2d(stage_w(s, 0), &tmW0, full_bar(s), k0, n0);
        if constexpr (NB == 2) tma_load_2d(stage_w(s, 1), &tmW1, full_bar(s), k0, n0);
      }
    }
    return;  // no CTA-wide barrier follows
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int c = wg - 1;  // consumer index: rows m0 + 64c .. +63
  float acc[NB][kAcc];
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[b][i] = 0.0f;

  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % kWgStages;
    mbar_wait(full_bar(s), (kt / kWgStages) & 1);
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) fence_operand(acc[b][i]);
    wgmma_fence();
    const u32 a0 = stage_a(s) + static_cast<u32>(c) * 64 * 128;  // 64 rows of 128 bytes
#pragma unroll
    for (int kk = 0; kk < kWgBK / 16; ++kk) {
      // +32 bytes per k16 inside the swizzled 128-byte rows, for A and for the K-major W tiles.
      const std::uint64_t da = wg_desc(a0 + kk * 32, 16, 1024);
#pragma unroll
      for (int b = 0; b < NB; ++b)
        Wgmma<T, BN, 0>::run(acc[b], da, wg_desc(stage_w(s, b) + kk * 32, 16, 1024));
    }
    wgmma_commit();
    wgmma_wait<1>();  // the group of slice kt-1 has retired: its stage may be refilled
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) fence_operand(acc[b][i]);
    if (kt > 0) mbar_arrive(empty_bar((kt - 1) % kWgStages));
  }
  wgmma_wait<0>();
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) fence_operand(acc[b][i]);

  const int warp = (tid / 32) % 4, lane = tid % 32;
  const int row_base = m0 + 64 * c + 16 * warp + lane / 4;
  const int col_base = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = col_base + 8 * j;  // even, and N is even: col < N implies col + 1 < N
    if (col >= N) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + 8 * h;
      if (row >= M) continue;
      float v0 = acc[0][4 * j + 2 * h], v1 = acc[0][4 * j + 2 * h + 1];
      if constexpr (NB == 2) {
        v0 = swiglu(v0, acc[NB - 1][4 * j + 2 * h]);
        v1 = swiglu(v1, acc[NB - 1][4 * j + 2 * h + 1]);
      }
      store_pair(C + static_cast<std::size_t>(row) * N + col, v0, v1);
    }
  }
#else
  (void)tmA, (void)tmW0, (void)tmW1, (void)C, (void)M, (void)N, (void)K;
#endif  // VB_WGMMA_BODY
}

#endif  // USE_WGMMA

// ---- SIMT fp32 kernel: C = A·Wᵀ, or C = silu(C)·(A·Wᵀ) in place --------------------------------

constexpr int kSimtBM = 128, kSimtBN = 128, kSimtBK = 8, kSimtThreads = 256, kSimtPad = 4;
enum Epi { kStore = 0, kSwigluInPlace = 1 };

/// v[0..3] = row[c0..c0+3] (0 outside [0, n) or when !row_ok); VEC4: n % 4 == 0, aligned rows.
template <bool VEC4>
__device__ __forceinline__ void load4_guarded(const float* row, int c0, int n, bool row_ok,
                                              float (&v)[4]) {
  if constexpr (VEC4) {
    if (row_ok && c0 < n) {
      const float4 x = *reinterpret_cast<const float4*>(row + c0);
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else {
      v[0] = v[1] = v[2] = v[3] = 0.0f;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = (row_ok && c0 + i < n) ? row[c0 + i] : 0.0f;
  }
}

/// A[M,K], W[N,K] fp32; EPI kStore: C = A·Wᵀ; kSwigluInPlace: C = silu(C)·(A·Wᵀ) (each element
/// read and written by the same thread). 128×128 per CTA of 256 threads, 8×8 per thread.
template <int EPI, bool VEC4>
__global__ void __launch_bounds__(kSimtThreads)
    mlp_simt_kernel(const float* __restrict__ A, const float* __restrict__ W, float* C, int M,
                    int N, int K) {
  __shared__ __align__(16) float As[2][kSimtBK][kSimtBM + kSimtPad];  // transposed slices
  __shared__ __align__(16) float Bs[2][kSimtBK][kSimtBN + kSimtPad];
  const int tid = threadIdx.x;
  const int tiles_m = (M + kSimtBM - 1) / kSimtBM, tiles_n = (N + kSimtBN - 1) / kSimtBN;
  int tm, tn;
  raster(blockIdx.x, tiles_m, tiles_n, GROUP_M, tm, tn);
  const int m0 = tm * kSimtBM, n0 = tn * kSimtBN;
  const int KT = (K + kSimtBK - 1) / kSimtBK;

  const int lr = tid >> 1, lk = (tid & 1) * 4;  // loader: row lr, k lk..lk+3 of A and of W
  const bool a_ok = m0 + lr < M, w_ok = n0 + lr < N;
  const float* const a_row = A + static_cast<std::size_t>(a_ok ? m0 + lr : 0) * K;
  const float* const w_row = W + static_cast<std::size_t>(w_ok ? n0 + lr : 0) * K;
  float ra[4], rw[4];
  auto load_global = [&](int kt) {
    load4_guarded<VEC4>(a_row, kt * kSimtBK + lk, K, a_ok, ra);
    load4_guarded<VEC4>(w_row, kt * kSimtBK + lk, K, w_ok, rw);
  };
  auto store_shared = [&](int buf) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      As[buf][lk + i][lr] = ra[i];
      Bs[buf][lk + i][lr] = rw[i];
    }
  };

  const int ty = tid >> 4, tx = tid & 15;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  if (KT > 0) {
    load_global(0);
    store_shared(0);
  }
  __syncthreads();
  for (int kt = 0; kt < KT; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < KT) load_global(kt + 1);
#pragma unroll
    for (int k = 0; k < kSimtBK; ++k) {
      float a[8], b[8];
      const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][64 + tx * 4]);
      a[0] = a0.x, a[1] = a0.y, a[2] = a0.z, a[3] = a0.w;
      a[4] = a1.x, a[5] = a1.y, a[6] = a1.z, a[7] = a1.w;
      b[0] = b0.x, b[1] = b0.y, b[2] = b0.z, b[3] = b0.w;
      b[4] = b1.x, b[5] = b1.y, b[6] = b1.z, b[7] = b1.w;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (kt + 1 < KT) store_shared(cur ^ 1);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (row >= M) continue;
    float* const dst = C + static_cast<std::size_t>(row) * N;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      if (col >= N) continue;
      if constexpr (EPI == kSwigluInPlace)
        dst[col] = swiglu(dst[col], acc[i][j]);
      else
        dst[col] = acc[i][j];
    }
  }
}

// ---- host side ---------------------------------------------------------------------------------

bool aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

int check_grid(long long ctas) {
  if (ctas > INT_MAX) return vbk::fail("fused_mlp: %lld CTAs exceed the grid limit", ctas);
  return 0;
}

template <typename T, int NB, bool VEC>
int launch_mma_vec(const T* A, const T* W0, const T* W1, T* C, int M, int N, int K, cudaStream_t s) {
  const long long ctas = static_cast<long long>((M + BLOCK_M - 1) / BLOCK_M) * ((N + BLOCK_N - 1) / BLOCK_N);
  if (int e = check_grid(ctas)) return e;
  constexpr std::size_t smem = smem_bytes<NB>();
  const cudaError_t e = cudaFuncSetAttribute(
      mlp_mma_kernel<T, NB, VEC>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess)
    return vbk::fail("fused_mlp: cannot reserve %zu bytes of shared memory per CTA (%s); lower "
                     "STAGES, BLOCK_K or BLOCK_N",
                     smem, cudaGetErrorString(e));
  mlp_mma_kernel<T, NB, VEC><<<static_cast<unsigned>(ctas), kThreads, smem, s>>>(A, W0, W1, C, M, N, K);
  VBK_CUDA_CHECK_LAUNCH(NB == 2 ? "fused_mlp gate/up mlp_mma_kernel" : "fused_mlp down mlp_mma_kernel");
  return 0;
}

#if USE_WGMMA
/// Launches the wgmma path for C = A·W0ᵀ (NB 1) or silu(A·W0ᵀ)⊙(A·W1ᵀ) (NB 2) if the shape, the
/// alignment, the device and the kernel image allow it (`taken` = true; returns 0, or vbk::fail's
/// 1 if the launch failed); otherwise launches nothing, sets `taken` = false and returns 0, and
/// the caller takes the mma.sync path.
template <typename T, int NB>
int try_launch_wgmma(const T* A, const T* W0, const T* W1, T* C, int M, int N, int K,
                     cudaStream_t s, bool& taken) {
  constexpr int BN = NB == 2 ? WG_UP_BLOCK_N : WG_DOWN_BLOCK_N;
  constexpr auto kernel = wgmma_mlp_kernel<T, NB, BN>;
  taken = false;
  if (K <= 0 || K % 8 != 0 || N % 2 != 0 || !aligned(A, 16) || !aligned(W0, 16) ||
      (NB == 2 && !aligned(W1, 16)) || !aligned(C, 4))
    return 0;
  // The kernel's tile and slice counts ((M + 127) / 128, (K + 63) / 64) are ints.
  if (M > INT_MAX - kWgBM || N > INT_MAX - BN || K > INT_MAX - kWgBK) return 0;
  if (!wgmma_image_ok<kernel>(kWgBarrierBytes)) return 0;
  const long long tiles = static_cast<long long>((M + kWgBM - 1) / kWgBM) * ((N + BN - 1) / BN);
  if (tiles > INT_MAX) return 0;
  CUtensorMap tmA, tmW0, tmW1;
  if (!make_tma_map(&tmA, A, M, K, kWgBM) || !make_tma_map(&tmW0, W0, N, K, BN)) return 0;
  if (NB == 2) {
    if (!make_tma_map(&tmW1, W1, N, K, BN)) return 0;
  } else {
    tmW1 = tmW0;  // unused by the NB = 1 kernel
  }
  constexpr std::size_t smem = wg_smem_bytes<NB, BN>();
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  taken = true;
  kernel<<<static_cast<unsigned>(tiles), kWgThreads, smem, s>>>(tmA, tmW0, tmW1, C, M, N, K);
  VBK_CUDA_CHECK_LAUNCH(NB == 2 ? "fused_mlp gate/up wgmma_mlp_kernel" : "fused_mlp down wgmma_mlp_kernel");
  return 0;
}
#endif  // USE_WGMMA

/// C = A·W0ᵀ (NB 1) or silu(A·W0ᵀ)⊙(A·W1ᵀ) (NB 2) on tensor cores; no launch when C is empty.
template <typename T, int NB>
int launch_mma(const T* A, const T* W0, const T* W1, T* C, int M, int N, int K, cudaStream_t s) {
  if (M == 0 || N == 0) return 0;
#if USE_WGMMA
  bool taken = false;
  const int r = try_launch_wgmma<T, NB>(A, W0, W1, C, M, N, K, s, taken);
  if (taken || r != 0) return r;
#endif
  const bool vec = K % 8 == 0 && aligned(A, 16) && aligned(W0, 16) && (NB == 1 || aligned(W1, 16));
  return vec ? launch_mma_vec<T, NB, true>(A, W0, W1, C, M, N, K, s)
             : launch_mma_vec<T, NB, false>(A, W0, W1, C, M, N, K, s);
}

/// fp32 SIMT GEMM C = A·Wᵀ (kStore) or C = silu(C)·(A·Wᵀ) (kSwigluInPlace).
template <int EPI>
int launch_simt(const float* A, const float* W, float* C, int M, int N, int K, cudaStream_t s) {
  if (M == 0 || N == 0) return 0;
  const long long ctas = static_cast<long long>((M + kSimtBM - 1) / kSimtBM) * ((N + kSimtBN - 1) / kSimtBN);
  if (int e = check_grid(ctas)) return e;
  const bool vec4 = K % 4 == 0 && aligned(A, 16) && aligned(W, 16);
  if (vec4)
    mlp_simt_kernel<EPI, true><<<static_cast<unsigned>(ctas), kSimtThreads, 0, s>>>(A, W, C, M, N, K);
  else
    mlp_simt_kernel<EPI, false><<<static_cast<unsigned>(ctas), kSimtThreads, 0, s>>>(A, W, C, M, N, K);
  VBK_CUDA_CHECK_LAUNCH("fused_mlp mlp_simt_kernel");
  return 0;
}

/// Both phases with h[B,H] in `hbuf` (T for fp16/bf16, fp32 for fp32).
template <typename T>
int run_phases(const T* x, const T* wg, const T* wu, const T* wd, T* y, void* hbuf, int B, int D,
               int H, cudaStream_t s) {
  if constexpr (std::is_same<T, float>::value) {
    float* const h = static_cast<float*>(hbuf);
    if (int e = launch_simt<kStore>(x, wg, h, B, H, D, s)) return e;
    if (int e = launch_simt<kSwigluInPlace>(x, wu, h, B, H, D, s)) return e;
    return launch_simt<kStore>(h, wd, y, B, D, H, s);
  } else {
    T* const h = static_cast<T*>(hbuf);
    if (int e = launch_mma<T, 2>(x, wg, wu, h, B, H, D, s)) return e;
    return launch_mma<T, 1>(h, wd, nullptr, y, B, D, H, s);
  }
}

}  // namespace

/// Kernel ABI (DESIGN §3): inputs x[B,D], w_gate[H,D], w_up[H,D], w_down[D,H]; output y[B,D];
/// same float dtype; no attributes. Scratch: B·H elements of the input dtype (fp32 for fp32),
/// stream-ordered (cudaMallocAsync/cudaFreeAsync on `stream`).
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)attrs;
  if (int e = vbk::check_cuda_args(inputs, n_inputs, 4, outputs, n_outputs, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [B,D], got %d", tx.ndim);
  if (inputs[1].ndim != 2) return vbk::fail("w_gate: expected 2 dimensions [H,D], got %d", inputs[1].ndim);
  const std::int64_t B = tx.shape[0], D = tx.shape[1], H = inputs[1].shape[0];
  if (int e = vbk::check_shape(tx, "x", {B, D})) return e;
  if (int e = vbk::check_shape(inputs[1], "w_gate", {H, D})) return e;
  if (int e = vbk::check_shape(inputs[2], "w_up", {H, D})) return e;
  if (int e = vbk::check_shape(inputs[3], "w_down", {D, H})) return e;
  if (int e = vbk::check_shape(outputs[0], "y", {B, D})) return e;
  if (B > INT_MAX || D > INT_MAX || H > INT_MAX)
    return vbk::fail("fused_mlp: dimensions above 2^31-1 are not supported (B=%lld D=%lld H=%lld)",
                     (long long)B, (long long)D, (long long)H);
  if (B == 0 || D == 0) return 0;
  const cudaStream_t s = vbk::as_stream(stream);
  return vbk::dispatch_float(vbk::dtype_of(tx), [&](auto tag) {
    using T = decltype(tag);
    const std::size_t hbytes = static_cast<std::size_t>(B) * static_cast<std::size_t>(H) * sizeof(T);
    void* hbuf = nullptr;
    if (hbytes > 0) {
      const cudaError_t e = cudaMallocAsync(&hbuf, hbytes, s);
      if (e != cudaSuccess)
        return vbk::fail("fused_mlp: cudaMallocAsync of %zu bytes for h failed (%s)", hbytes,
                         cudaGetErrorString(e));
    }
    const int rc = run_phases<T>(static_cast<const T*>(vbk::data_ptr(inputs[0])),
                                 static_cast<const T*>(vbk::data_ptr(inputs[1])),
                                 static_cast<const T*>(vbk::data_ptr(inputs[2])),
                                 static_cast<const T*>(vbk::data_ptr(inputs[3])),
                                 static_cast<T*>(vbk::data_ptr(outputs[0])), hbuf,
                                 static_cast<int>(B), static_cast<int>(D), static_cast<int>(H), s);
    if (hbuf != nullptr) {
      const cudaError_t e = cudaFreeAsync(hbuf, s);
      if (rc == 0 && e != cudaSuccess)
        return vbk::fail("fused_mlp: cudaFreeAsync failed (%s)", cudaGetErrorString(e));
    }
    return rc;
  });
}
