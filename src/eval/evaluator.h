// The evaluator (DESIGN §4): builds a candidate, runs it in the isolated runner through the
// five correctness stages with every guard, times it, and places it on the local roofline.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/dtype.h"
#include "kernels/kernel_type.h"
#include "targets/ceilings.h"
#include "targets/roofline.h"

namespace vb {

/// Knobs of one evaluation. Defaults are the full protocol.
struct EvalOptions {
  std::uint64_t seed = 42;       ///< the default seed (DESIGN §2)
  std::uint64_t fresh_seed = 0;  ///< 0 = derive a new one from the clock (reported)
  bool quick = false;            ///< fewer sizes per stage and a shorter timing window
  bool timing = true;            ///< run the timing protocol after correctness
  /// false: skip the five correctness stages and only time (ranking studies of variants that
  /// were validated in an earlier evaluation). The verdict is then UNVERIFIED, never PASS.
  bool correctness = true;
  std::vector<DType> dtypes{DType::F16, DType::BF16, DType::F32};  ///< correctness dtypes
  DType timing_dtype = DType::F32;                                 ///< dtype of the timed problem
  std::optional<Size> timing_size;  ///< default: KernelType::benchmark_size(backend)
  double call_timeout_s = 30;       ///< wall-clock limit of one correctness call
  double min_time_s = 0.5;          ///< timing: minimum timed duration
  double max_time_s = 4.0;          ///< timing: stop after this long
  int min_reps = 10;                ///< timing: minimum timed calls
  std::size_t llc_bytes = 0;        ///< rotation target; 0 = detect (2x last-level cache)
  std::size_t max_rotation_bytes = 3ull << 30;  ///< cap on the rotating buffer sets
  /// Ceilings for % of peak; when absent the backend's device's measured ceilings are used
  /// (Device::local_ceilings: the CPU's, or a GPU's from the GPU ceilings probe).
  std::optional<Ceilings> ceilings;
  /// Run the runner under the backend's sanitizer (Backend::sanitizer(), e.g. compute-sanitizer
  /// for cuda) with this tool ("memcheck", ...); its findings fail the candidate with guard
  /// "sanitizer"; timing is skipped. "" = off. A backend without a sanitizer throws.
  std::string sanitizer;
  /// Launcher for the runner (RunnerClient::set_launcher): e.g. qemu-aarch64 and its options for
  /// a cross-built candidate; empty runs the host runner directly.
  std::vector<std::string> runner_launcher;
  /// The runner binary the launcher executes (a cross-built vladbud-runner); used only with
  /// runner_launcher.
  std::string runner_binary;
  /// A lock file shared by the evaluators that measure on one device at once (the worker
  /// pool's GPU workers set it through VB_DEVICE_LOCK, see measure.cpp): while the runner
  /// executes kernels (each correctness call; each timing command, a stepped one from its first
  /// message to its last) the evaluator holds an exclusive flock(2) on it, so evaluators sharing
  /// a GPU overlap only their host work (input generation, the fp64 oracle, output checks) and
  /// no kernel of another one runs while timed calls do. Empty: no lock (the device is ours).
  /// A path that cannot be opened makes evaluate() throw std::runtime_error naming it.
  std::string device_lock;
  /// Progress lines ("[2/5 shape sweep] 256x4096 fp16"); may be empty.
  std::function<void(const std::string&)> progress;
};

/// One of the five stages (or "build"/"load"/"timing").
struct StageResult {
  std::string name;          ///< "smoke", "shape_sweep", "stability", "determinism", "edge"
  std::string status;        ///< "PASS", "FAIL", "SKIP" (with reason), "NOT RUN", "INCONCLUSIVE"
  int cases = 0;             ///< cases run
  double max_rel_error = 0;  ///< worst global relative error seen
  std::string detail;        ///< failure reason or skip reason
};

/// Timing and roofline of the benchmark problem.
struct TimingResult {
  std::string size_label;
  DType dtype = DType::F32;
  double median_us = 0, p10_us = 0, p90_us = 0;
  double noise = 0;  ///< median absolute deviation / median
  int reps = 0;
  int rotation_sets = 0;
  double rotation_bytes = 0;
  double flops = 0, bytes = 0;
  double parent_wall_s = 0;  ///< the parent's clock around the timed command
  double timed_sum_s = 0;    ///< sum of the runner's per-call times
  RooflinePoint roofline;
  std::string ceiling_source;  ///< e.g. "measured 2026-11-30 (cpu ceilings probe)"
  /// 1-minute load average when timing started (informational: it includes our own work).
  double load_average = 0;
  /// Most other runnable tasks seen just before a timing batch (sampled while our own threads
  /// were idle); >= 1 means other work competed for the cores and the latency is suspect.
  int other_runnable = 0;
};

/// Verdict of an evaluation.
struct EvalReport {
  std::string kernel;
  std::string backend;
  std::filesystem::path source;
  /// "PASS", "FAIL", "TIMEOUT", "CRASH" or "INVALID" (throughput above the ceiling or a
  /// failed timing cross-check); "UNVERIFIED" when timed with correctness = false;
  /// "INCONCLUSIVE" when every conclusive case passed but an emulating device could not decide
  /// some (Device::may_be_inconclusive, e.g. bf16 arithmetic in Triton's interpreter; guard
  /// "inconclusive"; the stage's status is "INCONCLUSIVE" too). Never counted as correct.
  std::string verdict = "PASS";
  std::string failed_stage, failed_size, failed_dtype, reason;
  /// The guard or check that fired: poisoned_output, guard_band, input_mutation, fresh_inputs,
  /// output_dtype_shape, async_write, kernel_error, accuracy, nan_inf_pattern, determinism,
  /// timeout, crash, build, load, timer_cross_check, above_ceiling; memory (gpu_memory on a
  /// GPU device, Device::oom_guard: device allocation failed / over budget), sanitizer (the
  /// backend's sanitizer's findings) and ceilings (no device ceilings to place the result on).
  std::string guard;
  BuildResult build;
  std::vector<StageResult> stages;
  std::optional<TimingResult> timing;
  std::uint64_t seed = 42, fresh_seed = 0;
  double seconds = 0;  ///< wall time of the whole evaluation
  /// PyTorch's median latency (us) on the same problem, device and protocol, when the caller
  /// timed it (`vladbud bench` / `vladbud run` through the bridge); speedup = this / ours.
  std::optional<double> pytorch_us;
  std::string pytorch_op;  ///< what PyTorch ran ("torch.mm", "F.rms_norm", ...)
  /// Weaknesses of this evaluation that do not change the verdict but that the reader must
  /// know, e.g. the runner could not be given a private file system (issue 18 class 5).
  std::vector<std::string> warnings;

