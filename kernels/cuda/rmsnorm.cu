// rmsnorm (CUDA starter): y[M,N] = x / sqrt(mean(x²) + eps) * weight over the last dim
// (Zhang & Sennrich 2019; LLaMA RMSNorm) (DESIGN §2).
//
// Inputs: x[M,N], weight[N]. Outputs: y[M,N] (same dtype). Attributes: eps (1e-6).
// fp16 / bf16 / fp32; the statistic mean(x²) in fp32, the output rounded once (RNE).
//
// Rows that fit the registers (N <= WARP_MAX_COLS: one warp per row; otherwise up to 64 floats
// per thread of a BLOCK_THREADS block) are read ONCE: Σx² is reduced from the registers and
// y = x * rrms * w written from them. Should Σx² overflow fp32 (|x| ~ 1e19 and beyond), the
// cached path recomputes it scaled by max|x| (no overflow, same rrms). Longer rows are streamed
// by a block of LONG_BLOCK_THREADS in two passes (Σx², then the output; the re-read usually
// hits L2). 16-byte vector accesses where the row length and pointers allow, coalesced
// scalars otherwise; rows grid-strided over a 1-D grid; fixed-order reductions (bitwise
// deterministic).

#include "vb_cuda.cuh"

#include <climits>
#include <cstdint>
#include <type_traits>

// @vb-param VEC_BYTES 16 {2,4,8,16}  bytes per vector load/store (16 = LDG.128)
#ifndef VEC_BYTES
#define VEC_BYTES 16
#endif
// @vb-param WARP_MAX_COLS 1024 {0,256,512,1024,2048}  longest row handled by one warp
#ifndef WARP_MAX_COLS
#define WARP_MAX_COLS 1024
#endif
// @vb-param WARP_BLOCK_THREADS 256 {64,128,256,512}  threads per block in the warp-per-row path
#ifndef WARP_BLOCK_THREADS
#define WARP_BLOCK_THREADS 256
#endif
// @vb-param BLOCK_THREADS 256 {64,128,256,512,1024}  threads per block for row-per-block rows
#ifndef BLOCK_THREADS
#define BLOCK_THREADS 256
#endif
// @vb-param MAX_PACKS 8 {1,2,4,8,16}  vectors kept in registers per thread (row cache)
#ifndef MAX_PACKS
#define MAX_PACKS 8
#endif
// @vb-param LONG_BLOCK_THREADS 1024 {256,512,1024}  threads per block for streamed long rows
#ifndef LONG_BLOCK_THREADS
#define LONG_BLOCK_THREADS 1024
#endif
// @vb-param UNROLL 4 {1,2,4,8}  independent vector loads per thread per step (streaming path)
#ifndef UNROLL
#define UNROLL 4
#endif
// @vb-param MAX_BLOCKS_PER_SM 16 {2,4,8,16,32}  grid cap = SMs x this (rows are grid-strided)
#ifndef MAX_BLOCKS_PER_SM
#define MAX_BLOCKS_PER_SM 16
#endif

