// `vladbud run`: every kernel type on every local target, as one table (issue 2: the local
// CPU; later issues add GPUs and remote targets from the ladder).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/evaluator.h"

namespace vb {

/// One target's results.
struct TargetResults {
  std::string id;       ///< "local-cpu"
  std::string name;     ///< e.g. "Intel(R) Xeon(R) Processor"
  std::string backend;  ///< "cpu"
  std::string spec_id;  ///< spec database id of the target ("" when derived / not in the DB)
  bool local = true;
  int rung = 5;  ///< confidence-ladder rung of the results (5 = measured on this hardware)
  Ceilings ceilings;
  std::vector<EvalReport> kernels;
};

/// Evaluates the starter of each kernel type in `types` on the local CPU.
/// `on_done` (may be empty) is called after each kernel with its index and report (it may add
/// to the report, e.g. the PyTorch latency).
TargetResults run_local_cpu(const std::vector<const KernelType*>& types, const EvalOptions& opts,
                            const std::function<void(std::size_t, EvalReport&)>& on_done);

/// Evaluates the CUDA starter (kernels/cuda/<type>.cu) of each kernel type on the first local
/// NVIDIA GPU, as target "local-gpu0" at rung 5 with that GPU's measured ceilings. A missing
/// starter is that kernel's build failure. Returns nullopt when there is no usable GPU and
/// writes the reason ("no GPU: libcuda.so.1 not found ...") to `why_none`.
std::optional<TargetResults> run_local_gpu(
    const std::vector<const KernelType*>& types, const EvalOptions& opts,
    const std::function<void(std::size_t, EvalReport&)>& on_done, std::string* why_none);

/// The kernel x (accuracy, stability, determinism, performance, % of ceiling, bound) table as
/// aligned text (markdown = false) or a Markdown table (markdown = true).
std::string format_run_table(const std::vector<TargetResults>& targets, bool markdown);

/// {"targets": [{"id", "name", "backend", "local", "rung", "ceilings", "kernels": [{"kernel",
/// "correctness", "stages", "latency_us", "pct_peak", ...}]}]}
nlohmann::json run_to_json(const std::vector<TargetResults>& targets);

/// Ceilings as JSON (bandwidth GB/s, TFLOP/s per dtype, when and how measured).
nlohmann::json ceilings_summary_json(const Ceilings& c);

}  // namespace vb
