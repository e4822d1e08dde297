// Detection of NVIDIA GPUs through the CUDA driver API loaded at run time (DESIGN §5).
//
// libcuda.so.1 is opened with dlopen(3) and its entry points are looked up with dlsym(3); the
// few enum values and typedefs needed are declared here (values from the CUDA Driver API
// reference, `CUdevice_attribute`), so VladBud builds and runs where no CUDA is installed and
// then says "no GPU" plainly.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vb {

/// One NVIDIA GPU as the CUDA driver reports it. A field the driver could not report is 0.
struct GpuInfo {
  int ordinal = 0;                  ///< CUDA device ordinal (0, 1, ...)
  std::string name;                 ///< cuDeviceGetName, e.g. "NVIDIA H200"
  std::string uuid;                 ///< "GPU-xxxxxxxx-xxxx-..." from cuDeviceGetUuid, "" if unknown
  std::string pci_bus_id;           ///< "0000:1b:00.0" (domain:bus:device.0), "" if unknown
  int cc_major = 0;                 ///< compute capability major (9 for Hopper)
  int cc_minor = 0;                 ///< compute capability minor
  int sm_count = 0;                 ///< streaming multiprocessors
  std::size_t total_mem_bytes = 0;  ///< cuDeviceTotalMem_v2
  std::size_t l2_bytes = 0;         ///< L2 cache size in bytes
  int smem_per_sm_bytes = 0;        ///< max shared memory per SM
  int smem_per_block_bytes = 0;     ///< default max shared memory per block (48 KiB)
  int smem_per_block_optin_bytes = 0;  ///< max dynamic shared memory per block after opt-in
  int clock_khz = 0;                   ///< SM clock ("typical", kHz)
  int mem_clock_khz = 0;               ///< peak memory clock, kHz
  int mem_bus_width_bits = 0;          ///< global memory bus width in bits
  int max_threads_per_sm = 0;
  int max_threads_per_block = 0;
  int max_blocks_per_sm = 0;
  int regs_per_sm = 0;     ///< 32-bit registers per SM
  int regs_per_block = 0;  ///< 32-bit registers per block
  int warp_size = 0;
  int driver_version = 0;  ///< cuDriverGetVersion, e.g. 13000 for 13.0

  /// "sm_90" for compute capability 9.0 (no architecture-specific "a" suffix).
  std::string sm_arch() const;
  /// Theoretical DRAM bandwidth in GB/s (1e9 B/s) from the attributes:
  /// 2 (double data rate) x memory clock x bus width / 8, the formula of NVIDIA's
  /// bandwidthTest/deviceQuery samples. 0 when the driver did not report the clock or width.
  double theoretical_mem_bw_gbs() const;
};

/// JSON form of every field plus "sm_arch" and "theoretical_mem_bw_gbs".
void to_json(nlohmann::json& j, const GpuInfo& g);

/// Lists the NVIDIA GPUs through the CUDA driver API, loaded from `libcuda` (default
/// "libcuda.so.1", searched by the dynamic loader; $VB_LIBCUDA overrides the default).
/// Returns an empty vector when there is no usable GPU and, when `why_none` is set, writes the
/// plain reason there: "no GPU: libcuda.so.1 not found (<dlerror>)", "no GPU: cuInit failed:
/// CUDA_ERROR_NO_DEVICE (100)", "no GPU: the CUDA driver reports 0 devices", ... Never throws;
/// a device whose name or compute capability cannot be read is skipped (and the reason noted).
std::vector<GpuInfo> detect_nvidia_gpus(std::string* why_none = nullptr,
                                        const std::string& libcuda = "");

/// A short stable identifier of the GPU model: "gpu-" + FNV-1a 64 (16 hex digits) over name,
/// compute capability, SM count, memory size, L2 size, memory bus width and clocks. Two GPUs of
/// the same model and configuration share it (like machine_id() for CPUs), so cached ceilings
/// are re-measured on another model or configuration, never reused across them.
std::string gpu_machine_id(const GpuInfo& g);

}  // namespace vb
