// VladBud GPU ceilings probe (DESIGN §5): measures the device-memory bandwidth and the peak
// compute per dtype of one NVIDIA GPU and prints one JSON object on stdout.
//
// Compiled at run time by src/backends/cuda/gpu_ceilings.cpp with nvcc for the detected compute
// capability (-gencode arch=compute_XY,code=sm_XY; sm_90a on compute capability 9.0, so that
// the wgmma path exists) and cached under cache_dir()/probes/. Standalone: no VladBud headers.
//
//   cuda_ceilings [--device N] [--quick] [--mode main|wgmma]
//
// --mode main (default):
//   bandwidth  copy (16-byte loads and stores, bytes read + written), read (16-byte loads, a
//              reduction), write (16-byte stores) and cudaMemcpyAsync device-to-device
//              (bytes read + written); buffers >= 64 x L2 (quick: >= 4 x L2), capped at 2 GiB
//              each and by free memory; best of N launches timed with cudaEvents.
//   compute    fp32 FFMA and fp64 DFMA (8 independent chains per thread, full occupancy),
//              fp64 DMMA m8n8k4 (sm_80+), fp16 and bf16 tensor cores through
//              mma.sync.aligned.m16n8k16 with fp32 accumulation (sm_80+; 8 independent
//              accumulators per warp, 2*16*8*16 FLOP per mma). Each kernel runs one full wave
//              (blocks = SMs x max resident blocks per SM); iterations are scaled so a launch
//              lasts >= 20 ms (quick: 3 ms); best of N.
// --mode wgmma (compute capability 9.0 built for sm_90a only): fp16 and bf16 through
//   wgmma.mma_async m64n256k16 (A from registers, B from shared memory), 2 warpgroups per
//   block, one block per SM, 2*64*256*16 FLOP per wgmma. Run as a separate process so that a
//   fault there cannot spoil the main measurements.
//
// Output (main): {"device", "cc", "sms", "l2_bytes", "buffer_bytes", "bw_gbs": {..},
//   "peak_tflops": {"fp32", "fp64", "fp16", "bf16"}, "peak_method": {..}, "probes_tflops": {..},
//   "clock_khz", "quick"}. Units: GB/s = 1e9 B/s, TFLOP/s = 1e12 FLOP/s, FMA = 2 FLOP.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t err_ = (x);                                                                        \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "cuda_ceilings: %s failed: %s (%s:%d)\n", #x, cudaGetErrorString(err_), \
                   __FILE__, __LINE__);                                                            \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

__device__ __forceinline__ uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// Random-looking 16-bit values of magnitude in [1, 2) with random sign, two per 32-bit word:
// realistic data for tensor-core power and clocks (zeros run faster than random data).
__device__ __forceinline__ uint32_t rand_pair(uint32_t seed, bool bf16) {
  const uint32_t h = hash32(seed);
  const uint32_t lo = bf16 ? (0x3f80u | (h & 0x7fu)) : (0x3c00u | (h & 0x3ffu));
  const uint32_t hi = bf16 ? (0x3f80u | ((h >> 8) & 0x7fu)) : (0x3c00u | ((h >> 10) & 0x3ffu));
  return ((lo | ((h >> 30) & 1u) << 15)) | ((hi | ((h >> 31) & 1u) << 15) << 16);
}

// ---- bandwidth kernels ---------------------------------------------------------------------

__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void read_kernel(const int4* __restrict__ src, size_t n, int* __restrict__ sink) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^
           d.w;
  }
  for (; i < n; i += stride) acc ^= src[i].x ^ src[i].y ^ src[i].z ^ src[i].w;
  sink[size_t(blockIdx.x) * blockDim.x + threadIdx.x] = acc;  // 4 B per thread, counted
}

__global__ void write_kernel(int4* __restrict__ dst, size_t n, int v) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const int4 val = make_int4(v, v + 1, v + 2, v + 3);
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = val;
}

// ---- compute kernels -----------------------------------------------------------------------

constexpr int kChains = 8;   // independent FMA chains per thread
constexpr int kUnroll = 16;  // FMAs per chain per loop trip
constexpr int kMmaAcc = 8;   // independent mma accumulators per warp

template <typename T>
__global__ void fma_kernel(T* __restrict__ out, int iters, T b, T c) {
  T a[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) a[j] = T(threadIdx.x + j) * T(1e-3);
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < kChains; ++j) a[j] = fma(a[j], b, c);
    }
  }
  T s = 0;
