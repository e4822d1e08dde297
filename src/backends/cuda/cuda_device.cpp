// The NVIDIA GPU device: detection through the driver loaded at run time
// (targets/nvidia_detect), its spec DB entry, its measured ceilings (the GPU probe) and the
// CUDA programming model's limits.
#include "backends/cuda/cuda_device.h"

#include <stdexcept>

#include "backends/cuda/gpu_ceilings.h"
#include "targets/nvidia_detect.h"
#include "targets/spec_db.h"

namespace vb {

namespace {

class CudaDevice final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::Gpu; }
  std::string name() const override { return "GPU"; }
  std::string targets_label() const override { return "NVIDIA"; }
  std::string torch_device() const override { return "cuda"; }

  // The runner opens device 0 through the driver; without a driver or a device nothing runs.
  std::string unavailable() const override {
    std::string why;
    if (!detect_nvidia_gpus(&why).empty()) return "";
    return why.empty() ? std::string("no CUDA device found") : why;
  }

  std::string local_target_id() const override { return "local-gpu0"; }
  std::string local_name() const override {
    std::string why;
    const auto gpus = detect_nvidia_gpus(&why);
    return gpus.empty() ? why : gpus.front().name;
  }
  std::string local_spec_id() const override {
    const auto gpus = detect_nvidia_gpus(nullptr);
    if (gpus.empty()) return "";
    const GpuInfo& g = gpus.front();
    try {
      if (const TargetSpec* spec =
              match_nvidia_device(load_spec_db(), g.name, g.cc_major, g.cc_minor))
        return spec->id;
    } catch (const std::exception&) {
      // A broken spec database must not stop a local run; the target is then "derived".
    }
    return "";
  }

  // The L2 of the device the runner opened (its "load" reply).
  std::size_t timing_cache_bytes(std::size_t runner_reported) const override {
    return runner_reported;
  }
  std::string timing_cache_name() const override { return "L2"; }

  // Measured by the GPU probe (built with nvcc for the GPU) and cached per GPU.
  Ceilings local_ceilings(bool recalibrate, const DeviceProgress& progress) const override {
    std::string why;
    const auto gpus = detect_nvidia_gpus(&why);
    if (gpus.empty()) throw std::runtime_error("GPU ceilings: " + why);
    return local_gpu_ceilings(gpus.front(), recalibrate, [&](std::string m) {
      if (progress) progress(m);
    });
  }

  // The detected GPU's spec-database entry (or its spec derived from the device attributes).
  Roof model_roof(DType dtype) const override {
    std::string why;
    const auto gpus = detect_nvidia_gpus(&why);
    if (gpus.empty()) throw std::runtime_error("--device cuda: no NVIDIA GPU detected (" + why + ")");
    const auto db = load_spec_db();
    const TargetSpec spec = resolve_nvidia_device(db, device_attributes(gpus[0]));
    Roof roof;
    roof.peak_tflops = spec.peak_for(dtype).value_or(0);
    roof.bandwidth_gbs = spec.memory_bandwidth_gbs;
    roof.source = (spec.derived ? "derived from device attributes: " : "datasheet: ") + spec.id;
    return roof;
  }

  // CUDA: 1024 threads per block; the widest global load/store per thread is 16 bytes
  // (ld.global.v4.b32, LDG.128; PTX ISA), whatever the host CPU's SIMD width.
  DeviceLimits limits() const override {
    DeviceLimits l;
    l.vector_width_bytes = 16;
    l.max_threads_per_block = 1024;
    return l;
  }

  runner::Flavour runner_flavour() const override { return runner::Flavour::Cuda; }
  /// One host thread launches and waits on the events; the other cores may build.
  int timing_host_threads() const override { return 1; }
  std::string oom_guard() const override { return "gpu_memory"; }
};

}  // namespace

const Device& cuda_device() {
  static const CudaDevice d;
  return d;
}

}  // namespace vb
