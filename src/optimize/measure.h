// How the optimizer measures a candidate: an interface (tests drive the loop with synthetic
// timings) and its one real implementation over the evaluator (src/eval/evaluator.h). This is
// the only file that knows EvalOptions.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "optimize/problem_file.h"

namespace vb::opt {

/// What an evaluation is for.
enum class EvalMode {
  Quick,       ///< the quick screen: a short timing whose outputs are verified (no stages)
  Full,        ///< the five stages in every dtype, all sizes (no timing): required before a keep
  TimingOnly,  ///< one short timing round (interleaved comparisons; stages already passed)
};

/// The parts of an evaluation the optimizer decides on.
struct Measurement {
  std::string verdict = "PASS";  ///< PASS / FAIL / TIMEOUT / CRASH / INVALID
  std::string guard, failed_stage, reason;
  bool timed = false;
  double median_us = 0, noise = 0;  ///< latency and MAD/median of the timed calls
  int reps = 0;
  double pct_peak = 0, tflops = 0, gbs = 0;
  double seconds = 0;  ///< wall time of the evaluation
  bool correct() const { return verdict == "PASS"; }
};

/// Measures a source file of the folder's kernel problem.
class Measurer {
 public:
  virtual ~Measurer() = default;
  virtual Measurement measure(const std::filesystem::path& source, EvalMode mode) = 0;
  /// A one-line description of where measurements come from ("evaluator on local-cpu ...").
  virtual std::string target() const = 0;
};

/// The evaluator at the problem's size and dtype on its backend. Throws std::runtime_error when
/// the backend is not built into this vladbud.
std::unique_ptr<Measurer> make_evaluator_measurer(
    const KernelProblem& problem, std::function<void(const std::string&)> progress = {});

/// PyTorch's median latency (us) on `problem` (its shapes, dtype and resolved attributes; on
/// the CPU for backend "cpu", on the GPU for "cuda"), timed by `python -m vladbud.baseline`
/// (bridge.h pytorch_baseline) with the evaluator's rotation rule: input sets cycled over more
/// than 2x the last-level cache (the CPU's LLC; 64 MiB per side on a GPU, at least the L2 of
/// an H100/H200), the quick protocol (>= 3 reps, >= 0.1 s, <= 1 s). Sets `*op` to the PyTorch
/// call ("torch.mm", ...). Returns nullopt and sets `*why` when the problem cannot be built or
/// PyTorch is unavailable (no .venv/torch: run scripts/setup.sh).
std::optional<double> time_pytorch_baseline(const KernelProblem& problem, std::string* op,
                                            std::string* why);

}  // namespace vb::opt