#pragma unroll
  for (int j = 0; j < kChains; ++j) s += a[j];
  out[size_t(blockIdx.x) * blockDim.x + threadIdx.x] = s;
}

__global__ void mma_kernel(float* __restrict__ out, int iters, int bf16) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[4], b[2];
  for (int k = 0; k < 4; ++k) a[k] = rand_pair(tid * 8 + k, bf16);
  for (int k = 0; k < 2; ++k) b[k] = rand_pair(tid * 8 + 4 + k, bf16);
  float acc[kMmaAcc][4];
#pragma unroll
  for (int j = 0; j < kMmaAcc; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  if (bf16) {
    for (int it = 0; it < iters; ++it) {
#pragma unroll
      for (int j = 0; j < kMmaAcc; ++j)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  } else {
    for (int it = 0; it < iters; ++it) {
#pragma unroll
      for (int j = 0; j < kMmaAcc; ++j)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kMmaAcc; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  out[tid] = s;
#else
  (void)iters;
  (void)bf16;
  out[blockIdx.x * blockDim.x + threadIdx.x] = 0.f;
#endif
}

__global__ void dmma_kernel(double* __restrict__ out, int iters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  const double a = 1.0 + (hash32(tid) & 0xffff) * 1e-6, b = 1.0 - (hash32(tid + 7) & 0xffff) * 1e-6;
  double acc[kMmaAcc][2];
#pragma unroll
  for (int j = 0; j < kMmaAcc; ++j) acc[j][0] = acc[j][1] = 0.0;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < kMmaAcc; ++j)
      asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                   : "+d"(acc[j][0]), "+d"(acc[j][1])
                   : "d"(a), "d"(b));
  }
  double s = 0.0;
#pragma unroll
  for (int j = 0; j < kMmaAcc; ++j) s += acc[j][0] + acc[j][1];
  out[tid] = s;
#else
  (void)iters;
  out[blockIdx.x * blockDim.x + threadIdx.x] = 0.0;
#endif
}

// ---- wgmma (sm_90a) --------------------------------------------------------------------------

constexpr int kWgmmaThreads = 256;  // 2 warpgroups per block
constexpr int kWgmmaPerBatch = 8;   // wgmma issued between commit/wait

#define VB_D8(i)                                                                            \
  "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), \
      "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define VB_D128                                                                                    \
  VB_D8(0), VB_D8(8), VB_D8(16), VB_D8(24), VB_D8(32), VB_D8(40), VB_D8(48), VB_D8(56), VB_D8(64), \
      VB_D8(72), VB_D8(80), VB_D8(88), VB_D8(96), VB_D8(104), VB_D8(112), VB_D8(120)
#define VB_WGMMA_D                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "       \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "       \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "       \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "       \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "       \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, " \
  "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "   \
  "%125, %126, %127}, "

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VB_HAVE_WGMMA 1
// Keeps the compiler from moving accumulator accesses across wgmma fences (as CUTLASS's
// warpgroup_fence_operand does).
__device__ __forceinline__ void fence_operand(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

template <bool kBf16>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], const uint32_t (&a)[4],
                                                 uint64_t desc_b) {
  if constexpr (kBf16) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " VB_WGMMA_D
                 "{%128, %129, %130, %131}, %132, 1, 1, 1, 0;\n"
                 : VB_D128
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " VB_WGMMA_D
                 "{%128, %129, %130, %131}, %132, 1, 1, 1, 0;\n"
                 : VB_D128
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
}
#else
#define VB_HAVE_WGMMA 0
#endif

