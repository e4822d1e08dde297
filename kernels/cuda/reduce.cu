// reduce (CUDA starter): y[M] = Σ_j x[M,N] over the last dim, fp32 accumulation, output in the
// input dtype (DESIGN §2).
//
// Inputs: x[M,N]. Outputs: y[M] (same dtype). No attributes. fp16 / bf16 / fp32.
//
// One pass over x. A row goes to one warp (N <= WARP_MAX_COLS, WARP_BLOCK_THREADS/32 rows per
// block), to a block of BLOCK_THREADS (N <= BLOCK_MAX_COLS) or to a block of
// LONG_BLOCK_THREADS (longer rows). Each thread streams its packs with UNROLL independent
// 16-byte loads per step into fp32 lane accumulators through a pairwise tree per step (short
// dependency chains: accurate and latency tolerant), sums the lanes as a fixed tree, and the group
// reduces by warp shuffles plus shared memory in a fixed order: bitwise deterministic. Rows
// whose length or pointer does not allow vectors use coalesced scalar loads. Rows are
// grid-strided over a 1-D grid.

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
// @vb-param BLOCK_MAX_COLS 16384 {4096,16384,65536}  longest row for a BLOCK_THREADS block
#ifndef BLOCK_MAX_COLS
#define BLOCK_MAX_COLS 16384
#endif
// @vb-param BLOCK_THREADS 256 {64,128,256,512,1024}  threads per block for row-per-block rows
#ifndef BLOCK_THREADS
#define BLOCK_THREADS 256
#endif
// @vb-param LONG_BLOCK_THREADS 1024 {256,512,1024}  threads per block for rows over BLOCK_MAX_COLS
#ifndef LONG_BLOCK_THREADS
#define LONG_BLOCK_THREADS 1024
#endif
// @vb-param UNROLL 4 {1,2,4,8}  independent vector loads per thread per step
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
static_assert(UNROLL >= 1 && UNROLL <= 16, "UNROLL must be in [1, 16]");

/// Folds a[i + W] into a[i] for i < W, then W/2, ... (pairwise tree sum, fixed order; the
/// total ends in a[0]). Recursion on W keeps every index a compile-time constant.
template <int W, int n>
__device__ __forceinline__ void tree_fold(float (&a)[n]) {
  if constexpr (W > 0) {
#pragma unroll
    for (int i = 0; i < W; ++i) a[i] += a[i + W];
    tree_fold<W / 2>(a);
  }
}

/// The same over rows of NP lanes: v[i][j] += v[i + W][j] for i < W, then W/2, ...; the
/// lane-wise totals end in v[0].
template <int W, int m, int NP>
__device__ __forceinline__ void tree_fold(float (&v)[m][NP]) {
  if constexpr (W > 0) {
#pragma unroll
    for (int i = 0; i < W; ++i)
#pragma unroll
      for (int j = 0; j < NP; ++j) v[i][j] += v[i + W][j];
    tree_fold<W / 2>(v);
  }
}

/// One row per group of G threads (BT per block). Each thread sums the packs
/// p = base + u*G + t (UU per step, NP elements each): the UU loads of a step are added as a
/// pairwise tree, then into NP lane accumulators (chains of N / (G*UU*NP) adds).
template <typename T, int G, int BT, int NP, int UU>
__global__ void __launch_bounds__(BT, 1)
    reduce_rows(const T* __restrict__ x, T* __restrict__ y, i64 R, i64 N) {
  static_assert(BT % G == 0, "block must hold whole groups");
  static_assert((UU & (UU - 1)) == 0 && (NP & (NP - 1)) == 0, "power-of-two step");
  constexpr int RPB = BT / G;
  constexpr i64 STEP = static_cast<i64>(UU) * G;
  __shared__ float red[64];
  int phase = 0;
  const int t = static_cast<int>(threadIdx.x) % G;
  const i64 n_packs = N / NP;
  for (i64 row = static_cast<i64>(blockIdx.x) * RPB + threadIdx.x / G; row < R;
       row += static_cast<i64>(gridDim.x) * RPB) {
    const T* xr = x + row * N;
    float acc[NP];
#pragma unroll
    for (int j = 0; j < NP; ++j) acc[j] = 0.0f;
    for (i64 base = 0; base < n_packs; base += STEP) {
      float v[UU][NP];
#pragma unroll
      for (int u = 0; u < UU; ++u) {  // UU independent loads before the first add
        const i64 p = base + static_cast<i64>(u) * G + t;
        if (p < n_packs) {
          load_pack<T, NP>(xr + p * NP, v[u]);
        } else {
#pragma unroll
          for (int j = 0; j < NP; ++j) v[u][j] = 0.0f;
        }
      }
      tree_fold<UU / 2>(v);  // pairwise over the UU loads, then one add per lane
#pragma unroll
      for (int j = 0; j < NP; ++j) acc[j] += v[0][j];
    }
    tree_fold<NP / 2>(acc);
    const float s = group_sum<G>(acc[0], red, phase);
    if (t == 0) y[row] = vbk::from_f32<T>(s);
  }
}

