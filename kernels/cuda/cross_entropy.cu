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
// deterministic (atomics only count completions; they never add values).
//  * Rows of at most SPLIT_COLS elements (and every row when SPLIT_COLS is 0): a group per row
//    (one warp for V <= WARP_MAX_COLS, else a block of BLOCK_THREADS) computes the running max
//    and Σexp (online softmax, rescaled once per UNROLL vector loads), merges the threads'
//    states in a fixed order, and its first thread reads the target logit and adds
//    (max - x_t) + log(Σexp) to the block's running sum (rows in grid-stride order). Each block
//    writes its partial sum and count to a fixed slot; a final single-block kernel adds the
//    slots in order and divides.
//  * Longer rows (a vocabulary: 512 x 128256 has only 512 rows, too few to keep 132 SMs' loads
//    in flight one block per row) are split into chunks of 32 lanes x CHUNK_LOADS vectors.
//    - 16-byte vectors with CHUNK_STAGES > 0 (the default): ce_range_async. A persistent grid
//      gives each warp one contiguous range of chunks, streamed through the warp's own cp.async
//      ring of CHUNK_STAGES chunks in shared memory; each lane keeps an online (max, Σexp),
//      with exp as one MUFU.EX2 per logit. Where a row ends the warp merges its lanes and
//      stores the row's partial; a ticket per row lets the warp that completes the row merge
//      the row's partials in order and store its loss, and a ticket over the rows lets the
//      warp that completes the last row sum the losses and write the mean: one kernel.
//    - Otherwise: ce_chunks, one warp per chunk with the next chunk prefetched in registers,
//      then ce_merge (one warp per row) and the final kernel.
//    Rows are taken in pieces of at most kChunkSlots partials (one piece for any realistic
//    batch).
// Measured on the H200: bench/results/h200-cuda.md ("cross_entropy"). The slots and tickets
// are __device__ arrays of this module, written before they are read in every call (the
// tickets return to 0 at the end of each call; nothing else is carried between calls).
// Concurrent calls from several host threads on different streams would share them.

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

#include "vb_cuda_rows.cuh"
#include "vb_cuda_mma.cuh"  // cp.async helpers

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
static_assert(CHUNK_BLOCKS_PER_SM >= 1 && CHUNK_BLOCKS_PER_SM * CHUNK_THREADS <= 2048,
              "CHUNK_BLOCKS_PER_SM x CHUNK_THREADS must be in [1, 2048] (threads per SM)");

constexpr int kMaxBlocks = 4096;  // partial-sum slots (grid cap of each path)
__device__ float g_part_sum[kMaxBlocks];
__device__ long long g_part_cnt[kMaxBlocks];
constexpr i64 kChunkSlots = 1 << 17;  // (max, Σexp) pairs of one piece of the split-row path
__device__ float2 g_chunk_ms[kChunkSlots];
// The ring path's completion counters and per-row results (piece-relative rows; a piece has at
// most kChunkSlots / 2 rows). The counters are 0 at module load and put back to 0 by the warp
// that sees the count complete, so every call starts from 0.
__device__ int g_row_ticket[kChunkSlots / 2];
__device__ float g_row_loss[kChunkSlots / 2];
__device__ int g_row_cnt[kChunkSlots / 2];
__device__ int g_rows_done;

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

/// Σ a[i] (and Σ c[i]) over i < n by one warp: lane l adds i = l, l+32, ... in order, then a
/// fixed butterfly; every lane gets the totals. Loads bypass L1 (__ldcg): the values were
/// written by other SMs in this kernel (visible after their __threadfence and the caller's).
template <typename C>
__device__ __forceinline__ void warp_sum_strided(const float* a, const C* c, i64 n, float* sum,
                                                 long long* cnt) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  // Eight loads in flight per lane (a plain loop waits one L2 latency per element: at the end
  // of the kernel that wait is the whole tail); the adds keep index order.
  constexpr int K = 8;
  float sm = 0.0f;
  long long cn = 0;
  for (i64 i0 = lane; i0 < n; i0 += 32 * K) {
    float va[K];
    C vc[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const i64 i = i0 + 32LL * k;
      va[k] = i < n ? __ldcg(a + i) : 0.0f;
      vc[k] = i < n ? __ldcg(c + i) : C(0);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      sm += va[k];
      cn += vc[k];
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    sm += __shfl_xor_sync(0xffffffffu, sm, o);
    cn += __shfl_xor_sync(0xffffffffu, cn, o);
  }
  *sum = sm;
  *cnt = cn;
}

