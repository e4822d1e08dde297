// The run-time half of a Triton kernel built ahead of time (issue 17 step 2; generator:
// src/backends/triton/aot.h). A generated translation unit embeds the cubins Triton compiled
// and a launch table -- for every problem the library serves (input/output dtypes and shapes,
// attribute values), the launches the source's Python vb_kernel_run made for it: kernel, grid,
// and for each kernel parameter either an input/output tensor plus an element offset or a
// scalar constant -- then includes this header and exports the kernel ABI of DESIGN §3 with
// VB_TRITON_AOT_EXPORT(table). No Python runs per call.
//
// The launch follows Triton 3.6's own CUDA launcher (triton/backends/nvidia/driver.py
// make_launcher and driver.c load_binary): block = 32 x num_warps threads, dynamic shared
// memory = the kernel's metadata "shared" (above 48 KiB the function is first opted in with
// cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - static)), the parameters are the
// signature's non-constexpr arguments in order followed by two trailing device pointers
// (global_scratch and profile_scratch, 0 here: the generator refuses kernels that need global
// scratch, and profile scratch exists only under Triton's instrumentation).
//
// The driver is resolved at run time, never linked: the runner dlopens libcuda RTLD_GLOBAL, so
// dlsym(RTLD_DEFAULT) finds it; inside PyTorch the loaded libcuda.so.1 is found with
// RTLD_NOLOAD. Modules are loaded once per CUDA context (cuModuleLoadData), which is what
// Triton's runtime caches too; no result or input state is kept between calls.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <list>
#include <mutex>
#include <string>
#include <vector>

#include "vb_kernel.h"

