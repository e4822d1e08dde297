// variant v05_group1_stages4 of the blind ranking study 4 (bench/ranking_variants.py): CHUNK_GROUP=1, CHUNK_STAGES=4
#define CHUNK_GROUP 1
#define CHUNK_STAGES 4
// cross_entropy (CUDA starter): loss = mean over rows r with targets[r] != ignore_index of
// logsumexp(logits[r,:]) - logits[r, targets[r]] (torch.nn.functional.cross_entropy,
// reduction='mean') (DESIGN §2).
//
// Inputs: logits[B,V] (fp16 / bf16 / fp32), targets[B] (int64). Outputs: loss, a 0-d fp32
// tensor. Attributes: ignore_index (-100). All rows ignored (or B = 0) gives NaN (0/0), as
// PyTorch; a target outside [0, V) that is not ignore_index gives a NaN loss (the device cannot
// report it; nothing outside the row is read).
//
// Fused, one pass over the logits. Every sum has a fixed order: the loss is bitwise
// deterministic (no atomics).
//  * Rows of at most SPLIT_COLS elements (and every row when SPLIT_COLS is 0): a group per row
//    (one warp for V <= WARP_MAX_COLS or when there are at least SMs x WARP_MIN_ROWS_PER_SM
//    rows, else a block of BLOCK_THREADS) computes the running max
//    and Σexp (online softmax, rescaled once per UNROLL vector loads), merges the threads'
//    states in a fixed order, and its first thread reads the target logit and adds
//    (max - x_t) + log(Σexp) to the block's running sum (rows in grid-stride order). Each block
//    writes its partial sum and count to a fixed slot; a final single-block kernel adds the
//    slots in order and divides.
//  * Longer rows (a vocabulary: 512 x 128256 has only 512 rows, too few to keep 132 SMs' loads
//    in flight one block per row) are split into chunks of 32 lanes x CHUNK_LOADS vectors.
//    - 16-byte vectors with CHUNK_STAGES > 0 (the default): two kernels, no atomics.
//      ce_stream: CHUNK_GROUP consecutive chunks of a row make an item (at most 32 items per
//      row); a persistent grid sweeps the items in order, each warp streaming its items through
//      its own cp.async ring of CHUNK_STAGES chunks in shared memory; each lane keeps an online
//      (max, Σexp) state (max by HMNMX2 on element pairs, exp as one FFMA + one MUFU.EX2 per
//      logit), and every item's merged state is stored to its own slot. ce_finish (one thread
//      per row) merges a row's slots in order, subtracts the target logit and adds the rows in
//      a fixed order into the mean. It is launched as a programmatic dependent of ce_stream
//      (sm_90+, DEPENDENT_LAUNCH): it is resident, and has loaded the target logits, before the
//      stream ends, and only waits for the stream's stores (griddepcontrol.wait).
//    - Otherwise: ce_chunks, one warp per chunk with the next chunk prefetched in registers,
//      then ce_merge (one warp per row) and the final kernel.
//    Rows are taken in pieces of at most kChunkSlots partials (one piece for any realistic
//    batch); a call of several pieces, or of more than 512 rows, adds per-block partial sums in
//    the final kernel.
//  * Rows whose loss is tiny are recomputed in the ce_rows path (kTinyLoss): see there.
// Measured on the H200: bench/results/h200-cuda.md ("cross_entropy"). The slots are
// __device__ arrays of this module, written before they are read in every call (nothing is
// carried between calls). Concurrent calls from several host threads on different streams
// would share them.

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
// @vb-param WARP_MIN_ROWS_PER_SM 32 {0,8,32,128}  rows up to SPLIT_COLS long also take the warp path when R >= SMs x this (0: never)
#ifndef WARP_MIN_ROWS_PER_SM
#define WARP_MIN_ROWS_PER_SM 32
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

// @vb-param SPLIT_COLS 4096 {0,2048,4096,16384}  rows longer than this are split into chunks (0: never)
#ifndef SPLIT_COLS
#define SPLIT_COLS 4096
#endif
// @vb-param CHUNK_THREADS 256 {128,256,512}  threads per block of the split-row path
#ifndef CHUNK_THREADS
#define CHUNK_THREADS 256
#endif
// @vb-param CHUNK_LOADS 4 {1,2,4,8}  vector loads per lane per chunk (a warp's chunk: 32 x this; at most 4 without the ring)
#ifndef CHUNK_LOADS
#define CHUNK_LOADS 4
#endif
// @vb-param CHUNK_BLOCKS_PER_SM 4 {1,2,4,8}  split-row grid = SMs x this (register path: also the register cap)
#ifndef CHUNK_BLOCKS_PER_SM
#define CHUNK_BLOCKS_PER_SM 4
#endif
// @vb-param CHUNK_STAGES 3 {0,2,3,4,6}  cp.async ring stages per warp (0: register prefetch of one chunk)
#ifndef CHUNK_STAGES
#define CHUNK_STAGES 3
#endif

// @vb-param CHUNK_GROUP 16 {1,2,4,8,16,32}  ring: chunks per work item (raised to keep <= 32 items per row)
#ifndef CHUNK_GROUP
#define CHUNK_GROUP 16
#endif

