// matmul (CUDA starter): C[M,N] = A[M,K] · B[K,N], all row-major, fp32 accumulation (DESIGN §2).
//
// fp16 / bf16: tensor cores through mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} (inline
// PTX, sm_80+). A CTA computes a BLOCK_M×BLOCK_N tile of C with WARPS_M×WARPS_N warps, each
// warp a (BLOCK_M/WARPS_M)×(BLOCK_N/WARPS_N) sub-tile of m16n8 accumulators. K advances in
// BLOCK_K slices through a STAGES-deep cp.async ring in shared memory; fragments come from
// shared memory by ldmatrix (A: .x4, B: .x4.trans, since B is K×N row-major, i.e. the "row"
// layout where mma wants "col"). Rows of the shared tiles are padded by 8 elements (16 bytes):
// a row pitch of an odd number of 16-byte chunks puts the 8 row addresses of every ldmatrix
// 8×8 matrix in 8 different 4-bank groups, so ldmatrix is conflict-free.
// Tails: every 16-byte cp.async chunk is either entirely inside the matrix or zero-filled
// (src-size 0), which needs K % 8 == 0 and N % 8 == 0 and 16-byte aligned bases; any other shape
// takes the same kernel with guarded element-wise loads (VEC = false), still on tensor cores.
// Stores are guarded per element; pairs are stored as one 32-bit word where N is even.
// CTAs are rasterized in groups of GROUP_M tile rows (a column of GROUP_M A panels shares each
// B panel in L2), over a 1-D grid (no gridDim.y/z limit).
//
// fp16 / bf16 with USE_WGMMA = 1 (the default) on sm_90a (H100/H200): TMA + wgmma (wgmma_gemm_kernel). A CTA of
// 3 warpgroups computes 128×WG_BLOCK_N of C: one thread of warpgroup 0 loads 128×64 A and
// 64×WG_BLOCK_N B slices with cp.async.bulk.tensor (CUtensorMaps built on the host with
// cuTensorMapEncodeTiled from cudaGetDriverEntryPoint, 128-byte swizzle, zero fill out of bounds)
// into a WG_STAGES ring guarded by full/empty mbarriers; warpgroups 1 and 2 each run
// wgmma.m64n{WG_BLOCK_N}k16 on 64 rows (A K-major, B N-major from shared memory). The host takes
// this path only when K % 8 == 0, N % 8 == 0, A/B are 16-byte and C 4-byte aligned, the device
// is compute capability 9.x and the loaded image holds the sm_90a body; otherwise (and always
// with USE_WGMMA = 0) the mma.sync kernel below runs. Built for any other target the wgmma
// kernel is an empty stub that is never launched. USE_WGMMA = 1 is the default since the H200
// measured it at 199 us for bf16 4096^3 (689 TFLOP/s) against 418 us for the best mma.sync
// configuration (bench/results/ranking-h200.md); the mma.sync defaults above stay the best
// measured mma.sync configuration (v10 of bench/variants/cuda/matmul).
//
// fp32 (and every dtype when USE_MMA = 0): true fp32 FFMA on the SIMT cores, never TF32. A CTA of
// 256 threads computes 128×128 of C, 8×8 per thread (two 4×4 quadrants 64 apart, so that the
// shared-memory reads of a warp are conflict-free float4s); K in slices of 8, double-buffered
// through registers. 16-bit inputs are widened to fp32 in shared memory on this path.
//
// fp32 with VB_PRECISION_TF32 = 1 (KernelBench mode only, never a VladBud default): tensor cores in
// TF32 (tf32_gemm_kernel), mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 with both operands
// rounded to TF32 (cvt.rna: 10-bit mantissa) and fp32 accumulation. DESIGN §2 makes fp32 true fp32,
// and TF32 fails VladBud's fp32 threshold (~3e-4 against 1e-5), so this path is compiled only
// where an evaluation admits TF32: `vladbud kernelbench bench` builds the folder's source with
// the define when its problem.json says "precision": "tf32" (KernelBench's allclose(1e-2) admits
// it, as torch.backends.cuda.matmul.allow_tf32 would). A CTA of 8 warps (2 x 4) computes
// 128×128 of C (warp tile 64×32: 4×4 m16n8 accumulators); K in slices of 32 through a 3-deep
// cp.async ring (16-byte chunks when K % 4 == 0, N % 4 == 0 and 16-byte aligned bases, else
// 4-byte cp.async per element, zero-filled outside the matrix). A fragments come by ldmatrix.x4
// (32-bit elements seen as b16 pairs), B fragments by 32-bit shared loads; row pitches 36 and
// 136 floats make both conflict-free (A: 144-byte rows, B: bank 8t + g). When the tiles do not
// fill the GPU (fewer than its SMs) and K is long, K is split in S fixed chunks: each CTA writes
// its partial tile to a stream-ordered scratch [S, M, N] (cudaMallocAsync, freed on the stream),
// and a second kernel sums the S partials of each element in order (deterministic: S depends
// only on the shape and the SM count).
//
// fp32 with N == 1 (USE_GEMV = 1; KernelBench's matrix-vector problem): a warp per row of A,
// float4 loads where aligned, a fixed-order shuffle tree; true fp32 in every mode.
//
// Determinism: every element of C is one fixed-order sum (one thread, or S partials summed in
// order by one thread); no atomics.
// Subnormals: no fast-math; the conversions used keep subnormals (RNE).
#include "vb_cuda.cuh"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <type_traits>