namespace {

using i64 = long long;

static_assert(VEC_BYTES == 2 || VEC_BYTES == 4 || VEC_BYTES == 8 || VEC_BYTES == 16,
              "VEC_BYTES must be 2, 4, 8 or 16");
static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= 32 && BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(WARP_BLOCK_THREADS % 32 == 0 && WARP_BLOCK_THREADS >= 32 &&
                  WARP_BLOCK_THREADS <= 1024,
              "WARP_BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(LONG_BLOCK_THREADS % 32 == 0 && LONG_BLOCK_THREADS >= 32 &&
                  LONG_BLOCK_THREADS <= 1024,
              "LONG_BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(MAX_PACKS >= 1 && MAX_PACKS <= 16, "MAX_PACKS must be in [1, 16]");
static_assert(UNROLL >= 1 && UNROLL <= 16, "UNROLL must be in [1, 16]");

/// Elements of T per vector access (VEC_BYTES / sizeof(T), at least 1).
template <typename T>
constexpr int vec_elems() {
  return VEC_BYTES / static_cast<int>(sizeof(T)) > 0 ? VEC_BYTES / static_cast<int>(sizeof(T)) : 1;
}

/// Most floats one thread keeps in registers for a cached row: 64, or 32 at 1024 threads per
/// block (64 registers per thread at most there).
constexpr int cache_limit(int block_threads) { return block_threads >= 1024 ? 32 : 64; }

/// The same for rows cached as coalesced scalars (one address per element costs registers):
/// 64 up to 256 threads per block, 32 at 512, 16 at 1024.
constexpr int scalar_cache_limit(int block_threads) {
  return block_threads >= 1024 ? 16 : block_threads >= 512 ? 32 : 64;
}

/// Bit pattern of one element (16-bit types in the low half).
__device__ __forceinline__ unsigned bits_of(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ unsigned bits_of(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ unsigned bits_of(float v) { return __float_as_uint(v); }

/// Element of type T from its bit pattern (the low 16 bits for 16-bit types).
template <typename T> __device__ __forceinline__ T from_bits(unsigned u);
template <> __device__ __forceinline__ __half from_bits<__half>(unsigned u) {
  return __ushort_as_half(static_cast<unsigned short>(u & 0xffffu));
}
template <> __device__ __forceinline__ __nv_bfloat16 from_bits<__nv_bfloat16>(unsigned u) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(u & 0xffffu));
}
template <> __device__ __forceinline__ float from_bits<float>(unsigned u) { return __uint_as_float(u); }

/// Loads the N elements at p (aligned to N*sizeof(T)) with ONE access of N*sizeof(T) bytes
/// (2, 4, 8 or 16; __ldg: the read-only path) and widens them to float.
template <typename T, int N>
__device__ __forceinline__ void load_vec(const T* __restrict__ p, float (&f)[N]) {
  constexpr int B = static_cast<int>(sizeof(T)) * N;
  static_assert(B == 2 || B == 4 || B == 8 || B == 16, "vector access of 2, 4, 8 or 16 bytes");
  if constexpr (B == 2) {
    f[0] = vbk::to_f32(from_bits<T>(__ldg(reinterpret_cast<const unsigned short*>(p))));
  } else {
    constexpr int W = B / 4;
    unsigned w[W];
    if constexpr (W == 1) {
      w[0] = __ldg(reinterpret_cast<const unsigned*>(p));
    } else if constexpr (W == 2) {
      const uint2 r = __ldg(reinterpret_cast<const uint2*>(p));
      w[0] = r.x;
      w[1] = r.y;
    } else {
      const uint4 r = __ldg(reinterpret_cast<const uint4*>(p));
      w[0] = r.x;
      w[1] = r.y;
      w[2] = r.z;
      w[3] = r.w;
    }
#pragma unroll
    for (int i = 0; i < W; ++i) {
      if constexpr (sizeof(T) == 4) {
        f[i] = vbk::to_f32(from_bits<T>(w[i]));
      } else {
        f[2 * i] = vbk::to_f32(from_bits<T>(w[i]));
        f[2 * i + 1] = vbk::to_f32(from_bits<T>(w[i] >> 16));
      }
    }
  }
}

/// Rounds N floats to T (RNE) and stores them at p (aligned to N*sizeof(T)) with ONE access.
/// 8- and 16-byte stores are written in PTX (st.global.v2/v4.b32, no memory clobber): NVVM
/// otherwise splits some of them into 4-byte stores.
template <typename T, int N>
__device__ __forceinline__ void store_vec(T* __restrict__ p, const float (&f)[N]) {
  constexpr int B = static_cast<int>(sizeof(T)) * N;
  static_assert(B == 2 || B == 4 || B == 8 || B == 16, "vector access of 2, 4, 8 or 16 bytes");
  if constexpr (B == 2) {
    *reinterpret_cast<unsigned short*>(p) =
        static_cast<unsigned short>(bits_of(vbk::from_f32<T>(f[0])));
  } else {
    constexpr int W = B / 4;
    unsigned w[W];
#pragma unroll
    for (int i = 0; i < W; ++i) {
      if constexpr (sizeof(T) == 4) {
        w[i] = bits_of(vbk::from_f32<T>(f[i]));
      } else {
        w[i] = bits_of(vbk::from_f32<T>(f[2 * i])) | (bits_of(vbk::from_f32<T>(f[2 * i + 1])) << 16);
      }
    }
    if constexpr (W == 1) {
      *reinterpret_cast<unsigned*>(p) = w[0];
    } else if constexpr (W == 2) {
      asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(__cvta_generic_to_global(p)),
                 "r"(w[0]), "r"(w[1]));
    } else {
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(p)),
                 "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]));
    }
  }
}