// @vb-param DEPENDENT_LAUNCH 1 {0,1}  ring: launch ce_finish as a programmatic dependent of ce_stream (sm_90+)
#ifndef DEPENDENT_LAUNCH
#define DEPENDENT_LAUNCH 1
#endif

#include "vb_cuda_rows.cuh"
#include "vb_cuda_mma.cuh"  // cp.async helpers

#include <algorithm>

namespace {

static_assert(VEC_BYTES == 2 || VEC_BYTES == 4 || VEC_BYTES == 8 || VEC_BYTES == 16,
              "VEC_BYTES must be 2, 4, 8 or 16");
static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= 32 && BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(WARP_BLOCK_THREADS % 32 == 0 && WARP_BLOCK_THREADS >= 32 &&
                  WARP_BLOCK_THREADS <= 1024,
              "WARP_BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(UNROLL >= 1 && UNROLL <= 16, "UNROLL must be in [1, 16]");
static_assert(SPLIT_COLS >= 0, "SPLIT_COLS must be >= 0");
static_assert(CHUNK_THREADS % 32 == 0 && CHUNK_THREADS >= 32 && CHUNK_THREADS <= 1024,
              "CHUNK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(CHUNK_LOADS >= 1 && CHUNK_LOADS <= 16, "CHUNK_LOADS must be in [1, 16]");
static_assert(CHUNK_STAGES == 0 || (CHUNK_STAGES >= 2 && CHUNK_STAGES <= 8),
              "CHUNK_STAGES must be 0 or in [2, 8]");
static_assert(CHUNK_GROUP >= 1, "CHUNK_GROUP must be >= 1");
static_assert(CHUNK_BLOCKS_PER_SM >= 1 && CHUNK_BLOCKS_PER_SM * CHUNK_THREADS <= 2048,
              "CHUNK_BLOCKS_PER_SM x CHUNK_THREADS must be in [1, 2048] (threads per SM)");

// Blocks of the ring kernel per SM that its registers must allow: one more than
// CHUNK_BLOCKS_PER_SM where the threads allow it, so that the registers of a ce_finish block
// (512 threads of at most 32 registers) are free next to them and it is resident before the
// stream ends.
constexpr int kStreamMinBlocks = (CHUNK_BLOCKS_PER_SM + 1) * CHUNK_THREADS <= 2048
                                     ? CHUNK_BLOCKS_PER_SM + 1
                                     : CHUNK_BLOCKS_PER_SM;
constexpr int kMaxBlocks = 4096;  // partial-sum slots (grid cap of each path)
__device__ float g_part_sum[kMaxBlocks];
__device__ long long g_part_cnt[kMaxBlocks];
constexpr i64 kChunkSlots = 1 << 17;  // (max, Σexp) pairs of one piece of the split-row path
__device__ float2 g_chunk_ms[kChunkSlots];
/// Rows whose loss (m - x_t) + log(Σexp) is below this are recomputed as
/// log1p(Σ_{j != t} exp(x_j - x_t)). When the target is the row's clear maximum, Σexp is
/// 1 + (a small r) and its fp32 rounding (~2^-24 absolute, a few times over) is all of r: a
/// loss of 1e-3 would carry a ~1e-4 relative error, against the 1e-5 an fp32 output is held
/// to. Below 0.25 the terms are all small and their sum keeps its relative precision; above
/// it the direct form's error is under ~3e-6 relative. Only the ce_rows path (rows up to
/// SPLIT_COLS elements, where the row is cheap to read again) does this.
constexpr float kTinyLoss = 0.25f;

/// Σ_{j < V, j != tgt} exp(x[j] - xt) over one row by a group of G threads (thread t of the
/// group takes j = t, t + G, ...; then a fixed butterfly, and for G > 32 the warps' sums in
/// warp order through red[0 .. G/32)). Every thread of the group gets the sum. All G threads
/// must call it (G > 32: the whole block, with a barrier).
template <int G, typename T>
__device__ __forceinline__ float group_sum_except(const T* __restrict__ xr, i64 V, long long tgt,
                                                  float xt, float* red) {
  const int t = static_cast<int>(threadIdx.x) % G;
  float r = 0.0f;
  for (i64 j = t; j < V; j += G)
    if (j != tgt) r += expf(vbk::to_f32(xr[j]) - xt);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
  if constexpr (G > 32) {
    __syncthreads();  // red may hold the caller's values
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = r;
    __syncthreads();
    r = red[0];
    for (int w = 1; w < G / 32; ++w) r += red[w];
    __syncthreads();
  }
  return r;
}

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
    // Every thread of the group reads the target (one broadcast load) and forms the loss.
    const long long tgt = tg[row];
    if (tgt != ignore) {
      const bool valid = tgt >= 0 && tgt < V;
      const float xt = valid ? vbk::to_f32(xr[tgt]) : 0.0f;
      float loss = valid ? (m - xt) + logf(s) : __int_as_float(0x7fffffff);  // invalid: NaN
      if (loss < kTinyLoss) {  // group-uniform: see kTinyLoss
        loss = log1pf(group_sum_except<G>(xr, V, tgt, xt, sm_s));
      }
      if (t == 0) {
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

/// Raw bits of one pack of NP elements of T (one 2/4/8/16-byte access): loaded long before use,
/// so only W words of registers, not NP floats.
template <typename T, int NP>
struct RawPack {
  static constexpr int B = static_cast<int>(sizeof(T)) * NP;
  static constexpr int W = B >= 4 ? B / 4 : 1;
  unsigned w[W];
};

template <typename T, int NP>
__device__ __forceinline__ void load_raw(const T* __restrict__ p, RawPack<T, NP>& r) {
  constexpr int B = RawPack<T, NP>::B;
  static_assert(B == 2 || B == 4 || B == 8 || B == 16, "vector access of 2, 4, 8 or 16 bytes");
  if constexpr (B == 2) {
    r.w[0] = __ldg(reinterpret_cast<const unsigned short*>(p));
  } else if constexpr (B == 4) {
    r.w[0] = __ldg(reinterpret_cast<const unsigned*>(p));
  } else if constexpr (B == 8) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
    r.w[0] = q.x;
    r.w[1] = q.y;
  } else {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(p));
    r.w[0] = q.x;
    r.w[1] = q.y;
    r.w[2] = q.z;
    r.w[3] = q.w;
  }
}

/// Element j of a raw pack, widened to float.
template <typename T, int NP>
__device__ __forceinline__ float raw_elem(const RawPack<T, NP>& r, int j) {
  if constexpr (sizeof(T) == 4) {
    return vbk::to_f32(from_bits<T>(r.w[j]));
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    // bf16 is the top half of an fp32: one LOP3 or SHF per element.
    return __uint_as_float(j % 2 ? r.w[j / 2] & 0xffff0000u : r.w[j / 2] << 16);
  } else {
    return vbk::to_f32(from_bits<T>(r.w[j / 2] >> (16 * (j % 2))));
  }
}

/// Split-row path, step 1. A row of V elements is nch chunks of 32*UU packs of NP elements;
/// item i of the piece is chunk i % nch of row row0 + i / nch. Each warp takes items
/// w, w + W, ... (W warps in the grid: neighbouring warps read neighbouring chunks) and loads
/// the next item's packs (lane l: packs c*32*UU + u*32 + l, coalesced) before reducing the
/// current one, so that loads stay in flight while it computes; no block barrier anywhere.
/// Writes item i's max M and Σexp(x - M) to g_chunk_ms[i] (M = -inf, Σ = 0 for a chunk of
/// -inf only).
template <typename T, int BT, int NP, int UU, int MINB>
__global__ void __launch_bounds__(BT, MINB)
    ce_chunks(const T* __restrict__ x, i64 row0, i64 V, int nch, int n_items) {
  // Item indices fit in 32 bits (n_items <= kChunkSlots): 32-bit division, not the 64-bit
  // emulation.
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int n_warps = static_cast<int>(gridDim.x) * (BT / 32);
  const i64 n_packs = V / NP;
  auto load_item = [&](int it, RawPack<T, NP>(&r)[UU]) {
    const i64 row = row0 + it / nch;
    const i64 base = static_cast<i64>(it % nch) * (32 * UU) + lane;
    const T* xr = x + row * V;
#pragma unroll
    for (int u = 0; u < UU; ++u)
      if (base + u * 32 < n_packs) load_raw<T, NP>(xr + (base + u * 32) * NP, r[u]);
  };
  int it = static_cast<int>(blockIdx.x) * (BT / 32) + static_cast<int>(threadIdx.x >> 5);
  RawPack<T, NP> cur[UU];
  if (it < n_items) load_item(it, cur);
  for (; it < n_items; it += n_warps) {
    RawPack<T, NP> nxt[UU];
    if (it + n_warps < n_items) load_item(it + n_warps, nxt);
    const i64 base = static_cast<i64>(it % nch) * (32 * UU) + lane;
    float m = kNegInf;
#pragma unroll
    for (int u = 0; u < UU; ++u) {
      if (base + u * 32 < n_packs) {
#pragma unroll
        for (int j = 0; j < NP; ++j) m = fmaxf(m, raw_elem<T, NP>(cur[u], j));
      }
    }
    // The whole chunk is in registers: its max first, then one exp per element (no rescaling).
    m = warp_max(m);
    float s = 0.0f;
    if (m != kNegInf) {  // else every logit here is -inf: s stays 0
      // exp(x - m) = 2^((x - m) * log2(e)): FADD, FMUL and one MUFU.EX2 per element (ex2_ftz;
      // every term is at most 1 and the chunk's max contributes exactly 1, so flushed
      // subnormal terms change Σexp by less than 2^-126 relative). expf costs ~8 instructions
      // per element, which made this loop issue-bound rather than bandwidth-bound on the H200.
      // (Not fma(x, log2e, -m*log2e): for logits near the fp16 maximum the rounding of
      // m*log2e would shift every term by up to 0.3 %.)
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        if (base + u * 32 < n_packs) {
#pragma unroll
          for (int j = 0; j < NP; ++j)
            s += ex2_ftz(__fmul_rn(raw_elem<T, NP>(cur[u], j) - m, kLog2e));
        }
      }
    }
    s = warp_sum(s);
    if (lane == 0) g_chunk_ms[it] = make_float2(m, s);
#pragma unroll
    for (int u = 0; u < UU; ++u) cur[u] = nxt[u];
  }
}

/// Max over every element of UU raw 16-bit packs (fp16 / bf16: HMNMX2 on element pairs, one
/// instruction per two elements, then the pair's halves), or of every fp32 element. Like
/// fmaxf, a NaN element is passed over (__hmax2 returns the other operand).
template <typename T, int NP, int UU>
__device__ __forceinline__ float packs_max(const RawPack<T, NP> (&p)[UU]) {
  if constexpr (sizeof(T) == 2) {
    using T2 = typename std::conditional<std::is_same<T, __half>::value, __half2,
                                         __nv_bfloat162>::type;
    constexpr int W = RawPack<T, NP>::W;
    T2 m2 = *reinterpret_cast<const T2*>(&p[0].w[0]);
#pragma unroll
    for (int u = 0; u < UU; ++u)
#pragma unroll
      for (int k = u == 0 ? 1 : 0; k < W; ++k)
        m2 = __hmax2(m2, *reinterpret_cast<const T2*>(&p[u].w[k]));
    return fmaxf(__low2float(m2), __high2float(m2));
  } else {
    float m = kNegInf;
#pragma unroll
    for (int u = 0; u < UU; ++u)
#pragma unroll
      for (int j = 0; j < NP; ++j) m = fmaxf(m, raw_elem<T, NP>(p[u], j));
    return m;
  }
}

/// Split-row path with a cp.async ring (16-byte packs only), step 1. A row of V elements is
/// nch chunks of 32 lanes x UU packs; K consecutive chunks of one row make an item (the row's
/// last item may be shorter), ipr = ceil(nch / K) items per row, item i of the piece is part
/// i % ipr of row i / ipr. Warp w of the W in the grid takes items w, w + W, w + 2W, ... (the
/// grid sweeps the logits front to back, neighbouring warps on neighbouring items) and streams
/// its chunks through its own ring of S stages in shared memory (BT/32 x S x UU x 512 bytes),
/// S - 1 chunks in flight while it computes one, across item ends. Each lane keeps an online
/// (max, Σexp) state, rescaled once per chunk; at an item's end the lanes merge by a fixed
/// butterfly and lane 0 stores the item's partial to g_chunk_ms[i]. No atomics and no fences:
/// the kernel boundary orders the partials before ce_finish reads them. Every block first
/// allows the dependent launch (griddepcontrol.launch_dependents), so that ce_finish, launched
/// with programmatic stream serialization, is resident and has loaded its target logits when
/// this grid ends. Lane l copies and later reads only its own 16-byte slots, so
/// cp.async.wait_group alone orders them (no barrier). Every step commits one group, empty
/// past the end, so that wait_group<S-1> always means "the current chunk has landed".
template <typename T, int BT, int NP, int UU, int S>
__global__ void __launch_bounds__(BT, kStreamMinBlocks)
    ce_stream(const T* __restrict__ x, i64 row0, i64 V, int nch, int K, int ipr, int n_items) {
  static_assert(sizeof(T) * NP == 16, "the cp.async ring copies 16-byte packs");
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  extern __shared__ uint4 ring[];  // [BT/32][S][UU][32]
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int W = static_cast<int>(gridDim.x) * (BT / 32);
  const int w0 = static_cast<int>(blockIdx.x) * (BT / 32) + static_cast<int>(threadIdx.x >> 5);
  if (w0 >= n_items) return;  // warp-uniform; nothing was issued
  const i64 n_packs = V / NP;
  uint4* mine = ring + static_cast<std::size_t>(threadIdx.x >> 5) * S * UU * 32 + lane;
  // A position in this warp's sequence: item it, chunk cc of its row, chunk end ce of the item.
  struct Pos {
    int it, cc, ce;
  };
  auto start = [&](int it) {
    const int part = it % ipr;
    const int cc = part * K;
    return Pos{it, cc, cc + K < nch ? cc + K : nch};
  };
  Pos ip = start(w0);  // issue pointer, S - 1 chunks ahead of the compute pointer
  auto issue = [&](int stage) {
    if (ip.it < n_items) {
      const T* xr = x + (row0 + ip.it / ipr) * V;
      const i64 base = static_cast<i64>(ip.cc) * (32 * UU) + lane;
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        const bool ok = base + u * 32 < n_packs;
        cp_async16(smem_addr(mine + (stage * UU + u) * 32), ok ? xr + (base + u * 32) * NP : xr,
                   ok);
      }
      if (++ip.cc == ip.ce) ip = start(ip.it + W);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int k = 0; k < S - 1; ++k) issue(k);
  Pos cp = start(w0);
  int stage = 0;
  float m = kNegInf, s = 0.0f;
  while (cp.it < n_items) {
    issue(stage == 0 ? S - 1 : stage - 1);  // the stage read one step ago
    cp_async_wait<S - 1>();
    RawPack<T, NP> cur[UU];
#pragma unroll
    for (int u = 0; u < UU; ++u) {
      const uint4 q = mine[(stage * UU + u) * 32];
      cur[u].w[0] = q.x;
      cur[u].w[1] = q.y;
      cur[u].w[2] = q.z;
      cur[u].w[3] = q.w;
    }
    stage = stage + 1 == S ? 0 : stage + 1;
    const i64 base = static_cast<i64>(cp.cc) * (32 * UU) + lane;
    // Packs u of this lane inside the row: u * 32 < live (a 32-bit compare per pack).
    const i64 rem = n_packs - base;
    const int live = rem >= 32 * UU ? 32 * UU : rem > 0 ? static_cast<int>(rem) : 0;
    float cm = kNegInf;
    if ((cp.cc + 1) * (32LL * UU) <= n_packs) {  // a whole chunk (warp-uniform): every pack
      cm = packs_max<T, NP, UU>(cur);
    } else {  // the row's last chunk: its packs past the row end are zero-filled, skip them
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        if (u * 32 < live) {
#pragma unroll
          for (int j = 0; j < NP; ++j) cm = fmaxf(cm, raw_elem<T, NP>(cur[u], j));
        }
      }
    }
    const float mn = fmaxf(m, cm);
    if (mn != kNegInf) {  // else every logit so far is -inf: s stays 0
      // exp(x - mn) = 2^t, t = (x - mn) log2(e), as one FFMA and one MUFU.EX2 per element:
      // t' = fma(x, log2e, -c) with c = mn*log2e rounded. The rounding error of c,
      // c_lo = mn*log2e - c, is exact (one more FMA) and t' = t + c_lo rounded once, so every
      // term carries the same factor 2^c_lo, taken out once per chunk by 2^-c_lo. (Without it
      // the rounding of c would shift every term by up to 0.3 % for logits near the fp16
      // maximum.) ex2_ftz: every term is at most 1 and the max contributes ~1, so flushed
      // subnormal terms change Σexp by less than 2^-126 relative; expf costs ~8 instructions
      // per element, which made this loop issue-bound rather than bandwidth-bound on the H200.
      // |c_lo| <= ulp(c)/2, so the factor is safe only for small |c|: from |c| >= 2^22
      // (|mn| >= ~2.9e6, fp32 / bf16 logits only; fp16 stops at 65504) c_lo could reach 2^-1
      // and, from 2^31, overflow ex2; those take the two-instruction form (x - mn) * log2e.
      // m = -inf gives ex2(-inf) = 0.
      const float c = __fmul_rn(mn, kLog2e);
      float acc = 0.0f;
      if (fabsf(c) < 0x1p22f) {
        const float c_lo = __fmaf_rn(mn, kLog2e, -c);
#pragma unroll
        for (int u = 0; u < UU; ++u) {
          if (u * 32 < live) {
#pragma unroll
            for (int j = 0; j < NP; ++j)
              acc += ex2_ftz(__fmaf_rn(raw_elem<T, NP>(cur[u], j), kLog2e, -c));
          }
        }
        acc = __fmul_rn(acc, ex2_ftz(-c_lo));
      } else {
#pragma unroll
        for (int u = 0; u < UU; ++u) {
          if (u * 32 < live) {
#pragma unroll
            for (int j = 0; j < NP; ++j)
              acc += ex2_ftz(__fmul_rn(raw_elem<T, NP>(cur[u], j) - mn, kLog2e));
          }
        }
      }
      s = __fmaf_rn(s, ex2_ftz(__fmul_rn(m - mn, kLog2e)), acc);
      m = mn;
    }
    if (++cp.cc == cp.ce) {  // the item ends (warp-uniform)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge_ms(m, s, m2, s2);
      }
      if (lane == 0) g_chunk_ms[cp.it] = make_float2(m, s);
      m = kNegInf;
      s = 0.0f;
      cp = start(cp.it + W);
    }
  }
  cp_async_wait<0>();  // nothing may land in shared memory after the warp exits
}