/// The ring path's epilogue, run by the one warp whose partial completed row `row` (of the
/// piece starting at global row row0): merges the row's n_r partials g_chunk_ms[row*P + i] in
/// order, lane 0 stores the row's loss and count, and the warp that completes the piece's last
/// row sums the piece's row losses into slot `piece` of g_part_sum / g_part_cnt; in the last
/// piece it also adds the n_pieces slots and writes the mean to *out. Every sum has a fixed
/// order, whichever warp runs it: the loss is bitwise deterministic.
template <typename T>
__device__ __noinline__ void finish_row(const T* __restrict__ x, const long long* __restrict__ tg, i64 row0,
                           i64 row, i64 rows, i64 V, int P, int n_r, long long ignore,
                           int piece, int n_pieces, float* __restrict__ out) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  __threadfence();  // acquire: the other warps' partials of this row
  float m = kNegInf, s = 0.0f;
  for (int i = lane; i < n_r; i += 32) {
    const float2 ms = __ldcg(&g_chunk_ms[row * P + i]);
    merge_ms(m, s, ms.x, ms.y);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge_ms(m, s, m2, s2);
  }
  int last_row = 0;
  if (lane == 0) {
    g_row_ticket[row] = 0;  // ready for the next call
    const i64 grow = row0 + row;
    const long long tgt = tg[grow];
    float loss = 0.0f;
    int cnt = 0;
    if (tgt != ignore) {
      loss = (tgt >= 0 && tgt < V) ? (m - vbk::to_f32(x[grow * V + tgt])) + logf(s)
                                   : __int_as_float(0x7fffffff);  // invalid target: NaN
      cnt = 1;
    }
    g_row_loss[row] = loss;
    g_row_cnt[row] = cnt;
    __threadfence();  // release the row's loss before counting it
    last_row = atomicAdd(&g_rows_done, 1) == rows - 1;
  }
  if (!__shfl_sync(0xffffffffu, last_row, 0)) return;
  __threadfence();  // acquire: every row's loss
  float sum;
  long long cnt;
  warp_sum_strided(g_row_loss, g_row_cnt, rows, &sum, &cnt);
  if (lane == 0) {
    g_rows_done = 0;
    g_part_sum[piece] = sum;
    g_part_cnt[piece] = cnt;
    __threadfence();
  }
  if (piece + 1 < n_pieces) return;
  __syncwarp();
  warp_sum_strided(g_part_sum, g_part_cnt, n_pieces, &sum, &cnt);
  if (lane == 0) *out = cnt > 0 ? sum / static_cast<float>(cnt) : __int_as_float(0x7fffffff);
}

