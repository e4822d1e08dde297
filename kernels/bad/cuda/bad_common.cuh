// Shared by the deliberately bad CUDA kernels (tests/integration_cuda_backend.cpp): a correct
// softmax over the last dimension (one block per row), so each bad kernel differs from a good
// one only by its one defect.
#pragma once

#include "vb_cuda.cuh"

namespace bad {

/// y = softmax(x) row by row; with `skip_last` the very last element of y is left unwritten.
template <typename T>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, long long R, long long C,
                             bool skip_last) {
  const long long r = blockIdx.x;
  if (r >= R) return;
  const T* xr = x + r * C;
  T* yr = y + r * C;
  __shared__ float red[32];
  float m = -INFINITY;
  for (long long c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, vbk::to_f32(xr[c]));
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0.f;
  for (long long c = threadIdx.x; c < C; c += blockDim.x) s += expf(vbk::to_f32(xr[c]) - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
  __syncthreads();
  s = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += red[w];
  for (long long c = threadIdx.x; c < C; c += blockDim.x) {
    if (skip_last && r == R - 1 && c == C - 1) continue;
    yr[c] = vbk::from_f32<T>(expf(vbk::to_f32(xr[c]) - m) / s);
  }
}

/// Launches softmax_rows for in[0] -> out[0] on `stream`; 0 or a vbk::fail code.
inline int softmax(const DLTensor* in, DLTensor* out, cudaStream_t stream, bool skip_last = false) {
  const long long R = in[0].shape[0], C = in[0].shape[1];
  if (R == 0 || C == 0) return 0;
  return vbk::dispatch_float(vbk::dtype_of(in[0]), [&](auto tag) {
    using T = decltype(tag);
    softmax_rows<T><<<static_cast<unsigned>(R), 256, 0, stream>>>(
        static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), R, C, skip_last);
    VBK_CUDA_CHECK_LAUNCH("softmax_rows");
    return 0;
  });
}

}  // namespace bad
