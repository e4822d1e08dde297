// The orchestrator (issue 7 item 4): `vladbud optimize` over every workspace/kernels/* folder.
// It picks the kernel with the largest expected end-to-end gain (Amdahl), runs the loop on it
// until it plateaus (no keep in K experiments), reaches the ceiling (>= 90 % of its roofline)
// or spends its own budget, then moves on. State: workspace/orchestration.json (atomic).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "optimize/loop.h"

namespace vb::opt {

/// One kernel as the orchestrator sees it.
struct KernelEntry {
  std::string dir;     ///< folder name under workspace/kernels ("01_softmax")
  std::string kernel;  ///< kernel type
  double time_share = 0;  ///< share of model time (problem.json)
  double baseline_us = 0, best_us = 0, pct_peak = 0;
  double speedup_x = 1.0;  ///< achieved speedup over the starter (KernelSummary::speedup)
  int experiments = 0, kept = 0;
  double budget_s = 0, spent_s = 0;  ///< this invocation's per-kernel budget and use
  /// "pending", "active", "running" (one of several folders optimized at once), "plateau",
  /// "ceiling", "budget" (its own budget spent, or the run's ended during its turn), "exhausted",
  /// "interrupted" (a stop request ended its turn), "error". A later invocation tries a folder
  /// in "budget", "interrupted" or "error" again (load_entries); "plateau", "ceiling" and
  /// "exhausted" stay finished.
  std::string status = "pending";
  std::string reason;
  /// best_us / baseline_us was timed while other work competed for the cores (its folder's
  /// best/best.json: best_figure_contended / baseline_figure_contended, bridge/pipeline.h):
  /// not trustworthy, the folder's next run re-measures it. Marked "*" where it is shown.
  bool best_contended = false, baseline_contended = false;
  double speedup() const { return speedup_x; }
};

/// Expected end-to-end gain of working on `e`, as a fraction of the original model time:
/// its current share (time_share / achieved speedup) times its headroom to the target
/// fraction of its ceiling, max(0, 1 - pct_peak / ceiling_pct) (1 when not yet measured).
double expected_gain(const KernelEntry& e, double ceiling_pct = 90);

/// Index of the next kernel to optimize: the largest expected gain among pending/active
/// entries with budget left (ties: lower index); nullopt when none is left.
std::optional<std::size_t> choose_next(const std::vector<KernelEntry>& entries,
                                       double ceiling_pct = 90);

/// Amdahl: the model's speedup when each kernel's share is divided by its achieved speedup.
double amdahl_speedup(const std::vector<KernelEntry>& entries);

/// What amdahl_speedup's figure `x` is, in the words `vladbud optimize`, `status` and
/// `autotune` print: "1.154x model-level speedup implied by the optimizer's keeps over the
/// starter kernels (Amdahl over each folder's speedup over its starter; not a comparison with
/// PyTorch: `vladbud verify` measures that)". (Printed as "expected end-to-end" it read as
/// contradicting verify's measured speedup vs eager PyTorch.)
std::string amdahl_statement(double x);

/// The footnote for figures marked "*" (KernelEntry::best_contended, baseline_contended): "*
/// timed while other work competed for the cores: not trustworthy; the next run re-measures
/// it", without a newline.
std::string contended_footnote();

/// Sets `e`'s best_contended and baseline_contended from kernel folder `folder`'s
/// best/best.json (best_figure_contended, baseline_figure_contended). Never throws.
void read_contention(KernelEntry& e, const std::filesystem::path& folder);

/// Per-kernel budgets: half of `total_s` split evenly, half by time share. During a run, a
/// folder that finishes early (plateau, ceiling, exhausted, error) passes its unspent budget to
/// the folders not finished yet, in proportion to their budgets (run_orchestrator).
void assign_budgets(std::vector<KernelEntry>& entries, double total_s);

/// Kernel folders of the workspace (workspace/kernels/* holding problem.json), merged with
/// workspace/orchestration.json and each folder's state.json. Throws std::runtime_error naming
/// the folder when workspace/kernels is missing or empty.
std::vector<KernelEntry> load_entries(const std::filesystem::path& workspace);

/// Knobs of an orchestrated run.
struct OrchestratorOptions {
  double budget_s = 1800;
  int plateau_k = 20;
  double ceiling_pct = 90;
  OptimizeOptions loop;  ///< proposer, seed, measurer, progress, stop... (budget ignored)
  /// Kernel folders optimized at once (with a worker pool: while one folder's loop waits for a
  /// device, another's candidates build). The next folder to start is still the largest
  /// expected gain (Amdahl order) and the whole run stays within `budget_s` of wall time; each
  /// folder's budget is its share of budget_s x min(parallel, folders). 1 = one at a time
  /// (today's). Each folder's loop runs in its own thread; the measurer must then be
  /// thread-safe (the pool's is; loop.measurer must be nullptr or thread-safe).
  int parallel = 1;
};

/// A folder's loop has ended: its summary `s` into its entry `e` (spent time, figures, status
/// and reason). Status by the loop's stop reason: "plateau", "ceiling", "exhausted",
/// "interrupted"; "budget" for "max_experiments" (the --max-experiments cap); for "budget": "budget" with "the run's budget ended during its turn" when
/// `cut_by_run` (its loop was given the run's remaining time, less than its own), "active"
/// (picked again, its next turn starting from this one's KernelSummary::carry rather than
/// measuring its best again) when other folders passed it >= 1 s (`given_s`) it has not spent, else
/// "budget" ("spent its N s budget", or its last seconds would not cover another experiment).
void record_loop_end(KernelEntry& e, const KernelSummary& s, const OrchestratorOptions& o,
                     bool cut_by_run, double given_s);

/// Runs the orchestrator; returns the final orchestration.json content. A folder picked again
/// in the same run (given budget while its loop ran) starts its next turn from what its last
/// turn left (OptimizeOptions::carry): its best is not measured again when nothing changed.
/// A folder the budget
/// never reached (no baseline yet) still gets its starter, and PyTorch at its shape, measured
/// once after the budget is spent (status "budget", reason "the budget ran out before its
/// turn..."), so every folder has a baseline in the report; the stage may thus run past
/// `budget_s` by those measurements. A stop request (loop.stop) skips the folders not started
/// yet (the one being measured finishes its setup).
nlohmann::json run_orchestrator(const std::filesystem::path& workspace,
                                const OrchestratorOptions& opts);

/// orchestration.json content of `entries`: per kernel its figures, budgets, status and reason,
/// and "best_contended" / "baseline_contended" (KernelEntry), plus the run's totals and
/// "amdahl_speedup".
nlohmann::json orchestration_json(const std::vector<KernelEntry>& entries, double budget_s,
                                  double spent_s, const std::string& current);

/// `vladbud status` text: one line per kernel plus the totals and the Amdahl estimate
/// (amdahl_statement); a best or starter figure timed under contention is marked "*" with
/// contended_footnote below the table. The
/// figures come from each folder's state.json, the status, reason and budgets from the last
/// run's orchestration.json. Throws std::runtime_error naming the fix (`vladbud extract`, or
/// another --workspace) when the workspace or its kernels/ folder is missing or holds no kernel
/// folder.
std::string format_status(const std::filesystem::path& workspace);

/// `vladbud status --json`: orchestration_json over the same entries as format_status (the last
/// run's status, reason, budget_s and spent_s per folder; the run's budget_s, spent_s, current
/// and updated_at, null when no run wrote orchestration.json), plus that file itself under
/// "orchestration". Throws as format_status.
nlohmann::json status_json(const std::filesystem::path& workspace);

}  // namespace vb::opt
