// usage: bash bench/cuda_mma_selfcheck.sh      (on a machine with a CUDA GPU; writes to $OUT if set)
//
// Standalone check of the CUDA starter kernels kernels/cuda/{matmul,flash_attention,fused_mlp}.cu
// without VladBud: the script builds each .cu into a .so with the kernel-build command of the
// CUDA backend, and this program dlopens them, runs vb_kernel_run on DLTensors over cudaMalloc'ed
// memory on a non-default stream, and compares with a plain fp64 host reference, shape by shape
// and dtype by dtype (the test, edge and stability sizes of src/kernels/<type>.cpp, plus a few
// extra head dims). Metric as src/eval/compare.cpp: relative Frobenius error against the dtype's
// threshold (fp16 1e-3, bf16 1.6e-2, fp32 1e-5), every row within 5x the threshold, the NaN/Inf
// pattern equal and no output element left holding the NaN poison; every case runs twice and
// the two outputs must agree bitwise. Then bf16 4096³ matmul TFLOP/s (CUDA events, median of 20)
// next to cuBLAS (cublasGemmEx, bf16 in/out, fp32 compute) on the same inputs, the same for
// every matmul variant .so found, and bf16 TFLOP/s of the flash_attention and fused_mlp
// benchmark sizes. One line per case; exit status 1 if any case failed.
//
//   cuda_mma_selfcheck BUILD_DIR     (BUILD_DIR holds matmul.so, flash_attention.so, fused_mlp.so,
//                                     optionally variants/*.so (matmul variants) and
//                                     extra/{flash_attention,fused_mlp}__TAG.so (other -D parameter
//                                     sets, checked on a subset of shapes))
#ifndef VB_NO_CUBLAS
#include <cublas_v2.h>
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

// ---- plumbing ------------------------------------------------------------------------------------

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, \
                   __LINE__, #x);                                                           \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)

using RunFn = int (*)(const DLTensor*, int, DLTensor*, int, const double*, int, void*);
using ErrFn = const char* (*)();

struct Lib {
  std::string name;
  RunFn run = nullptr;
  ErrFn err = nullptr;
};

bool load_lib(const std::string& path, const std::string& name, Lib& lib) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::printf("FAIL load %s: %s\n", path.c_str(), dlerror());
    return false;
  }
  lib.name = name;
  lib.run = reinterpret_cast<RunFn>(dlsym(h, "vb_kernel_run"));
  lib.err = reinterpret_cast<ErrFn>(dlsym(h, "vb_kernel_last_error"));
  if (!lib.run || !lib.err) {
    std::printf("FAIL load %s: vb_kernel_run / vb_kernel_last_error missing\n", path.c_str());
    return false;
  }
  return true;
}

void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& f) {
  const int nt = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t chunk = (n + nt - 1) / nt;
  std::vector<std::thread> th;
  for (int t = 0; t < nt; ++t) {
    const std::int64_t lo = t * chunk, hi = std::min(n, lo + chunk);
    if (lo < hi) th.emplace_back(f, lo, hi);
  }
  for (auto& x : th) x.join();
}

enum class DT { F16, BF16, F32 };
const char* dt_name(DT d) { return d == DT::F16 ? "fp16" : d == DT::BF16 ? "bf16" : "fp32"; }
std::size_t dt_size(DT d) { return d == DT::F32 ? 4 : 2; }
double dt_thr(DT d) { return d == DT::F16 ? 1e-3 : d == DT::BF16 ? 1.6e-2 : 1e-5; }
double dt_max(DT d) { return d == DT::F16 ? 65504.0 : d == DT::BF16 ? 3.3895313892515355e38 : 3.4028234663852886e38; }
double dt_min_normal(DT d) { return d == DT::F16 ? 6.103515625e-05 : 1.1754943508222875e-38; }
DLDataType dl_type(DT d) {
  DLDataType t;
  t.code = d == DT::BF16 ? kDLBfloat : kDLFloat;
  t.bits = d == DT::F32 ? 32 : 16;
  t.lanes = 1;
  return t;
}

