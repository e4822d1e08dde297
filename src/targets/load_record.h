// The machine's load as a run saw it: the 1-minute load average read from /proc/loadavg at
// moments the run chooses (autotune: its start, each stage boundary, each progress line of its
// optimize stage), for the run's report and its busy-machine warning (contention_warning in
// targets/cpu_info.h).
#pragma once

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace vb {

/// The 1-minute load average (the first field of `path`, /proc/loadavg by default); nullopt
/// when the file cannot be read or its first field is not a finite number >= 0 (no /proc, a
/// damaged line). A quiet machine reads 0.00: that is a figure, not "unknown".
std::optional<double> read_load_average(const std::filesystem::path& path = "/proc/loadavg");

/// The 1-minute load averages one run saw. The average lags: during a run's first `check_from_s`
/// seconds it mostly shows what ran before the run (README's first command followed a setup.sh
/// build that had loaded both cores, and warned about it), so the busy-machine check reads only
/// the samples taken from then on (max_checked); the report gives every figure seen (at_start,
/// max), so a run shorter than that still says what load it saw instead of 0. Thread-safe: the
/// orchestrator's folders report progress from their own threads.
class LoadRecord {
 public:
  /// Throws std::invalid_argument when `check_from_s` is negative or not finite.
  explicit LoadRecord(double check_from_s = 60);

  /// Records `load`, taken `at_s` seconds into the run (a negative `at_s` counts as 0). nullopt,
  /// a negative or a non-finite load is a sample that could not be read: counted in
  /// unreadable(), never taken as 0.
  void add(double at_s, std::optional<double> load);
  /// add(at_s, read_load_average()).
  void sample(double at_s);

  /// Samples with a figure.
  int samples() const;
  /// Samples that could not be read.
  int unreadable() const;
  /// The first figure recorded (the run's start when it samples there first); nullopt when none.
  std::optional<double> at_start() const;
  /// The highest figure recorded; nullopt when none.
  std::optional<double> max() const;
  /// The highest figure recorded at >= check_from_s seconds (what the busy-machine check
  /// reads); nullopt when none was taken that late (a shorter run) or none could be read.
  std::optional<double> max_checked() const;

  /// {"at_start", "max", "max_checked" (numbers, or null when there is none), "check_from_s",
  /// "samples", "checked_samples", "unreadable", "note"}: `note` says in words why a figure is
  /// null ("" when none is).
  nlohmann::json to_json() const;
  /// One line for a run's summary: "load average (1 min): 0.42 at the start, up to 1.10 over 9
  /// samples", and why the busy-machine check had no sample (a run under check_from_s) or
  /// "not sampled (/proc/loadavg could not be read)".
  std::string summary() const;

 private:
  mutable std::mutex mu_;
  double check_from_s_;
  int samples_ = 0, checked_ = 0, unreadable_ = 0;
  std::optional<double> first_, max_, max_checked_;
};

}  // namespace vb
