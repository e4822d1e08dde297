#include "runner/cuda_device.h"

#include <dlfcn.h>

#include <cstdlib>

namespace vb::runner {

namespace {

// The subset of the CUDA driver API the runner uses; signatures from cuda.h (CUDA 12/13).
// CUresult is an int enum, CUdevice an int, CUcontext/CUstream/CUevent opaque pointers.
using CUresult = int;
using CUdevice = int;
constexpr int kAttrL2CacheSize = 38;             // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr unsigned kStreamDefault = 0;  // CU_STREAM_DEFAULT: blocking w.r.t. the legacy stream
constexpr unsigned kEventDefault = 0;   // CU_EVENT_DEFAULT (timing enabled)

struct Api {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(std::size_t*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(void**, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(void*) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuStreamCreate)(void**, unsigned) = nullptr;
  CUresult (*cuStreamSynchronize)(void*) = nullptr;
  CUresult (*cuMemAlloc)(DevPtr*, std::size_t) = nullptr;
  CUresult (*cuMemFree)(DevPtr) = nullptr;
  CUresult (*cuMemGetInfo)(std::size_t*, std::size_t*) = nullptr;
  CUresult (*cuMemcpyHtoD)(DevPtr, const void*, std::size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, DevPtr, std::size_t) = nullptr;
  CUresult (*cuMemsetD8Async)(DevPtr, unsigned char, std::size_t, void*) = nullptr;
  CUresult (*cuMemsetD16Async)(DevPtr, unsigned short, std::size_t, void*) = nullptr;
  CUresult (*cuMemsetD32Async)(DevPtr, unsigned, std::size_t, void*) = nullptr;
  CUresult (*cuEventCreate)(void**, unsigned) = nullptr;
  CUresult (*cuEventRecord)(void*, void*) = nullptr;
  CUresult (*cuEventSynchronize)(void*) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, void*, void*) = nullptr;
  // Optional (reset_persisting_l2): absent before CUDA 11.
  CUresult (*cuCtxSetLimit)(int, std::size_t) = nullptr;
  CUresult (*cuCtxResetPersistingL2Cache)() = nullptr;
  CUresult (*cuStreamSetAttribute)(void*, int, const void*) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
};

Api g_api;

// Looks up the first of the given names (versioned names first: cuMemAlloc_v2, ...).
template <typename F>
bool sym(void* lib, F& f, const char* a, const char* b = nullptr) {
  f = reinterpret_cast<F>(::dlsym(lib, a));
  if (!f && b) f = reinterpret_cast<F>(::dlsym(lib, b));
  return f != nullptr;
}

}  // namespace

CudaDevice::~CudaDevice() {
  // The process exits right after; the driver releases the context and memory with it.
}

std::string CudaDevice::check(int rc, const char* what) const {
  if (rc == 0) return {};
  const char* name = nullptr;
  const char* desc = nullptr;
  if (g_api.cuGetErrorName) g_api.cuGetErrorName(rc, &name);
  if (g_api.cuGetErrorString) g_api.cuGetErrorString(rc, &desc);
  std::string s = std::string(what) + ": ";
  s += name ? name : "CUDA error " + std::to_string(rc);
  if (desc) s += std::string(": ") + desc;
  s += " (" + std::to_string(rc) + ")";
  return s;
}

std::string CudaDevice::open() {
  if (is_open()) return {};
  if (!open_error_.empty()) return open_error_;
  const char* env = std::getenv("VB_LIBCUDA");
  const std::string path = env && *env ? env : "libcuda.so.1";
  lib_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib_) {
    const char* e = ::dlerror();
    return open_error_ = "no GPU: " + path + " not found (" + (e ? e : "dlopen failed") +
                         "): the NVIDIA driver is not installed or not visible to the runner";
  }
  bool ok = sym(lib_, g_api.cuInit, "cuInit") &&
            sym(lib_, g_api.cuDeviceGetCount, "cuDeviceGetCount") &&
            sym(lib_, g_api.cuDeviceGet, "cuDeviceGet") &&
            sym(lib_, g_api.cuDeviceGetName, "cuDeviceGetName") &&
            sym(lib_, g_api.cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
            sym(lib_, g_api.cuDeviceTotalMem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem") &&
            sym(lib_, g_api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
            sym(lib_, g_api.cuCtxSetCurrent, "cuCtxSetCurrent") &&
            sym(lib_, g_api.cuCtxSynchronize, "cuCtxSynchronize") &&
            sym(lib_, g_api.cuStreamCreate, "cuStreamCreate") &&
            sym(lib_, g_api.cuStreamSynchronize, "cuStreamSynchronize") &&
            sym(lib_, g_api.cuMemAlloc, "cuMemAlloc_v2", "cuMemAlloc") &&
            sym(lib_, g_api.cuMemFree, "cuMemFree_v2", "cuMemFree") &&
            sym(lib_, g_api.cuMemGetInfo, "cuMemGetInfo_v2", "cuMemGetInfo") &&
            sym(lib_, g_api.cuMemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD") &&
            sym(lib_, g_api.cuMemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH") &&
            sym(lib_, g_api.cuMemsetD8Async, "cuMemsetD8Async") &&
            sym(lib_, g_api.cuMemsetD16Async, "cuMemsetD16Async") &&
            sym(lib_, g_api.cuMemsetD32Async, "cuMemsetD32Async") &&
            sym(lib_, g_api.cuEventCreate, "cuEventCreate") &&
            sym(lib_, g_api.cuEventRecord, "cuEventRecord") &&
            sym(lib_, g_api.cuEventSynchronize, "cuEventSynchronize") &&
            sym(lib_, g_api.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  sym(lib_, g_api.cuCtxSetLimit, "cuCtxSetLimit");
  sym(lib_, g_api.cuCtxResetPersistingL2Cache, "cuCtxResetPersistingL2Cache");
  sym(lib_, g_api.cuStreamSetAttribute, "cuStreamSetAttribute");
  sym(lib_, g_api.cuGetErrorString, "cuGetErrorString");
  sym(lib_, g_api.cuGetErrorName, "cuGetErrorName");
  if (!ok)
    return open_error_ = "no GPU: " + path +
                         " lacks a driver API entry point the runner needs (driver too old?)";
  if (auto e = check(g_api.cuInit(0), "cuInit"); !e.empty()) return open_error_ = "no GPU: " + e;
  int n = 0;
  if (auto e = check(g_api.cuDeviceGetCount(&n), "cuDeviceGetCount"); !e.empty())
    return open_error_ = "no GPU: " + e;
  if (n <= 0) return open_error_ = "no GPU: the CUDA driver reports 0 devices";
  if (auto e = check(g_api.cuDeviceGet(&device_, 0), "cuDeviceGet"); !e.empty())
    return open_error_ = "no GPU: " + e;
  char buf[256] = {};
  if (g_api.cuDeviceGetName(buf, sizeof buf - 1, device_) == 0) name_ = buf;
  int v = 0;
  if (g_api.cuDeviceGetAttribute(&v, kAttrL2CacheSize, device_) == 0 && v > 0)
    l2_bytes_ = static_cast<std::size_t>(v);
  if (g_api.cuDeviceGetAttribute(&v, kAttrComputeCapabilityMajor, device_) == 0) cc_major_ = v;
  if (g_api.cuDeviceGetAttribute(&v, kAttrComputeCapabilityMinor, device_) == 0) cc_minor_ = v;
  g_api.cuDeviceTotalMem(&total_mem_, device_);
  if (auto e = check(g_api.cuDevicePrimaryCtxRetain(&ctx_, device_), "cuDevicePrimaryCtxRetain");
      !e.empty())
    return open_error_ = e;
  if (auto e = check(g_api.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); !e.empty())
    return open_error_ = e;
  void* s = nullptr;
  if (auto e = check(g_api.cuStreamCreate(&s, kStreamDefault), "cuStreamCreate"); !e.empty())
    return open_error_ = e;
  if (auto e = check(g_api.cuEventCreate(&ev0_, kEventDefault), "cuEventCreate"); !e.empty())
    return open_error_ = e;
  if (auto e = check(g_api.cuEventCreate(&ev1_, kEventDefault), "cuEventCreate"); !e.empty())
    return open_error_ = e;
  stream_ = s;
  return {};
}

std::string CudaDevice::alloc(std::size_t bytes, DevPtr* out) {
  *out = 0;
  return check(g_api.cuMemAlloc(out, bytes), "cuMemAlloc");
}

std::string CudaDevice::release(DevPtr p) {
  return p ? check(g_api.cuMemFree(p), "cuMemFree") : std::string();
}

std::string CudaDevice::mem_info(std::size_t* free_bytes, std::size_t* total_bytes) {
  return check(g_api.cuMemGetInfo(free_bytes, total_bytes), "cuMemGetInfo");
}

std::string CudaDevice::to_device(DevPtr dst, const void* src, std::size_t bytes) {
  return bytes ? check(g_api.cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD") : std::string();
}

std::string CudaDevice::to_host(void* dst, DevPtr src, std::size_t bytes) {
  return bytes ? check(g_api.cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH") : std::string();
}

std::string CudaDevice::fill(DevPtr dst, unsigned value, int elem_bytes, std::size_t count) {
  if (count == 0) return {};
  switch (elem_bytes) {
    case 1:
      return check(g_api.cuMemsetD8Async(dst, static_cast<unsigned char>(value), count, stream_),
                   "cuMemsetD8Async");
    case 2:
      return check(g_api.cuMemsetD16Async(dst, static_cast<unsigned short>(value), count, stream_),
                   "cuMemsetD16Async");
    case 4:
      return check(g_api.cuMemsetD32Async(dst, value, count, stream_), "cuMemsetD32Async");
    default:
      return "fill: element size must be 1, 2 or 4 bytes";
  }
}

std::string CudaDevice::record_start() {
  return check(g_api.cuEventRecord(ev0_, stream_), "cuEventRecord");
}

std::string CudaDevice::record_end() {
  return check(g_api.cuEventRecord(ev1_, stream_), "cuEventRecord");
}

std::string CudaDevice::finish_timed(float* ms) {
  *ms = 0;
  if (auto e = check(g_api.cuEventSynchronize(ev1_), "cuEventSynchronize"); !e.empty()) return e;
  if (auto e = check(g_api.cuCtxSynchronize(), "cuCtxSynchronize"); !e.empty()) return e;
  return check(g_api.cuEventElapsedTime(ms, ev0_, ev1_), "cuEventElapsedTime");
}

void CudaDevice::reset_persisting_l2() {
  // cuda.h: CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW
  // = 1; a zeroed CUstreamAttrValue (64 bytes, CUaccessPolicyWindow first) is "no window".
  constexpr int kLimitPersistingL2 = 0x06, kAttrAccessPolicyWindow = 1;
  if (g_api.cuCtxSetLimit) (void)g_api.cuCtxSetLimit(kLimitPersistingL2, 0);
  if (g_api.cuCtxResetPersistingL2Cache) (void)g_api.cuCtxResetPersistingL2Cache();
  if (g_api.cuStreamSetAttribute && stream_) {
    alignas(8) unsigned char none[64] = {};
    (void)g_api.cuStreamSetAttribute(stream_, kAttrAccessPolicyWindow, none);
  }
}

std::string CudaDevice::synchronize() {
  return check(g_api.cuCtxSynchronize(), "cuCtxSynchronize");
}

}  // namespace vb::runner