/// Rounds v to the dtype (RNE) and returns the bits in `out` at element i; returns the rounded value.
double put(DT d, double v, void* out, std::size_t i) {
  const float f = static_cast<float>(v);
  if (d == DT::F32) {
    static_cast<float*>(out)[i] = f;
    return f;
  }
  if (d == DT::F16) {
    const __half h = __float2half_rn(f);
    static_cast<__half*>(out)[i] = h;
    return __half2float(h);
  }
  const __nv_bfloat16 b = __float2bfloat16_rn(f);
  static_cast<__nv_bfloat16*>(out)[i] = b;
  return __bfloat162float(b);
}
double get(DT d, const void* p, std::size_t i) {
  if (d == DT::F32) return static_cast<const float*>(p)[i];
  if (d == DT::F16) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0,1)
  double normal() {
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

/// A tensor: host values (already rounded to the dtype), device copy, shape.
struct Tensor {
  DT dt;
  std::vector<std::int64_t> shape;
  std::vector<double> v;
  void* dev = nullptr;
  std::int64_t n() const {
    std::int64_t k = 1;
    for (auto s : shape) k *= s;
    return k;
  }
  Tensor(DT d, std::vector<std::int64_t> sh) : dt(d), shape(std::move(sh)) {
    v.assign(static_cast<std::size_t>(n()), 0.0);
    CK(cudaMalloc(&dev, std::max<std::size_t>(16, static_cast<std::size_t>(n()) * dt_size(dt))));
  }
  ~Tensor() { cudaFree(dev); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  /// Fills v with gen() rounded to the dtype and uploads.
  void fill(const std::function<double(std::int64_t)>& gen) {
    std::vector<unsigned char> bytes(static_cast<std::size_t>(n()) * dt_size(dt));
    for (std::int64_t i = 0; i < n(); ++i) v[i] = put(dt, gen(i), bytes.data(), i);
    CK(cudaMemcpy(dev, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> bytes(static_cast<std::size_t>(n()) * dt_size(dt));
    CK(cudaMemcpy(bytes.data(), dev, bytes.size(), cudaMemcpyDeviceToHost));
    return bytes;
  }
  DLTensor dl() {
    DLTensor t{};
    t.data = dev;
    t.device = DLDevice{kDLCUDA, 0};
    t.ndim = static_cast<int>(shape.size());
    t.dtype = dl_type(dt);
    t.shape = shape.data();
    t.strides = nullptr;
    t.byte_offset = 0;
    return t;
  }
};

cudaStream_t g_stream;
int g_pass = 0, g_fail = 0;

/// Runs lib on (ins -> out) with the output poisoned first; "" on success, else the error text.
std::string run_once(const Lib& lib, std::vector<Tensor*> ins, Tensor& out, const std::vector<double>& attrs) {
  std::vector<DLTensor> din;
  for (auto* t : ins) din.push_back(t->dl());
  DLTensor dout = out.dl();
  CK(cudaMemsetAsync(out.dev, 0xff, static_cast<std::size_t>(out.n()) * dt_size(out.dt), g_stream));
  const int rc = lib.run(din.data(), static_cast<int>(din.size()), &dout, 1,
                         attrs.empty() ? nullptr : attrs.data(), static_cast<int>(attrs.size()), g_stream);
  if (rc != 0) return std::string("vb_kernel_run returned ") + std::to_string(rc) + ": " + lib.err();
  const cudaError_t e = cudaStreamSynchronize(g_stream);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "fatal: %s after %s\n", cudaGetErrorString(e), lib.name.c_str());
    std::exit(2);  // a sticky error (e.g. illegal address) poisons the context
  }
  return "";
}

/// Compares as src/eval/compare.cpp; prints one line.
void report(const std::string& what, DT dt, const std::vector<unsigned char>& out,
            const std::vector<unsigned char>& out2, const std::vector<double>& ref,
            std::int64_t row_len, const std::string& err) {
  const double thr = dt_thr(dt);
  if (!err.empty()) {
    std::printf("FAIL %-52s %s  %s\n", what.c_str(), dt_name(dt), err.c_str());
    ++g_fail;
    return;
  }
  const std::int64_t n = static_cast<std::int64_t>(ref.size());
  const std::int64_t rows = row_len > 0 ? n / row_len : 0;
  double e2 = 0, r2 = 0;
  std::vector<double> re2(rows), rr2(rows);
  std::int64_t bad = -1;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < row_len; ++j) {
      const std::int64_t i = r * row_len + j;
      const double o = get(dt, out.data(), i), f = ref[i];
      const bool fo = std::isfinite(o), ff = std::isfinite(f);
      if (fo != ff || (!ff && (std::isnan(o) != std::isnan(f) || (!std::isnan(f) && o != f)))) {
        if (bad < 0) bad = i;
        continue;
      }
      if (!ff) continue;
      re2[r] += (o - f) * (o - f);
      rr2[r] += f * f;
    }
    e2 += re2[r];
    r2 += rr2[r];
  }
  const bool det = out == out2;
  const double rel = r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2 / std::max<double>(1, n));
  const double rms_row = rows > 0 ? std::sqrt(r2 / rows) : 0;
  double worst = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double den = std::max(std::sqrt(rr2[r]), rms_row);
    const double e = den > 0 ? std::sqrt(re2[r]) / den : std::sqrt(re2[r] / row_len);
    worst = std::max(worst, e);
  }
  std::string why;
  if (bad >= 0)
    why = "NaN/Inf/poison at element " + std::to_string(bad) + " (got " +
          std::to_string(get(dt, out.data(), bad)) + ", want " + std::to_string(ref[bad]) + ")";
  else if (rel > thr)
    why = "relative error above threshold";
  else if (worst > 5 * thr)
    why = "a row's error above 5x threshold";
  else if (!det)
    why = "two runs differ bitwise";
  const bool ok = why.empty();
  std::printf("%s %-52s %s rel=%.2e row=%.2e thr=%.1e det=%s%s%s\n", ok ? "PASS" : "FAIL",
              what.c_str(), dt_name(dt), rel, worst, thr, det ? "ok" : "NO", ok ? "" : "  ",
              why.c_str());
  (ok ? g_pass : g_fail)++;
}

