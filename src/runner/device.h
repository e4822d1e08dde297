// The runner's device interface (DESIGN §4; cf. Kernel Tuner's device-level backend methods):
// what the runner's call path needs from the place a kernel runs. The call path in
// runner_main.cpp is written once over it; the flavour (runner::Flavour, argv "--backend") picks
// the implementation once at start-up: host_device.cpp (the kernel works on the arena itself,
// timed by the host clock) or cuda_runner_device.cpp (a device twin of the arena, staged in and
// out around each call, timed by device events).
//
// Addresses are arena offsets: a device with separate memory keeps a twin of the whole arena
// at the same offsets, so the parent's guard bands exist on the device too.
#pragma once

#include <dlpack/dlpack.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "runner/protocol.h"

namespace vb::runner {

/// The device a runner executes kernels on. Methods returning std::string return "" on success
/// or the error; an error of a staging, timing or synchronization method is the candidate's
/// fault (sticky: the runner reports it for every later call).
class RunnerDevice {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~RunnerDevice() = default;

  /// True when kernels see a twin of the arena in separate memory, which the runner stages in
  /// (bands, inputs, poisoned outputs) and out (everything back) around each call.
  virtual bool separate_memory() const = 0;
  /// Readies the device before the candidate library is loaded (cuda: the primary context is
  /// made current, so the library's statically linked runtime shares it).
  virtual std::string open() = 0;
  /// The "device" object of the "load" reply ({name, l2_bytes, ...}), or null when none.
  virtual nlohmann::json describe() const = 0;
  /// Gives the arena (`arena`, `size` bytes, just mapped) its device side, replacing an earlier
  /// one. Returns the reply: {"ok":true}, or {"ok":false, "error", "guard"} when memory runs out.
  /// A fault while releasing the old twin is written to `fault` (the reply then is ignored).
  virtual nlohmann::json map(char* arena, std::size_t size, std::string* fault) = 0;
  /// True when calls can run (the arena has its device side).
  virtual bool mapped() const = 0;

  /// The DLDevice of the tensors the kernel gets.
  virtual DLDevice dl_device() const = 0;
  /// The data pointer the kernel gets for arena offset `off`.
  virtual void* data(std::size_t off) const = 0;
  /// The `stream` argument of vb_kernel_run (nullptr on the host).
  virtual void* stream() const = 0;

  /// Fills `count` elements of 1, 2 or 4 bytes at offset `off` with `value`.
  virtual std::string fill(std::size_t off, unsigned value, int elem_bytes, std::size_t count) = 0;
  /// Copies `bytes` from host memory `src` to offset `off` (no-op without separate memory).
  virtual std::string to_device(std::size_t off, const void* src, std::size_t bytes) = 0;
  /// Copies `bytes` at offset `off` to host memory `dst` (no-op without separate memory).
  virtual std::string to_host(void* dst, std::size_t off, std::size_t bytes) = 0;
  /// Waits for all work issued so far; "" or its asynchronous error.
  virtual std::string synchronize() = 0;

  /// Empties the device's caches of the data a timed call will read, before that call (DESIGN
  /// §4: no timed call runs from a cache the previous work warmed). cuda: resets persisting-L2
  /// lines, the persisting set-aside and the stream's access-policy window, then overwrites a
  /// scratch buffer of twice the L2. The host: nothing (the parent writes a revealed set with
  /// non-temporal stores, which leave no line of it in any cache).
  virtual std::string flush_caches() = 0;

  /// Starts timing one call (before the launch).
  virtual std::string start_timing() = 0;
  /// Ends timing the call started at host time `t0` (after vb_kernel_run returned): `*ns` is the
  /// call's time (device events, at least 1 ns; or the host clock), `*host_ns` the host clock's.
  virtual std::string finish_timing(Clock::time_point t0, long long* ns, double* host_ns) = 0;

  /// The device memory the kernel holds beyond the runner's buffers, when over the budget:
  /// the error message; "" otherwise (always "" on the host, where RLIMIT_AS applies).
  virtual std::string over_budget() = 0;
  /// The name of the device's faults in messages ("CUDA fault").
  virtual std::string fault_name() const = 0;
  /// The guard of a memory failure on this device ("memory", "gpu_memory").
  virtual std::string memory_guard() const = 0;
};

/// The device of a flavour: Host (host_device.cpp) or Cuda (cuda_runner_device.cpp, with
/// `gpu_budget` bytes of device memory the candidate may hold beyond its buffers).
std::unique_ptr<RunnerDevice> make_runner_device(Flavour flavour, std::size_t gpu_budget);

/// The host device (the kernel works on the arena).
std::unique_ptr<RunnerDevice> make_host_device();
/// The CUDA device (device 0 through the driver loaded at run time).
std::unique_ptr<RunnerDevice> make_cuda_device(std::size_t gpu_budget);

}  // namespace vb::runner
