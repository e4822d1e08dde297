// Presenting evaluation results: greppable key: value lines, JSON, and results.tsv rows
// (DESIGN §7).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "eval/evaluator.h"

namespace vb {

/// `key: value` lines (one per line, greppable): kernel, backend, source, build, each stage,
/// correctness, verdict, failed_stage/size/dtype, guard, reason, latency_us, throughput_tflops,
/// bandwidth_gb_s, arithmetic_intensity, ridge_point, bound, pct_peak, ...
std::string format_key_values(const EvalReport& r);

/// The same content as JSON (stable field names, numbers as numbers). A timed report carries
/// "other_runnable_tasks" and "contended" (true when other work competed for the cores while
/// timing: its latency and % of peak are not trustworthy).
nlohmann::json report_to_json(const EvalReport& r);

/// One results.tsv row. Columns (DESIGN §7: AutoKernel's, then VladBud's):
/// experiment, tag, kernel_type, throughput_tflops, latency_us, pct_peak, speedup_vs_pytorch,
/// correctness, peak_vram_mb, description, target, backend, rung, bandwidth_gb_s.
struct ResultsRow {
  std::string tag = "bench";
  std::string kernel_type;
  double throughput_tflops = 0, latency_us = 0, pct_peak = 0;
  std::string speedup_vs_pytorch = "n/a";  ///< not measured on this path yet
  std::string correctness;                 ///< PASS / FAIL / TIMEOUT / CRASH / INVALID
  std::string peak_vram_mb = "n/a";        ///< n/a on the CPU
  std::string description;
  std::string target, backend;
  int rung = 5;  ///< 5 = measured on real hardware here (DESIGN §6)
  double bandwidth_gb_s = 0;
};

/// Builds the row for an evaluation on target `target` with tag `tag`. A timing under
/// contention (TimingResult::other_runnable >= 1) ends its description with "contended=N".
ResultsRow results_row(const EvalReport& r, const std::string& target, const std::string& tag);

/// Appends `row` to the TSV at `path` (header written when the file is new), numbering the
/// experiment from the rows already there. The line is written with one write(2) on an
/// O_APPEND descriptor under flock(2), so concurrent or killed runs never leave a partial or
/// interleaved row. Returns the experiment number. Throws std::runtime_error naming the path
/// when the file cannot be written or its header is not a results.tsv header.
int append_results_row(const std::filesystem::path& path, const ResultsRow& row);

/// The header line (tab-separated column names, no newline).
std::string results_header();

}  // namespace vb
