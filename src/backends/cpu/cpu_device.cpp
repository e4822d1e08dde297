// The host CPU device: detection (targets/cpu_info), its spec DB entry, its measured ceilings
// (targets/ceilings, the CPU probe) and its limits.
#include "backends/cpu/cpu_device.h"

#include <algorithm>

#include "targets/cpu_info.h"
#include "targets/spec_db.h"

namespace vb {

namespace {

class CpuDevice final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::Host; }
  std::string name() const override { return "CPU"; }
  std::string targets_label() const override { return "CPU"; }
  std::string torch_device() const override { return "cpu"; }

  std::string local_target_id() const override { return "local-cpu"; }
  std::string local_name() const override { return detect_cpu().model; }
  std::string local_spec_id() const override {
    try {
      if (const TargetSpec* spec = match_cpu(load_spec_db(), detect_cpu())) return spec->id;
    } catch (const std::exception&) {
      // A broken spec database must not stop a local run; the target is then "derived".
    }
    return "";
  }

  std::size_t timing_cache_bytes(std::size_t) const override { return detect_cpu().llc_bytes; }
  std::string timing_cache_name() const override { return "LLC"; }
  /// Half the LLC, at least 8 MiB: a screen's sets then rotate over > 2x the LLC in a few
  /// dozen milliseconds of generation instead of seconds.
  std::size_t screen_set_bytes() const override {
    return std::max<std::size_t>(8ull << 20, detect_cpu().llc_bytes / 2);
  }

  Ceilings local_ceilings(bool recalibrate, const DeviceProgress& progress) const override {
    std::function<void(std::string)> say = [&](std::string m) {
      if (progress) progress(m);
    };
    return recalibrate ? measure_cpu_ceilings(say) : local_cpu_ceilings(false, say);
  }

  // The CPU's measured ceilings (probe cached per machine).
  Roof model_roof(DType dtype) const override {
    const Ceilings c = local_cpu_ceilings();
    Roof roof;
    roof.peak_tflops = c.peak_for(dtype);
    roof.bandwidth_gbs = c.mem_bw_gbs;
    roof.source = "measured on this CPU " + c.measured_at + " (vladbud targets)";
    return roof;
  }

  // Vector width from the ISA: avx512f 64 B, avx2/avx 32 B, sse2/neon 16 B; logical cores.
  DeviceLimits limits() const override {
    const CpuInfo c = detect_cpu();
    DeviceLimits l;
    l.logical_cores = c.logical_cores;
    l.vector_width_bytes = c.has("avx512f")                 ? 64
                           : c.has("avx2") || c.has("avx")  ? 32
                           : c.has("sse2") || c.has("neon") ? 16
                                                            : 0;
    return l;
  }

  runner::Flavour runner_flavour() const override { return runner::Flavour::Host; }
  std::string oom_guard() const override { return "memory"; }
};

}  // namespace

const Device& cpu_device() {
  static const CpuDevice d;
  return d;
}

}  // namespace vb