// B tile: 16 (K) x 256 (N) 16-bit values = 8 KiB, no swizzle; the buffer is 16 KiB so that any
// reading of the descriptor's leading/stride offsets stays inside it.
template <bool kBf16>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    wgmma_kernel(float* __restrict__ out, int iters, int* built) {
#if VB_HAVE_WGMMA
  if (blockIdx.x == 0 && threadIdx.x == 0) *built = 1;
  __shared__ __align__(128) uint32_t smem_b[4096];
  for (int i = threadIdx.x; i < 4096; i += blockDim.x)
    smem_b[i] = rand_pair(blockIdx.x * 4096 + i, kBf16);
  __syncthreads();
  // Generic-proxy stores to shared memory that the async proxy (wgmma) reads next.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_b));
  // Matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address >> 4 in bits 0-13,
  // leading-dimension byte offset >> 4 in bits 16-29 (128 B: the next 8x16 B core matrix along
  // K), stride-dimension byte offset >> 4 in bits 32-45 (256 B: the next 8 rows along N),
  // swizzle mode 0 (none) in bits 62-63.
  const uint64_t desc_b =
      (uint64_t((addr & 0x3FFFF) >> 4)) | (uint64_t(128 >> 4) << 16) | (uint64_t(256 >> 4) << 32);
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[4];
  for (int k = 0; k < 4; ++k) a[k] = rand_pair(tid * 4 + k + 12345, kBf16);
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 128; ++i) fence_operand(d[i]);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < kWgmmaPerBatch; ++k) wgmma_m64n256k16<kBf16>(d, a, desc_b);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < 128; ++i) fence_operand(d[i]);
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 128; ++i) s += d[i];
  out[tid] = s;
#else
  (void)iters;
  if (blockIdx.x == 0 && threadIdx.x == 0) *built = 0;
  out[blockIdx.x * blockDim.x + threadIdx.x] = 0.f;
#endif
}

// ---- host side -------------------------------------------------------------------------------

struct Opts {
  int device = 0;
  bool quick = false;
  std::string mode = "main";
};

struct Ctx {
  cudaDeviceProp prop{};
  int sms = 0;
  int clock_khz = 0;
  bool quick = false;
  cudaEvent_t t0{}, t1{};
};

template <typename Kernel>
int full_wave_blocks(const Ctx& c, Kernel k, int threads, size_t smem = 0) {
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, smem));
  return std::max(1, per_sm) * c.sms;
}

// Times `launch` (one kernel launch or copy) `reps` times after `warmup` untimed runs; returns
// the best time in seconds.
template <typename F>
double best_time(const Ctx& c, F launch, int reps, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(c.t0));
    launch();
    CHECK(cudaEventRecord(c.t1));
    CHECK(cudaEventSynchronize(c.t1));
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, c.t0, c.t1));
    best = std::min(best, ms * 1e-3);
  }
  return best;
}

// Runs launch(iters) once to size the work so that one launch lasts >= target seconds, then
// returns the best time over reps at that size; `iters_out` receives the size used.
template <typename F>
double timed_compute(const Ctx& c, F launch, int& iters_out) {
  const double target = c.quick ? 3e-3 : 20e-3;
  const int reps = c.quick ? 3 : 10;
  int iters = 64;
  for (int round = 0; round < 8; ++round) {
    const double t = best_time(
        c, [&] { launch(iters); }, 1, 1);
    if (t >= target) break;
    const double scale = std::min(64.0, std::max(2.0, 1.2 * target / std::max(t, 1e-6)));
    const double next = iters * scale;
    if (next > 1e8) break;
    iters = static_cast<int>(next);
  }
  iters_out = iters;
  return best_time(
      c, [&] { launch(iters); }, reps, 1);
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    o += ch;
  }
  return o;
}

std::string json_map(const std::map<std::string, double>& m) {
  std::string o = "{";
  for (const auto& [k, v] : m) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    o += (o.size() > 1 ? ", \"" : "\"") + k + "\": " + buf;
  }
  return o + "}";
}

std::string json_smap(const std::map<std::string, std::string>& m) {
  std::string o = "{";
  for (const auto& [k, v] : m)
    o += (o.size() > 1 ? ", \"" : "\"") + k + "\": \"" + json_escape(v) + "\"";
  return o + "}";
}

void print_header(const Ctx& c) {
  std::printf("{\"device\": \"%s\", \"cc\": \"%d.%d\", \"sms\": %d, \"l2_bytes\": %d, ",
              json_escape(c.prop.name).c_str(), c.prop.major, c.prop.minor, c.sms,
              c.prop.l2CacheSize);
}