// @vb-param BLOCK_M 128 {64,128,256}  rows of C per CTA (tensor-core path)
#ifndef BLOCK_M
#define BLOCK_M 128
#endif
// @vb-param BLOCK_N 128 {64,128,256}  columns of C per CTA (tensor-core path)
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
// @vb-param BLOCK_K 32 {32,64}  K depth of one pipeline stage
#ifndef BLOCK_K
#define BLOCK_K 32
#endif
// @vb-param WARPS_M 2 {1,2,4}  warps along M (warp tile = BLOCK_M/WARPS_M rows; keep warp tiles <= 64x64 or registers spill)
#ifndef WARPS_M
#define WARPS_M 2
#endif
// @vb-param WARPS_N 2 {1,2,4}  warps along N (warp tile = BLOCK_N/WARPS_N columns)
#ifndef WARPS_N
#define WARPS_N 2
#endif
// @vb-param STAGES 4 {2,3,4,5}  cp.async pipeline depth (shared-memory ring of A/B slices)
#ifndef STAGES
#define STAGES 4
#endif
// @vb-param GROUP_M 8 {1,4,8,16}  CTA rasterization: tile rows per group (L2 reuse of B panels)
#ifndef GROUP_M
#define GROUP_M 8
#endif
// @vb-param MIN_BLOCKS 1 {1,2}  __launch_bounds__ min CTAs per SM (caps registers per thread)
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
// @vb-param USE_MMA 1 {0,1}  1: tensor cores for fp16/bf16; 0: the fp32 SIMT path for all dtypes
#ifndef USE_MMA
#define USE_MMA 1
#endif
// @vb-param USE_WGMMA 1 {0,1}  1: fp16/bf16 through TMA + wgmma on sm_90a where the shape allows (else the mma.sync path)
#ifndef USE_WGMMA
#define USE_WGMMA 1
#endif
// @vb-param WG_BLOCK_N 256 {128,256}  columns of C per CTA on the wgmma path (rows: 128)
#ifndef WG_BLOCK_N
#define WG_BLOCK_N 256
#endif
// @vb-param WG_STAGES 4 {3,4,5,6}  TMA ring depth on the wgmma path (48 KiB per stage at WG_BLOCK_N 256: 3-4 fit; 32 KiB at 128: 3-6 fit)
#ifndef WG_STAGES
#define WG_STAGES 4
#endif

// @vb-param WG_SPLIT_K 1 {0,1}  1: on the wgmma path, split K over CTAs when the output tiles leave SMs idle (skinny and decode shapes)
#ifndef WG_SPLIT_K
#define WG_SPLIT_K 1
#endif
// @vb-param USE_GEMV 1 {0,1}  1: fp32 matrix-vector (N == 1) through a warp-per-row GEMV; 0: the GEMM path
#ifndef USE_GEMV
#define USE_GEMV 1
#endif
// Not a tunable: set only by `vladbud kernelbench bench` for a problem whose evaluation admits
// TF32 (problem.json "precision": "tf32"); 0 keeps fp32 true fp32 (DESIGN §2).
#ifndef VB_PRECISION_TF32
#define VB_PRECISION_TF32 0
#endif

#define VB_MMA_OWN_MMA16816  // this file keeps its explicitly specialized mma16816 below
#include "vb_cuda_mma.cuh"
#if USE_WGMMA
#include "vb_cuda_wgmma.cuh"
#endif

namespace {

constexpr int kThreads = WARPS_M * WARPS_N * 32;
constexpr int kWarpTileM = BLOCK_M / WARPS_M;
constexpr int kWarpTileN = BLOCK_N / WARPS_N;
constexpr int kPadA = BLOCK_K + 8;  // A slice row pitch (elements): odd count of 16-byte chunks
constexpr int kPadB = BLOCK_N + 8;  // B slice row pitch (elements)
constexpr int kStageA = BLOCK_M * kPadA;
constexpr int kStageB = BLOCK_K * kPadB;
constexpr std::size_t kSmemBytes = std::size_t{STAGES} * (kStageA + kStageB) * 2;

static_assert(BLOCK_K % 16 == 0, "BLOCK_K must be a multiple of 16 (the mma K)");
static_assert(kWarpTileM % 16 == 0, "BLOCK_M / WARPS_M must be a multiple of 16");
static_assert(kWarpTileN % 16 == 0, "BLOCK_N / WARPS_N must be a multiple of 16");
static_assert(STAGES >= 2, "the cp.async ring needs at least 2 stages");
static_assert(((BLOCK_K / 8) % 2 == 0) && ((BLOCK_N / 8) % 2 == 0),
              "padded pitches must be an odd number of 16-byte chunks");

// ---- PTX wrappers ------------------------------------------------------------------------------

/// d += a·b for one m16n8k16 tile, fp32 accumulators (PTX ISA "Matrix Fragments for
/// mma.m16n8k16": a0..a3 = A rows g / g+8, cols 2t / 2t+8; b0, b1 = B rows 2t / 2t+8, col g;
/// d0..d3 = rows g, g, g+8, g+8, cols 2t, 2t+1; g = lane/4, t = lane%4).
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const u32 (&a)[4], u32 b0,
                                                        u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Stores (a, b) rounded to T at p[0], p[1] as one 32-bit word (p must be 4-byte aligned).
__device__ __forceinline__ void store_pair(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void store_pair(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

/// (tile row, tile column) of CTA `pid`: groups of GROUP_M tile rows, column-major inside a
/// group, so consecutive CTAs share B panels (and the group's A panels stay in L2).
__device__ __forceinline__ void raster(int pid, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int width = GROUP_M * tiles_n;
  const int first_m = (pid / width) * GROUP_M;
  const int rows = min(tiles_m - first_m, GROUP_M);
  tm = first_m + (pid % width) % rows;
  tn = (pid % width) / rows;
}

// ---- tensor-core kernel (fp16 / bf16) --------------------------------------------------------

/// C = A·B for one BLOCK_M×BLOCK_N tile per CTA. VEC: 16-byte cp.async loads (requires
/// K % 8 == 0, N % 8 == 0, 16-byte aligned A and B); otherwise guarded element loads.
/// Dynamic shared memory: kSmemBytes.
template <typename T, bool VEC>
__global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
    mma_gemm_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                    int N, int K) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const As = reinterpret_cast<T*>(smem_raw);
  T* const Bs = As + STAGES * kStageA;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int tiles_m = (M + BLOCK_M - 1) / BLOCK_M, tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
  int tm, tn;
  raster(blockIdx.x, tiles_m, tiles_n, tm, tn);
  const int m0 = tm * BLOCK_M, n0 = tn * BLOCK_N;
  const int KT = (K + BLOCK_K - 1) / BLOCK_K;

  auto load_slice = [&](int stage, int kt) {
    const int k0 = kt * BLOCK_K;
    T* const as = As + stage * kStageA;
    T* const bs = Bs + stage * kStageB;
    if constexpr (VEC) {
      constexpr int kChA = BLOCK_M * BLOCK_K / 8, kChB = BLOCK_K * BLOCK_N / 8;
#pragma unroll
      for (int i = 0; i < (kChA + kThreads - 1) / kThreads; ++i) {
        const int c = tid + i * kThreads;
        if (kChA % kThreads == 0 || c < kChA) {
          const int r = c / (BLOCK_K / 8), kc = (c % (BLOCK_K / 8)) * 8;
          const int gm = m0 + r, gk = k0 + kc;
          const bool v = gm < M && gk < K;
          cp_async16(smem_addr(as + r * kPadA + kc),
                     v ? A + static_cast<std::size_t>(gm) * K + gk : A, v);
        }
      }
#pragma unroll
      for (int i = 0; i < (kChB + kThreads - 1) / kThreads; ++i) {
        const int c = tid + i * kThreads;
        if (kChB % kThreads == 0 || c < kChB) {
          const int r = c / (BLOCK_N / 8), nc = (c % (BLOCK_N / 8)) * 8;
          const int gk = k0 + r, gn = n0 + nc;
          const bool v = gk < K && gn < N;
          cp_async16(smem_addr(bs + r * kPadB + nc),
                     v ? B + static_cast<std::size_t>(gk) * N + gn : B, v);
        }
      }
    } else {
      const T zero = vbk::from_f32<T>(0.0f);
      constexpr int kElA = BLOCK_M * BLOCK_K, kElB = BLOCK_K * BLOCK_N;
#pragma unroll 4
      for (int e = tid; e < kElA; e += kThreads) {
        const int r = e / BLOCK_K, kk = e % BLOCK_K;
        const int gm = m0 + r, gk = k0 + kk;
        as[r * kPadA + kk] = (gm < M && gk < K) ? A[static_cast<std::size_t>(gm) * K + gk] : zero;
      }
#pragma unroll 4
      for (int e = tid; e < kElB; e += kThreads) {
        const int r = e / BLOCK_N, nn = e % BLOCK_N;
        const int gk = k0 + r, gn = n0 + nn;
        bs[r * kPadB + nn] = (gk < K && gn < N) ? B[static_cast<std::size_t>(gk) * N + gn] : zero;
      }
    }
  };

  constexpr int MT = kWarpTileM / 16, NT = kWarpTileN / 8;
  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

  // Prologue: slices 0 .. STAGES-2 in flight (one commit group each, empty past the end).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_slice(s, s);
    cp_async_commit();
  }

