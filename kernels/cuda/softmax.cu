// softmax (CUDA starter): y[R,C] = softmax(x[R,C]) over the last dim, max-subtracted (DESIGN §2).
//
// Inputs: x[R,C]. Outputs: y[R,C] (same dtype). No attributes. fp16 / bf16 / fp32; all math
// in fp32, the output rounded once (RNE). PyTorch semantics: -inf entries give 0, a row of all
// -inf gives a row of NaN (exp(-inf - -inf) = NaN).
//
// Three row strategies, chosen at run time by the row length C:
//   warp per row    C <= WARP_MAX_COLS: one warp per row, WARP_BLOCK_THREADS/32 rows per block.
//   block per row   C fits in the registers of BLOCK_THREADS threads (up to 64 floats each).
// Both keep the row in registers: ONE read of x, one write of y (max, sum-exp and the output
// are computed from registers; reductions by warp shuffles, plus shared memory across warps).
//   streaming       longer rows (vocabulary rows): one block of LONG_BLOCK_THREADS per row;
//                   pass 1 is an online softmax (running max and sum, rescaled once per UNROLL
//                   packs), pass 2 re-reads the row (usually from L2) and writes y.
// Loads and stores are 16-byte vectors (VEC_BYTES) when the row length is a multiple of the
// vector width and both pointers are aligned; otherwise coalesced scalar accesses. Rows are
// grid-strided over a 1-D grid (no gridDim.y), so any row count works. Every reduction has a
// fixed order: the results are bitwise deterministic.

#include "vb_cuda.cuh"

#include <climits>
#include <cstdint>

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
// @vb-param MAX_BLOCKS_PER_SM 128 {2,4,8,16,32,64,128}  grid cap = SMs x this (rows are grid-strided)
#ifndef MAX_BLOCKS_PER_SM
#define MAX_BLOCKS_PER_SM 128
#endif
// MAX_BLOCKS_PER_SM 128 (16 until issue 15): at 8192 rows of 8192 the grid is one block per row
// (group), so the block scheduler balances the tail a row at a time. With 16, 2112 grid-strided
// blocks of 3-4 rows ran in 3.2 waves where 5 blocks fit per SM (softmax, reduce) or 5.3 where
// 3 fit (layernorm): the last partial wave ran one block per SM for 3-4 rows, ~5-10 % of the time.

#include "vb_cuda_rows.cuh"

namespace {

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

// ---- register-cached rows (warp per row or block per row) ------------------------------------

/// One row per group of G threads (BT threads per block, BT/G rows per block). Thread t holds
/// packs p = k*G + t (k < KP) of NP consecutive elements: with NP > 1 one vector per pack, with
/// NP = 1 coalesced scalars. Requires C <= G*KP*NP and, for NP > 1, C % NP == 0 and aligned
/// rows.
template <typename T, int G, int BT, int NP, int KP>
__global__ void __launch_bounds__(BT, 1)
    softmax_cached(const T* __restrict__ x, T* __restrict__ y, i64 R, int C) {
  static_assert(BT % G == 0, "block must hold whole groups");
  constexpr int RPB = BT / G;
  __shared__ float red[64];
  int phase = 0;
  const int t = static_cast<int>(threadIdx.x) % G;
  const int n_packs = C / NP;
  for (i64 row = static_cast<i64>(blockIdx.x) * RPB + threadIdx.x / G; row < R;
       row += static_cast<i64>(gridDim.x) * RPB) {
    const T* xr = x + row * C;
    T* yr = y + row * C;
    float v[KP][NP];
#pragma unroll
    for (int k = 0; k < KP; ++k) {  // all loads first: KP independent loads in flight
      const int p = k * G + t;
      if (p < n_packs) {
        load_pack<T, NP>(xr + p * NP, v[k]);
      } else {
#pragma unroll
        for (int j = 0; j < NP; ++j) v[k][j] = kNegInf;
      }
    }
    float m = kNegInf;
#pragma unroll
    for (int k = 0; k < KP; ++k)
#pragma unroll
      for (int j = 0; j < NP; ++j) m = fmaxf(m, v[k][j]);
    m = group_max<G>(m, red, phase);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < KP; ++k) {
      if (k * G + t < n_packs) {
#pragma unroll
        for (int j = 0; j < NP; ++j) {
          // exp(x - m) as 2^((x - m) * log2 e) in one MUFU.EX2 (ex2_ftz: outputs below 2^-126
          // flush to 0, 1e-38 absolute). All -inf row: exp(NaN) = NaN, as PyTorch.
          v[k][j] = ex2_ftz(__fmul_rn(v[k][j] - m, kLog2e));
          s += v[k][j];
        }
      }
    }
    s = group_sum<G>(s, red, phase);
    const float inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < KP; ++k) {
      const int p = k * G + t;
      if (p < n_packs) {
#pragma unroll
        for (int j = 0; j < NP; ++j) v[k][j] *= inv;
        store_pack<T, NP>(yr + p * NP, v[k]);
      }
    }
  }
}

