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
// fp32 (and every dtype when USE_MMA = 0): true fp32 FFMA on the SIMT cores, never TF32. A CTA of
// 256 threads computes 128×128 of C, 8×8 per thread (two 4×4 quadrants 64 apart, so that the
// shared-memory reads of a warp are conflict-free float4s); K in slices of 8, double-buffered
// through registers. 16-bit inputs are widened to fp32 in shared memory on this path.
//
// Determinism: every element of C is one fixed-order sum in one thread; no split-K, no atomics.
// Subnormals: no fast-math; the conversions used keep subnormals (RNE).
#include "vb_cuda.cuh"

#include <climits>
#include <cstdint>
#include <type_traits>

// @vb-param BLOCK_M 128 {64,128,256}  rows of C per CTA (tensor-core path)
#ifndef BLOCK_M
#define BLOCK_M 128
#endif
// @vb-param BLOCK_N 256 {64,128,256}  columns of C per CTA (tensor-core path)
#ifndef BLOCK_N
#define BLOCK_N 256
#endif
// @vb-param BLOCK_K 32 {32,64}  K depth of one pipeline stage
#ifndef BLOCK_K
#define BLOCK_K 32
#endif
// @vb-param WARPS_M 2 {1,2,4}  warps along M (warp tile = BLOCK_M/WARPS_M rows; keep warp tiles <= 64x64 or registers spill)
#ifndef WARPS_M
#define WARPS_M 2
#endif
// @vb-param WARPS_N 4 {1,2,4}  warps along N (warp tile = BLOCK_N/WARPS_N columns)
#ifndef WARPS_N
#define WARPS_N 4
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

namespace {

using u32 = std::uint32_t;

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

__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

/// 16-byte global->shared async copy; `valid` false zero-fills the 16 bytes (src-size 0).
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// ldmatrix .x4: lanes 8i..8i+7 give the row addresses of 8×8 matrix i; r[i] = this lane's
/// pair (row lane/4, columns 2·(lane%4), +1) of matrix i.
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
/// ldmatrix .x4.trans: as ldsm_x4 of the transposed matrices (lane gets rows 2·(lane%4), +1 of
/// column lane/4).
__device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

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

template <typename T>
int launch_matmul(const T* A, const T* B, T* C, int M, int N, int K, cudaStream_t s) {
  if constexpr (std::is_same<T, float>::value || USE_MMA == 0) {
    return launch_simt(A, B, C, M, N, K, s);
  } else {
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