/// Split-row path with the ring, step 2: blocks of BT threads, one row per thread (block b:
/// the piece's rows [b*BT, (b+1)*BT); ipr <= 32 partials per row). Launched with
/// programmatic stream serialization right after ce_stream, and small enough (registers,
/// threads) to be resident next to it from the start: before griddepcontrol.wait it reads
/// only inputs (its row's target and x[row, target]), so that their two dependent loads are
/// hidden behind the stream. After it, a thread loads its row's partials g_chunk_ms[r*ipr +
/// i] (8 loads in flight at a time: one L2 round trip for ipr <= 8), takes their max M and
/// Σ s_i exp(m_i - M) in index order, and forms the row's loss; the block adds the losses
/// by fixed butterflies and warp order. The code is kept short on purpose: on the H200 a
/// version with 16 rows per warp unrolled (a warp butterfly per row) took 8.8 us after the stream,
/// this one ~2.3 us (bench/results/h200-cuda.md; read there as instruction fetches from DRAM,
/// the stream having evicted the code from L2). With `out` non-null (one block, one piece) it
/// writes the mean, else the block's loss sum and count to slot `slot0 + b` of g_part_sum /
/// g_part_cnt for ce_final.
template <typename T, int BT>
__global__ void __launch_bounds__(BT)
    ce_finish(const T* __restrict__ x, const long long* __restrict__ tg, i64 row0, i64 rows,
              i64 V, int ipr, long long ignore, int slot0, float* __restrict__ out) {
  constexpr int NW = BT / 32;
  __shared__ float w_sum[NW];
  __shared__ int w_cnt[NW];
  const i64 r = static_cast<i64>(blockIdx.x) * BT + threadIdx.x;  // piece-relative row
  const bool have = r < rows;
  long long t = ignore;
  if (have) t = tg[row0 + r];
  const bool keep = have && t != ignore;
  float xt = 0.0f;
  if (keep)
    xt = (t >= 0 && t < V) ? vbk::to_f32(x[(row0 + r) * V + t])
                           : __int_as_float(0x7fffffff);  // invalid target: NaN loss
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // ce_stream ended; its stores are visible
#endif
  float loss = 0.0f;
  if (keep) {
    const float2* part = g_chunk_ms + r * ipr;
    float mx = kNegInf, sum = 0.0f;
    for (int i0 = 0; i0 < ipr; i0 += 8) {
      float2 v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = i0 + k < ipr ? part[i0 + k] : make_float2(kNegInf, 0.0f);
      float bm = mx;
#pragma unroll
      for (int k = 0; k < 8; ++k) bm = fmaxf(bm, v[k].x);
      // Rescale the running sum to the new max, then add the group's terms in index order.
      // A partial of -inf only has s = 0 and adds nothing; a NaN s (from a NaN logit) must
      // reach the loss, so the tests are s != 0, not s > 0. exp as one MUFU.EX2 (ex2_ftz,
      // relative error ~2^-22, the stream's own precision).
      float acc = sum != 0.0f ? __fmul_rn(sum, ex2_ftz(__fmul_rn(mx - bm, kLog2e))) : 0.0f;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (v[k].y != 0.0f)
          acc = __fadd_rn(acc, __fmul_rn(v[k].y, ex2_ftz(__fmul_rn(v[k].x - bm, kLog2e))));
      sum = acc;
      mx = bm;
    }
    loss = (mx - xt) + logf(sum);
  }
  float ls = loss;
  int lc = keep;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ls += __shfl_xor_sync(0xffffffffu, ls, o);
    lc += __shfl_xor_sync(0xffffffffu, lc, o);
  }
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (lane == 0) {
    w_sum[threadIdx.x >> 5] = ls;
    w_cnt[threadIdx.x >> 5] = lc;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float bs = w_sum[0];
    long long bc = w_cnt[0];
    for (int i = 1; i < NW; ++i) {
      bs += w_sum[i];
      bc += w_cnt[i];
    }
    if (out) {
      *out = bc > 0 ? bs / static_cast<float>(bc) : __int_as_float(0x7fffffff);
    } else {
      g_part_sum[slot0 + blockIdx.x] = bs;
      g_part_cnt[slot0 + blockIdx.x] = bc;
    }
  }
}

