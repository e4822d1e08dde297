// vb_cuda_wgmma.cuh: Hopper (sm_90a) helpers shared by the CUDA starters' TMA + wgmma paths
// (kernels/cuda/{matmul,fused_mlp,flash_attention}.cu).
//
// What it holds, all in the anonymous namespace of the including translation unit (every starter
// is one .so; nothing here has external linkage):
//   VB_WGMMA_BODY                 defined when this compilation pass targets sm_90a (compute
//                                 capability 9.x with the 'a' features); the device helpers below
//                                 exist only then, and a kernel's body is written under it
//   mbar_init, mbar_arrive,
//   mbar_arrive_expect_tx,
//   mbar_wait                     mbarrier (PTX ISA 8.0 "mbarrier"), shared::cta
//   tma_load_2d, tma_load_3d      cp.async.bulk.tensor.{2d,3d} global -> shared, completion on
//                                 an mbarrier as transaction bytes
//   wgmma_fence, wgmma_commit,
//   wgmma_wait<N>, fence_operand  the wgmma ordering primitives
//   wg_desc                       the shared-memory matrix descriptor of a 128B-swizzled tile
//   Wgmma<T, N, TRANS_B>::run     wgmma.mma_async m64nNk16, fp32 accumulators, A K-major from
//                                 shared memory; TRANS_B 0: B K-major ([N rows][K] in shared
//                                 memory, an nn.Linear weight), 1: B N-major ([K rows][N])
//   WgmmaRA<T, N, TRANS_B>::run   the same with A from registers (mma.m16n8k16's A fragment)
//   (host) make_tma_map<T>        a 2-D row-major tensor as a CUtensorMap (128B swizzle, box
//                                 box_rows x 64 elements), cuTensorMapEncodeTiled taken from the
//                                 driver through the runtime (no -lcuda link)
//   (host) make_tma_map_3d<T>     the same for a [batches, rows, cols] tensor (rows past the end
//                                 of a batch read as zeros)
//   (host) wgmma_image_ok<K>      whether kernel K carries its sm_90a body on the current device
//
// Include it after the starter's @vb-param block, after vb_cuda_mma.cuh (u32, smem_addr).
// Sources: PTX ISA 8.x ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions",
// "Matrix Descriptor Format", "Tensor Copy Instructions"), CUDA Driver API "Tensor Map Object
// Management". Every device helper is one PTX instruction, forceinline.

#pragma once

#include <cuda.h>  // CUtensorMap and its enums only; cuTensorMapEncodeTiled comes from the runtime

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "vb_cuda_mma.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VB_WGMMA_BODY 1
#endif

namespace {

#ifdef VB_WGMMA_BODY
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/// Arrives once on `bar` and adds `bytes` to its expected transaction count.
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/// Spins until the phase of `bar` with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_LOOP;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
/// 2-D TMA tile load of the box at (x = inner, y = outer) element coordinates into shared memory
/// at `dst`; completion is signalled as transaction bytes on `bar`. Out-of-bounds elements of
/// the box are zero-filled (and still counted).
__device__ __forceinline__ void tma_load_2d(u32 dst, const CUtensorMap* map, u32 bar, int x,
                                            int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(x), "r"(y)
      : "memory");
}
/// 3-D TMA tile load of the box at (x, y, z) element coordinates (x innermost); as tma_load_2d.
__device__ __forceinline__ void tma_load_3d(u32 dst, const CUtensorMap* map, u32 bar, int x, int y,
                                            int z) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(x), "r"(y), "r"(z)
      : "memory");
}
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Keeps the compiler from moving accesses of `r` across the asynchronous wgmma boundary.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

/// wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start
/// address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45 stride-dimension byte offset
/// >> 4, 49-51 base offset (0: every tile is 1024-byte aligned), 62-63 swizzle (1 = 128B).
/// A K-major 128B-swizzled tile (rows of 64 16-bit elements, 8-row atoms of 1024 bytes) is
/// wg_desc(row0 + 32 * k16_step, 16, 1024), for A and for a K-major B alike.
__device__ __forceinline__ std::uint64_t wg_desc(u32 addr, u32 lbo, u32 sbo) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<std::uint64_t>((lbo & 0x3FFFF) >> 4) << 16) |
         (static_cast<std::uint64_t>((sbo & 0x3FFFF) >> 4) << 32) | (std::uint64_t{1} << 62);
}

/// d[64×N] += A[64×16] · B[16×N] (fp32 accumulators; the scale-d predicate is always 1, so
/// zero d first) with A K-major (imm-trans-a 0) and B K-major (TRANS_B 0) or N-major (TRANS_B 1),
/// both from shared memory by descriptor. Accumulator layout (PTX ISA "wgmma .m64nNk16 register
/// fragment D"): d[4j + 2h + i] is row 16·warp + lane/4 + 8h, column 8j + 2·(lane%4) + i of the
/// 64×N tile (warp = the warp's index in its warpgroup).
template <typename T, int N, int TRANS_B>
struct Wgmma;

