// rotary_embedding (CUDA starter): RoPE (Su et al., "RoFormer", 2021) on x[B,H,S,D] with
// tables cos[S,D/2], sin[S,D/2] indexed by the position s (DESIGN §2).
//   interleaved = 0 (half-split; GPT-NeoX, HF LLaMA rotate_half), for i < D/2:
//     y[i] = x[i]·c[i] - x[i+D/2]·s[i],  y[i+D/2] = x[i+D/2]·c[i] + x[i]·s[i]
//   interleaved = 1 (GPT-J / Meta LLaMA pairs):
//     y[2i] = x[2i]·c[i] - x[2i+1]·s[i],  y[2i+1] = x[2i+1]·c[i] + x[2i]·s[i]
//
// Inputs: x[B,H,S,D], cos[S,D/2], sin[S,D/2]. Outputs: y[B,H,S,D] (all one dtype). Attributes:
// interleaved (0). fp16 / bf16 / fp32; math in fp32, the output rounded once (RNE).
//
// Elementwise, one pass: a row (b,h,s) of D elements is handled by TPR threads (a power of two
// <= 32, chosen from D at run time), BLOCK_THREADS/TPR rows per block, rows grid-strided over
// a 1-D grid. Half-split: a thread takes one vector of the first half, the matching vector of
// the second half and one vector each of cos/sin, and writes two vectors. Interleaved: one
// vector of x (VEC pairs/2 ... NV/2 pairs) and NV/2 table entries. 16-byte vectors when D/2 (half-split)
// or D (interleaved) is a multiple of the vector width and the pointers are aligned; else
// scalar pairs. The position is row % S, in 32-bit arithmetic whenever the row count allows.

#include "vb_cuda.cuh"

#include <climits>
#include <cstdint>

// @vb-param VEC_BYTES 16 {4,8,16}  bytes per vector access of x/y (16 = LDG.128)
#ifndef VEC_BYTES
#define VEC_BYTES 16
#endif
// @vb-param BLOCK_THREADS 256 {64,128,256,512,1024}  threads per block
#ifndef BLOCK_THREADS
#define BLOCK_THREADS 256
#endif
// @vb-param MAX_BLOCKS_PER_SM 128 {2,4,8,16,32,64,128}  grid cap = SMs x this (rows are grid-strided)
#ifndef MAX_BLOCKS_PER_SM
#define MAX_BLOCKS_PER_SM 128
#endif
// MAX_BLOCKS_PER_SM 128 (16 until issue 15): at 8192 rows of 8192 the grid is one block per row
// (group), so the block scheduler balances the tail a row at a time. With 16, 2112 grid-strided
// blocks of 3-4 rows ran in 3.2 waves where 5 blocks fit per SM (softmax, reduce) or 5.3 where
// 3 fit (layernorm): the last partial wave ran one block per SM for 3-4 rows, ~5-10 % of the time.
// @vb-param MIN_BLOCKS 1 {1,2,4,6}  resident blocks per SM asked of ptxas (__launch_bounds__; 8 spills)
// Default 1: MIN_BLOCKS 6 measured 50.1 us against 50.2 us for 1 (H100, bf16 b4h32s2048d128,
// bench/peers_variants.sh 2026-12-07 15:31Z): no gain for the register cap, so none is asked.
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

#include "vb_cuda_rows.cuh"

namespace {

static_assert(VEC_BYTES == 4 || VEC_BYTES == 8 || VEC_BYTES == 16, "VEC_BYTES must be 4, 8 or 16");
static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= 32 && BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS <= 32, "MIN_BLOCKS must be in [1, 32]");

/// Minimum resident blocks per SM for __launch_bounds__: MIN_BLOCKS, but never more than the
/// 2048 threads an SM holds (sm_80 / sm_90). MIN_BLOCKS 6 at 256 threads caps ptxas at 40
/// registers: 1536 threads per SM, 1.5x the bytes in flight of the 54-register build (4 blocks,
/// 1024 threads, 32 KiB of x per SM: about what Little's law asks at 3 TB/s, no margin).
/// MIN_BLOCKS 8 (32 registers) spills the half-split vector kernels.
constexpr int kMinBlocks =
    MIN_BLOCKS * BLOCK_THREADS <= 2048 ? MIN_BLOCKS : (2048 / BLOCK_THREADS > 0 ? 2048 / BLOCK_THREADS : 1);

/// Elements of T per vector access of x (VEC_BYTES / sizeof(T), at least 2: a whole pair; the
/// vec_elems of vb_cuda_rows.cuh allows 1).
template <typename T>
constexpr int pair_vec_elems() {
  return VEC_BYTES / static_cast<int>(sizeof(T)) > 2 ? VEC_BYTES / static_cast<int>(sizeof(T)) : 2;
}