/// Split-row path, step 2: one warp per row of the piece [row0, row0 + rows) (rows in
/// grid-stride order over the block's warps). Row r's partial states are g_chunk_ms[r*P + i]
/// for i < n_r, n_r = the warps whose range of L chunks meets the row's nch chunks (step 1's
/// partition; the per-chunk kernel is L = 1, P = nch). The lanes merge them in order (lane l
/// takes l, l+32, ...; then a fixed butterfly), lane 0 adds the row's loss. Block
/// slot0 + blockIdx.x gets the block's loss sum and count (warps in order).
template <typename T, int BT>
__global__ void __launch_bounds__(BT)
    ce_merge(const T* __restrict__ x, const long long* __restrict__ tg, i64 row0, i64 rows,
             i64 V, int nch, i64 L, int P, long long ignore, int slot0) {
  constexpr int W = BT / 32;
  __shared__ float w_sum[W];
  __shared__ long long w_cnt[W];
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int w = static_cast<int>(threadIdx.x) >> 5;
  float lsum = 0.0f;
  long long lcnt = 0;
  for (i64 r = static_cast<i64>(blockIdx.x) * W + w; r < rows;
       r += static_cast<i64>(gridDim.x) * W) {
    float m = kNegInf, s = 0.0f;
    const i64 n_r = ((r + 1) * nch - 1) / L - r * nch / L + 1;
    for (i64 i = lane; i < n_r; i += 32) {
      const float2 ms = g_chunk_ms[r * P + i];
      merge_ms(m, s, ms.x, ms.y);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
      const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
      merge_ms(m, s, m2, s2);
    }
    if (lane == 0) {
      const i64 row = row0 + r;
      const long long tgt = tg[row];
      if (tgt != ignore) {
        const float loss = (tgt >= 0 && tgt < V)
                               ? (m - vbk::to_f32(x[row * V + tgt])) + logf(s)
                               : __int_as_float(0x7fffffff);  // invalid target: NaN
        lsum += loss;
        ++lcnt;
      }
    }
  }
  if (lane == 0) {
    w_sum[w] = lsum;
    w_cnt[w] = lcnt;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float bs = w_sum[0];
    long long bc = w_cnt[0];
    for (int i = 1; i < W; ++i) {
      bs += w_sum[i];
      bc += w_cnt[i];
    }
    g_part_sum[slot0 + blockIdx.x] = bs;
    g_part_cnt[slot0 + blockIdx.x] = bc;
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

/// Blocks of `kernel` (bt threads, `smem` bytes of dynamic shared memory) resident per SM, in
/// *n (at least 1). Raises the kernel's dynamic shared-memory limit to `smem` first (above
/// 48 KiB it is opt-in). Both are properties of the function in this context: computed on the
/// first call and kept (each template instance has its own `done`).
template <typename K>
int ring_blocks_per_sm(K kernel, int bt, int smem, int* n) {
  static int done = 0;
  if (done > 0) {
    *n = done;
    return 0;
  }
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, bt, smem);
  if (e != cudaSuccess)
    return vbk::fail("ce_stream: %d bytes of shared memory per block: %s; lower "
                     "CHUNK_STAGES or CHUNK_LOADS", smem, cudaGetErrorString(e));
  if (*n < 1)
    return vbk::fail("ce_stream: no block of %d threads and %d bytes of shared memory "
                     "fits on an SM; lower CHUNK_STAGES or CHUNK_LOADS", bt, smem);
  done = *n;
  return 0;
}

/// Compute capability major of the tensors' device (programmatic dependent launch needs 9).
int cc_major(int device, int* major) {
  const cudaError_t e = cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device);
  if (e != cudaSuccess)
    return vbk::fail("cudaDeviceGetAttribute(compute capability): %s", cudaGetErrorString(e));
  return 0;
}