// ---- matmul --------------------------------------------------------------------------------------

void check_matmul(const Lib& lib, int M, int N, int K, DT dt, const std::string& regime, std::uint64_t seed) {
  Tensor A(dt, {M, K}), B(dt, {K, N}), C(dt, {M, N});
  Rng ra{seed * 7 + 1}, rb{seed * 7 + 2};
  const double tiny = dt_min_normal(dt);
  if (regime == "normal") {
    A.fill([&](std::int64_t) { return ra.normal(); });
    B.fill([&](std::int64_t) { return rb.normal() / std::sqrt(static_cast<double>(K)); });
  } else if (regime == "near_max") {
    const double a = 0.5 * std::min(dt_max(dt), 1e30);
    A.fill([&](std::int64_t) { return (2 * ra.uniform() - 1) * a; });
    B.fill([&](std::int64_t) { return rb.normal() / (12.0 * std::sqrt(K / 3.0)); });
  } else if (regime == "tiny") {
    A.fill([&](std::int64_t) { return 4 * tiny * ra.normal(); });
    B.fill([&](std::int64_t) { return rb.normal() / std::sqrt(static_cast<double>(K)); });
  } else {  // subnormal
    A.fill([&](std::int64_t) { return (2 * ra.uniform() - 1) * tiny; });
    B.fill([&](std::int64_t) { return rb.normal(); });
  }
  std::vector<double> ref(static_cast<std::size_t>(M) * N, 0.0);
  parallel_for(M, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i)
      for (std::int64_t k = 0; k < K; ++k) {
        const double a = A.v[i * K + k];
        const double* b = &B.v[k * N];
        double* c = &ref[i * N];
        for (std::int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
  });
  std::string err = run_once(lib, {&A, &B}, C, {});
  auto out = C.download();
  std::vector<unsigned char> out2 = out;
  if (err.empty()) {
    err = run_once(lib, {&A, &B}, C, {});
    out2 = C.download();
  }
  char what[128];
  std::snprintf(what, sizeof what, "%s %dx%dx%d %s", lib.name.c_str(), M, N, K, regime.c_str());
  report(what, dt, out, out2, ref, N, err);
}