  for (int kt = 0; kt < KT; ++kt) {
    // Groups committed so far: STAGES-1+kt; at most STAGES-2 pending => slice kt has landed.
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // slice kt visible to all; everyone is done with slice kt-1's stage
    {
      const int nk = kt + STAGES - 1;  // refill the stage read in iteration kt-1
      if (nk < KT) load_slice(nk % STAGES, nk);
      cp_async_commit();
    }
    const T* const as = As + (kt % STAGES) * kStageA;
    const T* const bs = Bs + (kt % STAGES) * kStageB;
#pragma unroll
    for (int kk = 0; kk < BLOCK_K; kk += 16) {
      u32 af[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        ldsm_x4(af[mt], smem_addr(as + (wm * kWarpTileM + mt * 16 + (lane & 15)) * kPadA + kk +
                                  (lane >> 4) * 8));
      u32 bfr[NT][2];
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        // Matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
        u32 r[4];
        ldsm_x4_t(r, smem_addr(bs + (kk + (lane & 15)) * kPadB + wn * kWarpTileN + np * 16 +
                               (lane >> 4) * 8));
        bfr[2 * np][0] = r[0];
        bfr[2 * np][1] = r[1];
        bfr[2 * np + 1][0] = r[2];
        bfr[2 * np + 1][1] = r[3];
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma16816<T>(acc[mt][nt], af[mt], bfr[nt][0], bfr[nt][1]);
    }
  }
  cp_async_wait<0>();  // only empty groups can remain; drain them before exit

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
        T* const dst = C + static_cast<std::size_t>(row) * N + col;
        const float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
        if (pair_ok) {  // N even and col even: col + 1 < N
          store_pair(dst, v0, v1);
        } else {
          dst[0] = vbk::from_f32<T>(v0);
          if (col + 1 < N) dst[1] = vbk::from_f32<T>(v1);
        }
      }
    }
  }
}

// ---- wgmma kernel (fp16 / bf16 on sm_90a; USE_WGMMA = 1) --------------------------------------
#if USE_WGMMA

constexpr int kWgBM = 128;                  // 2 consumer warpgroups x 64 rows
constexpr int kWgBK = 64;                   // 64 16-bit elements = one 128-byte swizzle row
constexpr int kWgBN = WG_BLOCK_N;
constexpr int kWgStages = WG_STAGES;
constexpr int kWgThreads = 3 * 128;         // warpgroup 0: TMA producer; 1, 2: wgmma consumers
constexpr int kWgConsumerThreads = 2 * 128;
constexpr int kWgTileABytes = kWgBM * kWgBK * 2;     // 16 KiB: [128 m][64 k], 128B-swizzled rows
constexpr int kWgChunkBBytes = kWgBK * 64 * 2;       // 8 KiB: [64 k][64 n], 128B-swizzled rows
constexpr int kWgTileBBytes = (kWgBN / 64) * kWgChunkBBytes;
constexpr int kWgStageBytes = kWgTileABytes + kWgTileBBytes;
// + 1024: the dynamic shared-memory base is rounded up to the 1024-byte swizzle-atom alignment.
constexpr std::size_t kWgSmemBytes = std::size_t{kWgStages} * kWgStageBytes + 1024;
constexpr std::size_t kWgBarrierBytes = 2 * kWgStages * sizeof(std::uint64_t);

static_assert(kWgBN == 128 || kWgBN == 256, "WG_BLOCK_N must be 128 or 256");
static_assert(kWgThreads == 128 + kWgConsumerThreads, "one producer warpgroup + the consumers");
static_assert(kWgStages >= 2, "the TMA ring needs at least 2 stages");
static_assert(kWgSmemBytes + kWgBarrierBytes <= 227 * 1024,
              "WG_STAGES x stage bytes exceed the 227 KiB of shared memory per CTA on sm_90: lower "
              "WG_STAGES (at most 4 with WG_BLOCK_N 256, 6 with 128)");

