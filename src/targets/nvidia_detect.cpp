#include "targets/nvidia_detect.h"
#include "core/util.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

namespace vb {

namespace {

// The subset of the CUDA driver API used here. Values and signatures from the CUDA Driver API
// reference (cuda.h, CUDA 12/13): CUresult is an int enum, CUdevice an int, sizes size_t.
using CUresult = int;
using CUdevice = int;
struct CUuuid {
  unsigned char bytes[16];
};
constexpr CUresult kCudaSuccess = 0;

enum CuAttr : int {
  kMaxThreadsPerBlock = 1,
  kMaxSharedMemoryPerBlock = 8,
  kWarpSize = 10,
  kMaxRegistersPerBlock = 12,
  kClockRate = 13,
  kMultiprocessorCount = 16,
  kPciBusId = 33,
  kPciDeviceId = 34,
  kMemoryClockRate = 36,
  kGlobalMemoryBusWidth = 37,
  kL2CacheSize = 38,
  kMaxThreadsPerMultiprocessor = 39,
  kPciDomainId = 50,
  kComputeCapabilityMajor = 75,
  kComputeCapabilityMinor = 76,
  kMaxSharedMemoryPerMultiprocessor = 81,
  kMaxRegistersPerMultiprocessor = 82,
  kMaxSharedMemoryPerBlockOptin = 97,
  kMaxBlocksPerMultiprocessor = 106,
};

using PFN_cuInit = CUresult (*)(unsigned int);
using PFN_cuDriverGetVersion = CUresult (*)(int*);
using PFN_cuDeviceGetCount = CUresult (*)(int*);
using PFN_cuDeviceGet = CUresult (*)(CUdevice*, int);
using PFN_cuDeviceGetName = CUresult (*)(char*, int, CUdevice);
using PFN_cuDeviceGetAttribute = CUresult (*)(int*, int, CUdevice);
using PFN_cuDeviceTotalMem = CUresult (*)(std::size_t*, CUdevice);
using PFN_cuDeviceGetUuid = CUresult (*)(CUuuid*, CUdevice);
using PFN_cuGetErrorName = CUresult (*)(CUresult, const char**);

// Names of the errors cuInit commonly returns, for drivers too old to have cuGetErrorName.
const char* fallback_error_name(CUresult r) {
  switch (r) {
    case 1:
      return "CUDA_ERROR_INVALID_VALUE";
    case 2:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case 34:
      return "CUDA_ERROR_STUB_LIBRARY";
    case 35:
      return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 46:
      return "CUDA_ERROR_DEVICES_UNAVAILABLE";
    case 100:
      return "CUDA_ERROR_NO_DEVICE";
    case 101:
      return "CUDA_ERROR_INVALID_DEVICE";
    case 304:
      return "CUDA_ERROR_OPERATING_SYSTEM";
    case 803:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804:
      return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case 999:
      return "CUDA_ERROR_UNKNOWN";
    default:
      return "CUDA error";
  }
}

void set_why(std::string* why, std::string msg) {
  if (why) *why = std::move(msg);
}

}  // namespace

std::string GpuInfo::sm_arch() const {
  return fmt::format("sm_{}{}", cc_major, cc_minor);
}

double GpuInfo::theoretical_mem_bw_gbs() const {
  if (mem_clock_khz <= 0 || mem_bus_width_bits <= 0) return 0;
  return 2.0 * mem_clock_khz * 1e3 * (mem_bus_width_bits / 8.0) / 1e9;
}

void to_json(nlohmann::json& j, const GpuInfo& g) {
  j = nlohmann::json{{"ordinal", g.ordinal},
                     {"name", g.name},
                     {"uuid", g.uuid},
                     {"pci_bus_id", g.pci_bus_id},
                     {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)},
                     {"sm_arch", g.sm_arch()},
                     {"sm_count", g.sm_count},
                     {"total_mem_bytes", g.total_mem_bytes},
                     {"l2_bytes", g.l2_bytes},
                     {"smem_per_sm_bytes", g.smem_per_sm_bytes},
                     {"smem_per_block_bytes", g.smem_per_block_bytes},
                     {"smem_per_block_optin_bytes", g.smem_per_block_optin_bytes},
                     {"clock_khz", g.clock_khz},
                     {"mem_clock_khz", g.mem_clock_khz},
                     {"mem_bus_width_bits", g.mem_bus_width_bits},
                     {"theoretical_mem_bw_gbs", g.theoretical_mem_bw_gbs()},
                     {"max_threads_per_sm", g.max_threads_per_sm},
                     {"max_threads_per_block", g.max_threads_per_block},
                     {"max_blocks_per_sm", g.max_blocks_per_sm},
                     {"regs_per_sm", g.regs_per_sm},
                     {"regs_per_block", g.regs_per_block},
                     {"warp_size", g.warp_size},
                     {"driver_version", g.driver_version}};
}

