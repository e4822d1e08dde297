// `vladbud run`: every kernel type on every local target (one per registered backend whose
// device is here), as one table; remote targets come from the ladder.
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

/// Evaluates the starter of each kernel type in `types` (kernels/<backend>/<type><ext>) on the
/// local device of `backend` (Backend::device()), as that device's local target
/// ("local-cpu", "local-gpu0") at rung 5 with its measured ceilings. A missing starter is that
/// kernel's build failure. `on_done` (may be empty) is called after each kernel with its index
/// and report (it may add to the report, e.g. the PyTorch latency). Returns nullopt when this
/// machine has no such device and writes the reason (Device::unavailable, e.g. "no GPU:
/// libcuda.so.1 not found ...") to `why_none`.
std::optional<TargetResults> run_local(
    const Backend& backend, const std::vector<const KernelType*>& types, const EvalOptions& opts,
    const std::function<void(std::size_t, EvalReport&)>& on_done, std::string* why_none);

/// Whether `r` was timed while other work competed for the cores (TimingResult::other_runnable
/// >= 1): its latency, performance, % of ceiling and PyTorch ratio are not trustworthy. False
/// when it was not timed.
bool timed_under_contention(const EvalReport& r);

/// The kernel x (accuracy, stability, determinism, performance, % of ceiling, bound) table as
/// aligned text (markdown = false) or a Markdown table (markdown = true). A row timed under
/// contention (timed_under_contention) has its latency, performance, % of ceiling and vs
/// PyTorch cells marked "*", and the target's table is followed by a footnote saying why.
std::string format_run_table(const std::vector<TargetResults>& targets, bool markdown);

/// The `warning:` line (no newline) naming every row of `targets` timed under contention
/// ("fused_mlp on local-cpu (1 other task)") and the fix: re-run on a quiet machine, or `vladbud
/// bench --kernel K` for one kernel. "" when no row was.
std::string run_contention_warning(const std::vector<TargetResults>& targets);

/// {"targets": [{"id", "name", "backend", "local", "rung", "ceilings", "kernels": [{"kernel",
/// "correctness", "stages", "latency_us", "pct_peak", "other_runnable_tasks", "contended",
/// ...}]}]}, plus "warnings": [run_contention_warning] when a row was timed under contention.
nlohmann::json run_to_json(const std::vector<TargetResults>& targets);

/// Ceilings as JSON (bandwidth GB/s, TFLOP/s per dtype, when and how measured).
nlohmann::json ceilings_summary_json(const Ceilings& c);

}  // namespace vb