/// Loads N elements at p (aligned to N*sizeof(T)) as floats: one vector load.
template <typename T, int N>
__device__ __forceinline__ void load_pack(const T* __restrict__ p, float (&f)[N]) {
  load_vec<T, N>(p, f);
}

/// Rounds N floats to T (RNE) and stores them at p (aligned to N*sizeof(T)): one vector store.
template <typename T, int N>
__device__ __forceinline__ void store_pack(T* __restrict__ p, const float (&f)[N]) {
  store_vec<T, N>(p, f);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Max over a group of G threads (G = 32: the warp; G > 32: the whole block of G threads).
/// Every thread of the group gets the same value. `red` is __shared__ float[64]; `phase`
/// alternates its halves so that one __syncthreads per reduction suffices (the next reduction
/// on the same half comes after another barrier that every reader has passed).
template <int G>
__device__ __forceinline__ float group_max(float v, float* red, int& phase) {
  v = warp_max(v);
  if constexpr (G > 32) {
    float* b = red + 32 * phase;
    phase ^= 1;
    if ((threadIdx.x & 31) == 0) b[threadIdx.x >> 5] = v;
    __syncthreads();
    v = b[0];
#pragma unroll
    for (int i = 1; i < G / 32; ++i) v = fmaxf(v, b[i]);
  }
  return v;
}

/// Sum over a group of G threads, fixed order (see group_max).
template <int G>
__device__ __forceinline__ float group_sum(float v, float* red, int& phase) {
  v = warp_sum(v);
  if constexpr (G > 32) {
    float* b = red + 32 * phase;
    phase ^= 1;
    if ((threadIdx.x & 31) == 0) b[threadIdx.x >> 5] = v;
    __syncthreads();
    v = b[0];
#pragma unroll
    for (int i = 1; i < G / 32; ++i) v += b[i];
  }
  return v;
}

/// Loads the NP-element packs p = base + u*BT + threadIdx.x (u < UU) of a row into v: UU
/// independent loads per thread, all issued before the first use. Packs at p >= n_packs are
/// left unset (callers skip them with step_valid).
template <typename T, int BT, int NP, int UU>
__device__ __forceinline__ void load_step(const T* __restrict__ xr, i64 base, i64 n_packs,
                                          float (&v)[UU][NP]) {
#pragma unroll
  for (int u = 0; u < UU; ++u) {
    const i64 p = base + static_cast<i64>(u) * BT + threadIdx.x;
    if (p < n_packs) load_pack<T, NP>(xr + p * NP, v[u]);
  }
}

/// Pack index of step slot u (see load_step).
template <int BT>
__device__ __forceinline__ i64 step_pack(i64 base, int u) {
  return base + static_cast<i64>(u) * BT + threadIdx.x;
}

// ---- register-cached rows (warp per row or block per row) ------------------------------------

/// One row per group of G threads (BT per block). Thread t holds packs p = k*G + t (k < KP) of
/// NP consecutive elements (NP > 1: one vector each; NP = 1: coalesced scalars). Requires
/// N <= G*KP*NP and, for NP > 1, N % NP == 0 and aligned rows and weight.
template <typename T, int G, int BT, int NP, int KP>
__global__ void __launch_bounds__(BT, 1)
    rmsnorm_cached(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, i64 R,
                   int N, float eps) {
  static_assert(BT % G == 0, "block must hold whole groups");
  constexpr int RPB = BT / G;
  __shared__ float red[64];
  int phase = 0;
  const int t = static_cast<int>(threadIdx.x) % G;
  const int n_packs = N / NP;
  const float fn = static_cast<float>(N);
  for (i64 row = static_cast<i64>(blockIdx.x) * RPB + threadIdx.x / G; row < R;
       row += static_cast<i64>(gridDim.x) * RPB) {
    const T* xr = x + row * N;
    T* yr = y + row * N;
    float v[KP][NP];
#pragma unroll
    for (int k = 0; k < KP; ++k) {  // all loads first: KP independent loads in flight
      const int p = k * G + t;
      if (p < n_packs) load_pack<T, NP>(xr + p * NP, v[k]);
    }
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < KP; ++k)
      if (k * G + t < n_packs)
#pragma unroll
        for (int j = 0; j < NP; ++j) q += v[k][j] * v[k][j];
    q = group_sum<G>(q, red, phase);
    float rrms = 1.0f / sqrtf(q / fn + eps);
    if (!(q <= __builtin_huge_valf())) {  // Σx² overflowed (or inf/NaN input): group-uniform
      float a = 0.0f;
#pragma unroll
      for (int k = 0; k < KP; ++k)
        if (k * G + t < n_packs)
#pragma unroll
          for (int j = 0; j < NP; ++j) a = fmaxf(a, fabsf(v[k][j]));
      a = group_max<G>(a, red, phase);
      if (a < __builtin_huge_valf()) {  // finite values: Σ(x/a)² <= N cannot overflow
        const float ia = 1.0f / a;
        float qs = 0.0f;
#pragma unroll
        for (int k = 0; k < KP; ++k)
          if (k * G + t < n_packs)
#pragma unroll
            for (int j = 0; j < NP; ++j) {
              const float u = v[k][j] * ia;
              qs += u * u;
            }
        qs = group_sum<G>(qs, red, phase);
        rrms = ia / sqrtf(qs / fn + eps * ia * ia);
      }
    }
#pragma unroll
    for (int k = 0; k < KP; ++k) {
      const int p = k * G + t;
      if (p < n_packs) {
        float wv[NP];
        load_pack<T, NP>(w + p * NP, wv);
#pragma unroll
        for (int j = 0; j < NP; ++j) v[k][j] = v[k][j] * rrms * wv[j];
        store_pack<T, NP>(yr + p * NP, v[k]);
      }
    }
  }
}