/// C = A·B for one 128×WG_BLOCK_N tile per CTA of 3 warpgroups (sm_90a; the body is empty on
/// every other target, and the host never launches it there). Warpgroup 0 (one thread) streams
/// 128×64 A and 64×WG_BLOCK_N B slices by TMA into a WG_STAGES ring (full/empty mbarriers);
/// warpgroups 1 and 2 each multiply 64 rows of A by the whole B slice with
/// wgmma.m64n{WG_BLOCK_N}k16 (4 per slice), keeping one wgmma group in flight, and release a
/// stage once the wgmma group that read it has retired. Shared layouts are the canonical
/// 128-byte-swizzle layouts written by TMA with CU_TENSOR_MAP_SWIZZLE_128B: A K-major (row m at
/// m·128 bytes, SBO = 1024 = 8 rows), B N-major in 64-column chunks of 64 k rows (LBO = 8 KiB
/// between chunks, SBO = 1024). TMA zero-fills the M/N/K tails; stores are guarded.
/// Requires K % 8 == 0, N % 8 == 0, 16-byte aligned A and B, 4-byte aligned C (host checks).
/// The static `bars` array (2·WG_STAGES mbarriers) exists only in the sm_90a body: the host reads
/// it back through cudaFuncAttributes::sharedSizeBytes to know the body is real.
template <typename T>
__global__ void __launch_bounds__(kWgThreads, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap tmA,
                      const __grid_constant__ CUtensorMap tmB, T* __restrict__ C, int M, int N,
                      int K, float* __restrict__ part, int kt_per_split) {
#ifdef VB_WGMMA_BODY
  __shared__ __align__(8) std::uint64_t bars[2 * kWgStages];  // [0,S): full, [S,2S): empty
  extern __shared__ __align__(1024) unsigned char wg_smem[];
  const u32 base = (smem_addr(wg_smem) + 1023u) & ~1023u;
  const u32 full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kWgStages]);
  auto full_bar = [&](int s) { return full0 + 8u * s; };
  auto empty_bar = [&](int s) { return empty0 + 8u * s; };
  auto stage_a = [&](int s) { return base + static_cast<u32>(s) * kWgStageBytes; };
  auto stage_b = [&](int s) { return stage_a(s) + kWgTileABytes; };

  const int tid = threadIdx.x, wg = tid / 128;
  const int tiles_m = (M + kWgBM - 1) / kWgBM, tiles_n = (N + kWgBN - 1) / kWgBN;
  const int tiles = tiles_m * tiles_n;
  const int split = static_cast<int>(blockIdx.x) / tiles;  // 0 without split-K
  int tm, tn;
  raster(static_cast<int>(blockIdx.x) % tiles, tiles_m, tiles_n, tm, tn);
  const int m0 = tm * kWgBM, n0 = tn * kWgBN;
  const int KT_all = (K + kWgBK - 1) / kWgBK;
  const int kt0 = split * kt_per_split;                 // this CTA's K slices: [kt0, kt0 + KT)
  const int KT = min(kt_per_split, KT_all - kt0);       // >= 1 (the host makes no empty split)

  if (tid == 0) {
    prefetch_tensormap(&tmA);
    prefetch_tensormap(&tmB);
    for (int s = 0; s < kWgStages; ++s) {
      mbar_init(full_bar(s), 1);                     // the producer's arrive.expect_tx
      mbar_init(empty_bar(s), kWgConsumerThreads);   // every consumer thread arrives
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
        mbar_arrive_expect_tx(full_bar(s), kWgStageBytes);
        const int k0 = (kt0 + kt) * kWgBK;
        tma_load_2d(stage_a(s), &tmA, full_bar(s), k0, m0);
#pragma unroll
        for (int j = 0; j < kWgBN / 64; ++j)
          tma_load_2d(stage_b(s) + j * kWgChunkBBytes, &tmB, full_bar(s), n0 + 64 * j, k0);
      }
    }
    return;  // no CTA-wide barrier follows
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int c = wg - 1;  // consumer index: rows m0 + 64c .. +63
  float acc[kWgBN / 2];
#pragma unroll
  for (int i = 0; i < kWgBN / 2; ++i) acc[i] = 0.0f;

  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % kWgStages;
    mbar_wait(full_bar(s), (kt / kWgStages) & 1);
#pragma unroll
    for (int i = 0; i < kWgBN / 2; ++i) fence_operand(acc[i]);
    wgmma_fence();
    const u32 a0 = stage_a(s) + static_cast<u32>(c) * 64 * 128;  // 64 rows of 128 bytes
    const u32 b0 = stage_b(s);
#pragma unroll
    for (int kk = 0; kk < kWgBK / 16; ++kk) {
      // A: +32 bytes per k16 inside the swizzled 128-byte row; B: +16 k rows of 128 bytes.
      Wgmma<T, kWgBN, 1>::run(acc, wg_desc(a0 + kk * 32, 16, 1024),
                              wg_desc(b0 + kk * 16 * 128, kWgChunkBBytes, 1024));
    }
    wgmma_commit();
    wgmma_wait<1>();  // the group of slice kt-1 has retired: its stage may be refilled
#pragma unroll
    for (int i = 0; i < kWgBN / 2; ++i) fence_operand(acc[i]);
    if (kt > 0) mbar_arrive(empty_bar((kt - 1) % kWgStages));
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < kWgBN / 2; ++i) fence_operand(acc[i]);

  const int warp = (tid / 32) % 4, lane = tid % 32;
  const int row_base = m0 + 64 * c + 16 * warp + lane / 4;
  const int col_base = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < kWgBN / 8; ++j) {
    const int col = col_base + 8 * j;  // even, and N % 8 == 0: col < N implies col + 1 < N
    if (col >= N) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + 8 * h;
      if (row >= M) continue;
      if (part != nullptr)  // split-K: this split's fp32 partial, summed by splitk_sum_kernel
        *reinterpret_cast<float2*>(part + (static_cast<std::size_t>(split) * M + row) * N + col) =
            make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      else
        store_pair(C + static_cast<std::size_t>(row) * N + col, acc[4 * j + 2 * h],
                   acc[4 * j + 2 * h + 1]);
    }
  }
#else
  (void)tmA, (void)tmB, (void)C, (void)M, (void)N, (void)K, (void)part, (void)kt_per_split;
#endif  // VB_WGMMA_BODY
}

#endif  // USE_WGMMA

// ---- SIMT fp32 kernel (fp32, or any dtype with USE_MMA = 0) -----------------------------------

constexpr int kSimtBM = 128, kSimtBN = 128, kSimtBK = 8, kSimtThreads = 256;
constexpr int kSimtPad = 4;  // keeps float4 alignment of the transposed rows

/// 4 consecutive elements at p as floats (p 4·sizeof(T)-aligned).
template <typename T>
__device__ __forceinline__ void load4(const T* p, float (&v)[4]) {
  if constexpr (std::is_same<T, float>::value) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
  } else {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    const T* const e = reinterpret_cast<const T*>(&x);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = vbk::to_f32(e[i]);
  }
}

