// `vladbud report` (issue 7 item 5): workspace/report.md (per kernel: baseline, best, speedup vs
// the starter and vs PyTorch when measured, % of ceiling, experiments, keep rate; the Amdahl
// breakdown; the verify result) and workspace/progress.png drawn by python/plot_progress.py
// (matplotlib) from workspace/progress.json.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace vb::opt {

/// The kernel types verify handed over, comma-separated, each served at some shapes only
/// followed by them: "matmul (only at N3072xK768)" (verify.json's kernels_in and
/// shape_selection, python/vladbud/verify.py). "" when nothing is handed over; fields of the
/// wrong type are skipped.
std::string handed_over_list(const nlohmann::json& verify);

/// What write_report produced.
struct ReportFiles {
  std::filesystem::path report_md, progress_json, progress_png;
  bool png_written = false;
  std::string png_note;  ///< why there is no PNG (matplotlib missing, ...) or ""
};

/// Writes the report of workspace `ws` from results.tsv, the kernel folders and (when present)
/// orchestration.json and verify.json. A folder's baseline, best and vs PyTorch figures timed
/// while other work competed for the cores (best/best.json: baseline_figure_contended,
/// best_figure_contended) are marked "*" with a footnote, progress.json carries
/// "baseline_contended" per folder (the plot marks the starter in its title), and the Amdahl
/// line says it is the model-level speedup implied by the keeps over the starters, not a
/// comparison with PyTorch (verify's section gives that). `python` is the interpreter to draw with (empty: the
/// project's .venv/bin/python, else python3). Throws std::runtime_error naming the file when the
/// workspace has no results.tsv.
ReportFiles write_report(const std::filesystem::path& ws, const std::string& python = "");

}  // namespace vb::opt
