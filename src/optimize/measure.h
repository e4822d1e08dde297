// How the optimizer measures a candidate: an interface (tests drive the loop with synthetic
// timings) and its one real implementation over the evaluator (src/eval/evaluator.h). This is
// the only file that knows EvalOptions.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <vector>

#include "optimize/decision.h"
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
  /// Most other runnable tasks the evaluator saw just before its timing batches
  /// (TimingResult::other_runnable): >= 1 means other work competed for the cores and the
  /// latency is suspect (0 for measurers that do not know).
  int other_runnable = 0;
  double pct_peak = 0, tflops = 0, gbs = 0;
  /// The size label the timing ran at: the problem's, or a reduced screen's
  /// (Measurer::screen_label()); "" when not timed or not known (synthetic measurers).
  std::string size_label;
  double seconds = 0;  ///< wall time of the evaluation
  /// The candidate's build came from the build cache (a pool's build worker built it ahead, or
  /// an earlier evaluation did); build_seconds is the compile time when it did not (0 if it did).
  bool build_cached = false;
  double build_seconds = 0;
  bool correct() const { return verdict == "PASS"; }
  /// True when the measurement never came back (a pool's worker died every time it ran it, or
  /// it hung past the task timeout): verdict "LOST", `reason` says why. Never cached.
  bool lost() const { return verdict == "LOST"; }
  /// True when the optimizer gave up waiting for it because its budget ran out (verdict
  /// "CANCELLED", a pool measurer with a deadline): no results.tsv row, never cached.
  bool cancelled() const { return verdict == "CANCELLED"; }
};

/// Interleaved ABBA rounds of the best version (A) and a candidate (B) on one device.
struct Interleaved {
  std::vector<TimingSample> best, cand;  ///< one sample per round and side (decide_keep's input)
  Measurement last_cand;                 ///< the candidate's last round (pct_peak, TFLOP/s, GB/s)
  std::string error;  ///< non-empty when a side failed a round ("the candidate failed ...")
  bool lost = false;  ///< the comparison never came back (pool); `error` says why
  bool cancelled = false;  ///< given up at the deadline (Measurer::set_deadline); no decision
};

/// A Measurement as JSON (the measurement cache's and the pool protocol's form) and back.
nlohmann::json measurement_to_json(const Measurement& m);
Measurement measurement_from_json(const nlohmann::json& j);
/// An Interleaved as JSON ({"best": [[us, noise, reps, other_runnable]...], "cand": [...],
/// "last_cand": {...}, "error": "..."}) and back (a 3-element sample reads other_runnable 0).
nlohmann::json interleaved_to_json(const Interleaved& r);
Interleaved interleaved_from_json(const nlohmann::json& j);

/// Measures a source file of the folder's kernel problem.
class Measurer {
 public:
  virtual ~Measurer() = default;
  virtual Measurement measure(const std::filesystem::path& source, EvalMode mode) = 0;
  /// A one-line description of where measurements come from ("evaluator on local-cpu ...").
  virtual std::string target() const = 0;
  /// `rounds` interleaved rounds (TimingOnly), stopping at the first side that fails. Round i
  /// of the comparison is `first_round + i`: an even round times A (the best) then B, an odd one
  /// B then A. Rounds added later (the loop's more rounds) pass the count already timed, so the
  /// alternation continues and each side goes first in half the pairs (within one): a side
  /// timed second more often would carry any order effect (warm caches, clock ramp) into the
  /// decision. Default: over measure() in this process; a pool runs the whole comparison as
  /// one task on one device.
  virtual Interleaved interleave(const std::filesystem::path& best,
                                 const std::filesystem::path& cand, int rounds, int first_round);
  /// Starts work on `sources` ahead of the measure(source, mode) calls that will ask for it (a
  /// pool builds them on any worker and queues the measurements on its device's workers);
  /// measure() then answers from it. Default: nothing (measure() does the work when called).
  virtual void prefetch(const std::vector<std::filesystem::path>& sources, EvalMode mode) {
    (void)sources;
    (void)mode;
  }
  /// Builds `sources` ahead (a pool: on any worker, into the build cache) without measuring
  /// them yet; a later prefetch() or measure() of one of them waits for that build instead of
  /// starting another. Default: nothing (the build happens when it is measured).
  virtual void prebuild(const std::vector<std::filesystem::path>& sources) { (void)sources; }
  /// Extra text for the measurement cache's keys (e.g. the pool's device resource, so that
  /// results from one device never answer for another); default "".
  virtual std::string cache_scope() const { return ""; }
  /// The optimizer's budget ends at `deadline` (steady clock): a measurer whose work waits in
  /// a queue (the pool's) stops waiting then and answers verdict "CANCELLED" (interleave():
  /// `cancelled`), so that a run overshoots its budget by at most the task running at that
  /// moment. Default: ignored (the evaluator runs in this process, one phase at a time).
  virtual void set_deadline(std::chrono::steady_clock::time_point deadline) { (void)deadline; }
  /// The size label EvalMode::Quick screens time at when it is smaller than the problem's
  /// (screen_size_for()); "" (the default): screens run at the problem's size. The loop then
  /// measures its baseline and best with EvalMode::TimingOnly at the problem's size, and
  /// compares screens only with screens.
  virtual std::string screen_label() const { return ""; }
  /// Gives up the work started by prefetch() (and prebuild()) that no measure() collected (the loop stopped
  /// with candidates still in its window): a pool cancels their queued tasks. Default: nothing.
  virtual void discard_prefetched() {}
};

/// The worker side of a pool task (`vladbud optimize --kernel DIR --measure FILE --mode MODE`):
/// mode "quick" / "full" / "timing" -> measurement_to_json of the evaluator's measurement of
/// `file` at the folder's problem; "compare" -> interleaved_to_json of `rounds` rounds against
/// `best`, the first of them round `first_round` (Measurer::interleave); "build" -> {"ok", "seconds", "cached", "diagnostics"} of the backend's build (into
/// the content-addressed build cache). Throws std::invalid_argument for an unknown mode or a
/// compare without `best`, std::runtime_error for a bad folder (problem.json).
nlohmann::json run_measure_task(const std::filesystem::path& dir, const std::filesystem::path& file,
                                const std::string& mode, const std::filesystem::path& best,
                                int rounds, int first_round = 0,
                                std::function<void(const std::string&)> progress = {});

/// The size quick screens of `problem` time: screen_size() of its kernel type under its
/// device's screen_set_bytes() (the problem's own size on a device that sets none, or for an
/// unknown type or backend).
Size screen_size_for(const KernelProblem& problem);

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