namespace vbaot {

/// Where a kernel parameter's value comes from.
enum ArgKind : int { kInput = 0, kOutput = 1, kScalar = 2, kScratch = 3 };

/// One tensor of a served problem: dtype and dense row-major shape.
struct Tensor {
  vbk::Dt dtype;
  int ndim;
  const std::int64_t* shape;
};

/// One compiled kernel: the cubin image, its entry (the PTX .entry name), its launch shape.
struct Kernel {
  const char* name;   ///< the @triton.jit function's name
  const char* entry;  ///< the cubin's function name
  const unsigned char* image;
  std::size_t image_size;
  unsigned block_x;       ///< 32 x num_warps
  unsigned shared_bytes;  ///< dynamic shared memory of every launch (metadata "shared")
  int n_params;           ///< parameters passed (non-constexpr arguments + the 2 scratch pointers)
};

/// One kernel parameter of one launch.
struct Arg {
  int kind;                  ///< ArgKind
  int index;                 ///< input/output/scratch index (kInput, kOutput, kScratch)
  std::int64_t offset_elems; ///< element offset into that tensor (kInput, kOutput); byte offset
                             ///< into the scratch buffer (kScratch)
  bool aligned16;            ///< the kernel was specialized for a 16-byte aligned pointer
  int bytes;                 ///< size of a scalar parameter (1, 2, 4, 8)
  std::uint64_t bits;        ///< a scalar's parameter bits (little-endian)
  const char* name;          ///< the argument's name in the source (messages)
};

/// One launch of a served problem.
struct Launch {
  int kernel;  ///< index into Table::kernels
  unsigned grid[3];
  int n_args;
  const Arg* args;
};

/// One served problem and its launch sequence.
struct Problem {
  int n_in;
  const Tensor* in;
  int n_out;
  const Tensor* out;
  int n_attrs;
  const double* attrs;
  int n_launches;
  const Launch* launches;
  /// Temporaries the Python vb_kernel_run made with torch.empty/zeros: allocated on the stream
  /// for each call (cuMemAllocAsync), zero-filled where made by zeros, freed after the
  /// launches (cuMemFreeAsync).
  int n_scratch;
  const std::uint64_t* scratch_bytes;
  const bool* scratch_zero;
};

/// The whole library: what it was built from and what it serves.
struct Table {
  const char* source;          ///< the kernel source it was built from (messages)
  const char* arch;            ///< "sm_90a"
  const char* triton_version;  ///< "3.6.0"
  int n_kernels;
  const Kernel* kernels;
  int n_problems;
  const Problem* problems;
};

namespace detail {

using CUresult = int;
using CUdeviceptr = unsigned long long;
struct Api {
  CUresult (*ctx_get_current)(void**) = nullptr;
  CUresult (*ctx_get_device)(int*) = nullptr;
  CUresult (*device_get_attribute)(int*, int, int) = nullptr;
  CUresult (*module_load_data)(void**, const void*) = nullptr;
  CUresult (*module_get_function)(void**, void*, const char*) = nullptr;
  CUresult (*func_get_attribute)(int*, int, void*) = nullptr;
  CUresult (*func_set_attribute)(void*, int, int) = nullptr;
  CUresult (*func_set_cache_config)(void*, int) = nullptr;
  CUresult (*launch_kernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, void*, void**, void**) = nullptr;
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  // Needed only by problems with scratch buffers (stream-ordered allocation, CUDA 11.2+).
  CUresult (*mem_alloc_async)(CUdeviceptr*, std::size_t, void*) = nullptr;
  CUresult (*mem_free_async)(CUdeviceptr, void*) = nullptr;
  CUresult (*memset_d8_async)(CUdeviceptr, unsigned char, std::size_t, void*) = nullptr;
  // Optional (scratch speed only): the device's default memory pool and its release threshold.
  CUresult (*device_get_default_mem_pool)(void**, int) = nullptr;
  CUresult (*mem_pool_set_attribute)(void*, int, void*) = nullptr;
  std::string error;  ///< why the driver could not be resolved, "" when it was
};

// cuda.h values (CUdevice_attribute, CUfunction_attribute, CUfunc_cache).
constexpr int kMaxSharedOptin = 97;   // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kFuncSharedStatic = 1;  // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
constexpr int kFuncMaxDynamicShared = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kCachePreferShared = 1;     // CU_FUNC_CACHE_PREFER_SHARED
constexpr int kMemPoolReleaseThreshold = 4;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (cuuint64_t)

template <class F>
bool resolve(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(lib ? ::dlsym(lib, name) : ::dlsym(RTLD_DEFAULT, name));
  return f != nullptr;
}

inline const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    // The runner's driver (RTLD_GLOBAL) first, then a libcuda.so.1 already loaded (PyTorch),
    // then the system's.
    void* lib = nullptr;
    if (::dlsym(RTLD_DEFAULT, "cuLaunchKernel") == nullptr) {
      lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (!lib) lib = ::dlopen("libcuda.so.1", RTLD_NOW);
      if (!lib) {
        a.error = "no CUDA driver: libcuda.so.1 is neither loaded nor loadable";
        return;
      }
    }
    const bool ok = resolve(lib, a.ctx_get_current, "cuCtxGetCurrent") &&
                    resolve(lib, a.ctx_get_device, "cuCtxGetDevice") &&
                    resolve(lib, a.device_get_attribute, "cuDeviceGetAttribute") &&
                    resolve(lib, a.module_load_data, "cuModuleLoadData") &&
                    resolve(lib, a.module_get_function, "cuModuleGetFunction") &&
                    resolve(lib, a.func_get_attribute, "cuFuncGetAttribute") &&
                    resolve(lib, a.func_set_attribute, "cuFuncSetAttribute") &&
                    resolve(lib, a.func_set_cache_config, "cuFuncSetCacheConfig") &&
                    resolve(lib, a.launch_kernel, "cuLaunchKernel");
    resolve(lib, a.get_error_name, "cuGetErrorName");
    resolve(lib, a.mem_alloc_async, "cuMemAllocAsync");
    resolve(lib, a.mem_free_async, "cuMemFreeAsync");
    resolve(lib, a.memset_d8_async, "cuMemsetD8Async");
    resolve(lib, a.device_get_default_mem_pool, "cuDeviceGetDefaultMemPool");
    resolve(lib, a.mem_pool_set_attribute, "cuMemPoolSetAttribute");
    if (!ok) a.error = "the CUDA driver lacks an entry point the Triton AOT launcher needs";
  });
  return a;
}

