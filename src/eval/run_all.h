// `vladbud run`: every kernel type on every local target, as one table (issue 2: the local
// CPU; later issues add GPUs and remote targets from the ladder).
#pragma once

#include <nlohmann/json.hpp>
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
  Ceilings ceilings;
  std::vector<EvalReport> kernels;
};

/// Evaluates the starter of each kernel type in `types` on the local CPU.
/// `on_done` (may be empty) is called after each kernel with its index and report.
TargetResults run_local_cpu(const std::vector<const KernelType*>& types, const EvalOptions& opts,
                            const std::function<void(std::size_t, const EvalReport&)>& on_done);

/// The kernel x (accuracy, stability, determinism, performance, % of ceiling, bound) table as
/// aligned text (markdown = false) or a Markdown table (markdown = true).
std::string format_run_table(const std::vector<TargetResults>& targets, bool markdown);

/// {"targets": [{"id", "name", "backend", "local", "ceilings", "kernels": [{"kernel",
/// "correctness", "stages", "latency_us", "pct_peak", ...}]}]}
nlohmann::json run_to_json(const std::vector<TargetResults>& targets);

/// Ceilings as JSON (bandwidth GB/s, TFLOP/s per dtype, when and how measured).
nlohmann::json ceilings_summary_json(const Ceilings& c);

}  // namespace vb