/// v[0..3] = row[c0 .. c0+3] where in range (c < n), else 0. VEC4: n % 4 == 0 and the row is
/// 4-element aligned, so the chunk is all in or all out.
template <bool VEC4, typename T>
__device__ __forceinline__ void load4_guarded(const T* row, int c0, int n, bool row_ok,
                                              float (&v)[4]) {
  if constexpr (VEC4) {
    if (row_ok && c0 < n) {
      load4(row + c0, v);
    } else {
      v[0] = v[1] = v[2] = v[3] = 0.0f;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = (row_ok && c0 + i < n) ? vbk::to_f32(row[c0 + i]) : 0.0f;
  }
}

/// C = A·B in fp32 FFMA, 128×128 per CTA of 256 threads, 8×8 per thread. VEC4: K % 4 == 0,
/// N % 4 == 0 and 4-element aligned bases.
template <typename T, bool VEC4>
__global__ void __launch_bounds__(kSimtThreads)
    simt_gemm_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                     int N, int K) {
  __shared__ __align__(16) float As[2][kSimtBK][kSimtBM + kSimtPad];  // A slice, transposed
  __shared__ __align__(16) float Bs[2][kSimtBK][kSimtBN + kSimtPad];
  const int tid = threadIdx.x;
  const int tiles_m = (M + kSimtBM - 1) / kSimtBM, tiles_n = (N + kSimtBN - 1) / kSimtBN;
  int tm, tn;
  raster(blockIdx.x, tiles_m, tiles_n, tm, tn);
  const int m0 = tm * kSimtBM, n0 = tn * kSimtBN;
  const int KT = (K + kSimtBK - 1) / kSimtBK;

  // Loader roles: A row tid/2, k (tid%2)*4..+3; B k row tid/32, n (tid%32)*4..+3.
  const int a_r = tid >> 1, a_k = (tid & 1) * 4;
  const int b_k = tid >> 5, b_n = (tid & 31) * 4;
  const bool a_row_ok = m0 + a_r < M;
  const T* const a_row = A + static_cast<std::size_t>(a_row_ok ? m0 + a_r : 0) * K;
  float ra[4], rb[4];
  auto load_global = [&](int kt) {
    const int k0 = kt * kSimtBK;
    load4_guarded<VEC4>(a_row, k0 + a_k, K, a_row_ok, ra);
    const bool b_row_ok = k0 + b_k < K;
    load4_guarded<VEC4>(B + static_cast<std::size_t>(b_row_ok ? k0 + b_k : 0) * N, n0 + b_n, N,
                        b_row_ok, rb);
  };
  auto store_shared = [&](int buf) {
#pragma unroll
    for (int i = 0; i < 4; ++i) As[buf][a_k + i][a_r] = ra[i];
    *reinterpret_cast<float4*>(&Bs[buf][b_k][b_n]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
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
    if (kt + 1 < KT) store_shared(cur ^ 1);  // buffer cur^1 was last read before the barrier
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (row >= M) continue;
    T* const dst = C + static_cast<std::size_t>(row) * N;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      if (col < N) dst[col] = vbk::from_f32<T>(acc[i][j]);
    }
  }
}

// ---- TF32 tensor-core kernel (fp32 with VB_PRECISION_TF32 = 1) -----------------------------------
#if VB_PRECISION_TF32

constexpr int kTfBM = 128, kTfBN = 128, kTfBK = 32, kTfStages = 3;
constexpr int kTfWarpsM = 2, kTfWarpsN = 4, kTfThreads = kTfWarpsM * kTfWarpsN * 32;
constexpr int kTfWarpM = kTfBM / kTfWarpsM, kTfWarpN = kTfBN / kTfWarpsN;  // 64 x 32
constexpr int kTfPadA = kTfBK + 4;   // 36 floats: A fragment reads hit bank 4g + t
constexpr int kTfPadB = kTfBN + 8;   // 136 floats: B fragment reads hit bank 8t + g
constexpr int kTfStageA = kTfBM * kTfPadA, kTfStageB = kTfBK * kTfPadB;
constexpr std::size_t kTfSmemBytes = std::size_t{kTfStages} * (kTfStageA + kTfStageB) * sizeof(float);
static_assert(kTfWarpM % 16 == 0 && kTfWarpN % 8 == 0, "warp tile must be whole m16n8 tiles");