/// Split-row path, step 1 with a cp.async ring (16-byte packs only). The piece's rows x nch
/// chunks, flattened in row order, are cut into one contiguous range of L chunks per warp
/// (warp g: chunks [g*L, (g+1)*L); every warp has the same work, to one chunk). A warp
/// streams its range through its own ring of S stages of UU x 32 packs (dynamic shared
/// memory, BT/32 x S x UU x 512 bytes), S - 1 chunks in flight while it computes one; each
/// lane keeps an online (max, Σexp) state, rescaled once per chunk. Where a row ends (or the
/// range does) the lanes' states are merged by a fixed butterfly and lane 0 writes the row's
/// partial to g_chunk_ms[row*P + (g - first warp of the row)] (first warp = row*nch / L;
/// P >= the most warps any row spans) and counts it in g_row_ticket[row]; the warp that
/// completes a row runs finish_row (row loss; the piece's sum; in the last piece the mean into
/// *out), so the ring path is one kernel per piece: no merge or final kernel. Lane l copies and later reads only its own 16-byte
/// slots, so cp.async.wait_group alone orders them (no barrier). Every step commits one
/// group, empty past the end, so that wait_group<S-1> always means "the current chunk has
/// landed".
template <typename T, int BT, int NP, int UU, int S>
__global__ void __launch_bounds__(BT)
    ce_range_async(const T* __restrict__ x, const long long* __restrict__ tg, i64 row0, i64 rows,
                   i64 V, int nch, i64 L, int P, long long ignore, int piece, int n_pieces,
                   float* __restrict__ out) {
  const i64 n_chunks = rows * nch;
  static_assert(sizeof(T) * NP == 16, "the cp.async ring copies 16-byte packs");
  extern __shared__ uint4 ring[];  // [BT/32][S][UU][32]
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const i64 g = static_cast<i64>(blockIdx.x) * (BT / 32) + (threadIdx.x >> 5);
  const i64 c_begin = g * L;
  const i64 c_end = c_begin + L < n_chunks ? c_begin + L : n_chunks;
  if (c_begin >= c_end) return;  // warp-uniform; nothing was issued
  const i64 n_packs = V / NP;
  uint4* mine = ring + static_cast<std::size_t>(threadIdx.x >> 5) * S * UU * 32 + lane;
  // Issue pointer: chunk ic = (irow, icc), one step ahead of the compute pointer by S - 1.
  i64 ic = c_begin, irow = c_begin / nch;
  int icc = static_cast<int>(c_begin % nch);
  auto issue = [&](int stage) {
    if (ic < c_end) {
      const T* xr = x + (row0 + irow) * V;
      const i64 base = static_cast<i64>(icc) * (32 * UU) + lane;
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        const bool ok = base + u * 32 < n_packs;
        cp_async16(smem_addr(mine + (stage * UU + u) * 32), ok ? xr + (base + u * 32) * NP : xr,
                   ok);
      }
      ++ic;
      if (++icc == nch) {
        icc = 0;
        ++irow;
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int k = 0; k < S - 1; ++k) issue(k);
  i64 row = c_begin / nch;
  int cc = static_cast<int>(c_begin % nch);
  int stage = 0;
  float m = kNegInf, s = 0.0f;
  for (i64 c = c_begin; c < c_end; ++c) {
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
    const i64 base = static_cast<i64>(cc) * (32 * UU) + lane;
    float cm = kNegInf;
#pragma unroll
    for (int u = 0; u < UU; ++u) {
      if (base + u * 32 < n_packs) {
#pragma unroll
        for (int j = 0; j < NP; ++j) cm = fmaxf(cm, raw_elem<T, NP>(cur[u], j));
      }
    }
    const float mn = fmaxf(m, cm);
    if (mn != kNegInf) {  // else every logit so far is -inf: s stays 0
      // exp(x - mn) = 2^((x - mn) * log2(e)): FADD, FMUL and one MUFU.EX2 per element
      // (ex2_ftz; every term is at most 1 and the max contributes exactly 1, so flushed
      // subnormal terms change Σexp by less than 2^-126 relative). expf costs ~8 instructions
      // per element, which made this loop issue-bound rather than bandwidth-bound on the H200.
      // (Not fma(x, log2e, -mn*log2e): for logits near the fp16 maximum the rounding of
      // mn*log2e would shift every term by up to 0.3 %.) m = -inf gives ex2(-inf) = 0.
      float acc = s * ex2_ftz(__fmul_rn(m - mn, kLog2e));
#pragma unroll
      for (int u = 0; u < UU; ++u) {
        if (base + u * 32 < n_packs) {
#pragma unroll
          for (int j = 0; j < NP; ++j)
            acc += ex2_ftz(__fmul_rn(raw_elem<T, NP>(cur[u], j) - mn, kLog2e));
        }
      }
      s = acc;
      m = mn;
    }
    const bool row_end = ++cc == nch;
    if (row_end || c + 1 == c_end) {  // warp-uniform
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge_ms(m, s, m2, s2);
      }
      const i64 first = row * nch / L;  // the first warp whose range meets this row
      const int n_r = static_cast<int>(((row + 1) * nch - 1) / L - first + 1);
      int done = 0;
      if (lane == 0) {
        g_chunk_ms[row * P + (g - first)] = make_float2(m, s);
        __threadfence();  // release the partial before counting it
        done = atomicAdd(&g_row_ticket[row], 1) == n_r - 1;
      }
      if (__shfl_sync(0xffffffffu, done, 0))  // this warp completed the row
        finish_row<T>(x, tg, row0, row, rows, V, P, n_r, ignore, piece, n_pieces, out);
      m = kNegInf;
      s = 0.0f;
      if (row_end) {
        cc = 0;
        ++row;
      }
    }
  }
  cp_async_wait<0>();  // nothing may land in shared memory after the warp exits
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
    return vbk::fail("ce_range_async: %d bytes of shared memory per block: %s; lower "
                     "CHUNK_STAGES or CHUNK_LOADS", smem, cudaGetErrorString(e));
  if (*n < 1)
    return vbk::fail("ce_range_async: no block of %d threads and %d bytes of shared memory "
                     "fits on an SM; lower CHUNK_STAGES or CHUNK_LOADS", bt, smem);
  done = *n;
  return 0;
}

