// cross_entropy (CUDA starter): loss = mean over rows r with targets[r] != ignore_index of
// logsumexp(logits[r,:]) - logits[r, targets[r]] (torch.nn.functional.cross_entropy,
// reduction='mean') (DESIGN §2).
//
// Inputs: logits[B,V] (fp16 / bf16 / fp32), targets[B] (int64). Outputs: loss, a 0-d fp32
// tensor. Attributes: ignore_index (-100). All rows ignored (or B = 0) gives NaN (0/0), as
// PyTorch; a target outside [0, V) that is not ignore_index gives a NaN loss (the device cannot
// report it; nothing outside the row is read).
//
// Fused, one pass over the logits: a group per row (one warp for V <= WARP_MAX_COLS, else a
// block of BLOCK_THREADS) computes the running max and Σexp (online softmax, rescaled once
// per UNROLL vector loads), merges the threads' states in a fixed order, and its first thread
// reads the target logit and adds (max - x_t) + log(Σexp) to the block's running sum (rows in
// grid-stride order). Each block writes its partial sum and count to a fixed slot; a second,
// single-block kernel adds the slots in index order and divides. No atomics: the loss is
// bitwise deterministic. The slots are a __device__ array of this module, written before they
// are read in every call (nothing is carried between calls; concurrent calls from several host
// threads on different streams would share them).

#include "vb_cuda.cuh"

#include <climits>
#include <cmath>
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
// @vb-param BLOCK_THREADS 512 {256,512,1024}  threads per block for a vocabulary row
#ifndef BLOCK_THREADS
#define BLOCK_THREADS 512
#endif
// @vb-param UNROLL 4 {1,2,4,8}  independent vector loads per thread per step
#ifndef UNROLL
#define UNROLL 4
#endif
// @vb-param MAX_BLOCKS_PER_SM 16 {2,4,8,16,32}  grid cap = SMs x this (rows are grid-strided)
#ifndef MAX_BLOCKS_PER_SM
#define MAX_BLOCKS_PER_SM 16
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
static_assert(UNROLL >= 1 && UNROLL <= 16, "UNROLL must be in [1, 16]");

constexpr int kMaxBlocks = 4096;  // partial-sum slots (grid cap)
__device__ float g_part_sum[kMaxBlocks];
__device__ long long g_part_cnt[kMaxBlocks];

/// Per-row losses, summed per block into g_part_sum / g_part_cnt[blockIdx.x]. One row per
/// group of G threads (BT per block); packs p = base + u*G + t of NP elements, UU per step.
template <typename T, int G, int BT, int NP, int UU>
__global__ void __launch_bounds__(BT, 1)
    ce_rows(const T* __restrict__ x, const long long* __restrict__ tg, i64 R, i64 V,
            long long ignore) {
  static_assert(BT % G == 0, "block must hold whole groups");
  constexpr int RPB = BT / G;
  constexpr i64 STEP = static_cast<i64>(UU) * G;
  __shared__ float sm_m[32], sm_s[32], g_sum[32];
  __shared__ long long g_cnt[32];
  const int t = static_cast<int>(threadIdx.x) % G;
  const int gi = static_cast<int>(threadIdx.x) / G;
  const i64 n_packs = V / NP;
  float lsum = 0.0f;  // this group's losses, in row order (used by t == 0)
  long long lcnt = 0;
  for (i64 row = static_cast<i64>(blockIdx.x) * RPB + gi; row < R;
       row += static_cast<i64>(gridDim.x) * RPB) {
    const T* xr = x + row * V;
    float m = kNegInf, s = 0.0f;
    for (i64 base = 0; base < n_packs; base += STEP) {
      float v[UU][NP];
#pragma unroll
      for (int u = 0; u < UU; ++u) {  // UU independent loads before the first use
        const i64 p = base + static_cast<i64>(u) * G + t;
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
      if (mn != kNegInf) {  // else every logit so far is -inf: s stays 0
        float acc = s * expf(m - mn);
#pragma unroll
        for (int u = 0; u < UU; ++u)
#pragma unroll
          for (int j = 0; j < NP; ++j) acc += expf(v[u][j] - mn);
        s = acc;
        m = mn;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
      const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
      merge_ms(m, s, m2, s2);
    }
    if constexpr (G > 32) {  // merge the warps' states in warp order
      if ((threadIdx.x & 31) == 0) {
        sm_m[threadIdx.x >> 5] = m;
        sm_s[threadIdx.x >> 5] = s;
      }
      __syncthreads();
      m = sm_m[0];
      s = sm_s[0];
#pragma unroll
      for (int w = 1; w < G / 32; ++w) merge_ms(m, s, sm_m[w], sm_s[w]);
      __syncthreads();  // sm_m/sm_s are rewritten by the next row
    }
    if (t == 0) {
      const long long tgt = tg[row];
      if (tgt != ignore) {
        const float loss = (tgt >= 0 && tgt < V)
                               ? (m - vbk::to_f32(xr[tgt])) + logf(s)
                               : __int_as_float(0x7fffffff);  // invalid target: NaN
        lsum += loss;
        ++lcnt;
      }
    }
  }
  if (t == 0) {
    g_sum[gi] = lsum;
    g_cnt[gi] = lcnt;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float bs = g_sum[0];
    long long bc = g_cnt[0];
    for (int g = 1; g < RPB; ++g) {
      bs += g_sum[g];
      bc += g_cnt[g];
    }
    g_part_sum[blockIdx.x] = bs;
    g_part_cnt[blockIdx.x] = bc;
  }
}

/// loss = Σ partial sums / Σ counts over the n slots (fixed order; NaN for a zero count).
/// One block of BT threads.
template <int BT>
__global__ void __launch_bounds__(BT, 1) ce_final(int n, float* __restrict__ out) {
  __shared__ float red[64];
  __shared__ long long cred[32];
  int phase = 0;
  float s = 0.0f;
  long long c = 0;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += BT) {
    s += g_part_sum[i];
    c += g_part_cnt[i];
  }
  s = group_sum<BT>(s, red, phase);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0) cred[threadIdx.x >> 5] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long total = 0;
    for (int w = 0; w < BT / 32; ++w) total += cred[w];
    *out = total > 0 ? s / static_cast<float>(total) : __int_as_float(0x7fffffff);
  }
}