/// x rounded to TF32 (round to nearest, ties away; PTX cvt.rna.tf32.f32), as the 32-bit operand
/// register of a .tf32 mma.
__device__ __forceinline__ u32 to_tf32(float x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

/// d += a·b for one m16n8k8 TF32 tile, fp32 accumulators (PTX ISA "Matrix Fragments for
/// mma.m16n8k8" .tf32: a0..a3 = A (g, t), (g+8, t), (g, t+4), (g+8, t+4); b0, b1 = B (t, g),
/// (t+4, g); d0..d3 = rows g, g, g+8, g+8, cols 2t, 2t+1; g = lane/4, t = lane%4).
__device__ __forceinline__ void mma1688_tf32(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Out[split] = A[:, kb:ke]·B[kb:ke, :] for one 128×128 tile per CTA (blockIdx.x, rasterized),
/// split = blockIdx.y, kb = split·k_chunk (k_chunk a multiple of kTfBK). Out is C when gridDim.y
/// is 1, else the scratch [gridDim.y, M, N]. VEC: 16-byte cp.async chunks (K % 4 == 0,
/// N % 4 == 0, 16-byte aligned A and B). Dynamic shared memory: kTfSmemBytes.
template <bool VEC>
__global__ void __launch_bounds__(kTfThreads)
    tf32_gemm_kernel(const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ Out, int M, int N, int K, int k_chunk) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* const As = reinterpret_cast<float*>(smem_raw);
  float* const Bs = As + kTfStages * kTfStageA;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kTfWarpsN, wn = warp % kTfWarpsN;
  const int tiles_m = (M + kTfBM - 1) / kTfBM, tiles_n = (N + kTfBN - 1) / kTfBN;
  int tm, tn;
  raster(blockIdx.x, tiles_m, tiles_n, tm, tn);
  const int m0 = tm * kTfBM, n0 = tn * kTfBN;
  const int kb = blockIdx.y * k_chunk, ke = min(K, kb + k_chunk);
  const int KT = ke > kb ? (ke - kb + kTfBK - 1) / kTfBK : 0;
  float* const out = Out + static_cast<std::size_t>(blockIdx.y) * M * N;

  auto load_slice = [&](int stage, int kt) {
    const int k0 = kb + kt * kTfBK;
    float* const as = As + stage * kTfStageA;
    float* const bs = Bs + stage * kTfStageB;
    if constexpr (VEC) {
      constexpr int kChA = kTfBM * kTfBK / 4, kChB = kTfBK * kTfBN / 4;
#pragma unroll
      for (int i = 0; i < kChA / kTfThreads; ++i) {
        const int c = tid + i * kTfThreads;
        const int r = c / (kTfBK / 4), kc = (c % (kTfBK / 4)) * 4;
        const int gm = m0 + r, gk = k0 + kc;
        const bool v = gm < M && gk < ke;  // ke % 4 == 0 or ke == K: a chunk is all in or out
        cp_async16(smem_addr(as + r * kTfPadA + kc), v ? A + static_cast<std::size_t>(gm) * K + gk : A, v);
      }
#pragma unroll
      for (int i = 0; i < kChB / kTfThreads; ++i) {
        const int c = tid + i * kTfThreads;
        const int r = c / (kTfBN / 4), nc = (c % (kTfBN / 4)) * 4;
        const int gk = k0 + r, gn = n0 + nc;
        const bool v = gk < ke && gn < N;
        cp_async16(smem_addr(bs + r * kTfPadB + nc), v ? B + static_cast<std::size_t>(gk) * N + gn : B, v);
      }
    } else {
      // Unaligned rows (K or N not a multiple of 4, e.g. KernelBench's 8205x2949x5921): 4-byte
      // cp.async per element, zero-filled outside the matrix, so these loads stay asynchronous
      // and overlap the MMAs of the stages in flight like the 16-byte path (synchronous loads
      // through registers ran this shape at 0.59x cuBLAS fp32 on the H200).
#pragma unroll 4
      for (int e = tid; e < kTfBM * kTfBK; e += kTfThreads) {
        const int r = e / kTfBK, kk = e % kTfBK;
        const int gm = m0 + r, gk = k0 + kk;
        const bool v = gm < M && gk < ke;
        cp_async4(smem_addr(as + r * kTfPadA + kk), v ? A + static_cast<std::size_t>(gm) * K + gk : A, v);
      }
#pragma unroll 4
      for (int e = tid; e < kTfBK * kTfBN; e += kTfThreads) {
        const int r = e / kTfBN, nn = e % kTfBN;
        const int gk = k0 + r, gn = n0 + nn;
        const bool v = gk < ke && gn < N;
        cp_async4(smem_addr(bs + r * kTfPadB + nn), v ? B + static_cast<std::size_t>(gk) * N + gn : B, v);
      }
    }
  };

  constexpr int MT = kTfWarpM / 16, NT = kTfWarpN / 8;
  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

#pragma unroll
  for (int st = 0; st < kTfStages - 1; ++st) {
    if (st < KT) load_slice(st, st);
    cp_async_commit();
  }
  const int g = lane >> 2, t4 = lane & 3;
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kTfStages - 2>();
    __syncthreads();  // slice kt visible; everyone is done with the stage refilled below
    {
      const int nk = kt + kTfStages - 1;
      if (nk < KT) load_slice(nk % kTfStages, nk);
      cp_async_commit();
    }
    const float* const as = As + (kt % kTfStages) * kTfStageA;
    const float* const bs = Bs + (kt % kTfStages) * kTfStageB;
#pragma unroll
    for (int kk = 0; kk < kTfBK; kk += 8) {
      u32 af[MT][4], bfr[NT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // One ldmatrix.x4 (b16 view: an 8×8 b16 matrix is 8 rows × 4 floats, and lane l gets
        // row l/4, float l%4): matrices (rows 0-7, k 0-3), (8-15, 0-3), (0-7, 4-7), (8-15, 4-7)
        // of the 16×8 slice = a0..a3 of the tf32 fragment. Row pitch 144 B: conflict-free.
        u32 r[4];
        ldsm_x4(r, smem_addr(as + (wm * kTfWarpM + mt * 16 + (lane & 15)) * kTfPadA + kk + (lane >> 4) * 4));
#pragma unroll
        for (int q = 0; q < 4; ++q) af[mt][q] = to_tf32(__uint_as_float(r[q]));
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const float* const b = bs + (kk + t4) * kTfPadB + wn * kTfWarpN + nt * 8 + g;
        bfr[nt][0] = to_tf32(b[0]);
        bfr[nt][1] = to_tf32(b[4 * kTfPadB]);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma1688_tf32(acc[mt][nt], af[mt], bfr[nt][0], bfr[nt][1]);
    }
  }
  cp_async_wait<0>();

  const bool pair_ok = (N % 2 == 0) && ((reinterpret_cast<std::uintptr_t>(out) & 7) == 0);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int col = n0 + wn * kTfWarpN + nt * 8 + t4 * 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm * kTfWarpM + mt * 16 + g + h * 8;
        if (row >= M || col >= N) continue;
        float* const dst = out + static_cast<std::size_t>(row) * N + col;
        if (pair_ok) {
          *reinterpret_cast<float2*>(dst) = make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
        } else {
          dst[0] = acc[mt][nt][2 * h];
          if (col + 1 < N) dst[1] = acc[mt][nt][2 * h + 1];
        }
      }
    }
  }
}

#endif  // VB_PRECISION_TF32

// ---- split-K reduction (the TF32 path and the wgmma path) ---------------------------------------

/// C[i] = sum over s = 0..S-1, in order, of part[s·MN + i] (the split-K partials, fp32), rounded
/// once to T: every element is one fixed-order sum (deterministic).
template <typename T>
__global__ void splitk_sum_kernel(const float* __restrict__ part, T* __restrict__ C, long long MN,
                                  int S) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < MN;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float v = 0.0f;
    for (int s = 0; s < S; ++s) v += part[s * MN + i];
    C[i] = vbk::from_f32<T>(v);
  }
}

/// Launches splitk_sum_kernel over MN elements; returns the launch's error.
template <typename T>
cudaError_t launch_splitk_sum(const float* part, T* C, long long MN, int S, cudaStream_t s) {
  const long long blocks = std::min<long long>((MN + 255) / 256, 65535LL * 8);
  splitk_sum_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, s>>>(part, C, MN, S);
  return cudaGetLastError();
}

/// SMs of the current device (132 when it cannot be read).
[[maybe_unused]] int sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) {
    (void)cudaGetLastError();
    return 132;
  }
  return sms;
}

// ---- GEMV (fp32, N == 1; USE_GEMV = 1) ---------------------------------------------------------