/// Split-row path: rows of V > SPLIT_COLS elements in chunks of 32 lanes x CHUNK_LOADS vectors
/// (`vec`) or as many coalesced scalars. 16-byte vectors with CHUNK_STAGES > 0 take the
/// cp.async ring (ce_range_async, a persistent grid of what fits on the SMs, at most
/// CHUNK_BLOCKS_PER_SM blocks each); the rest the per-chunk register kernel (ce_chunks, SMs x
/// CHUNK_BLOCKS_PER_SM blocks). The ring writes the loss to *out itself (*wrote_out = true);
/// the per-chunk kernel leaves partial sums for ce_final (their count in *blocks).
template <typename T>
int launch_split(const T* x, const long long* tg, float* out, i64 R, i64 V, long long ignore,
                 bool vec, int sms, cudaStream_t st, unsigned* blocks, bool* wrote_out) {
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
  const bool use_ring = ring && vec;
  const i64 chunk = use_ring ? 32LL * CHUNK_LOADS * NV : vec ? 32LL * UR * NV : 32LL * US;
  const i64 nch64 = (V + chunk - 1) / chunk;
  if (nch64 + 1 > kChunkSlots)
    return vbk::fail("logits: a row of %lld elements needs %lld chunks, more than the %lld "
                     "chunk slots; raise CHUNK_LOADS", V, nch64, kChunkSlots - 1);
  const int nch = static_cast<int>(nch64);
  int per_sm = MINB;
  if constexpr (ring) {
    if (vec) {
      if (int e = ring_blocks_per_sm(ce_range_async<T, BT, NV, CHUNK_LOADS, kStages>, BT,
                                     ring_bytes, &per_sm))
        return e;
      if (per_sm > MINB) per_sm = MINB;
    }
  }
  // Partial states per row: at most nch + 1 for the ring (a row meets at most
  // ceil(nch / L) + 1 warp ranges), nch for the per-chunk kernel.
  const i64 piece = kChunkSlots / (use_ring ? nch + 1 : nch);  // rows per piece
  const i64 n_pieces = (R + piece - 1) / piece;
  if (n_pieces > kMaxBlocks)
    return vbk::fail("logits: %lld rows need %lld pieces, more than %d", R, n_pieces, kMaxBlocks);
  constexpr int MT = 256;  // merge threads per block: 8 rows at a time
  const i64 merge_cap = kMaxBlocks / n_pieces;
  const i64 grid_cap = static_cast<i64>(sms) * per_sm;
  int slot = 0;
  for (i64 r0 = 0; r0 < R; r0 += piece) {
    const i64 rows = R - r0 < piece ? R - r0 : piece;
    const i64 chunks = rows * nch;  // <= kChunkSlots
    const i64 need = (chunks + WPB - 1) / WPB;
    const unsigned grid = static_cast<unsigned>(need < grid_cap ? need : grid_cap);
    i64 L = 1;
    int P = nch;
    if constexpr (ring) {
      if (vec) {
        const i64 warps = static_cast<i64>(grid) * WPB;
        L = (chunks + warps - 1) / warps;
        P = static_cast<int>((nch + L - 1) / L + 1);
        ce_range_async<T, BT, NV, CHUNK_LOADS, kStages><<<grid, BT, ring_bytes, st>>>(
            x, tg, r0, rows, V, nch, L, P, ignore, static_cast<int>(r0 / piece),
            static_cast<int>(n_pieces), out);
        VBK_CUDA_CHECK_LAUNCH("ce_range_async");
        *wrote_out = true;  // the kernel reduces the rows and writes the loss itself
        continue;
      }
    }
    if (vec) {
      ce_chunks<T, BT, NV, UR, MINB><<<grid, BT, 0, st>>>(x, r0, V, nch, static_cast<int>(chunks));
    } else {
      ce_chunks<T, BT, 1, US, MINB><<<grid, BT, 0, st>>>(x, r0, V, nch, static_cast<int>(chunks));
    }
    VBK_CUDA_CHECK_LAUNCH("ce_chunks");
    i64 mg = grid_for(rows, MT / 32, sms);
    if (mg > merge_cap) mg = merge_cap;
    ce_merge<T, MT><<<static_cast<unsigned>(mg), MT, 0, st>>>(x, tg, r0, rows, V, nch, L, P,
                                                               ignore, slot);
    VBK_CUDA_CHECK_LAUNCH("ce_merge");
    slot += static_cast<int>(mg);
  }
  *blocks = static_cast<unsigned>(slot);
  return 0;
}

template <typename T>
int run_ce(const T* x, const long long* tg, float* out, i64 R, i64 V, long long ignore, int sms,
           cudaStream_t st) {
  constexpr int NV = vec_elems<T>();
  const bool vec = NV > 1 && V % NV == 0 && aligned_to(x, sizeof(T) * NV);
  unsigned blocks = 0;
  bool wrote_out = false;
  if (R > 0) {
    const int e =
        V <= WARP_MAX_COLS
            ? launch_rows<T, 32, WARP_BLOCK_THREADS>(x, tg, R, V, ignore, vec, sms, st, &blocks)
        : (SPLIT_COLS > 0 && V > SPLIT_COLS)
            ? launch_split<T>(x, tg, out, R, V, ignore, vec, sms, st, &blocks, &wrote_out)
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
