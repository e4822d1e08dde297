// VladBud kernel SDK for CUDA C++ kernel sources (backend "cuda"): the kernel ABI of DESIGN §3
// on device memory, plus dtype helpers for fp16 / bf16 / fp32 device code.
//
// A CUDA kernel source is ONE .cu file that includes this header and defines
//
//   extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs,
//                                DLTensor* outputs, int n_outputs,
//                                const double* attrs, int n_attrs, void* stream);
//
// Tensors are dense, row-major, in device memory (DLDevice kDLCUDA); the DLTensor descriptors
// themselves are host memory. `stream` is the cudaStream_t to launch on: launch every kernel
// on it (work on another stream escapes the evaluator's event timing and is flagged). Return 0
// after the launches (do not synchronize), or vbk::fail("...") on a bad argument or a launch
// error (VBK_CUDA_CHECK_LAUNCH does that).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "vb_kernel.h"

namespace vbk {

/// The stream argument of vb_kernel_run as a cudaStream_t.
inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

/// Storage type of each dtype on the device.
template <Dt D> struct StorageOf;
template <> struct StorageOf<Dt::F16> { using type = __half; };
template <> struct StorageOf<Dt::BF16> { using type = __nv_bfloat16; };
template <> struct StorageOf<Dt::F32> { using type = float; };

/// Element -> float (exact for all three dtypes).
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }

/// float -> element, rounding to nearest even (the oracle's rounding).
template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }

/// Calls f(T{}) with T the storage type of `dt` (F16/BF16/F32); returns f's result, or a
/// vbk::fail for any other dtype.
template <typename F>
inline int dispatch_float(Dt dt, F&& f) {
  switch (dt) {
    case Dt::F16: return f(__half{});
    case Dt::BF16: return f(__nv_bfloat16{});
    case Dt::F32: return f(float{});
    default: return fail("unsupported dtype (want fp16, bf16 or fp32)");
  }
}

/// True when the tensor's data lives on a CUDA device.
inline bool on_device(const DLTensor& t) {
  return t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged;
}

/// check_args_on(kDLCUDA, ...): counts, device-memory tensors, float dtypes (see vb_kernel.h).
inline int check_cuda_args(const DLTensor* in, int n_in, int want_in, DLTensor* out, int n_out,
                           int want_out, int n_attrs, int want_attrs,
                           unsigned int_inputs_mask = 0) {
  return check_args_on(kDLCUDA, in, n_in, want_in, out, n_out, want_out, n_attrs, want_attrs,
                       int_inputs_mask);
}

/// Checks cudaGetLastError() after a launch; on error records "<what>: <cuda error string>".
inline int check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return fail("%s: %s", what, cudaGetErrorString(e));
  return 0;
}

}  // namespace vbk

/// `VBK_CUDA_CHECK_LAUNCH("softmax_kernel");` right after a launch returns on a launch error.
#define VBK_CUDA_CHECK_LAUNCH(what)                          \
  do {                                                       \
    if (int vbk_e_ = ::vbk::check_launch(what)) return vbk_e_; \
  } while (0)