constexpr int kGemvWarps = 8;  // rows per CTA

/// y[m] = sum_k A[m,k]·x[k], one warp per row: lane l sums k = 4l + 128j (VEC4: float4 loads,
/// K % 4 == 0 and 16-byte aligned A and x; one accumulator per vector component, four loads in
/// flight per lane) or k = l + 32j, then a fixed-order xor-shuffle tree.
template <bool VEC4>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y,
                int M, int K) {
  const int lane = threadIdx.x & 31;
  const long long row = static_cast<long long>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  if (row >= M) return;
  const float* const a = A + row * K;
  float acc = 0.0f;
  if constexpr (VEC4) {
    const float4* const a4 = reinterpret_cast<const float4*>(a);
    const float4* const x4 = reinterpret_cast<const float4*>(x);
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
#pragma unroll 4
    for (int k = lane; k < K / 4; k += 32) {
      const float4 u = a4[k], v = x4[k];
      c0 = fmaf(u.x, v.x, c0);
      c1 = fmaf(u.y, v.y, c1);
      c2 = fmaf(u.z, v.z, c2);
      c3 = fmaf(u.w, v.w, c3);
    }
    acc = (c0 + c1) + (c2 + c3);
  } else {
    for (int k = lane; k < K; k += 32) acc = fmaf(a[k], x[k], acc);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) y[row] = acc;
}

// ---- host side ---------------------------------------------------------------------------------

bool aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

template <typename T>
int launch_simt(const T* A, const T* B, T* C, int M, int N, int K, cudaStream_t s) {
  const long long tiles = static_cast<long long>((M + kSimtBM - 1) / kSimtBM) *
                          ((N + kSimtBN - 1) / kSimtBN);
  if (tiles > INT_MAX) return vbk::fail("matmul: %lld CTAs exceed the grid limit", tiles);
  const bool vec4 = K % 4 == 0 && N % 4 == 0 && aligned(A, 4 * sizeof(T)) && aligned(B, 4 * sizeof(T));
  if (vec4)
    simt_gemm_kernel<T, true><<<static_cast<unsigned>(tiles), kSimtThreads, 0, s>>>(A, B, C, M, N, K);
  else
    simt_gemm_kernel<T, false><<<static_cast<unsigned>(tiles), kSimtThreads, 0, s>>>(A, B, C, M, N, K);
  VBK_CUDA_CHECK_LAUNCH("matmul simt_gemm_kernel");
  return 0;
}

template <typename T, bool VEC>
int launch_mma_impl(const T* A, const T* B, T* C, int M, int N, int K, cudaStream_t s) {
  const long long tiles = static_cast<long long>((M + BLOCK_M - 1) / BLOCK_M) *
                          ((N + BLOCK_N - 1) / BLOCK_N);
  if (tiles > INT_MAX) return vbk::fail("matmul: %lld CTAs exceed the grid limit", tiles);
  cudaError_t e = cudaFuncSetAttribute(mma_gemm_kernel<T, VEC>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kSmemBytes));
  if (e != cudaSuccess)
    return vbk::fail("matmul: cannot reserve %zu bytes of shared memory per CTA (%s); lower "
                     "STAGES, BLOCK_K or BLOCK_N",
                     kSmemBytes, cudaGetErrorString(e));
  mma_gemm_kernel<T, VEC><<<static_cast<unsigned>(tiles), kThreads, kSmemBytes, s>>>(A, B, C, M, N, K);
  VBK_CUDA_CHECK_LAUNCH("matmul mma_gemm_kernel");
  return 0;
}