// ---- streamed long rows ------------------------------------------------------------------------

/// One row per block of BT threads, two passes: Σx², output.
template <typename T, int BT, int NP, int UU>
__global__ void __launch_bounds__(BT, 1)
    rmsnorm_stream(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, i64 R,
                   i64 N, float eps) {
  __shared__ float red[64];
  int phase = 0;
  const i64 n_packs = N / NP;
  const float fn = static_cast<float>(N);
  constexpr i64 STEP = static_cast<i64>(UU) * BT;
  for (i64 row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * N;
    T* yr = y + row * N;
    float v[UU][NP];
    float q = 0.0f;
    for (i64 base = 0; base < n_packs; base += STEP) {
      load_step<T, BT, NP, UU>(xr, base, n_packs, v);
#pragma unroll
      for (int u = 0; u < UU; ++u)
        if (step_pack<BT>(base, u) < n_packs)
#pragma unroll
          for (int j = 0; j < NP; ++j) q += v[u][j] * v[u][j];
    }
    const float rrms = 1.0f / sqrtf(group_sum<BT>(q, red, phase) / fn + eps);
    for (i64 base = 0; base < n_packs; base += STEP) {
      load_step<T, BT, NP, UU>(xr, base, n_packs, v);
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        const i64 p = step_pack<BT>(base, u);
        if (p < n_packs) {
          float wv[NP];
          load_pack<T, NP>(w + p * NP, wv);
#pragma unroll
          for (int j = 0; j < NP; ++j) v[u][j] = v[u][j] * rrms * wv[j];
          store_pack<T, NP>(yr + p * NP, v[u]);
        }
      }
    }
  }
}

// ---- host side ---------------------------------------------------------------------------------

bool aligned_to(const void* p, std::size_t a) {
  return reinterpret_cast<std::uintptr_t>(p) % a == 0;
}

