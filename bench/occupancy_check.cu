// Cross-check of VladBud's occupancy calculator (src/analysis/occupancy.h) against the CUDA
// runtime's own cudaOccupancyMaxActiveBlocksPerMultiprocessor on a real GPU. Prints one JSON
// object per line: {"kernel", "threads", "dynamic_smem", "registers", "static_smem",
// "blocks_per_sm"} plus a first line describing the device. Run by bench/occupancy_check.sh.
#include <cstdio>

#include <cuda_runtime.h>

__global__ void light(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

// Register-heavy: 64 live accumulators.
__global__ void heavy(const float* __restrict__ x, float* y, int n) {
  float a[64];
#pragma unroll
  for (int k = 0; k < 64; ++k) a[k] = x[k * 32 + threadIdx.x];
  for (int it = 0; it < n; ++it) {
#pragma unroll
    for (int k = 0; k < 64; ++k) a[k] = a[k] * a[(k + 3) % 64] + 1.0f;
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < 64; ++k) s += a[k];
  y[threadIdx.x] = s;
}

// 40 KB of static shared memory.
__global__ void smem40k(float* y) {
  __shared__ float t[10240];
  t[threadIdx.x] = threadIdx.x;
  __syncthreads();
  y[threadIdx.x] = t[(threadIdx.x * 13) % 10240];
}

// Dynamic shared memory only.
__global__ void dyn(float* y) {
  extern __shared__ float d[];
  d[threadIdx.x] = threadIdx.x;
  __syncthreads();
  y[threadIdx.x] = d[(threadIdx.x * 7) % blockDim.x];
}

template <typename K>
void report(const char* name, K kernel, int threads, size_t dyn_smem) {
  cudaFuncAttributes a{};
  cudaFuncGetAttributes(&a, kernel);
  if (dyn_smem > 48 * 1024)
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(dyn_smem));
  int blocks = -1;
  const cudaError_t e =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dyn_smem);
  std::printf(
      "{\"kernel\": \"%s\", \"threads\": %d, \"dynamic_smem\": %zu, \"registers\": %d, "
      "\"static_smem\": %zu, \"blocks_per_sm\": %d, \"error\": \"%s\"}\n",
      name, threads, dyn_smem, a.numRegs, a.sharedSizeBytes, blocks,
      e == cudaSuccess ? "" : cudaGetErrorString(e));
}

int main() {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    std::printf("{\"error\": \"no CUDA device\"}\n");
    return 1;
  }
  std::printf(
      "{\"device\": \"%s\", \"cc\": \"%d.%d\", \"regs_per_sm\": %d, \"smem_per_sm\": %zu, "
      "\"smem_per_block_optin\": %zu, \"reserved_smem_per_block\": %zu, \"max_threads_per_sm\": "
      "%d, \"max_blocks_per_sm\": %d}\n",
      p.name, p.major, p.minor, p.regsPerMultiprocessor, p.sharedMemPerMultiprocessor,
      p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock, p.maxThreadsPerMultiProcessor,
      p.maxBlocksPerMultiProcessor);
  for (int t : {32, 64, 96, 128, 256, 512, 1024}) {
    report("light", light, t, 0);
    report("heavy", heavy, t, 0);
    report("smem40k", smem40k, t, 0);
  }
  for (size_t d : {size_t{0}, size_t{1000}, size_t{16384}, size_t{50000}, size_t{100000},
                   size_t{200000}, size_t{232448}})
    report("dyn", dyn, 256, d);
  return 0;
}