/// Split-row path: rows of V > SPLIT_COLS elements in chunks of 32 lanes x CHUNK_LOADS vectors
/// (`vec`) or as many coalesced scalars. 16-byte vectors with CHUNK_STAGES > 0 take the
/// cp.async ring: ce_stream (a persistent grid of what fits on the SMs, at most
/// CHUNK_BLOCKS_PER_SM blocks each) and ce_finish, launched as its programmatic dependent on
/// devices of compute capability 9 and up (`pdl`); the rest the per-chunk register kernel
/// (ce_chunks, SMs x CHUNK_BLOCKS_PER_SM blocks) and ce_merge. A call of one piece whose rows
/// fit one ce_finish block writes the loss to *out itself (*wrote_out = true); otherwise the
/// kernels leave partial sums for ce_final (their count in *blocks).
template <typename T>
int launch_split(const T* x, const long long* tg, float* out, i64 R, i64 V, long long ignore,
                 bool vec, int sms, bool pdl, cudaStream_t st, unsigned* blocks,
                 bool* wrote_out) {
  constexpr int NV = vec_elems<T>();
  constexpr int BT = CHUNK_THREADS;
  constexpr int WPB = BT / 32;
  constexpr int MINB = CHUNK_BLOCKS_PER_SM;
  // The register kernel holds this chunk and the next in registers: at most 4 vectors (UR)
  // or 16 scalars (US) per lane.
  constexpr int UR = CHUNK_LOADS < 4 ? CHUNK_LOADS : 4;
  constexpr int US = CHUNK_LOADS * NV < 16 ? CHUNK_LOADS * NV : 16;
  constexpr int kStages = CHUNK_STAGES > 0 ? CHUNK_STAGES : 2;
  constexpr int ring_bytes = WPB * kStages * CHUNK_LOADS * 32 * 16;
  constexpr bool ring = CHUNK_STAGES > 0 && VEC_BYTES == 16;
  constexpr int FT = 512;  // ce_finish: threads (= rows) per block
  const bool use_ring = ring && vec;
  const i64 chunk = use_ring ? 32LL * CHUNK_LOADS * NV : vec ? 32LL * UR * NV : 32LL * US;
  const i64 nch64 = (V + chunk - 1) / chunk;
  if (nch64 > kChunkSlots)
    return vbk::fail("logits: a row of %lld elements needs %lld chunks, more than the %lld "
                     "chunk slots; raise CHUNK_LOADS", V, nch64, kChunkSlots);
  const int nch = static_cast<int>(nch64);
  // Ring: items of K chunks, at most 32 per row (ce_finish merges one partial per lane).
  const int K = use_ring ? std::max(CHUNK_GROUP, (nch + 31) / 32) : 1;
  const int ipr = (nch + K - 1) / K;  // partials per row
  int per_sm = MINB;
  if constexpr (ring) {
    if (vec) {
      if (int e = ring_blocks_per_sm(ce_stream<T, BT, NV, CHUNK_LOADS, kStages>, BT, ring_bytes,
                                     &per_sm))
        return e;
      if (per_sm > MINB) per_sm = MINB;
    }
  }
  const i64 piece = kChunkSlots / ipr;  // rows per piece
  const i64 n_pieces = (R + piece - 1) / piece;
  constexpr int MT = 256;  // merge threads per block: 8 rows at a time
  const i64 grid_cap = static_cast<i64>(sms) * per_sm;
  i64 slot = 0;
  for (i64 r0 = 0; r0 < R; r0 += piece) {
    const i64 rows = R - r0 < piece ? R - r0 : piece;
    const i64 items = rows * ipr;  // <= kChunkSlots
    const i64 need = (items + WPB - 1) / WPB;
    const unsigned grid = static_cast<unsigned>(need < grid_cap ? need : grid_cap);
    if constexpr (ring) {
      if (vec) {
        const i64 fb = (rows + FT - 1) / FT;  // ce_finish blocks = partial-sum slots
        const bool direct = n_pieces == 1 && fb == 1;
        if (slot + fb > kMaxBlocks)
          return vbk::fail("logits: %lld rows need more than %d partial-sum slots (%d rows per "
                           "slot)", R, kMaxBlocks, FT);
        ce_stream<T, BT, NV, CHUNK_LOADS, kStages><<<grid, BT, ring_bytes, st>>>(
            x, r0, V, nch, K, ipr, static_cast<int>(items));
        VBK_CUDA_CHECK_LAUNCH("ce_stream");
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(static_cast<unsigned>(fb));
        cfg.blockDim = dim3(FT);
        cfg.stream = st;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = pdl ? 1 : 0;
        const cudaError_t e = cudaLaunchKernelEx(&cfg, ce_finish<T, FT>, x, tg, r0, rows, V,
                                                 ipr, ignore, static_cast<int>(slot),
                                                 direct ? out : static_cast<float*>(nullptr));
        if (e != cudaSuccess) return vbk::fail("ce_finish: %s", cudaGetErrorString(e));
        slot += fb;
        *wrote_out = direct;
        continue;
      }
    }
    if (vec) {
      ce_chunks<T, BT, NV, UR, MINB><<<grid, BT, 0, st>>>(x, r0, V, nch, static_cast<int>(items));
    } else {
      ce_chunks<T, BT, 1, US, MINB><<<grid, BT, 0, st>>>(x, r0, V, nch, static_cast<int>(items));
    }
    VBK_CUDA_CHECK_LAUNCH("ce_chunks");
    i64 mg = grid_for(rows, MT / 32, sms);
    if (mg > kMaxBlocks / n_pieces) mg = kMaxBlocks / n_pieces;
    // Row r's partials are its nch chunks: ce_merge's layout with L = 1, P = nch.
    ce_merge<T, MT><<<static_cast<unsigned>(mg), MT, 0, st>>>(x, tg, r0, rows, V, nch, 1, nch,
                                                               ignore, static_cast<int>(slot));
    VBK_CUDA_CHECK_LAUNCH("ce_merge");
    slot += mg;
  }
  *blocks = static_cast<unsigned>(slot);
  return 0;
}