/// Blocks for `work` independent items of `per_block` each, capped at sms * MAX_BLOCKS_PER_SM.
unsigned grid_for(i64 work, i64 per_block, int sms) {
  const i64 need = (work + per_block - 1) / per_block;
  const i64 cap = static_cast<i64>(sms) * MAX_BLOCKS_PER_SM;
  const i64 g = need < cap ? need : cap;
  return static_cast<unsigned>(g > 0 ? g : 1);
}

/// Packs (of vec_elems<T>() elements) per thread available to a cached row in blocks of BT
/// threads: vectors (VEC) or as many coalesced scalars; at most MAX_PACKS, at least 1.
template <typename T, int BT, bool VEC>
constexpr int max_packs() {
  constexpr int by_regs = (VEC ? cache_limit(BT) : scalar_cache_limit(BT)) / vec_elems<T>();
  constexpr int m = MAX_PACKS < by_regs ? MAX_PACKS : by_regs;
  return m >= 1 ? m : 1;
}

/// Largest power of two <= v, at most 16 (v >= 1).
constexpr int pow2_floor(int v) { return v >= 16 ? 16 : v >= 8 ? 8 : v >= 4 ? 4 : v >= 2 ? 2 : 1; }

/// Calls f(std::integral_constant<int, KP>{}) with the smallest power of two KP <= KF with
/// KP >= per_thread (the caller checked per_thread <= KF).
template <int KF, typename F>
int with_pack_count(i64 per_thread, F&& f) {
  if (per_thread <= 1) return f(std::integral_constant<int, 1>{});
  if constexpr (KF >= 2)
    if (per_thread <= 2) return f(std::integral_constant<int, 2>{});
  if constexpr (KF >= 4)
    if (per_thread <= 4) return f(std::integral_constant<int, 4>{});
  if constexpr (KF >= 8)
    if (per_thread <= 8) return f(std::integral_constant<int, 8>{});
  if constexpr (KF >= 16)
    if (per_thread <= 16) return f(std::integral_constant<int, 16>{});
  return vbk::fail("internal error: %lld vectors per thread exceed the register cache",
                   per_thread);
}

/// Number of SMs of the device holding `t` (cudaDeviceGetAttribute: a cheap, cached query).
int sm_count(const DLTensor& t, int* sms) {
  const cudaError_t e =
      cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, t.device.device_id);
  if (e != cudaSuccess)
    return vbk::fail("cudaDeviceGetAttribute(SM count): %s", cudaGetErrorString(e));
  if (*sms < 1) *sms = 1;
  return 0;
}

template <typename T, bool VEC>
int run_rmsnorm_as(const T* x, const T* w, T* y, i64 R, i64 Nc, float eps, int sms,
                  cudaStream_t st) {
  constexpr int N = vec_elems<T>();
  constexpr int KW = pow2_floor(max_packs<T, WARP_BLOCK_THREADS, VEC>());
  constexpr int KB = pow2_floor(max_packs<T, BLOCK_THREADS, VEC>());
  const int Ni = static_cast<int>(Nc);
  if (Nc <= WARP_MAX_COLS && Nc <= 32LL * KW * N) {
    constexpr int BT = WARP_BLOCK_THREADS;
    const unsigned grid = grid_for(R, BT / 32, sms);
    return with_pack_count<KW>((Nc + 32LL * N - 1) / (32LL * N), [&](auto kc) {
      constexpr int KP = decltype(kc)::value;
      if constexpr (VEC)
        rmsnorm_cached<T, 32, BT, N, KP><<<grid, BT, 0, st>>>(x, w, y, R, Ni, eps);
      else
        rmsnorm_cached<T, 32, BT, 1, KP * N><<<grid, BT, 0, st>>>(x, w, y, R, Ni, eps);
      VBK_CUDA_CHECK_LAUNCH("rmsnorm_cached (warp per row)");
      return 0;
    });
  }
  if (Nc <= static_cast<i64>(BLOCK_THREADS) * KB * N) {
    constexpr int BT = BLOCK_THREADS;
    const unsigned grid = grid_for(R, 1, sms);
    return with_pack_count<KB>((Nc + BT * N - 1) / (static_cast<i64>(BT) * N), [&](auto kc) {
      constexpr int KP = decltype(kc)::value;
      if constexpr (VEC)
        rmsnorm_cached<T, BT, BT, N, KP><<<grid, BT, 0, st>>>(x, w, y, R, Ni, eps);
      else
        rmsnorm_cached<T, BT, BT, 1, KP * N><<<grid, BT, 0, st>>>(x, w, y, R, Ni, eps);
      VBK_CUDA_CHECK_LAUNCH("rmsnorm_cached (block per row)");
      return 0;
    });
  }
  constexpr int BT = LONG_BLOCK_THREADS;
  constexpr int step_cap = cache_limit(BT) / 2;  // floats in flight per thread per step
  const unsigned grid = grid_for(R, 1, sms);
  if constexpr (VEC) {
    constexpr int UU = UNROLL * N <= step_cap ? UNROLL : (step_cap / N > 0 ? step_cap / N : 1);
    rmsnorm_stream<T, BT, N, UU><<<grid, BT, 0, st>>>(x, w, y, R, Nc, eps);
  } else {
    constexpr int UU = UNROLL * N <= step_cap / 2 ? UNROLL * N : step_cap / 2;
    rmsnorm_stream<T, BT, 1, UU><<<grid, BT, 0, st>>>(x, w, y, R, Nc, eps);
  }
  VBK_CUDA_CHECK_LAUNCH("rmsnorm_stream");
  return 0;
}

