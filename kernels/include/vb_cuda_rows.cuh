// vb_cuda_rows.cuh: device and host helpers shared by the memory-bound CUDA row starters
// (kernels/cuda/{softmax,layernorm,rmsnorm,cross_entropy,reduce,rotary_embedding}.cu).
//
// What it holds, all in the anonymous namespace of the including translation unit (every
// starter is one .so; nothing here has external linkage):
//   i64, kNegInf                         the row-index type; -inf as a float constant
//   vec_elems, cache_limit,
//   scalar_cache_limit                   elements per vector access; register budgets (floats)
//   bits_of, from_bits                   element <-> bit pattern
//   load_vec, store_vec,
//   load_pack, store_pack                ONE 2/4/8/16-byte access per call (__ldg loads; 8- and
//                                        16-byte stores in inline PTX, st.global.v2/v4.b32)
//   warp_max, warp_sum, group_max,
//   group_sum                            shuffle reductions; fixed order (bitwise deterministic)
//   kLog2e, ex2_ftz                      log2(e); 2^x in one MUFU.EX2 (flushes subnormals)
//   merge_ms                             online-softmax (max, sum-exp) state merge
//   load_step, step_pack                 UU-pack steps of a streamed row
//   aligned_to, grid_for, sm_count       host side: alignment test, grid size, SM count
//   max_packs (only if MAX_PACKS is defined), pow2_floor, with_pack_count
//                                        pack counts for register-cached rows
//
// Include it AFTER the starter's @vb-param block: it relies on the macros VEC_BYTES and
// MAX_BLOCKS_PER_SM being defined before it is included (and uses MAX_PACKS where that is
// defined). The @vb-param declarations stay in each starter (tools parse them there).

#pragma once

#include "vb_cuda.cuh"

#include <cstddef>
#include <cstdint>
#include <type_traits>

#ifndef VEC_BYTES
#error "vb_cuda_rows.cuh: define VEC_BYTES (the starter's @vb-param block) before including it"
#endif
#ifndef MAX_BLOCKS_PER_SM
#error "vb_cuda_rows.cuh: define MAX_BLOCKS_PER_SM (the starter's @vb-param block) before including it"
#endif

namespace {

using i64 = long long;

constexpr float kNegInf = -__builtin_huge_valf();

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

constexpr float kLog2e = 1.4426950408889634f;  // log2(e)

/// 2^x by PTX ex2.approx.ftz.f32: one MUFU.EX2 (relative error about 2^-22; PTX ISA, "ex2").
/// Results below 2^-126 are flushed to 0 (callers use it for exp(x - max) terms, where that
/// is far below every tolerance). expf(x) costs ~8 instructions (range reduction, FFMAs).
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// Merges the online-softmax state (m2, s2) into (m, s): m = max, s = Σ exp(x - m). A state
/// with m = -inf has s = 0 (nothing finite seen yet). Symmetric in its two arguments (no FMA
/// contraction), so butterfly lanes agree bitwise.
__device__ __forceinline__ void merge_ms(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == kNegInf) {
    s = __fadd_rn(s, s2);
  } else {
    s = __fadd_rn(__fmul_rn(s, expf(m - mn)), __fmul_rn(s2, expf(m2 - mn)));
  }
  m = mn;
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

/// Number of SMs of the device holding `t` (cudaDeviceGetAttribute: a cheap, cached query).
int sm_count(const DLTensor& t, int* sms) {
  const cudaError_t e =
      cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, t.device.device_id);
  if (e != cudaSuccess)
    return vbk::fail("cudaDeviceGetAttribute(SM count): %s", cudaGetErrorString(e));
  if (*sms < 1) *sms = 1;
  return 0;
}

#ifdef MAX_PACKS
/// Packs (of vec_elems<T>() elements) per thread available to a cached row in blocks of BT
/// threads: vectors (VEC) or as many coalesced scalars; at most MAX_PACKS, at least 1.
template <typename T, int BT, bool VEC>
constexpr int max_packs() {
  constexpr int by_regs = (VEC ? cache_limit(BT) : scalar_cache_limit(BT)) / vec_elems<T>();
  constexpr int m = MAX_PACKS < by_regs ? MAX_PACKS : by_regs;
  return m >= 1 ? m : 1;
}
#endif  // MAX_PACKS

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

}  // namespace