std::vector<GpuInfo> detect_nvidia_gpus(std::string* why_none, const std::string& libcuda) {
  std::string lib = libcuda;
  if (lib.empty()) {
    const char* e = std::getenv("VB_LIBCUDA");
    lib = (e && *e) ? e : "libcuda.so.1";
  }
  // dlerror() is process-global; serialize so concurrent detections report their own error.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ::dlerror();
  // RTLD_NODELETE: the driver is never unloaded (unloading libcuda at exit is not supported).
  void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char* err = ::dlerror();
    set_why(why_none, fmt::format("no GPU: {} not found ({})", lib, err ? err : "dlopen failed"));
    return {};
  }
  auto sym = [h](const char* name) { return ::dlsym(h, name); };
  auto cuInit = reinterpret_cast<PFN_cuInit>(sym("cuInit"));
  auto cuDriverGetVersion = reinterpret_cast<PFN_cuDriverGetVersion>(sym("cuDriverGetVersion"));
  auto cuDeviceGetCount = reinterpret_cast<PFN_cuDeviceGetCount>(sym("cuDeviceGetCount"));
  auto cuDeviceGet = reinterpret_cast<PFN_cuDeviceGet>(sym("cuDeviceGet"));
  auto cuDeviceGetName = reinterpret_cast<PFN_cuDeviceGetName>(sym("cuDeviceGetName"));
  auto cuDeviceGetAttribute =
      reinterpret_cast<PFN_cuDeviceGetAttribute>(sym("cuDeviceGetAttribute"));
  auto cuDeviceTotalMem = reinterpret_cast<PFN_cuDeviceTotalMem>(sym("cuDeviceTotalMem_v2"));
  auto cuDeviceGetUuid = reinterpret_cast<PFN_cuDeviceGetUuid>(sym("cuDeviceGetUuid_v2"));
  if (!cuDeviceGetUuid)
    cuDeviceGetUuid = reinterpret_cast<PFN_cuDeviceGetUuid>(sym("cuDeviceGetUuid"));
  auto cuGetErrorName = reinterpret_cast<PFN_cuGetErrorName>(sym("cuGetErrorName"));
  if (!cuInit || !cuDeviceGetCount || !cuDeviceGet || !cuDeviceGetName || !cuDeviceGetAttribute) {
    set_why(why_none, fmt::format("no GPU: {} lacks the CUDA driver entry points (cuInit, "
                                  "cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, "
                                  "cuDeviceGetAttribute)",
                                  lib));
    return {};
  }
  auto error_text = [&](CUresult r) {
    const char* name = nullptr;
    if (cuGetErrorName && cuGetErrorName(r, &name) == kCudaSuccess && name)
      return fmt::format("{} ({})", name, r);
    return fmt::format("{} ({})", fallback_error_name(r), r);
  };

  if (const CUresult r = cuInit(0); r != kCudaSuccess) {
    set_why(why_none, "no GPU: cuInit failed: " + error_text(r));
    return {};
  }
  int driver = 0;
  if (cuDriverGetVersion) cuDriverGetVersion(&driver);
  int count = 0;
  if (const CUresult r = cuDeviceGetCount(&count); r != kCudaSuccess) {
    set_why(why_none, "no GPU: cuDeviceGetCount failed: " + error_text(r));
    return {};
  }
  if (count <= 0) {
    set_why(why_none, "no GPU: the CUDA driver reports 0 devices");
    return {};
  }

  std::vector<GpuInfo> gpus;
  std::string skipped;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (const CUresult r = cuDeviceGet(&dev, i); r != kCudaSuccess) {
      skipped += fmt::format("; device {}: cuDeviceGet failed: {}", i, error_text(r));
      continue;
    }
    GpuInfo g;
    g.ordinal = i;
    g.driver_version = driver;
    char name[256] = {};
    if (const CUresult r = cuDeviceGetName(name, sizeof name - 1, dev); r != kCudaSuccess) {
      skipped += fmt::format("; device {}: cuDeviceGetName failed: {}", i, error_text(r));
      continue;
    }
    g.name = name;
    auto attr = [&](int a) {
      int v = 0;
      return cuDeviceGetAttribute(&v, a, dev) == kCudaSuccess ? v : 0;
    };
    g.cc_major = attr(kComputeCapabilityMajor);
    g.cc_minor = attr(kComputeCapabilityMinor);
    if (g.cc_major <= 0) {
      skipped += fmt::format("; device {} ({}): no compute capability", i, g.name);
      continue;
    }
    g.sm_count = attr(kMultiprocessorCount);
    g.l2_bytes = static_cast<std::size_t>(attr(kL2CacheSize));
    g.smem_per_sm_bytes = attr(kMaxSharedMemoryPerMultiprocessor);
    g.smem_per_block_bytes = attr(kMaxSharedMemoryPerBlock);
    g.smem_per_block_optin_bytes = attr(kMaxSharedMemoryPerBlockOptin);
    g.clock_khz = attr(kClockRate);
    g.mem_clock_khz = attr(kMemoryClockRate);
    g.mem_bus_width_bits = attr(kGlobalMemoryBusWidth);
    g.max_threads_per_sm = attr(kMaxThreadsPerMultiprocessor);
    g.max_threads_per_block = attr(kMaxThreadsPerBlock);
    g.max_blocks_per_sm = attr(kMaxBlocksPerMultiprocessor);
    g.regs_per_sm = attr(kMaxRegistersPerMultiprocessor);
    g.regs_per_block = attr(kMaxRegistersPerBlock);
    g.warp_size = attr(kWarpSize);
    g.pci_bus_id = fmt::format("{:04x}:{:02x}:{:02x}.0", attr(kPciDomainId), attr(kPciBusId),
                               attr(kPciDeviceId));
    if (cuDeviceTotalMem) {
      std::size_t bytes = 0;
      if (cuDeviceTotalMem(&bytes, dev) == kCudaSuccess) g.total_mem_bytes = bytes;
    }
    if (cuDeviceGetUuid) {
      CUuuid u{};
      if (cuDeviceGetUuid(&u, dev) == kCudaSuccess) {
        std::string s = "GPU-";
        for (int b = 0; b < 16; ++b) {
          if (b == 4 || b == 6 || b == 8 || b == 10) s += '-';
          s += fmt::format("{:02x}", u.bytes[b]);
        }
        g.uuid = s;
      }
    }
    gpus.push_back(std::move(g));
  }
  if (gpus.empty())
    set_why(why_none, "no GPU: no device could be queried" + skipped);
  else if (!skipped.empty())
    set_why(why_none, "some devices skipped" + skipped);
  else
    set_why(why_none, "");
  return gpus;
}

std::string gpu_machine_id(const GpuInfo& g) {
  const std::string key = fmt::format("{}|{}.{}|{}|{}|{}|{}|{}|{}", g.name, g.cc_major, g.cc_minor,
                                      g.sm_count, g.total_mem_bytes, g.l2_bytes,
                                      g.mem_bus_width_bits, g.clock_khz, g.mem_clock_khz);
  return fmt::format("gpu-{:016x}", fnv1a(key));
}

}  // namespace vb