// ---- flash_attention -------------------------------------------------------------------------------

void check_fa(const Lib& lib, int Bn, int H, int S, int D, int causal, double scale, DT dt,
              const std::string& regime, std::uint64_t seed) {
  const std::vector<std::int64_t> sh = {Bn, H, S, D};
  Tensor q(dt, sh), k(dt, sh), v(dt, sh), o(dt, sh);
  const double sc = std::isnan(scale) ? 1.0 / std::sqrt(static_cast<double>(D)) : scale;
  Rng rq{seed * 11 + 1}, rk{seed * 11 + 2}, rv{seed * 11 + 3};
  double sig = 1.0, va = 0.0;
  if (regime == "large_logits") sig = std::sqrt(30.0 / (std::fabs(sc) * std::sqrt(static_cast<double>(D))));
  if (regime == "near_max") va = 0.5 * std::min(dt_max(dt), 1e30);
  q.fill([&](std::int64_t) { return sig * rq.normal(); });
  k.fill([&](std::int64_t) { return sig * rk.normal(); });
  v.fill([&](std::int64_t) { return va > 0 ? (2 * rv.uniform() - 1) * va : rv.normal(); });
  std::vector<double> ref(static_cast<std::size_t>(q.n()));
  const std::int64_t heads = static_cast<std::int64_t>(Bn) * H;
  parallel_for(heads * S, [&](std::int64_t lo, std::int64_t hi) {
    std::vector<double> p(S);
    for (std::int64_t hr = lo; hr < hi; ++hr) {
      const std::int64_t h = hr / S, i = hr % S, base = h * S * D;
      const std::int64_t nk = causal ? i + 1 : S;
      double mx = -INFINITY;
      for (std::int64_t j = 0; j < nk; ++j) {
        double s = 0;
        for (int d = 0; d < D; ++d) s += q.v[base + i * D + d] * k.v[base + j * D + d];
        p[j] = s * sc;
        mx = std::max(mx, p[j]);
      }
      double l = 0;
      for (std::int64_t j = 0; j < nk; ++j) l += (p[j] = std::exp(p[j] - mx));
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (std::int64_t j = 0; j < nk; ++j) acc += p[j] * v.v[base + j * D + d];
        ref[base + i * D + d] = acc / l;
      }
    }
  });
  const std::vector<double> attrs = {static_cast<double>(causal), sc};
  std::string err = run_once(lib, {&q, &k, &v}, o, attrs);
  auto out = o.download();
  std::vector<unsigned char> out2 = out;
  if (err.empty()) {
    err = run_once(lib, {&q, &k, &v}, o, attrs);
    out2 = o.download();
  }
  char what[128];
  std::snprintf(what, sizeof what, "%s b%dh%ds%dd%d%s%s %s", lib.name.c_str(), Bn, H, S, D,
                causal ? "" : "-noncausal", std::isnan(scale) ? "" : ("-scale" + std::to_string(scale)).substr(0, 12).c_str(),
                regime.c_str());
  report(what, dt, out, out2, ref, D, err);
}

// ---- fused_mlp ---------------------------------------------------------------------------------------

