#include "backends/triton/triton_device.h"

#include <stdexcept>

#include "backends/triton/toolchain.h"
#include "targets/cpu_info.h"

namespace vb {

namespace {

class TritonInterpreterDevice final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::Host; }
  std::string name() const override { return "Triton interpreter"; }
  std::string targets_label() const override { return "Triton (interpreted on the CPU)"; }
  std::string torch_device() const override { return "cpu"; }

  std::string unavailable() const override { return triton_toolchain().error; }

  std::string local_target_id() const override { return "local-triton-interpreter"; }
  std::string local_name() const override {
    const auto& tc = triton_toolchain();
    if (!tc.error.empty()) return tc.error;
    return "Triton " + tc.version + " interpreter on " + detect_cpu().model;
  }
  // An emulator is no spec DB target.
  std::string local_spec_id() const override { return ""; }

  std::size_t timing_cache_bytes(std::size_t) const override { return detect_cpu().llc_bytes; }
  std::string timing_cache_name() const override { return "LLC"; }

  Ceilings local_ceilings(bool, const DeviceProgress&) const override {
    throw std::runtime_error(
        "the Triton interpreter has no ceilings: it emulates a GPU on the CPU (correctness "
        "only); rank Triton kernels for a GPU with `vladbud rank TYPE --backend triton "
        "--targets <id>`");
  }
  Roof model_roof(DType) const override {
    throw std::runtime_error("the Triton interpreter has no roofline (it is an emulator)");
  }

  // The interpreter checks no hardware limit (the GPU targets' are checked by their rung 1).
  DeviceLimits limits() const override { return {}; }
  runner::Flavour runner_flavour() const override { return runner::Flavour::Host; }
  std::string oom_guard() const override { return "memory"; }

  RunnerProgram runner_program() const override {
    const auto& tc = triton_toolchain();
    return {{tc.python}, triton_runner_script().string(), tc.reach};
  }
  bool emulated() const override { return true; }
  std::string timing_unavailable() const override {
    return "the Triton interpreter only checks correctness (ladder rung 2) and is never timed, "
           "so candidates cannot be compared here: optimizing a Triton kernel needs an NVIDIA or "
           "AMD GPU (on an NVIDIA GPU the triton backend builds ahead-of-time cubins and runs them in "
           "the C++ runner, timed by device events); here, "
           "check a variant's correctness with `vladbud bench --backend triton --kernel TYPE "
           "--source FILE --quick --check-dtypes fp32`, or rank variants for a GPU from the "
           "compile-only rungs with `vladbud rank TYPE --backend triton --variants DIR "
           "--targets ID`";
  }
  // Triton 3.6's interpreter computes on the raw bits of bf16 values (triton_runner.py refuses
  // such operations and reports the case inconclusive); fp16 and fp32 are exact numpy.
  bool may_be_inconclusive(DType dtype) const override { return dtype == DType::BF16; }
};

}  // namespace

const Device& triton_interpreter_device() {
  static const TritonInterpreterDevice d;
  return d;
}

}  // namespace vb
