// The optimization loop (issue 7 item 1) over one kernel folder:
//   proposer -> rung-0 screen -> build + quick checks and timing (the screen) -> the full five
//   stages -> interleaved timing against the current best -> keep or revert.
// Every experiment appends one results.tsv row (DESIGN §7) whose description holds a
// reproduce command. Kept versions go to best/ and history/NNNN_<hash><ext> (and a git commit on
// vladbud/<date>-<model> when the workspace is inside a git repository). The editable source is
// only ever replaced by an atomic rename and always holds the best version between experiments;
// state.json (written atomically) lets a killed run resume where it stopped.
//
// Folder layout: <dir>/problem.json, <dir>/<type><ext> (the one editable source), and written
// here: best/, history/, tried/ (every candidate, content-addressed), state.json; the workspace
// (default: <dir>/../.. when <dir> is in a "kernels" folder, else <dir>) holds results.tsv and
// cache/measurements.jsonl.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "optimize/measure.h"
#include "optimize/params.h"
#include "optimize/problem_file.h"

namespace vb::opt {

class Pool;

/// What one turn of the loop on a folder leaves for the folder's next turn in the same run
/// (the orchestrator re-picks a folder that was given budget while its loop ran): the figures
/// its setup would otherwise measure again. Valid only while the folder is as that turn left
/// it (same best version, same experiment count); the next turn checks that itself.
struct LoopCarry {
  std::string best_hash;    ///< content_hash of the best version when the turn ended
  int experiments = 0;      ///< the folder's experiment count then (state.json "experiments")
  double screen_us = 0;     ///< the screens' reference then: the best's quick latency, us
  double experiment_s = 0;  ///< mean wall time per judged experiment of that turn, seconds
                            ///< (its setup's screen time when it judged none)
};

/// Knobs of one optimize_kernel call.
struct OptimizeOptions {
  double budget_s = 1800;           ///< wall-clock budget of this call, seconds
  std::string proposer = "search";  ///< "search" or "agent"
  std::string agent_cmd;            ///< --agent-cmd (agent proposer)
  double agent_timeout_s = 900;
  std::uint64_t seed = 1;
  int plateau_k = 0;         ///< stop after K experiments without a keep (0 = never)
  double ceiling_pct = 90;   ///< stop when the best reaches this % of its ceiling (0 = never)
  int max_experiments = 0;   ///< stop after this many experiments in this call (0 = no limit)
  int rounds = 3;            ///< interleaved ABBA rounds per side before a keep
  /// The most rounds per side one comparison may take: while decide_keep says more rounds
  /// could still keep the candidate (KeepDecision::more_rounds), `rounds` more are timed.
  /// 0 = 4 x rounds within [12, 60] (the signed-rank test needs 9 won pairs at strictness 1).
  int max_rounds = 0;
  double strictness = 1.0;   ///< multiplier of the noise threshold, divisor of the rank test's level
  std::filesystem::path workspace;  ///< empty = derived from the folder (see above)
  bool git = true;                  ///< commit kept versions when inside a git repository
  /// The ladder's rung-0 static screen (issue 4), run after the built-in one. May be empty.
  Pruner extra_pruner;
  /// Measurer to use; nullptr = the evaluator (tests pass synthetic ones), or the pool's.
  Measurer* measurer = nullptr;
  /// The worker pool (optimize/pool.h, --workers / --scheduler): with no `measurer`, the
  /// measurements run as its tasks on the workers owning the folder's device. nullptr = today's
  /// loop in this process.
  Pool* pool = nullptr;
  /// The window: candidates in flight at once. Each is proposed, built and screened ahead
  /// (Measurer::prefetch) as soon as it joins; the oldest is judged as soon as its screen is
  /// back, in proposal order, against the current best by the same keep rule, then the next
  /// joins; so the decisions do not depend on how many workers did the work. A candidate
  /// joins only when the budget left covers its wait. 1 = one candidate at a time (today's
  /// loop). 0 = the default: with `pool` (and no `measurer`), default_batch() (the measurement
  /// slots of the folder's device + 1), else 1.
  int batch = 0;
  /// Times PyTorch on the folder's problem (same shapes, dtype, device; see
  /// time_pytorch_baseline in measure.h) when problem.json has no "pytorch_us" yet: the loop
  /// stores "pytorch_us" and "pytorch_op" in problem.json (atomically) before the first
  /// experiment, and every results.tsv row then carries speedup_vs_pytorch. Returns nullopt
  /// with `*why` set when PyTorch cannot be timed (the rows say n/a). Empty: never (the
  /// default; tests with synthetic measurers leave it so).
  std::function<std::optional<double>(const KernelProblem&, std::string* op, std::string* why)>
      pytorch_baseline;
  /// Live status lines ("01_softmax: exp 37 | kept 3 | best 1.23x | 12m04s left").
  std::function<void(const std::string&)> progress;
  /// Evaluator progress lines (verbose); may be empty.
  std::function<void(const std::string&)> eval_progress;
  /// Polled between phases; true = stop now (Ctrl-C). nullptr = never.
  const std::atomic<bool>* stop = nullptr;
  /// The previous turn's KernelSummary::carry for this folder in the same run (the
  /// orchestrator's re-pick of a folder given budget while it ran). When the folder is as that
  /// turn left it (same best hash, in best.json too; same experiment count) and no figure is
  /// flagged for a re-check (a baseline timed under contention with nothing kept, a keep
  /// flagged kept_contended), setup takes the best's figures from it and best.json instead of
  /// measuring the best again; otherwise (and with nullopt, a new run) it measures as before.
  std::optional<LoopCarry> carry;
};

/// Where one kernel stands (also the orchestrator's per-kernel record).
struct KernelSummary {
  std::string dir, kernel;
  int experiments = 0, kept = 0, pruned = 0, since_keep = 0;
  int experiments_run = 0;  ///< experiments done in this call (the others were resumed)
  int lost = 0;  ///< experiments of this call recorded as lost (a pool task that never came back)
  double baseline_us = 0;  ///< the starting source's quick latency (the starter)
  double best_us = 0;      ///< the best version's latency when it was kept (interleaved median)
  /// Speedup over the starter: the product of the kept versions' interleaved gains (each
  /// best/candidate ratio measured back to back), robust to load drift between keeps.
  double speedup_vs_starter = 1.0;
  double pct_peak = 0;     ///< the best version's % of its roofline ceiling
  double seconds = 0;      ///< time spent in this call
  std::string stop_reason;  ///< "budget", "plateau", "ceiling", "exhausted", "max_experiments",
                            ///< "interrupted"
  /// For the folder's next turn in the same run (OptimizeOptions::carry).
  LoopCarry carry;
  /// True when this call's setup took the best's figures from OptimizeOptions::carry instead
  /// of measuring the best again.
  bool carried = false;
  double speedup() const { return speedup_vs_starter; }
};

/// Optimizes the kernel folder `dir`. Resumes from state.json when present. Throws
/// std::runtime_error (naming the problem and the fix) for a bad folder: missing, no
/// problem.json, no or several editable sources, a starting source that fails the quick checks.
KernelSummary optimize_kernel(const std::filesystem::path& dir, const OptimizeOptions& opts);

/// Times PyTorch at the folder's problem once (opts.pytorch_baseline, when set and problem.json
/// has no "pytorch_us" yet) and stores "pytorch_us"/"pytorch_op" in problem.json atomically;
/// a failure is said through opts.progress and leaves the column n/a. Returns the folder's
/// problem as it now is. Throws std::runtime_error for a bad problem.json. The loop calls it
/// before its first experiment; the orchestrator calls it for every folder before it runs
/// several at once, so that no PyTorch timing shares the device with another folder's work.
KernelProblem store_pytorch_baseline(const std::filesystem::path& dir, const OptimizeOptions& opts);

/// The one editable source of a kernel folder for `backend` (the single file with the backend's
/// extension directly in `dir`). Throws std::runtime_error naming the folder when there is none
/// or more than one.
std::filesystem::path editable_source(const std::filesystem::path& dir, const std::string& backend);

/// Refuses folders whose kernels cannot be timed here: for each of `dirs` whose problem.json
/// names a registered backend whose device is never timed (Device::timing_unavailable, e.g.
/// the Triton interpreter), throws std::runtime_error "cannot optimize DIR (backend B): <why,
/// naming the hardware that would time it>". Folders with an unreadable problem.json or an
/// unknown backend are left to their own loop's error. The loop and the orchestrator call it
/// before timing anything (a test's own Measurer brings its own times and skips it).
void require_timed_devices(const std::vector<std::filesystem::path>& dirs);

/// The workspace of a kernel folder: <dir>/../.. when <dir>'s parent is named "kernels", else
/// <dir> itself.
std::filesystem::path default_workspace(const std::filesystem::path& dir);

/// Reads <dir>/state.json (empty object when absent or unreadable).
nlohmann::json read_kernel_state(const std::filesystem::path& dir);

/// Parses a budget: "90s", "30m", "1h", "1h30m", "45" (seconds). Throws std::invalid_argument
/// with the accepted forms for anything else, a non-positive value or more than a week (168h,
/// which also catches numbers too large for a double).
double parse_budget(const std::string& text);

/// The warning for a budget written as a bare number below 60 ("3": three seconds, where a
/// user may have meant minutes; a new user's `--budget 3` ran 0 experiments):
/// "warning: --budget 3 is 3 seconds (a bare number is seconds); for minutes write 3m". ""
/// for a budget with a unit ("3s", "3m"), a bare number of 60 or more, or text parse_budget
/// refuses. Never throws.
std::string budget_warning(const std::string& text);

/// Commits `files` (paths inside the repository) on branch `branch` of the git repository
/// holding `dir`, without touching the user's checkout or index (plumbing with a temporary
/// index). Returns the commit id, or "" when `dir` is not inside a git repository or git fails
/// (`error` then says why).
std::string git_commit_files(const std::filesystem::path& dir, const std::string& branch,
                             const std::vector<std::filesystem::path>& files,
                             const std::string& message, std::string* error = nullptr);

}  // namespace vb::opt