#if USE_WGMMA
/// Launches the wgmma path if the shape, the alignment, the device and the kernel image allow it
/// (`taken` = true; returns 0, or vbk::fail's 1 if the launch failed); otherwise launches nothing,
/// sets `taken` = false and returns 0, and the caller takes the mma.sync path.
template <typename T>
int try_launch_wgmma(const T* A, const T* B, T* C, int M, int N, int K, cudaStream_t s,
                     bool& taken) {
  taken = false;
  if (K <= 0 || K % 8 != 0 || N % 8 != 0 || !aligned(A, 16) || !aligned(B, 16) || !aligned(C, 4))
    return 0;
  // The kernel's tile and slice counts ((M + 127) / 128, (K + 63) / 64) are ints.
  if (M > INT_MAX - kWgBM || N > INT_MAX - kWgBN || K > INT_MAX - kWgBK) return 0;
  if (!wgmma_image_ok<wgmma_gemm_kernel<T>>(kWgBarrierBytes)) return 0;
  const long long tiles = static_cast<long long>((M + kWgBM - 1) / kWgBM) *
                          ((N + kWgBN - 1) / kWgBN);
  if (tiles > INT_MAX) return 0;
  CUtensorMap tmA, tmB;
  if (!make_tma_map(&tmA, A, M, K, kWgBM) || !make_tma_map(&tmB, B, K, N, kWgBK)) return 0;
  const std::size_t smem = kWgSmemBytes;
  cudaError_t e = cudaFuncSetAttribute(wgmma_gemm_kernel<T>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  // Split-K (WG_SPLIT_K): when the output tiles leave SMs idle (decode and skinny shapes), K is cut
  // into S chunks of whole 64-slices, S <= SMs / tiles (one wave), >= 4 slices a chunk, and S·M·8
  // bytes of partials written and read back per column at most half the weight bytes K·2 (S <=
  // K / (8·M)). S depends only on the shape and the SM count: deterministic.
  const int KT = (K + kWgBK - 1) / kWgBK;
  long long splits = 1;
  if (WG_SPLIT_K != 0) {
    const int sms = sm_count();
    if (tiles < sms)
      splits = std::max<long long>(1, std::min<long long>({sms / tiles, KT / 4, K / (8LL * M)}));
  }
  const int kps = static_cast<int>((KT + splits - 1) / splits);
  splits = (KT + kps - 1) / kps;  // no empty split
  float* part = nullptr;
  const long long MN = static_cast<long long>(M) * N;
  if (splits > 1) {
    if (cudaMallocAsync(reinterpret_cast<void**>(&part),
                        static_cast<std::size_t>(splits * MN) * sizeof(float), s) != cudaSuccess) {
      (void)cudaGetLastError();
      part = nullptr;
      splits = 1;
    }
  }
  taken = true;
  wgmma_gemm_kernel<T><<<static_cast<unsigned>(tiles * splits), kWgThreads, smem, s>>>(
      tmA, tmB, C, M, N, K, part, splits > 1 ? kps : KT);
  e = cudaGetLastError();
  if (e == cudaSuccess && splits > 1) e = launch_splitk_sum<T>(part, C, MN, static_cast<int>(splits), s);
  if (part != nullptr) (void)cudaFreeAsync(part, s);
  if (e != cudaSuccess) return vbk::fail("matmul wgmma_gemm_kernel launch: %s", cudaGetErrorString(e));
  return 0;
}
#endif  // USE_WGMMA

int launch_gemv(const float* A, const float* x, float* y, int M, int K, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>((static_cast<long long>(M) + kGemvWarps - 1) / kGemvWarps);
  if (K % 4 == 0 && aligned(A, 16) && aligned(x, 16))
    gemv_kernel<true><<<grid, kGemvWarps * 32, 0, s>>>(A, x, y, M, K);
  else
    gemv_kernel<false><<<grid, kGemvWarps * 32, 0, s>>>(A, x, y, M, K);
  VBK_CUDA_CHECK_LAUNCH("matmul gemv_kernel");
  return 0;
}

#if VB_PRECISION_TF32
/// The TF32 path: S = 1 when the tiles fill the GPU or K < 4096, else the smallest split that
/// gives about two CTAs per SM with chunks of at least 1024 (a multiple of kTfBK).
int launch_tf32(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  const long long tiles = static_cast<long long>((M + kTfBM - 1) / kTfBM) * ((N + kTfBN - 1) / kTfBN);
  if (tiles > INT_MAX) return vbk::fail("matmul: %lld CTAs exceed the grid limit", tiles);
  const int sms = sm_count();
  long long splits = 1;
  if (tiles < sms && K >= 4096) {
    splits = std::min<long long>((2LL * sms + tiles - 1) / tiles, K / 1024);
    splits = std::max<long long>(1, std::min<long long>(splits, 64));
  }
  long long chunk = (K + splits - 1) / splits;
  chunk = (chunk + kTfBK - 1) / kTfBK * kTfBK;
  splits = (K + chunk - 1) / chunk;
  if (splits < 1) splits = 1;
  const bool vec = K % 4 == 0 && N % 4 == 0 && aligned(A, 16) && aligned(B, 16);
  auto kernel = vec ? tf32_gemm_kernel<true> : tf32_gemm_kernel<false>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kTfSmemBytes));
  if (e != cudaSuccess)
    return vbk::fail("matmul: cannot reserve %zu bytes of shared memory per CTA for the TF32 path (%s)",
                     kTfSmemBytes, cudaGetErrorString(e));
  const long long MN = static_cast<long long>(M) * N;
  float* out = C;
  if (splits > 1) {
    e = cudaMallocAsync(reinterpret_cast<void**>(&out), static_cast<std::size_t>(splits * MN) * sizeof(float), s);
    if (e != cudaSuccess)
      return vbk::fail("matmul: cudaMallocAsync of %lld split-K partials failed (%s)", splits * MN,
                       cudaGetErrorString(e));
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  kernel<<<grid, kTfThreads, kTfSmemBytes, s>>>(A, B, out, M, N, K, static_cast<int>(chunk));
  e = cudaGetLastError();
  if (e == cudaSuccess && splits > 1) e = launch_splitk_sum<float>(out, C, MN, static_cast<int>(splits), s);
  if (splits > 1) (void)cudaFreeAsync(out, s);
  if (e != cudaSuccess) return vbk::fail("matmul tf32_gemm_kernel launch: %s", cudaGetErrorString(e));
  return 0;
}
#endif  // VB_PRECISION_TF32

template <typename T>
int launch_matmul(const T* A, const T* B, T* C, int M, int N, int K, cudaStream_t s) {
  if constexpr (std::is_same<T, float>::value) {
    if (USE_GEMV && N == 1 && K > 0) return launch_gemv(A, B, C, M, K, s);
#if VB_PRECISION_TF32
    if (K > 0) return launch_tf32(A, B, C, M, N, K, s);
#endif
  }
  if constexpr (std::is_same<T, float>::value || USE_MMA == 0) {
    return launch_simt(A, B, C, M, N, K, s);
  } else {
#if USE_WGMMA
    bool taken = false;
    const int r = try_launch_wgmma<T>(A, B, C, M, N, K, s, taken);
    if (taken || r != 0) return r;
#endif
    const bool vec = K % 8 == 0 && N % 8 == 0 && aligned(A, 16) && aligned(B, 16);
    return vec ? launch_mma_impl<T, true>(A, B, C, M, N, K, s)
               : launch_mma_impl<T, false>(A, B, C, M, N, K, s);
  }
}

}  // namespace

/// Kernel ABI (DESIGN §3): inputs A[M,K], B[K,N]; output C[M,N]; same float dtype; no attributes.
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)attrs;
  if (int e = vbk::check_cuda_args(inputs, n_inputs, 2, outputs, n_outputs, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tA = inputs[0];
  const DLTensor& tB = inputs[1];
  DLTensor& tC = outputs[0];
  if (tA.ndim != 2) return vbk::fail("A: expected 2 dimensions [M,K], got %d", tA.ndim);
  if (tB.ndim != 2) return vbk::fail("B: expected 2 dimensions [K,N], got %d", tB.ndim);
  const std::int64_t M = tA.shape[0], K = tA.shape[1], N = tB.shape[1];
  if (tB.shape[0] != K)
    return vbk::fail("B: shape[0]=%lld does not match A.shape[1]=%lld", (long long)tB.shape[0],
                     (long long)K);
  if (int e = vbk::check_shape(tA, "A", {M, K})) return e;
  if (int e = vbk::check_shape(tB, "B", {K, N})) return e;
  if (int e = vbk::check_shape(tC, "C", {M, N})) return e;
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return vbk::fail("matmul: dimensions above 2^31-1 are not supported (M=%lld N=%lld K=%lld)",
                     (long long)M, (long long)N, (long long)K);
  if (M == 0 || N == 0) return 0;
  const cudaStream_t s = vbk::as_stream(stream);
  return vbk::dispatch_float(vbk::dtype_of(tA), [&](auto tag) {
    using T = decltype(tag);
    return launch_matmul<T>(static_cast<const T*>(vbk::data_ptr(tA)),
                            static_cast<const T*>(vbk::data_ptr(tB)),
                            static_cast<T*>(vbk::data_ptr(tC)), static_cast<int>(M),
                            static_cast<int>(N), static_cast<int>(K), s);
  });
}