// ---- host side ---------------------------------------------------------------------------------


/// Launches reduce_rows for groups of G threads in blocks of BT: vector packs when `vec`,
/// else scalars (as many loads per step as the vector path has elements, capped by registers).
template <typename T, int G, int BT>
int launch_rows(const T* x, T* y, i64 R, i64 N, bool vec, int sms, cudaStream_t st) {
  constexpr int NV = vec_elems<T>();
  constexpr int step_cap = cache_limit(BT) / 2;  // floats in flight per thread per step
  const unsigned grid = grid_for(R, BT / G, sms);
  if (vec) {
    constexpr int UU = pow2_floor(UNROLL * NV <= step_cap ? UNROLL : (step_cap / NV > 0 ? step_cap / NV : 1));
    reduce_rows<T, G, BT, NV, UU><<<grid, BT, 0, st>>>(x, y, R, N);
  } else {
    constexpr int UU = pow2_floor(UNROLL * NV <= step_cap / 2 ? UNROLL * NV : step_cap / 2);
    reduce_rows<T, G, BT, 1, UU><<<grid, BT, 0, st>>>(x, y, R, N);
  }
  VBK_CUDA_CHECK_LAUNCH("reduce_rows");
  return 0;
}

template <typename T>
int run_reduce(const T* x, T* y, i64 R, i64 N, int sms, cudaStream_t st) {
  constexpr int NV = vec_elems<T>();
  const bool vec = NV > 1 && N % NV == 0 && aligned_to(x, sizeof(T) * NV);
  if (N <= WARP_MAX_COLS) return launch_rows<T, 32, WARP_BLOCK_THREADS>(x, y, R, N, vec, sms, st);
  if (N <= BLOCK_MAX_COLS)
    return launch_rows<T, BLOCK_THREADS, BLOCK_THREADS>(x, y, R, N, vec, sms, st);
  return launch_rows<T, LONG_BLOCK_THREADS, LONG_BLOCK_THREADS>(x, y, R, N, vec, sms, st);
}

}  // namespace

/// reduce: inputs {x[M,N]}, outputs {y[M]} (same dtype), no attributes. N = 0 gives zeros.
/// Launches on `stream` only and does not synchronize. Returns 0, or 1 with
/// vb_kernel_last_error() naming the bad argument or the launch error.
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  (void)attrs;
  if (int e = vbk::check_cuda_args(inputs, n_inputs, 1, outputs, n_outputs, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  DLTensor& ty = outputs[0];
  if (tx.ndim != 2) return vbk::fail("x: expected 2 dimensions [M,N], got %d", tx.ndim);
  const i64 M = tx.shape[0], N = tx.shape[1];
  if (int e = vbk::check_shape(tx, "x", {M, N})) return e;
  if (int e = vbk::check_shape(ty, "y", {M})) return e;
  if (M == 0) return 0;
  const cudaStream_t st = vbk::as_stream(stream);
  if (N == 0) {  // empty sums: +0 in every dtype is all-zero bits
    const cudaError_t e = cudaMemsetAsync(vbk::data_ptr(ty), 0,
                                          static_cast<std::size_t>(M) * (ty.dtype.bits / 8), st);
    if (e != cudaSuccess) return vbk::fail("cudaMemsetAsync: %s", cudaGetErrorString(e));
    return 0;
  }
  int sms = 0;
  if (int e = sm_count(tx, &sms)) return e;
  return vbk::dispatch_float(vbk::dtype_of(tx), [&](auto tag) {
    using T = decltype(tag);
    return run_reduce<T>(static_cast<const T*>(vbk::data_ptr(tx)), static_cast<T*>(vbk::data_ptr(ty)),
                         M, N, sms, st);
  });
}
