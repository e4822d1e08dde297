// The runner's host device: the kernel works on the shared arena itself (kDLCPU pointers), so
// there is nothing to stage, and the host's steady clock times each call.
#include <cstdint>
#include <cstring>

#include "runner/device.h"

namespace vb::runner {

namespace {

class HostDevice final : public RunnerDevice {
 public:
  bool separate_memory() const override { return false; }
  std::string open() override { return ""; }
  nlohmann::json describe() const override { return nullptr; }
  nlohmann::json map(char* arena, std::size_t, std::string*) override {
    arena_ = arena;
    return {{"ok", true}};
  }
  bool mapped() const override { return true; }

  DLDevice dl_device() const override { return DLDevice{kDLCPU, 0}; }
  void* data(std::size_t off) const override { return arena_ + off; }
  void* stream() const override { return nullptr; }

  std::string fill(std::size_t off, unsigned value, int elem_bytes, std::size_t count) override {
    char* p = arena_ + off;
    if (elem_bytes == 4) {
      const auto v = static_cast<std::uint32_t>(value);
      auto* q = reinterpret_cast<std::uint32_t*>(p);
      for (std::size_t i = 0; i < count; ++i) q[i] = v;
    } else if (elem_bytes == 2) {
      const auto v = static_cast<std::uint16_t>(value);
      auto* q = reinterpret_cast<std::uint16_t*>(p);
      for (std::size_t i = 0; i < count; ++i) q[i] = v;
    } else {
      std::memset(p, static_cast<int>(value & 0xff), count);
    }
    return "";
  }
  // The arena is the kernel's memory: nothing to copy.
  std::string to_device(std::size_t, const void*, std::size_t) override { return ""; }
  std::string to_host(void*, std::size_t, std::size_t) override { return ""; }
  std::string synchronize() override { return ""; }

  std::string flush_caches() override { return ""; }
  std::string start_timing() override { return ""; }
  std::string finish_timing(Clock::time_point t0, long long* ns, double* host_ns) override {
    *ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    *host_ns = static_cast<double>(*ns);
    return "";
  }

  std::string over_budget() override { return ""; }
  std::string fault_name() const override { return "fault"; }
  std::string memory_guard() const override { return "memory"; }

 private:
  char* arena_ = nullptr;
};

}  // namespace

std::unique_ptr<RunnerDevice> make_host_device() {
  return std::make_unique<HostDevice>();
}

}  // namespace vb::runner