/// Once per device: the default memory pool (where cuMemAllocAsync takes the scratch buffers)
/// keeps what is freed instead of returning it to the driver at every synchronization (its
/// release threshold is 0 by default, CUDA Programming Guide, "Stream Ordered Memory
/// Allocator": then every call's allocation after a sync maps memory anew, which cost a
/// two-kernel cross_entropy ~270 us per call on an H200, 2026-12-07). A call that fails leaves
/// the pool as it was: only the speed of scratch allocation depends on it.
inline void keep_pool_memory(const Api& a) {
  if (!a.device_get_default_mem_pool || !a.mem_pool_set_attribute || !a.ctx_get_device) return;
  static std::mutex mu;
  static std::vector<int> done;
  int dev = -1;
  if (a.ctx_get_device(&dev) != 0) return;
  std::lock_guard<std::mutex> lock(mu);
  for (int d : done)
    if (d == dev) return;
  done.push_back(dev);
  void* pool = nullptr;
  if (a.device_get_default_mem_pool(&pool, dev) != 0 || !pool) return;
  std::uint64_t keep = ~std::uint64_t{0};
  a.mem_pool_set_attribute(pool, kMemPoolReleaseThreshold, &keep);
}

inline int driver_fail(const char* what, const char* kernel, CUresult rc) {
  const char* name = nullptr;
  if (api().get_error_name) api().get_error_name(rc, &name);
  return vbk::fail("%s (%s) failed: %s (%d)", what, kernel, name ? name : "CUDA error", rc);
}

/// The functions of `t`'s kernels in the current context (loaded on first use per context).
inline int functions(const Table& t, std::vector<void*>** out) {
  struct PerContext {
    void* ctx;
    std::vector<void*> fns;
  };
  static std::mutex mu;
  static std::list<PerContext> loaded;  // a list: the returned pointers stay valid
  const Api& a = api();
  void* ctx = nullptr;
  if (CUresult rc = a.ctx_get_current(&ctx)) return driver_fail("cuCtxGetCurrent", "-", rc);
  if (!ctx) return vbk::fail("no current CUDA context (the caller must make one current)");
  std::lock_guard<std::mutex> lock(mu);
  for (auto& pc : loaded)
    if (pc.ctx == ctx) return *out = &pc.fns, 0;
  PerContext pc{ctx, std::vector<void*>(static_cast<std::size_t>(t.n_kernels), nullptr)};
  int optin = 0;
  for (int k = 0; k < t.n_kernels; ++k) {
    const Kernel& K = t.kernels[k];
    void* mod = nullptr;
    if (CUresult rc = a.module_load_data(&mod, K.image))
      return driver_fail("cuModuleLoadData", K.name, rc);
    if (CUresult rc = a.module_get_function(&pc.fns[static_cast<std::size_t>(k)], mod, K.entry))
      return driver_fail("cuModuleGetFunction", K.entry, rc);
    if (K.shared_bytes > 49152) {
      // Above 48 KiB a kernel must opt in to the device's larger dynamic shared memory (as
      // Triton's load_binary does).
      if (optin == 0) {
        int dev = 0;
        if (CUresult rc = a.ctx_get_device(&dev)) return driver_fail("cuCtxGetDevice", K.name, rc);
        if (CUresult rc = a.device_get_attribute(&optin, kMaxSharedOptin, dev))
          return driver_fail("cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)", K.name, rc);
      }
      if (optin > 49152) {
        void* f = pc.fns[static_cast<std::size_t>(k)];
        int shared_static = 0;
        if (CUresult rc = a.func_set_cache_config(f, kCachePreferShared))
          return driver_fail("cuFuncSetCacheConfig", K.name, rc);
        if (CUresult rc = a.func_get_attribute(&shared_static, kFuncSharedStatic, f))
          return driver_fail("cuFuncGetAttribute(SHARED_SIZE_BYTES)", K.name, rc);
        if (CUresult rc = a.func_set_attribute(f, kFuncMaxDynamicShared, optin - shared_static))
          return driver_fail("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", K.name, rc);
      }
    }
  }
  loaded.push_back(std::move(pc));
  return *out = &loaded.back().fns, 0;
}