// ---- streamed long rows ------------------------------------------------------------------------

/// One row per block of BT threads; packs of NP elements (vector when NP > 1), UU packs per
/// thread per step. Pass 1: online max / sum-exp; pass 2: y = exp(x - m) / s.
template <typename T, int BT, int NP, int UU>
__global__ void __launch_bounds__(BT, 1)
    softmax_stream(const T* __restrict__ x, T* __restrict__ y, i64 R, i64 C) {
  __shared__ float sm_m[32], sm_s[32];
  const int t = static_cast<int>(threadIdx.x);
  const i64 n_packs = C / NP;
  for (i64 row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * C;
    T* yr = y + row * C;
    float m = kNegInf, s = 0.0f;
    for (i64 base = 0; base < n_packs; base += static_cast<i64>(UU) * BT) {
      float v[UU][NP];
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        const i64 p = base + static_cast<i64>(u) * BT + t;
        if (p < n_packs) {
          load_pack<T, NP>(xr + p * NP, v[u]);
        } else {
#pragma unroll
          for (int j = 0; j < NP; ++j) v[u][j] = kNegInf;
        }
      }
      float bm = kNegInf;
#pragma unroll
      for (int u = 0; u < UU; ++u)
#pragma unroll
        for (int j = 0; j < NP; ++j) bm = fmaxf(bm, v[u][j]);
      const float mn = fmaxf(m, bm);
      if (mn != kNegInf) {  // else every element so far is -inf: s stays 0
        float acc = s * expf(m - mn);
#pragma unroll
        for (int u = 0; u < UU; ++u)
#pragma unroll
          for (int j = 0; j < NP; ++j) acc += expf(v[u][j] - mn);
        s = acc;
        m = mn;
      }
    }
    // Block reduction of (m, s): butterfly in the warp, then every thread merges the warps'
    // states in warp order (fixed order, identical in every thread).
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
      const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
      merge_ms(m, s, m2, s2);
    }
    if ((t & 31) == 0) {
      sm_m[t >> 5] = m;
      sm_s[t >> 5] = s;
    }
    __syncthreads();
    m = sm_m[0];
    s = sm_s[0];
#pragma unroll
    for (int w = 1; w < BT / 32; ++w) merge_ms(m, s, sm_m[w], sm_s[w]);
    __syncthreads();  // sm_m/sm_s are rewritten by the next row
    const float inv = 1.0f / s;  // all -inf row: m = -inf, and exp(x - m) below is NaN
    for (i64 base = 0; base < n_packs; base += static_cast<i64>(UU) * BT) {
      float v[UU][NP];
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        const i64 p = base + static_cast<i64>(u) * BT + t;
        if (p < n_packs) load_pack<T, NP>(xr + p * NP, v[u]);
      }
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        const i64 p = base + static_cast<i64>(u) * BT + t;
        if (p < n_packs) {
#pragma unroll
          for (int j = 0; j < NP; ++j) v[u][j] = expf(v[u][j] - m) * inv;
          store_pack<T, NP>(yr + p * NP, v[u]);
        }
      }
    }
  }
}

// ---- host side ---------------------------------------------------------------------------------

/// Launches softmax_cached with KP packs (vector) or KP*N scalars per thread.
template <typename T, int G, int BT, int KP, bool VEC>
int launch_cached_k(const T* x, T* y, i64 R, int C, int sms, cudaStream_t st) {
  constexpr int N = vec_elems<T>();
  const unsigned grid = grid_for(R, BT / G, sms);
  if constexpr (VEC) {
    softmax_cached<T, G, BT, N, KP><<<grid, BT, 0, st>>>(x, y, R, C);
  } else {
    softmax_cached<T, G, BT, 1, KP * N><<<grid, BT, 0, st>>>(x, y, R, C);
  }
  VBK_CUDA_CHECK_LAUNCH("softmax_cached");
  return 0;
}