int run_main(Ctx& c) {
  std::map<std::string, double> bw, peaks, probes;
  std::map<std::string, std::string> methods;

  // ---- bandwidth ----
  size_t free_b = 0, total_b = 0;
  CHECK(cudaMemGetInfo(&free_b, &total_b));
  const size_t l2 = static_cast<size_t>(std::max(c.prop.l2CacheSize, 1 << 20));
  size_t bytes = std::max<size_t>((c.quick ? 4 : 64) * l2, size_t(64) << 20);
  bytes = std::min<size_t>(bytes, size_t(2) << 30);
  bytes = std::min<size_t>(bytes, free_b / 3);
  bytes &= ~size_t(4095);
  const size_t n = bytes / sizeof(int4);
  int4 *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, bytes));
  CHECK(cudaMalloc(&dst, bytes));
  CHECK(cudaMemset(src, 1, bytes));
  CHECK(cudaMemset(dst, 0, bytes));
  const int bw_threads = 256;
  const int bw_blocks = full_wave_blocks(c, copy_kernel, bw_threads);
  int* sink = nullptr;
  CHECK(cudaMalloc(&sink, size_t(bw_blocks) * bw_threads * sizeof(int)));
  const int reps = c.quick ? 5 : 20;
  double t = best_time(
      c, [&] { copy_kernel<<<bw_blocks, bw_threads>>>(src, dst, n); }, reps);
  bw["copy"] = 2.0 * bytes / t / 1e9;
  const int rd_blocks = full_wave_blocks(c, read_kernel, bw_threads);
  t = best_time(
      c, [&] { read_kernel<<<rd_blocks, bw_threads>>>(src, n, sink); }, reps);
  bw["read"] = (bytes + size_t(rd_blocks) * bw_threads * sizeof(int)) / t / 1e9;
  const int wr_blocks = full_wave_blocks(c, write_kernel, bw_threads);
  t = best_time(
      c, [&] { write_kernel<<<wr_blocks, bw_threads>>>(dst, n, 7); }, reps);
  bw["write"] = bytes / t / 1e9;
  t = best_time(
      c, [&] { CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, reps);
  bw["memcpy_d2d"] = 2.0 * bytes / t / 1e9;
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));
  CHECK(cudaFree(sink));

  // ---- compute ----
  const int threads = 256;
  const size_t max_out = size_t(c.sms) * 2048;  // >= blocks x threads for every kernel here
  void* out = nullptr;
  CHECK(cudaMalloc(&out, max_out * sizeof(double)));
  int iters = 0;
  {
    const int blocks = full_wave_blocks(c, fma_kernel<float>, threads);
    const double s = timed_compute(
        c,
        [&](int it) {
          fma_kernel<float><<<blocks, threads>>>(static_cast<float*>(out), it, 0.999999f, 1e-6f);
        },
        iters);
    probes["fp32_ffma"] = 2.0 * kChains * kUnroll * double(iters) * blocks * threads / s / 1e12;
  }
  {
    const int blocks = full_wave_blocks(c, fma_kernel<double>, threads);
    const double s = timed_compute(
        c,
        [&](int it) {
          fma_kernel<double><<<blocks, threads>>>(static_cast<double*>(out), it, 0.999999, 1e-6);
        },
        iters);
    probes["fp64_dfma"] = 2.0 * kChains * kUnroll * double(iters) * blocks * threads / s / 1e12;
  }
  peaks["fp32"] = probes["fp32_ffma"];
  methods["fp32"] = "FFMA, 8 independent chains per thread, one full wave";
  peaks["fp64"] = probes["fp64_dfma"];
  methods["fp64"] = "DFMA, 8 independent chains per thread, one full wave";
  if (c.prop.major >= 8) {
    {
      const int blocks = full_wave_blocks(c, dmma_kernel, threads);
      const double s = timed_compute(
          c, [&](int it) { dmma_kernel<<<blocks, threads>>>(static_cast<double*>(out), it); },
          iters);
      probes["fp64_dmma"] =
          2.0 * 8 * 8 * 4 * double(kMmaAcc) * iters * (blocks * threads / 32) / s / 1e12;
    }
    if (probes["fp64_dmma"] > peaks["fp64"]) {
      peaks["fp64"] = probes["fp64_dmma"];
      methods["fp64"] = "DMMA mma.sync m8n8k4 (tensor core), 8 accumulators per warp";
    }
    for (int bf = 0; bf < 2; ++bf) {
      const int blocks = full_wave_blocks(c, mma_kernel, threads);
      const double s = timed_compute(
          c, [&](int it) { mma_kernel<<<blocks, threads>>>(static_cast<float*>(out), it, bf); },
          iters);
      const double tf =
          2.0 * 16 * 8 * 16 * double(kMmaAcc) * iters * (blocks * threads / 32) / s / 1e12;
      const std::string key = bf ? "bf16" : "fp16";
      probes[key + "_mma_sync"] = tf;
      peaks[key] = tf;
      methods[key] = "mma.sync m16n8k16 " + key + " -> fp32 accumulate, 8 accumulators per warp";
    }
  } else {
    methods["fp16"] = "not measured (mma.sync m16n8k16 needs sm_80+)";
    methods["bf16"] = "not measured (mma.sync m16n8k16 needs sm_80+)";
  }
  CHECK(cudaFree(out));

  print_header(c);
  std::printf(
      "\"buffer_bytes\": %zu, \"bw_gbs\": %s, \"peak_tflops\": %s, \"peak_method\": %s, "
      "\"probes_tflops\": %s, \"clock_khz\": %d, \"quick\": %s}\n",
      bytes, json_map(bw).c_str(), json_map(peaks).c_str(), json_smap(methods).c_str(),
      json_map(probes).c_str(), c.clock_khz, c.quick ? "true" : "false");
  return 0;
}