#define VB_WG_D8(i)                                                                               \
  "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]),       \
      "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define VB_WG_D32(i) VB_WG_D8((i) + 0), VB_WG_D8((i) + 8), VB_WG_D8((i) + 16), VB_WG_D8((i) + 24)
#define VB_WG_D64(i) VB_WG_D32((i) + 0), VB_WG_D32((i) + 32)
#define VB_WG_D128(i) VB_WG_D64((i) + 0), VB_WG_D64((i) + 64)
#define VB_WG_R16(a, b, c, d_, e, f, g, h, i, j, k, l, m, n, o, p)                                 \
  "%" #a ", %" #b ", %" #c ", %" #d_ ", %" #e ", %" #f ", %" #g ", %" #h ", %" #i ", %" #j        \
  ", %" #k ", %" #l ", %" #m ", %" #n ", %" #o ", %" #p
#define VB_WG_REGS32                                                                              \
  VB_WG_R16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) ", "                           \
  VB_WG_R16(16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31)
#define VB_WG_REGS64                                                                              \
  VB_WG_REGS32 ", "                                                                               \
  VB_WG_R16(32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47) ", "                 \
  VB_WG_R16(48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63)
#define VB_WG_REGS128                                                                             \
  VB_WG_REGS64 ", "                                                                               \
  VB_WG_R16(64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79) ", "                 \
  VB_WG_R16(80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95) ", "                 \
  VB_WG_R16(96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111) ", "     \
  VB_WG_R16(112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127)
// da, db, scale-d and trans-b follow the accumulators: %32.. for N = 64, %64.. for N = 128,
// %128.. for N = 256.
#define VB_WG_DEF(TYPE, PTXTY, NN, REGS, DOPS, IA, IB, IS, IT)                                     \
  template <int TB>                                                                               \
  struct Wgmma<TYPE, NN, TB> {                                                                    \
    __device__ __forceinline__ static void run(float (&d)[NN / 2], std::uint64_t da,              \
                                               std::uint64_t db) {                                \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                              \
                   "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32." PTXTY "." PTXTY " {" REGS    \
                   "}, %" #IA ", %" #IB ", p, 1, 1, 0, %" #IT ";\n}\n"                            \
                   : DOPS                                                                         \
                   : "l"(da), "l"(db), "r"(1), "n"(TB));                                          \
    }                                                                                             \
  };
VB_WG_DEF(__nv_bfloat16, "bf16", 64, VB_WG_REGS32, VB_WG_D32(0), 32, 33, 34, 35)
VB_WG_DEF(__half, "f16", 64, VB_WG_REGS32, VB_WG_D32(0), 32, 33, 34, 35)
VB_WG_DEF(__nv_bfloat16, "bf16", 128, VB_WG_REGS64, VB_WG_D64(0), 64, 65, 66, 67)
VB_WG_DEF(__half, "f16", 128, VB_WG_REGS64, VB_WG_D64(0), 64, 65, 66, 67)
VB_WG_DEF(__nv_bfloat16, "bf16", 256, VB_WG_REGS128, VB_WG_D128(0), 128, 129, 130, 131)
VB_WG_DEF(__half, "f16", 256, VB_WG_REGS128, VB_WG_D128(0), 128, 129, 130, 131)

/// d[64×N] += A[64×16] · B[16×N] with A from registers (a[0..3]: this thread's A fragment, the
/// layout of mma.m16n8k16's A fragment for the 16 rows of its warp: a0 = (row lane/4, k 2·(lane%4)
/// +0/1), a1 = row +8, a2 = k +8, a3 = row +8 and k +8, two 16-bit values per register, low half
/// first) and B from shared memory by descriptor, K-major (TRANS_B 0) or N-major (TRANS_B 1).
/// Accumulators as Wgmma.
template <typename T, int N, int TRANS_B>
struct WgmmaRA;
#define VB_WG_RA_DEF(TYPE, PTXTY, NN, REGS, DOPS, I0, I1, I2, I3, IB, IS, IT)                     \
  template <int TB>                                                                               \
  struct WgmmaRA<TYPE, NN, TB> {                                                                  \
    __device__ __forceinline__ static void run(float (&d)[NN / 2], const u32 (&a)[4],            \
                                               std::uint64_t db) {                                \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                             \
                   "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32." PTXTY "." PTXTY " {" REGS    \
                   "}, {%" #I0 ", %" #I1 ", %" #I2 ", %" #I3 "}, %" #IB ", p, 1, 1, %" #IT         \
                   ";\n}\n"                                                                      \
                   : DOPS                                                                         \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TB));       \
    }                                                                                             \
  };