template <typename T>
int run_ce(const T* x, const long long* tg, float* out, i64 R, i64 V, long long ignore, int sms,
           bool pdl, cudaStream_t st) {
  constexpr int NV = vec_elems<T>();
  const bool vec = NV > 1 && V % NV == 0 && aligned_to(x, sizeof(T) * NV);
  unsigned blocks = 0;
  bool wrote_out = false;
  if (R > 0) {
    // Many rows of moderate length (KernelBench's 32768 x 4096): a warp per row streams the row
    // with UNROLL loads in flight and no block barrier, and the rows alone fill the SMs; a block
    // per row pays two barriers per row with 4 blocks resident per SM.
    const bool many_rows = WARP_MIN_ROWS_PER_SM > 0 && (SPLIT_COLS == 0 || V <= SPLIT_COLS) &&
                           R >= static_cast<i64>(sms) * WARP_MIN_ROWS_PER_SM;
    const int e =
        V <= WARP_MAX_COLS || many_rows
            ? launch_rows<T, 32, WARP_BLOCK_THREADS>(x, tg, R, V, ignore, vec, sms, st, &blocks)
        : (SPLIT_COLS > 0 && V > SPLIT_COLS)
            ? launch_split<T>(x, tg, out, R, V, ignore, vec, sms, pdl, st, &blocks, &wrote_out)
            : launch_rows<T, BLOCK_THREADS, BLOCK_THREADS>(x, tg, R, V, ignore, vec, sms, st, &blocks);
    if (e) return e;
  }
  if (wrote_out) return 0;
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
  int sms = 0, major = 0;
  if (int e = sm_count(tl, &sms)) return e;
  if (int e = cc_major(tl.device.device_id, &major)) return e;
  const cudaStream_t st = vbk::as_stream(stream);
  const long long* tg = static_cast<const long long*>(vbk::data_ptr(tt));
  float* out = static_cast<float*>(vbk::data_ptr(tout));
  return vbk::dispatch_float(vbk::dtype_of(tl), [&](auto tag) {
    using T = decltype(tag);
    return run_ce<T>(static_cast<const T*>(vbk::data_ptr(tl)), tg, out, B, V, ignore, sms,
                     DEPENDENT_LAUNCH && major >= 9, st);
  });
}