/// Launches a cached row with the smallest power-of-two pack count KP with G*KP*N >= C (the
/// caller checked that C fits: C <= G * pow2_floor(max_packs) * N).
template <typename T, int G, int BT, bool VEC>
int launch_cached(const T* x, T* y, i64 R, int C, int sms, cudaStream_t st) {
  constexpr i64 per_pack_round = static_cast<i64>(G) * vec_elems<T>();
  constexpr int KF = pow2_floor(max_packs<T, BT, VEC>());
  const i64 per_thread = (static_cast<i64>(C) + per_pack_round - 1) / per_pack_round;
  if (per_thread <= 1) return launch_cached_k<T, G, BT, 1, VEC>(x, y, R, C, sms, st);
  if constexpr (KF >= 2)
    if (per_thread <= 2) return launch_cached_k<T, G, BT, 2, VEC>(x, y, R, C, sms, st);
  if constexpr (KF >= 4)
    if (per_thread <= 4) return launch_cached_k<T, G, BT, 4, VEC>(x, y, R, C, sms, st);
  if constexpr (KF >= 8)
    if (per_thread <= 8) return launch_cached_k<T, G, BT, 8, VEC>(x, y, R, C, sms, st);
  if constexpr (KF >= 16)
    if (per_thread <= 16) return launch_cached_k<T, G, BT, 16, VEC>(x, y, R, C, sms, st);
  return vbk::fail("internal error: a row of %d elements does not fit the register cache", C);
}

template <typename T, bool VEC>
int run_softmax_as(const T* x, T* y, i64 R, i64 C, int sms, cudaStream_t st) {
  constexpr int N = vec_elems<T>();
  constexpr i64 warp_cap = 32LL * pow2_floor(max_packs<T, WARP_BLOCK_THREADS, VEC>()) * N;
  constexpr i64 block_cap =
      static_cast<i64>(BLOCK_THREADS) * pow2_floor(max_packs<T, BLOCK_THREADS, VEC>()) * N;
  if (C <= WARP_MAX_COLS && C <= warp_cap)
    return launch_cached<T, 32, WARP_BLOCK_THREADS, VEC>(x, y, R, static_cast<int>(C), sms, st);
  if (C <= block_cap)
    return launch_cached<T, BLOCK_THREADS, BLOCK_THREADS, VEC>(x, y, R, static_cast<int>(C), sms, st);
  const unsigned grid = grid_for(R, 1, sms);
  // Elements in flight per thread per step: UNROLL vectors, at most half the register cache.
  constexpr int step_cap = cache_limit(LONG_BLOCK_THREADS) / 2;
  if constexpr (VEC) {
    constexpr int UU = UNROLL * N <= step_cap ? UNROLL : (step_cap / N > 0 ? step_cap / N : 1);
    softmax_stream<T, LONG_BLOCK_THREADS, N, UU><<<grid, LONG_BLOCK_THREADS, 0, st>>>(x, y, R, C);
  } else {
    constexpr int UU = UNROLL * N <= step_cap / 2 ? UNROLL * N : step_cap / 2;
    softmax_stream<T, LONG_BLOCK_THREADS, 1, UU><<<grid, LONG_BLOCK_THREADS, 0, st>>>(x, y, R, C);
  }
  VBK_CUDA_CHECK_LAUNCH("softmax_stream");
  return 0;
}

/// Vector path when the row length is a multiple of the vector width and both pointers are
/// aligned to it (then every row is); coalesced scalars otherwise.
template <typename T>
int run_softmax(const T* x, T* y, i64 R, i64 C, int sms, cudaStream_t st) {
  constexpr int N = vec_elems<T>();
  const bool vec = N > 1 && C % N == 0 && aligned_to(x, sizeof(T) * N) && aligned_to(y, sizeof(T) * N);
  return vec ? run_softmax_as<T, true>(x, y, R, C, sms, st) : run_softmax_as<T, false>(x, y, R, C, sms, st);
}

}  // namespace

/// softmax over the last dim: inputs {x[R,C]}, outputs {y[R,C]} (same dtype), no attributes.
/// Launches on `stream` only and does not synchronize. Returns 0, or 1 with
/// vb_kernel_last_error() naming the bad argument or the launch error.
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)attrs;
  if (int e = vbk::check_cuda_args(inputs, n_inputs, 1, outputs, n_outputs, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  DLTensor& ty = outputs[0];
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [R,C], got %d", tx.ndim);
  const i64 R = tx.shape[0], C = tx.shape[1];
  if (int e = vbk::check_shape(tx, "x", {R, C})) return e;
  if (int e = vbk::check_shape(ty, "y", {R, C})) return e;
  if (R == 0 || C == 0) return 0;
  if (C > INT_MAX / 2) return vbk::fail("x: row length %lld is too long (at most %d)", C, INT_MAX / 2);
  int sms = 0;
  if (int e = sm_count(tx, &sms)) return e;
  const cudaStream_t st = vbk::as_stream(stream);
  return vbk::dispatch_float(vbk::dtype_of(tx), [&](auto tag) {
    using T = decltype(tag);
    return run_softmax<T>(static_cast<const T*>(vbk::data_ptr(tx)), static_cast<T*>(vbk::data_ptr(ty)),
                          R, C, sms, st);
  });
}