VB_WG_RA_DEF(__nv_bfloat16, "bf16", 64, VB_WG_REGS32, VB_WG_D32(0), 32, 33, 34, 35, 36, 37, 38)
VB_WG_RA_DEF(__half, "f16", 64, VB_WG_REGS32, VB_WG_D32(0), 32, 33, 34, 35, 36, 37, 38)
VB_WG_RA_DEF(__nv_bfloat16, "bf16", 128, VB_WG_REGS64, VB_WG_D64(0), 64, 65, 66, 67, 68, 69, 70)
VB_WG_RA_DEF(__half, "f16", 128, VB_WG_REGS64, VB_WG_D64(0), 64, 65, 66, 67, 68, 69, 70)
#endif  // VB_WGMMA_BODY

// ---- host side ---------------------------------------------------------------------------------

/// cuTensorMapEncodeTiled (CUDA 12.0 ABI), fetched once from the driver through the runtime (no
/// -lcuda link); nullptr where the driver does not provide it.
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
inline EncodeTiledFn encode_tiled_fn() {
  static const EncodeTiledFn fn = []() -> EncodeTiledFn {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &q);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
      (void)cudaGetLastError();  // not sticky; do not let a later launch check report it
      return nullptr;
    }
    return reinterpret_cast<EncodeTiledFn>(p);
  }();
  return fn;
}

/// Encodes a 2-D row-major [rows, cols] tensor of T (__half or __nv_bfloat16) at `base` (row
/// pitch cols·2 bytes, which must be a multiple of 16; base 16-byte aligned) as a TMA map with a
/// box of box_rows (1..256) × 64 elements (64 × 2 bytes = one 128-byte swizzle span), 128B
/// swizzle, zero fill out of bounds. False if the driver refuses.
template <typename T>
bool make_tma_map(CUtensorMap* map, const T* base, int rows, int cols, int box_rows) {
  const EncodeTiledFn encode = encode_tiled_fn();
  if (encode == nullptr) return false;
  const CUtensorMapDataType dt = std::is_same<T, __half>::value
                                     ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * sizeof(T)};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t estrides[2] = {1, 1};
  return encode(map, dt, 2, const_cast<T*>(base), dims, strides, box, estrides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/// Encodes a row-major [batches, rows, cols] tensor of T (__half or __nv_bfloat16) at `base` (row
/// pitch cols·2 bytes and batch pitch rows·cols·2 bytes, multiples of 16; base 16-byte aligned)
/// as a 3-D TMA map with a box of 1 × box_rows (1..256) × 64 elements, 128B swizzle, zero fill
/// out of bounds: a box that runs past `rows` reads zeros, never the next batch's rows. False if
/// the driver refuses.
template <typename T>
bool make_tma_map_3d(CUtensorMap* map, const T* base, int batches, int rows, int cols, int box_rows) {
  const EncodeTiledFn encode = encode_tiled_fn();
  if (encode == nullptr) return false;
  const CUtensorMapDataType dt = std::is_same<T, __half>::value
                                     ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batches)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols) * sizeof(T),
                                 static_cast<cuuint64_t>(rows) * cols * sizeof(T)};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t estrides[3] = {1, 1, 1};
  return encode(map, dt, 3, const_cast<T*>(base), dims, strides, box, estrides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/// True when `kernel` carries its sm_90a body on the current device: compute capability 9.x,
/// the loaded image is sm_90 SASS, and the kernel's static shared memory is at least
/// `body_static_smem` bytes (the body's static mbarrier array, absent when the file was built for
/// compute_90 / sm_90 without the 'a' features). Cached per kernel and device (first 64
/// ordinals); no device synchronization.
template <auto Kernel>
bool wgmma_image_ok(std::size_t body_static_smem) {
  static std::atomic<int> cache[64];  // 0 unknown, 1 yes, 2 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (dev >= 0 && dev < 64 && cache[dev].load(std::memory_order_relaxed) != 0)
    return cache[dev].load(std::memory_order_relaxed) == 1;
  int major = 0;
  bool ok = false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    (void)cudaGetLastError();  // clear only the error this query raised
  } else if (major == 9) {
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, Kernel) != cudaSuccess)
      (void)cudaGetLastError();
    else
      ok = fa.binaryVersion == 90 && fa.sharedSizeBytes >= body_static_smem;
  }
  if (dev >= 0 && dev < 64) cache[dev].store(ok ? 1 : 2, std::memory_order_relaxed);
  return ok;
}

}  // namespace