void check_mlp(const Lib& lib, int Bn, int D, int H, DT dt, const std::string& regime, std::uint64_t seed) {
  Tensor x(dt, {Bn, D}), wg(dt, {H, D}), wu(dt, {H, D}), wd(dt, {D, H}), y(dt, {Bn, D});
  Rng r0{seed * 13 + 1}, r1{seed * 13 + 2}, r2{seed * 13 + 3}, r3{seed * 13 + 4};
  double gs = 1, us = 1, ys = 1;
  if (regime == "near_max") {
    gs = us = 16;
    ys = 0.02 * std::min(dt_max(dt), 1e30);
  } else if (regime == "large_gate") {
    gs = 50;
  }
  const double hs = gs * us / std::sqrt(2.0);
  x.fill([&](std::int64_t) { return r0.normal(); });
  wg.fill([&](std::int64_t) { return r1.normal() * gs / std::sqrt(static_cast<double>(D)); });
  wu.fill([&](std::int64_t) { return r2.normal() * us / std::sqrt(static_cast<double>(D)); });
  wd.fill([&](std::int64_t) { return r3.normal() * ys / (hs * std::sqrt(static_cast<double>(H))); });
  std::vector<double> h(static_cast<std::size_t>(Bn) * H), ref(static_cast<std::size_t>(Bn) * D);
  parallel_for(static_cast<std::int64_t>(Bn) * H, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t e = lo; e < hi; ++e) {
      const std::int64_t b = e / H, j = e % H;
      double g = 0, u = 0;
      for (int d = 0; d < D; ++d) {
        g += x.v[b * D + d] * wg.v[j * D + d];
        u += x.v[b * D + d] * wu.v[j * D + d];
      }
      h[e] = g / (1.0 + std::exp(-g)) * u;
    }
  });
  parallel_for(static_cast<std::int64_t>(Bn) * D, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t e = lo; e < hi; ++e) {
      const std::int64_t b = e / D, d = e % D;
      double acc = 0;
      for (int j = 0; j < H; ++j) acc += h[b * H + j] * wd.v[d * H + j];
      ref[e] = acc;
    }
  });
  std::string err = run_once(lib, {&x, &wg, &wu, &wd}, y, {});
  auto out = y.download();
  std::vector<unsigned char> out2 = out;
  if (err.empty()) {
    err = run_once(lib, {&x, &wg, &wu, &wd}, y, {});
    out2 = y.download();
  }
  char what[128];
  std::snprintf(what, sizeof what, "%s b%dd%dh%d %s", lib.name.c_str(), Bn, D, H, regime.c_str());
  report(what, dt, out, out2, ref, D, err);
}

// ---- timing ------------------------------------------------------------------------------------------

__global__ void fill_uniform_bf16(__nv_bfloat16* p, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull + seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    p[i] = __float2bfloat16_rn((static_cast<float>(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * scale);
  }
}
void fill_dev(Tensor& t, std::uint64_t seed, float scale) {
  fill_uniform_bf16<<<1024, 256, 0, g_stream>>>(static_cast<__nv_bfloat16*>(t.dev),
                                                static_cast<std::size_t>(t.n()), seed, scale);
  CK(cudaGetLastError());
}

/// Median milliseconds of `reps` timed calls of f (after 3 warm-ups), CUDA events on g_stream.
double median_ms(const std::function<bool()>& f, int reps) {
  for (int i = 0; i < 3; ++i)
    if (!f()) return -1;
  CK(cudaStreamSynchronize(g_stream));
  std::vector<float> ms(reps);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a, g_stream));
    if (!f()) return -1;
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms[i], a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

bool call(const Lib& lib, std::vector<Tensor*> ins, Tensor& out, const std::vector<double>& attrs) {
  std::vector<DLTensor> din;
  for (auto* t : ins) din.push_back(t->dl());
  DLTensor dout = out.dl();
  const int rc = lib.run(din.data(), static_cast<int>(din.size()), &dout, 1,
                         attrs.empty() ? nullptr : attrs.data(), static_cast<int>(attrs.size()), g_stream);
  if (rc != 0) std::printf("FAIL %s: %s\n", lib.name.c_str(), lib.err());
  return rc == 0;
}