/// Loads N elements at p and widens them to float: one vector access when VEC (p aligned to
/// N*sizeof(T)), else N scalar accesses.
template <typename T, int N, bool VEC>
__device__ __forceinline__ void load_n(const T* __restrict__ p, float (&f)[N]) {
  if constexpr (VEC) {
    load_vec<T, N>(p, f);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = vbk::to_f32(p[j]);
  }
}

/// Rounds N floats to T (RNE) and stores them at p (see load_n).
template <typename T, int N, bool VEC>
__device__ __forceinline__ void store_n(T* __restrict__ p, const float (&f)[N]) {
  if constexpr (VEC) {
    store_vec<T, N>(p, f);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) p[j] = vbk::from_f32<T>(f[j]);
  }
}

/// Half-split RoPE. Row r = (b,h,s) flattened, position r % S. Each thread handles chunks
/// q (q < nq = half/NP) of NP elements: x[q*NP..] with x[half + q*NP..] and the tables at
/// [s, q*NP..]. TPR threads per row, BLOCK_THREADS/TPR rows per block.
template <typename T, int NP, bool VEC>
__global__ void __launch_bounds__(BLOCK_THREADS, kMinBlocks)
    rope_half(const T* __restrict__ x, const T* __restrict__ cs, const T* __restrict__ sn,
              T* __restrict__ y, i64 rows, int S, int half, int tpr_log2) {
  const int tpr = 1 << tpr_log2;
  const int lane = static_cast<int>(threadIdx.x) & (tpr - 1);
  const int rpb = BLOCK_THREADS >> tpr_log2;
  const int nq = half / NP;
  const bool fits32 = rows <= 0xffffffffLL;
  const i64 D = 2LL * half;
  for (i64 row = static_cast<i64>(blockIdx.x) * rpb + (threadIdx.x >> tpr_log2); row < rows;
       row += static_cast<i64>(gridDim.x) * rpb) {
    const i64 pos = fits32 ? static_cast<i64>(static_cast<unsigned>(row) % static_cast<unsigned>(S))
                           : row % S;
    const T* xr = x + row * D;
    T* yr = y + row * D;
    const T* cr = cs + pos * half;
    const T* sr = sn + pos * half;
    for (int q = lane; q < nq; q += tpr) {
      const int i = q * NP;
      float a[NP], b[NP], c[NP], s[NP];
      load_n<T, NP, VEC>(xr + i, a);
      load_n<T, NP, VEC>(xr + half + i, b);
      load_n<T, NP, VEC>(cr + i, c);
      load_n<T, NP, VEC>(sr + i, s);
      float ya[NP], yb[NP];
#pragma unroll
      for (int j = 0; j < NP; ++j) {
        ya[j] = a[j] * c[j] - b[j] * s[j];
        yb[j] = b[j] * c[j] + a[j] * s[j];
      }
      store_n<T, NP, VEC>(yr + i, ya);
      store_n<T, NP, VEC>(yr + half + i, yb);
    }
  }
}

/// Interleaved (GPT-J) RoPE. Each thread handles chunks q (q < nq = D/NP) of NP elements of x
/// (NP/2 pairs) and the NP/2 table entries at [s, q*NP/2..].
template <typename T, int NP, bool VEC>
__global__ void __launch_bounds__(BLOCK_THREADS, kMinBlocks)
    rope_interleaved(const T* __restrict__ x, const T* __restrict__ cs, const T* __restrict__ sn,
                     T* __restrict__ y, i64 rows, int S, int half, int tpr_log2) {
  static_assert(NP % 2 == 0, "whole pairs");
  constexpr int NH = NP / 2;
  const int tpr = 1 << tpr_log2;
  const int lane = static_cast<int>(threadIdx.x) & (tpr - 1);
  const int rpb = BLOCK_THREADS >> tpr_log2;
  const i64 D = 2LL * half;
  const int nq = static_cast<int>(D / NP);
  const bool fits32 = rows <= 0xffffffffLL;
  for (i64 row = static_cast<i64>(blockIdx.x) * rpb + (threadIdx.x >> tpr_log2); row < rows;
       row += static_cast<i64>(gridDim.x) * rpb) {
    const i64 pos = fits32 ? static_cast<i64>(static_cast<unsigned>(row) % static_cast<unsigned>(S))
                           : row % S;
    const T* xr = x + row * D;
    T* yr = y + row * D;
    const T* cr = cs + pos * half;
    const T* sr = sn + pos * half;
    for (int q = lane; q < nq; q += tpr) {
      float v[NP], c[NH], s[NH];
      load_n<T, NP, VEC>(xr + q * NP, v);
      load_n<T, NH, VEC>(cr + q * NH, c);
      load_n<T, NH, VEC>(sr + q * NH, s);
      float o[NP];
#pragma unroll
      for (int j = 0; j < NH; ++j) {
        o[2 * j] = v[2 * j] * c[j] - v[2 * j + 1] * s[j];
        o[2 * j + 1] = v[2 * j + 1] * c[j] + v[2 * j] * s[j];
      }
      store_n<T, NP, VEC>(yr + q * NP, o);
    }
  }
}

