// The device interface (DESIGN §1, cf. ggml's ggml_backend_device_i): where a backend's kernels
// run. A Backend is the source language (build, cache key, variants, file extension); its
// Device answers everything about the place the kernel executes: its kind, the local target's
// id and name, the torch device string, the cache the timing rotation must exceed, the measured
// ceilings, the limits a configuration must respect, the runner flavour and the label of an
// out-of-memory failure. Code above this interface asks the device; it never compares backend
// names. Two backends may share one Device (e.g. a future Triton backend runs on the CUDA
// device).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/device_kind.h"
#include "core/dtype.h"
#include "runner/protocol.h"
#include "targets/ceilings.h"

namespace vb {

/// Limits a kernel configuration must respect on a device (from the detected hardware or the
/// programming model). 0 means "unknown / does not apply": no check.
struct DeviceLimits {
  int vector_width_bytes = 0;     ///< widest native vector access (CPU SIMD; CUDA 16 B, LDG.128)
  int logical_cores = 0;          ///< host threads a kernel may use (host devices)
  int max_threads_per_block = 0;  ///< threads of one GPU block (CUDA: 1024)
  long long shared_memory_per_block_bytes = 0;  ///< GPU on-chip memory per block
};

/// Roofline ceilings used to classify the entries of a profiled model: peak TFLOP/s of the
/// profiled dtype, memory bandwidth GB/s, and where they come from.
struct Roof {
  double peak_tflops = 0;
  double bandwidth_gbs = 0;
  std::string source;  ///< e.g. "measured on this CPU ...", "datasheet: h200"
  /// The ridge point in FLOP/byte (0 without a bandwidth).
  double ridge() const { return bandwidth_gbs > 0 ? peak_tflops * 1e3 / bandwidth_gbs : 0; }
};

/// Progress callback for slow device work (ceilings probes): one line per call.
using DeviceProgress = std::function<void(const std::string&)>;

/// Where a backend's kernels run (the local device of that kind; the runner uses the first).
class Device {
 public:
  virtual ~Device() = default;

  /// The device's kind: the only thing about it generic code may branch on.
  virtual DeviceKind kind() const = 0;
  /// Short name for messages: "CPU", "GPU".
  virtual std::string name() const = 0;
  /// The spec DB targets of this device's family, as messages name them ("CPU", "NVIDIA").
  virtual std::string targets_label() const = 0;
  /// The PyTorch device string of this device ("cpu", "cuda"): PyTorch baselines of a kernel on
  /// this device, and the model device (--device) whose kernels this device runs.
  virtual std::string torch_device() const = 0;

  /// Why this machine cannot run kernels on this device ("no GPU: libcuda.so.1 not found
  /// (...)"), or "" when it can. Commands that run kernels turn a non-empty answer into a usage
  /// error before building anything. Default: "" (always available).
  virtual std::string unavailable() const { return ""; }

  /// Id of the local target in results and tables: "local-cpu", "local-gpu0" (device 0, the
  /// one the runner opens). Needs no detection.
  virtual std::string local_target_id() const = 0;
  /// The detected local device's model name ("Intel(R) Xeon(R) ...", "NVIDIA H200"), or the
  /// reason none was detected.
  virtual std::string local_name() const = 0;
  /// Spec database id of the local device ("" when it is not in the DB, no device is detected
  /// or the DB cannot be read: the target is then "derived").
  virtual std::string local_spec_id() const = 0;

  /// Bytes of the cache that timed inputs must not fit in (DESIGN §4: rotate over buffers larger
  /// than the last-level cache). `runner_reported` is the size the runner reported for the
  /// device it opened (0 when it reported none); host devices use the CPU's detected LLC.
  /// 0 when unknown (the caller picks a fallback).
  virtual std::size_t timing_cache_bytes(std::size_t runner_reported) const = 0;
  /// The name of that cache in messages: "LLC", "L2".
  virtual std::string timing_cache_name() const = 0;

  /// This device's measured ceilings from the per-machine cache, measured first when missing or
  /// stale, or re-measured when `recalibrate`. Throws std::runtime_error when there is no
  /// device or the probe cannot be built or run.
  virtual Ceilings local_ceilings(bool recalibrate, const DeviceProgress& progress) const = 0;
  /// The roofline a profiled model's entries are classified against on this device, for the
  /// dtype `dtype`. Throws std::runtime_error when there is no device.
  virtual Roof model_roof(DType dtype) const = 0;

  /// Limits of this device a kernel configuration must respect (the optimizer's screen).
  virtual DeviceLimits limits() const = 0;
  /// How the runner executes kernels on this device.
  virtual runner::Flavour runner_flavour() const = 0;
  /// The guard name of an out-of-memory failure on this device ("memory", "gpu_memory").
  virtual std::string oom_guard() const = 0;

  // ---- optional hooks (defaults: a real device run by the C++ runner) ----

  /// The program the runner client starts instead of vladbud-runner, as RunnerClient's launcher
  /// (RunnerClient::set_launcher): `launcher` (launcher[0] an absolute path, e.g. a Python
  /// interpreter) runs `program` (e.g. a runner script) with "--backend <flavour>". Both empty
  /// (default): the C++ runner is executed directly.
  /// `reachable`: directories the launcher needs to read as the sandbox uid (its installation;
  /// RunnerClient::set_reachable).
  struct RunnerProgram {
    std::vector<std::string> launcher;
    std::string program;
    std::vector<std::string> reachable;
  };
  virtual RunnerProgram runner_program() const { return {}; }
  /// True when kernels run under an emulator of the device (e.g. Triton's interpreter on the
  /// CPU): results are correctness only (ladder rung 2), never a measurement of the device, so
  /// the evaluator does not time them and `vladbud run` does not list the device as a local
  /// target. Default false.
  virtual bool emulated() const { return false; }
  /// Why kernels on this device cannot be timed (so the optimizer cannot compare candidates
  /// here), naming what would time them, or "" when they can. Default: "" for a real device;
  /// for an emulated() one a generic sentence (an emulator should say what hardware it stands
  /// for).
  virtual std::string timing_unavailable() const {
    return emulated() ? name() + " is an emulator: it checks correctness only and is never timed"
                      : "";
  }
  /// True when the emulator may report a correctness case of problem dtype `dtype` as
  /// inconclusive (runner guard "inconclusive": it cannot compute that case faithfully, e.g.
  /// bf16 arithmetic in Triton's interpreter). A case is inconclusive only when this says so;
  /// for any other dtype such a reply is a FAIL. Default false.
  virtual bool may_be_inconclusive(DType /*dtype*/) const { return false; }
  /// Bytes of one rotating set (inputs plus outputs) above which the optimizer's quick screen
  /// times a reduced size of the problem (screen_size() in kernels/kernel_type.h); 0 (the
  /// default): screens run at the problem's size. Worth it where generating and verifying
  /// large sets costs far more than the calls (a CPU), not where the screen's fidelity to the
  /// full grid matters more (a GPU's wave quantization).
  virtual std::size_t screen_set_bytes() const { return 0; }
  /// Host cores a timed call keeps busy, for the evaluator's contention check
  /// (competing_tasks() in targets/cpu_info.h): 0 (the default) means all of them (a CPU
  /// kernel's OpenMP team), so any other runnable task competes; a GPU device's call needs one
  /// host thread to launch and wait, so other tasks compete only once no core is left idle.
  virtual int timing_host_threads() const { return 0; }
};

}  // namespace vb