inline const char* dtype_label(vbk::Dt d) {
  switch (d) {
    case vbk::Dt::F16: return "fp16";
    case vbk::Dt::BF16: return "bf16";
    case vbk::Dt::F32: return "fp32";
    case vbk::Dt::I64: return "int64";
    default: return "?";
  }
}

// "fp16[32,1000] fp16[1000]" of the call's tensors, truncated to fit the message buffer.
inline std::string describe(const DLTensor* ts, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += i ? " " : "";
    s += dtype_label(vbk::dtype_of(ts[i]));
    s += "[";
    for (int d = 0; d < ts[i].ndim; ++d) s += (d ? "," : "") + std::to_string(ts[i].shape[d]);
    s += "]";
  }
  return s;
}

inline bool matches(const Tensor* want, int n_want, const DLTensor* got, int n_got) {
  if (n_want != n_got) return false;
  for (int i = 0; i < n_want; ++i) {
    if (want[i].dtype != vbk::dtype_of(got[i]) || want[i].ndim != got[i].ndim) return false;
    for (int d = 0; d < want[i].ndim; ++d)
      if (want[i].shape[d] != got[i].shape[d]) return false;
  }
  return true;
}

}  // namespace detail

/// The kernel ABI over table `t`: finds the call's problem (dtypes, shapes and attribute values
/// all equal) and launches its kernels on `stream` in order. Nonzero with a message when the
/// call is not in the table (naming its shapes and the fix), a tensor is not on a CUDA device or
/// not dense, a pointer lacks the alignment its kernel was specialized for, or the driver fails.
inline int run(const Table& t, const DLTensor* in, int n_in, DLTensor* out, int n_out,
               const double* attrs, int n_attrs, void* stream) {
  const Problem* p = nullptr;
  for (int i = 0; i < t.n_problems && !p; ++i) {
    const Problem& c = t.problems[i];
    bool same = c.n_attrs == n_attrs && detail::matches(c.in, c.n_in, in, n_in) &&
                detail::matches(c.out, c.n_out, out, n_out);
    for (int a = 0; same && a < n_attrs; ++a) same = c.attrs[a] == attrs[a];
    if (same) p = &c;
  }
  if (!p) {
    std::string a;
    for (int i = 0; i < n_attrs; ++i) a += (i ? "," : "") + std::to_string(attrs[i]);
    return vbk::fail(
        "the Triton AOT library of %s has no launches for inputs %s, outputs %s, attrs [%s] "
        "(it serves %d problems, each specialized by the Python vb_kernel_run); fix: build it "
        "with this problem in its problem list (the evaluator lists its cases; a model passes "
        "problem.json)",
        t.source, detail::describe(in, n_in).c_str(), detail::describe(out, n_out).c_str(),
        a.c_str(), t.n_problems);
  }
  for (int i = 0; i < n_in; ++i)
    if (in[i].device.device_type != kDLCUDA || !vbk::is_dense(in[i]))
      return vbk::fail("input %d must be a dense tensor on a CUDA device", i);
  for (int i = 0; i < n_out; ++i)
    if (out[i].device.device_type != kDLCUDA || !vbk::is_dense(out[i]))
      return vbk::fail("output %d must be a dense tensor on a CUDA device", i);
  const detail::Api& a = detail::api();
  if (!a.error.empty()) return vbk::fail("%s", a.error.c_str());
  std::vector<void*>* fns = nullptr;
  if (int e = detail::functions(t, &fns)) return e;
  // The call's scratch buffers, freed on the stream however the launches end.
  struct Scratch {
    const detail::Api& a;
    void* stream;
    std::vector<detail::CUdeviceptr> ptrs;
    ~Scratch() {
      for (auto p : ptrs) a.mem_free_async(p, stream);
    }
  } scratch{a, stream, {}};
  if (p->n_scratch > 0 && (!a.mem_alloc_async || !a.mem_free_async || !a.memset_d8_async))
    return vbk::fail("this kernel needs scratch memory and the CUDA driver lacks stream-ordered "
                     "allocation (cuMemAllocAsync, CUDA 11.2+); fix: update the NVIDIA driver");
  if (p->n_scratch > 0) detail::keep_pool_memory(a);
  for (int i = 0; i < p->n_scratch; ++i) {
    detail::CUdeviceptr d = 0;
    if (detail::CUresult rc = a.mem_alloc_async(&d, p->scratch_bytes[i], stream))
      return detail::driver_fail("cuMemAllocAsync", "scratch", rc);
    scratch.ptrs.push_back(d);
    if (p->scratch_zero[i])
      if (detail::CUresult rc = a.memset_d8_async(d, 0, p->scratch_bytes[i], stream))
        return detail::driver_fail("cuMemsetD8Async", "scratch", rc);
  }
  for (int l = 0; l < p->n_launches; ++l) {
    const Launch& L = p->launches[l];
    const Kernel& K = t.kernels[L.kernel];
    if (L.n_args + 2 != K.n_params)
      return vbk::fail("%s: the launch table passes %d parameters, the kernel takes %d (a "
                       "generator bug: rebuild the library)", K.name, L.n_args + 2, K.n_params);
    if (static_cast<std::uint64_t>(L.grid[0]) * L.grid[1] * L.grid[2] == 0) continue;
    std::vector<std::uint64_t> values(static_cast<std::size_t>(L.n_args) + 2, 0);
    std::vector<void*> params(values.size());
    for (int i = 0; i < L.n_args; ++i) {
      const Arg& A = L.args[i];
      std::uint64_t& v = values[static_cast<std::size_t>(i)];
      if (A.kind == kScalar) {
        v = A.bits;  // little-endian: the first A.bytes bytes hold the value
      } else if (A.kind == kScratch) {
        // A scratch buffer's offset_elems counts bytes (the generator's convention: scratch has
        // no element type of its own).
        v = scratch.ptrs[static_cast<std::size_t>(A.index)] + static_cast<std::uint64_t>(A.offset_elems);
        if (A.aligned16 && v % 16 != 0)
          return vbk::fail("%s: scratch argument %s is not 16-byte aligned", K.name, A.name);
      } else {
        const DLTensor& T = A.kind == kInput ? in[A.index] : out[A.index];
        v = reinterpret_cast<std::uint64_t>(vbk::data_ptr(T)) +
            static_cast<std::uint64_t>(A.offset_elems) * (T.dtype.bits / 8u);
        if (A.aligned16 && v % 16 != 0)
          return vbk::fail("%s: argument %s (%s %d) is not 16-byte aligned, which the kernel was "
                           "compiled for; fix: pass tensors whose data starts 16-byte aligned",
                           K.name, A.name, A.kind == kInput ? "input" : "output", A.index);
      }
      params[static_cast<std::size_t>(i)] = &v;
    }
    // Triton 3.6's trailing global_scratch and profile_scratch pointers (0: none needed).
    params[values.size() - 2] = &values[values.size() - 2];
    params[values.size() - 1] = &values[values.size() - 1];
    if (detail::CUresult rc = a.launch_kernel((*fns)[static_cast<std::size_t>(L.kernel)], L.grid[0],
                                              L.grid[1], L.grid[2], K.block_x, 1, 1,
                                              K.shared_bytes, stream, params.data(), nullptr))
      return detail::driver_fail("cuLaunchKernel", K.name, rc);
  }
  return 0;
}

}  // namespace vbaot

/// Exports vb_kernel_run over a vbaot::Table (vb_kernel_last_error comes from vb_kernel.h).
#define VB_TRITON_AOT_EXPORT(table)                                                            \
  extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,        \
                               int n_outputs, const double* attrs, int n_attrs, void* stream) { \
    return vbaot::run(table, inputs, n_inputs, outputs, n_outputs, attrs, n_attrs, stream);    \
  }