/// bf16 n³ matmul: TFLOP/s of lib (and cuBLAS once), correctness of 16 sampled rows.
void time_matmul(const Lib& lib, int n, bool with_cublas) {
  Tensor A(DT::BF16, {n, n}), B(DT::BF16, {n, n}), C(DT::BF16, {n, n});
  fill_dev(A, 1, 1.0f);
  fill_dev(B, 2, 1.0f / 64);
  const double flop = 2.0 * n * static_cast<double>(n) * n;
  const double ms = median_ms([&] { return call(lib, {&A, &B}, C, {}); }, 20);
  if (ms <= 0) {
    ++g_fail;
    return;
  }
  // Sampled check: 16 rows of C against the fp64 product of the bf16 inputs.
  auto ha = A.download(), hb = B.download(), hc = C.download();
  std::vector<double> bd(static_cast<std::size_t>(n) * n);
  for (std::size_t i = 0; i < bd.size(); ++i) bd[i] = get(DT::BF16, hb.data(), i);
  const int rows[16] = {0, 1, 2, 127, 128, 255, 1000, 1023, 2047, 2048, 3001, 3333, 4000, 4094, 4095, n / 2 + 7};
  std::vector<double> ref(16 * static_cast<std::size_t>(n), 0.0);
  std::vector<unsigned char> got(16 * static_cast<std::size_t>(n) * 2);
  parallel_for(16, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t s = lo; s < hi; ++s) {
      const int r = std::min(rows[s], n - 1);
      for (int k = 0; k < n; ++k) {
        const double a = get(DT::BF16, ha.data(), static_cast<std::size_t>(r) * n + k);
        for (int j = 0; j < n; ++j) ref[s * n + j] += a * bd[static_cast<std::size_t>(k) * n + j];
      }
      std::memcpy(&got[s * n * 2], &hc[static_cast<std::size_t>(r) * n * 2], static_cast<std::size_t>(n) * 2);
    }
  });
  char what[128];
  std::snprintf(what, sizeof what, "%s %dx%dx%d (16 sampled rows)", lib.name.c_str(), n, n, n);
  report(what, DT::BF16, got, got, ref, n, "");
  std::printf("TIME %-52s bf16 %8.3f ms %7.1f TFLOP/s\n", (lib.name + " " + std::to_string(n) + "^3").c_str(), ms,
              flop / ms * 1e-9);
  if (!with_cublas) return;
#ifdef VB_NO_CUBLAS
  std::printf("TIME cublas: not built (cuBLAS was not found at build time)\n");
#else
  cublasHandle_t hdl;
  if (cublasCreate(&hdl) != CUBLAS_STATUS_SUCCESS) {
    std::printf("TIME cublas: cublasCreate failed\n");
    return;
  }
  cublasSetStream(hdl, g_stream);
  const float one = 1.0f, zero = 0.0f;
  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
  auto gemm = [&] {
    return cublasGemmEx(hdl, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B.dev, CUDA_R_16BF, n, A.dev,
                        CUDA_R_16BF, n, &zero, C.dev, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
  };
  const double cms = median_ms(gemm, 20);
  if (cms > 0)
    std::printf("TIME %-52s bf16 %8.3f ms %7.1f TFLOP/s  (ours = %.1f%% of cuBLAS)\n",
                ("cublasGemmEx " + std::to_string(n) + "^3").c_str(), cms, flop / cms * 1e-9,
                100.0 * cms / ms);
  cublasDestroy(hdl);
#endif
}