  /// The kernel passed the correctness stages: PASS, or INVALID (a timing guard fired after the
  /// stages passed). An INVALID under --timing-only (stages SKIP) is not "correct": nothing was
  /// checked.
  bool correct() const {
    return verdict == "PASS" ||
           (verdict == "INVALID" && !stages.empty() && stages.front().status == "PASS");
  }
};

/// Every problem evaluate(type, backend, source, opts) may call the kernel with: each stage's
/// cases under `opts` (dtypes, --quick; none when opts.correctness is false) and, when it
/// times, the timing problem; and the smoke size in the timing dtype (bench's in-use check);
/// duplicates
/// included. What a backend whose libraries are specialized per problem
/// (Backend::needs_build_problems) is built for, before the first case runs.
std::vector<Problem> evaluation_problems(const KernelType& type, const Backend& backend,
                                         const EvalOptions& opts);

/// Evaluates `source` as a kernel of type `type` on backend `backend`. Never throws for a bad
/// candidate (that is a verdict); throws std::runtime_error only for harness problems (runner
/// binary missing, out of memory for the arena).
EvalReport evaluate(const KernelType& type, const Backend& backend,
                    const std::filesystem::path& source, const EvalOptions& opts);

/// Drops cached oracle outputs (tests use it to bound memory).
void clear_oracle_cache();

}  // namespace vb
