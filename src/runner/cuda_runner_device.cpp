// The runner's CUDA device: one device twin of the whole arena (so the parent's guard bands
// exist in device memory too), staged in and out around each call; kernels launch on the
// runner's stream with a device event pair around each launch, and the runner synchronizes and
// checks for asynchronous faults after every launch. The driver calls are CudaDevice's
// (cuda_device.h: libcuda loaded at run time).
#include <algorithm>

#include "runner/cuda_device.h"
#include "runner/device.h"

namespace vb::runner {

namespace {

class CudaRunnerDevice final : public RunnerDevice {
 public:
  explicit CudaRunnerDevice(std::size_t gpu_budget) : gpu_budget_(gpu_budget) {}

  bool separate_memory() const override { return true; }
  std::string open() override { return dev_.open(); }
  nlohmann::json describe() const override {
    return {{"name", dev_.name()},
            {"l2_bytes", dev_.l2_bytes()},
            {"total_mem_bytes", dev_.total_mem_bytes()},
            {"cc_major", dev_.cc_major()},
            {"cc_minor", dev_.cc_minor()}};
  }

  // Opens the device (once) and replaces the device twin of the arena.
  nlohmann::json map(char*, std::size_t size, std::string* fault) override {
    if (auto e = dev_.open(); !e.empty()) return {{"ok", false}, {"error", e}};
    if (mirror_) {
      if (auto e = dev_.release(mirror_); !e.empty()) {
        *fault = e;
        return {{"ok", false}, {"error", e}};
      }
      mirror_ = 0;
    }
    if (auto e = dev_.alloc(size, &mirror_); !e.empty())
      return {{"ok", false},
              {"guard", memory_guard()},
              {"error", "cannot allocate " + std::to_string(size >> 20) +
                            " MiB of device memory for the buffers: " + e}};
    // The L2 flush buffer (flush_caches), once: the runner's own memory, not the kernel's.
    if (!scratch_ && dev_.l2_bytes() > 0) {
      if (auto e = dev_.alloc(2 * dev_.l2_bytes(), &scratch_); !e.empty()) {
        scratch_ = 0;
        return {{"ok", false},
                {"guard", memory_guard()},
                {"error", "cannot allocate the L2 flush buffer: " + e}};
      }
    }
    std::size_t total = 0;
    dev_.mem_info(&free_after_map_, &total);
    return {{"ok", true}};
  }
  bool mapped() const override { return mirror_ != 0; }

  DLDevice dl_device() const override { return DLDevice{kDLCUDA, 0}; }
  void* data(std::size_t off) const override { return reinterpret_cast<void*>(mirror_ + off); }
  void* stream() const override { return dev_.stream(); }

  std::string fill(std::size_t off, unsigned value, int elem_bytes, std::size_t count) override {
    return dev_.fill(mirror_ + off, value, elem_bytes, count);
  }
  std::string to_device(std::size_t off, const void* src, std::size_t bytes) override {
    return dev_.to_device(mirror_ + off, src, bytes);
  }
  std::string to_host(void* dst, std::size_t off, std::size_t bytes) override {
    return dev_.to_host(dst, mirror_ + off, bytes);
  }
  std::string synchronize() override { return dev_.synchronize(); }

  std::string flush_caches() override {
    dev_.reset_persisting_l2();
    if (!scratch_) return "";
    // Twice the L2 of fresh writes evicts every normal line of the data the call will read.
    return dev_.fill(scratch_, ++flush_value_, 4, 2 * dev_.l2_bytes() / 4);
  }
  std::string start_timing() override { return dev_.record_start(); }
  // Waits for the end event, then for the whole context: a failure here is the candidate's
  // asynchronous fault.
  std::string finish_timing(Clock::time_point t0, long long* ns, double* host_ns) override {
    float ms = 0;
    std::string e = dev_.record_end();
    if (e.empty()) e = dev_.finish_timed(&ms);
    const auto t1 = Clock::now();
    if (!e.empty()) return e;
    *host_ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    *ns = std::max<long long>(1, static_cast<long long>(static_cast<double>(ms) * 1e6));
    return "";
  }

  std::string over_budget() override {
    std::size_t free_now = 0, total = 0;
    if (dev_.mem_info(&free_now, &total).empty() && free_after_map_ > free_now &&
        free_after_map_ - free_now > gpu_budget_)
      return "the kernel holds " + std::to_string((free_after_map_ - free_now) >> 20) +
             " MiB of device memory beyond the runner's buffers (budget " +
             std::to_string(gpu_budget_ >> 20) +
             " MiB): kernels must not allocate large workspaces";
    return "";
  }
  std::string fault_name() const override { return "CUDA fault"; }
  std::string memory_guard() const override { return "gpu_memory"; }

 private:
  CudaDevice dev_;
  DevPtr mirror_ = 0;                ///< device twin of the arena (same offsets)
  DevPtr scratch_ = 0;               ///< 2 x L2 bytes overwritten by flush_caches()
  unsigned flush_value_ = 0;
  std::size_t gpu_budget_;           ///< device memory the candidate may use on its own
  std::size_t free_after_map_ = 0;   ///< cuMemGetInfo free bytes right after the mirror
};

}  // namespace

std::unique_ptr<RunnerDevice> make_cuda_device(std::size_t gpu_budget) {
  return std::make_unique<CudaRunnerDevice>(gpu_budget);
}

}  // namespace vb::runner