void time_fa(const Lib& lib) {
  const int Bn = 2, H = 16, S = 4096, D = 128;
  Tensor q(DT::BF16, {Bn, H, S, D}), k(DT::BF16, {Bn, H, S, D}), v(DT::BF16, {Bn, H, S, D}),
      o(DT::BF16, {Bn, H, S, D});
  fill_dev(q, 3, 1.0f);
  fill_dev(k, 4, 1.0f);
  fill_dev(v, 5, 1.0f);
  const std::vector<double> attrs = {1.0, 1.0 / std::sqrt(128.0)};
  const double ms = median_ms([&] { return call(lib, {&q, &k, &v}, o, attrs); }, 10);
  const double flop = 4.0 * Bn * H * static_cast<double>(S) * S * D / 2;
  if (ms > 0) std::printf("TIME %-52s bf16 %8.3f ms %7.1f TFLOP/s\n", "flash_attention b2h16s4096d128 causal", ms, flop / ms * 1e-9);
}

void time_mlp(const Lib& lib) {
  const int Bn = 512, D = 4096, H = 11008;
  Tensor x(DT::BF16, {Bn, D}), wg(DT::BF16, {H, D}), wu(DT::BF16, {H, D}), wd(DT::BF16, {D, H}),
      y(DT::BF16, {Bn, D});
  fill_dev(x, 6, 1.0f);
  fill_dev(wg, 7, 0.03f);
  fill_dev(wu, 8, 0.03f);
  fill_dev(wd, 9, 0.02f);
  const double ms = median_ms([&] { return call(lib, {&x, &wg, &wu, &wd}, y, {}); }, 10);
  const double flop = 6.0 * Bn * D * static_cast<double>(H);
  if (ms > 0) std::printf("TIME %-52s bf16 %8.3f ms %7.1f TFLOP/s\n", "fused_mlp b512d4096h11008", ms, flop / ms * 1e-9);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s BUILD_DIR   (see bench/cuda_mma_selfcheck.sh)\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  const DT dts[3] = {DT::F16, DT::BF16, DT::F32};

  Lib mm, fa, mlp;
  if (load_lib(dir + "/matmul.so", "matmul", mm)) {
    struct S3 { int m, n, k; };
    const S3 shapes[] = {{1, 1, 1},       {1023, 4097, 1}, {1, 4097, 1023}, {127, 251, 1021},
                         {3, 13, 4097},   {4097, 3, 127},  {1021, 127, 13}, {128, 3072, 768},
                         {128, 768, 3072}, {64, 1024, 4096}, {512, 512, 512}, {300, 264, 200}};
    std::uint64_t seed = 1;
    for (DT dt : dts) {
      for (const auto& s : shapes) check_matmul(mm, s.m, s.n, s.k, dt, "normal", seed++);
      for (const char* r : {"near_max", "tiny", "subnormal"}) check_matmul(mm, 64, 128, 1024, dt, r, seed++);
    }
  } else {
    ++g_fail;
  }
  if (load_lib(dir + "/flash_attention.so", "flash_attention", fa)) {
    struct F { int b, h, s, d, causal; double scale; const char* regime; };
    const double dflt = NAN;
    const F cases[] = {{1, 4, 512, 128, 1, dflt, "normal"},  {1, 4, 512, 128, 0, dflt, "normal"},
                       {2, 4, 256, 64, 1, 0.05, "normal"},   {1, 2, 1024, 64, 1, dflt, "normal"},
                       {4, 8, 128, 64, 1, dflt, "normal"},   {1, 8, 256, 128, 0, dflt, "normal"},
                       {1, 1, 1, 64, 1, dflt, "normal"},     {3, 1, 1, 128, 0, dflt, "normal"},
                       {1, 2, 3, 128, 1, dflt, "normal"},    {1, 2, 127, 64, 1, dflt, "normal"},
                       {2, 3, 13, 96, 1, dflt, "normal"},    {1, 1, 127, 80, 0, dflt, "normal"},
                       {1, 1, 251, 128, 0, dflt, "normal"},  {1, 1, 1023, 64, 1, dflt, "normal"},
                       {1, 2, 128, 64, 1, dflt, "near_max"}, {1, 2, 128, 64, 1, dflt, "large_logits"},
                       {1, 2, 200, 256, 1, dflt, "normal"},  {1, 1, 100, 72, 0, dflt, "normal"},
                       {1, 2, 77, 33, 1, dflt, "normal"},    {1, 1, 130, 128, 1, -0.1, "normal"}};
    std::uint64_t seed = 100;
    for (DT dt : dts)
      for (const auto& c : cases) check_fa(fa, c.b, c.h, c.s, c.d, c.causal, c.scale, dt, c.regime, seed++);
  } else {
    ++g_fail;
  }
  if (load_lib(dir + "/fused_mlp.so", "fused_mlp", mlp)) {
    struct M { int b, d, h; const char* regime; };
    const M cases[] = {{32, 768, 3072, "normal"},    {16, 1024, 2816, "normal"},
                       {64, 512, 1376, "normal"},    {1, 1, 1, "normal"},
                       {3, 127, 251, "normal"},      {13, 251, 1023, "normal"},
                       {127, 13, 4097, "normal"},    {1, 1023, 3, "normal"},
                       {16, 256, 1024, "near_max"},  {16, 256, 1024, "large_gate"},
                       {200, 136, 264, "normal"}};
    std::uint64_t seed = 200;
    for (DT dt : dts)
      for (const auto& c : cases) check_mlp(mlp, c.b, c.d, c.h, dt, c.regime, seed++);
  } else {
    ++g_fail;
  }

  // Timings (bf16 benchmark sizes).
  if (mm.run) time_matmul(mm, 4096, true);
  if (fa.run) time_fa(fa);
  if (mlp.run) time_mlp(mlp);

  // Matmul ranking variants: a few correctness shapes each, then bf16 4096³.
  std::vector<std::string> variants;
  if (DIR* d = opendir((dir + "/variants").c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string f = e->d_name;
      if (f.size() > 3 && f.substr(f.size() - 3) == ".so") variants.push_back(f);
    }
    closedir(d);
  }
  std::sort(variants.begin(), variants.end());
  for (const auto& f : variants) {
    Lib v;
    if (!load_lib(dir + "/variants/" + f, f.substr(0, f.size() - 3), v)) {
      ++g_fail;
      continue;
    }
    std::uint64_t seed = 300;
    for (DT dt : dts) {
      check_matmul(v, 127, 251, 1021, dt, "normal", seed++);
      check_matmul(v, 300, 264, 200, dt, "normal", seed++);
    }
    time_matmul(v, 4096, false);
  }
  // Other parameter sets of flash_attention / fused_mlp (extra/<kernel>__<tag>.so): a subset.
  std::vector<std::string> extras;
  if (DIR* d = opendir((dir + "/extra").c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string f = e->d_name;
      if (f.size() > 3 && f.substr(f.size() - 3) == ".so") extras.push_back(f);
    }
    closedir(d);
  }
  std::sort(extras.begin(), extras.end());
  for (const auto& f : extras) {
    Lib x;
    const std::string name = f.substr(0, f.size() - 3);
    if (!load_lib(dir + "/extra/" + f, name, x)) {
      ++g_fail;
      continue;
    }
    std::uint64_t seed = 400;
    for (DT dt : dts) {
      if (name.rfind("flash_attention__", 0) == 0) {
        check_fa(x, 1, 2, 251, 128, 1, NAN, dt, "normal", seed++);
        check_fa(x, 1, 2, 130, 128, 0, NAN, dt, "normal", seed++);
        check_fa(x, 1, 1, 77, 80, 1, NAN, dt, "normal", seed++);
        check_fa(x, 1, 1, 100, 256, 1, NAN, dt, "normal", seed++);
      } else if (name.rfind("fused_mlp__", 0) == 0) {
        check_mlp(x, 13, 251, 1023, dt, "normal", seed++);
        check_mlp(x, 200, 136, 264, dt, "normal", seed++);
      }
    }
  }
  std::printf("SUMMARY pass=%d fail=%d\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