int run_wgmma(Ctx& c) {
  if (c.prop.major != 9 || c.prop.minor != 0) {
    std::fprintf(stderr, "cuda_ceilings: wgmma needs compute capability 9.0 (sm_90a), have %d.%d\n",
                 c.prop.major, c.prop.minor);
    return 2;
  }
  std::map<std::string, double> peaks;
  std::map<std::string, std::string> methods;
  const int blocks = c.sms;  // one block (2 warpgroups) per SM
  float* out = nullptr;
  int* built = nullptr;
  CHECK(cudaMalloc(&out, size_t(blocks) * kWgmmaThreads * sizeof(float)));
  CHECK(cudaMalloc(&built, sizeof(int)));
  CHECK(cudaMemset(built, 0xff, sizeof(int)));
  wgmma_kernel<true><<<1, kWgmmaThreads>>>(out, 1, built);
  CHECK(cudaGetLastError());
  int have = -1;
  CHECK(cudaMemcpy(&have, built, sizeof(int), cudaMemcpyDeviceToHost));
  if (have != 1) {
    std::fprintf(stderr,
                 "cuda_ceilings: this build has no wgmma path (build with "
                 "-gencode arch=compute_90a,code=sm_90a)\n");
    return 2;
  }
  int iters = 0;
  for (int bf = 0; bf < 2; ++bf) {
    const double s = timed_compute(
        c,
        [&](int it) {
          if (bf)
            wgmma_kernel<true><<<blocks, kWgmmaThreads>>>(out, it, built);
          else
            wgmma_kernel<false><<<blocks, kWgmmaThreads>>>(out, it, built);
        },
        iters);
    const double wgmmas = double(iters) * kWgmmaPerBatch * blocks * (kWgmmaThreads / 128);
    const std::string key = bf ? "bf16" : "fp16";
    peaks[key] = 2.0 * 64 * 256 * 16 * wgmmas / s / 1e12;
    methods[key] = "wgmma.mma_async m64n256k16 " + key +
                   " -> fp32 (A in registers, B in shared memory), 2 warpgroups per SM";
  }
  CHECK(cudaFree(out));
  CHECK(cudaFree(built));
  print_header(c);
  std::printf("\"peak_tflops\": %s, \"peak_method\": %s, \"quick\": %s}\n", json_map(peaks).c_str(),
              json_smap(methods).c_str(), c.quick ? "true" : "false");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--device" && i + 1 < argc) {
      o.device = std::atoi(argv[++i]);
    } else if (a == "--mode" && i + 1 < argc) {
      o.mode = argv[++i];
    } else {
      std::fprintf(stderr, "usage: cuda_ceilings [--device N] [--quick] [--mode main|wgmma]\n");
      return 2;
    }
  }
  Ctx c;
  c.quick = o.quick;
  CHECK(cudaSetDevice(o.device));
  CHECK(cudaGetDeviceProperties(&c.prop, o.device));
  c.sms = c.prop.multiProcessorCount;
  CHECK(cudaDeviceGetAttribute(&c.clock_khz, cudaDevAttrClockRate, o.device));
  CHECK(cudaEventCreate(&c.t0));
  CHECK(cudaEventCreate(&c.t1));
  if (o.mode == "main") return run_main(c);
  if (o.mode == "wgmma") return run_wgmma(c);
  std::fprintf(stderr, "cuda_ceilings: unknown mode '%s'\n", o.mode.c_str());
  return 2;
}