// ---- host side ---------------------------------------------------------------------------------

/// log2 of the threads per row: the smallest power of two >= chunks per row, at most 32.
int tpr_log2_for(i64 chunks) {
  int l = 0;
  while (l < 5 && (1LL << l) < chunks) ++l;
  return l;
}

template <typename T>
int run_rope(const T* x, const T* cs, const T* sn, T* y, i64 rows, int S, int half,
             bool interleaved, int sms, cudaStream_t st) {
  constexpr int NV = pair_vec_elems<T>();
  const std::size_t xa = sizeof(T) * NV;
  const std::size_t ta = interleaved ? sizeof(T) * NV / 2 : sizeof(T) * NV;
  const bool vec = (interleaved ? (2LL * half) % NV == 0 : half % NV == 0) && aligned_to(x, xa) &&
                   aligned_to(y, xa) && aligned_to(cs, ta) && aligned_to(sn, ta);
  // Chunks per row: vectors (vec) or single pairs.
  const i64 chunks = interleaved ? (vec ? 2LL * half / NV : half) : (vec ? half / NV : half);
  const int l2 = tpr_log2_for(chunks);
  const i64 rpb = BLOCK_THREADS >> l2;
  const i64 need = (rows + rpb - 1) / rpb;
  const i64 cap = static_cast<i64>(sms) * MAX_BLOCKS_PER_SM;
  const unsigned grid = static_cast<unsigned>(need < cap ? need : cap);
  if (interleaved) {
    if (vec)
      rope_interleaved<T, NV, true><<<grid, BLOCK_THREADS, 0, st>>>(x, cs, sn, y, rows, S, half, l2);
    else
      rope_interleaved<T, 2, false><<<grid, BLOCK_THREADS, 0, st>>>(x, cs, sn, y, rows, S, half, l2);
  } else {
    if (vec)
      rope_half<T, NV, true><<<grid, BLOCK_THREADS, 0, st>>>(x, cs, sn, y, rows, S, half, l2);
    else
      rope_half<T, 1, false><<<grid, BLOCK_THREADS, 0, st>>>(x, cs, sn, y, rows, S, half, l2);
  }
  VBK_CUDA_CHECK_LAUNCH("rotary_embedding");
  return 0;
}

}  // namespace

/// rotary_embedding: inputs {x[B,H,S,D], cos[S,D/2], sin[S,D/2]}, outputs {y[B,H,S,D]} (all
/// one dtype), attributes {interleaved (0 or 1)}. Launches on `stream` only and does not
/// synchronize. Returns 0, or 1 with vb_kernel_last_error() naming the bad argument or the
/// launch error.
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(inputs, n_inputs, 3, outputs, n_outputs, 1, n_attrs, 1)) return e;
  if (int e = vbk::check_same_dtype(inputs, n_inputs, outputs, n_outputs)) return e;
  const DLTensor& tx = inputs[0];
  DLTensor& ty = outputs[0];
  if (tx.ndim != 4) return vbk::fail("x: expected 4 dimensions [B,H,S,D], got %d", tx.ndim);
  const i64 B = tx.shape[0], H = tx.shape[1], S = tx.shape[2], D = tx.shape[3];
  if (D % 2 != 0) return vbk::fail("x: head dim D = %lld must be even", D);
  const i64 h = D / 2;
  if (int e = vbk::check_shape(tx, "x", {B, H, S, D})) return e;
  if (int e = vbk::check_shape(inputs[1], "cos", {S, h})) return e;
  if (int e = vbk::check_shape(inputs[2], "sin", {S, h})) return e;
  if (int e = vbk::check_shape(ty, "y", {B, H, S, D})) return e;
  if (attrs[0] != 0.0 && attrs[0] != 1.0)
    return vbk::fail("interleaved must be 0 or 1 (got %g)", attrs[0]);
  const bool interleaved = attrs[0] != 0.0;
  const i64 rows = B * H * S;
  if (rows == 0 || D == 0) return 0;
  if (S > INT_MAX || D > INT_MAX / 2)
    return vbk::fail("x: S = %lld or D = %lld is too large (at most %d, %d)", S, D, INT_MAX, INT_MAX / 2);
  int sms = 0;
  if (int e = sm_count(tx, &sms)) return e;
  const cudaStream_t st = vbk::as_stream(stream);
  return vbk::dispatch_float(vbk::dtype_of(tx), [&](auto tag) {
    using T = decltype(tag);
    return run_rope<T>(static_cast<const T*>(vbk::data_ptr(tx)),
                       static_cast<const T*>(vbk::data_ptr(inputs[1])),
                       static_cast<const T*>(vbk::data_ptr(inputs[2])),
                       static_cast<T*>(vbk::data_ptr(ty)), rows, static_cast<int>(S),
                       static_cast<int>(h), interleaved, sms, st);
  });
}
