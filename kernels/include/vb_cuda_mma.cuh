// vb_cuda_mma.cuh: inline-PTX device helpers shared by the tensor-core CUDA starters
// (kernels/cuda/{matmul,fused_mlp,flash_attention}.cu).
//
// What it holds, all in the anonymous namespace of the including translation unit (every
// starter is one .so; nothing here has external linkage):
//   u32                                  std::uint32_t (shared-memory addresses, packed fragments)
//   smem_addr                            generic -> shared-window address (__cvta_generic_to_shared)
//   cp_async16, cp_async_commit,
//   cp_async_wait<N>                     16-byte cp.async.cg (zero-fill when !valid); commit/wait_group
//   ldsm_x4, ldsm_x4_t                   ldmatrix.m8n8.x4 (.trans) of 16-bit elements
//   mma16816<T>                          mma.sync m16n8k16, T = __half or __nv_bfloat16, fp32
//                                        accumulators; left out if VB_MMA_OWN_MMA16816 is defined
//                                        (matmul.cu keeps its own, explicitly specialized one)
//
// Requires sm_80 or newer (cp.async, ldmatrix, bf16 mma). Include it after the starter's
// @vb-param block and before the starter's own anonymous namespace; it depends on no macro.
// Each helper is one PTX instruction, forceinline: including it changes no generated code.

#pragma once

#include "vb_cuda.cuh"

#include <cstdint>
#include <type_traits>

namespace {

using u32 = std::uint32_t;

__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

/// 16-byte global->shared async copy; `valid` false zero-fills the 16 bytes (src-size 0).
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
/// 4-byte global->shared async copy (cp.async.ca: the 4- and 8-byte sizes need .ca); `valid`
/// false zero-fills the 4 bytes. For operands whose rows are not 16-byte aligned (K or N not a
/// multiple of 4 floats): still asynchronous, so the pipeline overlaps loads with the MMAs.
__device__ __forceinline__ void cp_async4(u32 dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// ldmatrix .x4: lanes 8i..8i+7 give the row addresses of 8×8 matrix i; r[i] = this lane's
/// pair (row lane/4, columns 2·(lane%4), +1) of matrix i.
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
/// ldmatrix .x4.trans: as ldsm_x4 of the transposed matrices (lane gets rows 2·(lane%4), +1 of
/// column lane/4).
__device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

#ifndef VB_MMA_OWN_MMA16816
/// d += a·b, m16n8k16, fp32 accumulators (fragment layout: PTX ISA, mma.m16n8k16).
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
#endif

}  // namespace