/// Vector path when the row length is a multiple of the vector width and every pointer is
/// aligned to it (then every row is); coalesced scalars otherwise.
template <typename T>
int run_rmsnorm(const T* x, const T* w, T* y, i64 R, i64 Nc, float eps, int sms,
                  cudaStream_t st) {
  constexpr int N = vec_elems<T>();
  constexpr std::size_t VB = sizeof(T) * N;
  const bool vec = N > 1 && Nc % N == 0 && aligned_to(x, VB) && aligned_to(y, VB) &&
                   aligned_to(w, VB);
  return vec ? run_rmsnorm_as<T, true>(x, w, y, R, Nc, eps, sms, st)
             : run_rmsnorm_as<T, false>(x, w, y, R, Nc, eps, sms, st);
}

}  // namespace

/// rmsnorm: inputs {x[M,N], weight[N]}, outputs {y[M,N]} (all one dtype),
/// attributes {eps}. Launches on `stream` only and does not synchronize. Returns 0, or 1 with
/// vb_kernel_last_error() naming the bad argument or the launch error.
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(inputs, n_inputs, 2, outputs, n_outputs, 1, n_attrs, 1)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  DLTensor& ty = outputs[0];
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [M,N], got %d", tx.ndim);
  const i64 M = tx.shape[0], Nc = tx.shape[1];  // N = Nc (N is the vector width here)
  if (int e = vbk::check_shape(tx, "x", {M, Nc})) return e;
  if (int e = vbk::check_shape(inputs[1], "weight", {Nc})) return e;
  if (int e = vbk::check_shape(ty, "y", {M, Nc})) return e;
  const float eps = static_cast<float>(attrs[0]);
  if (!(eps >= 0.0f) || eps == __builtin_huge_valf())
    return vbk::fail("eps must be finite and >= 0 (got %g)", attrs[0]);
  if (M == 0 || Nc == 0) return 0;
  if (Nc > INT_MAX / 2) return vbk::fail("x: row length %lld is too long (at most %d)", Nc, INT_MAX / 2);
  int sms = 0;
  if (int e = sm_count(tx, &sms)) return e;
  const cudaStream_t st = vbk::as_stream(stream);
  return vbk::dispatch_float(vbk::dtype_of(tx), [&](auto tag) {
    using T = decltype(tag);
    return run_rmsnorm<T>(static_cast<const T*>(vbk::data_ptr(tx)),
                          static_cast<const T*>(vbk::data_ptr(inputs[1])),
                          static_cast<T*>(vbk::data_ptr(ty)), M, Nc, eps, sms, st);
  });
}