// ---- host side ---------------------------------------------------------------------------------


/// Launches ce_rows for groups of G threads in blocks of BT (vector packs when `vec`, else
/// scalars); returns the grid size in *blocks.
template <typename T, int G, int BT>
int launch_rows(const T* x, const long long* tg, i64 R, i64 V, long long ignore, bool vec,
                int sms, cudaStream_t st, unsigned* blocks) {
  constexpr int NV = vec_elems<T>();
  // Floats in flight per thread per step: 16 (at most 64 registers per thread, so that two
  // 512-thread blocks, i.e. two vocabulary rows, share an SM).
  constexpr int step_cap = cache_limit(BT) / 2 < 16 ? cache_limit(BT) / 2 : 16;
  unsigned grid = grid_for(R, BT / G, sms);
  if (grid > static_cast<unsigned>(kMaxBlocks)) grid = kMaxBlocks;
  *blocks = grid;
  if (vec) {
    constexpr int UU = UNROLL * NV <= step_cap ? UNROLL : (step_cap / NV > 0 ? step_cap / NV : 1);
    ce_rows<T, G, BT, NV, UU><<<grid, BT, 0, st>>>(x, tg, R, V, ignore);
  } else {
    constexpr int UU = UNROLL * NV <= step_cap / 2 ? UNROLL * NV : step_cap / 2;
    ce_rows<T, G, BT, 1, UU><<<grid, BT, 0, st>>>(x, tg, R, V, ignore);
  }
  VBK_CUDA_CHECK_LAUNCH("ce_rows");
  return 0;
}

template <typename T>
int run_ce(const T* x, const long long* tg, float* out, i64 R, i64 V, long long ignore, int sms,
           cudaStream_t st) {
  constexpr int NV = vec_elems<T>();
  const bool vec = NV > 1 && V % NV == 0 && aligned_to(x, sizeof(T) * NV);
  unsigned blocks = 0;
  if (R > 0) {
    const int e = V <= WARP_MAX_COLS
                      ? launch_rows<T, 32, WARP_BLOCK_THREADS>(x, tg, R, V, ignore, vec, sms, st, &blocks)
                      : launch_rows<T, BLOCK_THREADS, BLOCK_THREADS>(x, tg, R, V, ignore, vec, sms, st, &blocks);
    if (e) return e;
  }
  ce_final<1024><<<1, 1024, 0, st>>>(static_cast<int>(blocks), out);
  VBK_CUDA_CHECK_LAUNCH("ce_final");
  return 0;
}

}  // namespace

/// cross_entropy: inputs {logits[B,V], targets[B] int64}, outputs {loss (0-d fp32)},
/// attributes {ignore_index}. Launches on `stream` only and does not synchronize. Returns 0,
/// or 1 with vb_kernel_last_error() naming the bad argument or the launch error.
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream) {
  if (int e = vbk::check_cuda_args(inputs, n_inputs, 2, outputs, n_outputs, 1, n_attrs, 1, 0x2u))
    return e;
  const DLTensor& tl = inputs[0];
  const DLTensor& tt = inputs[1];
  DLTensor& tout = outputs[0];
  if (vbk::dtype_of(tout) != vbk::Dt::F32) return vbk::fail("loss: expected an fp32 output");
  if (tl.ndim != 2) return vbk::fail("logits: expected 2 dimensions [B,V], got %d", tl.ndim);
  const i64 B = tl.shape[0], V = tl.shape[1];
  if (int e = vbk::check_shape(tl, "logits", {B, V})) return e;
  if (int e = vbk::check_shape(tt, "targets", {B})) return e;
  if (int e = vbk::check_shape(tout, "loss", {})) return e;
  const double ig_d = attrs[0];
  if (!(std::fabs(ig_d) < 9.0e18) || ig_d != std::floor(ig_d))
    return vbk::fail("ignore_index must be an integer (got %g)", ig_d);
  const long long ignore = static_cast<long long>(ig_d);
  int sms = 0;
  if (int e = sm_count(tl, &sms)) return e;
  const cudaStream_t st = vbk::as_stream(stream);
  const long long* tg = static_cast<const long long*>(vbk::data_ptr(tt));
  float* out = static_cast<float*>(vbk::data_ptr(tout));
  return vbk::dispatch_float(vbk::dtype_of(tl), [&](auto tag) {
    using T = decltype(tag);
    return run_ce<T>(static_cast<const T*>(vbk::data_ptr(tl)), tg, out, B, V, ignore, sms, st);
  });
}
