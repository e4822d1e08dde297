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
// @vb-param MAX_BLOCKS_PER_SM 128 {2,4,8,16,32,64,128}  grid cap = SMs x this (rows are grid-strided)
#ifndef MAX_BLOCKS_PER_SM
#define MAX_BLOCKS_PER_SM 128
#endif
// MAX_BLOCKS_PER_SM 128 (16 until issue 15): at 8192 rows of 8192 the grid is one block per row
// (group), so the block scheduler balances the tail a row at a time. With 16, 2112 grid-strided
// blocks of 3-4 rows ran in 3.2 waves where 5 blocks fit per SM (softmax, reduce) or 5.3 where
// 3 fit (layernorm): the last partial wave ran one block per SM for 3-4 rows, ~5-10 % of the time.
// @vb-param MIN_BLOCKS 1 {1,2,3,4}  resident blocks per SM asked of ptxas for vector rows of <= 32 floats per thread (5+ spill)
// Default 1: with MIN_BLOCKS 4 this starter ran 104.8 us against 95.1 us before (H100, bf16
// 8192x8192, peers tables of 2026-12-07 15:31Z and 13:10Z), as layernorm's 4 lost to 1 side by side.
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

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
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS <= 32, "MIN_BLOCKS must be in [1, 32]");

/// Second __launch_bounds__ argument (minimum resident blocks per SM) of a register-cached
/// kernel of BT threads caching KP packs of NP elements per thread: MIN_BLOCKS (at most 2048
/// threads per SM) for vector packs holding <= 32 floats, else 1 (scalar packs and larger
/// caches need their registers). At 256 threads MIN_BLOCKS 4 caps ptxas at 64 registers: four
/// rows of 8192 in flight per SM where an 80-register build held three.
template <int BT, int NP, int KP>
constexpr int cached_min_blocks() {
  constexpr int by_threads = 2048 / BT > 0 ? 2048 / BT : 1;
  constexpr int want = MIN_BLOCKS < by_threads ? MIN_BLOCKS : by_threads;
  return (NP > 1 && NP * KP <= 32) ? want : 1;
}

// ---- register-cached rows (warp per row or block per row) ------------------------------------

/// One row per group of G threads (BT per block). Thread t holds packs p = k*G + t (k < KP) of
/// NP consecutive elements (NP > 1: one vector each; NP = 1: coalesced scalars). Requires
/// N <= G*KP*NP and, for NP > 1, N % NP == 0 and aligned rows and weight.
template <typename T, int G, int BT, int NP, int KP>
__global__ void __launch_bounds__(BT, (cached_min_blocks<BT, NP, KP>()))
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
